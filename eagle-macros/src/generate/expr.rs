//! Expressions of a body: values, operators, indexing, method calls, and calls of the
//! built-ins, math functions and tile ops that have a result.

use super::ops::*;
use super::*;

impl Cx {
    /// Tokens of an expression that yields a `Value`.
    pub(super) fn val(&mut self, e: &Expr) -> R<TS> {
        let t = self.expr(e)?;
        Ok(quote!({ let __a0 = #t; let __a1 = None; __f.value(__a0, __a1)? }))
    }

    pub(super) fn offsets(&mut self, e: &Expr) -> R<TS> {
        let Expr::Array(arr) = e else {
            return err(e.span(), format!("expected offsets here, a list in brackets such as `[0, i * SIZE]`; the operations with offsets are {OFFSET_SIGS}"));
        };
        let items = arr
            .elems
            .iter()
            .map(|x| self.expr(x))
            .collect::<R<Vec<_>>>()?;
        Ok(quote!(vec![#(#items),*]))
    }

    pub(super) fn shape(&mut self, e: &Expr) -> R<TS> {
        let Expr::Array(arr) = e else {
            return err(
                e.span(),
                "a shape is a list of extents in brackets: `[1, SIZE]`",
            );
        };
        let items = arr
            .elems
            .iter()
            .map(|x| self.extent(x, "shape extents"))
            .collect::<R<Vec<_>>>()?;
        Ok(quote!(vec![#(#items),*]))
    }

    /// Tokens of an expression that yields an `eagle::ir::Operand`.
    /// The code building expression `e`; the ops it builds record `e`'s source location.
    pub(super) fn expr(&mut self, e: &Expr) -> R<TS> {
        let t = self.expr_inner(e)?;
        if matches!(e, Expr::Lit(_) | Expr::Path(_) | Expr::Paren(_)) {
            return Ok(t);
        }
        let enter = enter_loc(e.span());
        Ok(quote!({ #enter let __r = #t; __f.leave(); __r }))
    }

    pub(super) fn expr_inner(&mut self, e: &Expr) -> R<TS> {
        let sp = e.span();
        Ok(match e {
            Expr::Lit(l) => match &l.lit {
                Lit::Int(i) => {
                    let v: i128 = i.base10_parse().map_err(|x| syn::Error::new(i.span(), x))?;
                    match i.suffix() {
                        "" => quote!(::eagle::ir::Operand::Int(#v)),
                        s => {
                            let d = dtype_tokens(s, i.span())?;
                            quote!(::eagle::ir::Operand::Typed(::eagle::ir::Const::Int(#v), #d))
                        }
                    }
                }
                Lit::Float(f) => {
                    let v: f64 = f.base10_parse().map_err(|x| syn::Error::new(f.span(), x))?;
                    match f.suffix() {
                        "" => quote!(::eagle::ir::Operand::Float(#v)),
                        s => {
                            let d = dtype_tokens(s, f.span())?;
                            let c = float_const(f, s, false)?;
                            quote!(::eagle::ir::Operand::Typed(#c, #d))
                        }
                    }
                }
                Lit::Bool(b) => {
                    let v = b.value;
                    quote!(::eagle::ir::Operand::Bool(#v))
                }
                Lit::Str(s) => return err(s.span(), "strings are not supported in kernels; eagle kernels compute on numbers, tensors and tiles"),
                other => return err(other.span(), "unsupported literal; use integer, float or bool literals"),
            },
            Expr::Path(p) => {
                if let Some(id) = p.path.get_ident() {
                    match self.lookup(&id.to_string()) {
                        Some(true) => return Ok(quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #id; __f.read(__a0)? }))),
                        Some(false) => return Ok(quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val(#id))),
                        None => {}
                    }
                }
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::from(#p))
            }
            Expr::Paren(p) => self.expr(&p.expr)?,
            Expr::Group(g) => self.expr(&g.expr)?,
            Expr::Binary(b) => {
                if is_compound(&b.op) {
                    return err(b.op.span(), "compound assignment is a statement, not an expression");
                }
                let l = self.expr(&b.left)?;
                let r = self.expr(&b.right)?;
                let (ctor, op) = bin_tokens(&b.op)?;
                if ctor == "bin" {
                    // Literal arithmetic stays an untyped literal (Rust's inference).
                    quote_spanned!(resolved_here(sp)=> { let __a0 = #op; let __a1 = #l; let __a2 = #r; __f.bin_lit(__a0, __a1, __a2)? })
                } else {
                    quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #l; let __a2 = #r; __f.#ctor(__a0, __a1, __a2)? }))
                }
            }
            Expr::Unary(syn::ExprUnary { op: SynUn::Neg(_), expr, .. }) if matches!(&**expr, Expr::Lit(l) if matches!(l.lit, Lit::Int(_) | Lit::Float(_))) => {
                // `-5` is a literal of its own, so that `let b: u32 = -1` is caught as out of range.
                let Expr::Lit(l) = &**expr else { unreachable!("matched above") };
                match &l.lit {
                    Lit::Int(i) => {
                        let v: i128 = -i.base10_parse::<i128>().map_err(|x| syn::Error::new(i.span(), x))?;
                        match i.suffix() {
                            "" => quote!(::eagle::ir::Operand::Int(#v)),
                            sfx => {
                                let d = dtype_tokens(sfx, i.span())?;
                                quote!(::eagle::ir::Operand::Typed(::eagle::ir::Const::Int(#v), #d))
                            }
                        }
                    }
                    Lit::Float(f) => {
                        let v: f64 = -f.base10_parse::<f64>().map_err(|x| syn::Error::new(f.span(), x))?;
                        match f.suffix() {
                            "" => quote!(::eagle::ir::Operand::Float(#v)),
                            sfx => {
                                let d = dtype_tokens(sfx, f.span())?;
                                let c = float_const(f, sfx, true)?;
                                quote!(::eagle::ir::Operand::Typed(#c, #d))
                            }
                        }
                    }
                    _ => unreachable!("matched above"),
                }
            }
            Expr::Unary(u) => {
                let x = self.expr(&u.expr)?;
                let op = match u.op {
                    SynUn::Neg(_) => quote!(::eagle::ir::UnOp::Neg),
                    SynUn::Not(_) => quote!(::eagle::ir::UnOp::Not),
                    SynUn::Deref(d) => return err(d.span, "dereference `*` is not supported: eagle has no references"),
                    _ => return err(u.span(), "unsupported unary operator"),
                };
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #x; __f.un(__a0, __a1)? }))
            }
            Expr::Cast(c) => {
                let x = self.expr(&c.expr)?;
                let Type::Path(tp) = &*c.ty else {
                    return err(c.ty.span(), "casts go to a scalar dtype such as `f32` or `usize`");
                };
                let n = tp.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
                let d = dtype_tokens(&n, tp.span())?;
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #x; let __a1 = #d; __f.cast(__a0, __a1)? }))
            }
            Expr::Index(ix) => {
                if let Some((w, idx)) = self.window_element(ix)? {
                    quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #w; let __a1 = vec![#(#idx),*]; __f.elem(__a0, __a1)? }))
                } else if let Some((base, idx)) = index_chain(ix) {
                    // `v[i][j]` on a local value: one element of a window view, else slices,
                    // each index built in source order.
                    let steps = self.index_steps(base, &idx)?;
                    quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ #steps __f.index_done(__at)? }))
                } else {
                    let base = self.val(&ix.expr)?;
                    let i = self.expr(&ix.index)?;
                    quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #base; let __a1 = #i; __f.index(__a0, __a1)? }))
                }
            }
            Expr::MethodCall(m) => self.method_call(m)?,
            Expr::Call(c) => self.call_expr(c)?,
            Expr::Closure(c) => return err(c.span(), "closures are not supported in kernels; define another `#[eagle::kernel]` function and call it"),
            Expr::Reference(r) => return err(r.span(), "references (`&`, `&mut`) are not supported in kernels; pass tensors by value, and mark written tensors `Out<Tensor<...>>`"),
            Expr::Macro(m) => return err(m.span(), "macros are not supported inside kernels (except in `const` items)"),
            Expr::If(i) => return err(i.span(), "`if` is a statement in eagle; for a value use `select(cond, a, b)`"),
            Expr::Match(m) => return err(m.match_token.span, "`match` is not supported; use `if`/`else` or `select`"),
            Expr::Tuple(t) => return err(t.span(), "tuples are not supported; use separate `let` bindings"),
            Expr::Array(a) => return err(a.span(), "an array is a value of its own only in a `let` (`let mut a = [0.0; 4];`, `let w = [0.25, 0.5];`); elsewhere arrays are shapes and offsets of eagle operations"),
            Expr::Repeat(r) => return err(r.span(), "an array `[x; N]` is a value of its own only in a `let`: `let mut a = [0.0; N];`"),
            Expr::Field(f) => return err(f.span(), "field access is not supported; eagle values have no fields"),
            Expr::Range(r) => return err(r.span(), "ranges are only allowed as the iterator of a `for` loop"),
            Expr::Block(b) => return err(b.span(), "block expressions are not supported as values"),
            Expr::Assign(a) => return err(a.span(), "assignment is a statement; the only keyword argument is `device = r` in a dispatch"),
            other => return err(other.span(), format!("unsupported expression; {SUPPORTED_STMTS}")),
        })
    }

    /// A tile intrinsic call (`row_sum(t)`, `zeros([M, N], f32)`): its arguments by the kinds
    /// `eagle_ir::tile::INTRINSICS` lists, built by `FunctionBuilder::tile_intrinsic`.
    pub(super) fn tile_call(
        &mut self,
        c: &syn::ExprCall,
        intr: &eagle_ir::tile::Intrinsic,
    ) -> R<TS> {
        use eagle_ir::tile::ArgKind;
        let sp = c.span();
        let name = intr.name;
        if c.args.len() != intr.args.len() {
            return err(
                sp,
                format!(
                    "`{name}` takes {} argument(s): `{}`; found {}",
                    intr.args.len(),
                    intr.signature,
                    c.args.len()
                ),
            );
        }
        let mut items = vec![];
        for (a, kind) in c.args.iter().zip(intr.args) {
            items.push(match kind {
                ArgKind::Value => {
                    let x = self.expr(a)?;
                    quote!(::eagle::ir::TileArg::Value(#x))
                }
                ArgKind::Shape => {
                    let x = self.shape(a)?;
                    quote!(::eagle::ir::TileArg::Shape(#x))
                }
                ArgKind::Offsets => {
                    let x = self.offsets(a)?;
                    quote!(::eagle::ir::TileArg::Offsets(#x))
                }
                ArgKind::Axis => {
                    let ok = match a {
                        Expr::Lit(syn::ExprLit {
                            lit: syn::Lit::Int(i),
                            ..
                        }) => i.base10_parse::<usize>().ok().filter(|&x| x <= 1),
                        _ => None,
                    };
                    let Some(x) = ok else {
                        return err(
                            a.span(),
                            format!("the axis of `{}` is the literal 0 or 1", intr.signature),
                        );
                    };
                    quote!(::eagle::ir::TileArg::Axis(#x))
                }
                ArgKind::DType => {
                    let dn = path_name(a).unwrap_or_default();
                    let d = dtype_tokens(&dn, a.span())?;
                    quote!(::eagle::ir::TileArg::DType(#d))
                }
            });
        }
        Ok(
            quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a = vec![#(#items),*]; __f.tile_intrinsic(#name, __a)? })),
        )
    }

    /// A method call (`x.sqrt()`, `y.atan2(x)`, `a.min(b)`, `x.to_bits()`).
    fn method_call(&mut self, m: &syn::ExprMethodCall) -> R<TS> {
        let sp = m.span();
        let name = m.method.to_string();
        let recv = self.expr(&m.receiver)?;
        let args = m.args.iter().map(|a| self.expr(a)).collect::<R<Vec<_>>>()?;
        Ok(match (name.as_str(), args.as_slice()) {
            (n, []) if math_unop(n).is_some() => {
                let op = unop(n);
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #recv; __f.un(__a0, __a1)? }))
            }
            (n, rest)
                if let Some(f) = eagle_ir::MathFn::from_method(n)
                    .filter(|f| math_unop(n).is_none() && f.arity() == rest.len() + 1) =>
            {
                let f = math_fn_tokens(f);
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #f; let __a1 = vec![#recv #(, #rest)*]; __f.math(__a0, __a1)? }))
            }
            (n, rest)
                if let Some(mt) =
                    eagle_ir::Method::from_name(n).filter(|mt| mt.arity() == rest.len()) =>
            {
                use eagle_ir::Method as M;
                match mt {
                    M::Min | M::Max => {
                        let op = bin_op_tokens(if mt == M::Min {
                            eagle_ir::BinOp::Min
                        } else {
                            eagle_ir::BinOp::Max
                        });
                        let b = &rest[0];
                        quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #recv; let __a2 = #b; __f.bin(__a0, __a1, __a2)? }))
                    }
                    M::MulAdd => {
                        let (b, c) = (&rest[0], &rest[1]);
                        quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #recv; let __a1 = #b; let __a2 = #c; __f.fma(__a0, __a1, __a2)? }))
                    }
                    M::ToBits => {
                        quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #recv; __f.to_bits(__a0)? }))
                    }
                }
            }
            (n, rest) if let Some(f) = eagle_ir::MathFn::from_method(n) => {
                return err(
                    m.method.span(),
                    format!(
                        "`.{name}()` takes {} argument(s) besides the receiver (`{}`), found {}",
                        f.arity() - 1,
                        f.signature(),
                        rest.len()
                    ),
                );
            }
            _ => {
                let methods: Vec<String> = eagle_ir::Method::ALL
                    .iter()
                    .map(|m| format!("`.{}`", m.signature()))
                    .collect();
                return err(
                    m.method.span(),
                    format!(
                        "method `.{name}()` is not supported; supported methods: {}, {}",
                        math_names("`.", "()`"),
                        methods.join(", ")
                    ),
                );
            }
        })
    }

    pub(super) fn call_expr(&mut self, c: &syn::ExprCall) -> R<TS> {
        let sp = c.span();
        let (path, name) = callee_of(c)?;
        let a: Vec<&Expr> = c.args.iter().collect();
        let n = a.len();
        let arity = |k: usize, sig: &str| -> R<()> {
            if n != k {
                return err(
                    sp,
                    format!("`{name}` takes {k} argument(s): `{sig}`; found {n}"),
                );
            }
            Ok(())
        };
        if path.segments.len() == 1 {
            if let Some(intr) = eagle_ir::tile::intrinsic(&name) {
                return self.tile_call(c, intr);
            }
        }
        // `f32::from_bits(u)`, `f64::from_bits(u)`.
        if path.segments.len() == 2 && name == eagle_ir::FROM_BITS {
            let ty = path.segments[0].ident.to_string();
            if !crate::parse::params::dtype_named(&ty).is_some_and(eagle_ir::DType::is_float) {
                return err(path.segments[0].ident.span(), format!("`{ty}::from_bits` is not an eagle intrinsic; `f32::from_bits(u)`, `f64::from_bits(u)`, `f16::from_bits(u)`, `bf16::from_bits(u)`, `f8e4m3::from_bits(u)`, `f8e5m2::from_bits(u)` and `e8m0::from_bits(u)` are"));
            }
            if a.len() != 1 {
                return err(
                    sp,
                    format!(
                        "`{ty}::from_bits` takes 1 argument: `{ty}::from_bits(u)`; found {}",
                        a.len()
                    ),
                );
            }
            let d = dtype_tokens(&ty, path.segments[0].ident.span())?;
            let x = self.expr(a[0])?;
            return Ok(
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({ let __a0 = #x; let __a1 = #d; __f.bitcast(__a0, __a1)? })),
            );
        }
        if self.is_topk(path, &name) {
            return err(c.span(), "`topk` returns two tiles (values, indices): bind them with `let (v, i) = topk(t, k);`");
        }
        if path.segments.len() == 1 && name == eagle_ir::MATMUL_MX && self.lookup(&name).is_none() {
            arity(4, "matmul_mx(a, scale_a, b, scale_b)")?;
            let xs = a.iter().map(|x| self.expr(x)).collect::<R<Vec<_>>>()?;
            let (x0, x1, x2, x3) = (&xs[0], &xs[1], &xs[2], &xs[3]);
            return Ok(
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({
                    let __a0 = #x0; let __a1 = #x1; let __a2 = #x2; let __a3 = #x3;
                    __f.matmul_mx(__a0, __a1, __a2, __a3)?
                })),
            );
        }
        if !(path.segments.len() == 1 && is_intrinsic(&name)) {
            let vals = self.returning_call(c)?;
            return Ok(
                quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val({
                    let __r = #vals;
                    __f.single_result(#name, __r)?
                })),
            );
        }
        let v = |t: TS| quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val(#t));
        if let Some(u) = math_unop(&name) {
            arity(1, &format!("{name}(x)"))?;
            let x = self.expr(a[0])?;
            let op = enum_tokens(quote!(UnOp), u.index());
            return Ok(v(
                quote!({ let __a0 = #op; let __a1 = #x; __f.un(__a0, __a1)? }),
            ));
        }
        if let Some(f) = eagle_ir::MathFn::from_name(&name) {
            arity(f.arity(), &format!("{name}({})", f.signature()))?;
            let xs = a.iter().map(|x| self.expr(x)).collect::<R<Vec<_>>>()?;
            let ft = math_fn_tokens(f);
            return Ok(v(
                quote!({ let __a0 = #ft; let __a1 = vec![#(#xs),*]; __f.math(__a0, __a1)? }),
            ));
        }
        let Some(b) = eagle_ir::Builtin::from_name(&name) else {
            return err(c.func.span(), format!("`{name}` is not an eagle intrinsic"));
        };
        self.builtin_call(b, c)
    }

    /// A call of a kernel with a return type (`twice(x)`, not an intrinsic): its body built
    /// here (`Returns::expand`); the tokens evaluate to its values. A name that is not an
    /// eagle function, or one without a return type, is a compile error at the call.
    pub(super) fn returning_call(&mut self, c: &syn::ExprCall) -> R<TS> {
        let (path, name) = callee_of(c)?;
        self.check_kernel_callee(c, &name)?;
        let args = c.args.iter().map(|a| self.expr(a)).collect::<R<Vec<_>>>()?;
        let callee = quote_spanned!(path.span()=> <#path as ::eagle::ir::Returns>);
        Ok(quote!({ let __args = vec![#(#args),*]; #callee::expand(__f, __args)? }))
    }

    /// A call of another eagle function named `name`: not a local value, not the function
    /// itself (recursion).
    pub(super) fn check_kernel_callee(&self, c: &syn::ExprCall, name: &str) -> R<()> {
        if self.lookup(name).is_some() {
            return err(
                c.func.span(),
                format!("`{name}` is a value, not a function"),
            );
        }
        if name == self.fname {
            return err(c.func.span(), format!("recursion: `{name}` calls itself; eagle functions are inlined per device and cannot recurse (rewrite it as a `for` loop)"));
        }
        Ok(())
    }

    /// Whether the call of `path` (last name `name`) is the `topk` intrinsic (not shadowed).
    pub(super) fn is_topk(&self, path: &syn::Path, name: &str) -> bool {
        path.segments.len() == 1 && name == eagle_ir::TOPK && self.lookup(name).is_none()
    }

    /// `subview(x, offset, LEN)` (rows of dim 0) or `subview(x, [offsets], [EXTENTS])` (a block
    /// on every dim): the tokens of the view value.
    fn subview(&mut self, a: &[&Expr]) -> R<TS> {
        let src = self.val(a[0])?;
        if matches!(a[1], Expr::Array(_)) {
            let offs = self.offsets(a[1])?;
            let shape = self.shape(a[2])?;
            return Ok(
                quote!({ let __a0 = #src; let __a1 = #offs; let __a2 = #shape; __f.view(__a0, __a1, __a2)? }),
            );
        }
        let off = self.expr(a[1])?;
        let len = a[2];
        if let Expr::Path(p) = len {
            if let Some(id) = p.path.get_ident() {
                if self.lookup(&id.to_string()).is_some() {
                    return err(len.span(), "the length of a subview is a compile-time constant (a literal, Rust `const` or `dynamic!` dim), not a run-time value");
                }
            }
        }
        Ok(
            quote!({ let __a0 = #src; let __a1 = #off; __f.subview(__a0, __a1, ::eagle::ir::IntoDim::into_dim(#len))? }),
        )
    }

    /// A call of the built-in `b` that has a result (`load(...)`, `rank(ctx)`, `min(a, b)`).
    fn builtin_call(&mut self, b: eagle_ir::Builtin, c: &syn::ExprCall) -> R<TS> {
        use eagle_ir::Builtin as B;
        let sp = c.span();
        let name = b.name();
        let a: Vec<&Expr> = c.args.iter().collect();
        let v = |t: TS| quote_spanned!(resolved_here(sp)=> ::eagle::ir::Operand::Val(#t));
        if !b.has_result() {
            return err(
                c.span(),
                format!("`{name}(...)` returns nothing; call it as a statement"),
            );
        }
        builtin_arity(b, c)?;
        let m = format_ident!("{}", b.name());
        Ok(match b {
            B::Rank | B::NRanks => {
                let cx = self.val(a[0])?;
                v(quote!({ let __a0 = #cx; __f.#m(__a0) }))
            }
            B::WorldSize => v(quote!(__f.#m())),
            B::Group => {
                let cx = self.val(a[0])?;
                let Expr::Array(extents) = a[1] else {
                    return err(a[1].span(), "a process grid is a list of extents in brackets: `group(ctx, [DP, TP], 1)`");
                };
                let grid = self.shape(a[1])?;
                // A literal passed through `macro_rules!` arrives in an invisible group.
                let mut axis_expr = a[2];
                while let Expr::Group(g) = axis_expr {
                    axis_expr = &g.expr;
                }
                let axis = match axis_expr {
                    Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Int(i),
                        ..
                    }) => i.base10_parse::<u64>()?,
                    other => {
                        return err(other.span(), "the axis of a group is an integer literal (`group(ctx, [DP, TP], 1)`: the group along axis 1, of TP ranks)")
                    }
                };
                let axes = extents.elems.len() as u64;
                if axis >= axes {
                    return err(
                        a[2].span(),
                        format!("the group's axis is {axis} but the grid has {axes} axes; name an axis from 0 to {} (`group(ctx, [DP, TP], 1)`: the group along axis 1, of TP ranks)", axes.saturating_sub(1)),
                    );
                }
                v(quote!({ let __a0 = #cx; let __a1 = #grid; __f.#m(__a0, __a1, #axis)? }))
            }
            B::Split => {
                let cx = self.val(a[0])?;
                let (color, key) = (self.expr(a[1])?, self.expr(a[2])?);
                v(
                    quote!({ let __a0 = #cx; let __a1 = #color; let __a2 = #key; __f.#m(__a0, __a1, __a2)? }),
                )
            }
            B::WorldRank => {
                let g = self.val(a[0])?;
                let q = self.expr(a[1])?;
                v(quote!({ let __a0 = #g; let __a1 = #q; __f.#m(__a0, __a1)? }))
            }
            B::Min | B::Max => {
                let (x, y) = (self.expr(a[0])?, self.expr(a[1])?);
                let op = bin_op_tokens(if b == B::Min {
                    eagle_ir::BinOp::Min
                } else {
                    eagle_ir::BinOp::Max
                });
                v(
                    quote!({ let __a0 = #op; let __a1 = #x; let __a2 = #y; __f.bin(__a0, __a1, __a2)? }),
                )
            }
            B::SaturatingCast => {
                let x = self.expr(a[0])?;
                let d = dtype_tokens(&path_name(a[1]).unwrap_or_default(), a[1].span())?;
                v(quote!({ let __a0 = #x; let __a1 = #d; __f.saturating_cast(__a0, __a1)? }))
            }
            B::Fma | B::Select => {
                let (x, y, z) = (self.expr(a[0])?, self.expr(a[1])?, self.expr(a[2])?);
                v(
                    quote!({ let __a0 = #x; let __a1 = #y; let __a2 = #z; __f.#m(__a0, __a1, __a2)? }),
                )
            }
            B::Load => {
                let src = self.val(a[0])?;
                let offs = self.offsets(a[1])?;
                let shape = self.shape(a[2])?;
                v(
                    quote!({ let __a0 = #src; let __a1 = #offs; let __a2 = #shape; __f.#m(__a0, __a1, __a2)? }),
                )
            }
            B::RemoteLoad => {
                let src = self.val(a[0])?;
                let peer = self.expr(a[1])?;
                let offs = self.offsets(a[2])?;
                let shape = self.shape(a[3])?;
                v(
                    quote!({ let __a0 = #src; let __a1 = #peer; let __a2 = #offs; let __a3 = #shape; __f.#m(__a0, __a1, __a2, __a3)? }),
                )
            }
            B::Subview => v(self.subview(&a)?),
            B::Window => {
                let buf = self.val(a[0])?;
                let shape = self.shape(a[1])?;
                let d = dtype_tokens(&path_name(a[2]).unwrap_or_default(), a[2].span())?;
                v(
                    quote!({ let __a0 = #buf; let __a1 = #shape; let __a2 = #d; __f.#m(__a0, __a1, __a2) }),
                )
            }
            B::AllocWindowBuffer => {
                let shape = self.shape(a[0])?;
                let d = dtype_tokens(&path_name(a[1]).unwrap_or_default(), a[1].span())?;
                v(quote!({ let __a0 = #shape; let __a1 = #d; __f.#m(__a0, __a1) }))
            }
            B::Store
            | B::Put
            | B::Get
            | B::RemoteStore
            | B::Notify
            | B::Wait
            | B::Barrier
            | B::Broadcast
            | B::AllGather
            | B::ReduceScatter
            | B::AllReduce
            | B::AllToAll
            | B::AllToAllV
            | B::AllGatherV => {
                return err(
                    c.span(),
                    format!("`{name}(...)` returns nothing; call it as a statement"),
                )
            }
        })
    }
}

/// The path a call names and its last name (`twice` of `kernels::twice(x)`).
pub(super) fn callee_of(c: &syn::ExprCall) -> R<(&syn::Path, String)> {
    let Expr::Path(p) = &*c.func else {
        return err(c.func.span(), "only calls of named functions are supported");
    };
    let name = p
        .path
        .segments
        .last()
        .map(|s| s.ident.to_string())
        .unwrap_or_default();
    Ok((&p.path, name))
}

impl Cx {
    /// The code that builds `base` and `idx`'s [`eagle_ir::FunctionBuilder::index_step`]s in
    /// source order, leaving the partly indexed value in `__at`.
    pub(super) fn index_steps(&mut self, base: &Expr, idx: &[&Expr]) -> R<TS> {
        let b = self.val(base)?;
        let mut out = quote!(let mut __at = ::eagle::ir::Indexed::Value(#b););
        for i in idx {
            let i = self.expr(i)?;
            out.extend(quote!(__at = { let __i = #i; __f.index_step(__at, __i)? };));
        }
        Ok(out)
    }
}

/// `v[i][j]...` with two or more indices on a plain name: the name and the indices,
/// outermost first; `None` for one index or another base expression.
pub(super) fn index_chain(ix: &syn::ExprIndex) -> Option<(&Expr, Vec<&Expr>)> {
    let (base, idx) = index_parts(ix);
    (idx.len() >= 2 && matches!(base, Expr::Path(_))).then_some((base, idx))
}

/// `b[i][j]...`: the innermost base `b` and the indices, outermost first.
pub(super) fn index_parts(ix: &syn::ExprIndex) -> (&Expr, Vec<&Expr>) {
    let mut idx = vec![&*ix.index];
    let mut base = &*ix.expr;
    while let Expr::Index(inner) = base {
        idx.push(&*inner.index);
        base = &*inner.expr;
    }
    idx.reverse();
    (base, idx)
}
