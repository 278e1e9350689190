//! Inverse trigonometric functions: `asin`, `acos`, `atan`, `atan2`.
//!
//! The polynomials and reductions are those of fdlibm (Sun Microsystems, 1993; also in musl):
//! `e_asin.c`/`e_acos.c` use the rational approximation `asin(x) = x + x^3 R(x^2)` on
//! `[0, 0.5]` and `asin(x) = pi/2 - 2 asin(sqrt((1-x)/2))` above; `s_atan.c` reduces to
//! `|r| <= 7/16` around the breakpoints `atan(1/2), atan(1), atan(c), pi/2` and uses a
//! degree-21 odd polynomial. Here the `atan` core works on the pair `(y, x)` directly, so that
//! `atan2` reduces `y/x` without first rounding the quotient, and it recovers the quotient's
//! rounding error (Dekker), which keeps `atan2` under 1 ulp. Branch-free on [`Real`]: every
//! path is computed and the result is chosen with selects.

use super::lanes::*;

const PIO2_HI: f64 = 1.5707963267948966e0;
const PIO2_LO: f64 = 6.123233995736766e-17;
const PI_HI: f64 = 3.141592653589793e0;
const PI_LO: f64 = 1.2246467991473532e-16;

// asin/acos rational approximation R(t) = P(t)/Q(t) (fdlibm pS0..pS5, qS1..qS4).
const PS: [f64; 6] = [
    1.66666666666666657415e-01,
    -3.25565818622400915405e-01,
    2.01212532134862925881e-01,
    -4.00555345006794114027e-02,
    7.91534994289814532176e-04,
    3.47933107596021167570e-05,
];
const QS: [f64; 5] = [
    1.0,
    -2.40339491173441421878e+00,
    2.02094576023350569471e+00,
    -6.88283971605453293030e-01,
    7.70381505559019352791e-02,
];

/// `t P(t) / Q(t)`, the part of `asin(sqrt t)/sqrt t - 1` fdlibm approximates.
#[cfg_attr(not(debug_assertions), inline(always))]
fn asin_r<R: Real>(t: R) -> R {
    let p = t * poly(t, &PS);
    let q = poly(t, &QS);
    p / q
}

/// `asin(x)`: fdlibm `e_asin.c` method (rational `x + x^3 R(x^2)` for `|x| < 0.5`,
/// `pi/2 - 2 asin(sqrt((1-|x|)/2))` with a split square root above), branch-free.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn asin<R: Real>(x: R) -> R {
    let cx = x.cx();
    let one = R::lit(cx, 1.0);
    let two = R::lit(cx, 2.0);
    let sx = sign_bits(x);
    let a = x.abs();
    let small = a.lt(R::lit(cx, 0.5));
    // |x| < 0.5: t = x^2; otherwise t = (1 - |x|) / 2 (exact).
    let t = R::select(small, a * a, (one - a) * R::lit(cx, 0.5));
    let w = asin_r(t);
    let r_small = a + a * w;
    let s = t.sqrt();
    // 0.975 <= |x| <= 1: pi/2 - 2 (s + s w).
    let r_hi = R::lit(cx, PIO2_HI) - (two * (s + s * w) - R::lit(cx, PIO2_LO));
    // 0.5 <= |x| < 0.975: s = sh + c (sh: 21 bits, c to ~2^-80), so that pio2_hi - 2 sh is
    // exact and the result rounds once more only: (pio2_hi - 2 sh) - (2 s w - (pio2_lo - 2c)).
    // The 1e-300 (absorbed unless s = 0) keeps c finite at |x| = 1.
    // (fdlibm writes pio4_hi - ((2 s w - (pio2_lo - 2c)) - (pio4_hi - 2 sh)): one rounding more.)
    let sh = high_half(s);
    let c = (t - sh * sh) / ((s + sh) + R::lit(cx, 1e-300));
    let p = two * s * w - (R::lit(cx, PIO2_LO) - two * c);
    let r_mid = (R::lit(cx, PIO2_HI) - two * sh) - p;
    let r = R::select(a.lt(R::lit(cx, 0.975)), r_mid, r_hi);
    let r = R::select(small, r_small, r);
    let r = xor_sign(r, sx);
    // |x| > 1 and NaN: NaN.
    R::select(a.le(one), r, R::lit(cx, f64::NAN))
}

/// `acos(x)`: fdlibm `e_acos.c` method (`pi/2 - (x + x^3 R(x^2))` for `|x| < 0.5`,
/// `2 asin(sqrt((1-x)/2))` and `pi - 2 asin(sqrt((1+x)/2))` beyond), branch-free.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn acos<R: Real>(x: R) -> R {
    let cx = x.cx();
    let one = R::lit(cx, 1.0);
    let two = R::lit(cx, 2.0);
    let a = x.abs();
    let small = a.lt(R::lit(cx, 0.5));
    let t = R::select(small, x * x, (one - a) * R::lit(cx, 0.5));
    let w = asin_r(t);
    // |x| < 0.5: pi/2 - (x - (pio2_lo - x w)).
    let r_small = R::lit(cx, PIO2_HI) - (x - (R::lit(cx, PIO2_LO) - x * w));
    let s = t.sqrt();
    // s = sh + c (sh: 21 bits, c to ~2^-80); the 1e-300 (absorbed unless s = 0) makes c = 0
    // at x = +-1 instead of 0/0.
    let sh = high_half(s);
    let c = (t - sh * sh) / ((s + sh) + R::lit(cx, 1e-300));
    // x <= -0.5: (pi_hi - 2 sh) - 2 ((s w + c) - pio2_lo), the first difference exact.
    // (fdlibm: pi - 2 (s + (s w - pio2_lo)), one rounding more.)
    let r_neg = (R::lit(cx, PI_HI) - two * sh) - two * ((s * w + c) - R::lit(cx, PIO2_LO));
    // x >= 0.5: 2 (sh + (s w + c)).
    let r_pos = two * (sh + (s * w + c));
    let r = R::select(x.lt(R::lit(cx, 0.0)), r_neg, r_pos);
    let r = R::select(small, r_small, r);
    R::select(a.le(one), r, R::lit(cx, f64::NAN))
}

// atan polynomial (fdlibm aT[0..10]).
const AT_EVEN: [f64; 6] = [
    3.33333333333329318027e-01,
    1.42857142725034663711e-01,
    9.09088713343650656196e-02,
    6.66107313738753120669e-02,
    4.97687799461593236017e-02,
    1.62858201153657823623e-02,
];
const AT_ODD: [f64; 5] = [
    -1.99999999998764832476e-01,
    -1.11111104054623557880e-01,
    -7.69187620504482999495e-02,
    -5.83357013379057348645e-02,
    -3.65315727442169155270e-02,
];

// Breakpoint angles hi + lo: atan(1/2), pi/4, atan(2), pi/2, and pi minus each (for x < 0).
const ATAN_HALF: (f64, f64) = (4.636476090008061e-1, 2.2698777452961687e-17);
const ATAN_ONE: (f64, f64) = (7.853981633974483e-1, 3.061616997868383e-17);
const ATAN_TWO: (f64, f64) = (1.1071487177940904e0, 9.40447137356638e-17);
const ATAN_INF: (f64, f64) = (PIO2_HI, PIO2_LO);
const PI_M_HALF: (f64, f64) = (2.677945044588987e0, 1.5527705369303147e-16);
const PI_M_ONE: (f64, f64) = (2.356194490192345e0, 9.184850993605148e-17);
const PI_M_TWO: (f64, f64) = (2.0344439357957027e0, 2.841996617907152e-17);

/// `(hi, lo)` of `a` and `b` by `m`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn sel2<R: Real>(m: R::Mask, a: (f64, f64), b: (R, R)) -> (R, R) {
    let cx = m.cx();
    (
        R::select(m, R::lit(cx, a.0), b.0),
        R::select(m, R::lit(cx, a.1), b.1),
    )
}

/// The angle of `(x, y)` for `y >= 0` (`ax = |x|`, `neg` the sign of `x`), in `[0, pi]`:
/// fdlibm's `atan` reduction written on the pair, plus the quotient's rounding error.
/// `PAIR = false` is `atan(ay)` (`ax = 1`, `neg` false): the special pairs, the scaling, the
/// `x < 0` constants and the normalization before the quotient correction are left out (a
/// compile-time choice).
#[cfg_attr(not(debug_assertions), inline(always))]
fn atan_core<R: Real, const PAIR: bool>(ay: R, ax: R, neg: R::Mask) -> R {
    let cx = ay.cx();
    let one = R::lit(cx, 1.0);
    let zero = R::lit(cx, 0.0);
    // (0, 0) and (inf, inf) become (0, 1) and (1, 1): the angles 0 / pi and pi/4 / 3pi/4.
    let (ay, ax) = if PAIR {
        let both_inf = is_inf(ay) & is_inf(ax);
        let ay = R::select(both_inf, one, ay);
        (
            ay,
            R::select(both_inf | (ay.eq(zero) & ax.eq(zero)), one, ax),
        )
    } else {
        (ay, ax)
    };
    // Keep 2|x| + |y| finite: both / 16 when the larger is >= 2^1000 (exact unless the
    // smaller is subnormal, where the ratio is beyond 2^2000 and the result exact anyway).
    // (For `atan`, x = 1: nothing to scale, and the quotient correction below is skipped.)
    let (ay, ax) = if PAIR {
        let big = ay.ge(R::lit(cx, 1e301)) | ax.ge(R::lit(cx, 1e301));
        let f = R::select(big, R::lit(cx, 0.0625), one);
        (ay * f, ax * f)
    } else {
        (ay, ax)
    };
    let t = ay / ax;
    // Regions of t = y/x: r = (y - c x) / (x + c y) for c = 0, 1/2, 1, 2, inf.
    // Numerator n1 - n2 is exact (Sterbenz); the denominator d1 + d2 is kept as a TwoSum.
    let m0 = t.lt(R::lit(cx, 0.4375));
    let m1 = t.lt(R::lit(cx, 0.6875));
    let m2 = t.lt(R::lit(cx, 1.1875));
    let m3 = t.lt(R::lit(cx, 2.4375));
    let ay2 = ay + ay;
    let ax2 = ax + ax;
    // id3 (t >= 39/16): r = -x / y.
    let n1 = R::select(m3, ay, zero);
    let n2 = R::select(m3, ax2, ax);
    let d1 = R::select(m3, ay2, ay);
    let d2 = R::select(m3, ax, zero);
    let (hi, lo) = sel2(
        m3,
        ATAN_TWO,
        (R::lit(cx, ATAN_INF.0), R::lit(cx, ATAN_INF.1)),
    );
    let (hn, ln) = if PAIR {
        sel2(
            m3,
            PI_M_TWO,
            (R::lit(cx, ATAN_INF.0), R::lit(cx, ATAN_INF.1)),
        )
    } else {
        (hi, lo)
    };
    // id1 (t < 19/16): (y - x) / (x + y).
    let n1 = R::select(m2, ay, n1);
    let n2 = R::select(m2, ax, n2);
    let d1 = R::select(m2, ax, d1);
    let d2 = R::select(m2, ay, d2);
    let (hi, lo) = sel2(m2, ATAN_ONE, (hi, lo));
    let (hn, ln) = if PAIR {
        sel2(m2, PI_M_ONE, (hn, ln))
    } else {
        (hi, lo)
    };
    // id0 (t < 11/16): (2y - x) / (2x + y).
    let n1 = R::select(m1, ay2, n1);
    let d1 = R::select(m1, ax2, d1);
    let (hi, lo) = sel2(m1, ATAN_HALF, (hi, lo));
    let (hn, ln) = if PAIR {
        sel2(m1, PI_M_HALF, (hn, ln))
    } else {
        (hi, lo)
    };
    // t < 7/16: y / x.
    let n1 = R::select(m0, ay, n1);
    let n2 = R::select(m0, zero, n2);
    let d1 = R::select(m0, ax, d1);
    let d2 = R::select(m0, zero, d2);
    let (hi, lo) = sel2(m0, (0.0, 0.0), (hi, lo));
    let (hn, ln) = sel2(m0, (PI_HI, PI_LO), (hn, ln));
    let num = n1 - n2;
    let (den, dlo) = two_sum(d1, d2);
    let r = num / den;
    let rl = if PAIR {
        quotient_error(num, den, dlo, r)
    } else {
        // atan: den is in [1, 4.5) below t = 39/16 and den = |x| above; past 1e150 the
        // correction does not matter (|r| < 1e-150 against pi/2) and the split could overflow.
        R::select(t.lt(R::lit(cx, 1e150)), dekker_rl(num, den, dlo, r), zero)
    };
    // For x < 0 the angle is pi - that: (pi - atan c) + atan(-r).
    let (h, l, r, rl) = if PAIR {
        (
            R::select(neg, hn, hi),
            R::select(neg, ln, lo),
            R::select(neg, -r, r),
            R::select(neg, -rl, rl),
        )
    } else {
        (hi, lo, r, rl)
    };
    let z = r * r;
    let w = z * z;
    let s1 = z * poly(w, &AT_EVEN);
    let s2 = w * poly(w, &AT_ODD);
    // atan(r + rl) = r - r (s1 + s2) + rl / (1 + r^2).
    let l = l + (rl - rl * z);
    h - ((r * (s1 + s2) - l) - r)
}

/// `rl` with `num / (den + dlo) = r + rl` to about 2^-100 relative, for the rounded quotient
/// `r = num / den` (`0` where `|r| < 2^-897`, where it does not matter).
#[cfg_attr(not(debug_assertions), inline(always))]
fn quotient_error<R: Real>(num: R, den: R, dlo: R, r: R) -> R {
    let cx = num.cx();
    let one = R::lit(cx, 1.0);
    // Normalize den to [1, 2) (both by a power of two; first by 2^600 if tiny) so that the
    // Dekker remainder can neither underflow nor overflow.
    let pre = R::select(
        den.lt(R::lit(cx, 1e-270)),
        R::lit(cx, 4.149515568880993e180),
        one,
    );
    let dp = den * pre;
    let e = dp.to_bits() & R::Bits::lit(cx, 0x7ff0_0000_0000_0000);
    let g = R::from_bits(R::Bits::lit(cx, 2046 << 52) - e);
    let dn = dp * g;
    let nn = num * pre * g;
    let dl = dlo * pre * g;
    let rl = dekker_rl(nn, dn, dl, r);
    R::select(r.abs().ge(R::lit(cx, 1e-270)), rl, R::lit(cx, 0.0))
}

/// `(num - r den - r dlo) / den`, the exact remainder of `r = num / den` by Dekker's product
/// (valid while `r`, `den` and the partial products neither underflow nor overflow).
#[cfg_attr(not(debug_assertions), inline(always))]
fn dekker_rl<R: Real>(num: R, den: R, dlo: R, r: R) -> R {
    let (rh, rt) = split(r);
    let (dh, dt) = split(den);
    let rem = (((num - rh * dh) - rh * dt) - rt * dh) - rt * dt;
    (rem - r * dlo) / den
}

/// `atan(x)`: fdlibm `s_atan.c` method (reduction to `|r| <= 7/16` about `atan(1/2)`,
/// `pi/4`, `atan(2)`, `pi/2`, degree-21 odd polynomial), branch-free.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn atan<R: Real>(x: R) -> R {
    let cx = x.cx();
    let sx = sign_bits(x);
    let r = atan_core::<R, false>(
        x.abs(),
        R::lit(cx, 1.0),
        R::lit(cx, 1.0).lt(R::lit(cx, 0.0)),
    );
    xor_sign(r, sx)
}

/// `atan2(y, x)`: fdlibm `e_atan2.c` special cases, with `s_atan.c`'s reduction applied to
/// the pair `(|y|, |x|)` (quotient error recovered, `pi - angle` folded into the breakpoint
/// constants for `x < 0`), branch-free.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn atan2<R: Real>(y: R, x: R) -> R {
    let cx = y.cx();
    let sy = sign_bits(y);
    let neg = R::Bits::lit(cx, 0).ult(sign_bits(x));
    let r = atan_core::<R, true>(y.abs(), x.abs(), neg);
    let r = xor_sign(r, sy);
    R::select(x.is_nan() | y.is_nan(), x + y, r)
}
