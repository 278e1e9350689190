//! Constant evaluation with the run-time semantics of each dtype (integers wrap to their width,
//! `f32` arithmetic rounds to `f32`). Used by constant folding.

use eagle_ir::{BinOp, CmpOp, Const, DType, UnOp};

/// The bits of the NaN that every float `min`/`max` returns when an operand is NaN: the
/// positive quiet NaN with an empty payload (`f32::NAN`). Every backend (the folder, the host
/// interpreter, the CPU JIT, the CUDA C prelude), every collective mode and the mapreduce fold
/// return these bits, so NaN results agree bit for bit (see `docs/collectives.md`).
pub const CANONICAL_NAN_F32: u32 = 0x7fc0_0000;
/// The `f64` canonical NaN (`f64::NAN`); see [`CANONICAL_NAN_F32`].
pub const CANONICAL_NAN_F64: u64 = 0x7ff8_0000_0000_0000;

macro_rules! float_min_max {
    ($t:ty, $nan:expr, $min:ident, $max:ident) => {
        #[doc = concat!("Float `min` on `", stringify!($t), "`, as every backend computes it: IEEE 754-2019 `minimum` (NaN when either side is NaN, -0 below +0), any NaN result being the canonical NaN.")]
        pub fn $min(a: $t, b: $t) -> $t {
            if a.is_nan() || b.is_nan() {
                <$t>::from_bits($nan)
            } else if a == b {
                if a.is_sign_negative() {
                    a
                } else {
                    b
                }
            } else {
                a.min(b)
            }
        }
        #[doc = concat!("Float `max` on `", stringify!($t), "`, as every backend computes it: IEEE 754-2019 `maximum` (NaN when either side is NaN, +0 above -0), any NaN result being the canonical NaN.")]
        pub fn $max(a: $t, b: $t) -> $t {
            if a.is_nan() || b.is_nan() {
                <$t>::from_bits($nan)
            } else if a == b {
                if a.is_sign_negative() {
                    b
                } else {
                    a
                }
            } else {
                a.max(b)
            }
        }
    };
}
float_min_max!(f32, CANONICAL_NAN_F32, fmin_f32, fmax_f32);
float_min_max!(f64, CANONICAL_NAN_F64, fmin_f64, fmax_f64);

/// Wraps an integer to the range of `d`.
pub fn wrap(v: i128, d: DType) -> i128 {
    match d {
        DType::I32 => v as i32 as i128,
        DType::U32 => v as u32 as i128,
        DType::I64 | DType::Index => v as i64 as i128,
        DType::U64 => v as u64 as i128,
        DType::Bool => (v != 0) as i128,
        _ => v,
    }
}

fn fl(v: f64, d: DType) -> f64 {
    if d == DType::F32 {
        v as f32 as f64
    } else {
        v
    }
}

/// `a op b` in dtype `d`, or None when the op must not be folded (division by zero is left
/// for the run-time check).
pub fn bin(op: BinOp, d: DType, a: Const, b: Const) -> Option<Const> {
    Some(match (a, b) {
        (Const::Int(x), Const::Int(y)) => {
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x.checked_mul(y)?,
                BinOp::Div => {
                    if y == 0 {
                        return None;
                    }
                    x / y
                }
                BinOp::Rem => {
                    if y == 0 {
                        return None;
                    }
                    x % y
                }
                BinOp::Min => x.min(y),
                BinOp::Max => x.max(y),
                BinOp::And => x & y,
                BinOp::Or => x | y,
                BinOp::Xor => x ^ y,
            };
            Const::Int(wrap(r, d))
        }
        (Const::Float(x), Const::Float(y)) => {
            let r = if d == DType::F32 {
                let (x, y) = (x as f32, y as f32);
                (match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::Min => fmin_f32(x, y),
                    BinOp::Max => fmax_f32(x, y),
                    _ => return None,
                }) as f64
            } else {
                match op {
                    BinOp::Add => x + y,
                    BinOp::Sub => x - y,
                    BinOp::Mul => x * y,
                    BinOp::Div => x / y,
                    BinOp::Min => fmin_f64(x, y),
                    BinOp::Max => fmax_f64(x, y),
                    _ => return None,
                }
            };
            Const::Float(r)
        }
        (Const::Bool(x), Const::Bool(y)) => Const::Bool(match op {
            BinOp::And => x & y,
            BinOp::Or => x | y,
            BinOp::Xor => x ^ y,
            _ => return None,
        }),
        _ => return None,
    })
}

/// `op a` in dtype `d`.
pub fn un(op: UnOp, d: DType, a: Const) -> Option<Const> {
    Some(match (op, a) {
        (UnOp::Neg, Const::Int(x)) => Const::Int(wrap(-x, d)),
        (UnOp::Neg, Const::Float(x)) => Const::Float(-x),
        (UnOp::Not, Const::Bool(x)) => Const::Bool(!x),
        (UnOp::Not, Const::Int(x)) => Const::Int(wrap(!x, d)),
        (UnOp::Abs, Const::Int(x)) => Const::Int(wrap(x.abs(), d)),
        (UnOp::Abs, Const::Float(x)) => Const::Float(x.abs()),
        (UnOp::Sqrt, Const::Float(x)) => Const::Float(if d == DType::F32 {
            (x as f32).sqrt() as f64
        } else {
            x.sqrt()
        }),
        _ => return None,
    })
}

/// `a cmp b`.
pub fn cmp(op: CmpOp, a: Const, b: Const) -> Option<bool> {
    Some(match (a, b) {
        (Const::Int(x), Const::Int(y)) => op.eval(x, y),
        (Const::Float(x), Const::Float(y)) => op.eval(x, y),
        (Const::Bool(x), Const::Bool(y)) => op.eval(x, y),
        _ => return None,
    })
}

/// `a as to` (Rust `as` semantics).
pub fn cast(a: Const, to: DType) -> Option<Const> {
    Some(match (a, to) {
        (Const::Int(x), d) if d.is_int() => Const::Int(wrap(x, d)),
        (Const::Int(x), d) if d.is_float() => Const::Float(fl(x as f64, d)),
        (Const::Int(x), DType::Bool) => Const::Bool(x != 0),
        (Const::Float(x), d) if d.is_float() => Const::Float(fl(x, d)),
        (Const::Float(x), d) if d.is_int() => Const::Int(match d {
            DType::I32 => x as i32 as i128,
            DType::U32 => x as u32 as i128,
            DType::U64 => x as u64 as i128,
            // `usize`: saturates as unsigned (a negative float is 0), held as i64 bits.
            DType::Index => x as u64 as i64 as i128,
            _ => x as i64 as i128,
        }),
        (Const::Bool(x), d) if d.is_int() => Const::Int(x as i128),
        (Const::Bool(x), d) if d.is_float() => Const::Float(x as u8 as f64),
        (Const::Bool(x), DType::Bool) => Const::Bool(x),
        _ => return None,
    })
}
