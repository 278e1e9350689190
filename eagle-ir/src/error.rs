use thiserror::Error;

/// Result type of eagle-ir.
pub type Result<T, E = IrError> = std::result::Result<T, E>;

/// Errors raised while building, parsing or verifying IR.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IrError {
    /// A kernel body that does not type-check while its IR is built.
    #[error("in function `{function}`: {message}")]
    Build {
        /// The function being built.
        function: String,
        /// What was expected, what was found, and the fix.
        message: String,
    },
    /// A function that calls itself, directly or through others.
    #[error("recursion: `{chain}`; eagle functions are inlined into per-device programs and may not call themselves (rewrite it as a `for` loop)")]
    Recursion {
        /// The call chain, `a -> b -> a`.
        chain: String,
    },
    /// Text that is not valid IR.
    #[error("IR parse error at line {line}, column {column}: {message}")]
    Parse {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What was expected and what was found.
        message: String,
    },
    /// A module that breaks a structural or typing rule.
    #[error("verifier: in function `{function}`, op `{op}`{}: {message}", crate::ir::at(.loc.as_ref()))]
    Verify {
        /// The function holding the op.
        function: String,
        /// The op, in IR text.
        op: String,
        /// The op's Rust source location (`None` for IR read from text without one).
        loc: Option<crate::ir::Loc>,
        /// The operand at fault, what was expected and what was found.
        message: String,
    },
}
