//! The CUDA backend: a specialized module emitted as CUDA C, compiled by NVRTC at run time for
//! the device's architecture (a cubin; PTX for plugins) by the runtime's `cuda` platform.
//!
//! Execution model of the emitted code:
//! - A **per-device program** runs as one thread block of `EG_NT` ([`BLOCK_THREADS`]) threads
//!   per rank. Scalar code runs in every thread with identical values, so control flow is
//!   uniform across the block; the elements of a tile are striped over the threads (element `i`
//!   lives in thread `i % EG_NT`, slot `i / EG_NT`), so elementwise tile math needs no
//!   shared memory. Every op that writes memory is preceded and followed by `__syncthreads()`
//!   (no thread writes what another has yet to read, and all see the write after); single writes,
//!   signals and barriers are done by thread 0 and their status is broadcast with
//!   `__syncthreads_or`, so a failure leaves the block together.
//! - A **compute kernel** is a `__device__` function called in the caller's mode.
//! - A **sample kernel** runs one sample per thread (`<name>__samples`, grid-stride over
//!   `lo..hi`); a mapreduce runs one thread per row of [`ROW`] samples in sample order
//!   (`<name>__rows`), into per-row partials that the host folds in row order, as on the CPU,
//!   so the result is bit-identical to the CPU backend's.
//! - Windows are tables of one base address per rank (memory every device can address); put,
//!   get, remote loads and stores are plain loads and stores through the peer's base, notify is
//!   a system-scope atomic after a system fence (release), wait spins on a volatile load then
//!   fences (acquire), and the barrier needs no atomics (rank r alone writes its arrival count,
//!   then waits for every count to catch up). Waits and barriers give up after the run's wait
//!   timeout and when another rank has failed (each rank has its own failure record).
//! - Integer arithmetic wraps, `/` and `%` check for zero, float-to-int casts saturate (Rust
//!   `as`), `min`/`max` on floats return the canonical NaN when either side is NaN: the CPU
//!   backend's semantics. Contraction is off (`--fmad=false` at compile time), so float results
//!   match the CPU bit for bit except `exp`, which uses CUDA's `exp`/`expf` (within 2 ulp), and
//!   the bits of NaNs from other arithmetic.
//!
//! Every entry point is `extern "C" __global__ void NAME(const eg_rt* rt, const unsigned long
//! long* slots)`: `slots` holds one 8-byte slot per parameter, as in the CPU ABI (a tensor's
//! device address, a window's table address, a scalar's bits in the low bytes).

use crate::error::CodegenError;
use crate::Specialized;
use eagle_ir::{
    print_op, BinOp, Block, CmpOp, Const, DType, Defs, Function, FunctionFacts, Level, NotifyOp,
    Op, OpKind, Type, UnOp, Value,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

mod tile;
pub use tile::MAX_SHARED_BYTES;

/// Threads of the block that runs one rank's per-device program on a GPU (the `EG_NT` macro
/// of the emitted source; the CUDA emulation compiles with [`EMULATED_BLOCK_THREADS`]).
pub const BLOCK_THREADS: u64 = 128;
/// `EG_NT` in the CUDA emulation: few host threads per block, still striping tiles.
pub const EMULATED_BLOCK_THREADS: u64 = 4;
/// Samples per mapreduce row ([`crate::abi::ROW`], the execution plan's row).
pub const ROW: u64 = crate::abi::ROW as u64;
/// Most bytes of tile storage (all tiles of a function, counted per thread) a per-device
/// program's thread may hold: tiles live in registers or local memory, and a block mode thread
/// holds `1/EG_NT` of each tile.
pub const MAX_TILE_BYTES_PER_THREAD: u64 = 64 << 10;
/// The same bound in thread mode (sample kernels): thousands of threads each hold whole tiles,
/// and the driver reserves local memory for every resident thread.
pub const MAX_TILE_BYTES_PER_SAMPLE_THREAD: u64 = 16 << 10;

/// Reserved fault sites (negative) reported by the prelude's waits and barrier.
pub mod site {
    /// A wait exceeded the run's wait timeout (`a` = signal value seen, `b` = expected).
    pub const WAIT_TIMEOUT: i32 = -1;
    /// A barrier exceeded the run's wait timeout (`a` = the rank that did not arrive, `b` = the
    /// barrier's number in the run).
    pub const BARRIER_TIMEOUT: i32 = -2;
    /// Another rank failed, so this one stopped waiting.
    pub const ABORTED: i32 = -3;
}

/// What kind of launch an entry point expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A per-device program: one block of [`BLOCK_THREADS`] threads; slots = its parameters
    /// (the `ctx` slot unused).
    Device,
    /// A sample kernel, one thread per sample: slots = `lo, hi`, then the planes.
    Samples,
    /// A mapreduce sample kernel, one thread per row: slots = `row_lo, row_hi, n`, then the
    /// planes, each reduction output pointing at `row_hi - row_lo` partials of its size.
    Rows,
}

/// One `__global__` entry point of the emitted source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The IR function it runs.
    pub function: String,
    /// The `extern "C"` symbol to load.
    pub symbol: String,
    /// How it is launched.
    pub kind: EntryKind,
}

/// CUDA C of one specialized module.
#[derive(Debug, Clone)]
pub struct CudaCode {
    /// The whole translation unit (prelude included); no `#include`s, so NVRTC needs no
    /// headers.
    pub source: String,
    /// Fault table: the message of each run-time check, by site index, with `{a}` and `{b}`
    /// replaced by the offending value and its limit (as the CPU backend's).
    pub sites: Vec<String>,
    /// Entry points by symbol.
    pub entries: BTreeMap<String, Entry>,
    /// Whether some `notify` adds atomically (needs atomics on host memory when ranks span
    /// GPUs).
    pub atomic_signals: bool,
}

impl CudaCode {
    /// The entry point of `kind` that runs IR function `function`, if one was emitted (a
    /// sample kernel has a [`EntryKind::Samples`] entry and, for a mapreduce, a
    /// [`EntryKind::Rows`] one). Callers load its `symbol`; they never spell symbols.
    pub fn entry(&self, function: &str, kind: EntryKind) -> Option<&Entry> {
        self.entries
            .values()
            .find(|e| e.function == function && e.kind == kind)
    }
    /// The source without the prelude (what snapshots pin).
    pub fn kernels(&self) -> &str {
        self.source
            .split_once(PRELUDE_END)
            .map_or(&self.source[..], |(_, k)| k.trim_start())
    }
    /// The message of fault `site` with its values filled in.
    pub fn fault_message(&self, site: i32, a: i64, b: i64) -> String {
        match site {
            site::WAIT_TIMEOUT => format!(
                "a wait timed out: the signal held {a}, waiting for {b}; check that a peer notifies it (run on `-p sim` to get the deadlock report)"
            ),
            site::BARRIER_TIMEOUT => format!(
                "a barrier timed out waiting for rank {a} to arrive (barrier {b} of this run); run on `-p sim` to see what it waits for"
            ),
            site::ABORTED => "stopped because another rank failed".into(),
            s => self
                .sites
                .get(s as usize)
                .map(|m| m.replace("{a}", &a.to_string()).replace("{b}", &b.to_string()))
                .unwrap_or_else(|| format!("run-time check {s} failed ({a}, {b})")),
        }
    }
}

const PRELUDE_END: &str = "// ---- end of prelude ----";

/// CUDA built-ins for a host C++20 compiler, so that the emitted CUDA C can run on the CPU (one
/// OS thread per GPU thread, `__syncthreads` a barrier per block): `#include` it before the
/// source. The runtime's CUDA emulation uses it to check generated code on machines without a
/// GPU. `eg_emu_launch(kernel, grid, block, rt, slots)` runs one launch to completion.
pub const HOST_SHIM: &str = include_str!("host_shim.h");

/// The fixed part of every translation unit: the runtime record, failure reporting, waits,
/// the barrier and the Rust-semantics helpers.
pub const PRELUDE: &str = include_str!("prelude.cuh");

fn ctype(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::I16 => "short",
        // `f16`/`bf16` are held as their bit patterns: specialization widens every
        // computation on them to `float` (`eagle_ir::narrow`).
        DType::U16 | DType::F16 | DType::BF16 => "unsigned short",
        DType::I32 => "int",
        DType::I64 | DType::Index => "long long",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long long",
        DType::F32 => "float",
        DType::F64 => "double",
    }
}

/// The unsigned type of the same width (for wrapping arithmetic on signed values).
fn utype(d: DType) -> &'static str {
    match d {
        DType::I32 | DType::U32 => "unsigned int",
        _ => "unsigned long long",
    }
}

fn literal(c: Const, d: DType) -> String {
    match (c, d) {
        (Const::Bool(b), _) => b.to_string(),
        (Const::Int(i), DType::Bool) => (i != 0).to_string(),
        (Const::Int(i), DType::F32) => literal(Const::F32(i as f32), d),
        (Const::Int(i), DType::F64) => literal(Const::F64(i as f64), d),
        (Const::Int(i), DType::I32) if i == i128::from(i32::MIN) => "(-2147483647 - 1)".into(),
        (Const::Int(i), DType::I32) => i.to_string(),
        (Const::Int(i), DType::U32) => format!("{}u", i as u32),
        (Const::Int(i), DType::U64) => format!("{}ull", i as u64),
        (Const::Int(i), _) if i == i128::from(i64::MIN) => "(-9223372036854775807LL - 1)".into(),
        (Const::Int(i), _) => format!("{}LL", i as i64),
        (Const::F32(x), _) => {
            if x.is_finite() {
                let t = format!("{x:?}");
                let t = if t.contains(['.', 'e', 'E']) {
                    t
                } else {
                    format!("{t}.0")
                };
                format!("{t}f")
            } else {
                format!("__int_as_float({:#010x})", x.to_bits())
            }
        }
        (Const::F64(x), _) => {
            if x.is_finite() {
                let t = format!("{x:?}");
                if t.contains(['.', 'e', 'E']) {
                    t
                } else {
                    format!("{t}.0")
                }
            } else {
                format!("__longlong_as_double({:#018x}LL)", x.to_bits())
            }
        }
    }
}

/// How the code of a function runs: striped over a block, or one thread alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Block,
    Thread,
}

impl Mode {
    fn threads(self) -> u64 {
        match self {
            Mode::Block => BLOCK_THREADS,
            Mode::Thread => 1,
        }
    }
    fn suffix(self) -> &'static str {
        match self {
            Mode::Block => "",
            Mode::Thread => "__t",
        }
    }
}

/// Emits CUDA C for every per-device, compute and sample function of a specialized module.
/// Execution-plan wrappers (`__plan_*`) are skipped: the sample entries replace them. An
/// offset or index is bounds-checked at run time unless it is a constant or `spec.facts`
/// proves it in bounds (the rule the CPU backend follows).
///
/// # Errors
/// [`CodegenError::Unsupported`] (backend `cuda`) for a construct the backend cannot emit: a
/// symbolic shape left unbound, an unlowered collective, a tile too large for one thread, a
/// tile or context passed to a call.
pub fn emit_module(spec: &Specialized) -> Result<CudaCode, CodegenError> {
    let m = &spec.module;
    // Values are renumbered as the IR text numbers them, so `v7` in the CUDA C is `%7` in the
    // specialized IR.
    let canon: Vec<(Function, FunctionFacts)> = m
        .functions
        .iter()
        .filter(|f| f.level != Level::Host && !f.name.starts_with("__plan_"))
        .map(|f| canonical(f, spec.facts.function(&f.name)))
        .collect();
    let funcs: Vec<&Function> = canon.iter().map(|(f, _)| f).collect();
    // Which compute functions each mode needs: block mode from per-device programs, thread
    // mode from sample kernels (transitively).
    let mut need: BTreeSet<(String, bool)> = BTreeSet::new();
    let mut stack: Vec<(String, bool)> = funcs
        .iter()
        .filter(|f| f.level != Level::Compute)
        .map(|f| (f.name.clone(), f.level == Level::Sample))
        .collect();
    while let Some((name, thread)) = stack.pop() {
        if !need.insert((name.clone(), thread)) {
            continue;
        }
        if let Some(f) = m.function(&name) {
            for c in callees(&f.body) {
                stack.push((c, thread));
            }
        }
    }
    for f in &funcs {
        if f.level == Level::Compute && !need.iter().any(|(n, _)| n == &f.name) {
            need.insert((f.name.clone(), false));
        }
    }
    let mut out = String::new();
    out.push_str(&crate::abi::c_defines());
    out.push_str(PRELUDE);
    out.push_str(&crate::abi::c_layout_checks());
    out.push_str(PRELUDE_END);
    out.push('\n');
    // Where the block's shared scratch is declared, once its size (the most any function
    // stages) is known.
    let shared_at = out.len();
    let mut shared_max = 0u64;
    let mut sites = vec![];
    let mut entries = BTreeMap::new();
    let mut atomic_signals = false;
    // Callees come before callers in a module, so definition order works for C.
    for (f, facts) in &canon {
        let defs = Defs::of(f);
        for mode in [Mode::Block, Mode::Thread] {
            if !need.contains(&(f.name.clone(), mode == Mode::Thread)) {
                continue;
            }
            let mut e = Emitter {
                f,
                facts,
                defs: &defs,
                mode,
                sites: &mut sites,
                out: String::new(),
                depth: 1,
                atomic_signals: false,
                tile_bytes: 0,
                live_tiles: vec![],
                last_use: tile_last_uses(f),
                uses: crate::passes::fusion::use_counts(&f.body),
                fused: HashMap::new(),
                pos: 0,
                checked: vec![Default::default()],
                shared_bytes: 0,
            };
            e.function()?;
            shared_max = shared_max.max(e.shared_bytes);
            atomic_signals |= e.atomic_signals;
            out.push('\n');
            out.push_str(&e.out);
        }
        match f.level {
            Level::Device => {
                out.push('\n');
                out.push_str(&device_entry(f)?);
                entries.insert(
                    f.name.clone(),
                    Entry {
                        function: f.name.clone(),
                        symbol: f.name.clone(),
                        kind: EntryKind::Device,
                    },
                );
            }
            Level::Sample => {
                out.push('\n');
                let (text, kinds) = sample_entries(f)?;
                out.push_str(&text);
                for (sym, kind) in kinds {
                    entries.insert(
                        sym.clone(),
                        Entry {
                            function: f.name.clone(),
                            symbol: sym,
                            kind,
                        },
                    );
                }
            }
            _ => {}
        }
    }
    if shared_max > 0 {
        out.insert_str(shared_at, &format!("EG_SHARED_BLOCK({shared_max})\n"));
    }
    Ok(CudaCode {
        source: out,
        sites,
        entries,
        atomic_signals,
    })
}

/// `f` with every value renamed to its number in the IR text.
fn canonical(f: &Function, facts: &FunctionFacts) -> (Function, FunctionFacts) {
    let nums = eagle_ir::value_numbers(f);
    let mut rename = |v: Value| Value(nums.get(&v).map_or(v.0, |&n| n as u32));
    let mut values = vec![Type::Ctx; nums.len()];
    for (v, &n) in &nums {
        values[n] = f.ty(*v).clone();
    }
    let facts = facts.renamed(&mut |v| nums.get(&v).map(|&n| Value(n as u32)));
    let f = Function {
        name: f.name.clone(),
        level: f.level,
        params: f
            .params
            .iter()
            .map(|p| eagle_ir::Param {
                name: p.name.clone(),
                value: rename(p.value),
                out: p.out,
            })
            .collect(),
        values,
        body: f.body.map_values(&mut rename),
    };
    (f, facts)
}

fn callees(b: &Block) -> Vec<String> {
    let mut v = vec![];
    for op in &b.ops {
        match &op.kind {
            OpKind::Call { callee, .. } => v.push(callee.clone()),
            OpKind::For { body, .. } => v.extend(callees(body)),
            OpKind::If {
                then_body,
                else_body,
                ..
            } => {
                v.extend(callees(then_body));
                v.extend(callees(else_body));
            }
            _ => {}
        }
    }
    v
}

fn unsupported(f: &Function, msg: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        backend: "cuda",
        function: f.name.clone(),
        message: msg.into(),
    }
}

/// The C declaration that unpacks slot `k` into parameter value `v` of type `t`, or `None` for
/// a `ctx` parameter.
fn unpack(f: &Function, v: Value, t: &Type, slot: &str) -> Result<Option<String>, CodegenError> {
    Ok(match t {
        Type::Ctx => None,
        Type::Tensor(_, d) => Some(format!("{}* v{} = ({}*){slot};", ctype(*d), v.0, ctype(*d))),
        Type::Window(..) => Some(format!("eg_win v{} = {{(char* const*){slot}, 0}};", v.0)),
        Type::Scalar(d) => Some(format!(
            "{} v{} = {};",
            ctype(*d),
            v.0,
            match d {
                DType::Bool => format!("({slot} & 1) != 0"),
                DType::F32 => format!("__int_as_float((int){slot})"),
                DType::F64 => format!("__longlong_as_double((long long){slot})"),
                d => format!("({}){slot}", ctype(*d)),
            }
        )),
        other => {
            return Err(unsupported(
                f,
                format!("a parameter of type `{other}` cannot be passed to a kernel"),
            ))
        }
    })
}

/// The arguments a function body is called with: its non-ctx parameters, by value name.
fn call_params(f: &Function) -> Vec<String> {
    f.params
        .iter()
        .filter(|p| *f.ty(p.value) != Type::Ctx)
        .map(|p| format!("v{}", p.value.0))
        .collect()
}

fn device_entry(f: &Function) -> Result<String, CodegenError> {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void __launch_bounds__(EG_NT) {}(const eg_rt* rt, const unsigned long long* slots) {{",
        f.name
    );
    for (k, p) in f.params.iter().enumerate() {
        if let Some(d) = unpack(f, p.value, f.ty(p.value), &format!("slots[{k}]"))? {
            let _ = writeln!(s, "  {d}");
        }
    }
    let args = std::iter::once("rt".to_string())
        .chain(call_params(f))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(s, "  (void)eg_f_{}({args});\n}}", f.name);
    Ok(s)
}

/// The entry of sample kernel `f`: `<name>__rows` for a mapreduce (the only safe way to run
/// one on many threads), `<name>__samples` otherwise.
fn sample_entries(f: &Function) -> Result<(String, Vec<(String, EntryKind)>), CodegenError> {
    let mut s = String::new();
    let reductions = match eagle_ir::access_category(f) {
        Ok(info) if matches!(info.category, eagle_ir::AccessCategory::Mapreduce(_)) => {
            Some(info.reduction_outputs)
        }
        _ => None,
    };
    let planes: Vec<(usize, &eagle_ir::Param)> = f.params.iter().enumerate().skip(1).collect();
    let unpack_planes = |s: &mut String, first: usize| -> Result<(), CodegenError> {
        for (k, (_, p)) in planes.iter().enumerate() {
            if let Some(d) = unpack(f, p.value, f.ty(p.value), &format!("slots[{}]", first + k))? {
                let _ = writeln!(s, "  {d}");
            }
        }
        Ok(())
    };
    let sv = f.params.first().map(|p| p.value.0).unwrap_or(0);
    let args = |sample: &str| {
        std::iter::once("rt".to_string())
            .chain(std::iter::once(sample.to_string()))
            .chain(call_params(f).into_iter().skip(1))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(reductions) = reductions else {
        let _ = writeln!(
            s,
            "extern \"C\" __global__ void {}__samples(const eg_rt* rt, const unsigned long long* slots) {{",
            f.name
        );
        let _ = writeln!(
            s,
            "  const long long lo = (long long)slots[0], hi = (long long)slots[1];"
        );
        unpack_planes(&mut s, 2)?;
        let _ = writeln!(
            s,
            "  for (long long v{sv} = lo + (long long)blockIdx.x * blockDim.x + threadIdx.x; v{sv} < hi; v{sv} += (long long)gridDim.x * blockDim.x) {{"
        );
        let _ = writeln!(
            s,
            "    if (eg_f_{}__t({})) return;\n  }}\n}}",
            f.name,
            args(&format!("v{sv}"))
        );
        return Ok((
            s,
            vec![(format!("{}__samples", f.name), EntryKind::Samples)],
        ));
    };
    // A mapreduce: each thread forms the partial of one row, in sample order, into its own
    // slice of each reduction output's partials.
    let _ = writeln!(
        s,
        "extern \"C\" __global__ void {}__rows(const eg_rt* rt, const unsigned long long* slots) {{",
        f.name
    );
    let _ = writeln!(
        s,
        "  const long long row_lo = (long long)slots[0], row_hi = (long long)slots[1], n = (long long)slots[2];"
    );
    let _ = writeln!(
        s,
        "  for (long long row = row_lo + (long long)blockIdx.x * blockDim.x + threadIdx.x; row < row_hi; row += (long long)gridDim.x * blockDim.x) {{"
    );
    for (k, (i, p)) in planes.iter().enumerate() {
        let t = f.ty(p.value);
        if let Some(d) = unpack(f, p.value, t, &format!("slots[{}]", 3 + k))? {
            let _ = writeln!(s, "    {d}");
        }
        if reductions.contains(i) {
            let numel = t.shape().and_then(|s| s.numel()).unwrap_or(0);
            let _ = writeln!(
                s,
                "    v{v} += (row - row_lo) * {numel}LL; // this row's partial",
                v = p.value.0
            );
        }
    }
    let _ = writeln!(
        s,
        "    const long long end = row * {ROW} + {ROW} < n ? row * {ROW} + {ROW} : n;"
    );
    let _ = writeln!(
        s,
        "    for (long long v{sv} = row * {ROW}; v{sv} < end; ++v{sv}) {{\n      if (eg_f_{}__t({})) return;\n    }}\n  }}\n}}",
        f.name,
        args(&format!("v{sv}"))
    );
    Ok((s, vec![(format!("{}__rows", f.name), EntryKind::Rows)]))
}

struct Emitter<'a> {
    f: &'a Function,
    /// What specialization proved about `f`'s values (ranges of offsets).
    facts: &'a FunctionFacts,
    /// The op defining each value of `f`.
    defs: &'a Defs<'a>,
    mode: Mode,
    sites: &'a mut Vec<String>,
    out: String,
    depth: usize,
    /// Some `notify` adds atomically.
    atomic_signals: bool,
    /// Bytes of tile storage live at the op being emitted, per thread.
    tile_bytes: u64,
    /// The declared tiles still live: (last use, bytes per thread).
    live_tiles: Vec<(usize, u64)>,
    /// Where each value is used last ([`tile_last_uses`]).
    last_use: HashMap<Value, usize>,
    /// The preorder position of the op being emitted.
    pos: usize,
    /// How many times each value is used.
    uses: HashMap<Value, usize>,
    /// Fused elementwise tile results (`crate::passes::fusion`): computed per element, as
    /// `e<N>`, inside their group root's loop, with the op that computes them.
    fused: HashMap<Value, Op>,
    /// Conditions already checked in each enclosing C scope: values are SSA, so a check that
    /// passed holds for the rest of its scope.
    checked: Vec<std::collections::HashSet<String>>,
    /// Bytes of shared memory the function's tile ops stage at most (block mode).
    shared_bytes: u64,
}

impl Emitter<'_> {
    fn err(&self, msg: impl Into<String>) -> CodegenError {
        unsupported(self.f, msg)
    }
    fn line(&mut self, s: impl AsRef<str>) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s.as_ref());
        self.out.push('\n');
    }
    fn ty(&self, v: Value) -> &Type {
        self.f.ty(v)
    }
    fn v(&self, v: Value) -> String {
        format!("v{}", v.0)
    }
    /// The op as a run-time check's message names it (text and source location).
    fn site_op(&self, op: &Op) -> String {
        crate::sites::name_op(&self.op_text(op), op.loc.as_ref())
    }

    fn op_text(&self, op: &Op) -> String {
        print_op(self.f, op)
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    }
    fn shape(&self, v: Value) -> Result<Vec<u64>, CodegenError> {
        self.ty(v).shape().and_then(|s| s.consts()).ok_or_else(|| {
            self.err(format!(
                "value v{} has an unbound shape; specialize first",
                v.0
            ))
        })
    }
    fn dtype(&self, v: Value) -> Result<DType, CodegenError> {
        self.ty(v)
            .dtype()
            .ok_or_else(|| self.err(format!("value v{} has no dtype", v.0)))
    }
    fn is_tile(&self, v: Value) -> bool {
        matches!(self.ty(v), Type::Tile(..))
    }
    fn sync(&mut self) {
        // Two barriers in a row (comments between them aside) are one.
        let last = self
            .out
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("//"));
        if self.mode == Mode::Block && last != Some("__syncthreads();") {
            self.line("__syncthreads();");
        }
    }
    /// Emits a nested block (a loop body or a branch) in its own check scope.
    fn scoped(&mut self, b: &Block) -> Result<(), CodegenError> {
        self.checked.push(Default::default());
        let r = self.block(b);
        self.checked.pop();
        r
    }
    /// A site message as the user knows the place: a sample kernel is named as one (as the
    /// execution plan names it on the CPU).
    fn placed(&self, msg: String) -> String {
        if self.f.level == Level::Sample {
            msg.replacen(
                &format!("function `{}`", self.f.name),
                &format!("sample kernel `{}`", self.f.name),
                1,
            )
        } else {
            msg
        }
    }
    /// Registers a fault site and emits `if (cond) fail`. The condition is uniform (scalar).
    fn fault_if(&mut self, cond: &str, msg: String, a: &str, b: &str) {
        if self.checked.iter().any(|c| c.contains(cond)) {
            return;
        }
        if let Some(top) = self.checked.last_mut() {
            top.insert(cond.to_string());
        }
        let site = self.sites.len();
        self.sites.push(self.placed(msg));
        match self.mode {
            Mode::Block => self.line(format!(
                "if ({cond}) {{ if (threadIdx.x == 0) eg_fail(rt, {site}, (long long)({a}), (long long)({b})); return 1; }}"
            )),
            Mode::Thread => self.line(format!(
                "if ({cond}) return eg_fail(rt, {site}, (long long)({a}), (long long)({b}));"
            )),
        }
    }
    /// The constant `v` is defined as, if any (a `Dim` gives its bound extent).
    fn const_of(&self, v: Value) -> Option<Const> {
        match self.def_of(v)? {
            OpKind::Const(c) => Some(*c),
            OpKind::Dim(d) => d.as_const().map(|n| Const::Int(i128::from(n))),
            _ => None,
        }
    }
    /// The op that defines `v`, if an op does (not a parameter or loop variable).
    fn def_of(&self, v: Value) -> Option<&OpKind> {
        self.defs.kind(v)
    }

    fn function(&mut self) -> Result<(), CodegenError> {
        let f = self.f;
        let mut params = vec!["const eg_rt* rt".to_string()];
        for p in &f.params {
            let t = f.ty(p.value);
            params.push(match t {
                Type::Ctx => continue,
                Type::Tensor(_, d) => format!("{}* v{}", ctype(*d), p.value.0),
                Type::Window(..) => format!("eg_win v{}", p.value.0),
                Type::Scalar(d) => format!("{} v{}", ctype(*d), p.value.0),
                other @ Type::Tile(..) => return Err(self.err(format!("parameter `{}` of type `{other}`: the CUDA backend does not pass tiles to compute kernels (a tile is striped over a block); pass a tensor and `load` the tile in the callee, or run on the CPU (`sim`, `cpu`)", p.name))),
                other => return Err(self.err(format!("parameter `{}` of type `{other}`", p.name))),
            });
        }
        let _ = writeln!(
            self.out,
            "// {} function `{}`, {} mode",
            f.level.name(),
            f.name,
            match self.mode {
                Mode::Block => "block",
                Mode::Thread => "thread",
            }
        );
        let _ = writeln!(
            self.out,
            "__device__ int eg_f_{}{}({}) {{",
            f.name,
            self.mode.suffix(),
            params.join(", ")
        );
        if self.mode == Mode::Block {
            self.line("const int lane = threadIdx.x; (void)lane;");
        }
        let body_at = self.out.len();
        self.block(&f.body)?;
        if self.shared_bytes > 0 {
            // The staging scratch of the tile ops (see `tile.rs`).
            self.out
                .insert_str(body_at, &format!("  EG_SHARED({});\n", self.shared_bytes));
        }
        self.line("return 0;");
        self.out.push_str("}\n");
        Ok(())
    }

    fn block(&mut self, b: &Block) -> Result<(), CodegenError> {
        // Integer division stays unfused: its zero check runs per tile.
        let roots = crate::passes::fusion::fusion_roots(self.f, &b.ops, &self.uses, |op| {
            !matches!(&op.kind, OpKind::Binary(BinOp::Div | BinOp::Rem, ..)
                if op.result.and_then(|r| self.f.ty(r).dtype()).is_some_and(|d| !d.is_float()))
        });
        for op in &b.ops {
            if let Some(r) = op.result.filter(|r| roots.contains_key(r)) {
                self.fused.insert(r, op.clone());
            }
        }
        for op in &b.ops {
            self.op(op)?;
        }
        Ok(())
    }

    /// Slots per thread of a tile of `n` elements.
    fn slots(&self, n: u64) -> u64 {
        n.div_ceil(self.mode.threads()).max(1)
    }

    /// Opens a loop over this thread's elements of a tile of `n` elements; inside, `i` is the
    /// element index and `k` the slot. Close with [`Emitter::close`].
    fn open_tile_loop(&mut self, n: u64) {
        match self.mode {
            Mode::Block => {
                self.line(format!("for (int k = 0; k < EG_SLOTS({n}); ++k) {{"));
                self.depth += 1;
                self.line("const long long i = lane + k * (long long)EG_NT;");
                self.line(format!("if (i >= {n}) break;"));
            }
            Mode::Thread => {
                self.line(format!("for (int k = 0; k < {n}; ++k) {{"));
                self.depth += 1;
                self.line("const long long i = k;");
            }
        }
    }
    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }

    /// The expression of operand `v` inside a tile loop (slot `k`) or as a scalar.
    fn at(&self, v: Value) -> String {
        if self.fused.contains_key(&v) {
            format!("e{}", v.0)
        } else if self.is_tile(v) {
            format!("v{}[k]", v.0)
        } else {
            format!("v{}", v.0)
        }
    }

    /// The linear element offset, in `shape`, of tile element `i` (in a loop) placed at
    /// `offs` (C expressions per dim). `tile` gives the tile extents.
    fn tile_offset(shape: &[u64], tile: &[u64], offs: &[String]) -> String {
        let mut terms = vec![];
        let mut inner_tile = 1u64;
        let mut inner_shape = 1u64;
        let r = shape.len();
        let mut rev = vec![];
        for d in (0..r).rev() {
            let idx = if tile[d] == 1 {
                offs[d].clone()
            } else if inner_tile == 1 && d == r - 1 {
                format!("({} + i % {})", offs[d], tile[d])
            } else {
                format!("({} + i / {} % {})", offs[d], inner_tile, tile[d])
            };
            rev.push(if inner_shape == 1 {
                idx
            } else {
                format!("{idx} * {inner_shape}LL")
            });
            inner_tile *= tile[d];
            inner_shape *= shape[d];
        }
        terms.extend(rev.into_iter().rev());
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }

    /// Emits bounds checks for `offsets` of a tile `tile` in `shape` and returns them as C.
    fn offsets(
        &mut self,
        op: &Op,
        offsets: &[Value],
        shape: &[u64],
        tile: &[u64],
    ) -> Result<Vec<String>, CodegenError> {
        let mut out = vec![];
        for (d, &o) in offsets.iter().enumerate() {
            let x = self.v(o);
            let limit = shape[d].saturating_sub(tile[d]);
            if !self.facts.in_bounds(o, tile[d], shape[d]) {
                let msg =
                    crate::sites::offset(&self.f.name, &self.site_op(op), d, tile[d], shape[d]);
                self.fault_if(
                    &format!("(unsigned long long){x} > {limit}ull"),
                    msg,
                    &x,
                    &limit.to_string(),
                );
            }
            out.push(x);
        }
        Ok(out)
    }

    /// A C pointer expression to the elements of memory value `v` on `rank` (C expression;
    /// `None` = local).
    fn base(&self, v: Value, rank: Option<&str>) -> Result<String, CodegenError> {
        let d = ctype(self.dtype(v)?);
        match (self.ty(v), rank) {
            (Type::Tensor(..), None) => Ok(self.v(v)),
            (Type::Window(..), None) => Ok(format!("eg_at<{d}>({}, rt->rank)", self.v(v))),
            (Type::Window(..), Some(r)) => Ok(format!("eg_at<{d}>({}, {r})", self.v(v))),
            (t, _) => Err(self.err(format!("v{} of type `{t}` is not memory", v.0))),
        }
    }

    fn check_peer(&mut self, op: &Op, peer: Value) {
        // This rank is always in the world.
        if matches!(self.def_of(peer), Some(OpKind::Rank(_))) {
            return;
        }
        let p = self.v(peer);
        let msg = crate::sites::peer(&self.f.name, &self.site_op(op));
        self.fault_if(
            &format!("(unsigned long long){p} >= (unsigned long long)rt->nranks"),
            msg,
            &p,
            "rt->nranks",
        );
    }

    /// Declares the tile result `r` of `n` elements of dtype `d`.
    fn declare_tile(&mut self, r: Value, n: u64, d: DType) -> Result<(), CodegenError> {
        let (per_thread, limit, mode) = match self.mode {
            Mode::Block => (
                self.slots(n) * d.size() as u64,
                MAX_TILE_BYTES_PER_THREAD,
                "a per-device program's",
            ),
            Mode::Thread => (
                n * d.size() as u64,
                MAX_TILE_BYTES_PER_SAMPLE_THREAD,
                "a sample kernel's",
            ),
        };
        // Only tiles still live count: a long elementwise chain (an expanded math function)
        // holds a few tiles at a time, as the compiler's register allocation sees it.
        let pos = self.pos;
        self.live_tiles.retain(|(last, _)| *last >= pos);
        self.live_tiles
            .push((self.last_use.get(&r).copied().unwrap_or(pos), per_thread));
        self.tile_bytes = self.live_tiles.iter().map(|(_, b)| b).sum();
        if self.tile_bytes > limit {
            return Err(self.err(format!(
                "its tiles need {} bytes per GPU thread (this tile of {n} {} elements: {per_thread}), more than the {limit} {mode} thread may hold; use smaller tiles",
                self.tile_bytes,
                d.name(),
            )));
        }
        match self.mode {
            Mode::Block => self.line(format!("{} v{}[EG_SLOTS({n})];", ctype(d), r.0)),
            Mode::Thread => self.line(format!("{} v{}[{n}];", ctype(d), r.0)),
        }
        Ok(())
    }

    fn op(&mut self, op: &Op) -> Result<(), CodegenError> {
        self.pos += 1;
        if op.result.is_some_and(|r| self.fused.contains_key(&r)) {
            return Ok(()); // computed inside its group root's loop
        }
        let f = self.f;
        let res = op.result;
        let rty = res.map(|r| f.ty(r).clone());
        match &op.kind {
            OpKind::Const(c) => {
                let (Some(r), Some(Type::Scalar(d))) = (res, rty) else {
                    return Err(self.err("constant without a scalar type"));
                };
                self.line(format!("const {} v{} = {};", ctype(d), r.0, literal(*c, d)));
            }
            OpKind::Dim(d) => {
                let n = d
                    .as_const()
                    .ok_or_else(|| self.err(format!("dim `{d}` is unbound; specialize first")))?;
                if let Some(r) = res {
                    self.line(format!("const long long v{} = {n}LL;", r.0));
                }
            }
            OpKind::Rank(_) => {
                if let Some(r) = res {
                    self.line(format!("const long long v{} = rt->rank;", r.0));
                }
            }
            OpKind::Binary(..)
            | OpKind::Unary(..)
            | OpKind::Fma(..)
            | OpKind::Cmp(..)
            | OpKind::Select(..)
            | OpKind::Cast(..)
            | OpKind::Bitcast(..) => self.elementwise(op)?,
            OpKind::Slice { .. } | OpKind::Subview { .. } => self.emit_view(op)?,
            OpKind::Load { .. }
            | OpKind::RemoteLoad { .. }
            | OpKind::Store { .. }
            | OpKind::RemoteStore { .. } => self.emit_load_store(op)?,
            OpKind::Elem { .. } | OpKind::SetElem { .. } => self.emit_element(op)?,
            OpKind::Tile(..) => self.emit_tile(op)?,
            OpKind::Math(..) => {
                return Err(self.err(
                    "a math-library op reached the backend; specialize first (it expands math ops)",
                ))
            }
            OpKind::Put { .. }
            | OpKind::Get { .. }
            | OpKind::Notify { .. }
            | OpKind::Wait { .. }
            | OpKind::Barrier(_) => self.emit_signal(op)?,
            OpKind::Var(_)
            | OpKind::Read(_)
            | OpKind::Write(..)
            | OpKind::For { .. }
            | OpKind::If { .. }
            | OpKind::Call { .. } => self.emit_control(op)?,
            OpKind::WorldSize
            | OpKind::NRanks(_)
            | OpKind::Broadcast { .. }
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::Dispatch { .. }
            | OpKind::AllocWindowBuffer
            | OpKind::Window(_) => {
                return Err(self.err(crate::sites::not_specialized(&op.kind, &self.op_text(op))))
            }
        }
        Ok(())
    }

    /// Slices and sub-views.
    fn emit_view(&mut self, op: &Op) -> Result<(), CodegenError> {
        let f = self.f;
        let res = op.result;
        match &op.kind {
            OpKind::Slice { src, index } => {
                let Some(r) = res else { return Ok(()) };
                let dims = self.shape(*src)?;
                if !matches!(self.ty(*src), Type::Tensor(..)) {
                    return Err(self.err("slice of a window; use a subview"));
                }
                let inner: u64 = dims.iter().skip(1).product();
                let extent = dims.first().copied().unwrap_or(0);
                let x = self.v(*index);
                if !self.facts.in_bounds(*index, 1, extent) {
                    let msg = crate::sites::slice_index(&f.name, &self.site_op(op));
                    self.fault_if(
                        &format!("(unsigned long long){x} >= {extent}ull"),
                        msg,
                        &x,
                        &extent.to_string(),
                    );
                }
                let d = ctype(self.dtype(*src)?);
                self.line(format!(
                    "{d}* v{} = {} + {x} * {inner}LL;",
                    r.0,
                    self.v(*src)
                ));
            }
            OpKind::Subview { src, offset } => {
                let Some(r) = res else { return Ok(()) };
                let dims = self.shape(*src)?;
                let d = self.dtype(*src)?;
                let len = self.shape(r)?.first().copied().unwrap_or(0);
                let row: u64 = dims.iter().skip(1).product();
                let extent = dims.first().copied().unwrap_or(0);
                let x = self.v(*offset);
                if !self.facts.in_bounds(*offset, len, extent) {
                    let limit = extent.saturating_sub(len);
                    let msg = crate::sites::subview_offset(&f.name, &self.site_op(op), len, extent);
                    self.fault_if(
                        &format!("(unsigned long long){x} > {limit}ull"),
                        msg,
                        &x,
                        &limit.to_string(),
                    );
                }
                match self.ty(*src) {
                    Type::Tensor(..) => self.line(format!(
                        "{}* v{} = {} + {x} * {row}LL;",
                        ctype(d),
                        r.0,
                        self.v(*src)
                    )),
                    Type::Window(..) => self.line(format!(
                        "const eg_win v{} = {{{s}.t, {s}.off + {x} * {}LL}};",
                        r.0,
                        row * d.size() as u64,
                        s = self.v(*src)
                    )),
                    t => return Err(self.err(format!("subview of `{t}`"))),
                }
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_view`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// Local and remote tile loads and stores.
    fn emit_load_store(&mut self, op: &Op) -> Result<(), CodegenError> {
        let res = op.result;
        match &op.kind {
            OpKind::Load { src, offsets } | OpKind::RemoteLoad { src, offsets, .. } => {
                let Some(r) = res else { return Ok(()) };
                let tile = self.shape(r)?;
                let d = self.dtype(r)?;
                let shape = self.shape(*src)?;
                let peer = match &op.kind {
                    OpKind::RemoteLoad { peer, .. } => {
                        self.check_peer(op, *peer);
                        Some(self.v(*peer))
                    }
                    _ => None,
                };
                let offs = self.offsets(op, offsets, &shape, &tile)?;
                let base = self.base(*src, peer.as_deref())?;
                let n: u64 = tile.iter().product();
                self.line(format!("// {}", self.op_text(op)));
                self.declare_tile(r, n, d)?;
                self.line("{");
                self.depth += 1;
                self.line(format!("const {}* p = {base};", ctype(d)));
                self.open_tile_loop(n);
                let at = Self::tile_offset(&shape, &tile, &offs);
                self.line(format!("v{}[k] = p[{at}];", r.0));
                self.close();
                self.depth -= 1;
                self.line("}");
            }
            OpKind::Store {
                value,
                dst,
                offsets,
            }
            | OpKind::RemoteStore {
                value,
                dst,
                offsets,
                ..
            } => {
                let tile = self.shape(*value)?;
                let d = self.dtype(*value)?;
                let shape = self.shape(*dst)?;
                let peer = match &op.kind {
                    OpKind::RemoteStore { peer, .. } => {
                        self.check_peer(op, *peer);
                        Some(self.v(*peer))
                    }
                    _ => None,
                };
                let offs = self.offsets(op, offsets, &shape, &tile)?;
                let base = self.base(*dst, peer.as_deref())?;
                let n: u64 = tile.iter().product();
                self.line(format!("// {}", self.op_text(op)));
                // Every thread has read what it needs before any thread writes.
                self.sync();
                self.line("{");
                self.depth += 1;
                self.line(format!("{}* p = {base};", ctype(d)));
                self.open_tile_loop(n);
                let at = Self::tile_offset(&shape, &tile, &offs);
                self.line(format!("p[{at}] = v{}[k];", value.0));
                self.close();
                self.depth -= 1;
                self.line("}");
                self.sync();
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_load_store`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// Element reads and writes.
    fn emit_element(&mut self, op: &Op) -> Result<(), CodegenError> {
        let res = op.result;
        match &op.kind {
            OpKind::Elem { src, indices } => {
                let Some(r) = res else { return Ok(()) };
                let shape = self.shape(*src)?;
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, indices, &shape, &ones)?;
                let d = self.dtype(*src)?;
                let at = Self::linear(&shape, &idx);
                let base = self.base(*src, None)?;
                self.line(format!("const {} v{} = {base}[{at}];", ctype(d), r.0));
            }
            OpKind::SetElem {
                value,
                dst,
                indices,
            } => {
                let shape = self.shape(*dst)?;
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, indices, &shape, &ones)?;
                let at = Self::linear(&shape, &idx);
                let base = self.base(*dst, None)?;
                let x = self.v(*value);
                match self.mode {
                    Mode::Block => {
                        self.sync();
                        self.line(format!("if (lane == 0) {base}[{at}] = {x};"));
                        self.sync();
                    }
                    Mode::Thread => self.line(format!("{base}[{at}] = {x};")),
                }
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_element`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// Put, get, notify, wait and barrier.
    fn emit_signal(&mut self, op: &Op) -> Result<(), CodegenError> {
        match &op.kind {
            OpKind::Put { dst, peer, src } | OpKind::Get { dst, peer, src } => {
                let is_put = matches!(op.kind, OpKind::Put { .. });
                let (win, local) = if is_put { (*dst, *src) } else { (*src, *dst) };
                self.check_peer(op, *peer);
                let n = self.ty(win).shape().and_then(|s| s.numel()).unwrap_or(0);
                let d = ctype(self.dtype(win)?);
                let remote = self.base(win, Some(&self.v(*peer)))?;
                let local_p = self.base(local, None)?;
                let (to, from) = if is_put {
                    (remote, local_p)
                } else {
                    (local_p, remote)
                };
                self.line(format!("// {}", self.op_text(op)));
                self.sync();
                self.line("{");
                self.depth += 1;
                self.line(format!("{d}* to = {to};"));
                self.line(format!("const {d}* from = {from};"));
                match self.mode {
                    Mode::Block => self.line(format!(
                        "for (long long i = lane; i < {n}LL; i += EG_NT) to[i] = from[i];"
                    )),
                    Mode::Thread => self.line(format!(
                        "for (long long i = 0; i < {n}LL; ++i) to[i] = from[i];"
                    )),
                }
                self.depth -= 1;
                self.line("}");
                self.sync();
            }
            OpKind::Notify {
                signal,
                peer,
                offsets,
                value,
                op: nop,
            } => {
                let shape = self.shape(*signal)?;
                let d = self.dtype(*signal)?;
                self.check_peer(op, *peer);
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, offsets, &shape, &ones)?;
                let at = Self::linear(&shape, &idx);
                let u = utype(d);
                let p = format!("&eg_at<{u}>({}, {})[{at}]", self.v(*signal), self.v(*peer));
                let add = matches!(nop, NotifyOp::AtomicAdd);
                self.atomic_signals |= add;
                let call = format!("eg_signal({p}, ({u}){}, {add})", self.v(*value));
                self.line(format!("// {}", self.op_text(op)));
                match self.mode {
                    Mode::Block => {
                        self.sync();
                        self.line(format!("if (lane == 0) {call};"));
                        self.sync();
                    }
                    Mode::Thread => self.line(format!("{call};")),
                }
            }
            OpKind::Wait {
                signal,
                offsets,
                expected,
                cmp,
            } => {
                let shape = self.shape(*signal)?;
                let d = self.dtype(*signal)?;
                let ones = vec![1; shape.len()];
                let idx = self.offsets(op, offsets, &shape, &ones)?;
                let at = Self::linear(&shape, &idx);
                let t = ctype(d);
                let call = format!(
                    "eg_wait<{t}>(rt, &eg_at<{t}>({}, rt->rank)[{at}], ({t}){}, {})",
                    self.v(*signal),
                    self.v(*expected),
                    crate::abi::cmp_code(*cmp)
                );
                self.line(format!("// {}", self.op_text(op)));
                self.status_once(&call);
            }
            OpKind::Barrier(_) => {
                self.line(format!("// {}", self.op_text(op)));
                self.sync();
                self.status_once("eg_barrier(rt)");
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_signal`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// Variables, loops, branches and calls.
    fn emit_control(&mut self, op: &Op) -> Result<(), CodegenError> {
        let f = self.f;
        let res = op.result;
        let rty = res.map(|r| f.ty(r).clone());
        match &op.kind {
            OpKind::Var(init) => {
                let (Some(r), Some(Type::Ref(t))) = (res, rty) else {
                    return Err(self.err("var without a ref type"));
                };
                match *t {
                    // A tile variable is an array of this thread's slots; reads and writes
                    // copy the slots (each thread its own, so no synchronisation).
                    Type::Tile(s, d) => {
                        let n = s.numel().unwrap_or(0);
                        self.declare_tile(r, n, d)?;
                        self.copy_slots(r, *init, n);
                    }
                    t => {
                        let d = t.dtype().unwrap_or(DType::Index);
                        self.line(format!("{} v{} = {};", ctype(d), r.0, self.v(*init)));
                    }
                }
            }
            OpKind::Read(v) => match rty {
                Some(Type::Tile(s, d)) => {
                    let (Some(r), n) = (res, s.numel().unwrap_or(0)) else {
                        return Ok(());
                    };
                    self.declare_tile(r, n, d)?;
                    self.copy_slots(r, *v, n);
                }
                Some(Type::Scalar(d)) => {
                    if let Some(r) = res {
                        self.line(format!("const {} v{} = {};", ctype(d), r.0, self.v(*v)));
                    }
                }
                _ => {}
            },
            OpKind::Write(v, x) if self.is_tile(*x) => {
                let n = self.shape(*x)?.iter().product();
                self.copy_slots(*v, *x, n);
            }
            OpKind::Write(v, x) => self.line(format!("{} = {};", self.v(*v), self.v(*x))),
            OpKind::For { var, lo, hi, body } => {
                let v = self.v(*var);
                self.line(format!(
                    "for (long long {v} = {}; {v} < {}; ++{v}) {{",
                    self.v(*lo),
                    self.v(*hi)
                ));
                self.depth += 1;
                self.scoped(body)?;
                self.close();
            }
            OpKind::If {
                cond,
                then_body,
                else_body,
            } => {
                self.line(format!("if ({}) {{", self.v(*cond)));
                self.depth += 1;
                self.scoped(then_body)?;
                if else_body.ops.is_empty() {
                    self.close();
                } else {
                    self.depth -= 1;
                    self.line("} else {");
                    self.depth += 1;
                    self.scoped(else_body)?;
                    self.close();
                }
            }
            OpKind::Call { callee, args } => {
                let mut a = vec!["rt".to_string()];
                for x in args {
                    match self.ty(*x) {
                        Type::Ctx => {}
                        Type::Tile(..) => {
                            return Err(self.err(format!("a tile passed to `{callee}`")))
                        }
                        _ => a.push(self.v(*x)),
                    }
                }
                self.line(format!(
                    "if (eg_f_{callee}{}({})) return 1;",
                    self.mode.suffix(),
                    a.join(", ")
                ));
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not emitted by `emit_control`",
                    other.info().name
                )))
            }
        }
        Ok(())
    }

    /// `to[k] = from[k]` over this thread's slots of a tile of `n` elements.
    fn copy_slots(&mut self, to: Value, from: Value, n: u64) {
        self.open_tile_loop(n);
        self.line(format!("v{}[k] = v{}[k];", to.0, from.0));
        self.close();
    }

    /// Runs `call` (returning a status) once per block, on thread 0, and leaves the function
    /// on every thread when it failed.
    fn status_once(&mut self, call: &str) {
        match self.mode {
            Mode::Block => {
                self.line("{");
                self.depth += 1;
                self.line("int st = 0;");
                self.line(format!("if (lane == 0) st = {call};"));
                self.line("if (__syncthreads_or(st)) return 1;");
                self.depth -= 1;
                self.line("}");
            }
            Mode::Thread => self.line(format!("if ({call}) return 1;")),
        }
    }

    fn linear(shape: &[u64], idx: &[String]) -> String {
        let mut terms = vec![];
        let mut inner = 1u64;
        for d in (0..shape.len()).rev() {
            terms.push(if inner == 1 {
                idx[d].clone()
            } else {
                format!("{} * {inner}LL", idx[d])
            });
            inner *= shape[d];
        }
        terms.reverse();
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }

    /// Elementwise ops on scalars, or on tiles with scalars broadcast.
    /// The dtype an elementwise op computes in: its first operand's (a select's second).
    fn operand_dtype(&self, op: &Op, rd: DType) -> Result<DType, CodegenError> {
        if let OpKind::Select(_, a, _) = &op.kind {
            return self.dtype(*a);
        }
        Ok(op
            .kind
            .operands()
            .first()
            .map(|&v| self.dtype(v))
            .transpose()?
            .unwrap_or(rd))
    }

    /// Defines, inside a tile loop, the per-element values `e<N>` of the fused operands of
    /// `op` (transitively, each once, operands first).
    fn fused_defs(&mut self, op: &Op, done: &mut HashSet<Value>) -> Result<(), CodegenError> {
        for o in op.kind.operands() {
            let Some(def) = self.fused.get(&o).cloned() else {
                continue;
            };
            if !done.insert(o) {
                continue;
            }
            self.fused_defs(&def, done)?;
            let rd = self.dtype(o)?;
            let ind = self.operand_dtype(&def, rd)?;
            let ops: Vec<String> = def.kind.operands().iter().map(|&v| self.at(v)).collect();
            let expr = self.expr(&def, &ops, ind, rd)?;
            self.line(format!("const {} e{} = {expr};", ctype(rd), o.0));
        }
        Ok(())
    }

    fn elementwise(&mut self, op: &Op) -> Result<(), CodegenError> {
        let Some(r) = op.result else { return Ok(()) };
        let rd = self.dtype(r)?;
        let operands = op.kind.operands();
        let ind = self.operand_dtype(op, rd)?;
        let tile = self.is_tile(r);
        let ops: Vec<String> = operands.iter().map(|&v| self.at(v)).collect();
        // Integer `/` and `%` check for a zero divisor unless it is a non-zero constant.
        let divides = match &op.kind {
            OpKind::Binary(BinOp::Div | BinOp::Rem, _, b) if !ind.is_float() => {
                !matches!(self.const_of(*b), Some(Const::Int(x)) if x != 0)
            }
            _ => false,
        };
        let expr = self.expr(op, &ops, ind, rd)?;
        if !tile {
            if divides {
                let msg = crate::sites::division_by_zero(&self.f.name, &self.site_op(op));
                let b = &ops[1];
                self.fault_if(&format!("{b} == 0"), msg, b, "0");
            }
            self.line(format!("const {} v{} = {expr};", ctype(rd), r.0));
            return Ok(());
        }
        let n: u64 = self.shape(r)?.iter().product();
        self.declare_tile(r, n, rd)?;
        if divides {
            let site = self.sites.len();
            let msg = crate::sites::division_by_zero(&self.f.name, &self.site_op(op));
            let msg = self.placed(msg);
            self.sites.push(msg);
            self.line("{");
            self.depth += 1;
            self.line("int bad = 0;");
            self.open_tile_loop(n);
            self.fused_defs(op, &mut HashSet::new())?;
            let b = &ops[1];
            self.line(format!("if ({b} == 0) {{ bad = 1; continue; }}"));
            self.line(format!("v{}[k] = {expr};", r.0));
            self.close();
            match self.mode {
                Mode::Block => self.line(format!(
                    "if (__syncthreads_or(bad)) {{ if (lane == 0) eg_fail(rt, {site}, 0, 0); return 1; }}"
                )),
                Mode::Thread => self.line(format!("if (bad) return eg_fail(rt, {site}, 0, 0);")),
            }
            self.depth -= 1;
            self.line("}");
        } else {
            self.open_tile_loop(n);
            self.fused_defs(op, &mut HashSet::new())?;
            self.line(format!("v{}[k] = {expr};", r.0));
            self.close();
        }
        Ok(())
    }

    /// The C expression of one element of an elementwise op. `d` is the operand dtype and
    /// `rd` the result's.
    fn expr(&self, op: &Op, x: &[String], d: DType, rd: DType) -> Result<String, CodegenError> {
        let t = ctype(d);
        Ok(match &op.kind {
            OpKind::Binary(b, ..) => {
                let (a, c) = (&x[0], &x[1]);
                if d.is_float() {
                    match b {
                        BinOp::Add => format!("{a} + {c}"),
                        BinOp::Sub => format!("{a} - {c}"),
                        BinOp::Mul => format!("{a} * {c}"),
                        BinOp::Div => format!("{a} / {c}"),
                        BinOp::Min => format!("eg_fmin({a}, {c})"),
                        BinOp::Max => format!("eg_fmax({a}, {c})"),
                        _ => return Err(self.err(format!("`{}` on floats", b.name()))),
                    }
                } else if d == DType::Bool {
                    match b {
                        BinOp::And => format!("{a} && {c}"),
                        BinOp::Or => format!("{a} || {c}"),
                        BinOp::Xor => format!("{a} != {c}"),
                        _ => return Err(self.err(format!("`{}` on bool", b.name()))),
                    }
                } else {
                    let signed = d.is_signed();
                    let u = utype(d);
                    let wrap = |o: &str| {
                        if signed {
                            format!("({t})(({u}){a} {o} ({u}){c})")
                        } else {
                            format!("({t})({a} {o} {c})")
                        }
                    };
                    match b {
                        BinOp::Add => wrap("+"),
                        BinOp::Sub => wrap("-"),
                        BinOp::Mul => wrap("*"),
                        BinOp::Div if signed => format!("eg_div({a}, {c})"),
                        BinOp::Rem if signed => format!("eg_rem({a}, {c})"),
                        BinOp::Div => format!("{a} / {c}"),
                        BinOp::Rem => format!("{a} % {c}"),
                        BinOp::Min => format!("({a} < {c} ? {a} : {c})"),
                        BinOp::Max => format!("({a} > {c} ? {a} : {c})"),
                        BinOp::And => format!("({t})({a} & {c})"),
                        BinOp::Or => format!("({t})({a} | {c})"),
                        BinOp::Xor => format!("({t})({a} ^ {c})"),
                        // `wrapping_shl` / `wrapping_shr`: the amount modulo the width; `>>`
                        // on a signed value is arithmetic (as Rust's).
                        BinOp::Shl => {
                            format!("({t})(({u}){a} << (({u}){c} & {}u))", d.size() * 8 - 1)
                        }
                        BinOp::Shr => format!("({t})({a} >> (({u}){c} & {}u))", d.size() * 8 - 1),
                    }
                }
            }
            OpKind::Unary(u, _) => {
                let a = &x[0];
                let f32_ = d == DType::F32;
                match (u, d.is_float()) {
                    (UnOp::Neg, true) => format!("-{a}"),
                    (UnOp::Neg, false) => format!("({t})(({})0 - ({}){a})", utype(d), utype(d)),
                    (UnOp::Not, _) if d == DType::Bool => format!("!{a}"),
                    (UnOp::Not, _) => format!("({t})~{a}"),
                    (UnOp::Sqrt, true) => format!("{}({a})", if f32_ { "sqrtf" } else { "sqrt" }),
                    (UnOp::Abs, true) => format!("{}({a})", if f32_ { "fabsf" } else { "fabs" }),
                    (UnOp::Abs, false) if d.is_signed() => {
                        format!("({a} < 0 ? ({t})(({u})0 - ({u}){a}) : {a})", u = utype(d))
                    }
                    (UnOp::Abs, false) => a.clone(),
                    (u, false) => return Err(self.err(format!("`{}` on integers", u.name()))),
                }
            }
            OpKind::Fma(..) => format!(
                "{}({}, {}, {})",
                if d == DType::F32 { "fmaf" } else { "fma" },
                x[0],
                x[1],
                x[2]
            ),
            OpKind::Cmp(c, ..) => {
                let o = match c {
                    CmpOp::Eq => "==",
                    CmpOp::Ne => "!=",
                    CmpOp::Lt => "<",
                    CmpOp::Le => "<=",
                    CmpOp::Gt => ">",
                    CmpOp::Ge => ">=",
                };
                format!("{} {o} {}", x[0], x[1])
            }
            OpKind::Select(..) => format!("{} ? {} : {}", x[0], x[1], x[2]),
            OpKind::Cast(v) => cast(&x[0], self.dtype(*v)?, rd),
            // The same bits: CUDA's reinterpreting intrinsics (and the emulation's).
            OpKind::Bitcast(_) => match (d, rd) {
                (DType::F16 | DType::BF16, _) | (_, DType::F16 | DType::BF16) => {
                    format!("({t}){}", x[0])
                }
                (DType::F32, DType::I32) => format!("__float_as_int({})", x[0]),
                (DType::F32, _) => format!("(unsigned int)__float_as_int({})", x[0]),
                (DType::I32 | DType::U32, DType::F32) => format!("__int_as_float((int){})", x[0]),
                (DType::F64, DType::U64) => {
                    format!("(unsigned long long)__double_as_longlong({})", x[0])
                }
                (DType::F64, _) => format!("__double_as_longlong({})", x[0]),
                (_, _) => format!("__longlong_as_double((long long){})", x[0]),
            },
            _ => return Err(self.err("not an elementwise op")),
        })
    }
}

/// A C expression converting `x` from `from` to `to` with Rust `as` semantics.
fn cast(x: &str, from: DType, to: DType) -> String {
    if from == to {
        return x.to_string();
    }
    let t = ctype(to);
    if to == DType::Bool {
        return format!("{x} != 0");
    }
    match (from.is_float(), to.is_float()) {
        (true, false) => match to {
            DType::I32 => format!("eg_f2i32({x})"),
            DType::I64 => format!("eg_f2i64({x})"),
            DType::U32 => format!("eg_f2u32({x})"),
            // `usize` saturates as an unsigned type, as in Rust.
            DType::U64 | DType::Index => format!("({t})eg_f2u64({x})"),
            _ => format!("({t}){x}"),
        },
        _ => format!("({t}){x}"),
    }
}

/// For every value of `f`, the preorder position (1-based, as [`Emitter::op`] counts) of
/// its last use; a use inside a loop that does not contain the definition counts at the
/// loop's end (the value is needed on every iteration).
fn tile_last_uses(f: &Function) -> HashMap<Value, usize> {
    fn walk(
        b: &Block,
        pos: &mut usize,
        loops: &mut Vec<(usize, usize)>,
        def: &mut HashMap<Value, usize>,
        uses: &mut Vec<(Value, usize)>,
    ) {
        for op in &b.ops {
            *pos += 1;
            let here = *pos;
            for v in op.kind.operands() {
                uses.push((v, here));
            }
            if let Some(r) = op.result {
                def.insert(r, here);
            }
            for nb in op.kind.blocks() {
                walk(nb, pos, loops, def, uses);
            }
            if matches!(op.kind, OpKind::For { .. }) {
                loops.push((here, *pos));
            }
        }
    }
    let (mut pos, mut loops, mut def, mut uses) = (0, vec![], HashMap::new(), vec![]);
    walk(&f.body, &mut pos, &mut loops, &mut def, &mut uses);
    let mut last: HashMap<Value, usize> = HashMap::new();
    for (v, u) in uses {
        let d = def.get(&v).copied().unwrap_or(0);
        let end = loops
            .iter()
            .filter(|(s, e)| *s <= u && u <= *e && *s > d)
            .map(|(_, e)| *e)
            .max()
            .unwrap_or(u);
        let l = last.entry(v).or_insert(0);
        *l = (*l).max(end);
    }
    last
}

/// NVRTC options: IEEE division and square root, no contraction (so float results match the
/// CPU backend), no flush-to-zero.
pub const NVRTC_OPTIONS: [&str; 4] = [
    "--fmad=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "--ftz=false",
];

/// Compiled images (PTX text or cubins) by (FNV-1a of the CUDA C, architecture): `compute_XY`
/// keys hold PTX, `sm_XY` keys cubins.
type ImageCache = std::sync::Mutex<std::collections::HashMap<(u64, String), std::sync::Arc<[u8]>>>;

fn image_cache() -> &'static ImageCache {
    static CACHE: std::sync::OnceLock<ImageCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn image_key(code: &CudaCode, arch: &str) -> (u64, String) {
    (crate::fnv1a(code.source.as_bytes()), arch.to_string())
}

/// Registers `ptx` as the PTX of `code` for `arch` (from a plugin), so [`compile_ptx`] returns it
/// without NVRTC.
pub fn preload_ptx(code: &CudaCode, arch: &str, ptx: &str) {
    if let Ok(mut c) = image_cache().lock() {
        c.insert(image_key(code, arch), ptx.as_bytes().into());
    }
}

/// The cached image of `code` for `arch`, or NVRTC's, cached in the process and on disk
/// ([`crate::disk`]: `nvrtc/<key>.ptx` or `.cubin`). `driver` is the CUDA driver's version
/// where one is loaded (part of the disk key).
fn image(
    code: &CudaCode,
    arch: &str,
    driver: Option<i32>,
) -> Result<std::sync::Arc<[u8]>, CodegenError> {
    let key = image_key(code, arch);
    if let Some(i) = image_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(i);
    }
    #[cfg(feature = "cuda")]
    {
        if !nvrtc_available() {
            return Err(CodegenError::NvrtcUnavailable {
                detail: "no libnvrtc.so on the library path".into(),
            });
        }
        let ext = if arch.starts_with("sm_") {
            "cubin"
        } else {
            "ptx"
        };
        let disk = crate::disk::global().map(|d| (d, nvrtc_disk_key(code, arch, driver)));
        let cached = disk.as_ref().and_then(|(d, k)| d.get("nvrtc", k, ext));
        let i: std::sync::Arc<[u8]> = match cached {
            Some(bytes) => bytes.into(),
            None => {
                let _span =
                    tracing::debug_span!(target: "eagle", "nvrtc", arch, bytes = code.source.len())
                        .entered();
                let bytes = nvrtc_compile(code, arch)?;
                if let Some((d, k)) = &disk {
                    d.put("nvrtc", k, ext, &bytes);
                }
                bytes.into()
            }
        };
        if let Ok(mut c) = image_cache().lock() {
            c.insert(key, i.clone());
        }
        Ok(i)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (key, driver);
        Err(CodegenError::NvrtcUnavailable {
            detail: "this build has no `cuda` feature; rebuild with `--features cuda`".into(),
        })
    }
}

/// The version of the NVRTC that loads, as `major.minor` (`"unknown"` if it does not say).
#[cfg(feature = "cuda")]
pub fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: called only after `nvrtc_available`; writes two ints.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        format!("{major}.{minor}")
    } else {
        "unknown".into()
    }
}

/// The disk-cache key of NVRTC's image of `code` for `arch`: NVRTC's version, the driver's
/// (`None` for [`compile_ptx`] and [`compile_cubin`]), the architecture, the options and the
/// CUDA C (see [`crate::disk`]). The entry is `nvrtc/<key>.ptx` (`compute_XY`) or `.cubin`.
#[cfg(feature = "cuda")]
pub fn nvrtc_disk_key(code: &CudaCode, arch: &str, driver: Option<i32>) -> crate::disk::Key {
    let driver = driver.map_or("none".to_string(), |v| v.to_string());
    crate::disk::key(&[
        b"nvrtc",
        nvrtc_version().as_bytes(),
        driver.as_bytes(),
        arch.as_bytes(),
        NVRTC_OPTIONS.join(" ").as_bytes(),
        code.source.as_bytes(),
    ])
}

/// Forgets the images compiled or registered in this process (the disk cache keeps its
/// entries): the next [`compile_ptx`] or [`compile_cubin`] reads the disk cache or runs NVRTC.
pub fn clear_image_cache() {
    if let Ok(mut c) = image_cache().lock() {
        c.clear();
    }
}

/// Whether NVRTC can be loaded (checked without calling into it, so a missing library is an
/// answer, not a panic).
pub fn nvrtc_available() -> bool {
    #[cfg(feature = "cuda")]
    {
        // SAFETY: only tries to open the library by its candidate names.
        unsafe { cudarc::nvrtc::sys::is_culib_present() }
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// Compiles `code` to PTX for virtual architecture `arch` (such as `compute_90`) with NVRTC,
/// or returns the PTX cached for the same source and architecture.
///
/// # Errors
/// [`CodegenError::NvrtcUnavailable`] when NVRTC cannot be loaded (or this build lacks the
/// `cuda` feature); [`CodegenError::Nvrtc`] with NVRTC's log and the kernel names when NVRTC
/// rejects the source.
pub fn compile_ptx(code: &CudaCode, arch: &str) -> Result<std::sync::Arc<str>, CodegenError> {
    image(code, arch, None).map(|i| String::from_utf8_lossy(&i).into())
}

/// The PTX registered for `code` and `arch` by [`preload_ptx`] or an earlier [`compile_ptx`].
pub fn cached_ptx(code: &CudaCode, arch: &str) -> Option<std::sync::Arc<str>> {
    let i = image_cache()
        .lock()
        .ok()
        .and_then(|c| c.get(&image_key(code, arch)).cloned())?;
    Some(String::from_utf8_lossy(&i).into())
}

/// Compiles `code` to a cubin for real architecture `arch` (such as `sm_90`) with NVRTC,
/// cached per source and architecture. A cubin from a newer 12.x NVRTC loads on an older 12.x
/// driver, where PTX of a newer ISA would not.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_cubin(code: &CudaCode, arch: &str) -> Result<std::sync::Arc<[u8]>, CodegenError> {
    image(code, arch, None)
}

/// [`compile_cubin`] for the device of a loaded CUDA driver of version `driver` (as
/// `cuDriverGetVersion` gives it), which is part of the disk cache's key.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_cubin_for_driver(
    code: &CudaCode,
    arch: &str,
    driver: i32,
) -> Result<std::sync::Arc<[u8]>, CodegenError> {
    image(code, arch, Some(driver))
}

#[cfg(feature = "cuda")]
/// Runs NVRTC on `code` for `arch` (`compute_XY` gives PTX text, `sm_XY` a cubin) and returns
/// the image's bytes (without a trailing NUL).
fn nvrtc_compile(code: &CudaCode, arch: &str) -> Result<Vec<u8>, CodegenError> {
    use cudarc::nvrtc::result as nv;
    use std::ffi::CString;
    let kernels = code
        .entries
        .keys()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let fail = |log: String| CodegenError::Nvrtc {
        kernels: kernels.clone(),
        arch: arch.to_string(),
        log,
    };
    let src = CString::new(code.source.as_str()).map_err(|e| fail(e.to_string()))?;
    let name = CString::new("eagle.cu").map_err(|e| fail(e.to_string()))?;
    let prog = nv::create_program(&src, Some(&name)).map_err(|e| fail(e.to_string()))?;
    let mut opts: Vec<String> = NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect();
    opts.push(format!("--gpu-architecture={arch}"));
    // SAFETY: `prog` is a live program created above; it is destroyed once, below.
    let compiled = unsafe { nv::compile_program(prog, &opts) };
    let text = |v: Vec<std::ffi::c_char>| {
        let bytes: Vec<u8> = v
            .into_iter()
            .map(|c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let out = match compiled {
        // SAFETY: `prog` compiled successfully; the image size is queried first.
        Ok(()) if arch.starts_with("sm_") => unsafe {
            let mut size = 0usize;
            cudarc::nvrtc::sys::nvrtcGetCUBINSize(prog, &mut size)
                .result()
                .and_then(|()| {
                    let mut buf = vec![0 as std::ffi::c_char; size];
                    cudarc::nvrtc::sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr())
                        .result()
                        .map(|()| buf.into_iter().map(|c| c as u8).collect())
                })
                .map_err(|e| fail(e.to_string()))
        },
        // SAFETY: `prog` compiled successfully.
        Ok(()) => unsafe { nv::get_ptx(prog) }
            .map(|v| text(v).into_bytes())
            .map_err(|e| fail(e.to_string())),
        Err(e) => {
            // SAFETY: `prog` is live; the log exists after a failed compile.
            let log = unsafe { nv::get_program_log(prog) }
                .map(text)
                .unwrap_or_else(|_| e.to_string());
            Err(fail(log))
        }
    };
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { nv::destroy_program(prog) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_keep_their_bits() {
        assert_eq!(literal(Const::F32(1.0), DType::F32), "1.0f");
        assert_eq!(literal(Const::F64(0.1), DType::F64), "0.1");
        assert_eq!(literal(Const::F32(1e-7), DType::F32), "1e-7f");
        assert_eq!(
            literal(Const::F32(f32::INFINITY), DType::F32),
            "__int_as_float(0x7f800000)"
        );
        assert_eq!(
            literal(Const::Int(i128::from(i32::MIN)), DType::I32),
            "(-2147483647 - 1)"
        );
        assert_eq!(literal(Const::Int(-1), DType::Index), "-1LL");
        assert_eq!(literal(Const::Int(7), DType::U64), "7ull");
    }

    #[test]
    fn casts_follow_rust_as() {
        assert_eq!(
            cast("x", DType::F64, DType::Index),
            "(long long)eg_f2u64(x)"
        );
        assert_eq!(cast("x", DType::F32, DType::I32), "eg_f2i32(x)");
        assert_eq!(cast("x", DType::I32, DType::Bool), "x != 0");
        assert_eq!(cast("x", DType::I64, DType::F32), "(float)x");
    }

    #[test]
    fn tile_offsets_are_row_major() {
        let offs = vec!["a".to_string(), "b".to_string()];
        assert_eq!(
            Emitter::tile_offset(&[8, 16], &[2, 4], &offs),
            "(a + i / 4 % 2) * 16LL + (b + i % 4)"
        );
        assert_eq!(
            Emitter::tile_offset(&[8, 16], &[1, 4], &offs),
            "a * 16LL + (b + i % 4)"
        );
    }
}
