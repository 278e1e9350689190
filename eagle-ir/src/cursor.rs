//! [`Cursor`]: the one place ops are written. Every emitter appends through it: the builder
//! the macros drive ([`crate::FunctionBuilder`]), the math expansion ([`crate::expand`]),
//! widening ([`crate::narrow`]), view lowering ([`crate::views`]) and, in eagle-codegen, the
//! collective lowering and the plan wrappers. A value is minted only by [`Cursor::value`] (or
//! [`Cursor::push`]), which gives it its type in the function's table.

use crate::entity::PrimaryMap;
use crate::ir::{Block, Function, Loc, Op, OpId, OpKind, Ops, Value};
use crate::types::Type;

/// A function's value table.
pub type Values = PrimaryMap<Value, Type>;

/// Where new ops go: a function's value table and op arena, the open blocks (the innermost
/// last) and the source location new ops take.
///
/// A cursor owns the value table and the arena while it writes ([`Cursor::on`] takes them out
/// of a function and [`Cursor::finish_into`] gives them back), so one borrow of the function
/// never has to span a pass's other reads of it.
#[derive(Debug)]
pub struct Cursor {
    values: Values,
    ops: Ops,
    /// Arena slots whose ops [`Cursor::take`] took: [`Cursor::emit`] fills them first, so a
    /// pass that rewrites every op does not grow the arena.
    free: Vec<OpId>,
    blocks: Vec<Block>,
    loc: Option<Loc>,
}

impl Default for Cursor {
    /// A cursor on an empty value table and arena.
    fn default() -> Cursor {
        Cursor::new(Values::default(), Ops::default(), None)
    }
}

impl Cursor {
    /// A cursor on `values` and `ops` with one open block; new ops take `loc`.
    pub fn new(values: Values, ops: Ops, loc: Option<Loc>) -> Cursor {
        Cursor {
            values,
            ops,
            free: Vec::new(),
            blocks: vec![Block::default()],
            loc,
        }
    }

    /// A cursor on `f`'s value table and arena (taken out of `f` until
    /// [`Cursor::finish_into`]); new ops take `loc`.
    pub fn on(f: &mut Function, loc: Option<Loc>) -> Cursor {
        Cursor::new(
            std::mem::take(&mut f.values),
            std::mem::take(&mut f.ops),
            loc,
        )
    }

    /// The type of `v`.
    ///
    /// # Panics
    /// If `v` is not a value of this function (an internal error).
    pub fn ty(&self, v: Value) -> &Type {
        &self.values[v]
    }

    /// The value table: every value's type.
    pub fn values(&self) -> &Values {
        &self.values
    }

    /// The op appended last to the innermost open block.
    pub fn last(&self) -> Option<&Op> {
        let id = *self.innermost().ops.last()?;
        Some(&self.ops[id])
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

    /// Appends an op as it is (an op a rewriting pass keeps, with its own location); returns
    /// its handle.
    pub fn emit(&mut self, op: Op) -> OpId {
        let id = match self.free.pop() {
            Some(id) => {
                self.ops[id] = op;
                id
            }
            None => self.ops.push(op),
        };
        self.keep(id);
        id
    }

    /// Appends the op of handle `id`, already in the arena (an op a rewriting pass keeps as
    /// it is, or edited in place).
    pub fn keep(&mut self, id: OpId) {
        self.innermost_mut().ops.push(id);
    }

    /// Appends the ops of `b` (a block written into this cursor's arena).
    pub fn splice(&mut self, b: Block) {
        self.innermost_mut().ops.extend(b.ops);
    }

    /// The op of handle `id`.
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id]
    }

    /// Takes the op of handle `id` out of the arena (a rewriting pass that re-emits it, edited,
    /// with [`Cursor::emit`]); the slot is reused by the next op emitted, so no block may list
    /// `id` any more (a pass takes a block's handles before it takes their ops).
    pub fn take(&mut self, id: OpId) -> Op {
        debug_assert!(!self.free.contains(&id), "op {id:?} taken twice");
        self.free.push(id);
        std::mem::replace(&mut self.ops[id], Op::placeholder())
    }

    /// The arena, to copy ops into ([`Block::copy_into`]).
    pub fn arena_mut(&mut self) -> &mut Ops {
        &mut self.ops
    }

    /// The handles of the innermost open block so far.
    pub fn ops(&self) -> &[OpId] {
        &self.innermost().ops
    }

    /// Drops the ops of the innermost open block past its first `n` (they stay in the arena,
    /// listed nowhere).
    pub fn truncate(&mut self, n: usize) {
        self.innermost_mut().ops.truncate(n);
    }

    /// The last op of the innermost open block, to edit it (a rename of a result).
    pub fn last_mut(&mut self) -> Option<&mut Op> {
        let id = *self.innermost().ops.last()?;
        Some(&mut self.ops[id])
    }

    fn innermost(&self) -> &Block {
        self.blocks
            .last()
            .expect("a cursor always has its outer block open")
    }

    fn innermost_mut(&mut self) -> &mut Block {
        self.blocks
            .last_mut()
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

    /// The outer block (nested blocks still open are closed into nothing: close them first),
    /// the value table and the arena.
    pub fn finish(mut self) -> (Block, Values, Ops) {
        self.blocks.truncate(1);
        let outer = self.blocks.pop().unwrap_or_default();
        (outer, self.values, self.ops)
    }

    /// Gives the value table and the arena back to `f` (the function [`Cursor::on`] took them
    /// from); returns the outer block.
    pub fn finish_into(self, f: &mut Function) -> Block {
        let (b, values, ops) = self.finish();
        (f.values, f.ops) = (values, ops);
        b
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
        let mut c = Cursor::new(Values::default(), Ops::default(), Some(loc.clone()));
        let idx = Type::Scalar(DType::Index);
        let a = c.push(OpKind::Const(Const::Int(1)), idx.clone());
        c.open();
        let b = c.push(OpKind::Const(Const::Int(2)), idx.clone());
        c.set_loc(None);
        c.push_void(OpKind::Barrier(a));
        let inner = c.close();
        assert_eq!(c.close(), Block::default(), "the outer block stays open");
        let (outer, values, ops) = c.finish();
        assert_eq!((a, b), (Value(0), Value(1)));
        assert_eq!((values.len(), ops.len()), (2, 3));
        assert_eq!(outer.ops.len(), 1);
        assert_eq!(ops[outer.ops[0]].loc, Some(loc.clone()));
        assert_eq!(inner.ops.len(), 2);
        assert_eq!(ops[inner.ops[0]].result, Some(b));
        assert_eq!(ops[inner.ops[0]].loc, Some(loc));
        let last = &ops[inner.ops[1]];
        assert_eq!((last.result, last.loc.clone()), (None, None));
    }

    /// A pass that takes every op of a block and emits it again rewrites the arena's slots in
    /// place: the arena does not grow, and handles not taken are kept.
    #[test]
    fn a_rewrite_reuses_the_slots_it_takes() {
        let idx = Type::Scalar(DType::Index);
        let mut c = Cursor::default();
        let a = c.push(OpKind::Const(Const::Int(1)), idx.clone());
        let b = c.push(OpKind::Const(Const::Int(2)), idx.clone());
        c.push_void(OpKind::Barrier(a));
        let (mut body, values, ops) = c.finish();
        let kept = body.ops[0];
        let mut c = Cursor::new(values, ops, None);
        c.open();
        for id in std::mem::take(&mut body.ops) {
            if id == kept {
                c.keep(id);
                continue;
            }
            let mut op = c.take(id);
            if let OpKind::Barrier(v) = &mut op.kind {
                *v = b;
            }
            c.emit(op);
        }
        body = c.close();
        let (_, _, ops) = c.finish();
        assert_eq!(ops.len(), 3, "no slot added");
        assert_eq!(body.ops.len(), 3);
        assert_eq!(body.ops[0], kept);
        let kinds: Vec<&OpKind> = body.ops.iter().map(|&id| &ops[id].kind).collect();
        assert_eq!(
            kinds,
            [
                &OpKind::Const(Const::Int(1)),
                &OpKind::Const(Const::Int(2)),
                &OpKind::Barrier(b)
            ]
        );
    }
}
