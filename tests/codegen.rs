//! The CPU backend's fast paths, each with a test that would catch a wrong answer: the
//! in-place store however the offset is spelled (value numbering), a store at another offset
//! of the tensor it reads (not in place), `fma` on SIMD vectors (one rounding per lane), and
//! a small tile unrolled whole (no loop of its own), and an arithmetic shift on vectors.

use eagle::prelude::*;

const NR: Dim = dynamic!("NR");
const N: usize = 4096;
const B: usize = 256;

/// `y = x * a + y`, the offset written three times, as a user writes it.
#[eagle::kernel(device)]
pub fn axpy_spelled_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, a: f32) {
    for i in 0..N / B {
        store(
            y,
            [i * B],
            load(x, [i * B], [B]) * a + load(y, [i * B], [B]),
        );
    }
}
#[eagle::host]
pub fn axpy_spelled(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, a: f32) {
    for r in 0..world_size() {
        axpy_spelled_d(x[r], y[r], a, device = r);
    }
}

/// The same with the offset bound once.
#[eagle::kernel(device)]
pub fn axpy_bound_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, a: f32) {
    for i in 0..N / B {
        let o = i * B;
        store(y, [o], load(x, [o], [B]) * a + load(y, [o], [B]));
    }
}
#[eagle::host]
pub fn axpy_bound(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, a: f32) {
    for r in 0..world_size() {
        axpy_bound_d(x[r], y[r], a, device = r);
    }
}

/// Reads `y` one tile ahead of where it writes: must read every tile before it is written.
#[eagle::kernel(device)]
pub fn shifted_d(ctx: Ctx, y: Out<Tensor<f32, N>>) {
    for i in 0..N / B - 1 {
        store(
            y,
            [i * B],
            load(y, [i * B + B], [B]) + load(y, [i * B], [B]),
        );
    }
}
#[eagle::host]
pub fn shifted(y: Out<Tensor<f32, NR, N>>) {
    for r in 0..world_size() {
        shifted_d(y[r], device = r);
    }
}

/// `y = fma(x, a, y)` on tiles.
#[eagle::kernel(device)]
pub fn fma_d(ctx: Ctx, x: Tensor<f32, N>, y: Out<Tensor<f32, N>>, a: f32) {
    for i in 0..N / B {
        let o = i * B;
        store(y, [o], fma(load(x, [o], [B]), a, load(y, [o], [B])));
    }
}
#[eagle::host]
pub fn fma_h(x: Tensor<f32, NR, N>, y: Out<Tensor<f32, NR, N>>, a: f32) {
    for r in 0..world_size() {
        fma_d(x[r], y[r], a, device = r);
    }
}

/// One row of a matmul, as a user writes it: `c[0] += b[k] * a[0][k]` over k, the row a
/// `[1, K]` tile of 16 SIMD steps.
const K: usize = 64;
#[eagle::kernel(device)]
pub fn row_update_d(
    ctx: Ctx,
    a: Tensor<f32, 1, K>,
    b: Tensor<f32, K, K>,
    c: Out<Tensor<f32, 1, K>>,
) {
    for k in 0..K {
        store(
            c,
            [0, 0],
            load(c, [0, 0], [1, K]) + load(b, [k, 0], [1, K]) * a[0][k],
        );
    }
}
#[eagle::host]
pub fn row_update(
    a: Tensor<f32, NR, 1, K>,
    b: Tensor<f32, NR, K, K>,
    c: Out<Tensor<f32, NR, 1, K>>,
) {
    for r in 0..world_size() {
        row_update_d(a[r], b[r], c[r], device = r);
    }
}

fn clif_of(all: &str, name: &str) -> String {
    all.split(";; ")
        .find(|s| s.starts_with(&format!("{name}\n")))
        .unwrap_or_else(|| panic!("{name} is compiled"))
        .to_string()
}

fn inputs() -> (Tensor<f32>, Tensor<f32>) {
    (
        eagle_runner::random_tensor(&[1, N], 11),
        eagle_runner::random_tensor(&[1, N], 12),
    )
}

#[test]
fn the_in_place_store_holds_however_the_offset_is_spelled() {
    let spelled = clif_of(
        &eagle::cranelift_ir::<axpy_spelled>(1, &[("NR", 1)]).unwrap(),
        "axpy_spelled_d",
    );
    let bound = clif_of(
        &eagle::cranelift_ir::<axpy_bound>(1, &[("NR", 1)]).unwrap(),
        "axpy_bound_d",
    );
    // No stack tile: the result is computed straight into `y`, both ways.
    assert!(!bound.contains("explicit_slot"), "{bound}");
    assert!(!spelled.contains("explicit_slot"), "{spelled}");
    let s = Session::sim(1).unwrap();
    let (x, y0) = inputs();
    let want: Vec<u32> = x
        .data()
        .iter()
        .zip(y0.data())
        .map(|(x, y)| (x * 1.5 + y).to_bits())
        .collect();
    for run in [0, 1] {
        let mut y = y0.clone();
        if run == 0 {
            axpy_spelled.launch(&s, &x, &mut y, 1.5).unwrap();
        } else {
            axpy_bound.launch(&s, &x, &mut y, 1.5).unwrap();
        }
        let got: Vec<u32> = y.data().iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "run {run}");
    }
}

#[test]
fn a_store_at_another_offset_of_the_tensor_it_reads_reads_first() {
    let s = Session::sim(1).unwrap();
    let (_, y0) = inputs();
    let mut y = y0.clone();
    shifted.launch(&s, &mut y).unwrap();
    let old = y0.data();
    let mut want = old.to_vec();
    for i in 0..N / B - 1 {
        for k in 0..B {
            // Tile i + 1 is still the old one when tile i is written (i increases).
            want[i * B + k] = old[(i + 1) * B + k] + old[i * B + k];
        }
    }
    let got: Vec<u32> = y.data().iter().map(|v| v.to_bits()).collect();
    let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
    assert_eq!(got, want);
}

#[test]
fn fma_on_vectors_rounds_once_per_lane() {
    let clif = clif_of(
        &eagle::cranelift_ir::<fma_h>(1, &[("NR", 1)]).unwrap(),
        "fma_d",
    );
    assert!(
        clif.contains("fma.f32x4") || clif.contains(" = fma v"),
        "{clif}"
    );
    assert!(clif.contains("f32x4"), "not vectorised:\n{clif}");
    let s = Session::sim(1).unwrap();
    let (x, y0) = inputs();
    let mut y = y0.clone();
    // A multiplier whose products round, so fused and unfused differ somewhere.
    let a = 1.0f32 / 3.0;
    fma_h.launch(&s, &x, &mut y, a).unwrap();
    let want: Vec<u32> = x
        .data()
        .iter()
        .zip(y0.data())
        .map(|(x, y)| x.mul_add(a, *y).to_bits())
        .collect();
    let unfused = x
        .data()
        .iter()
        .zip(y0.data())
        .filter(|(x, y)| (*x * a + *y).to_bits() != x.mul_add(a, **y).to_bits())
        .count();
    assert!(unfused > 0, "the inputs must tell fused from unfused");
    let got: Vec<u32> = y.data().iter().map(|v| v.to_bits()).collect();
    assert_eq!(got, want);
}

#[test]
fn a_small_tile_is_unrolled_whole_with_the_same_bits() {
    let clif = clif_of(
        &eagle::cranelift_ir::<row_update>(1, &[("NR", 1)]).unwrap(),
        "row_update_d",
    );
    // One conditional branch: the k loop's. The row's 16 steps have no loop of their own and
    // no bounds check (k is proven in range).
    assert_eq!(clif.matches("brif").count(), 1, "{clif}");
    let s = Session::sim(1).unwrap();
    let a: Tensor<f32> = eagle_runner::random_tensor(&[1, 1, K], 21);
    let b: Tensor<f32> = eagle_runner::random_tensor(&[1, K, K], 22);
    let mut c: Tensor<f32> = eagle_runner::random_tensor(&[1, 1, K], 23);
    let mut want = c.data().to_vec();
    for k in 0..K {
        for (w, bj) in want.iter_mut().zip(&b.data()[k * K..(k + 1) * K]) {
            *w += bj * a.data()[k];
        }
    }
    row_update.launch(&s, &a, &b, &mut c).unwrap();
    let got: Vec<u32> = c.data().iter().map(|v| v.to_bits()).collect();
    let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
    assert_eq!(got, want);
}

const E: usize = 64;

/// `(x >> k) + x` on a tile of `$t`, an arithmetic shift right by a scalar amount: the
/// kernel, its host program, and a test that it runs on `$vec` vectors (no scalar element
/// loads) with the bits of Rust's `>>` (the amount modulo the width) at each of `$amounts`,
/// over the extremes and xorshift values.
macro_rules! signed_shift_case {
    ($test:ident, $kernel:ident, $host:ident, $t:ident, $vec:literal, $amounts:expr) => {
        #[eagle::kernel(device)]
        pub fn $kernel(ctx: Ctx, x: Tensor<$t, E>, y: Out<Tensor<$t, E>>, k: $t) {
            let t = load(x, [0], [E]);
            store(y, [0], (t >> k) + t);
        }
        #[eagle::host]
        pub fn $host(x: Tensor<$t, NR, E>, y: Out<Tensor<$t, NR, E>>, k: $t) {
            for r in 0..world_size() {
                $kernel(x[r], y[r], k, device = r);
            }
        }

        #[test]
        fn $test() {
            let clif = clif_of(
                &eagle::cranelift_ir::<$host>(1, &[("NR", 1)]).unwrap(),
                stringify!($kernel),
            );
            assert!(clif.contains(concat!("load.", $vec)), "{clif}");
            assert!(
                !clif.contains(concat!("load.", stringify!($t), " notrap v")),
                "{clif}"
            );
            assert!(clif.contains("sshr"), "{clif}");
            let s = Session::sim(1).unwrap();
            let mut x = Tensor::<$t>::zeros(&[1, E]);
            let mut r = 0x9e37_79b9_7f4a_7c15_u64;
            for (i, x) in x.data_mut().iter_mut().enumerate() {
                r ^= r << 13;
                r ^= r >> 7;
                r ^= r << 17;
                *x = match i {
                    0 => <$t>::MIN,
                    1 => <$t>::MAX,
                    2 => -1,
                    _ => r as $t,
                };
            }
            let width = <$t>::BITS as $t;
            for k in $amounts {
                let mut y = Tensor::<$t>::zeros(&[1, E]);
                $host.launch(&s, &x, &mut y, k).unwrap();
                let want: Vec<$t> = x
                    .data()
                    .iter()
                    .map(|&v| (v >> (k % width)).wrapping_add(v))
                    .collect();
                assert_eq!(y.data(), &want[..], "k = {k}");
            }
        }
    };
}

signed_shift_case!(
    a_signed_shift_runs_on_simd_vectors_with_the_same_bits,
    sshr_tile_d,
    sshr_tile,
    i64,
    "i64x2",
    [3, 0, 63, 67]
);
signed_shift_case!(
    a_signed_shift_of_i32_lanes_runs_on_simd_vectors_with_the_same_bits,
    sshr32_tile_d,
    sshr32_tile,
    i32,
    "i32x4",
    [5, 0, 31, 33]
);
