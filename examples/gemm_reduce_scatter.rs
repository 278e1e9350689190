//! GEMM-ReduceScatter: `C = A x B` with the inner dimension split across ranks (rank `r`
//! holds columns `r * KP ..` of `A`, `[P * M, KP]`, and the same rows of `B`, `[KP, N]`); the
//! partial products are reduce-scattered so that rank `r` ends with rows `r * M ..` of `C`.
//!
//! - `--mode overlap` (default): each rank computes the partial of one row block at a time,
//!   starting with the block of the next rank, puts it into that rank's slot `[me]` and
//!   notifies a per-source signal, its own block last; a rank then waits for the P partials of
//!   its block and adds them in rank order. Sending each block as soon as it is computed
//!   overlaps the GEMM of later blocks with the transfer of earlier ones.
//! - `--mode bulk`: the whole partial product, then the built-in `reduce_scatter` (rank order).
//!
//! Both give the same bits: every partial is the same blocked `matmul_acc` (from `+0.0` over
//! ascending `k` of the rank's columns), and both add the P partials of a block in rank order
//! `((p_0 + p_1) + p_2) + ...`. Data flow: `docs/apps/gemm_reduce_scatter.md`.
//!
//! `cargo run --example gemm_reduce_scatter -- -d 0,1,2,3 --mode overlap`
use eagle::prelude::*;

/// Rows of `C` per rank in the runner's run; any multiple of `BT` works (`M` is bound from
/// `c`'s shape at launch, `benches/apps.rs` sweeps 64 to 1024).
pub const ROWS: usize = 64;
const M: Dim = dynamic!("M");
/// Columns of `A` (rows of `B`) per rank.
pub const KP: usize = 64;
/// Columns of `B` and `C`.
pub const N: usize = 128;
/// Tile edge of the blocked GEMM.
pub const BT: usize = 64;
const NR: Dim = dynamic!("NR");

/// The partial of row block `q`: rows `q * M ..` of `a` times `b`, into `out` at row `at`.
#[eagle::kernel]
pub fn partial_block(
    a: Tensor<f32, { NR * M }, KP>,
    b: Tensor<f32, KP, N>,
    out: Out<Tensor<f32, { NR * M }, N>>,
    q: usize,
    at: usize,
) {
    for m in 0..M / BT {
        for n in 0..N / BT {
            let mut acc = zeros([BT, BT], f32);
            for k in 0..KP / BT {
                let t = load(a, [q * M + m * BT, k * BT], [BT, BT]);
                acc = matmul_acc(acc, t, load(b, [k * BT, n * BT], [BT, BT]));
            }
            store(out, [at + m * BT, n * BT], acc);
        }
    }
}

/// Per-device program, overlapped: one block's partial at a time, put + notify to its owner.
#[eagle::kernel(device)]
pub fn gemm_rs_overlap(
    ctx: Ctx,
    a: Tensor<f32, { NR * M }, KP>,
    b: Tensor<f32, KP, N>,
    scratch: Out<Tensor<f32, { NR * M }, N>>,
    c: Out<Tensor<f32, M, N>>,
    slots: Window<f32, { NR * M }, N>,
    sig: Window<i32, NR, 1>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    // Blocks for the next ranks first, mine last; each into slot `me` of its owner.
    for i in 1..n + 1 {
        let q = (me + i) % n;
        partial_block(a, b, scratch, q, q * M);
        put(subview(slots, me * M, M), q, subview(scratch, q * M, M));
        notify(sig, q, [me, 0], 1, Set);
    }
    // My block: the P partials, added in rank order as each arrives (`BT` rows at a time).
    wait(sig, [0, 0], 1, Eq);
    get(c, me, subview(slots, 0, M));
    for s in 1..n {
        wait(sig, [s, 0], 1, Eq);
        for m in 0..M / BT {
            let sum = load(c, [m * BT, 0], [BT, N]) + load(slots, [s * M + m * BT, 0], [BT, N]);
            store(c, [m * BT, 0], sum);
        }
    }
}

/// Per-device program, bulk: the whole partial product, then the built-in reduce-scatter.
#[eagle::kernel(device)]
pub fn gemm_rs_bulk(
    ctx: Ctx,
    a: Tensor<f32, { NR * M }, KP>,
    b: Tensor<f32, KP, N>,
    scratch: Out<Tensor<f32, { NR * M }, N>>,
    c: Out<Tensor<f32, M, N>>,
    src: Window<f32, { NR * M }, N>,
    dst: Window<f32, { NR * M }, N>,
) {
    let me = rank(ctx);
    for q in 0..nranks(ctx) {
        partial_block(a, b, scratch, q, q * M);
    }
    put(src, me, scratch);
    reduce_scatter(ctx, src, dst, Sum);
    get(c, me, subview(dst, me * M, M));
}

/// Host: rank `r` holds `a[r]` (`[P * M, KP]`, its columns of `A`) and `b[r]` (`[KP, N]`).
#[eagle::host]
pub fn gemm_reduce_scatter(
    a: Tensor<f32, NR, { NR * M }, KP>,
    b: Tensor<f32, NR, KP, N>,
    scratch: Out<Tensor<f32, NR, { NR * M }, N>>,
    c: Out<Tensor<f32, NR, M, N>>,
    overlap: bool,
) {
    let slots = alloc_window_buffer([NR * M, N], f32);
    let other = alloc_window_buffer([NR * M, N], f32);
    let sig = alloc_window_buffer([NR, 1], i32);
    for r in 0..world_size() {
        if overlap {
            gemm_rs_overlap(
                a[r],
                b[r],
                scratch[r],
                c[r],
                window(slots, [NR * M, N], f32),
                window(sig, [NR, 1], i32),
                device = r,
            );
        } else {
            gemm_rs_bulk(
                a[r],
                b[r],
                scratch[r],
                c[r],
                window(slots, [NR * M, N], f32),
                window(other, [NR * M, N], f32),
                device = r,
            );
        }
    }
}

/// The golden: rows `r * M ..` of `C` for every rank `r`, `[P, M, N]`: the partial of rank
/// `s` (from `+0.0` over its `KP` columns in ascending order), added in rank order.
pub fn golden(a: &[f32], b: &[f32], p: usize) -> Vec<f32> {
    let rows = p * ROWS;
    let mut c = vec![0.0f32; rows * N];
    for s in 0..p {
        let (a_s, b_s) = (&a[s * rows * KP..][..rows * KP], &b[s * KP * N..][..KP * N]);
        for i in 0..rows {
            for j in 0..N {
                let mut acc = 0.0f32;
                for k in 0..KP {
                    acc += a_s[i * KP + k] * b_s[k * N + j];
                }
                c[i * N + j] = if s == 0 { acc } else { c[i * N + j] + acc };
            }
        }
    }
    c
}

/// Runs the mode on seeded random inputs; rank `r`'s `C` must equal rows `r * M ..` of the
/// golden bit for bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let a = eagle_runner::random_tensor(&[p, p * ROWS, KP], 51);
    let b = eagle_runner::random_tensor(&[p, KP, N], 52);
    let mut scratch = Tensor::<f32>::zeros(&[p, p * ROWS, N]);
    let mut c = Tensor::<f32>::zeros(&[p, ROWS, N]);
    gemm_reduce_scatter.launch(s, &a, &b, &mut scratch, &mut c, s.mode() != Some("bulk"))?;
    let want = golden(a.data(), b.data(), p);
    eagle_runner::check_bits("C", c.data(), &want)
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 27,
    name: "gemm_reduce_scatter",
    modes: &["overlap", "bulk"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
