//! Step 10: ring allreduce, hand-written: P - 1 reduce steps, then P - 1 gather steps, each
//! rank talking only to its previous neighbour. Chunk c is summed in ring order
//! c, c+1, ..., c-1 (a fixed order, different from the mesh's rank order).
//!
//! `cargo run --example 10_allreduce_ring -- -d 0,1,2,3`
use eagle::prelude::*;

/// Vector length.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Per-device program.
#[eagle::kernel(device)]
pub fn ring_allreduce(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    dst: Window<f32, N>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let prev = (me + n - 1) % n;
    let q = N / n;
    let rem = N % n;
    store(src, [0], load(x, [0], [N]));
    if n == 1 {
        store(dst, [0], load(src, [0], [N]));
    }
    barrier(ctx);
    // Reduce-scatter: at step s, add my element to the partial of chunk (me - s - 1) that my
    // previous neighbour holds.
    for s in 0..n - 1 {
        let c = (me + n - s - 1) % n;
        let lo = c * q + min(c, rem);
        let hi = lo + q + select(c < rem, 1, 0);
        for i in lo..hi {
            if s == 0 {
                store(
                    dst,
                    [i],
                    remote_load(src, prev, [i], [1]) + load(src, [i], [1]),
                );
            } else {
                store(
                    dst,
                    [i],
                    remote_load(dst, prev, [i], [1]) + load(src, [i], [1]),
                );
            }
        }
        barrier(ctx);
    }
    // Allgather: pass the finished chunks around the ring.
    for s in 0..n - 1 {
        let c = (me + n - s) % n;
        let lo = c * q + min(c, rem);
        let hi = lo + q + select(c < rem, 1, 0);
        for i in lo..hi {
            store(dst, [i], remote_load(dst, prev, [i], [1]));
        }
        barrier(ctx);
    }
    store(y, [0], load(dst, [0], [N]));
}

/// Host.
#[eagle::host]
pub fn allreduce_ring(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        ring_allreduce(
            x[r],
            y[r],
            window(s, [N], f32),
            window(d, [N], f32),
            device = r,
        );
    }
}

/// Runs the step against the ring-order golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, N], 10);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    allreduce_ring.launch(s, &x, &mut y)?;
    let want = eagle_runner::golden::allreduce(&x, |a, b| a + b, true);
    for r in 0..p {
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), &want)?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 10,
    name: "allreduce_ring",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
