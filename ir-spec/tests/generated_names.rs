//! Names the front end makes up for the loops it writes out (`syntax::generated_names`)
//! never collide with a name of the source: a user's variable spelled like one is kept,
//! and the made-up loop takes `base_1`. Each kernel below names the made-up base itself,
//! in a scope around the construct, and must verify.

use tlc_ir::{parse, printer::print_func};

/// Parses and verifies `src`; its canonical text.
fn verified(src: &str) -> String {
    let f = parse(src).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    tlc_ir::verifier::verify(&f).unwrap_or_else(|e| panic!("{e:?}\n{src}"));
    print_func(&f)
}

#[test]
fn a_view_copy_inside_a_users_view_i0_loop() {
    let text = verified(
        r#"@T.prim_func
def f(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, 64), "float32")
        for view_i0 in T.serial(1):
            Av = T.Tensor((4096,), "float32", A.data)
            T.copy(Av[view_i0 * 64:view_i0 * 64 + 64], S[view_i0, 0:64])
        T.copy(S, B[0, 0])
"#,
    );
    assert!(text.contains("for view_i0_1 in T.Parallel(64):"), "{text}");
    assert!(text.contains("S[view_i0, view_i0_1] ="), "{text}");
}

#[test]
fn a_tile_atomic_add_inside_a_users_atomic_i0_loop() {
    let text = verified(
        r#"@T.prim_func
def f(B: T.Tensor((4, 64), "float32")):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_fragment((1, 64), "float32")
        T.fill(S, 1.0)
        for atomic_i0 in T.serial(4):
            T.atomic_add(B[atomic_i0, 0], S)
"#,
    );
    assert!(
        text.contains("for atomic_i0_1, atomic_i1 in T.Parallel(1, 64):"),
        "{text}"
    );
    assert!(
        text.contains("B[atomic_i0 + atomic_i0_1, atomic_i1]"),
        "{text}"
    );
}

#[test]
fn a_per_thread_fill_next_to_a_users_acc_fill0() {
    let text = verified(
        r#"@T.prim_func
def k(Y: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        tx = T.get_thread_binding(0)
        acc = T.alloc_local((4,), "float32")
        for acc_fill0 in T.serial(1):
            T.clear(acc)
            Y[tx] = acc[acc_fill0]
"#,
    );
    assert!(
        text.contains("for acc_fill0_1 in T.serial(4):\n                    acc[acc_fill0_1] = 0"),
        "{text}"
    );
}

#[test]
fn a_persistent_walk_next_to_a_users_bx_wave() {
    let text = verified(
        r#"@T.prim_func
def walk(Hits: T.Tensor((8, 8), "int32")):
    with T.Kernel(4, threads=32) as block_id:
        bx_wave = block_id * 2
        for bx, by in T.Persistent([8, 8], 4, block_id):
            Hits[bx, by] = bx_wave
"#,
    );
    assert!(text.contains("for bx_wave_1 in T.serial("), "{text}");
    assert!(text.contains("Hits[bx, by] = bx_wave\n"), "{text}");
}

/// Spelled in a comment or a string, a name is no identifier: the made-up one keeps its base.
#[test]
fn comments_and_strings_take_no_names() {
    let text = verified(
        r#"@T.prim_func
def f(B: T.Tensor((4, 64), "float32")):
    with T.Kernel(1, threads=64) as bx:
        S = T.alloc_fragment((1, 64), "float32")
        T.fill(S, 1.0)
        T.note("atomic_i0")
        # atomic_i1
        T.atomic_add(B[1, 0], S)
"#,
    );
    assert!(
        text.contains("for atomic_i0, atomic_i1 in T.Parallel(1, 64):"),
        "{text}"
    );
}
