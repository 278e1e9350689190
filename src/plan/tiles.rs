//! The tiles entry of a sample-local plan: `LANES` samples at a time as tiles, so the CPU
//! backend's SIMD elementwise code runs them (two f64 or four f32 per vector op).
//!
//! `__plan_tiles_<kernel>(lo, hi, planes...)` runs samples `lo .. lo + k * LANES` for the
//! largest such `k` with the end at most `hi`: each `x[s]` read becomes a tile load of
//! `x[s0 .. s0 + LANES]`, each `y[s] = v` a tile store, and every other op the same op on
//! tiles (constants and dims stay scalars and broadcast). Each lane computes exactly the ops
//! of one sample in the same order, so each sample's bits are the sample wrapper's; the
//! executor runs the rest of a block (fewer than `LANES` samples) through the sample wrapper.
//!
//! Only straight-line kernels qualify: rank-1 planes (and scalar uniforms, which broadcast as
//! constants do), every read of an input plane at `s`, every
//! write of an output plane at `s` of a value that depends on a read, no read of an output,
//! `s` used nowhere else, and only elementwise ops, constants and dims (no loops, branches,
//! calls or other memory ops). Any other kernel gets no tiles entry and runs as before.

use crate::ir::{self, DType, Dim, Function, OpKind, Operand, Type, Value};
use std::collections::HashSet;

/// Samples per tile.
pub(crate) const LANES: usize = eagle_runtime::plan::TILE_LANES;

/// Whether `f` qualifies (see the module docs).
fn qualifies(f: &Function) -> bool {
    let Some(s) = f.params.first().map(|p| p.value) else {
        return false;
    };
    // Scalar parameters are uniforms: the same value in every lane, so they stay scalars and
    // broadcast as constants do (wide dtypes only, as for every value of the body).
    let (uniforms, planes): (Vec<&ir::Param>, Vec<&ir::Param>) = f.params[1..]
        .iter()
        .partition(|p| matches!(f.ty(p.value), Type::Scalar(_)));
    if uniforms.iter().any(|p| {
        p.out || !matches!(f.ty(p.value), Type::Scalar(d) if !d.is_narrow() && *d != DType::Bool)
    }) {
        return false;
    }
    let planes: Vec<Value> = planes.iter().map(|p| p.value).collect();
    let outs: HashSet<Value> = f.params[1..]
        .iter()
        .filter(|p| p.out)
        .map(|p| p.value)
        .collect();
    if planes.iter().any(|&p| {
        !matches!(f.ty(p), Type::Tensor(sh, d) if sh.rank() == 1 && !d.is_narrow() && *d != DType::Bool)
    }) {
        return false;
    }
    // Values that depend on a read of a plane (they become tiles).
    let mut varies: HashSet<Value> = HashSet::new();
    let mut writes = 0;
    for op in f.body.iter(&f.ops) {
        let uses = op.kind.operands();
        if let OpKind::Elem { src, indices } = &op.kind {
            if outs.contains(src) || !planes.contains(src) || indices.as_slice() != [s] {
                return false;
            }
        } else if let OpKind::SetElem {
            value,
            dst,
            indices,
        } = &op.kind
        {
            if !outs.contains(dst) || indices.as_slice() != [s] || !varies.contains(value) {
                return false;
            }
            writes += 1;
            continue;
        } else {
            // Constants, dims and elementwise ops (not of the planes themselves); no other kind
            // has a tile form here.
            let k = &op.kind;
            let constant = matches!(k, OpKind::Const(_) | OpKind::Dim(_));
            if !constant && (!k.info().elementwise || uses.iter().any(|v| planes.contains(v))) {
                return false;
            }
        }
        if uses.contains(&s) && !matches!(op.kind, OpKind::Elem { .. }) {
            return false;
        }
        // Every scalar an op uses is a value of the body (not `s`, checked above).
        let Some(r) = op.result else { return false };
        if matches!(op.kind, OpKind::Elem { .. }) || uses.iter().any(|v| varies.contains(v)) {
            varies.insert(r);
        }
        if !matches!(f.ty(r), Type::Scalar(d) if !d.is_narrow()) {
            return false;
        }
    }
    writes > 0
}

/// Defines the tiles entry `name` of sample kernel `f` in `mb` when `f` qualifies; returns
/// whether it did.
pub(crate) fn define(mb: &mut ir::ModuleBuilder, name: &str, f: &Function) -> crate::Result<bool> {
    if !qualifies(f) {
        return Ok(false);
    }
    mb.define(name, ir::Level::Device, |fb| {
        let lo = fb.param("lo", Type::Scalar(DType::Index), false);
        let hi = fb.param("hi", Type::Scalar(DType::Index), false);
        let vals: Vec<Value> = f.params[1..]
            .iter()
            .map(|p| fb.param(&p.name, f.ty(p.value).clone(), p.out))
            .collect();
        let span = fb.bin(ir::BinOp::Sub, hi, lo)?;
        let tiles = fb.bin(ir::BinOp::Div, span, Operand::Int(LANES as i128))?;
        fb.for_range(Operand::Int(0), tiles, |fb, t| {
            let off = fb.bin(ir::BinOp::Mul, t, Operand::Int(LANES as i128))?;
            let s0 = fb.bin(ir::BinOp::Add, lo, off)?;
            let mut map: std::collections::HashMap<Value, Value> = f.params[1..]
                .iter()
                .zip(&vals)
                .map(|(p, v)| (p.value, *v))
                .collect();
            let m = |map: &std::collections::HashMap<Value, Value>, v: &Value| -> Operand {
                Operand::Val(*map.get(v).unwrap_or(v))
            };
            for op in f.body.iter(&f.ops) {
                let dt = |v: Value| f.ty(v).dtype().unwrap_or(DType::F64);
                let r = match &op.kind {
                    OpKind::Const(c) => {
                        let r = op.result.unwrap_or(Value(0));
                        Some(fb.value(Operand::Typed(*c, dt(r)), Some(dt(r)))?)
                    }
                    OpKind::Dim(d) => Some(fb.value(Operand::from(d.clone()), Some(DType::Index))?),
                    OpKind::Elem { src, .. } => {
                        let src = *map.get(src).unwrap_or(src);
                        Some(fb.load(
                            src,
                            vec![Operand::Val(s0)],
                            vec![Dim::Const(LANES as u64)],
                        )?)
                    }
                    OpKind::SetElem { value, dst, .. } => {
                        let (value, dst) = (
                            *map.get(value).unwrap_or(value),
                            *map.get(dst).unwrap_or(dst),
                        );
                        fb.store(dst, vec![Operand::Val(s0)], value)?;
                        None
                    }
                    OpKind::Binary(o, a, b) => Some(fb.bin(*o, m(&map, a), m(&map, b))?),
                    OpKind::Unary(o, a) => Some(fb.un(*o, m(&map, a))?),
                    OpKind::Fma(a, b, c) => Some(fb.fma(m(&map, a), m(&map, b), m(&map, c))?),
                    OpKind::Cmp(o, a, b) => Some(fb.cmp(*o, m(&map, a), m(&map, b))?),
                    OpKind::Select(c, a, b) => {
                        Some(fb.select(m(&map, c), m(&map, a), m(&map, b))?)
                    }
                    OpKind::Cast(a) => {
                        let d = dt(op.result.unwrap_or(*a));
                        Some(fb.cast(m(&map, a), d)?)
                    }
                    OpKind::Bitcast(a) => {
                        let d = dt(op.result.unwrap_or(*a));
                        Some(fb.bitcast(m(&map, a), d)?)
                    }
                    OpKind::Math(func, args) => {
                        Some(fb.math(*func, args.iter().map(|a| m(&map, a)).collect())?)
                    }
                    // `qualifies` admits no other kind.
                    k => unreachable!("`{}` has no tile form", k.info().name),
                };
                if let (Some(old), Some(new)) = (op.result, r) {
                    map.insert(old, new);
                }
            }
            Ok(())
        })
    })?;
    Ok(true)
}
