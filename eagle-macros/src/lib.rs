//! Procedural macros of eagle: `#[eagle::kernel]`, `#[eagle::host]` and `dynamic!`.
//!
//! An annotated function is replaced by a unit struct of the same name that implements
//! `eagle::ir::EagleFn`: its `build` function re-creates the body as IR through
//! `eagle::ir::FunctionBuilder` calls (the CubeCL shape: an IR-building `expand` next to a typed
//! `launch`). Rust constants in scope (`SIZE`, `NR`) are evaluated when the IR is built.
//! Every construct the DSL does not support is a `compile_error!` at its own span that names
//! what is supported instead.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TS};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{
    BinOp as SynBin, Expr, FnArg, GenericArgument, ItemFn, Lit, Pat, PathArguments, Stmt, Type,
    UnOp as SynUn,
};

type R<T> = Result<T, syn::Error>;

fn err<T>(span: Span, msg: impl std::fmt::Display) -> R<T> {
    Err(syn::Error::new(span, msg))
}

/// Marks a compute kernel (`#[eagle::kernel]`) or a per-device program
/// (`#[eagle::kernel(device)]`).
///
/// Parameters: `Ctx` (the device context), `Tensor<dtype, dims...>`, `Out<Tensor<...>>`,
/// `Window<dtype, dims...>`, `Tile<dtype, dims...>`, or a scalar (`f32`, `f64`, `i32`, `i64`,
/// `u32`, `u64`, `bool`, `usize`). Dims are integer literals, Rust constants, `{expr}` blocks
/// or `dynamic!` constants.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = TS::from(attr);
    let parsed = syn::parse::Parser::parse2(
        syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
        attr.clone(),
    );
    let metas: Vec<syn::Meta> = match parsed {
        Ok(p) => p.into_iter().collect(),
        Err(e) => return e.to_compile_error().into(),
    };
    let mut level = Level::Compute;
    let mut category = None;
    for m in &metas {
        match m {
            syn::Meta::Path(p) if p.is_ident("compute") => level = Level::Compute,
            syn::Meta::Path(p) if p.is_ident("device") => level = Level::Device,
            syn::Meta::Path(p) if p.is_ident("sample") => level = Level::Sample,
            syn::Meta::NameValue(nv) if nv.path.is_ident("category") => {
                let ok = match &nv.value {
                    Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => {
                        let v = s.value();
                        let known = ["sample_local", "cross_sample_read", "cross_sample_write", "mapreduce(sum)", "mapreduce(times)", "mapreduce(max)", "mapreduce(land)"];
                        known.contains(&v.as_str()).then_some(v)
                    }
                    _ => None,
                };
                match ok {
                    Some(v) => category = Some(v),
                    None => {
                        return syn::Error::new(nv.value.span(), "the category is one of \"sample_local\", \"cross_sample_read\", \"cross_sample_write\", \"mapreduce(sum)\", \"mapreduce(times)\", \"mapreduce(max)\", \"mapreduce(land)\"")
                            .to_compile_error()
                            .into()
                    }
                }
            }
            other => {
                return syn::Error::new(
                    other.span(),
                    format!("unknown kernel kind `{}`; write `#[eagle::kernel]` for a compute kernel, `#[eagle::kernel(device)]` for a per-device program or `#[eagle::kernel(sample)]` for a sample kernel", other.to_token_stream()),
                )
                .to_compile_error()
                .into()
            }
        }
    }
    if category.is_some() && level != Level::Sample {
        return syn::Error::new(attr.span(), "`category = ...` applies to sample kernels: `#[eagle::kernel(sample, category = \"...\")]`")
            .to_compile_error()
            .into();
    }
    expand(level, category, item)
}

/// Marks a host orchestrator: it allocates window buffers and dispatches per-device programs
/// with `device = r`. It gets a typed `launch` method.
#[proc_macro_attribute]
pub fn host(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        return syn::Error::new(TS::from(attr).span(), "`#[eagle::host]` takes no arguments")
            .to_compile_error()
            .into();
    }
    expand(Level::Host, None, item)
}

/// `dynamic!("NR")`: a symbolic extent, bound when the program is invoked (from the shapes of
/// the host arguments). Use it as `const NR: eagle::Dim = eagle::dynamic!("NR");`.
#[proc_macro]
pub fn dynamic(input: TokenStream) -> TokenStream {
    let input = TS::from(input);
    let lit: syn::LitStr =
        match syn::parse2(input.clone()) {
            Ok(l) => l,
            Err(_) => return syn::Error::new(
                input.span(),
                "`dynamic!` takes one string literal naming the dimension, e.g. `dynamic!(\"NR\")`",
            )
            .to_compile_error()
            .into(),
        };
    let name = lit.value();
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    if !ok {
        return syn::Error::new(
            lit.span(),
            format!("dimension name `{name}` must be an identifier such as \"NR\""),
        )
        .to_compile_error()
        .into();
    }
    quote!(::eagle::ir::Dim::sym_static(#lit)).into()
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    Host,
    Device,
    Compute,
    Sample,
}

struct Param {
    name: syn::Ident,
    ty: TS,
    out: bool,
    /// Rust type of the launcher argument (host functions).
    launch_ty: TS,
    /// For a `Window<dtype, dims...>`: its rank and how it was written.
    window: Option<(usize, String)>,
}

/// The rank and source text of a `Window<dtype, dims...>` parameter type.
fn window_rank(ty: &Type) -> Option<(usize, String)> {
    let Type::Path(tp) = ty else { return None };
    let seg = tp.path.segments.last()?;
    if seg.ident != "Window" {
        return None;
    }
    let PathArguments::AngleBracketed(a) = &seg.arguments else {
        return None;
    };
    let text = quote!(#ty)
        .to_string()
        .replace(" < ", "<")
        .replace(" >", ">")
        .replace(" ,", ",");
    Some((a.args.len().saturating_sub(1), text))
}

/// The dtype a kernel spells `name` (`usize` for `index`): the IR's table, `DType::ALL`.
fn dtype_named(name: &str) -> Option<eagle_ir::DType> {
    eagle_ir::DType::ALL
        .into_iter()
        .find(|d| d.rust_name() == name)
}

fn dtype_tokens(name: &str, span: Span) -> R<TS> {
    match dtype_named(name) {
        Some(d) => {
            let v = format_ident!("{}", format!("{d:?}"));
            Ok(quote_spanned!(span=> ::eagle::ir::DType::#v))
        }
        None => err(
            span,
            format!(
                "unknown dtype `{name}`; expected one of {}",
                eagle_ir::DType::ALL.map(|d| d.rust_name()).join(", ")
            ),
        ),
    }
}

fn dim_tokens(arg: &GenericArgument) -> R<TS> {
    let e: TS = match arg {
        GenericArgument::Type(Type::Path(p)) if p.qself.is_none() => quote!(#p),
        // `{ NR * 16 }`: the block's expression, bound by a `let` so that rustc sees no
        // braces around a call argument (no `unused_braces` warning at the user's span).
        GenericArgument::Const(Expr::Block(b))
            if b.block.stmts.len() == 1 && matches!(b.block.stmts[0], syn::Stmt::Expr(_, None)) =>
        {
            let syn::Stmt::Expr(inner, None) = &b.block.stmts[0] else {
                unreachable!("matched above")
            };
            return Ok(quote_spanned!(arg.span()=> { let __dim = #inner; ::eagle::ir::IntoDim::into_dim(__dim) }));
        }
        GenericArgument::Const(e) => quote!(#e),
        other => {
            return err(
                other.span(),
                "malformed dimension: expected an integer literal, a constant name, a `dynamic!` constant or a `{expr}` block",
            )
        }
    };
    Ok(quote_spanned!(arg.span()=> ::eagle::ir::IntoDim::into_dim(#e)))
}

const PARAM_HELP: &str = "supported parameter types: `Ctx`, `Tensor<dtype, dims...>`, `Out<Tensor<dtype, dims...>>`, `Window<dtype, dims...>`, `Tile<dtype, dims...>`, or a scalar (f32, f64, i32, i64, u32, u64, bool, usize)";

/// Parses a parameter type into (IR type tokens, out, launcher Rust type).
fn param_type(ty: &Type, level: Level) -> R<(TS, bool, TS)> {
    let Type::Path(tp) = ty else {
        let what = match ty {
            Type::Reference(_) => "references (`&`, `&mut`) are not supported in eagle signatures; pass the tensor by value and mark written tensors `Out<Tensor<...>>`".to_string(),
            _ => format!("unsupported parameter type; {PARAM_HELP}"),
        };
        return err(ty.span(), what);
    };
    let Some(seg) = tp.path.segments.last() else {
        return err(ty.span(), PARAM_HELP);
    };
    let name = seg.ident.to_string();
    let generics: Vec<&GenericArgument> = match &seg.arguments {
        PathArguments::AngleBracketed(a) => a.args.iter().collect(),
        PathArguments::None => vec![],
        PathArguments::Parenthesized(p) => return err(p.span(), PARAM_HELP),
    };
    match name.as_str() {
        "Out" => {
            let inner = match generics.as_slice() {
                [GenericArgument::Type(t)] => t,
                _ => {
                    return err(
                        seg.span(),
                        "`Out` wraps one tensor type: `Out<Tensor<f32, N>>`",
                    )
                }
            };
            let (t, out, lt) = param_type(inner, level)?;
            if out {
                return err(
                    inner.span(),
                    "`Out<Out<...>>` is not meaningful; write `Out<Tensor<...>>`",
                );
            }
            if !t.to_string().contains("Tensor") {
                return err(
                    inner.span(),
                    "`Out` marks a written tensor: `Out<Tensor<dtype, dims...>>`",
                );
            }
            let _ = lt;
            let rust = match inner {
                Type::Path(ip) => ip.path.segments.last().and_then(|sg| match &sg.arguments {
                    PathArguments::AngleBracketed(a) => a.args.first().cloned(),
                    _ => None,
                }),
                _ => None,
            };
            let lt = quote!(impl ::eagle::AsOutput<'__eagle, #rust>);
            Ok((t, true, lt))
        }
        "Ctx" => {
            if level == Level::Host {
                return err(seg.span(), "a host function has no device context; `Ctx` belongs to per-device programs (`#[eagle::kernel(device)]`) and compute kernels");
            }
            Ok((quote!(::eagle::ir::Type::Ctx), false, quote!(())))
        }
        "Tensor" | "Window" | "Tile" => {
            let Some((GenericArgument::Type(Type::Path(dt)), dims)) =
                generics.split_first().map(|(a, b)| (*a, b))
            else {
                return err(
                    seg.span(),
                    format!("`{name}` takes a dtype then its dims: `{name}<f32, NR, 1, SIZE>`"),
                );
            };
            let dname = dt
                .path
                .get_ident()
                .map(|i| i.to_string())
                .unwrap_or_default();
            let d = dtype_tokens(&dname, dt.span())?;
            let dims = dims.iter().map(|a| dim_tokens(a)).collect::<R<Vec<_>>>()?;
            let kind = format_ident!("{}", name);
            let t = quote!(::eagle::ir::Type::#kind(::eagle::ir::Shape(vec![#(#dims),*]), #d));
            let rust = dname_rust(&dname);
            if level == Level::Host && name != "Tensor" {
                return err(seg.span(), format!("a host function takes tensors and scalars; `{name}` values are created inside the host body"));
            }
            Ok((t, false, quote!(impl ::eagle::AsInput<'__eagle, #rust>)))
        }
        n if dtype_named(n).is_some() && generics.is_empty() => {
            let d = dtype_tokens(n, seg.span())?;
            let rust = dname_rust(n);
            Ok((quote!(::eagle::ir::Type::Scalar(#d)), false, rust))
        }
        "String" | "Vec" | "Box" | "str" | "Rc" | "Arc" => err(
            seg.span(),
            format!("heap types such as `{name}` are not supported in kernels; {PARAM_HELP}"),
        ),
        _ => err(
            seg.span(),
            format!("unsupported parameter type `{name}`; {PARAM_HELP}"),
        ),
    }
}

/// Shape extents are compile-time values; a parameter name there is a run-time value.
fn check_dims_not_params(ty: &Type, names: &[String]) -> R<()> {
    if let Type::Path(tp) = ty {
        for seg in &tp.path.segments {
            if let PathArguments::AngleBracketed(a) = &seg.arguments {
                for g in &a.args {
                    if let GenericArgument::Type(t) = g {
                        if let Type::Path(ip) = t {
                            if let Some(id) = ip.path.get_ident() {
                                if names.iter().any(|n| id == n) {
                                    return err(id.span(), format!("`{id}` is a parameter, a run-time value; shape extents are compile-time constants (literals, Rust `const`s or `dynamic!` dims)"));
                                }
                            }
                        }
                        check_dims_not_params(t, names)?;
                    }
                }
            }
        }
    }
    Ok(())
}

fn dname_rust(d: &str) -> TS {
    let i = format_ident!("{}", d);
    match d {
        // Not Rust primitives: the `half` crate's, re-exported by eagle.
        "f16" | "bf16" => quote!(::eagle::#i),
        _ => quote!(#i),
    }
}

fn expand(level: Level, category: Option<String>, item: TokenStream) -> TokenStream {
    let f: ItemFn = match syn::parse(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    match expand_fn(level, category, &f) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_fn(level: Level, category: Option<String>, f: &ItemFn) -> R<TS> {
    let sig = &f.sig;
    if let Some(a) = &sig.asyncness {
        return err(a.span(), "eagle functions cannot be `async`");
    }
    if !sig.generics.params.is_empty() {
        return err(
            sig.generics.span(),
            "eagle functions cannot be generic; use `dynamic!` dims for shapes that vary",
        );
    }
    if let syn::ReturnType::Type(_, t) = &sig.output {
        return err(
            t.span(),
            "eagle functions return nothing; write results into an `Out<Tensor<...>>` parameter",
        );
    }
    let names: Vec<String> = sig
        .inputs
        .iter()
        .filter_map(|a| match a {
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi) => Some(pi.ident.to_string()),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    for a in &sig.inputs {
        if let FnArg::Typed(pt) = a {
            check_dims_not_params(&pt.ty, &names)?;
        }
    }
    let mut params = vec![];
    for a in &sig.inputs {
        let FnArg::Typed(pt) = a else {
            return err(a.span(), "eagle functions take no `self`");
        };
        let Pat::Ident(pi) = &*pt.pat else {
            return err(pt.pat.span(), "parameters must be plain names");
        };
        if let Some(m) = &pi.mutability {
            return err(
                m.span(),
                "parameters cannot be `mut`; copy into a `let mut` variable",
            );
        }
        let (ty, out, launch_ty) = param_type(&pt.ty, level)?;
        params.push(Param {
            name: pi.ident.clone(),
            ty,
            out,
            launch_ty,
            window: window_rank(&pt.ty),
        });
    }
    let name = &sig.ident;
    let name_str = name.to_string();
    let vis = &f.vis;
    let level_tok = match level {
        Level::Host => quote!(::eagle::ir::Level::Host),
        Level::Device => quote!(::eagle::ir::Level::Device),
        Level::Compute => quote!(::eagle::ir::Level::Compute),
        Level::Sample => quote!(::eagle::ir::Level::Sample),
    };
    let mut cx = Cx {
        scopes: vec![HashMap::new()],
        fname: name_str.clone(),
        level,
        inputs: params
            .iter()
            .filter(|p| !p.out && p.ty.to_string().contains("Tensor"))
            .map(|p| p.name.to_string())
            .collect(),
        windows: params
            .iter()
            .filter_map(|p| Some((p.name.to_string(), p.window.clone()?)))
            .collect(),
    };
    let mut decls = vec![];
    for p in &params {
        let (n, ty, out) = (&p.name, &p.ty, p.out);
        let ns = n.to_string();
        decls.push(quote!(let #n: ::eagle::ir::Value = __f.param(#ns, #ty, #out);));
        cx.bind(&ns, false);
    }
    let body = cx.block_stmts(&f.block.stmts)?;
    let check_category = match &category {
        Some(c) => quote!(__m.check_category(#name_str, #c)?;),
        None => quote!(),
    };
    let declared_category = match &category {
        Some(c) => quote!(const CATEGORY: Option<&'static str> = Some(#c);),
        None => quote!(),
    };
    let docs: Vec<&syn::Attribute> = f
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect();
    let launcher = if level == Level::Host {
        let args: Vec<TS> = params
            .iter()
            .map(|p| {
                let (n, t) = (&p.name, &p.launch_ty);
                quote!(#n: #t)
            })
            .collect();
        let conv: Vec<TS> = params
            .iter()
            .map(|p| {
                let n = &p.name;
                let ns = n.to_string();
                if p.out {
                    quote!(::eagle::AsOutput::output_arg(#n, #name_str, #ns)?)
                } else if p.ty.to_string().contains("Tensor") {
                    quote!(::eagle::AsInput::input_arg(#n, #name_str, #ns)?)
                } else {
                    quote!(::eagle::Arg::from(#n))
                }
            })
            .collect();
        quote! {
            /// Compiles this host program for the session's world size (cached) and runs it.
            /// Tensors are `eagle::Tensor`s or (feature `ndarray`) `ndarray` arrays and views:
            /// inputs in any layout (standard ones borrowed, others copied), outputs in
            /// standard layout (`eagle::AsInput`, `eagle::AsOutput`).
            ///
            /// # Errors
            /// Build, verification, specialization and run-time errors, as `eagle::Error`; an
            /// output array that is not in standard layout, naming it.
            #[allow(clippy::too_many_arguments)]
            pub fn launch<'__eagle>(self, session: &::eagle::Session, #(#args),*) -> ::eagle::Result<::eagle::LaunchReport> {
                session.launch::<Self>(vec![#(#conv),*])
            }
        }
    } else {
        quote!()
    };
    Ok(quote! {
        #(#docs)*
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #name;

        impl ::eagle::ir::EagleFn for #name {
            const NAME: &'static str = #name_str;
            const LEVEL: ::eagle::ir::Level = #level_tok;
            #declared_category
            #[allow(unused_variables, unused_mut, clippy::all)]
            fn build(__m: &mut ::eagle::ir::ModuleBuilder) -> ::eagle::ir::Result<()> {
                __m.define(#name_str, #level_tok, |__f| {
                    #(#decls)*
                    #body
                    Ok(())
                })?;
                #check_category
                Ok(())
            }
        }

        impl #name {
            /// The generic IR text of this function and everything it calls.
            ///
            /// # Errors
            /// Build and verification errors.
            pub fn ir(self) -> ::eagle::Result<String> {
                Ok(<Self as ::eagle::ir::EagleFn>::ir()?)
            }
            /// The IR specialized for `world_size` ranks with the given dim bindings.
            ///
            /// # Errors
            /// Build, verification and specialization errors.
            pub fn ir_specialized(self, world_size: u64, bindings: &[(&str, u64)]) -> ::eagle::Result<String> {
                ::eagle::specialized_ir::<Self>(world_size, bindings)
            }
            #launcher
        }
    })
}

struct Cx {
    /// name -> is mutable variable
    scopes: Vec<HashMap<String, bool>>,
    fname: String,
    level: Level,
    /// Tensor parameters that are inputs (not `Out`): writing them is an error.
    inputs: Vec<String>,
    /// Window parameters: (name, (rank, type as written)).
    windows: Vec<(String, (usize, String))>,
}

const OFFSET_SIGS: &str = "`load(src, [offsets], [shape])`, `store(dst, [offsets], tile)`, `remote_load(window, peer, [offsets], [shape])`, `remote_store(window, peer, [offsets], tile)`, `notify(signal, peer, [offsets], value, op)` and `wait(signal, [offsets], expected, cmp)`";

const SUPPORTED_STMTS: &str = "supported statements: `let`, `let mut`, assignment (`=`, `+=`, ...), `for i in a..b`, `if`/`else`, and calls";

impl Cx {
    fn bind(&mut self, n: &str, mutable: bool) {
        if let Some(s) = self.scopes.last_mut() {
            s.insert(n.to_string(), mutable);
        }
    }
    fn lookup(&self, n: &str) -> Option<bool> {
        self.scopes.iter().rev().find_map(|s| s.get(n).copied())
    }

    fn block_stmts(&mut self, stmts: &[Stmt]) -> R<TS> {
        self.scopes.push(HashMap::new());
        let mut out = TS::new();
        let n = stmts.len();
        for (i, s) in stmts.iter().enumerate() {
            out.extend(self.stmt(s, i + 1 == n)?);
        }
        self.scopes.pop();
        Ok(out)
    }

    /// Every op a statement builds records the statement's source location (an expression
    /// inside it records its own).
    fn stmt(&mut self, s: &Stmt, last: bool) -> R<TS> {
        let body = self.stmt_inner(s, last)?;
        if matches!(s, Stmt::Item(_)) {
            return Ok(body);
        }
        let enter = enter_loc(s.span());
        Ok(quote!(#enter #body __f.leave();))
    }

    fn stmt_inner(&mut self, s: &Stmt, _last: bool) -> R<TS> {
        match s {
            Stmt::Local(l) => {
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
                    return err(e.span(), "eagle functions return nothing; end the statement with `;` and write results into an `Out` tensor");
                }
                self.stmt_expr(e)
            }
            Stmt::Macro(m) => err(
                m.span(),
                format!("macros such as `{}!` are not supported inside kernels; {SUPPORTED_STMTS}", m.mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default()),
            ),
        }
    }

    fn stmt_expr(&mut self, e: &Expr) -> R<TS> {
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
                let body = self.block_stmts(&fl.body.stmts)?;
                self.scopes.pop();
                Ok(quote!({ let __lo = #lo; let __hi = #hi; __f.for_range(__lo, __hi, |__f, #var| { #body Ok(()) })?; }))
            }
            Expr::If(i) => self.if_stmt(i),
            Expr::Block(b) => {
                let body = self.block_stmts(&b.block.stmts)?;
                Ok(quote!({ #body }))
            }
            Expr::Assign(a) if matches!(&*a.left, Expr::Index(_)) => {
                let Expr::Index(ix) = &*a.left else { unreachable!("matched above") };
                if let Some((w, idx)) = self.window_index(ix)? {
                    let w = self.val(w)?;
                    let idx = idx.into_iter().map(|i| self.expr(i)).collect::<R<Vec<_>>>()?;
                    let rhs = self.expr(&a.right)?;
                    return Ok(quote!({ let __a0 = #w; let __a1 = vec![#(#idx),*]; let __a2 = #rhs; __f.set_elem(__a0, __a1, __a2)?; }));
                }
                self.check_writable(&ix.expr, "the element assignment")?;
                let base = self.val(&ix.expr)?;
                let i = self.expr(&ix.index)?;
                let rhs = self.expr(&a.right)?;
                Ok(quote!({ let __a0 = #base; let __a1 = #i; let __a2 = #rhs; __f.set_index(__a0, __a1, __a2)?; }))
            }
            Expr::Binary(b) if is_compound(&b.op) && matches!(&*b.left, Expr::Index(_)) => {
                let Expr::Index(ix) = &*b.left else { unreachable!("matched above") };
                if let Some((w, idx)) = self.window_index(ix)? {
                    let w = self.val(w)?;
                    let idx = idx.into_iter().map(|i| self.expr(i)).collect::<R<Vec<_>>>()?;
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
            Expr::While(w) => err(w.while_token.span, format!("`while` loops are not supported (their trip count is unknown to the compiler); use `for i in a..b`; {SUPPORTED_STMTS}")),
            Expr::Loop(l) => err(l.loop_token.span, format!("`loop` is not supported; use `for i in a..b`; {SUPPORTED_STMTS}")),
            Expr::Match(m) => err(m.match_token.span, "`match` is not supported; use `if`/`else` on comparisons"),
            Expr::Return(r) => err(r.return_token.span, "`return` is not supported; eagle functions run to their end (use `if` to skip work)"),
            Expr::Break(b) => err(b.span(), "`break` is not supported; bound the loop with its range"),
            Expr::Continue(c) => err(c.span(), "`continue` is not supported; wrap the rest of the body in an `if`"),
            other => {
                let e = self.expr(other)?;
                Ok(quote!(let _ = #e;))
            }
        }
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> R<TS> {
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

    fn mut_var(&self, e: &Expr) -> R<syn::Ident> {
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
    fn call_stmt(&mut self, c: &syn::ExprCall) -> R<Option<TS>> {
        let Expr::Path(p) = &*c.func else {
            return err(c.func.span(), "only calls of named functions are supported");
        };
        let name = p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if p.path.segments.len() == 1 && is_intrinsic(&name) {
            return self.intrinsic_stmt(&name, c);
        }
        if self.lookup(&name).is_some() {
            return err(
                c.func.span(),
                format!("`{name}` is a value, not a function"),
            );
        }
        if name == self.fname {
            return err(c.func.span(), format!("recursion: `{name}` calls itself; eagle functions are inlined per device and cannot recurse (rewrite it as a `for` loop)"));
        }
        let path = &p.path;
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

    /// `dst` must not name an input tensor parameter.
    /// For `w[i][j]...` on a window parameter `w` (not shadowed by a `let`): the window and
    /// the indices, outermost first. A window element takes one index per dim; another count
    /// is a compile error at the expression, naming what windows support.
    fn window_index<'e>(&self, ix: &'e syn::ExprIndex) -> R<Option<(&'e Expr, Vec<&'e Expr>)>> {
        let mut idx = vec![&*ix.index];
        let mut base = &*ix.expr;
        while let Expr::Index(inner) = base {
            idx.push(&*inner.index);
            base = &*inner.expr;
        }
        idx.reverse();
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

    fn check_writable(&self, dst: &Expr, what: &str) -> R<()> {
        if let Expr::Path(p) = dst {
            if let Some(id) = p.path.get_ident() {
                let n = id.to_string();
                // A `let` of the same name shadows the parameter.
                let shadowed = self.scopes.iter().skip(1).any(|s| s.contains_key(&n));
                if !shadowed && self.inputs.contains(&n) {
                    return err(id.span(), format!("{what} writes `{n}`, an input tensor; declare the parameter `{n}: Out<Tensor<...>>` to write it"));
                }
            }
        }
        Ok(())
    }

    fn intrinsic_stmt(&mut self, name: &str, c: &syn::ExprCall) -> R<Option<TS>> {
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
            | B::WorldSize
            | B::Load
            | B::RemoteLoad
            | B::Subview
            | B::Window
            | B::AllocWindowBuffer
            | B::Min
            | B::Max
            | B::Fma
            | B::Select => return Ok(None),
        }))
    }

    /// Tokens of an expression that yields a `Value`.
    fn val(&mut self, e: &Expr) -> R<TS> {
        let t = self.expr(e)?;
        Ok(quote!({ let __a0 = #t; let __a1 = None; __f.value(__a0, __a1)? }))
    }

    fn offsets(&mut self, e: &Expr) -> R<TS> {
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

    fn shape(&mut self, e: &Expr) -> R<TS> {
        let Expr::Array(arr) = e else {
            return err(
                e.span(),
                "a shape is a list of extents in brackets: `[1, SIZE]`",
            );
        };
        let mut items = vec![];
        for x in &arr.elems {
            if let Expr::Path(p) = x {
                if let Some(id) = p.path.get_ident() {
                    if self.lookup(&id.to_string()).is_some() {
                        return err(x.span(), "shape extents are compile-time constants (literals, Rust `const`s or `dynamic!` dims), not run-time values");
                    }
                }
            }
            items.push(quote_spanned!(x.span()=> ::eagle::ir::IntoDim::into_dim(#x)));
        }
        Ok(quote!(vec![#(#items),*]))
    }

    /// Tokens of an expression that yields an `eagle::ir::Operand`.
    /// The code building expression `e`; the ops it builds record `e`'s source location.
    fn expr(&mut self, e: &Expr) -> R<TS> {
        let t = self.expr_inner(e)?;
        if matches!(e, Expr::Lit(_) | Expr::Path(_) | Expr::Paren(_)) {
            return Ok(t);
        }
        let enter = enter_loc(e.span());
        Ok(quote!({ #enter let __r = #t; __f.leave(); __r }))
    }

    fn expr_inner(&mut self, e: &Expr) -> R<TS> {
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
                        Some(true) => return Ok(quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #id; __f.read(__a0)? }))),
                        Some(false) => return Ok(quote_spanned!(sp=> ::eagle::ir::Operand::Val(#id))),
                        None => {}
                    }
                }
                quote_spanned!(sp=> ::eagle::ir::Operand::from(#p))
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
                    quote_spanned!(sp=> { let __a0 = #op; let __a1 = #l; let __a2 = #r; __f.bin_lit(__a0, __a1, __a2)? })
                } else {
                    quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #l; let __a2 = #r; __f.#ctor(__a0, __a1, __a2)? }))
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
                quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #x; __f.un(__a0, __a1)? }))
            }
            Expr::Cast(c) => {
                let x = self.expr(&c.expr)?;
                let Type::Path(tp) = &*c.ty else {
                    return err(c.ty.span(), "casts go to a scalar dtype such as `f32` or `usize`");
                };
                let n = tp.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
                let d = dtype_tokens(&n, tp.span())?;
                quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #x; let __a1 = #d; __f.cast(__a0, __a1)? }))
            }
            Expr::Index(ix) => {
                if let Some((w, idx)) = self.window_index(ix)? {
                    let w = self.val(w)?;
                    let idx = idx.into_iter().map(|i| self.expr(i)).collect::<R<Vec<_>>>()?;
                    quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #w; let __a1 = vec![#(#idx),*]; __f.elem(__a0, __a1)? }))
                } else {
                    let base = self.val(&ix.expr)?;
                    let i = self.expr(&ix.index)?;
                    quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #base; let __a1 = #i; __f.index(__a0, __a1)? }))
                }
            }
            Expr::MethodCall(m) => {
                let name = m.method.to_string();
                let recv = self.expr(&m.receiver)?;
                let args = m.args.iter().map(|a| self.expr(a)).collect::<R<Vec<_>>>()?;
                match (name.as_str(), args.as_slice()) {
                    (n, []) if math_unop(n).is_some() => {
                        let op = unop(n);
                        quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #recv; __f.un(__a0, __a1)? }))
                    }
                    (n, rest) if let Some(f) = eagle_ir::MathFn::from_method(n).filter(|f| math_unop(n).is_none() && f.arity() == rest.len() + 1) => {
                        let f = math_fn_tokens(f);
                        quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #f; let __a1 = vec![#recv #(, #rest)*]; __f.math(__a0, __a1)? }))
                    }
                    (n @ ("min" | "max"), [b]) => {
                        let op = bin_op_tokens(eagle_ir::BinOp::from_name(n).unwrap_or(eagle_ir::BinOp::Min));
                        quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #op; let __a1 = #recv; let __a2 = #b; __f.bin(__a0, __a1, __a2)? }))
                    }
                    ("to_bits", []) => quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #recv; __f.to_bits(__a0)? })),
                    ("mul_add", [b, c]) => quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #recv; let __a1 = #b; let __a2 = #c; __f.fma(__a0, __a1, __a2)? })),
                    (n, rest) if let Some(f) = eagle_ir::MathFn::from_method(n) => {
                        return err(m.method.span(), format!("`.{name}()` takes {} argument(s) besides the receiver (`{}`), found {}", f.arity() - 1, f.signature(), rest.len()));
                    }
                    _ => return err(m.method.span(), format!("method `.{name}()` is not supported; supported methods: {}, `.min(b)`, `.max(b)`, `.mul_add(b, c)`, `.to_bits()`", math_names("`.", "()`"))),
                }
            }
            Expr::Call(c) => self.call_expr(c)?,
            Expr::Closure(c) => return err(c.span(), "closures are not supported in kernels; define another `#[eagle::kernel]` function and call it"),
            Expr::Reference(r) => return err(r.span(), "references (`&`, `&mut`) are not supported in kernels; pass tensors by value, and mark written tensors `Out<Tensor<...>>`"),
            Expr::Macro(m) => return err(m.span(), "macros are not supported inside kernels (except in `const` items)"),
            Expr::If(i) => return err(i.span(), "`if` is a statement in eagle; for a value use `select(cond, a, b)`"),
            Expr::Match(m) => return err(m.match_token.span, "`match` is not supported; use `if`/`else` or `select`"),
            Expr::Tuple(t) => return err(t.span(), "tuples are not supported; use separate `let` bindings"),
            Expr::Array(a) => return err(a.span(), "arrays are only allowed as shapes and offsets of eagle operations"),
            Expr::Field(f) => return err(f.span(), "field access is not supported; eagle values have no fields"),
            Expr::Range(r) => return err(r.span(), "ranges are only allowed as the iterator of a `for` loop"),
            Expr::Block(b) => return err(b.span(), "block expressions are not supported as values"),
            Expr::Assign(a) => return err(a.span(), "assignment is a statement; the only keyword argument is `device = r` in a dispatch"),
            other => return err(other.span(), format!("unsupported expression; {SUPPORTED_STMTS}")),
        })
    }

    /// A tile intrinsic call (`row_sum(t)`, `zeros([M, N], f32)`): its arguments by the kinds
    /// `eagle_ir::tile::INTRINSICS` lists, built by `FunctionBuilder::tile_intrinsic`.
    fn tile_call(&mut self, c: &syn::ExprCall, intr: &eagle_ir::tile::Intrinsic) -> R<TS> {
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
            quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a = vec![#(#items),*]; __f.tile_intrinsic(#name, __a)? })),
        )
    }

    fn call_expr(&mut self, c: &syn::ExprCall) -> R<TS> {
        let sp = c.span();
        let Expr::Path(p) = &*c.func else {
            return err(c.func.span(), "only calls of named functions are supported");
        };
        let name = p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
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
        if p.path.segments.len() == 1 {
            if let Some(intr) = eagle_ir::tile::intrinsic(&name) {
                return self.tile_call(c, intr);
            }
        }
        // `f32::from_bits(u)`, `f64::from_bits(u)`.
        if p.path.segments.len() == 2 && name == "from_bits" {
            let ty = p.path.segments[0].ident.to_string();
            if !matches!(ty.as_str(), "f16" | "bf16" | "f32" | "f64") {
                return err(p.path.segments[0].ident.span(), format!("`{ty}::from_bits` is not an eagle intrinsic; `f32::from_bits(u)`, `f64::from_bits(u)`, `f16::from_bits(u)` and `bf16::from_bits(u)` are"));
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
            let d = dtype_tokens(&ty, p.path.segments[0].ident.span())?;
            let x = self.expr(a[0])?;
            return Ok(
                quote_spanned!(sp=> ::eagle::ir::Operand::Val({ let __a0 = #x; let __a1 = #d; __f.bitcast(__a0, __a1)? })),
            );
        }
        if !(p.path.segments.len() == 1 && is_intrinsic(&name)) {
            return err(c.func.span(), format!("`{name}` is not an eagle intrinsic with a result; the intrinsics with results are {}, {}, {} and the tile ops {}. Other eagle functions (`#[eagle::kernel]`) return nothing: call them as statements and pass an `Out` tensor for the result; plain Rust functions cannot be called from kernels", builtin_names(false), math_names("", ""), builtin_names(true), tile_names()));
        }
        let v = |t: TS| quote_spanned!(sp=> ::eagle::ir::Operand::Val(#t));
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
        use eagle_ir::Builtin as B;
        let Some(b) = B::from_name(&name) else {
            return err(c.func.span(), format!("`{name}` is not an eagle intrinsic"));
        };
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
            B::Subview => {
                let src = self.val(a[0])?;
                let off = self.expr(a[1])?;
                let len = a[2];
                if let Expr::Path(p) = len {
                    if let Some(id) = p.path.get_ident() {
                        if self.lookup(&id.to_string()).is_some() {
                            return err(len.span(), "the length of a subview is a compile-time constant (a literal, Rust `const` or `dynamic!` dim), not a run-time value");
                        }
                    }
                }
                v(
                    quote!({ let __a0 = #src; let __a1 = #off; __f.#m(__a0, __a1, ::eagle::ir::IntoDim::into_dim(#len))? }),
                )
            }
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
            | B::AllToAll => {
                return err(
                    c.span(),
                    format!("`{name}(...)` returns nothing; call it as a statement"),
                )
            }
        })
    }
}

/// Whether a kernel may call `n` as a built-in function (from the spec in eagle-ir: the
/// built-ins, the call forms of unary ops and the math library).
fn is_intrinsic(n: &str) -> bool {
    eagle_ir::Builtin::from_name(n).is_some()
        || math_unop(n).is_some()
        || eagle_ir::MathFn::from_name(n).is_some()
}

/// Checks a built-in call's argument count against its declared signature.
fn builtin_arity(b: eagle_ir::Builtin, c: &syn::ExprCall) -> R<()> {
    let (k, n) = (b.arity(), c.args.len());
    if n != k {
        return err(
            c.span(),
            format!(
                "`{}` takes {k} argument(s): `{}`; found {n}",
                b.name(),
                b.signature()
            ),
        );
    }
    Ok(())
}

/// The built-ins with a result, comma-separated: the elementwise ones or the others.
fn builtin_names(elementwise: bool) -> String {
    eagle_ir::Builtin::ALL
        .into_iter()
        .filter(|b| b.has_result() && b.elementwise() == elementwise)
        .map(|b| b.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tokens naming variant `i` of the eagle-ir enumeration `ty` (`::eagle::ir::ty::ALL[i]`):
/// generated code names a variant by its place in the declaration, not by its spelling.
fn enum_tokens(ty: TS, i: usize) -> TS {
    quote!(::eagle::ir::#ty::ALL[#i])
}

/// Tokens for a binary op.
fn bin_op_tokens(b: eagle_ir::BinOp) -> TS {
    enum_tokens(quote!(BinOp), b.index())
}

/// Tokens for the op a kernel names by its Rust variant name (`Set`, `TwoPhase`): `parse`
/// reads the name, `index` places it, `msg` says what was expected.
fn choice_tokens<T: Copy>(
    e: &Expr,
    parse: impl Fn(&str) -> Option<T>,
    index: impl Fn(T) -> usize,
    ty: TS,
    msg: impl Fn() -> String,
) -> R<TS> {
    match path_name(e).as_deref().and_then(parse) {
        Some(t) => Ok(enum_tokens(ty, index(t))),
        None => err(e.span(), msg()),
    }
}

/// The tokens naming a math-library function (`::eagle::ir::MathFn::ALL[i]`).
fn math_fn_tokens(f: eagle_ir::MathFn) -> TS {
    let i = eagle_ir::MathFn::ALL
        .iter()
        .position(|g| *g == f)
        .unwrap_or(0);
    enum_tokens(quote!(MathFn), i)
}

/// The unary math op a kernel builds by calling `n` (`sqrt(x)`, `x.sqrt()`): from
/// `eagle_ir::UnOp::call_name`, so a new math op needs no edit here.
fn math_unop(n: &str) -> Option<eagle_ir::UnOp> {
    eagle_ir::UnOp::ALL
        .into_iter()
        .find(|u| u.call_name() == Some(n))
}

/// The tile intrinsics' names, comma-separated (from `eagle_ir::tile::INTRINSICS`).
fn tile_names() -> String {
    eagle_ir::tile::INTRINSICS
        .iter()
        .map(|i| i.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The math intrinsics' names, each between `pre` and `post`, comma-separated.
fn math_names(pre: &str, post: &str) -> String {
    eagle_ir::UnOp::ALL
        .into_iter()
        .filter_map(|u| u.call_name())
        .chain(eagle_ir::MathFn::ALL.into_iter().map(|f| f.name()))
        .map(|n| format!("{pre}{n}{post}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn unop(n: &str) -> TS {
    let u = math_unop(n).unwrap_or(eagle_ir::UnOp::Abs);
    enum_tokens(quote!(UnOp), u.index())
}

fn path_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn reduce_tokens(e: &Expr) -> R<TS> {
    use eagle_ir::ReduceOp as O;
    choice_tokens(e, O::from_variant, O::index, quote!(ReduceOp), || {
        format!(
            "the reduce op is one of {}",
            eagle_ir::spec::one_of(O::ALL.map(O::variant))
        )
    })
}

fn cmp_tokens(e: &Expr) -> R<TS> {
    use eagle_ir::CmpOp as O;
    choice_tokens(e, O::from_variant, O::index, quote!(CmpOp), || {
        format!(
            "the comparison is one of {}",
            eagle_ir::spec::one_of(O::ALL.map(O::variant))
        )
    })
}

fn is_compound(op: &SynBin) -> bool {
    matches!(
        op,
        SynBin::AddAssign(_)
            | SynBin::SubAssign(_)
            | SynBin::MulAssign(_)
            | SynBin::DivAssign(_)
            | SynBin::RemAssign(_)
            | SynBin::BitAndAssign(_)
            | SynBin::BitOrAssign(_)
            | SynBin::BitXorAssign(_)
            | SynBin::ShlAssign(_)
            | SynBin::ShrAssign(_)
    )
}

/// The binary op of a compound assignment (`+=` is `add`).
fn compound_op(op: &SynBin) -> TS {
    use eagle_ir::BinOp as B;
    bin_op_tokens(match op {
        SynBin::AddAssign(_) => B::Add,
        SynBin::SubAssign(_) => B::Sub,
        SynBin::MulAssign(_) => B::Mul,
        SynBin::DivAssign(_) => B::Div,
        SynBin::RemAssign(_) => B::Rem,
        SynBin::BitAndAssign(_) => B::And,
        SynBin::BitOrAssign(_) => B::Or,
        SynBin::ShlAssign(_) => B::Shl,
        SynBin::ShrAssign(_) => B::Shr,
        _ => B::Xor,
    })
}

/// The builder method (`bin` or `cmp`) and the op of a binary operator (`+` is `add`, `<` is
/// `lt`).
fn bin_tokens(op: &SynBin) -> R<(syn::Ident, TS)> {
    use eagle_ir::{BinOp as B, CmpOp as C};
    let b = |o: B| (format_ident!("bin"), bin_op_tokens(o));
    let c = |o: C| (format_ident!("cmp"), enum_tokens(quote!(CmpOp), o.index()));
    Ok(match op {
        SynBin::Add(_) => b(B::Add),
        SynBin::Sub(_) => b(B::Sub),
        SynBin::Mul(_) => b(B::Mul),
        SynBin::Div(_) => b(B::Div),
        SynBin::Rem(_) => b(B::Rem),
        SynBin::BitAnd(_) | SynBin::And(_) => b(B::And),
        SynBin::BitOr(_) | SynBin::Or(_) => b(B::Or),
        SynBin::BitXor(_) => b(B::Xor),
        SynBin::Shl(_) => b(B::Shl),
        SynBin::Shr(_) => b(B::Shr),
        SynBin::Eq(_) => c(C::Eq),
        SynBin::Ne(_) => c(C::Ne),
        SynBin::Lt(_) => c(C::Lt),
        SynBin::Le(_) => c(C::Le),
        SynBin::Gt(_) => c(C::Gt),
        SynBin::Ge(_) => c(C::Ge),
        other => return err(other.span(), "unsupported operator in a kernel"),
    })
}

/// The constant of a suffixed float literal, read directly in its dtype (`0.1f32` is the `f32`
/// nearest 0.1, not the `f64` nearest 0.1 rounded again), negated when `neg`.
fn float_const(f: &syn::LitFloat, suffix: &str, neg: bool) -> syn::Result<TS> {
    let e = |x| syn::Error::new(f.span(), x);
    Ok(if suffix == "f32" {
        let v: f32 = f.base10_parse().map_err(e)?;
        let v = if neg { -v } else { v };
        quote!(::eagle::ir::Const::F32(#v))
    } else {
        let v: f64 = f.base10_parse().map_err(e)?;
        let v = if neg { -v } else { v };
        quote!(::eagle::ir::Const::F64(#v))
    })
}

/// `__f.enter(file, line, column);` for the start of `sp`: the ops built until the matching
/// `__f.leave()` record this Rust source location.
fn enter_loc(sp: Span) -> TS {
    let s = sp.unwrap();
    let file = normalize_path(&s.file());
    let line = s.line() as u32;
    let column = s.column() as u32;
    quote!(__f.enter(#file, #line, #column);)
}

/// `a/b/../../c` as `c`: a module included with `#[path = "../../examples/x.rs"]` is named by
/// the path a reader finds it at.
fn normalize_path(p: &str) -> String {
    let mut out: Vec<&str> = vec![];
    for c in p.split('/') {
        match c {
            "." => {}
            ".." if out.last().is_some_and(|l| *l != "..") => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out.join("/")
}
