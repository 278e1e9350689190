//! Shifts by an amount of another integer dtype, as Rust allows (`i32 >> u32`, `u64 << i64`):
//! the amount converts with `as` and the shift takes its low bits, as Rust's
//! `wrapping_shl`/`wrapping_shr` do, on scalars and on tiles; checked against plain Rust on
//! `sim`.
use eagle::prelude::*;

const N: usize = 6;

/// `y = [x >> n, x << n]` (`i32` by `u32`), `z = w << m` (`u64` by `i64`, negative amounts
/// included) and `t`, the tile `x >> n[0]`.
#[eagle::kernel(device)]
pub fn mixed_d(
    ctx: Ctx,
    x: Tensor<i32, N>,
    n: Tensor<u32, N>,
    w: Tensor<u64, N>,
    m: Tensor<i64, N>,
    y: Out<Tensor<i32, 12>>,
    z: Out<Tensor<u64, N>>,
    t: Out<Tensor<i32, N>>,
) {
    for i in 0..N {
        y[i] = x[i] >> n[i];
        y[N + i] = x[i] << n[i];
        z[i] = w[i] << m[i];
    }
    store(t, [0], load(x, [0], [N]) >> n[0]);
}

#[eagle::host]
#[allow(clippy::too_many_arguments)]
pub fn mixed(
    x: Tensor<i32, N>,
    n: Tensor<u32, N>,
    w: Tensor<u64, N>,
    m: Tensor<i64, N>,
    y: Out<Tensor<i32, 12>>,
    z: Out<Tensor<u64, N>>,
    t: Out<Tensor<i32, N>>,
) {
    mixed_d(x, n, w, m, y, z, t, device = 0);
}

#[test]
fn a_shift_by_another_integer_dtype_is_rusts() {
    let s = Session::sim(1).unwrap();
    let xs = [-1000i32, 7, i32::MIN, i32::MAX, -3, 12345];
    let ns = [3u32, 31, 32, 33, 100, 0];
    let ws = [1u64, u64::MAX, 0x8000_0000_0000_0001, 5, 1 << 40, 3];
    let ms = [-1i64, 63, 64, -64, 1 << 33, 2];
    let x = Tensor::from_vec(&[N], xs.to_vec()).unwrap();
    let n = Tensor::from_vec(&[N], ns.to_vec()).unwrap();
    let w = Tensor::from_vec(&[N], ws.to_vec()).unwrap();
    let m = Tensor::from_vec(&[N], ms.to_vec()).unwrap();
    let mut y = Tensor::<i32>::zeros(&[12]);
    let mut z = Tensor::<u64>::zeros(&[N]);
    let mut t = Tensor::<i32>::zeros(&[N]);
    mixed
        .launch(&s, &x, &n, &w, &m, &mut y, &mut z, &mut t)
        .unwrap();
    let mut want_y: Vec<i32> = (0..N).map(|i| xs[i].wrapping_shr(ns[i])).collect();
    want_y.extend((0..N).map(|i| xs[i].wrapping_shl(ns[i])));
    let want_z: Vec<u64> = (0..N).map(|i| ws[i].wrapping_shl(ms[i] as u32)).collect();
    let want_t: Vec<i32> = xs.iter().map(|v| v.wrapping_shr(ns[0])).collect();
    assert_eq!(y.data(), want_y.as_slice());
    assert_eq!(z.data(), want_z.as_slice());
    assert_eq!(t.data(), want_t.as_slice());
}
