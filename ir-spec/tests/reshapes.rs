//! `T.reshape` (docs/ir.md, "Reshapes"), written out by the front end: a reshape of a
//! fragment or a shared buffer written in a `T.Parallel` nest over its shape and reduced
//! along each of its dimensions, at ranks 1 to 4, interprets exactly as the same kernel
//! written by hand on the source buffer (its row-major positions computed here); the result
//! prints and parses back equal; a reshape's bounds mask accesses past them.

use crate::interp_support;

use interp_support::run_with;
use tlc_ir::interp::{random_tensor, Tensor};
use tlc_ir::{parse, printer::print_func, DType, PrimFunc};

fn ok(src: &str) -> PrimFunc {
    match parse(src) {
        Ok(f) => f,
        Err(e) => panic!("failed to parse:\n{src}\n{e:?}"),
    }
}

fn list(v: &[usize]) -> String {
    let items: Vec<String> = v.iter().map(|n| n.to_string()).collect();
    format!("({},)", items.join(", "))
}

/// The kernel's head: A (64, 64) copied into `c` (of `scope`), `o` of the reduced shape.
fn head(scope: &str, out: &[usize]) -> String {
    let o = list(out);
    format!(
        "@T.prim_func\ndef f(A: T.Tensor((64, 64), \"float32\"), O: T.Tensor({o}, \"float32\"), P: T.Tensor((64, 64), \"float32\")):\n    with T.Kernel(1, threads=128) as bx:\n        c = T.alloc_{scope}((64, 64), \"float32\")\n        o = T.alloc_fragment({o}, \"float32\")\n        T.copy(A, c)\n"
    )
}

/// `r = T.reshape(c, shape)`, each element scaled by its last index + 1, reduced along `dim`.
fn reshaped(scope: &str, shape: &[usize], dim: usize, out: &[usize]) -> String {
    let vars: Vec<String> = (0..shape.len()).map(|k| format!("v{k}")).collect();
    let extents: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
    let (v, last) = (vars.join(", "), &vars[vars.len() - 1]);
    format!(
        "{}        r = T.reshape(c, {})\n        for {v} in T.Parallel({}):\n            r[{v}] = r[{v}] * ({last} + 1)\n        T.reduce_sum(r, o, dim={dim})\n        T.copy(o, O)\n        T.copy(c, P)\n",
        head(scope, out),
        list(shape),
        extents.join(", ")
    )
}

/// The same on `c` itself: positions linearized by hand, the reduction a serial fold.
fn by_hand(scope: &str, shape: &[usize], dim: usize, out: &[usize]) -> String {
    let last = shape[shape.len() - 1];
    let ovars: Vec<String> = (0..out.len()).map(|k| format!("o{k}")).collect();
    let mut idx: Vec<String> = ovars.clone();
    if shape.len() == 1 {
        idx.clear();
    }
    idx.insert(dim, "t".to_string());
    let mut lin = idx[0].clone();
    for (k, i) in idx.iter().enumerate().skip(1) {
        lin = format!("({lin}) * {} + {i}", shape[k]);
    }
    let oe: Vec<String> = out.iter().map(|n| n.to_string()).collect();
    let o = ovars.join(", ");
    format!(
        "{}        for i, j in T.Parallel(64, 64):\n            c[i, j] = c[i, j] * ((i * 64 + j) % {last} + 1)\n        for {o} in T.Parallel({}):\n            o[{o}] = 0\n            for t in T.serial({}):\n                o[{o}] = o[{o}] + c[({lin}) // 64, ({lin}) % 64]\n        T.copy(o, O)\n        T.copy(c, P)\n",
        head(scope, out),
        oe.join(", "),
        shape[dim]
    )
}

#[test]
fn reductions_of_reshapes_match_the_kernel_written_on_the_source() {
    let cases: &[(&[usize], usize)] = &[
        (&[64, 8, 8], 2),
        (&[64, 8, 8], 1),
        (&[8, 8, 64], 0),
        (&[64, 2, 4, 8], 2),
        (&[32, 128], 1),
        (&[16, 4, 64], 1),
        (&[4096], 0),
    ];
    let a = random_tensor("A", DType::Float32, &[64, 64], 7).unwrap();
    for scope in ["fragment", "shared"] {
        for &(shape, dim) in cases {
            let mut out: Vec<usize> = shape
                .iter()
                .enumerate()
                .filter(|&(k, _)| k != dim)
                .map(|(_, &n)| n)
                .collect();
            if out.is_empty() {
                out.push(1);
            }
            let (r, h) = (
                ok(&reshaped(scope, shape, dim, &out)),
                ok(&by_hand(scope, shape, dim, &out)),
            );
            let text = print_func(&r);
            assert_eq!(ok(&text), r, "printed:\n{text}");
            let run = |f: &PrimFunc| {
                let o = Tensor::zeros(DType::Float32, &out).unwrap();
                let p = Tensor::zeros(DType::Float32, &[64, 64]).unwrap();
                run_with(f, &[], vec![("A", a.clone()), ("O", o), ("P", p)], 2)
            };
            let (got, want) = (run(&r), run(&h));
            for name in ["O", "P"] {
                assert_eq!(
                    got[name].to_f64(),
                    want[name].to_f64(),
                    "{scope} {shape:?} dim {dim}: {name}"
                );
            }
        }
    }
}

/// One past a reshape's row is another element of its source: the reshape's bounds guard
/// the access (a load outside reads 0, a store outside is dropped), as a view's do.
#[test]
fn accesses_past_a_reshape_are_masked() {
    let src = "@T.prim_func\ndef f(A: T.Tensor((8, 8), \"float32\"), B: T.Tensor((8, 8), \"float32\"), n: T.int32):\n    with T.Kernel(1, threads=32) as bx:\n        s = T.alloc_shared((8, 8), \"float32\")\n        r = T.reshape(s, (4, 16))\n        T.copy(A, s)\n        for i in T.Parallel(4):\n            r[i, n - 1] = r[i, n]\n        T.copy(s, B)\n";
    let f = ok(src);
    let text = print_func(&f);
    assert!(text.contains("T.if_then_else"), "{text}");
    let a = random_tensor("A", DType::Float32, &[8, 8], 2).unwrap();
    let av = a.to_f64();
    for n in [15i64, 16, 17] {
        let b = Tensor::zeros(DType::Float32, &[8, 8]).unwrap();
        let args = vec![("A", a.clone()), ("B", b)];
        let out = run_with(&f, &[("n", n)], args, 2)["B"].to_f64();
        let mut want = av.clone();
        for i in 0..4 {
            // n = 16 reads past the row (0); n = 17 also writes past it (dropped).
            let (from, to) = (n as usize, n as usize - 1);
            if to < 16 {
                want[i * 16 + to] = if from < 16 { av[i * 16 + from] } else { 0.0 };
            }
        }
        assert_eq!(out, want, "n = {n}");
    }
}
