//! Ranks as tasks: at large world sizes ([`crate::SimRanks`]) the ranks of a launch run as
//! stackful coroutines, in blocks of consecutive ranks, one block per worker thread (one per
//! core), instead of one OS thread each.
//!
//! A rank runs until it waits on a signal or a barrier that does not hold yet, or until it
//! has read windows 65,536 times since its last turn (`RankEnv::turn`: a rank polling a
//! window must not starve the rank it waits for); its coroutine then suspends with what it
//! waits for ([`Blocked`]) and the worker goes on with the next rank of its block. A worker
//! resumes a suspended rank once its condition holds (read with atomics, as the threads' fast
//! path does), so a switch between ranks costs a stack switch, tens of nanoseconds, where a
//! thread wake-up costs microseconds and 1,024 runnable threads on 2 cores are time-sliced by
//! the kernel. Consecutive ranks on one worker suit the
//! neighbour patterns of the field (a ring's step passes down a block in one sweep).
//!
//! Invariants:
//! - a coroutine is always run to its end (a rank that fails, or is aborted, returns from its
//!   entry point through the error path): a suspended coroutine is never dropped, since
//!   unwinding through compiled code is not possible;
//! - the deadlock report is the threads' one: a worker that finds none of its ranks runnable
//!   (after a short spin) records them as blocked in the world's state, where a rank blocked
//!   on its own thread records itself, and the same check runs; a rank it resumes is removed
//!   again;
//! - a wait times out when its worker has had nothing to run for the timeout (the other
//!   ranks of its block wait too), with the threads' message.

use super::launch::{device_main, Outcome};
use super::{set_blocked, Blocked, Failure, World};
use crate::job::Job;
use corosensei::stack::{DefaultStack, Stack};
use corosensei::{Coroutine, CoroutineResult, Yielder};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a suspended rank is resumed with: `None` to test its condition again (it holds, as
/// far as its worker saw), or the failure its wait returns.
pub(crate) type Resume = Option<Failure>;

/// The yielder a rank's hooks suspend it through ([`super::RankEnv::yielder`]).
pub(crate) type RankYielder = Yielder<Resume, Blocked>;

/// The stack of each rank's coroutine: as large as a device thread's (compiled code keeps
/// tiles in stack slots); mapped, not committed, so a rank pays for the pages it touches.
const STACK_BYTES: usize = 16 << 20;

/// Idle sweeps (every rank of the block waits) a worker spins through, yielding its core,
/// before it records its ranks as blocked and sleeps between sweeps.
const IDLE_SPINS: u32 = 64;

/// How long an idle worker sleeps between sweeps once it has spun.
const IDLE_SLEEP: Duration = Duration::from_micros(100);

/// Most stacks the process keeps for later runs: 1,024 x 16 MiB of address space, no memory
/// (their pages are given back when they are kept).
const STACKS_KEPT: usize = 1024;

/// Stacks of finished coroutines, kept for later runs (mapping and unmapping 1,024 stacks
/// would cost a launch milliseconds), at most [`STACKS_KEPT`].
static STACKS: Mutex<Vec<DefaultStack>> = Mutex::new(Vec::new());

/// Up to `n` kept stacks.
fn take_stacks(n: usize) -> Vec<DefaultStack> {
    let mut kept = STACKS.lock().unwrap_or_else(|e| e.into_inner());
    let k = kept.len().saturating_sub(n);
    kept.split_off(k)
}

/// Keeps `stacks` for later runs, up to [`STACKS_KEPT`] in all (the rest are unmapped), after
/// giving their pages back to the OS: a kept stack holds address space, not memory (a rank
/// of a kernel with large tiles touches megabytes of its stack).
fn keep_stacks(mut stacks: Vec<DefaultStack>) {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    for s in &stacks {
        // Above the guard page, up to the stack's base.
        let lo = s.limit().get() + page;
        let hi = s.base().get();
        if hi > lo {
            // SAFETY: `[lo, hi)` is the writable part of a stack mapping this process owns and
            // no coroutine runs on (it finished); MADV_DONTNEED on a private anonymous mapping
            // only drops its pages (they read as zero when touched again).
            unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED) };
        }
    }
    let mut kept = STACKS.lock().unwrap_or_else(|e| e.into_inner());
    let room = STACKS_KEPT.saturating_sub(kept.len());
    stacks.truncate(room);
    kept.extend(stacks);
}

type RankCoroutine = Coroutine<Resume, Blocked, Outcome, DefaultStack>;

/// One rank of a worker's block.
struct Task {
    rank: usize,
    co: Option<RankCoroutine>,
    /// What it waits for, while suspended.
    blocked: Option<Blocked>,
    /// Whether it is recorded as blocked in the world's state (for the deadlock check).
    recorded: bool,
    out: Option<Outcome>,
}

/// How many workers (and so blocks) a world of `p` ranks is run on: one per core.
pub(crate) fn workers(p: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, p.max(1))
}

/// Runs `share`, a block of ranks with their jobs, as tasks on this thread, to the end of
/// every rank; returns each rank's outcome, in the order of `share`.
///
/// # Errors
/// The rank whose stack could not be mapped, with the reason (nothing of the block ran; the
/// world is aborted).
pub(crate) fn run_block(
    world: &World<'_>,
    share: Vec<(usize, Vec<Job>)>,
    parent: &tracing::Span,
) -> Result<Vec<(usize, Outcome)>, (usize, String)> {
    let mut tasks = Vec::with_capacity(share.len());
    let mut reuse = take_stacks(share.len());
    for (rank, jobs) in share {
        let stack = match reuse.pop() {
            Some(s) => s,
            None => DefaultStack::new(STACK_BYTES).map_err(|e| {
                // The other blocks' ranks would wait for this block's for good.
                world.abort_all();
                (rank, format!("could not map a stack for rank {rank}: {e}"))
            })?,
        };
        let body = move |y: &RankYielder, _: Resume| {
            device_main(world, rank, jobs, parent, std::ptr::from_ref(y))
        };
        // SAFETY: the coroutine borrows `world` and `parent`, which outlive this function, and
        // it is run to its end below before this function returns (see the module's
        // invariants), so nothing it borrows is used after it is gone.
        let co = unsafe { RankCoroutine::with_stack_unchecked(stack, body) };
        tasks.push(Task {
            rank,
            co: Some(co),
            blocked: None,
            recorded: false,
            out: None,
        });
    }
    let mut left = tasks.len();
    let mut done = Vec::with_capacity(left);
    let mut idle_since: Option<Instant> = None;
    let mut spins = 0u32;
    while left > 0 {
        let aborted = world.abort.load(Ordering::SeqCst);
        let expired = idle_since.is_some_and(|t| t.elapsed() > world.timeout);
        let mut ran = false;
        for t in tasks.iter_mut() {
            let Some(co) = t.co.as_mut() else { continue };
            let input = match t.blocked {
                None => None,
                Some(_) if aborted => Some(Failure::Aborted),
                Some(b) if world.satisfied_now(t.rank, b) => None,
                Some(b) if expired => Some(world.timed_out(b)),
                Some(_) => continue,
            };
            if t.recorded {
                set_blocked(&mut world.lock(), t.rank, None);
                t.recorded = false;
            }
            ran = true;
            t.blocked = None;
            match co.resume(input) {
                CoroutineResult::Yield(b) => t.blocked = Some(b),
                CoroutineResult::Return(o) => {
                    t.out = Some(o);
                    left -= 1;
                    if let Some(co) = t.co.take() {
                        done.push(co.into_stack());
                    }
                }
            }
        }
        if ran {
            idle_since = None;
            spins = 0;
            continue;
        }
        // Every rank of the block waits for a rank of another block.
        idle_since.get_or_insert_with(Instant::now);
        spins += 1;
        if spins < IDLE_SPINS {
            std::thread::yield_now();
            continue;
        }
        if tasks.iter().any(|t| t.blocked.is_some() && !t.recorded) {
            let mut g = world.lock();
            for t in tasks.iter_mut() {
                if let (Some(b), false) = (t.blocked, t.recorded) {
                    set_blocked(&mut g, t.rank, Some(b));
                    t.recorded = true;
                }
            }
            // Aborts the world (which the next sweep sees) when every live rank is stuck.
            world.check_deadlock(&mut g);
        }
        std::thread::sleep(IDLE_SLEEP);
    }
    keep_stacks(done);
    Ok(tasks
        .into_iter()
        .map(|t| (t.rank, t.out.unwrap_or_default()))
        .collect())
}
