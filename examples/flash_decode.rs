//! Distributed flash-decoding: attention of one new token over a KV cache split across ranks
//! along the sequence. Rank `r` holds positions `r * L .. (r + 1) * L` of the keys and values
//! of every head (`L` positions per rank, so the cache holds `S = L * P`); the query `q` is the
//! same on every rank. One launch, on every rank:
//!
//! 1. **partial**: for each head `h`, the scores `s = (q_h K_h^T) * scale` over the rank's
//!    `L` positions, their maximum `m`, `e = exp(s - m)`, `l = row_sum(e)` and the unnormalised
//!    output `o = e V_h` (`[1, DH]`);
//! 2. **exchange**: the `[1, W]` row `(o for every head, m for every head, l for every head)`
//!    is gathered into `[P, W]` on every rank (the built-in `allgather`, row form);
//! 3. **combine**, in rank order: `M = max_r m_r`, `w_r = exp(m_r - M)`,
//!    `l = sum_r l_r w_r` and `o = sum_r o_r w_r`, each from `+0.0` for `r = 0, 1, ...`;
//!    `out = o / l` and the log-sum-exp `lse = M + ln(l)`.
//!
//! Every rank ends with the same `out` (`[H, DH]`) and `lse` (`[H, 1]`). The result depends on
//! P (the sums are grouped by rank), but for a given P it is the same bits on every rank, every
//! run and every backend, and it equals the plain-Rust golden in these orders; against an
//! `f64` attention over the whole cache it is within a few ulps (`docs/apps/flash_decode.md`).
//!
//! `cargo run --example flash_decode -- -d 0,1,2,3`
use eagle::ir::MathFn;
use eagle::prelude::*;

/// Heads.
pub const H: usize = 8;
/// Head dimension.
pub const DH: usize = 64;
/// Cached positions per rank.
pub const L: usize = 128;
/// Width of a rank's partial row: `o` of every head, then `m`, then `l`.
pub const W: usize = H * DH + 2 * H;
/// The score scale, `1 / sqrt(DH)` (exact: 0.125).
pub const SCALE: f32 = 0.125;
const NR: Dim = dynamic!("NR");

/// Per-device program: the rank's partial attention, the allgather of the partials, the
/// log-sum-exp combine in rank order.
#[eagle::kernel(device)]
pub fn flash_decode_rank(
    ctx: Ctx,
    q: Tensor<f32, H, DH>,
    k: Tensor<f32, { H * L }, DH>,
    v: Tensor<f32, { H * L }, DH>,
    out: Out<Tensor<f32, H, DH>>,
    lse: Out<Tensor<f32, H, 1>>,
    part: Window<f32, 1, W>,
    all: Window<f32, NR, W>,
) {
    // 1. This rank's partial, head by head.
    for h in 0..H {
        let kh = load(k, [h * L, 0], [L, DH]);
        let s = matmul(load(q, [h, 0], [1, DH]), transpose(kh)) * SCALE;
        let m = row_max(s);
        let e = (s - m).exp();
        store(part, [0, h * DH], matmul(e, load(v, [h * L, 0], [L, DH])));
        store(part, [0, H * DH + h], m);
        store(part, [0, H * DH + H + h], row_sum(e));
    }
    // 2. Every rank's partial.
    allgather(ctx, part, all);
    // 3. The combine, in rank order.
    let n = nranks(ctx);
    for h in 0..H {
        let mut mx = load(all, [0, H * DH + h], [1, 1]);
        for r in 1..n {
            mx = max(mx, load(all, [r, H * DH + h], [1, 1]));
        }
        let mut l = zeros([1, 1], f32);
        let mut o = zeros([1, DH], f32);
        for r in 0..n {
            let w = (load(all, [r, H * DH + h], [1, 1]) - mx).exp();
            l = l + load(all, [r, H * DH + H + h], [1, 1]) * w;
            o = o + load(all, [r, h * DH], [1, DH]) * w;
        }
        store(out, [h, 0], o / l);
        store(lse, [h, 0], mx + l.ln());
    }
}

/// Host: rank `r` takes its share of the cache; the query is the same on every rank.
#[eagle::host]
pub fn flash_decode(
    q: Tensor<f32, H, DH>,
    k: Tensor<f32, NR, { H * L }, DH>,
    v: Tensor<f32, NR, { H * L }, DH>,
    out: Out<Tensor<f32, NR, H, DH>>,
    lse: Out<Tensor<f32, NR, H, 1>>,
) {
    let part = alloc_window_buffer([1, W], f32);
    let all = alloc_window_buffer([NR, W], f32);
    for r in 0..world_size() {
        flash_decode_rank(
            q,
            k[r],
            v[r],
            out[r],
            lse[r],
            window(part, [1, W], f32),
            window(all, [NR, W], f32),
            device = r,
        );
    }
}

/// The inputs of one launch at world size `p`.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The query, `[H, DH]` f32.
    pub q: Tensor<f32>,
    /// Keys, `[P, H * L, DH]` f32: rank `r`'s positions of head `h` are rows `h * L ..`.
    pub k: Tensor<f32>,
    /// Values, laid out as the keys.
    pub v: Tensor<f32>,
}

impl Inputs {
    /// Seeded inputs at world size `p` (the query scaled by 4 so the softmax is peaked).
    pub fn random(p: usize, seed: u64) -> Inputs {
        let mut q = eagle_runner::random_tensor(&[H, DH], seed);
        q.data_mut().iter_mut().for_each(|x| *x *= 4.0);
        Inputs {
            q,
            k: eagle_runner::random_tensor(&[p, H * L, DH], seed + 1),
            v: eagle_runner::random_tensor(&[p, H * L, DH], seed + 2),
        }
    }
}

/// One launch: every rank's `out` (`[P, H, DH]`) and `lse` (`[P, H, 1]`).
///
/// # Errors
/// The launch's errors (inputs whose shapes do not fit `H`, `L`, `DH` and P).
pub fn run_once(s: &Session, inp: &Inputs) -> eagle::Result<(Tensor<f32>, Tensor<f32>)> {
    let p = s.world_size();
    let mut out = Tensor::<f32>::zeros(&[p, H, DH]);
    let mut lse = Tensor::<f32>::zeros(&[p, H, 1]);
    flash_decode.launch(s, &inp.q, &inp.k, &inp.v, &mut out, &mut lse)?;
    Ok((out, lse))
}

/// The golden, in plain Rust, in the program's orders: `out` (`[H, DH]`) and `lse` (`[H]`).
pub fn golden(p: usize, inp: &Inputs) -> (Vec<f32>, Vec<f32>) {
    let (q, k, v) = (inp.q.data(), inp.k.data(), inp.v.data());
    let fmax = eagle::ir::eval::fmax_f32;
    let mut out = vec![0.0f32; H * DH];
    let mut lse = vec![0.0f32; H];
    for h in 0..H {
        let qh = &q[h * DH..(h + 1) * DH];
        // (m, l, o) of each rank.
        let parts: Vec<(f32, f32, Vec<f32>)> = (0..p)
            .map(|r| {
                let rows = |t: &[f32], i: usize| {
                    let at = ((r * H + h) * L + i) * DH;
                    t[at..at + DH].to_vec()
                };
                let s: Vec<f32> = (0..L)
                    .map(|i| {
                        let kr = rows(k, i);
                        let mut acc = -0.0f32;
                        for d in 0..DH {
                            acc += qh[d] * kr[d];
                        }
                        acc * SCALE
                    })
                    .collect();
                let m = s.iter().fold(f32::NEG_INFINITY, |a, &b| fmax(a, b));
                let e: Vec<f32> = s.iter().map(|&x| MathFn::Exp.eval_f32(&[x - m])).collect();
                let l = eagle_runner::golden::lane_sum(&e);
                let mut o = vec![-0.0f32; DH];
                for (i, ei) in e.iter().enumerate() {
                    for (oj, vj) in o.iter_mut().zip(rows(v, i)) {
                        *oj += ei * vj;
                    }
                }
                (m, l, o)
            })
            .collect();
        let mx = parts.iter().skip(1).fold(parts[0].0, |a, b| fmax(a, b.0));
        let (mut l, mut o) = (0.0f32, vec![0.0f32; DH]);
        for (m, lr, or) in &parts {
            let w = MathFn::Exp.eval_f32(&[m - mx]);
            l += lr * w;
            for (oj, x) in o.iter_mut().zip(or) {
                *oj += x * w;
            }
        }
        for (j, oj) in o.iter().enumerate() {
            out[h * DH + j] = oj / l;
        }
        lse[h] = mx + MathFn::Ln.eval_f32(&[l]);
    }
    (out, lse)
}

/// Attention of the query over the whole cache in `f64` (no split): the reference that
/// `docs/apps/flash_decode.md` measures the ulps against.
pub fn reference(p: usize, inp: &Inputs) -> Vec<f64> {
    let (q, k, v) = (inp.q.data(), inp.k.data(), inp.v.data());
    let mut out = vec![0.0f64; H * DH];
    for h in 0..H {
        let row = |t: &[f32], pos: usize, d: usize| {
            let (r, i) = (pos / L, pos % L);
            t[((r * H + h) * L + i) * DH + d] as f64
        };
        let s: Vec<f64> = (0..p * L)
            .map(|pos| {
                (0..DH)
                    .map(|d| q[h * DH + d] as f64 * row(k, pos, d))
                    .sum::<f64>()
                    * SCALE as f64
            })
            .collect();
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let l: f64 = e.iter().sum();
        for d in 0..DH {
            out[h * DH + d] = (0..p * L).map(|pos| e[pos] * row(v, pos, d)).sum::<f64>() / l;
        }
    }
    out
}

/// Runs one launch on seeded inputs and checks every rank's `out` and `lse` bit for bit
/// against the golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let inp = Inputs::random(p, 83);
    let (out, lse) = run_once(s, &inp)?;
    let (want_out, want_lse) = golden(p, &inp);
    for r in 0..p {
        eagle_runner::check_bits(
            &format!("out of rank {r}"),
            &out.data()[r * H * DH..(r + 1) * H * DH],
            &want_out,
        )?;
        eagle_runner::check_bits(
            &format!("lse of rank {r}"),
            &lse.data()[r * H..(r + 1) * H],
            &want_lse,
        )?;
    }
    Ok(())
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 31,
    name: "flash_decode",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
