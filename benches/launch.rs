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
    r.finish();
}
