//! Lowering of built-in collectives into eagle IR primitives (barrier, notify, wait, get,
//! remote_load, load, store, elementwise ops, `for`, `if`), once the world size P is known.
//!
//! Every collective opens and closes with a barrier (the buffers are ready on every rank
//! before anyone reads them, and nobody returns while a peer may still read its buffers).
//! Between its steps, a ring or two-phase allreduce waits only for the ranks whose data the
//! next step reads: point-to-point signals in a window `window<[P], i64>` that
//! [`add_signal_windows`] adds to the device function (and its launches), instead of full
//! barriers.
//!
//! Buffers of any rank `[D0, D1, ...]` are cut along dim 0 into P contiguous chunks of rows,
//! the first `D0 % P` one row longer (the same rule as the rank partition of the multi-GPU
//! seed; a flat `[N]` buffer is N rows of one element). Large chunks are processed in tiles
//! of about [`BLOCK`] elements (whole rows, at least one). Every reduction is a left fold in a fixed rank
//! order, documented per mode in `docs/collectives.md`.

use crate::error::SpecializeError;
use eagle_ir::entity::SecondaryMap;
use eagle_ir::Cursor;
use eagle_ir::{
    AllreduceMode, BinOp, Block, CmpOp, DType, Dim, Function, Level, Module, Op, OpKind, Param,
    ReduceOp, Shape, Trap, Type, Value,
};
use std::collections::HashMap;

mod em;
mod groups;
mod split;

use em::Em;
pub use groups::RankLayout;

/// Elements per tile in lowered reductions.
pub const BLOCK: u64 = 1024;

/// Offset and length of chunk `c` of `n` elements over `p` ranks.
pub fn chunk(n: u64, p: u64, c: u64) -> (u64, u64) {
    let (q, r) = (n / p, n % p);
    (c * q + c.min(r), q + u64::from(c < r))
}

/// The rows (dim 0) of a collective's buffer, and the rows per tile of about [`BLOCK`]
/// elements.
fn rows(t: &Type) -> (u64, u64) {
    let s = t.shape().and_then(Shape::consts).unwrap_or_default();
    let d0 = s.first().copied().unwrap_or(0);
    let row: u64 = s.iter().skip(1).product();
    (d0, (BLOCK / row.max(1)).max(1))
}

/// What every block of one function is lowered with.
struct Lowering<'a> {
    /// The function's name, for messages.
    f_name: &'a str,
    /// The world size.
    p: u64,
    /// The function's signal window, if any.
    sig: Option<Value>,
    /// The function's rank groups ([`groups::group_defs`]).
    groups: SecondaryMap<Value, groups::GroupDef>,
    /// The function's integer constants, by value (a broadcast root within a group is checked
    /// against the group's size before anything runs when it is one).
    consts: SecondaryMap<Value, i128>,
}

fn lower_block(cx: &Lowering<'_>, cur: &mut Cursor, b: &mut Block) -> Result<(), SpecializeError> {
    cur.open();
    for id in std::mem::take(&mut b.ops) {
        let mut op = cur.take(id);
        // A group's ranks are computed where they are used; a split's tables are read where
        // the split is.
        if matches!(op.kind, OpKind::Group { .. } | OpKind::Split { .. }) {
            if let Some(def) = op.result.and_then(|r| cx.groups.get(r)) {
                cur.set_loc(op.loc.clone());
                def.define(&mut Em {
                    cur: &mut *cur,
                    group: None,
                });
            }
            continue;
        }
        let group = groups::group_of(&op, &cx.groups);
        let world_rank = matches!(op.kind, OpKind::WorldRank { .. });
        if op.kind.info().collective || group.is_some() || world_rank {
            cur.set_loc(op.loc.clone());
            let before = cur.ops().len();
            let mut em = Em {
                cur: &mut *cur,
                group: None,
            };
            if lower_team_op(&mut em, &op, group, cx)? {
                continue;
            }
            // Left as it is: nothing it began to write stays.
            cur.truncate(before);
        }
        for b in op.kind.blocks_mut() {
            lower_block(cx, cur, b)?;
        }
        cur.emit(op);
    }
    *b = cur.close();
    Ok(())
}

/// Lowers `op`, an op of a team: the world (`group` `None`) or a rank group. A group's own
/// queries and barrier ([`groups::lower_group_op`]), `world_rank` of the world, and every
/// collective (within the group: the world's expansion with the group's rank and peers).
/// Returns `false` for an op it leaves as it is.
fn lower_team_op(
    em: &mut Em<'_>,
    op: &Op,
    group: Option<&groups::GroupDef>,
    cx: &Lowering<'_>,
) -> Result<bool, SpecializeError> {
    let loc = op.loc.clone();
    let Some(def) = group else {
        if let OpKind::WorldRank { rank, .. } = op.kind {
            groups::lower_world_rank(em, op, rank, cx.p);
            return Ok(true);
        }
        return lower_collective(em, op.kind.clone(), cx.f_name, loc, cx.p, cx.sig);
    };
    if let OpKind::WorldRank { rank, .. } = op.kind {
        groups::check_group_rank(op, rank, def, cx)?;
    }
    if groups::lower_group_op(em, op, def, cx.p, cx.sig) {
        return Ok(true);
    }
    let Some(n) = def.size() else {
        return groups::lower_uneven(em, op, def, cx);
    };
    // First the group (a rank in none stops there), then the root within it.
    let at = def.at(em, cx.p, cx.sig);
    if let OpKind::Broadcast { root, .. } = op.kind {
        groups::check_root(em, op, root, n, cx)?;
    }
    em.group = Some(at);
    lower_collective(em, op.kind.clone(), cx.f_name, loc, n, cx.sig)
}

/// `all_to_all_v` and `allgather_v`: their counts' lengths checked against P, then
/// [`v_collective`].
///
/// # Errors
/// [`SpecializeError::CollectiveShape`] for counts whose length is not P.
fn lower_v_collective(
    em: &mut Em<'_>,
    kind: &OpKind,
    f_name: &str,
    loc: Option<eagle_ir::Loc>,
    p: u64,
) -> Result<(), SpecializeError> {
    let (OpKind::AllToAllV {
        ctx,
        src,
        send_counts: counts,
        dst,
        recv_counts,
    }
    | OpKind::AllGatherV {
        ctx,
        src,
        count: counts,
        dst,
        recv_counts,
    }) = *kind
    else {
        return Ok(());
    };
    let gather = matches!(kind, OpKind::AllGatherV { .. });
    let name = if gather {
        "allgather_v"
    } else {
        "all_to_all_v"
    };
    let send_len = if gather { 1 } else { p };
    for (v, what, want) in [(counts, "send", send_len), (recv_counts, "receive", p)] {
        let n = em.rows(v);
        if n != want {
            return Err(SpecializeError::CollectiveShape {
                function: f_name.to_string(),
                op: name.into(),
                loc: loc.clone().map(Box::new),
                message: format!(
                    "the {what} counts have {n} entries but {} {p} ranks; {}",
                    em.team(),
                    em.team_fix("[NR]")
                ),
            });
        }
    }
    v_collective(em, ctx, src, counts, dst, recv_counts, p, gather);
    Ok(())
}

/// The expansion of `all_to_all_v` (`counts` of P entries) and `allgather_v` (`gather`: one
/// count, the same rows for every rank): after a barrier, each rank reads from every rank `q`
/// how many rows `q` sends it and records the counts in `recv_counts`; their prefix sums in
/// rank order place each rank's rows in `dst`. Then it pulls the rows, last first: for `q`
/// from P - 1 down to 0, it finds where `q`'s rows for it start in `q`'s send window (row 0
/// for `allgather_v`; for `all_to_all_v` the sum of `q`'s counts for the ranks before it) and
/// gets them in blocks of 2^k rows (the binary digits of the count, largest first) from the
/// run's end. So the first block written ends at row `total`, and a total beyond `dst`'s
/// rows fails its bounds check before any row moves. A barrier closes it.
#[allow(clippy::too_many_arguments)]
fn v_collective(
    em: &mut Em<'_>,
    ctx: Value,
    src: Value,
    send_counts: Value,
    dst: Value,
    recv_counts: Value,
    p: u64,
    gather: bool,
) {
    // Blocks of up to the largest power of two that both buffers hold: a run that fits both
    // is a sum of distinct such blocks; one that does not fails its first block's check.
    let rows = |v: Value| em.ty(v).shape().and_then(|s| s.0.first()?.as_const());
    let (src_rows, dst_rows) = (rows(src), rows(dst));
    let most = src_rows.zip(dst_rows).map_or(1, |(a, b)| a.min(b).max(1));
    let block_bits = 64 - most.leading_zeros();
    em.barrier(ctx);
    let me = em.rank(ctx);
    let zero = em.idx(0);
    let end = em.var(zero);
    let mine = if gather { zero } else { me };
    em.for_(0, p, |em, q| {
        let c = em.remote_elem(send_counts, q, mine);
        em.push_void(OpKind::SetElem {
            value: c,
            dst: recv_counts,
            indices: vec![q],
        });
        let ci = em.push(OpKind::Cast(c), Type::Scalar(DType::Index));
        let t = em.read(end);
        let t2 = em.ibin(BinOp::Add, t, ci);
        em.write(end, t2);
    });
    // More rows than `dst` holds: stop here, before any row moves, in the collective's words.
    if let Some(cap) = dst_rows {
        let total = em.read(end);
        let capv = em.idx(cap);
        em.trap_if(CmpOp::Gt, total, capv, Trap::RecvCapacity);
    }
    let last = em.idx(p - 1);
    em.for_(0, p, |em, k| {
        let q = em.ibin(BinOp::Sub, last, k);
        let start = em.var(zero);
        if !gather {
            em.for_v(zero, me, |em, r| {
                let x = em.remote_elem(send_counts, q, r);
                let xi = em.push(OpKind::Cast(x), Type::Scalar(DType::Index));
                let s = em.read(start);
                let s2 = em.ibin(BinOp::Add, s, xi);
                em.write(start, s2);
            });
        }
        let c = em.push(
            OpKind::Elem {
                src: recv_counts,
                indices: vec![q],
            },
            Type::Scalar(DType::U64),
        );
        let ci = em.push(OpKind::Cast(c), Type::Scalar(DType::Index));
        let e = em.read(end);
        let b = em.ibin(BinOp::Sub, e, ci);
        let s = em.read(start);
        // `q`'s counts reach past its send buffer.
        if let Some(cap) = src_rows {
            let reach = em.ibin(BinOp::Add, s, ci);
            let capv = em.idx(cap);
            em.trap_if(CmpOp::Gt, reach, capv, Trap::SendOverrun);
        }
        // The run of `c` rows in blocks of 2^k rows, largest first, taken from the run's end.
        let left = em.var(ci);
        for k in (0..block_bits).rev() {
            let size = 1u64 << k;
            let r = em.read(left);
            let sz = em.idx(size);
            let fits = em.cmp(CmpOp::Ge, r, sz);
            em.if_(
                fits,
                |em| {
                    let off = em.ibin(BinOp::Sub, r, sz);
                    let to = em.ibin(BinOp::Add, b, off);
                    let from = em.ibin(BinOp::Add, s, off);
                    let d = em.subview(dst, to, size);
                    let v = em.subview(src, from, size);
                    em.get(d, q, v);
                    em.write(left, off);
                },
                |_| {},
            );
        }
        em.write(end, b);
    });
    em.barrier(ctx);
}

/// Writes into `em` the expansion of a built-in collective, or returns `false` for any other
/// op (which the caller keeps, lowering its nested blocks).
///
/// # Errors
/// [`SpecializeError::CollectiveShape`] for an all-to-all whose buffers do not have P rows.
fn lower_collective(
    em: &mut Em<'_>,
    kind: OpKind,
    f_name: &str,
    loc: Option<eagle_ir::Loc>,
    p: u64,
    sig: Option<Value>,
) -> Result<bool, SpecializeError> {
    Ok(match kind {
        OpKind::Broadcast {
            ctx,
            src,
            dst,
            root,
        } => {
            em.barrier(ctx);
            if src == dst {
                // In place: the root already holds the data; copying its buffer onto
                // itself would write what the other ranks are reading.
                let me = em.rank(ctx);
                let other = em.cmp(CmpOp::Ne, me, root);
                em.if_(other, |em| em.get(dst, root, src), |_| {});
            } else {
                em.get(dst, root, src);
            }
            em.barrier(ctx);
            true
        }
        OpKind::AllGather { ctx, src, dst }
            if em.ty(dst).holds_rows_of(&em.ty(src)) || !matches!(em.ty(src), Type::Window(..)) =>
        {
            // The row form: rank r's whole send buffer (`[1, M, ...]`) becomes row r of
            // every rank's receive buffer. Pulled from the peers' send windows where the
            // send buffer is a window, else pushed into the peers' receive windows. (A
            // local send buffer is always the row form; at P = 1 its shapes are equal.)
            let pull = matches!(em.ty(src), Type::Window(..));
            em.check_team_rows(dst, p, "allgather", f_name, &loc)?;
            em.barrier(ctx);
            let me = em.rank(ctx);
            em.for_(0, p, |em, q| {
                let d = em.subview(dst, if pull { q } else { me }, 1);
                if pull {
                    em.get(d, q, src);
                } else {
                    em.put(d, q, src);
                }
            });
            em.barrier(ctx);
            true
        }
        OpKind::AllGather { ctx, src, dst } => {
            let (n, _) = rows(&em.ty(src));
            em.barrier(ctx);
            // In place, a rank's own chunk is already where it belongs (and the others
            // read it meanwhile): only the other chunks are fetched.
            let me = (src == dst).then(|| em.rank(ctx));
            em.for_(0, p, |em, peer| {
                em.dyn_chunk(peer, n, p, &|em, o, len| {
                    let d = em.subview(dst, o, len);
                    let s = em.subview(src, o, len);
                    match me {
                        Some(me) => {
                            let other = em.cmp(CmpOp::Ne, me, peer);
                            em.if_(other, |em| em.get(d, peer, s), |_| {});
                        }
                        None => em.get(d, peer, s),
                    }
                });
            });
            em.barrier(ctx);
            true
        }
        k @ (OpKind::AllToAllV { .. } | OpKind::AllGatherV { .. }) => {
            lower_v_collective(em, &k, f_name, loc, p)?;
            true
        }
        OpKind::AllToAll { ctx, src, dst } => {
            let rows = em.rows(src);
            if rows != p {
                return Err(SpecializeError::CollectiveShape {
                    function: f_name.to_string(),
                    op: "all_to_all".into(),
                    loc: loc.clone().map(Box::new),
                    message: format!(
                        "the buffers have {rows} rows but {} {p} ranks; {}",
                        em.team(),
                        em.team_fix("[NR, M]")
                    ),
                });
            }
            em.barrier(ctx);
            let me = em.rank(ctx);
            em.for_(0, p, |em, qv| {
                let d = em.subview(dst, qv, 1);
                let s = em.subview(src, me, 1);
                em.get(d, qv, s);
            });
            em.barrier(ctx);
            true
        }
        OpKind::ReduceScatter {
            ctx,
            src,
            dst,
            op: r,
        } if em.ty(src).holds_rows_of(&em.ty(dst)) => {
            // The row form: row r of every rank's send window, reduced in rank order, into
            // rank r's one-row receive buffer.
            em.check_team_rows(src, p, "reduce_scatter", f_name, &loc)?;
            em.barrier(ctx);
            let me = em.rank(ctx);
            let zero = em.idx(0);
            em.reduce_block(src, dst, p, me, zero, 1, r);
            em.barrier(ctx);
            true
        }
        OpKind::ReduceScatter {
            ctx,
            src,
            dst,
            op: r,
        } => {
            let (n, blk) = rows(&em.ty(src));
            em.barrier(ctx);
            let me = em.rank(ctx);
            em.dyn_chunk(me, n, p, &|e, off, len| {
                e.blocks(off, len, blk, &|e, o, b| {
                    e.reduce_block(src, dst, p, o, o, b, r)
                });
            });
            em.barrier(ctx);
            true
        }
        OpKind::AllReduce {
            ctx,
            src,
            dst,
            op: r,
            mode,
        } => lower_allreduce(em, [ctx, src, dst], r, mode, p, sig),
        // `lower_block` sends only the ops whose declaration says `collective`.
        k => unreachable!("`{}` is not a collective", k.info().name),
    })
}

/// The expansion of an allreduce of `[ctx, src, dst]` with `r` in `mode` at world size `p`
/// (`sig`: the signal window of ring and two-phase, if any).
fn lower_allreduce(
    em: &mut Em<'_>,
    [ctx, src, dst]: [Value; 3],
    r: ReduceOp,
    mode: AllreduceMode,
    p: u64,
    sig: Option<Value>,
) -> bool {
    let (n, blk) = rows(&em.ty(src));
    em.barrier(ctx);
    match mode {
        AllreduceMode::Mesh => {
            let zero = em.idx(0);
            em.blocks(zero, n, blk, &|e, o, b| {
                e.reduce_block(src, dst, p, o, o, b, r)
            });
        }
        AllreduceMode::TwoPhase => {
            // Phase 1: rank `me` reduces chunk `me` of every rank's `src` into its
            // `dst`. Phase 2: it gets chunk q from rank q's `dst`, once rank q
            // has finished phase 1 (rank q sets slot q of `me`'s signals).
            let me = em.rank(ctx);
            em.dyn_chunk(me, n, p, &|e, off, len| {
                e.blocks(off, len, blk, &|e, o, b| {
                    e.reduce_block(src, dst, p, o, o, b, r)
                });
            });
            match sig {
                Some(sig) => {
                    let mine = em.slot_of(me);
                    em.for_(0, p, |em, qv| {
                        let other = em.cmp(CmpOp::Ne, me, qv);
                        em.if_(other, |e| e.notify(sig, qv, mine, 1), |_| {});
                    })
                }
                None => em.barrier(ctx),
            }
            em.for_(0, p, |em, qv| {
                let other = em.cmp(CmpOp::Ne, me, qv);
                em.if_(
                    other,
                    |e| {
                        let theirs = e.slot_of(qv);
                        if let Some(sig) = sig {
                            e.wait(sig, theirs, 1);
                        }
                        e.dyn_chunk(qv, n, p, &|e, o, len| {
                            let d = e.subview(dst, o, len);
                            e.get(d, qv, d);
                        });
                        if let Some(sig) = sig {
                            // Reset for the next call: rank q sets it again only
                            // after the closing barrier.
                            e.notify(sig, me, theirs, 0);
                        }
                    },
                    |_| {},
                );
            });
        }
        AllreduceMode::Ring if p == 1 => {
            let me = em.rank(ctx);
            em.get(dst, me, src);
        }
        AllreduceMode::Ring => lower_ring(em, [ctx, src, dst], r, (n, blk), p, sig),
    }
    em.barrier(ctx);
    true
}

/// The ring allreduce's steps (P >= 2; `n` elements): P - 1 reduce steps, then P - 1 gather
/// steps, each waiting only for the previous rank's step (on `sig`, or barriers without it);
/// `blk` rows per tile.
fn lower_ring(
    em: &mut Em<'_>,
    [ctx, src, dst]: [Value; 3],
    r: ReduceOp,
    (n, blk): (u64, u64),
    p: u64,
    sig: Option<Value>,
) {
    // Phase 1, step s: rank `me` adds its `src` to the partial sum of chunk
    // `me - s - 1` that `prev` made at its step s - 1. Phase 2, step s: it
    // gets chunk `me - s`, complete, from `prev`'s `dst`. Each step waits
    // only for `prev`'s step before it: `prev` writes the number of steps
    // it has finished into slot 0 of `me`'s signals. (A write into a chunk
    // that `next` has yet to read is ordered after that read by the chain
    // of waits around the ring: docs/collectives.md.)
    let me = em.rank(ctx);
    let prev = em.add_mod(me, p - 1, p);
    let next = em.add_mod(me, 1, p);
    let (slot_in, slot_out) = em.ring_slots(prev);
    // Before a step that reads what `prev` made in its first `k` steps
    // (`k` a run-time index).
    let after = |e: &mut Em<'_>, k: Value| match sig {
        Some(sig) => {
            let k = e.cast_i64(k);
            e.wait_v(sig, slot_in, k)
        }
        None => e.barrier(ctx),
    };
    // After this rank's `k`-th step, whose result `next` reads.
    let done = |e: &mut Em<'_>, k: Value| {
        if let Some(sig) = sig {
            let k = e.cast_i64(k);
            e.notify_v(sig, next, slot_out, k);
        }
    };
    // Reduce step s of chunk `me - s - 1`: step 0 adds to `prev`'s `src`,
    // the later ones to the partial in `prev`'s `dst`.
    let step = |e: &mut Em<'_>, partial: Value, c: Value| {
        e.dyn_chunk(c, n, p, &|e, off, len| {
            e.blocks(off, len, blk, &|e, o, b| {
                let from_prev = e.rload(partial, prev, o, b);
                let mine = e.load(src, o, b);
                let acc = e.tbin(r.bin_op(), from_prev, mine);
                e.store(acc, dst, o);
            });
        });
    };
    let c0 = em.add_mod(me, p - 1, p);
    step(em, src, c0);
    let one = em.idx(1);
    done(em, one);
    em.for_(1, p - 1, |em, s| {
        after(em, s);
        // c = (me + p - 1 - s) % p, with no negative intermediate.
        let pm1 = em.idx(p - 1);
        let k = em.ibin(BinOp::Sub, pm1, s);
        let t = em.ibin(BinOp::Add, me, k);
        let pv = em.idx(p);
        let c = em.ibin(BinOp::Rem, t, pv);
        step(em, dst, c);
        let s1 = em.ibin(BinOp::Add, s, one);
        done(em, s1);
    });
    // Gather step s: chunk `me - s`, complete, from `prev`'s `dst`.
    em.for_(0, p - 1, |em, s| {
        let pm1 = em.idx(p - 1);
        let k = em.ibin(BinOp::Add, s, pm1);
        after(em, k);
        let pv = em.idx(p);
        let back = em.ibin(BinOp::Sub, pv, s);
        let t = em.ibin(BinOp::Add, me, back);
        let c = em.ibin(BinOp::Rem, t, pv);
        em.dyn_chunk(c, n, p, &|e, off, len| {
            let d = e.subview(dst, off, len);
            e.get(d, prev, d);
        });
        // Counts p .. 2p - 3: not after the last gather step.
        let two = em.idx(2);
        let s2 = em.ibin(BinOp::Add, s, two);
        let more = em.cmp(CmpOp::Lt, s2, pv);
        em.if_(
            more,
            |e| {
                let pv = e.idx(p);
                let k = e.ibin(BinOp::Add, pv, s);
                done(e, k)
            },
            |_| {},
        );
    });
    if let Some(sig) = sig {
        // All 2P - 3 of `prev`'s counts have arrived: reset for the next
        // call (`prev` writes again only after the closing barrier).
        em.notify(sig, me, slot_in, 0);
    }
}

/// Replaces every built-in collective of `f` by its expansion for world size `p`. `signals` is
/// the signal window [`add_signal_windows`] gave `f` (a `window<[P], i64>` parameter, zero on
/// entry and left zero on return); without one, ring and two-phase allreduce synchronise
/// their steps with barriers. Returns the layouts of `f`'s rank groups (grids and splits, each
/// once, sorted), which reports use to name a rank's place in them.
///
/// # Errors
/// [`SpecializeError::CollectiveShape`] when an all-to-all buffer does not have P rows.
pub fn lower_collectives(
    f: &mut Function,
    p: u64,
    signals: Option<Value>,
) -> Result<Vec<RankLayout>, SpecializeError> {
    let consts = int_consts(f);
    let cx = Lowering {
        f_name: &f.name,
        p,
        sig: signals,
        groups: groups::group_defs(f, p, &consts)?,
        consts,
    };
    let mut layouts: Vec<RankLayout> = vec![];
    for g in cx.groups.values() {
        let l = g.layout();
        if !layouts.contains(&l) {
            layouts.push(l);
        }
    }
    layouts.sort();
    let mut body = std::mem::take(&mut f.body);
    let mut cur = Cursor::new(
        std::mem::take(&mut f.values),
        std::mem::take(&mut f.ops),
        None,
    );
    let r = lower_block(&cx, &mut cur, &mut body);
    (_, f.values, f.ops) = cur.finish();
    f.body = body;
    r.map(|()| layouts)
}

/// The integer constants of `f`, by their values.
fn int_consts(f: &Function) -> SecondaryMap<Value, i128> {
    let mut consts = SecondaryMap::new();
    f.walk(&mut |op| {
        if let (OpKind::Const(eagle_ir::Const::Int(c)), Some(r)) = (&op.kind, op.result) {
            consts.insert(r, *c);
        }
    });
    consts
}

/// Checks, once the dims are bound, the relation `docs/collectives.md` gives every built-in
/// collective's buffers: the receive buffer has the send buffer's shape and dtype. The
/// verifier checks it on the generic IR wherever both sides are constants or the same symbol;
/// this catches what only binding shows (a constant on one side and a symbol on the other:
/// `[1, 8]` against `[NR, 8]` at P = 2), which would otherwise run and fill part of the
/// buffer. `generic` is `f`'s value-type table before binding, for the message.
///
/// # Errors
/// [`SpecializeError::CollectiveShape`] naming the op's source line, both buffers as bound and
/// as declared, P and the fix.
pub fn check_bound_buffers(f: &Function, generic: &[Type], p: u64) -> Result<(), SpecializeError> {
    let mut err = None;
    f.walk(&mut |op| {
        if err.is_some() {
            return;
        }
        let (OpKind::Broadcast { ctx, src, dst, .. }
        | OpKind::AllGather { ctx, src, dst, .. }
        | OpKind::AllToAll { ctx, src, dst, .. }
        | OpKind::ReduceScatter { ctx, src, dst, .. }
        | OpKind::AllReduce { ctx, src, dst, .. }) = &op.kind
        else {
            return;
        };
        // Within a group (a context that is not the kernel's parameter) the row forms have one
        // row per group rank, checked when the group is lowered (`Em::check_team_rows`).
        let world = f.params.iter().any(|q| q.value == *ctx);
        let (src, dst) = (*src, *dst);
        let (ts, td) = (f.ty(src), f.ty(dst));
        if ts.shape() == td.shape() && ts.dtype() == td.dtype() {
            return;
        }
        // The row forms: an allgather into `[P, M, ...]` from `[1, M, ...]`, a reduce-scatter
        // from `[P, M, ...]` into `[1, M, ...]`.
        let gather = matches!(op.kind, OpKind::AllGather { .. });
        let scatter = matches!(op.kind, OpKind::ReduceScatter { .. });
        let (rows, row, all) = if gather { (dst, src, td) } else { (src, dst, ts) };
        let rows_of_p = !world
            || all
                .shape()
                .is_some_and(|d| d.0.first().and_then(|x| x.as_const()) == Some(p));
        let row_form = |all: &Type, one: &Type| all.holds_rows_of(one);
        if (gather || scatter) && row_form(f.ty(rows), f.ty(row)) && rows_of_p {
            return;
        }
        let declared_rows = match (generic.get(row.0 as usize), generic.get(rows.0 as usize)) {
            (Some(g1), Some(gp)) => row_form(gp, g1),
            _ => false,
        };
        if (gather || scatter) && declared_rows {
            let (name, side, form) = if gather {
                ("allgather", "receive", "an allgather of rows")
            } else {
                ("reduce_scatter", "send", "a reduce-scatter into one row")
            };
            err = Some(SpecializeError::CollectiveShape {
                function: f.name.clone(),
                op: name.into(),
                loc: op.loc.clone().map(Box::new),
                message: format!("at world size P = {p} the {side} buffer is `{}` but {form} takes one row per rank (`{}` each): declare it `[NR, ...]` with `NR = dynamic!(\"NR\")`", f.ty(rows), f.ty(row)),
            });
            return;
        }
        let name = |v: Value| {
            f.params
                .iter()
                .find(|q| q.value == v)
                .map_or(String::new(), |q| format!(" `{}`", q.name))
        };
        let declared = |v: Value, t: &Type| match generic.get(v.0 as usize) {
            Some(g) if g != t => format!(" (declared `{g}`)"),
            _ => String::new(),
        };
        err = Some(SpecializeError::CollectiveShape {
            function: f.name.clone(),
            op: op.kind.info().name.to_string(),
            loc: op.loc.clone().map(Box::new),
            message: format!(
                "at world size P = {p} the send buffer{} is `{ts}`{} but the receive buffer{} is `{td}`{}; a collective's receive buffer has the send buffer's shape and dtype (docs/collectives.md): declare both with the same dims, the same `dynamic!` symbol or the same constant (for example both `[NR, ...]`)",
                name(src),
                declared(src, ts),
                name(dst),
                declared(dst, td),
            ),
        });
    });
    err.map_or(Ok(()), Err)
}

/// The name of the parameter [`add_signal_windows`] adds.
pub const SIGNALS_PARAM: &str = "collective_signals";

/// Whether `b` runs an allreduce whose lowering synchronises with signals (ring, two-phase),
/// or splits the world into groups (whose barriers are signals).
fn needs_signals(f: &Function) -> bool {
    let mut yes = false;
    f.walk(&mut |op| {
        yes |= matches!(
            op.kind,
            OpKind::AllReduce {
                mode: AllreduceMode::Ring | AllreduceMode::TwoPhase,
                ..
            } | OpKind::Group { .. }
                | OpKind::Split { .. }
        )
    });
    yes
}

/// The device functions and compute kernels that need the signal window: those whose own
/// body [`needs_signals`], and, to a fixed point, those that call one of them.
fn signal_users(m: &Module) -> std::collections::HashSet<String> {
    let kernel = |f: &Function| matches!(f.level, Level::Device | Level::Compute);
    let mut set: std::collections::HashSet<String> = m
        .functions
        .iter()
        .filter(|f| kernel(f) && needs_signals(f))
        .map(|f| f.name.clone())
        .collect();
    loop {
        let before = set.len();
        for f in m.functions.iter().filter(|f| kernel(f)) {
            let mut calls = false;
            f.walk(&mut |op| {
                calls |= matches!(&op.kind, OpKind::Call { callee, .. } if set.contains(callee))
            });
            if calls {
                set.insert(f.name.clone());
            }
        }
        if set.len() == before {
            return set;
        }
    }
}

/// Whether a device function of `m` splits the world into groups.
fn has_groups(m: &Module) -> bool {
    let mut yes = false;
    for f in &m.functions {
        f.walk(&mut |op| yes |= matches!(op.kind, OpKind::Group { .. } | OpKind::Split { .. }));
    }
    yes
}

/// For world size `p` >= 2, gives every device function that runs a ring or two-phase
/// allreduce or has a rank group a last parameter [`SIGNALS_PARAM`] of type
/// `window<[p], i64>` (`[4p]` when the module has a group: the slots of `groups.rs`); so does
/// every compute kernel that does, and every device function or compute kernel that calls one
/// of those (passing its own signal window to the call); and every host
/// function that dispatches one a window buffer for it: one `alloc_window_buffer` per launch
/// (zeroed, like every window buffer), inserted before the first top-level op that holds such
/// a dispatch (after the user's own buffers, so their window numbers stay), and a `window` of
/// it passed to each such dispatch. Returns each device function's signal parameter, for
/// [`lower_collectives`].
pub fn add_signal_windows(m: &mut Module, p: u64) -> HashMap<String, Value> {
    let mut sig = HashMap::new();
    if p < 2 {
        return sig;
    }
    let slots = if has_groups(m) { 4 * p } else { p };
    let shape = Shape(vec![Dim::Const(slots)]);
    let needing = signal_users(m);
    for f in &mut m.functions {
        if needing.contains(&f.name) {
            let value = f.values.push(Type::Window(shape.clone(), DType::I64));
            f.params.push(Param {
                name: SIGNALS_PARAM.into(),
                value,
                out: false,
            });
            sig.insert(f.name.clone(), value);
        }
    }
    if sig.is_empty() {
        return sig;
    }
    // A call of a kernel that takes the window passes the caller's.
    for f in &mut m.functions {
        let Some(&own) = sig.get(&f.name) else {
            continue;
        };
        for id in f.listed() {
            if let OpKind::Call { callee, args } = &mut f.ops[id].kind {
                if sig.contains_key(callee.as_str()) {
                    args.push(own);
                }
            }
        }
    }
    let launches =
        |o: &Op| matches!(&o.kind, OpKind::Dispatch { callee, .. } if sig.contains_key(callee));
    for f in m.functions.iter_mut().filter(|f| f.level == Level::Host) {
        let Some(first) = f.body.ops.iter().position(|&id| {
            let op = &f.ops[id];
            launches(op)
                || op
                    .kind
                    .blocks()
                    .into_iter()
                    .any(|b| b.any(&f.ops, &mut |o| launches(o)))
        }) else {
            continue;
        };
        let buf = f.values.push(Type::WinBuf(shape.clone(), DType::I64));
        let loc = f.ops[f.body.ops[first]].loc.clone();
        let alloc = f.ops.push(Op {
            result: Some(buf),
            kind: OpKind::AllocWindowBuffer,
            loc,
        });
        f.body.ops.insert(first, alloc);
        let values = &mut f.values;
        f.body.rewrite(&mut f.ops, &mut |arena, b| {
            for id in std::mem::take(&mut b.ops) {
                if let OpKind::Dispatch { callee, args, .. } = &mut arena[id].kind {
                    if sig.contains_key(callee) {
                        let w = values.push(Type::Window(shape.clone(), DType::I64));
                        args.push(w);
                        let loc = arena[id].loc.clone();
                        b.ops.push(arena.push(Op {
                            result: Some(w),
                            kind: OpKind::Window(buf),
                            loc,
                        }));
                    }
                }
                b.ops.push(id);
            }
        });
    }
    sig
}
