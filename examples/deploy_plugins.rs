//! Deploys the plugins the Python package's tests and examples load (`python/tests/`):
//! four sample kernels (one per access category a plan runs, and one with a scalar uniform)
//! and a host program.
//!
//! `cargo run --release --example deploy_plugins -- DIR` writes `DIR/kernels` (the sample
//! kernels `affine`, `smooth`, `histogram` and `axpy`) and `DIR/allreduce` (the host program
//! `builtin_ring` of tutorial step 11, a ring allreduce at any world size).

use eagle::plan::{plan, Structure};
use eagle::prelude::*;

#[allow(dead_code)]
#[path = "11_builtin_allreduce.rs"]
mod step11;

const N: Dim = dynamic!("N");

/// `y = 2x + 1`: sample-local.
#[eagle::kernel(sample, category = "sample_local")]
pub fn affine(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = x[s] * 2.0 + 1.0;
}

/// A three-point periodic stencil: reads its neighbours (cross-sample read).
#[eagle::kernel(sample)]
pub fn smooth(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    let left = (s + N - 1) % N;
    let right = (s + 1) % N;
    y[s] = (x[left] + x[s] + x[right]) / 3.0;
}

/// A 16-bin histogram of values in [0, 1): a mapreduce.
#[eagle::kernel(sample, category = "mapreduce(sum)")]
pub fn histogram(s: usize, x: Tensor<f64, N>, hist: Out<Tensor<f64, 16>>) {
    let b = (x[s] * 16.0) as usize;
    hist[b] += 1.0;
}

/// `y = a * x + y` with scalar uniform `a`: sample-local.
#[eagle::kernel(sample)]
pub fn axpy(s: usize, a: f64, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = a * x[s] + y[s];
}

fn main() -> std::process::ExitCode {
    let Some(dir) = std::env::args().nth(1).map(std::path::PathBuf::from) else {
        eprintln!("usage: deploy_plugins DIR");
        return std::process::ExitCode::from(2);
    };
    let run = || -> eagle::Result<()> {
        let kernels = dir.join("kernels");
        let _ = std::fs::remove_dir_all(&kernels);
        let h = (Structure::HostTeam, Structure::HostTeam);
        eagle::plugin::deploy(&plan(affine, h.0, h.1)?, &kernels)?;
        eagle::plugin::deploy(&plan(smooth, h.0, h.1)?, &kernels)?;
        eagle::plugin::deploy(&plan(histogram, h.0, h.1)?, &kernels)?;
        eagle::plugin::deploy(&plan(axpy, h.0, h.1)?, &kernels)?;
        let hosts = dir.join("allreduce");
        let _ = std::fs::remove_dir_all(&hosts);
        eagle::plugin::deploy_host(step11::builtin_ring, &hosts)
    };
    match run() {
        Ok(()) => {
            println!("{}", dir.display());
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
