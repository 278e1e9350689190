//! Lowering block views (a transform): every access through a `view` (`subview(x, [offsets],
//! [extents])`) becomes the same access of the buffer it views, at the summed offsets, after
//! `trap_if` checks that keep it inside the view. So no backend, no race detector and no
//! executor knows views: a `load` of a column block is a `load` of its tensor.
//!
//! - `view %src[%o..]` checks each offset against the last start at which the view's extent
//!   fits in `%src` ([`Trap::ViewOffset`]) and is then removed; a view of a view sums offsets.
//! - `slice` and `subview` of a view are views of the viewed buffer's slice (or of the buffer).
//! - `load`, `store`, `elem`, `set_elem`, `remote_load` and `remote_store` through a view check
//!   each offset against the last start at which the access fits in the view
//!   ([`Trap::ViewAccess`]) and then read or write the viewed buffer.
//!
//! A check is not emitted where the offset's values are known to fit: a constant, the variable
//! of a loop with constant bounds, `rank`. Specialization's first pass, which sees the views,
//! has already refused every offset it knows does not fit where it runs. The verifier
//! (`valid/views.rs`) keeps views out of every other op. Runs once every dim is bound
//! (specialization), before the backends.

use crate::cursor::Cursor;
use crate::entity::SecondaryMap;
use crate::error::{IrError, Result};
use crate::ir::{BinOp, Block, CmpOp, Const, Function, Op, OpKind, Trap, Value};
use crate::types::{DType, Shape, Type};

/// What a view value stands for: `offsets` (one per dim of `root`) into `root`, a buffer that
/// is not a view.
#[derive(Clone)]
struct Viewed {
    root: Value,
    offsets: Vec<Value>,
}

struct Lower<'a> {
    function: &'a str,
    /// Where the rewritten ops go, with the location of the op being rewritten.
    cur: Cursor,
    views: SecondaryMap<Value, Viewed>,
    /// The values known so far of index values: constants (`const`, bound `dim`) and the
    /// variables of loops with constant bounds, as inclusive ranges.
    ranges: SecondaryMap<Value, (i128, i128)>,
    /// The function's parameters (a `ctx` parameter is the world's context).
    params: Vec<Value>,
    world_size: u64,
}

/// Rewrites every block view of `f` away (see the module docs), for a world of `world_size`
/// ranks (the range of `rank(ctx)` of the world's context).
///
/// # Errors
/// [`IrError::Verify`] when a view reaches an op that does not take one (the verifier refuses
/// that first, so this is an internal error).
pub fn lower_views(f: &mut Function, world_size: u64) -> Result<()> {
    if !f
        .body
        .any(&f.ops, &mut |op| matches!(op.kind, OpKind::View { .. }))
    {
        return Ok(());
    }
    let params: Vec<Value> = f.params.iter().map(|p| p.value).collect();
    let mut body = std::mem::take(&mut f.body);
    let name = f.name.clone();
    let mut l = Lower {
        function: &name,
        cur: Cursor::on(f, None),
        views: SecondaryMap::new(),
        ranges: SecondaryMap::new(),
        params,
        world_size,
    };
    let r = l.block(&mut body);
    l.cur.finish_into(f);
    f.body = body;
    r
}

impl Lower<'_> {
    fn block(&mut self, b: &mut Block) -> Result<()> {
        self.cur.open();
        for id in std::mem::take(&mut b.ops) {
            let mut op = self.cur.take(id);
            if let OpKind::For { var, lo, hi, .. } = &op.kind {
                let c = |v: &Value| self.ranges.get(*v).filter(|r| r.0 == r.1).map(|r| r.0);
                if let (Some(lo), Some(hi)) = (c(lo), c(hi)) {
                    if lo < hi {
                        self.ranges.insert(*var, (lo, hi - 1));
                    }
                }
            }
            for nested in op.kind.blocks_mut() {
                self.block(nested)?;
            }
            self.cur.set_loc(op.loc.clone());
            self.op(op)?;
        }
        b.ops = self.cur.close().ops;
        Ok(())
    }

    fn fail<T>(&self, op: &str, message: String) -> Result<T> {
        Err(IrError::Verify {
            function: self.function.to_string(),
            op: op.to_string(),
            loc: self.cur.loc().cloned(),
            message,
        })
    }

    fn push(&mut self, kind: OpKind, ty: Option<Type>) -> Option<Value> {
        let result = ty.map(|t| self.cur.value(t));
        self.cur.append(kind, result);
        result
    }

    fn index(&mut self, n: i128) -> Value {
        let v = self.push(
            OpKind::Const(Const::Int(n)),
            Some(Type::Scalar(DType::Index)),
        );
        let v = v.expect("a constant defines a value");
        self.ranges.insert(v, (n, n));
        v
    }

    /// `base + off`, folded where either is the constant 0.
    fn add(&mut self, base: Value, off: Value) -> Value {
        if self.ranges.get(base) == Some(&(0, 0)) {
            return off;
        }
        if self.ranges.get(off) == Some(&(0, 0)) {
            return base;
        }
        let ty = Some(Type::Scalar(DType::Index));
        self.push(OpKind::Binary(BinOp::Add, base, off), ty)
            .expect("an add defines a value")
    }

    /// Stops the rank with `kind` unless `0 <= off <= last` (compared as unsigned, so a
    /// negative offset fails too; a negative `last`, an extent larger than the one it must fit
    /// in, fails always); nothing when `off`'s values are known to fit. Specialization's first
    /// pass has refused, before anything runs, every check it knows fails where it runs.
    fn check(&mut self, off: Value, last: i128, kind: Trap) {
        if let Some(&(lo, hi)) = self.ranges.get(off) {
            if lo >= 0 && hi <= last {
                return;
            }
        }
        let bool_ty = Some(Type::Scalar(DType::Bool));
        let cond = if last < 0 {
            self.push(OpKind::Const(Const::Bool(true)), bool_ty)
        } else {
            let u = self.push(OpKind::Cast(off), Some(Type::Scalar(DType::U64)));
            let l = self.push(
                OpKind::Const(Const::Int(last)),
                Some(Type::Scalar(DType::U64)),
            );
            let (u, l) = (u.expect("cast"), l.expect("const"));
            self.push(OpKind::Cmp(CmpOp::Gt, u, l), bool_ty)
        };
        let b = self.index(last);
        self.push(
            OpKind::TrapIf {
                cond: cond.expect("a condition"),
                a: off,
                b,
                kind,
            },
            None,
        );
    }

    fn extents(&self, v: Value) -> Vec<u64> {
        match &self.cur.ty(v) {
            Type::Tensor(s, _) | Type::Window(s, _) | Type::Tile(s, _) => {
                s.0.iter().map(|d| d.as_const().unwrap_or(0)).collect()
            }
            _ => vec![],
        }
    }

    /// Checks an access of extents `tile` at `offsets` of the view `src` and returns the
    /// viewed buffer and the summed offsets.
    fn access(&mut self, src: Value, offsets: &[Value], tile: &[u64]) -> (Value, Vec<Value>) {
        let Viewed {
            root,
            offsets: base,
        } = self.views[src].clone();
        let ext = self.extents(src);
        for (i, &o) in offsets.iter().enumerate() {
            let t = tile.get(i).copied().unwrap_or(1);
            let e = ext.get(i).copied().unwrap_or(0);
            self.check(o, i128::from(e) - i128::from(t), Trap::ViewAccess);
        }
        let summed = base
            .iter()
            .zip(offsets)
            .map(|(&b, &o)| self.add(b, o))
            .collect();
        (root, summed)
    }

    /// A new view `r` of `src` (a view or a buffer) at `offsets`, checked against `src`.
    fn view(&mut self, r: Value, src: Value, offsets: &[Value]) {
        let (s, e) = (self.extents(src), self.extents(r));
        for (&o, (&s, &e)) in offsets.iter().zip(s.iter().zip(&e)) {
            self.check(o, i128::from(s) - i128::from(e), Trap::ViewOffset);
        }
        let viewed = match self.views.get(src).cloned() {
            Some(Viewed {
                root,
                offsets: base,
            }) => Viewed {
                root,
                offsets: base
                    .iter()
                    .zip(offsets)
                    .map(|(&b, &o)| self.add(b, o))
                    .collect(),
            },
            None => Viewed {
                root: src,
                offsets: offsets.to_vec(),
            },
        };
        self.views.insert(r, viewed);
    }

    /// Whether the view `r` of `src` (not a view) at `offsets` takes whole rows: its offsets
    /// past dim 0 known to be 0 and its extents past dim 0 `src`'s (the verifier's rule, which
    /// lets such a view go where a contiguous buffer is needed).
    fn whole_rows(&self, src: Value, r: Option<Value>, offsets: &[Value]) -> bool {
        let Some(r) = r else { return false };
        let (Some(s), Some(t)) = (self.cur.ty(src).shape(), self.cur.ty(r).shape()) else {
            return false;
        };
        let zero = offsets
            .iter()
            .skip(1)
            .all(|o| self.ranges.get(*o) == Some(&(0, 0)));
        !self.views.contains_key(src) && t.whole_rows_of(s, zero)
    }

    fn op(&mut self, mut op: Op) -> Result<()> {
        let result = op.result;
        match &mut op.kind {
            OpKind::Const(Const::Int(n)) => {
                if let Some(r) = result {
                    self.ranges.insert(r, (*n, *n));
                }
            }
            OpKind::Rank(ctx) if self.params.contains(ctx) && self.world_size > 0 => {
                if let Some(r) = result {
                    self.ranges.insert(r, (0, i128::from(self.world_size) - 1));
                }
            }
            OpKind::Dim(d) => {
                if let (Some(r), Some(n)) = (result, d.as_const()) {
                    self.ranges.insert(r, (i128::from(n), i128::from(n)));
                }
            }
            OpKind::View { src, offsets } if self.whole_rows(*src, result, offsets) => {
                // Whole rows of a buffer: the contiguous row block `subview` is.
                op.kind = OpKind::Subview {
                    src: *src,
                    offset: offsets[0],
                };
            }
            OpKind::View { src, offsets } => {
                let (src, offsets) = (*src, offsets.clone());
                let r = result.expect("a view defines a value");
                self.view(r, src, &offsets);
                return Ok(());
            }
            OpKind::Subview { src, offset } if self.views.contains_key(*src) => {
                let (src, offset) = (*src, *offset);
                let r = result.expect("a subview defines a value");
                let mut offsets = vec![offset];
                for _ in 1..self.extents(src).len() {
                    offsets.push(self.index(0));
                }
                self.view(r, src, &offsets);
                return Ok(());
            }
            OpKind::Slice { src, index } if self.views.contains_key(*src) => {
                let (src, index) = (*src, *index);
                let r = result.expect("a slice defines a value");
                let (root, at) = self.access(src, &[index], &[1]);
                let Type::Tensor(s, d) = self.cur.ty(root).clone() else {
                    return self.fail("slice", "a slice of a view of a window".into());
                };
                let row = Type::Tensor(Shape(s.0[1..].to_vec()), d);
                let at0 = at[0];
                let sliced = self.push(
                    OpKind::Slice {
                        src: root,
                        index: at0,
                    },
                    Some(row),
                );
                let base = self.views[src].offsets[1..].to_vec();
                let sliced = sliced.expect("a slice defines a value");
                self.views.insert(
                    r,
                    Viewed {
                        root: sliced,
                        offsets: base,
                    },
                );
                return Ok(());
            }
            OpKind::Load { src, offsets }
            | OpKind::RemoteLoad { src, offsets, .. }
            | OpKind::Elem {
                src,
                indices: offsets,
            } if self.views.contains_key(*src) => {
                let tile = result.map(|r| self.extents(r)).unwrap_or_default();
                let (root, at) = self.access(*src, offsets, &tile);
                (*src, *offsets) = (root, at);
            }
            OpKind::Store {
                value,
                dst,
                offsets,
            }
            | OpKind::RemoteStore {
                value,
                dst,
                offsets,
                ..
            }
            | OpKind::SetElem {
                value,
                dst,
                indices: offsets,
            } if self.views.contains_key(*dst) => {
                let tile = self.extents(*value);
                let (root, at) = self.access(*dst, offsets, &tile);
                (*dst, *offsets) = (root, at);
            }
            kind => {
                if kind.operands().iter().any(|v| self.views.contains_key(*v)) {
                    let name = kind.keyword();
                    return self.fail(name, format!("`{name}` takes a block view, which only tile and element accesses take; the verifier refuses this first"));
                }
            }
        }
        self.cur.emit(op);
        Ok(())
    }
}
