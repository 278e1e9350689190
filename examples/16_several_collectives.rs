//! Step 16: several collectives in one program. Each rank computes, from its vector x:
//! `s` = sum of x over ranks (allreduce), `m` = maximum over ranks built from a reduce-scatter
//! and an allgather, and `b` = the last rank's x (broadcast); its output is `s + m * b`.
//! `--mode builtin` uses the built-ins (ring allreduce); `--mode hand` writes each one out.
//!
//! `cargo run --example 16_several_collectives -- -d 0,1,2,3 --mode builtin`
use eagle::prelude::*;

/// Vector length.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Hand-written reduce-scatter of my chunk into `dst` with `max`, in rank order.
#[eagle::kernel]
pub fn hand_rs_max(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let q = N / n;
    let rem = N % n;
    let lo = me * q + min(me, rem);
    let hi = lo + q + select(me < rem, 1, 0);
    for i in lo..hi {
        store(dst, [i], remote_load(src, 0, [i], [1]));
        for p in 1..n {
            store(
                dst,
                [i],
                max(load(dst, [i], [1]), remote_load(src, p, [i], [1])),
            );
        }
    }
}

/// Hand-written allgather of `buf`'s chunks into `out`.
#[eagle::kernel]
pub fn hand_gather(ctx: Ctx, buf: Window<f32, N>, out: Window<f32, N>) {
    let n = nranks(ctx);
    let q = N / n;
    let rem = N % n;
    for c in 0..n {
        let lo = c * q + min(c, rem);
        let hi = lo + q + select(c < rem, 1, 0);
        for i in lo..hi {
            store(out, [i], remote_load(buf, c, [i], [1]));
        }
    }
}

/// Hand-written mesh sum of every rank's `src` into `dst`.
#[eagle::kernel]
pub fn hand_sum(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>) {
    for i in 0..N {
        store(dst, [i], remote_load(src, 0, [i], [1]));
        for p in 1..nranks(ctx) {
            store(
                dst,
                [i],
                load(dst, [i], [1]) + remote_load(src, p, [i], [1]),
            );
        }
    }
}

/// The per-device program.
#[eagle::kernel(device)]
pub fn combined(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    s: Window<f32, N>,
    part: Window<f32, N>,
    m: Window<f32, N>,
    b: Window<f32, N>,
    hand: bool,
) {
    let last = nranks(ctx) - 1;
    put(src, rank(ctx), x);
    if hand {
        barrier(ctx);
        hand_sum(ctx, src, s);
        hand_rs_max(ctx, src, part);
        barrier(ctx);
        hand_gather(ctx, part, m);
        get(b, last, src);
        barrier(ctx);
    } else {
        allreduce(ctx, src, s, Sum, Ring);
        reduce_scatter(ctx, src, part, Max);
        allgather(ctx, part, m);
        broadcast(ctx, src, b, last);
    }
    for k in 0..N / 250 {
        let o = k * 250;
        let t = load(s, [o], [250]) + load(m, [o], [250]) * load(b, [o], [250]);
        store(y, [o], t);
    }
}

/// Host.
#[eagle::host]
pub fn several(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, hand: bool) {
    let src = alloc_window_buffer([N], f32);
    let s = alloc_window_buffer([N], f32);
    let part = alloc_window_buffer([N], f32);
    let m = alloc_window_buffer([N], f32);
    let b = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        combined(
            x[r],
            y[r],
            window(src, [N], f32),
            window(s, [N], f32),
            window(part, [N], f32),
            window(m, [N], f32),
            window(b, [N], f32),
            hand,
            device = r,
        );
    }
}

/// Runs the step against `s + m * b` computed on the host in the same orders.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let hand = s.mode() == Some("hand");
    let x = eagle_runner::random_tensor(&[p, N], 16);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    several.launch(s, &x, &mut y, hand)?;
    let sum = eagle_runner::golden::allreduce(&x, |a, b| a + b, !hand);
    let max = eagle_runner::golden::allreduce(&x, eagle_runner::golden::fmax_f32, false);
    let b = x.row(p - 1);
    let want: Vec<f32> = (0..N).map(|j| sum[j] + max[j] * b[j]).collect();
    for r in 0..p {
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), &want)?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 16,
    name: "several_collectives",
    modes: &["hand", "builtin"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
