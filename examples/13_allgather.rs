//! Step 13: allgather. Rank c owns chunk c of an N-element vector (ragged chunks when P does
//! not divide N); afterwards every rank holds all chunks. Hand-written (`--mode hand`) or
//! built in (`--mode builtin`).
//!
//! `cargo run --example 13_allgather -- -d 0,1,2 --mode hand`
use eagle::prelude::*;

/// Vector length.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Hand-written: read chunk c from rank c, element by element.
#[eagle::kernel(device)]
pub fn gather_hand(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    let n = nranks(ctx);
    let q = N / n;
    let rem = N % n;
    store(src, [0], load(x, [0], [N]));
    barrier(ctx);
    for c in 0..n {
        let lo = c * q + min(c, rem);
        let hi = lo + q + select(c < rem, 1, 0);
        for i in lo..hi {
            store(y, [i], remote_load(src, c, [i], [1]));
        }
    }
    barrier(ctx);
}

/// Built in.
#[eagle::kernel(device)]
pub fn gather_builtin(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    put(src, rank(ctx), x);
    allgather(ctx, src, y);
}

/// Host.
#[eagle::host]
pub fn allgather_step(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, hand: bool) {
    let buf = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        let w = window(buf, [N], f32);
        if hand {
            gather_hand(x[r], y[r], w, device = r);
        } else {
            gather_builtin(x[r], y[r], w, device = r);
        }
    }
}

/// Runs the step: element j of every row comes from its owner's row.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, N], 13);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    allgather_step.launch(s, &x, &mut y, s.mode() == Some("hand"))?;
    let want: Vec<f32> = (0..N)
        .map(|j| x.row(eagle_runner::golden::owner(N, p, j))[j])
        .collect();
    for r in 0..p {
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), &want)?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 13,
    name: "allgather",
    modes: &["hand", "builtin"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
