//! [`Em`], the emitter the expansions write with: one op per call, in nested blocks, every op
//! keeping the collective's source location; within a group ([`super::groups`]) its rank,
//! peers, signal slots and barriers are the group's.

use super::groups::GroupAt;
use crate::error::SpecializeError;
use eagle_ir::Cursor;
use eagle_ir::{
    BinOp, Block, CmpOp, Const, DType, NotifyOp, OpKind, ReduceOp, Shape, Trap, Type, Value,
};

pub(super) struct Em<'a> {
    /// Where the expansion goes, at the source location of the collective being lowered:
    /// every op it becomes keeps it.
    pub(super) cur: &'a mut Cursor,
    /// The group the collective spans (its ranks are group ranks), or `None` for the world.
    pub(super) group: Option<GroupAt>,
}

impl Em<'_> {
    pub(super) fn val(&mut self, t: Type) -> Value {
        self.cur.value(t)
    }
    /// Appends an op that defines a value of type `t`; returns the value.
    pub(super) fn push(&mut self, kind: OpKind, t: Type) -> Value {
        self.cur.push(kind, t)
    }
    /// Appends an op without a result.
    pub(super) fn push_void(&mut self, kind: OpKind) {
        self.cur.push_void(kind);
    }
    pub(super) fn append(&mut self, kind: OpKind, result: Option<Value>) {
        self.cur.append(kind, result);
    }
    pub(super) fn idx(&mut self, c: u64) -> Value {
        self.push(
            OpKind::Const(Const::Int(c as i128)),
            Type::Scalar(DType::Index),
        )
    }
    pub(super) fn ibin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        self.push(OpKind::Binary(op, a, b), Type::Scalar(DType::Index))
    }
    /// The extent of `v`'s dim 0 once the dims are bound (0 where it is not a constant).
    pub(super) fn rows(&self, v: Value) -> u64 {
        self.ty(v)
            .shape()
            .and_then(|s| s.0.first()?.as_const())
            .unwrap_or(0)
    }
    /// This rank's rank in the collective's team: `rank ctx` in the world, the group rank
    /// (computed once, before the expansion) in a group.
    pub(super) fn rank(&mut self, ctx: Value) -> Value {
        match &self.group {
            Some(g) => g.me,
            None => self.push(OpKind::Rank(ctx), Type::Scalar(DType::Index)),
        }
    }
    /// Every rank of the team arrives before any leaves: `barrier ctx` in the world, a
    /// barrier of signals among the group's ranks in a group ([`GroupAt::barrier`]).
    pub(super) fn barrier(&mut self, ctx: Value) {
        match self.group.clone() {
            Some(g) => g.barrier(self),
            None => self.push_void(OpKind::Barrier(ctx)),
        }
    }
    /// The world rank of the team's rank `q`: `q` itself in the world (no op), `base + q *
    /// stride` in a group.
    pub(super) fn world_of(&mut self, q: Value) -> Value {
        match self.group.clone() {
            Some(g) => g.world_of(self, q),
            None => q,
        }
    }
    /// Who the collective spans, for messages: `the world has` or `the group has`.
    pub(super) fn team(&self) -> &'static str {
        if self.group.is_some() {
            "the group has"
        } else {
            "the world has"
        }
    }
    /// The fix for buffers of the wrong row count (`[NR]`-shaped in the world).
    pub(super) fn team_fix(&self, shape: &str) -> String {
        if let Some(g) = &self.group {
            let rest = shape.trim_start_matches("[NR").trim_end_matches(']');
            format!("give them shape [G{rest}] with `G` the group's rank count, here {}: the grid's extent at the group's axis (`TP` for `group(ctx, [{{ NR / TP }}, TP], 1)` or `split(ctx, rank(ctx) / TP, ..)`, `{{ NR / TP }}` for axis 0 or `split(ctx, rank(ctx) % TP, ..)`)", g.size())
        } else {
            format!("give them shape {shape} with `NR = dynamic!(\"NR\")`")
        }
    }
    /// Within a group, a row form's buffer of rows (`v`) has one row per group rank (the
    /// world's row forms are checked before lowering: `check_bound_buffers`).
    ///
    /// # Errors
    /// [`SpecializeError::CollectiveShape`] naming the rows, the group's size and the fix.
    pub(super) fn check_team_rows(
        &self,
        v: Value,
        size: u64,
        name: &str,
        f_name: &str,
        loc: &Option<eagle_ir::Loc>,
    ) -> Result<(), SpecializeError> {
        let rows = self.rows(v);
        if self.group.is_none() || rows == size {
            return Ok(());
        }
        Err(SpecializeError::CollectiveShape {
            function: f_name.to_string(),
            op: name.into(),
            loc: loc.clone().map(Box::new),
            message: format!(
                "the buffer of rows has {rows} rows but {} {size} ranks; {}",
                self.team(),
                self.team_fix("[NR, M]")
            ),
        })
    }
    /// The ring allreduce's signal slots: the one `prev` (a team rank) sets here, and the one
    /// this rank sets on the next rank. Slot 0 for both in the world; in a group, `P + ` the
    /// writer's world rank ([`Em::slot_of`]).
    pub(super) fn ring_slots(&mut self, prev: Value) -> (Value, Value) {
        match &self.group {
            Some(g) => {
                let me = g.me;
                (self.slot_of(prev), self.slot_of(me))
            }
            None => {
                let z = self.idx(0);
                (z, z)
            }
        }
    }
    /// The signal slot that team rank `writer` sets on its peers in a two-phase allreduce:
    /// `writer` in the world; in a group, `P + ` its world rank (each allreduce resets the
    /// slots it waited on before its closing barrier, so allreduces of different groups that
    /// share two ranks, one after the other, never see each other's values).
    pub(super) fn slot_of(&mut self, writer: Value) -> Value {
        match self.group.clone() {
            Some(g) => {
                let w = g.world_of(self, writer);
                let p = self.idx(g.world_size);
                self.ibin(BinOp::Add, p, w)
            }
            None => writer,
        }
    }
    /// Stops the rank with `kind`'s message (`a`, `b` filled in) when `a cmp b`.
    pub(super) fn trap_if(&mut self, cmp: CmpOp, a: Value, b: Value, kind: Trap) {
        let cond = self.cmp(cmp, a, b);
        self.push_void(OpKind::TrapIf { cond, a, b, kind });
    }
    /// Stops the rank with `kind` unless the index `q` is below `n`, compared as unsigned (a
    /// negative index, or one of `2^63` or more from a `u64`, is past `n` too); the message
    /// shows `q` and `n` as indices.
    pub(super) fn trap_unless_below(&mut self, q: Value, n: u64, kind: Trap) {
        let u = self.push(OpKind::Cast(q), Type::Scalar(DType::U64));
        let nu = self.push(
            OpKind::Const(Const::Int(i128::from(n))),
            Type::Scalar(DType::U64),
        );
        let cond = self.cmp(CmpOp::Ge, u, nu);
        let b = self.idx(n);
        self.push_void(OpKind::TrapIf {
            cond,
            a: q,
            b,
            kind,
        });
    }
    pub(super) fn i64c(&mut self, c: u64) -> Value {
        self.push(
            OpKind::Const(Const::Int(i128::from(c))),
            Type::Scalar(DType::I64),
        )
    }
    /// `notify(sig, peer, [slot], value, set)`: every signal slot has one writer besides its
    /// owner's reset, so `Set` suffices (no atomic add across devices).
    pub(super) fn notify(&mut self, sig: Value, peer: Value, slot: Value, value: u64) {
        let value = self.i64c(value);
        self.notify_v(sig, peer, slot, value);
    }
    /// `wait(sig, [slot]) >= value`.
    pub(super) fn wait(&mut self, sig: Value, slot: Value, value: u64) {
        let expected = self.i64c(value);
        self.wait_v(sig, slot, expected);
    }
    /// [`Em::wait`] for a run-time `i64` value.
    pub(super) fn wait_v(&mut self, sig: Value, slot: Value, expected: Value) {
        self.push_void(OpKind::Wait {
            signal: sig,
            offsets: vec![slot],
            expected,
            cmp: CmpOp::Ge,
        });
    }
    /// [`Em::notify`] for a run-time `i64` value.
    pub(super) fn notify_v(&mut self, sig: Value, peer: Value, slot: Value, value: Value) {
        let peer = self.world_of(peer);
        self.push_void(OpKind::Notify {
            signal: sig,
            peer,
            offsets: vec![slot],
            value,
            op: NotifyOp::Set,
        });
    }
    /// The `index` value `v` as an `i64` (a signal's count).
    pub(super) fn cast_i64(&mut self, v: Value) -> Value {
        self.push(OpKind::Cast(v), Type::Scalar(DType::I64))
    }
    /// `(a + k) % p` for an index `a` and constants `k`, `p`.
    pub(super) fn add_mod(&mut self, a: Value, k: u64, p: u64) -> Value {
        let kv = self.idx(k);
        let pv = self.idx(p);
        let t = self.ibin(BinOp::Add, a, kv);
        self.ibin(BinOp::Rem, t, pv)
    }
    pub(super) fn ty(&self, v: Value) -> Type {
        self.cur.ty(v).clone()
    }
    pub(super) fn subview(&mut self, src: Value, off: Value, len: u64) -> Value {
        let t = match self.ty(src) {
            Type::Tensor(s, d) => {
                let mut dims = s.0.clone();
                dims[0] = eagle_ir::Dim::Const(len);
                Type::Tensor(Shape(dims), d)
            }
            Type::Window(s, d) => {
                let mut dims = s.0.clone();
                dims[0] = eagle_ir::Dim::Const(len);
                Type::Window(Shape(dims), d)
            }
            t => t,
        };
        self.push(OpKind::Subview { src, offset: off }, t)
    }
    /// The tile of `len` rows of buffer `v` (its trailing dims whole).
    pub(super) fn tile(&self, v: Value, len: u64) -> Type {
        let t = self.ty(v);
        let mut dims = vec![eagle_ir::Dim::Const(len)];
        dims.extend(t.shape().map(|s| s.0[1..].to_vec()).unwrap_or_default());
        Type::Tile(Shape(dims), t.dtype().unwrap_or(DType::F32))
    }
    /// Offsets of row `off` of buffer `v`: `[off, 0, ...]`.
    pub(super) fn row_offsets(&mut self, v: Value, off: Value) -> Vec<Value> {
        let rank = self.ty(v).shape().map_or(1, Shape::rank);
        let mut o = vec![off];
        for _ in 1..rank {
            let z = self.idx(0);
            o.push(z);
        }
        o
    }
    pub(super) fn rload(&mut self, win: Value, peer: Value, off: Value, len: u64) -> Value {
        let peer = self.world_of(peer);
        let t = self.tile(win, len);
        let offsets = self.row_offsets(win, off);
        self.push(
            OpKind::RemoteLoad {
                src: win,
                peer,
                offsets,
            },
            t,
        )
    }
    pub(super) fn load(&mut self, mem: Value, off: Value, len: u64) -> Value {
        let t = self.tile(mem, len);
        let offsets = self.row_offsets(mem, off);
        self.push(OpKind::Load { src: mem, offsets }, t)
    }
    pub(super) fn store(&mut self, tile: Value, mem: Value, off: Value) {
        let offsets = self.row_offsets(mem, off);
        self.push_void(OpKind::Store {
            value: tile,
            dst: mem,
            offsets,
        });
    }
    pub(super) fn tbin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        let t = self.ty(a);
        self.push(OpKind::Binary(op, a, b), t)
    }
    pub(super) fn get(&mut self, dst: Value, peer: Value, src: Value) {
        let peer = self.world_of(peer);
        self.push_void(OpKind::Get { dst, peer, src });
    }
    pub(super) fn put(&mut self, dst: Value, peer: Value, src: Value) {
        let peer = self.world_of(peer);
        self.push_void(OpKind::Put { dst, peer, src });
    }

    pub(super) fn nested(&mut self, body: impl FnOnce(&mut Self)) -> Block {
        self.cur.open();
        body(self);
        self.cur.close()
    }
    pub(super) fn for_(&mut self, lo: u64, hi: u64, body: impl FnOnce(&mut Self, Value)) {
        let (l, h) = (self.idx(lo), self.idx(hi));
        let var = self.val(Type::Scalar(DType::Index));
        let body = self.nested(|e| body(e, var));
        self.push_void(OpKind::For {
            var,
            lo: l,
            hi: h,
            body,
        });
    }
    pub(super) fn if_(
        &mut self,
        cond: Value,
        then_b: impl FnOnce(&mut Self),
        else_b: impl FnOnce(&mut Self),
    ) {
        let then_body = self.nested(then_b);
        let else_body = self.nested(else_b);
        self.push_void(OpKind::If {
            cond,
            then_body,
            else_body,
        });
    }
    /// `for var in lo..hi` with run-time bounds.
    pub(super) fn for_v(&mut self, lo: Value, hi: Value, body: impl FnOnce(&mut Self, Value)) {
        let var = self.val(Type::Scalar(DType::Index));
        let body = self.nested(|e| body(e, var));
        self.push_void(OpKind::For { var, lo, hi, body });
    }
    /// A variable of type `index` holding `init`.
    pub(super) fn var(&mut self, init: Value) -> Value {
        let t = Type::Ref(Box::new(Type::Scalar(DType::Index)));
        self.push(OpKind::Var(init), t)
    }
    pub(super) fn read(&mut self, var: Value) -> Value {
        self.push(OpKind::Read(var), Type::Scalar(DType::Index))
    }
    pub(super) fn write(&mut self, var: Value, x: Value) {
        self.push_void(OpKind::Write(var, x));
    }
    /// Element `i` of rank `peer`'s 1-D window `win`, of the window's dtype.
    pub(super) fn remote_elem(&mut self, win: Value, peer: Value, i: Value) -> Value {
        let d = self.ty(win).dtype().unwrap_or(DType::U64);
        let t = self.rload(win, peer, i, 1);
        self.push(
            OpKind::Tile(
                eagle_ir::TileOp::Reduce(ReduceOp::Sum, eagle_ir::tile::Axis::All),
                vec![t],
            ),
            Type::Scalar(d),
        )
    }
    pub(super) fn cmp(&mut self, op: CmpOp, a: Value, b: Value) -> Value {
        self.push(OpKind::Cmp(op, a, b), Type::Scalar(DType::Bool))
    }

    /// Runs `body(offset, len)` for the chunk `c` (a run-time rank expression) of `n` over `p`:
    /// `offset = c * q + min(c, n % p)`, and a branch per static length.
    pub(super) fn dyn_chunk(
        &mut self,
        c: Value,
        n: u64,
        p: u64,
        body: &dyn Fn(&mut Self, Value, u64),
    ) {
        let (q, r) = (n / p, n % p);
        let qv = self.idx(q);
        let base = self.ibin(BinOp::Mul, c, qv);
        if r == 0 {
            if q > 0 {
                body(self, base, q);
            }
            return;
        }
        let rv = self.idx(r);
        let extra = self.ibin(BinOp::Min, c, rv);
        let off = self.ibin(BinOp::Add, base, extra);
        let long = self.cmp(CmpOp::Lt, c, rv);
        self.if_(
            long,
            |e| body(e, off, q + 1),
            |e| {
                if q > 0 {
                    body(e, off, q)
                }
            },
        );
    }

    /// Runs `body(offset, len)` over rows `[off, off + len)` in tiles of `block` rows (at
    /// least 1).
    pub(super) fn blocks(
        &mut self,
        off: Value,
        len: u64,
        block: u64,
        body: &dyn Fn(&mut Self, Value, u64),
    ) {
        let block = block.max(1);
        let nb = len / block;
        if nb == 1 {
            body(self, off, block);
        } else if nb > 1 {
            self.for_(0, nb, |e, i| {
                let b = e.idx(block);
                let o = e.ibin(BinOp::Mul, i, b);
                let abs = e.ibin(BinOp::Add, off, o);
                body(e, abs, block);
            });
        }
        let tail = len % block;
        if tail > 0 && nb == 0 {
            body(self, off, tail);
        } else if tail > 0 {
            let t = self.idx(nb * block);
            let abs = self.ibin(BinOp::Add, off, t);
            body(self, abs, tail);
        }
    }

    /// `dst[dst_off..dst_off+len] = ((src_0 op src_1) op ...) op src_(p-1)`, rows
    /// `off..off+len` of every rank's `src` folded left to right in rank order: a loop over the ranks with the partial
    /// in a tile variable, so the IR does not grow with `p`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce_block(
        &mut self,
        src: Value,
        dst: Value,
        p: u64,
        off: Value,
        dst_off: Value,
        len: u64,
        op: ReduceOp,
    ) {
        let zero = self.idx(0);
        let first = self.rload(src, zero, off, len);
        if p == 1 {
            self.store(first, dst, dst_off);
            return;
        }
        let t = self.ty(first);
        let acc = self.push(OpKind::Var(first), Type::Ref(Box::new(t.clone())));
        self.for_(1, p, |e, q| {
            let cur = e.push(OpKind::Read(acc), t.clone());
            let x = e.rload(src, q, off, len);
            let y = e.tbin(op.bin_op(), cur, x);
            e.push_void(OpKind::Write(acc, y));
        });
        let r = self.push(OpKind::Read(acc), t);
        self.store(r, dst, dst_off);
    }
}
