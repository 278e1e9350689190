"""The mpi4py + numpy peer of eagle's `tp_ffn` under MPI (issue 40, item 4), for
`cargo bench --bench peers --features mpi`.

Each of the P ranks holds x (`[T, D]`), its column block of W1 (`[D, F / P]`) and its row block
of W2 (`[F / P, D]`), computes its partial `gelu(x W1_r) W2_r` with numpy (OpenBLAS, one
thread) and sums the partials with `MPI_Allreduce` (`comm.Allreduce`, `MPI.SUM`), as a user of
mpi4py would write the program eagle's `examples/tp_ffn.rs` computes. Timed per call: one
untimed call, a barrier, then 7 rounds of `reps` calls, each round's mean taken on rank 0;
rank 0 prints {"tp_ffn_mpi": [min, median, max]} in milliseconds.

    mpirun -np 2 python3 benches/tp_ffn_mpi.py
"""

import json
import time

import numpy as np
from mpi4py import MPI

T, D, F = 64, 256, 1024

comm = MPI.COMM_WORLD
p, me = comm.Get_size(), comm.Get_rank()
rng = np.random.default_rng(7 + me)
x = rng.uniform(-1.0, 1.0, size=(T, D)).astype(np.float32)
w1 = rng.uniform(-1.0, 1.0, size=(D, F // p)).astype(np.float32)
w2 = rng.uniform(-1.0, 1.0, size=(F // p, D)).astype(np.float32)
y = np.empty((T, D), dtype=np.float32)


def gelu(v):
    inner = (v + v * v * v * np.float32(0.044715)) * np.float32(0.7978845608028654)
    return v * np.float32(0.5) * (np.tanh(inner) + np.float32(1.0))


def tp_ffn():
    part = gelu(x @ w1) @ w2
    comm.Allreduce(part, y, op=MPI.SUM)


def main():
    reps = 20
    tp_ffn()
    comm.Barrier()
    rounds = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(reps):
            tp_ffn()
        rounds.append((time.perf_counter() - t0) / reps * 1e3)
    rounds.sort()
    if me == 0:
        print(json.dumps({"tp_ffn_mpi": [rounds[0], rounds[3], rounds[6]]}))


if __name__ == "__main__":
    main()
