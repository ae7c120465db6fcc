//! `T.fresh`: the front end and the printer's round trip, the verifier's rules F0–F3 (each
//! a located error), and the interpreter's enforcement at both levels — a read of a value
//! written before the reader's last `T.fresh` of the buffer is an error, with the message
//! docs/ir.md gives, and so is a read of bytes written through another buffer sharing them.

use std::collections::HashMap;
use tlc_ir::interp::{run, RunOptions, Tensor};
use tlc_ir::printer::print_func;
use tlc_ir::{Diagnostic, PrimFunc};

/// A loop whose `tile` is wholly written before it is read in every iteration, and whose
/// `acc` carries its value across iterations.
const TILE: &str = r#"@T.prim_func
def f(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
    with T.Kernel(1, threads=64) as bx:
        tile = T.alloc_shared((64,), "float32")
        acc = T.alloc_shared((64,), "float32")
        T.clear(acc)
        for i in T.serial(4):
            T.fresh(tile)
            T.copy(A[i, 0:64], tile)
            for j in T.Parallel(64):
                acc[j] = acc[j] + tile[63 - j]
            T.copy(acc, B[i, 0:64])
"#;

/// The same computation written per thread (what the passes make of it), with `T.fresh`
/// run by every thread at the head of the loop body.
const THREADS: &str = r#"@T.prim_func
def f(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
    with T.Kernel(1, threads=64) as bx:
        tile = T.alloc_shared((64,), "float32")
        acc = T.alloc_shared((64,), "float32")
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            acc[tx] = 0.0
            for i in T.serial(4):
                T.fresh(tile)
                tile[tx] = A[i, tx]
                T.sync_threads()
                acc[tx] = acc[tx] + tile[63 - tx]
                B[i, tx] = acc[tx]
                T.sync_threads()
"#;

/// The errors (message, 1-based line) of parsing and verifying `text`.
fn errors(text: &str) -> Vec<(String, usize)> {
    let line = |start: usize| text[..start].lines().count().max(1);
    let located = |e: Vec<Diagnostic>| {
        e.into_iter()
            .map(|d| (d.message, line(d.span.start)))
            .collect()
    };
    match tlc_ir::parse(text) {
        Err(e) => located(e),
        Ok(f) => match tlc_ir::verifier::verify(&f) {
            Ok(_) => Vec::new(),
            Err(e) => located(e),
        },
    }
}

#[track_caller]
fn assert_error(text: &str, want: &str, line: usize) {
    let errs = errors(text);
    assert!(
        errs.iter().any(|(m, l)| m.contains(want) && *l == line),
        "want `{want}` at line {line}, got {errs:?}\n{text}"
    );
}

fn parsed(text: &str) -> PrimFunc {
    let f = tlc_ir::parse(text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    f
}

fn outputs(f: &PrimFunc) -> Result<HashMap<String, Tensor>, Diagnostic> {
    let opts = RunOptions {
        seed: 3,
        threads: 1,
    };
    run(f, &HashMap::new(), HashMap::new(), &opts)
}

#[test]
fn prints_and_parses_back_equal() {
    for text in [TILE, THREADS] {
        let f = parsed(text);
        let printed = print_func(&f);
        assert!(
            printed.contains("\n            T.fresh(tile)\n")
                || printed.contains("\n                T.fresh(tile)\n"),
            "{printed}"
        );
        assert_eq!(tlc_ir::parse(&printed).expect("printed text parses"), f);
    }
    let two = TILE.replace("T.fresh(tile)", "T.fresh(tile, acc)");
    let f = tlc_ir::parse(&two).expect("parses");
    assert!(print_func(&f).contains("T.fresh(tile, acc)"));
}

#[test]
fn the_front_end_wants_buffer_names() {
    assert_error(
        &TILE.replace("T.fresh(tile)", "T.fresh()"),
        "`T.fresh` needs at least one buffer",
        8,
    );
    assert_error(
        &TILE.replace("T.fresh(tile)", "T.fresh(tile[0])"),
        "expected the name of a shared buffer",
        8,
    );
    assert_error(
        &TILE.replace("T.fresh(tile)", "T.fresh(buf=tile)"),
        "`T.fresh` takes no keyword arguments",
        8,
    );
}

#[test]
fn the_verifier_rules() {
    // F1: shared allocations only.
    let frag = TILE.replace(
        "        acc = T.alloc_shared((64,), \"float32\")\n",
        "        acc = T.alloc_shared((64,), \"float32\")\n        r = T.alloc_fragment((64,), \"float32\")\n",
    );
    assert_error(
        &frag.replace("T.fresh(tile)", "T.fresh(r)"),
        "`T.fresh` discards shared buffers; `r` is a fragment buffer",
        9,
    );
    assert_error(
        &TILE.replace("T.fresh(tile)", "T.fresh(A)"),
        "`T.fresh` discards shared buffers; `A` is a global parameter",
        8,
    );
    assert_error(
        &TILE.replace("T.fresh(tile)", "T.fresh(nothing)"),
        "nothing",
        8,
    );
    // F2: each once.
    assert_error(
        &TILE.replace("T.fresh(tile)", "T.fresh(tile, acc, tile)"),
        "`tile` is named twice in `T.fresh`",
        8,
    );
    // F3: not where iterations overlap, not outside a kernel.
    let parallel = TILE.replace(
        "                acc[j] = acc[j] + tile[63 - j]\n",
        "                T.fresh(acc)\n                acc[j] = acc[j] + tile[63 - j]\n",
    );
    assert_error(&parallel, "`T.fresh` inside a `T.Parallel` loop", 11);
    let pipelined = TILE
        .replace("T.serial(4)", "T.Pipelined(4, num_stages=2)")
        .replace("            T.fresh(tile)\n", "")
        .replace(
            "            T.copy(acc, B[i, 0:64])\n",
            "            T.copy(acc, B[i, 0:64])\n            T.fresh(tile)\n",
        );
    assert_error(&pipelined, "`T.fresh` inside a `T.Pipelined` loop", 12);
    let outside = "@T.prim_func\ndef f(A: T.Tensor((4,), \"float32\")):\n    T.fresh(A)\n";
    assert_error(outside, "`T.fresh` outside a kernel", 3);
    // Valid at the thread level, in a serial loop of per-thread code.
    assert!(errors(THREADS).is_empty(), "{:?}", errors(THREADS));
}

#[test]
fn a_true_fresh_changes_nothing() {
    let with = parsed(TILE);
    let without = parsed(&TILE.replace("            T.fresh(tile)\n", ""));
    let (a, b) = (
        outputs(&with).expect("runs"),
        outputs(&without).expect("runs"),
    );
    assert_eq!(a["B"].to_f64(), b["B"].to_f64());
    let threads = parsed(THREADS);
    assert_eq!(
        outputs(&threads).expect("runs")["B"].to_f64(),
        a["B"].to_f64()
    );
}

#[test]
fn a_read_of_a_discarded_value_is_an_error_at_the_tile_level() {
    // `acc` carries its value: discarding it at the head of the loop makes its first read
    // an error (in the first iteration, of what `T.clear` wrote before the loop).
    let text = TILE.replace("T.fresh(tile)", "T.fresh(tile, acc)");
    let e = outputs(&parsed(&text)).expect_err("the run should fail");
    assert_eq!(
        e.message,
        "`acc[0]` is read but was not written since `T.fresh(acc)` discarded the buffer's \
         contents (block 0)"
    );
    assert_eq!(&text[e.span.start..e.span.end], "acc[j]");
    // A copy out of a discarded buffer says which op read it.
    let text = TILE.replace("T.fresh(tile)", "T.fresh(tile, acc)").replace(
        "                acc[j] = acc[j] + tile[63 - j]\n",
        "                tile[j] = tile[j] * 2.0\n",
    );
    let e = outputs(&parsed(&text)).expect_err("the run should fail");
    assert!(
        e.message
            .starts_with("T.copy reads `acc[0]`, which was not written since `T.fresh(acc)`"),
        "{}",
        e.message
    );
}

#[test]
fn a_read_of_a_discarded_value_is_an_error_per_thread() {
    let text = THREADS.replace("T.fresh(tile)", "T.fresh(tile, acc)");
    let e = outputs(&parsed(&text)).expect_err("the run should fail");
    assert_eq!(
        e.message,
        "this thread reads `acc[0]`, which holds a value written before the `T.fresh(acc)` it \
         last ran: `T.fresh` discards a buffer's contents, so a value from before it (an \
         earlier iteration of the loop it heads) may not be read (thread 0, block 0)"
    );
    assert_eq!(
        &text[e.span.start..e.span.end],
        "acc[tx] = acc[tx] + tile[63 - tx]"
    );
    // Each thread has its own view: a `T.fresh` only thread 0 runs discards the buffer for
    // thread 0 alone, which then reads another thread's value written before it.
    let text = THREADS.replace(
        "                T.fresh(tile)\n",
        "                if tx == 0:\n                    T.fresh(acc)\n",
    );
    let text = text.replace("acc[tx] + tile[63 - tx]", "acc[63 - tx] + tile[63 - tx]");
    let e = outputs(&parsed(&text)).expect_err("the run should fail");
    assert!(
        e.message.starts_with(
            "this thread reads `acc[63]`, which holds a value written before the `T.fresh(acc)`"
        ) && e.message.ends_with("(thread 0, block 0)"),
        "{}",
        e.message
    );
}

#[test]
fn a_read_of_bytes_another_buffer_wrote_is_an_error() {
    // `tile` and `acc` planned into the same bytes while both are live: the first read of
    // `acc` after `tile`'s stores sees `tile`'s values.
    let text = THREADS.replace(
        "        for tx in T.thread_binding",
        "        T.shared_arena(bytes=256, offsets={tile: 0, acc: 0})\n        for tx in T.thread_binding",
    );
    let e = outputs(&parsed(&text)).expect_err("the run should fail");
    assert_eq!(
        e.message,
        "this thread reads `acc[0]`, whose bytes were last written as `tile`: the two shared \
         buffers share bytes in the arena while `acc` still holds a value that is read \
         (thread 0, block 0)"
    );
}
