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

mod rank;
mod rows;
mod tiles;

use eagle_runtime::plan::{identity, Order, PlanRun, PlaneRole, Ptr};
pub use rank::RankPartition;

/// Samples per partial of a mapreduce (a "row").
pub use eagle_runtime::plan::ROW;
pub use eagle_runtime::plan::{Partition, Structure};

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
    /// Adds scalar uniform `name`: one value every sample reads, for a sample kernel's scalar
    /// parameter (`a: f64` beside its planes). Its type must be the parameter's (`2.0f32` for
    /// an `f32`, `3usize` for a `usize`); [`Plan::run`] refuses another dtype, a uniform passed
    /// for a plane and a plane passed for a uniform, naming it. Under `RankPartition` over MPI
    /// every rank must pass the same value (bit for bit), else every rank fails with
    /// [`eagle_runtime::RuntimeError::RanksDisagree`] naming the uniform and both values.
    pub fn uniform(mut self, name: &str, v: impl crate::ScalarArg) -> Self {
        self.items.push((name.to_string(), v.into()));
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

#[derive(Debug, Clone)]
struct PlaneParam {
    name: String,
    out: bool,
    dtype: DType,
    rank: usize,
    reduction: bool,
    /// A scalar parameter: one value for every sample ([`Planes::uniform`]).
    uniform: bool,
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
    /// The tiles entry of a sample-local kernel (`tiles.rs`): `TILE_LANES` samples per tile.
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
    trace: Option<eagle_runtime::trace::Trace>,
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
                uniform: matches!(t, Type::Scalar(_)),
            }
        })
        .collect();
    for p in &planes {
        if p.uniform && p.out {
            return Err(Error::Plan(format!(
                "parameter `{}` of `{name}` is a scalar output; a sample kernel's scalar parameters are uniforms, read by every sample (write results into an output plane)",
                p.name
            )));
        }
        if !p.uniform && (p.rank == 0 || p.rank > 2) {
            return Err(Error::Plan(format!(
                "plane `{}` of `{name}` has rank {}; planes are `[n]` or `[w, n]` (component-major), and scalar parameters are uniforms",
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
        .find(|((_, t), red)| !**red && matches!(t, Type::Tensor(..)))
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
        trace: None,
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
        wb: &[ir::OpId],
        kf: &ir::Function,
        kb: &[ir::OpId],
        out: &mut Vec<(String, String)>,
    ) -> bool {
        if wb.len() != kb.len() {
            return false;
        }
        for (&w, &k) in wb.iter().zip(kb) {
            let (w, k) = (wf.op(w), kf.op(k));
            if std::mem::discriminant(&w.kind) != std::mem::discriminant(&k.kind) {
                return false;
            }
            out.push((first(wf, w), first(kf, k)));
            let (a, b) = (w.kind.blocks(), k.kind.blocks());
            if a.len() != b.len()
                || !a
                    .iter()
                    .zip(&b)
                    .all(|(a, b)| pair(wf, &a.ops, kf, &b.ops, out))
            {
                return false;
            }
        }
        true
    }
    let (Some(wf), Some(kf)) = (module.function(wrapper), module.function(kernel)) else {
        return vec![];
    };
    let Some(body) = wf.body.iter(&wf.ops).find_map(|op| {
        if let ir::OpKind::For { body, .. } = &op.kind {
            Some(body)
        } else {
            None
        }
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
    /// Records each worker's share of every run into `trace`, a span per share on a track
    /// per worker (and per rank for `RankPartition`); the owner writes the files with
    /// [`eagle_runtime::trace::Trace::flush`]. See [`crate::Session::with_trace`].
    pub fn with_tracer(mut self, trace: eagle_runtime::trace::Trace) -> Self {
        self.trace = Some(trace);
        self
    }
    /// The ranks a `RankPartition` plan simulates in this process
    /// ([`Plan::with_simulated_ranks`]), or `None` when it runs over the MPI world.
    pub fn simulated_ranks(&self) -> Option<usize> {
        self.ranks
    }
    /// Records into the timeline of session `s`, if it records one ([`Plan::with_tracer`]).
    pub fn with_trace_of(mut self, s: &crate::Session) -> Self {
        if let Some(t) = s.tracer() {
            self.trace = Some(t.clone());
        }
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
                .is_ok_and(|n| (n as usize) < eagle_runtime::plan::TILE_LANES)
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
                Arg::Scalar(c, d) => format!("the value {c} ({d})"),
            };
            let what = if matches!(a, Arg::Scalar(..)) {
                "uniform"
            } else {
                "plane"
            };
            stance = stance.fact(format!("{what} `{name}`"), v);
        }
        let timeout = eagle_runtime::RunOptions::from_env()?.wait_timeout;
        Ok(eagle_runtime::mpi_rt::agree(&stance, timeout)?)
    }

    /// The error of a plane refused while adding it.
    fn refusal(&self, m: &str) -> Error {
        Error::Plan(format!("plan of `{}`: {m}", self.kernel))
    }

    /// The index in `planes` of each of the kernel's planes, in parameter order (planes are
    /// matched to parameters by name).
    ///
    /// # Errors
    /// [`Error::Plan`] for a plane passed twice, one that is no parameter, or a missing one.
    fn plane_order(&self, planes: &Planes<'_>) -> Result<Vec<usize>> {
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
                if p.uniform {
                    return Err(Error::Plan(format!(
                        "uniform `{}` ({}) of `{}` is missing; pass its value with `Planes::uniform`",
                        p.name, p.dtype, self.kernel
                    )));
                }
                return Err(Error::Plan(format!(
                    "plane `{}` of `{}` is missing; pass every plane: {}",
                    p.name,
                    self.kernel,
                    self.plane_names()
                )));
            };
            order.push(i);
        }
        Ok(order)
    }

    /// The bindings of the kernel's symbolic dims from the plane shapes (in parameter order
    /// `order`), each derived dim checked against its plane's extent.
    ///
    /// # Errors
    /// [`Error::Plan`] naming the plane whose extent disagrees.
    fn bind_planes(
        &self,
        f: &ir::Function,
        order: &[usize],
        planes: &Planes<'_>,
    ) -> Result<codegen::Bindings> {
        let mut b = codegen::Bindings::world(1);
        let mut derived = vec![];
        for (p, &i) in f.params[1..].iter().zip(order) {
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
        Ok(b)
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
        let order = self.plane_order(planes)?;
        // n from the per-sample planes, and the plane that gave it.
        let mut n: Option<(usize, &str)> = None;
        for (p, &i) in self.planes.iter().zip(&order) {
            let arg = &planes.items[i].1;
            if p.uniform {
                self.check_uniform(p, arg)?;
                continue;
            }
            let (shape, dt, is_out) = match arg {
                Arg::In(s, d, _) => (s.clone(), *d, false),
                Arg::Out(s, d, _) => (s.clone(), *d, true),
                Arg::Scalar(c, d) => {
                    return Err(Error::Plan(format!(
                        "plane `{}` of `{}` is a tensor of rank {}, found the value {c} ({d}); pass it with `Planes::{}`",
                        p.name,
                        self.kernel,
                        p.rank,
                        if p.out { "output" } else { "input" }
                    )))
                }
            };
            if p.out && !is_out {
                return Err(Error::Plan(format!(
                    "plane `{}` is an output of `{}`; pass it with `Planes::output`",
                    p.name, self.kernel
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
                    None => n = Some((len, &p.name)),
                    Some((m, first)) if m != len => {
                        return Err(Error::Plan(format!(
                            "plane `{}` has {len} samples along its last dim, but an earlier plane has n = {m} (`{first}`); every per-sample plane has n samples",
                            p.name
                        )))
                    }
                    _ => {}
                }
            }
        }
        let Some((n, _)) = n else {
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
        let mut b = self.bind_planes(f, &order, planes)?;
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
                // A uniform's slot is its bits (`eagle_runtime::Arg::slot`); it has no bytes.
                a @ Arg::Scalar(..) => (Ptr(a.slot().unwrap_or(0)), 0),
            })
            .collect();
        // SAFETY: `bufs` are the planes' buffers, borrowed from `planes` for this call
        // (outputs mutably), each `b.1` bytes long; uniforms pass their bits and no bytes.
        unsafe { self.execute(&art, device, n, &bufs) }
    }

    /// Hands the run to the runtime ([`eagle_runtime::run_plan`]): the compiled `art`,
    /// GPU `device`, samples `0..n`, the plane buffers `bufs` in parameter order.
    ///
    /// # Safety
    /// As [`eagle_runtime::run_plan`]: each buffer live, `bytes` long, and untouched by
    /// anything else during the call.
    unsafe fn execute(
        &self,
        art: &codegen::Artifact,
        device: usize,
        n: usize,
        bufs: &[(Ptr, usize)],
    ) -> Result<()> {
        let roles: Vec<PlaneRole> = self
            .planes
            .iter()
            .map(|p| PlaneRole {
                out: p.out,
                reduction: p.reduction,
                uniform: p.uniform,
                dtype: p.dtype,
            })
            .collect();
        let kernel_error = |e, entry: &str, running| self.kernel_error(art, e, entry, running);
        let run = PlanRun {
            art,
            kernel: &self.kernel,
            wrapper: &self.wrapper,
            rows_entry: self.rows_entry.as_deref(),
            tiles_entry: self.tiles_entry.as_deref(),
            structure: self.structure,
            inner: self.inner,
            threads: self.threads,
            ranks: self.ranks,
            planes: &roles,
            order: match self.info.category {
                AccessCategory::Mapreduce(kind) => Order::Mapreduce(kind),
                AccessCategory::CrossSampleWrite => Order::Sequential,
                AccessCategory::SampleLocal | AccessCategory::CrossSampleRead => Order::Samplewise,
            },
            cuda: self.platform == eagle_runtime::Platform::Cuda,
            device,
            cuda_emulate: self.cuda_emulate,
            trace: self.trace.as_ref(),
            n,
            kernel_error: &kernel_error,
        };
        // SAFETY: the caller's.
        unsafe { eagle_runtime::run_plan(&run, bufs) }.map_err(from_runtime)
    }

    /// `e` from compiled entry `entry` of the plan, as the user sees it: naming the sample
    /// kernel and its op as the kernel's own IR does, then what was `running`.
    fn kernel_error(
        &self,
        art: &codegen::Artifact,
        e: eagle_runtime::RuntimeError,
        entry: &str,
        running: String,
    ) -> eagle_runtime::RuntimeError {
        match e {
            eagle_runtime::RuntimeError::RankFailed { rank, cause } => {
                let cause = cause.map(|message| {
                    let message = message.replace(
                        &format!("function `{entry}`"),
                        &format!("sample kernel `{}`", self.kernel),
                    );
                    let mut message =
                        message.replace(&format!("`{entry}`"), &format!("`{}`", self.kernel));
                    // Name the op as the kernel's own IR does, not as its inlined copy.
                    for (w, k) in inlined_op_names(&art.module, entry, &self.kernel) {
                        let w = format!("op `{w}`");
                        if message.contains(&w) {
                            message = message.replacen(&w, &format!("op `{k}`"), 1);
                            break;
                        }
                    }
                    format!("{message} (while running {running})")
                });
                eagle_runtime::RuntimeError::RankFailed { rank, cause }
            }
            other => other,
        }
    }

    /// Checks uniform `p`'s argument: a scalar of the parameter's dtype.
    ///
    /// # Errors
    /// [`Error::Plan`] naming the uniform, what `p` declares and what was passed.
    fn check_uniform(&self, p: &PlaneParam, arg: &Arg<'_>) -> Result<()> {
        match arg {
            Arg::Scalar(_, d) if *d == p.dtype => Ok(()),
            Arg::Scalar(c, d) => Err(Error::Plan(format!(
                "uniform `{}` of `{}` is declared {}, found the value {c} ({d}); pass a {} (such as `Planes::uniform(\"{}\", x as {})`)",
                p.name,
                self.kernel,
                p.dtype,
                p.dtype,
                p.name,
                p.dtype.rust_name()
            ))),
            Arg::In(s, d, _) | Arg::Out(s, d, _) => Err(Error::Plan(format!(
                "`{}` is a scalar uniform of `{}` ({}), found a plane of shape {s:?} ({d}); pass one value with `Planes::uniform`",
                p.name, self.kernel, p.dtype
            ))),
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

/// A run-time error of a plan as the facade returns it: the plan's own misuse as
/// [`Error::Plan`], everything else as [`Error::Runtime`].
pub(crate) fn from_runtime(e: eagle_runtime::RuntimeError) -> Error {
    match e {
        eagle_runtime::RuntimeError::Plan(m) => Error::Plan(m),
        other => Error::Runtime(other),
    }
}

fn no_mpi(what: &str) -> Error {
    from_runtime(eagle_runtime::plan::no_mpi(what))
}
