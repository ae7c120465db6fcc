//! The text of the Hopper (sm_90a) intrinsics: every spelling parses to the IR it names,
//! prints in its canonical form (keywords as the table says, defaults written out) and
//! parses back to the same IR; defaults and keywords name the same call; malformed calls
//! are located errors.

use tlc_ir::printer::print_func;
use tlc_ir::{parse, Intrinsic, PrimFunc, Stmt, StmtKind};

/// A kernel whose 128-thread loop holds `body` (lines at 4 more spaces).
fn kernel(body: &str) -> String {
    let mut text = String::new();
    for line in body.lines() {
        text.push_str("            ");
        text.push_str(line);
        text.push('\n');
    }
    format!(
        "@T.prim_func\ndef k(A: T.Tensor((100, 64), \"float16\")):\n    with T.Kernel(1, threads=128) as bx:\n        S = T.alloc_shared((64, 64), \"float16\")\n        bars = T.alloc_shared((2,), \"int64\")\n        acc = T.alloc_local((32,), \"float32\")\n        p = T.alloc_local((16,), \"float16\")\n        T.fence_proxy_async()\n        for tx in T.thread_binding(128, thread=\"threadIdx.x\"):\n{text}"
    )
}

fn parsed(src: &str) -> PrimFunc {
    parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"))
}

/// The intrinsics of `f` in program order (block level and inside the thread loop).
fn calls(f: &PrimFunc) -> Vec<Intrinsic> {
    fn walk(stmts: &[Stmt], out: &mut Vec<Intrinsic>) {
        for s in stmts {
            match &s.kind {
                StmtKind::Intrinsic(i) => out.push(i.clone()),
                StmtKind::Kernel(k) => walk(&k.body, out),
                StmtKind::For(f) => walk(&f.body, out),
                StmtKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&f.body, &mut out);
    out
}

/// Every new spelling, canonical: what the printer writes.
const CANONICAL: &str = "\
T.mbarrier_init(bars[0], 1)
T.mbarrier_arrive(bars[1])
T.mbarrier_arrive_expect_tx(bars[0], 8192)
T.tma_load(S[0, 0], A[-8, 0], bars[0], box=(64, 64), swizzle=128)
T.mbarrier_wait(bars[0], tx % 2)
T.wgmma_fence()
T.wgmma(acc[0], S[0, 0], S[0, 16], n=64, trans_a=False, trans_b=True, a_swizzle=128, a_lbo=0, a_sbo=1024, b_swizzle=64, b_lbo=4096, b_sbo=512, accumulate=tx > 0)
T.wgmma(acc[0], S[0, 0], S[0, 16], n=64, trans_a=False, trans_b=False, a_swizzle=0, a_lbo=128, a_sbo=256, b_swizzle=0, b_lbo=128, b_sbo=256)
T.wgmma_commit()
T.wgmma_wait(0)
T.setmaxnreg(232, inc=True)
T.setmaxnreg(40, inc=False)
T.tma_load(S[0, 0], A[3, 0], bars[1], box=(64,), swizzle=0)
T.wgmma_rs(acc[0], p[8], S[0, 16], n=64, trans_b=True, b_swizzle=128, b_lbo=0, b_sbo=1024, accumulate=tx > 0)";

#[test]
fn every_spelling_round_trips() {
    let src = kernel(CANONICAL);
    let f = parsed(&src);
    let printed = print_func(&f);
    for line in CANONICAL.lines() {
        assert!(printed.contains(line), "`{line}` not printed:\n{printed}");
    }
    assert!(
        printed.contains("        T.fence_proxy_async()\n"),
        "{printed}"
    );
    let again = parsed(&printed);
    assert_eq!(calls(&again), calls(&f));
    assert_eq!(print_func(&again), printed);
    assert_eq!(calls(&f).len(), 15);
}

#[test]
fn typed_fields() {
    let f = parsed(&kernel(CANONICAL));
    let c = calls(&f);
    assert!(matches!(&c[1], Intrinsic::MbarrierInit { count: 1, .. }));
    assert!(matches!(
        &c[3],
        Intrinsic::MbarrierArriveExpectTx { bytes: 8192, .. }
    ));
    match &c[4] {
        Intrinsic::TmaLoad {
            src,
            box_dims,
            swizzle,
            ..
        } => {
            assert_eq!(box_dims, &[64, 64]);
            assert_eq!(*swizzle, 128);
            assert_eq!(src.indices[0].to_string(), "-8");
        }
        other => panic!("{other:?}"),
    }
    match &c[7] {
        Intrinsic::Wgmma {
            n,
            trans_b,
            b_lbo,
            accumulate,
            ..
        } => {
            assert_eq!((*n, *trans_b, *b_lbo), (64, true, 4096));
            assert_eq!(
                accumulate.as_ref().map(ToString::to_string).as_deref(),
                Some("tx > 0")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        &c[8],
        Intrinsic::Wgmma {
            accumulate: None,
            ..
        }
    ));
    assert!(matches!(
        &c[12],
        Intrinsic::SetMaxNReg { n: 40, inc: false }
    ));
    match &c[14] {
        Intrinsic::WgmmaRs { a, n, trans_b, .. } => {
            assert_eq!((a.buffer.name.as_str(), *n, *trans_b), ("p", 64, true));
            assert_eq!(a.indices[0].to_string(), "8");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn defaults_and_keywords_name_the_same_call() {
    let short = kernel(
        "T.tma_load(S[0, 0], A[0, 0], bars[0], box=(64, 64))\nT.setmaxnreg(n=232)\nT.wgmma(acc[0], S[0, 0], S[0, 16], 64, a_lbo=128, a_sbo=256, b_lbo=128, b_sbo=256)\nT.mbarrier_wait(bar=bars[0], parity=1)",
    );
    let long = kernel(
        "T.tma_load(S[0, 0], A[0, 0], bars[0], box=(64, 64), swizzle=0)\nT.setmaxnreg(232, inc=True)\nT.wgmma(acc[0], S[0, 0], S[0, 16], n=64, trans_a=False, trans_b=False, a_swizzle=0, a_lbo=128, a_sbo=256, b_swizzle=0, b_lbo=128, b_sbo=256)\nT.mbarrier_wait(bars[0], 1)",
    );
    assert_eq!(calls(&parsed(&short)), calls(&parsed(&long)));
}

/// The first error of parsing `body` in the kernel, and the text its span covers.
fn parse_error(body: &str) -> (String, String) {
    let src = kernel(body);
    let d = parse(&src).expect_err("should not parse");
    let first = &d[0];
    let at = src
        .get(first.span.start..first.span.end)
        .unwrap_or("")
        .to_string();
    (first.message.clone(), at)
}

#[test]
fn malformed_calls_are_located_errors() {
    let (m, at) =
        parse_error("T.wgmma(acc[0], S[0, 0], S[0, 16], n=64, a_lbo=0, a_sbo=0, b_lbo=0)");
    assert_eq!(m, "`T.wgmma` is missing its argument `b_sbo`");
    assert!(at.starts_with("T.wgmma("), "{at}");
    let (m, at) = parse_error("T.tma_load(S[0, 0], A[0, 0], bars[0], box=64)");
    assert_eq!(
        m,
        "the box of `T.tma_load` must be a list of constant integers"
    );
    assert_eq!(at, "64");
    let (m, at) = parse_error("T.tma_load(S[0, 0], A[0, 0], bars[0], box=(64, tx))");
    assert_eq!(m, "the box of `T.tma_load` must be a constant integer");
    assert_eq!(at, "tx");
    let (m, _) = parse_error("T.mbarrier_wait(bars[0])");
    assert_eq!(m, "`T.mbarrier_wait` is missing its argument `parity`");
    let (m, at) = parse_error("T.mbarrier_init(bars[0], tx)");
    assert_eq!(
        m,
        "the arrival count of `T.mbarrier_init` must be a constant integer"
    );
    assert_eq!(at, "tx");
}
