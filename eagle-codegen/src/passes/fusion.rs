//! Fusion of elementwise tile ops, shared by the backends: which elementwise results are
//! computed element by element inside the loop of the op that consumes them (their group's
//! root) instead of into a tile of their own.

use eagle_ir::entity::SecondaryMap;
use eagle_ir::{Block as IrBlock, Function, Op, OpKind, Type, Value};
use std::collections::{HashMap, HashSet};

/// How many times each value is used as an operand in `b` (nested blocks included).
pub(crate) fn use_counts(b: &IrBlock) -> SecondaryMap<Value, usize> {
    fn walk(b: &IrBlock, out: &mut SecondaryMap<Value, usize>) {
        for op in &b.ops {
            for v in op.kind.operands() {
                match out.get_mut(v) {
                    Some(n) => *n += 1,
                    None => {
                        out.insert(v, 1);
                    }
                }
            }
            for b in op.kind.blocks() {
                walk(b, out);
            }
        }
    }
    let mut out = SecondaryMap::new();
    walk(b, &mut out);
    out
}

/// Whether the op computes each element of its result from the same element of its operands.
pub(crate) fn is_elementwise(k: &OpKind) -> bool {
    k.as_elementwise().is_some()
}

/// Whether an op may write memory (or let a peer write it): nothing may be read in place across it.
pub(crate) fn may_write(k: &OpKind) -> bool {
    !(is_elementwise(k)
        || matches!(
            k,
            OpKind::Const(_)
                | OpKind::Dim(_)
                | OpKind::Slice { .. }
                | OpKind::Subview { .. }
                | OpKind::Load { .. }
                | OpKind::RemoteLoad { .. }
                | OpKind::Elem { .. }
                | OpKind::Rank(_)
                | OpKind::NRanks(_)
                | OpKind::Var(_)
                | OpKind::Read(_)
                | OpKind::Write(..)
                | OpKind::Tile(..)
        ))
}

/// The fused elementwise tile results of the block `ops` and their group's root: a result is
/// fused when every use (by `uses`, the function's use counts) is an elementwise op of this
/// block in one group, nothing in between may write memory, and `can_fuse` accepts its op.
/// The root (an elementwise op that is not fused) evaluates the group's DAG element by
/// element, each value once per element. Walked last to first, so that an op's users already
/// know their root.
pub(crate) fn fusion_roots(
    f: &Function,
    ops: &[Op],
    uses: &SecondaryMap<Value, usize>,
    can_fuse: impl Fn(&Op) -> bool,
) -> HashMap<Value, Value> {
    let mut users: HashMap<Value, Vec<usize>> = HashMap::new();
    for (k, op) in ops.iter().enumerate() {
        for v in op.kind.operands() {
            users.entry(v).or_default().push(k);
        }
    }
    let writes_between = |a: usize, z: usize| (a + 1..z).any(|k| may_write(&ops[k].kind));
    let mut root: HashMap<Value, Value> = HashMap::new();
    let mut fused = HashMap::new();
    for (k, op) in ops.iter().enumerate().rev() {
        let Some(r) = op.result else { continue };
        if !is_elementwise(&op.kind) || !matches!(f.ty(r), Type::Tile(..)) {
            continue;
        }
        let us = users.get(&r).map(Vec::as_slice).unwrap_or(&[]);
        let roots: HashSet<Option<Value>> = us
            .iter()
            .map(|&c| ops[c].result.and_then(|x| root.get(&x).copied()))
            .collect();
        let last = us.iter().copied().max().unwrap_or(k);
        let ok = !us.is_empty()
            && can_fuse(op)
            && uses.get(r) == Some(&us.len())
            && us.iter().all(|&c| is_elementwise(&ops[c].kind))
            && roots.len() == 1
            && !roots.contains(&None)
            && !writes_between(k, last);
        match roots.into_iter().next() {
            Some(Some(g)) if ok => {
                root.insert(r, g);
                fused.insert(r, g);
            }
            _ => {
                root.insert(r, r);
            }
        }
    }
    fused
}
