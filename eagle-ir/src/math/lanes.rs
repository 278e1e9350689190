//! The primitive arithmetic the math library is written in.
//!
//! Every function of [`crate::math`] is one generic Rust function over [`Real`]. The traits
//! offer exactly the IR's elementwise ops on `f64`, `u64` and `bool` (add, sub, mul, div,
//! sqrt, abs, neg, comparisons, select, bit casts, wrapping integer add/sub, and/or/xor,
//! logical shifts): nothing else, and no `fma`. Two instances exist:
//! - `f64` itself ([`W`] for the bits, `bool` for masks): the reference, used by
//!   [`crate::eval`], the constant folder and the host interpreter;
//! - the IR instance of `crate::expand`, whose lanes carry the function being written ([`Real::Cx`]) and whose
//!   steps append IR ops.
//!
//! Because each step is one IR op with one IEEE-defined result, the two instances compute the
//! same bits, and so do the CPU JIT and the CUDA C (held to the evaluator op by op by
//! `tests/eval_diff.rs`).

use std::ops::{Add, BitAnd, BitOr, BitXor, Div, Mul, Neg, Not, Shl, Shr, Sub};

/// A lane mask: the result of a comparison.
pub trait Mask: Copy + BitAnd<Output = Self> + BitOr<Output = Self> + Not<Output = Self> {
    /// The context the lane's instance computes in (see [`Real::Cx`]).
    type Cx: Copy;
    /// The lane's context.
    fn cx(self) -> Self::Cx;
}

/// The 64 bits of a lane, as `u64` with wrapping `+`/`-` (two's complement), and/or/xor and
/// logical shifts by a constant.
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
    /// The context the lane's instance computes in (see [`Real::Cx`]).
    type Cx: Copy;
    /// The lane's context.
    fn cx(self) -> Self::Cx;
    /// A constant, in context `cx`.
    fn lit(cx: Self::Cx, v: u64) -> Self;
    /// `self == o`.
    fn eq(self, o: Self) -> Self::Mask;
    /// `self < o`, unsigned.
    fn ult(self, o: Self) -> Self::Mask;
    /// `m ? a : b`, lane by lane.
    fn select(m: Self::Mask, a: Self, b: Self) -> Self;
}

/// An `f64` lane: IEEE binary64, round to nearest even, no contraction.
pub trait Real:
    Copy
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
{
    /// The mask type.
    type Mask: Mask<Cx = Self::Cx>;
    /// The bits type.
    type Bits: Bits<Mask = Self::Mask, Cx = Self::Cx>;
    /// What a constant is made in: `()` for the reference instance, the function being
    /// written for the IR instance. Every lane carries its context ([`Real::cx`]), so a
    /// library function takes the context of its operand: `R::lit(x.cx(), 0.5)`.
    type Cx: Copy;
    /// The lane's context.
    fn cx(self) -> Self::Cx;
    /// A constant, in context `cx`.
    fn lit(cx: Self::Cx, v: f64) -> Self;
    /// Correctly rounded square root.
    fn sqrt(self) -> Self;
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
    /// The bits (`f64::to_bits`).
    fn to_bits(self) -> Self::Bits;
    /// The float with these bits (`f64::from_bits`).
    fn from_bits(b: Self::Bits) -> Self;
    /// `f()` where some lane of `m` holds, else `otherwise`, for an `f` that equals
    /// `otherwise` in every lane where `m` does not hold: an instance may skip `f` when no lane
    /// of `m` holds (the IR instance does, with one branch for a whole tile), and the result
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

/// The `u64` lane of the reference instance: wrapping arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct W(pub u64);

impl Mask for bool {
    type Cx = ();
    fn cx(self) {}
}

macro_rules! w_op {
    ($tr:ident, $m:ident, $e:expr) => {
        impl $tr for W {
            type Output = W;
            fn $m(self, o: W) -> W {
                let f: fn(u64, u64) -> u64 = $e;
                W(f(self.0, o.0))
            }
        }
    };
}
w_op!(Add, add, |a, b| a.wrapping_add(b));
w_op!(Sub, sub, |a, b| a.wrapping_sub(b));
w_op!(BitAnd, bitand, |a, b| a & b);
w_op!(BitOr, bitor, |a, b| a | b);
w_op!(BitXor, bitxor, |a, b| a ^ b);

impl Shl<u32> for W {
    type Output = W;
    fn shl(self, n: u32) -> W {
        W(self.0.wrapping_shl(n))
    }
}

impl Shr<u32> for W {
    type Output = W;
    fn shr(self, n: u32) -> W {
        W(self.0.wrapping_shr(n))
    }
}

impl Bits for W {
    type Mask = bool;
    type Cx = ();
    fn cx(self) {}
    fn lit(_: (), v: u64) -> W {
        W(v)
    }
    fn eq(self, o: W) -> bool {
        self.0 == o.0
    }
    fn ult(self, o: W) -> bool {
        self.0 < o.0
    }
    fn select(m: bool, a: W, b: W) -> W {
        if m {
            a
        } else {
            b
        }
    }
}

impl Real for f64 {
    type Mask = bool;
    type Bits = W;
    type Cx = ();
    fn cx(self) {}
    fn lit(_: (), v: f64) -> f64 {
        v
    }
    fn sqrt(self) -> f64 {
        f64::sqrt(self)
    }
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    fn lt(self, o: f64) -> bool {
        self < o
    }
    fn le(self, o: f64) -> bool {
        self <= o
    }
    fn eq(self, o: f64) -> bool {
        self == o
    }
    fn select(m: bool, a: f64, b: f64) -> f64 {
        if m {
            a
        } else {
            b
        }
    }
    fn to_bits(self) -> W {
        W(f64::to_bits(self))
    }
    fn from_bits(b: W) -> f64 {
        f64::from_bits(b.0)
    }
    fn if_any(m: bool, f: impl FnOnce() -> f64, otherwise: f64) -> f64 {
        if m {
            f()
        } else {
            otherwise
        }
    }
}

// ---- helpers every function may use (all built from the primitives above) ----

/// The sign bit of an `f64`.
pub const SIGN: u64 = 1 << 63;

/// `c[0] + x * (c[1] + x * (c[2] + ...))`: Horner's scheme, each step rounded.
pub fn poly<R: Real>(x: R, c: &[f64]) -> R {
    let cx = x.cx();
    let mut acc = R::lit(cx, c[c.len() - 1]);
    for &k in c[..c.len() - 1].iter().rev() {
        acc = R::lit(cx, k) + x * acc;
    }
    acc
}

/// `|x|` with the sign of `s` (`f64::copysign`).
pub fn copysign<R: Real>(x: R, s: R) -> R {
    let cx = x.cx();
    let m = R::Bits::lit(cx, SIGN);
    R::from_bits((x.to_bits() & R::Bits::lit(cx, !SIGN)) | (s.to_bits() & m))
}

/// The sign bit of `x` alone, as bits.
pub fn sign_bits<R: Real>(x: R) -> R::Bits {
    let cx = x.cx();
    x.to_bits() & R::Bits::lit(cx, SIGN)
}

/// `x` with its sign flipped where `s` has the sign bit set (`s` from [`sign_bits`]).
pub fn xor_sign<R: Real>(x: R, s: R::Bits) -> R {
    R::from_bits(x.to_bits() ^ s)
}

/// The float of an integer `0 <= b < 2^52` (exact).
pub fn from_small<R: Real>(b: R::Bits) -> R {
    let cx = b.cx();
    const TWO52: u64 = 0x4330_0000_0000_0000;
    R::from_bits(b | R::Bits::lit(cx, TWO52)) - R::lit(cx, 4503599627370496.0)
}

/// `1.5 * 2^52`: adding it to `|x| < 2^51` rounds `x` to the nearest integer (ties to even),
/// and the integer is the low bits of the sum: `sum.to_bits() - SHIFT.to_bits()`.
pub const SHIFT: f64 = 6755399441055744.0;

/// `x` rounded to the nearest integer (ties to even), for `|x| < 2^51`, with the integer's
/// two's-complement bits.
pub fn round_int<R: Real>(x: R) -> (R, R::Bits) {
    let cx = x.cx();
    let t = x + R::lit(cx, SHIFT);
    (
        t - R::lit(cx, SHIFT),
        t.to_bits() - R::Bits::lit(cx, SHIFT.to_bits()),
    )
}

/// `2^k` for a two's-complement integer `-1022 <= k <= 1023` (bits of `k`).
pub fn pow2<R: Real>(k: R::Bits) -> R {
    let cx = k.cx();
    R::from_bits((k + R::Bits::lit(cx, 1023)) << 52)
}

/// `y * 2^k` for `-2000 <= k <= 2000` (bits of `k`), rounded once: `y * 2^k1` is exact for a
/// `y` near 1 and `2^k2` finishes, so subnormal and overflowing results round correctly.
pub fn scale<R: Real>(y: R, k: R::Bits) -> R {
    let cx = y.cx();
    let k1 = ((k + R::Bits::lit(cx, 2048)) >> 1) - R::Bits::lit(cx, 1024);
    let k2 = k - k1;
    y * pow2::<R>(k1) * pow2::<R>(k2)
}

/// `x` with the low 32 bits of its significand cleared (a "high part" for splitting).
pub fn high_half<R: Real>(x: R) -> R {
    let cx = x.cx();
    R::from_bits(x.to_bits() & R::Bits::lit(cx, 0xffff_ffff_0000_0000))
}

/// Whether `x` is `+inf` or `-inf`.
pub fn is_inf<R: Real>(x: R) -> R::Mask {
    let cx = x.cx();
    x.abs().eq(R::lit(cx, f64::INFINITY))
}

/// Veltkamp's split: `x = hi + lo` with `hi` holding the top 26 bits (for `|x| < 2^996`).
pub fn split<R: Real>(x: R) -> (R, R) {
    let cx = x.cx();
    let c = R::lit(cx, 134217729.0) * x;
    let hi = c - (c - x);
    (hi, x - hi)
}

/// Dekker's exact product: `a * b = p + e` exactly (no overflow or underflow assumed).
pub fn two_prod<R: Real>(a: R, b: R) -> (R, R) {
    let p = a * b;
    let (ah, al) = split(a);
    let (bh, bl) = split(b);
    let e = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    (p, e)
}

/// Knuth's exact sum: `a + b = s + e` exactly.
pub fn two_sum<R: Real>(a: R, b: R) -> (R, R) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// Dekker's fast two-sum: `a + b = s + e` exactly when `|a| >= |b|` (or `a = 0`).
pub fn fast_two_sum<R: Real>(a: R, b: R) -> (R, R) {
    let s = a + b;
    (s, b - (s - a))
}
