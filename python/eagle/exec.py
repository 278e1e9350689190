"""Structures of an execution plan: ``HostTeam`` (CPU threads, the default), ``DeviceKernel``
(one device runs all of its samples) and ``RankPartition`` (MPI ranks split the samples).

``RankPartition`` needs the MPI extension (the ``mpi`` feature of eagle's Python package):
without it ``RankPartition.available`` is ``False`` and every other ``RankPartition`` call
raises ``RuntimeError`` naming the switch.
"""

from . import _eagle


class HostTeam:
    """CPU threads over the samples (the default)."""


class DeviceKernel:
    """One device runs all of its samples (``device=`` of ``Plan.run``)."""


class _Available(type):
    @property
    def available(cls):
        """Whether this build has the MPI extension."""
        return _eagle.rank_partition_available()


class RankPartition(metaclass=_Available):
    """MPI ranks split the samples; every rank ends with the whole output, bit for bit what
    one rank computes."""

    @staticmethod
    def world():
        """``(rank, size)`` of this process: ``(0, 1)`` without ``mpirun``."""
        return _eagle.rank_partition_world()

    @staticmethod
    def local(partition):
        """This rank's share of ``partition`` (an ``eagle.plan.Partition``), as a ``range``."""
        return _eagle.rank_partition_local(partition)

    @staticmethod
    def allgather_plane(local, partition):
        """Every rank's share of a float64 plane (``local``: this rank's values, in the order
        of ``RankPartition.local(partition)``), gathered in sample order on every rank."""
        return _eagle.rank_partition_allgather_plane(local, partition)

    @staticmethod
    def allgather_fold(local, rows, cells, op="sum"):
        """Every rank's row partials (``local``: ``cells`` float64 values per row of this rank's
        share of ``rows``) folded in row order with ``op`` (``sum``, ``times`` or ``max``): the
        same ``cells`` values on every rank."""
        return _eagle.rank_partition_allgather_fold(local, rows, cells, op)


def structure_name(s):
    """The name of structure ``s`` (one of the classes above, or its name)."""
    if isinstance(s, str):
        return s
    if s in (HostTeam, DeviceKernel, RankPartition):
        return s.__name__
    raise ValueError(
        f"structure {s!r}: expected eagle.exec.HostTeam, DeviceKernel or RankPartition"
    )
