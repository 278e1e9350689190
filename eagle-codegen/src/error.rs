use eagle_ir::IrError;
use thiserror::Error;

/// Errors of [`crate::specialize`]: the program does not fit the bindings it is specialized for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecializeError {
    /// A symbolic dim that no binding gives a value.
    #[error("function `{function}`, {place}: dimension `{name}` has no binding: `launch` binds a dim from the shapes of the host function's arguments, and none has `{name}` as an extent; give one a dimension `{name}` ({}), or pass `{name}` in the bindings where you specialize directly (`specialized_ir`, `ir_specialized`)", unbound_example(.name))]
    UnboundDim {
        /// Function.
        function: String,
        /// Where the dim appears (an argument and dim index, or an op).
        place: String,
        /// The symbol.
        name: String,
    },
    /// A derived dim (`NR * 16`, `M / NR`) that has no value at these bindings: a division
    /// that is not exact, a subtraction below zero.
    #[error("function `{function}`, {place}: the derived dimension `{expr}` has no value at these bindings: {message}")]
    DerivedDim {
        /// Function.
        function: String,
        /// Where the dim appears (an argument and dim index, or an op).
        place: String,
        /// The dim as written (`(M / NR)`).
        expr: String,
        /// What went wrong, with both values.
        message: String,
    },
    /// A constant extent where the world size belongs (tutorial seed, "Fatal pitfall").
    #[error("function `{function}`, argument `{argument}`, dimension {dim}{}: the extent is pinned to the constant {extent}, but the program runs at world size {world_size} and indexes this dimension with ranks 0..{world_size}; declare the world dimension with `dynamic!`: `const NR: Dim = dynamic!(\"NR\");` and use `NR` in place of {extent} in the signature", eagle_ir::at(.loc.as_deref()))]
    WorldDimPinned {
        /// Host function.
        function: String,
        /// The argument whose shape is pinned.
        argument: String,
        /// Dim index in the argument's shape.
        dim: usize,
        /// The constant extent written.
        extent: u64,
        /// The world size of the specialization.
        world_size: u64,
        /// The source location of the op that indexes the dimension with the rank (`x[r]`).
        loc: Option<Box<eagle_ir::Loc>>,
    },
    /// A world dimension declared with `dynamic!` whose binding (from the argument shapes) is
    /// not the world size the program runs at.
    #[error("function `{function}`, argument `{argument}`, dimension {dim}: the world dimension `{name}` was bound to {extent} by {bound_by}, but the session has {world_size} devices and the program indexes this dimension with ranks 0..{world_size}; pass tensors whose dimension {dim} is {world_size} (one row per device){}", if *.extent > 0 { format!(", or run on {} devices", .extent) } else { String::new() })]
    WorldDimBound {
        /// Host function.
        function: String,
        /// The argument indexed by rank.
        argument: String,
        /// Dim index in the argument's shape.
        dim: usize,
        /// The symbol (`NR`).
        name: String,
        /// The value it was bound to.
        extent: u64,
        /// What bound it: ``argument `x` `` (from its shape), or the bindings given.
        bound_by: String,
        /// The world size of the specialization.
        world_size: u64,
    },
    /// A static index or offset outside its extent.
    #[error("function `{function}`, op `{op}`{}: {operand} spans {lo}..={hi} but dimension {dim} has extent {extent}; keep the index below the extent (or grow the tensor)", eagle_ir::at(.loc.as_deref()))]
    IndexOutOfBounds {
        /// Function.
        function: String,
        /// The op, as IR text.
        op: String,
        /// The op's Rust source location, when known.
        loc: Option<Box<eagle_ir::Loc>>,
        /// Which operand.
        operand: String,
        /// Dim index.
        dim: u32,
        /// Lowest value the index (plus the tile extent) takes.
        lo: i128,
        /// Highest value.
        hi: i128,
        /// The extent.
        extent: u64,
    },
    /// Peer arithmetic that can go negative (tutorial seed: `(my_rank - 1) % nranks`).
    #[error("function `{function}`, op `{op}`{}: the peer rank can be negative (it spans {lo}..={hi}); `%` keeps the sign of the dividend (and unsigned values wrap around instead), so `(me - 1) % n` is not the previous rank on rank 0; write `(me + n - 1) % n`", eagle_ir::at(.loc.as_deref()))]
    NegativePeer {
        /// Function.
        function: String,
        /// The op, as IR text.
        op: String,
        /// The op's Rust source location, when known.
        loc: Option<Box<eagle_ir::Loc>>,
        /// Lowest peer value.
        lo: i128,
        /// Highest peer value.
        hi: i128,
    },
    /// A peer or device rank that can reach the world size or beyond.
    #[error("function `{function}`, op `{op}`{}: the {what} spans {lo}..={hi} but the world has ranks 0..{world_size}; reduce it modulo the world size (`% n`)", eagle_ir::at(.loc.as_deref()))]
    RankOutOfRange {
        /// Function.
        function: String,
        /// The op, as IR text.
        op: String,
        /// The op's Rust source location, when known.
        loc: Option<Box<eagle_ir::Loc>>,
        /// `peer` or `device`.
        what: String,
        /// Lowest value.
        lo: i128,
        /// Highest value.
        hi: i128,
        /// The world size.
        world_size: u64,
    },
    /// A collective whose buffers do not fit the world size.
    #[error("function `{function}`, op `{op}`{}: {message}", eagle_ir::at(.loc.as_deref()))]
    CollectiveShape {
        /// Function.
        function: String,
        /// The collective.
        op: String,
        /// The op's Rust source location, when known.
        loc: Option<Box<eagle_ir::Loc>>,
        /// What was expected, what was found, and the fix.
        message: String,
    },
    /// A rank group (`group(ctx, [grid], axis)`) whose grid does not hold the world, a group
    /// of a group, or a group passed where only the world's context may go (a kernel call).
    #[error("function `{function}`, op `{op}`{}: {message}", eagle_ir::at(.loc.as_deref()))]
    Group {
        /// Function.
        function: String,
        /// The op, as its keyword (`group`, `call`).
        op: String,
        /// The op's Rust source location, when known.
        loc: Option<Box<eagle_ir::Loc>>,
        /// What was expected, what was found, and the fix.
        message: String,
    },
    /// A buffer or tile too large for the target.
    #[error("function `{function}`: {what} of type `{ty}` needs {bytes} bytes, more than the limit of {limit} bytes; {fix}")]
    TooLarge {
        /// Function.
        function: String,
        /// `a tile` or `a tensor`.
        what: String,
        /// The type, bound.
        ty: String,
        /// Bytes needed (`u64::MAX` when the count overflows).
        bytes: u64,
        /// The limit.
        limit: u64,
        /// What to do instead.
        fix: String,
    },
    /// A world size that cannot run: 0, or more than [`crate::MAX_WORLD_SIZE`].
    #[error("world size {0} is invalid; {fix}", fix = world_size_fix(*.0))]
    BadWorldSize(u64),
    /// The specialized module breaks a verifier rule (for example argument shapes that differ
    /// once dims are bound). `bound` lists the bindings and where each came from
    /// (` (NR = 2 from the world size, S = 3 from argument `x`)`) where the launch knows them,
    /// else it is empty.
    #[error("after binding dims{bound}: {error}")]
    Verify {
        /// The verifier's error.
        error: IrError,
        /// The bindings, with a leading space, or empty.
        bound: String,
    },
}

impl From<IrError> for SpecializeError {
    fn from(error: IrError) -> Self {
        SpecializeError::Verify {
            error,
            bound: String::new(),
        }
    }
}

/// Errors of a backend.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodegenError {
    /// Specialization failed.
    #[error(transparent)]
    Specialize(Box<SpecializeError>),
    /// The generic module is invalid.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// The root function is missing.
    #[error("function `{0}` is not in the module")]
    NoSuchFunction(String),
    /// A construct the backend cannot lower.
    #[error("{backend} backend: function `{function}`: {message}")]
    Unsupported {
        /// Backend name.
        backend: &'static str,
        /// Function.
        function: String,
        /// What is unsupported and what to do instead.
        message: String,
    },
    /// Cranelift rejected the generated code (a compiler bug: please report it).
    #[error("cranelift failed on function `{function}`: {message}")]
    Cranelift {
        /// Function.
        function: String,
        /// Cranelift's message.
        message: String,
    },
    /// NVRTC (the CUDA runtime compiler) could not be loaded.
    #[error("NVRTC was not found ({detail}): the cuda platform compiles kernels at run time with NVRTC; install the CUDA toolkit (or `pip install nvidia-cuda-nvrtc-cu12`) and put its `lib` folder on LD_LIBRARY_PATH, or run on `-p sim`")]
    NvrtcUnavailable {
        /// What was missing.
        detail: String,
    },
    /// NVRTC rejected the emitted CUDA C (a compiler bug: please report it with the log).
    #[error("NVRTC rejected the CUDA C of kernel(s) {kernels} for {arch}:\n{log}")]
    Nvrtc {
        /// The entry points of the translation unit.
        kernels: String,
        /// The virtual architecture compiled for (`compute_90`).
        arch: String,
        /// NVRTC's log.
        log: String,
    },
}

impl From<SpecializeError> for CodegenError {
    fn from(e: SpecializeError) -> Self {
        CodegenError::Specialize(Box::new(e))
    }
}

/// The fix of [`SpecializeError::BadWorldSize`].
fn world_size_fix(p: u64) -> String {
    if p == 0 {
        "run on at least one device (`-d 0`)".to_string()
    } else {
        format!("the largest world size is {} ranks", crate::MAX_WORLD_SIZE)
    }
}

/// How a host function's argument can carry the unbound dim `name`, for
/// [`SpecializeError::UnboundDim`]'s message.
fn unbound_example(name: &str) -> String {
    if name == "NR" {
        "for example `x: Tensor<f32, NR, ...>`, one row per rank".into()
    } else {
        format!(
            "for example `w: Tensor<f32, {name}, ...>`, or `x: Tensor<f32, {{ NR / {name} }}, {name}, ...>` for the ranks of a grid"
        )
    }
}
