//! Rotary position embedding (RoPE, the split-halves layout): rank `r` holds tokens
//! `r * T .. (r + 1) * T` of a `[T, D]` block; for pair `i` of the halves `(x1, x2)`, the angle
//! is `pos * theta_i` with `theta_i = 10000^(-2i / D)`, and
//! `y1 = x1 cos - x2 sin`, `y2 = x2 cos + x1 sin`. `powf`, `sin` and `cos` are eagle's own;
//! the golden uses the same definitions (`eagle::ir::MathFn`) and checks `sin` and `cos`
//! against Rust std's.
//!
//! `cargo run --example rotary -- -d 0,1,2,3`
use eagle::ir::MathFn;
use eagle::prelude::*;

/// Tokens per rank.
const T: usize = 16;
/// Head dimension.
const D: usize = 128;
/// Half of it: the number of rotated pairs.
const H: usize = 64;
const NR: Dim = dynamic!("NR");

/// Per-device program: rotates this rank's `T` tokens.
#[eagle::kernel(device)]
pub fn rotary_rows(ctx: Ctx, x: Tensor<f32, T, D>, y: Out<Tensor<f32, T, D>>) {
    let i = iota([1, H], 1, f32);
    let theta = powf(10000.0, i * (-2.0 / (D as f32)));
    let first = (rank(ctx) * T) as f32;
    let pos = iota([T, 1], 0, f32) + first;
    let ang = pos * theta;
    let c = cos(ang);
    let s = sin(ang);
    let x1 = load(x, [0, 0], [T, H]);
    let x2 = load(x, [0, H], [T, H]);
    store(y, [0, 0], x1 * c - x2 * s);
    store(y, [0, H], x2 * c + x1 * s);
}

/// Host: rank `r` takes tokens block `r`.
#[eagle::host]
pub fn rotary(x: Tensor<f32, NR, T, D>, y: Out<Tensor<f32, NR, T, D>>) {
    for r in 0..world_size() {
        rotary_rows(x[r], y[r], device = r);
    }
}

/// The angle of token `pos` (global), pair `i`, as the kernel computes it.
fn angle(pos: usize, i: usize) -> f32 {
    let theta = MathFn::Powf.eval_f32(&[10000.0, i as f32 * (-2.0 / D as f32)]);
    pos as f32 * theta
}

/// The golden: the kernel's steps in plain Rust, in the same order.
pub fn golden(x: &[f32]) -> Vec<f32> {
    let mut y = vec![0.0f32; x.len()];
    for (t, (row, out)) in x.chunks(D).zip(y.chunks_mut(D)).enumerate() {
        for i in 0..H {
            let a = angle(t, i);
            let (c, s) = (MathFn::Cos.eval_f32(&[a]), MathFn::Sin.eval_f32(&[a]));
            let (x1, x2) = (row[i], row[H + i]);
            out[i] = x1 * c - x2 * s;
            out[H + i] = x2 * c + x1 * s;
        }
    }
    y
}

/// Runs the program on seeded random inputs and checks every bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, T, D], 23);
    let mut y = Tensor::<f32>::zeros(&[p, T, D]);
    rotary.launch(s, &x, &mut y)?;
    eagle_runner::check_bits("y", y.data(), &golden(x.data()))?;
    let angles: Vec<f32> = (0..p * T)
        .flat_map(|t| (0..H).map(move |i| angle(t, i)))
        .collect();
    eagle_runner::golden::check_near_std(MathFn::Sin, f32::sin, &angles, 2)?;
    eagle_runner::golden::check_near_std(MathFn::Cos, f32::cos, &angles, 2)
}

/// The example, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 22,
    name: "rotary",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
