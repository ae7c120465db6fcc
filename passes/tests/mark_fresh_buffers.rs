//! `mark-fresh-buffers`: which loops get a `T.fresh` and for which buffers (the corpus and
//! TileLang's examples, and the proof's cases one by one), meaning kept, idempotence.

use crate::common;

use common::{assert_same_meaning, corpus, load, root};
use tlc_ir::printer::print_func;
use tlc_ir::{PrimFunc, Stmt, StmtKind};
use tlc_passes::mark_fresh_buffers::MarkFreshBuffers;
use tlc_passes::{default_pipeline, Pass, PassContext, Target};

fn marked(func: PrimFunc) -> PrimFunc {
    let out = MarkFreshBuffers
        .run(func, &common::cx())
        .expect("mark-fresh-buffers");
    tlc_ir::verifier::verify(&out).expect("marked IR verifies");
    out
}

/// `func` through the default pipeline up to and including `mark-fresh-buffers` (the
/// passes before it make the staging buffers of reductions).
fn through_marking(func: &PrimFunc) -> PrimFunc {
    let cx = PassContext::new(Target::Sm80);
    let mut cur = func.clone();
    // pack-int4 left out: it changes no loop, and a symbolic int4 row (TileLang's int4
    // GEMM) needs its dims bound (`-D`).
    for pass in default_pipeline(Target::Sm80)
        .into_iter()
        .filter(|p| p.name() != "pack-int4")
    {
        cur = pass
            .run(cur, &cx)
            .unwrap_or_else(|e| panic!("{}: {e:?}", pass.name()));
        if pass.name() == "mark-fresh-buffers" {
            return cur;
        }
    }
    panic!("the default pipeline has no mark-fresh-buffers")
}

/// Every `T.fresh` of `body`: (the loop it heads, as `for VAR` or `while`; its buffers).
fn marks(body: &[Stmt]) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    walk(body, &mut out);
    out
}

fn walk(body: &[Stmt], out: &mut Vec<(String, Vec<String>)>) {
    for s in body {
        let (head, inner): (Option<String>, Vec<&[Stmt]>) = match &s.kind {
            StmtKind::For(f) => (Some(format!("for {}", f.var.name)), vec![&f.body]),
            StmtKind::While { body, .. } => (Some("while".to_string()), vec![body]),
            StmtKind::If {
                then_body,
                else_body,
                ..
            } => (None, vec![then_body, else_body]),
            StmtKind::Kernel(k) => (None, vec![&k.body]),
            _ => (None, Vec::new()),
        };
        if let (Some(head), Some(b)) = (head, inner.first()) {
            for t in b.iter() {
                if let StmtKind::Fresh(bufs) = &t.kind {
                    out.push((head.clone(), bufs.iter().map(|b| b.name.clone()).collect()));
                }
            }
        }
        for b in inner {
            walk(b, out);
        }
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn marks_on_the_corpus_and_the_tilelang_examples() {
    let mut table = String::new();
    let mut files: Vec<(String, PrimFunc)> = corpus();
    let mut tilelang: Vec<_> = std::fs::read_dir(root().join("tests/tilelang"))
        .expect("tilelang")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "tir"))
        .collect();
    tilelang.sort();
    for p in tilelang {
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        // Files tlc does not read yet are the TileLang corpus's NOT_YET.
        let Ok(f) = tlc_ir::parse(&text) else {
            continue;
        };
        if tlc_ir::verifier::verify(&f).is_err() {
            continue;
        }
        files.push((
            format!("tilelang/{}", p.file_stem().unwrap().to_string_lossy()),
            f,
        ));
    }
    let mut all = Vec::new();
    for (name, func) in &files {
        let out = through_marking(func);
        for (head, bufs) in marks(&out.body) {
            table.push_str(&format!("{name}: {head}: T.fresh({})\n", bufs.join(", ")));
            all.push((name.clone(), head, bufs));
        }
    }
    let has = |name: &str, head: &str, bufs: &[&str]| {
        all.iter()
            .any(|(n, h, b)| n == name && h == head && *b == strs(bufs))
    };
    // The persistent GEMM's tile loop: the stages and the epilogue tile.
    assert!(
        has(
            "tilelang/gemm_persistent",
            "for bx_wave",
            &["A_shared", "B_shared", "C_shared"]
        ),
        "{table}"
    );
    assert!(
        has(
            "persistent_gemm_reuse",
            "for bx_wave",
            &["A_shared", "B_shared", "C_shared"]
        ),
        "{table}"
    );
    // A `while` loop (stream-K's walk over its iterations).
    assert!(
        has("tilelang/gemm_streamk", "while", &["A_shared", "B_shared"]),
        "{table}"
    );
    // The carried accumulator is left out; the two iteration-local buffers are in.
    assert!(
        has("loop_carried_shared", "for i", &["tile", "out"]),
        "{table}"
    );
    // A plain GEMM's buffers live in its `T.Pipelined` loop, which is not marked.
    assert!(!all.iter().any(|(n, _, _)| n == "seed000_dims"), "{table}");
    insta::assert_snapshot!(table);
}

#[test]
fn keeps_meaning_and_is_idempotent_on_the_corpus() {
    let mut compared = 0;
    for (name, func) in corpus() {
        let once = marked(func.clone());
        compared += assert_same_meaning(&name, &func, &once);
        assert_eq!(marked(once.clone()), once, "{name}: not idempotent");
        let through = through_marking(&func);
        assert_eq!(marked(through.clone()), through, "{name}: not idempotent");
    }
    assert!(compared >= 60, "only {compared} runs compared");
}

/// A kernel with shared `S` (64 float32), a loop over 4 rows of `A` with `body` inside
/// (`S` reads go to `B[i, j]`), and `pre` before the loop.
fn one_loop(pre: &str, head: &str, body: &str) -> PrimFunc {
    let text = format!(
        "@T.prim_func
def f(A: T.Tensor((4, 64), \"float32\"), B: T.Tensor((4, 64), \"float32\"), L: T.Tensor((2,), \"int32\")):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), \"float32\")
{pre}        {head}:
{body}"
    );
    tlc_ir::parse(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"))
}

/// The buffers `marked` names at the head of its one loop (none: not marked).
fn fresh_of(func: PrimFunc) -> Vec<String> {
    let before = func.clone();
    let out = marked(func);
    assert_same_meaning("case", &before, &out);
    marks(&out.body).into_iter().flat_map(|(_, b)| b).collect()
}

const READ: &str = "            for j in T.Parallel(64):\n                B[i, j] = S[63 - j]\n";

#[test]
fn whole_writes_before_reads_are_marked() {
    // A whole-buffer copy, a fill, an element-for-element T.Parallel store.
    for write in [
        "            T.copy(A[i, 0:64], S)\n",
        "            T.fill(S, 1.5)\n",
        "            for j in T.Parallel(64):\n                S[j] = A[i, j] * 2.0\n",
    ] {
        let f = one_loop("", "for i in T.serial(4)", &format!("{write}{READ}"));
        assert_eq!(fresh_of(f), ["S"], "{write}");
    }
    // Both branches of an `if` write it.
    let both = "            if i % 2 == 0:\n                T.copy(A[i, 0:64], S)\n            else:\n                T.clear(S)\n";
    let f = one_loop("", "for i in T.serial(4)", &format!("{both}{READ}"));
    assert_eq!(fresh_of(f), ["S"]);
    // A `while` loop.
    let f = one_loop(
        "        i = T.alloc_var(T.int32, 0)\n",
        "while i < 4",
        &format!("            T.copy(A[i, 0:64], S)\n{READ}            i += 1\n"),
    );
    assert_eq!(fresh_of(f), ["S"]);
    // A nested loop reads what the body wrote before it.
    let nested = "            T.copy(A[i, 0:64], S)\n            for r in T.serial(2):\n                for j in T.Parallel(64):\n                    B[i, j] = S[j] + T.cast(r, \"float32\")\n";
    let f = one_loop("", "for i in T.serial(4)", nested);
    assert_eq!(fresh_of(f), ["S"]);
}

const READ_HALF: &str = "            for j in T.Parallel(32):\n                B[i, j] = S[j]\n";

#[test]
fn what_is_not_proved_is_not_marked() {
    // Each a valid kernel (no read of a never-written element), some of them carrying a
    // value from one iteration to the next, the others iteration-local in fact but not by
    // the proof's rules.
    let cases = [
        // Read before the write: from the second iteration on, the previous one's value.
        "            if i > 0:\n                for j in T.Parallel(64):\n                    B[i, j] = S[63 - j]\n            T.copy(A[i, 0:64], S)\n".to_string(),
        // Written in one branch only.
        format!("            if i % 2 == 0:\n                T.copy(A[i, 0:64], S)\n{READ}"),
        // Written in part, even where only that part is read.
        format!("            T.copy(A[i, 0:32], S[0:32])\n{READ_HALF}"),
        format!("            for j in T.Parallel(32):\n                S[j] = A[i, j]\n{READ_HALF}"),
        // Written under a condition inside the nest (all of it in the first iteration).
        format!(
            "            for j in T.Parallel(64):\n                if j + i < 64:\n                    S[j] = A[i, j]\n{READ}"
        ),
        // Written in a nested loop, which (as far as the proof knows) may run no iteration.
        format!(
            "            for r in T.serial(L[0] % 2 + 1):\n                T.copy(A[i, 0:64], S)\n{READ}"
        ),
    ];
    for body in cases {
        let f = one_loop("", "for i in T.serial(4)", &body);
        assert!(fresh_of(f).is_empty(), "marked:\n{body}");
    }
    // Used before the loop too.
    let f = one_loop(
        "        T.copy(A[0, 0:64], S)\n",
        "for i in T.serial(4)",
        &format!("            T.copy(A[i, 0:64], S)\n{READ}"),
    );
    assert!(fresh_of(f).is_empty());
    // Its loop is pipelined: the stages overlap iterations (no loop around it to mark).
    let f = one_loop(
        "",
        "for i in T.Pipelined(4, num_stages=2)",
        &format!("            T.copy(A[i, 0:64], S)\n{READ}"),
    );
    assert!(fresh_of(f).is_empty());
}

#[test]
fn a_nested_loop_bound_may_read_what_the_body_wrote() {
    // The inner loop's bound reads S once per outer iteration, after the copy.
    let text = "@T.prim_func
def f(A: T.Tensor((4, 64), \"int32\"), B: T.Tensor((4, 64), \"int32\")):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64,), \"int32\")
        for i in T.serial(4):
            T.copy(A[i, 0:64], S)
            for r in T.serial(S[0] % 3 + 1):
                for j in T.Parallel(64):
                    B[i, j] = S[j] + r
";
    let f = tlc_ir::parse(text).expect("parses");
    assert_eq!(fresh_of(f), ["S"]);
    // Read in the bound before the copy: the previous iteration's value.
    let before = text.replace(
        "            T.copy(A[i, 0:64], S)\n            for r in T.serial(S[0] % 3 + 1):\n",
        "            for r in T.serial(T.if_then_else(i > 0, S[0] % 3 + 1, 1)):\n                T.copy(A[i, 0:64], S)\n",
    );
    let f = tlc_ir::parse(&before).expect("parses");
    assert!(fresh_of(f).is_empty());
}

#[test]
fn the_persistent_gemm_keeps_its_meaning_through_the_pipeline_with_the_mark() {
    // The mark survives every later pass, and the interpreter (which enforces it) agrees
    // with the unmarked kernel at every stage (several tiles per block).
    let func = load(&root().join("tests/cases/valid/persistent_gemm_reuse.tir"));
    for target in [Target::Sm80, Target::Sm90a] {
        let stages = common::pipeline_stages(&func, &PassContext::new(target));
        for (pass, out) in &stages {
            let text = print_func(out);
            let after_mark = stages
                .iter()
                .position(|(p, _)| *p == "mark-fresh-buffers")
                .zip(stages.iter().position(|(p, _)| p == pass))
                .is_some_and(|(m, i)| i >= m);
            assert_eq!(
                text.contains("T.fresh(A_shared, B_shared, C_shared)"),
                after_mark,
                "after {pass} on {target}"
            );
        }
        let (_, last) = stages.last().expect("stages");
        assert!(
            common::assert_close_meaning("persistent_gemm_reuse", &func, last, 1e-3) > 0,
            "{target}"
        );
    }
}
