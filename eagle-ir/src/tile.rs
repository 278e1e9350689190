//! The tile algebra: reductions, broadcasting, layout, creation and matmul on tiles, each
//! stated once.
//!
//! An op here is [`crate::OpKind::Tile`]: a [`TileOp`] and its operands. Everything a stage
//! needs about a tile op derives from this module:
//! - its spelling in kernels and in the IR text ([`TileOp::name`], [`TileOp::from_name`],
//!   [`INTRINSICS`], which the macros read to accept a call),
//! - its typing ([`TileOp::infer`], called by the builder to make the result type and by the
//!   verifier to check it),
//! - what it computes ([`TileOp::eval`], the reference semantics the backends are tested
//!   against bit for bit), including the fixed combine order of the reductions
//!   ([`REDUCE_LANES`], [`reduce_order`]) and matmul's accumulation order.
//!
//! Tiles are row-major. A 2-D tile `[M, N]` has `M` rows of `N` elements.

use crate::eval::{self, Scalar};
pub use crate::ir::{intrinsic, ArgKind, ArgOp, Axis, Intrinsic, TileOp, INTRINSICS};
use crate::ir::{BinOp, ReduceOp};
use crate::prim;
use crate::types::{DType, Dim, Shape, Type};

/// The number of partial accumulators of a sum or product reduction (see [`reduce_order`]).
pub const REDUCE_LANES: usize = 8;

impl TileOp {
    /// The result type of this op on operands of types `args`. `shape` and `dtype` are what
    /// the kernel wrote (the target shape of `expand`, `reshape`, `extract`, `full`, `iota`;
    /// the dtype of `iota`); the verifier passes the result type's.
    ///
    /// # Errors
    /// A message naming what was expected and what was found: a row reduction of a tile that
    /// is not 2-D, a broadcast of incompatible shapes, a reshape that changes the element
    /// count, an extract outside the tile, matmul operands whose inner dims differ, operands
    /// of different dtypes.
    pub fn infer(
        &self,
        args: &[&Type],
        shape: Option<&Shape>,
        dtype: Option<DType>,
    ) -> Result<Type, String> {
        let name = self.name();
        let n_args = self.arity();
        no_empty_dims(name, args, shape)?;
        if args.len() != n_args {
            return Err(format!(
                "`{name}` takes {n_args} operand(s), found {}",
                args.len()
            ));
        }
        let tile = |i: usize| -> Result<(&Shape, DType), String> {
            match args[i] {
                Type::Tile(s, d) => Ok((s, *d)),
                t => Err(format!(
                    "`{name}` takes a tile as operand {}, found `{t}`; load one with `load(x, [offsets], [shape])`",
                    i + 1
                )),
            }
        };
        let two_d = |i: usize| -> Result<(Dim, Dim, DType), String> {
            let (s, d) = tile(i)?;
            match s.0.as_slice() {
                [m, n] => Ok((m.clone(), n.clone(), d)),
                _ => Err(format!(
                    "`{name}` takes a 2-D tile `[M, N]`, found `{}` of rank {}; use `reshape(t, [M, N])` first",
                    args[i],
                    s.rank()
                )),
            }
        };
        let want = |what: &str| -> Result<&Shape, String> {
            shape.ok_or_else(|| format!("`{name}` needs its {what} shape"))
        };
        let one = Dim::Const(1);
        Ok(match self {
            TileOp::Reduce(op, axis) => {
                let (_, d) = tile(0)?;
                if !op.accepts(d) {
                    return Err(if op.logical() {
                        format!("`{name}` reduces `bool` flags, found a tile of `{d}`; compare first (`t > 0.0`)")
                    } else {
                        format!("`{name}` reduces numbers, found a tile of `bool`; cast it with `as u32` first")
                    });
                }
                match axis {
                    Axis::All => Type::Scalar(d),
                    Axis::Row => {
                        let (m, _, _) = two_d(0)?;
                        Type::Tile(Shape(vec![m, one]), d)
                    }
                    Axis::Col => {
                        let (_, n, _) = two_d(0)?;
                        Type::Tile(Shape(vec![one, n]), d)
                    }
                }
            }
            TileOp::Scan(op, axis) => scan_type(*op, *axis, args[0])?,
            TileOp::Sort(axis) | TileOp::ArgSort(axis) => sort_type(self, *axis, args[0])?,
            TileOp::Gather(axis) => gather_type(*axis, args[0], args[1])?,
            TileOp::Scatter { add, axis } => scatter_type(*add, *axis, args)?,
            TileOp::Arg(_, axis) => {
                let (m, n, d) = two_d(0)?;
                if d == DType::Bool {
                    return Err(format!("`{name}` compares numbers, found a tile of `bool`"));
                }
                match axis {
                    Axis::Row => Type::Tile(Shape(vec![m, one]), DType::I64),
                    Axis::Col => Type::Tile(Shape(vec![one, n]), DType::I64),
                    Axis::All => return Err("`argmax` over a whole tile is not an op".into()),
                }
            }
            TileOp::Expand => {
                let to = want("target")?;
                match args[0] {
                    Type::Scalar(d) => Type::Tile(to.clone(), *d),
                    _ => {
                        let (s, d) = tile(0)?;
                        if !expands_to(s, to) {
                            return Err(format!(
                                "cannot broadcast a tile of shape `{s}` to `{to}`: each dim must equal the target's or be 1 (numpy's rule), with the same rank"
                            ));
                        }
                        Type::Tile(to.clone(), d)
                    }
                }
            }
            TileOp::Transpose => {
                let (m, n, d) = two_d(0)?;
                Type::Tile(Shape(vec![n, m]), d)
            }
            TileOp::Reshape => {
                let (s, d) = tile(0)?;
                let to = want("target")?;
                if let (Some(a), Some(b)) = (s.numel(), to.numel()) {
                    if a != b {
                        return Err(format!(
                            "`reshape` keeps the element count: `{s}` has {a} elements and `{to}` has {b}"
                        ));
                    }
                }
                // With symbolic extents the count is checked once they are bound (the
                // verifier runs again after specialization).
                Type::Tile(to.clone(), d)
            }
            TileOp::Concat(axis) => {
                let (a, da) = tile(0)?;
                let (b, db) = tile(1)?;
                concat_type(*axis, a, da, b, db)?
            }
            TileOp::Extract(offs) => {
                let (s, d) = tile(0)?;
                extract_type(offs, s, d, want("sub-tile")?)?
            }
            TileOp::Full => {
                let to = want("result")?;
                match args[0] {
                    Type::Scalar(d) => Type::Tile(to.clone(), *d),
                    t => return Err(format!("`full` fills with a scalar, found `{t}`")),
                }
            }
            TileOp::Iota(axis) => {
                let to = want("result")?;
                let d = dtype.ok_or("`iota` needs a dtype")?;
                if *axis >= to.rank() || *axis > 1 {
                    return Err(format!(
                        "`iota` along axis {axis} of a tile of rank {}",
                        to.rank()
                    ));
                }
                if d == DType::Bool {
                    return Err("`iota` counts in a number dtype, found `bool`".into());
                }
                Type::Tile(to.clone(), d)
            }
            TileOp::Matmul | TileOp::MatmulAcc => {
                let off = usize::from(*self == TileOp::MatmulAcc);
                matmul_type(name, args, off, two_d(off)?, two_d(off + 1)?)?
            }
        })
    }

    /// What the op computes: the reference semantics, on tiles given as row-major element
    /// lists with their constant shapes (a scalar is shape `[]`). `result` is the result
    /// type (its shape must be constant).
    ///
    /// - Sums and products follow [`reduce_order`]; max and min fold in any order (they are
    ///   associative), argmax and argmin as [`TileOp::Arg`] says.
    /// - `matmul`: `c[i][j] = ((c0 + a[i][0] * b[0][j]) + a[i][1] * b[1][j]) + ...`, `k`
    ///   ascending, each product and each sum rounded to the dtype (no fused multiply-add:
    ///   what `acc += a * b` computes in Rust); `c0` is `-0.0` for floats (the identity of
    ///   `+`, so a zero sum keeps its sign) and 0 for integers, or `c[i][j]` for
    ///   `matmul_acc`. Integers wrap.
    ///
    /// # Errors
    /// [`eval::EvalError`] for a dtype the op does not take.
    pub fn eval(&self, args: &[Tile], result: &Type) -> Result<Tile, eval::EvalError> {
        let narrow = |t: &Tile| t.data.first().is_some_and(|s| s.dtype().is_narrow());
        if result.dtype().is_some_and(DType::is_narrow) || args.iter().any(narrow) {
            // A storage dtype is computed in its compute dtype and the result narrowed once
            // (`crate::narrow`): a sum or a matmul of `f16` accumulates in `f32`.
            let wide: Vec<Tile> = args
                .iter()
                .map(|t| Tile {
                    shape: t.shape.clone(),
                    data: t.data.iter().map(|&s| eval::widen(s)).collect(),
                })
                .collect();
            let r = self.eval(&wide, &result.widened())?;
            let rd = result.dtype().unwrap_or(DType::F32);
            return Ok(Tile {
                shape: r.shape,
                data: r.data.into_iter().map(|s| eval::narrow(s, rd)).collect(),
            });
        }
        let rshape = result.shape().and_then(|s| s.consts()).unwrap_or_default();
        let rd = result.dtype().unwrap_or(DType::F32);
        let n: usize = rshape.iter().product::<u64>() as usize;
        let out = |data: Vec<Scalar>| Tile {
            shape: rshape.clone(),
            data,
        };
        Ok(match self {
            TileOp::Reduce(op, axis) => {
                let t = &args[0];
                let seqs = t.sequences(*axis);
                let data = seqs
                    .iter()
                    .map(|s| reduce(*op, &s.iter().map(|&i| t.data[i]).collect::<Vec<_>>()))
                    .collect::<Result<Vec<_>, _>>()?;
                Tile {
                    shape: if *axis == Axis::All { vec![] } else { rshape },
                    data,
                }
            }
            TileOp::Scan(op, axis) => out(scan(*op, *axis, &args[0])?),
            TileOp::Sort(axis) => out(sorted(*axis, &args[0], false)),
            TileOp::Gather(axis) => out(gather(*axis, &args[0], &args[1])?),
            TileOp::Scatter { add, axis } => out(scatter(*add, *axis, args)?),
            TileOp::ArgSort(axis) => out(sorted(*axis, &args[0], true)),
            TileOp::Arg(op, axis) => {
                let t = &args[0];
                out(t
                    .sequences(*axis)
                    .iter()
                    .map(|s| {
                        let mut best = 0usize;
                        for k in 1..s.len() {
                            if arg_better(*op, t.data[s[k]], t.data[s[best]]) {
                                best = k;
                            }
                        }
                        Scalar::I64(best as i64)
                    })
                    .collect())
            }
            TileOp::Expand => {
                let t = &args[0];
                out((0..n)
                    .map(|e| {
                        if t.shape.is_empty() {
                            return t.data[0];
                        }
                        let idx = unravel(e, &rshape);
                        let src: Vec<u64> = idx
                            .iter()
                            .zip(&t.shape)
                            .map(|(&i, &s)| if s == 1 { 0 } else { i })
                            .collect();
                        t.data[ravel(&src, &t.shape)]
                    })
                    .collect())
            }
            TileOp::Transpose => {
                let t = &args[0];
                let (m, nn) = (t.shape[0] as usize, t.shape[1] as usize);
                out((0..n).map(|e| t.data[(e % m) * nn + e / m]).collect())
            }
            TileOp::Reshape => out(args[0].data.clone()),
            TileOp::Concat(axis) => {
                let (a, b) = (&args[0], &args[1]);
                out((0..n)
                    .map(|e| {
                        let mut idx = unravel(e, &rshape);
                        if idx[*axis] < a.shape[*axis] {
                            a.data[ravel(&idx, &a.shape)]
                        } else {
                            idx[*axis] -= a.shape[*axis];
                            b.data[ravel(&idx, &b.shape)]
                        }
                    })
                    .collect())
            }
            TileOp::Extract(offs) => {
                let t = &args[0];
                out((0..n)
                    .map(|e| {
                        let idx: Vec<u64> = unravel(e, &rshape)
                            .iter()
                            .zip(offs)
                            .map(|(i, o)| i + o)
                            .collect();
                        t.data[ravel(&idx, &t.shape)]
                    })
                    .collect())
            }
            TileOp::Full => out(vec![args[0].data[0]; n]),
            TileOp::Iota(axis) => out((0..n)
                .map(|e| eval::cast(Scalar::I64(unravel(e, &rshape)[*axis] as i64), rd))
                .collect()),
            TileOp::Matmul | TileOp::MatmulAcc => {
                // The operand count is the op's arity, as everywhere in `eval` (checked by the
                // verifier and by `result_type`).
                let Some((c, a, b)) = self.gemm_operands(args) else {
                    unreachable!("`{}` with {} operands", self.name(), args.len())
                };
                let (m, k, nn) = (
                    a.shape[0] as usize,
                    a.shape[1] as usize,
                    b.shape[1] as usize,
                );
                let mut data = Vec::with_capacity(m * nn);
                let mut e = ScalarDot(add_identity(rd));
                for i in 0..m {
                    for j in 0..nn {
                        let c0 = c.map(|c| c.data[i * nn + j]);
                        data.push(prim::dot(&mut e, rd, k as u64, c0, &mut |_, kk| {
                            Ok((a.data[i * k + kk], b.data[kk * nn + j]))
                        })?);
                    }
                }
                out(data)
            }
        })
    }
}

/// The evaluator's instance of [`prim::DotEmitter`]: scalars, and one accumulator (a [`prim::dot`]
/// holds one at a time; a new one replaces the last).
struct ScalarDot(Scalar);

impl prim::DotEmitter for ScalarDot {
    type V = Scalar;
    type Ix = usize;
    type Acc = ();
    type Err = eval::EvalError;
    fn identity(&mut self, d: DType) -> Scalar {
        add_identity(d)
    }
    fn acc(&mut self, _: DType, init: Scalar) {
        self.0 = init;
    }
    fn get(&mut self, _: &()) -> Scalar {
        self.0
    }
    fn set(&mut self, _: &(), v: Scalar) {
        self.0 = v;
    }
    fn mul(&mut self, _: DType, a: &Scalar, b: &Scalar) -> Result<Scalar, eval::EvalError> {
        eval::binary(BinOp::Mul, *a, *b)
    }
    fn add(&mut self, _: DType, a: &Scalar, b: &Scalar) -> Result<Scalar, eval::EvalError> {
        eval::binary(BinOp::Add, *a, *b)
    }
    fn ascending(
        &mut self,
        k: u64,
        step: &mut prim::DotStep<'_, Self>,
    ) -> Result<(), eval::EvalError> {
        (0..k as usize).try_for_each(|kk| step(self, kk))
    }
}

/// Whether two extents can be equal: equal constants, or either symbolic (then the verifier
/// checks them again once specialization has bound them).
fn dims_compatible(a: &Dim, b: &Dim) -> bool {
    match (a.as_const(), b.as_const()) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// Whether a tile of shape `s` broadcasts to `to` (same rank; each dim equal or 1).
pub fn expands_to(s: &Shape, to: &Shape) -> bool {
    s.rank() == to.rank()
        && s.0
            .iter()
            .zip(&to.0)
            .all(|(a, b)| a == b || *a == Dim::Const(1))
}

/// The shape two elementwise operands broadcast to (numpy's rule for tiles of one rank:
/// each dim pair equal, or one of them 1), or `None` when they do not.
pub fn broadcast_shape(a: &Shape, b: &Shape) -> Option<Shape> {
    if a.rank() != b.rank() {
        return None;
    }
    let one = Dim::Const(1);
    a.0.iter()
        .zip(&b.0)
        .map(|(x, y)| {
            if x == y || *y == one {
                Some(x.clone())
            } else if *x == one {
                Some(y.clone())
            } else {
                None
            }
        })
        .collect::<Option<Vec<_>>>()
        .map(Shape)
}

/// A tile's value for [`TileOp::eval`]: its constant shape and its elements in row-major
/// order (a scalar has shape `[]` and one element).
#[derive(Debug, Clone, PartialEq)]
pub struct Tile {
    /// Extents.
    pub shape: Vec<u64>,
    /// Elements, row-major.
    pub data: Vec<Scalar>,
}

impl Tile {
    /// The element indices of each sequence a reduction along `axis` combines, in order:
    /// one per row (`Row`), one per column (`Col`), or the whole tile (`All`).
    fn sequences(&self, axis: Axis) -> Vec<Vec<usize>> {
        let len = self.data.len();
        match axis {
            Axis::All => vec![(0..len).collect()],
            Axis::Row => {
                let (m, n) = (self.shape[0] as usize, self.shape[1] as usize);
                (0..m)
                    .map(|i| (0..n).map(|j| i * n + j).collect())
                    .collect()
            }
            Axis::Col => {
                let (m, n) = (self.shape[0] as usize, self.shape[1] as usize);
                (0..n)
                    .map(|j| (0..m).map(|i| i * n + j).collect())
                    .collect()
            }
        }
    }
}

/// The row-major strides of `shape`, in elements (`[M, N]` -> `[N, 1]`): what every backend
/// indexes tiles by.
pub fn strides(shape: &[u64]) -> Vec<u64> {
    let mut st = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        st[d] = st[d + 1] * shape[d + 1];
    }
    st
}

fn unravel(mut e: usize, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = e as u64 % shape[d];
        e /= shape[d] as usize;
    }
    idx
}

fn ravel(idx: &[u64], shape: &[u64]) -> usize {
    idx.iter()
        .zip(shape)
        .fold(0u64, |acc, (&i, &s)| acc * s + i) as usize
}

/// The identity of `+` in dtype `d`: `-0.0` for floats (`x + -0.0 == x` for every `x`, `-0.0`
/// included), 0 for integers.
pub fn add_identity(d: DType) -> Scalar {
    match d {
        DType::F32 => Scalar::F32(-0.0),
        DType::F64 => Scalar::F64(-0.0),
        _ => Scalar::from_bits(0, d),
    }
}

/// The identity of reduction `op` in dtype `d`: what an empty lane starts from (`-0.0` or 0
/// for a sum, 1 for a product, `-inf` or the least integer for max, `+inf` or the greatest
/// for min, `false` for any, `true` for all).
pub fn reduce_identity(op: ReduceOp, d: DType) -> Scalar {
    match (op, d) {
        (ReduceOp::Sum, _) => add_identity(d),
        (ReduceOp::Prod, _) => eval::cast(Scalar::I64(1), d),
        (ReduceOp::Max, _) if d.is_float() => eval::cast(Scalar::F64(f64::NEG_INFINITY), d),
        (ReduceOp::Min, _) if d.is_float() => eval::cast(Scalar::F64(f64::INFINITY), d),
        // The least and greatest integers of the dtype's width (`index` is signed).
        (ReduceOp::Max, _) if d.is_signed() => Scalar::from_bits(1 << (8 * d.size() - 1), d),
        (ReduceOp::Min, _) if d.is_signed() => Scalar::from_bits(!0 >> (65 - 8 * d.size()), d),
        (ReduceOp::Max, _) => Scalar::from_bits(0, d),
        (ReduceOp::Min, _) => Scalar::from_bits(u64::MAX, d),
        (ReduceOp::Any, _) => Scalar::Bool(false),
        (ReduceOp::All, _) => Scalar::Bool(true),
    }
}

/// The fixed combine order of a reduction over a sequence `x[0], ..., x[L-1]` (a row, a
/// column, or a whole tile in row-major order), the same on every backend and at every
/// vector width: [`REDUCE_LANES`] = 8 partials, where lane `j` starts from the op's identity
/// ([`reduce_identity`]) and combines `x[j], x[j + 8], x[j + 16], ...` in ascending order;
/// then the lanes combine as a fixed tree, `((l0 . l1) . (l2 . l3)) . ((l4 . l5) . (l6 . l7))`.
/// This function returns the combined value; the backends emit the same steps (an 8-lane
/// vector loop on the CPU, the same loop per thread on CUDA).
///
/// # Errors
/// [`eval::EvalError`] for a dtype the combining op does not take (a `bool`).
pub fn reduce_order(op: ReduceOp, xs: &[Scalar], d: DType) -> Result<Scalar, eval::EvalError> {
    let b = op.bin_op();
    let mut lanes = [reduce_identity(op, d); REDUCE_LANES];
    for (i, &x) in xs.iter().enumerate() {
        let l = &mut lanes[i % REDUCE_LANES];
        *l = eval::binary(b, *l, x)?;
    }
    prim::lane_tree(lanes, |x, y, _| eval::binary(b, x, y))
}

fn reduce(op: ReduceOp, xs: &[Scalar]) -> Result<Scalar, eval::EvalError> {
    let d = xs.first().map(|x| x.dtype()).unwrap_or(DType::F32);
    reduce_order(op, xs, d)
}

/// Whether `x` replaces the best-so-far `best` in an `argmax`/`argmin` scan (the scan runs in
/// ascending index order and keeps the first best): a NaN beats any number and loses to an
/// earlier NaN; otherwise greater (less) wins, and `+0.0` is above `-0.0`.
pub fn arg_better(op: ArgOp, x: Scalar, best: Scalar) -> bool {
    let d = x.dtype();
    prim::arg_better(&mut eval::Scalars(d), op, d.is_float(), &x, &best)
}

/// The type of `matmul` (`off` 0) or `matmul_acc` (`off` 1: `args[0]` is the accumulator) of
/// `[m, k]` and `[k2, n]` tiles of dtypes `da` and `db`.
fn matmul_type(
    name: &str,
    args: &[&Type],
    off: usize,
    (m, k, da): (Dim, Dim, DType),
    (k2, n, db): (Dim, Dim, DType),
) -> Result<Type, String> {
    if da != db || da == DType::Bool {
        return Err(format!(
            "`{name}` multiplies tiles of one number dtype, found `{da}` and `{db}`; cast one with `as`"
        ));
    }
    if !dims_compatible(&k, &k2) {
        return Err(format!(
            "`{name}` of `{}` and `{}`: the inner dims differ ({k} vs {k2}); `[M, K] x [K, N]` needs the same K",
            args[off], args[off + 1]
        ));
    }
    let out = Type::Tile(Shape(vec![m, n]), da);
    if off == 1 && args[0] != &out {
        return Err(format!(
            "`matmul_acc` accumulates into a `{out}`, found `{}`",
            args[0]
        ));
    }
    Ok(out)
}

/// The type of a running form (`cumsum(t, axis)`, ...) of a tile of type `t`: the same.
fn scan_type(op: ReduceOp, axis: usize, t: &Type) -> Result<Type, String> {
    let kname = op.scan_names()[0];
    let Type::Tile(s, d) = t else {
        return Err(format!(
            "`{kname}` takes a tile as operand 1, found `{t}`; load one with `load(x, [offsets], [shape])`"
        ));
    };
    if s.rank() != 2 {
        return Err(format!(
            "`{kname}` takes a 2-D tile `[M, N]`, found `{t}` of rank {}; use `reshape(t, [M, N])` first",
            s.rank()
        ));
    }
    if !op.accepts(*d) {
        return Err(if op.logical() {
            format!("`{kname}` runs over `bool` flags, found a tile of `{d}`; compare first (`t > 0.0`)")
        } else {
            format!(
                "`{kname}` runs over numbers, found a tile of `bool`; cast it with `as u32` first"
            )
        });
    }
    if axis > 1 {
        return Err(format!(
            "`{kname}` runs along axis 0 (down each column) or 1 (along each row), found axis {axis}"
        ));
    }
    Ok(t.clone())
}

/// A running form of `t`: along each sequence of `axis` (0: columns, 1: rows), in index
/// order, `out[k] = out[k - 1] <op> t[k]` from `out[0] = t[0]`.
fn scan(op: ReduceOp, axis: usize, t: &Tile) -> Result<Vec<Scalar>, eval::EvalError> {
    let mut data = t.data.clone();
    let along = if axis == 0 { Axis::Col } else { Axis::Row };
    for s in t.sequences(along) {
        for k in 1..s.len() {
            data[s[k]] = eval::binary(op.bin_op(), data[s[k - 1]], t.data[s[k]])?;
        }
    }
    Ok(data)
}

/// The type of `gather(t, idx, axis)`: `idx`'s shape, `t`'s dtype.
fn gather_type(axis: usize, t: &Type, idx: &Type) -> Result<Type, String> {
    let (Type::Tile(s, d), Type::Tile(si, di)) = (t, idx) else {
        return Err(format!(
            "`gather` takes two tiles (the source and the indices), found `{t}` and `{idx}`; load them with `load(x, [offsets], [shape])`"
        ));
    };
    if s.rank() != 2 || si.rank() != 2 {
        return Err(format!(
            "`gather` takes 2-D tiles `[M, N]`, found `{t}` and `{idx}`; use `reshape(t, [M, N])` first"
        ));
    }
    if !di.is_int() {
        return Err(format!(
            "`gather`'s indices are integers, found a tile of `{di}`; cast them with `as i64`"
        ));
    }
    if axis > 1 {
        return Err(format!(
            "`gather` runs along axis 0 (indices pick rows) or 1 (indices pick columns), found axis {axis}"
        ));
    }
    // Along axis 1 the rows match; along axis 0 the columns.
    let other = 1 - axis;
    if !dims_compatible(&s.0[other], &si.0[other]) {
        return Err(format!(
            "`gather` along axis {axis} of `{t}` with indices `{idx}`: dim {other} differs ({} vs {}); the indices have the source's extent in every dim but the axis",
            s.0[other], si.0[other]
        ));
    }
    Ok(Type::Tile(si.clone(), *d))
}

/// The position in a `shape` (`[m, n]`) tile that element `e` of a `[.., k]` index tile,
/// holding `q`, selects along `axis` (gather's and scatter's one rule).
///
/// # Errors
/// [`eval::EvalError::IndexOutOfRange`] for `q` outside the axis.
fn indexed_at(
    axis: usize,
    shape: &[u64],
    k: usize,
    e: usize,
    q: Scalar,
) -> Result<usize, eval::EvalError> {
    let (m, n) = (shape[0] as usize, shape[1] as usize);
    let extent = if axis == 0 { m } else { n };
    let q = match q.to_const() {
        crate::ir::Const::Int(q) => q,
        _ => -1,
    };
    if q < 0 || q >= extent as i128 {
        return Err(eval::EvalError::IndexOutOfRange {
            index: q,
            extent: extent as u64,
        });
    }
    let (i, j) = (e / k, e % k);
    Ok(if axis == 0 {
        q as usize * n + j
    } else {
        i * n + q as usize
    })
}

/// `gather` of `t` by `idx` along `axis` (see [`TileOp::Gather`]).
fn gather(axis: usize, t: &Tile, idx: &Tile) -> Result<Vec<Scalar>, eval::EvalError> {
    let k = idx.shape[1] as usize;
    idx.data
        .iter()
        .enumerate()
        .map(|(e, &q)| Ok(t.data[indexed_at(axis, &t.shape, k, e, q)?]))
        .collect()
}

/// The type of `scatter(t, idx, v, axis)` / `scatter_add`: `t`'s.
fn scatter_type(add: bool, axis: usize, args: &[&Type]) -> Result<Type, String> {
    let name = if add { "scatter_add" } else { "scatter" };
    let (t, idx, v) = (args[0], args[1], args[2]);
    gather_type(axis, t, idx).map_err(|e| e.replacen("`gather`", &format!("`{name}`"), 1))?;
    let (Type::Tile(_, d), Type::Tile(si, _), Type::Tile(sv, dv)) = (t, idx, v) else {
        return Err(format!(
            "`{name}` takes three tiles (the base, the indices and the values), found `{v}` as the values"
        ));
    };
    if dv != d || sv.rank() != 2 || !si.0.iter().zip(&sv.0).all(|(a, b)| dims_compatible(a, b)) {
        return Err(format!(
            "`{name}`'s values have the indices' shape and the base's dtype: `{si}` of `{d}`, found `{v}`"
        ));
    }
    if add && *d == DType::Bool {
        return Err("`scatter_add` adds numbers, found a tile of `bool`; use `scatter`".into());
    }
    Ok(t.clone())
}

/// `scatter`/`scatter_add` (see [`TileOp::Scatter`]): `t` with each value of `args[2]` written
/// (or added) at its index, in row-major order of the indices.
fn scatter(add: bool, axis: usize, args: &[Tile]) -> Result<Vec<Scalar>, eval::EvalError> {
    let (t, idx, v) = (&args[0], &args[1], &args[2]);
    let k = idx.shape[1] as usize;
    let mut data = t.data.clone();
    for (e, &q) in idx.data.iter().enumerate() {
        let at = indexed_at(axis, &t.shape, k, e, q)?;
        data[at] = if add {
            eval::binary(BinOp::Add, data[at], v.data[e])?
        } else {
            v.data[e]
        };
    }
    Ok(data)
}

/// The type of `sort(t, axis)` (`t`'s) or `argsort(t, axis)` (`i64` indices of `t`'s shape).
fn sort_type(op: &TileOp, axis: usize, t: &Type) -> Result<Type, String> {
    let kname = if matches!(op, TileOp::Sort(_)) {
        "sort"
    } else {
        "argsort"
    };
    let Type::Tile(s, d) = t else {
        return Err(format!(
            "`{kname}` takes a tile as operand 1, found `{t}`; load one with `load(x, [offsets], [shape])`"
        ));
    };
    if s.rank() != 2 {
        return Err(format!(
            "`{kname}` takes a 2-D tile `[M, N]`, found `{t}` of rank {}; use `reshape(t, [M, N])` first",
            s.rank()
        ));
    }
    if *d == DType::Bool {
        return Err(format!(
            "`{kname}` orders numbers, found a tile of `bool`; cast it with `as u32` first"
        ));
    }
    if axis > 1 {
        return Err(format!(
            "`{kname}` runs along axis 0 (down each column) or 1 (along each row), found axis {axis}"
        ));
    }
    Ok(if let TileOp::ArgSort(_) = op {
        Type::Tile(s.clone(), DType::I64)
    } else {
        t.clone()
    })
}

/// `sort` (or, with `indices`, `argsort`) of `t` along `axis`: a stable sort by
/// [`prim::sorts_before`].
fn sorted(axis: usize, t: &Tile, indices: bool) -> Vec<Scalar> {
    let mut data = t.data.clone();
    let along = if axis == 0 { Axis::Col } else { Axis::Row };
    for s in t.sequences(along) {
        let d = t.data.first().map_or(DType::F32, |x| x.dtype());
        let mut e = eval::Scalars(d);
        let mut order: Vec<usize> = (0..s.len()).collect();
        order.sort_by(|&a, &b| {
            let (x, y) = (t.data[s[a]], t.data[s[b]]);
            if prim::sorts_before(&mut e, d.is_float(), &x, &y) {
                std::cmp::Ordering::Less
            } else if prim::sorts_before(&mut e, d.is_float(), &y, &x) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        for (pos, &k) in order.iter().enumerate() {
            data[s[pos]] = if indices {
                Scalar::I64(k as i64)
            } else {
                t.data[s[k]]
            };
        }
    }
    data
}

/// The type of `concat` along `axis` of tiles of shapes `a` and `b` and dtypes `da` and `db`.
fn concat_type(axis: usize, a: &Shape, da: DType, b: &Shape, db: DType) -> Result<Type, String> {
    if da != db {
        return Err(format!(
            "`concat` of tiles of `{da}` and `{db}`; cast one with `as`"
        ));
    }
    if a.rank() != b.rank() || axis >= a.rank() || axis > 1 {
        return Err(format!(
            "`concat` along axis {axis} of `{a}` and `{b}`: both need the same rank, above the axis"
        ));
    }
    let mut out = a.0.clone();
    for (k, (x, y)) in a.0.iter().zip(&b.0).enumerate() {
        if k == axis {
            out[k] = Dim::derived(crate::types::DimOp::Add, x.clone(), y.clone());
        } else if !dims_compatible(x, y) {
            return Err(format!(
                "`concat` along axis {axis} of `{a}` and `{b}`: dim {k} differs ({x} vs {y})"
            ));
        }
    }
    Ok(Type::Tile(Shape(out), da))
}

/// The type of `extract` at `offs` of a sub-tile of shape `to` from a tile of shape `s`.
fn extract_type(offs: &[u64], s: &Shape, d: DType, to: &Shape) -> Result<Type, String> {
    if offs.len() != s.rank() || to.rank() != s.rank() {
        return Err(format!(
            "`extract` from `{s}` takes {} offsets and a shape of rank {}, found {} offsets and `{to}`",
            s.rank(),
            s.rank(),
            offs.len()
        ));
    }
    for k in 0..s.rank() {
        if let (Some(e), Some(t)) = (s.0[k].as_const(), to.0[k].as_const()) {
            if offs[k].checked_add(t).is_none_or(|end| end > e) {
                return Err(format!(
                    "`extract` of `{to}` at {offs:?} from `{s}` leaves the tile in dim {k}: {} + {t} > {e}",
                    offs[k]
                ));
            }
        }
        // Symbolic extents are checked once bound (the verifier runs again
        // after specialization).
    }
    Ok(Type::Tile(to.clone(), d))
}

/// Refuses an operand or a result shape with an empty dim: a tile has at least one element
/// along every dim.
fn no_empty_dims(name: &str, args: &[&Type], shape: Option<&Shape>) -> Result<(), String> {
    let empty = |s: &Shape| s.0.contains(&Dim::Const(0));
    for (i, t) in args.iter().enumerate() {
        if let Type::Tile(s, _) = t {
            if empty(s) {
                return Err(format!("`{name}` of a tile with an empty dim (operand {}, `{t}`); a tile has at least one element along every dim", i + 1));
            }
        }
    }
    if let Some(s) = shape {
        if empty(s) {
            return Err(format!("`{name}` to a tile with an empty dim (`{s}`); a tile has at least one element along every dim"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<Scalar> {
        v.iter().map(|&x| Scalar::F32(x)).collect()
    }

    #[test]
    fn names_round_trip() {
        for op in TileOp::keyword_ops() {
            assert_eq!(TileOp::from_name(op.name()), Some(op.clone()));
        }
        assert_eq!(
            TileOp::from_name("row_sum"),
            Some(TileOp::Reduce(ReduceOp::Sum, Axis::Row))
        );
        assert_eq!(TileOp::from_name("sum"), None);
    }

    #[test]
    fn sum_follows_the_eight_lane_order() {
        // 1e8 + 1 + ... : sequential order loses the ones, the lane order keeps them apart.
        let mut xs = vec![1.0f32; 16];
        xs[0] = 1e8;
        let got = reduce_order(ReduceOp::Sum, &f32s(&xs), DType::F32).unwrap();
        let mut lanes = [-0.0f32; 8];
        for (i, x) in xs.iter().enumerate() {
            lanes[i % 8] += x;
        }
        let l = lanes;
        let want = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
        assert_eq!(got.bits(), want.to_bits() as u64);
        // An empty sum is -0.0; a sum of -0.0s stays -0.0.
        let z = reduce_order(ReduceOp::Sum, &f32s(&[-0.0, -0.0]), DType::F32).unwrap();
        assert_eq!(z.bits(), (-0.0f32).to_bits() as u64);
    }

    #[test]
    fn argmax_prefers_the_first_nan_then_the_first_maximum() {
        let t = Tile {
            shape: vec![1, 5],
            data: f32s(&[1.0, 3.0, 3.0, -0.0, 0.0]),
        };
        let ty = Type::Tile(Shape::of(&[1, 1]), DType::I64);
        let r = TileOp::Arg(ArgOp::Max, Axis::Row)
            .eval(std::slice::from_ref(&t), &ty)
            .unwrap();
        assert_eq!(r.data, vec![Scalar::I64(1)]);
        let z = Tile {
            shape: vec![1, 3],
            data: f32s(&[-0.0, 0.0, f32::NAN]),
        };
        let r = TileOp::Arg(ArgOp::Min, Axis::Row).eval(&[z], &ty).unwrap();
        assert_eq!(r.data, vec![Scalar::I64(2)]);
        let z = Tile {
            shape: vec![1, 2],
            data: f32s(&[0.0, -0.0]),
        };
        let r = TileOp::Arg(ArgOp::Min, Axis::Row).eval(&[z], &ty).unwrap();
        assert_eq!(r.data, vec![Scalar::I64(1)]);
    }

    #[test]
    fn typing_names_both_shapes() {
        let a = Type::Tile(Shape::of(&[4, 3]), DType::F32);
        let b = Type::Tile(Shape::of(&[5, 2]), DType::F32);
        let e = TileOp::Matmul.infer(&[&a, &b], None, None).unwrap_err();
        assert!(e.contains("inner dims differ (3 vs 5)"), "{e}");
        let v = Type::Tile(Shape::of(&[8]), DType::F32);
        let e = TileOp::Reduce(ReduceOp::Sum, Axis::Row)
            .infer(&[&v], None, None)
            .unwrap_err();
        assert!(e.contains("2-D tile"), "{e}");
        let e = TileOp::Reshape
            .infer(&[&a], Some(&Shape::of(&[5])), None)
            .unwrap_err();
        assert!(e.contains("12 elements"), "{e}");
        assert_eq!(
            broadcast_shape(&Shape::of(&[4, 1]), &Shape::of(&[1, 8])),
            Some(Shape::of(&[4, 8]))
        );
        assert_eq!(
            broadcast_shape(&Shape::of(&[4, 2]), &Shape::of(&[4, 8])),
            None
        );
    }

    #[test]
    fn matmul_accumulates_in_ascending_k() {
        let a = Tile {
            shape: vec![1, 3],
            data: f32s(&[1e8, 1.0, -1e8]),
        };
        let b = Tile {
            shape: vec![3, 1],
            data: f32s(&[1.0, 1.0, 1.0]),
        };
        let ty = Type::Tile(Shape::of(&[1, 1]), DType::F32);
        let r = TileOp::Matmul.eval(&[a, b], &ty).unwrap();
        // ((-0 + 1e8) + 1) + -1e8 = 0 in f32 (the 1 is lost).
        assert_eq!(r.data, f32s(&[0.0]));
    }
}
