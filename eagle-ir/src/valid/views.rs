//! The verifier's rules for block views (`view`, `subview(x, [offsets], [extents])`): their
//! types, and where a strided value may be used.

use super::V;
use crate::error::Result;
use crate::ir::{Op, OpKind, Value};

impl V<'_> {
    /// A block view, and a slice or sub-view of one, is strided: its rows are parts of the
    /// viewed buffer's rows (unless it takes whole rows of a buffer that is not strided). It is read and written by element and tile accesses and viewed
    /// further, and nothing else takes it (a collective, `put`/`get` or a call copies a
    /// buffer as one run of bytes).
    pub(super) fn strided_uses(&mut self, op: &Op) -> Result<()> {
        let allowed = match &op.kind {
            OpKind::Load { src, .. }
            | OpKind::Elem { src, .. }
            | OpKind::RemoteLoad { src, .. }
            | OpKind::Slice { src, .. }
            | OpKind::Subview { src, .. }
            | OpKind::View { src, .. } => Some(*src),
            OpKind::Store { dst, .. }
            | OpKind::SetElem { dst, .. }
            | OpKind::RemoteStore { dst, .. } => Some(*dst),
            _ => None,
        };
        for (i, v) in op.kind.operands().into_iter().enumerate() {
            if self.strided.contains_key(v) && Some(v) != allowed {
                let fix = if matches!(op.kind, OpKind::Call { .. }) {
                    "give the callee a `Tile` parameter and pass `load(view, ...)`, or have it take the tensor and return the tile (a kernel that returns a value is built in place, where views are taken), or view whole rows with `subview(x, offset, LEN)`"
                } else {
                    "move the block through a tile (`load` it from the view, then `store` it or `put` a buffer of whole rows), or view whole rows with `subview(x, offset, LEN)`"
                };
                return self.fail(
                    op,
                    format!(
                        "operand {i} is a block view (`subview(x, [offsets], [extents])`), whose rows are not contiguous; `{}` takes a contiguous buffer: {fix}",
                        op.kind.keyword()
                    ),
                );
            }
        }
        self.tile_fits_view(op)?;
        if let (OpKind::Const(crate::ir::Const::Int(0)), Some(r)) = (&op.kind, op.result) {
            self.zeros.insert(r, ());
        }
        if let (Some(r), Some(src)) = (op.result, allowed) {
            let strided = match &op.kind {
                OpKind::View { offsets, .. } => {
                    self.strided.contains_key(src) || !self.whole_rows(src, r, offsets)
                }
                OpKind::Slice { .. } | OpKind::Subview { .. } => self.strided.contains_key(src),
                _ => false,
            };
            if strided {
                self.strided.insert(r, ());
            }
        }
        Ok(())
    }

    /// Whether the view `r` of `src` at `offsets` takes whole rows: its offsets past dim 0 are
    /// the constant 0 and its extents past dim 0 are `src`'s (a rank-1 view always). Such a
    /// view is contiguous, as `subview(x, offset, LEN)` is (`views::lower_views` makes it one).
    fn whole_rows(&self, src: Value, r: Value, offsets: &[Value]) -> bool {
        let (Some(s), Some(t)) = (self.ty(src).shape(), self.ty(r).shape()) else {
            return false;
        };
        let zero = offsets.iter().skip(1).all(|o| self.zeros.contains_key(*o));
        t.whole_rows_of(s, zero)
    }

    /// A tile access through a strided view is no wider than the view along any dim whose
    /// two extents are known (a tile wider than a tensor is specialization's bounds error).
    fn tile_fits_view(&self, op: &Op) -> Result<()> {
        let (buf, tile) = match &op.kind {
            OpKind::Load { src, .. } | OpKind::RemoteLoad { src, .. } => (*src, op.result),
            OpKind::Store { value, dst, .. } | OpKind::RemoteStore { value, dst, .. } => {
                (*dst, Some(*value))
            }
            _ => return Ok(()),
        };
        let (true, Some(t)) = (self.strided.contains_key(buf), tile) else {
            return Ok(());
        };
        let (Some(v), Some(t)) = (self.ty(buf).shape(), self.ty(t).shape()) else {
            return Ok(());
        };
        for (i, (e, t)) in v.0.iter().zip(&t.0).enumerate() {
            if let (Some(e), Some(t)) = (e.as_const(), t.as_const()) {
                if t > e {
                    return self.fail(op, format!("the tile is {t} wide along dim {i}, but the block view it goes through has extent {e} there; narrow the tile or widen the view"));
                }
            }
        }
        Ok(())
    }
}
