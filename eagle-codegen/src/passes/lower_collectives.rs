//! Lowering of built-in collectives into eagle IR primitives (barrier, get, remote_load,
//! load, store, elementwise ops, `for`, `if`), once the world size P is known.
//!
//! Buffers of any rank `[D0, D1, ...]` are cut along dim 0 into P contiguous chunks of rows,
//! the first `D0 % P` one row longer (the same rule as the rank partition of the multi-GPU
//! seed; a flat `[N]` buffer is N rows of one element). Large chunks are processed in tiles
//! of about [`BLOCK`] elements (whole rows, at least one). Every reduction is a left fold in a fixed rank
//! order, documented per mode in `docs/collectives.md`.

use crate::error::SpecializeError;
use eagle_ir::{
    AllreduceMode, BinOp, Block, CmpOp, Const, DType, Function, Op, OpKind, ReduceOp, Shape, Type,
    Value,
};

/// Elements per tile in lowered reductions.
pub const BLOCK: u64 = 1024;

/// Offset and length of chunk `c` of `n` elements over `p` ranks.
pub fn chunk(n: u64, p: u64, c: u64) -> (u64, u64) {
    let (q, r) = (n / p, n % p);
    (c * q + c.min(r), q + u64::from(c < r))
}

struct Em<'a> {
    values: &'a mut Vec<Type>,
    blocks: Vec<Vec<Op>>,
    /// The source location of the collective being lowered: every op it becomes keeps it.
    loc: Option<eagle_ir::Loc>,
}

impl Em<'_> {
    fn val(&mut self, t: Type) -> Value {
        self.values.push(t);
        Value(self.values.len() as u32 - 1)
    }
    /// Appends an op that defines a value of type `t`; returns the value.
    fn push(&mut self, kind: OpKind, t: Type) -> Value {
        let result = self.val(t);
        self.append(kind, Some(result));
        result
    }
    /// Appends an op without a result.
    fn push_void(&mut self, kind: OpKind) {
        self.append(kind, None);
    }
    fn append(&mut self, kind: OpKind, result: Option<Value>) {
        if let Some(b) = self.blocks.last_mut() {
            b.push(Op {
                result,
                kind,
                loc: self.loc.clone(),
            });
        }
    }
    fn idx(&mut self, c: u64) -> Value {
        self.push(
            OpKind::Const(Const::Int(c as i128)),
            Type::Scalar(DType::Index),
        )
    }
    fn ibin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        self.push(OpKind::Binary(op, a, b), Type::Scalar(DType::Index))
    }
    fn rank(&mut self, ctx: Value) -> Value {
        self.push(OpKind::Rank(ctx), Type::Scalar(DType::Index))
    }
    fn barrier(&mut self, ctx: Value) {
        self.push_void(OpKind::Barrier(ctx));
    }
    fn ty(&self, v: Value) -> Type {
        self.values[v.index()].clone()
    }
    fn subview(&mut self, src: Value, off: Value, len: u64) -> Value {
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
    fn tile(&self, v: Value, len: u64) -> Type {
        let t = self.ty(v);
        let mut dims = vec![eagle_ir::Dim::Const(len)];
        dims.extend(t.shape().map(|s| s.0[1..].to_vec()).unwrap_or_default());
        Type::Tile(Shape(dims), t.dtype().unwrap_or(DType::F32))
    }
    /// Offsets of row `off` of buffer `v`: `[off, 0, ...]`.
    fn row_offsets(&mut self, v: Value, off: Value) -> Vec<Value> {
        let rank = self.ty(v).shape().map_or(1, Shape::rank);
        let mut o = vec![off];
        for _ in 1..rank {
            let z = self.idx(0);
            o.push(z);
        }
        o
    }
    fn rload(&mut self, win: Value, peer: Value, off: Value, len: u64) -> Value {
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
    fn load(&mut self, mem: Value, off: Value, len: u64) -> Value {
        let t = self.tile(mem, len);
        let offsets = self.row_offsets(mem, off);
        self.push(OpKind::Load { src: mem, offsets }, t)
    }
    fn store(&mut self, tile: Value, mem: Value, off: Value) {
        let offsets = self.row_offsets(mem, off);
        self.push_void(OpKind::Store {
            value: tile,
            dst: mem,
            offsets,
        });
    }
    fn tbin(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        let t = self.ty(a);
        self.push(OpKind::Binary(op, a, b), t)
    }
    fn get(&mut self, dst: Value, peer: Value, src: Value) {
        self.push_void(OpKind::Get { dst, peer, src });
    }
    fn nested(&mut self, body: impl FnOnce(&mut Self)) -> Block {
        self.blocks.push(vec![]);
        body(self);
        Block {
            ops: self.blocks.pop().unwrap_or_default(),
        }
    }
    fn for_(&mut self, lo: u64, hi: u64, body: impl FnOnce(&mut Self, Value)) {
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
    fn if_(&mut self, cond: Value, then_b: impl FnOnce(&mut Self), else_b: impl FnOnce(&mut Self)) {
        let then_body = self.nested(then_b);
        let else_body = self.nested(else_b);
        self.push_void(OpKind::If {
            cond,
            then_body,
            else_body,
        });
    }
    fn cmp(&mut self, op: CmpOp, a: Value, b: Value) -> Value {
        self.push(OpKind::Cmp(op, a, b), Type::Scalar(DType::Bool))
    }

    /// Runs `body(offset, len)` for the chunk `c` (a run-time rank expression) of `n` over `p`:
    /// `offset = c * q + min(c, n % p)`, and a branch per static length.
    fn dyn_chunk(&mut self, c: Value, n: u64, p: u64, body: &dyn Fn(&mut Self, Value, u64)) {
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
    fn blocks(&mut self, off: Value, len: u64, block: u64, body: &dyn Fn(&mut Self, Value, u64)) {
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

    /// `dst[off..off+len] = fold(op, src of ranks `order`)`.
    fn reduce_block(
        &mut self,
        src: Value,
        dst: Value,
        order: &[Value],
        off: Value,
        len: u64,
        op: ReduceOp,
    ) {
        let mut acc = self.rload(src, order[0], off, len);
        for &p in &order[1..] {
            let t = self.rload(src, p, off, len);
            acc = self.tbin(op.bin_op(), acc, t);
        }
        self.store(acc, dst, off);
    }
}

/// The rows (dim 0) of a collective's buffer, and the rows per tile of about [`BLOCK`]
/// elements.
fn rows(t: &Type) -> (u64, u64) {
    let s = t.shape().and_then(Shape::consts).unwrap_or_default();
    let d0 = s.first().copied().unwrap_or(0);
    let row: u64 = s.iter().skip(1).product();
    (d0, (BLOCK / row.max(1)).max(1))
}

fn lower_block(
    f_name: &str,
    values: &mut Vec<Type>,
    b: &mut Block,
    p: u64,
) -> Result<(), SpecializeError> {
    let ops = std::mem::take(&mut b.ops);
    let mut out = Vec::with_capacity(ops.len());
    for mut op in ops {
        let mut em = Em {
            values: &mut *values,
            blocks: vec![vec![]],
            loc: op.loc.clone(),
        };
        let lowered = match op.kind.clone() {
            OpKind::Broadcast {
                ctx,
                src,
                dst,
                root,
            } => {
                em.barrier(ctx);
                em.get(dst, root, src);
                em.barrier(ctx);
                true
            }
            OpKind::AllGather { ctx, src, dst } => {
                let (n, _) = rows(&em.ty(src));
                em.barrier(ctx);
                for q in 0..p {
                    let (off, len) = chunk(n, p, q);
                    if len == 0 {
                        continue;
                    }
                    let o = em.idx(off);
                    let peer = em.idx(q);
                    let d = em.subview(dst, o, len);
                    let s = em.subview(src, o, len);
                    em.get(d, peer, s);
                }
                em.barrier(ctx);
                true
            }
            OpKind::AllToAll { ctx, src, dst } => {
                let rows = em
                    .ty(src)
                    .shape()
                    .and_then(|s| s.0.first()?.as_const())
                    .unwrap_or(0);
                if rows != p {
                    return Err(SpecializeError::CollectiveShape {
                        function: f_name.to_string(),
                        op: "all_to_all".into(),
                        loc: op.loc.clone().map(Box::new),
                        message: format!("the buffers have {rows} rows but the world has {p} ranks; give them shape [NR, M] with `NR = dynamic!(\"NR\")`"),
                    });
                }
                em.barrier(ctx);
                let me = em.rank(ctx);
                for q in 0..p {
                    let qv = em.idx(q);
                    let d = em.subview(dst, qv, 1);
                    let s = em.subview(src, me, 1);
                    em.get(d, qv, s);
                }
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
                let order: Vec<Value> = (0..p).map(|q| em.idx(q)).collect();
                em.dyn_chunk(me, n, p, &|e, off, len| {
                    e.blocks(off, len, blk, &|e, o, b| {
                        e.reduce_block(src, dst, &order, o, b, r)
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
            } => {
                let (n, blk) = rows(&em.ty(src));
                em.barrier(ctx);
                let order: Vec<Value> = (0..p).map(|q| em.idx(q)).collect();
                match mode {
                    AllreduceMode::Mesh => {
                        let zero = em.idx(0);
                        em.blocks(zero, n, blk, &|e, o, b| {
                            e.reduce_block(src, dst, &order, o, b, r)
                        });
                    }
                    AllreduceMode::TwoPhase => {
                        let me = em.rank(ctx);
                        em.dyn_chunk(me, n, p, &|e, off, len| {
                            e.blocks(off, len, blk, &|e, o, b| {
                                e.reduce_block(src, dst, &order, o, b, r)
                            });
                        });
                        em.barrier(ctx);
                        for q in 0..p {
                            let (off, len) = chunk(n, p, q);
                            if len == 0 {
                                continue;
                            }
                            let qv = order[q as usize];
                            let other = em.cmp(CmpOp::Ne, me, qv);
                            em.if_(
                                other,
                                |e| {
                                    let o = e.idx(off);
                                    let d = e.subview(dst, o, len);
                                    e.get(d, qv, d);
                                },
                                |_| {},
                            );
                        }
                    }
                    AllreduceMode::Ring if p == 1 => {
                        let me = em.rank(ctx);
                        em.get(dst, me, src);
                    }
                    AllreduceMode::Ring => {
                        let me = em.rank(ctx);
                        let pm1 = em.idx(p - 1);
                        let pv = em.idx(p);
                        let t = em.ibin(BinOp::Add, me, pm1);
                        let prev = em.ibin(BinOp::Rem, t, pv);
                        for s in 0..p - 1 {
                            let k = em.idx(p - s - 1);
                            let t = em.ibin(BinOp::Add, me, k);
                            let c = em.ibin(BinOp::Rem, t, pv);
                            let partial = if s == 0 { src } else { dst };
                            em.dyn_chunk(c, n, p, &|e, off, len| {
                                e.blocks(off, len, blk, &|e, o, b| {
                                    let from_prev = e.rload(partial, prev, o, b);
                                    let mine = e.load(src, o, b);
                                    let acc = e.tbin(r.bin_op(), from_prev, mine);
                                    e.store(acc, dst, o);
                                });
                            });
                            em.barrier(ctx);
                        }
                        for s in 0..p - 1 {
                            let k = em.idx(p - s);
                            let t = em.ibin(BinOp::Add, me, k);
                            let c = em.ibin(BinOp::Rem, t, pv);
                            em.dyn_chunk(c, n, p, &|e, off, len| {
                                let d = e.subview(dst, off, len);
                                e.get(d, prev, d);
                            });
                            if s + 2 < p {
                                em.barrier(ctx);
                            }
                        }
                    }
                }
                em.barrier(ctx);
                true
            }
            _ => false,
        };
        if lowered {
            let ops = em.blocks.pop().unwrap_or_default();
            out.extend(ops);
        } else {
            match &mut op.kind {
                OpKind::If {
                    then_body,
                    else_body,
                    ..
                } => {
                    lower_block(f_name, values, then_body, p)?;
                    lower_block(f_name, values, else_body, p)?;
                }
                OpKind::For { body, .. } => lower_block(f_name, values, body, p)?,
                _ => {}
            }
            out.push(op);
        }
    }
    b.ops = out;
    Ok(())
}

/// Replaces every built-in collective of `f` by its expansion for world size `p`.
///
/// # Errors
/// [`SpecializeError::CollectiveShape`] when an all-to-all buffer does not have P rows.
pub fn lower_collectives(f: &mut Function, p: u64) -> Result<(), SpecializeError> {
    let mut body = std::mem::take(&mut f.body);
    let r = lower_block(&f.name, &mut f.values, &mut body, p);
    f.body = body;
    r
}
