//! The 16-bit float formats `f16` (IEEE binary16) and `bf16` (bfloat16): rounding to them,
//! and their bit patterns, written once over [`Real`] like the rest of the math library.
//!
//! A value of a 16-bit float dtype is computed as the `f32` holding it exactly (every `f16`
//! and every `bf16` is an `f32`). Three functions define the formats:
//! - [`round_to`]: an `f64` (an exact `f32` or any `f64`) rounded to the nearest value of the
//!   format, ties to even, overflow to infinity, NaN kept: the rounding after every op and of
//!   every cast to the format;
//! - [`decode`]: the value of a 16-bit pattern (loads, `f16::from_bits`);
//! - [`encode`]: the 16-bit pattern of a value of the format (stores, `x.to_bits()`).
//!
//! They are `half`'s conversions (`f16::from_f32`, `f16::from_f64`, `f16::to_f32`, and the
//! same for `bf16`), NaN payloads included: `tests/narrow.rs` checks them against the crate
//! on every 16-bit pattern and on a million `f32`s.

use super::lanes::{copysign, from_small, Bits, Real};

/// A 16-bit float format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// Stored significand bits (10 for `f16`, 7 for `bf16`).
    pub mbits: u32,
    /// Exponent bits (5, 8).
    pub ebits: u32,
    /// The exponent bias (15, 127).
    pub bias: i64,
}

/// IEEE 754 binary16 (`half::f16`): 1 sign, 5 exponent, 10 significand bits.
pub const F16: Format = Format {
    mbits: 10,
    ebits: 5,
    bias: 15,
};

/// bfloat16 (`half::bf16`): 1 sign, 8 exponent, 7 significand bits, `f32`'s range.
pub const BF16: Format = Format {
    mbits: 7,
    ebits: 8,
    bias: 127,
};

impl Format {
    /// The format of a 16-bit float dtype (`None` for any other dtype).
    pub fn of(d: crate::DType) -> Option<Format> {
        match d {
            crate::DType::F16 => Some(F16),
            crate::DType::BF16 => Some(BF16),
            _ => None,
        }
    }
    /// The smallest normal exponent (`1 - bias`).
    fn emin(self) -> i64 {
        1 - self.bias
    }
    /// The largest finite value (65504 for `f16`).
    pub fn max(self) -> f64 {
        let emax = (1i64 << self.ebits) - 2 - self.bias;
        (2.0 - 2f64.powi(-(self.mbits as i32))) * 2f64.powi(emax as i32)
    }
    /// The smallest normal value (`2^emin`).
    fn min_normal(self) -> f64 {
        2f64.powi(self.emin() as i32)
    }
    /// The significand mask of a pattern.
    fn mmask(self) -> u64 {
        (1 << self.mbits) - 1
    }
    /// The exponent field of an infinity or NaN, in place.
    fn emask(self) -> u64 {
        ((1 << self.ebits) - 1) << self.mbits
    }
    /// The quiet bit of a NaN pattern.
    fn quiet(self) -> u64 {
        1 << (self.mbits - 1)
    }
    /// Where the format's significand ends in an `f64`'s.
    fn shift(self) -> u32 {
        52 - self.mbits
    }
}

/// `x` rounded to the nearest value of `fmt`, ties to even; beyond the largest finite value
/// (after rounding) it is infinity, a NaN stays that NaN. The result is an `f64` holding the
/// value exactly.
pub fn round_to<R: Real>(x: R, fmt: Format) -> R {
    let a = x.abs();
    let s = fmt.shift();
    // Normal results: round the significand at bit `s`, ties to even, in the integer bits
    // (a carry moves into the exponent, as it should).
    let u = a.to_bits();
    let lsb = (u >> s) & R::Bits::lit(1);
    let bias = R::Bits::lit((1 << (s - 1)) - 1);
    let normal = R::from_bits((u + bias + lsb) & R::Bits::lit(!((1u64 << s) - 1)));
    // Subnormal results are multiples of 2^(emin - mbits): adding C, whose ulp is that
    // quantum, rounds to one (ties to even) and subtracting it is exact.
    let c = 2f64.powi((fmt.emin() - fmt.mbits as i64 + 52) as i32);
    let sub = (a + R::lit(c)) - R::lit(c);
    let r = R::select(a.lt(R::lit(fmt.min_normal())), sub, normal);
    let r = R::select(r.gt(R::lit(fmt.max())), R::lit(f64::INFINITY), r);
    let r = R::select(a.is_nan(), a, r);
    copysign(r, x)
}

/// The value of the 16-bit pattern `h` of `fmt` (the bits above 16 are zero), exactly; a NaN
/// keeps its payload and becomes quiet.
pub fn decode<R: Real>(h: R::Bits, fmt: Format) -> R {
    let s = fmt.shift();
    let sign = (h >> 15) << 63;
    let mag = h & R::Bits::lit(0x7fff);
    let e = mag >> fmt.mbits;
    let m = h & R::Bits::lit(fmt.mmask());
    let rebias = ((1023 - fmt.bias) as u64) << 52;
    let normal = R::from_bits((mag << s) + R::Bits::lit(rebias));
    let sub = from_small::<R>(m) * R::lit(2f64.powi((fmt.emin() - fmt.mbits as i64) as i32));
    let quiet = R::Bits::select(
        m.eq(R::Bits::lit(0)),
        R::Bits::lit(0),
        R::Bits::lit(1 << 51),
    );
    let special = R::from_bits(R::Bits::lit(0x7ff << 52) | (m << s) | quiet);
    let emax = (1 << fmt.ebits) - 1;
    let r = R::select(e.eq(R::Bits::lit(emax)), special, normal);
    let r = R::select(e.eq(R::Bits::lit(0)), sub, r);
    R::from_bits(r.to_bits() | sign)
}

/// The 16-bit pattern (in the low bits) of `x`, a value of `fmt` (from [`round_to`] or
/// [`decode`]), infinity or NaN; a NaN keeps the top of its payload and is quiet.
pub fn encode<R: Real>(x: R, fmt: Format) -> R::Bits {
    let s = fmt.shift();
    let sign = (x.to_bits() >> 63) << 15;
    let a = x.abs();
    let ua = a.to_bits();
    let rebias = ((1023 - fmt.bias) as u64) << fmt.mbits;
    let normal = (ua >> s) - R::Bits::lit(rebias);
    // A subnormal is an integer multiple of 2^(emin - mbits), below 2^mbits: scaled, it is
    // an integer that adding 2^52 leaves in the low bits.
    let scale = 2f64.powi((fmt.mbits as i64 - fmt.emin()) as i32);
    let two52 = 4503599627370496.0f64;
    let sub = (a * R::lit(scale) + R::lit(two52)).to_bits() - R::Bits::lit(two52.to_bits());
    let payload = R::Bits::select(
        a.is_nan(),
        R::Bits::lit(fmt.quiet()) | ((ua >> s) & R::Bits::lit(fmt.mmask())),
        R::Bits::lit(0),
    );
    let special = R::Bits::lit(fmt.emask()) | payload;
    let big = !a.le(R::lit(fmt.max()));
    let r = R::Bits::select(big, special, normal);
    let r = R::Bits::select(a.lt(R::lit(fmt.min_normal())), sub, r);
    r | sign
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::lanes::W;

    fn f16_round(x: f32) -> u16 {
        encode::<f64>(round_to(x as f64, F16), F16).0 as u16
    }

    #[test]
    fn known_values() {
        assert_eq!(F16.max(), 65504.0);
        assert_eq!(f16_round(1.0), 0x3c00);
        assert_eq!(f16_round(-2.0), 0xc000);
        assert_eq!(f16_round(65504.0), 0x7bff);
        assert_eq!(f16_round(65520.0), 0x7c00); // the tie above max rounds to infinity
        assert_eq!(f16_round(65519.0), 0x7bff);
        assert_eq!(f16_round(5.960_464_5e-8), 0x0001); // 2^-24
        assert_eq!(f16_round(2.980_232_2e-8), 0x0000); // 2^-25: a tie to even (zero)
        assert_eq!(f16_round(-0.0), 0x8000);
        assert_eq!(f16_round(f32::INFINITY), 0x7c00);
        assert_eq!(f16_round(f32::NAN), 0x7e00);
        assert_eq!(decode::<f64>(W(0x3555), F16), 0.333_251_953_125);
        assert_eq!(decode::<f64>(W(0x0001), F16), 2f64.powi(-24));
        assert_eq!(decode::<f64>(W(0xfc00), F16), f64::NEG_INFINITY);
        let one_third = round_to(1.0f64 / 3.0, BF16);
        assert_eq!(encode::<f64>(one_third, BF16).0, 0x3eab);
    }
}
