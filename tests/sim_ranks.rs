//! How `sim` runs ranks (issue 37, item 3; `eagle::SimRanks`): threads and tasks give the same
//! results, a launch with one never breaks a later launch with the other, and a rank running
//! as a task cannot starve the other ranks of its block.

use eagle::prelude::*;
use eagle::runtime::{Cause, RuntimeError};
use eagle::SimRanks;

const NR: Dim = dynamic!("NR");
/// 2 MiB of `f32`: a tile kept in the stack frame of compiled code (the limit is 4 MiB).
const BIG: usize = 512 * 1024;

#[eagle::kernel(device)]
pub fn heavy(ctx: Ctx, x: Tensor<f32, 1, BIG>, y: Out<Tensor<f32, 1, BIG>>) {
    let a = load(x, [0, 0], [1, BIG]);
    let b = a * 2.0;
    barrier(ctx);
    store(y, [0, 0], b + a);
}

#[eagle::host]
pub fn heavy_host(x: Tensor<f32, NR, 1, BIG>, y: Out<Tensor<f32, NR, 1, BIG>>) {
    for r in 0..world_size() {
        heavy(x[r], y[r], device = r);
    }
}

#[eagle::kernel(device)]
pub fn light(ctx: Ctx) {
    barrier(ctx);
}

#[eagle::host]
pub fn light_host() {
    for r in 0..world_size() {
        light(device = r);
    }
}

/// A launch with ranks as tasks, then one with a thread per rank running a kernel that keeps
/// 4 MiB of tiles on its stack: the second gets workers with a device thread's stack (the
/// pool once handed it the tasks' small-stack workers, and the process died of a stack
/// overflow), and the same kernel runs as tasks too.
#[test]
fn a_launch_with_threads_after_one_with_tasks_has_its_full_stack() {
    light_host
        .launch(&Session::sim(64).unwrap().with_sim_ranks(SimRanks::Tasks))
        .unwrap();
    for (p, ranks) in [(2, SimRanks::Threads), (4, SimRanks::Tasks)] {
        let x = Tensor::from_vec(
            &[p, 1, BIG],
            (0..p * BIG).map(|i| (i % 1000) as f32).collect(),
        )
        .unwrap();
        let mut y = Tensor::<f32>::zeros(&[p, 1, BIG]);
        heavy_host
            .launch(&Session::sim(p).unwrap().with_sim_ranks(ranks), &x, &mut y)
            .unwrap();
        assert!(
            y.data().iter().zip(x.data()).all(|(y, x)| *y == 3.0 * x),
            "{ranks:?}"
        );
    }
}

/// Rank 0 polls its own window until rank 1 has stored there (a data race, which the detector
/// reports, but a pattern ported programs have).
#[eagle::kernel(device, while_cap = 200000000)]
pub fn poll(ctx: Ctx, win: Window<i32, 1, 1>, y: Out<Tensor<i32, 1, 1>>) {
    let me = rank(ctx);
    if me == 0 {
        let mut v: i32 = 0;
        while v == 0 {
            v = win[0][0];
        }
        y[0][0] = v;
    }
    if me == 1 {
        remote_store(win, 0, [0, 0], load(y, [0, 0], [1, 1]) + 1);
    }
    barrier(ctx);
}

#[eagle::host]
pub fn poll_host(y: Out<Tensor<i32, NR, 1, 1>>) {
    let win = alloc_window_buffer([1, 1], i32);
    for r in 0..world_size() {
        poll(window(win, [1, 1], i32), y[r], device = r);
    }
}

/// As a task, rank 0's polling loop gives its worker to the other ranks of its block every
/// so many reads, so rank 1 (in the same block) stores and rank 0 sees it, as with threads;
/// with the race detector on, the race is reported, as with threads.
#[test]
fn a_rank_polling_a_window_lets_the_rest_of_its_block_run() {
    for ranks in [SimRanks::Threads, SimRanks::Tasks] {
        let s = Session::sim(64)
            .unwrap()
            .with_sim_ranks(ranks)
            .with_race_check(false);
        let mut y = Tensor::<i32>::zeros(&[64, 1, 1]);
        poll_host.launch(&s, &mut y).unwrap();
        assert_eq!(y.data()[0], 1, "{ranks:?}");
        let s = Session::sim(64).unwrap().with_sim_ranks(ranks);
        match poll_host.launch(&s, &mut y) {
            Err(eagle::Error::Runtime(RuntimeError::RankFailed {
                cause: Cause::Race(m),
                ..
            })) => assert!(m.contains("data race: rank "), "{m}"),
            other => panic!("{ranks:?}: expected a race, got {other:?}"),
        }
    }
}
