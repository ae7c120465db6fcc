//! The tuning cache (docs/cli.md, "Tunables and the tuning cache"): the config `tlc tune`
//! found best for a kernel, kept on disk so that later compiles of the same kernel, at the
//! same dims, for the same GPU and target, take it for the tunables `-D` leaves open.
//!
//! An entry is one small JSON file, `DIR/KERNEL-HASH.json`, named by the [`Key`]'s stable
//! hash and holding the key's inputs, the config, the measured time and the date, so that a
//! user can read and delete entries by hand. `DIR` is `$TLC_CACHE_DIR/tuning`, else
//! `$XDG_CACHE_HOME/tlc/tuning`, else `$HOME/.cache/tlc/tuning`.
//!
//! Safety: [`Cache::store`] writes a temporary file in `DIR` and renames it over the entry,
//! so a reader sees the old entry or the new one, never part of one, however many
//! processes store at once (the last rename wins). [`Cache::lookup`] never fails: an entry
//! it cannot read, parse, or trust (another key's inputs, a config that does not name
//! exactly the kernel's tunables or breaks a constraint) is [`Lookup::Ignored`] with the
//! reason, and [`lookup`] prints that as a warning.
//!
//! For `tlc tune`, storing a winner:
//!
//! ```no_run
//! # fn demo(parsed: &tlc_ir::PrimFunc, gpu: &tlc_runtime::Gpu) -> Result<(), String> {
//! use tlc_tools::cache::{self, DeviceId, Entry, Key};
//! // `parsed`: the function as parsed, before `-D` binds anything.
//! let dims = vec![("M".to_string(), 4096), ("N".to_string(), 4096), ("K".to_string(), 4096)];
//! let key = Key::new(parsed, &dims, &DeviceId::of(gpu), tlc_ir::Target::Sm90a);
//! let config = vec![("block_M".to_string(), 128), ("block_N".to_string(), 128)];
//! let path = cache::store(&key, &Entry { config, time_ms: Some(0.21), tflops: Some(650.0) })?;
//! assert!(cache::lookup(&key).is_some());
//! # let _ = path; Ok(()) }
//! ```

pub mod device;
mod entry;
pub mod hash;
mod key;

pub use device::{DeviceId, DEVICE_ENV};
pub use entry::Entry;
pub use key::{Key, VERSION};

use entry::{check_config, now_utc, Stored};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use tlc_ir::tuning::Config;

/// `TLC_CACHE_DIR`: tlc's cache directory (entries go to its `tuning/`), instead of the
/// XDG one. For tests, and for keeping a project's tuned configs beside it.
pub const DIR_ENV: &str = "TLC_CACHE_DIR";

/// An entry larger than this is not read (entries are a few hundred bytes).
const MAX_ENTRY_BYTES: u64 = 1 << 20;

/// A directory of entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cache {
    dir: PathBuf,
}

/// A usable entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// A value for every tunable, in the kernel's declaration order.
    pub config: Config,
    /// The entry's file.
    pub path: PathBuf,
    pub time_ms: Option<f64>,
    pub tflops: Option<f64>,
    /// When it was stored (UTC).
    pub date: String,
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq)]
pub enum Lookup {
    Hit(Hit),
    /// No entry at this path.
    Miss(PathBuf),
    /// An entry that cannot be used, and why.
    Ignored {
        path: PathBuf,
        reason: String,
    },
}

impl Cache {
    /// The user's cache: `$TLC_CACHE_DIR/tuning`, else `$XDG_CACHE_HOME/tlc/tuning` (an
    /// absolute `XDG_CACHE_HOME` only, as the XDG specification says), else
    /// `$HOME/.cache/tlc/tuning`. `Err` when none of them is set.
    pub fn user() -> Result<Cache, String> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let base = if let Some(dir) = var(DIR_ENV) {
            PathBuf::from(dir)
        } else if let Some(xdg) = var("XDG_CACHE_HOME").filter(|d| Path::new(d).is_absolute()) {
            PathBuf::from(xdg).join("tlc")
        } else if let Some(home) = var("HOME") {
            PathBuf::from(home).join(".cache").join("tlc")
        } else {
            return Err(format!(
                "no cache directory: none of {DIR_ENV}, XDG_CACHE_HOME, HOME is set"
            ));
        };
        Ok(Cache::at(base.join("tuning")))
    }

    /// The entries in `dir` itself.
    pub fn at(dir: impl Into<PathBuf>) -> Cache {
        Cache { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `key`'s entry is (whether or not it exists).
    pub fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(key.file_name())
    }

    /// The entry for `key`, checked: it must record `key`'s inputs, and its config must name
    /// exactly the kernel's tunables and satisfy the constraints (a value need not be a
    /// candidate). Never fails; see [`Lookup`].
    pub fn lookup(&self, key: &Key) -> Lookup {
        let path = self.path(key);
        let ignored = |reason: String| Lookup::Ignored {
            path: path.clone(),
            reason,
        };
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Miss(path),
            Err(e) => return ignored(format!("cannot open it: {e}")),
        };
        let mut bytes = Vec::new();
        if let Err(e) = file.take(MAX_ENTRY_BYTES + 1).read_to_end(&mut bytes) {
            return ignored(format!("cannot read it: {e}"));
        }
        if bytes.len() as u64 > MAX_ENTRY_BYTES {
            return ignored(format!("it is larger than {MAX_ENTRY_BYTES} bytes"));
        }
        let stored: Stored = match serde_json::from_slice(&bytes) {
            Ok(s) => s,
            Err(e) => return ignored(format!("it is not a tuning-cache entry: {e}")),
        };
        match stored.config_for(key) {
            Ok(config) => Lookup::Hit(Hit {
                config,
                path,
                time_ms: stored.time_ms,
                tflops: stored.tflops,
                date: stored.date,
            }),
            Err(reason) => ignored(reason),
        }
    }

    /// Writes `entry` as `key`'s entry (replacing any), atomically: a temporary file in the
    /// same directory, flushed to disk, then renamed over the entry. The config must name
    /// exactly the kernel's tunables and satisfy its constraints. Returns the entry's path.
    pub fn store(&self, key: &Key, entry: &Entry) -> Result<PathBuf, String> {
        let config = check_config(key, &entry.config)
            .map_err(|why| format!("not a config of `{}`: {why}", key.kernel))?;
        let stored = Stored::new(
            key,
            &Entry {
                config,
                ..entry.clone()
            },
            now_utc(),
        );
        let mut text = serde_json::to_string_pretty(&stored)
            .map_err(|e| format!("cannot encode the entry: {e}"))?;
        text.push('\n');
        let dir = &self.dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = self.path(key);
        let fail = |what: &str, e: &dyn std::fmt::Display| {
            format!("cannot {what} {}: {e}", path.display())
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .suffix(".json")
            .tempfile_in(dir)
            .map_err(|e| fail("write a temporary file beside", &e))?;
        tmp.write_all(text.as_bytes())
            .and_then(|()| tmp.as_file().sync_all())
            .map_err(|e| fail("write a temporary file beside", &e))?;
        // The temporary file is removed when this fails (it is dropped).
        tmp.persist(&path).map_err(|e| fail("write", &e.error))?;
        Ok(path)
    }
}

/// [`Cache::store`] in the user's cache.
pub fn store(key: &Key, entry: &Entry) -> Result<PathBuf, String> {
    Cache::user()?.store(key, entry)
}

/// [`Cache::lookup`] in the user's cache: the hit, or `None` (no cache directory, no entry,
/// or an entry ignored — with a warning on stderr).
pub fn lookup(key: &Key) -> Option<Hit> {
    match Cache::user().ok()?.lookup(key) {
        Lookup::Hit(hit) => Some(hit),
        Lookup::Miss(_) => None,
        Lookup::Ignored { path, reason } => {
            warn_ignored(&path, &reason);
            None
        }
    }
}

/// The warning for an entry that cannot be used.
pub fn warn_ignored(path: &Path, reason: &str) {
    eprintln!(
        "tlc: warning: ignoring the tuning-cache entry {}: {reason}",
        path.display()
    );
}

#[cfg(test)]
mod tests;
