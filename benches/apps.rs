//! The distributed programs (issue 16), on `sim` at P = 1, 2, 4 or, built with `--features mpi`
//! and started by `mpirun -np P`, over MPI at that P:
//!
//! 1. `tp_ffn` tokens per second, both weight modes;
//! 2. `allgather_gemm` and `gemm_reduce_scatter`, overlapped against bulk, at 64, 256 and 1024
//!    rows per rank;
//! 3. `moe_dispatch_combine`: one dispatch + combine with the expert FFN replaced by a copy
//!    (`ffn = false`: the routing and data movement alone), the full program, and the
//!    built-in `all_to_all` moving the same bytes (two all-to-alls of `2T / P` token rows per
//!    rank pair: the dispatch and the combine with uniform routing).
//!
//! Each cell is the min / median / max of 7 launches after one to compile; the modes of a
//! row are measured in interleaved rounds. A launch includes copying the arguments in and out
//! (`sim` keeps a memory per device). Prints the markdown tables of `docs/performance.md`.
//!
//! `cargo bench --bench apps` (`-- new`: the issue-39 tables alone; `-- programs`: the
//! small programs' table alone); over MPI: `cargo build --release --features mpi --bench apps`,
//! then `mpirun -np 4 target/release/deps/apps-<hash> --bench`.

use eagle::prelude::*;

#[path = "report/mod.rs"]
mod report;

#[allow(dead_code)]
#[path = "../examples/allgather_gemm.rs"]
mod allgather_gemm;
#[allow(dead_code)]
#[path = "../examples/dp_tp_mlp.rs"]
mod dp_tp_mlp;
#[allow(dead_code)]
#[path = "../examples/ep_moe.rs"]
mod ep_moe;
#[allow(dead_code)]
#[path = "../examples/flash_decode.rs"]
mod flash_decode;
#[allow(dead_code)]
#[path = "../examples/fp8_gemm_rs.rs"]
mod fp8_gemm_rs;
#[allow(dead_code)]
#[path = "../examples/gemm_reduce_scatter.rs"]
mod gemm_reduce_scatter;
#[allow(dead_code)]
#[path = "../examples/moe_dispatch_combine.rs"]
mod moe_dispatch_combine;
#[allow(dead_code)]
#[path = "../examples/ring_attention.rs"]
mod ring_attention;
#[allow(dead_code)]
#[path = "../examples/tp_ffn.rs"]
mod tp_ffn;

const NR: Dim = dynamic!("NR");
const L: Dim = dynamic!("L");
const BI: Dim = dynamic!("BI");
const BO: Dim = dynamic!("BO");
const S: Dim = dynamic!("S");
const DM: Dim = dynamic!("DM");

/// `ep_moe`'s data movement alone: `all_to_all_v` of `S` rows of `DM` f32 to the peers (the
/// dispatch) and back with the received counts (the combine).
#[eagle::kernel(device)]
pub fn a2av_twice(
    ctx: Ctx,
    counts: Tensor<u64, NR>,
    src: Window<f32, S, DM>,
    sc: Window<u64, NR>,
    mid: Window<f32, { NR * S }, DM>,
    rc: Window<u64, NR>,
    back: Window<f32, S, DM>,
    bc: Window<u64, NR>,
) {
    put(sc, rank(ctx), counts);
    all_to_all_v(ctx, src, sc, mid, rc);
    all_to_all_v(ctx, mid, rc, back, bc);
}

/// Host of [`a2av_twice`].
#[eagle::host]
pub fn a2av_bench(counts: Tensor<u64, NR, NR>, x: Tensor<f32, NR, S, DM>) {
    let s = alloc_window_buffer([S, DM], f32);
    let sc = alloc_window_buffer([NR], u64);
    let m = alloc_window_buffer([NR * S, DM], f32);
    let rc = alloc_window_buffer([NR], u64);
    let b = alloc_window_buffer([S, DM], f32);
    let bc = alloc_window_buffer([NR], u64);
    for r in 0..world_size() {
        a2av_twice(
            counts[r],
            window(s, [S, DM], f32),
            window(sc, [NR], u64),
            window(m, [NR * S, DM], f32),
            window(rc, [NR], u64),
            window(b, [S, DM], f32),
            window(bc, [NR], u64),
            device = r,
        );
    }
}

/// Two built-in all-to-alls: rows of `L` f32 to every rank (the dispatch) and back (the
/// combine). `ins` and `outs` are not touched: they make the launch copy as many argument
/// bytes in and out as the MoE program's (its weights above all).
#[eagle::kernel(device)]
pub fn a2a_twice(
    ctx: Ctx,
    x: Tensor<f32, NR, L>,
    ins: Tensor<f32, BI>,
    outs: Out<Tensor<f32, BO>>,
    src: Window<f32, NR, L>,
    mid: Window<f32, NR, L>,
    back: Window<f32, NR, L>,
) {
    put(src, rank(ctx), x);
    all_to_all(ctx, src, mid);
    all_to_all(ctx, mid, back);
}

/// Host of [`a2a_twice`].
#[eagle::host]
pub fn a2a_bench(
    x: Tensor<f32, NR, NR, L>,
    ins: Tensor<f32, NR, BI>,
    outs: Out<Tensor<f32, NR, BO>>,
) {
    let s = alloc_window_buffer([NR, L], f32);
    let m = alloc_window_buffer([NR, L], f32);
    let b = alloc_window_buffer([NR, L], f32);
    for r in 0..world_size() {
        a2a_twice(
            x[r],
            ins[r],
            outs[r],
            window(s, [NR, L], f32),
            window(m, [NR, L], f32),
            window(b, [NR, L], f32),
            device = r,
        );
    }
}

fn cell((lo, med, hi): (f64, f64, f64)) -> String {
    format!("{med:.2} ({lo:.2}-{hi:.2})")
}

/// A row of the overlap table: `r` holds the overlapped then the bulk timings.
fn overlap_row(name: &str, on: &str, p: usize, m: usize, r: &[(f64, f64, f64)]) -> String {
    format!(
        "| `{name}` | {on} | {p} | {m} | {} | {} | {:.2} |",
        cell(r[0]),
        cell(r[1]),
        r[1].1 / r[0].1
    )
}

/// Times the closures in interleaved rounds: one untimed run each, then 7 rounds of one
/// call; (min, median, max) ms.
fn interleaved(runs: &mut [&mut dyn FnMut()]) -> Vec<(f64, f64, f64)> {
    report::interleaved(1, runs)
}

fn main() {
    let guard = eagle_runner::MpiGuard::init();
    let root = guard.is_root();
    let (ps, on): (Vec<usize>, &str) = if guard.size > 1 {
        (vec![guard.size], "MPI")
    } else {
        (vec![1, 2, 4], "sim")
    };
    let session = |p: usize| {
        Session::new(eagle::Platform::Sim, (0..p).collect())
            .expect("session")
            .with_race_check(false)
    };
    let say = |s: String| {
        if root {
            println!("{s}");
        }
    };
    // `cargo bench --bench apps -- new`: the tables of the programs of issue 39 alone.
    if std::env::args().any(|a| a == "programs") {
        new_programs_table(&ps, on, &session, &say);
        return;
    }
    if std::env::args().any(|a| a == "new") {
        ep_moe_table(&ps, on, &session, &say);
        say(String::new());
        new_programs_table(&ps, on, &session, &say);
        return;
    }
    say("| program | on | weights | P | ms per launch, median (min-max) | tokens/s |".into());
    say("|---|---|---|---|---|---|".into());
    for &p in &ps {
        use tp_ffn::{D, F, T};
        if !F.is_multiple_of(p) {
            continue;
        }
        let s = session(p);
        let fp = F / p;
        let x = eagle_runner::random_tensor(&[T, D], 1);
        let w1 = eagle_runner::random_tensor(&[p, D, fp], 2);
        let w2 = eagle_runner::random_tensor(&[p, fp, D], 3);
        let half = |t: &Tensor<f32>| {
            Tensor::from_vec(
                t.shape(),
                t.data().iter().map(|&v| bf16::from_f32(v)).collect(),
            )
            .expect("same shape")
        };
        let (b1, b2) = (half(&w1), half(&w2));
        let mut h = Tensor::<f32>::zeros(&[p, T, fp]);
        let mut y = Tensor::<f32>::zeros(&[p, T, D]);
        let mut h2 = h.clone();
        let mut y2 = y.clone();
        let r = interleaved(&mut [
            &mut || {
                tp_ffn::tp_ffn
                    .launch(&s, &x, &w1, &w2, &mut h, &mut y)
                    .expect("f32");
            },
            &mut || {
                tp_ffn::tp_ffn_bf16
                    .launch(&s, &x, &b1, &b2, &mut h2, &mut y2)
                    .expect("bf16");
            },
        ]);
        for (mode, t) in ["f32", "bf16"].iter().zip(r) {
            say(format!(
                "| `tp_ffn` | {on} | {mode} | {p} | {} | {:.0} |",
                cell(t),
                T as f64 / (t.1 / 1e3)
            ));
        }
    }
    say(String::new());
    say("| program | on | P | rows per rank | overlap (ms) | bulk (ms) | bulk / overlap |".into());
    say("|---|---|---|---|---|---|---|".into());
    for &p in ps.iter().filter(|&&p| p > 1) {
        let s = session(p);
        for m in [64usize, 256, 1024] {
            use allgather_gemm::{K, N};
            let a = eagle_runner::random_tensor(&[p, m, K], 1);
            let b = eagle_runner::random_tensor(&[K, N], 2);
            let mut c = Tensor::<f32>::zeros(&[p, p * m, N]);
            let mut c2 = c.clone();
            let r = interleaved(&mut [
                &mut || {
                    allgather_gemm::allgather_gemm
                        .launch(&s, &a, &b, &mut c, true)
                        .expect("overlap");
                },
                &mut || {
                    allgather_gemm::allgather_gemm
                        .launch(&s, &a, &b, &mut c2, false)
                        .expect("bulk");
                },
            ]);
            say(overlap_row("allgather_gemm", on, p, m, &r));
        }
        for m in [64usize, 256, 1024] {
            use gemm_reduce_scatter::{KP, N};
            let a = eagle_runner::random_tensor(&[p, p * m, KP], 1);
            let b = eagle_runner::random_tensor(&[p, KP, N], 2);
            let mut scratch = Tensor::<f32>::zeros(&[p, p * m, N]);
            let mut c = Tensor::<f32>::zeros(&[p, m, N]);
            let mut scratch2 = scratch.clone();
            let mut c2 = c.clone();
            let r = interleaved(&mut [
                &mut || {
                    gemm_reduce_scatter::gemm_reduce_scatter
                        .launch(&s, &a, &b, &mut scratch, &mut c, true)
                        .expect("overlap");
                },
                &mut || {
                    gemm_reduce_scatter::gemm_reduce_scatter
                        .launch(&s, &a, &b, &mut scratch2, &mut c2, false)
                        .expect("bulk");
                },
            ]);
            say(overlap_row("gemm_reduce_scatter", on, p, m, &r));
        }
    }
    say(String::new());
    say("| program | on | P | dispatch + combine (ms) | with the expert FFN (ms) | 2 x all_to_all, same token bytes (ms) | the same + the MoE's argument bytes (ms) | dispatch + combine / all_to_all | / all_to_all + arguments |".into());
    say("|---|---|---|---|---|---|---|---|---|".into());
    for &p in ps.iter().filter(|&&p| p > 1) {
        use crate::moe_dispatch_combine::{Buffers, Inputs, CAPACITY, D, EPR, T, TOPK};
        let s = session(p);
        let inp = Inputs::random(p, 61);
        let cap = CAPACITY;
        let outs = |ffn: bool| {
            let mut bufs = Buffers::new(p, cap);
            let (inp, s) = (&inp, &s);
            move || bufs.launch(s, inp, ffn).expect("moe")
        };
        let (mut route_only, mut full) = (outs(false), outs(true));
        let x = eagle_runner::random_tensor(&[p, p, TOPK * T * D / p], 3);
        // The MoE launch's argument elements per rank, in and out (all 4 bytes wide).
        let per_rank = |ts: &[usize]| ts.iter().sum::<usize>() / p;
        let moe_in = per_rank(&[
            inp.x.data().len(),
            inp.route.data().len(),
            inp.gate.data().len(),
            inp.w1.data().len(),
            inp.w2.data().len(),
        ]);
        let moe_out = p * EPR * p + T * TOPK + EPR + EPR * cap * D + T * D;
        let (none_in, mut none_out) =
            (Tensor::<f32>::zeros(&[p, 1]), Tensor::<f32>::zeros(&[p, 1]));
        let (ins, mut outs) = (
            Tensor::<f32>::zeros(&[p, moe_in]),
            Tensor::<f32>::zeros(&[p, moe_out]),
        );
        let r = interleaved(&mut [
            &mut route_only,
            &mut full,
            &mut || {
                a2a_bench
                    .launch(&s, &x, &none_in, &mut none_out)
                    .expect("all_to_all");
            },
            &mut || {
                a2a_bench
                    .launch(&s, &x, &ins, &mut outs)
                    .expect("all_to_all with the MoE's argument bytes");
            },
        ]);
        say(format!(
            "| `moe_dispatch_combine` | {on} | {p} | {} | {} | {} | {} | {:.2} | {:.2} |",
            cell(r[0]),
            cell(r[1]),
            cell(r[2]),
            cell(r[3]),
            r[0].1 / r[2].1,
            r[0].1 / r[3].1
        ));
    }
    say(String::new());
    ep_moe_table(&ps, on, &session, &say);
    say(String::new());
    new_programs_table(&ps, on, &session, &say);
}

/// Issue 39's other programs: one launch, and the bytes each rank sends.
fn new_programs_table(
    ps: &[usize],
    on: &str,
    session: &dyn Fn(usize) -> Session,
    say: &dyn Fn(String),
) {
    say("| program | on | P | one launch (ms) | bytes sent per rank |".into());
    say("|---|---|---|---|---|".into());
    for &p in ps.iter().filter(|&&p| p > 1) {
        let s = session(p);
        let inp = flash_decode::Inputs::random(p, 83);
        let r = interleaved(&mut [&mut || {
            flash_decode::run_once(&s, &inp).expect("flash_decode");
        }]);
        say(format!(
            "| `flash_decode` | {on} | {p} | {} | {} (its partial row, to each of {} peers) |",
            cell(r[0]),
            flash_decode::W * 4,
            p - 1
        ));
        let inp = fp8_gemm_rs::Inputs::<eagle::f8e4m3>::random(p, 91);
        let r = interleaved(&mut [&mut || {
            fp8_gemm_rs::run_once(&s, &inp).expect("fp8_gemm_rs");
        }]);
        use fp8_gemm_rs::{M, N};
        say(format!(
            "| `fp8_gemm_rs` (e4m3) | {on} | {p} | {} | {} (an `f32` row block of {M} x {N}, to each of {} peers) |",
            cell(r[0]),
            M * N * 4,
            p - 1
        ));
        let inp = ring_attention::Inputs::random(p, 97);
        let r = interleaved(&mut [
            &mut || {
                ring_attention::run_once(&s, &inp, true).expect("overlap");
            },
            &mut || {
                ring_attention::run_once(&s, &inp, false).expect("bulk");
            },
        ]);
        use ring_attention::{BL, DH, H};
        let block = 2 * H * BL * DH * 4;
        for (mode, t) in ["overlap", "bulk"].iter().zip(r) {
            say(format!(
                "| `ring_attention` ({mode}) | {on} | {p} | {} | {} ({} key/value blocks of {block}) |",
                cell(t),
                (p - 1) * block,
                p - 1
            ));
        }
        // dp_tp_mlp on the `--mode grid` grid: two [T, D] two-phase allreduces within the
        // TP group, the W1 and W2 gradient shards' within the DP group.
        use dp_tp_mlp::{D, F, T};
        let tp = dp_tp_mlp::tp_of(p, false);
        let dp = p / tp;
        let inp = dp_tp_mlp::Inputs::random(dp, tp, 41).expect("inputs");
        let r = interleaved(&mut [&mut || {
            dp_tp_mlp::run_once(&s, &inp, tp).expect("dp_tp_mlp");
        }]);
        let tp_bytes = 2 * 2 * (tp - 1) * T * D * 4 / tp;
        let dp_bytes = 2 * (dp - 1) * 2 * D * (F / tp) * 4 / dp;
        say(format!(
            "| `dp_tp_mlp` (grid [{dp}, {tp}]) | {on} | {p} | {} | {} ({tp_bytes} in the TP group, {dp_bytes} in the DP group) |",
            cell(r[0]),
            tp_bytes + dp_bytes
        ));
    }
}

/// `ep_moe` at PyPTO's size against two `all_to_all_v`s moving the same token rows (`T * K`
/// rows of `D` f32 per rank, `T * K / P` to each rank: uniform routing), at each P > 1.
fn ep_moe_table(ps: &[usize], on: &str, session: &dyn Fn(usize) -> Session, say: &dyn Fn(String)) {
    use ep_moe::pypto::{D, K, T};
    say("| program | on | P | one launch (ms) | 2 x all_to_all_v, same rows (ms) | launch / all_to_all_v | MiB sent per rank |".into());
    say("|---|---|---|---|---|---|---|".into());
    for &p in ps.iter().filter(|&&p| p > 1) {
        let s = session(p);
        let z = ep_moe::pypto::SIZE;
        let inp = ep_moe::Inputs::random(z, p, 71);
        let each = (T * K / p) as u64;
        let counts = Tensor::from_vec(&[p, p], vec![each; p * p]).expect("P x P");
        let x = eagle_runner::random_tensor(&[p, T * K, D], 5);
        let r = interleaved(&mut [
            &mut || {
                ep_moe::ep_moe(&s, z, &inp).expect("ep_moe");
            },
            &mut || {
                a2av_bench.launch(&s, &counts, &x).expect("all_to_all_v");
            },
        ]);
        // The dispatch: every pair's token row and its local expert (`i32`); the combine:
        // the rows back. (Rows to the rank itself included: a `(P - 1) / P` share leaves it.)
        let mib = |b: usize| b as f64 / (1 << 20) as f64;
        let (there, back) = (mib(T * K * (D * 4 + 4)), mib(T * K * D * 4));
        say(format!(
            "| `ep_moe` (pypto) | {on} | {p} | {} | {} | {:.2} | {there:.2} + {back:.2} |",
            cell(r[0]),
            cell(r[1]),
            r[0].1 / r[1].1
        ));
    }
}
