//! eagle-runner: the `eagle` binary (every tutorial step at the world size `-d` gives, on any
//! platform, under `mpirun` too) and the harness that its steps, the examples and the tests
//! share: [`Step`] and [`example_main`], the command line ([`CommonArgs`]), the goldens
//! ([`golden`]), bit-exact comparisons ([`check_bits`]), seeded inputs ([`random_tensor`]) and
//! the MPI guard ([`MpiGuard`]).
//!
//! None of this is the `eagle` library's API: a crate that depends on `eagle` compiles no
//! command-line parser and no random number generator. The runner depends on `eagle` like any
//! user crate does.

mod cli;
pub mod golden;
mod random;
pub mod trace;

pub use cli::{
    example_main, is_usage, parse_devices, parse_devices_on, write_failure, CommonArgs, Step,
    StepOutcome, Suite, World,
};
/// Standard error, one whole line per `write` (every message of the runner and the examples).
pub use eagle::runtime::stderr_lines;
pub use random::random_tensor;

use eagle::{Error, Result};
use std::time::Duration;

/// Compares `got` with `want` bit for bit and names the first differing element.
///
/// # Errors
/// [`Error::Check`] naming `what`, the flat index, and both values.
pub fn check_bits(what: &str, got: &[f32], want: &[f32]) -> Result<()> {
    first_difference(what, got, want, |v| u64::from(v.to_bits()))
}

/// [`check_bits`] for `u64` tensors (counts).
///
/// # Errors
/// [`Error::Check`] naming the first element that differs.
pub fn check_u64(what: &str, got: &[u64], want: &[u64]) -> Result<()> {
    first_difference(what, got, want, |v| v)
}

/// [`check_bits`] for `bf16` tensors.
///
/// # Errors
/// [`Error::Check`] naming the first element whose bits differ.
pub fn check_bits_bf16(what: &str, got: &[eagle::bf16], want: &[eagle::bf16]) -> Result<()> {
    first_difference(what, got, want, |v| u64::from(v.to_bits()))
}

/// The bit comparison behind [`check_bits`] and [`check_bits_f64`].
fn first_difference<T: Copy + std::fmt::Debug>(
    what: &str,
    got: &[T],
    want: &[T],
    bits: impl Fn(T) -> u64,
) -> Result<()> {
    if got.len() != want.len() {
        return Err(Error::Check(format!(
            "{what}: {} elements, expected {}",
            got.len(),
            want.len()
        )));
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if bits(g) != bits(w) {
            return Err(Error::Check(format!("{what}[{i}] = {g:?}, expected {w:?}")));
        }
    }
    Ok(())
}

/// [`check_bits`] for `f64`.
///
/// # Errors
/// [`Error::Check`] naming `what`, the flat index, and both values.
pub fn check_bits_f64(what: &str, got: &[f64], want: &[f64]) -> Result<()> {
    first_difference(what, got, want, f64::to_bits)
}

/// Starts MPI when the process was launched by `mpirun` (feature `mpi`) and finalises it when
/// dropped; without the feature, or without `mpirun`, the world is one rank. Hold it for the
/// whole of `main`.
#[derive(Debug)]
pub struct MpiGuard {
    /// This process's rank.
    pub rank: usize,
    /// The number of processes.
    pub size: usize,
    /// How long a rank waits for the others in the guard's exchanges (the wait timeout:
    /// `EAGLE_WAIT_TIMEOUT_S`, default 60 s, or [`MpiGuard::with_wait_timeout`]).
    pub timeout: Duration,
}

impl MpiGuard {
    /// Initialises MPI if launched under `mpirun`.
    pub fn init() -> MpiGuard {
        #[cfg(feature = "mpi")]
        let (rank, size) = eagle::runtime::mpi_rt::init();
        #[cfg(not(feature = "mpi"))]
        let (rank, size) = (0, 1);
        MpiGuard {
            rank,
            size,
            timeout: eagle::runtime::RunOptions::from_env()
                .unwrap_or_default()
                .wait_timeout,
        }
    }
    /// Sets how long a rank waits for the others (`--wait-timeout SECS`); `None` keeps it.
    #[must_use]
    pub fn with_wait_timeout(mut self, secs: Option<u64>) -> MpiGuard {
        if let Some(t) = secs {
            self.timeout = Duration::from_secs(t);
        }
        self
    }
    /// Whether this process prints (rank 0).
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }
    /// The first rank whose `digest` differs from rank 0's (always `None` on one rank). Under
    /// MPI the ranks exchange their digests; a rank that does not take part within the wait
    /// timeout is named and the job is aborted.
    pub fn rank_differing(&self, digest: u64) -> Option<usize> {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            let d = eagle::runtime::mpi_rt::digests(digest, self.timeout);
            return d.iter().position(|x| *x != d[0]);
        }
        let _ = digest;
        None
    }
    /// Whether every rank succeeded (ranks agree on success before they report it); `error`
    /// is this rank's failure, if any, which a rank still at another point of the program
    /// prints as the cause. A rank at another point counts as a failure.
    pub fn all_ok(&self, error: Option<String>) -> bool {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            return eagle::runtime::mpi_rt::all_ok(error, self.timeout);
        }
        error.is_none()
    }
    /// Checks that every rank was started with the same command line (`args`, without the
    /// program path): under `mpirun`'s MPMD form (`-np 1 eagle --mode a : -np 1 eagle --mode
    /// b`) the ranks would run different programs. Always `Ok` on one rank.
    ///
    /// # Errors
    /// [`eagle::runtime::RuntimeError::RanksDisagree`] naming both command lines, on every rank.
    pub fn agree_on_command_line(&self, args: &[String]) -> Result<()> {
        #[cfg(feature = "mpi")]
        if self.size > 1 {
            let stance = eagle::runtime::agree::Stance::at("the start of the program")
                .fact("the command line", format!("`{}`", args.join(" ")));
            return Ok(eagle::runtime::mpi_rt::agree(&stance, self.timeout)?);
        }
        let _ = args;
        Ok(())
    }
}

impl Drop for MpiGuard {
    fn drop(&mut self) {
        #[cfg(feature = "mpi")]
        eagle::runtime::mpi_rt::finalize();
    }
}
