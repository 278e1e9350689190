//! Execution plan example: a cross-sample stencil (each sample reads its neighbours' inputs).
//! Inputs are replicated on every rank, so a RankPartition runs it unchanged.
//!
//! `cargo run --example plan_stencil -- -d 0,1,2,3 --mode rank_partition`
use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;

const N: Dim = dynamic!("N");

/// Five-point periodic smoothing: `y[s] = (x[s-2] + x[s-1] + x[s] + x[s+1] + x[s+2]) / 5`.
#[eagle::kernel(sample, category = "cross_sample_read")]
pub fn smooth(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    let a = x[(s + N - 2) % N];
    let b = x[(s + N - 1) % N];
    let c = x[s];
    let d = x[(s + 1) % N];
    let e = x[(s + 2) % N];
    y[s] = (a + b + c + d + e) / 5.0;
}

/// Runs the plan and checks it against the same sum in the same order.
pub fn run(s: &Session) -> eagle::Result<()> {
    let n = 50_001;
    let x = Tensor::from_vec(
        &[n],
        (0..n)
            .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
            .collect(),
    )?;
    let mut y = Tensor::<f64>::zeros(&[n]);
    let p = match s.mode() {
        Some("rank_partition") => plan(smooth, Structure::RankPartition, Structure::DeviceKernel)?
            .on_world(s.world_size()),
        _ => plan(smooth, Structure::HostTeam, Structure::HostTeam)?,
    }
    .with_trace_of(s);
    p.run(
        s.devices()[0],
        &mut Planes::new().input("x", &x).output("y", &mut y),
    )?;
    let d = x.data();
    for i in 0..n {
        let want =
            (d[(i + n - 2) % n] + d[(i + n - 1) % n] + d[i] + d[(i + 1) % n] + d[(i + 2) % n])
                / 5.0;
        if y.data()[i].to_bits() != want.to_bits() {
            return Err(eagle::Error::Check(format!(
                "y[{i}] = {}, expected {want}",
                y.data()[i]
            )));
        }
    }
    Ok(())
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 102,
    name: "plan_stencil",
    modes: &["host_team", "rank_partition"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
