//! The float storage formats: `f16` (IEEE binary16), `bf16` (bfloat16), the OCP 8-bit floats
//! `f8e4m3` and `f8e5m2`, and the OCP MX scale format `e8m0`: rounding to them, and their bit
//! patterns, written once over [`Real`] like the rest of the math library.
//!
//! A value of a float storage dtype is computed as the `f32` holding it exactly (every value
//! of each format is an `f32`). Three functions define the formats:
//! - [`round_to`]: an `f64` (an exact `f32` or any `f64`) rounded to the nearest value of the
//!   format, ties to even, NaN kept: the rounding after every op and of every cast to the
//!   format. Beyond the largest finite value (after rounding) an IEEE format ([`Special::Ieee`]:
//!   `f16`, `bf16`, `f8e5m2`) gives infinity and `f8e4m3` ([`Special::NanOnly`]) gives NaN, the
//!   OCP specification's non-saturating conversions. `e8m0` ([`Special::ExponentOnly`]) rounds
//!   down to a power of two (see [`E8M0`]);
//! - [`decode`]: the value of a bit pattern (loads, `from_bits`);
//! - [`encode`]: the bit pattern of a value of the format (stores, `x.to_bits()`).
//!
//! For `f16` and `bf16` they are `half`'s conversions (`f16::from_f32`, `f16::from_f64`,
//! `f16::to_f32`, and the same for `bf16`), NaN payloads included: `tests/narrow.rs` checks
//! them against the crate on every 16-bit pattern and on a million `f32`s. `tests/fp8.rs`
//! checks the 8-bit formats' 256 patterns each against the `float8` crate (`f8e4m3`, `f8e5m2`)
//! and a table of its own (`e8m0`), and their rounding against `float8` where the rules agree.
//!
//! Source: OCP 8-bit Floating Point Specification (OFP8) rev. 1.0 (2023), tables 1 and 2 and
//! section 5 (conversions); OCP Microscaling Formats (MX) Specification v1.0, section 5.4
//! (E8M0).

use super::lanes::{copysign, from_small, Bits, Real};

/// What the top exponent of a format holds, and whether it has a sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    /// IEEE 754: a sign bit; the top exponent holds infinity (significand 0) and NaNs.
    Ieee,
    /// OCP E4M3: a sign bit; no infinities, and only `S.1111.111` is NaN, so the rest of the
    /// top exponent holds normal numbers.
    NanOnly,
    /// OCP E8M0: no sign and no significand: the value is `2^(e - bias)`, and all ones is NaN.
    ExponentOnly,
}

/// A float storage format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    /// Stored significand bits (10 for `f16`, 7 for `bf16`, 3 for `f8e4m3`, 2 for `f8e5m2`,
    /// 0 for `e8m0`).
    pub mbits: u32,
    /// Exponent bits (5, 8, 4, 5, 8).
    pub ebits: u32,
    /// The exponent bias (15, 127, 7, 15, 127).
    pub bias: i64,
    /// What the top exponent holds.
    pub special: Special,
}

/// IEEE 754 binary16 (`half::f16`): 1 sign, 5 exponent, 10 significand bits.
pub const F16: Format = Format {
    mbits: 10,
    ebits: 5,
    bias: 15,
    special: Special::Ieee,
};

/// bfloat16 (`half::bf16`): 1 sign, 8 exponent, 7 significand bits, `f32`'s range.
pub const BF16: Format = Format {
    mbits: 7,
    ebits: 8,
    bias: 127,
    special: Special::Ieee,
};

/// OCP E4M3 (`float8::F8E4M3`): 1 sign, 4 exponent, 3 significand bits, bias 7; largest
/// 448 (`S.1111.110`), smallest subnormal `2^-9`, NaN `S.1111.111`, no infinities.
pub const F8E4M3: Format = Format {
    mbits: 3,
    ebits: 4,
    bias: 7,
    special: Special::NanOnly,
};

/// OCP E5M2 (`float8::F8E5M2`): 1 sign, 5 exponent, 2 significand bits, bias 15, IEEE
/// specials; largest 57344, smallest subnormal `2^-16`.
pub const F8E5M2: Format = Format {
    mbits: 2,
    ebits: 5,
    bias: 15,
    special: Special::Ieee,
};

/// OCP MX E8M0, the scale format: 8 exponent bits, bias 127, no sign and no significand; the
/// values are `2^-127 ..= 2^127` (codes 0 to 254) and code 255 is NaN. The OCP MX
/// specification leaves the conversion to E8M0 to the implementation; eagle rounds down (the
/// exponent of the value, as MX's shared-exponent rule `floor(log2(amax))` computes it): a
/// positive finite `x` becomes the largest power of two not above it, clamped to `2^-127`
/// below; `+0` and `-0` become `2^-127`; a negative number, an infinity, a NaN and a value at
/// or above `2^128` become NaN.
pub const E8M0: Format = Format {
    mbits: 0,
    ebits: 8,
    bias: 127,
    special: Special::ExponentOnly,
};

impl Format {
    /// The format of a float storage dtype (`None` for any other dtype).
    pub fn of(d: crate::DType) -> Option<Format> {
        match d {
            crate::DType::F16 => Some(F16),
            crate::DType::BF16 => Some(BF16),
            crate::DType::F8E4M3 => Some(F8E4M3),
            crate::DType::F8E5M2 => Some(F8E5M2),
            crate::DType::E8M0 => Some(E8M0),
            _ => None,
        }
    }
    /// The width of a pattern in bits (16 or 8).
    pub fn width(self) -> u32 {
        let sign = u32::from(self.special != Special::ExponentOnly);
        sign + self.ebits + self.mbits
    }
    /// The smallest normal exponent (`1 - bias`; `-bias` for E8M0, whose code 0 is a value).
    fn emin(self) -> i64 {
        match self.special {
            Special::ExponentOnly => -self.bias,
            _ => 1 - self.bias,
        }
    }
    /// The largest finite value (65504 for `f16`, 448 for `f8e4m3`, 57344 for `f8e5m2`,
    /// `2^127` for `e8m0`).
    pub fn max(self) -> f64 {
        let top = (1i64 << self.ebits) - 1 - self.bias;
        let m = -(self.mbits as i32);
        match self.special {
            Special::Ieee => (2.0 - 2f64.powi(m)) * 2f64.powi(top as i32 - 1),
            Special::NanOnly => (2.0 - 2.0 * 2f64.powi(m)) * 2f64.powi(top as i32),
            Special::ExponentOnly => 2f64.powi(top as i32 - 1),
        }
    }
    /// The smallest normal value (`2^emin`).
    fn min_normal(self) -> f64 {
        2f64.powi(self.emin() as i32)
    }
    /// The significand mask of a pattern.
    fn mmask(self) -> u64 {
        (1 << self.mbits) - 1
    }
    /// The magnitude mask of a pattern (every bit but the sign).
    fn magmask(self) -> u64 {
        (1 << (self.ebits + self.mbits)) - 1
    }
    /// The pattern of a positive NaN: the top exponent with the quiet bit (IEEE), all ones
    /// (E4M3, E8M0).
    fn nan(self) -> u64 {
        match self.special {
            Special::Ieee => (((1 << self.ebits) - 1) << self.mbits) | (1 << (self.mbits - 1)),
            Special::NanOnly | Special::ExponentOnly => self.magmask(),
        }
    }
    /// Where the format's significand ends in an `f64`'s.
    fn shift(self) -> u32 {
        52 - self.mbits
    }
}

/// `x` rounded to the nearest value of `fmt`, ties to even; beyond the largest finite value
/// (after rounding) it is infinity (IEEE formats) or NaN (`f8e4m3`), a NaN stays that NaN.
/// `e8m0` rounds down instead ([`E8M0`]). The result is an `f64` holding the value exactly.
pub fn round_to<R: Real>(x: R, fmt: Format) -> R {
    let cx = x.cx();
    let a = x.abs();
    let u = a.to_bits();
    if fmt.special == Special::ExponentOnly {
        let down = R::from_bits(u & R::Bits::lit(cx, !((1u64 << 52) - 1)));
        let r = R::select(
            x.lt(R::lit(cx, fmt.min_normal())),
            R::lit(cx, fmt.min_normal()),
            down,
        );
        let bad = x.lt(R::lit(cx, 0.0)) | !x.lt(R::lit(cx, 2.0 * fmt.max()));
        return R::select(bad | x.is_nan(), R::lit(cx, f64::NAN), r);
    }
    let s = fmt.shift();
    // Normal results: round the significand at bit `s`, ties to even, in the integer bits
    // (a carry moves into the exponent, as it should).
    let lsb = (u >> s) & R::Bits::lit(cx, 1);
    let bias = R::Bits::lit(cx, (1 << (s - 1)) - 1);
    let normal = R::from_bits((u + bias + lsb) & R::Bits::lit(cx, !((1u64 << s) - 1)));
    // Subnormal results are multiples of 2^(emin - mbits): adding C, whose ulp is that
    // quantum, rounds to one (ties to even) and subtracting it is exact.
    let c = 2f64.powi((fmt.emin() - fmt.mbits as i64 + 52) as i32);
    let sub = (a + R::lit(cx, c)) - R::lit(cx, c);
    let r = R::select(a.lt(R::lit(cx, fmt.min_normal())), sub, normal);
    let over = match fmt.special {
        Special::NanOnly => f64::NAN,
        _ => f64::INFINITY,
    };
    let r = R::select(r.gt(R::lit(cx, fmt.max())), R::lit(cx, over), r);
    let r = R::select(a.is_nan(), a, r);
    copysign(r, x)
}

/// The value of the pattern `h` of `fmt` (the bits above its width are zero), exactly; an IEEE
/// NaN keeps its payload and becomes quiet.
pub fn decode<R: Real>(h: R::Bits, fmt: Format) -> R {
    let cx = h.cx();
    let s = fmt.shift();
    let signed = fmt.special != Special::ExponentOnly;
    let sign = signed.then(|| (h >> (fmt.width() - 1)) << 63);
    let mag = h & R::Bits::lit(cx, fmt.magmask());
    let e = mag >> fmt.mbits;
    let m = h & R::Bits::lit(cx, fmt.mmask());
    let rebias = ((1023 - fmt.bias) as u64) << 52;
    let normal = R::from_bits((mag << s) + R::Bits::lit(cx, rebias));
    let sub = signed.then(|| {
        from_small::<R>(m) * R::lit(cx, 2f64.powi((fmt.emin() - fmt.mbits as i64) as i32))
    });
    let quiet = R::Bits::select(
        m.eq(R::Bits::lit(cx, 0)),
        R::Bits::lit(cx, 0),
        R::Bits::lit(cx, 1 << 51),
    );
    let r = match fmt.special {
        Special::Ieee => {
            let special = R::from_bits(R::Bits::lit(cx, 0x7ff << 52) | (m << s) | quiet);
            let emax = (1 << fmt.ebits) - 1;
            R::select(e.eq(R::Bits::lit(cx, emax)), special, normal)
        }
        Special::NanOnly | Special::ExponentOnly => {
            let nan = R::from_bits(R::Bits::lit(cx, (0x7ff << 52) | (1 << 51)) | (m << s));
            R::select(mag.eq(R::Bits::lit(cx, fmt.magmask())), nan, normal)
        }
    };
    match (sub, sign) {
        (Some(sub), Some(sign)) => {
            let r = R::select(e.eq(R::Bits::lit(cx, 0)), sub, r);
            R::from_bits(r.to_bits() | sign)
        }
        _ => r,
    }
}

/// The pattern (in the low bits) of `x`, a value of `fmt` (from [`round_to`] or [`decode`]),
/// infinity or NaN; an IEEE NaN keeps the top of its payload and is quiet, an `f8e4m3` NaN is
/// `S.1111.111` and an `e8m0` NaN `0xff`.
pub fn encode<R: Real>(x: R, fmt: Format) -> R::Bits {
    let cx = x.cx();
    let s = fmt.shift();
    let rebias = ((1023 - fmt.bias) as u64) << fmt.mbits;
    if fmt.special == Special::ExponentOnly {
        let ua = x.abs().to_bits();
        let normal = (ua >> s) - R::Bits::lit(cx, rebias);
        let big = !x.abs().le(R::lit(cx, fmt.max()));
        return R::Bits::select(big, R::Bits::lit(cx, fmt.nan()), normal);
    }
    let sign = (x.to_bits() >> 63) << (fmt.width() - 1);
    let a = x.abs();
    let ua = a.to_bits();
    let normal = (ua >> s) - R::Bits::lit(cx, rebias);
    // A subnormal is an integer multiple of 2^(emin - mbits), below 2^mbits: scaled, it is
    // an integer that adding 2^52 leaves in the low bits.
    let scale = 2f64.powi((fmt.mbits as i64 - fmt.emin()) as i32);
    let two52 = 4503599627370496.0f64;
    let sub =
        (a * R::lit(cx, scale) + R::lit(cx, two52)).to_bits() - R::Bits::lit(cx, two52.to_bits());
    let special = match fmt.special {
        Special::Ieee => {
            let payload = R::Bits::select(
                a.is_nan(),
                R::Bits::lit(cx, 1 << (fmt.mbits - 1))
                    | ((ua >> s) & R::Bits::lit(cx, fmt.mmask())),
                R::Bits::lit(cx, 0),
            );
            let emask = ((1 << fmt.ebits) - 1) << fmt.mbits;
            R::Bits::lit(cx, emask) | payload
        }
        _ => R::Bits::lit(cx, fmt.nan()),
    };
    let big = !a.le(R::lit(cx, fmt.max()));
    let r = R::Bits::select(big, special, normal);
    let r = R::Bits::select(a.lt(R::lit(cx, fmt.min_normal())), sub, r);
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
