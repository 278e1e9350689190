//! Step 03: window buffers. The host allocates one symmetric buffer per rank; a first
//! dispatch fills this rank's window, a second reads it back.
//!
//! `cargo run --example 03_window_buffer -- -d 0,1,2`
use eagle::prelude::*;

const SIZE: usize = 64;
const NR: Dim = dynamic!("NR");

/// Writes `x * 3` into this rank's window.
#[eagle::kernel(device)]
pub fn fill(ctx: Ctx, x: Tensor<f32, 1, SIZE>, win: Window<f32, 1, SIZE>) {
    let t = load(x, [0, 0], [1, SIZE]);
    store(win, [0, 0], t * 3.0);
}

/// Reads this rank's window and adds one.
#[eagle::kernel(device)]
pub fn drain(ctx: Ctx, win: Window<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    let t = load(win, [0, 0], [1, SIZE]);
    store(y, [0, 0], t + 1.0);
}

/// Host: the window outlives the first dispatch.
#[eagle::host]
pub fn window_buffer(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        let w = window(buf, [1, SIZE], f32);
        fill(x[r], w, device = r);
        drain(w, y[r], device = r);
    }
}

/// Runs the step and checks `y = x * 3 + 1`.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, 1, SIZE], 3);
    let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
    window_buffer.launch(s, &x, &mut y)?;
    let want: Vec<f32> = x.data().iter().map(|v| v * 3.0 + 1.0).collect();
    eagle_runner::check_bits("y", y.data(), &want)
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 3,
    name: "window_buffer",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
