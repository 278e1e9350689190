//! GELU, tanh form: each rank applies `y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` to
//! its `[ROWS, COLS]` block, in `f32` and in `f64`. `tanh` is eagle's own (the same bits on
//! every backend); the golden computes it with the same definition
//! (`eagle::ir::MathFn::Tanh`), and checks it against Rust std's `f32::tanh` (2 ulp at most).
//!
//! `cargo run --example gelu -- -d 0,1,2,3`
use eagle::ir::MathFn;
use eagle::prelude::*;

const ROWS: usize = 16;
const COLS: usize = 256;
const NR: Dim = dynamic!("NR");
/// `sqrt(2 / pi)`, as the kernels' literal.
const K: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient, as the kernels' literal.
const C: f64 = 0.044_715;

/// Per-device program, `f32`.
#[eagle::kernel(device)]
pub fn gelu_rows(ctx: Ctx, x: Tensor<f32, ROWS, COLS>, y: Out<Tensor<f32, ROWS, COLS>>) {
    let t = load(x, [0, 0], [ROWS, COLS]);
    let inner = (t + t * t * t * 0.044715) * 0.7978845608028654;
    store(y, [0, 0], t * 0.5 * (inner.tanh() + 1.0));
}

/// Per-device program, `f64`.
#[eagle::kernel(device)]
pub fn gelu_rows64(ctx: Ctx, x: Tensor<f64, ROWS, COLS>, y: Out<Tensor<f64, ROWS, COLS>>) {
    let t = load(x, [0, 0], [ROWS, COLS]);
    let inner = (t + t * t * t * 0.044715) * 0.7978845608028654;
    store(y, [0, 0], t * 0.5 * (inner.tanh() + 1.0));
}

/// Host: rank `r` takes block `r`, in both dtypes.
#[eagle::host]
pub fn gelu(
    x: Tensor<f32, NR, ROWS, COLS>,
    y: Out<Tensor<f32, NR, ROWS, COLS>>,
    x64: Tensor<f64, NR, ROWS, COLS>,
    y64: Out<Tensor<f64, NR, ROWS, COLS>>,
) {
    for r in 0..world_size() {
        gelu_rows(x[r], y[r], device = r);
        gelu_rows64(x64[r], y64[r], device = r);
    }
}

/// The `tanh` arguments of the `f32` kernel.
fn inner(v: f32) -> f32 {
    (v + v * v * v * C as f32) * K as f32
}

/// The golden, `f32`: the kernel's steps in plain Rust, in the same order.
pub fn golden(x: &[f32]) -> Vec<f32> {
    x.iter()
        .map(|&v| v * 0.5 * (MathFn::Tanh.eval_f32(&[inner(v)]) + 1.0))
        .collect()
}

/// The golden, `f64`.
pub fn golden64(x: &[f64]) -> Vec<f64> {
    x.iter()
        .map(|&v| {
            let i = (v + v * v * v * C) * K;
            v * 0.5 * (MathFn::Tanh.eval_f64(&[i]) + 1.0)
        })
        .collect()
}

/// Runs the program on seeded random inputs (scaled to `[-4, 4)`) and checks every bit
/// against the goldens, and eagle's `tanh` against Rust std's.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let mut x = eagle_runner::random_tensor(&[p, ROWS, COLS], 21);
    x.data_mut().iter_mut().for_each(|v| *v *= 4.0);
    let x64 = Tensor::from_vec(
        &[p, ROWS, COLS],
        x.data()
            .iter()
            .map(|&v| f64::from(v) * 1.000_000_1)
            .collect(),
    )?;
    let mut y = Tensor::<f32>::zeros(&[p, ROWS, COLS]);
    let mut y64 = Tensor::<f64>::zeros(&[p, ROWS, COLS]);
    gelu.launch(s, &x, &mut y, &x64, &mut y64)?;
    eagle_runner::check_bits("y", y.data(), &golden(x.data()))?;
    eagle_runner::check_bits_f64("y64", y64.data(), &golden64(x64.data()))?;
    let args: Vec<f32> = x.data().iter().map(|&v| inner(v)).collect();
    eagle_runner::golden::check_near_std(MathFn::Tanh, f32::tanh, &args, 2)
}

/// The example, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 20,
    name: "gelu",
    modes: &[],
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
