//! The MPI transport (cargo feature `mpi`): ranks are processes launched by `mpirun`.
//!
//! Window buffers are MPI-3 RMA windows (`MPI_Win_allocate`) opened for passive-target access
//! with `MPI_Win_lock_all` for the whole run. rsmpi has no safe RMA API, so this module wraps
//! the raw `mpi::ffi` calls. Its invariants:
//!
//! 1. Every process runs the same host program, so every process allocates the same windows in
//!    the same order (window allocation is collective) and computes the same dispatch lists.
//! 2. A `put` or `get` is followed by `MPI_Win_flush` to its target: it is complete at the
//!    target when the hook returns. So a `notify` (an `MPI_Accumulate`, flushed) issued after
//!    puts is seen only after their data (notify is a release).
//! 3. Signals are touched only by atomic accumulates: notify `Set` is `MPI_Accumulate(REPLACE)`,
//!    `Add` is `MPI_Accumulate(SUM)`, and `wait` polls its own signal with
//!    `MPI_Fetch_and_op(NO_OP)` (an atomic read that writes nothing back) and, once it
//!    holds, calls `MPI_Win_sync` on every window before the kernel reads window memory with
//!    plain loads (wait is an acquire). A barrier (`MPI_Barrier`) is followed by the same sync.
//! 4. Reductions never go to MPI: built-in collectives are lowered to put/get/barrier by the
//!    compiler, so their combine order is eagle's, not `MPI_Allreduce`'s.
//! 5. A failure on any rank prints that rank's error and calls `MPI_Abort`, which ends every
//!    rank within seconds: no rank is left waiting for a peer that is gone.

/// The rsmpi crate, for programs that also call MPI directly (benchmarks compare against it).
pub use mpi;

use crate::error::RuntimeError;
use eagle_codegen::abi::{sigkind, DeviceCtx, Hooks};
use eagle_codegen::Artifact;
use mpi::ffi;
use std::ffi::c_void;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static UNIVERSE: Mutex<Option<mpi::environment::Universe>> = Mutex::new(None);
static WORLD: OnceLock<(usize, usize)> = OnceLock::new();

/// Whether this process was started by an MPI launcher.
fn launched() -> bool {
    [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|k| std::env::var_os(k).is_some())
}

/// Initialises MPI when the process was started by `mpirun` (idempotent) and returns
/// `(rank, size)`; `(0, 1)` otherwise.
pub fn init() -> (usize, usize) {
    *WORLD.get_or_init(|| {
        if !launched() {
            return (0, 1);
        }
        match mpi::initialize_with_threading(mpi::Threading::Multiple) {
            Some((u, _)) => {
                use mpi::traits::Communicator;
                let w = u.world();
                let rs = (w.rank() as usize, w.size() as usize);
                if let Ok(mut g) = UNIVERSE.lock() {
                    *g = Some(u);
                }
                // A panic on one rank must end the job, not leave the others waiting.
                let prev = std::panic::take_hook();
                std::panic::set_hook(Box::new(move |info| {
                    prev(info);
                    abort(1);
                }));
                rs
            }
            None => (0, 1),
        }
    })
}

/// `(rank, size)` of this process (after [`init`]); `(0, 1)` without MPI.
pub fn world() -> (usize, usize) {
    WORLD.get().copied().unwrap_or((0, 1))
}

/// Whether ranks are MPI processes in this run.
pub fn active() -> bool {
    world().1 > 1 || UNIVERSE.lock().map(|g| g.is_some()).unwrap_or(false)
}

/// Finalises MPI (call once, at the end of `main`).
pub fn finalize() {
    if let Ok(mut g) = UNIVERSE.lock() {
        g.take();
    }
}

/// Ends every rank of the job with `code`.
pub fn abort(code: i32) -> ! {
    // SAFETY: MPI is initialised (only called when active); MPI_Abort does not return.
    unsafe {
        ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, code);
    }
    std::process::exit(code)
}

/// Prints `message` as this rank's error and ends every rank of the job (exit status 1): for
/// failures detected outside a host program (an execution plan's share), after which the other
/// ranks would wait forever in the next collective.
pub fn abort_with(message: &str) -> ! {
    eprintln!("error: rank {}: {message}", world().0);
    abort(1)
}

/// Prints `e` as rank `rank`'s error and ends the job.
pub fn fail_job(rank: usize, e: &RuntimeError) -> ! {
    let _ = rank;
    eprintln!("error: {e}");
    abort(1)
}

/// `MPI_Barrier` on the world.
pub fn barrier() {
    // SAFETY: MPI is initialised.
    unsafe {
        ffi::MPI_Barrier(ffi::RSMPI_COMM_WORLD);
    }
}

/// Whether every rank passes `ok` (an `MPI_Allreduce` with MIN): ranks agree on success.
pub fn all_ok(ok: bool) -> bool {
    let mine: i32 = ok.into();
    let mut all: i32 = 0;
    // SAFETY: one i32 in, one out, on the world communicator.
    unsafe {
        ffi::MPI_Allreduce(
            (&mine as *const i32).cast(),
            (&mut all as *mut i32).cast(),
            1,
            ffi::RSMPI_INT32_T,
            ffi::RSMPI_MIN,
            ffi::RSMPI_COMM_WORLD,
        );
    }
    all == 1
}

/// Gathers `mine` (this rank's bytes) from every rank, in rank order, given every rank's count.
pub fn allgather_bytes(mine: &[u8], counts: &[usize]) -> Vec<u8> {
    let total: usize = counts.iter().sum();
    let mut out = vec![0u8; total];
    let c: Vec<i32> = counts.iter().map(|&x| x as i32).collect();
    let mut displs = vec![0i32; counts.len()];
    for i in 1..counts.len() {
        displs[i] = displs[i - 1] + c[i - 1];
    }
    // SAFETY: `mine` holds counts[rank] bytes (the caller's invariant), `out` holds the total;
    // counts and displacements are in bytes of MPI_UINT8_T.
    unsafe {
        ffi::MPI_Allgatherv(
            mine.as_ptr().cast(),
            mine.len() as i32,
            ffi::RSMPI_UINT8_T,
            out.as_mut_ptr().cast(),
            c.as_ptr(),
            displs.as_ptr(),
            ffi::RSMPI_UINT8_T,
            ffi::RSMPI_COMM_WORLD,
        );
    }
    out
}

/// The RMA windows of one run.
pub(crate) struct Windows {
    wins: Vec<ffi::MPI_Win>,
    bases: Vec<*mut u8>,
    bytes: Vec<usize>,
}

impl Windows {
    /// Allocates (collectively) one window per entry of `bytes`, zeroes it, and opens a
    /// passive-target epoch on all of them.
    pub(crate) fn allocate(bytes: &[usize]) -> Windows {
        let mut w = Windows {
            wins: vec![],
            bases: vec![],
            bytes: bytes.to_vec(),
        };
        for &b in bytes {
            let mut base: *mut u8 = std::ptr::null_mut();
            let mut win: ffi::MPI_Win = unsafe { std::mem::zeroed() };
            // SAFETY: collective over the world; `base` receives the local allocation.
            unsafe {
                ffi::MPI_Win_allocate(
                    b.max(8) as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_INFO_NULL,
                    ffi::RSMPI_COMM_WORLD,
                    (&mut base as *mut *mut u8).cast(),
                    &mut win,
                );
                std::ptr::write_bytes(base, 0, b.max(8));
            }
            w.wins.push(win);
            w.bases.push(base);
        }
        barrier();
        for &win in &w.wins {
            // SAFETY: an epoch per window for the whole run (invariant 2).
            unsafe {
                ffi::MPI_Win_lock_all(0, win);
            }
        }
        w
    }

    fn sync_all(&self) {
        for &win in &self.wins {
            // SAFETY: inside the lock_all epoch.
            unsafe {
                ffi::MPI_Win_sync(win);
            }
        }
    }
}

impl Drop for Windows {
    fn drop(&mut self) {
        for win in &mut self.wins {
            // SAFETY: closes the epoch opened in `allocate`, then frees collectively.
            unsafe {
                ffi::MPI_Win_unlock_all(*win);
                ffi::MPI_Win_free(win);
            }
        }
    }
}

/// Per-call state behind `DeviceCtx::env` on the MPI transport.
pub(crate) struct MpiEnv<'a> {
    pub(crate) wins: &'a Windows,
    pub(crate) art: &'a Artifact,
    pub(crate) rank: usize,
    pub(crate) size: usize,
    pub(crate) timeout: Duration,
    pub(crate) error: Option<String>,
}

unsafe fn env<'r>(ctx: *mut DeviceCtx) -> &'r mut MpiEnv<'r> {
    // SAFETY: `env` is the MpiEnv the runtime passed with this ctx.
    unsafe { &mut *((*ctx).env as *mut MpiEnv<'r>) }
}

fn fail(e: &mut MpiEnv<'_>, m: String) -> i32 {
    e.error.get_or_insert(m);
    1
}

fn region(
    e: &MpiEnv<'_>,
    what: &str,
    win: u64,
    peer: i64,
    off: u64,
    n: u64,
) -> Result<usize, String> {
    if peer < 0 || peer as usize >= e.size {
        return Err(format!(
            "{what}: peer rank {peer} is outside the world 0..{}",
            e.size
        ));
    }
    let Some(&bytes) = e.wins.bytes.get(win as usize) else {
        return Err(format!("{what}: unknown window #{win}"));
    };
    if off.checked_add(n).is_none_or(|end| end > bytes as u64) {
        return Err(format!(
            "{what}: bytes {off}..{} of window #{win} are outside its {bytes} bytes",
            off.saturating_add(n)
        ));
    }
    Ok(peer as usize)
}

fn dtype(kind: u32) -> ffi::MPI_Datatype {
    // SAFETY: reading predefined datatype handles.
    unsafe {
        match kind {
            sigkind::I32 => ffi::RSMPI_INT32_T,
            sigkind::U32 => ffi::RSMPI_UINT32_T,
            sigkind::U64 => ffi::RSMPI_UINT64_T,
            _ => ffi::RSMPI_INT64_T,
        }
    }
}

unsafe extern "C" fn h_window_base(ctx: *mut DeviceCtx, win: u64) -> *mut u8 {
    let e = unsafe { env(ctx) };
    e.wins
        .bases
        .get(win as usize)
        .copied()
        .unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn h_put(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    src: *const u8,
    n: u64,
) -> i32 {
    let e = unsafe { env(ctx) };
    match region(e, "put", win, peer, off, n) {
        Ok(p) => {
            let w = e.wins.wins[win as usize];
            // SAFETY: bounds checked; `src` spans n bytes; flushed before returning (inv. 2).
            unsafe {
                ffi::MPI_Win_sync(w);
                ffi::MPI_Put(
                    src.cast(),
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    p as i32,
                    off as ffi::MPI_Aint,
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    w,
                );
                ffi::MPI_Win_flush(p as i32, w);
            }
            0
        }
        Err(m) => fail(e, m),
    }
}

unsafe extern "C" fn h_get(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    dst: *mut u8,
    n: u64,
) -> i32 {
    let e = unsafe { env(ctx) };
    match region(e, "get", win, peer, off, n) {
        Ok(p) => {
            let w = e.wins.wins[win as usize];
            // SAFETY: bounds checked; `dst` spans n bytes; complete when flushed.
            unsafe {
                ffi::MPI_Get(
                    dst.cast(),
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    p as i32,
                    off as ffi::MPI_Aint,
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    w,
                );
                ffi::MPI_Win_flush(p as i32, w);
            }
            0
        }
        Err(m) => fail(e, m),
    }
}

/// `MPI_REPLACE`. rsmpi exports no constant for it; this is Open MPI's predefined handle (the
/// transport is built and tested against Open MPI, see docs/mpi.md).
fn op_replace() -> ffi::MPI_Op {
    // The address of a predefined, never-freed Open MPI object; not dereferenced here.
    ffi::MPI_Op(std::ptr::addr_of_mut!(ffi::ompi_mpi_op_replace).cast())
}

/// `MPI_NO_OP` (Open MPI's predefined handle, as [`op_replace`]).
fn op_no_op() -> ffi::MPI_Op {
    ffi::MPI_Op(std::ptr::addr_of_mut!(ffi::ompi_mpi_op_no_op).cast())
}

unsafe extern "C" fn h_notify(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    kind: u32,
    value: i64,
    op: u32,
) -> i32 {
    let e = unsafe { env(ctx) };
    let width = if matches!(kind, sigkind::I32 | sigkind::U32) {
        4
    } else {
        8
    };
    match region(e, "notify", win, peer, off, width) {
        Ok(p) => {
            let w = e.wins.wins[win as usize];
            let v32 = value as i32;
            let src: *const c_void = if width == 4 {
                (&v32 as *const i32).cast()
            } else {
                (&value as *const i64).cast()
            };
            // A signal is only ever touched by atomic accumulate operations (invariant 3): `Set`
            // is `MPI_REPLACE`, `Add` is `MPI_SUM`, and `wait` reads with `MPI_NO_OP`. A plain
            // `MPI_Put` here would race with the waiter's read (MPI calls that conflicting
            // access erroneous; Open MPI's shared-memory windows lose the update).
            let mpi_op = if op == 1 {
                ffi::RSMPI_SUM
            } else {
                op_replace()
            };
            // SAFETY: one element of `kind` at an in-bounds, aligned offset; flushed.
            unsafe {
                ffi::MPI_Win_sync(w);
                ffi::MPI_Accumulate(
                    src,
                    1,
                    dtype(kind),
                    p as i32,
                    off as ffi::MPI_Aint,
                    1,
                    dtype(kind),
                    mpi_op,
                    w,
                );
                ffi::MPI_Win_flush(p as i32, w);
            }
            0
        }
        Err(m) => fail(e, m),
    }
}

unsafe extern "C" fn h_wait(
    ctx: *mut DeviceCtx,
    win: u64,
    off: u64,
    kind: u32,
    expected: i64,
    cmp: u32,
) -> i32 {
    let e = unsafe { env(ctx) };
    let width = if matches!(kind, sigkind::I32 | sigkind::U32) {
        4
    } else {
        8
    };
    let me = e.rank as i64;
    if let Err(m) = region(e, "wait", win, me, off, width) {
        return fail(e, m);
    }
    let w = e.wins.wins[win as usize];
    let start = Instant::now();
    let want = match kind {
        sigkind::I32 => expected as i32 as i128,
        sigkind::U32 => expected as u32 as i128,
        sigkind::U64 => expected as u64 as i128,
        _ => expected as i128,
    };
    loop {
        let zero = 0i64;
        let mut got = 0i64;
        // SAFETY: an atomic read (`MPI_NO_OP`: fetch without writing back, so a concurrent
        // notify cannot be lost) of one element of our own window.
        unsafe {
            ffi::MPI_Fetch_and_op(
                (&zero as *const i64).cast(),
                (&mut got as *mut i64).cast(),
                dtype(kind),
                e.rank as i32,
                off as ffi::MPI_Aint,
                op_no_op(),
                w,
            );
            ffi::MPI_Win_flush(e.rank as i32, w);
        }
        let v = match kind {
            sigkind::I32 => got as i32 as i128,
            sigkind::U32 => got as u32 as i128,
            sigkind::U64 => got as u64 as i128,
            _ => got as i128,
        };
        let holds = match cmp {
            0 => v == want,
            1 => v != want,
            2 => v < want,
            3 => v <= want,
            4 => v > want,
            _ => v >= want,
        };
        if holds {
            e.wins.sync_all();
            return 0;
        }
        if start.elapsed() > e.timeout {
            return fail(e, format!("a wait on window #{win} did not complete within {} s (the peer that should notify may be waiting too: a deadlock across processes; EAGLE_WAIT_TIMEOUT_S)", e.timeout.as_secs()));
        }
        std::thread::yield_now();
    }
}

unsafe extern "C" fn h_barrier(ctx: *mut DeviceCtx) -> i32 {
    let e = unsafe { env(ctx) };
    e.wins.sync_all();
    barrier();
    e.wins.sync_all();
    0
}

unsafe extern "C" fn h_fault(ctx: *mut DeviceCtx, site: u32, a: i64, b: i64) -> i32 {
    let e = unsafe { env(ctx) };
    let m = e.art.fault_message(site, a, b);
    fail(e, m)
}

unsafe extern "C" fn h_track_write(_ctx: *mut DeviceCtx, _win: u64, _off: u64, _n: u64) -> i32 {
    0
}

/// The hook table of the MPI transport.
pub(crate) static HOOKS: Hooks = Hooks {
    window_base: h_window_base,
    put: h_put,
    get: h_get,
    notify: h_notify,
    wait: h_wait,
    barrier: h_barrier,
    fault: h_fault,
    track_write: h_track_write,
};

/// Builds the context for one call.
pub(crate) fn device_ctx(env: &mut MpiEnv<'_>) -> DeviceCtx {
    DeviceCtx {
        rank: env.rank as u64,
        nranks: env.size as u64,
        hooks: &HOOKS,
        env: env as *mut MpiEnv<'_> as *mut c_void,
    }
}

/// Gathers `mine` (this rank's values) from every rank into `out`, in rank order, given every
/// rank's count: an all-gather-varcount of `f64` with no staging copies.
pub fn allgather_f64_into(mine: &[f64], counts: &[usize], out: &mut [f64]) {
    use mpi::datatype::PartitionMut;
    use mpi::traits::CommunicatorCollectives;
    let c: Vec<i32> = counts.iter().map(|&x| x as i32).collect();
    let mut displs = vec![0i32; counts.len()];
    for i in 1..counts.len() {
        displs[i] = displs[i - 1] + c[i - 1];
    }
    let world = mpi::topology::SimpleCommunicator::world();
    let mut p = PartitionMut::new(out, &c[..], &displs[..]);
    world.all_gather_varcount_into(mine, &mut p);
}
