//! Reductions (`T.reduce_*`) and row broadcasts through the whole pipeline of both targets,
//! pass by pass: every stage verifies, prints and parses back to itself, and the
//! interpreter gives the input's results on random data — exactly up to `lower-tile-ops`
//! for `max` / `min` / integer sums, within the reassociation bound for float sums
//! (`lower-reductions` folds strided partials and then a tree). Cases: every kind, `clear`
//! both ways, rows and columns (`dim=1`, `dim=0`, `dim=-1`), lines not a multiple of the
//! threads per output, more outputs than threads, a shared source, a float16 source into a
//! float32 result, a 1-D source to one element, and a softmax over a gemm accumulator
//! (mma.sync on sm_80, wgmma on sm_90a). The text of both passes' output is a snapshot.

use crate::common;

use common::{assert_close_meaning, with_region_barriers};
use tlc_ir::printer::print_func;
use tlc_ir::{PrimFunc, ReduceKind};
use tlc_passes::pipeline::lookup;
use tlc_passes::{PassContext, Target};

fn parse(text: &str) -> PrimFunc {
    let f = tlc_ir::parse(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    f
}

/// A row (or column) reduction of a `bm x n` tile of `X` with `threads` threads, the result
/// broadcast back over the tile: `Z = X - s` and `Y = s`.
fn row_case(
    kind: ReduceKind,
    bm: i64,
    n: i64,
    threads: i64,
    dim: i64,
    clear: bool,
    dtype: &str,
) -> String {
    let columns = dim == 0;
    let len = if columns { n } else { bm };
    let (yshape, ycopy) = if columns {
        ("(N,)".to_string(), "Y[0]".to_string())
    } else {
        ("(M,)".to_string(), format!("Y[bx * {bm}]"))
    };
    let bcast = if columns { "s[j]" } else { "s[i]" };
    let init = if clear {
        String::new()
    } else {
        "        T.fill(s, 0.5)\n".into()
    };
    let acc = if dtype == "int32" { "int32" } else { "float32" };
    format!(
        r#"M = T.symbolic("M")
N = T.symbolic("N")

@T.prim_func
def k(X: T.Tensor((M, N), "{dtype}"), Y: T.Tensor({yshape}, "{acc}"), Z: T.Tensor((M, N), "{acc}")):
    with T.Kernel(T.ceildiv(M, {bm}), threads={threads}) as bx:
        x = T.alloc_fragment(({bm}, {n}), "{acc}")
        s = T.alloc_fragment(({len},), "{acc}")
        T.copy(X[bx * {bm}, 0], x)
{init}        {name}(x, s, dim={dim}, clear={clear})
        for i, j in T.Parallel({bm}, {n}):
            x[i, j] = x[i, j] - {bcast}
        T.copy(s, {ycopy})
        T.copy(x, Z[bx * {bm}, 0])
"#,
        name = kind.name(),
        clear = if clear { "True" } else { "False" },
    )
}

/// A reduction of a shared tile (read in place) with a float16 source into float32.
fn shared_case(kind: ReduceKind) -> String {
    format!(
        r#"M = T.symbolic("M")

@T.prim_func
def k(X: T.Tensor((M, 72), "float16"), Y: T.Tensor((M,), "float32")):
    with T.Kernel(T.ceildiv(M, 8), threads=64) as bx:
        xs = T.alloc_shared((8, 72), "float16")
        s = T.alloc_fragment((8,), "float32")
        T.copy(X[bx * 8, 0], xs)
        {}(xs, s, dim=1)
        T.copy(s, Y[bx * 8])
"#,
        kind.name()
    )
}

/// A 1-D fragment reduced to its one element, then broadcast into every element.
const SCALAR_CASE: &str = r#"@T.prim_func
def k(X: T.Tensor((200,), "float32"), Y: T.Tensor((200,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        v = T.alloc_fragment((200,), "float32")
        t = T.alloc_fragment((1,), "float32")
        T.copy(X, v)
        T.reduce_absmax(v, t, dim=0)
        for i in T.Parallel(200):
            v[i] = v[i] / t[0]
        T.copy(v, Y)
"#;

/// A softmax over the rows of a gemm accumulator: the reduction reads the mma.sync /
/// wgmma accumulator layout, the broadcast writes it.
const GEMM_SOFTMAX_CASE: &str = r#"M = T.symbolic("M")

@T.prim_func
def k(A: T.Tensor((M, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((M, 64), "float32")):
    with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
        As = T.alloc_shared((64, 32), "float16")
        Bs = T.alloc_shared((32, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        mx = T.alloc_fragment((64,), "float32")
        sm = T.alloc_fragment((64,), "float32")
        T.copy(A[bx * 64, 0], As)
        T.copy(B, Bs)
        T.gemm(As, Bs, acc, clear_accum=True)
        T.reduce_max(acc, mx, dim=1)
        for i, j in T.Parallel(64, 64):
            acc[i, j] = T.exp2(acc[i, j] - mx[i])
        T.reduce_sum(acc, sm, dim=1)
        for i, j in T.Parallel(64, 64):
            acc[i, j] = acc[i, j] / sm[i]
        T.copy(acc, C[bx * 64, 0])
"#;

fn cases() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for kind in ReduceKind::ALL {
        let k = kind.name().trim_start_matches("T.reduce_");
        out.push((
            format!("{k}_rows_4x100"),
            row_case(kind, 4, 100, 128, 1, true, "float32"),
        ));
        out.push((
            format!("{k}_cols_8x48"),
            row_case(kind, 8, 48, 128, 0, true, "float32"),
        ));
        out.push((
            format!("{k}_rows_not_cleared"),
            row_case(kind, 2, 64, 128, -1, false, "float32"),
        ));
        out.push((format!("{k}_shared_f16"), shared_case(kind)));
    }
    // More outputs than threads (one thread per output, serial over the line).
    out.push((
        "sum_rows_64x32_t32".into(),
        row_case(ReduceKind::Sum, 64, 32, 32, 1, true, "float32"),
    ));
    // One row over all threads of a 256-thread block (the rms norm shape).
    out.push((
        "sum_row_1x256_t256".into(),
        row_case(ReduceKind::Sum, 1, 256, 256, 1, true, "float32"),
    ));
    out.push((
        "sum_rows_int32".into(),
        row_case(ReduceKind::Sum, 4, 40, 128, 1, true, "int32"),
    ));
    out.push((
        "max_rows_int32".into(),
        row_case(ReduceKind::Max, 4, 40, 128, 1, false, "int32"),
    ));
    out.push(("absmax_scalar".into(), SCALAR_CASE.into()));
    out.push(("gemm_softmax".into(), GEMM_SOFTMAX_CASE.into()));
    // Register path (analysis::rows): rows over all threads, 2 elements each, 4 warps.
    out.push((
        "sum_rows_8x256_t128".into(),
        row_case(ReduceKind::Sum, 8, 256, 128, 1, true, "float32"),
    ));
    // 8 lanes per row, 16 rows per round, 20 rows: the last round is ragged.
    out.push((
        "max_rows_20x8_t128".into(),
        row_case(ReduceKind::Max, 20, 8, 128, 1, false, "float32"),
    ));
    // 16 lanes per row, 4 rows per round, 6 rows (ragged); absolute values.
    out.push((
        "abssum_rows_6x16_t64".into(),
        row_case(ReduceKind::AbsSum, 6, 16, 64, -1, true, "float32"),
    ));
    // Integers: 64 threads per row (two warps each), exact.
    out.push((
        "sum_rows_int32_3x64_t128".into(),
        row_case(ReduceKind::Sum, 3, 64, 128, 1, false, "int32"),
    ));
    out
}

/// The cases whose reduction the rows analysis keeps in registers (`lower-tile-ops`
/// shuffles), by name; every other case takes the shared path of `lower-reductions`.
const REGISTER_PATH: [&str; 11] = [
    "sum_rows_not_cleared",
    "max_rows_not_cleared",
    "min_rows_not_cleared",
    "abssum_rows_not_cleared",
    "absmax_rows_not_cleared",
    "sum_row_1x256_t256",
    "gemm_softmax",
    "sum_rows_8x256_t128",
    "max_rows_20x8_t128",
    "abssum_rows_6x16_t64",
    "sum_rows_int32_3x64_t128",
];

/// Every stage of the default pipeline of `target`, verified and round-tripped.
fn stages(func: &PrimFunc, target: Target) -> Vec<(&'static str, PrimFunc)> {
    common::pipeline_stages(func, &PassContext::new(target))
}

/// The passes after which the meaning is compared.
const CHECKED: [&str; 5] = [
    "lower-reductions",
    "stage-fragment-reads",
    "lower-tile-ops",
    "thread-binding",
    "widen-indices",
];

#[test]
fn every_pass_keeps_the_meaning_of_every_reduction() {
    for target in [Target::Sm80, Target::Sm90a] {
        for (name, text) in cases() {
            let func = parse(&text);
            let (mut lowered, mut bound, mut compared) = (false, false, 0);
            for (pass, out) in stages(&func, target) {
                lowered |= pass == "lower-tile-ops";
                bound |= pass == "thread-binding";
                // The stages that change what runs (the others are covered by the gemm and
                // SIMT suites); every stage was verified and round-tripped by `stages`.
                if !CHECKED.contains(&pass) {
                    continue;
                }
                let what = format!("{name} on {target} after {pass}");
                let out = if lowered && !bound {
                    with_region_barriers(out)
                } else {
                    out
                };
                compared += assert_close_meaning(&what, &func, &out, 1e-5);
            }
            assert!(compared >= 20, "{name}: only {compared} runs compared");
        }
    }
}

#[test]
fn row_vectors_reduce_with_shuffles_and_the_others_through_shared_memory() {
    for target in [Target::Sm80, Target::Sm90a] {
        for (name, text) in cases() {
            let func = parse(&text);
            let out = stages(&func, target)
                .into_iter()
                .find(|(p, _)| *p == "lower-tile-ops")
                .expect("lower-tile-ops runs")
                .1;
            let printed = print_func(&out);
            let shuffles = printed.contains("T.shfl_xor(");
            let staged = printed.contains("_tree") || printed.contains("_red = T.alloc_shared");
            let registers = REGISTER_PATH.contains(&name.as_str());
            assert_eq!(
                (shuffles, staged),
                (registers, !registers),
                "{name} on {target}: shuffles {shuffles}, staged {staged}\n{printed}"
            );
        }
    }
}

#[test]
fn the_register_reduction_reads_as_documented() {
    // Two warps per row: butterflies within each, a shared step across them.
    let func = parse(&row_case(ReduceKind::Sum, 2, 64, 128, 1, false, "float32"));
    let out = stages(&func, Target::Sm80)
        .into_iter()
        .find(|(p, _)| *p == "lower-tile-ops")
        .expect("lower-tile-ops runs")
        .1;
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn the_rows_analysis_takes_only_what_registers_can_serve() {
    let classes = |body: &str, threads: i64| -> Vec<Vec<String>> {
        let text = format!(
            r#"@T.prim_func
def k(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8,), "float32")):
    with T.Kernel(1, threads={threads}) as bx:
        x = T.alloc_fragment((8, 64), "float32")
        s = T.alloc_fragment((8,), "float32")
        t = T.alloc_fragment((8,), "float32")
        c = T.alloc_fragment((64,), "float32")
        T.copy(X, x)
{body}"#
        );
        row_classes(&text, threads)
    };
    let reduce = "        T.reduce_max(x, s, dim=1)\n";
    // A reduction, a per-row nest joining `t`, a broadcast, a copy out: one class.
    let good = format!(
        "{reduce}        for i in T.Parallel(8):\n            t[i] = s[i] * 2.0\n        for i, j in T.Parallel(8, 64):\n            x[i, j] = x[i, j] - t[i]\n        T.copy(t, Y)\n"
    );
    assert_eq!(
        classes(&good, 128),
        vec![vec!["s".to_string(), "t".to_string()]]
    );
    // A column read of a member (`s[j % 8]`) rules the class out.
    let column = format!(
        "{reduce}        for i, j in T.Parallel(8, 64):\n            x[i, j] = x[i, j] - s[j % 8]\n"
    );
    assert!(classes(&column, 128).is_empty());
    // Written in a broadcast nest: no.
    let written =
        format!("{reduce}        for i, j in T.Parallel(8, 64):\n            s[i] = x[i, j]\n");
    assert!(classes(&written, 128).is_empty());
    // A member copied into part of another member: no.
    let part = format!("{reduce}        T.copy(s[0:4], t[0:4])\n");
    assert!(classes(&part, 128).is_empty());
    // A reduction along the columns (dim=0) into a 1-D fragment is no row vector.
    assert!(classes("        T.reduce_sum(x, c, dim=0)\n", 128).is_empty());
    // Rows that do not spread regularly (64 columns over 96 threads): no.
    assert!(classes(reduce, 96).is_empty());
    // Every thread holding one element of each of several rows: the shared path pays.
    assert!(classes(reduce, 64).is_empty());
}

#[test]
fn max_min_and_integer_reductions_are_exact_after_lowering() {
    // The tree only reassociates; max, min and integer sums do not depend on the order.
    for (name, text) in cases() {
        let exact = name.starts_with("max") || name.starts_with("min") || name.ends_with("int32");
        if !exact || name.contains("absmax") {
            continue;
        }
        let func = parse(&text);
        let out = stages(&func, Target::Sm80).pop().expect("stages").1;
        common::assert_same_meaning(&name, &func, &out);
    }
}

#[test]
fn the_lowered_reduction_and_the_staged_broadcast_read_as_documented() {
    let func = parse(&row_case(ReduceKind::Sum, 4, 100, 128, 1, false, "float32"));
    let cx = PassContext::new(Target::Sm80);
    let mut cur = func;
    let mut text = String::new();
    for name in ["lower-reductions", "stage-fragment-reads"] {
        let pass = lookup(name).expect("registered");
        cur = pass.run(cur, &cx).expect("runs");
        text.push_str(&format!("# after {name}\n{}\n", print_func(&cur)));
    }
    insta::assert_snapshot!(text);
}

#[test]
fn a_reduction_left_for_lower_tile_ops_is_a_located_level_error() {
    // Without lower-reductions, the pipeline refuses at the op, naming the pass it needs.
    let func = parse(&row_case(ReduceKind::Max, 4, 64, 128, 1, true, "float32"));
    let errors = tlc_ir::verifier::check_level(&func, tlc_ir::verifier::Level::LaidOut);
    let text: Vec<String> = errors.iter().map(|e| e.message.clone()).collect();
    assert!(
        text.iter()
            .any(|m| m.contains("`T.reduce_max` remains") && m.contains("lower-reductions")),
        "{text:?}"
    );
}

/// Row statistics shared by two gemm accumulators of different widths (flash attention's
/// scores, key-tile wide, and output, head-dim wide): with the rows-only split (`FullRow`)
/// both hold whole rows in the same threads, so the statistic is one row-vector class and
/// stays in registers; with another policy the widths may split differently, so it keeps
/// the shared-memory path. Every stage of both targets keeps the meaning.
#[test]
fn row_vectors_follow_accumulators_of_different_widths_split_by_rows() {
    let kernel = |policy: &str| {
        format!(
            r#"@T.prim_func
def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 32), "float16"), V: T.Tensor((64, 32), "float16"), O: T.Tensor((64, 32), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((64, 32), "float16")
        V_s = T.alloc_shared((64, 32), "float16")
        S = T.alloc_fragment((64, 64), "float32")
        P = T.alloc_fragment((64, 64), "float16")
        acc = T.alloc_fragment((64, 32), "float32")
        m = T.alloc_fragment((64,), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.copy(V, V_s)
        T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.{policy})
        T.reduce_max(S, m, dim=1)
        for i, j in T.Parallel(64, 64):
            S[i, j] = S[i, j] - m[i]
        T.copy(S, P)
        T.clear(acc)
        T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.{policy})
        for i, j in T.Parallel(64, 32):
            acc[i, j] = acc[i, j] * m[i]
        T.copy(acc, O)
"#
        )
    };
    let classes = |text: &str| row_classes(text, 128);
    let full_row = kernel("FullRow");
    assert_eq!(classes(&full_row), vec![vec!["m".to_string()]]);
    assert!(classes(&kernel("Square")).is_empty());
    let func = parse(&full_row);
    lowered_in_registers_keeping_meaning(&func, |printed| {
        printed.contains("T.shfl_xor(") && !printed.contains("_red = T.alloc_shared")
    });
}

/// MLA decoding's statistics: the scores (64 x 128) and the output (64 x 256) both split by
/// columns only (`FullCol`: every warp, or warpgroup, holds a column strip of every row, in
/// a `1 x U` grid whatever the width), so the row vector follows both in registers — the
/// reduction folds a thread's elements, shuffles within the warp and combines the warps
/// through a `64 x U` shared buffer, not a staged copy of the whole tile (which put MLA
/// decode 16 KB over sm_90a's shared memory). Mixed one-dimensional policies (`FullRow` for
/// the scores, `FullCol` for the output) split the rows differently: a vector that follows
/// both is no class. Every stage
/// of both targets keeps the meaning (8 warps: 8 column strips on sm_80, 2 warpgroups'
/// on sm_90a).
#[test]
fn row_vectors_follow_accumulators_split_by_columns() {
    let kernel = |scores: &str, output: &str| {
        format!(
            r#"@T.prim_func
def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((128, 32), "float16"), V: T.Tensor((128, 256), "float16"), O: T.Tensor((64, 256), "float32")):
    with T.Kernel(1, threads=256) as bx:
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((128, 32), "float16")
        V_s = T.alloc_shared((128, 256), "float16")
        S = T.alloc_fragment((64, 128), "float32")
        P = T.alloc_shared((64, 128), "float16")
        acc = T.alloc_fragment((64, 256), "float32")
        m = T.alloc_fragment((64,), "float32")
        l = T.alloc_fragment((64,), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.copy(V, V_s)
        T.gemm(A_s, B_s, S, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.{scores})
        T.reduce_max(S, m, dim=1)
        for i, j in T.Parallel(64, 128):
            S[i, j] = T.exp2(S[i, j] - m[i])
        T.reduce_sum(S, l, dim=1)
        T.copy(S, P)
        T.clear(acc)
        T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.{output})
        for i, j in T.Parallel(64, 256):
            acc[i, j] = acc[i, j] / l[i]
        T.copy(acc, O)
"#
        )
    };
    let classes = |text: &str| row_classes(text, 256);
    let full_col = kernel("FullCol", "FullCol");
    assert_eq!(
        classes(&full_col),
        vec![vec!["l".to_string()], vec!["m".to_string()]]
    );
    // `m` follows the scores only; `l` both, split differently.
    assert_eq!(
        classes(&kernel("FullRow", "FullCol")),
        vec![vec!["m".to_string()]]
    );
    let func = parse(&full_col);
    lowered_in_registers_keeping_meaning(&func, |printed| {
        printed.contains("T.shfl_xor(")
            && printed.contains("l_warps = T.alloc_shared((64, ")
            && !printed.contains("_red = T.alloc_shared")
    });
}

/// DeepGEMM's promotion at a tile width whose flat rows would not spread regularly (112
/// columns over 128 threads): `acc` is no gemm accumulator, but the nest ties it element
/// for element to one (`blk`), so it takes the accumulator's layout, and the row vector `s`
/// broadcast along both is served from registers — not staged through shared memory (which
/// also kept warp specialization off). Without the gemm's tie (`acc` alone) the class goes.
/// Every stage of both targets keeps the meaning.
#[test]
fn a_row_vector_follows_a_fragment_tied_to_an_accumulator_of_any_width() {
    let kernel = |promote: &str| {
        format!(
            r#"@T.prim_func
def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((112, 32), "float16"), S: T.Tensor((64,), "float32"), O: T.Tensor((64, 112), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((112, 32), "float16")
        blk = T.alloc_fragment((64, 112), "float32")
        acc = T.alloc_fragment((64, 112), "float32")
        s = T.alloc_fragment((64,), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.clear(acc)
        T.gemm(A_s, B_s, blk, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)
        for i in T.Parallel(64):
            s[i] = S[i]
        for i, j in T.Parallel(64, 112):
            {promote}
        T.copy(acc, O)
"#
        )
    };
    let classes = |text: &str| row_classes(text, 128);
    let tied = kernel("acc[i, j] += blk[i, j] * s[i]");
    assert_eq!(classes(&tied), vec![vec!["s".to_string()]]);
    assert!(classes(&kernel("acc[i, j] += s[i]")).is_empty());
    let func = parse(&tied);
    lowered_in_registers_keeping_meaning(&func, |printed| !printed.contains("s_shared"));
}

/// The members of each row-vector class of the first kernel of `text` at `threads`.
fn row_classes(text: &str, threads: i64) -> Vec<Vec<String>> {
    use tlc_passes::analysis::rows::RowVectors;
    let func = parse(text);
    let mut out = Vec::new();
    tlc_passes::analysis::kernels::for_each_kernel(&mut func.body.clone(), &mut |k, _| {
        out = RowVectors::of(k, threads, tlc_ir::target::WARP_SIZE)
            .classes
            .iter()
            .map(|c| c.members.iter().cloned().collect())
            .collect();
    });
    out
}

/// On both targets, `lower-tile-ops`' output passes `in_registers` (the row vector's uses
/// served from registers), and the thread-level stages keep `func`'s meaning.
fn lowered_in_registers_keeping_meaning(
    func: &tlc_ir::PrimFunc,
    in_registers: impl Fn(&str) -> bool,
) {
    for target in [Target::Sm80, Target::Sm90a] {
        let mut compared = 0;
        for (pass, out) in stages(func, target) {
            if pass == "lower-tile-ops" {
                let printed = print_func(&out);
                assert!(
                    in_registers(&printed),
                    "{target}: the row vector is not served from registers\n{printed}"
                );
            }
            if matches!(pass, "thread-binding" | "widen-indices") {
                compared += assert_close_meaning(&format!("{target} {pass}"), func, &out, 1e-3);
            }
        }
        assert!(compared > 0, "{target}: nothing compared");
    }
}
