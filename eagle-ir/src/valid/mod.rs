//! The verifier: structural and typing rules of the IR.

mod arrays;
mod collectives;
mod remote;
mod views;

use crate::entity::{EntitySet, SecondaryMap};
use crate::error::{IrError, Result};
use crate::ir::{Block, Function, Level, Module, Op, OpId, OpKind, Value, Want};
use crate::text::print::print_op;
use crate::types::{DType, Shape, Type};
pub(crate) use crate::typing::shapes_compatible;
use std::collections::{HashMap, HashSet};

/// Whether an argument of type `a` may bind a parameter of type `p`.
pub(crate) fn types_compatible(a: &Type, p: &Type) -> bool {
    match (a, p) {
        (Type::Tensor(s, d), Type::Tensor(t, e))
        | (Type::Window(s, d), Type::Window(t, e))
        | (Type::Tile(s, d), Type::Tile(t, e)) => d == e && shapes_compatible(s, t),
        _ => a == p,
    }
}

struct V<'a> {
    m: &'a Module,
    f: &'a Function,
    scopes: Vec<HashSet<Value>>,
    /// The parameter each tensor value views (parameters, slices and subviews of them).
    roots: SecondaryMap<Value, usize>,
    /// The local arrays defined so far (`local_array` results).
    arrays: SecondaryMap<Value, ()>,
    /// The strided values defined so far: block views, and slices and sub-views of them.
    strided: SecondaryMap<Value, ()>,
    /// The `index` constants 0 defined so far (a block view at offset 0 past dim 0).
    zeros: SecondaryMap<Value, ()>,
}

impl V<'_> {
    fn fail<T>(&self, op: &Op, message: impl Into<String>) -> Result<T> {
        Err(IrError::Verify {
            function: self.f.name.clone(),
            op: print_op(self.f, op)
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            loc: op.loc.clone(),
            message: message.into(),
        })
    }
    fn ty(&self, v: Value) -> &Type {
        self.f.ty(v)
    }
    /// Fails when `dst` views a tensor parameter that is not `Out`.
    fn writable(&self, op: &Op, dst: Value, what: &str) -> Result<()> {
        if let Some(&i) = self.roots.get(dst) {
            let p = &self.f.params[i];
            if !p.out && matches!(self.ty(p.value), Type::Tensor(..)) {
                return self.fail(op, format!("{what} writes `{}`, an input tensor; mark the parameter `Out<Tensor<...>>` to write it", p.name));
            }
        }
        Ok(())
    }

    fn defined(&self, v: Value) -> bool {
        self.scopes.iter().any(|s| s.contains(&v))
    }
    fn define(&mut self, v: Value) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(v);
        }
    }

    fn block(&mut self, b: &Block) -> Result<()> {
        self.scopes.push(HashSet::new());
        for op in b.iter(&self.f.ops) {
            self.op(op)?;
        }
        self.scopes.pop();
        Ok(())
    }

    fn scalar(&self, op: &Op, v: Value, what: &str, want: Option<DType>) -> Result<DType> {
        match self.ty(v) {
            Type::Scalar(d) if want.is_none_or(|w| w == *d) => Ok(*d),
            t => {
                // A number of another dtype (a loop variable is `usize`): say how to convert.
                let fix = match (t, want) {
                    (Type::Scalar(d), Some(w)) if *d != DType::Bool && w != DType::Bool => {
                        format!("; convert it with `as {}`", w.rust_name())
                    }
                    _ => String::new(),
                };
                self.fail(
                    op,
                    format!(
                        "operand {what} must be {}, found `{t}`{fix}",
                        want.map(|w| format!("an `{}` scalar", w.name()))
                            .unwrap_or_else(|| "a scalar".into())
                    ),
                )
            }
        }
    }

    /// What the op's declaration says each operand must be (`val as index`, [`Want`]).
    fn declared_operands(&self, op: &Op) -> Result<()> {
        let mut res = Ok(());
        op.kind.for_each_want(&mut |i, field, want, v| {
            let ok = match (want, self.ty(v)) {
                (Want::Ctx, Type::Ctx) => self.f.level != Level::Host,
                (Want::Index, Type::Scalar(DType::Index))
                | (Want::Bool, Type::Scalar(DType::Bool)) => true,
                _ => false,
            };
            if ok || res.is_err() {
                return;
            }
            // A tuple variant's field has a position, not a name.
            let what = if field.parse::<usize>().is_ok() {
                i.to_string()
            } else {
                format!("{i} (`{field}`)")
            };
            res = match want {
                Want::Ctx => self.ctx(op, &what, v),
                Want::Index => self.scalar(op, v, &what, Some(DType::Index)).map(|_| ()),
                Want::Bool => self.scalar(op, v, &what, Some(DType::Bool)).map(|_| ()),
            };
        });
        res
    }

    fn ctx(&self, op: &Op, what: &str, v: Value) -> Result<()> {
        if *self.ty(v) != Type::Ctx {
            return self.fail(
                op,
                format!(
                    "operand {what} must be the device context `ctx`, found `{}`",
                    self.ty(v)
                ),
            );
        }
        if self.f.level == Level::Host {
            return self.fail(op, "device operations are not allowed in a host function; move them into a per-device program dispatched with `device = r`");
        }
        Ok(())
    }

    fn offsets(&self, op: &Op, offsets: &[Value], rank: usize, what: &str) -> Result<()> {
        if offsets.len() != rank {
            return self.fail(
                op,
                format!(
                    "{what} has rank {rank} but {} offset(s) were given; give one offset per dim",
                    offsets.len()
                ),
            );
        }
        // Each is an `index`: the declaration says so (`vals as index`).
        Ok(())
    }

    fn window(&self, op: &Op, v: Value, what: &str) -> Result<(Shape, DType)> {
        match self.ty(v) {
            Type::Window(s, d) => Ok((s.clone(), *d)),
            t => self.fail(op, format!("{what} must be a window, found `{t}`; pass a `window(buf, shape, dtype)` view from the host")),
        }
    }

    fn memory(&self, op: &Op, v: Value, what: &str) -> Result<(Shape, DType)> {
        match self.ty(v) {
            Type::Window(s, d) | Type::Tensor(s, d) => Ok((s.clone(), *d)),
            t => self.fail(
                op,
                format!("{what} must be a tensor or window, found `{t}`"),
            ),
        }
    }

    /// Checks the send window and receive buffer of a collective; returns the dtype.
    fn collective_buffers(&self, op: &Op, src: Value, dst: Value, rows: bool) -> Result<DType> {
        self.not_host(op, "collective")?;
        self.writable(op, dst, "the collective")?;
        let (ss, sd) = self.window(op, src, "operand 1 (send buffer)")?;
        let (ds, dd) = self.memory(op, dst, "operand 2 (receive buffer)")?;
        let want_rank = if rows { 2 } else { 1 };
        if ss.rank() < want_rank {
            return self.fail(
                op,
                format!(
                    "the send buffer must have rank {want_rank} or more{}, found shape {ss}",
                    if rows {
                        " ([P, M, ...]: one row per rank)"
                    } else {
                        " (chunked along dim 0)"
                    }
                ),
            );
        }
        if sd != dd || !shapes_compatible(&ss, &ds) {
            return self.fail(op, format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`; give both the same shape and dtype"));
        }
        Ok(sd)
    }

    fn expect_result(&self, op: &Op, ty: &Type) -> Result<()> {
        match op.result {
            Some(r) if self.ty(r) == ty => Ok(()),
            Some(r) => self.fail(
                op,
                format!("result type must be `{ty}`, found `{}`", self.ty(r)),
            ),
            None => self.fail(op, format!("op must define a result of type `{ty}`")),
        }
    }

    /// An elementwise op: the typing rule ([`crate::typing::result_type`]) on its operands, and
    /// the result it defines; `to` is a conversion's target dtype (`None` for the other ops).
    fn elementwise(&self, op: &Op, to: Option<DType>) -> Result<()> {
        match crate::typing::result_type(&op.kind, |v| self.ty(v), to) {
            Some(Ok(t)) => self.expect_result(op, &t),
            Some(Err(m)) => self.fail(op, m),
            None => self.fail(
                op,
                "internal: not an elementwise op, or a conversion without its target dtype",
            ),
        }
    }

    /// The dtype of the result of a conversion (`cast`, `bitcast`).
    fn converts_to(&self, op: &Op) -> Result<DType> {
        let Some(r) = op.result else {
            return self.fail(
                op,
                format!("`{}` must define a result", op.kind.info().name),
            );
        };
        match self.ty(r) {
            Type::Scalar(d) | Type::Tile(_, d) => Ok(*d),
            t => self.fail(
                op,
                format!("a conversion's result must be a scalar or tile, found `{t}`"),
            ),
        }
    }

    fn callee(&self, op: &Op, name: &str, want: Level) -> Result<&Function> {
        let Some(c) = self.m.function(name) else {
            return self.fail(op, format!("callee `@{name}` is not defined in the module"));
        };
        if c.level != want {
            return self.fail(
                op,
                format!(
                    "callee `@{name}` is a {} function but a {} function is expected here",
                    c.level.name(),
                    want.name()
                ),
            );
        }
        Ok(c)
    }

    fn args(&self, op: &Op, c: &Function, args: &[Value], skip_ctx: bool) -> Result<()> {
        let params: Vec<(&str, &Type, bool)> = c
            .params
            .iter()
            .map(|p| (p.name.as_str(), c.ty(p.value), p.out))
            .filter(|(_, t, _)| !(skip_ctx && **t == Type::Ctx))
            .collect();
        if params.len() != args.len() {
            return self.fail(
                op,
                format!(
                    "`@{}` takes {} argument(s), {} given",
                    c.name,
                    params.len(),
                    args.len()
                ),
            );
        }
        for ((name, pt, out), &a) in params.iter().zip(args) {
            let at = self.ty(a);
            if !types_compatible(at, pt) {
                return self.fail(
                    op,
                    format!(
                        "argument `{name}` of `@{}` must be `{pt}`, found `{at}`",
                        c.name
                    ),
                );
            }
            if *out {
                self.writable(
                    op,
                    a,
                    &format!("passing it as `Out` argument `{name}` of `@{}`", c.name),
                )?;
            }
        }
        Ok(())
    }

    fn host_only(&self, op: &Op, what: &str) -> Result<()> {
        if self.f.level != Level::Host {
            return self.fail(op, format!("`{what}` is a host operation; call it in the `#[eagle::host]` function and pass the result to the per-device program"));
        }
        Ok(())
    }

    fn not_host(&self, op: &Op, what: &str) -> Result<()> {
        if self.f.level == Level::Host {
            return self.fail(op, format!("`{what}` runs on a device, not on the host; move it into a per-device program dispatched with `device = r`"));
        }
        Ok(())
    }

    /// The level rule of a host function, from the op table ([`OpKind::info`]): it runs only
    /// what the host interpreter runs (scalar arithmetic, control flow, variables, slicing its
    /// tensors, windows and dispatches). Device work is refused here, naming the op and its
    /// source location, instead of failing when the program runs.
    fn host_level(&self, op: &Op) -> Result<()> {
        let info = op.kind.info();
        let what = if !info.levels.host {
            Some(info.what)
        } else if info.elementwise
            && op
                .kind
                .operands()
                .into_iter()
                .chain(op.result)
                .any(|v| matches!(self.ty(v), Type::Tile(..)))
        {
            Some("tile arithmetic")
        } else {
            None
        };
        match what {
            None => Ok(()),
            Some(what) => self.fail(
                op,
                format!("{what} is device work, not allowed in the host function; move it into a per-device program (`#[eagle::kernel(device)]`) and dispatch it with `device = r`"),
            ),
        }
    }

    fn op(&mut self, op: &Op) -> Result<()> {
        if self.f.level == Level::Host {
            self.host_level(op)?;
        }
        for (i, v) in op.kind.operands().into_iter().enumerate() {
            if v.index() >= self.f.values.len() || !self.defined(v) {
                return self.fail(
                    op,
                    format!("operand {i} is used before it is defined (or outside its scope)"),
                );
            }
        }
        self.declared_operands(op)?;
        self.array_uses(op)?;
        self.strided_uses(op)?;
        // Whether the op defines a value is a fact of its declaration (`value(..)`).
        let name = op.kind.keyword();
        match (op.result, op.kind.info().result) {
            (Some(_), false) => {
                return self.fail(
                    op,
                    format!("`{name}` defines no value; drop the `%N =` before it"),
                )
            }
            (None, true) => {
                return self.fail(
                    op,
                    format!("`{name}` defines a value; write it as `%N = {name} ...`"),
                )
            }
            _ => {}
        }
        if let Some(Type::Tile(s, _)) = op.result.map(|r| self.ty(r)) {
            if s.0.iter().any(|d| d.as_const() == Some(0)) {
                return self.fail(op, format!("the result is a tile of shape {s}, with an empty dim; a tile has at least one element along every dim (docs/language.md): give every extent a value of 1 or more"));
            }
        }
        use OpKind::*;
        match &op.kind {
            Const(_) | Dim(_) | Binary(..) | Unary(..) | Fma(..) | Cmp(..) | Select(..)
            | Cast(_) | Bitcast(_) | Math(..) => self.check_scalar(op)?,
            Slice { .. }
            | Subview { .. }
            | View { .. }
            | Broadcast { .. }
            | AllGather { .. }
            | AllToAll { .. }
            | ReduceScatter { .. }
            | AllReduce { .. } => self.check_views_and_collectives(op)?,
            AllToAllV {
                src,
                send_counts,
                dst,
                recv_counts,
                ..
            } => self.check_v_collective(op, *src, *send_counts, *dst, *recv_counts, false)?,
            AllGatherV {
                src,
                count,
                dst,
                recv_counts,
                ..
            } => self.check_v_collective(op, *src, *count, *dst, *recv_counts, true)?,
            Elem { .. } | SetElem { .. } | Load { .. } | Store { .. } | LocalArray => {
                self.check_memory(op)?
            }
            Var(_)
            | Read(_)
            | Write(..)
            | For { .. }
            | While { .. }
            | If { .. }
            | Call { .. }
            | Dispatch { .. } => self.check_control(op)?,
            Rank(_)
            | NRanks(_)
            | Group { .. }
            | Split { .. }
            | WorldRank { .. }
            | Barrier(_)
            | TrapIf { .. }
            | WorldSize
            | AllocWindowBuffer
            | Window(_) => self.check_context_and_host(op)?,
            Put { .. }
            | Get { .. }
            | RemoteLoad { .. }
            | RemoteStore { .. }
            | Notify { .. }
            | Wait { .. } => self.check_remote_and_signals(op)?,
            Tile(t, args) => {
                let tys: Vec<&Type> = args.iter().map(|&a| self.ty(a)).collect();
                let Some(r) = op.result else {
                    return self.fail(op, "a tile op must define a result");
                };
                let rt = self.ty(r);
                match t.infer(&tys, rt.shape(), rt.dtype()) {
                    Ok(want) if &want == rt => {}
                    Ok(want) => {
                        return self.fail(op, format!("result type must be `{want}`, found `{rt}`"))
                    }
                    Err(e) => return self.fail(op, e),
                }
            }
        }
        if let Some(r) = op.result {
            self.define(r);
            if let Slice { src, .. } | Subview { src, .. } | View { src, .. } = &op.kind {
                if let Some(&i) = self.roots.get(*src) {
                    self.roots.insert(r, i);
                }
            }
        }
        Ok(())
    }

    /// A constant: it fits its result's dtype.
    fn check_const(&mut self, op: &Op, c: crate::ir::Const) -> Result<()> {
        let Some(Type::Scalar(d)) = op.result.map(|r| self.ty(r).clone()) else {
            return self.fail(op, "a constant must define a scalar result");
        };
        let ok = match c {
            crate::ir::Const::Int(_) => d.is_int(),
            // A float storage constant is the `f32` of a value of its dtype.
            crate::ir::Const::F32(x) if d.is_narrow_float() => {
                x.is_nan()
                    || crate::eval::narrow_float(x as f64, d)
                        .widen_float()
                        .to_bits()
                        == x.to_bits()
            }
            crate::ir::Const::F32(_) => d == DType::F32,
            crate::ir::Const::F64(_) => d == DType::F64,
            crate::ir::Const::Bool(_) => d == DType::Bool,
        };
        if !ok {
            return self.fail(op, format!("constant `{c}` does not fit dtype `{d}`"));
        }
        Ok(())
    }

    /// Constants, dims and elementwise ops.
    fn check_scalar(&mut self, op: &Op) -> Result<()> {
        use OpKind::*;
        match &op.kind {
            Const(c) => self.check_const(op, *c)?,
            Dim(_) => self.expect_result(op, &Type::Scalar(DType::Index))?,
            Binary(..) | Unary(..) | Fma(..) | Cmp(..) | Select(..) | Math(..) => {
                self.elementwise(op, None)?
            }
            Cast(_) | Bitcast(_) => {
                let to = self.converts_to(op)?;
                self.elementwise(op, Some(to))?
            }
            other => {
                return self.fail(
                    op,
                    format!(
                        "internal: `{}` is not checked by `check_scalar`",
                        other.info().name
                    ),
                );
            }
        }
        Ok(())
    }

    /// A reduce-scatter into one row: rank r's `[1, M, ...]` receive buffer gets row r of every
    /// rank's `[NR, M, ...]` send window, reduced in rank order.
    fn check_reduce_scatter_rows(
        &mut self,
        op: &Op,
        src: Value,
        dst: Value,
        r: crate::ReduceOp,
    ) -> Result<()> {
        self.not_host(op, "collective")?;
        self.writable(op, dst, "the collective")?;
        let (ss, sd) = self.memory(op, src, "operand 1 (send buffer)")?;
        let (ds, dd) = self.memory(op, dst, "operand 2 (receive buffer)")?;
        if sd != dd {
            return self.fail(op, format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`; give both the same dtype"));
        }
        if !matches!(self.ty(src), Type::Window(..)) {
            return self.fail(op, format!("a reduce-scatter into one row (send buffer `{ss}`, receive buffer `{ds}`) reads row r of every rank's send buffer: make the send buffer a window (`window(buf, shape, dtype)` from the host)"));
        }
        self.reduce_op_fits(op, r, sd)
    }

    /// The reduce op `r` of a reduction collective takes buffers of dtype `d`.
    fn reduce_op_fits(&mut self, op: &Op, r: crate::ReduceOp, d: DType) -> Result<()> {
        if !r.accepts(d) {
            return self.fail(op, if r.logical() {
                format!("reduce op `{}` needs `bool` buffers, found `{d}`; compare first, or reduce numbers with `max` or `min`", r.name())
            } else {
                format!("reduce op `{}` does not fit dtype `bool`; reduce integers or floats (or cast the flags to `i32`)", r.name())
            });
        }
        Ok(())
    }

    /// Slices, sub-views and the built-in collectives.
    fn check_views_and_collectives(&mut self, op: &Op) -> Result<()> {
        use OpKind::*;
        match &op.kind {
            Slice { src, .. } => match self.ty(*src) {
                Type::Tensor(s, d) if s.rank() >= 1 => {
                    self.expect_result(op, &Type::Tensor(Shape(s.0[1..].to_vec()), *d))?
                }
                t => {
                    return self.fail(
                        op,
                        format!("operand 0 must be a tensor of rank >= 1, found `{t}`"),
                    )
                }
            },
            View { src, offsets } => self.check_view(op, *src, offsets)?,
            Subview { src, .. } => {
                let st = self.ty(*src).clone();
                let rt = op.result.map(|r| self.ty(r).clone());
                let ok = match (&st, &rt) {
                    (Type::Tensor(s, d), Some(Type::Tensor(t, e)))
                    | (Type::Window(s, d), Some(Type::Window(t, e))) => {
                        d == e
                            && s.rank() >= 1
                            && s.rank() == t.rank()
                            && shapes_compatible(
                                &Shape(s.0[1..].to_vec()),
                                &Shape(t.0[1..].to_vec()),
                            )
                            && match (s.0[0].as_const(), t.0[0].as_const()) {
                                (Some(a), Some(b)) => b <= a,
                                _ => true,
                            }
                    }
                    _ => false,
                };
                if !ok {
                    return self.fail(op, format!("a subview of `{st}` must be a tensor or window of the same dtype and trailing dims, no longer than the source along dim 0"));
                }
            }
            Broadcast { src, dst, .. } => {
                self.collective_buffers(op, *src, *dst, false)?;
            }
            AllGather { ctx, src, dst } if self.ty(*dst).holds_rows_of(self.ty(*src)) => {
                self.not_host(op, "collective")?;
                self.writable(op, *dst, "the collective")?;
                let (ss, sd) = self.memory(op, *src, "operand 1 (send buffer)")?;
                let (ds, dd) = self.memory(op, *dst, "operand 2 (receive buffer)")?;
                if sd != dd {
                    return self.fail(op, format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`; give both the same dtype"));
                }
                let window = |v: Value| matches!(self.ty(v), Type::Window(..));
                if !window(*src) && !window(*dst) {
                    return self.fail(op, format!("an allgather of rows (send buffer `{ss}`, receive buffer `{ds}`) needs a window on one side: the send buffer (every rank reads each peer's) or the receive buffer (every rank writes its row into each peer's); pass a `window(buf, shape, dtype)` view from the host"));
                }
            }
            AllGather { src, dst, .. } | AllToAll { src, dst, .. } => {
                let a2a = matches!(op.kind, AllToAll { .. });
                self.collective_buffers(op, *src, *dst, a2a)?;
                if a2a && src == dst {
                    return self.fail(op, "an in-place all_to_all (the same window as send and receive buffer) is not supported: rank r overwrites row q while rank q still reads it; give it a separate receive window");
                }
            }
            ReduceScatter {
                ctx,
                src,
                dst,
                op: r,
            } if self.ty(*src).holds_rows_of(self.ty(*dst)) => {
                self.check_reduce_scatter_rows(op, *src, *dst, *r)?
            }
            ReduceScatter {
                src, dst, op: r, ..
            }
            | AllReduce {
                src, dst, op: r, ..
            } => {
                let d = self.collective_buffers(op, *src, *dst, false)?;
                self.reduce_op_fits(op, *r, d)?;
                if let AllReduce {
                    mode: crate::ir::AllreduceMode::Mesh,
                    ..
                } = op.kind
                {
                    if src == dst {
                        return self.fail(op, "an in-place `mesh` allreduce (the same window as send and receive buffer) is not supported: every rank reads every rank's buffer while each writes its own; use mode `two_phase` or `ring` (both support in place), or a separate receive window");
                    }
                }
                if let AllReduce { mode, .. } = op.kind {
                    if mode != crate::ir::AllreduceMode::Mesh
                        && !matches!(self.ty(*dst), Type::Window(..))
                    {
                        return self.fail(op, format!("operand 2 (destination) of a `{}` allreduce must be a window (peers read it), found `{}`", mode.name(), self.ty(*dst)));
                    }
                }
            }
            other => {
                return self.fail(
                    op,
                    format!(
                        "internal: `{}` is not checked by `check_views_and_collectives`",
                        other.info().name
                    ),
                );
            }
        }
        Ok(())
    }

    /// Element and tile reads and writes.
    fn check_memory(&mut self, op: &Op) -> Result<()> {
        use OpKind::*;
        match &op.kind {
            Elem { src, indices } => {
                let (s, d) = self.memory(op, *src, "operand 0 (source)")?;
                self.offsets(op, indices, s.rank(), "the source")?;
                self.expect_result(op, &Type::Scalar(d))?;
            }
            SetElem {
                value,
                dst,
                indices,
            } => {
                self.writable(op, *dst, "the element assignment")?;
                let (s, d) = self.memory(op, *dst, "operand 1 (destination)")?;
                self.offsets(op, indices, s.rank(), "the destination")?;
                self.scalar(op, *value, "0 (value)", Some(d))?;
            }
            LocalArray => match op.result.map(|r| self.ty(r)) {
                Some(Type::Tensor(s, _)) if s.rank() == 1 => {}
                Some(t) => {
                    return self.fail(
                        op,
                        format!("result must be a tensor of rank 1 (`[T; N]`), found `{t}`"),
                    )
                }
                None => return self.fail(op, "local_array must define a result"),
            },
            Load { src, offsets } => {
                let (s, d) = self.memory(op, *src, "operand 0 (source)")?;
                self.offsets(op, offsets, s.rank(), "the source")?;
                match op.result.map(|r| self.ty(r)) {
                    Some(Type::Tile(ts, td)) if ts.rank() == s.rank() && *td == d => {}
                    Some(t) => {
                        return self.fail(
                            op,
                            format!(
                                "result must be a tile of rank {} and dtype `{d}`, found `{t}`",
                                s.rank()
                            ),
                        )
                    }
                    None => return self.fail(op, "load must define a result"),
                }
            }
            Store {
                value,
                dst,
                offsets,
            } => {
                self.writable(op, *dst, "the store")?;
                let (s, d) = self.memory(op, *dst, "operand 1 (destination)")?;
                self.offsets(op, offsets, s.rank(), "the destination")?;
                match self.ty(*value) {
                    Type::Tile(ts, td) if ts.rank() == s.rank() && *td == d => {}
                    t => return self.fail(op, format!("operand 0 (value) must be a tile of rank {} and dtype `{d}`, found `{t}`", s.rank())),
                }
            }
            other => {
                return self.fail(
                    op,
                    format!(
                        "internal: `{}` is not checked by `check_memory`",
                        other.info().name
                    ),
                );
            }
        }
        Ok(())
    }

    /// Variables, loops, branches, calls and dispatches.
    fn check_control(&mut self, op: &Op) -> Result<()> {
        use OpKind::*;
        match &op.kind {
            Var(init) => {
                let t = self.ty(*init).clone();
                if !matches!(t, Type::Tile(..)) {
                    self.scalar(op, *init, "0 (initial value)", None)?;
                }
                self.expect_result(op, &Type::Ref(Box::new(t)))?;
            }
            Read(v) => match self.ty(*v).clone() {
                Type::Ref(t) => self.expect_result(op, &t)?,
                t => return self.fail(op, format!("operand 0 must be a variable, found `{t}`")),
            },
            Write(v, x) => match self.ty(*v).clone() {
                Type::Ref(t) => match *t {
                    Type::Scalar(d) => {
                        self.scalar(op, *x, "1 (value)", Some(d))?;
                    }
                    t => {
                        if *self.ty(*x) != t {
                            return self.fail(op, format!("operand 1 (value) must be a `{t}` (the variable's type), found `{}`", self.ty(*x)));
                        }
                    }
                },
                t => return self.fail(op, format!("operand 0 must be a variable, found `{t}`")),
            },
            For { var, body, .. } => {
                if *self.ty(*var) != Type::Scalar(DType::Index) {
                    return self.fail(op, "the loop variable must be an `index`");
                }
                self.scopes.push(HashSet::from([*var]));
                self.block(body)?;
                self.scopes.pop();
            }
            While { flag, cap, body } => {
                let bool_var = Type::Ref(Box::new(Type::Scalar(DType::Bool)));
                if *self.ty(*flag) != bool_var {
                    return self.fail(
                        op,
                        format!(
                            "operand 0 (`flag`) must be a `bool` variable (`var`), found `{}`",
                            self.ty(*flag)
                        ),
                    );
                }
                if *cap == 0 {
                    return self.fail(op, "a `while` loop's cap is at least 1 turn");
                }
                self.block(body)?;
            }
            If {
                then_body,
                else_body,
                ..
            } => {
                self.block(then_body)?;
                self.block(else_body)?;
            }
            Call { callee, args } => {
                self.not_host(op, "call")?;
                let c = match self.m.function(callee) {
                    Some(c) if c.level == Level::Sample => c,
                    _ => self.callee(op, callee, Level::Compute)?,
                };
                self.args(op, c, args, false)?;
            }
            Dispatch { callee, args, .. } => {
                self.host_only(op, "dispatch")?;
                let c = self.callee(op, callee, Level::Device)?;
                self.args(op, c, args, true)?;
            }
            other => {
                return self.fail(
                    op,
                    format!(
                        "internal: `{}` is not checked by `check_control`",
                        other.info().name
                    ),
                );
            }
        }
        Ok(())
    }

    /// Rank, world size, barrier and the host's window ops.
    fn check_context_and_host(&mut self, op: &Op) -> Result<()> {
        use OpKind::*;
        match &op.kind {
            // The context operand is checked by its declaration (`val as ctx`).
            Rank(_) | NRanks(_) | WorldRank { .. } => {
                self.expect_result(op, &Type::Scalar(DType::Index))?
            }
            Group { grid, axis, .. } => {
                if *axis as usize >= grid.len() {
                    return self.fail(op, format!("the group's axis is {axis} but its grid has {} axes; name an axis from 0 to {}", grid.len(), grid.len().saturating_sub(1)));
                }
                self.expect_result(op, &Type::Ctx)?;
            }
            // The operands are checked by the declaration (`val as ctx`, `val as index`).
            Split { .. } => self.expect_result(op, &Type::Ctx)?,
            // The operands are checked by the declaration (`val as bool`, `val as index`).
            Barrier(_) | TrapIf { .. } => {}
            WorldSize => {
                self.host_only(op, "world_size()")?;
                self.expect_result(op, &Type::Scalar(DType::Index))?;
            }
            AllocWindowBuffer => {
                self.host_only(op, "alloc_window_buffer")?;
                match op.result.map(|r| self.ty(r)) {
                    Some(Type::WinBuf(..)) => {}
                    _ => return self.fail(op, "alloc_window_buffer must define a `winbuf` result"),
                }
            }
            Window(b) => {
                self.host_only(op, "window")?;
                let Type::WinBuf(bs, bd) = self.ty(*b).clone() else {
                    return self.fail(op, format!("operand 0 must be a window buffer from `alloc_window_buffer`, found `{}`", self.ty(*b)));
                };
                match op.result.map(|r| self.ty(r)) {
                    Some(Type::Window(s, d)) => {
                        if *d != bd || !shapes_compatible(s, &bs) {
                            return self.fail(op, format!("window viewed as `{s}, {d}` but the buffer was allocated as `{bs}, {bd}`; view it with the allocation's shape and dtype"));
                        }
                    }
                    _ => return self.fail(op, "window must define a `window` result"),
                }
            }
            other => {
                return self.fail(
                    op,
                    format!(
                        "internal: `{}` is not checked by `check_context_and_host`",
                        other.info().name
                    ),
                );
            }
        }
        Ok(())
    }
}

/// Verifies every function of `m`: operands defined before use and in scope, operand and
/// result types, ops allowed at the function's level, callees that exist at the right level
/// with matching arguments, and no recursion.
///
/// # Errors
/// [`IrError::Verify`] naming the function, the op (as IR text) and the operand at fault;
/// [`IrError::Recursion`] for a call cycle.
pub fn verify_module(m: &Module) -> Result<()> {
    let mut names = HashSet::new();
    for f in &m.functions {
        if !names.insert(f.name.as_str()) {
            return Err(IrError::Verify {
                function: f.name.clone(),
                op: format!("{} @{}", f.level.name(), f.name),
                loc: None,
                message: "the function is defined twice".into(),
            });
        }
        check_arena(f)?;
        let mut params = HashSet::new();
        for p in &f.params {
            if p.value.index() >= f.values.len() || !params.insert(p.value) {
                return Err(IrError::Verify {
                    function: f.name.clone(),
                    op: format!("parameter `{}`", p.name),
                    loc: None,
                    message: "parameter value is out of range or bound twice".into(),
                });
            }
            let t = f.ty(p.value);
            let ok = match f.level {
                Level::Host => matches!(t, Type::Tensor(..) | Type::Scalar(_)),
                _ => !matches!(t, Type::WinBuf(..) | Type::Ref(_)),
            };
            if !ok {
                return Err(IrError::Verify {
                    function: f.name.clone(),
                    op: format!("parameter `{}`", p.name),
                    loc: None,
                    message: format!(
                        "type `{t}` is not allowed for a parameter of a {} function",
                        f.level.name()
                    ),
                });
            }
        }
        let mut v = V {
            m,
            f,
            scopes: vec![params],
            roots: f
                .params
                .iter()
                .enumerate()
                .map(|(i, p)| (p.value, i))
                .collect(),
            arrays: SecondaryMap::new(),
            strided: SecondaryMap::new(),
            zeros: SecondaryMap::new(),
        };
        v.block(&f.body)?;
    }
    // Recursion: depth-first search over the call graph.
    let mut edges: HashMap<&str, Vec<&str>> = HashMap::new();
    for f in &m.functions {
        let mut out: Vec<&str> = vec![];
        f.walk(&mut |op| {
            if let OpKind::Call { callee, .. } | OpKind::Dispatch { callee, .. } = &op.kind {
                out.push(callee)
            }
        });
        edges.insert(&f.name, out);
    }
    fn dfs<'a>(
        n: &'a str,
        edges: &HashMap<&'a str, Vec<&'a str>>,
        stack: &mut Vec<&'a str>,
        done: &mut HashSet<&'a str>,
    ) -> Result<()> {
        if let Some(p) = stack.iter().position(|s| *s == n) {
            let mut chain = stack[p..].to_vec();
            chain.push(n);
            return Err(IrError::Recursion {
                chain: chain.join(" -> "),
            });
        }
        if done.contains(n) {
            return Ok(());
        }
        stack.push(n);
        for c in edges.get(n).into_iter().flatten() {
            dfs(c, edges, stack, done)?;
        }
        stack.pop();
        done.insert(n);
        Ok(())
    }
    let mut done = HashSet::new();
    for f in &m.functions {
        dfs(&f.name, &edges, &mut vec![], &mut done)?;
    }
    Ok(())
}

/// Every handle a block of `f` lists is one of `f`'s arena, listed once (a pass that emitted
/// an op twice, or reused a slot some block still lists, would run it twice or lose one).
fn check_arena(f: &Function) -> Result<()> {
    fn rec(f: &Function, b: &Block, seen: &mut EntitySet<OpId>) -> Result<()> {
        for &id in &b.ops {
            if !f.ops.is_valid(id) || !seen.insert(id) {
                return Err(IrError::Verify {
                    function: f.name.clone(),
                    op: format!("op #{}", id.0),
                    loc: None,
                    message: "a block lists an op handle that is not in the function's arena, \
                              or that another block lists too (an internal error of the pass \
                              that wrote the function)"
                        .into(),
                });
            }
            for nb in f.ops[id].kind.blocks() {
                rec(f, nb, seen)?;
            }
        }
        Ok(())
    }
    rec(f, &f.body, &mut EntitySet::new())
}

#[cfg(test)]
mod tests {
    /// The verifier refuses a body that lists one op twice, or a handle past the arena.
    #[test]
    fn a_handle_listed_twice_or_past_the_arena_is_a_verify_error() {
        let m = crate::parse_module(
            "device @k(%0 x: tensor<[4], f32>) {\n  %1 = const 0 : index\n  %2 = load %0[%1] : tile<[4], f32>\n}\n",
        )
        .unwrap();
        assert_eq!(super::verify_module(&m), Ok(()));
        let mut twice = m.clone();
        let first = twice.functions[0].body.ops[0];
        twice.functions[0].body.ops.push(first);
        let e = super::verify_module(&twice).unwrap_err().to_string();
        assert_eq!(
            e,
            "verifier: in function `k`, op `op #0`: a block lists an op handle that is not in the function's arena, or that another block lists too (an internal error of the pass that wrote the function)"
        );
        let mut past = m;
        past.functions[0].body.ops.push(crate::ir::OpId(99));
        let e = super::verify_module(&past).unwrap_err().to_string();
        assert!(e.contains("op `op #99`"), "{e}");
    }
}
