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
//! A check whose offset is a constant that fits is not emitted. The verifier
//! (`valid/views.rs`) keeps views out of every other op. Runs once every dim is bound
//! (specialization), before the backends.

use crate::entity::PrimaryMap;
use crate::error::{IrError, Result};
use crate::ir::{BinOp, Block, CmpOp, Const, Function, Loc, Op, OpKind, Trap, Value};
use crate::types::{DType, Shape, Type};
use std::collections::HashMap;

/// What a view value stands for: `offsets` (one per dim of `root`) into `root`, a buffer that
/// is not a view.
#[derive(Clone)]
struct Viewed {
    root: Value,
    offsets: Vec<Value>,
}

struct Lower<'a> {
    function: &'a str,
    values: &'a mut PrimaryMap<Value, Type>,
    views: HashMap<Value, Viewed>,
    /// Integer constants defined so far (`const` and bound `dim` ops).
    consts: HashMap<Value, i128>,
    out: Vec<Op>,
    loc: Option<Loc>,
}

/// Rewrites every block view of `f` away (see the module docs).
///
/// # Errors
/// [`IrError::Verify`] when a view's extent is larger than its source's along a dim (known
/// only once the dims are bound), or when a view reaches an op that does not take one (the
/// verifier refuses that first).
pub fn lower_views(f: &mut Function) -> Result<()> {
    fn has_view(b: &Block) -> bool {
        b.ops.iter().any(|op| {
            matches!(op.kind, OpKind::View { .. }) || op.kind.blocks().into_iter().any(has_view)
        })
    }
    if !has_view(&f.body) {
        return Ok(());
    }
    let mut body = std::mem::take(&mut f.body);
    let mut l = Lower {
        function: &f.name,
        values: &mut f.values,
        views: HashMap::new(),
        consts: HashMap::new(),
        out: vec![],
        loc: None,
    };
    let r = l.block(&mut body);
    f.body = body;
    r
}

impl Lower<'_> {
    fn block(&mut self, b: &mut Block) -> Result<()> {
        let outer = std::mem::take(&mut self.out);
        for mut op in std::mem::take(&mut b.ops) {
            for nested in op.kind.blocks_mut() {
                self.block(nested)?;
            }
            self.loc = op.loc.clone();
            self.op(op)?;
        }
        b.ops = std::mem::replace(&mut self.out, outer);
        Ok(())
    }

    fn fail<T>(&self, op: &str, message: String) -> Result<T> {
        Err(IrError::Verify {
            function: self.function.to_string(),
            op: op.to_string(),
            loc: self.loc.clone(),
            message,
        })
    }

    fn push(&mut self, kind: OpKind, ty: Option<Type>) -> Option<Value> {
        let result = ty.map(|t| self.values.push(t));
        self.out.push(Op {
            result,
            kind,
            loc: self.loc.clone(),
        });
        result
    }

    fn index(&mut self, n: i128) -> Value {
        let v = self.push(
            OpKind::Const(Const::Int(n)),
            Some(Type::Scalar(DType::Index)),
        );
        let v = v.expect("a constant defines a value");
        self.consts.insert(v, n);
        v
    }

    /// `base + off`, folded where either is the constant 0.
    fn add(&mut self, base: Value, off: Value) -> Value {
        if self.consts.get(&base) == Some(&0) {
            return off;
        }
        if self.consts.get(&off) == Some(&0) {
            return base;
        }
        let ty = Some(Type::Scalar(DType::Index));
        self.push(OpKind::Binary(BinOp::Add, base, off), ty)
            .expect("an add defines a value")
    }

    /// Stops the rank with `kind` unless `0 <= off <= last` (compared as unsigned, so a
    /// negative offset fails too); nothing when `off` is a constant that fits.
    fn check(&mut self, off: Value, last: i128, kind: Trap) {
        if let Some(&c) = self.consts.get(&off) {
            if (0..=last).contains(&c) {
                return;
            }
        }
        let u = self.push(OpKind::Cast(off), Some(Type::Scalar(DType::U64)));
        let l = self.push(
            OpKind::Const(Const::Int(last)),
            Some(Type::Scalar(DType::U64)),
        );
        let (u, l) = (u.expect("cast"), l.expect("const"));
        let cond = self.push(
            OpKind::Cmp(CmpOp::Gt, u, l),
            Some(Type::Scalar(DType::Bool)),
        );
        let b = self.index(last);
        self.push(
            OpKind::TrapIf {
                cond: cond.expect("cmp"),
                a: off,
                b,
                kind,
            },
            None,
        );
    }

    fn extents(&self, v: Value) -> Vec<u64> {
        match &self.values[v] {
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
        } = self.views[&src].clone();
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
    fn view(&mut self, op: &str, r: Value, src: Value, offsets: &[Value]) -> Result<()> {
        let (s, e) = (self.extents(src), self.extents(r));
        for (i, (&o, (&s, &e))) in offsets.iter().zip(s.iter().zip(&e)).enumerate() {
            if e > s {
                return self.fail(op, format!("the block view has extent {e} along dim {i}, where the buffer it views has {s}; give an extent from 1 to {s}"));
            }
            self.check(o, i128::from(s - e), Trap::ViewOffset);
        }
        let viewed = match self.views.get(&src).cloned() {
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
        Ok(())
    }

    fn op(&mut self, mut op: Op) -> Result<()> {
        let result = op.result;
        match &mut op.kind {
            OpKind::Const(Const::Int(n)) => {
                if let Some(r) = result {
                    self.consts.insert(r, *n);
                }
            }
            OpKind::Dim(d) => {
                if let (Some(r), Some(n)) = (result, d.as_const()) {
                    self.consts.insert(r, i128::from(n));
                }
            }
            OpKind::View { src, offsets } => {
                let (src, offsets) = (*src, offsets.clone());
                let r = result.expect("a view defines a value");
                return self.view("view", r, src, &offsets);
            }
            OpKind::Subview { src, offset } if self.views.contains_key(src) => {
                let (src, offset) = (*src, *offset);
                let r = result.expect("a subview defines a value");
                let mut offsets = vec![offset];
                for _ in 1..self.extents(src).len() {
                    offsets.push(self.index(0));
                }
                return self.view("subview", r, src, &offsets);
            }
            OpKind::Slice { src, index } if self.views.contains_key(src) => {
                let (src, index) = (*src, *index);
                let r = result.expect("a slice defines a value");
                let (root, at) = self.access(src, &[index], &[1]);
                let Type::Tensor(s, d) = self.values[root].clone() else {
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
                let base = self.views[&src].offsets[1..].to_vec();
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
            } if self.views.contains_key(src) => {
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
            } if self.views.contains_key(dst) => {
                let tile = self.extents(*value);
                let (root, at) = self.access(*dst, offsets, &tile);
                (*dst, *offsets) = (root, at);
            }
            kind => {
                if kind.operands().iter().any(|v| self.views.contains_key(v)) {
                    let name = kind.keyword();
                    return self.fail(name, format!("`{name}` takes a block view, which only tile and element accesses take; the verifier refuses this first"));
                }
            }
        }
        self.out.push(op);
        Ok(())
    }
}
