//! **The barrier engine**: the synchronization dataflow of a thread-level kernel — which
//! shared and global elements the code since the last barrier (and the asynchronous copies
//! still in flight) may have touched, so a pass can place `T.sync_threads()` exactly where a
//! later access conflicts — and its loop rule ([`plan_loop`], [`after_loop`]). Both passes
//! that place barriers (`thread-binding` between SIMT regions, `thread-sync` in per-thread
//! code) use it; each only says what its units touch and states its [`LoopPolicy`].
//! Accesses are compared by buffer and *stage key* (see [`Touch`]); loops are handled by
//! shifting keys one iteration back and generalizing them to families.

use super::int::{gcd, mentions_any};
use std::collections::HashSet;
use tlc_ir::affine::constant_difference;
use tlc_ir::visit::{for_each_stmt, map_expr};
use tlc_ir::{BinOp, Expr, ExprKind, Stmt, StmtKind};

/// One access of a tracked buffer: the buffer, and its *stage key* — the first index, when
/// it is the same for every thread (`None`: anywhere in the buffer). Accesses whose keys
/// differ by a nonzero constant, or are `e1 % m` and `e2 % m` with `e1 - e2` a constant
/// that is not a multiple of `m`, touch different elements. A *family* over loop variable
/// `v` stands for the key in every earlier iteration too (`key` with `v -> v - j`, `j ≥ 0`):
/// what a loop without barriers leaves pending from all its past iterations.
#[derive(Clone, Debug, PartialEq)]
pub struct Touch {
    pub buffer: String,
    pub key: Option<Expr>,
    pub family: Option<String>,
    /// Per-thread code (`thread-sync`): the canonical text of an injective map from the
    /// elements this access touches to the thread touching them (over every iteration of
    /// the loops it is in). Two accesses with the same owner map touch an element only from
    /// the thread the map gives it: no cross-thread conflict, at any time.
    pub owner: Option<String>,
}

impl Touch {
    pub fn overlaps(&self, other: &Touch) -> bool {
        if self.buffer != other.buffer {
            return false;
        }
        if self.owner.is_some() && self.owner == other.owner {
            return false;
        }
        let (Some(a), Some(b)) = (&self.key, &other.key) else {
            return true;
        };
        match (&self.family, &other.family) {
            (None, None) => !disjoint_keys(a, b),
            (Some(v), None) => family_meets(a, v, b),
            (None, Some(v)) => family_meets(b, v, a),
            (Some(_), Some(_)) => true,
        }
    }

    /// Whether every element `other` may touch is one `self` touches.
    pub fn covers(&self, other: &Touch) -> bool {
        // One without an owner may be any thread's: it stands for an owned one too.
        if self.buffer != other.buffer || (self.owner.is_some() && self.owner != other.owner) {
            return false;
        }
        let Some(a) = &self.key else { return true };
        let Some(b) = &other.key else { return false };
        match (&self.family, &other.family) {
            (None, None) => a == b,
            (Some(v), None) => member(a, v, b) == Some(true),
            (Some(v), Some(w)) => v == w && member(a, v, b) == Some(true),
            (None, Some(_)) => false,
        }
    }
}

fn disjoint_keys(a: &Expr, b: &Expr) -> bool {
    if let Some(d) = constant_difference(a, b) {
        return d != 0;
    }
    match (modulo(a), modulo(b)) {
        (Some((x, m)), Some((y, m2))) if m == m2 => {
            constant_difference(x, y).is_some_and(|d| d.rem_euclid(m) != 0)
        }
        _ => false,
    }
}

/// `(x, m)` for `x % m` with a constant `m > 0`.
fn modulo(e: &Expr) -> Option<(&Expr, i64)> {
    match &e.kind {
        ExprKind::Binary(BinOp::FloorMod, x, m) => m.as_int().filter(|m| *m > 0).map(|m| (&**x, m)),
        _ => None,
    }
}

fn shifted(e: &Expr, var: &str, by: i64) -> Expr {
    map_expr(e, &mut |x| match &x.kind {
        ExprKind::Var(n) if n == var => Expr::binary(BinOp::Add, x.clone(), Expr::int(by), x.span),
        _ => x,
    })
}

/// The constant `c` with `e(var + 1) - e(var) = c`, when there is one and it is not 0.
fn step(e: &Expr, var: &str) -> Option<i64> {
    constant_difference(&shifted(e, var, 1), e).filter(|c| *c != 0)
}

/// Whether the family `base` over `v` takes the value of the point key `key` for some
/// iteration `j ≥ 0` back, when that can be decided: `base - key = d` and the step `c` of
/// `base` give `d - c·j = 0`; for `x % m` against `y % m`, `d - c·j ≡ 0 (mod m)`.
fn member(base: &Expr, v: &str, key: &Expr) -> Option<bool> {
    if let (Some(c), Some(d)) = (step(base, v), constant_difference(base, key)) {
        return Some(d % c == 0 && d / c >= 0);
    }
    match (modulo(base), modulo(key)) {
        (Some((x, m)), Some((y, m2))) if m == m2 => {
            let (c, d) = (step(x, v)?, constant_difference(x, y)?);
            Some(d.rem_euclid(gcd(c, m)) == 0)
        }
        _ => None,
    }
}

/// Whether the family `base` over `v` may meet the point key `key`.
fn family_meets(base: &Expr, v: &str, key: &Expr) -> bool {
    member(base, v, key).unwrap_or(true)
}

/// Tracked accesses (shared buffers and parameters) since some point.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Touches {
    pub reads: Vec<Touch>,
    pub writes: Vec<Touch>,
}

/// Adds `t` unless something in `list` covers it; whether it was added.
pub fn push_new(list: &mut Vec<Touch>, t: Touch) -> bool {
    if list.iter().any(|x| x.covers(&t)) {
        false
    } else {
        list.retain(|x| !t.covers(x));
        list.push(t);
        true
    }
}

impl Touches {
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty()
    }

    /// Whether `next` may touch what `self` wrote, or write what `self` read.
    pub fn conflicts(&self, next: &Touches) -> bool {
        self.writes
            .iter()
            .any(|w| next.reads.iter().chain(&next.writes).any(|x| w.overlaps(x)))
            || self
                .reads
                .iter()
                .any(|r| next.writes.iter().any(|x| r.overlaps(x)))
    }

    /// Adds `other`; whether anything was new.
    pub fn union(&mut self, other: &Touches) -> bool {
        let mut changed = false;
        for t in &other.reads {
            changed |= push_new(&mut self.reads, t.clone());
        }
        for t in &other.writes {
            changed |= push_new(&mut self.writes, t.clone());
        }
        changed
    }

    /// Rewrites every touch with `f`.
    pub fn map(&mut self, f: &dyn Fn(Touch) -> Touch) {
        for list in [&mut self.reads, &mut self.writes] {
            for t in std::mem::take(list) {
                push_new(list, f(t));
            }
        }
    }

    /// Forgets the keys that mention one of `vars` (their values are not known here).
    pub fn widen(&mut self, vars: &HashSet<String>) {
        if vars.is_empty() {
            return;
        }
        // (Owner maps hold for the whole kernel: they mention no variable of the code.)
        self.map(&|t| match &t.key {
            Some(k) if mentions_any(k, vars) => Touch {
                key: None,
                family: None,
                ..t
            },
            _ => t,
        });
    }

    /// The accesses of one iteration of a loop over `var` seen from the next one:
    /// `var -> var - 1` in the keys.
    pub fn shift(&mut self, var: &str) {
        self.map(&|t| Touch {
            key: t.key.as_ref().map(|k| shifted(k, var, -1)),
            ..t
        });
    }

    /// Keys over `var` stand for all earlier iterations too (so the carried state of a loop
    /// without barriers stays finite); keys that do not step by a constant are forgotten.
    pub fn generalize(&mut self, var: &str) {
        let only = HashSet::from([var.to_string()]);
        self.map(&|t| match &t.key {
            Some(k) if t.family.is_none() && mentions_any(k, &only) => {
                let steps = step(k, var).is_some()
                    || modulo(k).is_some_and(|(x, _)| step(x, var).is_some());
                if steps {
                    Touch {
                        family: Some(var.to_string()),
                        ..t
                    }
                } else {
                    Touch {
                        key: None,
                        family: None,
                        ..t
                    }
                }
            }
            _ => t,
        });
    }
}

/// The walk's state at a program point: the accesses since the last barrier, and the
/// destinations of `T.cp_async`s that may still be in flight (a `T.cp_async_wait` may land
/// any of them: a write at that moment).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    pub pending: Touches,
    pub in_flight: Touches,
}

impl State {
    pub fn union(&mut self, other: &State) -> bool {
        let a = self.pending.union(&other.pending);
        let b = self.in_flight.union(&other.in_flight);
        a || b
    }

    pub fn widen(&mut self, vars: &HashSet<String>) {
        self.pending.widen(vars);
        self.in_flight.widen(vars);
    }

    pub fn shift(&mut self, var: &str) {
        self.pending.shift(var);
        self.in_flight.shift(var);
    }

    pub fn generalize(&mut self, var: &str) {
        self.pending.generalize(var);
        self.in_flight.generalize(var);
    }
}

/// Trial walks of a loop body before the carried keys become families (so the fixpoint
/// ends).
pub const EXACT_ROUNDS: usize = 2;
/// Rounds after which the keys over the loop variable are dropped altogether.
pub const MAX_ROUNDS: usize = 12;

/// The state one iteration of a loop over `var` (`None`: a `while`) hands the next (in the next iteration's
/// terms), at the fixpoint: `walk` runs the body from `entry` joined with it; `inner` are the
/// variables the body binds; `end_barrier`: the body ends with a barrier. The one loop rule
/// of the barrier placements (`thread-binding`, `thread-sync`).
pub fn settle(
    var: Option<&str>,
    inner: &HashSet<String>,
    entry: &State,
    end_barrier: bool,
    walk: &mut dyn FnMut(&mut State),
) -> State {
    let mut carried = State::default();
    for round in 0.. {
        let mut trial = entry.clone();
        trial.union(&carried);
        walk(&mut trial);
        if end_barrier {
            trial.pending = Touches::default();
        }
        trial.widen(inner);
        // A `while` has no loop variable: its keys mention only values the same in every
        // iteration.
        if let Some(var) = var {
            trial.shift(var);
            if round >= EXACT_ROUNDS {
                trial.generalize(var);
            }
            if round >= MAX_ROUNDS {
                // Never seen: families do not converge. Forget the keys over `var`.
                trial.widen(&HashSet::from([var.to_string()]));
            }
        }
        if !carried.union(&trial) {
            break;
        }
    }
    carried
}

/// The variables `body` binds (lets and loop variables, nested ones included): what a
/// loop's state forgets the keys of when it leaves the loop, and what `settle` widens each
/// trial by.
pub fn bound_vars(body: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::new();
    for_each_stmt(body, &mut |s| match &s.kind {
        StmtKind::Let { var, .. } => {
            out.insert(var.name.clone());
        }
        StmtKind::For(f) => {
            out.insert(f.var.name.clone());
        }
        _ => {}
    });
    out
}

/// The `T.sync_threads()` a body holds, at any depth.
pub fn barriers_in(body: &[Stmt]) -> usize {
    let mut n = 0;
    for_each_stmt(body, &mut |s| n += usize::from(s.kind == StmtKind::Barrier));
    n
}

/// How a pass places a loop's barriers (the one placement engine, [`plan_loop`]; each
/// pass states its policy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopPolicy {
    /// Whether barriers are placed at all (`thread-binding`'s merging-only mode has none:
    /// only the carried state is wanted).
    pub place: bool,
    /// A barrier before the loop may clear what the code before it left pending, when that
    /// saves barriers per iteration (`thread-sync`).
    pub may_hoist: bool,
    /// The body must end with a barrier (`thread-binding`: a `while` whose condition reads
    /// memory its body writes).
    pub force_end: bool,
    /// With as many barriers either way, end the body with one (`thread-binding`) or keep
    /// them inside (`thread-sync`).
    pub ties_to_end: bool,
}

/// Where a loop's barriers go: one before the loop (`hoist`), one at the end of its body
/// (`end_barrier`), and the state one iteration hands the next under that choice.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopPlan {
    pub hoist: bool,
    pub end_barrier: bool,
    pub carried: State,
}

/// **The barrier engine's loop rule**, for every pass that places barriers: the placement
/// of `policy` with the fewest barriers per iteration (then, with `may_hoist`, the fewest
/// before the loop) for a loop over `var` (`None`: a `while`) whose body is `body`, entered
/// in state `entry`. `dry_walk` walks a body from a state as the pass does, reporting
/// nothing, and returns it with the barriers it would place.
pub fn plan_loop(
    var: Option<&str>,
    body: &[Stmt],
    entry: &State,
    policy: LoopPolicy,
    dry_walk: &mut dyn FnMut(Vec<Stmt>, &mut State) -> Vec<Stmt>,
) -> LoopPlan {
    let inner = bound_vars(body);
    let mut carried_from = |from: &State, end_barrier: bool| {
        settle(var, &inner, from, end_barrier, &mut |trial| {
            dry_walk(body.to_vec(), trial);
        })
    };
    if !policy.place || policy.force_end {
        let end_barrier = policy.place && policy.force_end;
        return LoopPlan {
            hoist: false,
            end_barrier,
            carried: carried_from(entry, end_barrier),
        };
    }
    let hoists: &[bool] = match policy.may_hoist && !entry.pending.is_empty() {
        true => &[false, true],
        false => &[false],
    };
    let mut candidates = Vec::new();
    for &hoist in hoists {
        let mut from = entry.clone();
        if hoist {
            from.pending = Touches::default();
        }
        for end_barrier in [false, true] {
            let carried = carried_from(&from, end_barrier);
            candidates.push((hoist, end_barrier, from.clone(), carried));
        }
    }
    let mut best: Option<((usize, usize), LoopPlan)> = None;
    for (hoist, end_barrier, from, carried) in candidates {
        let mut start = from;
        start.union(&carried);
        let inside = barriers_in(&dry_walk(body.to_vec(), &mut start));
        let cost = (inside + usize::from(end_barrier), usize::from(hoist));
        let better = match &best {
            None => true,
            Some((c, _)) => cost < *c || (policy.ties_to_end && end_barrier && cost == *c),
        };
        if better {
            let plan = LoopPlan {
                hoist,
                end_barrier,
                carried,
            };
            best = Some((cost, plan));
        }
    }
    match best {
        Some((_, plan)) => plan,
        None => LoopPlan {
            hoist: false,
            end_barrier: false,
            carried: State::default(),
        },
    }
}

/// The state after a loop: its last iteration's (`last`) or, when it runs no iteration,
/// the one it was entered in; the keys over what the body binds (and the loop variable)
/// forgotten.
pub fn after_loop(last: State, entry: &State, var: Option<&str>, body: &[Stmt]) -> State {
    let mut state = last;
    state.union(entry);
    let mut bound = bound_vars(body);
    if let Some(v) = var {
        bound.insert(v.to_string());
    }
    state.widen(&bound);
    state
}
