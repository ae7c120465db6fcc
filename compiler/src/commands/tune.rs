//! `tlc tune FILE -D M=… -D N=… -D K=…`: times a GEMM kernel's tuning space on GPU 0 and
//! keeps the fastest config in the tuning cache (docs/cli.md, "tlc tune").
//!
//! 1. **Plan** (`plan::space::rank`, no GPU): every config of the space at the bound dims,
//!    bound and run through the target's pipeline; configs the verifier or a pass refuses
//!    (shared memory over the target's limit, …) are dropped with the reason, the rest
//!    ranked by waves. `--top N` keeps the N best-ranked.
//! 2. **Compile** the kept configs to PTX on every core (scoped threads, one config at a
//!    time each), then assemble each with ptxas (`TLC_PTXAS`, else `ptxas` on `PATH` or
//!    under `/usr/local/cuda/bin`) and drop the ones that spill or use more than 255
//!    registers; without ptxas that filter is skipped with a warning.
//! 3. **Time** each survivor as `tlc bench` does (`bench::bench_shape`: random float16
//!    inputs, C checked against cuBLAS in the same process, warm-up runs, median of CUDA
//!    event timings), configs one after another on the same GPU.
//! 4. Print the table sorted by time (TFLOP/s and the ratio to cuBLAS), the wall time of
//!    each phase, and store the fastest config that passed the check in the tuning cache
//!    for (kernel, dims, GPU, target), which `compile` / `run` / `bench` then use.

use crate::cache::{self, DeviceId, Entry, Key};
use crate::cli::Emit;
use crate::commands::bench::{self, BenchArgs};
use crate::commands::compile::{compile_func, device_target};
use crate::frontend::{self, Tuning, UserError};
use crate::plan::space::{self, describe};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tlc_ir::tuning::Config;
use tlc_passes::{Instrumentation, PassContext, Target};
use tlc_runtime::{Cublas, Gpu};

/// What `tlc tune` was asked to do.
pub struct TuneArgs<'a> {
    pub file: &'a Path,
    pub defines: &'a [String],
    pub target: Option<Target>,
    /// Time only the N configs the plan ranks best.
    pub top: Option<usize>,
    pub warmup: usize,
    pub iters: usize,
    pub seed: u64,
    /// `--no-cache`: do not store the winner.
    pub store: bool,
}

/// One config on its way through the phases.
struct Candidate {
    rank: usize,
    config: Config,
    ptx: Result<String, String>,
}

pub fn run(args: &TuneArgs) -> Result<String, UserError> {
    let start = Instant::now();
    let file = frontend::read_source(args.file)?;
    let parsed = frontend::parse(&file)?;
    if parsed.space.is_empty() {
        return Err(UserError::plain(format!(
            "`{}` declares no tuning space: nothing to tune (docs/ir.md, \"Tuning space\")",
            parsed.name.name
        )));
    }
    let gpu = Gpu::new(0).map_err(|e| UserError::plain(format!("`tlc tune` needs a GPU: {e}")))?;
    let target = device_target(&gpu, args.target)?;
    let sms = gpu.sm_count().max(1);
    let plan_gpu = space::Gpu {
        target,
        sms: std::num::NonZeroU128::new(u128::from(sms)).unwrap_or(std::num::NonZeroU128::MIN),
    };
    let ranking = space::rank(&file, &parsed, args.defines, plan_gpu)?;
    let defines = frontend::split_defines(&parsed, args.defines)?;
    let keep = args.top.unwrap_or(usize::MAX).min(ranking.ranked.len());
    let planned_s = start.elapsed().as_secs_f64();

    // Compile on every core.
    let compile_start = Instant::now();
    let mut candidates: Vec<Candidate> = ranking.ranked[..keep]
        .iter()
        .enumerate()
        .map(|(i, r)| Candidate {
            rank: i + 1,
            config: r.config.clone(),
            ptx: Err(String::new()),
        })
        .collect();
    let (file_ref, parsed_ref, dims) = (&file, &parsed, &defines.dims);
    crate::parallel::for_each(&mut candidates, |c| {
        c.ptx = compile_config(file_ref, parsed_ref, &c.config, dims, target, sms);
    });
    let ptxas = find_ptxas();
    let mut notes = Vec::new();
    match &ptxas {
        Some(p) => {
            for c in &mut candidates {
                if let Ok(ptx) = &c.ptx {
                    if let Err(reason) = assemble(p, ptx, target) {
                        c.ptx = Err(reason);
                    }
                }
            }
        }
        None => notes.push(
            "warning: no ptxas found (TLC_PTXAS, PATH, /usr/local/cuda/bin): spills and register \
             counts were not checked"
                .to_string(),
        ),
    }
    let compile_s = compile_start.elapsed().as_secs_f64();

    // Time, one config after another.
    let time_start = Instant::now();
    let blas = Cublas::new(&gpu).map_err(bench::runtime("cannot start cuBLAS".into()))?;
    let bench_args = BenchArgs {
        file: args.file,
        defines: args.defines,
        sweep: None,
        warmup: args.warmup,
        iters: args.iters,
        target: Some(target),
        csv: false,
        specialize: true,
        seed: args.seed,
        tuning: Tuning::DEFAULTS,
    };
    let shape = bench::gemm_shape(&file, &parsed, &defines.dims)?;
    let c_dtype = bench::c_dtype(&file, &parsed)?;
    let mut rows = Vec::new();
    let mut dropped: Vec<(String, String)> = ranking
        .dropped
        .iter()
        .map(|d| (describe(&d.config), d.reason.clone()))
        .collect();
    let timed = candidates.iter().filter(|c| c.ptx.is_ok()).count();
    // Progress on a terminal only: indicatif draws nothing when stderr is not one.
    let progress = indicatif::ProgressBar::new(timed as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "tlc tune: timing {pos}/{len} [{bar:30}] {elapsed} {msg}",
        )
        .map_err(|e| UserError::plain(format!("progress bar: {e}")))?
        .progress_chars("=> "),
    );
    for c in &candidates {
        let ptx = match &c.ptx {
            Ok(p) => p,
            Err(reason) => {
                dropped.push((describe(&c.config), reason.clone()));
                continue;
            }
        };
        progress.set_message(describe(&c.config));
        let kernel = gpu
            .load(ptx)
            .map_err(bench::runtime("cannot load a config on the GPU".into()))?;
        let row = bench::bench_shape(&gpu, &blas, &kernel, shape, c_dtype, &bench_args)?;
        rows.push((c, row));
        progress.inc(1);
    }
    progress.finish_and_clear();
    let time_s = time_start.elapsed().as_secs_f64();
    rows.sort_by(|a, b| a.1.tlc.median_ms.total_cmp(&b.1.tlc.median_ms));

    let mut out = String::new();
    let dims_text = describe(&defines.dims);
    out += &format!(
        "tune `{}` at {dims_text} on {} ({sms} SMs) as {}: {} configs, {} timed (median of {} \
         after {} warm-up runs, checked against cuBLAS)\n",
        parsed.name.name,
        gpu.name(),
        target.name(),
        ranking.ranked.len() + ranking.dropped.len(),
        rows.len(),
        args.iters,
        args.warmup
    );
    out += &format!(
        "{:>4}  {:>4}  {:<64} {:>9} {:>8} {:>9}  check\n",
        "time", "plan", "config", "ms", "TFLOP/s", "vs cuBLAS"
    );
    for (i, (c, row)) in rows.iter().enumerate() {
        out += &format!(
            "{:>4}  {:>4}  {:<64} {:>9.4} {:>8.1} {:>9.3}  {}\n",
            i + 1,
            c.rank,
            describe(&c.config),
            row.tlc.median_ms,
            row.tlc_tflops(),
            row.ratio(),
            if row.err.passes() { "ok" } else { "FAIL" }
        );
    }
    if !dropped.is_empty() {
        out += &format!("dropped ({}):\n", dropped.len());
        for (config, reason) in &dropped {
            let first = reason.lines().next().unwrap_or("");
            out += &format!("  {config}: {first}\n");
        }
    }
    for n in &notes {
        out += &format!("{n}\n");
    }
    out += &format!(
        "{:.2} s in all: plan {planned_s:.2} s, compile and ptxas {compile_s:.2} s ({} \
         threads), timing {time_s:.2} s\n",
        start.elapsed().as_secs_f64(),
        crate::parallel::workers()
    );
    let best = rows.iter().find(|(_, r)| r.err.passes());
    match best {
        None => out += "no config passed the check: nothing stored\n",
        Some((c, row)) => {
            out += &format!(
                "best: {} ({:.4} ms, {:.1} TFLOP/s, {:.3} of cuBLAS)\n",
                describe(&c.config),
                row.tlc.median_ms,
                row.tlc_tflops(),
                row.ratio()
            );
            if args.store {
                let key = Key::new(&parsed, &defines.dims, &DeviceId::of(&gpu), target);
                let entry = Entry {
                    config: c.config.clone(),
                    time_ms: Some(f64::from(row.tlc.median_ms)),
                    tflops: Some(row.tlc_tflops()),
                };
                match cache::store(&key, &entry) {
                    Ok(path) => out += &format!("stored in the tuning cache: {}\n", path.display()),
                    Err(e) => out += &format!("warning: not stored in the tuning cache: {e}\n"),
                }
            }
        }
    }
    Ok(out)
}

/// Binds `config` and the dims, checks the kernel as every command does, and compiles it.
fn compile_config(
    file: &crate::diagnostics::SourceFile,
    parsed: &tlc_ir::PrimFunc,
    config: &Config,
    dims: &Config,
    target: Target,
    sms: u32,
) -> Result<String, String> {
    let defines: Vec<String> = config
        .iter()
        .chain(dims)
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    let first_line = |e: UserError| e.0.lines().next().unwrap_or("").to_string();
    let (func, _) =
        frontend::prepare(file, parsed, &defines, &Tuning::DEFAULTS).map_err(first_line)?;
    let cx = PassContext::new(target).with_sms(i64::from(sms));
    let compiled = compile_func(
        file,
        func,
        cx,
        &Instrumentation::default(),
        Emit::Ptx,
        &mut std::io::sink(),
    )
    .map_err(first_line)?;
    Ok(compiled.text().to_string())
}

/// ptxas: `TLC_PTXAS`, else on `PATH`, else the CUDA toolkit's default place.
fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TLC_PTXAS") {
        return Some(PathBuf::from(p));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("ptxas"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let p = PathBuf::from("/usr/local/cuda/bin/ptxas");
        p.is_file().then_some(p)
    })
}

/// Assembles `ptx`; the reason a config is dropped when ptxas fails, spills, or uses more
/// than 255 registers (its `-v` report).
fn assemble(ptxas: &Path, ptx: &str, target: Target) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("ptxas: no temporary directory: {e}"))?;
    let input = dir.path().join("k.ptx");
    std::fs::write(&input, ptx).map_err(|e| format!("ptxas: {e}"))?;
    let out = std::process::Command::new(ptxas)
        .arg(format!("-arch={}", target.name()))
        .arg("-v")
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("k.cubin"))
        .output()
        .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!(
            "ptxas failed: {}",
            log.lines().next().unwrap_or("")
        ));
    }
    for line in log.lines() {
        if let Some(n) = number_before(line, " bytes spill stores") {
            if n > 0 {
                return Err(format!("ptxas: {n} bytes of spill stores"));
            }
        }
        if let Some(n) = number_before(line, " registers") {
            if n > 255 {
                return Err(format!("ptxas: {n} registers"));
            }
        }
    }
    Ok(())
}

/// The integer just before `suffix` in `line` (`"Used 168 registers"` → 168).
fn number_before(line: &str, suffix: &str) -> Option<u64> {
    let at = line.find(suffix)?;
    line[..at].split_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::number_before;

    #[test]
    fn reads_ptxas_reports() {
        let regs = "ptxas info    : Used 168 registers, used 1 barriers, 64 bytes cmem[0]";
        assert_eq!(number_before(regs, " registers"), Some(168));
        let spill = "    0 bytes stack frame, 24 bytes spill stores, 24 bytes spill loads";
        assert_eq!(number_before(spill, " bytes spill stores"), Some(24));
        assert_eq!(number_before("no numbers here", " registers"), None);
    }
}
