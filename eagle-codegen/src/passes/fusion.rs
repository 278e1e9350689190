//! Fusion of elementwise tile ops, shared by the backends: which elementwise results are
//! computed element by element inside the loop of the op that consumes them (their group's
//! root) instead of into a tile of their own.

use eagle_ir::entity::SecondaryMap;
use eagle_ir::{Function, Op, OpKind, Type, Value};
use std::collections::HashSet;

/// How many times each value is used as an operand in `f` (nested blocks included).
pub(crate) fn use_counts(f: &Function) -> SecondaryMap<Value, usize> {
    let mut out = SecondaryMap::with_capacity(f.values.len());
    f.walk(&mut |op| {
        for v in op.kind.operands() {
            match out.get_mut(v) {
                Some(n) => *n += 1,
                None => {
                    out.insert(v, 1);
                }
            }
        }
    });
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
                | OpKind::Math(..)
        ))
}

/// The positions in the block `ops` of the ops that use each value, in order.
pub(crate) fn block_users(ops: &[&Op]) -> SecondaryMap<Value, Vec<usize>> {
    let mut users: SecondaryMap<Value, Vec<usize>> = SecondaryMap::new();
    for (k, op) in ops.iter().enumerate() {
        for v in op.kind.operands() {
            users.get_or_insert_with(v, Vec::new).push(k);
        }
    }
    users
}

/// The fused elementwise tile results of the block `ops` and their group's root: a result is
/// fused when every use (by `uses`, the function's use counts) is an elementwise op of this
/// block in one group, nothing in between may write memory, and `can_fuse` accepts its op.
/// The root (an elementwise op that is not fused) evaluates the group's DAG element by
/// element, each value once per element. Walked last to first, so that an op's users already
/// know their root.
pub(crate) fn fusion_roots(
    f: &Function,
    ops: &[&Op],
    uses: &SecondaryMap<Value, usize>,
    can_fuse: impl Fn(&Op) -> bool,
) -> SecondaryMap<Value, Value> {
    let users = block_users(ops);
    let writes_between = |a: usize, z: usize| (a + 1..z).any(|k| may_write(&ops[k].kind));
    let mut root: SecondaryMap<Value, Value> = SecondaryMap::new();
    let mut fused = SecondaryMap::new();
    for (k, op) in ops.iter().enumerate().rev() {
        let Some(r) = op.result else { continue };
        if !is_elementwise(&op.kind) || !matches!(f.ty(r), Type::Tile(..)) {
            continue;
        }
        let us = users.get(r).map(Vec::as_slice).unwrap_or(&[]);
        let roots: HashSet<Option<Value>> = us
            .iter()
            .map(|&c| ops[c].result.and_then(|x| root.get(x).copied()))
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
