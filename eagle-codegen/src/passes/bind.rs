//! Binding a function's value types: every symbolic dim of every value's type replaced by its
//! value, with the errors of a dim without one and of a buffer or tile past the target's
//! limits. Part of [`super::specialize`].

use super::specialize::{Bindings, Limits};
use crate::error::SpecializeError;
use eagle_ir::{Dim, Function, Shape, Type, Value};

/// Replaces every dim of every value type of `f` by its value under `b`.
///
/// # Errors
/// [`SpecializeError::UnboundDim`] or [`SpecializeError::DerivedDim`] naming the argument (or
/// the value's type) and the dim; [`SpecializeError::TooLarge`] for a tensor, window or tile
/// larger than `limits` allow.
pub(super) fn bind_types(
    f: &mut Function,
    b: &Bindings,
    limits: &Limits,
) -> Result<(), SpecializeError> {
    let params: eagle_ir::entity::SecondaryMap<Value, String> =
        f.params.iter().map(|p| (p.value, p.name.clone())).collect();
    for (v, t) in f.values.entries_mut() {
        let mut missing: Option<(usize, eagle_ir::DimError, String)> = None;
        let mut idx = 0usize;
        let nt = t.map_dims(&mut |d| {
            let r = match d.eval(&|s| b.dims.get(s).copied()) {
                Ok(v) => Dim::Const(v),
                Err(e) => {
                    missing.get_or_insert((idx, e, d.to_string()));
                    d.clone()
                }
            };
            idx += 1;
            r
        });
        if let Some((dim, e, expr)) = missing {
            let place = match params.get(v) {
                Some(p) => format!("argument `{p}`, dimension {dim}"),
                None => format!("a value of type `{t}`"),
            };
            return Err(derived_dim_error(&f.name, place, expr, e));
        }
        let bytes = nt
            .shape()
            .and_then(Shape::numel)
            .and_then(|n| n.checked_mul(nt.dtype().map_or(1, |d| d.size() as u64)))
            .unwrap_or(u64::MAX);
        let (what, limit, fix) = match nt {
            Type::Tile(..) => (
                "a tile",
                limits.max_tile_bytes,
                "tiles are small on-chip blocks: loop over smaller tiles",
            ),
            _ => (
                "a tensor or window",
                limits.max_buffer_bytes,
                "use smaller extents",
            ),
        };
        if nt.shape().is_some() && bytes > limit {
            return Err(SpecializeError::TooLarge {
                function: f.name.clone(),
                what: what.into(),
                ty: nt.to_string(),
                bytes,
                limit,
                fix: fix.into(),
            });
        }
        *t = nt;
    }
    Ok(())
}

/// The error of a dim without a value: an unbound symbol, or a derived dim that does not hold
/// (an inexact division, a subtraction below zero).
pub(super) fn derived_dim_error(
    function: &str,
    place: String,
    expr: String,
    e: eagle_ir::DimError,
) -> SpecializeError {
    match e {
        eagle_ir::DimError::Unbound(name) => SpecializeError::UnboundDim {
            function: function.to_string(),
            place,
            name,
        },
        e => SpecializeError::DerivedDim {
            function: function.to_string(),
            place,
            expr,
            message: e.to_string(),
        },
    }
}
