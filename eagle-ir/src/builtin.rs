//! The built-in functions a kernel calls by name that build one op each (`load`, `put`,
//! `allreduce`, ...), declared once: the macros accept exactly these names and take each one's
//! arity, signature and result from here. Tile ops are [`crate::tile::INTRINSICS`], math
//! functions [`crate::MathFn`] and the call forms of unary ops [`crate::UnOp::call_name`].

use crate::spec::enumeration;

enumeration! {
    /// A built-in function of the kernel language (its name is what a kernel calls).
    pub enum Builtin {
        /// `rank(ctx)`: this device's rank, an `index`.
        Rank => "rank",
        /// `nranks(ctx)`: the world size seen from a device, an `index`.
        NRanks => "nranks",
        /// `group(ctx, [grid], axis)`: this rank's group along `axis` of a process grid, a
        /// context (`OpKind::Group`).
        Group => "group",
        /// `split(ctx, color, key)`: this rank's group among the ranks of its color, numbered
        /// by key, as `MPI_Comm_split` (`OpKind::Split`).
        Split => "split",
        /// `world_rank(group, q)`: the world rank of rank `q` of a group, an `index`.
        WorldRank => "world_rank",
        /// `world_size()` on the host, an `index`.
        WorldSize => "world_size",
        /// `load(src, [offsets], [shape])`: a tile of a tensor or window.
        Load => "load",
        /// `remote_load(window, peer, [offsets], [shape])`: a tile of a peer's window.
        RemoteLoad => "remote_load",
        /// `subview(x, offset, LEN)`: rows `offset..offset + LEN` of a tensor or window.
        Subview => "subview",
        /// `window(buffer, [shape], dtype)` on the host: a rank's view of a window buffer.
        Window => "window",
        /// `alloc_window_buffer([shape], dtype)` on the host: one symmetric buffer per rank.
        AllocWindowBuffer => "alloc_window_buffer",
        /// `store(dst, [offsets], tile)`.
        Store => "store",
        /// `put(dst, peer, src)`: local `src` into `dst` on rank `peer`.
        Put => "put",
        /// `get(dst, peer, src)`: `src` on rank `peer` into local `dst`.
        Get => "get",
        /// `remote_store(window, peer, [offsets], tile)`: a tile into a peer's window.
        RemoteStore => "remote_store",
        /// `notify(signal, peer, [offsets], value, Set | AtomicAdd)`.
        Notify => "notify",
        /// `wait(signal, [offsets], expected, Eq | Ne | ...)`.
        Wait => "wait",
        /// `barrier(ctx)`.
        Barrier => "barrier",
        /// `broadcast(ctx, src_window, dst, root)`.
        Broadcast => "broadcast",
        /// `allgather(ctx, src_window, dst)`.
        AllGather => "allgather",
        /// `reduce_scatter(ctx, src_window, dst, op)`.
        ReduceScatter => "reduce_scatter",
        /// `allreduce(ctx, src_window, dst_window, op, mode)`.
        AllReduce => "allreduce",
        /// `all_to_all(ctx, src_window, dst)`.
        AllToAll => "all_to_all",
        /// `all_to_all_v(ctx, src_window, send_counts, dst, recv_counts)`: rows of run-time
        /// counts per peer.
        AllToAllV => "all_to_all_v",
        /// `allgather_v(ctx, src_window, count, dst, recv_counts)`: a run-time number of rows
        /// from each rank.
        AllGatherV => "allgather_v",
        /// `min(a, b)`: elementwise minimum.
        Min => "min",
        /// `max(a, b)`: elementwise maximum.
        Max => "max",
        /// `fma(a, b, c)`: `a * b + c` with one rounding.
        Fma => "fma",
        /// `select(cond, a, b)`.
        Select => "select",
        /// `saturating_cast(x, dtype)`: `x as dtype` with values past the largest finite one
        /// (infinities included) clamped to it, NaN kept.
        SaturatingCast => "saturating_cast",
    }
}

enumeration! {
    /// The methods of Rust's numeric types that a kernel calls on a value and that build one
    /// op (the math library's methods are `MathFn::from_method`'s), in the order messages
    /// list them.
    pub enum Method {
        /// `a.min(b)`: elementwise `min`.
        Min => "min",
        /// `a.max(b)`: elementwise `max`.
        Max => "max",
        /// `a.mul_add(b, c)`: `fma`, one rounding.
        MulAdd => "mul_add",
        /// `x.to_bits()`: `bitcast` to the unsigned integer of the same width.
        ToBits => "to_bits",
    }
}

impl Method {
    /// The call after the receiver's dot, for messages (`min(b)`).
    pub const fn signature(self) -> &'static str {
        match self {
            Method::Min => "min(b)",
            Method::Max => "max(b)",
            Method::MulAdd => "mul_add(b, c)",
            Method::ToBits => "to_bits()",
        }
    }

    /// The number of arguments besides the receiver ([`Method::signature`]'s).
    pub fn arity(self) -> usize {
        arg_count(self.signature())
    }
}

/// The number of arguments in a call as a signature writes it (`load(src, [offsets], [shape])`:
/// 3; `world_size()`: 0): the top-level commas between the parentheses, plus one.
fn arg_count(sig: &str) -> usize {
    let inner = sig
        .split_once('(')
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or("");
    if inner.is_empty() {
        return 0;
    }
    let mut depth = 0i32;
    1 + inner
        .chars()
        .filter(|&c| {
            depth += i32::from(c == '[') - i32::from(c == ']');
            c == ',' && depth == 0
        })
        .count()
}

/// `topk(t, k)`: the `k` largest elements of each row of a tile and their indices, a pair
/// ([`crate::FunctionBuilder::topk`]).
pub const TOPK: &str = "topk";

/// `matmul_mx(a, scale_a, b, scale_b)`: the OCP MX block-scaled matmul
/// ([`crate::FunctionBuilder::matmul_mx`]).
pub const MATMUL_MX: &str = "matmul_mx";

/// The number of elements along K that share one `e8m0` scale in [`MATMUL_MX`] (OCP
/// Microscaling Formats (MX) Specification v1.0, section 5: `k = 32`).
pub const MX_BLOCK: u64 = 32;

/// The associated function that makes a float from its bits (`f32::from_bits(u)`): `bitcast`.
pub const FROM_BITS: &str = "from_bits";

impl Builtin {
    /// The call as a kernel writes it, for messages and the docs (`load(src, [offsets],
    /// [shape])`). An argument that names an op lists the choices (`Set | AtomicAdd`), which
    /// come from the op's own declaration.
    pub fn signature(self) -> String {
        use Builtin::*;
        let choices = |names: &[&str]| names.join(" | ");
        match self {
            Rank | NRanks | Barrier => format!("{}(ctx)", self.name()),
            WorldSize => "world_size()".into(),
            Group => "group(ctx, [grid], axis)".into(),
            Split => "split(ctx, color, key)".into(),
            WorldRank => "world_rank(group, rank)".into(),
            Min | Max => format!("{}(a, b)", self.name()),
            Fma | Select => format!("{}(a, b, c)", self.name()),
            SaturatingCast => "saturating_cast(x, dtype)".into(),
            Load => "load(src, [offsets], [shape])".into(),
            Store => "store(dst, [offsets], tile)".into(),
            AllocWindowBuffer => "alloc_window_buffer([shape], dtype)".into(),
            Window => "window(buffer, [shape], dtype)".into(),
            Put | Get => format!("{}(dst, peer, src)", self.name()),
            RemoteLoad => "remote_load(window, peer, [offsets], [shape])".into(),
            RemoteStore => "remote_store(window, peer, [offsets], tile)".into(),
            Notify => format!(
                "notify(signal, peer, [offsets], value, {})",
                choices(&crate::NotifyOp::ALL.map(crate::NotifyOp::variant))
            ),
            Wait => format!(
                "wait(signal, [offsets], expected, {})",
                choices(&crate::CmpOp::ALL.map(crate::CmpOp::variant))
            ),
            Subview => "subview(x, offset | [offsets], LEN | [EXTENTS])".into(),
            Broadcast => "broadcast(ctx, src_window, dst, root)".into(),
            AllGather | AllToAll => format!("{}(ctx, src_window, dst)", self.name()),
            AllToAllV => "all_to_all_v(ctx, src_window, send_counts, dst, recv_counts)".into(),
            AllGatherV => "allgather_v(ctx, src_window, count, dst, recv_counts)".into(),
            ReduceScatter => format!(
                "reduce_scatter(ctx, src_window, dst, {})",
                choices(&crate::ReduceOp::ALL.map(crate::ReduceOp::variant))
            ),
            AllReduce => format!(
                "allreduce(ctx, src_window, dst_window, {}, {})",
                choices(&crate::ReduceOp::ALL.map(crate::ReduceOp::variant)),
                choices(&crate::AllreduceMode::ALL.map(crate::AllreduceMode::variant))
            ),
        }
    }

    /// The number of arguments ([`Builtin::signature`]'s).
    pub fn arity(self) -> usize {
        arg_count(&self.signature())
    }

    /// Whether the call yields a value (`let x = load(...)`); the others are statements.
    pub const fn has_result(self) -> bool {
        use Builtin::*;
        match self {
            Rank | NRanks | Group | Split | WorldRank | WorldSize | Min | Max | Fma | Select
            | Load | AllocWindowBuffer | Window | RemoteLoad | Subview | SaturatingCast => true,
            Store | Put | Get | RemoteStore | Notify | Wait | Barrier | Broadcast | AllGather
            | ReduceScatter | AllReduce | AllToAll | AllToAllV | AllGatherV => false,
        }
    }

    /// Whether the call computes elementwise on scalars and tiles (`min`, `max`, `fma`,
    /// `select`), as the math functions do.
    pub const fn elementwise(self) -> bool {
        use Builtin::*;
        match self {
            Min | Max | Fma | Select | SaturatingCast => true,
            Rank | NRanks | Group | Split | WorldRank | WorldSize | Load | RemoteLoad | Subview
            | Window | AllocWindowBuffer | Store | Put | Get | RemoteStore | Notify | Wait
            | Barrier | Broadcast | AllGather | ReduceScatter | AllReduce | AllToAll
            | AllToAllV | AllGatherV => false,
        }
    }

    /// The argument the call writes locally, which must not be an input tensor of the kernel
    /// (`store(dst, ..)`, `get(dst, ..)`, a collective's `dst`), if any.
    pub const fn written_arg(self) -> Option<usize> {
        use Builtin::*;
        match self {
            Store | Get => Some(0),
            Broadcast | AllGather | ReduceScatter | AllReduce | AllToAll => Some(2),
            AllToAllV | AllGatherV => Some(3),
            Rank | NRanks | Group | Split | WorldRank | WorldSize | Min | Max | Fma | Select
            | Load | AllocWindowBuffer | Window | Put | RemoteLoad | RemoteStore | Notify
            | Wait | Barrier | Subview | SaturatingCast => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arities_and_signatures_come_from_one_place() {
        assert_eq!(Builtin::WorldSize.arity(), 0);
        assert_eq!(Builtin::Load.arity(), 3);
        assert_eq!(Builtin::Notify.arity(), 5);
        // The choices come from the ops' declarations.
        let ops = crate::ReduceOp::ALL
            .map(crate::ReduceOp::variant)
            .join(" | ");
        assert!(ops.starts_with("Sum | Prod | Max | Min"));
        assert_eq!(
            Builtin::AllReduce.signature(),
            format!("allreduce(ctx, src_window, dst_window, {ops}, Mesh | TwoPhase | Ring)")
        );
        assert_eq!(
            Builtin::Wait.signature(),
            "wait(signal, [offsets], expected, Eq | Ne | Lt | Le | Gt | Ge)"
        );
        assert_eq!(Method::ALL.map(Method::arity), [1, 1, 2, 0]);
        for b in Builtin::ALL {
            assert!(b.signature().starts_with(&format!("{}(", b.name())), "{b}");
            assert!(b.written_arg().is_none_or(|i| i < b.arity()), "{b}");
        }
    }
}
