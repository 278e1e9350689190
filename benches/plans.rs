//! Execution plans against the loops a Rust user would write, in one process:
//!
//! - a mapreduce (sum of squares of 10^6 f64) against a plain Rust loop that sums in the same
//!   order (rows of 32 samples from +0.0, then the row partials in row order), at 1 and 2
//!   threads;
//! - a sample-local kernel (sigmoid of 10^6 f64) against a Rust loop and rayon's `par_iter`;
//! - HostTeam scaling on a compute-bound kernel (400 Newton steps per sample).
//!
//! Rounds are interleaved (every contender once per round; a sample of the sub-millisecond
//! mapreduce is the mean of 20 runs back to back); each row gives the min / median /
//! max over rounds, and each ratio is of medians. Results are checked bit for bit against the
//! Rust loop before timing. With `--save`, also writes `docs/plan-scaling.svg` (each
//! contender's speed-up over its own 1-thread time).
//!
//! `cargo bench --bench plans` (`-- --quick` for 3 rounds; `-- --save` writes
//! `docs/bench/plans.json` and its tables in `docs/performance.md`)

use eagle::plan::{plan, Planes, Structure, ROW};
use eagle::prelude::*;
use rayon::prelude::*;
use std::time::Instant;

#[path = "report/mod.rs"]
mod report;

const N: Dim = dynamic!("N");

/// 400 Newton iterations of sqrt per sample: compute-bound.
#[eagle::kernel(sample)]
pub fn newton(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    let a = x[s] + 1.0;
    let mut g = a;
    for i in 0..400 {
        g = 0.5 * (g + a / g);
    }
    y[s] = g;
}

/// Sum of squares of all samples: a mapreduce.
#[eagle::kernel(sample)]
pub fn sum_sq(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, 1>>) {
    out[0] = out[0] + x[s] * x[s];
}

/// The logistic function, per sample.
#[eagle::kernel(sample)]
pub fn sigmoid(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = 1.0 / (1.0 + exp(-x[s]));
}

/// The mapreduce's order in plain Rust: rows of `ROW` from +0.0, then rows in order.
fn sum_sq_rows(x: &[f64]) -> f64 {
    let mut acc = 0.0;
    for row in x.chunks(ROW) {
        let mut p = 0.0;
        for v in row {
            p += v * v;
        }
        acc += p;
    }
    acc
}

/// The row partials of `x` (rows of `ROW` from +0.0).
fn row_partials(x: &[f64]) -> Vec<f64> {
    x.chunks(ROW)
        .map(|row| {
            let mut p = 0.0;
            for v in row {
                p += v * v;
            }
            p
        })
        .collect()
}

fn sigmoid_rust(x: &[f64], y: &mut [f64]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y = 1.0 / (1.0 + (-x).exp());
    }
}

fn time(f: &mut dyn FnMut()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

struct Case<'a> {
    name: String,
    run: Box<dyn FnMut() + 'a>,
    times: Vec<f64>,
}

fn case<'a>(name: impl Into<String>, run: impl FnMut() + 'a) -> Case<'a> {
    Case {
        name: name.into(),
        run: Box::new(run),
        times: vec![],
    }
}

/// Runs every case `reps` times back to back per round (one sample: the mean of the `reps`),
/// `rounds` times (after one warm-up each); returns the table (min / median / max in ms) and
/// the medians in seconds. A sub-millisecond case takes `reps > 1`, so that one sample is not
/// one scheduler tick or one other contender's wind-down.
fn table(
    title: &str,
    rounds: usize,
    reps: usize,
    cases: &mut [Case<'_>],
) -> (report::Table, Vec<f64>) {
    for c in cases.iter_mut() {
        (c.run)();
    }
    for _ in 0..rounds {
        for c in cases.iter_mut() {
            let t = time(&mut || {
                for _ in 0..reps {
                    (c.run)();
                }
            });
            c.times.push(t / reps as f64);
        }
    }
    let of = if reps > 1 {
        format!(" of {reps}")
    } else {
        String::new()
    };
    let mut t = report::Table::new(
        &format!("{title} ({rounds} rounds{of})"),
        &[("min", "ms", 3), ("median", "ms", 3), ("max", "ms", 3)],
    );
    let meds = cases
        .iter()
        .map(|c| {
            let (lo, med, hi) = report::stats(&c.times);
            t.row(&c.name, vec![lo * 1e3, med * 1e3, hi * 1e3]);
            med
        })
        .collect();
    (t, meds)
}

fn main() {
    let rounds = if std::env::args().any(|a| a == "--quick") {
        3
    } else {
        15
    };
    let n = 1_000_000;
    let xs: Vec<f64> = (0..n).map(|i| ((i as f64) * 0.37).sin()).collect();
    let x = Tensor::from_vec(&[n], xs.clone()).expect("x");

    // Mapreduce.
    let want = sum_sq_rows(&xs);
    let p1 = plan(sum_sq, Structure::HostTeam, Structure::HostTeam)
        .expect("plan")
        .with_threads(1);
    let p2 = p1.clone().with_threads(2);
    for p in [&p1, &p2] {
        let mut out = Tensor::<f64>::zeros(&[1]);
        p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
            .expect("run");
        assert_eq!(out.data()[0].to_bits(), want.to_bits(), "mapreduce bits");
    }
    let run_plan = |p: &eagle::plan::Plan| {
        let mut out = Tensor::<f64>::zeros(&[1]);
        p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
            .expect("run");
        std::hint::black_box(out);
    };
    let mut rep = report::Report::new("plans");
    let (mut t, m) = table(
        "sum of squares, 10^6 f64 (rows of 32)",
        rounds,
        20,
        &mut [
            case("Rust loop, same order", || {
                std::hint::black_box(sum_sq_rows(std::hint::black_box(&xs)));
            }),
            case("Rust loop, 2 threads (rows split in halves)", || {
                let rows = xs.len().div_ceil(ROW);
                let mid = rows / 2 * ROW;
                let (a, b) = xs.split_at(mid);
                let (pa, pb) = std::thread::scope(|s| {
                    let h = s.spawn(|| row_partials(b));
                    (row_partials(a), h.join().expect("thread"))
                });
                let mut acc = 0.0;
                for p in pa.iter().chain(&pb) {
                    acc += p;
                }
                std::hint::black_box(acc);
            }),
            case("eagle mapreduce, HostTeam x1", || run_plan(&p1)),
            case("eagle mapreduce, HostTeam x2", || run_plan(&p2)),
        ],
    );
    t.notes.push(format!(
        "mapreduce: 1 thread = {:.2} of the same-order Rust loop; 2 threads = {:.2}x of 1 thread (the Rust loop: {:.2}x on 2 threads). Bits equal to the Rust loop's.",
        m[0] / m[2],
        m[2] / m[3],
        m[0] / m[1]
    ));
    rep.tables.push(t);
    // Speed-up over each contender's own 1-thread time, for the scaling plot.
    let mut curves: Vec<(String, Vec<(f64, f64)>)> = vec![
        (
            "eagle mapreduce".into(),
            vec![(1.0, 1.0), (2.0, m[2] / m[3])],
        ),
        (
            "Rust loop, sum of squares".into(),
            vec![(1.0, 1.0), (2.0, m[0] / m[1])],
        ),
    ];

    // Sample-local.
    let mut want = vec![0.0; n];
    sigmoid_rust(&xs, &mut want);
    let s1 = plan(sigmoid, Structure::HostTeam, Structure::HostTeam)
        .expect("plan")
        .with_threads(1);
    let s2 = s1.clone().with_threads(2);
    // eagle's `exp` is its own (the same bits on every backend), not the platform libm's:
    // the threads agree bit for bit; against Rust's `f64::exp` the table reports the ulps.
    let mut outs = vec![];
    for p in [&s1, &s2] {
        let mut y = Tensor::<f64>::zeros(&[n]);
        p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .expect("run");
        outs.push(y.data().to_vec());
    }
    assert!(
        outs[0]
            .iter()
            .zip(&outs[1])
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "sigmoid: 1 and 2 threads differ"
    );
    let ulps = outs[0]
        .iter()
        .zip(&want)
        .map(|(a, b)| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs())
        .max()
        .unwrap_or(0);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("rayon pool");
    let mut ybuf = vec![0.0; n];
    let mut yt = Tensor::<f64>::zeros(&[n]);
    let mut yt2 = Tensor::<f64>::zeros(&[n]);
    let mut ybuf2 = vec![0.0; n];
    let xs_ref = &xs;
    let x_ref = &x;
    let (mut t, m) = table(
        "sigmoid, 10^6 f64",
        rounds,
        1,
        &mut [
            case("Rust loop", || sigmoid_rust(xs_ref, &mut ybuf)),
            case("rayon par_iter, 2 threads", || {
                pool.install(|| {
                    ybuf2
                        .par_iter_mut()
                        .zip(xs_ref.par_iter())
                        .for_each(|(y, x)| *y = 1.0 / (1.0 + (-x).exp()))
                })
            }),
            case("eagle sample-local, HostTeam x1", || {
                s1.run(0, &mut Planes::new().input("x", x_ref).output("y", &mut yt))
                    .expect("run")
            }),
            case("eagle sample-local, HostTeam x2", || {
                s2.run(
                    0,
                    &mut Planes::new().input("x", x_ref).output("y", &mut yt2),
                )
                .expect("run")
            }),
        ],
    );
    t.notes.push(format!(
        "sample-local: 1 thread = {:.2} of the Rust loop; 2 threads = {:.2} of rayon. eagle's `exp` is its own: 1 and 2 threads give the same bits, at most {ulps} ulp from Rust's `f64::exp`.",
        m[0] / m[2],
        m[1] / m[3]
    ));
    rep.tables.push(t);
    curves.push(("eagle sigmoid".into(), vec![(1.0, 1.0), (2.0, m[2] / m[3])]));
    curves.push((
        "rayon sigmoid (1 thread: the Rust loop)".into(),
        vec![(1.0, 1.0), (2.0, m[0] / m[1])],
    ));

    // Scaling.
    let n = 200_000;
    let x = Tensor::from_vec(&[n], (0..n).map(|i| i as f64 * 0.001).collect()).expect("x");
    let plans: Vec<_> = [1usize, 2, 4]
        .iter()
        .map(|&t| {
            plan(newton, Structure::HostTeam, Structure::HostTeam)
                .expect("plan")
                .with_threads(t)
        })
        .collect();
    let x_ref = &x;
    let mut cases: Vec<Case<'_>> = plans
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let mut y = Tensor::<f64>::zeros(&[n]);
            case(format!("newton, HostTeam x{}", [1, 2, 4][k]), move || {
                p.run(0, &mut Planes::new().input("x", x_ref).output("y", &mut y))
                    .expect("run")
            })
        })
        .collect();
    let (mut t, m) = table(
        "newton (200k samples x 400 steps)",
        rounds.min(5),
        1,
        &mut cases,
    );
    t.notes.push(format!(
        "newton: 2 threads = {:.2}x of 1 thread, 4 threads = {:.2}x.",
        m[0] / m[1],
        m[0] / m[2]
    ));
    rep.tables.push(t);
    curves.push((
        "eagle newton (compute-bound)".into(),
        vec![(1.0, 1.0), (2.0, m[0] / m[1]), (4.0, m[0] / m[2])],
    ));
    rep.finish();
    report::save_plot("plan-scaling.svg", || plot(&curves));
}

/// Speed-up over one thread against threads, one line per contender, as SVG.
fn plot(curves: &[(String, Vec<(f64, f64)>)]) -> String {
    use plotters::prelude::*;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (760, 400)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let ymax = curves
            .iter()
            .flat_map(|c| c.1.iter().map(|p| p.1))
            .fold(2.0, f64::max)
            * 1.1;
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(
                format!(
                    "plans: speed-up over 1 thread ({} logical CPUs)",
                    std::thread::available_parallelism().map_or(0, |n| n.get())
                ),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(1f64..4f64, 0f64..ymax)
        else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("threads")
            .y_desc("speed-up over 1 thread")
            .draw();
        for (i, (name, pts)) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let style = ShapeStyle {
                color,
                filled: false,
                stroke_width: 2,
            };
            if let Ok(a) = chart.draw_series(LineSeries::new(pts.iter().copied(), style)) {
                a.label(name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
            }
        }
        let _ = chart.draw_series(LineSeries::new(
            vec![(1.0, 1.0), (4.0, 4.0)],
            &BLACK.mix(0.3),
        ));
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw();
        let _ = root.present();
    }
    out
}
