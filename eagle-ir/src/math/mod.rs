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
pub mod lanes;
pub mod narrow;
pub mod power;
pub mod rounding;
pub mod trig;

pub use crate::ir::MathFn;
use lanes::Real;

/// Defines `MathFn::apply` from the lines of `crate::ir::math_library!`, the one declaration
/// of the library: each function's definition over [`Real`].
macro_rules! define_apply {
    ($(
        $(#[$doc:meta])*
        $variant:ident $kw:literal $(method $method:literal)?
            ($first:ident $(: $ft:ident)? $(, $rest:ident $(: $rt:ident)?)*) => $body:expr
            $(, f32 => $body32:expr)?;
    )*) => {
        impl MathFn {
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

            /// The function for `f32` operands (widened to `f64` lanes, as for
            /// [`MathFn::apply`]), before the caller's one rounding to `f32`: the function's
            /// `f32` definition where `math_library!` gives one (accurate to well under half
            /// an `f32` ulp, cheaper than the `f64` one), else [`MathFn::apply`].
            ///
            /// # Panics
            /// On a wrong number of operands, as [`MathFn::apply`].
            #[allow(unused_variables)]
            pub fn apply_f32<R: Real>(self, args: &[R]) -> R {
                match self {
                    $(MathFn::$variant => {
                        let &[$first $(, $rest)*] = args else {
                            panic!("`{}` takes {} operand(s), given {}", self.name(), self.arity(), args.len())
                        };
                        f32_body!($body $(, $body32)?)
                    })*
                }
            }
        }
    };
}

/// The `f32` definition of a `math_library!` line: its own, else the `f64` one.
macro_rules! f32_body {
    ($body:expr) => {
        $body
    };
    ($body:expr, $body32:expr) => {
        $body32
    };
}

crate::ir::math_library!(define_apply);

impl MathFn {
    /// The function for operands of dtype `d` (`f64` lanes either way): [`MathFn::apply_f32`]
    /// for `f32` (and the storage dtypes, computed in `f32`), [`MathFn::apply`] for `f64`.
    pub fn apply_for<R: Real>(self, d: crate::types::DType, args: &[R]) -> R {
        if d == crate::types::DType::F64 {
            self.apply(args)
        } else {
            self.apply_f32(args)
        }
    }

    /// The function on `f64` values.
    pub fn eval_f64(self, args: &[f64]) -> f64 {
        self.apply::<f64>(args)
    }

    /// The function on `f32` values: widened, computed in `f64` ([`MathFn::apply_f32`]),
    /// rounded once.
    pub fn eval_f32(self, args: &[f32]) -> f32 {
        let wide: Vec<f64> = args.iter().map(|&a| a as f64).collect();
        self.apply_f32::<f64>(&wide) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::DType;

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

    /// Sweeps every 4,099th `f32` bit pattern (about a million: both signs, subnormals to
    /// infinities) through `f`'s `f32` definition and its `f64` one rounded to `f32`: asserts
    /// they are never more than 1 ulp apart and NaN stays NaN; returns how many arguments
    /// were compared and how many results differ.
    fn sweep_against_the_f64_definition(f: MathFn) -> (u32, u32) {
        let key = |v: f32| {
            let b = v.to_bits() as i64;
            if b < 0x8000_0000 {
                b
            } else {
                0x8000_0000 - b
            }
        };
        let (mut n, mut differ) = (0u32, 0u32);
        for bits in (0..=u32::MAX).step_by(4099) {
            let x = f32::from_bits(bits);
            let got = f.eval_f32(&[x]);
            let want = f.eval_f64(&[x as f64]) as f32;
            if x.is_nan() {
                assert!(got.is_nan(), "{}({x:?})", f.name());
                continue;
            }
            n += 1;
            let d = (key(got) - key(want)).abs();
            assert!(
                d <= 1,
                "{}({x:e}): {got:e} in f32, {want:e} from f64",
                f.name()
            );
            differ += d as u32;
        }
        (n, differ)
    }

    /// `tanh`'s `f32` definition gives the `f64` definition's result rounded to `f32` (within
    /// 1 ulp of the exact value by `tools/ulp`) on every argument of the sweep; NaN stays NaN,
    /// -0 stays -0.
    #[test]
    fn tanh_f32_is_within_one_ulp_of_the_f64_definition() {
        let (n, differ) = sweep_against_the_f64_definition(MathFn::Tanh);
        assert_eq!((n > 1_000_000, differ), (true, 0), "{n} arguments");
        assert_eq!(
            MathFn::Tanh.eval_f32(&[-0.0]).to_bits(),
            (-0.0f32).to_bits()
        );
        assert_eq!(MathFn::Tanh.eval_f32(&[f32::NEG_INFINITY]), -1.0);
    }

    /// `exp`'s `f32` definition gives the `f64` definition's result rounded to `f32` on every
    /// argument of the sweep; 0 and infinity past the range, `exp(0) = 1`.
    #[test]
    fn exp_f32_is_within_one_ulp_of_the_f64_definition() {
        let (n, differ) = sweep_against_the_f64_definition(MathFn::Exp);
        assert_eq!((n > 1_000_000, differ), (true, 0), "{n} arguments");
        let e = |x: f32| MathFn::Exp.eval_f32(&[x]);
        assert_eq!((e(0.0), e(-0.0), e(1.0)), (1.0, 1.0, std::f32::consts::E));
        assert_eq!((e(89.0), e(-104.0)), (f32::INFINITY, 0.0));
        assert_eq!(
            (e(f32::INFINITY), e(f32::NEG_INFINITY)),
            (f32::INFINITY, 0.0)
        );
        assert_eq!(e(-103.0), f32::from_bits(1), "the least subnormal");
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
}
