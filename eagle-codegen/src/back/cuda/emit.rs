//! The CUDA C emitter of one function: [`Emitter`] writes a function's body op by op in the
//! mode it runs in (block, sample or mapreduce rows), with its checks, its tile storage and
//! the fused elementwise groups. `super::emit_module` drives it per function; tile ops are in
//! `super::tile`.

use super::*;
pub(super) struct Emitter<'a> {
    pub(super) f: &'a Function,
    /// What specialization proved about `f`'s values (ranges of offsets).
    pub(super) facts: &'a FunctionFacts,
    /// The op defining each value of `f`.
    pub(super) defs: &'a Defs<'a>,
    pub(super) mode: Mode,
    pub(super) sites: &'a mut Vec<String>,
    pub(super) out: String,
    pub(super) depth: usize,
    /// Some `notify` adds atomically.
    pub(super) atomic_signals: bool,
    /// Bytes of tile storage live at the op being emitted, per thread.
    pub(super) tile_bytes: u64,
    /// The declared tiles still live: (last use, bytes per thread).
    pub(super) live_tiles: Vec<(usize, u64)>,
    /// Where each value is used last ([`tile_last_uses`]).
    pub(super) last_use: SecondaryMap<Value, usize>,
    /// The preorder position of the op being emitted.
    pub(super) pos: usize,
    /// How many times each value is used.
    pub(super) uses: eagle_ir::entity::SecondaryMap<Value, usize>,
    /// Fused elementwise tile results (`crate::passes::fusion`): computed per element, as
    /// `e<N>`, inside their group root's loop, with the op that computes them.
    pub(super) fused: SecondaryMap<Value, Op>,
    /// Conditions already checked in each enclosing C scope: values are SSA, so a check that
    /// passed holds for the rest of its scope.
    pub(super) checked: Vec<std::collections::HashSet<String>>,
    /// Bytes of shared memory the function's tile ops stage at most (block mode).
    pub(super) shared_bytes: u64,
}

impl Emitter<'_> {
    pub(super) fn err(&self, msg: impl Into<String>) -> CodegenError {
        unsupported(self.f, msg)
    }
    pub(super) fn line(&mut self, s: impl AsRef<str>) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }
    pub(super) fn ty(&self, v: Value) -> &Type {
        self.f.ty(v)
    }
    pub(super) fn v(&self, v: Value) -> String {
        format!("v{}", v.0)
    }
    /// The op as a run-time check's message names it (text and source location).
    pub(super) fn site_op(&self, op: &Op) -> String {
        crate::sites::name_op(&self.op_text(op), op.loc.as_ref())
    }

    pub(super) fn op_text(&self, op: &Op) -> String {
        print_op(self.f, op)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    }
    pub(super) fn shape(&self, v: Value) -> Result<Vec<u64>, CodegenError> {
        self.ty(v).shape().and_then(|s| s.consts()).ok_or_else(|| {
            self.err(format!(
                "value v{} has an unbound shape; specialize first",
                v.0
            ))
        })
    }
    pub(super) fn dtype(&self, v: Value) -> Result<DType, CodegenError> {
        self.ty(v)
            .dtype()
            .ok_or_else(|| self.err(format!("value v{} has no dtype", v.0)))
    }
    pub(super) fn is_tile(&self, v: Value) -> bool {
        matches!(self.ty(v), Type::Tile(..))
    }
    pub(super) fn sync(&mut self) {
        // Two barriers in a row (comments between them aside) are one.
        let last = self
            .out
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("//"));
        if self.mode == Mode::Block && last != Some("__syncthreads();") {
            self.line("__syncthreads();");
        }
    }
    /// Emits a nested block (a loop body or a branch) in its own check scope.
    pub(super) fn scoped(&mut self, b: &Block) -> Result<(), CodegenError> {
        self.checked.push(Default::default());
        let r = self.block(b);
        self.checked.pop();
        r
    }
    /// A site message as the user knows the place: a sample kernel is named as one (as the
    /// execution plan names it on the CPU).
    pub(super) fn placed(&self, msg: String) -> String {
        if self.f.level == Level::Sample {
            msg.replacen(
                &format!("function `{}`", self.f.name),
                &format!("sample kernel `{}`", self.f.name),
                1,
            )
        } else {
            msg
        }
    }
    /// The constant `v` is defined as, if any (a `Dim` gives its bound extent).
    pub(super) fn const_of(&self, v: Value) -> Option<Const> {
        let kind = self.def_of(v)?;
        if let OpKind::Const(c) = kind {
            Some(*c)
        } else if let OpKind::Dim(d) = kind {
            d.as_const().map(|n| Const::Int(i128::from(n)))
        } else {
            None
        }
    }
    /// The op that defines `v`, if an op does (not a parameter or loop variable).
    pub(super) fn def_of(&self, v: Value) -> Option<&OpKind> {
        self.defs.kind(v)
    }

    pub(super) fn function(&mut self) -> Result<(), CodegenError> {
        let f = self.f;
        let mut params = vec!["const eg_rt* rt".to_string()];
        for p in &f.params {
            let t = f.ty(p.value);
            params.push(match t {
                Type::Ctx => continue,
                Type::Tensor(_, d) => format!("{}* v{}", ctype(*d), p.value.0),
                Type::Window(..) => format!("eg_win v{}", p.value.0),
                Type::Scalar(d) => format!("{} v{}", ctype(*d), p.value.0),
                other @ Type::Tile(..) => return Err(self.err(format!("parameter `{}` of type `{other}`: the CUDA backend does not pass tiles to compute kernels (a tile is striped over a block); pass a tensor and `load` the tile in the callee, or run on the CPU (`sim`, `cpu`)", p.name))),
                other => return Err(self.err(format!("parameter `{}` of type `{other}`", p.name))),
            });
        }
        let _ = writeln!(
            self.out,
            "// {} function `{}`, {} mode",
            f.level.name(),
            f.name,
            match self.mode {
                Mode::Block => "block",
                Mode::Thread => "thread",
            }
        );
        let _ = writeln!(
            self.out,
            "__device__ int eg_f_{}{}({}) {{",
            f.name,
            self.mode.suffix(),
            params.join(", ")
        );
        if self.mode == Mode::Block {
            self.line("const int lane = threadIdx.x; (void)lane;");
        }
        let body_at = self.out.len();
        self.block(&f.body)?;
        if self.shared_bytes > 0 {
            // The staging scratch of the tile ops (see `tile.rs`).
            self.out
                .insert_str(body_at, &format!("  EG_SHARED({});\n", self.shared_bytes));
        }
        self.line("return 0;");
        self.out.push_str("}\n");
        Ok(())
    }

    pub(super) fn block(&mut self, b: &Block) -> Result<(), CodegenError> {
        // Integer division stays unfused: its zero check runs per tile.
        let ops: Vec<&Op> = b.iter(&self.f.ops).collect();
        let roots = crate::passes::fusion::fusion_roots(self.f, &ops, &self.uses, |op| {
            !matches!(&op.kind, OpKind::Binary(BinOp::Div | BinOp::Rem, ..)
                if op.result.and_then(|r| self.f.ty(r).dtype()).is_some_and(|d| !d.is_float()))
        });
        for op in &ops {
            if let Some(r) = op.result.filter(|r| roots.contains_key(*r)) {
                self.fused.insert(r, (*op).clone());
            }
        }
        for op in ops {
            self.op(op)?;
        }
        Ok(())
    }

    /// Slots per thread of a tile of `n` elements.
    pub(super) fn slots(&self, n: u64) -> u64 {
        n.div_ceil(self.mode.threads()).max(1)
    }

    /// Opens a loop over this thread's elements of a tile of `n` elements; inside, `i` is the
    /// element index and `k` the slot. Close with [`Emitter::close`].
    pub(super) fn open_tile_loop(&mut self, n: u64) {
        match self.mode {
            Mode::Block => {
                self.line(format!("for (int k = 0; k < EG_SLOTS({n}); ++k) {{"));
                self.depth += 1;
                self.line("const long long i = lane + k * (long long)EG_NT;");
                self.line(format!("if (i >= {n}) break;"));
            }
            Mode::Thread => {
                self.line(format!("for (int k = 0; k < {n}; ++k) {{"));
                self.depth += 1;
                self.line("const long long i = k;");
            }
        }
    }
    pub(super) fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }

    /// The expression of operand `v` inside a tile loop (slot `k`) or as a scalar.
    pub(super) fn at(&self, v: Value) -> String {
        if self.fused.contains_key(v) {
            format!("e{}", v.0)
        } else if self.is_tile(v) {
            format!("v{}[k]", v.0)
        } else {
            format!("v{}", v.0)
        }
    }

    /// The linear element offset, in `shape`, of tile element `i` (in a loop) placed at
    /// `offs` (C expressions per dim). `tile` gives the tile extents.
    pub(super) fn tile_offset(shape: &[u64], tile: &[u64], offs: &[String]) -> String {
        let mut terms = vec![];
        let mut inner_tile = 1u64;
        let mut inner_shape = 1u64;
        let r = shape.len();
        let mut rev = vec![];
        for d in (0..r).rev() {
            let idx = if tile[d] == 1 {
                offs[d].clone()
            } else if inner_tile == 1 && d == r - 1 {
                format!("({} + i % {})", offs[d], tile[d])
            } else {
                format!("({} + i / {} % {})", offs[d], inner_tile, tile[d])
            };
            rev.push(if inner_shape == 1 {
                idx
            } else {
                format!("{idx} * {inner_shape}LL")
            });
            inner_tile *= tile[d];
            inner_shape *= shape[d];
        }
        terms.extend(rev.into_iter().rev());
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }

    /// Emits bounds checks for `offsets` of a tile `tile` in `shape` and returns them as C.
    pub(super) fn offsets(
        &mut self,
        op: &Op,
        offsets: &[Value],
        shape: &[u64],
        tile: &[u64],
    ) -> Result<Vec<String>, CodegenError> {
        let mut out = vec![];
        for (d, &o) in offsets.iter().enumerate() {
            let x = self.v(o);
            let limit = shape[d].saturating_sub(tile[d]);
            if !self.facts.in_bounds(o, tile[d], shape[d]) {
                let msg =
                    crate::sites::offset(&self.f.name, &self.site_op(op), d, tile[d], shape[d]);
                self.fault_if(
                    &format!("(unsigned long long){x} > {limit}ull"),
                    msg,
                    &x,
                    &limit.to_string(),
                );
            }
            out.push(x);
        }
        Ok(out)
    }

    /// A C pointer expression to the elements of memory value `v` on `rank` (C expression;
    /// `None` = local).
    pub(super) fn base(&self, v: Value, rank: Option<&str>) -> Result<String, CodegenError> {
        let d = ctype(self.dtype(v)?);
        match (self.ty(v), rank) {
            (Type::Tensor(..), None) => Ok(self.v(v)),
            (Type::Window(..), None) => Ok(format!("eg_at<{d}>({}, rt->rank)", self.v(v))),
            (Type::Window(..), Some(r)) => Ok(format!("eg_at<{d}>({}, {r})", self.v(v))),
            (t, _) => Err(self.err(format!("v{} of type `{t}` is not memory", v.0))),
        }
    }

    /// Declares the tile result `r` of `n` elements of dtype `d`.
    pub(super) fn declare_tile(&mut self, r: Value, n: u64, d: DType) -> Result<(), CodegenError> {
        let (per_thread, limit, mode) = match self.mode {
            Mode::Block => (
                self.slots(n) * d.size() as u64,
                MAX_TILE_BYTES_PER_THREAD,
                "a per-device program's",
            ),
            Mode::Thread => (
                n * d.size() as u64,
                MAX_TILE_BYTES_PER_SAMPLE_THREAD,
                "a sample kernel's",
            ),
        };
        // Only tiles still live count: a long elementwise chain (an expanded math function)
        // holds a few tiles at a time, as the compiler's register allocation sees it.
        let pos = self.pos;
        self.live_tiles.retain(|(last, _)| *last >= pos);
        self.live_tiles
            .push((self.last_use.get(r).copied().unwrap_or(pos), per_thread));
        self.tile_bytes = self.live_tiles.iter().map(|(_, b)| b).sum();
        if self.tile_bytes > limit {
            return Err(self.err(format!(
                "its tiles need {} bytes per GPU thread (this tile of {n} {} elements: {per_thread}), more than the {limit} {mode} thread may hold; use smaller tiles",
                self.tile_bytes,
                d.name(),
            )));
        }
        match self.mode {
            Mode::Block => self.line(format!("{} v{}[EG_SLOTS({n})];", ctype(d), r.0)),
            Mode::Thread => self.line(format!("{} v{}[{n}];", ctype(d), r.0)),
        }
        Ok(())
    }

    pub(super) fn op(&mut self, op: &Op) -> Result<(), CodegenError> {
        self.pos += 1;
        if op.result.is_some_and(|r| self.fused.contains_key(r)) {
            return Ok(()); // computed inside its group root's loop
        }
        let f = self.f;
        let res = op.result;
        let rty = res.map(|r| f.ty(r).clone());
        match &op.kind {
            OpKind::Const(c) => {
                let (Some(r), Some(Type::Scalar(d))) = (res, rty) else {
                    return Err(self.err("constant without a scalar type"));
                };
                self.line(format!("const {} v{} = {};", ctype(d), r.0, literal(*c, d)));
            }
            OpKind::Dim(d) => {
                let n = d
                    .as_const()
                    .ok_or_else(|| self.err(format!("dim `{d}` is unbound; specialize first")))?;
                if let Some(r) = res {
                    self.line(format!("const long long v{} = {n}LL;", r.0));
                }
            }
            OpKind::Rank(_) => {
                if let Some(r) = res {
                    self.line(format!("const long long v{} = rt->rank;", r.0));
                }
            }
            OpKind::Binary(..)
            | OpKind::Unary(..)
            | OpKind::Fma(..)
            | OpKind::Cmp(..)
            | OpKind::Select(..)
            | OpKind::Cast(..)
            | OpKind::Bitcast(..) => self.elementwise(op)?,
            OpKind::Slice { .. } | OpKind::Subview { .. } => self.emit_view(op)?,
            OpKind::Load { .. }
            | OpKind::RemoteLoad { .. }
            | OpKind::Store { .. }
            | OpKind::RemoteStore { .. } => self.emit_load_store(op)?,
            OpKind::Elem { .. } | OpKind::SetElem { .. } => self.emit_element(op)?,
            OpKind::LocalArray => self.emit_local_array(op)?,
            OpKind::Tile(..) => self.emit_tile(op)?,
            OpKind::Math(..) => {
                return Err(self.err(
                    "a math-library op reached the backend; specialize first (it expands math ops)",
                ))
            }
            OpKind::View { .. } => {
                return Err(self
                    .err("a block view reached the backend; specialize first (it lowers views)"))
            }
            OpKind::Put { .. }
            | OpKind::Get { .. }
            | OpKind::Notify { .. }
            | OpKind::Wait { .. }
            | OpKind::Barrier(_) => self.emit_signal(op)?,
            OpKind::TrapIf { .. } => self.emit_trap(op),
            OpKind::Var(_)
            | OpKind::Read(_)
            | OpKind::Write(..)
            | OpKind::For { .. }
            | OpKind::While { .. }
            | OpKind::If { .. }
            | OpKind::Call { .. } => self.emit_control(op)?,
            OpKind::WorldSize
            | OpKind::NRanks(_)
            | OpKind::Group { .. }
            | OpKind::Split { .. }
            | OpKind::WorldRank { .. }
            | OpKind::Broadcast { .. }
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::AllToAllV { .. }
            | OpKind::AllGatherV { .. }
            | OpKind::Dispatch { .. }
            | OpKind::AllocWindowBuffer
            | OpKind::Window(_) => {
                return Err(self.err(crate::sites::not_specialized(&op.kind, &self.op_text(op))))
            }
        }
        Ok(())
    }

    /// Slices and sub-views.
    pub(super) fn emit_view(&mut self, op: &Op) -> Result<(), CodegenError> {
        let f = self.f;
        let res = op.result;
        match &op.kind {
            OpKind::Slice { src, index } => {
                let Some(r) = res else { return Ok(()) };
                let dims = self.shape(*src)?;
                if !matches!(self.ty(*src), Type::Tensor(..)) {
                    return Err(self.err("slice of a window; use a subview"));
                }
                let inner: u64 = dims.iter().skip(1).product();
                let extent = dims.first().copied().unwrap_or(0);
                let x = self.v(*index);
                if !self.facts.in_bounds(*index, 1, extent) {
                    let msg = crate::sites::slice_index(&f.name, &self.site_op(op));
                    self.fault_if(
                        &format!("(unsigned long long){x} >= {extent}ull"),
                        msg,
                        &x,
                        &extent.to_string(),
                    );
                }
                let d = ctype(self.dtype(*src)?);
                self.line(format!(
                    "{d}* v{} = {} + {x} * {inner}LL;",
                    r.0,
                    self.v(*src)
                ));
            }
            OpKind::Subview { src, offset } => {
                let Some(r) = res else { return Ok(()) };
                let dims = self.shape(*src)?;
                let d = self.dtype(*src)?;
                let len = self.shape(r)?.first().copied().unwrap_or(0);
                let row: u64 = dims.iter().skip(1).product();
                let extent = dims.first().copied().unwrap_or(0);
                let x = self.v(*offset);
                if !self.facts.in_bounds(*offset, len, extent) {
                    let limit = extent.saturating_sub(len);
                    let msg = crate::sites::subview_offset(&f.name, &self.site_op(op), len, extent);
                    self.fault_if(
                        &format!("(unsigned long long){x} > {limit}ull"),
                        msg,
                        &x,
                        &limit.to_string(),
                    );
                }
                match self.ty(*src) {
                    Type::Tensor(..) => self.line(format!(
                        "{}* v{} = {} + {x} * {row}LL;",
                        ctype(d),
                        r.0,
                        self.v(*src)
                    )),
                    Type::Window(..) => self.line(format!(
                        "const eg_win v{} = {{{s}.t, {s}.off + {x} * {}LL}};",
                        r.0,
                        row * d.size() as u64,
                        s = self.v(*src)
                    )),
                    t => return Err(self.err(format!("subview of `{t}`"))),
                }
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_view`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// Local and remote tile loads and stores.
    pub(super) fn emit_load_store(&mut self, op: &Op) -> Result<(), CodegenError> {
        let res = op.result;
        match &op.kind {
            OpKind::Load { src, offsets } | OpKind::RemoteLoad { src, offsets, .. } => {
                let Some(r) = res else { return Ok(()) };
                let tile = self.shape(r)?;
                let d = self.dtype(r)?;
                let shape = self.shape(*src)?;
                let peer = if let OpKind::RemoteLoad { peer, .. } = &op.kind {
                    self.check_peer(op, *peer);
                    Some(self.v(*peer))
                } else {
                    None
                };
                let offs = self.offsets(op, offsets, &shape, &tile)?;
                let base = self.base(*src, peer.as_deref())?;
                let n: u64 = tile.iter().product();
                self.line(format!("// {}", self.op_text(op)));
                self.declare_tile(r, n, d)?;
                self.line("{");
                self.depth += 1;
                self.line(format!("const {}* p = {base};", ctype(d)));
                self.open_tile_loop(n);
                let at = Self::tile_offset(&shape, &tile, &offs);
                self.line(format!("v{}[k] = p[{at}];", r.0));
                self.close();
                self.depth -= 1;
                self.line("}");
            }
            OpKind::Store {
                value,
                dst,
                offsets,
            }
            | OpKind::RemoteStore {
                value,
                dst,
                offsets,
                ..
            } => {
                let tile = self.shape(*value)?;
                let d = self.dtype(*value)?;
                let shape = self.shape(*dst)?;
                let peer = if let OpKind::RemoteStore { peer, .. } = &op.kind {
                    self.check_peer(op, *peer);
                    Some(self.v(*peer))
                } else {
                    None
                };
                let offs = self.offsets(op, offsets, &shape, &tile)?;
                let base = self.base(*dst, peer.as_deref())?;
                let n: u64 = tile.iter().product();
                self.line(format!("// {}", self.op_text(op)));
                // Every thread has read what it needs before any thread writes.
                self.sync();
                self.line("{");
                self.depth += 1;
                self.line(format!("{}* p = {base};", ctype(d)));
                self.open_tile_loop(n);
                let at = Self::tile_offset(&shape, &tile, &offs);
                self.line(format!("p[{at}] = v{}[k];", value.0));
                self.close();
                self.depth -= 1;
                self.line("}");
                self.sync();
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_load_store`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// `local_array`: a zeroed array of this thread's (the verifier lets only `elem` and
    /// `set_elem` use it).
    pub(super) fn emit_local_array(&mut self, op: &Op) -> Result<(), CodegenError> {
        let Some(r) = op.result else { return Ok(()) };
        let (n, d) = match self.ty(r) {
            Type::Tensor(s, d) => match s.numel() {
                Some(n) => (n, *d),
                None => return Err(self.err(format!("local array of shape {s}; specialize first"))),
            },
            t => return Err(self.err(format!("local_array of type `{t}`"))),
        };
        self.line(format!("{} v{}[{}] = {{}};", ctype(d), r.0, n.max(1)));
        Ok(())
    }

    /// Element reads and writes.
    pub(super) fn emit_element(&mut self, op: &Op) -> Result<(), CodegenError> {
        let res = op.result;
        match &op.kind {
            OpKind::Elem { src, indices } => {
                let Some(r) = res else { return Ok(()) };
                let shape = self.shape(*src)?;
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, indices, &shape, &ones)?;
                let d = self.dtype(*src)?;
                let at = Self::linear(&shape, &idx);
                let base = self.base(*src, None)?;
                self.line(format!("const {} v{} = {base}[{at}];", ctype(d), r.0));
            }
            OpKind::SetElem {
                value,
                dst,
                indices,
            } => {
                let shape = self.shape(*dst)?;
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, indices, &shape, &ones)?;
                let at = Self::linear(&shape, &idx);
                let base = self.base(*dst, None)?;
                let x = self.v(*value);
                // A local array is each thread's own: in a block every lane writes it (the
                // lanes compute the same scalars, so their copies stay equal).
                let local = matches!(self.def_of(*dst), Some(OpKind::LocalArray));
                match self.mode {
                    Mode::Block if local => self.line(format!("{base}[{at}] = {x};")),
                    Mode::Block => {
                        self.sync();
                        self.line(format!("if (lane == 0) {base}[{at}] = {x};"));
                        self.sync();
                    }
                    Mode::Thread => self.line(format!("{base}[{at}] = {x};")),
                }
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_element`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// Put, get, notify, wait and barrier.
    pub(super) fn emit_signal(&mut self, op: &Op) -> Result<(), CodegenError> {
        match &op.kind {
            OpKind::Put { dst, peer, src } | OpKind::Get { dst, peer, src } => {
                let is_put = matches!(op.kind, OpKind::Put { .. });
                let (win, local) = if is_put { (*dst, *src) } else { (*src, *dst) };
                self.check_peer(op, *peer);
                let n = self.ty(win).shape().and_then(|s| s.numel()).unwrap_or(0);
                let d = ctype(self.dtype(win)?);
                let remote = self.base(win, Some(&self.v(*peer)))?;
                let local_p = self.base(local, None)?;
                let (to, from) = if is_put {
                    (remote, local_p)
                } else {
                    (local_p, remote)
                };
                self.line(format!("// {}", self.op_text(op)));
                self.sync();
                self.line("{");
                self.depth += 1;
                self.line(format!("{d}* to = {to};"));
                self.line(format!("const {d}* from = {from};"));
                match self.mode {
                    Mode::Block => self.line(format!(
                        "for (long long i = lane; i < {n}LL; i += EG_NT) to[i] = from[i];"
                    )),
                    Mode::Thread => self.line(format!(
                        "for (long long i = 0; i < {n}LL; ++i) to[i] = from[i];"
                    )),
                }
                self.depth -= 1;
                self.line("}");
                self.sync();
            }
            OpKind::Notify {
                signal,
                peer,
                offsets,
                value,
                op: nop,
            } => {
                let shape = self.shape(*signal)?;
                let d = self.dtype(*signal)?;
                self.check_peer(op, *peer);
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, offsets, &shape, &ones)?;
                let at = Self::linear(&shape, &idx);
                let u = utype(d);
                let p = format!("&eg_at<{u}>({}, {})[{at}]", self.v(*signal), self.v(*peer));
                let add = matches!(nop, NotifyOp::AtomicAdd);
                self.atomic_signals |= add;
                let call = format!("eg_signal({p}, ({u}){}, {add})", self.v(*value));
                self.line(format!("// {}", self.op_text(op)));
                match self.mode {
                    Mode::Block => {
                        self.sync();
                        self.line(format!("if (lane == 0) {call};"));
                        self.sync();
                    }
                    Mode::Thread => self.line(format!("{call};")),
                }
            }
            OpKind::Wait {
                signal,
                offsets,
                expected,
                cmp,
            } => {
                let shape = self.shape(*signal)?;
                let d = self.dtype(*signal)?;
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, offsets, &shape, &ones)?;
                let at = Self::linear(&shape, &idx);
                let t = ctype(d);
                let call = format!(
                    "eg_wait<{t}>(rt, &eg_at<{t}>({}, rt->rank)[{at}], ({t}){}, {})",
                    self.v(*signal),
                    self.v(*expected),
                    crate::abi::cmp_code(*cmp)
                );
                self.line(format!("// {}", self.op_text(op)));
                self.status_once(&call);
            }
            OpKind::Barrier(_) => {
                self.line(format!("// {}", self.op_text(op)));
                self.sync();
                self.status_once("eg_barrier(rt)");
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_signal`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// Variables, loops, branches and calls.
    pub(super) fn emit_control(&mut self, op: &Op) -> Result<(), CodegenError> {
        let f = self.f;
        let res = op.result;
        let rty = res.map(|r| f.ty(r).clone());
        match &op.kind {
            OpKind::Var(init) => {
                let (Some(r), Some(Type::Ref(t))) = (res, rty) else {
                    return Err(self.err("var without a ref type"));
                };
                match *t {
                    // A tile variable is an array of this thread's slots; reads and writes
                    // copy the slots (each thread its own, so no synchronisation).
                    Type::Tile(s, d) => {
                        let n = s.numel().unwrap_or(0);
                        self.declare_tile(r, n, d)?;
                        self.copy_slots(r, *init, n);
                    }
                    t => {
                        let d = t.dtype().unwrap_or(DType::Index);
                        self.line(format!("{} v{} = {};", ctype(d), r.0, self.v(*init)));
                    }
                }
            }
            OpKind::Read(v) => match rty {
                Some(Type::Tile(s, d)) => {
                    let (Some(r), n) = (res, s.numel().unwrap_or(0)) else {
                        return Ok(());
                    };
                    self.declare_tile(r, n, d)?;
                    self.copy_slots(r, *v, n);
                }
                Some(Type::Scalar(d)) => {
                    if let Some(r) = res {
                        self.line(format!("const {} v{} = {};", ctype(d), r.0, self.v(*v)));
                    }
                }
                _ => {}
            },
            OpKind::Write(v, x) if self.is_tile(*x) => {
                let n = self.shape(*x)?.iter().product();
                self.copy_slots(*v, *x, n);
            }
            OpKind::Write(v, x) => self.line(format!("{} = {};", self.v(*v), self.v(*x))),
            OpKind::For { var, lo, hi, body } => {
                let v = self.v(*var);
                self.line(format!(
                    "for (long long {v} = {}; {v} < {}; ++{v}) {{",
                    self.v(*lo),
                    self.v(*hi)
                ));
                self.depth += 1;
                self.scoped(body)?;
                self.close();
            }
            OpKind::While { flag, cap, body } => {
                // The flag is a scalar: uniform over a block's threads, as every scalar.
                let t = format!("wt{}", flag.0);
                self.line(format!("long long {t} = 0;"));
                self.line(format!("while ({}) {{", self.v(*flag)));
                self.depth += 1;
                let msg = crate::sites::while_cap(&self.f.name, &self.site_op(op));
                let cap = i64::try_from(*cap).unwrap_or(i64::MAX);
                // The condition names this loop's counter: no other check shares it.
                self.fault_if(&format!("{t} >= {cap}LL"), msg, &t, &format!("{cap}LL"));
                self.line(format!("++{t};"));
                self.scoped(body)?;
                self.close();
            }
            OpKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.line(format!("if ({}) {{", self.v(*cond)));
                self.depth += 1;
                self.scoped(then_body)?;
                if else_body.ops.is_empty() {
                    self.close();
                } else {
                    self.depth -= 1;
                    self.line("} else {");
                    self.depth += 1;
                    self.scoped(else_body)?;
                    self.close();
                }
            }
            OpKind::Call { callee, args } => {
                let mut a = vec!["rt".to_string()];
                for x in args {
                    match self.ty(*x) {
                        Type::Ctx => {}
                        Type::Tile(..) => {
                            return Err(self.err(format!("a tile passed to `{callee}`")))
                        }
                        _ => a.push(self.v(*x)),
                    }
                }
                self.line(format!(
                    "if (eg_f_{callee}{}({})) return 1;",
                    self.mode.suffix(),
                    a.join(", ")
                ));
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_control`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// `to[k] = from[k]` over this thread's slots of a tile of `n` elements.
    pub(super) fn copy_slots(&mut self, to: Value, from: Value, n: u64) {
        self.open_tile_loop(n);
        self.line(format!("v{}[k] = v{}[k];", to.0, from.0));
        self.close();
    }

    /// Runs `call` (returning a status) once per block, on thread 0, and leaves the function
    /// on every thread when it failed.
    pub(super) fn status_once(&mut self, call: &str) {
        match self.mode {
            Mode::Block => {
                self.line("{");
                self.depth += 1;
                self.line("int st = 0;");
                self.line(format!("if (lane == 0) st = {call};"));
                self.line("if (__syncthreads_or(st)) return 1;");
                self.depth -= 1;
                self.line("}");
            }
            Mode::Thread => self.line(format!("if ({call}) return 1;")),
        }
    }

    pub(super) fn linear(shape: &[u64], idx: &[String]) -> String {
        let mut terms = vec![];
        let mut inner = 1u64;
        for d in (0..shape.len()).rev() {
            terms.push(if inner == 1 {
                idx[d].clone()
            } else {
                format!("{} * {inner}LL", idx[d])
            });
            inner *= shape[d];
        }
        terms.reverse();
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }

    /// Elementwise ops on scalars, or on tiles with scalars broadcast.
    /// The dtype an elementwise op computes in: its first operand's (a select's second).
    pub(super) fn operand_dtype(&self, op: &Op, rd: DType) -> Result<DType, CodegenError> {
        if let OpKind::Select(_, a, _) = &op.kind {
            return self.dtype(*a);
        }
        Ok(op
            .kind
            .operands()
            .first()
            .map(|&v| self.dtype(v))
            .transpose()?
            .unwrap_or(rd))
    }

    /// Defines, inside a tile loop, the per-element values `e<N>` of the fused operands of
    /// `op` (transitively, each once, operands first).
    pub(super) fn fused_defs(
        &mut self,
        op: &Op,
        done: &mut HashSet<Value>,
    ) -> Result<(), CodegenError> {
        for o in op.kind.operands() {
            let Some(def) = self.fused.get(o).cloned() else {
                continue;
            };
            if !done.insert(o) {
                continue;
            }
            self.fused_defs(&def, done)?;
            let rd = self.dtype(o)?;
            let ind = self.operand_dtype(&def, rd)?;
            let ops: Vec<String> = def.kind.operands().iter().map(|&v| self.at(v)).collect();
            let expr = self.expr(&def, &ops, ind, rd)?;
            self.line(format!("const {} e{} = {expr};", ctype(rd), o.0));
        }
        Ok(())
    }

    pub(super) fn elementwise(&mut self, op: &Op) -> Result<(), CodegenError> {
        let Some(r) = op.result else { return Ok(()) };
        let rd = self.dtype(r)?;
        let operands = op.kind.operands();
        let ind = self.operand_dtype(op, rd)?;
        let tile = self.is_tile(r);
        let ops: Vec<String> = operands.iter().map(|&v| self.at(v)).collect();
        // Integer `/` and `%` check for a zero divisor unless it is a non-zero constant.
        let divides = if let OpKind::Binary(BinOp::Div | BinOp::Rem, _, b) = &op.kind {
            !ind.is_float() && !matches!(self.const_of(*b), Some(Const::Int(x)) if x != 0)
        } else {
            false
        };
        let expr = self.expr(op, &ops, ind, rd)?;
        if !tile {
            if divides {
                let msg = crate::sites::division_by_zero(&self.f.name, &self.site_op(op));
                let b = &ops[1];
                self.fault_if(&format!("{b} == 0"), msg, b, "0");
            }
            self.line(format!("const {} v{} = {expr};", ctype(rd), r.0));
            return Ok(());
        }
        let n: u64 = self.shape(r)?.iter().product();
        self.declare_tile(r, n, rd)?;
        if divides {
            let site = self.sites.len();
            let msg = crate::sites::division_by_zero(&self.f.name, &self.site_op(op));
            let msg = self.placed(msg);
            self.sites.push(msg);
            self.line("{");
            self.depth += 1;
            self.line("int bad = 0;");
            self.open_tile_loop(n);
            self.fused_defs(op, &mut HashSet::new())?;
            let b = &ops[1];
            self.line(format!("if ({b} == 0) {{ bad = 1; continue; }}"));
            self.line(format!("v{}[k] = {expr};", r.0));
            self.close();
            match self.mode {
                Mode::Block => self.line(format!(
                    "if (__syncthreads_or(bad)) {{ if (lane == 0) eg_fail(rt, {site}, 0, 0); return 1; }}"
                )),
                Mode::Thread => self.line(format!("if (bad) return eg_fail(rt, {site}, 0, 0);")),
            }
            self.depth -= 1;
            self.line("}");
        } else {
            self.open_tile_loop(n);
            self.fused_defs(op, &mut HashSet::new())?;
            self.line(format!("v{}[k] = {expr};", r.0));
            self.close();
        }
        Ok(())
    }

    /// The C expression of one element of an elementwise op. `d` is the operand dtype and
    /// `rd` the result's.
    pub(super) fn expr(
        &self,
        op: &Op,
        x: &[String],
        d: DType,
        rd: DType,
    ) -> Result<String, CodegenError> {
        let t = ctype(d);
        Ok(match &op.kind {
            OpKind::Binary(b, ..) => {
                let (a, c) = (&x[0], &x[1]);
                if d.is_float() {
                    match b {
                        BinOp::Add => format!("{a} + {c}"),
                        BinOp::Sub => format!("{a} - {c}"),
                        BinOp::Mul => format!("{a} * {c}"),
                        BinOp::Div => format!("{a} / {c}"),
                        BinOp::Min => format!("eg_fmin({a}, {c})"),
                        BinOp::Max => format!("eg_fmax({a}, {c})"),
                        _ => return Err(self.err(format!("`{}` on floats", b.name()))),
                    }
                } else if d == DType::Bool {
                    match b {
                        BinOp::And => format!("{a} && {c}"),
                        BinOp::Or => format!("{a} || {c}"),
                        BinOp::Xor => format!("{a} != {c}"),
                        _ => return Err(self.err(format!("`{}` on bool", b.name()))),
                    }
                } else {
                    let signed = d.is_signed();
                    let u = utype(d);
                    let wrap = |o: &str| {
                        if signed {
                            format!("({t})(({u}){a} {o} ({u}){c})")
                        } else {
                            format!("({t})({a} {o} {c})")
                        }
                    };
                    match b {
                        BinOp::Add => wrap("+"),
                        BinOp::Sub => wrap("-"),
                        BinOp::Mul => wrap("*"),
                        BinOp::Div if signed => format!("eg_div({a}, {c})"),
                        BinOp::Rem if signed => format!("eg_rem({a}, {c})"),
                        BinOp::Div => format!("{a} / {c}"),
                        BinOp::Rem => format!("{a} % {c}"),
                        BinOp::Min => format!("({a} < {c} ? {a} : {c})"),
                        BinOp::Max => format!("({a} > {c} ? {a} : {c})"),
                        BinOp::And => format!("({t})({a} & {c})"),
                        BinOp::Or => format!("({t})({a} | {c})"),
                        BinOp::Xor => format!("({t})({a} ^ {c})"),
                        BinOp::Shl | BinOp::Shr => {
                            prim::shift(&mut CPrim(d), *b == BinOp::Shl, a, c)
                        }
                    }
                }
            }
            OpKind::Unary(u, _) => {
                let a = &x[0];
                let f32_ = d == DType::F32;
                match (u, d.is_float()) {
                    (UnOp::Neg, true) => format!("-{a}"),
                    (UnOp::Neg, false) => format!("({t})(({})0 - ({}){a})", utype(d), utype(d)),
                    (UnOp::Not, _) if d == DType::Bool => format!("!{a}"),
                    (UnOp::Not, _) => format!("({t})~{a}"),
                    (UnOp::Sqrt, true) => format!("{}({a})", if f32_ { "sqrtf" } else { "sqrt" }),
                    (UnOp::Abs, true) => format!("{}({a})", if f32_ { "fabsf" } else { "fabs" }),
                    (UnOp::Abs, false) if d.is_signed() => {
                        format!("({a} < 0 ? ({t})(({u})0 - ({u}){a}) : {a})", u = utype(d))
                    }
                    (UnOp::Abs, false) => a.clone(),
                    (u, false) => return Err(self.err(format!("`{}` on integers", u.name()))),
                }
            }
            OpKind::Fma(..) => format!(
                "{}({}, {}, {})",
                if d == DType::F32 { "fmaf" } else { "fma" },
                x[0],
                x[1],
                x[2]
            ),
            OpKind::Cmp(c, ..) => {
                let o = match c {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                format!("{} {o} {}", x[0], x[1])
            }
            OpKind::Select(..) => format!("{} ? {} : {}", x[0], x[1], x[2]),
            OpKind::Cast(v) => cast(&x[0], self.dtype(*v)?, rd),
            // The same bits: CUDA's reinterpreting intrinsics (and the emulation's).
            OpKind::Bitcast(_) => match (d, rd) {
                (a, b) if a.is_narrow_float() || b.is_narrow_float() => format!("({t}){}", x[0]),
                (DType::F32, DType::I32) => format!("__float_as_int({})", x[0]),
                (DType::F32, _) => format!("(unsigned int)__float_as_int({})", x[0]),
                (DType::I32 | DType::U32, DType::F32) => format!("__int_as_float((int){})", x[0]),
                (DType::F64, DType::U64) => {
                    format!("(unsigned long long)__double_as_longlong({})", x[0])
                }
                (DType::F64, _) => format!("__double_as_longlong({})", x[0]),
                (_, _) => format!("__longlong_as_double((long long){})", x[0]),
            },
            _ => return Err(self.err("not an elementwise op")),
        })
    }
}

/// A C expression converting `x` from `from` to `to` with Rust `as` semantics.
pub(super) fn cast(x: &str, from: DType, to: DType) -> String {
    if from == to {
        return x.to_string();
    }
    let t = ctype(to);
    if to == DType::Bool {
        return format!("{x} != 0");
    }
    match (from.is_float(), to.is_float()) {
        (true, false) => match to {
            DType::I32 => format!("eg_f2i32({x})"),
            DType::I64 => format!("eg_f2i64({x})"),
            DType::U32 => format!("eg_f2u32({x})"),
            // `usize` saturates as an unsigned type, as in Rust.
            DType::U64 | DType::Index => format!("({t})eg_f2u64({x})"),
            _ => format!("({t}){x}"),
        },
        _ => format!("({t}){x}"),
    }
}

/// For every value of `f`, the preorder position (1-based, as [`Emitter::op`] counts) of
/// its last use; a use inside a loop that does not contain the definition counts at the
/// loop's end (the value is needed on every iteration).
pub(super) fn tile_last_uses(f: &Function) -> SecondaryMap<Value, usize> {
    pub(super) fn walk(
        f: &Function,
        b: &Block,
        pos: &mut usize,
        loops: &mut Vec<(usize, usize)>,
        def: &mut SecondaryMap<Value, usize>,
        uses: &mut Vec<(Value, usize)>,
    ) {
        for op in b.iter(&f.ops) {
            *pos += 1;
            let here = *pos;
            for v in op.kind.operands() {
                uses.push((v, here));
            }
            if let Some(r) = op.result {
                def.insert(r, here);
            }
            for nb in op.kind.blocks() {
                walk(f, nb, pos, loops, def, uses);
            }
            if matches!(op.kind, OpKind::For { .. }) {
                loops.push((here, *pos));
            }
        }
    }
    let (mut pos, mut loops, mut def, mut uses) = (0, vec![], SecondaryMap::new(), vec![]);
    walk(f, &f.body, &mut pos, &mut loops, &mut def, &mut uses);
    let mut last: SecondaryMap<Value, usize> = SecondaryMap::with_capacity(f.values.len());
    for (v, u) in uses {
        let d = def.get(v).copied().unwrap_or(0);
        let end = loops
            .iter()
            .filter(|(s, e)| *s <= u && u <= *e && *s > d)
            .map(|(_, e)| *e)
            .max()
            .unwrap_or(u);
        let l = last.get_or_insert_with(v, || 0);
        *l = (*l).max(end);
    }
    last
}
