//! Local arrays of scalars (issue 38, item 1): `let mut a = [0i32; 4]`, `[x; N]` with a
//! derived dim, `[a, b, c]` literals, indexing with run-time indices (bounds-checked, the
//! error naming the line), loops over them; in per-device programs and sample kernels, on
//! `sim` and in the CUDA emulation (block and thread mode), against plain-Rust goldens; and
//! the uses the verifier refuses.
use eagle::plan::{plan, Planes, Structure};
use eagle::prelude::*;

#[cfg(feature = "cuda")]
mod emulation;

const NR: Dim = dynamic!("NR");
const N: Dim = dynamic!("N");
const K: usize = 5;

/// PyPTO's rank bed: a one-hot row of this rank's number, built in a local array indexed by
/// the rank (a run-time index), then copied out; and a running product in a second array.
#[eagle::kernel(device)]
pub fn onehot(ctx: Ctx, y: Out<Tensor<i32, NR>>, z: Out<Tensor<f32, K>>) {
    let mut counts = [0i32; NR];
    counts[rank(ctx)] = 1;
    counts[rank(ctx)] += 6;
    for i in 0..NR {
        y[i] = counts[i];
    }
    // Derived from the previous element: each step reads what the last one wrote.
    let mut p = [1.5f32; K];
    for i in 1..K {
        p[i] = p[i - 1] * (rank(ctx) as f32 + 0.5) - 0.25;
    }
    for i in 0..K {
        z[i] = p[K - 1 - i];
    }
}

#[eagle::host]
pub fn onehot_all(y: Out<Tensor<i32, NR, NR>>, z: Out<Tensor<f32, NR, K>>) {
    for r in 0..world_size() {
        onehot(y[r], z[r], device = r);
    }
}

fn onehot_golden(p: usize) -> (Vec<i32>, Vec<f32>) {
    let mut y = vec![0; p * p];
    let mut z = vec![0.0f32; p * K];
    for r in 0..p {
        y[r * p + r] = 7;
        let mut a = [1.5f32; K];
        for i in 1..K {
            a[i] = a[i - 1] * (r as f32 + 0.5) - 0.25;
        }
        for i in 0..K {
            z[r * K + i] = a[K - 1 - i];
        }
    }
    (y, z)
}

fn check_onehot(s: &Session) {
    let p = s.world_size();
    let mut y = Tensor::<i32>::zeros(&[p, p]);
    let mut z = Tensor::<f32>::zeros(&[p, K]);
    onehot_all.launch(s, &mut y, &mut z).unwrap();
    let (wy, wz) = onehot_golden(p);
    assert_eq!(y.data(), &wy[..], "P = {p}");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(z.data()), bits(&wz), "P = {p}");
}

#[test]
fn a_local_array_indexed_by_the_rank_at_every_p() {
    for p in 1..=5 {
        check_onehot(&Session::sim(p).unwrap());
    }
}

#[cfg(feature = "cuda")]
#[test]
fn a_local_array_in_a_gpu_block_matches_sim() {
    emulation::cxx();
    for p in [1, 3] {
        check_onehot(&Session::cuda_emulated((0..p).collect()).unwrap());
    }
}

/// A polynomial with coefficients from an array literal, evaluated by Horner's rule, and the
/// index of the largest of four derived values: literals, loops and a run-time index.
#[eagle::kernel(sample)]
pub fn poly(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>, arg: Out<Tensor<f64, N>>) {
    let c: [f64; 4] = [0.5, -1.25, 2.0, 0.125];
    let mut acc = 0.0f64;
    for i in 0..4 {
        acc = acc * x[s] + c[3 - i];
    }
    y[s] = acc;
    let mut v: [f64; 4] = [0.0; 4];
    for i in 0..4 {
        v[i] = c[i] * x[s];
    }
    let mut best = 0;
    for i in 1..4 {
        if v[i] > v[best] {
            best = i;
        }
    }
    arg[s] = best as f64;
}

fn poly_golden(x: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let c = [0.5f64, -1.25, 2.0, 0.125];
    let mut y = vec![];
    let mut arg = vec![];
    for &x in x {
        let mut acc = 0.0f64;
        for i in 0..4 {
            acc = acc * x + c[3 - i];
        }
        y.push(acc);
        let v: Vec<f64> = c.iter().map(|c| c * x).collect();
        let mut best = 0;
        for i in 1..4 {
            if v[i] > v[best] {
                best = i;
            }
        }
        arg.push(best as f64);
    }
    (y, arg)
}

fn run_poly(p: eagle::plan::Plan, x: &Tensor<f64>) -> (Vec<u64>, Vec<f64>) {
    let n = x.shape()[0];
    let (mut y, mut arg) = (Tensor::<f64>::zeros(&[n]), Tensor::<f64>::zeros(&[n]));
    p.run(
        0,
        &mut Planes::new()
            .input("x", x)
            .output("y", &mut y)
            .output("arg", &mut arg),
    )
    .unwrap();
    (
        y.data().iter().map(|v| v.to_bits()).collect(),
        arg.data().to_vec(),
    )
}

#[test]
fn a_sample_kernel_with_local_arrays_is_sample_local_and_exact() {
    let n = 301;
    let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.731).sin() * 3.0).collect();
    let x = Tensor::from_vec(&[n], xs.clone()).unwrap();
    let (wy, warg) = poly_golden(&xs);
    let wy: Vec<u64> = wy.iter().map(|v| v.to_bits()).collect();
    // Writes of a local array are the sample's own: the kernel stays sample-local.
    let p = plan(poly, Structure::HostTeam, Structure::HostTeam).unwrap();
    assert_eq!(p.category(), eagle::ir::AccessCategory::SampleLocal);
    for (st, threads, ranks) in [
        (Structure::HostTeam, 1, 1),
        (Structure::HostTeam, 3, 1),
        (Structure::DeviceKernel, 1, 1),
        (Structure::RankPartition, 2, 3),
    ] {
        let p = plan(poly, st, Structure::HostTeam)
            .unwrap()
            .with_threads(threads)
            .with_simulated_ranks(ranks);
        let (y, arg) = run_poly(p, &x);
        assert_eq!(y, wy, "{st:?}");
        assert_eq!(arg, warg, "{st:?}");
    }
    #[cfg(feature = "cuda")]
    {
        emulation::cxx();
        let p = plan(poly, Structure::DeviceKernel, Structure::HostTeam)
            .unwrap()
            .with_platform(eagle::Platform::Cuda)
            .with_cuda_emulation(true);
        let (y, arg) = run_poly(p, &x);
        assert_eq!(y, wy, "CUDA emulation");
        assert_eq!(arg, warg, "CUDA emulation");
    }
}

/// Reads element `i` of a four-element array: out of bounds for `i >= 4`.
#[eagle::kernel(device)]
pub fn pick(ctx: Ctx, i: usize, y: Out<Tensor<f32, 1>>) {
    let a = [1.0f32, 2.0, 3.0, 4.0];
    y[0] = a[i] + rank(ctx) as f32;
}

#[eagle::host]
pub fn pick_host(i: usize, y: Out<Tensor<f32, 1>>) {
    pick(i, y, device = 0);
}

#[test]
fn an_index_out_of_bounds_is_an_error_naming_the_line() {
    let s = Session::sim(1).unwrap();
    let mut y = Tensor::<f32>::zeros(&[1]);
    pick_host.launch(&s, 2, &mut y).unwrap();
    assert_eq!(y.data(), &[3.0]);
    let e = pick_host.launch(&s, 4, &mut y).unwrap_err().to_string();
    assert_eq!(
        e,
        "rank 0 failed: function `pick`, op `%12 = elem %3[%1] : f32` (at tests/local_arrays.rs:189:12): index 4 in dim 0 is out of range; dim 0 has 4 elements, so the largest index is 3"
    );
}

#[test]
fn local_arrays_in_the_ir() {
    let ir = onehot.ir().unwrap();
    // One zeroed array per `let`, and the fill of the non-zero one as a loop of set_elem.
    assert_eq!(ir.matches("local_array").count(), 2, "{ir}");
    assert!(ir.contains("= local_array : tensor<[NR], i32>"), "{ir}");
    assert!(ir.contains("= local_array : tensor<[5], f32>"), "{ir}");
    // `[0i32; NR]` is all zero bits: no fill loop, and no constant left over.
    assert!(!ir.contains("const 0 : i32"), "{ir}");
}

#[test]
fn a_local_array_is_only_indexed() {
    use eagle::ir::{parse_module, verify_module};
    let text = "\
device @f(%0 ctx: ctx) {
  %1 = local_array : tensor<[4], f32>
  %2 = const 0 : index
  %3 = load %1[%2] : tile<[4], f32>
}
";
    let e = parse_module(text)
        .and_then(|m| verify_module(&m).map(|_| m))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "verifier: in function `f`, op `%3 = load %1[%2] : tile<[4], f32>`: operand 0 is a local array; a local array is only indexed (`a[i]`, `a[i] = v`): it cannot be loaded or stored as a tile — copy its elements into a tensor or tile in a loop"
    );
}
