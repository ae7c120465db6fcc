//! Dim expressions: JSON forms, evaluation with floor semantics, checked errors.

use tlc_runtime::{DimExpr, Dims, Op, RuntimeError};

fn parse(json: &str) -> Result<DimExpr, String> {
    serde_json::from_str::<DimExpr>(json).map_err(|e| e.to_string())
}

fn eval(e: &DimExpr, dims: &[(&str, i64)]) -> Result<i64, RuntimeError> {
    Dims::from_pairs(dims.iter().copied()).eval(e)
}

fn op(o: Op, a: i64, b: i64) -> Result<i64, RuntimeError> {
    o.apply(a, b)
}

#[test]
fn json_forms_parse_and_print_canonically() {
    let e = parse(r#"{"op": "ceildiv", "args": [{"dim": "N"}, {"int": 128}]}"#).unwrap();
    assert_eq!(e, DimExpr::ceildiv(DimExpr::dim("N"), DimExpr::int(128)));
    assert_eq!(
        serde_json::to_string(&e).unwrap(),
        r#"{"op":"ceildiv","args":[{"dim":"N"},{"int":128}]}"#
    );
    assert_eq!(e.to_string(), "ceildiv(N, 128)");
    // A bare integer is accepted for {"int": n}, and written back tagged.
    assert_eq!(parse("42").unwrap(), DimExpr::int(42));
    assert_eq!(
        serde_json::to_string(&DimExpr::int(-3)).unwrap(),
        r#"{"int":-3}"#
    );
}

#[test]
fn every_op_name_round_trips() {
    for name in [
        "add", "sub", "mul", "floordiv", "floormod", "ceildiv", "min", "max",
    ] {
        let json = format!(r#"{{"op":"{name}","args":[{{"int":7}},{{"dim":"K"}}]}}"#);
        let e = parse(&json).unwrap();
        assert_eq!(serde_json::to_string(&e).unwrap(), json);
    }
}

#[test]
fn malformed_expressions_are_rejected_with_reasons() {
    let cases = [
        (r#"{"op": "pow", "args": [1, 2]}"#, "unknown op \"pow\""),
        (r#"{"op": "add", "args": [1]}"#, "takes 2 args, found 1"),
        (
            r#"{"op": "add", "args": [1, 2, 3]}"#,
            "takes 2 args, found 3",
        ),
        (r#"{"dim": ""}"#, "non-empty string"),
        (r#"{"dim": 3}"#, "non-empty string"),
        (r#"{"int": 1.5}"#, "64-bit integer"),
        (r#"{"int": 1, "dim": "N"}"#, "exactly the keys"),
        (r#""N""#, "a dim expression is"),
        ("1.5", "a dim expression is"),
    ];
    for (json, want) in cases {
        let err = parse(json).unwrap_err();
        assert!(err.contains(want), "{json}: {err}");
    }
}

#[test]
fn evaluation_uses_floor_semantics() {
    assert_eq!(op(Op::FloorDiv, 7, 2).unwrap(), 3);
    assert_eq!(op(Op::FloorDiv, -7, 2).unwrap(), -4);
    assert_eq!(op(Op::FloorDiv, 7, -2).unwrap(), -4);
    assert_eq!(op(Op::FloorDiv, -7, -2).unwrap(), 3);
    assert_eq!(op(Op::FloorMod, -7, 2).unwrap(), 1);
    assert_eq!(op(Op::FloorMod, 7, -2).unwrap(), -1);
    assert_eq!(op(Op::FloorMod, 6, 3).unwrap(), 0);
    assert_eq!(op(Op::CeilDiv, 1_000_003, 256).unwrap(), 3907);
    assert_eq!(op(Op::CeilDiv, 1024, 256).unwrap(), 4);
    assert_eq!(op(Op::CeilDiv, 0, 256).unwrap(), 0);
    assert_eq!(op(Op::CeilDiv, -7, 2).unwrap(), -3);
    assert_eq!(op(Op::Min, 3, -4).unwrap(), -4);
    assert_eq!(op(Op::Max, 3, -4).unwrap(), 3);
    assert_eq!(op(Op::Sub, 3, 10).unwrap(), -7);
    assert_eq!(op(Op::Mul, -3, 10).unwrap(), -30);
    assert_eq!(op(Op::Add, 3, 10).unwrap(), 13);
}

#[test]
fn floor_ops_agree_with_their_definition() {
    for a in -20i64..=20 {
        for b in [-7i64, -3, -1, 1, 2, 5, 8] {
            let q = op(Op::FloorDiv, a, b).unwrap();
            let r = op(Op::FloorMod, a, b).unwrap();
            assert_eq!(q * b + r, a, "{a} {b}");
            assert!(if b > 0 {
                (0..b).contains(&r)
            } else {
                (b + 1..=0).contains(&r)
            });
            assert_eq!(q, (a as f64 / b as f64).floor() as i64);
            assert_eq!(
                op(Op::CeilDiv, a, b).unwrap(),
                (a as f64 / b as f64).ceil() as i64
            );
        }
    }
}

#[test]
fn overflow_and_division_by_zero_are_errors() {
    let err = op(Op::Mul, i64::MAX, 2).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "cannot evaluate a dim expression: mul({}, 2) overflows int64",
            i64::MAX
        )
    );
    assert!(matches!(
        op(Op::Add, i64::MAX, 1),
        Err(RuntimeError::Eval(_))
    ));
    assert!(matches!(
        op(Op::Sub, i64::MIN, 1),
        Err(RuntimeError::Eval(_))
    ));
    assert!(matches!(
        op(Op::FloorDiv, i64::MIN, -1),
        Err(RuntimeError::Eval(_))
    ));
    assert!(matches!(
        op(Op::CeilDiv, i64::MIN, 1),
        Err(RuntimeError::Eval(_))
    ));
    let err = op(Op::FloorMod, 5, 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot evaluate a dim expression: floormod(5, 0) divides by zero"
    );
    assert!(op(Op::CeilDiv, 5, 0).is_err());
    assert!(op(Op::FloorDiv, 5, 0).is_err());
}

#[test]
fn nested_expressions_evaluate_over_dims() {
    // min(ceildiv(M, 128) * 2, N - 1)
    let e = DimExpr::op(
        Op::Min,
        DimExpr::op(
            Op::Mul,
            DimExpr::ceildiv(DimExpr::dim("M"), DimExpr::int(128)),
            DimExpr::int(2),
        ),
        DimExpr::op(Op::Sub, DimExpr::dim("N"), DimExpr::int(1)),
    );
    assert_eq!(eval(&e, &[("M", 1000), ("N", 100)]).unwrap(), 16);
    assert_eq!(eval(&e, &[("M", 1000), ("N", 10)]).unwrap(), 9);
    let err = eval(&e, &[("M", 1000)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot evaluate a dim expression: dim `N` has no value"
    );
}

#[test]
fn deep_json_is_an_error_not_a_stack_overflow() {
    let depth = 10_000;
    let json = format!(
        "{}1{}",
        r#"{"op":"add","args":[1,"#.repeat(depth),
        "]}".repeat(depth)
    );
    assert!(parse(&json).is_err());
}
