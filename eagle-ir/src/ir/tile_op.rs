//! The tile ops as data: [`TileOp`] (what `OpKind::Tile` holds), its axes and arg kinds, its
//! names in kernels and in the IR text, and the kernel-facing table [`INTRINSICS`]. What a
//! tile op computes and how it is typed are `crate::tile`'s (the semantics layer).

use super::ReduceOp;

/// The axis a reduction runs along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    /// `row_*`: along each row of a 2-D tile (`[M, N] -> [M, 1]`). The discriminants index
    /// [`ReduceOp::tile_names`].
    Row = 0,
    /// `col_*`: along each column of a 2-D tile (`[M, N] -> [1, N]`).
    Col = 1,
    /// `reduce_*`: over the whole tile in row-major order (any rank -> scalar).
    All = 2,
}

/// Which element an `argmax`/`argmin` reduction picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArgOp {
    /// The first index of the greatest element.
    Max,
    /// The first index of the least element.
    Min,
}

/// A tile op: what [`crate::OpKind::Tile`] computes. Operands are listed per variant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TileOp {
    /// `row_sum(t)`, `col_max(t)`, `reduce_prod(t)`, ...: operand `[t]`. Sum and product
    /// combine in the order of [`reduce_order`]; max and min are the elementwise `max`/`min`
    /// (IEEE 754-2019 `maximum`/`minimum`, canonical NaN), which are associative, so their
    /// order does not show.
    Reduce(ReduceOp, Axis),
    /// `row_argmax(t)`, `col_argmin(t)`: operand `[t]`, a 2-D tile of a non-bool dtype; the
    /// result holds `i64` indices. The first NaN wins if there is one; otherwise the first
    /// index of the greatest (least) element, `+0.0` counting above `-0.0` (the element that
    /// `row_max` / `row_min` returns).
    Arg(ArgOp, Axis),
    /// `cumsum(t, axis)`, `cumprod`, `cummax`, `cummin`, `cumany`, `cumall`: operand `[t]`, a
    /// 2-D tile; the running combination along `axis` (0: down each column, 1: along each
    /// row) in index order, as a sequential loop computes it: `out[0] = t[0]`,
    /// `out[k] = out[k - 1] <op> t[k]` (one rounding per step; no reassociation).
    Scan(ReduceOp, usize),
    /// `sort(t, axis)`: operand `[t]`, a 2-D tile of numbers; each column (axis 0) or row
    /// (axis 1) in ascending order, stable, NaNs last, `-0.0` and `+0.0` equal
    /// (`crate::prim::sorts_before`).
    Sort(usize),
    /// `argsort(t, axis)`: the `i64` indices along `axis` that [`TileOp::Sort`] puts in order
    /// (ties keep index order).
    ArgSort(usize),
    /// `gather(t, idx, axis)`: operands `[t, idx]`, a 2-D tile and a 2-D tile of integer
    /// indices; along axis 1, `out[i][j] = t[i][idx[i][j]]` (`idx` `[M, K]`, `out` `[M, K]`);
    /// along axis 0, `out[i][j] = t[idx[i][j]][j]` (`idx` `[K, N]`). An index outside the
    /// axis is a run-time error naming the op.
    Gather(usize),
    /// `scatter(t, idx, v, axis)` (`add` false) and `scatter_add` (`add` true): operands
    /// `[t, idx, v]`, `t` a 2-D tile, `idx` integer indices and `v` values of `t`'s dtype, both
    /// `[M, K]` (axis 1) or `[K, N]` (axis 0). The result is `t` with, in row-major order of
    /// `idx`, `out[i][idx[i][j]] = v[i][j]` (axis 1; axis 0: `out[idx[i][j]][j]`), or `+=` for
    /// `scatter_add`: duplicate indices combine in index order (the last write wins; sums
    /// round once per add, in that order). An index outside the axis is a run-time error.
    Scatter {
        /// `scatter_add` rather than `scatter`.
        add: bool,
        /// The axis the indices run along.
        axis: usize,
    },
    /// `expand(t, [shape])` (and implicit broadcasting): operand `[t]`, a tile of the same
    /// rank whose every dim equals the result's or is 1 (numpy's rule), or a scalar.
    Expand,
    /// `transpose(t)`: operand `[t]`, `[M, N] -> [N, M]`.
    Transpose,
    /// `reshape(t, [shape])`: operand `[t]`; the same elements in row-major order.
    Reshape,
    /// `concat(a, b, axis)`: operands `[a, b]`, equal in every dim but `axis`.
    Concat(usize),
    /// `extract(t, [offsets], [shape])`: operand `[t]`; the sub-tile at constant `offsets`.
    Extract(Vec<u64>),
    /// `full([shape], v)` and `zeros([shape], dtype)`: operand `[v]`, a scalar.
    Full,
    /// `iota([shape], axis, dtype)`: no operands; element `e` is its index along `axis`
    /// (`as` the result dtype).
    Iota(usize),
    /// `matmul(a, b)`: operands `[a, b]`, `[M, K] x [K, N] -> [M, N]`; see [`TileOp::eval`]
    /// for the accumulation order.
    Matmul,
    /// `matmul_acc(c, a, b)`: operands `[c, a, b]`, `c + a x b` accumulated into `c`'s
    /// values in the same order as [`TileOp::Matmul`].
    MatmulAcc,
}

/// How a kernel passes one argument of a tile intrinsic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A tile (or a scalar where the op allows one) expression.
    Value,
    /// A shape list `[M, N]` of compile-time extents.
    Shape,
    /// An offsets list `[i, j]` of compile-time constants.
    Offsets,
    /// An axis, an integer literal (0 or 1).
    Axis,
    /// A dtype name (`f32`).
    DType,
}

/// One tile intrinsic as a kernel calls it.
#[derive(Debug, Clone, Copy)]
pub struct Intrinsic {
    /// The function name (`row_sum`).
    pub name: &'static str,
    /// The arguments in order.
    pub args: &'static [ArgKind],
    /// The call as the docs and error messages show it (`row_sum(t)`).
    pub signature: &'static str,
}

use ArgKind as K;
const T: &[ArgKind] = &[K::Value];

/// The `argmax`/`argmin` intrinsics along rows, then along columns.
const ARG_INTRINSICS: [Intrinsic; 4] = [
    Intrinsic {
        name: "row_argmax",
        args: T,
        signature: "row_argmax(t)",
    },
    Intrinsic {
        name: "row_argmin",
        args: T,
        signature: "row_argmin(t)",
    },
    Intrinsic {
        name: "col_argmax",
        args: T,
        signature: "col_argmax(t)",
    },
    Intrinsic {
        name: "col_argmin",
        args: T,
        signature: "col_argmin(t)",
    },
];

/// The tile intrinsics that are not reductions or arg reductions, in the order the docs list
/// them.
const OTHER_INTRINSICS: &[Intrinsic] = &[
    Intrinsic {
        name: "expand",
        args: &[K::Value, K::Shape],
        signature: "expand(t, [M, N])",
    },
    Intrinsic {
        name: "transpose",
        args: T,
        signature: "transpose(t)",
    },
    Intrinsic {
        name: "reshape",
        args: &[K::Value, K::Shape],
        signature: "reshape(t, [shape])",
    },
    Intrinsic {
        name: "concat",
        args: &[K::Value, K::Value, K::Axis],
        signature: "concat(a, b, axis)",
    },
    Intrinsic {
        name: "extract",
        args: &[K::Value, K::Offsets, K::Shape],
        signature: "extract(t, [offsets], [shape])",
    },
    Intrinsic {
        name: "full",
        args: &[K::Shape, K::Value],
        signature: "full([shape], v)",
    },
    Intrinsic {
        name: "zeros",
        args: &[K::Shape, K::DType],
        signature: "zeros([shape], dtype)",
    },
    Intrinsic {
        name: "iota",
        args: &[K::Shape, K::Axis, K::DType],
        signature: "iota([shape], axis, dtype)",
    },
    Intrinsic {
        name: "matmul",
        args: &[K::Value, K::Value],
        signature: "matmul(a, b)",
    },
    Intrinsic {
        name: "gather",
        args: &[K::Value, K::Value, K::Axis],
        signature: "gather(t, idx, axis)",
    },
    Intrinsic {
        name: "scatter",
        args: &[K::Value, K::Value, K::Value, K::Axis],
        signature: "scatter(t, idx, v, axis)",
    },
    Intrinsic {
        name: "scatter_add",
        args: &[K::Value, K::Value, K::Value, K::Axis],
        signature: "scatter_add(t, idx, v, axis)",
    },
    Intrinsic {
        name: "sort",
        args: &[K::Value, K::Axis],
        signature: "sort(t, axis)",
    },
    Intrinsic {
        name: "argsort",
        args: &[K::Value, K::Axis],
        signature: "argsort(t, axis)",
    },
    Intrinsic {
        name: "matmul_acc",
        args: &[K::Value, K::Value, K::Value],
        signature: "matmul_acc(c, a, b)",
    },
];

/// Every tile intrinsic a kernel can call: the macros accept exactly these names, and
/// [`crate::FunctionBuilder::tile_intrinsic`] builds them. The reductions derive from
/// [`ReduceOp`]'s declaration (`row_<op>`, `col_<op>` and `reduce_<op>` for each op), listed
/// per axis: row reductions and arg reductions, column ones, whole-tile ones, then the rest,
/// then the running forms (`cumsum(t, axis)`, ...).
pub static INTRINSICS: std::sync::LazyLock<Vec<Intrinsic>> = std::sync::LazyLock::new(|| {
    let reductions = |axis: Axis| {
        ReduceOp::ALL.into_iter().map(move |op| Intrinsic {
            name: op.tile_names()[axis as usize],
            args: T,
            signature: op.tile_signatures()[axis as usize],
        })
    };
    reductions(Axis::Row)
        .chain(ARG_INTRINSICS[..2].iter().copied())
        .chain(reductions(Axis::Col))
        .chain(ARG_INTRINSICS[2..].iter().copied())
        .chain(reductions(Axis::All))
        .chain(OTHER_INTRINSICS.iter().copied())
        .chain(ReduceOp::ALL.into_iter().map(|op| Intrinsic {
            name: op.scan_names()[0],
            args: &[K::Value, K::Axis],
            signature: op.scan_signature(),
        }))
        .collect()
});

/// The tile intrinsic named `name`, if there is one.
pub fn intrinsic(name: &str) -> Option<&'static Intrinsic> {
    INTRINSICS.iter().find(|i| i.name == name)
}

impl TileOp {
    /// Every tile op without a list attribute (the ones [`TileOp::from_name`] can name by
    /// keyword alone); `extract` carries its offsets in its text.
    pub fn keyword_ops() -> Vec<TileOp> {
        let mut v = vec![];
        for a in [Axis::Row, Axis::Col, Axis::All] {
            for op in ReduceOp::ALL {
                v.push(TileOp::Reduce(op, a));
            }
        }
        for a in [Axis::Row, Axis::Col] {
            v.push(TileOp::Arg(ArgOp::Max, a));
            v.push(TileOp::Arg(ArgOp::Min, a));
        }
        for op in ReduceOp::ALL {
            v.push(TileOp::Scan(op, 0));
            v.push(TileOp::Scan(op, 1));
        }
        v.extend([
            TileOp::Expand,
            TileOp::Transpose,
            TileOp::Reshape,
            TileOp::Concat(0),
            TileOp::Concat(1),
            TileOp::Gather(0),
            TileOp::Gather(1),
            TileOp::Scatter {
                add: false,
                axis: 0,
            },
            TileOp::Scatter {
                add: false,
                axis: 1,
            },
            TileOp::Scatter { add: true, axis: 0 },
            TileOp::Scatter { add: true, axis: 1 },
            TileOp::Sort(0),
            TileOp::Sort(1),
            TileOp::ArgSort(0),
            TileOp::ArgSort(1),
            TileOp::Full,
            TileOp::Iota(0),
            TileOp::Iota(1),
            TileOp::Matmul,
            TileOp::MatmulAcc,
        ]);
        v
    }

    /// The IR text keyword: the kernel's name (`row_sum`, `matmul`), with the axis appended
    /// where the kernel passes one (`concat_1`, `iota_0`). `extract` prints its offsets after
    /// the keyword (`extract[0, 16]`).
    pub fn name(&self) -> &'static str {
        match self {
            TileOp::Reduce(op, a) => op.tile_names()[*a as usize],
            TileOp::Arg(op, a) => match (a, op) {
                (Axis::Col, ArgOp::Max) => "col_argmax",
                (Axis::Col, ArgOp::Min) => "col_argmin",
                (_, ArgOp::Max) => "row_argmax",
                (_, ArgOp::Min) => "row_argmin",
            },
            TileOp::Scan(op, 0) => op.scan_names()[1],
            TileOp::Scan(op, _) => op.scan_names()[2],
            TileOp::Expand => "expand",
            TileOp::Transpose => "transpose",
            TileOp::Reshape => "reshape",
            TileOp::Concat(0) => "concat_0",
            TileOp::Concat(_) => "concat_1",
            TileOp::Extract(_) => "extract",
            TileOp::Scatter {
                add: false,
                axis: 0,
            } => "scatter_0",
            TileOp::Scatter { add: false, .. } => "scatter_1",
            TileOp::Scatter { add: true, axis: 0 } => "scatter_add_0",
            TileOp::Scatter { add: true, .. } => "scatter_add_1",
            TileOp::Gather(0) => "gather_0",
            TileOp::Gather(_) => "gather_1",
            TileOp::Sort(0) => "sort_0",
            TileOp::Sort(_) => "sort_1",
            TileOp::ArgSort(0) => "argsort_0",
            TileOp::ArgSort(_) => "argsort_1",
            TileOp::Full => "full",
            TileOp::Iota(0) => "iota_0",
            TileOp::Iota(_) => "iota_1",
            TileOp::Matmul => "matmul",
            TileOp::MatmulAcc => "matmul_acc",
        }
    }

    /// The number of operands.
    pub fn arity(&self) -> usize {
        match self {
            TileOp::Iota(_) => 0,
            TileOp::Concat(_) | TileOp::Matmul | TileOp::Gather(_) => 2,
            TileOp::MatmulAcc | TileOp::Scatter { .. } => 3,
            // Exhaustive on purpose: a new tile op must state its arity.
            TileOp::Reduce(..)
            | TileOp::Arg(..)
            | TileOp::Scan(..)
            | TileOp::Sort(_)
            | TileOp::ArgSort(_)
            | TileOp::Expand
            | TileOp::Transpose
            | TileOp::Reshape
            | TileOp::Extract(_)
            | TileOp::Full => 1,
        }
    }

    /// The operands of a product, `(c, a, b)`, from its operands `args` (of any kind: values,
    /// tiles, shapes): `matmul a, b` has no accumulator, `matmul_acc c, a, b` has `c`. `None`
    /// for any other op or a wrong operand count. Every stage that reads a product's operands
    /// takes them from here.
    pub fn gemm_operands<'a, T>(&self, args: &'a [T]) -> Option<(Option<&'a T>, &'a T, &'a T)> {
        match (self, args) {
            (TileOp::Matmul, [a, b]) => Some((None, a, b)),
            (TileOp::MatmulAcc, [c, a, b]) => Some((Some(c), a, b)),
            _ => None,
        }
    }

    /// The op a keyword names (`extract` with empty offsets, filled in by the parser).
    pub fn from_name(s: &str) -> Option<TileOp> {
        if s == "extract" {
            return Some(TileOp::Extract(vec![]));
        }
        Self::keyword_ops().into_iter().find(|o| o.name() == s)
    }
}
