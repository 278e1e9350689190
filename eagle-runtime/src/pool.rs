//! Device threads that outlive a run: starting P threads per launch cost more than the
//! launch itself. A run reserves P idle workers for itself alone (spawning what is missing),
//! so concurrent runs never share a worker: every device of a run is running at once, which
//! device programs that wait on each other need.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex};

type Task = Box<dyn FnOnce() + Send + 'static>;

/// One result slot per task.
type Slots<T> = Vec<Mutex<Option<Result<T, String>>>>;

struct Worker {
    tx: Sender<Task>,
}

static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

fn spawn_worker(stack: usize) -> Option<Worker> {
    let (tx, rx) = channel::<Task>();
    std::thread::Builder::new()
        .name("eagle-device".into())
        .stack_size(stack)
        .spawn(move || {
            for task in rx {
                task();
            }
        })
        .ok()?;
    Some(Worker { tx })
}

/// Runs every task on its own worker thread, all at once, and returns when all are done.
/// A task that panics yields `Err` with its message; the others still run to completion.
///
/// # Errors
/// `Err(message)` in the slot of a task that panicked, or that no thread could be started for.
pub(crate) fn run_all<'a, T: Send + 'a>(
    tasks: Vec<Box<dyn FnOnce() -> T + Send + 'a>>,
    stack: usize,
) -> Vec<Result<T, String>> {
    let n = tasks.len();
    let mut workers: Vec<Worker> = {
        let mut idle = IDLE.lock().unwrap_or_else(|e| e.into_inner());
        let k = idle.len().saturating_sub(n);
        idle.split_off(k)
    };
    while workers.len() < n {
        match spawn_worker(stack) {
            Some(w) => workers.push(w),
            None => break,
        }
    }
    let results: Arc<Slots<T>> = Arc::new((0..n).map(|_| Mutex::new(None)).collect());
    let latch = Arc::new((Mutex::new(n), Condvar::new()));
    for (i, task) in tasks.into_iter().enumerate() {
        let Some(w) = workers.get(i) else {
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Err("could not start a device thread".into()));
            let (m, c) = &*latch;
            *m.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            c.notify_all();
            continue;
        };
        let (res, done) = (Arc::clone(&results), Arc::clone(&latch));
        let job = move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(task)).map_err(|p| {
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a device thread panicked".into())
            });
            *res[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            let (m, c) = &*done;
            *m.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            c.notify_all();
        };
        let job: Box<dyn FnOnce() + Send + 'a> = Box::new(job);
        // SAFETY: `run_all` does not return before every job has run (the latch below), so
        // nothing borrowed for 'a is used after 'a ends; the box only outlives its borrow while
        // it sits, finished, in the worker's dropped stack frame.
        let job: Task = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Task>(job) };
        if w.tx.send(job).is_err() {
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) =
                Some(Err("a device thread stopped".into()));
            let (m, c) = &*latch;
            *m.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            c.notify_all();
        }
    }
    {
        let (m, c) = &*latch;
        // Most runs are short: yield a little before sleeping, so the wake-up of a sleeping
        // thread is not added to every launch.
        for _ in 0..200 {
            if *m.lock().unwrap_or_else(|e| e.into_inner()) == 0 {
                break;
            }
            std::thread::yield_now();
        }
        let mut left = m.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            left = c.wait(left).unwrap_or_else(|e| e.into_inner());
        }
    }
    IDLE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(workers);
    // Take each result through the shared slots: a worker may still hold its clone of the Arc
    // for a moment after it counted down.
    results
        .iter()
        .map(|m| {
            m.lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_else(|| Err("a device task did not report".into()))
        })
        .collect()
}
