//! Rank groups: `group(ctx, [{ NR / TP }, TP], axis)` splits the world into the rows (axis 1,
//! the TP groups) or the columns (axis 0, the DP groups) of a process grid; `rank`, `nranks`,
//! `barrier`, `world_rank` and the built-in collectives act within the group. Checked against
//! plain-Rust goldens at every P from 1 to 8 and every TP that divides it, on `sim` (race
//! detector on) and in the CUDA emulation; a grid that does not hold the world is refused
//! before anything runs.
use eagle::prelude::*;
use rand::{Rng, SeedableRng};

#[cfg(feature = "cuda")]
mod emulation;

const NR: Dim = dynamic!("NR");
const TP: Dim = dynamic!("TP");
const N: usize = 5;

#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn grid_d(
    ctx: Ctx,
    x: Tensor<f32, N>,
    xr: Tensor<f32, 1, N>,
    shape: Tensor<u64, TP>,
    ids: Out<Tensor<u64, 6>>,
    tp_sum: Out<Tensor<f32, N>>,
    dp_max: Out<Tensor<f32, N>>,
    tp_twice: Out<Tensor<f32, N>>,
    rows: Out<Tensor<f32, TP, N>>,
    from_prev: Out<Tensor<f32, N>>,
    a: Window<f32, N>,
    b: Window<f32, N>,
    c: Window<f32, N>,
    d: Window<f32, N>,
    e: Window<f32, N>,
    g: Window<f32, TP, N>,
) {
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    let dp = group(ctx, [{ NR / TP }, TP], 0);
    ids[0] = rank(tp) as u64;
    ids[1] = nranks(tp) as u64;
    ids[2] = rank(dp) as u64;
    ids[3] = nranks(dp) as u64;
    ids[4] = world_rank(tp, 0) as u64;
    ids[5] = world_rank(dp, nranks(dp) - 1) as u64;
    put(a, rank(ctx), x);
    allreduce(tp, a, b, Sum, TwoPhase);
    allreduce(dp, a, c, Max, Ring);
    allreduce(tp, b, d, Sum, Mesh);
    allgather(tp, xr, g);
    put(e, world_rank(tp, (rank(tp) + 1) % nranks(tp)), x);
    barrier(tp);
    get(tp_sum, rank(ctx), b);
    get(dp_max, rank(ctx), c);
    get(tp_twice, rank(ctx), d);
    get(rows, rank(ctx), g);
    get(from_prev, rank(ctx), e);
}

#[eagle::host]
#[allow(clippy::too_many_arguments)]
pub fn grid(
    x: Tensor<f32, NR, N>,
    xr: Tensor<f32, NR, 1, N>,
    shape: Tensor<u64, NR, TP>,
    ids: Out<Tensor<u64, NR, 6>>,
    tp_sum: Out<Tensor<f32, NR, N>>,
    dp_max: Out<Tensor<f32, NR, N>>,
    tp_twice: Out<Tensor<f32, NR, N>>,
    rows: Out<Tensor<f32, NR, TP, N>>,
    from_prev: Out<Tensor<f32, NR, N>>,
) {
    let a = alloc_window_buffer([N], f32);
    let b = alloc_window_buffer([N], f32);
    let c = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    let e = alloc_window_buffer([N], f32);
    let g = alloc_window_buffer([TP, N], f32);
    for r in 0..world_size() {
        grid_d(
            x[r],
            xr[r],
            shape[r],
            ids[r],
            tp_sum[r],
            dp_max[r],
            tp_twice[r],
            rows[r],
            from_prev[r],
            window(a, [N], f32),
            window(b, [N], f32),
            window(c, [N], f32),
            window(d, [N], f32),
            window(e, [N], f32),
            window(g, [TP, N], f32),
            device = r,
        );
    }
}

/// The outputs of one launch, per rank.
#[derive(Debug)]
struct Got {
    ids: Vec<u64>,
    tp_sum: Vec<f32>,
    dp_max: Vec<f32>,
    tp_twice: Vec<f32>,
    rows: Vec<f32>,
    from_prev: Vec<f32>,
}

fn inputs(p: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..p * N).map(|_| rng.gen_range(-4.0f32..4.0)).collect()
}

fn run(s: &Session, t: usize, x: &[f32]) -> eagle::Result<Got> {
    let p = s.world_size();
    let xs = Tensor::from_vec(&[p, N], x.to_vec())?;
    let xr = Tensor::from_vec(&[p, 1, N], x.to_vec())?;
    let shape = Tensor::<u64>::zeros(&[p, t]);
    let mut ids = Tensor::<u64>::zeros(&[p, 6]);
    let mut tp_sum = Tensor::<f32>::zeros(&[p, N]);
    let mut dp_max = Tensor::<f32>::zeros(&[p, N]);
    let mut tp_twice = Tensor::<f32>::zeros(&[p, N]);
    let mut from_prev = Tensor::<f32>::zeros(&[p, N]);
    let mut rows = Tensor::<f32>::zeros(&[p, t, N]);
    grid.launch(
        s,
        &xs,
        &xr,
        &shape,
        &mut ids,
        &mut tp_sum,
        &mut dp_max,
        &mut tp_twice,
        &mut rows,
        &mut from_prev,
    )?;
    Ok(Got {
        ids: ids.data().to_vec(),
        tp_sum: tp_sum.data().to_vec(),
        dp_max: dp_max.data().to_vec(),
        tp_twice: tp_twice.data().to_vec(),
        rows: rows.data().to_vec(),
        from_prev: from_prev.data().to_vec(),
    })
}

/// The golden, in the documented orders: the TP group of rank `r` is `r - r % t ..` (`t`
/// ranks), its DP group `r % t, r % t + t, ...`; sums fold left in group-rank order.
fn check(got: &Got, p: usize, t: usize, x: &[f32]) {
    let row = |r: usize| &x[r * N..(r + 1) * N];
    for r in 0..p {
        let (i, j) = (r / t, r % t);
        let dp = p / t;
        let at = |v: &[f32]| v[r * N..(r + 1) * N].to_vec();
        let ids = &got.ids[r * 6..(r + 1) * 6];
        let want_ids = [j, t, i, dp, i * t, (dp - 1) * t + j].map(|v| v as u64);
        assert_eq!(ids, want_ids, "P={p} TP={t} rank {r}: ids");
        let fold = |f: &dyn Fn(usize) -> Vec<f32>, n: usize, op: &dyn Fn(f32, f32) -> f32| {
            let mut acc = f(0);
            for k in 1..n {
                acc = acc.iter().zip(f(k)).map(|(a, b)| op(*a, b)).collect();
            }
            acc
        };
        let sum = fold(&|k| row(i * t + k).to_vec(), t, &|a, b| a + b);
        let max = fold(&|k| row(k * t + j).to_vec(), dp, &f32::max);
        let twice = fold(&|_| sum.clone(), t, &|a, b| a + b);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&at(&got.tp_sum)),
            bits(&sum),
            "P={p} TP={t} rank {r}: tp_sum"
        );
        assert_eq!(
            bits(&at(&got.dp_max)),
            bits(&max),
            "P={p} TP={t} rank {r}: dp_max"
        );
        assert_eq!(
            bits(&at(&got.tp_twice)),
            bits(&twice),
            "P={p} TP={t} rank {r}: tp_twice"
        );
        let rows: Vec<f32> = (0..t).flat_map(|k| row(i * t + k).to_vec()).collect();
        assert_eq!(
            bits(&got.rows[r * t * N..(r + 1) * t * N]),
            bits(&rows),
            "P={p} TP={t} rank {r}: allgather rows"
        );
        let prev = i * t + (j + t - 1) % t;
        assert_eq!(
            bits(&at(&got.from_prev)),
            bits(row(prev)),
            "P={p} TP={t} rank {r}: put to the next group rank"
        );
    }
}

#[test]
fn group_collectives_act_within_each_row_and_column_of_the_grid_at_every_p() {
    for p in 1..=8 {
        for t in (1..=p).filter(|t| p % t == 0) {
            let s = Session::sim(p).unwrap();
            let x = inputs(p, (p * 10 + t) as u64);
            let got = run(&s, t, &x).unwrap_or_else(|e| panic!("P={p} TP={t}: {e}"));
            check(&got, p, t, &x);
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn group_collectives_in_the_emulation_equal_the_golden() {
    emulation::cxx();
    for (p, t) in [(4, 2), (6, 3)] {
        let s = Session::cuda_emulated(vec![0; p]).unwrap();
        let x = inputs(p, 99);
        check(&run(&s, t, &x).unwrap(), p, t, &x);
    }
    // A group in a compute kernel that only the first row calls.
    let s = Session::cuda_emulated(vec![0; 6]).unwrap();
    let mut out = Tensor::<u64>::zeros(&[6, 1]);
    outer
        .launch(&s, &Tensor::<u64>::zeros(&[3]), &mut out)
        .unwrap();
    assert_eq!(out.data(), [6, 6, 6, 0, 0, 0]);
}

/// A grid of `[2, 3]` ranks, whatever the world size.
#[eagle::kernel(device)]
pub fn fixed_grid_d(ctx: Ctx, k: Tensor<u64, 1>, out: Out<Tensor<u64, 2>>) {
    let g = group(ctx, [2, 3], 1);
    out[0] = rank(g) as u64;
    out[1] = world_rank(g, k[0] as usize) as u64;
}

#[eagle::host]
pub fn fixed_grid(k: Tensor<u64, NR, 1>, out: Out<Tensor<u64, NR, 2>>) {
    for r in 0..world_size() {
        fixed_grid_d(k[r], out[r], device = r);
    }
}

/// The 1-based line of this file that holds `needle`.
fn line_of(needle: &str) -> u32 {
    let text = include_str!("groups.rs");
    let i = text.lines().position(|l| l.contains(needle)).unwrap();
    i as u32 + 1
}

fn fixed(p: usize, k: u64) -> eagle::Result<Vec<u64>> {
    let s = Session::sim(p)?;
    let ks = Tensor::from_vec(&[p, 1], vec![k; p])?;
    let mut out = Tensor::<u64>::zeros(&[p, 2]);
    fixed_grid.launch(&s, &ks, &mut out)?;
    Ok(out.data().to_vec())
}

#[test]
fn a_grid_that_does_not_hold_the_world_is_refused_before_anything_runs() {
    use eagle::codegen::{CodegenError, SpecializeError};
    for p in [4, 8] {
        let e = fixed(p, 0).unwrap_err();
        let eagle::Error::Codegen(CodegenError::Specialize(s)) = &e else {
            panic!("P={p}: {e}");
        };
        let SpecializeError::Group {
            function,
            op,
            loc,
            message,
        } = &**s
        else {
            panic!("P={p}: {e}");
        };
        assert_eq!((function.as_str(), op.as_str()), ("fixed_grid_d", "group"));
        assert_eq!(
            loc.as_ref().map(|l| l.line),
            Some(line_of("let g = group(ctx, [2, 3], 1);")),
            "{e}"
        );
        assert_eq!(
            message,
            &format!("the grid [2, 3] holds 6 ranks but the world has P = {p}; give it extents that multiply to P, for example `[{{ NR / TP }}, TP]` with `NR = dynamic!(\"NR\")` and `TP` a dim bound at launch")
        );
    }
    // At P = 6 it holds the world: rank r is (r / 3, r % 3); world_rank(g, 2) is its row's last.
    let got = fixed(6, 2).unwrap();
    assert_eq!(got, [0, 2, 1, 2, 2, 2, 0, 5, 1, 5, 2, 5]);
}

/// The failing rank's place in a `[rows, cols]` grid, as a run-time error of a program with
/// rank groups ends (`(rank 5 is at [1, 1] of the rank grid [2, 4])`), read from the error's
/// `rank N failed` (issue 39, item 1: errors name the global rank and the group ranks).
fn place_of(e: &str, rows: u64, cols: u64) -> String {
    let r: u64 = e
        .strip_prefix("rank ")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no failing rank in: {e}"));
    format!(
        "(rank {r} is at [{}, {}] of the rank grid [{rows}, {cols}])",
        r / cols,
        r % cols
    )
}

#[test]
fn world_rank_past_the_group_stops_the_rank_with_the_bound() {
    let e = fixed(6, 3).unwrap_err().to_string();
    assert!(
        e.contains("function `fixed_grid_d`, op `trap_if ")
            && e.contains(&format!(
            "tests/groups.rs:{}:",
            line_of("out[1] = world_rank(g, k[0] as usize)")
        ))
            && e.ends_with(&format!("`world_rank` of group rank 3, but the group's ranks are those below 3; reduce the rank modulo `nranks(group)` {}", place_of(&e, 2, 3))),
        "{e}"
    );
}

#[test]
fn a_grid_extent_that_does_not_divide_the_world_is_refused() {
    let s = Session::sim(4).unwrap();
    let x = inputs(4, 1);
    let e = run(&s, 3, &x).unwrap_err().to_string();
    assert_eq!(
        e,
        "function `grid_d`, op `%17 = dim (NR / TP) : index` (at tests/groups.rs:37:14): the derived dimension `(NR / TP)` has no value at these bindings: `(NR / TP)` is 4 / 3, which is not exact; choose extents that divide"
    );
    // TP = 0 (an empty argument binds it): a division by zero, said so.
    let e = run(&s, 0, &x).unwrap_err().to_string();
    assert!(
        e.ends_with(
            "`(NR / TP)` is 4 / 0, a division by zero; bind the divisor to a positive extent"
        ),
        "{e}"
    );
}

/// A broadcast within each TP group from the root `root[0]` (a group rank), and
/// `world_rank(ctx, q[0])` of the world's context.
#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn bcast_d(
    ctx: Ctx,
    root: Tensor<u64, 1>,
    q: Tensor<u64, 1>,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    me: Out<Tensor<u64, 1>>,
    w: Window<f32, N>,
    d: Window<f32, N>,
) {
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    me[0] = world_rank(ctx, q[0] as usize) as u64;
    put(w, rank(ctx), x);
    broadcast(tp, w, d, root[0] as usize);
    get(y, rank(ctx), d);
}

#[eagle::host]
pub fn bcast(
    root: Tensor<u64, NR, 1>,
    q: Tensor<u64, NR, 1>,
    x: Tensor<f32, NR, N>,
    shape: Tensor<u64, TP>,
    y: Out<Tensor<f32, NR, N>>,
    me: Out<Tensor<u64, NR, 1>>,
) {
    let w = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        bcast_d(
            root[r],
            q[r],
            x[r],
            y[r],
            me[r],
            window(w, [N], f32),
            window(d, [N], f32),
            device = r,
        );
    }
}

type Bcast = (Vec<f32>, Vec<f32>, Vec<u64>);

fn run_bcast(p: usize, t: usize, root: u64, q: u64) -> eagle::Result<Bcast> {
    let s = Session::sim(p)?;
    let x = inputs(p, 5);
    let xs = Tensor::from_vec(&[p, N], x.clone())?;
    let roots = Tensor::from_vec(&[p, 1], vec![root; p])?;
    let qs = Tensor::from_vec(&[p, 1], vec![q; p])?;
    let shape = Tensor::<u64>::zeros(&[t]);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    let mut me = Tensor::<u64>::zeros(&[p, 1]);
    bcast.launch(&s, &roots, &qs, &xs, &shape, &mut y, &mut me)?;
    Ok((x, y.data().to_vec(), me.data().to_vec()))
}

#[test]
fn a_broadcast_within_a_group_takes_its_root_as_a_group_rank_and_checks_it() {
    // P = 8, TP = 2: the root 1 of each TP group is world rank 2i + 1.
    let (x, y, me) = run_bcast(8, 2, 1, 6).unwrap();
    for r in 0..8 {
        let root = (r / 2) * 2 + 1;
        assert_eq!(
            y[r * N..(r + 1) * N],
            x[root * N..(root + 1) * N],
            "rank {r}"
        );
    }
    assert_eq!(me, vec![6; 8], "world_rank(ctx, q) is q");
    // A root past the group's 2 ranks stops the rank before any row moves, never reads
    // another group's row (1 << 63 is past it too, as an unsigned index).
    for root in [3u64, 1 << 63] {
        let e = run_bcast(8, 2, root, 0).unwrap_err().to_string();
        let shown = root as i64;
        assert!(
            e.contains(", group_root` (at tests/groups.rs:")
                && e.ends_with(&format!("`broadcast` within a group from root {shown}, but the group's ranks are those below 2; the root is a group rank: give one below `nranks(group)` {}", place_of(&e, 4, 2))),
            "root {root}: {e}"
        );
    }
}

#[test]
fn world_rank_of_the_world_is_the_rank_checked_against_p() {
    let e = run_bcast(4, 2, 0, 4).unwrap_err().to_string();
    assert!(
        e.contains(", world_rank` (at tests/groups.rs:")
            && e.ends_with(&format!("`world_rank` of rank 4, but the world's ranks are those below 4; reduce the rank modulo `nranks(ctx)` {}", place_of(&e, 2, 2))),
        "{e}"
    );
    // And a group rank of 2^63 or more is past the group (it was read as negative).
    let e = fixed(6, 1 << 63).unwrap_err().to_string();
    assert!(e.contains(", group_rank` (at tests/groups.rs:"), "{e}");
}

/// A group in a compute kernel, called by only the first row of the grid: its barriers and
/// collectives use the calling program's signal window (never the world's barrier).
#[eagle::kernel]
pub fn inner(ctx: Ctx, a: Window<u64, 1>, b: Window<u64, 1>) {
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    allreduce(tp, a, b, Sum, TwoPhase);
    barrier(tp);
}

#[eagle::kernel(device)]
pub fn outer_d(ctx: Ctx, out: Out<Tensor<u64, 1>>, a: Window<u64, 1>, b: Window<u64, 1>) {
    let dp = group(ctx, [{ NR / TP }, TP], 0);
    a[0] = rank(ctx) as u64 + 1;
    barrier(ctx);
    if rank(dp) == 0 {
        inner(ctx, a, b);
        out[0] = b[0];
    }
}

#[eagle::host]
pub fn outer(shape: Tensor<u64, TP>, out: Out<Tensor<u64, NR, 1>>) {
    let a = alloc_window_buffer([1], u64);
    let b = alloc_window_buffer([1], u64);
    for r in 0..world_size() {
        outer_d(out[r], window(a, [1], u64), window(b, [1], u64), device = r);
    }
}

#[test]
fn a_group_in_a_compute_kernel_uses_the_callers_signal_window() {
    // P = 6, TP = 3: row 0 (ranks 0, 1, 2) sums 1 + 2 + 3; row 1 does not call `inner`.
    let s = Session::sim(6).unwrap();
    let shape = Tensor::<u64>::zeros(&[3]);
    let mut out = Tensor::<u64>::zeros(&[6, 1]);
    outer.launch(&s, &shape, &mut out).unwrap();
    assert_eq!(out.data(), [6, 6, 6, 0, 0, 0]);
    // P = 4, TP = 2, twice on one session.
    let s = Session::sim(4).unwrap();
    let shape = Tensor::<u64>::zeros(&[2]);
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    for _ in 0..2 {
        outer.launch(&s, &shape, &mut out).unwrap();
        assert_eq!(out.data(), [3, 3, 0, 0]);
    }
}

/// A broadcast within a TP group from the constant root 3.
#[eagle::kernel(device)]
pub fn const_root_d(ctx: Ctx, w: Window<f32, N>, d: Window<f32, N>) {
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    broadcast(tp, w, d, 3);
}

#[eagle::host]
pub fn const_root(shape: Tensor<u64, TP>, out: Out<Tensor<u64, NR, 1>>) {
    let w = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        const_root_d(window(w, [N], f32), window(d, [N], f32), device = r);
    }
}

#[test]
fn a_constant_broadcast_root_past_the_group_is_refused_before_anything_runs() {
    use eagle::codegen::{CodegenError, SpecializeError};
    let s = Session::sim(8).unwrap();
    let shape = Tensor::<u64>::zeros(&[2]);
    let mut out = Tensor::<u64>::zeros(&[8, 1]);
    let e = const_root.launch(&s, &shape, &mut out).unwrap_err();
    let eagle::Error::Codegen(CodegenError::Specialize(b)) = &e else {
        panic!("{e}");
    };
    let SpecializeError::Group { op, message, .. } = &**b else {
        panic!("{e}");
    };
    assert_eq!(op, "broadcast");
    assert_eq!(message, "the root is 3, but the group's ranks are 0 to 1; the root of a broadcast within a group is a group rank: give one below `nranks(group)` (`world_rank(group, q)` turns a group rank into a world rank, not back)");
    // With TP = 4 the root is within every group.
    let s = Session::sim(8).unwrap();
    const_root
        .launch(&s, &Tensor::<u64>::zeros(&[4]), &mut out)
        .unwrap();
}

/// The host of `const_root_d` without an argument that carries `TP`.
#[eagle::host]
pub fn no_tp(out: Out<Tensor<u64, NR, 1>>) {
    let w = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        const_root_d(window(w, [N], f32), window(d, [N], f32), device = r);
    }
}

#[test]
fn a_grid_extent_no_argument_carries_is_named_with_the_way_to_bind_it() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = no_tp.launch(&s, &mut out).unwrap_err().to_string();
    assert!(
        e.ends_with("dimension `TP` has no binding: `launch` binds a dim from the shapes of the host function's arguments, and none has `TP` as an extent; give one a dimension `TP` (for example `w: Tensor<f32, TP, ...>`, or `x: Tensor<f32, { NR / TP }, TP, ...>` for the ranks of a grid), or pass `TP` in the bindings where you specialize directly (`specialized_ir`, `ir_specialized`)"),
        "{e}"
    );
}

/// Rank 1 skips its TP group's barrier.
#[eagle::kernel(device)]
pub fn skip_d(ctx: Ctx, w: Window<f32, N>) {
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    if rank(ctx) != 1 {
        barrier(tp);
    }
}

#[eagle::host]
pub fn skip(shape: Tensor<u64, TP>, out: Out<Tensor<u64, NR, 1>>) {
    let w = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        skip_d(window(w, [N], f32), device = r);
    }
}

#[test]
fn a_group_barrier_a_member_skips_is_a_deadlock_naming_the_rank_it_waits_for() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = skip
        .launch(&s, &Tensor::<u64>::zeros(&[2]), &mut out)
        .unwrap_err()
        .to_string();
    let line = line_of("pub fn skip_d(") + 3;
    assert!(
        e.starts_with("deadlock: no rank can make progress; every rank still running is blocked:\n  rank 0 (at [0, 0] of the rank grid [2, 2]) waits for world rank 1 to arrive at a barrier of their rank group: signal window #1 ([16] i64; `collective_signals` of `skip_d`) element 13 >= 1, but it holds 0 (function `skip_d`, op `wait ")
            && e.contains(&format!("(at tests/groups.rs:{line}:9))\n  rank(s) 1-3 finished without satisfying these waits")),
        "{e}"
    );
}

/// A `[2, 2, 2]` grid at P = 8: each axis's group sums the world rank with a ring allreduce
/// and reports its rank, size and the world rank of its last member.
#[eagle::kernel(device)]
pub fn cube_d(ctx: Ctx, out: Out<Tensor<u64, 12>>, a: Window<u64, 1>, b: Window<u64, 1>) {
    let x = group(ctx, [2, 2, 2], 0);
    let y = group(ctx, [2, 2, 2], 1);
    let z = group(ctx, [2, 2, 2], 2);
    let me = rank(ctx) as u64;
    a[0] = me;
    barrier(ctx);
    allreduce(x, a, b, Sum, Ring);
    out[0] = rank(x) as u64;
    out[1] = nranks(x) as u64;
    out[2] = world_rank(x, 1) as u64;
    out[3] = b[0];
    allreduce(y, a, b, Sum, Ring);
    out[4] = rank(y) as u64;
    out[5] = nranks(y) as u64;
    out[6] = world_rank(y, 1) as u64;
    out[7] = b[0];
    allreduce(z, a, b, Sum, Ring);
    out[8] = rank(z) as u64;
    out[9] = nranks(z) as u64;
    out[10] = world_rank(z, 1) as u64;
    out[11] = b[0];
}

#[eagle::host]
pub fn cube(out: Out<Tensor<u64, NR, 12>>) {
    let a = alloc_window_buffer([1], u64);
    let b = alloc_window_buffer([1], u64);
    for r in 0..world_size() {
        cube_d(out[r], window(a, [1], u64), window(b, [1], u64), device = r);
    }
}

#[test]
fn every_axis_of_a_three_axis_grid_is_a_group() {
    let s = Session::sim(8).unwrap();
    let mut out = Tensor::<u64>::zeros(&[8, 12]);
    cube.launch(&s, &mut out).unwrap();
    for r in 0..8u64 {
        // Rank r is (r / 4, r / 2 % 2, r % 2); axis k's stride is 4, 2, 1.
        for (k, stride) in [(0usize, 4u64), (1, 2), (2, 1)] {
            let coord = r / stride % 2;
            let first = r - coord * stride;
            let got = &out.data()[(r as usize * 3 + k) * 4..][..4];
            assert_eq!(
                got,
                [coord, 2, first + stride, 2 * first + stride],
                "rank {r} axis {k}"
            );
        }
    }
}

/// Each rank puts its row into the next rank of its TP group's window, which that rank reads
/// with no wait: a race between two ranks of a group.
#[eagle::kernel(device)]
pub fn racy_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, w: Window<f32, N>) {
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    let next = world_rank(tp, (rank(tp) + 1) % nranks(tp));
    put(w, next, x);
    store(y, [0], load(w, [0], [N]));
}

#[eagle::host]
pub fn racy(shape: Tensor<u64, TP>, x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let w = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        racy_d(x[r], y[r], window(w, [N], f32), device = r);
    }
}

/// Issue 39, item 1: the race report of a program with rank groups names where each rank it
/// mentions sits in the grid (its group ranks), as well as its world rank.
#[test]
fn a_race_between_group_members_names_their_places_in_the_grid() {
    let s = Session::sim(4).unwrap();
    let x = Tensor::<f32>::zeros(&[4, N]);
    let mut y = Tensor::<f32>::zeros(&[4, N]);
    let e = racy
        .launch(&s, &Tensor::<u64>::zeros(&[2]), &x, &mut y)
        .unwrap_err();
    use eagle::runtime::{Cause, RuntimeError};
    let eagle::Error::Runtime(RuntimeError::RankFailed {
        rank,
        cause: Cause::Race(message),
    }) = &e
    else {
        panic!("expected a race, got {e:?}");
    };
    // The failing rank's place ends the message; the other rank's place follows the report.
    let at = |r: usize| {
        format!(
            "rank {r} is at [{}, {}] of the rank grid [2, 2]",
            r / 2,
            r % 2
        )
    };
    assert!(message.ends_with(&format!("({})", at(*rank))), "{message}");
    let other = (0..4)
        .filter(|q| q != rank)
        .find(|q| message.contains(&format!("rank {q} ")))
        .unwrap_or_else(|| panic!("no other rank named: {message}"));
    assert!(message.contains(&at(other)), "{message}");
}

/// Per-device program of [`by_rows`]: rank `r` copies row `r / TP` of `x` (its DP row).
#[eagle::kernel(device)]
pub fn by_rows_d(ctx: Ctx, x: Tensor<f32, { NR / TP }, N>, y: Out<Tensor<f32, N>>) {
    let row = rank(ctx) / TP;
    for i in 0..N {
        y[i] = x[row][i];
    }
}

/// A host argument shaped by a derived dim, `{ NR / TP }` rows (one per DP row of the grid).
#[eagle::host]
pub fn by_rows(x: Tensor<f32, { NR / TP }, N>, shape: Tensor<u64, TP>, y: Out<Tensor<f32, NR, N>>) {
    for r in 0..world_size() {
        by_rows_d(x, y[r], device = r);
    }
}

#[test]
fn a_host_argument_of_a_derived_extent_that_does_not_divide_is_refused() {
    let s = Session::sim(4).unwrap();
    let x = Tensor::<f32>::zeros(&[1, N]);
    let shape = Tensor::<u64>::zeros(&[3]);
    let mut y = Tensor::<f32>::zeros(&[4, N]);
    let e = by_rows
        .launch(&s, &x, &shape, &mut y)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "host function `by_rows`, argument `x`: expected dimension 0 = (NR / TP) (with NR = 4, TP = 3), which has no value: `(NR / TP)` is 4 / 3, which is not exact, found 1; choose extents that divide"
    );
    // TP = 2: two rows, each rank reads its DP row.
    let x = Tensor::from_vec(&[2, N], (0..2 * N).map(|v| v as f32).collect()).unwrap();
    let shape = Tensor::<u64>::zeros(&[2]);
    by_rows.launch(&s, &x, &shape, &mut y).unwrap();
    for r in 0..4 {
        assert_eq!(
            y.data()[r * N..(r + 1) * N],
            x.data()[(r / 2) * N..(r / 2 + 1) * N]
        );
    }
}
