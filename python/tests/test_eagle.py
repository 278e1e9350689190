"""eagle's Python package: plans over deployed plugins, RankPartition, host programs, errors.

Runs alone (`python -m pytest python/tests`) and under `mpirun -np P` with the MPI extension:
every rank runs every test in the same order, and each checks the same values.
"""

import os

import numpy as np
import pytest

import eagle
import eagle.exec as eexec
from eagle import plan as eplan

N = 1000


def world():
    """(rank, size) of this process, (0, 1) without the MPI extension."""
    return eexec.RankPartition.world() if eexec.RankPartition.available else (0, 1)


def launched():
    """Whether mpirun started this process: a session's world size is then the job's."""
    return any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"))


def session_devices():
    """Device lists to launch host programs with: the job's ranks under mpirun, else several
    world sizes (the runner's `-d` text, and a count)."""
    if launched():
        return [",".join(str(d) for d in range(world()[1]))]
    return ["0", "0,1", "0,1,2,3", 3]


def samples():
    return np.array([(i * 0.618033988749895) % 1.0 for i in range(N)], dtype=np.float64)


def test_a_sample_local_plan_gives_numpys_bits(plugins):
    plugin = eagle.load_plugin(plugins / "kernels", "affine")
    assert plugin.name == "affine" and plugin.category == "sample_local"
    assert plugin.signature == [("x", "f64", ["N"], False), ("y", "f64", ["N"], True)]
    x = samples()
    y = eplan.plan(plugin).run(x=x)
    assert y.dtype == np.float64 and y.shape == (N,)
    assert y.tobytes() == (x * 2.0 + 1.0).tobytes()


def test_a_scalar_uniform_is_a_python_number(plugins):
    plugin = eagle.load_plugin(plugins / "kernels", "axpy")
    assert plugin.signature[0] == ("a", "f64", [], False)
    x = samples()
    y0 = np.arange(N, dtype=np.float64) * 0.5
    p = eplan.plan(plugin)
    y = y0.copy()
    p.run(a=2.5, x=x, y=y)
    assert y.tobytes() == (2.5 * x + y0).tobytes()
    y = y0.copy()
    p.run(a=-3, x=x, y=y)  # an int is taken as the f64 it equals
    assert y.tobytes() == (-3.0 * x + y0).tobytes()
    with pytest.raises(ValueError, match=r"uniform `a`: missing; pass its value as `a=<f64>`"):
        p.run(x=x)
    with pytest.raises(TypeError, match=r"uniform `a`: expected one f64 value \(a Python number\), found <class 'str'>"):
        p.run(a="2", x=x)


def test_a_mapreduce_plan_counts_exactly(plugins):
    plugin = eagle.load_plugin(plugins / "kernels", "histogram")
    x = samples()
    hist = eplan.plan(plugin, threads=3).run(x=x)
    want = np.zeros(16)
    for v in x:
        want[min(int(v * 16.0), 15)] += 1.0
    assert hist.tolist() == want.tolist()
    assert hist.sum() == N


def test_every_structure_gives_the_same_bits(plugins):
    plugin = eagle.load_plugin(plugins / "kernels", "smooth")
    x = samples()
    base = eplan.plan(plugin, eexec.HostTeam).run(x=x)
    assert base[5] == (x[4] + x[5] + x[6]) / 3.0
    for structure, inner, ranks in [
        (eexec.DeviceKernel, eexec.HostTeam, None),
        (eexec.RankPartition, eexec.HostTeam, 3),
        (eexec.RankPartition, eexec.DeviceKernel, 2),
    ]:
        p = eplan.plan(plugin, structure=structure, inner=inner, simulated_ranks=ranks)
        assert p.run(device=0, x=x).tobytes() == base.tobytes(), (structure, inner)


def test_a_passed_output_is_written_in_place(plugins):
    plugin = eagle.load_plugin(plugins / "kernels", "affine")
    x = samples()
    y = np.full(N, 7.0)
    out = eplan.plan(plugin).run(x=x, y=y)
    assert out is y
    assert y.tobytes() == (x * 2.0 + 1.0).tobytes()


def test_bad_planes_are_refused_by_name_before_anything_runs(plugins):
    p = eplan.plan(eagle.load_plugin(plugins / "kernels", "affine"))
    x = samples()
    y = np.zeros(N, dtype=np.float32)
    with pytest.raises(TypeError, match=r"plane `y`: outputs must be numpy arrays of float64, found float32"):
        p.run(x=x, y=y)
    y = np.zeros(2 * N)[::2]
    with pytest.raises(ValueError, match=r"plane `y`: outputs must be C-contiguous"):
        p.run(x=x, y=y)
    with pytest.raises(TypeError, match=r"plane `x`: expected a numpy array of f64, found int64"):
        p.run(x=np.arange(N))
    with pytest.raises(ValueError, match=r"plane `x`: missing"):
        p.run()
    with pytest.raises(ValueError, match=r'plane `z`: the kernel has no such plane; its planes are \["x", "y"\]'):
        p.run(x=x, z=x)


def test_plugin_errors_are_eagle_errors_with_eagles_message(plugins, tmp_path):
    with pytest.raises(eagle.EagleError, match=r"plugin: cannot read"):
        eagle.load_plugin(tmp_path / "nothing-here")
    with pytest.raises(eagle.EagleError, match=r"has no kernel `nope`"):
        eagle.load_plugin(plugins / "kernels", "nope")
    with pytest.raises(eagle.EagleError, match=r'holds the kernels \["affine", "smooth", "histogram", "axpy"\]'):
        eagle.load_plugin(plugins / "kernels")
    assert issubclass(eagle.EagleError, RuntimeError)
    with pytest.raises(ValueError, match=r"structure `Ring`"):
        eplan.plan(eagle.load_plugin(plugins / "kernels", "affine"), structure="Ring")


def test_partitions_split_as_the_seed_says():
    p = eplan.Partition(10, 3)
    assert [p.share(r) for r in range(3)] == [range(0, 4), range(4, 7), range(7, 10)]
    with pytest.raises(ValueError, match=r"argument `parts`"):
        eplan.Partition(10, 0)


def test_rank_partition_without_the_mpi_extension_names_the_switch(plugins):
    if eexec.RankPartition.available:
        rank, size = eexec.RankPartition.world()
        assert 0 <= rank < size
        return
    for call in [
        lambda: eexec.RankPartition.world(),
        lambda: eexec.RankPartition.local(eplan.Partition(10, 1)),
        lambda: eexec.RankPartition.allgather_plane(np.zeros(10), eplan.Partition(10, 1)),
        lambda: eexec.RankPartition.allgather_fold(np.zeros(16), eplan.Partition(1, 1), 16),
        lambda: eplan.plan(
            eagle.load_plugin(plugins / "kernels", "affine"), structure=eexec.RankPartition
        ).run(x=samples()),
    ]:
        with pytest.raises(RuntimeError, match=r"built without the MPI extension: rebuild eagle's Python package with the `mpi` feature"):
            call()


def test_rank_partition_over_the_world_returns_the_whole_plane_on_every_rank(plugins):
    if not eexec.RankPartition.available:
        pytest.skip("needs the MPI extension (maturin develop --features mpi)")
    rank, size = eexec.RankPartition.world()
    plugin = eagle.load_plugin(plugins / "kernels", "smooth")
    x = samples()
    want = eplan.plan(plugin).run(x=x)
    got = eplan.plan(plugin, structure=eexec.RankPartition, inner=eexec.HostTeam).run(
        device=0, x=x
    )
    assert got.tobytes() == want.tobytes()
    part = eplan.Partition(N, size)
    mine = eexec.RankPartition.local(part)
    assert mine == part.share(rank)
    whole = eexec.RankPartition.allgather_plane(x[mine.start:mine.stop], part)
    assert whole.tobytes() == x.tobytes()
    rows = eplan.Partition(4, size)
    local = np.array([float(r) for r in rows.share(rank) for _ in range(2)])
    assert eexec.RankPartition.allgather_fold(local, rows, 2, "sum").tolist() == [6.0, 6.0]


def test_a_host_program_from_a_plugin_runs_at_the_session_world_size(plugins):
    prog = eagle.load_host(plugins / "allreduce")
    assert prog.name == "builtin_ring"
    assert [p[0] for p in prog.params] == ["x", "y"]
    for devices in session_devices():
        s = eagle.Session(devices)
        p = s.world_size
        # Small whole numbers: every summation order gives the same sum.
        x = np.arange(p * 1000, dtype=np.float32).reshape(p, 1000) % 7
        y = np.zeros((p, 1000), dtype=np.float32)
        seconds = s.launch(prog, x, y)
        assert seconds >= 0.0
        for r in range(p):
            assert y[r].tolist() == x.sum(axis=0).tolist(), (devices, r)


def test_host_arguments_are_checked_by_name(plugins):
    prog = eagle.load_host(plugins / "allreduce", "builtin_ring")
    s = eagle.Session(session_devices()[-1])
    p = s.world_size
    x = np.zeros((p, 1000), dtype=np.float32)
    with pytest.raises(TypeError, match=r'`builtin_ring` takes 2 arguments \["x", "y"\], found 1'):
        s.launch(prog, x)
    with pytest.raises(TypeError, match=r"argument `y`: expected a numpy array of f32, found float64"):
        s.launch(prog, x, np.zeros((p, 1000)))
    with pytest.raises(eagle.EagleError, match=r"argument `x`"):
        s.launch(prog, np.zeros((p, 999), dtype=np.float32), np.zeros((p, 999), dtype=np.float32))
    with pytest.raises(ValueError, match=r"argument `devices`"):
        eagle.Session("0,x")


def test_read_only_and_byte_swapped_arguments_are_refused(plugins):
    p = eplan.plan(eagle.load_plugin(plugins / "kernels", "affine"))
    y = np.zeros(N)
    y.flags.writeable = False
    with pytest.raises(ValueError, match=r"plane `y`: outputs are written in place, but this array is read-only"):
        p.run(x=samples(), y=y)
    assert not y.any()
    prog = eagle.load_host(plugins / "allreduce")
    s = eagle.Session(session_devices()[-1])
    x = np.ones((s.world_size, 1000), dtype=">f4")
    with pytest.raises(TypeError, match=r"argument `x`: expected f32 in this machine's byte order"):
        s.launch(prog, x, np.zeros((s.world_size, 1000), dtype=np.float32))
    with pytest.raises(ValueError, match=r"argument `n`: expected at most"):
        eplan.Partition(2**64 - 1, 3)
    with pytest.raises(eagle.EagleError, match=r"holds no sample kernel, only the host programs \[\"builtin_ring\"\]: load those with `eagle.load_host`"):
        eagle.load_plugin(plugins / "allreduce")


def test_a_forked_child_runs_plans_with_its_own_workers(plugins):
    if launched():
        pytest.skip("fork under mpirun is the MPI library's business")
    import multiprocessing

    p = eplan.plan(eagle.load_plugin(plugins / "kernels", "histogram"), threads=2)
    want = p.run(x=samples())
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_histogram_in_child, (str(plugins),)).get(timeout=60)
    assert got == want.tolist()


def _histogram_in_child(plugins):
    p = eplan.plan(eagle.load_plugin(plugins + "/kernels", "histogram"), threads=2)
    return p.run(x=samples()).tolist()


def test_gathers_refuse_what_differs_between_ranks(plugins):
    if not eexec.RankPartition.available:
        pytest.skip("needs the MPI extension")
    rank, size = eexec.RankPartition.world()
    with pytest.raises(eagle.EagleError, match=r"`land` is a reduction of bools"):
        eexec.RankPartition.allgather_fold(np.zeros(2 * len(eplan.Partition(4, size).share(rank))), eplan.Partition(4, size), 2, "land")
    if size < 2:
        return
    # Rank 1 passes another partition: an error on every rank, not a wrong plane.
    part = eplan.Partition(10 + (rank == 1), size)
    mine = eexec.RankPartition.local(part)
    with pytest.raises(eagle.EagleError, match=r"the partition"):
        eexec.RankPartition.allgather_plane(np.zeros(len(mine)), part)
