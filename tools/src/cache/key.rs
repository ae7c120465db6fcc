//! The tuning cache's key: what a tuned config depends on. Two compiles share an entry
//! exactly when they agree on all of it.

use super::device::DeviceId;
use super::hash::Fnv1a;
use tlc_ir::tuning::{Config, TuningSpace};
use tlc_ir::{PrimFunc, Target};

/// tlc's version, part of every key: a new release retunes.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Bumped when the key's fields or their encoding change (every old entry then misses).
const SCHEME: &str = "tlc-tuning-key/2";

/// What a cached config is keyed by (docs/cli.md, "Tunables and the tuning cache").
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// The function's name: the entry's file name starts with it.
    pub kernel: String,
    /// The kernel's canonical text without its tuning space, so that editing the
    /// candidates or the constraints keeps the entries while any change to the kernel
    /// itself misses.
    pub text: String,
    /// The symbolic dims bound by `-D`, sorted by name.
    pub dims: Config,
    pub device: DeviceId,
    pub target: Target,
    /// tlc's version ([`VERSION`]).
    pub version: String,
    /// The kernel's tuning space: not part of the key, but what a stored config is checked
    /// against (it must name exactly these tunables and satisfy these constraints).
    pub space: TuningSpace,
}

impl Key {
    /// The key of `func` — the function **as parsed**, before `-D` binds anything (its
    /// tuning space is left out of the key whether present or not) — compiled with the
    /// symbolic dims `dims` bound (`-D`; tunables among them are not part of the key) for
    /// `target` on `device`.
    pub fn new(func: &PrimFunc, dims: &Config, device: &DeviceId, target: Target) -> Key {
        let mut bare = func.clone();
        bare.space = TuningSpace::default();
        let text = tlc_ir::printer::print_func(&bare);
        let dims = dims
            .iter()
            .filter(|(n, _)| !func.space.declares(n))
            .cloned()
            .collect();
        let mut key = Key::from_text(&func.name.name, text, dims, device, target, VERSION);
        key.space = func.space.clone();
        key
    }

    /// A key from its parts (an empty tuning space); `dims` are sorted here.
    pub fn from_text(
        kernel: &str,
        text: String,
        mut dims: Config,
        device: &DeviceId,
        target: Target,
        version: &str,
    ) -> Key {
        dims.sort();
        Key {
            kernel: kernel.to_string(),
            text,
            dims,
            device: device.clone(),
            target,
            version: version.to_string(),
            space: TuningSpace::default(),
        }
    }

    /// FNV-1a of the kernel text alone (recorded in the entry, so that a reader can tell
    /// which of two kernels an entry belongs to).
    pub fn kernel_hash(&self) -> u64 {
        super::hash::fnv1a(self.text.as_bytes())
    }

    /// FNV-1a over every field of the key, each length-prefixed: stable across Rust
    /// versions and platforms (`cache::tests` pins a value).
    pub fn hash(&self) -> u64 {
        let mut h = Fnv1a::default();
        h.field(SCHEME);
        h.field(&self.text);
        h.field(&self.dims_text());
        h.field(&self.device.name);
        h.field(&self.device.sms.to_string());
        h.field(&self.device.driver.to_string());
        h.field(self.target.name());
        h.field(&self.version);
        h.finish()
    }

    /// `M=4096 N=...`, sorted.
    pub fn dims_text(&self) -> String {
        tlc_ir::tuning::describe(&self.dims)
    }

    /// The entry's file name: `KERNEL-HASH.json`.
    pub fn file_name(&self) -> String {
        let name: String = self
            .kernel
            .chars()
            .take(64)
            .map(|c| match c.is_ascii_alphanumeric() || c == '_' {
                true => c,
                false => '_',
            })
            .collect();
        format!("{name}-{:016x}.json", self.hash())
    }
}
