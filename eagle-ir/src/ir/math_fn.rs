//! The math library's functions as data: [`MathFn`] (what `OpKind::Math` holds), their
//! keywords, method spellings, operands and operand dtypes, all derived from one declaration,
//! `math_library!`. Each line of it also names the function's definition over
//! `crate::math::lanes::Real` and, where it has one, its `f32` definition over
//! `crate::math::lanes::Single`, which `crate::math` instantiates (`MathFn::apply`,
//! `MathFn::apply_f32`): the list is written once and read by both layers.

use crate::types::DType;

/// The math library, one line per function: its docs, IR keyword, the Rust method spelling
/// where it differs, its operands (a typed operand has that dtype, the others the float dtype
/// of the first), its definition over `Real` and optionally (`f32 =>`) its `f32` definition over
/// `Single` (paths relative to `crate::math`). Invoked
/// with a callback macro that receives the lines: `declare_math_fns!` here (the enum and its
/// facts), `define_apply!` in `crate::math` (the definitions).
macro_rules! math_library {
    ($callback:ident) => {
        $callback! {
                /// `x.ln()`: natural logarithm.
                Ln "ln" (x) => explog::ln(x), f32 => single::ln(x);
                /// `x.log2()`.
                Log2 "log2" (x) => expfam::log2(x);
                /// `x.log10()`.
                Log10 "log10" (x) => expfam::log10(x);
                /// `x.ln_1p()` (also `log1p(x)`): `ln(1 + x)`, accurate near 0.
                Log1p "log1p" method "ln_1p" (x) => expfam::log1p(x);
                /// `x.exp()`.
                Exp "exp" (x) => explog::exp(x), f32 => single::exp(x);
                /// `x.exp2()`: `2^x`.
                Exp2 "exp2" (x) => expfam::exp2(x);
                /// `x.exp_m1()` (also `expm1(x)`): `e^x - 1`, accurate near 0.
                Expm1 "expm1" method "exp_m1" (x) => expfam::expm1(x);
                /// `x.sin()` (radians).
                Sin "sin" (x) => trig::sin(x), f32 => single::sin(x);
                /// `x.cos()` (radians).
                Cos "cos" (x) => trig::cos(x), f32 => single::cos(x);
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
                Tanh "tanh" (x) => expfam::tanh(x), f32 => single::tanh(x);
                /// `sigmoid(x)`: the logistic function `1 / (1 + e^-x)`.
                Sigmoid "sigmoid" (x) => expfam::sigmoid(x);
                /// `erf(x)`: the error function.
                Erf "erf" (x) => erf::erf(x);
                /// `x.powf(y)`: `x^y` (C99 / Rust special cases).
                Powf "powf" (x, y) => power::pow(x, y), f32 => single::powf(x, y);
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
    };
}

pub(crate) use math_library;

/// Declares `MathFn` and its facts from `math_library!`'s lines (the definitions are
/// `crate::math`'s).
macro_rules! declare_math_fns {
    ($(
        $(#[$doc:meta])*
        $variant:ident $kw:literal $(method $method:literal)?
            ($first:ident $(: $ft:ident)? $(, $rest:ident $(: $rt:ident)?)*) => $body:expr
            $(, f32 => $body32:expr)?;
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

            /// Whether the function has its own `f32` definition (`crate::math`'s
            /// `MathFn::apply_f32`: on `f32` lanes, or for `powf` a cheaper `f64` computation);
            /// the others compute `f32` through their `f64` definition.
            pub const fn has_f32(self) -> bool {
                match self {
                    $(MathFn::$variant => {
                        let defs: &[&str] = &[$(stringify!($body32))?];
                        defs.len() == 1
                    })*
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

        }
    };
}

math_library!(declare_math_fns);
