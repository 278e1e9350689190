//! The `f32` definitions: `exp`, `ln`, `sin`, `cos`, `tanh` on `f32` lanes (twice the lanes
//! of the `f64` ones in a vector), each within 1 ulp of the exact value; and `powf`, in the
//! `f64` lanes but with a plain `log2`/`exp2` where the `f64` `powf` needs double-double.
//!
//! The reductions are the classic ones (fdlibm's `e_expf.c`, `e_logf.c`, `k_sinf.c`,
//! `k_cosf.c`; SLEEF's polynomial for `exp`), written so that no step loses more than a small
//! fraction of an ulp: the reduced argument is carried as an exact `hi + lo` pair where it
//! matters (Cody-Waite with parts short enough for exact products, error-free sums), the sum
//! the result is rounded in is the last operation. Where a reduction would need more than
//! `f32` holds (`sin`/`cos` of `|x| >= 256`), the lanes take the `f64` definition, narrowed
//! once ([`Float::if_any`]: a tile pays for it only when one of its lanes needs it).
//! Measured errors (`tools/ulp`, every `f32`) are in `docs/language.md`.

use super::explog::log_specials;
use super::lanes::*;

/// `ln 2` as `L2U + L2L`, `L2U` with 15 significant bits (so `k * L2U` is exact for
/// `|k| <= 255`).
const L2U: f64 = 0.693145751953125;
const L2L: f64 = 1.428606765330187e-6;

/// `1.5 * 2^23`: added to `|v| < 2^22`, it rounds `v` to an integer `q` (ties to even) whose
/// two's complement is the low bits of the sum's bits minus its own (`lanes::round_int`).
const SHIFT32: f64 = 12582912.0;

/// The bits of [`SHIFT32`].
const SHIFT32_BITS: u64 = 0x4b40_0000;

/// `x = q ln2 + r` for `|x| <= 150`: `r` with its rounding error `re` (a fast two-sum, exact
/// unless `|hi| < |q L2L|`, where `|r| < 2^-12` and the error is below `2^-37`), and the bits
/// of `x log2(e) + SHIFT32`, which are `q + SHIFT32_BITS` (wrapping): the exponent of `2^q`
/// is read off them without forming `q`'s bits (as [`round_int`] does, one operation fewer).
#[cfg_attr(not(debug_assertions), inline(always))]
fn exp_reduce<S: Single>(x: S) -> (S, S, S::Bits) {
    let cx = x.cx();
    let shift = S::lit(cx, SHIFT32);
    let t = x * S::lit(cx, std::f64::consts::LOG2_E) + shift;
    let q = t - shift;
    let hi = (-q).mul_add(S::lit(cx, L2U), x); // exact (so one `fma` is the same value)
    let (r, re) = fast_two_diff(hi, q * S::lit(cx, L2L));
    (r, re, t.to_bits())
}

/// `e^x`: `x = q ln2 + r` ([`exp_reduce`]), `e^r = 1 + r + r^2 P(r)` ([`exp_pair`]) summed
/// from `1 + r` exactly and rounded, then `2^q` in two exact steps as [`scale`] takes them
/// (`q = k1 + k2`, `k1 = floor((q + 256) / 2) - 128`): a subnormal result is that rounded
/// `e^r` rounded once more (still within 1 ulp: 0.773 at worst over every `f32`). NaN gives
/// NaN (through the arithmetic; its payload is unspecified).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn exp<S: Single>(x: S) -> S {
    let cx = x.cx();
    let xc = clamp(x, -104.0, 89.0); // beyond, 0 and infinity already
    let (r, re, tb) = exp_reduce(xc);
    let (s, t) = exp_pair(r, re);
    let y = s + t;
    // h = (q + 256) >> 1; 2^k1 has exponent field k1 + 127 = h - 1, 2^k2 has q + 255 - h.
    let h = (tb + S::Bits::lit(cx, 256u64.wrapping_sub(SHIFT32_BITS))) >> 1;
    let p1 = S::from_bits((h - S::Bits::lit(cx, 1)) << 23);
    let p2 = S::from_bits(((tb + S::Bits::lit(cx, 255u64.wrapping_sub(SHIFT32_BITS))) - h) << 23);
    y * p1 * p2
}

/// `ln x`: `x = 2^k (1 + f)` with `1 + f` in `[sqrt(2)/2, sqrt(2))`, `ln(1 + f) = f - f^2/2 +
/// s (f^2/2 + R(s^2))` with `s = f / (2 + f)` (fdlibm's `e_logf.c`, its polynomial `R`), the
/// rounding error of `f^2/2` carried, and `k ln 2` added last as an exact high part.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn ln<S: Single>(x: S) -> S {
    let cx = x.cx();
    let sub = x.lt(S::lit(cx, f64::from(f32::MIN_POSITIVE)));
    let xs = S::select(sub, x * S::lit(cx, 33554432.0), x); // 2^25
    let kadj = S::select(sub, S::lit(cx, -25.0), S::lit(cx, 0.0));
    let ix = xs.to_bits() + S::Bits::lit(cx, 0x3f80_0000 - 0x3f35_04f3);
    let k = from_small::<S>(ix >> 23) - S::lit(cx, 127.0) + kadj;
    let m = S::from_bits((ix & S::Bits::lit(cx, 0x007f_ffff)) + S::Bits::lit(cx, 0x3f35_04f3));
    let f = m - S::lit(cx, 1.0); // exact
    let s = f / (S::lit(cx, 2.0) + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (S::lit(cx, 0.40000972152) + w * S::lit(cx, 0.24279078841));
    let t2 = z * (S::lit(cx, 0.66666662693) + w * S::lit(cx, 0.28498786688));
    let (hfsq, he) = {
        let (p, e) = two_prod(f, f);
        (S::lit(cx, 0.5) * p, S::lit(cx, 0.5) * e)
    };
    // ln(1 + f) = f - hfsq - he + s (hfsq + R), with f - hfsq summed error-free.
    let (a, ae) = two_sum(f, -hfsq);
    let tail = s * (hfsq + (t2 + t1)) - he + ae;
    let kh = k * S::lit(cx, L2U); // exact: |k| <= 150, 15 bits
    let kl = k * S::lit(cx, L2L);
    let (b, be) = fast_two_sum(kh, a); // |kh| >= |a| where k != 0
    let r = b + ((tail + kl) + be);
    log_specials(x, r)
}

/// Below this `|x|`, `sin` and `cos` reduce in `f32` (`n <= 163`: `n` times a 16-bit part of
/// `pi/2` is exact); above, the lanes take the `f64` definition.
const TRIG_LIMIT: f64 = 256.0;

/// `x = n pi/2 + (rh + rl)`, `|rh + rl| <~ pi/4`, for `|x| < 256`: `pi/2` in three 16-bit
/// parts and a rounded fourth, the first product subtracted exactly (Sterbenz), the next two
/// by error-free sums, so that `rh + rl` is `x - n pi/2` to about `2^-48` relative (the
/// rounding of the low parts' sum). Returns `(rh, rl, n's bits)`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn trig_reduce<S: Single>(x: S) -> (S, S, S::Bits) {
    let cx = x.cx();
    let (n, nb) = round_int(x * S::lit(cx, std::f64::consts::FRAC_2_PI));
    let r1 = (-n).mul_add(S::lit(cx, 1.570770263671875), x); // exact (as one `fma`)
    let (s1, e1) = two_sum(r1, -(n * S::lit(cx, 2.6063062250614166e-5)));
    let (s2, e2) = two_sum(s1, -(n * S::lit(cx, 6.077094383272197e-11)));
    let low = (e1 + e2) - n * S::lit(cx, 6.123234262925839e-17);
    let (rh, rl) = fast_two_sum(s2, low);
    (rh, rl, nb)
}

/// `sin(rh + rl)` for `|rh| <~ pi/4`: `rh + (rl (1 - rh^2/2) + rh^3 S(rh^2))` (Taylor to
/// `r^9`; truncation below `2^-28` relative).
#[cfg_attr(not(debug_assertions), inline(always))]
fn sin_kernel<S: Single>(rh: S, rl: S) -> S {
    let cx = rh.cx();
    let z = rh * rh;
    let p = poly(z, &[-1.0 / 6.0, 1.0 / 120.0, -1.0 / 5040.0, 1.0 / 362880.0]);
    let corr = rl - rl * (S::lit(cx, 0.5) * z);
    rh + (corr + rh * z * p)
}

/// `cos(rh + rl)` for `|rh| <~ pi/4`: `1 - rh^2/2 + rh^4 C(rh^2) - rh rl`, with `rh^2` exact
/// ([`two_prod`]) and `1 - rh^2/2` summed error-free (Taylor to `r^10`; truncation below `2^-32`).
#[cfg_attr(not(debug_assertions), inline(always))]
fn cos_kernel<S: Single>(rh: S, rl: S) -> S {
    let cx = rh.cx();
    let (z, ze) = two_prod(rh, rh);
    let hz = S::lit(cx, 0.5) * z;
    let c = poly(
        z,
        &[1.0 / 24.0, -1.0 / 720.0, 1.0 / 40320.0, -1.0 / 3628800.0],
    );
    let (w, we) = fast_two_sum(S::lit(cx, 1.0), -hz);
    w + (we + ((z * z * c - S::lit(cx, 0.5) * ze) - rh * rl))
}

/// The reduction of `x` and both kernels of its reduced argument: `(n, sin, cos)`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn kernels<S: Single>(x: S) -> (S::Bits, S, S) {
    let (rh, rl, n) = trig_reduce(x);
    (n, sin_kernel(rh, rl), cos_kernel(rh, rl))
}

/// `sin x` or `cos x` (`cos` when `cos` is set) from [`kernels`]`(x)`: the kernel of quadrant
/// `n + (cos ? 1 : 0)`, `sin` for even quadrants, `cos` for odd, negated in quadrants 2 and 3;
/// the `f64` definition for `|x| >= 256`, infinities and NaN.
#[cfg_attr(not(debug_assertions), inline(always))]
fn finish<S: Single>(x: S, (n, sk, ck): (S::Bits, S, S), cos: bool) -> S {
    let cx = x.cx();
    let q = if cos { n + S::Bits::lit(cx, 1) } else { n };
    let odd = (q & S::Bits::lit(cx, 1)).eq(S::Bits::lit(cx, 1));
    let v = S::select(odd, ck, sk);
    let v = xor_sign(v, (q & S::Bits::lit(cx, 2)) << 30);
    // sin x = x (rounded) for |x| < 2^-12: keeps -0 and the subnormals exact.
    let v = if cos {
        v
    } else {
        S::select(x.abs().lt(S::lit(cx, 2.44140625e-4)), x, v)
    };
    // The mask is built twice, once for each use, so that no mask is kept in memory (a
    // backend may compute each inside its consumer's loop).
    let far = move || !x.abs().lt(S::lit(cx, TRIG_LIMIT)) & !x.is_nan();
    let wide = move || {
        let w = x.widen();
        S::narrow(if cos {
            super::trig::cos(w)
        } else {
            super::trig::sin(w)
        })
    };
    S::if_any(far(), || S::select(far(), wide(), v), v)
}

/// `sin x` (radians).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn sin<S: Single>(x: S) -> S {
    finish(x, kernels(x), false)
}

/// `cos x` (radians).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn cos<S: Single>(x: S) -> S {
    finish(x, kernels(x), true)
}

/// `(sin x, cos x)` with one reduction and one pair of kernels: the same operations, so the
/// same bits, as [`sin`] and [`cos`] each (the expansion computes a `sin` and a `cos` of one
/// `f32` value in one block this way).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn sin_and_cos<S: Single>(x: S) -> (S, S) {
    let k = kernels(x);
    (finish(x, k, false), finish(x, k, true))
}

/// `e^r`'s pieces for [`exp`]'s reduced argument (`|r| <= ln2 / 2`, `re` its rounding
/// error): `e^r = s + t`, `s = fl(1 + r)`, `t` the rest (`|t| < 0.06`; SLEEF's minimax `P`,
/// degree 5, by Estrin's scheme: 6 dependent steps where Horner's takes 10), relative error
/// about `2^-28`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn exp_pair<S: Single>(r: S, re: S) -> (S, S) {
    let cx = r.cx();
    let r2 = r * r;
    let p = estrin(
        r,
        r2,
        &[
            0.5,
            0.166666671633720397949219,
            0.0416664853692054748535156,
            0.00833336077630519866943359,
            0.00139304355252534151077271,
            0.000198527617612853646278381,
        ],
    );
    let (s, e) = fast_two_sum(S::lit(cx, 1.0), r);
    (s, e + (r2 * p + re))
}

/// `tanh x`, `a = |x|`: below `0.55` (`tanh a < 0.5005`), `a + a z Q(z)` with `z = a^2` and `Q`
/// a weighted least-squares fit of degree 5 (`0.09` ulp with its coefficients in `f32`);
/// above, `1 - w` with `w = 2E / (1 + E) < 1/2`, `E = e^-2a` as an exact pair `Eh + El`
/// ([`exp_pair`], `2^q` exact), `w`'s quotient corrected by its exact remainder, `El` and the
/// rounding of `1 + Eh`, so that the last subtraction (into `[1/2, 1]`) is the one rounding
/// that counts.
/// `a` is clamped to `10` (`tanh` is `1` in `f32` from `9.01`). NaN gives NaN.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn tanh<S: Single>(x: S) -> S {
    let cx = x.cx();
    let a = x.abs();
    let z = a * a;
    let q = poly(
        z,
        &[
            -0.3333333134651184,
            0.13333295285701752,
            -0.053959790617227554,
            0.021783767268061638,
            -0.008416793309152126,
            0.002398998010903597,
        ],
    );
    let small = a + a * (z * q);
    // E = e^-2a = 2^q (s + t), -29 <= q <= 0 (a clamped to 10; NaN passes).
    let ten = S::lit(cx, 10.0);
    let m = S::select(a.gt(ten), ten, a) * S::lit(cx, -2.0);
    let (r, re, tb) = exp_reduce(m);
    let (s, t) = exp_pair(r, re);
    let (s, t) = fast_two_sum(s, t); // |t| < 0.06 <= s
    let p = S::from_bits((tb + S::Bits::lit(cx, 127u64.wrapping_sub(SHIFT32_BITS))) << 23);
    let (eh, el) = (s * p, t * p);
    let one = S::lit(cx, 1.0);
    let (dh, dl) = fast_two_sum(one, eh);
    let dl = dl + el;
    let two = S::lit(cx, 2.0);
    let n = two * eh;
    let w0 = n / dh;
    // The remainder n - w0 dh, exact (a rounded quotient's remainder is representable) in one
    // `fma`; the correction's division by 1 + E is a product: 1 / (1 + E) = 1 - w / 2.
    let rem = (-w0).mul_add(dh, n);
    let inv = one - S::lit(cx, 0.5) * w0;
    let w = w0 + ((rem + two * el) - w0 * dl) * inv;
    let big = one - w;
    let v = S::select(a.lt(S::lit(cx, 0.55)), small, big);
    // v >= +0 (NaN aside: NaN gives NaN through the arithmetic, its payload unspecified), so
    // x's sign is v's by one xor.
    xor_sign(v, sign_bits(x))
}

/// `(2 / ln 2) / (2i + 1)`, `i = 0..8`: `log2(m) = s * sum(c_i s^2i)` for `s = (m - 1) / (m + 1)`
/// (the series of `2 atanh(s) / ln 2`; the first term left out is below `2^-44` relative for
/// `|s| <= 0.1716`).
const LOG2_ATANH: [f64; 8] = [
    2.8853900817779268,
    0.9617966939259756,
    0.5770780163555853,
    0.4121985831111324,
    0.3205988979753252,
    0.2623081892525388,
    0.22195308321368667,
    0.19235933878519512,
];

/// `(ln 2)^i / i!`, `i = 0..12`: `2^f = sum(c_i f^i)` (Taylor; the first term left out is
/// below `2^-47` for `|f| <= 1/2`).
const EXP2_T: [f64; 12] = [
    1.0,
    0.6931471805599453,
    0.24022650695910072,
    0.05550410866482158,
    0.009618129107628477,
    0.0013333558146428443,
    0.0001540353039338161,
    1.5252733804059841e-05,
    1.321548679014431e-06,
    1.01780860092397e-07,
    7.054911620801123e-09,
    4.4455382718708116e-10,
];

/// `log2 a` for a positive normal `f64` lane `a`, to about `2^-44` relative: `a = 2^k m`
/// with `m` in `[sqrt(2)/2, sqrt(2))` (musl's bit trick, as in [`ln`]) and [`LOG2_ATANH`].
#[cfg_attr(not(debug_assertions), inline(always))]
fn log2_wide<R: Real>(a: R) -> R {
    let cx = a.cx();
    let ix = a.to_bits() + R::Bits::lit(cx, 0x3ff0_0000_0000_0000 - 0x3fe6_a09e_667f_3bcd);
    let k = from_small::<R>(ix >> 52) - R::lit(cx, 1023.0);
    let m = R::from_bits(
        (ix & R::Bits::lit(cx, 0x000f_ffff_ffff_ffff)) + R::Bits::lit(cx, 0x3fe6_a09e_667f_3bcd),
    );
    let f = m - R::lit(cx, 1.0); // exact
    let s = f / (R::lit(cx, 2.0) + f);
    let z = s * s;
    k + s * estrin(z, z * z, &LOG2_ATANH)
}

/// `2^z` for an `f64` lane, to about `2^-46` relative where the result is an `f32` or near
/// (`z` is clamped to `[-300, 300]`, where `f32` has long overflowed or underflowed; NaN
/// passes): `z = n + f`, `|f| <= 1/2`, [`EXP2_T`], times `2^n` (exact).
#[cfg_attr(not(debug_assertions), inline(always))]
fn exp2_wide<R: Real>(z: R) -> R {
    let zc = clamp(z, -300.0, 300.0);
    let (n, nb) = round_int(zc);
    let f = zc - n; // exact
    estrin(f, f * f, &EXP2_T) * pow2::<R>(nb)
}

/// `x^y` (C99 / IEEE `pow`) for `f32` lanes: `2^(y log2|x|)` in the `f64` lanes with a plain
/// `log2` and `exp2` ([`log2_wide`], [`exp2_wide`]), rounded once to `f32`. Where the result
/// is finite and nonzero `|y log2|x|| < 150`, so the exponent's absolute error is below
/// `2^-36` and the `f64` value's relative error below `2^-36`: within 1 ulp after the
/// rounding (the double-double `f64` `pow` is what `f64` needs, not `f32`). The special cases
/// are `pow`'s ([`super::power::pow_specials`]).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn powf<S: Single>(x: S, y: S) -> S {
    let (xw, yw) = (x.widen(), y.widen());
    let yc = clamp(yw, -super::power::Y_LIM, super::power::Y_LIM);
    let r = exp2_wide(yc * log2_wide(xw.abs()));
    S::narrow(super::power::pow_specials(xw, yw, r))
}
