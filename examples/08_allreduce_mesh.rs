//! Step 08: allreduce, mesh algorithm, hand-written. Every rank publishes its vector in a
//! window, then reads every peer's window and sums element by element in rank order
//! 0, 1, ..., P-1, so every rank computes bit-identical results.
//!
//! `cargo run --example 08_allreduce_mesh -- -d 0,1,2,3`
use eagle::prelude::*;

/// Vector length: not a multiple of 3 or 7, so chunks are ragged at those world sizes.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Per-device program.
#[eagle::kernel(device)]
pub fn mesh_allreduce(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    let n = nranks(ctx);
    store(src, [0], load(x, [0], [N]));
    barrier(ctx);
    for i in 0..N {
        store(y, [i], remote_load(src, 0, [i], [1]));
        for p in 1..n {
            store(y, [i], load(y, [i], [1]) + remote_load(src, p, [i], [1]));
        }
    }
    // Peers may still be reading my window: leave together.
    barrier(ctx);
}

/// Host.
#[eagle::host]
pub fn allreduce_mesh(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let buf = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        mesh_allreduce(x[r], y[r], window(buf, [N], f32), device = r);
    }
}

/// Runs the step; every rank must hold the rank-order sum, bit for bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, N], 8);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    allreduce_mesh.launch(s, &x, &mut y)?;
    let want = eagle_runner::golden::allreduce(&x, |a, b| a + b, false);
    for r in 0..p {
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), &want)?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 8,
    name: "allreduce_mesh",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
