//! Row softmax: each rank normalises its `[ROWS, COLS]` block of `x` row by row, written with
//! the tile algebra: `row_max`, broadcasting (`t - m` subtracts a `[ROWS, 1]` column from every
//! column) and `row_sum`.
//!
//! `cargo run --example softmax -- -d 0,1,2,3`
use eagle::prelude::*;

const ROWS: usize = 16;
const COLS: usize = 256;
const NR: Dim = dynamic!("NR");

/// Per-device program: `y = exp(x - row_max(x)) / row_sum(exp(x - row_max(x)))`, row by row.
#[eagle::kernel(device)]
pub fn softmax_rows(ctx: Ctx, x: Tensor<f32, ROWS, COLS>, y: Out<Tensor<f32, ROWS, COLS>>) {
    let t = load(x, [0, 0], [ROWS, COLS]);
    let m = row_max(t);
    let e = exp(t - m);
    let s = row_sum(e);
    store(y, [0, 0], e / s);
}

/// Host: rank `r` normalises block `r`.
#[eagle::host]
pub fn softmax(x: Tensor<f32, NR, ROWS, COLS>, y: Out<Tensor<f32, NR, ROWS, COLS>>) {
    for r in 0..world_size() {
        softmax_rows(x[r], y[r], device = r);
    }
}

/// The golden: the same steps in plain Rust, with eagle's own `exp` (`MathFn::Exp`, the one
/// definition every backend computes; within 1 ulp of the exact value, like `f32::exp`).
pub fn golden(x: &[f32]) -> Vec<f32> {
    let mut y = Vec::with_capacity(x.len());
    for row in x.chunks(COLS) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = row
            .iter()
            .map(|v| eagle::ir::MathFn::Exp.eval_f32(&[v - m]))
            .collect();
        let s = eagle_runner::golden::lane_sum(&e);
        y.extend(e.iter().map(|v| v / s));
    }
    y
}

/// Runs the program on seeded random input and checks every bit against the golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, ROWS, COLS], 17);
    let mut y = Tensor::<f32>::zeros(&[p, ROWS, COLS]);
    softmax.launch(s, &x, &mut y)?;
    eagle_runner::check_bits("y", y.data(), &golden(x.data()))
}

/// The example, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 17,
    name: "softmax",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
