//! The eagle runner: runs every tutorial step, then the tile-algebra kernels (softmax,
//! layernorm, matmul), the math-library kernels (gelu, log_softmax, rotary) and the
//! distributed programs (sharded_softmax, sharded_layernorm, tp_ffn, allgather_gemm,
//! gemm_reduce_scatter, moe_dispatch_combine, halo_2d, ep_moe,
//! flash_decode, fp8_gemm_rs, ring_attention, dp_tp_mlp), at the world size given by `-d`;
//! `--suite tutorial|kernels|apps` runs one group. A program whose layout does not split at
//! that size prints `SKIP` and the reason.
//!
//! `cargo run --release -- -d 0,1,2,3` prints one line per step and mode (step, P, compile ms,
//! run ms, OK or FAILED with the reason) and exits non-zero if any fails.

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

macro_rules! steps {
    ($($m:ident = $path:literal),* $(,)?) => {
        $(
            #[allow(dead_code)]
            #[path = $path]
            mod $m;
        )*
        fn all_steps() -> Vec<eagle_runner::Step> {
            vec![$($m::STEP),*]
        }
    };
}

steps! {
    step01 = "../../examples/01_hello_rank.rs",
    step02 = "../../examples/02_three_levels.rs",
    step03 = "../../examples/03_window_buffer.rs",
    step04 = "../../examples/04_barrier.rs",
    step05 = "../../examples/05_remote_load_store.rs",
    step06 = "../../examples/06_put_get.rs",
    step07 = "../../examples/07_dynamic_rank_count.rs",
    step08 = "../../examples/08_allreduce_mesh.rs",
    step09 = "../../examples/09_allreduce_two_phase.rs",
    step10 = "../../examples/10_allreduce_ring.rs",
    step11 = "../../examples/11_builtin_allreduce.rs",
    step12 = "../../examples/12_broadcast.rs",
    step13 = "../../examples/13_allgather.rs",
    step14 = "../../examples/14_reduce_scatter.rs",
    step15 = "../../examples/15_all_to_all.rs",
    step16 = "../../examples/16_several_collectives.rs",
    softmax = "../../examples/softmax.rs",
    layernorm = "../../examples/layernorm.rs",
    matmul = "../../examples/matmul.rs",
    gelu = "../../examples/gelu.rs",
    log_softmax = "../../examples/log_softmax.rs",
    rotary = "../../examples/rotary.rs",
    sharded_softmax = "../../examples/sharded_softmax.rs",
    sharded_layernorm = "../../examples/sharded_layernorm.rs",
    tp_ffn = "../../examples/tp_ffn.rs",
    allgather_gemm = "../../examples/allgather_gemm.rs",
    gemm_reduce_scatter = "../../examples/gemm_reduce_scatter.rs",
    moe_dispatch_combine = "../../examples/moe_dispatch_combine.rs",
    halo_2d = "../../examples/halo_2d.rs",
    ep_moe = "../../examples/ep_moe.rs",
    flash_decode = "../../examples/flash_decode.rs",
    fp8_gemm_rs = "../../examples/fp8_gemm_rs.rs",
    ring_attention = "../../examples/ring_attention.rs",
    dp_tp_mlp = "../../examples/dp_tp_mlp.rs",
}

#[derive(Parser, Debug)]
#[command(
    name = "eagle",
    version,
    about = "Run the eagle tutorial steps at any world size"
)]
struct Cli {
    #[command(flatten)]
    common: eagle_runner::CommonArgs,
    /// Run only step NN (e.g. 07).
    #[arg(long, value_name = "NN")]
    step: Option<String>,
    /// Run one group of steps: the tutorial (01-16), the single-device kernels (17-22) or
    /// the distributed programs (23-).
    #[arg(long, value_enum, default_value = "all")]
    suite: eagle_runner::Suite,
    /// Run only this mode of the selected steps that have it.
    #[arg(long)]
    mode: Option<String>,
    /// Print a digest of each step's outputs (equal digests: bit-identical outputs). Under
    /// `mpirun`, every rank's digest is compared with rank 0's.
    #[arg(long)]
    digest: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// The persistent artifact cache (`EAGLE_CACHE_DIR`, default `~/.cache/eagle`).
    Cache {
        #[command(subcommand)]
        action: CacheAction,
    },
}

#[derive(clap::Subcommand, Debug, Clone, Copy)]
enum CacheAction {
    /// Print the cache directory, its entries and their bytes.
    Info,
    /// Delete every entry.
    Clear,
}

/// `eagle cache info|clear`.
fn cache_command(action: CacheAction) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let Some(cache) = eagle::codegen::disk::DiskCache::from_env() else {
        let _ = writeln!(
            out,
            "the disk cache is off (EAGLE_CACHE_DIR=off, or no home directory): nothing to do"
        );
        return ExitCode::SUCCESS;
    };
    let dir = cache.dir().display().to_string();
    let r = match action {
        CacheAction::Info => {
            if let Err(e) = cache.check_dir() {
                let _ = writeln!(
                    eagle_runner::stderr_lines(),
                    "error: environment variable `EAGLE_CACHE_DIR`: expected a directory, found {e}; point it at a directory, or set it to `off`"
                );
                return ExitCode::FAILURE;
            }
            let u = cache.usage();
            writeln!(out, "{dir}: {} entries, {} bytes", u.entries, u.bytes)
        }
        CacheAction::Clear => match cache.clear() {
            Ok(u) => writeln!(
                out,
                "{dir}: deleted {} entries, {} bytes",
                u.entries, u.bytes
            ),
            Err(e) => {
                let _ = writeln!(
                    eagle_runner::stderr_lines(),
                    "error: the cache directory {dir} cannot be cleared: {e}"
                );
                return ExitCode::FAILURE;
            }
        },
    };
    match r.err().and_then(eagle_runner::write_failure) {
        Some(_) => ExitCode::FAILURE,
        None => ExitCode::SUCCESS,
    }
}

/// The steps of `--suite` and `--step`.
///
/// # Errors
/// The usage error for a `--step` that names no step of the suite.
fn select_steps(cli: &Cli) -> Result<Vec<eagle_runner::Step>, String> {
    let steps: Vec<eagle_runner::Step> = all_steps()
        .into_iter()
        .filter(|st| cli.suite.contains(st))
        .collect();
    let Some(s) = &cli.step else {
        return Ok(steps);
    };
    match s.trim().parse::<u32>() {
        Ok(n) if steps.iter().any(|st| st.number == n) => {
            Ok(steps.into_iter().filter(|st| st.number == n).collect())
        }
        _ => {
            let known: Vec<String> = steps.iter().map(|s| format!("{:02}", s.number)).collect();
            let within = match cli.suite {
                eagle_runner::Suite::All => String::new(),
                suite => clap::ValueEnum::to_possible_value(&suite)
                    .map(|v| format!(" in `--suite {}`", v.get_name()))
                    .unwrap_or_default(),
            };
            Err(format!(
                "argument `--step`: unknown step `{s}`{within}; expected one of {}",
                known.join(", ")
            ))
        }
    }
}

/// `--mode M` runs mode M of the selected steps that have it.
///
/// # Errors
/// The usage error for a step named with `--step` that lacks the mode, or a mode no selected
/// step has.
fn check_mode(cli: &Cli, selected: &[eagle_runner::Step]) -> Result<(), String> {
    let Some(m) = &cli.mode else { return Ok(()) };
    if cli.step.is_some() {
        if let Some(st) = selected.first() {
            st.check_mode(Some(m)).map_err(|e| e.to_string())?;
        }
    } else if !selected.iter().any(|st| st.modes.contains(&m.as_str())) {
        let mut all: Vec<&str> = selected
            .iter()
            .flat_map(|st| st.modes.iter().copied())
            .collect();
        all.sort_unstable();
        all.dedup();
        return Err(format!(
            "argument `--mode`: no step has mode `{m}`; modes are {}",
            all.join(", ")
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Cache { action }) = cli.command {
        return cache_command(action);
    }
    if let Err(e) = eagle_runner::trace::init(cli.common.verbose) {
        let _ = writeln!(eagle_runner::stderr_lines(), "error: {e}");
        return ExitCode::from(2);
    }
    // Under `mpirun` (feature `mpi`) every process runs every step for its own rank; rank 0
    // prints, and the ranks agree on success before anyone reports it.
    let mpi = eagle_runner::MpiGuard::init().with_wait_timeout(cli.common.wait_timeout);
    // Ranks started with different command lines would run different steps: refuse by name.
    if let Err(e) = mpi.agree_on_command_line(&std::env::args().skip(1).collect::<Vec<_>>()) {
        let _ = writeln!(eagle_runner::stderr_lines(), "error: {e}");
        return ExitCode::FAILURE;
    }
    let selected = match select_steps(&cli) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(eagle_runner::stderr_lines(), "error: {e}");
            return ExitCode::from(2);
        }
    };
    // Validate platform and devices once, before any step runs.
    if let Err(e) = cli.common.session(None) {
        let _ = writeln!(eagle_runner::stderr_lines(), "error: {e}");
        return ExitCode::from(if eagle_runner::is_usage(&e) { 2 } else { 1 });
    }
    // `--mode M` runs mode M of the selected steps that have it; naming a step that lacks it,
    // or a mode no selected step has, is a usage error.
    if let Err(e) = check_mode(&cli, &selected) {
        let _ = writeln!(eagle_runner::stderr_lines(), "error: {e}");
        return ExitCode::from(2);
    }
    let mut failed = 0;
    let mut total = 0;
    let mut skipped = 0;
    let mut out = std::io::stdout().lock();
    // The first failed write to stdout other than a closed pipe; printing stops after it.
    let mut write_error: Option<std::io::Error> = None;
    let mut printing = true;
    for st in &selected {
        let modes: Vec<Option<&str>> = match &cli.mode {
            Some(m) if st.modes.contains(&m.as_str()) => vec![Some(m.as_str())],
            Some(_) => continue,
            None => st.each_mode(),
        };
        for mode in modes {
            total += 1;
            let label = match mode {
                Some(m) => format!("{:02} {} [{m}]", st.number, st.name),
                None => format!("{:02} {}", st.number, st.name),
            };
            let session = match cli.common.session(mode.map(String::from)) {
                Ok(s) => s,
                Err(e) => {
                    let _ = writeln!(eagle_runner::stderr_lines(), "error: {e}");
                    return ExitCode::from(2);
                }
            };
            let p = session.world_size();
            if let Some(why) = st.world.refuses(p) {
                skipped += 1;
                if mpi.is_root() && printing {
                    if let Err(e) = writeln!(out, "step {label:<36} P={p:<2} SKIP: {why}") {
                        printing = false;
                        write_error = write_error.or(eagle_runner::write_failure(e));
                    }
                }
                continue;
            }
            let mut outcome = st.execute(&session);
            // The runner's sessions compute digests (`with_digest(true)`), so this is `Some`.
            if let Some(q) = mpi.rank_differing(outcome.digest.unwrap_or(0)) {
                outcome.result = Err(eagle::Error::Check(format!(
                    "rank {q}'s outputs differ from rank 0's (digest)"
                )));
            }
            let status = match &outcome.result {
                Ok(()) => "OK".to_string(),
                Err(e) => {
                    failed += 1;
                    format!("FAILED: {e}")
                }
            };
            // A closed stdout (`eagle | head`) must not panic: stop printing, keep the exit code.
            // Any other write error (a full disk) is reported and makes the exit code 1.
            if !mpi.is_root() {
                continue;
            }
            let digest = if cli.digest {
                format!("  digest={:016x}", outcome.digest.unwrap_or(0))
            } else {
                String::new()
            };
            // A step that failed before it compiled or ran has no time to show: a dash, not 0.00.
            let ms = |t: f64| {
                if outcome.result.is_err() && t == 0.0 {
                    format!("{:>8}", "-")
                } else {
                    format!("{t:>8.2}")
                }
            };
            if printing {
                if let Err(e) = writeln!(
                    out,
                    "step {label:<36} P={p:<2} compile {} ms  run {} ms  {status}{digest}",
                    ms(outcome.compile_ms),
                    ms(outcome.run_ms)
                ) {
                    printing = false;
                    write_error = write_error.or(eagle_runner::write_failure(e));
                }
            }
        }
    }
    if printing {
        if let Err(e) = out.flush() {
            write_error = write_error.or(eagle_runner::write_failure(e));
        }
    }
    let ok = mpi.all_ok((failed > 0).then(|| format!("{failed} step(s) failed on this rank")));
    // The timeline (`--trace`, `--trace-svg`). Under mpirun writing it gathers every rank's
    // events, so only once every rank has reached the vote above.
    if ok || mpi.size == 1 {
        if let Err(e) = cli.common.write_trace() {
            let _ = writeln!(eagle_runner::stderr_lines(), "error: {e}");
            return ExitCode::FAILURE;
        }
    }
    if let Some(e) = &write_error {
        let _ = writeln!(
            eagle_runner::stderr_lines(),
            "error: the results could not be written to stdout: {e}"
        );
    }
    let counts = Counts {
        total,
        failed,
        skipped,
    };
    conclude(&counts, ok, mpi.is_root(), printing, write_error.is_some())
}

/// How the step runs of one invocation went.
struct Counts {
    /// Runs selected (a step once per mode).
    total: usize,
    /// Runs that failed on this rank.
    failed: usize,
    /// Runs the world size refused (printed as SKIP).
    skipped: usize,
}

/// The exit code, with the closing count on stderr from rank 0 (`root`): the failures' when a
/// run failed on some rank (`!ok`) or here, else the runs' when stdout took every line
/// (`printed`; after a reader that went away, `eagle | head`, output stops quietly). A failed
/// write to stdout (`write_failed`) fails the run, its error already reported.
fn conclude(c: &Counts, ok: bool, root: bool, printed: bool, write_failed: bool) -> ExitCode {
    let mut err = eagle_runner::stderr_lines();
    if !ok || c.failed > 0 {
        if root {
            let _ = writeln!(err, "{} of {} step runs failed", c.failed, c.total);
        }
        return ExitCode::FAILURE;
    }
    if write_failed {
        return ExitCode::FAILURE;
    }
    if root && printed {
        let skips = match c.skipped {
            0 => String::new(),
            n => format!(", {n} skipped at this world size"),
        };
        let _ = writeln!(
            err,
            "{} of {} step runs OK{skips}",
            c.total - c.skipped,
            c.total
        );
    }
    ExitCode::SUCCESS
}
