//! The MPI transport (cargo feature `mpi`): ranks are processes launched by `mpirun`.
//!
//! Window buffers are MPI-3 RMA windows (`MPI_Win_allocate`) opened for passive-target access
//! with `MPI_Win_lock_all` for the whole run. rsmpi has no safe RMA API, so this module wraps
//! the raw `mpi::ffi` calls. Its invariants:
//!
//! 1. Every process runs the same host program, so every process allocates the same windows in
//!    the same order (window allocation is collective) and computes the same dispatch lists.
//! 2. A `get` is complete when its hook returns (an `MPI_Rget` request, polled). A `put` to a
//!    peer is *pending* until the next release point of its rank: a `notify` or a barrier
//!    completes every pending put (`MPI_Win_flush` to each target) before it signals, and the
//!    end of a dispatch completes them too; a put or get that overlaps a pending put of the
//!    same window and target completes it first, and a put to the rank itself completes at
//!    once (the kernel may read it with plain loads). So a `notify` issued after puts is seen
//!    only after their data (notify is a release). A pending put sends from a copy of its
//!    bytes, so the kernel may reuse its source at once. (Flushing every put as it was made
//!    spun in `MPI_Win_flush` once per put: under MPICH with more ranks than cores, a
//!    scheduler tick each.)
//! 3. Signals and arrival counters are touched only by one atomic RMA operation, `MPI_SUM`
//!    (MPI promises atomicity between accumulates only for the same op): a fetch-and-add
//!    (`MPI_Rget_accumulate(SUM)` of one element, its request polled with yields). Notify
//!    `Add` is one, `Set` adds the difference from the value read (a loop, in case another
//!    rank changed it), and `wait` polls its own signal with a fetch-and-add of 0 (an atomic
//!    read) and, once it holds, calls
//!    `MPI_Win_sync` on every window before the kernel reads window memory with plain loads
//!    (wait is an acquire). Only predefined handles that every MPI exports through rsmpi are
//!    used (`MPI_SUM`, no `MPI_REPLACE`/`MPI_NO_OP`), so the transport builds against Open MPI
//!    and MPICH alike.
//! 4. A barrier is an `MPI_Ibarrier` on a communicator of its own, polled with `MPI_Test`
//!    against the wait timeout (never `MPI_Barrier`, which cannot time out), between
//!    `MPI_Win_sync`s of every window. Each rank also adds one to its slot of an arrival
//!    counter on every rank (not flushed: only a barrier that times out reads them, after a
//!    flush), so a barrier that some rank never reaches fails naming those ranks. (Arrival
//!    counters alone, each flushed, cost about 4 ms a barrier under MPICH 4.0 ch4:ucx at
//!    np = 3 on 2 cores: a flush spins until the target, maybe not scheduled, progresses.)
//! 5. Reductions never go to MPI: built-in collectives are lowered to put/get/barrier by the
//!    compiler, so their combine order is eagle's, not `MPI_Allreduce`'s.
//! 6. Ranks agree before they act together ([`agree`], on a communicator of its own with
//!    point-to-point messages polled against the timeout): before a launch (program, argument
//!    shapes and dtypes, any error met before it), before allocating windows, before gathering
//!    outputs, and in the final vote. A difference is an error on every rank; a rank that does
//!    not arrive within the timeout is named, and the job is aborted.
//! 7. A failure inside a dispatch prints that rank's error and calls `MPI_Abort`, which ends
//!    every rank within seconds: no rank is left waiting for a peer that is gone.
//! 8. On one node under Open MPI, windows use the shared-memory one-sided component `sm`
//!    unless the user chose one (`OMPI_MCA_osc`; see `prefer_shared_memory_windows`).
//! 9. No MPI call blocks for longer than the wait timeout plus [`GRACE`], whatever a peer
//!    does. An MPI that progresses one-sided operations only inside the target's MPI calls
//!    (MPICH without asynchronous progress) blocks `MPI_Win_flush` for as long as the peer is
//!    stopped or busy outside MPI, beyond any timeout eagle polls against. So every call that
//!    may block runs inside a [`watchdog`] section; a thread of its own, independent of MPI
//!    progress, prints the verdict (this rank, the operation, the peer) and ends the job when a
//!    section outlives its limit.
//! 10. MPI is initialised on first use when a launcher started the process (as mpi4py does
//!    when imported): [`world`] initialises it, so a program that never calls [`init`] still
//!    runs as one rank of the job, never as a lone copy of the whole job. At exit (an
//!    `atexit` handler, or [`finalize`]) the ranks agree that they all reached the end before
//!    `MPI_Finalize`: a rank that exits while the others are still at work (`exit(0)` in
//!    the middle of a run) ends the job with an error naming it, never a job that exits 0.

/// The rsmpi crate, for programs that also call MPI directly (benchmarks compare against it).
pub use mpi;

use crate::agree::{judge, Stance};
use crate::error::RuntimeError;
use crate::exec::traced;
use crate::Cause;
use eagle_codegen::abi::{sigkind, DeviceCtx, Hooks};
use eagle_codegen::Artifact;
use mpi::ffi;
use std::cell::Cell;
use std::ffi::c_void;
use std::io::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static UNIVERSE: Mutex<Option<mpi::environment::Universe>> = Mutex::new(None);
static WORLD: OnceLock<(usize, usize)> = OnceLock::new();
/// The communicator of agreements (a duplicate of the world, so that no agreement message can
/// match a user's or a kernel's traffic).
static CONTROL: OnceLock<Comm> = OnceLock::new();
/// The communicator of kernel barriers (`MPI_Ibarrier`, another duplicate of the world).
static BARRIERS: OnceLock<Comm> = OnceLock::new();

/// An MPI communicator handle that may live in a static (it is only used after `init`, and MPI
/// runs with `MPI_THREAD_MULTIPLE`).
struct Comm(ffi::MPI_Comm);
// SAFETY: a communicator handle is an opaque, immutable reference to MPI-owned state; MPI is
// initialised with `MPI_THREAD_MULTIPLE`, so any thread may use it.
unsafe impl Send for Comm {}
// SAFETY: as above.
unsafe impl Sync for Comm {}

/// The message tag of agreements on [`CONTROL`].
const AGREE_TAG: i32 = 0x4547;

/// Whether this process was started by an MPI launcher.
fn launched() -> bool {
    crate::launcher_world_size().is_some()
}

/// Open MPI 4.1 picks its `ucx` or `rdma` one-sided component even when every rank runs on
/// one node, and there each passive-target operation waits for the target process to make
/// progress: an allgather of 1 KiB at np = 4 (4 processes on 2 cores) took 115 us, against
/// 10 us with the shared-memory component `sm` (`benches/mpi.rs`, docs/performance.md). So on
/// one node (`OMPI_COMM_WORLD_LOCAL_SIZE` equal to `OMPI_COMM_WORLD_SIZE`) this asks for
/// `OMPI_MCA_osc=sm` before `MPI_Init` reads it, unless the user set `OMPI_MCA_osc`
/// (theirs wins). Every window is made by `MPI_Win_allocate`, which `sm` supports. Other MPIs
/// (MPICH reads no `OMPI_` variable) are left alone.
fn prefer_shared_memory_windows() {
    let var = |k: &str| std::env::var(k).ok();
    if let Some(osc) = osc_choice(
        var("OMPI_COMM_WORLD_LOCAL_SIZE").as_deref(),
        var("OMPI_COMM_WORLD_SIZE").as_deref(),
        std::env::var_os("OMPI_MCA_osc").is_some(),
    ) {
        // Before MPI_Init reads the environment. `init` runs first thing in `main`
        // (`eagle_runner::MpiGuard::init`), before the runtime has started any thread.
        std::env::set_var("OMPI_MCA_osc", osc);
    }
}

/// The `OMPI_MCA_osc` value to set, from Open MPI's local and world sizes and whether the user
/// set one: `sm` on one node, nothing otherwise. (Not `pt2pt` as a fallback: Open MPI 4.1's
/// `pt2pt` refuses `MPI_THREAD_MULTIPLE`, which the runtime initialises with.)
fn osc_choice(
    local_size: Option<&str>,
    world_size: Option<&str>,
    user_set: bool,
) -> Option<&'static str> {
    match (local_size, world_size) {
        (Some(local), Some(all)) if local == all && !user_set => Some("sm"),
        _ => None,
    }
}

/// Initialises MPI when the process was started by `mpirun` (idempotent) and returns
/// `(rank, size)`; `(0, 1)` otherwise. [`world`] calls it, so calling it is optional; calling it
/// first thing in `main` keeps MPI's initialisation ahead of any thread the program starts.
/// MPI is finalised at exit (see [`finalize`]).
pub fn init() -> (usize, usize) {
    *WORLD.get_or_init(|| {
        if !launched() {
            return (0, 1);
        }
        prefer_shared_memory_windows();
        if let Ok(o) = crate::RunOptions::from_env() {
            set_timeout(o.wait_timeout);
        }
        match mpi::initialize_with_threading(mpi::Threading::Multiple) {
            Some((u, _)) => {
                use mpi::traits::Communicator;
                let w = u.world();
                let rs = (w.rank() as usize, w.size() as usize);
                // SAFETY: collective over the world, right after initialisation on every rank.
                let control = unsafe {
                    let mut c: ffi::MPI_Comm = std::mem::zeroed();
                    ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut c);
                    c
                };
                let _ = CONTROL.set(Comm(control));
                // SAFETY: as above.
                let barriers = unsafe {
                    let mut c: ffi::MPI_Comm = std::mem::zeroed();
                    ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut c);
                    c
                };
                let _ = BARRIERS.set(Comm(barriers));
                if let Ok(mut g) = UNIVERSE.lock() {
                    *g = Some(u);
                }
                // A panic on one rank must end the job, not leave the others waiting.
                let prev = std::panic::take_hook();
                let rank = rs.0;
                std::panic::set_hook(Box::new(move |info| {
                    prev(info);
                    let _ = writeln!(
                        crate::stderr_lines(),
                        "error: rank {rank} panicked (above); ending the job"
                    );
                    abort(1);
                }));
                // SAFETY: registers a plain `extern "C" fn()` with the C library.
                unsafe {
                    atexit(at_exit);
                }
                watchdog::start(rs.0);
                rs
            }
            None => (0, 1),
        }
    })
}

/// `(rank, size)` of this process; `(0, 1)` without a launcher. Initialises MPI on first use
/// when a launcher (`mpirun`, Open MPI's or MPICH's) started the process.
pub fn world() -> (usize, usize) {
    init()
}

extern "C" {
    fn atexit(f: extern "C" fn()) -> i32;
    fn _exit(code: i32) -> !;
}

/// The `atexit` handler: [`finalize`], if the program did not.
extern "C" fn at_exit() {
    finalize();
}

/// The wait timeout of the latest agreement, in seconds: the exit agreement waits that long.
static TIMEOUT_S: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(60);

fn set_timeout(t: Duration) {
    TIMEOUT_S.store(t.as_secs().max(1), std::sync::atomic::Ordering::Relaxed);
}

fn timeout() -> Duration {
    Duration::from_secs(TIMEOUT_S.load(std::sync::atomic::Ordering::Relaxed))
}

/// How long past its limit a blocking MPI call may run before the watchdog ends the job.
pub const GRACE: Duration = Duration::from_secs(2);

pub(crate) mod launch;
mod served;
pub(crate) use served::gather_trace;
mod watchdog;

/// Whether ranks are MPI processes in this run.
pub fn active() -> bool {
    world().1 > 1 || UNIVERSE.lock().map(|g| g.is_some()).unwrap_or(false)
}

/// Finalises MPI (idempotent; eagle calls it at exit, so calling it is optional). First the
/// ranks agree that every one of them reached the end of the program, within the wait
/// timeout: a rank still at work elsewhere (one rank called `exit(0)` in the middle of a run)
/// makes this an error naming the ranks and both points, and the job is aborted (exit status
/// 1) rather than finalised.
pub fn finalize() {
    let Some(u) = UNIVERSE.lock().ok().and_then(|mut g| g.take()) else {
        return;
    };
    if world().1 > 1 {
        let _ = agree(&Stance::at("the end of the program (exit)"), timeout());
    }
    // The kept windows are freed collectively: every rank is here.
    drop(KEPT.lock().unwrap_or_else(|e| e.into_inner()).take());
    let _s = watchdog::enter("MPI_Finalize", -1, timeout());
    drop(u);
}

/// Ends every rank of the job with `code`, after giving the launcher 200 ms to forward what
/// this rank printed (MPICH's hydra drops a killed rank's last lines otherwise).
pub fn abort(code: i32) -> ! {
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_millis(200));
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
    let _ = writeln!(
        crate::stderr_lines(),
        "error: rank {}: {message}",
        world().0
    );
    abort(1)
}

/// Prints `e` as rank `rank`'s error and ends the job.
pub fn fail_job(rank: usize, e: &RuntimeError) -> ! {
    let _ = rank;
    let _ = writeln!(crate::stderr_lines(), "error: {e}");
    abort(1)
}

/// Every rank's stance at one point, by rank: point-to-point messages on the control
/// communicator (one to every peer), polled against `timeout`.
///
/// A rank that does not send its stance within `timeout` is named in the error this rank
/// prints, and the job is aborted: the ranks that did arrive could not go on without it.
pub fn stances(mine: &Stance, timeout: Duration) -> Vec<Stance> {
    let (rank, size) = world();
    let Some(comm) = CONTROL.get().map(|c| c.0) else {
        return vec![mine.clone()];
    };
    let msg = mine.encode();
    // SAFETY: a null request handle to fill in.
    let mut sends: Vec<ffi::MPI_Request> = vec![unsafe { ffi::RSMPI_REQUEST_NULL }; size];
    for (q, req) in sends.iter_mut().enumerate() {
        if q != rank {
            // SAFETY: `msg` outlives the request (it is completed below before returning).
            unsafe {
                ffi::MPI_Isend(
                    msg.as_ptr().cast(),
                    msg.len() as i32,
                    ffi::RSMPI_UINT8_T,
                    q as i32,
                    AGREE_TAG,
                    comm,
                    req,
                );
            }
        }
    }
    let mut got: Vec<Option<Stance>> = (0..size).map(|_| None).collect();
    got[rank] = Some(mine.clone());
    let mut sent = vec![false; size];
    sent[rank] = true;
    let start = Instant::now();
    loop {
        for q in 0..size {
            if got[q].is_none() {
                let mut flag = 0;
                // SAFETY: a status to fill in; probing one source and tag.
                let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
                unsafe {
                    ffi::MPI_Iprobe(q as i32, AGREE_TAG, comm, &mut flag, &mut status);
                }
                if flag != 0 {
                    let mut n = 0;
                    // SAFETY: the probed message has `n` bytes; `buf` holds them.
                    let buf = unsafe {
                        ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut n);
                        let mut buf = vec![0u8; n.max(0) as usize];
                        ffi::MPI_Recv(
                            buf.as_mut_ptr().cast(),
                            n,
                            ffi::RSMPI_UINT8_T,
                            q as i32,
                            AGREE_TAG,
                            comm,
                            ffi::RSMPI_STATUS_IGNORE,
                        );
                        buf
                    };
                    got[q] = Some(Stance::decode(&buf).unwrap_or_else(|| {
                        Stance::at(format!(
                            "an unreadable agreement message ({} bytes)",
                            buf.len()
                        ))
                    }));
                }
            }
            if !sent[q] {
                let mut flag = 0;
                // SAFETY: testing a request this function started.
                unsafe {
                    ffi::MPI_Test(&mut sends[q], &mut flag, ffi::RSMPI_STATUS_IGNORE);
                }
                sent[q] = flag != 0;
            }
        }
        if got.iter().all(Option::is_some) && sent.iter().all(|s| *s) {
            return got.into_iter().flatten().collect();
        }
        if start.elapsed() > timeout {
            let missing: Vec<usize> = (0..size)
                .filter(|&q| got[q].is_none() || !sent[q])
                .collect();
            let e = RuntimeError::RanksMissing {
                rank,
                point: mine.point.clone(),
                missing,
                secs: timeout.as_secs(),
            };
            let _ = writeln!(crate::stderr_lines(), "error: {e}; ending the job");
            abort(1);
        }
        backoff(start);
    }
}

/// Waits for `req` with `MPI_Test`, yielding between tests (see [`backoff`]).
fn complete(req: &mut ffi::MPI_Request) {
    let start = Instant::now();
    loop {
        let mut done = 0;
        // SAFETY: testing a request the caller started.
        unsafe {
            ffi::MPI_Test(req, &mut done, ffi::RSMPI_STATUS_IGNORE);
        }
        if done != 0 {
            return;
        }
        backoff(start);
    }
}

/// One step of a polling loop that started at `start`: yield for the first 2 ms, then sleep
/// 50 us per step, so that ranks waiting on a late peer leave the cores to it (ranks are often
/// oversubscribed: `mpirun --oversubscribe` on a laptop or in CI).
fn backoff(start: Instant) {
    if start.elapsed() < Duration::from_millis(2) {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// The ranks agree at `mine.point` (see [`crate::agree`] for the rule): every rank gets the
/// same verdict. Without MPI (one rank) this always agrees.
///
/// Ranks at different points (one skipped a launch, or runs another program) are out of step
/// for good: every later agreement would pair the wrong messages. So that verdict is printed
/// by each rank that sees it and the job is aborted.
///
/// # Errors
/// [`RuntimeError::RanksDisagree`] when the ranks hold different facts,
/// [`RuntimeError::RankFailed`] when a rank brought an error. A rank that does not arrive
/// within `timeout` aborts the job (see [`stances`]).
pub fn agree(mine: &Stance, timeout: Duration) -> Result<(), RuntimeError> {
    if world().1 <= 1 {
        return Ok(());
    }
    set_timeout(timeout);
    let all = stances(mine, timeout);
    let verdict = judge(world().0, &all);
    if verdict.is_err() && all.iter().any(|s| s.point != mine.point) {
        if let Err(e) = &verdict {
            let _ = writeln!(
                crate::stderr_lines(),
                "error: rank {}: {e}; ending the job",
                world().0
            );
        }
        abort(1);
    }
    verdict
}

/// Whether every rank succeeded (the ranks exchange their votes within `timeout`): ranks
/// agree on success. `error` is this rank's own failure, if any: a rank that is at another
/// point (a launch this rank never reached) is told it, so every rank prints the cause.
pub fn all_ok(error: Option<String>, timeout: Duration) -> bool {
    let mine = Stance::at("the final success vote").failed(error);
    agree(&mine, timeout).is_ok()
}

/// Every rank's `digest` (index = rank), exchanged within `timeout`: for comparing outputs.
pub fn digests(digest: u64, timeout: Duration) -> Vec<u64> {
    let mine = Stance::at("an output digest comparison").fact("digest", format!("{digest:016x}"));
    stances(&mine, timeout)
        .iter()
        .map(|s| {
            s.facts
                .first()
                .and_then(|f| u64::from_str_radix(&f.1, 16).ok())
                .unwrap_or(u64::MAX)
        })
        .collect()
}

/// Gathers `mine` (this rank's bytes) from every rank, in rank order, given every rank's count
/// (a copy of `mine` on one rank, with or without MPI).
pub fn allgather_bytes(mine: &[u8], counts: &[usize]) -> Vec<u8> {
    if world().1 <= 1 {
        return mine.to_vec();
    }
    let _s = watchdog::enter("an all-gather of outputs (MPI_Allgatherv)", -1, timeout());
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

/// The RMA windows of one run, and the arrival counters of its barriers.
pub(crate) struct Windows {
    wins: Vec<ffi::MPI_Win>,
    bases: Vec<*mut u8>,
    bytes: Vec<usize>,
    /// One `u64` slot per rank: slot q counts the barriers rank q has arrived at.
    arrivals: ffi::MPI_Win,
    /// Barriers this rank has entered with these windows (they outlive a run: [`KEPT`]).
    barriers: Cell<u64>,
}

// SAFETY: the window handles and base pointers are owned by this value alone; it moves
// between threads only through `KEPT`, under its lock, and MPI runs with
// `MPI_THREAD_MULTIPLE`.
unsafe impl Send for Windows {}

/// The windows of the last run, kept for the next one (`MPI_Win_allocate` and `MPI_Win_free`
/// are collective and slow: about 70 ms and 20 ms a launch under MPICH 4.0 ch4:ucx at np = 3
/// on 2 cores). Every rank keeps and reuses the same windows: every rank ran the same
/// launches with the same window lists (both agreed), so every rank takes the same branch.
static KEPT: Mutex<Option<Windows>> = Mutex::new(None);

/// Allocates one window of `b` bytes, collectively; [`Windows::allocate`] zeroes it.
///
/// Every rank's part is padded to a multiple of 64 bytes (a cache line): with windows of 24
/// bytes at np = 3, MPICH 4.0.2 (ch4:ucx, one node) applied a fetch-and-add aimed at one rank's
/// part to another's, and lost puts; padded, every fault case and every step matches `sim`.
fn allocate_window(b: usize) -> (ffi::MPI_Win, *mut u8) {
    let mut base: *mut u8 = std::ptr::null_mut();
    // SAFETY: an opaque handle to fill in.
    let mut win: ffi::MPI_Win = unsafe { std::mem::zeroed() };
    // SAFETY: collective over the world; `base` receives the local allocation of b.max(8) bytes.
    unsafe {
        ffi::MPI_Win_allocate(
            b.max(8).next_multiple_of(64) as ffi::MPI_Aint,
            1,
            ffi::RSMPI_INFO_NULL,
            ffi::RSMPI_COMM_WORLD,
            (&mut base as *mut *mut u8).cast(),
            &mut win,
        );
    }
    (win, base)
}

impl Windows {
    /// Allocates (collectively) one window per entry of `bytes` and the barrier counters,
    /// zeroes them, waits until every rank has (an agreement), and opens a passive-target epoch
    /// on all of them. The ranks have agreed on `bytes` before (invariant 6).
    pub(crate) fn allocate(bytes: &[usize], timeout: Duration) -> Windows {
        let (_, size) = world();
        let _s = watchdog::enter("the window allocation (MPI_Win_allocate)", -1, timeout);
        let kept = KEPT.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = kept {
            if w.bytes == bytes {
                // The same windows as the last run: zeroed again, like new ones. Nothing is in
                // flight into them (every put and notify was flushed before the last run's
                // closing agreement).
                for (&base, &b) in w.bases.iter().zip(bytes) {
                    // SAFETY: the local part of the window holds b.max(8) bytes.
                    unsafe { std::ptr::write_bytes(base, 0, b.max(8)) };
                }
                w.sync_all();
                let _ = agree(&Stance::at("the window allocation"), timeout);
                return w;
            }
            // Other sizes: freed (collectively) before the new ones are allocated.
            drop(w);
        }
        let (arrivals, arrivals_base) = allocate_window(size * 8);
        let mut w = Windows {
            wins: vec![],
            bases: vec![],
            bytes: bytes.to_vec(),
            arrivals,
            barriers: Cell::new(0),
        };
        for &b in bytes {
            let (win, base) = allocate_window(b);
            w.wins.push(win);
            w.bases.push(base);
        }
        for &win in w.wins.iter().chain(std::iter::once(&w.arrivals)) {
            // SAFETY: an epoch per window for the whole run (invariant 2).
            unsafe {
                ffi::MPI_Win_lock_all(0, win);
            }
        }
        // Zero with plain stores inside the epoch, then `MPI_Win_sync`, so that the stores
        // reach the window's public copy before any peer writes into it (an MPI whose windows
        // follow the separate memory model would otherwise apply them later, over the peers'
        // data). Nobody writes into a window before every rank has zeroed its own: the
        // agreement. Its verdict cannot differ: every rank is here, with no facts.
        for (&base, &b) in w.bases.iter().zip(bytes) {
            // SAFETY: the local part of the window holds b.max(8) bytes.
            unsafe { std::ptr::write_bytes(base, 0, b.max(8)) };
        }
        w.sync_all();
        // SAFETY: as above, for the arrival counters (size * 8 bytes).
        unsafe {
            std::ptr::write_bytes(arrivals_base, 0, size * 8);
            ffi::MPI_Win_sync(w.arrivals);
        }
        let _ = agree(&Stance::at("the window allocation"), timeout);
        w
    }

    /// Keeps these windows for the next run (see [`KEPT`]).
    pub(crate) fn keep(self) {
        *KEPT.lock().unwrap_or_else(|e| e.into_inner()) = Some(self);
    }

    fn sync_all(&self) {
        for &win in &self.wins {
            // SAFETY: inside the lock_all epoch.
            unsafe {
                ffi::MPI_Win_sync(win);
            }
        }
    }

    /// The barrier of invariant 4: returns the ranks that had not arrived when `timeout` ran
    /// out, or an empty list.
    fn barrier(&self, me: usize, size: usize, timeout: Duration) -> Vec<usize> {
        let k = self.barriers.get() + 1;
        self.barriers.set(k);
        let _s = watchdog::enter("a barrier", -1, timeout);
        self.sync_all();
        let one = 1u64;
        for q in 0..size {
            // SAFETY: one u64 at slot `me` (in bounds: the window has `size` slots); completed
            // by a later flush (a timeout below) or by the window's free.
            unsafe {
                ffi::MPI_Accumulate(
                    (&one as *const u64).cast(),
                    1,
                    ffi::RSMPI_UINT64_T,
                    q as i32,
                    (me * 8) as ffi::MPI_Aint,
                    1,
                    ffi::RSMPI_UINT64_T,
                    ffi::RSMPI_SUM,
                    self.arrivals,
                );
            }
        }
        let Some(comm) = BARRIERS.get().map(|c| c.0) else {
            return vec![];
        };
        // SAFETY: a request handle to fill in; the barrier communicator lives for the process.
        let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        unsafe {
            ffi::MPI_Ibarrier(comm, &mut req);
        }
        let start = Instant::now();
        let mut limit = timeout;
        loop {
            let mut done = 0;
            // SAFETY: testing the request started above.
            unsafe {
                ffi::MPI_Test(&mut req, &mut done, ffi::RSMPI_STATUS_IGNORE);
            }
            if done != 0 {
                self.sync_all();
                return vec![];
            }
            if start.elapsed() > limit {
                // Name the ranks that did not arrive from this rank's own slots: every rank
                // that reached the barrier has polled (and so progressed) since it added its
                // arrival. No flush: one to a peer that makes no progress would block (MPICH),
                // and this rank has plainly arrived itself.
                watchdog::note("a barrier that timed out, reading its arrivals", -1);
                let pending: Vec<usize> = (0..size)
                    .filter(|&q| {
                        q != me
                            && atomic_read(self.arrivals, me, q * 8, sigkind::U64)
                                < k as i64 as i128
                    })
                    .collect();
                if !pending.is_empty() {
                    return pending;
                }
                // Every rank has arrived: the barrier completes as soon as they progress.
                limit = limit.saturating_add(Duration::from_secs(1));
            }
            backoff(start);
        }
    }
}

/// Adds `delta` to the signal element of `kind` at byte `off` of rank `target`'s part of
/// `win` atomically (`MPI_Rget_accumulate` of one element with `MPI_SUM`: a fetch-and-add)
/// and returns the value it held before, as an `i128` of its dtype's value. Every access to a
/// signal or an arrival counter is this one operation (invariant 3): MPI promises atomicity
/// between accumulates only for the same op (the `accumulate_ops = same_op_no_op` default),
/// and MPICH's ch4 really does lose updates when `MPI_SUM` and compare-and-swap meet on one
/// element. The request completes once the old value is back, so the add is done at the
/// target; it is polled with yields ([`complete`]), never waited for in a spinning
/// `MPI_Win_flush`.
fn fetch_add(win: ffi::MPI_Win, target: usize, off: usize, kind: u32, delta: i64) -> i128 {
    let mut got = 0i64;
    // SAFETY: a request handle to fill in.
    let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
    // SAFETY: one element of `kind` (at most 8 bytes, the low bytes of `delta` and `got`,
    // little-endian) at an in-bounds offset the caller checked; `delta` and `got` live until
    // the request completes below.
    unsafe {
        ffi::MPI_Rget_accumulate(
            (&delta as *const i64).cast(),
            1,
            dtype(kind),
            (&mut got as *mut i64).cast(),
            1,
            dtype(kind),
            target as i32,
            off as ffi::MPI_Aint,
            1,
            dtype(kind),
            ffi::RSMPI_SUM,
            win,
            &mut req,
        );
    }
    complete(&mut req);
    sigkind::value(got, kind)
}

/// Reads one signal element atomically: [`fetch_add`] of zero.
fn atomic_read(win: ffi::MPI_Win, target: usize, off: usize, kind: u32) -> i128 {
    fetch_add(win, target, off, kind, 0)
}

impl Drop for Windows {
    fn drop(&mut self) {
        let _s = watchdog::enter("freeing the windows (MPI_Win_free)", -1, timeout());
        for win in self
            .wins
            .iter_mut()
            .chain(std::iter::once(&mut self.arrivals))
        {
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
    pub(crate) error: Option<Cause>,
    /// Puts to peers not yet complete at their targets (invariant 2): window, target, byte
    /// range, and the copy of the bytes they send from.
    pub(crate) pending: Vec<Pending>,
    /// The bytes `pending` holds.
    pub(crate) pending_bytes: usize,
    /// The timeline recorder, when the run records one.
    pub(crate) trace: Option<crate::trace::Trace>,
    /// Compute kernel calls under way, while a timeline records: call site and start.
    pub(crate) calls: Vec<(u32, u64)>,
}

/// A put to a peer not yet complete at its target.
pub(crate) struct Pending {
    win: usize,
    target: usize,
    start: u64,
    end: u64,
    /// The bytes the put sends from (MPI reads them until the put completes).
    _bytes: Vec<u8>,
}

/// Pending puts beyond this many bytes are completed at once.
const PENDING_BYTES: usize = 64 << 20;

impl MpiEnv<'_> {
    /// Completes every pending put at its target: one `MPI_Win_flush` per window and target.
    pub(crate) fn complete_puts(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let _s = watchdog::enter("completing puts (MPI_Win_flush)", -1, self.timeout);
        let mut done: Vec<(usize, usize)> = vec![];
        for p in &self.pending {
            if !done.contains(&(p.win, p.target)) {
                watchdog::note("completing a put (MPI_Win_flush)", p.target as i64);
                // SAFETY: inside the lock_all epoch of the window.
                unsafe {
                    ffi::MPI_Win_flush(p.target as i32, self.wins.wins[p.win]);
                }
                done.push((p.win, p.target));
            }
        }
        self.pending.clear();
        self.pending_bytes = 0;
    }

    /// Completes the pending puts when one overlaps bytes `start..end` of `win` on `target`.
    fn complete_overlapping(&mut self, win: usize, target: usize, start: u64, end: u64) {
        if self
            .pending
            .iter()
            .any(|p| p.win == win && p.target == target && p.start < end && start < p.end)
        {
            self.complete_puts();
        }
    }
}

unsafe fn env<'r>(ctx: *mut DeviceCtx) -> &'r mut MpiEnv<'r> {
    // SAFETY: `env` is the MpiEnv the runtime passed with this ctx.
    unsafe { &mut *((*ctx).env as *mut MpiEnv<'r>) }
}

fn fail(e: &mut MpiEnv<'_>, cause: Cause) -> i32 {
    e.error.get_or_insert(cause);
    1
}

/// [`crate::exec::check_region`] on this job's windows, the message prefixed with the op's
/// function, text and source line (`site`).
fn region(
    e: &MpiEnv<'_>,
    what: &str,
    win: u64,
    peer: i64,
    off: u64,
    n: u64,
    site: u32,
) -> Result<usize, String> {
    let window = e.wins.bytes.get(win as usize).map(|&b| (b, None));
    crate::exec::check_region(what, e.size, window, win, peer, off, n)
        .map_err(|m| format!("{}{m}", e.art.site_prefix(site)))
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
    match region(e, "put", win, peer, off, n, site) {
        Ok(p) => {
            let _s = watchdog::enter("a put (MPI_Put)", p as i64, e.timeout);
            let w = e.wins.wins[win as usize];
            e.complete_overlapping(win as usize, p, off, off + n);
            // SAFETY: bounds checked by `region`; `src` spans n bytes.
            let bytes = unsafe { std::slice::from_raw_parts(src, n as usize) }.to_vec();
            // SAFETY: `bytes` stays alive (in `pending`) until the put is complete; inside
            // the lock_all epoch.
            unsafe {
                ffi::MPI_Win_sync(w);
                ffi::MPI_Put(
                    bytes.as_ptr().cast(),
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    p as i32,
                    off as ffi::MPI_Aint,
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    w,
                );
            }
            e.pending_bytes += bytes.len();
            e.pending.push(Pending {
                win: win as usize,
                target: p,
                start: off,
                end: off + n,
                _bytes: bytes,
            });
            // A put to itself is read with plain loads: complete at once (invariant 2).
            if p == e.rank || e.pending_bytes > PENDING_BYTES {
                e.complete_puts();
            }
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
    let e = unsafe { env(ctx) };
    match region(e, "get", win, peer, off, n, site) {
        Ok(p) => {
            let _s = watchdog::enter("a get (MPI_Rget)", p as i64, e.timeout);
            e.complete_overlapping(win as usize, p, off, off + n);
            let w = e.wins.wins[win as usize];
            // SAFETY: a request handle to fill in.
            let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: bounds checked; `dst` spans n bytes; the data is in `dst` once the
            // request completes (a get needs no completion at the target). Polled with
            // `MPI_Test` and yields rather than waited in `MPI_Win_flush`, which spins: under
            // MPICH ch4:ucx with more ranks than cores the target may not be scheduled (a
            // hand-written mesh allreduce, a get per element, took 8.9 s at np = 3).
            unsafe {
                ffi::MPI_Rget(
                    dst.cast(),
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    p as i32,
                    off as ffi::MPI_Aint,
                    n as i32,
                    ffi::RSMPI_UINT8_T,
                    w,
                    &mut req,
                );
            }
            complete(&mut req);
            0
        }
        Err(m) => fail(e, Cause::Access(m)),
    }
}

/// Another process's bytes cannot be read in place: copied into `scratch` as by `h_get`.
unsafe fn get_view_body(
    ctx: *mut DeviceCtx,
    win: u64,
    peer: i64,
    off: u64,
    scratch: *mut u8,
    n: u64,
    site: u32,
) -> *const u8 {
    match unsafe { get_body(ctx, win, peer, off, scratch, n, site) } {
        0 => scratch,
        _ => std::ptr::null(),
    }
}

/// Sets the signal element of `kind` at byte `off` of rank `target`'s part of `win` to `value`
/// with [`fetch_add`] only: add the difference from the value read; if another rank changed
/// the element in between, add the difference again from what the add found. With one writer
/// (what `Set` is for) this is one read and one add; concurrent `Set`s end at one of their
/// values, as on `sim`.
///
/// # Safety
/// `off` is an in-bounds, aligned offset of a `kind` element; inside the lock_all epoch.
unsafe fn set_signal(win: ffi::MPI_Win, target: usize, off: usize, kind: u32, value: i64) {
    let want = sigkind::value(value, kind);
    let mut cur = atomic_read(win, target, off, kind);
    while cur != want {
        let delta = value.wrapping_sub(cur as i64);
        let before = fetch_add(win, target, off, kind, delta);
        if before == cur {
            return;
        }
        // Someone changed it: it now holds `before + delta` (wrapping in the element's dtype).
        cur = sigkind::value((before as i64).wrapping_add(delta), kind);
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
    let width = sigkind::width(kind) as u64;
    match region(e, "notify", win, peer, off, width, site) {
        Ok(p) => {
            let _s = watchdog::enter("a notify (an atomic MPI accumulate)", p as i64, e.timeout);
            // Release: every earlier put is complete at its target first (invariant 2).
            e.complete_puts();
            let w = e.wins.wins[win as usize];
            // A signal is only ever touched by atomic RMA operations (invariant 3). A plain
            // `MPI_Put` here would race with the waiter's read (MPI calls that conflicting
            // access erroneous; Open MPI's shared-memory windows lose the update).
            // Release: the kernel's plain stores into any window reach its public copy first.
            e.wins.sync_all();
            // SAFETY: one element of `kind` at an in-bounds, aligned offset; complete at the
            // target when it returns (a fetch-and-add's old value is back).
            unsafe {
                if op == 1 {
                    fetch_add(w, p, off as usize, kind, value);
                } else {
                    set_signal(w, p, off as usize, kind, value);
                }
            }
            0
        }
        Err(m) => fail(e, Cause::Access(m)),
    }
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
    let width = sigkind::width(kind) as u64;
    let me = e.rank as i64;
    if let Err(m) = region(e, "wait", win, me, off, width, site) {
        return fail(e, Cause::Access(m));
    }
    let w = e.wins.wins[win as usize];
    let start = Instant::now();
    let want = sigkind::value(expected, kind);
    let _s = watchdog::enter("a wait (polling its signal)", -1, e.timeout);
    loop {
        let v = atomic_read(w, e.rank, off as usize, kind);
        if sigkind::holds(cmp, v, want) {
            e.wins.sync_all();
            return 0;
        }
        if start.elapsed() > e.timeout {
            let at = e.art.site_prefix(site);
            return fail(e, Cause::WaitTimeout(format!("{at}a wait on window #{win} did not complete within {} s (the peer that should notify may be waiting too: a deadlock across processes; EAGLE_WAIT_TIMEOUT_S)", e.timeout.as_secs())));
        }
        backoff(start);
    }
}

unsafe fn barrier_body(ctx: *mut DeviceCtx, site: u32) -> i32 {
    let e = unsafe { env(ctx) };
    // Release: every earlier put is complete at its target first (invariant 2).
    e.complete_puts();
    let missing = e.wins.barrier(e.rank, e.size, e.timeout);
    if missing.is_empty() {
        return 0;
    }
    let at = e.art.site_prefix(site);
    let m = format!(
        "{at}barrier #{} did not complete within {} s: rank(s) {missing:?} did not arrive (a rank that stopped or failed, or ranks that run a different number of barriers; EAGLE_WAIT_TIMEOUT_S / --wait-timeout)",
        e.wins.barriers.get(),
        e.timeout.as_secs()
    );
    fail(e, Cause::BarrierTimeout(m))
}

unsafe extern "C" fn h_fault(ctx: *mut DeviceCtx, site: u32, a: i64, b: i64) -> i32 {
    let e = unsafe { env(ctx) };
    let m = e.art.fault_message(site, a, b);
    fail(e, Cause::Fault(m))
}

unsafe extern "C" fn h_track_write(_ctx: *mut DeviceCtx, _win: u64, _off: u64, _n: u64) -> i32 {
    0
}

unsafe extern "C" fn h_track_read(
    _ctx: *mut DeviceCtx,
    _win: u64,
    _off: u64,
    _n: u64,
    _site: u32,
) -> i32 {
    0
}

/// The hook table of the MPI transport.
pub(crate) static HOOKS: Hooks = Hooks {
    window_base: h_window_base,
    put: traced::put::<served::MpiHooks>,
    get: traced::get::<served::MpiHooks>,
    get_view: traced::get_view::<served::MpiHooks>,
    notify: traced::notify::<served::MpiHooks>,
    wait: traced::wait::<served::MpiHooks>,
    barrier: traced::barrier::<served::MpiHooks>,
    fault: h_fault,
    track_write: h_track_write,
    track_read: h_track_read,
    trace: traced::trace::<served::MpiHooks>,
};

/// Builds the context for one call.
pub(crate) fn device_ctx(env: &mut MpiEnv<'_>) -> DeviceCtx {
    DeviceCtx {
        rank: env.rank as u64,
        nranks: env.size as u64,
        hooks: &HOOKS,
        trace: env.trace.is_some() as u64,
        env: env as *mut MpiEnv<'_> as *mut c_void,
    }
}

/// Gathers `mine` (this rank's values) from every rank into `out`, in rank order, given every
/// rank's count: an all-gather-varcount of `f64` with no staging copies.
pub fn allgather_f64_into(mine: &[f64], counts: &[usize], out: &mut [f64]) {
    if world().1 <= 1 {
        let n = mine.len().min(out.len());
        out[..n].copy_from_slice(&mine[..n]);
        return;
    }
    let _s = watchdog::enter("an all-gather of a plane (MPI_Allgatherv)", -1, timeout());
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

#[cfg(test)]
mod tests {
    use super::osc_choice;

    #[test]
    fn shared_memory_windows_only_on_one_node_and_only_when_the_user_chose_none() {
        assert_eq!(osc_choice(Some("4"), Some("4"), false), Some("sm"));
        assert_eq!(osc_choice(Some("4"), Some("4"), true), None);
        assert_eq!(osc_choice(Some("2"), Some("4"), false), None);
        assert_eq!(osc_choice(None, None, false), None);
    }
}
