//! Command-line plumbing shared by the runner (`src/main.rs`) and the tutorial examples.

use crate::MpiGuard;
use clap::Parser;
use eagle::{Error, LaunchReport, Platform, Result, Session};
use std::process::ExitCode;

/// A tutorial step: a number, a name, its modes and the function that runs and checks it.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Step number (01..).
    pub number: u32,
    /// Short name (`dynamic_rank_count`).
    pub name: &'static str,
    /// Modes (`--mode`), first is the default; empty when the step has none.
    pub modes: &'static [&'static str],
    /// The world sizes the step's layout allows; at any other the runner prints `SKIP` with
    /// the reason (the example itself, run alone at such a P, fails with the launch error
    /// naming the argument).
    pub world: World,
    /// Runs the step on a session and checks its golden.
    pub run: fn(&Session) -> Result<()>,
}

/// The runner's groups of steps (`--suite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Suite {
    /// The tutorial steps 01-16: the primitives, one at a time.
    Tutorial,
    /// Steps 17-22: single-device kernels of the tile algebra and the math library.
    Kernels,
    /// Steps 23 and up: the distributed programs.
    Apps,
    /// Every step.
    All,
}

impl Suite {
    /// Whether `step` belongs to this suite.
    pub fn contains(self, step: &Step) -> bool {
        match self {
            Suite::Tutorial => step.number <= 16,
            Suite::Kernels => (17..=22).contains(&step.number),
            Suite::Apps => step.number >= 23,
            Suite::All => true,
        }
    }
}

/// The world sizes a step runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum World {
    /// Any world size.
    Any,
    /// World sizes that divide `extent`, the size of the dimension the layout splits
    /// across ranks (named `what`).
    Divides {
        /// The split extent.
        extent: usize,
        /// Its name in the program (`ffn`).
        what: &'static str,
    },
}

impl World {
    /// Why the step does not run at world size `p`, or `None` when it does.
    pub fn refuses(self, p: usize) -> Option<String> {
        match self {
            World::Any => None,
            World::Divides { extent, what } => (p == 0 || extent % p != 0).then(|| {
                format!("the layout splits `{what}` = {extent} across ranks; P = {p} does not divide it")
            }),
        }
    }
}

/// The outcome of one step in one mode.
#[derive(Debug)]
pub struct StepOutcome {
    /// Compile time over all launches, in milliseconds.
    pub compile_ms: f64,
    /// Run time over all launches, in milliseconds.
    pub run_ms: f64,
    /// OK, or the error.
    pub result: Result<()>,
    /// FNV-1a over the output digests of every launch of the step; `None` when a launch
    /// computed none (a session without [`Session::with_digest`]).
    pub digest: Option<u64>,
    /// The report of every launch, in order.
    pub reports: Vec<LaunchReport>,
}

impl Step {
    /// The modes a run of every mode goes through: each of [`Step::modes`], or `[None]` for a
    /// step without modes.
    pub fn each_mode(&self) -> Vec<Option<&'static str>> {
        if self.modes.is_empty() {
            vec![None]
        } else {
            self.modes.iter().map(|m| Some(*m)).collect()
        }
    }

    /// Runs the step on `session` (whose mode selects the variant) and times it.
    pub fn execute(&self, session: &Session) -> StepOutcome {
        session.take_reports();
        let result = (self.run)(session);
        let reports = session.take_reports();
        let ms = |f: &dyn Fn(&LaunchReport) -> std::time::Duration| {
            reports
                .iter()
                .fold(0.0, |a, r| a + f(r).as_secs_f64() * 1e3)
        };
        let digest = reports
            .iter()
            .map(|r| r.digest)
            .collect::<Option<Vec<u64>>>()
            .map(|ds| {
                let bytes: Vec<u8> = ds.iter().flat_map(|d| d.to_le_bytes()).collect();
                eagle::codegen::fnv1a(&bytes)
            });
        let compile_ms = ms(&|r| r.compile_time);
        let run_ms = ms(&|r| r.run.run_time);
        StepOutcome {
            digest,
            compile_ms,
            run_ms,
            result,
            reports,
        }
    }

    /// How messages name the step: `step 07` for a tutorial step, the example's name
    /// (`plan_histogram`) for the others, whose numbers (100 and up) are internal.
    fn label(&self) -> String {
        if self.number < 100 {
            format!("step {:02}", self.number)
        } else {
            format!("`{}`", self.name)
        }
    }

    /// Checks `mode` against the step's modes.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the accepted modes.
    pub fn check_mode(&self, mode: Option<&str>) -> Result<()> {
        match mode {
            None => Ok(()),
            Some(m) if self.modes.contains(&m) => Ok(()),
            Some(m) if self.modes.is_empty() => Err(Error::Usage(format!(
                "argument `--mode`: {} has no modes, found `{m}`; drop `--mode`",
                self.label()
            ))),
            Some(m) => Err(Error::Usage(format!(
                "argument `--mode`: {} accepts {}, found `{m}`",
                self.label(),
                self.modes.join(" | ")
            ))),
        }
    }
}

/// Parses a device list such as `0,1,2,3`.
///
/// # Errors
/// [`Error::Usage`] for an empty list, an entry that is not a non-negative integer, or a
/// repeated id, naming the entry and the expected form.
pub fn parse_devices(s: &str) -> Result<Vec<usize>> {
    parse_devices_on(Platform::Sim, s)
}

/// [`parse_devices`] for `platform`: on `cuda` an id may repeat (several ranks share one GPU,
/// e.g. `-d 0,0,0,0` runs four ranks on GPU 0).
///
/// # Errors
/// As [`parse_devices`], except repeats on `cuda`.
pub fn parse_devices_on(platform: Platform, s: &str) -> Result<Vec<usize>> {
    let s = s.trim();
    if s.is_empty() {
        return Err(Error::Usage(
            "argument `-d/--devices`: the list is empty; expected comma-separated device ids such as `0,1,2,3`".into(),
        ));
    }
    let mut out = vec![];
    // Repeats are found through a set: linear in the length of the list.
    let mut seen = std::collections::HashSet::new();
    for (i, part) in s.split(',').enumerate() {
        let p = part.trim();
        let d: usize = p.parse().map_err(|_| {
            let what = if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) {
                "too large to be a device id"
            } else {
                "not a device id"
            };
            Error::Usage(format!(
                "argument `-d/--devices`: entry {i} is `{p}`, {what}; expected comma-separated non-negative integers such as `0,1,2,3`"
            ))
        })?;
        if platform != Platform::Cuda && !seen.insert(d) {
            return Err(Error::Usage(format!(
                "argument `-d/--devices`: device {d} is listed twice; each rank needs its own device, e.g. `0,1,2,3` (only `-p cuda` lets ranks share a device)"
            )));
        }
        out.push(d);
    }
    Ok(out)
}

/// `--wait-timeout`'s value: whole seconds, at least 1.
fn parse_wait_timeout(s: &str) -> std::result::Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(t) if t >= 1 => Ok(t),
        _ => Err(format!(
            "expected a whole number of seconds, at least 1 (such as `60`), found `{s}`"
        )),
    }
}

/// Options shared by the runner and the examples.
#[derive(clap::Args, Debug, Clone)]
pub struct CommonArgs {
    /// Platform: sim (default; simulated devices in this process), cpu or cuda.
    #[arg(short, long, default_value = "sim")]
    pub platform: String,
    /// Comma-separated device ids; the world size P is their count (e.g. 0,1,2,3).
    #[arg(short, long, default_value = "0,1", allow_hyphen_values = true)]
    pub devices: String,
    /// Print the generic and specialized IR of every launch.
    #[arg(long)]
    pub emit_ir: bool,
    /// Print the CUDA C of every launch (compiled for the cuda target; runs on any platform).
    #[arg(long)]
    pub emit_cuda: bool,
    /// Turn off the simulator's race detector (on by default, or as `EAGLE_RACE_CHECK` says).
    #[arg(long)]
    pub no_race_check: bool,
    /// Seconds a rank may block in one wait or barrier before the run fails (default 60; at
    /// least 1).
    #[arg(long, value_name = "SECS", value_parser = parse_wait_timeout, allow_hyphen_values = true)]
    pub wait_timeout: Option<u64>,
    /// How `sim` and `cpu` run ranks that reach each other: `threads` (one OS thread each),
    /// `tasks` (coroutines on one worker thread per core) or `auto` (tasks from P = 64; the
    /// default, or as `EAGLE_SIM_RANKS` says).
    #[arg(long, value_name = "MODE", value_parser = ["auto", "threads", "tasks"])]
    pub sim_ranks: Option<String>,
    /// Show eagle's tracing spans on standard error: `-v` launches, compiles and plan runs with
    /// their durations, `-vv` every stage, dispatch and cache lookup (`RUST_LOG=eagle=debug`
    /// overrides).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Write a timeline of the run to FILE as Chrome trace-event JSON (open it in
    /// https://ui.perfetto.dev): a track per rank, spans per dispatch, kernel, collective,
    /// put/get, notify, wait and barrier. Under mpirun rank 0 writes every rank's events.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Write the same timeline to FILE as an SVG swimlane picture (opens in a browser).
    #[arg(long, value_name = "FILE")]
    pub trace_svg: Option<std::path::PathBuf>,
}

impl CommonArgs {
    /// A session from these options, in step mode `mode`.
    ///
    /// # Errors
    /// [`Error::Usage`] or [`Error::Runtime`] for a bad platform or device list.
    pub fn session(&self, mode: Option<String>) -> Result<Session> {
        if self.trace.is_some() && self.trace == self.trace_svg {
            return Err(Error::Usage(
                "`--trace` and `--trace-svg` name the same file; give each its own".into(),
            ));
        }
        let platform = Platform::parse(&self.platform)?;
        let devices = parse_devices_on(platform, &self.devices)?;
        if platform == Platform::Cuda && eagle::runtime::RunOptions::from_env()?.cuda_emulate {
            use std::io::Write;
            let _ = writeln!(
                crate::stderr_lines(),
                "note: EAGLE_CUDA_EMULATE is set: the CUDA C runs on CPU threads, not on a GPU"
            );
        }
        let mut s = Session::new(platform, devices)?
            .with_mode(mode)
            .with_emit_ir(self.emit_ir)
            .with_emit_cuda(self.emit_cuda)
            .with_digest(true);
        // The flag only turns the detector off: without it, `EAGLE_RACE_CHECK` (read by
        // `Session::new`) decides.
        if self.no_race_check {
            s = s.with_race_check(false);
        }
        if let Some(t) = self.wait_timeout {
            s = s.with_wait_timeout(std::time::Duration::from_secs(t));
        }
        match self.sim_ranks.as_deref() {
            Some("threads") => s = s.with_sim_ranks(eagle::SimRanks::Threads),
            Some("tasks") => s = s.with_sim_ranks(eagle::SimRanks::Tasks),
            Some(_) => s = s.with_sim_ranks(eagle::SimRanks::Auto),
            None => {}
        }
        if let Some(t) = self.tracer() {
            s = s.with_tracer(t);
        }
        Ok(s)
    }

    /// The process's timeline recorder when `--trace` or `--trace-svg` is given: one for every
    /// session of the process, written by [`CommonArgs::write_trace`].
    pub fn tracer(&self) -> Option<eagle::Trace> {
        static TRACE: std::sync::OnceLock<Option<eagle::Trace>> = std::sync::OnceLock::new();
        TRACE
            .get_or_init(|| {
                (self.trace.is_some() || self.trace_svg.is_some())
                    .then(|| eagle::Trace::new(self.trace.clone(), self.trace_svg.clone()))
            })
            .clone()
    }

    /// Writes the timeline files of `--trace` / `--trace-svg` (nothing without them). Under
    /// `mpirun` every rank calls it at the same point and rank 0 writes.
    ///
    /// # Errors
    /// [`Error::Runtime`] naming a file that could not be written.
    pub fn write_trace(&self) -> Result<()> {
        match self.tracer() {
            Some(t) => Ok(t.flush()?),
            None => Ok(()),
        }
    }
}

#[derive(Parser, Debug)]
#[command(about = "Run one eagle tutorial step at the world size given by -d")]
struct ExampleArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Step mode (see the step's page).
    #[arg(long)]
    mode: Option<String>,
}

/// What a failed write to stdout means for the exit code: `None` for a closed pipe
/// ([`std::io::ErrorKind::BrokenPipe`], e.g. `eagle | head`: output stops quietly, the exit
/// code is that of the run), `Some(e)` for any other error (a full disk: the runner and the
/// examples print it and exit 1).
pub fn write_failure(e: std::io::Error) -> Option<std::io::Error> {
    (e.kind() != std::io::ErrorKind::BrokenPipe).then_some(e)
}

/// Whether an error is the user's input (exit code 2) rather than a failed run (exit code 1).
pub fn is_usage(e: &Error) -> bool {
    use eagle::runtime::RuntimeError as R;
    matches!(
        e,
        Error::Usage(_)
            | Error::Runtime(
                R::UnknownPlatform(_)
                    | R::Devices(_)
                    | R::Env { .. }
                    | R::PlatformUnavailable { .. }
                    | R::NoCudaDriver { .. }
            )
    )
}

/// `main` of a tutorial example: parses `-p`, `-d`, `--mode`, `--emit-ir`, runs the step and
/// prints `OK` (exit 0), or the error (exit 2 for bad input, 1 for a failed run).
pub fn example_main(step: Step) -> ExitCode {
    let args = ExampleArgs::parse();
    if let Err(e) = crate::trace::init(args.common.verbose) {
        use std::io::Write;
        let _ = writeln!(crate::stderr_lines(), "error: {e}");
        return ExitCode::from(2);
    }
    let mpi = MpiGuard::init().with_wait_timeout(args.common.wait_timeout);
    let run = || -> Result<()> {
        mpi.agree_on_command_line(&std::env::args().skip(1).collect::<Vec<_>>())?;
        step.check_mode(args.mode.as_deref())?;
        let s = args.common.session(args.mode.clone())?;
        (step.run)(&s)
    };
    let result = run();
    let ok = mpi.all_ok(result.as_ref().err().map(ToString::to_string));
    // The timeline (`--trace`, `--trace-svg`): as the runner writes it.
    if ok || mpi.size == 1 {
        if let Err(e) = args.common.write_trace() {
            use std::io::Write;
            let _ = writeln!(crate::stderr_lines(), "error: {e}");
            return ExitCode::FAILURE;
        }
    }
    match result {
        Ok(()) if ok => {
            use std::io::Write;
            if mpi.is_root() {
                let mut out = std::io::stdout().lock();
                if let Some(e) = writeln!(out, "OK")
                    .and_then(|()| out.flush())
                    .err()
                    .and_then(write_failure)
                {
                    let _ = writeln!(
                        crate::stderr_lines(),
                        "error: the result could not be written to stdout: {e}"
                    );
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Ok(()) => {
            use std::io::Write;
            let _ = writeln!(
                crate::stderr_lines(),
                "error: rank {}: the run failed on another rank (its error is printed there)",
                mpi.rank
            );
            ExitCode::FAILURE
        }
        Err(e) => {
            use std::io::Write;
            let _ = writeln!(crate::stderr_lines(), "error: {e}");
            ExitCode::from(if is_usage(&e) { 2 } else { 1 })
        }
    }
}
