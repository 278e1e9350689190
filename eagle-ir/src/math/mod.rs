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

/// Declares the math library once: one line per function with its docs, IR keyword, the
/// Rust method spelling where it differs, its operands (a typed operand has that dtype, the
/// others the float dtype of the first) and its definition over [`Real`]. Derived: the
/// [`MathFn`] enum, `ALL`, `name`/`from_name`/`from_method`, `signature`, `arity`,
/// `operand_dtype` and `apply`, which every stage uses (the evaluator, the IR expansion, the
/// verifier, the builder and the macros).
macro_rules! math_library {
    ($(
        $(#[$doc:meta])*
        $variant:ident $kw:literal $(method $method:literal)?
            ($first:ident $(: $ft:ident)? $(, $rest:ident $(: $rt:ident)?)*) => $body:expr;
    )*) => {
        /// A function of the math library. Operands and result are `f32` or `f64` (one
        /// dtype), except [`MathFn::Powi`], whose exponent is `i32`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum MathFn {
            $($(#[$doc])* $variant,)*
        }

        impl MathFn {
            /// Every function, in the order of `docs/language.md` (the declaration's).
            pub const ALL: [MathFn; [$(stringify!($variant)),*].len()] = [$(MathFn::$variant),*];

            /// The IR keyword, which is also the free-function spelling in a kernel (`ln(x)`,
            /// `atan2(y, x)`, `powf(x, y)`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(MathFn::$variant => $kw,)*
                }
            }

            /// The function a kernel builds with the free call `name(args)`.
            pub fn from_name(n: &str) -> Option<MathFn> {
                match n {
                    $($kw => Some(MathFn::$variant),)*
                    _ => None,
                }
            }

            /// The function a kernel builds with the method call `recv.name(rest)`: the
            /// keyword, or Rust's spelling where it differs (`x.ln_1p()`, `x.exp_m1()`). The
            /// receiver is the first operand (`y.atan2(x)` is `atan2(y, x)`, as in Rust).
            pub fn from_method(n: &str) -> Option<MathFn> {
                match n {
                    $($($method => Some(MathFn::$variant),)?)*
                    _ => MathFn::from_name(n),
                }
            }

            /// The operand list as a kernel writes it, for messages (`x`, `y, x`, `x, n: i32`).
            pub const fn signature(self) -> &'static str {
                match self {
                    $(MathFn::$variant => concat!(
                        stringify!($first) $(, ": ", stringify!($ft))?
                        $(, ", ", stringify!($rest) $(, ": ", stringify!($rt))?)*
                    ),)*
                }
            }

            /// The number of operands ([`MathFn::signature`]'s).
            pub const fn arity(self) -> usize {
                match self {
                    $(MathFn::$variant => [stringify!($first) $(, stringify!($rest))*].len(),)*
                }
            }

            /// The dtype operand `i` must have when operand 0 has the float dtype `d`: the
            /// dtype the declaration names (`i32` for the exponent of `powi`), else `d`.
            pub fn operand_dtype(self, i: usize, d: DType) -> DType {
                let named: &[Option<&str>] = match self {
                    $(MathFn::$variant => &[
                        None::<&str> $(.or(Some(stringify!($ft))))?
                        $(, None::<&str> $(.or(Some(stringify!($rt))))?)*
                    ],)*
                };
                match named.get(i).copied().flatten() {
                    Some(t) => DType::from_name(t).unwrap_or(d),
                    None => d,
                }
            }

            /// The function on any [`Real`] instance (the one definition). `args` are `f64`
            /// lanes, as many as [`MathFn::arity`] says (the verifier and [`MathFn::eval`]
            /// check that); `powi`'s exponent arrives already converted to `f64` (exactly).
            ///
            /// # Panics
            /// On a wrong number of operands (an internal error: every caller checks it).
            #[allow(unused_variables)]
            pub fn apply<R: Real>(self, args: &[R]) -> R {
                match self {
                    $(MathFn::$variant => {
                        let &[$first $(, $rest)*] = args else {
                            panic!("`{}` takes {} operand(s), given {}", self.name(), self.arity(), args.len())
                        };
                        $body
                    })*
                }
            }
        }
    };
}

math_library! {
    /// `x.ln()`: natural logarithm.
    Ln "ln" (x) => explog::ln(x);
    /// `x.log2()`.
    Log2 "log2" (x) => expfam::log2(x);
    /// `x.log10()`.
    Log10 "log10" (x) => expfam::log10(x);
    /// `x.ln_1p()` (also `log1p(x)`): `ln(1 + x)`, accurate near 0.
    Log1p "log1p" method "ln_1p" (x) => expfam::log1p(x);
    /// `x.exp()`.
    Exp "exp" (x) => explog::exp(x);
    /// `x.exp2()`: `2^x`.
    Exp2 "exp2" (x) => expfam::exp2(x);
    /// `x.exp_m1()` (also `expm1(x)`): `e^x - 1`, accurate near 0.
    Expm1 "expm1" method "exp_m1" (x) => expfam::expm1(x);
    /// `x.sin()` (radians).
    Sin "sin" (x) => trig::sin(x);
    /// `x.cos()` (radians).
    Cos "cos" (x) => trig::cos(x);
    /// `x.tan()` (radians).
    Tan "tan" (x) => trig::tan(x);
    /// `x.asin()`, in `[-pi/2, pi/2]`.
    Asin "asin" (x) => invtrig::asin(x);
    /// `x.acos()`, in `[0, pi]`.
    Acos "acos" (x) => invtrig::acos(x);
    /// `x.atan()`, in `[-pi/2, pi/2]`.
    Atan "atan" (x) => invtrig::atan(x);
    /// `y.atan2(x)`: the angle of `(x, y)`, in `[-pi, pi]`.
    Atan2 "atan2" (y, x) => invtrig::atan2(y, x);
    /// `x.sinh()`.
    Sinh "sinh" (x) => expfam::sinh(x);
    /// `x.cosh()`.
    Cosh "cosh" (x) => expfam::cosh(x);
    /// `x.tanh()`.
    Tanh "tanh" (x) => expfam::tanh(x);
    /// `sigmoid(x)`: the logistic function `1 / (1 + e^-x)`.
    Sigmoid "sigmoid" (x) => expfam::sigmoid(x);
    /// `erf(x)`: the error function.
    Erf "erf" (x) => erf::erf(x);
    /// `x.powf(y)`: `x^y` (C99 / Rust special cases).
    Powf "powf" (x, y) => power::pow(x, y);
    /// `x.powi(n)` with `n: i32`: `x^n`, computed as `x.powf(n as f64)` (so within 1 ulp,
    /// unlike Rust's repeated multiplication).
    Powi "powi" (x, n: i32) => power::pow(x, n);
    /// `x.cbrt()`.
    Cbrt "cbrt" (x) => power::cbrt(x);
    /// `x.hypot(y)`: `sqrt(x^2 + y^2)` without overflow or underflow on the way.
    Hypot "hypot" (x, y) => power::hypot(x, y);
    /// `rsqrt(x)`: `1 / sqrt(x)`.
    Rsqrt "rsqrt" (x) => rounding::rsqrt(x);
    /// `x.recip()`: `1 / x` (correctly rounded).
    Recip "recip" (x) => rounding::recip(x);
    /// `x.floor()` (exact).
    Floor "floor" (x) => rounding::floor(x);
    /// `x.ceil()` (exact).
    Ceil "ceil" (x) => rounding::ceil(x);
    /// `x.round()`: halfway cases away from zero (exact).
    Round "round" (x) => rounding::round(x);
    /// `x.trunc()` (exact).
    Trunc "trunc" (x) => rounding::trunc(x);
    /// `x.copysign(y)`: `x`'s magnitude with `y`'s sign bit (exact; NaNs, zeros and
    /// infinities too).
    Copysign "copysign" (x, y) => lanes::copysign(x, y);
}

impl MathFn {
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
    fn the_declaration_gives_signatures_arities_and_operand_dtypes() {
        assert_eq!(MathFn::Powi.signature(), "x, n: i32");
        assert_eq!(MathFn::Atan2.signature(), "y, x");
        assert_eq!(MathFn::Ln.signature(), "x");
        assert_eq!((MathFn::Hypot.arity(), MathFn::Ln.arity()), (2, 1));
        assert_eq!(MathFn::Powi.operand_dtype(1, DType::F64), DType::I32);
        assert_eq!(MathFn::Powi.operand_dtype(0, DType::F32), DType::F32);
        assert_eq!(MathFn::Hypot.operand_dtype(1, DType::F32), DType::F32);
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
