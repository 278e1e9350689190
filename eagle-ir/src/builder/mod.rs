//! Builders used by the macros (and by hand) to construct IR: `ModuleBuilder`, and
//! `FunctionBuilder` with its value ops (`ops.rs`), control flow (`control.rs`) and
//! communication ops (`comm.rs`), and kernels that return values, built in place at each call
//! (`returns.rs`).

mod comm;
mod control;
mod ops;
mod returns;

pub use ops::Indexed;
pub use returns::Returns;

use crate::cursor::Cursor;
use crate::error::{IrError, Result};
use crate::ir::{
    elem, tile_of, BinOp, Block, CmpOp, Const, Function, Level, Loc, Module, NotifyOp, OpKind,
    Param, UnOp, Value,
};
use crate::types::{DType, Dim, Shape, Type};

/// Converts a Rust value used as an extent (`SIZE`, `64`, `NR`) into a [`Dim`].
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a compile-time extent",
    label = "a run-time value where a constant belongs",
    note = "shapes, `extract` offsets and `topk`'s k are literals, Rust `const`s, `dynamic!` dims or `{{ expr }}` blocks of them, known when the IR is built"
)]
pub trait IntoDim {
    /// The dim.
    fn into_dim(self) -> Dim;
}
impl IntoDim for Dim {
    fn into_dim(self) -> Dim {
        self
    }
}
impl IntoDim for &Dim {
    fn into_dim(self) -> Dim {
        self.clone()
    }
}
macro_rules! int_dim {
    ($($t:ty),*) => {$(
        impl IntoDim for $t {
            fn into_dim(self) -> Dim {
                Dim::Const(self as u64)
            }
        }
    )*};
}
int_dim!(usize, u64, u32, i32, i64);

/// An operand as written in source: an IR value, or a Rust literal or constant whose dtype is
/// taken from the other operand (untyped) or fixed by its Rust type (typed).
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// An IR value.
    Val(Value),
    /// An unsuffixed integer literal (`1`): takes the dtype of the other operand, else `index`.
    Int(i128),
    /// An unsuffixed float literal (`2.0`): takes the dtype of the other operand, else `f32`.
    Float(f64),
    /// Arithmetic (`+ - * /`) on unsuffixed float literals (`1.0 / 3.0`): like a literal, it
    /// takes the dtype of the other operand (else `f32`) and is then computed in that dtype,
    /// as Rust computes it: each literal rounded to the dtype, each op rounded once.
    FloatExpr(BinOp, Box<Operand>, Box<Operand>),
    /// A bool literal.
    Bool(bool),
    /// A constant with a fixed dtype (`1u32`, a Rust `const X: f64`, a `usize` constant).
    Typed(Const, DType),
    /// A dim used as a value (a `dynamic!` constant in a body): an `index`.
    Dim(Dim),
}

/// One argument of a tile intrinsic call ([`FunctionBuilder::tile_intrinsic`]), of the kind
/// [`crate::tile::ArgKind`] names.
#[derive(Debug, Clone, PartialEq)]
pub enum TileArg {
    /// A tile or scalar operand.
    Value(Operand),
    /// A shape `[M, N]`.
    Shape(Vec<Dim>),
    /// Constant offsets `[i, j]`.
    Offsets(Vec<Operand>),
    /// An axis (0 or 1).
    Axis(usize),
    /// A dtype.
    DType(DType),
}

impl From<Value> for Operand {
    fn from(v: Value) -> Self {
        Operand::Val(v)
    }
}
impl From<&Value> for Operand {
    fn from(v: &Value) -> Self {
        Operand::Val(*v)
    }
}
impl From<Dim> for Operand {
    fn from(d: Dim) -> Self {
        match d {
            Dim::Const(n) => Operand::Typed(Const::Int(n as i128), DType::Index),
            d => Operand::Dim(d),
        }
    }
}
impl From<bool> for Operand {
    fn from(v: bool) -> Self {
        Operand::Bool(v)
    }
}
impl From<f32> for Operand {
    fn from(v: f32) -> Self {
        Operand::Typed(Const::F32(v), DType::F32)
    }
}
impl From<f64> for Operand {
    fn from(v: f64) -> Self {
        Operand::Typed(Const::F64(v), DType::F64)
    }
}
macro_rules! int_operand {
    ($($t:ty => $d:expr),*) => {$(
        impl From<$t> for Operand {
            fn from(v: $t) -> Self {
                Operand::Typed(Const::Int(v as i128), $d)
            }
        }
    )*};
}
int_operand!(usize => DType::Index, isize => DType::Index, i32 => DType::I32, i64 => DType::I64, u32 => DType::U32, u64 => DType::U64);

/// Builds a [`Module`]; functions are added callees first.
#[derive(Debug, Default)]
pub struct ModuleBuilder {
    module: Module,
    in_progress: Vec<String>,
}

impl ModuleBuilder {
    /// An empty module.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder that extends an existing module.
    pub fn from_module(module: Module) -> Self {
        ModuleBuilder {
            module,
            in_progress: vec![],
        }
    }

    /// Whether `name` is already defined.
    pub fn contains(&self, name: &str) -> bool {
        self.module.function(name).is_some()
    }

    /// Defines function `name` at `level` by running `body` on a fresh [`FunctionBuilder`].
    /// Defining a name twice is a no-op.
    ///
    /// # Errors
    /// [`IrError::Recursion`] when `name` is being defined already (it calls itself), and any
    /// error `body` returns.
    pub fn define(
        &mut self,
        name: &str,
        level: Level,
        body: impl FnOnce(&mut FunctionBuilder<'_>) -> Result<()>,
    ) -> Result<()> {
        if self.contains(name) {
            return Ok(());
        }
        self.begin(name)?;
        let mut fb = FunctionBuilder {
            m: self,
            func: Function {
                name: name.to_string(),
                level,
                params: vec![],
                values: Default::default(),
                ops: Default::default(),
                body: Block::default(),
            },
            cur: Cursor::default(),
            locs: vec![],
            file: None,
            refused: None,
        };
        let r = body(&mut fb);
        let FunctionBuilder {
            mut func,
            cur,
            refused,
            ..
        } = fb;
        self.in_progress.pop();
        if let Some(e) = refused {
            return Err(e);
        }
        r?;
        func.body = cur.finish_into(&mut func);
        self.module.functions.push(func);
        Ok(())
    }

    /// Marks `name` as being built (ended by popping `in_progress`).
    ///
    /// # Errors
    /// [`IrError::Recursion`], with the call chain, when `name` is being built already.
    pub(super) fn begin(&mut self, name: &str) -> Result<()> {
        if let Some(pos) = self.in_progress.iter().position(|n| n == name) {
            let mut chain: Vec<&str> = self.in_progress[pos..].iter().map(String::as_str).collect();
            chain.push(name);
            return Err(IrError::Recursion {
                chain: chain.join(" -> "),
            });
        }
        self.in_progress.push(name.to_string());
        Ok(())
    }

    /// Checks that sample kernel `name` may be declared with access category `declared` (its
    /// text form, e.g. `mapreduce(sum)`): the declaration is an upper bound of the category
    /// inferred from the body ([`crate::AccessCategory::admits`]), so a stricter one
    /// (`cross_sample_write` on a `mapreduce(sum)` body) is honoured by the plan.
    ///
    /// # Errors
    /// [`IrError::Build`] naming the declared and the inferred category when the declaration
    /// is looser than the body or not a category.
    pub fn check_category(&self, name: &str, declared: &str) -> Result<()> {
        let Some(f) = self.module.function(name) else {
            return Ok(());
        };
        let info = crate::analysis::access_category(f)?;
        let Some(d) = crate::AccessCategory::parse(declared) else {
            return Err(IrError::Build {
                function: name.to_string(),
                message: format!(
                    "declared category `{declared}` is not a category; write `sample_local`, `cross_sample_read`, `cross_sample_write` or `mapreduce(sum|times|max|land)`"
                ),
            });
        };
        if !d.admits(info.category) {
            return Err(IrError::Build {
                function: name.to_string(),
                message: format!(
                    "declared category `{declared}` but the body is `{}`, which the declaration does not cover (a declaration may be stricter than the body, never looser); declare {}, or fix the accesses",
                    info.category,
                    if info.category == crate::AccessCategory::CrossSampleWrite {
                        "`cross_sample_write`".to_string()
                    } else {
                        format!("`{}` or `cross_sample_write`", info.category)
                    }
                ),
            });
        }
        Ok(())
    }

    /// The module built so far.
    pub fn finish(self) -> Module {
        self.module
    }
}

/// Builds one function's body. Obtained from [`ModuleBuilder::define`].
#[derive(Debug)]
pub struct FunctionBuilder<'m> {
    m: &'m mut ModuleBuilder,
    /// The function's name, level and parameters (its body and values are the cursor's until
    /// it is built).
    func: Function,
    /// Where ops go: the open blocks, the value table, the innermost location entered.
    cur: Cursor,
    /// The source locations entered (innermost last); new ops take the innermost.
    locs: Vec<Loc>,
    /// The file of the last location entered, shared by the locations that name it.
    file: Option<std::sync::Arc<str>>,
    /// The first op built that its typing rule refuses ([`FunctionBuilder::check_built`]):
    /// the function's build fails with it.
    refused: Option<IrError>,
}

impl FunctionBuilder<'_> {
    /// A build error of this function. Every one names the source line of the call being
    /// built: a message that does not already give it (` (at file:line:column)`, placed by
    /// the message where it reads best) gets it at its end.
    pub(super) fn err<T>(&self, message: impl Into<String>) -> Result<T> {
        let mut message = message.into();
        let here = self.here();
        if !message.contains(here.as_str()) {
            message.push_str(&here);
        }
        Err(IrError::Build {
            function: self.func.name.clone(),
            message,
        })
    }

    /// The module builder (to define callees).
    pub fn module(&mut self) -> &mut ModuleBuilder {
        self.m
    }

    /// The type of `v`.
    pub fn ty(&self, v: Value) -> &Type {
        self.cur.ty(v)
    }

    pub(super) fn new_value(&mut self, ty: Type) -> Value {
        self.cur.value(ty)
    }

    /// Enters the Rust source location `file:line:column` (1-based): ops built until the
    /// matching [`FunctionBuilder::leave`] record it, unless a nested `enter` names another.
    /// The macros call this around every statement and expression.
    pub fn enter(&mut self, file: &'static str, line: u32, column: u32) {
        let file = match &self.file {
            Some(f) if &**f == file => f.clone(),
            _ => self.file.insert(file.into()).clone(),
        };
        self.locs.push(Loc { file, line, column });
        self.cur.set_loc(self.locs.last().cloned());
    }

    /// Leaves the location of the last [`FunctionBuilder::enter`].
    pub fn leave(&mut self) {
        self.locs.pop();
        self.cur.set_loc(self.locs.last().cloned());
    }

    /// Appends an op that defines a value of type `ty`; returns the value.
    pub(super) fn push(&mut self, kind: OpKind, ty: Type) -> Value {
        let v = self.cur.push(kind, ty);
        self.check_built();
        v
    }

    /// Appends an op without a result.
    pub(super) fn push_void(&mut self, kind: OpKind) {
        self.cur.push_void(kind);
        self.check_built();
    }

    /// Runs the typing rule of the op just built ([`crate::typing::check`], the verifier's
    /// rule for it) and keeps the first refusal, naming the op and its source line, which the
    /// function's build then returns ([`ModuleBuilder::define`]). The builder's own checks
    /// come first, with the kernel's spelling of the mistake; this one holds every op it
    /// builds to the op's declaration.
    fn check_built(&mut self) {
        if self.refused.is_some() {
            return;
        }
        let Some(op) = self.cur.last() else {
            return;
        };
        let module = &self.m.module;
        let callee = |n: &str| module.function(n);
        let typer = crate::typing::Typer::new(op, self.cur.values(), &callee);
        if let Err(m) = crate::typing::check(&typer) {
            let message = format!("`{}`: {m}{}", op.kind.keyword(), self.here());
            self.refused = Some(IrError::Build {
                function: self.func.name.clone(),
                message,
            });
        }
    }

    /// Declares a parameter.
    pub fn param(&mut self, name: &str, ty: Type, out: bool) -> Value {
        let value = self.new_value(ty);
        self.func.params.push(Param {
            name: name.to_string(),
            value,
            out,
        });
        value
    }

    /// Materialises an operand; untyped literals take `hint` (else `index` / `f32`).
    ///
    /// # Errors
    /// [`IrError::Build`] when a literal does not fit `hint` (a float literal where an integer
    /// is expected).
    pub fn value(&mut self, op: impl Into<Operand>, hint: Option<DType>) -> Result<Value> {
        let (c, d) = match op.into() {
            Operand::Val(v) => return Ok(v),
            Operand::Dim(d) => return Ok(self.push(OpKind::Dim(d), Type::Scalar(DType::Index))),
            Operand::Int(i) => match hint {
                Some(DType::F32) => (Const::F32(i as f32), DType::F32),
                Some(h) if h.is_float() => (Const::F64(i as f64), h),
                Some(DType::Bool) => return self.err(format!("integer literal `{i}` used where a `bool` is expected; write `true` or `false`")),
                Some(h) => (Const::Int(i), h),
                None => (Const::Int(i), DType::Index),
            },
            Operand::Float(x) => match hint {
                Some(DType::F64) => (Const::F64(x), DType::F64),
                Some(DType::F32) | None => (Const::F32(x as f32), DType::F32),
                Some(h) if h.is_narrow_float() => (Const::F64(x), h),
                Some(DType::Bool) => return self.err(format!("float literal `{x:?}` used where a `bool` is expected; write `true` or `false`, or compare (`x != 0.0`)")),
                Some(h) => return self.err(format!("float literal `{x:?}` used where `{}` is expected; write an integer literal or cast with `as {}`", rust_name(h), rust_name(h))),
            },
            Operand::Bool(b) => (Const::Bool(b), DType::Bool),
            Operand::Typed(c, d) => (c, d),
            e @ Operand::FloatExpr(..) => {
                let d = hint.unwrap_or(DType::F32);
                match float_literal_value(&e, d) {
                    Some(v) => (v.to_const(), d),
                    None => return self.err(format!(
                        "a float literal expression used where `{}` is expected; write an integer literal or cast with `as {}`",
                        rust_name(d),
                        rust_name(d)
                    )),
                }
            }
        };
        let c = match (c, d) {
            (Const::F64(x), DType::F32) => Const::F32(x as f32),
            (Const::F32(x), DType::F64) => Const::F64(x as f64),
            // A float storage constant is the `f32` of its value, the literal rounded once.
            (Const::F64(x), d) if d.is_narrow_float() => {
                let v = crate::eval::narrow_float(x, d).widen_float();
                if d == DType::E8M0 && x <= 0.0 {
                    return self.err(format!(
                        "float literal `{x:e}` is not a value of `e8m0`, whose values are the powers of two 2^-127 ..= 2^127 (no zero, no sign){}; use a positive literal, or a wider dtype",
                        self.here()
                    ));
                }
                if x.is_finite() && !v.is_finite() {
                    // rustc refuses an overflowing literal too (`overflowing_literals`).
                    return self.err(format!(
                        "float literal `{x:e}` is out of range for `{d}` (its largest value is {:e}){}; scale the computation or use a wider dtype",
                        crate::math::narrow::Format::of(d).map_or(f64::MAX, |f| f.max()),
                        self.here()
                    ));
                }
                Const::F32(v)
            }
            (Const::F32(x), d) if d.is_narrow_float() => {
                Const::F32(crate::eval::narrow_float(x as f64, d).widen_float())
            }
            (c, _) => c,
        };
        if let Const::Int(i) = c {
            let (lo, hi) = d.int_range().unwrap_or((i64::MIN.into(), i64::MAX.into()));
            if i < lo || i > hi {
                return self.err(format!(
                    "integer literal `{i}` does not fit `{d}` (range {lo}..={hi}){}; use a wider type or a smaller value",
                    self.here()
                ));
            }
        }
        Ok(self.push(OpKind::Const(c), Type::Scalar(d)))
    }

    /// `let name: dtype = op;` — materialises `op` as `dtype` and checks that it is one.
    ///
    /// # Errors
    /// [`IrError::Build`] when the value has another dtype, naming both and the `as` fix.
    pub fn let_typed(&mut self, name: &str, op: impl Into<Operand>, dtype: DType) -> Result<Value> {
        let v = self.value(op, Some(dtype))?;
        match self.ty(v).dtype() {
            Some(d) if d == dtype => Ok(v),
            Some(d) => self.err(format!(
                "`let {name}: {}` is given a value of dtype `{d}`; convert it with `as {}`",
                rust_name(dtype),
                rust_name(dtype)
            )),
            None => self.err(format!(
                "`let {name}: {}` is given a `{}`",
                rust_name(dtype),
                self.ty(v)
            )),
        }
    }

    pub(super) fn hint_of(&self, op: &Operand) -> Option<DType> {
        match op {
            Operand::Val(v) => self.ty(*v).dtype(),
            Operand::Typed(_, d) => Some(*d),
            Operand::Dim(_) => Some(DType::Index),
            Operand::Bool(_) => Some(DType::Bool),
            _ => None,
        }
    }

    pub(super) fn pair(&mut self, a: Operand, b: Operand) -> Result<(Value, Value)> {
        let h = self.hint_of(&a).or(self.hint_of(&b));
        let a = self.value(a, h)?;
        let b = self.value(b, h)?;
        Ok((a, b))
    }

    /// The location suffix of build errors: ` (at file:line:column)` of the innermost
    /// location entered.
    pub(super) fn here(&self) -> String {
        crate::ir::at(self.locs.last())
    }

    /// Broadcasts the tile operands of an elementwise op to one shape (numpy's rule for
    /// tiles of one rank, [`crate::tile::broadcast_shape`]), inserting an `expand` for each
    /// operand of another shape. Scalars stay scalars (every elementwise op takes them).
    ///
    /// # Errors
    /// [`IrError::Build`] naming both shapes when they do not broadcast.
    pub(super) fn broadcast_operands<const N: usize>(
        &mut self,
        what: &str,
        vals: [Value; N],
    ) -> Result<[Value; N]> {
        let mut shape: Option<Shape> = None;
        for &v in &vals {
            if let Type::Tile(s, _) = self.ty(v) {
                shape = Some(match &shape {
                    None => s.clone(),
                    Some(a) => match crate::tile::broadcast_shape(a, s) {
                        Some(b) => b,
                        None => {
                            return self.err(format!(
                                "`{what}` of tiles of shapes `{a}` and `{s}`{}: they do not broadcast (each dim pair must be equal or one of them 1, with the same rank); reshape or `expand(t, [shape])` one of them",
                                self.here()
                            ))
                        }
                    },
                });
            }
        }
        let Some(to) = shape else { return Ok(vals) };
        let mut out = vals;
        for v in out.iter_mut() {
            if let Type::Tile(s, d) = self.ty(*v).clone() {
                if s != to {
                    *v = self.push(
                        OpKind::Tile(crate::tile::TileOp::Expand, vec![*v]),
                        Type::Tile(to.clone(), d),
                    );
                }
            }
        }
        Ok(out)
    }
}

/// The Rust spelling of a dtype as written in kernel source (`usize` for `index`).
pub(super) fn rust_name(d: DType) -> &'static str {
    d.rust_name()
}

/// The value of a float literal or literal expression ([`Operand::FloatExpr`]) in the float
/// dtype `d`: each literal rounded to `d`, each op computed in `d` ([`crate::eval::binary`]).
/// `None` for a non-float `d`.
pub(super) fn float_literal_value(o: &Operand, d: DType) -> Option<crate::eval::Scalar> {
    use crate::eval::Scalar;
    match o {
        Operand::Float(x) => match d {
            DType::F32 => Some(Scalar::F32(*x as f32)),
            DType::F64 => Some(Scalar::F64(*x)),
            d if d.is_narrow_float() => Some(crate::eval::narrow_float(*x, d)),
            _ => None,
        },
        Operand::FloatExpr(op, a, b) => {
            crate::eval::binary(*op, float_literal_value(a, d)?, float_literal_value(b, d)?).ok()
        }
        _ => None,
    }
}
