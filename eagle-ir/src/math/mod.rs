//! eagle's math library: `ln`, `exp`, `sin`, `tanh`, `powf`, ... with the same bits on every
//! backend and at every world size.
//!
//! Each function is written once, as generic Rust over the primitives of [`lanes::Real`]
//! (the IR's own elementwise ops on `f64`, `u64` and `bool`; no `fma`, no library calls):
//! - [`MathFn::eval`] runs it on `f64` values: the reference, which the constant folder, the
//!   host interpreter and the goldens use;
//! - [`expand_function`] writes the same steps as IR ops at specialization, so the backends
//!   never see a math op: the CPU JIT and the CUDA C compute each primitive exactly as the
//!   evaluator does (`tests/eval_diff.rs`), hence the same bits.
//!
//! `f32` arguments are widened to `f64` (exactly), the `f64` function runs, and the result is
//! rounded once to `f32`: the `f32` result is within `0.5 ulp + 2^-28 ulp` of the exact value.
//! `f64` results are within 1 ulp of the exact value over the whole domain; the measured
//! maxima are in `docs/language.md` (measured by `tools/ulp`, against MPFR). Special values
//! (NaN, ±inf, ±0) are Rust std's.

// The coefficients are written with the digits of their sources (fdlibm prints 21), which
// parse to the same `f64`s; keeping them makes the source checkable (and a split constant
// such as `PIO2_HI` is the hi part of a pair, not `FRAC_PI_2` by accident).
#![allow(clippy::excessive_precision, clippy::approx_constant)]

pub mod erf;
pub mod expfam;
pub mod explog;
pub mod invtrig;
mod ir;
pub(crate) use ir::{emit_decode, emit_encode, emit_round};
pub mod lanes;
pub mod narrow;
pub mod power;
pub mod rounding;
pub mod trig;

pub use ir::expand_function;

use crate::eval::{EvalError, Scalar};
use crate::types::DType;
use lanes::Real;

/// A function of the math library. Operands and result are `f32` or `f64` (one dtype), except
/// [`MathFn::Powi`], whose exponent is `i32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MathFn {
    /// `x.ln()`: natural logarithm.
    Ln,
    /// `x.log2()`.
    Log2,
    /// `x.log10()`.
    Log10,
    /// `x.ln_1p()` (also `log1p(x)`): `ln(1 + x)`, accurate near 0.
    Log1p,
    /// `x.exp()`.
    Exp,
    /// `x.exp2()`: `2^x`.
    Exp2,
    /// `x.exp_m1()` (also `expm1(x)`): `e^x - 1`, accurate near 0.
    Expm1,
    /// `x.sin()` (radians).
    Sin,
    /// `x.cos()` (radians).
    Cos,
    /// `x.tan()` (radians).
    Tan,
    /// `x.asin()`, in `[-pi/2, pi/2]`.
    Asin,
    /// `x.acos()`, in `[0, pi]`.
    Acos,
    /// `x.atan()`, in `[-pi/2, pi/2]`.
    Atan,
    /// `y.atan2(x)`: the angle of `(x, y)`, in `[-pi, pi]`.
    Atan2,
    /// `x.sinh()`.
    Sinh,
    /// `x.cosh()`.
    Cosh,
    /// `x.tanh()`.
    Tanh,
    /// `sigmoid(x)`: the logistic function `1 / (1 + e^-x)`.
    Sigmoid,
    /// `erf(x)`: the error function.
    Erf,
    /// `x.powf(y)`: `x^y` (C99 / Rust special cases).
    Powf,
    /// `x.powi(n)` with `n: i32`: `x^n`, computed as `x.powf(n as f64)` (so within 1 ulp,
    /// unlike Rust's repeated multiplication).
    Powi,
    /// `x.cbrt()`.
    Cbrt,
    /// `x.hypot(y)`: `sqrt(x^2 + y^2)` without overflow or underflow on the way.
    Hypot,
    /// `rsqrt(x)`: `1 / sqrt(x)`.
    Rsqrt,
    /// `x.recip()`: `1 / x` (correctly rounded).
    Recip,
    /// `x.floor()` (exact).
    Floor,
    /// `x.ceil()` (exact).
    Ceil,
    /// `x.round()`: halfway cases away from zero (exact).
    Round,
    /// `x.trunc()` (exact).
    Trunc,
}

impl MathFn {
    /// Every function, in the order of `docs/language.md`.
    pub const ALL: [MathFn; 29] = [
        MathFn::Ln,
        MathFn::Log2,
        MathFn::Log10,
        MathFn::Log1p,
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Expm1,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Tan,
        MathFn::Asin,
        MathFn::Acos,
        MathFn::Atan,
        MathFn::Atan2,
        MathFn::Sinh,
        MathFn::Cosh,
        MathFn::Tanh,
        MathFn::Sigmoid,
        MathFn::Erf,
        MathFn::Powf,
        MathFn::Powi,
        MathFn::Cbrt,
        MathFn::Hypot,
        MathFn::Rsqrt,
        MathFn::Recip,
        MathFn::Floor,
        MathFn::Ceil,
        MathFn::Round,
        MathFn::Trunc,
    ];

    /// The IR keyword, which is also the free-function spelling in a kernel (`ln(x)`,
    /// `atan2(y, x)`, `powf(x, y)`).
    pub fn name(self) -> &'static str {
        use MathFn::*;
        match self {
            Ln => "ln",
            Log2 => "log2",
            Log10 => "log10",
            Log1p => "log1p",
            Exp => "exp",
            Exp2 => "exp2",
            Expm1 => "expm1",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Atan2 => "atan2",
            Sinh => "sinh",
            Cosh => "cosh",
            Tanh => "tanh",
            Sigmoid => "sigmoid",
            Erf => "erf",
            Powf => "powf",
            Powi => "powi",
            Cbrt => "cbrt",
            Hypot => "hypot",
            Rsqrt => "rsqrt",
            Recip => "recip",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            Trunc => "trunc",
        }
    }

    /// The function a kernel builds with the free call `name(args)`.
    pub fn from_name(n: &str) -> Option<MathFn> {
        MathFn::ALL.into_iter().find(|f| f.name() == n)
    }

    /// The function a kernel builds with the method call `recv.name(rest)`: the keyword, or
    /// Rust's spelling where it differs (`x.ln_1p()`, `x.exp_m1()`). The receiver is the first
    /// operand (`y.atan2(x)` is `atan2(y, x)`, as in Rust).
    pub fn from_method(n: &str) -> Option<MathFn> {
        match n {
            "ln_1p" => Some(MathFn::Log1p),
            "exp_m1" => Some(MathFn::Expm1),
            _ => MathFn::from_name(n),
        }
    }

    /// The number of operands: 2 for `atan2`, `powf`, `powi` and `hypot`, else 1 (the
    /// operands [`MathFn::signature`] lists, which names every function).
    pub fn arity(self) -> usize {
        self.signature().split(',').count()
    }

    /// The operand list as a kernel writes it, for messages (`x`, `y, x`, `x, n`).
    pub fn signature(self) -> &'static str {
        match self {
            MathFn::Atan2 => "y, x",
            MathFn::Powi => "x, n: i32",
            MathFn::Powf | MathFn::Hypot => "x, y",
            MathFn::Ln
            | MathFn::Log2
            | MathFn::Log10
            | MathFn::Log1p
            | MathFn::Exp
            | MathFn::Exp2
            | MathFn::Expm1
            | MathFn::Sin
            | MathFn::Cos
            | MathFn::Tan
            | MathFn::Asin
            | MathFn::Acos
            | MathFn::Atan
            | MathFn::Sinh
            | MathFn::Cosh
            | MathFn::Tanh
            | MathFn::Sigmoid
            | MathFn::Erf
            | MathFn::Cbrt
            | MathFn::Rsqrt
            | MathFn::Recip
            | MathFn::Floor
            | MathFn::Ceil
            | MathFn::Round
            | MathFn::Trunc => "x",
        }
    }

    /// The dtype operand `i` must have when operand 0 has the float dtype `d`: `i32` for the
    /// exponent of `powi`, else `d`.
    pub fn operand_dtype(self, i: usize, d: DType) -> DType {
        if self == MathFn::Powi && i == 1 {
            DType::I32
        } else {
            d
        }
    }

    /// The function on any [`Real`] instance (the one definition). `args` are `f64` lanes;
    /// `powi`'s exponent arrives already converted to `f64` (exactly).
    pub fn apply<R: Real>(self, args: &[R]) -> R {
        use MathFn::*;
        let x = args[0];
        match self {
            Ln => explog::ln(x),
            Log2 => expfam::log2(x),
            Log10 => expfam::log10(x),
            Log1p => expfam::log1p(x),
            Exp => explog::exp(x),
            Exp2 => expfam::exp2(x),
            Expm1 => expfam::expm1(x),
            Sin => trig::sin(x),
            Cos => trig::cos(x),
            Tan => trig::tan(x),
            Asin => invtrig::asin(x),
            Acos => invtrig::acos(x),
            Atan => invtrig::atan(x),
            Atan2 => invtrig::atan2(x, args[1]),
            Sinh => expfam::sinh(x),
            Cosh => expfam::cosh(x),
            Tanh => expfam::tanh(x),
            Sigmoid => expfam::sigmoid(x),
            Erf => erf::erf(x),
            Powf | Powi => power::pow(x, args[1]),
            Cbrt => power::cbrt(x),
            Hypot => power::hypot(x, args[1]),
            Rsqrt => rounding::rsqrt(x),
            Recip => rounding::recip(x),
            Floor => rounding::floor(x),
            Ceil => rounding::ceil(x),
            Round => rounding::round(x),
            Trunc => rounding::trunc(x),
        }
    }

    /// The function on `f64` values.
    pub fn eval_f64(self, args: &[f64]) -> f64 {
        self.apply::<f64>(args)
    }

    /// The function on `f32` values: widened, computed in `f64`, rounded once.
    pub fn eval_f32(self, args: &[f32]) -> f32 {
        let wide: Vec<f64> = args.iter().map(|&a| a as f64).collect();
        self.apply::<f64>(&wide) as f32
    }

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
        let r = self.apply::<f64>(&wide);
        Ok(match d {
            DType::F32 => Scalar::F32(r as f32),
            _ => Scalar::F64(r),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known values (correctly rounded ones from MPFR unless noted) and special cases.
    #[test]
    fn known_values_and_special_cases() {
        let f = |m: MathFn, a: &[f64]| m.eval_f64(a);
        // e = 2.71828182845904523536...: 0.68 ulp above `E`, within the 1-ulp bound.
        assert_eq!(
            f(MathFn::Exp, &[1.0]).to_bits(),
            std::f64::consts::E.to_bits() + 1
        );
        assert_eq!(f(MathFn::Ln, &[2.0]), std::f64::consts::LN_2);
        assert_eq!(f(MathFn::Sin, &[1e22]), -0.852_200_849_767_188_8);
        assert_eq!(f(MathFn::Atan2, &[1.0, 1.0]), std::f64::consts::FRAC_PI_4);
        assert_eq!(f(MathFn::Powf, &[2.0, 10.0]), 1024.0);
        assert_eq!(f(MathFn::Cbrt, &[-27.0]), -3.0);
        assert_eq!(f(MathFn::Round, &[-2.5]), -3.0);
        assert_eq!(f(MathFn::Tanh, &[-0.0]).to_bits(), (-0.0f64).to_bits());
        assert_eq!(f(MathFn::Sigmoid, &[f64::NEG_INFINITY]), 0.0);
        assert!(f(MathFn::Ln, &[-1.0]).is_nan());
        assert_eq!(f(MathFn::Erf, &[f64::INFINITY]), 1.0);
        // f32: computed in f64, rounded once.
        assert_eq!(MathFn::Exp.eval_f32(&[1.0]), std::f32::consts::E);
    }

    #[test]
    fn names_and_methods_round_trip() {
        for m in MathFn::ALL {
            assert_eq!(MathFn::from_name(m.name()), Some(m));
            assert_eq!(MathFn::from_method(m.name()), Some(m));
        }
        assert_eq!(MathFn::from_method("ln_1p"), Some(MathFn::Log1p));
        assert_eq!(MathFn::from_method("exp_m1"), Some(MathFn::Expm1));
    }

    #[test]
    fn eval_checks_operand_dtypes() {
        let ok = MathFn::Powi.eval(&[Scalar::F32(2.0), Scalar::I32(3)]);
        assert_eq!(ok, Ok(Scalar::F32(8.0)));
        assert!(MathFn::Ln.eval(&[Scalar::I32(3)]).is_err());
        assert!(MathFn::Atan2
            .eval(&[Scalar::F32(1.0), Scalar::F64(1.0)])
            .is_err());
        assert!(MathFn::Ln.eval(&[]).is_err());
    }
}
