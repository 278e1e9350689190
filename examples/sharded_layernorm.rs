//! Sharded layer normalisation: each row of `x` (`T` tokens by `H = P * SHARD` hidden) is
//! split across the ranks by columns, rank `r` holding columns `r * SHARD ..` and the same
//! columns of `gamma` and `beta`:
//! `y = (x - mean) / sqrt(var + EPS) * gamma + beta`, with the two-pass variance
//! `var = sum((x - mean)^2) / H`. The output equals the single-rank layer norm bit for bit at
//! every world size because both sums are taken in an order that does not depend on P: fixed
//! blocks of `BLOCK` = 32 columns, each summed by `row_sum` (eagle's fixed 8-lane order) on
//! the rank that holds it, gathered to every rank (`allgather`) and folded in block order
//! `((s0 + s1) + s2) + ...`, exactly the steps a single rank takes.
//!
//! Data flow, bytes and synchronisation: `docs/apps/sharded_layernorm.md`.
//!
//! `cargo run --example sharded_layernorm -- -d 0,1,2,3`
use eagle::prelude::*;

/// Tokens (rows).
pub const T: usize = 16;
/// Columns per block of the fixed summation order.
pub const BLOCK: usize = 32;
/// Blocks per rank.
pub const BPR: usize = 3;
/// Columns per rank.
pub const SHARD: usize = BLOCK * BPR;
/// Added to the variance.
pub const EPS: f32 = 1e-5;
const NR: Dim = dynamic!("NR");

/// Per-device program: the layer norm of this rank's columns of every row.
#[eagle::kernel(device)]
pub fn layernorm_shard(
    ctx: Ctx,
    x: Tensor<f32, T, SHARD>,
    gamma: Tensor<f32, 1, SHARD>,
    beta: Tensor<f32, 1, SHARD>,
    y: Out<Tensor<f32, T, SHARD>>,
    part: Window<f32, { NR * BPR }, T>,
    all: Window<f32, { NR * BPR }, T>,
    part2: Window<f32, { NR * BPR }, T>,
    all2: Window<f32, { NR * BPR }, T>,
) {
    let me = rank(ctx);
    let blocks = nranks(ctx) * BPR;
    let h = (nranks(ctx) * SHARD) as f32;
    let t = load(x, [0, 0], [T, SHARD]);
    // The mean: block sums of x, gathered, folded in block order.
    for b in 0..BPR {
        let xb = load(x, [0, b * BLOCK], [T, BLOCK]);
        store(part, [me * BPR + b, 0], transpose(row_sum(xb)));
    }
    allgather(ctx, part, all);
    let mut total = zeros([1, T], f32);
    for b in 0..blocks {
        total = total + load(all, [b, 0], [1, T]);
    }
    let d = t - transpose(total) / h;
    // The variance, two-pass: block sums of (x - mean)^2, the same way.
    store(y, [0, 0], d * d);
    for b in 0..BPR {
        let sb = load(y, [0, b * BLOCK], [T, BLOCK]);
        store(part2, [me * BPR + b, 0], transpose(row_sum(sb)));
    }
    allgather(ctx, part2, all2);
    let mut sq = zeros([1, T], f32);
    for b in 0..blocks {
        sq = sq + load(all2, [b, 0], [1, T]);
    }
    let inv = 1.0 / sqrt(transpose(sq) / h + EPS);
    let g = load(gamma, [0, 0], [1, SHARD]);
    let bt = load(beta, [0, 0], [1, SHARD]);
    store(y, [0, 0], d * inv * g + bt);
}

/// Host: rank `r` takes columns `r * SHARD ..` of `x`, `gamma` and `beta`.
#[eagle::host]
pub fn sharded_layernorm(
    x: Tensor<f32, NR, T, SHARD>,
    gamma: Tensor<f32, NR, 1, SHARD>,
    beta: Tensor<f32, NR, 1, SHARD>,
    y: Out<Tensor<f32, NR, T, SHARD>>,
) {
    let part = alloc_window_buffer([NR * BPR, T], f32);
    let all = alloc_window_buffer([NR * BPR, T], f32);
    let part2 = alloc_window_buffer([NR * BPR, T], f32);
    let all2 = alloc_window_buffer([NR * BPR, T], f32);
    for r in 0..world_size() {
        layernorm_shard(
            x[r],
            gamma[r],
            beta[r],
            y[r],
            window(part, [NR * BPR, T], f32),
            window(all, [NR * BPR, T], f32),
            window(part2, [NR * BPR, T], f32),
            window(all2, [NR * BPR, T], f32),
            device = r,
        );
    }
}

/// The sum of a full row in the documented order: `BLOCK`-column blocks in the 8-lane order,
/// folded in block order from `+0.0`.
pub fn block_sum(row: &[f32]) -> f32 {
    row.chunks(BLOCK)
        .fold(0.0f32, |acc, b| acc + eagle_runner::golden::lane_sum(b))
}

/// The golden: the single-rank layer norm of one full row (`g`, `b` full rows too).
pub fn golden_row(row: &[f32], g: &[f32], b: &[f32]) -> Vec<f32> {
    let h = row.len() as f32;
    let mean = block_sum(row) / h;
    let d: Vec<f32> = row.iter().map(|&v| v - mean).collect();
    let sq: Vec<f32> = d.iter().map(|&v| v * v).collect();
    let inv = 1.0 / (block_sum(&sq) / h + EPS).sqrt();
    d.iter()
        .enumerate()
        .map(|(j, &v)| v * inv * g[j] + b[j])
        .collect()
}

/// The full rows of a sharded `[P, rows, SHARD]` tensor, row-major `[rows, P * SHARD]`.
pub fn unshard(x: &[f32], p: usize, rows: usize) -> Vec<f32> {
    let mut full = Vec::with_capacity(x.len());
    for t in 0..rows {
        for r in 0..p {
            let at = (r * rows + t) * SHARD;
            full.extend_from_slice(&x[at..at + SHARD]);
        }
    }
    full
}

/// Runs the program on seeded random inputs and checks every rank's columns bit for bit
/// against the single-rank golden of the full rows.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let mut x = eagle_runner::random_tensor(&[p, T, SHARD], 24);
    x.data_mut().iter_mut().for_each(|v| *v = *v * 3.0 + 0.5);
    let g = eagle_runner::random_tensor(&[p, 1, SHARD], 25);
    let b = eagle_runner::random_tensor(&[p, 1, SHARD], 26);
    let mut y = Tensor::<f32>::zeros(&[p, T, SHARD]);
    sharded_layernorm.launch(s, &x, &g, &b, &mut y)?;
    let h = p * SHARD;
    let (gf, bf) = (unshard(g.data(), p, 1), unshard(b.data(), p, 1));
    let want: Vec<f32> = unshard(x.data(), p, T)
        .chunks(h)
        .flat_map(|row| golden_row(row, &gf, &bf))
        .collect();
    eagle_runner::check_bits("y", &unshard(y.data(), p, T), &want)
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 24,
    name: "sharded_layernorm",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
