//! GELU, tanh form: each rank applies `y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` to
//! its `[ROWS, COLS]` block, in `f32`, in `f64` and in `bf16` (each op computed in `f32` and
//! rounded to `bf16`). `tanh` is eagle's own (the same bits on every backend); the golden
//! computes it with the same definition (`eagle::ir::MathFn::Tanh`), and checks it against Rust
//! std's `f32::tanh` (2 ulp at most; 1 `bf16` ulp for the `bf16` kernel). The `bf16` golden does
//! each op with the `half` crate.
//!
//! `cargo run --example gelu -- -d 0,1,2,3`
use eagle::ir::eval::Scalar;
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

/// Per-device program, `bf16`: the same source; the literals round to `bf16`.
#[eagle::kernel(device)]
pub fn gelu_rows_bf16(ctx: Ctx, x: Tensor<bf16, ROWS, COLS>, y: Out<Tensor<bf16, ROWS, COLS>>) {
    let t = load(x, [0, 0], [ROWS, COLS]);
    let inner = (t + t * t * t * 0.044715) * 0.7978845608028654;
    store(y, [0, 0], t * 0.5 * (inner.tanh() + 1.0));
}

/// Host: rank `r` takes block `r`, in every dtype.
#[eagle::host]
pub fn gelu(
    x: Tensor<f32, NR, ROWS, COLS>,
    y: Out<Tensor<f32, NR, ROWS, COLS>>,
    x64: Tensor<f64, NR, ROWS, COLS>,
    y64: Out<Tensor<f64, NR, ROWS, COLS>>,
    x16: Tensor<bf16, NR, ROWS, COLS>,
    y16: Out<Tensor<bf16, NR, ROWS, COLS>>,
) {
    for r in 0..world_size() {
        gelu_rows(x[r], y[r], device = r);
        gelu_rows64(x64[r], y64[r], device = r);
        gelu_rows_bf16(x16[r], y16[r], device = r);
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

/// `tanh` of a `bf16`: eagle's `f32` function, rounded to `bf16`.
fn tanh_bf16(v: bf16) -> bf16 {
    match MathFn::Tanh.eval(&[Scalar::BF16(v)]) {
        Ok(Scalar::BF16(r)) => r,
        _ => bf16::NAN,
    }
}

/// The golden, `bf16`: each op in `f32`, rounded to `bf16` (the `half` crate's rounding).
pub fn golden_bf16(x: &[bf16]) -> Vec<bf16> {
    let op = |a: bf16, b: bf16, f: fn(f32, f32) -> f32| bf16::from_f32(f(a.to_f32(), b.to_f32()));
    let mul = |a, b| op(a, b, |p, q| p * q);
    let add = |a, b| op(a, b, |p, q| p + q);
    let (c, k) = (bf16::from_f64(C), bf16::from_f64(K));
    x.iter()
        .map(|&t| {
            let inner = mul(add(t, mul(mul(mul(t, t), t), c)), k);
            mul(
                mul(t, bf16::from_f32(0.5)),
                add(tanh_bf16(inner), bf16::ONE),
            )
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
    let x16 = Tensor::from_vec(
        &[p, ROWS, COLS],
        x.data().iter().map(|&v| bf16::from_f32(v)).collect(),
    )?;
    let mut y = Tensor::<f32>::zeros(&[p, ROWS, COLS]);
    let mut y64 = Tensor::<f64>::zeros(&[p, ROWS, COLS]);
    let mut y16 = Tensor::<bf16>::zeros(&[p, ROWS, COLS]);
    gelu.launch(s, &x, &mut y, &x64, &mut y64, &x16, &mut y16)?;
    eagle_runner::check_bits("y", y.data(), &golden(x.data()))?;
    eagle_runner::check_bits_f64("y64", y64.data(), &golden64(x64.data()))?;
    eagle_runner::check_bits_bf16("y16", y16.data(), &golden_bf16(x16.data()))?;
    let args: Vec<f32> = x.data().iter().map(|&v| inner(v)).collect();
    eagle_runner::golden::check_near_std(MathFn::Tanh, f32::tanh, &args, 2)?;
    // bf16 tanh within one bf16 ulp of std's f32 tanh rounded to bf16.
    for &v in x16.data() {
        let (e, r) = (
            tanh_bf16(v).to_bits() as i32,
            bf16::from_f32(v.to_f32().tanh()).to_bits() as i32,
        );
        if (e - r).abs() > 1 {
            return Err(eagle::Error::Check(format!(
                "bf16 tanh({v}): eagle {e:#06x}, std {r:#06x}: more than 1 ulp apart"
            )));
        }
    }
    Ok(())
}

/// The example, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 20,
    name: "gelu",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
