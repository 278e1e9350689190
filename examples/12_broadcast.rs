//! Step 12: broadcast from a root rank, hand-written (`--mode hand`: every rank pulls the
//! root's window with `get`) or built in (`--mode builtin`).
//!
//! `cargo run --example 12_broadcast -- -d 0,1,2,3 --mode builtin`
use eagle::prelude::*;

/// Vector length.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Hand-written: publish, synchronise, pull from the root, leave together.
#[eagle::kernel(device)]
pub fn bcast_hand(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    root: usize,
) {
    store(src, [0], load(x, [0], [N]));
    barrier(ctx);
    get(y, root, src);
    barrier(ctx);
}

/// Built in.
#[eagle::kernel(device)]
pub fn bcast_builtin(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    root: usize,
) {
    put(src, rank(ctx), x);
    broadcast(ctx, src, y, root);
}

/// Host: `root` and `hand` come from the caller.
#[eagle::host]
pub fn broadcast_step(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, root: usize, hand: bool) {
    let buf = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        let w = window(buf, [N], f32);
        if hand {
            bcast_hand(x[r], y[r], w, root, device = r);
        } else {
            bcast_builtin(x[r], y[r], w, root, device = r);
        }
    }
}

/// Runs the step with root `P / 2`: every rank must hold the root's row.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let root = p / 2;
    let x = eagle_runner::random_tensor(&[p, N], 12);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    broadcast_step.launch(s, &x, &mut y, root, s.mode() == Some("hand"))?;
    for r in 0..p {
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), x.row(root))?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 12,
    name: "broadcast",
    modes: &["hand", "builtin"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
