//! The verifier's bounds rule (`verifier/bounds.rs`, rule B2 of docs/ir.md): accesses
//! provably outside their buffer are errors at the index; accesses that may be in bounds on
//! some run, or that never run, are not.

use tlc_ir::verifier::verify;
use tlc_ir::{parse, Diagnostic};

/// A kernel with `A: (64,)`, `B: (1024, 256)`, `C: (N,)`, a 4-block grid and 64-trip
/// parallel loop `i`, whose loop body is `body`.
fn kernel(body: &str) -> String {
    let mut s = String::from(
        "N = T.symbolic(\"N\")\n\n@T.prim_func\ndef f(A: T.Tensor((64,), \"float32\"), \
         B: T.Tensor((1024, 256), \"float32\"), C: T.Tensor((N,), \"float32\")):\n    \
         with T.Kernel(4, threads=64) as bx:\n        for i in T.Parallel(64):\n",
    );
    for line in body.lines() {
        s.push_str("            ");
        s.push_str(line);
        s.push('\n');
    }
    s
}

fn errors(body: &str) -> (String, Vec<Diagnostic>) {
    let src = kernel(body);
    let f = parse(&src).unwrap_or_else(|d| panic!("does not parse: {d:#?}\n{src}"));
    let errs = verify(&f).err().unwrap_or_default();
    (src, errs)
}

/// `body` verifies.
fn accepted(body: &str) {
    let (src, errs) = errors(body);
    assert!(errs.is_empty(), "{errs:#?}\n{src}");
}

/// `body` gives one error, `message`, whose span starts at `at` (a piece of the body).
fn refused(body: &str, message: &str, at: &str) {
    let (src, errs) = errors(body);
    assert_eq!(errs.len(), 1, "{errs:#?}\n{src}");
    assert_eq!(errs[0].message, message, "{src}");
    let start = src
        .find(at)
        .unwrap_or_else(|| panic!("`{at}` not in the source"));
    assert_eq!(errs[0].span.start, start, "{src}");
}

#[test]
fn an_index_entirely_outside_is_an_error_wherever_it_is() {
    refused(
        "B[bx * 32 + 2147483648, i] = 1.0",
        "index `bx * 32 + 2147483648` is out of bounds for dimension 0 of `B` (extent 1024): its smallest value is 2147483648",
        "bx * 32 + 2147483648",
    );
    refused(
        "A[i] = A[i - 100]",
        "index `i - 100` is out of bounds for dimension 0 of `A` (extent 64): its largest value is -37",
        "i - 100",
    );
    refused(
        "A[-1] = 0.0",
        "index -1 is out of bounds for dimension 0 of `A` (extent 64)",
        "-1",
    );
}

#[test]
fn an_index_that_reaches_outside_on_every_run_is_an_error() {
    refused(
        "A[i * 2] = 0.0",
        "index `i * 2` is out of bounds for dimension 0 of `A` (extent 64): it is 126 when i = 63",
        "i * 2",
    );
    refused(
        "B[bx * 400 + i, 0] = 0.0",
        "index `bx * 400 + i` is out of bounds for dimension 0 of `B` (extent 1024): it is 1263 when bx = 3, i = 63",
        "bx * 400 + i",
    );
    // Not affine: every value of `i` is evaluated.
    refused(
        "A[i] = B[(i * 3) % 64, 300 % 256] + A[(i * 3) % 64 - 14]",
        "index `i * 3 % 64 - 14` is out of bounds for dimension 0 of `A` (extent 64): it is -14 when i = 0",
        "(i * 3) % 64 - 14",
    );
}

#[test]
fn accesses_that_may_be_in_bounds_or_never_run_are_not_errors() {
    // Guarded by a condition on the index.
    accepted("if i * 2 < 64:\n    A[i * 2] = 0.0");
    // Only the arm the condition picks is evaluated.
    accepted("A[i] = T.if_then_else(i < 32, A[i * 2], 0.0)");
    // A branch the ranges rule out.
    accepted("if bx > 5:\n    A[2000] = 0.0");
    // Under a condition that may never hold, even an access outside whenever it runs (a
    // pass splits accesses into such guarded copies: `if row < M:` with M = 1 runs none).
    accepted("if A[i] > 0.0:\n    A[i + 64] = 1.0");
    accepted("if i < N - 1:\n    A[(i + 1) * 64] = 1.0");
    // A loop that never iterates (its count is 0 for every block), and a float let whose
    // rounded value is no exact integer.
    accepted("for c in T.serial(bx - bx):\n    A[c + 1000] = 0.0");
    accepted("x: T.float32 = 16777217\nA[T.cast(x, \"int32\") - 16777153] = 0.0");
    // A symbolic extent: in bounds for large enough N.
    accepted("C[i + 5] = 0.0");
    // A loop over a symbolic count: the index is not known to reach its extreme.
    accepted("for k in T.serial(N):\n    A[k * 1000] = 0.0");
    // `(i * 3) % 64` takes every value 0..63: in bounds.
    accepted("A[(i * 3) % 64] = 0.0");
}

/// An access under conditions the ranges do not decide runs exactly where they hold: a
/// combination of loop and block values where they all hold and the index is outside is
/// an error (what `unroll` and `simplify` would otherwise turn into a constant index a
/// pass "produced"); conditions that read memory or depend on dims prove nothing.
#[test]
fn an_index_outside_where_its_conditions_hold_is_an_error() {
    refused(
        "if i % 2 == 1:\n    A[i + 1] = 0.0",
        "index `i + 1` is out of bounds for dimension 0 of `A` (extent 64): it is 64 when i = 63",
        "i + 1",
    );
    // The else branch runs where the condition is false.
    refused(
        "if i < 60:\n    A[i] = 0.0\nelse:\n    A[i + bx] = 0.0",
        "index `i + bx` is out of bounds for dimension 0 of `A` (extent 64): it is 66 when bx = 3, i = 63",
        "i + bx",
    );
    // A select's arm, the right operand of `and`, nested conditions.
    refused(
        "A[i] = T.if_then_else(i > 40, A[i + 30], 0.0)",
        "index `i + 30` is out of bounds for dimension 0 of `A` (extent 64): it is 93 when i = 63",
        "i + 30",
    );
    refused(
        "if i >= 62 and A[i * 2 - 60] > 0.0:\n    A[i] = 0.0",
        "index `i * 2 - 60` is out of bounds for dimension 0 of `A` (extent 64): it is 66 when i = 63",
        "i * 2 - 60",
    );
    refused(
        "if bx == 3:\n    if i % 8 == 7:\n        B[bx * 330 + i, 0] = 0.0",
        "index `bx * 330 + i` is out of bounds for dimension 0 of `B` (extent 1024): it is 1053 when bx = 3, i = 63",
        "bx * 330 + i",
    );
    // In bounds wherever the conditions hold.
    accepted("if i % 2 == 0:\n    A[i + 1] = 0.0");
    accepted("A[i] = T.if_then_else(i < 40, A[i + 20], 0.0)");
    accepted("if i >= 16 or A[i * 4] > 0.0:\n    A[i] = 0.0");
    // A `while` body runs where its condition holds (here always, at least once); one
    // whose condition reads memory may never run.
    refused(
        "while i >= 0:\n    A[i + 1] = 0.0",
        "index `i + 1` is out of bounds for dimension 0 of `A` (extent 64): it is 64 when i = 63",
        "i + 1",
    );
    refused(
        "while i % 16 == 15:\n    A[i * 2] = 0.0",
        "index `i * 2` is out of bounds for dimension 0 of `A` (extent 64): it is 126 when i = 63",
        "i * 2",
    );
    accepted("while A[i] > 0.0:\n    A[i + 64] = 1.0");
    // Conditions that read memory or mention a dim: not known to hold.
    accepted("if A[i] > 0.0 and i > 10:\n    A[i + 64] = 1.0");
    accepted("if i < N - 100:\n    A[i + 10] = 1.0");
}

#[test]
fn extremes_through_lets_inner_loop_bounds_and_symbolic_trip_counts() {
    // An inner loop bounded by the outer variable, and a let: every (r, c) is evaluated.
    refused(
        "for r in T.unroll(1, 6):\n    for c in T.unroll(r):\n        row = r + c\n        A[i] = B[0, row * 60]",
        "index `row * 60` is out of bounds for dimension 1 of `B` (extent 256): it is 540 when r = 5, c = 4",
        "row * 60",
    );
    accepted(
        "for r in T.unroll(1, 6):\n    for c in T.unroll(r):\n        row = r + c\n        A[i] = B[0, row * 28]",
    );
    // A triangular nest too large to enumerate (~500 000 (r, c) pairs): the index is
    // linear in the innermost `c`, so only the ends of its range are evaluated, per `r`.
    refused(
        "for r in T.unroll(1, 1000):\n    for c in T.serial(r):\n        A[c] = 1.0",
        "index `c` is out of bounds for dimension 0 of `A` (extent 64): it is 998 when r = 999, c = 998",
        "c] = 1.0",
    );
    accepted("for r in T.unroll(1, 65):\n    for c in T.serial(r):\n        A[c] = 1.0");
    // A thread index the index is linear in: its two ends (tx = 0 and 63 here).
    let src = "@T.prim_func\ndef f(A: T.Tensor((64,), \"float32\")):\n    \
               with T.Kernel(4, threads=64) as bx:\n        \
               for tx in T.thread_binding(64, thread=\"threadIdx.x\"):\n            \
               for k in T.unroll(2):\n                A[k * 2 * tx] = 1.0\n";
    let errs = verify(&parse(src).expect("parses"))
        .err()
        .unwrap_or_default();
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert_eq!(
        errs[0].message,
        "index `k * 2 * tx` is out of bounds for dimension 0 of `A` (extent 64): it is 126 when tx = 63, k = 1"
    );
    // Not linear in `c` (`c * c`): every pair is evaluated, within the budget.
    refused(
        "for r in T.unroll(1, 100):\n    for c in T.serial(r):\n        A[c * c % 70] = 1.0",
        "index `c * c % 70` is out of bounds for dimension 0 of `A` (extent 64): it is 65 when r = 26, c = 25",
        "c * c % 70",
    );
    // A loop over a symbolic count still starts at 0 on every run.
    refused(
        "for ko in T.serial(N):\n    A[i] = B[ko - 32 + i, 0]",
        "index `ko - 32 + i` is out of bounds for dimension 0 of `B` (extent 1024): it is -32 when ko = 0, i = 0",
        "ko - 32 + i",
    );
}

#[test]
fn a_let_named_like_its_loop_is_one_error_not_a_hang() {
    // A mutant of unroll_nest: `c = … + c` inside `for c in …` (N2). The bounds rule used to
    // chase `c` → `c` forever while enumerating.
    let (src, errs) = errors(
        "for r in T.unroll(1, 3):\n    for c in T.unroll(r):\n        c = r + c\n        A[c] = 1.0",
    );
    assert!(
        errs.iter()
            .any(|e| e.message.contains("defined more than once")),
        "{errs:#?}\n{src}"
    );
}
