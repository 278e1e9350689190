//! One training step of an MLP on a `[DP, TP]` process grid (data parallel x tensor parallel):
//! `y = gelu(x W1) W2`, the loss `0.5 |y - target|^2`, its gradients, the weight gradients
//! averaged over the data-parallel replicas and an SGD step, in one launch.
//!
//! The world's `P = DP x TP` ranks form the grid `[{ NR / TP }, TP]` (rank `r` at row
//! `r / TP`, column `r % TP`). Each row is a TP group: its ranks hold the same batch `x_i`
//! (`[T, D]`) and split the weights Megatron's way, rank `(i, j)` holding columns
//! `j * F/TP ..` of `W1` (`[D, F]`) and the same rows of `W2` (`[F, D]`). Each column is a DP
//! group: its ranks hold the same weight shards and different batches. On every rank:
//!
//! 1. **forward** (as `tp_ffn`, within the TP group): `pre = x W1_j`, `h = gelu(pre)`, the
//!    partial `h W2_j`, summed over the TP group (`allreduce(tp, .., Sum, TwoPhase)`) into `y`;
//! 2. **backward**: `dy = y - target`; `da = (dy W2_j^T) * gelu'(pre)`; `dW2_j = h^T dy`,
//!    `dW1_j = x^T da`; `dx` = the TP group's sum of `da W1_j^T`;
//! 3. **data-parallel average**: `dW1_j` and `dW2_j` summed over the DP group
//!    (`allreduce(dp, .., Sum, TwoPhase)`) and divided by `DP`;
//! 4. **SGD**: `W <- W - LR * dW`, so every replica of a shard ends with the same weights.
//!
//! `T = 16` tokens per batch, `D = 32` hidden, `F = 64` ffn, `LR = 0.125`. `--mode grid`
//! (default) takes `TP = 2` at an even P and `TP = 1` at an odd one; `--mode wide` the largest
//! TP that divides both P and `F / B = 8` (P = 4: `[1, 4]`, P = 6: `[3, 2]`).
//!
//! Orders (the golden's): every product accumulates from `+0.0` in ascending inner index
//! (blocked `matmul_acc`, transposed tiles for `W^T` and `x^T`); `gelu` is the tanh form with
//! eagle's `tanh` and `gelu'` its derivative written out below; the TP and DP sums add the
//! group's ranks in group-rank order. Data flow: `docs/apps/dp_tp_mlp.md`.
//!
//! `cargo run --example dp_tp_mlp -- -d 0,1,2,3,4,5 --mode wide`
use eagle::ir::MathFn;
use eagle::prelude::*;

/// Tokens per data-parallel batch.
pub const T: usize = 16;
/// Hidden size.
pub const D: usize = 32;
/// FFN size, split across the TP group.
pub const F: usize = 64;
/// Tile edge of the blocked products.
pub const B: usize = 8;
/// The SGD step size.
pub const LR: f32 = 0.125;
const NR: Dim = dynamic!("NR");
const TP: Dim = dynamic!("TP");

/// Per-device program: the forward pass within the TP group, the backward pass, the DP
/// average of the weight gradients and the SGD step. The windows other than the collectives'
/// (`pre`, `h`, `da`, `dy`) are this rank's scratch.
#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn dp_tp_mlp_rank(
    ctx: Ctx,
    x: Tensor<f32, T, D>,
    target: Tensor<f32, T, D>,
    w1: Tensor<f32, D, { F / TP }>,
    w2: Tensor<f32, { F / TP }, D>,
    y: Out<Tensor<f32, T, D>>,
    dx: Out<Tensor<f32, T, D>>,
    w1_new: Out<Tensor<f32, D, { F / TP }>>,
    w2_new: Out<Tensor<f32, { F / TP }, D>>,
    pre: Window<f32, T, { F / TP }>,
    h: Window<f32, T, { F / TP }>,
    da: Window<f32, T, { F / TP }>,
    dy: Window<f32, T, D>,
    part: Window<f32, T, D>,
    ysum: Window<f32, T, D>,
    dxp: Window<f32, T, D>,
    dxs: Window<f32, T, D>,
    g1: Window<f32, D, { F / TP }>,
    g1s: Window<f32, D, { F / TP }>,
    g2: Window<f32, { F / TP }, D>,
    g2s: Window<f32, { F / TP }, D>,
) {
    let tp = group(ctx, [{ NR / TP }, TP], 1);
    let dp = group(ctx, [{ NR / TP }, TP], 0);
    let me = rank(ctx);
    let fb = F / nranks(tp) / B;
    // Forward: pre = x W1_j, h = gelu(pre).
    for j in 0..fb {
        let mut acc = zeros([T, B], f32);
        for k in 0..D / B {
            let w = load(w1, [k * B, j * B], [B, B]);
            acc = matmul_acc(acc, load(x, [0, k * B], [T, B]), w);
        }
        store(pre, [0, j * B], acc);
        let inner = (acc + acc * acc * acc * 0.044715) * 0.7978845608028654;
        store(h, [0, j * B], acc * 0.5 * (inner.tanh() + 1.0));
    }
    // y = the TP group's sum of h W2_j.
    for n in 0..D / B {
        let mut acc = zeros([T, B], f32);
        for j in 0..fb {
            let w = load(w2, [j * B, n * B], [B, B]);
            acc = matmul_acc(acc, load(h, [0, j * B], [T, B]), w);
        }
        store(part, [0, n * B], acc);
    }
    allreduce(tp, part, ysum, Sum, TwoPhase);
    get(y, me, ysum);
    // dy = y - target; da = (dy W2_j^T) * gelu'(pre).
    store(
        dy,
        [0, 0],
        load(ysum, [0, 0], [T, D]) - load(target, [0, 0], [T, D]),
    );
    for j in 0..fb {
        let mut acc = zeros([T, B], f32);
        for n in 0..D / B {
            let wt = transpose(load(w2, [j * B, n * B], [B, B]));
            acc = matmul_acc(acc, load(dy, [0, n * B], [T, B]), wt);
        }
        let a = load(pre, [0, j * B], [T, B]);
        let th = ((a + a * a * a * 0.044715) * 0.7978845608028654).tanh();
        let slope = (th + 1.0) * 0.5
            + a * 0.5 * (1.0 - th * th) * 0.7978845608028654 * (a * a * 0.134145 + 1.0);
        store(da, [0, j * B], acc * slope);
    }
    // dW2_j = h^T dy and dW1_j = x^T da, over the batch's tokens.
    for j in 0..fb {
        for n in 0..D / B {
            let mut acc = zeros([B, B], f32);
            for t in 0..T / B {
                let ht = transpose(load(h, [t * B, j * B], [B, B]));
                acc = matmul_acc(acc, ht, load(dy, [t * B, n * B], [B, B]));
            }
            store(g2, [j * B, n * B], acc);
        }
        for k in 0..D / B {
            let mut acc = zeros([B, B], f32);
            for t in 0..T / B {
                let xt = transpose(load(x, [t * B, k * B], [B, B]));
                acc = matmul_acc(acc, xt, load(da, [t * B, j * B], [B, B]));
            }
            store(g1, [k * B, j * B], acc);
        }
    }
    // dx = the TP group's sum of da W1_j^T.
    for k in 0..D / B {
        let mut acc = zeros([T, B], f32);
        for j in 0..fb {
            let wt = transpose(load(w1, [k * B, j * B], [B, B]));
            acc = matmul_acc(acc, load(da, [0, j * B], [T, B]), wt);
        }
        store(dxp, [0, k * B], acc);
    }
    allreduce(tp, dxp, dxs, Sum, TwoPhase);
    get(dx, me, dxs);
    // The DP group's average of the weight gradients, and the SGD step.
    allreduce(dp, g1, g1s, Sum, TwoPhase);
    allreduce(dp, g2, g2s, Sum, TwoPhase);
    let replicas = nranks(dp) as f32;
    for j in 0..fb {
        for k in 0..D / B {
            let g = load(g1s, [k * B, j * B], [B, B]) / replicas;
            store(
                w1_new,
                [k * B, j * B],
                load(w1, [k * B, j * B], [B, B]) - g * 0.125,
            );
        }
        for n in 0..D / B {
            let g = load(g2s, [j * B, n * B], [B, B]) / replicas;
            store(
                w2_new,
                [j * B, n * B],
                load(w2, [j * B, n * B], [B, B]) - g * 0.125,
            );
        }
    }
}

/// Host: rank `r` takes batch `x[r / TP]` and the shards `w1[r % TP]`, `w2[r % TP]`, and
/// writes its `y`, `dx` and updated shards into row `r` of the outputs. The launch binds `TP`
/// from `w1`'s first dimension (the shards: `[TP, D, F / TP]`) and `NR` from the outputs.
#[eagle::host]
#[allow(clippy::too_many_arguments)]
pub fn dp_tp_mlp(
    x: Tensor<f32, { NR / TP }, T, D>,
    target: Tensor<f32, { NR / TP }, T, D>,
    w1: Tensor<f32, TP, D, { F / TP }>,
    w2: Tensor<f32, TP, { F / TP }, D>,
    y: Out<Tensor<f32, NR, T, D>>,
    dx: Out<Tensor<f32, NR, T, D>>,
    w1_new: Out<Tensor<f32, NR, D, { F / TP }>>,
    w2_new: Out<Tensor<f32, NR, { F / TP }, D>>,
) {
    let pre = alloc_window_buffer([T, { F / TP }], f32);
    let h = alloc_window_buffer([T, { F / TP }], f32);
    let da = alloc_window_buffer([T, { F / TP }], f32);
    let dy = alloc_window_buffer([T, D], f32);
    let part = alloc_window_buffer([T, D], f32);
    let ysum = alloc_window_buffer([T, D], f32);
    let dxp = alloc_window_buffer([T, D], f32);
    let dxs = alloc_window_buffer([T, D], f32);
    let g1 = alloc_window_buffer([D, { F / TP }], f32);
    let g1s = alloc_window_buffer([D, { F / TP }], f32);
    let g2 = alloc_window_buffer([{ F / TP }, D], f32);
    let g2s = alloc_window_buffer([{ F / TP }, D], f32);
    for r in 0..world_size() {
        dp_tp_mlp_rank(
            x[r / TP],
            target[r / TP],
            w1[r % TP],
            w2[r % TP],
            y[r],
            dx[r],
            w1_new[r],
            w2_new[r],
            window(pre, [T, { F / TP }], f32),
            window(h, [T, { F / TP }], f32),
            window(da, [T, { F / TP }], f32),
            window(dy, [T, D], f32),
            window(part, [T, D], f32),
            window(ysum, [T, D], f32),
            window(dxp, [T, D], f32),
            window(dxs, [T, D], f32),
            window(g1, [D, { F / TP }], f32),
            window(g1s, [D, { F / TP }], f32),
            window(g2, [{ F / TP }, D], f32),
            window(g2s, [{ F / TP }, D], f32),
            device = r,
        );
    }
}

/// The TP extent of `--mode grid` (`wide = false`: 2 at an even P, else 1) or `--mode wide`
/// (the largest TP dividing both P and `F / B`).
pub fn tp_of(p: usize, wide: bool) -> usize {
    let most = if wide { F / B } else { 2 };
    (1..=most)
        .rev()
        .find(|t| p.is_multiple_of(*t) && most.is_multiple_of(*t))
        .unwrap_or(1)
}

/// The inputs of one step on a `[dp, tp]` grid: a batch and a target per DP group
/// (`[dp, T, D]`) and the weight shards per TP rank (`w1` `[tp, D, F/tp]`, `w2`
/// `[tp, F/tp, D]`, the columns and rows of the same `[D, F]` and `[F, D]` matrices at every
/// `tp`).
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The batches.
    pub x: Tensor<f32>,
    /// The targets.
    pub target: Tensor<f32>,
    /// `W1`'s column shards.
    pub w1: Tensor<f32>,
    /// `W2`'s row shards.
    pub w2: Tensor<f32>,
}

impl Inputs {
    /// Seeded inputs: `x` and `target` in (-1, 1), `W1` in (-1/8, 1/8), `W2` in (-1/16, 1/16).
    ///
    /// # Errors
    /// None in practice (the shapes are consistent).
    pub fn random(dp: usize, tp: usize, seed: u64) -> eagle::Result<Inputs> {
        let ft = F / tp;
        let full1 = eagle_runner::random_tensor(&[D, F], seed + 2);
        let full2 = eagle_runner::random_tensor(&[F, D], seed + 3);
        let w1 = (0..tp * D * ft)
            .map(|e| {
                let (j, k, c) = (e / (D * ft), e / ft % D, e % ft);
                full1.data()[k * F + j * ft + c] * 0.125
            })
            .collect();
        let w2 = (0..tp * ft * D).map(|e| full2.data()[e] * 0.0625).collect();
        Ok(Inputs {
            x: eagle_runner::random_tensor(&[dp, T, D], seed),
            target: eagle_runner::random_tensor(&[dp, T, D], seed + 1),
            w1: Tensor::from_vec(&[tp, D, ft], w1)?,
            w2: Tensor::from_vec(&[tp, ft, D], w2)?,
        })
    }
}

/// What one step returns: every rank's `y` and `dx` (`[P, T, D]`) and updated shards
/// (`[P, D, F/TP]`, `[P, F/TP, D]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Outputs {
    /// The forward output.
    pub y: Vec<f32>,
    /// The gradient of the input.
    pub dx: Vec<f32>,
    /// The updated `W1` shard.
    pub w1: Vec<f32>,
    /// The updated `W2` shard.
    pub w2: Vec<f32>,
}

/// One launch on a grid with `tp` columns.
///
/// # Errors
/// The launch's errors (a `tp` that does not divide P or `F` is refused before anything runs).
pub fn run_once(s: &Session, inp: &Inputs, tp: usize) -> eagle::Result<Outputs> {
    let p = s.world_size();
    let ft = F / tp;
    let mut y = Tensor::<f32>::zeros(&[p, T, D]);
    let mut dx = Tensor::<f32>::zeros(&[p, T, D]);
    let mut w1 = Tensor::<f32>::zeros(&[p, D, ft]);
    let mut w2 = Tensor::<f32>::zeros(&[p, ft, D]);
    dp_tp_mlp.launch(
        s,
        &inp.x,
        &inp.target,
        &inp.w1,
        &inp.w2,
        &mut y,
        &mut dx,
        &mut w1,
        &mut w2,
    )?;
    Ok(Outputs {
        y: y.data().to_vec(),
        dx: dx.data().to_vec(),
        w1: w1.data().to_vec(),
        w2: w2.data().to_vec(),
    })
}

/// `a [r, c] x b [c, n]` (`b` read through `bt` as `b[x][j] = bt(x, j)`) from `+0.0` over
/// ascending `c`: `matmul_acc`'s order.
fn product(
    a: &dyn Fn(usize, usize) -> f32,
    b: &dyn Fn(usize, usize) -> f32,
    r: usize,
    c: usize,
    n: usize,
) -> Vec<f32> {
    let mut out = vec![0.0f32; r * n];
    for i in 0..r {
        for j in 0..n {
            let mut acc = 0.0f32;
            for x in 0..c {
                acc += a(i, x) * b(x, j);
            }
            out[i * n + j] = acc;
        }
    }
    out
}

/// Sums `parts` element by element in order, from the first (a group's two-phase sum).
fn sum_in_order(parts: &[Vec<f32>]) -> Vec<f32> {
    let mut acc = parts[0].clone();
    for p in &parts[1..] {
        acc.iter_mut().zip(p).for_each(|(a, b)| *a += b);
    }
    acc
}

/// The golden on one thread, in the documented orders, for a `[dp, tp]` grid: what every rank
/// must return.
pub fn golden(inp: &Inputs, dp: usize, tp: usize) -> Outputs {
    let ft = F / tp;
    let tanh = |v: f32| MathFn::Tanh.eval_f32(&[v]);
    let (x, target) = (inp.x.data(), inp.target.data());
    let (w1, w2) = (inp.w1.data(), inp.w2.data());
    let mut out = Outputs {
        y: vec![],
        dx: vec![],
        w1: vec![],
        w2: vec![],
    };
    // Per rank (i, j): pre, h, da and the partials; then the group sums.
    let mut g1 = vec![vec![vec![]; dp]; tp];
    let mut g2 = vec![vec![vec![]; dp]; tp];
    let mut ys = vec![];
    let mut dxs = vec![];
    for i in 0..dp {
        let xi = &x[i * T * D..][..T * D];
        let ti = &target[i * T * D..][..T * D];
        let mut pres = vec![];
        let mut hs = vec![];
        let mut parts = vec![];
        for j in 0..tp {
            let (w1j, w2j) = (&w1[j * D * ft..][..D * ft], &w2[j * ft * D..][..ft * D]);
            let pre = product(&|a, k| xi[a * D + k], &|k, c| w1j[k * ft + c], T, D, ft);
            let h: Vec<f32> = pre
                .iter()
                .map(|&v| {
                    let inner = (v + v * v * v * 0.044715) * 0.797_884_6;
                    v * 0.5 * (tanh(inner) + 1.0)
                })
                .collect();
            parts.push(product(
                &|a, c| h[a * ft + c],
                &|c, n| w2j[c * D + n],
                T,
                ft,
                D,
            ));
            pres.push(pre);
            hs.push(h);
        }
        let y = sum_in_order(&parts);
        let dy: Vec<f32> = y.iter().zip(ti).map(|(a, b)| a - b).collect();
        let mut dxp = vec![];
        for j in 0..tp {
            let (w1j, w2j) = (&w1[j * D * ft..][..D * ft], &w2[j * ft * D..][..ft * D]);
            let dh = product(&|a, n| dy[a * D + n], &|n, c| w2j[c * D + n], T, D, ft);
            let da: Vec<f32> = (0..T * ft)
                .map(|e| {
                    let a = pres[j][e];
                    let th = tanh((a + a * a * a * 0.044715) * 0.797_884_6);
                    let slope = (th + 1.0) * 0.5
                        + a * 0.5 * (1.0 - th * th) * 0.797_884_6 * (a * a * 0.134145 + 1.0);
                    dh[e] * slope
                })
                .collect();
            let h = &hs[j];
            g2[j][i] = product(&|c, t| h[t * ft + c], &|t, n| dy[t * D + n], ft, T, D);
            g1[j][i] = product(&|k, t| xi[t * D + k], &|t, c| da[t * ft + c], D, T, ft);
            dxp.push(product(
                &|a, c| da[a * ft + c],
                &|c, k| w1j[k * ft + c],
                T,
                ft,
                D,
            ));
        }
        ys.push(y);
        dxs.push(sum_in_order(&dxp));
    }
    let mut w1n = vec![];
    let mut w2n = vec![];
    for j in 0..tp {
        let step = |w: &[f32], g: Vec<f32>| -> Vec<f32> {
            w.iter()
                .zip(g)
                .map(|(w, g)| w - g / dp as f32 * LR)
                .collect()
        };
        w1n.push(step(&w1[j * D * ft..][..D * ft], sum_in_order(&g1[j])));
        w2n.push(step(&w2[j * ft * D..][..ft * D], sum_in_order(&g2[j])));
    }
    for r in 0..dp * tp {
        let (i, j) = (r / tp, r % tp);
        out.y.extend(&ys[i]);
        out.dx.extend(&dxs[i]);
        out.w1.extend(&w1n[j]);
        out.w2.extend(&w2n[j]);
    }
    out
}

/// Runs the mode on seeded inputs; every rank's outputs must equal the golden bit for bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let tp = tp_of(p, s.mode() == Some("wide"));
    let inp = Inputs::random(p / tp, tp, 41)?;
    let got = run_once(s, &inp, tp)?;
    let want = golden(&inp, p / tp, tp);
    eagle_runner::check_bits("y", &got.y, &want.y)?;
    eagle_runner::check_bits("dx", &got.dx, &want.dx)?;
    eagle_runner::check_bits("w1", &got.w1, &want.w1)?;
    eagle_runner::check_bits("w2", &got.w2, &want.w2)
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 34,
    name: "dp_tp_mlp",
    modes: &["grid", "wide"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
