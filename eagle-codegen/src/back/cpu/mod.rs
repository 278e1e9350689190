//! The CPU backend: per-device and compute functions lowered to Cranelift IR and JIT-compiled.
//!
//! Lowering rules:
//! - tensors are data pointers (row-major, contiguous, constant shapes after specialization);
//!   windows are a runtime id plus this rank's base address (from the `window_base` hook);
//! - tiles live in stack slots; elementwise ops on tiles are loops over their elements, with
//!   scalar operands broadcast;
//! - loads and stores of tiles copy row by row (`memcpy` for local memory, the `get`/`put`
//!   hooks for a peer's window);
//! - offsets that specialization could not prove in bounds are checked at run time and report
//!   through the `fault` hook, as are integer division by zero and slice indices;
//! - every hook's status is checked: a non-zero status returns from the function at once.

use crate::abi::{self, hook, CTX_HOOKS, CTX_RANK, CTX_TRACE};
use crate::error::CodegenError;
use crate::passes::fusion::{fusion_roots, is_elementwise, may_write, use_counts};
use crate::Specialized;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, FuncRef, InstBuilder, MemFlagsData, SigRef, Signature, StackSlotData,
    StackSlotKind, Type as ClType, Value as ClValue,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module as _};
use eagle_ir::entity::SecondaryMap;
use eagle_ir::{
    print_op, BinOp, Block as IrBlock, CmpOp, Const, DType, Function, FunctionFacts, Level, Op,
    OpKind, TileOp, Type, UnOp, Value,
};
use std::collections::{BTreeMap, HashMap, HashSet};

mod control;
mod elementwise;
mod gemm;
mod math;
mod memory;
mod prim;
mod tile;

use elementwise::BlockPlan;

/// Code of one module, JIT-compiled for this machine.
pub struct CpuCode {
    /// Keeps the machine code alive.
    _module: JitHolder,
    /// Entry point of every per-device and compute function, by name.
    pub entries: HashMap<String, abi::EntryFn>,
    /// The Cranelift IR of every function, by name (for snapshots and `--emit-ir`).
    pub clif: BTreeMap<String, String>,
    /// Fault table: the message of each run-time check, by site index. `{a}` and `{b}` are
    /// replaced by the offending value and its limit.
    pub sites: Vec<String>,
    /// Bytes of machine code emitted for all functions.
    pub code_bytes: usize,
    /// The most bytes of tiles a call of each function keeps on its thread's stack, the
    /// compute functions it calls included (`u64::MAX` where calls form a cycle), by name: the
    /// stack a thread must have left to run it.
    pub stack: HashMap<String, u64>,
}

impl std::fmt::Debug for CpuCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuCode")
            .field("functions", &self.clif.keys().collect::<Vec<_>>())
            .finish()
    }
}

struct JitHolder(#[allow(dead_code)] Option<JITModule>);
// SAFETY: the JIT module is never touched after `finalize_definitions`; it only keeps the code
// pages mapped. The entry points are plain code addresses, callable from any thread.
unsafe impl Send for JitHolder {}
// SAFETY: as above; no method of the module is called through a shared reference.
unsafe impl Sync for JitHolder {}

/// Most bytes of tile storage one device or compute function may use (device threads run on
/// 16 MiB stacks); specialization checks the same limit.
pub const MAX_TILE_BYTES: u64 = crate::passes::specialize::CPU_MAX_TILE_BYTES;

fn cl_type(d: DType) -> ClType {
    match d {
        // The float storage dtypes only move (loads, stores, bitcasts to `u16`/`u8`):
        // specialization widens every computation on them to `f32` (`eagle_ir::narrow`).
        DType::Bool | DType::I8 | DType::U8 => types::I8,
        DType::F8E4M3 | DType::F8E5M2 | DType::E8M0 => types::I8,
        DType::I16 | DType::U16 | DType::F16 | DType::BF16 => types::I16,
        DType::I32 | DType::U32 => types::I32,
        DType::I64 | DType::U64 | DType::Index => types::I64,
        DType::F32 => types::F32,
        DType::F64 => types::F64,
    }
}

/// A lowered IR value.
#[derive(Clone, Copy)]
enum Cv {
    /// A scalar.
    S(ClValue),
    /// Memory: a tensor or tile pointer.
    Mem(ClValue),
    /// A window: runtime id, local base address (view start) and the view's byte offset in
    /// the allocation.
    Win(ClValue, ClValue, ClValue),
    /// The device context (the function's own `ctx`).
    Ctx,
    /// A `let mut` variable.
    Var(Variable),
}

fn unsupported(f: &Function, msg: impl Into<String>) -> CodegenError {
    CodegenError::Unsupported {
        backend: "cpu",
        function: f.name.clone(),
        message: msg.into(),
    }
}

/// A tile moved row by row between local memory and a window on a peer
/// ([`Lower::remote_rows`]).
struct RemoteRows<'r> {
    /// `hook::GET` (window to local) or `hook::PUT` (local to window).
    hook: i32,
    /// The window's id and this value's byte offset in it.
    win: (ClValue, ClValue),
    peer: ClValue,
    /// The tile's local memory.
    local: ClValue,
    win_shape: &'r [u64],
    offs: &'r [ClValue],
    tile: &'r [u64],
    esize: usize,
    site: ClValue,
}

/// JIT-compiles every per-device and compute function of a specialized module. An offset is
/// bounds-checked at run time unless it is a constant or `spec.facts` proves it in bounds.
///
/// # Errors
/// [`CodegenError::Unsupported`] for a construct the backend cannot lower (for example a
/// symbolic shape left unbound), [`CodegenError::Cranelift`] if Cranelift rejects the code.
pub fn compile_module(spec: &Specialized) -> Result<CpuCode, CodegenError> {
    let m = &spec.module;
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| {
        f.set(k, v).map_err(|e| CodegenError::Cranelift {
            function: String::new(),
            message: format!("setting {k}={v}: {e}"),
        })
    };
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "use_colocated_libcalls", "false")?;
    set(&mut flags, "is_pic", "false")?;
    // Frames larger than a page touch each page on the way down, so that a thread whose stack
    // is too short for a function's tiles stops at its guard page instead of writing past it.
    set(&mut flags, "enable_probestack", "true")?;
    set(&mut flags, "probestack_strategy", "inline")?;
    let isa_builder = cranelift_native::builder().map_err(|e| CodegenError::Cranelift {
        function: String::new(),
        message: format!("host machine is not supported: {e}"),
    })?;
    let isa = isa_builder
        .finish(settings::Flags::new(flags))
        .map_err(|e| CodegenError::Cranelift {
            function: String::new(),
            message: e.to_string(),
        })?;
    let mut jb = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    for (_, name, addr) in gemm::symbols().into_iter().chain(math::symbols()) {
        jb.symbol(name, addr);
    }
    let mut module = JITModule::new(jb);
    let ptr = module.target_config().pointer_type();
    let mut entry_sig = module.make_signature();
    entry_sig.params.push(AbiParam::new(ptr));
    entry_sig.params.push(AbiParam::new(ptr));
    entry_sig.returns.push(AbiParam::new(types::I32));

    let mut ids: BTreeMap<String, FuncId> = BTreeMap::new();
    let funcs: Vec<&Function> = m
        .functions
        .iter()
        .filter(|f| f.level != Level::Host)
        .collect();
    for f in &funcs {
        let id = module
            .declare_function(&format!("eagle_{}", f.name), Linkage::Local, &entry_sig)
            .map_err(|e| CodegenError::Cranelift {
                function: f.name.clone(),
                message: e.to_string(),
            })?;
        ids.insert(f.name.clone(), id);
    }
    // The rustc-compiled kernels, declared after the module's own functions, which keep their
    // ids: the GEMMs (`gemm.rs`: dst, c or null, a, b, m, k, n, lda, ldb, bt) and the math
    // library on tiles (`math.rs`: function code, dst, a, b or null, n).
    let mut gemm_sig = module.make_signature();
    gemm_sig.params.extend([AbiParam::new(ptr); 4]);
    gemm_sig.params.extend([AbiParam::new(types::I64); 6]);
    let mut math_sig = module.make_signature();
    math_sig.params.push(AbiParam::new(types::I64));
    math_sig.params.extend([AbiParam::new(ptr); 3]);
    math_sig.params.push(AbiParam::new(types::I64));
    let mut kernel_ids = BTreeMap::new();
    let kernels = gemm::symbols()
        .map(|(_, name, _)| (name, &gemm_sig))
        .into_iter()
        .chain(math::symbols().map(|(_, name, _)| (name, &math_sig)));
    for (name, sig) in kernels {
        let id = module
            .declare_function(name, Linkage::Import, sig)
            .map_err(|e| CodegenError::Cranelift {
                function: String::new(),
                message: e.to_string(),
            })?;
        kernel_ids.insert(name, id);
    }

    let mut clif = BTreeMap::new();
    let mut sites = vec![];
    let mut code_bytes = 0usize;
    let mut ctx = module.make_context();
    let mut fctx = FunctionBuilderContext::new();
    let mut own = HashMap::new();
    for f in &funcs {
        ctx.func.signature = entry_sig.clone();
        let tiles = lower_function(
            &mut module,
            &mut ctx,
            &mut fctx,
            f,
            spec.facts.function(&f.name),
            &ids,
            &kernel_ids,
            &mut sites,
            ptr,
        )?;
        own.insert(f.name.clone(), tiles);
        clif.insert(f.name.clone(), ctx.func.display().to_string());
        module
            .define_function(ids[&f.name], &mut ctx)
            .map_err(|e| CodegenError::Cranelift {
                function: f.name.clone(),
                message: format!("{e:?}"),
            })?;
        code_bytes += ctx
            .compiled_code()
            .map_or(0, |c| c.code_info().total_size as usize);
        module.clear_context(&mut ctx);
    }
    module
        .finalize_definitions()
        .map_err(|e| CodegenError::Cranelift {
            function: String::new(),
            message: e.to_string(),
        })?;
    let mut entries = HashMap::new();
    for f in &funcs {
        let p = module.get_finalized_function(ids[&f.name]);
        // SAFETY: the function was defined with the `EntryFn` signature (two pointers in, i32
        // out, the platform's default C calling convention) and stays mapped while `module`
        // lives in the returned `CpuCode`.
        let e: abi::EntryFn = unsafe { std::mem::transmute::<*const u8, abi::EntryFn>(p) };
        entries.insert(f.name.clone(), e);
    }
    let mut stack = HashMap::new();
    for n in own.keys() {
        chain_stack(m, &own, n, &mut vec![], &mut stack);
    }
    Ok(CpuCode {
        _module: JitHolder(Some(module)),
        entries,
        clif,
        sites,
        code_bytes,
        stack,
    })
}

/// [`CpuCode::stack`] of function `name` (memoised in `done`): its own tiles (`own`) and the
/// most of any function it calls; `u64::MAX` on a cycle of calls (`path` holds the calls
/// being followed; verification rejects recursion, so this is a guard).
fn chain_stack<'m>(
    m: &'m eagle_ir::Module,
    own: &HashMap<String, u64>,
    name: &'m str,
    path: &mut Vec<&'m str>,
    done: &mut HashMap<String, u64>,
) -> u64 {
    if let Some(&d) = done.get(name) {
        return d;
    }
    if path.contains(&name) {
        return u64::MAX;
    }
    let Some(f) = m.function(name) else {
        return 0;
    };
    path.push(name);
    let mut callees = vec![];
    f.walk(&mut |op| {
        if let OpKind::Call { callee, .. } = &op.kind {
            callees.push(callee.as_str());
        }
    });
    let deepest = callees
        .into_iter()
        .map(|c| chain_stack(m, own, c, path, done))
        .max()
        .unwrap_or(0);
    path.pop();
    let total = own.get(name).copied().unwrap_or(0).saturating_add(deepest);
    done.insert(name.to_string(), total);
    total
}

/// The signatures of the runtime hooks (`eagle_codegen::abi::Hooks`), imported into `b`.
fn import_hook_signatures(
    b: &mut FunctionBuilder<'_>,
    call_conv: cranelift_codegen::isa::CallConv,
    ptr: ClType,
) -> HashMap<i32, cranelift_codegen::ir::SigRef> {
    let mut hook_sigs = HashMap::new();
    let mk = |params: &[ClType], ret: Option<ClType>| {
        let mut s = Signature::new(call_conv);
        for p in params {
            s.params.push(AbiParam::new(*p));
        }
        if let Some(r) = ret {
            s.returns.push(AbiParam::new(r));
        }
        s
    };
    let i32t = types::I32;
    let i64t = types::I64;
    let sigs = [
        (hook::WINDOW_BASE, mk(&[ptr, i64t], Some(ptr))),
        (
            hook::PUT,
            mk(&[ptr, i64t, i64t, i64t, ptr, i64t, i32t], Some(i32t)),
        ),
        (
            hook::GET,
            mk(&[ptr, i64t, i64t, i64t, ptr, i64t, i32t], Some(i32t)),
        ),
        (
            hook::GET_VIEW,
            mk(&[ptr, i64t, i64t, i64t, ptr, i64t, i32t], Some(ptr)),
        ),
        (
            hook::NOTIFY,
            mk(&[ptr, i64t, i64t, i64t, i32t, i64t, i32t, i32t], Some(i32t)),
        ),
        (
            hook::WAIT,
            mk(&[ptr, i64t, i64t, i32t, i64t, i32t, i32t], Some(i32t)),
        ),
        (hook::BARRIER, mk(&[ptr, i32t], Some(i32t))),
        (hook::FAULT, mk(&[ptr, i32t, i64t, i64t], Some(i32t))),
        (hook::TRACK_WRITE, mk(&[ptr, i64t, i64t, i64t], Some(i32t))),
        (
            hook::TRACK_READ,
            mk(&[ptr, i64t, i64t, i64t, i32t], Some(i32t)),
        ),
        (hook::TRACE, mk(&[ptr, i32t, i32t], Some(i32t))),
    ];
    for (k, s) in sigs {
        hook_sigs.insert(k, b.import_signature(s));
    }
    hook_sigs
}

#[allow(clippy::too_many_arguments)]
fn lower_function(
    module: &mut JITModule,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    f: &Function,
    facts: &FunctionFacts,
    ids: &BTreeMap<String, FuncId>,
    kernel_ids: &BTreeMap<&'static str, FuncId>,
    sites: &mut Vec<String>,
    ptr: ClType,
) -> Result<u64, CodegenError> {
    for t in &f.values {
        if t.shape()
            .is_some_and(|s| s.consts().is_some() && s.numel().is_none())
        {
            return Err(unsupported(
                f,
                format!("type `{t}` has more elements than fit in 64 bits"),
            ));
        }
        if t.shape().is_some_and(|s| s.consts().is_none()) {
            return Err(unsupported(
                f,
                format!("type `{t}` still has a symbolic dim; specialize the module first"),
            ));
        }
    }
    let cfg = module.target_config();
    let mut callee_refs = HashMap::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    for (name, id) in ids {
        callee_refs.insert(name.clone(), module.declare_func_in_func(*id, b.func));
    }
    // Only the kernels this function calls (an import in every function would be noise in
    // the CLIF snapshots).
    let mut kernel_refs = HashMap::new();
    f.walk(&mut |op| {
        let name = match (&op.kind, op.result) {
            (OpKind::Tile(TileOp::Matmul | TileOp::MatmulAcc, _), Some(r)) => {
                f.ty(r).dtype().and_then(gemm::entry)
            }
            (OpKind::Math(..), Some(r)) => f.ty(r).dtype().and_then(math::entry),
            _ => None,
        };
        if let Some(name) = name {
            kernel_refs
                .entry(name)
                .or_insert_with(|| module.declare_func_in_func(kernel_ids[name], b.func));
        }
    });
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let ctx_v = b.block_params(entry)[0];
    let args_v = b.block_params(entry)[1];
    let err_block = b.create_block();
    b.append_block_param(err_block, types::I32);

    let hook_sigs = import_hook_signatures(&mut b, cfg.default_call_conv, ptr);
    let mut lw = Lower {
        b,
        f,
        cfg,
        ptr,
        ctx: ctx_v,
        vals: SecondaryMap::with_capacity(f.values.len()),
        err_block,
        hook_sigs,
        callee_refs,
        kernel_refs,
        sites,
        stack_bytes: 0,
        uses: use_counts(f),
        equal: crate::passes::value_numbering::equal_values(f),
        facts,
        plan: BlockPlan::default(),
        lazy_ops: SecondaryMap::new(),
        stored: SecondaryMap::new(),
        in_place_reads: Default::default(),
        into_vars: Default::default(),
        transposed_b: Default::default(),
    };
    for (i, p) in f.params.iter().enumerate() {
        let off = (i * 8) as i32;
        let cv = match f.ty(p.value) {
            Type::Ctx => Cv::Ctx,
            Type::Tensor(..) | Type::Tile(..) => {
                Cv::Mem(lw.b.ins().load(ptr, MemFlagsData::trusted(), args_v, off))
            }
            Type::Window(..) => {
                // Slot: window id in the low 16 bits, the view's byte offset above them.
                let slot =
                    lw.b.ins()
                        .load(types::I64, MemFlagsData::trusted(), args_v, off);
                let id = lw.b.ins().band_imm_s(slot, 0xffff);
                let woff = lw.b.ins().ushr_imm_u(slot, 16);
                let alloc = lw.window_base(id);
                let base = lw.b.ins().iadd(alloc, woff);
                Cv::Win(id, base, woff)
            }
            Type::Scalar(d) => {
                Cv::S(
                    lw.b.ins()
                        .load(cl_type(*d), MemFlagsData::trusted(), args_v, off),
                )
            }
            t => return Err(unsupported(f, format!("parameter type `{t}`"))),
        };
        lw.vals.insert(p.value, cv);
    }
    lw.block(&f.body)?;
    if lw.stack_bytes > MAX_TILE_BYTES {
        return Err(unsupported(
            f,
            format!(
                "its tiles and local arrays need {} bytes of on-chip storage, more than the {} bytes a device function may use; tiles are small blocks: process the tensor in a `for` loop over tiles of a few thousand elements",
                lw.stack_bytes, MAX_TILE_BYTES
            ),
        ));
    }
    let zero = lw.b.ins().iconst(types::I32, 0);
    lw.b.ins().return_(&[zero]);
    lw.b.switch_to_block(err_block);
    lw.b.seal_block(err_block);
    let st = lw.b.block_params(err_block)[0];
    lw.b.ins().return_(&[st]);
    lw.b.seal_all_blocks();
    let tiles = lw.stack_bytes;
    lw.b.finalize(cfg);
    Ok(tiles)
}

struct Lower<'a, 'b> {
    b: FunctionBuilder<'b>,
    f: &'a Function,
    cfg: TargetFrontendConfig,
    ptr: ClType,
    ctx: ClValue,
    /// What each value of the function lowered to, by handle.
    vals: SecondaryMap<Value, Cv>,
    err_block: Block,
    hook_sigs: HashMap<i32, SigRef>,
    callee_refs: HashMap<String, FuncRef>,
    /// The rustc-compiled kernels this function calls ([`gemm`], [`math`]), by symbol.
    kernel_refs: HashMap<&'static str, FuncRef>,
    sites: &'a mut Vec<String>,
    /// Bytes of tile storage (stack slots) so far.
    stack_bytes: u64,
    /// Use counts of every value of the function.
    uses: SecondaryMap<Value, usize>,
    /// Values equal to an earlier one (`passes::value_numbering`): the in-place store
    /// compares offsets through it, so it holds however the source spells them.
    equal: SecondaryMap<Value, Value>,
    /// What specialization proved about the function's values (ranges of offsets).
    facts: &'a FunctionFacts,
    /// Views, fused ops and in-place stores of the blocks lowered so far.
    plan: BlockPlan,
    /// Elementwise ops by result, for the fused-tree evaluators.
    lazy_ops: SecondaryMap<Value, Op>,
    /// Elementwise results already written by their op into the store's destination.
    stored: SecondaryMap<Value, ()>,
    /// Tile reads that use the variable's own stack tile ([`control::reads_in_place`]).
    in_place_reads: eagle_ir::entity::EntitySet<Value>,
    /// Matmul results the GEMM may compute into a variable's tile, by result: the variable
    /// ([`control::results_into_vars`]).
    into_vars: SecondaryMap<Value, Value>,
    /// Transposes the GEMM reads as `b` where their operand is ([`tile::transposed_operands`]).
    transposed_b: eagle_ir::entity::EntitySet<Value>,
}

impl Lower<'_, '_> {
    fn err(&self, msg: impl Into<String>) -> CodegenError {
        unsupported(self.f, msg)
    }

    fn cv(&self, v: Value) -> Result<Cv, CodegenError> {
        self.vals
            .get(v)
            .copied()
            .ok_or_else(|| self.err(format!("value %{} used before definition", v.0)))
    }

    fn scalar(&mut self, v: Value) -> Result<ClValue, CodegenError> {
        match self.cv(v)? {
            Cv::S(x) => Ok(x),
            Cv::Var(var) => Ok(self.b.use_var(var)),
            _ => Err(self.err(format!("value %{} is not a scalar", v.0))),
        }
    }

    fn mem(&self, v: Value) -> Result<ClValue, CodegenError> {
        match self.cv(v)? {
            Cv::Mem(p) => Ok(p),
            Cv::Win(_, base, _) => Ok(base),
            _ => Err(self.err(format!("value %{} is not memory", v.0))),
        }
    }

    /// A window's id and the byte offset of the view in the allocation.
    fn win(&self, v: Value) -> Result<(ClValue, ClValue), CodegenError> {
        match self.cv(v)? {
            Cv::Win(id, _, woff) => Ok((id, woff)),
            _ => Err(self.err(format!("value %{} is not a window", v.0))),
        }
    }

    /// The hook at byte offset `k` of the [`abi::Hooks`] table (an [`abi::hook`] constant).
    fn hook_fn(&mut self, k: i32) -> ClValue {
        let hooks = self
            .b
            .ins()
            .load(self.ptr, MemFlagsData::trusted(), self.ctx, CTX_HOOKS);
        self.b
            .ins()
            .load(self.ptr, MemFlagsData::trusted(), hooks, k)
    }

    fn call_hook(&mut self, k: i32, args: &[ClValue]) -> ClValue {
        let fp = self.hook_fn(k);
        let sig = self.hook_sigs[&k];
        let mut all = vec![self.ctx];
        all.extend_from_slice(args);
        let inst = self.b.ins().call_indirect(sig, fp, &all);
        self.b.inst_results(inst)[0]
    }

    /// Branches to the error exit when `status` is non-zero.
    fn check(&mut self, status: ClValue) {
        let cont = self.b.create_block();
        self.b
            .ins()
            .brif(status, self.err_block, &[status.into()], cont, &[]);
        self.b.switch_to_block(cont);
        self.b.seal_block(cont);
    }

    fn window_base(&mut self, id: ClValue) -> ClValue {
        self.call_hook(hook::WINDOW_BASE, &[id])
    }

    /// Emits `if cond { fault(site, a, b) -> return }`.
    fn fault_if(&mut self, cond: ClValue, msg: String, a: ClValue, bv: ClValue) {
        let site = self.sites.len() as i64;
        self.sites.push(msg);
        let fail = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(cond, fail, &[], cont, &[]);
        self.b.switch_to_block(fail);
        self.b.seal_block(fail);
        let s = self.b.ins().iconst(types::I32, site);
        let st = self.call_hook(hook::FAULT, &[s, a, bv]);
        self.b.ins().jump(self.err_block, &[st.into()]);
        self.b.switch_to_block(cont);
        self.b.seal_block(cont);
    }

    fn iconst(&mut self, v: i64) -> ClValue {
        self.b.ins().iconst(types::I64, v)
    }

    /// `for i in lo..hi { body(i) }` in Cranelift blocks.
    fn emit_loop(
        &mut self,
        lo: ClValue,
        hi: ClValue,
        body: &mut dyn FnMut(&mut Self, ClValue) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        let header = self.b.create_block();
        self.b.append_block_param(header, types::I64);
        let bb = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[lo.into()]);
        self.b.switch_to_block(header);
        let i = self.b.block_params(header)[0];
        let c = self.b.ins().icmp(IntCC::SignedLessThan, i, hi);
        self.b.ins().brif(c, bb, &[], exit, &[]);
        self.b.switch_to_block(bb);
        self.b.seal_block(bb);
        body(self, i)?;
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().jump(header, &[next.into()]);
        self.b.seal_block(header);
        self.b.switch_to_block(exit);
        self.b.seal_block(exit);
        Ok(())
    }

    /// `body(i)` for `i` in `0..count`: a loop, or straight-line code when `count` is 1 (a
    /// one-trip loop only costs a branch, and keeps Cranelift from hoisting what the body
    /// shares with the code around it).
    fn emit_counted(
        &mut self,
        count: u64,
        body: &mut dyn FnMut(&mut Self, ClValue) -> Result<(), CodegenError>,
    ) -> Result<(), CodegenError> {
        if count == 1 {
            let zero = self.iconst(0);
            return body(self, zero);
        }
        let lo = self.iconst(0);
        let hi = self.iconst(count as i64);
        self.emit_loop(lo, hi, body)
    }

    fn stack(&mut self, bytes: u64) -> ClValue {
        self.stack_bytes += bytes;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            bytes.max(1) as u32,
            4,
        ));
        self.b.ins().stack_addr(self.ptr, slot, 0)
    }

    fn block(&mut self, blk: &IrBlock) -> Result<(), CodegenError> {
        let plan = BlockPlan::of(self.f, blk, &self.uses, &self.equal);
        self.plan.views.extend(plan.views);
        self.plan.lazy.extend(plan.lazy);
        for (v, ld) in plan.strided.iter() {
            self.plan.strided.insert(v, *ld);
        }
        self.plan.direct.extend(plan.direct);
        self.in_place_reads
            .extend(control::reads_in_place(self.f, blk));
        self.into_vars
            .extend(control::results_into_vars(self.f, blk, &self.uses));
        self.transposed_b
            .extend(tile::transposed_operands(self.f, blk, &self.uses));
        for &id in &blk.ops {
            self.op(&self.f.ops[id])?;
        }
        Ok(())
    }

    /// Reports `phase` (0: start, 1: return) of the call at `site` to the `trace` hook when
    /// the runtime records a timeline (`ctx.trace` non-zero).
    fn trace_call(&mut self, site: ClValue, phase: i64) {
        let on = self
            .b
            .ins()
            .load(types::I64, MemFlagsData::trusted(), self.ctx, CTX_TRACE);
        let report = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(on, report, &[], cont, &[]);
        self.b.switch_to_block(report);
        self.b.seal_block(report);
        let ph = self.b.ins().iconst(types::I32, phase);
        self.call_hook(hook::TRACE, &[site, ph]);
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
        self.b.seal_block(cont);
    }

    /// A site naming synchronising or remote op `op` (``function `k`, op `...` (at ...)``),
    /// passed to its hook so the runtime's deadlock reports, races and timeouts name it.
    fn sync_site(&mut self, op: &Op) -> ClValue {
        let site = self.sites.len() as i64;
        let text = format!("function `{}`, {}", self.f.name, self.site_op(op));
        self.sites.push(text);
        self.b.ins().iconst(types::I32, site)
    }

    /// The op as a run-time check's message names it (text and source location).
    fn site_op(&self, op: &Op) -> String {
        crate::sites::name_op(&self.op_text(op), op.loc.as_ref())
    }

    fn op_text(&self, op: &Op) -> String {
        print_op(self.f, op)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    }

    /// Element pointer arithmetic: `base + idx * size`.
    fn elem_addr(&mut self, base: ClValue, idx: ClValue, size: usize) -> ClValue {
        let off = self.b.ins().imul_imm_s(idx, size as i64);
        self.b.ins().iadd(base, off)
    }

    fn op(&mut self, op: &Op) -> Result<(), CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        let out = match &op.kind {
            OpKind::Const(c) => {
                let Some(Type::Scalar(d)) = res_ty else {
                    return Err(self.err("constant without a scalar type"));
                };
                Some(Cv::S(self.constant(*c, d)))
            }
            OpKind::Dim(d) => {
                let n = d
                    .as_const()
                    .ok_or_else(|| self.err(format!("dim `{d}` is unbound; specialize first")))?;
                Some(Cv::S(self.iconst(n as i64)))
            }
            OpKind::Rank(_) => Some(Cv::S(self.b.ins().load(
                types::I64,
                MemFlagsData::trusted(),
                self.ctx,
                CTX_RANK,
            ))),
            OpKind::Binary(..)
            | OpKind::Unary(..)
            | OpKind::Fma(..)
            | OpKind::Cmp(..)
            | OpKind::Select(..)
            | OpKind::Cast(..)
            | OpKind::Bitcast(..) => Some(self.elementwise(op)?),
            OpKind::Slice { .. } | OpKind::Subview { .. } => self.lower_view(op)?,
            OpKind::Load { .. } | OpKind::Store { .. } => self.lower_load_store(op)?,
            OpKind::Elem { .. } | OpKind::SetElem { .. } => self.lower_element(op)?,
            OpKind::LocalArray => self.lower_local_array(op)?,
            OpKind::Tile(..) => self.lower_tile(op)?,
            OpKind::Math(..) => self.lower_math(op)?,
            OpKind::View { .. } => {
                return Err(self
                    .err("a block view reached the backend; specialize first (it lowers views)"))
            }
            OpKind::RemoteLoad { .. }
            | OpKind::RemoteStore { .. }
            | OpKind::Put { .. }
            | OpKind::Get { .. } => self.lower_remote(op)?,
            OpKind::Notify { .. } | OpKind::Wait { .. } | OpKind::Barrier(_) => {
                self.lower_signal(op)?
            }
            OpKind::TrapIf { cond, a, b, kind } => {
                let c = self.scalar(*cond)?;
                let (av, bv) = (self.scalar(*a)?, self.scalar(*b)?);
                let msg = crate::sites::trap(&self.f.name, &self.site_op(op), *kind);
                self.fault_if(c, msg, av, bv);
                None
            }
            OpKind::Var(_)
            | OpKind::Read(_)
            | OpKind::Write(..)
            | OpKind::For { .. }
            | OpKind::While { .. }
            | OpKind::If { .. }
            | OpKind::Call { .. } => self.lower_control(op)?,
            OpKind::WorldSize
            | OpKind::NRanks(_)
            | OpKind::Group { .. }
            | OpKind::Split { .. }
            | OpKind::WorldRank { .. }
            | OpKind::Broadcast { .. }
            | OpKind::AllGather { .. }
            | OpKind::ReduceScatter { .. }
            | OpKind::AllReduce { .. }
            | OpKind::AllToAll { .. }
            | OpKind::AllToAllV { .. }
            | OpKind::AllGatherV { .. }
            | OpKind::Dispatch { .. }
            | OpKind::AllocWindowBuffer
            | OpKind::Window(_) => {
                return Err(self.err(crate::sites::not_specialized(&op.kind, &self.op_text(op))))
            }
        };
        if let (Some(r), Some(cv)) = (op.result, out) {
            self.vals.insert(r, cv);
        }
        Ok(())
    }
}
