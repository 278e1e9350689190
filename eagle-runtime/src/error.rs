use thiserror::Error;

/// Errors raised while running an artifact.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RuntimeError {
    /// An unknown `-p` value.
    #[error("unknown platform `{0}`; expected `sim` (default), `cpu` or `cuda`")]
    UnknownPlatform(String),
    /// A platform this build cannot run.
    #[error(
        "platform `{platform}` is not available: {reason}; run on the simulator with `-p sim`"
    )]
    PlatformUnavailable {
        /// Platform name.
        platform: String,
        /// Why.
        reason: String,
    },
    /// An environment variable eagle reads holds a value it does not understand.
    #[error("environment variable `{variable}`: expected {expected}, found `{found}`; set it to one of those or unset it")]
    Env {
        /// The variable (`EAGLE_RACE_CHECK`).
        variable: String,
        /// The values it takes.
        expected: String,
        /// Its value.
        found: String,
    },
    /// A bad device list.
    #[error("device list (`-d/--devices`): {0}")]
    Devices(String),
    /// A host argument that does not match the host function's signature.
    #[error(
        "host function `{function}`, argument `{argument}`: expected {expected}, found {found}"
    )]
    Argument {
        /// Host function.
        function: String,
        /// Parameter name.
        argument: String,
        /// What the signature asks for.
        expected: String,
        /// What was passed.
        found: String,
    },
    /// A rank failed; the others were stopped.
    #[error("rank {rank} failed: {cause}")]
    RankFailed {
        /// The failing rank.
        rank: usize,
        /// Why, typed; the message is its text.
        cause: Cause,
    },
    /// Ranks (MPI processes) that reached an agreement point with different programs,
    /// arguments or places in the program; refused on every rank before anything runs.
    #[error("the ranks disagree at {point}: {message}")]
    RanksDisagree {
        /// Where this rank was ("launch #2 of `ring_get`").
        point: String,
        /// What differs, with both values and the fix.
        message: String,
    },
    /// Ranks that did not reach an agreement point or a barrier within the wait timeout.
    #[error("rank {rank}: rank(s) {missing:?} did not reach {point} within {secs} s; they may have stopped, failed, or be running a different program (raise the limit with `--wait-timeout` or EAGLE_WAIT_TIMEOUT_S if they are only slow)")]
    RanksMissing {
        /// The rank that waited.
        rank: usize,
        /// Where it waited.
        point: String,
        /// The ranks that did not arrive.
        missing: Vec<usize>,
        /// The timeout, in seconds.
        secs: u64,
    },
    /// Platform `cuda` on a machine without a CUDA driver.
    #[error("no CUDA driver was found ({detail}); platform `cuda` needs an NVIDIA GPU and its driver. Run on the simulator instead (`-p sim`, e.g. `cargo run --release -- -p sim -d 0,1,2,3`), or set EAGLE_CUDA_EMULATE=1 to run the CUDA C on CPU threads (slow; for testing)")]
    NoCudaDriver {
        /// What was looked for.
        detail: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver call `{call}` failed: {message}")]
    Cuda {
        /// The driver function.
        call: String,
        /// The driver's error.
        message: String,
    },
    /// An execution plan used wrongly, or a structure this build cannot run (`eagle::plan`):
    /// the message names the argument, what was expected and what was found. The facade
    /// returns it as `eagle::Error::Plan`.
    #[error("{0}")]
    Plan(String),
    /// The CUDA C of an artifact could not be compiled or loaded (NVRTC missing or rejecting it).
    #[error("{0}")]
    CudaCompile(String),
    /// A timeline file ([`crate::trace::Trace`]) that could not be written.
    #[error("trace file `{path}` could not be written: {message}; pass a path in a directory that exists and that you can write")]
    Trace {
        /// The file.
        path: String,
        /// The system's error.
        message: String,
    },
    /// Every live rank waits on a condition that no rank can satisfy.
    #[error("deadlock: no rank can make progress; every rank still running is blocked:\n{report}")]
    Deadlock {
        /// One line per rank: what it waits for.
        report: String,
    },
}

/// Why a rank failed: the typed cause of [`RuntimeError::RankFailed`]. Each holds the
/// message, which names the function, the op and its source location where there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// A run-time check of compiled code failed at a site (an index out of range, an integer
    /// division by zero, a peer outside the world).
    Fault(String),
    /// The `sim` race detector found a read of a window write that no synchronisation orders
    /// before it.
    Race(String),
    /// A `wait` outlived the run's wait timeout.
    WaitTimeout(String),
    /// A barrier did not complete within the wait timeout.
    BarrierTimeout(String),
    /// A put, get, signal or store outside its window's region, or of a peer outside the world,
    /// refused by the runtime's hooks.
    Access(String),
    /// The host function (the host interpreter) failed.
    Host(String),
    /// The error another rank met, relayed to this one (MPI).
    Peer(String),
    /// The device, driver or transport failed (a CUDA driver call, a missing entry point).
    Device(String),
}

impl Cause {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            Cause::Fault(m)
            | Cause::Race(m)
            | Cause::WaitTimeout(m)
            | Cause::BarrierTimeout(m)
            | Cause::Access(m)
            | Cause::Host(m)
            | Cause::Peer(m)
            | Cause::Device(m) => m,
        }
    }

    /// The same cause with its message rewritten by `f`.
    pub fn map(self, f: impl FnOnce(String) -> String) -> Cause {
        match self {
            Cause::Fault(m) => Cause::Fault(f(m)),
            Cause::Race(m) => Cause::Race(f(m)),
            Cause::WaitTimeout(m) => Cause::WaitTimeout(f(m)),
            Cause::BarrierTimeout(m) => Cause::BarrierTimeout(f(m)),
            Cause::Access(m) => Cause::Access(f(m)),
            Cause::Host(m) => Cause::Host(f(m)),
            Cause::Peer(m) => Cause::Peer(f(m)),
            Cause::Device(m) => Cause::Device(f(m)),
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}
