//! Running an execution plan's samples: the runtime half of `eagle::plan` (the facade builds
//! the plan, its wrappers and its artifact, binds the planes and hands over a [`PlanRun`] to
//! `crate::executor::run_plan`, which runs it here through its executor's [`Roles`]).
//!
//! A plan runs its sample kernel's wrapper (`__plan_<kernel>(lo, hi, planes...)`) over
//! samples `0..n` through a [`Structure`]:
//! - [`Structure::HostTeam`]: contiguous blocks of samples on the runtime's worker threads
//!   (`crate::pool`), through the tiles entry for whole tiles where the plan has one;
//! - [`Structure::DeviceKernel`]: one device runs them all: the CPU (one worker) or a GPU
//!   (platform `cuda`, one thread per sample, `crate::cuda::launch_samples`);
//! - [`Structure::RankPartition`]: each rank a contiguous block ([`Partition`]), run through
//!   the `inner` structure into its own copy of the outputs, then gathered (in-process for
//!   simulated ranks, over MPI otherwise) so every rank holds the whole output.
//!
//! A mapreduce kernel forms one partial per row of [`ROW`] samples (its rows entry, or one
//! GPU thread per row), rows dealt whole to workers and ranks, and folds the row partials in
//! row order ([`fold`]): the same bits at every world size and thread count
//! (`docs/determinism.md`).

mod device;
mod exec;
mod fold;
mod gather;
mod ranks;

pub(crate) use device::Device;
pub use fold::{combine, fold, identity};
pub use gather::{agree_before_gather, allgather_plane_into, partition_facts};
pub(crate) use ranks::Ranks;

use crate::error::RuntimeError;
use eagle_codegen::Artifact;
use eagle_ir::{DType, ReduceKind};
use std::ops::Range;

/// Samples per partial of a mapreduce (a "row").
pub const ROW: usize = eagle_codegen::abi::ROW;

/// Samples per tile of a plan's tiles entry: the facade builds the entry for this many lanes,
/// the runtime runs whole tiles through it.
pub const TILE_LANES: usize = 16;

/// The most ranks a plan simulates in one process (each holds its own copy of the outputs).
pub const MAX_SIMULATED_RANKS: usize = 1 << 16;

/// What runs a share of the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Structure {
    /// CPU threads over the samples (the default).
    HostTeam,
    /// One device runs all of its samples.
    DeviceKernel,
    /// Ranks split the samples; `inner` runs each rank's share.
    RankPartition,
}

impl Structure {
    /// Name in messages and manifests.
    pub fn name(self) -> &'static str {
        match self {
            Structure::HostTeam => "HostTeam",
            Structure::DeviceKernel => "DeviceKernel",
            Structure::RankPartition => "RankPartition",
        }
    }
}

/// A contiguous block partition of `n` items over `parts` ranks: the first `n % parts` blocks
/// are one longer (seed rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// Items.
    pub n: usize,
    /// Ranks.
    pub parts: usize,
}

impl Partition {
    /// `n` items over `parts` ranks (`parts` 0 is taken as 1).
    pub fn new(n: usize, parts: usize) -> Partition {
        Partition {
            n,
            parts: parts.max(1),
        }
    }
    /// The items of rank `r`.
    pub fn share(&self, r: usize) -> Range<usize> {
        let (q, rem) = (self.n / self.parts, self.n % self.parts);
        let lo = r * q + r.min(rem);
        lo..(lo + q + usize::from(r < rem)).min(self.n.max(lo))
    }
}

/// One parameter of a sample kernel after its sample index, as a run uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneRole {
    /// The kernel writes it.
    pub out: bool,
    /// A reduction output of a mapreduce (its buffer holds one partial).
    pub reduction: bool,
    /// A scalar uniform: its slot holds its bits, not an address.
    pub uniform: bool,
    /// Its element dtype.
    pub dtype: DType,
}

/// How a plan's samples run: the access category's consequence for the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Samples are independent: any block runs on any worker.
    Samplewise,
    /// The kernel writes other samples' cells (`cross_sample_write`): one worker, in order.
    Sequential,
    /// Each reduction output is folded with this reduction over rows of [`ROW`] samples.
    Mapreduce(ReduceKind),
}

/// Names a failure of a compiled entry as the user wrote it: the facade's rewrite of a
/// [`RuntimeError::RankFailed`] message from `entry` (a wrapper of the plan) to the sample
/// kernel and its op, with what was `running` (such as `samples 0..8`) appended.
pub type KernelError<'a> = dyn Fn(RuntimeError, &str, String) -> RuntimeError + Sync + 'a;

/// One run of a plan, as the facade hands it to [`run`].
pub struct PlanRun<'a> {
    /// The compiled plan (its sample wrapper and, where the plan has them, its rows and tiles
    /// entries).
    pub art: &'a Artifact,
    /// The sample kernel's name (messages, timeline spans).
    pub kernel: &'a str,
    /// The sample wrapper's entry: samples `lo..hi`.
    pub wrapper: &'a str,
    /// The rows entry of a mapreduce: rows `rlo..rhi` into their partials.
    pub rows_entry: Option<&'a str>,
    /// The tiles entry of a sample-local kernel: [`TILE_LANES`] samples per tile.
    pub tiles_entry: Option<&'a str>,
    /// The structure, and what runs each rank's share under `RankPartition`.
    pub structure: Structure,
    /// See `structure`.
    pub inner: Structure,
    /// Worker threads of a `HostTeam` (at least 1).
    pub threads: usize,
    /// Ranks simulated in this process under `RankPartition`, or `None` for the MPI world.
    pub ranks: Option<usize>,
    /// The kernel's parameters after the sample index, in order.
    pub planes: &'a [PlaneRole],
    /// How the samples may run.
    pub order: Order,
    /// The platform is `cuda`: a `DeviceKernel` share runs on a GPU (else on the CPU).
    pub cuda: bool,
    /// GPU `device` of the run (platform `cuda`).
    pub device: usize,
    /// The CUDA C runs on CPU threads (the emulation) instead of a GPU.
    pub cuda_emulate: bool,
    /// Each worker's share becomes a span of this timeline.
    pub trace: Option<&'a crate::trace::Trace>,
    /// The samples: `0..n`, `n >= 1`.
    pub n: usize,
    /// The rewrite of a compiled entry's failure ([`KernelError`]).
    pub kernel_error: &'a KernelError<'a>,
}

/// A plane buffer's address (or a uniform's bits), shareable across the workers of one run.
#[derive(Clone, Copy, Debug)]
pub struct Ptr(pub u64);
// SAFETY: the addresses point into buffers that outlive the scoped workers of a run; workers
// write disjoint samples (or disjoint partial buffers), as the access category guarantees.
unsafe impl Send for Ptr {}
unsafe impl Sync for Ptr {}

/// What an executor ([`crate::executor::Executor`]) decides of a plan: where a share of
/// samples (or rows) runs, and which ranks of a `RankPartition` this process computes and how
/// their shares meet. The defaults are the CPU and [`ranks::of`] (simulated ranks in this
/// process, else the MPI world); the CUDA executor runs `DeviceKernel` shares on the GPU.
pub(crate) trait Roles: Sync {
    /// Where a share of `structure` (the plan's, or its `inner` under `RankPartition`) runs.
    fn share_device(&self, structure: Structure) -> &'static dyn Device {
        let _ = structure;
        cpu()
    }

    /// The ranks of a `RankPartition` plan: `simulated` ranks in this process when given,
    /// else the MPI world.
    ///
    /// # Errors
    /// As [`ranks::of`].
    fn ranks(&self, simulated: Option<usize>) -> Result<Box<dyn Ranks>, RuntimeError> {
        ranks::of(simulated)
    }
}

/// The CPU device (the compiled entries).
pub(crate) fn cpu() -> &'static dyn Device {
    &device::Cpu
}

/// The GPU device (the CUDA entries, or the emulation).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn gpu() -> &'static dyn Device {
    &device::Gpu
}

/// Runs `run` on the plane buffers `bufs` through the executor's `roles`
/// ([`crate::executor::run_plan`], which picks them).
///
/// # Safety
/// As [`crate::executor::run_plan`].
///
/// # Errors
/// As [`crate::executor::run_plan`].
pub(crate) unsafe fn run_with(
    run: &PlanRun<'_>,
    bufs: &[(Ptr, usize)],
    roles: &dyn Roles,
) -> Result<(), RuntimeError> {
    let exec = exec::Exec {
        run,
        sizes: bufs.iter().map(|b| b.1).collect(),
        roles,
    };
    match run.order {
        Order::Mapreduce(kind) => exec.mapreduce(kind, bufs),
        Order::Samplewise | Order::Sequential => exec.samplewise(bufs),
    }
}

/// The error of a plan feature that needs MPI in a build without it.
pub fn no_mpi(what: &str) -> RuntimeError {
    RuntimeError::Plan(format!(
        "{what} needs MPI, and this build has no `mpi` feature; rebuild with `cargo build --release --features mpi` (OpenMPI or MPICH and libclang installed), or simulate ranks in-process with `Plan::with_simulated_ranks(R)`"
    ))
}

/// `(rank, size)` of this process in the MPI world: `(0, 1)` when not launched by `mpirun`
/// (always, in a build without the `mpi` feature).
pub fn world() -> (usize, usize) {
    #[cfg(feature = "mpi")]
    return crate::mpi_rt::world();
    #[cfg(not(feature = "mpi"))]
    (0, 1)
}

/// An all-gather-varcount of bytes over MPI: rank `q` contributes `counts[q]` bytes, every
/// rank receives them all in rank order.
///
/// # Errors
/// [`RuntimeError::Plan`] naming the `mpi` feature, in a build without it.
pub fn allgather(mine: &[u8], counts: &[usize]) -> Result<Vec<u8>, RuntimeError> {
    #[cfg(feature = "mpi")]
    return Ok(crate::mpi_rt::allgather_bytes(mine, counts));
    #[cfg(not(feature = "mpi"))]
    {
        let _ = (mine, counts);
        Err(no_mpi("RankPartition"))
    }
}
