//! Statements of a body: `let`, assignment, `for`, `while`, `if`, and calls (of kernels and of the
//! built-ins that return nothing).

use super::expr::callee_of;
use super::ops::*;
use super::*;

impl Cx {
    pub(super) fn bind(&mut self, n: &str, mutable: bool) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(n.to_string(), mutable);
        }
    }
    pub(super) fn lookup(&self, n: &str) -> Option<bool> {
        self.scopes.iter().rev().find_map(|s| s.get(n).copied())
    }

    /// A returning kernel's body: its statements, and the tail expression's `n` values (a
    /// tuple's elements when `n > 1`), each with the tokens entering its source location.
    pub(super) fn body_with_tail(
        &mut self,
        block: &syn::Block,
        n: usize,
    ) -> R<(TS, Vec<(TS, TS)>)> {
        let stmts = &block.stmts;
        let Some((Stmt::Expr(tail, None), init)) = stmts.split_last() else {
            let at = stmts.last().map_or(block.span(), |s| s.span());
            return err(at, "a kernel with a return type ends with its value, as in Rust: an expression without `;` (`x * 2.0`, `(t, i)`)");
        };
        let elems: Vec<&Expr> = match tail {
            Expr::Tuple(t) if n > 1 => t.elems.iter().collect(),
            e if n == 1 => vec![e],
            e => {
                return err(
                    e.span(),
                    format!(
                        "the kernel returns a tuple of {n} values; end the body with `(a, b, ...)`"
                    ),
                )
            }
        };
        if elems.len() != n {
            return err(
                tail.span(),
                format!(
                    "the kernel returns {n} values, but the tuple holds {}",
                    elems.len()
                ),
            );
        }
        self.scopes.push(HashMap::new());
        let r = (|| {
            let body = self.guarded_stmts(init)?;
            let tail = elems
                .iter()
                .map(|e| Ok((enter_loc(e.span()), self.expr(e)?)))
                .collect::<R<Vec<_>>>()?;
            Ok((body, tail))
        })();
        self.scopes.pop();
        r
    }

    pub(super) fn block_stmts(&mut self, stmts: &[Stmt]) -> R<TS> {
        self.scopes.push(HashMap::new());
        let r = self.guarded_stmts(stmts);
        self.scopes.pop();
        r
    }

    /// The statements in order; after one that may `continue` or `break` the innermost loop,
    /// the rest run only while that loop's `skip` flag is clear.
    fn guarded_stmts(&mut self, stmts: &[Stmt]) -> R<TS> {
        let mut out = TS::new();
        let n = stmts.len();
        for (i, s) in stmts.iter().enumerate() {
            out.extend(self.stmt(s, i + 1 == n)?);
            let rest = &stmts[i + 1..];
            if !rest.is_empty() && may_exit_stmt(s) {
                if let Some(l) = self.loops.last().cloned() {
                    let body = self.guarded_stmts(rest)?;
                    let (skip, not) = (&l.skip, not_tokens());
                    out.extend(quote!({
                        let __s = __f.read(#skip)?;
                        let __go = __f.un(#not, __s)?;
                        __f.if_(__go, |__f| { #body Ok(()) }, |__f| Ok(()))?;
                    }));
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// A `for` loop whose body (not a nested loop's) holds `continue` or `break`: each
    /// iteration runs only while `stop` is clear and starts with `skip` clear; `continue` sets
    /// `skip`, `break` sets both (the remaining iterations then do nothing).
    fn loop_with_exits(&mut self, lo: TS, hi: TS, var: &syn::Ident, stmts: &[Stmt]) -> R<TS> {
        let (l, body) = self.body_with_exits(stmts)?;
        let (skip, stop, not) = (&l.skip, &l.stop, not_tokens());
        Ok(quote!({
            let __lo = #lo;
            let __hi = #hi;
            let #stop = __f.var(false)?;
            __f.for_range(__lo, __hi, |__f, #var| {
                let __s = __f.read(#stop)?;
                let __go = __f.un(#not, __s)?;
                __f.if_(__go, |__f| {
                    let #skip = __f.var(false)?;
                    #body
                    Ok(())
                }, |__f| Ok(()))?;
                Ok(())
            })?;
        }))
    }

    /// The body of a loop (`for` or `while`) that holds `continue` or `break`, with the flags
    /// its exits set (named by the loop's depth).
    fn body_with_exits(&mut self, stmts: &[Stmt]) -> R<(LoopExits, TS)> {
        let depth = self.loops.len();
        let l = LoopExits {
            skip: format_ident!("__skip{depth}"),
            stop: format_ident!("__stop{depth}"),
        };
        self.loops.push(l.clone());
        let body = self.block_stmts(stmts);
        self.loops.pop();
        Ok((l, body?))
    }

    /// `let (a, mut b) = f(x);`: the values of a kernel that returns a tuple, one name each.
    fn let_tuple(&mut self, t: &syn::PatTuple, c: &syn::ExprCall) -> R<TS> {
        let mut names = vec![];
        for p in &t.elems {
            match p {
                Pat::Ident(pi) if pi.subpat.is_none() && pi.by_ref.is_none() => {
                    names.push((Some(pi.ident.clone()), pi.mutability.is_some()))
                }
                Pat::Wild(_) => names.push((None, false)),
                p => {
                    return err(
                        p.span(),
                        "a tuple pattern binds plain names or `_`: `let (a, mut b, _) = f(x);`",
                    )
                }
            }
        }
        let (p, name) = callee_of(c)?;
        let vals = if self.is_topk(p, &name) {
            self.topk_call(c, names.len())?
        } else {
            self.returning_call(c)?
        };
        let n = names.len();
        let mut out = quote!(let __r = #vals; let __r = __f.tuple_result(#name, __r, #n)?;);
        for (i, (id, mutable)) in names.iter().enumerate() {
            let Some(id) = id else { continue };
            out.extend(if *mutable {
                quote!(let #id: ::eagle::ir::Value = __f.var(__r[#i])?;)
            } else {
                quote!(let #id: ::eagle::ir::Value = __r[#i];)
            });
            self.bind(&id.to_string(), *mutable);
        }
        Ok(out)
    }

    /// `while cond { body }`: the condition built before the loop and again at the end of each
    /// turn into the loop's `bool` variable (`FunctionBuilder::while_`), at most the kernel's
    /// `while_cap` turns. With `continue`/`break`, as `for` (`loop_with_exits`): `continue`
    /// skips to the condition, `break` ends the loop without building it again.
    fn while_stmt(&mut self, w: &syn::ExprWhile) -> R<TS> {
        if let Expr::Let(l) = &*w.cond {
            return err(l.let_token.span, format!("`while let` is not supported (kernels have no patterns); write `while cond {{ ... }}`; {SUPPORTED_STMTS}"));
        }
        if let Some(l) = &w.label {
            return err(l.span(), "loop labels are not supported");
        }
        let cond = self.expr(&w.cond)?;
        let cap = self.while_cap;
        let enter = enter_loc(w.cond.span());
        let again = quote!({ #enter let __c = #cond; __f.leave(); __c });
        if !w.body.stmts.iter().any(may_exit_stmt) {
            let body = self.block_stmts(&w.body.stmts)?;
            return Ok(quote!({
                let __c = #cond;
                __f.while_(#cap, __c, |__f, __flag| {
                    #body
                    let __c = #again;
                    __f.write(__flag, __c)?;
                    Ok(())
                })?;
            }));
        }
        let (l, body) = self.body_with_exits(&w.body.stmts)?;
        let (skip, stop, not) = (&l.skip, &l.stop, not_tokens());
        Ok(quote!({
            let #stop = __f.var(false)?;
            let __c = #cond;
            __f.while_(#cap, __c, |__f, __flag| {
                let #skip = __f.var(false)?;
                #body
                let __s = __f.read(#stop)?;
                let __go = __f.un(#not, __s)?;
                __f.if_(__go, |__f| {
                    let __c = #again;
                    __f.write(__flag, __c)
                }, |__f| __f.write(__flag, false))?;
                Ok(())
            })?;
        }))
    }

    /// `let (v, i) = topk(t, k);` (`FunctionBuilder::topk`): `k` is a Rust expression (a
    /// constant), evaluated when the IR is built.
    fn topk_call(&mut self, c: &syn::ExprCall, names: usize) -> R<TS> {
        if c.args.len() != 2 || names != 2 {
            return err(c.span(), "`topk` takes a tile and a constant count and returns (values, indices): `let (v, i) = topk(t, k);`");
        }
        let t = self.expr(&c.args[0])?;
        let k = &c.args[1];
        Ok(quote!({
            let __a0 = #t;
            let (__v, __i) = __f.topk(__a0, ::eagle::ir::IntoDim::into_dim(#k))?;
            vec![__v, __i]
        }))
    }

    /// Every op a statement builds records the statement's source location (an expression
    /// inside it records its own).
    pub(super) fn stmt(&mut self, s: &Stmt, last: bool) -> R<TS> {
        let body = self.stmt_inner(s, last)?;
        if matches!(s, Stmt::Item(_)) {
            return Ok(body);
        }
        let enter = enter_loc(s.span());
        Ok(quote!(#enter #body __f.leave();))
    }

    pub(super) fn stmt_inner(&mut self, s: &Stmt, _last: bool) -> R<TS> {
        match s {
            Stmt::Local(l) => {
                if let (Pat::Tuple(t), Some(init)) = (&l.pat, &l.init) {
                    if let Expr::Call(c) = &*init.expr {
                        return self.let_tuple(t, c);
                    }
                }
                let (ident, mutable, ann) = match &l.pat {
                    Pat::Ident(pi) => (pi.ident.clone(), pi.mutability.is_some(), None),
                    Pat::Type(pt) => match &*pt.pat {
                        Pat::Ident(pi) => (pi.ident.clone(), pi.mutability.is_some(), Some(&*pt.ty)),
                        p => return err(p.span(), "only `let name = ...` bindings are supported (no patterns)"),
                    },
                    p => return err(p.span(), "only `let name = ...` bindings are supported (no tuple or struct patterns)"),
                };
                let Some(init) = &l.init else {
                    return err(l.span(), "a `let` needs an initial value: `let x = ...;`");
                };
                if let Some((_, d)) = &init.diverge {
                    return err(d.span(), "`let ... else` is not supported");
                }
                let ns = ident.to_string();
                if matches!(&*init.expr, Expr::Repeat(_) | Expr::Array(_)) {
                    return self.let_array(&ident, mutable, ann, &init.expr);
                }
                self.arrays.remove(&ns);
                if let Expr::Path(p) = &*init.expr {
                    if let Some(a) = p.path.get_ident().filter(|a| self.arrays.contains_key(&a.to_string())) {
                        return err(a.span(), format!("`let {ns} = {a}` would share `{a}`'s elements, where Rust copies the array; make a new array (`let {ns} = [0.0; N];`) and copy the elements you need in a loop"));
                    }
                }
                let e = self.expr(&init.expr)?;
                let value = match ann {
                    Some(Type::Path(tp)) => {
                        let n = tp.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
                        let d = dtype_tokens(&n, tp.span())?;
                        quote!({ let __a0 = #e; __f.let_typed(#ns, __a0, #d)? })
                    }
                    Some(t) => return err(t.span(), "a `let` annotation must be a scalar dtype such as `f32` or `usize`"),
                    None => quote!({ let __a0 = #e; __f.value(__a0, None)? }),
                };
                let t = if mutable {
                    quote!(let #ident: ::eagle::ir::Value = { let __v = #value; __f.var(__v)? };)
                } else {
                    quote!(let #ident: ::eagle::ir::Value = #value;)
                };
                self.bind(&ns, mutable);
                Ok(t)
            }
            Stmt::Item(i) => match i {
                syn::Item::Const(_) => Ok(quote!(#i)),
                _ => err(i.span(), "items inside a kernel are not supported (only `const`); define functions at module level with `#[eagle::kernel]`"),
            },
            Stmt::Expr(e, semi) => {
                // A trailing value (`x + 1` without `;`) would be a return value in Rust.
                let value_like = matches!(
                    e,
                    Expr::Lit(_) | Expr::Path(_) | Expr::Unary(_) | Expr::Cast(_) | Expr::Index(_) | Expr::MethodCall(_) | Expr::Paren(_)
                ) || matches!(e, Expr::Binary(b) if !is_compound(&b.op));
                if semi.is_none() && value_like {
                    return err(e.span(), "a trailing value is a return value, and this function has no return type: end the statement with `;`, or give a compute kernel a return type (`-> f32`, `-> Tile<f32, M, N>`)");
                }
                self.stmt_expr(e)
            }
            Stmt::Macro(m) => err(
                m.span(),
                format!("macros such as `{}!` are not supported inside kernels; {SUPPORTED_STMTS}", m.mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default()),
            ),
        }
    }

    pub(super) fn stmt_expr(&mut self, e: &Expr) -> R<TS> {
        match e {
            Expr::ForLoop(fl) => {
                let var = match &*fl.pat {
                    Pat::Ident(pi) if pi.mutability.is_none() => pi.ident.clone(),
                    Pat::Wild(w) => format_ident!("_", span = w.span()),
                    p => return err(p.span(), "the loop variable must be a plain name"),
                };
                let Expr::Range(r) = &*fl.expr else {
                    return err(fl.expr.span(), "`for` loops iterate over a half-open range `a..b`");
                };
                if let syn::RangeLimits::Closed(c) = r.limits {
                    return err(c.span(), "inclusive ranges `a..=b` are not supported; write `a..b + 1`");
                }
                let (Some(lo), Some(hi)) = (&r.start, &r.end) else {
                    return err(r.span(), "`for` ranges need both bounds: `a..b`");
                };
                if let Some(l) = &fl.label {
                    return err(l.span(), "loop labels are not supported");
                }
                let lo = self.expr(lo)?;
                let hi = self.expr(hi)?;
                self.scopes.push(HashMap::new());
                self.bind(&var.to_string(), false);
                let r = if fl.body.stmts.iter().any(may_exit_stmt) {
                    self.loop_with_exits(lo, hi, &var, &fl.body.stmts)
                } else {
                    let body = self.block_stmts(&fl.body.stmts);
                    body.map(|body| quote!({ let __lo = #lo; let __hi = #hi; __f.for_range(__lo, __hi, |__f, #var| { #body Ok(()) })?; }))
                };
                self.scopes.pop();
                r
            }
            Expr::If(i) => self.if_stmt(i),
            Expr::Block(b) => {
                let body = self.block_stmts(&b.block.stmts)?;
                Ok(quote!({ #body }))
            }
            Expr::Assign(a) if matches!(&*a.left, Expr::Index(_)) => {
                let Expr::Index(ix) = &*a.left else { unreachable!("matched above") };
                self.assign_index(ix, &a.right)
            }
            Expr::Binary(b) if is_compound(&b.op) && matches!(&*b.left, Expr::Index(_)) => {
                let Expr::Index(ix) = &*b.left else { unreachable!("matched above") };
                self.update_index(ix, b)
            }
            Expr::Assign(a) => {
                let v = self.mut_var(&a.left)?;
                let rhs = self.expr(&a.right)?;
                Ok(quote!({ let __a0 = #v; let __a1 = #rhs; __f.write(__a0, __a1)? };))
            }
            Expr::Binary(b) if is_compound(&b.op) => {
                let v = self.mut_var(&b.left)?;
                let op = compound_op(&b.op);
                let rhs = self.expr(&b.right)?;
                Ok(quote!({ let __r = { let __a0 = #v; __f.read(__a0)? }; let __x = { let __a0 = #op; let __a1 = __r; let __a2 = #rhs; __f.bin(__a0, __a1, __a2)? }; { let __a0 = #v; let __a1 = __x; __f.write(__a0, __a1)? }; }))
            }
            Expr::Call(c) => {
                if let Some(t) = self.call_stmt(c)? {
                    return Ok(t);
                }
                let e = self.expr(e)?;
                Ok(quote!(let _ = #e;))
            }
            Expr::While(w) => self.while_stmt(w),
            Expr::Loop(l) => err(l.loop_token.span, format!("`loop` is not supported; use `for i in a..b`; {SUPPORTED_STMTS}")),
            Expr::Match(m) => err(m.match_token.span, "`match` is not supported; use `if`/`else` on comparisons"),
            Expr::Return(r) => err(r.return_token.span, "`return` is not supported; eagle functions run to their end (use `if` to skip work; a kernel with a return type ends with its value, chosen with `select(cond, a, b)`)"),
            Expr::Break(b) => {
                if let Some(l) = &b.label {
                    return err(l.span(), "loop labels are not supported; `break` leaves the innermost loop");
                }
                if let Some(v) = &b.expr {
                    return err(v.span(), "`break` with a value is not supported: eagle's loops have no value");
                }
                let Some(l) = self.loops.last() else {
                    return err(b.span(), "`break` outside a loop (`for` or `while`)");
                };
                let (skip, stop) = (&l.skip, &l.stop);
                Ok(quote!(__f.write(#stop, true)?; __f.write(#skip, true)?;))
            }
            Expr::Continue(c) => {
                if let Some(l) = &c.label {
                    return err(l.span(), "loop labels are not supported; `continue` goes to the next turn of the innermost loop");
                }
                let Some(l) = self.loops.last() else {
                    return err(c.span(), "`continue` outside a loop (`for` or `while`)");
                };
                let skip = &l.skip;
                Ok(quote!(__f.write(#skip, true)?;))
            }
            other => {
                let e = self.expr(other)?;
                Ok(quote!(let _ = #e;))
            }
        }
    }

    pub(super) fn if_stmt(&mut self, i: &syn::ExprIf) -> R<TS> {
        let c = self.expr(&i.cond)?;
        let then_b = self.block_stmts(&i.then_branch.stmts)?;
        let else_b = match &i.else_branch {
            None => TS::new(),
            Some((_, e)) => match &**e {
                Expr::If(ei) => self.if_stmt(ei)?,
                Expr::Block(b) => self.block_stmts(&b.block.stmts)?,
                other => return err(other.span(), "unsupported `else` branch"),
            },
        };
        Ok(
            quote!({ let __c = #c; __f.if_(__c, |__f| { #then_b Ok(()) }, |__f| { #else_b Ok(()) })?; }),
        )
    }

    pub(super) fn mut_var(&self, e: &Expr) -> R<syn::Ident> {
        if let Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                match self.lookup(&id.to_string()) {
                    Some(true) => return Ok(id.clone()),
                    Some(false) => {
                        return err(
                            id.span(),
                            format!("`{id}` is not mutable; declare it with `let mut {id} = ...`"),
                        )
                    }
                    None => {}
                }
            }
        }
        if let Expr::Index(_) = e {
            return err(e.span(), "element assignment `x[i] = v` is not supported; write tiles with `store(dst, [offsets], tile)`");
        }
        err(
            e.span(),
            "the left side of an assignment must be a `let mut` variable",
        )
    }

    /// A call in statement position: a call or dispatch of another eagle function, or an
    /// intrinsic with no result. Returns None for intrinsics with results.
    pub(super) fn call_stmt(&mut self, c: &syn::ExprCall) -> R<Option<TS>> {
        let (path, name) = callee_of(c)?;
        if path.segments.len() == 1 && is_intrinsic(&name) {
            return self.intrinsic_stmt(&name, c);
        }
        self.check_kernel_callee(c, &name)?;
        let mut args = vec![];
        let mut device = None;
        for a in &c.args {
            if let Expr::Assign(asg) = a {
                if matches!(&*asg.left, Expr::Path(lp) if lp.path.is_ident("device")) {
                    device = Some(self.expr(&asg.right)?);
                    continue;
                }
                return err(a.span(), "the only keyword argument is `device = r`");
            }
            args.push(self.expr(a)?);
        }
        if device.is_none() && self.level == Level::Host {
            return err(c.span(), format!("a host function runs per-device programs on ranks: dispatch `{name}` with `{name}(..., device = r)`"));
        }
        if device.is_some() && self.level != Level::Host {
            return err(c.span(), "`device = r` dispatches belong in `#[eagle::host]` functions; here, call the function without `device =`");
        }
        let callee = quote_spanned!(path.span()=> <#path as ::eagle::ir::EagleFn>);
        Ok(Some(match device {
            Some(d) => {
                quote!({ let __args = vec![#(#args),*]; let __d = #d; __f.dispatch(#callee::NAME, #callee::build, __args, __d)?; })
            }
            None => {
                quote!({ let __args = vec![#(#args),*]; __f.call(#callee::NAME, #callee::build, __args)?; })
            }
        }))
    }

    /// `x[i]... = right`: an element of a window parameter, of a local value (`index_chain`),
    /// or of the value `x[i]...` names.
    fn assign_index(&mut self, ix: &syn::ExprIndex, right: &Expr) -> R<TS> {
        if let Some((w, idx)) = self.window_element(ix)? {
            let rhs = self.expr(right)?;
            return Ok(
                quote!({ let __a0 = #w; let __a1 = vec![#(#idx),*]; let __a2 = #rhs; __f.set_elem(__a0, __a1, __a2)?; }),
            );
        }
        self.check_writable(&ix.expr, "the element assignment")?;
        if let Some((base, idx)) = super::expr::index_chain(ix) {
            let (last, rest) = idx.split_last().expect("two or more indices");
            let steps = self.index_steps(base, rest)?;
            let last = self.expr(last)?;
            let rhs = self.expr(right)?;
            return Ok(
                quote!({ #steps let __a1 = #last; let __a2 = #rhs; __f.set_index_last(__at, __a1, __a2)?; }),
            );
        }
        let base = self.val(&ix.expr)?;
        let i = self.expr(&ix.index)?;
        let rhs = self.expr(right)?;
        Ok(
            quote!({ let __a0 = #base; let __a1 = #i; let __a2 = #rhs; __f.set_index(__a0, __a1, __a2)?; }),
        )
    }

    /// `x[i]... op= right` (`b`'s left side is `ix`), as [`Self::assign_index`].
    fn update_index(&mut self, ix: &syn::ExprIndex, b: &syn::ExprBinary) -> R<TS> {
        if let Some((w, idx)) = self.window_element(ix)? {
            let op = compound_op(&b.op);
            let rhs = self.expr(&b.right)?;
            return Ok(quote!({
                let __w = #w;
                let __i0: Vec<::eagle::ir::Operand> = vec![#(#idx),*];
                let __i = __i0
                    .into_iter()
                    .map(|i| __f.value(i, Some(::eagle::ir::DType::Index)).map(::eagle::ir::Operand::Val))
                    .collect::<::eagle::ir::Result<Vec<_>>>()?;
                let __old = __f.elem(__w, __i.clone())?;
                let __r = #rhs;
                let __new = __f.bin(#op, __old, __r)?;
                __f.set_elem(__w, __i, __new)?;
            }));
        }
        self.check_writable(&ix.expr, "the element update")?;
        if let Some((base, idx)) = super::expr::index_chain(ix) {
            let (last, rest) = idx.split_last().expect("two or more indices");
            let steps = self.index_steps(base, rest)?;
            let last = self.expr(last)?;
            let op = compound_op(&b.op);
            let rhs = self.expr(&b.right)?;
            return Ok(quote!({
                #steps
                let __i0 = #last;
                let __i = ::eagle::ir::Operand::Val(__f.value(__i0, Some(::eagle::ir::DType::Index))?);
                let __old = { let __s = __f.index_step(__at.clone(), __i.clone())?; __f.index_done(__s)? };
                let __r = #rhs;
                let __new = __f.bin(#op, __old, __r)?;
                __f.set_index_last(__at, __i, __new)?;
            }));
        }
        let base = self.val(&ix.expr)?;
        let i = self.expr(&ix.index)?;
        let op = compound_op(&b.op);
        let rhs = self.expr(&b.right)?;
        Ok(quote!({
            let __b = #base;
            let __i0 = #i;
            let __i = __f.value(__i0, Some(::eagle::ir::DType::Index))?;
            let __old = __f.index(__b, __i)?;
            let __r = #rhs;
            let __new = __f.bin(#op, __old, __r)?;
            __f.set_index(__b, __i, __new)?;
        }))
    }

    /// [`Self::window_index`], built: the window's value and each index's, in source order.
    pub(super) fn window_element(&mut self, ix: &syn::ExprIndex) -> R<Option<(TS, Vec<TS>)>> {
        let Some((w, idx)) = self.window_index(ix)? else {
            return Ok(None);
        };
        let w = self.val(w)?;
        let idx = idx
            .into_iter()
            .map(|i| self.expr(i))
            .collect::<R<Vec<_>>>()?;
        Ok(Some((w, idx)))
    }

    /// For `w[i][j]...` on a window parameter `w` (not shadowed by a `let`): the window and
    /// the indices, outermost first. A window element takes one index per dim; another count
    /// is a compile error at the expression, naming what windows support.
    fn window_index<'e>(&self, ix: &'e syn::ExprIndex) -> R<Option<(&'e Expr, Vec<&'e Expr>)>> {
        let (base, idx) = super::expr::index_parts(ix);
        let Expr::Path(p) = base else { return Ok(None) };
        let Some(id) = p.path.get_ident() else {
            return Ok(None);
        };
        let n = id.to_string();
        let shadowed = self.scopes.iter().skip(1).any(|s| s.contains_key(&n));
        let Some((_, (rank, ty))) = self.windows.iter().find(|(w, _)| *w == n) else {
            return Ok(None);
        };
        if shadowed || self.level == Level::Host {
            return Ok(None);
        }
        if idx.len() == *rank {
            return Ok(Some((base, idx)));
        }
        let text = format!(
            "{n}{}",
            idx.iter()
                .map(|i| format!("[{}]", quote!(#i).to_string().replace(" . ", ".")))
                .collect::<String>()
        );
        let all: Vec<String> = (0..*rank)
            .map(|d| {
                ["i", "j", "k", "l"]
                    .get(d)
                    .map_or(format!("i{d}"), |s| s.to_string())
            })
            .collect();
        let example = all.iter().map(|i| format!("[{i}]")).collect::<String>();
        let offs = all.join(", ");
        let ones = vec!["1"; *rank].join(", ");
        err(
            ix.span(),
            format!(
                "`{text}` gives {} index(es) to window `{n}: {ty}` of rank {rank}; a window has no sub-windows to index: name one element with one index per dim, `{n}{example}` (read or `=` / `+=`), or move tiles with `load({n}, [{offs}], [{ones}])` and `store({n}, [{offs}], tile)`",
                idx.len()
            ),
        )
    }

    /// `let [mut] name[: [T; N]] = [init; N]` or `= [a, b, c]`: a local array
    /// (`FunctionBuilder::array`, `FunctionBuilder::array_of`).
    fn let_array(
        &mut self,
        ident: &syn::Ident,
        mutable: bool,
        ann: Option<&Type>,
        init: &Expr,
    ) -> R<TS> {
        let dtype = match ann {
            None => quote!(None),
            Some(Type::Array(ta)) => {
                let Type::Path(tp) = &*ta.elem else {
                    return err(
                        ta.elem.span(),
                        "a local array holds scalars: annotate it `[f32; N]` with a scalar dtype",
                    );
                };
                let n = tp
                    .path
                    .get_ident()
                    .map(|i| i.to_string())
                    .unwrap_or_default();
                let d = dtype_tokens(&n, tp.span())?;
                quote!(Some(#d))
            }
            Some(t) => {
                return err(
                    t.span(),
                    "a local array's annotation is `[T; N]`, such as `[f32; 4]`",
                )
            }
        };
        let value = match init {
            Expr::Repeat(r) => {
                let x = self.expr(&r.expr)?;
                let len = self.extent(&r.len, "array lengths")?;
                quote!({ let __a0 = #x; let __a1 = #len; __f.array(__a0, __a1, #dtype)? })
            }
            Expr::Array(a) => {
                let items = a
                    .elems
                    .iter()
                    .map(|x| self.expr(x))
                    .collect::<R<Vec<_>>>()?;
                quote!({ let __a0 = vec![#(#items),*]; __f.array_of(__a0, #dtype)? })
            }
            other => {
                return err(
                    other.span(),
                    "expected an array expression `[x; N]` or `[a, b, c]`",
                )
            }
        };
        let ns = ident.to_string();
        // The name is the array's memory, not a variable: reads index it, writes go through
        // `a[i] = v`.
        self.bind(&ns, false);
        self.arrays.insert(ns, mutable);
        Ok(quote!(let #ident: ::eagle::ir::Value = #value;))
    }

    /// An array length or shape extent (`what`, for the message): a compile-time constant (a literal, a Rust `const` or
    /// a `dynamic!` dim), as an `eagle::ir::Dim`.
    pub(super) fn extent(&self, x: &Expr, what: &str) -> R<TS> {
        if let Expr::Path(p) = x {
            if let Some(id) = p.path.get_ident() {
                if self.lookup(&id.to_string()).is_some() {
                    return err(x.span(), format!("`{id}` is a run-time value; {what} are compile-time constants (literals, Rust `const`s or `dynamic!` dims): name the extent with a `dynamic!` dim that an argument's shape binds (`const N: Dim = dynamic!(\"N\")` and a parameter `Tensor<f32, N>`; a rank group's extents are `{{ NR / TP }}` and `TP`)"));
                }
            }
        }
        if let Some(call) = first_call(x) {
            return err(call.span(), format!("{what} are compile-time constants (literals, Rust `const`s or `dynamic!` dims), not run-time values such as a call; name the extent with a `dynamic!` dim that an argument's shape binds (`[{{ NR / TP }}, TP]` with `const TP: Dim = dynamic!(\"TP\")`)"));
        }
        // As a parameter type's dim (`{ EPR * NR }` bound by a `let`, no `unused_braces`).
        crate::parse::params::dim_tokens(&syn::GenericArgument::Const(x.clone()))
    }

    /// `dst` must not name an input tensor parameter.
    pub(super) fn check_writable(&self, dst: &Expr, what: &str) -> R<()> {
        if let Expr::Path(p) = dst {
            if let Some(id) = p.path.get_ident() {
                let n = id.to_string();
                if self.arrays.get(&n) == Some(&false) {
                    return err(id.span(), format!("{what} writes `{n}`, an array declared without `mut`; declare it `let mut {n} = ...`"));
                }
                // A `let` of the same name shadows the parameter.
                let shadowed = self.scopes.iter().skip(1).any(|s| s.contains_key(&n));
                if !shadowed && self.inputs.contains(&n) {
                    return err(id.span(), format!("{what} writes `{n}`, an input tensor; declare the parameter `{n}: Out<Tensor<...>>` to write it"));
                }
            }
        }
        Ok(())
    }

    pub(super) fn intrinsic_stmt(&mut self, name: &str, c: &syn::ExprCall) -> R<Option<TS>> {
        use eagle_ir::Builtin as B;
        let Some(b) = B::from_name(name) else {
            return Ok(None);
        };
        let a: Vec<&Expr> = c.args.iter().collect();
        if let Some(w) = b.written_arg().filter(|&w| w < a.len()) {
            self.check_writable(a[w], &format!("`{name}`"))?;
        }
        if b.has_result() {
            return Ok(None);
        }
        builtin_arity(b, c)?;
        let m = format_ident!("{}", b.name());
        Ok(Some(match b {
            B::Store => {
                let dst = self.val(a[0])?;
                let offs = self.offsets(a[1])?;
                let v = self.val(a[2])?;
                quote!({ let __a0 = #dst; let __a1 = #offs; let __a2 = #v; __f.#m(__a0, __a1, __a2)? };)
            }
            B::Put | B::Get => {
                let dst = self.val(a[0])?;
                let peer = self.expr(a[1])?;
                let src = self.val(a[2])?;
                quote!({ let __a0 = #dst; let __a1 = #peer; let __a2 = #src; __f.#m(__a0, __a1, __a2)? };)
            }
            B::RemoteStore => {
                let dst = self.val(a[0])?;
                let peer = self.expr(a[1])?;
                let offs = self.offsets(a[2])?;
                let v = self.val(a[3])?;
                quote!({ let __a0 = #dst; let __a1 = #peer; let __a2 = #offs; let __a3 = #v; __f.#m(__a0, __a1, __a2, __a3)? };)
            }
            B::Notify => {
                let s = self.val(a[0])?;
                let peer = self.expr(a[1])?;
                let offs = self.offsets(a[2])?;
                let v = self.expr(a[3])?;
                let op = choice_tokens(
                    a[4],
                    eagle_ir::NotifyOp::from_variant,
                    eagle_ir::NotifyOp::index,
                    quote!(NotifyOp),
                    || {
                        format!(
                            "the notify op is {}",
                            eagle_ir::spec::one_of(
                                eagle_ir::NotifyOp::ALL.map(eagle_ir::NotifyOp::variant)
                            )
                        )
                    },
                )?;
                quote!({ let __a0 = #s; let __a1 = #peer; let __a2 = #offs; let __a3 = #v; let __a4 = #op; __f.#m(__a0, __a1, __a2, __a3, __a4)? };)
            }
            B::Wait => {
                let s = self.val(a[0])?;
                let offs = self.offsets(a[1])?;
                let v = self.expr(a[2])?;
                let cmp = cmp_tokens(a[3])?;
                quote!({ let __a0 = #s; let __a1 = #offs; let __a2 = #v; let __a3 = #cmp; __f.#m(__a0, __a1, __a2, __a3)? };)
            }
            B::Broadcast => {
                let (cx, src, dst) = (self.val(a[0])?, self.val(a[1])?, self.val(a[2])?);
                let root = self.expr(a[3])?;
                quote!({ let __a0 = #cx; let __a1 = #src; let __a2 = #dst; let __a3 = #root; __f.#m(__a0, __a1, __a2, __a3)?; })
            }
            B::AllToAllV | B::AllGatherV => {
                let xs = a.iter().map(|x| self.val(x)).collect::<R<Vec<_>>>()?;
                let (x0, x1, x2, x3, x4) = (&xs[0], &xs[1], &xs[2], &xs[3], &xs[4]);
                quote!({ let __a0 = #x0; let __a1 = #x1; let __a2 = #x2; let __a3 = #x3; let __a4 = #x4; __f.#m(__a0, __a1, __a2, __a3, __a4); })
            }
            B::AllGather | B::AllToAll => {
                let (cx, src, dst) = (self.val(a[0])?, self.val(a[1])?, self.val(a[2])?);
                quote!({ let __a0 = #cx; let __a1 = #src; let __a2 = #dst; __f.#m(__a0, __a1, __a2); })
            }
            B::ReduceScatter => {
                let (cx, src, dst) = (self.val(a[0])?, self.val(a[1])?, self.val(a[2])?);
                let op = reduce_tokens(a[3])?;
                quote!({ let __a0 = #cx; let __a1 = #src; let __a2 = #dst; __f.#m(__a0, __a1, __a2, #op); })
            }
            B::AllReduce => {
                let (cx, src, dst) = (self.val(a[0])?, self.val(a[1])?, self.val(a[2])?);
                let op = reduce_tokens(a[3])?;
                let mode = choice_tokens(
                    a[4],
                    eagle_ir::AllreduceMode::from_variant,
                    eagle_ir::AllreduceMode::index,
                    quote!(AllreduceMode),
                    || {
                        format!(
                            "the allreduce mode is {}",
                            eagle_ir::spec::one_of(
                                eagle_ir::AllreduceMode::ALL.map(eagle_ir::AllreduceMode::variant)
                            )
                        )
                    },
                )?;
                quote!({ let __a0 = #cx; let __a1 = #src; let __a2 = #dst; __f.#m(__a0, __a1, __a2, #op, #mode); })
            }
            B::Barrier => {
                let cx = self.val(a[0])?;
                quote!({ let __a0 = #cx; __f.#m(__a0) };)
            }
            B::Rank
            | B::NRanks
            | B::Group
            | B::Split
            | B::WorldRank
            | B::WorldSize
            | B::Load
            | B::RemoteLoad
            | B::Subview
            | B::Window
            | B::AllocWindowBuffer
            | B::Min
            | B::Max
            | B::Fma
            | B::Select
            | B::SaturatingCast => return Ok(None),
        }))
    }
}

/// Whether statement `s` may `continue` or `break` the innermost enclosing loop: it is one, or
/// an `if` or block holding one (not inside a nested loop, whose own they are).
fn may_exit_stmt(s: &Stmt) -> bool {
    match s {
        Stmt::Expr(e, _) => may_exit(e),
        Stmt::Local(_) | Stmt::Item(_) | Stmt::Macro(_) => false,
    }
}

fn may_exit(e: &Expr) -> bool {
    match e {
        Expr::Continue(_) | Expr::Break(_) => true,
        Expr::If(i) => {
            i.then_branch.stmts.iter().any(may_exit_stmt)
                || i.else_branch.as_ref().is_some_and(|(_, e)| may_exit(e))
        }
        Expr::Block(b) => b.block.stmts.iter().any(may_exit_stmt),
        _ => false,
    }
}

/// Tokens for `UnOp::Not` (the guard of a loop with exits).
fn not_tokens() -> TS {
    enum_tokens(quote!(UnOp), eagle_ir::UnOp::Not.index())
}

/// The first function or method call in the extent expression `e` (a run-time value), looking
/// through arithmetic, parentheses and braces.
fn first_call(e: &Expr) -> Option<&Expr> {
    match e {
        Expr::Call(_) | Expr::MethodCall(_) => Some(e),
        Expr::Binary(b) => first_call(&b.left).or_else(|| first_call(&b.right)),
        Expr::Paren(p) => first_call(&p.expr),
        Expr::Group(g) => first_call(&g.expr),
        Expr::Block(b) => match b.block.stmts.as_slice() {
            [syn::Stmt::Expr(x, None)] => first_call(x),
            _ => None,
        },
        _ => None,
    }
}
