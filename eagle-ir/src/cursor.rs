//! [`Cursor`]: the one place ops are written. Every emitter appends through it: the builder
//! the macros drive ([`crate::FunctionBuilder`]), the math expansion ([`crate::expand`]),
//! widening ([`crate::narrow`]), view lowering ([`crate::views`]) and, in eagle-codegen, the
//! collective lowering and the plan wrappers. A value is minted only by [`Cursor::value`] (or
//! [`Cursor::push`]), which gives it its type in the function's table.

use crate::entity::PrimaryMap;
use crate::ir::{Block, Loc, Op, OpKind, Value};
use crate::types::Type;

/// A function's value table.
pub type Values = PrimaryMap<Value, Type>;

/// Where new ops go: a function's value table, the open blocks (the innermost last) and the
/// source location new ops take.
///
/// A cursor owns the value table while it writes (take it out of the function with
/// `std::mem::take` and give it back with [`Cursor::finish`]), so one borrow of the function
/// never has to span a pass's other reads of it.
#[derive(Debug)]
pub struct Cursor {
    values: Values,
    blocks: Vec<Block>,
    loc: Option<Loc>,
}

impl Default for Cursor {
    /// A cursor on an empty value table.
    fn default() -> Cursor {
        Cursor::new(Values::default(), None)
    }
}

impl Cursor {
    /// A cursor on `values` with one open block; new ops take `loc`.
    pub fn new(values: Values, loc: Option<Loc>) -> Cursor {
        Cursor {
            values,
            blocks: vec![Block::default()],
            loc,
        }
    }

    /// The type of `v`.
    ///
    /// # Panics
    /// If `v` is not a value of this function (an internal error).
    pub fn ty(&self, v: Value) -> &Type {
        &self.values[v]
    }

    /// A new value of type `ty`, for an op appended later (or a loop's induction variable).
    pub fn value(&mut self, ty: Type) -> Value {
        self.values.push(ty)
    }

    /// The location new ops take.
    pub fn loc(&self) -> Option<&Loc> {
        self.loc.as_ref()
    }

    /// Sets the location new ops take.
    pub fn set_loc(&mut self, loc: Option<Loc>) {
        self.loc = loc;
    }

    /// Appends an op that defines a new value of type `ty`; returns the value.
    pub fn push(&mut self, kind: OpKind, ty: Type) -> Value {
        let result = self.value(ty);
        self.append(kind, Some(result));
        result
    }

    /// Appends an op without a result.
    pub fn push_void(&mut self, kind: OpKind) {
        self.append(kind, None);
    }

    /// Appends an op defining `result` (a value made by [`Cursor::value`], or `None`).
    pub fn append(&mut self, kind: OpKind, result: Option<Value>) {
        let loc = self.loc.clone();
        self.emit(Op { result, kind, loc });
    }

    /// Appends an op as it is (an op a rewriting pass keeps, with its own location).
    pub fn emit(&mut self, op: Op) {
        self.ops_mut().push(op);
    }

    /// The ops of the innermost open block so far.
    pub fn ops(&self) -> &[Op] {
        &self.innermost().ops
    }

    /// The ops of the innermost open block, to edit the last ones (a rename of a result).
    pub fn ops_mut(&mut self) -> &mut Vec<Op> {
        &mut self
            .blocks
            .last_mut()
            .expect("a cursor always has its outer block open")
            .ops
    }

    fn innermost(&self) -> &Block {
        self.blocks
            .last()
            .expect("a cursor always has its outer block open")
    }

    /// Opens a nested block: ops go there until [`Cursor::close`].
    pub fn open(&mut self) {
        self.blocks.push(Block::default());
    }

    /// Closes the innermost nested block and returns it (an empty block, and nothing closed,
    /// when only the outer block is open).
    pub fn close(&mut self) -> Block {
        if self.blocks.len() > 1 {
            self.blocks.pop().unwrap_or_default()
        } else {
            Block::default()
        }
    }

    /// The outer block (nested blocks still open are closed into nothing: close them first)
    /// and the value table.
    pub fn finish(mut self) -> (Block, Values) {
        self.blocks.truncate(1);
        let outer = self.blocks.pop().unwrap_or_default();
        (outer, self.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Const;
    use crate::types::DType;

    #[test]
    fn ops_go_to_the_innermost_block_with_the_location_set() {
        let loc = Loc {
            file: "k.rs".into(),
            line: 3,
            column: 5,
        };
        let mut c = Cursor::new(Values::default(), Some(loc.clone()));
        let idx = Type::Scalar(DType::Index);
        let a = c.push(OpKind::Const(Const::Int(1)), idx.clone());
        c.open();
        let b = c.push(OpKind::Const(Const::Int(2)), idx.clone());
        c.set_loc(None);
        c.push_void(OpKind::Barrier(a));
        let inner = c.close();
        assert_eq!(c.close(), Block::default(), "the outer block stays open");
        let (outer, values) = c.finish();
        assert_eq!((a, b), (Value(0), Value(1)));
        assert_eq!(values.len(), 2);
        assert_eq!(outer.ops.len(), 1);
        assert_eq!(outer.ops[0].loc, Some(loc.clone()));
        assert_eq!(inner.ops.len(), 2);
        assert_eq!(inner.ops[0].result, Some(b));
        assert_eq!(inner.ops[0].loc, Some(loc));
        assert_eq!(
            (inner.ops[1].result, inner.ops[1].loc.clone()),
            (None, None)
        );
    }
}
