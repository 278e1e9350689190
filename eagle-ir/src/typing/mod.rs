//! The typing rules of every op, written once: which operands each op takes and what it
//! defines. Each op's declaration (`op_kinds!` in `crate::ir`) names its rule in a
//! `typed |t| ...` clause; [`check`] is made from those clauses (`op_typing!`) and runs the
//! rule over a [`Typer`]. The builder applies it to every op it builds (so a kernel's mistake
//! is an [`crate::IrError::Build`] at its source line) and the verifier to every op it checks
//! (IR read from text, or written by a pass); both print the same message. The rules are
//! [`Typer`]'s methods: `rules.rs` (memory, views, collectives, control flow, communication),
//! [`crate::TileOp::infer`] (tile ops) and [`result_type`] (the elementwise ops, below).
//!
//! The elementwise rules (Rust's, for the operators a kernel writes):
//! - every operand is a scalar or a tile; tiles have one shape (the builder broadcasts them
//!   first), and a scalar goes with any tile;
//! - the operands have one dtype (a `select`'s two values; a math function's operands after
//!   the first have the dtype `MathFn::operand_dtype` gives);
//! - `&`, `|`, `^` take integers or `bool`; the other binary ops take numbers, `%` and the
//!   shifts only integers; `-x` a float or a signed integer, `!x` an integer or `bool`,
//!   `sqrt` and `abs` what their names say; `fma` and the math library take floats;
//! - `select`'s condition is `bool`; a bitcast keeps the bits between a float and an integer
//!   of one width ([`DType::bitcasts_to`]);
//! - the result has the operands' shape and dtype, `bool` for a comparison and the target
//!   dtype for a conversion.

mod rules;

use crate::entity::PrimaryMap;
use crate::ir::{BinOp, CmpOp, Elementwise, Function, MathFn, Op, OpKind, ReduceOp, UnOp, Value};
use crate::types::{DType, Dim, Shape, Type};

/// The type elementwise op `kind` defines (a primitive elementwise op, [`OpKind::as_elementwise`],
/// or a math-library call), its operands' types given by `ty`; `to` is the target dtype of a
/// conversion (`cast`, `bitcast`: the result's dtype), `None` for the other ops. `None` for an
/// op that is not elementwise.
///
/// # Errors
/// The message (without the op or its location, which the caller adds) naming the operand,
/// what was expected, what was found and the fix: a wrong number of operands to a math
/// function, an operand that is not a scalar or tile, tiles of two shapes, operands of two
/// dtypes, a dtype the op is not defined on, a non-`bool` condition and a bitcast between
/// widths.
pub fn result_type<'t>(
    kind: &OpKind,
    ty: impl Fn(Value) -> &'t Type,
    to: Option<DType>,
) -> Option<Result<Type, String>> {
    let (rule, vals) = if let OpKind::Math(f, args) = kind {
        (Rule::Math(*f), args.clone())
    } else {
        match kind.as_elementwise()? {
            Elementwise::Binary(b, x, y) => (Rule::Binary(b), vec![x, y]),
            Elementwise::Unary(u, x) => (Rule::Unary(u), vec![x]),
            Elementwise::Fma(a, b, c) => (Rule::Fma, vec![a, b, c]),
            Elementwise::Cmp(c, a, b) => (Rule::Cmp(c), vec![a, b]),
            Elementwise::Select(c, a, b) => (Rule::Select, vec![c, a, b]),
            Elementwise::Cast(a) => (Rule::Cast(to?), vec![a]),
            Elementwise::Bitcast(a) => (Rule::Bitcast(to?), vec![a]),
        }
    };
    let tys: Vec<&Type> = vals.into_iter().map(ty).collect();
    Some(rule.result(&tys))
}

/// An elementwise op as its typing sees it: the op without its operands and, for a
/// conversion, the dtype it converts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// `a <op> b` (`OpKind::Binary`).
    Binary(BinOp),
    /// `<op> a` (`OpKind::Unary`).
    Unary(UnOp),
    /// `a * b + c` with one rounding (`OpKind::Fma`).
    Fma,
    /// `a <cmp> b` (`OpKind::Cmp`).
    Cmp(CmpOp),
    /// `cond ? a : b` (`OpKind::Select`).
    Select,
    /// `a as to` (`OpKind::Cast`).
    Cast(DType),
    /// The bits of `a` as `to` (`OpKind::Bitcast`).
    Bitcast(DType),
    /// A math-library function (`OpKind::Math`).
    Math(MathFn),
}

/// Whether two shapes can be equal once symbols are bound: same rank, and every pair of dims
/// equal or involving a symbol.
pub(crate) fn shapes_compatible(a: &Shape, b: &Shape) -> bool {
    a.rank() == b.rank()
        && a.0.iter().zip(&b.0).all(|(x, y)| match (x, y) {
            (Dim::Const(p), Dim::Const(q)) => p == q,
            (Dim::Sym(p), Dim::Sym(q)) => p == q,
            _ => true,
        })
}

impl Rule {
    /// The op's keyword in the IR text (`add`, `lt`, `select`, `cast`, `ln`).
    fn name(self) -> &'static str {
        match self {
            Rule::Binary(b) => b.name(),
            Rule::Unary(u) => u.name(),
            Rule::Fma => "fma",
            Rule::Cmp(c) => c.name(),
            Rule::Select => "select",
            Rule::Cast(_) => "cast",
            Rule::Bitcast(_) => "bitcast",
            Rule::Math(f) => f.name(),
        }
    }

    /// The type the op defines on operands of types `operands`, in operand order (a
    /// `select`'s condition first); the errors are [`result_type`]'s.
    fn result(self, operands: &[&Type]) -> Result<Type, String> {
        if let Rule::Math(f) = self {
            if operands.len() != f.arity() {
                return Err(format!(
                    "`{}` takes {} operand(s) ({}), found {}",
                    f.name(),
                    f.arity(),
                    f.signature(),
                    operands.len()
                ));
            }
        }
        let mut shape: Option<&Shape> = None;
        let mut dtypes = Vec::with_capacity(operands.len());
        for (i, t) in operands.iter().enumerate() {
            let (s, d) = match t {
                Type::Scalar(d) => (None, *d),
                Type::Tile(s, d) => (Some(s), *d),
                t => return Err(format!(
                    "`{}` takes scalars or tiles, found `{t}`; index it down to an element (`x[i]`; in a sample kernel a plane of width w is `x[c][s]`) or load a tile first with `load(x, offsets, shape)`",
                    self.name()
                )),
            };
            if let (Some(a), Some(b)) = (shape, s) {
                if !shapes_compatible(a, b) {
                    return Err(format!("operand {i} is a tile of shape {b} but an earlier operand has shape {a}; tiles combine only with tiles of the same shape or with scalars"));
                }
            }
            shape = shape.or(s);
            dtypes.push(d);
        }
        let d = self.dtype(&dtypes)?;
        Ok(match shape {
            Some(s) => Type::Tile(s.clone(), d),
            None => Type::Scalar(d),
        })
    }

    /// The result dtype on operand dtypes `ds` (the checks of `Rule::result` past
    /// the operands' kinds and shapes).
    fn dtype(self, ds: &[DType]) -> Result<DType, String> {
        match self {
            Rule::Binary(b) => {
                // The op's own rule on the first operand first: its fix is the one that
                // helps (`1.5 << 2` is a shift of a float before it is a mix of dtypes).
                let d = ds[0];
                let logic = matches!(b, BinOp::And | BinOp::Or | BinOp::Xor);
                if logic && d.is_float() {
                    return Err(format!(
                        "`{}` needs integer or bool operands, found `{d}`; `&`, `|` and `^` on a float's bits go through `x.to_bits()`",
                        b.name()
                    ));
                }
                if !logic && d == DType::Bool {
                    return Err(format!(
                        "`{}` needs numeric operands, found `bool`; convert with `as u32`, or combine truth values with `&`, `|` and `^`",
                        b.name()
                    ));
                }
                if b == BinOp::Rem && d.is_float() {
                    return Err("`%` on floats is not supported; Rust's `%` is `x - (x / y).trunc() * y` (up to its rounding): compute that explicitly".into());
                }
                if matches!(b, BinOp::Shl | BinOp::Shr) && !d.is_int() {
                    return Err(format!("`{}` shifts integers, found `{d}`; shift the bits of a float with `x.to_bits()`, or multiply by a power of two", b.name()));
                }
                one_dtype(ds, 0)
            }
            Rule::Unary(u) => {
                let d = one_dtype(ds, 0)?;
                let ok = match u {
                    UnOp::Neg => d.is_float() || d.is_signed(),
                    UnOp::Not => d == DType::Bool || d.is_int(),
                    UnOp::Sqrt => d.is_float(),
                    UnOp::Abs => d.is_float() || d.is_int(),
                };
                if !ok {
                    let fix = match u {
                        UnOp::Neg => "`-x` negates a signed integer or a float: convert first (`-(x as i64)`)",
                        UnOp::Not => "`!x` takes an integer or `bool`: compare a float instead (`x == 0.0`)",
                        UnOp::Sqrt => "convert to a float first (`(x as f64).sqrt()`)",
                        UnOp::Abs => "`abs` takes a number: convert first (`x as i32`)",
                    };
                    return Err(format!("`{}` is not defined on `{d}`; {fix}", u.name()));
                }
                Ok(d)
            }
            Rule::Fma => {
                let d = one_dtype(ds, 0)?;
                if !d.is_float() {
                    return Err(format!(
                        "`fma` needs float operands, found `{d}`; write `a * b + c` for integers"
                    ));
                }
                Ok(d)
            }
            Rule::Cmp(_) => one_dtype(ds, 0).map(|_| DType::Bool),
            Rule::Select => {
                if ds[0] != DType::Bool {
                    return Err(format!(
                        "operand 0 (condition) must be `bool`, found `{}`",
                        ds[0]
                    ));
                }
                one_dtype(&ds[1..], 1)
            }
            Rule::Cast(to) => one_dtype(ds, 0).map(|_| to),
            Rule::Bitcast(to) => {
                let from = one_dtype(ds, 0)?;
                if !from.bitcasts_to(to) {
                    return Err(format!(
                        "`{}::from_bits` / `to_bits` keeps the bits between a float and an integer of the same width (`f8e4m3`/`f8e5m2`/`e8m0` and `u8`, `f16`/`bf16` and `u16`, `f32` and `u32`, `f64` and `u64`), found `{}` to `{}`; convert values with `as`",
                        to.rust_name(),
                        from.rust_name(),
                        to.rust_name(),
                    ));
                }
                Ok(to)
            }
            Rule::Math(f) => {
                let d0 = ds[0];
                if !d0.is_float() {
                    return Err(format!(
                        "`{}` is defined on `f32` and `f64`, found `{d0}`; convert with `as f64`",
                        f.name()
                    ));
                }
                for (i, &d) in ds.iter().enumerate().skip(1) {
                    let want = f.operand_dtype(i, d0);
                    if d != want {
                        return Err(format!("operand {i} of `{}({})` must be `{want}`, found `{d}`; convert it with `as {}`", f.name(), f.signature(), want.rust_name()));
                    }
                }
                Ok(d0)
            }
        }
    }
}

/// The one dtype of operands `ds` (at least one), which are the op's operands from `first`
/// on.
///
/// # Errors
/// The message naming the first operand of another dtype than the first, and the fix.
fn one_dtype(ds: &[DType], first: usize) -> Result<DType, String> {
    let e = ds[0];
    match ds.iter().position(|&d| d != e) {
        None => Ok(e),
        Some(i) => Err(format!(
            "operand {} has dtype `{}` but an earlier operand has `{e}`; convert one with `as {}`",
            first + i,
            ds[i],
            e.rust_name()
        )),
    }
}

/// Whether an argument of type `a` may bind a parameter of type `p`.
pub(crate) fn types_compatible(a: &Type, p: &Type) -> bool {
    match (a, p) {
        (Type::Tensor(s, d), Type::Tensor(t, e))
        | (Type::Window(s, d), Type::Window(t, e))
        | (Type::Tile(s, d), Type::Tile(t, e)) => d == e && shapes_compatible(s, t),
        _ => a == p,
    }
}

/// What an op's typing rule reads: the op, the types of its function's values, and the
/// module's functions (a call's callee). The verifier makes one per op it checks; the builder
/// one per op it builds.
pub struct Typer<'a> {
    /// The op whose types are checked.
    pub op: &'a Op,
    values: &'a PrimaryMap<Value, Type>,
    callee: &'a dyn Fn(&str) -> Option<&'a Function>,
}

impl<'a> Typer<'a> {
    /// A typer of `op`, whose values (and result) have the types in `values`; `callee` finds a
    /// function of the module by name.
    pub fn new(
        op: &'a Op,
        values: &'a PrimaryMap<Value, Type>,
        callee: &'a dyn Fn(&str) -> Option<&'a Function>,
    ) -> Typer<'a> {
        Typer { op, values, callee }
    }

    /// The type of value `v`.
    pub fn ty(&self, v: Value) -> &'a Type {
        &self.values[v]
    }

    /// The type of the op's result, if it defines one.
    pub fn result(&self) -> Option<&'a Type> {
        self.op.result.map(|r| self.ty(r))
    }

    /// The op defines a result of type `ty`.
    ///
    /// # Errors
    /// The message naming the type wanted and found.
    pub fn expect_result(&self, ty: &Type) -> Result<(), String> {
        match self.result() {
            Some(t) if t == ty => Ok(()),
            Some(t) => Err(format!("result type must be `{ty}`, found `{t}`")),
            None => Err(format!("op must define a result of type `{ty}`")),
        }
    }

    /// Operand `what` (`v`) is a scalar (of dtype `want`, when given); returns its dtype.
    ///
    /// # Errors
    /// The message naming the operand, what it must be, what it is, and the conversion that
    /// fixes a number of another dtype.
    pub fn scalar(&self, v: Value, what: &str, want: Option<DType>) -> Result<DType, String> {
        match self.ty(v) {
            Type::Scalar(d) if want.is_none_or(|w| w == *d) => Ok(*d),
            t => {
                // A number of another dtype (a loop variable is `usize`): say how to convert.
                let fix = match (t, want) {
                    (Type::Scalar(d), Some(w)) if *d != DType::Bool && w != DType::Bool => {
                        format!("; convert it with `as {}`", w.rust_name())
                    }
                    _ => String::new(),
                };
                Err(format!(
                    "operand {what} must be {}, found `{t}`{fix}",
                    want.map(|w| format!("an `{}` scalar", w.name()))
                        .unwrap_or_else(|| "a scalar".into())
                ))
            }
        }
    }

    /// One offset (index) per dim of a buffer of rank `rank` (`what` names the buffer).
    fn offsets(&self, offsets: &[Value], rank: usize, what: &str) -> Result<(), String> {
        if offsets.len() != rank {
            return Err(format!(
                "{what} has rank {rank} but {} offset(s) were given; give one offset per dim",
                offsets.len()
            ));
        }
        // Each is an `index`: the declaration says so (`vals as index`).
        Ok(())
    }

    /// Operand `what` (`v`) is a window; its shape and dtype.
    fn window(&self, v: Value, what: &str) -> Result<(Shape, DType), String> {
        match self.ty(v) {
            Type::Window(s, d) => Ok((s.clone(), *d)),
            t => Err(format!("{what} must be a window, found `{t}`; pass a `window(buf, shape, dtype)` view from the host")),
        }
    }

    /// Operand `what` (`v`) is a tensor or a window; its shape and dtype.
    fn memory(&self, v: Value, what: &str) -> Result<(Shape, DType), String> {
        match self.ty(v) {
            Type::Window(s, d) | Type::Tensor(s, d) => Ok((s.clone(), *d)),
            t => Err(format!("{what} must be a tensor or window, found `{t}`")),
        }
    }

    /// Operand `what` (`v`) is a window (`window`, a peer's memory) or else a tensor or a
    /// window; its shape and dtype.
    fn buffer(&self, v: Value, what: &str, window: bool) -> Result<(Shape, DType), String> {
        if window {
            self.window(v, what)
        } else {
            self.memory(v, what)
        }
    }

    /// The send window and receive buffer of a collective: one shape and dtype, rank 1 or
    /// more (2 or more for `rows`: one row per rank); returns the dtype.
    fn collective_buffers(&self, src: Value, dst: Value, rows: bool) -> Result<DType, String> {
        let (ss, sd) = self.window(src, "operand 1 (send buffer)")?;
        let (ds, dd) = self.memory(dst, "operand 2 (receive buffer)")?;
        let want_rank = if rows { 2 } else { 1 };
        if ss.rank() < want_rank {
            return Err(format!(
                "the send buffer must have rank {want_rank} or more{}, found shape {ss}",
                if rows {
                    " ([P, M, ...]: one row per rank)"
                } else {
                    " (chunked along dim 0)"
                }
            ));
        }
        if sd != dd || !shapes_compatible(&ss, &ds) {
            return Err(format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`; give both the same shape and dtype"));
        }
        Ok(sd)
    }

    /// The reduce op `r` of a reduction collective takes buffers of dtype `d`.
    fn reduce_op_fits(&self, r: ReduceOp, d: DType) -> Result<(), String> {
        if !r.accepts(d) {
            return Err(if r.logical() {
                format!("reduce op `{}` needs `bool` buffers, found `{d}`; compare first, or reduce numbers with `max` or `min`", r.name())
            } else {
                format!("reduce op `{}` does not fit dtype `bool`; reduce integers or floats (or cast the flags to `i32`)", r.name())
            });
        }
        Ok(())
    }

    /// An elementwise op: the typing rule ([`result_type`]) on its operands, and the result
    /// it defines; `to` is a conversion's target dtype (`None` for the other ops).
    fn elementwise(&self, to: Option<DType>) -> Result<(), String> {
        match result_type(&self.op.kind, |v| self.ty(v), to) {
            Some(Ok(t)) => self.expect_result(&t),
            Some(Err(m)) => Err(m),
            None => Err(
                "internal: not an elementwise op, or a conversion without its target dtype".into(),
            ),
        }
    }

    /// The dtype of the result of a conversion (`cast`, `bitcast`).
    fn converts_to(&self) -> Result<DType, String> {
        match self.result() {
            None => Err(format!(
                "`{}` must define a result",
                self.op.kind.info().name
            )),
            Some(Type::Scalar(d) | Type::Tile(_, d)) => Ok(*d),
            Some(t) => Err(format!(
                "a conversion's result must be a scalar or tile, found `{t}`"
            )),
        }
    }
}

/// Defines [`check`] from the op declarations' `typed` clauses (`crate::ir::op_typing`).
macro_rules! typing_rules {
    ($( $name:ident { $($key:tt : $b:ident),* } |$t:ident| $typing:expr; )*) => {
        /// Checks `typer`'s op against the typing rule its declaration names (the
        /// `typed |t| ...` clause of `crate::ir`'s `op_kinds!`): what each operand must be and
        /// what the op defines. The verifier runs it on every op; the builder on every op it
        /// builds. (What an operand's declaration says, `val as index` and the like, is
        /// checked before, from `OpKind::for_each_want`; scopes, levels and which buffers may
        /// be written are the verifier's.)
        ///
        /// # Errors
        /// The message naming the operand at fault, what was expected, what was found and the
        /// fix (without the op and its location, which the caller adds).
        #[allow(unused_variables)]
        pub fn check(typer: &Typer<'_>) -> Result<(), String> {
            match &typer.op.kind {
                $(OpKind::$name { $($key: $b),* } => {
                    let $t = typer;
                    $typing
                })*
            }
        }
    };
}

crate::ir::op_typing!(typing_rules);

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(d: DType) -> Type {
        Type::Scalar(d)
    }

    #[test]
    fn results_follow_the_rules() {
        let (f, i, b) = (scalar(DType::F32), scalar(DType::I32), scalar(DType::Bool));
        let tile = Type::Tile(Shape(vec![Dim::Const(4)]), DType::F32);
        assert_eq!(
            Rule::Binary(BinOp::Add).result(&[&tile, &f]),
            Ok(tile.clone())
        );
        assert_eq!(
            Rule::Cmp(CmpOp::Lt).result(&[&f, &tile]),
            Ok(Type::Tile(Shape(vec![Dim::Const(4)]), DType::Bool))
        );
        assert_eq!(Rule::Select.result(&[&b, &i, &i]), Ok(i.clone()));
        assert_eq!(Rule::Cast(DType::F64).result(&[&i]), Ok(scalar(DType::F64)));
        assert_eq!(
            Rule::Bitcast(DType::U32).result(&[&f]),
            Ok(scalar(DType::U32))
        );
        assert_eq!(Rule::Math(MathFn::Powi).result(&[&f, &i]), Ok(f.clone()));
    }

    #[test]
    fn ops_are_typed_from_their_kind_and_other_ops_are_not_elementwise() {
        let tys = [scalar(DType::F32), scalar(DType::I32)];
        let ty = |v: Value| &tys[v.0 as usize];
        let (a, n) = (Value(0), Value(1));
        let add = OpKind::Binary(BinOp::Add, a, a);
        assert_eq!(result_type(&add, ty, None), Some(Ok(scalar(DType::F32))));
        let cast = OpKind::Cast(n);
        assert_eq!(
            result_type(&cast, ty, Some(DType::F64)),
            Some(Ok(scalar(DType::F64)))
        );
        let powi = OpKind::Math(MathFn::Powi, vec![a, n]);
        assert_eq!(result_type(&powi, ty, None), Some(Ok(scalar(DType::F32))));
        assert_eq!(result_type(&OpKind::Rank(a), ty, None), None);
    }

    #[test]
    fn each_refusal_names_the_operand_and_the_fix() {
        let (f, i, b) = (scalar(DType::F32), scalar(DType::I32), scalar(DType::Bool));
        let err = |e: Rule, ops: &[&Type]| e.result(ops).unwrap_err();
        assert_eq!(
            err(Rule::Binary(BinOp::Add), &[&f, &i]),
            "operand 1 has dtype `i32` but an earlier operand has `f32`; convert one with `as f32`"
        );
        assert_eq!(
            err(Rule::Select, &[&b, &f, &i]),
            "operand 2 has dtype `i32` but an earlier operand has `f32`; convert one with `as f32`"
        );
        assert_eq!(
            err(Rule::Select, &[&i, &f, &f]),
            "operand 0 (condition) must be `bool`, found `i32`"
        );
        assert!(err(Rule::Binary(BinOp::Shl), &[&f, &f]).starts_with("`shl` shifts integers"));
        let idx = scalar(DType::Index);
        assert!(err(Rule::Binary(BinOp::Shl), &[&f, &idx]).starts_with("`shl` shifts integers"));
        assert_eq!(
            err(Rule::Unary(UnOp::Neg), &[&scalar(DType::U32)]),
            "`neg` is not defined on `u32`; `-x` negates a signed integer or a float: convert first (`-(x as i64)`)"
        );
        assert!(err(Rule::Bitcast(DType::U64), &[&f]).contains("found `f32` to `u64`"));
        assert!(err(Rule::Math(MathFn::Ln), &[&f, &f]).starts_with("`ln` takes 1 operand(s)"));
        let tensor = Type::Tensor(Shape(vec![Dim::Const(4)]), DType::F32);
        assert!(err(Rule::Binary(BinOp::Mul), &[&tensor, &f])
            .starts_with("`mul` takes scalars or tiles, found `tensor<[4], f32>`"));
    }
}
