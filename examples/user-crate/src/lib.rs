//! my-kernels: a minimal crate built on eagle.
//!
//! - [`shift_rows`] is a per-device program (a kernel that runs on one device of the world);
//! - [`shift_all`] is the host program that dispatches it to every rank, with the rank count
//!   a symbolic dimension (`NR`), so the same source runs at any world size;
//! - [`softplus`] is a sample kernel, and [`softplus_plan`] runs it as an execution plan
//!   over CPU threads.

use eagle::plan::{plan, Plan, Structure};
use eagle::prelude::*;

/// Elements per rank.
pub const LEN: usize = 64;
/// The rank count, bound from the arguments' shapes when the program is launched.
pub const NR: Dim = dynamic!("NR");
/// Samples of a plan, bound when the plan runs.
pub const N: Dim = dynamic!("N");

/// Per-device program: `y = 2 * x + rank`, on one device.
#[eagle::kernel(device)]
pub fn shift_rows(ctx: Ctx, x: Tensor<f32, 1, LEN>, y: Out<Tensor<f32, 1, LEN>>) {
    let t = load(x, [0, 0], [1, LEN]);
    store(y, [0, 0], t * 2.0 + rank(ctx) as f32);
}

/// Host program: row `r` of `x` goes to device `r`. Shapes: `x`, `y` are `[P, 1, LEN]` f32.
#[eagle::host]
pub fn shift_all(x: Tensor<f32, NR, 1, LEN>, y: Out<Tensor<f32, NR, 1, LEN>>) {
    for r in 0..world_size() {
        shift_rows(x[r], y[r], device = r);
    }
}

/// Sample kernel: `out[s] = ln(1 + exp(x[s]))`, each sample on its own (sample-local).
#[eagle::kernel(sample, category = "sample_local")]
pub fn softplus(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, N>>) {
    out[s] = ln(1.0 + exp(x[s]));
}

/// [`softplus`] as an execution plan over `threads` CPU threads.
///
/// # Errors
/// Building the kernel's IR fails only if the kernel is malformed.
pub fn softplus_plan(threads: usize) -> eagle::Result<Plan> {
    Ok(plan(softplus, Structure::HostTeam, Structure::HostTeam)?.with_threads(threads))
}
