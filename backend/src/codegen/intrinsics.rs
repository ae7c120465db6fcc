//! The thread-level target intrinsics (`docs/ir.md`) → PTX:
//!
//! - `T.cp_async(S[..], G[..], bytes[, pred])` → `cp.async.{cg|ca}.shared.global [s], [g],
//!   bytes{, src_size}`: `.cg` (L2 only) for 16 bytes, `.ca` for 4 and 8 (`.cg` allows 16
//!   only). With a predicate, `src_size = pred ? bytes : 0` (`selp`): a false predicate reads
//!   nothing and zero-fills the destination, so the source address may be out of bounds.
//! - `T.cp_async_commit()` → `cp.async.commit_group`, `T.cp_async_wait(n)` →
//!   `cp.async.wait_group n`.
//! - `T.ldmatrix(F[i], S[r, c], num, trans)` → `ldmatrix.sync.aligned.m8n8.xNUM{.trans}
//!   .shared.b16` into `num` fresh b32 registers, each then split (`mov.b32 {lo, hi}`) into
//!   the local elements `F[i + 2m]` (low half) and `F[i + 2m + 1]` (high half).
//! - `T.mma_sync(C[i], A[j], B[k])` → the f16 / bf16 elements of `A[j..j+8]` and `B[k..k+4]`
//!   packed in pairs (`mov.b32 r, {lo, hi}`, the lower index in the low half), then
//!   `mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}.{f16|bf16}.f32` with `d = c =` the
//!   four f32 registers of `C[i..i+4]` (accumulation in place); a float16 `C` packs
//!   `C[i..i+4]` into two f16x2 words for `mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16`
//!   and unpacks the two result words back into them.
//! - `T.bar_sync(id, count)` → `bar.sync id, count`.
//!
//! Local-array operands must have constant indices once unrolled loop variables are
//! substituted (the registers are fixed at compile time), and their arrays must live in
//! registers: an array indexed at run time anywhere lives in local memory (`local.rs`) and
//! is refused here with a located error.
//!
//! The operand rules (scopes, dtypes, element counts, allowed constants) are the verifier's,
//! from the one table in `tlc_ir::intrinsic`; codegen takes verified IR and does not check
//! them again. What remains here is what only code generation knows (register runs,
//! addresses).

use super::expr::Place;
use super::hopper::ASource;
use super::{Cg, Mem};
use crate::ptx::{
    CacheOp, LdmatrixNum, MmaInput, MmaShape, Op, Operand, Reg, ShflMode, Space, Type,
};
use tlc_ir::{DType, ElemRef, Expr, ExprKind, Intrinsic, Span};

impl Cg {
    /// Lowers one intrinsic: every variant is listed (no catch-all), so a new intrinsic is a
    /// compile error here until it has its PTX.
    pub(super) fn intrinsic(&mut self, i: &Intrinsic, span: Span) {
        match i {
            Intrinsic::CpAsync {
                dst,
                src,
                bytes,
                pred,
            } => self.cp_async(dst, src, *bytes, pred.as_ref(), span),
            Intrinsic::CommitGroup => self.b.emit(Op::CpAsyncCommit),
            Intrinsic::WaitGroup { n } => match u32::try_from(*n) {
                Ok(pending) => self.b.emit(Op::CpAsyncWait { pending }),
                Err(_) => self.err(
                    span,
                    format!("T.cp_async_wait({n}): the group count must lie in 0..=4294967295"),
                ),
            },
            Intrinsic::Ldmatrix {
                dst,
                src,
                num,
                trans,
            } => self.ldmatrix(dst, src, *num, *trans, span),
            Intrinsic::Mma {
                acc,
                a,
                b,
                packed_int4,
            } => self.mma(acc, a, b, *packed_int4),
            Intrinsic::ShflXor { dst, src, offset } => {
                self.shfl(dst, src, (ShflMode::Bfly, *offset), span)
            }
            Intrinsic::ShflDown { dst, src, offset } => {
                self.shfl(dst, src, (ShflMode::Down, *offset), span)
            }
            Intrinsic::AtomicAddRet { old, dst, value } => {
                self.atomic_add_ret((old, dst, value), span)
            }
            Intrinsic::PhiloxInit {
                state,
                seed,
                seq,
                offset,
            } => self.philox_init(state, (seed, seq, offset)),
            Intrinsic::PhiloxRand { dst, state } => self.philox_draw(dst, state, false),
            Intrinsic::PhiloxUniform { dst, state } => self.philox_draw(dst, state, true),
            Intrinsic::ShflSyncIdx { .. }
            | Intrinsic::ShflSyncBfly { .. }
            | Intrinsic::ShflSyncDown { .. }
            | Intrinsic::ShflSyncUp { .. } => {
                if let Some(s) = i.shuffle() {
                    self.shfl_sync(&s, span);
                }
            }
            Intrinsic::BarSync { id, count } => match (u32::try_from(*id), u32::try_from(*count)) {
                (Ok(id), Ok(threads)) => self.b.emit(Op::BarSync {
                    id,
                    threads: Some(threads),
                }),
                _ => self.err(span, format!("T.bar_sync({id}, {count}): out of range")),
            },
            Intrinsic::BarArrive { id, count } => match (u32::try_from(*id), u32::try_from(*count))
            {
                (Ok(id), Ok(threads)) => self.b.emit(Op::BarArrive { id, threads }),
                _ => self.err(span, format!("T.bar_arrive({id}, {count}): out of range")),
            },
            // sm_90a's: mbarriers, TMA, wgmma, proxy fences, setmaxnreg (helpers in `hopper.rs`).
            Intrinsic::FenceProxyAsync => self.b.emit(Op::FenceProxyAsync),
            Intrinsic::WgmmaFence => self.b.emit(Op::WgmmaFence),
            Intrinsic::WgmmaCommit => self.b.emit(Op::WgmmaCommit),
            Intrinsic::WgmmaWait { n } => match u32::try_from(*n) {
                Ok(pending) => self.b.emit(Op::WgmmaWait { pending }),
                Err(_) => self.err(span, format!("T.wgmma_wait({n}): a group count 0..=7")),
            },
            Intrinsic::SetMaxNReg { n, inc } => match u32::try_from(*n) {
                Ok(n) => self.b.emit(Op::SetMaxNReg { inc: *inc, n }),
                Err(_) => self.err(span, format!("T.setmaxnreg({n}): a count 24..=256")),
            },
            Intrinsic::Wgmma {
                acc,
                a,
                b,
                n,
                accumulate,
                ..
            } => match i.wgmma_layouts() {
                Some((Some(da), db)) => self.wgmma(
                    acc,
                    ASource::Shared(a, da),
                    (b, db),
                    *n,
                    accumulate.as_ref(),
                    span,
                ),
                _ => self.err(span, "T.wgmma: a swizzle the verifier rejects"),
            },
            Intrinsic::WgmmaRs {
                acc,
                a,
                b,
                n,
                accumulate,
                ..
            } => match i.wgmma_layouts() {
                Some((_, db)) => self.wgmma(
                    acc,
                    ASource::Registers(a),
                    (b, db),
                    *n,
                    accumulate.as_ref(),
                    span,
                ),
                None => self.err(span, "T.wgmma_rs: a swizzle the verifier rejects"),
            },
            Intrinsic::MbarrierInit { bar, count } => {
                let Some(addr) = self.mbarrier(bar, "T.mbarrier_init") else {
                    return;
                };
                match u32::try_from(*count) {
                    Ok(count) => self.b.emit(Op::MbarrierInit { addr, count }),
                    Err(_) => self.err(span, format!("T.mbarrier_init with count {count}")),
                }
            }
            Intrinsic::MbarrierArrive { bar } => {
                if let Some(addr) = self.mbarrier(bar, "T.mbarrier_arrive") {
                    self.b.emit(Op::MbarrierArrive {
                        addr,
                        expect_tx: None,
                    });
                }
            }
            Intrinsic::MbarrierArriveExpectTx { bar, bytes } => {
                let Some(addr) = self.mbarrier(bar, "T.mbarrier_arrive_expect_tx") else {
                    return;
                };
                match u32::try_from(*bytes) {
                    Ok(tx) => self.b.emit(Op::MbarrierArrive {
                        addr,
                        expect_tx: Some(tx),
                    }),
                    Err(_) => self.err(
                        span,
                        format!("T.mbarrier_arrive_expect_tx of {bytes} bytes"),
                    ),
                }
            }
            Intrinsic::MbarrierWait { bar, parity } => self.mbarrier_wait(bar, parity),
            Intrinsic::TmaLoad {
                dst,
                src,
                bar,
                swizzle,
                multicast,
                ..
            } => self.tma_load(i, (dst, src, bar), (*swizzle, *multicast), span),
            Intrinsic::MbarrierArriveCluster { bar, rank } => {
                self.mbarrier_arrive_cluster(bar, rank)
            }
            Intrinsic::ClusterSync => {
                self.b.emit(Op::ClusterArrive);
                self.b.emit(Op::ClusterWait);
            }
            // `vprintf` (`print.rs`).
            Intrinsic::Print { .. } | Intrinsic::PrintMsg { .. } | Intrinsic::PrintElem { .. } => {
                self.print(i, span)
            }
        }
    }

    /// The dtype and memory of the buffer an intrinsic operand names (an error if unknown or
    /// of the wrong rank).
    pub(super) fn operand_buf(&mut self, r: &ElemRef) -> Option<(DType, Mem)> {
        let name = &r.buffer.name;
        let Some(buf) = self.bufs.get(name) else {
            self.err(r.buffer.span, format!("undefined buffer `{name}`"));
            return None;
        };
        let (dtype, mem, rank) = (buf.dtype, buf.mem.clone(), buf.shape.len());
        if r.indices.len() != rank {
            self.err(
                r.buffer.span,
                format!(
                    "`{name}` has {rank} dims but is indexed with {}",
                    r.indices.len()
                ),
            );
            return None;
        }
        Some((dtype, mem))
    }

    /// The `count` consecutive registers of a local array from `r` on.
    pub(super) fn local_run(
        &mut self,
        r: &ElemRef,
        count: usize,
        what: &str,
    ) -> Option<(DType, Vec<Reg>)> {
        let (dtype, mem) = self.operand_buf(r)?;
        let name = &r.buffer.name;
        if let Mem::LocalMemory { .. } = mem {
            let here = r.indices.iter().find(|i| self.const_eval(i).is_none());
            let msg = match here {
                Some(_) => format!(
                    "index of local array `{name}` is not a constant: {what} needs `{name}` in \
                     registers; unroll the loop (T.unroll) first"
                ),
                None => format!(
                    "{what} needs `{name}` in registers, but `{name}` is indexed at run time \
                     elsewhere (so it lives in local memory): index it only with constants \
                     once loops are unrolled (T.unroll)"
                ),
            };
            self.err(here.map_or(r.buffer.span, |i| i.span), msg);
            return None;
        }
        let Mem::Local(regs) = mem else {
            self.err(
                r.buffer.span,
                format!("{what} must be a local array (`T.alloc_local`); `{name}` is not"),
            );
            return None;
        };
        let shape = self.bufs.get(name).map(|b| b.shape.clone())?;
        let start = self.local_flat(name, &r.indices, &shape)?;
        match regs.get(start..start.saturating_add(count)) {
            Some(run) => Some((dtype, run.to_vec())),
            None => {
                self.err(
                    r.buffer.span,
                    format!(
                        "{what} needs {count} elements of `{name}` from position {start}, but \
                         `{name}` has {} elements",
                        regs.len()
                    ),
                );
                None
            }
        }
    }

    /// The address of a shared or global operand, checking its memory.
    pub(super) fn mem_operand(
        &mut self,
        r: &ElemRef,
        want: Space,
        what: &str,
    ) -> Option<(DType, Place)> {
        let (dtype, mem) = self.operand_buf(r)?;
        let name = &r.buffer.name;
        let ok = matches!(
            (&mem, want),
            (Mem::Shared(_), Space::Shared) | (Mem::Global(_), Space::Global)
        );
        if !ok {
            let scope = if want == Space::Shared {
                "shared memory (`T.alloc_shared`)"
            } else {
                "global memory (a tensor parameter)"
            };
            self.err(
                r.buffer.span,
                format!("{what} must be in {scope}; `{name}` is not"),
            );
            return None;
        }
        let place = self.address(name, &r.indices, r.buffer.span)?;
        Some((dtype, place))
    }

    fn cp_async(
        &mut self,
        dst: &ElemRef,
        src: &ElemRef,
        bytes: i64,
        pred: Option<&Expr>,
        span: Span,
    ) {
        // The verifier allows 4, 8 or 16 bytes of whole elements (`tlc_ir::intrinsic`).
        let Ok(size) = u32::try_from(bytes) else {
            self.err(span, format!("T.cp_async of {bytes} bytes"));
            return;
        };
        // The predicate first: a predicate that reads memory lowers to a branch.
        let guard = match pred {
            None => None,
            Some(e) if matches!(e.kind, ExprKind::Bool(true)) => None,
            Some(e) => {
                let Some(p) = self.expr(e, DType::Bool) else {
                    return;
                };
                Some(self.in_reg(p, Type::Pred))
            }
        };
        let Some((_, Place::Mem(_, daddr))) =
            self.mem_operand(dst, Space::Shared, "the destination of T.cp_async")
        else {
            return;
        };
        let Some((_, Place::Mem(_, saddr))) =
            self.mem_operand(src, Space::Global, "the source of T.cp_async")
        else {
            return;
        };
        let src_size = guard.map(|p| {
            self.b
                .selp(Type::U32, Operand::Imm(bytes), Operand::Imm(0), p)
                .into()
        });
        let cache = if size == 16 { CacheOp::Cg } else { CacheOp::Ca };
        self.b.emit(Op::CpAsync {
            cache,
            dst: daddr,
            src: saddr,
            size,
            src_size,
        });
    }

    fn ldmatrix(&mut self, dst: &ElemRef, src: &ElemRef, num: i64, trans: bool, span: Span) {
        // The verifier allows num = 1, 2 or 4, 16-bit or int8 elements, and int8 untransposed
        // only (`tlc_ir::intrinsic`).
        let Some(lnum) = LdmatrixNum::of(num) else {
            self.err(span, format!("T.ldmatrix of {num} matrices"));
            return;
        };
        let n = lnum.regs();
        let per = match self.bufs.get(&dst.buffer.name).map(|b| b.dtype) {
            Some(DType::Int8) => 4,
            _ => 2,
        };
        let Some((_, regs)) = self.local_run(dst, per * n, "the destination of T.ldmatrix") else {
            return;
        };
        let Some((_, Place::Mem(_, addr))) =
            self.mem_operand(src, Space::Shared, "the source of T.ldmatrix")
        else {
            return;
        };
        let words: Vec<Reg> = (0..n).map(|_| self.b.new_reg(Type::B32)).collect();
        self.b.emit(Op::Ldmatrix {
            num: lnum,
            trans,
            dsts: words.clone(),
            addr,
        });
        if per == 4 {
            self.unpack_bytes(words, &regs);
        } else {
            self.unpack_pairs(words, &regs);
        }
    }

    /// Unpacks each `.b32` word into its four int8 registers (sign-extended, as every int8
    /// register is; the low byte first), and remembers the word as their packed form.
    fn unpack_bytes(&mut self, words: Vec<Reg>, regs: &[Reg]) {
        for (w, quad) in words.into_iter().zip(regs.chunks_exact(4)) {
            for (k, &r) in quad.iter().enumerate() {
                self.forget_packed(r);
                let byte = self.b.bfe(Type::S32, w, 8 * k as u32, 8);
                self.b.emit(Op::Mov {
                    ty: Type::B32,
                    dst: r,
                    src: byte.into(),
                });
            }
            if let [a, b, c, d] = *quad {
                self.packed_bytes.insert([a, b, c, d], w);
            }
        }
    }

    /// int8 registers packed four by four into b32 words (the first the low byte). Four an
    /// ldmatrix loaded are used as the word they arrived in.
    fn pack_bytes(&mut self, bytes: &[Reg]) -> Vec<Reg> {
        bytes
            .chunks_exact(4)
            .map(|q| {
                let key = [q[0], q[1], q[2], q[3]];
                match self.packed_bytes.get(&key) {
                    Some(&w) => w,
                    None => {
                        // `bfi` keeps the low 8 bits of each (sign-extended) value.
                        let mut w = q[0];
                        for (k, &r) in q.iter().enumerate().skip(1) {
                            w = self.b.bfi(r, w, 8 * k as u32, 8);
                        }
                        w
                    }
                }
            })
            .collect()
    }

    /// Unpacks each `.b32` word into its pair of 16-bit registers (low half first), and
    /// remembers the word as the pair's packed form.
    fn unpack_pairs(&mut self, words: Vec<Reg>, regs: &[Reg]) {
        for (w, pair) in words.into_iter().zip(regs.chunks_exact(2)) {
            self.forget_packed(pair[0]);
            self.forget_packed(pair[1]);
            self.b.emit(Op::Unpack {
                ty: Type::B32,
                dsts: pair.to_vec(),
                src: w,
            });
            self.packed.insert((pair[0], pair[1]), w);
        }
    }

    /// `T.shfl_xor` (`.bfly`), `T.shfl_down` (`.down`): every lane of the whole warp takes
    /// part (`Cg::shuffle`).
    fn shfl(&mut self, dst: &ElemRef, src: &ElemRef, (mode, offset): (ShflMode, i64), span: Span) {
        let Ok(lane) = u32::try_from(offset) else {
            self.err(span, format!("shfl{} offset {offset}", mode.suffix()));
            return;
        };
        let Some((d, s)) = self.local_run(src, 1, "the source of a shuffle") else {
            return;
        };
        let Some((_, t)) = self.local_run(dst, 1, "the destination of a shuffle") else {
            return;
        };
        let (Some(&s), Some(&t), Some(ty)) = (s.first(), t.first(), super::ptx_type(d)) else {
            return;
        };
        let how = (
            mode,
            Operand::Imm(i64::from(lane)),
            Operand::Imm(i64::from(mode.clamp())),
        );
        let got = self.shuffle(s, ty, how, Operand::Imm(i64::from(u32::MAX)));
        self.forget_packed(t);
        self.b.emit(Op::Mov {
            ty: super::expr::mov_type(ty),
            dst: t,
            src: got.into(),
        });
    }

    fn mma(&mut self, acc: &ElemRef, a: &ElemRef, b: &ElemRef, packed_int4: bool) {
        // The verifier holds the dtypes (an f32 accumulator with A and B both f16 or both
        // bf16, an f16 accumulator with f16 A and B, or an int32 one with int8 A and B, also
        // when packed_int4): the multiplicand type is A's.
        let Some((ct, c)) = self.local_run(acc, 4, "the accumulator of T.mma_sync") else {
            return;
        };
        if ct == DType::Int32 {
            self.mma_s32(c, a, b, packed_int4);
            return;
        }
        let Some((at, a_regs)) = self.local_run(a, 8, "the A operand of T.mma_sync") else {
            return;
        };
        let Some((_, b_regs)) = self.local_run(b, 4, "the B operand of T.mma_sync") else {
            return;
        };
        let ab = match at {
            DType::Float16 => MmaInput::F16,
            DType::BFloat16 => MmaInput::Bf16,
            _ => {
                self.err(a.buffer.span, format!("T.mma_sync of {at} elements"));
                return;
            }
        };
        let a_words = self.pack_pairs(&a_regs);
        let b_words = self.pack_pairs(&b_regs);
        if ct == DType::Float16 {
            // Two f16x2 words, the lower element index in the low half (`c0,c1`, `c2,c3`):
            // packed in, fresh words out, split back into the four f16 registers (and
            // remembered as packed, so the next mma on them takes the words as they are).
            let c_words = self.pack_pairs(&c);
            let d_words: Vec<Reg> = (0..2).map(|_| self.b.new_reg(Type::B32)).collect();
            self.b.emit(Op::Mma {
                shape: MmaShape::M16n8k16,
                acc_ty: Type::F16,
                ab,
                d: d_words.clone(),
                a: a_words,
                b: b_words,
                c: c_words,
            });
            self.unpack_pairs(d_words, &c);
            return;
        }
        self.b.emit(Op::Mma {
            shape: MmaShape::M16n8k16,
            acc_ty: Type::F32,
            ab,
            d: c.clone(),
            a: a_words,
            b: b_words,
            c,
        });
    }

    /// `mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32` on an int32 accumulator `c`: A's 16
    /// and B's 8 int8 elements packed four to a word (4 and 2 words). `packed_int4`: the
    /// same words are `m16n8k64.row.col.s32.s4.s4.s32`'s eight int4 to a word (the
    /// fragments of both forms put byte `k` of a lane's run in the same register and byte
    /// position, low nibble first: docs/ir.md, "int4").
    fn mma_s32(&mut self, c: Vec<Reg>, a: &ElemRef, b: &ElemRef, packed_int4: bool) {
        let Some((_, a_regs)) = self.local_run(a, 16, "the A operand of T.mma_sync") else {
            return;
        };
        let Some((_, b_regs)) = self.local_run(b, 8, "the B operand of T.mma_sync") else {
            return;
        };
        let a_words = self.pack_bytes(&a_regs);
        let b_words = self.pack_bytes(&b_regs);
        for &r in &c {
            self.forget_packed(r);
        }
        let (shape, ab) = if packed_int4 {
            (MmaShape::M16n8k64, MmaInput::S4)
        } else {
            (MmaShape::M16n8k32, MmaInput::S8)
        };
        self.b.emit(Op::Mma {
            shape,
            acc_ty: Type::S32,
            ab,
            d: c.clone(),
            a: a_words,
            b: b_words,
            c,
        });
    }

    /// 16-bit registers packed two by two into b32 registers (the first of a pair low).
    /// A pair an ldmatrix loaded is used as the word it arrived in.
    pub(super) fn pack_pairs(&mut self, halves: &[Reg]) -> Vec<Reg> {
        halves
            .chunks_exact(2)
            .map(|p| match self.packed.get(&(p[0], p[1])) {
                Some(&w) => w,
                None => {
                    let lanes = p.iter().map(|&r| r.into()).collect();
                    self.b.pack(Type::B32, lanes)
                }
            })
            .collect()
    }

    /// The 4 packed words of `a`'s 8 elements when its array keeps them (`words`) and
    /// they start at an even element.
    pub(super) fn kept_words(&mut self, a: &ElemRef) -> Option<Vec<Reg>> {
        let words = self.words.get(&a.buffer.name)?.clone();
        let shape = self.bufs.get(&a.buffer.name)?.shape.clone();
        let start = self.local_flat(&a.buffer.name, &a.indices, &shape)?;
        (start % 2 == 0)
            .then(|| words.get(start / 2..start / 2 + 4).map(<[Reg]>::to_vec))
            .flatten()
    }

    /// Before a `T.wgmma_fence`: the register A words of the `T.wgmma_rs` of the group that
    /// follows in `rest` (up to its `T.wgmma_commit`), packed now and remembered, so that
    /// no register is written between the fence and the wgmmas — otherwise ptxas injects a
    /// `warpgroup.arrive` before each of them (C7519), one group per instruction. A
    /// malformed operand is left to the wgmma's own emission to report.
    pub(super) fn prepack_register_a(&mut self, rest: &[tlc_ir::Stmt]) {
        for s in rest {
            match &s.kind {
                tlc_ir::StmtKind::Intrinsic(Intrinsic::WgmmaCommit) => return,
                tlc_ir::StmtKind::Intrinsic(Intrinsic::WgmmaRs { a, .. })
                    if self.words.contains_key(&a.buffer.name) => {}
                tlc_ir::StmtKind::Intrinsic(Intrinsic::WgmmaRs { a, .. }) => {
                    let errors = self.errors.len();
                    let run = self.local_run(a, 8, "the A operand of T.wgmma_rs");
                    self.errors.truncate(errors);
                    if let Some((_, halves)) = run {
                        let words = self.pack_pairs(&halves);
                        for (pair, w) in halves.chunks_exact(2).zip(words) {
                            self.packed.insert((pair[0], pair[1]), w);
                        }
                    }
                }
                tlc_ir::StmtKind::Intrinsic(
                    Intrinsic::Wgmma { .. } | Intrinsic::WgmmaWait { .. } | Intrinsic::WgmmaFence,
                )
                | tlc_ir::StmtKind::Note(_) => {}
                // Anything else (a branch, a write) ends the look-ahead.
                _ => return,
            }
        }
    }

    /// A store of an f32 value into a float16 / bfloat16 element of a register array
    /// (`buf[i] = x`, or `T.cast`): converted like any store, and when it completes the
    /// pair (even, odd) of one array whose even element was the previous such store, the
    /// two values are also converted together (`cvt.rn.{f16x2|bf16x2}.f32`) into their
    /// packed word, which `pack_pairs` then takes (a softmax's P for `T.wgmma_rs`): ptxas
    /// otherwise converts each half on its own and merges them (F2FP + PRMT per pair), and
    /// drops the single conversions no one reads. Whether it stored (`false`: not this
    /// case, nothing emitted).
    pub(super) fn store_half(
        &mut self,
        (buffer, indices): (&tlc_ir::Ident, &[Expr]),
        value: &Expr,
        d: DType,
    ) -> bool {
        let half = match d {
            DType::Float16 => crate::ptx::Type::F16x2,
            DType::BFloat16 => crate::ptx::Type::Bf16x2,
            _ => return false,
        };
        let src = match &value.kind {
            ExprKind::Cast(to, a) if *to == d => a.as_ref(),
            _ => value,
        };
        let Some(buf) = self.bufs.get(&buffer.name) else {
            return false;
        };
        let (Mem::Local(regs), shape) = (buf.mem.clone(), buf.shape.clone()) else {
            return false;
        };
        if indices.iter().any(|i| self.const_eval(i).is_none()) {
            return false;
        }
        let is_f32 = self.typed(src).is_some_and(|t| t.dtype == DType::Float32);
        let Some(idx) = is_f32
            .then(|| self.local_flat(&buffer.name, indices, &shape))
            .flatten()
        else {
            return false;
        };
        let Some(&r) = regs.get(idx) else {
            return false;
        };
        let Some(x) = self.expr_as(src, DType::Float32) else {
            return true;
        };
        // The value in a register no later statement writes (ptxas folds the copy).
        let x = self.b.mov(Type::F32, x);
        let v = self.convert(x.into(), DType::Float32, d);
        self.forget_packed(r);
        let Some(ty) = super::ptx_type(d) else {
            return true;
        };
        self.b.emit(Op::Mov {
            ty: super::expr::mov_type(ty),
            dst: r,
            src: v.into(),
        });
        match self.last_half.take() {
            Some((name, even, lo, lo_x))
                if name == buffer.name && even % 2 == 0 && idx == even + 1 =>
            {
                match self.words.get(&buffer.name).and_then(|w| w.get(even / 2)) {
                    Some(&w) => self.b.emit(Op::CvtPack {
                        round: crate::ptx::CvtRound::Rn,
                        relu: false,
                        dst_ty: half,
                        dst: w,
                        hi: x.into(),
                        lo: lo_x.into(),
                    }),
                    None => {
                        let w = self.b.cvt_pack(half, lo_x, x);
                        self.packed.insert((lo, r), w);
                    }
                }
            }
            _ => {
                self.refresh_word(&buffer.name, indices);
                self.last_half = Some((buffer.name.clone(), idx, r, x));
            }
        }
        true
    }

    /// After a store into `buffer[indices]`: when `buffer` keeps packed words (`words`),
    /// the word of the element's pair packed again from the pair's two registers.
    pub(super) fn refresh_word(&mut self, buffer: &str, indices: &[Expr]) {
        if !self.words.contains_key(buffer) {
            return;
        }
        let (
            Some(super::Buf {
                mem: Mem::Local(regs),
                shape,
                ..
            }),
            Some(words),
        ) = (
            self.bufs.get(buffer).cloned(),
            self.words.get(buffer).cloned(),
        )
        else {
            return;
        };
        let Some(j) = self.local_flat(buffer, indices, &shape).map(|i| i / 2) else {
            return;
        };
        if let (Some(&w), Some(&lo), Some(&hi)) =
            (words.get(j), regs.get(2 * j), regs.get(2 * j + 1))
        {
            self.b.emit(Op::Pack {
                ty: Type::B32,
                dst: w,
                srcs: vec![lo.into(), hi.into()],
            });
        }
    }

    /// `r` is written: no packed word holds its value any more.
    pub(super) fn forget_packed(&mut self, r: Reg) {
        if self.last_half.as_ref().is_some_and(|h| h.2 == r) {
            self.last_half = None;
        }
        if !self.packed.is_empty() {
            self.packed.retain(|&(lo, hi), _| lo != r && hi != r);
        }
        if !self.packed_bytes.is_empty() {
            self.packed_bytes.retain(|quad, _| !quad.contains(&r));
        }
    }
}
