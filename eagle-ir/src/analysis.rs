//! Analyses over the IR: the access category of a sample kernel (multi-GPU seed).

use crate::entity::SecondaryMap;
use crate::error::{IrError, Result};
use crate::facts::Defs;
use crate::ir::{BinOp, Block, Function, Level, OpKind, Value};
use crate::types::{DType, Type};
use std::fmt;

/// How a mapreduce kernel combines contributions (seed: `sum | times | max | land`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceKind {
    /// `+`
    Sum,
    /// `*`
    Times,
    /// `max`
    Max,
    /// logical and (`&` on bool)
    Land,
}

impl ReduceKind {
    /// Seed spelling.
    pub fn name(self) -> &'static str {
        match self {
            ReduceKind::Sum => "sum",
            ReduceKind::Times => "times",
            ReduceKind::Max => "max",
            ReduceKind::Land => "land",
        }
    }
    /// Parses the seed spelling.
    pub fn from_name(s: &str) -> Option<ReduceKind> {
        [
            ReduceKind::Sum,
            ReduceKind::Times,
            ReduceKind::Max,
            ReduceKind::Land,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// What a sample kernel reads and writes, inferred from its IR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessCategory {
    /// Reads and writes only its own sample.
    SampleLocal,
    /// Reads other samples' inputs; writes only its own sample.
    CrossSampleRead,
    /// Writes other samples.
    CrossSampleWrite,
    /// Its outputs are reductions over samples (one value or an array of cells).
    Mapreduce(ReduceKind),
}

impl fmt::Display for AccessCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessCategory::SampleLocal => f.write_str("sample_local"),
            AccessCategory::CrossSampleRead => f.write_str("cross_sample_read"),
            AccessCategory::CrossSampleWrite => f.write_str("cross_sample_write"),
            AccessCategory::Mapreduce(k) => write!(f, "mapreduce({})", k.name()),
        }
    }
}

impl AccessCategory {
    /// Parses `sample_local`, `cross_sample_read`, `cross_sample_write` or `mapreduce(op)`.
    pub fn parse(s: &str) -> Option<AccessCategory> {
        match s.trim() {
            "sample_local" => Some(AccessCategory::SampleLocal),
            "cross_sample_read" => Some(AccessCategory::CrossSampleRead),
            "cross_sample_write" => Some(AccessCategory::CrossSampleWrite),
            other => other
                .strip_prefix("mapreduce(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(ReduceKind::from_name)
                .map(AccessCategory::Mapreduce),
        }
    }

    /// Whether a kernel declared `self` may have a body of category `body`: a declaration is
    /// an upper bound (docs/plans.md). Every category admits itself; `cross_sample_write`
    /// (samples run one after another, in order) admits every body; `cross_sample_read`
    /// admits a `sample_local` body. A mapreduce declaration admits only its own op.
    pub fn admits(self, body: AccessCategory) -> bool {
        use AccessCategory::*;
        self == body || self == CrossSampleWrite || (self == CrossSampleRead && body == SampleLocal)
    }
}

/// The category of a sample kernel and the parameters that are reduction outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessInfo {
    /// The inferred category.
    pub category: AccessCategory,
    /// Indices (into the parameter list) of the outputs combined by the reduction.
    pub reduction_outputs: Vec<usize>,
}

#[derive(Default)]
struct Walk {
    local_write: bool,
    cross_write: bool,
    cross_read: bool,
    reductions: Vec<(usize, ReduceKind)>,
    /// The old-value reads `y[i]` consumed by reduction writes `y[i] = y[i] op v`.
    consumed: Vec<Value>,
    /// Every element or tile read of an output plane: (parameter, the read's value).
    out_reads: Vec<(usize, Option<Value>)>,
    /// Reads of an output plane at an index other than `s` (element reads) and tile loads of
    /// output planes: another sample's result, unless it is a reduction write's old value.
    out_cross_reads: Vec<Option<Value>>,
}

/// Records in `w` how the ops of `b` (and their nested blocks) access the parameters of sample
/// kernel `f` (sample index `s`).
fn walk(
    b: &Block,
    f: &Function,
    s: Value,
    defs: &Defs<'_>,
    param_of: &dyn Fn(Value) -> Option<usize>,
    w: &mut Walk,
) {
    for op in b.iter(&f.ops) {
        if let OpKind::Elem { src, .. } | OpKind::Load { src, .. } = &op.kind {
            if let Some(p) = param_of(*src).filter(|&p| f.params[p].out) {
                w.out_reads.push((p, op.result));
                let own_sample =
                    matches!(&op.kind, OpKind::Elem { indices, .. } if indices.last() == Some(&s));
                if !own_sample {
                    w.out_cross_reads.push(op.result);
                }
            }
        }
        match &op.kind {
            OpKind::Elem { src, indices }
                if param_of(*src).is_some() && indices.last() != Some(&s) =>
            {
                w.cross_read = true;
            }
            // A write of a local array (no parameter under it): the sample's own memory.
            OpKind::SetElem { dst, .. } if param_of(*dst).is_none() => {}
            OpKind::SetElem {
                value,
                dst,
                indices,
            } => {
                let reduce = reduction_of(f, defs, *value, *dst, indices, w);
                // A write at the sample's own index is sample-local even when it reads the
                // old value (`y[s] += x[s]`): only cells indexed otherwise are reductions.
                match (reduce, param_of(*dst)) {
                    _ if indices.last() == Some(&s) => w.local_write = true,
                    (Some(k), Some(p)) => w.reductions.push((p, k)),
                    _ => w.cross_write = true,
                }
            }
            OpKind::Load { src, .. } if param_of(*src).is_some() => w.cross_read = true,
            OpKind::Store { dst, .. } if param_of(*dst).is_some() => w.cross_write = true,
            OpKind::Call { args, .. } => {
                for a in args {
                    if let Some(p) = param_of(*a) {
                        if f.params[p].out {
                            w.cross_write = true;
                        } else {
                            w.cross_read = true;
                        }
                    }
                }
            }
            OpKind::For { body, .. } | OpKind::While { body, .. } => {
                walk(body, f, s, defs, param_of, w)
            }
            OpKind::If {
                then_body,
                else_body,
                ..
            } => {
                walk(then_body, f, s, defs, param_of, w);
                walk(else_body, f, s, defs, param_of, w);
            }
            // Exhaustive on purpose: a new op must be placed here or above. Reads of the
            // sample's own element and accesses of non-parameters leave the category;
            // anything else that writes memory (ops a sample kernel cannot hold by the
            // level rule, and any new op until it is classified) counts as a cross-sample
            // write, so a plan never runs it in parallel.
            OpKind::Elem { .. }
            | OpKind::Load { .. }
            | OpKind::Store { .. }
            | OpKind::LocalArray
            | OpKind::Const(_)
            | OpKind::Dim(_)
            | OpKind::Binary(..)
            | OpKind::Unary(..)
            | OpKind::Fma(..)
            | OpKind::Cmp(..)
            | OpKind::Select(..)
            | OpKind::Cast(_)
            | OpKind::Bitcast(_)
            | OpKind::Math(..)
            | OpKind::Tile(..)
            | OpKind::Slice { .. }
            | OpKind::Subview { .. }
            | OpKind::View { .. }
            | OpKind::Var(_)
            | OpKind::Read(_)
            | OpKind::Write(..)
            | OpKind::Dispatch { .. }
            | OpKind::Rank(_)
            | OpKind::NRanks(_)
            | OpKind::Group { .. }
            | OpKind::Split { .. }
            | OpKind::WorldRank { .. }
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
            | OpKind::TrapIf { .. }
            | OpKind::Broadcast { .. }
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::AllToAllV { .. }
            | OpKind::AllGatherV { .. } => {
                let local = matches!(&op.kind, OpKind::Store { .. } | OpKind::Write(..));
                if op.kind.info().writes && !local {
                    w.cross_write = true;
                }
            }
        }
    }
}

/// The reduction a `set_elem` of `value` into `dst[indices]` performs, if `value` combines the
/// cell's old value (read at the same index) with another by an op the plans run in parallel;
/// the old value's read is recorded in `w.consumed`.
fn reduction_of(
    f: &Function,
    defs: &Defs<'_>,
    value: Value,
    dst: Value,
    indices: &[Value],
    w: &mut Walk,
) -> Option<ReduceKind> {
    match defs.kind(value) {
        Some(OpKind::Binary(bop, a, c)) => {
            // The same index: the same value, or equal constants.
            let eq = |a: &Value, b: &Value| {
                a == b
                    || matches!((defs.kind(*a), defs.kind(*b)), (Some(OpKind::Const(x)), Some(OpKind::Const(y))) if x == y)
            };
            let same = |x: &Value| {
                matches!(defs.kind(*x), Some(OpKind::Elem { src, indices: i2 })
                    if *src == dst && i2.len() == indices.len() && i2.iter().zip(indices).all(|(a, b)| eq(a, b)))
            };
            if same(a) || same(c) {
                w.consumed.push(if same(a) { *a } else { *c });
                match bop {
                    BinOp::Add => Some(ReduceKind::Sum),
                    BinOp::Mul => Some(ReduceKind::Times),
                    BinOp::Max => Some(ReduceKind::Max),
                    BinOp::And if f.ty(value).dtype() == Some(DType::Bool) => {
                        Some(ReduceKind::Land)
                    }
                    // Not a reduction the plans run in parallel.
                    BinOp::And
                    | BinOp::Sub
                    | BinOp::Div
                    | BinOp::Rem
                    | BinOp::Min
                    | BinOp::Or
                    | BinOp::Xor
                    | BinOp::Shl
                    | BinOp::Shr => None,
                }
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Infers the access category of sample kernel `f` (its first parameter is the sample index;
/// the sample dimension of a plane is its last dimension).
///
/// - A write `y[..][s] = v` is sample-local; a write at any other index is cross-sample.
/// - A write `y[i] = y[i] <op> v` (or `v <op> y[i]`) at an index `i` other than `s` is a
///   reduction contribution with `op`
///   `+` (sum), `*` (times), `max` or `&` on bool (land).
/// - A read `x[..][i]` of an input with `i` other than `s` is a cross-sample read. Tile loads
///   and stores of planes, and planes passed to calls, count as cross-sample (conservatively).
/// - A read of an **output** plane at an index other than `s` (`y[s] = y[s - 1] + x[s]`), or a
///   tile load of an output plane, reads another sample's result: the kernel is
///   `cross_sample_write` (it runs in sample order), whether or not it writes that plane.
/// - A reduction output may be read only as the old value of its own reduction write, used
///   once. A contribution that depends on a reduction output (`t[0] = t[0] + (x[s] + t[0])`,
///   or `c[1] += c[0]`) depends on the order samples run in, so the kernel is
///   `cross_sample_write` (sequential, in sample order) rather than a mapreduce.
///
/// # Errors
/// [`IrError::Build`] when `f` is not a sample kernel, or when it mixes reduction outputs with
/// per-sample outputs or mixes reduction ops.
pub fn access_category(f: &Function) -> Result<AccessInfo> {
    let err = |m: String| IrError::Build {
        function: f.name.clone(),
        message: m,
    };
    if f.level != Level::Sample || f.params.is_empty() {
        return Err(err("access categories are defined for sample kernels (`#[eagle::kernel(sample)]`, first parameter the sample index)".into()));
    }
    let s = f.params[0].value;
    if *f.ty(s) != Type::Scalar(DType::Index) {
        return Err(err(format!(
            "the first parameter `{}` of a sample kernel is the sample index and must be `usize`",
            f.params[0].name
        )));
    }
    // Defining op of every value, and how many times each value is used as an operand.
    let defs = Defs::of(f);
    let mut uses: SecondaryMap<Value, usize> = SecondaryMap::with_capacity(f.values.len());
    f.walk(&mut |op| {
        for v in op.kind.operands() {
            *uses.get_or_insert_with(v, || 0) += 1;
        }
    });
    let param_of = |v: Value| -> Option<usize> {
        let mut v = v;
        loop {
            if let Some(i) = f.params.iter().position(|p| p.value == v) {
                return Some(i);
            }
            match defs.kind(v) {
                Some(
                    OpKind::Slice { src, .. }
                    | OpKind::Subview { src, .. }
                    | OpKind::View { src, .. },
                ) => v = *src,
                _ => return None,
            }
        }
    };
    let mut w = Walk::default();
    walk(&f.body, f, s, &defs, &param_of, &mut w);
    // A reduction output read other than as its write's old value (used once) makes the
    // contributions order-dependent: not a mapreduce.
    let order_dependent = w.out_reads.iter().any(|(p, r)| {
        w.reductions.iter().any(|(q, _)| q == p)
            && !r.is_some_and(|r| w.consumed.contains(&r) && uses.get(r) == Some(&1))
    });
    if order_dependent {
        w.reductions.clear();
        w.cross_write = true;
    }
    // Reading another sample's output (`y[s] = y[s - 1] + x[s]`) depends on the order the
    // samples run in, whether or not the kernel writes that plane: cross-sample write. The one
    // exception is the old value of a reduction write (`t[0] = t[0] + x[s]`).
    if w.out_cross_reads
        .iter()
        .any(|r| !r.is_some_and(|r| w.consumed.contains(&r)))
    {
        w.cross_write = true;
    }
    let mut outs: Vec<usize> = w.reductions.iter().map(|(p, _)| *p).collect();
    outs.sort_unstable();
    outs.dedup();
    let category = if let Some(&(_, k)) = w.reductions.first() {
        if let Some((_, k2)) = w.reductions.iter().find(|(_, k2)| *k2 != k) {
            return Err(err(format!(
                "the kernel combines outputs with both `{}` and `{}`; a mapreduce kernel uses one op",
                k.name(),
                k2.name()
            )));
        }
        if w.local_write || w.cross_write {
            return Err(err("the kernel writes per-sample outputs and reduction outputs; split it into a sample kernel and a mapreduce kernel".into()));
        }
        AccessCategory::Mapreduce(k)
    } else if w.cross_write {
        AccessCategory::CrossSampleWrite
    } else if w.cross_read {
        AccessCategory::CrossSampleRead
    } else {
        AccessCategory::SampleLocal
    };
    Ok(AccessInfo {
        category,
        reduction_outputs: outs,
    })
}
