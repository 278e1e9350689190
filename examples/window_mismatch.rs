//! Under `mpirun`, a host program whose window shapes differ between ranks (here the input
//! length depends on the rank) is refused on every rank before any window is allocated.
//!
//! `mpirun -np 2 target/release/examples/window_mismatch -d 0,1` (exits 1 on every rank)
use eagle::prelude::*;

const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");

/// Copies `x` into a window of N elements.
#[eagle::kernel(device)]
pub fn stage(ctx: Ctx, x: Tensor<f32, N>, w: Window<f32, N>) {
    put(w, rank(ctx), x);
}

/// Host.
#[eagle::host]
pub fn mismatch(x: Tensor<f32, NR, N>) {
    let buf = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        stage(x[r], window(buf, [N], f32), device = r);
    }
}

/// Runs with N = 8 on rank 0 and N = 16 elsewhere (the same N everywhere on one process).
pub fn run(s: &Session) -> eagle::Result<()> {
    let me = eagle::plan::RankPartition::world().0;
    let n = if me == 0 { 8 } else { 16 };
    let x = Tensor::<f32>::zeros(&[s.world_size(), n]);
    mismatch.launch(s, &x)?;
    Ok(())
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 198,
    name: "window_mismatch",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
