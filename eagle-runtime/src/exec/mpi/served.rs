//! The MPI transport's hook bodies as `exec::traced` wraps them ([`MpiHooks`]), and the
//! gathering of every rank's timeline onto rank 0 ([`gather_trace`]).

use super::{
    allgather_bytes, barrier_body, digests, env, get_body, get_view_body, notify_body, put_body,
    timeout, wait_body, world,
};
use crate::exec::traced::Served;
use crate::trace::{Event, Trace};
use eagle_codegen::abi::DeviceCtx;
use eagle_codegen::Artifact;

/// The MPI hook bodies, wrapped by `exec::traced`.
pub(crate) struct MpiHooks;

// SAFETY: `ctx.env` of every call is the `MpiEnv` of `device_ctx`.
unsafe impl Served for MpiHooks {
    unsafe fn tracer<'r>(ctx: *mut DeviceCtx) -> (Option<Trace>, &'r Artifact, usize) {
        let e = unsafe { env::<'r>(ctx) };
        (e.trace.clone(), e.art, e.rank)
    }
    unsafe fn calls<'r>(ctx: *mut DeviceCtx) -> &'r mut Vec<(u32, u64)> {
        &mut unsafe { env::<'r>(ctx) }.calls
    }
    crate::exec::traced::forward_bodies!();
}

/// Every rank's events, on rank 0 (`None` on the others): a collective call, made by every rank
/// at the same point. Each rank's clock is shifted so that the end of the length exchange is
/// the same instant on every rank (an error of one message latency).
pub(crate) fn gather_trace(t: &Trace) -> Option<Vec<Event>> {
    let (rank, size) = world();
    let body = crate::trace::encode(&t.events());
    let counts: Vec<usize> = digests(body.len() as u64 + 8, timeout())
        .into_iter()
        .map(|l| l as usize)
        .collect();
    let sync = t.now();
    let mut mine = sync.to_le_bytes().to_vec();
    mine.extend_from_slice(&body);
    let all = allgather_bytes(&mine, &counts);
    if rank != 0 {
        return None;
    }
    let clock = |c: &[u8]| u64::from_le_bytes(c[..8].try_into().unwrap_or([0; 8])) as i64;
    let sync0 = sync as i64;
    let mut shifted: Vec<(i64, Event)> = Vec::new();
    let mut at = 0;
    for &n in counts.iter().take(size) {
        let Some(chunk) = all.get(at..at + n).filter(|c| c.len() >= 8) else {
            break;
        };
        at += n;
        let shift = sync0 - clock(chunk);
        for e in crate::trace::decode(&chunk[8..]) {
            shifted.push((e.start_ns as i64 + shift, e));
        }
    }
    // A rank whose clock started later lands before rank 0's origin: move the whole timeline,
    // so that no event is clipped and the order on every track is kept.
    let first = shifted.iter().map(|(t, _)| *t).min().unwrap_or(0).min(0);
    Some(
        shifted
            .into_iter()
            .map(|(t, mut e)| {
                e.start_ns = (t - first) as u64;
                e
            })
            .collect(),
    )
}
