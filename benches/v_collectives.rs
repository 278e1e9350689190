//! The variable-size all-to-all against the fixed-size one moving the same bytes, on the
//! `sim` platform. Prints a markdown table (`-- --save` writes `docs/bench/v_collectives.json`
//! and its region of `docs/performance.md`).
//!
//! `cargo bench --bench v_collectives`
//!
//! Each rank sends `per` rows of 64 `f32` to every rank (itself included), as
//! `all_to_all_v` with equal counts and as the built-in `all_to_all` with rows of
//! `per * 64` elements: the same bytes in the same places. Each cell runs the collective in a
//! loop inside one per-device program and subtracts the same program with zero iterations, in
//! 5 interleaved rounds (median, min, max), with the race detector off (as the collectives
//! bench). "GB/s per rank" is the `(P-1) * per * 256` bytes a rank receives from its peers
//! over the median time.

#[path = "report/mod.rs"]
mod report;

use eagle::prelude::*;
use std::time::Instant;

const NR: Dim = dynamic!("NR");
const S: Dim = dynamic!("S");
const M: Dim = dynamic!("M");
/// Elements per row.
const D: usize = 64;

/// `all_to_all_v` `iters` times; the counts are this rank's row of the count matrix.
#[eagle::kernel(device)]
pub fn v_d(
    ctx: Ctx,
    counts: Tensor<u64, NR>,
    src: Window<f32, S, D>,
    sc: Window<u64, NR>,
    y: Out<Tensor<f32, S, D>>,
    got: Out<Tensor<u64, NR>>,
    iters: usize,
) {
    put(sc, rank(ctx), counts);
    for i in 0..iters {
        all_to_all_v(ctx, src, sc, y, got);
    }
}

/// Host: one dispatch per rank.
#[eagle::host]
pub fn v(
    counts: Tensor<u64, NR, NR>,
    y: Out<Tensor<f32, NR, S, D>>,
    got: Out<Tensor<u64, NR, NR>>,
    iters: usize,
) {
    let s = alloc_window_buffer([S, D], f32);
    let c = alloc_window_buffer([NR], u64);
    for r in 0..world_size() {
        v_d(
            counts[r],
            window(s, [S, D], f32),
            window(c, [NR], u64),
            y[r],
            got[r],
            iters,
            device = r,
        );
    }
}

/// The built-in `all_to_all` `iters` times.
#[eagle::kernel(device)]
pub fn f_d(ctx: Ctx, src: Window<f32, NR, M>, y: Out<Tensor<f32, NR, M>>, iters: usize) {
    for i in 0..iters {
        all_to_all(ctx, src, y);
    }
}

/// Host: one dispatch per rank.
#[eagle::host]
pub fn f(y: Out<Tensor<f32, NR, NR, M>>, iters: usize) {
    let s = alloc_window_buffer([NR, M], f32);
    for r in 0..world_size() {
        f_d(window(s, [NR, M], f32), y[r], iters, device = r);
    }
}

fn time_it(run: &dyn Fn(usize) -> eagle::Result<()>, iters: usize) -> f64 {
    let t0 = Instant::now();
    run(iters).expect("benchmark run");
    t0.elapsed().as_secs_f64()
}

/// Interleaved rounds per cell.
const ROUNDS: usize = 5;
/// Collectives per timed run.
const ITERS: usize = 20;

fn main() {
    let mut rep = report::Report::new("v_collectives");
    let mut t = report::Table::new(
        &format!("P, rows of 64 f32 per pair ({ROUNDS} interleaved rounds)"),
        &[
            ("all_to_all_v (median)", "us", 1),
            ("min", "us", 1),
            ("max", "us", 1),
            ("all_to_all, same bytes (median)", "us", 1),
            ("v / fixed", "", 2),
            ("all_to_all_v per rank", "GB/s", 2),
        ],
    );
    for p in [2usize, 4, 8] {
        let s = Session::sim(p).expect("session").with_race_check(false);
        for per in [16usize, 256, 1024] {
            let rows = per * p;
            let counts = Tensor::from_vec(&[p, p], vec![per as u64; p * p]).unwrap();
            let run_v = |iters: usize| -> eagle::Result<()> {
                let mut y = Tensor::<f32>::zeros(&[p, rows, D]);
                let mut got = Tensor::<u64>::zeros(&[p, p]);
                v.launch(&s, &counts, &mut y, &mut got, iters).map(|_| ())
            };
            let run_f = |iters: usize| -> eagle::Result<()> {
                let mut y = Tensor::<f32>::zeros(&[p, p, per * D]);
                f.launch(&s, &mut y, iters).map(|_| ())
            };
            run_v(1).expect("warm-up compiles");
            run_f(1).expect("warm-up compiles");
            let (mut tv, mut tf) = (vec![], vec![]);
            for _ in 0..ROUNDS {
                for (run, out) in [(&run_v as &dyn Fn(usize) -> _, &mut tv), (&run_f, &mut tf)] {
                    // A pair whose baseline outran the full run measured only noise: taken
                    // again (up to 3 times), as in the collectives bench.
                    for _ in 0..3 {
                        let base = time_it(run, 0);
                        let full = time_it(run, ITERS);
                        if full > base {
                            out.push((full - base) / ITERS as f64);
                            break;
                        }
                    }
                }
            }
            let (lo, med, hi) = report::stats(&tv);
            let (_, fmed, _) = report::stats(&tf);
            let bytes = ((p - 1) * per * D * 4) as f64;
            t.row(
                &format!("P = {p}, {per} rows"),
                vec![
                    med * 1e6,
                    lo * 1e6,
                    hi * 1e6,
                    fmed * 1e6,
                    med / fmed,
                    bytes / med / 1e9,
                ],
            );
        }
    }
    rep.tables.push(t);
    rep.finish();
}
