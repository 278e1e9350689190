//! Builders used by the macros (and by hand) to construct IR.

use crate::error::{IrError, Result};
use crate::ir::{
    elem, tile_of, BinOp, Block, CmpOp, Const, Function, Level, Loc, Module, NotifyOp, Op, OpKind,
    Param, UnOp, Value,
};
use crate::types::{DType, Dim, Shape, Type};

/// Converts a Rust value used as an extent (`SIZE`, `64`, `NR`) into a [`Dim`].
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
int_operand!(usize => DType::Index, i32 => DType::I32, i64 => DType::I64, u32 => DType::U32, u64 => DType::U64);

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
        if let Some(pos) = self.in_progress.iter().position(|n| n == name) {
            let mut chain: Vec<&str> = self.in_progress[pos..].iter().map(String::as_str).collect();
            chain.push(name);
            return Err(IrError::Recursion {
                chain: chain.join(" -> "),
            });
        }
        self.in_progress.push(name.to_string());
        let mut fb = FunctionBuilder {
            m: self,
            func: Function {
                name: name.to_string(),
                level,
                params: vec![],
                values: vec![],
                body: Block::default(),
            },
            blocks: vec![Block::default()],
            locs: vec![],
            file: None,
        };
        let r = body(&mut fb);
        let FunctionBuilder {
            mut func, blocks, ..
        } = fb;
        self.in_progress.pop();
        r?;
        func.body = blocks.into_iter().next().unwrap_or_default();
        self.module.functions.push(func);
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
    func: Function,
    blocks: Vec<Block>,
    /// The source locations entered (innermost last); new ops take the innermost.
    locs: Vec<Loc>,
    /// The file of the last location entered, shared by the locations that name it.
    file: Option<std::sync::Arc<str>>,
}

impl FunctionBuilder<'_> {
    fn err<T>(&self, message: impl Into<String>) -> Result<T> {
        Err(IrError::Build {
            function: self.func.name.clone(),
            message: message.into(),
        })
    }

    /// The module builder (to define callees).
    pub fn module(&mut self) -> &mut ModuleBuilder {
        self.m
    }

    /// The type of `v`.
    pub fn ty(&self, v: Value) -> &Type {
        self.func.ty(v)
    }

    fn new_value(&mut self, ty: Type) -> Value {
        self.func.values.push(ty);
        Value(self.func.values.len() as u32 - 1)
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
    }

    /// Leaves the location of the last [`FunctionBuilder::enter`].
    pub fn leave(&mut self) {
        self.locs.pop();
    }

    /// Appends an op that defines a value of type `ty`; returns the value.
    fn push(&mut self, kind: OpKind, ty: Type) -> Value {
        let result = self.new_value(ty);
        self.append(kind, Some(result));
        result
    }

    /// Appends an op without a result.
    fn push_void(&mut self, kind: OpKind) {
        self.append(kind, None);
    }

    fn append(&mut self, kind: OpKind, result: Option<Value>) {
        let loc = self.locs.last().cloned();
        self.blocks
            .last_mut()
            .expect("a block is open")
            .ops
            .push(Op { result, kind, loc });
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
                Some(h @ (DType::F16 | DType::BF16)) => (Const::F64(i as f64), h),
                Some(h) if h.is_float() => (Const::F64(i as f64), h),
                Some(DType::Bool) => return self.err(format!("integer literal `{i}` used where a `bool` is expected; write `true` or `false`")),
                Some(h) => (Const::Int(i), h),
                None => (Const::Int(i), DType::Index),
            },
            Operand::Float(x) => match hint {
                Some(DType::F64) => (Const::F64(x), DType::F64),
                Some(DType::F32) | None => (Const::F32(x as f32), DType::F32),
                Some(h @ (DType::F16 | DType::BF16)) => (Const::F64(x), h),
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
            // A 16-bit float constant is the `f32` of its value, the literal rounded once.
            (Const::F64(x), DType::F16 | DType::BF16) => {
                let v = crate::eval::narrow_float(x, d).widen_float();
                if x.is_finite() && v.is_infinite() {
                    // rustc refuses an overflowing literal too (`overflowing_literals`).
                    return self.err(format!(
                        "float literal `{x:e}` is out of range for `{d}` (its largest value is {:e}){}; scale the computation or use a wider dtype",
                        crate::math::narrow::Format::of(d).map_or(f64::MAX, |f| f.max()),
                        self.here()
                    ));
                }
                Const::F32(v)
            }
            (Const::F32(x), DType::F16 | DType::BF16) => {
                Const::F32(crate::eval::narrow_float(x as f64, d).widen_float())
            }
            (c, _) => c,
        };
        if let Const::Int(i) = c {
            let (lo, hi): (i128, i128) = match d {
                DType::I8 => (i8::MIN.into(), i8::MAX.into()),
                DType::U8 => (0, u8::MAX.into()),
                DType::I16 => (i16::MIN.into(), i16::MAX.into()),
                DType::U16 => (0, u16::MAX.into()),
                DType::I32 => (i32::MIN.into(), i32::MAX.into()),
                DType::U32 => (0, u32::MAX.into()),
                DType::U64 => (0, u64::MAX.into()),
                _ => (i64::MIN.into(), i64::MAX.into()),
            };
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

    fn hint_of(&self, op: &Operand) -> Option<DType> {
        match op {
            Operand::Val(v) => self.ty(*v).dtype(),
            Operand::Typed(_, d) => Some(*d),
            Operand::Dim(_) => Some(DType::Index),
            Operand::Bool(_) => Some(DType::Bool),
            _ => None,
        }
    }

    fn pair(&mut self, a: Operand, b: Operand) -> Result<(Value, Value)> {
        let h = self.hint_of(&a).or(self.hint_of(&b));
        let a = self.value(a, h)?;
        let b = self.value(b, h)?;
        Ok((a, b))
    }

    /// The location suffix of build errors: ` (at file:line:column)` of the innermost
    /// location entered.
    fn here(&self) -> String {
        crate::ir::at(self.locs.last())
    }

    /// Broadcasts the tile operands of an elementwise op to one shape (numpy's rule for
    /// tiles of one rank, [`crate::tile::broadcast_shape`]), inserting an `expand` for each
    /// operand of another shape. Scalars stay scalars (every elementwise op takes them).
    ///
    /// # Errors
    /// [`IrError::Build`] naming both shapes when they do not broadcast.
    fn broadcast_operands<const N: usize>(
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

    /// A tile intrinsic (`row_sum(t)`, `matmul(a, b)`, `zeros([M, N], f32)`, ...; the list
    /// and the argument kinds are [`crate::tile::INTRINSICS`]). `args` are the call's
    /// arguments in order, as [`TileArg`]s.
    ///
    /// # Errors
    /// [`IrError::Build`], with the source line, for an unknown name, arguments of the wrong
    /// kind, and every typing error of [`crate::TileOp::infer`] (a row reduction of a 1-D
    /// tile, matmul inner dims that differ, a reshape that changes the element count, an
    /// extract outside the tile, a broadcast of incompatible shapes).
    pub fn tile_intrinsic(&mut self, name: &str, args: Vec<TileArg>) -> Result<Value> {
        use crate::tile::TileOp;
        let Some(intr) = crate::tile::intrinsic(name) else {
            return self.err(format!("`{name}` is not a tile intrinsic{}", self.here()));
        };
        let mut vals = vec![];
        let mut shape = None;
        let mut offsets = vec![];
        let mut axis = None;
        let mut dtype = None;
        let mut hint = None;
        for a in &args {
            if let TileArg::Value(Operand::Val(v)) = a {
                hint = hint.or(self.ty(*v).dtype());
            }
        }
        for a in args {
            match a {
                TileArg::Value(o) => vals.push(o),
                TileArg::Shape(s) => shape = Some(Shape(s)),
                TileArg::Offsets(o) => offsets = o,
                TileArg::Axis(x) => axis = Some(x),
                TileArg::DType(d) => dtype = Some(d),
            }
        }
        let ax = axis.unwrap_or(0);
        // The kernel's name is the op's IR keyword, except for the ops that take an axis or
        // offsets, and `zeros` (a `full` of 0).
        let op = match name {
            "concat" => TileOp::Concat(ax),
            "iota" => TileOp::Iota(ax),
            "extract" => {
                let mut offs = vec![];
                for o in offsets {
                    match o {
                        Operand::Int(i) | Operand::Typed(Const::Int(i), _) if i >= 0 => {
                            offs.push(i as u64)
                        }
                        Operand::Int(i) | Operand::Typed(Const::Int(i), _) => {
                            return self.err(format!("`extract`'s offset {i} is negative{}; offsets count elements from the tile's first, from 0", self.here()))
                        }
                        Operand::Dim(Dim::Const(i)) => offs.push(i),
                        _ => return self.err(format!("`extract`'s offsets are compile-time constants (literals or Rust `const`s){}; to take a sub-tile at a run-time offset, `load` it from the tensor", self.here())),
                    }
                }
                TileOp::Extract(offs)
            }
            "zeros" => {
                let d = dtype.unwrap_or(DType::F32);
                let zero = match d {
                    DType::F32 => Const::F32(0.0),
                    DType::F64 => Const::F64(0.0),
                    DType::Bool => Const::Bool(false),
                    _ => Const::Int(0),
                };
                vals.push(Operand::Typed(zero, d));
                TileOp::Full
            }
            _ => match TileOp::from_name(name) {
                Some(op) => op,
                None => return self.err(format!("internal: tile intrinsic `{name}` has no op")),
            },
        };
        let vals = vals
            .into_iter()
            .map(|o| self.value(o, hint))
            .collect::<Result<Vec<_>>>()?;
        let tys: Vec<&Type> = vals.iter().map(|&v| self.ty(v)).collect();
        let ty = match op.infer(&tys, shape.as_ref(), dtype) {
            Ok(t) => t,
            Err(e) => {
                return self.err(format!(
                    "{e}{}; the call is `{}`",
                    self.here(),
                    intr.signature
                ))
            }
        };
        Ok(self.push(OpKind::Tile(op, vals), ty))
    }

    fn elementwise_ty(&self, what: &str, vals: &[Value], dtype: Option<DType>) -> Result<Type> {
        let mut shape: Option<&Shape> = None;
        let mut d = None;
        for &v in vals {
            let t = self.ty(v);
            let Some(e) = elem(t) else {
                return self.err(format!(
                    "`{what}` takes scalars or tiles, found `{t}`; load a tile first with `load(x, offsets, shape)`"
                ));
            };
            d.get_or_insert(e);
            if let Type::Tile(s, _) = t {
                shape.get_or_insert(s);
            }
        }
        let d = dtype.or(d).unwrap_or(DType::Index);
        Ok(match shape {
            Some(s) => Type::Tile(s.clone(), d),
            None => Type::Scalar(d),
        })
    }

    /// `a <op> b`.
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn bin(
        &mut self,
        op: BinOp,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Value> {
        let (a, b) = self.pair(a.into(), b.into())?;
        let [a, b] = self.broadcast_operands(op.name(), [a, b])?;
        let ty = self.elementwise_ty(op.name(), &[a, b], None)?;
        Ok(self.push(OpKind::Binary(op, a, b), ty))
    }

    /// `a <op> b` as an operand: two unsuffixed integer literals fold to one (exactly, in
    /// `i128`), which stays untyped and takes its dtype from where it is used, as a Rust
    /// literal expression does (`let c: i32 = 2 * 3;`, `x / (0 - 1)` with an `i32` `x`); a
    /// result that does not fit the dtype it takes is then E021, as rustc's
    /// `arithmetic_overflow` is a compile error. Anything else is [`FunctionBuilder::bin`].
    ///
    /// # Errors
    /// [`IrError::Build`] for a literal division or remainder by zero, a literal result
    /// outside `i128`, and as [`FunctionBuilder::bin`].
    pub fn bin_lit(
        &mut self,
        op: BinOp,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Operand> {
        let (a, b) = (a.into(), b.into());
        let float_lit = |o: &Operand| matches!(o, Operand::Float(_) | Operand::FloatExpr(..));
        if float_lit(&a)
            && float_lit(&b)
            && matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div)
        {
            // Computed once the dtype is known (Rust's inference of `{float}`).
            return Ok(Operand::FloatExpr(op, Box::new(a), Box::new(b)));
        }
        let (Operand::Int(x), Operand::Int(y)) = (&a, &b) else {
            return Ok(Operand::Val(self.bin(op, a, b)?));
        };
        let (x, y) = (*x, *y);
        let folded = match op {
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            BinOp::Mul => x.checked_mul(y),
            BinOp::Div | BinOp::Rem if y == 0 => {
                return self.err(format!(
                    "`{}` of the integer literals {x} and {y} divides by zero; Rust refuses it at compile time too",
                    op.name()
                ))
            }
            BinOp::Div => x.checked_div(y),
            BinOp::Rem => x.checked_rem(y),
            BinOp::Min => Some(x.min(y)),
            BinOp::Max => Some(x.max(y)),
            BinOp::And => Some(x & y),
            BinOp::Or => Some(x | y),
            BinOp::Xor => Some(x ^ y),
            // Rust folds literal shifts exactly and refuses an amount past the width.
            BinOp::Shl => u32::try_from(y).ok().filter(|&s| s < 64).map(|s| x << s),
            BinOp::Shr => u32::try_from(y).ok().filter(|&s| s < 64).map(|s| x >> s),
        };
        match folded {
            Some(v) => Ok(Operand::Int(v)),
            None => self.err(format!(
                "`{}` of the integer literals {x} and {y} overflows every integer dtype",
                op.name()
            )),
        }
    }

    /// `op a`.
    ///
    /// # Errors
    /// [`IrError::Build`] for an operand that is neither scalar nor tile.
    pub fn un(&mut self, op: UnOp, a: impl Into<Operand>) -> Result<Value> {
        let a = self.value(a, None)?;
        let ty = self.elementwise_ty(op.name(), &[a], None)?;
        Ok(self.push(OpKind::Unary(op, a), ty))
    }

    /// A function of the math library ([`crate::math`]), elementwise: `ln(x)`, `atan2(y, x)`,
    /// `powi(x, n)`. Operand 0 is `f32` or `f64` (a float literal takes the dtype of the other
    /// operand, else `f32`); the others have its dtype, except `powi`'s exponent (`i32`).
    /// Tiles broadcast as for `+`.
    ///
    /// # Errors
    /// [`IrError::Build`] naming the function, the operand, the dtype found and the fix, for
    /// a wrong number of operands, an integer operand 0 or another operand of the wrong dtype;
    /// and for shapes that do not broadcast.
    pub fn math(&mut self, f: crate::math::MathFn, args: Vec<Operand>) -> Result<Value> {
        let (n, sig) = (f.name(), f.signature());
        if args.len() != f.arity() {
            return self.err(format!(
                "`{n}({sig})` takes {} operand(s), found {}{}",
                f.arity(),
                args.len(),
                self.here()
            ));
        }
        let float = args
            .iter()
            .enumerate()
            .filter(|(i, _)| f.operand_dtype(*i, DType::F64) == DType::F64)
            .find_map(|(_, a)| self.hint_of(a).filter(|d| d.is_float()));
        let d0 = float.unwrap_or(DType::F32);
        let mut vals = Vec::with_capacity(args.len());
        for (i, a) in args.into_iter().enumerate() {
            let want = f.operand_dtype(i, d0);
            if let (Operand::Int(k), true) = (&a, want.is_float()) {
                // Rust has no implicit int-to-float conversion: `f64::ln(2)` does not compile.
                return self.err(format!(
                    "operand {i} of `{n}({sig})`{}: expected `{}`, found the integer literal `{k}`; write `{k}.0`",
                    self.here(),
                    rust_name(want)
                ));
            }
            let v = self.value(a, Some(want))?;
            let got = elem(self.ty(v));
            if got != Some(want) {
                let found = match got {
                    Some(d) => format!("`{}`", rust_name(d)),
                    None => format!("`{}`", self.ty(v)),
                };
                let fix = if i == 0 {
                    "convert it with `as f64` (or `as f32`)".to_string()
                } else {
                    format!("convert it with `as {}`", rust_name(want))
                };
                return self.err(format!(
                    "operand {i} of `{n}({sig})`{}: expected `{}`, found {found}; {fix}",
                    self.here(),
                    rust_name(want)
                ));
            }
            vals.push(v);
        }
        if vals.len() == 2 {
            let [a, b] = self.broadcast_operands(n, [vals[0], vals[1]])?;
            vals = vec![a, b];
        }
        let ty = self.elementwise_ty(n, &vals[..1], Some(d0))?;
        let ty = match (ty, vals.get(1).map(|v| self.ty(*v).clone())) {
            (Type::Scalar(d), Some(Type::Tile(s, _))) => Type::Tile(s, d),
            (t, _) => t,
        };
        Ok(self.push(OpKind::Math(f, vals), ty))
    }

    /// `a * b + c` with one rounding.
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn fma(
        &mut self,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
        c: impl Into<Operand>,
    ) -> Result<Value> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        let h = self.hint_of(&a).or(self.hint_of(&b)).or(self.hint_of(&c));
        let (a, b, c) = (self.value(a, h)?, self.value(b, h)?, self.value(c, h)?);
        let [a, b, c] = self.broadcast_operands("fma", [a, b, c])?;
        let ty = self.elementwise_ty("fma", &[a, b, c], None)?;
        Ok(self.push(OpKind::Fma(a, b, c), ty))
    }

    /// `a <cmp> b`, a `bool` (or a tile of `bool`).
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn cmp(
        &mut self,
        op: CmpOp,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Value> {
        let (a, b) = self.pair(a.into(), b.into())?;
        let [a, b] = self.broadcast_operands(op.name(), [a, b])?;
        let ty = self.elementwise_ty(op.name(), &[a, b], Some(DType::Bool))?;
        Ok(self.push(OpKind::Cmp(op, a, b), ty))
    }

    /// `select(cond, a, b)`.
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn select(
        &mut self,
        cond: impl Into<Operand>,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Value> {
        let c = self.value(cond, Some(DType::Bool))?;
        let (a, b) = self.pair(a.into(), b.into())?;
        let [c, a, b] = self.broadcast_operands("select", [c, a, b])?;
        let d = self.ty(a).dtype();
        let ty = self.elementwise_ty("select", &[c, a, b], d)?;
        Ok(self.push(OpKind::Select(c, a, b), ty))
    }

    /// `a as dtype`.
    ///
    /// # Errors
    /// [`IrError::Build`] for an operand that is neither scalar nor tile.
    pub fn cast(&mut self, a: impl Into<Operand>, dtype: DType) -> Result<Value> {
        let a = self.value(a, Some(dtype))?;
        let ty = self.elementwise_ty("cast", &[a], Some(dtype))?;
        Ok(self.push(OpKind::Cast(a), ty))
    }

    /// The same bits as `dtype` (`f32::from_bits(u)`, and [`FunctionBuilder::to_bits`]).
    ///
    /// # Errors
    /// [`IrError::Build`], with the source line, unless the operand and `dtype` are a float
    /// and an integer of the same width ([`DType::bitcasts_to`]).
    pub fn bitcast(&mut self, a: impl Into<Operand>, dtype: DType) -> Result<Value> {
        let hint = match dtype {
            DType::F16 | DType::BF16 => Some(DType::U16),
            DType::F32 => Some(DType::U32),
            DType::F64 => Some(DType::U64),
            _ => None,
        };
        let a = self.value(a, hint)?;
        let from = self.ty(a).dtype().unwrap_or(DType::Bool);
        if !from.bitcasts_to(dtype) {
            return self.err(format!(
                "`{}::from_bits` / `to_bits` keeps the bits between a float and an integer of the same width (`f16`/`bf16` and `u16`, `f32` and `u32`, `f64` and `u64`), found `{}` to `{}`{}; convert values with `as`",
                rust_name(dtype),
                rust_name(from),
                rust_name(dtype),
                self.here()
            ));
        }
        let ty = self.elementwise_ty("bitcast", &[a], Some(dtype))?;
        Ok(self.push(OpKind::Bitcast(a), ty))
    }

    /// `x.to_bits()`: an `f32`'s bits as `u32`, an `f64`'s as `u64`, an `f16`'s or `bf16`'s
    /// as `u16`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `x` is not a float.
    pub fn to_bits(&mut self, a: impl Into<Operand>) -> Result<Value> {
        let a = self.value(a, None)?;
        match self.ty(a).dtype() {
            Some(DType::F32) => self.bitcast(a, DType::U32),
            Some(DType::F64) => self.bitcast(a, DType::U64),
            Some(DType::F16 | DType::BF16) => self.bitcast(a, DType::U16),
            other => self.err(format!(
                "`.to_bits()` takes a float (`f16`, `bf16`, `f32`, `f64`), found `{}`{}",
                other.map_or("?", rust_name),
                self.here()
            )),
        }
    }

    /// `x[i]`: the sub-tensor at `i` of dim 0.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a tensor of rank >= 1.
    pub fn slice(&mut self, src: Value, index: impl Into<Operand>) -> Result<Value> {
        let index = self.value(index, Some(DType::Index))?;
        match self.ty(src).clone() {
            Type::Tensor(s, d) if s.rank() >= 1 => {
                let ty = Type::Tensor(Shape(s.0[1..].to_vec()), d);
                Ok(self.push(OpKind::Slice { src, index }, ty))
            }
            Type::Window(s, _) => self.err(format!(
                "a window of type `{}` cannot be sliced: index one element with one index per dim (`w{}`) or move tiles with `load` / `store`",
                self.ty(src),
                "[i]".repeat(s.rank().max(1))
            )),
            t => self.err(format!(
                "indexing `x[i]` needs a tensor of rank >= 1, found `{t}`"
            )),
        }
    }

    fn offsets(&mut self, offsets: Vec<Operand>) -> Result<Vec<Value>> {
        offsets
            .into_iter()
            .map(|o| self.value(o, Some(DType::Index)))
            .collect()
    }

    /// `x[i]` in source: in device, compute and sample functions, an element of a rank-1 tensor
    /// or window (a scalar); otherwise (rank >= 2, or on the host) the sub-tensor at `i`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` cannot be indexed.
    pub fn index(&mut self, base: Value, i: impl Into<Operand>) -> Result<Value> {
        let t = self.ty(base).clone();
        match (&t, self.func.level) {
            (Type::Tensor(s, d) | Type::Window(s, d), l) if s.rank() == 1 && l != Level::Host => {
                let d = *d;
                let i = self.value(i, Some(DType::Index))?;
                Ok(self.push(
                    OpKind::Elem {
                        src: base,
                        indices: vec![i],
                    },
                    Type::Scalar(d),
                ))
            }
            _ => self.slice(base, i),
        }
    }

    /// `w[i][j]...` in source: one element of a window (or tensor) of rank `indices.len()`,
    /// in a device, compute or sample function.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` is not a tensor or window of that rank, or on the host.
    pub fn elem(&mut self, base: Value, indices: Vec<Operand>) -> Result<Value> {
        let t = self.ty(base).clone();
        match &t {
            Type::Tensor(s, d) | Type::Window(s, d)
                if s.rank() == indices.len() && self.func.level != Level::Host =>
            {
                let d = *d;
                let indices = self.offsets(indices)?;
                Ok(self.push(OpKind::Elem { src: base, indices }, Type::Scalar(d)))
            }
            _ => self.err(format!(
                "an element access with {} index(es) needs a tensor or window of rank {} in a kernel, found `{t}`",
                indices.len(),
                indices.len()
            )),
        }
    }

    /// `w[i][j]... = v` in source: writes one element of a window (or tensor) of rank
    /// `indices.len()`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` is not a tensor or window of that rank, or on the host.
    pub fn set_elem(
        &mut self,
        base: Value,
        indices: Vec<Operand>,
        v: impl Into<Operand>,
    ) -> Result<()> {
        let t = self.ty(base).clone();
        match &t {
            Type::Tensor(s, d) | Type::Window(s, d)
                if s.rank() == indices.len() && self.func.level != Level::Host =>
            {
                let d = *d;
                let indices = self.offsets(indices)?;
                let value = self.value(v, Some(d))?;
                self.push_void(OpKind::SetElem {
                    value,
                    dst: base,
                    indices,
                });
                Ok(())
            }
            _ => self.err(format!(
                "an element assignment with {} index(es) needs a tensor or window of rank {} in a kernel, found `{t}`",
                indices.len(),
                indices.len()
            )),
        }
    }

    /// `x[i] = v` in source: writes one element of a rank-1 tensor or window.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` is not a rank-1 tensor or window.
    pub fn set_index(
        &mut self,
        base: Value,
        i: impl Into<Operand>,
        v: impl Into<Operand>,
    ) -> Result<()> {
        let t = self.ty(base).clone();
        match &t {
            Type::Tensor(s, d) | Type::Window(s, d) if s.rank() == 1 && self.func.level != Level::Host => {
                let d = *d;
                let i = self.value(i, Some(DType::Index))?;
                let value = self.value(v, Some(d))?;
                self.push_void(OpKind::SetElem {
                    value,
                    dst: base,
                    indices: vec![i],
                });
                Ok(())
            }
            _ => self.err(format!(
                "element assignment `x[i] = v` needs a rank-1 tensor or window in a kernel (index every dim: `y[c][s] = v`), found `{t}`"
            )),
        }
    }

    /// `load(src, offsets, shape)`: a tile of `shape` read at `offsets`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a tensor or window.
    pub fn load(&mut self, src: Value, offsets: Vec<Operand>, shape: Vec<Dim>) -> Result<Value> {
        let offsets = self.offsets(offsets)?;
        let t = self.ty(src).clone();
        if !t.is_memory() {
            return self.err(format!("`load` reads a tensor or window, found `{t}`"));
        }
        let d = t.dtype().unwrap_or(DType::F32);
        Ok(self.push(OpKind::Load { src, offsets }, tile_of(Shape(shape), d)))
    }

    /// `store(dst, offsets, value)`.
    ///
    /// # Errors
    /// Only from materialising offsets.
    pub fn store(&mut self, dst: Value, offsets: Vec<Operand>, value: Value) -> Result<()> {
        let offsets = self.offsets(offsets)?;
        self.push_void(OpKind::Store {
            value,
            dst,
            offsets,
        });
        Ok(())
    }

    /// `let mut v = init;`
    ///
    /// # Errors
    /// [`IrError::Build`] when `init` is not a scalar.
    pub fn var(&mut self, init: impl Into<Operand>) -> Result<Value> {
        let init = self.value(init, None)?;
        match self.ty(init).clone() {
            t @ (Type::Scalar(_) | Type::Tile(..)) => {
                Ok(self.push(OpKind::Var(init), Type::Ref(Box::new(t))))
            }
            t => self.err(format!(
                "`let mut` holds scalars and tiles, found `{t}`{}; write tensors through an `Out` parameter",
                self.here()
            )),
        }
    }

    /// Reads a variable.
    ///
    /// # Errors
    /// [`IrError::Build`] when `var` is not a variable.
    pub fn read(&mut self, var: Value) -> Result<Value> {
        match self.ty(var).clone() {
            Type::Ref(t) => Ok(self.push(OpKind::Read(var), *t)),
            t => self.err(format!("expected a `let mut` variable, found `{t}`")),
        }
    }

    /// Writes a variable.
    ///
    /// # Errors
    /// [`IrError::Build`] when `var` is not a variable.
    pub fn write(&mut self, var: Value, value: impl Into<Operand>) -> Result<()> {
        let Type::Ref(t) = self.ty(var).clone() else {
            return self.err("assignment needs a `let mut` variable on the left".to_string());
        };
        let mut value = self.value(value, t.dtype())?;
        if let (Type::Scalar(_), vt @ Type::Tile(..)) = (&*t, self.ty(value)) {
            return self.err(format!(
                "the variable holds a `{t}` but is assigned a `{vt}`{}; declare it as a tile (`let mut v = zeros([M, N], f32);`) or reduce the tile to a scalar (`reduce_sum(t)`)",
                self.here()
            ));
        }
        if let Type::Tile(s, d) = &*t {
            let vt = self.ty(value).clone();
            let fits = match &vt {
                Type::Scalar(e) => e == d,
                Type::Tile(vs, e) => e == d && crate::tile::expands_to(vs, s),
                _ => false,
            };
            if !fits {
                return self.err(format!(
                    "the variable holds a `{t}` but is assigned a `{vt}`{}; a tile variable keeps its shape and dtype",
                    self.here()
                ));
            }
            if vt != *t {
                value = self.push(
                    OpKind::Tile(crate::tile::TileOp::Expand, vec![value]),
                    (*t).clone(),
                );
            }
        }
        self.push_void(OpKind::Write(var, value));
        Ok(())
    }

    /// `for i in lo..hi { body(i) }`.
    ///
    /// # Errors
    /// Whatever `body` returns.
    pub fn for_range(
        &mut self,
        lo: impl Into<Operand>,
        hi: impl Into<Operand>,
        body: impl FnOnce(&mut Self, Value) -> Result<()>,
    ) -> Result<()> {
        let (lo, hi) = (lo.into(), hi.into());
        let lo = self.value(lo, Some(DType::Index))?;
        let hi = self.value(hi, Some(DType::Index))?;
        let var = self.new_value(Type::Scalar(DType::Index));
        self.blocks.push(Block::default());
        let r = body(self, var);
        let body = self.blocks.pop().unwrap_or_default();
        r?;
        self.push_void(OpKind::For { var, lo, hi, body });
        Ok(())
    }

    /// `if cond { then } else { else }`.
    ///
    /// # Errors
    /// Whatever the branches return.
    pub fn if_(
        &mut self,
        cond: impl Into<Operand>,
        then_b: impl FnOnce(&mut Self) -> Result<()>,
        else_b: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let cond = self.value(cond, Some(DType::Bool))?;
        self.blocks.push(Block::default());
        let r = then_b(self);
        let then_body = self.blocks.pop().unwrap_or_default();
        r?;
        self.blocks.push(Block::default());
        let r = else_b(self);
        let else_body = self.blocks.pop().unwrap_or_default();
        r?;
        self.push_void(OpKind::If {
            cond,
            then_body,
            else_body,
        });
        Ok(())
    }

    fn callee_args(
        &mut self,
        callee: &str,
        build: fn(&mut ModuleBuilder) -> Result<()>,
        args: Vec<Operand>,
        skip_ctx: bool,
    ) -> Result<Vec<Value>> {
        build(self.m)?;
        let Some(f) = self.m.module.function(callee) else {
            return self.err(format!("callee `{callee}` was not defined"));
        };
        let here = self.func.level;
        let problem = match (skip_ctx, f.level) {
            (_, Level::Host) => Some(format!("`{callee}` is a host function; host functions are launched from Rust (`{callee}.launch(&session, ...)`), not called from eagle code")),
            (false, Level::Device) if here == Level::Host => Some(format!("`{callee}` is a per-device program; dispatch it to a rank with `{callee}(..., device = r)`")),
            (false, Level::Device) => Some(format!("`{callee}` is a per-device program; only a host function can start it, with `device = r`")),
            (true, Level::Compute) => Some(format!("`{callee}` is a compute kernel; call it (without `device =`) from a per-device program, or mark it `#[eagle::kernel(device)]` to dispatch it")),
            (true, Level::Device) if here != Level::Host => Some(format!("`device = ...` dispatches belong in a host function; call `{callee}` from the host")),
            _ => None,
        };
        if let Some(m) = problem {
            return self.err(m);
        }
        let params: Vec<Type> = f
            .params
            .iter()
            .map(|p| f.ty(p.value).clone())
            .filter(|t| !(skip_ctx && *t == Type::Ctx))
            .collect();
        if params.len() != args.len() {
            return self.err(format!(
                "`{callee}` takes {} argument(s), found {}",
                params.len(),
                args.len()
            ));
        }
        args.into_iter()
            .zip(params)
            .map(|(a, t)| self.value(a, t.dtype()))
            .collect()
    }

    /// Calls compute kernel `callee` (defined by `build`).
    ///
    /// # Errors
    /// [`IrError::Build`] on an argument count mismatch; errors from building the callee.
    pub fn call(
        &mut self,
        callee: &str,
        build: fn(&mut ModuleBuilder) -> Result<()>,
        args: Vec<Operand>,
    ) -> Result<()> {
        let args = self.callee_args(callee, build, args, false)?;
        self.push_void(OpKind::Call {
            callee: callee.to_string(),
            args,
        });
        Ok(())
    }

    /// Inlines the body of `callee` here, with its parameters bound to `args` (one per
    /// parameter, types as the parameters'): the call without the call.
    ///
    /// # Errors
    /// [`IrError::Build`] on an argument count mismatch.
    pub fn inline(&mut self, callee: &Function, args: &[Value]) -> Result<()> {
        if callee.params.len() != args.len() {
            return self.err(format!(
                "inlining `{}`: {} argument(s) for {} parameter(s)",
                callee.name,
                args.len(),
                callee.params.len()
            ));
        }
        let mut map: std::collections::HashMap<Value, Value> = callee
            .params
            .iter()
            .map(|p| p.value)
            .zip(args.iter().copied())
            .collect();
        let mut fresh = |v: Value, fb: &mut Function| -> Value {
            *map.entry(v).or_insert_with(|| {
                fb.values.push(callee.ty(v).clone());
                Value(fb.values.len() as u32 - 1)
            })
        };
        let func = &mut self.func;
        let body = callee.body.map_values(&mut |v| fresh(v, func));
        if let Some(b) = self.blocks.last_mut() {
            b.ops.extend(body.ops);
        }
        Ok(())
    }

    /// Dispatches per-device program `callee` to rank `device`. The callee's `ctx` parameter
    /// is not passed: the runtime supplies it.
    ///
    /// # Errors
    /// [`IrError::Build`] on an argument count mismatch; errors from building the callee.
    pub fn dispatch(
        &mut self,
        callee: &str,
        build: fn(&mut ModuleBuilder) -> Result<()>,
        args: Vec<Operand>,
        device: impl Into<Operand>,
    ) -> Result<()> {
        let args = self.callee_args(callee, build, args, true)?;
        let device = self.value(device, Some(DType::Index))?;
        self.push_void(OpKind::Dispatch {
            callee: callee.to_string(),
            args,
            device,
        });
        Ok(())
    }

    /// `rank(ctx)`.
    pub fn rank(&mut self, ctx: Value) -> Value {
        self.push(OpKind::Rank(ctx), Type::Scalar(DType::Index))
    }
    /// `nranks(ctx)`.
    pub fn nranks(&mut self, ctx: Value) -> Value {
        self.push(OpKind::NRanks(ctx), Type::Scalar(DType::Index))
    }
    /// `world_size()`.
    pub fn world_size(&mut self) -> Value {
        self.push(OpKind::WorldSize, Type::Scalar(DType::Index))
    }
    /// `alloc_window_buffer(shape, dtype)`.
    pub fn alloc_window_buffer(&mut self, shape: Vec<Dim>, dtype: DType) -> Value {
        self.push(OpKind::AllocWindowBuffer, Type::WinBuf(Shape(shape), dtype))
    }
    /// `window(buf, shape, dtype)`.
    pub fn window(&mut self, buf: Value, shape: Vec<Dim>, dtype: DType) -> Value {
        self.push(OpKind::Window(buf), Type::Window(Shape(shape), dtype))
    }
    /// `put(dst, peer, src)`.
    ///
    /// # Errors
    /// Only from materialising `peer`.
    pub fn put(&mut self, dst: Value, peer: impl Into<Operand>, src: Value) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        self.push_void(OpKind::Put { dst, peer, src });
        Ok(())
    }
    /// `get(dst, peer, src)`.
    ///
    /// # Errors
    /// Only from materialising `peer`.
    pub fn get(&mut self, dst: Value, peer: impl Into<Operand>, src: Value) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        self.push_void(OpKind::Get { dst, peer, src });
        Ok(())
    }
    /// `remote_load(win, peer, offsets, shape)`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a window.
    pub fn remote_load(
        &mut self,
        src: Value,
        peer: impl Into<Operand>,
        offsets: Vec<Operand>,
        shape: Vec<Dim>,
    ) -> Result<Value> {
        let peer = self.value(peer, Some(DType::Index))?;
        let offsets = self.offsets(offsets)?;
        let Type::Window(_, d) = self.ty(src).clone() else {
            return self.err(format!(
                "`remote_load` reads a window, found `{}`",
                self.ty(src)
            ));
        };
        let kind = OpKind::RemoteLoad { src, peer, offsets };
        Ok(self.push(kind, tile_of(Shape(shape), d)))
    }
    /// `remote_store(win, peer, offsets, value)`.
    ///
    /// # Errors
    /// Only from materialising operands.
    pub fn remote_store(
        &mut self,
        dst: Value,
        peer: impl Into<Operand>,
        offsets: Vec<Operand>,
        value: Value,
    ) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        let offsets = self.offsets(offsets)?;
        self.push_void(OpKind::RemoteStore {
            value,
            dst,
            peer,
            offsets,
        });
        Ok(())
    }
    /// `notify(signal, peer, offsets, value, op)`.
    ///
    /// # Errors
    /// Only from materialising operands.
    pub fn notify(
        &mut self,
        signal: Value,
        peer: impl Into<Operand>,
        offsets: Vec<Operand>,
        value: impl Into<Operand>,
        op: NotifyOp,
    ) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        let offsets = self.offsets(offsets)?;
        let d = self.ty(signal).dtype();
        let value = self.value(value, d)?;
        self.push_void(OpKind::Notify {
            signal,
            peer,
            offsets,
            value,
            op,
        });
        Ok(())
    }
    /// `wait(signal, offsets, expected, cmp)`.
    ///
    /// # Errors
    /// Only from materialising operands.
    pub fn wait(
        &mut self,
        signal: Value,
        offsets: Vec<Operand>,
        expected: impl Into<Operand>,
        cmp: CmpOp,
    ) -> Result<()> {
        let offsets = self.offsets(offsets)?;
        let d = self.ty(signal).dtype();
        let expected = self.value(expected, d)?;
        self.push_void(OpKind::Wait {
            signal,
            offsets,
            expected,
            cmp,
        });
        Ok(())
    }
    /// `subview(src, offset, len)`: rows `offset..offset + len` of dim 0.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a tensor or window of rank >= 1.
    pub fn subview(&mut self, src: Value, offset: impl Into<Operand>, len: Dim) -> Result<Value> {
        let offset = self.value(offset, Some(DType::Index))?;
        let ty = match self.ty(src).clone() {
            Type::Tensor(s, d) if s.rank() >= 1 => {
                let mut dims = s.0.clone();
                dims[0] = len;
                Type::Tensor(Shape(dims), d)
            }
            Type::Window(s, d) if s.rank() >= 1 => {
                let mut dims = s.0.clone();
                dims[0] = len;
                Type::Window(Shape(dims), d)
            }
            t => {
                return self.err(format!(
                    "`subview` takes a tensor or window of rank >= 1, found `{t}`"
                ))
            }
        };
        Ok(self.push(OpKind::Subview { src, offset }, ty))
    }
    /// `broadcast(ctx, src, dst, root)`.
    ///
    /// # Errors
    /// Only from materialising `root`.
    pub fn broadcast(
        &mut self,
        ctx: Value,
        src: Value,
        dst: Value,
        root: impl Into<Operand>,
    ) -> Result<()> {
        let root = self.value(root, Some(DType::Index))?;
        self.push_void(OpKind::Broadcast {
            ctx,
            src,
            dst,
            root,
        });
        Ok(())
    }
    /// `allgather(ctx, src, dst)`.
    pub fn allgather(&mut self, ctx: Value, src: Value, dst: Value) {
        self.push_void(OpKind::AllGather { ctx, src, dst });
    }
    /// `all_to_all(ctx, src, dst)`.
    pub fn all_to_all(&mut self, ctx: Value, src: Value, dst: Value) {
        self.push_void(OpKind::AllToAll { ctx, src, dst });
    }
    /// `reduce_scatter(ctx, src, dst, op)`.
    pub fn reduce_scatter(&mut self, ctx: Value, src: Value, dst: Value, op: crate::ir::ReduceOp) {
        self.push_void(OpKind::ReduceScatter { ctx, src, dst, op });
    }
    /// `allreduce(ctx, src, dst, op, mode)`.
    pub fn allreduce(
        &mut self,
        ctx: Value,
        src: Value,
        dst: Value,
        op: crate::ir::ReduceOp,
        mode: crate::ir::AllreduceMode,
    ) {
        self.push_void(OpKind::AllReduce {
            ctx,
            src,
            dst,
            op,
            mode,
        });
    }
    /// `barrier(ctx)`.
    pub fn barrier(&mut self, ctx: Value) {
        self.push_void(OpKind::Barrier(ctx));
    }
}

/// The Rust spelling of a dtype as written in kernel source (`usize` for `index`).
fn rust_name(d: DType) -> &'static str {
    d.rust_name()
}

/// The value of a float literal or literal expression ([`Operand::FloatExpr`]) in the float
/// dtype `d`: each literal rounded to `d`, each op computed in `d` ([`crate::eval::binary`]).
/// `None` for a non-float `d`.
fn float_literal_value(o: &Operand, d: DType) -> Option<crate::eval::Scalar> {
    use crate::eval::Scalar;
    match o {
        Operand::Float(x) => match d {
            DType::F32 => Some(Scalar::F32(*x as f32)),
            DType::F64 => Some(Scalar::F64(*x)),
            DType::F16 | DType::BF16 => Some(crate::eval::narrow_float(*x, d)),
            _ => None,
        },
        Operand::FloatExpr(op, a, b) => {
            crate::eval::binary(*op, float_literal_value(a, d)?, float_literal_value(b, d)?).ok()
        }
        _ => None,
    }
}
