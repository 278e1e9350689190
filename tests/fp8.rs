//! The 8-bit float dtypes `f8e4m3`, `f8e5m2` (OCP OFP8) and the MX scale dtype `e8m0`.
//!
//! - Every one of the 256 patterns of each decodes to the `float8` crate's value (`e8m0`: to
//!   `2^(code - 127)`, code 255 NaN), and encodes back to itself.
//! - `saturating_cast` rounds as the `float8` crate's `from_f32` (NVIDIA's `__NV_SATFINITE`)
//!   on a million `f32`s; `as` follows the OCP non-saturating rules (a table).
//! - Kernels on the three dtypes and `matmul_mx` compute, on `sim` and in the CUDA emulation,
//!   bit for bit what the host computes with `eagle::to_f8` and plain Rust in the documented
//!   order.
use eagle::ir::eval::narrow_float;
use eagle::ir::math::lanes::W;
use eagle::ir::math::narrow::{
    decode, encode, Format, E8M0 as E8M0_FMT, F8E4M3 as E4, F8E5M2 as E5,
};
use eagle::ir::DType;
use eagle::prelude::*;
use eagle::{to_f8, E8M0, F8E4M3, F8E5M2};
use rand::{Rng, SeedableRng};

#[cfg(feature = "cuda")]
mod emulation;

/// The pattern `as` gives for `x` (the kernels' rounding, `eagle::to_f8`).
fn round(x: f32, d: DType) -> u8 {
    narrow_float(x as f64, d).bits() as u8
}

#[test]
fn every_pattern_decodes_to_the_float8_value_and_back() {
    for b in 0..=255u8 {
        for (fmt, want, quiet) in [
            (E4, F8E4M3::from_bits(b).to_f32(), 0),
            (E5, F8E5M2::from_bits(b).to_f32(), 0x02),
        ] {
            let got = decode::<f64>(W(b as u64), fmt) as f32;
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{fmt:?} {b:#04x}: {got} vs float8's {want}"
            );
            let back = encode::<f64>(decode::<f64>(W(b as u64), fmt), fmt).0 as u8;
            let want_back = if want.is_nan() { b | quiet } else { b };
            assert_eq!(back, want_back, "{fmt:?} round trip {b:#04x}");
        }
        let got = decode::<f64>(W(b as u64), E8M0_FMT);
        if b == 255 {
            assert!(got.is_nan());
        } else {
            assert_eq!(got, 2f64.powi(b as i32 - 127), "e8m0 {b}");
            assert_eq!(
                encode::<f64>(got, E8M0_FMT).0,
                b as u64,
                "e8m0 round trip {b}"
            );
            assert_eq!(E8M0::from_bits(b).to_f32() as f64, got);
        }
    }
    // The formats' extremes (OFP8 table 1).
    assert_eq!(E4.max(), 448.0);
    assert_eq!(E5.max(), 57344.0);
    assert_eq!(E8M0_FMT.max(), 2f64.powi(127));
    assert_eq!(decode::<f64>(W(0x01), E4), 2f64.powi(-9));
    assert_eq!(decode::<f64>(W(0x01), E5), 2f64.powi(-16));
    assert!(decode::<f64>(W(0x7f), E4).is_nan());
    assert!(decode::<f64>(W(0xff), E4).is_nan());
    assert_eq!(decode::<f64>(W(0x7c), E5), f64::INFINITY);
}

fn f32_samples() -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(8);
    let mut v = vec![
        0.0,
        -0.0,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e-45,
        448.0,
        464.0,
        464.01,
        480.0,
        57344.0,
        61439.99,
        61440.0,
        2f32.powi(-10),
        2f32.powi(-10) * 1.0001,
        2f32.powi(-17),
        3.0 * 2f32.powi(-11),
    ];
    // Every f32 whose top 19 bits are in the FP8 ranges, and random bits.
    for hi in 0..(1u32 << 13) {
        let e = 0x3a00_0000u32 + (hi << 14);
        v.push(f32::from_bits(e | rng.gen_range(0..1 << 14)));
        v.push(-f32::from_bits(e | (1 << 13)));
    }
    for _ in 0..1_000_000 {
        v.push(f32::from_bits(rng.gen()));
    }
    v
}

/// `saturating_cast` as the kernels build it (`max`, `min`, then `as`), on the host. (Rust's
/// `f32::max` drops a NaN operand where eagle's `max` keeps it, hence the test.)
fn saturating(x: f32, d: DType) -> u8 {
    let max = Format::of(d).unwrap().max() as f32;
    round(if x.is_nan() { x } else { x.clamp(-max, max) }, d)
}

#[test]
fn saturating_rounding_equals_float8_on_a_million_f32s() {
    for x in f32_samples() {
        for (d, want) in [
            (DType::F8E4M3, F8E4M3::from_f32(x).to_bits()),
            (DType::F8E5M2, F8E5M2::from_f32(x).to_bits()),
        ] {
            let got = saturating(x, d);
            let nan = |b: u8| decode::<f64>(W(b as u64), Format::of(d).unwrap()).is_nan();
            assert!(
                got == want || (nan(got) && nan(want)),
                "{d} of {x:e} ({:#010x}): {got:#04x}, float8 {want:#04x}",
                x.to_bits()
            );
        }
    }
}

#[test]
fn as_casts_follow_the_ocp_non_saturating_rules() {
    let e4 = [
        (448.0, 0x7e),
        (464.0, 0x7e), // the tie rounds to even, 448
        (464.5, 0x7f), // beyond: NaN
        (-1e9, 0xff),
        (f32::INFINITY, 0x7f),
        (f32::NEG_INFINITY, 0xff),
        (2f32.powi(-10), 0x00), // half the smallest subnormal: a tie to even, 0
        (3.0 * 2f32.powi(-11), 0x01), // 0.75 of the smallest subnormal
        (3.0 * 2f32.powi(-10), 0x02), // 1.5 of it: a tie to even
        (-2.5, 0xc2),
        (1.0, 0x38),
    ];
    for (x, b) in e4 {
        assert_eq!(round(x, DType::F8E4M3), b, "f8e4m3 of {x:e}");
        assert_eq!(to_f8::<F8E4M3>(x).to_bits(), b);
    }
    let e5 = [
        (57344.0, 0x7b),
        (61439.0, 0x7b),
        (61440.0, 0x7c), // the tie rounds to even: infinity
        (f32::NEG_INFINITY, 0xfc),
        (2f32.powi(-17), 0x00),
        (-2.5, 0xc1),
        (1.0, 0x3c),
    ];
    for (x, b) in e5 {
        assert_eq!(round(x, DType::F8E5M2), b, "f8e5m2 of {x:e}");
    }
    let e8 = [
        (1.0, 127),
        (1.99, 127),
        (0.75, 126),
        (2.0, 128),
        (0.0, 0),
        (-0.0, 0),
        (1e-40, 0),
        (f32::MAX, 254),
        (-1.0, 255),
        (f32::INFINITY, 255),
        (f32::NAN, 255),
    ];
    for (x, b) in e8 {
        assert_eq!(round(x, DType::E8M0), b, "e8m0 of {x:e}");
        assert_eq!(E8M0::from_f32(x).to_bits(), b);
    }
    assert_eq!(E8M0::from_exponent(-127).to_bits(), 0);
    assert_eq!(E8M0::from_exponent(128), E8M0::NAN);
}

const N: usize = 40;

/// Arithmetic, `as` and `saturating_cast` on the 8-bit dtypes, on tiles.
#[eagle::kernel(device)]
pub fn eights(
    ctx: Ctx,
    a: Tensor<f8e4m3, 1, N>,
    b: Tensor<f8e5m2, 1, N>,
    s: Tensor<e8m0, 1, N>,
    x: Tensor<f32, 1, N>,
    y4: Out<Tensor<f8e4m3, 4, N>>,
    y5: Out<Tensor<f8e5m2, 3, N>>,
    ys: Out<Tensor<e8m0, 2, N>>,
    f: Out<Tensor<f32, 3, N>>,
    bits: Out<Tensor<u8, 2, N>>,
) {
    let t = load(a, [0, 0], [1, N]);
    let u = load(b, [0, 0], [1, N]);
    let v = load(s, [0, 0], [1, N]);
    let xf = load(x, [0, 0], [1, N]);
    store(y4, [0, 0], t * t);
    store(y4, [1, 0], xf as f8e4m3);
    store(y4, [2, 0], saturating_cast(xf, f8e4m3));
    store(y4, [3, 0], u as f8e4m3);
    store(y5, [0, 0], u + u);
    store(y5, [1, 0], xf as f8e5m2);
    store(y5, [2, 0], saturating_cast(xf, f8e5m2));
    store(ys, [0, 0], xf as e8m0);
    store(ys, [1, 0], v * v);
    store(f, [0, 0], t as f32);
    store(f, [1, 0], u as f32);
    store(f, [2, 0], v as f32 * xf);
    store(bits, [0, 0], t.to_bits());
    store(bits, [1, 0], u.to_bits());
}

#[eagle::host]
pub fn eights_host(
    a: Tensor<f8e4m3, 1, N>,
    b: Tensor<f8e5m2, 1, N>,
    s: Tensor<e8m0, 1, N>,
    x: Tensor<f32, 1, N>,
    y4: Out<Tensor<f8e4m3, 4, N>>,
    y5: Out<Tensor<f8e5m2, 3, N>>,
    ys: Out<Tensor<e8m0, 2, N>>,
    f: Out<Tensor<f32, 3, N>>,
    bits: Out<Tensor<u8, 2, N>>,
) {
    eights(a, b, s, x, y4, y5, ys, f, bits, device = 0);
}

fn row<T: eagle::runtime::Element>(v: Vec<T>) -> Tensor<T> {
    Tensor::from_vec(&[1, N], v).unwrap()
}

fn check_eights(sess: &Session) {
    let a: Vec<F8E4M3> = (0..N)
        .map(|i| F8E4M3::from_bits((i * 37 + 5) as u8))
        .collect();
    let b: Vec<F8E5M2> = (0..N)
        .map(|i| F8E5M2::from_bits((i * 53 + 3) as u8))
        .collect();
    let s: Vec<E8M0> = (0..N)
        .map(|i| E8M0::from_bits((i * 13 + 60) as u8))
        .collect();
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        448.0,
        464.0,
        465.0,
        -500.0,
        57344.0,
        61440.0,
        1e-10,
        -0.0,
        0.0,
        1e-3,
        -3.3,
        0.3,
        7e4,
    ];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let x: Vec<f32> = (0..N)
        .map(|i| {
            specials.get(i).copied().unwrap_or_else(|| {
                rng.gen_range(-600.0f32..600.0) * rng.gen_range(0.0f32..1.0).powi(6)
            })
        })
        .collect();
    let mut y4 = Tensor::<f8e4m3>::zeros(&[4, N]);
    let mut y5 = Tensor::<f8e5m2>::zeros(&[3, N]);
    let mut ys = Tensor::<e8m0>::zeros(&[2, N]);
    let mut f = Tensor::<f32>::zeros(&[3, N]);
    let mut bits = Tensor::<u8>::zeros(&[2, N]);
    eights_host
        .launch(
            sess,
            &row(a.clone()),
            &row(b.clone()),
            &row(s.clone()),
            &row(x.clone()),
            &mut y4,
            &mut y5,
            &mut ys,
            &mut f,
            &mut bits,
        )
        .unwrap();
    let same = |got: u8, want: u8, d: DType, what: &str, i: usize| {
        let fmt = Format::of(d).unwrap();
        let nan = |b: u8| decode::<f64>(W(b as u64), fmt).is_nan();
        assert!(
            got == want || (nan(got) && nan(want)),
            "{what} {i}: got {got:#04x}, want {want:#04x}"
        );
    };
    let (e4, e5, e8) = (DType::F8E4M3, DType::F8E5M2, DType::E8M0);
    for i in 0..N {
        let (ta, ub, vs) = (a[i].to_f32(), b[i].to_f32(), s[i].to_f32());
        let y4 = |r: usize| y4.data()[r * N + i].to_bits();
        let y5 = |r: usize| y5.data()[r * N + i].to_bits();
        let ys = |r: usize| ys.data()[r * N + i].to_bits();
        same(y4(0), round(ta * ta, e4), e4, "f8e4m3 mul", i);
        same(y4(1), round(x[i], e4), e4, "f32 as f8e4m3", i);
        same(
            y4(2),
            F8E4M3::from_f32(x[i]).to_bits(),
            e4,
            "saturating f8e4m3",
            i,
        );
        same(y4(3), round(ub, e4), e4, "f8e5m2 as f8e4m3", i);
        same(y5(0), round(ub + ub, e5), e5, "f8e5m2 add", i);
        same(y5(1), round(x[i], e5), e5, "f32 as f8e5m2", i);
        same(
            y5(2),
            F8E5M2::from_f32(x[i]).to_bits(),
            e5,
            "saturating f8e5m2",
            i,
        );
        same(ys(0), E8M0::from_f32(x[i]).to_bits(), e8, "f32 as e8m0", i);
        same(ys(1), E8M0::from_f32(vs * vs).to_bits(), e8, "e8m0 mul", i);
        let fl = |r: usize| f.data()[r * N + i];
        for (got, want, what) in [
            (fl(0), ta, "f8e4m3 as f32"),
            (fl(1), ub, "f8e5m2 as f32"),
            (fl(2), vs * x[i], "e8m0 as f32 times x"),
        ] {
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{what} {i}: {got} vs {want}"
            );
        }
        assert_eq!(bits.data()[i], a[i].to_bits(), "f8e4m3 to_bits {i}");
        // A signalling `f8e5m2` NaN is quiet once loaded.
        let want = if ub.is_nan() {
            b[i].to_bits() | 2
        } else {
            b[i].to_bits()
        };
        assert_eq!(bits.data()[N + i], want, "f8e5m2 to_bits {i}");
    }
}

#[test]
fn eight_bit_floats_compute_as_the_host_rounds() {
    check_eights(&Session::sim(1).unwrap());
}

const M: usize = 4;
const K: usize = 64;
const NB: usize = 8;

/// An MX matmul: `f8e4m3` A, `f8e5m2` B, one `e8m0` scale per 32 elements along K.
#[eagle::kernel(device)]
pub fn mx(
    ctx: Ctx,
    a: Tensor<f8e4m3, M, K>,
    sa: Tensor<e8m0, M, 2>,
    b: Tensor<f8e5m2, K, NB>,
    sb: Tensor<e8m0, 2, NB>,
    c: Out<Tensor<f32, M, NB>>,
) {
    let r = matmul_mx(
        load(a, [0, 0], [M, K]),
        load(sa, [0, 0], [M, 2]),
        load(b, [0, 0], [K, NB]),
        load(sb, [0, 0], [2, NB]),
    );
    store(c, [0, 0], r);
}

#[eagle::host]
pub fn mx_host(
    a: Tensor<f8e4m3, M, K>,
    sa: Tensor<e8m0, M, 2>,
    b: Tensor<f8e5m2, K, NB>,
    sb: Tensor<e8m0, 2, NB>,
    c: Out<Tensor<f32, M, NB>>,
) {
    mx(a, sa, b, sb, c, device = 0);
}

fn check_mx(sess: &Session) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    let a: Vec<F8E4M3> = (0..M * K)
        .map(|_| to_f8(rng.gen_range(-400.0f32..400.0)))
        .collect();
    let b: Vec<F8E5M2> = (0..K * NB)
        .map(|_| to_f8(rng.gen_range(-3.0f32..3.0)))
        .collect();
    let sa: Vec<E8M0> = (0..M * 2)
        .map(|_| E8M0::from_exponent(rng.gen_range(-12..6)))
        .collect();
    let sb: Vec<E8M0> = (0..2 * NB)
        .map(|_| E8M0::from_exponent(rng.gen_range(-6..12)))
        .collect();
    let mut c = Tensor::<f32>::zeros(&[M, NB]);
    mx_host
        .launch(
            sess,
            &Tensor::from_vec(&[M, K], a.clone()).unwrap(),
            &Tensor::from_vec(&[M, 2], sa.clone()).unwrap(),
            &Tensor::from_vec(&[K, NB], b.clone()).unwrap(),
            &Tensor::from_vec(&[2, NB], sb.clone()).unwrap(),
            &mut c,
        )
        .unwrap();
    // The documented order: each element times its block's scale, then `matmul`'s order
    // (k ascending from -0.0, each product and sum rounded to f32).
    for i in 0..M {
        for j in 0..NB {
            let mut acc = -0.0f32;
            for k in 0..K {
                let x = a[i * K + k].to_f32() * sa[i * 2 + k / 32].to_f32();
                let y = b[k * NB + j].to_f32() * sb[(k / 32) * NB + j].to_f32();
                acc += x * y;
            }
            let got = c.data()[i * NB + j];
            assert_eq!(got.to_bits(), acc.to_bits(), "c[{i}][{j}]: {got} vs {acc}");
        }
    }
}

#[test]
fn matmul_mx_is_the_scaled_matmul_in_the_documented_order() {
    check_mx(&Session::sim(1).unwrap());
}

#[cfg(feature = "cuda")]
#[test]
fn emulation_gives_the_same_bits() {
    emulation::cxx();
    let s = Session::cuda_emulated(vec![0]).unwrap();
    check_eights(&s);
    check_mx(&s);
}

/// K = 48 is not a multiple of the MX block.
#[eagle::kernel(device)]
pub fn mx_bad_k(
    ctx: Ctx,
    a: Tensor<f8e4m3, M, 48>,
    sa: Tensor<e8m0, M, 2>,
    b: Tensor<f8e4m3, 48, NB>,
    sb: Tensor<e8m0, 2, NB>,
    c: Out<Tensor<f32, M, NB>>,
) {
    let t = load(a, [0, 0], [M, 48]);
    // marker: bad k
    let r = matmul_mx(
        t,
        load(sa, [0, 0], [M, 2]),
        load(b, [0, 0], [48, NB]),
        load(sb, [0, 0], [2, NB]),
    );
    store(c, [0, 0], r);
}

/// The scale of B has one row where K / 32 = 2 are needed.
#[eagle::kernel(device)]
pub fn mx_bad_scale(
    ctx: Ctx,
    a: Tensor<f8e4m3, M, K>,
    sa: Tensor<e8m0, M, 2>,
    b: Tensor<f8e4m3, K, NB>,
    sb: Tensor<e8m0, 1, NB>,
    c: Out<Tensor<f32, M, NB>>,
) {
    let t = load(a, [0, 0], [M, K]);
    // marker: bad scale
    let r = matmul_mx(
        t,
        load(sa, [0, 0], [M, 2]),
        load(b, [0, 0], [K, NB]),
        load(sb, [0, 0], [1, NB]),
    );
    store(c, [0, 0], r);
}

/// `saturating_cast` to an integer.
#[eagle::kernel(device)]
pub fn sat_int(ctx: Ctx, x: Tensor<f32, 1, N>, y: Out<Tensor<i8, 1, N>>) {
    // marker: sat int
    let t = saturating_cast(load(x, [0, 0], [1, N]), i8);
    store(y, [0, 0], t);
}

/// A negative `e8m0` literal.
#[eagle::kernel(device)]
pub fn e8m0_negative(ctx: Ctx, x: Tensor<e8m0, 1, N>, y: Out<Tensor<e8m0, 1, N>>) {
    // marker: e8m0 literal
    store(y, [0, 0], load(x, [0, 0], [1, N]) * -2.0);
}

fn line_of(marker: &str) -> usize {
    let src = include_str!("fp8.rs");
    let at = src.find(&format!("// marker: {marker}\n")).unwrap();
    src[..at].lines().count() + 1
}

#[test]
fn mx_and_saturation_mistakes_are_errors_at_the_line() {
    let e = mx_bad_k.ir().unwrap_err().to_string();
    assert!(
        e.contains("`matmul_mx(a, scale_a, b, scale_b)`: `a` is `[4, 48]`, but K must be a constant multiple of 32")
            && e.contains(&format!("tests/fp8.rs:{}:", line_of("bad k"))),
        "{e}"
    );
    let e = mx_bad_scale.ir().unwrap_err().to_string();
    assert!(
        e.contains("operand `scale_b` must be `[2, 8]` for `a` of `[4, 64]`, found `[1, 8]`")
            && e.contains(&format!("tests/fp8.rs:{}:", line_of("bad scale"))),
        "{e}"
    );
    let e = e8m0_negative.ir().unwrap_err().to_string();
    assert!(
        e.contains("float literal `-2e0` is not a value of `e8m0`, whose values are the powers of two 2^-127 ..= 2^127 (no zero, no sign)")
            && e.contains(&format!("tests/fp8.rs:{}:", line_of("e8m0 literal"))),
        "{e}"
    );
    let e = sat_int.ir().unwrap_err().to_string();
    assert!(
        e.contains("`saturating_cast` converts a number to a float dtype, found `f32` to `i8`")
            && e.contains(&format!("tests/fp8.rs:{}:", line_of("sat int"))),
        "{e}"
    );
}

/// `zeros` of the scale dtype, which has no zero.
#[eagle::kernel(device)]
pub fn zero_scales(ctx: Ctx, s: Out<Tensor<e8m0, 4>>) {
    store(s, [0], zeros([4], e8m0));
}

#[eagle::host]
pub fn zero_scales_host(s: Out<Tensor<e8m0, 4>>) {
    zero_scales(s, device = 0);
}

/// `zeros([4], e8m0)` is refused at its line with the fix (it built `const 0` of an integer
/// kind, which the constant's typing rule refused without saying why).
#[test]
fn zeros_of_e8m0_is_an_error_naming_the_fix() {
    let mut s = Tensor::from_vec(&[4], vec![E8M0::from_bits(127); 4]).unwrap();
    let e = zero_scales_host
        .launch(&Session::sim(1).unwrap(), &mut s)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`zeros` of `e8m0`: the scale dtype has no zero") && e.contains("tests/fp8.rs:"),
        "{e}"
    );
}
