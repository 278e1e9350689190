//! Sharded softmax: each row of `x` (`T` tokens by `H = P * SHARD` hidden) is split across
//! the ranks by columns, rank `r` holding columns `r * SHARD ..`. The row maximum and the sum
//! of `exp(x - max)` are combined across ranks, and the output equals the single-rank softmax
//! bit for bit at every world size, because the sum's order does not depend on P:
//!
//! - the maximum is an `allreduce(max)`: IEEE `maximum` is associative and commutative, so
//!   any order gives the same bits;
//! - the sum is cut into fixed blocks of `BLOCK` = 32 columns. Each block's sum is a
//!   `row_sum` (eagle's fixed 8-lane order), computed by the rank that holds the block; an
//!   `allgather` gives every rank every block's sum, and every rank folds them in block order
//!   `((s0 + s1) + s2) + ...`. A single rank computes exactly these steps.
//!
//! Data flow, bytes and synchronisation: `docs/apps/sharded_softmax.md`.
//!
//! `cargo run --example sharded_softmax -- -d 0,1,2,3`
use eagle::ir::MathFn;
use eagle::prelude::*;

/// Tokens (rows).
pub const T: usize = 16;
/// Columns per block of the fixed summation order.
pub const BLOCK: usize = 32;
/// Blocks per rank.
pub const BPR: usize = 3;
/// Columns per rank.
pub const SHARD: usize = BLOCK * BPR;
const NR: Dim = dynamic!("NR");

/// Per-device program: the softmax of this rank's columns of every row.
#[eagle::kernel(device)]
pub fn softmax_shard(
    ctx: Ctx,
    x: Tensor<f32, T, SHARD>,
    y: Out<Tensor<f32, T, SHARD>>,
    mx: Window<f32, T, 1>,
    gmx: Window<f32, T, 1>,
    part: Window<f32, { NR * BPR }, T>,
    all: Window<f32, { NR * BPR }, T>,
) {
    let me = rank(ctx);
    let t = load(x, [0, 0], [T, SHARD]);
    // The row maximum over every rank's columns.
    store(mx, [0, 0], row_max(t));
    allreduce(ctx, mx, gmx, Max, TwoPhase);
    let e = (t - load(gmx, [0, 0], [T, 1])).exp();
    // One sum per block of BLOCK columns, row b of `part` for block b of this rank.
    store(y, [0, 0], e);
    for b in 0..BPR {
        let eb = load(y, [0, b * BLOCK], [T, BLOCK]);
        store(part, [me * BPR + b, 0], transpose(row_sum(eb)));
    }
    allgather(ctx, part, all);
    // Every block's sum, folded in block order.
    let mut total = zeros([1, T], f32);
    for b in 0..nranks(ctx) * BPR {
        total = total + load(all, [b, 0], [1, T]);
    }
    store(y, [0, 0], e / transpose(total));
}

/// Host: rank `r` takes columns `r * SHARD ..` of every row (`x[r]`, `[T, SHARD]`).
#[eagle::host]
pub fn sharded_softmax(x: Tensor<f32, NR, T, SHARD>, y: Out<Tensor<f32, NR, T, SHARD>>) {
    let mx = alloc_window_buffer([T, 1], f32);
    let gmx = alloc_window_buffer([T, 1], f32);
    let part = alloc_window_buffer([NR * BPR, T], f32);
    let all = alloc_window_buffer([NR * BPR, T], f32);
    for r in 0..world_size() {
        softmax_shard(
            x[r],
            y[r],
            window(mx, [T, 1], f32),
            window(gmx, [T, 1], f32),
            window(part, [NR * BPR, T], f32),
            window(all, [NR * BPR, T], f32),
            device = r,
        );
    }
}

/// The golden: the single-rank softmax of one full row in the documented order (maximum;
/// `exp(x - max)` by eagle's `exp`; the sum of each `BLOCK`-column block in the 8-lane order;
/// the block sums folded in block order; each element divided by the total).
pub fn golden_row(row: &[f32]) -> Vec<f32> {
    let max = row
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| eagle::ir::eval::fmax_f32(m, v));
    let e: Vec<f32> = row
        .iter()
        .map(|&v| MathFn::Exp.eval_f32(&[v - max]))
        .collect();
    let total = e
        .chunks(BLOCK)
        .fold(0.0f32, |acc, b| acc + eagle_runner::golden::lane_sum(b));
    e.iter().map(|&v| v / total).collect()
}

/// The full rows of a sharded `[P, T, SHARD]` tensor, row-major `[T, P * SHARD]`.
pub fn unshard(x: &[f32], p: usize) -> Vec<f32> {
    let mut full = Vec::with_capacity(x.len());
    for t in 0..T {
        for r in 0..p {
            let at = (r * T + t) * SHARD;
            full.extend_from_slice(&x[at..at + SHARD]);
        }
    }
    full
}

/// Runs the program on seeded random inputs and checks every rank's columns bit for bit
/// against the single-rank golden of the full rows.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let mut x = eagle_runner::random_tensor(&[p, T, SHARD], 23);
    x.data_mut().iter_mut().for_each(|v| *v *= 8.0);
    let mut y = Tensor::<f32>::zeros(&[p, T, SHARD]);
    sharded_softmax.launch(s, &x, &mut y)?;
    let h = p * SHARD;
    let want: Vec<f32> = unshard(x.data(), p)
        .chunks(h)
        .flat_map(golden_row)
        .collect();
    eagle_runner::check_bits("y", &unshard(y.data(), p), &want)
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 23,
    name: "sharded_softmax",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
