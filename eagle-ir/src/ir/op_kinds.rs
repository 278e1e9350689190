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
//! A `val` or `vals` field may say what its operands must be: `val as index`, `vals as index`,
//! `val as ctx`, `val as bool` ([`super::Want`]). The verifier checks that for every op
//! (`OpKind::for_each_want`) before the op's own typing rule, and names the operand by its
//! place and field.
//!
//! After its fields, each variant states its text format (`"load $src[$offsets]"`, see
//! [`super::form`]), then `=> facts`, its [`super::OpInfo`] (levels, effects), an
//! expression over the field bindings (the facts' keyword is the format's,
//! `OpKind::keyword`), and ends with `typed |t| rule;`: its typing rule, an expression over
//! the field bindings and `t`, a `crate::typing::Typer` (`t.load(*src, offsets, false)`).
//! The rule is expanded in the typing layer (`crate::typing::check`, through the generated
//! `op_typing!`), which the verifier runs on every op and the builder on every op it builds.
//!
//! Derived: the enum (tuple, struct and unit variants as declared, with their docs),
//! `OpKind::info`,
//! `OpKind::operands` (every `val` and `vals` field in declaration order), `OpKind::map_values`
//! (every `val`, `vals` and `def` renamed in declaration order; nested blocks keep their handles),
//! `OpKind::blocks` and `OpKind::blocks_mut`, `OpKind::keyword`, and the text form
//! (`OpKind::write_text`, `OpKind::read_text`, which the printer and the parser call). A new op
//! kind is one declaration; these functions need no edit.

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
        $x.clone()
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

/// A field as the printer sees it ([`super::form::FieldRef`]).
macro_rules! op_field_ref {
    (val, $x:ident) => {
        $crate::ir::form::FieldRef::Val(*$x)
    };
    (vals, $x:ident) => {
        $crate::ir::form::FieldRef::Vals($x)
    };
    (def, $x:ident) => {
        $crate::ir::form::FieldRef::Def(*$x)
    };
    (block, $x:ident) => {
        $crate::ir::form::FieldRef::Block($x)
    };
    (attr, $x:ident) => {
        $crate::ir::form::FieldRef::Attr($x)
    };
}

/// Whether a field's keyword can name the op (only an attribute's: [`super::form::Attr::heads`]).
macro_rules! op_field_heads {
    (attr $t:ty) => {
        Some(<$t as $crate::ir::form::Attr>::heads as $crate::ir::form::Heads)
    };
    ($k:ident) => {
        None
    };
}

/// Reads a field by its kind.
macro_rules! op_field_read {
    ($r:ident, val) => {
        $r.val()
    };
    ($r:ident, vals) => {
        $crate::ir::form::read_vals($r)
    };
    ($r:ident, def) => {
        $r.def()
    };
    ($r:ident, block) => {
        $r.block()
    };
    ($r:ident, attr $t:ty) => {
        <$t as $crate::ir::form::Attr>::read($r)
    };
}

/// A field an absent optional tail left unread: empty for a block or a list.
macro_rules! op_field_missing {
    ($r:ident, $name:ident, block) => {
        Ok($crate::ir::Block::default())
    };
    ($r:ident, $name:ident, vals) => {
        Ok(Vec::new())
    };
    ($r:ident, $name:ident, $k:ident) => {
        Err($r.fail(
            0,
            format!(
                "internal: the text format of `{}` does not read all its fields",
                stringify!($name)
            ),
        ))
    };
}

/// The operand kind a `val`/`vals` field declares with `as kind` ([`super::Want`]).
macro_rules! op_want {
    (ctx) => {
        $crate::ir::Want::Ctx
    };
    (index) => {
        $crate::ir::Want::Index
    };
    (bool) => {
        $crate::ir::Want::Bool
    };
}

/// Calls `f` with each of a field's operands (its position among the op's operands, the
/// field's name (`"0"` for a tuple variant's), what it must be, the value) that declares what
/// it must be; counts them into `i`.
macro_rules! op_field_wants {
    ($f:ident, $i:ident, $key:tt, val, $x:ident, $w:ident) => {{
        $f($i, stringify!($key), op_want!($w), *$x);
        $i += 1;
    }};
    ($f:ident, $i:ident, $key:tt, val, $x:ident) => {
        $i += 1
    };
    ($f:ident, $i:ident, $key:tt, vals, $x:ident, $w:ident) => {
        for v in $x.iter() {
            $f($i, stringify!($key), op_want!($w), *v);
            $i += 1;
        }
    };
    ($f:ident, $i:ident, $key:tt, vals, $x:ident) => {
        $i += $x.len()
    };
    ($f:ident, $i:ident, $key:tt, $k:ident, $x:ident) => {{
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
    // The typing clauses, handed to a macro of the typing layer (`crate::typing`), which
    // expands them there: `op_typing!(cb)` calls `cb!` with every op kind's fields and rule.
    // (`$d` is a `$`, for the inner macro's own variables.)
    (@typing ($d:tt) $( $name:ident { $($key:tt : $b:ident),* } |$tv:ident| $typing:expr; )*) => {
        /// Calls macro `$cb` with every op kind's typing clause: `Name { field: binding, .. }
        /// |t| rule;` in declaration order (`crate::typing::check` is made from it).
        macro_rules! op_typing {
            ($d cb:ident) => {
                $d cb! { $( $name { $($key: $b),* } |$tv| $typing; )* }
            };
        }
        pub(crate) use op_typing;
    };
    ($(
        $(#[$m:meta])* $form:ident $name:ident {
            $($(#[$fm:meta])* . $key:tt => $b:ident : $k:ident $(($t:ty))? $(as $w:ident)?),*
        } $fmt:literal => $info:expr, typed |$tv:ident| $typing:expr;
    )*) => {
        op_kinds!(@enum [] $(
            $(#[$m])* $form $name { $($(#[$fm])* . $key => $b : $k $(($t))?),* }
        )*);
        op_kinds!(@typing ($) $( $name { $($key : $b),* } |$tv| $typing; )*);

        impl OpKind {
            /// The facts of this op (its keyword, the levels it may appear at, purity, whether
            /// it writes memory, is elementwise or reaches peers), as its declaration states
            /// them.
            #[allow(unused_variables)]
            pub fn info(&self) -> OpInfo {
                use info::*;
                const REMOTE: &str = "a remote data movement";
                let facts = match self {
                    $(OpKind::$name { $($key: $b),* } => $info,)*
                };
                OpInfo {
                    name: self.keyword(),
                    ..facts
                }
            }

            /// The op's keyword in the text form: its format's first word, or its first
            /// field's (a binary op's `add`, a tile op's `row_sum`).
            pub fn keyword(&self) -> &'static str {
                match self {
                    $(OpKind::$name { $($key: $b),* } => {
                        const WORD: &str = $crate::ir::form::leading_word($fmt);
                        if WORD.is_empty() {
                            $crate::ir::form::keyword(
                                $fmt,
                                &[$(stringify!($b)),*],
                                &[$(op_field_ref!($k, $b)),*],
                            )
                        } else {
                            WORD
                        }
                    })*
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

            /// The op with every value it names (operands and defined values) renamed by `f`,
            /// in declaration order. Nested blocks keep their handles: the ops they list are
            /// renamed where they live, in the arena.
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

            /// Calls `f(i, field, want, v)` for each operand `v` whose declaration states what it
            /// must be (`val as index`): its position among [`OpKind::operands`], its field's
            /// name (a position, `"0"`, in a tuple variant), and the kind. The verifier checks these for every op before its own rules.
            #[allow(unused_mut, unused_variables, unused_assignments)]
            pub fn for_each_want(
                &self,
                f: &mut dyn FnMut(usize, &'static str, $crate::ir::Want, Value),
            ) {
                let mut i = 0usize;
                match self {
                    $(OpKind::$name { $($key: $b),* } => {
                        $(op_field_wants!(f, i, $key, $k, $b $(, $w)?);)*
                    })*
                }
            }

            /// Every kind's text format ([`super::form`]): the kind's name, its format, and
            /// the field bindings the format names.
            pub const FORMATS: &'static [(&'static str, &'static str, &'static [&'static str])] = &[
                $((stringify!($name), $fmt, &[$(stringify!($b)),*]),)*
            ];

            /// Writes the op's text by its declared format (the line up to its result type).
            pub(crate) fn write_text(&self, w: &mut dyn $crate::ir::form::Writer) {
                match self {
                    $(OpKind::$name { $($key: $b),* } => $crate::ir::form::write(
                        $fmt,
                        &[$(stringify!($b)),*],
                        &[$(op_field_ref!($k, $b)),*],
                        w,
                    ),)*
                }
            }

            /// The kinds whose format the keyword `word` heads (one, for a keyword of the IR).
            #[cfg(test)]
            pub(crate) fn kinds_headed_by(word: &str) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(
                    if $crate::ir::form::heads($fmt, &[$(stringify!($b)),*], word, &[$(op_field_heads!($k $($t)?)),*]) {
                        out.push(stringify!($name));
                    }
                )*
                out
            }

            /// Reads the op that the keyword `word` (next in `r`, not consumed) names, by its
            /// declared format; `None` when no op has that keyword.
            #[allow(unused_mut, unused_variables, unused_assignments)]
            pub(crate) fn read_text(
                word: &str,
                r: &mut dyn $crate::ir::form::Reader,
            ) -> $crate::ir::form::ReadResult<Option<OpKind>> {
                $({
                    const NAMES: &[&str] = &[$(stringify!($b)),*];
                    if $crate::ir::form::heads($fmt, NAMES, word, &[$(op_field_heads!($k $($t)?)),*]) {
                        $(let mut $b: Option<op_field_ty!($k $($t)?)> = None;)*
                        $crate::ir::form::read($fmt, NAMES, r, &mut |i, r| {
                            let mut k = 0usize;
                            $(
                                if i == k {
                                    $b = Some(op_field_read!(r, $k $($t)?)?);
                                }
                                k += 1;
                            )*
                            Ok(())
                        })?;
                        return Ok(Some(OpKind::$name {
                            $($key: match $b {
                                Some(x) => x,
                                None => op_field_missing!(r, $name, $k)?,
                            }),*
                        }));
                    }
                })*
                Ok(None)
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

pub(crate) use {
    op_field_block, op_field_heads, op_field_map, op_field_missing, op_field_operands,
    op_field_read, op_field_ref, op_field_ty, op_field_wants, op_kinds, op_want,
};
