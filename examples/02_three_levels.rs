//! Step 02: the three levels. The host dispatches a per-device program, which calls a compute
//! kernel with a scalar that depends on the rank.
//!
//! `cargo run --example 02_three_levels -- -d 0,1,2,3`
use eagle::prelude::*;

const SIZE: usize = 64;
const NR: Dim = dynamic!("NR");

/// Compute kernel: `y = sqrt(|x|) * a + b`.
#[eagle::kernel]
pub fn scale_shift(x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>, a: f32, b: f32) {
    let t = load(x, [0, 0], [1, SIZE]);
    let u = sqrt(abs(t)) * a + b;
    store(y, [0, 0], u);
}

/// Per-device program: picks the scalars from the rank, calls the compute kernel.
#[eagle::kernel(device)]
pub fn per_device(ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    let me = rank(ctx) as f32;
    scale_shift(x, y, 2.0, me);
}

/// Host orchestrator.
#[eagle::host]
pub fn three_levels(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    for r in 0..world_size() {
        per_device(x[r], y[r], device = r);
    }
}

/// Runs the step and checks `y[r] = sqrt(|x[r]|) * 2 + r`.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, 1, SIZE], 2);
    let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
    three_levels.launch(s, &x, &mut y)?;
    let want: Vec<f32> = (0..p)
        .flat_map(|r| {
            x.row(r)
                .iter()
                .map(move |v| v.abs().sqrt() * 2.0 + r as f32)
        })
        .collect();
    eagle_runner::check_bits("y", y.data(), &want)
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 2,
    name: "three_levels",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
