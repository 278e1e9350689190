//! In-place collectives (docs/collectives.md, "In place"): one window as both the send and the
//! receive buffer, the form PyPTO's tutorial writes (`broadcast(ctx, w, w, 0)`). Each mode runs
//! one collective in place 200 times and checks every launch bit for bit against the host
//! golden of the out-of-place form; `.ci/run` runs every mode under `mpirun` with Open MPI and
//! MPICH, and on `sim` (where the race detector must find nothing on any launch).
//!
//! `cargo run --example in_place -- -d 0,1,2 --mode broadcast`
use eagle::prelude::*;
use eagle_runner::golden;

const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");

/// Launches per mode.
const LAUNCHES: usize = 200;

/// Defines a per-device program running one collective in place on `w`, and its host.
macro_rules! in_place {
    ($dev:ident, $host:ident, |$ctx:ident, $w:ident| $f:ident($($a:tt)*)) => {
        /// Copies `x` into the window, runs the collective in place, copies the window to `y`.
        #[eagle::kernel(device)]
        pub fn $dev($ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, $w: Window<f32, N>) {
            store($w, [0], load(x, [0], [N]));
            $f($($a)*);
            store(y, [0], load($w, [0], [N]));
        }

        /// One dispatch per rank, one window buffer.
        #[eagle::host]
        pub fn $host(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
            let b = alloc_window_buffer([N], f32);
            for r in 0..world_size() {
                $dev(x[r], y[r], window(b, [N], f32), device = r);
            }
        }
    };
}
in_place!(bcast_d, bcast, |ctx, w| broadcast(ctx, w, w, 0));
in_place!(gather_d, gather, |ctx, w| allgather(ctx, w, w));
in_place!(rs_d, rs, |ctx, w| reduce_scatter(ctx, w, w, Sum));
in_place!(two_d, two, |ctx, w| allreduce(ctx, w, w, Sum, TwoPhase));
in_place!(ring_d, ring, |ctx, w| allreduce(ctx, w, w, Sum, Ring));

/// Runs the mode's collective in place [`LAUNCHES`] times and checks each launch.
pub fn run(s: &Session) -> eagle::Result<()> {
    let (p, n) = (s.world_size(), 13);
    let x = eagle_runner::random_tensor(&[p, n], 35);
    let mode = s.mode().unwrap_or("broadcast");
    let sum = |ring_order: bool| golden::allreduce(&x, |a, b| a + b, ring_order);
    let want: Vec<f32> = (0..p)
        .flat_map(|r| -> Vec<f32> {
            match mode {
                "broadcast" => x.row(0).to_vec(),
                "allgather" => (0..n).map(|j| x.row(golden::owner(n, p, j))[j]).collect(),
                "reduce_scatter" => {
                    let s = sum(false);
                    let mine = golden::chunk(n, p, r);
                    (0..n)
                        .map(|j| if mine.contains(&j) { s[j] } else { x.row(r)[j] })
                        .collect()
                }
                "two_phase" => sum(false),
                _ => sum(true),
            }
        })
        .collect();
    for i in 0..LAUNCHES {
        let mut y = Tensor::<f32>::zeros(&[p, n]);
        match mode {
            "broadcast" => bcast.launch(s, &x, &mut y)?,
            "allgather" => gather.launch(s, &x, &mut y)?,
            "reduce_scatter" => rs.launch(s, &x, &mut y)?,
            "two_phase" => two.launch(s, &x, &mut y)?,
            _ => ring.launch(s, &x, &mut y)?,
        };
        eagle_runner::check_bits(&format!("{mode} in place, launch {i}"), y.data(), &want)?;
    }
    Ok(())
}

/// The example as a step.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 198,
    name: "in_place",
    modes: &[
        "broadcast",
        "allgather",
        "reduce_scatter",
        "two_phase",
        "ring",
    ],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
