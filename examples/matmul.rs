//! Matmul with A split by rows: rank `r` computes its `[M, N]` block of `C = A x B` from its
//! `[M, K]` block of `A` and the whole `B`, accumulating `KB`-wide slabs into a tile variable
//! with `matmul_acc`.
//!
//! `cargo run --example matmul -- -d 0,1,2,3`
use eagle::prelude::*;

const M: usize = 32;
const K: usize = 128;
const N: usize = 64;
const KB: usize = 32;
const NR: Dim = dynamic!("NR");

/// Per-device program: `c = a x b`, `k` ascending in slabs of `KB`.
#[eagle::kernel(device)]
pub fn matmul_block(
    ctx: Ctx,
    a: Tensor<f32, M, K>,
    b: Tensor<f32, K, N>,
    c: Out<Tensor<f32, M, N>>,
) {
    let mut acc = zeros([M, N], f32);
    for k in 0..K / KB {
        let x = load(a, [0, k * KB], [M, KB]);
        let w = load(b, [k * KB, 0], [KB, N]);
        acc = matmul_acc(acc, x, w);
    }
    store(c, [0, 0], acc);
}

/// Host: rank `r` computes row block `r` of `C`.
#[eagle::host]
pub fn matmul_rows(a: Tensor<f32, NR, M, K>, b: Tensor<f32, K, N>, c: Out<Tensor<f32, NR, M, N>>) {
    for r in 0..world_size() {
        matmul_block(a[r], b, c[r], device = r);
    }
}

/// The golden in plain Rust: each `c[i][j]` sums `a[i][k] * b[k][j]` over ascending `k` from
/// `0.0`, a multiply and an add each rounded (eagle's documented matmul order).
pub fn golden(a: &[f32], b: &[f32]) -> Vec<f32> {
    let rows = a.len() / K;
    let mut c = vec![0.0f32; rows * N];
    for i in 0..rows {
        for j in 0..N {
            let mut s = 0.0f32;
            for k in 0..K {
                s += a[i * K + k] * b[k * N + j];
            }
            c[i * N + j] = s;
        }
    }
    c
}

/// Runs the program on seeded random inputs and checks every bit against the golden.
pub fn run(s: &Session) -> eagle::Result<()> {
    let p = s.world_size();
    let a = eagle_runner::random_tensor(&[p, M, K], 21);
    let b = eagle_runner::random_tensor(&[K, N], 22);
    let mut c = Tensor::<f32>::zeros(&[p, M, N]);
    matmul_rows.launch(s, &a, &b, &mut c)?;
    eagle_runner::check_bits("c", c.data(), &golden(a.data(), b.data()))
}

/// The example, for the runner.
pub const STEP: eagle_runner::Step = eagle_runner::Step {
    number: 19,
    name: "matmul",
    modes: &[],
    world: eagle_runner::World::Any,
    run,
};

fn main() -> std::process::ExitCode {
    eagle_runner::example_main(STEP)
}
