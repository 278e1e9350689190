//! Ring attention (sequence parallelism): the sequence is split across the ranks, rank `r`
//! holding block `r` of the queries, keys and values (`BL` positions of `H` heads). Each rank
//! computes the attention of its queries over the whole sequence by passing the key/value
//! blocks around the ring, folding each block into an online softmax (a running maximum and
//! sum per query row, as flash attention does).
//!
//! - `--mode overlap` (default): rank `r` folds its own block first, then block `r - 1`,
//!   `r - 2`, ... as each arrives from rank `r - 1` (a `put` of the keys and values into its
//!   window and a signal per block). On arrival (and for its own block, before folding it) a
//!   rank forwards the block to rank `r + 1` unless that rank is where the block started, so
//!   each block's transfer runs while the receiving rank still computes the previous block.
//! - `--mode bulk`: every block gathered first (two in-place built-in `allgather`s), then the
//!   same folds in the same order.
//!
//! Both modes give the same bits: the order of the folds is fixed (rank `r`: blocks
//! `r, r - 1, ..., r + 1` mod P) and each fold is the same tile ops. Per block and head:
//! `s = (Q K_b^T) * scale`, `m' = max(m, row_max(s))`, `a = exp(m - m')`,
//! `p = exp(s - m')`, `l = l * a + row_sum(p)`, `o = o * a + p V_b`; the first block starts
//! from its own `m = row_max(s)`, `l = row_sum(p)`, `o = p V`. The output is `o / l`.
//! Non-causal (every query sees every position). Data flow: `docs/apps/ring_attention.md`.
//!
//! `cargo run --example ring_attention -- -d 0,1,2,3 --mode overlap`
use eagle::ir::MathFn;
use eagle::prelude::*;

/// Heads.
pub const H: usize = 2;
/// Head dimension.
pub const DH: usize = 32;
/// Positions per rank (the block length).
pub const BL: usize = 64;
/// Rows of one rank's block: every head's positions, head after head.
pub const HB: usize = H * BL;
/// The score scale, `1 / sqrt(DH)` rounded to `f32`.
pub const SCALE: f32 = 0.176_776_7;
const NR: Dim = dynamic!("NR");

/// Per-device program: the ring (or the gathers), and the online softmax of every block.
#[eagle::kernel(device)]
pub fn ring_attention_rank(
    ctx: Ctx,
    q: Tensor<f32, HB, DH>,
    k: Tensor<f32, HB, DH>,
    v: Tensor<f32, HB, DH>,
    out: Out<Tensor<f32, HB, DH>>,
    kbuf: Window<f32, { NR * HB }, DH>,
    vbuf: Window<f32, { NR * HB }, DH>,
    sig: Window<i32, NR, 1>,
    overlap: bool,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let next = (me + 1) % n;
    // My block into my own slot (block b lives at rows b * HB ..).
    put(subview(kbuf, me * HB, HB), me, k);
    put(subview(vbuf, me * HB, HB), me, v);
    if !overlap {
        allgather(ctx, kbuf, kbuf);
        allgather(ctx, vbuf, vbuf);
    }
    for h in 0..H {
        let qh = load(q, [h * BL, 0], [BL, DH]);
        // My own block: forwarded first (once, with the first head), then folded.
        if overlap && h == 0 && n > 1 {
            put(subview(kbuf, me * HB, HB), next, subview(kbuf, me * HB, HB));
            put(subview(vbuf, me * HB, HB), next, subview(vbuf, me * HB, HB));
            notify(sig, next, [me, 0], 1, Set);
        }
        let s0 = matmul(qh, transpose(load(kbuf, [me * HB + h * BL, 0], [BL, DH]))) * SCALE;
        let mut m = row_max(s0);
        let p0 = (s0 - m).exp();
        let mut l = row_sum(p0);
        let mut o = matmul(p0, load(vbuf, [me * HB + h * BL, 0], [BL, DH]));
        // Blocks me - 1, me - 2, ... as they arrive.
        for st in 1..n {
            let b = (me + n - st) % n;
            if overlap {
                wait(sig, [b, 0], 1, Eq);
                // Forward it unless the next rank is where it started.
                if h == 0 && st + 1 < n {
                    put(subview(kbuf, b * HB, HB), next, subview(kbuf, b * HB, HB));
                    put(subview(vbuf, b * HB, HB), next, subview(vbuf, b * HB, HB));
                    notify(sig, next, [b, 0], 1, Set);
                }
            }
            let s = matmul(qh, transpose(load(kbuf, [b * HB + h * BL, 0], [BL, DH]))) * SCALE;
            let m2 = max(m, row_max(s));
            let a = (m - m2).exp();
            let p = (s - m2).exp();
            l = l * a + row_sum(p);
            o = o * a + matmul(p, load(vbuf, [b * HB + h * BL, 0], [BL, DH]));
            m = m2;
        }
        store(out, [h * BL, 0], o / l);
    }
}

/// Host: rank `r` takes block `r` of the queries, keys and values.
#[eagle::host]
pub fn ring_attention(
    q: Tensor<f32, NR, HB, DH>,
    k: Tensor<f32, NR, HB, DH>,
    v: Tensor<f32, NR, HB, DH>,
    out: Out<Tensor<f32, NR, HB, DH>>,
    overlap: bool,
) {
    let kbuf = alloc_window_buffer([NR * HB, DH], f32);
    let vbuf = alloc_window_buffer([NR * HB, DH], f32);
    let sig = alloc_window_buffer([NR, 1], i32);
    for r in 0..world_size() {
        ring_attention_rank(
            q[r],
            k[r],
            v[r],
            out[r],
            window(kbuf, [NR * HB, DH], f32),
            window(vbuf, [NR * HB, DH], f32),
            window(sig, [NR, 1], i32),
            overlap,
            device = r,
        );
    }
}

/// The inputs of one launch at world size `p`: `[P, HB, DH]` each (the queries scaled by 2 so
/// the softmax is not flat).
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Queries.
    pub q: Tensor<f32>,
    /// Keys.
    pub k: Tensor<f32>,
    /// Values.
    pub v: Tensor<f32>,
}

impl Inputs {
    /// Seeded inputs at world size `p`.
    pub fn random(p: usize, seed: u64) -> Inputs {
        let mut q = eagle_runner::random_tensor(&[p, HB, DH], seed);
        q.data_mut().iter_mut().for_each(|x| *x *= 2.0);
        Inputs {
            q,
            k: eagle_runner::random_tensor(&[p, HB, DH], seed + 1),
            v: eagle_runner::random_tensor(&[p, HB, DH], seed + 2),
        }
    }
}

/// One launch: every rank's output, `[P, HB, DH]`.
///
/// # Errors
/// The launch's errors.
pub fn run_once(s: &Session, inp: &Inputs, overlap: bool) -> eagle::Result<Tensor<f32>> {
    let p = s.world_size();
    let mut out = Tensor::<f32>::zeros(&[p, HB, DH]);
    ring_attention.launch(s, &inp.q, &inp.k, &inp.v, &mut out, overlap)?;
    Ok(out)
}

/// `a [r, c] x b [c, n]` from `-0.0` over ascending `c` (`matmul`'s order).
fn matmul(a: &[f32], b: &[f32], r: usize, c: usize, n: usize) -> Vec<f32> {
    let mut out = vec![-0.0f32; r * n];
    for i in 0..r {
        for j in 0..n {
            let mut acc = -0.0f32;
            for x in 0..c {
                acc += a[i * c + x] * b[x * n + j];
            }
            out[i * n + j] = acc;
        }
    }
    out
}

/// The golden on one thread, in the documented order: every rank's output, `[P, HB, DH]`.
pub fn golden(p: usize, inp: &Inputs) -> Vec<f32> {
    let (q, k, v) = (inp.q.data(), inp.k.data(), inp.v.data());
    let exp = |x: f32| MathFn::Exp.eval_f32(&[x]);
    let fmax = eagle::ir::eval::fmax_f32;
    let head = |t: &[f32], b: usize, h: usize| t[(b * HB + h * BL) * DH..][..BL * DH].to_vec();
    let transpose =
        |t: &[f32]| -> Vec<f32> { (0..DH * BL).map(|e| t[(e % BL) * DH + e / BL]).collect() };
    let mut out = vec![0.0f32; p * HB * DH];
    for r in 0..p {
        for h in 0..H {
            let qh = head(q, r, h);
            let (mut m, mut l, mut o) = (vec![0.0f32; BL], vec![0.0f32; BL], vec![]);
            for st in 0..p {
                let b = (r + p - st) % p;
                let s: Vec<f32> = matmul(&qh, &transpose(&head(k, b, h)), BL, DH, BL)
                    .iter()
                    .map(|x| x * SCALE)
                    .collect();
                let mut pb = vec![0.0f32; BL * BL];
                let mut a = vec![0.0f32; BL];
                for i in 0..BL {
                    let row = &s[i * BL..(i + 1) * BL];
                    let rm = row.iter().skip(1).fold(row[0], |x, &y| fmax(x, y));
                    let m2 = if st == 0 { rm } else { fmax(m[i], rm) };
                    a[i] = exp(m[i] - m2);
                    for j in 0..BL {
                        pb[i * BL + j] = exp(row[j] - m2);
                    }
                    let rs = eagle_runner::golden::lane_sum(&pb[i * BL..(i + 1) * BL]);
                    l[i] = if st == 0 { rs } else { l[i] * a[i] + rs };
                    m[i] = m2;
                }
                let pv = matmul(&pb, &head(v, b, h), BL, BL, DH);
                o = if st == 0 {
                    pv
                } else {
                    (0..BL * DH).map(|e| o[e] * a[e / DH] + pv[e]).collect()
                };
            }
            let at = (r * HB + h * BL) * DH;
            for e in 0..BL * DH {
                out[at + e] = o[e] / l[e / DH];
            }
        }
    }
    out
}

/// Runs the mode on seeded inputs; every rank's output must equal the golden bit for bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let inp = Inputs::random(p, 97);
    let out = run_once(s, &inp, s.mode() != Some("bulk"))?;
    eagle_runner::check_bits("out", out.data(), &golden(p, &inp))
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 33,
    name: "ring_attention",
    modes: &["overlap", "bulk"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
