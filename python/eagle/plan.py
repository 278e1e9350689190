"""Execution plans over deployed sample kernels (``eagle.load_plugin``)."""

from . import _eagle
from .exec import HostTeam, structure_name

Partition = _eagle.Partition
Plan = _eagle.Plan


def plan(plugin, structure=HostTeam, inner=HostTeam, threads=None, simulated_ranks=None,
         platform="sim"):
    """The plan of ``plugin`` with ``structure`` (``eagle.exec.HostTeam``, ``DeviceKernel`` or
    ``RankPartition``) whose ranks' shares run through ``inner``. ``threads`` sets HostTeam's
    worker count; ``simulated_ranks`` runs a RankPartition over that many ranks in this
    process instead of MPI; ``platform`` is where DeviceKernel runs (``sim``, ``cpu``,
    ``cuda``).

    ``Plan.run(device=0, **planes)`` takes the input planes by name (numpy arrays of the
    kernel's dtypes) and returns the output plane (a dict of them when the kernel has several).
    An output may also be passed: float64 and C-contiguous, written in place; any other is
    refused by name before anything runs."""
    return _eagle.plan(plugin, structure_name(structure), structure_name(inner), threads,
                       simulated_ranks, platform)


__all__ = ["Partition", "Plan", "plan"]
