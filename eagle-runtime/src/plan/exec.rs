//! Running a plan: [`Exec`] runs the structures (a team of workers over contiguous blocks of
//! samples or rows, `RankPartition`'s ranks through [`super::ranks`]), each share on its
//! [`super::device`] (the CPU or a GPU), and folds mapreduce partials in row order.

use super::device::{Device, RowBufs};
use super::{fold, identity, Order, Partition, PlanRun, Ptr, Structure, ROW};
use crate::error::RuntimeError;
use eagle_ir::ReduceKind;
use std::ops::Range;

type Result<T> = std::result::Result<T, RuntimeError>;

pub(crate) struct Exec<'r> {
    pub(super) run: &'r PlanRun<'r>,
    /// Bytes of each plane buffer, in parameter order (copies and partials have the same size).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(super) sizes: Vec<usize>,
    /// The executor's decisions: where each share runs, which ranks are here.
    pub(super) roles: &'r (dyn super::Roles + Sync),
}

impl Exec<'_> {
    /// Where the share of `rank` runs: as the executor says for the share's structure (the
    /// plan's, or its `inner` one under `RankPartition`).
    fn device(&self, _rank: usize) -> &'static dyn Device {
        let s = match self.run.structure {
            Structure::RankPartition => self.run.inner,
            s => s,
        };
        self.roles.share_device(s)
    }

    /// Runs `units` (samples or rows) through `structure` with `threads` workers: contiguous
    /// blocks of units per worker; `work(range)` runs one block.
    fn team(
        &self,
        structure: Structure,
        rank: usize,
        units: Range<usize>,
        work: &(dyn Fn(Range<usize>) -> Result<()> + Sync),
    ) -> Result<()> {
        // Each worker's share is a span on its own track when the plan records a timeline.
        let work = &|worker: usize, r: Range<usize>| -> Result<()> {
            let t0 = self.run.trace.map(crate::trace::Trace::now);
            let n = r.len();
            let res = work(r);
            if let (Some(t), Some(t0)) = (self.run.trace, t0) {
                use crate::trace::{ArgValue, Cat, Track};
                let track = Track::Plan {
                    rank,
                    thread: worker,
                };
                let args = vec![("units", ArgValue::Int(n as i64))];
                t.span(track, Cat::Plan, self.run.kernel, t0, args);
            }
            res
        };
        let single = structure == Structure::DeviceKernel || self.run.order == Order::Sequential;
        let t = if single {
            1
        } else {
            self.run.threads.min(units.len().max(1))
        };
        if t <= 1 {
            return work(0, units);
        }
        let part = Partition::new(units.len(), t);
        // The workers come from the runtime's thread pool: a run starts no thread once the
        // pool holds `t` idle ones.
        let tasks: Vec<Box<dyn FnOnce() -> Result<()> + Send + '_>> = (1..t)
            .map(|i| {
                let r = part.share(i);
                let r = units.start + r.start..units.start + r.end;
                let task: Box<dyn FnOnce() -> Result<()> + Send + '_> =
                    Box::new(move || work(i, r));
                task
            })
            .collect();
        // The caller runs the first share itself.
        let first = part.share(0);
        let first = units.start + first.start..units.start + first.end;
        let (mine, rest) = crate::pool::run_all_and(tasks, 16 << 20, || work(0, first));
        mine?;
        rest.into_iter()
            .map(|r| {
                r.unwrap_or_else(|m| {
                    Err(RuntimeError::Plan(format!("a worker thread panicked: {m}")))
                })
            })
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    }

    pub(super) fn samplewise(&self, bufs: &[(Ptr, usize)]) -> Result<()> {
        let ptrs: Vec<Ptr> = bufs.iter().map(|b| b.0).collect();
        if self.run.structure != Structure::RankPartition {
            return self.team(self.run.structure, 0, 0..self.run.n, &|r| {
                self.device(0).samples(self, 0, r.start, r.end, &ptrs)
            });
        }
        // Each simulated rank computes its block into its own copy of the outputs (NaN
        // sentinel elsewhere); the gather assembles every rank's block.
        let ranks = self.roles.ranks(self.run.ranks)?;
        let (mine, r) = ranks.mine();
        let part = Partition::new(self.run.n, r);
        let outs: Vec<usize> = (0..self.run.planes.len())
            .filter(|&i| self.run.planes[i].out)
            .collect();
        let mut gathered: Vec<Vec<f64>> = outs
            .iter()
            .map(|&i| vec![f64::NAN; bufs[i].1 / 8])
            .collect();
        for &rank in &mine {
            let share = part.share(rank);
            // Outside its share a rank's copy holds the NaN sentinel; inside, the output's
            // current values (a kernel may write conditionally or read-modify-write).
            let mut copies: Vec<Vec<f64>> = outs
                .iter()
                .map(|&i| {
                    let mut c = vec![f64::NAN; bufs[i].1 / 8];
                    // SAFETY: `bufs[i]` is the output plane's storage, `bufs[i].1` bytes long.
                    let orig = unsafe {
                        std::slice::from_raw_parts(bufs[i].0 .0 as *const f64, bufs[i].1 / 8)
                    };
                    let width = c.len() / self.run.n.max(1);
                    for comp in 0..width {
                        let row = comp * self.run.n;
                        c[row + share.start..row + share.end]
                            .copy_from_slice(&orig[row + share.start..row + share.end]);
                    }
                    c
                })
                .collect();
            let mut ptrs = ptrs.clone();
            for (k, &i) in outs.iter().enumerate() {
                ptrs[i] = Ptr(copies[k].as_mut_ptr() as u64);
            }
            self.team(self.run.inner, rank, share.clone(), &|sub| {
                self.device(rank)
                    .samples(self, rank, sub.start, sub.end, &ptrs)
            })?;
            // allgather_plane: take this rank's samples of every component.
            for k in 0..outs.len() {
                let width = copies[k].len() / self.run.n.max(1);
                for c in 0..width {
                    let row = c * self.run.n;
                    let src = &copies[k][row + share.start..row + share.end];
                    let out = &mut gathered[k][row..row + self.run.n];
                    ranks.gather_plane(src, share.clone(), &part, out)?;
                }
            }
        }
        for (k, &i) in outs.iter().enumerate() {
            // SAFETY: `bufs[i]` is the output plane's storage, `bufs[i].1` bytes long.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(bufs[i].0 .0 as *mut f64, bufs[i].1 / 8) };
            dst.copy_from_slice(&gathered[k]);
        }
        Ok(())
    }

    pub(super) fn mapreduce(&self, kind: ReduceKind, bufs: &[(Ptr, usize)]) -> Result<()> {
        let rows = self.run.n.div_ceil(ROW);
        let outs: Vec<usize> = (0..self.run.planes.len())
            .filter(|&i| self.run.planes[i].reduction)
            .collect();
        // The identity of one partial of each reduction output.
        let ident: Vec<Vec<u8>> = outs
            .iter()
            .map(|&i| {
                let d = self.run.planes[i].dtype;
                identity(kind, d).repeat(bufs[i].1 / d.size())
            })
            .collect();
        // partials[k]: the partial of output k for every row, row after row, each starting at
        // the identity. Workers write disjoint rows.
        let mut partials: Vec<Vec<u8>> = ident.iter().map(|id| id.repeat(rows)).collect();
        let part_ptrs: Vec<Ptr> = partials
            .iter_mut()
            .map(|p| Ptr(p.as_mut_ptr() as u64))
            .collect();
        let base: Vec<Ptr> = bufs.iter().map(|b| b.0).collect();
        let row_bufs = RowBufs {
            base: &base,
            outs: &outs,
            ident: &ident,
            partials: &part_ptrs,
        };
        let do_rows = |rank: usize, rr: Range<usize>| -> Result<()> {
            if rr.is_empty() {
                return Ok(());
            }
            self.device(rank).rows(self, rank, rr, &row_bufs)
        };
        if self.run.structure == Structure::RankPartition {
            // Rows are dealt to ranks whole; each rank forms the partials of its rows through
            // `inner`; allgather_fold then collects every row's partial.
            let ranks = self.roles.ranks(self.run.ranks)?;
            let (mine, r) = ranks.mine();
            let part = Partition::new(rows, r);
            for &rank in &mine {
                self.team(self.run.inner, rank, part.share(rank), &|rr| {
                    do_rows(rank, rr)
                })?;
            }
            ranks.gather_partials(&part, &ident, &mut partials)?;
        } else {
            self.team(self.run.structure, 0, 0..rows, &|rr| do_rows(0, rr))?;
        }
        // Fold the row partials in row order, whatever ran them.
        for (k, &i) in outs.iter().enumerate() {
            let d = self.run.planes[i].dtype;
            let mut acc = ident[k].clone();
            fold(kind, d, &mut acc, &partials[k]);
            // SAFETY: `bufs[i]` is the output plane's storage, `bufs[i].1` bytes long.
            let dst = unsafe { std::slice::from_raw_parts_mut(bufs[i].0 .0 as *mut u8, bufs[i].1) };
            dst.copy_from_slice(&acc);
        }
        Ok(())
    }
}
