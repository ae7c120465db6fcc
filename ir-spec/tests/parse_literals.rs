//! Literals: NaN and infinities in every spelling print as text that parses back to an equal
//! IR, and TVMScript's typed literals (`T.float32(0.5)`) are the DSL's plain literals where
//! that means the same, casts where it does not.

use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::printer::print_func;
use tlc_ir::{parse, verifier::verify, DType, Expr, ExprKind, PrimFunc, Span, StmtKind};

const FLOATS: [&str; 4] = ["float16", "bfloat16", "float32", "float64"];

fn ok(src: &str) -> PrimFunc {
    parse(src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"))
}

/// Parses, verifies, prints, re-parses: the IR must be equal and the print a fixed point.
fn round_trip(src: &str) -> PrimFunc {
    let f = ok(src);
    if let Err(d) = verify(&f) {
        panic!("does not verify: {d:#?}\n{src}");
    }
    let printed = print_func(&f);
    let again =
        parse(&printed).unwrap_or_else(|d| panic!("print does not parse: {d:#?}\n{printed}"));
    assert_eq!(f, again, "print/parse changed the IR\n{printed}");
    assert_eq!(printed, print_func(&again), "fmt is not idempotent");
    f
}

/// A kernel over `X` (64, `xdt`) and `Y` (64, `ydt`) whose parallel loop body is `body`.
fn kernel(xdt: &str, ydt: &str, body: &str) -> String {
    let mut s = format!(
        "@T.prim_func\ndef f(X: T.Tensor((64,), \"{xdt}\"), Y: T.Tensor((64,), \"{ydt}\")):\n    \
         with T.Kernel(1, threads=128) as bx:\n        for i in T.Parallel(64):\n"
    );
    for line in body.lines() {
        s.push_str("            ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// The same kernel in TVMScript 0.1.x spelling.
fn tvmscript(xdt: &str, ydt: &str, body: &str) -> String {
    let mut s = format!(
        "@T.prim_func\ndef f(X: T.Buffer((64,), \"{xdt}\"), Y: T.Buffer((64,), \"{ydt}\")):\n    \
         bx = T.launch_thread(\"blockIdx.x\", 1)\n    tx = T.launch_thread(\"threadIdx.x\", 128)\n    \
         with T.block(\"tilelang_root\"):\n        for i in T.parallel(64):\n"
    );
    for line in body.lines() {
        s.push_str("            ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

/// The value stored by the first statement of the loop body.
fn stored(f: &PrimFunc) -> Expr {
    let mut out = None;
    tlc_ir::visit::for_each_stmt(&f.body, &mut |s| {
        if let (None, StmtKind::Store { value, .. }) = (&out, &s.kind) {
            out = Some(value.clone());
        }
    });
    out.expect("a store")
}

fn lit(v: f64) -> Expr {
    Expr::new(ExprKind::Float(v), Span::DUMMY)
}

fn cast(dt: DType, e: Expr) -> Expr {
    Expr::new(ExprKind::Cast(dt, Box::new(e)), Span::DUMMY)
}

/// Runs `f` on `X` = 0, 1, 2, ... and returns `Y`.
fn run_y(f: &PrimFunc, xdt: DType) -> Vec<f64> {
    let x = Tensor::from_f64(xdt, &[64], &(0..64).map(f64::from).collect::<Vec<_>>()).expect("X");
    let inputs = HashMap::from([("X".to_string(), x)]);
    let opts = RunOptions {
        seed: 0,
        threads: 1,
    };
    let out = run(f, &HashMap::new(), inputs, &opts).unwrap_or_else(|d| panic!("{d:#?}"));
    out.get("Y").expect("Y").to_f64()
}

#[test]
fn nan_and_infinities_round_trip_in_every_float_dtype() {
    for dt in FLOATS {
        let dtype = DType::parse(dt).expect("dtype");
        for (text, value) in [
            ("inf", f64::INFINITY),
            ("-inf", f64::NEG_INFINITY),
            ("nan", f64::NAN),
        ] {
            // The plain literal (Python's spelling), stored and in arithmetic.
            let f = round_trip(&kernel(
                dt,
                dt,
                &format!("Y[i] = float(\"{text}\")\nX[i] = X[i] * float(\"{text}\")"),
            ));
            assert_eq!(stored(&f), lit(value), "{dt} {text}");
            assert!(print_func(&f).contains(&format!("float(\"{text}\")")));
            // TVMScript's typed literal: the plain literal in its own dtype's context ...
            let f = round_trip(&kernel(dt, dt, &format!("Y[i] = T.{dt}(\"{text}\")")));
            assert_eq!(stored(&f), lit(value), "{dt} {text}");
            // ... and a cast elsewhere: a float16 infinity next to a float32 value is float32.
            let other = if dt == "float32" {
                "float64"
            } else {
                "float32"
            };
            let f = round_trip(&kernel(
                other,
                other,
                &format!("Y[i] = X[i] + T.{dt}(\"{text}\")"),
            ));
            let printed = print_func(&f);
            assert!(
                printed.contains(&format!("X[i] + T.cast(float(\"{text}\"), \"{dt}\")")),
                "{printed}"
            );
            // A NaN literal equals itself in the IR.
            assert_eq!(cast(dtype, lit(value)), cast(dtype, lit(value)));
        }
        // TileLang's `T.infinity(dtype)` and its negation.
        let f = round_trip(&kernel(dt, dt, &format!("Y[i] = -T.infinity(T.{dt})")));
        assert_eq!(stored(&f), lit(f64::NEG_INFINITY), "{dt}");
        let f = round_trip(&kernel(
            dt,
            dt,
            &format!("Y[i] = T.max(X[i], T.infinity(\"{dt}\"))"),
        ));
        assert!(print_func(&f).contains("T.max(X[i], float(\"inf\"))"));
    }
}

#[test]
fn built_non_finite_constants_print_as_text_that_parses_back() {
    // What constant folding or a pass could build: bare and cast NaN / infinities.
    let mut f = ok(&kernel("float32", "float16", "Y[i] = 0.0"));
    let values = [f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0];
    for v in values {
        for e in [
            lit(v),
            cast(DType::Float16, lit(v)),
            cast(DType::BFloat16, lit(v)),
            cast(DType::Float64, lit(v)),
        ] {
            tlc_ir::visit::map_body_exprs(&mut f.body, &mut |x| match x.kind {
                ExprKind::Float(_) => e.clone(),
                _ => x,
            });
            let printed = print_func(&f);
            let again = parse(&printed).unwrap_or_else(|d| panic!("{d:#?}\n{printed}"));
            assert_eq!(f, again, "{printed}");
            // Put the placeholder back for the next value.
            tlc_ir::visit::map_body_exprs(&mut f.body, &mut |x| {
                if x == e {
                    lit(0.0)
                } else {
                    x
                }
            });
        }
    }
    // Bits decide equality, except that every NaN is the one NaN of the text.
    assert_ne!(lit(0.0), lit(-0.0));
    assert_eq!(lit(f64::NAN), lit(-f64::NAN));
    assert_ne!(lit(f64::NAN), lit(f64::INFINITY));
}

#[test]
fn non_finite_literals_run_in_the_interpreter() {
    let f = round_trip(&kernel(
        "float32",
        "float32",
        "Y[i] = T.if_then_else(i == 0, float(\"inf\"), T.if_then_else(i == 1, -T.infinity(\"float32\"), T.if_then_else(i == 2, T.float32(\"nan\"), T.max(X[i], T.float16(\"-inf\")))))",
    ));
    let y = run_y(&f, DType::Float32);
    assert_eq!(y[0], f64::INFINITY);
    assert_eq!(y[1], f64::NEG_INFINITY);
    assert!(y[2].is_nan());
    assert_eq!(y[3], 3.0);
    // A float16 infinity stays infinite through conversions.
    let f = round_trip(&kernel(
        "float16",
        "float16",
        "Y[i] = X[i] - T.infinity(\"float16\")",
    ));
    assert!(run_y(&f, DType::Float16)
        .iter()
        .all(|&v| v == f64::NEG_INFINITY));
}

#[test]
fn typed_literals_are_the_dsl_literals() {
    // The example of issue 12: TileLang 0.1.15's print and the DSL are one IR.
    let dsl = round_trip(&kernel(
        "float16",
        "float32",
        "Y[i] = T.cast(X[i], \"float32\") * 0.5",
    ));
    let tvm = round_trip(&tvmscript(
        "float16",
        "float32",
        "Y[i] = T.Cast(\"float32\", X[i]) * T.float32(0.5)",
    ));
    assert_eq!(dsl, tvm);
    assert_eq!(print_func(&dsl), print_func(&tvm));
    for (dsl_body, tvm_body, xdt, ydt) in [
        (
            "Y[i] = X[i] + 3",
            "Y[i] = X[i] + T.int32(3)",
            "int32",
            "int32",
        ),
        (
            "Y[i] = X[i] * 1.0",
            "Y[i] = X[i] * T.float16(1.0)",
            "float16",
            "float16",
        ),
        (
            "Y[i] = 2.5 - X[i]",
            "Y[i] = T.bfloat16(2.5) - X[i]",
            "bfloat16",
            "bfloat16",
        ),
        (
            "Y[i] = T.max(X[i], 0.0)",
            "Y[i] = T.max(X[i], T.float32(0.0))",
            "float32",
            "float32",
        ),
        (
            "Y[i] = T.if_then_else(X[i] < 0.0, 0.0, X[i])",
            "Y[i] = T.if_then_else(X[i] < T.float32(0.0), T.float32(0.0), X[i])",
            "float32",
            "float32",
        ),
        ("Y[i] = 1", "Y[i] = T.float32(1)", "float32", "float32"),
        (
            "Y[i] = X[3] + X[63 - i]",
            "Y[i] = X[T.int32(3)] + X[T.int32(63) - i]",
            "int8",
            "int8",
        ),
        (
            "x = 0.25\nY[i] = x",
            "x = T.float32(0.25)\nY[i] = x",
            "float32",
            "float32",
        ),
        (
            "x: T.float16 = 0.25\nY[i] = x",
            "x: T.float16 = T.float16(0.25)\nY[i] = x",
            "float16",
            "float16",
        ),
        (
            "Y[i] = X[i] * -0.5",
            "Y[i] = X[i] * -T.float32(0.5)",
            "float32",
            "float32",
        ),
    ] {
        let a = round_trip(&kernel(xdt, ydt, dsl_body));
        let b = round_trip(&kernel(xdt, ydt, tvm_body));
        assert_eq!(print_func(&a), print_func(&b), "{dsl_body} vs {tvm_body}");
        assert_eq!(a, b, "{dsl_body} vs {tvm_body}");
    }
}

#[test]
fn typed_literals_keep_their_type_where_it_differs() {
    for (body, xdt, ydt, kept) in [
        // A float16 constant next to a float32 value: the sum is float32, rounded from the
        // float16 value 0.0999755859375, not from 0.1.
        (
            "Y[i] = X[i] + T.float16(0.1)",
            "float32",
            "float32",
            "T.cast(0.1, \"float16\")",
        ),
        // An int64 constant makes the arithmetic int64.
        (
            "Y[i] = X[i] + T.int64(3)",
            "int32",
            "int64",
            "T.cast(3, \"int64\")",
        ),
        // Two literals: the cast makes the product a float32 value, not a weak literal.
        (
            "Y[i] = X[i] + T.float32(0.5) * 2",
            "float16",
            "float32",
            // (the float32 multiply-add is contracted: docs/ir.md, "Contraction")
            "T.fma(T.cast(0.5, \"float32\"), 2, X[i])",
        ),
        // Double rounding: float32 first, then the float16 buffer.
        (
            "Y[i] = T.float32(0.1)",
            "float16",
            "float16",
            "T.cast(0.1, \"float32\")",
        ),
        // A cast of a cast.
        (
            "Y[i] = T.cast(T.float32(0.1), \"float16\")",
            "float16",
            "float16",
            "T.cast(T.cast(0.1, \"float32\"), \"float16\")",
        ),
        // A let without a dtype takes the literal's own dtype, float32.
        (
            "x = T.float16(0.5)\nY[i] = x",
            "float16",
            "float16",
            "x = T.cast(0.5, \"float16\")",
        ),
        // A truncating float-to-int typed literal.
        (
            "Y[i] = X[i] + T.int32(2.5)",
            "int32",
            "int32",
            "T.cast(2.5, \"int32\")",
        ),
        // An integer that does not fit the dtype wraps: kept as written.
        (
            "Y[i] = X[i] + T.int8(300)",
            "int8",
            "int8",
            "T.cast(300, \"int8\")",
        ),
    ] {
        let f = round_trip(&kernel(xdt, ydt, body));
        let printed = print_func(&f);
        assert!(
            printed.contains(kept),
            "{body}: expected `{kept}` in\n{printed}"
        );
    }
    // `T.cast` written out is never touched: the printer's spelling of every cast.
    let f = round_trip(&kernel(
        "float32",
        "float32",
        "Y[i] = X[i] * T.cast(0.5, \"float32\")",
    ));
    assert!(print_func(&f).contains("X[i] * T.cast(0.5, \"float32\")"));
}

#[test]
fn typed_literals_compute_what_they_say() {
    // float16(0.1) is 0.0999755859375: the float32 sum must use that value.
    let f = round_trip(&kernel(
        "float32",
        "float32",
        "Y[i] = X[i] + T.float16(0.1)",
    ));
    let y = run_y(&f, DType::Float32);
    let want = 0.099_975_585_937_5_f64;
    assert_eq!(y[0], want);
    // Normalized, the float32 literal gives the same values as the DSL's.
    let tvm = round_trip(&tvmscript(
        "float16",
        "float32",
        "Y[i] = T.Cast(\"float32\", X[i]) * T.float32(0.1)",
    ));
    let dsl = round_trip(&kernel(
        "float16",
        "float32",
        "Y[i] = T.cast(X[i], \"float32\") * 0.1",
    ));
    assert_eq!(run_y(&tvm, DType::Float16), run_y(&dsl, DType::Float16));
}

#[test]
fn bad_special_floats_are_located_errors() {
    for (body, message, text) in [
        (
            "Y[i] = float(\"abc\")",
            "`float` cannot read the string \"abc\"",
            "\"abc\"",
        ),
        ("Y[i] = float(1)", "`float(...)` takes a string here", "1"),
        (
            "Y[i] = T.float32(\"1.5x\")",
            "`T.float32` cannot read the string \"1.5x\"",
            "\"1.5x\"",
        ),
        (
            "Y[i] = T.int32(\"inf\")",
            "`T.int32` needs a float dtype for an infinity or NaN, found int32",
            "T.int32(\"inf\")",
        ),
        (
            "Y[i] = T.infinity(\"int8\")",
            "`T.infinity` needs a float dtype for an infinity or NaN, found int8",
            "T.infinity(\"int8\")",
        ),
        (
            "Y[i] = T.infinity(\"float8_e4m3\")",
            "float8_e4m3 has no infinity",
            "T.infinity(\"float8_e4m3\")",
        ),
        (
            "Y[i] = T.infinity(\"float33\")",
            "unknown dtype `float33`",
            "\"float33\"",
        ),
        (
            "Y[i] = T.infinity()",
            "`T.infinity` is missing its argument `dtype`",
            "T.infinity()",
        ),
    ] {
        let src = kernel("float32", "float32", body);
        let errors = match parse(&src) {
            Ok(_) => panic!("accepted: {body}"),
            Err(e) => e,
        };
        assert_eq!(errors.len(), 1, "{body}: {errors:#?}");
        let d = &errors[0];
        assert_eq!(d.message, message, "{body}");
        assert_eq!(src.get(d.span.start..d.span.end), Some(text), "{body}");
    }
    // fp8 E5M2 has infinities; NaN exists in both fp8 formats.
    round_trip(&kernel(
        "float8_e5m2",
        "float8_e5m2",
        "Y[i] = T.infinity(\"float8_e5m2\")",
    ));
    round_trip(&kernel(
        "float8_e4m3",
        "float8_e4m3",
        "Y[i] = T.float8_e4m3(\"nan\")",
    ));
}

#[test]
fn typed_integer_literals_serve_where_a_constant_is_required() {
    let typed = ok("@T.prim_func\ndef f(A: T.Tensor((256,), \"float32\")):\n    with T.Kernel(T.int32(2), threads=T.int32(128)) as bx:\n        for i in T.Parallel(T.int32(128)):\n            A[bx * 128 + i] = 1.0\n");
    let plain = ok("@T.prim_func\ndef f(A: T.Tensor((256,), \"float32\")):\n    with T.Kernel(2, threads=128) as bx:\n        for i in T.Parallel(128):\n            A[bx * 128 + i] = 1.0\n");
    assert_eq!(typed, plain);
}
