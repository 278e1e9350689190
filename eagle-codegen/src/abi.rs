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
    /// Non-zero while the runtime records a timeline: compiled code then reports each compute
    /// kernel call to [`Hooks::trace`] (a load and a branch per call otherwise).
    pub trace: u64,
}

/// Offset of [`DeviceCtx::rank`].
pub const CTX_RANK: i32 = std::mem::offset_of!(DeviceCtx, rank) as i32;
/// Offset of [`DeviceCtx::hooks`].
pub const CTX_HOOKS: i32 = std::mem::offset_of!(DeviceCtx, hooks) as i32;
/// Offset of [`DeviceCtx::trace`].
pub const CTX_TRACE: i32 = std::mem::offset_of!(DeviceCtx, trace) as i32;

/// Samples per row of a mapreduce: partials are formed per row of this many samples and rows
/// are combined in row order, whatever runs them (the plan's threads and ranks, the CUDA
/// `__rows` entries). design.md, "Determinism".
pub const ROW: usize = 32;

/// The dtype of a signal element, as `notify` and `wait` pass it to the hooks (`kind`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigKind {
    /// `i32`
    I32 = 0,
    /// `i64` (and `index`)
    I64 = 1,
    /// `u32`
    U32 = 2,
    /// `u64`
    U64 = 3,
}

impl SigKind {
    /// The kind of a signal window of dtype `d` (`index` and any other 8-byte integer: `I64`).
    pub fn of(d: eagle_ir::DType) -> SigKind {
        match d {
            eagle_ir::DType::I32 => SigKind::I32,
            eagle_ir::DType::U32 => SigKind::U32,
            eagle_ir::DType::U64 => SigKind::U64,
            _ => SigKind::I64,
        }
    }

    /// The kind of the code `k` a hook received; an unknown code reads as `I64`.
    pub fn decode(k: u32) -> SigKind {
        match k {
            0 => SigKind::I32,
            2 => SigKind::U32,
            3 => SigKind::U64,
            _ => SigKind::I64,
        }
    }

    /// Bytes of one element (4 for `i32`/`u32`, 8 for `i64`/`u64`).
    pub fn width(self) -> usize {
        match self {
            SigKind::I32 | SigKind::U32 => 4,
            SigKind::I64 | SigKind::U64 => 8,
        }
    }

    /// The value of an element held in the low bytes of `raw` (an `expected` argument, or
    /// the 8 bytes a transport read), exact in `i128`.
    pub fn value(self, raw: i64) -> i128 {
        match self {
            SigKind::I32 => raw as i32 as i128,
            SigKind::U32 => raw as u32 as i128,
            SigKind::U64 => raw as u64 as i128,
            SigKind::I64 => raw as i128,
        }
    }
}

/// The code `wait` passes for comparison `c` (`cmp`): the declaration order of
/// [`eagle_ir::CmpOp`], 0 `==`, 1 `!=`, 2 `<`, 3 `<=`, 4 `>`, 5 `>=`; the CUDA prelude's
/// `EG_CMP_*` are generated from it.
pub fn cmp_code(c: eagle_ir::CmpOp) -> u32 {
    c as u32
}

/// The comparison of code `k` ([`cmp_code`]); an unknown code reads as `>=`.
pub fn decode_cmp(k: u32) -> eagle_ir::CmpOp {
    eagle_ir::CmpOp::ALL
        .get(k as usize)
        .copied()
        .unwrap_or(eagle_ir::CmpOp::Ge)
}

/// The code `notify` passes for `op` (0 set, 1 atomic add).
pub fn notify_code(op: eagle_ir::NotifyOp) -> u32 {
    op as u32
}

/// Signal dtype codes passed to `notify` and `wait` (the [`SigKind`] discriminants), and the
/// rules every runtime applies to them.
pub mod sigkind {
    use super::SigKind;
    /// `i32`
    pub const I32: u32 = SigKind::I32 as u32;
    /// `i64`
    pub const I64: u32 = SigKind::I64 as u32;
    /// `u32`
    pub const U32: u32 = SigKind::U32 as u32;
    /// `u64`
    pub const U64: u32 = SigKind::U64 as u32;

    /// Bytes of one signal element of `kind` ([`SigKind::width`]).
    pub fn width(kind: u32) -> usize {
        SigKind::decode(kind).width()
    }

    /// The value of a signal element of `kind` held in the low bytes of `raw`
    /// ([`SigKind::value`]).
    pub fn value(raw: i64, kind: u32) -> i128 {
        SigKind::decode(kind).value(raw)
    }

    /// Whether `wait`'s comparison of code `cmp` ([`super::cmp_code`]) holds between the
    /// signal value `v` and the expected value `want`.
    pub fn holds(cmp: u32, v: i128, want: i128) -> bool {
        super::decode_cmp(cmp).eval(v, want)
    }
}

/// The record each rank's CUDA code reads (`eg_rt` in the CUDA C prelude), laid out by the
/// host in pinned, mapped memory; addresses are device addresses. The prelude's layout is
/// checked against this one by [`c_layout_checks`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CudaRt {
    /// This rank.
    pub rank: i64,
    /// The world size.
    pub nranks: i64,
    /// Address of this rank's [`CudaErr`].
    pub err: u64,
    /// Address of the run's abort flag (`int`).
    pub abort: u64,
    /// Address of the run's arrival counters (`unsigned int` per rank).
    pub arrive: u64,
    /// The wait timeout, in nanoseconds.
    pub timeout_ns: u64,
}

/// A rank's first failure (`eg_err` in the CUDA C prelude): `status` non-zero once it
/// failed, `site` the fault-table index (or a negative `EG_*` code), `a`/`b` the values.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CudaErr {
    /// Non-zero once the rank failed.
    pub status: i32,
    /// The site index, or `EG_WAIT_TIMEOUT` (-1), `EG_BARRIER_TIMEOUT` (-2), `EG_ABORTED` (-3).
    pub site: i32,
    /// The rank that failed.
    pub rank: i32,
    /// Padding.
    pub pad: i32,
    /// The offending value.
    pub a: i64,
    /// Its limit (or the expected value).
    pub b: i64,
}

/// The `#define`s of the binary interface the CUDA prelude uses (`EG_CMP_EQ` ... from
/// [`cmp_code`]), generated here so the C text cannot drift from the Rust codes.
pub fn c_defines() -> String {
    let mut s =
        String::from("// wait comparison codes, generated from eagle_codegen::abi::cmp_code\n");
    for c in eagle_ir::CmpOp::ALL {
        s.push_str(&format!(
            "#define EG_CMP_{} {}\n",
            c.name().to_ascii_uppercase(),
            cmp_code(c)
        ));
    }
    s
}

/// C++ `static_assert`s that the CUDA prelude's `eg_rt` and `eg_err` have the layouts of
/// [`CudaRt`] and [`CudaErr`]: a mismatch fails the CUDA C compile, not the run. The sizes
/// are checked by every compiler; the field offsets (`__builtin_offsetof`, which NVRTC lacks)
/// by the host C++ compiler of the CUDA emulation, which builds the same source.
pub fn c_layout_checks() -> String {
    use std::mem::{offset_of, size_of};
    let mut s = String::from("// layout checks, generated from eagle_codegen::abi\n");
    s.push_str("#ifdef EG_HOST_EMULATION\n");
    let mut check = |ty: &str, field: &str, off: usize| {
        s.push_str(&format!(
            "static_assert(__builtin_offsetof({ty}, {field}) == {off}, \"{ty}.{field} is not where eagle_codegen::abi puts it\");\n"
        ));
    };
    check("eg_rt", "rank", offset_of!(CudaRt, rank));
    check("eg_rt", "nranks", offset_of!(CudaRt, nranks));
    check("eg_rt", "err", offset_of!(CudaRt, err));
    check("eg_rt", "abort", offset_of!(CudaRt, abort));
    check("eg_rt", "arrive", offset_of!(CudaRt, arrive));
    check("eg_rt", "timeout_ns", offset_of!(CudaRt, timeout_ns));
    check("eg_err", "status", offset_of!(CudaErr, status));
    check("eg_err", "site", offset_of!(CudaErr, site));
    check("eg_err", "rank", offset_of!(CudaErr, rank));
    check("eg_err", "a", offset_of!(CudaErr, a));
    check("eg_err", "b", offset_of!(CudaErr, b));
    s.push_str("#endif\n");
    s.push_str(&format!(
        "static_assert(sizeof(eg_rt) == {} && sizeof(eg_err) == {}, \"eg_rt/eg_err sizes\");\n",
        size_of::<CudaRt>(),
        size_of::<CudaErr>()
    ));
    s
}

/// The runtime services compiled code calls. All return a status unless noted; offsets and
/// sizes are in bytes; `peer` is a signed rank (the runtime rejects values outside the world).
/// `site` (put, get, notify, wait, barrier) indexes the artifact's site table, whose entry
/// names the op and its source location (`Artifact::site_text`): the runtime's deadlock
/// reports, races and timeouts name it.
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
        site: u32,
    ) -> i32,
    /// Copies `nbytes` from offset `off` of window `win` on `peer` to local `dst`.
    pub get: unsafe extern "C" fn(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        dst: *mut u8,
        nbytes: u64,
        site: u32,
    ) -> i32,
    /// Makes `nbytes` at offset `off` of window `win` on `peer` readable at the returned
    /// address, for a tile that compiled code reads in place before this rank's next op that
    /// may write memory or synchronise: a runtime that maps the peer's allocation into this
    /// address space (`sim`) returns its address there, with no copy; another (`mpi`) copies
    /// the bytes into `scratch` (`nbytes` of this rank's memory) as `get` does and returns
    /// `scratch`. The checks are `get`'s. Returns null on failure, with the error recorded.
    pub get_view: unsafe extern "C" fn(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        scratch: *mut u8,
        nbytes: u64,
        site: u32,
    ) -> *const u8,
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
        site: u32,
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
        site: u32,
    ) -> i32,
    /// All ranks arrive before any leaves.
    pub barrier: unsafe extern "C" fn(ctx: *mut DeviceCtx, site: u32) -> i32,
    /// Reports a failed run-time check: `site` indexes the artifact's fault table, `a` and `b`
    /// are the offending value and its limit. Returns the (non-zero) status to propagate.
    pub fault: unsafe extern "C" fn(ctx: *mut DeviceCtx, site: u32, a: i64, b: i64) -> i32,
    /// Compiled code wrote `nbytes` at offset `off` of this rank's allocation of window `win`
    /// with a plain store (put/get/remote stores go through the hooks already). A runtime may
    /// ignore it or use it to check synchronisation (the `sim` race detector does).
    pub track_write:
        unsafe extern "C" fn(ctx: *mut DeviceCtx, win: u64, off: u64, nbytes: u64) -> i32,
    /// Compiled code reads `nbytes` at offset `off` of this rank's allocation of window `win`
    /// with a plain load (a tile `load` or an element read), at op `site`. A runtime may ignore
    /// it or check the read against the last write (the `sim` race detector does: a peer's
    /// `put` or `remote_store` must be ordered before it by a notify -> wait or a barrier).
    pub track_read: unsafe extern "C" fn(
        ctx: *mut DeviceCtx,
        win: u64,
        off: u64,
        nbytes: u64,
        site: u32,
    ) -> i32,
    /// A compute kernel call starts (`phase` 0) or returns (`phase` 1) at call `site` (whose
    /// entry in the artifact's site table names the call); called only while
    /// [`DeviceCtx::trace`] is non-zero. Returns 0.
    pub trace: unsafe extern "C" fn(ctx: *mut DeviceCtx, site: u32, phase: u32) -> i32,
}

/// Byte offsets of the hooks in [`Hooks`] (what compiled code loads through `ctx.hooks`).
pub mod hook {
    use super::Hooks;
    use std::mem::offset_of;
    /// `window_base`
    pub const WINDOW_BASE: i32 = offset_of!(Hooks, window_base) as i32;
    /// `put`
    pub const PUT: i32 = offset_of!(Hooks, put) as i32;
    /// `get`
    pub const GET: i32 = offset_of!(Hooks, get) as i32;
    /// `get_view`
    pub const GET_VIEW: i32 = offset_of!(Hooks, get_view) as i32;
    /// `notify`
    pub const NOTIFY: i32 = offset_of!(Hooks, notify) as i32;
    /// `wait`
    pub const WAIT: i32 = offset_of!(Hooks, wait) as i32;
    /// `barrier`
    pub const BARRIER: i32 = offset_of!(Hooks, barrier) as i32;
    /// `fault`
    pub const FAULT: i32 = offset_of!(Hooks, fault) as i32;
    /// `track_write`
    pub const TRACK_WRITE: i32 = offset_of!(Hooks, track_write) as i32;
    /// `track_read`
    pub const TRACK_READ: i32 = offset_of!(Hooks, track_read) as i32;
    /// `trace`
    pub const TRACE: i32 = offset_of!(Hooks, trace) as i32;
}

/// A compiled entry point.
pub type EntryFn = unsafe extern "C" fn(ctx: *mut DeviceCtx, args: *const u64) -> i32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_c_text_is_generated_from_the_rust_layout() {
        let defs = c_defines();
        assert!(defs.contains("#define EG_CMP_EQ 0\n"), "{defs}");
        assert!(defs.contains("#define EG_CMP_GE 5\n"), "{defs}");
        let checks = c_layout_checks();
        assert!(
            checks.contains("__builtin_offsetof(eg_rt, timeout_ns) == 40"),
            "{checks}"
        );
        assert!(
            checks.contains("__builtin_offsetof(eg_err, a) == 16"),
            "{checks}"
        );
        assert!(checks.contains("sizeof(eg_rt) == 48 && sizeof(eg_err) == 32"));
        assert_eq!(
            (
                hook::WINDOW_BASE,
                hook::GET_VIEW,
                hook::TRACK_WRITE,
                hook::TRACK_READ,
                hook::TRACE
            ),
            (0, 24, 64, 72, 80)
        );
        assert_eq!((CTX_RANK, CTX_HOOKS, CTX_TRACE), (0, 16, 32));
        for (k, c) in eagle_ir::CmpOp::ALL.into_iter().enumerate() {
            assert_eq!(decode_cmp(cmp_code(c)), c);
            assert_eq!(cmp_code(c), k as u32);
        }
        assert_eq!(SigKind::of(eagle_ir::DType::Index), SigKind::I64);
        assert_eq!(SigKind::decode(SigKind::U32 as u32).width(), 4);
    }
}
