//! [`RankPartition`]: the MPI world of a rank-partitioned plan, a rank's share of the samples,
//! and the gathers that give every rank the whole plane (in rank order, the same bits at every
//! world size).

use super::*;
use eagle_runtime::plan::{agree_before_gather, allgather, combine, partition_facts};
use eagle_runtime::RuntimeError;

/// The MPI world of a rank partition. Without the `mpi` cargo feature there is none.
pub struct RankPartition;

impl RankPartition {
    /// Whether this build can run over MPI (`mpi` cargo feature).
    pub fn available() -> bool {
        cfg!(feature = "mpi")
    }
    /// `(rank, size)` of this process: `(0, 1)` when not launched by `mpirun` (always, in a
    /// build without the `mpi` feature).
    pub fn world() -> (usize, usize) {
        eagle_runtime::plan::world()
    }
    /// The share of `partition` that this process computes: the share of rank `world().0`.
    /// Without `mpirun` (or without the `mpi` feature) that is rank 0's share, *not* the whole
    /// range: to simulate R ranks in one process, take [`Partition::share`] of each rank, or
    /// run the plan with [`Plan::with_simulated_ranks`].
    pub fn local(partition: &Partition) -> Range<usize> {
        partition.share(Self::world().0)
    }
    /// Gathers each rank's share of a plane (`local`, this rank's samples of `partition`) so
    /// every rank holds all of it, in sample order, over MPI (an all-gather-varcount).
    ///
    /// # Errors
    /// [`Error::Plan`] naming the `mpi` feature, in a build without it, or when `local` does not
    /// have this rank's share length.
    pub fn allgather_plane(local: &[f64], partition: &Partition) -> Result<Vec<f64>> {
        let (me, size) = Self::world();
        if !Self::available() {
            return Err(no_mpi("RankPartition::allgather_plane"));
        }
        let check = if partition.parts != size || local.len() != partition.share(me).len() {
            Err(RuntimeError::Plan(format!(
                "argument `local`: rank {me} of {size} holds {} values, but its share of {} items over {} ranks is {} (items {:?}); pass the values of `RankPartition::local(partition)`",
                local.len(),
                partition.n,
                partition.parts,
                partition.share(me).len(),
                partition.share(me)
            )))
        } else {
            Ok(())
        };
        agree_before_gather(
            "RankPartition::allgather_plane",
            partition_facts(partition),
            check,
        )
        .map_err(from_runtime)?;
        let mut out = vec![0f64; partition.n];
        Self::allgather_plane_into(local, partition, &mut out)?;
        Ok(out)
    }
    /// [`RankPartition::allgather_plane`] into a caller's buffer of `partition.n` values (no
    /// allocation: the form to use in a loop).
    ///
    /// # Errors
    /// As [`RankPartition::allgather_plane`], and when `out` does not hold `partition.n` values.
    pub fn allgather_plane_into(
        local: &[f64],
        partition: &Partition,
        out: &mut [f64],
    ) -> Result<()> {
        eagle_runtime::plan::allgather_plane_into(local, partition, out).map_err(from_runtime)
    }
    /// Gathers every rank's row partials (`local`: `cells` values per row, for this rank's rows
    /// of `rows`, in row order) and folds all rows in row order with `op`, over MPI: every rank
    /// gets the same `cells` values, whatever the world size.
    ///
    /// # Errors
    /// [`Error::Plan`] naming the `mpi` feature, in a build without it, or for a `local` of
    /// the wrong length.
    pub fn allgather_fold(
        local: &[f64],
        rows: &Partition,
        cells: usize,
        op: ReduceKind,
    ) -> Result<Vec<f64>> {
        let (me, size) = Self::world();
        if !Self::available() {
            return Err(no_mpi("RankPartition::allgather_fold"));
        }
        let want = rows.share(me).len().checked_mul(cells);
        let check = if op == ReduceKind::Land {
            Err(RuntimeError::Plan(
                "argument `op`: `land` is a reduction of bools; the planes gathered are f64: use `sum`, `times` or `max`".into(),
            ))
        } else if rows.parts != size || want != Some(local.len()) {
            Err(RuntimeError::Plan(format!(
                "argument `local`: rank {me} holds {} values, expected {} rows x {cells} cells",
                local.len(),
                rows.share(me).len()
            )))
        } else {
            Ok(())
        };
        let mut facts = partition_facts(rows);
        facts.push(("cells", cells.to_string()));
        facts.push(("op", op.name().to_string()));
        agree_before_gather("RankPartition::allgather_fold", facts, check).map_err(from_runtime)?;
        let counts: Vec<usize> = (0..size).map(|q| rows.share(q).len() * cells * 8).collect();
        let all = allgather(&f64_bytes(local), &counts).map_err(from_runtime)?;
        let mut acc = identity(op, DType::F64).repeat(cells);
        for row in all.chunks_exact((cells * 8).max(1)) {
            combine(op, DType::F64, &mut acc, row);
        }
        Ok(bytes_f64(&acc))
    }
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_f64(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect()
}
