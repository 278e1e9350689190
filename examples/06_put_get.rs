//! Step 06: tensor-level put (push) and get (pull), ordered by a notify/wait handshake.
//!
//! `--mode get`: publish `x`, tell the rank that reads me (previous) it is ready, wait for the
//! rank I read (next), then pull its window: `y[r] = x[(r + 1) % P]`.
//! `--mode put`: push `x` into the next rank's window, tell it, wait for my previous rank's
//! push: `y[r] = x[(r + P - 1) % P]`.
//!
//! `cargo run --example 06_put_get -- -d 0,1,2 --mode put`
use eagle::prelude::*;

const SIZE: usize = 64;
const NR: Dim = dynamic!("NR");

/// Pull mode.
#[eagle::kernel(device)]
pub fn pull(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
    ready: Window<i32, 1, 1>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, SIZE]));
    notify(ready, (me + n - 1) % n, [0, 0], 1, Set);
    wait(ready, [0, 0], 1, Eq);
    get(y, (me + 1) % n, win);
}

/// Push mode.
#[eagle::kernel(device)]
pub fn push(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
    ready: Window<i32, 1, 1>,
) {
    let next = (rank(ctx) + 1) % nranks(ctx);
    put(win, next, x);
    notify(ready, next, [0, 0], 1, Set);
    wait(ready, [0, 0], 1, Eq);
    store(y, [0, 0], load(win, [0, 0], [1, SIZE]));
}

/// Host: `pull_mode` selects the per-device program.
#[eagle::host]
pub fn put_get(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>, pull_mode: bool) {
    let data = alloc_window_buffer([1, SIZE], f32);
    let signals = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        let w = window(data, [1, SIZE], f32);
        let s = window(signals, [1, 1], i32);
        if pull_mode {
            pull(x[r], y[r], w, s, device = r);
        } else {
            push(x[r], y[r], w, s, device = r);
        }
    }
}

/// Runs the step and checks the golden of the mode.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let pull_mode = s.mode() != Some("put");
    let x = eagle_runner::random_tensor(&[p, 1, SIZE], 6);
    let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
    put_get.launch(s, &x, &mut y, pull_mode)?;
    eagle_runner::golden::check_ring_shift(&y, &x, if pull_mode { 1 } else { -1 })
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 6,
    name: "put_get",
    modes: &["get", "put"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
