//! The storage dtypes `i8 u8 i16 u16 f16 bf16` and `bool` tensors from kernel code.
//!
//! - The 16-bit float conversions (`eagle::ir::math::narrow`) equal the `half` crate's on
//!   every 16-bit pattern and on a million `f32` and `f64` values.
//! - Kernels on every storage dtype (scalar loops and tiles) compute what Rust computes on
//!   `i8` (wrapping) and what `half` computes on `f16` (each op in `f32`, rounded once), on
//!   `sim` and in the CUDA emulation, bit for bit.
use eagle::ir::eval::{self, Scalar};
use eagle::ir::math::lanes::W;
use eagle::ir::math::narrow::{decode, encode, round_to, BF16, F16};
use eagle::prelude::*;
use eagle::{bf16, f16};
use rand::{Rng, SeedableRng};

#[cfg(feature = "cuda")]
mod emulation;

const N: usize = 64;

#[test]
fn decode_equals_half_on_every_pattern() {
    for h in 0..=u16::MAX {
        let a = decode::<f64>(W(h as u64), F16) as f32;
        let b = f16::from_bits(h).to_f32();
        assert_eq!(a.to_bits(), b.to_bits(), "f16 {h:#06x}");
        let a = decode::<f64>(W(h as u64), BF16) as f32;
        let b = bf16::from_bits(h).to_f32();
        assert_eq!(a.to_bits(), b.to_bits(), "bf16 {h:#06x}");
        // Encoding a decoded value gives the pattern back (NaNs come back quiet).
        let back = encode::<f64>(decode::<f64>(W(h as u64), F16), F16).0 as u16;
        let want = if f16::from_bits(h).is_nan() {
            h | 0x0200
        } else {
            h
        };
        assert_eq!(back, want, "f16 round trip {h:#06x}");
    }
}

fn f32_samples() -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(16);
    let mut v: Vec<f32> = (0..1_000_000).map(|_| f32::from_bits(rng.gen())).collect();
    // Every f16 and bf16 value, the midpoints between neighbours and their neighbours.
    for h in 0..=u16::MAX {
        for x in [f16::from_bits(h).to_f32(), bf16::from_bits(h).to_f32()] {
            let b = x.to_bits();
            v.extend([
                x,
                f32::from_bits(b.wrapping_add(1)),
                f32::from_bits(b.wrapping_sub(1)),
            ]);
        }
        let (a, b) = (
            f16::from_bits(h).to_f64(),
            f16::from_bits(h.wrapping_add(1)).to_f64(),
        );
        v.push(((a + b) / 2.0) as f32);
    }
    v
}

#[test]
fn rounding_equals_half() {
    for x in f32_samples() {
        let got = eval::narrow_float(x as f64, eagle::ir::DType::F16);
        assert_eq!(
            got.bits() as u16,
            f16::from_f32(x).to_bits(),
            "f16 of {x:e} ({:#x})",
            x.to_bits()
        );
        let got = eval::narrow_float(x as f64, eagle::ir::DType::BF16);
        assert_eq!(
            got.bits() as u16,
            bf16::from_f32(x).to_bits(),
            "bf16 of {x:e} ({:#x})",
            x.to_bits()
        );
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    for _ in 0..1_000_000 {
        let x = f64::from_bits(rng.gen::<u64>() >> rng.gen_range(0..12));
        let x = if rng.gen() { -x } else { x };
        // `half`'s `from_f64` reads only the top 32 bits of `x`; eagle rounds `x` itself
        // (correctly, as Rust's `as` does): the same as `half` on `x` with the low bits
        // folded into a sticky bit that `half` sees.
        let b = x.to_bits();
        let sticky =
            f64::from_bits((b & !0xffff_ffff) | if b & 0xffff_ffff != 0 { 1 << 32 } else { 0 });
        assert_eq!(
            encode::<f64>(round_to(x, F16), F16).0 as u16,
            f16::from_f64(sticky).to_bits(),
            "f16 of {x:e}"
        );
        assert_eq!(
            encode::<f64>(round_to(x, BF16), BF16).0 as u16,
            bf16::from_f64(sticky).to_bits(),
            "bf16 of {x:e}"
        );
    }
}

/// Integer storage dtypes in scalar loops: wrapping arithmetic, shifts modulo the width,
/// `!`, comparisons and casts.
#[eagle::kernel(device)]
pub fn ints(
    ctx: Ctx,
    a: Tensor<i8, N>,
    b: Tensor<i8, N>,
    c: Tensor<u16, N>,
    d: Tensor<u16, N>,
    x: Tensor<f32, N>,
    y: Out<Tensor<i8, { 6 * N }>>,
    z: Out<Tensor<u16, { 5 * N }>>,
    w: Out<Tensor<i32, { 3 * N }>>,
) {
    for i in 0..N {
        let p = a[i];
        let q = b[i];
        y[i] = p + q;
        y[N + i] = p * q;
        y[2 * N + i] = p - q;
        y[3 * N + i] = p << q;
        y[4 * N + i] = x[i] as i8;
        y[5 * N + i] = -p;
        let u = c[i];
        let v = d[i];
        z[i] = u * v;
        z[N + i] = u - v;
        z[2 * N + i] = !u;
        z[3 * N + i] = u >> v;
        z[4 * N + i] = p as u16;
        w[i] = (p / q) as i32;
        w[2 * N + i] = (u < v) as i32;
        w[N + i] = u as i32 + p as i32;
    }
}

#[eagle::host]
pub fn ints_host(
    a: Tensor<i8, N>,
    b: Tensor<i8, N>,
    c: Tensor<u16, N>,
    d: Tensor<u16, N>,
    x: Tensor<f32, N>,
    y: Out<Tensor<i8, { 6 * N }>>,
    z: Out<Tensor<u16, { 5 * N }>>,
    w: Out<Tensor<i32, { 3 * N }>>,
) {
    ints(a, b, c, d, x, y, z, w, device = 0);
}

fn check_ints(s: &Session) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut a: Vec<i8> = (0..N).map(|_| rng.gen()).collect();
    let b: Vec<i8> = (0..N)
        .map(|_| rng.gen_range(1..=127) * if rng.gen() { 1 } else { -1 })
        .collect();
    a[0] = i8::MIN;
    let mut bb = b.clone();
    bb[0] = -1;
    let c: Vec<u16> = (0..N).map(|_| rng.gen()).collect();
    let d: Vec<u16> = (0..N).map(|_| rng.gen()).collect();
    let x: Vec<f32> = (0..N)
        .map(|i| {
            [f32::NAN, 1e9, -1e9, -128.7, 127.9][i % 5]
                + if i > 4 {
                    rng.gen_range(-200.0..200.0)
                } else {
                    0.0
                }
        })
        .collect();
    fn t<T: eagle::runtime::Element>(v: Vec<T>) -> Tensor<T> {
        Tensor::from_vec(&[N], v).unwrap()
    }
    let mut y = Tensor::<i8>::zeros(&[6 * N]);
    let mut z = Tensor::<u16>::zeros(&[5 * N]);
    let mut w = Tensor::<i32>::zeros(&[3 * N]);
    ints_host
        .launch(
            s,
            &t(a.clone()),
            &t(bb.clone()),
            &t(c.clone()),
            &t(d.clone()),
            &t(x.clone()),
            &mut y,
            &mut z,
            &mut w,
        )
        .unwrap();
    let (y, z, w) = (y.data(), z.data(), w.data());
    for i in 0..N {
        let (p, q) = (a[i], bb[i]);
        assert_eq!(y[i], p.wrapping_add(q), "add {i}");
        assert_eq!(y[N + i], p.wrapping_mul(q), "mul {i}");
        assert_eq!(y[2 * N + i], p.wrapping_sub(q), "sub {i}");
        assert_eq!(y[3 * N + i], p.wrapping_shl(q as u32), "shl {i}");
        assert_eq!(y[4 * N + i], x[i] as i8, "cast {i} of {}", x[i]);
        assert_eq!(y[5 * N + i], p.wrapping_neg(), "neg {i}");
        let (u, v) = (c[i], d[i]);
        assert_eq!(z[i], u.wrapping_mul(v), "u16 mul {i}");
        assert_eq!(z[N + i], u.wrapping_sub(v), "u16 sub {i}");
        assert_eq!(z[2 * N + i], !u, "not {i}");
        assert_eq!(z[3 * N + i], u.wrapping_shr(v as u32), "shr {i}");
        assert_eq!(z[4 * N + i], p as u16, "i8 as u16 {i}");
        assert_eq!(w[i], p.wrapping_div(q) as i32, "div {i}");
        assert_eq!(w[2 * N + i], (u < v) as i32, "lt {i}");
        assert_eq!(w[N + i], u as i32 + p as i32, "widen {i}");
    }
}

#[test]
fn integer_storage_dtypes_wrap_as_rust() {
    check_ints(&Session::sim(1).unwrap());
}

/// 16-bit floats on tiles: each op in `f32`, rounded once; a sum accumulates in `f32`.
#[eagle::kernel(device)]
pub fn halves(
    ctx: Ctx,
    a: Tensor<f16, 1, N>,
    b: Tensor<f16, 1, N>,
    g: Tensor<bf16, 1, N>,
    x: Tensor<f32, 1, N>,
    y: Out<Tensor<f16, 7, N>>,
    yb: Out<Tensor<bf16, 3, N>>,
    s: Out<Tensor<f32, 2, N>>,
    bits: Out<Tensor<u16, 1, N>>,
) {
    let t = load(a, [0, 0], [1, N]);
    let u = load(b, [0, 0], [1, N]);
    store(y, [0, 0], t + u);
    store(y, [1, 0], t * u);
    store(y, [2, 0], t / u);
    store(y, [3, 0], t.sqrt());
    store(y, [4, 0], t.tanh());
    store(y, [5, 0], load(x, [0, 0], [1, N]) as f16);
    store(y, [6, 0], expand(row_sum(t * u), [1, N]));
    let v = load(g, [0, 0], [1, N]);
    store(yb, [0, 0], v * v - v);
    store(yb, [1, 0], t as bf16);
    store(yb, [2, 0], load(x, [0, 0], [1, N]) as bf16);
    store(s, [0, 0], t as f32);
    store(s, [1, 0], v as f32 * 3.0);
    store(bits, [0, 0], t.to_bits());
}

#[eagle::host]
pub fn halves_host(
    a: Tensor<f16, 1, N>,
    b: Tensor<f16, 1, N>,
    g: Tensor<bf16, 1, N>,
    x: Tensor<f32, 1, N>,
    y: Out<Tensor<f16, 7, N>>,
    yb: Out<Tensor<bf16, 3, N>>,
    s: Out<Tensor<f32, 2, N>>,
    bits: Out<Tensor<u16, 1, N>>,
) {
    halves(a, b, g, x, y, yb, s, bits, device = 0);
}

fn check_halves(s: &Session) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let specials = [
        f32::NAN,
        f32::INFINITY,
        -0.0,
        0.0,
        65504.0,
        6e-8,
        -1.0,
        1e-5,
    ];
    let xs: Vec<f32> = (0..N)
        .map(|i| {
            specials
                .get(i)
                .copied()
                .unwrap_or_else(|| rng.gen_range(-300.0f32..300.0))
        })
        .collect();
    let a: Vec<f16> = xs.iter().map(|&x| f16::from_f32(x)).collect();
    let b: Vec<f16> = (0..N)
        .map(|_| f16::from_f32(rng.gen_range(-4.0f32..4.0)))
        .collect();
    let g: Vec<bf16> = (0..N)
        .map(|_| bf16::from_f32(rng.gen_range(-1e5f32..1e5)))
        .collect();
    let x: Vec<f32> = (0..N)
        .map(|_| rng.gen_range(-7e4f32..7e4) * rng.gen_range(0.0f32..1.0).powi(8))
        .collect();
    fn t2<T: eagle::runtime::Element>(v: Vec<T>) -> Tensor<T> {
        Tensor::from_vec(&[1, N], v).unwrap()
    }
    let mut y = Tensor::<f16>::zeros(&[7, N]);
    let mut yb = Tensor::<bf16>::zeros(&[3, N]);
    let mut sy = Tensor::<f32>::zeros(&[2, N]);
    let mut bits = Tensor::<u16>::zeros(&[1, N]);
    halves_host
        .launch(
            s,
            &t2(a.clone()),
            &t2(b.clone()),
            &t2(g.clone()),
            &t2(x.clone()),
            &mut y,
            &mut yb,
            &mut sy,
            &mut bits,
        )
        .unwrap();
    let h = f16::from_f32;
    let same = |got: f16, want: f16, what: &str, i: usize| {
        let ok = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        assert!(
            ok,
            "{what} {i}: got {got} ({:#06x}), want {want} ({:#06x})",
            got.to_bits(),
            want.to_bits()
        );
    };
    let tanh = |v: f16| match eagle::ir::MathFn::Tanh.eval(&[Scalar::F16(v)]).unwrap() {
        Scalar::F16(r) => r,
        _ => unreachable!(),
    };
    // The row sum in eagle's fixed order (8 lanes, a tree), in f32, rounded once.
    let prods: Vec<Scalar> = (0..N)
        .map(|i| Scalar::F32(h(a[i].to_f32() * b[i].to_f32()).to_f32()))
        .collect();
    let sum =
        eagle::ir::tile::reduce_order(eagle::ir::ReduceOp::Sum, &prods, eagle::ir::DType::F32)
            .unwrap();
    let sum = match sum {
        Scalar::F32(v) => h(v),
        _ => unreachable!(),
    };
    let y = y.data();
    for i in 0..N {
        let (p, q) = (a[i].to_f32(), b[i].to_f32());
        same(y[i], h(p + q), "add", i);
        same(y[N + i], h(p * q), "mul", i);
        same(y[2 * N + i], h(p / q), "div", i);
        same(y[3 * N + i], h(p.sqrt()), "sqrt", i);
        same(y[4 * N + i], tanh(a[i]), "tanh", i);
        same(y[5 * N + i], h(x[i]), "f32 as f16", i);
        same(y[6 * N + i], sum, "row_sum", i);
        let v = g[i].to_f32();
        let vv = bf16::from_f32(v * v).to_f32();
        let yb = yb.data();
        assert_eq!(
            yb[i].to_bits(),
            bf16::from_f32(vv - v).to_bits(),
            "bf16 mul-sub {i}"
        );
        assert_eq!(
            yb[N + i].to_bits(),
            bf16::from_f32(p).to_bits(),
            "f16 as bf16 {i}"
        );
        assert_eq!(
            yb[2 * N + i].to_bits(),
            bf16::from_f32(x[i]).to_bits(),
            "f32 as bf16 {i}"
        );
        assert_eq!(sy.data()[i].to_bits(), p.to_bits(), "f16 as f32 {i}");
        assert_eq!(
            sy.data()[N + i].to_bits(),
            (v * 3.0).to_bits(),
            "bf16 as f32 {i}"
        );
        let want = if a[i].is_nan() {
            a[i].to_bits() | 0x200
        } else {
            a[i].to_bits()
        };
        assert_eq!(bits.data()[i], want, "to_bits {i}");
    }
}

#[test]
fn float_storage_dtypes_round_after_each_op() {
    check_halves(&Session::sim(1).unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn emulation_gives_the_same_bits() {
    emulation::cxx();
    let s = Session::cuda_emulated(vec![0]).unwrap();
    check_ints(&s);
    check_halves(&s);
}

/// `f16 + f32` without a cast.
#[eagle::kernel(device)]
pub fn mixed(ctx: Ctx, a: Tensor<f16, 1, N>, x: Tensor<f32, 1, N>, y: Out<Tensor<f32, 1, N>>) {
    let t = load(a, [0, 0], [1, N]);
    store(y, [0, 0], t + load(x, [0, 0], [1, N]));
}

#[test]
fn mixing_f16_with_f32_is_an_error_at_the_line() {
    let e = mixed.ir().unwrap_err().to_string();
    let line = line!() - 6;
    assert!(
        e.contains(&format!("(at tests/narrow.rs:{line}:22)")),
        "{e}"
    );
    assert!(
        e.contains(
            "operand 1 has dtype `f32` but an earlier operand has `f16`; convert one with `as f16`"
        ),
        "{e}"
    );
}

/// Constants of the storage dtypes stored straight to memory, and passed to a compute kernel
/// (a regression: they were folded into constants of the storage dtype, which the backends
/// did not hold as their bit patterns).
#[eagle::kernel]
pub fn add_f16(b: f16, x: Tensor<f16, 4>, y: Out<Tensor<f16, 4>>) {
    for i in 0..4 {
        y[i] = x[i] + b;
    }
}
#[eagle::kernel]
pub fn add_i8(b: i8, x: Tensor<i8, 4>, y: Out<Tensor<i8, 4>>) {
    for i in 0..4 {
        y[i] = x[i] + b;
    }
}
#[eagle::kernel(device)]
pub fn constants(
    ctx: Ctx,
    x: Tensor<f16, 4>,
    x8: Tensor<i8, 4>,
    y: Out<Tensor<f16, 6>>,
    yb: Out<Tensor<bf16, 2>>,
    y8: Out<Tensor<i8, 3>>,
    a8: Out<Tensor<u8, 2>>,
    z: Out<Tensor<f16, 4>>,
    z8: Out<Tensor<i8, 4>>,
) {
    y[0] = 0.5;
    let c: f16 = 0.5;
    y[1] = c;
    y[2] = c + 1.0;
    y[3] = -c;
    let d: f16 = 0.1;
    y[4] = d * 3.0;
    y[5] = c / 0.0;
    yb[0] = 2.0;
    yb[1] = bf16::from_bits(0x4040u16);
    y8[0] = 5;
    y8[1] = -3;
    let q: i8 = 100;
    y8[2] = q + q;
    a8[0] = 200;
    a8[1] = 7;
    add_f16(1.5, x, z);
    add_i8(5, x8, z8);
}
#[eagle::host]
pub fn constants_host(
    x: Tensor<f16, 4>,
    x8: Tensor<i8, 4>,
    y: Out<Tensor<f16, 6>>,
    yb: Out<Tensor<bf16, 2>>,
    y8: Out<Tensor<i8, 3>>,
    a8: Out<Tensor<u8, 2>>,
    z: Out<Tensor<f16, 4>>,
    z8: Out<Tensor<i8, 4>>,
) {
    constants(x, x8, y, yb, y8, a8, z, z8, device = 0);
}

fn check_constants(s: &Session) {
    let x = Tensor::from_vec(&[4], vec![f16::ONE; 4]).unwrap();
    let x8 = Tensor::from_vec(&[4], vec![1i8, -7, 120, 0]).unwrap();
    let mut y = Tensor::<f16>::zeros(&[6]);
    let mut yb = Tensor::<bf16>::zeros(&[2]);
    let mut y8 = Tensor::<i8>::zeros(&[3]);
    let mut a8 = Tensor::<u8>::zeros(&[2]);
    let mut z = Tensor::<f16>::zeros(&[4]);
    let mut z8 = Tensor::<i8>::zeros(&[4]);
    constants_host
        .launch(
            s, &x, &x8, &mut y, &mut yb, &mut y8, &mut a8, &mut z, &mut z8,
        )
        .unwrap();
    let h = f16::from_f32;
    let d = h(0.1).to_f32();
    let want = [h(0.5), h(0.5), h(1.5), h(-0.5), h(d * 3.0), f16::INFINITY];
    let bits = |v: &[f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(y.data()), bits(&want));
    assert_eq!(yb.data(), &[bf16::from_f32(2.0), bf16::from_f32(3.0)]);
    assert_eq!(y8.data(), &[5, -3, -56]);
    assert_eq!(a8.data(), &[200, 7]);
    assert_eq!(bits(z.data()), bits(&[h(2.5); 4]));
    assert_eq!(z8.data(), &[6, -2, 125, 5]);
}

#[test]
fn storage_dtype_constants_are_stored_and_passed_as_their_values() {
    check_constants(&Session::sim(1).unwrap());
    #[cfg(feature = "cuda")]
    {
        emulation::cxx();
        check_constants(&Session::cuda_emulated(vec![0]).unwrap());
    }
}

/// `f16::from_bits` of an unsuffixed literal takes `u16`.
#[eagle::kernel(device)]
pub fn from_bits_literal(ctx: Ctx, y: Out<Tensor<f16, 1>>) {
    y[0] = f16::from_bits(0x3c01);
}
#[eagle::host]
pub fn from_bits_literal_host(y: Out<Tensor<f16, 1>>) {
    from_bits_literal(y, device = 0);
}

/// An `i8` literal out of range.
#[eagle::kernel(device)]
pub fn i8_literal(ctx: Ctx, y: Out<Tensor<i8, 1>>) {
    y[0] = 300; // marker: i8 literal
}

/// A float literal beyond `f16`'s range.
#[eagle::kernel(device)]
pub fn f16_literal(ctx: Ctx, x: Tensor<f16, 1>, y: Out<Tensor<f16, 1>>) {
    y[0] = x[0] * 1e10; // marker: f16 literal
}

fn line_of(marker: &str) -> u32 {
    let src = include_str!("narrow.rs");
    let at = src.find(&format!("// {marker}\n")).unwrap();
    src[..at].lines().count() as u32
}

#[test]
fn literals_of_storage_dtypes_are_checked_at_the_line() {
    let mut y = Tensor::<f16>::zeros(&[1]);
    from_bits_literal_host
        .launch(&Session::sim(1).unwrap(), &mut y)
        .unwrap();
    assert_eq!(y.data()[0].to_bits(), 0x3c01);
    let e = i8_literal.ir().unwrap_err().to_string();
    assert!(
        e.contains(
            "integer literal `300` does not fit `i8` (range -128..=127) (at tests/narrow.rs:"
        ) && e.contains(&format!("narrow.rs:{}:", line_of("marker: i8 literal"))),
        "{e}"
    );
    let e = f16_literal.ir().unwrap_err().to_string();
    assert!(
        e.contains(
            "float literal `1e10` is out of range for `f16` (its largest value is 6.5504e4)"
        ) && e.contains(&format!("narrow.rs:{}:", line_of("marker: f16 literal"))),
        "{e}"
    );
}

/// Rows of 256 `bf16` patterns loaded as tiles and widened to `f32` (`as f32`).
#[eagle::kernel(device)]
pub fn widen_bf16(ctx: Ctx, x: Tensor<bf16, 256, 256>, y: Out<Tensor<f32, 256, 256>>) {
    for i in 0..256 {
        let t = load(x, [i, 0], [1, 256]) as f32;
        store(y, [i, 0], t);
    }
}

#[eagle::host]
pub fn widen_bf16_host(x: Tensor<bf16, 256, 256>, y: Out<Tensor<f32, 256, 256>>) {
    widen_bf16(x, y, device = 0);
}

fn check_bf16_widening(s: &Session) {
    let pats: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
    let x = Tensor::from_vec(&[256, 256], pats).unwrap();
    let mut y = Tensor::<f32>::zeros(&[256, 256]);
    widen_bf16_host.launch(s, &x, &mut y).unwrap();
    for (h, v) in y.data().iter().enumerate() {
        let want = bf16::from_bits(h as u16).to_f32();
        assert_eq!(v.to_bits(), want.to_bits(), "bf16 {h:#06x}");
    }
}

/// A `bf16` load widens in 32-bit lane-wise ops (the pattern shifted into the top half, a NaN
/// made quiet: `narrow.rs` `decode_bf16`); every one of the 65,536 patterns gives `half`'s
/// `f32` (which [`decode`] equals), a signalling NaN's payload kept and made quiet.
#[test]
fn bf16_loads_widen_to_the_half_value_on_every_pattern() {
    assert_eq!(bf16::from_bits(0x7f81).to_f32().to_bits(), 0x7fc1_0000);
    check_bf16_widening(&Session::sim(1).unwrap());
    check_bf16_widening(&Session::new(eagle::runtime::Platform::Cpu, vec![0]).unwrap());
    #[cfg(feature = "cuda")]
    {
        emulation::cxx();
        check_bf16_widening(&Session::cuda_emulated(vec![0]).unwrap());
    }
}

/// `zeros` of each float storage dtype, stored: every element `+0.0` of its dtype.
#[eagle::kernel(device)]
pub fn zero_tiles(ctx: Ctx, a: Out<Tensor<bf16, 4>>, b: Out<Tensor<f16, 4>>) {
    store(a, [0], zeros([4], bf16));
    store(b, [0], zeros([4], f16));
}

#[eagle::host]
pub fn zero_tiles_host(a: Out<Tensor<bf16, 4>>, b: Out<Tensor<f16, 4>>) {
    zero_tiles(a, b, device = 0);
}

/// `zeros([4], bf16)` built `const 0` of an integer kind with a float dtype, which the
/// constant's typing rule refuses ("constant `0` does not fit dtype `bf16`"); it is the `+0.0`
/// of the dtype, on `sim` and in the CUDA emulation.
#[test]
fn zeros_of_a_float_storage_dtype_are_its_positive_zero() {
    let check = |s: &Session| {
        let mut a = Tensor::from_vec(&[4], vec![bf16::from_f32(7.0); 4]).unwrap();
        let mut b = Tensor::from_vec(&[4], vec![f16::from_f32(7.0); 4]).unwrap();
        zero_tiles_host.launch(s, &mut a, &mut b).unwrap();
        assert!(a.data().iter().all(|v| v.to_bits() == 0), "{:?}", a.data());
        assert!(b.data().iter().all(|v| v.to_bits() == 0), "{:?}", b.data());
    };
    check(&Session::sim(1).unwrap());
    #[cfg(feature = "cuda")]
    {
        emulation::cxx();
        check(&Session::cuda_emulated(vec![0]).unwrap());
    }
}
