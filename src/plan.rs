//! Execution plans for sample kernels (the multi-GPU seed's model, in Rust).
//!
//! A sample kernel (`#[eagle::kernel(sample)]`) runs its body once per sample `s` in `0..n`.
//! Its inputs and outputs are named *planes*: `[n]`, or `[w, n]` for a plane of width `w`
//! (component-major). [`plan()`] fixes which structure runs which samples:
//!
//! - [`Structure::HostTeam`]: CPU threads over the samples (the default);
//! - [`Structure::DeviceKernel`]: one device runs them all (the CPU backend stands in for a GPU
//!   until the CUDA backend lands);
//! - [`Structure::RankPartition`]: ranks each take a contiguous block of samples (the first
//!   `n % R` one extra), run it through the `inner` structure, and every rank ends with the
//!   whole output, gathered. Inputs are replicated, outputs must be `f64`, and
//!   `cross_sample_write` kernels are refused at any world size.
//!
//! Mapreduce kernels are bit-exact at every world size and thread count: partials are formed
//! per row of [`ROW`] samples in sample order, rows are dealt whole, and the row partials are
//! folded in row order (see `docs/determinism.md`).

use crate::ir::{self, AccessCategory, AccessInfo, DType, EagleFn, Level, ReduceKind, Type};

use crate::{codegen, Arg, Error, Result};
use eagle_runtime::Element;
use std::ops::Range;

mod rows;
mod tiles;

/// Samples per partial of a mapreduce (a "row").
pub const ROW: usize = eagle_codegen::abi::ROW;

/// What runs a share of the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Structure {
    /// CPU threads over the samples (the default).
    HostTeam,
    /// One device runs all of its samples.
    DeviceKernel,
    /// Ranks split the samples; `inner` runs each rank's share.
    RankPartition,
}

impl Structure {
    /// Name in messages and manifests.
    pub fn name(self) -> &'static str {
        match self {
            Structure::HostTeam => "HostTeam",
            Structure::DeviceKernel => "DeviceKernel",
            Structure::RankPartition => "RankPartition",
        }
    }
}

/// The named planes of one run: inputs by shared reference, outputs by mutable reference.
/// A plane is a [`crate::Tensor`] or (feature `ndarray`) an `ndarray` array or view
/// ([`crate::AsInput`], [`crate::AsOutput`]): inputs in any layout (standard layouts
/// borrowed, others copied once), outputs in standard (C-contiguous) layout only.
#[derive(Debug, Default)]
pub struct Planes<'a> {
    items: Vec<(String, Arg<'a>)>,
    /// The first plane refused while adding (an output not in standard layout), reported by
    /// [`Plan::run`] before anything runs.
    refused: Option<String>,
}

impl<'a> Planes<'a> {
    /// No planes yet.
    pub fn new() -> Self {
        Planes {
            items: vec![],
            refused: None,
        }
    }
    /// Adds input plane `name`: a `&Tensor<T>`, or an `ndarray` array or view.
    pub fn input<T: Element>(mut self, name: &str, t: impl crate::AsInput<'a, T>) -> Self {
        match t.input_arg("(plan)", name) {
            Ok(a) => self.items.push((name.to_string(), a)),
            Err(e) => {
                self.refused.get_or_insert_with(|| plane_refusal(name, &e));
            }
        }
        self
    }
    /// Adds output plane `name`: a `&mut Tensor<T>`, or an `ndarray` array or view in
    /// standard layout (any other layout makes [`Plan::run`] fail with [`Error::Plan`] naming
    /// the plane, before anything runs).
    pub fn output<T: Element>(mut self, name: &str, t: impl crate::AsOutput<'a, T>) -> Self {
        match t.output_arg("(plan)", name) {
            Ok(a) => self.items.push((name.to_string(), a)),
            Err(e) => {
                self.refused.get_or_insert_with(|| plane_refusal(name, &e));
            }
        }
        self
    }
    /// The address of plane `name`'s first byte as the run reads or writes it (the caller's
    /// storage when nothing was copied), if there is such a plane.
    pub fn data_ptr(&self, name: &str) -> Option<*const u8> {
        self.items
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, a)| a.data_ptr())
    }
}

/// The message of a plane refused by [`Planes::input`] or [`Planes::output`].
fn plane_refusal(name: &str, e: &Error) -> String {
    match e {
        Error::Runtime(eagle_runtime::RuntimeError::Argument {
            expected, found, ..
        }) => format!("plane `{name}`: expected {expected}, found {found}"),
        e => format!("plane `{name}`: {e}"),
    }
}

/// A contiguous block partition of `n` items over `parts` ranks: the first `n % parts` blocks
/// are one longer (seed rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// Items.
    pub n: usize,
    /// Ranks.
    pub parts: usize,
}

impl Partition {
    /// `n` items over `parts` ranks.
    pub fn new(n: usize, parts: usize) -> Partition {
        Partition {
            n,
            parts: parts.max(1),
        }
    }
    /// The items of rank `r`.
    pub fn share(&self, r: usize) -> Range<usize> {
        let (q, rem) = (self.n / self.parts, self.n % self.parts);
        let lo = r * q + r.min(rem);
        lo..(lo + q + usize::from(r < rem)).min(self.n.max(lo))
    }
}

/// The MPI world of a rank partition. Without the `mpi` cargo feature there is none.
pub struct RankPartition;

impl RankPartition {
    /// Whether this build can run over MPI (`mpi` cargo feature).
    pub fn available() -> bool {
        cfg!(feature = "mpi")
    }
    /// `(rank, size)` of this process: `(0, 1)` when not launched by `mpirun` (always, in a
    /// build without the `mpi` feature).
    pub fn world() -> (usize, usize) {
        #[cfg(feature = "mpi")]
        return eagle_runtime::mpi_rt::world();
        #[cfg(not(feature = "mpi"))]
        (0, 1)
    }
    /// The share of `partition` that this process computes: the share of rank `world().0`.
    /// Without `mpirun` (or without the `mpi` feature) that is rank 0's share, *not* the whole
    /// range: to simulate R ranks in one process, take [`Partition::share`] of each rank, or
    /// run the plan with [`Plan::with_simulated_ranks`].
    pub fn local(partition: &Partition) -> Range<usize> {
        partition.share(Self::world().0)
    }
    /// Gathers each rank's share of a plane (`local`, this rank's samples of `partition`) so
    /// every rank holds all of it, in sample order, over MPI (an all-gather-varcount).
    ///
    /// # Errors
    /// [`Error::Plan`] naming the `mpi` feature, in a build without it, or when `local` does not
    /// have this rank's share length.
    pub fn allgather_plane(local: &[f64], partition: &Partition) -> Result<Vec<f64>> {
        let (me, size) = Self::world();
        if !Self::available() {
            return Err(no_mpi("RankPartition::allgather_plane"));
        }
        let check = if partition.parts != size || local.len() != partition.share(me).len() {
            Err(Error::Plan(format!(
                "argument `local`: rank {me} of {size} holds {} values, but its share of {} items over {} ranks is {} (items {:?}); pass the values of `RankPartition::local(partition)`",
                local.len(),
                partition.n,
                partition.parts,
                partition.share(me).len(),
                partition.share(me)
            )))
        } else {
            Ok(())
        };
        agree_before_gather("RankPartition::allgather_plane", check)?;
        let mut out = vec![0f64; partition.n];
        Self::allgather_plane_into(local, partition, &mut out)?;
        Ok(out)
    }
    /// [`RankPartition::allgather_plane`] into a caller's buffer of `partition.n` values (no
    /// allocation: the form to use in a loop).
    ///
    /// # Errors
    /// As [`RankPartition::allgather_plane`], and when `out` does not hold `partition.n` values.
    pub fn allgather_plane_into(
        local: &[f64],
        partition: &Partition,
        out: &mut [f64],
    ) -> Result<()> {
        let (me, size) = Self::world();
        if !Self::available() {
            return Err(no_mpi("RankPartition::allgather_plane"));
        }
        let check = if partition.parts != size
            || local.len() != partition.share(me).len()
            || out.len() != partition.n
        {
            Err(Error::Plan(format!(
                "RankPartition::allgather_plane_into: rank {me} of {size} holds {} values (its share of {partition:?} is {}) and an output of {} values (expected {})",
                local.len(),
                partition.share(me).len(),
                out.len(),
                partition.n
            )))
        } else {
            Ok(())
        };
        agree_before_gather("RankPartition::allgather_plane_into", check)?;
        let counts: Vec<usize> = (0..size).map(|q| partition.share(q).len()).collect();
        #[cfg(feature = "mpi")]
        eagle_runtime::mpi_rt::allgather_f64_into(local, &counts, out);
        #[cfg(not(feature = "mpi"))]
        let _ = counts;
        Ok(())
    }
    /// Gathers every rank's row partials (`local`: `cells` values per row, for this rank's rows
    /// of `rows`, in row order) and folds all rows in row order with `op`, over MPI: every rank
    /// gets the same `cells` values, whatever the world size.
    ///
    /// # Errors
    /// [`Error::Plan`] naming the `mpi` feature, in a build without it, or for a `local` of
    /// the wrong length.
    pub fn allgather_fold(
        local: &[f64],
        rows: &Partition,
        cells: usize,
        op: ReduceKind,
    ) -> Result<Vec<f64>> {
        let (me, size) = Self::world();
        if !Self::available() {
            return Err(no_mpi("RankPartition::allgather_fold"));
        }
        let check = if rows.parts != size || local.len() != rows.share(me).len() * cells {
            Err(Error::Plan(format!(
                "argument `local`: rank {me} holds {} values, expected {} rows x {cells} cells",
                local.len(),
                rows.share(me).len()
            )))
        } else {
            Ok(())
        };
        agree_before_gather("RankPartition::allgather_fold", check)?;
        let counts: Vec<usize> = (0..size).map(|q| rows.share(q).len() * cells * 8).collect();
        let all = allgather(&f64_bytes(local), &counts)?;
        let mut acc = identity(op, DType::F64).repeat(cells);
        for row in all.chunks_exact((cells * 8).max(1)) {
            combine(op, DType::F64, &mut acc, row);
        }
        Ok(bytes_f64(&acc))
    }
}

/// Before a gather, the ranks agree on this rank's `check` of its arguments: a wrong share on
/// one rank is an error on every rank (each names the rank that was wrong), never a rank left
/// alone in the gather. The same partition on every rank is part of the agreement.
fn agree_before_gather(what: &str, check: Result<()>) -> Result<()> {
    #[cfg(feature = "mpi")]
    if RankPartition::world().1 > 1 {
        let stance = eagle_runtime::agree::Stance::at(format!("a call of {what}"))
            .failed(check.as_ref().err().map(ToString::to_string));
        let timeout = eagle_runtime::RunOptions::from_env()?.wait_timeout;
        let agreed = eagle_runtime::mpi_rt::agree(&stance, timeout);
        check?;
        return Ok(agreed?);
    }
    let _ = what;
    check
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_f64(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect()
}

/// An all-gather-varcount of bytes over MPI.
fn allgather(mine: &[u8], counts: &[usize]) -> Result<Vec<u8>> {
    #[cfg(feature = "mpi")]
    return Ok(eagle_runtime::mpi_rt::allgather_bytes(mine, counts));
    #[cfg(not(feature = "mpi"))]
    {
        let _ = (mine, counts);
        Err(no_mpi("RankPartition"))
    }
}

/// A GPU failure with the samples that were running appended, as on the CPU.
#[cfg(feature = "cuda")]
fn during_gpu(e: eagle_runtime::RuntimeError, during: &str) -> Error {
    match e {
        eagle_runtime::RuntimeError::RankFailed { rank, cause } => {
            Error::Runtime(eagle_runtime::RuntimeError::RankFailed {
                rank,
                cause: cause.map(|m| format!("{m} ({during})")),
            })
        }
        other => Error::Runtime(other),
    }
}

#[cfg(not(feature = "cuda"))]
fn no_cuda() -> Error {
    Error::Runtime(eagle_runtime::RuntimeError::PlatformUnavailable {
        platform: "cuda".into(),
        reason: "this build has no `cuda` feature; rebuild with `--features cuda`".into(),
    })
}

fn no_mpi(what: &str) -> Error {
    Error::Plan(format!(
        "{what} needs MPI, and this build has no `mpi` feature; rebuild with `cargo build --release --features mpi` (OpenMPI or MPICH and libclang installed), or simulate ranks in-process with `Plan::with_simulated_ranks(R)`"
    ))
}

#[derive(Debug, Clone)]
struct PlaneParam {
    name: String,
    out: bool,
    dtype: DType,
    rank: usize,
    reduction: bool,
}

/// A sample kernel with a structure: describes the run at any world size.
#[derive(Debug, Clone)]
pub struct Plan {
    kernel: String,
    wrapper: String,
    /// The rows entry of a mapreduce kernel (`rows.rs`): one call forms many rows' partials.
    rows_entry: Option<String>,
    /// The sample count's dim (the last dim of the first per-sample plane).
    n_dim: Option<ir::Dim>,
    /// The tiles entry of a sample-local kernel (`tiles.rs`): `tiles::LANES` samples per tile.
    tiles_entry: Option<String>,
    module: ir::Module,
    info: AccessInfo,
    structure: Structure,
    inner: Structure,
    threads: usize,
    ranks: Option<usize>,
    planes: Vec<PlaneParam>,
    platform: eagle_runtime::Platform,
    cuda_emulate: bool,
}

/// Plans sample kernel `kernel` on `structure`; `inner` is what each rank's share runs
/// through when `structure` is [`Structure::RankPartition`] (ignored otherwise).
///
/// # Errors
/// [`Error::Ir`] when `kernel` is not a sample kernel or does not build; [`Error::Plan`] when
/// a `cross_sample_write` kernel is rank-partitioned, or `inner` is itself `RankPartition`.
///
/// A category the kernel declares (`category = "..."`) is used in place of the inferred one;
/// it may be stricter than the body (docs/plans.md), so a mapreduce body declared
/// `cross_sample_write` runs its samples in order and cannot be rank-partitioned.
pub fn plan<K: EagleFn>(_kernel: K, structure: Structure, inner: Structure) -> Result<Plan> {
    let mut mb = ir::ModuleBuilder::new();
    K::build(&mut mb)?;
    let declared = K::CATEGORY.and_then(AccessCategory::parse);
    plan_declared(&mb.finish(), K::NAME, declared, structure, inner)
}

/// [`plan()`] for a sample kernel given as IR (`module` holds kernel `name` and its callees),
/// such as a kernel loaded from a plugin.
///
/// # Errors
/// As [`plan()`].
pub fn plan_module(
    generic: &ir::Module,
    name: &str,
    structure: Structure,
    inner: Structure,
) -> Result<Plan> {
    plan_declared(generic, name, None, structure, inner)
}

/// [`plan_module`] with the category the kernel declares, if any (checked to cover the body).
pub(crate) fn plan_declared(
    generic: &ir::Module,
    name: &str,
    declared: Option<AccessCategory>,
    structure: Structure,
    inner: Structure,
) -> Result<Plan> {
    let f = generic
        .function(name)
        .ok_or_else(|| {
            Error::Plan(format!(
                "argument `kernel`: no function `{name}` in the module"
            ))
        })?
        .clone();
    if f.level != Level::Sample {
        return Err(Error::Plan(format!(
            "argument `kernel`: `{name}` is a {} function; plans run sample kernels, declared `#[eagle::kernel(sample)]` with the sample index as first parameter",
            f.level.name()
        )));
    }
    let mut info = ir::access_category(&f)?;
    match declared {
        Some(d) if d == info.category => {}
        Some(d) if d.admits(info.category) => {
            info = ir::AccessInfo {
                category: d,
                reduction_outputs: vec![],
            }
        }
        Some(d) => {
            return Err(Error::Plan(format!(
                "kernel `{name}` declares category `{d}` but its body is `{}`; a declaration may be stricter than the body, never looser",
                info.category
            )))
        }
        None => {}
    }
    if structure == Structure::RankPartition && info.category == AccessCategory::CrossSampleWrite {
        return Err(Error::Plan(format!(
            "kernel `{name}` is cross_sample_write (it writes other samples or reads another sample's output), so it cannot be rank-partitioned at any world size: a rank would write samples another rank owns; plan it with HostTeam or DeviceKernel"
        )));
    }
    if structure == Structure::RankPartition && inner == Structure::RankPartition {
        return Err(Error::Plan(
            "argument `inner`: a rank's share runs through HostTeam or DeviceKernel, not RankPartition".into(),
        ));
    }
    let planes: Vec<PlaneParam> = f.params[1..]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let t = f.ty(p.value);
            PlaneParam {
                name: p.name.clone(),
                out: p.out,
                dtype: t.dtype().unwrap_or(DType::F64),
                rank: t.shape().map_or(0, |s| s.rank()),
                reduction: info.reduction_outputs.contains(&(i + 1)),
            }
        })
        .collect();
    for p in &planes {
        if p.rank == 0 || p.rank > 2 {
            return Err(Error::Plan(format!(
                "plane `{}` of `{name}` has rank {}; planes are `[n]` or `[w, n]` (component-major)",
                p.name, p.rank
            )));
        }
    }
    // The wrapper: a device function that runs the kernel for s in lo..hi. The kernel and its
    // callees are copied from `generic`.
    let wrapper = format!("__plan_{name}");
    // A module from a plugin may carry a stored wrapper: drop it and build our own, so the
    // executor only ever runs code derived from the kernel itself.
    let rows_wrapper = format!("__plan_rows_{name}");
    let tiles_wrapper = format!("__plan_tiles_{name}");
    let mut base = generic.clone();
    base.functions
        .retain(|g| g.name != wrapper && g.name != rows_wrapper && g.name != tiles_wrapper);
    let mut mb = ir::ModuleBuilder::from_module(base);
    let fparams = f.params.clone();
    let ftypes: Vec<Type> = fparams.iter().map(|p| f.ty(p.value).clone()).collect();
    let reduction: Vec<bool> = planes.iter().map(|p| p.reduction).collect();
    // The sample count n: the last dim of the first per-sample plane.
    let n_dim = fparams[1..]
        .iter()
        .zip(&ftypes[1..])
        .zip(&reduction)
        .find(|(_, red)| !**red)
        .and_then(|((_, t), _)| t.shape().and_then(|s| s.0.last().cloned()));
    mb.define(&wrapper, Level::Device, |fb| {
        let lo = fb.param("lo", Type::Scalar(DType::Index), false);
        let hi = fb.param("hi", Type::Scalar(DType::Index), false);
        let vals: Vec<ir::Value> = fparams[1..]
            .iter()
            .zip(&ftypes[1..])
            .map(|(p, t)| fb.param(&p.name, t.clone(), p.out))
            .collect();
        // The executor only runs 0 <= lo <= s < hi <= n (and never n = 0), so clamping the
        // bounds to 0..=n changes nothing and lets the backend prove every `x[s]` in bounds:
        // no run-time check per access, and no clamp per sample either.
        let (lo, hi) = match &n_dim {
            Some(d) => {
                let n = fb.value(ir::Operand::from(d.clone()), Some(DType::Index))?;
                let lo = fb.bin(ir::BinOp::Max, lo, ir::Operand::Int(0))?;
                (lo, fb.bin(ir::BinOp::Min, hi, n)?)
            }
            None => (lo, hi),
        };
        fb.for_range(lo, hi, |fb, s| {
            let mut args = vec![s];
            args.extend(vals.iter().copied());
            fb.inline(&f, &args)
        })
    })?;
    let rows_entry = match (info.category, &n_dim) {
        (AccessCategory::Mapreduce(kind), Some(n)) => {
            rows::define(&mut mb, &rows_wrapper, &f, &reduction, kind, n)?;
            Some(rows_wrapper)
        }
        _ => None,
    };
    let tiles_entry = (info.category == AccessCategory::SampleLocal
        && tiles::define(&mut mb, &tiles_wrapper, &f)?)
    .then_some(tiles_wrapper);
    let module = mb.finish();
    ir::verify_module(&module)?;
    Ok(Plan {
        kernel: name.to_string(),
        wrapper,
        rows_entry,
        n_dim,
        tiles_entry,
        module,
        info,
        structure,
        inner,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ranks: None,
        planes,
        platform: eagle_runtime::Platform::Sim,
        cuda_emulate: eagle_runtime::RunOptions::from_env()?.cuda_emulate,
    })
}

/// `i` clamped into `0..n` in `fb` (`n >= 1`), for an index the caller knows is already in
/// that range: the clamp changes nothing, and gives the range analysis a bound it cannot
/// derive (it knows nothing of the relations between a wrapper's parameters).
fn clamp_below(
    fb: &mut ir::FunctionBuilder<'_>,
    n: ir::Value,
    i: ir::Value,
) -> ir::Result<ir::Value> {
    let last = fb.bin(ir::BinOp::Sub, n, ir::Operand::Int(1))?;
    let upper = fb.bin(ir::BinOp::Min, i, last)?;
    fb.bin(ir::BinOp::Max, upper, ir::Operand::Int(0))
}

/// The first line of every op of `kernel`'s body as inlined into `wrapper`'s sample loop,
/// paired with the same op's first line in `kernel` itself (both as printed from `module`, so
/// with each function's own value numbering). Empty when the two do not line up op for op.
fn inlined_op_names(module: &ir::Module, wrapper: &str, kernel: &str) -> Vec<(String, String)> {
    fn first(f: &ir::Function, op: &ir::Op) -> String {
        ir::print_op(f, op)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    }
    fn pair(
        wf: &ir::Function,
        wb: &[ir::Op],
        kf: &ir::Function,
        kb: &[ir::Op],
        out: &mut Vec<(String, String)>,
    ) -> bool {
        if wb.len() != kb.len() {
            return false;
        }
        for (w, k) in wb.iter().zip(kb) {
            if std::mem::discriminant(&w.kind) != std::mem::discriminant(&k.kind) {
                return false;
            }
            out.push((first(wf, w), first(kf, k)));
            let ok = match (&w.kind, &k.kind) {
                (ir::OpKind::For { body: a, .. }, ir::OpKind::For { body: b, .. }) => {
                    pair(wf, &a.ops, kf, &b.ops, out)
                }
                (
                    ir::OpKind::If {
                        then_body: a1,
                        else_body: a2,
                        ..
                    },
                    ir::OpKind::If {
                        then_body: b1,
                        else_body: b2,
                        ..
                    },
                ) => pair(wf, &a1.ops, kf, &b1.ops, out) && pair(wf, &a2.ops, kf, &b2.ops, out),
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        true
    }
    let (Some(wf), Some(kf)) = (module.function(wrapper), module.function(kernel)) else {
        return vec![];
    };
    let Some(body) = wf.body.ops.iter().find_map(|op| match &op.kind {
        ir::OpKind::For { body, .. } => Some(body),
        _ => None,
    }) else {
        return vec![];
    };
    let k = kf.body.ops.len();
    if body.ops.len() < k {
        return vec![];
    }
    let mut out = vec![];
    if pair(
        wf,
        &body.ops[body.ops.len() - k..],
        kf,
        &kf.body.ops,
        &mut out,
    ) {
        out
    } else {
        vec![]
    }
}

/// Raw plane buffer addresses, shareable across the worker threads of one run.
#[derive(Clone, Copy)]
struct Ptr(u64);
// SAFETY: the addresses point into buffers that outlive the scoped threads of a run; workers
// write disjoint samples (or disjoint partial buffers), as the access category guarantees.
unsafe impl Send for Ptr {}
unsafe impl Sync for Ptr {}

fn identity(kind: ReduceKind, d: DType) -> Vec<u8> {
    use eagle_ir::eval::{cast, Scalar};
    use eagle_ir::tile::reduce_identity;
    use eagle_ir::ReduceOp;
    let s = match kind {
        // A mapreduce's rows start from +0 (the tile reductions' lanes from -0.0).
        ReduceKind::Sum => Scalar::from_bits(0, d),
        ReduceKind::Times => reduce_identity(ReduceOp::Prod, d),
        ReduceKind::Max => reduce_identity(ReduceOp::Max, d),
        ReduceKind::Land => cast(Scalar::Bool(true), d),
    };
    s.bits().to_le_bytes()[..d.size()].to_vec()
}

/// `acc = acc <kind> x`, elementwise, in dtype `d`: the evaluator's op (`eagle_ir::eval`, the
/// one definition compiled code also follows: wrapping integers, `max` with the canonical
/// NaN, `f16` rounded after each op).
fn combine(kind: ReduceKind, d: DType, acc: &mut [u8], x: &[u8]) {
    use eagle_ir::eval::{binary, Scalar};
    use eagle_ir::BinOp;
    let op = match kind {
        ReduceKind::Sum => BinOp::Add,
        ReduceKind::Times => BinOp::Mul,
        ReduceKind::Max => BinOp::Max,
        ReduceKind::Land => BinOp::And,
    };
    let w = d.size();
    let word = |b: &[u8]| {
        let mut le = [0u8; 8];
        le[..w].copy_from_slice(b);
        Scalar::from_bits(u64::from_le_bytes(le), d)
    };
    for (a, b) in acc.chunks_exact_mut(w).zip(x.chunks_exact(w)) {
        let (av, bv) = (word(a), word(b));
        // The plan's verifier admits only ops defined on the dtype.
        let r = binary(op, av, bv).unwrap_or(av);
        a.copy_from_slice(&r.bits().to_le_bytes()[..w]);
    }
}

impl Plan {
    /// Uses `n` worker threads for `HostTeam` (default: the machine's parallelism; 0 is taken as
    /// 1). Each run starts at most `n` threads, and never more than there are blocks of work.
    pub fn with_threads(mut self, n: usize) -> Self {
        self.threads = n.max(1);
        self
    }
    /// Runs a `RankPartition` plan over `r` ranks simulated in this process (each rank a
    /// worker with its own copy of the outputs), instead of MPI. For tests and for machines
    /// without MPI.
    pub fn with_simulated_ranks(mut self, r: usize) -> Self {
        self.ranks = Some(r);
        self
    }
    /// For `RankPartition`: runs over the MPI world when this process was launched by `mpirun`
    /// with more than one process, else over `r` simulated ranks in this process.
    ///
    /// Built without the `mpi` feature but started by `mpirun` with more than one process,
    /// the plan is left on the MPI world, so [`Plan::run`] refuses it naming the feature
    /// (every process would otherwise compute the whole job alone).
    pub fn on_world(self, r: usize) -> Self {
        let launched = eagle_runtime::launcher_world_size().is_some_and(|n| n > 1);
        if RankPartition::world().1 > 1 || (launched && !RankPartition::available()) {
            self
        } else {
            self.with_simulated_ranks(r)
        }
    }
    /// Where `DeviceKernel` runs (also as the `inner` of `RankPartition`): `Sim`/`Cpu` (the
    /// default) on the CPU backend, `Cuda` on GPU `device` of [`Plan::run`], one thread per
    /// sample (one per row of [`ROW`] samples for a mapreduce, folded on the host in row order,
    /// so the bits match the CPU's). `HostTeam` always runs on CPU threads.
    pub fn with_platform(mut self, platform: eagle_runtime::Platform) -> Self {
        self.platform = platform;
        self
    }
    /// On platform `cuda`, runs the CUDA C on CPU threads instead of a GPU (compiled by the host
    /// C++ compiler; see `eagle_runtime::cuda`): checks the GPU path without one. Default off,
    /// or `EAGLE_CUDA_EMULATE=1`.
    pub fn with_cuda_emulation(mut self, on: bool) -> Self {
        self.cuda_emulate = on;
        self
    }
    /// The CUDA C the GPU runs for this plan's sample kernel with its symbolic dims bound to
    /// `dims` (such as `[("N", 200000)]`): the whole translation unit, its entry points and
    /// its fault table.
    ///
    /// # Errors
    /// Specialization errors for `dims`, and [`codegen::CodegenError::Unsupported`] (backend
    /// `cuda`) for a kernel the GPU path cannot run.
    pub fn cuda_code(&self, dims: &[(&str, u64)]) -> Result<codegen::cuda::CudaCode> {
        let mut b = dims
            .iter()
            .fold(codegen::Bindings::world(1), |b, (k, v)| b.with(k, *v));
        self.bind_rows(&mut b)?;
        let module = self.module_for(&b);
        let (art, _) = codegen::compile(&module, &self.kernel, &b, codegen::Target::Cuda)?;
        art.cuda
            .clone()
            .ok_or_else(|| Error::Plan("no CUDA C was emitted".into()))
    }
    /// [`Plan::cuda_code`]'s kernels, prelude left out, for review.
    ///
    /// # Errors
    /// As [`Plan::cuda_code`].
    pub fn cuda_c(&self, dims: &[(&str, u64)]) -> Result<String> {
        Ok(self.cuda_code(dims)?.kernels().to_string())
    }
    /// Binds the row count of a mapreduce's rows entry (`rows::ROWS_DIM`, `n.div_ceil(ROW)`)
    /// from the sample count's dim in `b`: what every compile of the plan's module needs, so
    /// callers bind the kernel's own dims only.
    ///
    /// # Errors
    /// [`Error::Plan`] when `b` does not give the sample count.
    fn bind_rows(&self, b: &mut codegen::Bindings) -> Result<()> {
        let (Some(_), Some(n)) = (&self.rows_entry, &self.n_dim) else {
            return Ok(());
        };
        let n = n.eval(&|s| b.dims.get(s).copied()).map_err(|e| {
            Error::Plan(format!(
                "plan of `{}`: the sample count {n} has no value: {e}; bind it with the kernel's dims",
                self.kernel
            ))
        })?;
        b.dims.insert(
            rows::ROWS_DIM.to_string(),
            (n as usize).div_ceil(ROW) as u64,
        );
        Ok(())
    }
    /// The module to compile at bindings `b`: the plan's, without its tiles entry when the
    /// sample count is below one tile (a tile longer than the planes does not specialize);
    /// the executor then runs every sample through the sample wrapper.
    fn module_for(&self, b: &codegen::Bindings) -> std::borrow::Cow<'_, ir::Module> {
        let small = self.n_dim.as_ref().is_some_and(|n| {
            n.eval(&|s| b.dims.get(s).copied())
                .is_ok_and(|n| (n as usize) < tiles::LANES)
        });
        match &self.tiles_entry {
            Some(te) if small => {
                let mut m = self.module.clone();
                m.functions.retain(|f| &f.name != te);
                std::borrow::Cow::Owned(m)
            }
            _ => std::borrow::Cow::Borrowed(&self.module),
        }
    }
    /// Whether `structure` runs on the GPU in this plan.
    fn on_gpu(&self, structure: Structure) -> bool {
        structure == Structure::DeviceKernel && self.platform == eagle_runtime::Platform::Cuda
    }
    /// The access category the plan runs by: the kernel's declared one where it declares
    /// one, else the one inferred from its body.
    pub fn category(&self) -> AccessCategory {
        self.info.category
    }
    /// The IR of the plan (the kernel and its sample-loop wrapper), generic.
    pub fn ir(&self) -> String {
        ir::print_module(&self.module)
    }
    /// The kernel's name.
    pub fn kernel(&self) -> &str {
        &self.kernel
    }
    /// The generic module (kernel, callees and wrapper).
    pub fn module(&self) -> &ir::Module {
        &self.module
    }
    /// The inferred access information (category and reduction outputs).
    pub fn access(&self) -> &AccessInfo {
        &self.info
    }

    /// Runs the plan on `planes`; every output plane holds the whole result afterwards (on every
    /// rank, for `RankPartition`).
    ///
    /// # Errors
    /// [`Error::Plan`] for a missing, extra or mis-shaped plane (every per-sample plane must
    /// have `n` samples along its last dim), a non-`f64` output under `RankPartition`, a device
    /// the platform lacks, or a `RankPartition` without MPI and without simulated ranks;
    /// build, specialization and run-time errors otherwise.
    ///
    /// Under MPI (`RankPartition` without simulated ranks, world size > 1) the ranks first
    /// agree on the run: the same plan with the same planes (names, shapes, dtypes) on every
    /// rank, else [`eagle_runtime::RuntimeError::RanksDisagree`] on every rank naming the
    /// plane and both shapes. After that, a failure on any rank prints that rank's error and
    /// ends the whole job with `MPI_Abort` (exit status 1), since the other ranks would
    /// otherwise wait forever in the gather.
    pub fn run(&self, device: usize, planes: &mut Planes<'_>) -> Result<()> {
        let _run = tracing::info_span!(target: "eagle", "plan_run", kernel = %self.kernel, structure = self.structure.name(), inner = self.inner.name(), threads = self.threads, device, platform = self.platform.name()).entered();
        // Under mpirun without the `mpi` feature every process would compute the whole plan
        // alone: refused, naming the feature.
        #[cfg(not(feature = "mpi"))]
        if self.structure == Structure::RankPartition
            && self.ranks.is_none()
            && eagle_runtime::launcher_world_size().is_some_and(|n| n > 1)
        {
            return Err(no_mpi("a RankPartition plan started by mpirun"));
        }
        #[cfg(feature = "mpi")]
        if self.structure == Structure::RankPartition
            && self.ranks.is_none()
            && eagle_runtime::mpi_rt::world().1 > 1
        {
            self.agree_on_planes(planes)?;
        }
        let r = self.run_inner(device, planes);
        #[cfg(feature = "mpi")]
        if let Err(e) = &r {
            if self.structure == Structure::RankPartition
                && self.ranks.is_none()
                && eagle_runtime::mpi_rt::world().1 > 1
            {
                eagle_runtime::mpi_rt::abort_with(&e.to_string());
            }
        }
        r
    }

    /// The agreement of [`Plan::run`] under MPI.
    #[cfg(feature = "mpi")]
    fn agree_on_planes(&self, planes: &Planes<'_>) -> Result<()> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let k = RUNS.fetch_add(1, Ordering::Relaxed) + 1;
        let mut stance =
            eagle_runtime::agree::Stance::at(format!("plan run #{k} (of `{}`)", self.kernel))
                .fact(
                    "the plan",
                    format!("`{}` on {:?}", self.kernel, self.structure),
                )
                .failed(planes.refused.as_ref().map(|m| self.refusal(m).to_string()));
        for (name, a) in &planes.items {
            let v = match a {
                Arg::In(s, d, _) => format!(
                    "an input of shape {s:?}, {d} (n = {})",
                    s.last().copied().unwrap_or(0)
                ),
                Arg::Out(s, d, _) => format!(
                    "an output of shape {s:?}, {d} (n = {})",
                    s.last().copied().unwrap_or(0)
                ),
                Arg::Scalar(c, d) => format!("the scalar {c:?} ({d})"),
            };
            stance = stance.fact(format!("plane `{name}`"), v);
        }
        let timeout = eagle_runtime::RunOptions::from_env()?.wait_timeout;
        Ok(eagle_runtime::mpi_rt::agree(&stance, timeout)?)
    }

    /// The error of a plane refused while adding it.
    fn refusal(&self, m: &str) -> Error {
        Error::Plan(format!("plan of `{}`: {m}", self.kernel))
    }

    fn run_inner(&self, device: usize, planes: &mut Planes<'_>) -> Result<()> {
        if let Some(m) = &planes.refused {
            return Err(self.refusal(m));
        }
        if device >= eagle_runtime::Platform::Sim.max_devices() {
            return Err(Error::Plan(format!(
                "argument `device`: device {device} does not exist; the CPU platform has devices 0 to {}",
                eagle_runtime::Platform::Sim.max_devices() - 1
            )));
        }
        // Match planes to parameters by name.
        for (k, (name, _)) in planes.items.iter().enumerate() {
            if planes.items[..k].iter().any(|(m, _)| m == name) {
                return Err(Error::Plan(format!(
                    "plane `{name}` is passed twice; pass each plane of `{}` once",
                    self.kernel
                )));
            }
            if !self.planes.iter().any(|p| &p.name == name) {
                return Err(Error::Plan(format!(
                    "plane `{name}` is not a parameter of `{}`; its planes are {}",
                    self.kernel,
                    self.plane_names()
                )));
            }
        }
        let mut order = vec![];
        for p in &self.planes {
            let Some(i) = planes.items.iter().position(|(n, _)| n == &p.name) else {
                return Err(Error::Plan(format!(
                    "plane `{}` of `{}` is missing; pass every plane: {}",
                    p.name,
                    self.kernel,
                    self.plane_names()
                )));
            };
            order.push(i);
        }
        // n from the per-sample planes.
        let mut n = None;
        for (p, &i) in self.planes.iter().zip(&order) {
            let arg = &planes.items[i].1;
            let (shape, dt, is_out) = match arg {
                Arg::In(s, d, _) => (s.clone(), *d, false),
                Arg::Out(s, d, _) => (s.clone(), *d, true),
                Arg::Scalar(..) => unreachable!("planes are tensors"),
            };
            if p.out && !is_out {
                return Err(Error::Plan(format!(
                    "plane `{}` is an output; pass it with `Planes::output`",
                    p.name
                )));
            }
            if !p.out && is_out {
                return Err(Error::Plan(format!(
                    "plane `{}` is an input of `{}`; pass it with `Planes::input`",
                    p.name, self.kernel
                )));
            }
            if dt != p.dtype {
                return Err(Error::Plan(format!(
                    "plane `{}` has dtype {dt}, expected {} as `{}` declares",
                    p.name, p.dtype, self.kernel
                )));
            }
            if self.structure == Structure::RankPartition && p.out && dt != DType::F64 {
                return Err(Error::Plan(format!(
                    "RankPartition gathers outputs as f64: output plane `{}` is {dt}; declare it `f64`",
                    p.name
                )));
            }
            if shape.len() != p.rank {
                return Err(Error::Plan(format!(
                    "plane `{}` has shape {shape:?}; `{}` declares rank {}",
                    p.name, self.kernel, p.rank
                )));
            }
            // n comes from the per-sample planes: every plane but reduction outputs, and, for a
            // cross_sample_write kernel (whose outputs may be cells of any size), the inputs.
            let sequential_out = p.out && self.info.category == AccessCategory::CrossSampleWrite;
            if !p.reduction && !sequential_out {
                let len = *shape.last().unwrap_or(&0);
                match n {
                    None => n = Some(len),
                    Some(m) if m != len => {
                        return Err(Error::Plan(format!(
                            "plane `{}` has {len} samples along its last dim, but an earlier plane has n = {m}; every per-sample plane has n samples",
                            p.name
                        )))
                    }
                    _ => {}
                }
            }
        }
        let Some(n) = n else {
            return Err(Error::Plan(format!(
                "kernel `{}` has no per-sample plane, so the number of samples n is unknown; give it a plane of shape [n] or [w, n] (an input is enough)",
                self.kernel
            )));
        };
        if n == 0 {
            // No samples: nothing runs; a reduction's outputs hold its identity.
            if let AccessCategory::Mapreduce(kind) = self.info.category {
                for (p, &i) in self.planes.iter().zip(&order) {
                    if let (true, Arg::Out(_, d, b)) = (p.reduction, &mut planes.items[i].1) {
                        let id = identity(kind, *d);
                        for chunk in b.chunks_exact_mut(id.len()) {
                            chunk.copy_from_slice(&id);
                        }
                    }
                }
            }
            return Ok(());
        }
        // Bind the kernel's symbolic dims from the plane shapes and compile (cached).
        let f = self
            .module
            .function(&self.kernel)
            .ok_or_else(|| Error::Plan("kernel missing".into()))?;
        let mut b = codegen::Bindings::world(1);
        let mut derived = vec![];
        for (p, &i) in f.params[1..].iter().zip(&order) {
            let shape = match &planes.items[i].1 {
                Arg::In(s, ..) | Arg::Out(s, ..) => s.clone(),
                Arg::Scalar(..) => vec![],
            };
            if let Some(decl) = f.ty(p.value).shape() {
                for (d, &len) in decl.0.iter().zip(&shape) {
                    match d {
                        ir::Dim::Sym(name) => match b.dims.get(name.as_ref()) {
                            Some(&prev) if prev != len as u64 => {
                                return Err(Error::Plan(format!(
                                    "plane `{}`: dimension `{name}` is {len} here but {prev} in an earlier plane",
                                    p.name
                                )))
                            }
                            _ => {
                                b.dims.insert(name.to_string(), len as u64);
                            }
                        },
                        ir::Dim::Const(c) if *c != len as u64 => {
                            return Err(Error::Plan(format!(
                                "plane `{}` has shape {shape:?} but `{}` declares {}",
                                p.name,
                                self.kernel,
                                decl
                            )))
                        }
                        ir::Dim::Expr(_) => derived.push((p.name.clone(), d.clone(), len as u64)),
                        _ => {}
                    }
                }
            }
        }
        // Derived dims (`N + 2`, `M / NR`) hold for the planes' extents.
        for (plane, d, len) in derived {
            match d.eval(&|s| b.dims.get(s).copied()) {
                Ok(v) if v == len => {}
                Ok(v) => {
                    return Err(Error::Plan(format!(
                        "plane `{plane}`: dimension {d} = {v} at these bindings, but the plane's extent is {len}"
                    )))
                }
                Err(e) => {
                    return Err(Error::Plan(format!(
                        "plane `{plane}`: dimension {d} has no value: {e}"
                    )))
                }
            }
        }
        self.bind_rows(&mut b)?;
        let gpu = self.on_gpu(self.structure)
            || (self.structure == Structure::RankPartition && self.on_gpu(self.inner));
        let target = if gpu {
            codegen::Target::Cuda
        } else {
            codegen::Target::Cpu
        };
        let module = self.module_for(&b);
        let (art, _) = codegen::compile(&module, &self.wrapper, &b, target)?;
        // Raw buffers in parameter order.
        let bufs: Vec<(Ptr, usize)> = order
            .iter()
            .map(|&i| match &mut planes.items[i].1 {
                Arg::In(_, _, b) => (Ptr(b.as_ptr() as u64), b.len()),
                Arg::Out(_, _, b) => (Ptr(b.as_mut_ptr() as u64), b.len()),
                Arg::Scalar(..) => (Ptr(0), 0),
            })
            .collect();
        let exec = Exec {
            plan: self,
            art: &art,
            n,
            device,
            sizes: bufs.iter().map(|b| b.1).collect(),
        };
        match self.info.category {
            AccessCategory::Mapreduce(kind) => exec.mapreduce(kind, &bufs),
            _ => exec.samplewise(&bufs),
        }
    }

    fn plane_names(&self) -> String {
        self.planes
            .iter()
            .map(|p| format!("`{}`", p.name))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

struct Exec<'p> {
    plan: &'p Plan,
    art: &'p codegen::Artifact,
    n: usize,
    /// The GPU of `DeviceKernel` on platform `cuda`.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    device: usize,
    /// Bytes of each plane buffer, in parameter order (copies and partials have the same size).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    sizes: Vec<usize>,
}

impl Exec<'_> {
    /// The symbol of the sample kernel's CUDA entry of `kind`, as codegen named it.
    #[cfg(feature = "cuda")]
    fn entry_symbol(&self, kind: codegen::cuda::EntryKind) -> Result<String> {
        self.art
            .cuda
            .as_ref()
            .and_then(|c| c.entry(&self.plan.kernel, kind))
            .map(|e| e.symbol.clone())
            .ok_or_else(|| {
                Error::Codegen(codegen::CodegenError::Unsupported {
                    backend: "cuda",
                    function: self.plan.kernel.clone(),
                    message: format!("the artifact has no {kind:?} entry for this sample kernel"),
                })
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
            .plan
            .tiles_entry
            .as_ref()
            .filter(|te| self.art.code.entries.contains_key(te.as_str()));
        if let Some(te) = tiles_entry {
            let full = lo + (hi - lo) / tiles::LANES * tiles::LANES;
            if full > lo {
                let tiles = eagle_runtime::EntryCaller::new(self.art, te, rank)?;
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
        let caller = eagle_runtime::EntryCaller::new(self.art, &self.plan.wrapper, rank)?;
        // SAFETY: the slots are the plane buffers (or per-rank copies of the same size) in
        // parameter order; workers run disjoint samples, as the access category guarantees.
        let r = unsafe { caller.call(&slots) };
        // The tiles failed but one sample at a time did not: report what the tiles said.
        let r = r.and(tiles_failed.map_or(Ok(()), Err));
        r.map_err(|e| self.kernel_error(e, &self.plan.wrapper, format!("samples {rest}..{hi}")))
    }

    /// `e` from compiled wrapper `wrapper`, as the user sees it: naming the sample kernel and
    /// its op as the kernel's own IR does, then what was `running`.
    fn kernel_error(
        &self,
        e: eagle_runtime::RuntimeError,
        wrapper: &str,
        running: String,
    ) -> Error {
        match e {
            eagle_runtime::RuntimeError::RankFailed { rank, cause } => {
                let cause = cause.map(|message| {
                    let message = message.replace(
                        &format!("function `{wrapper}`"),
                        &format!("sample kernel `{}`", self.plan.kernel),
                    );
                    let mut message = message
                        .replace(&format!("`{wrapper}`"), &format!("`{}`", self.plan.kernel));
                    // Name the op as the kernel's own IR does, not as its inlined copy.
                    for (w, k) in inlined_op_names(&self.art.module, wrapper, &self.plan.kernel) {
                        let w = format!("op `{w}`");
                        if message.contains(&w) {
                            message = message.replacen(&w, &format!("op `{k}`"), 1);
                            break;
                        }
                    }
                    format!("{message} (while running {running})")
                });
                Error::Runtime(eagle_runtime::RuntimeError::RankFailed { rank, cause })
            }
            other => Error::Runtime(other),
        }
    }

    /// Forms the partials of rows `rows` for `rank` on the CPU in one call of the rows entry:
    /// `bufs` holds the plane buffers with each reduction output replaced by its row-partial
    /// buffer (every row at the identity). A failure names the first failing row's samples
    /// (found by running the block's rows one at a time: the partials are scratch and the
    /// inputs read-only, so nothing else changes).
    fn call_rows(&self, rank: usize, rows: Range<usize>, bufs: &[Ptr]) -> Result<()> {
        let Some(entry) = &self.plan.rows_entry else {
            return Err(Error::Plan(
                "a mapreduce plan without its rows entry".into(),
            ));
        };
        let caller = eagle_runtime::EntryCaller::new(self.art, entry, rank)?;
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
                let (lo, hi) = (row * ROW, ((row + 1) * ROW).min(self.n));
                return Err(self.kernel_error(e, entry, format!("samples {lo}..{hi}")));
            }
        }
        Err(Error::Plan(format!(
            "rows {}..{} of `{}` failed together but not one at a time",
            rows.start, rows.end, self.plan.kernel
        )))
    }

    /// Whether the share of `rank` runs on the GPU.
    fn gpu(&self, _rank: usize) -> bool {
        match self.plan.structure {
            Structure::RankPartition => self.plan.on_gpu(self.plan.inner),
            s => self.plan.on_gpu(s),
        }
    }

    /// Runs samples `lo..hi` on the GPU, one thread per sample (one thread in all for a
    /// `cross_sample_write` kernel, which must run in sample order).
    #[cfg(feature = "cuda")]
    fn gpu_call(&self, rank: usize, lo: usize, hi: usize, bufs: &[Ptr]) -> Result<()> {
        use eagle_runtime::cuda::KernelArg;
        let mut args = vec![KernelArg::Scalar(lo as u64), KernelArg::Scalar(hi as u64)];
        for (i, (p, &len)) in bufs.iter().zip(&self.sizes).enumerate() {
            // SAFETY: `p` points to a live plane buffer (or a copy of the same size) of `len`
            // bytes; the GPU path runs one share at a time, so nothing else touches it.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.0 as *mut u8, len) };
            args.push(if self.plan.planes[i].out {
                KernelArg::Out(bytes)
            } else {
                KernelArg::In(bytes)
            });
        }
        let threads = if self.plan.info.category == AccessCategory::CrossSampleWrite {
            1
        } else {
            (hi - lo) as u64
        };
        let symbol = self.entry_symbol(codegen::cuda::EntryKind::Samples)?;
        let during = format!("while running samples {lo}..{hi}");
        eagle_runtime::cuda::launch_samples(
            self.art,
            &symbol,
            self.device,
            rank,
            threads,
            self.plan.cuda_emulate,
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
        use eagle_runtime::cuda::KernelArg;
        let count = rows.len();
        let mut partials: Vec<Vec<u8>> = ident.iter().map(|id| id.repeat(count)).collect();
        let mut args = vec![
            KernelArg::Scalar(rows.start as u64),
            KernelArg::Scalar(rows.end as u64),
            KernelArg::Scalar(self.n as u64),
        ];
        let mut parts = partials.iter_mut();
        for (i, (p, &len)) in base.iter().zip(&self.sizes).enumerate() {
            if outs.contains(&i) {
                let part = parts.next().ok_or_else(|| Error::Plan("partials".into()))?;
                args.push(KernelArg::Out(&mut part[..]));
                continue;
            }
            // SAFETY: `p` points to a live plane buffer of `len` bytes, read-only here.
            let bytes = unsafe { std::slice::from_raw_parts(p.0 as *const u8, len) };
            args.push(KernelArg::In(bytes));
        }
        let symbol = self.entry_symbol(codegen::cuda::EntryKind::Rows)?;
        let during = format!(
            "while running rows {}..{}, samples {}..{}",
            rows.start,
            rows.end,
            rows.start * ROW,
            (rows.end * ROW).min(self.n)
        );
        eagle_runtime::cuda::launch_samples(
            self.art,
            &symbol,
            self.device,
            rank,
            count as u64,
            self.plan.cuda_emulate,
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
        units: Range<usize>,
        work: &(dyn Fn(Range<usize>) -> Result<()> + Sync),
    ) -> Result<()> {
        let single = structure == Structure::DeviceKernel
            || self.plan.info.category == AccessCategory::CrossSampleWrite;
        let t = if single {
            1
        } else {
            self.plan.threads.min(units.len().max(1))
        };
        if t <= 1 {
            return work(units);
        }
        let part = Partition::new(units.len(), t);
        // The workers come from the runtime's thread pool: a run starts no thread once the
        // pool holds `t` idle ones.
        let tasks: Vec<Box<dyn FnOnce() -> Result<()> + Send + '_>> = (1..t)
            .map(|i| {
                let r = part.share(i);
                let r = units.start + r.start..units.start + r.end;
                let task: Box<dyn FnOnce() -> Result<()> + Send + '_> = Box::new(move || work(r));
                task
            })
            .collect();
        // The caller runs the first share itself.
        let first = part.share(0);
        let first = units.start + first.start..units.start + first.end;
        let (mine, rest) = eagle_runtime::pool::run_all_and(tasks, 16 << 20, || work(first));
        mine?;
        rest.into_iter()
            .map(|r| {
                r.unwrap_or_else(|m| Err(Error::Plan(format!("a worker thread panicked: {m}"))))
            })
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    }

    /// The ranks this process computes, the world size, and whether the world is MPI: all of
    /// `0..R` when simulating R ranks in-process, or this process's rank of the MPI world.
    fn ranks(&self) -> Result<(Vec<usize>, usize, bool)> {
        match self.plan.ranks {
            Some(r) if r >= 1 => Ok(((0..r).collect(), r, false)),
            Some(_) => Err(Error::Plan(
                "argument `ranks`: simulate at least one rank".into(),
            )),
            None if RankPartition::available() => {
                let (me, size) = RankPartition::world();
                Ok((vec![me], size, true))
            }
            None => Err(no_mpi("RankPartition::run")),
        }
    }

    fn samplewise(&self, bufs: &[(Ptr, usize)]) -> Result<()> {
        let ptrs: Vec<Ptr> = bufs.iter().map(|b| b.0).collect();
        if self.plan.structure != Structure::RankPartition {
            return self.team(self.plan.structure, 0..self.n, &|r| {
                self.call(0, r.start, r.end, &ptrs)
            });
        }
        // Each simulated rank computes its block into its own copy of the outputs (NaN
        // sentinel elsewhere); the gather assembles every rank's block.
        let (mine, r, mpi) = self.ranks()?;
        let part = Partition::new(self.n, r);
        let outs: Vec<usize> = (0..self.plan.planes.len())
            .filter(|&i| self.plan.planes[i].out)
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
                    let width = c.len() / self.n.max(1);
                    for comp in 0..width {
                        let row = comp * self.n;
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
            self.team(self.plan.inner, share.clone(), &|sub| {
                self.call(rank, sub.start, sub.end, &ptrs)
            })?;
            // allgather_plane: take this rank's samples of every component.
            for k in 0..outs.len() {
                let width = copies[k].len() / self.n.max(1);
                for c in 0..width {
                    let row = c * self.n;
                    let src = &copies[k][row + share.start..row + share.end];
                    if mpi {
                        let src = src.to_vec();
                        RankPartition::allgather_plane_into(
                            &src,
                            &part,
                            &mut gathered[k][row..row + self.n],
                        )?;
                    } else {
                        gathered[k][row + share.start..row + share.end].copy_from_slice(src);
                    }
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

    fn mapreduce(&self, kind: ReduceKind, bufs: &[(Ptr, usize)]) -> Result<()> {
        let rows = self.n.div_ceil(ROW);
        let outs: Vec<usize> = (0..self.plan.planes.len())
            .filter(|&i| self.plan.planes[i].reduction)
            .collect();
        // The identity of one partial of each reduction output.
        let ident: Vec<Vec<u8>> = outs
            .iter()
            .map(|&i| {
                let d = self.plan.planes[i].dtype;
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
        if self.plan.structure == Structure::RankPartition {
            // Rows are dealt to ranks whole; each rank forms the partials of its rows through
            // `inner`; allgather_fold then collects every row's partial.
            let (mine, r, mpi) = self.ranks()?;
            let part = Partition::new(rows, r);
            for &rank in &mine {
                self.team(self.plan.inner, part.share(rank), &|rr| do_rows(rank, rr))?;
            }
            if mpi {
                // allgather_fold: every rank contributes the partials of its rows, row-major
                // (per row, each output's partial in turn); the fold below then runs on every
                // rank in row order.
                let me = mine[0];
                let row_bytes: usize = ident.iter().map(Vec::len).sum();
                let mut local = Vec::with_capacity(part.share(me).len() * row_bytes);
                for row in part.share(me) {
                    for (k, id) in ident.iter().enumerate() {
                        local.extend_from_slice(&partials[k][row * id.len()..(row + 1) * id.len()]);
                    }
                }
                let counts: Vec<usize> = (0..r).map(|q| part.share(q).len() * row_bytes).collect();
                let all = allgather(&local, &counts)?;
                for (row, chunk) in all.chunks_exact(row_bytes.max(1)).enumerate().take(rows) {
                    let mut at = 0;
                    for (k, id) in ident.iter().enumerate() {
                        partials[k][row * id.len()..(row + 1) * id.len()]
                            .copy_from_slice(&chunk[at..at + id.len()]);
                        at += id.len();
                    }
                }
            }
        } else {
            self.team(self.plan.structure, 0..rows, &|rr| do_rows(0, rr))?;
        }
        // Fold the row partials in row order, whatever ran them.
        for (k, &i) in outs.iter().enumerate() {
            let d = self.plan.planes[i].dtype;
            let mut acc = ident[k].clone();
            rows::fold(kind, d, &mut acc, &partials[k]);
            // SAFETY: `bufs[i]` is the output plane's storage, `bufs[i].1` bytes long.
            let dst = unsafe { std::slice::from_raw_parts_mut(bufs[i].0 .0 as *mut u8, bufs[i].1) };
            dst.copy_from_slice(&acc);
        }
        Ok(())
    }
}
