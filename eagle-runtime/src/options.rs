//! The options of a run ([`RunOptions`]) and the `EAGLE_*` environment variables that set them.

use crate::error::RuntimeError;
use std::time::Duration;

/// Options of a run: where it runs and how `sim` checks it.
///
/// [`RunOptions::default`] is the built-in defaults; [`RunOptions::from_env`] (what every
/// library entry point uses) applies the `EAGLE_*` environment variables on top and refuses
/// values it does not understand.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Where per-device programs run (default `sim`; `cpu` runs like `sim`).
    pub platform: crate::Platform,
    /// The device id of each rank on `cuda` (empty: every rank on device 0).
    pub devices: Vec<usize>,
    /// On `cuda`: run the CUDA C on CPU threads (compiled by the host C++ compiler) instead of
    /// a GPU, to check generated code without one (default off; `EAGLE_CUDA_EMULATE=1`, `true`,
    /// `yes` or `on` turns it on, `0`, `false`, `no` or `off` leaves it off).
    pub cuda_emulate: bool,
    /// Check every `get` / `remote_load` of a peer window against the notify -> wait and barrier
    /// ordering of the writes it reads (default: on; `EAGLE_RACE_CHECK=0`, `false`, `no` or
    /// `off` turns it off, `1`, `true`, `yes` or `on` leaves it on). A run of one rank has no
    /// peer to race with and skips it.
    pub race_check: bool,
    /// How long a rank may wait on one signal or barrier before the run fails (default 60 s,
    /// or `EAGLE_WAIT_TIMEOUT_S`, a whole number of seconds). True deadlocks are reported at
    /// once, whatever this is.
    pub wait_timeout: Duration,
    /// Records a timeline of the run into this recorder (default none; see [`crate::trace`]).
    pub trace: Option<crate::trace::Trace>,
    /// How `sim` and `cpu` run the ranks of a launch whose ranks reach each other (default
    /// [`SimRanks::Auto`], or `EAGLE_SIM_RANKS=auto`, `threads` or `tasks`).
    pub sim_ranks: SimRanks,
}

/// How the in-process executor (`sim`, `cpu`) runs the ranks of a launch whose programs reach
/// each other. Either way each rank runs its own program, a wait or barrier blocks only its
/// rank, the results are the same bits, a deadlock has the same report, and a race is found
/// (which of its two accesses comes second, and so which rank reports it, depends on the
/// order the ranks ran in, under either mode). See docs/performance.md, "Ranks as tasks, and
/// an access without a lock". The runner's `--sim-ranks` sets it; `EAGLE_SIM_RANKS` takes
/// the same values, in any case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SimRanks {
    /// [`SimRanks::Threads`] up to [`SimRanks::TASKS_FROM`] ranks, [`SimRanks::Tasks`] from there.
    #[default]
    Auto,
    /// One OS thread per rank, scheduled by the OS: ranks run truly at once.
    Threads,
    /// Each rank a stackful coroutine, the ranks split in blocks of consecutive ranks over one
    /// worker thread per core: a rank runs until it waits, then its worker runs the next rank
    /// whose wait is satisfied (a switch costs tens of nanoseconds instead of a kernel
    /// wake-up). A wait times out when its worker has had nothing to run for the timeout.
    Tasks,
}

impl SimRanks {
    /// The world size from which [`SimRanks::Auto`] runs ranks as tasks.
    pub const TASKS_FROM: usize = 64;

    /// Whether a world of `p` ranks runs them as tasks.
    pub fn tasks(self, p: usize) -> bool {
        match self {
            SimRanks::Auto => p >= SimRanks::TASKS_FROM,
            SimRanks::Threads => false,
            SimRanks::Tasks => true,
        }
    }
}

impl Default for RunOptions {
    /// The built-in defaults (no environment variable is read): `sim`, race check on, no
    /// emulation, a 60 s wait timeout.
    fn default() -> Self {
        RunOptions {
            platform: crate::Platform::Sim,
            devices: vec![],
            cuda_emulate: false,
            race_check: true,
            wait_timeout: Duration::from_secs(60),
            trace: None,
            sim_ranks: SimRanks::Auto,
        }
    }
}

/// A source of environment variables: the process's, or a table in tests.
type Lookup<'a> = &'a dyn Fn(&str) -> Option<std::ffi::OsString>;

/// The value of variable `k`, trimmed; `None` when unset or empty.
fn env_value(get: Lookup<'_>, k: &str) -> Result<Option<String>, RuntimeError> {
    let Some(v) = get(k) else {
        return Ok(None);
    };
    match v.into_string() {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v.trim().to_string())),
        Err(v) => Err(RuntimeError::Env {
            variable: k.into(),
            expected: "a UTF-8 value".into(),
            found: v.to_string_lossy().into_owned(),
        }),
    }
}

/// Boolean variable `k`: `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off` (any case); `None`
/// when unset or empty.
fn env_bool(get: Lookup<'_>, k: &str) -> Result<Option<bool>, RuntimeError> {
    let Some(v) = env_value(get, k)? else {
        return Ok(None);
    };
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        _ => Err(RuntimeError::Env {
            variable: k.into(),
            expected: "`1`, `true`, `yes` or `on` (on), or `0`, `false`, `no` or `off` (off)"
                .into(),
            found: v,
        }),
    }
}

impl RunOptions {
    /// The defaults with the environment applied: `EAGLE_CUDA_EMULATE`, `EAGLE_RACE_CHECK`
    /// (booleans: `1`, `true`, `yes`, `on` / `0`, `false`, `no`, `off`) and
    /// `EAGLE_WAIT_TIMEOUT_S` (a whole number of seconds) and `EAGLE_SIM_RANKS` (`auto`,
    /// `threads` or `tasks`). An unset or empty variable keeps its default.
    ///
    /// # Errors
    /// [`RuntimeError::Env`] naming the variable, the values it takes and the value found.
    pub fn from_env() -> Result<RunOptions, RuntimeError> {
        RunOptions::from_vars(&|k| std::env::var_os(k))
    }

    /// [`RunOptions::from_env`] with variables from `get`.
    fn from_vars(get: Lookup<'_>) -> Result<RunOptions, RuntimeError> {
        let mut o = RunOptions::default();
        if let Some(b) = env_bool(get, "EAGLE_CUDA_EMULATE")? {
            o.cuda_emulate = b;
        }
        if let Some(b) = env_bool(get, "EAGLE_RACE_CHECK")? {
            o.race_check = b;
        }
        let k = "EAGLE_SIM_RANKS";
        if let Some(v) = env_value(get, k)? {
            o.sim_ranks = match v.to_ascii_lowercase().as_str() {
                "auto" => SimRanks::Auto,
                "threads" => SimRanks::Threads,
                "tasks" => SimRanks::Tasks,
                _ => {
                    return Err(RuntimeError::Env {
                        variable: k.into(),
                        expected: "`auto`, `threads` or `tasks`".into(),
                        found: v,
                    })
                }
            };
        }
        let k = "EAGLE_WAIT_TIMEOUT_S";
        if let Some(v) = env_value(get, k)? {
            // 0 s would fail every wait that is not already satisfied: a flaky run, not a
            // setting (the runner's `--wait-timeout` refuses it too).
            let secs =
                v.parse::<u64>()
                    .ok()
                    .filter(|&s| s >= 1)
                    .ok_or_else(|| RuntimeError::Env {
                        variable: k.into(),
                        expected: "a whole number of seconds, at least 1, such as `60`".into(),
                        found: v.clone(),
                    })?;
            o.wait_timeout = Duration::from_secs(secs);
        }
        Ok(o)
    }
}

/// The number of processes of the job when an MPI launcher started this process (`mpirun`
/// of Open MPI, or MPICH's Hydra: `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `PMIX` or
/// `MPI_LOCALNRANKS` in the environment); `None` otherwise. A launcher that gives no size
/// counts as `Some(0)`.
pub fn launcher_world_size() -> Option<usize> {
    let size = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok());
    let launched = [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_RANK",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .any(|k| std::env::var_os(k).is_some());
    launched.then(|| size.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// [`RunOptions::from_vars`] over a table of variables.
    fn opts(vars: &[(&str, &str)]) -> Result<RunOptions, RuntimeError> {
        let table: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        RunOptions::from_vars(&|k| table.get(k).map(Into::into))
    }

    #[test]
    fn environment_values_eagle_does_not_understand_are_errors() {
        for (var, value, expected) in [
            (
                "EAGLE_RACE_CHECK",
                "garbage",
                "`1`, `true`, `yes` or `on` (on)",
            ),
            (
                "EAGLE_RACE_CHECK",
                "-1",
                "`0`, `false`, `no` or `off` (off)",
            ),
            (
                "EAGLE_CUDA_EMULATE",
                "maybe",
                "`1`, `true`, `yes` or `on` (on)",
            ),
            (
                "EAGLE_WAIT_TIMEOUT_S",
                "-1",
                "a whole number of seconds, at least 1, such as `60`",
            ),
            (
                "EAGLE_WAIT_TIMEOUT_S",
                "0",
                "a whole number of seconds, at least 1, such as `60`",
            ),
            (
                "EAGLE_WAIT_TIMEOUT_S",
                "garbage",
                "a whole number of seconds",
            ),
            ("EAGLE_WAIT_TIMEOUT_S", "1.5", "a whole number of seconds"),
            ("EAGLE_SIM_RANKS", "fibers", "`auto`, `threads` or `tasks`"),
        ] {
            let e = opts(&[(var, value)]).unwrap_err();
            assert_eq!(
                e,
                RuntimeError::Env {
                    variable: var.into(),
                    expected: e_expected(&e),
                    found: value.into(),
                },
                "{var}={value}"
            );
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("environment variable `{var}`: expected ")),
                "{msg}"
            );
            assert!(msg.contains(expected), "{msg}");
            assert!(msg.contains(&format!("found `{value}`")), "{msg}");
        }
    }

    fn e_expected(e: &RuntimeError) -> String {
        match e {
            RuntimeError::Env { expected, .. } => expected.clone(),
            other => panic!("not an Env error: {other:?}"),
        }
    }

    #[test]
    fn environment_values_eagle_understands_set_the_options() {
        let d = opts(&[]).unwrap();
        assert_eq!(d, RunOptions::default());
        assert!(d.race_check && !d.cuda_emulate);
        assert_eq!(d.wait_timeout, Duration::from_secs(60));
        for (v, on) in [
            ("0", false),
            ("off", false),
            ("No", false),
            ("1", true),
            ("ON", true),
        ] {
            assert_eq!(
                opts(&[("EAGLE_RACE_CHECK", v)]).unwrap().race_check,
                on,
                "{v}"
            );
            assert_eq!(
                opts(&[("EAGLE_CUDA_EMULATE", v)]).unwrap().cuda_emulate,
                on,
                "{v}"
            );
        }
        for (v, mode) in [
            ("auto", SimRanks::Auto),
            ("Threads", SimRanks::Threads),
            ("tasks", SimRanks::Tasks),
        ] {
            assert_eq!(
                opts(&[("EAGLE_SIM_RANKS", v)]).unwrap().sim_ranks,
                mode,
                "{v}"
            );
        }
        assert!(!SimRanks::Auto.tasks(SimRanks::TASKS_FROM - 1));
        assert!(SimRanks::Auto.tasks(SimRanks::TASKS_FROM));
        let o = opts(&[("EAGLE_WAIT_TIMEOUT_S", " 5 "), ("EAGLE_RACE_CHECK", "")]).unwrap();
        assert_eq!(o.wait_timeout, Duration::from_secs(5));
        assert!(o.race_check, "an empty value keeps the default");
    }
}
