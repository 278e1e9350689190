//! Execution plan example: a histogram mapreduce. Every sample adds 1 to one of 64 cells; the
//! plan forms one partial per row of 32 samples and folds the rows in order, so the result is
//! the same bits on any number of ranks and threads. Also deploys the kernel as a plugin and
//! runs the loaded copy.
//!
//! `cargo run --example plan_histogram -- -d 0,1,2,3 --mode rank_partition`
use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;

const N: Dim = dynamic!("N");

/// Histogram of values in [0, 1) over 64 bins, plus a weighted sum per bin.
#[eagle::kernel(sample, category = "mapreduce(sum)")]
pub fn histogram(s: usize, x: Tensor<f64, N>, counts: Out<Tensor<f64, 64>>) {
    let b = min((x[s] * 64.0) as usize, 63);
    counts[b] += 1.0;
}

/// Runs the plan (and its plugin copy) and checks the counts.
pub fn run(s: &Session) -> eagle::Result<()> {
    let n = 200_000;
    let x = Tensor::from_vec(
        &[n],
        (0..n)
            .map(|i| ((i as f64) * 0.618_033_988_75).fract())
            .collect(),
    )?;
    let mut counts = Tensor::<f64>::zeros(&[64]);
    let p = match s.mode() {
        Some("rank_partition") => {
            plan(histogram, Structure::RankPartition, Structure::HostTeam)?.on_world(s.world_size())
        }
        _ => plan(histogram, Structure::HostTeam, Structure::HostTeam)?,
    }
    .with_trace_of(s);
    p.run(
        s.devices()[0],
        &mut Planes::new().input("x", &x).output("counts", &mut counts),
    )?;
    let mut want = [0.0f64; 64];
    for &v in x.data() {
        want[((v * 64.0) as usize).min(63)] += 1.0;
    }
    eagle_runner::check_bits_f64("counts", counts.data(), &want)?;
    // Deploy, load without the source, and run again: the same bits.
    let dir = std::env::temp_dir().join(format!("eagle-plugin-{}", std::process::id()));
    eagle::plugin::deploy(&p, &dir)?;
    let loaded = eagle::plugin::load(&dir, "histogram")?;
    let mut again = Tensor::<f64>::zeros(&[64]);
    loaded.plan(Structure::HostTeam, Structure::HostTeam)?.run(
        0,
        &mut Planes::new().input("x", &x).output("counts", &mut again),
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    eagle_runner::check_bits_f64("counts (plugin)", again.data(), counts.data())
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 103,
    name: "plan_histogram",
    modes: &["host_team", "rank_partition"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
