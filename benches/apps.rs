//! The distributed programs (issue 16): `tp_ffn` tokens per second at P = 1, 2, 4 on `sim`,
//! in both weight modes, and `allgather_gemm` overlapped against bulk at P = 2, 4. Each cell
//! is the median of 7 launches after one to compile (the launch includes copying the
//! arguments in and out, which `sim` does per device). Prints markdown tables (the ones in
//! `docs/performance.md`).
//!
//! `cargo bench --bench apps`

use eagle::prelude::*;
use std::time::Instant;

#[allow(dead_code)]
#[path = "../examples/allgather_gemm.rs"]
mod allgather_gemm;
#[allow(dead_code)]
#[path = "../examples/tp_ffn.rs"]
mod tp_ffn;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    use tp_ffn::{D, F, T};
    println!("| program | weights | P | ms per launch | tokens/s |");
    println!("|---|---|---|---|---|");
    for p in [1usize, 2, 4] {
        let s = Session::sim(p).expect("session").with_race_check(false);
        let fp = F / p;
        let x = eagle_runner::random_tensor(&[T, D], 1);
        let w1 = eagle_runner::random_tensor(&[p, D, fp], 2);
        let w2 = eagle_runner::random_tensor(&[p, fp, D], 3);
        let b1 = Tensor::from_vec(
            w1.shape(),
            w1.data().iter().map(|&v| bf16::from_f32(v)).collect(),
        )
        .expect("b1");
        let b2 = Tensor::from_vec(
            w2.shape(),
            w2.data().iter().map(|&v| bf16::from_f32(v)).collect(),
        )
        .expect("b2");
        let mut h = Tensor::<f32>::zeros(&[p, T, fp]);
        let mut y = Tensor::<f32>::zeros(&[p, T, D]);
        for mode in ["f32", "bf16"] {
            let mut run = || {
                if mode == "f32" {
                    tp_ffn::tp_ffn
                        .launch(&s, &x, &w1, &w2, &mut h, &mut y)
                        .expect("f32");
                } else {
                    tp_ffn::tp_ffn_bf16
                        .launch(&s, &x, &b1, &b2, &mut h, &mut y)
                        .expect("bf16");
                }
            };
            run();
            let times: Vec<f64> = (0..7)
                .map(|_| {
                    let t = Instant::now();
                    run();
                    t.elapsed().as_secs_f64()
                })
                .collect();
            let t = median(times);
            println!(
                "| `tp_ffn` | {mode} | {p} | {:.2} | {:.0} |",
                t * 1e3,
                T as f64 / t
            );
        }
    }
    println!();
    println!("| program | P | overlap (ms) | bulk (ms) | bulk / overlap |");
    println!("|---|---|---|---|---|");
    for p in [2usize, 4] {
        use allgather_gemm::{K, M, N};
        let s = Session::sim(p).expect("session").with_race_check(false);
        let a = eagle_runner::random_tensor(&[p, M, K], 1);
        let b = eagle_runner::random_tensor(&[K, N], 2);
        let mut c = Tensor::<f32>::zeros(&[p, p * M, N]);
        let mut time = |overlap: bool| {
            let mut run = || {
                allgather_gemm::allgather_gemm
                    .launch(&s, &a, &b, &mut c, overlap)
                    .expect("allgather_gemm");
            };
            run();
            median(
                (0..7)
                    .map(|_| {
                        let t = Instant::now();
                        run();
                        t.elapsed().as_secs_f64()
                    })
                    .collect(),
            )
        };
        let (o, bk) = (time(true), time(false));
        println!(
            "| `allgather_gemm` (M = {M} rows per rank) | {p} | {:.2} | {:.2} | {:.2} |",
            o * 1e3,
            bk * 1e3,
            bk / o
        );
    }
}
