//! Scalar uniforms in sample kernels and plans (issue 38, item 6): a sample kernel's scalar
//! parameter is one value every sample reads, passed with `Planes::uniform`. Checked bit for
//! bit against plain Rust under every structure, thread count and simulated world size (and
//! the CUDA emulation), through the tiles entry and the sample wrapper alike; every mistake is
//! refused by name before anything runs.

use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;

const N: Dim = dynamic!("N");

/// `y = a * x + y`: sample-local, with a uniform; qualifies for the tiles entry.
#[eagle::kernel(sample)]
pub fn axpy(s: usize, a: f64, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = a * x[s] + y[s];
}

/// The same in `f32` with the uniform after the planes: the tiles entry takes it too.
#[eagle::kernel(sample)]
pub fn scale32(s: usize, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, a: f32) {
    y[s] = x[s] * a - a;
}

/// Counts the samples above threshold `t`: a mapreduce with a uniform.
#[eagle::kernel(sample, category = "mapreduce(sum)")]
pub fn above(s: usize, t: f64, x: Tensor<f64, N>, c: Out<Tensor<f64, 1>>) {
    if x[s] > t {
        c[0] += 1.0;
    }
}

/// A rotation by `k` samples: an index uniform in a cross-sample read.
#[eagle::kernel(sample)]
pub fn rotate(s: usize, x: Tensor<f64, N>, k: usize, y: Out<Tensor<f64, N>>) {
    y[s] = x[(s + k) % N];
}

fn xs(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| match i % 9 {
            0 => -0.0,
            1 => f64::NAN,
            2 => 1e300,
            _ => (i as f64 * 0.37).sin() * 1e3,
        })
        .collect()
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every structure the tests run: (structure, threads, simulated ranks).
fn structures() -> Vec<(Structure, usize, usize)> {
    let mut v = vec![
        (Structure::DeviceKernel, 1, 1),
        (Structure::HostTeam, 1, 1),
        (Structure::HostTeam, 3, 1),
    ];
    for r in 1..=4 {
        v.push((Structure::RankPartition, 2, r));
    }
    v
}

#[test]
fn a_uniform_reaches_every_sample_bit_for_bit() {
    for n in [1, 15, 16, 17, 100] {
        let x = xs(n);
        let y0: Vec<f64> = (0..n).map(|i| i as f64 * 0.5 - 3.0).collect();
        for a in [2.5, -0.0, f64::NAN, 1e-310] {
            let want: Vec<f64> = x.iter().zip(&y0).map(|(x, y)| a * x + y).collect();
            for (st, threads, ranks) in structures() {
                let p = plan(axpy, st, Structure::HostTeam)
                    .unwrap()
                    .with_threads(threads)
                    .with_simulated_ranks(ranks);
                let xt = Tensor::from_vec(&[n], x.clone()).unwrap();
                let mut y = Tensor::from_vec(&[n], y0.clone()).unwrap();
                p.run(
                    0,
                    &mut Planes::new()
                        .uniform("a", a)
                        .input("x", &xt)
                        .output("y", &mut y),
                )
                .unwrap();
                assert_eq!(
                    bits(y.data()),
                    bits(&want),
                    "n = {n}, a = {a}, {st:?}, {threads} threads, {ranks} ranks"
                );
            }
        }
    }
}

#[test]
fn an_f32_uniform_after_the_planes() {
    let n = 37;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.25 - 4.0).collect();
    let a = 1.75f32;
    let want: Vec<u32> = x.iter().map(|x| (x * a - a).to_bits()).collect();
    for (st, threads, _) in structures().into_iter().take(3) {
        let xt = Tensor::from_vec(&[n], x.clone()).unwrap();
        let mut y = Tensor::<f32>::zeros(&[n]);
        plan(scale32, st, Structure::HostTeam)
            .unwrap()
            .with_threads(threads)
            .run(
                0,
                &mut Planes::new()
                    .input("x", &xt)
                    .output("y", &mut y)
                    .uniform("a", a),
            )
            .unwrap();
        let got: Vec<u32> = y.data().iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{st:?}, {threads} threads");
    }
    // The uniform stays a scalar in the tiles entry: whole tiles run as SIMD code.
    let ir = plan(scale32, Structure::HostTeam, Structure::HostTeam)
        .unwrap()
        .ir();
    assert!(ir.contains("__plan_tiles_scale32"), "{ir}");
}

#[test]
fn a_mapreduce_and_a_cross_sample_read_take_uniforms() {
    let n = 1000;
    let x = xs(n);
    let xt = Tensor::from_vec(&[n], x.clone()).unwrap();
    for t in [0.0, 500.0, f64::NAN] {
        let want = x.iter().filter(|v| **v > t).count() as f64;
        for (st, threads, ranks) in structures() {
            let mut c = Tensor::<f64>::zeros(&[1]);
            plan(above, st, Structure::HostTeam)
                .unwrap()
                .with_threads(threads)
                .with_simulated_ranks(ranks)
                .run(
                    0,
                    &mut Planes::new()
                        .uniform("t", t)
                        .input("x", &xt)
                        .output("c", &mut c),
                )
                .unwrap();
            assert_eq!(c.data(), &[want], "t = {t}, {st:?}, {ranks} ranks");
        }
    }
    for k in [0usize, 1, 999, 1000, 12345] {
        let want: Vec<f64> = (0..n).map(|s| x[(s + k) % n]).collect();
        for (st, threads, ranks) in structures() {
            let mut y = Tensor::<f64>::zeros(&[n]);
            plan(rotate, st, Structure::HostTeam)
                .unwrap()
                .with_threads(threads)
                .with_simulated_ranks(ranks)
                .run(
                    0,
                    &mut Planes::new()
                        .input("x", &xt)
                        .uniform("k", k)
                        .output("y", &mut y),
                )
                .unwrap();
            assert_eq!(
                bits(y.data()),
                bits(&want),
                "k = {k}, {st:?}, {ranks} ranks"
            );
        }
    }
}

#[test]
fn uniform_mistakes_are_refused_by_name() {
    let n = 8;
    let xt = Tensor::from_vec(&[n], xs(n)).unwrap();
    let p = plan(axpy, Structure::HostTeam, Structure::HostTeam).unwrap();
    // Each mistake is an `Error::Plan` (not a run-time failure) with this message.
    let run = |planes: &mut Planes<'_>| match p.run(0, planes) {
        Err(eagle::Error::Plan(m)) => m,
        other => panic!("expected Error::Plan, got {other:?}"),
    };
    let mut y = Tensor::<f64>::zeros(&[n]);
    assert_eq!(
        run(&mut Planes::new().input("x", &xt).output("y", &mut y)),
        "uniform `a` (f64) of `axpy` is missing; pass its value with `Planes::uniform`"
    );
    assert_eq!(
        run(&mut Planes::new()
            .uniform("a", 2.0f32)
            .input("x", &xt)
            .output("y", &mut y)),
        "uniform `a` of `axpy` is declared f64, found the value 2.0 (f32); pass a f64 (such as `Planes::uniform(\"a\", x as f64)`)"
    );
    assert_eq!(
        run(&mut Planes::new()
            .input("a", &xt)
            .input("x", &xt)
            .output("y", &mut y)),
        "`a` is a scalar uniform of `axpy` (f64), found a plane of shape [8] (f64); pass one value with `Planes::uniform`"
    );
    assert_eq!(
        run(&mut Planes::new()
            .uniform("a", 1.0)
            .uniform("x", 1.0)
            .output("y", &mut y)),
        "plane `x` of `axpy` is a tensor of rank 1, found the value 1.0 (f64); pass it with `Planes::input`"
    );
    assert_eq!(
        run(&mut Planes::new()
            .uniform("a", 1.0)
            .uniform("a", 2.0)
            .input("x", &xt)
            .output("y", &mut y)),
        "plane `a` is passed twice; pass each plane of `axpy` once"
    );
    // Nothing ran: the output is untouched.
    assert!(y.data().iter().all(|v| v.to_bits() == 0));
}

#[cfg(feature = "cuda")]
mod emulation;

/// The CUDA emulation runs the uniform as a kernel argument: the same bits as the CPU.
#[cfg(feature = "cuda")]
#[test]
fn the_cuda_emulation_gives_the_same_bits() {
    emulation::cxx();
    let n = 100;
    let x = xs(n);
    let xt = Tensor::from_vec(&[n], x.clone()).unwrap();
    let run = |cuda: bool, st: Structure| {
        let mut p = plan(axpy, st, Structure::DeviceKernel)
            .unwrap()
            .with_simulated_ranks(3);
        if cuda {
            p = p
                .with_platform(eagle::Platform::Cuda)
                .with_cuda_emulation(true);
        }
        let mut y = Tensor::<f64>::zeros(&[n]);
        p.run(
            0,
            &mut Planes::new()
                .uniform("a", -1.5)
                .input("x", &xt)
                .output("y", &mut y),
        )
        .unwrap();
        let mut c = Tensor::<f64>::zeros(&[1]);
        let mut q = plan(above, st, Structure::DeviceKernel)
            .unwrap()
            .with_simulated_ranks(3);
        if cuda {
            q = q
                .with_platform(eagle::Platform::Cuda)
                .with_cuda_emulation(true);
        }
        q.run(
            0,
            &mut Planes::new()
                .uniform("t", 100.0)
                .input("x", &xt)
                .output("c", &mut c),
        )
        .unwrap();
        (bits(y.data()), c.data()[0])
    };
    for st in [Structure::DeviceKernel, Structure::RankPartition] {
        let want = run(false, st);
        assert_eq!(run(true, st), want, "{st:?}");
        let golden: Vec<f64> = x.iter().map(|v| -1.5 * v + 0.0).collect();
        assert_eq!(want.0, bits(&golden));
        assert_eq!(want.1, x.iter().filter(|v| **v > 100.0).count() as f64);
    }
}
