//! Step 07: dynamic rank count. The ring shift of the tutorial seed, with the world
//! dimension declared `NR = dynamic!("NR")`: the same source runs at any `-d`.
//!
//! `cargo run --example 07_dynamic_rank_count -- -d 0,1,2,3`
use eagle::prelude::*;

const SIZE: usize = 64;
/// The rank count is a runtime dimension.
pub const NR: Dim = dynamic!("NR");

/// Get mode: copy `x` into `src`, handshake, pull the next rank's `src` into `dst`.
#[eagle::kernel(device)]
pub fn per_rank_get(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    src: Window<f32, 1, SIZE>,
    dst: Window<f32, 1, SIZE>,
    signal: Window<i32, 1, 1>,
) {
    let me = rank(ctx);
    let nranks = nranks(ctx);
    let next = (me + 1) % nranks;
    let prev = (me + nranks - 1) % nranks;
    store(src, [0, 0], load(x, [0, 0], [1, SIZE]));
    // Notify the rank that reads me (previous); wait for the rank I read (next).
    notify(signal, prev, [0, 0], 1, Set);
    wait(signal, [0, 0], 1, Eq);
    get(dst, next, src);
    store(y, [0, 0], load(dst, [0, 0], [1, SIZE]));
}

/// Put mode: push `x` into the next rank's `dst`, tell it, wait for my own data.
#[eagle::kernel(device)]
pub fn per_rank_put(
    ctx: Ctx,
    x: Tensor<f32, 1, SIZE>,
    y: Out<Tensor<f32, 1, SIZE>>,
    src: Window<f32, 1, SIZE>,
    dst: Window<f32, 1, SIZE>,
    signal: Window<i32, 1, 1>,
) {
    let me = rank(ctx);
    let nranks = nranks(ctx);
    let next = (me + 1) % nranks;
    store(src, [0, 0], load(x, [0, 0], [1, SIZE]));
    put(dst, next, src);
    notify(signal, next, [0, 0], 1, Set);
    wait(signal, [0, 0], 1, Eq);
    store(y, [0, 0], load(dst, [0, 0], [1, SIZE]));
}

/// Host, get mode: the world shape is `[NR, 1, SIZE]`.
#[eagle::host]
pub fn ring_get(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let src_buf = alloc_window_buffer([1, SIZE], f32);
    let dst_buf = alloc_window_buffer([1, SIZE], f32);
    let signal_buf = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        let src = window(src_buf, [1, SIZE], f32);
        let dst = window(dst_buf, [1, SIZE], f32);
        let signal = window(signal_buf, [1, 1], i32);
        per_rank_get(x[r], y[r], src, dst, signal, device = r);
    }
}

/// Host, put mode.
#[eagle::host]
pub fn ring_put(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    let src_buf = alloc_window_buffer([1, SIZE], f32);
    let dst_buf = alloc_window_buffer([1, SIZE], f32);
    let signal_buf = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        let src = window(src_buf, [1, SIZE], f32);
        let dst = window(dst_buf, [1, SIZE], f32);
        let signal = window(signal_buf, [1, 1], i32);
        per_rank_put(x[r], y[r], src, dst, signal, device = r);
    }
}

/// Runs the step: get gives `y[r] = x[(r + 1) % P]`, put gives `y[r] = x[(r + P - 1) % P]`.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let get_mode = s.mode() != Some("put");
    let x = eagle_runner::random_tensor(&[p, 1, SIZE], 7);
    let mut y = Tensor::<f32>::zeros(&[p, 1, SIZE]);
    if get_mode {
        ring_get.launch(s, &x, &mut y)?;
    } else {
        ring_put.launch(s, &x, &mut y)?;
    }
    eagle_runner::golden::check_ring_shift(&y, &x, if get_mode { 1 } else { -1 })
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 7,
    name: "dynamic_rank_count",
    modes: &["get", "put"],
    world: eagle_runner::World::Any,
    run,
};

#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
