//! Bandwidth of the built-in allgather and allreduce (each mode) on the `sim` platform, next
//! to single-thread `memcpy` bandwidth measured in the same run. Prints a markdown table.
//!
//! `cargo bench --bench collectives` (add `-- --quick` for sizes up to 1 MiB only)
//!
//! Each cell times a per-device program that runs the collective `iters` times and subtracts
//! the same program with 0 iterations (dispatch, copy-in and copy-out), so only the
//! collectives are timed. "bytes/rank" is what each rank must move at least: `(P-1)/P * S`
//! for allgather, `2 (P-1)/P * S` for two-phase and ring allreduce, `(P-1) * S` for mesh
//! allreduce (it reads every peer's whole buffer). "all ranks" multiplies by P: the ranks run
//! concurrently on the machine's cores and share its memory bandwidth.

#[path = "report/mod.rs"]
mod report;

use eagle::prelude::*;
use std::time::Instant;

const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");

/// Allgather `iters` times.
#[eagle::kernel(device)]
pub fn ag_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allgather(ctx, src, dst);
    }
}

/// Mesh allreduce `iters` times.
#[eagle::kernel(device)]
pub fn mesh_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allreduce(ctx, src, dst, Sum, Mesh);
    }
}

/// Two-phase allreduce `iters` times.
#[eagle::kernel(device)]
pub fn two_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allreduce(ctx, src, dst, Sum, TwoPhase);
    }
}

/// Ring allreduce `iters` times.
#[eagle::kernel(device)]
pub fn ring_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allreduce(ctx, src, dst, Sum, Ring);
    }
}

macro_rules! bench_host {
    ($host:ident, $dev:ident) => {
        /// Host: one dispatch per rank.
        #[eagle::host]
        pub fn $host(x: Tensor<f32, NR, N>, iters: usize) {
            let s = alloc_window_buffer([N], f32);
            let d = alloc_window_buffer([N], f32);
            for r in 0..world_size() {
                $dev(window(s, [N], f32), window(d, [N], f32), iters, device = r);
            }
        }
    };
}

bench_host!(ag, ag_d);
bench_host!(mesh, mesh_d);
bench_host!(two, two_d);
bench_host!(ring, ring_d);

type Launch = fn(&Session, &Tensor<f32>, usize) -> eagle::Result<eagle::LaunchReport>;
/// (name, launcher, bytes each rank moves per byte of buffer at world size P).
type Case = (&'static str, Launch, fn(f64) -> f64);

fn time_it(f: &dyn Fn() -> eagle::Result<()>) -> f64 {
    let t0 = Instant::now();
    f().expect("benchmark run");
    t0.elapsed().as_secs_f64()
}

fn memcpy_gbs(bytes: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let reps = (256 << 20) / bytes.max(1);
    let reps = reps.clamp(3, 100_000);
    dst.copy_from_slice(&src);
    let t0 = Instant::now();
    for _ in 0..reps {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    bytes as f64 * reps as f64 / t0.elapsed().as_secs_f64() / 1e9
}

/// Interleaved rounds per size.
const ROUNDS: usize = 5;

/// One curve of the plot: (collective, P) and (bytes, all-ranks GB/s) points.
type Curve = (String, Vec<(f64, f64)>);

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: Vec<usize> = (0..9)
        .map(|k| 1024usize << (2 * k))
        .filter(|&s| !quick || s <= 1 << 20)
        .collect();
    let cases: [Case; 4] = [
        ("allgather", |s, x, i| ag.launch(s, x, i), |p| (p - 1.0) / p),
        (
            "allreduce mesh",
            |s, x, i| mesh.launch(s, x, i),
            |p| p - 1.0,
        ),
        (
            "allreduce two_phase",
            |s, x, i| two.launch(s, x, i),
            |p| 2.0 * (p - 1.0) / p,
        ),
        (
            "allreduce ring",
            |s, x, i| ring.launch(s, x, i),
            |p| 2.0 * (p - 1.0) / p,
        ),
    ];
    let mut rep = report::Report::new("collectives");
    let mut curves: Vec<Curve> = vec![];
    let mut memcpy_curve: Vec<(f64, f64)> = vec![];
    for p in [2usize, 4] {
        let mut t = report::Table::new(
            &format!("P = {p}: collective, buffer size ({ROUNDS} interleaved rounds)"),
            &[
                ("time/op (median)", "us", 1),
                ("min", "us", 1),
                ("max", "us", 1),
                ("KiB moved per rank", "", 0),
                ("all ranks (median)", "GB/s", 2),
                ("memcpy (median)", "GB/s", 2),
                ("all ranks / memcpy", "", 2),
            ],
        );
        let s = Session::sim(p).expect("session").with_race_check(false);
        let mut pc: Vec<Vec<(f64, f64)>> = vec![vec![]; cases.len()];
        for &bytes in &sizes {
            let n = bytes / 4;
            let x = Tensor::<f32>::zeros(&[p, n]);
            // At least 8: the zero-iteration baseline (copies of the P x S input) varies by
            // more than two large collectives take.
            let iters = ((64usize << 20) / bytes).clamp(8, 2000);
            for (_, launch, _) in &cases {
                launch(&s, &x, 1).expect("warm-up compiles");
            }
            let mut per_op: Vec<Vec<f64>> = vec![vec![]; cases.len()];
            let mut mc = vec![];
            for _ in 0..ROUNDS {
                mc.push(memcpy_gbs(bytes));
                for (c, (_, launch, _)) in cases.iter().enumerate() {
                    // A pair whose baseline outran the full run measured only noise: taken
                    // again (up to 3 times).
                    for _ in 0..3 {
                        let base = time_it(&|| launch(&s, &x, 0).map(|_| ()));
                        let full = time_it(&|| launch(&s, &x, iters).map(|_| ()));
                        if full > base {
                            per_op[c].push((full - base) / iters as f64);
                            break;
                        }
                    }
                }
            }
            let (_, mc, _) = report::stats(&mc);
            if p == 2 {
                memcpy_curve.push((bytes as f64, mc));
            }
            for (c, (name, _, factor)) in cases.iter().enumerate() {
                assert!(
                    !per_op[c].is_empty(),
                    "{name}: no round measured more than noise"
                );
                let (lo, med, hi) = report::stats(&per_op[c]);
                let moved = factor(p as f64) * bytes as f64;
                let all = moved / med / 1e9 * p as f64;
                t.row(
                    &format!("{name}, {}", human(bytes)),
                    vec![
                        med * 1e6,
                        lo * 1e6,
                        hi * 1e6,
                        moved / 1024.0,
                        all,
                        mc,
                        all / mc,
                    ],
                );
                pc[c].push((bytes as f64, all));
            }
        }
        for (c, (name, _, _)) in cases.iter().enumerate() {
            curves.push((format!("{name}, P = {p}"), std::mem::take(&mut pc[c])));
        }
        rep.tables.push(t);
    }
    curves.push(("memcpy, one thread".into(), memcpy_curve));
    rep.finish();
    report::save_plot("collectives.svg", || plot(&curves));
}

/// All-ranks bandwidth against buffer size, one line per curve (log-2 x axis), as SVG.
fn plot(curves: &[Curve]) -> String {
    use plotters::prelude::*;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (860, 460)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let xs = curves.iter().flat_map(|c| c.1.iter().map(|p| p.0.log2()));
        let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
        let ymax = curves
            .iter()
            .flat_map(|c| c.1.iter().map(|p| p.1))
            .fold(1.0, f64::max)
            * 1.1;
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(
                "collectives on sim: all-ranks GB/s by buffer size",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(x0..x1, 0f64..ymax)
        else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_label_formatter(&|v| human(2f64.powf(*v).round() as usize))
            .x_desc("buffer size")
            .y_desc("GB/s, all ranks")
            .draw();
        for (i, (name, pts)) in curves.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let dashed = name.contains("P = 4");
            let style = ShapeStyle {
                color,
                filled: false,
                stroke_width: if dashed { 1 } else { 2 },
            };
            if let Ok(a) = chart.draw_series(LineSeries::new(
                pts.iter().map(|p| (p.0.log2(), p.1)),
                style,
            )) {
                a.label(name.as_str())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
            }
        }
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

fn human(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}
