//! TileLang's random numbers (`tilelang/cuda/language/random.py`): `T.rng_init(seed, seq,
//! off=0, generator="curandStatePhilox4_32_10_t")`, `T.rng_rand()` (a uint32) and
//! `T.rng_rand_float()` (a float32 in (0, 1], curand's `curand_uniform`), which TileLang
//! lowers to curand calls on one state per kernel.
//!
//! In tlc the state is a per-thread local array: the kernel's first `T.rng_init` declares
//! `rng_state` (seven uint32 words, `intrinsic::rng`), and each call becomes the
//! thread-level intrinsic on it: `T.philox_init(rng_state[0], seed, seq, off)`; a draw,
//! which TileLang writes as a value, is hoisted as the warp shuffles are
//! (`lower_value_call.rs`) into `T.philox_rand(rng_v[0], rng_state[0])` /
//! `T.philox_uniform(…)` before the assignment that reads it.
//!
//! What tlc cannot make exact is refused, at the call: another generator (MRG32k3a, XORWOW:
//! other streams), `dist="normal"` and `bit=64` (other curand functions), `T.rng_init`
//! without `seq` (TileLang fills in `tx + bx * blockDim.x`; write it), a draw before any
//! `T.rng_init` of the kernel, a draw where it would run for only some threads or more
//! than once per assignment (a condition or a loop bound), and a draw inside a `T.Parallel`
//! loop of a kernel with more than one thread: the layout decides which thread runs which
//! iteration, so the order of each thread's draws would be the layout's. In a one-thread
//! kernel (TileLang's `rand_uint`) the thread runs the loop's iterations in order, so such
//! a loop is a serial one.

use crate::diagnostic::Diagnostic;
use crate::dtype::DType;
use crate::ir::{ElemRef, Expr, ExprKind, ForKind, Ident, Intrinsic, Scope, Stmt, StmtKind};
use crate::span::Span;
use crate::syntax::ast;
use crate::syntax::lower::Lowerer;
use crate::visit;

/// The generator tlc implements (TileLang's default).
const PHILOX: &str = "curandStatePhilox4_32_10_t";

/// Whether `name` is a draw this file lowers as a value.
pub fn is_draw(name: &str) -> bool {
    matches!(name, "T.rng_rand" | "T.rng_rand_float")
}

impl Lowerer {
    /// `T.rng_init(seed, seq, off=0, generator=…)` as a statement.
    pub fn rng_init(&mut self, e: &ast::Expr) -> Option<Stmt> {
        let ast::ExprKind::Call(_, args) = &e.kind else {
            return None;
        };
        let span = e.span;
        let names = ["seed", "seq", "off", "generator"];
        let a = self.bind("T.rng_init", span, args, &names, 1)?;
        // Declared first, so that a refused init leaves its draws no second error.
        let state = self.rng_state(span, true)?;
        if let Some(g) = a[3] {
            let g_span = g.span;
            let generator = self.string(g, "the generator of `T.rng_init`")?;
            if generator != PHILOX {
                return self.fail(
                    Diagnostic::error(
                        g_span,
                        format!("tlc implements only curand's Philox4x32-10 generator, not `{generator}`"),
                    )
                    .with_note(format!(
                        "leave `generator` out (TileLang's default, `{PHILOX}`): the other \
                         generators' streams are not reproduced"
                    )),
                );
            }
        }
        let Some(seq) = a[1].filter(|s| !matches!(s.kind, ast::ExprKind::None)) else {
            return self.fail(
                Diagnostic::error(span, "`T.rng_init` without `seq`").with_note(
                    "TileLang then takes the thread's global index as the subsequence; write \
                         it out: `tx = T.get_thread_binding()`, `T.rng_init(seed, bx * THREADS + \
                         tx, off)`",
                ),
            );
        };
        let seed = self.expr(a[0]?);
        let seq = self.expr(seq);
        let offset = match a[2] {
            Some(o) => self.expr(o),
            None => Some(Expr::int(0)),
        };
        let (seed, seq, offset) = (seed?, seq?, offset?);
        Some(Stmt::new(
            StmtKind::Intrinsic(Intrinsic::PhiloxInit {
                state,
                seed,
                seq,
                offset,
            }),
            span,
        ))
    }

    /// A draw in an expression: hoisted, read back.
    pub fn rng_draw(&mut self, name: &str, span: Span, args: &[ast::Arg]) -> Option<Expr> {
        let uniform = name == "T.rng_rand_float";
        if uniform {
            let a = self.bind(name, span, args, &["bit", "dist"], 0)?;
            if let Some(b) = a[0] {
                let b_span = b.span;
                if self.const_int(b, "the bit width of `T.rng_rand_float`")? != 32 {
                    return self.fail(
                        Diagnostic::error(b_span, "`T.rng_rand_float(bit=64)` is not supported")
                            .with_note("tlc draws float32 only (curand_uniform)"),
                    );
                }
            }
            if let Some(d) = a[1] {
                let d_span = d.span;
                let dist = self.string(d, "the distribution of `T.rng_rand_float`")?;
                if dist != "uniform" {
                    return self.fail(
                        Diagnostic::error(
                            d_span,
                            format!("`T.rng_rand_float(dist=\"{dist}\")` is not supported"),
                        )
                        .with_note(
                            "tlc draws the uniform distribution only (curand_uniform); curand's \
                             normal draws (Box-Muller with a cached second value) are not \
                             reproduced",
                        ),
                    );
                }
            }
        } else {
            self.bind(name, span, args, &[], 0)?;
        }
        if self.hoisted.is_none() || self.conditional > 0 {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("`{name}()` is supported only as the value of an assignment"),
                )
                .with_note(
                    "a draw advances the generator: tlc runs it once, before the assignment that \
                     uses it; assign it to a name first (`v = …`) and use the name here",
                ),
            );
        }
        let Some(state) = self.rng_state(span, false) else {
            return self.fail(
                Diagnostic::error(
                    span,
                    format!("`{name}()` before any `T.rng_init` of the kernel"),
                )
                .with_note("initialize the generator first: `T.rng_init(seed, seq, off)`"),
            );
        };
        let dtype = if uniform {
            DType::Float32
        } else {
            DType::UInt32
        };
        let dst = self.temp(dtype, "rng_v", span)?;
        let call = if uniform {
            Intrinsic::PhiloxUniform {
                dst: dst.clone(),
                state,
            }
        } else {
            Intrinsic::PhiloxRand {
                dst: dst.clone(),
                state,
            }
        };
        if let Some(h) = &mut self.hoisted {
            h.push(Stmt::new(StmtKind::Intrinsic(call), span));
        }
        Some(Expr::new(
            ExprKind::Load {
                buffer: dst.buffer.name,
                indices: dst.indices,
            },
            span,
        ))
    }

    /// The kernel's generator state `rng_state[0]`, declared by the first init (`create`).
    fn rng_state(&mut self, span: Span, create: bool) -> Option<ElemRef> {
        let existing = self.open_kernel(span, "`T.rng_init`")?.rng_state.clone();
        let name = match existing {
            Some(n) => n,
            None if create => {
                let mut name = self.generated_name("rng_state");
                let mut k = 1;
                while self.buffers.contains_key(&name) {
                    name = self.generated_name(&format!("rng_state_{k}"));
                    k += 1;
                }
                let ident = ast::Ident {
                    name: name.clone(),
                    span,
                };
                let words = Expr::int(crate::intrinsic::rng::STATE_WORDS);
                let decl = self.declare(&ident, vec![words], DType::UInt32, Scope::Local, span)?;
                if let Some(k) = self.kernels.last_mut() {
                    k.allocs.push(decl);
                    k.rng_state = Some(name.clone());
                }
                name
            }
            None => return None,
        };
        Some(ElemRef {
            buffer: Ident::new(name, span),
            indices: vec![Expr::int(0)],
        })
    }

    /// A `T.Parallel` loop nest (`outer`, from `span`) whose body draws random numbers: in a
    /// one-thread kernel its loops become serial ones (the thread runs the iterations in
    /// order); otherwise the located error.
    pub fn rng_in_parallel(&mut self, outer: &mut Stmt, span: Span) -> Option<()> {
        let mut draw: Option<Span> = None;
        visit::for_each_stmt(std::slice::from_ref(outer), &mut |s| {
            if let (None, StmtKind::Intrinsic(i)) = (draw, &s.kind) {
                if matches!(
                    i,
                    Intrinsic::PhiloxInit { .. }
                        | Intrinsic::PhiloxRand { .. }
                        | Intrinsic::PhiloxUniform { .. }
                ) {
                    draw = Some(s.span);
                }
            }
        });
        let Some(at) = draw else {
            return Some(());
        };
        let threads = self.kernels.last().and_then(|k| k.threads.clone());
        let one = threads
            .as_ref()
            .is_some_and(|t| t.iter().all(|e| crate::verifier::const_int(e) == Some(1)));
        if !one {
            return self.fail(
                Diagnostic::error(at, "a random draw inside a `T.Parallel` loop of a kernel with more than one thread")
                    .with_note_at(span, "the `T.Parallel` loop is here")
                    .with_note(
                        "the layout decides which thread runs which iteration, so the order of \
                         each thread's draws would be the layout's; draw in per-thread code \
                         (`tx = T.get_thread_binding()`, `for k in T.serial(n): A[…] = \
                         T.rng_rand()`)",
                    ),
            );
        }
        // One thread: the iterations in order, as serial loops.
        let mut s = outer;
        while let StmtKind::For(f) = &mut s.kind {
            if f.kind != ForKind::Parallel {
                break;
            }
            f.kind = ForKind::Serial;
            match f.body.as_mut_slice() {
                [inner] => s = inner,
                _ => break,
            }
        }
        Some(())
    }
}
