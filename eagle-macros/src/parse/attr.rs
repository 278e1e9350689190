//! The attribute of `#[eagle::kernel(...)]`: the kernel's level and declared access category.

use crate::parse::params::Level;
use crate::{err, R};
use proc_macro2::TokenStream as TS;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Expr, Lit};

/// The level (`compute`, `device`, `sample`) and the access category (`category = "..."`, text
/// form, sample kernels only) an attribute declares.
pub(crate) fn kernel_attr(attr: TS) -> R<(Level, Option<String>)> {
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
    for m in &metas {
        match m {
            syn::Meta::Path(p) if p.is_ident("compute") => level = Level::Compute,
            syn::Meta::Path(p) if p.is_ident("device") => level = Level::Device,
            syn::Meta::Path(p) if p.is_ident("sample") => level = Level::Sample,
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
    Ok((level, category))
}
