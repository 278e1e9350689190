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
