//! `pow`, `cbrt` and `hypot`.
//!
//! Branch-free on [`Real`]: exact products come from [`two_prod`] (`fma` gives a product's
//! exact error), sums from Knuth's / Dekker's two-sum. `pow` follows
//! the plan of fdlibm's `e_pow.c` (an extended-precision logarithm, multiplied by `y` in
//! double-double, then an exponential of a hi/lo argument) with its own reductions and
//! polynomials; `cbrt` is fdlibm's (FreeBSD) `s_cbrt.c`; `hypot` scales like `e_hypot.c` but
//! takes the square root of an exact double-double `x^2 + y^2` with one Newton correction.

#[allow(unused_imports)]
use super::explog::*;
use super::lanes::*;

// ---- ln in double-double ----

const LN2_HI: f64 = 6.931_471_803_691_238_164_90e-01; // 32 significant bits
const LN2_LO: f64 = 1.908_214_929_270_587_700_02e-10;
const INV_LN2: f64 = 1.442_695_040_888_963_387_00e+00;

/// Centres `c = 2^(j/5)`, `j = -2..=2`, of the subintervals of `[sqrt(2)/2, sqrt(2))`.
const LC: [f64; 5] = [
    0.757858283255199,
    0.8705505632961241,
    1.0,
    1.148698354997035,
    1.3195079107728942,
];
/// `ln c` rounded to a multiple of `2^-32` (so `k ln2_hi + hi` is exact) ...
const LCH: [f64; 5] = [
    -0.2772588722873479,
    -0.13862943602725863,
    0.0,
    0.13862943602725863,
    0.2772588722873479,
];
/// ... and the rest.
const LCL: [f64; 5] = [
    6.336972744878318e-11,
    -8.47304439102215e-11,
    0.0,
    8.473050686783955e-11,
    -6.336983464796836e-11,
];
/// Boundaries `2^(-0.3), 2^(-0.1), 2^0.1, 2^0.3` between the subintervals.
const LB: [f64; 4] = [
    0.8122523963562355,
    0.9330329915368074,
    1.0717734625362931,
    1.2311444133449163,
];
/// `2/5, 2/7, ..., 2/13`: `2 atanh(s) = s (2 + 2s^2/3 + s^4 P(s^2))`.
const AT: [f64; 5] = [2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0, 2.0 / 11.0, 2.0 / 13.0];

/// `ln x` as a double-double `hi + lo` (relative error about 2^-70) for finite `x > 0`:
/// `x = 2^k m`, `m` in `[sqrt(2)/2, sqrt(2))`, `m = c (1+s)/(1-s)` with `c` one of five
/// constants chosen by selects (`|s| < 0.035`), `ln x = k ln2 + ln c + 2 atanh(s)`, the
/// leading terms `2s + 2s^3/3` carried in double-double (exact products and sums).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn ln_dd<R: Real>(x: R) -> (R, R) {
    let cx = x.cx();
    // x = 2^k m, as in explog::ln_parts.
    let sub = x.lt(R::lit(cx, f64::MIN_POSITIVE));
    let xs = R::select(sub, x * R::lit(cx, 18014398509481984.0), x);
    let ix = xs.to_bits() + R::Bits::lit(cx, (0x3ff0_0000u64 - 0x3fe6_a09e) << 32);
    let k = from_small::<R>(ix >> 52) - R::select(sub, R::lit(cx, 1077.0), R::lit(cx, 1023.0));
    let hw = ((ix >> 32) & R::Bits::lit(cx, 0x000f_ffff)) + R::Bits::lit(cx, 0x3fe6_a09e);
    let m = R::from_bits((hw << 32) | (ix & R::Bits::lit(cx, 0xffff_ffff)));
    // The nearest centre c and ln c.
    let mut c = R::lit(cx, LC[0]);
    let mut lch = R::lit(cx, LCH[0]);
    let mut lcl = R::lit(cx, LCL[0]);
    for j in 0..4 {
        let g = m.ge(R::lit(cx, LB[j]));
        c = R::select(g, R::lit(cx, LC[j + 1]), c);
        lch = R::select(g, R::lit(cx, LCH[j + 1]), lch);
        lcl = R::select(g, R::lit(cx, LCL[j + 1]), lcl);
    }
    // s = f / (2c + f), f = m - c (exact, Sterbenz), as sh + sl.
    let f = m - c;
    let c2 = c + c;
    let dh = c2 + f;
    let dl = f - (dh - c2);
    let sh = f / dh;
    let (p, e) = two_prod(sh, dh);
    let sl = (((f - p) - e) - sh * dl) / dh;
    // sh^2 = a + b exactly.
    let (a, b) = two_prod(sh, sh);
    // (2/3) a = 2q + (2/3) rem exactly, with q = a/3 and rem = a - 3q (Sterbenz twice).
    let q = a / R::lit(cx, 3.0);
    let q2 = q + q;
    let rem = (a - q2) - q;
    // t = 2 + (2/3) s^2 + s^4 P(s^2) = th + tl.
    let th = R::lit(cx, 2.0) + q2;
    let e1 = q2 - (th - R::lit(cx, 2.0));
    let rp = (a * a) * poly(a, &AT);
    let tl = e1 + ((rem + (b + R::lit(cx, 2.0) * sh * sl)) * R::lit(cx, 2.0 / 3.0) + rp);
    // 2 atanh(s) = s t = lp + lml.
    let (lp, le) = two_prod(sh, th);
    let lml = le + (sh * tl + sl * th);
    // k ln2 + ln c + s t; k ln2_hi + lch is exact and no smaller than |lp| unless zero.
    let k1 = k * R::lit(cx, LN2_HI) + lch;
    let (h, e2) = fast_two_sum(k1, lp);
    let lo = e2 + (lml + (k * R::lit(cx, LN2_LO) + lcl));
    fast_two_sum(h, lo)
}

// ---- exp of a double-double ----

/// `(e^r - 1 - r - r^2/2) / r^3` on `|r| <= 0.3467`: Chebyshev fit (mpmath), abs error of
/// `r^3 Q` below 2^-61 with the coefficients rounded.
const EQ: [f64; 11] = [
    0.16666666666666666,
    0.04166666666666667,
    0.008333333333333333,
    0.0013888888888883737,
    0.00019841269841266407,
    2.480158732558584e-05,
    2.755731923998249e-06,
    2.7557273594799413e-07,
    2.505207797012878e-08,
    2.0914707069612355e-09,
    1.6084341282207346e-10,
];

/// `e^(zh + zl)` for `|zl| <~ 2^-40 |zh|`, rounded once (also into the subnormal range):
/// `z = k ln2 + r`, `e^r = 1 + r + r^2/2 + r^3 Q(r)` summed in double-double, times
/// `(1 + rl)` for the low part; subnormal results are rounded in `1 + y` (as in ARM's
/// optimized-routines `exp`) so that they round only once.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn exp_dd<R: Real>(zh: R, zl: R) -> R {
    let cx = zh.cx();
    // Beyond +-1000 the result is inf or 0 already.
    let zc = R::select(zh.gt(R::lit(cx, 1000.0)), R::lit(cx, 1000.0), zh);
    let zc = R::select(zc.lt(R::lit(cx, -1000.0)), R::lit(cx, -1000.0), zc);
    let zl = R::select(zc.eq(zh), zl, R::lit(cx, 0.0));
    let (kf, k) = round_int(zc * R::lit(cx, INV_LN2));
    let t = zc - kf * R::lit(cx, LN2_HI); // exact
    let u = kf * R::lit(cx, LN2_LO);
    let (r, re) = two_sum(t, -u);
    let rl = re + zl;
    // r^2 = a2 + b2 exactly.
    let (a2, b2) = two_prod(r, r);
    // 1 + r + a2/2 in double-double.
    let h1 = R::lit(cx, 1.0) + r;
    let l1 = r - (h1 - R::lit(cx, 1.0));
    let half = a2 * R::lit(cx, 0.5);
    let h2 = h1 + half;
    let l2 = half - (h2 - h1);
    let p3 = (r * a2) * poly(r, &EQ);
    let tail = ((l1 + l2) + (b2 * R::lit(cx, 0.5) + p3)) + (h2 + p3) * rl;
    // Normal results: round h2 + tail, then scale (exact, or overflow).
    let main = scale(h2 + tail, k);
    // Subnormal results: y = e^z 2^1022 < 1; round 1 + y at 2^-52, subtract 1, scale.
    let low = kf.lt(R::lit(cx, -1021.0));
    let ks = R::Bits::select(low, k + R::Bits::lit(cx, 1022), R::Bits::lit(cx, 0));
    let sc = pow2::<R>(ks);
    let yh = h2 * sc;
    let yt = tail * sc;
    let hi = R::lit(cx, 1.0) + yh;
    let lo = ((R::lit(cx, 1.0) - hi) + yh) + yt;
    let subn = ((hi + lo) - R::lit(cx, 1.0)) * R::lit(cx, f64::MIN_POSITIVE);
    R::select(low & yh.lt(R::lit(cx, 1.0)), subn, main)
}

// ---- pow ----

/// Whether `v >= 0` is an integer (inf counts; NaN does not): `v + 2^52 - 2^52 == v`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn is_int<R: Real>(v: R) -> R::Mask {
    let cx = v.cx();
    let t = R::lit(cx, 4503599627370496.0);
    v.ge(t) | ((v + t) - t).eq(v)
}

/// The bound `pow` and the `f32` `powf` clamp `y` to: `|y| > 2^64` gives `|y ln x| > 2048`
/// for any `x != 1` (the same 0 or inf as `2^64`), and `|y| = inf` at `|x| = 1` gives
/// `2^64 * 0 = 0`, not NaN.
pub const Y_LIM: f64 = 18446744073709551616.0;

/// `x^y` (C99 / IEEE `pow`): `e^(y ln|x|)` with `ln|x|` in double-double ([`ln_dd`]), the
/// product by `y` exact ([`two_prod`]), and [`exp_dd`]; the plan of fdlibm `e_pow.c` (own code).
/// Odd/even integer `y` by rounding `|y|` and `|y|/2` at `2^52`; specials by selects.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn pow<R: Real>(x: R, y: R) -> R {
    let ax = x.abs();
    let (lh, ll) = ln_dd(ax);
    let yc = clamp(y, -Y_LIM, Y_LIM);
    let (zh, ze) = two_prod(yc, lh);
    let zl = ze + yc * ll;
    pow_specials(x, y, exp_dd(zh, zl))
}

/// C99 `pow`'s special cases around `r`, the value of `|x|^y` for finite nonzero `x`: the
/// sign for negative `x` and odd integer `y`, zeros and infinities of `x`, NaN for negative
/// `x` with non-integer `y` and for NaN operands, 1 for `y = 0` and `x = 1`. Shared by
/// [`pow`] and the `f32` `powf` (`super::single::powf`), which differ only in `r`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn pow_specials<R: Real>(x: R, y: R, r: R) -> R {
    let cx = x.cx();
    let ax = x.abs();
    let ay = y.abs();
    let y_int = is_int(ay);
    let y_odd = y_int & !is_int(ay * R::lit(cx, 0.5));
    let x0 = ax.eq(R::lit(cx, 0.0));
    let xinf = is_inf(x);
    let huge = (x0 & y.lt(R::lit(cx, 0.0))) | (xinf & y.gt(R::lit(cx, 0.0)));
    let zi = R::select(huge, R::lit(cx, f64::INFINITY), R::lit(cx, 0.0));
    let r = R::select(x0 | xinf, zi, r);
    let r = xor_sign(r, R::Bits::select(y_odd, sign_bits(x), R::Bits::lit(cx, 0)));
    // NaN: x < 0 finite with y not an integer, or either NaN (ax + ay is NaN only then).
    let bad = (x.lt(R::lit(cx, 0.0)) & !xinf & !y_int) | (ax + ay).is_nan();
    let r = R::select(bad, R::lit(cx, f64::NAN), r);
    R::select(
        y.eq(R::lit(cx, 0.0)) | x.eq(R::lit(cx, 1.0)),
        R::lit(cx, 1.0),
        r,
    )
}

// ---- cbrt ----

const TWO_900: f64 = f64::from_bits((1023 + 900) << 52);
const TWO_M900: f64 = f64::from_bits((1023 - 900) << 52);
const TWO_200: f64 = f64::from_bits((1023 + 200) << 52);
const TWO_M200: f64 = f64::from_bits((1023 - 200) << 52);

const CB1: f64 = 715094163.0; // (1023 - 1023/3 - 0.03306235651) * 2^20
const CP: [f64; 5] = [
    1.87595182427177009643,
    -1.88497979543377169875,
    1.621429720105354466140,
    -0.758397934778766047437,
    0.145996192886612446982,
];

/// `cbrt x`: fdlibm (FreeBSD) `s_cbrt.c`'s start (high word / 3 for 5 bits, a polynomial in
/// `t^3/x` to 23 bits, rounded to 22 bits), then one Halley step `t + t (x - t^3)/(2t^3 + x)`
/// on the exact residual (`t^2` exact, `t^3` by [`two_prod`]); tiny and huge `x` scaled by `2^(+-600)`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn cbrt<R: Real>(x: R) -> R {
    let cx = x.cx();
    let ax = x.abs();
    // Work on x 2^(-+600) beyond 2^(+-900), so that t^3 and its exact tail stay normal.
    let up = ax.lt(R::lit(cx, TWO_M900));
    let dn = ax.gt(R::lit(cx, TWO_900));
    let x = x * R::select(
        up,
        R::lit(cx, TWO_600),
        R::select(dn, R::lit(cx, TWO_M600), R::lit(cx, 1.0)),
    );
    // floor(hx / 3) + B1 as an integer (hx < 2^31: the fraction is 0, 1/3 or 2/3).
    let hx = from_small::<R>((x.to_bits() >> 32) & R::Bits::lit(cx, 0x7fff_ffff));
    let (_, tb) = round_int(hx * R::lit(cx, 1.0 / 3.0) + R::lit(cx, CB1 - 1.0 / 3.0));
    let t = R::from_bits((tb << 32) | sign_bits(x));
    // 23 bits.
    let r = (t * t) * (t / x);
    let t = t
        * ((R::lit(cx, CP[0]) + r * (R::lit(cx, CP[1]) + r * R::lit(cx, CP[2])))
            + ((r * r) * r) * (R::lit(cx, CP[3]) + r * R::lit(cx, CP[4])));
    // Round to 22 bits: t^2 is exact and t^3 = p + e exactly (`two_prod`).
    let t = R::from_bits(
        (t.to_bits() + R::Bits::lit(cx, 0x8000_0000)) & R::Bits::lit(cx, 0xffff_ffff_c000_0000),
    );
    let t2 = t * t;
    let (p, e) = two_prod(t2, t);
    // Halley (cubic): the step's own error is ~2^-66, so the sum rounds once.
    let d = (x - p) - e;
    let t = t + t * (d / ((p + p) + x));
    let t = t * R::select(
        up,
        R::lit(cx, TWO_M200),
        R::select(dn, R::lit(cx, TWO_200), R::lit(cx, 1.0)),
    );
    R::select(
        ax.eq(R::lit(cx, 0.0)) | !ax.lt(R::lit(cx, f64::INFINITY)),
        x + x,
        t,
    )
}

// ---- hypot ----

const TWO_500: f64 = f64::from_bits((1023 + 500) << 52);
const TWO_M500: f64 = f64::from_bits((1023 - 500) << 52);
const TWO_600: f64 = f64::from_bits((1023 + 600) << 52);
const TWO_M600: f64 = f64::from_bits((1023 - 600) << 52);
const TWO_M422: f64 = f64::from_bits((1023 - 422) << 52);

/// `hypot(x, y) = sqrt(x^2 + y^2)`: scale by `2^-+600` when the larger is beyond
/// `2^+-500` (as fdlibm `e_hypot.c` does), `x^2 + y^2` exactly in double-double ([`two_prod`]),
/// `sqrt` of the high part and one Newton correction from the exact residual.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn hypot<R: Real>(x: R, y: R) -> R {
    let cx = x.cx();
    let ax = x.abs();
    let ay = y.abs();
    let sw = ax.lt(ay);
    let a = R::select(sw, ay, ax);
    let b = R::select(sw, ax, ay);
    let up = a.lt(R::lit(cx, TWO_M500)); // 2^-500
    let dn = a.gt(R::lit(cx, TWO_500)); // 2^500
    let sc = R::select(
        up,
        R::lit(cx, TWO_600),
        R::select(dn, R::lit(cx, TWO_M600), R::lit(cx, 1.0)),
    );
    let inv = R::select(
        up,
        R::lit(cx, TWO_M600),
        R::select(dn, R::lit(cx, TWO_600), R::lit(cx, 1.0)),
    );
    let a = a * sc;
    let b = b * sc;
    let (pa, ea) = two_prod(a, a);
    let (pb, eb) = two_prod(b, b);
    let (sh, e) = fast_two_sum(pa, pb);
    let sl = e + (ea + eb);
    let r0 = sh.sqrt();
    let (p, pe) = two_prod(r0, r0);
    let num = ((sh - p) - pe) + sl;
    let corr = num / (r0 + r0);
    let r = (r0 + corr) * inv;
    // Subnormal results (only when scaled up): round r0 + corr once at the subnormal grid,
    // 2^-474 here, by adding 2^-422 (whose ulp that is) and subtracting it again.
    let cs = R::lit(cx, TWO_M422);
    let hi = cs + r0;
    let lo = (cs - hi) + r0;
    let rs = ((hi + (lo + corr)) - cs) * inv;
    let r = R::select(up & r0.lt(cs), rs, r);
    let r = R::select(a.eq(R::lit(cx, 0.0)), R::lit(cx, 0.0), r);
    let r = R::select(x.is_nan() | y.is_nan(), R::lit(cx, f64::NAN), r);
    R::select(is_inf(x) | is_inf(y), R::lit(cx, f64::INFINITY), r)
}
