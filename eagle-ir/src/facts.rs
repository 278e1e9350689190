//! Side tables: what a value is defined by, and what a pass proved about it, keyed by the
//! value's handle.
//!
//! A [`Value`] is the handle of the op that defines it (or of a parameter or loop variable).
//! [`Defs`] maps each handle to its defining op, built in one walk. [`Facts`] holds the ranges
//! of integer values that specialization's range analysis proved; it is filled once, by
//! specialization, and the backends read it to decide which offsets need a run-time bounds
//! check. No backend runs a range analysis of its own.

use std::collections::HashMap;

use crate::entity::SecondaryMap;
use crate::ir::{Function, Op, OpKind, Value};

/// The op that defines each value of a function (parameters and loop variables have none).
#[derive(Debug, Clone, Default)]
pub struct Defs<'f> {
    map: crate::entity::SecondaryMap<Value, &'f Op>,
}

impl<'f> Defs<'f> {
    /// Walks `f` once.
    pub fn of(f: &'f Function) -> Defs<'f> {
        let mut map = crate::entity::SecondaryMap::with_capacity(f.values.len());
        f.walk(&mut |op| {
            if let Some(r) = op.result {
                map.insert(r, op);
            }
        });
        Defs { map }
    }

    /// The op that defines `v`, if an op does.
    pub fn op(&self, v: Value) -> Option<&'f Op> {
        self.map.get(v).copied()
    }

    /// What `v` is defined by, if an op defines it.
    pub fn kind(&self, v: Value) -> Option<&'f OpKind> {
        self.op(v).map(|o| &o.kind)
    }
}

/// A closed interval that holds every run-time value of an integer value, exactly (the
/// analysis records an interval only where the value cannot wrap around in its dtype).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexRange {
    /// The smallest value.
    pub lo: i128,
    /// The largest value.
    pub hi: i128,
}

/// Proven ranges of one function's integer values, keyed by value handle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FunctionFacts {
    ranges: SecondaryMap<Value, IndexRange>,
}

impl FunctionFacts {
    /// Records that every run-time value of `v` lies in `r`.
    pub fn set_range(&mut self, v: Value, r: IndexRange) {
        self.ranges.insert(v, r);
    }

    /// The proven range of `v`, if one was proven.
    pub fn range(&self, v: Value) -> Option<IndexRange> {
        self.ranges.get(v).copied()
    }

    /// The same facts with every value renamed by `rename` (for a backend that renumbers);
    /// values it maps to `None` (removed ones) are dropped.
    pub fn renamed(&self, rename: &mut dyn FnMut(Value) -> Option<Value>) -> FunctionFacts {
        FunctionFacts {
            ranges: self
                .ranges
                .iter()
                .filter_map(|(v, &r)| Some((rename(v)?, r)))
                .collect(),
        }
    }

    /// Whether `v` is proven to lie in `lo..=hi`.
    pub fn within(&self, v: Value, lo: i128, hi: i128) -> bool {
        self.range(v).is_some_and(|r| r.lo >= lo && r.hi <= hi)
    }

    /// Whether `len` elements from offset `v` are proven to lie in an extent of `extent`
    /// (`v` in `0..=extent - len`). This is the one rule by which every backend leaves out the
    /// run-time bounds check of a tile offset (`len` = the tile's extent), a slice index
    /// (`len` = 1) or a subview offset (`len` = the subview's length); constants have point
    /// ranges, so they need no check either.
    pub fn in_bounds(&self, v: Value, len: u64, extent: u64) -> bool {
        len <= extent && self.within(v, 0, i128::from(extent - len))
    }
}

/// The facts of every function of a module, by function name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    functions: HashMap<String, FunctionFacts>,
}

impl Facts {
    /// The facts of function `name` (empty when none were recorded: every access is checked).
    pub fn function(&self, name: &str) -> &FunctionFacts {
        static EMPTY: std::sync::OnceLock<FunctionFacts> = std::sync::OnceLock::new();
        self.functions
            .get(name)
            .unwrap_or_else(|| EMPTY.get_or_init(FunctionFacts::default))
    }

    /// Sets the facts of function `name`.
    pub fn set_function(&mut self, name: &str, facts: FunctionFacts) {
        self.functions.insert(name.to_string(), facts);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_module;

    #[test]
    fn defs_find_ops_in_nested_blocks_and_not_parameters_or_loop_variables() {
        let m = parse_module(
            "host @h(%0 x: index) {
  %1 = const 0 : index
  for %2 in %1..%0 {
    %3 = add %2, %0 : index
  }
}
",
        )
        .unwrap();
        let f = &m.functions[0];
        let d = Defs::of(f);
        assert!(d.kind(Value(0)).is_none());
        assert!(d.kind(Value(2)).is_none());
        assert!(matches!(d.kind(Value(1)), Some(OpKind::Const(_))));
        assert!(matches!(d.kind(Value(3)), Some(OpKind::Binary(..))));
    }

    #[test]
    fn renaming_drops_the_values_the_renaming_removes() {
        let mut f = FunctionFacts::default();
        f.set_range(Value(3), IndexRange { lo: 0, hi: 0 });
        f.set_range(Value(8), IndexRange { lo: 5, hi: 9 });
        // %8 was removed; %3 becomes %8: the old %8's range must not take its place.
        let g = f.renamed(&mut |v| (v == Value(3)).then_some(Value(8)));
        assert_eq!(g.range(Value(8)), Some(IndexRange { lo: 0, hi: 0 }));
        assert_eq!(g.range(Value(3)), None);
    }

    #[test]
    fn an_unknown_function_has_no_facts_and_proves_nothing() {
        let mut f = FunctionFacts::default();
        f.set_range(Value(3), IndexRange { lo: 0, hi: 7 });
        let mut facts = Facts::default();
        facts.set_function("k", f);
        assert!(facts.function("k").within(Value(3), 0, 7));
        assert!(!facts.function("k").within(Value(3), 0, 6));
        assert!(!facts.function("k").within(Value(4), 0, 100));
        assert!(!facts.function("other").within(Value(3), 0, 7));
    }
}
