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
//! the order the threads or tasks ran in: the clocks follow the program's synchronisation.
//! Where that synchronisation itself depends on timing (a signal several ranks add to, and a
//! wait that whichever notify comes first satisfies), a satisfied wait acquires every release
//! its signal holds by then, as an acquire load of a C++ release sequence does, so the verdict
//! is that of the synchronisation this run went through: a program racy only when the notifies
//! come in another order can pass.

use rustc_hash::FxHashMap;
use std::cell::UnsafeCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
    /// The segments that overlap `[start, end)`, in order: the one that holds `start`, if any,
    /// and those that begin inside the range (a lookup, not a walk from the first segment).
    fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = (&u64, &Seg)> {
        let first = self
            .0
            .range(..=start)
            .next_back()
            .filter(|(_, s)| s.end > start)
            .map_or(start, |(k, _)| *k);
        self.0
            .range(first..end.max(first))
            .filter(move |(_, s)| s.end > start)
    }

    fn write(&mut self, start: u64, end: u64, writer: usize, epoch: u64, site: u32) {
        if start >= end {
            return;
        }
        // Already recorded (a loop that writes one element again and again).
        if let Some((_, s)) = self.0.range(..=start).next_back() {
            if s.end >= end && s.writer == writer && s.epoch == epoch && s.site == site {
                return;
            }
        }
        // Cut every segment that overlaps [start, end).
        let overlapping: Vec<u64> = self.overlapping(start, end).map(|(k, _)| *k).collect();
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

    /// How far from `from` the bytes hold no write that `rank`'s `clock` leaves unordered
    /// (a write by another rank in an epoch the clock does not cover): the start of the first
    /// such write, or the end of the last write looked at when `SCAN` writes were all ordered
    /// (`u64::MAX` when none is left). Assumes `[.., from)` was checked.
    fn clean_until(&self, from: u64, rank: usize, clock: &[u64]) -> u64 {
        const SCAN: usize = 32;
        let ordered = |s: &Seg| s.writer == rank || s.epoch <= clock[s.writer];
        if let Some((_, s)) = self.0.range(..from).next_back() {
            if s.end > from && !ordered(s) {
                return from;
            }
        }
        let mut last = from;
        for (&k, s) in self.0.range(from..).take(SCAN) {
            if !ordered(s) {
                return k;
            }
            last = s.end;
        }
        if self.0.range(last..).next().is_none() {
            u64::MAX
        } else {
            last
        }
    }

    /// The first write of `[start, end)` by a rank other than `rank` that `rank`'s `clock`
    /// does not order before now.
    fn unordered(&self, start: u64, end: u64, rank: usize, clock: &[u64]) -> Option<RaceReport> {
        self.overlapping(start, end)
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
///
/// Every method takes the rank that calls it (a `rank`, `reader` or `writer` argument) and
/// must be called only by code running as that rank: a rank's program is sequential, on its
/// own thread or as one task at a time, so its [`RankState`] is never touched by two threads at
/// once and needs no lock (an uncontended lock still cost two atomic instructions per
/// element access).
pub(crate) struct Race {
    p: usize,
    /// Per rank, its clock, read leases and release snapshot (see [`Race`]).
    ranks: Vec<RankCell>,
    /// Per owner rank, what each of its signal slots (window, byte offset) has published:
    /// notifies to different ranks take different locks.
    signals: Vec<Mutex<HashMap<(usize, u64), Published>>>,
    /// The join of the clocks of the ranks arrived at the barrier under way; `None` until the
    /// first arrives (it starts from the last barrier's join, which every rank's clock holds).
    barrier_acc: Mutex<Option<Vec<u64>>>,
    /// The join of every clock at the last completed barrier.
    barrier_done: Mutex<Arc<Vec<u64>>>,
    /// Per window allocation (window `w` of rank `owner` at `w * P + owner`), its writes and
    /// reads under one lock: an access takes it once.
    allocs: Vec<AllocSlot>,
}

/// One rank's [`RankState`], aligned as [`AllocSlot`] is.
#[repr(align(128))]
struct RankCell(UnsafeCell<RankState>);

// SAFETY: a `RankCell` is reached only through `Race::state`, by the rank it belongs to (see
// `Race`); everything in it is `Send`.
unsafe impl Sync for RankCell {}

/// A rank's vector clock, read leases and release snapshot.
struct RankState {
    /// The other ranks' components of the clock; after a barrier, the barrier's join itself
    /// (shared, copied on the first acquire). Its own entry is stale: see `own`.
    clock: Arc<Vec<u64>>,
    /// The rank's own component (its epoch).
    own: u64,
    /// Whether the rank has acquired anything since it left its last barrier (or since the
    /// start): only then does `clock` differ from the last barrier's join, and a release
    /// publish more than the own component.
    mixed: bool,
    /// The clock shared by the releases the rank makes until its next acquire (only its own
    /// component moves meanwhile); `None` after an acquire or a barrier.
    snap: Option<Base>,
    /// The rank's lease on each allocation it reads (by allocation index), see [`Lease`].
    leases: FxHashMap<usize, Lease>,
    /// The rank's last recorded write of each allocation it writes (by allocation index).
    wrote: FxHashMap<usize, Wrote>,
}

/// A reader's run of reads of one allocation that needs neither the allocation's lock nor its
/// shadows: `[lo, hi)` read in one epoch by one op, growing upwards (an element loop), while
/// no other rank has written the allocation since the lease was made (`gen`; the reader's own
/// writes keep it) and the read stays
/// below `clean_hi`, up to where the writes, checked when the lease was made, were all
/// ordered before the reader (a clean read stays clean: a clock only grows). The allocation
/// keeps the shared half, so a write checks leased reads as it checks recorded ones.
struct Lease {
    shared: Arc<LeaseShared>,
    gen: u64,
    clean_hi: u64,
}

/// The half of a [`Lease`] a writer reads: the reader, its epoch and op, and the range so far.
struct LeaseShared {
    reader: usize,
    epoch: u64,
    site: u32,
    lo: u64,
    /// Stored by the reader only (sequentially consistent against the allocation's `gen`: a
    /// writer that bumps `gen` and then loads `hi` sees every read that did not see the bump).
    hi: AtomicU64,
}

/// One window allocation: its write generation, bumped under the lock by every write (what
/// lets a lease skip the lock), and its accesses. Aligned to a cache line pair, so that two
/// ranks' allocations never share a line (two cores would pass it back and forth).
#[repr(align(128))]
struct AllocSlot {
    gen: AtomicU64,
    /// The one rank that has read or written the allocation so far ([`NOBODY`] before any,
    /// [`SEVERAL`] once a second rank has); set under the lock.
    reached_by: AtomicUsize,
    accesses: Mutex<Alloc>,
}

/// [`AllocSlot::reached_by`] before any access.
const NOBODY: usize = usize::MAX;
/// [`AllocSlot::reached_by`] once two ranks have reached the allocation.
const SEVERAL: usize = usize::MAX - 1;

impl AllocSlot {
    fn new() -> AllocSlot {
        AllocSlot {
            gen: AtomicU64::new(0),
            reached_by: AtomicUsize::new(NOBODY),
            accesses: Mutex::new(Alloc::default()),
        }
    }

    /// Rank `rank` reads or writes the allocation (call with its lock held).
    fn reached(&self, rank: usize) {
        let by = self.reached_by.load(Ordering::SeqCst);
        if by == NOBODY {
            self.reached_by.store(rank, Ordering::SeqCst);
        } else if by != rank && by != SEVERAL {
            self.reached_by.store(SEVERAL, Ordering::SeqCst);
        }
    }
}

/// The range of a rank's last recorded write of an allocation (its segment of the write
/// shadow, merged with its neighbours of the same epoch), the epoch, and the allocation's
/// write generation just after it.
struct Wrote {
    lo: u64,
    hi: u64,
    epoch: u64,
    gen: u64,
}

/// The accesses of one window allocation.
#[derive(Default)]
struct Alloc {
    /// The last writer of every byte range.
    writes: Shadow,
    /// Each reader's last read of every byte range, in the reader's epoch (a `Shadow` whose
    /// "writer" is the reader).
    reads: HashMap<usize, Shadow>,
    /// The readers' live leases (reads not yet in `reads`).
    leases: FxHashMap<usize, Arc<LeaseShared>>,
}

impl Alloc {
    /// Moves `reader`'s lease, if any, into its read shadow.
    fn settle(&mut self, reader: usize) {
        if let Some(l) = self.leases.remove(&reader) {
            let hi = l.hi.load(Ordering::SeqCst);
            self.reads
                .entry(reader)
                .or_default()
                .write(l.lo, hi, reader, l.epoch, l.site);
        }
    }

    /// The lowest other rank's read of `[start, end)` (recorded or leased) that `clock` (of
    /// `rank`) does not order before now.
    fn unordered_read(
        &self,
        start: u64,
        end: u64,
        rank: usize,
        clock: &[u64],
    ) -> Option<RaceReport> {
        let recorded = self
            .reads
            .values()
            .filter_map(|r| r.unordered(start, end, rank, clock));
        let leased = self.leases.values().filter_map(|l| {
            let hi = l.hi.load(Ordering::SeqCst);
            (l.reader != rank && l.lo < end && hi > start && l.epoch > clock[l.reader]).then(|| {
                RaceReport {
                    writer: l.reader,
                    start: l.lo.max(start),
                    end: hi.min(end),
                    read: true,
                    site: l.site,
                }
            })
        });
        // The lowest reader, so that the report does not depend on the maps' order.
        recorded
            .chain(leased)
            .min_by_key(|h| (h.writer, h.start))
            .map(|h| RaceReport { read: true, ..h })
    }
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
            ranks: {
                let zero = Arc::new(vec![0; p]);
                (0..p)
                    .map(|_| {
                        RankCell(UnsafeCell::new(RankState {
                            clock: zero.clone(),
                            own: 1,
                            mixed: false,
                            snap: None,
                            leases: FxHashMap::default(),
                            wrote: FxHashMap::default(),
                        }))
                    })
                    .collect()
            },
            signals: (0..p).map(|_| Mutex::new(HashMap::new())).collect(),
            barrier_acc: Mutex::new(None),
            barrier_done: Mutex::new(Arc::new(vec![0; p])),
            allocs: (0..windows * p).map(|_| AllocSlot::new()).collect(),
        }
    }

    /// Rank `rank`'s state.
    ///
    /// # Safety
    /// The caller runs as `rank` and holds no other reference to its state (see [`Race`]).
    #[allow(clippy::mut_from_ref)]
    unsafe fn state(&self, rank: usize) -> &mut RankState {
        // SAFETY: by the caller's contract no other reference to this cell's state is live.
        unsafe { &mut *self.ranks[rank].0.get() }
    }

    fn alloc_index(&self, win: usize, owner: usize) -> usize {
        win * self.p + owner
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
        let idx = self.alloc_index(win, owner);
        let slot = self.allocs.get(idx)?;
        // SAFETY: called by `writer` (see `Race`).
        let st = unsafe { self.state(writer) };
        let end = off + n;
        // The fast path: bytes this rank already wrote in this epoch, of an allocation no other
        // rank has reached (so no other rank's read or write can meet this one), with no write
        // since. Nothing in the shadows would change. (A rank that reaches the allocation
        // first does it under the lock and flags it there; a write that missed the flag leaves
        // the shadows as they were, so that rank's own check sees it.)
        if let Some(w) = st.wrote.get(&idx) {
            if w.epoch == st.own
                && w.lo <= off
                && end <= w.hi
                && slot.gen.load(Ordering::SeqCst) == w.gen
                && slot.reached_by.load(Ordering::SeqCst) == writer
            {
                return None;
            }
        }
        let mut a = lock(&slot.accesses);
        slot.reached(writer);
        // Before the leases are read: a reader that missed this bump extended its lease before
        // (both sequentially consistent), so the loads below see its read.
        let gen = slot.gen.fetch_add(1, Ordering::SeqCst);
        // The writer's own lease stays good: its own writes are ordered before its reads.
        if let Some(l) = st.leases.get_mut(&idx) {
            if l.gen == gen {
                l.gen = gen + 1;
            }
        }
        let clock = &st.clock;
        let found = a
            .writes
            .unordered(off, off + n, writer, clock)
            .or_else(|| a.unordered_read(off, off + n, writer, clock));
        a.writes.write(off, end, writer, st.own, u32::MAX);
        if let Some((&lo, seg)) = a.writes.0.range(..=off).next_back() {
            st.wrote.insert(
                idx,
                Wrote {
                    lo,
                    hi: seg.end,
                    epoch: st.own,
                    gen: gen + 1,
                },
            );
        }
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
        let idx = self.alloc_index(win, owner);
        let slot = self.allocs.get(idx)?;
        // SAFETY: called by `reader` (see `Race`).
        let st = unsafe { self.state(reader) };
        let epoch = st.own;
        let end = off + n;
        // The fast path: the read continues the reader's lease.
        if let Some(l) = st.leases.get(&idx) {
            let s = &l.shared;
            if s.epoch == epoch && s.site == site && s.lo <= off && end <= l.clean_hi {
                let hi = s.hi.load(Ordering::Relaxed);
                if off <= hi {
                    if end > hi {
                        s.hi.store(end, Ordering::SeqCst);
                    }
                    if slot.gen.load(Ordering::SeqCst) == l.gen {
                        return None;
                    }
                }
            }
        }
        let mut a = lock(&slot.accesses);
        slot.reached(reader);
        a.settle(reader);
        let found = a.writes.unordered(off, end, reader, &st.clock);
        if found.is_some() {
            st.leases.remove(&idx);
            // Recorded under the same lock as the writes, so a write and a read of the same
            // bytes are checked one after the other, whichever comes first.
            a.reads
                .entry(reader)
                .or_default()
                .write(off, end, reader, epoch, site);
            return found;
        }
        let shared = Arc::new(LeaseShared {
            reader,
            epoch,
            site,
            lo: off,
            hi: AtomicU64::new(end),
        });
        let lease = Lease {
            shared: shared.clone(),
            gen: slot.gen.load(Ordering::SeqCst),
            clean_hi: a.writes.clean_until(end, reader, &st.clock),
        };
        a.leases.insert(reader, shared);
        st.leases.insert(idx, lease);
        None
    }

    /// Rank `rank` notifies the signal at (`win`, `owner`, `off`): a release.
    pub(crate) fn release(&self, win: usize, owner: usize, off: u64, rank: usize) {
        // SAFETY: called by `rank` (see `Race`).
        let st = unsafe { self.state(rank) };
        if owner == rank {
            // Only a slot's owner waits on it (acquires it), and a rank's clock already covers
            // its own earlier releases: publishing this one would change no acquire. (A
            // two-phase allreduce resets each of its P slots after waiting on it: P^2
            // P-entry clocks at P = 1,024 otherwise, 8 GB.)
            st.own += 1;
            return;
        }
        let (mixed, clock) = (st.mixed, &st.clock);
        let base = st
            .snap
            .get_or_insert_with(|| mixed.then(|| clock.clone()))
            .clone();
        let mine = Published::One {
            base,
            rank,
            own: st.own,
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
        st.own += 1;
    }

    /// Rank `rank`'s wait on its signal at (`win`, `off`) was satisfied: an acquire.
    pub(crate) fn acquire(&self, win: usize, off: u64, rank: usize) {
        let Some(sig) = self.signals.get(rank) else {
            return;
        };
        let sig = lock(sig);
        if let Some(s) = sig.get(&(win, off)) {
            // SAFETY: called by `rank` (see `Race`).
            let st = unsafe { self.state(rank) };
            // The rank's own entry may be joined from an older snapshot of its own: `own`
            // holds the real one.
            s.join_into(Arc::make_mut(&mut st.clock).as_mut_slice());
            st.mixed = true;
            st.snap = None;
        }
    }

    /// Rank `rank` arrives at a barrier; `last` when it completes the barrier.
    pub(crate) fn barrier_arrive(&self, rank: usize, last: bool) {
        // SAFETY: called by `rank` (see `Race`).
        let st = unsafe { self.state(rank) };
        let mut guard = lock(&self.barrier_acc);
        // Every rank left the last barrier before it arrives here, with that barrier's join:
        // the join starts from it, and a rank that has acquired nothing since adds only its
        // own component (O(1) instead of O(P)).
        let acc = guard.get_or_insert_with(|| lock(&self.barrier_done).as_ref().clone());
        if st.mixed {
            join(acc, &st.clock);
        }
        acc[rank] = acc[rank].max(st.own);
        st.own += 1;
        if last {
            if let Some(done) = guard.take() {
                *lock(&self.barrier_done) = Arc::new(done);
            }
        }
    }

    /// Rank `rank` leaves the barrier it arrived at.
    pub(crate) fn barrier_leave(&self, rank: usize) {
        let done = lock(&self.barrier_done).clone();
        // SAFETY: called by `rank` (see `Race`).
        let st = unsafe { self.state(rank) };
        // Every component of `done` but the own is at least the rank's (it arrived with its
        // clock), and the own is below `own` (incremented at the arrival).
        st.clock = done;
        st.mixed = false;
        st.snap = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads served by a lease (no lock, no shadow) are checked as recorded reads are: a later
    /// unordered write by another rank finds them, and a read after another rank's unordered
    /// write finds that write, even inside a run of leased reads.
    #[test]
    fn leased_reads_are_checked_like_recorded_ones() {
        let verdict = |h: Option<RaceReport>| h.map(|h| (h.writer, h.start, h.end, h.read));
        // A run of element reads by rank 1, then rank 0 writes one of the elements.
        let r = Race::new(2, 1);
        for i in 0..4 {
            assert_eq!(verdict(r.read(0, 0, 4 * i, 4, 1, 7)), None);
        }
        assert_eq!(verdict(r.write(0, 0, 8, 4, 0)), Some((1, 8, 12, true)));

        // Rank 0's writes ordered by a barrier, then one more write nothing orders: rank 1's run
        // of reads is clean up to it and finds it.
        let r = Race::new(2, 1);
        assert_eq!(verdict(r.write(0, 0, 0, 64, 0)), None);
        r.barrier_arrive(0, false);
        r.barrier_arrive(1, true);
        r.barrier_leave(0);
        r.barrier_leave(1);
        assert_eq!(verdict(r.read(0, 0, 0, 4, 1, 7)), None);
        assert_eq!(verdict(r.write(0, 0, 16, 4, 0)), None);
        for i in 1..4 {
            assert_eq!(verdict(r.read(0, 0, 4 * i, 4, 1, 7)), None);
        }
        assert_eq!(verdict(r.read(0, 0, 16, 4, 1, 7)), Some((0, 16, 20, false)));

        // A rank's own writes keep its lease and its reads clean.
        let r = Race::new(2, 1);
        for i in 0..8 {
            assert_eq!(verdict(r.read(0, 1, 4 * i, 4, 1, 7)), None);
            assert_eq!(verdict(r.write(0, 1, 4 * i, 4, 1)), None);
        }
        // ... and rank 0's write over what rank 1 wrote and read, unordered, is still a race
        // (the two writes, reported before the read).
        assert_eq!(verdict(r.write(0, 1, 12, 4, 0)), Some((1, 12, 16, false)));
    }

    /// A rewrite of bytes a rank already wrote in this epoch takes the fast path only while no
    /// other rank has reached the allocation: another rank's read in between is still found.
    #[test]
    fn rewrites_are_checked_once_another_rank_reads() {
        let verdict = |h: Option<RaceReport>| h.map(|h| (h.writer, h.start, h.end, h.read));
        let r = Race::new(2, 1);
        for _ in 0..3 {
            assert_eq!(verdict(r.write(0, 0, 0, 8, 0)), None);
        }
        assert_eq!(verdict(r.read(0, 0, 0, 4, 1, 7)), Some((0, 0, 4, false)));
        assert_eq!(verdict(r.write(0, 0, 0, 4, 0)), Some((1, 0, 4, true)));
    }

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
