//! HostTeam scaling on a compute-bound sample kernel: 1 thread against 2 (and 4), and the
//! mapreduce sum of 10^6 values through each structure. Prints a markdown table.
//!
//! `cargo bench --bench plans`

use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;
use std::time::Instant;

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

/// Sum of all samples.
#[eagle::kernel(sample)]
pub fn total(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, 1>>) {
    out[0] = out[0] + x[s];
}

fn best_of(k: usize, f: &dyn Fn()) -> f64 {
    (0..k)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let n = 200_000;
    let x = Tensor::from_vec(&[n], (0..n).map(|i| i as f64 * 0.001).collect()).expect("x");
    println!("| kernel | structure | threads | time | speedup vs 1 thread |");
    println!("|---|---|---|---|---|");
    let mut one = 0.0;
    for threads in [1usize, 2, 4] {
        let p = plan(newton, Structure::HostTeam, Structure::HostTeam)
            .expect("plan")
            .with_threads(threads);
        let mut y = Tensor::<f64>::zeros(&[n]);
        p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .expect("warm-up");
        let t = best_of(5, &|| {
            let mut y = Tensor::<f64>::zeros(&[n]);
            p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
                .expect("run");
        });
        if threads == 1 {
            one = t;
        }
        println!(
            "| newton (200k samples x 400 iterations) | HostTeam | {threads} | {:.1} ms | {:.2}x |",
            t * 1e3,
            one / t
        );
    }
    let n = 1_000_000;
    let x = Tensor::from_vec(&[n], (0..n).map(|i| (i as f64).sin()).collect()).expect("x");
    for (name, st, threads, ranks) in [
        ("HostTeam", Structure::HostTeam, 1, None),
        ("HostTeam", Structure::HostTeam, 2, None),
        ("DeviceKernel", Structure::DeviceKernel, 1, None),
        (
            "RankPartition (4 simulated ranks)",
            Structure::RankPartition,
            2,
            Some(4),
        ),
    ] {
        let mut p = plan(total, st, Structure::HostTeam)
            .expect("plan")
            .with_threads(threads);
        if let Some(r) = ranks {
            p = p.with_simulated_ranks(r);
        }
        let t = best_of(5, &|| {
            let mut out = Tensor::<f64>::zeros(&[1]);
            p.run(0, &mut Planes::new().input("x", &x).output("out", &mut out))
                .expect("run");
        });
        println!(
            "| total (sum of 10^6 f64, rows of 32) | {name} | {threads} | {:.1} ms | |",
            t * 1e3
        );
    }
}
