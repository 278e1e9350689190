//! # eagle
//!
//! A Rust embedded DSL and compiler for compute kernels that run across ranks and devices.
//!
//! Write kernels as Rust functions marked [`kernel`] and [`host`]; give shapes with constants and
//! symbolic dims ([`dynamic!`]); run the same source at any world size. The pipeline:
//!
//! ```text
//! source -> macro -> generic IR -> specialize(P) -> verified concrete IR -> Cranelift -> Artifact -> runtime
//! ```
//!
//! ```
//! use eagle::prelude::*;
//!
//! const SIZE: usize = 8;
//! const NR: Dim = dynamic!("NR");
//!
//! #[eagle::kernel(device)]
//! fn add_rank(ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
//!     let t = load(x, [0, 0], [1, SIZE]);
//!     store(y, [0, 0], t + rank(ctx) as f32);
//! }
//!
//! #[eagle::host]
//! fn hello(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
//!     for r in 0..world_size() {
//!         add_rank(x[r], y[r], device = r);
//!     }
//! }
//!
//! # fn main() -> eagle::Result<()> {
//! let session = Session::sim(3)?;
//! let x = Tensor::<f32>::from_vec(&[3, 1, SIZE], vec![1.0; 3 * SIZE])?;
//! let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
//! hello.launch(&session, &x, &mut y)?;
//! assert_eq!(y.row(2), &[3.0; SIZE]);
//! // The IR is text you can snapshot-test:
//! assert!(hello.ir()?.contains("dispatch @add_rank"));
//! # Ok(())
//! # }
//! ```

use std::sync::Mutex;
use std::time::Duration;

pub use args::{AsInput, AsOutput};
pub use eagle_codegen as codegen;
pub use eagle_ir as ir;
pub use eagle_ir::Dim;
pub use eagle_macros::{dynamic, host, kernel};
pub use eagle_runtime as runtime;
pub use eagle_runtime::trace::Trace;
pub use eagle_runtime::{to_f8, Float8, E8M0, F8E4M3, F8E5M2};
pub use eagle_runtime::{Arg, Element, Platform, RunReport, ScalarArg, SimRanks, Tensor};
/// The 16-bit float types of `Tensor<f16>` and `Tensor<bf16>` (the `half` crate's).
pub use half::{bf16, f16};
/// OCP FP8 E4M3 on the host, the element of `Tensor<f8e4m3>` (the `float8` crate's
/// [`F8E4M3`]; convert with [`to_f8`] for a kernel's rounding).
#[allow(non_camel_case_types)]
pub type f8e4m3 = F8E4M3;
/// OCP FP8 E5M2 on the host, the element of `Tensor<f8e5m2>` (the `float8` crate's
/// [`F8E5M2`]).
#[allow(non_camel_case_types)]
pub type f8e5m2 = F8E5M2;
/// The OCP MX scale on the host, the element of `Tensor<e8m0>` ([`E8M0`]).
#[allow(non_camel_case_types)]
pub type e8m0 = E8M0;
/// The `ndarray` crate this build of eagle accepts arrays of (feature `ndarray`).
#[cfg(feature = "ndarray")]
pub use ndarray;

mod args;
pub mod plan;
#[cfg(feature = "plugin")]
pub mod plugin;

/// Everything a kernel file needs: `use eagle::prelude::*;`.
pub mod prelude {
    pub use crate::{
        bf16, dynamic, e8m0, f16, f8e4m3, f8e5m2, host, kernel, Dim, Result, Session, SimRanks,
        Tensor, UNDEFINED,
    };
}

/// The color of `split(ctx, color, key)` that puts a rank in no group, as `MPI_UNDEFINED` does
/// (any negative color does): `split(ctx, select(rank(ctx) < 3, 0, UNDEFINED), rank(ctx))`.
/// A rank in no group that uses the group stops with a run-time error (`trap_if`, `no_group`).
pub const UNDEFINED: isize = -1;

/// Every error eagle returns.
///
/// `Display` (`{e}`) and `Debug` (`{e:?}`) both print the message, so `fn main() ->
/// eagle::Result<()>` shows it as it is written. The variant and its fields are printed by
/// the alternate form `{e:#?}`; match on them with `matches!`, e.g.
/// `matches!(e, eagle::Error::Runtime(eagle::runtime::RuntimeError::Devices(_)))`.
#[derive(thiserror::Error)]
pub enum Error {
    /// Building or verifying IR failed.
    #[error(transparent)]
    Ir(#[from] eagle_ir::IrError),
    /// Specialization or a backend failed.
    #[error(transparent)]
    Codegen(#[from] eagle_codegen::CodegenError),
    /// Running failed.
    #[error(transparent)]
    Runtime(#[from] eagle_runtime::RuntimeError),
    /// A result did not match its golden.
    #[error("result check failed: {0}")]
    Check(String),
    /// A bad command line (the runner and the examples exit with code 2), and nothing else.
    #[error("{0}")]
    Usage(String),
    /// An execution plan used wrongly: planes, devices, a world or a structure that do not fit
    /// its sample kernel ([`plan::plan`], [`plan::Plan::run`] and the RankPartition entries).
    /// The message names the plane or argument, what was expected and what was found.
    #[error("{0}")]
    Plan(String),
    /// A plugin directory that cannot be written or read, or whose files do not match their
    /// manifest, sidecar or hashes (`plugin::deploy`, `plugin::load`, feature `plugin`). The
    /// message names the file.
    #[error("{0}")]
    Plugin(String),
    /// An input whose values a program checks before it launches do not fit it (a routing
    /// table naming an expert that does not exist, a capacity of 0): data the compiler cannot
    /// see. The message names the argument, the element, what was expected and the fix.
    #[error("{0}")]
    Input(String),
}

impl std::fmt::Debug for Error {
    /// The message (as `Display`); with `{:#?}`, the variant and its fields.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !f.alternate() {
            return std::fmt::Display::fmt(self, f);
        }
        match self {
            Error::Ir(e) => f.debug_tuple("Ir").field(e).finish(),
            Error::Codegen(e) => f.debug_tuple("Codegen").field(e).finish(),
            Error::Runtime(e) => f.debug_tuple("Runtime").field(e).finish(),
            Error::Check(m) => f.debug_tuple("Check").field(m).finish(),
            Error::Usage(m) => f.debug_tuple("Usage").field(m).finish(),
            Error::Plan(m) => f.debug_tuple("Plan").field(m).finish(),
            Error::Plugin(m) => f.debug_tuple("Plugin").field(m).finish(),
            Error::Input(m) => f.debug_tuple("Input").field(m).finish(),
        }
    }
}

impl From<eagle_codegen::SpecializeError> for Error {
    fn from(e: eagle_codegen::SpecializeError) -> Self {
        Error::Codegen(e.into())
    }
}

/// eagle's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What one launch did. Its `Debug` form is a one-line summary (the artifact by key, root,
/// target and bindings, not its IR and code).
#[derive(Clone)]
pub struct LaunchReport {
    /// Time spent compiling (zero on a cache hit).
    pub compile_time: Duration,
    /// Whether the artifact came from the cache.
    pub cache_hit: bool,
    /// The artifact's cache key.
    pub artifact_key: u64,
    /// The run.
    pub run: RunReport,
    /// With [`Session::with_digest`]: FNV-1a of the bytes of every output tensor after the
    /// run, in argument order; equal digests mean bit-identical outputs (compare platforms,
    /// transports and ranks with it). `None` when the session does not compute digests (the
    /// default: hashing every output byte costs more than many launches).
    pub digest: Option<u64>,
    /// The artifact that ran (its specialized IR, and its CUDA C when compiled for `cuda`).
    pub artifact: std::sync::Arc<codegen::Artifact>,
}

impl std::fmt::Debug for LaunchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = &self.artifact;
        f.debug_struct("LaunchReport")
            .field("compile_time", &self.compile_time)
            .field("cache_hit", &self.cache_hit)
            .field("artifact_key", &format_args!("{:016x}", self.artifact_key))
            .field("run", &self.run)
            .field("digest", &self.digest.map(|d| format!("{d:016x}")))
            .field(
                "artifact",
                &format_args!(
                    "`{}` for {:?} at {} ({} bytes)",
                    a.root,
                    a.target,
                    a.bindings.key_text(),
                    a.size_bytes()
                ),
            )
            .finish()
    }
}

/// Checks that platform `cuda` can run on `devices`: a driver is present and every id names a
/// GPU of this machine (ids may repeat: ranks can share a GPU).
fn cuda_devices(devices: &[usize]) -> Result<()> {
    #[cfg(feature = "cuda")]
    {
        let n = eagle_runtime::cuda::device_count()?;
        if let Some(&d) = devices.iter().find(|&&d| d >= n) {
            return Err(eagle_runtime::RuntimeError::Devices(format!(
                "device {d} does not exist: this machine has {n} CUDA device(s), 0 to {}; several ranks may share one, e.g. `-p cuda -d 0,0,0,0`",
                n.saturating_sub(1)
            ))
            .into());
        }
        Ok(())
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = devices;
        Err(eagle_runtime::RuntimeError::PlatformUnavailable {
            platform: "cuda".into(),
            reason: "this build has no `cuda` feature; rebuild with `--features cuda`".into(),
        }
        .into())
    }
}

/// The message for device `d` at or above `platform`'s device limit.
fn too_many(platform: Platform, d: usize) -> String {
    let max = platform.max_devices();
    format!(
        "device {d} does not exist: platform `{}` has devices 0 to {} (at most {max} devices); give a shorter list, e.g. `-d 0,1,2,3`",
        platform.name(),
        max.saturating_sub(1)
    )
}

/// A world of devices on a platform, and the options of a run.
#[derive(Debug)]
pub struct Session {
    platform: Platform,
    devices: Vec<usize>,
    emit_ir: bool,
    emit_cuda: bool,
    target: codegen::Target,
    mode: Option<String>,
    options: eagle_runtime::RunOptions,
    /// The reports of the last `reports_kept` launches, oldest first.
    reports: Mutex<std::collections::VecDeque<LaunchReport>>,
    reports_kept: usize,
    /// Whether launches compute [`LaunchReport::digest`].
    digest: bool,
    /// Whether each launch writes the timeline's files ([`Session::with_trace`]).
    flush_trace: bool,
}

/// Idle device threads a dropped session leaves for the next run (a larger world starts what
/// it needs again).
const THREADS_KEPT: usize = 64;

impl Drop for Session {
    /// Ends the idle device threads beyond [`THREADS_KEPT`], so that a session of P = 1,000
    /// simulated ranks does not leave 1,000 threads behind.
    fn drop(&mut self) {
        eagle_runtime::pool::trim(THREADS_KEPT);
    }
}

impl Session {
    /// How many launch reports a session keeps by default for [`Session::take_reports`]: the
    /// reports of the last 1024 launches (older ones are dropped, so a session launched in a
    /// loop holds bounded memory). Change it with [`Session::with_reports_kept`].
    pub const REPORTS_KEPT: usize = 1024;

    /// A session on `platform` with one rank per entry of `devices` (rank r uses `devices[r]`).
    ///
    /// # Errors
    /// [`Error::Runtime`] when the device list is empty, repeats an id, names a device the
    /// platform lacks, or the platform is unavailable; [`eagle_runtime::RuntimeError::Env`]
    /// when `EAGLE_RACE_CHECK`, `EAGLE_WAIT_TIMEOUT_S` or `EAGLE_CUDA_EMULATE` holds a value it
    /// does not understand (see [`eagle_runtime::RunOptions::from_env`]).
    pub fn new(platform: Platform, devices: Vec<usize>) -> Result<Session> {
        use eagle_runtime::RuntimeError as E;
        if devices.is_empty() {
            return Err(E::Devices(
                "the device list is empty; give at least one id, e.g. `-d 0,1`".into(),
            )
            .into());
        }
        #[cfg(not(feature = "mpi"))]
        if let Some(n) = eagle_runtime::launcher_world_size().filter(|&n| n > 1) {
            return Err(E::Devices(format!(
                "this process was started by mpirun as one of {n} processes, but eagle was built without the `mpi` cargo feature, so each process would run the whole job alone; build with the feature (`eagle = {{ version = \"0.1\", features = [\"mpi\"] }}`, or `cargo run --features mpi`), or run without mpirun"
            ))
            .into());
        }
        #[cfg(feature = "mpi")]
        {
            let (_, size) = eagle_runtime::mpi_rt::world();
            if eagle_runtime::mpi_rt::active() && devices.len() != size {
                return Err(E::Devices(format!(
                    "mpirun started {size} process(es) but {} device(s) were given; give one device per process, e.g. `mpirun -np {size} eagle -d {}`",
                    devices.len(),
                    (0..size).map(|i| i.to_string()).collect::<Vec<_>>().join(",")
                ))
                .into());
            }
        }
        let env = eagle_runtime::RunOptions::from_env()?;
        if platform == Platform::Cuda && !(cfg!(feature = "cuda") && env.cuda_emulate) {
            cuda_devices(&devices)?;
        }
        let mut seen = std::collections::HashSet::new();
        for &d in &devices {
            if platform == Platform::Cuda {
                continue;
            }
            if !seen.insert(d) {
                return Err(E::Devices(format!(
                    "device {d} appears twice; each rank needs its own device, e.g. `-d 0,1,2`"
                ))
                .into());
            }
            if d >= platform.max_devices() {
                return Err(E::Devices(too_many(platform, d)).into());
            }
        }
        let options = eagle_runtime::RunOptions {
            platform,
            devices: devices.clone(),
            ..env
        };
        Ok(Session {
            platform,
            devices,
            emit_ir: false,
            emit_cuda: false,
            target: if platform == Platform::Cuda {
                codegen::Target::Cuda
            } else {
                codegen::Target::Cpu
            },
            mode: None,
            options,
            reports: Mutex::new(std::collections::VecDeque::new()),
            reports_kept: Session::REPORTS_KEPT,
            digest: false,
            flush_trace: false,
        })
    }

    /// A `cuda` session whose kernels run in the CUDA emulation: the emitted CUDA C compiled by
    /// the host C++ compiler and run on CPU threads, through the cuda platform's orchestration
    /// (windows, signals and barriers in host memory). Needs no GPU or driver, only `c++`; for
    /// checking generated code (slow: one OS thread per GPU thread).
    ///
    /// # Errors
    /// As [`Session::new`] for the device list.
    pub fn cuda_emulated(devices: Vec<usize>) -> Result<Session> {
        if devices.is_empty() {
            return Err(eagle_runtime::RuntimeError::Devices(
                "the device list is empty; give at least one id, e.g. `-d 0,1`".into(),
            )
            .into());
        }
        let mut s = Session::new(Platform::Sim, vec![0])?;
        s.platform = Platform::Cuda;
        s.target = codegen::Target::Cuda;
        s.options.platform = Platform::Cuda;
        s.options.cuda_emulate = true;
        s.options.devices = devices.clone();
        s.devices = devices;
        Ok(s)
    }

    /// A `sim` session of `p` devices `0..p` (at most [`Platform::max_devices`], 4096).
    ///
    /// # Errors
    /// As [`Session::new`]: for example `p = 0`, or `p` above the platform's device limit.
    pub fn sim(p: usize) -> Result<Session> {
        let max = Platform::Sim.max_devices();
        if p > max {
            // Refused before building the device list: `p` may be any usize.
            return Err(eagle_runtime::RuntimeError::Devices(too_many(Platform::Sim, max)).into());
        }
        Session::new(Platform::Sim, (0..p).collect())
    }

    /// Prints the generic and specialized IR of every launch to stdout.
    pub fn with_emit_ir(mut self, on: bool) -> Self {
        self.emit_ir = on;
        self
    }
    /// Also compiles every launch for the `cuda` target and prints its CUDA C to stdout (on any
    /// platform; on `sim` the program still runs on the CPU).
    pub fn with_emit_cuda(mut self, on: bool) -> Self {
        self.emit_cuda = on;
        self
    }
    /// Compiles every launch for `target` (on `sim`, [`codegen::Target::Cuda`] also emits CUDA C
    /// into the artifact while the program runs on the CPU; see [`LaunchReport::artifact`]).
    /// Platform `cuda` always compiles for `cuda`.
    pub fn with_target(mut self, target: codegen::Target) -> Self {
        if self.platform != Platform::Cuda {
            self.target = target;
        }
        self
    }
    /// Makes every launch compute [`LaunchReport::digest`] (default off: FNV-1a over every
    /// output byte, about 1 ns per byte, more than the launch itself for large outputs).
    pub fn with_digest(mut self, on: bool) -> Self {
        self.digest = on;
        self
    }
    /// Turns the `sim` race detector on or off (default on; see [`eagle_runtime::RunOptions`]).
    pub fn with_race_check(mut self, on: bool) -> Self {
        self.options.race_check = on;
        self
    }
    /// Sets how `sim` and `cpu` run ranks that reach each other: OS threads, tasks (stackful
    /// coroutines on one worker thread per core), or by world size (default
    /// [`eagle_runtime::SimRanks::Auto`]; see [`eagle_runtime::SimRanks`]).
    pub fn with_sim_ranks(mut self, mode: eagle_runtime::SimRanks) -> Self {
        self.options.sim_ranks = mode;
        self
    }
    /// Sets how long a rank may block in one wait or barrier before the run fails.
    pub fn with_wait_timeout(mut self, t: Duration) -> Self {
        self.options.wait_timeout = t;
        self
    }
    /// Records a timeline of every launch of this session and writes it after each launch to
    /// `path` as Chrome trace-event JSON (open it in <https://ui.perfetto.dev> or
    /// `chrome://tracing`): a track per rank with a span per dispatch, compute kernel call,
    /// put/get (with bytes), notify, wait and barrier (with the time spent waiting and the
    /// signal waited for), and the communication of one source line grouped as a collective
    /// (see [`eagle_runtime::trace`]). Under MPI every rank records and rank 0 writes the
    /// merged file. The file is replaced whole after each launch; a launch whose file cannot be
    /// written fails with [`eagle_runtime::RuntimeError::Trace`] after its outputs are back.
    pub fn with_trace(self, path: impl Into<std::path::PathBuf>) -> Self {
        let mut s = self.with_tracer(Trace::new(Some(path.into()), None));
        s.flush_trace = true;
        s
    }
    /// Records into `trace`, which may be shared with other sessions and plans and may also
    /// write an SVG swimlane picture; its owner writes the files with [`Trace::flush`] (see
    /// [`Session::with_trace`]).
    pub fn with_tracer(mut self, trace: Trace) -> Self {
        self.options.trace = Some(trace);
        self.flush_trace = false;
        self
    }
    /// The timeline recorder of this session's launches, if it records one.
    pub fn tracer(&self) -> Option<&Trace> {
        self.options.trace.as_ref()
    }
    /// Sets the step mode (`--mode`).
    pub fn with_mode(mut self, mode: Option<String>) -> Self {
        self.mode = mode;
        self
    }
    /// The step mode, if any.
    pub fn mode(&self) -> Option<&str> {
        self.mode.as_deref()
    }
    /// The world size P.
    pub fn world_size(&self) -> usize {
        self.devices.len()
    }
    /// The device ids, by rank.
    pub fn devices(&self) -> &[usize] {
        &self.devices
    }
    /// The platform.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// Keeps the reports of the last `n` launches for [`Session::take_reports`] (default
    /// [`Session::REPORTS_KEPT`]; `0` keeps none). Every launch still returns its own report.
    pub fn with_reports_kept(mut self, n: usize) -> Self {
        self.reports_kept = n;
        if let Ok(r) = self.reports.get_mut() {
            while r.len() > n {
                r.pop_front();
            }
        }
        self
    }

    /// The reports of the launches since the last call, oldest first, and clears them: at
    /// most the last [`Session::REPORTS_KEPT`] (or [`Session::with_reports_kept`]) of them.
    pub fn take_reports(&self) -> Vec<LaunchReport> {
        self.reports
            .lock()
            .map(|mut r| Vec::from(std::mem::take(&mut *r)))
            .unwrap_or_default()
    }

    /// Compiles host function `F` for this world (bindings from the argument shapes; cached)
    /// and runs it with `args`.
    ///
    /// # Errors
    /// Build, verification and specialization errors; [`eagle_runtime::RuntimeError`] for
    /// arguments that do not match and for failures while running.
    ///
    /// Under MPI (feature `mpi`, world size > 1) the ranks first agree on the launch: every
    /// rank must be at the same launch of the same program with the same argument shapes,
    /// dtypes and scalars, and an error met before running on one rank (a bad argument, a
    /// compile error) is returned on every rank ([`eagle_runtime::RuntimeError::RankFailed`]
    /// naming that rank, or [`eagle_runtime::RuntimeError::RanksDisagree`] naming the
    /// argument and both values). A rank that does not reach the launch within the wait
    /// timeout is named and the job is aborted.
    pub fn launch<F: ir::EagleFn + 'static>(&self, args: Vec<Arg<'_>>) -> Result<LaunchReport> {
        self.launch_generic(F::NAME, generic_of::<F>, args)
    }

    /// [`Session::launch`] of host function `name` of `module` (a module built or parsed
    /// elsewhere, such as a host program loaded from a plugin with
    /// [`plugin::load_host`]).
    ///
    /// # Errors
    /// As [`Session::launch`]; [`Error::Usage`] when `module` has no host function `name`.
    pub fn launch_module(
        &self,
        module: &std::sync::Arc<ir::Module>,
        name: &str,
        args: Vec<Arg<'_>>,
    ) -> Result<LaunchReport> {
        let host = module
            .function(name)
            .is_some_and(|f| f.level == ir::Level::Host);
        if !host {
            return Err(Error::Usage(format!(
                "the module has no host function `{name}`; its functions are {:?}",
                module.functions.iter().map(|f| &f.name).collect::<Vec<_>>()
            )));
        }
        let generic = || {
            let h = codegen::fnv1a(ir::print_module(module).as_bytes());
            Ok((std::sync::Arc::clone(module), h))
        };
        self.launch_generic(name, generic, args)
    }

    /// The launch of host function `name` of a generic module and its text hash (built by
    /// `generic` inside the launch's span).
    fn launch_generic(
        &self,
        name: &str,
        generic: impl FnOnce() -> Result<(std::sync::Arc<ir::Module>, u64)>,
        mut args: Vec<Arg<'_>>,
    ) -> Result<LaunchReport> {
        let _launch = tracing::info_span!(target: "eagle", "launch", function = name, world_size = self.world_size(), platform = self.platform.name()).entered();
        tracing::debug!(target: "eagle", race_check = self.options.race_check, "run options");
        let target = if self.emit_cuda {
            codegen::Target::Cuda
        } else {
            self.target
        };
        // The generic module of `F` and the hash of its text are built once per process.
        let prepared = generic().and_then(|(module, text_hash)| {
            let mut bound_by = std::collections::BTreeMap::new();
            let bindings =
                bindings_from_args(&module, name, self.world_size(), &args, &mut bound_by)?;
            let (art, cache_hit) =
                codegen::compile_hashed(&module, text_hash, name, &bindings, target)
                    .map_err(|e| name_binder(e, &bindings, &bound_by))?;
            Ok((module, bindings, art, cache_hit, text_hash))
        });
        #[cfg(feature = "mpi")]
        if eagle_runtime::mpi_rt::active() {
            let program = prepared.as_ref().ok().map(|p| {
                let names = p.0.function(name).map_or(vec![], |f| {
                    f.params.iter().map(|q| q.name.clone()).collect()
                });
                (p.4, p.1.key_text(), names)
            });
            let agreed = agree_launch(name, program, &args, &prepared, self.options.wait_timeout);
            if let (Err(e), Ok(_)) = (agreed, &prepared) {
                return Err(e);
            }
        }
        let (module, bindings, art, cache_hit, _) = prepared?;
        if let (true, Some(c)) = (self.emit_cuda, &art.cuda) {
            use std::io::Write;
            let _ = writeln!(
                std::io::stdout(),
                "// ---- CUDA C of `{}` ({}); the prelude (eagle::codegen::cuda::PRELUDE) is left out ----\n{}",
                name,
                bindings.key_text(),
                c.kernels()
            );
        }
        if self.emit_ir {
            use std::io::Write;
            // Ignore write errors: a closed stdout must not turn into a panic.
            let _ = writeln!(
                std::io::stdout(),
                ";; ---- generic IR of `{}` ----\n{}\n;; ---- specialized IR of `{}` ({}) ----\n{}",
                name,
                ir::print_module(&module),
                name,
                bindings.key_text(),
                art.ir
            );
        }
        let run = eagle_runtime::run_with(&art, &mut args, self.world_size(), &self.options)?;
        // FNV-1a over the outputs in order, as if concatenated.
        let digest = self.digest.then(|| {
            args.iter()
                .filter_map(|a| match a {
                    Arg::Out(_, _, b) => Some(&**b),
                    _ => None,
                })
                .fold(codegen::FNV_OFFSET, codegen::fnv1a_extend)
        });
        let report = LaunchReport {
            digest,
            compile_time: if cache_hit {
                Duration::ZERO
            } else {
                art.compile_time
            },
            cache_hit,
            artifact_key: art.key,
            run,
            artifact: art.clone(),
        };
        if let Some(t) = self.options.trace.as_ref().filter(|_| self.flush_trace) {
            t.flush()?;
        }
        if let Ok(mut r) = self.reports.lock() {
            if self.reports_kept > 0 {
                if r.len() >= self.reports_kept {
                    r.pop_front();
                }
                r.push_back(report.clone());
            }
        }
        Ok(report)
    }
}

/// The launch agreement of [`Session::launch`] under MPI: the point is this process's launch
/// count and the program's name; the facts are the program (its IR digest and bindings) and
/// every argument's shape and dtype (a scalar's value); the error is the one met preparing.
#[cfg(feature = "mpi")]
fn agree_launch<T>(
    name: &str,
    program: Option<(u64, String, Vec<String>)>,
    args: &[Arg<'_>],
    prepared: &Result<T>,
    timeout: Duration,
) -> Result<()> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAUNCHES: AtomicU64 = AtomicU64::new(0);
    let k = LAUNCHES.fetch_add(1, Ordering::Relaxed) + 1;
    let mut stance = eagle_runtime::agree::Stance::at(format!("launch #{k} (of `{name}`)"))
        .failed(prepared.as_ref().err().map(ToString::to_string));
    let (names, program) = match program {
        Some((hash, bindings, params)) => (
            params,
            Some(format!("`{name}` with IR digest {hash:016x} at {bindings}")),
        ),
        None => (vec![], None),
    };
    for (i, a) in args.iter().enumerate() {
        let v = match a {
            Arg::In(s, d, _) => format!("an input of shape {s:?}, {d}"),
            Arg::Out(s, d, _) => format!("an output of shape {s:?}, {d}"),
            Arg::Scalar(c, d) => format!("the scalar {c:?} ({d})"),
        };
        let key = match names.get(i) {
            Some(n) => format!("argument `{n}` of `{name}`"),
            None => format!("argument #{i} of `{name}`"),
        };
        stance = stance.fact(key, v);
    }
    // After the arguments, so that a shape difference is named as the argument's.
    if let Some(p) = program {
        stance = stance.fact("the program", p);
    }
    Ok(eagle_runtime::mpi_rt::agree(&stance, timeout)?)
}

/// The generic module of `F` and the FNV-1a hash of its text, built once per process.
fn generic_of<F: ir::EagleFn + 'static>() -> Result<(std::sync::Arc<ir::Module>, u64)> {
    use std::any::TypeId;
    use std::collections::HashMap;
    use std::sync::{Arc, OnceLock};
    type Cache = Mutex<HashMap<TypeId, (Arc<ir::Module>, u64)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(hit) = cache
        .lock()
        .ok()
        .and_then(|c| c.get(&TypeId::of::<F>()).cloned())
    {
        return Ok(hit);
    }
    let span = tracing::debug_span!(target: "eagle", "build", function = F::NAME, ops = tracing::field::Empty);
    let m = span.in_scope(|| F::module())?;
    let mut ops = 0usize;
    for f in &m.functions {
        f.walk(&mut |_| ops += 1);
    }
    span.record("ops", ops);
    let m = Arc::new(m);
    let h = codegen::fnv1a(ir::print_module(&m).as_bytes());
    if let Ok(mut c) = cache.lock() {
        c.insert(TypeId::of::<F>(), (Arc::clone(&m), h));
    }
    Ok((m, h))
}

/// Names the argument whose shape bound a world dimension that does not match the session,
/// and lists the bindings and their sources in a verifier error after binding (specialization
/// knows the bindings, not where they came from).
fn name_binder(
    mut e: codegen::CodegenError,
    bindings: &codegen::Bindings,
    bound_by: &std::collections::BTreeMap<String, String>,
) -> codegen::CodegenError {
    let codegen::CodegenError::Specialize(s) = &mut e else {
        return e;
    };
    match s.as_mut() {
        codegen::SpecializeError::WorldDimBound {
            name, bound_by: b, ..
        } => {
            if let Some(source) = bound_by.get(name.as_str()) {
                b.clone_from(source);
            }
        }
        codegen::SpecializeError::Verify { bound, .. } if !bindings.dims.is_empty() => {
            let each: Vec<String> = bindings
                .dims
                .iter()
                .map(|(sym, v)| match bound_by.get(sym) {
                    Some(source) => format!("{sym} = {v} from {source}"),
                    None => format!("{sym} = {v} from the world size"),
                })
                .collect();
            *bound = format!(" ({})", each.join(", "));
        }
        _ => {}
    }
    e
}

/// Binds every symbolic dim of `root`'s tensor parameters from the argument shapes, then the
/// symbols of dispatched kernels' parameters that only a constant-shaped buffer of the host
/// fixes ([`bind_from_dispatches`]), recording in `bound_by` where each dim came from
/// ("argument `x`").
fn bindings_from_args(
    m: &ir::Module,
    root: &str,
    p: usize,
    args: &[Arg<'_>],
    bound_by: &mut std::collections::BTreeMap<String, String>,
) -> Result<codegen::Bindings> {
    use eagle_runtime::RuntimeError as E;
    let f = m
        .function(root)
        .ok_or_else(|| Error::Codegen(codegen::CodegenError::NoSuchFunction(root.into())))?;
    let mut b = codegen::Bindings::world(p as u64);
    if args.len() != f.params.len() {
        return Err(E::Argument {
            function: root.into(),
            argument: "(all)".into(),
            expected: format!("{} argument(s)", f.params.len()),
            found: args.len().to_string(),
        }
        .into());
    }
    for (prm, a) in f.params.iter().zip(args) {
        a.check_len(root, &prm.name)?;
        let (Some(shape), Some(actual)) = (
            f.ty(prm.value).shape(),
            match a {
                Arg::In(s, ..) | Arg::Out(s, ..) => Some(s),
                Arg::Scalar(..) => None,
            },
        ) else {
            continue;
        };
        if shape.rank() != actual.len() {
            return Err(E::Argument {
                function: root.into(),
                argument: prm.name.clone(),
                expected: format!("a tensor of rank {} with shape {shape}", shape.rank()),
                found: format!("shape {actual:?}"),
            }
            .into());
        }
        for (i, (d, &n)) in shape.0.iter().zip(actual).enumerate() {
            if let Dim::Sym(s) = d {
                match b.dims.get(s.as_ref()) {
                    Some(&prev) if prev != n as u64 => {
                        return Err(E::Argument {
                            function: root.into(),
                            argument: prm.name.clone(),
                            expected: format!(
                                "dimension {i} = {s} = {prev} (bound by an earlier argument)"
                            ),
                            found: format!("{n}"),
                        }
                        .into())
                    }
                    Some(_) => {}
                    None => {
                        b.dims.insert(s.to_string(), n as u64);
                        bound_by.insert(s.to_string(), format!("argument `{}`", prm.name));
                    }
                }
            }
        }
    }
    check_derived_dims(f, root, args, &mut b, bound_by)?;
    bind_from_dispatches(m, f, &mut b, bound_by);
    Ok(b)
}

/// Binds a symbol of a dispatched kernel's parameter that nothing bound yet from the constant
/// extent the host passes there: `window(s, [4, 2], f32)` passed to `Window<f32, S, 2>` binds
/// `S = 4`, as a Rust generic is inferred from its argument. The first dispatch in program
/// order that fixes a symbol binds it; a later one that disagrees fails the verifier after
/// binding, naming where the binding came from ([`name_binder`]).
fn bind_from_dispatches(
    m: &ir::Module,
    f: &ir::Function,
    b: &mut codegen::Bindings,
    bound_by: &mut std::collections::BTreeMap<String, String>,
) {
    f.walk(&mut |op| {
        let ir::OpKind::Dispatch { callee, args, .. } = &op.kind else {
            return;
        };
        let Some(g) = m.function(callee) else {
            return;
        };
        let params = g
            .params
            .iter()
            .filter(|q| !matches!(g.ty(q.value), ir::Type::Ctx));
        for (prm, &a) in params.zip(args) {
            let (Some(want), Some(have)) = (g.ty(prm.value).shape(), f.ty(a).shape()) else {
                continue;
            };
            if want.rank() != have.rank() {
                continue;
            }
            for (w, h) in want.0.iter().zip(&have.0) {
                if let (Dim::Sym(s), Some(n)) = (w, h.as_const()) {
                    if !b.dims.contains_key(s.as_ref()) {
                        b.dims.insert(s.to_string(), n);
                        let at = op
                            .loc
                            .as_ref()
                            .map(|l| format!(" at {l}"))
                            .unwrap_or_default();
                        bound_by.insert(
                            s.to_string(),
                            format!(
                                "the `{}` passed as `{}` to `{callee}`{at}",
                                f.ty(a),
                                prm.name
                            ),
                        );
                    }
                }
            }
        }
    });
}

/// Derived dims of `root`'s parameters (`NR * 16`, `M / NR`): a dim whose one unbound symbol
/// it determines binds it (`NR * 16` with extent 48 binds `NR = 3`); then every derived dim
/// must equal its argument's extent.
///
/// # Errors
/// [`eagle_runtime::RuntimeError::Argument`] naming the argument, the dim, the expression and
/// both values (the extent, and what the expression gives at the bindings), or the division
/// that is not exact.
fn check_derived_dims(
    f: &ir::Function,
    root: &str,
    args: &[Arg<'_>],
    b: &mut codegen::Bindings,
    bound_by: &mut std::collections::BTreeMap<String, String>,
) -> Result<()> {
    use eagle_runtime::RuntimeError as E;
    // (argument, dim index, the derived dim, the argument's extent); empty for most programs.
    let mut derived: Vec<(&str, usize, &Dim, u64)> = vec![];
    for (prm, a) in f.params.iter().zip(args) {
        let (Some(shape), Arg::In(actual, ..) | Arg::Out(actual, ..)) =
            (f.ty(prm.value).shape(), a)
        else {
            continue;
        };
        for (i, (d, &n)) in shape.0.iter().zip(actual).enumerate() {
            if matches!(d, Dim::Expr(_)) {
                derived.push((prm.name.as_str(), i, d, n as u64));
            }
        }
    }
    // Bind what a derived dim alone determines, until nothing changes.
    loop {
        let mut changed = false;
        for &(arg, _, d, n) in &derived {
            if let Some((sym, v)) = d.solve(n, &|s| b.dims.get(s).copied()) {
                b.dims.insert(sym.clone(), v);
                bound_by.insert(sym, format!("argument `{arg}`"));
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    for (arg, i, d, n) in derived {
        let arg = arg.to_string();
        let bindings = d
            .symbols()
            .iter()
            .filter_map(|s| b.dims.get(s).map(|v| format!("{s} = {v}")))
            .collect::<Vec<_>>()
            .join(", ");
        match d.eval(&|s| b.dims.get(s).copied()) {
            Ok(v) if v == n => {}
            Ok(v) => {
                // Another value of one symbol that gives this extent, if one does.
                let other = d.symbols().into_iter().find_map(|s| {
                    let (sym, w) = d.solve(n, &|t| {
                        if t == s {
                            None
                        } else {
                            b.dims.get(t).copied()
                        }
                    })?;
                    let now = b.dims.get(&sym).copied()?;
                    Some(format!(", or bindings with `{sym}` = {w} (it is {now} here)"))
                });
                return Err(E::Argument {
                    function: root.into(),
                    argument: arg,
                    expected: format!("dimension {i} = {d} = {v} (with {bindings})"),
                    found: format!(
                        "{n}; pass an extent of {v}{}",
                        other.unwrap_or_default()
                    ),
                }
                .into());
            }
            Err(eagle_ir::DimError::Unbound(sym)) => {
                return Err(E::Argument {
                    function: root.into(),
                    argument: arg,
                    expected: format!("dimension {i} = {d}, where `{sym}` is bound by no argument and an extent of {n} does not determine it; give `{sym}` a dimension of its own in some argument"),
                    found: format!("{n}"),
                }
                .into())
            }
            Err(e) => {
                return Err(E::Argument {
                    function: root.into(),
                    argument: arg,
                    expected: format!(
                        "dimension {i} = {d} (with {bindings}), which has no value: {}",
                        e.what()
                    ),
                    found: match e.fix() {
                        "" => format!("{n}"),
                        fix => format!("{n}; {fix}"),
                    },
                }
                .into())
            }
        }
    }
    Ok(())
}

/// The IR of host or kernel function `F` specialized for `world_size` and `bindings`, for
/// snapshot tests. Called by the generated `ir_specialized` methods.
///
/// # Errors
/// Build, verification and specialization errors.
pub fn specialized_ir<F: ir::EagleFn>(world_size: u64, bindings: &[(&str, u64)]) -> Result<String> {
    let module = F::module()?;
    let mut b = codegen::Bindings::world(world_size);
    for (k, v) in bindings {
        b.dims.insert((*k).to_string(), *v);
    }
    Ok(ir::print_module(&codegen::specialize(&module, &b)?))
}

/// The Cranelift IR of every device and compute function of host program `F` compiled for
/// `world_size` and `bindings`, for snapshot tests.
///
/// # Errors
/// Build, verification, specialization and backend errors.
pub fn cranelift_ir<F: ir::EagleFn>(world_size: u64, bindings: &[(&str, u64)]) -> Result<String> {
    let module = F::module()?;
    let mut b = codegen::Bindings::world(world_size);
    for (k, v) in bindings {
        b.dims.insert((*k).to_string(), *v);
    }
    let (art, _) = codegen::compile(&module, F::NAME, &b, codegen::Target::Cpu)?;
    Ok(art
        .code
        .clif
        .iter()
        .map(|(k, v)| format!(";; {k}\n{v}"))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The CUDA C (prelude left out) of every device, compute and sample function of host program
/// or kernel `F` specialized for `world_size` and `bindings`, for snapshot tests and review.
///
/// # Errors
/// Build, verification, specialization and backend errors (for example
/// [`codegen::CodegenError::Unsupported`] with backend `cuda`).
pub fn cuda_c<F: ir::EagleFn>(world_size: u64, bindings: &[(&str, u64)]) -> Result<String> {
    let module = F::module()?;
    let b = bindings
        .iter()
        .fold(codegen::Bindings::world(world_size), |b, (k, v)| {
            b.with(k, *v)
        });
    let (art, _) = codegen::compile(&module, F::NAME, &b, codegen::Target::Cuda)?;
    Ok(art
        .cuda
        .as_ref()
        .map(|c| c.kernels().to_string())
        .unwrap_or_default())
}

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
