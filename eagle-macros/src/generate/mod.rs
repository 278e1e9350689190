//! Generating the IR-building code: [`expand`] turns an annotated function into a unit struct
//! implementing `eagle::ir::EagleFn`, whose `build` replays the body through
//! `eagle::ir::FunctionBuilder` calls. Statements are `stmt`, expressions `expr`, and the
//! tokens naming ops (from the op spec in eagle-ir) `ops`.

mod expr;
mod ops;
mod stmt;

use crate::parse::attr::KernelAttr;
use crate::parse::params::*;
use crate::{err, R};
use proc_macro::TokenStream;
use proc_macro2::TokenStream as TS;
use quote::{format_ident, quote, quote_spanned};
use std::collections::HashMap;
use syn::spanned::Spanned;
use syn::{Expr, ItemFn, Lit, Pat, Stmt, Type, UnOp as SynUn};

pub(crate) fn expand(attr: KernelAttr, item: TokenStream) -> TokenStream {
    let f: ItemFn = match syn::parse(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    match expand_fn(attr, &f) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_fn(attr: KernelAttr, f: &ItemFn) -> R<TS> {
    let KernelAttr {
        level,
        category,
        while_cap,
    } = attr;
    let sig = &f.sig;
    let params = read_params(sig, level)?;
    let returns = read_returns(sig, level)?;
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
        loops: vec![],
        while_cap,
        arrays: HashMap::new(),
    };
    let mut decls = vec![];
    for p in &params {
        let (n, ty, out) = (&p.name, &p.ty, p.out);
        let ns = n.to_string();
        decls.push(quote!(let #n: ::eagle::ir::Value = __f.param(#ns, #ty, #out);));
        cx.bind(&ns, false);
    }
    let (body, returning) = match &returns {
        None => (cx.block_stmts(&f.block.stmts)?, quote!()),
        Some(tys) => {
            let (body, tail) = cx.body_with_tail(&f.block, tys.len())?;
            let returned = returned_values(&name_str, tys, &tail);
            let build_body = quote!(#body #(#returned;)*);
            let expand = returning_impl(name, &name_str, &params, tys, &body, &returned);
            (build_body, expand)
        }
    };
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
        host_launcher(&params, &name_str)
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

        #returning

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

/// Each tail value checked against its declared type (`FunctionBuilder::returned`), at the
/// tail's source line.
fn returned_values(name_str: &str, tys: &[TS], tail: &[(TS, TS)]) -> Vec<TS> {
    tys.iter()
        .zip(tail)
        .enumerate()
        .map(|(i, (ty, (enter, e)))| {
            quote!({
                #enter
                let __t = #e;
                let __v = __f.returned(#name_str, #i, __t, &#ty)?;
                __f.leave();
                __v
            })
        })
        .collect()
}

/// `Returns` for a kernel with a return type: its body built in place at a call that uses
/// its value, with the parameters bound to the arguments (`FunctionBuilder::expand_begin`).
fn returning_impl(
    name: &syn::Ident,
    name_str: &str,
    params: &[Param],
    tys: &[TS],
    body: &TS,
    returned: &[TS],
) -> TS {
    let pnames: Vec<String> = params.iter().map(|p| p.name.to_string()).collect();
    let ptys: Vec<&TS> = params.iter().map(|p| &p.ty).collect();
    let idents: Vec<&syn::Ident> = params.iter().map(|p| &p.name).collect();
    let idx: Vec<usize> = (0..params.len()).collect();
    quote! {
        impl ::eagle::ir::Returns for #name {
            fn returns() -> Vec<::eagle::ir::Type> {
                vec![#(#tys),*]
            }
            #[allow(unused_variables, unused_mut, clippy::all)]
            fn expand(
                __f: &mut ::eagle::ir::FunctionBuilder<'_>,
                __args: Vec<::eagle::ir::Operand>,
            ) -> ::eagle::ir::Result<Vec<::eagle::ir::Value>> {
                let __vals = __f.expand_begin(#name_str, &[#((#pnames, #ptys)),*], __args)?;
                let __r = (|__f: &mut ::eagle::ir::FunctionBuilder<'_>| -> ::eagle::ir::Result<Vec<::eagle::ir::Value>> {
                    #(let #idents: ::eagle::ir::Value = __vals[#idx];)*
                    #body
                    Ok(vec![#(#returned),*])
                })(__f);
                __f.expand_end();
                __r
            }
        }
    }
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
    /// The enclosing `for` loops that hold a `continue` or `break`, innermost last: the Rust
    /// names of their flag variables (`stmt.rs`, `Cx::loop_with_exits`).
    loops: Vec<LoopExits>,
    /// The turn cap of the kernel's `while` loops (`#[eagle::kernel(while_cap = N)]`).
    while_cap: u64,
    /// Local arrays by name (`let a = [0; 4]`): whether each was declared `let mut`. A later
    /// `let` of the same name removes it.
    arrays: HashMap<String, bool>,
}

/// The flags of a `for` loop with `continue` or `break` (IR variables of `bool`): `skip` is
/// set by either and guards the rest of the iteration; `stop`, set by `break`, guards every
/// later iteration.
#[derive(Clone)]
struct LoopExits {
    skip: syn::Ident,
    stop: syn::Ident,
}

pub(super) const OFFSET_SIGS: &str = "`load(src, [offsets], [shape])`, `store(dst, [offsets], tile)`, `remote_load(window, peer, [offsets], [shape])`, `remote_store(window, peer, [offsets], tile)`, `notify(signal, peer, [offsets], value, op)` and `wait(signal, [offsets], expected, cmp)`";

pub(super) const SUPPORTED_STMTS: &str = "supported statements: `let`, `let mut`, assignment (`=`, `+=`, ...), `for i in a..b` and `while cond` (with `continue` and `break`), `if`/`else`, and calls";

/// The typed `launch` method of a host program: each parameter as the user passes it, then
/// converted to an `eagle::Arg` (inputs borrowed or copied, outputs written back).
fn host_launcher(params: &[Param], name_str: &str) -> TS {
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
}
