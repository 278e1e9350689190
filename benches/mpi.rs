//! MPI benchmarks (feature `mpi`; run under `mpirun`), OSU-style: warm-up, then the average of
//! many iterations, printed by rank 0 as a markdown table.
//!
//! `cargo build --release --features mpi --bench mpi` then
//! `mpirun -np 2 target/release/deps/mpi-<hash> --bench` (see docs/mpi.md for the command).
//!
//! 1. RankPartition's gather of an 8 MiB f64 plane (`RankPartition::allgather_plane`) against a
//!    raw `MPI_Allgatherv` of the same bytes through rsmpi.
//! 2. The built-in allgather (compiled, over MPI RMA windows) against `MPI_Allgather`, 1 KiB to
//!    4 MiB per rank.
//! 3. A kernel's barrier (`MPI_Ibarrier` polled against the wait timeout) against
//!    `MPI_Barrier`, and a launch's fixed cost (windows kept between launches).

#[cfg(feature = "mpi")]
mod bench {
    use eagle::plan::{Partition, RankPartition};
    use eagle::prelude::*;
    use eagle::runtime::mpi_rt::mpi;
    use mpi::collective::CommunicatorCollectives;
    use mpi::datatype::PartitionMut;
    use std::time::Instant;

    const NR: Dim = dynamic!("NR");
    const N: Dim = dynamic!("N");

    /// Allgather `iters` times.
    #[eagle::kernel(device)]
    pub fn ag_d(ctx: Ctx, src: Window<f64, N>, dst: Window<f64, N>, iters: usize) {
        for i in 0..iters {
            allgather(ctx, src, dst);
        }
    }

    /// `iters` barriers.
    #[eagle::kernel(device)]
    pub fn barriers_d(ctx: Ctx, iters: usize, y: Out<Tensor<f32, 1>>) {
        for _i in 0..iters {
            barrier(ctx);
        }
        y[0] = 1.0;
    }

    /// Host of `barriers_d`.
    #[eagle::host]
    pub fn barriers(iters: usize, y: Out<Tensor<f32, NR, 1>>) {
        for r in 0..world_size() {
            barriers_d(iters, y[r], device = r);
        }
    }

    /// Host.
    #[eagle::host]
    pub fn ag(x: Tensor<f64, NR, N>, iters: usize) {
        let s = alloc_window_buffer([N], f64);
        let d = alloc_window_buffer([N], f64);
        for r in 0..world_size() {
            ag_d(window(s, [N], f64), window(d, [N], f64), iters, device = r);
        }
    }

    pub fn main() {
        let guard = eagle_runner::MpiGuard::init();
        let (rank, size) = (guard.rank, guard.size);
        let world = mpi::topology::SimpleCommunicator::world();
        let root = rank == 0;
        // 1. Plane gather, 8 MiB of f64.
        let n = (8 << 20) / 8;
        let part = Partition::new(n, size);
        let local: Vec<f64> = part.share(rank).map(|i| i as f64).collect();
        let iters = 20;
        let mut gathered = vec![0f64; n];
        RankPartition::allgather_plane_into(&local, &part, &mut gathered).expect("gather");
        world.barrier();
        let t = Instant::now();
        for _ in 0..iters {
            RankPartition::allgather_plane_into(&local, &part, &mut gathered).expect("gather");
        }
        let eagle_t = t.elapsed().as_secs_f64() / iters as f64;
        let counts: Vec<i32> = (0..size).map(|q| part.share(q).len() as i32).collect();
        let displs: Vec<i32> = (0..size).map(|q| part.share(q).start as i32).collect();
        let mut out = vec![0f64; n];
        world.barrier();
        let t = Instant::now();
        for _ in 0..iters {
            let mut p = PartitionMut::new(&mut out[..], &counts[..], &displs[..]);
            world.all_gather_varcount_into(&local[..], &mut p);
        }
        let raw_t = t.elapsed().as_secs_f64() / iters as f64;
        if root {
            println!("| RankPartition gather, 8 MiB f64 plane, np = {size} | eagle {:.3} ms | raw MPI_Allgatherv {:.3} ms | ratio {:.3} |", eagle_t * 1e3, raw_t * 1e3, eagle_t / raw_t);
        }
        let s = Session::new(eagle::Platform::Sim, (0..size).collect()).expect("session");
        // 3. Barriers, and what a launch costs besides.
        let mut y = Tensor::<f32>::zeros(&[size, 1]);
        barriers.launch(&s, 10, &mut y).expect("warm-up");
        let launches = 50;
        let t0 = Instant::now();
        for _ in 0..launches {
            barriers.launch(&s, 0, &mut y).expect("base");
        }
        let launch_t = t0.elapsed().as_secs_f64() / launches as f64;
        let iters = 3000;
        let t1 = Instant::now();
        barriers.launch(&s, iters, &mut y).expect("run");
        let eagle_t = ((t1.elapsed().as_secs_f64() - launch_t) / iters as f64).max(1e-9);
        world.barrier();
        let t2 = Instant::now();
        for _ in 0..iters {
            world.barrier();
        }
        let mpi_t = t2.elapsed().as_secs_f64() / iters as f64;
        if root {
            println!();
            println!("| np | eagle barrier | MPI_Barrier | ratio | a launch (0 barriers) |");
            println!("|---|---|---|---|---|");
            println!(
                "| {size} | {:.1} us | {:.1} us | {:.2} | {:.2} ms |",
                eagle_t * 1e6,
                mpi_t * 1e6,
                eagle_t / mpi_t,
                launch_t * 1e3
            );
        }
        // 2. Built-in allgather against MPI_Allgather.
        if root {
            println!();
            println!("| bytes per rank | np | eagle allgather | MPI_Allgather | ratio |");
            println!("|---|---|---|---|---|");
        }
        for k in 0..7 {
            let per_rank = 1024usize << (2 * k).min(12);
            let per_rank = if k == 6 { 4 << 20 } else { per_rank };
            // eagle's allgather gathers chunks of one N-element buffer: N = P * per-rank elements.
            let n = per_rank / 8 * size;
            let x = Tensor::<f64>::zeros(&[size, n]);
            let iters = (64usize << 20) / (per_rank * size).max(1);
            let iters = iters.clamp(10, 1000);
            ag.launch(&s, &x, 2).expect("warm-up");
            let t0 = Instant::now();
            ag.launch(&s, &x, 0).expect("base");
            let base = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            ag.launch(&s, &x, iters).expect("run");
            let eagle_t = ((t1.elapsed().as_secs_f64() - base) / iters as f64).max(1e-9);
            let send = vec![1u8; per_rank];
            let mut recv = vec![0u8; per_rank * size];
            for _ in 0..10 {
                world.all_gather_into(&send[..], &mut recv[..]);
            }
            world.barrier();
            let t2 = Instant::now();
            for _ in 0..iters {
                world.all_gather_into(&send[..], &mut recv[..]);
            }
            let mpi_t = t2.elapsed().as_secs_f64() / iters as f64;
            if root {
                println!(
                    "| {} KiB | {size} | {:.1} us | {:.1} us | {:.2} |",
                    per_rank >> 10,
                    eagle_t * 1e6,
                    mpi_t * 1e6,
                    eagle_t / mpi_t
                );
            }
        }
    }
}

fn main() {
    #[cfg(feature = "mpi")]
    bench::main();
    #[cfg(not(feature = "mpi"))]
    println!("build with `--features mpi` and run under mpirun (see docs/mpi.md)");
}
