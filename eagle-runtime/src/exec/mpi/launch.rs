//! The MPI executor: this process is one rank of the job; it runs its own rank's dispatches
//! with MPI-3 RMA windows, then the ranks exchange the output slices they wrote.

use crate::error::{Cause, RuntimeError};
use crate::exec::Launch;
use crate::job::{dispatch_span, forward_host, Arg, JobArg, RunReport};
use crate::mpi_rt;

/// The host program under MPI: this process runs the dispatches of its own rank, then the
/// ranks exchange the output slices they wrote so that every rank holds the whole output.
pub(crate) struct Mpi;

impl Mpi {
    /// Runs this rank's dispatches and exchanges the outputs ([`crate::executor::Executor::run`]).
    pub(crate) fn run(&self, launch: Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
        run_mpi(launch)
    }
}

fn run_mpi(launch: Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
    let Launch {
        art,
        args,
        p,
        mut jobs,
        windows,
        opts,
        t0,
    } = launch;
    let (rank, size) = mpi_rt::world();
    if p != size {
        return Err(RuntimeError::Devices(format!(
            "mpirun started {size} process(es) but the device list has {p} device(s); give one device per process, e.g. `mpirun -np {p} eagle -d ...` with {p} ids"
        )));
    }
    // Every rank must allocate the same windows: compare the lists before allocating.
    let list = |ws: &[(usize, usize, String)]| {
        format!(
            "{} window(s) of {:?} bytes",
            ws.len(),
            ws.iter().map(|w| w.0).collect::<Vec<_>>()
        )
    };
    let stance = crate::agree::Stance::at(format!("the windows of `{}`", art.root))
        .fact("the window list", list(&windows));
    mpi_rt::agree(&stance, opts.wait_timeout)?;
    let wins = mpi_rt::Windows::allocate(
        &windows.iter().map(|w| w.0).collect::<Vec<_>>(),
        opts.wait_timeout,
    );
    let dispatches = jobs.iter().map(Vec::len).sum();
    let mut copied_bytes = 0;
    for ji in 0..jobs[rank].len() {
        copied_bytes += jobs[rank][ji].copy_in(args);
        forward_host(&mut jobs[rank], ji);
        let j = &mut jobs[rank][ji];
        let _dispatch = dispatch_span(&tracing::Span::current(), rank, &j.callee).entered();
        let Some(entry) = art.code.entries.get(&j.callee).copied() else {
            mpi_rt::fail_job(
                rank,
                &RuntimeError::RankFailed {
                    rank,
                    cause: Cause::Device(format!("no compiled code for `{}`", j.callee)),
                },
            );
        };
        let slots = j.slots();
        let mut env = mpi_rt::MpiEnv {
            wins: &wins,
            art,
            rank,
            size,
            timeout: opts.wait_timeout,
            error: None,
            pending: vec![],
            pending_bytes: 0,
            trace: opts.trace.clone(),
            calls: vec![],
        };
        let t0 = crate::trace::start(opts.trace.as_ref());
        let mut ctx = mpi_rt::device_ctx(&mut env);
        // SAFETY: as in `device_main`: the ABI slots match the callee's parameters.
        let st = unsafe { entry(&mut ctx, slots.as_ptr()) };
        // The dispatch's puts are complete before anything reads them (invariant 2).
        env.complete_puts();
        crate::trace::dispatched(opts.trace.as_ref(), rank, &j.callee, t0);
        if st != 0 {
            let cause = env
                .error
                .take()
                .unwrap_or_else(|| Cause::Device(format!("`{}` returned status {st}", j.callee)));
            mpi_rt::fail_job(rank, &RuntimeError::RankFailed { rank, cause });
        }
    }
    // Every rank has run its dispatches (a failure in one aborted the job) before any output
    // is gathered; a rank that never gets here is named when the timeout runs out. A peer may
    // still be in a wait or a barrier that times out itself, with a more precise message:
    // give it 2 s more to report first.
    mpi_rt::agree(
        &crate::agree::Stance::at(format!("the end of the run of `{}`", art.root)),
        opts.wait_timeout
            .saturating_add(std::time::Duration::from_secs(2)),
    )?;
    // Every rank knows which output slices every rank wrote (all ran the same host program).
    let outs: Vec<usize> = (0..args.len())
        .filter(|&a| matches!(args[a], Arg::Out(..)))
        .collect();
    for a in outs {
        let ranges = |q: usize| -> Vec<(usize, usize, usize, usize)> {
            // (job, buffer index, offset, bytes)
            let mut v = vec![];
            for (ji, j) in jobs[q].iter().enumerate() {
                let mut k = 0;
                for ja in &j.args {
                    if let JobArg::Tensor {
                        arg,
                        off,
                        bytes,
                        out,
                    } = ja
                    {
                        if *arg == a && *out {
                            v.push((ji, k, *off, *bytes));
                        }
                        k += 1;
                    }
                }
            }
            v
        };
        let counts: Vec<usize> = (0..size)
            .map(|q| ranges(q).iter().map(|r| r.3).sum())
            .collect();
        let mut mine = Vec::with_capacity(counts[rank]);
        for (ji, k, _, bytes) in ranges(rank) {
            // SAFETY: the buffer holds at least `bytes` bytes.
            let b = unsafe {
                std::slice::from_raw_parts(jobs[rank][ji].buffers[k].as_ptr().cast::<u8>(), bytes)
            };
            mine.extend_from_slice(b);
        }
        let all = mpi_rt::allgather_bytes(&mine, &counts);
        let mut at = 0;
        if let Arg::Out(_, _, dst) = &mut args[a] {
            for q in 0..size {
                for (_, _, off, bytes) in ranges(q) {
                    dst[off..off + bytes].copy_from_slice(&all[at..at + bytes]);
                    at += bytes;
                    copied_bytes += bytes;
                }
            }
        }
    }
    wins.keep();
    let _ = &mut jobs;
    Ok(RunReport {
        run_time: t0.elapsed(),
        dispatches,
        copied_bytes,
    })
}
