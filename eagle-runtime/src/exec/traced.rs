//! The communication hooks of an executor, wrapped once for every executor so that a run that
//! records a timeline ([`crate::trace`]) gets a span per put, get, notify, wait and barrier and
//! one per compute kernel call. An executor implements [`Served`] (its hook bodies and where its
//! per-call state lives) and puts `put::<E>`, `get::<E>`, ... in its [`Hooks`] table.
//!
//! [`Hooks`]: eagle_codegen::abi::Hooks

use crate::trace::{hook_span, ArgValue, Cat, Trace};
use eagle_codegen::abi::{sigkind, DeviceCtx};
use eagle_codegen::Artifact;

/// An executor's hook bodies and the per-call state a timeline needs.
///
/// # Safety
/// Every function is called with the `ctx` the executor built for the call in flight, as its
/// own hooks are.
pub(crate) unsafe trait Served {
    /// The run's recorder (when it records), its artifact and this rank.
    unsafe fn tracer<'r>(ctx: *mut DeviceCtx) -> (Option<Trace>, &'r Artifact, usize);
    /// The compute kernel calls under way on this call's rank: site and start.
    unsafe fn calls<'r>(ctx: *mut DeviceCtx) -> &'r mut Vec<(u32, u64)>;
    /// Records that this rank notified signal `off` of window `win` on `peer` (for a wait's
    /// `notified_by`); nothing where the executor cannot tell the waiter.
    unsafe fn note_notify(_ctx: *mut DeviceCtx, _win: u64, _peer: i64, _off: u64) {}
    /// The rank that last notified this rank's signal `off` of window `win`, where known.
    unsafe fn notified_by(_ctx: *mut DeviceCtx, _win: u64, _off: u64) -> Option<usize> {
        None
    }
    /// `Hooks::put`.
    unsafe fn put(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        src: *const u8,
        n: u64,
        site: u32,
    ) -> i32;
    /// `Hooks::get`.
    unsafe fn get(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        dst: *mut u8,
        n: u64,
        site: u32,
    ) -> i32;
    /// `Hooks::get_view`.
    unsafe fn get_view(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        scratch: *mut u8,
        n: u64,
        site: u32,
    ) -> *const u8;
    /// `Hooks::notify`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn notify(
        ctx: *mut DeviceCtx,
        win: u64,
        peer: i64,
        off: u64,
        kind: u32,
        value: i64,
        op: u32,
        site: u32,
    ) -> i32;
    /// `Hooks::wait`.
    unsafe fn wait(
        ctx: *mut DeviceCtx,
        win: u64,
        off: u64,
        kind: u32,
        expected: i64,
        cmp: u32,
        site: u32,
    ) -> i32;
    /// `Hooks::barrier`.
    unsafe fn barrier(ctx: *mut DeviceCtx, site: u32) -> i32;
}

/// The hook methods of a [`Served`] impl, each forwarding to the executor's body function
/// of the same name with `_body` (`put_body`, `get_body`, `get_view_body`, `notify_body`,
/// `wait_body`, `barrier_body`), resolved where the macro is used.
macro_rules! forward_bodies {
    () => {
        unsafe fn put(
            ctx: *mut DeviceCtx,
            win: u64,
            peer: i64,
            off: u64,
            src: *const u8,
            n: u64,
            site: u32,
        ) -> i32 {
            unsafe { put_body(ctx, win, peer, off, src, n, site) }
        }
        unsafe fn get(
            ctx: *mut DeviceCtx,
            win: u64,
            peer: i64,
            off: u64,
            dst: *mut u8,
            n: u64,
            site: u32,
        ) -> i32 {
            unsafe { get_body(ctx, win, peer, off, dst, n, site) }
        }
        unsafe fn get_view(
            ctx: *mut DeviceCtx,
            win: u64,
            peer: i64,
            off: u64,
            scratch: *mut u8,
            n: u64,
            site: u32,
        ) -> *const u8 {
            unsafe { get_view_body(ctx, win, peer, off, scratch, n, site) }
        }
        unsafe fn notify(
            ctx: *mut DeviceCtx,
            win: u64,
            peer: i64,
            off: u64,
            kind: u32,
            value: i64,
            op: u32,
            site: u32,
        ) -> i32 {
            unsafe { notify_body(ctx, win, peer, off, kind, value, op, site) }
        }
        unsafe fn wait(
            ctx: *mut DeviceCtx,
            win: u64,
            off: u64,
            kind: u32,
            expected: i64,
            cmp: u32,
            site: u32,
        ) -> i32 {
            unsafe { wait_body(ctx, win, off, kind, expected, cmp, site) }
        }
        unsafe fn barrier(ctx: *mut DeviceCtx, site: u32) -> i32 {
            unsafe { barrier_body(ctx, site) }
        }
    };
}
pub(crate) use forward_bodies;

fn int(v: impl TryInto<i64>) -> ArgValue {
    ArgValue::Int(v.try_into().unwrap_or(i64::MAX))
}

fn moved(peer: i64, win: u64, n: u64) -> Vec<(&'static str, ArgValue)> {
    vec![("peer", int(peer)), ("window", int(win)), ("bytes", int(n))]
}

/// A signal as a timeline names it: window and element.
fn signal_text(win: u64, off: u64, kind: u32) -> String {
    format!(
        "window #{win} element {}",
        off / sigkind::width(kind) as u64
    )
}

const CMP_TEXT: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];

pub(crate) unsafe extern "C" fn put<E: Served>(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    src: *const u8,
    n: u64,
    site: u32,
) -> i32 {
    let (tr, art, rank) = unsafe { E::tracer(ctx) };
    let body = || unsafe { E::put(ctx, win, peer, off, src, n, site) };
    hook_span(tr, art, rank, Cat::Put, site, body, |_| moved(peer, win, n))
}

pub(crate) unsafe extern "C" fn get<E: Served>(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    dst: *mut u8,
    n: u64,
    site: u32,
) -> i32 {
    let (tr, art, rank) = unsafe { E::tracer(ctx) };
    let body = || unsafe { E::get(ctx, win, peer, off, dst, n, site) };
    hook_span(tr, art, rank, Cat::Get, site, body, |_| moved(peer, win, n))
}

pub(crate) unsafe extern "C" fn get_view<E: Served>(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    scratch: *mut u8,
    n: u64,
    site: u32,
) -> *const u8 {
    let (tr, art, rank) = unsafe { E::tracer(ctx) };
    let body = || unsafe { E::get_view(ctx, win, peer, off, scratch, n, site) };
    hook_span(tr, art, rank, Cat::Get, site, body, |_| moved(peer, win, n))
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn notify<E: Served>(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    kind: u32,
    value: i64,
    op: u32,
    site: u32,
) -> i32 {
    let (tr, art, rank) = unsafe { E::tracer(ctx) };
    if tr.is_some() {
        unsafe { E::note_notify(ctx, win, peer, off) };
    }
    let body = || unsafe { E::notify(ctx, win, peer, off, kind, value, op, site) };
    hook_span(tr, art, rank, Cat::Notify, site, body, |_| {
        vec![
            ("peer", int(peer)),
            ("signal", ArgValue::Text(signal_text(win, off, kind))),
            ("value", int(value)),
            ("add", int(op)),
        ]
    })
}

pub(crate) unsafe extern "C" fn wait<E: Served>(
    ctx: *mut DeviceCtx,
    win: u64,
    off: u64,
    kind: u32,
    expected: i64,
    cmp: u32,
    site: u32,
) -> i32 {
    let (tr, art, rank) = unsafe { E::tracer(ctx) };
    let body = || unsafe { E::wait(ctx, win, off, kind, expected, cmp, site) };
    hook_span(tr, art, rank, Cat::Wait, site, body, |waited| {
        let until = CMP_TEXT.get(cmp as usize).unwrap_or(&"?");
        let mut a = vec![
            ("signal", ArgValue::Text(signal_text(win, off, kind))),
            ("until", ArgValue::Text(format!("{until} {expected}"))),
            ("waited_ns", int(waited)),
        ];
        if let Some(by) = unsafe { E::notified_by(ctx, win, off) } {
            a.push(("notified_by", int(by)));
        }
        a
    })
}

pub(crate) unsafe extern "C" fn barrier<E: Served>(ctx: *mut DeviceCtx, site: u32) -> i32 {
    let (tr, art, rank) = unsafe { E::tracer(ctx) };
    let body = || unsafe { E::barrier(ctx, site) };
    hook_span(tr, art, rank, Cat::Barrier, site, body, |waited| {
        vec![("waited_ns", int(waited))]
    })
}

pub(crate) unsafe extern "C" fn trace<E: Served>(
    ctx: *mut DeviceCtx,
    site: u32,
    phase: u32,
) -> i32 {
    let (tr, art, rank) = unsafe { E::tracer(ctx) };
    let calls = unsafe { E::calls(ctx) };
    crate::trace::kernel_phase(tr.as_ref(), art, rank, calls, site, phase);
    0
}
