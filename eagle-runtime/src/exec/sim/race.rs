//! The `sim` race detector: vector clocks over notify -> wait and barriers, and a shadow of the
//! last writer of every byte range of every window allocation.
//!
//! Rule (design.md: notify is a release, wait an acquire): a read by rank r (a `get` or
//! `remote_load` of any rank's window, or a plain `load` or element read of its own) of bytes
//! that rank w wrote (a plain store into its own window, or a `put`, `remote_store` or `get`
//! into any rank's) is ordered only if w's write happened before a release (notify or barrier
//! arrival) that r acquired (a satisfied wait on that signal, or leaving that barrier),
//! directly or through a chain. A write by r of bytes that w wrote is held to the same rule.
//! Any other such access is reported, on every run, whatever the timing: the clocks follow the
//! program's synchronisation, not the order threads ran in.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

/// One written byte range of an allocation: `[start, end)` by `writer` in its epoch `epoch`.
#[derive(Debug, Clone, Copy)]
struct Seg {
    end: u64,
    writer: usize,
    epoch: u64,
}

/// Non-overlapping written ranges, keyed by start.
#[derive(Debug, Default)]
struct Shadow(BTreeMap<u64, Seg>);

impl Shadow {
    fn write(&mut self, start: u64, end: u64, writer: usize, epoch: u64) {
        if start >= end {
            return;
        }
        // Cut every segment that overlaps [start, end).
        let overlapping: Vec<u64> = self
            .0
            .range(..end)
            .filter(|(_, s)| s.end > start)
            .map(|(k, _)| *k)
            .collect();
        for k in overlapping {
            if let Some(s) = self.0.remove(&k) {
                if k < start {
                    self.0.insert(k, Seg { end: start, ..s });
                }
                if s.end > end {
                    self.0.insert(end, s);
                }
            }
        }
        // Merge with an adjacent segment of the same writer and epoch.
        let mut new_start = start;
        if let Some((&k, s)) = self.0.range(..start).next_back() {
            if s.end == start && s.writer == writer && s.epoch == epoch {
                new_start = k;
            }
        }
        let mut new_end = end;
        if let Some(s) = self.0.get(&end).copied() {
            if s.writer == writer && s.epoch == epoch {
                self.0.remove(&end);
                new_end = s.end;
            }
        }
        self.0.insert(
            new_start,
            Seg {
                end: new_end,
                writer,
                epoch,
            },
        );
    }

    /// The first write of `[start, end)` by a rank other than `rank` that `rank`'s `clock`
    /// does not order before now.
    fn unordered(&self, start: u64, end: u64, rank: usize, clock: &[u64]) -> Option<RaceReport> {
        self.0
            .range(..end)
            .filter(|(_, s)| s.end > start)
            .find(|(_, s)| s.writer != rank && s.epoch > clock[s.writer])
            .map(|(&k, s)| RaceReport {
                writer: s.writer,
                start: k.max(start),
                end: s.end.min(end),
            })
    }
}

/// Detector state of one run.
pub(crate) struct Race {
    p: usize,
    clocks: Vec<Mutex<Vec<u64>>>,
    signals: Mutex<HashMap<(usize, usize, u64), Vec<u64>>>,
    barrier_acc: Mutex<Vec<u64>>,
    barrier_done: Mutex<Vec<u64>>,
    shadows: Vec<Mutex<Shadow>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn join(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

/// A read that no synchronisation orders after the write it sees.
pub(crate) struct RaceReport {
    pub(crate) writer: usize,
    pub(crate) start: u64,
    pub(crate) end: u64,
}

impl Race {
    pub(crate) fn new(p: usize, windows: usize) -> Race {
        Race {
            p,
            // Every rank starts in epoch 1 of its own clock, so writes before any
            // synchronisation are not ordered before anybody's reads.
            clocks: (0..p)
                .map(|r| {
                    let mut c = vec![0; p];
                    c[r] = 1;
                    Mutex::new(c)
                })
                .collect(),
            signals: Mutex::new(HashMap::new()),
            barrier_acc: Mutex::new(vec![0; p]),
            barrier_done: Mutex::new(vec![0; p]),
            shadows: (0..windows * p)
                .map(|_| Mutex::new(Shadow::default()))
                .collect(),
        }
    }

    fn shadow(&self, win: usize, owner: usize) -> Option<&Mutex<Shadow>> {
        self.shadows.get(win * self.p + owner)
    }

    /// Rank `writer` writes `[off, off + n)` of `owner`'s allocation of `win`. Returns the
    /// earlier write by another rank that no synchronisation orders before this one (two
    /// unordered writes of one byte: which lands last depends on timing), if any; the write
    /// is recorded either way.
    pub(crate) fn write(
        &self,
        win: usize,
        owner: usize,
        off: u64,
        n: u64,
        writer: usize,
    ) -> Option<RaceReport> {
        let clock = lock(&self.clocks[writer]).clone();
        let mut s = lock(self.shadow(win, owner)?);
        let found = s.unordered(off, off + n, writer, &clock);
        s.write(off, off + n, writer, clock[writer]);
        found
    }

    /// Rank `reader` reads `[off, off + n)` of `owner`'s allocation of `win`.
    pub(crate) fn read(
        &self,
        win: usize,
        owner: usize,
        off: u64,
        n: u64,
        reader: usize,
    ) -> Option<RaceReport> {
        let clock = lock(&self.clocks[reader]).clone();
        let s = lock(self.shadow(win, owner)?);
        s.unordered(off, off + n, reader, &clock)
    }

    /// Rank `rank` notifies the signal at (`win`, `owner`, `off`): a release.
    pub(crate) fn release(&self, win: usize, owner: usize, off: u64, rank: usize) {
        let mut c = lock(&self.clocks[rank]);
        let mut sig = lock(&self.signals);
        let e = sig
            .entry((win, owner, off))
            .or_insert_with(|| vec![0; self.p]);
        join(e, &c);
        c[rank] += 1;
    }

    /// Rank `rank`'s wait on its signal at (`win`, `off`) was satisfied: an acquire.
    pub(crate) fn acquire(&self, win: usize, off: u64, rank: usize) {
        let sig = lock(&self.signals).get(&(win, rank, off)).cloned();
        if let Some(s) = sig {
            join(&mut lock(&self.clocks[rank]), &s);
        }
    }

    /// Rank `rank` arrives at a barrier; `last` when it completes the barrier.
    pub(crate) fn barrier_arrive(&self, rank: usize, last: bool) {
        let mut c = lock(&self.clocks[rank]);
        let mut acc = lock(&self.barrier_acc);
        join(&mut acc, &c);
        c[rank] += 1;
        if last {
            *lock(&self.barrier_done) = std::mem::replace(&mut *acc, vec![0; self.p]);
        }
    }

    /// Rank `rank` leaves the barrier it arrived at.
    pub(crate) fn barrier_leave(&self, rank: usize) {
        let done = lock(&self.barrier_done).clone();
        join(&mut lock(&self.clocks[rank]), &done);
    }
}
