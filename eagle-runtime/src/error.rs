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
    #[error("rank {rank} failed: {message}")]
    RankFailed {
        /// The failing rank.
        rank: usize,
        /// Why.
        message: String,
    },
    /// Every live rank waits on a condition that no rank can satisfy.
    #[error("deadlock: no rank can make progress; every rank still running is blocked:\n{report}")]
    Deadlock {
        /// One line per rank: what it waits for.
        report: String,
    },
}
