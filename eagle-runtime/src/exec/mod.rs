//! The executors: where the jobs of a launch (one list of dispatches per rank, produced by the
//! host interpreter in `host.rs`) run and how their hooks are served.
//!
//! - [`sim`]: P simulated devices in this process (window memory per rank, notify/wait under
//!   one lock, exact deadlock detection, and its race detector, `sim::race`).
//! - `mpi` (feature `mpi`): this process is one rank of an MPI job; the hooks are MPI-3 RMA.
//! - `cuda` (feature `cuda`): NVIDIA GPUs through the driver API, or the CUDA emulation.

/// Platform `cuda` (feature `cuda`): NVIDIA GPUs through the driver API.
#[cfg(feature = "cuda")]
pub mod cuda;
/// The MPI transport (feature `mpi`).
#[cfg(feature = "mpi")]
pub mod mpi;
pub(crate) mod sim;
pub(crate) mod traced;

use crate::job::{Arg, Job};
use crate::options::RunOptions;
use eagle_codegen::Artifact;
use std::time::Instant;

/// One launch as the host interpreter leaves it: the dispatches of every rank, in order, and
/// the windows to allocate, for an executor (`crate::executor::Executor`) to run.
pub(crate) struct Launch<'l, 'a> {
    /// The compiled program.
    pub art: &'l Artifact,
    /// The caller's arguments: inputs read, outputs written back.
    pub args: &'l mut [Arg<'a>],
    /// The world size.
    pub p: usize,
    /// Each rank's jobs, in dispatch order.
    pub jobs: Vec<Vec<Job>>,
    /// Each window: bytes per rank, element size in bytes, and its description.
    pub windows: Vec<(usize, usize, String)>,
    /// The run's options (platform, timeouts, the race detector).
    pub opts: &'l RunOptions,
    /// When the launch started (the report's run time counts from it).
    pub t0: Instant,
}

/// The one bounds rule of every transport's window hooks: `peer` is a rank of a world of `p`,
/// `win` names a window (`window`: its bytes per rank and, where the transport knows it, its
/// description), and bytes `off..off + n` lie inside it. Returns the peer as an index.
///
/// # Errors
/// The message the run fails with, naming the operation `what`, the peer or the window and
/// the bytes (`Cause::Access`).
pub(crate) fn check_region(
    what: &str,
    p: usize,
    window: Option<(usize, Option<&str>)>,
    win: u64,
    peer: i64,
    off: u64,
    n: u64,
) -> Result<usize, String> {
    if peer < 0 || peer as usize >= p {
        return Err(format!(
            "{what}: peer rank {peer} is outside the world 0..{p}; address ranks 0 to {} (a ring's next rank is `(rank(ctx) + 1) % nranks(ctx)`)",
            p - 1
        ));
    }
    let Some((bytes, desc)) = window else {
        return Err(format!("{what}: unknown window #{win}"));
    };
    if off.checked_add(n).is_none_or(|end| end > bytes as u64) {
        let desc = desc.map(|d| format!(" ({d})")).unwrap_or_default();
        return Err(format!(
            "{what}: bytes {off}..{} of window #{win}{desc} are outside its {bytes} bytes",
            off.saturating_add(n)
        ));
    }
    Ok(peer as usize)
}
