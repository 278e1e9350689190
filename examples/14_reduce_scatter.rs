//! Step 14: reduce-scatter (sum). Rank c ends with chunk c of the sum over ranks (combined in
//! rank order); the rest of its output is left as it was. Hand-written or built in.
//!
//! `cargo run --example 14_reduce_scatter -- -d 0,1,2,3 --mode builtin`
use eagle::prelude::*;

/// Vector length.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Hand-written: sum my chunk over every rank's window.
#[eagle::kernel(device)]
pub fn rs_hand(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let q = N / n;
    let rem = N % n;
    store(src, [0], load(x, [0], [N]));
    barrier(ctx);
    let lo = me * q + min(me, rem);
    let hi = lo + q + select(me < rem, 1, 0);
    for i in lo..hi {
        store(y, [i], remote_load(src, 0, [i], [1]));
        for p in 1..n {
            store(y, [i], load(y, [i], [1]) + remote_load(src, p, [i], [1]));
        }
    }
    barrier(ctx);
}

/// Built in.
#[eagle::kernel(device)]
pub fn rs_builtin(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, src: Window<f32, N>) {
    put(src, rank(ctx), x);
    reduce_scatter(ctx, src, y, Sum);
}

/// Host.
#[eagle::host]
pub fn reduce_scatter_step(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, hand: bool) {
    let buf = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        let w = window(buf, [N], f32);
        if hand {
            rs_hand(x[r], y[r], w, device = r);
        } else {
            rs_builtin(x[r], y[r], w, device = r);
        }
    }
}

/// Runs the step: rank r's chunk r holds the rank-order sum; other elements stay 0.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, N], 14);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    reduce_scatter_step.launch(s, &x, &mut y, s.mode() == Some("hand"))?;
    let sum = eagle_runner::golden::allreduce(&x, |a, b| a + b, false);
    for r in 0..p {
        let mine = eagle_runner::golden::chunk(N, p, r);
        let want: Vec<f32> = (0..N)
            .map(|j| if mine.contains(&j) { sum[j] } else { 0.0 })
            .collect();
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), &want)?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 14,
    name: "reduce_scatter",
    modes: &["hand", "builtin"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
