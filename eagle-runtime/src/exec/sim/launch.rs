//! The `sim` and `cpu` executor: every rank of the launch in this process, one pool task per
//! rank that reaches peers (all ranks on one task, in rank order, when none does), the first
//! task on the caller's thread when its stack has room (`crate::pool::run_all_here`), with window
//! memory per rank ([`World`]); and [`EntryCaller`], one compiled function called on a
//! one-rank world (what an execution plan runs per share of samples).

use crate::error::{Cause, RuntimeError};
use crate::exec::Launch;
use crate::job::{dispatch_span, forward_host, Arg, Job, JobArg, RunReport};
use crate::options::RunOptions;
use crate::sim::{self, Failure, RankEnv, WindowMem, World};
use eagle_codegen::Artifact;

/// The in-process executor of platforms `sim` and `cpu`.
pub(crate) struct Sim;

impl Sim {
    /// Runs every dispatch of the launch in this process ([`crate::executor::Executor::run`]).
    pub(crate) fn run(&self, launch: Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
        let Launch {
            art,
            args,
            p,
            mut jobs,
            windows,
            opts,
            t0,
        } = launch;
        let dispatches: usize = jobs.iter().map(Vec::len).sum();
        if dispatches == 0 {
            // Nothing runs on any device: no world, no device thread, nothing to copy back.
            return Ok(RunReport {
                run_time: t0.elapsed(),
                dispatches,
                copied_bytes: 0,
            });
        }
        // Platform `cpu` runs device code on the host tensors in place where that gives the same
        // results as private copies; `sim` always copies (separate per-device memories catch
        // programs that rely on sharing).
        let base = |i: usize| match &args[i] {
            Arg::In(_, _, b) => b.as_ptr() as u64,
            Arg::Out(_, _, b) => b.as_ptr() as u64,
            Arg::Scalar(..) => 0,
        };
        let in_place = opts.platform == crate::Platform::Cpu
            && crate::job::host_memory_shareable(&jobs, &base);
        let mut copied_bytes = 0;
        for js in &mut jobs {
            for j in js.iter_mut() {
                if in_place {
                    j.host = j
                        .args
                        .iter()
                        .filter_map(|a| match a {
                            JobArg::Tensor { arg, off, .. } => Some(base(*arg) + *off as u64),
                            _ => None,
                        })
                        .collect();
                } else {
                    copied_bytes += j.copy_in(args);
                }
            }
        }
        // Ranks that dispatch nothing have no task; the world counts only the ranks that run.
        let ranks: Vec<usize> = (0..p).filter(|&r| !jobs[r].is_empty()).collect();
        let live = ranks.len();
        // Ranks whose programs reach no other rank (no collective, remote movement, signal or
        // barrier) cannot observe each other: they run one after another on one thread, in rank
        // order, instead of one thread each (one hand-off per launch instead of P).
        let isolated = jobs
            .iter()
            .flatten()
            .all(|j| art.isolated.contains(&j.callee));
        let wins = windows
            .into_iter()
            .map(|(bytes, elem, desc)| WindowMem::new(p, bytes, elem, desc))
            .collect();
        let world = World::new(p, wins, art, live, opts);
        // Device threads run each dispatch in a span whose parent is the caller's (the launch).
        let parent = tracing::Span::current();
        let parent = &parent;
        let mut jobs: Vec<Option<Vec<Job>>> = jobs.into_iter().map(Some).collect();
        let tasks = !isolated && opts.sim_ranks.tasks(p);
        // How the ranks run, for `-v` (`RUST_LOG=eagle=info`): the choice `SimRanks::Auto`
        // made is otherwise invisible.
        tracing::info!(
            target: "eagle",
            ranks = live,
            run_as = if tasks {
                "tasks"
            } else if isolated {
                "one thread, in rank order"
            } else {
                "threads"
            },
            "sim ranks"
        );
        let results = if tasks {
            run_as_tasks(&world, &ranks, &mut jobs, parent)
        } else {
            run_on_threads(&world, &ranks, &mut jobs, parent, isolated)
        };
        for (rank, (_, fail)) in &results {
            if let Some(Failure::Error(m)) = fail {
                return Err(RuntimeError::RankFailed {
                    rank: *rank,
                    cause: m.clone(),
                });
            }
        }
        if let Some(report) = world.deadlock.lock().ok().and_then(|d| d.clone()) {
            return Err(RuntimeError::Deadlock { report });
        }
        if results.iter().any(|(_, (_, f))| f.is_some()) {
            return Err(RuntimeError::RankFailed {
                rank: 0,
                cause: Cause::Device("the run was aborted".into()),
            });
        }
        // Copy outputs back (none when the run used the host tensors in place).
        for (_, (js, _)) in results.iter().filter(|_| !in_place) {
            for j in js {
                copied_bytes += j.copy_out(args);
            }
        }
        Ok(RunReport {
            run_time: t0.elapsed(),
            dispatches,
            copied_bytes,
        })
    }
}

/// One device's run: its jobs back (with their buffers) and how it ended.
pub(crate) type Outcome = (Vec<Job>, Option<Failure>);

/// Runs the ranks on the pool's threads: each rank on its own, or, when no rank reaches
/// another (`isolated`), all of them on one thread in rank order; the first of those threads
/// is the caller's when its stack has room for the tiles ([`crate::pool::run_all_here`]).
/// Returns each rank's outcome, in rank order.
fn run_on_threads(
    world: &World<'_>,
    ranks: &[usize],
    jobs: &mut [Option<Vec<Job>>],
    parent: &tracing::Span,
    isolated: bool,
) -> Vec<(usize, Outcome)> {
    let tasks: Vec<DeviceTask<'_>> = if isolated {
        let all: Vec<(usize, Vec<Job>)> = ranks
            .iter()
            .map(|&r| (r, jobs[r].take().unwrap_or_default()))
            .collect();
        vec![Box::new(move || {
            all.into_iter()
                .map(|(rank, js)| device_main(world, rank, js, parent, std::ptr::null()))
                .collect()
        })]
    } else {
        ranks
            .iter()
            .map(|&rank| {
                let js = jobs[rank].take().unwrap_or_default();
                let t: DeviceTask<'_> =
                    Box::new(move || vec![device_main(world, rank, js, parent, std::ptr::null())]);
                t
            })
            .collect()
    };
    let per_task = if isolated { ranks.len() } else { 1 };
    // The first task on the caller's thread, if its stack has room for the tiles (all the
    // ranks, when they are isolated or there is one), the others on workers.
    let need = world
        .artifact
        .code
        .stack
        .values()
        .copied()
        .max()
        .unwrap_or(0);
    let results = crate::pool::run_all_here(tasks, 16 << 20, need);
    results
        .into_iter()
        .flat_map(|r| match r {
            Ok(v) => v,
            Err(m) => (0..per_task)
                .map(|_| (vec![], Some(Failure::Error(Cause::Device(m.clone())))))
                .collect(),
        })
        .zip(ranks.iter().copied())
        .map(|(o, rank)| (rank, o))
        .collect()
}

/// Runs the ranks as tasks ([`super::tasks`]): consecutive blocks of ranks, one per worker.
/// Returns each rank's outcome, in rank order.
fn run_as_tasks(
    world: &World<'_>,
    ranks: &[usize],
    jobs: &mut [Option<Vec<Job>>],
    parent: &tracing::Span,
) -> Vec<(usize, Outcome)> {
    let per = ranks.len().div_ceil(super::tasks::workers(ranks.len()));
    let blocks: Vec<&[usize]> = ranks.chunks(per.max(1)).collect();
    let tasks: Vec<BlockTask<'_>> = blocks
        .iter()
        .map(|block| {
            let share: Vec<(usize, Vec<Job>)> = block
                .iter()
                .map(|&r| (r, jobs[r].take().unwrap_or_default()))
                .collect();
            let t: BlockTask<'_> = Box::new(move || super::tasks::run_block(world, share, parent));
            t
        })
        .collect();
    crate::pool::run_all(tasks, 1 << 20)
        .into_iter()
        .zip(blocks)
        .flat_map(|(r, block)| {
            // A block that could not start fails as the rank it names (the others of the
            // block were aborted), or, when its worker panicked, as each of its ranks.
            let (who, m) = match r {
                Ok(Ok(v)) => return v,
                Ok(Err((rank, m))) => (Some(rank), m),
                Err(m) => (None, m),
            };
            block
                .iter()
                .map(|&rank| {
                    let f = if who.is_none_or(|w| w == rank) {
                        Failure::Error(Cause::Device(m.clone()))
                    } else {
                        Failure::Aborted
                    };
                    (rank, (vec![], Some(f)))
                })
                .collect()
        })
        .collect()
}

/// A pool task running a block of ranks as tasks: each rank's outcome, in rank order, or why
/// the block could not start.
type BlockTask<'a> =
    Box<dyn FnOnce() -> Result<Vec<(usize, Outcome)>, (usize, String)> + Send + 'a>;

/// A pool task: the outcomes of the devices it runs, in rank order.
type DeviceTask<'a> = Box<dyn FnOnce() -> Vec<Outcome> + Send + 'a>;

/// Runs rank `rank`'s jobs in order, on its own thread (`yielder` null) or as a task (the
/// yielder of its coroutine), and retires the rank from the world.
pub(crate) fn device_main(
    world: &World<'_>,
    rank: usize,
    mut jobs: Vec<Job>,
    parent: &tracing::Span,
    yielder: *const super::tasks::RankYielder,
) -> (Vec<Job>, Option<Failure>) {
    let mut failure = None;
    for ji in 0..jobs.len() {
        if jobs[ji].host.is_empty() {
            forward_host(&mut jobs, ji);
        }
        let j = &mut jobs[ji];
        let _dispatch = dispatch_span(parent, rank, &j.callee).entered();
        let Some(entry) = world.artifact.code.entries.get(&j.callee).copied() else {
            failure = Some(Failure::Error(Cause::Device(format!(
                "no compiled code for `{}`",
                j.callee
            ))));
            break;
        };
        let slots = j.slots();
        let mut env = RankEnv {
            world,
            rank,
            error: None,
            calls: vec![],
            yielder,
            reads: 0,
        };
        let t0 = crate::trace::start(world.trace.as_ref());
        let mut ctx = sim::device_ctx(&mut env, world.p);
        // SAFETY: `entry` was compiled with the `EntryFn` ABI for this callee; `slots` has one
        // slot per parameter as the ABI requires, tensor slots point to live buffers of the
        // parameter's size, and `ctx` outlives the call.
        let st = unsafe { entry(&mut ctx, slots.as_ptr()) };
        crate::trace::dispatched(world.trace.as_ref(), rank, &j.callee, t0);
        if st != 0 {
            failure = Some(
                env.error
                    .take()
                    .unwrap_or(Failure::Error(Cause::Device(format!(
                        "`{}` returned status {st}",
                        j.callee
                    )))),
            );
            break;
        }
    }
    if matches!(failure, Some(Failure::Error(_))) {
        world.abort_all();
    }
    world.retire(rank);
    (jobs, failure)
}

/// A compiled function of an artifact, called on one device of a one-rank world with no
/// window buffers (what an execution plan does for each share of samples), on behalf of
/// `rank` (the rank its errors name). Build one per worker thread and call it as often as
/// needed: a call reads no environment variable and allocates nothing.
pub struct EntryCaller<'a> {
    world: World<'a>,
    entry: eagle_codegen::abi::EntryFn,
    name: &'a str,
    rank: usize,
}

impl<'a> EntryCaller<'a> {
    /// The caller of function `name` of `art`.
    ///
    /// # Errors
    /// [`RuntimeError::RankFailed`] (naming `rank`) when the function has no compiled code.
    pub fn new(art: &'a Artifact, name: &'a str, rank: usize) -> Result<Self, RuntimeError> {
        let entry =
            art.code
                .entries
                .get(name)
                .copied()
                .ok_or_else(|| RuntimeError::RankFailed {
                    rank,
                    cause: Cause::Device(format!("no compiled code for `{name}`")),
                })?;
        // A one-rank world without windows: no wait can block and no peer can race, so the
        // options (timeouts, the race detector) do not apply.
        let opts = RunOptions {
            race_check: false,
            ..RunOptions::default()
        };
        Ok(EntryCaller {
            world: World::new(1, vec![], art, 1, &opts),
            entry,
            name,
            rank,
        })
    }

    /// Calls the function with `slots`: one ABI slot per parameter (pointers for tensors, bits
    /// for scalars).
    ///
    /// # Safety
    /// Every tensor slot points to a live buffer of at least its parameter's size, which
    /// nothing else writes during the call (nor reads, for an output).
    ///
    /// # Errors
    /// [`RuntimeError::RankFailed`] (naming the rank) when a run-time check fails: the message
    /// names the function, the op and the values.
    pub unsafe fn call(&self, slots: &[u64]) -> Result<(), RuntimeError> {
        let mut env = RankEnv {
            world: &self.world,
            rank: 0,
            error: None,
            calls: vec![],
            yielder: std::ptr::null(),
            reads: 0,
        };
        let mut ctx = sim::device_ctx(&mut env, 1);
        // SAFETY: `entry` was compiled with the `EntryFn` ABI; the caller passes one slot per
        // parameter, tensor slots pointing to live buffers of the parameter's size.
        let st = unsafe { (self.entry)(&mut ctx, slots.as_ptr()) };
        if st != 0 {
            let cause = match env.error.take() {
                Some(Failure::Error(m)) => m,
                _ => Cause::Device(format!("`{}` returned status {st}", self.name)),
            };
            return Err(RuntimeError::RankFailed {
                rank: self.rank,
                cause,
            });
        }
        Ok(())
    }
}
