//! The tile algebra against its peers, in one process on the same seeded inputs: `matmul` of
//! 128x128 and 256x256 f32 tiles against the `matrixmultiply` crate's `sgemm` (a tuned GEMM,
//! which may use FMA and any summation order) and against a plain Rust loop in eagle's order
//! (`k` ascending, separate multiply and add: the same bits); `row_sum` and `row_max` of a
//! `[256, 256]` f32 tile against a Rust loop in the same 8-lane order. Prints a markdown table;
//! with `--save`, writes `docs/bench/tiles.json` and its region of `docs/performance.md`
//! (`benches/report/`). Built with `RUSTFLAGS="-C target-cpu=native"` the report is named
//! `tiles-native` (the peers compiled for this CPU; eagle's code is chosen at run time either
//! way).
//!
//! `cargo bench --bench tiles [-- --save]`
//!
//! Each eagle kernel runs inside one per-device program, `iters` times in a loop, and the time
//! of the same program with 0 iterations (dispatch, copies) is subtracted, so the figure is the
//! kernel's own (its loads and stores of the tiles included). Every figure is the median of 7
//! interleaved rounds; the ratios' min and max are over the rounds.

#[path = "report/mod.rs"]
mod report;

use eagle::prelude::*;
use std::hint::black_box;
use std::time::Instant;

const NR: Dim = dynamic!("NR");
const S1: usize = 128;
const S2: usize = 256;

/// `c = a x b` on `[S1, S1]` f32 tiles, `iters` times.
#[eagle::kernel(device)]
pub fn mm128_d(
    ctx: Ctx,
    a: Tensor<f32, S1, S1>,
    b: Tensor<f32, S1, S1>,
    c: Out<Tensor<f32, S1, S1>>,
    iters: usize,
) {
    for it in 0..iters {
        store(
            c,
            [0, 0],
            matmul(load(a, [0, 0], [S1, S1]), load(b, [0, 0], [S1, S1])),
        );
    }
}
#[eagle::host]
pub fn mm128(
    a: Tensor<f32, NR, S1, S1>,
    b: Tensor<f32, NR, S1, S1>,
    c: Out<Tensor<f32, NR, S1, S1>>,
    iters: usize,
) {
    for r in 0..world_size() {
        mm128_d(a[r], b[r], c[r], iters, device = r);
    }
}

/// `c = a x b` on `[S2, S2]` f32 tiles, `iters` times.
#[eagle::kernel(device)]
pub fn mm256_d(
    ctx: Ctx,
    a: Tensor<f32, S2, S2>,
    b: Tensor<f32, S2, S2>,
    c: Out<Tensor<f32, S2, S2>>,
    iters: usize,
) {
    for it in 0..iters {
        store(
            c,
            [0, 0],
            matmul(load(a, [0, 0], [S2, S2]), load(b, [0, 0], [S2, S2])),
        );
    }
}
#[eagle::host]
pub fn mm256(
    a: Tensor<f32, NR, S2, S2>,
    b: Tensor<f32, NR, S2, S2>,
    c: Out<Tensor<f32, NR, S2, S2>>,
    iters: usize,
) {
    for r in 0..world_size() {
        mm256_d(a[r], b[r], c[r], iters, device = r);
    }
}

/// Row sums and row maxima of a `[S2, S2]` f32 tile, `iters` times.
#[eagle::kernel(device)]
pub fn rows_d(
    ctx: Ctx,
    x: Tensor<f32, S2, S2>,
    s: Out<Tensor<f32, S2, 1>>,
    m: Out<Tensor<f32, S2, 1>>,
    iters: usize,
) {
    for it in 0..iters {
        let t = load(x, [0, 0], [S2, S2]);
        store(s, [0, 0], row_sum(t));
        store(m, [0, 0], row_max(t));
    }
}
#[eagle::host]
pub fn rows(
    x: Tensor<f32, NR, S2, S2>,
    s: Out<Tensor<f32, NR, S2, 1>>,
    m: Out<Tensor<f32, NR, S2, 1>>,
    iters: usize,
) {
    for r in 0..world_size() {
        rows_d(x[r], s[r], m[r], iters, device = r);
    }
}

fn secs(f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// eagle's `matmul` order in plain Rust.
fn mm_rust(a: &[f32], b: &[f32], c: &mut [f32], n: usize) {
    for i in 0..n {
        let crow = &mut c[i * n..(i + 1) * n];
        crow.fill(-0.0);
        for k in 0..n {
            let x = a[i * n + k];
            for (cv, bv) in crow.iter_mut().zip(&b[k * n..(k + 1) * n]) {
                *cv += x * bv;
            }
        }
    }
}

fn mm_sgemm(a: &[f32], b: &[f32], c: &mut [f32], n: usize) {
    // SAFETY: a, b and c are n x n row-major matrices (row stride n, column stride 1).
    unsafe {
        matrixmultiply::sgemm(
            n,
            n,
            n,
            1.0,
            a.as_ptr(),
            n as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Row sums in eagle's 8-lane order and row maxima, as eagle computes them.
fn rows_rust(x: &[f32], s: &mut [f32], m: &mut [f32], n: usize) {
    for (i, row) in x.chunks_exact(n).enumerate() {
        let mut l = [-0.0f32; 8];
        for c in row.chunks_exact(8) {
            for j in 0..8 {
                l[j] += c[j];
            }
        }
        s[i] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        m[i] = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    }
}

struct Row {
    name: String,
    /// Seconds per run of eagle and of each peer, one per round (no second peer: empty).
    secs: [Vec<f64>; 3],
    flop: f64,
}

fn main() {
    let s = Session::sim(1).expect("session").with_race_check(false);
    let rounds = 7;
    let mut table: Vec<Row> = vec![];
    for (n, iters) in [(S1, 40usize), (S2, 6)] {
        let a = eagle_runner::random_tensor(&[1, n, n], 1);
        let b = eagle_runner::random_tensor(&[1, n, n], 2);
        let mut c = Tensor::<f32>::zeros(&[1, n, n]);
        let launch = |k: usize, c: &mut Tensor<f32>| {
            if n == S1 {
                mm128.launch(&s, &a, &b, c, k).expect("mm128");
            } else {
                mm256.launch(&s, &a, &b, c, k).expect("mm256");
            }
        };
        launch(1, &mut c);
        let (ad, bd) = (a.data().to_vec(), b.data().to_vec());
        let mut cr = vec![0f32; n * n];
        mm_rust(&ad, &bd, &mut cr, n);
        assert!(
            c.data()
                .iter()
                .zip(&cr)
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "eagle's matmul differs from the loop in its order"
        );
        let mut cs = vec![0f32; n * n];
        let (mut te, mut tr, mut ts) = (vec![], vec![], vec![]);
        for _ in 0..rounds {
            let base = secs(&mut || launch(0, &mut c));
            let full = secs(&mut || launch(iters, &mut c));
            te.push((full - base).max(1e-12) / iters as f64);
            tr.push(
                secs(&mut || {
                    for _ in 0..iters {
                        mm_rust(black_box(&ad), black_box(&bd), &mut cr, n);
                    }
                }) / iters as f64,
            );
            ts.push(
                secs(&mut || {
                    for _ in 0..iters {
                        mm_sgemm(black_box(&ad), black_box(&bd), &mut cs, n);
                    }
                }) / iters as f64,
            );
        }
        table.push(Row {
            name: format!("matmul f32 {n}x{n}"),
            secs: [te, tr, ts],
            flop: 2.0 * (n * n * n) as f64,
        });
    }
    {
        let n = S2;
        let iters = 200;
        let x = eagle_runner::random_tensor(&[1, n, n], 3);
        let mut so = Tensor::<f32>::zeros(&[1, n, 1]);
        let mut mo = Tensor::<f32>::zeros(&[1, n, 1]);
        rows.launch(&s, &x, &mut so, &mut mo, 1).expect("rows");
        let xd = x.data().to_vec();
        let (mut sr, mut mr) = (vec![0f32; n], vec![0f32; n]);
        rows_rust(&xd, &mut sr, &mut mr, n);
        assert!(
            so.data()
                .iter()
                .zip(&sr)
                .all(|(x, y)| x.to_bits() == y.to_bits())
                && mo
                    .data()
                    .iter()
                    .zip(&mr)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
            "eagle's row reductions differ from the loop in their order"
        );
        let (mut te, mut tr) = (vec![], vec![]);
        for _ in 0..rounds {
            let base = secs(&mut || {
                rows.launch(&s, &x, &mut so, &mut mo, 0).expect("rows");
            });
            let full = secs(&mut || {
                rows.launch(&s, &x, &mut so, &mut mo, iters).expect("rows");
            });
            te.push((full - base).max(1e-12) / iters as f64);
            tr.push(
                secs(&mut || {
                    for _ in 0..iters {
                        rows_rust(black_box(&xd), &mut sr, &mut mr, n);
                    }
                }) / iters as f64,
            );
        }
        table.push(Row {
            name: format!("row_sum + row_max f32 [{n}, {n}]"),
            secs: [te, tr, vec![]],
            flop: 2.0 * (n * n) as f64,
        });
    }
    let gf = |r: &Row, v: &[f64]| r.flop / median(v.to_vec()) / 1e9;
    // Per round: peer time / eagle time (above 1: eagle is faster).
    let ratios = |r: &Row, peer: &[f64]| {
        let v: Vec<f64> = r.secs[0].iter().zip(peer).map(|(e, p)| p / e).collect();
        report::stats(&v)
    };
    let loop_cols = [
        ("eagle (median)", "", 1),
        ("same-order Rust loop", "", 1),
        ("eagle / loop, min", "", 2),
        ("median", "", 2),
        ("max", "", 2),
    ];
    let mut mm = report::Table::new(
        &format!("matmul, GFLOP/s ({rounds} interleaved rounds)"),
        &[
            loop_cols.as_slice(),
            &[
                ("`matrixmultiply::sgemm`", "", 1),
                ("eagle / sgemm, min", "", 2),
                ("median", "", 2),
                ("max", "", 2),
            ],
        ]
        .concat(),
    );
    let mut red = report::Table::new(
        &format!("row reductions, GFLOP/s ({rounds} interleaved rounds)"),
        &loop_cols,
    );
    for r in &table {
        let (l0, l1, l2) = ratios(r, &r.secs[1]);
        let mut values = vec![gf(r, &r.secs[0]), gf(r, &r.secs[1]), l0, l1, l2];
        if r.secs[2].is_empty() {
            red.row(&r.name, values);
        } else {
            let (s0, s1, s2) = ratios(r, &r.secs[2]);
            values.extend([gf(r, &r.secs[2]), s0, s1, s2]);
            mm.row(&r.name, values);
        }
    }
    mm.notes.push(
        "eagle's results are bit-identical to the same-order Rust loop (checked before timing); `sgemm` may use FMA and any order.".into(),
    );
    let name = if cfg!(target_feature = "avx2") {
        "tiles-native"
    } else {
        "tiles"
    };
    let mut rep = report::Report::new(name);
    if name == "tiles-native" {
        rep.command = Some("RUSTFLAGS=\"-C target-cpu=native\" cargo bench --bench tiles".into());
    }
    rep.tables.push(mm);
    rep.tables.push(red);
    rep.finish();
}
