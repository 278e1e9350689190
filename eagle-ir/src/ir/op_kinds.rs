//! The declaration form of [`super::OpKind`]: each op kind is declared once, with its fields
//! and what each field is, and the structural functions every pass uses derive from it.
//!
//! A field is one of:
//! - `val`: a value operand (`Value`), in text order;
//! - `vals`: a list of value operands (`Vec<Value>`), in text order;
//! - `def`: a value the op defines besides its result (a `for` loop's induction variable):
//!   renamed with the operands, never an operand itself;
//! - `block`: a nested block (`Block`);
//! - `attr(T)`: anything else (an op enum, a callee name, a constant), carried as is.
//!
//! Each variant ends with `=> facts;`, its [`super::OpInfo`] (keyword, levels, effects), an
//! expression over the field bindings.
//!
//! Derived: the enum (tuple, struct and unit variants as declared, with their docs),
//! `OpKind::info`,
//! `OpKind::operands` (every `val` and `vals` field in declaration order), `OpKind::map_values`
//! (every `val`, `vals` and `def` renamed, nested blocks renamed, in declaration order),
//! `OpKind::blocks` and `OpKind::blocks_mut`. A new op kind is one declaration; these functions
//! need no edit.

/// The Rust type of a field kind.
macro_rules! op_field_ty {
    (val) => { $crate::ir::Value };
    (vals) => { Vec<$crate::ir::Value> };
    (def) => { $crate::ir::Value };
    (block) => { $crate::ir::Block };
    (attr $t:ty) => { $t };
}

/// Pushes a field's operands onto `out`.
macro_rules! op_field_operands {
    ($out:ident, val, $x:ident) => {
        $out.push(*$x)
    };
    ($out:ident, vals, $x:ident) => {
        $out.extend($x.iter().copied())
    };
    ($out:ident, $k:ident, $x:ident) => {{
        let _ = $x;
    }};
}

/// A field with its values renamed by `f`.
macro_rules! op_field_map {
    ($f:ident, val, $x:ident) => {
        $f(*$x)
    };
    ($f:ident, def, $x:ident) => {
        $f(*$x)
    };
    ($f:ident, vals, $x:ident) => {
        $x.iter().map(|v| $f(*v)).collect()
    };
    ($f:ident, block, $x:ident) => {
        $x.map_values($f)
    };
    ($f:ident, attr, $x:ident) => {
        $x.clone()
    };
}

/// Pushes a field's block onto `out`.
macro_rules! op_field_block {
    ($out:ident, block, $x:ident) => {
        $out.push($x)
    };
    ($out:ident, $k:ident, $x:ident) => {{
        let _ = $x;
    }};
}

/// Declares `OpKind` (see the module docs). Each variant is `tuple`, `struct` or `unit`, and
/// each field `.key => binding: kind`: `key` is the field's name, or its position in a tuple
/// variant; `binding` names it in the derived code.
macro_rules! op_kinds {
    // The enum, accumulated variant by variant (the three forms have three syntaxes).
    (@enum [$($acc:tt)*]) => {
        /// What an op does. Operands are [`Value`]s of the enclosing function. Declared with
        /// `op_kinds!` (`ir/op_kinds.rs`), from which `operands`, `map_values` and `blocks`
        /// derive.
        #[derive(Debug, Clone, PartialEq)]
        pub enum OpKind { $($acc)* }
    };
    (@enum [$($acc:tt)*]
        $(#[$m:meta])* tuple $name:ident { $(. $key:tt => $b:ident : $k:ident $(($t:ty))?),* }
        $($rest:tt)*) => {
        op_kinds!(@enum [$($acc)* $(#[$m])* $name($(op_field_ty!($k $($t)?)),*),] $($rest)*);
    };
    (@enum [$($acc:tt)*]
        $(#[$m:meta])* struct $name:ident {
            $($(#[$fm:meta])* . $key:tt => $b:ident : $k:ident $(($t:ty))?),*
        }
        $($rest:tt)*) => {
        op_kinds!(@enum [$($acc)* $(#[$m])* $name { $($(#[$fm])* $b: op_field_ty!($k $($t)?)),* },] $($rest)*);
    };
    (@enum [$($acc:tt)*] $(#[$m:meta])* unit $name:ident {} $($rest:tt)*) => {
        op_kinds!(@enum [$($acc)* $(#[$m])* $name,] $($rest)*);
    };
    ($(
        $(#[$m:meta])* $form:ident $name:ident {
            $($(#[$fm:meta])* . $key:tt => $b:ident : $k:ident $(($t:ty))?),*
        } => $info:expr;
    )*) => {
        op_kinds!(@enum [] $(
            $(#[$m])* $form $name { $($(#[$fm])* . $key => $b : $k $(($t))?),* }
        )*);

        impl OpKind {
            /// The facts of this op (its keyword, the levels it may appear at, purity, whether
            /// it writes memory, is elementwise or reaches peers), as its declaration states
            /// them.
            #[allow(unused_variables)]
            pub fn info(&self) -> OpInfo {
                use info::*;
                const REMOTE: &str = "a remote data movement";
                match self {
                    $(OpKind::$name { $($key: $b),* } => $info,)*
                }
            }

            /// Every value operand, in text order (nested blocks excluded; a `for` loop's
            /// induction variable is defined, not used).
            #[allow(unused_mut)]
            pub fn operands(&self) -> Vec<Value> {
                let mut out = Vec::new();
                match self {
                    $(OpKind::$name { $($key: $b),* } => {
                        $(op_field_operands!(out, $k, $b);)*
                    })*
                }
                out
            }

            /// The op with every value it names (operands, defined values, nested blocks)
            /// renamed by `f`, in declaration order.
            pub fn map_values(&self, f: &mut dyn FnMut(Value) -> Value) -> OpKind {
                match self {
                    $(OpKind::$name { $($key: $b),* } => OpKind::$name {
                        $($key: op_field_map!(f, $k, $b)),*
                    },)*
                }
            }

            /// The blocks nested in the op: a `for` body, an `if`'s then and else blocks.
            #[allow(unused_mut)]
            pub fn blocks(&self) -> Vec<&Block> {
                let mut out = Vec::new();
                match self {
                    $(OpKind::$name { $($key: $b),* } => {
                        $(op_field_block!(out, $k, $b);)*
                    })*
                }
                out
            }

            /// [`OpKind::blocks`], mutable.
            #[allow(unused_mut)]
            pub fn blocks_mut(&mut self) -> Vec<&mut Block> {
                let mut out = Vec::new();
                match self {
                    $(OpKind::$name { $($key: $b),* } => {
                        $(op_field_block!(out, $k, $b);)*
                    })*
                }
                out
            }
        }
    };
}

pub(crate) use {op_field_block, op_field_map, op_field_operands, op_field_ty, op_kinds};
