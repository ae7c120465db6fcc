//! The three spellings of the seed 000 kernel (TileLang DSL, TVMScript 0.1.x, TVMScript
//! 0.1.15) parse to equal IR, and that IR is what the kernel means.

use tlc_ir::{
    parse, BinOp, DType, Expr, ExprKind, ForKind, PrimFunc, RasterOrder, Scope, StmtKind,
    WarpPolicy,
};

fn fixture(name: &str) -> String {
    let path = format!("{}/../tests/cases/valid/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn parse_ok(name: &str) -> PrimFunc {
    let src = fixture(name);
    match parse(&src) {
        Ok(f) => f,
        Err(errors) => {
            let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("{name} failed to parse:\n{}", msgs.join("\n"))
        }
    }
}

#[test]
fn three_spellings_give_equal_ir() {
    let dsl = parse_ok("seed000_dsl.tir");
    let old = parse_ok("seed000_tvmscript_0_1_x.tir");
    let new = parse_ok("seed000_tvmscript_0_1_15.tir");
    assert_eq!(dsl, old, "DSL vs TVMScript 0.1.x");
    assert_eq!(dsl, new, "DSL vs TVMScript 0.1.15");
}

fn mul(a: Expr, b: Expr) -> Expr {
    Expr::binary(BinOp::Mul, a, b, tlc_ir::Span::DUMMY)
}

#[test]
fn seed_ir_has_the_expected_structure() {
    let f = parse_ok("seed000_dsl.tir");
    assert_eq!(f.name.name, "gemm_schedule");
    assert!(f.dims.is_empty());
    let params: Vec<(&str, DType, Vec<Expr>)> = f
        .params
        .iter()
        .map(|p| (p.name.name.as_str(), p.dtype, p.shape.clone()))
        .collect();
    assert_eq!(
        params,
        vec![
            ("A", DType::Float16, vec![Expr::int(4096), Expr::int(1024)]),
            ("B", DType::Float16, vec![Expr::int(1024), Expr::int(2048)]),
            ("C", DType::Float16, vec![Expr::int(4096), Expr::int(2048)]),
        ]
    );
    assert!(f.params.iter().all(|p| p.scope == Scope::Global));
    let [stmt] = f.body.as_slice() else {
        panic!("expected one kernel, got {:?}", f.body)
    };
    let StmtKind::Kernel(k) = &stmt.kind else {
        panic!("not a kernel")
    };
    assert_eq!(k.grid, vec![Expr::int(16), Expr::int(32)]);
    assert_eq!(k.threads, vec![Expr::int(128)]);
    let vars: Vec<&str> = k.block_vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(vars, ["bx", "by"]);
    let sw = k.swizzle.as_ref().expect("swizzle");
    assert_eq!(
        (sw.panel_size.clone(), sw.order),
        (Expr::int(10), RasterOrder::Row)
    );
    let allocs: Vec<(&str, Scope, DType)> = k
        .allocs
        .iter()
        .map(|a| (a.name.name.as_str(), a.scope, a.dtype))
        .collect();
    assert_eq!(
        allocs,
        [
            ("A_shared", Scope::Shared, DType::Float16),
            ("B_shared", Scope::Shared, DType::Float16),
            ("C_local", Scope::Fragment, DType::Float32),
        ]
    );
    assert_eq!(k.body.len(), 3);
    // T.clear(C_local): a fill of the whole buffer with the integer 0.
    let StmtKind::Fill { dst, value } = &k.body[0].kind else {
        panic!("expected fill")
    };
    assert_eq!(value, &Expr::int(0));
    assert_eq!(dst.buffer.name, "C_local");
    assert!(dst.ranges.iter().all(|r| r.start == Expr::int(0)));
    // The pipelined loop with the corner copy from A.
    let StmtKind::For(lp) = &k.body[1].kind else {
        panic!("expected loop")
    };
    assert_eq!(
        lp.kind,
        ForKind::Pipelined {
            num_stages: Expr::int(3),
            order: vec![],
            stage: vec![]
        }
    );
    assert_eq!(
        (lp.start.clone(), lp.stop.clone()),
        (Expr::int(0), Expr::int(32))
    );
    let StmtKind::Copy { src, dst } = &lp.body[0].kind else {
        panic!("expected copy")
    };
    assert_eq!(src.buffer.name, "A");
    let starts: Vec<Expr> = src.ranges.iter().map(|r| r.start.clone()).collect();
    let extents: Vec<Expr> = src.ranges.iter().map(|r| r.extent.clone()).collect();
    assert_eq!(
        starts,
        vec![
            mul(Expr::var("by"), Expr::int(128)),
            mul(Expr::var("ko"), Expr::int(32))
        ]
    );
    assert_eq!(extents, vec![Expr::int(128), Expr::int(32)]);
    assert_eq!(dst.buffer.name, "A_shared");
    let StmtKind::For(par) = &lp.body[1].kind else {
        panic!("expected parallel")
    };
    assert_eq!(par.kind, ForKind::Parallel);
    assert!(
        matches!(&par.body[0].kind, StmtKind::For(inner) if inner.kind == ForKind::Parallel && inner.var.name == "j")
    );
    let StmtKind::Gemm(g) = &lp.body[2].kind else {
        panic!("expected gemm")
    };
    assert_eq!(
        (g.trans_a, g.trans_b, g.policy, g.clear_accum),
        (false, false, WarpPolicy::Square, false)
    );
    let StmtKind::Copy { dst, .. } = &k.body[2].kind else {
        panic!("expected copy")
    };
    assert_eq!(dst.buffer.name, "C");
    let extents: Vec<&ExprKind> = dst.ranges.iter().map(|r| &r.extent.kind).collect();
    assert_eq!(extents, [&ExprKind::Int(128), &ExprKind::Int(128)]);
}

/// `src` with `T.note(text)` inserted before its first line containing `anchor`, at that
/// line's indentation.
fn with_note(src: &str, anchor: &str, text: &str) -> String {
    let mut out = String::new();
    let mut done = false;
    for line in src.lines() {
        if !done && line.contains(anchor) {
            let indent = &line[..line.len() - line.trim_start().len()];
            out.push_str(&format!("{indent}T.note(\"{text}\")\n"));
            done = true;
        }
        out.push_str(line);
        out.push('\n');
    }
    assert!(done, "no line contains {anchor:?}");
    out
}

#[test]
fn notes_are_read_in_all_three_spellings() {
    let parse_noted = |name: &str| {
        let mut src = fixture(name);
        for (anchor, text) in [
            ("T.copy(", "before the A copy"),
            ("T.gemm(", "in the pipelined loop \\\"quoted\\\""),
        ] {
            src = with_note(&src, anchor, text);
        }
        parse(&src).unwrap_or_else(|e| panic!("{name}: {e:?}\n{src}"))
    };
    let dsl = parse_noted("seed000_dsl.tir");
    assert_eq!(dsl, parse_noted("seed000_tvmscript_0_1_x.tir"), "0.1.x");
    assert_eq!(dsl, parse_noted("seed000_tvmscript_0_1_15.tir"), "0.1.15");
    let StmtKind::Kernel(k) = &dsl.body[0].kind else {
        panic!("not a kernel")
    };
    let StmtKind::For(lp) = &k.body[1].kind else {
        panic!("expected the pipelined loop")
    };
    let notes: Vec<(usize, &str)> = lp
        .body
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match &s.kind {
            StmtKind::Note(t) => Some((i, t.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(
        notes,
        [
            (0, "before the A copy"),
            (3, "in the pipelined loop \"quoted\"")
        ]
    );
}
