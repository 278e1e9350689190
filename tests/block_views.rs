//! Block views on every dim (issue 38, item 4): `subview(x, [offsets], [extents])` of tensors
//! and windows, read and written by tile loads and stores, element accesses and remote loads,
//! viewed again, with run-time offsets; checked at run time (an error naming the line) and
//! refused by the verifier where a contiguous buffer is needed. On `sim` at P = 1..4 and in
//! the CUDA emulation, against plain-Rust goldens.
use eagle::prelude::*;

#[cfg(feature = "cuda")]
mod emulation;

const NR: Dim = dynamic!("NR");
const R: usize = 8;
const C: usize = 16;

fn seq(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|i| i as f32 * k + 1.0).collect()
}

/// Column blocks: a `[R, 4]` block at column `4 * (rank % 3)` read by one tile load, the
/// block's columns read one by one (a run-time offset in the view), a `[4, 8]` block of the
/// output written through a view of a view, and elements read and written through views.
#[eagle::kernel(device)]
pub fn columns(
    ctx: Ctx,
    x: Tensor<f32, R, C>,
    y: Out<Tensor<f32, R, C>>,
    z: Out<Tensor<f32, R, 4>>,
) {
    let c0 = (rank(ctx) % 3) * 4;
    let col = subview(x, [0, c0], [R, 4]);
    store(z, [0, 0], load(col, [0, 0], [R, 4]) * 2.0);
    store(y, [0, 0], load(x, [0, 0], [R, C]));
    for j in 0..4 {
        store(y, [0, j], load(col, [0, j], [R, 1]) + 100.0);
    }
    let right = subview(y, [2, 8], [6, 8]);
    let inner = subview(right, [1, 2], [4, 4]);
    store(inner, [0, 0], load(x, [0, 0], [4, 4]) * -1.0);
    let e = subview(x, [3, 5], [2, 3]);
    y[7][15] = e[1][2];
    inner[3][3] = e[0][0] + 0.5;
}

#[eagle::host]
pub fn columns_all(
    x: Tensor<f32, NR, R, C>,
    y: Out<Tensor<f32, NR, R, C>>,
    z: Out<Tensor<f32, NR, R, 4>>,
) {
    for r in 0..world_size() {
        columns(x[r], y[r], z[r], device = r);
    }
}

fn columns_golden(x: &[f32], r: usize) -> (Vec<f32>, Vec<f32>) {
    let c0 = (r % 3) * 4;
    let at = |i: usize, j: usize| x[i * C + j];
    let mut z = vec![0.0; R * 4];
    for i in 0..R {
        for j in 0..4 {
            z[i * 4 + j] = at(i, c0 + j) * 2.0;
        }
    }
    let mut y = x.to_vec();
    for i in 0..R {
        for j in 0..4 {
            y[i * C + j] = at(i, c0 + j) + 100.0;
        }
    }
    for i in 0..4 {
        for j in 0..4 {
            y[(3 + i) * C + 10 + j] = -at(i, j);
        }
    }
    y[7 * C + 15] = at(4, 7);
    y[6 * C + 13] = at(3, 5) + 0.5;
    (y, z)
}

fn check_columns(s: &Session) {
    let p = s.world_size();
    let x = Tensor::<f32>::from_vec(&[p, R, C], seq(p * R * C, 0.25)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[p, R, C]);
    let mut z = Tensor::<f32>::zeros(&[p, R, 4]);
    columns_all.launch(s, &x, &mut y, &mut z).unwrap();
    for r in 0..p {
        let (wy, wz) = columns_golden(&x.data()[r * R * C..(r + 1) * R * C], r);
        assert_eq!(
            &y.data()[r * R * C..(r + 1) * R * C],
            &wy[..],
            "y, rank {r} of {p}"
        );
        assert_eq!(
            &z.data()[r * R * 4..(r + 1) * R * 4],
            &wz[..],
            "z, rank {r} of {p}"
        );
    }
}

#[test]
fn column_blocks_of_tensors_at_every_p() {
    for p in 1..=4 {
        check_columns(&Session::sim(p).unwrap());
    }
}

#[cfg(feature = "cuda")]
#[test]
fn column_blocks_in_a_gpu_block_match_sim() {
    emulation::cxx();
    for p in [1, 3] {
        check_columns(&Session::cuda_emulated((0..p).collect()).unwrap());
    }
}

/// A column block of the right-hand neighbour's window, read with `remote_load` through a
/// block view of the window; the block written into this rank's window through another.
#[eagle::kernel(device)]
pub fn halo(ctx: Ctx, x: Tensor<f32, 4, 8>, y: Out<Tensor<f32, 4, 2>>, win: Window<f32, 4, 8>) {
    let me = rank(ctx);
    let right = (me + 1) % nranks(ctx);
    let mid = subview(win, [0, 3], [4, 2]);
    store(mid, [0, 0], load(x, [0, 3], [4, 2]) + 0.5);
    barrier(ctx);
    let edge = subview(win, [0, 3], [4, 2]);
    store(y, [0, 0], remote_load(edge, right, [0, 0], [4, 2]));
    barrier(ctx);
}

#[eagle::host]
pub fn halo_all(x: Tensor<f32, NR, 4, 8>, y: Out<Tensor<f32, NR, 4, 2>>) {
    let b = alloc_window_buffer([4, 8], f32);
    for r in 0..world_size() {
        halo(x[r], y[r], window(b, [4, 8], f32), device = r);
    }
}

#[test]
fn a_column_block_of_a_peers_window() {
    for p in 1..=4 {
        let s = Session::sim(p).unwrap();
        let x = Tensor::<f32>::from_vec(&[p, 4, 8], seq(p * 32, 1.0)).unwrap();
        let mut y = Tensor::<f32>::zeros(&[p, 4, 2]);
        halo_all.launch(&s, &x, &mut y).unwrap();
        for r in 0..p {
            let q = (r + 1) % p;
            let want: Vec<f32> = (0..4)
                .flat_map(|i| (3..5).map(move |j| (i, j)))
                .map(|(i, j)| x.data()[q * 32 + i * 8 + j] + 0.5)
                .collect();
            assert_eq!(&y.data()[r * 8..(r + 1) * 8], &want[..], "rank {r} of {p}");
        }
    }
}

/// A view whose column offset is 13 on rank 1 of 2 (past 12, the last start of 4 columns in 16),
/// and a load of 2 columns at column 3 of a 4-column view on rank 2 (past 2).
#[eagle::kernel(device)]
pub fn off_the_edge(ctx: Ctx, x: Tensor<f32, R, C>, z: Out<Tensor<f32, R, 2>>) {
    let me = rank(ctx);
    let c0 = select(me * 10 + nranks(ctx) == 12, 13, 0);
    let col = subview(x, [0, c0], [R, 4]);
    let j = select(me == 2, 3, 0);
    store(z, [0, 0], load(col, [0, j], [R, 2]));
}

#[eagle::host]
pub fn off_the_edge_all(x: Tensor<f32, NR, R, C>, z: Out<Tensor<f32, NR, R, 2>>) {
    for r in 0..world_size() {
        off_the_edge(x[r], z[r], device = r);
    }
}

#[test]
fn offsets_past_a_view_stop_the_rank_at_the_line() {
    let run = |p: usize| {
        let x = Tensor::<f32>::from_vec(&[p, R, C], seq(p * R * C, 1.0)).unwrap();
        let mut z = Tensor::<f32>::zeros(&[p, R, 2]);
        let r = off_the_edge_all.launch(&Session::sim(p).unwrap(), &x, &mut z);
        (r.map_err(|e| e.to_string()), z)
    };
    let (ok, z) = run(1);
    ok.unwrap();
    assert_eq!(&z.data()[..4], &[1.0, 2.0, 17.0, 18.0]);
    let e = run(2).0.unwrap_err();
    assert_eq!(e, "rank 1 failed: function `off_the_edge`, op `trap_if %15, %12, %16, view_offset` (at tests/block_views.rs:163:15): a block view starts at offset 13 along a dim, past 12, the last start at which its extent fits in the buffer it views; keep each offset plus the view's extent within the buffer");
    let e = run(3).0.unwrap_err();
    assert_eq!(e, "rank 2 failed: function `off_the_edge`, op `trap_if %25, %21, %26, view_access` (at tests/block_views.rs:165:22): an access through a block view starts at 3 along a dim, past 2, the last start at which it fits in the view's extent; an access through `subview(x, [offsets], [extents])` stays within those extents");
}

/// A block view given to `put`, which copies contiguous bytes: refused before anything runs.
#[eagle::kernel(device)]
pub fn put_a_block(ctx: Ctx, win: Window<f32, 4, 8>) {
    let blk = subview(win, [0, 2], [4, 2]);
    put(blk, 0, blk);
}

#[test]
fn a_block_view_is_not_a_contiguous_buffer() {
    let e = put_a_block.ir().unwrap_err().to_string();
    assert_eq!(e, "verifier: in function `put_a_block`, op `put %4, %5, %4` (at tests/block_views.rs:196:5): operand 0 is a block view (`subview(x, [offsets], [extents])`), whose rows are not contiguous; `put` takes a contiguous buffer: move the block through a tile (`load` it from the view, then `store` it or `put` a buffer of whole rows), or view whole rows with `subview(x, offset, LEN)`");
}

#[test]
fn block_views_in_the_ir() {
    let ir = columns.ir().unwrap();
    assert!(ir.contains("= view %1[%"), "{ir}");
    assert!(ir.contains(": tensor<[8, 4], f32>"), "{ir}");
}

/// Rank 0 writes columns 2..4 of rank 1's window through a block view while rank 1 reads
/// columns `c..c + 2` of its own through another, with no barrier between: the race detector
/// sees the bytes each touches, so disjoint columns of the same rows are no race.
#[eagle::kernel(device)]
pub fn cols_race_d(
    ctx: Ctx,
    c: usize,
    x: Tensor<f32, 4, 8>,
    y: Out<Tensor<f32, 4, 2>>,
    win: Window<f32, 4, 8>,
) {
    let me = rank(ctx);
    store(win, [0, 0], load(x, [0, 0], [4, 8]));
    barrier(ctx);
    if me == 0 {
        remote_store(
            subview(win, [0, 2], [4, 2]),
            1,
            [0, 0],
            load(x, [0, 0], [4, 2]),
        );
    }
    if me == 1 {
        store(
            y,
            [0, 0],
            load(subview(win, [0, c], [4, 2]), [0, 0], [4, 2]),
        );
    }
    barrier(ctx);
}

#[eagle::host]
pub fn cols_race(c: usize, x: Tensor<f32, NR, 4, 8>, y: Out<Tensor<f32, NR, 4, 2>>) {
    let b = alloc_window_buffer([4, 8], f32);
    for r in 0..world_size() {
        cols_race_d(c, x[r], y[r], window(b, [4, 8], f32), device = r);
    }
}

#[test]
fn the_race_detector_sees_the_columns_a_view_touches() {
    let s = Session::sim(2).unwrap();
    let x = Tensor::<f32>::from_vec(&[2, 4, 8], seq(64, 1.0)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[2, 4, 2]);
    cols_race.launch(&s, 4, &x, &mut y).unwrap();
    let want: Vec<f32> = (0..4)
        .flat_map(|i| [x.data()[32 + i * 8 + 4], x.data()[32 + i * 8 + 5]])
        .collect();
    assert_eq!(&y.data()[8..], &want[..]);
    let e = cols_race.launch(&s, 3, &x, &mut y).unwrap_err().to_string();
    assert!(e.contains("data race"), "{e}");
}

/// A block view at a constant column offset that does not fit (14 + 4 > 16).
#[eagle::kernel(device)]
pub fn past_the_end(ctx: Ctx, x: Tensor<f32, R, C>, z: Out<Tensor<f32, R, 4>>) {
    store(z, [0, 0], load(subview(x, [0, 14], [R, 4]), [0, 0], [R, 4]));
}

#[eagle::host]
pub fn past_the_end_all(x: Tensor<f32, NR, R, C>, z: Out<Tensor<f32, NR, R, 4>>) {
    for r in 0..world_size() {
        past_the_end(x[r], z[r], device = r);
    }
}

#[test]
fn a_constant_offset_past_a_view_is_refused_before_anything_runs() {
    let x = Tensor::<f32>::zeros(&[2, R, C]);
    let mut z = Tensor::<f32>::from_vec(&[2, R, 4], vec![7.0; 2 * R * 4]).unwrap();
    let e = past_the_end_all
        .launch(&Session::sim(2).unwrap(), &x, &mut z)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "function `past_the_end`, op `%5 = view %1[%3, %4] : tensor<[8, 4], f32>` (at tests/block_views.rs:269:27): the block view's offset in dim 1 plus its extent 4 spans 14..=17 but dimension 1 has extent 16; keep the index below the extent (or grow the tensor)");
    assert!(z.data().iter().all(|&v| v == 7.0), "nothing ran");
}

/// A column offset of `3 * rank + 1`: 16 on rank 5 of 6, past the 16 columns (a break-test
/// finding: the error named the rewritten element access, not the view).
#[eagle::kernel(device)]
pub fn ranked_edge(ctx: Ctx, x: Tensor<f32, R, C>, z: Out<Tensor<f32, 1>>) {
    let c = rank(ctx) * 3 + 1;
    let v = subview(x, [1, c], [2, 2]);
    z[0] = v[0][0] + v[1][1];
}

#[eagle::host]
pub fn ranked_edge_all(x: Tensor<f32, NR, R, C>, z: Out<Tensor<f32, NR, 1>>) {
    for r in 0..world_size() {
        ranked_edge(x[r], z[r], device = r);
    }
}

/// An `[R, 8]` tile from a `[R, 4]` view at a run-time column (a break-test finding: it read
/// columns past the view without an error).
#[eagle::kernel(device)]
pub fn too_wide(ctx: Ctx, x: Tensor<f32, R, C>, y: Out<Tensor<f32, R, 8>>) {
    let v = subview(x, [0, 2], [R, 4]);
    let j = rank(ctx) % 2;
    store(y, [0, 0], load(v, [0, j], [R, 8]));
}

#[eagle::host]
pub fn too_wide_all(x: Tensor<f32, NR, R, C>, y: Out<Tensor<f32, NR, R, 8>>) {
    for r in 0..world_size() {
        too_wide(x[r], y[r], device = r);
    }
}

#[test]
fn what_specialization_knows_does_not_fit_is_refused_at_the_view() {
    let x = Tensor::<f32>::zeros(&[6, R, C]);
    let mut z = Tensor::<f32>::zeros(&[6, 1]);
    let e = ranked_edge_all
        .launch(&Session::sim(6).unwrap(), &x, &mut z)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "function `ranked_edge`, op `%9 = view %1[%8, %7] : tensor<[2, 2], f32>` (at tests/block_views.rs:296:13): the block view's offset in dim 1 plus its extent 2 spans 1..=17 but dimension 1 has extent 16; keep the index below the extent (or grow the tensor)");
    let x = Tensor::<f32>::zeros(&[5, R, C]);
    let mut z = Tensor::<f32>::zeros(&[5, 1]);
    ranked_edge_all
        .launch(&Session::sim(5).unwrap(), &x, &mut z)
        .unwrap();
    let x = Tensor::<f32>::zeros(&[2, R, C]);
    let mut y = Tensor::<f32>::zeros(&[2, R, 8]);
    let e = too_wide_all
        .launch(&Session::sim(2).unwrap(), &x, &mut y)
        .unwrap_err()
        .to_string();
    assert_eq!(e, "verifier: in function `too_wide`, op `%10 = load %5[%9, %8] : tile<[8, 8], f32>` (at tests/block_views.rs:313:22): the tile is 8 wide along dim 1, but the block view it goes through has extent 4 there; narrow the tile or widen the view");
}

/// Elements of a block view of a window, read and written with one index per dim (a
/// break-test finding: the macro took `v[0][1]` for a slice of a window and refused it).
#[eagle::kernel(device)]
pub fn window_elems(ctx: Ctx, y: Out<Tensor<f32, 2>>, win: Window<f32, 4, 8>) {
    let v = subview(win, [1, 2], [2, 2]);
    v[0][1] = 5.0 + rank(ctx) as f32;
    v[1][0] += 0.5;
    barrier(ctx);
    y[0] = v[0][1];
    y[1] = v[1][0];
    barrier(ctx);
}

#[eagle::host]
pub fn window_elems_all(y: Out<Tensor<f32, NR, 2>>) {
    let b = alloc_window_buffer([4, 8], f32);
    for r in 0..world_size() {
        window_elems(y[r], window(b, [4, 8], f32), device = r);
    }
}

#[test]
fn elements_of_a_view_of_a_window() {
    let mut y = Tensor::<f32>::zeros(&[2, 2]);
    window_elems_all
        .launch(&Session::sim(2).unwrap(), &mut y)
        .unwrap();
    assert_eq!(y.data(), &[5.0, 0.5, 6.0, 0.5]);
}

/// Whole rows through the block form are contiguous: `put` takes them (a break-test finding:
/// they were refused as strided).
#[eagle::kernel(device)]
pub fn put_rows(ctx: Ctx, x: Tensor<f32, 4, 8>, y: Out<Tensor<f32, 4, 8>>, win: Window<f32, 4, 8>) {
    let right = (rank(ctx) + 1) % nranks(ctx);
    put(
        subview(win, [1, 0], [2, 8]),
        right,
        subview(x, [1, 0], [2, 8]),
    );
    barrier(ctx);
    store(y, [0, 0], load(win, [0, 0], [4, 8]));
    barrier(ctx);
}

#[eagle::host]
pub fn put_rows_all(x: Tensor<f32, NR, 4, 8>, y: Out<Tensor<f32, NR, 4, 8>>) {
    let b = alloc_window_buffer([4, 8], f32);
    for r in 0..world_size() {
        put_rows(x[r], y[r], window(b, [4, 8], f32), device = r);
    }
}

#[test]
fn whole_rows_through_the_block_form_are_contiguous() {
    for p in 1..=3 {
        let x = Tensor::<f32>::from_vec(&[p, 4, 8], seq(p * 32, 1.0)).unwrap();
        let mut y = Tensor::<f32>::zeros(&[p, 4, 8]);
        put_rows_all
            .launch(&Session::sim(p).unwrap(), &x, &mut y)
            .unwrap();
        for r in 0..p {
            let left = (r + p - 1) % p;
            let mut want = [0.0f32; 32];
            want[8..24].copy_from_slice(&x.data()[left * 32 + 8..left * 32 + 24]);
            assert_eq!(
                &y.data()[r * 32..(r + 1) * 32],
                &want[..],
                "rank {r} of {p}"
            );
        }
    }
    let ir = put_rows.ir().unwrap();
    assert!(ir.contains("= view %3["), "{ir}");
}

/// A compute kernel that takes a tensor and returns a tile, built in place at its call.
#[eagle::kernel]
pub fn block_t(b: Tensor<f32, 4, 4>) -> Tile<f32, 4, 4> {
    transpose(load(b, [0, 0], [4, 4]))
}

/// Transposes `x` block by block: each 4 x 4 block is handed to `block_t` as a view (a
/// new-user finding: the docs said calls refuse views; kernels that return values take them).
#[eagle::kernel(device)]
pub fn transpose_blocks(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    for bi in 0..2 {
        for bj in 0..2 {
            let t = block_t(subview(x, [bi * 4, bj * 4], [4, 4]));
            store(subview(y, [bj * 4, bi * 4], [4, 4]), [0, 0], t);
        }
    }
}

#[eagle::host]
pub fn transpose_all(x: Tensor<f32, NR, 8, 8>, y: Out<Tensor<f32, NR, 8, 8>>) {
    for r in 0..world_size() {
        transpose_blocks(x[r], y[r], device = r);
    }
}

/// One offset per dim, offsets first: a location names the line of a wrong count.
#[eagle::kernel(device)]
pub fn three_offsets(ctx: Ctx, x: Tensor<f32, 8, 8>, z: Out<Tensor<f32, 1>>) {
    let v = subview(x, [0, 0, 0], [8, 8]);
    z[0] = v[0][0];
}

#[test]
fn views_go_to_kernels_that_return_values() {
    let x = Tensor::<f32>::from_vec(&[2, 8, 8], seq(128, 1.0)).unwrap();
    let mut y = Tensor::<f32>::zeros(&[2, 8, 8]);
    transpose_all
        .launch(&Session::sim(2).unwrap(), &x, &mut y)
        .unwrap();
    for r in 0..2 {
        for i in 0..8 {
            for j in 0..8 {
                assert_eq!(y.data()[r * 64 + j * 8 + i], x.data()[r * 64 + i * 8 + j]);
            }
        }
    }
    let e = three_offsets.ir().unwrap_err().to_string();
    assert_eq!(e, "in function `three_offsets`: `subview` of a buffer of shape [8, 8] takes 2 offsets and 2 extents, one per dim (offsets first, then extents); found 3 and 2 (at tests/block_views.rs:450:13)");
}
