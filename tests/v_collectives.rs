//! The variable-size collectives: `all_to_all_v` (rows of run-time counts per peer, MPI's
//! `MPI_Alltoallv`) and `allgather_v` (a run-time number of rows from each rank,
//! `MPI_Allgatherv`), at P = 1..8 on `sim` and in the CUDA emulation, against plain-Rust
//! goldens; a receive buffer too small for what arrives is an error before any row moves;
//! counts of the wrong length are refused before anything runs.
use eagle::prelude::*;
use rand::{Rng, SeedableRng};

#[cfg(feature = "cuda")]
mod emulation;

const NR: Dim = dynamic!("NR");
const S: Dim = dynamic!("S");
const CAP: Dim = dynamic!("CAP");
const D: usize = 3;

#[eagle::kernel(device)]
pub fn a2av_d(
    ctx: Ctx,
    x: Tensor<f32, S, D>,
    counts: Tensor<u64, NR>,
    y: Out<Tensor<f32, CAP, D>>,
    got: Out<Tensor<u64, NR>>,
    src: Window<f32, S, D>,
    sc: Window<u64, NR>,
) {
    put(src, rank(ctx), x);
    put(sc, rank(ctx), counts);
    all_to_all_v(ctx, src, sc, y, got);
}

#[eagle::host]
pub fn a2av(
    x: Tensor<f32, NR, S, D>,
    counts: Tensor<u64, NR, NR>,
    y: Out<Tensor<f32, NR, CAP, D>>,
    got: Out<Tensor<u64, NR, NR>>,
) {
    let s = alloc_window_buffer([S, D], f32);
    let c = alloc_window_buffer([NR], u64);
    for r in 0..world_size() {
        a2av_d(
            x[r],
            counts[r],
            y[r],
            got[r],
            window(s, [S, D], f32),
            window(c, [NR], u64),
            device = r,
        );
    }
}

/// Random counts (`counts[q][r]`: rows rank `q` sends rank `r`, 0 to 3), the send rows, and
/// the receive capacity that the fullest rank needs.
struct Case {
    p: usize,
    s: usize,
    counts: Vec<u64>,
    x: Vec<f32>,
    need: usize,
}

fn case(p: usize, seed: u64) -> Case {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let counts: Vec<u64> = (0..p * p).map(|_| rng.gen_range(0..4)).collect();
    let sent = |q: usize| counts[q * p..(q + 1) * p].iter().sum::<u64>() as usize;
    let recv = |r: usize| (0..p).map(|q| counts[q * p + r]).sum::<u64>() as usize;
    let s = (0..p).map(sent).max().unwrap_or(0).max(1);
    let need = (0..p).map(recv).max().unwrap_or(0).max(1);
    let x = (0..p * s * D).map(|i| i as f32 + 0.5).collect();
    Case {
        p,
        s,
        counts,
        x,
        need,
    }
}

fn run(sess: &Session, c: &Case, cap: usize) -> eagle::Result<(Tensor<f32>, Tensor<u64>)> {
    let p = c.p;
    let x = Tensor::from_vec(&[p, c.s, D], c.x.clone()).unwrap();
    let counts = Tensor::from_vec(&[p, p], c.counts.clone()).unwrap();
    let mut y = Tensor::from_vec(&[p, cap, D], vec![-7.0; p * cap * D]).unwrap();
    let mut got = Tensor::<u64>::zeros(&[p, p]);
    a2av.launch(sess, &x, &counts, &mut y, &mut got)?;
    Ok((y, got))
}

fn check(sess: &Session, c: &Case) {
    let p = c.p;
    let (y, got) = run(sess, c, c.need).unwrap();
    for r in 0..p {
        let mut want = vec![-7.0f32; c.need * D];
        let mut at = 0;
        for q in 0..p {
            let n = c.counts[q * p + r] as usize;
            assert_eq!(
                got.data()[r * p + q],
                n as u64,
                "P={p} recv_counts[{r}][{q}]"
            );
            let start: u64 = c.counts[q * p..q * p + r].iter().sum();
            let from = (q * c.s + start as usize) * D;
            want[at * D..(at + n) * D].copy_from_slice(&c.x[from..from + n * D]);
            at += n;
        }
        let row = &y.data()[r * c.need * D..(r + 1) * c.need * D];
        assert_eq!(row, &want[..], "P={p} rank {r}");
    }
}

#[test]
fn all_to_all_v_moves_every_count_at_every_p() {
    for p in 1..=8 {
        for seed in 0..3 {
            check(&Session::sim(p).unwrap(), &case(p, seed * 10 + p as u64));
        }
    }
}

#[cfg(feature = "cuda")]
#[test]
fn all_to_all_v_in_the_emulation() {
    emulation::cxx();
    for p in [1, 3, 4] {
        let s = Session::cuda_emulated(vec![0; p]).unwrap();
        check(&s, &case(p, 40 + p as u64));
    }
}

/// The line of `a2av_d`'s `all_to_all_v` call.
fn call_line() -> usize {
    let src = include_str!("v_collectives.rs");
    let at = src.find("    all_to_all_v(ctx, src, sc, y, got);").unwrap();
    src[..at].lines().count() + 1
}

#[test]
fn a_receive_buffer_too_small_is_an_error_before_any_row_moves() {
    let c = case(4, 7);
    let cap = c.need - 1;
    let e = run(&Session::sim(4).unwrap(), &c, cap)
        .unwrap_err()
        .to_string();
    // Checked after the counts are exchanged, before any row moves: the total that arrives
    // (`need`, on the fullest rank) against the rows `y` holds.
    let need = c.need;
    assert!(
        e.contains("function `a2av_d`, op `trap_if ")
            && e.contains(&format!("tests/v_collectives.rs:{}:5", call_line()))
            && e.ends_with(&format!("{need} rows arrive (the sum of the receive counts) but the receive buffer holds {cap} rows; give it at least {need} rows (the most that can arrive: every rank's largest send count to this rank, summed)")),
        "{e}"
    );
}

/// Sends counts that add up to more rows than its send window holds (`over` on rank 0).
#[eagle::kernel(device)]
pub fn overrun_d(
    ctx: Ctx,
    counts: Tensor<u64, NR>,
    y: Out<Tensor<f32, 16, D>>,
    got: Out<Tensor<u64, NR>>,
    src: Window<f32, 2, D>,
    sc: Window<u64, NR>,
) {
    put(sc, rank(ctx), counts);
    all_to_all_v(ctx, src, sc, y, got);
}

#[eagle::host]
pub fn overrun(
    counts: Tensor<u64, NR, NR>,
    y: Out<Tensor<f32, NR, 16, D>>,
    got: Out<Tensor<u64, NR, NR>>,
) {
    let s = alloc_window_buffer([2, D], f32);
    let c = alloc_window_buffer([NR], u64);
    for r in 0..world_size() {
        overrun_d(
            counts[r],
            y[r],
            got[r],
            window(s, [2, D], f32),
            window(c, [NR], u64),
            device = r,
        );
    }
}

/// Send counts that reach past the sender's send window (2 rows): the receiving rank that
/// would read past it stops, naming the rows the counts take and the rows the window holds.
#[test]
fn send_counts_past_the_send_window_are_an_error_naming_both() {
    // Rank 0 sends 1 row to itself and 3 to rank 1: rank 1's run is rows 1..4 of a 2-row window.
    let counts = Tensor::from_vec(&[2, 2], vec![1u64, 3, 0, 0]).unwrap();
    let mut y = Tensor::<f32>::zeros(&[2, 16, D]);
    let mut got = Tensor::<u64>::zeros(&[2, 2]);
    let e = overrun
        .launch(&Session::sim(2).unwrap(), &counts, &mut y, &mut got)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("rank 1 failed: function `overrun_d`, op `trap_if ")
            && e.ends_with("a rank's send counts take 4 rows of its send buffer but it holds 2 rows; the counts must sum to at most the send buffer's rows"),
        "{e}"
    );
}

#[eagle::kernel(device)]
pub fn short_counts_d(
    ctx: Ctx,
    y: Out<Tensor<f32, 4, D>>,
    got: Out<Tensor<u64, 2>>,
    src: Window<f32, 4, D>,
    sc: Window<u64, 2>,
) {
    all_to_all_v(ctx, src, sc, y, got);
}

#[eagle::host]
pub fn short_counts(y: Out<Tensor<f32, NR, 4, D>>, got: Out<Tensor<u64, NR, 2>>) {
    let s = alloc_window_buffer([4, D], f32);
    let c = alloc_window_buffer([2], u64);
    for r in 0..world_size() {
        short_counts_d(
            y[r],
            got[r],
            window(s, [4, D], f32),
            window(c, [2], u64),
            device = r,
        );
    }
}

#[test]
fn counts_of_the_wrong_length_are_refused_before_anything_runs() {
    let mut y = Tensor::<f32>::zeros(&[3, 4, D]);
    let mut got = Tensor::<u64>::zeros(&[3, 2]);
    let e = short_counts
        .launch(&Session::sim(3).unwrap(), &mut y, &mut got)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the send counts have 2 entries but the world has 3 ranks"),
        "{e}"
    );
}

#[eagle::kernel(device)]
pub fn agv_d(
    ctx: Ctx,
    x: Tensor<f32, S, D>,
    count: Tensor<u64, 1>,
    y: Out<Tensor<f32, CAP, D>>,
    got: Out<Tensor<u64, NR>>,
    src: Window<f32, S, D>,
    c: Window<u64, 1>,
) {
    put(src, rank(ctx), x);
    put(c, rank(ctx), count);
    allgather_v(ctx, src, c, y, got);
}

#[eagle::host]
pub fn agv(
    x: Tensor<f32, NR, S, D>,
    count: Tensor<u64, NR, 1>,
    y: Out<Tensor<f32, NR, CAP, D>>,
    got: Out<Tensor<u64, NR, NR>>,
) {
    let s = alloc_window_buffer([S, D], f32);
    let c = alloc_window_buffer([1], u64);
    for r in 0..world_size() {
        agv_d(
            x[r],
            count[r],
            y[r],
            got[r],
            window(s, [S, D], f32),
            window(c, [1], u64),
            device = r,
        );
    }
}

fn check_gather(sess: &Session, p: usize, seed: u64, slack: isize) -> eagle::Result<()> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let s = 4;
    let counts: Vec<u64> = (0..p).map(|_| rng.gen_range(0..=s as u64)).collect();
    let total = counts.iter().sum::<u64>() as usize;
    let cap = (total.max(1) as isize + slack) as usize;
    let x: Vec<f32> = (0..p * s * D).map(|i| -(i as f32) - 0.25).collect();
    let xt = Tensor::from_vec(&[p, s, D], x.clone()).unwrap();
    let ct = Tensor::from_vec(&[p, 1], counts.clone()).unwrap();
    let mut y = Tensor::from_vec(&[p, cap, D], vec![9.0; p * cap * D]).unwrap();
    let mut got = Tensor::<u64>::zeros(&[p, p]);
    agv.launch(sess, &xt, &ct, &mut y, &mut got)?;
    let mut want = vec![9.0f32; cap * D];
    let mut at = 0;
    for q in 0..p {
        let n = counts[q] as usize;
        want[at * D..(at + n) * D].copy_from_slice(&x[q * s * D..(q * s + n) * D]);
        at += n;
    }
    for r in 0..p {
        assert_eq!(
            &got.data()[r * p..(r + 1) * p],
            &counts[..],
            "P={p} rank {r} counts"
        );
        assert_eq!(
            &y.data()[r * cap * D..(r + 1) * cap * D],
            &want[..],
            "P={p} rank {r}"
        );
    }
    Ok(())
}

#[test]
fn allgather_v_gathers_every_count_at_every_p() {
    for p in 1..=8 {
        for seed in 0..3 {
            check_gather(&Session::sim(p).unwrap(), p, seed * 7 + p as u64, 1).unwrap();
        }
    }
    // A receive buffer one row short, on every rank: the first block ends at the total.
    let e = check_gather(&Session::sim(3).unwrap(), 3, 5, -1)
        .unwrap_err()
        .to_string();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let total: u64 = (0..3).map(|_| rng.gen_range(0..=4u64)).sum();
    assert!(
        e.contains(&format!(
            "{total} rows arrive (the sum of the receive counts) but the receive buffer holds {} rows",
            total - 1
        )),
        "{e}"
    );
}

#[cfg(feature = "cuda")]
#[test]
fn allgather_v_in_the_emulation() {
    emulation::cxx();
    for p in [1, 3] {
        let s = Session::cuda_emulated(vec![0; p]).unwrap();
        check_gather(&s, p, 60 + p as u64, 0).unwrap();
    }
}

/// The send counts' window passed again as the receive counts (a user trial's find: it ran,
/// and without the race detector returned wrong counts).
#[eagle::kernel(device)]
pub fn counts_twice_d(
    ctx: Ctx,
    y: Out<Tensor<f32, CAP, D>>,
    src: Window<f32, S, D>,
    sc: Window<u64, NR>,
) {
    all_to_all_v(ctx, src, sc, y, sc);
}

#[test]
fn one_window_as_send_and_receive_counts_is_refused_at_the_line() {
    let e = counts_twice_d.ir().unwrap_err().to_string();
    assert!(
        e.contains("the send counts and the receive counts of `all_to_all_v` are the same buffer, which is written while it is read; give each its own buffer")
            && e.contains("tests/v_collectives.rs:"),
        "{e}"
    );
}
