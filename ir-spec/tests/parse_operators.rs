//! The operators and calls beyond index math: bitwise `& | ^ << >> ~`, augmented assignment
//! (`+=` …), math functions (`T.exp` …), `x.astype(dt)`, `T.clamp`, `T.Serial` and
//! `num_stages=0`. What each parses to, that every printed form parses back equal (random
//! trees over every operator, so precedence is exercised), and what the interpreter computes.

use std::collections::HashMap;
use tlc_ir::interp::{self, RunOptions, Tensor};
use tlc_ir::{
    parse, printer::print_func, BinOp, DType, Expr, ExprKind, ForKind, MathFn, PrimFunc, Span,
    StmtKind, UnOp,
};

fn ok(src: &str) -> PrimFunc {
    match parse(src) {
        Ok(f) => f,
        Err(errors) => {
            let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            panic!("failed to parse:\n{src}\n{}", msgs.join("\n"))
        }
    }
}

/// One kernel over `I` (int32), `U` (uint32), `F` (float32), `H` (float16), 64 elements
/// each, one thread per element (`i`); `body` is written at 12 spaces.
fn wrap(body: &str) -> String {
    let mut s = String::from(
        "@T.prim_func\ndef f(\n    I: T.Tensor((64,), \"int32\"),\n    U: T.Tensor((64,), \"uint32\"),\n    F: T.Tensor((64,), \"float32\"),\n    H: T.Tensor((64,), \"float16\"),\n):\n    with T.Kernel(1, threads=64) as bx:\n        for i in T.Parallel(64):\n",
    );
    for line in body.lines() {
        s.push_str("            ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn same(a: &str, b: &str) {
    assert_eq!(ok(&wrap(a)), ok(&wrap(b)), "\n{a}\n  vs\n{b}");
}

/// The stored value of the body's one store.
fn stored(src: &str) -> Expr {
    let f = ok(&wrap(src));
    let mut found = None;
    tlc_ir::visit::for_each_stmt(&f.body, &mut |s| {
        if let StmtKind::Store { value, .. } = &s.kind {
            found = Some(value.clone());
        }
    });
    found.expect("a store")
}

fn d() -> Span {
    Span::DUMMY
}
fn v(n: &str) -> Expr {
    Expr::var(n)
}
fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::new(ExprKind::Binary(op, Box::new(a), Box::new(b)), d())
}

#[test]
fn bitwise_operators_bind_as_in_python() {
    // `|` < `^` < `&` < shifts < `+`.
    assert_eq!(
        stored("I[i] = i | i ^ i & i << i + i"),
        bin(
            BinOp::BitOr,
            v("i"),
            bin(
                BinOp::BitXor,
                v("i"),
                bin(
                    BinOp::BitAnd,
                    v("i"),
                    bin(BinOp::Shl, v("i"), bin(BinOp::Add, v("i"), v("i")))
                )
            )
        )
    );
    // Comparisons bind looser than every bit operator; `~` as tight as unary minus.
    assert_eq!(
        stored("I[i] = T.if_then_else(i & 1 == 0, ~i, -i)"),
        Expr::new(
            ExprKind::Select(
                Box::new(bin(
                    BinOp::Eq,
                    bin(BinOp::BitAnd, v("i"), Expr::int(1)),
                    Expr::int(0)
                )),
                Box::new(Expr::new(
                    ExprKind::Unary(UnOp::BitNot, Box::new(v("i"))),
                    d()
                )),
                Box::new(Expr::new(ExprKind::Unary(UnOp::Neg, Box::new(v("i"))), d())),
            ),
            d()
        )
    );
}

#[test]
fn augmented_assignment_is_a_store_of_the_combined_value() {
    same("I[i] += 3", "I[i] = I[i] + 3");
    same("F[i] *= F[i] + 1.0", "F[i] = F[i] * (F[i] + 1.0)");
    same("I[i] //= 2", "I[i] = I[i] // 2");
    same("I[i] %= 5", "I[i] = I[i] % 5");
    same("I[i] <<= 2", "I[i] = I[i] << 2");
    same("I[i] >>= i & 3", "I[i] = I[i] >> (i & 3)");
    same("I[i] &= 7", "I[i] = I[i] & 7");
    same("I[i] |= 8", "I[i] = I[i] | 8");
    same("I[i] ^= i", "I[i] = I[i] ^ i");
    same("F[i] /= 2.0", "F[i] = F[i] / 2.0");
    same("F[i] -= 1.0", "F[i] = F[i] - 1.0");
}

#[test]
fn astype_clamp_and_math_spellings() {
    same(
        "H[i] = F[i].astype(\"float16\")",
        "H[i] = T.cast(F[i], \"float16\")",
    );
    same(
        "H[i] = F[i].astype(T.float16)",
        "H[i] = T.cast(F[i], \"float16\")",
    );
    same(
        "F[i] = T.clamp(F[i], -1.0, 1.0)",
        "F[i] = T.min(T.max(F[i], -1.0), 1.0)",
    );
    same("F[i] = T.pow(y=2.0, x=F[i])", "F[i] = T.pow(F[i], 2.0)");
    same(
        "H[i] = F[i].astype(H.dtype)",
        "H[i] = T.cast(F[i], \"float16\")",
    );
    same(
        "F[i] = T.cast(T.cast(F[i], \"float8_e4m3fn\"), \"float32\")",
        "F[i] = T.cast(T.cast(F[i], \"float8_e4m3\"), \"float32\")",
    );
    for f in MathFn::ALL {
        let args = ["F[i]"; 3][..f.arity()].join(", ");
        let e = stored(&format!("F[i] = T.{}({args})", f.name()));
        assert!(matches!(e.kind, ExprKind::Math(g, ref a) if g == f && a.len() == f.arity()));
    }
}

#[test]
fn serial_spellings_and_num_stages_zero_are_serial_loops() {
    let loop_kind = |src: &str| -> ForKind {
        let f = ok(&wrap(src));
        let mut kinds = Vec::new();
        tlc_ir::visit::for_each_stmt(&f.body, &mut |s| {
            if let StmtKind::For(l) = &s.kind {
                if l.var.name == "k" {
                    kinds.push(l.kind.clone());
                }
            }
        });
        kinds.pop().expect("loop k")
    };
    assert_eq!(
        loop_kind("for k in T.Serial(4):\n    I[i] += k"),
        ForKind::Serial
    );
    assert_eq!(
        loop_kind("for k in T.Pipelined(4, num_stages=0):\n    I[i] += k"),
        ForKind::Serial
    );
}

/// A tiny deterministic generator (xorshift), so the trees are the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random int32 tree over every integer operator (leaves: `i`, `I[i]`, small literals
/// next to a non-literal, so nothing folds).
fn int_tree(r: &mut Rng, depth: u32) -> Expr {
    const OPS: [BinOp; 14] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::FloorDiv,
        BinOp::FloorMod,
        BinOp::Min,
        BinOp::Max,
        BinOp::BitAnd,
        BinOp::BitOr,
        BinOp::BitXor,
        BinOp::Shl,
        BinOp::Shr,
        BinOp::Div,
        BinOp::CeilDiv,
    ];
    if depth == 0 || r.pick(4) == 0 {
        return match r.pick(2) {
            0 => v("i"),
            _ => Expr::new(
                ExprKind::Load {
                    buffer: "I".into(),
                    indices: vec![v("i")],
                },
                d(),
            ),
        };
    }
    match r.pick(8) {
        0 => Expr::new(
            ExprKind::Unary(UnOp::BitNot, Box::new(int_tree(r, depth - 1))),
            d(),
        ),
        1 => Expr::new(
            ExprKind::Unary(UnOp::Neg, Box::new(int_tree(r, depth - 1))),
            d(),
        ),
        2 => bin(
            OPS[r.pick(OPS.len())],
            int_tree(r, depth - 1),
            Expr::int(r.pick(7) as i64 + 1),
        ),
        _ => bin(
            OPS[r.pick(OPS.len())],
            int_tree(r, depth - 1),
            int_tree(r, depth - 1),
        ),
    }
}

/// A random float32 tree over the float operators and every math function.
fn float_tree(r: &mut Rng, depth: u32) -> Expr {
    if depth == 0 || r.pick(4) == 0 {
        return Expr::new(
            ExprKind::Load {
                buffer: "F".into(),
                indices: vec![v("i")],
            },
            d(),
        );
    }
    match r.pick(3) {
        0 => {
            let f = MathFn::ALL[r.pick(MathFn::ALL.len())];
            let args = (0..f.arity()).map(|_| float_tree(r, depth - 1)).collect();
            Expr::new(ExprKind::Math(f, args), d())
        }
        _ => {
            let ops = [BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Max];
            let (a, b) = (float_tree(r, depth - 1), float_tree(r, depth - 1));
            let mut op = ops[r.pick(ops.len())];
            // A sum with a product operand is written `T.fma` (rule T6; the random trees
            // draw `T.fma` among the math functions).
            let product = |e: &Expr| matches!(e.kind, ExprKind::Binary(BinOp::Mul, ..));
            if matches!(op, BinOp::Add | BinOp::Sub) && (product(&a) || product(&b)) {
                op = BinOp::Max;
            }
            bin(op, a, b)
        }
    }
}

#[test]
fn random_operator_trees_print_and_parse_back_equal() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        for (buffer, tree) in [("I", int_tree(&mut r, 4)), ("F", float_tree(&mut r, 3))] {
            let src = format!("{buffer}[i] = {tree}");
            assert_eq!(stored(&src), tree, "{src}");
            let f = ok(&wrap(&src));
            assert_eq!(ok(&print_func(&f)), f, "{src}");
        }
    }
}

fn run(src: &str, inputs: Vec<(&str, Tensor)>) -> HashMap<String, Tensor> {
    let f = ok(&wrap(src));
    let inputs = inputs
        .into_iter()
        .map(|(k, t)| (k.to_string(), t))
        .collect();
    interp::run(
        &f,
        &HashMap::new(),
        inputs,
        &RunOptions {
            seed: 1,
            threads: 1,
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn ints(values: impl Fn(i64) -> i64) -> Tensor {
    let v: Vec<f64> = (0..64).map(|i| values(i) as f64).collect();
    Tensor::from_f64(DType::Int32, &[64], &v).expect("tensor")
}

/// A contracted difference (`a * b - c` is `T.fma(a, b, -c)`, docs/ir.md "Contraction")
/// subtracts the operand's float32 value, as the source does: an unsigned integer is
/// converted before it is negated (negated as a uint32 it would wrap to ~4.29e9), and an
/// int 0 subtracts +0.0 (a -0.0 product stays -0.0).
#[test]
fn contracted_differences_convert_integers_before_negating() {
    let half = Tensor::from_f64(DType::Float32, &[64], &[0.5; 64]).expect("tensor");
    let us: Vec<f64> = (0..64).map(f64::from).collect();
    let u = Tensor::from_f64(DType::UInt32, &[64], &us).expect("tensor");
    let out = run(
        "F[i] = F[i] * F[i] - U[i]\nU[i] = 0",
        vec![("F", half), ("U", u)],
    );
    let f = out["F"].to_f64();
    for (i, v) in f.iter().enumerate() {
        assert_eq!(*v, 0.25 - i as f64, "F[{i}]");
    }
    let negzero = Tensor::from_f64(DType::Float32, &[64], &[-0.0; 64]).expect("tensor");
    let ones = Tensor::from_f64(DType::Float16, &[64], &[1.0; 64]).expect("tensor");
    let out = run(
        "F[i] = F[i] * T.cast(H[i], \"float32\") - I[i] * 0",
        vec![("F", negzero), ("H", ones), ("I", ints(|i| i))],
    );
    assert!(out["F"]
        .to_f64()
        .iter()
        .all(|v| *v == 0.0 && v.is_sign_negative()));
}

#[test]
fn the_interpreter_computes_bit_operators_at_the_dtype_width() {
    let input = |i: i64| (i - 32) * 0x0101_0101 + i;
    let out = run(
        "I[i] = (I[i] << (i % 40)) ^ (I[i] >> (i % 35)) | (I[i] & 0xff) + ~i",
        vec![("I", ints(input))],
    );
    let got = out["I"].to_f64();
    for i in 0..64i64 {
        let x = input(i) as i32;
        let shl = |x: i32, n: i64| if n >= 32 { 0 } else { x.wrapping_shl(n as u32) };
        let shr = |x: i32, n: i64| x >> n.min(31);
        // `^` binds tighter than `|`.
        let expect = (shl(x, i % 40) ^ shr(x, i % 35)) | ((x & 0xff) + !(i as i32));
        assert_eq!(got[i as usize] as i32, expect, "i = {i}");
    }
    // Unsigned right shifts are logical.
    let out = run(
        "U[i] = U[i] >> (i % 33)",
        vec![(
            "U",
            Tensor::from_f64(DType::UInt32, &[64], &[f64::from(u32::MAX); 64]).expect("tensor"),
        )],
    );
    for (i, x) in out["U"].to_f64().iter().enumerate() {
        let n = (i % 33) as u32;
        let expect = if n >= 32 { 0 } else { u32::MAX >> n };
        assert_eq!(*x as u32, expect, "i = {i}");
    }
}

#[test]
fn the_interpreter_computes_math_exactly_then_rounds_to_the_dtype() {
    let xs: Vec<f64> = (0..64).map(|i| (i as f64 - 20.0) / 7.0).collect();
    let input = Tensor::from_f64(DType::Float32, &[64], &xs).expect("tensor");
    // One rounding of the exact value: every function with a float16 form (`T.fma` is
    // float32 only; `interp::scalar`'s test checks its single rounding).
    for f in MathFn::ALL.into_iter().filter(|f| f.takes(DType::Float16)) {
        let args = if f.arity() == 2 { "F[i], 1.5" } else { "F[i]" };
        let out = run(
            &format!(
                "H[i] = T.{}({})\nF[i] = T.{}({args})",
                f.name(),
                args.replace("F[i]", "T.cast(F[i], \"float16\")"),
                f.name()
            ),
            vec![("F", input.clone())],
        );
        let (fo, ho) = (out["F"].to_f64(), out["H"].to_f64());
        for (i, &x) in xs.iter().enumerate() {
            let x32 = f64::from(x as f32);
            let want = f64::from(f.eval(&[x32, 1.5]) as f32);
            assert!(
                fo[i] == want || (fo[i].is_nan() && want.is_nan()),
                "T.{}({x32}) = {} want {want}",
                f.name(),
                fo[i]
            );
            let x16 = half::f16::from_f64(x32).to_f64();
            let want16 = half::f16::from_f64(f.eval(&[x16, 1.5])).to_f64();
            assert!(
                ho[i] == want16 || (ho[i].is_nan() && want16.is_nan()),
                "float16 T.{}({x16}) = {} want {want16}",
                f.name(),
                ho[i]
            );
        }
    }
}

#[test]
fn type_errors_are_located() {
    let err = |body: &str| -> String {
        match parse(&wrap(body)) {
            Ok(f) => {
                let errs = tlc_ir::verifier::verify(&f).err().unwrap_or_default();
                errs.iter()
                    .map(|e| e.message.clone())
                    .collect::<Vec<_>>()
                    .join("\n")
            }
            Err(errs) => errs
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    };
    assert!(err("F[i] = F[i] << 2").contains("`<<` takes integers"));
    assert!(err("I[i] = ~F[i]").contains("`~` takes an integer"));
    assert!(err("F[i] = T.exp(I[i])").contains("T.exp does not take int32"));
    assert!(err("F[i] = T.erf(F[i])").contains("T.erf"));
    assert!(err("x = 1\nx += 1").contains("cannot be updated in place"));
    // Bools: `&` is a logical and.
    assert_eq!(err("I[i] = T.if_then_else((i < 3) & (i > 1), 1, 0)"), "");
}

/// A narrow value shifted by a wider non-literal count takes the count's dtype (C's and
/// TVM's promotion): TileLang's int4 decoding `(b >> k * 4 & 15) << 28 >> 28` of an int8 `b`
/// computes in int32 and gives the signed nibble (in int8 the `<< 28` would leave 0).
#[test]
fn a_narrow_shift_by_a_wider_count_widens() {
    let out = run(
        "I[i] = (T.cast(I[i], \"int8\") >> i % 2 * 4 & 15) << 28 >> 28",
        vec![("I", ints(|i| i * 37 - 1000))],
    );
    for (i, &got) in out["I"].to_f64().iter().enumerate() {
        let byte = i64::from(((i as i64) * 37 - 1000) as i8);
        let nibble = (byte >> ((i % 2) * 4)) & 15;
        let want = if nibble >= 8 { nibble - 16 } else { nibble };
        assert_eq!(got as i64, want, "i = {i}");
    }
}

/// `**` is Python's, evaluated while the kernel is traced: number literals fold into one
/// literal (binding tighter than a unary minus on its left, right-associative, a unary
/// minus allowed on its right), integers stay integers, a negative or float exponent gives a
/// float; anything else is a located error saying what to write.
#[test]
fn power_folds_literals_as_python_does() {
    same("I[i] = -(2**30)", "I[i] = -(1073741824)");
    same("I[i] = -2**30", "I[i] = -1073741824");
    same("I[i] = 2**3**2", "I[i] = 512");
    same("F[i] = 2**-1", "F[i] = 0.5");
    same("F[i] = 576 ** -0.5", "F[i] = 0.041666666666666664");
    same("F[i] = 2.0 ** 3", "F[i] = 8.0");
    same("I[i] = i * 2**4", "I[i] = i * 16");
    let err = |body: &str| -> String {
        match parse(&wrap(body)) {
            Ok(_) => String::new(),
            Err(errs) => errs.iter().map(|e| e.to_string()).collect(),
        }
    };
    let e = err("F[i] = F[i] ** 2");
    assert!(e.contains("both sides must be number literals"), "{e}");
    assert!(e.contains("T.pow"), "{e}");
    assert!(err("I[i] = 2**64").contains("does not fit in a 64-bit integer"));
    assert!(err("F[i] = 10.0 ** 400").contains("`**` gives inf"));
}
