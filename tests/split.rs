//! Rank groups by color and key: `split(ctx, color, key)` groups the ranks of one color,
//! numbered by key, as `MPI_Comm_split` does. Once P is known, the color and key are evaluated
//! for every rank and the groups lowered as those of a process grid, so `split(ctx, r / TP, r)`
//! is `group(ctx, [{ NR / TP }, TP], 1)` and `split(ctx, r % TP, 0)` is `group(.., 0)`, bit for
//! bit (checked at every P from 1 to 8 and every TP that divides it, race detector on). A split
//! whose groups are not a grid's (sizes that differ, a key against world-rank order, a color
//! computed from data) is refused before anything runs, naming the ranks and colors.
use eagle::codegen::{CodegenError, SpecializeError};
use eagle::prelude::*;

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

/// A split by a color or key that the grid form cannot give: `how` picks it.
#[eagle::kernel(device)]
pub fn odd_split_d(ctx: Ctx, how: Tensor<u64, 1>, out: Out<Tensor<u64, 1>>) {
    let r = rank(ctx);
    let g = split(ctx, r / 3, r); // marker: uneven
    let h = split(ctx, 0, nranks(ctx) - r); // marker: reversed
    let k = split(ctx, how[0] as usize, r); // marker: from data
    out[0] = (rank(g) + rank(h) + rank(k)) as u64;
}

#[eagle::host]
pub fn odd_split(how: Tensor<u64, NR, 1>, out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        odd_split_d(how[r], out[r], device = r);
    }
}

/// The 1-based line of this file that holds `needle`.
fn line_of(needle: &str) -> u32 {
    let text = include_str!("split.rs");
    let i = text.lines().position(|l| l.contains(needle)).unwrap();
    i as u32 + 1
}

#[test]
fn a_split_that_is_not_a_grid_is_refused_before_anything_runs_naming_the_ranks() {
    let p = 4;
    let s = Session::sim(p).unwrap();
    let how = Tensor::<u64>::zeros(&[p, 1]);
    let mut out = Tensor::<u64>::zeros(&[p, 1]);
    let e = odd_split.launch(&s, &how, &mut out).unwrap_err();
    let eagle::Error::Codegen(CodegenError::Specialize(sp)) = &e else {
        panic!("{e}");
    };
    let SpecializeError::Group {
        function,
        op,
        loc,
        message,
    } = &**sp
    else {
        panic!("{e}");
    };
    assert_eq!((function.as_str(), op.as_str()), ("odd_split_d", "split"));
    // The first split met is refused: ranks 0-2 have color 0, rank 3 color 1.
    assert_eq!(
        loc.as_ref().map(|l| l.line),
        Some(line_of("marker: uneven"))
    );
    assert_eq!(
        message,
        "color 0 holds 3 ranks (from rank 0) but color 1 holds 1 (from rank 3); the groups of a split have one size: give every group the same number of ranks (`rank(ctx) / TP` makes groups of TP)"
    );
    // At P = 3 the first split is one group; the second numbers the ranks backwards.
    let s = Session::sim(3).unwrap();
    let how = Tensor::<u64>::zeros(&[3, 1]);
    let mut out = Tensor::<u64>::zeros(&[3, 1]);
    let e = odd_split
        .launch(&s, &how, &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!("tests/split.rs:{}", line_of("marker: reversed"))),
        "{e}"
    );
    assert!(
        e.contains("the key numbers rank 2 before rank 1 in the group of color 0; unlike `MPI_Comm_split`, eagle numbers a group's ranks in world-rank order: give a key that grows with the rank (`rank(ctx)`) or one key for all, and number the ranks yourself where you need another order (`nranks(g) - 1 - rank(g)`, with `world_rank(g, q)` for the peers)"),
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
    out[0] = rank(g) as u64;
}

#[eagle::host]
pub fn spaced(out: Out<Tensor<u64, NR, 1>>) {
    for r in 0..world_size() {
        spaced_d(out[r], device = r);
    }
}

#[test]
fn groups_that_are_not_equally_spaced_are_refused() {
    let s = Session::sim(4).unwrap();
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = spaced.launch(&s, &mut out).unwrap_err().to_string();
    assert!(
        e.contains("ranks 1 and 2 of color 1 are 1 apart, but the ranks of a group so far are 3 apart; the groups of a split are those of a process grid, their ranks equally spaced alike: ranks `r / TP` (consecutive) or `r % TP` (strided)"),
        "{e}"
    );
    // At P = 2 the same split is the world's rank order: {0} and {1}.
    let s = Session::sim(2).unwrap();
    let mut out = Tensor::<u64>::zeros(&[2, 1]);
    spaced.launch(&s, &mut out).unwrap();
    assert_eq!(out.data(), [0, 0]);
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
    let mut out = Tensor::<u64>::zeros(&[4, 1]);
    let e = wrapped_key.launch(&s, &mut out).unwrap_err().to_string();
    assert!(
        e.contains("the key numbers rank 3 before rank 0 in the group of color 0"),
        "{e}"
    );
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
