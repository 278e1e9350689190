//! The typing rule of every op kind that is not elementwise, as methods of [`Typer`]: what
//! each operand must be and what the op defines. Each op's declaration (`crate::ir`'s
//! `op_kinds!`, its `typed |t| ...` clause) names the rule it follows; [`super::check`] runs
//! it, for the verifier and for the builder. A rule's error is the message, without the op or
//! its location (the caller adds them).

use super::{shapes_compatible, types_compatible, Typer};
use crate::ir::{AllreduceMode, Const, ReduceOp, TileOp, Value};
use crate::types::{DType, Shape, Type};

/// A rule's outcome: the message of the first operand at fault.
type R<T = ()> = Result<T, String>;

impl Typer<'_> {
    /// A constant: it fits its result's dtype.
    pub fn constant(&self, c: Const) -> R {
        let Some(Type::Scalar(d)) = self.result().cloned() else {
            return Err("a constant must define a scalar result".into());
        };
        let ok = match c {
            Const::Int(_) => d.is_int(),
            // A float storage constant is the `f32` of a value of its dtype.
            Const::F32(x) if d.is_narrow_float() => {
                x.is_nan()
                    || crate::eval::narrow_float(x as f64, d)
                        .widen_float()
                        .to_bits()
                        == x.to_bits()
            }
            Const::F32(_) => d == DType::F32,
            Const::F64(_) => d == DType::F64,
            Const::Bool(_) => d == DType::Bool,
        };
        if !ok {
            return Err(format!("constant `{c}` does not fit dtype `{d}`"));
        }
        Ok(())
    }

    /// An `index` result (a dim, `rank`, `nranks`, `world_rank`, `world_size`).
    pub fn index_result(&self) -> R {
        self.expect_result(&Type::Scalar(DType::Index))
    }

    /// An elementwise op other than a conversion ([`super::result_type`]).
    pub fn arithmetic(&self) -> R {
        self.elementwise(None)
    }

    /// A conversion (`cast`, `bitcast`): to the result's dtype.
    pub fn conversion(&self) -> R {
        let to = self.converts_to()?;
        self.elementwise(Some(to))
    }

    /// `slice %src[%i]`: the source without its leading dim.
    pub fn slice(&self, src: Value) -> R {
        match self.ty(src) {
            Type::Tensor(s, d) if s.rank() >= 1 => {
                self.expect_result(&Type::Tensor(Shape(s.0[1..].to_vec()), *d))
            }
            t => Err(format!(
                "operand 0 must be a tensor of rank >= 1, found `{t}`"
            )),
        }
    }

    /// `subview %src[%o..]`: the source's kind, dtype and trailing dims, no longer along dim 0.
    pub fn subview(&self, src: Value) -> R {
        let st = self.ty(src);
        let ok = match (st, self.result()) {
            (Type::Tensor(s, d), Some(Type::Tensor(t, e)))
            | (Type::Window(s, d), Some(Type::Window(t, e))) => {
                d == e
                    && s.rank() >= 1
                    && s.rank() == t.rank()
                    && shapes_compatible(&Shape(s.0[1..].to_vec()), &Shape(t.0[1..].to_vec()))
                    && match (s.0[0].as_const(), t.0[0].as_const()) {
                        (Some(a), Some(b)) => b <= a,
                        _ => true,
                    }
            }
            _ => false,
        };
        if !ok {
            return Err(format!("a subview of `{st}` must be a tensor or window of the same dtype and trailing dims, no longer than the source along dim 0"));
        }
        Ok(())
    }

    /// `view %src[%offsets]`: a tensor (or window) of the source's kind, dtype and rank, one
    /// offset per dim, no longer than the source along any dim whose two extents are known.
    pub fn view(&self, src: Value, offsets: &[Value]) -> R {
        let st = self.ty(src);
        let (s, t) = match (st, self.result()) {
            (Type::Tensor(s, d), Some(Type::Tensor(t, e)))
            | (Type::Window(s, d), Some(Type::Window(t, e)))
                if d == e && s.rank() == t.rank() && s.rank() >= 1 =>
            {
                (s, t)
            }
            (_, rt) => {
                let found = rt.map_or("no result".to_string(), |t| format!("`{t}`"));
                return Err(format!("a block view of `{st}` must be a tensor or window of the same dtype and rank, found {found}"));
            }
        };
        if offsets.len() != s.rank() {
            return Err(format!(
                "a block view of `{st}` takes {} offsets, one per dim, found {}",
                s.rank(),
                offsets.len()
            ));
        }
        for (i, (a, b)) in s.0.iter().zip(&t.0).enumerate() {
            if let (Some(a), Some(b)) = (a.as_const(), b.as_const()) {
                if b > a || b == 0 {
                    return Err(format!("a block view of `{st}` has extent {b} along dim {i}, where the source has {a}; give an extent from 1 to {a}"));
                }
            }
        }
        Ok(())
    }

    /// `broadcast`: a send window and a receive buffer of one shape and dtype.
    pub fn broadcast(&self, src: Value, dst: Value) -> R {
        self.collective_buffers(src, dst, false).map(|_| ())
    }

    /// `allgather`: whole buffers chunked along dim 0, or rows (`[1, M]` into `[P, M]`) with a
    /// window on one side.
    pub fn allgather(&self, src: Value, dst: Value) -> R {
        if !self.ty(dst).holds_rows_of(self.ty(src)) {
            return self.collective_buffers(src, dst, false).map(|_| ());
        }
        let (ss, sd) = self.memory(src, "operand 1 (send buffer)")?;
        let (ds, dd) = self.memory(dst, "operand 2 (receive buffer)")?;
        if sd != dd {
            return Err(format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`; give both the same dtype"));
        }
        let window = |v: Value| matches!(self.ty(v), Type::Window(..));
        if !window(src) && !window(dst) {
            return Err(format!("an allgather of rows (send buffer `{ss}`, receive buffer `{ds}`) needs a window on one side: the send buffer (every rank reads each peer's) or the receive buffer (every rank writes its row into each peer's); pass a `window(buf, shape, dtype)` view from the host"));
        }
        Ok(())
    }

    /// `all_to_all`: a send window of rows (one per rank) and a separate receive buffer.
    pub fn all_to_all(&self, src: Value, dst: Value) -> R {
        self.collective_buffers(src, dst, true)?;
        if src == dst {
            return Err("an in-place all_to_all (the same window as send and receive buffer) is not supported: rank r overwrites row q while rank q still reads it; give it a separate receive window".into());
        }
        Ok(())
    }

    /// `reduce_scatter`: chunks of one buffer, or row r of every rank's `[NR, M]` send window
    /// into a `[1, M]` receive buffer; a reduce op that takes the dtype.
    pub fn reduce_scatter(&self, src: Value, dst: Value, r: ReduceOp) -> R {
        if !self.ty(src).holds_rows_of(self.ty(dst)) {
            let d = self.collective_buffers(src, dst, false)?;
            return self.reduce_op_fits(r, d);
        }
        let (ss, sd) = self.memory(src, "operand 1 (send buffer)")?;
        let (ds, dd) = self.memory(dst, "operand 2 (receive buffer)")?;
        if sd != dd {
            return Err(format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`; give both the same dtype"));
        }
        if !matches!(self.ty(src), Type::Window(..)) {
            return Err(format!("a reduce-scatter into one row (send buffer `{ss}`, receive buffer `{ds}`) reads row r of every rank's send buffer: make the send buffer a window (`window(buf, shape, dtype)` from the host)"));
        }
        self.reduce_op_fits(r, sd)
    }

    /// `allreduce`: a send window and a receive buffer of one shape and dtype, a reduce op that
    /// takes it; `mesh` not in place, the other modes into a window.
    pub fn allreduce(&self, src: Value, dst: Value, r: ReduceOp, mode: AllreduceMode) -> R {
        let d = self.collective_buffers(src, dst, false)?;
        self.reduce_op_fits(r, d)?;
        if mode == AllreduceMode::Mesh && src == dst {
            return Err("an in-place `mesh` allreduce (the same window as send and receive buffer) is not supported: every rank reads every rank's buffer while each writes its own; use mode `two_phase` or `ring` (both support in place), or a separate receive window".into());
        }
        if mode != AllreduceMode::Mesh && !matches!(self.ty(dst), Type::Window(..)) {
            return Err(format!(
                "operand 2 (destination) of a `{}` allreduce must be a window (peers read it), found `{}`",
                mode.name(),
                self.ty(dst)
            ));
        }
        Ok(())
    }

    /// `all_to_all_v` and `allgather_v` (`gather`): a send window and a local receive buffer
    /// of one dtype whose rows have the same shape, a window of `u64` send counts (one per
    /// rank, or one for `allgather_v`) and a buffer of `u64` receive counts (one per rank:
    /// lengths of P are checked when the collective is lowered), four distinct buffers.
    pub fn v_collective(
        &self,
        src: Value,
        send_counts: Value,
        dst: Value,
        recv_counts: Value,
        gather: bool,
    ) -> R {
        let (ss, sd) = self.window(src, "operand 1 (send buffer)")?;
        let (cs, cd) = self.window(send_counts, "operand 2 (send counts)")?;
        let (ds, dd) = self.memory(dst, "operand 3 (receive buffer)")?;
        let (rs, rd) = self.memory(recv_counts, "operand 4 (receive counts)")?;
        if sd != dd || ss.rank() == 0 || ss.0[1..] != ds.0[1..] {
            return Err(format!("the receive buffer is `{ds}, {dd}` but the send buffer is `{ss}, {sd}`: give both the same dtype and the same row shape (`[S, M, ...]` and `[CAP, M, ...]`)"));
        }
        if gather && (cs.0 != [crate::Dim::Const(1)] || cd != DType::U64) {
            return Err(format!("the send count must be `[1]` of `u64` (the rows this rank contributes), found `{cs}, {cd}`"));
        }
        let counts = if gather {
            vec![(rs, rd)]
        } else {
            vec![(cs, cd), (rs, rd)]
        };
        for (s, d) in counts {
            if s.rank() != 1 || d != DType::U64 {
                return Err(format!("the send and receive counts must be `[NR]` of `u64` (one count of rows per rank), found `{s}, {d}`"));
            }
        }
        let kw = self.op.kind.keyword();
        if src == dst {
            return Err(format!("an in-place `{kw}` (the same window as send and receive buffer) is not supported: a rank overwrites rows a peer still reads; give it a separate receive buffer"));
        }
        // Any other two of the four the same buffer: one is written while it is read (by
        // peers) or written again.
        let roles = [
            (src, "send buffer"),
            (send_counts, "send counts"),
            (dst, "receive buffer"),
            (recv_counts, "receive counts"),
        ];
        for (i, (a, ra)) in roles.iter().enumerate() {
            if let Some((_, rb)) = roles[i + 1..].iter().find(|(b, _)| b == a) {
                return Err(format!("the {ra} and the {rb} of `{kw}` are the same buffer, which is written while it is read; give each its own buffer"));
            }
        }
        Ok(())
    }

    /// `elem %src[%indices]`: a scalar of the source's dtype, one index per dim.
    pub fn elem(&self, src: Value, indices: &[Value]) -> R {
        let (s, d) = self.memory(src, "operand 0 (source)")?;
        self.offsets(indices, s.rank(), "the source")?;
        self.expect_result(&Type::Scalar(d))
    }

    /// `set_elem %value, %dst[%indices]`: a scalar of the destination's dtype.
    pub fn set_elem(&self, value: Value, dst: Value, indices: &[Value]) -> R {
        let (s, d) = self.memory(dst, "operand 1 (destination)")?;
        self.offsets(indices, s.rank(), "the destination")?;
        self.scalar(value, "0 (value)", Some(d)).map(|_| ())
    }

    /// `local_array`: a tensor of rank 1.
    pub fn local_array(&self) -> R {
        match self.result() {
            Some(Type::Tensor(s, _)) if s.rank() == 1 => Ok(()),
            Some(t) => Err(format!(
                "result must be a tensor of rank 1 (`[T; N]`), found `{t}`"
            )),
            None => Err("local_array must define a result".into()),
        }
    }

    /// `load %src[%offsets]` (`remote`: `remote_load`, from a window): a tile of the source's
    /// rank and dtype, one offset per dim.
    pub fn load(&self, src: Value, offsets: &[Value], remote: bool) -> R {
        let (s, d) = self.buffer(src, "operand 0 (source)", remote)?;
        self.offsets(
            offsets,
            s.rank(),
            if remote { "the window" } else { "the source" },
        )?;
        match self.result() {
            Some(Type::Tile(ts, td)) if ts.rank() == s.rank() && *td == d => Ok(()),
            _ if remote => Err(format!(
                "result must be a tile of rank {} and dtype `{d}`",
                s.rank()
            )),
            Some(t) => Err(format!(
                "result must be a tile of rank {} and dtype `{d}`, found `{t}`",
                s.rank()
            )),
            None => Err("load must define a result".into()),
        }
    }

    /// `store %value, %dst[%offsets]` (`remote`: `remote_store`, into a window): a tile of the
    /// destination's rank and dtype, one offset per dim.
    pub fn store(&self, value: Value, dst: Value, offsets: &[Value], remote: bool) -> R {
        let (s, d) = self.buffer(dst, "operand 1 (destination)", remote)?;
        self.offsets(
            offsets,
            s.rank(),
            if remote {
                "the window"
            } else {
                "the destination"
            },
        )?;
        match self.ty(value) {
            Type::Tile(ts, td) if ts.rank() == s.rank() && *td == d => Ok(()),
            t => Err(format!(
                "operand 0 (value) must be a tile of rank {} and dtype `{d}`, found `{t}`",
                s.rank()
            )),
        }
    }

    /// `var %init`: a variable of the initial value's type (a scalar or a tile).
    pub fn var(&self, init: Value) -> R {
        let t = self.ty(init).clone();
        if !matches!(t, Type::Tile(..)) {
            self.scalar(init, "0 (initial value)", None)?;
        }
        self.expect_result(&Type::Ref(Box::new(t)))
    }

    /// `read %v`: the variable's type.
    pub fn read(&self, v: Value) -> R {
        match self.ty(v) {
            Type::Ref(t) => self.expect_result(t),
            t => Err(format!("operand 0 must be a variable, found `{t}`")),
        }
    }

    /// `write %v, %x`: a value of the variable's type.
    pub fn write(&self, v: Value, x: Value) -> R {
        match self.ty(v) {
            Type::Ref(t) => match &**t {
                Type::Scalar(d) => self.scalar(x, "1 (value)", Some(*d)).map(|_| ()),
                t if self.ty(x) != t => Err(format!(
                    "operand 1 (value) must be a `{t}` (the variable's type), found `{}`",
                    self.ty(x)
                )),
                _ => Ok(()),
            },
            t => Err(format!("operand 0 must be a variable, found `{t}`")),
        }
    }

    /// `for %var in ..`: an `index` loop variable.
    pub fn for_loop(&self, var: Value) -> R {
        if *self.ty(var) != Type::Scalar(DType::Index) {
            return Err("the loop variable must be an `index`".into());
        }
        Ok(())
    }

    /// `while %flag cap N`: a `bool` variable, a cap of at least one turn.
    pub fn while_loop(&self, flag: Value, cap: u64) -> R {
        let bool_var = Type::Ref(Box::new(Type::Scalar(DType::Bool)));
        if *self.ty(flag) != bool_var {
            return Err(format!(
                "operand 0 (`flag`) must be a `bool` variable (`var`), found `{}`",
                self.ty(flag)
            ));
        }
        if cap == 0 {
            return Err("a `while` loop's cap is at least 1 turn".into());
        }
        Ok(())
    }

    /// `call`/`dispatch` of `callee` (`dispatch`: without its `ctx` parameter, which the
    /// runtime supplies): one argument per parameter, each of a type that binds it. A callee
    /// the module does not hold yet is the caller's to report.
    pub fn call(&self, callee: &str, args: &[Value], dispatch: bool) -> R {
        let Some(c) = (self.callee)(callee) else {
            return Ok(());
        };
        let params: Vec<(&str, &Type)> = c
            .params
            .iter()
            .map(|p| (p.name.as_str(), c.ty(p.value)))
            .filter(|(_, t)| !(dispatch && **t == Type::Ctx))
            .collect();
        if params.len() != args.len() {
            return Err(format!(
                "`@{}` takes {} argument(s), {} given",
                c.name,
                params.len(),
                args.len()
            ));
        }
        for ((name, pt), &a) in params.iter().zip(args) {
            let at = self.ty(a);
            if !types_compatible(at, pt) {
                return Err(format!(
                    "argument `{name}` of `@{}` must be `{pt}`, found `{at}`",
                    c.name
                ));
            }
        }
        Ok(())
    }

    /// `group %ctx, [grid], axis`: an axis of the grid; a context.
    pub fn group(&self, grid: &[Value], axis: u64) -> R {
        if axis as usize >= grid.len() {
            return Err(format!(
                "the group's axis is {axis} but its grid has {} axes; name an axis from 0 to {}",
                grid.len(),
                grid.len().saturating_sub(1)
            ));
        }
        self.context()
    }

    /// A context result (a rank group).
    pub fn context(&self) -> R {
        self.expect_result(&Type::Ctx)
    }

    /// Nothing beyond what the declaration says of the operands (`val as index`, ...).
    pub fn declared(&self) -> R {
        Ok(())
    }

    /// `alloc_window_buffer`: a window buffer.
    pub fn window_buffer(&self) -> R {
        match self.result() {
            Some(Type::WinBuf(..)) => Ok(()),
            _ => Err("alloc_window_buffer must define a `winbuf` result".into()),
        }
    }

    /// `window %buf`: a view of the buffer with its shape and dtype.
    pub fn window_view(&self, b: Value) -> R {
        let Type::WinBuf(bs, bd) = self.ty(b) else {
            return Err(format!(
                "operand 0 must be a window buffer from `alloc_window_buffer`, found `{}`",
                self.ty(b)
            ));
        };
        match self.result() {
            Some(Type::Window(s, d)) if *d != *bd || !shapes_compatible(s, bs) => Err(format!("window viewed as `{s}, {d}` but the buffer was allocated as `{bs}, {bd}`; view it with the allocation's shape and dtype")),
            Some(Type::Window(..)) => Ok(()),
            _ => Err("window must define a `window` result".into()),
        }
    }

    /// `put %dst, %peer, %src` (into a peer's window) or `get` (from one): whole buffers of
    /// one shape and dtype.
    pub fn put_get(&self, dst: Value, src: Value, put: bool) -> R {
        let (rs, rd) = self.buffer(dst, "operand 0 (destination)", put)?;
        let (ls, ld) = self.buffer(src, "operand 2 (source)", !put)?;
        if rd != ld || !shapes_compatible(&rs, &ls) {
            return Err(format!("destination is `{rs}, {rd}` but source is `{ls}, {ld}`; put/get copy whole buffers of the same shape and dtype"));
        }
        Ok(())
    }

    /// `notify`/`wait`: a signal window of a 32- or 64-bit integer dtype, one offset per dim,
    /// a value of that dtype.
    pub fn signal(&self, signal: Value, offsets: &[Value], value: Value) -> R {
        let (s, d) = self.window(signal, "operand 0 (signal)")?;
        if !matches!(d, DType::I32 | DType::I64 | DType::U32 | DType::U64) {
            return Err(format!(
                "signals must be windows of i32, i64, u32 or u64, found `{d}`"
            ));
        }
        self.offsets(offsets, s.rank(), "the signal window")?;
        self.scalar(value, "value", Some(d)).map(|_| ())
    }

    /// A tile op: [`TileOp::infer`] on its operands gives the result type.
    pub fn tile(&self, t: &TileOp, args: &[Value]) -> R {
        let tys: Vec<&Type> = args.iter().map(|&a| self.ty(a)).collect();
        let Some(rt) = self.result() else {
            return Err("a tile op must define a result".into());
        };
        match t.infer(&tys, rt.shape(), rt.dtype()) {
            Ok(want) if &want == rt => Ok(()),
            Ok(want) => Err(format!("result type must be `{want}`, found `{rt}`")),
            Err(e) => Err(e),
        }
    }
}
