//! Running a plan's share: [`Exec`] calls the compiled wrapper for a range of samples (or rows
//! of a mapreduce) on the CPU or a GPU, splits the samples over a team of workers, and folds
//! mapreduce partials in row order.

use super::{fold, identity, Order, Partition, PlanRun, Ptr, Structure, ROW, TILE_LANES};
use crate::error::RuntimeError;
use eagle_ir::ReduceKind;
use std::ops::Range;

type Result<T> = std::result::Result<T, RuntimeError>;

pub(super) struct Exec<'r> {
    pub(super) run: &'r PlanRun<'r>,
    /// Bytes of each plane buffer, in parameter order (copies and partials have the same size).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(super) sizes: Vec<usize>,
}

impl Exec<'_> {
    /// The symbol of the sample kernel's CUDA entry of `kind`, as codegen named it.
    #[cfg(feature = "cuda")]
    fn entry_symbol(&self, kind: eagle_codegen::cuda::EntryKind) -> Result<String> {
        self.run
            .art
            .cuda
            .as_ref()
            .and_then(|c| c.entry(self.run.kernel, kind))
            .map(|e| e.symbol.clone())
            .ok_or_else(|| {
                RuntimeError::Plan(format!(
                    "the artifact of `{}` has no {kind:?} CUDA entry for this sample kernel",
                    self.run.kernel
                ))
            })
    }

    /// Runs samples `lo..hi` for `rank` with the given buffer addresses. A failure names the
    /// rank, the sample kernel (not its internal wrapper) and the samples that were running.
    fn call(&self, rank: usize, lo: usize, hi: usize, bufs: &[Ptr]) -> Result<()> {
        if self.gpu(rank) {
            return self.gpu_call(rank, lo, hi, bufs);
        }
        let mut slots = vec![lo as u64, hi as u64];
        slots.extend(bufs.iter().map(|p| p.0));
        // Whole tiles through the tiles entry, the rest (and, to name a failure exactly as
        // the sample wrapper does, the whole block again after a failure: a sample-local
        // kernel's outputs depend on its inputs only) through the sample wrapper.
        let mut rest = lo;
        let mut tiles_failed = None;
        let tiles_entry = self
            .run
            .tiles_entry
            .filter(|te| self.run.art.code.entries.contains_key(*te));
        if let Some(te) = tiles_entry {
            let full = lo + (hi - lo) / TILE_LANES * TILE_LANES;
            if full > lo {
                let tiles = crate::EntryCaller::new(self.run.art, te, rank)?;
                slots[1] = full as u64;
                // SAFETY: as below, samples lo..full.
                rest = match unsafe { tiles.call(&slots) } {
                    Ok(()) => full,
                    Err(e) => {
                        tiles_failed = Some(e);
                        lo
                    }
                };
                slots[0] = rest as u64;
                slots[1] = hi as u64;
            }
        }
        if rest == hi {
            return Ok(());
        }
        let caller = crate::EntryCaller::new(self.run.art, self.run.wrapper, rank)?;
        // SAFETY: the slots are the plane buffers (or per-rank copies of the same size) in
        // parameter order; workers run disjoint samples, as the access category guarantees.
        let r = unsafe { caller.call(&slots) };
        // The tiles failed but one sample at a time did not: report what the tiles said.
        let r = r.and(tiles_failed.map_or(Ok(()), Err));
        r.map_err(|e| (self.run.kernel_error)(e, self.run.wrapper, format!("samples {rest}..{hi}")))
    }

    /// Forms the partials of rows `rows` for `rank` on the CPU in one call of the rows entry:
    /// `bufs` holds the plane buffers with each reduction output replaced by its row-partial
    /// buffer (every row at the identity). A failure names the first failing row's samples
    /// (found by running the block's rows one at a time: the partials are scratch and the
    /// inputs read-only, so nothing else changes).
    fn call_rows(&self, rank: usize, rows: Range<usize>, bufs: &[Ptr]) -> Result<()> {
        let Some(entry) = self.run.rows_entry else {
            return Err(RuntimeError::Plan(
                "a mapreduce plan without its rows entry".into(),
            ));
        };
        let caller = crate::EntryCaller::new(self.run.art, entry, rank)?;
        let mut slots = vec![rows.start as u64, rows.end as u64];
        slots.extend(bufs.iter().map(|p| p.0));
        // SAFETY: the slots are the plane buffers and partial buffers in parameter order;
        // workers form disjoint rows.
        if unsafe { caller.call(&slots) }.is_ok() {
            return Ok(());
        }
        for row in rows.clone() {
            slots[0] = row as u64;
            slots[1] = row as u64 + 1;
            // SAFETY: as above, one row.
            if let Err(e) = unsafe { caller.call(&slots) } {
                let (lo, hi) = (row * ROW, ((row + 1) * ROW).min(self.run.n));
                return Err((self.run.kernel_error)(
                    e,
                    entry,
                    format!("samples {lo}..{hi}"),
                ));
            }
        }
        Err(RuntimeError::Plan(format!(
            "rows {}..{} of `{}` failed together but not one at a time",
            rows.start, rows.end, self.run.kernel
        )))
    }

    /// Whether the share of `rank` runs on the GPU.
    fn gpu(&self, _rank: usize) -> bool {
        let s = match self.run.structure {
            Structure::RankPartition => self.run.inner,
            s => s,
        };
        s == Structure::DeviceKernel && self.run.cuda
    }

    /// Runs samples `lo..hi` on the GPU, one thread per sample (one thread in all for a
    /// `cross_sample_write` kernel, which must run in sample order).
    #[cfg(feature = "cuda")]
    fn gpu_call(&self, rank: usize, lo: usize, hi: usize, bufs: &[Ptr]) -> Result<()> {
        use crate::cuda::KernelArg;
        let mut args = vec![KernelArg::Scalar(lo as u64), KernelArg::Scalar(hi as u64)];
        for (i, (p, &len)) in bufs.iter().zip(&self.sizes).enumerate() {
            if self.run.planes[i].uniform {
                // A uniform's slot holds its bits, not an address.
                args.push(KernelArg::Scalar(p.0));
                continue;
            }
            // SAFETY: `p` points to a live plane buffer (or a copy of the same size) of `len`
            // bytes; the GPU path runs one share at a time, so nothing else touches it.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.0 as *mut u8, len) };
            args.push(if self.run.planes[i].out {
                KernelArg::Out(bytes)
            } else {
                KernelArg::In(bytes)
            });
        }
        let threads = if self.run.order == Order::Sequential {
            1
        } else {
            (hi - lo) as u64
        };
        let symbol = self.entry_symbol(eagle_codegen::cuda::EntryKind::Samples)?;
        let during = format!("while running samples {lo}..{hi}");
        crate::cuda::launch_samples(
            self.run.art,
            &symbol,
            self.run.device,
            rank,
            threads,
            self.run.cuda_emulate,
            &mut args,
        )
        .map_err(|e| during_gpu(e, &during))?;
        Ok(())
    }

    /// Forms the partials of rows `rows` on the GPU (one thread per row, samples in order) and
    /// returns them per row, per reduction output.
    #[cfg(feature = "cuda")]
    fn gpu_rows(
        &self,
        rank: usize,
        rows: Range<usize>,
        base: &[Ptr],
        outs: &[usize],
        ident: &[Vec<u8>],
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        use crate::cuda::KernelArg;
        let count = rows.len();
        let mut partials: Vec<Vec<u8>> = ident.iter().map(|id| id.repeat(count)).collect();
        let mut args = vec![
            KernelArg::Scalar(rows.start as u64),
            KernelArg::Scalar(rows.end as u64),
            KernelArg::Scalar(self.run.n as u64),
        ];
        let mut parts = partials.iter_mut();
        for (i, (p, &len)) in base.iter().zip(&self.sizes).enumerate() {
            if self.run.planes[i].uniform {
                args.push(KernelArg::Scalar(p.0));
                continue;
            }
            if outs.contains(&i) {
                let part = parts
                    .next()
                    .ok_or_else(|| RuntimeError::Plan("partials".into()))?;
                args.push(KernelArg::Out(&mut part[..]));
                continue;
            }
            // SAFETY: `p` points to a live plane buffer of `len` bytes, read-only here.
            let bytes = unsafe { std::slice::from_raw_parts(p.0 as *const u8, len) };
            args.push(KernelArg::In(bytes));
        }
        let symbol = self.entry_symbol(eagle_codegen::cuda::EntryKind::Rows)?;
        let during = format!(
            "while running rows {}..{}, samples {}..{}",
            rows.start,
            rows.end,
            rows.start * ROW,
            (rows.end * ROW).min(self.run.n)
        );
        crate::cuda::launch_samples(
            self.run.art,
            &symbol,
            self.run.device,
            rank,
            count as u64,
            self.run.cuda_emulate,
            &mut args,
        )
        .map_err(|e| during_gpu(e, &during))?;
        drop(args);
        Ok((0..count)
            .map(|r| {
                partials
                    .iter()
                    .zip(ident)
                    .map(|(all, id)| all[r * id.len()..(r + 1) * id.len()].to_vec())
                    .collect()
            })
            .collect())
    }

    #[cfg(not(feature = "cuda"))]
    fn gpu_call(&self, _rank: usize, _lo: usize, _hi: usize, _bufs: &[Ptr]) -> Result<()> {
        Err(no_cuda())
    }

    #[cfg(not(feature = "cuda"))]
    fn gpu_rows(
        &self,
        _rank: usize,
        _rows: Range<usize>,
        _base: &[Ptr],
        _outs: &[usize],
        _ident: &[Vec<u8>],
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        Err(no_cuda())
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
                self.call(0, r.start, r.end, &ptrs)
            });
        }
        // Each simulated rank computes its block into its own copy of the outputs (NaN
        // sentinel elsewhere); the gather assembles every rank's block.
        let ranks = super::ranks::of(self.run.ranks)?;
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
                self.call(rank, sub.start, sub.end, &ptrs)
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
        let do_rows = |rank: usize, rr: Range<usize>| -> Result<()> {
            if rr.is_empty() {
                return Ok(());
            }
            if self.gpu(rank) {
                let start = rr.start;
                for (r, p) in self
                    .gpu_rows(rank, rr, &base, &outs, &ident)?
                    .into_iter()
                    .enumerate()
                {
                    for (k, v) in p.iter().enumerate() {
                        let w = ident[k].len();
                        // SAFETY: row `start + r` of partial buffer k, written by this worker
                        // only (rows are dealt to workers disjointly).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                v.as_ptr(),
                                (part_ptrs[k].0 as *mut u8).add((start + r) * w),
                                w,
                            )
                        };
                    }
                }
                return Ok(());
            }
            let mut ptrs = base.clone();
            for (k, &i) in outs.iter().enumerate() {
                ptrs[i] = part_ptrs[k];
            }
            self.call_rows(rank, rr, &ptrs)
        };
        if self.run.structure == Structure::RankPartition {
            // Rows are dealt to ranks whole; each rank forms the partials of its rows through
            // `inner`; allgather_fold then collects every row's partial.
            let ranks = super::ranks::of(self.run.ranks)?;
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

/// A GPU failure with the samples that were running appended, as on the CPU.
#[cfg(feature = "cuda")]
fn during_gpu(e: RuntimeError, during: &str) -> RuntimeError {
    match e {
        RuntimeError::RankFailed { rank, cause } => RuntimeError::RankFailed {
            rank,
            cause: cause.map(|m| format!("{m} ({during})")),
        },
        other => other,
    }
}

#[cfg(not(feature = "cuda"))]
fn no_cuda() -> RuntimeError {
    RuntimeError::PlatformUnavailable {
        platform: "cuda".into(),
        reason: "this build has no `cuda` feature; rebuild with `--features cuda`".into(),
    }
}
