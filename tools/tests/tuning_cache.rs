//! The tuning cache through the commands (docs/cli.md, "Tunables and the tuning cache"): an
//! entry stored with `tlc_tools::cache` (as `tlc tune` stores its winner) is what `compile` and
//! `opt` take for the tunables `-D` leaves open, `-v` says so, `--no-cache` skips it, a
//! corrupt entry is ignored with a warning; without an entry `tlc plan`'s first config is
//! taken, and without a plan (a dim unbound) or a target (`check`, `run --interp`) the
//! defaults.
//! The device identity comes from `TLC_CACHE_DEVICE` (no GPU here).

use crate::common;

use common::{text, tlc_with_env};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;
use tlc_ir::Target;
use tlc_tools::cache::{Cache, DeviceId, Entry, Key};

const FILE: &str = "bench/gemm_tunable.tir";
const DEVICE: &str = "NVIDIA H100 80GB HBM3:132:13000";
const DIMS: [&str; 6] = ["-D", "M=256", "-D", "N=256", "-D", "K=256"];

/// The tuned config the tests store (not the defaults, and `block_K` no candidate).
const TUNED: [(&str, i64); 5] = [
    ("threads", 128),
    ("block_M", 64),
    ("block_N", 128),
    ("block_K", 64),
    ("num_stages", 3),
];

/// The space's defaults (bench/gemm_tunable.tir).
const DEFAULTS: [(&str, i64); 5] = [
    ("threads", 256),
    ("block_M", 128),
    ("block_N", 128),
    ("block_K", 32),
    ("num_stages", 4),
];

/// `tlc plan`'s first config at DIMS for sm_90a on 132 SMs (tools/tests/plan_space.rs
/// checks the ranking itself): one wave of 8 blocks, the deepest pipeline, the fewest
/// threads, fewest blocks along x.
const PLANNED: [(&str, i64); 5] = [
    ("threads", 128),
    ("block_M", 64),
    ("block_N", 128),
    ("block_K", 32),
    ("num_stages", 5),
];

const FROM_PLAN: &str =
    "tlc: tunables from `tlc plan`'s ranking (first of 36 configs (4 compiled) for sm_90a on 132 SMs";

struct Setup {
    _dir: tempfile::TempDir,
    /// `TLC_CACHE_DIR`.
    base: PathBuf,
    /// The entry stored for FILE at DIMS, DEVICE, sm_90a.
    entry: PathBuf,
}

fn config(pairs: &[(&str, i64)]) -> Vec<(String, i64)> {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

/// A cache holding `tuned` for FILE at DIMS on DEVICE for `target`, stored through the API.
fn cache_with(tuned: &[(&str, i64)], target: Target) -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let base = dir.path().to_path_buf();
    let source = std::fs::read_to_string(common::root().join(FILE)).expect("read");
    let func = tlc_ir::parse::parse(&source).expect("parses");
    let device = DeviceId::parse(DEVICE).expect("device");
    let dims = config(&[("M", 256), ("N", 256), ("K", 256)]);
    let key = Key::new(&func, &dims, &device, target);
    let entry = Cache::at(base.join("tuning"))
        .store(
            &key,
            &Entry {
                config: config(tuned),
                time_ms: Some(0.012),
                tflops: None,
            },
        )
        .expect("stored");
    Setup {
        _dir: dir,
        base,
        entry,
    }
}

/// `tlc` with the test's cache and device identity.
fn tlc(setup: &Setup, args: &[&str]) -> Output {
    tlc_with_env(
        args,
        &[
            ("TLC_CACHE_DIR", setup.base.as_os_str()),
            ("TLC_CACHE_DEVICE", OsStr::new(DEVICE)),
        ],
    )
}

fn ok(out: &Output) -> (String, String) {
    assert!(out.status.success(), "{}", text(&out.stderr));
    (text(&out.stdout), text(&out.stderr))
}

fn compile(setup: &Setup, extra: &[&str]) -> Output {
    let mut args = vec!["compile", FILE, "--target", "sm_90a", "-o", "-"];
    args.extend(DIMS);
    args.extend(extra);
    tlc(setup, &args)
}

/// What `-D` spells out: the PTX of `tuned` with no cache involved.
fn spelled(setup: &Setup, tuned: &[(&str, i64)]) -> String {
    let defines: Vec<String> = tuned.iter().map(|(n, v)| format!("{n}={v}")).collect();
    let mut args = vec!["--no-cache"];
    for d in &defines {
        args.extend(["-D", d.as_str()]);
    }
    ok(&compile(setup, &args)).0
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn compile_takes_the_cached_config_and_says_so() {
    let setup = cache_with(&TUNED, Target::Sm90a);
    let (ptx, stderr) = ok(&compile(&setup, &["-v"]));
    assert_eq!(
        stderr,
        format!(
            "tlc: tunables from the tuning cache (entry {} for `gemm_tunable` with K=256 M=256 \
             N=256 on NVIDIA H100 80GB HBM3 (132 SMs, driver 13000) for sm_90a): threads=128 block_M=64 \
             block_N=128 block_K=64 num_stages=3\n",
            path(&setup.entry)
        )
    );
    assert_eq!(
        ptx,
        spelled(&setup, &TUNED),
        "the cached config, spelled with -D"
    );
    let defaults = spelled(&setup, &DEFAULTS);
    assert_ne!(ptx, defaults);
    let planned = spelled(&setup, &PLANNED);
    assert_ne!(ptx, planned);
    // Without `-v`, silently.
    let (quiet, stderr) = ok(&compile(&setup, &[]));
    assert_eq!(quiet, ptx);
    assert_eq!(stderr, "");
    // `--no-cache`: the plan's first config, and `-v` says why.
    let (ptx, stderr) = ok(&compile(&setup, &["--no-cache", "-v"]));
    assert_eq!(ptx, planned);
    assert_eq!(
        stderr,
        format!(
            "{FROM_PLAN}; --no-cache): threads=128 block_M=64 block_N=128 block_K=32 \
             num_stages=5\n"
        )
    );
}

#[test]
fn defines_win_over_the_cache() {
    let setup = cache_with(&TUNED, Target::Sm90a);
    let (ptx, stderr) = ok(&compile(&setup, &["-v", "-D", "num_stages=4"]));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(lines[0], "tlc: tunables from -D: num_stages=4");
    assert!(
        lines[1].starts_with("tlc: tunables from the tuning cache (entry ")
            && lines[1].ends_with("): threads=128 block_M=64 block_N=128 block_K=64"),
        "{stderr}"
    );
    let mut mixed = TUNED;
    mixed[4].1 = 4;
    assert_eq!(ptx, spelled(&setup, &mixed));
}

/// With every tunable bound by `-D`, `tlc compile` prints the same PTX whether or not the
/// tuning cache holds an entry for the kernel: the driver gets every tunable from its
/// caller, and the cache is looked up for open ones only (`-v` says so: no cache line).
#[test]
fn every_tunable_bound_is_the_same_ptx_with_or_without_a_cache_entry() {
    let setup = cache_with(&TUNED, Target::Sm90a);
    for config in [DEFAULTS, PLANNED] {
        let defines: Vec<String> = config.iter().map(|(n, v)| format!("{n}={v}")).collect();
        let mut args = vec!["-v"];
        for d in &defines {
            args.extend(["-D", d.as_str()]);
        }
        let (with_entry, stderr) = ok(&compile(&setup, &args));
        assert!(!stderr.contains("tuning cache"), "{stderr}");
        assert_eq!(with_entry, spelled(&setup, &config));
        assert_ne!(
            with_entry,
            spelled(&setup, &TUNED),
            "the cached config differs"
        );
    }
}

#[test]
fn other_dims_targets_and_devices_miss() {
    let setup = cache_with(&TUNED, Target::Sm90a);
    let planned = spelled(&setup, &PLANNED);
    let other_dims = tlc(
        &setup,
        &[
            "compile", FILE, "--target", "sm_90a", "-o", "-", "-v", "-D", "M=512", "-D", "N=256",
            "-D", "K=256",
        ],
    );
    let (_, stderr) = ok(&other_dims);
    assert!(
        stderr.starts_with(&format!(
            "{FROM_PLAN}; no tuning-cache entry for `gemm_tunable` with K=256 M=512 N=256 on \
             NVIDIA H100 80GB HBM3 (132 SMs, driver 13000) for sm_90a: "
        )),
        "{stderr}"
    );
    let mut args = vec!["compile", FILE, "--target", "sm_80", "-o", "-", "-v"];
    args.extend(DIMS);
    let (_, stderr) = ok(&tlc(&setup, &args));
    assert!(
        stderr.starts_with(
            "tlc: tunables from `tlc plan`'s ranking (first of 36 configs (4 compiled) for sm_80 on 132 SMs; no \
             tuning-cache entry"
        ),
        "{stderr}"
    );
    let other_gpu = tlc_with_env(
        &[
            "compile", FILE, "--target", "sm_90a", "-o", "-", "-v", "-D", "M=256", "-D", "N=256",
            "-D", "K=256",
        ],
        &[
            ("TLC_CACHE_DIR", setup.base.as_os_str()),
            ("TLC_CACHE_DEVICE", OsStr::new("NVIDIA H100 PCIe:114")),
        ],
    );
    let (ptx, stderr) = ok(&other_gpu);
    // One wave on 114 SMs as on 132: the same first config.
    assert_eq!(ptx, planned);
    assert!(
        stderr.contains("on NVIDIA H100 PCIe (114 SMs, driver 0)"),
        "{stderr}"
    );
    assert!(stderr.contains("for sm_90a on 114 SMs;"), "{stderr}");
}

#[test]
fn a_corrupt_entry_is_ignored_with_a_warning() {
    let setup = cache_with(&TUNED, Target::Sm90a);
    let planned = spelled(&setup, &PLANNED);
    std::fs::write(&setup.entry, "{\"format\": 1, \"kernel\": ").expect("write");
    let (ptx, stderr) = ok(&compile(&setup, &[]));
    assert_eq!(ptx, planned);
    assert!(
        stderr.starts_with(&format!(
            "tlc: warning: ignoring the tuning-cache entry {}: it is not a tuning-cache entry: ",
            path(&setup.entry)
        )),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_cached_config_the_verifier_rejects_is_ignored_with_a_warning() {
    // No constraint forbids block_M = 0, but the kernel cannot take it.
    let mut zero = TUNED;
    zero[1].1 = 0;
    let setup = cache_with(&zero, Target::Sm90a);
    let (ptx, stderr) = ok(&compile(&setup, &["-v"]));
    assert_eq!(ptx, spelled(&setup, &PLANNED));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines[0],
        format!(
            "tlc: warning: ignoring the tuning-cache entry {}: the kernel with its config fails \
             the verifier: dimension of `A_shared` must be positive, found 0",
            path(&setup.entry)
        )
    );
    assert!(
        lines[1].starts_with(&format!(
            "{FROM_PLAN}; the tuning-cache entry {} is ignored)",
            path(&setup.entry)
        )),
        "{stderr}"
    );
}

#[test]
fn opt_uses_the_cache_and_check_and_interp_use_the_defaults() {
    let setup = cache_with(&TUNED, Target::Sm80);
    let mut args = vec!["opt", FILE, "--passes=", "-v"];
    args.extend(DIMS);
    let (ir, stderr) = ok(&tlc(&setup, &args));
    assert!(
        stderr.starts_with("tlc: tunables from the tuning cache"),
        "{stderr}"
    );
    assert!(ir.contains("T.alloc_shared((64, 64), \"float16\")"), "{ir}");
    let mut args = vec!["check", FILE, "-v"];
    args.extend(DIMS);
    let (_, stderr) = ok(&tlc(&setup, &args));
    assert_eq!(
        stderr,
        "tlc: tunables at their defaults (this command has no target to key the tuning cache \
         with): threads=256 block_M=128 block_N=128 block_K=32 num_stages=4\n"
    );
    let interp = [
        "run", FILE, "--interp", "-v", "-D", "M=64", "-D", "N=64", "-D", "K=32",
    ];
    let (report, stderr) = ok(&tlc(&setup, &interp));
    assert!(
        report.starts_with("ran `gemm_tunable` in the interpreter"),
        "{report}"
    );
    assert!(
        stderr.starts_with("tlc: tunables at their defaults (this command has no target"),
        "{stderr}"
    );
}

/// Without every dim bound there is no plan (the grid depends on them): the defaults.
#[test]
fn without_a_plan_the_defaults() {
    let setup = cache_with(&TUNED, Target::Sm90a);
    let (_, stderr) = ok(&tlc(
        &setup,
        &["compile", FILE, "--target", "sm_90a", "-o", "-", "-v"],
    ));
    assert!(
        stderr.starts_with("tlc: tunables at their defaults (no tuning-cache entry"),
        "{stderr}"
    );
    assert!(
        stderr.ends_with(
            "; no plan: `tlc plan` needs every symbolic dimension of `gemm_tunable` bound: its \
             grid depends on them): threads=256 block_M=128 block_N=128 block_K=32 \
             num_stages=4\n"
        ),
        "{stderr}"
    );
}

#[test]
fn a_malformed_device_identity_is_an_error() {
    let setup = cache_with(&TUNED, Target::Sm90a);
    let out = tlc_with_env(
        &["compile", FILE, "-o", "-"],
        &[
            ("TLC_CACHE_DIR", setup.base.as_os_str()),
            ("TLC_CACHE_DEVICE", OsStr::new("H100")),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: TLC_CACHE_DEVICE=`H100`: expected NAME:SMS or NAME:SMS:DRIVER, e.g. `NVIDIA H100 80GB HBM3:132:13000`\n"
    );
}
