//! Building control flow: variables, `for`, `if`, calls of compute kernels (and inlining),
//! dispatches.

use super::*;

impl FunctionBuilder<'_> {
    /// `let mut v = init;`
    ///
    /// # Errors
    /// [`IrError::Build`] when `init` is not a scalar.
    pub fn var(&mut self, init: impl Into<Operand>) -> Result<Value> {
        let init = self.value(init, None)?;
        match self.ty(init).clone() {
            t @ (Type::Scalar(_) | Type::Tile(..)) => {
                Ok(self.push(OpKind::Var(init), Type::Ref(Box::new(t))))
            }
            t => self.err(format!(
                "`let mut` holds scalars and tiles, found `{t}`{}; write tensors through an `Out` parameter",
                self.here()
            )),
        }
    }

    /// Reads a variable.
    ///
    /// # Errors
    /// [`IrError::Build`] when `var` is not a variable.
    pub fn read(&mut self, var: Value) -> Result<Value> {
        match self.ty(var).clone() {
            Type::Ref(t) => Ok(self.push(OpKind::Read(var), *t)),
            t => self.err(format!("expected a `let mut` variable, found `{t}`")),
        }
    }

    /// Writes a variable.
    ///
    /// # Errors
    /// [`IrError::Build`] when `var` is not a variable.
    pub fn write(&mut self, var: Value, value: impl Into<Operand>) -> Result<()> {
        let Type::Ref(t) = self.ty(var).clone() else {
            return self.err("assignment needs a `let mut` variable on the left".to_string());
        };
        let mut value = self.value(value, t.dtype())?;
        if let (Type::Scalar(_), vt @ Type::Tile(..)) = (&*t, self.ty(value)) {
            return self.err(format!(
                "the variable holds a `{t}` but is assigned a `{vt}`{}; declare it as a tile (`let mut v = zeros([M, N], f32);`) or reduce the tile to a scalar (`reduce_sum(t)`)",
                self.here()
            ));
        }
        if let Type::Tile(s, d) = &*t {
            let vt = self.ty(value).clone();
            let fits = match &vt {
                Type::Scalar(e) => e == d,
                Type::Tile(vs, e) => e == d && crate::tile::expands_to(vs, s),
                _ => false,
            };
            if !fits {
                return self.err(format!(
                    "the variable holds a `{t}` but is assigned a `{vt}`{}; a tile variable keeps its shape and dtype",
                    self.here()
                ));
            }
            if vt != *t {
                value = self.push(
                    OpKind::Tile(crate::tile::TileOp::Expand, vec![value]),
                    (*t).clone(),
                );
            }
        }
        self.push_void(OpKind::Write(var, value));
        Ok(())
    }

    /// `for i in lo..hi { body(i) }`.
    ///
    /// # Errors
    /// Whatever `body` returns.
    pub fn for_range(
        &mut self,
        lo: impl Into<Operand>,
        hi: impl Into<Operand>,
        body: impl FnOnce(&mut Self, Value) -> Result<()>,
    ) -> Result<()> {
        let (lo, hi) = (lo.into(), hi.into());
        let lo = self.value(lo, Some(DType::Index))?;
        let hi = self.value(hi, Some(DType::Index))?;
        let var = self.new_value(Type::Scalar(DType::Index));
        self.cur.open();
        let r = body(self, var);
        let body = self.cur.close();
        r?;
        self.push_void(OpKind::For { var, lo, hi, body });
        Ok(())
    }

    /// `while flag { body(flag) }` with at most `cap` turns: `flag` is a `bool` variable set to
    /// `cond` here; `body` must set it for the next turn (the macros write the condition again
    /// at the end of each turn, `false` after a `break`).
    ///
    /// # Errors
    /// [`IrError::Build`] when `cond` is not a `bool` scalar (naming the source line); whatever
    /// `body` returns.
    pub fn while_(
        &mut self,
        cap: u64,
        cond: impl Into<Operand>,
        body: impl FnOnce(&mut Self, Value) -> Result<()>,
    ) -> Result<()> {
        let c = self.value(cond, Some(DType::Bool))?;
        if self.ty(c) != &Type::Scalar(DType::Bool) {
            return self.err(format!(
                "a `while` condition is a `bool`, found `{}`{}",
                self.ty(c),
                self.here()
            ));
        }
        let flag = self.var(c)?;
        self.cur.open();
        let r = body(self, flag);
        let body = self.cur.close();
        r?;
        self.push_void(OpKind::While { flag, cap, body });
        Ok(())
    }

    /// `if cond { then } else { else }`.
    ///
    /// # Errors
    /// Whatever the branches return.
    pub fn if_(
        &mut self,
        cond: impl Into<Operand>,
        then_b: impl FnOnce(&mut Self) -> Result<()>,
        else_b: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let cond = self.value(cond, Some(DType::Bool))?;
        self.cur.open();
        let r = then_b(self);
        let then_body = self.cur.close();
        r?;
        self.cur.open();
        let r = else_b(self);
        let else_body = self.cur.close();
        r?;
        self.push_void(OpKind::If {
            cond,
            then_body,
            else_body,
        });
        Ok(())
    }

    pub(super) fn callee_args(
        &mut self,
        callee: &str,
        build: fn(&mut ModuleBuilder) -> Result<()>,
        args: Vec<Operand>,
        skip_ctx: bool,
    ) -> Result<Vec<Value>> {
        build(self.m)?;
        let Some(f) = self.m.module.function(callee) else {
            return self.err(format!("callee `{callee}` was not defined"));
        };
        let here = self.func.level;
        let problem = match (skip_ctx, f.level) {
            (_, Level::Host) => Some(format!("`{callee}` is a host function; host functions are launched from Rust (`{callee}.launch(&session, ...)`), not called from eagle code")),
            (false, Level::Device) if here == Level::Host => Some(format!("`{callee}` is a per-device program; dispatch it to a rank with `{callee}(..., device = r)`")),
            (false, Level::Device) => Some(format!("`{callee}` is a per-device program; only a host function can start it, with `device = r`")),
            (true, Level::Compute) => Some(format!("`{callee}` is a compute kernel; call it (without `device =`) from a per-device program, or mark it `#[eagle::kernel(device)]` to dispatch it")),
            (true, Level::Device) if here != Level::Host => Some(format!("`device = ...` dispatches belong in a host function; call `{callee}` from the host")),
            _ => None,
        };
        if let Some(m) = problem {
            return self.err(m);
        }
        let params: Vec<Type> = f
            .params
            .iter()
            .map(|p| f.ty(p.value).clone())
            .filter(|t| !(skip_ctx && *t == Type::Ctx))
            .collect();
        if params.len() != args.len() {
            return self.err(format!(
                "`{callee}` takes {} argument(s), found {}",
                params.len(),
                args.len()
            ));
        }
        args.into_iter()
            .zip(params)
            .map(|(a, t)| self.value(a, t.dtype()))
            .collect()
    }

    /// Calls compute kernel `callee` (defined by `build`).
    ///
    /// # Errors
    /// [`IrError::Build`] on an argument count mismatch; errors from building the callee.
    pub fn call(
        &mut self,
        callee: &str,
        build: fn(&mut ModuleBuilder) -> Result<()>,
        args: Vec<Operand>,
    ) -> Result<()> {
        let args = self.callee_args(callee, build, args, false)?;
        self.push_void(OpKind::Call {
            callee: callee.to_string(),
            args,
        });
        Ok(())
    }

    /// Inlines the body of `callee` here, with its parameters bound to `args` (one per
    /// parameter, types as the parameters'): the call without the call.
    ///
    /// # Errors
    /// [`IrError::Build`] on an argument count mismatch.
    pub fn inline(&mut self, callee: &Function, args: &[Value]) -> Result<()> {
        if callee.params.len() != args.len() {
            return self.err(format!(
                "inlining `{}`: {} argument(s) for {} parameter(s)",
                callee.name,
                args.len(),
                callee.params.len()
            ));
        }
        let mut map: crate::entity::SecondaryMap<Value, Value> = callee
            .params
            .iter()
            .map(|p| p.value)
            .zip(args.iter().copied())
            .collect();
        let mut arena = std::mem::take(self.cur.arena_mut());
        let cur = &mut self.cur;
        let body = callee.body.copy_into(&callee.ops, &mut arena, &mut |v| {
            if let Some(&w) = map.get(v) {
                return w;
            }
            let w = cur.value(callee.ty(v).clone());
            map.insert(v, w);
            w
        });
        *self.cur.arena_mut() = arena;
        self.cur.splice(body);
        Ok(())
    }

    /// Dispatches per-device program `callee` to rank `device`. The callee's `ctx` parameter
    /// is not passed: the runtime supplies it.
    ///
    /// # Errors
    /// [`IrError::Build`] on an argument count mismatch; errors from building the callee.
    pub fn dispatch(
        &mut self,
        callee: &str,
        build: fn(&mut ModuleBuilder) -> Result<()>,
        args: Vec<Operand>,
        device: impl Into<Operand>,
    ) -> Result<()> {
        let args = self.callee_args(callee, build, args, true)?;
        let device = self.value(device, Some(DType::Index))?;
        self.push_void(OpKind::Dispatch {
            callee: callee.to_string(),
            args,
            device,
        });
        Ok(())
    }
}
