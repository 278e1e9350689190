//! Building the device-context and communication ops: rank and world size, windows, put and
//! get, remote loads and stores, signals, the built-in collectives and the barrier.

use super::*;

impl FunctionBuilder<'_> {
    /// `rank(ctx)`.
    pub fn rank(&mut self, ctx: Value) -> Value {
        self.push(OpKind::Rank(ctx), Type::Scalar(DType::Index))
    }
    /// `nranks(ctx)`.
    pub fn nranks(&mut self, ctx: Value) -> Value {
        self.push(OpKind::NRanks(ctx), Type::Scalar(DType::Index))
    }
    /// `group(ctx, grid, axis)`: this rank's group along `axis` of the process grid `grid`
    /// (extents outermost first), a context ([`OpKind::Group`]).
    ///
    /// # Errors
    /// [`IrError::Build`] when `axis` is not an axis of `grid`.
    pub fn group(&mut self, ctx: Value, grid: Vec<Dim>, axis: u64) -> Result<Value> {
        if axis as usize >= grid.len() {
            return self.err(format!(
                "`group` takes an axis of its grid: the grid has {} axes (0..{}) but the axis is {axis}",
                grid.len(),
                grid.len()
            ));
        }
        let grid = grid
            .into_iter()
            .map(|d| self.push(OpKind::Dim(d), Type::Scalar(DType::Index)))
            .collect();
        Ok(self.push(OpKind::Group { ctx, grid, axis }, Type::Ctx))
    }
    /// `split(ctx, color, key)`: this rank's group among the ranks of its `color`, numbered
    /// by `key` and then by world rank ([`OpKind::Split`]); `color` and `key` are `index`.
    ///
    /// # Errors
    /// Only from materialising `color` and `key`.
    pub fn split(
        &mut self,
        ctx: Value,
        color: impl Into<Operand>,
        key: impl Into<Operand>,
    ) -> Result<Value> {
        let color = self.value(color, Some(DType::Index))?;
        let key = self.value(key, Some(DType::Index))?;
        Ok(self.push(OpKind::Split { ctx, color, key }, Type::Ctx))
    }
    /// `world_rank(group, q)`: the world rank of rank `q` of `group` ([`OpKind::WorldRank`]).
    ///
    /// # Errors
    /// Only from materialising `q`.
    pub fn world_rank(&mut self, group: Value, rank: impl Into<Operand>) -> Result<Value> {
        let rank = self.value(rank, Some(DType::Index))?;
        Ok(self.push(
            OpKind::WorldRank { group, rank },
            Type::Scalar(DType::Index),
        ))
    }
    /// `world_size()`.
    pub fn world_size(&mut self) -> Value {
        self.push(OpKind::WorldSize, Type::Scalar(DType::Index))
    }
    /// `alloc_window_buffer(shape, dtype)`.
    pub fn alloc_window_buffer(&mut self, shape: Vec<Dim>, dtype: DType) -> Value {
        self.push(OpKind::AllocWindowBuffer, Type::WinBuf(Shape(shape), dtype))
    }
    /// `window(buf, shape, dtype)`.
    pub fn window(&mut self, buf: Value, shape: Vec<Dim>, dtype: DType) -> Value {
        self.push(OpKind::Window(buf), Type::Window(Shape(shape), dtype))
    }
    /// `put(dst, peer, src)`.
    ///
    /// # Errors
    /// Only from materialising `peer`.
    pub fn put(&mut self, dst: Value, peer: impl Into<Operand>, src: Value) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        self.push_void(OpKind::Put { dst, peer, src });
        Ok(())
    }
    /// `get(dst, peer, src)`.
    ///
    /// # Errors
    /// Only from materialising `peer`.
    pub fn get(&mut self, dst: Value, peer: impl Into<Operand>, src: Value) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        self.push_void(OpKind::Get { dst, peer, src });
        Ok(())
    }
    /// `remote_load(win, peer, offsets, shape)`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a window.
    pub fn remote_load(
        &mut self,
        src: Value,
        peer: impl Into<Operand>,
        offsets: Vec<Operand>,
        shape: Vec<Dim>,
    ) -> Result<Value> {
        let peer = self.value(peer, Some(DType::Index))?;
        let offsets = self.offsets(offsets)?;
        let Type::Window(_, d) = self.ty(src).clone() else {
            return self.err(format!(
                "`remote_load` reads a window, found `{}`",
                self.ty(src)
            ));
        };
        let kind = OpKind::RemoteLoad { src, peer, offsets };
        Ok(self.push(kind, tile_of(Shape(shape), d)))
    }
    /// `remote_store(win, peer, offsets, value)`.
    ///
    /// # Errors
    /// Only from materialising operands.
    pub fn remote_store(
        &mut self,
        dst: Value,
        peer: impl Into<Operand>,
        offsets: Vec<Operand>,
        value: Value,
    ) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        let offsets = self.offsets(offsets)?;
        self.push_void(OpKind::RemoteStore {
            value,
            dst,
            peer,
            offsets,
        });
        Ok(())
    }
    /// `notify(signal, peer, offsets, value, op)`.
    ///
    /// # Errors
    /// Only from materialising operands.
    pub fn notify(
        &mut self,
        signal: Value,
        peer: impl Into<Operand>,
        offsets: Vec<Operand>,
        value: impl Into<Operand>,
        op: NotifyOp,
    ) -> Result<()> {
        let peer = self.value(peer, Some(DType::Index))?;
        let offsets = self.offsets(offsets)?;
        let d = self.ty(signal).dtype();
        let value = self.value(value, d)?;
        self.push_void(OpKind::Notify {
            signal,
            peer,
            offsets,
            value,
            op,
        });
        Ok(())
    }
    /// `wait(signal, offsets, expected, cmp)`.
    ///
    /// # Errors
    /// Only from materialising operands.
    pub fn wait(
        &mut self,
        signal: Value,
        offsets: Vec<Operand>,
        expected: impl Into<Operand>,
        cmp: CmpOp,
    ) -> Result<()> {
        let offsets = self.offsets(offsets)?;
        let d = self.ty(signal).dtype();
        let expected = self.value(expected, d)?;
        self.push_void(OpKind::Wait {
            signal,
            offsets,
            expected,
            cmp,
        });
        Ok(())
    }
    /// `subview(src, offset, len)`: rows `offset..offset + len` of dim 0.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a tensor or window of rank >= 1.
    pub fn subview(&mut self, src: Value, offset: impl Into<Operand>, len: Dim) -> Result<Value> {
        let offset = self.value(offset, Some(DType::Index))?;
        let ty = match self.ty(src).clone() {
            Type::Tensor(s, d) if s.rank() >= 1 => {
                let mut dims = s.0.clone();
                dims[0] = len;
                Type::Tensor(Shape(dims), d)
            }
            Type::Window(s, d) if s.rank() >= 1 => {
                let mut dims = s.0.clone();
                dims[0] = len;
                Type::Window(Shape(dims), d)
            }
            t => {
                return self.err(format!(
                    "`subview` takes a tensor or window of rank >= 1, found `{t}`"
                ))
            }
        };
        Ok(self.push(OpKind::Subview { src, offset }, ty))
    }
    /// `subview(src, [o0, o1, ..], [E0, E1, ..])`: the block of `src` (a tensor or window of
    /// rank `n`) that starts at `offsets` and has extents `shape` (`n` of each); a tensor or
    /// window of `src`'s dtype and shape `shape`. Its rows are not contiguous where it takes
    /// part of a trailing dim: it is read and written by tile and element accesses and viewed
    /// further; the verifier refuses it elsewhere. The offsets are checked when it runs.
    ///
    /// # Errors
    /// [`IrError::Build`](crate::IrError::Build) when `src` is not a tensor or window, or when
    /// the offsets or extents are not one per dim.
    pub fn view(&mut self, src: Value, offsets: Vec<Operand>, shape: Vec<Dim>) -> Result<Value> {
        let offsets = self.offsets(offsets)?;
        let (s, ty) = match self.ty(src).clone() {
            Type::Tensor(s, d) => (s, Type::Tensor(Shape(shape.clone()), d)),
            Type::Window(s, d) => (s, Type::Window(Shape(shape.clone()), d)),
            t => {
                return self.err(format!(
                    "`subview` takes a tensor or window, found `{t}`{}",
                    self.here()
                ))
            }
        };
        if offsets.len() != s.rank() || shape.len() != s.rank() {
            return self.err(format!(
                "`subview` of a buffer of shape {s} takes {} offsets and {} extents, one per dim (offsets first, then extents); found {} and {}{}",
                s.rank(),
                s.rank(),
                offsets.len(),
                shape.len(),
                self.here()
            ));
        }
        Ok(self.push(OpKind::View { src, offsets }, ty))
    }
    /// `broadcast(ctx, src, dst, root)`.
    ///
    /// # Errors
    /// Only from materialising `root`.
    pub fn broadcast(
        &mut self,
        ctx: Value,
        src: Value,
        dst: Value,
        root: impl Into<Operand>,
    ) -> Result<()> {
        let root = self.value(root, Some(DType::Index))?;
        self.push_void(OpKind::Broadcast {
            ctx,
            src,
            dst,
            root,
        });
        Ok(())
    }
    /// `allgather(ctx, src, dst)`.
    pub fn allgather(&mut self, ctx: Value, src: Value, dst: Value) {
        self.push_void(OpKind::AllGather { ctx, src, dst });
    }
    /// `all_to_all(ctx, src, dst)`.
    pub fn all_to_all(&mut self, ctx: Value, src: Value, dst: Value) {
        self.push_void(OpKind::AllToAll { ctx, src, dst });
    }
    /// `all_to_all_v(ctx, src, send_counts, dst, recv_counts)` (see [`OpKind::AllToAllV`]).
    pub fn all_to_all_v(
        &mut self,
        ctx: Value,
        src: Value,
        send_counts: Value,
        dst: Value,
        recv_counts: Value,
    ) {
        self.push_void(OpKind::AllToAllV {
            ctx,
            src,
            send_counts,
            dst,
            recv_counts,
        });
    }
    /// `allgather_v(ctx, src, count, dst, recv_counts)` (see [`OpKind::AllGatherV`]).
    pub fn allgather_v(
        &mut self,
        ctx: Value,
        src: Value,
        count: Value,
        dst: Value,
        recv_counts: Value,
    ) {
        self.push_void(OpKind::AllGatherV {
            ctx,
            src,
            count,
            dst,
            recv_counts,
        });
    }
    /// `reduce_scatter(ctx, src, dst, op)`.
    pub fn reduce_scatter(&mut self, ctx: Value, src: Value, dst: Value, op: crate::ir::ReduceOp) {
        self.push_void(OpKind::ReduceScatter { ctx, src, dst, op });
    }
    /// `allreduce(ctx, src, dst, op, mode)`.
    pub fn allreduce(
        &mut self,
        ctx: Value,
        src: Value,
        dst: Value,
        op: crate::ir::ReduceOp,
        mode: crate::ir::AllreduceMode,
    ) {
        self.push_void(OpKind::AllReduce {
            ctx,
            src,
            dst,
            op,
            mode,
        });
    }
    /// `barrier(ctx)`.
    pub fn barrier(&mut self, ctx: Value) {
        self.push_void(OpKind::Barrier(ctx));
    }
}
