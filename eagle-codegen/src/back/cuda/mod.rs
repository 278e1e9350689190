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
use eagle_ir::entity::SecondaryMap;
use eagle_ir::prim;
use eagle_ir::{
    print_op, BinOp, Block, CmpOp, Const, DType, Defs, Function, FunctionFacts, Level, NotifyOp,
    Op, OpKind, Type, UnOp, Value,
};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt::Write as _;

mod checks;
mod emit;
mod nvrtc;
mod tile;

use emit::{cast, tile_last_uses, Emitter};
pub use nvrtc::*;
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
                .map(|m| crate::sites::fill(m, a, b))
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

/// The C emitter's instance of [`prim::Emitter`]: C expressions on operands of dtype `.0`
/// (`float`, `double` or an integer type), truth values as C `bool` expressions.
pub(super) struct CPrim(pub DType);

impl prim::Emitter for CPrim {
    type V = String;
    type M = String;
    fn is_nan(&mut self, x: &String) -> String {
        format!("({x} != {x})")
    }
    fn lt(&mut self, a: &String, b: &String) -> String {
        format!("({a} < {b})")
    }
    fn eq(&mut self, a: &String, b: &String) -> String {
        format!("({a} == {b})")
    }
    fn sign_bit(&mut self, x: &String) -> String {
        if self.0 == DType::F64 {
            format!("(__double_as_longlong({x}) < 0)")
        } else {
            format!("(__float_as_int({x}) < 0)")
        }
    }
    fn and(&mut self, a: String, b: String) -> String {
        format!("({a} && {b})")
    }
    fn or(&mut self, a: String, b: String) -> String {
        format!("({a} || {b})")
    }
    fn not(&mut self, a: String) -> String {
        format!("!{a}")
    }
    fn select(&mut self, m: String, a: String, b: String) -> String {
        format!("({m} ? {a} : {b})")
    }
    fn canonical_nan(&mut self) -> String {
        if self.0 == DType::F64 {
            format!("__longlong_as_double({:#x}LL)", prim::CANONICAL_NAN_F64)
        } else {
            format!("__int_as_float({:#x})", prim::CANONICAL_NAN_F32)
        }
    }
}

impl prim::IntEmitter for CPrim {
    fn signed(&self) -> bool {
        self.0.is_signed()
    }
    fn int(&mut self, k: i64) -> String {
        literal(Const::Int(k.into()), self.0)
    }
    fn neg(&mut self, x: &String) -> String {
        let (t, u) = (ctype(self.0), utype(self.0));
        format!("({t})(({u})0 - ({u}){x})")
    }
    fn div(&mut self, a: &String, b: &String) -> String {
        format!("({a} / {b})")
    }
    fn rem(&mut self, a: &String, b: &String) -> String {
        format!("({a} % {b})")
    }
}

/// The shifts as C expressions (`>>` on a signed type is arithmetic in CUDA C, as in Rust).
impl prim::ShiftEmitter for CPrim {
    fn width(&self) -> u32 {
        8 * self.0.size() as u32
    }
    fn bit_and(&mut self, a: &String, b: &String) -> String {
        let u = utype(self.0);
        format!("(({u}){a} & ({u}){b})")
    }
    fn shl_in_range(&mut self, x: &String, n: &String) -> String {
        let (t, u) = (ctype(self.0), utype(self.0));
        format!("({t})(({u}){x} << {n})")
    }
    fn shr_in_range(&mut self, x: &String, n: &String) -> String {
        format!("({})({x} >> {n})", ctype(self.0))
    }
}

/// The C emitter's instance of [`prim::ConvEmitter`]: a `double` expression to an integer
/// of dtype `.0` (an `f32` widens to `double` exactly).
struct CConv(DType);

impl prim::ConvEmitter for CConv {
    type F = String;
    type I = String;
    type M = String;
    fn is_nan(&mut self, x: &String) -> String {
        format!("({x} != {x})")
    }
    fn le(&mut self, x: &String, k: f64) -> String {
        format!("({x} <= {k:.1})")
    }
    fn ge(&mut self, x: &String, k: f64) -> String {
        format!("({x} >= {k:.1})")
    }
    fn int(&mut self, k: i128) -> String {
        literal(Const::Int(k), self.0)
    }
    fn trunc(&mut self, x: &String) -> String {
        format!("({}){x}", ctype(self.0))
    }
    fn select(&mut self, m: String, a: String, b: String) -> String {
        format!("({m} ? {a} : {b})")
    }
}

/// The helpers after the prelude, each a rule of [`prim`] written out by [`CPrim`]:
/// `eg_fmin` and `eg_fmax` on `float` and `double` ([`prim::fmin`], [`prim::fmax`]), and
/// `eg_div` and `eg_rem` on `int` and `long long` ([`prim::idiv`], [`prim::irem`]), and
/// `eg_f2i32`, `eg_f2i64`, `eg_f2u32`, `eg_f2u64` from `double` ([`prim::float_to_int`]).
fn prim_helpers() -> String {
    type Rule = fn(&mut CPrim, &String, &String) -> String;
    let mut s = String::new();
    for (name, d) in [
        ("eg_f2i32", DType::I32),
        ("eg_f2i64", DType::I64),
        ("eg_f2u32", DType::U32),
        ("eg_f2u64", DType::U64),
    ] {
        let body = prim::float_to_int(&mut CConv(d), &"x".to_string(), d);
        s.push_str(&format!(
            "__device__ __forceinline__ {} {name}(double x) {{ return {body}; }}\n",
            ctype(d)
        ));
    }
    let float: [(&str, Rule); 2] = [("eg_fmin", prim::fmin), ("eg_fmax", prim::fmax)];
    let int: [(&str, Rule); 2] = [("eg_div", prim::idiv), ("eg_rem", prim::irem)];
    for (dtypes, rules) in [
        ([DType::F32, DType::F64], float),
        ([DType::I32, DType::I64], int),
    ] {
        for d in dtypes {
            let t = ctype(d);
            for (name, rule) in rules {
                let body = rule(&mut CPrim(d), &"a".to_string(), &"b".to_string());
                s.push_str(&format!(
                    "__device__ __forceinline__ {t} {name}({t} a, {t} b) {{ return {body}; }}\n"
                ));
            }
        }
    }
    s
}

fn ctype(d: DType) -> &'static str {
    match d {
        DType::Bool => "bool",
        DType::I8 => "signed char",
        // The float storage dtypes are held as their bit patterns: specialization widens
        // every computation on them to `float` (`eagle_ir::narrow`).
        DType::U8 | DType::F8E4M3 | DType::F8E5M2 | DType::E8M0 => "unsigned char",
        DType::I16 => "short",
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
    // specialized IR (after the expansion below, for a function with math on tiles).
    // Math ops on f32/f64 tiles, which specialization leaves for the CPU backend's kernels,
    // become their primitive ops here (the same definition, so the same bits).
    let canon: Vec<(Function, FunctionFacts)> = m
        .functions
        .iter()
        .filter(|f| f.level != Level::Host && !f.name.starts_with("__plan_"))
        .map(|f| {
            let facts = spec.facts.function(&f.name);
            if !f
                .body
                .any(&f.ops, &mut |op| matches!(op.kind, OpKind::Math(..)))
            {
                return canonical(f, facts);
            }
            let mut f = f.clone();
            eagle_ir::expand::expand_function(&mut f);
            canonical(&f, facts)
        })
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
            for c in callees(f) {
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
    out.push_str(&prim_helpers());
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
                uses: crate::passes::fusion::use_counts(f),
                fused: SecondaryMap::new(),
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
    let mut rename = |v: Value| Value(nums.get(v).map_or(v.0, |&n| n as u32));
    let mut values = vec![Type::Ctx; nums.len()];
    for (v, &n) in nums.iter() {
        values[n] = f.ty(v).clone();
    }
    let facts = facts.renamed(&mut |v| nums.get(v).map(|&n| Value(n as u32)));
    let mut ops = eagle_ir::Ops::new();
    let body = f.body.copy_into(&f.ops, &mut ops, &mut rename);
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
        values: values.into(),
        ops,
        body,
    };
    (f, facts)
}

fn callees(f: &Function) -> Vec<String> {
    let mut v = vec![];
    f.walk(&mut |op| {
        if let OpKind::Call { callee, .. } = &op.kind {
            v.push(callee.clone());
        }
    });
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
