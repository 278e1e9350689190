//! The exp/log family built on the kernels of [`super::explog`]: `exp2`, `expm1`, `log2`,
//! `log10`, `log1p`, `sinh`, `cosh`, `tanh`, `sigmoid`.
//!
//! The exponentials share one kernel: fdlibm's reduction `x = k ln2 + r` and a double-length
//! `e^r - 1 = qh + ql` ([`exp_parts`], [`exp_kernel`]); the results are then assembled with
//! error-free sums (and, for `tanh`/`sigmoid`, a compensated double-length division) so that
//! the last step rounds once. The logarithms follow fdlibm/musl (`e_log2.c`, `e_log10.c`,
//! `s_log1p.c`). Everything is branch-free: every region is computed and selected.

use super::explog::*;
use super::lanes::*;

const TINY54: f64 = 5.551115123125783e-17; // 2^-54
const TINY53: f64 = 1.1102230246251565e-16; // 2^-53
const TINY27: f64 = 7.450580596923828e-9; // 2^-27

/// `fl(1 + qh + ql)`, rounded once (up to a negligible error).
#[cfg_attr(not(debug_assertions), inline(always))]
fn one_plus<R: Real>(qh: R, ql: R) -> R {
    let cx = qh.cx();
    let (s, e) = fast_two_sum(R::lit(cx, 1.0), qh);
    s + (e + ql)
}

/// `(nh + nl) / (dh + dl)` as `s0 + corr` (`s0 = fl(nh / dh)`, `|corr| <~ ulp(s0)`, exact to
/// ~2^-70 relative): a quotient corrected by its exact remainder.
#[cfg_attr(not(debug_assertions), inline(always))]
fn div_dd<R: Real>(nh: R, nl: R, dh: R, dl: R) -> (R, R) {
    let s0 = nh / dh;
    let (ph, pl) = two_prod_hh(s0, dh);
    let rho = (((nh - ph) - pl) + nl) - s0 * dl;
    (s0, rho / dh)
}

/// `2^52`.
const TWO52: f64 = 4503599627370496.0;

/// `(yh + yl) * 2^k` rounded once, also where the result is subnormal (`yh` near 1,
/// `|yl| <~ ulp(yh)`, `-2000 <= k <= 2000`): there the significand `(yh + yl) 2^(k + 1074)`
/// (below `2^52`) is rounded to an integer by an exact two-sum with `2^52`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn scale_dd<R: Real>(yh: R, yl: R, k: R::Bits) -> R {
    let cx = yh.cx();
    let normal = scale(yh + yl, k);
    let p = pow2::<R>(k + R::Bits::lit(cx, 1074)); // valid for -2096 <= k <= -51
    let (m, ml) = (yh * p, yl * p);
    let c = R::lit(cx, TWO52);
    let (t, te) = fast_two_sum(c, m);
    let sub = ((t + (te + ml)) - c) * R::lit(cx, 5e-324);
    let low = (k + R::Bits::lit(cx, 2000)).ult(R::Bits::lit(cx, 1000)); // -2000 <= k < -1000
    R::select(m.lt(c) & low, sub, normal)
}

/// `2^x`: `x = k + f` with `k = round(x)`, `|f| <= 1/2`, `f ln2` as an exact high product
/// plus a low part, the double-length `e^r - 1` kernel ([`exp_kernel`]), one final rounding (subnormals too).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn exp2<R: Real>(x: R) -> R {
    let cx = x.cx();
    let (ln2_hi, ln2_lo) = LN2_SPLIT;
    let xc = clamp(x, -1100.0, 1100.0);
    let (kf, k) = round_int(xc);
    let f = xc - kf;
    let fh = high_half(f); // 21 bits: fh * ln2_hi (32 bits) is exact
    let fl = f - fh;
    let hi = fh * R::lit(cx, ln2_hi);
    let lo = -(fl * R::lit(cx, ln2_hi) + f * R::lit(cx, ln2_lo));
    let (qh, ql) = exp_kernel(hi, lo);
    let (s1, e1) = fast_two_sum(R::lit(cx, 1.0), qh);
    let r = scale_dd(s1, e1 + ql, k);
    R::select(x.is_nan(), x + x, r)
}

/// `e^x - 1`: `e^x = 2^k (1 + qh + ql)` ([`exp_parts`]), then `(2^k - 1) + 2^k qh + 2^k ql`
/// summed error-free for `-53 <= k <= 53`, `2^k (1 + qh + ql - 2^-k)` beyond; `x` for `|x| < 2^-54`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn expm1<R: Real>(x: R) -> R {
    let cx = x.cx();
    let xc = clamp(x, -60.0, 1000.0);
    let (qh, ql, kf, k) = exp_parts(xc);
    // -53 <= k <= 53: 2^k - 1 is exact; fast two-sum is exact as |2^k - 1| >= |2^k qh| or k == 0.
    // k < -53: 2^k - 1 is inexact; -1 + fl(e^x) rounds once there.
    let p = pow2::<R>(k);
    let lowk = kf.lt(R::lit(cx, -53.0));
    let a = R::select(lowk, R::lit(cx, -1.0), p - R::lit(cx, 1.0));
    let b = p * R::select(lowk, one_plus(qh, ql), qh);
    let (s, e) = fast_two_sum(a, b);
    let mid = s + (e + R::select(lowk, R::lit(cx, 0.0), p * ql));
    // k > 53: fold -1 = -2^-k * 2^k into the low part (negligible once k > 100).
    let m = R::select(
        kf.gt(R::lit(cx, 100.0)),
        R::lit(cx, 0.0),
        pow2::<R>(R::Bits::lit(cx, 0) - k),
    );
    let (s1, e1) = fast_two_sum(R::lit(cx, 1.0), qh);
    let big = scale(s1 + ((e1 + ql) - m), k);
    let r = R::select(kf.gt(R::lit(cx, 53.0)), big, mid);
    let r = R::select(x.abs().lt(R::lit(cx, TINY54)), x, r);
    R::select(x.is_nan(), x + x, r)
}

/// The rounding error of `hfsq = 0.5 * f * f`: `f^2 / 2 = hfsq + half_sq_err(f)` (to ~2^-72).
#[cfg_attr(not(debug_assertions), inline(always))]
fn half_sq_err<R: Real>(f: R) -> R {
    let cx = f.cx();
    let (_, e) = two_prod_hh(f, f);
    R::lit(cx, 0.5) * e
}

/// `log2 x`: fdlibm's `ln` reduction ([`ln_parts`]) and musl's `e_log2.c` recombination
/// (`f - hfsq` split into a 21-bit high part times a split `1/ln2`, plus `k` added exactly),
/// with the rounding error of `hfsq` carried.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn log2<R: Real>(x: R) -> R {
    let cx = x.cx();
    const IVLN2HI: f64 = 1.44269504072144627571e+00; // 0x3ff71547_65200000
    const IVLN2LO: f64 = 1.67517131648865118353e-10;
    let (k, f, hfsq, tail) = ln_parts(x);
    let hl = half_sq_err(f);
    let hi = high_half(f - hfsq);
    let lo = ((f - hi) - hfsq) + (tail - hl);
    let val_hi = hi * R::lit(cx, IVLN2HI);
    let val_lo = (lo + hi) * R::lit(cx, IVLN2LO) + lo * R::lit(cx, IVLN2HI);
    let w = k + val_hi;
    let val_lo = val_lo + ((k - w) + val_hi);
    log_specials(x, val_lo + w)
}

/// `log10 x`: fdlibm's `ln` reduction ([`ln_parts`]) and musl's `e_log10.c` recombination
/// (split `1/ln10` and `log10(2)`, `k log10(2)` high part added exactly), with the rounding
/// error of `hfsq` carried.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn log10<R: Real>(x: R) -> R {
    let cx = x.cx();
    const IVLN10HI: f64 = 4.34294481878168880939e-01; // 0x3fdbcb7b_15200000
    const IVLN10LO: f64 = 2.50829467116452752298e-11;
    const LOG10_2HI: f64 = 3.01029995663611771306e-01; // 0x3fd34413_509f6000
    const LOG10_2LO: f64 = 3.69423907715893078616e-13;
    let (k, f, hfsq, tail) = ln_parts(x);
    let hl = half_sq_err(f);
    let hi = high_half(f - hfsq);
    let lo = ((f - hi) - hfsq) + (tail - hl);
    let val_hi = hi * R::lit(cx, IVLN10HI);
    let y = k * R::lit(cx, LOG10_2HI);
    let val_lo =
        (k * R::lit(cx, LOG10_2LO) + (lo + hi) * R::lit(cx, IVLN10LO)) + lo * R::lit(cx, IVLN10HI);
    let w = y + val_hi;
    let val_lo = val_lo + ((y - w) + val_hi);
    log_specials(x, val_lo + w)
}

/// `ln(1 + x)`: musl's `log1p.c` (fdlibm `s_log1p.c`): `f = x` where `1 + x` is in
/// `[sqrt(2)/2, sqrt(2))`, else `u = 1 + x` reduced with the rounding correction `c / u`;
/// then fdlibm's `ln` polynomial ([`ln_tail`]), summed with `f - f^2/2` and `k ln2_hi` exact.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn log1p<R: Real>(x: R) -> R {
    let cx = x.cx();
    let (ln2_hi, ln2_lo) = LN2_SPLIT;
    let one = R::lit(cx, 1.0);
    let u = one + x;
    let (ku, fu) = ln_reduce(u);
    let c = R::select(ku.ge(R::lit(cx, 2.0)), one - (u - x), x - (u - one)) / u;
    let c = R::select(ku.ge(R::lit(cx, 54.0)), R::lit(cx, 0.0), c);
    let near = x.gt(R::lit(cx, -0.2928932188134524)) & x.lt(R::lit(cx, 0.41421356237309503));
    let k = R::select(near, R::lit(cx, 0.0), ku);
    let f = R::select(near, x, fu);
    let c = R::select(near, R::lit(cx, 0.0), c);
    let (hfsq, tail, _) = ln_tail(f);
    // ln(1 + x) = k ln2_hi + (f - hfsq) + (tail - hl + c + k ln2_lo), the two big sums exact.
    let hl = half_sq_err(f);
    let (a, ae) = fast_two_sum(f, -hfsq);
    let (b, be) = fast_two_sum(k * R::lit(cx, ln2_hi), a);
    let r = b + ((be + ae) + (((tail - hl) + c) + k * R::lit(cx, ln2_lo)));
    let r = log_specials(u, r);
    R::select(x.abs().lt(R::lit(cx, TINY53)), x, r)
}

/// Taylor coefficients `1/3!, 1/5!, ..., 1/13!` of `(sinh x - x) / x^3` in `x^2`
/// (`|x| < ln2 / 2`: the first term left out is below 2^-61 relative).
const SINH_P: [f64; 6] = [
    0.16666666666666666,
    0.008333333333333333,
    0.0001984126984126984,
    2.7557319223985893e-06,
    2.505210838544172e-08,
    1.6059043836821613e-10,
];

/// Taylor coefficients `1/2!, 1/4!, ..., 1/14!` of `(cosh x - 1) / x^2` in `x^2`
/// (`|x| < ln2 / 2`: the first term left out is below 2^-68).
const COSH_P: [f64; 7] = [
    0.5,
    0.041666666666666664,
    0.001388888888888889,
    2.48015873015873e-05,
    2.755731922398589e-07,
    2.08767569878681e-09,
    1.1470745597729725e-11,
];

/// For `a >= 0` (clamped): `e^a = 2^k (yh + yl)` and `e^-a = 2^-k (dh + dl)`, both in double
/// length (`dh + dl = 2^-2k / (yh + yl)` by a compensated division; 0 once `k > 30`).
#[cfg_attr(not(debug_assertions), inline(always))]
fn exp_pm<R: Real>(a: R) -> (R, R, R, R, R, R::Bits) {
    let cx = a.cx();
    let (qh, ql, kf, k) = exp_parts(a);
    let (s1, e1) = fast_two_sum(R::lit(cx, 1.0), qh);
    let (yh, yl) = fast_two_sum(s1, e1 + ql);
    let c = R::select(
        kf.gt(R::lit(cx, 30.0)),
        R::lit(cx, 0.0),
        pow2::<R>(R::Bits::lit(cx, 0) - k - k),
    );
    let dh = c / yh;
    let (ph, pl) = two_prod_hh(dh, yh);
    let dl = (((c - ph) - pl) - dh * yl) / yh;
    (yh, yl, dh, dl, kf, k)
}

/// `sinh x`: the Taylor polynomial for `|x| < ln2 / 2` (`k = 0`), else
/// `2^(k-1) ((1 + q) - 2^-2k / (1 + q))` from `e^|x| = 2^k (1 + q)` ([`exp_parts`]), all in
/// double length, rounded once and scaled (no overflow before the halving).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn sinh<R: Real>(x: R) -> R {
    let cx = x.cx();
    let a = clamp(x.abs(), 0.0, 1000.0);
    let (yh, yl, dh, dl, kf, k) = exp_pm(a);
    let (t, te) = fast_two_sum(yh, -dh);
    let big = copysign(scale(t + ((te + yl) - dl), k - R::Bits::lit(cx, 1)), x);
    let z = x * x;
    let small = x + x * (z * poly(z, &SINH_P));
    let r = R::select(kf.lt(R::lit(cx, 1.0)), small, big);
    R::select(x.is_nan(), x + x, r)
}

/// `cosh x`: the Taylor polynomial for `|x| < ln2 / 2` (`k = 0`), else
/// `2^(k-1) ((1 + q) + 2^-2k / (1 + q))` from `e^|x| = 2^k (1 + q)` ([`exp_parts`]), all in
/// double length, rounded once and scaled.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn cosh<R: Real>(x: R) -> R {
    let cx = x.cx();
    let a = clamp(x.abs(), 0.0, 1000.0);
    let (yh, yl, dh, dl, kf, k) = exp_pm(a);
    let (t, te) = fast_two_sum(yh, dh);
    let big = scale(t + ((te + yl) + dl), k - R::Bits::lit(cx, 1));
    let z = a * a;
    let small = R::lit(cx, 1.0) + z * poly(z, &COSH_P);
    let r = R::select(kf.lt(R::lit(cx, 1.0)), small, big);
    R::select(x.is_nan(), x + x, r)
}

/// `tanh x = sign(x) (1 - E) / (1 + E)`, `E = e^-2|x| = 2^k (1 + q)` ([`exp_parts`]), with
/// both sides as exact double-length sums and a compensated division; `x` for `|x| < 2^-27`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn tanh<R: Real>(x: R) -> R {
    let cx = x.cx();
    let one = R::lit(cx, 1.0);
    let a = x.abs();
    let m = clamp(a + a, 0.0, 40.0); // e^-40 < 2^-57: tanh rounds to 1 beyond
    let (qh, ql, _, k) = exp_parts(-m);
    let (s1, e1) = fast_two_sum(one, qh);
    let p = pow2::<R>(k);
    let eh = s1 * p;
    let el = (e1 + ql) * p;
    let (nh, nl) = fast_two_sum(one, -eh);
    let (dh, dl) = fast_two_sum(one, eh);
    let (s0, corr) = div_dd(nh, nl - el, dh, dl + el);
    let t = s0 + corr;
    let r = copysign(t, x);
    let r = R::select(a.lt(R::lit(cx, TINY27)), x, r);
    R::select(x.is_nan(), x + x, r)
}

/// The logistic function `1 / (1 + e^-x)`: with `E = e^-|x| = 2^k (1 + q)` ([`exp_parts`]),
/// `1 / (1 + E)` for `x >= 0` and `E / (1 + E)` for `x < 0`, as a compensated division of
/// exact double-length parts.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn sigmoid<R: Real>(x: R) -> R {
    let cx = x.cx();
    let one = R::lit(cx, 1.0);
    let a = clamp(x.abs(), 0.0, 1000.0);
    let (qh, ql, kf, k) = exp_parts(-a);
    let (s1, e1) = fast_two_sum(one, qh);
    let neg = x.lt(R::lit(cx, 0.0));
    // x < 0: 2^k ((1 + q) / (1 + E)), scaled after the division (no early underflow).
    let p = R::select(kf.lt(R::lit(cx, -1000.0)), R::lit(cx, 0.0), pow2::<R>(k)); // E = 0 is exact enough there
    let (dh, dl) = fast_two_sum(one, s1 * p);
    let nh = R::select(neg, s1, one);
    let nl = R::select(neg, e1 + ql, R::lit(cx, 0.0));
    let (s0, corr) = div_dd(nh, nl, dh, dl + (e1 + ql) * p);
    let r = scale_dd(s0, corr, R::Bits::select(neg, k, R::Bits::lit(cx, 0)));
    R::select(x.is_nan(), x + x, r)
}
