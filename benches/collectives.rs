//! Bandwidth of the built-in allgather and allreduce (each mode) on the `sim` platform, next
//! to single-thread `memcpy` bandwidth measured in the same run. Prints a markdown table.
//!
//! `cargo bench --bench collectives` (add `-- --quick` for sizes up to 1 MiB only)
//!
//! Each cell times a per-device program that runs the collective `iters` times and subtracts
//! the same program with 0 iterations (dispatch, copy-in and copy-out), so only the
//! collectives are timed. "bytes/rank" is what each rank must move at least: `(P-1)/P * S`
//! for allgather, `2 (P-1)/P * S` for two-phase and ring allreduce, `(P-1) * S` for mesh
//! allreduce (it reads every peer's whole buffer). "all ranks" multiplies by P: the ranks run
//! concurrently on the machine's cores and share its memory bandwidth.

use eagle::prelude::*;
use std::time::Instant;

const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");

/// Allgather `iters` times.
#[eagle::kernel(device)]
pub fn ag_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allgather(ctx, src, dst);
    }
}

/// Mesh allreduce `iters` times.
#[eagle::kernel(device)]
pub fn mesh_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allreduce(ctx, src, dst, Sum, Mesh);
    }
}

/// Two-phase allreduce `iters` times.
#[eagle::kernel(device)]
pub fn two_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allreduce(ctx, src, dst, Sum, TwoPhase);
    }
}

/// Ring allreduce `iters` times.
#[eagle::kernel(device)]
pub fn ring_d(ctx: Ctx, src: Window<f32, N>, dst: Window<f32, N>, iters: usize) {
    for i in 0..iters {
        allreduce(ctx, src, dst, Sum, Ring);
    }
}

macro_rules! bench_host {
    ($host:ident, $dev:ident) => {
        /// Host: one dispatch per rank.
        #[eagle::host]
        pub fn $host(x: Tensor<f32, NR, N>, iters: usize) {
            let s = alloc_window_buffer([N], f32);
            let d = alloc_window_buffer([N], f32);
            for r in 0..world_size() {
                $dev(window(s, [N], f32), window(d, [N], f32), iters, device = r);
            }
        }
    };
}

bench_host!(ag, ag_d);
bench_host!(mesh, mesh_d);
bench_host!(two, two_d);
bench_host!(ring, ring_d);

type Launch = fn(&Session, &Tensor<f32>, usize) -> eagle::Result<eagle::LaunchReport>;
/// (name, launcher, bytes each rank moves per byte of buffer at world size P).
type Case = (&'static str, Launch, fn(f64) -> f64);

fn time_it(f: &dyn Fn() -> eagle::Result<()>) -> f64 {
    let t0 = Instant::now();
    f().expect("benchmark run");
    t0.elapsed().as_secs_f64()
}

fn memcpy_gbs(bytes: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let reps = (256 << 20) / bytes.max(1);
    let reps = reps.clamp(3, 100_000);
    dst.copy_from_slice(&src);
    let t0 = Instant::now();
    for _ in 0..reps {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    bytes as f64 * reps as f64 / t0.elapsed().as_secs_f64() / 1e9
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: Vec<usize> = (0..9)
        .map(|k| 1024usize << (2 * k))
        .filter(|&s| !quick || s <= 1 << 20)
        .collect();
    let cases: [Case; 4] = [
        ("allgather", |s, x, i| ag.launch(s, x, i), |p| (p - 1.0) / p),
        (
            "allreduce mesh",
            |s, x, i| mesh.launch(s, x, i),
            |p| p - 1.0,
        ),
        (
            "allreduce two_phase",
            |s, x, i| two.launch(s, x, i),
            |p| 2.0 * (p - 1.0) / p,
        ),
        (
            "allreduce ring",
            |s, x, i| ring.launch(s, x, i),
            |p| 2.0 * (p - 1.0) / p,
        ),
    ];
    println!("| collective | P | size | time/op | bytes/rank | GB/s per rank | all ranks GB/s | memcpy GB/s | ratio per rank | ratio all ranks |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for p in [2usize, 4] {
        let s = Session::sim(p).expect("session").with_race_check(false);
        for &bytes in &sizes {
            let n = bytes / 4;
            let x = Tensor::<f32>::zeros(&[p, n]);
            // Best of three: the machine is shared, and the bound should be the best it can do.
            let mc = (0..3).map(|_| memcpy_gbs(bytes)).fold(0.0, f64::max);
            for (name, launch, factor) in &cases {
                let iters = ((64usize << 20) / bytes).clamp(2, 2000);
                launch(&s, &x, 1).expect("warm-up compiles");
                let base = (0..3)
                    .map(|_| time_it(&|| launch(&s, &x, 0).map(|_| ())))
                    .fold(f64::MAX, f64::min);
                let full = (0..3)
                    .map(|_| time_it(&|| launch(&s, &x, iters).map(|_| ())))
                    .fold(f64::MAX, f64::min);
                let per_op = ((full - base) / iters as f64).max(1e-9);
                let moved = factor(p as f64) * bytes as f64;
                let gbs = moved / per_op / 1e9;
                let all = gbs * p as f64;
                println!(
                    "| {name} | {p} | {} | {:.1} us | {} | {gbs:.2} | {all:.2} | {mc:.2} | {:.2} | {:.2} |",
                    human(bytes),
                    per_op * 1e6,
                    human(moved as usize),
                    gbs / mc,
                    all / mc
                );
            }
        }
    }
}

fn human(b: usize) -> String {
    if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}
