//! The parameter types of an eagle function (`Tensor<f32, N>`, `Out<...>`, `Window<...>`, a
//! scalar) and the dims and dtypes inside them.

use crate::{err, R};
use proc_macro2::{Span, TokenStream as TS};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, FnArg, GenericArgument, Pat, PathArguments, Type};

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Level {
    Host,
    Device,
    Compute,
    Sample,
}

pub(crate) struct Param {
    pub(crate) name: syn::Ident,
    pub(crate) ty: TS,
    pub(crate) out: bool,
    /// Rust type of the launcher argument (host functions).
    pub(crate) launch_ty: TS,
    /// For a `Window<dtype, dims...>`: its rank and how it was written.
    pub(crate) window: Option<(usize, String)>,
}

/// The rank and source text of a `Window<dtype, dims...>` parameter type.
pub(crate) fn window_rank(ty: &Type) -> Option<(usize, String)> {
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
pub(crate) fn dtype_named(name: &str) -> Option<eagle_ir::DType> {
    eagle_ir::DType::ALL
        .into_iter()
        .find(|d| d.rust_name() == name)
}

pub(crate) fn dtype_tokens(name: &str, span: Span) -> R<TS> {
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

pub(crate) fn dim_tokens(arg: &GenericArgument) -> R<TS> {
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

pub(crate) const PARAM_HELP: &str = "supported parameter types: `Ctx`, `Tensor<dtype, dims...>`, `Out<Tensor<dtype, dims...>>`, `Window<dtype, dims...>`, `Tile<dtype, dims...>`, or a scalar (f32, f64, i32, i64, u32, u64, bool, usize)";

/// Parses a parameter type into (IR type tokens, out, launcher Rust type).
pub(crate) fn param_type(ty: &Type, level: Level) -> R<(TS, bool, TS)> {
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

/// The types a compute kernel returns (`-> Tile<f32, M, 1>`, `-> f32`, `-> (Tile<...>, usize)`),
/// as IR type tokens in order; `None` without a return type. Only compute kernels return
/// values: the other levels are refused here.
pub(crate) fn read_returns(sig: &syn::Signature, level: Level) -> R<Option<Vec<TS>>> {
    let syn::ReturnType::Type(_, t) = &sig.output else {
        return Ok(None);
    };
    if level != Level::Compute {
        return err(
            t.span(),
            "only compute kernels (`#[eagle::kernel]`) return values; here, write results into an `Out<Tensor<...>>` parameter",
        );
    }
    let elems: Vec<&Type> = match &**t {
        Type::Tuple(tt) if tt.elems.is_empty() => return Ok(None),
        Type::Tuple(tt) => tt.elems.iter().collect(),
        t => vec![t],
    };
    let mut out = vec![];
    for e in elems {
        let (ty, _, _) = param_type(e, level)?;
        let s = ty.to_string();
        if !(s.contains("Tile") || s.contains("Scalar")) {
            return err(
                e.span(),
                "a kernel returns tiles and scalars (`Tile<f32, M, N>`, `f32`, `usize`) or a tuple of them; write tensors into an `Out<Tensor<...>>` parameter",
            );
        }
        out.push(ty);
    }
    Ok(Some(out))
}

/// Shape extents are compile-time values; a parameter name there is a run-time value.
pub(crate) fn check_dims_not_params(ty: &Type, names: &[String]) -> R<()> {
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

pub(crate) fn dname_rust(d: &str) -> TS {
    let i = format_ident!("{}", d);
    // The float storage dtypes are not Rust primitives: the `half` and `float8` crates' and
    // eagle's, re-exported by eagle under their dtype names.
    if dtype_named(d).is_some_and(eagle_ir::DType::is_narrow_float) {
        quote!(::eagle::#i)
    } else {
        quote!(#i)
    }
}

/// Checks an eagle function's signature (not `async`, not generic) and reads its parameters
/// (the return type is [`read_returns`]'s).
pub(crate) fn read_params(sig: &syn::Signature, level: Level) -> R<Vec<Param>> {
    if let Some(a) = &sig.asyncness {
        return err(a.span(), "eagle functions cannot be `async`");
    }
    if !sig.generics.params.is_empty() {
        return err(
            sig.generics.span(),
            "eagle functions cannot be generic; use `dynamic!` dims for shapes that vary",
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
    Ok(params)
}
