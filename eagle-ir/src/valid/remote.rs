//! The verifier's rules for one-sided communication: put, get, remote loads and stores,
//! notify and wait.

use super::shapes_compatible;
use super::V;
use crate::error::Result;
use crate::ir::{Op, OpKind};
use crate::types::{DType, Type};

impl V<'_> {
    /// Put, get, remote loads and stores, notify and wait.
    pub(super) fn check_remote_and_signals(&mut self, op: &Op) -> Result<()> {
        use OpKind::*;
        match &op.kind {
            Put { dst, src, .. } | Get { dst, src, .. } => {
                let put = matches!(op.kind, Put { .. });
                if !put {
                    self.writable(op, *dst, "the get")?;
                }
                self.not_host(op, if put { "put" } else { "get" })?;
                let (rs, rd) = if put {
                    self.window(op, *dst, "operand 0 (destination)")?
                } else {
                    self.memory(op, *dst, "operand 0 (destination)")?
                };
                let (ls, ld) = if put {
                    self.memory(op, *src, "operand 2 (source)")?
                } else {
                    self.window(op, *src, "operand 2 (source)")?
                };
                if rd != ld || !shapes_compatible(&rs, &ls) {
                    return self.fail(op, format!("destination is `{rs}, {rd}` but source is `{ls}, {ld}`; put/get copy whole buffers of the same shape and dtype"));
                }
            }
            RemoteLoad { src, offsets, .. } => {
                self.not_host(op, "remote_load")?;
                let (s, d) = self.window(op, *src, "operand 0 (source)")?;
                self.offsets(op, offsets, s.rank(), "the window")?;
                match op.result.map(|r| self.ty(r)) {
                    Some(Type::Tile(ts, td)) if ts.rank() == s.rank() && *td == d => {}
                    _ => {
                        return self.fail(
                            op,
                            format!("result must be a tile of rank {} and dtype `{d}`", s.rank()),
                        )
                    }
                }
            }
            RemoteStore {
                value,
                dst,
                offsets,
                ..
            } => {
                self.not_host(op, "remote_store")?;
                let (s, d) = self.window(op, *dst, "operand 1 (destination)")?;
                self.offsets(op, offsets, s.rank(), "the window")?;
                match self.ty(*value) {
                    Type::Tile(ts, td) if ts.rank() == s.rank() && *td == d => {}
                    t => return self.fail(op, format!("operand 0 (value) must be a tile of rank {} and dtype `{d}`, found `{t}`", s.rank())),
                }
            }
            Notify {
                signal,
                offsets,
                value,
                ..
            }
            | Wait {
                signal,
                offsets,
                expected: value,
                ..
            } => {
                self.not_host(op, "notify/wait")?;
                let (s, d) = self.window(op, *signal, "operand 0 (signal)")?;
                if !matches!(d, DType::I32 | DType::I64 | DType::U32 | DType::U64) {
                    return self.fail(
                        op,
                        format!("signals must be windows of i32, i64, u32 or u64, found `{d}`"),
                    );
                }
                self.offsets(op, offsets, s.rank(), "the signal window")?;
                self.scalar(op, *value, "value", Some(d))?;
            }
            other => {
                return self.fail(
                    op,
                    format!(
                        "internal: `{}` is not checked by `check_remote_and_signals`",
                        other.info().name
                    ),
                );
            }
        }
        Ok(())
    }
}
