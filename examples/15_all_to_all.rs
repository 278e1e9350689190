//! Step 15: all-to-all. Each rank holds one row of M elements for every rank (`[NR, M]`); row
//! q goes to rank q, which stores it at row `me`. Hand-written with `get` of row subviews, or
//! built in.
//!
//! `cargo run --example 15_all_to_all -- -d 0,1,2 --mode hand`
use eagle::prelude::*;

/// Row length.
pub const M: usize = 48;
const NR: Dim = dynamic!("NR");

/// Hand-written: pull row `me` of every rank's window into row q of `y`.
#[eagle::kernel(device)]
pub fn a2a_hand(
    ctx: Ctx,
    x: Tensor<f32, NR, M>,
    y: Out<Tensor<f32, NR, M>>,
    src: Window<f32, NR, M>,
) {
    let me = rank(ctx);
    put(src, me, x);
    barrier(ctx);
    for q in 0..nranks(ctx) {
        get(subview(y, q, 1), q, subview(src, me, 1));
    }
    barrier(ctx);
}

/// Built in.
#[eagle::kernel(device)]
pub fn a2a_builtin(
    ctx: Ctx,
    x: Tensor<f32, NR, M>,
    y: Out<Tensor<f32, NR, M>>,
    src: Window<f32, NR, M>,
) {
    put(src, rank(ctx), x);
    all_to_all(ctx, src, y);
}

/// Host: `x[r][q]` is what rank r sends to rank q.
#[eagle::host]
pub fn all_to_all_step(x: Tensor<f32, NR, NR, M>, y: Out<Tensor<f32, NR, NR, M>>, hand: bool) {
    let buf = alloc_window_buffer([NR, M], f32);
    for r in 0..world_size() {
        let w = window(buf, [NR, M], f32);
        if hand {
            a2a_hand(x[r], y[r], w, device = r);
        } else {
            a2a_builtin(x[r], y[r], w, device = r);
        }
    }
}

/// Runs the step: `y[r][q] = x[q][r]`.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, p, M], 15);
    let mut y = Tensor::<f32>::zeros(&[p, p, M]);
    all_to_all_step.launch(s, &x, &mut y, s.mode() == Some("hand"))?;
    let row = |t: &Tensor<f32>, a: usize, b: usize| {
        t.data()[(a * p + b) * M..(a * p + b + 1) * M].to_vec()
    };
    for r in 0..p {
        for q in 0..p {
            eagle_runner::check_bits(&format!("y[{r}][{q}]"), &row(&y, r, q), &row(&x, q, r))?;
        }
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 15,
    name: "all_to_all",
    modes: &["hand", "builtin"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
