//! `persistent-tiles` (sm_90a, thread level): a kernel that is one warp-specialized
//! pipeline (`warp-specialize`'s form: the region initializing the `full` and `empty`
//! rings, then the region of the producer and consumer warpgroups) and has more tiles
//! than the GPU holds blocks launches `P = SMs × blocks per SM` blocks instead, each
//! walking the tiles `b, b + P, …` in the rasterized order, its producer and its consumers
//! each looping over them (`tiles.rs` says how). The rings run on across tiles, so the
//! producer fills the next tile's first stages while the consumers still compute — or
//! store — the last one.
//!
//! What it rewrites, in the roles `warp-specialize` wrote:
//!
//! - every stage index `E` of a stage buffer, `full` or `empty` becomes `(E + i·nk) % S`
//!   (`i` the role's tile loop variable, `nk` the k-tiles of a tile), every `full` wait's
//!   parity `X // S % 2` becomes `(i·nk + X) // S % 2`;
//! - the producer's per-loop `empty` wait (the first statement of its loop) goes: every
//!   fill, the prologue's too, first waits `if f >= S: T.mbarrier_wait(empty[stage],
//!   (f - S) // S % 2)` for its fill number `f` over the block's run;
//! - with a wgmma group in flight (the consumers' loop followed by `T.wgmma_wait(0)`), the
//!   consumers release the tile's last stage right after that wait: the next tile's fills
//!   wait for it.
//!
//! The grid becomes `P` blocks (the first block variable is the hardware index; the
//! others and `T.use_swizzle` are consumed by the tile loops). Where there are more tiles
//! than blocks but the form cannot be taken (other code in the kernel, a second pipeline,
//! a tile-dependent k-loop), a `T.note("persistent blocks not used: …")` stands before the
//! pipeline. In thread-block clusters (`cluster_dims`, which must divide the grid) the
//! clusters walk whole clusters' worth of tiles, `P / C` clusters of `C` blocks along the
//! new 1-D grid, and the blocks of a cluster hold neighbouring tiles as launched one tile
//! each (`tiles.rs`).

mod tiles;

use crate::analysis::kernels::for_each_kernel;
use crate::analysis::tma::{self, fills_in_order, tma_destinations};
use crate::context::PassContext;
use crate::names::NameSet;
use crate::pass::Pass;
use tiles::{offset_stages, wait_before_fills, Tiles};
use tlc_ir::build::{bin, elem, if_then, intrinsic, note};
use tlc_ir::verifier::{const_int, Level};
use tlc_ir::visit::{child_bodies_mut, for_each_stmt};
use tlc_ir::{
    BinOp, Diagnostic, Expr, ExprKind, ForKind, Intrinsic, Kernel, PrimFunc, Span, Stmt, StmtKind,
    ThreadTag,
};

pub struct PersistentTiles;

impl Pass for PersistentTiles {
    fn name(&self) -> &'static str {
        "persistent-tiles"
    }

    fn description(&self) -> &'static str {
        "a warp-specialized kernel with more tiles than blocks -> SMs x blocks-per-SM blocks, each role looping over its tiles"
    }

    fn requires(&self) -> Level {
        Level::Thread
    }

    fn run(&self, mut func: PrimFunc, cx: &PassContext) -> Result<PrimFunc, Vec<Diagnostic>> {
        let mut names = NameSet::of(&func);
        for_each_kernel(&mut func.body, &mut |k, _| {
            persist_kernel(k, cx, &mut names)
        });
        Ok(func)
    }
}

/// The rings of one warp-specialized pipeline, read off its init region.
struct Rings {
    full: String,
    empty: String,
    stages: i64,
}

fn persist_kernel(k: &mut Kernel, cx: &PassContext, names: &mut NameSet) {
    let Some(cluster) = k.cluster_dims() else {
        return;
    };
    // A grid barrier waits for the grid as launched: its blocks cannot walk tiles instead.
    if tlc_ir::verifier::grid_sync::has_grid_sync(&k.body) {
        return;
    }
    // `warp-specialize` writes the blocks per SM it budgeted the registers for.
    let Some(blocks_per_sm) = k.min_blocks_per_sm.as_ref().and_then(const_int) else {
        return;
    };
    // The whole kernel is one pipeline: its two regions, notes around them.
    let whole = {
        let code: Vec<&Stmt> = k
            .body
            .iter()
            .filter(|s| !matches!(s.kind, StmtKind::Note(_)))
            .collect();
        matches!(code.as_slice(), [init, region] if rings(init).is_some() && roles(region).is_some())
    };
    let mut seen = 0;
    let mut persistent = None;
    let body = std::mem::take(&mut k.body);
    let mut visit = Visit {
        kernel: k,
        sms: cx.sms(),
        blocks_per_sm,
        whole,
        warp: cx.target().warp_size(),
        seen: &mut seen,
        persistent: &mut persistent,
        names,
    };
    let body = visit.list(body);
    k.body = body;
    if let Some(blocks) = persistent {
        // The tiles' indices are computed in the tile loops (with the rasterization); the
        // hardware index is the first block variable, and a cluster lies along it.
        k.grid = vec![Expr::int(blocks)];
        k.block_vars.truncate(1);
        k.swizzle = None;
        let size = cluster.iter().product::<i64>();
        k.cluster = if size > 1 {
            vec![Expr::int(size)]
        } else {
            Vec::new()
        };
    }
}

/// The walk over a kernel's statements looking for its warp-specialized pipelines.
struct Visit<'a> {
    kernel: &'a Kernel,
    sms: i64,
    blocks_per_sm: i64,
    /// Whether the kernel is one pipeline and nothing else.
    whole: bool,
    warp: i64,
    /// Pipelines met so far.
    seen: &'a mut usize,
    /// The blocks launched, once the pipeline is made persistent.
    persistent: &'a mut Option<i64>,
    names: &'a mut NameSet,
}

impl Visit<'_> {
    fn list(&mut self, body: Vec<Stmt>) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(body.len());
        let mut rest = body.into_iter().peekable();
        while let Some(mut stmt) = rest.next() {
            let pipeline = rings(&stmt).filter(|_| rest.peek().and_then(roles).is_some());
            let region = pipeline.as_ref().and_then(|_| rest.next());
            if let (Some(rings), Some(mut region)) = (pipeline, region) {
                let first = *self.seen == 0;
                *self.seen += 1;
                match self.plan(&region, &rings, first) {
                    Ok(Some(tiles)) => {
                        if self.persist(&mut region, &rings, &tiles) {
                            *self.persistent = Some(tiles.blocks);
                        }
                    }
                    Ok(None) => {}
                    Err(why) => out.push(note(
                        format!("persistent blocks not used: {why}"),
                        stmt.span,
                    )),
                }
                out.extend([stmt, region]);
                continue;
            }
            for child in child_bodies_mut(&mut stmt) {
                *child = self.list(std::mem::take(child));
            }
            out.push(stmt);
        }
        out
    }

    /// The tiles the pipeline of `region` walks: `None` when the grid has no more tiles
    /// than blocks (or is not a constant 1-D / 2-D one), why not when it has more but the
    /// form cannot be taken.
    fn plan(&self, region: &Stmt, rings: &Rings, first: bool) -> Result<Option<Tiles>, String> {
        let Some((_, _, producer, _)) = roles(region) else {
            return Ok(None);
        };
        let [_, Stmt {
            kind: StmtKind::For(main),
            ..
        }] = producer
        else {
            return Ok(None);
        };
        let k = self.kernel;
        let tiles = Tiles::plan(
            &k.grid,
            &k.block_vars,
            (k.swizzle.as_ref(), k.cluster_dims().unwrap_or([1, 1, 1])),
            (self.sms, self.blocks_per_sm),
            [&main.start, &main.stop],
        )?;
        match tiles {
            Some(_) if !first => Err("the kernel's first pipeline is specialized already".into()),
            Some(_) if !self.whole => Err("the kernel does more than this pipeline and the code \
                 its consumers run around it"
                .into()),
            Some(tiles) => {
                in_form(region, rings)?;
                Ok(Some(tiles))
            }
            None => Ok(None),
        }
    }

    /// Makes the pipeline of `region` walk `tiles`; whether it did (`in_form` admitted the
    /// region, so it does: every shape below was checked before anything changes).
    fn persist(&mut self, region: &mut Stmt, rings: &Rings, tiles: &Tiles) -> bool {
        let span = region.span;
        let StmtKind::For(f) = &mut region.kind else {
            return false;
        };
        let tx = f.var.name.clone();
        let [Stmt {
            kind:
                StmtKind::If {
                    then_body,
                    else_body,
                    ..
                },
            ..
        }] = f.body.as_mut_slice()
        else {
            return false;
        };
        let Some(Stmt {
            kind:
                StmtKind::If {
                    then_body: producer,
                    ..
                },
            ..
        }) = then_body.get_mut(1)
        else {
            return false;
        };
        let (ip, ic) = (self.names.fresh("tile_i"), self.names.fresh("tile_i"));
        let [Stmt {
            kind: StmtKind::For(prologue),
            ..
        }, Stmt {
            kind: StmtKind::For(main),
            ..
        }] = producer.as_mut_slice()
        else {
            return false;
        };
        let s = rings.stages;
        let (start, stop) = (main.start.clone(), main.stop.clone());
        let k_tiles = bin(BinOp::Sub, stop.clone(), start.clone());
        let base_of = |i: &str| bin(BinOp::Mul, Expr::var(i), k_tiles.clone());
        let mut staged = tma_destinations(&prologue.body);
        staged.extend(tma_destinations(&main.body));
        staged.dedup();
        staged.extend([rings.full.clone(), rings.empty.clone()]);

        // Producer: every fill waits for its stage's release (the first tile's too: the
        // previous tile's last stages) and indexes stages from the fills before this tile.
        let base = base_of(&ip);
        let first = bin(
            BinOp::Sub,
            Expr::var(&prologue.var.name),
            prologue.start.clone(),
        );
        offset_stages(&mut prologue.body, &staged, &base, s);
        prologue.body = wait_before_fills(
            std::mem::take(&mut prologue.body),
            &rings.empty,
            &bin(BinOp::Add, base.clone(), first),
            s,
            span,
        );
        let kp = Expr::var(&main.var.name);
        let ahead = bin(
            BinOp::Sub,
            bin(BinOp::Add, kp, Expr::int(s - 1)),
            start.clone(),
        );
        // The loop's own `empty` wait (its first statement) is the fills' waits now.
        let mut fills: Vec<Stmt> = main.body.drain(..).skip(1).collect();
        offset_stages(&mut fills, &staged, &base, s);
        main.body = wait_before_fills(fills, &rings.empty, &bin(BinOp::Add, base, ahead), s, span);
        let walk = std::mem::take(producer);
        *producer = vec![tiles.tile_loop(&ip, walk, self.names, span)];

        // Consumers: parities counted from the tile's first fill, stages offset; with a
        // group in flight, the tile's last stage released after the loop's last wait.
        let base = base_of(&ic);
        let mut consumer: Vec<Stmt> = else_body.drain(1..).collect();
        // (`in_form` checked that every wait of theirs has a parity this rewrites.)
        let start_at = const_int(&start).unwrap_or(0);
        count_parities_from(&mut consumer, rings, start_at, &base);
        let after_loop = in_flight_loop(&consumer, rings, &tx, self.warp);
        if let Some(at) = after_loop {
            let last = bin(
                BinOp::FloorMod,
                bin(BinOp::Sub, stop.clone(), Expr::int(1)),
                Expr::int(s),
            );
            let release = release_of(&rings.empty, last, &tx, self.warp, span);
            consumer.insert(
                at + 1,
                if_then(bin(BinOp::Gt, stop, start), vec![release], span),
            );
        }
        offset_stages(&mut consumer, &staged, &base, s);
        else_body.push(tiles.tile_loop(&ic, consumer, self.names, span));
        true
    }
}

/// The rings of `init` when it is the region in which thread 0 initializes a `full` and
/// an `empty` mbarrier per stage and fences: `for s in T.unroll(S): T.mbarrier_init(full[s],
/// C); T.mbarrier_init(empty[s], W)`.
fn rings(init: &Stmt) -> Option<Rings> {
    let StmtKind::For(f) = &init.kind else {
        return None;
    };
    if f.kind != ForKind::ThreadBinding(ThreadTag::ThreadX) {
        return None;
    }
    let [Stmt {
        kind: StmtKind::If {
            then_body,
            else_body,
            ..
        },
        ..
    }] = f.body.as_slice()
    else {
        return None;
    };
    let [Stmt {
        kind: StmtKind::For(inits),
        ..
    }, Stmt {
        kind: StmtKind::Intrinsic(Intrinsic::FenceProxyAsync),
        ..
    }] = then_body.as_slice()
    else {
        return None;
    };
    let [Stmt {
        kind: StmtKind::Intrinsic(Intrinsic::MbarrierInit { bar: full, .. }),
        ..
    }, Stmt {
        kind: StmtKind::Intrinsic(Intrinsic::MbarrierInit { bar: empty, .. }),
        ..
    }] = inits.body.as_slice()
    else {
        return None;
    };
    let stages = const_int(&inits.stop).filter(|s| (1..=tma::MAX_STAGES).contains(s))?;
    (else_body.is_empty() && inits.kind == ForKind::Unroll).then(|| Rings {
        full: full.buffer.name.clone(),
        empty: empty.buffer.name.clone(),
        stages,
    })
}

/// The roles of a warp-specialized region: `for tx in T.thread_binding(T + 128): if tx >=
/// T: [T.setmaxnreg(…), if tx == T: <prologue loop, fill loop>] else: [T.setmaxnreg(…),
/// <the consumers' code>]` — `(tx, T, the producer's two loops, the consumers' code)`.
fn roles(region: &Stmt) -> Option<(&str, i64, &[Stmt], &[Stmt])> {
    let StmtKind::For(f) = &region.kind else {
        return None;
    };
    if f.kind != ForKind::ThreadBinding(ThreadTag::ThreadX) {
        return None;
    }
    let tx = f.var.name.as_str();
    let [Stmt {
        kind:
            StmtKind::If {
                cond,
                then_body,
                else_body,
            },
        ..
    }] = f.body.as_slice()
    else {
        return None;
    };
    let ExprKind::Binary(BinOp::Ge, a, b) = &cond.kind else {
        return None;
    };
    let threads = b.as_int()?;
    if !matches!(&a.kind, ExprKind::Var(v) if v == tx) {
        return None;
    }
    let [Stmt {
        kind: StmtKind::Intrinsic(Intrinsic::SetMaxNReg { inc: false, .. }),
        ..
    }, Stmt {
        kind:
            StmtKind::If {
                then_body: producer,
                else_body: none,
                ..
            },
        ..
    }] = then_body.as_slice()
    else {
        return None;
    };
    let loops = matches!(producer.as_slice(), [
        Stmt { kind: StmtKind::For(p), .. },
        Stmt { kind: StmtKind::For(m), .. },
    ] if p.kind == ForKind::Unroll && m.kind == ForKind::Serial);
    let consumers = matches!(
        else_body.first().map(|s| &s.kind),
        Some(StmtKind::Intrinsic(Intrinsic::SetMaxNReg { inc: true, .. }))
    );
    (loops && consumers && none.is_empty()).then_some((
        tx,
        threads,
        producer.as_slice(),
        &else_body[1..],
    ))
}

/// Whether every `T.tma_load` of `body` comes after an arrive on its barrier (`seen`: the
/// arrives before it, in this list or an enclosing one).
fn arrive_first(body: &[Stmt], seen: &mut Vec<tlc_ir::ElemRef>) -> bool {
    let depth = seen.len();
    let mut ok = true;
    for st in body {
        match &st.kind {
            StmtKind::Intrinsic(Intrinsic::MbarrierArriveExpectTx { bar, .. }) => {
                seen.push(bar.clone());
            }
            StmtKind::Intrinsic(Intrinsic::TmaLoad { bar, .. }) => ok &= seen.contains(bar),
            _ => {
                for child in tlc_ir::visit::child_bodies(st) {
                    ok &= arrive_first(child, seen);
                }
            }
        }
    }
    seen.truncate(depth);
    ok
}

/// Where the consumers' last release goes when they keep a wgmma group in flight: right
/// after the `T.wgmma_wait(0)` that follows their loop, when the loop ends with the
/// in-flight release `if ko > start: <warp leaders arrive on empty[(ko - 1) % S]>`
/// (`warp-specialize`'s form; a loop releasing its own stage gets nothing more).
fn in_flight_loop(consumer: &[Stmt], rings: &Rings, tx: &str, warp: i64) -> Option<usize> {
    let at = consumer
        .iter()
        .position(|st| matches!(&st.kind, StmtKind::For(l) if waits_on(&l.body, &rings.full)))?;
    let StmtKind::For(l) = &consumer[at].kind else {
        return None;
    };
    let ko = Expr::var(&l.var.name);
    let previous = bin(
        BinOp::FloorMod,
        bin(BinOp::Sub, ko.clone(), Expr::int(1)),
        Expr::int(rings.stages),
    );
    let release = StmtKind::If {
        cond: bin(BinOp::Gt, ko, l.start.clone()),
        then_body: vec![release_of(&rings.empty, previous, tx, warp, l.start.span)],
        else_body: Vec::new(),
    };
    let ends_in_flight = l.body.last().map(|st| &st.kind) == Some(&release);
    let waited = matches!(
        consumer.get(at + 1).map(|st| &st.kind),
        Some(StmtKind::Intrinsic(Intrinsic::WgmmaWait { n: 0 }))
    );
    (ends_in_flight && waited).then_some(at + 1)
}

/// `if tx % warp == 0: T.mbarrier_arrive(empty[stage])`: one arrival per consumer warp.
fn release_of(empty: &str, stage: Expr, tx: &str, warp: i64, span: Span) -> Stmt {
    if_then(
        bin(
            BinOp::Eq,
            bin(BinOp::FloorMod, Expr::var(tx), Expr::int(warp)),
            Expr::int(0),
        ),
        vec![intrinsic(
            Intrinsic::MbarrierArrive {
                bar: elem(empty, vec![stage], span),
            },
            span,
        )],
        span,
    )
}

/// Whether `body` waits on barrier array `bars`.
fn waits_on(body: &[Stmt], bars: &str) -> bool {
    let mut found = false;
    for_each_stmt(body, &mut |s| {
        found |= matches!(&s.kind, StmtKind::Intrinsic(Intrinsic::MbarrierWait { bar, .. }) if bar.buffer.name == bars);
    });
    found
}

/// The fill number within one tile that a consumers' wait on `full` (stage index `stage`,
/// parity `parity`) waits for, as an expression `X` whose `X // S % 2` is the parity: the
/// parity's own `X` when it reads `X // S % 2`; when both are constants (`warp-specialize`
/// folded a k-tile known at compile time), the fill `X' = (stage - start) mod S + S ·
/// parity`, which is the true fill modulo `2S` — all a parity `(base + X) // S % 2` depends
/// on. `None` for any other form.
fn fill_of_wait(stage: &Expr, parity: &Expr, (s, start): (i64, i64)) -> Option<Expr> {
    if let ExprKind::Binary(BinOp::FloorMod, phase, two) = &parity.kind {
        if let ExprKind::Binary(BinOp::FloorDiv, fill, by) = &phase.kind {
            return (two.as_int() == Some(2) && by.as_int() == Some(s)).then(|| (**fill).clone());
        }
    }
    let (c, p) = (stage.as_int()?, parity.as_int()?);
    let within = c.checked_sub(start)?.rem_euclid(s);
    (0..=1).contains(&p).then(|| Expr::int(within + s * p))
}

/// Every wait on `full` in `body` (the fill `X` of one tile, `fill_of_wait`) counts from
/// the tile's first fill: parity `(base + X) // S % 2`.
fn count_parities_from(body: &mut [Stmt], rings: &Rings, start: i64, base: &Expr) {
    for st in body {
        if let StmtKind::Intrinsic(Intrinsic::MbarrierWait { bar, parity }) = &mut st.kind {
            let fill = bar
                .indices
                .first()
                .and_then(|stage| fill_of_wait(stage, parity, (rings.stages, start)));
            if let (true, Some(fill)) = (bar.buffer.name == rings.full, fill) {
                *parity = bin(
                    BinOp::FloorMod,
                    bin(
                        BinOp::FloorDiv,
                        bin(BinOp::Add, base.clone(), fill),
                        Expr::int(rings.stages),
                    ),
                    Expr::int(2),
                );
            }
        }
        for child in child_bodies_mut(st) {
            count_parities_from(child, rings, start, base);
        }
    }
}

/// `Ok` when `region` is in the form `warp-specialize` writes, which the tile walk rewrites
/// (a hand-written region of that shape with other waits is left alone): the producer
/// loop starts with its per-loop `empty` wait, its fills are in the order the waits assume
/// (`analysis::tma::fills_in_order`), and every consumers' wait on `full` has a parity
/// [`fill_of_wait`] reads.
fn in_form(region: &Stmt, rings: &Rings) -> Result<(), String> {
    let not_form = || "the pipeline is not in warp-specialize's form".to_string();
    let (_, _, producer, consumer) = roles(region).ok_or_else(not_form)?;
    let [Stmt {
        kind: StmtKind::For(p),
        ..
    }, Stmt {
        kind: StmtKind::For(m),
        ..
    }] = producer
    else {
        return Err(not_form());
    };
    let s = rings.stages;
    let start = const_int(&m.start).ok_or_else(not_form)?;
    let kp = Expr::var(&m.var.name);
    let refill = bin(BinOp::Add, kp.clone(), Expr::int(s - 1));
    let empty_wait = StmtKind::If {
        cond: bin(
            BinOp::And,
            bin(BinOp::Gt, kp.clone(), m.start.clone()),
            bin(BinOp::Lt, refill.clone(), m.stop.clone()),
        ),
        then_body: vec![intrinsic(
            Intrinsic::MbarrierWait {
                bar: elem(
                    &rings.empty,
                    vec![bin(BinOp::FloorMod, refill, Expr::int(s))],
                    region.span,
                ),
                parity: bin(
                    BinOp::FloorMod,
                    bin(
                        BinOp::FloorDiv,
                        bin(
                            BinOp::Sub,
                            bin(BinOp::Sub, kp, m.start.clone()),
                            Expr::int(1),
                        ),
                        Expr::int(s),
                    ),
                    Expr::int(2),
                ),
            },
            region.span,
        )],
        else_body: Vec::new(),
    };
    if m.body.first().map(|st| &st.kind) != Some(&empty_wait) {
        return Err(not_form());
    }
    fills_in_order((&rings.full, s), (p, &p.body), (m, &m.body[1..]))?;
    // Each fill's wait goes before its arrive: no load of a fill may come before it.
    if !arrive_first(&p.body, &mut Vec::new()) || !arrive_first(&m.body[1..], &mut Vec::new()) {
        return Err(not_form());
    }
    // The consumers never write a stage, and read stages only in steps that wait for them
    // (their loop, and the first k-tile and last steps of a deferred one).
    let staged: Vec<String> = {
        let mut b = tma_destinations(producer);
        b.extend([rings.full.clone(), rings.empty.clone()]);
        b
    };
    let mut writes_stage = false;
    for_each_stmt(consumer, &mut |st| match &st.kind {
        StmtKind::Store { buffer, .. } | StmtKind::AtomicAdd { buffer, .. } => {
            writes_stage |= staged.contains(&buffer.name);
        }
        StmtKind::Intrinsic(i) => {
            writes_stage |= i.accesses().iter().any(|a| {
                a.effect.writes() && staged[..staged.len() - 2].contains(&a.operand.buffer.name)
            });
        }
        _ => {}
    });
    let unwaited_read = consumer.iter().any(|st| {
        let access = crate::analysis::access::Access::of_body(std::slice::from_ref(st));
        access
            .reads
            .iter()
            .any(|b| staged[..staged.len() - 2].contains(b))
            && !waits_on(std::slice::from_ref(st), &rings.full)
    });
    if writes_stage || unwaited_read {
        return Err(not_form());
    }
    let mut waits_read = true;
    for_each_stmt(consumer, &mut |st| {
        if let StmtKind::Intrinsic(Intrinsic::MbarrierWait { bar, parity }) = &st.kind {
            if bar.buffer.name == rings.full {
                waits_read &= bar
                    .indices
                    .first()
                    .and_then(|stage| fill_of_wait(stage, parity, (s, start)))
                    .is_some();
            }
        }
    });
    if waits_read {
        Ok(())
    } else {
        Err(not_form())
    }
}
