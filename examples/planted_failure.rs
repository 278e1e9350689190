//! A planted failure: rank 1 reads past the end of its tensor while rank 0 waits for a signal
//! that rank 1 would have sent. The run must end on every rank with rank 1's error, quickly,
//! never hang: on `sim` as an error value, under `mpirun` by aborting the job.
//!
//! `cargo run --example planted_failure -- -d 0,1` (exits 1 with "rank 1 failed: ...")
use eagle::prelude::*;

const NR: Dim = dynamic!("NR");

/// Rank 1 faults before it notifies rank 0.
#[eagle::kernel(device)]
pub fn faulty(ctx: Ctx, x: Tensor<f32, 8>, sig: Window<i32, 1>) {
    let me = rank(ctx);
    if me == 1 {
        let mut off = 0;
        off = me * 8;
        let t = load(x, [off], [8]);
        notify(sig, 0, [0], 1, Set);
    }
    if me == 0 {
        wait(sig, [0], 1, Eq);
    }
}

/// Host.
#[eagle::host]
pub fn planted(x: Tensor<f32, NR, 8>) {
    let buf = alloc_window_buffer([1], i32);
    for r in 0..world_size() {
        faulty(x[r], window(buf, [1], i32), device = r);
    }
}

/// Runs the program; it is expected to fail on rank 1.
pub fn run(s: &Session) -> eagle::Result<()> {
    let x = Tensor::<f32>::zeros(&[s.world_size(), 8]);
    planted.launch(s, &x)?;
    Ok(())
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 199,
    name: "planted_failure",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
