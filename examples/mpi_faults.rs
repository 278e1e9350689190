//! Planted faults for real ranks: each `--mode` makes the ranks disagree in one way that used
//! to hang an MPI job or give a silent wrong result. Under `mpirun` every mode must end every
//! rank with an error that names the difference (exit 1) within the wait timeout plus a few
//! seconds; `.ci/run` runs each. Without `mpirun` (one process) a lone rank cannot disagree
//! with itself and every mode runs cleanly, except `barrier_count`, which `sim` reports as a
//! deadlock at once.
//!
//! `mpirun -np 2 target/release/examples/mpi_faults -d 0,1 --mode shape_mismatch`
//!
//! - `launch_error`: the last rank passes an output of the wrong shape (its launch fails
//!   before running; the others would have waited in the window allocation).
//! - `shape_mismatch`: the last rank passes N = 4 where the others pass N = 8, each valid on
//!   its own rank (the outputs used to be wrong with exit 0).
//! - `skip_launch`: the last rank skips the second of two launches.
//! - `barrier_count`: rank 0 enters a barrier that no other rank enters.
//! - `stopped_rank`: the last rank stops (SIGSTOP) before its launch.
//! - `plan_n`: a RankPartition plan whose last rank has 769 samples, the others 777.
//! - `uniform_differs`: a RankPartition plan whose scalar uniform `a` is the rank's number, so
//!   it differs between ranks.
//! - `gather_share`: `RankPartition::allgather_plane` with a wrong share on the last rank.
//! - `busy_in_barrier`: the last rank computes for a long time inside a kernel (outside any
//!   MPI call) while the others wait in its barrier.
//! - `stopped_in_barrier`: the same, and the last rank stops (SIGSTOP) meanwhile. Under MPICH
//!   both used to hang the others in `MPI_Win_flush` for good; the watchdog ends them.
//! - `exit_mid_run`: the last rank calls `exit(0)` after the first of two launches: the job
//!   must not exit 0.
//! - `plain_partition`: a RankPartition plan run without `on_world`/`with_simulated_ranks`:
//!   over MPI under `mpirun`; without it, one rank computes everything (a build with the
//!   `mpi` feature used to abort there, "called before MPI_INIT"); a build without the
//!   feature names it.
//! - `early_err`: the last rank fails before its launch (it "could not read its input") and
//!   goes on to the final vote while the others wait at the launch: every rank names its
//!   error.
use eagle::plan::{plan, Partition, Planes, RankPartition, Structure};
use eagle::prelude::*;

const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");

/// Copies this rank's row and adds its rank.
#[eagle::kernel(device)]
pub fn add_rank(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    store(y, [0], load(x, [0], [N]) + rank(ctx) as f32);
}

/// One dispatch of `add_rank` per rank.
#[eagle::host]
pub fn rows(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    for r in 0..world_size() {
        add_rank(x[r], y[r], device = r);
    }
}

/// Rank 0 enters a barrier that the other ranks never enter.
#[eagle::kernel(device)]
pub fn lonely_barrier(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    if rank(ctx) == 0 {
        barrier(ctx);
    }
    store(y, [0], load(x, [0], [N]));
}

/// One dispatch of `lonely_barrier` per rank.
#[eagle::host]
pub fn uneven_barriers(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    for r in 0..world_size() {
        lonely_barrier(x[r], y[r], device = r);
    }
}

/// The last rank spins `spins` times (outside any MPI call) before the barrier.
#[eagle::kernel(device)]
pub fn busy_barrier(ctx: Ctx, spins: usize, y: Out<Tensor<f32, 1>>) {
    let mut a = 0.0f32;
    if rank(ctx) + 1 == nranks(ctx) {
        for _i in 0..spins {
            a = a * 0.5 + 1.0;
        }
    }
    barrier(ctx);
    y[0] = a;
}

/// One dispatch of `busy_barrier` per rank.
#[eagle::host]
pub fn busy(spins: usize, y: Out<Tensor<f32, NR, 1>>) {
    for r in 0..world_size() {
        busy_barrier(spins, y[r], device = r);
    }
}

/// A sample-local plan kernel.
#[eagle::kernel(sample)]
pub fn twice(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = x[s] + x[s];
}

/// A sample-local plan kernel with a scalar uniform.
#[eagle::kernel(sample)]
pub fn scaled(s: usize, a: f64, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = a * x[s];
}

/// Runs the mode on this process's rank (`me`) of a world of `s.world_size()` ranks.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let (me, _) = RankPartition::world();
    let last = me + 1 == p && p > 1 && RankPartition::world().1 > 1;
    let mode = s.mode().unwrap_or("shape_mismatch");
    let launch_rows = |n: usize, yn: usize| -> eagle::Result<()> {
        let x = Tensor::<f32>::from_vec(&[p, n], (0..p * n).map(|i| i as f32).collect())?;
        let mut y = Tensor::<f32>::zeros(&[p, yn]);
        rows.launch(s, &x, &mut y)?;
        for r in 0..p {
            for i in 0..n {
                let want = x.data()[r * n + i] + r as f32;
                if y.data()[r * n + i].to_bits() != want.to_bits() {
                    return Err(eagle::Error::Check(format!(
                        "y[{r}][{i}] = {}, expected {want}",
                        y.data()[r * n + i]
                    )));
                }
            }
        }
        Ok(())
    };
    match mode {
        "launch_error" => launch_rows(8, if last { 4 } else { 8 }),
        "shape_mismatch" => {
            let n = if last { 4 } else { 8 };
            launch_rows(n, n)
        }
        "skip_launch" => {
            launch_rows(8, 8)?;
            if !last {
                launch_rows(8, 8)?;
            }
            Ok(())
        }
        "barrier_count" => {
            let x = Tensor::<f32>::zeros(&[p, 8]);
            let mut y = Tensor::<f32>::zeros(&[p, 8]);
            uneven_barriers.launch(s, &x, &mut y)?;
            Ok(())
        }
        "stopped_rank" => {
            if last {
                let _ = std::process::Command::new("kill")
                    .args(["-STOP", &std::process::id().to_string()])
                    .status();
            }
            launch_rows(8, 8)
        }
        "plan_n" => {
            let n = if last { 769 } else { 777 };
            let x = Tensor::<f64>::from_vec(&[n], (0..n).map(|i| i as f64).collect())?;
            let mut y = Tensor::<f64>::zeros(&[n]);
            plan(twice, Structure::RankPartition, Structure::HostTeam)?
                .on_world(p)
                .run(
                    s.devices()[0],
                    &mut Planes::new().input("x", &x).output("y", &mut y),
                )?;
            let sum: f64 = y.data().iter().sum();
            let want: f64 = (0..n).map(|i| 2.0 * i as f64).sum();
            if sum.to_bits() != want.to_bits() {
                return Err(eagle::Error::Check(format!(
                    "sum of y = {sum}, expected {want}"
                )));
            }
            Ok(())
        }
        "uniform_differs" => {
            let x = Tensor::<f64>::from_vec(&[8], vec![1.0; 8])?;
            let mut y = Tensor::<f64>::zeros(&[8]);
            plan(scaled, Structure::RankPartition, Structure::HostTeam)?
                .on_world(p)
                .run(
                    s.devices()[0],
                    &mut Planes::new()
                        .uniform("a", me as f64)
                        .input("x", &x)
                        .output("y", &mut y),
                )
        }
        "gather_share" => {
            let world = RankPartition::world().1;
            let part = Partition::new(100, world);
            let mut local: Vec<f64> = RankPartition::local(&part).map(|i| i as f64).collect();
            if last {
                local.pop();
            }
            if world == 1 {
                return Ok(());
            }
            let all = RankPartition::allgather_plane(&local, &part)?;
            eagle_runner::check_bits_f64(
                "gathered plane",
                &all,
                &(0..100).map(|i| i as f64).collect::<Vec<_>>(),
            )
        }
        "busy_in_barrier" | "stopped_in_barrier" => {
            // Long enough to outlast any wait timeout a test gives (about 20 s and more);
            // one rank alone (no mpirun) does not spin.
            let multi = RankPartition::world().1 > 1;
            let spins: usize = if multi { 20_000_000_000 } else { 0 };
            if last && mode == "stopped_in_barrier" {
                std::thread::spawn(|| {
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    let _ = std::process::Command::new("kill")
                        .args(["-STOP", &std::process::id().to_string()])
                        .status();
                });
            }
            let mut y = Tensor::<f32>::zeros(&[p, 1]);
            busy.launch(s, spins, &mut y)?;
            Ok(())
        }
        "exit_mid_run" => {
            launch_rows(8, 8)?;
            if last {
                std::process::exit(0);
            }
            launch_rows(8, 8)
        }
        "plain_partition" => {
            let n = 777;
            let x = Tensor::<f64>::from_vec(&[n], (0..n).map(|i| i as f64).collect())?;
            let mut y = Tensor::<f64>::zeros(&[n]);
            let r = plan(twice, Structure::RankPartition, Structure::HostTeam)?.run(
                s.devices()[0],
                &mut Planes::new().input("x", &x).output("y", &mut y),
            );
            if !RankPartition::available() {
                return match r {
                    Err(e) if e.to_string().contains("`mpi` feature") => Ok(()),
                    other => Err(eagle::Error::Check(format!(
                        "expected the error naming the `mpi` feature, got {other:?}"
                    ))),
                };
            }
            r?;
            let want: Vec<f64> = (0..n).map(|i| 2.0 * i as f64).collect();
            eagle_runner::check_bits_f64("y", y.data(), &want)
        }
        "early_err" => {
            if last {
                return Err(eagle::Error::Input(format!(
                    "rank {me} could not read its input"
                )));
            }
            launch_rows(8, 8)
        }
        other => Err(eagle::Error::Usage(format!(
            "argument `--mode`: unknown mode `{other}`"
        ))),
    }
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 197,
    name: "mpi_faults",
    modes: &[
        "launch_error",
        "shape_mismatch",
        "skip_launch",
        "barrier_count",
        "stopped_rank",
        "plan_n",
        "uniform_differs",
        "gather_share",
        "busy_in_barrier",
        "stopped_in_barrier",
        "exit_mid_run",
        "early_err",
        "plain_partition",
    ],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
