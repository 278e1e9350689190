//! `sin`, `cos` and `tan`.
//!
//! The algorithms are fdlibm's (Sun Microsystems, 1993; as in musl): the argument is reduced
//! to `x = n pi/2 + y` with `|y| <~ pi/4` held as a hi/lo pair, then the kernels
//! `__kernel_sin`, `__kernel_cos` and `__kernel_tan` (same coefficients) finish. The
//! reduction is musl's `__rem_pio2` medium path (Cody-Waite with a 3-part `pi/2`, all three
//! rounds always taken) for `|x| < 1.5 * 2^20`, and a branch-free Payne-Hanek reduction
//! (after fdlibm's `__kernel_rem_pio2`: 24-bit digits of `2/pi`, exact products, carry
//! propagation in floating point) above, computed only when some lane needs it (a tile takes
//! one branch), and one of the two selected per lane. The table
//! of `2/pi` digits is indexed by the exponent through a barrel shifter of selects.

use super::lanes::*;

/// `2/pi = sum c_i 2^(-24 (i+1))`, the 24-bit digits `c_i` (exact integers), from MPFR.
const C2PI: [f64; 80] = [
    10680707.0, 7228996.0, 1387004.0, 2578385.0, 16069853.0, 12639074.0, 9804092.0, 4427841.0,
    16666979.0, 11263675.0, 12935607.0, 2387514.0, 4345298.0, 14681673.0, 3074569.0, 13734428.0,
    16653803.0, 1880361.0, 10960616.0, 8533493.0, 3062596.0, 8710556.0, 7349940.0, 6258241.0,
    3772886.0, 3769171.0, 3798172.0, 8675211.0, 12450088.0, 3874808.0, 9961438.0, 366607.0,
    15675153.0, 9132554.0, 7151469.0, 3571407.0, 2607881.0, 12013382.0, 4155038.0, 6285869.0,
    7677882.0, 13102053.0, 15825725.0, 473591.0, 9065106.0, 15363067.0, 6271263.0, 9264392.0,
    5636912.0, 4652155.0, 7056368.0, 13614112.0, 10155062.0, 1944035.0, 9527646.0, 15080200.0,
    6658437.0, 6231200.0, 6832269.0, 16767104.0, 5075751.0, 3212806.0, 1398474.0, 7579849.0,
    6349435.0, 12618859.0, 4703257.0, 12806093.0, 14477321.0, 2786137.0, 12875403.0, 9837734.0,
    14528324.0, 13719321.0, 343717.0, 16713477.0, 4161075.0, 15217346.0, 14569368.0, 3308987.0,
];

/// `pi/2` as `PIO2_HI + PIO2_LO`, and `PIO2_HI` split in halves for exact products.
const PIO2_HI: f64 = 1.5707963267948966e0;
const PIO2_LO: f64 = 6.123233995736766e-17;
const PIO2_HI_H: f64 = 1.5707963407039642e0;
const PIO2_HI_L: f64 = -1.3909067675399456e-8;

// musl __rem_pio2 constants.
const INVPIO2: f64 = 6.36619772367581382433e-01;
const PIO2_1: f64 = 1.57079632673412561417e+00;
const PIO2_2: f64 = 6.07710050630396597660e-11;
const PIO2_3: f64 = 2.02226624871116645580e-21;
const PIO2_3T: f64 = 8.47842766036889956997e-32;

/// Below this `|x|` the Cody-Waite reduction is used (`n < 2^20`, so `n * PIO2_1` is exact).
const MEDIUM_LIMIT: f64 = 1572864.0;

/// Number of 2/pi digits a reduction uses (digits j .. j+9).
const NDIG: usize = 10;
/// Digit levels of x 2/pi kept (0 = the integer part, 1..7 fraction digits of 24 bits).
const LEVELS: usize = 8;
/// `LEVELS` as the exponent step count.
const LEVELS_I: i32 = 8;

/// `x` rounded to a multiple of `2^k`, for `c = 1.5 * 2^(52 + k)` and `|x| < 2^(51 + k)`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn round_to<R: Real>(x: R, c: f64) -> R {
    let cx = x.cx();
    (x + R::lit(cx, c)) - R::lit(cx, c)
}

/// `2^e` for a constant integer `e` (any f64 exponent).
#[cfg_attr(not(debug_assertions), inline(always))]
fn p2(e: i32) -> f64 {
    let mut v = 1.0f64;
    let (f, n) = if e >= 0 { (2.0, e) } else { (0.5, -e) };
    for _ in 0..n {
        v *= f;
    }
    v
}

/// Payne-Hanek reduction (fdlibm `__kernel_rem_pio2`, branch-free): for finite
/// `|x| >= 2^20`, `x = n pi/2 + hi + lo` with `|hi + lo| <= pi/4 (1 + 2^-24)`; returns the
/// bits of `n` (only `n mod 4` is meaningful), `hi`, `lo`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn rem_pio2_large<R: Real>(x: R) -> (R::Bits, R, R) {
    let cx = x.cx();
    // x = M 2^E with M a 53-bit integer, E = biased exponent - 1075. Digits c_i with
    // i < j = floor((E - 2) / 24) contribute multiples of 4 to x 2/pi and are dropped;
    // jj = j + 2 >= 0 indexes the table, which starts with two zero digits.
    let be = (x.to_bits() >> 52) & R::Bits::lit(cx, 0x7ff);
    // floor(n / 24) = round((n - 11.5) / 24) for integer n (never a tie).
    let t = (from_small::<R>(be) - R::lit(cx, 1040.5)) * R::lit(cx, 1.0 / 24.0);
    let t = R::select(t.lt(R::lit(cx, 0.0)), R::lit(cx, 0.0), t);
    let (jjf, jjb) = round_int(t);
    // X = x 2^(-24 j) = M 2^s with 2 <= s < 26 (exact).
    let (_, kb) = round_int(R::lit(cx, 48.0) - R::lit(cx, 24.0) * jjf);
    let xx = x * pow2::<R>(kb);
    // X = X3 + X2 + X1 + X0 with X_a a multiple of 2^(24a) and |X_a| <= 2^(24a + 23).
    let x3 = round_to(xx, 1.5 * p2(52 + 72));
    let r = xx - x3;
    let x2 = round_to(r, 1.5 * p2(52 + 48));
    let r = r - x2;
    let x1 = round_to(r, 1.5 * p2(52 + 24));
    let x0 = r - x1;
    let xa = [x0, x1, x2, x3];
    // Digits c_{j+p}, p < NDIG: a barrel shifter over the table by the bits of jj (<= 42).
    let mut v: Vec<R> = (0..NDIG + 63)
        .map(|i| R::lit(cx, if i < 2 { 0.0 } else { C2PI[i - 2] }))
        .collect();
    for bit in (0..6u32).rev() {
        let sh = 1usize << bit;
        let width = NDIG + sh - 1;
        let clear = (jjb & R::Bits::lit(cx, 1u64 << bit)).eq(R::Bits::lit(cx, 0));
        v = (0..width)
            .map(|i| R::select(clear, v[i], v[i + sh]))
            .collect();
    }
    // D_p = c_{j+p} 2^(-24(p+1)); X_a D_p is exact (24 x 24 bits) and a multiple of
    // 2^(-24k) at level k = p + 1 - a. Levels below 0 are multiples of 4: dropped.
    let mut d: Vec<R> = Vec::new();
    let mut e = -24;
    for &c in v.iter().take(NDIG) {
        d.push(c * R::lit(cx, p2(e)));
        e -= 24;
    }
    let mut g: Vec<R> = Vec::new();
    for k in 0..LEVELS {
        let mut acc: Option<R> = None;
        for (a, &xv) in xa.iter().enumerate() {
            if k + a >= 1 && k + a - 1 < NDIG {
                let term = xv * d[k + a - 1];
                acc = Some(match acc {
                    None => term,
                    Some(s) => s + term,
                });
            }
        }
        g.push(acc.unwrap());
    }
    // Carry propagation: level k keeps a balanced digit |dig_k| <= 2^(-24k + 23), the rest
    // (a multiple of 2^(-24(k-1))) moves up. Everything is exact.
    let mut dig: Vec<R> = vec![R::lit(cx, 0.0); LEVELS];
    let mut e = 52 - 24 * (LEVELS_I - 2);
    for k in (1..LEVELS).rev() {
        let hi = round_to(g[k], 1.5 * p2(e));
        dig[k] = g[k] - hi;
        g[k - 1] = g[k - 1] + hi;
        e += 24;
    }
    // g[0] is an integer: n. The fraction sum dig_k is in [-1/2 - 2^-25, 1/2 + 2^-25].
    let (_, n) = round_int(g[0]);
    let p1 = dig[1] + dig[2];
    let pp2 = dig[3] + dig[4];
    let p3 = dig[5] + dig[6];
    let (h, e) = two_sum(p1, pp2);
    let l = e + (p3 + dig[7]);
    // (h + l) pi/2, h * PIO2_HI exactly (Dekker).
    let sp = h * R::lit(cx, 134217729.0);
    let hh = sp - (sp - h);
    let hl = h - hh;
    let ph = h * R::lit(cx, PIO2_HI);
    let pl = ((hh * R::lit(cx, PIO2_HI_H) - ph)
        + hh * R::lit(cx, PIO2_HI_L)
        + hl * R::lit(cx, PIO2_HI_H))
        + hl * R::lit(cx, PIO2_HI_L);
    let tail = pl + (h * R::lit(cx, PIO2_LO) + l * R::lit(cx, PIO2_HI));
    let (yh, yl) = fast_two_sum(ph, tail);
    (n, yh, yl)
}

/// Cody-Waite reduction (musl `__rem_pio2` medium path, all three rounds): for
/// `|x| < 1.5 * 2^20`, `x = n pi/2 + hi + lo`; returns the bits of `n`, `hi`, `lo`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn rem_pio2_medium<R: Real>(x: R) -> (R::Bits, R, R) {
    let cx = x.cx();
    // pi/2 = PIO2_1 + PIO2_2 + PIO2_3 + PIO2_3T; f * PIO2_{1,2,3} are exact (f < 2^20).
    let (f, n) = round_int(x * R::lit(cx, INVPIO2));
    let r1 = x - f * R::lit(cx, PIO2_1);
    let (r2, e2) = two_sum(r1, -(f * R::lit(cx, PIO2_2)));
    let (r3, e3) = two_sum(r2, -(f * R::lit(cx, PIO2_3)));
    let tail = (e2 + e3) - f * R::lit(cx, PIO2_3T);
    let (y0, y1) = two_sum(r3, tail);
    (n, y0, y1)
}

/// `x = n pi/2 + hi + lo`, `|hi + lo| <~ pi/4`, for finite `x`: Cody-Waite below
/// `1.5 * 2^20`, Payne-Hanek above (both computed, one selected). Returns (`n` bits, hi, lo).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn rem_pio2<R: Real>(x: R) -> (R::Bits, R, R) {
    let cx = x.cx();
    let (nm, hm, lm) = rem_pio2_medium(x);
    let (nl, hl, ll) = rem_pio2_large(x);
    let big = x.abs().ge(R::lit(cx, MEDIUM_LIMIT));
    (
        R::Bits::select(big, nl, nm),
        R::select(big, hl, hm),
        R::select(big, ll, lm),
    )
}

const S1: f64 = -1.66666666666666324348e-01;
const S2: f64 = 8.33333333332248946124e-03;
const S3: f64 = -1.98412698298579493134e-04;
const S4: f64 = 2.75573137070700676789e-06;
const S5: f64 = -2.50507602534068634195e-08;
const S6: f64 = 1.58969099521155010221e-10;

/// fdlibm `__kernel_sin(x, y, 1)`: `sin(x + y)` for `|x| <~ pi/4`, `|y| <= ulp(x)/2`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn kernel_sin<R: Real>(x: R, y: R) -> R {
    let cx = x.cx();
    let z = x * x;
    let v = z * x;
    let r = poly(z, &[S2, S3, S4, S5, S6]);
    x - ((z * (R::lit(cx, 0.5) * y - v * r) - y) - v * R::lit(cx, S1))
}

const C1: f64 = 4.16666666666666019037e-02;
const C2: f64 = -1.38888888888741095749e-03;
const C3: f64 = 2.48015872894767294178e-05;
const C4: f64 = -2.75573143513906633035e-07;
const C5: f64 = 2.08757232129817482790e-09;
const C6: f64 = -1.13596475577881948265e-11;

/// fdlibm/musl `__kernel_cos(x, y)`: `cos(x + y)` for `|x| <~ pi/4`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn kernel_cos<R: Real>(x: R, y: R) -> R {
    let cx = x.cx();
    let z = x * x;
    let w = z * z;
    let r = z * poly(z, &[C1, C2, C3]) + w * w * poly(z, &[C4, C5, C6]);
    let hz = R::lit(cx, 0.5) * z;
    let w = R::lit(cx, 1.0) - hz;
    w + (((R::lit(cx, 1.0) - w) - hz) + (z * r - x * y))
}

const T: [f64; 13] = [
    3.33333333333334091986e-01,
    1.33333333333201242699e-01,
    5.39682539762260521377e-02,
    2.18694882948595424599e-02,
    8.86323982359930005737e-03,
    3.59207910759131235356e-03,
    1.45620945432529025516e-03,
    5.88041240820264096874e-04,
    2.46463134818469906812e-04,
    7.81794442939557092300e-05,
    7.14072491382608190305e-05,
    -1.85586374855275456654e-05,
    2.59073051863633712884e-05,
];
const PIO4: f64 = 7.85398163397448278999e-01;
const PIO4_LO: f64 = 3.06161699786838301793e-17;

/// fdlibm/musl `__kernel_tan(x, y, odd)`: `tan(x + y)` (or `-1/tan(x + y)` where `odd`),
/// `|x| <~ pi/4`; both of fdlibm's branches (`|x| >= 0.6744` via `pi/4 - x`) computed and
/// selected.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn kernel_tan<R: Real>(x: R, y: R, odd: R::Mask) -> R {
    let cx = x.cx();
    let big = x
        .abs()
        .ge(R::from_bits(R::Bits::lit(cx, 0x3FE5_9428_0000_0000)));
    let neg = x.lt(R::lit(cx, 0.0));
    let xa = R::select(neg, -x, x);
    let ya = R::select(neg, -y, y);
    let xb = (R::lit(cx, PIO4) - xa) + (R::lit(cx, PIO4_LO) - ya);
    let x = R::select(big, xb, x);
    let y = R::select(big, R::lit(cx, 0.0), y);
    let z = x * x;
    let w = z * z;
    let r = poly(w, &[T[1], T[3], T[5], T[7], T[9], T[11]]);
    let v = z * poly(w, &[T[2], T[4], T[6], T[8], T[10], T[12]]);
    let s = z * x;
    let r = y + z * (s * (r + v) + y) + s * R::lit(cx, T[0]);
    let w = x + r;
    // |x| >= 0.6744.
    let sg = R::select(odd, R::lit(cx, -1.0), R::lit(cx, 1.0));
    let vb = sg - R::lit(cx, 2.0) * (x + (r - w * w / (w + sg)));
    let vb = R::select(neg, -vb, vb);
    // odd: -1/(x + r), computed accurately.
    let w0 = high_half(w);
    let vv = r - (w0 - x);
    let a = R::lit(cx, -1.0) / w;
    let a0 = high_half(a);
    let vo = a0 + a * (R::lit(cx, 1.0) + a0 * w0 + a0 * vv);
    R::select(big, vb, R::select(odd, vo, w))
}

/// NaN for infinite or NaN `x`, `x` itself at `±0`, else `r`.
#[cfg_attr(not(debug_assertions), inline(always))]
fn specials<R: Real>(x: R, r: R, keep_zero: bool) -> R {
    let cx = x.cx();
    let r = if keep_zero {
        R::select(x.eq(R::lit(cx, 0.0)), x, r)
    } else {
        r
    };
    R::select(is_inf(x) | x.is_nan(), R::lit(cx, f64::NAN), r)
}

/// `sin x`: fdlibm/musl `sin` (reduction by `rem_pio2`: Cody-Waite, Payne-Hanek for huge
/// `x`; `__kernel_sin`/`__kernel_cos` by quadrant).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn sin<R: Real>(x: R) -> R {
    with_reduction(x, sin_reduced)
}

/// `f(x, rem_pio2(x))`, computing the Payne-Hanek reduction only when some lane needs it:
/// `f` of the Cody-Waite reduction alone is the result wherever `|x| < 1.5 * 2^20`, so where
/// no lane is that large (a whole tile, or a group of 16 lanes in the CPU's kernels: one
/// branch) it is the result.
#[cfg_attr(not(debug_assertions), inline(always))]
fn with_reduction<R: Real>(x: R, f: fn(R, (R::Bits, R, R)) -> R) -> R {
    let cx = x.cx();
    let big = x.abs().ge(R::lit(cx, MEDIUM_LIMIT));
    let medium = f(x, rem_pio2_medium(x));
    R::if_any(big, || f(x, rem_pio2(x)), medium)
}

#[cfg_attr(not(debug_assertions), inline(always))]
fn sin_reduced<R: Real>(x: R, (n, y0, y1): (R::Bits, R, R)) -> R {
    let cx = x.cx();
    let s = kernel_sin(y0, y1);
    let c = kernel_cos(y0, y1);
    let odd = (n & R::Bits::lit(cx, 1)).eq(R::Bits::lit(cx, 1));
    let r = R::select(odd, c, s);
    let r = xor_sign(r, (n & R::Bits::lit(cx, 2)) << 62);
    specials(x, r, true)
}

/// `cos x`: fdlibm/musl `cos` (reduction by `rem_pio2`: Cody-Waite, Payne-Hanek for huge
/// `x`; `__kernel_cos`/`__kernel_sin` by quadrant).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn cos<R: Real>(x: R) -> R {
    with_reduction(x, cos_reduced)
}

#[cfg_attr(not(debug_assertions), inline(always))]
fn cos_reduced<R: Real>(x: R, (n, y0, y1): (R::Bits, R, R)) -> R {
    let cx = x.cx();
    let s = kernel_sin(y0, y1);
    let c = kernel_cos(y0, y1);
    let odd = (n & R::Bits::lit(cx, 1)).eq(R::Bits::lit(cx, 1));
    let r = R::select(odd, s, c);
    let r = xor_sign(r, ((n + R::Bits::lit(cx, 1)) & R::Bits::lit(cx, 2)) << 62);
    specials(x, r, false)
}

/// `tan x`: fdlibm/musl `tan` (reduction by `rem_pio2`: Cody-Waite, Payne-Hanek for huge
/// `x`; `__kernel_tan` with the parity of `n`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn tan<R: Real>(x: R) -> R {
    with_reduction(x, tan_reduced)
}

#[cfg_attr(not(debug_assertions), inline(always))]
fn tan_reduced<R: Real>(x: R, (n, y0, y1): (R::Bits, R, R)) -> R {
    let cx = x.cx();
    let odd = (n & R::Bits::lit(cx, 1)).eq(R::Bits::lit(cx, 1));
    let r = kernel_tan(y0, y1, odd);
    specials(x, r, true)
}
