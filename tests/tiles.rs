//! The tile algebra from the kernel language: reductions, broadcasting, layout and creation
//! ops, matmul and tile variables written in `#[eagle::kernel]` code, run on `sim` and in the
//! CUDA emulation against plain-Rust goldens; and every misuse the issue names refused before
//! anything runs, with the Rust source line and both shapes.
use eagle::ir::IrError;
use eagle::prelude::*;
use eagle::Error;
use eagle_runner::golden::lane_sum;

#[cfg(feature = "cuda")]
mod emulation;

const M: usize = 4;
const N: usize = 12;

/// Column statistics and layout ops in one kernel: `y` gets, row by row, `x - col_mean`
/// (a `[1, N]` row broadcast), then the transpose of `x`, then `iota` along the columns
/// times a `[1, 1]` tile, then `concat` of two `extract`ed halves swapped; `s` gets the
/// whole-tile sum, max and the argmax of each row.
#[eagle::kernel(device)]
pub fn stats(
    ctx: Ctx,
    x: Tensor<f32, M, N>,
    y: Out<Tensor<f32, 4, M, N>>,
    s: Out<Tensor<f32, 2>>,
    am: Out<Tensor<i64, M, 1>>,
) {
    let t = load(x, [0, 0], [M, N]);
    let mean = col_sum(t) / (M as f32);
    store(y, [0, 0, 0], reshape(t - mean, [1, M, N]));
    let tt = transpose(t);
    store(y, [1, 0, 0], reshape(tt, [1, M, N]));
    let one = full([1, 1], 2.0);
    let i = iota([M, N], 1, f32) * one;
    store(y, [2, 0, 0], reshape(i, [1, M, N]));
    let left = extract(t, [0, 0], [M, 6]);
    let right = extract(t, [0, 6], [M, 6]);
    store(y, [3, 0, 0], reshape(concat(right, left, 1), [1, M, N]));
    s[0] = reduce_sum(t);
    s[1] = reduce_max(t);
    store(am, [0, 0], row_argmax(t));
}

/// Host: one rank.
#[eagle::host]
pub fn stats_host(
    x: Tensor<f32, M, N>,
    y: Out<Tensor<f32, 4, M, N>>,
    s: Out<Tensor<f32, 2>>,
    am: Out<Tensor<i64, M, 1>>,
) {
    stats(x, y, s, am, device = 0);
}

fn stats_golden(x: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<i64>) {
    let mut y = vec![0.0f32; 4 * M * N];
    for j in 0..N {
        let col: Vec<f32> = (0..M).map(|i| x[i * N + j]).collect();
        let mean = lane_sum(&col) / M as f32;
        for i in 0..M {
            y[i * N + j] = x[i * N + j] - mean;
        }
    }
    // The transpose, read back as [M, N] row-major: element e of x^T ([N, M]).
    for e in 0..M * N {
        let (a, b) = (e / M, e % M);
        y[M * N + e] = x[b * N + a];
    }
    for i in 0..M {
        for j in 0..N {
            y[2 * M * N + i * N + j] = j as f32 * 2.0;
            let src = if j < 6 { j + 6 } else { j - 6 };
            y[3 * M * N + i * N + j] = x[i * N + src];
        }
    }
    let s = vec![
        lane_sum(x),
        x.iter().copied().fold(f32::NEG_INFINITY, f32::max),
    ];
    let am = (0..M)
        .map(|i| {
            let row = &x[i * N..(i + 1) * N];
            let mut best = 0;
            for k in 1..N {
                if row[k] > row[best] {
                    best = k;
                }
            }
            best as i64
        })
        .collect();
    (y, s, am)
}

fn check_stats(s: &Session) {
    let x = eagle_runner::random_tensor(&[M, N], 5);
    let mut y = Tensor::<f32>::zeros(&[4, M, N]);
    let mut sc = Tensor::<f32>::zeros(&[2]);
    let mut am = Tensor::<i64>::zeros(&[M, 1]);
    stats_host.launch(s, &x, &mut y, &mut sc, &mut am).unwrap();
    let (wy, ws, wam) = stats_golden(x.data());
    eagle_runner::check_bits("y", y.data(), &wy).unwrap();
    eagle_runner::check_bits("s", sc.data(), &ws).unwrap();
    assert_eq!(am.data(), &wam[..]);
}

#[test]
fn column_statistics_layout_and_creation_ops_match_plain_rust() {
    check_stats(&Session::sim(1).unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn column_statistics_layout_and_creation_ops_match_in_the_cuda_emulation() {
    emulation::cxx();
    let s = Session::cuda_emulated(vec![0]).unwrap();
    check_stats(&s);
}

/// A loop-carried tile: `acc` doubles and gains `x` each turn; scalars and `[1, 1]` tiles
/// broadcast into it.
#[eagle::kernel(device)]
pub fn carried(ctx: Ctx, x: Tensor<f64, M, N>, y: Out<Tensor<f64, M, N>>) {
    let t = load(x, [0, 0], [M, N]);
    let mut acc = zeros([M, N], f64);
    for k in 0..3 {
        acc = acc * 2.0 + t;
    }
    let m = row_min(acc);
    acc = acc - m;
    store(y, [0, 0], acc);
}

#[eagle::host]
pub fn carried_host(x: Tensor<f64, M, N>, y: Out<Tensor<f64, M, N>>) {
    carried(x, y, device = 0);
}

#[test]
fn a_tile_variable_carries_its_value_through_a_loop() {
    let x = Tensor::from_vec(
        &[M, N],
        (0..M * N).map(|i| (i as f64) * 0.5 - 7.0).collect(),
    )
    .unwrap();
    let mut y = Tensor::<f64>::zeros(&[M, N]);
    carried_host
        .launch(&Session::sim(1).unwrap(), &x, &mut y)
        .unwrap();
    let mut want = vec![0.0f64; M * N];
    for i in 0..M {
        let row: Vec<f64> = (0..N)
            .map(|j| {
                ((0.0 * 2.0 + x.data()[i * N + j]) * 2.0 + x.data()[i * N + j]) * 2.0
                    + x.data()[i * N + j]
            })
            .collect();
        let m = row.iter().copied().fold(f64::INFINITY, f64::min);
        for j in 0..N {
            want[i * N + j] = row[j] - m;
        }
    }
    eagle_runner::check_bits_f64("y", y.data(), &want).unwrap();
    let ir = <carried as eagle::ir::EagleFn>::ir().unwrap();
    assert!(
        ir.contains("var ") && ir.contains(": ref<tile<[4, 12], f64>>"),
        "{ir}"
    );
}

/// The 1-based line of this file that holds `marker`.
fn line_of(marker: &str) -> u32 {
    let src = include_str!("tiles.rs");
    let hits: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker) && !l.contains("line_of(") && !l.contains("\"marker:"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        hits.len(),
        1,
        "marker {marker:?} must be on exactly one line"
    );
    hits[0] as u32
}

// Kernels that misuse the tile algebra, one mistake each (marked).
#[eagle::kernel(device)]
pub fn row_of_1d(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let t = load(x, [0, 0], [1, 8]);
    let v = reshape(t, [8]);
    let s = row_sum(v); // marker: row of 1-D
}

#[eagle::host]
pub fn row_of_1d_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    row_of_1d(x, y, device = 0);
}

#[eagle::kernel(device)]
pub fn row_of_3d(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let t = load(x, [0, 0], [8, 8]);
    let s = row_max(reshape(t, [2, 4, 8])); // marker: row of 3-D
}

#[eagle::host]
pub fn row_of_3d_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    row_of_3d(x, y, device = 0);
}

#[eagle::kernel(device)]
pub fn inner_dims(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let a = load(x, [0, 0], [4, 8]);
    let b = load(x, [0, 0], [4, 8]);
    store(y, [0, 0], matmul(a, b)); // marker: inner dims
}

#[eagle::host]
pub fn inner_dims_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    inner_dims(x, y, device = 0);
}

#[eagle::kernel(device)]
pub fn reshape_count(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let t = load(x, [0, 0], [8, 8]);
    let r = reshape(t, [8, 7]); // marker: reshape count
}

#[eagle::host]
pub fn reshape_count_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    reshape_count(x, y, device = 0);
}

#[eagle::kernel(device)]
pub fn bad_broadcast(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let a = load(x, [0, 0], [8, 8]);
    let b = load(x, [0, 0], [8, 2]);
    store(y, [0, 0], a + b); // marker: bad broadcast
}

#[eagle::host]
pub fn bad_broadcast_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    bad_broadcast(x, y, device = 0);
}

#[eagle::kernel(device)]
pub fn extract_out(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let t = load(x, [0, 0], [8, 8]);
    let e = extract(t, [4, 0], [5, 8]); // marker: extract out
}

#[eagle::host]
pub fn extract_out_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    extract_out(x, y, device = 0);
}

#[eagle::kernel(device)]
pub fn var_shape(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let mut acc = zeros([8, 8], f32);
    acc = load(x, [0, 0], [8, 4]); // marker: var shape
}

#[eagle::host]
pub fn var_shape_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    var_shape(x, y, device = 0);
}

/// Launches `f` and returns the build error's message, checking that it names this file at
/// the marker's line.
fn build_error(e: Error, marker: &str) -> String {
    let Error::Ir(IrError::Build { message, .. }) = &e else {
        panic!("expected a build error, got {e:?}");
    };
    let at = format!("(at tests/tiles.rs:{}:", line_of(marker));
    assert!(message.contains(&at), "{message} lacks {at}");
    message.clone()
}

#[test]
fn every_misuse_is_an_error_before_anything_runs_with_its_line() {
    let s = Session::sim(1).unwrap();
    let x = Tensor::<f32>::zeros(&[8, 8]);
    let mut y = Tensor::<f32>::zeros(&[8, 8]);
    let cases: Vec<(Error, &str, &[&str])> = vec![
        (
            row_of_1d_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: row of 1-D",
            &["`row_sum` takes a 2-D tile", "tile<[8], f32>", "rank 1"],
        ),
        (
            row_of_3d_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: row of 3-D",
            &["`row_max` takes a 2-D tile", "[2, 4, 8]", "rank 3"],
        ),
        (
            inner_dims_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: inner dims",
            &["inner dims differ (8 vs 4)", "tile<[4, 8], f32>"],
        ),
        (
            reshape_count_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: reshape count",
            &["`[8, 8]` has 64 elements and `[8, 7]` has 56"],
        ),
        (
            bad_broadcast_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: bad broadcast",
            &["shapes `[8, 8]` and `[8, 2]`", "do not broadcast"],
        ),
        (
            extract_out_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: extract out",
            &["leaves the tile in dim 0: 4 + 5 > 8"],
        ),
        (
            var_shape_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: var shape",
            &["holds a `tile<[8, 8], f32>` but is assigned a `tile<[8, 4], f32>`"],
        ),
    ];
    for (e, marker, wants) in cases {
        let msg = build_error(e, marker);
        for w in wants {
            assert!(msg.contains(w), "{marker}: {msg} lacks {w:?}");
        }
    }
}

// Derived dims: `NR * 16` ties A's rows to the world dim; `M / NR` must divide.
const NR: Dim = dynamic!("NR");
const MD: Dim = dynamic!("M");
const ROWS: usize = 16;

/// Tensor-parallel mat-vec: A (`[NR * 16, 8]`) split by rows, rank `r` computes rows
/// `16 r ..` of `y = A x`.
#[eagle::kernel(device)]
pub fn mv_rows(
    ctx: Ctx,
    a: Tensor<f32, { NR * ROWS }, 8>,
    x: Tensor<f32, 8, 1>,
    y: Out<Tensor<f32, ROWS, 1>>,
) {
    let me = rank(ctx);
    let t = load(a, [me * ROWS, 0], [ROWS, 8]);
    store(y, [0, 0], matmul(t, load(x, [0, 0], [8, 1])));
}

#[eagle::host]
pub fn mv(
    a: Tensor<f32, { NR * ROWS }, 8>,
    x: Tensor<f32, 8, 1>,
    y: Out<Tensor<f32, NR, ROWS, 1>>,
) {
    for r in 0..world_size() {
        mv_rows(a, x, y[r], device = r);
    }
}

#[test]
fn a_derived_dim_ties_an_extent_to_the_world_size() {
    let p = 3;
    let s = Session::sim(p).unwrap();
    let a = eagle_runner::random_tensor(&[p * ROWS, 8], 7);
    let x = eagle_runner::random_tensor(&[8, 1], 8);
    let mut y = Tensor::<f32>::zeros(&[p, ROWS, 1]);
    mv.launch(&s, &a, &x, &mut y).unwrap();
    let want: Vec<f32> = (0..p * ROWS)
        .map(|i| {
            let mut acc = -0.0f32;
            for k in 0..8 {
                acc += a.data()[i * 8 + k] * x.data()[k];
            }
            acc
        })
        .collect();
    eagle_runner::check_bits("y", y.data(), &want).unwrap();
    let ir = <mv as eagle::ir::EagleFn>::ir().unwrap();
    assert!(ir.contains("tensor<[(NR * 16), 8], f32>"), "{ir}");
    // The text form reads back.
    let m = eagle::ir::parse_module(&ir).unwrap();
    assert_eq!(eagle::ir::print_module(&m), ir);

    // NR * 16 + 3 rows: refused by name before anything runs.
    let bad = eagle_runner::random_tensor(&[p * ROWS + 3, 8], 7);
    let e = mv.launch(&s, &bad, &x, &mut y).unwrap_err();
    let text = e.to_string();
    assert!(
        text.ends_with("argument `a`: expected dimension 0 = (NR * 16) = 48 (with NR = 3), found 51; pass an extent of 48"),
        "{text}"
    );
    // 64 rows would hold at NR = 4: the message says so.
    let other = eagle_runner::random_tensor(&[64, 8], 7);
    let e = mv.launch(&s, &other, &x, &mut y).unwrap_err();
    let text = e.to_string();
    assert!(
        text.ends_with("found 64; pass an extent of 48, or bindings with `NR` = 4 (it is 3 here)"),
        "{text}"
    );
}

/// `y` holds the rows of `x` split evenly over the ranks: `M / NR` must be exact.
#[eagle::kernel(device)]
pub fn copy_share(ctx: Ctx, x: Tensor<f32, { MD / NR }>, y: Out<Tensor<f32, { MD / NR }>>) {
    store(y, [0], load(x, [0], [MD / NR]));
}

#[eagle::host]
pub fn share(
    x: Tensor<f32, NR, { MD / NR }>,
    y: Out<Tensor<f32, NR, { MD / NR }>>,
    all: Tensor<f32, MD>,
) {
    for r in 0..world_size() {
        copy_share(x[r], y[r], device = r);
    }
}

#[test]
fn a_derived_division_must_be_exact() {
    let s = Session::sim(3).unwrap();
    let x = eagle_runner::random_tensor(&[3, 4], 9);
    let mut y = Tensor::<f32>::zeros(&[3, 4]);
    share
        .launch(&s, &x, &mut y, &Tensor::<f32>::zeros(&[12]))
        .unwrap();
    assert_eq!(x.data(), y.data());
    // M = 10 over NR = 3 ranks.
    let e = share
        .launch(&s, &x, &mut y, &Tensor::<f32>::zeros(&[10]))
        .unwrap_err();
    let text = e.to_string();
    for want in ["argument `x`", "(M / NR)", "10 / 3, which is not exact"] {
        assert!(text.contains(want), "{text} lacks {want:?}");
    }
}

const S: Dim = dynamic!("S");

/// Tile ops in a sample kernel (thread mode in the CUDA C): per sample, the `[4, 8]` tile
/// `t[i][j] = j * x[s] + i`, centred by its row maxima, summed, plus the largest entry of its Gram matrix.
#[eagle::kernel(sample)]
pub fn tile_sample(s: usize, x: Tensor<f32, S>, y: Out<Tensor<f32, S>>) {
    let t = iota([4, 8], 1, f32) * x[s] + iota([4, 8], 0, f32);
    y[s] = reduce_sum(t - row_max(t)) + reduce_max(matmul(transpose(t), t));
}

fn tile_sample_golden(x: f32) -> f32 {
    use eagle::ir::eval::Scalar;
    use eagle::ir::tile::{Tile, TileOp};
    use eagle::ir::{DType, Shape, Type};
    let t = Tile {
        shape: vec![4, 8],
        data: (0..32)
            .map(|e| Scalar::F32((e % 8) as f32 * x + (e / 8) as f32))
            .collect(),
    };
    let ty = |s: &[u64]| Type::Tile(Shape::of(s), DType::F32);
    let op = |n: &str| TileOp::from_name(n).unwrap();
    let m = op("row_max")
        .eval(std::slice::from_ref(&t), &ty(&[4, 1]))
        .unwrap();
    let centred: Vec<f32> = (0..32)
        .map(|e| {
            let (Scalar::F32(a), Scalar::F32(b)) = (t.data[e], m.data[e / 8]) else {
                unreachable!()
            };
            a - b
        })
        .collect();
    let tt = op("transpose")
        .eval(std::slice::from_ref(&t), &ty(&[8, 4]))
        .unwrap();
    let g = op("matmul").eval(&[tt, t], &ty(&[8, 8])).unwrap();
    let gmax = g
        .data
        .iter()
        .map(|v| match v {
            Scalar::F32(f) => *f,
            _ => unreachable!(),
        })
        .fold(f32::NEG_INFINITY, f32::max);
    lane_sum(&centred) + gmax
}

#[test]
fn tile_ops_in_a_sample_kernel_match_the_reference_on_the_cpu_and_in_the_cuda_emulation() {
    use eagle::plan::{plan, Planes, Structure};
    let n = 37;
    let x = Tensor::from_vec(&[n], (0..n).map(|i| i as f32 * 0.25 - 4.0).collect()).unwrap();
    let want: Vec<f32> = x.data().iter().map(|&v| tile_sample_golden(v)).collect();
    let mut y = Tensor::<f32>::zeros(&[n]);
    plan(tile_sample, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
    eagle_runner::check_bits("y (cpu)", y.data(), &want).unwrap();
    #[cfg(feature = "cuda")]
    {
        emulation::cxx();
        let mut y = Tensor::<f32>::zeros(&[n]);
        plan(
            tile_sample,
            Structure::DeviceKernel,
            Structure::DeviceKernel,
        )
        .unwrap()
        .with_platform(eagle::Platform::Cuda)
        .with_cuda_emulation(true)
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
        eagle_runner::check_bits("y (cuda emulation)", y.data(), &want).unwrap();
    }
}

// Edge cases found by trying to break the tile algebra.

/// A tile op on a tile with an empty dim.
#[eagle::kernel(device)]
pub fn empty_rows(ctx: Ctx, y: Out<Tensor<f32, 3, 1>>) {
    let t = zeros([3, 0], f32); // marker: empty tile
    store(y, [0, 0], row_max(t));
}
#[eagle::host]
pub fn empty_rows_host(y: Out<Tensor<f32, 3, 1>>) {
    empty_rows(y, device = 0);
}

/// `extract` at a negative offset.
#[eagle::kernel(device)]
pub fn negative_extract(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let t = load(x, [0, 0], [8, 8]);
    let e = extract(t, [0, -1], [8, 8]); // marker: negative extract
}
#[eagle::host]
pub fn negative_extract_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    negative_extract(x, y, device = 0);
}

/// A tile assigned to a scalar variable.
#[eagle::kernel(device)]
pub fn tile_into_scalar(ctx: Ctx, x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    let mut s = 0.0;
    s = load(x, [0, 0], [8, 8]); // marker: tile into scalar
}
#[eagle::host]
pub fn tile_into_scalar_host(x: Tensor<f32, 8, 8>, y: Out<Tensor<f32, 8, 8>>) {
    tile_into_scalar(x, y, device = 0);
}

#[test]
fn empty_tiles_negative_offsets_and_tiles_in_scalar_variables_are_build_errors() {
    let s = Session::sim(1).unwrap();
    let x = Tensor::<f32>::zeros(&[8, 8]);
    let mut y = Tensor::<f32>::zeros(&[8, 8]);
    let mut y3 = Tensor::<f32>::zeros(&[3, 1]);
    let cases: Vec<(Error, &str, &str)> = vec![
        (
            empty_rows_host.launch(&s, &mut y3).unwrap_err(),
            "marker: empty tile",
            "a tile has at least one element along every dim",
        ),
        (
            negative_extract_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: negative extract",
            "offset -1 is negative",
        ),
        (
            tile_into_scalar_host.launch(&s, &x, &mut y).unwrap_err(),
            "marker: tile into scalar",
            "holds a `f32` but is assigned a `tile<[8, 8], f32>`",
        ),
    ];
    for (e, marker, want) in cases {
        let msg = build_error(e, marker);
        assert!(msg.contains(want), "{marker}: {msg} lacks {want:?}");
    }
}

const KD: Dim = dynamic!("K");
const K2: Dim = dynamic!("K2");

/// Matmul and concat on symbolic extents: checked once the symbols are bound.
#[eagle::kernel(device)]
pub fn sym_mm(ctx: Ctx, a: Tensor<f32, 2, KD>, b: Tensor<f32, K2, 3>, y: Out<Tensor<f32, 2, 6>>) {
    let p = matmul(load(a, [0, 0], [2, KD]), load(b, [0, 0], [K2, 3]));
    store(y, [0, 0], concat(p, p, 1));
}
#[eagle::host]
pub fn sym_mm_host(a: Tensor<f32, 2, KD>, b: Tensor<f32, K2, 3>, y: Out<Tensor<f32, 2, 6>>) {
    sym_mm(a, b, y, device = 0);
}

#[test]
fn symbolic_extents_are_checked_once_bound() {
    let s = Session::sim(1).unwrap();
    let a = eagle_runner::random_tensor(&[2, 4], 1);
    let b = eagle_runner::random_tensor(&[4, 3], 2);
    let mut y = Tensor::<f32>::zeros(&[2, 6]);
    sym_mm_host.launch(&s, &a, &b, &mut y).unwrap();
    for i in 0..2 {
        for j in 0..3 {
            let mut acc = -0.0f32;
            for k in 0..4 {
                acc += a.data()[i * 4 + k] * b.data()[k * 3 + j];
            }
            assert_eq!(y.data()[i * 6 + j].to_bits(), acc.to_bits());
            assert_eq!(y.data()[i * 6 + 3 + j].to_bits(), acc.to_bits());
        }
    }
    // K = 4 but K2 = 5: the verifier of the specialized module names the op and its line.
    let b5 = eagle_runner::random_tensor(&[5, 3], 2);
    let e = sym_mm_host.launch(&s, &a, &b5, &mut y).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("inner dims differ (4 vs 5)") && text.contains("tests/tiles.rs:"),
        "{text}"
    );
}

/// Shifts, bitwise not and bit casts from kernel code: the exponent field of each float,
/// and `x` rebuilt from its bits.
#[eagle::kernel(device)]
pub fn bits_k(ctx: Ctx, x: Tensor<f32, 8>, e: Out<Tensor<u32, 8>>, y: Out<Tensor<f32, 8>>) {
    let t = load(x, [0], [8]);
    let b = t.to_bits();
    store(e, [0], (b >> 23) & 255u32);
    let mut m = b;
    m <<= 1;
    m >>= 1;
    store(y, [0], f32::from_bits(!(!m)));
}
#[eagle::host]
pub fn bits_host(x: Tensor<f32, 8>, e: Out<Tensor<u32, 8>>, y: Out<Tensor<f32, 8>>) {
    bits_k(x, e, y, device = 0);
}

#[test]
fn shifts_not_and_bit_casts_match_rust() {
    let xs = [
        1.0f32,
        -2.5,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::from_bits(1),
        3.0e38,
        -1e-3,
    ];
    let x = Tensor::from_vec(&[8], xs.to_vec()).unwrap();
    let mut e = Tensor::<u32>::zeros(&[8]);
    let mut y = Tensor::<f32>::zeros(&[8]);
    bits_host
        .launch(&Session::sim(1).unwrap(), &x, &mut e, &mut y)
        .unwrap();
    let we: Vec<u32> = xs.iter().map(|v| (v.to_bits() >> 23) & 255).collect();
    let wy: Vec<f32> = xs
        .iter()
        .map(|v| f32::from_bits((v.to_bits() << 1) >> 1))
        .collect();
    assert_eq!(e.data(), &we[..]);
    eagle_runner::check_bits("y", y.data(), &wy).unwrap();
}

/// `row_any`, `col_all`, `reduce_any` and `reduce_all` of a `bool` tile made by a comparison,
/// in a kernel: the reductions over flags (`||` and `&&`, `false` and `true` when empty).
#[eagle::kernel(device)]
pub fn flags(
    ctx: Ctx,
    x: Tensor<f32, M, N>,
    ra: Out<Tensor<bool, M, 1>>,
    ca: Out<Tensor<bool, 1, N>>,
    s: Out<Tensor<bool, 2>>,
) {
    let t = load(x, [0, 0], [M, N]);
    let pos = t > 0.0;
    store(ra, [0, 0], row_any(t > 0.9));
    store(ca, [0, 0], col_all(pos));
    s[0] = reduce_any(t > 0.9);
    s[1] = reduce_all(t > -2.0);
}

#[eagle::host]
pub fn flags_host(
    x: Tensor<f32, M, N>,
    ra: Out<Tensor<bool, M, 1>>,
    ca: Out<Tensor<bool, 1, N>>,
    s: Out<Tensor<bool, 2>>,
) {
    flags(x, ra, ca, s, device = 0);
}

#[test]
fn any_and_all_reduce_bool_tiles_along_rows_columns_and_the_whole_tile() {
    let x = eagle_runner::random_tensor(&[M, N], 11);
    let d = x.data();
    let mut ra = Tensor::<bool>::zeros(&[M, 1]);
    let mut ca = Tensor::<bool>::zeros(&[1, N]);
    let mut s = Tensor::<bool>::zeros(&[2]);
    flags_host
        .launch(&Session::sim(1).unwrap(), &x, &mut ra, &mut ca, &mut s)
        .unwrap();
    let want_ra: Vec<bool> = (0..M)
        .map(|i| d[i * N..(i + 1) * N].iter().any(|&v| v > 0.9))
        .collect();
    let want_ca: Vec<bool> = (0..N).map(|j| (0..M).all(|i| d[i * N + j] > 0.0)).collect();
    assert_eq!(ra.data(), &want_ra[..]);
    assert_eq!(ca.data(), &want_ca[..]);
    assert_eq!(
        s.data(),
        &[d.iter().any(|&v| v > 0.9), d.iter().all(|&v| v > -2.0)]
    );
    // Not all one answer: the random tile has rows with and without an element above 0.9.
    assert!(
        want_ra.contains(&true) && want_ra.contains(&false),
        "{want_ra:?}"
    );
}

/// Typing: an `any` of numbers, and a `sum` of flags, are refused with the fix.
#[test]
fn any_of_numbers_and_sum_of_flags_are_refused() {
    use eagle::ir::{tile::Axis, DType, Dim, ReduceOp, Shape, TileOp, Type};
    let s23 = || Shape(vec![Dim::Const(2), Dim::Const(3)]);
    let f = Type::Tile(s23(), DType::F32);
    let b = Type::Tile(s23(), DType::Bool);
    let e = TileOp::Reduce(ReduceOp::Any, Axis::Row)
        .infer(&[&f], None, None)
        .unwrap_err();
    assert!(
        e.contains("`row_any` reduces `bool` flags, found a tile of `f32`"),
        "{e}"
    );
    let e = TileOp::Reduce(ReduceOp::Sum, Axis::All)
        .infer(&[&b], None, None)
        .unwrap_err();
    assert!(
        e.contains("`reduce_sum` reduces numbers, found a tile of `bool`"),
        "{e}"
    );
}

/// The running forms in a kernel: `cumsum` along each row and down each column, `cumprod`,
/// `cummax` and `cumany` (issue 38, item 5).
#[eagle::kernel(device)]
pub fn running(
    ctx: Ctx,
    x: Tensor<f32, M, N>,
    rs: Out<Tensor<f32, M, N>>,
    cs: Out<Tensor<f32, M, N>>,
    rp: Out<Tensor<f32, M, N>>,
    cm: Out<Tensor<f32, M, N>>,
    ra: Out<Tensor<bool, M, N>>,
) {
    let t = load(x, [0, 0], [M, N]);
    store(rs, [0, 0], cumsum(t, 1));
    store(cs, [0, 0], cumsum(t, 0));
    store(rp, [0, 0], cumprod(t, 1));
    store(cm, [0, 0], cummax(t, 0));
    store(ra, [0, 0], cumany(t > 0.9, 1));
}

#[eagle::host]
pub fn running_host(
    x: Tensor<f32, M, N>,
    rs: Out<Tensor<f32, M, N>>,
    cs: Out<Tensor<f32, M, N>>,
    rp: Out<Tensor<f32, M, N>>,
    cm: Out<Tensor<f32, M, N>>,
    ra: Out<Tensor<bool, M, N>>,
) {
    running(x, rs, cs, rp, cm, ra, device = 0);
}

#[test]
fn running_sums_products_maxima_and_flags_follow_index_order_bit_for_bit() {
    let x = eagle_runner::random_tensor(&[M, N], 17);
    let d = x.data();
    let z = || Tensor::<f32>::zeros(&[M, N]);
    let (mut rs, mut cs, mut rp, mut cm) = (z(), z(), z(), z());
    let mut ra = Tensor::<bool>::zeros(&[M, N]);
    running_host
        .launch(
            &Session::sim(1).unwrap(),
            &x,
            &mut rs,
            &mut cs,
            &mut rp,
            &mut cm,
            &mut ra,
        )
        .unwrap();
    // The sequential loops the docs define them by: out[0] = t[0], out[k] = out[k-1] op t[k].
    let scan = |at: &dyn Fn(usize, usize) -> usize,
                outer: usize,
                inner: usize,
                f: &dyn Fn(f32, f32) -> f32| {
        let mut v = vec![0f32; M * N];
        for o in 0..outer {
            v[at(o, 0)] = d[at(o, 0)];
            for k in 1..inner {
                v[at(o, k)] = f(v[at(o, k - 1)], d[at(o, k)]);
            }
        }
        v
    };
    let row = |i: usize, j: usize| i * N + j;
    let col = |j: usize, i: usize| i * N + j;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(rs.data()), bits(&scan(&row, M, N, &|a, b| a + b)));
    assert_eq!(bits(cs.data()), bits(&scan(&col, N, M, &|a, b| a + b)));
    assert_eq!(bits(rp.data()), bits(&scan(&row, M, N, &|a, b| a * b)));
    assert_eq!(bits(cm.data()), bits(&scan(&col, N, M, &f32::max)));
    let want_ra: Vec<bool> = (0..M * N)
        .map(|e| d[e - e % N..=e].iter().any(|&v| v > 0.9))
        .collect();
    assert_eq!(ra.data(), &want_ra[..]);
    // Not a trivial input: the running sums differ from the elements.
    assert_ne!(bits(rs.data()), bits(d));
}

/// Typing of the running forms: a 2-D tile of numbers (flags for `cumany`/`cumall`), axis 0
/// or 1.
#[test]
fn running_forms_refuse_bool_sums_wrong_axes_and_other_ranks() {
    use eagle::ir::{DType, Dim, ReduceOp, Shape, TileOp, Type};
    let s23 = Shape(vec![Dim::Const(2), Dim::Const(3)]);
    let b = Type::Tile(s23.clone(), DType::Bool);
    let f = Type::Tile(s23, DType::F32);
    let v = Type::Tile(Shape(vec![Dim::Const(6)]), DType::F32);
    let e = TileOp::Scan(ReduceOp::Sum, 1)
        .infer(&[&b], None, None)
        .unwrap_err();
    assert!(
        e.contains("`cumsum` runs over numbers, found a tile of `bool`"),
        "{e}"
    );
    let e = TileOp::Scan(ReduceOp::Sum, 2)
        .infer(&[&f], None, None)
        .unwrap_err();
    assert!(
        e.contains(
            "`cumsum` runs along axis 0 (down each column) or 1 (along each row), found axis 2"
        ),
        "{e}"
    );
    let e = TileOp::Scan(ReduceOp::Max, 0)
        .infer(&[&v], None, None)
        .unwrap_err();
    assert!(e.contains("`cummax` takes a 2-D tile `[M, N]`"), "{e}");
    assert_eq!(
        TileOp::Scan(ReduceOp::Prod, 0).infer(&[&f], None, None),
        Ok(f.clone())
    );
}

/// `sort` and `argsort` in a kernel: the routing step of a mixture of experts, the experts of
/// each token ranked by score (issue 38, item 5).
#[eagle::kernel(device)]
pub fn ranking(
    ctx: Ctx,
    x: Tensor<f32, M, N>,
    s: Out<Tensor<f32, M, N>>,
    i: Out<Tensor<i64, M, N>>,
) {
    let t = load(x, [0, 0], [M, N]);
    store(s, [0, 0], sort(t, 1));
    store(i, [0, 0], argsort(0.0 - t, 1));
}

#[eagle::host]
pub fn ranking_host(x: Tensor<f32, M, N>, s: Out<Tensor<f32, M, N>>, i: Out<Tensor<i64, M, N>>) {
    ranking(x, s, i, device = 0);
}

#[test]
fn sort_and_argsort_order_each_row_stably_with_nans_last() {
    let mut x = eagle_runner::random_tensor(&[M, N], 23);
    // Ties, signed zeros and NaNs in row 0.
    x.data_mut()[..N].copy_from_slice(&[
        0.5,
        f32::NAN,
        -0.0,
        0.5,
        0.0,
        -1.0,
        2.0,
        3.0,
        4.0,
        5.0,
        6.0,
        7.0,
    ]);
    let mut s = Tensor::<f32>::zeros(&[M, N]);
    let mut i = Tensor::<i64>::zeros(&[M, N]);
    ranking_host
        .launch(&Session::sim(1).unwrap(), &x, &mut s, &mut i)
        .unwrap();
    let d = x.data();
    // The definition: a stable sort, NaN after every number, -0.0 equal to +0.0.
    let key = |v: f32| (v.is_nan(), if v.is_nan() { 0.0 } else { v });
    for r in 0..M {
        let row = &d[r * N..(r + 1) * N];
        let mut idx: Vec<usize> = (0..N).collect();
        idx.sort_by(|&a, &b| key(row[a]).partial_cmp(&key(row[b])).unwrap());
        let want: Vec<u32> = idx.iter().map(|&k| row[k].to_bits()).collect();
        let got: Vec<u32> = s.data()[r * N..(r + 1) * N]
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(got, want, "row {r}");
        // Descending by score (argsort of the negated row): the first index of equal scores
        // first.
        let mut desc: Vec<usize> = (0..N).collect();
        desc.sort_by(|&a, &b| key(0.0 - row[a]).partial_cmp(&key(0.0 - row[b])).unwrap());
        let got: Vec<i64> = i.data()[r * N..(r + 1) * N].to_vec();
        assert_eq!(
            got,
            desc.iter().map(|&k| k as i64).collect::<Vec<_>>(),
            "row {r}"
        );
    }
    // Row 0: -1.0, -0.0, 0.0 (in index order), 0.5, 0.5, 2.0, ..., 7.0, NaN last; the
    // descending ranking 11, 10, ..., 6, then the two 0.5s in index order (0, 3), ...
    assert_eq!(s.data()[0].to_bits(), (-1.0f32).to_bits());
    assert_eq!(s.data()[1].to_bits(), (-0.0f32).to_bits());
    assert_eq!(s.data()[2].to_bits(), 0.0f32.to_bits());
    assert!(s.data()[N - 1].is_nan());
    assert_eq!(&i.data()[..8], &[11, 10, 9, 8, 7, 6, 0, 3]);
}

/// Top-2 routing as a kernel writes it: each token's experts ranked by score (`argsort` of the
/// negated scores: descending, ties to the lower expert), the first two kept (`extract`), and
/// their scores fetched with `gather` (issue 38, item 5).
#[eagle::kernel(device)]
pub fn top2(ctx: Ctx, x: Tensor<f32, M, N>, e: Out<Tensor<i64, M, 2>>, s: Out<Tensor<f32, M, 2>>) {
    let t = load(x, [0, 0], [M, N]);
    let best = extract(argsort(0.0 - t, 1), [0, 0], [M, 2]);
    store(e, [0, 0], best);
    store(s, [0, 0], gather(t, best, 1));
}

#[eagle::host]
pub fn top2_host(x: Tensor<f32, M, N>, e: Out<Tensor<i64, M, 2>>, s: Out<Tensor<f32, M, 2>>) {
    top2(x, e, s, device = 0);
}

#[test]
fn top2_routing_with_argsort_extract_and_gather() {
    let mut x = eagle_runner::random_tensor(&[M, N], 29);
    // Row 1: a tie for the best score goes to the lower expert.
    x.data_mut()[N + 4] = 9.0;
    x.data_mut()[N + 7] = 9.0;
    let mut e = Tensor::<i64>::zeros(&[M, 2]);
    let mut s = Tensor::<f32>::zeros(&[M, 2]);
    top2_host
        .launch(&Session::sim(1).unwrap(), &x, &mut e, &mut s)
        .unwrap();
    let d = x.data();
    for r in 0..M {
        let row = &d[r * N..(r + 1) * N];
        let mut idx: Vec<usize> = (0..N).collect();
        idx.sort_by(|&a, &b| row[b].partial_cmp(&row[a]).unwrap());
        assert_eq!(
            &e.data()[2 * r..2 * r + 2],
            &[idx[0] as i64, idx[1] as i64],
            "row {r}"
        );
        assert_eq!(
            &s.data()[2 * r..2 * r + 2],
            &[row[idx[0]], row[idx[1]]],
            "row {r}"
        );
    }
    assert_eq!(&e.data()[2..4], &[4, 7]);
}

/// Typing of `gather`: integer indices, 2-D tiles that agree off the axis, axis 0 or 1.
#[test]
fn gather_refuses_float_indices_mismatched_rows_and_wrong_axes() {
    use eagle::ir::{DType, Dim, Shape, TileOp, Type};
    let tile = |m: u64, n: u64, d| Type::Tile(Shape(vec![Dim::Const(m), Dim::Const(n)]), d);
    let t = tile(4, 8, DType::F32);
    let e = TileOp::Gather(1)
        .infer(&[&t, &tile(4, 2, DType::F32)], None, None)
        .unwrap_err();
    assert!(
        e.contains("`gather`'s indices are integers, found a tile of `f32`"),
        "{e}"
    );
    let e = TileOp::Gather(1)
        .infer(&[&t, &tile(3, 2, DType::I64)], None, None)
        .unwrap_err();
    assert!(e.contains("dim 0 differs (4 vs 3)"), "{e}");
    let e = TileOp::Gather(2)
        .infer(&[&t, &tile(4, 2, DType::I64)], None, None)
        .unwrap_err();
    assert!(e.contains("found axis 2"), "{e}");
    assert_eq!(
        TileOp::Gather(0).infer(&[&t, &tile(3, 8, DType::I32)], None, None),
        Ok(tile(3, 8, DType::F32))
    );
}

#[eagle::kernel(device)]
pub fn pick(ctx: Ctx, x: Tensor<f32, M, N>, i: Tensor<i64, M, 2>, s: Out<Tensor<f32, M, 2>>) {
    let t = load(x, [0, 0], [M, N]);
    store(s, [0, 0], gather(t, load(i, [0, 0], [M, 2]), 1));
}

#[eagle::host]
pub fn pick_host(x: Tensor<f32, M, N>, i: Tensor<i64, M, 2>, s: Out<Tensor<f32, M, 2>>) {
    pick(x, i, s, device = 0);
}

/// A `gather` index outside the axis is a run-time error naming the op, its source line and
/// the extent (E051).
#[test]
fn a_gather_index_outside_the_axis_is_an_error_naming_the_line() {
    let x = eagle_runner::random_tensor(&[M, N], 31);
    let mut s = Tensor::<f32>::zeros(&[M, 2]);
    for bad in [N as i64, -1] {
        let mut idx = Tensor::<i64>::zeros(&[M, 2]);
        idx.data_mut()[3] = bad;
        let e = pick_host
            .launch(&Session::sim(1).unwrap(), &x, &idx, &mut s)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "an index of `gather` is outside 0..{N}, the extent of the source's axis 1"
            )),
            "{e}"
        );
        assert!(e.contains("tests/tiles.rs:"), "{e}");
    }
}

/// `scatter` and `scatter_add` in a kernel: a mask of each token's top-2 experts, and a
/// histogram of expert choices down the columns (issue 38, item 5).
#[eagle::kernel(device)]
pub fn routing_counts(
    ctx: Ctx,
    x: Tensor<f32, M, N>,
    mask: Out<Tensor<f32, M, N>>,
    counts: Out<Tensor<f32, 1, N>>,
) {
    let t = load(x, [0, 0], [M, N]);
    let best = extract(argsort(0.0 - t, 1), [0, 0], [M, 2]);
    store(
        mask,
        [0, 0],
        scatter(zeros([M, N], f32), best, full([M, 2], 1.0), 1),
    );
    // One row of counts: every choice of every token added at its expert, in index order.
    let picks = reshape(best, [1, 2 * M]);
    let ones = full([1, 2 * M], 1.0);
    store(
        counts,
        [0, 0],
        scatter_add(zeros([1, N], f32), picks, ones, 1),
    );
}

#[eagle::host]
pub fn routing_counts_host(
    x: Tensor<f32, M, N>,
    mask: Out<Tensor<f32, M, N>>,
    counts: Out<Tensor<f32, 1, N>>,
) {
    routing_counts(x, mask, counts, device = 0);
}

#[test]
fn scatter_marks_the_top_experts_and_scatter_add_counts_the_choices() {
    let x = eagle_runner::random_tensor(&[M, N], 37);
    let mut mask = Tensor::<f32>::zeros(&[M, N]);
    let mut counts = Tensor::<f32>::zeros(&[1, N]);
    routing_counts_host
        .launch(&Session::sim(1).unwrap(), &x, &mut mask, &mut counts)
        .unwrap();
    let d = x.data();
    let mut want_mask = [0f32; M * N];
    let mut want_counts = [0f32; N];
    for r in 0..M {
        let row = &d[r * N..(r + 1) * N];
        let mut idx: Vec<usize> = (0..N).collect();
        idx.sort_by(|&a, &b| row[b].partial_cmp(&row[a]).unwrap());
        for &e in &idx[..2] {
            want_mask[r * N + e] = 1.0;
            want_counts[e] += 1.0;
        }
    }
    assert_eq!(mask.data(), &want_mask[..]);
    assert_eq!(counts.data(), &want_counts[..]);
    assert_eq!(counts.data().iter().sum::<f32>(), (2 * M) as f32);
}

/// Typing of `scatter`: values of the indices' shape and the base's dtype; `scatter_add` adds
/// numbers.
#[test]
fn scatter_refuses_values_of_another_shape_or_dtype_and_bool_sums() {
    use eagle::ir::{DType, Dim, Shape, TileOp, Type};
    let tile = |m: u64, n: u64, d| Type::Tile(Shape(vec![Dim::Const(m), Dim::Const(n)]), d);
    let (t, i) = (tile(4, 8, DType::F32), tile(4, 2, DType::I64));
    let op = TileOp::Scatter {
        add: false,
        axis: 1,
    };
    let e = op
        .infer(&[&t, &i, &tile(4, 3, DType::F32)], None, None)
        .unwrap_err();
    assert!(
        e.contains("`scatter`'s values have the indices' shape and the base's dtype"),
        "{e}"
    );
    let e = op
        .infer(&[&t, &i, &tile(4, 2, DType::F64)], None, None)
        .unwrap_err();
    assert!(e.contains("found `tile<[4, 2], f64>`"), "{e}");
    let b = tile(4, 8, DType::Bool);
    let e = TileOp::Scatter { add: true, axis: 1 }
        .infer(&[&b, &i, &tile(4, 2, DType::Bool)], None, None)
        .unwrap_err();
    assert!(e.contains("`scatter_add` adds numbers"), "{e}");
    assert_eq!(
        op.infer(&[&t, &i, &tile(4, 2, DType::F32)], None, None),
        Ok(t.clone())
    );
}

#[eagle::kernel(device)]
pub fn float_index(ctx: Ctx, x: Tensor<f32, M, N>, y: Out<Tensor<f32, M, N>>) {
    let t = load(x, [0, 0], [M, N]);
    store(y, [0, 0], gather(t, t, 1));
}

#[eagle::host]
pub fn float_index_host(x: Tensor<f32, M, N>, y: Out<Tensor<f32, M, N>>) {
    float_index(x, y, device = 0);
}

/// A mistake in a data op is reported before anything runs, at the kernel's source line, with
/// what was expected and the fix (an axis other than the literal 0 or 1 is a compile error of
/// the macro already).
#[test]
fn data_op_mistakes_are_reported_before_the_run_at_the_source_line() {
    let x = eagle_runner::random_tensor(&[M, N], 41);
    let mut y = Tensor::<f32>::zeros(&[M, N]);
    let s = Session::sim(1).unwrap();
    let e = float_index_host
        .launch(&s, &x, &mut y)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "`gather`'s indices are integers, found a tile of `f32`; cast them with `as i64`"
        ),
        "{e}"
    );
    assert!(e.contains("tests/tiles.rs:"), "{e}");
    // Nothing ran: the output is untouched.
    assert!(y.data().iter().all(|&v| v == 0.0));
}

const TK: usize = 3;

/// `topk` (issue 38, item 5) along each row of an f32 and an i32 tile: values and indices.
#[eagle::kernel(device)]
pub fn top(
    ctx: Ctx,
    x: Tensor<f32, M, N>,
    n: Tensor<i32, M, N>,
    v: Out<Tensor<f32, M, TK>>,
    i: Out<Tensor<i64, M, TK>>,
    nv: Out<Tensor<i32, M, TK>>,
    ni: Out<Tensor<i64, M, TK>>,
) {
    let (a, b) = topk(load(x, [0, 0], [M, N]), TK);
    store(v, [0, 0], a);
    store(i, [0, 0], b);
    let (c, d) = topk(load(n, [0, 0], [M, N]), TK);
    store(nv, [0, 0], c);
    store(ni, [0, 0], d);
}

#[eagle::host]
pub fn top_host(
    x: Tensor<f32, M, N>,
    n: Tensor<i32, M, N>,
    v: Out<Tensor<f32, M, TK>>,
    i: Out<Tensor<i64, M, TK>>,
    nv: Out<Tensor<i32, M, TK>>,
    ni: Out<Tensor<i64, M, TK>>,
) {
    top(x, n, v, i, nv, ni, device = 0);
}

/// The `k` largest of a row in plain Rust: descending, ties to the lower index, `-0.0` equal
/// to `+0.0`, a NaN below every number.
fn topk_golden<T: Copy>(row: &[T], k: usize, gt: impl Fn(T, T) -> bool) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    // A stable sort by "greater first".
    idx.sort_by(|&a, &b| {
        if gt(row[a], row[b]) {
            std::cmp::Ordering::Less
        } else if gt(row[b], row[a]) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    idx.truncate(k);
    idx
}

fn check_topk(s: &Session) {
    // Rows with ties (1.5 twice), signed zeros, a NaN and infinities.
    let mut xd = vec![0.0f32; M * N];
    let rows: [[f32; 12]; 4] = [
        [
            0.5,
            1.5,
            -2.0,
            1.5,
            0.25,
            -0.0,
            0.0,
            1.0,
            f32::NAN,
            0.75,
            -1.0,
            0.1,
        ],
        [
            f32::NAN,
            f32::NAN,
            -0.0,
            0.0,
            -0.0,
            -1.0,
            -2.0,
            -3.0,
            -4.0,
            -5.0,
            -6.0,
            -7.0,
        ],
        [
            f32::INFINITY,
            1.0,
            f32::NEG_INFINITY,
            2.0,
            2.0,
            2.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            9.0,
        ],
        [3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0],
    ];
    for (r, row) in rows.iter().enumerate() {
        xd[r * N..(r + 1) * N].copy_from_slice(row);
    }
    let mut nd: Vec<i32> = (0..(M * N) as i32).map(|k| (k * 7919) % 23 - 11).collect();
    nd[0] = i32::MIN;
    nd[1] = i32::MAX;
    nd[2] = i32::MAX;
    let x = Tensor::from_vec(&[M, N], xd.clone()).unwrap();
    let n = Tensor::from_vec(&[M, N], nd.clone()).unwrap();
    let mut v = Tensor::<f32>::zeros(&[M, TK]);
    let mut i = Tensor::<i64>::zeros(&[M, TK]);
    let mut nv = Tensor::<i32>::zeros(&[M, TK]);
    let mut ni = Tensor::<i64>::zeros(&[M, TK]);
    top_host
        .launch(s, &x, &n, &mut v, &mut i, &mut nv, &mut ni)
        .unwrap();
    let fgt = |a: f32, b: f32| !a.is_nan() && (b.is_nan() || a > b);
    for r in 0..M {
        let row = &xd[r * N..(r + 1) * N];
        let want = topk_golden(row, TK, fgt);
        let got: Vec<usize> = i.data()[r * TK..(r + 1) * TK]
            .iter()
            .map(|&k| k as usize)
            .collect();
        assert_eq!(got, want, "f32 row {r}");
        for (c, &k) in want.iter().enumerate() {
            assert_eq!(
                v.data()[r * TK + c].to_bits(),
                row[k].to_bits(),
                "f32 row {r}"
            );
        }
        let nrow = &nd[r * N..(r + 1) * N];
        let want = topk_golden(nrow, TK, |a: i32, b: i32| a > b);
        let got: Vec<usize> = ni.data()[r * TK..(r + 1) * TK]
            .iter()
            .map(|&k| k as usize)
            .collect();
        assert_eq!(got, want, "i32 row {r}");
        let vals: Vec<i32> = want.iter().map(|&k| nrow[k]).collect();
        assert_eq!(&nv.data()[r * TK..(r + 1) * TK], &vals[..], "i32 row {r}");
    }
    // The cases the rows plant: ties to the lower index, -0.0 before +0.0 by index, NaN last;
    // the two `i32::MAX` first in index order (`!x` cannot overflow, so `i32::MIN` is last).
    assert_eq!(&i.data()[..TK], &[1, 3, 7]);
    assert_eq!(&i.data()[TK..2 * TK], &[2, 3, 4]);
    assert_eq!(&ni.data()[..2], &[1, 2]);
}

#[test]
fn topk_picks_the_largest_with_ties_to_the_lower_index() {
    check_topk(&Session::sim(1).unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn topk_picks_the_largest_with_ties_to_the_lower_index_in_the_cuda_emulation() {
    emulation::cxx();
    check_topk(&Session::cuda_emulated(vec![0]).unwrap());
}

/// `k` past the row length.
#[eagle::kernel]
pub fn top_too_many(x: Tensor<f32, M, N>, i: Out<Tensor<i64, M, 20>>) {
    let (a, b) = topk(load(x, [0, 0], [M, N]), 20);
    store(i, [0, 0], b);
}

#[test]
fn a_topk_past_the_row_length_is_refused_at_the_source_line() {
    use eagle::ir::EagleFn;
    let e = top_too_many::module().unwrap_err().to_string();
    assert!(
        e.contains("`topk`'s k is 20 but the rows have 12 elements (at tests/tiles.rs:"),
        "{e}"
    );
    assert!(e.ends_with("k is a constant in 1..=12"), "{e}");
}
