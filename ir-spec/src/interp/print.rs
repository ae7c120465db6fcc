//! The print intrinsics (`T.print`, `T.print_msg`, `T.print_elem`; `crate::intrinsic`'s
//! `print.rs`) in the interpreter: each thread that runs one writes its line — the same
//! bytes `vprintf` writes on the GPU (`line_parts`, `format_value`).
//!
//! Order: within a block, in the order the interpreter runs the threads (a statement of
//! tile-level or block-level code prints for thread 0, 1, … of the block in turn; in
//! lockstep code the active threads of a statement in increasing order); blocks in linear
//! order (x fastest), whatever the host threads — each block's lines are kept while it
//! runs (`begin_block` / `end_block`, on the host thread that runs it) and published by
//! the launch in block order (`publish`): to standard output, or to the caller of
//! [`capture`] (tests, tools that show the lines themselves).

use std::cell::RefCell;
use std::io::Write;

use super::compile::CExpr;
use super::eval::{Frame, Res};
use super::scalar::Scalar;
use crate::dtype::DType;
use crate::intrinsic::{elem_tail, line_parts, Format, Printed, EVERY_LANE};
use crate::span::Span;

/// A compiled print call.
#[derive(Clone, Debug)]
pub(crate) struct CPrint {
    pub msg: String,
    pub what: CPrinted,
}

#[derive(Clone, Debug)]
pub(crate) enum CPrinted {
    Msg,
    /// The value and its dtype.
    Value(CExpr, DType),
    /// The element (a load of it), its buffer's name and dtype, its index, and the printing
    /// thread (`EVERY_LANE`: all).
    Elem {
        value: CExpr,
        buffer: String,
        dtype: DType,
        index: CExpr,
        lane: i64,
    },
}

/// The block (or the blocks of a cluster, in rank order) running on this host thread, its
/// shape and the lines printed so far.
struct Running {
    blocks: Vec<Vec<i64>>,
    shape: [usize; 3],
    lines: Vec<String>,
}

thread_local! {
    static RUNNING: RefCell<Option<Running>> = const { RefCell::new(None) };
    /// Lines published on this thread while a `capture` runs.
    static CAPTURED: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Starts collecting the lines of the block(s) `blocks` (coordinates, x first) of `shape`
/// threads on this host thread.
pub(crate) fn begin_block(blocks: &[Vec<i64>], shape: [usize; 3]) {
    RUNNING.with(|r| {
        *r.borrow_mut() = Some(Running {
            blocks: blocks.to_vec(),
            shape,
            lines: Vec::new(),
        })
    });
}

/// The lines the block(s) printed since `begin_block`.
pub(crate) fn end_block() -> Vec<String> {
    RUNNING.with(|r| r.borrow_mut().take().map(|b| b.lines).unwrap_or_default())
}

/// The launch's lines, in block order: to the innermost [`capture`] on this thread, else to
/// standard output.
pub(crate) fn publish(lines: Vec<String>) {
    if lines.is_empty() {
        return;
    }
    let lines = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(sink) => {
            sink.extend(lines);
            None
        }
        None => Some(lines),
    });
    if let Some(lines) = lines {
        let mut out = std::io::stdout().lock();
        for l in lines {
            // A closed standard output loses the lines, never the run.
            let _ = writeln!(out, "{l}");
        }
        let _ = out.flush();
    }
}

/// Runs `f` with the lines every launch on this thread publishes kept, and returns them
/// (in order) beside `f`'s result instead of writing them to standard output.
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<String>) {
    let outer = CAPTURED.with(|c| c.borrow_mut().replace(Vec::new()));
    let result = f();
    let lines = CAPTURED.with(|c| {
        let mut slot = c.borrow_mut();
        let lines = slot.take().unwrap_or_default();
        *slot = outer;
        lines
    });
    (result, lines)
}

/// `value` as C's `printf` writes it with the conversion `vprintf` gets for `dtype`.
pub fn format_value(value: Scalar, dtype: DType) -> String {
    match Format::of(dtype) {
        Format::Bool => (if value.as_bool() { "true" } else { "false" }).to_string(),
        Format::Float => {
            let x = value.as_f64();
            if x.is_nan() {
                (if x.is_sign_negative() { "-nan" } else { "nan" }).to_string()
            } else if x.is_infinite() {
                (if x < 0.0 { "-inf" } else { "inf" }).to_string()
            } else {
                format!("{x:.6}")
            }
        }
        Format::Int | Format::UInt | Format::Int64 => value.as_i64().to_string(),
    }
}

impl Frame<'_> {
    /// The print `p` run by the threads `threads` (linear indices in the unit of blocks the
    /// frame runs: `rank * block threads + thread`), each with the values this frame gives
    /// (block-level code: every thread sees the same).
    pub(crate) fn print(&self, p: &CPrint, threads: &[usize], span: Span) -> Res<()> {
        let _ = span;
        let per_block = RUNNING.with(|r| {
            r.borrow()
                .as_ref()
                .map_or(1, |b| b.shape.iter().product::<usize>().max(1))
        });
        let (printed, value, index, lane) = match &p.what {
            CPrinted::Msg => (Printed::Msg, None, None, EVERY_LANE),
            CPrinted::Value(v, dtype) => (
                Printed::Value(*dtype),
                Some((self.eval(v)?, *dtype)),
                None,
                EVERY_LANE,
            ),
            CPrinted::Elem {
                value,
                buffer,
                dtype,
                index,
                lane,
            } => {
                // Only the printing thread reads the element (it may be out of the others'
                // reach: a guard around the print).
                let any = threads.iter().any(|&t| printing(t % per_block, *lane));
                if !any {
                    return Ok(());
                }
                let v = self.eval(value)?;
                let i = self.eval_int(index)?;
                (
                    Printed::Elem {
                        buffer: buffer.as_str(),
                        dtype: *dtype,
                    },
                    Some((v, *dtype)),
                    Some(i),
                    *lane,
                )
            }
        };
        let (head, middle) = line_parts(&p.msg, printed);
        RUNNING.with(|r| {
            let mut r = r.borrow_mut();
            let Some(running) = r.as_mut() else {
                return;
            };
            let [sx, sy, _] = running.shape;
            for &t in threads {
                let local = t % per_block;
                if !printing(local, lane) {
                    continue;
                }
                let block = running
                    .blocks
                    .get(t / per_block)
                    .cloned()
                    .unwrap_or_default();
                let b = |k: usize| block.get(k).copied().unwrap_or(0);
                let (tx, ty, tz) = (
                    local % sx.max(1),
                    (local / sx.max(1)) % sy.max(1),
                    local / (sx * sy).max(1),
                );
                let mut line = format!(
                    "{head}BlockIdx=({}, {}, {}), ThreadIdx=({tx}, {ty}, {tz}){middle}",
                    b(0),
                    b(1),
                    b(2)
                );
                if let (Some(i), Some((_, dtype))) = (index, value) {
                    line.push_str(&i.to_string());
                    line.push_str(&elem_tail(dtype));
                }
                if let Some((v, dtype)) = value {
                    line.push_str(&format_value(v, dtype));
                }
                running.lines.push(line);
            }
        });
        Ok(())
    }

    /// The print run by every thread of the block (tile-level or block-level code).
    pub(crate) fn print_all_threads(&self, p: &CPrint, span: Span) -> Res<()> {
        let n = RUNNING.with(|r| {
            r.borrow()
                .as_ref()
                .map_or(0, |b| b.shape.iter().product::<usize>())
        });
        let threads: Vec<usize> = (0..n).collect();
        self.print(p, &threads, span)
    }
}

/// Whether the thread of linear index `t` in its block prints under `lane`.
fn printing(t: usize, lane: i64) -> bool {
    lane == EVERY_LANE || usize::try_from(lane).is_ok_and(|l| l == t)
}
