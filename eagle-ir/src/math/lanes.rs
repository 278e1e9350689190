//! The primitive arithmetic the math library is written in.
//!
//! Every function of [`crate::math`] is one generic Rust function over a lane: [`Real`] (an
//! `f64` lane) or [`Single`] (an `f32` lane, which can widen to its `f64` lane and narrow
//! back), both [`Float`]s. The traits offer exactly the IR's elementwise ops on the float, its
//! bits (`u64` or `u32`) and `bool` (add, sub, mul, div, sqrt, abs, neg, comparisons, select,
//! bit casts, wrapping integer add/sub, and/or/xor, logical shifts, `f32 <-> f64` casts,
//! `fma`): nothing else. `fma` serves only where its result is exact: the error of a product
//! ([`two_prod`]), the remainder of a quotient, a Cody-Waite step `x - n C` whose product is
//! exact; never a contraction of a rounded `a * b + c`. Three instances
//! of each exist:
//! - `f64` and `f32` themselves ([`W`], [`W32`] for the bits, `bool` for masks): the
//!   reference, used by [`crate::eval`], the constant folder and the host interpreter;
//! - the IR instance of `crate::expand`, whose lanes carry the function being written
//!   ([`Float::Cx`]) and whose steps append IR ops;
//! - [`super::packed`], 16 lanes in arrays, each primitive the reference's lane by lane: the
//!   CPU backend's kernels on tiles.
//!
//! Because each step is one IR op with one IEEE-defined result, the two instances compute the
//! same bits, and so do the CPU JIT and the CUDA C (held to the evaluator op by op by
//! `tests/eval_diff.rs`).

use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Shl, Shr, Sub};

/// A lane mask: the result of a comparison.
pub trait Mask: Copy + BitAnd<Output = Self> + BitOr<Output = Self> + Not<Output = Self> {
    /// The context the lane's instance computes in (see [`Float::Cx`]).
    type Cx: Copy;
    /// The lane's context.
    fn cx(self) -> Self::Cx;
}

/// The bits of a lane (`u64` for `f64`, `u32` for `f32`) with wrapping `+`/`-` (two's
/// complement), and/or/xor and logical shifts by a constant.
pub trait Bits:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + BitAnd<Output = Self>
    + BitOr<Output = Self>
    + BitXor<Output = Self>
    + Shl<u32, Output = Self>
    + Shr<u32, Output = Self>
{
    /// The mask type.
    type Mask: Mask<Cx = Self::Cx>;
    /// The context the lane's instance computes in (see [`Float::Cx`]).
    type Cx: Copy;
    /// The lane's context.
    fn cx(self) -> Self::Cx;
    /// A constant, in context `cx`: the low bits of `v` (all of them for `u64` lanes, 32 for
    /// `u32` lanes).
    fn lit(cx: Self::Cx, v: u64) -> Self;
    /// `self == o`.
    fn eq(self, o: Self) -> Self::Mask;
    /// `self < o`, unsigned.
    fn ult(self, o: Self) -> Self::Mask;
    /// `m ? a : b`, lane by lane.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
}

/// A float lane: IEEE binary64 ([`Real`]) or binary32 ([`Single`]), round to nearest even,
/// no contraction, subnormals kept.
pub trait Float:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// The significand's stored bits: 52 (`f64`), 23 (`f32`).
    const MANT: u32;
    /// The width of the format in bits: 64, 32.
    const WIDTH: u32;
    /// The mask type.
    type Mask: Mask<Cx = Self::Cx>;
    /// The bits type.
    type Bits: Bits<Mask = Self::Mask, Cx = Self::Cx>;
    /// What a constant is made in: `()` for the reference instance, the function being
    /// written for the IR instance. Every lane carries its context ([`Float::cx`]), so a
    /// library function takes the context of its operand: `R::lit(x.cx(), 0.5)`.
    type Cx: Copy;
    /// The lane's context.
    fn cx(self) -> Self::Cx;
    /// A constant, in context `cx`: `v` rounded to the lane's format (to nearest, as `as f32`
    /// does; both instances round it alike).
    fn lit(cx: Self::Cx, v: f64) -> Self;
    /// Correctly rounded square root.
    fn sqrt(self) -> Self;
    /// `self * b + c` rounded once (IEEE `fusedMultiplyAdd`; the IR's `fma`).
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// `|self|` (clears the sign bit).
    fn abs(self) -> Self;
    /// `self < o` (false when either is NaN).
    fn lt(self, o: Self) -> Self::Mask;
    /// `self <= o` (false when either is NaN).
    fn le(self, o: Self) -> Self::Mask;
    /// `self == o` (false when either is NaN; `-0 == +0`).
    fn eq(self, o: Self) -> Self::Mask;
    /// `m ? a : b`, lane by lane.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
    /// The bits (`f64::to_bits`, `f32::to_bits`).
    fn to_bits(self) -> Self::Bits;
    /// The float with these bits (`f64::from_bits`, `f32::from_bits`).
    fn from_bits(b: Self::Bits) -> Self;
    /// `f()` where some lane of `m` holds, else `otherwise`, for an `f` that equals
    /// `otherwise` in every lane where `m` does not hold: an instance may skip `f` when no lane
    /// of `m` holds (the IR instance does, with one branch for a whole tile; the packed one
    /// with one for each group of 16 lanes), and the result
    /// never depends on the skipping. The only control flow in the library: the rare slow path
    /// of a reduction.
    fn if_any(m: Self::Mask, f: impl FnOnce() -> Self, otherwise: Self) -> Self;

    /// `self > o`.
    fn gt(self, o: Self) -> Self::Mask {
        o.lt(self)
    }
    /// `self >= o`.
    fn ge(self, o: Self) -> Self::Mask {
        o.le(self)
    }
    /// Whether the lane is NaN.
    fn is_nan(self) -> Self::Mask {
        !self.eq(self)
    }
}

/// An `f64` lane.
pub trait Real: Float {}

/// An `f32` lane, which converts exactly to its `f64` lane ([`Single::widen`]) and back with
/// one rounding ([`Single::narrow`]): an `f32` function may compute a rare case through the
/// `f64` definition.
pub trait Single: Float {
    /// The `f64` lane of the same instance.
    type Wide: Real<Cx = Self::Cx, Mask = Self::Mask>;
    /// The value as `f64` (exact).
    fn widen(self) -> Self::Wide;
    /// `w` rounded to `f32` (to nearest even; overflow to infinity).
    fn narrow(w: Self::Wide) -> Self;
}

/// The `u64` lane of the reference instance: wrapping arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct W(pub u64);

/// The `u32` lane of the reference instance: wrapping arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct W32(pub u32);

impl Mask for bool {
    type Cx = ();
    fn cx(self) {}
}

/// The reference instance's bits lane `$w` over `$u`, with wrapping arithmetic.
macro_rules! reference_bits {
    ($w:ident, $u:ty) => {
        impl Add for $w {
            type Output = $w;
            fn add(self, o: $w) -> $w {
                $w(self.0.wrapping_add(o.0))
            }
        }
        impl Sub for $w {
            type Output = $w;
            fn sub(self, o: $w) -> $w {
                $w(self.0.wrapping_sub(o.0))
            }
        }
        impl BitAnd for $w {
            type Output = $w;
            fn bitand(self, o: $w) -> $w {
                $w(self.0 & o.0)
            }
        }
        impl BitOr for $w {
            type Output = $w;
            fn bitor(self, o: $w) -> $w {
                $w(self.0 | o.0)
            }
        }
        impl BitXor for $w {
            type Output = $w;
            fn bitxor(self, o: $w) -> $w {
                $w(self.0 ^ o.0)
            }
        }
        impl Shl<u32> for $w {
            type Output = $w;
            fn shl(self, n: u32) -> $w {
                $w(self.0.wrapping_shl(n))
            }
        }
        impl Shr<u32> for $w {
            type Output = $w;
            fn shr(self, n: u32) -> $w {
                $w(self.0.wrapping_shr(n))
            }
        }
        impl Bits for $w {
            type Mask = bool;
            type Cx = ();
            fn cx(self) {}
            fn lit(_: (), v: u64) -> $w {
                $w(v as $u)
            }
            fn eq(self, o: $w) -> bool {
                self.0 == o.0
            }
            fn ult(self, o: $w) -> bool {
                self.0 < o.0
            }
            fn select(m: bool, a: $w, b: $w) -> $w {
                if m {
                    a
                } else {
                    b
                }
            }
        }
    };
}
reference_bits!(W, u64);
reference_bits!(W32, u32);

/// The reference instance's float lane `$f` (bits `$w`), Rust's own IEEE arithmetic.
macro_rules! reference_float {
    ($f:ident, $w:ident, $mant:expr, $width:expr) => {
        impl Float for $f {
            const MANT: u32 = $mant;
            const WIDTH: u32 = $width;
            type Mask = bool;
            type Bits = $w;
            type Cx = ();
            fn cx(self) {}
            fn lit(_: (), v: f64) -> $f {
                v as $f
            }
            fn sqrt(self) -> $f {
                $f::sqrt(self)
            }
            fn mul_add(self, b: $f, c: $f) -> $f {
                $f::mul_add(self, b, c)
            }
            fn abs(self) -> $f {
                $f::abs(self)
            }
            fn lt(self, o: $f) -> bool {
                self < o
            }
            fn le(self, o: $f) -> bool {
                self <= o
            }
            fn eq(self, o: $f) -> bool {
                self == o
            }
            fn select(m: bool, a: $f, b: $f) -> $f {
                if m {
                    a
                } else {
                    b
                }
            }
            fn to_bits(self) -> $w {
                $w($f::to_bits(self))
            }
            fn from_bits(b: $w) -> $f {
                $f::from_bits(b.0)
            }
            fn if_any(m: bool, f: impl FnOnce() -> $f, otherwise: $f) -> $f {
                if m {
                    f()
                } else {
                    otherwise
                }
            }
        }
    };
}

reference_float!(f64, W, 52, 64);
reference_float!(f32, W32, 23, 32);

impl Real for f64 {}

impl Single for f32 {
    type Wide = f64;
    fn widen(self) -> f64 {
        self as f64
    }
    fn narrow(w: f64) -> f32 {
        w as f32
    }
}

// ---- helpers every function may use (all built from the primitives above) ----

/// The sign bit of the lane's format.
#[cfg_attr(not(debug_assertions), inline(always))]
fn sign_bit<R: Float>() -> u64 {
    1 << (R::WIDTH - 1)
}

/// `2^n` as an `f64` (exact for `-1074 <= n <= 1023`).
#[cfg_attr(not(debug_assertions), inline(always))]
fn two_to(n: i32) -> f64 {
    f64::powi(2.0, n)
}

/// `c[0] + x c[1] + x^2 c[2] + ...` by Estrin's scheme: the pairs `c[2i] + x c[2i+1]`
/// (independent of each other) combined by Horner's scheme in `x2`, which the caller passes
/// as `x * x` (it usually needs it too). Half the dependent steps of [`poly`] (so a vector loop
/// runs more of it at once), each rounded; not the same bits as [`poly`].
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn estrin<R: Float>(x: R, x2: R, c: &[f64]) -> R {
    let cx = x.cx();
    let pair = |i: usize| match c.get(2 * i + 1) {
        Some(&k) => R::lit(cx, c[2 * i]) + x * R::lit(cx, k),
        None => R::lit(cx, c[2 * i]),
    };
    let n = c.len().div_ceil(2);
    let mut acc = pair(n - 1);
    for i in (0..n - 1).rev() {
        acc = pair(i) + x2 * acc;
    }
    acc
}

/// `c[0] + x * (c[1] + x * (c[2] + ...))`: Horner's scheme, each step rounded.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn poly<R: Float>(x: R, c: &[f64]) -> R {
    let cx = x.cx();
    let mut acc = R::lit(cx, c[c.len() - 1]);
    for &k in c[..c.len() - 1].iter().rev() {
        acc = R::lit(cx, k) + x * acc;
    }
    acc
}

/// `|x|` with the sign of `s` (`f64::copysign`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn copysign<R: Float>(x: R, s: R) -> R {
    let cx = x.cx();
    let m = R::Bits::lit(cx, sign_bit::<R>());
    R::from_bits((x.to_bits() & R::Bits::lit(cx, !sign_bit::<R>())) | (s.to_bits() & m))
}

/// The sign bit of `x` alone, as bits.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn sign_bits<R: Float>(x: R) -> R::Bits {
    let cx = x.cx();
    x.to_bits() & R::Bits::lit(cx, sign_bit::<R>())
}

/// `x` with its sign flipped where `s` has the sign bit set (`s` from [`sign_bits`]).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn xor_sign<R: Float>(x: R, s: R::Bits) -> R {
    R::from_bits(x.to_bits() ^ s)
}

/// The float of an integer `0 <= b < 2^MANT` (exact; `2^52` for `f64`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn from_small<R: Float>(b: R::Bits) -> R {
    let cx = b.cx();
    let big = R::lit(cx, two_to(R::MANT as i32));
    R::from_bits(b | big.to_bits()) - big
}

/// `1.5 * 2^52`: adding it to `|x| < 2^51` rounds `x` to the nearest integer (ties to even),
/// and the integer is the low bits of the sum: `sum.to_bits() - SHIFT.to_bits()`.
pub const SHIFT: f64 = 6755399441055744.0;

/// `x` rounded to the nearest integer (ties to even), for `|x| < 2^(MANT - 1)`, with the
/// integer's two's-complement bits (the format's [`SHIFT`], `1.5 * 2^MANT`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn round_int<R: Float>(x: R) -> (R, R::Bits) {
    let cx = x.cx();
    let shift = R::lit(cx, 1.5 * two_to(R::MANT as i32));
    let t = x + shift;
    (t - shift, t.to_bits() - shift.to_bits())
}

/// The exponent bias: 1023 (`f64`), 127 (`f32`).
#[cfg_attr(not(debug_assertions), inline(always))]
fn bias<R: Float>() -> u64 {
    (1 << (R::WIDTH - R::MANT - 2)) - 1
}

/// `2^k` for a two's-complement integer `k` in the normal range (`-1022 <= k <= 1023` for
/// `f64`, `-126 <= k <= 127` for `f32`; bits of `k`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn pow2<R: Float>(k: R::Bits) -> R {
    let cx = k.cx();
    R::from_bits((k + R::Bits::lit(cx, bias::<R>())) << R::MANT)
}

/// `y * 2^k` rounded once, for `y` near 1 and `|k|` up to twice the exponent range
/// (`-2000 <= k <= 2000` for `f64`, `-250 <= k <= 250` for `f32`; bits of `k`): `y * 2^k1` is
/// exact and `2^k2` finishes, so subnormal and overflowing results round correctly.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn scale<R: Float>(y: R, k: R::Bits) -> R {
    let cx = y.cx();
    let half = bias::<R>() + 1; // 1024, 128
    let k1 = ((k + R::Bits::lit(cx, 2 * half)) >> 1) - R::Bits::lit(cx, half);
    let k2 = k - k1;
    y * pow2::<R>(k1) * pow2::<R>(k2)
}

/// `x` with the low 32 bits of its significand cleared (a "high part" for splitting).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn high_half<R: Real>(x: R) -> R {
    let cx = x.cx();
    R::from_bits(x.to_bits() & R::Bits::lit(cx, 0xffff_ffff_0000_0000))
}

/// `x` clamped to `[lo, hi]` (NaN passes: comparisons with it are false).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn clamp<R: Float>(x: R, lo: f64, hi: f64) -> R {
    let cx = x.cx();
    let x = R::select(x.gt(R::lit(cx, hi)), R::lit(cx, hi), x);
    R::select(x.lt(R::lit(cx, lo)), R::lit(cx, lo), x)
}

/// Whether `x` is `+inf` or `-inf`.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn is_inf<R: Float>(x: R) -> R::Mask {
    let cx = x.cx();
    x.abs().eq(R::lit(cx, f64::INFINITY))
}

/// Veltkamp's split: `x = hi + lo` with `hi` holding the top half of the significand (26 bits
/// of `f64`, 12 of `f32`; for `|x|` well below the overflow threshold).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn split<R: Float>(x: R) -> (R, R) {
    let cx = x.cx();
    let c = R::lit(cx, two_to((R::MANT + 1).div_ceil(2) as i32) + 1.0) * x;
    let hi = c - (c - x);
    (hi, x - hi)
}

/// The exact product: `a * b = p + e`, `p` rounded and `e = fma(a, b, -p)` its error, exact
/// whenever it is representable (no overflow of `p`, `e` not below the subnormals): the same
/// `e` as Dekker's product from Veltkamp splits ([`split`]) wherever that one is exact, in two
/// operations instead of seventeen.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn two_prod<R: Float>(a: R, b: R) -> (R, R) {
    let p = a * b;
    (p, a.mul_add(b, -p))
}

/// Knuth's exact sum: `a + b = s + e` exactly.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn two_sum<R: Float>(a: R, b: R) -> (R, R) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// Dekker's fast two-sum of `a - b`: `a - b = s + e` exactly when `|a| >= |b|` (or `a = 0`);
/// the same bits as [`fast_two_sum`]`(a, -b)` with one operation fewer.
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn fast_two_diff<R: Float>(a: R, b: R) -> (R, R) {
    let s = a - b;
    (s, (a - s) - b)
}

/// Dekker's fast two-sum: `a + b = s + e` exactly when `|a| >= |b|` (or `a = 0`).
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn fast_two_sum<R: Float>(a: R, b: R) -> (R, R) {
    let s = a + b;
    (s, b - (s - a))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Marsaglia's xorshift64 from `seed` (nonzero): the tests' reproducible sample stream.
    pub(in crate::math) fn xorshift(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    /// Dekker's product from Veltkamp splits, the form [`two_prod`] had before it used `fma`.
    fn dekker<R: Float>(a: R, b: R) -> (R, R) {
        let p = a * b;
        let (ah, al) = split(a);
        let (bh, bl) = split(b);
        (p, ((ah * bh - p) + ah * bl + al * bh) + al * bl)
    }

    /// `two_prod`'s error is exact (`f32` products are exact in `f64`) and equals Dekker's
    /// wherever that one is exact: on `f32` pairs of magnitudes 2^-40..2^40 and on `f64`
    /// pairs, bit for bit (products down to 2^-80, whose errors are normal numbers).
    #[test]
    fn two_prod_is_exact_and_equals_dekkers_product() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for _ in 0..100_000 {
            let r = next();
            let e = |k: u64| ((k % 81) as i32 - 40) as f64;
            let a = ((r >> 40) as f64 / (1u64 << 24) as f64 + 1.0) * e(r).exp2();
            let b =
                -(((r >> 16) & 0xff_ffff) as f64 / (1u64 << 24) as f64 + 1.0) * e(r >> 8).exp2();
            let (a, b) = (a as f32, b as f32);
            let (p, q) = two_prod(a, b);
            assert_eq!(p as f64 + q as f64, a as f64 * b as f64, "{a:e} * {b:e}");
            let (dp, dq) = dekker(a, b);
            assert_eq!((p.to_bits(), q.to_bits()), (dp.to_bits(), dq.to_bits()));
            let (a, b) = (a as f64 * (1.0 + 1e-9), b as f64 * (1.0 - 3e-10));
            let (p, q) = two_prod(a, b);
            let (dp, dq) = dekker(a, b);
            assert_eq!((p.to_bits(), q.to_bits()), (dp.to_bits(), dq.to_bits()));
        }
        // Below the subnormals the error is not representable: fma rounds it once.
        let (p, q) = two_prod(1e-30f32, 1e-30f32);
        assert_eq!((p, q), (0.0, 0.0));
    }

    /// Estrin's scheme computes the polynomial: exact on small integers, and the same as
    /// Horner's there; an odd and an even number of coefficients.
    #[test]
    fn estrin_evaluates_the_polynomial() {
        let c = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        for x in [-3.0f64, -1.0, 0.0, 0.5, 2.0] {
            assert_eq!(estrin(x, x * x, &c), poly(x, &c));
            assert_eq!(estrin(x, x * x, &c[..5]), poly(x, &c[..5]));
            assert_eq!(estrin(x as f32, (x * x) as f32, &c[..1]), 1.0);
        }
        assert_eq!(estrin(2.0f64, 4.0, &c[..5]), 129.0);
    }
}
