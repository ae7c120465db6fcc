//! Notes (`T.note`) through every pass of both default pipelines. After every pass each
//! note of the input is still there — once, or twice for a note of a pipelined loop's
//! stage-0 statements (the prologue's copy and the look-ahead's; `unroll` keeps a note in
//! its first copy only) — and the output without its notes is exactly the output the pass
//! gives for the input without them: a note changes no decision of any pass (no barrier,
//! no thread guard, no lost vector access or `T.cp_async`, the same stages and names).

use crate::common;

use common::{assert_close_meaning, case, load, root};
use std::collections::HashMap;
use tlc_ir::printer::print_func;
use tlc_ir::visit::{child_bodies_mut, for_each_stmt};
use tlc_ir::{ForKind, PrimFunc, Stmt, StmtKind};
use tlc_passes::{default_pipeline, PassContext, Target};

fn is_note(s: &Stmt) -> bool {
    matches!(s.kind, StmtKind::Note(_))
}

/// `body` without its notes; a planned `T.Pipelined` loop also loses their `order` /
/// `stage` entries (the other statements keep their relative order).
fn strip(body: &mut Vec<Stmt>) {
    for s in body.iter_mut() {
        if let StmtKind::For(f) = &mut s.kind {
            if let ForKind::Pipelined { order, stage, .. } = &mut f.kind {
                if !order.is_empty() {
                    let keep: Vec<usize> = (0..f.body.len())
                        .filter(|&i| !is_note(&f.body[i]))
                        .collect();
                    let kept: Vec<i64> = keep.iter().map(|&i| order[i]).collect();
                    let mut sorted = kept.clone();
                    sorted.sort_unstable();
                    *order = kept
                        .iter()
                        .map(|o| sorted.iter().position(|x| x == o).unwrap_or(0) as i64)
                        .collect();
                    *stage = keep.iter().map(|&i| stage[i]).collect();
                }
            }
        }
        for child in child_bodies_mut(s) {
            strip(child);
        }
    }
    body.retain(|s| !is_note(s));
}

fn stripped(func: &PrimFunc) -> PrimFunc {
    let mut f = func.clone();
    strip(&mut f.body);
    f
}

/// How many times each note text occurs in `func`.
fn notes(func: &PrimFunc) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for_each_stmt(&func.body, &mut |s| {
        if let StmtKind::Note(t) = &s.kind {
            *out.entry(t.clone()).or_insert(0) += 1;
        }
    });
    out
}

fn check(name: &str, func: &PrimFunc, target: Target) {
    let input_notes = notes(func);
    assert!(input_notes.len() >= 5, "{name}: {input_notes:?}");
    let mut with = func.clone();
    let mut without = stripped(func);
    assert!(notes(&without).is_empty());
    for pass in default_pipeline(target) {
        let cx = PassContext::new(target);
        let what = format!("{name} on {target} after {}", pass.name());
        with = pass
            .run(with, &cx)
            .unwrap_or_else(|e| panic!("{what}: {e:#?}"));
        without = pass
            .run(without, &cx)
            .unwrap_or_else(|e| panic!("{what} (no notes): {e:#?}"));
        if let Err(e) = tlc_ir::verifier::verify(&with) {
            panic!("{what}: {e:#?}\n{}", print_func(&with));
        }
        let text = print_func(&with);
        let back = tlc_ir::parse(&text).unwrap_or_else(|e| panic!("{what}: {e:#?}\n{text}"));
        assert_eq!(back, with, "{what}: the print does not parse back equal");
        let found = notes(&with);
        for note in input_notes.keys() {
            let n = found.get(note).copied().unwrap_or(0);
            assert!(
                (1..=2).contains(&n),
                "{what}: note {note:?} occurs {n} times\n{text}"
            );
        }
        // Besides the input's notes, only the remarks the passes write themselves (which
        // the run without notes writes too: a pipeline that keeps cp.async on sm_90a).
        let remarks = notes(&without);
        for note in found.keys() {
            assert!(
                input_notes.contains_key(note) || remarks.contains_key(note),
                "{what}: a note from nowhere: {note:?}"
            );
        }
        // The code, notes aside (the passes' own remarks are in both runs).
        assert!(
            stripped(&with) == stripped(&without),
            "{what}: the notes changed the code\n--- with notes, stripped:\n{}\n--- without notes:\n{}",
            print_func(&stripped(&with)),
            print_func(&stripped(&without))
        );
    }
    assert_close_meaning(&format!("{name} on {target}"), func, &with, 1e-3);
}

#[test]
fn every_pass_keeps_notes_and_ignores_them() {
    let cases = [
        ("notes", case("notes")),
        (
            "notes_everywhere",
            load(&root().join("passes/tests/cases/notes_everywhere.tir")),
        ),
    ];
    for (name, func) in &cases {
        for target in [Target::Sm80, Target::Sm90a] {
            check(name, func, target);
        }
    }
}
