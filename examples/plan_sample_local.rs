//! Execution plan example: a sample-local kernel (each sample reads and writes only itself)
//! run on a HostTeam and on a RankPartition of P simulated ranks (P from `-d`).
//!
//! `cargo run --example plan_sample_local -- -d 0,1,2 --mode rank_partition`
use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;

const N: Dim = dynamic!("N");

/// Polar radius and angle of a width-2 plane of points (component-major `[2, n]`).
#[eagle::kernel(sample)]
pub fn polar(s: usize, p: Tensor<f64, 2, N>, r: Out<Tensor<f64, N>>, r2: Out<Tensor<f64, N>>) {
    let x = p[0][s];
    let y = p[1][s];
    r2[s] = x * x + y * y;
    r[s] = sqrt(x * x + y * y);
}

/// Runs the plan in the session's mode and checks every sample bit for bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let n = 100_003;
    let pts = Tensor::from_vec(
        &[2, n],
        (0..2 * n)
            .map(|i| ((i * 37 % 1001) as f64 - 500.0) / 7.0)
            .collect(),
    )?;
    let mut r = Tensor::<f64>::zeros(&[n]);
    let mut r2 = Tensor::<f64>::zeros(&[n]);
    let p = match s.mode() {
        Some("rank_partition") => {
            plan(polar, Structure::RankPartition, Structure::HostTeam)?.on_world(s.world_size())
        }
        _ => plan(polar, Structure::HostTeam, Structure::HostTeam)?,
    }
    .with_trace_of(s);
    p.run(
        s.devices()[0],
        &mut Planes::new()
            .input("p", &pts)
            .output("r", &mut r)
            .output("r2", &mut r2),
    )?;
    for i in 0..n {
        let (x, y) = (pts.data()[i], pts.data()[n + i]);
        if r2.data()[i].to_bits() != (x * x + y * y).to_bits()
            || r.data()[i].to_bits() != (x * x + y * y).sqrt().to_bits()
        {
            return Err(eagle::Error::Check(format!(
                "sample {i}: r = {}, r2 = {}",
                r.data()[i],
                r2.data()[i]
            )));
        }
    }
    Ok(())
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 101,
    name: "plan_sample_local",
    modes: &["host_team", "rank_partition"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
