//! Tensor-parallel MLP block (Megatron layout): `y = gelu(x W1) W2` with `x` `[T, D]`
//! replicated, `W1` `[D, F]` split by columns and `W2` `[F, D]` split by rows across the
//! ranks: rank `r` holds columns `r * F/P ..` of `W1` and the same rows of `W2`, computes
//! `gelu(x W1_r) W2_r` (a partial `[T, D]`), and the partials are summed with the built-in
//! `allreduce` (two-phase: rank order, the same bits on every rank). `T = 64` tokens,
//! `D = 256` hidden, `F = 1024` ffn; `--mode f32` (default) or `--mode bf16`, where the
//! weights are `bf16` in memory and every product and sum is `f32` (the loaded weight tiles
//! are cast to `f32`: exact).
//!
//! The layout gives each rank whole blocks of `B` = 64 columns of `F`, so P divides `F / B`
//! = 16 (P = 1, 2, 4, 8, 16): at any other P the launch fails before anything runs, naming the
//! argument (`w1`, dimension 2 = `F / B / NR * B`).
//!
//! Orders (the golden's): each product `x W1_r` and `h W2_r` accumulates every element from
//! `+0.0` in ascending `k` (blocked `matmul_acc`), `gelu` is the tanh form with eagle's `tanh`,
//! and the partials are added in rank order. Data flow: `docs/apps/tp_ffn.md`.
//!
//! `cargo run --example tp_ffn -- -d 0,1,2,3 --mode bf16`
use eagle::ir::MathFn;
use eagle::prelude::*;

/// Tokens.
pub const T: usize = 64;
/// Hidden size.
pub const D: usize = 256;
/// FFN size, split across ranks.
pub const F: usize = 1024;
/// Tile edge of the blocked products.
pub const B: usize = 64;
const NR: Dim = dynamic!("NR");

/// Defines the per-device program `$dev` and the host `$host` for weights of dtype `$w`: one
/// source for both modes. Each weight tile is cast to `f32` (exact; a no-op for `f32`), so
/// every product and sum is `f32`.
macro_rules! tp_ffn_program {
    ($dev:ident, $host:ident, $w:ident) => {
        /// Per-device program: `h = gelu(x W1_r)`, the partial `h W2_r`, the allreduce.
        #[eagle::kernel(device)]
        pub fn $dev(
            ctx: Ctx,
            x: Tensor<f32, T, D>,
            w1: Tensor<$w, D, { F / B / NR * B }>,
            w2: Tensor<$w, { F / B / NR * B }, D>,
            h: Out<Tensor<f32, T, { F / B / NR * B }>>,
            y: Out<Tensor<f32, T, D>>,
            part: Window<f32, T, D>,
            sum: Window<f32, T, D>,
        ) {
            let blocks = F / nranks(ctx) / B;
            // h = gelu(x W1_r), B columns at a time.
            for j in 0..blocks {
                let mut acc = zeros([T, B], f32);
                for k in 0..D / B {
                    let w = load(w1, [k * B, j * B], [B, B]) as f32;
                    acc = matmul_acc(acc, load(x, [0, k * B], [T, B]), w);
                }
                let inner = (acc + acc * acc * acc * 0.044715) * 0.7978845608028654;
                store(h, [0, j * B], acc * 0.5 * (inner.tanh() + 1.0));
            }
            // The partial h W2_r, B columns at a time.
            for n in 0..D / B {
                let mut acc = zeros([T, B], f32);
                for j in 0..blocks {
                    let w = load(w2, [j * B, n * B], [B, B]) as f32;
                    acc = matmul_acc(acc, load(h, [0, j * B], [T, B]), w);
                }
                store(part, [0, n * B], acc);
            }
            allreduce(ctx, part, sum, Sum, TwoPhase);
            get(y, rank(ctx), sum);
        }

        /// Host: rank `r` takes `w1[r]` (`[D, F/P]`) and `w2[r]` (`[F/P, D]`).
        #[eagle::host]
        pub fn $host(
            x: Tensor<f32, T, D>,
            w1: Tensor<$w, NR, D, { F / B / NR * B }>,
            w2: Tensor<$w, NR, { F / B / NR * B }, D>,
            h: Out<Tensor<f32, NR, T, { F / B / NR * B }>>,
            y: Out<Tensor<f32, NR, T, D>>,
        ) {
            let part = alloc_window_buffer([T, D], f32);
            let sum = alloc_window_buffer([T, D], f32);
            for r in 0..world_size() {
                $dev(
                    x,
                    w1[r],
                    w2[r],
                    h[r],
                    y[r],
                    window(part, [T, D], f32),
                    window(sum, [T, D], f32),
                    device = r,
                );
            }
        }
    };
}

tp_ffn_program!(ffn_shard, tp_ffn, f32);
tp_ffn_program!(ffn_shard_bf16, tp_ffn_bf16, bf16);

/// GELU, tanh form, with eagle's `tanh` (the kernel's steps in the same order).
fn gelu(v: f32) -> f32 {
    let inner = (v + v * v * v * 0.044715) * 0.797_884_6;
    v * 0.5 * (MathFn::Tanh.eval_f32(&[inner]) + 1.0)
}

/// The golden for `p` ranks, in plain Rust: `w1` `[p, D, F/p]` and `w2` `[p, F/p, D]` as
/// `f32`; returns `y` `[T, D]`.
pub fn golden(x: &[f32], w1: &[f32], w2: &[f32], p: usize) -> Vec<f32> {
    let fp = F / p;
    let mut y = vec![0.0f32; T * D];
    for r in 0..p {
        let (w1r, w2r) = (&w1[r * D * fp..][..D * fp], &w2[r * fp * D..][..fp * D]);
        let mut h = vec![0.0f32; T * fp];
        for i in 0..T {
            for j in 0..fp {
                let mut acc = 0.0f32;
                for k in 0..D {
                    acc += x[i * D + k] * w1r[k * fp + j];
                }
                h[i * fp + j] = gelu(acc);
            }
        }
        for i in 0..T {
            for n in 0..D {
                let mut acc = 0.0f32;
                for j in 0..fp {
                    acc += h[i * fp + j] * w2r[j * D + n];
                }
                // Rank order: ((part_0 + part_1) + part_2) + ...
                y[i * D + n] = if r == 0 { acc } else { y[i * D + n] + acc };
            }
        }
    }
    y
}

/// Runs the program (`--mode f32` or `bf16`) on seeded random inputs and checks every rank's
/// `y` bit for bit against the golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let fp = F / p;
    let x = eagle_runner::random_tensor(&[T, D], 31);
    let scale = |t: Tensor<f32>, k: f32| -> eagle::Result<Tensor<f32>> {
        let shape = t.shape().to_vec();
        Ok(Tensor::from_vec(
            &shape,
            t.data().iter().map(|v| v * k).collect(),
        )?)
    };
    let w1 = scale(eagle_runner::random_tensor(&[p, D, fp], 32), 0.125)?;
    let w2 = scale(eagle_runner::random_tensor(&[p, fp, D], 33), 0.0625)?;
    let mut h = Tensor::<f32>::zeros(&[p, T, fp]);
    let mut y = Tensor::<f32>::zeros(&[p, T, D]);
    let want = if s.mode() == Some("bf16") {
        let to16 = |t: &Tensor<f32>| -> eagle::Result<Tensor<bf16>> {
            Ok(Tensor::from_vec(
                t.shape(),
                t.data().iter().map(|&v| bf16::from_f32(v)).collect(),
            )?)
        };
        let (b1, b2) = (to16(&w1)?, to16(&w2)?);
        tp_ffn_bf16.launch(s, &x, &b1, &b2, &mut h, &mut y)?;
        let f = |t: &Tensor<bf16>| t.data().iter().map(|v| v.to_f32()).collect::<Vec<_>>();
        golden(x.data(), &f(&b1), &f(&b2), p)
    } else {
        tp_ffn.launch(s, &x, &w1, &w2, &mut h, &mut y)?;
        golden(x.data(), w1.data(), w2.data(), p)
    };
    for r in 0..p {
        eagle_runner::check_bits(&format!("y on rank {r}"), y.row(r), &want)?;
    }
    Ok(())
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 25,
    name: "tp_ffn",
    modes: &["f32", "bf16"],
    // Each rank's share of `ffn` is whole column blocks of B: P divides F / B = 16.
    world: eagle_runner::World::Divides {
        extent: F / B,
        what: "ffn / B",
    },
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
