//! The scheduler of the thread level: a block's threads as TASKS, each a set of threads in
//! lockstep with an explicit continuation, so that warp-specialized kernels (a producer and
//! consumers that talk only through mbarriers) run concurrently.
//!
//! - A task's continuation is a stack of [`Cont`]s: statement lists with their position,
//!   serial loops with each thread's trip count, and the pending else-part of an `if` that
//!   split its threads. Each holds the threads active inside it, or inherits its parent's.
//! - One task runs at a time, statement by statement, exactly as lockstep: each statement
//!   runs for every active thread before the next; an `if` that splits runs its then-threads
//!   to the end of the then-body, then its else-threads, then the two rejoin. Nothing is
//!   allocated per statement: an `if`, a loop, a thread loop push one continuation.
//! - Only a blocked `T.mbarrier_wait` (the phase some active thread waits for has not
//!   completed: none of them passes) or `T.bar_sync` (its named barrier's phase still
//!   lacks arrivals: the task arrived, and waits past it) switches tasks. The blocked task is first cut at every
//!   pending else-part in its stack: each else-part becomes a runnable child task, the
//!   then-part below it another child, and the task that held the `if` waits for both to
//!   finish (a join) before it continues with its original threads. Then the next runnable
//!   task runs, first in first out; the innermost else-part is queued first, as lockstep
//!   would have run it next.
//! - A blocked task becomes runnable again when one of the barriers its threads wait on
//!   completes a phase or is initialized again; it then retries its wait (a named
//!   barrier's: goes on, its phase complete). When a task
//!   finishes, the parent it joins resumes at once if it was the last child.
//! - When every unfinished task is blocked, the block is deadlocked: the error points at
//!   the wait of the task blocked longest, with the barrier's state, and a note for every
//!   other blocked task.
//!
//! Kernels whose waits never block run in exactly the order of plain lockstep.

use crate::interp::compile::{CCall, CExpr, CStmt, CStmtKind};
use crate::interp::eval::{fault, Res};
use crate::interp::exec::{endless, MAX_WHILE_ITERATIONS};
use crate::interp::lockstep::{Branch, Lockstep};
use crate::interp::ops::hopper::PendingWait;
use crate::span::Span;
use std::collections::VecDeque;

/// One frame of a task's continuation.
struct Cont<'s> {
    kind: ContKind<'s>,
    /// The threads active from this frame inward; `None`: those of the frame below.
    mask: Option<Vec<usize>>,
}

enum ContKind<'s> {
    /// Runs `stmts[pos..]`.
    Stmts { stmts: &'s [CStmt], pos: usize },
    /// The else-part of an `if` whose threads split: `body` for the frame's threads, once
    /// the then-part above it has finished.
    Else { body: &'s [CStmt] },
    /// A serial loop: the frame's threads are those of iteration `k - 1` (the body running
    /// above it).
    Serial {
        var: usize,
        body: &'s [CStmt],
        /// Each thread's (index, start, trip count).
        threads: Vec<(usize, i64, i64)>,
        k: i64,
    },
    /// A `while` loop: the frame's threads are those still looping (the body running above
    /// it); each visit tests the condition for them and drops those for which it is false.
    While {
        cond: &'s CExpr,
        body: &'s [CStmt],
        span: Span,
        /// The iterations run so far.
        n: u64,
    },
}

/// Why a task stopped running.
enum Stop {
    /// Its continuation is empty.
    Done,
    /// At a `T.mbarrier_wait` of this span: the first pending wait in thread order and every
    /// barrier address some thread waits on.
    Blocked(Span, PendingWait, Vec<usize>),
    /// Past a `T.bar_sync` (or `T.cluster_sync`) of this span whose phase has not
    /// completed: the barrier's id and count, its key (`Lockstep::named_arrive`), and the
    /// phases it had completed when the task arrived.
    Named(Span, (i64, usize), (i64, u64)),
}

enum State {
    Ready,
    /// Waiting for `children` tasks to finish.
    Joining(usize),
    Blocked(Blocked),
    Done,
}

struct Blocked {
    span: Span,
    on: On,
    /// The order in which tasks blocked (smaller: blocked longer).
    since: u64,
    /// The threads that wait.
    threads: Vec<usize>,
}

/// What a blocked task waits for.
enum On {
    /// A `T.mbarrier_wait`: the first pending wait, the barriers waited on and their (life,
    /// phase) when the task blocked.
    Mbarrier {
        wait: PendingWait,
        bars: Vec<(usize, Option<(usize, u64)>)>,
    },
    /// A `T.bar_sync`: named barrier `id` over `count` threads, to complete more phases
    /// than `completed`.
    Named {
        id: i64,
        count: usize,
        key: i64,
        completed: u64,
    },
}

struct Task<'s> {
    conts: Vec<Cont<'s>>,
    parent: Option<usize>,
    state: State,
}

/// Runs the thread loop `stmt` for the threads of `blocks` (every thread of the block; of
/// each block of a cluster, one first task per block) until every task has finished.
pub(crate) fn run(lock: &mut Lockstep, stmt: &CStmt, blocks: Vec<Vec<usize>>) -> Res<()> {
    let start = |threads: Vec<usize>| Cont {
        kind: ContKind::Stmts {
            stmts: std::slice::from_ref(stmt),
            pos: 0,
        },
        mask: Some(threads),
    };
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut tasks = Vec::with_capacity(blocks.len() + 1);
    if blocks.len() == 1 {
        tasks.extend(blocks.into_iter().map(|b| Task {
            conts: vec![start(b)],
            parent: None,
            state: State::Ready,
        }));
    } else {
        // Several blocks: an empty root joins one task per block; the first runs now, the
        // others are queued.
        tasks.push(Task {
            conts: Vec::new(),
            parent: None,
            state: State::Joining(blocks.len()),
        });
        for b in blocks {
            tasks.push(Task {
                conts: vec![start(b)],
                parent: Some(0),
                state: State::Ready,
            });
        }
        queue.extend(2..tasks.len());
    }
    let mut cur = usize::from(tasks.len() > 1);
    // The blocked tasks, in task order.
    let mut blocked_tasks: Vec<usize> = Vec::new();
    let mut clock = 0u64;
    loop {
        let stop = match tasks.get_mut(cur) {
            Some(task) => run_task(lock, &mut task.conts)?,
            None => return Ok(()),
        };
        match stop {
            Stop::Done => {
                let parent = tasks.get_mut(cur).and_then(|task| {
                    task.state = State::Done;
                    task.conts = Vec::new();
                    task.parent
                });
                let Some(p) = parent else {
                    // The root: every other task joined it before it could finish.
                    return Ok(());
                };
                if let Some(State::Joining(children)) = tasks.get_mut(p).map(|t| &mut t.state) {
                    *children = children.saturating_sub(1);
                    if *children == 0 {
                        if let Some(t) = tasks.get_mut(p) {
                            t.state = State::Ready;
                        }
                        cur = p;
                        continue;
                    }
                }
            }
            Stop::Blocked(..) | Stop::Named(..) => {
                let (span, on) = match stop {
                    Stop::Blocked(span, wait, addrs) => {
                        let bars = addrs.iter().map(|&a| (a, lock.mbarrier_state(a))).collect();
                        (span, On::Mbarrier { wait, bars })
                    }
                    Stop::Named(span, (id, count), (key, completed)) => (
                        span,
                        On::Named {
                            id,
                            count,
                            key,
                            completed,
                        },
                    ),
                    Stop::Done => continue,
                };
                let blocked = fork(&mut tasks, cur, &mut queue);
                if let Some(task) = tasks.get_mut(blocked) {
                    let threads = active(&task.conts).to_vec();
                    task.state = State::Blocked(Blocked {
                        span,
                        on,
                        since: clock,
                        threads,
                    });
                }
                clock += 1;
                if let Err(at) = blocked_tasks.binary_search(&blocked) {
                    blocked_tasks.insert(at, blocked);
                }
            }
        }
        wake(lock, &mut tasks, &mut blocked_tasks, &mut queue);
        match queue.pop_front() {
            Some(next) => cur = next,
            None => return deadlock(lock, &tasks),
        }
    }
}

/// The threads active at the top of `conts`.
fn active<'c>(conts: &'c [Cont]) -> &'c [usize] {
    conts
        .iter()
        .rev()
        .find_map(|c| c.mask.as_deref())
        .unwrap_or(&[])
}

/// Moves the statement list at the top of `conts` past its current statement.
fn advance(conts: &mut [Cont]) {
    if let Some(Cont {
        kind: ContKind::Stmts { pos, .. },
        ..
    }) = conts.last_mut()
    {
        *pos += 1;
    }
}

/// Runs one task until its continuation is empty or it blocks.
fn run_task<'s>(lock: &mut Lockstep, conts: &mut Vec<Cont<'s>>) -> Res<Stop> {
    loop {
        let Some(top) = conts.last_mut() else {
            return Ok(Stop::Done);
        };
        let stmt: &'s CStmt = match &mut top.kind {
            ContKind::Stmts { stmts, pos } => match (*stmts).get(*pos) {
                Some(s) => s,
                None => {
                    conts.pop();
                    continue;
                }
            },
            ContKind::Else { body } => {
                top.kind = ContKind::Stmts {
                    stmts: body,
                    pos: 0,
                };
                continue;
            }
            ContKind::Serial {
                var,
                body,
                threads,
                k,
            } => {
                let k_now = *k;
                threads.retain(|&(_, _, n)| k_now < n);
                if threads.is_empty() {
                    conts.pop();
                    continue;
                }
                let mask = top.mask.get_or_insert_with(Vec::new);
                mask.clear();
                mask.extend(threads.iter().map(|&(t, _, _)| t));
                lock.serial_iteration(*var, threads, k_now);
                *k += 1;
                let body: &'s [CStmt] = body;
                conts.push(Cont {
                    kind: ContKind::Stmts {
                        stmts: body,
                        pos: 0,
                    },
                    mask: None,
                });
                continue;
            }
            ContKind::While {
                cond,
                body,
                span,
                n,
            } => {
                let (cond, body, span): (&'s CExpr, &'s [CStmt], Span) = (cond, body, *span);
                let threads = top.mask.clone().unwrap_or_default();
                let go = match lock.branch(cond, span, &threads)? {
                    Branch::Then => threads,
                    Branch::Else => Vec::new(),
                    Branch::Split(taken, _) => taken,
                };
                if go.is_empty() {
                    conts.pop();
                    continue;
                }
                if *n == MAX_WHILE_ITERATIONS {
                    endless(span)?;
                }
                *n += 1;
                top.mask = Some(go);
                conts.push(Cont {
                    kind: ContKind::Stmts {
                        stmts: body,
                        pos: 0,
                    },
                    mask: None,
                });
                continue;
            }
        };
        if let Some(stop) = step(lock, conts, stmt)? {
            return Ok(stop);
        }
    }
}

/// Runs `stmt`, the next statement of the list at the top of `conts`, for the active
/// threads: advances past it, or pushes the continuation of its body. `Some` when the task
/// blocks there (the statement stays next).
fn step<'s>(lock: &mut Lockstep, conts: &mut Vec<Cont<'s>>, stmt: &'s CStmt) -> Res<Option<Stop>> {
    let span = stmt.span;
    match &stmt.kind {
        CStmtKind::Loop {
            var,
            start,
            stop,
            body,
            thread_axis: Some(axis),
            ..
        } => {
            let now = lock.thread_loop((*var, *axis), (start, stop), span, active(conts))?;
            advance(conts);
            if !now.is_empty() {
                conts.push(Cont {
                    kind: ContKind::Stmts {
                        stmts: body,
                        pos: 0,
                    },
                    mask: Some(now),
                });
            }
        }
        CStmtKind::Loop {
            var,
            start,
            stop,
            body,
            thread_axis: None,
            cost,
            prepaid,
            ..
        } => {
            let cost = (!prepaid).then_some(*cost);
            let threads = lock.serial_bounds((start, stop), cost, span, active(conts))?;
            advance(conts);
            conts.push(Cont {
                kind: ContKind::Serial {
                    var: *var,
                    body,
                    threads,
                    k: 0,
                },
                mask: None,
            });
        }
        CStmtKind::While { cond, body } => {
            let threads = active(conts).to_vec();
            advance(conts);
            conts.push(Cont {
                kind: ContKind::While {
                    cond,
                    body,
                    span,
                    n: 0,
                },
                mask: Some(threads),
            });
        }
        CStmtKind::If {
            cond,
            then_body,
            else_body,
        } => {
            let branch = lock.branch(cond, span, active(conts))?;
            advance(conts);
            let body = |stmts, mask| Cont {
                kind: ContKind::Stmts { stmts, pos: 0 },
                mask,
            };
            match branch {
                Branch::Then => conts.push(body(then_body, None)),
                Branch::Else => conts.push(body(else_body, None)),
                // An empty body changes nothing: the other part runs alone.
                Branch::Split(taken, _) if else_body.is_empty() => {
                    conts.push(body(then_body, Some(taken)));
                }
                Branch::Split(_, not_taken) if then_body.is_empty() => {
                    conts.push(body(else_body, Some(not_taken)));
                }
                Branch::Split(taken, not_taken) => {
                    conts.push(Cont {
                        kind: ContKind::Else { body: else_body },
                        mask: Some(not_taken),
                    });
                    conts.push(body(then_body, Some(taken)));
                }
            }
        }
        CStmtKind::Barrier => {
            lock.barrier(span, active(conts))?;
            advance(conts);
        }
        // `grid_sync::hoist` split the thread loops at their grid barriers; one left here
        // is in a nested statement, which the verifier refuses (rule Y2).
        CStmtKind::GridSync => {
            return crate::interp::eval::fault(
                span,
                "`T.sync_grid()` not directly in the kernel body",
            )
        }
        CStmtKind::AllReduce(r) => {
            lock.allreduce(r, span, active(conts))?;
            advance(conts);
        }
        CStmtKind::Intrinsic(i) => match &i.call {
            CCall::MbarrierWait { bar, parity } => {
                if let Some((wait, addrs)) =
                    lock.mbarrier_wait((bar, parity), span, active(conts))?
                {
                    return Ok(Some(Stop::Blocked(span, wait, addrs)));
                }
                advance(conts);
            }
            // A named barrier: the threads arrive once; a sync whose phase is still open
            // blocks past it (waking, the task goes on after it without arriving again).
            &CCall::BarSync { id, count } | &CCall::BarArrive { id, count } => {
                let sync = matches!(i.call, CCall::BarSync { .. });
                let pending = lock.named_arrive((id, count), sync, span, active(conts))?;
                advance(conts);
                if let Some(key) = pending {
                    return Ok(Some(Stop::Named(span, (id, count), key)));
                }
            }
            // Every thread of the cluster arrives and waits: a barrier across the tasks.
            CCall::ClusterSync => {
                let id = crate::interp::lockstep::CLUSTER_SYNC_KEY;
                let count = lock.cluster_threads();
                let pending = lock.named_arrive((id, count), true, span, active(conts))?;
                advance(conts);
                if let Some(key) = pending {
                    return Ok(Some(Stop::Named(span, (id, count), key)));
                }
            }
            _ => {
                lock.intrinsic(i, span, active(conts))?;
                advance(conts);
            }
        },
        _ => {
            lock.simple(stmt, active(conts))?;
            advance(conts);
        }
    }
    Ok(None)
}

/// Task `cur` blocked: cuts its continuation at every pending else-part (module doc) and
/// queues the else-parts, innermost first. Returns the task that holds the blocked wait.
fn fork<'s>(tasks: &mut Vec<Task<'s>>, cur: usize, queue: &mut VecDeque<usize>) -> usize {
    let Some(task) = tasks.get_mut(cur) else {
        return cur;
    };
    if !task
        .conts
        .iter()
        .any(|c| matches!(c.kind, ContKind::Else { .. }))
    {
        return cur;
    }
    let mut conts = std::mem::take(&mut task.conts);
    // From the innermost else-part out: (else-part, the frames above it up to the next).
    let mut parts: Vec<(Cont<'s>, Vec<Cont<'s>>)> = Vec::new();
    while let Some(at) = conts
        .iter()
        .rposition(|c| matches!(c.kind, ContKind::Else { .. }))
    {
        let above = conts.split_off(at + 1);
        let Some(else_part) = conts.pop() else {
            break;
        };
        parts.push((else_part, above));
    }
    task.conts = conts;
    task.state = State::Joining(2);
    let mut parent = cur;
    let mut elses = Vec::with_capacity(parts.len());
    let n = parts.len();
    for (i, (else_part, above)) in parts.into_iter().rev().enumerate() {
        tasks.push(Task {
            conts: vec![else_part],
            parent: Some(parent),
            state: State::Ready,
        });
        elses.push(tasks.len() - 1);
        let innermost = i + 1 == n;
        tasks.push(Task {
            conts: above,
            parent: Some(parent),
            state: if innermost {
                State::Ready
            } else {
                State::Joining(2)
            },
        });
        parent = tasks.len() - 1;
    }
    queue.extend(elses.into_iter().rev());
    parent
}

/// Makes runnable (queued in task order) every blocked task one of whose barriers has
/// completed a phase or been initialized again since it blocked.
fn wake(
    lock: &Lockstep,
    tasks: &mut [Task],
    blocked: &mut Vec<usize>,
    queue: &mut VecDeque<usize>,
) {
    blocked.retain(|&i| {
        let Some(task) = tasks.get_mut(i) else {
            return false;
        };
        let State::Blocked(b) = &task.state else {
            return false;
        };
        let ready = match &b.on {
            On::Mbarrier { bars, .. } => bars.iter().any(|&(a, was)| lock.mbarrier_state(a) != was),
            On::Named { key, completed, .. } => lock.named_state(*key).completed > *completed,
        };
        if ready {
            task.state = State::Ready;
            queue.push_back(i);
            return false;
        }
        true
    });
}

/// Every unfinished task is blocked: the deadlock error, at the wait of the task blocked
/// longest, with a note for each other one.
fn deadlock(lock: &Lockstep, tasks: &[Task]) -> Res<()> {
    let mut blocked: Vec<&Blocked> = tasks
        .iter()
        .filter_map(|t| match &t.state {
            State::Blocked(b) => Some(b),
            _ => None,
        })
        .collect();
    blocked.sort_by_key(|b| b.since);
    let Some((first, others)) = blocked.split_first() else {
        return fault(
            Span::DUMMY,
            "internal error: no task can run, and none is blocked",
        );
    };
    let waiting: usize = blocked.iter().map(|b| b.threads.len()).sum();
    let who = if others.is_empty() {
        format!(
            "all {waiting} unfinished threads ({}) wait here, so none of them can arrive",
            threads_text(lock, &first.threads)
        )
    } else {
        let rest: usize = others.iter().map(|b| b.threads.len()).sum();
        format!(
            "every unfinished thread is blocked: {} here, and {} in {} other {} (see the notes)",
            waiters(lock, &first.threads),
            count(rest, "more thread"),
            others.len(),
            if others.len() == 1 { "task" } else { "tasks" }
        )
    };
    let message = format!("deadlock: {}; {who}", waiting_for(lock, &first.on));
    let thread = first.threads.first().map(|&t| lock.thread_name(t));
    let mut f = match fault::<()>(first.span, message) {
        Err(f) => f,
        Ok(()) => return Ok(()),
    };
    f.thread = thread;
    for b in others {
        f.notes.push((
            b.span,
            format!(
                "{} here for {}",
                waiters(lock, &b.threads),
                awaited(lock, &b.on)
            ),
        ));
    }
    Err(f)
}

/// "`T.mbarrier_wait` waits for the phase of parity 0 of …", "`T.bar_sync(2, 256)` waits
/// for its phase to complete, which has 128 of its 256 arrivals".
fn waiting_for(lock: &Lockstep, on: &On) -> String {
    match on {
        On::Mbarrier { wait, .. } => format!(
            "`T.mbarrier_wait` waits for the phase of parity {}",
            barrier_text(lock, wait)
        ),
        On::Named { id, count, key, .. } => format!(
            "`{}` waits for its phase to complete, which has {} of its {count} arrivals",
            named_text(*id, *count),
            lock.named_state(*key).arrived
        ),
    }
}

/// `T.bar_sync(2, 256)`, or `T.cluster_sync()`.
fn named_text(id: i64, count: usize) -> String {
    if id == crate::interp::lockstep::CLUSTER_SYNC_KEY {
        "T.cluster_sync()".to_string()
    } else {
        format!("T.bar_sync({id}, {count})")
    }
}

/// What a blocked task waits for, in a note: "the phase of parity 0 of …", "the phase of
/// `T.bar_sync(2, 256)`, which has 128 of its 256 arrivals".
fn awaited(lock: &Lockstep, on: &On) -> String {
    match on {
        On::Mbarrier { wait, .. } => format!("the phase of parity {}", barrier_text(lock, wait)),
        On::Named { id, count, key, .. } => format!(
            "the phase of `{}`, which has {} of its {count} arrivals",
            named_text(*id, *count),
            lock.named_state(*key).arrived
        ),
    }
}

/// "0 of the mbarrier `bars[0]`, which is in phase 0 with 1 of its 1 arrivals and 0
/// transaction bytes pending" (the barrier's state now).
fn barrier_text(lock: &Lockstep, w: &PendingWait) -> String {
    let state = match lock.mbarrier(w.addr) {
        Some(m) => format!(
            ", which is in phase {} with {} of its {} arrivals and {} transaction bytes pending",
            m.phase, m.arrivals, m.count, m.tx
        ),
        None => String::new(),
    };
    format!("{} of the mbarrier {}{state}", w.parity, w.name)
}

/// "thread 128 waits", "threads 0-127 (128) wait".
fn waiters(lock: &Lockstep, threads: &[usize]) -> String {
    match threads {
        [_] => format!("{} waits", threads_text(lock, threads)),
        _ => format!("{} ({}) wait", threads_text(lock, threads), threads.len()),
    }
}

/// "1 thread", "128 threads".
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// "thread 5", "threads 0-127, 129": runs of consecutive threads (at most four, then "…").
fn threads_text(lock: &Lockstep, threads: &[usize]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for &t in threads {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == t => *end = t,
            _ => runs.push((t, t)),
        }
    }
    let mut parts: Vec<String> = runs
        .iter()
        .take(4)
        .map(|&(a, b)| {
            if a == b {
                lock.thread_name(a)
            } else {
                format!("{}-{}", lock.thread_name(a), lock.thread_name(b))
            }
        })
        .collect();
    if runs.len() > 4 {
        parts.push("…".to_string());
    }
    let noun = if threads.len() == 1 {
        "thread"
    } else {
        "threads"
    };
    format!("{noun} {}", parts.join(", "))
}
