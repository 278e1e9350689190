//! eagle kernels against the same loops compiled by rustc, on the same seeded inputs in the
//! same process, plus compile latency (launch overhead is `benches/launch.rs`). Prints
//! markdown tables.
//!
//! `cargo bench --bench kernels` (`-- --save` writes `docs/bench/kernels.json`, its table in
//! `docs/performance.md` and the plot `docs/perf-ratios.svg`)
//!
//! Each eagle kernel runs inside one per-device program, `iters` times in a loop, and the time
//! of the same program with 0 iterations (dispatch, copies) is subtracted, so the figure is the
//! kernel's own. Each Rust kernel is timed over the same number of iterations.

use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;
use std::hint::black_box;
use std::time::Instant;

#[path = "report/mod.rs"]
mod report;

const N: usize = 1 << 16;
const B: usize = 1024;
const H: usize = 256;
const W: usize = 256;
const M: usize = 64;
const NR: Dim = dynamic!("NR");
const S: Dim = dynamic!("S");

/// y = a * x + y (f32), in tiles of B.
#[eagle::kernel(device)]
pub fn saxpy32_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, a: f32, iters: usize) {
    for it in 0..iters {
        for i in 0..N / B {
            store(
                y,
                [i * B],
                load(x, [i * B], [B]) * a + load(y, [i * B], [B]),
            );
        }
    }
}
#[eagle::host]
pub fn saxpy32(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, a: f32, iters: usize) {
    for r in 0..world_size() {
        saxpy32_d(x[r], y[r], a, iters, device = r);
    }
}

/// y = fma(x, a, y) (f32): one rounding per element.
#[eagle::kernel(device)]
pub fn saxpyfma_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, a: f32, iters: usize) {
    for it in 0..iters {
        for i in 0..N / B {
            store(
                y,
                [i * B],
                fma(load(x, [i * B], [B]), a, load(y, [i * B], [B])),
            );
        }
    }
}
#[eagle::host]
pub fn saxpyfma(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, a: f32, iters: usize) {
    for r in 0..world_size() {
        saxpyfma_d(x[r], y[r], a, iters, device = r);
    }
}

/// y = a * x + y (f64).
#[eagle::kernel(device)]
pub fn saxpy64_d(ctx: Ctx, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>, a: f64, iters: usize) {
    for it in 0..iters {
        for i in 0..N / B {
            store(
                y,
                [i * B],
                load(x, [i * B], [B]) * a + load(y, [i * B], [B]),
            );
        }
    }
}
#[eagle::host]
pub fn saxpy64(x: Tensor<f64, NR, N>, y: Out<Tensor<f64, NR, N>>, a: f64, iters: usize) {
    for r in 0..world_size() {
        saxpy64_d(x[r], y[r], a, iters, device = r);
    }
}

/// Five-point stencil on the interior of an H x W grid, one row tile at a time.
#[eagle::kernel(device)]
pub fn stencil_d(ctx: Ctx, u: Tensor<f32, H, W>, v: Out<Tensor<f32, H, W>>, iters: usize) {
    for it in 0..iters {
        for i in 1..H - 1 {
            let c = load(u, [i, 1], [1, W - 2]);
            let n = load(u, [i - 1, 1], [1, W - 2]);
            let s = load(u, [i + 1, 1], [1, W - 2]);
            let w = load(u, [i, 0], [1, W - 2]);
            let e = load(u, [i, 2], [1, W - 2]);
            store(v, [i, 1], (c + n + s + w + e) * 0.2);
        }
    }
}
#[eagle::host]
pub fn stencil(u: Tensor<f32, NR, H, W>, v: Out<Tensor<f32, NR, H, W>>, iters: usize) {
    for r in 0..world_size() {
        stencil_d(u[r], v[r], iters, device = r);
    }
}

/// Dot product: B lane partials accumulated tile by tile (in order), then summed in order.
#[eagle::kernel(device)]
pub fn dot_d(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Tensor<f32, N>,
    acc: Out<Tensor<f32, B>>,
    out: Out<Tensor<f32, 1>>,
    iters: usize,
) {
    for it in 0..iters {
        store(acc, [0], load(x, [0], [B]) * load(y, [0], [B]));
        for i in 1..N / B {
            store(
                acc,
                [0],
                load(acc, [0], [B]) + load(x, [i * B], [B]) * load(y, [i * B], [B]),
            );
        }
        let mut s = 0.0f32;
        for j in 0..B {
            s += acc[j];
        }
        out[0] = s;
    }
}
#[eagle::host]
pub fn dot(
    x: Tensor<f32, NR, N>,
    y: Tensor<f32, NR, N>,
    acc: Out<Tensor<f32, NR, B>>,
    out: Out<Tensor<f32, NR, 1>>,
    iters: usize,
) {
    for r in 0..world_size() {
        dot_d(x[r], y[r], acc[r], out[r], iters, device = r);
    }
}

/// C = A B for 64 x 64 f32 matrices: row i of C accumulates A[i][k] * row k of B.
#[eagle::kernel(device)]
pub fn matmul_d(
    ctx: Ctx,
    a: Tensor<f32, M, M>,
    b: Tensor<f32, M, M>,
    c: Out<Tensor<f32, M, M>>,
    iters: usize,
) {
    for it in 0..iters {
        for i in 0..M {
            store(c, [i, 0], load(b, [0, 0], [1, M]) * a[i][0]);
            for k in 1..M {
                store(
                    c,
                    [i, 0],
                    load(c, [i, 0], [1, M]) + load(b, [k, 0], [1, M]) * a[i][k],
                );
            }
        }
    }
}
#[eagle::host]
pub fn matmul(
    a: Tensor<f32, NR, M, M>,
    b: Tensor<f32, NR, M, M>,
    c: Out<Tensor<f32, NR, M, M>>,
    iters: usize,
) {
    for r in 0..world_size() {
        matmul_d(a[r], b[r], c[r], iters, device = r);
    }
}

/// A sample kernel: y = sqrt(x * x + 1).
#[eagle::kernel(sample)]
pub fn hyp(s: usize, x: Tensor<f64, S>, y: Out<Tensor<f64, S>>) {
    y[s] = sqrt(x[s] * x[s] + 1.0);
}

fn secs(f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

fn best(k: usize, f: &mut dyn FnMut()) -> f64 {
    (0..k).map(|_| secs(f)).fold(f64::MAX, f64::min)
}

/// Rounds of [`paired`].
const ROUNDS: usize = 9;

/// Seconds per iteration of an eagle kernel and of its Rust loop, measured in interleaved
/// rounds (each round: the eagle program with 0 iterations, the least of three runs, and with
/// `iters` iterations, the difference divided by `iters`, then the Rust loop once over
/// `iters` iterations): the medians, and the min and max over rounds of the per-round ratio
/// rust / eagle. The least of the 0-iteration runs is the dispatch cost without noise, so
/// what noise there is stays in eagle's time: the subtraction never flatters eagle (one run
/// of it could exceed the full run's dispatch and leave a time near zero).
fn paired(
    iters: usize,
    eagle: &mut dyn FnMut(usize),
    rust: &mut dyn FnMut(),
) -> (f64, f64, (f64, f64)) {
    eagle(1);
    rust();
    let (mut es, mut rs, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let base = best(3, &mut || eagle(0));
        let full = secs(&mut || eagle(iters));
        let e = ((full - base) / iters as f64).max(1e-12);
        let r = secs(rust) / iters as f64;
        es.push(e);
        rs.push(r);
        ratios.push(r / e);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    ratios.sort_by(f64::total_cmp);
    (
        med(&mut es),
        med(&mut rs),
        (ratios[0], ratios[ratios.len() - 1]),
    )
}

struct Row {
    name: &'static str,
    unit: &'static str,
    work: f64,
    eagle: f64,
    rust: f64,
    /// min and max over rounds of eagle / rustc.
    spread: (f64, f64),
}

fn main() {
    let s = Session::sim(1).expect("session").with_race_check(false);
    let mut rows: Vec<Row> = vec![];
    let iters = 200;

    // saxpy f32
    let x = eagle_runner::random_tensor(&[1, N], 1);
    let y0 = eagle_runner::random_tensor(&[1, N], 2);
    let mut y = y0.clone();
    let mut run_e = |k: usize| {
        saxpy32.launch(&s, &x, &mut y, 1.5, k).expect("saxpy32");
    };
    let (xs, mut ys) = (x.data().to_vec(), y0.data().to_vec());
    let mut run_r = || {
        for _ in 0..iters {
            for (yv, xv) in ys.iter_mut().zip(black_box(&xs)) {
                *yv += xv * 1.5;
            }
            black_box(&mut ys);
        }
    };
    let (te, tr, spread) = paired(iters, &mut run_e, &mut run_r);
    rows.push(Row {
        name: "saxpy f32 (64K)",
        unit: "GB/s",
        work: (3 * 4 * N) as f64,
        eagle: te,
        rust: tr,
        spread,
    });

    // saxpy with fma (f32); rustc's `mul_add`, with its compile target's default features
    // (no FMA instruction on baseline x86-64: a call per element), is the peer a user has.
    let mut y = y0.clone();
    let (xs, mut ys) = (x.data().to_vec(), y0.data().to_vec());
    let mut run_e = |k: usize| {
        saxpyfma.launch(&s, &x, &mut y, 1.5, k).expect("saxpyfma");
    };
    let mut run_r = || {
        for _ in 0..iters {
            for (yv, xv) in ys.iter_mut().zip(black_box(&xs)) {
                *yv = xv.mul_add(1.5, *yv);
            }
            black_box(&mut ys);
        }
    };
    let (te_fma, tr_fma, spread_fma) = paired(iters, &mut run_e, &mut run_r);
    let fma_row = Row {
        name: "saxpy fma f32 (64K)",
        unit: "GB/s",
        work: (3 * 4 * N) as f64,
        eagle: te_fma,
        rust: tr_fma,
        spread: spread_fma,
    };

    // saxpy f64
    let x64 = Tensor::from_vec(&[1, N], x.data().iter().map(|v| *v as f64).collect()).expect("x64");
    let mut y64 =
        Tensor::from_vec(&[1, N], y0.data().iter().map(|v| *v as f64).collect()).expect("y64");
    let (xs, mut ys) = (x64.data().to_vec(), y64.data().to_vec());
    let mut run_e = |k: usize| {
        saxpy64.launch(&s, &x64, &mut y64, 1.5, k).expect("saxpy64");
    };
    let mut run_r = || {
        for _ in 0..iters {
            for (yv, xv) in ys.iter_mut().zip(black_box(&xs)) {
                *yv += xv * 1.5;
            }
            black_box(&mut ys);
        }
    };
    let (te, tr, spread) = paired(iters, &mut run_e, &mut run_r);
    rows.push(Row {
        name: "saxpy f64 (64K)",
        unit: "GB/s",
        work: (3 * 8 * N) as f64,
        eagle: te,
        rust: tr,
        spread,
    });

    // stencil
    let u = eagle_runner::random_tensor(&[1, H, W], 3);
    let mut v = Tensor::<f32>::zeros(&[1, H, W]);
    let mut run_e = |k: usize| {
        stencil.launch(&s, &u, &mut v, k).expect("stencil");
    };
    let us = u.data().to_vec();
    let mut vs = vec![0f32; H * W];
    let mut run_r = || {
        for _ in 0..iters {
            let us = black_box(&us);
            for i in 1..H - 1 {
                let (row, up, down) = (
                    &us[i * W..(i + 1) * W],
                    &us[(i - 1) * W..i * W],
                    &us[(i + 1) * W..(i + 2) * W],
                );
                let out = &mut vs[i * W + 1..(i + 1) * W - 1];
                let it = out
                    .iter_mut()
                    .zip(&row[1..W - 1])
                    .zip(&up[1..W - 1])
                    .zip(&down[1..W - 1])
                    .zip(&row[..W - 2])
                    .zip(&row[2..]);
                for (((((o, c), n), so), w), e) in it {
                    *o = (c + n + so + w + e) * 0.2;
                }
            }
            black_box(&mut vs);
        }
    };
    let (te, tr, spread) = paired(iters, &mut run_e, &mut run_r);
    rows.push(Row {
        name: "5-point stencil f32 (256x256)",
        unit: "GFLOP/s",
        work: (5 * (H - 2) * (W - 2)) as f64,
        eagle: te,
        rust: tr,
        spread,
    });

    // dot
    let y1 = eagle_runner::random_tensor(&[1, N], 4);
    let mut acc = Tensor::<f32>::zeros(&[1, B]);
    let mut out = Tensor::<f32>::zeros(&[1, 1]);
    let mut run_e = |k: usize| {
        dot.launch(&s, &x, &y1, &mut acc, &mut out, k).expect("dot");
    };
    let (xs, ys2) = (x.data().to_vec(), y1.data().to_vec());
    let mut lanes = vec![0f32; B];
    let mut dot_rust = 0f32;
    let mut run_r = || {
        for _ in 0..iters {
            let (xs, ys2) = (black_box(&xs), black_box(&ys2));
            for ((l, a), b) in lanes.iter_mut().zip(&xs[..B]).zip(&ys2[..B]) {
                *l = a * b;
            }
            for (xc, yc) in xs[B..].chunks_exact(B).zip(ys2[B..].chunks_exact(B)) {
                for ((l, a), b) in lanes.iter_mut().zip(xc).zip(yc) {
                    *l += a * b;
                }
            }
            dot_rust = lanes.iter().fold(0.0, |a, b| a + b);
            black_box(dot_rust);
        }
    };
    let (te, tr, spread) = paired(iters, &mut run_e, &mut run_r);
    rows.push(Row {
        name: "dot f32 (64K)",
        unit: "GFLOP/s",
        work: (2 * N) as f64,
        eagle: te,
        rust: tr,
        spread,
    });
    let same_dot = out.data()[0].to_bits() == dot_rust.to_bits();

    // matmul
    let a = eagle_runner::random_tensor(&[1, M, M], 5);
    let b = eagle_runner::random_tensor(&[1, M, M], 6);
    let mut c = Tensor::<f32>::zeros(&[1, M, M]);
    let mut run_e = |k: usize| {
        matmul.launch(&s, &a, &b, &mut c, k).expect("matmul");
    };
    let (am, bm) = (a.data().to_vec(), b.data().to_vec());
    let mut cm = vec![0f32; M * M];
    let mut run_r = || {
        for _ in 0..iters {
            let (am, bm) = (black_box(&am), black_box(&bm));
            for (i, crow) in cm.chunks_exact_mut(M).enumerate() {
                let arow = &am[i * M..(i + 1) * M];
                for (c, b) in crow.iter_mut().zip(&bm[..M]) {
                    *c = b * arow[0];
                }
                for (k, brow) in bm.chunks_exact(M).enumerate().skip(1) {
                    let aik = arow[k];
                    for (c, b) in crow.iter_mut().zip(brow) {
                        *c += b * aik;
                    }
                }
            }
            black_box(&mut cm);
        }
    };
    let (te, tr, spread) = paired(iters, &mut run_e, &mut run_r);
    rows.push(Row {
        name: "matmul f32 (64x64)",
        unit: "GFLOP/s",
        work: (2 * M * M * M) as f64,
        eagle: te,
        rust: tr,
        spread,
    });
    let same_mm = c
        .data()
        .iter()
        .zip(&cm)
        .all(|(p, q)| p.to_bits() == q.to_bits());

    // sample kernel through HostTeam (1 thread)
    let ns = 1 << 20;
    let xs: Vec<f64> = (0..ns).map(|i| i as f64 * 1e-3).collect();
    let xt = Tensor::from_vec(&[ns], xs.clone()).expect("xs");
    let mut yt = Tensor::<f64>::zeros(&[ns]);
    let p = plan(hyp, Structure::HostTeam, Structure::HostTeam)
        .expect("plan")
        .with_threads(1);
    p.run(0, &mut Planes::new().input("x", &xt).output("y", &mut yt))
        .expect("warm");
    // A plan run is the whole kernel: rounds of one run each way, interleaved.
    let mut yr = vec![0f64; ns];
    let (mut es, mut rs, mut ratios) = (vec![], vec![], vec![]);
    for _ in 0..ROUNDS {
        let e = secs(&mut || {
            p.run(0, &mut Planes::new().input("x", &xt).output("y", &mut yt))
                .expect("hyp");
        });
        let r = secs(&mut || {
            for (o, v) in yr.iter_mut().zip(black_box(&xs)) {
                *o = (v * v + 1.0).sqrt();
            }
            black_box(&mut yr);
        });
        es.push(e);
        rs.push(r);
        ratios.push(r / e);
    }
    for v in [&mut es, &mut rs, &mut ratios] {
        v.sort_by(f64::total_cmp);
    }
    let (te, tr, spread) = (
        es[ROUNDS / 2],
        rs[ROUNDS / 2],
        (ratios[0], ratios[ROUNDS - 1]),
    );
    rows.push(Row {
        name: "sample kernel hyp f64 (1M, HostTeam x1)",
        unit: "GB/s",
        work: (2 * 8 * ns) as f64,
        eagle: te,
        rust: tr,
        spread,
    });

    let mut t = report::Table::new(
        &format!("kernel ({ROUNDS} interleaved rounds)"),
        &[
            ("eagle (median)", "", 2),
            ("rustc (median)", "", 2),
            ("eagle / rustc", "", 2),
            ("per round, min", "", 2),
            ("per round, max", "", 2),
        ],
    );
    let mut logsum = 0.0;
    for r in &rows {
        let (e, q) = (r.work / r.eagle / 1e9, r.work / r.rust / 1e9);
        logsum += (e / q).ln();
        t.row(
            &format!("{}, {}", r.name, r.unit),
            vec![e, q, e / q, r.spread.0, r.spread.1],
        );
    }
    let geo = (logsum / rows.len() as f64).exp();
    t.notes.push(format!(
        "Geomean of eagle / rustc: **{geo:.2}**. dot bit-identical to the same-order Rust loop: {same_dot}; matmul bit-identical: {same_mm}."
    ));
    let (e, q) = (
        fma_row.work / fma_row.eagle / 1e9,
        fma_row.work / fma_row.rust / 1e9,
    );
    let plain = rows[0].work / rows[0].eagle / 1e9;
    t.notes.push(format!(
        "{} (not in the geomean): eagle {e:.2} GB/s, {:.2} of eagle's mul + add saxpy; rustc's `mul_add` {q:.2} GB/s (a libm call per element on baseline x86-64; eagle / rustc {:.2}-{:.2} per round).",
        fma_row.name,
        e / plain,
        fma_row.spread.0,
        fma_row.spread.1
    ));
    let mut rep = report::Report::new("kernels");
    rep.tables.push(t);
    rep.finish();

    // compile latency, launch overhead, runner
    println!();
    println!("| what | time |");
    println!("|---|---|");
    use eagle::ir::EagleFn;
    let m = saxpy32::module().expect("module");
    let bnd = eagle::codegen::Bindings::world(1).with("NR", 1);
    let cold = best(20, &mut || {
        eagle::codegen::clear_cache();
        eagle::codegen::compile(&m, "saxpy32", &bnd, eagle::codegen::Target::Cpu).expect("compile");
    });
    let hit = best(20, &mut || {
        eagle::codegen::compile(&m, "saxpy32", &bnd, eagle::codegen::Target::Cpu).expect("compile");
    });
    println!(
        "| compile one per-device function (saxpy f32), cold | {:.0} us |",
        cold * 1e6
    );
    println!("| compile, cache hit | {:.1} us |", hit * 1e6);
    // Launch overhead is `benches/launch.rs` (the mean of 10,000 launches).

    report::save_plot("perf-ratios.svg", || plot(&rows, geo));
}

/// A bar chart of eagle / rustc per kernel, as SVG.
fn plot(rows: &[Row], geo: f64) -> String {
    const SHORT: [&str; 6] = [
        "saxpy f32",
        "saxpy f64",
        "stencil",
        "dot",
        "matmul",
        "sample (plan)",
    ];
    let bars: Vec<(String, f64)> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                SHORT.get(i).copied().unwrap_or("").to_string(),
                r.rust / r.eagle,
            )
        })
        .collect();
    report::bar_chart(
        &format!("eagle / rustc throughput (geomean {geo:.2})"),
        "eagle / rustc",
        (760, 360),
        &bars,
    )
}
