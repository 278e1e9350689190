//! Step 09: allreduce in two phases, hand-written. Reduce-scatter: rank c sums chunk c over all
//! ranks (in rank order) into its `dst` window. Allgather: every rank copies chunk c from rank
//! c's `dst`. Chunks are ragged when P does not divide N.
//!
//! `cargo run --example 09_allreduce_two_phase -- -d 0,1,2`
use eagle::prelude::*;

/// Vector length.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Per-device program.
#[eagle::kernel(device)]
pub fn two_phase_allreduce(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    dst: Window<f32, N>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let q = N / n;
    let rem = N % n;
    store(src, [0], load(x, [0], [N]));
    barrier(ctx);
    // Phase 1: reduce-scatter my chunk.
    let lo = me * q + min(me, rem);
    let hi = lo + q + select(me < rem, 1, 0);
    for i in lo..hi {
        store(dst, [i], remote_load(src, 0, [i], [1]));
        for p in 1..n {
            store(
                dst,
                [i],
                load(dst, [i], [1]) + remote_load(src, p, [i], [1]),
            );
        }
    }
    barrier(ctx);
    // Phase 2: allgather every chunk from its owner.
    for c in 0..n {
        let clo = c * q + min(c, rem);
        let chi = clo + q + select(c < rem, 1, 0);
        for i in clo..chi {
            store(y, [i], remote_load(dst, c, [i], [1]));
        }
    }
    barrier(ctx);
}

/// Host.
#[eagle::host]
pub fn allreduce_two_phase(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        two_phase_allreduce(
            x[r],
            y[r],
            window(s, [N], f32),
            window(d, [N], f32),
            device = r,
        );
    }
}

/// Runs the step; the result equals the mesh result bit for bit (same combine order).
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, N], 9);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    allreduce_two_phase.launch(s, &x, &mut y)?;
    let want = eagle_runner::golden::allreduce(&x, |a, b| a + b, false);
    for r in 0..p {
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), &want)?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 9,
    name: "allreduce_two_phase",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
