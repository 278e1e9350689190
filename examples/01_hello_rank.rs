//! Step 01: hello rank. Every rank adds its rank to its slice of `x`.
//!
//! `cargo run --example 01_hello_rank -- -d 0,1,2`
use eagle::prelude::*;

const SIZE: usize = 64;
const NR: Dim = dynamic!("NR");

/// Per-device program: `y = x + rank`.
#[eagle::kernel(device)]
pub fn hello(ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    let me = rank(ctx);
    let t = load(x, [0, 0], [1, SIZE]);
    store(y, [0, 0], t + me as f32);
}

/// Host: one dispatch per rank.
#[eagle::host]
pub fn hello_rank(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    for r in 0..world_size() {
        hello(x[r], y[r], device = r);
    }
}

/// Runs the step and checks `y[r] = x[r] + r`.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, 1, SIZE], 1);
    let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
    hello_rank.launch(s, &x, &mut y)?;
    let want: Vec<f32> = (0..p)
        .flat_map(|r| x.row(r).iter().map(move |v| v + r as f32))
        .collect();
    eagle_runner::check_bits("y", y.data(), &want)
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 1,
    name: "hello_rank",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
