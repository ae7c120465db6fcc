//! Several `T.Kernel`s in one function: each kernel's buffers get names of their own (the
//! parser renames an allocation an earlier kernel also made, with every reference to it),
//! so "names are identities" holds and the verifier accepts kernels written independently.
//! What is still a redefinition stays an error.

use tlc_ir::visit::{for_each_stmt, for_each_subexpr, stmt_exprs};
use tlc_ir::{parse, printer::print_func, ExprKind, Kernel, PrimFunc, StmtKind};

fn ok(src: &str) -> PrimFunc {
    let f = parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"));
    if let Err(d) = tlc_ir::verifier::verify(&f) {
        panic!("does not verify: {d:#?}\n{src}");
    }
    f
}

fn kernels(f: &PrimFunc) -> Vec<&Kernel> {
    f.body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Kernel(k) => Some(k),
            _ => None,
        })
        .collect()
}

/// Every buffer name a kernel's body mentions: stores, loads, regions, intrinsic operands.
fn mentioned(k: &Kernel) -> Vec<String> {
    let mut out = Vec::new();
    for_each_stmt(&k.body, &mut |s| {
        match &s.kind {
            StmtKind::Store { buffer, .. } => out.push(buffer.name.clone()),
            StmtKind::Copy { src, dst } => {
                out.push(src.buffer.name.clone());
                out.push(dst.buffer.name.clone());
            }
            StmtKind::Fill { dst, .. } => out.push(dst.buffer.name.clone()),
            StmtKind::Intrinsic(i) => {
                out.extend(i.operands().iter().map(|r| r.buffer.name.clone()));
            }
            _ => {}
        }
        for e in stmt_exprs(s) {
            for_each_subexpr(e, &mut |e| {
                if let ExprKind::Load { buffer, .. } = &e.kind {
                    out.push(buffer.clone());
                }
            });
        }
    });
    out.sort();
    out.dedup();
    out
}

const TILE: &str = r#"@T.prim_func
def f(
    A: T.Tensor((64, 64), "float16"),
    B: T.Tensor((64, 64), "float16"),
):
    with T.Kernel(2, threads=128) as bx:
        S = T.alloc_shared((32, 64), "float16")
        T.annotate_layout({S: T.make_swizzled_layout(S)})
        T.copy(A[bx * 32, 0], S)
        for i, j in T.Parallel(32, 64):
            B[bx * 32 + i, j] = S[i, j]
    with T.Kernel(2, threads=128) as bx:
        S = T.alloc_shared((32, 64), "float16")
        T.annotate_layout({S: T.make_swizzled_layout(S)})
        T.fill(S, 0)
        T.copy(B[bx * 32, 0], S)
        for i, j in T.Parallel(32, 64):
            A[bx * 32 + i, j] = S[i, 63 - j]
"#;

#[test]
fn a_buffer_name_repeated_in_a_later_kernel_is_renamed_there() {
    let f = ok(TILE);
    let ks = kernels(&f);
    assert_eq!(ks.len(), 2);
    assert_eq!(ks[0].allocs[0].name.name, "S");
    assert_eq!(ks[0].layouts[0].buffer.name, "S");
    assert_eq!(mentioned(ks[0]), ["A", "B", "S"]);
    assert_eq!(ks[1].allocs[0].name.name, "S_1");
    assert_eq!(ks[1].layouts[0].buffer.name, "S_1");
    assert_eq!(mentioned(ks[1]), ["A", "B", "S_1"]);
    // The renamed function prints and parses back to itself.
    let printed = print_func(&f);
    assert!(printed.contains("S_1 = T.alloc_shared((32, 64), \"float16\")"));
    assert_eq!(ok(&printed), f);
}

const THREAD: &str = r#"@T.prim_func
def g(
    A: T.Tensor((32, 8), "float32"),
    O: T.Tensor((32, 8), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32, 8), "float32")
        T.shared_arena(bytes=1024, offsets={S: 0})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            T.cp_async(S[tx, 0], A[tx, 0], 16)
            T.cp_async(S[tx, 4], A[tx, 4], 16)
            T.cp_async_commit()
            T.cp_async_wait(0)
            for j in T.serial(8):
                O[tx, j] = S[tx, j]
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32, 8), "float32")
        T.shared_arena(bytes=1024, offsets={S: 0})
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            T.cp_async(S[tx, 0], O[tx, 0], 16)
            T.cp_async(S[tx, 4], O[tx, 4], 16)
            T.cp_async_commit()
            T.cp_async_wait(0)
            T.sync_threads()
            for j in T.serial(8):
                A[tx, j] = S[31 - tx, j]
"#;

#[test]
fn arena_offsets_and_intrinsic_operands_follow_the_rename() {
    let f = ok(THREAD);
    let ks = kernels(&f);
    let arena = ks[1].arena.as_ref().map(|a| a.offsets[0].0.name.clone());
    assert_eq!(arena.as_deref(), Some("S_1"));
    assert_eq!(mentioned(ks[1]), ["A", "O", "S_1"]);
    assert_eq!(mentioned(ks[0]), ["A", "O", "S"]);
    assert_eq!(ok(&print_func(&f)), f);
}

#[test]
fn real_redefinitions_are_still_errors() {
    let twice_in_one_kernel = TILE.replacen(
        "        T.fill(S, 0)\n",
        "        S = T.alloc_shared((8,), \"float16\")\n",
        1,
    );
    let shadows_a_parameter = TILE.replace("S", "A");
    for src in [twice_in_one_kernel, shadows_a_parameter] {
        let f = parse(&src).unwrap_or_else(|d| panic!("does not parse: {d:#?}"));
        let errors = tlc_ir::verifier::verify(&f).expect_err("a redefinition");
        assert!(
            errors
                .iter()
                .any(|d| d.message.contains("is defined more than once")),
            "{errors:#?}"
        );
    }
}

/// Merging two kernels (deleting the second's `with T.Kernel` line, as the mutation test
/// does) leaves one kernel allocating `S` twice with different shapes: invalid, but it must
/// still print to text that parses back to the same IR, though printing moves both
/// allocations above the first use.
#[test]
fn a_name_allocated_twice_in_one_kernel_prints_unambiguously() {
    let src = r#"@T.prim_func
def f(
    A: T.Tensor((64,), "float32"),
    B: T.Tensor((64,), "float32"),
):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32,), "float32")
        T.copy(A[0], S)
        B[0] = S[0]
        S = T.alloc_shared((64,), "float32")
        T.copy(B, S)
"#;
    let f = parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}"));
    assert!(tlc_ir::verifier::verify(&f).is_err());
    let printed = print_func(&f);
    let again = parse(&printed).unwrap_or_else(|d| panic!("{printed}\n{d:#?}"));
    assert_eq!(again, f, "{printed}");
}

/// Fresh names come from a counter per base name (linear, where trying `name_1`, `name_2`,
/// … afresh for each rename was quadratic in the renames): still the smallest `N` no name
/// of the function has — `i_2`, written by the user, is skipped — and a kernel's renamed
/// buffers are renamed together, each with all its references.
#[test]
fn fresh_names_skip_taken_ones_and_renamed_buffers_keep_their_references() {
    let kernel = r#"    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((32,), "float32")
        R = T.alloc_shared((32,), "float32")
        for i in T.Parallel(32):
            S[i] = A[i]
        for i in T.Parallel(32):
            R[i] = S[31 - i]
        for i in T.Parallel(32):
            A[i] = R[i] + S[i]
"#;
    let src = format!(
        "@T.prim_func\ndef f(A: T.Tensor((32,), \"float32\"), B: T.Tensor((32,), \"int32\")):\n    with T.Kernel(1, threads=1) as bx:\n        i_2 = 7\n        B[0] = i_2\n{kernel}{kernel}{kernel}"
    );
    let f = ok(&src);
    let ks = kernels(&f);
    let allocs: Vec<Vec<&str>> = ks
        .iter()
        .map(|k| k.allocs.iter().map(|a| a.name.name.as_str()).collect())
        .collect();
    assert_eq!(allocs[1..], [["S", "R"], ["S_1", "R_1"], ["S_2", "R_2"]]);
    assert_eq!(mentioned(ks[2]), ["A", "R_1", "S_1"]);
    assert_eq!(mentioned(ks[3]), ["A", "R_2", "S_2"]);
    let mut loops = Vec::new();
    for_each_stmt(&f.body, &mut |s| {
        if let StmtKind::For(l) = &s.kind {
            loops.push(l.var.name.clone());
        }
    });
    let expected: Vec<String> = ["i", "i_1", "i_3", "i_4", "i_5", "i_6", "i_7", "i_8", "i_9"]
        .map(String::from)
        .to_vec();
    assert_eq!(loops, expected);
    assert_eq!(ok(&print_func(&f)), f);
}

/// `cluster_dims=`: one extent or a tuple, x first, constants or tunables; trailing 1s
/// dropped, all ones is no cluster; it prints back as written canonically.
#[test]
fn cluster_dims_forms() {
    let src = |dims: &str| {
        format!(
            "@T.prim_func\ndef f(A: T.Tensor((64,), \"float32\")):\n    with T.Kernel(4, 2, threads=32, cluster_dims={dims}) as (bx, by):\n        A[bx * 8 + by] = 1.0\n"
        )
    };
    let shape = |dims: &str| -> Vec<i64> {
        let f = ok(&src(dims));
        let k = kernels(&f)[0];
        k.cluster.iter().map(|e| e.as_int().unwrap_or(-1)).collect()
    };
    assert_eq!(shape("2"), [2]);
    assert_eq!(shape("(2, 1)"), [2]);
    assert_eq!(shape("(1, 2, 1)"), [1, 2]);
    assert_eq!(shape("(1, 1)"), Vec::<i64>::new());
    assert_eq!(shape("[4, 2]"), [4, 2]);
    let printed = print_func(&ok(&src("(1, 2, 1)")));
    assert!(
        printed.contains("threads=32, cluster_dims=(1, 2)) as (bx, by):"),
        "{printed}"
    );
    assert!(print_func(&ok(&src("(1, 1)"))).contains("threads=32) as (bx, by):"));
    // A tunable extent stays a name until it is bound.
    let tunable = format!("c = T.tunable([2, 1], default=2)\n{}", src("(c, 1)"));
    let f = parse(&tunable).expect("parses");
    let k = kernels(&f)[0];
    assert_eq!(k.cluster.len(), 1);
    assert!(matches!(&k.cluster[0].kind, ExprKind::Var(n) if n == "c"));
    // Errors: too many extents, an extent that is not constant.
    let err = |dims: &str| match parse(&src(dims)) {
        Ok(_) => panic!("cluster_dims={dims} parsed"),
        Err(d) => d.first().map(|d| d.message.clone()).unwrap_or_default(),
    };
    assert_eq!(
        err("(1, 1, 1, 2)"),
        "a thread-block cluster has 1 to 3 dimensions"
    );
    assert!(err("bx").contains("an extent of the cluster shape must be a constant integer"));
}
