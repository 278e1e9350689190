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
