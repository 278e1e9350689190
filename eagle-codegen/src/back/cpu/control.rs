//! Control flow of the CPU backend: variables, `for` loops, `if`, calls of compute kernels and
//! the ops that reach the runtime through hooks (rank, barrier, collectives' remains).

use super::*;

impl Lower<'_, '_> {
    /// Variables, loops, branches and calls.
    pub(super) fn lower_control(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::Var(init) => {
                let Some(Type::Ref(t)) = res_ty else {
                    return Err(self.err("var without a ref type"));
                };
                match *t {
                    // A tile variable owns a stack tile; writes copy into it, and reads copy
                    // out of it unless the read is in place (`reads_in_place`).
                    Type::Tile(s, d) => {
                        let n = s.numel().unwrap_or(0);
                        let slot = self.stack(n * d.size() as u64);
                        let src = self.mem(*init)?;
                        self.copy_tile(slot, src, n, d)?;
                        Some(Cv::Mem(slot))
                    }
                    t => {
                        let d = t.dtype().unwrap_or(DType::Index);
                        let x = self.scalar(*init)?;
                        let var = self.b.declare_var(cl_type(d));
                        self.b.def_var(var, x);
                        Some(Cv::Var(var))
                    }
                }
            }
            OpKind::Read(v) => match f.ty(*v) {
                Type::Ref(t) if matches!(**t, Type::Tile(..)) => {
                    let src = self.mem(*v)?;
                    if op.result.is_some_and(|r| self.in_place_reads.contains(r)) {
                        return Ok(Some(Cv::Mem(src)));
                    }
                    let (n, d) = (
                        t.shape().and_then(|s| s.numel()).unwrap_or(0),
                        t.dtype().unwrap_or(DType::F32),
                    );
                    let slot = self.stack(n * d.size() as u64);
                    self.copy_tile(slot, src, n, d)?;
                    Some(Cv::Mem(slot))
                }
                _ => Some(Cv::S(self.scalar(*v)?)),
            },
            OpKind::Write(v, x) if matches!(f.ty(*x), Type::Tile(..)) => {
                let t = f.ty(*x).clone();
                let (n, d) = (
                    t.shape().and_then(|s| s.numel()).unwrap_or(0),
                    t.dtype().unwrap_or(DType::F32),
                );
                let dst = self.mem(*v)?;
                let src = self.mem(*x)?;
                // Computed in the variable's tile already (`results_into_vars`).
                if src != dst {
                    self.copy_tile(dst, src, n, d)?;
                }
                None
            }
            OpKind::Write(v, x) => {
                let x = self.scalar(*x)?;
                let Cv::Var(var) = self.cv(*v)? else {
                    return Err(self.err("write to a non-variable"));
                };
                self.b.def_var(var, x);
                None
            }
            OpKind::For { var, lo, hi, body } => {
                let lo = self.scalar(*lo)?;
                let hi = self.scalar(*hi)?;
                let var = *var;
                self.emit_loop(lo, hi, &mut |lw, i| {
                    lw.vals.insert(var, Cv::S(i));
                    lw.block(body)
                })?;
                None
            }
            OpKind::While { flag, cap, body } => {
                self.lower_while(op, *flag, *cap, body)?;
                None
            }
            OpKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.scalar(*cond)?;
                let tb = self.b.create_block();
                let eb = self.b.create_block();
                let merge = self.b.create_block();
                self.b.ins().brif(c, tb, &[], eb, &[]);
                self.b.switch_to_block(tb);
                self.b.seal_block(tb);
                self.block(then_body)?;
                self.b.ins().jump(merge, &[]);
                self.b.switch_to_block(eb);
                self.b.seal_block(eb);
                self.block(else_body)?;
                self.b.ins().jump(merge, &[]);
                self.b.switch_to_block(merge);
                self.b.seal_block(merge);
                None
            }
            OpKind::Call { callee, args } => {
                let callee_f = self
                    .callee_refs
                    .get(callee)
                    .copied()
                    .ok_or_else(|| self.err(format!("unknown callee `{callee}`")))?;
                let slots = self.stack((args.len().max(1) * 8) as u64);
                for (i, a) in args.iter().enumerate() {
                    let v = match self.cv(*a)? {
                        Cv::S(x) => x,
                        Cv::Var(var) => self.b.use_var(var),
                        Cv::Mem(p) => p,
                        Cv::Win(id, _, woff) => {
                            let hi = self.b.ins().ishl_imm_u(woff, 16);
                            self.b.ins().bor(hi, id)
                        }
                        Cv::Ctx => self.ctx,
                    };
                    self.b
                        .ins()
                        .store(MemFlagsData::trusted(), v, slots, (i * 8) as i32);
                }
                let site = self.sync_site(op);
                self.trace_call(site, 0);
                let inst = self.b.ins().call(callee_f, &[self.ctx, slots]);
                let st = self.b.inst_results(inst)[0];
                self.trace_call(site, 1);
                self.check(st);
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_control`",
                    other.info().name
                )))
            }
        })
    }
}

impl Lower<'_, '_> {
    /// `while flag { body }`: the flag read before each turn; a turn past `cap` is a fault
    /// naming the loop (`sites::while_cap`), counted in an `i64` block parameter.
    fn lower_while(
        &mut self,
        op: &Op,
        flag: eagle_ir::Value,
        cap: u64,
        body: &eagle_ir::Block,
    ) -> Result<(), CodegenError> {
        let header = self.b.create_block();
        self.b.append_block_param(header, types::I64);
        let bb = self.b.create_block();
        let exit = self.b.create_block();
        let zero = self.iconst(0);
        self.b.ins().jump(header, &[zero.into()]);
        self.b.switch_to_block(header);
        let turns = self.b.block_params(header)[0];
        let go = self.scalar(flag)?;
        self.b.ins().brif(go, bb, &[], exit, &[]);
        self.b.switch_to_block(bb);
        self.b.seal_block(bb);
        let cap = i64::try_from(cap).unwrap_or(i64::MAX);
        let over = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, turns, cap);
        let msg = crate::sites::while_cap(&self.f.name, &self.site_op(op));
        let lim = self.iconst(cap);
        self.fault_if(over, msg, turns, lim);
        self.block(body)?;
        let next = self.b.ins().iadd_imm_s(turns, 1);
        self.b.ins().jump(header, &[next.into()]);
        self.b.seal_block(header);
        self.b.switch_to_block(exit);
        self.b.seal_block(exit);
        Ok(())
    }
}

/// The tile reads (`read` of a tile variable) of block `b` whose value can be the variable's
/// own stack tile instead of a copy: no write of the variable (in the block, or nested in a
/// later op) comes at or before the last use of the value, or of a value that may share its
/// memory or read it later (an elementwise op, which may be evaluated at its consumer, an
/// identity `cast`, a `reshape`). Tiles are never written after they are defined, so the
/// value then reads the bits it would have copied.
pub(super) fn reads_in_place(f: &Function, b: &IrBlock) -> eagle_ir::entity::EntitySet<Value> {
    let ops: Vec<&Op> = b.iter(&f.ops).collect();
    // Whether `op` (or an op nested in it) satisfies `pred`.
    let deep = |op: &Op, pred: &mut dyn FnMut(&Op) -> bool| {
        pred(op)
            || op
                .kind
                .blocks()
                .into_iter()
                .any(|b| b.any(&f.ops, &mut |o| pred(o)))
    };
    let mut out = eagle_ir::entity::EntitySet::new();
    for (k, op) in ops.iter().enumerate() {
        let (Some(r), OpKind::Read(var)) = (op.result, &op.kind) else {
            continue;
        };
        if !matches!(f.ty(r), Type::Tile(..)) {
            continue;
        }
        let mut shares = eagle_ir::entity::EntitySet::new();
        shares.insert(r);
        let mut last_use = None;
        let mut first_write = None;
        for (j, later) in ops.iter().enumerate().skip(k + 1) {
            let uses = deep(later, &mut |o| {
                o.kind.operands().iter().any(|v| shares.contains(*v))
            });
            if uses {
                last_use = Some(j);
                let carries = is_elementwise(&later.kind)
                    || matches!(
                        later.kind,
                        OpKind::Cast(_) | OpKind::Tile(TileOp::Reshape, _)
                    );
                if let (true, Some(lr)) = (carries, later.result) {
                    shares.insert(lr);
                }
            }
            if first_write.is_none()
                && deep(
                    later,
                    &mut |o| matches!(o.kind, OpKind::Write(w, _) if w == *var),
                )
            {
                first_write = Some(j);
            }
        }
        if first_write.is_none_or(|w| last_use.is_none_or(|u| u < w)) {
            out.insert(r);
        }
    }
    out
}

/// The `matmul`/`matmul_acc` results of block `b` that the GEMM may compute straight into a
/// tile variable's own stack tile, by result (the variable): `x = matmul..(..)` immediately
/// followed by `write(var, x)`, `x`'s only use. Nothing runs between the two, so writing the
/// variable at the matmul is writing it at the write, and no in-place read of the variable
/// ([`reads_in_place`]) is live across it but the matmul's own operands. The GEMM's `dst` may
/// be its `c` (`acc = matmul_acc(acc, ..)`), never its `a` or `b`: the lowering checks that
/// those are not the variable's tile and otherwise computes into a tile of its own.
pub(super) fn results_into_vars(
    f: &Function,
    b: &IrBlock,
    uses: &SecondaryMap<Value, usize>,
) -> SecondaryMap<Value, Value> {
    let ops: Vec<&Op> = b.iter(&f.ops).collect();
    let mut out = SecondaryMap::new();
    for pair in ops.windows(2) {
        let (OpKind::Tile(TileOp::Matmul | TileOp::MatmulAcc, _), Some(x)) =
            (&pair[0].kind, pair[0].result)
        else {
            continue;
        };
        if let OpKind::Write(var, w) = pair[1].kind {
            if w == x && uses.get(x).copied() == Some(1) {
                out.insert(x, var);
            }
        }
    }
    out
}
