//! The 8-bit float element types of host tensors: OCP `f8e4m3` and `f8e5m2` (the `float8`
//! crate's [`F8E4M3`] and [`F8E5M2`]) and the OCP MX scale type [`E8M0`] (eagle's own; the
//! `float8` crate has none).
//!
//! A host value converts with the same rounding a kernel's `x as f8e4m3` uses
//! ([`eagle_ir::math::narrow::round_to`]) through [`to_f8`], so a golden computed on the host
//! has the bits the device computes. The `float8` crate's own `from_f32` is NVIDIA's
//! saturating conversion (`__NV_SATFINITE`), which a kernel writes `saturating_cast(x,
//! f8e4m3)`.

use eagle_ir::eval::narrow_float;
use eagle_ir::DType;
pub use float8::{F8E4M3, F8E5M2};

/// OCP MX E8M0, the scale of a block of MX elements: 8 exponent bits, bias 127, no sign and
/// no significand, so the values are `2^-127 ..= 2^127` (codes 0 to 254), and code 255 is
/// NaN (OCP Microscaling Formats (MX) Specification v1.0, section 5.4). A zeroed tensor holds
/// `2^-127`, the smallest scale.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct E8M0(pub u8);

impl E8M0 {
    /// `1.0` (code 127).
    pub const ONE: E8M0 = E8M0(127);
    /// The NaN (code 255).
    pub const NAN: E8M0 = E8M0(255);

    /// The scale of the bit pattern `bits`.
    pub const fn from_bits(bits: u8) -> E8M0 {
        E8M0(bits)
    }
    /// The bit pattern.
    pub const fn to_bits(self) -> u8 {
        self.0
    }
    /// `2^k` for `k` in `-127..=127`; NaN outside.
    pub fn from_exponent(k: i32) -> E8M0 {
        match u8::try_from(k + 127) {
            Ok(b) if b < 255 => E8M0(b),
            _ => E8M0::NAN,
        }
    }
    /// `x` as a kernel's `x as e8m0` converts it: rounded down to a power of two, `2^-127` for
    /// `0 <= x < 2^-127`, NaN for a negative number, an infinity or a NaN
    /// ([`eagle_ir::math::narrow::E8M0`]).
    pub fn from_f32(x: f32) -> E8M0 {
        E8M0(narrow_float(x as f64, DType::E8M0).bits() as u8)
    }
    /// The value, exactly (`2^(code - 127)`), or NaN.
    pub fn to_f32(self) -> f32 {
        eagle_ir::eval::Scalar::from_bits(self.0 as u64, DType::E8M0).widen_float()
    }
}

impl std::fmt::Debug for E8M0 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.to_f32())
    }
}

/// A host 8-bit float rounded from `x` as a kernel's `x as T` is (round to nearest even; past
/// the largest finite value NaN for `f8e4m3`, infinity for `f8e5m2`; `e8m0` rounded down):
/// `to_f8::<F8E4M3>(x)`.
pub fn to_f8<T: Float8>(x: f32) -> T {
    T::from_bits(narrow_float(x as f64, T::DTYPE).bits() as u8)
}

/// The 8-bit float element types, by their bit patterns.
pub trait Float8: crate::Element {
    /// The value of the pattern `b`.
    fn from_bits(b: u8) -> Self;
    /// The pattern.
    fn to_bits(self) -> u8;
}

macro_rules! float8_types {
    ($($t:ty => $d:expr),*) => {$(
        impl crate::Element for $t {
            const DTYPE: DType = $d;
        }
        impl Float8 for $t {
            fn from_bits(b: u8) -> Self {
                <$t>::from_bits(b)
            }
            fn to_bits(self) -> u8 {
                <$t>::to_bits(&self)
            }
        }
    )*};
}
float8_types!(F8E4M3 => DType::F8E4M3, F8E5M2 => DType::F8E5M2);

impl crate::Element for E8M0 {
    const DTYPE: DType = DType::E8M0;
}
impl Float8 for E8M0 {
    fn from_bits(b: u8) -> Self {
        E8M0(b)
    }
    fn to_bits(self) -> u8 {
        self.0
    }
}
