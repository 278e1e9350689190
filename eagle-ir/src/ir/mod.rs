use crate::spec::enumeration;

pub(crate) mod form;
mod info;
mod math_fn;
mod op_kinds;
pub use info::{Levels, OpInfo};
use op_kinds::*;
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

impl crate::entity::EntityRef for Value {
    fn new(i: usize) -> Value {
        Value(i as u32)
    }
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// An op's handle: an index into its function's op arena ([`Function::ops`]). Blocks list
/// handles; side facts about ops are [`crate::entity::SecondaryMap`]s keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u32);

impl crate::entity::EntityRef for OpId {
    fn new(i: usize) -> OpId {
        OpId(i as u32)
    }
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// A function's op arena: every op it holds, by handle. An op no block lists (one a pass
/// replaced) stays in the arena until [`Function::compact`].
pub type Ops = crate::entity::PrimaryMap<OpId, Op>;

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
    /// Whether every bit of the constant is zero (`0`, `+0.0`, `false`; not `-0.0`).
    pub fn is_zero_bits(self) -> bool {
        match self {
            Const::Int(i) => i == 0,
            Const::F32(x) => x.to_bits() == 0,
            Const::F64(x) => x.to_bits() == 0,
            Const::Bool(b) => !b,
        }
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
    /// The predicate that holds exactly where this one does not (on integers; `lt` of a NaN
    /// is false, and so is `ge`).
    pub fn negated(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
        }
    }
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

            /// The running form's names: the kernel's (`cumsum`) and the IR keywords along
            /// axis 0 (down each column, `cumsum_0`) and axis 1 (along each row,
            /// `cumsum_1`).
            pub const fn scan_names(self) -> [&'static str; 3] {
                match self {
                    $(ReduceOp::$variant => [
                        concat!("cum", $kw),
                        concat!("cum", $kw, "_0"),
                        concat!("cum", $kw, "_1"),
                    ],)*
                }
            }

            /// The running form's call as a kernel writes it (`cumsum(t, axis)`).
            pub const fn scan_signature(self) -> &'static str {
                match self {
                    $(ReduceOp::$variant => concat!("cum", $kw, "(t, axis)"),)*
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

enumeration! {
    /// Why a `trap_if` stops its rank: each kind has one message ([`Trap::message`]), with
    /// the op's two values in place of `{a}` and `{b}`. The lowerings that build `trap_if`
    /// (the variable-size collectives) report their checks in their own words this way.
    pub enum Trap {
        /// More rows arrive at `all_to_all_v`/`allgather_v` than the receive buffer holds.
        RecvCapacity => "recv_capacity",
        /// A rank's send counts reach past its send buffer (`all_to_all_v`, `allgather_v`).
        SendOverrun => "send_overrun",
        /// `world_rank(group, q)` of a `q` past the group's ranks.
        GroupRank => "group_rank",
        /// A `broadcast` within a group whose root is past the group's ranks.
        GroupRoot => "group_root",
        /// A rank whose `split` color is negative (in no group) uses the group.
        NoGroup => "no_group",
        /// `world_rank(ctx, q)` of the world's context with a `q` past the world's ranks.
        WorldRank => "world_rank",
        /// A block view (`subview(x, [offsets], [extents])`) whose offset along a dim is past
        /// the last start at which its extent fits in the viewed buffer.
        ViewOffset => "view_offset",
        /// An access through a block view (`load`, `store`, an element) that reaches past the
        /// view's extent along a dim.
        ViewAccess => "view_access",
    }
}

impl Trap {
    /// The message, with `{a}` and `{b}` for the op's two values.
    pub const fn message(self) -> &'static str {
        match self {
            Trap::RecvCapacity => "{a} rows arrive (the sum of the receive counts) but the receive buffer holds {b} rows; give it at least {a} rows (the most that can arrive: every rank's largest send count to this rank, summed)",
            Trap::SendOverrun => "a rank's send counts take {a} rows of its send buffer but it holds {b} rows; the counts must sum to at most the send buffer's rows",
            Trap::GroupRank => "`world_rank` of group rank {a}, but the group's ranks are those below {b}; reduce the rank modulo `nranks(group)`",
            Trap::GroupRoot => "`broadcast` within a group from root {a}, but the group's ranks are those below {b}; the root is a group rank: give one below `nranks(group)`",
            Trap::NoGroup => "world rank {a} is in no group of this split (its color is negative: `UNDEFINED`) but uses the group; use a split's group only on the ranks it gives a color of 0 or more, behind an `if` (both sides of a `select` are computed)",
            Trap::WorldRank => "`world_rank` of rank {a}, but the world's ranks are those below {b}; reduce the rank modulo `nranks(ctx)`",
            Trap::ViewOffset => "a block view starts at offset {a} along a dim, past {b}, the last start at which its extent fits in the buffer it views; keep each offset plus the view's extent within the buffer",
            Trap::ViewAccess => "an access through a block view starts at {a} along a dim, past {b}, the last start at which it fits in the view's extent; an access through `subview(x, [offsets], [extents])` stays within those extents",
        }
    }
}

op_kinds! {
    /// A scalar constant; the result type gives the dtype.
    tuple Const { .0 => f0: attr(Const) } "const $f0" => value(pure(info("a constant", Levels::ALL))), typed |t| t.constant(*f0);
    /// The extent of a dim as an `index` value (symbolic until specialization).
    tuple Dim { .0 => f0: attr(crate::types::Dim) } "dim $f0" => value(pure(info("a dimension", Levels::ALL))), typed |t| t.index_result();
    /// Elementwise binary op on scalars or tiles.
    tuple Binary { .0 => f0: attr(BinOp), .1 => f1: val, .2 => f2: val } "$f0 $f1, $f2" => OpInfo {
            // Integer `div` and `rem` fail on a zero divisor: not pure.
            pure: !matches!(f0, BinOp::Div | BinOp::Rem),
            ..elementwise()
        }, typed |t| t.arithmetic();
    /// Elementwise unary op.
    tuple Unary { .0 => f0: attr(UnOp), .1 => f1: val } "$f0 $f1" => elementwise(), typed |t| t.arithmetic();
    /// Fused multiply-add `a * b + c`, one rounding.
    tuple Fma { .0 => f0: val, .1 => f1: val, .2 => f2: val } "fma $f0, $f1, $f2" => elementwise(), typed |t| t.arithmetic();
    /// Comparison; the result is `bool` (or a tile of `bool`).
    tuple Cmp { .0 => f0: attr(CmpOp), .1 => f1: val, .2 => f2: val } "cmp $f0 $f1, $f2" => elementwise(), typed |t| t.arithmetic();
    /// `select(cond, a, b)`.
    tuple Select { .0 => f0: val, .1 => f1: val, .2 => f2: val } "select $f0, $f1, $f2" => elementwise(), typed |t| t.arithmetic();
    /// Conversion to the result dtype (Rust `as` semantics; float to int saturates).
    tuple Cast { .0 => f0: val } "cast $f0" => elementwise(), typed |t| t.conversion();
    /// The same bits as another dtype of the same width (`x.to_bits()`, `f32::from_bits(u)`):
    /// `f32` <-> `u32`/`i32`, `f64` <-> `u64`/`i64`/`index`.
    tuple Bitcast { .0 => f0: val } "bitcast $f0" => elementwise(), typed |t| t.conversion();
    /// `x[i]`: the sub-tensor at index `i` of the leading dim.
    struct Slice {
        /// Tensor sliced.
        .src => src: val,
        /// Index into dim 0.
        .index => index: val as index
    } "slice $src[$index]" => value(pure(info("a slice (`x[i]`)", Levels::ALL))), typed |t| t.slice(*src);
    /// `x[offset..offset + len]` along dim 0 (len from the result type): a view of the same
    /// kind (tensor or window), dtype and trailing dims.
    struct Subview {
        /// Tensor or window.
        .src => src: val,
        /// First index of dim 0.
        .offset => offset: val as index
    } "subview $src[$offset..]" => value(pure(info("a sub-view (`x[a..b]`)", Levels::DEVICE))), typed |t| t.subview(*src);
    /// A block of a tensor or window (`subview(x, [offsets], [extents])`): one offset per dim,
    /// the extents from the result type. Its rows are not contiguous where it takes part of a
    /// trailing dim, so it is read and written only by element and tile accesses (`load`,
    /// `store`, `elem`, `set_elem`, `remote_load`, `remote_store`) and viewed further (`slice`,
    /// `subview`, `view`); `eagle_ir::views` rewrites those accesses onto the viewed buffer
    /// before any backend runs.
    struct View {
        /// Tensor or window viewed.
        .src => src: val,
        /// One `index` offset per dim.
        .offsets => offsets: vals as index
    } "view $src[$offsets]" => value(pure(info("a block view (`subview(x, [offsets], [extents])`)", Levels::DEVICE))), typed |t| t.view(*src, offsets);
    /// Built-in broadcast: `dst` = `src` of rank `root`, on every rank.
    struct Broadcast {
        /// Device context.
        .ctx => ctx: val as ctx,
        /// Window read on the root.
        .src => src: val,
        /// Local tensor or window written.
        .dst => dst: val,
        /// Root rank.
        .root => root: val as index
    } "broadcast $ctx, $src, $dst, $root" => collective(), typed |t| t.broadcast(*src, *dst);
    /// Built-in allgather: chunk `q` of `dst` = chunk `q` of rank `q`'s `src` (1-D buffers of N
    /// elements in P contiguous chunks, the first `N % P` one element longer).
    struct AllGather {
        /// Device context.
        .ctx => ctx: val as ctx,
        /// Window.
        .src => src: val,
        /// Local tensor or window.
        .dst => dst: val
    } "allgather $ctx, $src, $dst" => collective(), typed |t| t.allgather(*src, *dst);
    /// Built-in reduce-scatter: on rank `r`, chunk `r` of `dst` = the reduction over ranks
    /// (in rank order) of chunk `r` of `src`.
    struct ReduceScatter {
        /// Device context.
        .ctx => ctx: val as ctx,
        /// Window.
        .src => src: val,
        /// Local tensor or window.
        .dst => dst: val,
        /// Combining op.
        .op => op: attr(ReduceOp)
    } "reduce_scatter $ctx, $src, $dst, $op" => collective(), typed |t| t.reduce_scatter(*src, *dst, *op);
    /// Built-in allreduce: `dst` = the reduction over ranks of `src`, bit-identical on every
    /// rank.
    struct AllReduce {
        /// Device context.
        .ctx => ctx: val as ctx,
        /// Window.
        .src => src: val,
        /// Window (read by peers in two-phase and ring modes).
        .dst => dst: val,
        /// Combining op.
        .op => op: attr(ReduceOp),
        /// Algorithm.
        .mode => mode: attr(AllreduceMode)
    } "allreduce $ctx, $src, $dst, $op, $mode" => collective(), typed |t| t.allreduce(*src, *dst, *op, *mode);
    /// Built-in all-to-all on `[P, M]` buffers: row `q` of `dst` = row `r` of rank `q`'s `src`.
    struct AllToAll {
        /// Device context.
        .ctx => ctx: val as ctx,
        /// Window.
        .src => src: val,
        /// Local tensor or window.
        .dst => dst: val
    } "all_to_all $ctx, $src, $dst" => collective(), typed |t| t.all_to_all(*src, *dst);
    /// Built-in variable-size all-to-all (`all_to_all_v`, MPI's `MPI_Alltoallv`): rank `r`
    /// sends `send_counts[q]` rows of `src` to each rank `q`, the rows for `q` following those
    /// for the ranks before it; rank `q` receives them into `dst` after the rows of the ranks
    /// before `r`, and writes `r`'s count into `recv_counts[r]`. Counts are `u64`; the rows
    /// of `dst` past the total are left as they were.
    struct AllToAllV {
        /// Device context.
        .ctx => ctx: val as ctx,
        /// Send window `[S, M, ...]`: the rows for each peer, in rank order.
        .src => src: val,
        /// Window `[P]` of `u64`: the rows this rank sends to each rank.
        .send_counts => send_counts: val,
        /// Local tensor or window `[CAP, M, ...]`: the rows received, in rank order.
        .dst => dst: val,
        /// Local tensor or window `[P]` of `u64`: the rows received from each rank.
        .recv_counts => recv_counts: val
    } "all_to_all_v $ctx, $src, $send_counts, $dst, $recv_counts" => collective(), typed |t| t.v_collective(*src, *send_counts, *dst, *recv_counts, false);
    /// Built-in variable-size allgather (`allgather_v`, MPI's `MPI_Allgatherv`): rank `q`
    /// contributes the first `count[0]` rows of its `src`; every rank receives them into `dst`
    /// after the rows of the ranks before `q`, and writes the count into `recv_counts[q]`.
    /// Counts are `u64`; the rows of `dst` past the total are left as they were.
    struct AllGatherV {
        /// Device context.
        .ctx => ctx: val as ctx,
        /// Send window `[S, M, ...]`.
        .src => src: val,
        /// Window `[1]` of `u64`: how many rows of `src` this rank contributes.
        .count => count: val,
        /// Local tensor or window `[CAP, M, ...]`: every rank's rows, in rank order.
        .dst => dst: val,
        /// Local tensor or window `[P]` of `u64`: the rows from each rank.
        .recv_counts => recv_counts: val
    } "allgather_v $ctx, $src, $count, $dst, $recv_counts" => collective(), typed |t| t.v_collective(*src, *count, *dst, *recv_counts, true);
    /// Reads one element (`x[i, j]`) of a tensor or window: a scalar.
    struct Elem {
        /// Tensor or window.
        .src => src: val,
        /// One `index` per dim.
        .indices => indices: vals as index
    } "elem $src[$indices]" => value(info("element access (`x[i]`)", Levels::DEVICE)), typed |t| t.elem(*src, indices);
    /// Writes one element of a tensor or window.
    struct SetElem {
        /// The scalar written.
        .value => value: val,
        /// Tensor or window.
        .dst => dst: val,
        /// One `index` per dim.
        .indices => indices: vals as index
    } "set_elem $value, $dst[$indices]" => writes(info("element access (`x[i]`)", Levels::DEVICE)), typed |t| t.set_elem(*value, *dst, indices);
    /// Loads a tile (shape from the result type) at `offsets` of a tensor or window.
    struct Load {
        /// Tensor or window read.
        .src => src: val,
        /// One `index` offset per dim.
        .offsets => offsets: vals as index
    } "load $src[$offsets]" => value(info("a tile load or store", Levels::DEVICE)), typed |t| t.load(*src, offsets, false);
    /// Stores a tile at `offsets` of a tensor or window.
    struct Store {
        /// Tile stored.
        .value => value: val,
        /// Tensor or window written.
        .dst => dst: val,
        /// One `index` offset per dim.
        .offsets => offsets: vals as index
    } "store $value, $dst[$offsets]" => writes(info("a tile load or store", Levels::DEVICE)), typed |t| t.store(*value, *dst, offsets, false);
    /// A local array of scalars (`let mut a = [0i32; 4]`): memory private to one run of the
    /// function, every byte zero; shape (rank 1) and dtype from the result type. Its elements
    /// are read and written with `elem`/`set_elem` (and tiles with `load`/`store`), bounds
    /// checked as a tensor's; the builder fills a non-zero initial value with `set_elem`.
    unit LocalArray {} "local_array" => value(info("a local array", Levels::DEVICE)), typed |t| t.local_array();
    /// A mutable scalar variable initialised to `init`.
    tuple Var { .0 => f0: val } "var $f0" => value(info("a variable", Levels::ALL)), typed |t| t.var(*f0);
    /// Reads a variable.
    tuple Read { .0 => f0: val } "read $f0" => value(info("a variable", Levels::ALL)), typed |t| t.read(*f0);
    /// Writes a variable.
    tuple Write { .0 => f0: val, .1 => f1: val } "write $f0, $f1" => writes(info("a variable", Levels::ALL)), typed |t| t.write(*f0, *f1);
    /// `for var in lo..hi { body }` (step 1).
    struct For {
        /// The induction variable (`index`).
        .var => var: def,
        /// Inclusive lower bound.
        .lo => lo: val as index,
        /// Exclusive upper bound.
        .hi => hi: val as index,
        /// Loop body.
        .body => body: block
    } "for $var in $lo..$hi $body" => info("a loop", Levels::ALL), typed |t| t.for_loop(*var);
    /// `while flag { body }`: runs `body` while the `bool` variable `flag` (a `var`) holds,
    /// testing it before each turn; `body` updates it. More than `cap` turns is a run-time
    /// error naming the loop (a runaway loop fails instead of hanging).
    struct While {
        /// The `bool` variable tested before each turn.
        .flag => flag: val,
        /// The most turns the loop may run.
        .cap => cap: attr(u64),
        /// Loop body.
        .body => body: block
    } "while $flag cap $cap $body" => info("a loop", Levels::ALL), typed |t| t.while_loop(*flag, *cap);
    /// `if cond { then } else { else }`.
    struct If {
        /// `bool` condition.
        .cond => cond: val as bool,
        /// Taken when `cond` holds.
        .then_body => then_body: block,
        /// Taken otherwise.
        .else_body => else_body: block
    } "if $cond $then_body? else $else_body" => info("a branch", Levels::ALL), typed |t| t.declared();
    /// Calls a compute kernel.
    struct Call {
        /// Callee name.
        .callee => callee: attr(String),
        /// Arguments, one per callee param.
        .args => args: vals
    } "call $callee($args)" => writes(info("a call of a compute kernel", Levels::DEVICE)), typed |t| t.call(callee, args, false);
    /// Host: runs a per-device program on device `device`.
    struct Dispatch {
        /// Callee name.
        .callee => callee: attr(String),
        /// Arguments, one per callee param (the `ctx` param is supplied by the runtime).
        .args => args: vals,
        /// The rank that runs it.
        .device => device: val as index
    } "dispatch $callee($args) device $device" => writes(info("a dispatch", Levels::HOST)), typed |t| t.call(callee, args, true);
    /// `rank(ctx)`: this device's rank.
    tuple Rank { .0 => f0: val as ctx } "rank $f0" => value(pure(info("a device-context operation", Levels::DEVICE))), typed |t| t.index_result();
    /// `nranks(ctx)`: the world size seen from a device.
    tuple NRanks { .0 => f0: val as ctx } "nranks $f0" => value(pure(info("a device-context operation", Levels::DEVICE))), typed |t| t.index_result();
    /// `group(ctx, [d0, d1, ...], axis)`: this rank's group along `axis` of the process grid
    /// `[d0, d1, ...]` (row-major over the world ranks, the last axis fastest): the ranks whose
    /// grid coordinates differ from this rank's only at `axis`, numbered by that coordinate.
    /// A context like `ctx`: `rank`, `nranks`, `barrier` and every built-in collective take it
    /// and act within the group; `world_rank` turns its ranks into world ranks. Replaced by index
    /// arithmetic and signals when collectives are lowered (`docs/collectives.md`, "Rank
    /// groups"); the grid's extents must multiply to the world size.
    struct Group {
        /// The world's device context.
        .ctx => ctx: val as ctx,
        /// The grid's extents, outermost first.
        .grid => grid: vals as index,
        /// The axis whose ranks form the group.
        .axis => axis: attr(u64)
    } "group $ctx, [$grid], $axis" => value(pure(info("a rank group", Levels::DEVICE))), typed |t| t.group(grid, *axis);
    /// `split(ctx, color, key)`: this rank's group among the ranks of the same `color`,
    /// numbered by `key` and then by world rank, as `MPI_Comm_split` numbers a communicator;
    /// none for a negative color. A context like a [`OpKind::Group`]'s: once P is known,
    /// `color` and `key` (computed from `rank(ctx)`, `nranks(ctx)`, dims and constants) are
    /// evaluated for every rank, and the groups lowered as a grid's or through per-rank
    /// tables (`docs/collectives.md`, "Rank groups").
    struct Split {
        /// The world's device context.
        .ctx => ctx: val as ctx,
        /// Ranks of one color form a group.
        .color => color: val as index,
        /// The order of the ranks within a group.
        .key => key: val as index
    } "split $ctx, $color, $key" => value(pure(info("a rank group", Levels::DEVICE))), typed |t| t.context();
    /// `world_rank(group, q)`: the world rank of rank `q` of `group`, for `put`, `get`,
    /// `notify`, `remote_load` and `remote_store`, which address world ranks.
    struct WorldRank {
        /// A group (`group(ctx, ...)`).
        .group => group: val as ctx,
        /// The rank within the group.
        .rank => rank: val as index
    } "world_rank $group, $rank" => value(pure(info("a rank group", Levels::DEVICE))), typed |t| t.index_result();
    /// `world_size()` on the host.
    unit WorldSize {} "world_size" => value(pure(info("`world_size()`", Levels::HOST))), typed |t| t.index_result();
    /// Host: one symmetric buffer per rank; shape and dtype from the result type.
    unit AllocWindowBuffer {} "alloc_window_buffer" => value(info("a window-buffer allocation", Levels::HOST)), typed |t| t.window_buffer();
    /// Host: a rank-local view of a window buffer; shape and dtype from the result type.
    tuple Window { .0 => f0: val } "window $f0" => value(pure(info("a window view", Levels::HOST))), typed |t| t.window_view(*f0);
    /// `put(dst, peer, src)`: copies local `src` into `dst` on rank `peer` (push).
    struct Put {
        /// Destination window.
        .dst => dst: val,
        /// Peer rank.
        .peer => peer: val as index,
        /// Local tensor or window.
        .src => src: val
    } "put $dst, $peer, $src" => peers(writes(info(REMOTE, Levels::DEVICE))), typed |t| t.put_get(*dst, *src, true);
    /// `get(dst, peer, src)`: copies `src` on rank `peer` into local `dst` (pull).
    struct Get {
        /// Local tensor or window.
        .dst => dst: val,
        /// Peer rank.
        .peer => peer: val as index,
        /// Source window.
        .src => src: val
    } "get $dst, $peer, $src" => peers(writes(info(REMOTE, Levels::DEVICE))), typed |t| t.put_get(*dst, *src, false);
    /// Tile-level remote load from a peer's window.
    struct RemoteLoad {
        /// Window.
        .src => src: val,
        /// Peer rank.
        .peer => peer: val as index,
        /// Offsets into the window.
        .offsets => offsets: vals as index
    } "remote_load $src, $peer, [$offsets]" => value(peers(info(REMOTE, Levels::DEVICE))), typed |t| t.load(*src, offsets, true);
    /// Tile-level remote store into a peer's window.
    struct RemoteStore {
        /// Tile stored.
        .value => value: val,
        /// Window.
        .dst => dst: val,
        /// Peer rank.
        .peer => peer: val as index,
        /// Offsets into the window.
        .offsets => offsets: vals as index
    } "remote_store $value, $dst, $peer, [$offsets]" => peers(writes(info(REMOTE, Levels::DEVICE))), typed |t| t.store(*value, *dst, offsets, true);
    /// Updates a signal on `peer` with release semantics.
    struct Notify {
        /// Signal window (integer dtype).
        .signal => signal: val,
        /// Peer rank.
        .peer => peer: val as index,
        /// Element offsets into the signal window.
        .offsets => offsets: vals as index,
        /// Value set or added.
        .value => value: val,
        /// Set or atomic add.
        .op => op: attr(NotifyOp)
    } "notify $signal, $peer, [$offsets], $value, $op" => peers(writes(info("a signal operation", Levels::DEVICE))), typed |t| t.signal(*signal, offsets, *value);
    /// Blocks until the local signal compares true against `expected` (acquire semantics).
    struct Wait {
        /// Local signal window.
        .signal => signal: val,
        /// Element offsets.
        .offsets => offsets: vals as index,
        /// Compared value.
        .expected => expected: val,
        /// Predicate `signal <cmp> expected`.
        .cmp => cmp: attr(CmpOp)
    } "wait $signal, [$offsets], $expected, $cmp" => peers(info("a signal operation", Levels::DEVICE)), typed |t| t.signal(*signal, offsets, *expected);
    /// `trap_if cond, a, b kind`: stops this rank with `kind`'s message (`a` and `b` filled in)
    /// when `cond` holds; otherwise does nothing.
    struct TrapIf {
        /// The failing condition.
        .cond => cond: val as bool,
        /// The message's `{a}`.
        .a => a: val as index,
        /// The message's `{b}`.
        .b => b: val as index,
        /// Which message.
        .kind => kind: attr(Trap)
    } "trap_if $cond, $a, $b, $kind" => info("a run-time check", Levels::DEVICE), typed |t| t.declared();
    /// All ranks reach the barrier before any leaves it.
    tuple Barrier { .0 => f0: val as ctx } "barrier $f0" => peers(info("a device-context operation", Levels::DEVICE)), typed |t| t.declared();
    /// A tile-algebra op (reduction, broadcast, layout, creation, matmul): what it computes,
    /// its typing and its operands are [`crate::TileOp`]'s.
    tuple Tile { .0 => f0: attr(TileOp), .1 => f1: vals } "$f0 $f1" => value(pure(info("a tile op", Levels::DEVICE))), typed |t| t.tile(f0, f1);
    /// A function of the math library (`ln x`, `atan2 y, x`), elementwise on scalars and
    /// tiles; expanded into the ops above at specialization ([`crate::math`]).
    tuple Math { .0 => f0: attr(MathFn), .1 => f1: vals } "$f0 $f1" => elementwise(), typed |t| t.arithmetic();
}

/// What an operand must be, as its field's declaration states it (`val as index`); the verifier
/// checks it for every op ([`OpKind::for_each_want`]) before the op's own typing rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The device context `ctx` (so the op is device work).
    Ctx,
    /// An `index` scalar (a rank, an offset, a bound).
    Index,
    /// A `bool` scalar (a condition).
    Bool,
}

/// A primitive elementwise op's operands: the one classification of which primitive ops compute
/// each element of their result from the same element of their operands (the `elementwise`
/// fact of their declarations; a math-library call is elementwise too, and is expanded into
/// these before any backend sees it). The backends' vectorizers and the fusion pass match on
/// it, exhaustively.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Elementwise {
    /// `op(a, b)`.
    Binary(BinOp, Value, Value),
    /// `op(a)`.
    Unary(UnOp, Value),
    /// `a * b + c`, one rounding.
    Fma(Value, Value, Value),
    /// `a op b`, a `bool`.
    Cmp(CmpOp, Value, Value),
    /// `select(cond, a, b)`.
    Select(Value, Value, Value),
    /// Conversion to the result dtype.
    Cast(Value),
    /// The same bits as the result dtype.
    Bitcast(Value),
}

impl OpKind {
    /// The op as an [`Elementwise`] op, or `None` for every other kind (exhaustive: a new
    /// kind must say whether it is elementwise). Agrees with `info().elementwise`, math-library
    /// calls excepted.
    pub fn as_elementwise(&self) -> Option<Elementwise> {
        let e = self.classify_elementwise();
        debug_assert_eq!(
            e.is_some(),
            self.info().elementwise && !matches!(self, OpKind::Math(..)),
            "{self:?}"
        );
        e
    }

    fn classify_elementwise(&self) -> Option<Elementwise> {
        Some(match *self {
            OpKind::Binary(op, a, b) => Elementwise::Binary(op, a, b),
            OpKind::Unary(op, a) => Elementwise::Unary(op, a),
            OpKind::Fma(a, b, c) => Elementwise::Fma(a, b, c),
            OpKind::Cmp(op, a, b) => Elementwise::Cmp(op, a, b),
            OpKind::Select(c, a, b) => Elementwise::Select(c, a, b),
            OpKind::Cast(a) => Elementwise::Cast(a),
            OpKind::Bitcast(a) => Elementwise::Bitcast(a),
            OpKind::Const(..)
            | OpKind::Dim(..)
            | OpKind::Slice { .. }
            | OpKind::Subview { .. }
            | OpKind::View { .. }
            | OpKind::Broadcast { .. }
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::AllToAllV { .. }
            | OpKind::AllGatherV { .. }
            | OpKind::Elem { .. }
            | OpKind::SetElem { .. }
            | OpKind::Load { .. }
            | OpKind::Store { .. }
            | OpKind::LocalArray
            | OpKind::Var(..)
            | OpKind::Read(..)
            | OpKind::Write(..)
            | OpKind::For { .. }
            | OpKind::While { .. }
            | OpKind::If { .. }
            | OpKind::Call { .. }
            | OpKind::Dispatch { .. }
            | OpKind::Rank(..)
            | OpKind::NRanks(..)
            | OpKind::Group { .. }
            | OpKind::Split { .. }
            | OpKind::WorldRank { .. }
            | OpKind::WorldSize
            | OpKind::AllocWindowBuffer
            | OpKind::Window(..)
            | OpKind::Put { .. }
            | OpKind::Get { .. }
            | OpKind::RemoteLoad { .. }
            | OpKind::RemoteStore { .. }
            | OpKind::Notify { .. }
            | OpKind::Wait { .. }
            | OpKind::Barrier(..)
            | OpKind::TrapIf { .. }
            | OpKind::Tile(..)
            | OpKind::Math(..) => return None,
        })
    }
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

impl Op {
    /// An op no block lists: what a pass leaves in an arena slot while it holds the op
    /// itself ([`crate::Cursor::take`]).
    pub fn placeholder() -> Op {
        Op {
            result: None,
            kind: OpKind::Cast(Value(0)),
            loc: None,
        }
    }
}

/// A straight-line list of ops (nested blocks hang off `for`, `while` and `if`): handles into
/// the function's op arena, in program order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    /// Ops in program order.
    pub ops: Vec<OpId>,
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

/// A function: a level, parameters, a value table, an op arena and a body.
///
/// Two functions are equal when their names, levels, parameters and value tables are equal
/// and their bodies list equal ops in the same nesting (the arenas' handles and unlisted ops
/// do not count).
#[derive(Debug, Clone)]
pub struct Function {
    /// Name (unique in the module).
    pub name: String,
    /// Host, device or compute.
    pub level: Level,
    /// Parameters in order.
    pub params: Vec<Param>,
    /// Type of every value, indexed by [`Value`]; `values.push(ty)` mints a value.
    pub values: crate::entity::PrimaryMap<Value, Type>,
    /// Every op, indexed by [`OpId`]; `ops.push(op)` mints a handle.
    pub ops: Ops,
    /// The body.
    pub body: Block,
}

impl PartialEq for Function {
    fn eq(&self, o: &Function) -> bool {
        self.name == o.name
            && self.level == o.level
            && self.params == o.params
            && self.values == o.values
            && same_block(&self.ops, &self.body, &o.ops, &o.body)
    }
}

/// Whether two blocks of two arenas list equal ops in the same nesting.
fn same_block(a_ops: &Ops, a: &Block, b_ops: &Ops, b: &Block) -> bool {
    a.ops.len() == b.ops.len()
        && a.ops.iter().zip(&b.ops).all(|(&x, &y)| {
            let (x, y) = (&a_ops[x], &b_ops[y]);
            let (xb, yb) = (x.kind.blocks(), y.kind.blocks());
            x.result == y.result
                && x.loc == y.loc
                && xb.len() == yb.len()
                && xb
                    .iter()
                    .zip(&yb)
                    .all(|(p, q)| same_block(a_ops, p, b_ops, q))
                && without_blocks(&x.kind) == without_blocks(&y.kind)
        })
}

/// `k` with its nested blocks emptied.
fn without_blocks(k: &OpKind) -> OpKind {
    let mut k = k.clone();
    for b in k.blocks_mut() {
        *b = Block::default();
    }
    k
}

impl Function {
    /// Visits every op of the body in program order (an op before the ops of its nested
    /// blocks).
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Op)) {
        self.body.walk(&self.ops, f)
    }

    /// The op of handle `id`.
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id]
    }

    /// The handle of every op the body lists (nested blocks included), in program order: to
    /// edit ops in place through [`Function::ops`].
    pub fn listed(&self) -> Vec<OpId> {
        fn rec(ops: &Ops, b: &Block, out: &mut Vec<OpId>) {
            for &id in &b.ops {
                out.push(id);
                for nb in ops[id].kind.blocks() {
                    rec(ops, nb, out);
                }
            }
        }
        let mut out = Vec::with_capacity(self.ops.len());
        rec(&self.ops, &self.body, &mut out);
        out
    }

    /// Renumbers the arena in program order and drops the ops no block lists.
    pub fn compact(&mut self) {
        fn copy(from: &Ops, b: &Block, to: &mut Ops) -> Block {
            Block {
                ops: b
                    .ops
                    .iter()
                    .map(|&id| {
                        let slot = to.push(Op::placeholder());
                        let mut op = from[id].clone();
                        for nb in op.kind.blocks_mut() {
                            *nb = copy(from, nb, to);
                        }
                        to[slot] = op;
                        slot
                    })
                    .collect(),
            }
        }
        let mut ops = Ops::new();
        self.body = copy(&self.ops, &self.body, &mut ops);
        self.ops = ops;
    }

    /// The type of `v`.
    pub fn ty(&self, v: Value) -> &Type {
        &self.values[v]
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
            f.walk(&mut |op| match &op.kind {
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
    pub fn walk<'a>(&self, ops: &'a Ops, f: &mut impl FnMut(&'a Op)) {
        for &id in &self.ops {
            let op = &ops[id];
            f(op);
            for b in op.kind.blocks() {
                b.walk(ops, f);
            }
        }
    }

    /// The block's own ops (not those of nested blocks), in program order.
    pub fn iter<'a>(&'a self, ops: &'a Ops) -> impl DoubleEndedIterator<Item = &'a Op> + 'a {
        self.ops.iter().map(move |&id| &ops[id])
    }

    /// Whether the block or a block nested in it holds an op for which `pred` holds.
    pub fn any(&self, ops: &Ops, pred: &mut impl FnMut(&Op) -> bool) -> bool {
        self.ops.iter().any(|&id| {
            let op = &ops[id];
            pred(op) || op.kind.blocks().into_iter().any(|b| b.any(ops, pred))
        })
    }

    /// Rewrites the block and the blocks nested in it: `f` sees each block (this one first,
    /// then the nested ones, in program order) with the arena, and may rewrite its op list and
    /// append ops to the arena.
    pub fn rewrite(&mut self, ops: &mut Ops, f: &mut impl FnMut(&mut Ops, &mut Block)) {
        f(ops, self);
        for &id in &self.ops.clone() {
            let mut nested: Vec<Block> = ops[id]
                .kind
                .blocks_mut()
                .into_iter()
                .map(std::mem::take)
                .collect();
            for b in &mut nested {
                b.rewrite(ops, f);
            }
            for (slot, b) in ops[id].kind.blocks_mut().into_iter().zip(nested) {
                *slot = b;
            }
        }
    }

    /// Copies the block's ops (and nested blocks) from arena `from` into arena `to`, every
    /// value renamed by `f` (a callee's body inlined into its caller); returns the copy.
    pub fn copy_into(&self, from: &Ops, to: &mut Ops, f: &mut dyn FnMut(Value) -> Value) -> Block {
        Block {
            ops: self
                .ops
                .iter()
                .map(|&id| {
                    let op = &from[id];
                    let mut kind = op.kind.map_values(f);
                    for nb in kind.blocks_mut() {
                        *nb = nb.copy_into(from, to, f);
                    }
                    to.push(Op {
                        result: op.result.map(&mut *f),
                        kind,
                        loc: op.loc.clone(),
                    })
                })
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
