//! Log-softmax: each rank computes, row by row of its `[ROWS, COLS]` block,
//! `y = (x - max) - ln(sum(exp(x - max)))`: a row max, eagle's `exp` and `ln`, and a row sum
//! in the documented 8-lane order. The golden uses the same definitions
//! (`eagle::ir::MathFn`) and checks them against Rust std's `f32::exp` / `f32::ln`.
//!
//! `cargo run --example log_softmax -- -d 0,1,2,3`
use eagle::ir::MathFn;
use eagle::prelude::*;

const ROWS: usize = 16;
const COLS: usize = 256;
const NR: Dim = dynamic!("NR");

/// Per-device program: one log-softmax per row.
#[eagle::kernel(device)]
pub fn log_softmax_rows(ctx: Ctx, x: Tensor<f32, ROWS, COLS>, y: Out<Tensor<f32, ROWS, COLS>>) {
    let t = load(x, [0, 0], [ROWS, COLS]);
    let d = t - row_max(t);
    let s = row_sum(exp(d));
    store(y, [0, 0], d - ln(s));
}

/// Host: rank `r` takes block `r`.
#[eagle::host]
pub fn log_softmax(x: Tensor<f32, NR, ROWS, COLS>, y: Out<Tensor<f32, NR, ROWS, COLS>>) {
    for r in 0..world_size() {
        log_softmax_rows(x[r], y[r], device = r);
    }
}

/// The golden: the kernel's steps in plain Rust, in the same order. Also returns the
/// arguments of `exp` and `ln`, for the comparison with std.
pub fn golden(x: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (mut y, mut e_args, mut l_args) = (vec![], vec![], vec![]);
    for row in x.chunks(COLS) {
        let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let d: Vec<f32> = row.iter().map(|v| v - m).collect();
        let e: Vec<f32> = d.iter().map(|&v| MathFn::Exp.eval_f32(&[v])).collect();
        let s = eagle_runner::golden::lane_sum(&e);
        let l = MathFn::Ln.eval_f32(&[s]);
        y.extend(d.iter().map(|v| v - l));
        e_args.extend(d);
        l_args.push(s);
    }
    (y, e_args, l_args)
}

/// Runs the program on seeded random inputs (scaled to `[-8, 8)`) and checks every bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let mut x = eagle_runner::random_tensor(&[p, ROWS, COLS], 22);
    x.data_mut().iter_mut().for_each(|v| *v *= 8.0);
    let mut y = Tensor::<f32>::zeros(&[p, ROWS, COLS]);
    log_softmax.launch(s, &x, &mut y)?;
    let (want, e_args, l_args) = golden(x.data());
    eagle_runner::check_bits("y", y.data(), &want)?;
    eagle_runner::golden::check_near_std(MathFn::Exp, f32::exp, &e_args, 2)?;
    eagle_runner::golden::check_near_std(MathFn::Ln, f32::ln, &l_args, 2)
}

/// The example, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 21,
    name: "log_softmax",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
