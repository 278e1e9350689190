//! The `sim` platform's world: per-rank window memory, signals and barrier, served to compiled
//! code through the [`Hooks`] table.

pub(crate) mod launch;
pub(crate) mod race;
pub(crate) mod tasks;
use crate::exec::traced::{self, Served};
use crate::race::RaceReport;
use crate::trace::Trace;
use crate::Cause;
use eagle_codegen::abi::{sigkind, DeviceCtx, Hooks};
use eagle_codegen::Artifact;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How many times a waiting rank yields before it blocks on the condition variable.
const SPIN_YIELDS: usize = 64;

/// Most devices a simulated world offers (one OS thread each while a run is in flight; the
/// threads are kept for later runs). Steps 01-07 run at this size (docs/performance.md).
pub const MAX_DEVICES: usize = 4096;

/// One window buffer: an allocation of `bytes` per rank.
pub(crate) struct WindowMem {
    pub(crate) bytes: usize,
    /// Element size in bytes (for reports in elements).
    pub(crate) elem: usize,
    pub(crate) desc: String,
    mem: Vec<Vec<u64>>,
    ptrs: Vec<usize>,
}

/// What slot `e` of the collectives' own signal window (the parameter
/// [`eagle_codegen::lower::SIGNALS_PARAM`], laid out in `docs/collectives.md`) stands for, for a
/// deadlock report; `None` for any other window.
fn collective_slot(w: &WindowMem, e: usize, p: usize) -> Option<String> {
    let name = format!("`{}`", eagle_codegen::lower::SIGNALS_PARAM);
    if !w.desc.contains(&name) {
        return None;
    }
    Some(match e / p.max(1) {
        0 => "a step of a ring or two-phase allreduce".into(),
        1 => format!(
            "world rank {}'s step of a ring or two-phase allreduce within a rank group",
            e - p
        ),
        _ => format!(
            "world rank {} to arrive at a barrier of their rank group",
            e.saturating_sub(3 * p)
        ),
    })
}

impl WindowMem {
    pub(crate) fn new(p: usize, bytes: usize, elem: usize, desc: String) -> WindowMem {
        let mut mem: Vec<Vec<u64>> = (0..p)
            .map(|_| {
                let mut m = vec![0u64; bytes.div_ceil(8).max(1)];
                // Device memory is ready when allocated: touch every page now (the zeroed
                // allocation is lazy), so the first access inside a kernel does not fault.
                for w in m.iter_mut().step_by(512) {
                    // SAFETY: `w` is a valid, aligned element of `m`.
                    unsafe { std::ptr::write_volatile(w, 0) };
                }
                m
            })
            .collect();
        let ptrs = mem.iter_mut().map(|m| m.as_mut_ptr() as usize).collect();
        WindowMem {
            bytes,
            elem: elem.max(1),
            desc,
            mem,
            ptrs,
        }
    }
    fn ptr(&self, rank: usize) -> *mut u8 {
        let _ = &self.mem;
        self.ptrs[rank] as *mut u8
    }
}

/// What a rank blocks on: a signal to satisfy a comparison, a barrier generation to end, or
/// (a task) nothing but its turn.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Blocked {
    Wait {
        win: usize,
        off: usize,
        kind: u32,
        expected: i64,
        cmp: u32,
        /// The artifact's site naming the `wait` op.
        site: u32,
    },
    Barrier {
        gen: u64,
        /// The artifact's site naming the `barrier` op.
        site: u32,
    },
    /// Nothing: a rank running as a task that gives its worker to the other ranks of its block
    /// for a turn ([`RankEnv::turn`]); it holds at once.
    Turn,
}

impl Blocked {
    fn site(self) -> u32 {
        match self {
            Blocked::Wait { site, .. } | Blocked::Barrier { site, .. } => site,
            Blocked::Turn => u32::MAX,
        }
    }
}

struct SyncState {
    blocked: Vec<Option<Blocked>>,
    /// How many entries of `blocked` are set (so a rank that wakes checks for a deadlock in
    /// O(1) unless every live rank is blocked).
    nblocked: usize,
    finished: Vec<bool>,
    live: usize,
    barrier_arrived: usize,
    barrier_gen: u64,
    /// The rank that last notified each signal (window, owner, byte offset), kept only while a
    /// timeline records (a wait's `notified_by`).
    notified_by: std::collections::HashMap<(usize, usize, u64), usize>,
}

/// What ended a rank's run early.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// The rank's own error.
    Error(Cause),
    /// Stopped because another rank failed or the world deadlocked.
    Aborted,
}

pub(crate) struct World<'a> {
    pub(crate) p: usize,
    pub(crate) windows: Vec<WindowMem>,
    pub(crate) artifact: &'a Artifact,
    sync: Mutex<SyncState>,
    /// One condition variable per rank: a notify wakes the rank it signals, not every waiting
    /// rank (P^2 notifies would otherwise make P^3 wake-ups at P = 4,096).
    cvs: Vec<Condvar>,
    /// Per rank, whether it is in the slow path of a wait or barrier (set under the lock
    /// before it tests its condition): a notify takes the lock and wakes the rank only then,
    /// so a notify nobody sleeps on costs no lock and no system call.
    waiting: Vec<AtomicBool>,
    abort: AtomicBool,
    pub(crate) deadlock: Mutex<Option<String>>,
    timeout: Duration,
    /// Mirror of the barrier generation, readable without the lock (spin fast path).
    barrier_gen: AtomicU64,
    /// The race detector, when enabled.
    pub(crate) race: Option<crate::race::Race>,
    /// The timeline recorder, when the run records one.
    pub(crate) trace: Option<Trace>,
}

// SAFETY: window memory is reached only through raw pointers whose use is synchronised by the
// program (put/get data) or by atomics under `sync` (signals); the rest is Sync already.
unsafe impl Sync for World<'_> {}

/// Per-rank state behind `DeviceCtx::env`.
pub(crate) struct RankEnv<'w, 'a> {
    pub(crate) world: &'w World<'a>,
    pub(crate) rank: usize,
    pub(crate) error: Option<Failure>,
    /// Compute kernel calls under way, while a timeline records: call site and start.
    pub(crate) calls: Vec<(u32, u64)>,
    /// When the rank runs as a task ([`tasks`]), its coroutine's yielder (valid for the whole
    /// run of the rank); null when the rank has an OS thread of its own.
    pub(crate) yielder: *const tasks::RankYielder,
    /// Window reads since the rank last gave its worker a turn ([`RankEnv::turn`]).
    pub(crate) reads: u32,
}

/// Window reads after which a rank running as a task gives the other ranks of its block a turn.
const READS_PER_TURN: u32 = 1 << 16;

impl RankEnv<'_, '_> {
    /// Counts a window read; as a task, every [`READS_PER_TURN`] reads gives the worker to the
    /// other ranks of the block for a turn. A rank that polls a window in a loop (a data race
    /// the detector reports, but a pattern ported programs have) would otherwise never let the
    /// rank it waits for run: threads are preempted by the OS, tasks only at waits. Returns
    /// the failure to stop with when the world was aborted meanwhile.
    fn turn(&mut self) -> Result<(), Failure> {
        if self.yielder.is_null() {
            return Ok(());
        }
        self.reads += 1;
        if self.reads < READS_PER_TURN {
            return Ok(());
        }
        self.reads = 0;
        // SAFETY: a non-null yielder is the running coroutine's (see the field).
        match unsafe { &*self.yielder }.suspend(Blocked::Turn) {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// Blocks this rank until `b` holds: on its own thread, [`World::block_until`]; as a task,
    /// by suspending it until its worker finds `b` holds (or resumes it with a failure).
    fn block(&self, b: Blocked) -> Result<(), Failure> {
        if self.yielder.is_null() {
            return self.world.block_until(self.rank, b);
        }
        // SAFETY: a non-null yielder is the running coroutine's (see the field).
        let y = unsafe { &*self.yielder };
        loop {
            if self.world.abort.load(Ordering::SeqCst) {
                return Err(Failure::Aborted);
            }
            if self.world.satisfied_now(self.rank, b) {
                return Ok(());
            }
            if let Some(f) = y.suspend(b) {
                return Err(f);
            }
        }
    }
}

fn read_signal(p: *mut u8, kind: u32) -> i128 {
    // SAFETY: callers pass an in-bounds, naturally aligned signal address inside a live window.
    unsafe {
        match kind {
            sigkind::I32 => AtomicI32::from_ptr(p.cast()).load(Ordering::SeqCst) as i128,
            sigkind::U32 => AtomicI32::from_ptr(p.cast()).load(Ordering::SeqCst) as u32 as i128,
            sigkind::U64 => AtomicI64::from_ptr(p.cast()).load(Ordering::SeqCst) as u64 as i128,
            _ => AtomicI64::from_ptr(p.cast()).load(Ordering::SeqCst) as i128,
        }
    }
}

const CMP_TEXT: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];

impl<'a> World<'a> {
    pub(crate) fn new(
        p: usize,
        windows: Vec<WindowMem>,
        artifact: &'a Artifact,
        live: usize,
        opts: &crate::options::RunOptions,
    ) -> Self {
        let timeout = opts.wait_timeout;
        // One rank cannot race: the detector orders a rank's own accesses by program order
        // (`race.rs`), and there is no other rank, so at P = 1 it is not built.
        let race = (opts.race_check && p > 1).then(|| crate::race::Race::new(p, windows.len()));
        World {
            race,
            p,
            windows,
            artifact,
            sync: Mutex::new(SyncState {
                blocked: vec![None; p],
                nblocked: 0,
                finished: vec![false; p],
                live,
                barrier_arrived: 0,
                barrier_gen: 0,
                notified_by: Default::default(),
            }),
            cvs: (0..p).map(|_| Condvar::new()).collect(),
            waiting: (0..p).map(|_| AtomicBool::new(false)).collect(),
            abort: AtomicBool::new(false),
            deadlock: Mutex::new(None),
            timeout,
            barrier_gen: AtomicU64::new(0),
            trace: opts.trace.clone(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        self.sync.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes rank `rank` if it waits (call with the lock held).
    fn wake(&self, rank: usize) {
        if let Some(cv) = self.cvs.get(rank) {
            cv.notify_all();
        }
    }

    /// Wakes every waiting rank (call with the lock held).
    fn wake_all(&self) {
        for (cv, w) in self.cvs.iter().zip(&self.waiting) {
            if w.load(Ordering::SeqCst) {
                cv.notify_all();
            }
        }
    }

    /// Stops every rank (after a failure).
    pub(crate) fn abort_all(&self) {
        let _g = self.lock();
        self.abort.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    /// Rank `rank` finished its work.
    pub(crate) fn retire(&self, rank: usize) {
        let mut g = self.lock();
        if let Some(f) = g.finished.get_mut(rank) {
            *f = true;
        }
        g.live = g.live.saturating_sub(1);
        // A retiring rank can leave every other live rank blocked for good: the check finds
        // that (and wakes them all); otherwise nobody's condition changed.
        self.check_deadlock(&mut g);
    }

    fn satisfied(&self, s: &SyncState, rank: usize, b: Blocked) -> bool {
        match b {
            Blocked::Wait {
                win,
                off,
                kind,
                expected,
                cmp,
                ..
            } => {
                let p = self.windows[win].ptr(rank).wrapping_add(off);
                sigkind::holds(cmp, read_signal(p, kind), sigkind::value(expected, kind))
            }
            Blocked::Barrier { gen, .. } => s.barrier_gen != gen,
            Blocked::Turn => true,
        }
    }

    /// Under the lock: when every live rank is blocked on a condition that does not hold,
    /// records the report and aborts.
    fn check_deadlock(&self, s: &mut SyncState) -> bool {
        if s.live == 0 || s.nblocked < s.live {
            return false;
        }
        let blocked: Vec<(usize, Blocked)> = s
            .blocked
            .iter()
            .enumerate()
            .filter_map(|(r, b)| b.map(|b| (r, b)))
            .collect();
        if s.live == 0 || blocked.len() < s.live {
            return false;
        }
        if blocked.iter().any(|(r, b)| self.satisfied(s, *r, *b)) {
            return false;
        }
        let mut lines = vec![];
        for (r, b) in blocked {
            let at = self
                .artifact
                .site_text(b.site())
                .map_or(String::new(), |t| format!(" ({t})"));
            lines.push(match b {
                Blocked::Wait {
                    win,
                    off,
                    kind,
                    expected,
                    cmp,
                    ..
                } => {
                    let w = &self.windows[win];
                    let e = off / sigkind::width(kind);
                    let what = collective_slot(w, e, self.p)
                        .map_or(String::new(), |s| format!("{s}: "));
                    format!(
                        "  rank {r}{} waits for {what}signal window #{win} ({}) element {e} {} {}, but it holds {}{at}",
                        self.placed(r),
                        w.desc,
                        CMP_TEXT[cmp.min(5) as usize],
                        sigkind::value(expected, kind),
                        read_signal(w.ptr(r).wrapping_add(off), kind)
                    )
                }
                Blocked::Barrier { .. } => format!(
                    "  rank {r}{} waits in a barrier ({} of {} ranks arrived){at}",
                    self.placed(r),
                    s.barrier_arrived,
                    self.p
                ),
                // Never recorded as blocked (it holds at once); named should that change.
                Blocked::Turn => format!("  rank {r}{} is ready to run", self.placed(r)),
            });
        }
        let done: Vec<usize> = s
            .finished
            .iter()
            .enumerate()
            .filter(|(_, f)| **f)
            .map(|(r, _)| r)
            .collect();
        if !done.is_empty() {
            lines.push(format!(
                "  rank(s) {} finished without satisfying these waits",
                rank_list(&done)
            ));
        }
        if let Ok(mut d) = self.deadlock.lock() {
            d.get_or_insert(lines.join("\n"));
        }
        self.abort.store(true, Ordering::SeqCst);
        self.wake_all();
        true
    }

    /// Whether `b` holds, read without the lock (atomics only).
    fn satisfied_now(&self, rank: usize, b: Blocked) -> bool {
        match b {
            Blocked::Wait {
                win,
                off,
                kind,
                expected,
                cmp,
                ..
            } => {
                let p = self.windows[win].ptr(rank).wrapping_add(off);
                sigkind::holds(cmp, read_signal(p, kind), sigkind::value(expected, kind))
            }
            Blocked::Barrier { gen, .. } => self.barrier_gen.load(Ordering::SeqCst) != gen,
            Blocked::Turn => true,
        }
    }

    /// ` (at [i, j] of the rank grid [..])` for rank `r` of a program with rank groups, else
    /// nothing.
    fn placed(&self, r: usize) -> String {
        self.artifact
            .rank_place(r)
            .map_or(String::new(), |at| format!(" ({at})"))
    }

    /// The failure of a wait on `b` that did not complete within the timeout.
    fn timed_out(&self, b: Blocked) -> Failure {
        let at = self.artifact.site_prefix(b.site());
        Failure::Error(Cause::WaitTimeout(format!(
            "{at}a wait did not complete within {} s; if the peer is just slow, raise the limit with `--wait-timeout <secs>`, `Session::with_wait_timeout` or EAGLE_WAIT_TIMEOUT_S",
            self.timeout.as_secs()
        )))
    }

    fn block_until(&self, rank: usize, b: Blocked) -> Result<(), Failure> {
        // Fast path: yield a little while the condition is likely to flip soon (the common
        // case in a collective); the signal and generation are atomics with SeqCst ordering, so
        // a true read here is an acquire of the matching notify or barrier arrival.
        for _ in 0..SPIN_YIELDS {
            if self.satisfied_now(rank, b) {
                return Ok(());
            }
            if self.abort.load(Ordering::SeqCst) {
                return Err(Failure::Aborted);
            }
            std::thread::yield_now();
        }
        let start = Instant::now();
        let mut g = self.lock();
        // Before the condition is tested: a notify that this test misses sees the flag (both
        // sequentially consistent) and wakes this rank under the lock.
        self.waiting[rank].store(true, Ordering::SeqCst);
        let r = loop {
            if self.abort.load(Ordering::SeqCst) {
                break Err(Failure::Aborted);
            }
            if self.satisfied(&g, rank, b) {
                break Ok(());
            }
            set_blocked(&mut g, rank, Some(b));
            if self.check_deadlock(&mut g) {
                break Err(Failure::Aborted);
            }
            if start.elapsed() > self.timeout {
                break Err(self.timed_out(b));
            }
            g = self.cvs[rank]
                .wait_timeout(g, Duration::from_millis(100))
                .map(|r| r.0)
                .unwrap_or_else(|e| e.into_inner().0);
        };
        set_blocked(&mut g, rank, None);
        self.waiting[rank].store(false, Ordering::SeqCst);
        r
    }
}

/// Ranks in ascending order as a short list: runs of three or more as `a-b` (`0, 2-127`), so a
/// report at P = 4,096 stays readable.
fn rank_list(ranks: &[usize]) -> String {
    let mut parts = vec![];
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}-{}", ranks[i], ranks[j]));
        } else {
            parts.extend(ranks[i..=j].iter().map(usize::to_string));
        }
        i = j + 1;
    }
    parts.join(", ")
}

/// Sets `rank`'s blocked state, keeping the count of blocked ranks.
fn set_blocked(g: &mut SyncState, rank: usize, b: Option<Blocked>) {
    if let Some(slot) = g.blocked.get_mut(rank) {
        match (slot.is_some(), b.is_some()) {
            (false, true) => g.nblocked += 1,
            (true, false) => g.nblocked -= 1,
            _ => {}
        }
        *slot = b;
    }
}

// SAFETY (all hooks): `ctx` is the `DeviceCtx` the runtime passed to the entry point, and its
// `env` points to a live `RankEnv` owned by the calling device thread.
unsafe fn env<'r>(ctx: *mut DeviceCtx) -> &'r mut RankEnv<'r, 'r> {
    unsafe { &mut *((*ctx).env as *mut RankEnv<'r, 'r>) }
}

fn fail(e: &mut RankEnv<'_, '_>, cause: Cause) -> i32 {
    e.error.get_or_insert(Failure::Error(cause));
    1
}

/// The report of a read by this rank of `win` on rank `owner` that no synchronisation orders
/// after the write it sees (`at`: the op's site prefix).
fn read_race(e: &RankEnv<'_, '_>, at: &str, win: u64, owner: usize, rep: &RaceReport) -> Cause {
    let w = &e.world.windows[win as usize];
    let (r, wr) = (e.rank, rep.writer);
    Cause::Race(format!(
        "{at}data race: rank {r} reads window #{win} ({}) elements {}..{} on rank {owner}, which rank {wr} wrote with no notify -> wait (or barrier) ordering that write before this read; after writing, have rank {wr} notify rank {r} and make rank {r} wait for that signal before it reads (notify the rank that reads you; wait for the rank you read){}",
        w.desc,
        rep.start / w.elem as u64,
        rep.end / w.elem as u64,
        others_placed(e, &[owner, wr]),
    ))
}

/// The report of a write by this rank of `win` on rank `owner` over bytes another rank wrote
/// with no synchronisation between the two writes.
fn write_race(e: &RankEnv<'_, '_>, at: &str, win: u64, owner: usize, rep: &RaceReport) -> Cause {
    let w = &e.world.windows[win as usize];
    let (r, wr) = (e.rank, rep.writer);
    if rep.read {
        let by = e
            .world
            .artifact
            .site_text(rep.site)
            .map_or(String::new(), |t| format!(" ({t})"));
        return Cause::Race(format!(
            "{at}data race: rank {r} writes window #{win} ({}) elements {}..{} on rank {owner}, which rank {wr} read{by} with no notify -> wait (or barrier) ordering that read before this write, so the read may see either value; have rank {wr} notify rank {r} after its read, and make rank {r} wait for that signal before it writes (or write other elements){}",
            w.desc,
            rep.start / w.elem as u64,
            rep.end / w.elem as u64,
            others_placed(e, &[owner, wr]),
        ));
    }
    Cause::Race(format!(
        "{at}data race: rank {r} writes window #{win} ({}) elements {}..{} on rank {owner}, which rank {wr} also wrote with no notify -> wait (or barrier) ordering the two writes, so which value stays depends on timing; order them (rank {wr} notifies rank {r} after its write, and rank {r} waits for that signal before writing), or write disjoint elements{}",
        w.desc,
        rep.start / w.elem as u64,
        rep.end / w.elem as u64,
        others_placed(e, &[owner, wr]),
    ))
}

/// ` (rank 6 is at [1, 2] of the rank grid [2, 4]; ...)` for the ranks of `ranks` other than
/// this one, in a program with rank groups (the failing rank's place is added to its error
/// when the run ends); else nothing.
fn others_placed(e: &RankEnv<'_, '_>, ranks: &[usize]) -> String {
    let mut seen = vec![e.rank];
    let mut parts = vec![];
    for &q in ranks {
        if seen.contains(&q) {
            continue;
        }
        seen.push(q);
        if let Some(at) = e.world.artifact.rank_place(q) {
            parts.push(format!("rank {q} is {at}"));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join("; "))
    }
}

/// [`crate::exec::check_region`] on this world's windows, the message prefixed with the
/// op's function, text and source line where the hook has its `site`.
fn check_region(
    e: &RankEnv<'_, '_>,
    what: &str,
    win: u64,
    peer: i64,
    off: u64,
    n: u64,
    site: Option<u32>,
) -> Result<usize, String> {
    let w = e.world;
    let window = w
        .windows
        .get(win as usize)
        .map(|wm| (wm.bytes, Some(wm.desc.as_str())));
    crate::exec::check_region(what, w.p, window, win, peer, off, n).map_err(|m| {
        format!(
            "{}{m}",
            site.map(|s| w.artifact.site_prefix(s)).unwrap_or_default()
        )
    })
}

unsafe extern "C" fn h_window_base(ctx: *mut DeviceCtx, win: u64) -> *mut u8 {
    let e = unsafe { env(ctx) };
    match e.world.windows.get(win as usize) {
        Some(w) => w.ptr(e.rank),
        None => std::ptr::null_mut(),
    }
}

unsafe fn put_body(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    src: *const u8,
    n: u64,
    site: u32,
) -> i32 {
    let e = unsafe { env(ctx) };
    match check_region(e, "put", win, peer, off, n, Some(site)) {
        Ok(p) => {
            if let Some(rep) = e
                .world
                .race
                .as_ref()
                .and_then(|r| r.write(win as usize, p, off, n, e.rank))
            {
                let at = e.world.artifact.site_prefix(site);
                let cause = write_race(e, &at, win, p, &rep);
                return fail(e, cause);
            }
            let dst = e.world.windows[win as usize]
                .ptr(p)
                .wrapping_add(off as usize);
            // SAFETY: the region was bounds-checked above; `src` spans `n` bytes of the caller's
            // memory (checked by the compiler's shape rules).
            unsafe { std::ptr::copy(src, dst, n as usize) };
            0
        }
        Err(m) => fail(e, Cause::Access(m)),
    }
}

unsafe fn get_body(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    dst: *mut u8,
    n: u64,
    site: u32,
) -> i32 {
    let src = unsafe { get_view_body(ctx, win, peer, off, dst, n, site) };
    if src.is_null() {
        return 1;
    }
    // SAFETY: `h_get_view` checked the region; `dst` spans `n` bytes of the caller's memory
    // (checked by the compiler's shape rules).
    unsafe { std::ptr::copy(src, dst, n as usize) };
    0
}

/// The peer's bytes in place: every rank's allocation lives in this process.
unsafe fn get_view_body(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    _scratch: *mut u8,
    n: u64,
    site: u32,
) -> *const u8 {
    let e = unsafe { env(ctx) };
    if let Err(f) = e.turn() {
        e.error.get_or_insert(f);
        return std::ptr::null();
    }
    match check_region(e, "get", win, peer, off, n, Some(site)) {
        Ok(p) => {
            if let Some(rep) = e
                .world
                .race
                .as_ref()
                .and_then(|r| r.read(win as usize, p, off, n, e.rank, site))
            {
                let at = e.world.artifact.site_prefix(site);
                let cause = read_race(e, &at, win, p, &rep);
                fail(e, cause);
                return std::ptr::null();
            }
            e.world.windows[win as usize]
                .ptr(p)
                .wrapping_add(off as usize)
        }
        Err(m) => {
            fail(e, Cause::Access(m));
            std::ptr::null()
        }
    }
}

#[allow(clippy::too_many_arguments)]
unsafe fn notify_body(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    kind: u32,
    value: i64,
    op: u32,
    site: u32,
) -> i32 {
    let e = unsafe { env(ctx) };
    let peer = match check_region(
        e,
        "notify",
        win,
        peer,
        off,
        sigkind::width(kind) as u64,
        Some(site),
    ) {
        Ok(p) => p,
        Err(m) => return fail(e, Cause::Access(m)),
    };
    let w = e.world;
    let p = w.windows[win as usize].ptr(peer).wrapping_add(off as usize);
    // The release is recorded before the value lands: a wait that sees the value acquires it.
    if let Some(r) = &w.race {
        r.release(win as usize, peer, off, e.rank);
    }
    // SAFETY: in bounds (checked) and naturally aligned (offsets are element multiples of an
    // 8-byte-aligned allocation).
    unsafe {
        if sigkind::width(kind) == 4 {
            let a = AtomicI32::from_ptr(p.cast());
            if op == 1 {
                a.fetch_add(value as i32, Ordering::SeqCst);
            } else {
                a.store(value as i32, Ordering::SeqCst);
            }
        } else {
            let a = AtomicI64::from_ptr(p.cast());
            if op == 1 {
                a.fetch_add(value, Ordering::SeqCst);
            } else {
                a.store(value, Ordering::SeqCst);
            }
        }
    }
    if w.waiting
        .get(peer)
        .is_some_and(|f| f.load(Ordering::SeqCst))
    {
        // Under the lock a waiting rank is blocked on its condition (it sets both before it
        // sleeps): wake it only when this notify made the condition hold (a barrier of
        // signals notifies each rank P times; it needs waking once).
        let g = w.lock();
        let now = g.blocked.get(peer).copied().flatten();
        if now.is_none_or(|b| w.satisfied(&g, peer, b)) {
            w.wake(peer);
        }
    }
    0
}

unsafe fn wait_body(
    ctx: *mut DeviceCtx,
    win: u64,
    off: u64,
    kind: u32,
    expected: i64,
    cmp: u32,
    site: u32,
) -> i32 {
    let e = unsafe { env(ctx) };
    let rank = e.rank as i64;
    if let Err(m) = check_region(
        e,
        "wait",
        win,
        rank,
        off,
        sigkind::width(kind) as u64,
        Some(site),
    ) {
        return fail(e, Cause::Access(m));
    }
    let b = Blocked::Wait {
        win: win as usize,
        off: off as usize,
        kind,
        expected,
        cmp,
        site,
    };
    match e.block(b) {
        Ok(()) => {
            if let Some(r) = &e.world.race {
                r.acquire(win as usize, off, e.rank);
            }
            0
        }
        Err(f) => {
            e.error.get_or_insert(f);
            1
        }
    }
}

unsafe extern "C" fn h_track_write(ctx: *mut DeviceCtx, win: u64, off: u64, n: u64) -> i32 {
    let e = unsafe { env(ctx) };
    let rank = e.rank as i64;
    if let Err(m) = check_region(e, "store", win, rank, off, n, None) {
        return fail(e, Cause::Access(m));
    }
    if let Some(rep) = e
        .world
        .race
        .as_ref()
        .and_then(|r| r.write(win as usize, e.rank, off, n, e.rank))
    {
        let cause = write_race(e, "", win, e.rank, &rep);
        return fail(e, cause);
    }
    0
}

unsafe extern "C" fn h_track_read(
    ctx: *mut DeviceCtx,
    win: u64,
    off: u64,
    n: u64,
    site: u32,
) -> i32 {
    let e = unsafe { env(ctx) };
    if let Err(f) = e.turn() {
        e.error.get_or_insert(f);
        return 1;
    }
    // Nothing to do without the detector (compiled code has checked the bounds).
    let Some(race) = &e.world.race else {
        return 0;
    };
    let rank = e.rank as i64;
    if let Err(m) = check_region(e, "load", win, rank, off, n, Some(site)) {
        return fail(e, Cause::Access(m));
    }
    if let Some(rep) = race.read(win as usize, e.rank, off, n, e.rank, site) {
        let at = e.world.artifact.site_prefix(site);
        let cause = read_race(e, &at, win, e.rank, &rep);
        return fail(e, cause);
    }
    0
}

unsafe fn barrier_body(ctx: *mut DeviceCtx, site: u32) -> i32 {
    let e = unsafe { env(ctx) };
    let w = e.world;
    let gen = {
        let mut g = w.lock();
        let gen = g.barrier_gen;
        g.barrier_arrived += 1;
        let last = g.barrier_arrived == w.p;
        if let Some(r) = &w.race {
            r.barrier_arrive(e.rank, last);
        }
        if last {
            g.barrier_arrived = 0;
            g.barrier_gen += 1;
            w.barrier_gen.store(g.barrier_gen, Ordering::SeqCst);
            w.wake_all();
            if let Some(r) = &w.race {
                r.barrier_leave(e.rank);
            }
            return 0;
        }
        gen
    };
    match e.block(Blocked::Barrier { gen, site }) {
        Ok(()) => {
            if let Some(r) = &w.race {
                r.barrier_leave(e.rank);
            }
            0
        }
        Err(f) => {
            e.error.get_or_insert(f);
            1
        }
    }
}

unsafe extern "C" fn h_fault(ctx: *mut DeviceCtx, site: u32, a: i64, b: i64) -> i32 {
    let e = unsafe { env(ctx) };
    let msg = e.world.artifact.fault_message(site, a, b);
    fail(e, Cause::Fault(msg))
}

/// The `sim` hook bodies, wrapped by `exec::traced`.
pub(crate) struct SimHooks;

// SAFETY: `ctx.env` of every call is the `RankEnv` of `device_ctx`.
unsafe impl Served for SimHooks {
    unsafe fn tracer<'r>(ctx: *mut DeviceCtx) -> (Option<Trace>, &'r Artifact, usize) {
        let e = unsafe { env::<'r>(ctx) };
        (e.world.trace.clone(), e.world.artifact, e.rank)
    }
    unsafe fn calls<'r>(ctx: *mut DeviceCtx) -> &'r mut Vec<(u32, u64)> {
        &mut unsafe { env::<'r>(ctx) }.calls
    }
    unsafe fn note_notify(ctx: *mut DeviceCtx, win: u64, peer: i64, off: u64) {
        let e = unsafe { env(ctx) };
        if let Ok(peer) = usize::try_from(peer) {
            let mut g = e.world.lock();
            g.notified_by.insert((win as usize, peer, off), e.rank);
        }
    }
    unsafe fn notified_by(ctx: *mut DeviceCtx, win: u64, off: u64) -> Option<usize> {
        let e = unsafe { env(ctx) };
        let g = e.world.lock();
        g.notified_by.get(&(win as usize, e.rank, off)).copied()
    }
    crate::exec::traced::forward_bodies!();
}

/// The hook table of the `sim` platform.
pub(crate) static HOOKS: Hooks = Hooks {
    window_base: h_window_base,
    put: traced::put::<SimHooks>,
    get: traced::get::<SimHooks>,
    get_view: traced::get_view::<SimHooks>,
    notify: traced::notify::<SimHooks>,
    wait: traced::wait::<SimHooks>,
    barrier: traced::barrier::<SimHooks>,
    fault: h_fault,
    track_write: h_track_write,
    track_read: h_track_read,
    trace: traced::trace::<SimHooks>,
};

/// Builds the context for one call on `rank`.
pub(crate) fn device_ctx(env: &mut RankEnv<'_, '_>, p: usize) -> DeviceCtx {
    DeviceCtx {
        rank: env.rank as u64,
        nranks: p as u64,
        hooks: &HOOKS,
        trace: env.world.trace.is_some() as u64,
        env: env as *mut RankEnv<'_, '_> as *mut c_void,
    }
}

#[cfg(test)]
mod tests {
    /// A deadlock report lists finished ranks with runs of three or more as ranges.
    #[test]
    fn rank_lists_shorten_runs_to_ranges() {
        assert_eq!(super::rank_list(&[0, 2, 3, 4, 5, 9, 10]), "0, 2-5, 9, 10");
        assert_eq!(super::rank_list(&[1, 2, 3]), "1-3");
        assert_eq!(super::rank_list(&[7]), "7");
        assert_eq!(super::rank_list(&[]), "");
    }
}
