//! Layer normalisation: each rank normalises the rows of its `[ROWS, COLS]` block,
//! `y = (x - mean) / sqrt(var + EPS) * gamma + beta`, with the mean and the (two-pass)
//! variance as row sums, and `gamma`, `beta` (`[1, COLS]`) broadcast over the rows.
//!
//! `cargo run --example layernorm -- -d 0,1,2,3`
use eagle::prelude::*;

const ROWS: usize = 16;
const COLS: usize = 256;
const EPS: f32 = 1e-5;
const NR: Dim = dynamic!("NR");

/// Per-device program: one layer norm per row.
#[eagle::kernel(device)]
pub fn layernorm_rows(
    ctx: Ctx,
    x: Tensor<f32, ROWS, COLS>,
    gamma: Tensor<f32, 1, COLS>,
    beta: Tensor<f32, 1, COLS>,
    y: Out<Tensor<f32, ROWS, COLS>>,
) {
    let t = load(x, [0, 0], [ROWS, COLS]);
    let mean = row_sum(t) / (COLS as f32);
    let d = t - mean;
    let var = row_sum(d * d) / (COLS as f32);
    let inv = 1.0 / sqrt(var + EPS);
    let g = load(gamma, [0, 0], [1, COLS]);
    let b = load(beta, [0, 0], [1, COLS]);
    store(y, [0, 0], d * inv * g + b);
}

/// Host: rank `r` normalises block `r`; `gamma` and `beta` are the same on every rank.
#[eagle::host]
pub fn layernorm(
    x: Tensor<f32, NR, ROWS, COLS>,
    gamma: Tensor<f32, 1, COLS>,
    beta: Tensor<f32, 1, COLS>,
    y: Out<Tensor<f32, NR, ROWS, COLS>>,
) {
    for r in 0..world_size() {
        layernorm_rows(x[r], gamma, beta, y[r], device = r);
    }
}

/// The golden: the kernel's steps in plain Rust, in the same order.
pub fn golden(x: &[f32], g: &[f32], b: &[f32]) -> Vec<f32> {
    let n = COLS as f32;
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(COLS) {
        let mean = eagle_runner::golden::lane_sum(row) / n;
        let d: Vec<f32> = row.iter().map(|v| v - mean).collect();
        let sq: Vec<f32> = d.iter().map(|v| v * v).collect();
        let var = eagle_runner::golden::lane_sum(&sq) / n;
        let inv = 1.0 / (var + EPS).sqrt();
        y.extend(d.iter().enumerate().map(|(j, v)| v * inv * g[j] + b[j]));
    }
    y
}

/// Runs the program on seeded random inputs and checks every bit against the golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, ROWS, COLS], 18);
    let g = eagle_runner::random_tensor(&[1, COLS], 19);
    let b = eagle_runner::random_tensor(&[1, COLS], 20);
    let mut y = Tensor::<f32>::zeros(&[p, ROWS, COLS]);
    layernorm.launch(s, &x, &g, &b, &mut y)?;
    eagle_runner::check_bits("y", y.data(), &golden(x.data(), g.data(), b.data()))
}

/// The example, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 18,
    name: "layernorm",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
