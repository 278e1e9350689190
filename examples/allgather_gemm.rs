//! AllGather-GEMM: `C = allgather(A) x B`, `A` split by rows (rank `r` holds rows
//! `r * M ..` of `A`, `[M, K]`), `B` `[K, N]` on every rank, every rank computing all of `C`
//! (`[P * M, N]`).
//!
//! - `--mode overlap` (default): each rank puts its chunk into every rank's gather window and
//!   notifies a per-source signal; it then computes the GEMM of chunk `q` as soon as chunk
//!   `q`'s signal has arrived, its own chunk first and then `me - 1, me - 2, ...` (the order
//!   the chunks were pushed to it in), so compute on early chunks overlaps the transfer of
//!   later ones (Triton-distributed's AllGather-GEMM).
//! - `--mode bulk`: the built-in `allgather`, then the GEMM of every chunk.
//!
//! Both give the same bits: each chunk's GEMM is the same blocked `matmul_acc` (every element
//! from `+0.0` over ascending `k`), whatever the order the chunks are taken in. Data flow,
//! bytes and synchronisation: `docs/apps/allgather_gemm.md`.
//!
//! `cargo run --example allgather_gemm -- -d 0,1,2,3 --mode overlap`
use eagle::prelude::*;

/// Rows of `A` (and of `C`'s chunk) per rank in the runner's run; any multiple of `BT` works
/// (`M` is bound from `a`'s shape at launch, `benches/apps.rs` sweeps 64 to 1024).
pub const ROWS: usize = 64;
const M: Dim = dynamic!("M");
/// Inner dimension.
pub const K: usize = 128;
/// Columns of `B` and `C`.
pub const N: usize = 128;
/// Tile edge of the blocked GEMM.
pub const BT: usize = 64;
const NR: Dim = dynamic!("NR");

/// The GEMM of chunk `q` (rows `q * M ..` of `src`) into the same rows of `c`.
#[eagle::kernel]
pub fn gemm_chunk(
    src: Window<f32, { NR * M }, K>,
    b: Tensor<f32, K, N>,
    c: Out<Tensor<f32, { NR * M }, N>>,
    q: usize,
) {
    for m in 0..M / BT {
        let row = q * M + m * BT;
        for n in 0..N / BT {
            let mut acc = zeros([BT, BT], f32);
            for k in 0..K / BT {
                let at = load(src, [row, k * BT], [BT, BT]);
                acc = matmul_acc(acc, at, load(b, [k * BT, n * BT], [BT, BT]));
            }
            store(c, [row, n * BT], acc);
        }
    }
}

/// Per-device program, overlapped: put + notify per chunk, GEMM per chunk on its signal.
#[eagle::kernel(device)]
pub fn ag_gemm_overlap(
    ctx: Ctx,
    a: Tensor<f32, M, K>,
    b: Tensor<f32, K, N>,
    c: Out<Tensor<f32, { NR * M }, N>>,
    ag: Window<f32, { NR * M }, K>,
    sig: Window<i32, NR, 1>,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    // My chunk to every rank (myself first), each followed by its signal (release: the
    // chunk is visible before the signal).
    for i in 0..n {
        let peer = (me + i) % n;
        put(subview(ag, me * M, M), peer, a);
        notify(sig, peer, [me, 0], 1, Set);
    }
    // Rank q pushes to me at its step (me - q) mod n: take my chunk, then me - 1, me - 2, ...
    for i in 0..n {
        let q = (me + n - i) % n;
        wait(sig, [q, 0], 1, Eq);
        gemm_chunk(ag, b, c, q);
    }
}

/// Per-device program, bulk: the built-in allgather, then the GEMM of every chunk.
#[eagle::kernel(device)]
pub fn ag_gemm_bulk(
    ctx: Ctx,
    a: Tensor<f32, M, K>,
    b: Tensor<f32, K, N>,
    c: Out<Tensor<f32, { NR * M }, N>>,
    src: Window<f32, { NR * M }, K>,
    ag: Window<f32, { NR * M }, K>,
) {
    let me = rank(ctx);
    put(subview(src, me * M, M), me, a);
    allgather(ctx, src, ag);
    for q in 0..nranks(ctx) {
        gemm_chunk(ag, b, c, q);
    }
}

/// Host: rank `r` holds `a[r]`; `overlap` selects the per-device program.
#[eagle::host]
pub fn allgather_gemm(
    a: Tensor<f32, NR, M, K>,
    b: Tensor<f32, K, N>,
    c: Out<Tensor<f32, NR, { NR * M }, N>>,
    overlap: bool,
) {
    let src = alloc_window_buffer([NR * M, K], f32);
    let ag = alloc_window_buffer([NR * M, K], f32);
    let sig = alloc_window_buffer([NR, 1], i32);
    for r in 0..world_size() {
        if overlap {
            ag_gemm_overlap(
                a[r],
                b,
                c[r],
                window(ag, [NR * M, K], f32),
                window(sig, [NR, 1], i32),
                device = r,
            );
        } else {
            ag_gemm_bulk(
                a[r],
                b,
                c[r],
                window(src, [NR * M, K], f32),
                window(ag, [NR * M, K], f32),
                device = r,
            );
        }
    }
}

/// The golden: `C = A B` for the full `A` (`[rows, K]`), every element from `+0.0` over
/// ascending `k`.
pub fn golden(a: &[f32], b: &[f32], rows: usize) -> Vec<f32> {
    let mut c = vec![0.0f32; rows * N];
    for i in 0..rows {
        for j in 0..N {
            let mut acc = 0.0f32;
            for k in 0..K {
                acc += a[i * K + k] * b[k * N + j];
            }
            c[i * N + j] = acc;
        }
    }
    c
}

/// Runs the mode on seeded random inputs; every rank's `C` must equal the golden bit for bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let a = eagle_runner::random_tensor(&[p, ROWS, K], 41);
    let b = eagle_runner::random_tensor(&[K, N], 42);
    let mut c = Tensor::<f32>::zeros(&[p, p * ROWS, N]);
    allgather_gemm.launch(s, &a, &b, &mut c, s.mode() != Some("bulk"))?;
    let want = golden(a.data(), b.data(), p * ROWS);
    for r in 0..p {
        eagle_runner::check_bits(&format!("C on rank {r}"), c.row(r), &want)?;
    }
    Ok(())
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 26,
    name: "allgather_gemm",
    modes: &["overlap", "bulk"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
