//! Where a share of a plan's samples (or of a mapreduce's rows) runs, behind one trait
//! ([`Device`]): the CPU, through the compiled entries ([`Cpu`]), or a GPU or its emulation,
//! through the CUDA entries ([`Gpu`]). The executor (`exec.rs`) picks one per share
//! (`DeviceKernel` on platform `cuda` is the GPU) and runs every structure the same way.

use super::exec::Exec;
#[cfg(feature = "cuda")]
use super::{Order, PlanRun};
use super::{Ptr, ROW, TILE_LANES};
use crate::error::RuntimeError;
use std::ops::Range;

type Result<T> = std::result::Result<T, RuntimeError>;

/// Where a share runs.
pub(crate) trait Device: Sync {
    /// Runs samples `lo..hi` for `rank` with the plane buffers at `bufs` (per-rank copies of
    /// the outputs under `RankPartition`). A failure names the rank, the sample kernel (not its
    /// internal wrapper) and the samples that were running.
    ///
    /// # Errors
    /// The compiled entry's run-time errors (as the run's `kernel_error` names them), and the
    /// device's own (no `cuda` feature, a GPU failure).
    fn samples(&self, x: &Exec<'_>, rank: usize, lo: usize, hi: usize, bufs: &[Ptr]) -> Result<()>;

    /// Forms the partials of rows `rows` for `rank` into the row-partial buffers of `b`. A
    /// failure names the first failing row's samples.
    ///
    /// # Errors
    /// As [`Device::samples`].
    fn rows(&self, x: &Exec<'_>, rank: usize, rows: Range<usize>, b: &RowBufs<'_>) -> Result<()>;
}

/// The buffers a mapreduce's rows are formed with: output `outs[k]`'s partial of each row
/// goes to row-partial buffer `partials[k]` (`ident[k]` bytes a row, every row at the
/// identity before); `base` holds the plane buffers.
pub(crate) struct RowBufs<'a> {
    /// The plane buffers, in parameter order.
    pub base: &'a [Ptr],
    /// The reduction outputs' parameter indices.
    pub outs: &'a [usize],
    /// Each reduction output's identity: one row's partial.
    pub ident: &'a [Vec<u8>],
    /// Each reduction output's row-partial buffer.
    pub partials: &'a [Ptr],
}

/// The CPU: the JIT-compiled entries of the artifact, through `EntryCaller`.
pub(super) struct Cpu;

impl Device for Cpu {
    /// Runs samples `lo..hi` for `rank` with the given buffer addresses. A failure names the
    /// rank, the sample kernel (not its internal wrapper) and the samples that were running.
    fn samples(&self, x: &Exec<'_>, rank: usize, lo: usize, hi: usize, bufs: &[Ptr]) -> Result<()> {
        let mut slots = vec![lo as u64, hi as u64];
        slots.extend(bufs.iter().map(|p| p.0));
        // Whole tiles through the tiles entry, the rest (and, to name a failure exactly as
        // the sample wrapper does, the whole block again after a failure: a sample-local
        // kernel's outputs depend on its inputs only) through the sample wrapper.
        let mut rest = lo;
        let mut tiles_failed = None;
        let tiles_entry = x
            .run
            .tiles_entry
            .filter(|te| x.run.art.code.entries.contains_key(*te));
        if let Some(te) = tiles_entry {
            let full = lo + (hi - lo) / TILE_LANES * TILE_LANES;
            if full > lo {
                let tiles = crate::EntryCaller::new(x.run.art, te, rank)?;
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
        let caller = crate::EntryCaller::new(x.run.art, x.run.wrapper, rank)?;
        // SAFETY: the slots are the plane buffers (or per-rank copies of the same size) in
        // parameter order; workers run disjoint samples, as the access category guarantees.
        let r = unsafe { caller.call(&slots) };
        // The tiles failed but one sample at a time did not: report what the tiles said.
        let r = r.and(tiles_failed.map_or(Ok(()), Err));
        r.map_err(|e| (x.run.kernel_error)(e, x.run.wrapper, format!("samples {rest}..{hi}")))
    }

    /// Forms the partials of rows `rows` for `rank` on the CPU in one call of the rows entry:
    /// `bufs` holds the plane buffers with each reduction output replaced by its row-partial
    /// buffer (every row at the identity). A failure names the first failing row's samples
    /// (found by running the block's rows one at a time: the partials are scratch and the
    /// inputs read-only, so nothing else changes).
    fn rows(&self, x: &Exec<'_>, rank: usize, rows: Range<usize>, b: &RowBufs<'_>) -> Result<()> {
        let mut bufs = b.base.to_vec();
        for (k, &i) in b.outs.iter().enumerate() {
            bufs[i] = b.partials[k];
        }
        let Some(entry) = x.run.rows_entry else {
            return Err(RuntimeError::Plan(
                "a mapreduce plan without its rows entry".into(),
            ));
        };
        let caller = crate::EntryCaller::new(x.run.art, entry, rank)?;
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
                let (lo, hi) = (row * ROW, ((row + 1) * ROW).min(x.run.n));
                return Err((x.run.kernel_error)(
                    e,
                    entry,
                    format!("samples {lo}..{hi}"),
                ));
            }
        }
        Err(RuntimeError::Plan(format!(
            "rows {}..{} of `{}` failed together but not one at a time",
            rows.start, rows.end, x.run.kernel
        )))
    }
}

/// A GPU, or the CUDA emulation: the artifact's CUDA entries, through
/// `cuda::launch_samples`.
pub(super) struct Gpu;

impl Device for Gpu {
    /// One thread per sample (one thread in all for a `cross_sample_write` kernel, which must
    /// run in sample order).
    #[cfg(feature = "cuda")]
    fn samples(&self, x: &Exec<'_>, rank: usize, lo: usize, hi: usize, bufs: &[Ptr]) -> Result<()> {
        use crate::cuda::KernelArg;
        let mut args = vec![KernelArg::Scalar(lo as u64), KernelArg::Scalar(hi as u64)];
        for (i, (p, &len)) in bufs.iter().zip(&x.sizes).enumerate() {
            if x.run.planes[i].uniform {
                // A uniform's slot holds its bits, not an address.
                args.push(KernelArg::Scalar(p.0));
                continue;
            }
            // SAFETY: `p` points to a live plane buffer (or a copy of the same size) of `len`
            // bytes; the GPU path runs one share at a time, so nothing else touches it.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.0 as *mut u8, len) };
            args.push(if x.run.planes[i].out {
                KernelArg::Out(bytes)
            } else {
                KernelArg::In(bytes)
            });
        }
        let threads = if x.run.order == Order::Sequential {
            1
        } else {
            (hi - lo) as u64
        };
        let symbol = entry_symbol(x.run, eagle_codegen::cuda::EntryKind::Samples)?;
        let during = format!("while running samples {lo}..{hi}");
        crate::cuda::launch_samples(
            x.run.art,
            &symbol,
            x.run.device,
            rank,
            threads,
            x.run.cuda_emulate,
            &mut args,
        )
        .map_err(|e| during_gpu(e, &during))?;
        Ok(())
    }

    #[cfg(not(feature = "cuda"))]
    fn samples(&self, _: &Exec<'_>, _: usize, _: usize, _: usize, _: &[Ptr]) -> Result<()> {
        Err(no_cuda())
    }

    fn rows(&self, x: &Exec<'_>, rank: usize, rows: Range<usize>, b: &RowBufs<'_>) -> Result<()> {
        let start = rows.start;
        for (r, p) in self.gpu_rows(x, rank, rows, b)?.into_iter().enumerate() {
            for (k, v) in p.iter().enumerate() {
                let w = b.ident[k].len();
                // SAFETY: row `start + r` of partial buffer k, written by this worker only
                // (rows are dealt to workers disjointly).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        v.as_ptr(),
                        (b.partials[k].0 as *mut u8).add((start + r) * w),
                        w,
                    )
                };
            }
        }
        Ok(())
    }
}

impl Gpu {
    /// Forms the partials of rows `rows` on the GPU (one thread per row, samples in order)
    /// and returns them per row, per reduction output.
    #[cfg(feature = "cuda")]
    fn gpu_rows(
        &self,
        x: &Exec<'_>,
        rank: usize,
        rows: Range<usize>,
        b: &RowBufs<'_>,
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        use crate::cuda::KernelArg;
        let (base, outs, ident) = (b.base, b.outs, b.ident);
        let count = rows.len();
        let mut partials: Vec<Vec<u8>> = ident.iter().map(|id| id.repeat(count)).collect();
        let mut args = vec![
            KernelArg::Scalar(rows.start as u64),
            KernelArg::Scalar(rows.end as u64),
            KernelArg::Scalar(x.run.n as u64),
        ];
        let mut parts = partials.iter_mut();
        for (i, (p, &len)) in base.iter().zip(&x.sizes).enumerate() {
            if x.run.planes[i].uniform {
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
        let symbol = entry_symbol(x.run, eagle_codegen::cuda::EntryKind::Rows)?;
        let during = format!(
            "while running rows {}..{}, samples {}..{}",
            rows.start,
            rows.end,
            rows.start * ROW,
            (rows.end * ROW).min(x.run.n)
        );
        crate::cuda::launch_samples(
            x.run.art,
            &symbol,
            x.run.device,
            rank,
            count as u64,
            x.run.cuda_emulate,
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
    fn gpu_rows(
        &self,
        _: &Exec<'_>,
        _: usize,
        _: Range<usize>,
        _: &RowBufs<'_>,
    ) -> Result<Vec<Vec<Vec<u8>>>> {
        Err(no_cuda())
    }
}

/// The symbol of the sample kernel's CUDA entry of `kind`, as codegen named it.
#[cfg(feature = "cuda")]
fn entry_symbol(run: &PlanRun<'_>, kind: eagle_codegen::cuda::EntryKind) -> Result<String> {
    run.art
        .cuda
        .as_ref()
        .and_then(|c| c.entry(run.kernel, kind))
        .map(|e| e.symbol.clone())
        .ok_or_else(|| {
            RuntimeError::Plan(format!(
                "the artifact of `{}` has no {kind:?} CUDA entry for this sample kernel",
                run.kernel
            ))
        })
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
