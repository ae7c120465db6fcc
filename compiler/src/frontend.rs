//! From a file name to a verified `PrimFunc`: read, parse, bind `-D` dims and tunables
//! (the open ones chosen by [`choose_tunables`]: the tuning cache, else `tlc plan`'s first config, else the defaults),
//! verify. Every failure comes back as rendered text, ready for stderr.

use crate::cache::{self, DeviceId};
use crate::diagnostics::SourceFile;
use std::path::Path;
use tlc_ir::specialize::{parse_defines, specialize};
use tlc_ir::tuning::{describe, Config};
use tlc_ir::verifier::FuncInfo;
use tlc_ir::{Diagnostic, PrimFunc, Span, Target};

/// A user error, already rendered for the terminal.
#[derive(Debug)]
pub struct UserError(pub String);

impl UserError {
    pub fn plain(message: impl std::fmt::Display) -> UserError {
        UserError(format!("error: {message}\n"))
    }
}

/// The largest kernel source read (64 MiB): far beyond any real kernel, and it keeps a
/// device file or a runaway generator (`tlc check /dev/zero`) from being read forever.
pub const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Reads `path` as UTF-8 text, at most [`MAX_SOURCE_BYTES`]. A non-UTF-8 file is reported
/// at its first bad byte.
pub fn read_source(path: &Path) -> Result<SourceFile, UserError> {
    use std::io::Read as _;
    let name = path.display().to_string();
    let cannot = |e: std::io::Error| UserError(format!("{name}: error: cannot read file: {e}\n"));
    // Read one byte past the cap through `take`, so that neither the file's reported size
    // (0 for `/dev/zero`) nor its real one decides how much is read.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        return Err(UserError(format!(
            "{name}: error: source is larger than {} MiB\n",
            MAX_SOURCE_BYTES >> 20
        )));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SourceFile::new(name, text)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let file = SourceFile::new(name, text);
            // The lossy text has the same bytes up to the first invalid one.
            let diag = Diagnostic::error(Span::new(valid, valid + 1), "file is not valid UTF-8");
            Err(UserError(file.render(&diag)))
        }
    }
}

/// Parses `file` without verifying it.
pub fn parse(file: &SourceFile) -> Result<PrimFunc, UserError> {
    tlc_ir::parse::parse(&file.text).map_err(|diags| UserError(file.render_all(&diags)))
}

/// Parses, binds `defines` (`NAME=VALUE` texts: dims and tunables) with the open tunables
/// chosen as `tuning` says, and verifies; the verifier's facts come back with the function.
pub fn load(
    path: &Path,
    defines: &[String],
    tuning: &Tuning,
) -> Result<(SourceFile, PrimFunc, FuncInfo), UserError> {
    let file = read_source(path)?;
    let parsed = parse(&file)?;
    let (func, info) = prepare(&file, &parsed, defines, tuning)?;
    Ok((file, func, info))
}

/// [`load`] after the parse: bind, verify, thread-sync's barriers, verify.
pub fn prepare(
    file: &SourceFile,
    parsed: &PrimFunc,
    defines: &[String],
    tuning: &Tuning,
) -> Result<(PrimFunc, FuncInfo), UserError> {
    let func = bind(file, parsed, defines, tuning)?;
    verify(file, &func)?;
    let func = sync(file, func)?;
    let info = verify(file, &func)?;
    Ok((func, info))
}

/// TileLang's automatic barriers in per-thread code (`thread-sync`, docs/passes.md): part of
/// what such code means, so every command sees them (the interpreter included).
pub fn sync(file: &SourceFile, func: PrimFunc) -> Result<PrimFunc, UserError> {
    tlc_passes::thread_sync::thread_sync(func).map_err(|diags| UserError(file.render_all(&diags)))
}

/// How a command chooses the tunables `-D` leaves open ([`choose_tunables`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// Look for a tuned config in the tuning cache (`--no-cache` turns it off).
    pub cache: bool,
    /// The target the kernel is compiled for, which the cache key names.
    pub target: TuneTarget,
    /// `-v`: say on stderr where each tunable's value comes from.
    pub verbose: bool,
}

/// The target of a cache key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TuneTarget {
    /// A command that compiles for no target (`check`, `fmt`, `run --interp`): no lookup.
    #[default]
    None,
    /// `--target` (`compile`, `opt`; `run --device` and `bench` when given).
    Given(Target),
    /// The target of GPU 0's compute capability, as `commands::compile::device_target`
    /// picks it (`run --device`, `bench` without `--target`).
    OfGpu,
}

impl Tuning {
    /// Defaults, silently: for `fmt`, and for loads that only read a kernel's parameters.
    pub const DEFAULTS: Tuning = Tuning {
        cache: false,
        target: TuneTarget::None,
        verbose: false,
    };
}

/// `-D` bindings, split by what they name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Defines {
    /// Tunables of the kernel's tuning space.
    pub tunables: Config,
    /// Everything else: symbolic dims (a name that is neither is `specialize`'s error).
    pub dims: Config,
}

/// Parses `-D NAME=VALUE` texts and splits them into tunables of `func` and dims.
pub fn split_defines(func: &PrimFunc, defines: &[String]) -> Result<Defines, UserError> {
    let bindings = parse_defines(defines).map_err(UserError::plain)?;
    let (tunables, dims) = bindings
        .into_iter()
        .partition(|(name, _)| func.space.declares(name));
    Ok(Defines { tunables, dims })
}

/// Applies `-D NAME=VALUE` bindings (symbolic dims and tunables, docs/ir.md "Tuning
/// space"), the tunables they leave open chosen by [`choose_tunables`].
pub fn bind(
    file: &SourceFile,
    func: &PrimFunc,
    defines: &[String],
    tuning: &Tuning,
) -> Result<PrimFunc, UserError> {
    let defines = split_defines(func, defines)?;
    choose_tunables(file, func, &defines, tuning)
}

/// Binds `dims` only (a tuning space stays as written): `fmt` without a tunable in `-D`.
pub fn specialize_dims(
    file: &SourceFile,
    func: &PrimFunc,
    dims: &Config,
) -> Result<PrimFunc, UserError> {
    specialize(func, dims).map_err(|d| UserError(file.render(&d)))
}

/// **The one place that decides the tunables** (docs/cli.md, "Tunables and the tuning
/// cache"), so that every command agrees: each tunable of `func` (as parsed) takes its `-D`
/// value, else the tuning cache's config for (kernel, dims, device, target) when `tuning`
/// allows a lookup, else the first config of `tlc plan`'s ranking for the command's target
/// (every dim bound), else its default; then the dims are bound. The result has no tuning
/// space. With `tuning.verbose`, one line on stderr per source says which tunables came
/// from it.
pub fn choose_tunables(
    file: &SourceFile,
    func: &PrimFunc,
    defines: &Defines,
    tuning: &Tuning,
) -> Result<PrimFunc, UserError> {
    if func.space.is_empty() {
        return specialize_dims(file, func, &defines.dims);
    }
    let given = |n: &str| defines.tunables.iter().any(|(g, _)| g == n);
    let open = func.space.names().any(|n| !given(n));
    let say = |source: &str, config: &Config| {
        if tuning.verbose && !config.is_empty() {
            eprintln!("tlc: tunables {source}: {}", describe(config));
        }
    };
    let mut why_default = String::new();
    if open {
        let mut gpu = GpuFacts::new(tuning)?;
        match from_cache(func, defines, tuning, &mut gpu) {
            Ok((bound, hit, key)) => {
                say("from -D", &defines.tunables);
                let cached: Config = hit.config.into_iter().filter(|(n, _)| !given(n)).collect();
                let source = format!(
                    "from the tuning cache (entry {} for {})",
                    hit.path.display(),
                    describe_key(&key)
                );
                say(&source, &cached);
                return Ok(bound);
            }
            Err(why) => why_default = why,
        }
        match from_plan(file, func, defines, &mut gpu) {
            Ok((bound, planned, place)) => {
                say("from -D", &defines.tunables);
                let chosen: Config = planned.into_iter().filter(|(n, _)| !given(n)).collect();
                say(
                    &format!("from `tlc plan`'s ranking ({place}; {why_default})"),
                    &chosen,
                );
                return Ok(bound);
            }
            Err(why) if why != why_default => why_default = format!("{why_default}; {why}"),
            Err(_) => {}
        }
    }
    let bound = bind_config(func, &defines.tunables, &defines.dims)
        .map_err(|d| UserError(file.render(&d)))?;
    say("from -D", &defines.tunables);
    let defaults: Config = func
        .space
        .default_config()
        .into_iter()
        .filter(|(n, _)| !given(n))
        .collect();
    say(&format!("at their defaults ({why_default})"), &defaults);
    Ok(bound)
}

/// The kernel bound to the tuning cache's config (the `-D` tunables kept), with the entry
/// and its key; or why there is none (the reason `-v` gives for the defaults). Warns on
/// stderr about an entry it ignores.
fn from_cache(
    func: &PrimFunc,
    defines: &Defines,
    tuning: &Tuning,
    gpu: &mut GpuFacts,
) -> Result<(PrimFunc, cache::Hit, cache::Key), String> {
    let target = gpu.target()?;
    if !tuning.cache {
        return Err("--no-cache".into());
    }
    let device = gpu.device()?;
    let store = cache::Cache::user()?;
    let key = cache::Key::new(func, &defines.dims, &device, target);
    let hit = match store.lookup(&key) {
        cache::Lookup::Hit(hit) => hit,
        cache::Lookup::Miss(path) => {
            return Err(format!(
                "no tuning-cache entry for {}: {}",
                describe_key(&key),
                path.display()
            ))
        }
        cache::Lookup::Ignored { path, reason } => {
            cache::warn_ignored(&path, &reason);
            return Err(format!(
                "the tuning-cache entry {} is ignored",
                path.display()
            ));
        }
    };
    // The `-D` tunables win over the entry's.
    let mut config = defines.tunables.clone();
    config.extend(
        hit.config
            .iter()
            .filter(|(n, _)| !defines.tunables.iter().any(|(g, _)| g == n))
            .cloned(),
    );
    let bound = match bind_config(func, &config, &defines.dims) {
        Ok(b) => b,
        Err(d) => {
            return Err(format!(
                "the tuning cache's config {} with the -D values: {}",
                describe(&hit.config),
                d.message
            ))
        }
    };
    if let Err(diags) = tlc_ir::verifier::verify(&bound) {
        // Only the entry's fault when the defaults pass: otherwise the kernel is wrong
        // whatever the config, and the defaults' errors say so.
        let defaults_pass = bind_config(func, &defines.tunables, &defines.dims)
            .is_ok_and(|f| tlc_ir::verifier::verify(&f).is_ok());
        if defaults_pass {
            let first = diags.first().map_or("", |d| d.message.as_str());
            cache::warn_ignored(
                &hit.path,
                &format!("the kernel with its config fails the verifier: {first}"),
            );
        }
        return Err(format!(
            "the tuning-cache entry {} is ignored",
            hit.path.display()
        ));
    }
    Ok((bound, hit, key))
}

/// The kernel bound to the first config of `tlc plan`'s ranking (`plan::space::rank`, the
/// `-D` tunables kept), that config, and what it was ranked for; or why there is none.
fn from_plan(
    file: &SourceFile,
    func: &PrimFunc,
    defines: &Defines,
    gpu: &mut GpuFacts,
) -> Result<(PrimFunc, Config, String), String> {
    let target = gpu.target()?;
    let (sms, whose) = match gpu.device() {
        Ok(d) => (u128::from(d.sms), String::new()),
        Err(_) => (
            u128::try_from(target.desc().sm_count).unwrap_or(1),
            ", the target's usual count".to_string(),
        ),
    };
    let plan_gpu = crate::plan::space::Gpu {
        target,
        sms: std::num::NonZeroU128::new(sms).unwrap_or(std::num::NonZeroU128::MIN),
    };
    let texts: Vec<String> = defines
        .tunables
        .iter()
        .chain(&defines.dims)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let no_plan = |e: UserError| {
        let first = e.0.lines().next().unwrap_or("");
        let message = first.split_once("error: ").map_or(first, |(_, m)| m);
        format!("no plan: {message}")
    };
    // The ranking's first config only: `best` compiles the configs that could be first,
    // not the whole space.
    let best = crate::plan::space::best(file, func, &texts, plan_gpu).map_err(no_plan)?;
    let first = best
        .first
        .ok_or_else(|| format!("no plan: all {} configs are dropped", best.configs))?;
    let bound = bind_config(func, &first.config, &defines.dims)
        .map_err(|d| format!("no plan: its first config: {}", d.message))?;
    let place = format!(
        "first of {} configs ({} compiled) for {target} on {sms} SMs{whose}",
        best.configs, best.compiled
    );
    Ok((bound, first.config, place))
}

/// What choosing tunables knows of the GPU: the command's target, and GPU 0 (or
/// `TLC_CACHE_DEVICE`, which stands in for it), probed once and only when asked.
struct GpuFacts<'t> {
    tuning: &'t Tuning,
    named: Option<DeviceId>,
    probed: Option<Result<tlc_runtime::DeviceInfo, String>>,
}

impl<'t> GpuFacts<'t> {
    /// The only error: a `TLC_CACHE_DEVICE` that does not parse.
    fn new(tuning: &'t Tuning) -> Result<GpuFacts<'t>, UserError> {
        let named = match DeviceId::from_env() {
            Some(parsed) => Some(parsed.map_err(UserError::plain)?),
            None => None,
        };
        Ok(GpuFacts {
            tuning,
            named,
            probed: None,
        })
    }

    fn gpu0(&mut self) -> Result<&tlc_runtime::DeviceInfo, String> {
        self.probed
            .get_or_insert_with(cache::device::gpu0)
            .as_ref()
            .map_err(|e| format!("no GPU to key the tuning cache with: {e}"))
    }

    /// The target the command compiles for.
    fn target(&mut self) -> Result<Target, String> {
        match self.tuning.target {
            TuneTarget::None => {
                Err("this command has no target to key the tuning cache with".into())
            }
            TuneTarget::Given(t) => Ok(t),
            TuneTarget::OfGpu => {
                let info = self.gpu0()?;
                Target::for_capability(info.capability).ok_or_else(|| {
                    let (major, minor) = info.capability;
                    format!(
                        "the GPU ({}) has compute capability {major}.{minor}, which tlc does \
                         not target",
                        info.name
                    )
                })
            }
        }
    }

    /// The device the kernel is for: `TLC_CACHE_DEVICE`, else GPU 0.
    fn device(&mut self) -> Result<DeviceId, String> {
        if let Some(d) = &self.named {
            return Ok(d.clone());
        }
        let info = self.gpu0()?;
        Ok(DeviceId {
            name: info.name.clone(),
            sms: info.sm_count,
        })
    }
}

/// "`gemm` with M=… on DEVICE (N SMs) for TARGET": a cache key, for messages.
fn describe_key(key: &cache::Key) -> String {
    let dims = match key.dims.is_empty() {
        true => "(no dims bound)".to_string(),
        false => format!("with {}", key.dims_text()),
    };
    format!(
        "`{}` {dims} on {} for {}",
        key.kernel,
        key.device,
        key.target.name()
    )
}

/// `func` with the tunables of `config` (the others at their defaults) and the dims bound.
fn bind_config(func: &PrimFunc, config: &Config, dims: &Config) -> Result<PrimFunc, Diagnostic> {
    let func = tlc_ir::tuning::bind(func, config, dims)?;
    specialize(&func, dims)
}

/// Runs the verifier, rendering all its errors.
pub fn verify(file: &SourceFile, func: &PrimFunc) -> Result<FuncInfo, UserError> {
    tlc_ir::verifier::verify(func).map_err(|diags| UserError(file.render_all(&diags)))
}
