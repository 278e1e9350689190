//! Procedural macros of eagle: `#[eagle::kernel]`, `#[eagle::host]` and `dynamic!`.
//!
//! An annotated function is replaced by a unit struct of the same name that implements
//! `eagle::ir::EagleFn`: its `build` function re-creates the body as IR through
//! `eagle::ir::FunctionBuilder` calls (the CubeCL shape: an IR-building `expand` next to a typed
//! `launch`). Rust constants in scope (`SIZE`, `NR`) are evaluated when the IR is built.
//! Every construct the DSL does not support is a `compile_error!` at its own span that names
//! what is supported instead.

mod generate;
mod parse;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TS};
use quote::quote;
use syn::spanned::Spanned;

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
    match parse::attr::kernel_attr(TS::from(attr)) {
        Ok(a) => generate::expand(a, item),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Marks a host orchestrator: it allocates window buffers and dispatches per-device programs
/// with `device = r`. It gets a typed `launch` method.
#[proc_macro_attribute]
pub fn host(attr: TokenStream, item: TokenStream) -> TokenStream {
    match parse::attr::host_attr(TS::from(attr)) {
        Ok(a) => generate::expand(a, item),
        Err(e) => e.to_compile_error().into(),
    }
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
