//! The rows entry of a mapreduce plan: one compiled call forms the partials of a whole block
//! of rows, so the executor makes one runtime call per worker, not one per row of [`ROW`]
//! samples.
//!
//! `__plan_rows_<kernel>(rlo, rhi, planes...)` takes each reduction output as a
//! `tensor<[__rows, ...shape]>` of row partials (the executor fills them with the identity)
//! and runs, for every row `r` in `rlo..rhi`, the kernel for `s` in `r * ROW .. min(r * ROW +
//! ROW, n)` in sample order into row `r`'s partial: the same ops in the same order as one call
//! of the sample wrapper per row, so the same bits.
//!
//! An accumulator the kernel only reads and writes at constant indices (`out[0] = out[0] +
//! x[s] * x[s]`) and whose output is small is kept in variables (registers) over the row, then
//! stored once: the kernel is rewritten so each `out[c]` read or write becomes a variable read
//! or write. Any other use of the output (a tile load, a call, a computed index) keeps it in
//! memory, with the same ops.

use super::ROW;
use crate::ir::{self, Const, DType, Dim, Function, OpKind, Operand, ReduceKind, Shape, Type};
use crate::Result;

/// The symbolic dim of the row count: `n.div_ceil(ROW)`, bound by the executor.
pub(crate) const ROWS_DIM: &str = "__rows";

/// Per reduction output (its position in the kernel's parameters), the elements kept in
/// variables, each with its index and starting constant (empty: the output stays in memory).
type Promoted = Vec<(usize, Vec<(Vec<i128>, Const)>)>;

/// The largest accumulator (in elements) kept in variables.
const MAX_PROMOTED: u64 = 8;

/// The constant a promoted accumulator of dtype `d` starts from (the row identity of `kind`),
/// or `None` when this dtype stays in memory.
fn start(kind: ReduceKind, d: DType) -> Option<Const> {
    let bits = super::identity(kind, d);
    let mut le = [0u8; 8];
    le[..bits.len()].copy_from_slice(&bits);
    let w = u64::from_le_bytes(le);
    Some(match (kind, d) {
        (ReduceKind::Land, _) => return None,
        (_, DType::F64) => Const::F64(f64::from_bits(w)),
        (_, DType::F32) => Const::F32(f32::from_bits(w as u32)),
        (_, DType::I64) => Const::Int(w as i64 as i128),
        (_, DType::I32) => Const::Int(w as u32 as i32 as i128),
        _ => return None,
    })
}

/// Rewrites `f` so that each reduction output (parameter positions `reductions`, 1-based as in
/// `f.params`) that can live in variables does: returns the rewritten kernel, with one extra
/// `ref` parameter per promoted element appended, and per reduction output the flat elements
/// promoted (empty when it stays in memory).
fn promote(f: &Function, reductions: &[usize], kind: ReduceKind) -> (Function, Promoted) {
    let mut consts = std::collections::HashMap::new();
    f.walk(&mut |op| {
        if let (OpKind::Const(Const::Int(c)), Some(r)) = (&op.kind, op.result) {
            consts.insert(r, *c);
        }
    });
    let mut g = f.clone();
    let mut plan = vec![];
    for &pi in reductions {
        let pv = f.params[pi].value;
        let t = f.ty(pv);
        let (Some(shape), Some(d)) = (t.shape(), t.dtype()) else {
            plan.push((pi, vec![]));
            continue;
        };
        let Some(extents) = shape
            .0
            .iter()
            .map(|x| match x {
                Dim::Const(c) => Some(*c),
                _ => None,
            })
            .collect::<Option<Vec<u64>>>()
        else {
            plan.push((pi, vec![]));
            continue;
        };
        let numel: u64 = extents.iter().product();
        let Some(init) = start(kind, d).filter(|_| (1..=MAX_PROMOTED).contains(&numel)) else {
            plan.push((pi, vec![]));
            continue;
        };
        // Every use must be an element read or write at constant, in-bounds indices.
        let index_of = |ix: &[ir::Value]| -> Option<Vec<i128>> {
            let v: Vec<i128> = ix
                .iter()
                .map(|i| consts.get(i).copied())
                .collect::<Option<_>>()?;
            (v.len() == extents.len()
                && v.iter()
                    .zip(&extents)
                    .all(|(&i, &e)| i >= 0 && (i as u64) < e))
            .then_some(v)
        };
        let mut ok = true;
        f.walk(&mut |op| {
            let uses = op.kind.operands().contains(&pv);
            // Only element reads and writes at constant indices may touch the private array.
            let access = if let OpKind::Elem { src, indices } = &op.kind {
                (*src == pv).then(|| index_of(indices).is_some())
            } else if let OpKind::SetElem {
                value,
                dst,
                indices,
            } = &op.kind
            {
                (*dst == pv).then(|| *value != pv && index_of(indices).is_some())
            } else {
                None
            };
            ok &= access.unwrap_or(!uses);
        });
        if !ok {
            plan.push((pi, vec![]));
            continue;
        }
        // One variable per element, row-major.
        let mut elems = vec![];
        let mut vars = vec![];
        for flat in 0..numel {
            let mut rest = flat;
            let mut ix = vec![0i128; extents.len()];
            for (k, &e) in extents.iter().enumerate().rev() {
                ix[k] = (rest % e) as i128;
                rest /= e;
            }
            let v = g.values.push(Type::Ref(Box::new(Type::Scalar(d))));
            g.params.push(ir::Param {
                name: format!("__acc{pi}_{flat}"),
                value: v,
                out: false,
            });
            vars.push((ix.clone(), v));
            elems.push((ix, init));
        }
        let var_at = |ix: &[i128]| vars.iter().find(|(i, _)| i == ix).map(|(_, v)| *v);
        for id in g.listed() {
            let op = &mut g.ops[id];
            {
                let new = if let OpKind::Elem { src, indices } = &op.kind {
                    (*src == pv)
                        .then(|| index_of(indices).and_then(|ix| var_at(&ix)))
                        .flatten()
                        .map(OpKind::Read)
                } else if let OpKind::SetElem {
                    value,
                    dst,
                    indices,
                } = &op.kind
                {
                    (*dst == pv)
                        .then(|| index_of(indices).and_then(|ix| var_at(&ix)))
                        .flatten()
                        .map(|var| OpKind::Write(var, *value))
                } else {
                    None
                };
                if let Some(k) = new {
                    op.kind = k;
                }
            }
        }
        plan.push((pi, elems));
    }
    (g, plan)
}

/// Defines the rows entry `name` of kernel `f` in `mb` (see the module docs). `reduction`
/// says, per plane (`f.params[1..]`), whether it is a reduction output; `n_dim` is the sample
/// count's dim.
pub(crate) fn define(
    mb: &mut ir::ModuleBuilder,
    name: &str,
    f: &Function,
    reduction: &[bool],
    kind: ReduceKind,
    n_dim: &Dim,
) -> Result<()> {
    let reductions: Vec<usize> = (1..f.params.len()).filter(|&i| reduction[i - 1]).collect();
    let (kernel, promoted) = promote(f, &reductions, kind);
    // With every accumulator in variables, full rows run in groups of GROUP, one sample of
    // each row in turn: GROUP independent chains instead of one (each row's own order is
    // unchanged, so are its bits).
    let interleave = promoted.iter().all(|(_, e)| !e.is_empty());
    mb.define(name, ir::Level::Device, |fb| {
        let rlo = fb.param("rlo", Type::Scalar(DType::Index), false);
        let rhi = fb.param("rhi", Type::Scalar(DType::Index), false);
        let vals: Vec<ir::Value> = f.params[1..]
            .iter()
            .zip(reduction)
            .map(|(p, &red)| {
                let t = f.ty(p.value).clone();
                let t = match (&t, red) {
                    (Type::Tensor(s, d), true) => {
                        let mut dims = vec![Dim::Sym(ROWS_DIM.into())];
                        dims.extend(s.0.iter().cloned());
                        Type::Tensor(Shape(dims), *d)
                    }
                    _ => t,
                };
                fb.param(&p.name, t, p.out)
            })
            .collect();
        let n = fb.value(Operand::from(n_dim.clone()), Some(DType::Index))?;
        let rest = if interleave {
            // Groups of full rows: rlo .. rlo + groups * GROUP, all below n / ROW.
            let full = fb.bin(ir::BinOp::Div, n, Operand::Int(ROW as i128))?;
            let end = fb.bin(ir::BinOp::Min, rhi, full)?;
            let end = fb.bin(ir::BinOp::Max, end, rlo)?;
            let span = fb.bin(ir::BinOp::Sub, end, rlo)?;
            let groups = fb.bin(ir::BinOp::Div, span, Operand::Int(GROUP as i128))?;
            fb.for_range(Operand::Int(0), groups, |fb, g| {
                let off = fb.bin(ir::BinOp::Mul, g, Operand::Int(GROUP as i128))?;
                let r0 = fb.bin(ir::BinOp::Add, rlo, off)?;
                let mut lanes = vec![];
                for k in 0..GROUP {
                    let r = fb.bin(ir::BinOp::Add, r0, Operand::Int(k as i128))?;
                    lanes.push(row_start(fb, f, &vals, reduction, &promoted, r)?);
                }
                // The group's rows are consecutive, so row k's sample j is `s0 + k * ROW`
                // with `s0` the first row's: one loop variable, and each lane's index a
                // constant step from it (no per-sample address arithmetic). `r0` is clamped
                // into the groups that fit in the full rows, see [`first_sample`].
                let last = fb.bin(ir::BinOp::Sub, full, Operand::Int(GROUP as i128 - 1))?;
                let lo = first_sample(fb, last, r0)?;
                let hi = fb.bin(ir::BinOp::Add, lo, Operand::Int(ROW as i128))?;
                fb.for_range(lo, hi, |fb, s0| {
                    for (k, lane) in lanes.iter().enumerate() {
                        let s = fb.bin(ir::BinOp::Add, s0, Operand::Int((k * ROW) as i128))?;
                        sample(fb, &kernel, s, lane)?;
                    }
                    Ok(())
                })?;
                for lane in &lanes {
                    row_end(fb, lane)?;
                }
                Ok(())
            })?;
            let done = fb.bin(ir::BinOp::Mul, groups, Operand::Int(GROUP as i128))?;
            fb.bin(ir::BinOp::Add, rlo, done)?
        } else {
            rlo
        };
        let rows = fb.bin(ir::BinOp::Add, n, Operand::Int(ROW as i128 - 1))?;
        let rows = fb.bin(ir::BinOp::Div, rows, Operand::Int(ROW as i128))?;
        fb.for_range(rest, rhi, |fb, r| {
            let lane = row_start(fb, f, &vals, reduction, &promoted, r)?;
            let lo = first_sample(fb, rows, r)?;
            let end = fb.bin(ir::BinOp::Add, lo, Operand::Int(ROW as i128))?;
            let hi = fb.bin(ir::BinOp::Min, end, n)?;
            fb.for_range(lo, hi, |fb, s| sample(fb, &kernel, s, &lane))?;
            row_end(fb, &lane)
        })
    })?;
    Ok(())
}

/// Rows interleaved per group when every accumulator lives in variables.
const GROUP: usize = 4;

/// What the samples of one row run with: the kernel's arguments after `s` (each reduction
/// output replaced by the row's partial), the promoted variables, and where they are stored.
struct Lane {
    args: Vec<ir::Value>,
    vars: Vec<(Vec<i128>, ir::Value, ir::Value)>,
}

/// Starts row `r`: its partial slices and its variables at the identity.
fn row_start(
    fb: &mut ir::FunctionBuilder<'_>,
    f: &Function,
    vals: &[ir::Value],
    reduction: &[bool],
    promoted: &Promoted,
    r: ir::Value,
) -> ir::Result<Lane> {
    let mut args = vec![];
    let mut parts = vec![];
    for (k, &v) in vals.iter().enumerate() {
        if reduction[k] {
            let part = fb.slice(v, r)?;
            parts.push((k + 1, part));
            args.push(part);
        } else {
            args.push(v);
        }
    }
    let mut vars = vec![];
    for (pi, elems) in promoted {
        let Some(&(_, part)) = parts.iter().find(|(p, _)| p == pi) else {
            continue;
        };
        for (ix, init) in elems {
            let d = f.ty(f.params[*pi].value).dtype().unwrap_or(DType::F64);
            let var = fb.var(Operand::Typed(*init, d))?;
            vars.push((ix.clone(), var, part));
        }
    }
    Ok(Lane { args, vars })
}

/// The first sample of row `r` (`r * ROW`), with `r` clamped into `0..rows`. The clamp
/// changes nothing: every caller's `r` is already below `rows` (`row_start`'s slice of the
/// partial checks `r < __rows` before any sample runs; a group starts at most `GROUP` rows
/// below the full rows). It bounds every sample index of the row (or group) for the range
/// analysis, once per row instead of once per sample, so no `x[s]` of the inlined kernel
/// needs a run-time check.
fn first_sample(
    fb: &mut ir::FunctionBuilder<'_>,
    rows: ir::Value,
    r: ir::Value,
) -> ir::Result<ir::Value> {
    let r = super::clamp_below(fb, rows, r)?;
    fb.bin(ir::BinOp::Mul, r, Operand::Int(ROW as i128))
}

/// One sample `s` of a row (`0 <= s < n`, bounded for the range analysis by
/// [`first_sample`]).
fn sample(
    fb: &mut ir::FunctionBuilder<'_>,
    kernel: &Function,
    s: ir::Value,
    lane: &Lane,
) -> ir::Result<()> {
    let mut all = vec![s];
    all.extend(lane.args.iter().copied());
    all.extend(lane.vars.iter().map(|(_, v, _)| *v));
    fb.inline(kernel, &all)
}

/// Ends a row: stores its variables into its partial.
fn row_end(fb: &mut ir::FunctionBuilder<'_>, lane: &Lane) -> ir::Result<()> {
    for (ix, var, part) in &lane.vars {
        let x = fb.read(*var)?;
        let ix: Vec<Operand> = ix.iter().map(|&i| Operand::Int(i)).collect();
        fb.set_elem(*part, ix, x)?;
    }
    Ok(())
}
