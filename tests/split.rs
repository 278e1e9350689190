//! Rank groups by color and key: `split(ctx, color, key)` groups the ranks of one color,
//! numbered by key, as `MPI_Comm_split` does. Once P is known, the color and key are evaluated
//! for every rank and the groups lowered as those of a process grid, so `split(ctx, r / TP, r)`
//! is `group(ctx, [{ NR / TP }, TP], 1)` and `split(ctx, r % TP, 0)` is `group(.., 0)`, bit for
//! bit (checked at every P from 1 to 8 and every TP that divides it, race detector on). Other
//! splits (sizes that differ, a key against world-rank order, members anywhere, ranks left out
//! by `UNDEFINED`) are `MPI_Comm_split`'s groups, checked against a model of it; a color
//! computed from data is refused before anything runs.
use eagle::codegen::{CodegenError, SpecializeError};
use eagle::prelude::*;

#[cfg(feature = "cuda")]
mod emulation;

const NR: Dim = dynamic!("NR");
const TP: Dim = dynamic!("TP");
const W: usize = 3;

#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn by_color_d(
    ctx: Ctx,
    x: Tensor<f32, W>,
    shape: Tensor<u64, TP>,
    ids: Out<Tensor<u64, 10>>,
    sums: Out<Tensor<f32, 4, W>>,
    a: Window<f32, W>,
    b: Window<f32, W>,
    c: Window<f32, W>,
    d: Window<f32, W>,
    e: Window<f32, W>,
) {
    let rows = split(ctx, rank(ctx) / TP, rank(ctx));
    let cols = split(ctx, rank(ctx) % TP, 7);
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    let dp = group(ctx, [{ NR / TP }, TP], 0);
    ids[0] = rank(rows) as u64;
    ids[1] = nranks(rows) as u64;
    ids[2] = rank(cols) as u64;
    ids[3] = nranks(cols) as u64;
    ids[4] = rank(tp) as u64;
    ids[5] = nranks(tp) as u64;
    ids[6] = rank(dp) as u64;
    ids[7] = nranks(dp) as u64;
    ids[8] = world_rank(rows, 0) as u64;
    ids[9] = world_rank(cols, nranks(cols) - 1) as u64;
    put(a, rank(ctx), x);
    allreduce(rows, a, b, Sum, TwoPhase);
    allreduce(tp, a, c, Sum, TwoPhase);
    allreduce(cols, a, d, Sum, Ring);
    allreduce(dp, a, e, Sum, Ring);
    barrier(rows);
    get(sums[0], rank(ctx), b);
    get(sums[1], rank(ctx), c);
    get(sums[2], rank(ctx), d);
    get(sums[3], rank(ctx), e);
}

#[eagle::host]
pub fn by_color(
    x: Tensor<f32, NR, W>,
    shape: Tensor<u64, NR, TP>,
    ids: Out<Tensor<u64, NR, 10>>,
    sums: Out<Tensor<f32, NR, 4, W>>,
) {
    let a = alloc_window_buffer([W], f32);
    let b = alloc_window_buffer([W], f32);
    let c = alloc_window_buffer([W], f32);
    let d = alloc_window_buffer([W], f32);
    let e = alloc_window_buffer([W], f32);
    for r in 0..world_size() {
        by_color_d(
            x[r],
            shape[r],
            ids[r],
            sums[r],
            window(a, [W], f32),
            window(b, [W], f32),
            window(c, [W], f32),
            window(d, [W], f32),
            window(e, [W], f32),
            device = r,
        );
    }
}

#[test]
fn a_split_by_row_or_column_is_the_grids_group_bit_for_bit_at_every_p() {
    for p in 1..=8usize {
        for t in (1..=p).filter(|t| p % t == 0) {
            let s = Session::sim(p).unwrap();
            let x: Vec<f32> = (0..p * W).map(|i| 0.1 + i as f32 * 1.37).collect();
            let xs = Tensor::from_vec(&[p, W], x).unwrap();
            let shape = Tensor::<u64>::zeros(&[p, t]);
            let mut ids = Tensor::<u64>::zeros(&[p, 10]);
            let mut sums = Tensor::<f32>::zeros(&[p, 4, W]);
            by_color
                .launch(&s, &xs, &shape, &mut ids, &mut sums)
                .unwrap_or_else(|e| panic!("P={p} TP={t}: {e}"));
            for r in 0..p {
                let id = &ids.data()[r * 10..][..10];
                let (row, col) = ((r % t) as u64, (r / t) as u64);
                let want = [row, t as u64, col, (p / t) as u64];
                assert_eq!(id[..4], want, "P={p} TP={t} rank {r}: split's ranks");
                assert_eq!(id[4..8], want, "P={p} TP={t} rank {r}: group's ranks");
                let last_of_col = (p - t + r % t) as u64;
                assert_eq!(id[8..], [(r - r % t) as u64, last_of_col], "P={p} TP={t}");
                let got = &sums.data()[r * 4 * W..][..4 * W];
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got[..W]), bits(&got[W..2 * W]), "P={p} TP={t}: rows");
                assert_eq!(
                    bits(&got[2 * W..3 * W]),
                    bits(&got[3 * W..]),
                    "P={p} TP={t}"
                );
            }
        }
    }
}

/// The 1-based line of this file that holds `needle`.
fn line_of(needle: &str) -> u32 {
    let text = include_str!("split.rs");
    let i = text.lines().position(|l| l.contains(needle)).unwrap();
    i as u32 + 1
}

/// The groups `MPI_Comm_split` makes: per rank, `(color, group rank, group size, world rank
/// of each group rank)`, or `None` for a negative color.
fn mpi_split(colors: &[i64], keys: &[i64]) -> Vec<Option<(u64, u64, Vec<u64>)>> {
    (0..colors.len())
        .map(|r| {
            if colors[r] < 0 {
                return None;
            }
            let mut members: Vec<(i64, usize)> = (0..colors.len())
                .filter(|&w| colors[w] == colors[r])
                .map(|w| (keys[w], w))
                .collect();
            members.sort();
            let q = members.iter().position(|m| m.1 == r).unwrap() as u64;
            let world: Vec<u64> = members.iter().map(|m| m.1 as u64).collect();
            Some((q, world.len() as u64, world))
        })
        .collect()
}

/// Splits that are no grid's: groups of three (the last one smaller) numbered backwards, and
/// ranks `r % 3 == 2` left out (`UNDEFINED`) of groups by `r % 3`, numbered backwards too.
#[eagle::kernel(device)]
pub fn odd_split_d(ctx: Ctx, out: Out<Tensor<u64, 8>>) {
    let r = rank(ctx);
    let g = split(ctx, r / 3, nranks(ctx) - r); // marker: uneven
    out[0] = rank(g) as u64;
    out[1] = nranks(g) as u64;
    out[2] = world_rank(g, 0) as u64;
    out[3] = world_rank(g, nranks(g) - 1) as u64;
    barrier(g);
    let u = split(ctx, select(r % 3 == 2, UNDEFINED, r % 3), 100 - r);
    if r % 3 != 2 {
        out[4] = rank(u) as u64;
        out[5] = nranks(u) as u64;
        out[6] = world_rank(u, 0) as u64;
        out[7] = world_rank(u, nranks(u) - 1) as u64;
        barrier(u);
    }
}

#[eagle::host]
pub fn odd_split(out: Out<Tensor<u64, NR, 8>>) {
    for r in 0..world_size() {
        odd_split_d(out[r], device = r);
    }
}

/// Runs `odd_split` on `s` (P ranks) and checks it against [`mpi_split`].
fn check_odd_split(s: &Session, p: usize) {
    let mut out = Tensor::<u64>::from_vec(&[p, 8], vec![99; p * 8]).unwrap();
    odd_split
        .launch(s, &mut out)
        .unwrap_or_else(|e| panic!("P={p}: {e}"));
    let ranks: Vec<i64> = (0..p as i64).collect();
    let colors: Vec<i64> = ranks.iter().map(|r| r / 3).collect();
    let keys: Vec<i64> = ranks.iter().map(|r| p as i64 - r).collect();
    let g = mpi_split(&colors, &keys);
    let colors: Vec<i64> = ranks
        .iter()
        .map(|r| if r % 3 == 2 { -1 } else { r % 3 })
        .collect();
    let keys: Vec<i64> = ranks.iter().map(|r| 100 - r).collect();
    let u = mpi_split(&colors, &keys);
    for r in 0..p {
        let got = &out.data()[r * 8..][..8];
        let (q, n, w) = g[r].clone().unwrap();
        assert_eq!(
            got[..4],
            [q, n, w[0], w[n as usize - 1]],
            "P={p} rank {r}: g"
        );
        let want = match &u[r] {
            Some((q, n, w)) => [*q, *n, w[0], w[*n as usize - 1]],
            None => [99; 4],
        };
        assert_eq!(got[4..], want, "P={p} rank {r}: u");
    }
}

#[test]
fn groups_of_any_size_order_and_ranks_left_out_are_mpi_comm_splits_at_every_p() {
    for p in 1..=8usize {
        check_odd_split(&Session::sim(p).unwrap(), p);
    }
}

#[cfg(feature = "cuda")]
#[test]
fn splits_that_are_no_grids_in_the_emulation_equal_the_model() {
    emulation::cxx();
    for p in [4usize, 6, 8] {
        let s = Session::cuda_emulated(vec![0; p]).unwrap();
        check_odd_split(&s, p);
        check_backwards(&s, p);
        check_uneven(&s, p);
    }
}

/// Collectives within groups of one size that are no grid's: `r % 2` numbered backwards, so
/// group rank `q` is world rank `P - 2 - 2q + r % 2` (P even).
#[eagle::kernel(device)]
pub fn backwards_d(
    ctx: Ctx,
    x: Tensor<f32, W>,
    xr: Tensor<f32, 1, W>,
    rows: Out<Tensor<f32, { NR / 2 }, W>>,
    sums: Out<Tensor<f32, 3, W>>,
    a: Window<f32, W>,
    b: Window<f32, W>,
    c: Window<f32, W>,
    d: Window<f32, W>,
    g: Window<f32, { NR / 2 }, W>,
) {
    let h = split(ctx, rank(ctx) % 2, nranks(ctx) - rank(ctx));
    put(a, rank(ctx), x);
    barrier(h);
    allreduce(h, a, b, Sum, Mesh);
    allreduce(h, a, c, Sum, TwoPhase);
    allreduce(h, a, d, Sum, Ring);
    allgather(h, xr, g);
    get(rows, rank(ctx), g);
    get(sums[0], rank(ctx), b);
    get(sums[1], rank(ctx), c);
    get(sums[2], rank(ctx), d);
}

#[eagle::host]
pub fn backwards(
    x: Tensor<f32, NR, W>,
    xr: Tensor<f32, NR, 1, W>,
    rows: Out<Tensor<f32, NR, { NR / 2 }, W>>,
    sums: Out<Tensor<f32, NR, 3, W>>,
) {
    let a = alloc_window_buffer([W], f32);
    let b = alloc_window_buffer([W], f32);
    let c = alloc_window_buffer([W], f32);
    let d = alloc_window_buffer([W], f32);
    let g = alloc_window_buffer([{ NR / 2 }, W], f32);
    for r in 0..world_size() {
        backwards_d(
            x[r],
            xr[r],
            rows[r],
            sums[r],
            window(a, [W], f32),
            window(b, [W], f32),
            window(c, [W], f32),
            window(d, [W], f32),
            window(g, [{ NR / 2 }, W], f32),
            device = r,
        );
    }
}

/// Runs `backwards` on `s` (P ranks, P even) and checks its rows and sums.
fn check_backwards(s: &Session, p: usize) {
    {
        // Whole values: every summation order gives them exactly (the ring's too); the
        // fractions of the mesh and two-phase rows show their order.
        let x: Vec<f32> = (0..p * W)
            .map(|i| {
                if i % W == 0 {
                    i as f32
                } else {
                    0.1 + i as f32 * 1.37
                }
            })
            .collect();
        let xs = Tensor::from_vec(&[p, W], x.clone()).unwrap();
        let xr = Tensor::from_vec(&[p, 1, W], x.clone()).unwrap();
        let mut rows = Tensor::<f32>::zeros(&[p, p / 2, W]);
        let mut sums = Tensor::<f32>::zeros(&[p, 3, W]);
        backwards
            .launch(s, &xs, &xr, &mut rows, &mut sums)
            .unwrap_or_else(|e| panic!("P={p}: {e}"));
        for r in 0..p {
            let members: Vec<usize> = (0..p / 2).map(|q| p - 2 - 2 * q + r % 2).collect();
            let want_rows: Vec<f32> = members
                .iter()
                .flat_map(|&w| x[w * W..][..W].to_vec())
                .collect();
            assert_eq!(
                &rows.data()[r * (p / 2) * W..][..(p / 2) * W],
                &want_rows[..]
            );
            let sum: Vec<u32> = (0..W)
                .map(|j| {
                    let mut s = x[members[0] * W + j];
                    for &w in &members[1..] {
                        s += x[w * W + j];
                    }
                    s.to_bits()
                })
                .collect();
            let got: Vec<u32> = sums.data()[r * 3 * W..][..3 * W]
                .iter()
                .map(|v| v.to_bits())
                .collect();
            assert_eq!(got[..W], sum[..], "P={p} rank {r}: mesh");
            assert_eq!(got[W..2 * W], sum[..], "P={p} rank {r}: two-phase");
            assert_eq!(got[2 * W], sum[0], "P={p} rank {r}: ring");
        }
    }
}

#[test]
fn collectives_within_groups_numbered_backwards_run_in_group_rank_order() {
    for p in [2usize, 4, 6, 8] {
        check_backwards(&Session::sim(p).unwrap(), p);
    }
}

/// Collectives within groups of different sizes: `r / 3` makes groups of 3 and a smaller last
/// one (P = 4: `{0, 1, 2}` and `{3}`).
#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn uneven_d(
    ctx: Ctx,
    x: Tensor<f32, W>,
    sums: Out<Tensor<f32, 5, W>>,
    a: Window<f32, W>,
    b: Window<f32, W>,
    c: Window<f32, W>,
    d: Window<f32, W>,
    e: Window<f32, W>,
    f: Window<f32, W>,
) {
    let g = split(ctx, rank(ctx) / 3, rank(ctx));
    put(a, rank(ctx), x);
    allreduce(g, a, b, Sum, Mesh);
    allreduce(g, a, c, Sum, TwoPhase);
    allreduce(g, a, d, Sum, Ring);
    broadcast(g, a, e, nranks(g) - 1);
    put(f, rank(ctx), x);
    allgather(g, f, f);
    get(sums[0], rank(ctx), b);
    get(sums[1], rank(ctx), c);
    get(sums[2], rank(ctx), d);
    get(sums[3], rank(ctx), e);
    get(sums[4], rank(ctx), f);
}

#[eagle::host]
pub fn uneven(x: Tensor<f32, NR, W>, sums: Out<Tensor<f32, NR, 5, W>>) {
    let a = alloc_window_buffer([W], f32);
    let b = alloc_window_buffer([W], f32);
    let c = alloc_window_buffer([W], f32);
    let d = alloc_window_buffer([W], f32);
    let e = alloc_window_buffer([W], f32);
    let f = alloc_window_buffer([W], f32);
    for r in 0..world_size() {
        uneven_d(
            x[r],
            sums[r],
            window(a, [W], f32),
            window(b, [W], f32),
            window(c, [W], f32),
            window(d, [W], f32),
            window(e, [W], f32),
            window(f, [W], f32),
            device = r,
        );
    }
}

#[test]
fn collectives_within_groups_of_different_sizes_are_each_groups_at_every_p() {
    for p in 1..=8usize {
        check_uneven(&Session::sim(p).unwrap(), p);
    }
}

/// Runs `uneven` on `s` (P ranks) and checks each group's sums, broadcast and allgather.
fn check_uneven(s: &Session, p: usize) {
    {
        let x: Vec<f32> = (0..p * W)
            .map(|i| {
                if i % W == 0 {
                    i as f32
                } else {
                    0.1 + i as f32 * 1.37
                }
            })
            .collect();
        let xs = Tensor::from_vec(&[p, W], x.clone()).unwrap();
        let mut sums = Tensor::<f32>::zeros(&[p, 5, W]);
        uneven
            .launch(s, &xs, &mut sums)
            .unwrap_or_else(|e| panic!("P={p}: {e}"));
        for r in 0..p {
            let members: Vec<usize> = (r / 3 * 3..(r / 3 * 3 + 3).min(p)).collect();
            let n = members.len();
            let sum: Vec<f32> = (0..W)
                .map(|j| {
                    members[1..]
                        .iter()
                        .fold(x[members[0] * W + j], |s, &w| s + x[w * W + j])
                })
                .collect();
            // The chunk rule: chunk c starts at c * (W / n) + min(c, W % n).
            let start = |c: usize| c * (W / n) + c.min(W % n);
            let owner = |j: usize| (0..n).rev().find(|&c| start(c) <= j).unwrap();
            let gathered: Vec<f32> = (0..W).map(|j| x[members[owner(j)] * W + j]).collect();
            let root = members[n - 1];
            let want = [
                &sum[..],
                &sum[..],
                &sum[..],
                &x[root * W..][..W],
                &gathered[..],
            ]
            .concat();
            let got = &sums.data()[r * 5 * W..][..5 * W];
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got[..2 * W]),
                bits(&want[..2 * W]),
                "P={p} rank {r}: mesh, two-phase"
            );
            assert_eq!(got[2 * W], want[2 * W], "P={p} rank {r}: ring");
            assert_eq!(
                bits(&got[3 * W..]),
                bits(&want[3 * W..]),
                "P={p} rank {r}: broadcast, allgather"
            );
        }
    }
}

/// Misuse of split groups: an allgather of one row per group rank within groups of different
/// sizes (refused before anything runs) and a rank left out that uses its group (stopped
/// when it runs).
#[eagle::kernel(device)]
pub fn uneven_rows_d(ctx: Ctx, x: Tensor<f32, 1, W>, g: Window<f32, 3, W>) {
    let h = split(ctx, rank(ctx) / 3, rank(ctx));
    allgather(h, x, g); // marker: uneven rows
}

#[eagle::host]
pub fn uneven_rows(x: Tensor<f32, NR, 1, W>) {
    let g = alloc_window_buffer([3, W], f32);
    for r in 0..world_size() {
        uneven_rows_d(x[r], window(g, [3, W], f32), device = r);
    }
}

#[eagle::kernel(device)]
pub fn left_out_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let g = split(ctx, select(rank(ctx) == 2, UNDEFINED, 0), rank(ctx));
    out[0] = rank(g) as u64; // marker: left out
}

#[eagle::host]
pub fn left_out(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        left_out_d(out[r], device = r);
    }
}

#[test]
fn rows_per_group_rank_in_groups_of_different_sizes_and_a_rank_left_out_are_errors() {
    let s = Session::sim(4).unwrap();
    let x = Tensor::<f32>::zeros(&[4, 1, W]);
    let e = uneven_rows.launch(&s, &x).unwrap_err();
    let eagle::Error::Codegen(CodegenError::Specialize(sp)) = &e else {
        panic!("{e}");
    };
    let SpecializeError::Group {
        op, loc, message, ..
    } = &**sp
    else {
        panic!("{e}");
    };
    assert_eq!(op, "allgather");
    assert_eq!(
        loc.as_ref().map(|l| l.line),
        Some(line_of("marker: uneven rows"))
    );
    assert_eq!(
        message,
        "a collective whose buffers have one row per group rank, within the groups of a split whose groups differ in size (color 0 holds 3, color 1 holds 1): one buffer shape cannot fit them; give every group the same number of ranks, or use the same-shape forms (`allreduce`, `broadcast`, `allgather` and `reduce_scatter` of equal buffers), which take groups of any size"
    );
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = left_out.launch(&s, &mut out).unwrap_err().to_string();
    assert!(
        e.starts_with("rank 2 failed: function `left_out_d`, op `trap_if"),
        "{e}"
    );
    assert!(
        e.contains(&format!("tests/split.rs:{}", line_of("marker: left out"))),
        "{e}"
    );
    assert!(
        e.ends_with(&format!("world rank 2 is in no group of this split (its color is negative: `UNDEFINED`) but uses the group; use a split's group only on the ranks it gives a color of 0 or more, behind an `if` (both sides of a `select` are computed) (rank 2 is in no group of the split at tests/split.rs:{} (its color is negative))", line_of("let g = split(ctx, select(rank(ctx) == 2, UNDEFINED, 0)"))),
        "{e}"
    );
}

/// The color of a split read from data cannot be known before the program runs.
#[eagle::kernel(device)]
pub fn data_split_d(ctx: Ctx, how: Tensor<u64, 1>, out: Out<Tensor<u64, 1>>) {
    let k = split(ctx, how[0] as usize, rank(ctx)); // marker: data color
    out[0] = rank(k) as u64;
}

#[eagle::host]
pub fn data_split(how: Tensor<u64, NR, 1>, out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        data_split_d(how[r], out[r], device = r);
    }
}

#[test]
fn a_color_read_from_data_is_refused_with_the_fix() {
    let s = Session::sim(2).unwrap();
    let how = Tensor::<u64>::zeros(&[2, 1]);
    let mut out = Tensor::<u64>::zeros(&[2, 1]);
    let e = data_split
        .launch(&s, &how, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("tests/split.rs:{}", line_of("marker: data color"))),
        "{e}"
    );
    assert!(
        e.contains("the color and key of `split` are computed before anything runs, for every rank, from `rank(ctx)`, `nranks(ctx)`, dims, constants and arithmetic on them (`split(ctx, rank(ctx) / TP, rank(ctx))`); these depend on `elem`"),
        "{e}"
    );
}

/// Groups of one size whose ranks are not equally spaced: `{0, 3}` and `{1, 2}` at P = 4.
#[eagle::kernel(device)]
pub fn spaced_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let g = split(ctx, min(rank(ctx) % 3, 1), rank(ctx));
    out[0] = (rank(g) * 10 + world_rank(g, 1 - rank(g))) as u64;
}

#[eagle::host]
pub fn spaced(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        spaced_d(out[r], device = r);
    }
}

#[test]
fn groups_that_are_not_equally_spaced_take_their_members() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    spaced.launch(&s, &mut out).unwrap();
    // Rank, then the world rank of the other member.
    assert_eq!(out.data(), [3, 2, 11, 10]);
    // At P = 2 the same split is the world's rank order: {0} and {1}.
    let s = Session::sim(2).unwrap();
    let mut out = Tensor::<u64>::zeros(&[2, 1]);
    let e = spaced.launch(&s, &mut out).unwrap_err().to_string();
    assert!(
        e.contains("`world_rank` of group rank 1, but the group's ranks are those below 1"),
        "{e}"
    );
}

/// Colors and keys computed in other dtypes than `index`: evaluated in each value's own dtype,
/// as the program computes them (a `u32` product wraps, a cast truncates), so the groups are
/// the ones the ranks would compute.
#[eagle::kernel(device)]
pub fn typed_colors_d(ctx: Ctx, out: Out<Tensor<u64, 6>>) {
    let r = rank(ctx);
    // 0, 2^31, 0, 2^31 as `u32` (the product wraps): {0, 2} and {1, 3}.
    let c: u32 = (r as u32) * 2147483648;
    let g = split(ctx, c as usize, r);
    // `as u32` keeps the low 32 bits: r / 2, so {0, 1} and {2, 3}.
    let h = split(ctx, (r * 4294967296 + r / 2) as u32 as usize, r);
    out[0] = rank(g) as u64;
    out[1] = nranks(g) as u64;
    out[2] = world_rank(g, 1) as u64;
    out[3] = rank(h) as u64;
    out[4] = nranks(h) as u64;
    out[5] = world_rank(h, 0) as u64;
}

#[eagle::host]
pub fn typed_colors(out: Out<Tensor<u64, NR, 6>>) {
    for r in 0..world_size() {
        typed_colors_d(out[r], device = r);
    }
}

/// A key that wraps in `i32`: 0, 2^30, -2^31, -2^30 at P = 4, so ranks 2 and 3 sort first.
#[eagle::kernel(device)]
pub fn wrapped_key_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let k: i32 = (rank(ctx) as i32) * 1073741824;
    let g = split(ctx, 0, k as usize);
    out[0] = rank(g) as u64;
}

#[eagle::host]
pub fn wrapped_key(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        wrapped_key_d(out[r], device = r);
    }
}

#[test]
fn colors_and_keys_are_evaluated_in_their_own_dtypes() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 6]);
    typed_colors.launch(&s, &mut out).unwrap();
    #[rustfmt::skip]
    let want = [
        0, 2, 2, 0, 2, 0,
        0, 2, 3, 1, 2, 0,
        1, 2, 2, 0, 2, 2,
        1, 2, 3, 1, 2, 2,
    ];
    assert_eq!(out.data(), want);
    // Keys 0, 2^30, -2^31, -2^30: ranks 2, 3, 0, 1 in key order.
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    wrapped_key.launch(&s, &mut out).unwrap();
    assert_eq!(out.data(), [2, 3, 0, 1]);
}

/// `world_rank` of a constant group rank past the group.
#[eagle::kernel(device)]
pub fn past_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let g = split(ctx, rank(ctx) / 2, rank(ctx));
    out[0] = world_rank(g, 2) as u64; // marker: past the group
}

#[eagle::host]
pub fn past(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        past_d(out[r], device = r);
    }
}

#[test]
fn a_constant_group_rank_past_the_group_is_refused_before_anything_runs() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = past.launch(&s, &mut out).unwrap_err();
    let eagle::Error::Codegen(CodegenError::Specialize(sp)) = &e else {
        panic!("{e}");
    };
    let SpecializeError::Group {
        op, loc, message, ..
    } = &**sp
    else {
        panic!("{e}");
    };
    assert_eq!(op, "world_rank");
    assert_eq!(
        loc.as_ref().map(|l| l.line),
        Some(line_of("marker: past the group"))
    );
    assert_eq!(
        message,
        "group rank 2 of a group whose ranks are 0 to 1; give a rank below `nranks(group)` (reduce it modulo `nranks(group)` for a ring)"
    );
}

/// An allgather within the DP group into a buffer of TP rows: wrong unless DP = TP.
#[eagle::kernel(device)]
pub fn dp_rows_d(ctx: Ctx, shape: Tensor<u64, TP>, x: Tensor<f32, 1, W>, g: Window<f32, TP, W>) {
    let dp = split(ctx, rank(ctx) % TP, rank(ctx));
    allgather(dp, x, g);
}

#[eagle::host]
pub fn dp_rows(shape: Tensor<u64, NR, TP>, x: Tensor<f32, NR, 1, W>) {
    let g = alloc_window_buffer([TP, W], f32);
    for r in 0..world_size() {
        dp_rows_d(shape[r], x[r], window(g, [TP, W], f32), device = r);
    }
}

#[test]
fn a_buffer_of_the_wrong_row_count_names_the_groups_size() {
    let s = Session::sim(6).unwrap();
    let shape = Tensor::<u64>::zeros(&[6, 2]);
    let x = Tensor::<f32>::zeros(&[6, 1, W]);
    let e = dp_rows.launch(&s, &shape, &x).unwrap_err().to_string();
    assert!(
        e.contains("but the group has 3 ranks; give them shape [G, M] with `G` the group's rank count, here 3: the grid's extent at the group's axis (`TP` for `group(ctx, [{ NR / TP }, TP], 1)` or `split(ctx, rank(ctx) / TP, ..)`, `{ NR / TP }` for axis 0 or `split(ctx, rank(ctx) % TP, ..)`)"),
        "{e}"
    );
}

/// A color whose definition shares subexpressions 40 levels deep (`a(i+1) = a(i) + a(i)`):
/// evaluated once per value and rank, not once per path (2^40 of them).
#[eagle::kernel(device)]
pub fn deep_color_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let a0 = rank(ctx);
    let a1 = a0 + a0;
    let a2 = a1 + a1;
    let a3 = a2 + a2;
    let a4 = a3 + a3;
    let a5 = a4 + a4;
    let a6 = a5 + a5;
    let a7 = a6 + a6;
    let a8 = a7 + a7;
    let a9 = a8 + a8;
    let a10 = a9 + a9;
    let a11 = a10 + a10;
    let a12 = a11 + a11;
    let a13 = a12 + a12;
    let a14 = a13 + a13;
    let a15 = a14 + a14;
    let a16 = a15 + a15;
    let a17 = a16 + a16;
    let a18 = a17 + a17;
    let a19 = a18 + a18;
    let a20 = a19 + a19;
    let a21 = a20 + a20;
    let a22 = a21 + a21;
    let a23 = a22 + a22;
    let a24 = a23 + a23;
    let a25 = a24 + a24;
    let a26 = a25 + a25;
    let a27 = a26 + a26;
    let a28 = a27 + a27;
    let a29 = a28 + a28;
    let a30 = a29 + a29;
    let a31 = a30 + a30;
    let a32 = a31 + a31;
    let a33 = a32 + a32;
    let a34 = a33 + a33;
    let a35 = a34 + a34;
    let a36 = a35 + a35;
    let a37 = a36 + a36;
    let a38 = a37 + a37;
    let a39 = a38 + a38;
    let a40 = a39 + a39;
    let g = split(ctx, a40 - a40 + rank(ctx) / 2, rank(ctx));
    out[0] = nranks(g) as u64;
}

#[eagle::host]
pub fn deep_color(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        deep_color_d(out[r], device = r);
    }
}

#[test]
fn a_color_with_shared_subexpressions_is_evaluated_once_per_value() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    deep_color.launch(&s, &mut out).unwrap();
    assert_eq!(out.data(), [2, 2, 2, 2]);
}

/// Each rank puts its row into the next rank of its group (`r % 2`, numbered backwards), which
/// that rank reads with no wait: a race between two ranks of a split's group.
#[eagle::kernel(device)]
pub fn racy_split_d(ctx: Ctx, x: Tensor<f32, W>, y: Out<Tensor<f32, W>>, w: Window<f32, W>) {
    let g = split(ctx, rank(ctx) % 2, nranks(ctx) - rank(ctx)); // marker: racy split
    put(w, world_rank(g, (rank(g) + 1) % nranks(g)), x);
    store(y, [0], load(w, [0], [W]));
}

#[eagle::host]
pub fn racy_split(x: Tensor<f32, NR, W>, y: Out<Tensor<f32, NR, W>>) {
    let w = alloc_window_buffer([W], f32);
    for r in 0..world_size() {
        racy_split_d(x[r], y[r], window(w, [W], f32), device = r);
    }
}

#[test]
fn a_race_between_members_of_a_splits_group_names_their_group_ranks() {
    let p = 5;
    let s = Session::sim(p).unwrap();
    let x = Tensor::<f32>::zeros(&[p, W]);
    let mut y = Tensor::<f32>::zeros(&[p, W]);
    let e = racy_split.launch(&s, &x, &mut y).unwrap_err();
    use eagle::runtime::{Cause, RuntimeError};
    let eagle::Error::Runtime(RuntimeError::RankFailed {
        rank,
        cause: Cause::Race(message),
    }) = &e
    else {
        panic!("expected a race, got {e:?}");
    };
    // Color r % 2, numbered backwards: {4, 2, 0} and {3, 1}.
    let at = |r: usize| {
        let (q, n) = [(2, 3), (1, 2), (1, 3), (0, 2), (0, 3)][r];
        format!(
            "rank {r} is rank {q} of {n} in the group of color {} of the split at tests/split.rs:{}",
            r % 2,
            line_of("marker: racy split")
        )
    };
    assert!(message.ends_with(&format!("({})", at(*rank))), "{message}");
    let other = (0..p)
        .filter(|q| q != rank)
        .find(|q| message.contains(&format!("(rank {q} is ")))
        .unwrap_or_else(|| panic!("no other rank named: {message}"));
    assert!(message.contains(&at(other)), "{message}");
}

/// A split whose colors are all negative at small P: no group at all; a rank that uses it
/// stops, the others run.
#[eagle::kernel(device)]
pub fn none_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let g = split(ctx, select(rank(ctx) == 3, 0, UNDEFINED), 0);
    out[0] = 7;
    if rank(ctx) == 3 {
        out[0] = nranks(g) as u64;
    }
}

#[eagle::host]
pub fn none(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        none_d(out[r], device = r);
    }
}

/// Constants past every group of a split of groups of different sizes.
#[eagle::kernel(device)]
pub fn past_every_d(ctx: Ctx, a: Window<f32, W>, b: Window<f32, W>, out: Out<Tensor<u64, 1>>) {
    let g = split(ctx, rank(ctx) / 3, rank(ctx));
    out[0] = world_rank(g, 2) as u64;
    broadcast(g, a, b, 5); // marker: root past every group
}

#[eagle::host]
pub fn past_every(out: Out<Tensor<u64, NR, 1>>) {
    let a = alloc_window_buffer([W], f32);
    let b = alloc_window_buffer([W], f32);
    for r in 0..world_size() {
        past_every_d(window(a, [W], f32), window(b, [W], f32), out[r], device = r);
    }
}

/// Colors that cannot be known for every rank before anything runs, each for its own reason.
#[eagle::kernel(device)]
pub fn unknowable_d(ctx: Ctx, how: Tensor<u64, 1>, out: Out<Tensor<u64, 1>>) {
    let mut c = 0;
    if rank(ctx) > 1 {
        c = 1;
    }
    let g = split(ctx, c, rank(ctx));
    let h = split(ctx, rank(ctx) % 2, 0);
    let k = split(ctx, rank(h), 0);
    let z = split(ctx, 6 / (rank(ctx) - 1), 0);
    out[0] = (rank(g) + rank(k) + rank(z) + how[0] as usize) as u64;
}

#[eagle::host]
pub fn unknowable(how: Tensor<u64, NR, 1>, out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        unknowable_d(how[r], out[r], device = r);
    }
}

#[test]
fn splits_found_wanting_by_a_review_are_errors_that_name_their_cause() {
    // No group at all: rank 3 does not exist at P = 2, so no rank uses the group.
    let s = Session::sim(2).unwrap();
    let mut out = Tensor::<u64>::zeros(&[2, 1]);
    none.launch(&s, &mut out).unwrap();
    assert_eq!(out.data(), [7, 7]);
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    none.launch(&s, &mut out).unwrap();
    assert_eq!(out.data(), [7, 7, 7, 1]);
    // Constants past every group: at P = 4 the groups are {0, 1, 2} and {3}.
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = past_every.launch(&s, &mut out).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "tests/split.rs:{}",
            line_of("marker: root past every group")
        )),
        "{e}"
    );
    assert!(e.ends_with("the root is 5, but the largest group's ranks are 0 to 2; the root of a broadcast within a group is a group rank: give one below `nranks(group)`"), "{e}");
    let e = unknowable
        .launch(&s, &Tensor::<u64>::zeros(&[4, 1]), &mut out)
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("these depend on a `let mut` variable, whose value is only known as the program runs (compute the color in one expression)"), "{e}");
}

/// A color from another group's rank.
#[eagle::kernel(device)]
pub fn of_a_group_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let h = split(ctx, rank(ctx) % 2, 0);
    let k = split(ctx, rank(h), 0);
    out[0] = world_rank(k, 9) as u64;
}

#[eagle::host]
pub fn of_a_group(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        of_a_group_d(out[r], device = r);
    }
}

/// A color that divides by zero at P = 3, and a constant group rank past every group.
#[eagle::kernel(device)]
pub fn by_zero_d(ctx: Ctx, out: Out<Tensor<u64, 2>>) {
    let g = split(ctx, rank(ctx) / 3, rank(ctx));
    out[0] = world_rank(g, 3) as u64; // marker: past every group
    let z = split(ctx, 6 / (nranks(ctx) - 3), 0);
    out[1] = rank(z) as u64;
}

#[eagle::host]
pub fn by_zero(out: Out<Tensor<u64, NR, 2>>) {
    for r in 0..world_size() {
        by_zero_d(out[r], device = r);
    }
}

#[test]
fn a_color_of_a_groups_rank_or_that_divides_by_zero_names_why() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = of_a_group.launch(&s, &mut out).unwrap_err().to_string();
    assert!(e.ends_with("these depend on a group's `rank` or `nranks` (only the world's are known for every rank before anything runs)"), "{e}");
    let mut out = Tensor::<u64>::zeros(&[4, 2]);
    let e = by_zero.launch(&s, &mut out).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "tests/split.rs:{}",
            line_of("marker: past every group")
        )),
        "{e}"
    );
    assert!(e.ends_with("group rank 3 of a split whose largest group's ranks are 0 to 2; give a rank below `nranks(group)` (reduce it modulo `nranks(group)` for a ring)"), "{e}");
    // At P = 3 every rank divides by zero (and the constant is in range).
    let s = Session::sim(3).unwrap();
    let mut out = Tensor::<u64>::zeros(&[3, 2]);
    let e = by_zero.launch(&s, &mut out).unwrap_err().to_string();
    assert!(e.contains("these cannot be computed on rank 0: "), "{e}");
}

/// A rank left out whose `world_rank` argument is also past the group: the missing group is
/// the error (P = 3: ranks 0 and 1 form the group, rank 2 asks for group rank 5).
#[eagle::kernel(device)]
pub fn left_out_far_d(ctx: Ctx, out: Out<Tensor<u64, 1>>) {
    let g = split(ctx, select(rank(ctx) == 2, UNDEFINED, 0), rank(ctx));
    out[0] = world_rank(g, rank(ctx) / 2 * 5) as u64;
}

#[eagle::host]
pub fn left_out_far(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        left_out_far_d(out[r], device = r);
    }
}

#[test]
fn a_rank_left_out_is_told_so_before_its_rank_is_checked() {
    let s = Session::sim(3).unwrap();
    let mut out = Tensor::<u64>::zeros(&[3, 1]);
    let e = left_out_far.launch(&s, &mut out).unwrap_err().to_string();
    assert!(e.starts_with("rank 2 failed: "), "{e}");
    assert!(e.contains(", no_group` ("), "{e}");
    assert!(
        e.contains("world rank 2 is in no group of this split"),
        "{e}"
    );
}
