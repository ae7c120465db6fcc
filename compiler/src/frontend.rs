//! From a file name to a verified `PrimFunc`: read, parse, bind `-D` dims and tunables
//! (the open ones chosen by [`choose_tunables`]: the tuning cache, else the defaults),
//! verify. Every failure comes back as rendered text, ready for stderr.

use crate::cache::{self, DeviceId};
use crate::diagnostics::SourceFile;
use std::path::Path;
use tlc_ir::specialize::{parse_define, specialize};
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

/// Reads `path` as UTF-8 text. A non-UTF-8 file is reported at its first bad byte.
pub fn read_source(path: &Path) -> Result<SourceFile, UserError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path)
        .map_err(|e| UserError(format!("{name}: error: cannot read file: {e}\n")))?;
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
    let bindings = defines
        .iter()
        .map(|d| parse_define(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(UserError::plain)?;
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
/// allows a lookup, else its default; then the dims are bound. The result has no tuning
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
        match from_cache(func, defines, tuning)? {
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
        // Issue 15, item 4: once `tlc plan` ranks a kernel's configs without a GPU, its
        // first config goes here, between the cache and the defaults.
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
/// stderr about an entry it ignores. The only error: a `TLC_CACHE_DEVICE` that does not
/// parse.
#[allow(clippy::type_complexity)]
fn from_cache(
    func: &PrimFunc,
    defines: &Defines,
    tuning: &Tuning,
) -> Result<Result<(PrimFunc, cache::Hit, cache::Key), String>, UserError> {
    if tuning.target == TuneTarget::None {
        return Ok(Err(
            "this command has no target to key the tuning cache with".into(),
        ));
    }
    if !tuning.cache {
        return Ok(Err("--no-cache".into()));
    }
    let named = match DeviceId::from_env() {
        Some(parsed) => Some(parsed.map_err(UserError::plain)?),
        None => None,
    };
    let mut probed = None;
    let mut gpu = || probed.get_or_insert_with(cache::device::gpu0).clone();
    let no_gpu = |e: String| format!("no GPU to key the tuning cache with: {e}");
    let target = match tuning.target {
        TuneTarget::Given(t) => t,
        _ => match gpu() {
            Ok(info) => match Target::for_capability(info.capability) {
                Some(t) => t,
                None => {
                    let (major, minor) = info.capability;
                    return Ok(Err(format!(
                        "the GPU ({}) has compute capability {major}.{minor}, which tlc does \
                         not target",
                        info.name
                    )));
                }
            },
            Err(e) => return Ok(Err(no_gpu(e))),
        },
    };
    let device = match named {
        Some(d) => d,
        None => match gpu() {
            Ok(info) => DeviceId {
                name: info.name,
                sms: info.sm_count,
            },
            Err(e) => return Ok(Err(no_gpu(e))),
        },
    };
    let store = match cache::Cache::user() {
        Ok(c) => c,
        Err(e) => return Ok(Err(e)),
    };
    let key = cache::Key::new(func, &defines.dims, &device, target);
    let hit = match store.lookup(&key) {
        cache::Lookup::Hit(hit) => hit,
        cache::Lookup::Miss(path) => {
            return Ok(Err(format!(
                "no tuning-cache entry for {}: {}",
                describe_key(&key),
                path.display()
            )))
        }
        cache::Lookup::Ignored { path, reason } => {
            cache::warn_ignored(&path, &reason);
            return Ok(Err(format!(
                "the tuning-cache entry {} is ignored",
                path.display()
            )));
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
            return Ok(Err(format!(
                "the tuning cache's config {} with the -D values: {}",
                describe(&hit.config),
                d.message
            )))
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
        return Ok(Err(format!(
            "the tuning-cache entry {} is ignored",
            hit.path.display()
        )));
    }
    Ok(Ok((bound, hit, key)))
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
