//! The distributed programs (issue 16): `tp_ffn` tokens per second at P = 1, 2, 4 on `sim`,
//! in both weight modes. Each cell is the median of 7 launches after one to compile (the
//! launch includes copying the arguments in and out, which `sim` does per device). Prints a
//! markdown table (the one in `docs/performance.md`).
//!
//! `cargo bench --bench apps`

use eagle::prelude::*;
use std::time::Instant;

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
}
