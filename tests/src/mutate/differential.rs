//! The differential oracle: the tile-level interpreter (the kernel as the front end gives
//! it to the pipeline) against the interpreter on a target's compiled IR (what code
//! generation translates to PTX; `tlc run --interp` runs the same on `tlc compile
//! --emit=tir`'s output), same dims, same seeded random inputs. Outputs must match ([`super::compare`]), and the compiled IR must run to the end
//! where the tile level does: an error there (out of bounds, a race, an async copy read
//! before it lands, a deadlock) is the compiler's. Where the tile level stops, the kernel
//! is erroneous and has no result; the compiled IR may do anything with it.
//!
//! Skipped, and counted as such: kernels over the work budget ([`super::estimate`]), and
//! kernels whose tile-level result depends on the order of unordered iterations — the
//! tile level is run again with every `T.Parallel` loop and grid dimension reversed
//! ([`super::reverse`]) and must give the same result (or the same kind of failure). A
//! `T.Parallel` nest whose iterations touch each other's elements is the tile-level
//! interpreter's own error (`interp/parallel.rs`), so such a kernel has no reference.

use super::compare::difference;
use super::estimate::work;
use super::{Finding, Oracle};
use std::collections::HashMap;
use tlc_ir::interp::{packed_for, random_input, run, unpacked_for, RunOptions, Tensor};
use tlc_ir::specialize::specialize;
use tlc_ir::{DType, PrimFunc, Target};

/// Sizes tried for symbolic dims: ragged and aligned, small.
const DIM_VALUES: &[i64] = &[1, 7, 16, 37, 64, 128, 200];

/// Why the differential did not compare a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Over the work budget at every dim binding tried, or an unbounded loop.
    Large,
    /// Its tile-level result depends on the order of `T.Parallel` iterations or blocks.
    OrderDependent,
    /// A sum folds so many terms in so narrow a float that its order decides the result
    /// ([`unstable_sum`]).
    UnstableSum,
}

impl Skip {
    pub fn name(self) -> &'static str {
        match self {
            Skip::Large => "large",
            Skip::OrderDependent => "order-dependent",
            Skip::UnstableSum => "unstable sum",
        }
    }
}

/// The tile level's result, for comparing each target's compiled IR with.
pub struct Reference {
    dims: HashMap<String, i64>,
    /// The least relative tolerance of float outputs (`compare::floor`).
    floor: f64,
    seed: u64,
    /// The tile level's int4 parameters' inputs (drawn from `seed` as the interpreter draws
    /// them): the compiled IR takes them as the int8 tensors of their bytes (`pack-int4`),
    /// so they are given to it packed and its results unpacked.
    int4: HashMap<String, Tensor>,
    result: Result<HashMap<String, Tensor>, String>,
}

impl Reference {
    /// Whether the tile level stopped with an error.
    pub fn failed(&self) -> bool {
        self.result.is_err()
    }
}

fn opts(seed: u64) -> RunOptions {
    RunOptions { seed, threads: 1 }
}

/// Runs `func` with those of `dims` it declares, and `inputs` (the rest drawn from `seed`).
fn interpret(
    func: &PrimFunc,
    dims: &HashMap<String, i64>,
    inputs: HashMap<String, Tensor>,
    seed: u64,
) -> Result<HashMap<String, Tensor>, String> {
    let own: HashMap<String, i64> = dims
        .iter()
        .filter(|(n, _)| func.dims.iter().any(|d| &d.name == *n))
        .map(|(n, v)| (n.clone(), *v))
        .collect();
    run(func, &own, inputs, &opts(seed)).map_err(|d| d.message)
}

/// The inputs of `tile`'s int4 parameters at `dims`, drawn from `seed` as the interpreter
/// draws missing inputs (`random_input`); none when a shape does not evaluate (the run
/// reports it).
fn int4_inputs(tile: &PrimFunc, dims: &HashMap<String, i64>, seed: u64) -> HashMap<String, Tensor> {
    let bound: Vec<(String, i64)> = dims.iter().map(|(n, v)| (n.clone(), *v)).collect();
    let Ok(bound) = specialize(tile, &bound) else {
        return HashMap::new();
    };
    bound
        .params
        .iter()
        .filter(|p| p.dtype == DType::Int4)
        .filter_map(|p| {
            let shape: Option<Vec<usize>> = p
                .shape
                .iter()
                .map(|e| e.as_int().and_then(|v| usize::try_from(v).ok()))
                .collect();
            let t = random_input(p, &shape?, seed).ok()?;
            Some((p.name.name.clone(), t))
        })
        .collect()
}

/// Runs the tile level of `tile` (dims drawn from `pick`, inputs from `seed`) and its
/// reversal; the reference, or why there is none. `max_work`: the budget of
/// [`super::estimate::work`].
pub fn reference(tile: &PrimFunc, pick: u64, seed: u64, max_work: f64) -> Result<Reference, Skip> {
    let dims = bind_dims(tile, pick, max_work).ok_or(Skip::Large)?;
    if unstable_sum(tile) {
        return Err(Skip::UnstableSum);
    }
    let floor = super::compare::floor(tile);
    let int4 = int4_inputs(tile, &dims, seed);
    let result = interpret(tile, &dims, int4.clone(), seed);
    let again = interpret(&super::reverse::reversed(tile), &dims, int4.clone(), seed);
    let same = match (&result, &again) {
        (Ok(a), Ok(b)) => difference(a, b, floor).is_none(),
        (Err(_), Err(_)) => true,
        _ => false,
    };
    if !same {
        return Err(Skip::OrderDependent);
    }
    Ok(Reference {
        dims,
        floor,
        seed,
        int4,
        result,
    })
}

/// Whether a `T.reduce_sum` / `T.reduce_abssum` of `tile` folds `n` terms into a float
/// dtype of unit roundoff `u` with `n · u ≥ 1`: the error bound of a fold in any order,
/// `(n − 1) · u · Σ|x|` (docs/ir.md, Reductions), then exceeds the sum itself, so the tile
/// level's index-order fold and a lowered tree of partials may both be right and far apart
/// (a bfloat16 sum of 8192 squares saturates in order, not in a tree). There is no reference
/// to compare with.
fn unstable_sum(tile: &PrimFunc) -> bool {
    use tlc_ir::{ReduceKind, StmtKind};
    let mut decls = HashMap::new();
    tlc_ir::visit::for_each_stmt(&tile.body, &mut |s| {
        if let StmtKind::Kernel(k) = &s.kind {
            for a in &k.allocs {
                decls.insert(a.name.name.clone(), (a.dtype, a.shape.clone()));
            }
        }
    });
    let mut unstable = false;
    tlc_ir::visit::for_each_stmt(&tile.body, &mut |s| {
        let StmtKind::Reduce(r) = &s.kind else {
            return;
        };
        if !matches!(r.kind, ReduceKind::Sum | ReduceKind::AbsSum) {
            return;
        }
        let (Some((dtype, _)), Some((_, shape))) = (decls.get(&r.dst.name), decls.get(&r.src.name))
        else {
            return;
        };
        let extent = r
            .axis(shape.len())
            .and_then(|a| shape.get(a))
            .and_then(|e| e.as_int());
        if let (Some(u), Some(n)) = (super::compare::unit(*dtype), extent) {
            unstable |= n as f64 * u >= 1.0;
        }
    });
    unstable
}

/// Dims for `tile` under the budget: drawn from [`DIM_VALUES`] by `pick`, else all 16,
/// else all 1.
fn bind_dims(tile: &PrimFunc, pick: u64, max_work: f64) -> Option<HashMap<String, i64>> {
    let mut rng = super::Rng::for_item(pick, 0);
    let drawn: Vec<i64> = tile
        .dims
        .iter()
        .map(|_| *rng.pick(DIM_VALUES).unwrap_or(&16))
        .collect();
    let n = tile.dims.len();
    for values in [drawn, vec![16; n], vec![1; n]] {
        let dims: Vec<(String, i64)> = tile
            .dims
            .iter()
            .map(|d| d.name.clone())
            .zip(values)
            .collect();
        let bound = specialize(tile, &dims).ok()?;
        if work(&bound).is_some_and(|w| w <= max_work) {
            return Some(dims.into_iter().collect());
        }
        if n == 0 {
            break;
        }
    }
    None
}

/// Compares `compiled` (a target's compiled IR) with the
/// tile level's reference; a finding when they disagree.
pub fn check(reference: &Reference, compiled: &PrimFunc, target: Target) -> Option<Finding> {
    let dtype_of = |n: &str| {
        let p = compiled.params.iter().find(|p| p.name.name == n);
        p.map(|p| p.dtype)
    };
    let was_int4 = |n: &str| reference.int4.get(n).map(Tensor::dtype);
    let got = match packed_for(&dtype_of, reference.int4.clone()) {
        Ok(inputs) => interpret(compiled, &reference.dims, inputs, reference.seed)
            .map(|out| unpacked_for(&was_int4, out)),
        Err(e) => Err(e),
    };
    let dims = describe_dims(&reference.dims);
    let what = match (&reference.result, &got) {
        (Ok(want), Ok(got)) => format!(
            "the outputs differ\n{}",
            difference(want, got, reference.floor)?
        ),
        // A tile level that stops has no result to compare: the kernel is erroneous, and
        // what the compiled IR makes of it (a division by zero simplified away, an access
        // out of bounds masked) is no wrong answer.
        (Err(_), _) => return None,
        (Ok(_), Err(e)) => format!("the compiled IR stops: {e}\n(the tile level runs to the end)"),
    };
    Some(Finding::new(
        Oracle::Differential,
        Some(target),
        format!("{what}\n(dims {dims}, input seed {})", reference.seed),
    ))
}

fn describe_dims(dims: &HashMap<String, i64>) -> String {
    let mut list: Vec<String> = dims.iter().map(|(n, v)| format!("{n}={v}")).collect();
    list.sort();
    match list.is_empty() {
        true => "none".to_string(),
        false => list.join(" "),
    }
}
