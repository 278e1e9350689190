//! The physical limits of the machine the other benches ran on, so that each ratio in
//! `docs/performance.md` can be read against them: memory bandwidth (a 64 MiB `memcpy`, a
//! 64 MiB and an 8 MiB read, a 1 MiB `memcpy` in cache; each on one core and then on both
//! cores at once, the limit for a second HostTeam thread and for the collectives, whose
//! ranks share one memory system) and floating-point throughput at the vector widths in play
//! (128-bit SSE2 multiply + add, which is what Cranelift emits; 128-bit FMA; 256-bit FMA, which
//! only rustc-compiled code such as the matmul micro-kernels reaches), and what a barrier
//! among 2 and 4 threads costs on the 2 cores (std's `Barrier`, and a barrier that yields
//! while it waits as `sim`'s does): the floor under every collective's synchronisation.
//!
//! Rounds are interleaved; each row gives min / median / max over rounds. Bandwidth is bytes
//! moved per second (a copy counts the bytes read plus the bytes written), in GB/s (10^9);
//! throughput is floating-point operations per second on one core, in GFLOP/s (an FMA is 2).
//!
//! `cargo bench --bench machine` (`-- --quick` for 3 rounds; `-- --save` writes
//! `docs/bench/machine.json` and its region of `docs/performance.md`)

use std::hint::black_box;
use std::time::Instant;

#[path = "report/mod.rs"]
mod report;

/// Sums `x` with 8 independent accumulators (rustc vectorises it into 128-bit adds): a read
/// at the speed of memory, not of an add chain.
fn read_sum(x: &[f64]) -> f64 {
    let mut acc = [0f64; 8];
    for c in x.chunks_exact(8) {
        for k in 0..8 {
            acc[k] += c[k];
        }
    }
    acc.iter().sum()
}

/// Runs `job(0)` and `job(1)` on two threads at once (rayon's pool, started before timing)
/// and returns the seconds until both are done.
fn both(job: &(dyn Fn(usize) + Sync)) -> f64 {
    let t = Instant::now();
    rayon::join(|| job(0), || job(1));
    t.elapsed().as_secs_f64()
}

/// A barrier that yields its core while it waits (as `sim`'s barrier does before it parks):
/// an arrival count and a generation, the last arrival bumps the generation.
struct YieldBarrier {
    arrived: std::sync::atomic::AtomicUsize,
    gen: std::sync::atomic::AtomicUsize,
    n: usize,
}

impl YieldBarrier {
    fn wait(&self) {
        use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
        let g = self.gen.load(Acquire);
        if self.arrived.fetch_add(1, AcqRel) + 1 == self.n {
            self.arrived.store(0, Relaxed);
            self.gen.fetch_add(1, Release);
        } else {
            while self.gen.load(Acquire) == g {
                std::thread::yield_now();
            }
        }
    }
}

/// Seconds per barrier: `threads` threads (started once) pass `n` barriers, with `yielding`
/// the [`YieldBarrier`], else `std::sync::Barrier`.
fn barriers(threads: usize, n: usize, yielding: bool) -> f64 {
    let std_b = std::sync::Barrier::new(threads);
    let y = YieldBarrier {
        arrived: 0.into(),
        gen: 0.into(),
        n: threads,
    };
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..n {
                    if yielding {
                        y.wait();
                    } else {
                        std_b.wait();
                    }
                }
            });
        }
    });
    t.elapsed().as_secs_f64() / n as f64
}

/// Defines `fn $name(n: usize) -> f64`: `n` iterations of 12 independent chains of
/// `a = $step(a, b, c)` on `$lanes`-lane f64 vectors (`$set1` broadcasts), compiled with
/// `$features`; returns the flops done (2 per lane per chain per iteration).
macro_rules! chains {
    ($(#[$doc:meta])* $name:ident, $features:literal, $lanes:literal, $set1:ident, |$a:ident, $b:ident, $c:ident| $step:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        #[doc = concat!("The CPU has ", $features, ".")]
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = $features)]
        unsafe fn $name(n: usize) -> f64 {
            use std::arch::x86_64::*;
            let $b = $set1(0.999_999);
            let $c = $set1(1e-9);
            let mut a = [$set1(1.0); 12];
            for _ in 0..n {
                for v in a.iter_mut() {
                    let $a = *v;
                    *v = $step;
                }
            }
            black_box(a);
            (n * 12 * $lanes * 2) as f64
        }
    };
}

chains!(
    /// 128-bit SSE2 multiply, then add (what Cranelift emits).
    sse2_mul_add, "sse2", 2, _mm_set1_pd, |a, b, c| _mm_add_pd(_mm_mul_pd(a, b), c)
);
chains!(
    /// One 128-bit fused multiply-add per step.
    fma128, "fma", 2, _mm_set1_pd, |a, b, c| _mm_fmadd_pd(a, b, c)
);
chains!(
    /// One 256-bit fused multiply-add per step.
    fma256, "avx,fma", 4, _mm256_set1_pd, |a, b, c| _mm256_fmadd_pd(a, b, c)
);

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 3 } else { 15 };
    let big: usize = (64 << 20) / 8;
    let small: usize = (8 << 20) / 8;
    let src: Vec<f64> = (0..big).map(|i| i as f64).collect();
    let mut dst = vec![0f64; big];
    let x8: Vec<f64> = (0..small).map(|i| i as f64).collect();
    dst.copy_from_slice(&src);
    assert_eq!(read_sum(&x8), (small * (small - 1) / 2) as f64, "read_sum");

    // Per thread: a 1 MiB source and destination (in cache), copied REPS times per sample.
    const REPS: usize = 32;
    let mib: usize = (1 << 20) / 8;
    let pairs: Vec<(Vec<f64>, std::sync::Mutex<Vec<f64>>)> = (0..2)
        .map(|k| {
            let s: Vec<f64> = (0..mib).map(|i| (i + k) as f64).collect();
            (s, std::sync::Mutex::new(vec![0f64; mib]))
        })
        .collect();
    let mut dst2 = vec![0f64; big];
    let halves: Vec<(&[f64], std::sync::Mutex<&mut [f64]>)> = {
        let (s0, s1) = src.split_at(big / 2);
        let (d0, d1) = dst2.split_at_mut(big / 2);
        vec![
            (s0, std::sync::Mutex::new(d0)),
            (s1, std::sync::Mutex::new(d1)),
        ]
    };
    let copy_mib = |k: usize| {
        let (s, d) = &pairs[k];
        let mut d = d.lock().unwrap_or_else(|e| e.into_inner());
        for _ in 0..REPS {
            d.copy_from_slice(black_box(s));
            black_box(&mut *d);
        }
    };
    // Warm the pool's two threads before anything is timed.
    both(&copy_mib);

    type Case<'a> = (&'a str, Box<dyn FnMut() -> f64 + 'a>);
    let mut both_cores: Vec<Case> = vec![
        (
            "memcpy, 1 MiB in cache, one core (read + write)",
            Box::new(|| {
                let t = Instant::now();
                copy_mib(0);
                (2 * REPS * mib * 8) as f64 / t.elapsed().as_secs_f64()
            }),
        ),
        (
            "memcpy, 1 MiB in cache on each core at once (both copies' bytes)",
            Box::new(|| (2 * 2 * REPS * mib * 8) as f64 / both(&copy_mib)),
        ),
        (
            "memcpy, 64 MiB split over both cores (read + write)",
            Box::new(|| {
                let secs = both(&|k| {
                    let (s, d) = &halves[k];
                    let mut d = d.lock().unwrap_or_else(|e| e.into_inner());
                    d.copy_from_slice(black_box(s));
                    black_box(&mut *d);
                });
                (2 * big * 8) as f64 / secs
            }),
        ),
        (
            "read, 8 MiB f64 split over both cores",
            Box::new(|| {
                let secs = both(&|k| {
                    black_box(read_sum(black_box(&x8[k * small / 2..(k + 1) * small / 2])));
                });
                (small * 8) as f64 / secs
            }),
        ),
    ];
    let mut bw: Vec<Case> = vec![
        (
            "memcpy, 64 MiB (read + write)",
            Box::new(|| {
                let t = Instant::now();
                dst.copy_from_slice(black_box(&src));
                black_box(&mut dst);
                (2 * big * 8) as f64 / t.elapsed().as_secs_f64()
            }),
        ),
        (
            "read, 64 MiB f64",
            Box::new(|| {
                let t = Instant::now();
                black_box(read_sum(black_box(&src)));
                (big * 8) as f64 / t.elapsed().as_secs_f64()
            }),
        ),
        (
            "read, 8 MiB f64 (the plans' sum-of-squares input)",
            Box::new(|| {
                let t = Instant::now();
                black_box(read_sum(black_box(&x8)));
                (small * 8) as f64 / t.elapsed().as_secs_f64()
            }),
        ),
    ];
    let mut flops: Vec<Case> = vec![(
        "128-bit SSE2 mul + add, f64 (Cranelift's width)",
        Box::new(|| {
            let t = Instant::now();
            // SAFETY: SSE2 is part of the x86-64 baseline.
            let f = unsafe { sse2_mul_add(black_box(1 << 20)) };
            f / t.elapsed().as_secs_f64()
        }),
    )];
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("fma") {
        flops.push((
            "128-bit FMA, f64",
            Box::new(|| {
                let t = Instant::now();
                // SAFETY: FMA detected above.
                let f = unsafe { fma128(black_box(1 << 20)) };
                f / t.elapsed().as_secs_f64()
            }),
        ));
        if is_x86_feature_detected!("avx") {
            flops.push((
                "256-bit FMA, f64 (rustc with run-time dispatch)",
                Box::new(|| {
                    let t = Instant::now();
                    // SAFETY: AVX and FMA detected above.
                    let f = unsafe { fma256(black_box(1 << 20)) };
                    f / t.elapsed().as_secs_f64()
                }),
            ));
        }
    }
    // Barriers: 2 and 4 threads on the 2 cores; seconds per barrier.
    const PASSES: usize = 2_000;
    let mut sync: Vec<Case> = vec![
        (
            "std::sync::Barrier, 2 threads",
            Box::new(|| barriers(2, PASSES, false)),
        ),
        (
            "std::sync::Barrier, 4 threads",
            Box::new(|| barriers(4, PASSES, false)),
        ),
        (
            "yielding barrier, 2 threads",
            Box::new(|| barriers(2, PASSES, true)),
        ),
        (
            "yielding barrier, 4 threads",
            Box::new(|| barriers(4, PASSES, true)),
        ),
    ];
    // Each group of cases in interleaved rounds, as a table of min / median / max in `unit`
    // (each value of a case divided by `scale`); the stats come back for the notes.
    let run = |cases: &mut Vec<Case>, scale: f64, title: String, unit: &str, digits: usize| {
        for (_, f) in cases.iter_mut() {
            f();
        }
        let mut v = vec![vec![]; cases.len()];
        for _ in 0..rounds {
            for (k, (_, f)) in cases.iter_mut().enumerate() {
                v[k].push(f() / scale);
            }
        }
        let stats: Vec<(f64, f64, f64)> = v.iter().map(|s| report::stats(s)).collect();
        let mut t = report::Table::new(
            &format!("{title} ({rounds} rounds)"),
            &[
                ("min", unit, digits),
                ("median", unit, digits),
                ("max", unit, digits),
            ],
        );
        for ((name, _), s) in cases.iter().zip(&stats) {
            t.row(name, vec![s.0, s.1, s.2]);
        }
        (t, stats)
    };
    let (mut t_bw, bws) = run(&mut bw, 1e9, "memory bandwidth, one core".into(), "GB/s", 1);
    let (mut t_b2, b2s) = run(
        &mut both_cores,
        1e9,
        "memory bandwidth, both cores at once".into(),
        "GB/s",
        1,
    );
    let (mut t_fl, fls) = run(
        &mut flops,
        1e9,
        "floating-point throughput, one core, 12 independent chains".into(),
        "GFLOP/s",
        1,
    );
    let (mut t_sy, syn) = run(
        &mut sync,
        1e-6,
        format!("a barrier on the 2 cores, mean of {PASSES} back to back"),
        "us",
        2,
    );

    t_bw.notes.push(format!(
        "At the median 8 MiB read rate, a pass over the plans' 10^6 f64 takes {:.3} ms: the floor for the sum of squares.",
        (small * 8) as f64 / (bws[2].1 * 1e9) * 1e3
    ));
    t_b2.notes.push(format!(
        "Both cores at once against one (medians): {:.2}x for a 1 MiB copy in cache, {:.2}x for the 64 MiB copy, {:.2}x for the 8 MiB read: the most a second thread can add to a memory-bound plan, and the most the ranks of a collective on `sim` can move together, on this VM.",
        b2s[1].1 / b2s[0].1,
        b2s[2].1 / bws[0].1,
        b2s[3].1 / bws[2].1
    ));
    if fls.len() == 3 {
        t_fl.notes.push(format!(
            "256-bit FMA is {:.2}x 128-bit FMA and {:.2}x 128-bit mul + add (medians): the ceiling of code Cranelift emits against rustc's run-time-dispatched kernels.",
            fls[2].1 / fls[1].1,
            fls[2].1 / fls[0].1
        ));
    }
    t_sy.notes.push(format!(
        "With 4 threads on 2 cores every barrier waits for a descheduled thread to run: std's `Barrier` (a futex) costs {:.2} us and a yielding one {:.2} us (medians), against {:.2} us and {:.2} us with 2 threads.",
        syn[1].1, syn[3].1, syn[0].1, syn[2].1
    ));
    let mut r = report::Report::new("machine");
    r.tables.extend([t_bw, t_b2, t_fl, t_sy]);
    r.finish();
}
