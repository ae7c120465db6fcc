//! `pipeline-planning`: snapshots of planned loops, the plan of each kind of statement
//! (copies in stage 0, what they may not run ahead of), user plans checked with located
//! errors, and meaning kept (the interpreter runs a pipelined loop as a serial one).

use crate::common;
use crate::pipe;

use common::{assert_same_meaning, corpus};
use pipe::{case, parse};
use tlc_ir::printer::print_func;
use tlc_ir::visit::for_each_stmt;
use tlc_ir::{ForKind, PrimFunc, StmtKind, Target};
use tlc_passes::pipeline_planning::PipelinePlanning;
use tlc_passes::{Pass, PassContext};

fn planned(func: PrimFunc) -> PrimFunc {
    let out = PipelinePlanning
        .run(func, &common::cx())
        .expect("pipeline-planning");
    tlc_ir::verifier::verify(&out).expect("planned IR verifies");
    out
}

/// (order, stage) of every pipelined loop.
fn plans(func: &PrimFunc) -> Vec<(Vec<i64>, Vec<i64>)> {
    let mut out = Vec::new();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::For(f) = &s.kind {
            if let ForKind::Pipelined { order, stage, .. } = &f.kind {
                out.push((order.clone(), stage.clone()));
            }
        }
    });
    out
}

fn errors(func: PrimFunc) -> Vec<String> {
    PipelinePlanning
        .run(func, &common::cx())
        .err()
        .unwrap_or_default()
        .into_iter()
        .map(|d| {
            let notes: Vec<String> = d.notes.iter().map(|n| n.message.clone()).collect();
            format!("{} | {}", d.message, notes.join(" | "))
        })
        .collect()
}

#[test]
fn snapshot_gemm_seed000() {
    let out = planned(common::case("gemm_seed000"));
    assert_eq!(plans(&out), [(vec![0, 1, 2], vec![0, 0, 2])]);
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn snapshot_pipe_simt_gemm() {
    let out = planned(case("pipe_simt_gemm"));
    assert_eq!(plans(&out), [(vec![0, 1, 2], vec![0, 0, 2])]);
    insta::assert_snapshot!(print_func(&out));
}

#[test]
fn planning_keeps_meaning_and_is_idempotent() {
    let mut compared = 0;
    for (name, func) in corpus() {
        let out = planned(func.clone());
        assert_eq!(planned(out.clone()), out, "{name}: not idempotent");
        compared += assert_same_meaning(&name, &func, &out);
    }
    assert!(compared >= 60, "only {compared} runs compared");
}

/// A kernel whose pipelined loop body is `body` (8 spaces of indent), over buffers
/// A (global), G (global, written), S, S2 (shared), F (fragment).
fn kernel(body: &str, before: &str) -> PrimFunc {
    parse(&format!(
        r#"@T.prim_func
def f(
    A: T.Tensor((64, 256), "float32"),
    G: T.Tensor((64, 32), "float32"),
):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_shared((64, 32), "float32")
        S2 = T.alloc_shared((64, 32), "float32")
        F = T.alloc_fragment((64, 32), "float32")
        T.clear(F)
{before}        for ko in T.Pipelined(8, num_stages=3):
{body}        T.copy(F, G)
"#
    ))
}

#[test]
fn copies_go_to_stage_zero_and_order_puts_them_first() {
    // The copy comes after the (independent) accumulation of another buffer: stage 0 and
    // first in the order; the let it needs is pure, so it goes with it.
    let f = kernel(
        "            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S2[i, j]\n            kb = ko * 32\n            T.copy(A[0, kb], S)\n            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j]\n",
        "",
    );
    assert_eq!(plans(&planned(f)), [(vec![2, 0, 1, 3], vec![2, 0, 0, 2])]);
}

#[test]
fn what_a_copy_may_not_run_ahead_of_keeps_it_in_the_last_stage() {
    // The stages of the body as written (the note the plan adds left out).
    let late = |body: &str, before: &str| {
        let out = planned(kernel(body, before));
        let notes = notes_in_loop(&out);
        let stages = plans(&out)[0].1.clone();
        stages[notes.len()..].to_vec()
    };
    let use_s = "            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j]\n";
    // Reads a global buffer the loop writes.
    assert_eq!(
        late(
            &format!("            T.copy(G, S)\n{use_s}            T.copy(F, G)\n"),
            ""
        ),
        [2, 2, 2]
    );
    // Overwrites S after a same-iteration read of it.
    assert_eq!(
        late(
            &format!("{use_s}            T.copy(A[0, ko * 32], S)\n"),
            ""
        ),
        [2, 2]
    );
    // S is used before the loop.
    assert_eq!(
        late(
            &format!("            T.copy(A[0, ko * 32], S)\n{use_s}"),
            "        T.clear(S)\n"
        ),
        [2, 2]
    );
    // Needs a let that reads memory the loop writes (a later-stage statement; a let that
    // reads an index tensor the loop never writes goes along:
    // `a_let_reading_an_index_tensor_runs_ahead_with_its_copy`).
    assert_eq!(
        late(
            &format!("            kb = T.cast(G[0, 0], \"int32\")\n            T.copy(A[0, kb], S)\n{use_s}            T.copy(F, G)\n"),
            ""
        ),
        [2, 2, 2, 2]
    );
    // ... or per-thread storage.
    assert_eq!(
        late(
            &format!("            kb = T.cast(F[0, 0], \"int32\")\n            T.copy(A[0, kb], S)\n{use_s}"),
            ""
        ),
        [2, 2, 2]
    );
    // A parallel nest that also reads shared memory is not a global -> shared copy.
    assert_eq!(
        late(
            &format!("            for i, j in T.Parallel(64, 32):\n                S[i, j] = A[i, ko * 32 + j] + S2[i, j]\n{use_s}"),
            ""
        ),
        [2, 2]
    );
    // ... and one that writes a fragment neither.
    assert_eq!(late("            T.copy(A[0, ko * 32], F)\n", ""), [2]);
}

/// A let that loads from a tensor the loop never writes (a page table's entry) has the same
/// value anywhere in the loop: it takes stage 0 with the copy whose origin it computes,
/// through a pure let as well, and the plan keeps the meaning.
#[test]
fn a_let_reading_an_index_tensor_runs_ahead_with_its_copy() {
    let use_s = "            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j]\n";
    let f = kernel(
        &format!("            kb = T.cast(A[0, ko], \"int32\") % 8\n            col = kb * 32\n            T.copy(A[0, col], S)\n{use_s}"),
        "",
    );
    let out = planned(f.clone());
    assert!(notes_in_loop(&out).is_empty(), "{:?}", notes_in_loop(&out));
    assert_eq!(plans(&out), [(vec![0, 1, 2, 3], vec![0, 0, 0, 2])]);
    assert!(assert_same_meaning("index let", &f, &out) > 0);
}

/// The notes at the head of the first pipelined loop's body.
fn notes_in_loop(func: &PrimFunc) -> Vec<String> {
    let mut notes = Vec::new();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::For(f) = &s.kind {
            if matches!(f.kind, ForKind::Pipelined { .. }) && notes.is_empty() {
                for b in &f.body {
                    match &b.kind {
                        StmtKind::Note(t) => notes.push(t.clone()),
                        _ => break,
                    }
                }
            }
        }
    });
    notes
}

/// A copy kept in the last stage makes the loop serial: a note at the head of its body says
/// why, planned with the statement after it; a loop whose copies run ahead gets none.
#[test]
fn a_copy_kept_late_is_explained_by_a_note() {
    let use_s = "            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j]\n";
    let out = planned(kernel(
        &format!("            T.copy(A[0, ko * 32], S)\n{use_s}"),
        "        T.clear(S)\n",
    ));
    assert_eq!(
        notes_in_loop(&out),
        [
            "T.Pipelined(num_stages=3) runs as a serial loop: the copy into `S` is not filled \
          ahead: shared `S` is also used outside this loop (another loop or code before it; \
          give each pipelined loop its own buffers)"
        ]
    );
    assert_eq!(plans(&out), [(vec![0, 1, 2], vec![2, 2, 2])]);
    let out = planned(kernel(
        &format!("{use_s}            T.copy(A[0, ko * 32], S)\n"),
        "",
    ));
    let notes = notes_in_loop(&out);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].ends_with(
            "it depends on statement 1 of the body (it writes `S`, which the other reads)"
        ) || notes[0].contains("depends on statement 1"),
        "{notes:?}"
    );
    let out = planned(kernel(
        &format!("            T.copy(A[0, ko * 32], S)\n{use_s}"),
        "",
    ));
    assert!(notes_in_loop(&out).is_empty());
}

#[test]
fn a_user_plan_is_kept_when_valid() {
    let src = "            T.copy(A[0, ko * 32], S)\n            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j]\n";
    let f = kernel(src, "");
    let mut text = print_func(&f);
    text = text.replace("num_stages=3)", "num_stages=3, order=[0, 1], stage=[0, 1])");
    let user = parse(&text);
    assert_eq!(planned(user.clone()), user);
}

fn with_plan(body: &str, plan: &str) -> PrimFunc {
    let text = print_func(&kernel(body, ""));
    parse(&text.replace("num_stages=3)", &format!("num_stages=3, {plan})")))
}

#[test]
fn invalid_user_plans_are_located_errors() {
    let body = "            T.copy(A[0, ko * 32], S)\n            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j]\n";
    let e = errors(with_plan(body, "order=[0], stage=[0]"));
    assert!(
        e[0].contains("`order` has 1 and `stage` 1 entries, but the body has 2 statements"),
        "{e:?}"
    );
    let e = errors(with_plan(body, "order=[0, 1], stage=[0, 3]"));
    assert!(e[0].contains("stage 3 is outside 0..3"), "{e:?}");
    let e = errors(with_plan(body, "order=[1, 1], stage=[0, 2]"));
    assert!(
        e[0].contains("`order` must list each position 0..1 exactly once"),
        "{e:?}"
    );
    let e = errors(with_plan(body, "order=[0, 1], stage=[2, 0]"));
    assert_eq!(e.len(), 3, "{e:?}");
    assert!(e[0].contains("this stage-0 statement depends on a stage-2 statement of the same iteration: it reads `S`, which the other writes"), "{e:?}");
    // ... and the stage-0 accumulation writes a fragment, and reads `S`, written in stage 2.
    assert!(
        e[1].contains("may only write shared memory, but this one writes `F` (fragment)"),
        "{e:?}"
    );
    assert!(
        e[2].contains("accesses `S`, which a later-stage statement writes"),
        "{e:?}"
    );
    let e = errors(with_plan(body, "order=[1, 0], stage=[0, 0]"));
    assert!(
        e[0].contains("`order` runs this statement before one it depends on"),
        "{e:?}"
    );
    // A stage-0 copy reading a buffer a later stage writes.
    let body2 = "            T.copy(G, S)\n            T.copy(S, G)\n";
    let e = errors(with_plan(body2, "order=[0, 1], stage=[0, 2]"));
    assert!(
        e[0].contains("accesses `G`, which a later-stage statement writes"),
        "{e:?}"
    );
    // The error points at the statement.
    let func = with_plan(body, "order=[0, 1], stage=[2, 0]");
    let d = PipelinePlanning.run(func, &common::cx()).err().unwrap();
    assert!(!d[0].span.is_dummy());
    assert_eq!(d[0].notes.iter().filter(|n| n.span.is_some()).count(), 1);
}

/// A ring of `num_stages` copies of the stage-0 buffers that cannot fit in a block's shared
/// memory is refused at `num_stages` before any per-stage work (issue 33: sm_90a's TMA
/// lowering worked stage by stage, and `num_stages=2^31` ran for hours), by
/// `pipeline-planning` and by `inject-software-pipeline` when it plans alone. S is 64×32
/// float32, 8192 bytes a stage: sm_80's 166912 bytes hold 20 stages, sm_90a's 232448 hold 28.
#[test]
fn a_ring_over_shared_memory_is_refused_at_num_stages() {
    use tlc_passes::inject_software_pipeline::InjectSoftwarePipeline;
    let body = "            T.copy(A[0, ko * 32], S)\n            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j]\n";
    let text = |stages: &str, plan: &str| {
        print_func(&kernel(body, ""))
            .replace("num_stages=3)", &format!("num_stages={stages}{plan})"))
    };
    for (target, fits) in [(Target::Sm80, 20), (Target::Sm90a, 28)] {
        let cx = PassContext::new(target);
        let ok = PipelinePlanning.run(parse(&text(&fits.to_string(), "")), &cx);
        assert!(ok.is_ok(), "{target}: {fits} stages fit");
        for stages in [
            (fits + 1).to_string(),
            "2147483648".to_string(),
            i64::MAX.to_string(),
        ] {
            for plan in ["", ", order=[0, 1], stage=[0, 1]"] {
                let src = text(&stages, plan);
                for (pass, result) in [
                    ("pipeline-planning", PipelinePlanning.run(parse(&src), &cx)),
                    ("inject", InjectSoftwarePipeline.run(parse(&src), &cx)),
                ] {
                    let d = result.err().unwrap_or_else(|| panic!("{pass} {stages}"));
                    assert_eq!(d.len(), 1, "{pass} {stages}: {d:?}");
                    assert!(
                        d[0].message.starts_with(&format!(
                            "`num_stages={stages}` needs {} bytes of shared memory for the \
                             pipeline's stages ({stages} copies of `S`: 8192 bytes a stage), \
                             more than the {} a block may have on {target}",
                            stages
                                .parse::<i64>()
                                .ok()
                                .and_then(|s| s.checked_mul(8192))
                                .map_or("more than 2^63".to_string(), |b| b.to_string()),
                            target.max_shared_bytes()
                        )),
                        "{pass}: {}",
                        d[0].message
                    );
                    assert_eq!(&src[d[0].span.start..d[0].span.end], stages, "{pass}");
                    assert_eq!(d[0].notes[0].message, format!("at most {fits} stages fit (the rest of the kernel's shared memory aside)"));
                }
            }
        }
    }
}

/// The dependency graph keeps only the nearest dependencies (edges as many as the body's
/// accesses, not one per pair of statements): every edge is a dependency of the pairwise
/// definition, with its reason, and every pairwise dependency is a path of edges. Checked
/// on every pipelined loop of the corpus and on a body of lets (pure and not), notes, and
/// buffers read and written by several statements.
#[test]
fn the_nearest_dependencies_reach_every_pairwise_one() {
    use petgraph::graph::NodeIndex;
    use petgraph::visit::EdgeRef;
    use tlc_passes::analysis::schedule::{dependency, KernelFacts, LoopGraph};
    let mixed = kernel(
        "            T.note(\"first\")\n            kb = ko * 32\n            T.copy(A[0, kb], S)\n            x = G[0, 0]\n            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j] + x\n            T.copy(A[0, kb + 1], S2)\n            for i, j in T.Parallel(64, 32):\n                S[i, j] = S2[i, j]\n            for i, j in T.Parallel(64, 32):\n                F[i, j] = F[i, j] + S[i, j] * x\n            T.note(\"last\")\n            T.copy(F, G)\n",
        "",
    );
    let mut funcs: Vec<PrimFunc> = corpus().into_iter().map(|(_, f)| f).collect();
    funcs.push(mixed);
    let mut loops = 0;
    for func in &funcs {
        for_each_stmt(&func.body, &mut |s| {
            let StmtKind::Kernel(k) = &s.kind else {
                return;
            };
            let facts = KernelFacts::of(k, &func.params);
            for_each_stmt(&k.body, &mut |s| {
                let StmtKind::For(f) = &s.kind else { return };
                if !matches!(f.kind, ForKind::Pipelined { .. }) {
                    return;
                }
                let g = LoopGraph::build(&f.body, &facts, &Default::default());
                let n = g.stmts.len();
                for e in g.graph.edge_references() {
                    let (i, j) = (e.source().index(), e.target().index());
                    assert!(i < j);
                    assert_eq!(
                        Some(e.weight()),
                        dependency(&g.stmts[i], &g.stmts[j]).as_ref()
                    );
                }
                for i in 0..n {
                    let mut dfs = petgraph::visit::Dfs::new(&g.graph, NodeIndex::new(i));
                    let mut reached = std::collections::HashSet::new();
                    while let Some(x) = dfs.next(&g.graph) {
                        reached.insert(x.index());
                    }
                    for j in i + 1..n {
                        if dependency(&g.stmts[i], &g.stmts[j]).is_some() {
                            assert!(reached.contains(&j), "{i} -> {j} of {n} not reached");
                        }
                    }
                }
                loops += 1;
            });
        });
    }
    assert!(loops >= 10, "only {loops} pipelined loops");
}
