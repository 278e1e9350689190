//! Scale (issue 37, item 4): the compile time, run time and peak memory of step 11 (the
//! built-in allreduce, each mode) on the simulated platform at P = 4 to 1,024, as one table.
//!
//! `cargo bench --bench scaling` (P = 4, 16, 64, 256, 1024), or
//! `cargo bench --bench scaling -- 4 64` for the world sizes given. Each P runs in its own
//! session; peak memory is the process's resident high-water mark (`VmHWM`), reset before
//! each row through `/proc/self/clear_refs` (Linux), so a row shows what that run needed.
//! The race detector is on unless `EAGLE_RACE_CHECK=0` (the default of a run). The compile
//! column is the launch's compile time (specialization, lowering, Cranelift), the same
//! column the runner prints; it should not grow with P (the collectives are loops over the
//! ranks, issue 37 item 1).

#[allow(dead_code)]
#[path = "../examples/11_builtin_allreduce.rs"]
mod step11;

use eagle::prelude::*;
use std::io::Write;

/// The resident high-water mark of this process, in MiB (`VmHWM`), if the kernel reports it.
fn peak_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Resets the high-water mark to the current resident size (Linux 4.0+).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ps = if args.is_empty() {
        vec![4, 16, 64, 256, 1024]
    } else {
        args
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "| step 11 | P | compile (ms) | run (ms) | peak RSS (MiB) |\n|---|---|---|---|---|"
    );
    for &p in &ps {
        for mode in step11::STEP.modes {
            let reset = reset_peak();
            let session = match Session::sim(p) {
                Ok(s) => s.with_mode(Some(mode.to_string())).with_digest(true),
                Err(e) => {
                    eprintln!("error: P = {p}: {e}");
                    std::process::exit(1);
                }
            };
            let o = step11::STEP.execute(&session);
            if let Err(e) = &o.result {
                eprintln!("error: P = {p}, {mode}: {e}");
                std::process::exit(1);
            }
            drop(session);
            let peak = match (reset, peak_mib()) {
                (true, Some(m)) => format!("{m:.0}"),
                _ => "n/a".to_string(),
            };
            let _ = writeln!(
                out,
                "| `{mode}` | {p} | {:.1} | {:.1} | {peak} |",
                o.compile_ms, o.run_ms
            );
            let _ = out.flush();
        }
    }
}
