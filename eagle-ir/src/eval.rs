//! The reference evaluator: the executable specification of what every scalar and elementwise
//! tile op computes, for every dtype.
//!
//! Every stage that computes a value without running compiled code derives from this module:
//! the constant folder of specialization and the host interpreter call it, and the backends
//! (the CPU JIT's scalar and SIMD paths, the CUDA C emission) are tested against it bit for bit
//! by `tests/eval_diff.rs` over a table of edge values (NaN of both signs, +-0, +-inf,
//! subnormals, integer extremes, `i64` values that round differently through `f64`).
//!
//! The rules are Rust's (`rustc` on x86-64 and aarch64), with eagle's choices where Rust has
//! none:
//! - Integers wrap to their width (`wrapping_add`, `wrapping_neg`, ...); `index` is a 64-bit
//!   signed integer (comparisons and division are signed). `x / 0` and `x % 0` are
//!   [`EvalError::DivisionByZero`]; `MIN / -1` wraps to `MIN` and `MIN % -1` is 0.
//! - Floats are IEEE 754 binary32 / binary64 with round-to-nearest-even, no contraction:
//!   `fma` is the only fused op. `min`/`max` are IEEE 754-2019 `minimum`/`maximum` (NaN when
//!   either side is NaN, -0 below +0) and return the canonical NaN
//!   ([`CANONICAL_NAN_F32`] / [`CANONICAL_NAN_F64`]). The sign and payload of a NaN produced
//!   by arithmetic (`0/0`, `inf - inf`, an operand NaN passed through) are unspecified, as in
//!   Rust (RFC 3514): every backend produces *a* NaN, and tests compare such results as NaN.
//! - `as` casts are Rust's: float to int saturates and NaN becomes 0; int to float rounds once
//!   to nearest even (`i64 as f32` rounds the integer directly, never through `f64`); float to
//!   `index` saturates as `usize` (a negative float is 0), the bits held as `i64`. `x as bool`
//!   (which Rust lacks) is `x != 0`; `bool as T` is 0 or 1.
//! - The math library (`exp`, `ln`, `sin`, ...: `OpKind::Math`) is eagle's own,
//!   [`crate::math`]: one definition in these primitives, so every backend computes its bits.

use crate::ir::{BinOp, CmpOp, Const, OpKind, UnOp};
use crate::math::lanes::W;
use crate::math::narrow::{decode, encode, round_to, Format, BF16};
use crate::prim;
use crate::types::DType;
use std::fmt;

pub use crate::prim::{CANONICAL_NAN_F32, CANONICAL_NAN_F64};

/// One value of a dtype, with that dtype's exact bits.
#[derive(Debug, Clone, Copy)]
pub enum Scalar {
    /// `bool`
    Bool(bool),
    /// `i8`
    I8(i8),
    /// `u8`
    U8(u8),
    /// `i16`
    I16(i16),
    /// `u16`
    U16(u16),
    /// `i32`
    I32(i32),
    /// `i64`
    I64(i64),
    /// `u32`
    U32(u32),
    /// `u64`
    U64(u64),
    /// `f32`
    F32(f32),
    /// `f64`
    F64(f64),
    /// `f16`
    F16(half::f16),
    /// `bf16`
    BF16(half::bf16),
    /// An 8-bit float (`f8e4m3`, `f8e5m2`, `e8m0`): its dtype and bit pattern.
    F8(DType, u8),
    /// `index` (`usize` in the source; 64-bit, signed in comparisons and division)
    Index(i64),
}

/// Two scalars are equal when their dtypes and bits are (so NaN equals the same NaN, and
/// `-0.0` differs from `+0.0`).
impl PartialEq for Scalar {
    fn eq(&self, other: &Scalar) -> bool {
        self.dtype() == other.dtype() && self.bits() == other.bits()
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.to_const(), self.dtype())
    }
}

/// Why an op could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// Integer `x / 0` or `x % 0` (compiled code reports it as a run-time fault).
    DivisionByZero,
    /// The op is not defined on these dtypes (the verifier rejects such programs).
    Unsupported {
        /// The op's IR spelling.
        op: &'static str,
        /// The dtype found.
        dtype: DType,
    },
    /// The op is not elementwise (a load, a loop, a call, ...): it has no scalar meaning.
    NotElementwise,
    /// An index outside the axis it indexes (`gather`; compiled code reports it as a run-time
    /// fault).
    IndexOutOfRange {
        /// The index found.
        index: i128,
        /// The extent of the axis: indices run over `0..extent`.
        extent: u64,
    },
    /// Operands of different dtypes.
    Mismatch {
        /// The op's IR spelling.
        op: &'static str,
        /// The first operand's dtype.
        left: DType,
        /// The other operand's dtype.
        right: DType,
    },
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalError::DivisionByZero => write!(f, "integer division by zero"),
            EvalError::NotElementwise => write!(f, "not an elementwise op"),
            EvalError::IndexOutOfRange { index, extent } => {
                write!(f, "index {index} is outside 0..{extent}")
            }
            EvalError::Unsupported { op, dtype } => {
                write!(f, "`{op}` is not defined on `{dtype}`")
            }
            EvalError::Mismatch { op, left, right } => {
                write!(
                    f,
                    "`{op}` of `{left}` and `{right}`: operands must have one dtype"
                )
            }
        }
    }
}

impl std::error::Error for EvalError {}

impl Scalar {
    /// The dtype.
    pub fn dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::I8(_) => DType::I8,
            Scalar::U8(_) => DType::U8,
            Scalar::I16(_) => DType::I16,
            Scalar::U16(_) => DType::U16,
            Scalar::F16(_) => DType::F16,
            Scalar::BF16(_) => DType::BF16,
            Scalar::F8(d, _) => d,
            Scalar::I32(_) => DType::I32,
            Scalar::I64(_) => DType::I64,
            Scalar::U32(_) => DType::U32,
            Scalar::U64(_) => DType::U64,
            Scalar::F32(_) => DType::F32,
            Scalar::F64(_) => DType::F64,
            Scalar::Index(_) => DType::Index,
        }
    }

    /// The bits, zero-extended to 64 (a `bool` is 0 or 1): what the value occupies in memory,
    /// little end first.
    pub fn bits(self) -> u64 {
        match self {
            Scalar::Bool(b) => b as u64,
            Scalar::I8(v) => v as u8 as u64,
            Scalar::U8(v) => v as u64,
            Scalar::I16(v) => v as u16 as u64,
            Scalar::U16(v) => v as u64,
            Scalar::F16(v) => v.to_bits() as u64,
            Scalar::BF16(v) => v.to_bits() as u64,
            Scalar::F8(_, v) => v as u64,
            Scalar::I32(v) => v as u32 as u64,
            Scalar::I64(v) | Scalar::Index(v) => v as u64,
            Scalar::U32(v) => v as u64,
            Scalar::U64(v) => v,
            Scalar::F32(v) => v.to_bits() as u64,
            Scalar::F64(v) => v.to_bits(),
        }
    }

    /// The value of dtype `d` whose bits are the low `8 * d.size()` bits of `bits` (a `bool`
    /// is true when its byte is non-zero).
    pub fn from_bits(bits: u64, d: DType) -> Scalar {
        match d {
            DType::Bool => Scalar::Bool(bits as u8 != 0),
            DType::I8 => Scalar::I8(bits as u8 as i8),
            DType::U8 => Scalar::U8(bits as u8),
            DType::I16 => Scalar::I16(bits as u16 as i16),
            DType::U16 => Scalar::U16(bits as u16),
            DType::F16 => Scalar::F16(half::f16::from_bits(bits as u16)),
            DType::BF16 => Scalar::BF16(half::bf16::from_bits(bits as u16)),
            DType::F8E4M3 | DType::F8E5M2 | DType::E8M0 => Scalar::F8(d, bits as u8),
            DType::I32 => Scalar::I32(bits as u32 as i32),
            DType::I64 => Scalar::I64(bits as i64),
            DType::U32 => Scalar::U32(bits as u32),
            DType::U64 => Scalar::U64(bits),
            DType::F32 => Scalar::F32(f32::from_bits(bits as u32)),
            DType::F64 => Scalar::F64(f64::from_bits(bits)),
            DType::Index => Scalar::Index(bits as i64),
        }
    }

    /// The constant `c` as a value of dtype `d`: an integer is wrapped to `d`'s width, a float
    /// keeps its bits (an `f32` constant of dtype `f16`/`bf16` is rounded to it). `None` when
    /// `c`'s kind does not fit `d` (a float constant of an integer dtype, an `f64` constant
    /// of dtype `f32`).
    pub fn from_const(c: Const, d: DType) -> Option<Scalar> {
        Some(match (c, d) {
            (Const::Int(v), DType::I8) => Scalar::I8(v as i8),
            (Const::Int(v), DType::U8) => Scalar::U8(v as u8),
            (Const::Int(v), DType::I16) => Scalar::I16(v as i16),
            (Const::Int(v), DType::U16) => Scalar::U16(v as u16),
            (Const::F32(v), d) if d.is_narrow_float() => narrow_float(v as f64, d),
            (Const::Int(v), DType::I32) => Scalar::I32(v as i32),
            (Const::Int(v), DType::I64) => Scalar::I64(v as i64),
            (Const::Int(v), DType::U32) => Scalar::U32(v as u32),
            (Const::Int(v), DType::U64) => Scalar::U64(v as u64),
            (Const::Int(v), DType::Index) => Scalar::Index(v as i64),
            (Const::F32(v), DType::F32) => Scalar::F32(v),
            (Const::F64(v), DType::F64) => Scalar::F64(v),
            (Const::Bool(b), DType::Bool) => Scalar::Bool(b),
            _ => return None,
        })
    }

    /// The constant holding this value (integers as their mathematical value).
    pub fn to_const(self) -> Const {
        match self {
            Scalar::Bool(b) => Const::Bool(b),
            Scalar::I8(v) => Const::Int(v.into()),
            Scalar::U8(v) => Const::Int(v.into()),
            Scalar::I16(v) => Const::Int(v.into()),
            Scalar::U16(v) => Const::Int(v.into()),
            Scalar::F16(_) | Scalar::BF16(_) | Scalar::F8(..) => Const::F32(self.widen_float()),
            Scalar::I32(v) => Const::Int(v.into()),
            Scalar::I64(v) | Scalar::Index(v) => Const::Int(v.into()),
            Scalar::U32(v) => Const::Int(v.into()),
            Scalar::U64(v) => Const::Int(v.into()),
            Scalar::F32(v) => Const::F32(v),
            Scalar::F64(v) => Const::F64(v),
        }
    }

    /// Whether this is a NaN.
    pub fn is_nan(self) -> bool {
        match self {
            Scalar::F32(v) => v.is_nan(),
            Scalar::F64(v) => v.is_nan(),
            Scalar::F16(v) => v.is_nan(),
            Scalar::BF16(v) => v.is_nan(),
            Scalar::F8(..) => self.widen_float().is_nan(),
            _ => false,
        }
    }

    /// The `f32` holding an `f16` or `bf16` value exactly (NaN quieted, payload kept), by
    /// [`crate::math::narrow::decode`]; 0 for other dtypes.
    pub fn widen_float(self) -> f32 {
        match Format::of(self.dtype()) {
            Some(fmt) => decode::<f64>(W(self.bits()), fmt) as f32,
            None => 0.0,
        }
    }
}

/// `x` rounded to the float storage dtype `d` (`f16`, `bf16`, `f8e4m3`, `f8e5m2`, `e8m0`;
/// callers pass no other) by [`crate::math::narrow::round_to`]: ties to even (`half`'s
/// `from_f64`, and `from_f32` for an `f32` `x`), `e8m0` rounded down.
pub fn narrow_float(x: f64, d: DType) -> Scalar {
    let fmt = Format::of(d).unwrap_or(BF16);
    Scalar::from_bits(encode::<f64>(round_to(x, fmt), fmt).0, d)
}

/// The compute-dtype value of a storage-dtype scalar ([`DType::compute`]): `i8`/`i16` as
/// `i32`, `u8`/`u16` as `u32`, `f16`/`bf16` as `f32` (exactly); other scalars unchanged.
pub fn widen(a: Scalar) -> Scalar {
    match a {
        Scalar::I8(v) => Scalar::I32(v.into()),
        Scalar::I16(v) => Scalar::I32(v.into()),
        Scalar::U8(v) => Scalar::U32(v.into()),
        Scalar::U16(v) => Scalar::U32(v.into()),
        Scalar::F16(_) | Scalar::BF16(_) | Scalar::F8(..) => Scalar::F32(a.widen_float()),
        a => a,
    }
}

/// The compute-dtype result `r` of an op narrowed back to the storage dtype `d`: integers
/// wrapped to `d`'s width, floats rounded to nearest even ([`narrow_float`]).
pub(crate) fn narrow(r: Scalar, d: DType) -> Scalar {
    match (r, d) {
        (Scalar::F32(x), d) if d.is_narrow_float() => narrow_float(x as f64, d),
        (r, d) if d.is_narrow() => Scalar::from_bits(r.bits(), d),
        (r, _) => r,
    }
}

macro_rules! float_min_max {
    ($t:ty, $min:ident, $max:ident) => {
        #[doc = concat!("Float `min` on `", stringify!($t), "`, as every backend computes it: [`crate::prim::fmin`] (IEEE 754-2019 `minimum`: NaN when either side is NaN, -0 below +0; any NaN result the canonical NaN).")]
        pub fn $min(a: $t, b: $t) -> $t {
            prim::fmin(&mut prim::Values::<$t>::default(), &a, &b)
        }
        #[doc = concat!("Float `max` on `", stringify!($t), "`, as every backend computes it: [`crate::prim::fmax`] (IEEE 754-2019 `maximum`: NaN when either side is NaN, +0 above -0; any NaN result the canonical NaN).")]
        pub fn $max(a: $t, b: $t) -> $t {
            prim::fmax(&mut prim::Values::<$t>::default(), &a, &b)
        }
    };
}
float_min_max!(f32, fmin_f32, fmax_f32);
float_min_max!(f64, fmin_f64, fmax_f64);

/// Integer binary op on one integer type (wrapping; signedness from the type).
macro_rules! int_bin {
    ($op:expr, $x:expr, $y:expr) => {{
        let (x, y) = ($x, $y);
        match $op {
            BinOp::Add => x.wrapping_add(y),
            BinOp::Sub => x.wrapping_sub(y),
            BinOp::Mul => x.wrapping_mul(y),
            BinOp::Div if y == 0 => return Err(EvalError::DivisionByZero),
            BinOp::Div => prim::idiv_values(x, y),
            BinOp::Rem if y == 0 => return Err(EvalError::DivisionByZero),
            BinOp::Rem => prim::irem_values(x, y),
            BinOp::Min => x.min(y),
            BinOp::Max => x.max(y),
            BinOp::And => x & y,
            BinOp::Or => x | y,
            BinOp::Xor => x ^ y,
            BinOp::Shl => prim::shift_values(true, x, y),
            BinOp::Shr => prim::shift_values(false, x, y),
        }
    }};
}

macro_rules! float_bin {
    ($op:expr, $x:expr, $y:expr, $min:ident, $max:ident, $d:expr) => {{
        let (x, y) = ($x, $y);
        match $op {
            BinOp::Add => x + y,
            BinOp::Sub => x - y,
            BinOp::Mul => x * y,
            BinOp::Div => x / y,
            BinOp::Min => $min(x, y),
            BinOp::Max => $max(x, y),
            BinOp::Rem | BinOp::And | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr => {
                return Err(EvalError::Unsupported {
                    op: $op.name(),
                    dtype: $d,
                })
            }
        }
    }};
}

/// `a op b`. Both operands have one dtype, which is the result's.
///
/// # Errors
/// [`EvalError::DivisionByZero`] for an integer `/` or `%` by 0; [`EvalError::Unsupported`]
/// for `rem`/`and`/`or`/`xor` on floats and arithmetic on `bool`; [`EvalError::Mismatch`] for
/// operands of different dtypes.
pub fn binary(op: BinOp, a: Scalar, b: Scalar) -> Result<Scalar, EvalError> {
    use Scalar::*;
    let d = a.dtype();
    if d.is_narrow() && b.dtype() == d {
        // Computed in the compute dtype, narrowed once; a shift amount is taken modulo the
        // storage width first (Rust's `i8::wrapping_shl`).
        let b = match (op, widen(b)) {
            (BinOp::Shl | BinOp::Shr, U32(n)) => U32(n % (8 * d.size() as u32)),
            (BinOp::Shl | BinOp::Shr, I32(n)) => I32(n.rem_euclid(8 * d.size() as i32)),
            (_, w) => w,
        };
        return binary(op, widen(a), b)
            .map(|r| narrow(r, d))
            .map_err(|e| at_dtype(e, d));
    }
    Ok(match (a, b) {
        (I32(x), I32(y)) => I32(int_bin!(op, x, y)),
        (I64(x), I64(y)) => I64(int_bin!(op, x, y)),
        (Index(x), Index(y)) => Index(int_bin!(op, x, y)),
        (U32(x), U32(y)) => U32(int_bin!(op, x, y)),
        (U64(x), U64(y)) => U64(int_bin!(op, x, y)),
        (F32(x), F32(y)) => F32(float_bin!(op, x, y, fmin_f32, fmax_f32, DType::F32)),
        (F64(x), F64(y)) => F64(float_bin!(op, x, y, fmin_f64, fmax_f64, DType::F64)),
        (Bool(x), Bool(y)) => Bool(match op {
            BinOp::And => x & y,
            BinOp::Or => x | y,
            BinOp::Xor => x ^ y,
            BinOp::Add
            | BinOp::Sub
            | BinOp::Mul
            | BinOp::Div
            | BinOp::Rem
            | BinOp::Min
            | BinOp::Max
            | BinOp::Shl
            | BinOp::Shr => {
                return Err(EvalError::Unsupported {
                    op: op.name(),
                    dtype: DType::Bool,
                })
            }
        }),
        _ => {
            return Err(EvalError::Mismatch {
                op: op.name(),
                left: a.dtype(),
                right: b.dtype(),
            })
        }
    })
}

/// `e` naming the storage dtype `d` rather than the compute dtype it was found in.
fn at_dtype(e: EvalError, d: DType) -> EvalError {
    match e {
        EvalError::Unsupported { op, .. } => EvalError::Unsupported { op, dtype: d },
        e => e,
    }
}

/// `op a`, of `a`'s dtype.
///
/// # Errors
/// [`EvalError::Unsupported`] for `sqrt`/`exp` on integers or `bool`, `neg`/`abs` on `bool`.
pub fn unary(op: UnOp, a: Scalar) -> Result<Scalar, EvalError> {
    use Scalar::*;
    let bad = || EvalError::Unsupported {
        op: op.name(),
        dtype: a.dtype(),
    };
    macro_rules! int {
        ($x:expr, $abs:expr) => {
            match op {
                UnOp::Neg => $x.wrapping_neg(),
                UnOp::Not => !$x,
                UnOp::Abs => $abs,
                UnOp::Sqrt => return Err(bad()),
            }
        };
    }
    macro_rules! float {
        ($x:expr) => {
            match op {
                UnOp::Neg => -$x,
                UnOp::Abs => $x.abs(),
                UnOp::Sqrt => $x.sqrt(),
                UnOp::Not => return Err(bad()),
            }
        };
    }
    if a.dtype().is_narrow() {
        let d = a.dtype();
        return unary(op, widen(a))
            .map(|r| narrow(r, d))
            .map_err(|e| at_dtype(e, d));
    }
    Ok(match a {
        Bool(x) if op == UnOp::Not => Bool(!x),
        Bool(_) => return Err(bad()),
        I32(x) => I32(int!(x, x.wrapping_abs())),
        I64(x) => I64(int!(x, x.wrapping_abs())),
        Index(x) => Index(int!(x, x.wrapping_abs())),
        U32(x) => U32(int!(x, x)),
        U64(x) => U64(int!(x, x)),
        F32(x) => F32(float!(x)),
        F64(x) => F64(float!(x)),
        I8(_) | U8(_) | I16(_) | U16(_) | F16(_) | BF16(_) | F8(..) => {
            unreachable!("widened above")
        }
    })
}

/// `a * b + c` with one rounding (floats only).
///
/// # Errors
/// [`EvalError::Unsupported`] on integer or `bool` operands, [`EvalError::Mismatch`] for
/// operands of different dtypes.
pub fn fma(a: Scalar, b: Scalar, c: Scalar) -> Result<Scalar, EvalError> {
    let d = a.dtype();
    if d.is_narrow() && b.dtype() == d && c.dtype() == d {
        return fma(widen(a), widen(b), widen(c))
            .map(|r| narrow(r, d))
            .map_err(|e| at_dtype(e, d));
    }
    match (a, b, c) {
        (Scalar::F32(x), Scalar::F32(y), Scalar::F32(z)) => Ok(Scalar::F32(x.mul_add(y, z))),
        (Scalar::F64(x), Scalar::F64(y), Scalar::F64(z)) => Ok(Scalar::F64(x.mul_add(y, z))),
        _ if a.dtype() != b.dtype() || a.dtype() != c.dtype() => Err(EvalError::Mismatch {
            op: "fma",
            left: a.dtype(),
            right: if a.dtype() != b.dtype() {
                b.dtype()
            } else {
                c.dtype()
            },
        }),
        _ => Err(EvalError::Unsupported {
            op: "fma",
            dtype: a.dtype(),
        }),
    }
}

/// `a <op> b`: integers by their signedness (`index` signed), floats by IEEE 754 (every
/// comparison with a NaN is false except `ne`), `false < true`.
///
/// # Errors
/// [`EvalError::Mismatch`] for operands of different dtypes.
pub fn cmp(op: CmpOp, a: Scalar, b: Scalar) -> Result<bool, EvalError> {
    use Scalar::*;
    if a.dtype().is_narrow() && b.dtype() == a.dtype() {
        return cmp(op, widen(a), widen(b));
    }
    Ok(match (a, b) {
        (Bool(x), Bool(y)) => op.eval(x, y),
        (I32(x), I32(y)) => op.eval(x, y),
        (I64(x), I64(y)) | (Index(x), Index(y)) => op.eval(x, y),
        (U32(x), U32(y)) => op.eval(x, y),
        (U64(x), U64(y)) => op.eval(x, y),
        (F32(x), F32(y)) => op.eval(x, y),
        (F64(x), F64(y)) => op.eval(x, y),
        _ => {
            return Err(EvalError::Mismatch {
                op: op.name(),
                left: a.dtype(),
                right: b.dtype(),
            })
        }
    })
}

/// `select(c, a, b)`: `a` when `c` holds, else `b`.
pub fn select(c: bool, a: Scalar, b: Scalar) -> Scalar {
    if c {
        a
    } else {
        b
    }
}

/// `a as to`, with the rules in the module docs.
pub fn cast(a: Scalar, to: DType) -> Scalar {
    use Scalar::*;
    let a = widen(a);
    if to.is_narrow() {
        return match (a, to) {
            // To a float storage dtype: an integer goes through `f32`
            // (`bf16::from_f32(x as f32)`), a float rounds once.
            (F64(x), to) if to.is_narrow_float() => narrow_float(x, to),
            (a, to) if to.is_narrow_float() => narrow_float(cast(a, DType::F32).bits_f32(), to),
            // To a narrow integer: Rust's `as` (floats saturate, integers wrap).
            (F32(x), _) => float_to_int(x as f64, to),
            (F64(x), _) => float_to_int(x, to),
            (a, _) => Scalar::from_bits(a.bits(), to),
        };
    }
    match (a, to.is_int()) {
        (F32(x), true) => return float_to_int(f64::from(x), to),
        (F64(x), true) => return float_to_int(x, to),
        _ => {}
    }
    if to == DType::Bool {
        return Bool(match a {
            Bool(b) => b,
            F32(x) => x != 0.0,
            F64(x) => x != 0.0,
            other => other.bits() != 0,
        });
    }
    macro_rules! to {
        ($x:expr) => {
            match to {
                DType::I32 => I32($x as i32),
                DType::I64 => I64($x as i64),
                DType::U32 => U32($x as u32),
                DType::U64 => U64($x as u64),
                DType::F32 => F32($x as f32),
                DType::F64 => F64($x as f64),
                DType::Index => Index($x as u64 as i64),
                DType::Bool
                | DType::I8
                | DType::U8
                | DType::I16
                | DType::U16
                | DType::F16
                | DType::BF16
                | DType::F8E4M3
                | DType::F8E5M2
                | DType::E8M0 => unreachable!("handled above"),
            }
        };
    }
    match a {
        Bool(b) => to!(b as u8),
        I32(x) => to!(x),
        I64(x) => to!(x),
        // `index` converts as the signed 64-bit integer it is, except to `index` itself.
        Index(x) => match to {
            DType::Index => Index(x),
            _ => to!(x),
        },
        U32(x) => to!(x),
        U64(x) => to!(x),
        F32(x) => to!(x),
        F64(x) => to!(x),
        I8(_) | U8(_) | I16(_) | U16(_) | F16(_) | BF16(_) | F8(..) => {
            unreachable!("widened above")
        }
    }
}

/// A float `as` an integer dtype: [`prim::float_to_int`] (saturating, NaN to 0; `index` as
/// `usize`).
fn float_to_int(x: f64, to: DType) -> Scalar {
    let k = prim::float_to_int(&mut prim::Conv, &x, to);
    Scalar::from_bits(k as u64, to)
}

impl Scalar {
    /// The `f64` of an `f32` scalar (exactly); 0 for other dtypes.
    fn bits_f32(self) -> f64 {
        match self {
            Scalar::F32(x) => x as f64,
            _ => 0.0,
        }
    }
}

/// Evaluates the elementwise op `kind` (`binary`, `unary`, `fma`, `cmp`, `select`, `cast`) on
/// scalar operands given in `kind`'s operand order; `to` is the result's dtype (read by
/// `cast`). On tiles, an elementwise op is this, element by element.
///
/// # Errors
/// As [`binary`], [`unary`], [`fma`] and [`cmp`]; [`EvalError::NotElementwise`] for any
/// other op kind or a wrong number of operands.
pub fn elementwise(kind: &OpKind, args: &[Scalar], to: DType) -> Result<Scalar, EvalError> {
    Ok(match (kind, args) {
        (OpKind::Binary(op, ..), &[a, b]) => binary(*op, a, b)?,
        (OpKind::Unary(op, _), &[a]) => unary(*op, a)?,
        (OpKind::Fma(..), &[a, b, c]) => fma(a, b, c)?,
        (OpKind::Cmp(op, ..), &[a, b]) => Scalar::Bool(cmp(*op, a, b)?),
        (OpKind::Select(..), &[Scalar::Bool(c), a, b]) => select(c, a, b),
        (OpKind::Cast(_), &[a]) => cast(a, to),
        (OpKind::Bitcast(_), &[a]) => Scalar::from_bits(a.bits(), to),
        (OpKind::Math(f, _), args) => f.eval(args)?,
        _ => return Err(EvalError::NotElementwise),
    })
}

impl crate::ir::MathFn {
    /// The function on evaluator scalars (what the folder and the host interpreter call).
    ///
    /// # Errors
    /// [`EvalError::Mismatch`] for operands of the wrong dtypes or number.
    pub fn eval(self, args: &[Scalar]) -> Result<Scalar, EvalError> {
        let bad = || EvalError::Mismatch {
            op: self.name(),
            left: args.first().map_or(DType::Bool, |a| a.dtype()),
            right: args.get(1).map_or(DType::Bool, |a| a.dtype()),
        };
        if args.len() != self.arity() || !args[0].dtype().is_float() {
            return Err(bad());
        }
        let d = args[0].dtype();
        if d.is_narrow() {
            // `f16`/`bf16`: the `f32` function, rounded to the dtype.
            let w: Vec<Scalar> = args.iter().map(|&a| crate::eval::widen(a)).collect();
            return match self.eval(&w)? {
                Scalar::F32(r) => Ok(crate::eval::narrow_float(r as f64, d)),
                _ => Err(bad()),
            };
        }
        let mut wide = Vec::with_capacity(2);
        for (i, a) in args.iter().enumerate() {
            if a.dtype() != self.operand_dtype(i, d) {
                return Err(bad());
            }
            wide.push(match *a {
                Scalar::F32(v) => v as f64,
                Scalar::F64(v) => v,
                Scalar::I32(n) => n as f64,
                _ => return Err(bad()),
            });
        }
        let r = self.eval_wide(d, &wide);
        Ok(match d {
            DType::F32 => Scalar::F32(r as f32),
            _ => Scalar::F64(r),
        })
    }
}

/// The evaluator's instance on [`Scalar`]s of one dtype (integers by their signedness,
/// `f16`/`bf16` through `f32`), for the rules that must take any dtype ([`prim::arg_better`]).
pub struct Scalars(pub DType);

impl prim::Emitter for Scalars {
    type V = Scalar;
    type M = bool;
    fn is_nan(&mut self, x: &Scalar) -> bool {
        x.is_nan()
    }
    fn lt(&mut self, a: &Scalar, b: &Scalar) -> bool {
        cmp(CmpOp::Lt, *a, *b).unwrap_or(false)
    }
    fn eq(&mut self, a: &Scalar, b: &Scalar) -> bool {
        cmp(CmpOp::Eq, *a, *b).unwrap_or(false)
    }
    fn sign_bit(&mut self, x: &Scalar) -> bool {
        self.0.is_float() && (x.bits() >> (8 * self.0.size() - 1)) & 1 == 1
    }
    fn and(&mut self, a: bool, b: bool) -> bool {
        a && b
    }
    fn or(&mut self, a: bool, b: bool) -> bool {
        a || b
    }
    fn not(&mut self, a: bool) -> bool {
        !a
    }
    fn select(&mut self, m: bool, a: Scalar, b: Scalar) -> Scalar {
        if m {
            a
        } else {
            b
        }
    }
    fn canonical_nan(&mut self) -> Scalar {
        match self.0 {
            DType::F64 => Scalar::F64(f64::from_bits(CANONICAL_NAN_F64)),
            d => narrow(Scalar::F32(f32::from_bits(CANONICAL_NAN_F32)), d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_checks_operand_dtypes() {
        let ok = crate::ir::MathFn::Powi.eval(&[Scalar::F32(2.0), Scalar::I32(3)]);
        assert_eq!(ok, Ok(Scalar::F32(8.0)));
        assert!(crate::ir::MathFn::Ln.eval(&[Scalar::I32(3)]).is_err());
        assert!(crate::ir::MathFn::Atan2
            .eval(&[Scalar::F32(1.0), Scalar::F64(1.0)])
            .is_err());
        assert!(crate::ir::MathFn::Ln.eval(&[]).is_err());
    }

    #[test]
    fn i64_to_f32_rounds_once() {
        // Through f64 this is 0x5d800000; rustc (and compiled code) give 0x5d800001.
        let x = 1_152_921_573_326_323_713_i64;
        assert_eq!(cast(Scalar::I64(x), DType::F32).bits(), 0x5d80_0001);
        assert_eq!((x as f32).to_bits(), 0x5d80_0001);
    }

    #[test]
    fn min_of_nan_is_the_canonical_nan() {
        let z = Scalar::F32(0.0);
        let nan = binary(BinOp::Div, z, z).unwrap();
        assert!(nan.is_nan());
        let m = binary(BinOp::Min, nan, Scalar::F32(1.0)).unwrap();
        assert_eq!(m.bits(), CANONICAL_NAN_F32 as u64);
        let m = binary(BinOp::Max, Scalar::F64(1.0), Scalar::F64(f64::NAN)).unwrap();
        assert_eq!(m.bits(), CANONICAL_NAN_F64);
        let m = binary(BinOp::Min, Scalar::F32(0.0), Scalar::F32(-0.0)).unwrap();
        assert_eq!(m.bits(), 0x8000_0000);
    }

    #[test]
    fn integer_edges() {
        assert_eq!(
            binary(BinOp::Div, Scalar::I32(i32::MIN), Scalar::I32(-1)),
            Ok(Scalar::I32(i32::MIN))
        );
        assert_eq!(
            binary(BinOp::Rem, Scalar::I64(i64::MIN), Scalar::I64(-1)),
            Ok(Scalar::I64(0))
        );
        assert_eq!(
            binary(BinOp::Div, Scalar::U32(1), Scalar::U32(0)),
            Err(EvalError::DivisionByZero)
        );
        assert_eq!(
            binary(BinOp::Min, Scalar::U64(u64::MAX), Scalar::U64(1)),
            Ok(Scalar::U64(1))
        );
        assert_eq!(
            unary(UnOp::Abs, Scalar::I32(i32::MIN)),
            Ok(Scalar::I32(i32::MIN))
        );
        assert_eq!(
            cmp(CmpOp::Lt, Scalar::Index(-1), Scalar::Index(0)),
            Ok(true)
        );
    }

    #[test]
    fn casts_follow_rust_as() {
        assert_eq!(cast(Scalar::F32(f32::NAN), DType::I32), Scalar::I32(0));
        assert_eq!(cast(Scalar::F64(1e300), DType::I64), Scalar::I64(i64::MAX));
        assert_eq!(cast(Scalar::F32(-3.5), DType::Index), Scalar::Index(0));
        assert_eq!(
            cast(Scalar::F64(f64::INFINITY), DType::Index),
            Scalar::Index(-1)
        );
        assert_eq!(cast(Scalar::F32(f32::NAN), DType::Bool), Scalar::Bool(true));
        assert_eq!(cast(Scalar::F32(-0.0), DType::Bool), Scalar::Bool(false));
        assert_eq!(cast(Scalar::Index(-1), DType::F64), Scalar::F64(-1.0));
        assert_eq!(cast(Scalar::U64(u64::MAX), DType::I32), Scalar::I32(-1));
        assert_eq!(cast(Scalar::Bool(true), DType::F32), Scalar::F32(1.0));
    }

    #[test]
    fn mismatched_and_undefined_ops_are_errors() {
        assert_eq!(
            binary(BinOp::Add, Scalar::I32(1), Scalar::I64(1)),
            Err(EvalError::Mismatch {
                op: "add",
                left: DType::I32,
                right: DType::I64
            })
        );
        assert_eq!(
            binary(BinOp::Rem, Scalar::F32(1.0), Scalar::F32(1.0)),
            Err(EvalError::Unsupported {
                op: "rem",
                dtype: DType::F32
            })
        );
        assert!(unary(UnOp::Sqrt, Scalar::I32(4)).is_err());
        assert!(fma(Scalar::I32(1), Scalar::I32(1), Scalar::I32(1)).is_err());
    }

    #[test]
    fn bits_round_trip_every_dtype() {
        for d in DType::ALL {
            for bits in [
                0u64,
                1,
                0x8000_0000,
                0xffff_ffff,
                u64::MAX,
                0x7ff0_0000_0000_0001,
            ] {
                let s = Scalar::from_bits(bits, d);
                assert_eq!(Scalar::from_bits(s.bits(), d), s, "{d} {bits:#x}");
                assert_eq!(
                    Scalar::from_const(s.to_const(), d),
                    Some(s),
                    "{d} {bits:#x}"
                );
            }
        }
    }
}
