//! Memory ops of the CPU backend: views (`slice`, `subview`), tile loads and stores, element
//! access, remote data movement (`put`, `get`, remote loads and stores), signals, and the
//! address arithmetic they share.

use super::elementwise::RowFn;
use super::*;

impl Lower<'_, '_> {
    /// Slices and sub-views of tensors and windows.
    pub(super) fn lower_view(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::Slice { src, index } => {
                let base = self.mem(*src)?;
                let st = f.ty(*src).clone();
                let dims = st.shape().and_then(|s| s.consts()).unwrap_or_default();
                let d = st.dtype().unwrap_or(DType::F32);
                let inner: u64 = dims.iter().skip(1).product();
                let idx = self.scalar(*index)?;
                let extent = dims.first().copied().unwrap_or(0);
                if !self.facts.in_bounds(*index, 1, extent) {
                    let bad = self.b.ins().icmp_imm_s(
                        IntCC::UnsignedGreaterThanOrEqual,
                        idx,
                        extent as i64,
                    );
                    let lim = self.iconst(extent as i64);
                    let msg = crate::sites::slice_index(&f.name, &self.site_op(op));
                    self.fault_if(bad, msg, idx, lim);
                }
                Some(Cv::Mem(self.elem_addr(
                    base,
                    idx,
                    (inner as usize) * d.size(),
                )))
            }
            OpKind::Subview { src, offset } => {
                let st = f.ty(*src).clone();
                let dims = st.shape().and_then(|s| s.consts()).unwrap_or_default();
                let d = st.dtype().unwrap_or(DType::F32);
                let len = res_ty
                    .as_ref()
                    .and_then(|t| t.shape()?.0.first()?.as_const())
                    .unwrap_or(0);
                let row_bytes = dims.iter().skip(1).product::<u64>() as usize * d.size();
                let off = self.scalar(*offset)?;
                let extent = dims.first().copied().unwrap_or(0);
                if !self.facts.in_bounds(*offset, len, extent) {
                    let limit = extent.saturating_sub(len) as i64;
                    let bad = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::UnsignedGreaterThan, off, limit);
                    let lim = self.iconst(limit);
                    let msg = crate::sites::subview_offset(&f.name, &self.site_op(op), len, extent);
                    self.fault_if(bad, msg, off, lim);
                }
                let delta = self.b.ins().imul_imm_s(off, row_bytes as i64);
                Some(match self.cv(*src)? {
                    Cv::Mem(p) => Cv::Mem(self.b.ins().iadd(p, delta)),
                    Cv::Win(id, base, woff) => {
                        let b2 = self.b.ins().iadd(base, delta);
                        let o2 = self.b.ins().iadd(woff, delta);
                        Cv::Win(id, b2, o2)
                    }
                    _ => return Err(self.err("subview of a non-buffer")),
                })
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_view`",
                    other.info().name
                )))
            }
        })
    }

    /// Tells the runtime about the rows a tile `load` of `src` reads when `src` is a window
    /// (`hook::TRACK_READ`, one call per contiguous row; the `sim` race detector checks them).
    pub(super) fn track_window_read(
        &mut self,
        op: &Op,
        src: Value,
        src_shape: &[u64],
        offs: &[ClValue],
        tile: &[u64],
        esize: usize,
    ) -> Result<(), CodegenError> {
        let Ok((id, woff)) = self.win(src) else {
            return Ok(());
        };
        let site = self.sync_site(op);
        self.copy_rows(tile, esize, &mut |lw, idx, bytes| {
            let s_off = lw.linear(src_shape, offs, idx, esize);
            let at = lw.b.ins().iadd(woff, s_off);
            let n = lw.iconst(bytes as i64);
            let st = lw.call_hook(hook::TRACK_READ, &[id, at, n, site]);
            lw.check(st);
            Ok(())
        })
    }

    /// Tile loads and stores (read in place, fused into a store, or copied).
    pub(super) fn lower_load_store(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::Load { src, offsets }
                if op.result.is_some_and(|r| {
                    self.plan.views.contains(r) || self.plan.strided.contains_key(r)
                }) =>
            {
                // A view: the tile is read in place by the ops that use it (BlockPlan); a
                // strided block by the GEMM, rows the source's row length apart.
                let (Some(Type::Tile(ts, d)), Some(ss)) = (res_ty, f.ty(*src).shape()) else {
                    return Err(self.err("load without a tile result"));
                };
                let tile = ts.consts().unwrap_or_default();
                let src_shape = ss.consts().unwrap_or_default();
                let offs = self.offsets(op, offsets, &src_shape, &tile)?;
                self.track_window_read(op, *src, &src_shape, &offs, &tile, d.size())?;
                let zero: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
                let off = self.linear_with(&src_shape, &offs, &zero, d.size());
                let base = self.mem(*src)?;
                Some(Cv::Mem(self.b.ins().iadd(base, off)))
            }
            OpKind::Load { src, offsets } => {
                let Some(Type::Tile(ts, d)) = res_ty else {
                    return Err(self.err("load without a tile result"));
                };
                let tile = ts.consts().unwrap_or_default();
                let numel: u64 = tile.iter().product();
                let dst = self.stack(numel * d.size() as u64);
                let src_shape = f
                    .ty(*src)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &src_shape, &tile)?;
                self.track_window_read(op, *src, &src_shape, &offs, &tile, d.size())?;
                let src_p = self.mem(*src)?;
                self.copy_rows(&tile, d.size(), &mut |lw, idx, bytes| {
                    let s_off = lw.linear(&src_shape, &offs, idx, d.size());
                    let d_off = lw.linear_plain(&tile, idx, d.size());
                    let sp = lw.b.ins().iadd(src_p, s_off);
                    let dp = lw.b.ins().iadd(dst, d_off);
                    let n = lw.iconst(bytes as i64);
                    lw.b.call_memcpy(lw.cfg, dp, sp, n);
                    Ok(())
                })?;
                Some(Cv::Mem(dst))
            }
            OpKind::Store { value, .. } if self.stored.contains_key(*value) => {
                // Already written in place by the elementwise op that computed `value`.
                None
            }
            OpKind::Store {
                value,
                dst,
                offsets,
            } => {
                let Type::Tile(ts, d) = f.ty(*value).clone() else {
                    return Err(self.err("store of a non-tile"));
                };
                let tile = ts.consts().unwrap_or_default();
                let dst_shape = f
                    .ty(*dst)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &dst_shape, &tile)?;
                let src_p = self.mem(*value)?;
                let dst_p = self.mem(*dst)?;
                let window = self.win(*dst).ok();
                self.copy_rows(&tile, d.size(), &mut |lw, idx, bytes| {
                    let d_off = lw.linear(&dst_shape, &offs, idx, d.size());
                    let s_off = lw.linear_plain(&tile, idx, d.size());
                    let sp = lw.b.ins().iadd(src_p, s_off);
                    let dp = lw.b.ins().iadd(dst_p, d_off);
                    let n = lw.iconst(bytes as i64);
                    lw.b.call_memcpy(lw.cfg, dp, sp, n);
                    if let Some((id, woff)) = window {
                        // A local write into symmetric memory: the runtime may track it.
                        let at = lw.b.ins().iadd(woff, d_off);
                        let st = lw.call_hook(hook::TRACK_WRITE, &[id, at, n]);
                        lw.check(st);
                    }
                    Ok(())
                })?;
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_load_store`",
                    other.info().name
                )))
            }
        })
    }

    /// `local_array`: a zeroed stack slot of the result's size, as memory.
    pub(super) fn lower_local_array(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let (len, d) = match op.result.map(|r| self.f.ty(r)) {
            Some(Type::Tensor(s, d)) => match s.consts().as_deref() {
                Some([n]) => (*n, *d),
                _ => return Err(self.err(format!("local array of shape {s}; specialize first"))),
            },
            _ => return Err(self.err("local_array without a tensor result")),
        };
        // Whole 8-byte words, so the zero fill is one store per word.
        let words = (len * d.size() as u64).div_ceil(8);
        let p = self.stack(words * 8);
        let zero = self.iconst(0);
        self.emit_counted(words, &mut |me, i| {
            let a = me.elem_addr(p, i, 8);
            me.b.ins().store(MemFlagsData::trusted(), zero, a, 0);
            Ok(())
        })?;
        Ok(Some(Cv::Mem(p)))
    }

    /// Element reads and writes.
    pub(super) fn lower_element(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        Ok(match &op.kind {
            OpKind::Elem { src, indices } => {
                let t = f.ty(*src).clone();
                let addr = self.elem_addr_of(op, *src, &t, indices)?;
                let d = t.dtype().unwrap_or(DType::F32);
                if let Ok((id, woff)) = self.win(*src) {
                    let base = self.mem(*src)?;
                    let rel = self.b.ins().isub(addr, base);
                    let at = self.b.ins().iadd(woff, rel);
                    let n = self.iconst(d.size() as i64);
                    let site = self.sync_site(op);
                    let st = self.call_hook(hook::TRACK_READ, &[id, at, n, site]);
                    self.check(st);
                }
                Some(Cv::S(self.b.ins().load(
                    cl_type(d),
                    MemFlagsData::trusted(),
                    addr,
                    0,
                )))
            }
            OpKind::SetElem {
                value,
                dst,
                indices,
            } => {
                let t = f.ty(*dst).clone();
                let addr = self.elem_addr_of(op, *dst, &t, indices)?;
                let x = self.scalar(*value)?;
                self.b.ins().store(MemFlagsData::trusted(), x, addr, 0);
                if let Ok((id, woff)) = self.win(*dst) {
                    let base = self.mem(*dst)?;
                    let rel = self.b.ins().isub(addr, base);
                    let at = self.b.ins().iadd(woff, rel);
                    let n = self.iconst(t.dtype().map_or(1, DType::size) as i64);
                    let st = self.call_hook(hook::TRACK_WRITE, &[id, at, n]);
                    self.check(st);
                }
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_element`",
                    other.info().name
                )))
            }
        })
    }

    /// Remote tile loads and stores, put and get (through the hooks).
    pub(super) fn lower_remote(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::RemoteLoad { src, peer, offsets } => {
                let Some(Type::Tile(ts, d)) = res_ty else {
                    return Err(self.err("remote_load without a tile result"));
                };
                let tile = ts.consts().unwrap_or_default();
                let numel: u64 = tile.iter().product();
                let dst = self.stack(numel * d.size() as u64);
                let win_shape = f
                    .ty(*src)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &win_shape, &tile)?;
                let (id, woff) = self.win(*src)?;
                let peer = self.scalar(*peer)?;
                let site = self.sync_site(op);
                if op.result.is_some_and(|r| self.plan.views.contains(r)) {
                    // A view: the peer's bytes are read in place where the runtime maps them
                    // (BlockPlan), else from the copy `get_view` makes into `dst`.
                    let zero: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
                    let rel = self.linear_with(&win_shape, &offs, &zero, d.size());
                    let at = self.b.ins().iadd(woff, rel);
                    let n = self.iconst((numel * d.size() as u64) as i64);
                    let p = self.call_hook(hook::GET_VIEW, &[id, peer, at, dst, n, site]);
                    let failed = self.b.ins().icmp_imm_u(IntCC::Equal, p, 0);
                    let st = self.b.ins().uextend(types::I32, failed);
                    self.check(st);
                    return Ok(Some(Cv::Mem(p)));
                }
                let rows = RemoteRows {
                    hook: hook::GET,
                    win: (id, woff),
                    peer,
                    local: dst,
                    win_shape: &win_shape,
                    offs: &offs,
                    tile: &tile,
                    esize: d.size(),
                    site,
                };
                self.remote_rows(&rows)?;
                Some(Cv::Mem(dst))
            }
            OpKind::RemoteStore {
                value,
                dst,
                peer,
                offsets,
            } => {
                let Type::Tile(ts, d) = f.ty(*value).clone() else {
                    return Err(self.err("remote_store of a non-tile"));
                };
                let tile = ts.consts().unwrap_or_default();
                let win_shape = f
                    .ty(*dst)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &win_shape, &tile)?;
                let (id, woff) = self.win(*dst)?;
                let peer = self.scalar(*peer)?;
                let src_p = self.mem(*value)?;
                let site = self.sync_site(op);
                let rows = RemoteRows {
                    hook: hook::PUT,
                    win: (id, woff),
                    peer,
                    local: src_p,
                    win_shape: &win_shape,
                    offs: &offs,
                    tile: &tile,
                    esize: d.size(),
                    site,
                };
                self.remote_rows(&rows)?;
                None
            }
            OpKind::Put { dst, peer, src } | OpKind::Get { dst, peer, src } => {
                let is_put = matches!(op.kind, OpKind::Put { .. });
                let (win, local) = if is_put { (*dst, *src) } else { (*src, *dst) };
                let t = f.ty(win);
                let bytes = t.shape().and_then(|s| s.numel()).unwrap_or(0)
                    * t.dtype().map_or(0, |d| d.size() as u64);
                let (id, woff) = self.win(win)?;
                let lp = self.mem(local)?;
                let peer = self.scalar(*peer)?;
                let n = self.iconst(bytes as i64);
                let k = if is_put { hook::PUT } else { hook::GET };
                let site = self.sync_site(op);
                let st = self.call_hook(k, &[id, peer, woff, lp, n, site]);
                self.check(st);
                if let (false, Ok((lid, loff))) = (is_put, self.win(local)) {
                    let st = self.call_hook(hook::TRACK_WRITE, &[lid, loff, n]);
                    self.check(st);
                }
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_remote`",
                    other.info().name
                )))
            }
        })
    }

    /// Notify, wait and barrier (through the hooks).
    pub(super) fn lower_signal(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        Ok(match &op.kind {
            OpKind::Notify {
                signal,
                peer,
                offsets,
                value,
                op: nop,
            } => {
                let t = f.ty(*signal).clone();
                let d = t.dtype().unwrap_or(DType::I32);
                let shape = t.shape().and_then(|s| s.consts()).unwrap_or_default();
                let ones = vec![1; shape.len()];
                let offs = self.offsets(op, offsets, &shape, &ones)?;
                let zero = self.iconst(0);
                let rel = self.linear_with(&shape, &offs, &vec![zero; shape.len()], d.size());
                let (id, woff) = self.win(*signal)?;
                let off = self.b.ins().iadd(rel, woff);
                let peer = self.scalar(*peer)?;
                let v = self.scalar(*value)?;
                let v = self.widen_i64(v, d);
                let kind = self.b.ins().iconst(types::I32, abi::SigKind::of(d) as i64);
                let o = self
                    .b
                    .ins()
                    .iconst(types::I32, abi::notify_code(*nop) as i64);
                let site = self.sync_site(op);
                let st = self.call_hook(hook::NOTIFY, &[id, peer, off, kind, v, o, site]);
                self.check(st);
                None
            }
            OpKind::Wait {
                signal,
                offsets,
                expected,
                cmp,
            } => {
                let t = f.ty(*signal).clone();
                let d = t.dtype().unwrap_or(DType::I32);
                let shape = t.shape().and_then(|s| s.consts()).unwrap_or_default();
                let ones = vec![1; shape.len()];
                let offs = self.offsets(op, offsets, &shape, &ones)?;
                let zero = self.iconst(0);
                let rel = self.linear_with(&shape, &offs, &vec![zero; shape.len()], d.size());
                let (id, woff) = self.win(*signal)?;
                let off = self.b.ins().iadd(rel, woff);
                let v = self.scalar(*expected)?;
                let v = self.widen_i64(v, d);
                let kind = self.b.ins().iconst(types::I32, abi::SigKind::of(d) as i64);
                let c = self.b.ins().iconst(types::I32, abi::cmp_code(*cmp) as i64);
                let site = self.sync_site(op);
                let st = self.call_hook(hook::WAIT, &[id, off, kind, v, c, site]);
                self.check(st);
                None
            }
            OpKind::Barrier(_) => {
                let site = self.sync_site(op);
                let st = self.call_hook(hook::BARRIER, &[site]);
                self.check(st);
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_signal`",
                    other.info().name
                )))
            }
        })
    }

    /// Address of element `indices` of tensor or window `v` (bounds-checked when not constant).
    pub(super) fn elem_addr_of(
        &mut self,
        op: &Op,
        v: Value,
        t: &Type,
        indices: &[Value],
    ) -> Result<ClValue, CodegenError> {
        let shape = t.shape().and_then(|s| s.consts()).unwrap_or_default();
        let ones = vec![1; shape.len()];
        let idx = self.offsets(op, indices, &shape, &ones)?;
        let esize = t.dtype().map_or(1, DType::size);
        let zero: Vec<ClValue> = (0..shape.len()).map(|_| self.iconst(0)).collect();
        let off = self.linear_with(&shape, &idx, &zero, esize);
        let base = self.mem(v)?;
        Ok(self.b.ins().iadd(base, off))
    }

    /// Lowers offsets, adding run-time bounds checks for those not constant.
    pub(super) fn offsets(
        &mut self,
        op: &Op,
        offsets: &[Value],
        shape: &[u64],
        tile: &[u64],
    ) -> Result<Vec<ClValue>, CodegenError> {
        let mut out = vec![];
        for (d, &o) in offsets.iter().enumerate() {
            let x = self.scalar(o)?;
            let limit = shape[d].saturating_sub(tile[d]) as i64;
            // Proven in bounds by specialization's range analysis: no run-time check.
            if !self.facts.in_bounds(o, tile[d], shape[d]) {
                let bad = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThan, x, limit);
                let lim = self.iconst(limit);
                let msg =
                    crate::sites::offset(&self.f.name, &self.site_op(op), d, tile[d], shape[d]);
                self.fault_if(bad, msg, x, lim);
            }
            out.push(x);
        }
        Ok(out)
    }

    /// Moves a tile between local memory and a peer's window, one `get` (window to local) or
    /// `put` (local to window) hook call per row of the tile.
    pub(super) fn remote_rows(&mut self, r: &RemoteRows<'_>) -> Result<(), CodegenError> {
        let (id, woff) = r.win;
        self.copy_rows(r.tile, r.esize, &mut |lw, idx, bytes| {
            let w_rel = lw.linear(r.win_shape, r.offs, idx, r.esize);
            let w_off = lw.b.ins().iadd(w_rel, woff);
            let t_off = lw.linear_plain(r.tile, idx, r.esize);
            let local = lw.b.ins().iadd(r.local, t_off);
            let n = lw.iconst(bytes as i64);
            let st = lw.call_hook(r.hook, &[id, r.peer, w_off, local, n, r.site]);
            lw.check(st);
            Ok(())
        })
    }

    /// Calls `row(idx, bytes)` for each row of `tile` (all dims but the last), with `idx` the
    /// row's index in every leading dim (the last index is 0).
    pub(super) fn copy_rows(
        &mut self,
        tile: &[u64],
        esize: usize,
        row: &mut RowFn<'_, Self>,
    ) -> Result<(), CodegenError> {
        let Some((&last, lead)) = tile.split_last() else {
            return Ok(());
        };
        let bytes = last * esize as u64;
        let rows: u64 = lead.iter().product();
        if rows == 1 {
            let zeros: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
            return row(self, &zeros, bytes);
        }
        let lead = lead.to_vec();
        let lo = self.iconst(0);
        let hi = self.iconst(rows as i64);
        self.emit_loop(lo, hi, &mut |lw, r| {
            let mut idx = vec![];
            let mut rem = r;
            for (k, _) in lead.iter().enumerate() {
                let stride: u64 = lead[k + 1..].iter().product();
                let q = lw.b.ins().udiv_imm_u(rem, stride as i64);
                rem = lw.b.ins().urem_imm_u(rem, stride as i64);
                idx.push(q);
            }
            idx.push(lw.iconst(0));
            row(lw, &idx, bytes)
        })
    }

    /// Byte offset of `offs + idx` in a row-major array of `shape`.
    pub(super) fn linear(
        &mut self,
        shape: &[u64],
        offs: &[ClValue],
        idx: &[ClValue],
        esize: usize,
    ) -> ClValue {
        self.linear_with(shape, offs, idx, esize)
    }

    pub(super) fn linear_with(
        &mut self,
        shape: &[u64],
        offs: &[ClValue],
        idx: &[ClValue],
        esize: usize,
    ) -> ClValue {
        let mut acc = self.iconst(0);
        for d in 0..shape.len() {
            let stride: u64 = shape[d + 1..].iter().product::<u64>() * esize as u64;
            let i = self.b.ins().iadd(offs[d], idx[d]);
            let t = self.b.ins().imul_imm_s(i, stride as i64);
            acc = self.b.ins().iadd(acc, t);
        }
        acc
    }

    /// Byte offset of `idx` in a row-major array of `shape`.
    pub(super) fn linear_plain(&mut self, shape: &[u64], idx: &[ClValue], esize: usize) -> ClValue {
        let zeros: Vec<ClValue> = (0..shape.len()).map(|_| self.iconst(0)).collect();
        self.linear_with(shape, &zeros, idx, esize)
    }

    pub(super) fn widen_i64(&mut self, v: ClValue, d: DType) -> ClValue {
        match d {
            DType::I8 | DType::I16 | DType::I32 => self.b.ins().sextend(types::I64, v),
            DType::U8 | DType::U16 | DType::U32 => self.b.ins().uextend(types::I64, v),
            _ => v,
        }
    }

    pub(super) fn constant(&mut self, c: Const, d: DType) -> ClValue {
        match (c, d) {
            (Const::F32(x), _) => self.b.ins().f32const(x),
            (Const::F64(x), _) => self.b.ins().f64const(x),
            (Const::Bool(x), _) => self.b.ins().iconst(types::I8, x as i64),
            (Const::Int(i), d) => {
                let t = cl_type(d);
                let v = if t == types::I32 {
                    i as u32 as i64
                } else if t == types::I8 {
                    (i != 0) as i64
                } else {
                    i as i64
                };
                self.b.ins().iconst(t, v)
            }
        }
    }
}
