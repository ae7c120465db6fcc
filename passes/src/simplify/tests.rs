//! Rule-level tests: one expression in a small kernel, simplified and printed.

use super::simplify_func;
use tlc_ir::printer::print_func;

/// Simplifies `expr` used as the index of a store inside
/// `for i in T.serial(4): for j in T.serial(8):` in a kernel of 16 blocks (bx) with a dim N,
/// and returns the printed index.
fn simp(expr: &str) -> String {
    let src = format!(
        "N = T.symbolic(\"N\")\n\n@T.prim_func\ndef f(A: T.Tensor((N,), \"int32\")):\n    with T.Kernel(16, threads=32) as bx:\n        for i in T.serial(4):\n            for j in T.serial(8):\n                A[{expr}] = 1\n"
    );
    let func = tlc_ir::parse(&src).unwrap_or_else(|d| panic!("{expr}: {d:?}"));
    let out = simplify_func(func).unwrap_or_else(|d| panic!("{expr}: {d:?}"));
    let text = print_func(&out);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("A["))
        .unwrap_or_default();
    let inner = line.trim().trim_start_matches("A[");
    inner.split("] = ").next().unwrap_or_default().to_string()
}

#[test]
fn identities_and_constants() {
    assert_eq!(simp("i + 0"), "i");
    assert_eq!(simp("i * 1 + 0 * N"), "i");
    assert_eq!(simp("(i - i) + j"), "j");
    assert_eq!(simp("i * 4 * 8"), "i * 32");
    assert_eq!(simp("2 + i + 3"), "i + 5");
    assert_eq!(simp("i + 7 - 7"), "i");
    assert_eq!(simp("N - 1 + 1"), "N");
    assert_eq!(simp("-(-N)"), "N");
}

#[test]
fn floor_division_and_modulo() {
    assert_eq!(simp("(i * 8 + j) // 8"), "i");
    assert_eq!(simp("(i * 8 + j) % 8"), "j");
    assert_eq!(simp("(j + i * 8) // 8"), "i");
    assert_eq!(simp("(N * 16) // 4"), "N * 4");
    assert_eq!(simp("(N * 4) // 16"), "N // 4");
    // Same size either way (N % 4 * 4): the original stays.
    assert_eq!(simp("(N * 4) % 16"), "N * 4 % 16");
    assert_eq!(simp("(N * 4 + 8) % 16 // 4"), "(N * 4 + 8) % 16 // 4");
    assert_eq!(simp("N // 4 // 8"), "N // 32");
    assert_eq!(simp("N % 64 % 8"), "N % 8");
    assert_eq!(simp("N // 8 * 8 + N % 8"), "N");
    assert_eq!(simp("(N + 64) % 32"), "N % 32");
    assert_eq!(simp("j % 8 + bx // 16"), "j");
    // Not provable: j + 1 may reach 8.
    assert_eq!(simp("(j + 1) % 8"), "(j + 1) % 8");
    // Floor semantics: (N + 3) // 4 is not N // 4 + 0.
    assert_eq!(simp("(N + 3) // 4"), "(N + 3) // 4");
}

#[test]
fn bounds_decide_min_and_max() {
    assert_eq!(simp("T.min(j, 8)"), "j");
    assert_eq!(simp("T.max(j, 8)"), "8");
    assert_eq!(simp("T.min(bx * 64 + 63, 1024)"), "bx * 64 + 63");
    assert_eq!(simp("T.min(N, j)"), "T.min(N, j)");
    assert_eq!(simp("T.max(N, 1)"), "N");
}

#[test]
fn opaque_parts_survive_and_float_math_is_untouched() {
    let src = "@T.prim_func\ndef f(A: T.Tensor((64,), \"float32\"), I: T.Tensor((64,), \"int32\")):\n    with T.Kernel(1, threads=32) as bx:\n        for i in T.serial(64):\n            A[I[i + 0] * 1] = A[i * 1] * 1.0 + 0.0\n";
    let out = simplify_func(tlc_ir::parse(src).unwrap()).unwrap();
    let text = print_func(&out);
    // (The parser contracts the float32 multiply-add, docs/ir.md "Contraction".)
    assert!(text.contains("A[I[i]] = T.fma(A[i], 1.0, 0.0)"), "{text}");
}

/// The memo: a tree of the same shape over other opaque parts (`I[i]`, `I[j]`: both `$0`)
/// reuses the answer with its own parts; other variables (other bounds) get their own run.
#[test]
fn memoized_trees_keep_their_own_atoms_and_bounds() {
    let src = "@T.prim_func\ndef f(A: T.Tensor((64,), \"int32\"), I: T.Tensor((64,), \"int32\")):\n    with T.Kernel(1, threads=32) as bx:\n        for i in T.serial(8):\n            for j in T.serial(16):\n                A[(I[i] * 8 + i) // 8] = 1\n                A[(I[j] * 8 + i) // 8] = 2\n                A[(I[i] * 8 + j) // 8] = 3\n                A[(I[j] * 8 + i) // 8] = 4\n";
    let out = simplify_func(tlc_ir::parse(src).unwrap()).unwrap();
    let text = print_func(&out);
    // i < 8 drops out of the division; j < 16 leaves j // 8.
    assert!(text.contains("A[I[i]] = 1"), "{text}");
    assert!(text.contains("A[I[j]] = 2"), "{text}");
    assert!(text.contains("A[I[i] + j // 8] = 3"), "{text}");
    assert!(text.contains("A[I[j]] = 4"), "{text}");
}

/// A loop whose bounds fold to an empty range never runs: simplify removes it (the
/// verifier refuses a constant extent that is not positive). Its neighbours stay.
#[test]
fn loops_that_fold_to_no_iteration_are_removed() {
    let src = "@T.prim_func\ndef f(A: T.Tensor((8,), \"int32\")):\n    with T.Kernel(1, threads=1) as bx:\n        w = 100 // 132\n        for i in T.serial(w * 4):\n            A[i] = 1\n        for j in T.serial(w * 2 + 2 - 2):\n            A[j] = 2\n        for k in T.serial(w + 3):\n            A[k] = 3\n";
    let func = tlc_ir::parse(src).expect("parses");
    let out = simplify_func(func).expect("simplifies");
    tlc_ir::verifier::verify(&out).expect("valid after simplify");
    let text = print_func(&out);
    assert!(!text.contains("A[i] = 1"), "{text}");
    assert!(!text.contains("A[j] = 2"), "{text}");
    assert!(text.contains("for k in T.serial(3):"), "{text}");
    assert!(text.contains("A[k] = 3"), "{text}");
}
