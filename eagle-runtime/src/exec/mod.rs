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
            "{what}: peer rank {peer} is outside the world 0..{p}"
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
