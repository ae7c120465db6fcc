//! Every tensor-core gemm case compiles through the default pipeline for sm_80 and sm_90a,
//! holds `mma.sync`, `ldmatrix` and (when its K loop is `T.Pipelined`) `cp.async`, and passes ptxas with no spills and at
//! most 255 registers (the ptxas gate; the numbers ptxas reports are printed so a
//! `--nocapture` run shows them).

use crate::common;

use common::{ptxas_log, root, text, tlc};

/// (file, `-D` bindings, whether its copies can be `cp.async`): the seed kernel as written
/// (4096 x 2048 x 1024), its symbolic twin bound to a tile-aligned shape and left symbolic,
/// the other gemm cases and the bench/ configs. `cp.async` needs a pipelined K loop and
/// rows that keep 16 / 8 / 4-byte alignment: `gemm_ragged_tn` at 4095 x 4097 x 1023 has rows
/// of odd length (synchronous masked loads), at 4000 x 4040 x 1000 its K tail is a
/// zero-filling `cp.async`.
const CASES: &[(&str, &[&str], bool)] = &[
    ("examples/gemm_seed000.tir", &[], true),
    (
        "tests/cases/valid/seed000_dims.tir",
        &["M=4096", "N=4096", "K=4096"],
        true,
    ),
    ("tests/cases/valid/seed000_dims.tir", &[], false),
    (
        "tests/cases/valid/gemm_bf16_transposed.tir",
        &["M=1000", "N=1000", "K=1000"],
        true,
    ),
    (
        "tests/cases/valid/gemm_f16_acc.tir",
        &["M=1000", "N=1000", "K=1000"],
        true,
    ),
    (
        "passes/tests/cases/gemm_ragged_tn.tir",
        &["M=4095", "N=4097", "K=1023"],
        false,
    ),
    (
        "passes/tests/cases/gemm_ragged_tn.tir",
        &["M=4000", "N=4040", "K=1000"],
        true,
    ),
    (
        "passes/tests/cases/gemm_fullcol_epilogue.tir",
        &["M=512", "N=512", "K=512"],
        false,
    ),
    (
        "bench/gemm_128x256x32_t256_s3.tir",
        &["M=8192", "N=8192", "K=8192"],
        true,
    ),
    (
        "bench/gemm_128x128x64_t128_s3.tir",
        &["M=8192", "N=8192", "K=8192"],
        true,
    ),
    // The ragged bench config at an odd shape: 32-trip element copies, unrolled, with all
    // their loads in flight (the most registers of any case).
    (
        "bench/gemm_128x128x32_t128_s3_masked.tir",
        &["M=4095", "N=4097", "K=1023"],
        false,
    ),
    (
        "bench/gemm_128x128x32_t128_s4.tir",
        &["M=8192", "N=8192", "K=8192"],
        true,
    ),
    (
        "bench/gemm_64x64x64_t128_s4.tir",
        &["M=1024", "N=1024", "K=14336"],
        true,
    ),
    // One consumer warpgroup, 4 stages: one wgmma group in flight at one block per SM.
    (
        "bench/gemm_128x128x64_t128_s4.tir",
        &["M=8192", "N=8192", "K=8192"],
        true,
    ),
    // Split-K at issue 16's shape: a 128 x 128 accumulator added with atomics (the clear
    // and the epilogue in the consumers' branch, two blocks per SM on sm_90a).
    (
        "tests/cases/valid/gemm_splitk_atomic.tir",
        &["M=1024", "N=1024", "K=14336"],
        true,
    ),
    // A reduction of the accumulator into a row vector (one staged fold per register slot).
    (
        "tests/cases/valid/gemm_column_max_into_rows.tir",
        &[],
        false,
    ),
];

/// `(registers, spill store bytes, spill load bytes)` from a `ptxas -v` log.
fn usage(log: &str) -> (u32, u32, u32) {
    let num_before = |line: &str, word: &str| -> Option<u32> {
        let at = line.find(word)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    let mut regs = 0;
    let (mut st, mut ld) = (0, 0);
    for line in log.lines() {
        if let Some(r) = num_before(line, "registers") {
            regs = regs.max(r);
        }
        if let Some(s) = num_before(line, "bytes spill stores") {
            st = st.max(s);
        }
        if let Some(l) = num_before(line, "bytes spill loads") {
            ld = ld.max(l);
        }
    }
    (regs, st, ld)
}

#[test]
fn usage_reads_the_ptxas_log() {
    let log = "ptxas info    : Function properties for k\n    8 bytes stack frame, 12 bytes spill stores, 4 bytes spill loads\nptxas info    : Used 254 registers, used 1 barriers";
    assert_eq!(usage(log), (254, 12, 4));
}

#[test]
fn every_gemm_case_uses_tensor_cores_without_spills() {
    let dir = std::env::temp_dir().join(format!("tlc-gemm-compile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    for (i, (file, dims, cp_async)) in CASES.iter().enumerate() {
        assert!(root().join(file).exists(), "{file}");
        for target in ["sm_80", "sm_90a"] {
            let out_path = dir.join(format!("case{i}.{target}.ptx"));
            let mut args = vec![
                "compile",
                file,
                "-o",
                out_path.to_str().unwrap_or_default(),
                "--target",
                target,
            ];
            for d in *dims {
                args.push("-D");
                args.push(d);
            }
            let out = tlc(&args);
            assert!(
                out.status.success(),
                "tlc {}:\n{}",
                args.join(" "),
                text(&out.stderr)
            );
            let ptx = std::fs::read_to_string(&out_path).expect("the PTX");
            // sm_90a: the cases of whole warpgroups fit the wgmma path (64-row tiles); the
            // 64-thread one and the float16 accumulator keep mma.sync.
            let threads: u32 = ptx
                .lines()
                .find_map(|l| l.trim().strip_prefix(".reqntid "))
                .map(|dims| {
                    dims.split(',')
                        .filter_map(|d| d.trim().parse::<u32>().ok())
                        .product()
                })
                .unwrap_or(0);
            let f16_acc = file.ends_with("gemm_f16_acc.tir");
            let wgmma = target == "sm_90a" && threads.is_multiple_of(128) && !f16_acc;
            let mut needles = if f16_acc {
                vec![
                    "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16",
                    "ldmatrix.sync.aligned",
                ]
            } else if wgmma {
                vec![
                    "wgmma.mma_async.sync.aligned",
                    "wgmma.wait_group.sync.aligned",
                    "fence.proxy.async.shared::cta",
                ]
            } else {
                vec!["mma.sync.aligned.m16n8k16", "ldmatrix.sync.aligned"]
            };
            // Asynchronous loads: on the wgmma path (bound dims, 16-byte row strides) TMA
            // with mbarriers, else cp.async.
            if *cp_async && wgmma {
                needles.extend([
                    "cp.async.bulk.tensor.2d.shared::cluster.global.tile",
                    "mbarrier.try_wait.parity.shared::cta.b64",
                ]);
            } else if *cp_async {
                needles.extend(["cp.async.cg.shared.global", "cp.async.wait_group"]);
            }
            // Every TMA pipeline of these cases is warp-specialized, a producer warpgroup
            // added and the register budget pinned (ptxas_log refuses the warning of an
            // ignored setmaxnreg).
            if *cp_async && wgmma {
                assert!(threads >= 2 * 128, "{file} {dims:?}: no producer warpgroup");
                needles.extend([
                    "setmaxnreg.dec.sync.aligned.u32",
                    "setmaxnreg.inc.sync.aligned.u32",
                    ".minnctapersm ",
                ]);
            }
            for needle in needles {
                assert!(
                    ptx.contains(needle),
                    "{file} {dims:?} {target}: no {needle}"
                );
            }
            let log = ptxas_log(&out_path, target).unwrap_or_else(|e| panic!("{e}"));
            let (regs, st, ld) = usage(&log);
            eprintln!("{file} {dims:?} {target}: {regs} registers, spills {st}/{ld} bytes");
            assert!(regs > 0 && regs <= 255, "{file} {target}: {log}");
            // The seed kernel with M, N, K symbolic loads B with an unmasked `T.Parallel`:
            // TileLang's safe memory access guards those loads (legalize-safe-memory), and on
            // sm_80 the guards' registers make ptxas spill 20 bytes (2026-11-30, session 17;
            // bound dims or sm_90a: none). A known cost of ragged-size safety, bounded here.
            let guarded_seed = *file == "tests/cases/valid/seed000_dims.tir"
                && dims.is_empty()
                && target == "sm_80";
            if guarded_seed {
                assert!(
                    st <= 64 && ld <= 64,
                    "{file} {dims:?} {target} spills:\n{log}"
                );
            } else {
                assert_eq!((st, ld), (0, 0), "{file} {dims:?} {target} spills:\n{log}");
            }
            // `setmaxnreg.dec` may only lower the count a thread starts with, `.inc` only
            // raise it: the count ptxas gave the entry lies between.
            let counts = |op: &str| -> Vec<u32> {
                ptx.lines()
                    .filter_map(|l| l.trim().strip_prefix(op))
                    .filter_map(|n| n.trim().trim_end_matches(';').parse().ok())
                    .collect()
            };
            let (dec, inc) = (
                counts("setmaxnreg.dec.sync.aligned.u32"),
                counts("setmaxnreg.inc.sync.aligned.u32"),
            );
            assert!(
                dec.iter().all(|&d| d <= regs) && inc.iter().all(|&i| i >= regs),
                "{file} {dims:?} {target}: {regs} registers at entry, dec {dec:?}, inc {inc:?}"
            );
            if wgmma && *cp_async {
                assert!(
                    !dec.is_empty() && !inc.is_empty(),
                    "{file} {dims:?}: no setmaxnreg"
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
