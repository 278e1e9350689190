//! Tile ops on the CPU ([`eagle_ir::TileOp`]): reductions in the fixed 8-lane order, argmax and
//! argmin scans, broadcasts, layout copies, creation and matmul, over tiles in stack slots.
//!
//! Every op reads its operand tiles from memory (row-major, contiguous: the block plan never
//! fuses a tile op's operand into it) and writes a fresh stack tile, except `reshape`, which
//! is the operand's memory under a new shape (tiles are immutable values). Matmul on `f32` and
//! `f64` calls the rustc-compiled micro-kernels of [`super::gemm`] (each vector lane its own
//! `c[i][j]`, accumulated over `k` in ascending order with a separate multiply and add, as
//! [`eagle_ir::TileOp::eval`] says); other dtypes run a scalar loop in the same order.

use super::prim::ClPrim;
use super::{cl_type, Cv, Lower};
use crate::error::CodegenError;
use crate::passes::fusion::may_write;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData, Type as ClType, Value as ClValue};
use cranelift_frontend::Variable;
use eagle_ir::entity::{EntitySet, SecondaryMap};
use eagle_ir::tile::{reduce_identity, strides, ArgOp, Axis, TileOp, REDUCE_LANES};
use eagle_ir::{prim, BinOp, Block as IrBlock, DType, Function, Op, OpKind, ReduceOp, Type, Value};

/// The indices of a `gather` or `scatter`: their tile (address, dtype), the axis they run
/// along, their row length `k`, the source's row length `nn` and the axis's `extent`, and the
/// fault message of an index outside it.
struct Indexed {
    idx: (ClValue, DType),
    axis: usize,
    k: u64,
    nn: u64,
    extent: u64,
    msg: String,
}

/// What a row or column pass computes along each sequence.
#[derive(Clone, Copy)]
enum Seq {
    Reduce(ReduceOp),
    Arg(ArgOp),
}

impl Lower<'_, '_> {
    /// Loads element `idx` (an `i64` element index) of the tile at `base`.
    fn tile_load(&mut self, base: ClValue, idx: ClValue, d: DType) -> ClValue {
        let a = self.elem_addr(base, idx, d.size());
        self.b.ins().load(cl_type(d), MemFlagsData::trusted(), a, 0)
    }

    fn tile_store(&mut self, base: ClValue, idx: ClValue, x: ClValue, d: DType) {
        let a = self.elem_addr(base, idx, d.size());
        self.b.ins().store(MemFlagsData::trusted(), x, a, 0);
    }

    /// `n` fresh variables of type `ty`, each set to `init` (a reduction's lanes).
    fn vars(&mut self, n: u64, ty: ClType, init: ClValue) -> Vec<Variable> {
        (0..n)
            .map(|_| {
                let v = self.b.declare_var(ty);
                self.b.def_var(v, init);
                v
            })
            .collect()
    }

    /// `a <op> b` on scalars of dtype `d`, as the elementwise op computes it.
    fn combine(
        &mut self,
        op: BinOp,
        a: ClValue,
        b: ClValue,
        d: DType,
    ) -> Result<ClValue, CodegenError> {
        let fake = Op {
            result: None,
            kind: OpKind::Binary(op, Value(0), Value(0)),
            loc: None,
        };
        self.scalar_op(&fake, &[a, b], &[d, d], d)
    }

    fn scalar_const(&mut self, s: eagle_ir::eval::Scalar) -> ClValue {
        self.constant(s.to_const(), s.dtype())
    }

    #[allow(clippy::type_complexity)]
    /// Nested loops over every index of `shape` (row-major order); `body` gets the indices.
    fn for_each_index(
        &mut self,
        shape: &[u64],
        body: &mut dyn FnMut(&mut Self, &[ClValue]) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        self.each_index(shape, &mut vec![], body)
    }

    #[allow(clippy::type_complexity)]
    fn each_index(
        &mut self,
        shape: &[u64],
        idx: &mut Vec<ClValue>,
        body: &mut dyn FnMut(&mut Self, &[ClValue]) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        if idx.len() == shape.len() {
            return body(self, idx);
        }
        let n = shape[idx.len()];
        let (lo, hi) = (self.iconst(0), self.iconst(n as i64));
        self.emit_loop(lo, hi, &mut |lw, i| {
            idx.push(i);
            let r = lw.each_index(shape, idx, body);
            idx.pop();
            r
        })
    }

    /// `sum_d idx[d] * stride[d] (+ add[d])` as an `i64` element index.
    fn index_of(&mut self, idx: &[ClValue], strides: &[u64], add: &[u64]) -> ClValue {
        let mut acc = self.iconst(0);
        for (d, &i) in idx.iter().enumerate() {
            if strides[d] == 0 {
                continue;
            }
            let i = match add.get(d) {
                Some(&a) if a > 0 => self.b.ins().iadd_imm_s(i, a as i64),
                _ => i,
            };
            let t = self.b.ins().imul_imm_s(i, strides[d] as i64);
            acc = self.b.ins().iadd(acc, t);
        }
        acc
    }

    /// The reduction of `len` elements of the tile at `base`, from element `start` with
    /// `stride`, in the order of [`eagle_ir::tile::reduce_order`]: eight lanes from the
    /// identity, lane `j` taking elements `j, j + 8, ...`, then the fixed tree.
    fn reduce_seq(
        &mut self,
        op: ReduceOp,
        base: ClValue,
        start: ClValue,
        stride: u64,
        len: u64,
        d: DType,
    ) -> Result<ClValue, CodegenError> {
        if stride == 1 && d.is_float() {
            return self.reduce_contiguous(op, base, start, len, d);
        }
        let bop = op.bin_op();
        let id = self.scalar_const(reduce_identity(op, d));
        let lanes = self.vars(REDUCE_LANES as u64, cl_type(d), id);
        let w = REDUCE_LANES as u64;
        let full = len / w;
        if full > 0 {
            let (lo, hi) = (self.iconst(0), self.iconst(full as i64));
            self.emit_loop(lo, hi, &mut |lw, c| {
                let off = lw.b.ins().imul_imm_s(c, (w * stride) as i64);
                let at = lw.b.ins().iadd(start, off);
                for (j, &l) in lanes.iter().enumerate() {
                    let e = lw.b.ins().iadd_imm_s(at, (j as u64 * stride) as i64);
                    let x = lw.tile_load(base, e, d);
                    let acc = lw.b.use_var(l);
                    let y = lw.combine(bop, acc, x, d)?;
                    lw.b.def_var(l, y);
                }
                Ok(())
            })?;
        }
        for j in 0..len % w {
            let e = self
                .b
                .ins()
                .iadd_imm_s(start, ((full * w + j) * stride) as i64);
            let x = self.tile_load(base, e, d);
            let acc = self.b.use_var(lanes[j as usize]);
            let y = self.combine(bop, acc, x, d)?;
            self.b.def_var(lanes[j as usize], y);
        }
        let l: Vec<ClValue> = lanes.iter().map(|&v| self.b.use_var(v)).collect();
        self.lane_tree(&l, &mut |lw, x, y, _| lw.combine(bop, x, y, d))
    }

    /// [`eagle_ir::prim::lane_tree`] over the 8 lane values `l`; `f` gets `true` for the root.
    #[allow(clippy::type_complexity)]
    fn lane_tree(
        &mut self,
        l: &[ClValue],
        f: &mut dyn FnMut(&mut Self, ClValue, ClValue, bool) -> Result<ClValue, CodegenError>,
    ) -> Result<ClValue, CodegenError> {
        let lanes: [ClValue; REDUCE_LANES] = l
            .try_into()
            .map_err(|_| self.err(format!("internal: {} lanes, not 8", l.len())))?;
        prim::lane_tree(lanes, |x, y, root| f(self, x, y, root))
    }

    /// `a <op> b` on float vectors (lane-wise IEEE, as the scalar op), except that a NaN
    /// result of `min`/`max` is left as the hardware makes it: a reduction canonicalises it
    /// once, in its final tree (a NaN stays a NaN through `minimum`/`maximum`).
    ///
    /// # Errors
    /// A reduction whose combining op has no float form (none of today's float reductions).
    fn vcombine(&mut self, op: ReduceOp, a: ClValue, b: ClValue) -> Result<ClValue, CodegenError> {
        Ok(match op.bin_op() {
            BinOp::Add => self.b.ins().fadd(a, b),
            BinOp::Mul => self.b.ins().fmul(a, b),
            BinOp::Max => self.b.ins().fmax(a, b),
            BinOp::Min => self.b.ins().fmin(a, b),
            BinOp::Sub
            | BinOp::Div
            | BinOp::Rem
            | BinOp::And
            | BinOp::Or
            | BinOp::Xor
            | BinOp::Shl
            | BinOp::Shr => {
                return Err(self.err(format!(
                    "reduction `{}` has no float vector form",
                    op.name()
                )))
            }
        })
    }

    /// [`Lower::vcombine`] with the canonical NaN (the elementwise op exactly): a selecting
    /// reduction (`max`, `min`) is the elementwise op.
    fn vcombine_exact(
        &mut self,
        op: ReduceOp,
        a: ClValue,
        b: ClValue,
    ) -> Result<ClValue, CodegenError> {
        if op.selects() {
            Ok(self.float_min_max(op.bin_op(), a, b))
        } else {
            self.vcombine(op, a, b)
        }
    }

    /// [`Lower::reduce_seq`] of a contiguous float sequence, with the 8 lanes held in 16-byte
    /// vectors (two of `f32`, four of `f64`): the same steps, lane for lane.
    fn reduce_contiguous(
        &mut self,
        op: ReduceOp,
        base: ClValue,
        start: ClValue,
        len: u64,
        d: DType,
    ) -> Result<ClValue, CodegenError> {
        Ok(self.reduce_rows(op, base, start, 1, len, len, d)?[0])
    }

    /// [`Lower::reduce_contiguous`] of `rows` sequences at once (row `r` starts `r * stride`
    /// elements after `start`): each row keeps its own lanes and order, and the rows' chains
    /// interleave, so the adds of one row wait less on each other.
    #[allow(clippy::too_many_arguments)]
    fn reduce_rows(
        &mut self,
        op: ReduceOp,
        base: ClValue,
        start: ClValue,
        rows: u64,
        stride: u64,
        len: u64,
        d: DType,
    ) -> Result<Vec<ClValue>, CodegenError> {
        let bop = op.bin_op();
        let lpv = (16 / d.size()) as u64;
        let nv = REDUCE_LANES as u64 / lpv;
        let vty = cl_type(d).by(lpv as u32).expect("a 16-byte vector type");
        let id = self.scalar_const(reduce_identity(op, d));
        let idv = self.b.ins().splat(vty, id);
        let accs: Vec<Vec<_>> = (0..rows).map(|_| self.vars(nv, vty, idv)).collect();
        let w = REDUCE_LANES as u64;
        let full = len / w;
        let esize = d.size() as i64;
        let flags = MemFlagsData::trusted();
        if full > 0 {
            let (lo, hi) = (self.iconst(0), self.iconst(full as i64));
            self.emit_loop(lo, hi, &mut |lw, c| {
                let e = lw.b.ins().imul_imm_s(c, w as i64);
                let e = lw.b.ins().iadd(start, e);
                let off = lw.b.ins().imul_imm_s(e, esize);
                let addr = lw.b.ins().iadd(base, off);
                for (r, row) in accs.iter().enumerate() {
                    for (v, &acc) in row.iter().enumerate() {
                        let at = (r as u64 * stride) as i64 * esize + (v as u64 * 16) as i64;
                        let x = lw.b.ins().load(vty, flags, addr, at as i32);
                        let cur = lw.b.use_var(acc);
                        let y = lw.vcombine(op, cur, x)?;
                        lw.b.def_var(acc, y);
                    }
                }
                Ok(())
            })?;
        }
        let mut out = vec![];
        for (r, row) in accs.iter().enumerate() {
            let mut l: Vec<ClValue> = vec![];
            for &acc in row {
                let v = self.b.use_var(acc);
                for k in 0..lpv {
                    l.push(self.b.ins().extractlane(v, k as u8));
                }
            }
            for j in 0..len % w {
                let e = self
                    .b
                    .ins()
                    .iadd_imm_s(start, (r as u64 * stride + full * w + j) as i64);
                let x = self.tile_load(base, e, d);
                l[j as usize] = self.combine(bop, l[j as usize], x, d)?;
            }
            out.push(self.lane_tree(&l, &mut |lw, x, y, _| lw.combine(bop, x, y, d))?);
        }
        Ok(out)
    }

    /// Column reductions of an `[m, n]` float tile, a 16-byte vector of adjacent columns at a
    /// time: eight vector lanes (row `i` into lane `i % 8`), then the fixed tree, each column
    /// in its own vector lane ([`eagle_ir::tile::reduce_order`] for every column). Returns the
    /// number of columns done; the rest take [`Lower::reduce_seq`].
    fn reduce_columns(
        &mut self,
        op: ReduceOp,
        src: ClValue,
        dst: ClValue,
        m: u64,
        n: u64,
        d: DType,
    ) -> Result<u64, CodegenError> {
        let lpv = (16 / d.size()) as u64;
        let groups = n / lpv;
        if groups == 0 {
            return Ok(0);
        }
        let vty = cl_type(d).by(lpv as u32).expect("a 16-byte vector type");
        let esize = d.size() as i64;
        let flags = MemFlagsData::trusted();
        let w = REDUCE_LANES as u64;
        let (lo, hi) = (self.iconst(0), self.iconst(groups as i64));
        self.emit_loop(lo, hi, &mut |lw, g| {
            let col = lw.b.ins().imul_imm_s(g, lpv as i64);
            let id = lw.scalar_const(reduce_identity(op, d));
            let idv = lw.b.ins().splat(vty, id);
            let accs = lw.vars(w, vty, idv);
            let full = m / w;
            let colb = lw.b.ins().imul_imm_s(col, esize);
            let colp = lw.b.ins().iadd(src, colb);
            if full > 0 {
                let (lo, hi) = (lw.iconst(0), lw.iconst(full as i64));
                lw.emit_loop(lo, hi, &mut |lw, c| {
                    let row = lw.b.ins().imul_imm_s(c, (w * n) as i64 * esize);
                    let addr = lw.b.ins().iadd(colp, row);
                    for (l, &acc) in accs.iter().enumerate() {
                        let off = (l as u64 * n) as i64 * esize;
                        let x = lw.b.ins().load(vty, flags, addr, off as i32);
                        let cur = lw.b.use_var(acc);
                        let y = lw.vcombine(op, cur, x)?;
                        lw.b.def_var(acc, y);
                    }
                    Ok(())
                })?;
            }
            for l in 0..m % w {
                let off = ((full * w + l) * n) as i64 * esize;
                let x = lw.b.ins().load(vty, flags, colp, off as i32);
                let cur = lw.b.use_var(accs[l as usize]);
                let y = lw.vcombine(op, cur, x)?;
                lw.b.def_var(accs[l as usize], y);
            }
            let l: Vec<ClValue> = accs.iter().map(|&a| lw.b.use_var(a)).collect();
            let r = lw.lane_tree(&l, &mut |lw, x, y, last| {
                if last {
                    lw.vcombine_exact(op, x, y)
                } else {
                    lw.vcombine(op, x, y)
                }
            })?;
            let addr = lw.b.ins().iadd(dst, colb);
            lw.b.ins().store(flags, r, addr, 0);
            Ok(())
        })?;
        Ok(groups * lpv)
    }

    /// Whether `x` replaces the best-so-far `best` of an argmax (argmin) scan
    /// ([`eagle_ir::tile::arg_better`]), as an `i8` truth value.
    fn arg_better(&mut self, op: ArgOp, x: ClValue, best: ClValue, d: DType) -> ClValue {
        prim::arg_better(&mut ClPrim { lw: self, d }, op, d.is_float(), &x, &best)
    }

    /// The index (as `i64`) of the element an argmax (argmin) scan keeps.
    fn arg_seq(
        &mut self,
        op: ArgOp,
        base: ClValue,
        start: ClValue,
        stride: u64,
        len: u64,
        d: DType,
    ) -> Result<ClValue, CodegenError> {
        let bi = self.b.declare_var(types::I64);
        let bv = self.b.declare_var(cl_type(d));
        let zero = self.iconst(0);
        let first = self.tile_load(base, start, d);
        self.b.def_var(bi, zero);
        self.b.def_var(bv, first);
        let (lo, hi) = (self.iconst(1), self.iconst(len as i64));
        self.emit_loop(lo, hi, &mut |lw, e| {
            let off = lw.b.ins().imul_imm_s(e, stride as i64);
            let at = lw.b.ins().iadd(start, off);
            let x = lw.tile_load(base, at, d);
            let best = lw.b.use_var(bv);
            let better = lw.arg_better(op, x, best, d);
            let cur = lw.b.use_var(bi);
            let ni = lw.b.ins().select(better, e, cur);
            let nv = lw.b.ins().select(better, x, best);
            lw.b.def_var(bi, ni);
            lw.b.def_var(bv, nv);
            Ok(())
        })?;
        Ok(self.b.use_var(bi))
    }

    fn tile_mem(&mut self, v: Value) -> Result<(ClValue, Vec<u64>, DType), CodegenError> {
        let Type::Tile(s, d) = self.f.ty(v).clone() else {
            return Err(self.err(format!("value %{} is not a tile", v.0)));
        };
        let shape = s
            .consts()
            .ok_or_else(|| self.err("a tile shape is unbound; specialize first"))?;
        Ok((self.mem(v)?, shape, d))
    }

    /// Copies the `n` contiguous elements of dtype `d` at `src` to `dst`: one `memmove` (the
    /// two may be the same tile).
    pub(super) fn copy_tile(
        &mut self,
        dst: ClValue,
        src: ClValue,
        n: u64,
        d: DType,
    ) -> Result<(), CodegenError> {
        let bytes = self.iconst((n * d.size() as u64) as i64);
        self.b.call_memmove(self.cfg, dst, src, bytes);
        Ok(())
    }

    /// A row or column reduction, argmax or argmin of the 2-D tile `src` into `dst`.
    fn lower_reduce(
        &mut self,
        seq: Seq,
        axis: Axis,
        src: Value,
        dst: ClValue,
    ) -> Result<(), CodegenError> {
        let (p, s, d) = self.tile_mem(src)?;
        let (m, nn) = (s[0], s[1]);
        // `count` sequences of `len` elements, sequence `i` from `i * outer` by `inner`.
        let (count, len, outer, inner) = match axis {
            Axis::Row => (m, nn, nn, 1),
            _ => (nn, m, 1, nn),
        };
        // The fast paths for float reductions; the rest (and the tail) run sequence by sequence.
        let done = match (seq, axis) {
            (Seq::Reduce(rop), Axis::Col) if d.is_float() => {
                self.reduce_columns(rop, p, dst, m, nn, d)?
            }
            (Seq::Reduce(rop), Axis::Row) if d.is_float() && m >= ROW_GROUP => {
                // Rows in groups of ROW_GROUP, their chains interleaved.
                let (lo, hi) = (self.iconst(0), self.iconst((m / ROW_GROUP) as i64));
                self.emit_loop(lo, hi, &mut |lw, g| {
                    let row0 = lw.b.ins().imul_imm_s(g, ROW_GROUP as i64);
                    let start = lw.b.ins().imul_imm_s(row0, nn as i64);
                    let xs = lw.reduce_rows(rop, p, start, ROW_GROUP, nn, nn, d)?;
                    for (r, x) in xs.into_iter().enumerate() {
                        let at = lw.b.ins().iadd_imm_s(row0, r as i64);
                        lw.tile_store(dst, at, x, d);
                    }
                    Ok(())
                })?;
                m / ROW_GROUP * ROW_GROUP
            }
            _ => 0,
        };
        let (lo, hi) = (self.iconst(done as i64), self.iconst(count as i64));
        self.emit_loop(lo, hi, &mut |lw, i| {
            let start = lw.b.ins().imul_imm_s(i, outer as i64);
            match seq {
                Seq::Arg(aop) => {
                    let x = lw.arg_seq(aop, p, start, inner, len, d)?;
                    lw.tile_store(dst, i, x, DType::I64);
                }
                Seq::Reduce(rop) => {
                    let x = lw.reduce_seq(rop, p, start, inner, len, d)?;
                    lw.tile_store(dst, i, x, d);
                }
            }
            Ok(())
        })
    }

    /// A running combination (`cumsum(t, axis)`, ...) of the 2-D tile `src` into `dst`: along
    /// each row (`axis` 1) or column (0), `out[0] = t[0]`, then `out[k] = out[k - 1] <op> t[k]`
    /// in index order ([`TileOp::Scan`]).
    fn lower_scan(
        &mut self,
        op: ReduceOp,
        axis: usize,
        src: Value,
        dst: ClValue,
    ) -> Result<(), CodegenError> {
        let (p, s, d) = self.tile_mem(src)?;
        let (m, nn) = (s[0], s[1]);
        // `count` sequences of `len` elements, sequence `i` from `i * outer` by `inner`.
        let (count, len, outer, inner) = if axis == 1 {
            (m, nn, nn, 1)
        } else {
            (nn, m, 1, nn)
        };
        let bop = op.bin_op();
        let (lo, hi) = (self.iconst(0), self.iconst(count as i64));
        self.emit_loop(lo, hi, &mut |lw, i| {
            let start = lw.b.ins().imul_imm_s(i, outer as i64);
            let first = lw.tile_load(p, start, d);
            lw.tile_store(dst, start, first, d);
            let acc = lw.vars(1, cl_type(d), first)[0];
            let (lo, hi) = (lw.iconst(1), lw.iconst(len as i64));
            lw.emit_loop(lo, hi, &mut |lw, e| {
                let off = lw.b.ins().imul_imm_s(e, inner as i64);
                let at = lw.b.ins().iadd(start, off);
                let x = lw.tile_load(p, at, d);
                let a = lw.b.use_var(acc);
                let y = lw.combine(bop, a, x, d)?;
                lw.b.def_var(acc, y);
                lw.tile_store(dst, at, y, d);
                Ok(())
            })
        })
    }

    /// `sort` (with `indices`, `argsort`) of the 2-D tile `src` along `axis` into `dst`: each
    /// element's position is the count of elements that precede it in the stable order
    /// ([`prim::precedes`]), and it is stored there (its value, or its index as `i64`).
    fn lower_sort(
        &mut self,
        axis: usize,
        src: Value,
        dst: ClValue,
        indices: bool,
    ) -> Result<(), CodegenError> {
        let (p, s, d) = self.tile_mem(src)?;
        let (m, nn) = (s[0], s[1]);
        let (count, len, outer, inner) = if axis == 1 {
            (m, nn, nn, 1)
        } else {
            (nn, m, 1, nn)
        };
        let (lo, hi) = (self.iconst(0), self.iconst(count as i64));
        self.emit_loop(lo, hi, &mut |lw, i| {
            let start = lw.b.ins().imul_imm_s(i, outer as i64);
            let (lo, hi) = (lw.iconst(0), lw.iconst(len as i64));
            lw.emit_loop(lo, hi, &mut |lw, j| {
                let off = lw.b.ins().imul_imm_s(j, inner as i64);
                let at_j = lw.b.ins().iadd(start, off);
                let xj = lw.tile_load(p, at_j, d);
                let zero = lw.iconst(0);
                let pos = lw.vars(1, types::I64, zero)[0];
                let (lo, hi) = (lw.iconst(0), lw.iconst(len as i64));
                lw.emit_loop(lo, hi, &mut |lw, k| {
                    let off = lw.b.ins().imul_imm_s(k, inner as i64);
                    let at_k = lw.b.ins().iadd(start, off);
                    let xk = lw.tile_load(p, at_k, d);
                    let k_lower = lw.b.ins().icmp(IntCC::SignedLessThan, k, j);
                    let before =
                        prim::precedes(&mut ClPrim { lw, d }, d.is_float(), &xk, &xj, k_lower);
                    let one = lw.b.ins().uextend(types::I64, before);
                    let cur = lw.b.use_var(pos);
                    let next = lw.b.ins().iadd(cur, one);
                    lw.b.def_var(pos, next);
                    Ok(())
                })?;
                let at = lw.b.use_var(pos);
                let off = lw.b.ins().imul_imm_s(at, inner as i64);
                let to = lw.b.ins().iadd(start, off);
                if indices {
                    lw.tile_store(dst, to, j, DType::I64);
                } else {
                    lw.tile_store(dst, to, xj, d);
                }
                Ok(())
            })
        })
    }

    /// The element of a `[m, nn]` source that index element `e` of `ix.idx` selects (row-major
    /// `[.., k]` indices along `ix.axis`), after a fault if the index is outside the axis
    /// (unsigned compare: a negative index is past the end too).
    fn indexed_element(&mut self, ix: &Indexed, e: ClValue) -> ClValue {
        let (pi, di) = ix.idx;
        let q = self.tile_load(pi, e, di);
        let q = self.widen_i64(q, di);
        let bad = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, q, ix.extent as i64);
        let b = self.iconst(ix.extent as i64);
        self.fault_if(bad, ix.msg.clone(), q, b);
        let kv = self.iconst(ix.k as i64);
        if ix.axis == 0 {
            // Element (q, e % k); k is the source's row length here.
            let j = self.b.ins().urem(e, kv);
            let row = self.b.ins().imul_imm_s(q, ix.nn as i64);
            self.b.ins().iadd(row, j)
        } else {
            // Element (e / k, q).
            let i = self.b.ins().udiv(e, kv);
            let row = self.b.ins().imul_imm_s(i, ix.nn as i64);
            self.b.ins().iadd(row, q)
        }
    }

    /// The [`Indexed`] of index tile `idx` into the 2-D tile `src` along `axis` (its fault
    /// message from `site(function, op, extent)`), and the number of indices.
    fn indexed(
        &mut self,
        op: &Op,
        src: Value,
        idx: Value,
        axis: usize,
        site: &dyn Fn(&str, &str, u64) -> String,
    ) -> Result<(Indexed, u64), CodegenError> {
        let (_, s, _) = self.tile_mem(src)?;
        let (pi, si, di) = self.tile_mem(idx)?;
        let extent = if axis == 0 { s[0] } else { s[1] };
        let msg = site(&self.f.name, &self.site_op(op), extent);
        let ix = Indexed {
            idx: (pi, di),
            axis,
            k: si[1],
            nn: s[1],
            extent,
            msg,
        };
        Ok((ix, si.iter().product()))
    }

    /// `gather(t, idx, axis)` into `dst` ([`TileOp::Gather`]): each index checked against the
    /// axis (a fault naming the op), then the element copied.
    fn lower_gather(
        &mut self,
        op: &Op,
        axis: usize,
        [src, idx]: [Value; 2],
        dst: ClValue,
    ) -> Result<(), CodegenError> {
        let (p, _, d) = self.tile_mem(src)?;
        let site = |f: &str, op: &str, extent| crate::sites::gather_index(f, op, axis, extent);
        let (ix, count) = self.indexed(op, src, idx, axis, &site)?;
        let (lo, hi) = (self.iconst(0), self.iconst(count as i64));
        self.emit_loop(lo, hi, &mut |lw, e| {
            let at = lw.indexed_element(&ix, e);
            let x = lw.tile_load(p, at, d);
            lw.tile_store(dst, e, x, d);
            Ok(())
        })
    }

    /// `scatter`/`scatter_add` into `dst` ([`TileOp::Scatter`]): the base copied, then each
    /// value written (or added) at its checked index, in row-major order of the indices.
    fn lower_scatter(
        &mut self,
        op: &Op,
        (add, axis): (bool, usize),
        [base, idx, vals]: [Value; 3],
        dst: ClValue,
    ) -> Result<(), CodegenError> {
        let (p, s, d) = self.tile_mem(base)?;
        let (pv, _, _) = self.tile_mem(vals)?;
        let site =
            |f: &str, op: &str, extent| crate::sites::scatter_index(f, op, add, axis, extent);
        let (ix, count) = self.indexed(op, base, idx, axis, &site)?;
        self.copy_tile(dst, p, s[0] * s[1], d)?;
        let (lo, hi) = (self.iconst(0), self.iconst(count as i64));
        self.emit_loop(lo, hi, &mut |lw, e| {
            let at = lw.indexed_element(&ix, e);
            let x = lw.tile_load(pv, e, d);
            let y = if add {
                let cur = lw.tile_load(dst, at, d);
                lw.combine(BinOp::Add, cur, x, d)?
            } else {
                x
            };
            lw.tile_store(dst, at, y, d);
            Ok(())
        })
    }

    /// The variable's stack tile when matmul result `r` is computed straight into it
    /// ([`control::results_into_vars`]) and neither `a` nor `b` is that tile (the GEMM's `dst`
    /// may be `c` only); `None` otherwise (the result gets a tile of its own, which the
    /// write copies).
    fn var_tile_for(
        &mut self,
        t: &TileOp,
        args: &[Value],
        r: Value,
    ) -> Result<Option<ClValue>, CodegenError> {
        let (Some((_, &a, &b)), Some(&var)) = (t.gemm_operands(args), self.into_vars.get(r)) else {
            return Ok(None);
        };
        let slot = self.mem(var)?;
        let reads_slot = self.mem(a)? == slot || self.mem(b)? == slot;
        Ok((!reads_slot).then_some(slot))
    }

    /// Stores scalar `x` of dtype `d` into the `len` contiguous elements at `dst`: 16-byte
    /// vector stores, then the elements left one by one (the bits of `len` scalar stores).
    fn fill_run(
        &mut self,
        dst: ClValue,
        len: u64,
        x: ClValue,
        d: DType,
    ) -> Result<(), CodegenError> {
        // Every dtype is stored in a 1-, 2-, 4- or 8-byte lane (`cl_type`).
        let lanes = 16 / d.size() as u64;
        let nvec = len / lanes;
        if nvec > 0 {
            let vty = cl_type(d)
                .by(lanes as u32)
                .ok_or_else(|| self.err(format!("internal: no 16-byte vector of `{d}`")))?;
            let sp = self.b.ins().splat(vty, x);
            self.emit_counted(nvec, &mut |lw, i| {
                let off = lw.b.ins().imul_imm_s(i, 16);
                let a = lw.b.ins().iadd(dst, off);
                lw.b.ins()
                    .store(MemFlagsData::new().with_notrap(), sp, a, 0);
                Ok(())
            })?;
        }
        for t in nvec * lanes..len {
            let i = self.iconst(t as i64);
            self.tile_store(dst, i, x, d);
        }
        Ok(())
    }

    /// `expand` of tile `src` to `shape` into `dst` by whole rows (the last axis), where the
    /// broadcast allows: `src` one element (every row filled with it), broadcast along the
    /// last axis only (`[.., 1]`: row `i` filled with element `i`), or one row broadcast
    /// along the others (`[1, .., c]`: the row copied into each). `false` (nothing emitted)
    /// for any other broadcast, which the caller runs element by element.
    fn expand_rows(
        &mut self,
        src: Value,
        shape: &[u64],
        dst: ClValue,
    ) -> Result<bool, CodegenError> {
        let (p, s, d) = self.tile_mem(src)?;
        let Some((&cols, lead)) = shape.split_last() else {
            return Ok(false);
        };
        let (Some((&scols, slead)), true) = (s.split_last(), s.len() == shape.len()) else {
            return Ok(false);
        };
        let rows: u64 = lead.iter().product();
        let row_bytes = cols * d.size() as u64;
        let numel: u64 = s.iter().product();
        if numel == 1 {
            let zero = self.iconst(0);
            let x = self.tile_load(p, zero, d);
            return self.fill_run(dst, rows * cols, x, d).map(|()| true);
        }
        let by_row = scols == 1 && slead == lead;
        let one_row = scols == cols && numel == cols;
        if !by_row && !one_row {
            return Ok(false);
        }
        let (lo, hi) = (self.iconst(0), self.iconst(rows as i64));
        self.emit_loop(lo, hi, &mut |lw, i| {
            let off = lw.b.ins().imul_imm_s(i, row_bytes as i64);
            let row = lw.b.ins().iadd(dst, off);
            if by_row {
                let x = lw.tile_load(p, i, d);
                lw.fill_run(row, cols, x, d)
            } else {
                let bytes = lw.iconst(row_bytes as i64);
                lw.b.call_memcpy(lw.cfg, row, p, bytes);
                Ok(())
            }
        })?;
        Ok(true)
    }

    /// Lowers a tile op (see the module docs).
    pub(super) fn lower_tile(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let OpKind::Tile(t, args) = &op.kind else {
            return Err(self.err("internal: not a tile op"));
        };
        let Some(r) = op.result else { return Ok(None) };
        let rty = self.f.ty(r).clone();
        let rd = rty.dtype().unwrap_or(DType::F32);
        let rshape = rty
            .shape()
            .map(|s| {
                s.consts()
                    .ok_or_else(|| self.err("a tile shape is unbound; specialize first"))
            })
            .transpose()?
            .unwrap_or_default();
        let n: u64 = rshape.iter().product();
        if let TileOp::Reshape = t {
            let (p, _, _) = self.tile_mem(args[0])?;
            return Ok(Some(Cv::Mem(p)));
        }
        if let (TileOp::Transpose, true) = (t, self.transposed_b.contains(r)) {
            // Read by the GEMM that follows as its `b`, where the operand is.
            let (p, _, _) = self.tile_mem(args[0])?;
            return Ok(Some(Cv::Mem(p)));
        }
        if let TileOp::Reduce(rop, Axis::All) = t {
            let (p, s, d) = self.tile_mem(args[0])?;
            let zero = self.iconst(0);
            let x = self.reduce_seq(*rop, p, zero, 1, s.iter().product(), d)?;
            return Ok(Some(Cv::S(x)));
        }
        let dst = match self.var_tile_for(t, args, r)? {
            Some(slot) => slot,
            None => self.stack(n * rd.size() as u64),
        };
        let rstr = strides(&rshape);
        match t {
            TileOp::Reduce(rop, axis) => {
                self.lower_reduce(Seq::Reduce(*rop), *axis, args[0], dst)?
            }
            TileOp::Arg(aop, axis) => self.lower_reduce(Seq::Arg(*aop), *axis, args[0], dst)?,
            TileOp::Scan(op, axis) => self.lower_scan(*op, *axis, args[0], dst)?,
            TileOp::Sort(axis) => self.lower_sort(*axis, args[0], dst, false)?,
            TileOp::Gather(axis) => self.lower_gather(op, *axis, [args[0], args[1]], dst)?,
            TileOp::Scatter { add, axis } => {
                self.lower_scatter(op, (*add, *axis), [args[0], args[1], args[2]], dst)?
            }
            TileOp::ArgSort(axis) => self.lower_sort(*axis, args[0], dst, true)?,
            TileOp::Expand | TileOp::Full => {
                if let Type::Scalar(_) = self.f.ty(args[0]) {
                    let x = self.scalar(args[0])?;
                    self.fill_run(dst, n, x, rd)?;
                } else if self.expand_rows(args[0], &rshape, dst)? {
                    // Whole rows filled or copied.
                } else {
                    let (p, s, d) = self.tile_mem(args[0])?;
                    let sst: Vec<u64> = strides(&s)
                        .iter()
                        .zip(&s)
                        .map(|(&st, &e)| if e == 1 { 0 } else { st })
                        .collect();
                    self.for_each_index(&rshape, &mut |lw, idx| {
                        let from = lw.index_of(idx, &sst, &[]);
                        let to = lw.index_of(idx, &rstr, &[]);
                        let x = lw.tile_load(p, from, d);
                        lw.tile_store(dst, to, x, d);
                        Ok(())
                    })?;
                }
            }
            TileOp::Transpose => {
                let (p, s, d) = self.tile_mem(args[0])?;
                // dst[j][i] = src[i][j]
                let tst = [1, s[0]];
                let sst = strides(&s);
                self.for_each_index(&s, &mut |lw, idx| {
                    let from = lw.index_of(idx, &sst, &[]);
                    let to = lw.index_of(idx, &tst, &[]);
                    let x = lw.tile_load(p, from, d);
                    lw.tile_store(dst, to, x, d);
                    Ok(())
                })?;
            }
            TileOp::Concat(axis) => {
                for (k, &a) in args.iter().enumerate() {
                    let (p, s, d) = self.tile_mem(a)?;
                    let mut add = vec![0u64; s.len()];
                    if k == 1 {
                        let (_, s0, _) = self.tile_mem(args[0])?;
                        add[*axis] = s0[*axis];
                    }
                    let sst = strides(&s);
                    self.for_each_index(&s, &mut |lw, idx| {
                        let from = lw.index_of(idx, &sst, &[]);
                        let to = lw.index_of(idx, &rstr, &add);
                        let x = lw.tile_load(p, from, d);
                        lw.tile_store(dst, to, x, d);
                        Ok(())
                    })?;
                }
            }
            TileOp::Extract(offs) => {
                let (p, s, d) = self.tile_mem(args[0])?;
                let sst = strides(&s);
                let offs = offs.clone();
                self.for_each_index(&rshape, &mut |lw, idx| {
                    let from = lw.index_of(idx, &sst, &offs);
                    let to = lw.index_of(idx, &rstr, &[]);
                    let x = lw.tile_load(p, from, d);
                    lw.tile_store(dst, to, x, d);
                    Ok(())
                })?;
            }
            TileOp::Iota(axis) => {
                let axis = *axis;
                self.for_each_index(&rshape, &mut |lw, idx| {
                    let to = lw.index_of(idx, &rstr, &[]);
                    let x = lw.cast(idx[axis], DType::I64, rd);
                    lw.tile_store(dst, to, x, rd);
                    Ok(())
                })?;
            }
            TileOp::Matmul | TileOp::MatmulAcc => self.lower_matmul(t, args, dst)?,
            TileOp::Reshape => unreachable!("handled above"),
        }
        Ok(Some(Cv::Mem(dst)))
    }

    /// A math-library op on `f32`/`f64` tiles (what specialization leaves unexpanded,
    /// [`eagle_ir::expand::packed_kernel_op`]): one call of the kernel of [`super::math`] from
    /// the operands' tiles into a fresh one.
    pub(super) fn lower_math(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let (OpKind::Math(m, args), Some(r)) = (&op.kind, op.result) else {
            return Err(self.err("internal: not a math op"));
        };
        let name = self.f.ty(r).dtype().and_then(super::math::entry);
        let Some(&f) = name.and_then(|n| self.kernel_refs.get(n)) else {
            return Err(self.err(format!(
                "a math-library op (`{}`) on `{}` reached the backend; specialize first (it \
                 expands every math op but those on f32/f64 tiles)",
                m.name(),
                self.f.ty(r)
            )));
        };
        // The block plan reads no strided block and fuses no operand into a math op (its
        // operands are whole tiles in memory): checked, as the elementwise lowering does.
        if args
            .iter()
            .any(|&v| self.plan.strided.contains_key(v) || self.plan.lazy.contains(v))
        {
            return Err(self.err("internal: a math op's operand is not a contiguous tile"));
        }
        let (pa, shape, d) = self.tile_mem(args[0])?;
        let pb = match args.get(1) {
            Some(&b) => self.tile_mem(b)?.0,
            None => self.b.ins().iconst(self.ptr, 0),
        };
        let n: u64 = shape.iter().product();
        let dst = self.stack(n * d.size() as u64);
        let code = self.iconst(super::math::code(*m));
        let n = self.iconst(n as i64);
        self.b.ins().call(f, &[code, dst, pa, pb, n]);
        Ok(Some(Cv::Mem(dst)))
    }

    /// `matmul`/`matmul_acc` of `args` into `dst`: the GEMM reads blocks of wider matrices
    /// (`BlockPlan::strided`) and transposed `b` operands ([`transposed_operands`]) where they
    /// are.
    fn lower_matmul(
        &mut self,
        t: &TileOp,
        args: &[Value],
        dst: ClValue,
    ) -> Result<(), CodegenError> {
        let Some((c, &a, &b)) = t.gemm_operands(args) else {
            return Err(self.err("internal: a product without its operands"));
        };
        let c = c.map(|&c| self.tile_mem(c)).transpose()?.map(|(p, _, _)| p);
        let (pa, sa, d) = self.tile_mem(a)?;
        let (pb, sb, _) = self.tile_mem(b)?;
        // Blocks read in place from wider matrices have their rows further apart; a
        // transposed `b` is its operand, `[n, k]`, rows `k` apart.
        let lda = self.plan.strided.get(a).copied().unwrap_or(sa[1]);
        let bt = self.transposed_b.contains(b);
        let ldb = match self.plan.strided.get(b) {
            Some(&ld) => ld,
            None if bt => sb[0],
            None => sb[1],
        };
        self.matmul(dst, c, (pa, lda), (pb, ldb, bt), [sa[0], sa[1], sb[1]], d)
    }

    /// `dst[i][j] = c0 + sum_k a[i][k] * b[k][j]` in ascending `k` with a separate multiply
    /// and add; `c0` is `c[i][j]` or the identity of `+`; the rows of `a` and `b` are `lda` and
    /// `ldb` elements apart (wider than `k` and `n` only for the blocks of
    /// `BlockPlan::strided`, which only `f32` and `f64` have); with `bt`, `pb` is `b`'s
    /// transpose (`[n, k]`, rows `ldb` apart: [`transposed_operands`], also only `f32` and
    /// `f64`). `f32` and `f64` call the rustc-compiled micro-kernels of [`super::gemm`] (the
    /// same order, 32- or 64-byte vectors where the CPU has them); other dtypes run the scalar
    /// loop.
    fn matmul(
        &mut self,
        dst: ClValue,
        c: Option<ClValue>,
        (pa, lda): (ClValue, u64),
        (pb, ldb, bt): (ClValue, u64, bool),
        [m, k, n]: [u64; 3],
        d: DType,
    ) -> Result<(), CodegenError> {
        if let Some(name) = super::gemm::entry(d) {
            let f = *self
                .kernel_refs
                .get(name)
                .ok_or_else(|| self.err("internal: a matmul whose GEMM was not imported"))?;
            let c = c.unwrap_or_else(|| self.b.ins().iconst(self.ptr, 0));
            let dims = [m, k, n, lda, ldb, u64::from(bt)].map(|x| self.iconst(x as i64));
            let [m, k, n, lda, ldb, bt] = dims;
            self.b
                .ins()
                .call(f, &[dst, c, pa, pb, m, k, n, lda, ldb, bt]);
            return Ok(());
        }
        if bt {
            return Err(self.err("internal: a transposed GEMM operand without a micro-kernel"));
        }
        let (lo, hi) = (self.iconst(0), self.iconst(m as i64));
        self.emit_loop(lo, hi, &mut |lw, i| {
            let arow = lw.b.ins().imul_imm_s(i, lda as i64);
            let crow = lw.b.ins().imul_imm_s(i, n as i64);
            let (lo, hi) = (lw.iconst(0), lw.iconst(n as i64));
            lw.emit_loop(lo, hi, &mut |lw, j| {
                let at = lw.b.ins().iadd(crow, j);
                let c0 = c.map(|pc| lw.tile_load(pc, at, d));
                let v = prim::dot(lw, d, k, c0, &mut |lw, kk| {
                    let ai = lw.b.ins().iadd(arow, *kk);
                    let x = lw.tile_load(pa, ai, d);
                    let brow = lw.b.ins().imul_imm_s(*kk, ldb as i64);
                    let bi = lw.b.ins().iadd(brow, j);
                    Ok((x, lw.tile_load(pb, bi, d)))
                })?;
                lw.tile_store(dst, at, v, d);
                Ok(())
            })
        })
    }
}

/// The Cranelift instance of [`prim::DotEmitter`]: SSA values, an accumulator as a
/// Cranelift variable, `k` as a loop.
impl prim::DotEmitter for Lower<'_, '_> {
    type V = ClValue;
    type Ix = ClValue;
    type Acc = Variable;
    type Err = CodegenError;
    fn identity(&mut self, d: DType) -> ClValue {
        self.scalar_const(eagle_ir::tile::add_identity(d))
    }
    fn acc(&mut self, d: DType, init: ClValue) -> Variable {
        let v = self.b.declare_var(cl_type(d));
        self.b.def_var(v, init);
        v
    }
    fn get(&mut self, acc: &Variable) -> ClValue {
        self.b.use_var(*acc)
    }
    fn set(&mut self, acc: &Variable, v: ClValue) {
        self.b.def_var(*acc, v);
    }
    fn mul(&mut self, d: DType, a: &ClValue, b: &ClValue) -> Result<ClValue, CodegenError> {
        self.combine(BinOp::Mul, *a, *b, d)
    }
    fn add(&mut self, d: DType, a: &ClValue, b: &ClValue) -> Result<ClValue, CodegenError> {
        self.combine(BinOp::Add, *a, *b, d)
    }
    fn ascending(
        &mut self,
        k: u64,
        step: &mut prim::DotStep<'_, Self>,
    ) -> Result<(), CodegenError> {
        let (lo, hi) = (self.iconst(0), self.iconst(k as i64));
        self.emit_loop(lo, hi, step)
    }
}

/// Rows whose float reductions run interleaved ([`Lower::reduce_rows`]).
const ROW_GROUP: u64 = 4;

/// The transposes of block `b` that the GEMM reads as its `b` operand where their operand is,
/// by result: `t = transpose(x)` of a 2-D tile whose dtype has a micro-kernel GEMM
/// ([`super::gemm::entry`]), whose only use is as `b` (and nothing else) of a later
/// `matmul`/`matmul_acc` of the block, with only ops between that write no memory and no
/// variable ([`may_write`], `write`; `acc = matmul_acc(acc, a, transpose(w))` puts the reads and
/// loads of its other operands there). So `x` holds at the GEMM what the transpose would have
/// read (a tile changes only through a variable's writes); the GEMM packs `b`'s panels from
/// `x`'s rows, the bits of the copied transpose (a transpose moves elements, it computes
/// nothing).
pub(super) fn transposed_operands(
    f: &Function,
    b: &IrBlock,
    uses: &SecondaryMap<Value, usize>,
) -> EntitySet<Value> {
    let ops: Vec<&Op> = b.iter(&f.ops).collect();
    let mut out = EntitySet::new();
    for (i, op) in ops.iter().enumerate() {
        let (OpKind::Tile(TileOp::Transpose, x), Some(t)) = (&op.kind, op.result) else {
            continue;
        };
        let fits = matches!(f.ty(x[0]), Type::Tile(s, d) if s.rank() == 2 && super::gemm::entry(*d).is_some());
        if !fits || uses.get(t).copied() != Some(1) {
            continue;
        }
        // The first later op that uses `t` or may change memory.
        let next = ops[i + 1..].iter().find(|o| {
            o.kind.operands().contains(&t)
                || may_write(&o.kind)
                || matches!(o.kind, OpKind::Write(..))
        });
        // `t` must be the product's `b` and no other operand.
        let as_b = next.is_some_and(|o| {
            let OpKind::Tile(op, args) = &o.kind else {
                return false;
            };
            op.gemm_operands(args).is_some_and(|(_, _, &b)| b == t)
                && args.iter().filter(|&&v| v == t).count() == 1
        });
        if as_b {
            out.insert(t);
        }
    }
    out
}
