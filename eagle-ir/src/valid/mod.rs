//! The verifier: structural and typing rules of the IR.

mod arrays;
mod views;

use crate::entity::{EntitySet, SecondaryMap};
use crate::error::{IrError, Result};
use crate::ir::{Block, Function, Level, Module, Op, OpId, OpKind, Value, Want};
use crate::text::print::print_op;
use crate::types::{DType, Type};
use crate::typing::Typer;
use std::collections::{HashMap, HashSet};

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

    /// Operand `what` (`v`) of `op` is a scalar of dtype `want` ([`Typer::scalar`]).
    fn scalar(&self, op: &Op, v: Value, what: &str, want: DType) -> Result<()> {
        let none = |_: &str| None;
        match Typer::new(op, &self.f.values, &none).scalar(v, what, Some(want)) {
            Ok(_) => Ok(()),
            Err(m) => self.fail(op, m),
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
                Want::Index => self.scalar(op, v, &what, DType::Index),
                Want::Bool => self.scalar(op, v, &what, DType::Bool),
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

    /// What the verifier checks of an op before its typing rule: whether it may run at the
    /// function's level, whether the buffers it writes may be written, and that a callee
    /// exists at the level the op needs.
    fn before_typing(&self, op: &Op) -> Result<()> {
        use OpKind::*;
        match &op.kind {
            Broadcast { dst, .. }
            | AllGather { dst, .. }
            | ReduceScatter { dst, .. }
            | AllReduce { dst, .. }
            | AllToAll { dst, .. } => {
                self.not_host(op, "collective")?;
                self.writable(op, *dst, "the collective")
            }
            AllToAllV {
                dst, recv_counts, ..
            }
            | AllGatherV {
                dst, recv_counts, ..
            } => {
                self.not_host(op, "collective")?;
                self.writable(op, *dst, "the collective")?;
                self.writable(op, *recv_counts, "the collective")
            }
            SetElem { dst, .. } => self.writable(op, *dst, "the element assignment"),
            Store { dst, .. } => self.writable(op, *dst, "the store"),
            Put { .. } => self.not_host(op, "put"),
            Get { dst, .. } => {
                self.writable(op, *dst, "the get")?;
                self.not_host(op, "get")
            }
            RemoteLoad { .. } => self.not_host(op, "remote_load"),
            RemoteStore { .. } => self.not_host(op, "remote_store"),
            Notify { .. } | Wait { .. } => self.not_host(op, "notify/wait"),
            Call { callee, .. } => {
                self.not_host(op, "call")?;
                match self.m.function(callee) {
                    Some(c) if c.level == Level::Sample => Ok(()),
                    _ => self.callee(op, callee, Level::Compute).map(|_| ()),
                }
            }
            Dispatch { callee, .. } => {
                self.host_only(op, "dispatch")?;
                self.callee(op, callee, Level::Device).map(|_| ())
            }
            WorldSize => self.host_only(op, "world_size()"),
            AllocWindowBuffer => self.host_only(op, "alloc_window_buffer"),
            Window(_) => self.host_only(op, "window"),
            Const(_)
            | Dim(_)
            | Binary(..)
            | Unary(..)
            | Fma(..)
            | Cmp(..)
            | Select(..)
            | Cast(_)
            | Bitcast(_)
            | Math(..)
            | Slice { .. }
            | Subview { .. }
            | View { .. }
            | Elem { .. }
            | Load { .. }
            | LocalArray
            | Var(_)
            | Read(_)
            | Write(..)
            | For { .. }
            | While { .. }
            | If { .. }
            | Rank(_)
            | NRanks(_)
            | Group { .. }
            | Split { .. }
            | WorldRank { .. }
            | Barrier(_)
            | TrapIf { .. }
            | Tile(..) => Ok(()),
        }
    }

    /// What the verifier checks of an op after its typing rule: the nested blocks (a `for`
    /// loop's variable in scope in its body), and the `Out` arguments of a call or dispatch,
    /// which it writes.
    fn after_typing(&mut self, op: &Op) -> Result<()> {
        match &op.kind {
            OpKind::For { var, body, .. } => {
                self.scopes.push(HashSet::from([*var]));
                self.block(body)?;
                self.scopes.pop();
            }
            OpKind::While { body, .. } => self.block(body)?,
            OpKind::If {
                then_body,
                else_body,
                ..
            } => {
                self.block(then_body)?;
                self.block(else_body)?;
            }
            OpKind::Call { callee, args } => self.out_args(op, callee, args, false)?,
            OpKind::Dispatch { callee, args, .. } => self.out_args(op, callee, args, true)?,
            // Every other op has no block and writes no argument: what the verifier checks
            // of it came before its typing rule.
            other => debug_assert!(other.blocks().is_empty()),
        }
        Ok(())
    }

    /// The `Out` parameters of `callee` (without `ctx` for a dispatch) take buffers that may
    /// be written.
    fn out_args(&self, op: &Op, callee: &str, args: &[Value], dispatch: bool) -> Result<()> {
        let Some(c) = self.m.function(callee) else {
            return Ok(());
        };
        let params = c
            .params
            .iter()
            .filter(|p| !(dispatch && *c.ty(p.value) == Type::Ctx));
        for (p, &a) in params.zip(args) {
            if p.out {
                self.writable(
                    op,
                    a,
                    &format!("passing it as `Out` argument `{}` of `@{}`", p.name, c.name),
                )?;
            }
        }
        Ok(())
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
        self.before_typing(op)?;
        let m = self.m;
        let callee = |n: &str| m.function(n);
        if let Err(msg) = crate::typing::check(&Typer::new(op, &self.f.values, &callee)) {
            return self.fail(op, msg);
        }
        self.after_typing(op)?;
        if let Some(r) = op.result {
            self.define(r);
            if let OpKind::Slice { src, .. }
            | OpKind::Subview { src, .. }
            | OpKind::View { src, .. } = &op.kind
            {
                if let Some(&i) = self.roots.get(*src) {
                    self.roots.insert(r, i);
                }
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
    /// One rule, two users: the builder refuses an op that its typing rule refuses as it
    /// builds it (the builder has no check of its own for a stored tile's dtype), and the
    /// verifier refuses the same op read from text, in the same words.
    #[test]
    fn the_builder_and_the_verifier_apply_one_typing_rule() {
        use crate::builder::ModuleBuilder;
        use crate::error::IrError;
        use crate::ir::Level;
        use crate::types::{DType, Dim, Shape, Type};
        let rule =
            "operand 0 (value) must be a tile of rank 1 and dtype `f32`, found `tile<[4], f64>`";
        let mut m = ModuleBuilder::new();
        let built = m.define("k", Level::Device, |fb| {
            let x = fb.param(
                "x",
                Type::Tensor(Shape(vec![Dim::Const(4)]), DType::F64),
                false,
            );
            let y = fb.param(
                "y",
                Type::Tensor(Shape(vec![Dim::Const(4)]), DType::F32),
                true,
            );
            let t = fb.load(x, vec![0usize.into()], vec![Dim::Const(4)])?;
            fb.store(y, vec![0usize.into()], t)
        });
        match built {
            Err(IrError::Build { function, message }) => {
                assert_eq!(function, "k");
                assert!(
                    message.starts_with(&format!("`store`: {rule}")),
                    "{message}"
                );
            }
            other => panic!("expected the builder to refuse the store, got {other:?}"),
        }
        let text = "device @k(%0 x: tensor<[4], f64>, out %1 y: tensor<[4], f32>) {\n  %2 = const 0 : index\n  %3 = load %0[%2] : tile<[4], f64>\n  store %3, %1[%2]\n}\n";
        let parsed = crate::parse_module(text).expect("the text parses");
        let e = super::verify_module(&parsed).expect_err("the verifier refuses the store");
        assert!(e.to_string().contains(rule), "{e}");
    }

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
