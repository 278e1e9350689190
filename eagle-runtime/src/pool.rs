//! Device threads that outlive a run: starting P threads per launch cost more than the
//! launch itself. A run reserves idle workers for itself alone (spawning what is missing),
//! so concurrent runs never share a worker: every task of a run is running at once, which
//! device programs that wait on each other need.
//!
//! Hand-offs avoid the kernel where they can. A worker that finishes a task watches its slot
//! for [`SPIN`] before it parks, and the caller watches the run's countdown the same way, so
//! back-to-back launches pass tasks and results through memory, not through a futex wake-up
//! (about 10 us each on a 2-core VM, most of a launch). A parked worker costs nothing.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;
use std::time::{Duration, Instant};

type Task = Box<dyn FnOnce() + Send + 'static>;

/// How long a worker that finished a task, or a caller waiting for its run, watches memory
/// before it parks.
const SPIN: Duration = Duration::from_micros(200);

/// One result slot per task.
type Slots<T> = Vec<Mutex<Option<Result<T, String>>>>;

/// A slot's states.
const EMPTY: u32 = 0;
const READY: u32 = 1;
const PARKED: u32 = 2;

/// The hand-off between a caller and one worker.
struct Slot {
    task: Mutex<Option<Task>>,
    state: AtomicU32,
    thread: Thread,
}

impl Slot {
    /// Gives the worker `task`; wakes it if it parked.
    fn give(&self, task: Task) {
        *self.task.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        if self.state.swap(READY, Ordering::AcqRel) == PARKED {
            self.thread.unpark();
        }
    }

    /// The worker's wait for its next task: watches for [`SPIN`], then parks.
    fn take(&self) -> Task {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if self.state.load(Ordering::Acquire) == READY {
                break;
            }
            spins += 1;
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() < SPIN {
                std::thread::yield_now();
                continue;
            }
            if self
                .state
                .compare_exchange(EMPTY, PARKED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                while self.state.load(Ordering::Acquire) == PARKED {
                    std::thread::park();
                }
            }
        }
        self.state.store(EMPTY, Ordering::Release);
        loop {
            if let Some(t) = self.task.lock().unwrap_or_else(|e| e.into_inner()).take() {
                return t;
            }
            // `give` stores the task before it flags READY, so this is not reached; stay safe.
            std::hint::spin_loop();
        }
    }
}

struct Worker {
    slot: Arc<Slot>,
    /// The bytes of stack its thread was started with: a run takes only workers with at
    /// least the stack it asks for.
    stack: usize,
}

static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

/// The process the workers in [`IDLE`] belong to. A child made by `fork` (Python's
/// `multiprocessing` does it) inherits the list but not the threads: its first run finds a
/// different process id and starts its own workers instead of waiting on threads that do not
/// exist there.
static IDLE_PID: AtomicU32 = AtomicU32::new(0);

/// The idle workers of this process (see [`IDLE_PID`]).
fn idle() -> std::sync::MutexGuard<'static, Vec<Worker>> {
    let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::process::id();
    if IDLE_PID.swap(me, Ordering::AcqRel) != me {
        // Inherited across a fork: their threads are not in this process.
        std::mem::forget(std::mem::take(&mut *idle));
        LIVE.store(0, Ordering::Release);
    }
    idle
}

/// Worker threads alive now (idle or running a task).
static LIVE: AtomicUsize = AtomicUsize::new(0);

std::thread_local! {
    /// Set by the task [`trim`] gives a worker: the worker ends after it.
    static RETIRE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Ends idle workers beyond the first `keep` (a run that needs more starts them again), and
/// returns how many it ended. A session calls it when it is dropped, so that the threads of a
/// large simulated world (one per rank: 1,000 at P = 1,000) do not outlive it. The threads
/// exit as soon as they take their last task; [`live_workers`] counts them until then.
pub fn trim(keep: usize) -> usize {
    let extra = {
        let mut idle = idle();
        let k = idle.len().min(keep);
        idle.split_off(k)
    };
    for w in &extra {
        w.slot.give(Box::new(|| RETIRE.with(|r| r.set(true))));
    }
    extra.len()
}

/// Worker threads alive now, idle or busy.
pub fn live_workers() -> usize {
    LIVE.load(Ordering::Acquire)
}

fn spawn_worker(stack: usize) -> Option<Worker> {
    let (tx, rx) = std::sync::mpsc::channel::<Arc<Slot>>();
    std::thread::Builder::new()
        .name("eagle-device".into())
        .stack_size(stack)
        .spawn(move || {
            struct Alive;
            impl Drop for Alive {
                fn drop(&mut self) {
                    LIVE.fetch_sub(1, Ordering::AcqRel);
                }
            }
            LIVE.fetch_add(1, Ordering::AcqRel);
            let _alive = Alive;
            let Ok(slot) = rx.recv() else { return };
            while !RETIRE.with(|r| r.get()) {
                (slot.take())();
            }
        })
        .ok()
        .map(|h| {
            let slot = Arc::new(Slot {
                task: Mutex::new(None),
                state: AtomicU32::new(EMPTY),
                thread: h.thread().clone(),
            });
            let _ = tx.send(Arc::clone(&slot));
            Worker { slot, stack }
        })
}

/// The caller's wait for the last task of a run.
struct Latch {
    left: AtomicUsize,
    caller: Thread,
}

impl Latch {
    fn count_down(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.caller.unpark();
        }
    }

    fn wait(&self) {
        let start = Instant::now();
        let mut spins = 0u32;
        while self.left.load(Ordering::Acquire) != 0 {
            spins += 1;
            if !spins.is_multiple_of(64) {
                std::hint::spin_loop();
            } else if start.elapsed() < SPIN {
                std::thread::yield_now();
            } else {
                // `count_down` unparks after the last decrement; a stale unpark token only
                // makes one `park` return early, and the loop checks again.
                std::thread::park_timeout(Duration::from_millis(10));
            }
        }
    }
}

/// Bytes of stack left free, beyond the tiles of the device code, for a task run on the
/// caller's thread ([`run_one`], [`run_all_here`]): the executor's, the hooks', the GEMM's and
/// the math kernels' Rust frames.
pub const INLINE_MARGIN: u64 = 1 << 20;

/// Runs `task` on the calling thread when that thread's stack has `need` bytes (the device
/// code's tiles, `eagle_codegen::cpu::CpuCode::stack`) and [`INLINE_MARGIN`] left below this
/// call, else on a worker with `stack` bytes of stack, or `need` and the margin where that is
/// more ([`run_all`]): a launch whose ranks run on one thread needs no hand-off (about half of
/// an empty launch's time on a 2-core VM). A panic is caught and returned as `Err`, as on a
/// worker. The task runs with the caller's floating-point environment (rounding mode,
/// flush-to-zero) where a worker has the one it started with: eagle never changes it, and its
/// bits assume the default one.
///
/// # Errors
/// `Err(message)` when the task panicked or no thread could be started for it.
pub fn run_one<'a, T: Send + 'a>(
    task: Box<dyn FnOnce() -> T + Send + 'a>,
    stack: usize,
    need: u64,
) -> Result<T, String> {
    let room = need.saturating_add(INLINE_MARGIN);
    if stack_left().is_some_and(|left| left as u64 >= room) {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(task)).map_err(panic_message);
    }
    let stack = stack.max(usize::try_from(room).unwrap_or(usize::MAX));
    run_all(vec![task], stack)
        .pop()
        .unwrap_or_else(|| Err("a device task did not report".into()))
}

/// [`run_all`], with the first task on the calling thread when that thread's stack has `need`
/// bytes and [`INLINE_MARGIN`] left below this call ([`run_one`]'s rule; a worker this call
/// starts gets at least that much stack): one hand-off fewer,
/// and no caller spinning beside the workers while it waits (on a machine with as many cores
/// as tasks, a waiting caller takes time from them). A panic is caught as on a worker. The
/// first task runs with the caller's floating-point environment, as [`run_one`]'s does.
///
/// # Errors
/// As [`run_all`], per task.
pub fn run_all_here<'a, T: Send + 'a>(
    mut tasks: Vec<Box<dyn FnOnce() -> T + Send + 'a>>,
    stack: usize,
    need: u64,
) -> Vec<Result<T, String>> {
    let room = need.saturating_add(INLINE_MARGIN);
    let stack = stack.max(usize::try_from(room).unwrap_or(usize::MAX));
    if tasks.is_empty() || stack_left().is_none_or(|left| (left as u64) < room) {
        return run_all(tasks, stack);
    }
    let first = tasks.remove(0);
    let (mine, mut rest) = run_all_and(tasks, stack, || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(first)).map_err(panic_message)
    });
    rest.insert(0, mine);
    rest
}

std::thread_local! {
    /// This thread's stack, lowest address and end, once asked for (`None`: unknown).
    static STACK: std::cell::OnceCell<Option<(usize, usize)>> = const { std::cell::OnceCell::new() };
}

/// Bytes of stack below the caller's frame on this thread, where the platform says
/// (`pthread_getattr_np` on Linux, once per thread); `None` also when the frame is not on the
/// thread's own stack (code running on a stack of its own, such as a coroutine's).
fn stack_left() -> Option<usize> {
    let here = std::hint::black_box(0u8);
    let at = std::ptr::addr_of!(here) as usize;
    let (low, end) = STACK.with(|c| *c.get_or_init(thread_stack))?;
    (low..end).contains(&at).then(|| at - low)
}

#[cfg(target_os = "linux")]
fn thread_stack() -> Option<(usize, usize)> {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: `attr` is initialised by a successful `pthread_getattr_np` before it is read,
    // and destroyed once.
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let mut attr = attr.assume_init();
        let (mut addr, mut size) = (std::ptr::null_mut(), 0usize);
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        ok.then(|| (addr as usize, addr as usize + size))
    }
}

#[cfg(not(target_os = "linux"))]
fn thread_stack() -> Option<(usize, usize)> {
    None
}

/// The message of a caught panic.
fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a device thread panicked".into())
}

/// Runs every task on its own worker thread (of `stack` bytes of stack, for a thread this
/// call starts), all at once, and returns when all are done, the results in task order. A
/// task that panics yields `Err` with its message; the others still run to completion. Used
/// by the simulated devices of a launch and by the HostTeam workers of an execution plan.
///
/// # Errors
/// `Err(message)` in the slot of a task that panicked, or that no thread could be started for.
pub fn run_all<'a, T: Send + 'a>(
    tasks: Vec<Box<dyn FnOnce() -> T + Send + 'a>>,
    stack: usize,
) -> Vec<Result<T, String>> {
    run_all_and(tasks, stack, || ()).1
}

/// [`run_all`], with `here` run on the calling thread while the workers run `tasks` (a team
/// whose caller takes a share itself: one hand-off fewer, and no caller waiting idle). Returns
/// what `here` returned and the tasks' results; a panic in `here` is the caller's own.
///
/// # Errors
/// As [`run_all`], per task.
pub fn run_all_and<'a, T: Send + 'a, R>(
    tasks: Vec<Box<dyn FnOnce() -> T + Send + 'a>>,
    stack: usize,
    here: impl FnOnce() -> R,
) -> (R, Vec<Result<T, String>>) {
    let n = tasks.len();
    let mut workers: Vec<Worker> = {
        // The most recently idle workers first; one started with a smaller stack than this
        // run asks for stays idle (compiled device code keeps tiles on the stack).
        let mut idle = idle();
        let mut taken = Vec::with_capacity(n);
        let mut i = idle.len();
        while i > 0 && taken.len() < n {
            i -= 1;
            if idle[i].stack >= stack {
                taken.push(idle.swap_remove(i));
            }
        }
        taken
    };
    while workers.len() < n {
        match spawn_worker(stack) {
            Some(w) => workers.push(w),
            None => break,
        }
    }
    let results: Arc<Slots<T>> = Arc::new((0..n).map(|_| Mutex::new(None)).collect());
    let latch = Arc::new(Latch {
        left: AtomicUsize::new(n),
        caller: std::thread::current(),
    });
    for (i, task) in tasks.into_iter().enumerate() {
        let Some(w) = workers.get(i) else {
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Err("could not start a device thread".into()));
            latch.count_down();
            continue;
        };
        let (res, done) = (Arc::clone(&results), Arc::clone(&latch));
        let job = move || {
            let r =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(task)).map_err(panic_message);
            *res[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            done.count_down();
        };
        let job: Box<dyn FnOnce() + Send + 'a> = Box::new(job);
        // SAFETY: `run_all` does not return before every job has run (the latch below), so
        // nothing borrowed for 'a is used after 'a ends; the box is consumed by the call.
        let job: Task = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Task>(job) };
        w.slot.give(job);
    }
    // Wait for the workers even if `here` panics: they borrow for 'a.
    struct Wait<'l>(&'l Latch);
    impl Drop for Wait<'_> {
        fn drop(&mut self) {
            self.0.wait();
        }
    }
    let mine = {
        let _wait = Wait(&latch);
        here()
    };
    idle().extend(workers);
    // Take each result through the shared slots: a worker may still hold its clone of the Arc
    // for a moment after it counted down.
    let results = results
        .iter()
        .map(|m| {
            m.lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_else(|| Err("a device task did not report".into()))
        })
        .collect();
    (mine, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that asks for a larger stack never gets a worker started with a smaller one
    /// (device code keeps tiles on its stack: a worker of a small-stack run reused by a launch
    /// overflowed its stack).
    #[test]
    fn a_worker_with_a_smaller_stack_is_not_reused_for_a_larger_one() {
        let ids = |stack: usize| -> Vec<std::thread::ThreadId> {
            let tasks: Vec<Box<dyn FnOnce() -> std::thread::ThreadId + Send>> = (0..3)
                .map(|_| {
                    let t: Box<dyn FnOnce() -> std::thread::ThreadId + Send> =
                        Box::new(|| std::thread::current().id());
                    t
                })
                .collect();
            run_all(tasks, stack).into_iter().flatten().collect()
        };
        let small = ids(64 << 10);
        let large = ids(24 << 20);
        assert_eq!((small.len(), large.len()), (3, 3));
        assert!(
            small.iter().all(|t| !large.contains(t)),
            "{small:?} {large:?}"
        );
        // A smaller request may take the larger workers.
        assert_eq!(ids(64 << 10).len(), 3);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn one_task_runs_on_the_callers_thread_when_its_stack_has_room() {
        let id = || -> Box<dyn FnOnce() -> std::thread::ThreadId + Send> {
            Box::new(|| std::thread::current().id())
        };
        // A thread of 8 MiB of stack: room for 64 KiB of tiles and the margin.
        let roomy = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(move || {
                let left = stack_left();
                assert!(
                    left.is_some_and(|l| l as u64 > (64 << 10) + INLINE_MARGIN),
                    "{left:?}"
                );
                (
                    std::thread::current().id(),
                    run_one(id(), 64 << 10, 64 << 10),
                )
            });
        let (it, ran) = roomy.unwrap().join().unwrap();
        assert_eq!(ran, Ok(it));
        // More tiles than the margin leaves on a thread of 1 MiB: a worker, started with the
        // stack the tiles need.
        let small = std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(move || {
                (
                    std::thread::current().id(),
                    run_one(id(), 64 << 10, 2 << 20),
                )
            });
        let (it, ran) = small.unwrap().join().unwrap();
        assert!(ran.is_ok_and(|t| t != it));
        // A panic on the caller's thread is the task's error, as on a worker.
        let boom: Box<dyn FnOnce() -> u8 + Send> = Box::new(|| panic!("tile out of range"));
        assert_eq!(run_one(boom, 64 << 10, 0), Err("tile out of range".into()));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn run_all_here_runs_the_first_task_on_the_caller_and_all_at_once() {
        // Three tasks that each wait for all three to have started, and report their thread.
        let started = AtomicUsize::new(0);
        let tasks: Vec<Box<dyn FnOnce() -> std::thread::ThreadId + Send + '_>> = (0..3)
            .map(|i| {
                let s = &started;
                let t: Box<dyn FnOnce() -> std::thread::ThreadId + Send + '_> =
                    Box::new(move || {
                        s.fetch_add(1, Ordering::SeqCst);
                        while s.load(Ordering::SeqCst) < 3 {
                            std::thread::yield_now();
                        }
                        if i == 1 {
                            panic!("task one fails");
                        }
                        std::thread::current().id()
                    });
                t
            })
            .collect();
        let me = std::thread::current().id();
        let r = run_all_here(tasks, 1 << 20, 64 << 10);
        assert_eq!(r[0], Ok(me));
        assert_eq!(r[1], Err("task one fails".to_string()));
        assert!(r[2].as_ref().is_ok_and(|t| *t != me));
        // Without room for `need` (64 MiB; a test thread has 2) on the caller's stack, every
        // task goes to a worker.
        let one: Vec<Box<dyn FnOnce() -> std::thread::ThreadId + Send>> =
            vec![Box::new(|| std::thread::current().id())];
        let r = run_all_here(one, 1 << 20, 64 << 20);
        assert!(r[0].as_ref().is_ok_and(|t| *t != me));
    }

    #[test]
    fn every_task_runs_at_once_and_a_panic_is_its_own_error() {
        // Four tasks that each wait for all four to have started: they must run at once.
        let started = AtomicUsize::new(0);
        let tasks: Vec<Box<dyn FnOnce() -> usize + Send + '_>> = (0..4)
            .map(|i| {
                let s = &started;
                let t: Box<dyn FnOnce() -> usize + Send + '_> = Box::new(move || {
                    s.fetch_add(1, Ordering::SeqCst);
                    while s.load(Ordering::SeqCst) < 4 {
                        std::thread::yield_now();
                    }
                    if i == 2 {
                        panic!("task two fails");
                    }
                    i * 10
                });
                t
            })
            .collect();
        let r = run_all(tasks, 1 << 20);
        assert_eq!(r[0], Ok(0));
        assert_eq!(r[1], Ok(10));
        assert_eq!(r[2], Err("task two fails".to_string()));
        assert_eq!(r[3], Ok(30));
        // Workers that parked (after SPIN) are woken by the next run.
        std::thread::sleep(SPIN * 5);
        let again: Vec<Box<dyn FnOnce() -> usize + Send>> =
            (0..4usize).map(|i| Box::new(move || i) as Box<_>).collect();
        assert_eq!(run_all(again, 1 << 20), vec![Ok(0), Ok(1), Ok(2), Ok(3)]);
    }

    #[test]
    fn trim_ends_idle_workers_beyond_what_it_keeps() {
        // 200 tasks at once need 200 workers; trimming to 0 ends every idle one (other tests
        // of this binary may start workers meanwhile, never end them).
        let tasks: Vec<Box<dyn FnOnce() -> usize + Send>> = (0..200usize)
            .map(|i| Box::new(move || i) as Box<_>)
            .collect();
        assert_eq!(run_all(tasks, 1 << 16).len(), 200);
        let peak = live_workers();
        assert!(peak >= 200, "{peak}");
        assert!(trim(0) >= 200);
        let start = Instant::now();
        while live_workers() + 200 > peak && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            live_workers() + 200 <= peak,
            "{} of {peak} still alive",
            live_workers()
        );
        // A run after a trim starts what it needs again.
        let again: Vec<Box<dyn FnOnce() -> usize + Send>> =
            (0..3usize).map(|i| Box::new(move || i) as Box<_>).collect();
        assert_eq!(run_all(again, 1 << 16), vec![Ok(0), Ok(1), Ok(2)]);
    }
}
