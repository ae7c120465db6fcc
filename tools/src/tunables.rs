//! The tunables `-D` leaves open, chosen before the driver (`tlc::driver`) sees the kernel:
//! from the tuning cache, else from `tlc plan`'s first config, else at their defaults
//! (docs/cli.md, "Tunables and the tuning cache"). This is the only code of tlc that reads
//! the cache or asks GPU 0 for its name to choose a tunable; the driver itself is pure.

use crate::cache::{self, DeviceId};
use std::path::Path;
use tlc::diagnostics::SourceFile;
use tlc::frontend::{self, bind_config, specialize_dims, split_defines, Defines, UserError};
use tlc_ir::tuning::{describe, Config};
use tlc_ir::verifier::FuncInfo;
use tlc_ir::{PrimFunc, Target};

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

/// `defines` with every tunable of `parsed` they leave open bound as [`choose_tunables`]
/// chooses it: what the driver (`tlc::driver::RoadArgs::defines`) takes, so that it binds
/// nothing by itself but the defaults this choice also takes.
pub fn resolve(
    file: &SourceFile,
    parsed: &PrimFunc,
    defines: &[String],
    tuning: &Tuning,
) -> Result<Vec<String>, UserError> {
    let split = split_defines(parsed, defines)?;
    let (_, chosen) = choose(file, parsed, &split, tuning)?;
    let mut all = defines.to_vec();
    all.extend(chosen.iter().map(|(n, v)| format!("{n}={v}")));
    Ok(all)
}

/// Parses, binds `defines` with the open tunables chosen as `tuning` says, and verifies
/// (`tlc::frontend::load` with the open tunables chosen by [`choose_tunables`]).
pub fn load(
    path: &Path,
    defines: &[String],
    tuning: &Tuning,
) -> Result<(SourceFile, PrimFunc, FuncInfo), UserError> {
    let file = frontend::read_source(path)?;
    let parsed = frontend::parse(&file)?;
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
    frontend::finish(file, func)
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
    choose(file, func, defines, tuning).map(|(bound, _)| bound)
}

/// [`choose_tunables`], with the tunables it chose beyond `-D` (none when they take their
/// defaults).
fn choose(
    file: &SourceFile,
    func: &PrimFunc,
    defines: &Defines,
    tuning: &Tuning,
) -> Result<(PrimFunc, Config), UserError> {
    if func.space.is_empty() {
        return Ok((specialize_dims(file, func, &defines.dims)?, Config::new()));
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
                return Ok((bound, cached));
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
                return Ok((bound, chosen));
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
    Ok((bound, Config::new()))
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
    let plan_gpu = tlc::plan::space::Gpu {
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
    let best = tlc::plan::space::best(file, func, &texts, plan_gpu).map_err(no_plan)?;
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
            driver: info.driver_version,
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
