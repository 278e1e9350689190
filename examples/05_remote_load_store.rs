//! Step 05: ring shift with tile-level remote load (`--mode load`: pull from the next rank)
//! and remote store (`--mode store`: push to the next rank).
//!
//! `cargo run --example 05_remote_load_store -- -d 0,1,2 --mode store`
use eagle::prelude::*;

const SIZE: usize = 64;
const NR: Dim = dynamic!("NR");

/// Pull: publish `x` in my window, synchronise, load the next rank's window.
#[eagle::kernel(device)]
pub fn shift_load(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
) {
    let next = (rank(ctx) + 1) % nranks(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, SIZE]));
    barrier(ctx);
    let t = remote_load(win, next, [0, 0], [1, SIZE]);
    store(y, [0, 0], t);
}

/// Push: store `x` into the next rank's window, synchronise, read my own window.
#[eagle::kernel(device)]
pub fn shift_store(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
) {
    let next = (rank(ctx) + 1) % nranks(ctx);
    remote_store(win, next, [0, 0], load(x, [0, 0], [1, SIZE]));
    barrier(ctx);
    store(y, [0, 0], load(win, [0, 0], [1, SIZE]));
}

/// Host for the load mode.
#[eagle::host]
pub fn ring_load(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        shift_load(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

/// Host for the store mode.
#[eagle::host]
pub fn ring_store(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let buf = alloc_window_buffer([1, SIZE], f32);
    for r in 0..world_size() {
        shift_store(x[r], y[r], window(buf, [1, SIZE], f32), device = r);
    }
}

/// Runs the step: load gives `y[r] = x[(r + 1) % P]`, store gives `y[r] = x[(r + P - 1) % P]`.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, 1, SIZE], 5);
    let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
    let push = s.mode() == Some("store");
    if push {
        ring_store.launch(s, &x, &mut y)?;
    } else {
        ring_load.launch(s, &x, &mut y)?;
    }
    eagle_runner::golden::check_ring_shift(&y, &x, if push { -1 } else { 1 })
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 5,
    name: "remote_load_store",
    modes: &["load", "store"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
