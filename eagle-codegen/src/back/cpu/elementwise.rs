//! Elementwise ops of the CPU backend: scalars, and tiles as SIMD loops over fused groups
//! (`crate::passes::fusion`) with the block plan that reads tiles in place; each primitive's
//! Cranelift form (`Lower::scalar_op`, `Lower::eval_vec_uncached`), float `min`/`max` with
//! the canonical NaN, and casts.

use super::*;
use eagle_ir::entity::EntitySet;
use eagle_ir::Elementwise;

impl Lower<'_, '_> {
    /// The memory of `x` when `op` is `r = cast x` to `x`'s own type and `x` is a materialised
    /// contiguous tile: a tile is never written after it is defined, so `r` is `x`'s memory
    /// (the identity `as f32` of a loaded `f32` tile copies nothing). `None` otherwise, and
    /// where `r` goes straight into a store's destination.
    fn same_tile(&self, op: &Op, r: Value) -> Option<ClValue> {
        let OpKind::Cast(x) = op.kind else {
            return None;
        };
        let materialised = !self.plan.lazy.contains(x)
            && !self.plan.views.contains(x)
            && !self.lazy_ops.contains_key(x)
            && !self.plan.direct.contains_key(r);
        match self.vals.get(x) {
            Some(Cv::Mem(p)) if materialised && self.f.ty(x) == self.f.ty(r) => Some(*p),
            _ => None,
        }
    }

    /// Lowers an elementwise op: a scalar op on scalars; on tiles, one loop (SIMD where every
    /// op of the fused tree has an exact lane-wise form, then a scalar tail) that evaluates the
    /// op and every single-use elementwise op feeding it ([`BlockPlan`]), reading loaded tiles
    /// in place where they are views, and writing straight into the store's destination when
    /// the op feeds exactly one contiguous store. Lane-wise IEEE arithmetic, so the results are
    /// bit-identical to the scalar path.
    pub(super) fn elementwise(&mut self, op: &Op) -> Result<Cv, CodegenError> {
        let f = self.f;
        let operands = op.kind.operands();
        let r = op
            .result
            .ok_or_else(|| self.err("elementwise op without result"))?;
        let rt = f.ty(r).clone();
        let in_dt: Vec<DType> = operands
            .iter()
            .map(|v| f.ty(*v).dtype().unwrap_or(DType::F32))
            .collect();
        match rt {
            Type::Scalar(rd) => {
                let xs = operands
                    .iter()
                    .map(|v| self.scalar(*v))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Cv::S(self.scalar_op(op, &xs, &in_dt, rd)?))
            }
            Type::Tile(shape, rd) => {
                if self.plan.lazy.contains(r) {
                    // Evaluated inside its consumer's loop.
                    self.lazy_ops.insert(r, op.clone());
                    return Ok(Cv::Mem(self.iconst(0)));
                }
                if let Some(same) = self.same_tile(op, r) {
                    return Ok(Cv::Mem(same));
                }
                if operands.iter().any(|v| self.plan.strided.contains_key(*v)) {
                    // `BlockPlan::strided` admits only the GEMM and identity casts as users.
                    return Err(self.err("internal: a strided block read as a contiguous tile"));
                }
                let numel = shape.numel().unwrap_or(0);
                let mut track = None;
                let mut copy_back = None;
                let dst = match self.plan.direct.get(r).cloned() {
                    Some(Direct {
                        store,
                        dst: dv,
                        offsets,
                        consts,
                        guard,
                    }) => {
                        for c in &consts {
                            self.op(c)?;
                        }
                        let dst_shape = f
                            .ty(dv)
                            .shape()
                            .and_then(|s| s.consts())
                            .unwrap_or_default();
                        let tile = shape.consts().unwrap_or_default();
                        let offs = self.offsets(&store, &offsets, &dst_shape, &tile)?;
                        let zero: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
                        let off = self.linear_with(&dst_shape, &offs, &zero, rd.size());
                        let base = self.mem(dv)?;
                        self.stored.insert(r, ());
                        // A store into symmetric memory: the runtime may track it (after
                        // the loop, as the copying store does after its copy).
                        if let Ok((id, woff)) = self.win(dv) {
                            let at = self.b.ins().iadd(woff, off);
                            let n = self.iconst((numel * rd.size() as u64) as i64);
                            track = Some((id, at, n));
                        }
                        let direct = self.b.ins().iadd(base, off);
                        // Views feeding the tree may overlap the destination (a sub-view of
                        // it, another window over the same buffer): then the loop writes a
                        // stack tile, copied over the destination after it.
                        let bytes = numel * rd.size() as u64;
                        let overlap = if guard {
                            self.overlap_with_views(op, &tile, direct, bytes)?
                        } else {
                            None
                        };
                        match overlap {
                            Some(overlap) => {
                                let tmp = self.stack(bytes);
                                let n = self.iconst(bytes as i64);
                                copy_back = Some((overlap, tmp, direct, n));
                                self.b.ins().select(overlap, tmp, direct)
                            }
                            None => direct,
                        }
                    }
                    None => self.stack(numel * rd.size() as u64),
                };
                self.lazy_ops.insert(r, op.clone());
                let done = self.simd_loop(r, rd, dst, numel)?;
                if done < numel {
                    let lo = self.iconst(done as i64);
                    let hi = self.iconst(numel as i64);
                    self.emit_loop(lo, hi, &mut |lw, i| {
                        let x = lw.eval_scalar(r, i, &mut HashMap::new())?;
                        let a = lw.elem_addr(dst, i, rd.size());
                        lw.b.ins().store(MemFlagsData::trusted(), x, a, 0);
                        Ok(())
                    })?;
                }
                if let Some((overlap, tmp, direct, n)) = copy_back {
                    let copy = self.b.create_block();
                    let cont = self.b.create_block();
                    self.b.ins().brif(overlap, copy, &[], cont, &[]);
                    self.b.switch_to_block(copy);
                    self.b.seal_block(copy);
                    self.b.call_memcpy(self.cfg, direct, tmp, n);
                    self.b.ins().jump(cont, &[]);
                    self.b.switch_to_block(cont);
                    self.b.seal_block(cont);
                }
                if let Some((id, at, n)) = track {
                    let st = self.call_hook(hook::TRACK_WRITE, &[id, at, n]);
                    self.check(st);
                }
                // Materialised: later uses read the tile, they do not re-evaluate the tree.
                self.lazy_ops.remove(r);
                Ok(Cv::Mem(dst))
            }
            t => Err(self.err(format!("elementwise result of type `{t}`"))),
        }
    }

    /// The SIMD part of computing the fused tree rooted at `r` (dtype `rd`, `numel` elements)
    /// into `dst`: one step covers `step` elements, every value of the DAG in 16-byte parts of
    /// its own lane width (an f32 root over f64 math: 4 elements, two f64 parts per f64
    /// value). Returns the elements done (0 when the tree has no SIMD form).
    fn simd_loop(
        &mut self,
        r: Value,
        rd: DType,
        dst: ClValue,
        numel: u64,
    ) -> Result<u64, CodegenError> {
        let simd = if rd != DType::Bool {
            self.simd_widths(r)
        } else {
            None
        };
        let step = simd.as_ref().map_or(1, |w| {
            16 / u64::from(w.values().copied().min().unwrap_or(16))
        });
        let nvec = if simd.is_some() { numel / step } else { 0 };
        if let (Some(widths), true) = (simd, nvec > 0) {
            let mut splats = HashMap::new();
            self.hoist_splats(r, &widths, &mut splats, &mut HashSet::new())?;
            let rparts = (step * rd.size() as u64 / 16) as u32;
            let rsize = rd.size() as i64;
            // Unrolled by `unroll` steps, then the remaining whole steps.
            // A large DAG is not unrolled: its values alone fill the registers. A
            // small tile (a row of a matmul's B) is unrolled whole: no loop, so the
            // addresses and splats it shares with an enclosing loop's other ops are
            // computed once per trip of that loop, not once per step.
            let unroll: u64 = if widths.len() > 24 {
                1
            } else if nvec <= FULL_UNROLL_STEPS && nvec * widths.len() as u64 <= FULL_UNROLL_VALUES
            {
                nvec
            } else {
                4
            };
            let groups = nvec / unroll;
            let emit = |lw: &mut Self, first: u64, count: u64, per: u64| {
                lw.emit_counted(count, &mut |lw, i| {
                    let e = lw.b.ins().imul_imm_s(i, (step * per) as i64);
                    let base = lw.b.ins().iadd_imm_s(e, (step * first) as i64);
                    // The steps of a group share one address per leaf; each step
                    // is an immediate displacement from it.
                    for u in 0..per {
                        let e0 = Elem {
                            base,
                            skip: (step * u) as i32,
                        };
                        let mut memo = HashMap::new();
                        for part in 0..rparts {
                            let x = lw.eval_vec(r, e0, part, &widths, &splats, &mut memo)?;
                            let off = lw.b.ins().imul_imm_s(base, rsize);
                            let a = lw.b.ins().iadd(dst, off);
                            let flags = MemFlagsData::new().with_notrap();
                            lw.b.ins().store(flags, x, a, e0.disp(rsize as u32, part));
                        }
                    }
                    Ok(())
                })
            };
            if groups > 0 {
                emit(self, 0, groups, unroll)?;
            }
            if nvec % unroll > 0 {
                emit(self, groups * unroll, nvec % unroll, 1)?;
            }
            return Ok(nvec * step);
        }
        Ok(0)
    }

    /// For an elementwise `root` about to be computed into `bytes` at `dst` (a store's
    /// destination): a run-time flag that some view (a load or remote load read in place)
    /// among the leaves of its fused tree overlaps the destination other than exactly (same
    /// start and shape: element `i` is read before it is written), or `None` when no leaf is
    /// a view. Views are addresses known only at run time (a sub-view, a second window over
    /// one buffer, a peer that is this rank), so the check is too.
    pub(super) fn overlap_with_views(
        &mut self,
        root: &Op,
        shape: &[u64],
        dst: ClValue,
        bytes: u64,
    ) -> Result<Option<ClValue>, CodegenError> {
        let mut leaves = vec![];
        let mut stack = root.kind.operands();
        let mut seen = HashSet::new();
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let Some(op) = self.lazy_ops.get(v) {
                stack.extend(op.kind.operands());
            } else if self.plan.views.contains(v) {
                leaves.push(v);
            }
        }
        if leaves.is_empty() {
            return Ok(None);
        }
        let f = self.f;
        let dend = self.b.ins().iadd_imm_s(dst, bytes as i64);
        let mut any = self.b.ins().iconst(types::I8, 0);
        for l in leaves {
            let (Type::Tile(ls, ld), lp) = (f.ty(l).clone(), self.mem(l)?) else {
                continue;
            };
            let lshape = ls.consts().unwrap_or_default();
            let lbytes = lshape.iter().product::<u64>() * ld.size() as u64;
            let lend = self.b.ins().iadd_imm_s(lp, lbytes as i64);
            let a = self.b.ins().icmp(IntCC::UnsignedLessThan, lp, dend);
            let b = self.b.ins().icmp(IntCC::UnsignedLessThan, dst, lend);
            let mut bad = self.b.ins().band(a, b);
            if lshape == shape && lbytes == bytes {
                let differ = self.b.ins().icmp(IntCC::NotEqual, lp, dst);
                bad = self.b.ins().band(bad, differ);
            }
            any = self.b.ins().bor(any, bad);
        }
        Ok(Some(any))
    }

    /// The lane width in bytes of every value of the fused DAG rooted at elementwise result
    /// `r` in its exact SIMD form (a `bool` mask has the width of the values it compares), or
    /// `None` when some op has none. The SIMD form computes what the scalar path does, lane by
    /// lane: IEEE arithmetic, compares as all-ones masks, `select` as a bit select, bit casts,
    /// and `f32` <-> `f64` conversions (exact one way, rounded to nearest even the other).
    pub(super) fn simd_widths(&self, r: Value) -> Option<HashMap<Value, u32>> {
        let mut w = HashMap::new();
        self.simd_width(r, &mut w)?;
        Some(w)
    }

    pub(super) fn simd_width(&self, v: Value, seen: &mut HashMap<Value, u32>) -> Option<u32> {
        if let Some(&w) = seen.get(&v) {
            return Some(w);
        }
        let d = self.f.ty(v).dtype()?;
        // Lanes of the value's own width; of the storage dtypes, the 16-bit ones (their
        // patterns reach the vector ops only through bitcasts and the integer casts below:
        // `narrow` computes their arithmetic in the compute dtype).
        let lane = |d: DType| -> Option<u32> {
            (d != DType::Bool && (!d.is_narrow() || d.size() == 2)).then_some(d.size() as u32)
        };
        let w = match self.lazy_ops.get(v) {
            // A leaf: a tile in memory, or a scalar splatted to every lane.
            None => lane(d)?,
            Some(op) => {
                let dt = |o: Value| self.f.ty(o).dtype();
                let scalar = |o: Value| matches!(self.f.ty(o), Type::Scalar(_));
                match op.kind.as_elementwise()? {
                    Elementwise::Binary(b, x, y) => {
                        let ok = match b {
                            BinOp::Add | BinOp::Sub => d.is_float() || d.is_int(),
                            BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => d.is_float(),
                            BinOp::And | BinOp::Or | BinOp::Xor => d.is_int() || d == DType::Bool,
                            // A vector shift takes one amount for every lane: a scalar.
                            BinOp::Shl => d.is_int() && scalar(y),
                            BinOp::Shr => d.is_int() && scalar(y),
                            BinOp::Rem => false,
                        };
                        if !ok {
                            return None;
                        }
                        if matches!(b, BinOp::Shl | BinOp::Shr) {
                            let wx = self.simd_width(x, seen)?;
                            (dt(x) == Some(d)).then_some(wx)?
                        } else {
                            let (wx, wy) = (self.simd_width(x, seen)?, self.simd_width(y, seen)?);
                            let same = dt(x) == Some(d) && dt(y) == Some(d) && wx == wy;
                            same.then_some(wx)?
                        }
                    }
                    Elementwise::Unary(u, x) => {
                        let ok = match u {
                            UnOp::Neg | UnOp::Abs | UnOp::Sqrt => d.is_float(),
                            UnOp::Not => d.is_int() || d == DType::Bool,
                        };
                        let wx = self.simd_width(x, seen)?;
                        (ok && dt(x) == Some(d)).then_some(wx)?
                    }
                    Elementwise::Cmp(_, x, y) => {
                        let (wx, wy) = (self.simd_width(x, seen)?, self.simd_width(y, seen)?);
                        let dx = dt(x)?;
                        (dx != DType::Bool && dt(y) == Some(dx) && wx == wy).then_some(wx)?
                    }
                    Elementwise::Select(m, x, y) => {
                        let wm = self.simd_width(m, seen)?;
                        let (wx, wy) = (self.simd_width(x, seen)?, self.simd_width(y, seen)?);
                        let ok = dt(x) == Some(d) && dt(y) == Some(d) && wx == wy && wm == wx;
                        // A scalar condition is not a mask.
                        (ok && !scalar(m)).then_some(wx)?
                    }
                    Elementwise::Fma(a, b, c) => {
                        // Cranelift's vector `fma` rounds once per lane, as the scalar one does.
                        let wa = self.simd_width(a, seen)?;
                        let (wb, wc) = (self.simd_width(b, seen)?, self.simd_width(c, seen)?);
                        let same = [a, b, c].iter().all(|&o| dt(o) == Some(d));
                        (d.is_float() && same && wa == wb && wb == wc).then_some(wa)?
                    }
                    Elementwise::Bitcast(x) => {
                        let wx = self.simd_width(x, seen)?;
                        (lane(d)? == wx).then_some(wx)?
                    }
                    Elementwise::Cast(x) => {
                        let wx = self.simd_width(x, seen)?;
                        let from = dt(x)?;
                        if from == d {
                            // To its own dtype: the operand's lanes.
                            seen.insert(v, wx);
                            return Some(wx);
                        }
                        let ok = matches!(
                            (from, d),
                            (DType::F32, DType::F64)
                                | (DType::F64, DType::F32)
                                | (DType::U16, DType::U32)
                                | (DType::I16, DType::I32)
                        );
                        ok.then_some(d.size() as u32)?
                    }
                }
            }
        };
        seen.insert(v, w);
        Some(w)
    }

    /// The SIMD type of `v`'s parts: its dtype in lanes of `w` bytes (a mask: integers).
    pub(super) fn simd_type(&self, v: Value, w: u32) -> ClType {
        let d = self.f.ty(v).dtype().unwrap_or(DType::F32);
        let lane = if d == DType::Bool {
            ClType::int(w as u16 * 8).unwrap_or(types::I64)
        } else {
            cl_type(d)
        };
        lane.by(16 / w).unwrap_or(types::I64X2)
    }

    /// Splats every scalar leaf of the DAG (not shift amounts) once, before the loop.
    pub(super) fn hoist_splats(
        &mut self,
        v: Value,
        widths: &HashMap<Value, u32>,
        out: &mut HashMap<Value, ClValue>,
        seen: &mut HashSet<Value>,
    ) -> Result<(), CodegenError> {
        if let Some(op) = self.lazy_ops.get(v).cloned() {
            let amount = if let OpKind::Binary(BinOp::Shl | BinOp::Shr, _, y) = &op.kind {
                Some(*y)
            } else {
                None
            };
            for o in op.kind.operands() {
                if Some(o) != amount && seen.insert(o) {
                    self.hoist_splats(o, widths, out, seen)?;
                }
            }
        } else if matches!(self.f.ty(v), Type::Scalar(_)) && !out.contains_key(&v) {
            let vty = self.simd_type(v, widths.get(&v).copied().unwrap_or(8));
            let x = self.scalar(v)?;
            let sp = self.b.ins().splat(vty, x);
            out.insert(v, sp);
        }
        Ok(())
    }

    /// Part `part` (16 bytes) of `v`'s lanes in the SIMD step starting at element `e0` of the
    /// fused DAG rooted at the elementwise result being lowered.
    pub(super) fn eval_vec(
        &mut self,
        v: Value,
        e0: Elem,
        part: u32,
        widths: &HashMap<Value, u32>,
        splats: &HashMap<Value, ClValue>,
        memo: &mut HashMap<(Value, u32), ClValue>,
    ) -> Result<ClValue, CodegenError> {
        if let Some(sp) = splats.get(&v).or(memo.get(&(v, part))) {
            return Ok(*sp);
        }
        let x = self.eval_vec_uncached(v, e0, part, widths, splats, memo)?;
        memo.insert((v, part), x);
        Ok(x)
    }

    pub(super) fn eval_vec_uncached(
        &mut self,
        v: Value,
        e0: Elem,
        part: u32,
        widths: &HashMap<Value, u32>,
        splats: &HashMap<Value, ClValue>,
        memo: &mut HashMap<(Value, u32), ClValue>,
    ) -> Result<ClValue, CodegenError> {
        let w = widths.get(&v).copied().unwrap_or(8);
        let vty = self.simd_type(v, w);
        let little = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
        let Some(op) = self.lazy_ops.get(v).cloned() else {
            let p = self.mem(v)?;
            let off = self.b.ins().imul_imm_s(e0.base, w as i64);
            let a = self.b.ins().iadd(p, off);
            let flags = MemFlagsData::new().with_notrap();
            return Ok(self.b.ins().load(vty, flags, a, e0.disp(w, part)));
        };
        let d = self.f.ty(v).dtype().unwrap_or(DType::F32);
        // The two kinds whose vector form is not the scalar one lane by lane.
        if let OpKind::Cast(x) = &op.kind {
            let wx = widths.get(x).copied().unwrap_or(8);
            let from = self.f.ty(*x).dtype().unwrap_or(DType::F32);
            if from == d {
                return self.eval_vec(*x, e0, part, widths, splats, memo);
            }
            if matches!(from, DType::U16 | DType::I16) {
                // 16 -> 32 bits: part `part` holds the low or high half of a 16-bit part,
                // each lane zero- or sign-extended (Rust's `as`).
                let src = self.eval_vec(*x, e0, part / 2, widths, splats, memo)?;
                return Ok(match (from == DType::I16, part % 2 == 1) {
                    (false, false) => self.b.ins().uwiden_low(src),
                    (false, true) => self.b.ins().uwiden_high(src),
                    (true, false) => self.b.ins().swiden_low(src),
                    (true, true) => self.b.ins().swiden_high(src),
                });
            }
            return Ok(if wx < w {
                // f32 -> f64: part `part` holds lanes 2*part%4.. of an f32 part.
                let src = self.eval_vec(*x, e0, part / 2, widths, splats, memo)?;
                let src = if part % 2 == 1 {
                    let b = self.b.ins().bitcast(types::I8X16, little, src);
                    let mask: Vec<u8> = (8..16).chain(0..8).collect();
                    let imm = self.b.func.dfg.immediates.push(mask.as_slice().into());
                    let sh = self.b.ins().shuffle(b, b, imm);
                    self.b.ins().bitcast(types::F32X4, little, sh)
                } else {
                    src
                };
                self.b.ins().fvpromote_low(src)
            } else {
                // f64 -> f32: two f64 parts demoted into one f32 part.
                let lo = self.eval_vec(*x, e0, 2 * part, widths, splats, memo)?;
                let hi = self.eval_vec(*x, e0, 2 * part + 1, widths, splats, memo)?;
                let (lo, hi) = (self.b.ins().fvdemote(lo), self.b.ins().fvdemote(hi));
                let lo = self.b.ins().bitcast(types::I64X2, little, lo);
                let hi = self.b.ins().bitcast(types::I64X2, little, hi);
                let h0 = self.b.ins().extractlane(hi, 0);
                let both = self.b.ins().insertlane(lo, h0, 1);
                self.b.ins().bitcast(types::F32X4, little, both)
            });
        }
        if let OpKind::Binary(b @ (BinOp::Shl | BinOp::Shr), x, y) = &op.kind {
            let xv = self.eval_vec(*x, e0, part, widths, splats, memo)?;
            let amount = self.scalar(*y)?;
            // The rule on a vector and its scalar amount (`sshr.i64x2` has no SSE
            // instruction and lowers to a short sequence, still cheaper than leaving the
            // whole DAG scalar).
            let mut e = super::prim::ClPrim { lw: self, d };
            return Ok(eagle_ir::prim::shift(
                &mut e,
                *b == BinOp::Shl,
                &xv,
                &amount,
            ));
        }
        let xs = op
            .kind
            .operands()
            .into_iter()
            .map(|o| self.eval_vec(o, e0, part, widths, splats, memo))
            .collect::<Result<Vec<_>, _>>()?;
        if d.is_float() {
            if let OpKind::Binary(bop @ (BinOp::Min | BinOp::Max), ..) = &op.kind {
                return Ok(self.float_min_max(*bop, xs[0], xs[1]));
            }
        }
        Ok(match (&op.kind, d.is_float()) {
            (OpKind::Binary(BinOp::Add, ..), true) => self.b.ins().fadd(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Sub, ..), true) => self.b.ins().fsub(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Mul, ..), true) => self.b.ins().fmul(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Div, ..), true) => self.b.ins().fdiv(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Add, ..), false) => self.b.ins().iadd(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Sub, ..), false) => self.b.ins().isub(xs[0], xs[1]),
            (OpKind::Binary(BinOp::And, ..), _) => self.b.ins().band(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Or, ..), _) => self.b.ins().bor(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Xor, ..), _) => self.b.ins().bxor(xs[0], xs[1]),
            (OpKind::Unary(UnOp::Neg, _), _) => self.b.ins().fneg(xs[0]),
            (OpKind::Unary(UnOp::Abs, _), _) => self.b.ins().fabs(xs[0]),
            (OpKind::Unary(UnOp::Sqrt, _), _) => self.b.ins().sqrt(xs[0]),
            (OpKind::Unary(UnOp::Not, _), _) => self.b.ins().bnot(xs[0]),
            (OpKind::Cmp(c, x, _), _) => {
                let dx = self.f.ty(*x).dtype().unwrap_or(DType::F64);
                if dx.is_float() {
                    self.b.ins().fcmp(float_cc(*c), xs[0], xs[1])
                } else {
                    self.b.ins().icmp(int_cc(*c, dx.is_signed()), xs[0], xs[1])
                }
            }
            (OpKind::Select(..), _) => {
                let m = self.b.ins().bitcast(vty, little, xs[0]);
                self.b.ins().bitselect(m, xs[1], xs[2])
            }
            (OpKind::Bitcast(_), _) => self.b.ins().bitcast(vty, little, xs[0]),
            (OpKind::Fma(..), true) => self.b.ins().fma(xs[0], xs[1], xs[2]),
            _ => return Err(self.err("op has no SIMD form")),
        })
    }

    /// Float `min`/`max` of scalars or SIMD vectors: Cranelift's `fmin`/`fmax` (IEEE 754-2019
    /// minimum/maximum), with a NaN result replaced by the canonical NaN of
    /// [`eagle_ir::eval::CANONICAL_NAN_F32`] / [`eagle_ir::eval::CANONICAL_NAN_F64`], whose bits
    /// would otherwise depend on the instruction selected and on the operand order.
    pub(super) fn float_min_max(&mut self, bop: BinOp, a: ClValue, b: ClValue) -> ClValue {
        let r = if bop == BinOp::Min {
            self.b.ins().fmin(a, b)
        } else {
            self.b.ins().fmax(a, b)
        };
        let ty = self.b.func.dfg.value_type(r);
        let nan = if ty.lane_type() == types::F32 {
            self.b
                .ins()
                .f32const(f32::from_bits(eagle_ir::eval::CANONICAL_NAN_F32))
        } else {
            self.b
                .ins()
                .f64const(f64::from_bits(eagle_ir::eval::CANONICAL_NAN_F64))
        };
        let unordered = self.b.ins().fcmp(FloatCC::Unordered, r, r);
        if ty.is_vector() {
            let nans = self.b.ins().splat(ty, nan);
            let flags =
                MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
            let mask = self.b.ins().bitcast(ty, flags, unordered);
            self.b.ins().bitselect(mask, nans, r)
        } else {
            self.b.ins().select(unordered, nan, r)
        }
    }

    /// Element `i` of the fused tree rooted at `v`.
    /// The element `i` of the fused DAG rooted at `v`; `memo` holds the elements already
    /// computed for this `i` (a value with several users in the DAG is computed once).
    pub(super) fn eval_scalar(
        &mut self,
        v: Value,
        i: ClValue,
        memo: &mut HashMap<Value, ClValue>,
    ) -> Result<ClValue, CodegenError> {
        if let Some(x) = memo.get(&v) {
            return Ok(*x);
        }
        let x = self.eval_scalar_uncached(v, i, memo)?;
        memo.insert(v, x);
        Ok(x)
    }

    pub(super) fn eval_scalar_uncached(
        &mut self,
        v: Value,
        i: ClValue,
        memo: &mut HashMap<Value, ClValue>,
    ) -> Result<ClValue, CodegenError> {
        let Some(op) = self.lazy_ops.get(v).cloned() else {
            return match (self.cv(v)?, self.f.ty(v)) {
                (Cv::Mem(p), Type::Tile(_, d)) => {
                    let d = *d;
                    let a = self.elem_addr(p, i, d.size());
                    Ok(self.b.ins().load(cl_type(d), MemFlagsData::trusted(), a, 0))
                }
                _ => self.scalar(v),
            };
        };
        let operands = op.kind.operands();
        let in_dt: Vec<DType> = operands
            .iter()
            .map(|o| self.f.ty(*o).dtype().unwrap_or(DType::F32))
            .collect();
        let xs = operands
            .into_iter()
            .map(|o| self.eval_scalar(o, i, memo))
            .collect::<Result<Vec<_>, _>>()?;
        let rd = self.f.ty(v).dtype().unwrap_or(DType::F32);
        self.scalar_op(&op, &xs, &in_dt, rd)
    }

    pub(super) fn scalar_op(
        &mut self,
        op: &Op,
        xs: &[ClValue],
        in_dt: &[DType],
        rd: DType,
    ) -> Result<ClValue, CodegenError> {
        let d = in_dt.first().copied().unwrap_or(rd);
        Ok(match &op.kind {
            OpKind::Binary(bop, ..) => {
                let (a, b) = (xs[0], xs[1]);
                if d.is_float() {
                    match bop {
                        BinOp::Add => self.b.ins().fadd(a, b),
                        BinOp::Sub => self.b.ins().fsub(a, b),
                        BinOp::Mul => self.b.ins().fmul(a, b),
                        BinOp::Div => self.b.ins().fdiv(a, b),
                        BinOp::Min | BinOp::Max => self.float_min_max(*bop, a, b),
                        _ => return Err(self.err(format!("`{}` on floats", bop.name()))),
                    }
                } else {
                    let signed = d.is_signed();
                    match bop {
                        BinOp::Add => self.b.ins().iadd(a, b),
                        BinOp::Sub => self.b.ins().isub(a, b),
                        BinOp::Mul => self.b.ins().imul(a, b),
                        BinOp::Div | BinOp::Rem => {
                            let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                            let bb = self.widen_i64(b, d);
                            let lim = self.iconst(0);
                            let msg =
                                crate::sites::division_by_zero(&self.f.name, &self.site_op(op));
                            self.fault_if(zero, msg, bb, lim);
                            let mut e = super::prim::ClPrim { lw: self, d };
                            if *bop == BinOp::Div {
                                eagle_ir::prim::idiv(&mut e, &a, &b)
                            } else {
                                eagle_ir::prim::irem(&mut e, &a, &b)
                            }
                        }
                        BinOp::Min if signed => self.b.ins().smin(a, b),
                        BinOp::Min => self.b.ins().umin(a, b),
                        BinOp::Max if signed => self.b.ins().smax(a, b),
                        BinOp::Max => self.b.ins().umax(a, b),
                        BinOp::And => self.b.ins().band(a, b),
                        BinOp::Or => self.b.ins().bor(a, b),
                        BinOp::Xor => self.b.ins().bxor(a, b),
                        BinOp::Shl | BinOp::Shr => {
                            let mut e = super::prim::ClPrim { lw: self, d };
                            eagle_ir::prim::shift(&mut e, *bop == BinOp::Shl, &a, &b)
                        }
                    }
                }
            }
            OpKind::Unary(u, _) => {
                let a = xs[0];
                match (u, d.is_float()) {
                    (UnOp::Neg, true) => self.b.ins().fneg(a),
                    (UnOp::Neg, false) => self.b.ins().ineg(a),
                    (UnOp::Not, _) if d == DType::Bool => self.b.ins().bxor_imm_s(a, 1),
                    (UnOp::Not, _) => self.b.ins().bnot(a),
                    (UnOp::Sqrt, _) => self.b.ins().sqrt(a),
                    (UnOp::Abs, true) => self.b.ins().fabs(a),
                    (UnOp::Abs, false) if d.is_signed() => self.b.ins().iabs(a),
                    // `abs` of an unsigned integer is the integer (eagle_ir::eval::unary).
                    (UnOp::Abs, false) => a,
                }
            }
            OpKind::Fma(..) => self.b.ins().fma(xs[0], xs[1], xs[2]),
            OpKind::Cmp(c, ..) => {
                let (a, b) = (xs[0], xs[1]);
                if d.is_float() {
                    self.b.ins().fcmp(float_cc(*c), a, b)
                } else {
                    self.b.ins().icmp(int_cc(*c, d.is_signed()), a, b)
                }
            }
            OpKind::Select(..) => self.b.ins().select(xs[0], xs[1], xs[2]),
            OpKind::Cast(_) => self.cast(xs[0], d, rd),
            // A 16-bit float and a 16-bit integer share the register type.
            OpKind::Bitcast(_) if cl_type(d) == cl_type(rd) => xs[0],
            OpKind::Bitcast(_) => self
                .b
                .ins()
                .bitcast(cl_type(rd), MemFlagsData::new(), xs[0]),
            _ => return Err(self.err("not an elementwise op")),
        })
    }

    pub(super) fn cast(&mut self, x: ClValue, from: DType, to: DType) -> ClValue {
        let (ft, tt) = (cl_type(from), cl_type(to));
        if from == to || (ft == tt && !from.is_float() && to != DType::Bool) {
            return x;
        }
        if to == DType::Bool {
            return if from.is_float() {
                let z = if ft == types::F32 {
                    self.b.ins().f32const(0.0)
                } else {
                    self.b.ins().f64const(0.0)
                };
                self.b.ins().fcmp(FloatCC::NotEqual, x, z)
            } else {
                self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
            };
        }
        match (from.is_float(), to.is_float()) {
            (true, true) => {
                if ft == types::F32 {
                    self.b.ins().fpromote(tt, x)
                } else {
                    self.b.ins().fdemote(tt, x)
                }
            }
            (false, true) => {
                if from.is_signed() {
                    self.b.ins().fcvt_from_sint(tt, x)
                } else {
                    self.b.ins().fcvt_from_uint(tt, x)
                }
            }
            (true, false) => {
                // Rust `as`: saturating, NaN to 0. `usize` (Index) saturates as an unsigned
                // type, so a negative float becomes index 0, as in Rust.
                if to.is_signed() && to != DType::Index {
                    self.b.ins().fcvt_to_sint_sat(tt, x)
                } else {
                    self.b.ins().fcvt_to_uint_sat(tt, x)
                }
            }
            (false, false) => {
                let (fb, tb) = (ft.bits(), tt.bits());
                if fb > tb {
                    self.b.ins().ireduce(tt, x)
                } else if from.is_signed() && from != DType::Bool {
                    self.b.ins().sextend(tt, x)
                } else {
                    self.b.ins().uextend(tt, x)
                }
            }
        }
    }
}

/// The Cranelift condition of a float comparison (ordered: false with a NaN, except `ne`).
pub(super) fn float_cc(c: CmpOp) -> FloatCC {
    match c {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

/// The Cranelift condition of an integer comparison of the given signedness.
pub(super) fn int_cc(c: CmpOp, signed: bool) -> IntCC {
    match (c, signed) {
        (CmpOp::Eq, _) => IntCC::Equal,
        (CmpOp::Ne, _) => IntCC::NotEqual,
        (CmpOp::Lt, true) => IntCC::SignedLessThan,
        (CmpOp::Lt, false) => IntCC::UnsignedLessThan,
        (CmpOp::Le, true) => IntCC::SignedLessThanOrEqual,
        (CmpOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
        (CmpOp::Gt, true) => IntCC::SignedGreaterThan,
        (CmpOp::Gt, false) => IntCC::UnsignedGreaterThan,
        (CmpOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (CmpOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
    }
}

/// Emits the copy of one row: (lowering, row index per dim, row bytes).
pub(super) type RowFn<'r, L> = dyn FnMut(&mut L, &[ClValue], u64) -> Result<(), CodegenError> + 'r;

/// The constant shapes of a load's tile `r` and of its source `src`.
fn load_shapes(f: &Function, r: Value, src: Value) -> Option<(Vec<u64>, Vec<u64>)> {
    let consts = |v: Value| f.ty(v).shape().and_then(|s| s.consts());
    Some((consts(r)?, consts(src)?))
}

/// The ops of this block that use `v` (indices into it), when it has some and no use
/// elsewhere: `users` holds this block's top-level ops only, `uses` counts every use in the
/// function, nested blocks included.
fn block_only_users<'u>(
    users: &'u SecondaryMap<Value, Vec<usize>>,
    uses: &SecondaryMap<Value, usize>,
    v: Value,
) -> Option<&'u [usize]> {
    let us = users.get(v)?;
    (!us.is_empty() && uses.get(v).copied().unwrap_or(0) == us.len()).then_some(&us[..])
}

/// Whether a `tile` region of an array of `shape` is one contiguous run of memory.
pub(super) fn contiguous(tile: &[u64], shape: &[u64]) -> bool {
    if tile.len() != shape.len() {
        return false;
    }
    match tile.iter().position(|&t| t > 1) {
        None => true,
        Some(first) => (first + 1..tile.len()).all(|d| tile[d] == shape[d]),
    }
}

/// The first element of one SIMD step of an elementwise tile: `base + skip` (an element
/// index), with `skip` a constant, so that the unrolled steps of a group address their leaves
/// from one run-time address each, by immediate displacements.
#[derive(Clone, Copy)]
pub(super) struct Elem {
    pub(super) base: ClValue,
    pub(super) skip: i32,
}

impl Elem {
    /// The byte displacement of 16-byte part `part` of a value in lanes of `w` bytes.
    pub(super) fn disp(self, w: u32, part: u32) -> i32 {
        self.skip * w as i32 + 16 * part as i32
    }
}

/// The most SIMD steps of one elementwise tile that are unrolled whole (16 steps: a row of
/// 64 f32 or 32 f64).
pub(super) const FULL_UNROLL_STEPS: u64 = 16;

/// The most values (steps times DAG values) a whole unroll may emit.
pub(super) const FULL_UNROLL_VALUES: u64 = 256;

/// How the tiles of one block are lowered without copies:
/// - `views`: loads read in place (contiguous, used only by elementwise ops and tile ops of
///   the block before any op that may write memory);
/// - `lazy`: single-use elementwise ops evaluated inside their consumer's loop;
/// - `direct`: elementwise results written straight into the destination of the contiguous
///   tensor or window store that follows them (only constants in between) when no view of
///   the same buffer at other offsets feeds them.
/// - `strided`: `[r, c]` blocks of 2-D `f32`/`f64` buffers read in place by the GEMM, rows
///   the buffer's row length apart (the value: that length in elements), when every use is as
///   operand `a` or `b` of a `matmul`/`matmul_acc`, directly or through an identity cast
///   (which is recorded too), before any op that may write memory.
#[derive(Debug, Default)]
pub(super) struct BlockPlan {
    pub(super) views: EntitySet<Value>,
    pub(super) lazy: EntitySet<Value>,
    pub(super) direct: SecondaryMap<Value, Direct>,
    pub(super) strided: SecondaryMap<Value, u64>,
}

/// The store an elementwise result is computed into ([`BlockPlan::direct`]).
#[derive(Debug, Clone)]
pub(super) struct Direct {
    /// The `store` op.
    pub(super) store: Op,
    /// Its destination (a tensor or window).
    pub(super) dst: Value,
    /// Its offsets.
    pub(super) offsets: Vec<Value>,
    /// The constants between the result and the store, lowered with the result (the offsets
    /// need them); lowering them again where they stand is harmless.
    pub(super) consts: Vec<Op>,
    /// Whether some view feeding the result may overlap the destination: checked at run
    /// time (`Lower::overlap_with_views`), falling back to a stack tile and a copy.
    pub(super) guard: bool,
}

impl BlockPlan {
    pub(super) fn of(
        f: &Function,
        b: &IrBlock,
        uses: &SecondaryMap<Value, usize>,
        equal: &SecondaryMap<Value, Value>,
    ) -> BlockPlan {
        let ops: &[&Op] = &b.iter(&f.ops).collect::<Vec<_>>();
        let users = crate::passes::fusion::block_users(ops);
        let writes_between = |a: usize, z: usize| (a + 1..z).any(|k| may_write(&ops[k].kind));
        let mut plan = BlockPlan::default();
        for r in fusion_roots(f, ops, uses, |_| true).keys() {
            plan.lazy.insert(r);
        }
        // Where each elementwise result is materialised (its own op, or its consumer's).
        let mut mat: SecondaryMap<Value, usize> = SecondaryMap::new();
        for (k, op) in ops.iter().enumerate().rev() {
            if let Some(r) = op.result {
                if is_elementwise(&op.kind) {
                    let at = if plan.lazy.contains(r) {
                        users
                            .get(r)
                            .and_then(|u| u.first())
                            .and_then(|&c| ops[c].result)
                            .and_then(|c| mat.get(c).copied())
                            .unwrap_or(k)
                    } else {
                        k
                    };
                    mat.insert(r, at);
                }
            }
        }
        // Loads (and remote loads, through `get_view`) read in place.
        for (k, op) in ops.iter().enumerate() {
            let (Some(r), OpKind::Load { src, .. } | OpKind::RemoteLoad { src, .. }) =
                (op.result, &op.kind)
            else {
                continue;
            };
            let Some((ts, ss)) = load_shapes(f, r, *src) else {
                continue;
            };
            let Some(us) = block_only_users(&users, uses, r) else {
                continue;
            };
            if !contiguous(&ts, &ss) {
                continue;
            }
            let mut last = k;
            let mut ok = true;
            for &u in us {
                // A tile op or a math kernel reads its operands where it stands (`reshape`
                // passes its operand's memory on, so it takes a copy).
                let k = &ops[u].kind;
                let read_at = if matches!(k, OpKind::Tile(t, _) if *t != eagle_ir::TileOp::Reshape)
                    || matches!(k, OpKind::Math(..))
                {
                    Some(u)
                } else if is_elementwise(k) {
                    ops[u].result.and_then(|x| mat.get(x).copied())
                } else {
                    None
                };
                match read_at {
                    Some(m) => last = last.max(m),
                    None => ok = false,
                }
            }
            if ok && !writes_between(k, last) {
                plan.views.insert(r);
            }
        }
        Self::direct_stores(f, ops, uses, equal, &mut plan);
        Self::strided_blocks(f, ops, &users, uses, &mut plan);
        plan
    }

    /// The loads of [`BlockPlan::strided`].
    fn strided_blocks(
        f: &Function,
        ops: &[&Op],
        users: &SecondaryMap<Value, Vec<usize>>,
        uses: &SecondaryMap<Value, usize>,
        plan: &mut BlockPlan,
    ) {
        // Whether every use of `v` (all in this block) is as a GEMM's `a` or `b`; the index of
        // the last.
        let gemm_operand = |v: Value| -> Option<usize> {
            let us = block_only_users(users, uses, v)?;
            let ok = us.iter().all(|&u| {
                let OpKind::Tile(t, args) = &ops[u].kind else {
                    return false;
                };
                t.gemm_operands(args)
                    .is_some_and(|(c, &a, &b)| (a == v || b == v) && c != Some(&v))
            });
            ok.then(|| us.iter().copied().max().unwrap_or(0))
        };
        for (k, op) in ops.iter().enumerate() {
            let (Some(r), OpKind::Load { src, .. }) = (op.result, &op.kind) else {
                continue;
            };
            let Some((ts, ss)) = load_shapes(f, r, *src) else {
                continue;
            };
            let gemm_dtype = matches!(f.ty(r).dtype(), Some(DType::F32 | DType::F64));
            if !gemm_dtype || plan.views.contains(r) || ts.len() != 2 || ss.len() != 2 {
                continue;
            }
            // Directly, or through one identity cast (`load(w, ..) as f32` of `f32` weights).
            let through = block_only_users(users, uses, r).and_then(|us| {
                let &[u] = us else { return None };
                let c = ops[u].result?;
                let cast = matches!(ops[u].kind, OpKind::Cast(_));
                (cast && f.ty(c) == f.ty(r) && !plan.lazy.contains(c)).then_some(c)
            });
            let Some(last) = gemm_operand(through.unwrap_or(r)) else {
                continue;
            };
            if (k + 1..last).any(|j| may_write(&ops[j].kind)) {
                continue;
            }
            plan.strided.insert(r, ss[1]);
            if let Some(c) = through {
                plan.strided.insert(c, ss[1]);
            }
        }
    }

    /// The elementwise tile results stored whole right after they are computed: computed
    /// into the store's destination (`BlockPlan::direct`).
    fn direct_stores(
        f: &Function,
        ops: &[&Op],
        uses: &SecondaryMap<Value, usize>,
        equal: &SecondaryMap<Value, Value>,
        plan: &mut BlockPlan,
    ) {
        let same = |a: &[Value], b: &[Value]| {
            let rep = |v: &Value| *equal.get(*v).unwrap_or(v);
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| rep(x) == rep(y))
        };
        let def_of: SecondaryMap<Value, &Op> = ops
            .iter()
            .filter_map(|&o| o.result.map(|r| (r, o)))
            .collect();
        let sources = view_sources(f);
        let root = |mut v: Value| {
            while let Some(&s) = sources.get(v) {
                v = s;
            }
            v
        };
        let tile_of = |v: Value| matches!(f.ty(v), Type::Tile(..));
        // In-place stores.
        let base = |mut v: Value| -> Value {
            while let Some(OpKind::Slice { src, .. } | OpKind::Subview { src, .. }) =
                def_of.get(v).map(|o| &o.kind)
            {
                v = *src;
            }
            v
        };
        for (k, op) in ops.iter().enumerate() {
            let Some(r) = op.result else { continue };
            if !is_elementwise(&op.kind)
                || !tile_of(r)
                || plan.lazy.contains(r)
                || uses.get(r) != Some(&1)
            {
                continue;
            }
            // The store's offsets are often constants defined between the two: they are
            // lowered early, with the root (`BlockPlan::direct`).
            let consts: Vec<Op> = ops[k + 1..]
                .iter()
                .take_while(|o| matches!(o.kind, OpKind::Const(_)))
                .map(|&o| o.clone())
                .collect();
            let Some(next) = ops.get(k + 1 + consts.len()) else {
                continue;
            };
            let OpKind::Store {
                value,
                dst,
                offsets,
            } = &next.kind
            else {
                continue;
            };
            if *value != r || !matches!(f.ty(*dst), Type::Tensor(..) | Type::Window(..)) {
                continue;
            }
            let (Some(ts), Some(ds)) = (
                f.ty(r).shape().and_then(|s| s.consts()),
                f.ty(*dst).shape().and_then(|s| s.consts()),
            ) else {
                continue;
            };
            if !contiguous(&ts, &ds) {
                continue;
            }
            // Leaves of the fused tree that are views of the same buffer at other offsets
            // would be overwritten before they are read: not direct. A view that is not
            // provably disjoint from the destination or exactly on it (same buffer value,
            // offsets and shape) gets a run-time overlap check (`guard`): sub-views and
            // windows (two windows may share a buffer) can overlap in ways only addresses tell.
            // Distinct tensor parameters never overlap (the platforms copy inputs that would).
            let mut stack = vec![r];
            let mut seen = HashSet::new();
            let mut safe = true;
            let mut guard = false;
            while let Some(v) = stack.pop() {
                if !seen.insert(v) {
                    continue; // a DAG: each value once
                }
                let Some(d) = def_of.get(v) else {
                    continue;
                };
                if plan.lazy.contains(v) || v == r {
                    stack.extend(d.kind.operands());
                } else if let OpKind::Load { src, offsets: lo }
                | OpKind::RemoteLoad {
                    src, offsets: lo, ..
                } = &d.kind
                {
                    if !plan.views.contains(v) {
                        continue;
                    }
                    if base(*src) == base(*dst) && !same(lo, offsets) {
                        safe = false;
                    }
                    let exact = same(&[*src], &[*dst])
                        && same(lo, offsets)
                        && f.ty(v).shape() == f.ty(r).shape();
                    let (rs, rd) = (root(*src), root(*dst));
                    let tensor_param = |x: Value| {
                        f.params.iter().any(|p| p.value == x) && matches!(f.ty(x), Type::Tensor(..))
                    };
                    let disjoint = rs != rd && tensor_param(rs) && tensor_param(rd);
                    guard |= !exact && !disjoint;
                }
            }
            if safe {
                plan.direct.insert(
                    r,
                    Direct {
                        store: (*next).clone(),
                        dst: *dst,
                        offsets: offsets.clone(),
                        consts,
                        guard,
                    },
                );
            }
        }
    }
}

/// The buffer every sub-view and slice of `f` views (through chains of them), by result.
pub(super) fn view_sources(f: &Function) -> SecondaryMap<Value, Value> {
    let mut out = SecondaryMap::new();
    f.walk(&mut |op| {
        if let (OpKind::Slice { src, .. } | OpKind::Subview { src, .. }, Some(r)) =
            (&op.kind, op.result)
        {
            out.insert(r, *src);
        }
    });
    out
}
