//! Expert-parallel MoE dispatch and combine. Each rank holds `T` tokens of dimension `D` and
//! a top-`TOPK` routing table over `E = EPR * P` experts, `EPR` per rank (expert `e` lives on
//! rank `e / EPR`, as its local expert `e % EPR`). One launch:
//!
//! 1. **histogram**: each rank counts its (token, k) pairs per expert;
//! 2. **count exchange**: the built-in `allgather` gives every rank the `[P, E]` count matrix;
//! 3. **offsets**: the exclusive prefix sum over the source ranks gives each rank the first
//!    slot of each expert it may fill; slots are taken in (source rank, token, k) order;
//! 4. **dispatch**: each token row goes to its experts' ranks with `remote_store`, then each
//!    rank notifies a per-source signal on every rank;
//! 5. **expert FFN**: once every source has signalled, each rank runs
//!    `relu(x W1_e) W2_e` on the rows each of its experts received;
//! 6. **combine**: each rank pulls its tokens' expert outputs back with `remote_load` (after
//!    the expert rank's per-rank "done" signal) and sums `gate[t][k] * y_k` in `k` order.
//!
//! **Capacity.** Each expert takes at most `CAP` rows (`capacity`). A (token, k) pair whose slot
//! is `CAP` or more is **dropped**: nothing is sent, its slot is recorded as `-1`, and it adds
//! nothing to the combine (a token with both pairs dropped comes back as `+0.0`). Which pairs
//! drop is fixed by the slot order above: deterministic, independent of timing and platform. `--mode capacity` (default) uses `CAP = 40` (1.25x the mean load `2T`/`EPR`
//! = 32, so some pairs drop); `--mode dropless` uses `CAP = P * T` (an expert can take every
//! token of every rank).
//!
//! Inputs are checked before anything runs ([`check_inputs`]): a routing table naming an
//! expert that does not exist, or a token naming one expert twice, and a capacity of 0 or
//! above `P * T` are [`eagle::Error::Input`] naming the argument and the fix.
//!
//! Orders (the golden's): each FFN product accumulates every element from `+0.0` over ascending
//! `k` (`matmul_acc` from `zeros`), rows are independent, and the combine adds in `k` order from
//! `+0.0`. Data flow, bytes and synchronisation: `docs/apps/moe_dispatch_combine.md`.
//!
//! `cargo run --example moe_dispatch_combine -- -d 0,1,2,3 --mode capacity`
use eagle::prelude::*;

/// Tokens per rank.
pub const T: usize = 64;
/// Token (model) dimension.
pub const D: usize = 128;
/// Hidden size of each expert's FFN.
pub const H: usize = 128;
/// Experts per token (top-k).
pub const TOPK: usize = 2;
/// Experts per rank.
pub const EPR: usize = 4;
/// Column block of the expert FFN's products.
pub const B: usize = 64;
/// Rows per block of the expert FFN (the rest of an expert's rows go one at a time).
pub const RB: usize = 8;
/// The capacity of `--mode capacity`: rows per expert.
pub const CAPACITY: usize = 40;
const NR: Dim = dynamic!("NR");
const CAP: Dim = dynamic!("CAP");

/// Defines the compute kernel `$name`: the FFN `relu(x W1_le) W2_le` of `$rows` rows of
/// `xin` starting at `row`, for local expert `le`, into the same rows of `yout`. One source for
/// the row blocks and the single rows.
macro_rules! expert_rows {
    ($name:ident, $rows:expr) => {
        /// `yout[row..row + rows] = relu(xin[row..] W1_le) W2_le`; every element of each
        /// product accumulated from `+0.0` over ascending `k`.
        #[eagle::kernel]
        pub fn $name(
            xin: Window<f32, { EPR * CAP + RB }, D>,
            w1: Tensor<f32, { EPR * D }, H>,
            w2: Tensor<f32, { EPR * H }, D>,
            yout: Window<f32, { EPR * CAP + RB }, D>,
            row: usize,
            le: usize,
        ) {
            // `B` hidden columns at a time (the weight tiles fit a GPU block's shared
            // memory); each element still sums over ascending `k` from `+0.0`.
            let mut y = zeros([$rows, D], f32);
            for j in 0..H / B {
                let mut h = zeros([$rows, B], f32);
                for k in 0..D / B {
                    let w = load(w1, [le * D + k * B, j * B], [B, B]);
                    h = matmul_acc(h, load(xin, [row, k * B], [$rows, B]), w);
                }
                let w = load(w2, [le * H + j * B, 0], [B, D]);
                y = matmul_acc(y, max(h, 0.0), w);
            }
            store(yout, [row, 0], y);
        }
    };
}
expert_rows!(expert_block, RB);
expert_rows!(expert_row, 1);

/// Per-device program: histogram, count exchange, offsets, dispatch, expert FFN, combine.
#[eagle::kernel(device)]
pub fn moe_rank(
    ctx: Ctx,
    x: Tensor<f32, T, D>,
    route: Tensor<i32, T, TOPK>,
    gate: Tensor<f32, T, TOPK>,
    w1: Tensor<f32, { EPR * D }, H>,
    w2: Tensor<f32, { EPR * H }, D>,
    counts: Out<Tensor<i32, NR, { EPR * NR }>>,
    slot: Out<Tensor<i32, T, TOPK>>,
    kept: Out<Tensor<i32, 1, EPR>>,
    dispatched: Out<Tensor<f32, { EPR * CAP }, D>>,
    y: Out<Tensor<f32, T, D>>,
    mine: Window<i32, NR, { EPR * NR }>,
    all: Window<i32, NR, { EPR * NR }>,
    recv: Window<f32, { EPR * CAP + RB }, D>,
    eout: Window<f32, { EPR * CAP + RB }, D>,
    sent: Window<i32, NR, 1>,
    done: Window<i32, NR, 1>,
    ffn: bool,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let experts = EPR * n;
    // 1. Histogram: my (token, k) pairs per expert, each pair added at its expert.
    let picks = reshape(load(route, [0, 0], [T, TOPK]), [1, T * TOPK]);
    let ones = full([1, T * TOPK], 1i32);
    store(
        mine,
        [me, 0],
        scatter_add(zeros([1, EPR * NR], i32), picks, ones, 1),
    );
    // 2. Every rank's counts.
    allgather(ctx, mine, all);
    get(counts, me, all);
    // 3. My first slot at each expert: the pairs the lower ranks send it.
    let mut cursor = [0i32; { EPR * NR }];
    for e in 0..experts {
        let mut base: i32 = 0;
        for s in 0..me {
            base += all[s][e];
        }
        cursor[e] = base;
    }
    // 4. Dispatch, in (token, k) order; a pair past the capacity is dropped.
    for t in 0..T {
        for k in 0..TOPK {
            let e = route[t][k] as usize;
            let p = cursor[e];
            cursor[e] = p + 1;
            if p < CAP as i32 {
                let row = (e % EPR) * CAP + p as usize;
                remote_store(recv, e / EPR, [row, 0], load(x, [t, 0], [1, D]));
                slot[t][k] = p;
            } else {
                slot[t][k] = -1;
            }
        }
    }
    // Everything I send is out (release): tell every rank.
    for i in 0..n {
        notify(sent, (me + i) % n, [me, 0], 1, Set);
    }
    for s in 0..n {
        wait(sent, [s, 0], 1, Eq);
    }
    get(dispatched, me, subview(recv, 0, EPR * CAP));
    // 5. The FFN of each local expert over the rows it took.
    for le in 0..EPR {
        let mut total: i32 = 0;
        for s in 0..n {
            total += all[s][me * EPR + le];
        }
        let rows = min(total, CAP as i32) as usize;
        kept[0][le] = rows as i32;
        if ffn {
            for b in 0..rows / RB {
                expert_block(recv, w1, w2, eout, le * CAP + b * RB, le);
            }
            for i in rows / RB * RB..rows {
                expert_row(recv, w1, w2, eout, le * CAP + i, le);
            }
        } else {
            // The routing alone (`benches/apps.rs`): each expert returns its input.
            for i in 0..rows {
                let at = le * CAP + i;
                store(eout, [at, 0], load(recv, [at, 0], [1, D]));
            }
        }
    }
    for i in 0..n {
        notify(done, (me + i) % n, [me, 0], 1, Set);
    }
    // 6. Combine: each kept pair's expert output, weighted, in k order.
    for t in 0..T {
        let mut acc = zeros([1, D], f32);
        for k in 0..TOPK {
            let p = slot[t][k];
            if p >= 0 {
                let e = route[t][k] as usize;
                let q = e / EPR;
                wait(done, [q, 0], 1, Eq);
                let v = remote_load(eout, q, [(e % EPR) * CAP + p as usize, 0], [1, D]);
                acc = acc + v * gate[t][k];
            }
        }
        store(y, [t, 0], acc);
    }
    // No rank leaves (and frees `eout`) while a peer may still read it.
    barrier(ctx);
}

/// Host: rank `r` takes its tokens, routing table and gates, and the weights of experts
/// `r * EPR ..` (`w1[r]`: `[EPR * D, H]`, `w2[r]`: `[EPR * H, D]`, expert after expert).
/// `ffn = false` replaces the expert FFN by a copy of its input (to time the routing alone).
#[eagle::host]
pub fn moe_dispatch_combine(
    x: Tensor<f32, NR, T, D>,
    route: Tensor<i32, NR, T, TOPK>,
    gate: Tensor<f32, NR, T, TOPK>,
    w1: Tensor<f32, NR, { EPR * D }, H>,
    w2: Tensor<f32, NR, { EPR * H }, D>,
    counts: Out<Tensor<i32, NR, NR, { EPR * NR }>>,
    slot: Out<Tensor<i32, NR, T, TOPK>>,
    kept: Out<Tensor<i32, NR, 1, EPR>>,
    dispatched: Out<Tensor<f32, NR, { EPR * CAP }, D>>,
    y: Out<Tensor<f32, NR, T, D>>,
    ffn: bool,
) {
    let mine = alloc_window_buffer([NR, EPR * NR], i32);
    let all = alloc_window_buffer([NR, EPR * NR], i32);
    // `RB` rows beyond the experts' so that the row-block kernel compiles at any capacity
    // (a block only runs where an expert has `RB` rows).
    let recv = alloc_window_buffer([EPR * CAP + RB, D], f32);
    let eout = alloc_window_buffer([EPR * CAP + RB, D], f32);
    let sent = alloc_window_buffer([NR, 1], i32);
    let done = alloc_window_buffer([NR, 1], i32);
    for r in 0..world_size() {
        moe_rank(
            x[r],
            route[r],
            gate[r],
            w1[r],
            w2[r],
            counts[r],
            slot[r],
            kept[r],
            dispatched[r],
            y[r],
            window(mine, [NR, EPR * NR], i32),
            window(all, [NR, EPR * NR], i32),
            window(recv, [EPR * CAP + RB, D], f32),
            window(eout, [EPR * CAP + RB, D], f32),
            window(sent, [NR, 1], i32),
            window(done, [NR, 1], i32),
            ffn,
            device = r,
        );
    }
}

/// The inputs of one launch at world size `p` (leading dim `p` on every tensor).
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Tokens, `[P, T, D]` f32.
    pub x: Tensor<f32>,
    /// Routing table, `[P, T, TOPK]` i32: the experts of each token, distinct, in `0..EPR * P`.
    pub route: Tensor<i32>,
    /// Routing weights, `[P, T, TOPK]` f32.
    pub gate: Tensor<f32>,
    /// First FFN weights, `[P, EPR * D, H]` f32 (rank `r`'s experts, expert after expert).
    pub w1: Tensor<f32>,
    /// Second FFN weights, `[P, EPR * H, D]` f32.
    pub w2: Tensor<f32>,
}

impl Inputs {
    /// Seeded inputs at world size `p`: each token picks two distinct experts uniformly.
    pub fn random(p: usize, seed: u64) -> Inputs {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let experts = EPR * p;
        let mut route = Vec::with_capacity(p * T * TOPK);
        for _ in 0..p * T {
            let a = rng.gen_range(0..experts);
            let b = (a + rng.gen_range(1..experts.max(2))) % experts;
            route.extend([a as i32, b as i32]);
        }
        let scale = |t: Tensor<f32>, s: f32| {
            let shape = t.shape().to_vec();
            Tensor::from_vec(&shape, t.data().iter().map(|v| v * s).collect()).expect("same shape")
        };
        Inputs {
            x: eagle_runner::random_tensor(&[p, T, D], seed + 1),
            route: Tensor::from_vec(&[p, T, TOPK], route).expect("P * T * TOPK elements"),
            gate: eagle_runner::random_tensor(&[p, T, TOPK], seed + 2),
            // Scaled like an initialised layer (1/sqrt(fan-in)), so activations stay O(1).
            w1: scale(
                eagle_runner::random_tensor(&[p, EPR * D, H], seed + 3),
                0.09,
            ),
            w2: scale(
                eagle_runner::random_tensor(&[p, EPR * H, D], seed + 4),
                0.09,
            ),
        }
    }
}

/// What one launch returns (leading dim `P` on every tensor).
#[derive(Debug, Clone, PartialEq)]
pub struct Outputs {
    /// `[P, P, E]` i32: on every rank, row `s` is rank `s`'s histogram (pairs per expert).
    pub counts: Vec<i32>,
    /// `[P, T, TOPK]` i32: the slot each (token, k) pair took at its expert, `-1` if dropped.
    pub slot: Vec<i32>,
    /// `[P, 1, EPR]` i32: the rows each local expert took (`min(received, capacity)`).
    pub kept: Vec<i32>,
    /// `[P, EPR * capacity, D]` f32: the token rows each rank's experts received, zero where
    /// no row landed.
    pub dispatched: Vec<f32>,
    /// `[P, T, D]` f32: the combined outputs.
    pub y: Vec<f32>,
}

/// Checks the inputs before anything runs.
///
/// # Errors
/// [`eagle::Error::Input`] for a capacity of 0 or above `P * T` (more rows than an expert can
/// receive), a routing table of another shape, a routing entry outside `0..EPR * P`, or a
/// token naming one expert twice, naming the argument, the element and the fix.
pub fn check_inputs(p: usize, route: &Tensor<i32>, capacity: usize) -> eagle::Result<()> {
    if capacity == 0 {
        return Err(eagle::Error::Input(format!(
            "argument `capacity`: 0 rows per expert would drop every token; give at least 1 (here the mean load is {} rows per expert, e.g. `capacity = {CAPACITY}`)",
            T * TOPK / EPR
        )));
    }
    if capacity > p * T {
        return Err(eagle::Error::Input(format!(
            "argument `capacity`: {capacity} rows per expert is more than an expert can receive at P = {p} (each of the {} tokens names it at most once); give at most {}, which already drops nothing",
            p * T,
            p * T
        )));
    }
    let experts = EPR * p;
    if route.shape() != [p, T, TOPK] {
        return Err(eagle::Error::Input(format!(
            "argument `route`: expected shape [{p}, {T}, {TOPK}] (ranks, tokens, top-k), found {:?}",
            route.shape()
        )));
    }
    for (i, pair) in route.data().chunks(TOPK).enumerate() {
        let (r, t) = (i / T, i % T);
        for (k, &e) in pair.iter().enumerate() {
            if e < 0 || e as usize >= experts {
                return Err(eagle::Error::Input(format!(
                    "argument `route`: route[{r}][{t}][{k}] = {e} names no expert: at P = {p} there are {experts} experts ({EPR} per rank), 0 to {}; route each token to experts in that range",
                    experts - 1
                )));
            }
            if pair[..k].contains(&e) {
                return Err(eagle::Error::Input(format!(
                    "argument `route`: token {t} of rank {r} names expert {e} twice (route[{r}][{t}] = {pair:?}); the top-{TOPK} experts of a token must be distinct"
                )));
            }
        }
    }
    Ok(())
}

/// The output tensors of a launch (leading dim `P`), reused across launches.
#[derive(Debug, Clone)]
pub struct Buffers {
    counts: Tensor<i32>,
    slot: Tensor<i32>,
    kept: Tensor<i32>,
    dispatched: Tensor<f32>,
    y: Tensor<f32>,
}

impl Buffers {
    /// Zeroed outputs for world size `p` and `capacity` rows per expert.
    pub fn new(p: usize, capacity: usize) -> Buffers {
        Buffers {
            counts: Tensor::zeros(&[p, p, EPR * p]),
            slot: Tensor::zeros(&[p, T, TOPK]),
            kept: Tensor::zeros(&[p, 1, EPR]),
            dispatched: Tensor::zeros(&[p, EPR * capacity, D]),
            y: Tensor::zeros(&[p, T, D]),
        }
    }

    /// One launch into these buffers, with the expert FFN (`ffn`) or a copy in its place.
    /// The inputs are not checked: call [`check_inputs`] first ([`moe`] does).
    ///
    /// # Errors
    /// The launch's errors.
    pub fn launch(&mut self, s: &Session, inp: &Inputs, ffn: bool) -> eagle::Result<()> {
        moe_dispatch_combine.launch(
            s,
            &inp.x,
            &inp.route,
            &inp.gate,
            &inp.w1,
            &inp.w2,
            &mut self.counts,
            &mut self.slot,
            &mut self.kept,
            &mut self.dispatched,
            &mut self.y,
            ffn,
        )?;
        Ok(())
    }

    /// The outputs, copied out.
    pub fn outputs(&self) -> Outputs {
        Outputs {
            counts: self.counts.data().to_vec(),
            slot: self.slot.data().to_vec(),
            kept: self.kept.data().to_vec(),
            dispatched: self.dispatched.data().to_vec(),
            y: self.y.data().to_vec(),
        }
    }
}

/// Checks the inputs, then runs one dispatch + FFN + combine with `capacity` rows per expert.
///
/// # Errors
/// [`check_inputs`]'s errors, before anything runs; then the launch's.
pub fn moe(s: &Session, inp: &Inputs, capacity: usize) -> eagle::Result<Outputs> {
    check_inputs(s.world_size(), &inp.route, capacity)?;
    let mut out = Buffers::new(s.world_size(), capacity);
    out.launch(s, inp, true)?;
    Ok(out.outputs())
}

/// The golden, in plain Rust, in the program's documented orders.
pub fn golden(p: usize, inp: &Inputs, capacity: usize) -> Outputs {
    let experts = EPR * p;
    let route = inp.route.data();
    let gate = inp.gate.data();
    let x = inp.x.data();
    let hist: Vec<i32> = (0..p)
        .flat_map(|r| {
            (0..experts).map(move |e| {
                route[r * T * TOPK..(r + 1) * T * TOPK]
                    .iter()
                    .filter(|&&v| v as usize == e)
                    .count() as i32
            })
        })
        .collect();
    let counts: Vec<i32> = (0..p).flat_map(|_| hist.iter().copied()).collect();
    // Slots in (source rank, token, k) order.
    let mut next = vec![0usize; experts];
    let mut slot = vec![-1i32; p * T * TOPK];
    let mut dispatched = vec![0.0f32; p * EPR * capacity * D];
    for (i, &e) in route.iter().enumerate() {
        let e = e as usize;
        let s = next[e];
        next[e] += 1;
        if s < capacity {
            slot[i] = s as i32;
            let (r, t) = (i / (T * TOPK), i / TOPK % T);
            let at = (e * capacity + s) * D;
            dispatched[at..at + D].copy_from_slice(&x[(r * T + t) * D..(r * T + t + 1) * D]);
        }
    }
    let kept: Vec<i32> = (0..experts).map(|e| next[e].min(capacity) as i32).collect();
    // The FFN of every row an expert took.
    let matmul = |a: &[f32], b: &[f32], k: usize, n: usize| -> Vec<f32> {
        (0..n)
            .map(|j| {
                let mut acc = 0.0f32;
                for (kk, av) in a.iter().enumerate().take(k) {
                    acc += av * b[kk * n + j];
                }
                acc
            })
            .collect()
    };
    let mut eout = vec![0.0f32; dispatched.len()];
    // Expert `e`'s weights and rows: `e = q * EPR + le` in rank `q`'s tensors, in order.
    for (e, &rows) in kept.iter().enumerate() {
        let w1 = &inp.w1.data()[e * D * H..(e + 1) * D * H];
        let w2 = &inp.w2.data()[e * H * D..(e + 1) * H * D];
        for s in 0..rows as usize {
            let at = (e * capacity + s) * D;
            let h: Vec<f32> = matmul(&dispatched[at..at + D], w1, D, H)
                .into_iter()
                .map(|v| if v.is_nan() || v > 0.0 { v } else { 0.0 })
                .collect();
            eout[at..at + D].copy_from_slice(&matmul(&h, w2, H, D));
        }
    }
    let mut y = vec![0.0f32; p * T * D];
    for i in 0..p * T {
        let out = &mut y[i * D..(i + 1) * D];
        for k in 0..TOPK {
            let (e, s) = (route[i * TOPK + k] as usize, slot[i * TOPK + k]);
            if s >= 0 {
                let at = (e * capacity + s as usize) * D;
                for (o, v) in out.iter_mut().zip(&eout[at..at + D]) {
                    *o += v * gate[i * TOPK + k];
                }
            }
        }
    }
    Outputs {
        counts,
        slot,
        kept,
        dispatched,
        y,
    }
}

/// Compares every output with the golden: the counts, slots and kept rows exactly, the rows
/// and the outputs bit for bit.
///
/// # Errors
/// [`eagle::Error::Check`] naming the first output and element that differ.
pub fn check(got: &Outputs, want: &Outputs) -> eagle::Result<()> {
    for (what, g, w) in [
        ("counts", &got.counts, &want.counts),
        ("slot", &got.slot, &want.slot),
        ("kept", &got.kept, &want.kept),
    ] {
        if let Some(i) = (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)) {
            return Err(eagle::Error::Check(format!(
                "{what}[{i}] = {:?}, expected {:?}",
                g.get(i),
                w.get(i)
            )));
        }
    }
    eagle_runner::check_bits("dispatched", &got.dispatched, &want.dispatched)?;
    eagle_runner::check_bits("y", &got.y, &want.y)
}

/// The capacity a mode runs with at world size `p`.
pub fn capacity_of(mode: Option<&str>, p: usize) -> usize {
    if mode == Some("dropless") {
        p * T
    } else {
        CAPACITY
    }
}

/// Runs the mode on seeded inputs; every output must equal the golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let capacity = capacity_of(s.mode(), p);
    let inp = Inputs::random(p, 61);
    let got = moe(s, &inp, capacity)?;
    check(&got, &golden(p, &inp, capacity))
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 28,
    name: "moe_dispatch_combine",
    modes: &["capacity", "dropless"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
