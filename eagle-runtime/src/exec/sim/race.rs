//! The `sim` race detector: vector clocks over notify -> wait and barriers, and a shadow of the
//! last writer of every byte range of every window allocation.
//!
//! Rule (design.md: notify is a release, wait an acquire): a read by rank r (a `get` or
//! `remote_load` of any rank's window, or a plain `load` or element read of its own) of bytes
//! that rank w wrote (a plain store into its own window, or a `put`, `remote_store` or `get`
//! into any rank's) is ordered only if w's write happened before a release (notify or barrier
//! arrival) that r acquired (a satisfied wait on that signal, or leaving that barrier),
//! directly or through a chain. A write by r of bytes that w wrote is held to the same rule,
//! and so is a write by w of bytes that r read (the read may see the old or the new value):
//! each rank's last read of every byte range is kept, so the verdict is the same whichever of
//! the read and the write ran first. Any other such access is reported, on every run, whatever
//! the timing: the clocks follow the program's synchronisation, not the order threads ran in.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One written byte range of an allocation: `[start, end)` by `writer` in its epoch `epoch`.
#[derive(Debug, Clone, Copy)]
struct Seg {
    end: u64,
    writer: usize,
    epoch: u64,
    /// The op that made the access (a site of the artifact; `u32::MAX` when unknown).
    site: u32,
}

/// Non-overlapping written ranges, keyed by start.
#[derive(Debug, Default)]
struct Shadow(BTreeMap<u64, Seg>);

impl Shadow {
    fn write(&mut self, start: u64, end: u64, writer: usize, epoch: u64, site: u32) {
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
        // Merge with an adjacent segment of the same writer, epoch and op.
        let mut new_start = start;
        if let Some((&k, s)) = self.0.range(..start).next_back() {
            if s.end == start && s.writer == writer && s.epoch == epoch && s.site == site {
                new_start = k;
            }
        }
        let mut new_end = end;
        if let Some(s) = self.0.get(&end).copied() {
            if s.writer == writer && s.epoch == epoch && s.site == site {
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
                site,
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
                read: false,
                site: s.site,
            })
    }
}

/// A rank's clock at a release, its own component given apart: `None` when no other
/// component is above the rank's barrier floor (the join every rank holds once it has left
/// the last barrier it passed; zero before any), that is when the rank has acquired nothing
/// since. Every rank that can acquire the release has passed that barrier too (it arrived
/// before the releaser could leave it), so its clock already holds the rest: a rank that
/// notifies all P peers before it waits (a barrier of signals) publishes one component per
/// notify, and P^2 releases cost O(P^2), not P^3. Otherwise the whole clock, copied once per
/// epoch of acquires.
type Base = Option<Arc<Vec<u64>>>;

/// What a signal slot's releases have published: the join of the releasers' clocks.
enum Published {
    /// The releases of one rank only (the common case: a slot with one writer): that rank's
    /// clock at its latest release, as a snapshot shared with its other releases made in the
    /// same epoch of acquires, with the rank's own component given apart.
    One { base: Base, rank: usize, own: u64 },
    /// Releases of several ranks, joined (dense, P entries), updated in place.
    Many(Vec<u64>),
}

impl Published {
    /// Joins the published clock into `into` (a dense clock of P entries).
    fn join_into(&self, into: &mut [u64]) {
        match self {
            Published::One { base, rank, own } => {
                if let Some(b) = base {
                    join(into, b);
                }
                into[*rank] = into[*rank].max(*own);
            }
            Published::Many(v) => join(into, v),
        }
    }
}

/// Detector state of one run.
pub(crate) struct Race {
    p: usize,
    clocks: Vec<Mutex<Vec<u64>>>,
    /// Per rank, a snapshot of its clock shared by the releases it makes until its next
    /// acquire (only its own component moves meanwhile); `None` after an acquire.
    snaps: Vec<Mutex<Option<Base>>>,
    /// Per rank, whether it has acquired anything since it left its last barrier (or since
    /// the start): only then does a release publish more than its own component.
    mixed: Vec<AtomicBool>,
    /// Per owner rank, what each of its signal slots (window, byte offset) has published:
    /// notifies to different ranks take different locks.
    signals: Vec<Mutex<HashMap<(usize, u64), Published>>>,
    barrier_acc: Mutex<Vec<u64>>,
    barrier_done: Mutex<Arc<Vec<u64>>>,
    /// Per window allocation (window `w` of rank `owner` at `w * P + owner`), its writes and
    /// reads under one lock: an access takes it once.
    allocs: Vec<Mutex<Alloc>>,
}

/// The accesses of one window allocation.
#[derive(Default)]
struct Alloc {
    /// The last writer of every byte range.
    writes: Shadow,
    /// Each reader's last read of every byte range, in the reader's epoch (a `Shadow` whose
    /// "writer" is the reader).
    reads: HashMap<usize, Shadow>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn join(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = (*a).max(*b);
    }
}

/// Two accesses of the same bytes that no synchronisation orders: a read and the write it
/// may or may not see, or two writes.
pub(crate) struct RaceReport {
    /// The other rank: the earlier writer, or (with `read`) the earlier reader.
    pub(crate) writer: usize,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Whether the other access is a read (a write over bytes another rank read, with nothing
    /// ordering the read before the write).
    pub(crate) read: bool,
    /// The other access's op (a site of the artifact; `u32::MAX` when unknown).
    pub(crate) site: u32,
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
            snaps: (0..p).map(|_| Mutex::new(None)).collect(),
            mixed: (0..p).map(|_| AtomicBool::new(false)).collect(),
            signals: (0..p).map(|_| Mutex::new(HashMap::new())).collect(),
            barrier_acc: Mutex::new(vec![0; p]),
            barrier_done: Mutex::new(Arc::new(vec![0; p])),
            allocs: (0..windows * p)
                .map(|_| Mutex::new(Alloc::default()))
                .collect(),
        }
    }

    fn alloc(&self, win: usize, owner: usize) -> Option<&Mutex<Alloc>> {
        self.allocs.get(win * self.p + owner)
    }

    /// Rank `writer` writes `[off, off + n)` of `owner`'s allocation of `win`. Returns the
    /// earlier write by another rank that no synchronisation orders before this one (two
    /// unordered writes of one byte: which lands last depends on timing), else the earlier
    /// read by another rank that none orders before it (the read could have seen either
    /// value), if any; the write is recorded either way.
    pub(crate) fn write(
        &self,
        win: usize,
        owner: usize,
        off: u64,
        n: u64,
        writer: usize,
    ) -> Option<RaceReport> {
        // Only `writer`'s own thread locks its clock, so holding it here blocks nobody (and
        // spares a P-entry copy per access).
        let clock = lock(&self.clocks[writer]);
        let mut a = lock(self.alloc(win, owner)?);
        let found = a
            .writes
            .unordered(off, off + n, writer, &clock)
            .or_else(|| {
                // The lowest reader, so that the report does not depend on the map's order.
                let mut hits: Vec<RaceReport> = a
                    .reads
                    .values()
                    .filter_map(|r| r.unordered(off, off + n, writer, &clock))
                    .collect();
                hits.sort_by_key(|h| (h.writer, h.start));
                hits.into_iter()
                    .next()
                    .map(|h| RaceReport { read: true, ..h })
            });
        a.writes
            .write(off, off + n, writer, clock[writer], u32::MAX);
        found
    }

    /// Rank `reader` reads `[off, off + n)` of `owner`'s allocation of `win`, by the op at
    /// `site` (kept, for a later write's report).
    pub(crate) fn read(
        &self,
        win: usize,
        owner: usize,
        off: u64,
        n: u64,
        reader: usize,
        site: u32,
    ) -> Option<RaceReport> {
        let clock = lock(&self.clocks[reader]);
        let mut a = lock(self.alloc(win, owner)?);
        let found = a.writes.unordered(off, off + n, reader, &clock);
        // Recorded under the same lock as the writes, so a write and a read of the same bytes
        // are checked one after the other, whichever comes first.
        a.reads
            .entry(reader)
            .or_default()
            .write(off, off + n, reader, clock[reader], site);
        found
    }

    /// Rank `rank` notifies the signal at (`win`, `owner`, `off`): a release.
    pub(crate) fn release(&self, win: usize, owner: usize, off: u64, rank: usize) {
        let mut c = lock(&self.clocks[rank]);
        if owner == rank {
            // Only a slot's owner waits on it (acquires it), and a rank's clock already covers
            // its own earlier releases: publishing this one would change no acquire. (A
            // two-phase allreduce resets each of its P slots after waiting on it: P^2
            // P-entry clocks at P = 1,024 otherwise, 8 GB.)
            c[rank] += 1;
            return;
        }
        let base = {
            let mut snap = lock(&self.snaps[rank]);
            snap.get_or_insert_with(|| {
                self.mixed[rank]
                    .load(Ordering::Relaxed)
                    .then(|| Arc::new(c.clone()))
            })
            .clone()
        };
        let mine = Published::One {
            base,
            rank,
            own: c[rank],
        };
        let Some(sig) = self.signals.get(owner) else {
            return;
        };
        let mut sig = lock(sig);
        match sig.get_mut(&(win, off)) {
            Some(Published::Many(v)) => mine.join_into(v),
            Some(e @ Published::One { .. }) => {
                // A rank's clock only grows: its new release covers its older one.
                if matches!(e, Published::One { rank: r, .. } if *r == rank) {
                    *e = mine;
                } else {
                    let mut v = vec![0; self.p];
                    e.join_into(&mut v);
                    mine.join_into(&mut v);
                    *e = Published::Many(v);
                }
            }
            None => {
                sig.insert((win, off), mine);
            }
        }
        c[rank] += 1;
    }

    /// Rank `rank`'s wait on its signal at (`win`, `off`) was satisfied: an acquire.
    pub(crate) fn acquire(&self, win: usize, off: u64, rank: usize) {
        let Some(sig) = self.signals.get(rank) else {
            return;
        };
        let sig = lock(sig);
        if let Some(s) = sig.get(&(win, off)) {
            s.join_into(&mut lock(&self.clocks[rank]));
            self.mixed[rank].store(true, Ordering::Relaxed);
            *lock(&self.snaps[rank]) = None;
        }
    }

    /// Rank `rank` arrives at a barrier; `last` when it completes the barrier.
    pub(crate) fn barrier_arrive(&self, rank: usize, last: bool) {
        let mut c = lock(&self.clocks[rank]);
        let mut acc = lock(&self.barrier_acc);
        join(&mut acc, &c);
        c[rank] += 1;
        if last {
            *lock(&self.barrier_done) = Arc::new(std::mem::replace(&mut *acc, vec![0; self.p]));
        }
    }

    /// Rank `rank` leaves the barrier it arrived at.
    pub(crate) fn barrier_leave(&self, rank: usize) {
        let done = lock(&self.barrier_done).clone();
        join(&mut lock(&self.clocks[rank]), &done);
        self.mixed[rank].store(false, Ordering::Relaxed);
        *lock(&self.snaps[rank]) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35, item 4: an unordered read and write of the same bytes are a race whichever
    /// runs first, and a barrier between them orders them either way.
    #[test]
    fn the_verdict_does_not_depend_on_which_access_runs_first() {
        for read_first in [false, true] {
            for synchronised in [false, true] {
                let r = Race::new(2, 1);
                let (writer, reader) = (0, 1);
                let mut verdicts = vec![];
                let mut access = |read: bool| {
                    if read {
                        verdicts.push(
                            r.read(0, writer, 8, 16, reader, 7)
                                .map(|h| (h.writer, h.read)),
                        );
                    } else {
                        verdicts.push(
                            r.write(0, writer, 0, 32, writer)
                                .map(|h| (h.writer, h.read)),
                        );
                    }
                };
                access(read_first);
                if synchronised {
                    r.barrier_arrive(0, false);
                    r.barrier_arrive(1, true);
                    r.barrier_leave(0);
                    r.barrier_leave(1);
                }
                access(!read_first);
                let race = verdicts.iter().flatten().next().copied();
                let want = match (synchronised, read_first) {
                    (true, _) => None,
                    // The write finds the read (by rank 1); the read finds the write (rank 0).
                    (false, true) => Some((reader, true)),
                    (false, false) => Some((writer, false)),
                };
                assert_eq!(
                    race, want,
                    "read first: {read_first}, barrier: {synchronised}"
                );
            }
        }
    }
}
