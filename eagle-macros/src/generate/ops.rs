//! Tokens naming ops, all taken from the op spec in eagle-ir (`eagle_ir::Builtin`,
//! `eagle_ir::MathFn`, the enumerations' `ALL`, `eagle_ir::tile::INTRINSICS`): generated code
//! names a variant by its place in the declaration (`ALL[i]`), never by spelling it.

use crate::{err, R};
use proc_macro2::{Span, TokenStream as TS};
use quote::{format_ident, quote};
use syn::spanned::Spanned;
use syn::{BinOp as SynBin, Expr};

/// `span`'s place in the source with the macro's own name resolution: generated code that
/// names the macro's bindings (`__f`, the function builder) must resolve them even where the
/// user's tokens come from a `macro_rules!` macro (whose hygiene would hide them), while
/// errors still point at the user's expression.
pub(crate) fn resolved_here(span: Span) -> Span {
    span.resolved_at(Span::call_site())
}

/// Whether a kernel may call `n` as a built-in function (from the spec in eagle-ir: the
/// built-ins, the call forms of unary ops and the math library).
pub(crate) fn is_intrinsic(n: &str) -> bool {
    eagle_ir::Builtin::from_name(n).is_some()
        || math_unop(n).is_some()
        || eagle_ir::MathFn::from_name(n).is_some()
}

/// Checks a built-in call's argument count against its declared signature.
pub(crate) fn builtin_arity(b: eagle_ir::Builtin, c: &syn::ExprCall) -> R<()> {
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

/// Tokens naming variant `i` of the eagle-ir enumeration `ty` (`::eagle::ir::ty::ALL[i]`):
/// generated code names a variant by its place in the declaration, not by its spelling.
pub(crate) fn enum_tokens(ty: TS, i: usize) -> TS {
    quote!(::eagle::ir::#ty::ALL[#i])
}

/// Tokens for a binary op.
pub(crate) fn bin_op_tokens(b: eagle_ir::BinOp) -> TS {
    enum_tokens(quote!(BinOp), b.index())
}

/// Tokens for the op a kernel names by its Rust variant name (`Set`, `TwoPhase`): `parse`
/// reads the name, `index` places it, `msg` says what was expected.
pub(crate) fn choice_tokens<T: Copy>(
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
pub(crate) fn math_fn_tokens(f: eagle_ir::MathFn) -> TS {
    let i = eagle_ir::MathFn::ALL
        .iter()
        .position(|g| *g == f)
        .unwrap_or(0);
    enum_tokens(quote!(MathFn), i)
}

/// The unary math op a kernel builds by calling `n` (`sqrt(x)`, `x.sqrt()`): from
/// `eagle_ir::UnOp::call_name`, so a new math op needs no edit here.
pub(crate) fn math_unop(n: &str) -> Option<eagle_ir::UnOp> {
    eagle_ir::UnOp::ALL
        .into_iter()
        .find(|u| u.call_name() == Some(n))
}

/// The math intrinsics' names, each between `pre` and `post`, comma-separated.
pub(crate) fn math_names(pre: &str, post: &str) -> String {
    eagle_ir::UnOp::ALL
        .into_iter()
        .filter_map(|u| u.call_name())
        .chain(eagle_ir::MathFn::ALL.into_iter().map(|f| f.name()))
        .map(|n| format!("{pre}{n}{post}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn unop(n: &str) -> TS {
    let u = math_unop(n).unwrap_or(eagle_ir::UnOp::Abs);
    enum_tokens(quote!(UnOp), u.index())
}

pub(crate) fn path_name(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

pub(crate) fn reduce_tokens(e: &Expr) -> R<TS> {
    use eagle_ir::ReduceOp as O;
    choice_tokens(e, O::from_variant, O::index, quote!(ReduceOp), || {
        format!(
            "the reduce op is one of {}",
            eagle_ir::spec::one_of(O::ALL.map(O::variant))
        )
    })
}

pub(crate) fn cmp_tokens(e: &Expr) -> R<TS> {
    use eagle_ir::CmpOp as O;
    choice_tokens(e, O::from_variant, O::index, quote!(CmpOp), || {
        format!(
            "the comparison is one of {}",
            eagle_ir::spec::one_of(O::ALL.map(O::variant))
        )
    })
}

pub(crate) fn is_compound(op: &SynBin) -> bool {
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
pub(crate) fn compound_op(op: &SynBin) -> TS {
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
pub(crate) fn bin_tokens(op: &SynBin) -> R<(syn::Ident, TS)> {
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
pub(crate) fn float_const(f: &syn::LitFloat, suffix: &str, neg: bool) -> syn::Result<TS> {
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
pub(crate) fn enter_loc(sp: Span) -> TS {
    let s = sp.unwrap();
    let file = normalize_path(&s.file());
    let line = s.line() as u32;
    let column = s.column() as u32;
    quote!(__f.enter(#file, #line, #column);)
}

/// `a/b/../../c` as `c`: a module included with `#[path = "../../examples/x.rs"]` is named by
/// the path a reader finds it at.
pub(crate) fn normalize_path(p: &str) -> String {
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
