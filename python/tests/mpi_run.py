"""The multi-GPU page's snippet as a script: `python mpi_run.py PLUGINS` and
`mpirun -np P python mpi_run.py PLUGINS` print the same digest of the same bits.

PLUGINS is a directory `cargo run --release --example deploy_plugins -- PLUGINS` wrote.
"""

import hashlib
import sys

import numpy as np

import eagle
import eagle.exec as eexec
from eagle import plan as eplan

plugin = eagle.load_plugin(sys.argv[1] + "/kernels", "smooth")
x = np.array([(i * 0.618033988749895) % 1.0 for i in range(100_003)], dtype=np.float64)
planes = {"x": x}
if eexec.RankPartition.available:
    p = eplan.plan(plugin, structure=eexec.RankPartition, inner=eexec.HostTeam)
    rank, size = eexec.RankPartition.world()
else:
    p = eplan.plan(plugin)
    rank, size = 0, 1
out = p.run(device=0, **planes)  # every rank returns the whole plane
digest = hashlib.sha256(out.tobytes()).hexdigest()[:16]
# One write per line (print() writes the text and the newline apart when Python runs
# unbuffered), so that mpirun's merged output keeps every rank's line whole.
sys.stdout.write(f"rank {rank} of {size}: {digest}\n")
sys.stdout.flush()
