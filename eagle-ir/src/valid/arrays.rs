//! The verifier's rule for local arrays (`local_array`): they are only indexed.

use super::V;
use crate::error::Result;
use crate::ir::{Op, OpKind};

impl V<'_> {
    /// A local array is indexed and nothing else: read with `elem` (as its source), written
    /// with `set_elem` (as its destination). So it never leaves its function, no tile op sees
    /// it (a GPU block's lanes each hold their own copy, kept equal by writing every element
    /// in every lane), and no peer or collective reaches it.
    pub(super) fn array_uses(&mut self, op: &Op) -> Result<()> {
        if let OpKind::LocalArray = op.kind {
            if let Some(r) = op.result {
                self.arrays.insert(r, ());
            }
            return Ok(());
        }
        let allowed = match &op.kind {
            OpKind::Elem { src, .. } => Some(*src),
            OpKind::SetElem { dst, .. } => Some(*dst),
            _ => None,
        };
        for (i, v) in op.kind.operands().into_iter().enumerate() {
            if self.arrays.contains_key(v) && Some(v) != allowed {
                return self.fail(
                    op,
                    format!(
                        "operand {i} is a local array; a local array is only indexed (`a[i]`, `a[i] = v`): it cannot be {} — copy its elements into a tensor or tile in a loop",
                        match &op.kind {
                            OpKind::Call { .. } => "passed to a function",
                            OpKind::Load { .. } | OpKind::Store { .. } => "loaded or stored as a tile",
                            _ => "used by this op",
                        }
                    ),
                );
            }
        }
        Ok(())
    }
}
