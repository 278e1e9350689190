use crate::spec::enumeration;

mod math_fn;
mod tile_op;
use crate::types::{DType, Shape, Type};
pub(crate) use math_fn::math_library;
pub use math_fn::MathFn;
use std::fmt;
pub use tile_op::{intrinsic, ArgKind, ArgOp, Axis, Intrinsic, TileOp, INTRINSICS};

/// An SSA value: an index into its function's value table ([`Function::values`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub u32);

impl Value {
    /// The table index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// The level a function runs at (design.md, "three levels").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// The host orchestrator: allocates window buffers and dispatches per-device programs.
    Host,
    /// A per-device program, dispatched by the host with `device = r`.
    Device,
    /// A compute kernel, called from a per-device program or another compute kernel.
    Compute,
    /// A sample kernel: its first parameter is the sample index; an execution plan runs it
    /// once per sample (multi-GPU seed).
    Sample,
}

impl Level {
    /// IR spelling.
    pub fn name(self) -> &'static str {
        match self {
            Level::Host => "host",
            Level::Device => "device",
            Level::Compute => "compute",
            Level::Sample => "sample",
        }
    }
}

/// A scalar constant. Integers are held as `i128` (wide enough for every integer dtype); floats
/// keep the exact bits of their dtype (an `f32` constant is an `f32`, NaN payloads included).
#[derive(Debug, Clone, Copy)]
pub enum Const {
    /// An integer of any integer dtype.
    Int(i128),
    /// An `f32`.
    F32(f32),
    /// An `f64`.
    F64(f64),
    /// A bool.
    Bool(bool),
}

/// Constants are equal when their kinds and bits are (a NaN equals the same NaN; `-0.0` and
/// `+0.0` differ).
impl PartialEq for Const {
    fn eq(&self, other: &Const) -> bool {
        match (self, other) {
            (Const::Int(a), Const::Int(b)) => a == b,
            (Const::F32(a), Const::F32(b)) => a.to_bits() == b.to_bits(),
            (Const::F64(a), Const::F64(b)) => a.to_bits() == b.to_bits(),
            (Const::Bool(a), Const::Bool(b)) => a == b,
            _ => false,
        }
    }
}

impl Const {
    /// Whether this is a float constant.
    pub fn is_float(self) -> bool {
        matches!(self, Const::F32(_) | Const::F64(_))
    }
}

/// The text form: integers in decimal, floats as the shortest decimal that parses back to the
/// same bits in their own dtype (`0.1` for the `f32` nearest 0.1), `inf` / `-inf`, and a NaN as
/// `nan(0x7fc00000)` with its bits in hex (sign and payload kept).
impl fmt::Display for Const {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Const::Int(v) => write!(f, "{v}"),
            Const::F32(v) if v.is_nan() => write!(f, "nan(0x{:08x})", v.to_bits()),
            Const::F64(v) if v.is_nan() => write!(f, "nan(0x{:016x})", v.to_bits()),
            // `{:?}` is the shortest text that parses back to the same bits.
            Const::F32(v) => write!(f, "{v:?}"),
            Const::F64(v) => write!(f, "{v:?}"),
            Const::Bool(v) => write!(f, "{v}"),
        }
    }
}

enumeration! {
    /// Binary arithmetic and bitwise ops (elementwise on tiles, scalars broadcast).
    pub enum BinOp {
        /// `+`
        Add => "add",
        /// `-`
        Sub => "sub",
        /// `*`
        Mul => "mul",
        /// `/` (integer division truncates; division by zero is a run-time error)
        Div => "div",
        /// `%` (sign of the dividend, as in Rust)
        Rem => "rem",
        /// `min`
        Min => "min",
        /// `max`
        Max => "max",
        /// `&` (and `&&` on bool)
        And => "and",
        /// `|` (and `||` on bool)
        Or => "or",
        /// `^`
        Xor => "xor",
        /// `<<` on integers, as Rust's `wrapping_shl`: the amount is taken modulo the bit width.
        Shl => "shl",
        /// `>>` on integers, as Rust's `wrapping_shr`: arithmetic for signed dtypes, logical for
        /// unsigned; the amount is taken modulo the bit width.
        Shr => "shr",
    }
}

enumeration! {
    /// Unary ops and math intrinsics.
    pub enum UnOp {
        /// `-x`
        Neg => "neg",
        /// `!x` (bool)
        Not => "not",
        /// `sqrt(x)` (float)
        Sqrt => "sqrt",
        /// `abs(x)`
        Abs => "abs",
    }
}

impl UnOp {
    /// The Rust spelling that builds the op in a kernel as a call (`sqrt(x)`) or a method
    /// (`x.sqrt()`), or `None` for an operator (`-x`, `!x`). The macros take the list of
    /// math intrinsics from here.
    pub fn call_name(self) -> Option<&'static str> {
        match self {
            UnOp::Neg | UnOp::Not => None,
            UnOp::Sqrt | UnOp::Abs => Some(self.name()),
        }
    }
}

enumeration! {
    /// Comparison predicates, for `cmp` and for `wait` (design.md: `Eq | Ne | Ge | Gt | Le | Lt`).
    /// The discriminants are the codes `wait` passes across the binary interface
    /// (`eagle_codegen::abi::cmp_code`).
    #[repr(u32)]
    pub enum CmpOp {
        /// `==`
        Eq = 0 => "eq",
        /// `!=`
        Ne = 1 => "ne",
        /// `<`
        Lt = 2 => "lt",
        /// `<=`
        Le = 3 => "le",
        /// `>`
        Gt = 4 => "gt",
        /// `>=`
        Ge = 5 => "ge",
    }
}

impl CmpOp {
    /// Evaluates the predicate on integers.
    pub fn eval<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
        }
    }
}

enumeration! {
    /// How `notify` updates the peer's signal (tutorial seed: `op = Set | AtomicAdd`).
    /// The discriminants are the codes `notify` passes across the binary interface
    /// (`eagle_codegen::abi::notify_code`).
    #[repr(u32)]
    pub enum NotifyOp {
        /// Overwrite the signal.
        Set = 0 => "set",
        /// Atomically add to the signal.
        AtomicAdd = 1 => "atomic_add",
    }
}

/// Declares the reductions once: each line gives the keyword, from which the tile ops' names
/// and kernel signatures derive (`sum`: `row_sum`, `col_sum`, `reduce_sum`), and the binary op
/// that combines two partials.
macro_rules! reductions {
    ($(
        $(#[$doc:meta])*
        $variant:ident => $kw:literal, combine $bin:ident;
    )*) => {
        enumeration! {
            /// The combining operation of a reduction: of a tile reduction (`row_sum`) and of a
            /// reduction collective (`allreduce(.., Sum, ..)`).
            pub enum ReduceOp {
                $($(#[$doc])* $variant => $kw,)*
            }
        }

        impl ReduceOp {
            /// The elementwise binary op that combines two partials.
            pub const fn bin_op(self) -> BinOp {
                match self {
                    $(ReduceOp::$variant => BinOp::$bin,)*
                }
            }

            /// The tile ops' keywords along a row, a column and the whole tile (`row_sum`,
            /// `col_sum`, `reduce_sum`), in the order of `crate::tile::Axis`.
            pub const fn tile_names(self) -> [&'static str; 3] {
                match self {
                    $(ReduceOp::$variant => [
                        concat!("row_", $kw),
                        concat!("col_", $kw),
                        concat!("reduce_", $kw),
                    ],)*
                }
            }

            /// The tile ops' calls as a kernel writes them (`row_sum(t)`), in the order of
            /// [`ReduceOp::tile_names`].
            pub const fn tile_signatures(self) -> [&'static str; 3] {
                match self {
                    $(ReduceOp::$variant => [
                        concat!("row_", $kw, "(t)"),
                        concat!("col_", $kw, "(t)"),
                        concat!("reduce_", $kw, "(t)"),
                    ],)*
                }
            }
        }
    };
}

reductions! {
    /// `+`
    Sum => "sum", combine Add;
    /// `*`
    Prod => "prod", combine Mul;
    /// `max`
    Max => "max", combine Max;
    /// `min`
    Min => "min", combine Min;
    /// `||` over `bool` flags: whether any is set (`false` when there are none).
    Any => "any", combine Or;
    /// `&&` over `bool` flags: whether all are set (`true` when there are none).
    All => "all", combine And;
}

impl ReduceOp {
    /// Whether the result is one of the reduced elements (so it is a value of their dtype:
    /// `max`, `min`), rather than a new number (`sum`, `prod`).
    pub const fn selects(self) -> bool {
        match self {
            ReduceOp::Max | ReduceOp::Min | ReduceOp::Any | ReduceOp::All => true,
            ReduceOp::Sum | ReduceOp::Prod => false,
        }
    }

    /// Whether the op reduces `bool` flags (and only those); the others reduce numbers.
    pub const fn logical(self) -> bool {
        match self {
            ReduceOp::Any | ReduceOp::All => true,
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Max | ReduceOp::Min => false,
        }
    }

    /// Whether the op reduces elements of dtype `d` ([`ReduceOp::logical`] says which side).
    pub fn accepts(self, d: DType) -> bool {
        self.logical() == (d == DType::Bool)
    }
}

enumeration! {
    /// The algorithm of a built-in allreduce (design.md: mesh, two-phase, ring).
    pub enum AllreduceMode {
        /// Every rank reads every peer and combines locally, in rank order.
        Mesh => "mesh",
        /// Reduce-scatter (rank c combines chunk c in rank order), then allgather.
        TwoPhase => "two_phase",
        /// Chunked ring: P - 1 reduce steps then P - 1 gather steps.
        Ring => "ring",
    }
}

/// What an op does. Operands are [`Value`]s of the enclosing function.
#[derive(Debug, Clone, PartialEq)]
pub enum OpKind {
    /// A scalar constant; the result type gives the dtype.
    Const(Const),
    /// The extent of a dim as an `index` value (symbolic until specialization).
    Dim(crate::types::Dim),
    /// Elementwise binary op on scalars or tiles.
    Binary(BinOp, Value, Value),
    /// Elementwise unary op.
    Unary(UnOp, Value),
    /// Fused multiply-add `a * b + c`, one rounding.
    Fma(Value, Value, Value),
    /// Comparison; the result is `bool` (or a tile of `bool`).
    Cmp(CmpOp, Value, Value),
    /// `select(cond, a, b)`.
    Select(Value, Value, Value),
    /// Conversion to the result dtype (Rust `as` semantics; float to int saturates).
    Cast(Value),
    /// The same bits as another dtype of the same width (`x.to_bits()`, `f32::from_bits(u)`):
    /// `f32` <-> `u32`/`i32`, `f64` <-> `u64`/`i64`/`index`.
    Bitcast(Value),
    /// `x[i]`: the sub-tensor at index `i` of the leading dim.
    Slice {
        /// Tensor sliced.
        src: Value,
        /// Index into dim 0.
        index: Value,
    },
    /// `x[offset..offset + len]` along dim 0 (len from the result type): a view of the same
    /// kind (tensor or window), dtype and trailing dims.
    Subview {
        /// Tensor or window.
        src: Value,
        /// First index of dim 0.
        offset: Value,
    },
    /// Built-in broadcast: `dst` = `src` of rank `root`, on every rank.
    Broadcast {
        /// Device context.
        ctx: Value,
        /// Window read on the root.
        src: Value,
        /// Local tensor or window written.
        dst: Value,
        /// Root rank.
        root: Value,
    },
    /// Built-in allgather: chunk `q` of `dst` = chunk `q` of rank `q`'s `src` (1-D buffers of N
    /// elements in P contiguous chunks, the first `N % P` one element longer).
    AllGather {
        /// Device context.
        ctx: Value,
        /// Window.
        src: Value,
        /// Local tensor or window.
        dst: Value,
    },
    /// Built-in reduce-scatter: on rank `r`, chunk `r` of `dst` = the reduction over ranks
    /// (in rank order) of chunk `r` of `src`.
    ReduceScatter {
        /// Device context.
        ctx: Value,
        /// Window.
        src: Value,
        /// Local tensor or window.
        dst: Value,
        /// Combining op.
        op: ReduceOp,
    },
    /// Built-in allreduce: `dst` = the reduction over ranks of `src`, bit-identical on every
    /// rank.
    AllReduce {
        /// Device context.
        ctx: Value,
        /// Window.
        src: Value,
        /// Window (read by peers in two-phase and ring modes).
        dst: Value,
        /// Combining op.
        op: ReduceOp,
        /// Algorithm.
        mode: AllreduceMode,
    },
    /// Built-in all-to-all on `[P, M]` buffers: row `q` of `dst` = row `r` of rank `q`'s `src`.
    AllToAll {
        /// Device context.
        ctx: Value,
        /// Window.
        src: Value,
        /// Local tensor or window.
        dst: Value,
    },
    /// Reads one element (`x[i, j]`) of a tensor or window: a scalar.
    Elem {
        /// Tensor or window.
        src: Value,
        /// One `index` per dim.
        indices: Vec<Value>,
    },
    /// Writes one element of a tensor or window.
    SetElem {
        /// The scalar written.
        value: Value,
        /// Tensor or window.
        dst: Value,
        /// One `index` per dim.
        indices: Vec<Value>,
    },
    /// Loads a tile (shape from the result type) at `offsets` of a tensor or window.
    Load {
        /// Tensor or window read.
        src: Value,
        /// One `index` offset per dim.
        offsets: Vec<Value>,
    },
    /// Stores a tile at `offsets` of a tensor or window.
    Store {
        /// Tile stored.
        value: Value,
        /// Tensor or window written.
        dst: Value,
        /// One `index` offset per dim.
        offsets: Vec<Value>,
    },
    /// A mutable scalar variable initialised to `init`.
    Var(Value),
    /// Reads a variable.
    Read(Value),
    /// Writes a variable.
    Write(Value, Value),
    /// `for var in lo..hi { body }` (step 1).
    For {
        /// The induction variable (`index`).
        var: Value,
        /// Inclusive lower bound.
        lo: Value,
        /// Exclusive upper bound.
        hi: Value,
        /// Loop body.
        body: Block,
    },
    /// `if cond { then } else { else }`.
    If {
        /// `bool` condition.
        cond: Value,
        /// Taken when `cond` holds.
        then_body: Block,
        /// Taken otherwise.
        else_body: Block,
    },
    /// Calls a compute kernel.
    Call {
        /// Callee name.
        callee: String,
        /// Arguments, one per callee param.
        args: Vec<Value>,
    },
    /// Host: runs a per-device program on device `device`.
    Dispatch {
        /// Callee name.
        callee: String,
        /// Arguments, one per callee param (the `ctx` param is supplied by the runtime).
        args: Vec<Value>,
        /// The rank that runs it.
        device: Value,
    },
    /// `rank(ctx)`: this device's rank.
    Rank(Value),
    /// `nranks(ctx)`: the world size seen from a device.
    NRanks(Value),
    /// `world_size()` on the host.
    WorldSize,
    /// Host: one symmetric buffer per rank; shape and dtype from the result type.
    AllocWindowBuffer,
    /// Host: a rank-local view of a window buffer; shape and dtype from the result type.
    Window(Value),
    /// `put(dst, peer, src)`: copies local `src` into `dst` on rank `peer` (push).
    Put {
        /// Destination window.
        dst: Value,
        /// Peer rank.
        peer: Value,
        /// Local tensor or window.
        src: Value,
    },
    /// `get(dst, peer, src)`: copies `src` on rank `peer` into local `dst` (pull).
    Get {
        /// Local tensor or window.
        dst: Value,
        /// Peer rank.
        peer: Value,
        /// Source window.
        src: Value,
    },
    /// Tile-level remote load from a peer's window.
    RemoteLoad {
        /// Window.
        src: Value,
        /// Peer rank.
        peer: Value,
        /// Offsets into the window.
        offsets: Vec<Value>,
    },
    /// Tile-level remote store into a peer's window.
    RemoteStore {
        /// Tile stored.
        value: Value,
        /// Window.
        dst: Value,
        /// Peer rank.
        peer: Value,
        /// Offsets into the window.
        offsets: Vec<Value>,
    },
    /// Updates a signal on `peer` with release semantics.
    Notify {
        /// Signal window (integer dtype).
        signal: Value,
        /// Peer rank.
        peer: Value,
        /// Element offsets into the signal window.
        offsets: Vec<Value>,
        /// Value set or added.
        value: Value,
        /// Set or atomic add.
        op: NotifyOp,
    },
    /// Blocks until the local signal compares true against `expected` (acquire semantics).
    Wait {
        /// Local signal window.
        signal: Value,
        /// Element offsets.
        offsets: Vec<Value>,
        /// Compared value.
        expected: Value,
        /// Predicate `signal <cmp> expected`.
        cmp: CmpOp,
    },
    /// All ranks reach the barrier before any leaves it.
    Barrier(Value),
    /// A tile-algebra op (reduction, broadcast, layout, creation, matmul): what it computes,
    /// its typing and its operands are [`crate::TileOp`]'s.
    Tile(TileOp, Vec<Value>),
    /// A function of the math library (`ln x`, `atan2 y, x`), elementwise on scalars and
    /// tiles; expanded into the ops above at specialization ([`crate::math`]).
    Math(MathFn, Vec<Value>),
}

/// A place in the Rust source: the file as rustc names it (`src/heat.rs`), the 1-based line
/// and column. The macros record one for every op they build.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Loc {
    /// The source file, as `file!()` names it.
    pub file: std::sync::Arc<str>,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// The suffix errors print after an op's text: ` (at src/heat.rs:42:17)`, or nothing for an op
/// without a source location (one read from IR text without `loc(...)`).
pub fn at(loc: Option<&Loc>) -> String {
    match loc {
        Some(l) => format!(" (at {l})"),
        None => String::new(),
    }
}

/// One op: an optional result, what it does, and where in the Rust source it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// The value it defines.
    pub result: Option<Value>,
    /// The operation.
    pub kind: OpKind,
    /// The source location (`None` for ops built by passes without one, or parsed without).
    pub loc: Option<Loc>,
}

/// A straight-line list of ops (nested blocks hang off `for` and `if`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    /// Ops in program order.
    pub ops: Vec<Op>,
}

/// A function parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Source name.
    pub name: String,
    /// The value bound to it.
    pub value: Value,
    /// Written by the function (`Out<...>`).
    pub out: bool,
}

/// A function: a level, parameters, a value table and a body.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Name (unique in the module).
    pub name: String,
    /// Host, device or compute.
    pub level: Level,
    /// Parameters in order.
    pub params: Vec<Param>,
    /// Type of every value, indexed by [`Value`].
    pub values: Vec<Type>,
    /// The body.
    pub body: Block,
}

impl Function {
    /// The type of `v`.
    pub fn ty(&self, v: Value) -> &Type {
        &self.values[v.index()]
    }
    /// The type of parameter `i`.
    pub fn param_ty(&self, i: usize) -> &Type {
        self.ty(self.params[i].value)
    }
}

/// A set of functions; callees are referenced by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Module {
    /// Functions in definition order (callees before callers).
    pub functions: Vec<Function>,
}

impl Module {
    /// The function named `name`.
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// Whether function `name`, or a function it calls (directly or through calls), holds an
    /// op that reaches another rank ([`crate::OpInfo::peers`]: a collective, a remote data
    /// movement, a signal or a barrier). `true` for a function the module lacks, so a caller
    /// that uses the answer to run ranks one after another stays on the safe side.
    pub fn reaches_peers(&self, name: &str) -> bool {
        let mut seen: Vec<&str> = vec![];
        let mut todo = vec![name];
        while let Some(n) = todo.pop() {
            if seen.contains(&n) {
                continue;
            }
            seen.push(n);
            let Some(f) = self.function(n) else {
                return true;
            };
            let mut peers = false;
            f.body.walk(&mut |op| match &op.kind {
                OpKind::Call { callee, .. } => todo.push(callee),
                k => peers |= k.info().peers,
            });
            if peers {
                return true;
            }
        }
        false
    }
}

impl Block {
    /// Visits every op of the block and of the blocks nested in it, in program order (an op
    /// before the ops of its nested blocks).
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Op)) {
        for op in &self.ops {
            f(op);
            for b in op.kind.blocks() {
                b.walk(f);
            }
        }
    }

    /// [`Block::walk`] over mutable blocks: `f` sees each block (this one first, then the
    /// nested ones, in program order) and may rewrite its op list.
    pub fn walk_blocks_mut(&mut self, f: &mut impl FnMut(&mut Block)) {
        f(self);
        for op in &mut self.ops {
            for b in op.kind.blocks_mut() {
                b.walk_blocks_mut(f);
            }
        }
    }

    /// A copy with every value (operands, results, loop variables, nested blocks) renamed by
    /// `f`.
    pub fn map_values(&self, f: &mut dyn FnMut(Value) -> Value) -> Block {
        Block {
            ops: self
                .ops
                .iter()
                .map(|op| Op {
                    result: op.result.map(&mut *f),
                    kind: op.kind.map_values(f),
                    loc: op.loc.clone(),
                })
                .collect(),
        }
    }
}

impl OpKind {
    /// A copy with every value renamed by `f` (nested blocks and loop variables included).
    pub fn map_values(&self, f: &mut dyn FnMut(Value) -> Value) -> OpKind {
        use OpKind::*;
        let mut m = |v: &Value| f(*v);
        match self {
            Const(c) => Const(*c),
            Dim(d) => Dim(d.clone()),
            Binary(o, a, b) => Binary(*o, m(a), m(b)),
            Unary(o, a) => Unary(*o, m(a)),
            Fma(a, b, c) => Fma(m(a), m(b), m(c)),
            Cmp(o, a, b) => Cmp(*o, m(a), m(b)),
            Select(a, b, c) => Select(m(a), m(b), m(c)),
            Cast(a) => Cast(m(a)),
            Bitcast(a) => Bitcast(m(a)),
            Slice { src, index } => Slice {
                src: m(src),
                index: m(index),
            },
            Subview { src, offset } => Subview {
                src: m(src),
                offset: m(offset),
            },
            Elem { src, indices } => Elem {
                src: m(src),
                indices: indices.iter().map(&mut m).collect(),
            },
            SetElem {
                value,
                dst,
                indices,
            } => SetElem {
                value: m(value),
                dst: m(dst),
                indices: indices.iter().map(&mut m).collect(),
            },
            Load { src, offsets } => Load {
                src: m(src),
                offsets: offsets.iter().map(&mut m).collect(),
            },
            Store {
                value,
                dst,
                offsets,
            } => Store {
                value: m(value),
                dst: m(dst),
                offsets: offsets.iter().map(&mut m).collect(),
            },
            Var(a) => Var(m(a)),
            Read(a) => Read(m(a)),
            Write(a, b) => Write(m(a), m(b)),
            For { var, lo, hi, body } => {
                let (var, lo, hi) = (m(var), m(lo), m(hi));
                For {
                    var,
                    lo,
                    hi,
                    body: body.map_values(f),
                }
            }
            If {
                cond,
                then_body,
                else_body,
            } => {
                let cond = m(cond);
                If {
                    cond,
                    then_body: then_body.map_values(f),
                    else_body: else_body.map_values(f),
                }
            }
            Call { callee, args } => Call {
                callee: callee.clone(),
                args: args.iter().map(&mut m).collect(),
            },
            Dispatch {
                callee,
                args,
                device,
            } => Dispatch {
                callee: callee.clone(),
                args: args.iter().map(&mut m).collect(),
                device: m(device),
            },
            Rank(c) => Rank(m(c)),
            NRanks(c) => NRanks(m(c)),
            WorldSize => WorldSize,
            AllocWindowBuffer => AllocWindowBuffer,
            Window(b) => Window(m(b)),
            Put { dst, peer, src } => Put {
                dst: m(dst),
                peer: m(peer),
                src: m(src),
            },
            Get { dst, peer, src } => Get {
                dst: m(dst),
                peer: m(peer),
                src: m(src),
            },
            RemoteLoad { src, peer, offsets } => RemoteLoad {
                src: m(src),
                peer: m(peer),
                offsets: offsets.iter().map(&mut m).collect(),
            },
            RemoteStore {
                value,
                dst,
                peer,
                offsets,
            } => RemoteStore {
                value: m(value),
                dst: m(dst),
                peer: m(peer),
                offsets: offsets.iter().map(&mut m).collect(),
            },
            Notify {
                signal,
                peer,
                offsets,
                value,
                op,
            } => Notify {
                signal: m(signal),
                peer: m(peer),
                offsets: offsets.iter().map(&mut m).collect(),
                value: m(value),
                op: *op,
            },
            Wait {
                signal,
                offsets,
                expected,
                cmp,
            } => Wait {
                signal: m(signal),
                offsets: offsets.iter().map(&mut m).collect(),
                expected: m(expected),
                cmp: *cmp,
            },
            Barrier(c) => Barrier(m(c)),
            Tile(op, args) => Tile(op.clone(), args.iter().map(&mut m).collect()),
            Math(f, args) => Math(*f, args.iter().map(&mut m).collect()),
            Broadcast {
                ctx,
                src,
                dst,
                root,
            } => Broadcast {
                ctx: m(ctx),
                src: m(src),
                dst: m(dst),
                root: m(root),
            },
            AllGather { ctx, src, dst } => AllGather {
                ctx: m(ctx),
                src: m(src),
                dst: m(dst),
            },
            ReduceScatter { ctx, src, dst, op } => ReduceScatter {
                ctx: m(ctx),
                src: m(src),
                dst: m(dst),
                op: *op,
            },
            AllReduce {
                ctx,
                src,
                dst,
                op,
                mode,
            } => AllReduce {
                ctx: m(ctx),
                src: m(src),
                dst: m(dst),
                op: *op,
                mode: *mode,
            },
            AllToAll { ctx, src, dst } => AllToAll {
                ctx: m(ctx),
                src: m(src),
                dst: m(dst),
            },
        }
    }

    /// The blocks nested in the op: a `for` body, an `if`'s then and else blocks.
    pub fn blocks(&self) -> Vec<&Block> {
        match self {
            OpKind::For { body, .. } => vec![body],
            OpKind::If {
                then_body,
                else_body,
                ..
            } => vec![then_body, else_body],
            OpKind::Const(_)
            | OpKind::Dim(_)
            | OpKind::Binary(..)
            | OpKind::Unary(..)
            | OpKind::Fma(..)
            | OpKind::Cmp(..)
            | OpKind::Select(..)
            | OpKind::Cast(_)
            | OpKind::Bitcast(_)
            | OpKind::Slice { .. }
            | OpKind::Subview { .. }
            | OpKind::Broadcast { .. }
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::Elem { .. }
            | OpKind::SetElem { .. }
            | OpKind::Load { .. }
            | OpKind::Store { .. }
            | OpKind::Var(_)
            | OpKind::Read(_)
            | OpKind::Write(..)
            | OpKind::Call { .. }
            | OpKind::Dispatch { .. }
            | OpKind::Rank(_)
            | OpKind::NRanks(_)
            | OpKind::WorldSize
            | OpKind::AllocWindowBuffer
            | OpKind::Window(_)
            | OpKind::Put { .. }
            | OpKind::Get { .. }
            | OpKind::RemoteLoad { .. }
            | OpKind::RemoteStore { .. }
            | OpKind::Notify { .. }
            | OpKind::Wait { .. }
            | OpKind::Barrier(_)
            | OpKind::Tile(..)
            | OpKind::Math(..) => vec![],
        }
    }

    /// [`OpKind::blocks`], mutable.
    pub fn blocks_mut(&mut self) -> Vec<&mut Block> {
        match self {
            OpKind::For { body, .. } => vec![body],
            OpKind::If {
                then_body,
                else_body,
                ..
            } => vec![then_body, else_body],
            other => {
                debug_assert!(other.blocks().is_empty());
                vec![]
            }
        }
    }

    /// Every value operand, in text order (nested blocks excluded).
    pub fn operands(&self) -> Vec<Value> {
        use OpKind::*;
        match self {
            Const(_) | Dim(_) | WorldSize | AllocWindowBuffer => vec![],
            Binary(_, a, b) | Cmp(_, a, b) | Write(a, b) => vec![*a, *b],
            Unary(_, a)
            | Cast(a)
            | Bitcast(a)
            | Var(a)
            | Read(a)
            | Rank(a)
            | NRanks(a)
            | Window(a)
            | Barrier(a) => vec![*a],
            Fma(a, b, c) | Select(a, b, c) => vec![*a, *b, *c],
            Slice { src, index } => vec![*src, *index],
            Subview { src, offset } => vec![*src, *offset],
            Broadcast {
                ctx,
                src,
                dst,
                root,
            } => vec![*ctx, *src, *dst, *root],
            AllGather { ctx, src, dst }
            | ReduceScatter { ctx, src, dst, .. }
            | AllReduce { ctx, src, dst, .. }
            | AllToAll { ctx, src, dst } => vec![*ctx, *src, *dst],
            Load { src, offsets }
            | Elem {
                src,
                indices: offsets,
            } => std::iter::once(*src)
                .chain(offsets.iter().copied())
                .collect(),
            SetElem {
                value,
                dst,
                indices,
            } => [*value, *dst]
                .into_iter()
                .chain(indices.iter().copied())
                .collect(),
            Store {
                value,
                dst,
                offsets,
            } => [*value, *dst]
                .into_iter()
                .chain(offsets.iter().copied())
                .collect(),
            For { lo, hi, .. } => vec![*lo, *hi],
            If { cond, .. } => vec![*cond],
            Call { args, .. } | Tile(_, args) | Math(_, args) => args.clone(),
            Dispatch { args, device, .. } => args
                .iter()
                .copied()
                .chain(std::iter::once(*device))
                .collect(),
            Put { dst, peer, src } | Get { dst, peer, src } => vec![*dst, *peer, *src],
            RemoteLoad { src, peer, offsets } => [*src, *peer]
                .into_iter()
                .chain(offsets.iter().copied())
                .collect(),
            RemoteStore {
                value,
                dst,
                peer,
                offsets,
            } => [*value, *dst, *peer]
                .into_iter()
                .chain(offsets.iter().copied())
                .collect(),
            Notify {
                signal,
                peer,
                offsets,
                value,
                ..
            } => [*signal, *peer]
                .into_iter()
                .chain(offsets.iter().copied())
                .chain(std::iter::once(*value))
                .collect(),
            Wait {
                signal,
                offsets,
                expected,
                ..
            } => std::iter::once(*signal)
                .chain(offsets.iter().copied())
                .chain(std::iter::once(*expected))
                .collect(),
        }
    }
}

/// Shorthand used by the builder and passes: a tile or scalar's element dtype.
pub(crate) fn elem(t: &Type) -> Option<DType> {
    match t {
        Type::Scalar(d) | Type::Tile(_, d) => Some(*d),
        _ => None,
    }
}

/// A shape helper for builders of `Load` results.
pub(crate) fn tile_of(shape: Shape, d: DType) -> Type {
    Type::Tile(shape, d)
}
