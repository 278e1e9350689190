//! Step 04: a barrier built from notify/wait (`--mode handwritten`), and the built-in one
//! (`--mode builtin`). After the barrier every rank reads its next neighbour's window.
//!
//! `cargo run --example 04_barrier -- -d 0,1,2,3 --mode handwritten`
use eagle::prelude::*;

const SIZE: usize = 64;
const NR: Dim = dynamic!("NR");

/// Barrier from signals: every rank adds 1 to every rank's counter, then waits until its own
/// counter has heard from all `n` ranks.
#[eagle::kernel]
pub fn signal_barrier(ctx: Ctx, sig: Window<i32, 1, 1>) {
    let n = nranks(ctx);
    for peer in 0..n {
        notify(sig, peer, [0, 0], 1, AtomicAdd);
    }
    wait(sig, [0, 0], n as i32, Ge);
}

/// Publish `x`, synchronise, read the next rank's window.
#[eagle::kernel(device)]
pub fn exchange(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    win: Window<f32, 1, SIZE>,
    sig: Window<i32, 1, 1>,
    builtin: bool,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    store(win, [0, 0], load(x, [0, 0], [1, SIZE]));
    if builtin {
        barrier(ctx);
    } else {
        signal_barrier(ctx, sig);
    }
    let t = remote_load(win, (me + 1) % n, [0, 0], [1, SIZE]);
    store(y, [0, 0], t);
}

/// Host.
#[eagle::host]
pub fn barrier_step(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>, builtin: bool) {
    let data = alloc_window_buffer([1, SIZE], f32);
    let signals = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        let w = window(data, [1, SIZE], f32);
        let s = window(signals, [1, 1], i32);
        exchange(x[r], y[r], w, s, builtin, device = r);
    }
}

/// Runs the step and checks `y[r] = x[(r + 1) % P]`.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let builtin = s.mode() == Some("builtin");
    let x = eagle_runner::random_tensor(&[p, 1, SIZE], 4);
    let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
    barrier_step.launch(s, &x, &mut y, builtin)?;
    let want: Vec<f32> = (0..p).flat_map(|r| x.row((r + 1) % p).to_vec()).collect();
    eagle_runner::check_bits("y", y.data(), &want)
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 4,
    name: "barrier",
    modes: &["handwritten", "builtin"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
