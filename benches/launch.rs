//! Launch overhead: the mean time of 10,000 back-to-back launches of a host program that
//! dispatches one empty per-device function per device, at P = 1 and P = 4, and of a host
//! program that dispatches nothing. Rounds are interleaved (P = 1, P = 4, none, P = 1, ...);
//! the table gives the min / median / max over rounds of each round's mean.
//!
//! `cargo bench --bench launch` (`-- --quick` for 3 rounds of 1,000; `-- --save` writes
//! `docs/bench/launch.json` and its table in `docs/performance.md`)

use eagle::prelude::*;
use std::time::Instant;

#[path = "report/mod.rs"]
mod report;

/// An empty per-device program.
#[eagle::kernel(device)]
pub fn nop_d(ctx: Ctx) {}

/// One empty dispatch per device.
#[eagle::host]
pub fn nop() {
    for r in 0..world_size() {
        nop_d(device = r);
    }
}

/// A per-device program that waits for every device: ranks must run at once.
#[eagle::kernel(device)]
pub fn sync_d(ctx: Ctx) {
    barrier(ctx);
}

/// One barrier per device.
#[eagle::host]
pub fn sync() {
    for r in 0..world_size() {
        sync_d(device = r);
    }
}

/// Samples of the stencil (the interior: M - 2 = 2^20).
const M: usize = (1 << 20) + 2;
/// Tile width of the stencil.
const SB: usize = 1024;

/// 3-point stencil over the interior of `x`: `y[i] = (x[i - 1] + x[i] + x[i + 1]) * k`.
#[eagle::kernel(device)]
pub fn stencil3_d(ctx: Ctx, x: Tensor<f32, M>, y: Out<Tensor<f32, M>>, k: f32) {
    for t in 0..(M - 2) / SB {
        let o = 1 + t * SB;
        let l = load(x, [o - 1], [SB]);
        let c = load(x, [o], [SB]);
        let r = load(x, [o + 1], [SB]);
        store(y, [o], (l + c + r) * k);
    }
}

/// One stencil on device 0.
#[eagle::host]
pub fn stencil3(x: Tensor<f32, M>, y: Out<Tensor<f32, M>>, k: f32) {
    stencil3_d(x, y, k, device = 0);
}

/// The same loop in Rust.
fn stencil3_rust(x: &[f32], y: &mut [f32], k: f32) {
    for ((o, w), _) in y[1..M - 1].iter_mut().zip(x.windows(3)).zip(0..) {
        *o = (w[0] + w[1] + w[2]) * k;
    }
}

/// A host program that dispatches nothing.
#[eagle::host]
pub fn nothing() {}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, per) = if quick { (3, 1_000) } else { (7, 10_000) };
    // (name, session, program): 0 = empty dispatches, 1 = a barrier on every device (one
    // thread per device), 2 = no dispatch.
    let cases: Vec<(&str, Session, u8)> = vec![
        (
            "P = 1, 1 empty dispatch",
            Session::sim(1).expect("session"),
            0,
        ),
        (
            "P = 4, 4 empty dispatches",
            Session::sim(4).expect("session"),
            0,
        ),
        (
            "P = 4, 4 dispatches with a barrier",
            Session::sim(4).expect("session"),
            1,
        ),
        ("P = 4, no dispatch", Session::sim(4).expect("session"), 2),
    ];
    let launch = |s: &Session, d: u8| match d {
        0 => nop.launch(s).expect("nop"),
        1 => sync.launch(s).expect("sync"),
        _ => nothing.launch(s).expect("nothing"),
    };
    let mut means: Vec<Vec<f64>> = vec![vec![]; cases.len()];
    for (_, s, d) in &cases {
        launch(s, *d);
    }
    for _ in 0..rounds {
        for (k, (_, s, d)) in cases.iter().enumerate() {
            let t = Instant::now();
            for _ in 0..per {
                launch(s, *d);
            }
            means[k].push(t.elapsed().as_secs_f64() / per as f64);
        }
    }
    let mut t = report::Table::new(
        &format!("launch (mean of {per} back to back, {rounds} rounds)"),
        &[("min", "us", 2), ("median", "us", 2), ("max", "us", 2)],
    );
    for (k, (name, _, _)) in cases.iter().enumerate() {
        let (lo, med, hi) = report::stats(&means[k]);
        t.row(name, vec![lo * 1e6, med * 1e6, hi * 1e6]);
    }
    let mut r = report::Report::new("launch");
    r.tables.push(t);

    // A 3-point stencil over 2^20 f32, one launch per call, arguments included: `sim` copies
    // x and y in and y out on every launch, `cpu` uses them in place.
    let k = 1.0f32 / 3.0;
    let x = Tensor::from_vec(&[M], (0..M).map(|i| ((i as f32) * 0.01).sin()).collect()).expect("x");
    let (sim, cpu) = (
        Session::sim(1).expect("sim"),
        Session::new(eagle::runtime::Platform::Cpu, vec![0]).expect("cpu"),
    );
    let (mut ys, mut yc) = (Tensor::<f32>::zeros(&[M]), Tensor::<f32>::zeros(&[M]));
    let mut yr = vec![0f32; M];
    stencil3_rust(x.data(), &mut yr, k);
    let a = stencil3.launch(&sim, &x, &mut ys, k).expect("sim");
    let b = stencil3.launch(&cpu, &x, &mut yc, k).expect("cpu");
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(ys.data()), bits(&yr), "sim stencil bits");
    assert_eq!(bits(yc.data()), bits(&yr), "cpu stencil bits");
    assert_eq!(b.run.copied_bytes, 0, "cpu runs in place");
    let reps = if quick { 5 } else { 20 };
    let (mut ts, mut tc, mut tr) = (vec![], vec![], vec![]);
    for _ in 0..rounds {
        let t0 = Instant::now();
        for _ in 0..reps {
            stencil3.launch(&sim, &x, &mut ys, k).expect("sim");
        }
        ts.push(t0.elapsed().as_secs_f64() / reps as f64);
        let t0 = Instant::now();
        for _ in 0..reps {
            stencil3.launch(&cpu, &x, &mut yc, k).expect("cpu");
        }
        tc.push(t0.elapsed().as_secs_f64() / reps as f64);
        let t0 = Instant::now();
        for _ in 0..reps {
            stencil3_rust(std::hint::black_box(x.data()), &mut yr, k);
            std::hint::black_box(&mut yr);
        }
        tr.push(t0.elapsed().as_secs_f64() / reps as f64);
    }
    let mut t = report::Table::new(
        &format!("3-point stencil, 2^20 f32, one launch per call ({rounds} rounds of {reps})"),
        &[("min", "ms", 3), ("median", "ms", 3), ("max", "ms", 3)],
    );
    let (s1, c1, r1) = (report::stats(&ts), report::stats(&tc), report::stats(&tr));
    t.row(
        "eagle on `sim` (copies in and out)",
        vec![s1.0 * 1e3, s1.1 * 1e3, s1.2 * 1e3],
    );
    t.row(
        "eagle on `cpu` (in place)",
        vec![c1.0 * 1e3, c1.1 * 1e3, c1.2 * 1e3],
    );
    t.row("Rust loop", vec![r1.0 * 1e3, r1.1 * 1e3, r1.2 * 1e3]);
    t.notes.push(format!(
        "Of the Rust loop (medians): `cpu` {:.2}, `sim` {:.2}; copied per launch: `sim` {} bytes, `cpu` {} (all three give the same bits).",
        r1.1 / c1.1,
        r1.1 / s1.1,
        a.run.copied_bytes,
        b.run.copied_bytes
    ));
    r.tables.push(t);
    r.finish();
}
