//! The declaration forms of the op spec: each op enumeration is written once, as one
//! declaration per variant, and everything a stage needs to enumerate or spell it derives from
//! that declaration.
//!
//! [`enumeration!`] declares a fieldless enum (binary and unary ops, comparison predicates,
//! reduction ops, ...) from `Variant => "keyword"` lines and derives:
//! - the enum itself, with its docs and discriminants;
//! - `ALL`, every variant in declaration order (no hand-kept list to forget a variant in);
//! - `name`, the IR keyword, which the printer writes;
//! - `from_name`, its inverse, which the parser and the macros read;
//! - `variant`/`from_variant`, the Rust name a kernel writes for the op as an argument
//!   (`allreduce(.., Sum, Ring)`), and `index`, its place in `ALL`, which the macros' generated
//!   code uses to name it.
//!
//! The math library declares its functions with the same idea and more per line (operands,
//! Rust method spelling, definition): `crate::math`'s `math_library!`. The op kinds with
//! operands (`crate::OpKind`) keep their facts in the exhaustive table `OpKind::info`.

/// Declares a fieldless op enumeration once (see the module docs).
///
/// ```ignore
/// enumeration! {
///     /// Docs of the enum.
///     pub enum Example {
///         /// Docs of `A`.
///         A => "a",
///         /// Docs of `B`, whose discriminant crosses the binary interface.
///         B = 1 => "b",
///     }
/// }
/// ```
macro_rules! enumeration {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident $(= $disc:literal)? => $kw:literal,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant $(= $disc)?,
            )*
        }

        impl $name {
            /// Every variant, in declaration order (derived from the declaration).
            pub const ALL: [$name; [$(stringify!($variant)),*].len()] = [$($name::$variant),*];

            /// The keyword in the IR text (and the kernel spelling where one is a call).
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $kw,)*
                }
            }

            /// The variant whose keyword is `s` ([`Self::name`]'s inverse).
            pub fn from_name(s: &str) -> Option<$name> {
                match s {
                    $($kw => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// The Rust name of the variant, which a kernel writes where it passes the op as
            /// an argument (`Set`, `TwoPhase`, `Ge`).
            pub const fn variant(self) -> &'static str {
                match self {
                    $($name::$variant => stringify!($variant),)*
                }
            }

            /// The variant whose Rust name is `s` ([`Self::variant`]'s inverse).
            pub fn from_variant(s: &str) -> Option<$name> {
                Self::ALL.into_iter().find(|v| v.variant() == s)
            }

            /// The position of `self` in [`Self::ALL`], which generated code uses to name the
            /// variant (`ALL[i]`) without spelling it.
            pub fn index(self) -> usize {
                Self::ALL.iter().position(|v| *v == self).unwrap_or(0)
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

pub(crate) use enumeration;

/// `` `a`, `b` or `c` ``: a list of names for a message (what the parser and the macros print
/// for a choice among an enumeration's keywords or variants).
pub fn one_of<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = names.into_iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => quoted.concat(),
    }
}

#[cfg(test)]
mod tests {
    enumeration! {
        /// A test enumeration.
        enum Probe {
            /// One.
            One => "one",
            /// Two, with a discriminant.
            Two = 7 => "two",
        }
    }

    #[test]
    fn everything_derives_from_the_declaration() {
        assert_eq!(Probe::ALL, [Probe::One, Probe::Two]);
        assert_eq!(Probe::Two as u32, 7);
        for p in Probe::ALL {
            assert_eq!(Probe::from_name(p.name()), Some(p));
        }
        assert_eq!(Probe::from_name("three"), None);
        assert_eq!(Probe::One.to_string(), "one");
        assert_eq!(Probe::from_variant("Two"), Some(Probe::Two));
        assert_eq!((Probe::Two.variant(), Probe::Two.index()), ("Two", 1));
        assert_eq!(
            super::one_of(Probe::ALL.map(Probe::variant)),
            "`One` or `Two`"
        );
        assert_eq!(super::one_of(["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
