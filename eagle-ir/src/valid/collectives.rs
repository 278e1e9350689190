//! The verifier's rules for the variable-size collectives (`all_to_all_v`, `allgather_v`).

use super::V;
use crate::error::Result;
use crate::ir::{Op, Value};
use crate::types::DType;

impl V<'_> {
    /// `all_to_all_v` and `allgather_v` (`gather`): a send window and a local receive buffer
    /// of one dtype whose rows have the same shape, a window of `u64` send counts (one per
    /// rank, or one for `allgather_v`) and a buffer of `u64` receive counts (one per rank:
    /// lengths of P are checked when the collective is lowered).
    pub(super) fn check_v_collective(
        &self,
        op: &Op,
        src: Value,
        send_counts: Value,
        dst: Value,
        recv_counts: Value,
        gather: bool,
    ) -> Result<()> {
        self.not_host(op, "collective")?;
        self.writable(op, dst, "the collective")?;
        self.writable(op, recv_counts, "the collective")?;
        let (ss, sd) = self.window(op, src, "operand 1 (send buffer)")?;
        let (cs, cd) = self.window(op, send_counts, "operand 2 (send counts)")?;
        let (ds, dd) = self.memory(op, dst, "operand 3 (receive buffer)")?;
        let (rs, rd) = self.memory(op, recv_counts, "operand 4 (receive counts)")?;
        if sd != dd || ss.rank() == 0 || ss.0[1..] != ds.0[1..] {
            return self.fail(op, format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`: give both the same dtype and the same row shape (`[S, M, ...]` and `[CAP, M, ...]`)"));
        }
        if gather && (cs.0 != [crate::Dim::Const(1)] || cd != DType::U64) {
            return self.fail(op, format!("the send count must be `[1]` of `u64` (the rows this rank contributes), found `{cs}, {cd}`"));
        }
        let counts = if gather {
            vec![(rs, rd)]
        } else {
            vec![(cs, cd), (rs, rd)]
        };
        for (s, d) in counts {
            if s.rank() != 1 || d != DType::U64 {
                return self.fail(op, format!("the send and receive counts must be `[NR]` of `u64` (one count of rows per rank), found `{s}, {d}`"));
            }
        }
        if src == dst {
            return self.fail(op, format!("an in-place `{}` (the same window as send and receive buffer) is not supported: a rank overwrites rows a peer still reads; give it a separate receive buffer", op.kind.keyword()));
        }
        // Any other two of the four the same buffer: one is written while it is read (by
        // peers) or written again.
        let roles = [
            (src, "send buffer"),
            (send_counts, "send counts"),
            (dst, "receive buffer"),
            (recv_counts, "receive counts"),
        ];
        for (i, (a, ra)) in roles.iter().enumerate() {
            if let Some((_, rb)) = roles[i + 1..].iter().find(|(b, _)| b == a) {
                return self.fail(op, format!("the {ra} and the {rb} of `{}` are the same buffer, which is written while it is read; give each its own buffer", op.kind.keyword()));
            }
        }
        Ok(())
    }
}
