//! The attribute of `#[eagle::kernel(...)]`: the kernel's level and declared access category.

use crate::parse::params::Level;
use crate::{err, R};
use proc_macro2::TokenStream as TS;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, Lit};

/// The most turns a `while` loop runs unless the kernel sets another cap (`while_cap = N`):
/// 2^32. More is a run-time error naming the loop.
pub(crate) const DEFAULT_WHILE_CAP: u64 = 1 << 32;

/// What `#[eagle::kernel(...)]` declares.
pub(crate) struct KernelAttr {
    /// `compute` (the default), `device` or `sample`.
    pub(crate) level: Level,
    /// The access category (`category = "..."`, text form, sample kernels only).
    pub(crate) category: Option<String>,
    /// The turn cap of the kernel's `while` loops (`while_cap = N`).
    pub(crate) while_cap: u64,
}

/// What `#[eagle::host(...)]` declares: only `while_cap = N`.
pub(crate) fn host_attr(attr: TS) -> R<KernelAttr> {
    let a = if attr.is_empty() {
        None
    } else {
        Some(kernel_attr(attr.clone())?)
    };
    match a {
        None => Ok(KernelAttr {
            level: Level::Host,
            category: None,
            while_cap: DEFAULT_WHILE_CAP,
        }),
        Some(KernelAttr {
            level: Level::Compute,
            category: None,
            while_cap,
        }) => Ok(KernelAttr {
            level: Level::Host,
            category: None,
            while_cap,
        }),
        Some(_) => err(
            attr.span(),
            "`#[eagle::host]` takes only `while_cap = N` (the turn cap of its `while` loops)",
        ),
    }
}

/// The level (`compute`, `device`, `sample`), the access category (`category = "..."`, text
/// form, sample kernels only) and the `while` cap (`while_cap = N`) an attribute declares.
pub(crate) fn kernel_attr(attr: TS) -> R<KernelAttr> {
    let parsed = syn::parse::Parser::parse2(
        syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
        attr.clone(),
    );
    let metas: Vec<syn::Meta> = match parsed {
        Ok(p) => p.into_iter().collect(),
        Err(e) => return Err(e),
    };
    let mut level = Level::Compute;
    let mut category = None;
    let mut while_cap = DEFAULT_WHILE_CAP;
    for m in &metas {
        match m {
            syn::Meta::Path(p) if p.is_ident("compute") => level = Level::Compute,
            syn::Meta::Path(p) if p.is_ident("device") => level = Level::Device,
            syn::Meta::Path(p) if p.is_ident("sample") => level = Level::Sample,
            syn::Meta::NameValue(nv) if nv.path.is_ident("while_cap") => {
                let n = match &nv.value {
                    Expr::Lit(syn::ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<u64>().ok(),
                    _ => None,
                };
                match n {
                    Some(n) if n > 0 => while_cap = n,
                    _ => return err(nv.value.span(), "`while_cap` is a whole number of turns, at least 1: `while_cap = 1000`"),
                }
            }
            syn::Meta::NameValue(nv) if nv.path.is_ident("category") => {
                let ok = match &nv.value {
                    Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => {
                        let v = s.value();
                        eagle_ir::AccessCategory::parse(&v).map(|c| c.to_string())
                    }
                    _ => None,
                };
                match ok {
                    Some(v) => category = Some(v),
                    None => {
                        return err(nv.value.span(), "the category is one of \"sample_local\", \"cross_sample_read\", \"cross_sample_write\", \"mapreduce(sum)\", \"mapreduce(times)\", \"mapreduce(max)\", \"mapreduce(land)\"");
                    }
                }
            }
            other => {
                return err(
                    other.span(),
                    format!("unknown kernel kind `{}`; write `#[eagle::kernel]` for a compute kernel, `#[eagle::kernel(device)]` for a per-device program or `#[eagle::kernel(sample)]` for a sample kernel", other.to_token_stream()),
                )
            }
        }
    }
    if category.is_some() && level != Level::Sample {
        return err(attr.span(), "`category = ...` applies to sample kernels: `#[eagle::kernel(sample, category = \"...\")]`");
    }
    Ok(KernelAttr {
        level,
        category,
        while_cap,
    })
}
