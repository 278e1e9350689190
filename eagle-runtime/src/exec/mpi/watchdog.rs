//! The watchdog of invariant 9 (module docs of `super`): a thread of its own that prints the
//! verdict and ends the job when a blocking MPI call outlives the wait timeout plus `GRACE`.

use super::*;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// When the open section must end, in milliseconds since [`epoch`]; 0 when none is open.
static DEADLINE_MS: AtomicU64 = AtomicU64::new(0);
/// Its limit, in seconds (for the message).
static LIMIT_S: AtomicU64 = AtomicU64::new(0);
/// Nesting depth: only the outermost section sets and clears the deadline.
static DEPTH: AtomicU32 = AtomicU32::new(0);
/// What the section is doing, and the peer it waits on (-1: none).
static WHAT: Mutex<(&str, i64)> = Mutex::new(("", -1));
static EPOCH: OnceLock<Instant> = OnceLock::new();

fn now_ms() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// An open section; closes when dropped.
pub(crate) struct Section;

impl Drop for Section {
    fn drop(&mut self) {
        if DEPTH.fetch_sub(1, Ordering::AcqRel) == 1 {
            DEADLINE_MS.store(0, Ordering::Release);
        }
    }
}

/// Opens a section doing `what` with `peer`, which must end within `limit` plus
/// [`GRACE`].
pub(crate) fn enter(what: &'static str, peer: i64, limit: Duration) -> Section {
    if DEPTH.fetch_add(1, Ordering::AcqRel) == 0 {
        note(what, peer);
        LIMIT_S.store(limit.as_secs(), Ordering::Relaxed);
        DEADLINE_MS.store(
            now_ms().saturating_add(
                u64::try_from(limit.saturating_add(GRACE).as_millis()).unwrap_or(u64::MAX),
            ),
            Ordering::Release,
        );
    }
    Section
}

/// Says what the open section is doing now.
pub(crate) fn note(what: &'static str, peer: i64) {
    *WHAT.lock().unwrap_or_else(|e| e.into_inner()) = (what, peer);
}

/// Starts the watchdog thread of rank `rank`.
pub(crate) fn start(rank: usize) {
    let _ = std::thread::Builder::new()
        .name("eagle-mpi-watchdog".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            let d = DEADLINE_MS.load(Ordering::Acquire);
            if d == 0 || now_ms() <= d {
                continue;
            }
            let (what, peer) = *WHAT.lock().unwrap_or_else(|e| e.into_inner());
            let on = if peer >= 0 {
                format!(" (waiting on rank {peer})")
            } else {
                String::new()
            };
            let _ = writeln!(
                crate::stderr_lines(),
                "error: rank {rank}: {what}{on} did not return within {} s (the wait timeout) + {} s: a peer makes no MPI progress (a stopped process, or one busy outside MPI: this MPI progresses one-sided operations only inside the target's MPI calls; MPICH's MPIR_CVAR_ASYNC_PROGRESS=1 progresses them in the background); ending the job",
                LIMIT_S.load(Ordering::Relaxed),
                GRACE.as_secs()
            );
            hard_abort();
        });
}

/// Ends the job from the watchdog: `MPI_Abort` from a thread of its own (it may block
/// too, behind the stuck call), and this process's `_exit(1)` if it has not returned
/// within 3 s: the launcher then ends the other ranks.
fn hard_abort() -> ! {
    let _ = std::io::stderr().flush();
    let _ = std::io::stdout().flush();
    let _ = std::thread::Builder::new().spawn(|| {
        std::thread::sleep(Duration::from_millis(200));
        // SAFETY: MPI is initialised (the watchdog starts after it).
        unsafe {
            ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 1);
        }
    });
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: ends this process at once, without running exit handlers (which would
    // enter MPI again).
    unsafe { _exit(1) }
}
