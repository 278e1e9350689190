//! A 2-D Jacobi sweep on a grid decomposed over a 2-D process grid, halos exchanged with the
//! four neighbours through windows and signals.
//!
//! The P ranks form a `rows x cols` process grid ([`process_grid`]: the most square
//! factorisation, `rows <= cols`; P = 6 is 2 x 3, a prime P is 1 x P), rank `r` at grid row
//! `r / cols`, column `r % cols`. Each rank owns a `BR x BC` block of the interior, so the
//! global grid is `rows * BR + 2` by `cols * BC + 2` cells with a fixed (Dirichlet) boundary
//! ring. Each of the `ITERS` iterations computes, for every interior cell, the 9-point
//! Laplace stencil
//!
//! `new = ((n + s) + (w + e)) * 0.2 + ((nw + ne) + (sw + se)) * 0.05`
//!
//! from the previous iterate (two buffers, Jacobi), in this order of operations, then
//! exchanges halos in two phases:
//!
//! 1. **columns**: the first and last interior columns to the west and east neighbours' halo
//!    columns (`remote_store` + `notify`), then wait for mine;
//! 2. **rows**: the first and last rows *including the halo columns just received* to the
//!    north and south neighbours' halo rows, then wait for mine. The corner cells thus reach
//!    the diagonal neighbours in two hops, with no diagonal message.
//!
//! Every signal carries the iteration number (`Set`), and a rank waits for `>=` it, so a
//! neighbour one iteration ahead never deadlocks it; the double buffer keeps a neighbour's
//! next write off the buffer being read (`docs/apps/halo_2d.md` gives the argument). The
//! result equals the serial sweep ([`golden`]) bit for bit at every P.
//!
//! `cargo run --example halo_2d -- -d 0,1,2,3,4,5`
use eagle::prelude::*;

/// Interior rows per rank.
pub const BR: usize = 32;
/// Interior columns per rank.
pub const BC: usize = 32;
/// Jacobi iterations.
pub const ITERS: usize = 50;
const NR: Dim = dynamic!("NR");

/// Per-device program: `iters` sweeps of this rank's block, halos exchanged after each.
///
/// `g` holds the two iterates stacked (rows `0..BR + 2` and `BR + 2..2 * (BR + 2)`), each
/// with its halo ring; `sig[0..4]` are the signals of the west, east, north and south halos.
#[eagle::kernel(device)]
pub fn jacobi_rank(
    ctx: Ctx,
    init: Tensor<f32, { BR + 2 }, { BC + 2 }>,
    out: Out<Tensor<f32, BR, BC>>,
    g: Window<f32, { 2 * (BR + 2) }, { BC + 2 }>,
    sig: Window<i32, 4, 1>,
    cols: usize,
    iters: usize,
) {
    let me = rank(ctx);
    let n = nranks(ctx);
    let rows = n / cols;
    let ri = me / cols;
    let ci = me % cols;
    // The neighbours (each used only where it exists; written modulo P so that every rank
    // number is in range).
    let west = (me + n - 1) % n;
    let east = (me + 1) % n;
    let north = (me + n - cols) % n;
    let south = (me + cols) % n;
    // Both iterates start as my block with its halo ring (the boundary where I have none).
    put(subview(g, 0, BR + 2), me, init);
    put(subview(g, BR + 2, BR + 2), me, init);
    // No neighbour writes a halo of mine before both are in place.
    barrier(ctx);
    for it in 0..iters {
        let src = it % 2 * (BR + 2);
        let dst = (it + 1) % 2 * (BR + 2);
        let nn = load(g, [src, 1], [BR, BC]);
        let ss = load(g, [src + 2, 1], [BR, BC]);
        let ww = load(g, [src + 1, 0], [BR, BC]);
        let ee = load(g, [src + 1, 2], [BR, BC]);
        let nw = load(g, [src, 0], [BR, BC]);
        let ne = load(g, [src, 2], [BR, BC]);
        let sw = load(g, [src + 2, 0], [BR, BC]);
        let se = load(g, [src + 2, 2], [BR, BC]);
        let next = ((nn + ss) + (ww + ee)) * 0.2 + ((nw + ne) + (sw + se)) * 0.05;
        store(g, [dst + 1, 1], next);
        let v = (it + 1) as i32;
        // 1. Columns to the west and east neighbours.
        if ci > 0 {
            let col = load(g, [dst + 1, 1], [BR, 1]);
            remote_store(g, west, [dst + 1, BC + 1], col);
            notify(sig, west, [1, 0], v, Set);
        }
        if ci + 1 < cols {
            let col = load(g, [dst + 1, BC], [BR, 1]);
            remote_store(g, east, [dst + 1, 0], col);
            notify(sig, east, [0, 0], v, Set);
        }
        if ci > 0 {
            wait(sig, [0, 0], v, Ge);
        }
        if ci + 1 < cols {
            wait(sig, [1, 0], v, Ge);
        }
        // 2. Rows, with the halo columns (the corners), to the north and south neighbours.
        if ri > 0 {
            let row = load(g, [dst + 1, 0], [1, BC + 2]);
            remote_store(g, north, [dst + BR + 1, 0], row);
            notify(sig, north, [3, 0], v, Set);
        }
        if ri + 1 < rows {
            let row = load(g, [dst + BR, 0], [1, BC + 2]);
            remote_store(g, south, [dst, 0], row);
            notify(sig, south, [2, 0], v, Set);
        }
        if ri > 0 {
            wait(sig, [2, 0], v, Ge);
        }
        if ri + 1 < rows {
            wait(sig, [3, 0], v, Ge);
        }
    }
    store(
        out,
        [0, 0],
        load(g, [iters % 2 * (BR + 2) + 1, 1], [BR, BC]),
    );
}

/// Host: rank `r` starts from `init[r]`, its block with the ring of cells around it.
#[eagle::host]
pub fn halo_2d(
    init: Tensor<f32, NR, { BR + 2 }, { BC + 2 }>,
    out: Out<Tensor<f32, NR, BR, BC>>,
    cols: usize,
    iters: usize,
) {
    let g = alloc_window_buffer([2 * (BR + 2), BC + 2], f32);
    let sig = alloc_window_buffer([4, 1], i32);
    for r in 0..world_size() {
        jacobi_rank(
            init[r],
            out[r],
            window(g, [2 * (BR + 2), BC + 2], f32),
            window(sig, [4, 1], i32),
            cols,
            iters,
            device = r,
        );
    }
}

/// The process grid of `p` ranks: `(rows, cols)` with `rows * cols = p`, `rows <= cols`,
/// `rows` the largest divisor of `p` not above its square root.
pub fn process_grid(p: usize) -> (usize, usize) {
    let rows = (1..=p)
        .filter(|d| p.is_multiple_of(*d) && d * d <= p)
        .max()
        .unwrap_or(1);
    (rows, p / rows)
}

/// A global grid: `h` rows of `w` cells, row-major; the outer ring is the fixed boundary.
#[derive(Debug, Clone)]
pub struct Global {
    /// Rows, the boundary ring included.
    pub h: usize,
    /// Columns, the boundary ring included.
    pub w: usize,
    /// The `h * w` cells.
    pub cells: Vec<f32>,
}

/// The global grid at process grid `(rows, cols)`: `rows * BR + 2` by `cols * BC + 2` seeded
/// values.
pub fn global_grid(grid: (usize, usize), seed: u64) -> Global {
    let (h, w) = (grid.0 * BR + 2, grid.1 * BC + 2);
    let cells = eagle_runner::random_tensor(&[h, w], seed).data().to_vec();
    Global { h, w, cells }
}

/// The serial sweep: `iters` Jacobi iterations of the whole grid (`h x w`, row-major), the
/// boundary ring fixed, in the program's order of operations.
pub fn golden(h: usize, w: usize, grid: &[f32], iters: usize) -> Vec<f32> {
    let mut a = grid.to_vec();
    let mut b = grid.to_vec();
    for _ in 0..iters {
        for i in 1..h - 1 {
            for j in 1..w - 1 {
                let at = |di: usize, dj: usize| a[(i + di - 1) * w + j + dj - 1];
                b[i * w + j] = ((at(0, 1) + at(2, 1)) + (at(1, 0) + at(1, 2))) * 0.2
                    + ((at(0, 0) + at(0, 2)) + (at(2, 0) + at(2, 2))) * 0.05;
            }
        }
        std::mem::swap(&mut a, &mut b);
    }
    a
}

/// Runs `iters` iterations on `grid` (`(rows, cols)`, which must multiply to the world size)
/// from the seeded global grid ([`global_grid`]) and returns each rank's final block, `[P, BR, BC]`,
/// with the global grid it started from.
///
/// # Errors
/// [`eagle::Error::Input`] when `rows * cols` is not the world size, naming `grid` and the
/// fix; then the launch's errors.
pub fn sweep(
    s: &Session,
    grid: (usize, usize),
    iters: usize,
    seed: u64,
) -> eagle::Result<(Tensor<f32>, Global)> {
    let p = s.world_size();
    if grid.0 * grid.1 != p {
        let (r, c) = process_grid(p);
        return Err(eagle::Error::Input(format!(
            "argument `grid`: a {} x {} process grid has {} ranks, but the world has {p}; give a factorisation of {p}, e.g. {r} x {c}",
            grid.0,
            grid.1,
            grid.0 * grid.1
        )));
    }
    let global = global_grid(grid, seed);
    let w = global.w;
    let mut init = Vec::with_capacity(p * (BR + 2) * (BC + 2));
    for r in 0..p {
        let (i0, j0) = (r / grid.1 * BR, r % grid.1 * BC);
        for i in i0..i0 + BR + 2 {
            init.extend_from_slice(&global.cells[i * w + j0..i * w + j0 + BC + 2]);
        }
    }
    let init = Tensor::from_vec(&[p, BR + 2, BC + 2], init)?;
    let mut out = Tensor::<f32>::zeros(&[p, BR, BC]);
    halo_2d.launch(s, &init, &mut out, grid.1, iters)?;
    Ok((out, global))
}

/// Runs `ITERS` iterations on the process grid of the world size; every rank's block must
/// equal its part of the serial sweep bit for bit.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let grid = process_grid(p);
    let (out, g) = sweep(s, grid, ITERS, 71)?;
    let want = golden(g.h, g.w, &g.cells, ITERS);
    let w = g.w;
    for r in 0..p {
        let (i0, j0) = (r / grid.1 * BR + 1, r % grid.1 * BC + 1);
        let block: Vec<f32> = (i0..i0 + BR)
            .flat_map(|i| want[i * w + j0..i * w + j0 + BC].iter().copied())
            .collect();
        eagle_runner::check_bits(
            &format!("block of rank {r}"),
            &out.data()[r * BR * BC..(r + 1) * BR * BC],
            &block,
        )?;
    }
    Ok(())
}

/// The program, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 29,
    name: "halo_2d",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
