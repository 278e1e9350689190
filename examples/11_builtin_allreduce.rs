//! Step 11: the built-in `allreduce`, in each mode. The compiler lowers it at specialization
//! into the same primitives the hand-written steps 08-10 use; `--emit-ir` shows the result.
//!
//! `cargo run --example 11_builtin_allreduce -- -d 0,1,2,3 --mode ring --emit-ir`
use eagle::prelude::*;

/// Vector length.
pub const N: usize = 1000;
const NR: Dim = dynamic!("NR");

/// Mesh mode.
#[eagle::kernel(device)]
pub fn ar_mesh(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    dst: Window<f32, N>,
) {
    put(src, rank(ctx), x);
    allreduce(ctx, src, dst, Sum, Mesh);
    get(y, rank(ctx), dst);
}

/// Two-phase mode.
#[eagle::kernel(device)]
pub fn ar_two_phase(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    dst: Window<f32, N>,
) {
    put(src, rank(ctx), x);
    allreduce(ctx, src, dst, Sum, TwoPhase);
    get(y, rank(ctx), dst);
}

/// Ring mode.
#[eagle::kernel(device)]
pub fn ar_ring(
    ctx: Ctx,
    x: Tensor<f32, N>,
    y: Out<Tensor<f32, N>>,
    src: Window<f32, N>,
    dst: Window<f32, N>,
) {
    put(src, rank(ctx), x);
    allreduce(ctx, src, dst, Sum, Ring);
    get(y, rank(ctx), dst);
}

/// Host, mesh.
#[eagle::host]
pub fn builtin_mesh(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        ar_mesh(
            x[r],
            y[r],
            window(s, [N], f32),
            window(d, [N], f32),
            device = r,
        );
    }
}

/// Host, two-phase.
#[eagle::host]
pub fn builtin_two_phase(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        ar_two_phase(
            x[r],
            y[r],
            window(s, [N], f32),
            window(d, [N], f32),
            device = r,
        );
    }
}

/// Host, ring.
#[eagle::host]
pub fn builtin_ring(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>) {
    let s = alloc_window_buffer([N], f32);
    let d = alloc_window_buffer([N], f32);
    for r in 0..world_size() {
        ar_ring(
            x[r],
            y[r],
            window(s, [N], f32),
            window(d, [N], f32),
            device = r,
        );
    }
}

/// Runs the mode and checks its documented combine order, bit for bit on every rank.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let x = eagle_runner::random_tensor(&[p, N], 11);
    let mut y = Tensor::<f32>::zeros(&[p, N]);
    let ring = s.mode() == Some("ring");
    match s.mode() {
        Some("two_phase") => builtin_two_phase.launch(s, &x, &mut y)?,
        Some("ring") => builtin_ring.launch(s, &x, &mut y)?,
        _ => builtin_mesh.launch(s, &x, &mut y)?,
    };
    let want = eagle_runner::golden::allreduce(&x, |a, b| a + b, ring);
    for r in 0..p {
        eagle_runner::check_bits(&format!("y[{r}]"), y.row(r), &want)?;
    }
    Ok(())
}

/// The step, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 11,
    name: "builtin_allreduce",
    modes: &["mesh", "two_phase", "ring"],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
