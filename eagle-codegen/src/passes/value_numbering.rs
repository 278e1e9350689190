//! Value numbering of scalar computations: which values equal one already computed where
//! they stand (in their block or an enclosing one), as a map from each such value to its
//! representative.
//!
//! The CPU backend recognises facts by value identity: the in-place store of an elementwise
//! result holds when the load it reads and the store it feeds take *the same offset values*.
//! A user who writes the offset twice (`store(y, [i * B], load(y, [i * B], [B]) * a)`) gets
//! two `mul` ops, so two values; the backend compares offsets through this map, so the store
//! is written in place however the source spells it. The IR is not rewritten (its printed
//! form, which error messages quote, stays the artifact's); Cranelift merges the duplicate
//! instructions itself.
//!
//! Only scalar ops the op table calls pure ([`eagle_ir::OpInfo::pure`]; integer `div` and
//! `rem` are not, they can fail) are merged, and only with an op that dominates them (earlier
//! in the same block, or in a block that encloses theirs). Constants are keyed by their bits,
//! so `0.0` and `-0.0`, or two NaNs, are never merged. Tiles are left alone: merging them would
//! change the single-use facts the backend's fusion reads. The pass changes no result: every
//! merged op computes the same bits from the same operands.

use eagle_ir::entity::SecondaryMap;
use eagle_ir::{Block, Const, Function, OpKind, Type, Value};
use std::collections::HashMap;

/// Every value of `f` that equals an earlier, dominating one, mapped to that one (see the
/// module docs); values not in the map are their own representative.
pub(crate) fn equal_values(f: &Function) -> SecondaryMap<Value, Value> {
    let mut scopes: Vec<HashMap<String, Value>> = vec![];
    let mut rename = SecondaryMap::new();
    block(f, &f.body, &mut scopes, &mut rename);
    rename
}

/// The key of an op that may be merged, or `None`.
fn key(f: &Function, kind: &OpKind, result: Value) -> Option<String> {
    let ty = f.ty(result);
    if !matches!(ty, Type::Scalar(_)) || !kind.info().pure {
        return None;
    }
    // A constant keys by its bits (`0.0` and `-0.0` differ); every other kind by its text with
    // its operands (ops with nested blocks are never pure scalars).
    Some(if let OpKind::Const(c) = kind {
        let bits = match c {
            Const::Int(i) => format!("i{i}"),
            Const::F32(x) => format!("f{:08x}", x.to_bits()),
            Const::F64(x) => format!("d{:016x}", x.to_bits()),
            Const::Bool(b) => format!("b{b}"),
        };
        format!("const {bits} : {ty}")
    } else {
        format!("{kind:?} : {ty}")
    })
}

fn block(
    f: &Function,
    b: &Block,
    scopes: &mut Vec<HashMap<String, Value>>,
    rename: &mut SecondaryMap<Value, Value>,
) {
    scopes.push(HashMap::new());
    for op in b.iter(&f.ops) {
        for nested in op.kind.blocks() {
            block(f, nested, scopes, rename);
        }
        let Some(r) = op.result else { continue };
        // The key names operands by their representatives.
        let kind = op.kind.map_values(&mut |v| *rename.get(v).unwrap_or(&v));
        if let Some(k) = key(f, &kind, r) {
            if let Some(&same) = scopes.iter().rev().find_map(|s| s.get(&k)) {
                rename.insert(r, same);
            } else if let Some(top) = scopes.last_mut() {
                top.insert(k, r);
            }
        }
    }
    scopes.pop();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_offsets_are_one_value_and_nothing_else_is() {
        let m = eagle_ir::parse_module(
            "device @k(%0 ctx: ctx, out %1 y: tensor<[8], f32>) {
  %2 = const 0 : index
  %3 = const 4 : index
  %4 = const 2 : index
  %5 = mul %4, %3 : index
  %6 = mul %4, %3 : index
  %7 = load %1[%5] : tile<[4], f32>
  store %7, %1[%6]
  %8 = const 0.0 : f32
  %9 = const -0.0 : f32
  %10 = const 1 : index
  %11 = div %10, %4 : index
  %12 = div %10, %4 : index
  %13 = const 4 : index
  %14 = add %13, %4 : index
  %15 = add %3, %4 : index
  for %16 in %2..%4 {
    %17 = mul %4, %3 : index
    %18 = mul %3, %3 : index
    %19 = load %1[%18] : tile<[4], f32>
    store %19, %1[%17]
  }
  %20 = mul %3, %3 : index
  %21 = load %1[%20] : tile<[4], f32>
  store %21, %1[%2]
}
",
        )
        .expect("parses");
        let f = &m.functions[0];
        let eq = equal_values(f);
        let v = |i: u32| Value(i);
        // The second `mul %4, %3` and the one in the loop are the first.
        assert_eq!(eq.get(v(6)), Some(&v(5)));
        assert_eq!(eq.get(v(17)), Some(&v(5)));
        // A repeated constant, and an op whose operands are equal through it.
        assert_eq!(eq.get(v(13)), Some(&v(3)));
        assert_eq!(eq.get(v(14)), None);
        assert_eq!(eq.get(v(15)), Some(&v(14)));
        // -0.0 is not 0.0; integer div may fail; tiles are not merged.
        assert_eq!(eq.get(v(9)), None);
        assert_eq!(eq.get(v(12)), None);
        assert_eq!(eq.get(v(21)), None);
        // An op in the loop body does not stand for one after the loop (the body may not run).
        assert_eq!(eq.get(v(20)), None);
        assert_eq!(eq.len(), 4, "{eq:?}");
    }
}
