//! Tile variables whose reads use the variable's own storage (the CPU backend's in-place
//! reads, `back/cpu/control.rs` `reads_in_place`) and identity casts that copy nothing: the
//! values a read saw must survive later writes of the variable, in the block and in nested
//! loops, against plain-Rust goldens on `sim` and `cpu`.
use eagle::prelude::*;

const N: usize = 4;

/// `y = (x + 1) * 3 + x`, `z = 8 x + 3 x`, `w = x x + x` through tile variables: `old` is read
/// before `acc` is written and used after (a copy), `r0` is used inside a loop that writes
/// `acc` (a copy), `cur` is last used by the product that the write stores (in place), and
/// `x as f32` of an `f32` tile is `x` itself.
#[eagle::kernel(device)]
pub fn hold(
    ctx: Ctx,
    x: Tensor<f32, N, N>,
    y: Out<Tensor<f32, N, N>>,
    z: Out<Tensor<f32, N, N>>,
    w: Out<Tensor<f32, N, N>>,
) {
    let t = load(x, [0, 0], [N, N]) as f32;
    let mut acc = t + 1.0;
    let old = acc;
    acc = acc * 2.0;
    acc = acc + old;
    store(y, [0, 0], acc + t);
    let mut b = t * 2.0;
    let r0 = b;
    for _i in 0..2 {
        b = b + b;
    }
    for _i in 0..3 {
        b = b + r0 * 0.5;
    }
    store(z, [0, 0], b);
    let mut c = t;
    for _i in 0..1 {
        let cur = c;
        c = matmul_acc(cur, t, t);
    }
    store(w, [0, 0], c);
}

#[eagle::host]
pub fn hold_host(
    x: Tensor<f32, N, N>,
    y: Out<Tensor<f32, N, N>>,
    z: Out<Tensor<f32, N, N>>,
    w: Out<Tensor<f32, N, N>>,
) {
    hold(x, y, z, w, device = 0);
}

fn check(s: &Session) {
    let data: Vec<f32> = (0..N * N).map(|i| (i % 7) as f32 - 2.0).collect();
    let x = Tensor::from_vec(&[N, N], data.clone()).unwrap();
    let (mut y, mut z, mut w) = (
        Tensor::<f32>::zeros(&[N, N]),
        Tensor::<f32>::zeros(&[N, N]),
        Tensor::<f32>::zeros(&[N, N]),
    );
    hold_host.launch(s, &x, &mut y, &mut z, &mut w).unwrap();
    let want_y: Vec<f32> = data.iter().map(|&v| (v + 1.0) * 3.0 + v).collect();
    let want_z: Vec<f32> = data.iter().map(|&v| 8.0 * v + 3.0 * v).collect();
    let want_w: Vec<f32> = (0..N * N)
        .map(|e| {
            let (i, j) = (e / N, e % N);
            (0..N).fold(data[e], |c, k| c + data[i * N + k] * data[k * N + j])
        })
        .collect();
    assert_eq!(y.data(), &want_y[..], "y");
    assert_eq!(z.data(), &want_z[..], "z");
    assert_eq!(w.data(), &want_w[..], "w");
}

#[test]
fn a_tile_read_keeps_its_value_across_later_writes_on_sim() {
    check(&Session::sim(1).unwrap());
}

#[test]
fn a_tile_read_keeps_its_value_across_later_writes_on_cpu() {
    check(&Session::new(eagle::runtime::Platform::Cpu, vec![0]).unwrap());
}

/// Tiles as wide as the widest GEMM micro-kernel's blocks (4 x 64 on AVX-512 `f32`), so that its
/// whole blocks are computed straight into the variable (`back/cpu/control.rs`
/// `results_into_vars`).
const M: usize = 64;

/// `acc = matmul_acc(acc, t, u)` computed into `acc`'s own tile (its `c`), beside products
/// whose `a` or `b` is the variable's tile (those compute into a tile of their own: the GEMM
/// must not write what it reads) and a read of the variable that outlives the write.
#[eagle::kernel(device)]
pub fn products(
    ctx: Ctx,
    x: Tensor<f32, M, M>,
    y: Tensor<f32, M, M>,
    acc_out: Out<Tensor<f32, M, M>>,
    left: Out<Tensor<f32, M, M>>,
    right: Out<Tensor<f32, M, M>>,
    kept: Out<Tensor<f32, M, M>>,
) {
    let t = load(x, [0, 0], [M, M]);
    let u = load(y, [0, 0], [M, M]);
    let mut acc = zeros([M, M], f32);
    for _i in 0..3 {
        acc = matmul_acc(acc, t, u);
    }
    store(acc_out, [0, 0], acc);
    let mut l = t;
    for _i in 0..2 {
        l = matmul(l, u);
    }
    store(left, [0, 0], l);
    let mut r = u;
    r = matmul_acc(r, t, r);
    store(right, [0, 0], r);
    let mut k = t;
    let old = k;
    k = matmul_acc(k, t, u);
    store(kept, [0, 0], k + old);
}

#[eagle::host]
pub fn products_host(
    x: Tensor<f32, M, M>,
    y: Tensor<f32, M, M>,
    acc_out: Out<Tensor<f32, M, M>>,
    left: Out<Tensor<f32, M, M>>,
    right: Out<Tensor<f32, M, M>>,
    kept: Out<Tensor<f32, M, M>>,
) {
    products(x, y, acc_out, left, right, kept, device = 0);
}

/// `c + a b` (`c` absent: the identity) in the evaluator's order: ascending `k`, each product
/// and each sum rounded.
fn mm(c: Option<&[f32]>, a: &[f32], b: &[f32]) -> Vec<f32> {
    (0..M * M)
        .map(|e| {
            let (i, j) = (e / M, e % M);
            let c0 = c.map_or(-0.0, |c| c[e]);
            (0..M).fold(c0, |s, k| s + a[i * M + k] * b[k * M + j])
        })
        .collect()
}

fn check_products(s: &Session) {
    let xs: Vec<f32> = (0..M * M)
        .map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.25)
        .collect();
    let ys: Vec<f32> = (0..M * M)
        .map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.125)
        .collect();
    let x = Tensor::from_vec(&[M, M], xs.clone()).unwrap();
    let y = Tensor::from_vec(&[M, M], ys.clone()).unwrap();
    let mut outs: Vec<Tensor<f32>> = (0..4).map(|_| Tensor::zeros(&[M, M])).collect();
    let [a, l, r, k] = &mut outs[..] else {
        unreachable!()
    };
    products_host.launch(s, &x, &y, a, l, r, k).unwrap();
    let mut want_acc = vec![0.0f32; M * M];
    for _ in 0..3 {
        want_acc = mm(Some(&want_acc), &xs, &ys);
    }
    let want_left = mm(None, &mm(None, &xs, &ys), &ys);
    let want_right = mm(Some(&ys), &xs, &ys);
    let want_kept: Vec<f32> = mm(Some(&xs), &xs, &ys)
        .iter()
        .zip(&xs)
        .map(|(k, o)| k + o)
        .collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(outs[0].data()), bits(&want_acc), "acc");
    assert_eq!(bits(outs[1].data()), bits(&want_left), "left");
    assert_eq!(bits(outs[2].data()), bits(&want_right), "right");
    assert_eq!(bits(outs[3].data()), bits(&want_kept), "kept");
}

#[test]
fn products_computed_into_a_variable_equal_the_evaluators_on_sim() {
    check_products(&Session::sim(1).unwrap());
}

#[test]
fn products_computed_into_a_variable_equal_the_evaluators_on_cpu() {
    check_products(&Session::new(eagle::runtime::Platform::Cpu, vec![0]).unwrap());
}

/// The GEMM calls of `products`' CLIF (the only calls with ten arguments: `dst`, `c`, `a`, `b`,
/// then the sizes): `acc = matmul_acc(acc, t, u)` and `k = matmul_acc(k, t, u)` pass the
/// variable's tile as both `dst` and `c`; the products whose `a` or `b` is the variable's tile
/// get a tile of their own.
#[test]
fn products_into_a_variable_pass_its_tile_as_dst_and_c() {
    let clif = eagle::cranelift_ir::<products_host>(1, &[]).unwrap();
    let calls: Vec<Vec<&str>> = clif
        .lines()
        .filter_map(|l| {
            let args = l
                .split_once("call ")?
                .1
                .split_once('(')?
                .1
                .split_once(')')?
                .0;
            let args: Vec<&str> = args.split(", ").collect();
            (args.len() == 10).then_some(args)
        })
        .collect();
    let into = calls.iter().filter(|a| a[0] == a[1]).count();
    assert_eq!((calls.len(), into), (4, 2), "{clif}");
}
