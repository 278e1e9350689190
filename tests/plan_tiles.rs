//! The tiles entry of a sample-local plan (`src/plan/tiles.rs`): whole tiles of samples run as
//! SIMD tile code, the rest through the sample wrapper. Every case is checked bit for bit
//! against a plan whose kernel does not qualify for tiles (the same ops, one sample at a time)
//! and against plain Rust where Rust computes the same thing, at sample counts around the tile
//! width, several thread counts and structures; a failure names the samples the sample wrapper
//! names.

use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;

const N: Dim = dynamic!("N");

/// `sqrt(x * x + 1)`: qualifies.
#[eagle::kernel(sample)]
pub fn hyp(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = sqrt(x[s] * x[s] + 1.0);
}

/// The same, but it also reads its output (`y[s] * 0.0` adds +0 or -0): does not qualify.
#[eagle::kernel(sample)]
pub fn hyp_scalar(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = sqrt(x[s] * x[s] + 1.0) + y[s] * 0.0;
}

/// The logistic function through eagle's `exp`, and a select: qualifies.
#[eagle::kernel(sample)]
pub fn gate(s: usize, x: Tensor<f32, N>, w: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    let g = 1.0 / (1.0 + exp(-x[s]));
    y[s] = select(w[s] > 0.5, g * w[s], g - w[s]);
}

/// The same one sample at a time (the branch keeps it off the tiles entry).
#[eagle::kernel(sample)]
pub fn gate_scalar(s: usize, x: Tensor<f32, N>, w: Tensor<f32, N>, y: Out<Tensor<f32, N>>) {
    let g = 1.0 / (1.0 + exp(-x[s]));
    if w[s] > 0.5 {
        y[s] = g * w[s];
    } else {
        y[s] = g - w[s];
    }
}

/// Integer division by the input: a zero sample fails.
#[eagle::kernel(sample)]
pub fn quot(s: usize, x: Tensor<i32, N>, y: Out<Tensor<i32, N>>) {
    y[s] = 1000 / x[s];
}

fn f64s(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| match i % 7 {
            0 => f64::NAN,
            1 => -0.0,
            2 => 1e300,
            3 => f64::INFINITY,
            _ => (i as f64 * 0.37).sin() * 1e3,
        })
        .collect()
}

fn structures<K: eagle::ir::EagleFn + Copy>(k: K) -> Vec<(String, eagle::plan::Plan)> {
    let mut v = vec![];
    for t in [1usize, 2, 3] {
        v.push((
            format!("HostTeam x{t}"),
            plan(k, Structure::HostTeam, Structure::HostTeam)
                .unwrap()
                .with_threads(t),
        ));
    }
    v.push((
        "DeviceKernel".into(),
        plan(k, Structure::DeviceKernel, Structure::HostTeam).unwrap(),
    ));
    v
}

#[test]
fn which_kernels_get_a_tiles_entry() {
    let has = |ir: String, k: &str| ir.contains(&format!("@__plan_tiles_{k}("));
    let p = |k| {
        plan(k, Structure::HostTeam, Structure::HostTeam)
            .unwrap()
            .ir()
    };
    assert!(has(p(hyp), "hyp"));
    assert!(has(
        plan(gate, Structure::HostTeam, Structure::HostTeam)
            .unwrap()
            .ir(),
        "gate"
    ));
    assert!(
        !has(
            plan(hyp_scalar, Structure::HostTeam, Structure::HostTeam)
                .unwrap()
                .ir(),
            "hyp_scalar"
        ),
        "reads its output"
    );
    assert!(
        !has(
            plan(gate_scalar, Structure::HostTeam, Structure::HostTeam)
                .unwrap()
                .ir(),
            "gate_scalar"
        ),
        "branches"
    );
}

#[test]
fn tiles_give_the_bits_of_one_sample_at_a_time() {
    for n in [1usize, 15, 16, 17, 31, 32, 33, 100, 1000, 4099] {
        let xs = f64s(n);
        let x = Tensor::from_vec(&[n], xs.clone()).unwrap();
        let mut want = Tensor::<f64>::zeros(&[n]);
        plan(hyp_scalar, Structure::HostTeam, Structure::HostTeam)
            .unwrap()
            .with_threads(1)
            .run(0, &mut Planes::new().input("x", &x).output("y", &mut want))
            .unwrap();
        let rust: Vec<u64> = xs.iter().map(|v| (v * v + 1.0).sqrt().to_bits()).collect();
        let bits = |t: &Tensor<f64>| t.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&want), rust, "n = {n}: the one-at-a-time plan");
        for (name, p) in structures(hyp) {
            let mut y = Tensor::<f64>::zeros(&[n]);
            p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
                .unwrap();
            assert_eq!(bits(&y), rust, "n = {n}, {name}");
        }
        let p = plan(hyp, Structure::RankPartition, Structure::HostTeam)
            .unwrap()
            .with_simulated_ranks(3)
            .with_threads(2);
        let mut y = Tensor::<f64>::zeros(&[n]);
        p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
            .unwrap();
        assert_eq!(bits(&y), rust, "n = {n}, RankPartition x3");
    }
}

#[test]
fn exp_and_select_on_tiles_match_the_scalar_kernel() {
    for n in [5usize, 16, 50, 1003] {
        let x = Tensor::from_vec(
            &[n],
            (0..n).map(|i| ((i as f32) * 0.61).sin() * 30.0).collect(),
        )
        .unwrap();
        let w = Tensor::from_vec(&[n], (0..n).map(|i| (i % 10) as f32 * 0.11).collect()).unwrap();
        let mut want = Tensor::<f32>::zeros(&[n]);
        plan(gate_scalar, Structure::HostTeam, Structure::HostTeam)
            .unwrap()
            .run(
                0,
                &mut Planes::new()
                    .input("x", &x)
                    .input("w", &w)
                    .output("y", &mut want),
            )
            .unwrap();
        for (name, p) in structures(gate) {
            let mut y = Tensor::<f32>::zeros(&[n]);
            p.run(
                0,
                &mut Planes::new()
                    .input("x", &x)
                    .input("w", &w)
                    .output("y", &mut y),
            )
            .unwrap();
            let same = y
                .data()
                .iter()
                .zip(want.data())
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "n = {n}, {name}");
        }
    }
}

#[test]
fn a_failure_inside_a_tile_names_the_samples_the_sample_wrapper_names() {
    let n = 100;
    let mut xs: Vec<i32> = (0..n as i32).map(|i| i % 9 + 1).collect();
    let x = Tensor::from_vec(&[n], xs.clone()).unwrap();
    let p = plan(quot, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .with_threads(1);
    let mut y = Tensor::<i32>::zeros(&[n]);
    p.run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
    let want: Vec<i32> = xs.iter().map(|v| 1000 / v).collect();
    assert_eq!(y.data(), &want[..]);
    xs[37] = 0;
    let x = Tensor::from_vec(&[n], xs).unwrap();
    let e = p
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`quot`") && !e.contains("__plan_"), "{e}");
    assert!(e.contains("integer division by zero"), "{e}");
    assert!(e.ends_with("(while running samples 0..100)"), "{e}");
}
