//! eagle-runtime: worlds of devices that run compiled artifacts.
//!
//! - [`Tensor`]: host tensors (row-major, contiguous) passed to host programs.
//! - [`run`]: interprets an artifact's host function, dispatches its per-device programs and
//!   serves their hooks (window buffers, put/get, notify/wait, barrier).
//! - Platform `sim`: P simulated devices in one process, one thread per device, each with its
//!   own memory; window buffers are one allocation per rank.
//!
//! Invariant: the runtime executes artifacts; it never builds or rewrites IR.

pub mod agree;
mod error;
mod exec;
mod executor;
mod fp8;
mod host;
mod job;
mod options;
pub mod plan;
pub mod pool;
mod tensor;
pub mod trace;

#[cfg(feature = "cuda")]
pub use exec::cuda;
/// The MPI transport (feature `mpi`): `exec/mpi.rs`.
#[cfg(feature = "mpi")]
pub use exec::mpi as mpi_rt;
pub(crate) use exec::sim;
pub(crate) use exec::sim::race;

pub use error::{Cause, RuntimeError};
pub use exec::sim::launch::EntryCaller;
pub use executor::run_plan;
pub use fp8::{to_f8, Float8, E8M0, F8E4M3, F8E5M2};
pub use host::{run, run_with};
pub use job::{Arg, RunReport, ScalarArg};
pub use options::{launcher_world_size, RunOptions, SimRanks};
pub use tensor::{Element, Tensor};

/// Where device programs run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    /// Simulated devices in this process (the default; needs nothing but Rust).
    Sim,
    /// The host CPU; runs like `sim` in one process.
    Cpu,
    /// NVIDIA GPUs through CUDA.
    Cuda,
}

impl Platform {
    /// Parses `sim`, `cpu` or `cuda`.
    ///
    /// # Errors
    /// [`RuntimeError::UnknownPlatform`] naming the accepted values.
    pub fn parse(s: &str) -> Result<Platform, RuntimeError> {
        match s {
            "sim" => Ok(Platform::Sim),
            "cpu" => Ok(Platform::Cpu),
            "cuda" => Ok(Platform::Cuda),
            other => Err(RuntimeError::UnknownPlatform(other.to_string())),
        }
    }
    /// Name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Sim => "sim",
            Platform::Cpu => "cpu",
            Platform::Cuda => "cuda",
        }
    }
    /// How many devices the platform offers: 4096 on `sim` and `cpu` (one thread per device
    /// while a run is in flight); on `cuda`, the GPUs the driver sees (0 without a driver).
    pub fn max_devices(self) -> usize {
        match self {
            Platform::Sim | Platform::Cpu => sim::MAX_DEVICES,
            #[cfg(feature = "cuda")]
            Platform::Cuda => cuda::device_count().unwrap_or(0),
            #[cfg(not(feature = "cuda"))]
            Platform::Cuda => 0,
        }
    }
}

/// Standard error written one whole line per `write` call. Ranks under `mpirun` share one
/// stderr, and unbuffered `eprintln!` issues a `write` per formatted piece, so two ranks'
/// errors would interleave mid-line; the MPI transport and the runner print through this.
pub fn stderr_lines() -> std::io::LineWriter<std::io::Stderr> {
    std::io::LineWriter::with_capacity(16 << 10, std::io::stderr())
}
