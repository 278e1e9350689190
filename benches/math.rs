//! eagle's math library against Rust std's scalar calls, in one process on the same seeded
//! inputs: `tanh`, `ln`, `sin` and `exp` over 1M `f32` and `f64` values. The eagle kernel
//! applies the function to `[1024]` tiles in a loop in one per-device program, 8 passes over
//! the data per launch (so the launch's argument copies weigh little); the peer is a plain
//! Rust loop `y[i] = x[i].tanh()` (glibc's libm on Linux), 8 passes too. Prints a markdown table (the
//! one in `docs/performance.md`): Melem/s of each and the ratio eagle / std (above 1: eagle is
//! faster). Median of 5 interleaved rounds.
//!
//! `cargo bench --bench math`

use eagle::prelude::*;
use std::hint::black_box;
use std::time::Instant;

/// Elements per tile.
const B: usize = 1024;
/// Tiles: `N = B * TILES` = 1,048,576 elements.
const TILES: usize = 1024;
const N: usize = B * TILES;
/// Passes over the data per launch (and per std loop), so that the launch and its argument
/// copies (docs/performance.md, launches) weigh little next to the function.
const REPS: usize = 8;

/// `tanh` of `N` f32 values, tile by tile.
#[eagle::kernel(device)]
pub fn tanh_f32_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.tanh());
        }
    }
}
#[eagle::host]
pub fn tanh_f32(x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    tanh_f32_d(x, y, device = 0);
}

/// `ln` of `N` f32 values, tile by tile.
#[eagle::kernel(device)]
pub fn ln_f32_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.ln());
        }
    }
}
#[eagle::host]
pub fn ln_f32(x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    ln_f32_d(x, y, device = 0);
}

/// `sin` of `N` f32 values, tile by tile.
#[eagle::kernel(device)]
pub fn sin_f32_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.sin());
        }
    }
}
#[eagle::host]
pub fn sin_f32(x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    sin_f32_d(x, y, device = 0);
}

/// `exp` of `N` f32 values, tile by tile.
#[eagle::kernel(device)]
pub fn exp_f32_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.exp());
        }
    }
}
#[eagle::host]
pub fn exp_f32(x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    exp_f32_d(x, y, device = 0);
}

/// `tanh` of `N` f64 values, tile by tile.
#[eagle::kernel(device)]
pub fn tanh_f64_d(ctx: Ctx, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.tanh());
        }
    }
}
#[eagle::host]
pub fn tanh_f64(x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    tanh_f64_d(x, y, device = 0);
}

/// `ln` of `N` f64 values, tile by tile.
#[eagle::kernel(device)]
pub fn ln_f64_d(ctx: Ctx, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.ln());
        }
    }
}
#[eagle::host]
pub fn ln_f64(x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    ln_f64_d(x, y, device = 0);
}

/// `sin` of `N` f64 values, tile by tile.
#[eagle::kernel(device)]
pub fn sin_f64_d(ctx: Ctx, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.sin());
        }
    }
}
#[eagle::host]
pub fn sin_f64(x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    sin_f64_d(x, y, device = 0);
}

/// `exp` of `N` f64 values, tile by tile.
#[eagle::kernel(device)]
pub fn exp_f64_d(ctx: Ctx, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    for pass in 0..REPS {
        for i in 0..TILES {
            let o = i * B;
            let t = load(x, [o], [B]);
            store(y, [o], t.exp());
        }
    }
}
#[eagle::host]
pub fn exp_f64(x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    exp_f64_d(x, y, device = 0);
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

/// Seeded inputs uniform in `[lo, hi)`.
fn inputs(lo: f64, hi: f64, seed: u64) -> Vec<f64> {
    let mut s = seed | 1;
    (0..N)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

type Launch32 = fn(&Session, &Tensor<f32>, &mut Tensor<f32>);
type Launch64 = fn(&Session, &Tensor<f64>, &mut Tensor<f64>);
/// A case: name, input range, the eagle launch, the std function.
type Case<L, F> = (&'static str, f64, f64, L, F);
type Case32 = Case<Launch32, fn(f32) -> f32>;
type Case64 = Case<Launch64, fn(f64) -> f64>;

fn main() {
    let s = Session::sim(1).expect("session").with_race_check(false);
    let rounds = 5;
    println!("| function | dtype | eagle (Melem/s) | Rust std (Melem/s) | eagle / std |");
    println!("|---|---|---|---|---|");
    let cases32: [Case32; 4] = [
        (
            "tanh",
            -5.0,
            5.0,
            |s, x, y| {
                tanh_f32.launch(s, x, y).expect("tanh");
            },
            f32::tanh,
        ),
        (
            "ln",
            0.001,
            100.0,
            |s, x, y| {
                ln_f32.launch(s, x, y).expect("ln");
            },
            f32::ln,
        ),
        (
            "sin",
            -10.0,
            10.0,
            |s, x, y| {
                sin_f32.launch(s, x, y).expect("sin");
            },
            f32::sin,
        ),
        (
            "exp",
            -20.0,
            20.0,
            |s, x, y| {
                exp_f32.launch(s, x, y).expect("exp");
            },
            f32::exp,
        ),
    ];
    let cases64: [Case64; 4] = [
        (
            "tanh",
            -5.0,
            5.0,
            |s, x, y| {
                tanh_f64.launch(s, x, y).expect("tanh");
            },
            f64::tanh,
        ),
        (
            "ln",
            0.001,
            100.0,
            |s, x, y| {
                ln_f64.launch(s, x, y).expect("ln");
            },
            f64::ln,
        ),
        (
            "sin",
            -10.0,
            10.0,
            |s, x, y| {
                sin_f64.launch(s, x, y).expect("sin");
            },
            f64::sin,
        ),
        (
            "exp",
            -20.0,
            20.0,
            |s, x, y| {
                exp_f64.launch(s, x, y).expect("exp");
            },
            f64::exp,
        ),
    ];
    for (k, (name, lo, hi, launch, std_f)) in cases32.into_iter().enumerate() {
        let xs: Vec<f32> = inputs(lo, hi, k as u64 + 1)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let x = Tensor::from_vec(&[N], xs.clone()).expect("x");
        let mut y = Tensor::<f32>::zeros(&[N]);
        let mut out = vec![0.0f32; N];
        launch(&s, &x, &mut y); // compile once
        let (mut te, mut ts) = (vec![], vec![]);
        for _ in 0..rounds {
            te.push(secs(&mut || launch(&s, &x, &mut y)));
            ts.push(secs(&mut || {
                for _ in 0..REPS {
                    for (o, &v) in out.iter_mut().zip(black_box(&xs)) {
                        *o = std_f(v);
                    }
                    black_box(&out);
                }
            }));
        }
        report(name, "f32", median(te), median(ts));
    }
    for (k, (name, lo, hi, launch, std_f)) in cases64.into_iter().enumerate() {
        let xs = inputs(lo, hi, k as u64 + 11);
        let x = Tensor::from_vec(&[N], xs.clone()).expect("x");
        let mut y = Tensor::<f64>::zeros(&[N]);
        let mut out = vec![0.0f64; N];
        launch(&s, &x, &mut y);
        let (mut te, mut ts) = (vec![], vec![]);
        for _ in 0..rounds {
            te.push(secs(&mut || launch(&s, &x, &mut y)));
            ts.push(secs(&mut || {
                for _ in 0..REPS {
                    for (o, &v) in out.iter_mut().zip(black_box(&xs)) {
                        *o = std_f(v);
                    }
                    black_box(&out);
                }
            }));
        }
        report(name, "f64", median(te), median(ts));
    }
}

fn report(name: &str, dtype: &str, te: f64, ts: f64) {
    let m = (N * REPS) as f64 / 1e6;
    println!(
        "| `{name}` | {dtype} | {:.0} | {:.0} | {:.2} |",
        m / te,
        m / ts,
        ts / te
    );
}
