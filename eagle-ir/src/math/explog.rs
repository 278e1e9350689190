//! `exp` and `ln`, the two kernels the other functions build on.
//!
//! The reductions and polynomials are the classic ones of fdlibm (Sun Microsystems, 1993;
//! also in musl): `exp` reduces by `ln 2` and uses a degree-5 rational form, `ln` reduces
//! to `[sqrt(2)/2, sqrt(2))` and uses `2 atanh(s)` with `s = f / (2 + f)`. Written branch-free
//! on [`Real`]: special cases are selects.

use super::lanes::*;

const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01;
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
const INV_LN2: f64 = 1.442_695_040_888_963_387_00e+00;

const P: [f64; 5] = [
    1.666_666_666_666_660_190_37e-01,
    -2.777_777_777_701_559_338_42e-03,
    6.613_756_321_437_934_361_17e-05,
    -1.653_390_220_546_525_153_90e-06,
    4.138_136_797_057_238_460_39e-08,
];

/// `e^x` as `2^k * e^r`, with `x = k ln2 + hi - lo` and `|r| <= ln2 / 2`.
/// Returns `(e^r, k)` so that callers may scale as they need.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn exp_reduced<R: Real>(x: R) -> (R, R::Bits) {
    let cx = x.cx();
    let (kf, k) = round_int(x * R::lit(cx, INV_LN2));
    let hi = x - kf * R::lit(cx, LN2_HI);
    let lo = kf * R::lit(cx, LN2_LO);
    let r = hi - lo;
    let z = r * r;
    let c = r - z * poly(z, &P);
    let y = R::lit(cx, 1.0) - ((lo - (r * c) / (R::lit(cx, 2.0) - c)) - hi);
    (y, k)
}

/// `e^x`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn exp<R: Real>(x: R) -> R {
    let cx = x.cx();
    // Outside [-1000, 1000] the result is 0 or inf already; the clamp keeps the reduction
    // in range. NaN passes through the selects (comparisons with NaN are false).
    let xc = R::select(x.gt(R::lit(cx, 1000.0)), R::lit(cx, 1000.0), x);
    let xc = R::select(xc.lt(R::lit(cx, -1000.0)), R::lit(cx, -1000.0), xc);
    let (y, k) = exp_reduced(xc);
    let r = scale(y, k);
    R::select(x.is_nan(), x + x, r)
}

const LG: [f64; 7] = [
    6.666_666_666_666_735_130e-01,
    3.999_999_999_940_941_908e-01,
    2.857_142_874_366_239_149e-01,
    2.222_219_843_214_978_396e-01,
    1.818_357_216_161_805_012e-01,
    1.531_383_769_920_937_332e-01,
    1.479_819_860_511_658_591e-01,
];

/// The pieces of `ln x` for a finite `x > 0`: `ln x = k ln2 + f - hfsq + s (hfsq + R)`,
/// returned as `(k, f, hfsq, tail)` with `tail = s (hfsq + R)`, `1 + f` in
/// `[sqrt(2)/2, sqrt(2))`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn ln_parts<R: Real>(x: R) -> (R, R, R, R) {
    let (k, f) = ln_reduce(x);
    let (hfsq, tail, _) = ln_tail(f);
    (k, f, hfsq, tail)
}

/// The special values every logarithm shares: NaN for `x < 0` or NaN, `-inf` at `±0`, `+inf`
/// at `+inf`; `r` elsewhere.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn log_specials<R: Float>(x: R, r: R) -> R {
    let cx = x.cx();
    let r = R::select(x.eq(R::lit(cx, f64::INFINITY)), x, r);
    let r = R::select(x.eq(R::lit(cx, 0.0)), R::lit(cx, f64::NEG_INFINITY), r);
    R::select(x.lt(R::lit(cx, 0.0)) | x.is_nan(), R::lit(cx, f64::NAN), r)
}

/// `ln x`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn ln<R: Real>(x: R) -> R {
    let cx = x.cx();
    let (k, f, hfsq, tail) = ln_parts(x);
    let r = tail + k * R::lit(cx, LN2_LO) - hfsq + f + k * R::lit(cx, LN2_HI);
    log_specials(x, r)
}

// ---- pub helpers for the exp/log family (added; `exp` and `ln` above are unchanged) ----

/// Dekker's product: `a * b = p + e`, split by [`high_half`] (21 + 32 bits; `e` is exact
/// up to ~2^-72 `|p|`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn two_prod_hh<R: Real>(a: R, b: R) -> (R, R) {
    let p = a * b;
    let ah = high_half(a);
    let al = a - ah;
    let bh = high_half(b);
    let bl = b - bh;
    (p, (((ah * bh - p) + ah * bl) + al * bh) + al * bl)
}

/// `e^r - 1 - r - r^2/2 ~= (r^3 / 2) * poly(r, &EXPM1_T)` on `|r| <= 0.3466`: a Chebyshev fit
/// (degree 9) to `2 (e^r - 1 - r - r^2/2) / r^3`, absolute error of the product below 2^-60.
const EXPM1_T: [f64; 10] = [
    0.33333333333333337,
    0.08333333333333333,
    0.016666666666660127,
    0.0027777777777773104,
    0.0003968253972610101,
    4.960317463428455e-05,
    5.5114536929663255e-06,
    5.511456594600483e-07,
    5.020076639173404e-08,
    4.182246997608166e-09,
];

/// `r * r = p + e` (Dekker's square, split by [`high_half`]).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn two_sq<R: Real>(r: R) -> (R, R) {
    let cx = r.cx();
    let p = r * r;
    let rh = high_half(r);
    let rl = r - rh;
    (p, ((rh * rh - p) + R::lit(cx, 2.0) * (rh * rl)) + rl * rl)
}

/// `e^(hi - lo) - 1 = qh + ql` in double length (normalized: `|ql| <= ulp(qh) / 2`), for `|hi - lo| <= ~0.35` (`|lo|` small
/// against `|hi|`, or `hi == 0`): `r + r^2/2 + r^3 P(r)` ([`EXPM1_T`]) with `r + r^2/2` summed
/// error-free (Dekker product for `r^2`) and the rounding error of `r = hi - lo` carried.
/// Absolute error ~2^-60; relative ~2^-60 near 0.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn exp_kernel<R: Real>(hi: R, lo: R) -> (R, R) {
    let cx = hi.cx();
    let (r, dr) = fast_two_sum(hi, -lo);
    let (p, pe) = two_sq(r);
    let h = R::lit(cx, 0.5);
    let (p, pe) = (p * h, pe * h);
    let (s, se) = fast_two_sum(r, p);
    let tail = (r * p) * poly(r, &EXPM1_T);
    let ql = ((se + pe) + (dr + dr * r)) + tail;
    fast_two_sum(s, ql)
}

/// `e^x = 2^k (1 + qh + ql)` with fdlibm's reduction by `ln 2` (`|x| < 2^40`); returns
/// `(qh, ql, k as a float, k as bits)`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn exp_parts<R: Real>(x: R) -> (R, R, R, R::Bits) {
    let cx = x.cx();
    let (kf, k) = round_int(x * R::lit(cx, INV_LN2));
    let hi = x - kf * R::lit(cx, LN2_HI);
    let lo = kf * R::lit(cx, LN2_LO);
    let (qh, ql) = exp_kernel(hi, lo);
    (qh, ql, kf, k)
}

/// `ln 2` split as fdlibm's `(ln2_hi, ln2_lo)` (`ln2_hi` has 32 significant bits).
pub const LN2_SPLIT: (f64, f64) = (LN2_HI, LN2_LO);

/// The reduction of [`ln_parts`] alone: `x = 2^k (1 + f)`, `1 + f` in `[sqrt(2)/2, sqrt(2))`,
/// for a finite `x > 0`; returns `(k, f)`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn ln_reduce<R: Real>(x: R) -> (R, R) {
    let cx = x.cx();
    let sub = x.lt(R::lit(cx, f64::MIN_POSITIVE));
    let xs = R::select(sub, x * R::lit(cx, 18014398509481984.0), x);
    let kadj = R::select(sub, R::lit(cx, -54.0), R::lit(cx, 0.0));
    let ix = xs.to_bits() + R::Bits::lit(cx, (0x3ff0_0000u64 - 0x3fe6_a09e) << 32);
    let e = ix >> 52;
    let k = from_small::<R>(e) - R::lit(cx, 1023.0) + kadj;
    let hi = ((ix >> 32) & R::Bits::lit(cx, 0x000f_ffff)) + R::Bits::lit(cx, 0x3fe6_a09e);
    let m = R::from_bits((hi << 32) | (ix & R::Bits::lit(cx, 0xffff_ffff)));
    (k, m - R::lit(cx, 1.0))
}

/// The polynomial part of [`ln_parts`]: `ln(1 + f) = f - hfsq + tail`; returns
/// `(hfsq, tail, s)` with `s = f / (2 + f)`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn ln_tail<R: Real>(f: R) -> (R, R, R) {
    let cx = f.cx();
    let hfsq = R::lit(cx, 0.5) * f * f;
    let s = f / (R::lit(cx, 2.0) + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (R::lit(cx, LG[1]) + w * (R::lit(cx, LG[3]) + w * R::lit(cx, LG[5])));
    let t2 = z
        * (R::lit(cx, LG[0])
            + w * (R::lit(cx, LG[2]) + w * (R::lit(cx, LG[4]) + w * R::lit(cx, LG[6]))));
    (hfsq, s * (hfsq + (t2 + t1)), s)
}
