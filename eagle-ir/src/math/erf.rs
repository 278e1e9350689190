//! The error function.
//!
//! Method and coefficients of fdlibm `s_erf.c` (Sun Microsystems, 1993; also in musl):
//! `x + x P(x^2)/Q(x^2)` on `[0, 0.84375)`, `erx + P(s)/Q(s)` with `s = |x| - 1` on
//! `[0.84375, 1.25)`, `1 - exp(-x^2 - 0.5625 + R(1/x^2)/S(1/x^2)) / x` on `[1.25, 6)` (two
//! coefficient sets split at `1/0.35`), and `1` beyond. Branch-free on [`Real`].
//! (fdlibm evaluates `exp(-z^2 - 0.5625) exp((z - x)(z + x) + R/S)`; one `exp` of the sum is
//! used here: erfc is below 0.08 on that range, so the extra rounding costs < 0.05 ulp of erf.)

use super::explog::exp;
use super::lanes::*;

const ERX: f64 = 8.45062911510467529297e-01;
const PP: [f64; 5] = [
    1.28379167095512558561e-01,
    -3.25042107247001499370e-01,
    -2.84817495755985104766e-02,
    -5.77027029648944159157e-03,
    -2.37630166566501626084e-05,
];
const QQ: [f64; 6] = [
    1.0,
    3.97917223959155352819e-01,
    6.50222499887672944485e-02,
    5.08130628187576562776e-03,
    1.32494738004321644526e-04,
    -3.96022827877536812320e-06,
];
const PA: [f64; 7] = [
    -2.36211856075265944077e-03,
    4.14856118683748331666e-01,
    -3.72207876035701323847e-01,
    3.18346619901161753674e-01,
    -1.10894694282396677476e-01,
    3.54783043256182359371e-02,
    -2.16637559486879084300e-03,
];
const QA: [f64; 7] = [
    1.0,
    1.06420880400844228286e-01,
    5.40397917702171048937e-01,
    7.18286544141962662868e-02,
    1.26171219808761642112e-01,
    1.36370839120290507362e-02,
    1.19844998467991074170e-02,
];
const RA: [f64; 8] = [
    -9.86494403484714822705e-03,
    -6.93858572707181764372e-01,
    -1.05586262253232909814e+01,
    -6.23753324503260060396e+01,
    -1.62396669462573470355e+02,
    -1.84605092906711035994e+02,
    -8.12874355063065934246e+01,
    -9.81432934416914548592e+00,
];
const SA: [f64; 9] = [
    1.0,
    1.96512716674392571292e+01,
    1.37657754143519042600e+02,
    4.34565877475229228821e+02,
    6.45387271733267880336e+02,
    4.29008140027567833386e+02,
    1.08635005541779435134e+02,
    6.57024977031928170135e+00,
    -6.04244152148580987438e-02,
];
const RB: [f64; 8] = [
    -9.86494292470009928597e-03,
    -7.99283237680523006574e-01,
    -1.77579549177547519889e+01,
    -1.60636384855821916062e+02,
    -6.37566443368389627722e+02,
    -1.02509513161107724954e+03,
    -4.83519191608651397019e+02,
    0.0,
];
const SB: [f64; 9] = [
    1.0,
    3.03380607434824582924e+01,
    3.25792512996573918826e+02,
    1.53672958608443695994e+03,
    3.19985821950859553908e+03,
    2.55305040643316442583e+03,
    4.74528541206955367215e+02,
    -2.24409524465858183362e+01,
    0.0,
];

/// Horner's scheme on coefficients chosen lane by lane: `m ? a : b`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn poly_sel<R: Real>(x: R, m: R::Mask, a: &[f64], b: &[f64]) -> R {
    let cx = x.cx();
    let n = a.len();
    let c = |i: usize| R::select(m, R::lit(cx, a[i]), R::lit(cx, b[i]));
    let mut acc = c(n - 1);
    for i in (0..n - 1).rev() {
        acc = c(i) + x * acc;
    }
    acc
}

/// `erf(x)`: fdlibm `s_erf.c` method (rational approximations on `[0, 0.84375)`,
/// `[0.84375, 1.25)`, `[1.25, 1/0.35)`, `[1/0.35, 6)`; `1` beyond), branch-free.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn erf<R: Real>(x: R) -> R {
    let cx = x.cx();
    let one = R::lit(cx, 1.0);
    let sx = sign_bits(x);
    let a = x.abs();
    // [0, 0.84375): x + x y. Tiny x is scaled by 2^64 so that the result rounds once.
    let tiny = a.lt(R::lit(cx, 1e-270));
    let up = R::select(tiny, R::lit(cx, 18446744073709551616.0), one);
    let dn = R::select(tiny, R::lit(cx, 5.421010862427522e-20), one);
    let z = a * a;
    let y = poly(z, &PP) / poly(z, &QQ);
    let as_ = a * up;
    let r1 = (as_ + as_ * y) * dn;
    // [0.84375, 1.25): erx + P(s)/Q(s).
    let s = a - one;
    let r2 = R::lit(cx, ERX) + poly(s, &PA) / poly(s, &QA);
    // [1.25, 6): 1 - exp(-x^2 - 0.5625 + R/S) / x, with x^2 split as zh^2 + (x-zh)(x+zh).
    let ac = R::select(a.lt(R::lit(cx, 6.0)), a, R::lit(cx, 6.0));
    let ac = R::select(ac.lt(R::lit(cx, 1.25)), R::lit(cx, 1.25), ac);
    let s = one / (ac * ac);
    let ma = ac.lt(R::lit(cx, 2.857142857142857));
    let rr = poly_sel(s, ma, &RA, &RB);
    let ss = poly_sel(s, ma, &SA, &SB);
    let zh = high_half(ac);
    let e = (-(zh * zh) - R::lit(cx, 0.5625)) + ((zh - ac) * (zh + ac) + rr / ss);
    let r3 = one - exp(e) / ac;
    let r = R::select(a.lt(R::lit(cx, 6.0)), r3, one);
    let r = R::select(a.lt(R::lit(cx, 1.25)), r2, r);
    let r = R::select(a.lt(R::lit(cx, 0.84375)), r1, r);
    // NaN passes through r1 (every comparison is false, so r = 1): restore it.
    let r = R::select(x.is_nan(), x + x, r);
    xor_sign(r, sx)
}
