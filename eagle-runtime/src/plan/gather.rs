//! The gathers of `RankPartition` over MPI: every rank ends with every rank's share, in rank
//! order, after the ranks agree on the partition (a wrong share on one rank is an error on
//! every rank, never a rank left alone in the gather).

use super::{no_mpi, world, Partition};
use crate::error::RuntimeError;

/// The facts of a partition every rank of a gather must share.
pub fn partition_facts(p: &Partition) -> Vec<(&'static str, String)> {
    vec![(
        "the partition",
        format!("{} items over {} ranks", p.n, p.parts),
    )]
}

/// Before a gather, the ranks agree on this rank's `check` of its arguments and on `facts`
/// (the partition, and a fold's cells and op): a wrong share on one rank is an error on every
/// rank (each names the rank that was wrong), and so is a partition, cell count or op that
/// differs between ranks, never a rank left alone in the gather or a silently wrong result.
///
/// # Errors
/// `check`'s error on this rank; [`RuntimeError::RanksDisagree`] when another rank's check
/// failed or its facts differ.
pub fn agree_before_gather(
    what: &str,
    facts: Vec<(&'static str, String)>,
    check: Result<(), RuntimeError>,
) -> Result<(), RuntimeError> {
    #[cfg(feature = "mpi")]
    if world().1 > 1 {
        let mut stance = crate::agree::Stance::at(format!("a call of {what}"))
            .failed(check.as_ref().err().map(ToString::to_string));
        for (k, v) in facts {
            stance = stance.fact(k, v);
        }
        let timeout = crate::RunOptions::from_env()?.wait_timeout;
        let agreed = crate::mpi_rt::agree(&stance, timeout);
        check?;
        return agreed;
    }
    let _ = (what, facts);
    check
}

/// Gathers each rank's share `local` of a plane of `partition.n` values into `out`, in
/// sample order, over MPI (an all-gather-varcount), after the ranks agree on the partition.
///
/// # Errors
/// [`RuntimeError::Plan`] naming the `mpi` feature in a build without it, or when `local`
/// or `out` does not hold this rank's share or the whole plane; the agreement's errors.
pub fn allgather_plane_into(
    local: &[f64],
    partition: &Partition,
    out: &mut [f64],
) -> Result<(), RuntimeError> {
    let (me, size) = world();
    if !cfg!(feature = "mpi") {
        return Err(no_mpi("RankPartition::allgather_plane_into"));
    }
    let check = if partition.parts != size
        || local.len() != partition.share(me).len()
        || out.len() != partition.n
    {
        Err(RuntimeError::Plan(format!(
            "RankPartition::allgather_plane_into: rank {me} of {size} holds {} values (its share of {partition:?} is {}) and an output of {} values (expected {})",
            local.len(),
            partition.share(me).len(),
            out.len(),
            partition.n
        )))
    } else {
        Ok(())
    };
    agree_before_gather(
        "RankPartition::allgather_plane_into",
        partition_facts(partition),
        check,
    )?;
    let counts: Vec<usize> = (0..size).map(|q| partition.share(q).len()).collect();
    #[cfg(feature = "mpi")]
    crate::mpi_rt::allgather_f64_into(local, &counts, out);
    #[cfg(not(feature = "mpi"))]
    let _ = counts;
    Ok(())
}
