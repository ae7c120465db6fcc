//! The reference interpreter: the executable meaning of every op, run on the CPU.
//!
//! Entry point: [`run`]. It compiles the function once (`compile.rs`: names → slots, types
//! made explicit), resolves the symbolic dims (`dims.rs`), fills the parameters from the
//! given inputs or with seeded random data (`random.rs`), and launches each `T.Kernel`
//! (`exec.rs`).
//!
//! # Semantics (tile level)
//!
//! - **Grid.** Every block of the grid runs. Blocks see the global buffers as they were at
//!   launch plus their own writes; when the grid finishes, all writes are applied in linear
//!   block order (x fastest), so results never depend on the number of host threads
//!   (`RunOptions::threads`). `T.use_swizzle` and layout annotations do not change results
//!   and are ignored; so is the thread count of the block (the tile level has no threads).
//! - **Buffers.** Parameters are global. Each block gets fresh shared, fragment and local
//!   allocations whose elements start *never written*; reading one before it is written is
//!   an error (for shared memory too: on a GPU it would be garbage). `T.fresh(S)` makes
//!   every element of `S` never-written again (its contents are discarded).
//! - **Loops.** `T.serial`, `T.unroll`, `T.vectorized`, `T.Parallel` (all iterations),
//!   `T.Pipelined` (as a plain serial loop, stages and order ignored) run their iterations in
//!   order. The loop variable is an int32.
//! - **Scalars.** Expressions follow `crate::types`; ints compute on i64 and wrap to their
//!   dtype's width, `/` truncates, `//` and `%` floor; integer division by zero is an error.
//!   float64 computes in f64, every other float in f32 rounded back to its dtype (f16 / bf16
//!   through `half`, fp8 as in `fp8.rs`). Float literals are exact until they take a dtype.
//!   `and` / `or` short-circuit and `T.if_then_else` evaluates only the taken branch.
//!   Conversions (`T.cast`, stores, lets with a declared dtype, copies) are
//!   `scalar::convert`: round to nearest even, ints wrap, float → int truncates and saturates.
//!   A let without a declared dtype takes its value's dtype.
//! - **Tile ops**: `T.copy` (`ops/copy.rs`: out-of-range reads give zero, out-of-range
//!   writes are dropped), `T.gemm` (`ops/gemm.rs`: f32 sums in K order), `T.fill` /
//!   `T.clear` (`ops/fill.rs`).
//! - **Errors.** An out-of-bounds load or store, a read of a never-written element and an
//!   integer division by zero stop the run with a `Diagnostic` at the offending expression or
//!   statement, naming the buffer, the index and the block (the first failing block in
//!   linear order). Nothing panics.
//!
//! Only statements inside `T.Kernel` and lets run.
//!
//! # Semantics (thread level)
//!
//! A kernel whose body has a `T.thread_binding(…, thread="threadIdx.*")` loop runs that
//! loop's body for all threads of the block in lockstep with active masks (`lockstep.rs`),
//! as tasks that switch only when one blocks on an mbarrier (`tasks.rs`: warp-specialized
//! producers and consumers run concurrently; a block whose every task is blocked is a
//! deadlock error): per-thread lets, loop variables, local and fragment buffers; shared
//! buffers per block; `T.sync_threads()` reached by every thread or an error. Shared memory is then one byte
//! array (`shared.rs`, also used for any kernel with a `T.shared_arena`), with per-byte
//! "never written" tracking, a data-race check between barriers, and per-byte tags of the
//! buffer and `T.fresh` generation that wrote each byte (`Memory::tag_of`): a read of a
//! value written before the reader's last `T.fresh` of its buffer, or written through
//! another buffer sharing the bytes, is an error. docs/ir.md
//! ("Thread-level execution") is the full statement. The target intrinsics —
//! `T.cp_async` with its commit / wait groups and pending bytes, the warp collectives
//! `T.ldmatrix` and `T.mma_sync` — are in `ops/intrinsics.rs` (docs/ir.md, "Thread-level
//! intrinsics").

mod compile;
mod dims;
mod eval;
mod exec;
pub mod fp8;
mod grid_sync;
mod lockstep;
mod memory;
pub mod npy;
mod ops;
mod order;
mod parallel;
mod print;
pub mod random;
pub mod scalar;
mod shared;
mod tasks;
pub mod tensor;

pub use npy::{
    npy_descr, packed_for, read_npy, read_npy_file, unpacked_for, write_npy, write_npy_file,
};
/// The print intrinsics' lines kept instead of written (`print.rs`).
pub use print::{capture as capture_prints, format_value as format_printed};
pub use random::{random_bytes, random_input, random_tensor};
pub use scalar::Scalar;
/// One element's bytes in memory (shared memory, device transfers): the one codec.
pub use shared::{decode as decode_element, encode as encode_element};
pub use tensor::{Tensor, TensorData};

use crate::diagnostic::Diagnostic;
use crate::interp::compile::CStmtKind;
use crate::interp::eval::Frame;
use crate::interp::memory::{Buffer, Memory};
use crate::ir::PrimFunc;
use std::collections::HashMap;

/// How to run. The default: seed 0, one thread per core.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Seed of the random data for parameters not given as inputs (see `random.rs`).
    pub seed: u64,
    /// Host threads that run blocks in parallel; 0 means one per available core. Results do
    /// not depend on it.
    pub threads: usize,
}

/// Runs `func` on the CPU.
///
/// `dims` gives symbolic dimensions by name (others are taken from the input shapes);
/// `inputs` gives parameters by name (others are drawn with [`random_input`] from
/// `opts.seed`; the function's own tensors, `T.alloc_global`, start as zeros, as the
/// runtime allocates them, and are no inputs). Returns every parameter after the run:
/// inputs as used, outputs as produced. Any error — a type error, a dim conflict, an input of the wrong dtype or
/// shape, a run-time fault — is a `Diagnostic`.
pub fn run(
    func: &PrimFunc,
    dims: &HashMap<String, i64>,
    mut inputs: HashMap<String, Tensor>,
    opts: &RunOptions,
) -> Result<HashMap<String, Tensor>, Diagnostic> {
    let cfunc = compile::compile(func)?;
    if let Some(p) = func
        .params
        .iter()
        .find(|p| func.is_scratch(&p.name.name) && inputs.contains_key(&p.name.name))
    {
        return Err(Diagnostic::error(
            p.span,
            format!(
                "`{}` is the function's own tensor (`T.alloc_global`), not an input: it starts as zeros",
                p.name.name
            ),
        ));
    }
    let resolved = dims::resolve(func, dims, &inputs)?;
    let mut globals: Vec<Buffer> = Vec::with_capacity(func.params.len());
    for (param, shape) in func.params.iter().zip(&resolved.shapes) {
        let name = &param.name.name;
        let made = if func.is_scratch(name) {
            Tensor::zeros(param.dtype, shape)
        } else {
            random_input(param, shape, opts.seed)
        };
        let tensor = match inputs.remove(name) {
            Some(t) => t,
            None => made.map_err(|e| Diagnostic::error(param.span, format!("`{name}`: {e}")))?,
        };
        globals.push(Buffer {
            name: name.clone(),
            dtype: tensor.dtype(),
            shape: tensor.shape().to_vec(),
            data: tensor.into_data(),
            written: None,
            arena_offset: None,
            discarded: false,
        });
    }
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let mut vars = vec![Scalar::Int(0); cfunc.n_vars];
    for (&slot, &v) in cfunc.dim_slots.iter().zip(&resolved.dims) {
        vars[slot] = Scalar::Int(v);
    }
    for stmt in &cfunc.body {
        match &stmt.kind {
            CStmtKind::Kernel(k) => exec::launch(k, stmt.span, &vars, &mut globals, threads)?,
            CStmtKind::Let { var, value } => {
                let frame = Frame {
                    vars: vars.clone(),
                    mem: Memory::new(&globals, Vec::new()),
                    threads: None,
                };
                let v = frame
                    .eval(value)
                    .map_err(|f| exec::to_diagnostic(*f, None))?;
                vars[*var] = v;
            }
            // The compiler admits only kernels and lets at the top level.
            _ => {}
        }
    }
    Ok(globals
        .into_iter()
        .map(|b| {
            let t = Tensor::from_data(b.dtype, b.shape, b.data);
            (b.name, t)
        })
        .collect())
}
