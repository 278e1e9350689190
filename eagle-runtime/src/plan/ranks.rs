//! Where the ranks of a `RankPartition` plan run and how their shares meet, behind one trait
//! ([`Ranks`]): every rank simulated in this process ([`Simulated`]), or this process's rank of
//! the MPI world ([`MpiWorld`]). The executor (`exec.rs`) runs a partition the same way on
//! both; only the gathers differ.

use super::{allgather, allgather_plane_into, no_mpi, world, Partition, MAX_SIMULATED_RANKS};
use crate::error::RuntimeError;
use std::ops::Range;

type Result<T> = std::result::Result<T, RuntimeError>;

/// The ranks of a `RankPartition` plan: which this process computes, and how each rank's
/// share reaches every rank.
pub(crate) trait Ranks {
    /// The ranks this process computes, and the world size.
    fn mine(&self) -> (Vec<usize>, usize);

    /// One row of an output plane (`out`, every sample) from rank `rank`'s share `src` of it
    /// (samples `share` of `part`): on return `out[share]` holds `src`, and, where the ranks
    /// are other processes, every other rank's share too.
    ///
    /// # Errors
    /// The gather's errors (the ranks' agreement on the partition first).
    fn gather_plane(
        &self,
        src: &[f64],
        share: Range<usize>,
        part: &Partition,
        out: &mut [f64],
    ) -> Result<()>;

    /// A mapreduce's row partials (`partials[k]`: output `k`'s partial of every row, `ident[k]`
    /// bytes each) after each rank of this process formed those of its rows (`part`): on
    /// return every row's partials are in `partials` (in place already where every rank is
    /// here).
    ///
    /// # Errors
    /// The gather's errors.
    fn gather_partials(
        &self,
        part: &Partition,
        ident: &[Vec<u8>],
        partials: &mut [Vec<u8>],
    ) -> Result<()>;
}

/// `r` ranks simulated in this process: each computes its share into its own copy of the
/// outputs, and the shares are put together in memory.
pub(super) struct Simulated(pub usize);

impl Ranks for Simulated {
    fn mine(&self) -> (Vec<usize>, usize) {
        ((0..self.0).collect(), self.0)
    }

    fn gather_plane(
        &self,
        src: &[f64],
        share: Range<usize>,
        _: &Partition,
        out: &mut [f64],
    ) -> Result<()> {
        out[share].copy_from_slice(src);
        Ok(())
    }

    fn gather_partials(&self, _: &Partition, _: &[Vec<u8>], _: &mut [Vec<u8>]) -> Result<()> {
        Ok(())
    }
}

/// This process's rank of the MPI world (`(0, 1)` outside `mpirun`): the shares meet in
/// all-gathers after the ranks agree on the partition.
pub(super) struct MpiWorld;

impl Ranks for MpiWorld {
    fn mine(&self) -> (Vec<usize>, usize) {
        let (me, size) = world();
        (vec![me], size)
    }

    fn gather_plane(
        &self,
        src: &[f64],
        _: Range<usize>,
        part: &Partition,
        out: &mut [f64],
    ) -> Result<()> {
        allgather_plane_into(src, part, out)
    }

    fn gather_partials(
        &self,
        part: &Partition,
        ident: &[Vec<u8>],
        partials: &mut [Vec<u8>],
    ) -> Result<()> {
        // allgather_fold: every rank contributes the partials of its rows, row-major (per row,
        // each output's partial in turn); the fold then runs on every rank in row order.
        let me = world().0;
        let row_bytes: usize = ident.iter().map(Vec::len).sum();
        let mut local = Vec::with_capacity(part.share(me).len() * row_bytes);
        for row in part.share(me) {
            for (k, id) in ident.iter().enumerate() {
                local.extend_from_slice(&partials[k][row * id.len()..(row + 1) * id.len()]);
            }
        }
        let counts: Vec<usize> = (0..part.parts)
            .map(|q| part.share(q).len() * row_bytes)
            .collect();
        let all = allgather(&local, &counts)?;
        for (row, chunk) in all.chunks_exact(row_bytes.max(1)).enumerate().take(part.n) {
            let mut at = 0;
            for (k, id) in ident.iter().enumerate() {
                partials[k][row * id.len()..(row + 1) * id.len()]
                    .copy_from_slice(&chunk[at..at + id.len()]);
                at += id.len();
            }
        }
        Ok(())
    }
}

/// The ranks of a run: `simulated` ranks in this process when given, else the MPI world.
///
/// # Errors
/// [`RuntimeError::Plan`] for no or too many simulated ranks, and for the MPI world in a
/// build without the `mpi` feature.
pub(super) fn of(simulated: Option<usize>) -> Result<Box<dyn Ranks>> {
    match simulated {
        Some(r) if r > MAX_SIMULATED_RANKS => Err(RuntimeError::Plan(format!(
            "argument `ranks`: simulate at most {MAX_SIMULATED_RANKS} ranks in one process (each holds its own copy of the outputs), found {r}"
        ))),
        Some(r) if r >= 1 => Ok(Box::new(Simulated(r))),
        Some(_) => Err(RuntimeError::Plan(
            "argument `ranks`: simulate at least one rank".into(),
        )),
        None if cfg!(feature = "mpi") => Ok(Box::new(MpiWorld)),
        None => Err(no_mpi(
            "`Plan::run` of a RankPartition plan without simulated ranks",
        )),
    }
}
