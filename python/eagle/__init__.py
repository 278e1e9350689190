"""eagle from Python: execution plans over deployed plugins, the RankPartition world, and host
programs deployed as plugins.

    import eagle
    import eagle.exec as eexec
    from eagle import plan as eplan

    plugin = eagle.load_plugin("path/to/plugin")        # a directory eagle deployed
    p = eplan.plan(plugin, structure=eexec.RankPartition, inner=eexec.DeviceKernel)
    rank, size = eexec.RankPartition.world()
    out = p.run(device=rank, x=x)                       # every rank returns the whole plane

Errors are ``eagle.EagleError`` (a ``RuntimeError``) with eagle's message, ``TypeError`` for a
plane or argument of the wrong dtype and ``ValueError`` for one of the wrong layout or shape.
"""

from ._eagle import EagleError, HostProgram, Plugin, Session, load_host, load_plugin
from . import exec, plan  # noqa: F401  (eagle.exec, eagle.plan)

__all__ = [
    "EagleError",
    "HostProgram",
    "Plugin",
    "Session",
    "exec",
    "load_host",
    "load_plugin",
    "plan",
]
