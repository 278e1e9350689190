use std::borrow::Cow;
use std::fmt;

/// Element types. `Index` is a signed 64-bit integer used for extents, offsets and ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    /// `bool`, one byte in memory (0 or 1).
    Bool,
    /// `i8`: a storage dtype, computed in `i32` and wrapped to 8 bits after each op.
    I8,
    /// `u8`: a storage dtype, computed in `u32` and wrapped to 8 bits after each op.
    U8,
    /// `i16`: a storage dtype, computed in `i32` and wrapped to 16 bits after each op.
    I16,
    /// `u16`: a storage dtype, computed in `u32` and wrapped to 16 bits after each op.
    U16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `f32`, IEEE-754 binary32.
    F32,
    /// `f64`, IEEE-754 binary64.
    F64,
    /// `f16`, IEEE-754 binary16 (`half::f16` on the host): a storage dtype, computed in `f32`
    /// and rounded to nearest even after each op.
    F16,
    /// `bf16`, bfloat16 (`half::bf16` on the host: 8 exponent bits, 8 significand bits): a
    /// storage dtype, computed in `f32` and rounded to nearest even after each op.
    BF16,
    /// `f8e4m3`, OCP 8-bit float E4M3 (`float8::F8E4M3` on the host: 4 exponent bits, bias 7,
    /// 3 significand bits, no infinities, NaN `S.1111.111`, largest 448): a storage dtype,
    /// computed in `f32` and rounded to nearest even after each op; a value beyond 448 after
    /// rounding becomes NaN (the OCP non-saturating rule; `saturate` clamps instead).
    F8E4M3,
    /// `f8e5m2`, OCP 8-bit float E5M2 (`float8::F8E5M2` on the host: 5 exponent bits, bias 15,
    /// 2 significand bits, IEEE infinities and NaNs, largest 57344): a storage dtype, computed
    /// in `f32` and rounded to nearest even after each op, overflowing to infinity.
    F8E5M2,
    /// `e8m0`, the OCP MX scale dtype (`eagle::E8M0` on the host): 8 exponent bits, bias 127,
    /// no sign and no significand, so the values are the powers of two `2^-127 ..= 2^127`, and
    /// `0xff` is NaN. Computed in `f32`; a value is rounded down to a power of two (see
    /// [`crate::math::narrow::E8M0`]).
    E8M0,
    /// `index` (Rust `usize` in kernel source), signed 64-bit in the IR.
    Index,
}

impl DType {
    /// All dtypes, in text order.
    pub const ALL: [DType; 17] = [
        DType::Bool,
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::I64,
        DType::U32,
        DType::U64,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::E8M0,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::Index,
    ];

    /// Size in bytes of one element in memory.
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 | DType::E8M0 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::Index => 8,
        }
    }
    /// The IR (and Rust) spelling: `f32`, `index`, ...
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::E8M0 => "e8m0",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::Index => "index",
        }
    }
    /// The Rust spelling, as written in kernels and in `as` casts (`usize` for `index`).
    pub fn rust_name(self) -> &'static str {
        if self == DType::Index {
            "usize"
        } else {
            self.name()
        }
    }
    /// Parses an IR spelling; `usize` is accepted as the Rust spelling of `index`.
    pub fn from_name(s: &str) -> Option<DType> {
        if s == "usize" {
            return Some(DType::Index);
        }
        DType::ALL.into_iter().find(|d| d.name() == s)
    }
    /// Whether a bitcast (`to_bits`, `from_bits`) goes from `self` to `to`: a float and an
    /// integer of the same width (`f16`/`bf16` and `u16`/`i16`, `f32` and `u32`/`i32`, `f64` and
    /// `u64`/`i64`/`index`).
    pub fn bitcasts_to(self, to: DType) -> bool {
        self != DType::Bool
            && to != DType::Bool
            && self.size() == to.size()
            && self.is_float() != to.is_float()
    }
    /// The unsigned integer dtype holding the bit pattern of a float dtype (`u8` for the 8-bit
    /// floats, `u16` for `f16`/`bf16`, `u32`, `u64`): what `x.to_bits()` gives. `None` for a
    /// dtype that is not a float.
    pub fn bits_dtype(self) -> Option<DType> {
        match (self.is_float(), self.size()) {
            (false, _) => None,
            (true, 1) => Some(DType::U8),
            (true, 2) => Some(DType::U16),
            (true, 4) => Some(DType::U32),
            (true, _) => Some(DType::U64),
        }
    }
    /// Whether this is a float dtype.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64) || self.is_narrow_float()
    }
    /// Whether this is a float storage dtype (`f16 bf16 f8e4m3 f8e5m2 e8m0`): one with a
    /// [`crate::math::narrow::Format`], held in memory as its bit pattern and computed in `f32`.
    pub fn is_narrow_float(self) -> bool {
        matches!(
            self,
            DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 | DType::E8M0
        )
    }
    /// The dtype this one is computed in: `i32` for `i8`/`i16`, `u32` for `u8`/`u16`, `f32`
    /// for the float storage dtypes, itself for every other dtype. Specialization widens every value of a
    /// storage dtype to its compute dtype ([`crate::narrow`]); memory keeps the storage dtype.
    pub fn compute(self) -> DType {
        match self {
            DType::I8 | DType::I16 => DType::I32,
            DType::U8 | DType::U16 => DType::U32,
            d if d.is_narrow_float() => DType::F32,
            d => d,
        }
    }
    /// Whether this is a storage dtype (`i8 u8 i16 u16 f16 bf16 f8e4m3 f8e5m2 e8m0`), computed in a wider one
    /// ([`DType::compute`]).
    pub fn is_narrow(self) -> bool {
        self.compute() != self
    }
    /// Any integer dtype, `index` included (not `bool`).
    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8
                | DType::U8
                | DType::I16
                | DType::U16
                | DType::I32
                | DType::I64
                | DType::U32
                | DType::U64
                | DType::Index
        )
    }
    /// The least and the greatest value of an integer dtype (`index` is a signed 64-bit
    /// integer, though a float converts to it as to `usize`: `prim::float_to_int`); `None` for
    /// `bool` and the floats.
    pub fn int_range(self) -> Option<(i128, i128)> {
        if !self.is_int() {
            return None;
        }
        let bits = 8 * self.size() as u32;
        Some(if self.is_signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        })
    }
    /// Signed integers and `index`.
    pub fn is_signed(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::Index
        )
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One extent of a shape: a constant, a symbol bound at specialization (`dynamic!("NR")`), or
/// a derived dim, arithmetic on them (`NR * 16`, `M / NR`, `N + 2`), written in a signature
/// as a const block `Tensor<f32, { NR * 16 }>` (built by Rust's `*`, `/`, `+`, `-` on
/// [`Dim`]s and integers). A derived dim is evaluated when its symbols are bound, and every
/// relation is checked: an argument whose extent differs from its derived dim, or a division
/// that is not exact, is an error before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A constant extent.
    Const(u64),
    /// A symbolic extent, bound when the program is invoked.
    Sym(Cow<'static, str>),
    /// A derived extent: `lhs op rhs`.
    Expr(std::sync::Arc<DimExpr>),
}

/// The arithmetic of a derived dim ([`Dim::Expr`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DimExpr {
    /// The operation.
    pub op: DimOp,
    /// Left operand.
    pub lhs: Dim,
    /// Right operand.
    pub rhs: Dim,
}

/// The operations of a derived dim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DimOp {
    /// `a + b`
    Add,
    /// `a - b` (must not go below 0)
    Sub,
    /// `a * b`
    Mul,
    /// `a / b` (must be exact)
    Div,
}

impl DimOp {
    /// The operator as written (`*`).
    pub fn symbol(self) -> &'static str {
        match self {
            DimOp::Add => "+",
            DimOp::Sub => "-",
            DimOp::Mul => "*",
            DimOp::Div => "/",
        }
    }
}

/// Why a derived dim has no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DimError {
    /// A symbol without a binding.
    Unbound(String),
    /// `a / b` with a remainder, or a division by 0: the expression and both values.
    NotExact {
        /// The division (`(M/NR)`).
        expr: String,
        /// Dividend.
        a: u64,
        /// Divisor.
        b: u64,
    },
    /// `a - b` below zero, or a result past `u64`: the expression and both values.
    OutOfRange {
        /// The expression.
        expr: String,
        /// Left value.
        a: u64,
        /// Right value.
        b: u64,
    },
}

impl DimError {
    /// What is wrong, without the fix: ``` `(NR / TP)` is 4 / 3, which is not exact ```.
    pub fn what(&self) -> String {
        match self {
            DimError::Unbound(s) => format!("dim `{s}` is unbound"),
            DimError::NotExact { expr, a, b: 0 } => {
                format!("`{expr}` is {a} / 0, a division by zero")
            }
            DimError::NotExact { expr, a, b } => {
                format!("`{expr}` is {a} / {b}, which is not exact")
            }
            DimError::OutOfRange { expr, a, b } => {
                format!("`{expr}` of {a} and {b} is not an extent (below 0 or too large)")
            }
        }
    }

    /// The fix, where one is known (empty otherwise).
    pub fn fix(&self) -> &'static str {
        match self {
            DimError::NotExact { b: 0, .. } => "bind the divisor to a positive extent",
            DimError::NotExact { .. } => "choose extents that divide",
            DimError::Unbound(_) | DimError::OutOfRange { .. } => "",
        }
    }
}

impl fmt::Display for DimError {
    /// [`DimError::what`], then `; ` and [`DimError::fix`] where there is one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fix() {
            "" => write!(f, "{}", self.what()),
            fix => write!(f, "{}; {fix}", self.what()),
        }
    }
}

impl Dim {
    /// A symbolic dim from a static name (what `dynamic!("NR")` expands to).
    pub const fn sym_static(name: &'static str) -> Dim {
        Dim::Sym(Cow::Borrowed(name))
    }
    /// The constant extent, if bound.
    pub fn as_const(&self) -> Option<u64> {
        match self {
            Dim::Const(n) => Some(*n),
            Dim::Sym(_) | Dim::Expr(_) => None,
        }
    }
    /// `lhs op rhs`, folded when both are constants and the result is exact.
    pub fn derived(op: DimOp, lhs: Dim, rhs: Dim) -> Dim {
        if let (Dim::Const(a), Dim::Const(b)) = (&lhs, &rhs) {
            let v = match op {
                DimOp::Add => a.checked_add(*b),
                DimOp::Sub => a.checked_sub(*b),
                DimOp::Mul => a.checked_mul(*b),
                DimOp::Div if *b != 0 && a % b == 0 => Some(a / b),
                DimOp::Div => None,
            };
            if let Some(v) = v {
                return Dim::Const(v);
            }
        }
        Dim::Expr(std::sync::Arc::new(DimExpr { op, lhs, rhs }))
    }
    /// The symbols the dim names, in order.
    pub fn symbols(&self) -> Vec<String> {
        match self {
            Dim::Const(_) => vec![],
            Dim::Sym(s) => vec![s.to_string()],
            Dim::Expr(e) => {
                let mut v = e.lhs.symbols();
                v.extend(e.rhs.symbols());
                v
            }
        }
    }
    /// The extent, with symbols looked up in `bound`.
    ///
    /// # Errors
    /// [`DimError`]: an unbound symbol, an inexact division, a subtraction below zero.
    pub fn eval(&self, bound: &dyn Fn(&str) -> Option<u64>) -> Result<u64, DimError> {
        match self {
            Dim::Const(n) => Ok(*n),
            Dim::Sym(s) => bound(s).ok_or_else(|| DimError::Unbound(s.to_string())),
            Dim::Expr(e) => {
                let (a, b) = (e.lhs.eval(bound)?, e.rhs.eval(bound)?);
                let v = match e.op {
                    DimOp::Add => a.checked_add(b),
                    DimOp::Sub => a.checked_sub(b),
                    DimOp::Mul => a.checked_mul(b),
                    DimOp::Div => {
                        if b == 0 || a % b != 0 {
                            return Err(DimError::NotExact {
                                expr: self.to_string(),
                                a,
                                b,
                            });
                        }
                        Some(a / b)
                    }
                };
                v.ok_or_else(|| DimError::OutOfRange {
                    expr: self.to_string(),
                    a,
                    b,
                })
            }
        }
    }
    /// The value of the one unbound symbol of this dim that makes it equal `extent`, when the
    /// dim is that symbol combined with bound parts by `+`, `-` or `*` (`NR * 16 = 48` gives
    /// `NR = 3`); `None` otherwise.
    pub fn solve(&self, extent: u64, bound: &dyn Fn(&str) -> Option<u64>) -> Option<(String, u64)> {
        match self {
            Dim::Sym(s) if bound(s).is_none() => Some((s.to_string(), extent)),
            Dim::Expr(e) => {
                let (l, r) = (e.lhs.eval(bound).ok(), e.rhs.eval(bound).ok());
                match (e.op, l, r) {
                    (DimOp::Add, None, Some(b)) => e.lhs.solve(extent.checked_sub(b)?, bound),
                    (DimOp::Add, Some(a), None) => e.rhs.solve(extent.checked_sub(a)?, bound),
                    (DimOp::Sub, None, Some(b)) => e.lhs.solve(extent.checked_add(b)?, bound),
                    (DimOp::Sub, Some(a), None) => e.rhs.solve(a.checked_sub(extent)?, bound),
                    (DimOp::Mul, None, Some(b)) if b != 0 && extent.is_multiple_of(b) => {
                        e.lhs.solve(extent / b, bound)
                    }
                    (DimOp::Mul, Some(a), None) if a != 0 && extent.is_multiple_of(a) => {
                        e.rhs.solve(extent / a, bound)
                    }
                    (DimOp::Div, None, Some(b)) => e.lhs.solve(extent.checked_mul(b)?, bound),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// Derived dims from Rust arithmetic: `NR * 16`, `M / NR`, `N + 2`, `L - 1` with `Dim`s and
/// integer extents on either side (see [`Dim`]).
macro_rules! dim_ops {
    ($($tr:ident $m:ident $op:ident),*) => {$(
        impl std::ops::$tr<Dim> for Dim {
            type Output = Dim;
            fn $m(self, rhs: Dim) -> Dim {
                Dim::derived(DimOp::$op, self, rhs)
            }
        }
        impl std::ops::$tr<usize> for Dim {
            type Output = Dim;
            fn $m(self, rhs: usize) -> Dim {
                Dim::derived(DimOp::$op, self, Dim::Const(rhs as u64))
            }
        }
        impl std::ops::$tr<Dim> for usize {
            type Output = Dim;
            fn $m(self, rhs: Dim) -> Dim {
                Dim::derived(DimOp::$op, Dim::Const(self as u64), rhs)
            }
        }
    )*};
}
dim_ops!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div);

/// A constant, a symbol, or a derived dim in parentheses, `(NR * 16)`, `((M / NR) + 2)`: the form
/// the IR text parser reads back.
impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Const(n) => write!(f, "{n}"),
            Dim::Sym(s) => f.write_str(s),
            Dim::Expr(e) => write!(f, "({} {} {})", e.lhs, e.op.symbol(), e.rhs),
        }
    }
}

/// A row-major shape.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(pub Vec<Dim>);

impl Shape {
    /// Whether a buffer of this shape takes one row per rank of buffers of shape `src`: the
    /// row form of `allgather` (PyPTO's), `[NR, M, ...]` from one row `[1, M, ...]`. Two equal
    /// shapes are not the row form (they are the chunked form, which gives the same result
    /// where both apply, at P = 1).
    pub fn holds_rows_of(&self, src: &Shape) -> bool {
        let (d, s) = (&self.0, &src.0);
        d.len() == s.len()
            && !s.is_empty()
            && s[0] == Dim::Const(1)
            && d[0] != Dim::Const(1)
            && d[1..] == s[1..]
    }

    /// Whether a block view of this shape of a buffer of shape `src`, whose offsets past dim 0
    /// are all zero (`trailing_offsets_zero`), takes whole rows of it: its extents past dim 0
    /// are `src`'s (a rank-1 view always). Such a view is contiguous, as a row `subview` is; the
    /// verifier and `views::lower_views` both hold views to this rule.
    pub fn whole_rows_of(&self, src: &Shape, trailing_offsets_zero: bool) -> bool {
        trailing_offsets_zero && self.0.get(1..) == src.0.get(1..)
    }

    /// A shape of constant extents.
    pub fn of(dims: &[u64]) -> Shape {
        Shape(dims.iter().map(|&d| Dim::Const(d)).collect())
    }
    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    /// The constant extents, or `None` while a dim is symbolic.
    pub fn consts(&self) -> Option<Vec<u64>> {
        self.0.iter().map(Dim::as_const).collect()
    }
    /// Element count, or `None` while a dim is symbolic or when the count overflows `u64`.
    pub fn numel(&self) -> Option<u64> {
        self.consts()?
            .iter()
            .try_fold(1u64, |a, &b| a.checked_mul(b))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// The type of an IR value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Type {
    /// A scalar.
    Scalar(DType),
    /// A tensor in device (or host) memory, row-major and contiguous.
    Tensor(Shape, DType),
    /// A tile: a small on-chip block of elements, the unit of load/store and elementwise math.
    Tile(Shape, DType),
    /// A rank-local view of a window buffer (symmetric memory): one allocation per rank.
    Window(Shape, DType),
    /// A window buffer handle on the host (`alloc_window_buffer`).
    WinBuf(Shape, DType),
    /// The device context (`ctx`): rank and world size.
    Ctx,
    /// A mutable variable (`let mut`) holding a scalar or a tile (the type it holds).
    Ref(Box<Type>),
}

impl Type {
    /// [`Shape::holds_rows_of`] on two buffer types (false where either has no shape): whether
    /// an allgather from `src` into `self` is the row form.
    pub fn holds_rows_of(&self, src: &Type) -> bool {
        match (self.shape(), src.shape()) {
            (Some(d), Some(s)) => d.holds_rows_of(s),
            _ => false,
        }
    }

    /// `self` with its dtype replaced by its compute dtype ([`DType::compute`]; scalars,
    /// tiles and variables only): the type a storage-dtype value is computed in.
    pub fn widened(&self) -> Type {
        match self {
            Type::Scalar(d) => Type::Scalar(d.compute()),
            Type::Tile(s, d) => Type::Tile(s.clone(), d.compute()),
            Type::Ref(t) => Type::Ref(Box::new(t.widened())),
            t => t.clone(),
        }
    }

    /// Element dtype of scalars, tensors, tiles, windows and refs.
    pub fn dtype(&self) -> Option<DType> {
        match self {
            Type::Scalar(d) => Some(*d),
            Type::Ref(t) => t.dtype(),
            Type::Tensor(_, d) | Type::Tile(_, d) | Type::Window(_, d) | Type::WinBuf(_, d) => {
                Some(*d)
            }
            Type::Ctx => None,
        }
    }
    /// Shape of tensors, tiles and windows.
    pub fn shape(&self) -> Option<&Shape> {
        match self {
            Type::Tensor(s, _) | Type::Tile(s, _) | Type::Window(s, _) | Type::WinBuf(s, _) => {
                Some(s)
            }
            _ => None,
        }
    }
    /// Whether values of this type live in addressable memory (tensor or window).
    pub fn is_memory(&self) -> bool {
        matches!(self, Type::Tensor(..) | Type::Window(..))
    }
    /// Applies `f` to every dim of the type.
    pub fn map_dims(&self, f: &mut impl FnMut(&Dim) -> Dim) -> Type {
        let m = |s: &Shape, f: &mut dyn FnMut(&Dim) -> Dim| Shape(s.0.iter().map(f).collect());
        match self {
            Type::Tensor(s, d) => Type::Tensor(m(s, f), *d),
            Type::Tile(s, d) => Type::Tile(m(s, f), *d),
            Type::Window(s, d) => Type::Window(m(s, f), *d),
            Type::WinBuf(s, d) => Type::WinBuf(m(s, f), *d),
            Type::Ref(t) => Type::Ref(Box::new(t.map_dims(f))),
            t => t.clone(),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Scalar(d) => write!(f, "{d}"),
            Type::Tensor(s, d) => write!(f, "tensor<{s}, {d}>"),
            Type::Tile(s, d) => write!(f, "tile<{s}, {d}>"),
            Type::Window(s, d) => write!(f, "window<{s}, {d}>"),
            Type::WinBuf(s, d) => write!(f, "winbuf<{s}, {d}>"),
            Type::Ctx => f.write_str("ctx"),
            Type::Ref(t) => write!(f, "ref<{t}>"),
        }
    }
}
