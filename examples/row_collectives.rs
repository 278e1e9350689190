//! PyPTO's collective forms (docs/collectives.md, issue 38 item 7): allgather of one row per
//! rank into an `[NR, M]` buffer, from a local `[1, M]` tensor pushed into the peers' windows
//! (`allgather_push`) or from a `[1, M]` window pulled by each rank (`allgather_pull`), and
//! reduce-scatter of an `[NR, M]` window into each rank's `[1, M]` row (`reduce_scatter_rows`);
//! and the variable-size all-to-all (`all_to_all_v`, issue 39 item 2): each rank sends each peer
//! a different number of rows, counts that change every launch; and a ring within the groups of
//! a split that is no grid's (`split_ring`, issue 39 item 1: colors `r % 2`, keys numbering
//! each group backwards, groups of different sizes at odd P).
//! Each mode runs its collective 50 times and checks every launch bit for bit against the host
//! golden; `.ci/run` runs every mode under `mpirun` (Open MPI and MPICH) and on `sim`.
//!
//! `cargo run --example row_collectives -- -d 0,1,2 --mode allgather_pull`
use eagle::prelude::*;

const NR: Dim = dynamic!("NR");
const M: Dim = dynamic!("M");

/// Launches per mode.
const LAUNCHES: usize = 50;

/// Pushes rank r's `[1, M]` row into row r of every peer's window, then copies the window out.
#[eagle::kernel(device)]
pub fn rows_ag_push(
    ctx: Ctx,
    x: Tensor<f32, 1, M>,
    w: Window<f32, NR, M>,
    y: Out<Tensor<f32, NR, M>>,
) {
    allgather(ctx, x, w);
    get(y, rank(ctx), w);
}

#[eagle::host]
pub fn rows_ag_push_host(x: Tensor<f32, NR, 1, M>, y: Out<Tensor<f32, NR, NR, M>>) {
    let b = alloc_window_buffer([NR, M], f32);
    for r in 0..world_size() {
        rows_ag_push(x[r], window(b, [NR, M], f32), y[r], device = r);
    }
}

/// Each rank pulls row q of its local `[NR, M]` result from rank q's `[1, M]` window.
#[eagle::kernel(device)]
pub fn rows_ag_pull(
    ctx: Ctx,
    x: Tensor<f32, 1, M>,
    s: Window<f32, 1, M>,
    y: Out<Tensor<f32, NR, M>>,
) {
    store(s, [0, 0], load(x, [0, 0], [1, M]));
    allgather(ctx, s, y);
}

#[eagle::host]
pub fn rows_ag_pull_host(x: Tensor<f32, NR, 1, M>, y: Out<Tensor<f32, NR, NR, M>>) {
    let b = alloc_window_buffer([1, M], f32);
    for r in 0..world_size() {
        rows_ag_pull(x[r], window(b, [1, M], f32), y[r], device = r);
    }
}

/// Rank r's `[1, M]` result is row r of every rank's `[NR, M]` window, summed in rank order.
#[eagle::kernel(device)]
pub fn rows_rs(ctx: Ctx, x: Tensor<f32, NR, M>, w: Window<f32, NR, M>, y: Out<Tensor<f32, 1, M>>) {
    put(w, rank(ctx), x);
    reduce_scatter(ctx, w, y, Sum);
}

#[eagle::host]
pub fn rows_rs_host(x: Tensor<f32, NR, NR, M>, y: Out<Tensor<f32, NR, 1, M>>) {
    let b = alloc_window_buffer([NR, M], f32);
    for r in 0..world_size() {
        rows_rs(x[r], window(b, [NR, M], f32), y[r], device = r);
    }
}

const S: Dim = dynamic!("S");
const CAP: Dim = dynamic!("CAP");

/// Rank r sends `counts[q]` rows of `x` to each rank q; `y` holds what arrives, in rank order.
#[eagle::kernel(device)]
pub fn rows_a2av(
    ctx: Ctx,
    x: Tensor<f32, S, M>,
    counts: Tensor<u64, NR>,
    w: Window<f32, S, M>,
    c: Window<u64, NR>,
    y: Out<Tensor<f32, CAP, M>>,
    got: Out<Tensor<u64, NR>>,
) {
    put(w, rank(ctx), x);
    put(c, rank(ctx), counts);
    all_to_all_v(ctx, w, c, y, got);
}

#[eagle::host]
pub fn rows_a2av_host(
    x: Tensor<f32, NR, S, M>,
    counts: Tensor<u64, NR, NR>,
    y: Out<Tensor<f32, NR, CAP, M>>,
    got: Out<Tensor<u64, NR, NR>>,
) {
    let b = alloc_window_buffer([S, M], f32);
    let c = alloc_window_buffer([NR], u64);
    for r in 0..world_size() {
        rows_a2av(
            x[r],
            counts[r],
            window(b, [S, M], f32),
            window(c, [NR], u64),
            y[r],
            got[r],
            device = r,
        );
    }
}

/// [`LAUNCHES`] all-to-all-v launches, the counts of launch `i` being `(q + 2r + i) % 4`
/// rows from rank q to rank r, each checked against the host golden (rows from each rank in
/// rank order, the rest of `y` untouched).
fn run_a2av(s: &Session, p: usize, m: usize) -> eagle::Result<()> {
    let (rows, cap) = (3 * p, 3 * p + 1);
    let x = eagle_runner::random_tensor(&[p, rows, m], 47);
    for i in 0..LAUNCHES {
        let count = |q: usize, r: usize| ((q + 2 * r + i) % 4) as u64;
        let counts: Vec<u64> = (0..p * p).map(|k| count(k / p, k % p)).collect();
        let mut want = vec![-1.0f32; p * cap * m];
        let mut want_got = vec![0u64; p * p];
        for r in 0..p {
            let mut at = r * cap * m;
            for q in 0..p {
                let n = count(q, r) as usize;
                let start: usize = (0..r).map(|t| count(q, t) as usize).sum();
                let from = (q * rows + start) * m;
                want[at..at + n * m].copy_from_slice(&x.data()[from..from + n * m]);
                at += n * m;
                want_got[r * p + q] = n as u64;
            }
        }
        let mut y = Tensor::from_vec(&[p, cap, m], vec![-1.0f32; p * cap * m]).unwrap();
        let mut got = Tensor::<u64>::zeros(&[p, p]);
        let counts = Tensor::from_vec(&[p, p], counts).unwrap();
        rows_a2av_host.launch(s, &x, &counts, &mut y, &mut got)?;
        eagle_runner::check_bits(&format!("all_to_all_v, launch {i}"), y.data(), &want)?;
        eagle_runner::check_u64(
            &format!("all_to_all_v receive counts, launch {i}"),
            got.data(),
            &want_got,
        )?;
    }
    Ok(())
}

/// Each rank puts its row into the window of the next rank of its group: the ranks of its
/// parity, numbered backwards (`MPI_Comm_split` with key `P - r`); then the group's barrier;
/// then a two-phase allreduce of the rows within the group.
#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn split_ring(
    ctx: Ctx,
    x: Tensor<f32, 1, M>,
    w: Window<f32, 1, M>,
    v: Window<f32, 1, M>,
    t: Window<f32, 1, M>,
    y: Out<Tensor<f32, 2, 1, M>>,
    ids: Out<Tensor<u64, 2>>,
) {
    let g = split(ctx, rank(ctx) % 2, nranks(ctx) - rank(ctx));
    put(w, world_rank(g, (rank(g) + 1) % nranks(g)), x);
    barrier(g);
    get(y[0], rank(ctx), w);
    put(v, rank(ctx), x);
    allreduce(g, v, t, Sum, TwoPhase);
    get(y[1], rank(ctx), t);
    ids[0] = rank(g) as u64;
    ids[1] = nranks(g) as u64;
}

#[eagle::host]
pub fn split_ring_host(
    x: Tensor<f32, NR, 1, M>,
    y: Out<Tensor<f32, NR, 2, 1, M>>,
    ids: Out<Tensor<u64, NR, 2>>,
) {
    let w = alloc_window_buffer([1, M], f32);
    let v = alloc_window_buffer([1, M], f32);
    let t = alloc_window_buffer([1, M], f32);
    for r in 0..world_size() {
        split_ring(
            x[r],
            window(w, [1, M], f32),
            window(v, [1, M], f32),
            window(t, [1, M], f32),
            y[r],
            ids[r],
            device = r,
        );
    }
}

/// [`LAUNCHES`] launches of [`split_ring_host`], each checked against the groups
/// `MPI_Comm_split` makes: rank r's group is the ranks of its parity in descending order, and
/// it receives the row of the rank before it there and the sum of the group's rows in that
/// order.
fn run_split_ring(s: &Session, p: usize, m: usize) -> eagle::Result<()> {
    let x = eagle_runner::random_tensor(&[p, 1, m], 53);
    let mut want = vec![0f32; p * 2 * m];
    let mut want_ids = vec![0u64; p * 2];
    let row = |w: usize| &x.data()[w * m..][..m];
    for r in 0..p {
        let members: Vec<usize> = (0..p).rev().filter(|w| w % 2 == r % 2).collect();
        let (n, q) = (
            members.len(),
            members.iter().position(|&w| w == r).unwrap_or(0),
        );
        let prev = members[(q + n - 1) % n];
        want[r * 2 * m..][..m].copy_from_slice(row(prev));
        for j in 0..m {
            let sum = members[1..]
                .iter()
                .fold(row(members[0])[j], |s, &w| s + row(w)[j]);
            want[(r * 2 + 1) * m + j] = sum;
        }
        want_ids[2 * r..][..2].copy_from_slice(&[q as u64, n as u64]);
    }
    for i in 0..LAUNCHES {
        let mut y = Tensor::<f32>::zeros(&[p, 2, 1, m]);
        let mut ids = Tensor::<u64>::zeros(&[p, 2]);
        split_ring_host.launch(s, &x, &mut y, &mut ids)?;
        eagle_runner::check_bits(&format!("split_ring, launch {i}"), y.data(), &want)?;
        eagle_runner::check_u64(
            &format!("split_ring ranks, launch {i}"),
            ids.data(),
            &want_ids,
        )?;
    }
    Ok(())
}

/// Runs the mode's collective [`LAUNCHES`] times and checks each launch.
pub fn run(s: &Session) -> eagle::Result<()> {
    let (p, m) = (s.world_size(), 5);
    let mode = s.mode().unwrap_or("allgather_push");
    if mode == "all_to_all_v" {
        return run_a2av(s, p, m);
    }
    if mode == "split_ring" {
        return run_split_ring(s, p, m);
    }
    if mode == "reduce_scatter_rows" {
        // Rank q contributes a [P, M] tensor; rank r gets the rank-order sum of row r.
        let x = eagle_runner::random_tensor(&[p, p, m], 41);
        let at = |q: usize, r: usize, j: usize| x.data()[(q * p + r) * m + j];
        let want: Vec<f32> = (0..p)
            .flat_map(|r| (0..m).map(move |j| (1..p).fold(at(0, r, j), |acc, q| acc + at(q, r, j))))
            .collect();
        for i in 0..LAUNCHES {
            let mut y = Tensor::<f32>::zeros(&[p, 1, m]);
            rows_rs_host.launch(s, &x, &mut y)?;
            eagle_runner::check_bits(&format!("{mode}, launch {i}"), y.data(), &want)?;
        }
        return Ok(());
    }
    // Every rank ends with all P rows, in rank order.
    let x = eagle_runner::random_tensor(&[p, 1, m], 43);
    let want: Vec<f32> = (0..p).flat_map(|_| x.data().to_vec()).collect();
    for i in 0..LAUNCHES {
        let mut y = Tensor::<f32>::zeros(&[p, p, m]);
        match mode {
            "allgather_push" => rows_ag_push_host.launch(s, &x, &mut y)?,
            _ => rows_ag_pull_host.launch(s, &x, &mut y)?,
        };
        eagle_runner::check_bits(&format!("{mode}, launch {i}"), y.data(), &want)?;
    }
    Ok(())
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 197,
    name: "row_collectives",
    modes: &[
        "allgather_push",
        "allgather_pull",
        "reduce_scatter_rows",
        "all_to_all_v",
        "split_ring",
    ],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
