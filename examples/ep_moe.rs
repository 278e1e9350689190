//! Expert-parallel MoE layer with the routing computed in the kernel and the token rows moved
//! by the built-in `all_to_all_v` (DeepEP's and PyPTO's dispatch/combine shape). Each rank
//! holds `T` tokens of dimension `D` and `EPR` experts; there are `E = EPR * P` experts,
//! expert `e` on rank `e / EPR` as its local expert `e % EPR`. One launch, on every rank:
//!
//! 1. **router**: `logits = x Wg` (`[T, E]`, `Wg` replicated), then `topk(logits, K)`: the `K`
//!    experts of each token (descending, ties to the lower index) and their logits `v`;
//! 2. **gates**: `softmax` over the `K` chosen logits, `exp(v - v[0]) / row_sum(...)`;
//! 3. **send layout**: each (token, k) pair gets a row of the send window, grouped by
//!    destination rank (rank order) and in (token, k) order within a rank: a count per
//!    destination (a local array), its exclusive prefix sum, one cursor per destination;
//! 4. **dispatch**: `all_to_all_v` of the rows, and of each row's local expert (`i32`), with
//!    the same counts: rank `d` receives its rows source after source, in rank order;
//! 5. **experts**: each received row, in arrival order, goes to its local expert; expert `le`
//!    takes its first `CAP` rows (the capacity) and computes `x * we[le]` (a diagonal expert:
//!    the data movement is the point here; `moe_dispatch_combine` has the FFN); a row past
//!    the capacity is **dropped** and comes back as zeros;
//! 6. **combine**: `all_to_all_v` back with the received counts (each row returns to the
//!    place it was sent from), then `y[t] = sum over k of gate[t][k] * row(t, k)` in `k` order
//!    from `+0.0`.
//!
//! Two sizes (`--mode`): `small` (default; `T = 16`, `D = 64`, top-2 of 4 experts per rank,
//! capacity 6, so some rows drop at every P) and `pypto`, the size of PyPTO's MoE system test
//! (`T = 128` tokens per rank, top-6, `D = 4,096`, 16 experts per rank, capacity 192).
//!
//! Orders (the golden's): each logit accumulates from `+0.0` over ascending `d` (blocked
//! `matmul_acc` from `zeros`), `exp` is eagle's, the gate sum is `row_sum`'s 8-lane order,
//! and the combine adds in `k` order from `+0.0`. The receive window holds every row that
//! could arrive (`P * T * K`), so no routing can overflow it. Data flow and bytes:
//! `docs/apps/ep_moe.md`.
//!
//! `cargo run --example ep_moe -- -d 0,1,2,3 --mode pypto`
use eagle::ir::MathFn;
use eagle::prelude::*;

const NR: Dim = dynamic!("NR");

/// Defines the per-device program `$dev` and the host `$host` with the sizes (`T`, `D`,
/// `EPR`, `K`, `TK = T * K`, `CAP`, `B`, `TB`) of the module that invokes it: one source for both
/// sizes.
macro_rules! ep_moe_program {
    ($dev:ident, $host:ident) => {
        /// Per-device program: router, top-k, gates, send layout, dispatch, experts, combine.
        #[eagle::kernel(device)]
        pub fn $dev(
            ctx: Ctx,
            x: Tensor<f32, T, D>,
            wg: Tensor<f32, D, { EPR * NR }>,
            we: Tensor<f32, EPR, D>,
            logits: Out<Tensor<f32, T, { EPR * NR }>>,
            gate: Out<Tensor<f32, T, K>>,
            expert: Out<Tensor<i64, T, K>>,
            kept: Out<Tensor<i32, 1, EPR>>,
            got: Out<Tensor<u64, NR>>,
            y: Out<Tensor<f32, T, D>>,
            send: Window<f32, TK, D>,
            smeta: Window<i32, TK>,
            sc: Window<u64, NR>,
            rx: Window<f32, { NR * TK }, D>,
            rmeta: Window<i32, { NR * TK }>,
            rc: Window<u64, NR>,
            back: Window<f32, TK, D>,
            bc: Window<u64, NR>,
        ) {
            let n = nranks(ctx);
            // 1. Router logits, `TB` tokens by `EPR` experts at a time (the tiles of one
            // product fit a GPU block's shared memory at any P).
            for tb in 0..T / TB {
                for q in 0..n {
                    let mut acc = zeros([TB, EPR], f32);
                    for j in 0..D / B {
                        acc = matmul_acc(
                            acc,
                            load(x, [tb * TB, j * B], [TB, B]),
                            load(wg, [j * B, q * EPR], [B, EPR]),
                        );
                    }
                    store(logits, [tb * TB, q * EPR], acc);
                }
            }
            // 2. Top-k and the gates, one token at a time (a row of `E` logits: the tiles fit a
            // GPU block's shared memory up to E = 6,144): softmax over the chosen logits
            // (column 0 is the largest).
            for t in 0..T {
                let (v, idx) = topk(load(logits, [t, 0], [1, EPR * NR]), K);
                let e = (v - extract(v, [0, 0], [1, 1])).exp();
                store(gate, [t, 0], e / row_sum(e));
                store(expert, [t, 0], idx);
            }
            // 3. Send layout: pairs per destination rank, their prefix sums, one cursor each.
            let mut count = [0u64; NR];
            for t in 0..T {
                for k in 0..K {
                    count[expert[t][k] as usize / EPR] += 1;
                }
            }
            let mut cursor = [0u64; NR];
            let mut start: u64 = 0;
            for d in 0..n {
                cursor[d] = start;
                start += count[d];
                sc[d] = count[d];
            }
            let mut pos = [0u64; TK];
            for t in 0..T {
                for k in 0..K {
                    let ex = expert[t][k] as usize;
                    let d = ex / EPR;
                    let p = cursor[d];
                    cursor[d] = p + 1;
                    pos[t * K + k] = p;
                    store(send, [p as usize, 0], load(x, [t, 0], [1, D]));
                    smeta[p as usize] = (ex % EPR) as i32;
                }
            }
            // 4. Dispatch: the rows and their local experts, with the same counts.
            all_to_all_v(ctx, send, sc, rx, rc);
            all_to_all_v(ctx, smeta, sc, rmeta, rc);
            // 5. Experts, in arrival order; each takes its first `CAP` rows, in place.
            let mut total: u64 = 0;
            for q in 0..n {
                total += rc[q];
                got[q] = rc[q];
            }
            let mut used = [0i32; EPR];
            for i in 0..total as usize {
                let le = rmeta[i] as usize;
                if used[le] < CAP as i32 {
                    used[le] += 1;
                    store(
                        rx,
                        [i, 0],
                        load(rx, [i, 0], [1, D]) * load(we, [le, 0], [1, D]),
                    );
                } else {
                    store(rx, [i, 0], zeros([1, D], f32));
                }
            }
            for le in 0..EPR {
                kept[0][le] = used[le];
            }
            // 6. Combine: every row back to where it was sent from, then the gated sum.
            all_to_all_v(ctx, rx, rc, back, bc);
            for t in 0..T {
                let mut acc = zeros([1, D], f32);
                for k in 0..K {
                    let row = load(back, [pos[t * K + k] as usize, 0], [1, D]);
                    acc = acc + row * gate[t][k];
                }
                store(y, [t, 0], acc);
            }
        }

        /// Host: rank `r` takes its tokens and its experts' weights; the router weights are
        /// the same on every rank.
        #[eagle::host]
        pub fn $host(
            x: Tensor<f32, NR, T, D>,
            wg: Tensor<f32, D, { EPR * NR }>,
            we: Tensor<f32, NR, EPR, D>,
            logits: Out<Tensor<f32, NR, T, { EPR * NR }>>,
            gate: Out<Tensor<f32, NR, T, K>>,
            expert: Out<Tensor<i64, NR, T, K>>,
            kept: Out<Tensor<i32, NR, 1, EPR>>,
            got: Out<Tensor<u64, NR, NR>>,
            y: Out<Tensor<f32, NR, T, D>>,
        ) {
            let send = alloc_window_buffer([TK, D], f32);
            let smeta = alloc_window_buffer([TK], i32);
            let sc = alloc_window_buffer([NR], u64);
            let rx = alloc_window_buffer([NR * TK, D], f32);
            let rmeta = alloc_window_buffer([NR * TK], i32);
            let rc = alloc_window_buffer([NR], u64);
            let back = alloc_window_buffer([TK, D], f32);
            let bc = alloc_window_buffer([NR], u64);
            for r in 0..world_size() {
                $dev(
                    x[r],
                    wg,
                    we[r],
                    logits[r],
                    gate[r],
                    expert[r],
                    kept[r],
                    got[r],
                    y[r],
                    window(send, [TK, D], f32),
                    window(smeta, [TK], i32),
                    window(sc, [NR], u64),
                    window(rx, [NR * TK, D], f32),
                    window(rmeta, [NR * TK], i32),
                    window(rc, [NR], u64),
                    window(back, [TK, D], f32),
                    window(bc, [NR], u64),
                    device = r,
                );
            }
        }
    };
}

/// The sizes of one configuration, as plain numbers (for the host side and the golden).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Tokens per rank.
    pub t: usize,
    /// Token (model) dimension.
    pub d: usize,
    /// Experts per rank.
    pub epr: usize,
    /// Experts per token (top-k).
    pub k: usize,
    /// Rows each expert takes (the capacity).
    pub cap: usize,
}

/// `--mode small`: a few tokens, and a capacity below the mean load so rows drop.
pub mod small {
    use super::*;
    /// Tokens per rank.
    pub const T: usize = 16;
    /// Token dimension.
    pub const D: usize = 64;
    /// Experts per rank.
    pub const EPR: usize = 4;
    /// Experts per token.
    pub const K: usize = 2;
    /// Pairs per rank.
    pub const TK: usize = T * K;
    /// Rows per expert (the mean load is `T * K / EPR` = 8).
    pub const CAP: usize = 6;
    /// Column block of the router product.
    pub const B: usize = 32;
    /// Token block of the router product.
    pub const TB: usize = 16;
    /// These sizes.
    pub const SIZE: Size = Size {
        t: T,
        d: D,
        epr: EPR,
        k: K,
        cap: CAP,
    };
    ep_moe_program!(ep_moe_small_rank, ep_moe_small);
}

/// `--mode pypto`: the size of PyPTO's MoE dispatch/combine system test.
pub mod pypto {
    use super::*;
    /// Tokens per rank.
    pub const T: usize = 128;
    /// Token dimension.
    pub const D: usize = 4096;
    /// Experts per rank.
    pub const EPR: usize = 16;
    /// Experts per token.
    pub const K: usize = 6;
    /// Pairs per rank.
    pub const TK: usize = T * K;
    /// Rows per expert (4x the mean load `T * K / EPR` = 48).
    pub const CAP: usize = 192;
    /// Column block of the router product.
    pub const B: usize = 64;
    /// Token block of the router product.
    pub const TB: usize = 32;
    /// These sizes.
    pub const SIZE: Size = Size {
        t: T,
        d: D,
        epr: EPR,
        k: K,
        cap: CAP,
    };
    ep_moe_program!(ep_moe_pypto_rank, ep_moe_pypto);
}

/// The inputs of one launch at world size `p`.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Tokens, `[P, T, D]` f32.
    pub x: Tensor<f32>,
    /// Router weights, `[D, E]` f32 (`E = EPR * P`), the same on every rank.
    pub wg: Tensor<f32>,
    /// Each rank's experts' weights, `[P, EPR, D]` f32 (expert `r * EPR + le` is row `le`).
    pub we: Tensor<f32>,
}

impl Inputs {
    /// Seeded inputs at world size `p`; the router weights are scaled by `1/sqrt(D)` so the
    /// logits are O(1).
    pub fn random(z: Size, p: usize, seed: u64) -> Inputs {
        let mut wg = eagle_runner::random_tensor(&[z.d, z.epr * p], seed + 1);
        let s = 1.0 / (z.d as f32).sqrt();
        wg.data_mut().iter_mut().for_each(|v| *v *= s);
        Inputs {
            x: eagle_runner::random_tensor(&[p, z.t, z.d], seed),
            wg,
            we: eagle_runner::random_tensor(&[p, z.epr, z.d], seed + 2),
        }
    }
}

/// What one launch returns (leading dim `P` on every tensor).
#[derive(Debug, Clone, PartialEq)]
pub struct Outputs {
    /// `[P, T, E]` f32: the router's logits.
    pub logits: Vec<f32>,
    /// `[P, T, K]` f32: each token's gates.
    pub gate: Vec<f32>,
    /// `[P, T, K]` i64: each token's experts, descending logit, ties to the lower index.
    pub expert: Vec<i64>,
    /// `[P, 1, EPR]` i32: the rows each local expert took (`min(received, CAP)`).
    pub kept: Vec<i32>,
    /// `[P, P]` u64: on rank `r`, row `q` is the number of rows rank `q` sent it.
    pub got: Vec<u64>,
    /// `[P, T, D]` f32: the layer's output.
    pub y: Vec<f32>,
}

/// Runs one launch of the program of size `z` (`small::SIZE` or `pypto::SIZE`).
///
/// # Errors
/// The launch's errors (shapes that do not fit the sizes, and every run-time error).
pub fn ep_moe(s: &Session, z: Size, inp: &Inputs) -> eagle::Result<Outputs> {
    let p = s.world_size();
    let mut logits = Tensor::<f32>::zeros(&[p, z.t, z.epr * p]);
    let mut gate = Tensor::<f32>::zeros(&[p, z.t, z.k]);
    let mut expert = Tensor::<i64>::zeros(&[p, z.t, z.k]);
    let mut kept = Tensor::<i32>::zeros(&[p, 1, z.epr]);
    let mut got = Tensor::<u64>::zeros(&[p, p]);
    let mut y = Tensor::<f32>::zeros(&[p, z.t, z.d]);
    let host = if z == pypto::SIZE {
        pypto::ep_moe_pypto.launch(
            s,
            &inp.x,
            &inp.wg,
            &inp.we,
            &mut logits,
            &mut gate,
            &mut expert,
            &mut kept,
            &mut got,
            &mut y,
        )
    } else {
        small::ep_moe_small.launch(
            s,
            &inp.x,
            &inp.wg,
            &inp.we,
            &mut logits,
            &mut gate,
            &mut expert,
            &mut kept,
            &mut got,
            &mut y,
        )
    };
    host?;
    Ok(Outputs {
        logits: logits.data().to_vec(),
        gate: gate.data().to_vec(),
        expert: expert.data().to_vec(),
        kept: kept.data().to_vec(),
        got: got.data().to_vec(),
        y: y.data().to_vec(),
    })
}

/// One rank's router in plain Rust: its logits (`[T * E]`) and the experts and gates of each
/// token (`[T * K]` each), appended to `out`.
fn route(z: Size, p: usize, x: &[f32], wg: &[f32], out: &mut Outputs) {
    let experts = z.epr * p;
    let (ids, gates) = (&mut out.expert, &mut out.gate);
    for t in 0..z.t {
        let row = &x[t * z.d..(t + 1) * z.d];
        let logits: Vec<f32> = (0..experts)
            .map(|e| {
                let mut acc = 0.0f32;
                for (j, xv) in row.iter().enumerate() {
                    acc += xv * wg[j * experts + e];
                }
                acc
            })
            .collect();
        out.logits.extend(&logits);
        // Descending, ties to the lower index (a stable sort by "greater first").
        let mut order: Vec<usize> = (0..experts).collect();
        order.sort_by(|&a, &b| {
            logits[b]
                .partial_cmp(&logits[a])
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        order.truncate(z.k);
        let top = logits[order[0]];
        let e: Vec<f32> = order
            .iter()
            .map(|&i| MathFn::Exp.eval_f32(&[logits[i] - top]))
            .collect();
        let sum = eagle_runner::golden::lane_sum(&e);
        ids.extend(order.iter().map(|&i| i as i64));
        gates.extend(e.iter().map(|v| v / sum));
    }
}

/// The golden, in plain Rust, in the program's documented orders.
pub fn golden(z: Size, p: usize, inp: &Inputs) -> Outputs {
    let (t, d, k) = (z.t, z.d, z.k);
    let x = inp.x.data();
    let mut out = Outputs {
        logits: Vec::new(),
        gate: Vec::new(),
        expert: Vec::new(),
        kept: vec![0; p * z.epr],
        got: vec![0; p * p],
        y: vec![0.0; p * t * d],
    };
    for r in 0..p {
        route(
            z,
            p,
            &x[r * t * d..(r + 1) * t * d],
            inp.wg.data(),
            &mut out,
        );
    }
    let (expert, gate) = (&out.expert, &out.gate);
    // Arrival order at rank `dst`: source after source, each in (token, k) order; expert `le`
    // of `dst` takes its first `CAP` rows.
    let (got, kept) = (&mut out.got, &mut out.kept);
    let mut taken = vec![false; p * t * k];
    for dst in 0..p {
        for src in 0..p {
            for pair in 0..t * k {
                let e = expert[src * t * k + pair] as usize;
                if e / z.epr == dst {
                    got[dst * p + src] += 1;
                    let used = &mut kept[dst * z.epr + e % z.epr];
                    if (*used as usize) < z.cap {
                        *used += 1;
                        taken[src * t * k + pair] = true;
                    }
                }
            }
        }
    }
    for r in 0..p {
        for tok in 0..t {
            let xrow = &x[(r * t + tok) * d..(r * t + tok + 1) * d];
            let y = &mut out.y[(r * t + tok) * d..(r * t + tok + 1) * d];
            for kk in 0..k {
                let i = (r * t + tok) * k + kk;
                let e = expert[i] as usize;
                let w = &inp.we.data()[e * d..(e + 1) * d];
                for j in 0..d {
                    let v = if taken[i] { xrow[j] * w[j] } else { 0.0 };
                    y[j] += v * gate[i];
                }
            }
        }
    }
    out
}

/// Compares every output with the golden: the experts, kept rows and counts exactly, the
/// logits, gates and outputs bit for bit.
///
/// # Errors
/// [`eagle::Error::Check`] naming the first output and element that differ.
pub fn check(got: &Outputs, want: &Outputs) -> eagle::Result<()> {
    let first = |what: &str, n: usize, same: &dyn Fn(usize) -> bool| -> eagle::Result<()> {
        match (0..n).find(|&i| !same(i)) {
            Some(i) => Err(eagle::Error::Check(format!("{what}[{i}] differs"))),
            None => Ok(()),
        }
    };
    first("expert", got.expert.len().max(want.expert.len()), &|i| {
        got.expert.get(i) == want.expert.get(i)
    })?;
    first("kept", got.kept.len().max(want.kept.len()), &|i| {
        got.kept.get(i) == want.kept.get(i)
    })?;
    eagle_runner::check_u64("got", &got.got, &want.got)?;
    eagle_runner::check_bits("logits", &got.logits, &want.logits)?;
    eagle_runner::check_bits("gate", &got.gate, &want.gate)?;
    eagle_runner::check_bits("y", &got.y, &want.y)
}

/// The sizes a mode runs with.
pub fn size_of(mode: Option<&str>) -> Size {
    if mode == Some("pypto") {
        pypto::SIZE
    } else {
        small::SIZE
    }
}

/// Runs the mode on seeded inputs; every output must equal the golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let z = size_of(s.mode());
    let inp = Inputs::random(z, p, 71);
    let got = ep_moe(s, z, &inp)?;
    check(&got, &golden(z, p, &inp))
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 30,
    name: "ep_moe",
    modes: &["small", "pypto"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
