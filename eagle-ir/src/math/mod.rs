//! eagle's math library: `ln`, `exp`, `sin`, `tanh`, `powf`, ... with the same bits on every
//! backend and at every world size.
//!
//! Each function is written once per format (`f64`, and `f32` for six of them), as generic
//! Rust over the primitives of [`lanes::Float`]
//! (the IR's own elementwise ops on `f64`/`f32`, their bits and `bool`, `fma` only where its
//! result is exact: a product's error, a quotient's remainder, an exact Cody-Waite step; no
//! library calls):
//! - [`MathFn::eval`] runs it on `f64` values: the reference, which the constant folder, the
//!   host interpreter and the goldens use;
//! - [`expand_function`] writes the same steps as IR ops (at specialization, and in the CUDA
//!   backend for tiles): the CPU JIT and the CUDA C compute each primitive exactly as the
//!   evaluator does (`tests/eval_diff.rs`), hence the same bits;
//! - [`packed`] runs it on 16 lanes of plain arrays: the CPU backend's kernels for `f32`/`f64`
//!   tiles, compiled with wide vectors ([`MathFn::with_f32_definition`]), the same bits again.
//!   Every function here is `#[inline(always)]` in optimized builds (not in debug ones, whose
//!   frames would grow past a test thread's stack) so that those kernels inline it whole.
//!
//! An `f32` argument runs the function's `f32` definition where `math_library!` gives one
//! ([`single`]: `exp`, `ln`, `sin`, `cos`, `tanh` on `f32` lanes, within 1 ulp of the exact
//! value on every `f32`; `powf` in `f64` lanes with a plain `log2`/`exp2`, within `0.5 ulp` plus
//! about `2^-12 ulp`); for the others it is widened to `f64` (exactly), the `f64` function runs,
//! and the result is rounded once to `f32`: within `0.5 ulp + 2^-28 ulp` of the exact value.
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
pub mod packed;
pub mod power;
pub mod rounding;
pub mod single;
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
            /// The function on any [`Real`] instance (its `f64` definition). `args` are `f64`
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

            /// The function's own `f32` definition, on `f32` lanes, where `math_library!` gives
            /// one (within 1 ulp of the exact value, measured over every `f32` by
            /// `tools/ulp`); `None` for the others, which compute `f32` operands through
            /// [`MathFn::apply`] on their `f64` widening, rounded once ([`MathFn::eval_f32`]).
            ///
            /// # Panics
            /// On a wrong number of operands, as [`MathFn::apply`].
            #[allow(unused_variables)]
            pub fn apply_f32<S: lanes::Single>(self, args: &[S]) -> Option<S> {
                match self {
                    $(MathFn::$variant => {
                        let &[$first $(, $rest)*] = args else {
                            panic!("`{}` takes {} operand(s), given {}", self.name(), self.arity(), args.len())
                        };
                        f32_body!($body $(, $body32)?)
                    })*
                }
            }

            /// Hands `k` the function's `f64` definition over lanes `R`, as a closure of its
            /// own (one function body, no dispatch inside): `k.run` monomorphises a loop per
            /// function. The CPU backend's math kernels run it on [`packed::P64`].
            #[inline(always)]
            pub fn with_f64_definition<R: Real, K: RunDefinition<R>>(self, k: K) -> K::Out {
                match self {
                    $(MathFn::$variant => k.run(
                        #[inline(always)]
                        |args: &[R]| -> R {
                            let &[$first $(, $rest)*] = args else {
                                panic!("`{}` takes {} operand(s), given {}", self.name(), self.arity(), args.len())
                            };
                            $body
                        },
                    ),)*
                }
            }

            /// As [`MathFn::with_f64_definition`], with what an `f32` argument computes over
            /// lanes `S`: the function's own `f32` definition, else the `f64` one on the
            /// widened lanes, rounded once ([`MathFn::eval_f32`]'s result lane by lane).
            #[inline(always)]
            pub fn with_f32_definition<S: lanes::Single, K: RunDefinition<S>>(self, k: K) -> K::Out {
                match self {
                    $(MathFn::$variant => k.run(
                        #[inline(always)]
                        |args: &[S]| -> S {
                            let &[$first $(, $rest)*] = args else {
                                panic!("`{}` takes {} operand(s), given {}", self.name(), self.arity(), args.len())
                            };
                            f32_or_narrowed!(($first $(, $rest)*) $body $(, $body32)?)
                        },
                    ),)*
                }
            }
        }
    };
}

/// The `f32` result of a `math_library!` line: its own `f32` definition, else its `f64` one on
/// the widened operands, rounded once.
macro_rules! f32_or_narrowed {
    (($($a:ident),*) $body:expr) => {{
        $(let $a = $a.widen();)*
        S::narrow($body)
    }};
    (($($a:ident),*) $body:expr, $body32:expr) => {
        $body32
    };
}

/// What [`MathFn::with_f64_definition`] and [`MathFn::with_f32_definition`] hand a
/// function's definition to: `run` gets it as a closure over lanes `L` taking
/// [`MathFn::arity`] operands.
pub trait RunDefinition<L> {
    /// What `run` returns.
    type Out;
    /// Runs `def`.
    fn run(self, def: impl Fn(&[L]) -> L) -> Self::Out;
}

/// The definition applied once to its operands.
struct ApplyTo<'a, L>(&'a [L]);

impl<L> RunDefinition<L> for ApplyTo<'_, L> {
    type Out = L;
    fn run(self, def: impl Fn(&[L]) -> L) -> L {
        def(self.0)
    }
}

/// The `f32` definition of a `math_library!` line: its own, else none.
macro_rules! f32_body {
    ($body:expr) => {
        None
    };
    ($body:expr, $body32:expr) => {
        Some($body32)
    };
}

crate::ir::math_library!(define_apply);

impl MathFn {
    /// The function on `f64` values.
    pub fn eval_f64(self, args: &[f64]) -> f64 {
        self.apply::<f64>(args)
    }

    /// The function on operands of dtype `d` (`f32` or `f64`; the storage floats compute as
    /// `f32`) given as `f64` values (exactly; `powi`'s exponent as its integer value), the
    /// result as `f64` (exactly, for `f32`): the `f32` definition ([`MathFn::apply_f32`])
    /// where there is one, else the `f64` one, rounded once for `f32`.
    pub fn eval_wide(self, d: crate::types::DType, args: &[f64]) -> f64 {
        if d == crate::types::DType::F64 {
            return self.apply::<f64>(args);
        }
        if self.has_f32() {
            let narrow: Vec<f32> = args.iter().map(|&a| a as f32).collect();
            if let Some(r) = self.apply_f32::<f32>(&narrow) {
                return r as f64;
            }
        }
        self.apply::<f64>(args) as f32 as f64
    }

    /// What an `f32` argument computes, on `f32` lanes of any instance: the function's own
    /// `f32` definition, else the `f64` one widened and rounded once ([`MathFn::eval_f32`]'s
    /// result lane by lane).
    ///
    /// # Panics
    /// On a wrong number of operands, as [`MathFn::apply`].
    pub fn apply_packed_f32<S: lanes::Single>(self, args: &[S]) -> S {
        self.with_f32_definition(ApplyTo(args))
    }

    /// The function on `f32` values ([`MathFn::eval_wide`]).
    pub fn eval_f32(self, args: &[f32]) -> f32 {
        let wide: Vec<f64> = args.iter().map(|&a| a as f64).collect();
        self.eval_wide(crate::types::DType::F32, &wide) as f32
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
        // f32: its own definition (`exp`'s), rounded once at the end.
        assert_eq!(MathFn::Exp.eval_f32(&[1.0]), std::f32::consts::E);
    }

    /// The error of `got` in ulps of `f32` at `exact` (an `f64` within a tiny fraction of an
    /// `f32` ulp of the exact value), the ulp of the binade of `exact` (subnormal spacing
    /// below); 0 where both are the same infinity, infinite where only one overflows.
    fn ulps32(got: f32, exact: f64) -> f64 {
        if got as f64 == exact || (got.is_infinite() && got == exact as f32) {
            return 0.0;
        }
        if got.is_infinite() || exact.is_infinite() {
            return f64::INFINITY;
        }
        let e = exact.abs().max(f64::from(f32::MIN_POSITIVE));
        let binade = ((e.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        (got as f64 - exact).abs() / 2f64.powi(binade - 23)
    }

    /// Sweeps every 4,099th `f32` bit pattern (about a million: both signs, subnormals to
    /// infinities) through `f`'s `f32` definition; asserts NaN stays NaN and returns the
    /// largest error in `f32` ulps against the `f64` definition (within `2^-28` `f32` ulp of
    /// the exact value) and how many arguments were compared.
    fn sweep_against_the_f64_definition(f: MathFn) -> (f64, u32) {
        let (mut worst, mut n) = (0.0f64, 0u32);
        for bits in (0..=u32::MAX).step_by(4099) {
            let x = f32::from_bits(bits);
            let got = f.eval_f32(&[x]);
            let exact = f.eval_f64(&[x as f64]);
            if exact.is_nan() {
                assert!(got.is_nan(), "{}({x:?}) = {got:?}", f.name());
                continue;
            }
            n += 1;
            let e = ulps32(got, exact);
            assert!(
                e < 1.0,
                "{}({x:e}) = {got:e}, exactly {exact:e}: {e} ulp",
                f.name()
            );
            worst = worst.max(e);
        }
        (worst, n)
    }

    /// Every unary function with an `f32` definition is within 1 ulp of the exact value on a
    /// million arguments (every `f32`: [`every_f32_is_within_one_ulp`]; `powf`, the binary
    /// one: [`powf_f32_is_within_one_ulp`]).
    #[test]
    fn the_f32_definitions_are_within_one_ulp() {
        let with_f32: Vec<MathFn> = MathFn::ALL.into_iter().filter(|m| m.has_f32()).collect();
        let names: Vec<&str> = with_f32.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["ln", "exp", "sin", "cos", "tanh", "powf"]);
        // `powf`, the one binary function: `powf_f32_is_within_one_ulp`.
        for f in with_f32.into_iter().filter(|m| m.arity() == 1) {
            let (worst, n) = sweep_against_the_f64_definition(f);
            assert!(n > 500_000, "{}: {n} arguments", f.name());
            assert!(worst < 1.0, "{}: {worst} ulp", f.name());
        }
    }

    /// Every `f32` argument (`sin` and `cos`: `|x| < 512`; from 256 they are the `f64`
    /// definition rounded) of `exp`, `ln`, `sin`, `cos` and `tanh` against the `f64` definitions:
    /// within 1 ulp, NaN where the `f64` one is. Minutes on two cores in release; run by hand
    /// (`cargo test --release -p eagle-ir -- --ignored every_f32`), its maxima are in
    /// `docs/language.md`. `EAGLE_F32_ONLY=exp,tanh` checks those functions only.
    #[test]
    #[ignore = "exhaustive: minutes in release"]
    fn every_f32_is_within_one_ulp() {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
        let only = std::env::var("EAGLE_F32_ONLY").ok();
        let picked = |f: MathFn| {
            only.as_ref()
                .is_none_or(|o| o.split(',').any(|n| n == f.name()))
        };
        for (f, top) in [
            (MathFn::Exp, 0x7f80_0000u32),
            (MathFn::Ln, 0x7f80_0000),
            (MathFn::Sin, 0x4400_0000),
            (MathFn::Cos, 0x4400_0000),
            (MathFn::Tanh, 0x7f80_0000),
        ]
        .into_iter()
        .filter(|&(f, _)| picked(f))
        {
            let worst = std::thread::scope(|sc| {
                let parts: Vec<_> = (0..threads)
                    .map(|t| {
                        sc.spawn(move || {
                            let mut worst = 0.0f64;
                            for bits in (t..=top).step_by(threads as usize) {
                                for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                                    let exact = f.eval_f64(&[x as f64]);
                                    let got = f.eval_f32(&[x]);
                                    if exact.is_nan() {
                                        assert!(got.is_nan(), "{}({x:e}) = {got:e}", f.name());
                                        continue;
                                    }
                                    let e = ulps32(got, exact);
                                    assert!(e < 1.0, "{}({x:e}) = {got:e}: {e} ulp", f.name());
                                    worst = worst.max(e);
                                }
                            }
                            worst
                        })
                    })
                    .collect();
                parts
                    .into_iter()
                    .map(|p| p.join().unwrap())
                    .fold(0.0, f64::max)
            });
            println!("{}: {worst:.3} ulp", f.name());
        }
    }

    /// `powf`'s `f32` definition against the `f64` one (double-double, within `2^-28` `f32`
    /// ulp of the exact value) on 2.1 million pairs (1.5 million with a non-NaN result): `x` every 2,003rd `f32` bit pattern (both
    /// signs, subnormals, zeros, infinities, NaNs), `y` in turn an integer in `[-40, 40]`, a
    /// half-integer, a uniform value in `[-60, 60]`, one in `[-1, 1]`, a random bit pattern,
    /// `+-0`, `+-inf`; within 1 ulp, NaN exactly where the `f64` one is NaN, zeros with the
    /// `f64` one's sign, and the special cases' bits.
    #[test]
    fn powf_f32_is_within_one_ulp() {
        let mut next = lanes::tests::xorshift(0x9e37_79b9_7f4a_7c15);
        let (mut worst, mut n) = (0.0f64, 0u32);
        for bits in (0..=u32::MAX).step_by(2003) {
            let x = f32::from_bits(bits);
            let r = next();
            let u = (r >> 40) as f32 / (1u64 << 24) as f32;
            let y = match r % 8 {
                0 => ((r >> 8) % 81) as f32 - 40.0,
                1 => ((r >> 8) % 81) as f32 - 40.5,
                2 => u * 120.0 - 60.0,
                3 => u * 2.0 - 1.0,
                4 => f32::from_bits((r >> 16) as u32),
                5 => [0.0, -0.0][(r >> 8) as usize % 2],
                6 => [f32::INFINITY, f32::NEG_INFINITY][(r >> 8) as usize % 2],
                _ => u * 8.0 - 4.0,
            };
            let got = MathFn::Powf.eval_f32(&[x, y]);
            let exact = MathFn::Powf.eval_f64(&[x as f64, y as f64]);
            if exact.is_nan() {
                assert!(got.is_nan(), "powf({x:e}, {y:e}) = {got:e}");
                continue;
            }
            n += 1;
            if exact == 0.0 {
                assert_eq!(
                    got.to_bits(),
                    (exact as f32).to_bits(),
                    "powf({x:e}, {y:e})"
                );
            }
            let e = ulps32(got, exact);
            assert!(
                e < 1.0,
                "powf({x:e}, {y:e}) = {got:e}, exactly {exact:e}: {e} ulp"
            );
            worst = worst.max(e);
        }
        assert!(n > 1_400_000, "{n} pairs");
        assert!(worst < 0.51, "{worst} ulp");
        let p = |x: f32, y: f32| MathFn::Powf.eval_f32(&[x, y]);
        assert_eq!(p(-2.0, 3.0).to_bits(), (-8.0f32).to_bits());
        assert_eq!(p(2.0, -1.0), 0.5);
        assert_eq!(p(10000.0, 0.5), 100.0);
        assert_eq!(p(f32::NAN, 0.0), 1.0);
        assert_eq!(p(1.0, f32::NAN), 1.0);
        assert_eq!(p(-0.0, -3.0), f32::NEG_INFINITY);
        assert_eq!(p(2.0, 128.0), f32::INFINITY);
        assert_eq!(p(2.0, -149.0).to_bits(), 1);
        assert!(p(-2.0, 0.5).is_nan());
        // C99: (-1)^(+-inf) = 1 (NaN here before `y` was clamped); 0 or inf for other |x|.
        for (x, y, want) in [
            (-1.0, f32::INFINITY, 1.0),
            (-1.0, f32::NEG_INFINITY, 1.0),
            (0.5, f32::INFINITY, 0.0),
            (0.5, f32::NEG_INFINITY, f32::INFINITY),
            (-2.0, f32::INFINITY, f32::INFINITY),
            (-2.0, f32::NEG_INFINITY, 0.0),
            (1.0 + f32::EPSILON, 1.0e30, f32::INFINITY),
        ] {
            assert_eq!(p(x, y).to_bits(), want.to_bits(), "powf({x:e}, {y:e})");
            let wide = MathFn::Powf.eval_f64(&[x as f64, y as f64]) as f32;
            assert_eq!(wide.to_bits(), want.to_bits(), "pow({x:e}, {y:e})");
        }
    }

    /// Special values of the `f32` definitions, and the bits that must be exact.
    #[test]
    fn the_f32_definitions_keep_special_values() {
        let e = |x: f32| MathFn::Exp.eval_f32(&[x]);
        assert_eq!((e(0.0), e(-0.0), e(1.0)), (1.0, 1.0, std::f32::consts::E));
        assert_eq!((e(89.0), e(-104.0)), (f32::INFINITY, 0.0));
        assert_eq!(
            (e(f32::INFINITY), e(f32::NEG_INFINITY)),
            (f32::INFINITY, 0.0)
        );
        assert_eq!(e(-103.0), f32::from_bits(1), "the least subnormal");
        let l = |x: f32| MathFn::Ln.eval_f32(&[x]);
        assert_eq!(
            (l(1.0), l(0.0), l(f32::INFINITY)),
            (0.0, f32::NEG_INFINITY, f32::INFINITY)
        );
        assert!(l(-1.0).is_nan() && l(f32::NAN).is_nan());
        assert_eq!(
            l(f32::from_bits(1)),
            -103.27893,
            "ln of the least subnormal"
        );
        assert_eq!(l(2.0), std::f32::consts::LN_2);
        let (s, c) = (
            |x: f32| MathFn::Sin.eval_f32(&[x]),
            |x: f32| MathFn::Cos.eval_f32(&[x]),
        );
        assert_eq!(s(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!((s(f32::from_bits(1)), c(0.0)), (f32::from_bits(1), 1.0));
        assert!(s(f32::INFINITY).is_nan() && c(f32::NEG_INFINITY).is_nan() && s(f32::NAN).is_nan());
        // Past the f32 reduction, the f64 definition rounded once.
        assert_eq!(s(1e30), MathFn::Sin.eval_f64(&[1e30f32 as f64]) as f32);
        let t = |x: f32| MathFn::Tanh.eval_f32(&[x]);
        assert!(e(f32::NAN).is_nan() && t(f32::NAN).is_nan() && t(-f32::NAN).is_nan());
        assert_eq!(t(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(t(f32::NEG_INFINITY), -1.0);
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
