//! Rounding to integers, `recip` and `rsqrt`: exact or one IEEE rounding from the primitives.

use super::lanes::*;

const TWO52: f64 = 4503599627370496.0;

/// `x.trunc()`: `|x| + 2^52 - 2^52` rounds `|x| < 2^52` to the nearest integer exactly; one
/// step back where that rounded up, then `x`'s sign. Larger values, infinities and NaN are
/// already integers (or NaN) and pass through.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn trunc<R: Real>(x: R) -> R {
    let cx = x.cx();
    let a = x.abs();
    let r = (a + R::lit(cx, TWO52)) - R::lit(cx, TWO52);
    let t = R::select(r.gt(a), r - R::lit(cx, 1.0), r);
    R::select(a.lt(R::lit(cx, TWO52)), copysign(t, x), x)
}

/// `x.floor()`: `trunc(x)`, one less where that is above `x`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn floor<R: Real>(x: R) -> R {
    let cx = x.cx();
    let t = trunc(x);
    R::select(x.lt(t), t - R::lit(cx, 1.0), t)
}

/// `x.ceil()`: `trunc(x)`, one more where that is below `x` (keeping `-0` for `-1 < x <= -0`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn ceil<R: Real>(x: R) -> R {
    let cx = x.cx();
    let t = trunc(x);
    R::select(x.gt(t), t + R::lit(cx, 1.0), t)
}

/// `x.round()`: to the nearest integer, halfway cases away from zero, `x`'s sign kept.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn round<R: Real>(x: R) -> R {
    let cx = x.cx();
    let a = x.abs();
    let t = trunc(a);
    let r = R::select((a - t).ge(R::lit(cx, 0.5)), t + R::lit(cx, 1.0), t);
    R::select(a.lt(R::lit(cx, TWO52)), copysign(r, x), x)
}

/// `x.recip()`: `1 / x`, correctly rounded.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn recip<R: Real>(x: R) -> R {
    let cx = x.cx();
    R::lit(cx, 1.0) / x
}

/// `1 / x.sqrt()`: the quotient of the correctly rounded square root, then one Newton step
/// whose residual `1 - m y^2` is exact ([`two_prod`]), on the significand `m` in
/// `[0.5, 2)`; the exponent is halved exactly. `rsqrt(±0) = ±inf`, `rsqrt(inf) = 0`, NaN for
/// `x < 0`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn rsqrt<R: Real>(x: R) -> R {
    let cx = x.cx();
    let naive = R::lit(cx, 1.0) / x.sqrt();
    // Subnormals: scale by 2^108 first (the result then by 2^54).
    let sub = x.lt(R::lit(cx, f64::MIN_POSITIVE));
    let xs = R::select(sub, x * R::lit(cx, 324518553658426726783156020576256.0), x);
    let post = R::select(sub, R::lit(cx, 18014398509481984.0), R::lit(cx, 1.0));
    // x = m * 2^(2h - 1022) with h = biased exponent / 2 and m in [0.5, 2).
    let h = (xs.to_bits() >> 52) >> 1;
    let m = scale(xs, R::Bits::lit(cx, 1022) - (h + h));
    let y0 = R::lit(cx, 1.0) / m.sqrt();
    let (ah, al) = two_prod(y0, y0);
    let (bh, bl) = two_prod(m, ah);
    let r = ((R::lit(cx, 1.0) - bh) - bl) - m * al;
    let y = y0 + (R::lit(cx, 0.5) * y0) * r;
    let y = y * pow2::<R>(R::Bits::lit(cx, 511) - h) * post;
    let finite_pos = x.gt(R::lit(cx, 0.0)) & x.lt(R::lit(cx, f64::INFINITY));
    R::select(finite_pos, y, naive)
}
