//! The binary interface between compiled device code and a runtime.
//!
//! Every compiled per-device or compute function has the C signature
//! `extern "C" fn(ctx: *mut DeviceCtx, args: *const u64) -> i32`: `args` holds one 8-byte slot
//! per parameter (a tensor's data pointer, a window's id, a scalar's bits in the low bytes, the
//! `ctx` slot unused), and the return value is a status (0 = success). A non-zero status means a
//! hook or a run-time check failed; the runtime holds the details.
//!
//! Compiled code calls the runtime only through [`Hooks`] (a table of function pointers reached
//! from the context), so an artifact does not depend on the transport that serves it.

use std::ffi::c_void;

/// Status returned on success.
pub const OK: i32 = 0;

/// Per-call device context, `#[repr(C)]`: compiled code reads `rank` at offset 0 and `hooks`
/// at offset 16.
#[repr(C)]
#[derive(Debug)]
pub struct DeviceCtx {
    /// This device's rank.
    pub rank: u64,
    /// The world size.
    pub nranks: u64,
    /// The runtime's hook table.
    pub hooks: *const Hooks,
    /// Runtime-private state for the hooks.
    pub env: *mut c_void,
}

/// Offset of [`DeviceCtx::rank`].
pub const CTX_RANK: i32 = 0;
/// Offset of [`DeviceCtx::hooks`].
pub const CTX_HOOKS: i32 = 16;

/// Signal dtype codes passed to `notify` and `wait`.
pub mod sigkind {
    /// `i32`
    pub const I32: u32 = 0;
    /// `i64`
    pub const I64: u32 = 1;
    /// `u32`
    pub const U32: u32 = 2;
    /// `u64`
    pub const U64: u32 = 3;

    /// Bytes of one signal element of `kind` (4 for `i32`/`u32`, 8 for `i64`/`u64`).
    pub fn width(kind: u32) -> usize {
        if matches!(kind, I32 | U32) {
            4
        } else {
            8
        }
    }

    /// The value of a signal element of `kind` held in the low bytes of `raw` (an `expected`
    /// argument, or the 8 bytes a transport read), exact in `i128`.
    pub fn value(raw: i64, kind: u32) -> i128 {
        match kind {
            I32 => raw as i32 as i128,
            U32 => raw as u32 as i128,
            U64 => raw as u64 as i128,
            _ => raw as i128,
        }
    }

    /// Whether `wait`'s comparison `cmp` (0 `==`, 1 `!=`, 2 `<`, 3 `<=`, 4 `>`, 5 `>=`) holds
    /// between the signal value `v` and the expected value `want`.
    pub fn holds(cmp: u32, v: i128, want: i128) -> bool {
        match cmp {
            0 => v == want,
            1 => v != want,
            2 => v < want,
            3 => v <= want,
            4 => v > want,
            _ => v >= want,
        }
    }
}

/// The runtime services compiled code calls. All return a status unless noted; offsets and
/// sizes are in bytes; `peer` is a signed rank (the runtime rejects values outside the world).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Hooks {
    /// Base address of this rank's allocation of window `win`.
    pub window_base: unsafe extern "C" fn(ctx: *mut DeviceCtx, win: u64) -> *mut u8,
    /// Copies `nbytes` from local `src` to offset `off` of window `win` on `peer`.
    pub put: unsafe extern "C" fn(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        src: *const u8,
        nbytes: u64,
    ) -> i32,
    /// Copies `nbytes` from offset `off` of window `win` on `peer` to local `dst`.
    pub get: unsafe extern "C" fn(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        dst: *mut u8,
        nbytes: u64,
    ) -> i32,
    /// Sets or adds (`op`: 0 = set, 1 = atomic add) `value` at offset `off` of signal window
    /// `win` on `peer`, with release semantics. `kind` is a [`sigkind`] code.
    pub notify: unsafe extern "C" fn(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        kind: u32,
        value: i64,
        op: u32,
    ) -> i32,
    /// Blocks until the local signal at `off` of `win` compares true (`cmp`: 0 eq, 1 ne, 2 lt,
    /// 3 le, 4 gt, 5 ge) against `expected`, with acquire semantics.
    pub wait: unsafe extern "C" fn(
        ctx: *mut DeviceCtx,
        win: u64,
        off: u64,
        kind: u32,
        expected: i64,
        cmp: u32,
    ) -> i32,
    /// All ranks arrive before any leaves.
    pub barrier: unsafe extern "C" fn(ctx: *mut DeviceCtx) -> i32,
    /// Reports a failed run-time check: `site` indexes the artifact's fault table, `a` and `b`
    /// are the offending value and its limit. Returns the (non-zero) status to propagate.
    pub fault: unsafe extern "C" fn(ctx: *mut DeviceCtx, site: u32, a: i64, b: i64) -> i32,
    /// Compiled code wrote `nbytes` at offset `off` of this rank's allocation of window `win`
    /// with a plain store (put/get/remote stores go through the hooks already). A runtime may
    /// ignore it or use it to check synchronisation (the `sim` race detector does).
    pub track_write:
        unsafe extern "C" fn(ctx: *mut DeviceCtx, win: u64, off: u64, nbytes: u64) -> i32,
}

/// Byte offset of hook `k` (in declaration order) in [`Hooks`].
pub const fn hook_offset(k: usize) -> i32 {
    (k * std::mem::size_of::<usize>()) as i32
}

/// Hook indices in [`Hooks`].
pub mod hook {
    /// `window_base`
    pub const WINDOW_BASE: usize = 0;
    /// `put`
    pub const PUT: usize = 1;
    /// `get`
    pub const GET: usize = 2;
    /// `notify`
    pub const NOTIFY: usize = 3;
    /// `wait`
    pub const WAIT: usize = 4;
    /// `barrier`
    pub const BARRIER: usize = 5;
    /// `fault`
    pub const FAULT: usize = 6;
    /// `track_write`
    pub const TRACK_WRITE: usize = 7;
}

/// A compiled entry point.
pub type EntryFn = unsafe extern "C" fn(ctx: *mut DeviceCtx, args: *const u64) -> i32;
