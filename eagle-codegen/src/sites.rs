//! The messages of run-time checks, shared by every backend so that a failure reads the same on
//! the CPU and on a GPU. `{a}` and `{b}` are filled in with the offending value and its limit
//! when the check fails. `op` is the op as [`name_op`] names it.

/// A site's message with its `{a}` (the offending value) and `{b}` (its limit) filled in.
pub fn fill(message: &str, a: i64, b: i64) -> String {
    message
        .replace("{a}", &a.to_string())
        .replace("{b}", &b.to_string())
}

/// How a site names its op: ``op `%5 = div %3, %4 : i32` (at src/heat.rs:42:17)`` (the
/// location when the op has one).
pub fn name_op(text: &str, loc: Option<&eagle_ir::Loc>) -> String {
    format!("op `{text}`{}", eagle_ir::at(loc))
}

/// An element index (tile extent 1) or a tile offset past the end of dim `dim`.
pub fn offset(function: &str, op: &str, dim: usize, tile: u64, extent: u64) -> String {
    if tile == 1 {
        format!(
            "function `{function}`, {op}: index {{a}} in dim {dim} is out of range; dim {dim} has {extent} elements, so the largest index is {{b}}"
        )
    } else {
        format!(
            "function `{function}`, {op}: the offset in dim {dim} is {{a}} but the largest offset that fits a tile of extent {tile} in extent {extent} is {{b}}"
        )
    }
}

/// A slice index outside dim 0.
pub fn slice_index(function: &str, op: &str) -> String {
    format!("function `{function}`, {op}: index {{a}} is outside 0..{{b}}")
}

/// A `trap_if` of kind `kind` (its message, [`eagle_ir::Trap::message`], with the op's two
/// values for `{a}` and `{b}`).
pub fn trap(function: &str, op: &str, kind: eagle_ir::Trap) -> String {
    format!("function `{function}`, {op}: {}", kind.message())
}

/// A subview of `len` rows starting past the last start that fits in `extent` rows.
pub fn subview_offset(function: &str, op: &str, len: u64, extent: u64) -> String {
    format!(
        "function `{function}`, {op}: offset {{a}} is past the last start {{b}} that fits {len} rows in extent {extent}"
    )
}

/// A `gather` index outside its axis of `extent` elements (`{b}` is the extent; every backend
/// reports the same text, so the index itself is not in it).
pub fn gather_index(function: &str, op: &str, axis: usize, extent: u64) -> String {
    index_outside("gather", "source", function, op, axis, extent)
}

/// A `scatter`/`scatter_add` index outside its axis (as [`gather_index`]).
pub fn scatter_index(function: &str, op: &str, add: bool, axis: usize, extent: u64) -> String {
    let name = if add { "scatter_add" } else { "scatter" };
    index_outside(name, "base", function, op, axis, extent)
}

/// An index of `name` outside 0..`extent`, the extent of axis `axis` of its `tile` (the tile it
/// indexes: a gather's source, a scatter's base).
fn index_outside(
    name: &str,
    tile: &str,
    function: &str,
    op: &str,
    axis: usize,
    extent: u64,
) -> String {
    format!(
        "function `{function}`, {op}: an index of `{name}` is outside 0..{extent}, the extent of the {tile}'s axis {axis}"
    )
}

/// A `while` loop that would start a turn past its cap (`{b}`, the cap).
pub fn while_cap(function: &str, op: &str) -> String {
    format!(
        "function `{function}`, {op}: the `while` loop would run more than {{b}} turns, its cap; if it is meant to run longer, raise the cap of the function that holds the loop: `while_cap = N` in its attribute (`#[eagle::kernel(device, while_cap = N)]` for a per-device program, `#[eagle::kernel(while_cap = N)]` for a compute kernel, `#[eagle::host(while_cap = N)]` for a host function)"
    )
}

/// Integer `/` or `%` by zero.
pub fn division_by_zero(function: &str, op: &str) -> String {
    format!("function `{function}`, {op}: integer division by zero")
}

/// A peer rank outside the world (checked in device code by backends without a runtime hook
/// for it; `{b}` is the world size).
pub fn peer(function: &str, op: &str) -> String {
    format!("function `{function}`, {op}: peer {{a}} is outside the world 0..{{b}}")
}

/// Why a backend refuses `kind` (op text `op`): one a specialized device function never holds.
/// `world_size`/`nranks` fold to P and the collectives are lowered by `specialize`; dispatches
/// and window-buffer ops belong to the host function. Both backends report these with this
/// one message.
pub fn not_specialized(kind: &eagle_ir::OpKind, op: &str) -> String {
    use eagle_ir::OpKind;
    if matches!(kind, OpKind::WorldSize | OpKind::NRanks(_)) {
        "world size left unfolded; specialize the module first".to_string()
    } else if kind.info().collective {
        format!("collective `{op}` was not lowered; specialize the module first")
    } else {
        format!("host op `{op}` in a device function")
    }
}
