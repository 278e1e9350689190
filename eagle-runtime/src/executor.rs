//! Where work runs, behind one trait: [`Executor`], which the three executors implement:
//! - `Sim` (`exec::sim::launch`): platforms `sim` and `cpu`, every rank in this process;
//! - `Mpi` (`exec::mpi::launch`, feature `mpi`): this process is one rank of an MPI job;
//! - `Cuda` (`exec::cuda`, feature `cuda`): NVIDIA GPUs, or the CUDA emulation.
//!
//! An executor runs a launch (the dispatches the host interpreter produced, [`Executor::run`])
//! and an execution plan's shares ([`crate::plan::Roles`]: where a share of samples runs,
//! the CPU or a GPU, and which ranks of a `RankPartition` this process computes and how their
//! shares meet). Launches ([`select`]) and plans ([`run_plan`]) pick their executor by the
//! platform; a launch asks whether this process is an MPI rank, a plan only when it is a
//! `RankPartition` over the MPI world.
//!
//! This module sits above `exec` (the executors' machinery) and `plan` (the plan's
//! structures), which do not name it.

use crate::error::RuntimeError;
use crate::exec::{self, Launch};
use crate::job::RunReport;
use crate::options::RunOptions;
use crate::plan::{self, PlanRun, Ptr, Roles};

/// An executor: it runs launches, and plans through its [`Roles`].
pub(crate) trait Executor: Roles + Sync {
    /// Runs every dispatch of the launch and copies the outputs back into `launch.args`.
    ///
    /// # Errors
    /// [`RuntimeError::RankFailed`] with the first failing rank's error,
    /// [`RuntimeError::Deadlock`], and the executor's own errors (devices, MPI agreement).
    fn run(&self, launch: Launch<'_, '_>) -> Result<RunReport, RuntimeError>;
}

impl Executor for exec::sim::launch::Sim {
    fn run(&self, launch: Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
        exec::sim::launch::Sim::run(self, launch)
    }
}

/// The CPU runs every share; ranks as [`Roles`] says by default.
impl Roles for exec::sim::launch::Sim {}

#[cfg(feature = "mpi")]
impl Executor for exec::mpi::launch::Mpi {
    fn run(&self, launch: Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
        exec::mpi::launch::Mpi::run(self, launch)
    }
}

/// The CPU runs this rank's shares; the shares meet over MPI ([`Roles::ranks`]'s default for
/// a plan without simulated ranks).
#[cfg(feature = "mpi")]
impl Roles for exec::mpi::launch::Mpi {}

#[cfg(feature = "cuda")]
impl Executor for exec::cuda::Cuda {
    fn run(&self, launch: Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
        exec::cuda::Cuda::run(self, launch)
    }
}

/// A `DeviceKernel` share runs on the GPU (or the emulation); the others on the CPU.
#[cfg(feature = "cuda")]
impl Roles for exec::cuda::Cuda {
    fn share_device(&self, structure: plan::Structure) -> &'static dyn plan::Device {
        if structure == plan::Structure::DeviceKernel {
            plan::gpu()
        } else {
            plan::cpu()
        }
    }
}

/// The executor of a run on `platform_cuda` (platform `cuda`) in this process: CUDA for
/// `cuda`, MPI when this process is a rank of an MPI job, the in-process one otherwise.
///
/// # Errors
/// [`RuntimeError::PlatformUnavailable`] for `cuda` in a build without the `cuda` feature.
fn pick(platform_cuda: bool) -> Result<&'static dyn Executor, RuntimeError> {
    if platform_cuda {
        #[cfg(feature = "cuda")]
        return Ok(&exec::cuda::Cuda);
        #[cfg(not(feature = "cuda"))]
        return Err(no_cuda());
    }
    #[cfg(feature = "mpi")]
    if exec::mpi::active() {
        return Ok(&exec::mpi::launch::Mpi);
    }
    Ok(&exec::sim::launch::Sim)
}

/// The executor of a launch with `opts` ([`pick`] on its platform).
///
/// # Errors
/// As [`pick`].
pub(crate) fn select(opts: &RunOptions) -> Result<&'static dyn Executor, RuntimeError> {
    pick(opts.platform == crate::Platform::Cuda)
}

/// Platform `cuda` in a build without the `cuda` feature, for plans: a launch fails before it
/// runs (`pick`), and so does a plan's `DeviceKernel` share (on the GPU device, which says
/// so), while its `HostTeam` shares run on the CPU as on any platform.
#[cfg(not(feature = "cuda"))]
struct NoCuda;

/// The error of platform `cuda` in a build without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
fn no_cuda() -> RuntimeError {
    RuntimeError::PlatformUnavailable {
        platform: "cuda".into(),
        reason: "this build has no `cuda` feature; rebuild with `--features cuda`".into(),
    }
}

#[cfg(not(feature = "cuda"))]
impl Executor for NoCuda {
    fn run(&self, _: Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
        Err(no_cuda())
    }
}

#[cfg(not(feature = "cuda"))]
impl Roles for NoCuda {
    fn share_device(&self, structure: plan::Structure) -> &'static dyn plan::Device {
        if structure == plan::Structure::DeviceKernel {
            plan::gpu()
        } else {
            plan::cpu()
        }
    }
}

/// The executor of plan `run`: as [`pick`] says for its platform, except that only a
/// `RankPartition` over the MPI world (no simulated ranks) asks whether this process is an
/// MPI rank (the question starts MPI), and that platform `cuda` without the `cuda` feature
/// runs what the CPU runs (`NoCuda`).
fn pick_for_plan(run: &PlanRun<'_>) -> &'static dyn Executor {
    if run.cuda {
        #[cfg(feature = "cuda")]
        return &exec::cuda::Cuda;
        #[cfg(not(feature = "cuda"))]
        return &NoCuda;
    }
    #[cfg(feature = "mpi")]
    if run.structure == plan::Structure::RankPartition && run.ranks.is_none() {
        return &exec::mpi::launch::Mpi;
    }
    &exec::sim::launch::Sim
}

/// Runs `run` on the plane buffers `bufs` (address and bytes, in parameter order; a
/// uniform's address is its bits and its bytes 0) with the executor of its platform
/// ([`pick_for_plan`]): every output holds the whole result afterwards (on every rank, under
/// `RankPartition`).
///
/// # Safety
/// Each buffer must be live, `bytes` long, and not touched by anything else for the duration
/// of the call: outputs are written through their addresses from worker threads.
///
/// # Errors
/// [`RuntimeError::Plan`] for a structure the build cannot run (no `mpi` feature, too many
/// simulated ranks), [`RuntimeError::PlatformUnavailable`] for a `DeviceKernel` share on
/// platform `cuda` without the `cuda` feature, and the run-time errors of the compiled
/// entries (as `kernel_error` names them).
pub unsafe fn run_plan(run: &PlanRun<'_>, bufs: &[(Ptr, usize)]) -> Result<(), RuntimeError> {
    let executor = pick_for_plan(run);
    // SAFETY: the caller's contract.
    unsafe { plan::run_with(run, bufs, executor) }
}
