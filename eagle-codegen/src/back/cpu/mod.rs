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

use crate::abi::{self, hook, CTX_HOOKS, CTX_RANK};
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
use eagle_ir::{
    print_op, BinOp, Block as IrBlock, CmpOp, Const, DType, Function, FunctionFacts, Level, Op,
    OpKind, TileOp, Type, UnOp, Value,
};
use std::collections::{BTreeMap, HashMap, HashSet};

mod gemm;
mod tile;

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
        DType::Bool | DType::I8 | DType::U8 => types::I8,
        // `f16`/`bf16` only move (loads, stores, bitcasts to `u16`): specialization widens
        // every computation on them to `f32` (`eagle_ir::narrow`).
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
    for (_, name, addr) in gemm::symbols() {
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
    // The rustc-compiled GEMMs (`gemm.rs`): (dst, c or null, a, b, m, k, n); declared after
    // the module's own functions, which keep their ids.
    let mut gemm_sig = module.make_signature();
    gemm_sig.params.extend([AbiParam::new(ptr); 4]);
    gemm_sig.params.extend([AbiParam::new(types::I64); 3]);
    let mut gemm_ids = BTreeMap::new();
    for (_, name, _) in gemm::symbols() {
        let id = module
            .declare_function(name, Linkage::Import, &gemm_sig)
            .map_err(|e| CodegenError::Cranelift {
                function: String::new(),
                message: e.to_string(),
            })?;
        gemm_ids.insert(name, id);
    }

    let mut clif = BTreeMap::new();
    let mut sites = vec![];
    let mut code_bytes = 0usize;
    let mut ctx = module.make_context();
    let mut fctx = FunctionBuilderContext::new();
    for f in &funcs {
        ctx.func.signature = entry_sig.clone();
        lower_function(
            &mut module,
            &mut ctx,
            &mut fctx,
            f,
            spec.facts.function(&f.name),
            &ids,
            &gemm_ids,
            &mut sites,
            ptr,
        )?;
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
    Ok(CpuCode {
        _module: JitHolder(Some(module)),
        entries,
        clif,
        sites,
        code_bytes,
    })
}

#[allow(clippy::too_many_arguments)]
fn lower_function(
    module: &mut JITModule,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    f: &Function,
    facts: &FunctionFacts,
    ids: &BTreeMap<String, FuncId>,
    gemm_ids: &BTreeMap<&'static str, FuncId>,
    sites: &mut Vec<String>,
    ptr: ClType,
) -> Result<(), CodegenError> {
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
    // Only the GEMMs this function calls (an import in every function would be noise in the
    // CLIF snapshots).
    let mut gemm_refs = HashMap::new();
    f.body.walk(&mut |op| {
        if let (OpKind::Tile(TileOp::Matmul | TileOp::MatmulAcc, _), Some(r)) =
            (&op.kind, op.result)
        {
            if let Some(name) = f.ty(r).dtype().and_then(gemm::entry) {
                gemm_refs
                    .entry(name)
                    .or_insert_with(|| module.declare_func_in_func(gemm_ids[name], b.func));
            }
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

    let mut hook_sigs = HashMap::new();
    let mk = |params: &[ClType], ret: Option<ClType>| {
        let mut s = Signature::new(cfg.default_call_conv);
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
    ];
    for (k, s) in sigs {
        hook_sigs.insert(k, b.import_signature(s));
    }
    let mut lw = Lower {
        b,
        f,
        cfg,
        ptr,
        ctx: ctx_v,
        vals: HashMap::new(),
        err_block,
        hook_sigs,
        callee_refs,
        gemm_refs,
        sites,
        stack_bytes: 0,
        uses: use_counts(&f.body),
        equal: crate::passes::value_numbering::equal_values(f),
        facts,
        plan: BlockPlan::default(),
        lazy_ops: HashMap::new(),
        stored: HashSet::new(),
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
                let slot = lw.b.ins().load(i64t, MemFlagsData::trusted(), args_v, off);
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
                "its tiles need {} bytes of on-chip storage, more than the {} bytes a device function may use; tiles are small blocks: process the tensor in a `for` loop over tiles of a few thousand elements",
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
    lw.b.finalize(cfg);
    Ok(())
}

struct Lower<'a, 'b> {
    b: FunctionBuilder<'b>,
    f: &'a Function,
    cfg: TargetFrontendConfig,
    ptr: ClType,
    ctx: ClValue,
    vals: HashMap<Value, Cv>,
    err_block: Block,
    hook_sigs: HashMap<i32, SigRef>,
    callee_refs: HashMap<String, FuncRef>,
    /// The rustc-compiled float GEMMs ([`gemm`]), by symbol.
    gemm_refs: HashMap<&'static str, FuncRef>,
    sites: &'a mut Vec<String>,
    /// Bytes of tile storage (stack slots) so far.
    stack_bytes: u64,
    /// Use counts of every value of the function.
    uses: HashMap<Value, usize>,
    /// Values equal to an earlier one (`passes::value_numbering`): the in-place store
    /// compares offsets through it, so it holds however the source spells them.
    equal: HashMap<Value, Value>,
    /// What specialization proved about the function's values (ranges of offsets).
    facts: &'a FunctionFacts,
    /// Views, fused ops and in-place stores of the blocks lowered so far.
    plan: BlockPlan,
    /// Elementwise ops by result, for the fused-tree evaluators.
    lazy_ops: HashMap<Value, Op>,
    /// Elementwise results already written by their op into the store's destination.
    stored: HashSet<Value>,
}

impl Lower<'_, '_> {
    fn err(&self, msg: impl Into<String>) -> CodegenError {
        unsupported(self.f, msg)
    }

    fn cv(&self, v: Value) -> Result<Cv, CodegenError> {
        self.vals
            .get(&v)
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
        self.plan.direct.extend(plan.direct);
        for op in &blk.ops {
            self.op(op)?;
        }
        Ok(())
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
        let out =
            match &op.kind {
                OpKind::Const(c) => {
                    let Some(Type::Scalar(d)) = res_ty else {
                        return Err(self.err("constant without a scalar type"));
                    };
                    Some(Cv::S(self.constant(*c, d)))
                }
                OpKind::Dim(d) => {
                    let n = d.as_const().ok_or_else(|| {
                        self.err(format!("dim `{d}` is unbound; specialize first"))
                    })?;
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
                OpKind::Tile(..) => self.lower_tile(op)?,
                OpKind::Math(..) => return Err(self.err(
                    "a math-library op reached the backend; specialize first (it expands math ops)",
                )),
                OpKind::RemoteLoad { .. }
                | OpKind::RemoteStore { .. }
                | OpKind::Put { .. }
                | OpKind::Get { .. } => self.lower_remote(op)?,
                OpKind::Notify { .. } | OpKind::Wait { .. } | OpKind::Barrier(_) => {
                    self.lower_signal(op)?
                }
                OpKind::Var(_)
                | OpKind::Read(_)
                | OpKind::Write(..)
                | OpKind::For { .. }
                | OpKind::If { .. }
                | OpKind::Call { .. } => self.lower_control(op)?,
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
            };
        if let (Some(r), Some(cv)) = (op.result, out) {
            self.vals.insert(r, cv);
        }
        Ok(())
    }

    /// Slices and sub-views of tensors and windows.
    fn lower_view(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::Slice { src, index } => {
                let base = self.mem(*src)?;
                let st = f.ty(*src).clone();
                let dims = st.shape().and_then(|s| s.consts()).unwrap_or_default();
                let d = st.dtype().unwrap_or(DType::F32);
                let inner: u64 = dims.iter().skip(1).product();
                let idx = self.scalar(*index)?;
                let extent = dims.first().copied().unwrap_or(0);
                if !self.facts.in_bounds(*index, 1, extent) {
                    let bad = self.b.ins().icmp_imm_s(
                        IntCC::UnsignedGreaterThanOrEqual,
                        idx,
                        extent as i64,
                    );
                    let lim = self.iconst(extent as i64);
                    let msg = crate::sites::slice_index(&f.name, &self.site_op(op));
                    self.fault_if(bad, msg, idx, lim);
                }
                Some(Cv::Mem(self.elem_addr(
                    base,
                    idx,
                    (inner as usize) * d.size(),
                )))
            }
            OpKind::Subview { src, offset } => {
                let st = f.ty(*src).clone();
                let dims = st.shape().and_then(|s| s.consts()).unwrap_or_default();
                let d = st.dtype().unwrap_or(DType::F32);
                let len = res_ty
                    .as_ref()
                    .and_then(|t| t.shape()?.0.first()?.as_const())
                    .unwrap_or(0);
                let row_bytes = dims.iter().skip(1).product::<u64>() as usize * d.size();
                let off = self.scalar(*offset)?;
                let extent = dims.first().copied().unwrap_or(0);
                if !self.facts.in_bounds(*offset, len, extent) {
                    let limit = extent.saturating_sub(len) as i64;
                    let bad = self
                        .b
                        .ins()
                        .icmp_imm_s(IntCC::UnsignedGreaterThan, off, limit);
                    let lim = self.iconst(limit);
                    let msg = crate::sites::subview_offset(&f.name, &self.site_op(op), len, extent);
                    self.fault_if(bad, msg, off, lim);
                }
                let delta = self.b.ins().imul_imm_s(off, row_bytes as i64);
                Some(match self.cv(*src)? {
                    Cv::Mem(p) => Cv::Mem(self.b.ins().iadd(p, delta)),
                    Cv::Win(id, base, woff) => {
                        let b2 = self.b.ins().iadd(base, delta);
                        let o2 = self.b.ins().iadd(woff, delta);
                        Cv::Win(id, b2, o2)
                    }
                    _ => return Err(self.err("subview of a non-buffer")),
                })
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_view`",
                    other.info().name
                )))
            }
        })
    }

    /// Tells the runtime about the rows a tile `load` of `src` reads when `src` is a window
    /// (`hook::TRACK_READ`, one call per contiguous row; the `sim` race detector checks them).
    fn track_window_read(
        &mut self,
        op: &Op,
        src: Value,
        src_shape: &[u64],
        offs: &[ClValue],
        tile: &[u64],
        esize: usize,
    ) -> Result<(), CodegenError> {
        let Ok((id, woff)) = self.win(src) else {
            return Ok(());
        };
        let site = self.sync_site(op);
        self.copy_rows(tile, esize, &mut |lw, idx, bytes| {
            let s_off = lw.linear(src_shape, offs, idx, esize);
            let at = lw.b.ins().iadd(woff, s_off);
            let n = lw.iconst(bytes as i64);
            let st = lw.call_hook(hook::TRACK_READ, &[id, at, n, site]);
            lw.check(st);
            Ok(())
        })
    }

    /// Tile loads and stores (read in place, fused into a store, or copied).
    fn lower_load_store(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::Load { src, offsets }
                if op.result.is_some_and(|r| self.plan.views.contains(&r)) =>
            {
                // A view: the tile is read in place by the ops that use it (BlockPlan).
                let (Some(Type::Tile(ts, d)), Some(ss)) = (res_ty, f.ty(*src).shape()) else {
                    return Err(self.err("load without a tile result"));
                };
                let tile = ts.consts().unwrap_or_default();
                let src_shape = ss.consts().unwrap_or_default();
                let offs = self.offsets(op, offsets, &src_shape, &tile)?;
                self.track_window_read(op, *src, &src_shape, &offs, &tile, d.size())?;
                let zero: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
                let off = self.linear_with(&src_shape, &offs, &zero, d.size());
                let base = self.mem(*src)?;
                Some(Cv::Mem(self.b.ins().iadd(base, off)))
            }
            OpKind::Load { src, offsets } => {
                let Some(Type::Tile(ts, d)) = res_ty else {
                    return Err(self.err("load without a tile result"));
                };
                let tile = ts.consts().unwrap_or_default();
                let numel: u64 = tile.iter().product();
                let dst = self.stack(numel * d.size() as u64);
                let src_shape = f
                    .ty(*src)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &src_shape, &tile)?;
                self.track_window_read(op, *src, &src_shape, &offs, &tile, d.size())?;
                let src_p = self.mem(*src)?;
                self.copy_rows(&tile, d.size(), &mut |lw, idx, bytes| {
                    let s_off = lw.linear(&src_shape, &offs, idx, d.size());
                    let d_off = lw.linear_plain(&tile, idx, d.size());
                    let sp = lw.b.ins().iadd(src_p, s_off);
                    let dp = lw.b.ins().iadd(dst, d_off);
                    let n = lw.iconst(bytes as i64);
                    lw.b.call_memcpy(lw.cfg, dp, sp, n);
                    Ok(())
                })?;
                Some(Cv::Mem(dst))
            }
            OpKind::Store { value, .. } if self.stored.contains(value) => {
                // Already written in place by the elementwise op that computed `value`.
                None
            }
            OpKind::Store {
                value,
                dst,
                offsets,
            } => {
                let Type::Tile(ts, d) = f.ty(*value).clone() else {
                    return Err(self.err("store of a non-tile"));
                };
                let tile = ts.consts().unwrap_or_default();
                let dst_shape = f
                    .ty(*dst)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &dst_shape, &tile)?;
                let src_p = self.mem(*value)?;
                let dst_p = self.mem(*dst)?;
                let window = self.win(*dst).ok();
                self.copy_rows(&tile, d.size(), &mut |lw, idx, bytes| {
                    let d_off = lw.linear(&dst_shape, &offs, idx, d.size());
                    let s_off = lw.linear_plain(&tile, idx, d.size());
                    let sp = lw.b.ins().iadd(src_p, s_off);
                    let dp = lw.b.ins().iadd(dst_p, d_off);
                    let n = lw.iconst(bytes as i64);
                    lw.b.call_memcpy(lw.cfg, dp, sp, n);
                    if let Some((id, woff)) = window {
                        // A local write into symmetric memory: the runtime may track it.
                        let at = lw.b.ins().iadd(woff, d_off);
                        let st = lw.call_hook(hook::TRACK_WRITE, &[id, at, n]);
                        lw.check(st);
                    }
                    Ok(())
                })?;
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_load_store`",
                    other.info().name
                )))
            }
        })
    }

    /// Element reads and writes.
    fn lower_element(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        Ok(match &op.kind {
            OpKind::Elem { src, indices } => {
                let t = f.ty(*src).clone();
                let addr = self.elem_addr_of(op, *src, &t, indices)?;
                let d = t.dtype().unwrap_or(DType::F32);
                if let Ok((id, woff)) = self.win(*src) {
                    let base = self.mem(*src)?;
                    let rel = self.b.ins().isub(addr, base);
                    let at = self.b.ins().iadd(woff, rel);
                    let n = self.iconst(d.size() as i64);
                    let site = self.sync_site(op);
                    let st = self.call_hook(hook::TRACK_READ, &[id, at, n, site]);
                    self.check(st);
                }
                Some(Cv::S(self.b.ins().load(
                    cl_type(d),
                    MemFlagsData::trusted(),
                    addr,
                    0,
                )))
            }
            OpKind::SetElem {
                value,
                dst,
                indices,
            } => {
                let t = f.ty(*dst).clone();
                let addr = self.elem_addr_of(op, *dst, &t, indices)?;
                let x = self.scalar(*value)?;
                self.b.ins().store(MemFlagsData::trusted(), x, addr, 0);
                if let Ok((id, woff)) = self.win(*dst) {
                    let base = self.mem(*dst)?;
                    let rel = self.b.ins().isub(addr, base);
                    let at = self.b.ins().iadd(woff, rel);
                    let n = self.iconst(t.dtype().map_or(1, DType::size) as i64);
                    let st = self.call_hook(hook::TRACK_WRITE, &[id, at, n]);
                    self.check(st);
                }
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_element`",
                    other.info().name
                )))
            }
        })
    }

    /// Remote tile loads and stores, put and get (through the hooks).
    fn lower_remote(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::RemoteLoad { src, peer, offsets } => {
                let Some(Type::Tile(ts, d)) = res_ty else {
                    return Err(self.err("remote_load without a tile result"));
                };
                let tile = ts.consts().unwrap_or_default();
                let numel: u64 = tile.iter().product();
                let dst = self.stack(numel * d.size() as u64);
                let win_shape = f
                    .ty(*src)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &win_shape, &tile)?;
                let (id, woff) = self.win(*src)?;
                let peer = self.scalar(*peer)?;
                let site = self.sync_site(op);
                if op.result.is_some_and(|r| self.plan.views.contains(&r)) {
                    // A view: the peer's bytes are read in place where the runtime maps them
                    // (BlockPlan), else from the copy `get_view` makes into `dst`.
                    let zero: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
                    let rel = self.linear_with(&win_shape, &offs, &zero, d.size());
                    let at = self.b.ins().iadd(woff, rel);
                    let n = self.iconst((numel * d.size() as u64) as i64);
                    let p = self.call_hook(hook::GET_VIEW, &[id, peer, at, dst, n, site]);
                    let failed = self.b.ins().icmp_imm_u(IntCC::Equal, p, 0);
                    let st = self.b.ins().uextend(types::I32, failed);
                    self.check(st);
                    return Ok(Some(Cv::Mem(p)));
                }
                let rows = RemoteRows {
                    hook: hook::GET,
                    win: (id, woff),
                    peer,
                    local: dst,
                    win_shape: &win_shape,
                    offs: &offs,
                    tile: &tile,
                    esize: d.size(),
                    site,
                };
                self.remote_rows(&rows)?;
                Some(Cv::Mem(dst))
            }
            OpKind::RemoteStore {
                value,
                dst,
                peer,
                offsets,
            } => {
                let Type::Tile(ts, d) = f.ty(*value).clone() else {
                    return Err(self.err("remote_store of a non-tile"));
                };
                let tile = ts.consts().unwrap_or_default();
                let win_shape = f
                    .ty(*dst)
                    .shape()
                    .and_then(|s| s.consts())
                    .unwrap_or_default();
                let offs = self.offsets(op, offsets, &win_shape, &tile)?;
                let (id, woff) = self.win(*dst)?;
                let peer = self.scalar(*peer)?;
                let src_p = self.mem(*value)?;
                let site = self.sync_site(op);
                let rows = RemoteRows {
                    hook: hook::PUT,
                    win: (id, woff),
                    peer,
                    local: src_p,
                    win_shape: &win_shape,
                    offs: &offs,
                    tile: &tile,
                    esize: d.size(),
                    site,
                };
                self.remote_rows(&rows)?;
                None
            }
            OpKind::Put { dst, peer, src } | OpKind::Get { dst, peer, src } => {
                let is_put = matches!(op.kind, OpKind::Put { .. });
                let (win, local) = if is_put { (*dst, *src) } else { (*src, *dst) };
                let t = f.ty(win);
                let bytes = t.shape().and_then(|s| s.numel()).unwrap_or(0)
                    * t.dtype().map_or(0, |d| d.size() as u64);
                let (id, woff) = self.win(win)?;
                let lp = self.mem(local)?;
                let peer = self.scalar(*peer)?;
                let n = self.iconst(bytes as i64);
                let k = if is_put { hook::PUT } else { hook::GET };
                let site = self.sync_site(op);
                let st = self.call_hook(k, &[id, peer, woff, lp, n, site]);
                self.check(st);
                if let (false, Ok((lid, loff))) = (is_put, self.win(local)) {
                    let st = self.call_hook(hook::TRACK_WRITE, &[lid, loff, n]);
                    self.check(st);
                }
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_remote`",
                    other.info().name
                )))
            }
        })
    }

    /// Notify, wait and barrier (through the hooks).
    fn lower_signal(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        Ok(match &op.kind {
            OpKind::Notify {
                signal,
                peer,
                offsets,
                value,
                op: nop,
            } => {
                let t = f.ty(*signal).clone();
                let d = t.dtype().unwrap_or(DType::I32);
                let shape = t.shape().and_then(|s| s.consts()).unwrap_or_default();
                let ones = vec![1; shape.len()];
                let offs = self.offsets(op, offsets, &shape, &ones)?;
                let zero = self.iconst(0);
                let rel = self.linear_with(&shape, &offs, &vec![zero; shape.len()], d.size());
                let (id, woff) = self.win(*signal)?;
                let off = self.b.ins().iadd(rel, woff);
                let peer = self.scalar(*peer)?;
                let v = self.scalar(*value)?;
                let v = self.widen_i64(v, d);
                let kind = self.b.ins().iconst(types::I32, abi::SigKind::of(d) as i64);
                let o = self
                    .b
                    .ins()
                    .iconst(types::I32, abi::notify_code(*nop) as i64);
                let site = self.sync_site(op);
                let st = self.call_hook(hook::NOTIFY, &[id, peer, off, kind, v, o, site]);
                self.check(st);
                None
            }
            OpKind::Wait {
                signal,
                offsets,
                expected,
                cmp,
            } => {
                let t = f.ty(*signal).clone();
                let d = t.dtype().unwrap_or(DType::I32);
                let shape = t.shape().and_then(|s| s.consts()).unwrap_or_default();
                let ones = vec![1; shape.len()];
                let offs = self.offsets(op, offsets, &shape, &ones)?;
                let zero = self.iconst(0);
                let rel = self.linear_with(&shape, &offs, &vec![zero; shape.len()], d.size());
                let (id, woff) = self.win(*signal)?;
                let off = self.b.ins().iadd(rel, woff);
                let v = self.scalar(*expected)?;
                let v = self.widen_i64(v, d);
                let kind = self.b.ins().iconst(types::I32, abi::SigKind::of(d) as i64);
                let c = self.b.ins().iconst(types::I32, abi::cmp_code(*cmp) as i64);
                let site = self.sync_site(op);
                let st = self.call_hook(hook::WAIT, &[id, off, kind, v, c, site]);
                self.check(st);
                None
            }
            OpKind::Barrier(_) => {
                let site = self.sync_site(op);
                let st = self.call_hook(hook::BARRIER, &[site]);
                self.check(st);
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_signal`",
                    other.info().name
                )))
            }
        })
    }

    /// Variables, loops, branches and calls.
    fn lower_control(&mut self, op: &Op) -> Result<Option<Cv>, CodegenError> {
        let f = self.f;
        let res_ty = op.result.map(|r| f.ty(r).clone());
        Ok(match &op.kind {
            OpKind::Var(init) => {
                let Some(Type::Ref(t)) = res_ty else {
                    return Err(self.err("var without a ref type"));
                };
                match *t {
                    // A tile variable owns a stack tile; reads and writes copy.
                    Type::Tile(s, d) => {
                        let n = s.numel().unwrap_or(0);
                        let slot = self.stack(n * d.size() as u64);
                        let src = self.mem(*init)?;
                        self.copy_tile(slot, src, n, d)?;
                        Some(Cv::Mem(slot))
                    }
                    t => {
                        let d = t.dtype().unwrap_or(DType::Index);
                        let x = self.scalar(*init)?;
                        let var = self.b.declare_var(cl_type(d));
                        self.b.def_var(var, x);
                        Some(Cv::Var(var))
                    }
                }
            }
            OpKind::Read(v) => match f.ty(*v) {
                Type::Ref(t) if matches!(**t, Type::Tile(..)) => {
                    let (n, d) = (
                        t.shape().and_then(|s| s.numel()).unwrap_or(0),
                        t.dtype().unwrap_or(DType::F32),
                    );
                    let slot = self.stack(n * d.size() as u64);
                    let src = self.mem(*v)?;
                    self.copy_tile(slot, src, n, d)?;
                    Some(Cv::Mem(slot))
                }
                _ => Some(Cv::S(self.scalar(*v)?)),
            },
            OpKind::Write(v, x) if matches!(f.ty(*x), Type::Tile(..)) => {
                let t = f.ty(*x).clone();
                let (n, d) = (
                    t.shape().and_then(|s| s.numel()).unwrap_or(0),
                    t.dtype().unwrap_or(DType::F32),
                );
                let dst = self.mem(*v)?;
                let src = self.mem(*x)?;
                self.copy_tile(dst, src, n, d)?;
                None
            }
            OpKind::Write(v, x) => {
                let x = self.scalar(*x)?;
                let Cv::Var(var) = self.cv(*v)? else {
                    return Err(self.err("write to a non-variable"));
                };
                self.b.def_var(var, x);
                None
            }
            OpKind::For { var, lo, hi, body } => {
                let lo = self.scalar(*lo)?;
                let hi = self.scalar(*hi)?;
                let var = *var;
                self.emit_loop(lo, hi, &mut |lw, i| {
                    lw.vals.insert(var, Cv::S(i));
                    lw.block(body)
                })?;
                None
            }
            OpKind::If {
                cond,
                then_body,
                else_body,
            } => {
                let c = self.scalar(*cond)?;
                let tb = self.b.create_block();
                let eb = self.b.create_block();
                let merge = self.b.create_block();
                self.b.ins().brif(c, tb, &[], eb, &[]);
                self.b.switch_to_block(tb);
                self.b.seal_block(tb);
                self.block(then_body)?;
                self.b.ins().jump(merge, &[]);
                self.b.switch_to_block(eb);
                self.b.seal_block(eb);
                self.block(else_body)?;
                self.b.ins().jump(merge, &[]);
                self.b.switch_to_block(merge);
                self.b.seal_block(merge);
                None
            }
            OpKind::Call { callee, args } => {
                let callee_f = self
                    .callee_refs
                    .get(callee)
                    .copied()
                    .ok_or_else(|| self.err(format!("unknown callee `{callee}`")))?;
                let slots = self.stack((args.len().max(1) * 8) as u64);
                for (i, a) in args.iter().enumerate() {
                    let v = match self.cv(*a)? {
                        Cv::S(x) => x,
                        Cv::Var(var) => self.b.use_var(var),
                        Cv::Mem(p) => p,
                        Cv::Win(id, _, woff) => {
                            let hi = self.b.ins().ishl_imm_u(woff, 16);
                            self.b.ins().bor(hi, id)
                        }
                        Cv::Ctx => self.ctx,
                    };
                    self.b
                        .ins()
                        .store(MemFlagsData::trusted(), v, slots, (i * 8) as i32);
                }
                let inst = self.b.ins().call(callee_f, &[self.ctx, slots]);
                let st = self.b.inst_results(inst)[0];
                self.check(st);
                None
            }
            other => {
                return Err(self.err(format!(
                    "internal: `{}` is not lowered by `lower_control`",
                    other.info().name
                )))
            }
        })
    }

    /// Address of element `indices` of tensor or window `v` (bounds-checked when not constant).
    fn elem_addr_of(
        &mut self,
        op: &Op,
        v: Value,
        t: &Type,
        indices: &[Value],
    ) -> Result<ClValue, CodegenError> {
        let shape = t.shape().and_then(|s| s.consts()).unwrap_or_default();
        let ones = vec![1; shape.len()];
        let idx = self.offsets(op, indices, &shape, &ones)?;
        let esize = t.dtype().map_or(1, DType::size);
        let zero: Vec<ClValue> = (0..shape.len()).map(|_| self.iconst(0)).collect();
        let off = self.linear_with(&shape, &idx, &zero, esize);
        let base = self.mem(v)?;
        Ok(self.b.ins().iadd(base, off))
    }

    /// Lowers offsets, adding run-time bounds checks for those not constant.
    fn offsets(
        &mut self,
        op: &Op,
        offsets: &[Value],
        shape: &[u64],
        tile: &[u64],
    ) -> Result<Vec<ClValue>, CodegenError> {
        let mut out = vec![];
        for (d, &o) in offsets.iter().enumerate() {
            let x = self.scalar(o)?;
            let limit = shape[d].saturating_sub(tile[d]) as i64;
            // Proven in bounds by specialization's range analysis: no run-time check.
            if !self.facts.in_bounds(o, tile[d], shape[d]) {
                let bad = self
                    .b
                    .ins()
                    .icmp_imm_s(IntCC::UnsignedGreaterThan, x, limit);
                let lim = self.iconst(limit);
                let msg =
                    crate::sites::offset(&self.f.name, &self.site_op(op), d, tile[d], shape[d]);
                self.fault_if(bad, msg, x, lim);
            }
            out.push(x);
        }
        Ok(out)
    }

    /// Moves a tile between local memory and a peer's window, one `get` (window to local) or
    /// `put` (local to window) hook call per row of the tile.
    fn remote_rows(&mut self, r: &RemoteRows<'_>) -> Result<(), CodegenError> {
        let (id, woff) = r.win;
        self.copy_rows(r.tile, r.esize, &mut |lw, idx, bytes| {
            let w_rel = lw.linear(r.win_shape, r.offs, idx, r.esize);
            let w_off = lw.b.ins().iadd(w_rel, woff);
            let t_off = lw.linear_plain(r.tile, idx, r.esize);
            let local = lw.b.ins().iadd(r.local, t_off);
            let n = lw.iconst(bytes as i64);
            let st = lw.call_hook(r.hook, &[id, r.peer, w_off, local, n, r.site]);
            lw.check(st);
            Ok(())
        })
    }

    /// Calls `row(idx, bytes)` for each row of `tile` (all dims but the last), with `idx` the
    /// row's index in every leading dim (the last index is 0).
    fn copy_rows(
        &mut self,
        tile: &[u64],
        esize: usize,
        row: &mut RowFn<'_, Self>,
    ) -> Result<(), CodegenError> {
        let Some((&last, lead)) = tile.split_last() else {
            return Ok(());
        };
        let bytes = last * esize as u64;
        let rows: u64 = lead.iter().product();
        if rows == 1 {
            let zeros: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
            return row(self, &zeros, bytes);
        }
        let lead = lead.to_vec();
        let lo = self.iconst(0);
        let hi = self.iconst(rows as i64);
        self.emit_loop(lo, hi, &mut |lw, r| {
            let mut idx = vec![];
            let mut rem = r;
            for (k, _) in lead.iter().enumerate() {
                let stride: u64 = lead[k + 1..].iter().product();
                let q = lw.b.ins().udiv_imm_u(rem, stride as i64);
                rem = lw.b.ins().urem_imm_u(rem, stride as i64);
                idx.push(q);
            }
            idx.push(lw.iconst(0));
            row(lw, &idx, bytes)
        })
    }

    /// Byte offset of `offs + idx` in a row-major array of `shape`.
    fn linear(
        &mut self,
        shape: &[u64],
        offs: &[ClValue],
        idx: &[ClValue],
        esize: usize,
    ) -> ClValue {
        self.linear_with(shape, offs, idx, esize)
    }

    fn linear_with(
        &mut self,
        shape: &[u64],
        offs: &[ClValue],
        idx: &[ClValue],
        esize: usize,
    ) -> ClValue {
        let mut acc = self.iconst(0);
        for d in 0..shape.len() {
            let stride: u64 = shape[d + 1..].iter().product::<u64>() * esize as u64;
            let i = self.b.ins().iadd(offs[d], idx[d]);
            let t = self.b.ins().imul_imm_s(i, stride as i64);
            acc = self.b.ins().iadd(acc, t);
        }
        acc
    }

    /// Byte offset of `idx` in a row-major array of `shape`.
    fn linear_plain(&mut self, shape: &[u64], idx: &[ClValue], esize: usize) -> ClValue {
        let zeros: Vec<ClValue> = (0..shape.len()).map(|_| self.iconst(0)).collect();
        self.linear_with(shape, &zeros, idx, esize)
    }

    fn widen_i64(&mut self, v: ClValue, d: DType) -> ClValue {
        match d {
            DType::I8 | DType::I16 | DType::I32 => self.b.ins().sextend(types::I64, v),
            DType::U8 | DType::U16 | DType::U32 => self.b.ins().uextend(types::I64, v),
            _ => v,
        }
    }

    fn constant(&mut self, c: Const, d: DType) -> ClValue {
        match (c, d) {
            (Const::F32(x), _) => self.b.ins().f32const(x),
            (Const::F64(x), _) => self.b.ins().f64const(x),
            (Const::Bool(x), _) => self.b.ins().iconst(types::I8, x as i64),
            (Const::Int(i), d) => {
                let t = cl_type(d);
                let v = if t == types::I32 {
                    i as u32 as i64
                } else if t == types::I8 {
                    (i != 0) as i64
                } else {
                    i as i64
                };
                self.b.ins().iconst(t, v)
            }
        }
    }

    /// Lowers an elementwise op over scalars, or over tiles with scalars broadcast.
    /// Lowers an elementwise op: a scalar op on scalars; on tiles, one loop (SIMD where every
    /// op of the fused tree has an exact lane-wise form, then a scalar tail) that evaluates the
    /// op and every single-use elementwise op feeding it ([`BlockPlan`]), reading loaded tiles
    /// in place where they are views, and writing straight into the store's destination when
    /// the op feeds exactly one contiguous store. Lane-wise IEEE arithmetic, so the results are
    /// bit-identical to the scalar path.
    fn elementwise(&mut self, op: &Op) -> Result<Cv, CodegenError> {
        let f = self.f;
        let operands = op.kind.operands();
        let r = op
            .result
            .ok_or_else(|| self.err("elementwise op without result"))?;
        let rt = f.ty(r).clone();
        let in_dt: Vec<DType> = operands
            .iter()
            .map(|v| f.ty(*v).dtype().unwrap_or(DType::F32))
            .collect();
        match rt {
            Type::Scalar(rd) => {
                let xs = operands
                    .iter()
                    .map(|v| self.scalar(*v))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Cv::S(self.scalar_op(op, &xs, &in_dt, rd)?))
            }
            Type::Tile(shape, rd) => {
                if self.plan.lazy.contains(&r) {
                    // Evaluated inside its consumer's loop.
                    self.lazy_ops.insert(r, op.clone());
                    return Ok(Cv::Mem(self.iconst(0)));
                }
                let numel = shape.numel().unwrap_or(0);
                let mut track = None;
                let mut copy_back = None;
                let dst = match self.plan.direct.get(&r).cloned() {
                    Some(Direct {
                        store,
                        dst: dv,
                        offsets,
                        consts,
                        guard,
                    }) => {
                        for c in &consts {
                            self.op(c)?;
                        }
                        let dst_shape = f
                            .ty(dv)
                            .shape()
                            .and_then(|s| s.consts())
                            .unwrap_or_default();
                        let tile = shape.consts().unwrap_or_default();
                        let offs = self.offsets(&store, &offsets, &dst_shape, &tile)?;
                        let zero: Vec<ClValue> = (0..tile.len()).map(|_| self.iconst(0)).collect();
                        let off = self.linear_with(&dst_shape, &offs, &zero, rd.size());
                        let base = self.mem(dv)?;
                        self.stored.insert(r);
                        // A store into symmetric memory: the runtime may track it (after
                        // the loop, as the copying store does after its copy).
                        if let Ok((id, woff)) = self.win(dv) {
                            let at = self.b.ins().iadd(woff, off);
                            let n = self.iconst((numel * rd.size() as u64) as i64);
                            track = Some((id, at, n));
                        }
                        let direct = self.b.ins().iadd(base, off);
                        // Views feeding the tree may overlap the destination (a sub-view of
                        // it, another window over the same buffer): then the loop writes a
                        // stack tile, copied over the destination after it.
                        let bytes = numel * rd.size() as u64;
                        let overlap = if guard {
                            self.overlap_with_views(op, &tile, direct, bytes)?
                        } else {
                            None
                        };
                        match overlap {
                            Some(overlap) => {
                                let tmp = self.stack(bytes);
                                let n = self.iconst(bytes as i64);
                                copy_back = Some((overlap, tmp, direct, n));
                                self.b.ins().select(overlap, tmp, direct)
                            }
                            None => direct,
                        }
                    }
                    None => self.stack(numel * rd.size() as u64),
                };
                self.lazy_ops.insert(r, op.clone());
                // SIMD: one step covers `step` elements, every value of the DAG in 16-byte
                // parts of its own lane width (an f32 root over f64 math: 4 elements, two f64
                // parts per f64 value).
                let simd = if rd != DType::Bool {
                    self.simd_widths(r)
                } else {
                    None
                };
                let step = simd.as_ref().map_or(1, |w| {
                    16 / u64::from(w.values().copied().min().unwrap_or(16))
                });
                let nvec = if simd.is_some() { numel / step } else { 0 };
                let mut done = 0;
                if let (Some(widths), true) = (simd, nvec > 0) {
                    let mut splats = HashMap::new();
                    self.hoist_splats(r, &widths, &mut splats, &mut HashSet::new())?;
                    let rparts = (step * rd.size() as u64 / 16) as u32;
                    let rsize = rd.size() as i64;
                    // Unrolled by `unroll` steps, then the remaining whole steps.
                    // A large DAG is not unrolled: its values alone fill the registers. A
                    // small tile (a row of a matmul's B) is unrolled whole: no loop, so the
                    // addresses and splats it shares with an enclosing loop's other ops are
                    // computed once per trip of that loop, not once per step.
                    let unroll: u64 = if widths.len() > 24 {
                        1
                    } else if nvec <= FULL_UNROLL_STEPS
                        && nvec * widths.len() as u64 <= FULL_UNROLL_VALUES
                    {
                        nvec
                    } else {
                        4
                    };
                    let groups = nvec / unroll;
                    let emit = |lw: &mut Self, first: u64, count: u64, per: u64| {
                        lw.emit_counted(count, &mut |lw, i| {
                            let e = lw.b.ins().imul_imm_s(i, (step * per) as i64);
                            let base = lw.b.ins().iadd_imm_s(e, (step * first) as i64);
                            // The steps of a group share one address per leaf; each step
                            // is an immediate displacement from it.
                            for u in 0..per {
                                let e0 = Elem {
                                    base,
                                    skip: (step * u) as i32,
                                };
                                let mut memo = HashMap::new();
                                for part in 0..rparts {
                                    let x =
                                        lw.eval_vec(r, e0, part, &widths, &splats, &mut memo)?;
                                    let off = lw.b.ins().imul_imm_s(base, rsize);
                                    let a = lw.b.ins().iadd(dst, off);
                                    let flags = MemFlagsData::new().with_notrap();
                                    lw.b.ins().store(flags, x, a, e0.disp(rsize as u32, part));
                                }
                            }
                            Ok(())
                        })
                    };
                    if groups > 0 {
                        emit(self, 0, groups, unroll)?;
                    }
                    if nvec % unroll > 0 {
                        emit(self, groups * unroll, nvec % unroll, 1)?;
                    }
                    done = nvec * step;
                }
                if done < numel {
                    let lo = self.iconst(done as i64);
                    let hi = self.iconst(numel as i64);
                    self.emit_loop(lo, hi, &mut |lw, i| {
                        let x = lw.eval_scalar(r, i, &mut HashMap::new())?;
                        let a = lw.elem_addr(dst, i, rd.size());
                        lw.b.ins().store(MemFlagsData::trusted(), x, a, 0);
                        Ok(())
                    })?;
                }
                if let Some((overlap, tmp, direct, n)) = copy_back {
                    let copy = self.b.create_block();
                    let cont = self.b.create_block();
                    self.b.ins().brif(overlap, copy, &[], cont, &[]);
                    self.b.switch_to_block(copy);
                    self.b.seal_block(copy);
                    self.b.call_memcpy(self.cfg, direct, tmp, n);
                    self.b.ins().jump(cont, &[]);
                    self.b.switch_to_block(cont);
                    self.b.seal_block(cont);
                }
                if let Some((id, at, n)) = track {
                    let st = self.call_hook(hook::TRACK_WRITE, &[id, at, n]);
                    self.check(st);
                }
                // Materialised: later uses read the tile, they do not re-evaluate the tree.
                self.lazy_ops.remove(&r);
                Ok(Cv::Mem(dst))
            }
            t => Err(self.err(format!("elementwise result of type `{t}`"))),
        }
    }

    /// For an elementwise `root` about to be computed into `bytes` at `dst` (a store's
    /// destination): a run-time flag that some view (a load or remote load read in place)
    /// among the leaves of its fused tree overlaps the destination other than exactly (same
    /// start and shape: element `i` is read before it is written), or `None` when no leaf is
    /// a view. Views are addresses known only at run time (a sub-view, a second window over
    /// one buffer, a peer that is this rank), so the check is too.
    fn overlap_with_views(
        &mut self,
        root: &Op,
        shape: &[u64],
        dst: ClValue,
        bytes: u64,
    ) -> Result<Option<ClValue>, CodegenError> {
        let mut leaves = vec![];
        let mut stack = root.kind.operands();
        let mut seen = HashSet::new();
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if let Some(op) = self.lazy_ops.get(&v) {
                stack.extend(op.kind.operands());
            } else if self.plan.views.contains(&v) {
                leaves.push(v);
            }
        }
        if leaves.is_empty() {
            return Ok(None);
        }
        let f = self.f;
        let dend = self.b.ins().iadd_imm_s(dst, bytes as i64);
        let mut any = self.b.ins().iconst(types::I8, 0);
        for l in leaves {
            let (Type::Tile(ls, ld), lp) = (f.ty(l).clone(), self.mem(l)?) else {
                continue;
            };
            let lshape = ls.consts().unwrap_or_default();
            let lbytes = lshape.iter().product::<u64>() * ld.size() as u64;
            let lend = self.b.ins().iadd_imm_s(lp, lbytes as i64);
            let a = self.b.ins().icmp(IntCC::UnsignedLessThan, lp, dend);
            let b = self.b.ins().icmp(IntCC::UnsignedLessThan, dst, lend);
            let mut bad = self.b.ins().band(a, b);
            if lshape == shape && lbytes == bytes {
                let differ = self.b.ins().icmp(IntCC::NotEqual, lp, dst);
                bad = self.b.ins().band(bad, differ);
            }
            any = self.b.ins().bor(any, bad);
        }
        Ok(Some(any))
    }

    /// The lane width in bytes of every value of the fused DAG rooted at elementwise result
    /// `r` in its exact SIMD form (a `bool` mask has the width of the values it compares), or
    /// `None` when some op has none. The SIMD form computes what the scalar path does, lane by
    /// lane: IEEE arithmetic, compares as all-ones masks, `select` as a bit select, bit casts,
    /// and `f32` <-> `f64` conversions (exact one way, rounded to nearest even the other).
    fn simd_widths(&self, r: Value) -> Option<HashMap<Value, u32>> {
        let mut w = HashMap::new();
        self.simd_width(r, &mut w)?;
        Some(w)
    }

    fn simd_width(&self, v: Value, seen: &mut HashMap<Value, u32>) -> Option<u32> {
        if let Some(&w) = seen.get(&v) {
            return Some(w);
        }
        let d = self.f.ty(v).dtype()?;
        let lane = |d: DType| -> Option<u32> {
            (d != DType::Bool && !d.is_narrow()).then_some(d.size() as u32)
        };
        let w = match self.lazy_ops.get(&v) {
            // A leaf: a tile in memory, or a scalar splatted to every lane.
            None => lane(d)?,
            Some(op) => {
                let dt = |o: Value| self.f.ty(o).dtype();
                let scalar = |o: Value| matches!(self.f.ty(o), Type::Scalar(_));
                match &op.kind {
                    OpKind::Binary(b, x, y) => {
                        let ok = match b {
                            BinOp::Add | BinOp::Sub => d.is_float() || d.is_int(),
                            BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => d.is_float(),
                            BinOp::And | BinOp::Or | BinOp::Xor => d.is_int() || d == DType::Bool,
                            // A vector shift takes one amount for every lane: a scalar.
                            BinOp::Shl => d.is_int() && scalar(*y),
                            BinOp::Shr => d.is_int() && scalar(*y),
                            BinOp::Rem => false,
                        };
                        if !ok {
                            return None;
                        }
                        if matches!(b, BinOp::Shl | BinOp::Shr) {
                            let wx = self.simd_width(*x, seen)?;
                            (dt(*x) == Some(d)).then_some(wx)?
                        } else {
                            let (wx, wy) = (self.simd_width(*x, seen)?, self.simd_width(*y, seen)?);
                            let same = dt(*x) == Some(d) && dt(*y) == Some(d) && wx == wy;
                            same.then_some(wx)?
                        }
                    }
                    OpKind::Unary(u, x) => {
                        let ok = match u {
                            UnOp::Neg | UnOp::Abs | UnOp::Sqrt => d.is_float(),
                            UnOp::Not => d.is_int() || d == DType::Bool,
                        };
                        let wx = self.simd_width(*x, seen)?;
                        (ok && dt(*x) == Some(d)).then_some(wx)?
                    }
                    OpKind::Cmp(_, x, y) => {
                        let (wx, wy) = (self.simd_width(*x, seen)?, self.simd_width(*y, seen)?);
                        let dx = dt(*x)?;
                        (dx != DType::Bool && dt(*y) == Some(dx) && wx == wy).then_some(wx)?
                    }
                    OpKind::Select(m, x, y) => {
                        let wm = self.simd_width(*m, seen)?;
                        let (wx, wy) = (self.simd_width(*x, seen)?, self.simd_width(*y, seen)?);
                        let ok = dt(*x) == Some(d) && dt(*y) == Some(d) && wx == wy && wm == wx;
                        // A scalar condition is not a mask.
                        (ok && !scalar(*m)).then_some(wx)?
                    }
                    OpKind::Fma(a, b, c) => {
                        // Cranelift's vector `fma` rounds once per lane, as the scalar one does.
                        let wa = self.simd_width(*a, seen)?;
                        let (wb, wc) = (self.simd_width(*b, seen)?, self.simd_width(*c, seen)?);
                        let same = [*a, *b, *c].iter().all(|&o| dt(o) == Some(d));
                        (d.is_float() && same && wa == wb && wb == wc).then_some(wa)?
                    }
                    OpKind::Bitcast(x) => {
                        let wx = self.simd_width(*x, seen)?;
                        (lane(d)? == wx).then_some(wx)?
                    }
                    OpKind::Cast(x) => {
                        self.simd_width(*x, seen)?;
                        let from = dt(*x)?;
                        let ok = matches!(
                            (from, d),
                            (DType::F32, DType::F64) | (DType::F64, DType::F32)
                        );
                        ok.then_some(d.size() as u32)?
                    }
                    _ => return None,
                }
            }
        };
        seen.insert(v, w);
        Some(w)
    }

    /// The SIMD type of `v`'s parts: its dtype in lanes of `w` bytes (a mask: integers).
    fn simd_type(&self, v: Value, w: u32) -> ClType {
        let d = self.f.ty(v).dtype().unwrap_or(DType::F32);
        let lane = if d == DType::Bool {
            ClType::int(w as u16 * 8).unwrap_or(types::I64)
        } else {
            cl_type(d)
        };
        lane.by(16 / w).unwrap_or(types::I64X2)
    }

    /// Splats every scalar leaf of the DAG (not shift amounts) once, before the loop.
    fn hoist_splats(
        &mut self,
        v: Value,
        widths: &HashMap<Value, u32>,
        out: &mut HashMap<Value, ClValue>,
        seen: &mut HashSet<Value>,
    ) -> Result<(), CodegenError> {
        if let Some(op) = self.lazy_ops.get(&v).cloned() {
            let amount = match &op.kind {
                OpKind::Binary(BinOp::Shl | BinOp::Shr, _, y) => Some(*y),
                _ => None,
            };
            for o in op.kind.operands() {
                if Some(o) != amount && seen.insert(o) {
                    self.hoist_splats(o, widths, out, seen)?;
                }
            }
        } else if matches!(self.f.ty(v), Type::Scalar(_)) && !out.contains_key(&v) {
            let vty = self.simd_type(v, widths.get(&v).copied().unwrap_or(8));
            let x = self.scalar(v)?;
            let sp = self.b.ins().splat(vty, x);
            out.insert(v, sp);
        }
        Ok(())
    }

    /// Part `part` (16 bytes) of `v`'s lanes in the SIMD step starting at element `e0` of the
    /// fused DAG rooted at the elementwise result being lowered.
    fn eval_vec(
        &mut self,
        v: Value,
        e0: Elem,
        part: u32,
        widths: &HashMap<Value, u32>,
        splats: &HashMap<Value, ClValue>,
        memo: &mut HashMap<(Value, u32), ClValue>,
    ) -> Result<ClValue, CodegenError> {
        if let Some(sp) = splats.get(&v).or(memo.get(&(v, part))) {
            return Ok(*sp);
        }
        let x = self.eval_vec_uncached(v, e0, part, widths, splats, memo)?;
        memo.insert((v, part), x);
        Ok(x)
    }

    fn eval_vec_uncached(
        &mut self,
        v: Value,
        e0: Elem,
        part: u32,
        widths: &HashMap<Value, u32>,
        splats: &HashMap<Value, ClValue>,
        memo: &mut HashMap<(Value, u32), ClValue>,
    ) -> Result<ClValue, CodegenError> {
        let w = widths.get(&v).copied().unwrap_or(8);
        let vty = self.simd_type(v, w);
        let little = MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
        let Some(op) = self.lazy_ops.get(&v).cloned() else {
            let p = self.mem(v)?;
            let off = self.b.ins().imul_imm_s(e0.base, w as i64);
            let a = self.b.ins().iadd(p, off);
            let flags = MemFlagsData::new().with_notrap();
            return Ok(self.b.ins().load(vty, flags, a, e0.disp(w, part)));
        };
        let d = self.f.ty(v).dtype().unwrap_or(DType::F32);
        match &op.kind {
            OpKind::Cast(x) => {
                let wx = widths.get(x).copied().unwrap_or(8);
                return Ok(if wx < w {
                    // f32 -> f64: part `part` holds lanes 2*part%4.. of an f32 part.
                    let src = self.eval_vec(*x, e0, part / 2, widths, splats, memo)?;
                    let src = if part % 2 == 1 {
                        let b = self.b.ins().bitcast(types::I8X16, little, src);
                        let mask: Vec<u8> = (8..16).chain(0..8).collect();
                        let imm = self.b.func.dfg.immediates.push(mask.as_slice().into());
                        let sh = self.b.ins().shuffle(b, b, imm);
                        self.b.ins().bitcast(types::F32X4, little, sh)
                    } else {
                        src
                    };
                    self.b.ins().fvpromote_low(src)
                } else {
                    // f64 -> f32: two f64 parts demoted into one f32 part.
                    let lo = self.eval_vec(*x, e0, 2 * part, widths, splats, memo)?;
                    let hi = self.eval_vec(*x, e0, 2 * part + 1, widths, splats, memo)?;
                    let (lo, hi) = (self.b.ins().fvdemote(lo), self.b.ins().fvdemote(hi));
                    let lo = self.b.ins().bitcast(types::I64X2, little, lo);
                    let hi = self.b.ins().bitcast(types::I64X2, little, hi);
                    let h0 = self.b.ins().extractlane(hi, 0);
                    let both = self.b.ins().insertlane(lo, h0, 1);
                    self.b.ins().bitcast(types::F32X4, little, both)
                });
            }
            OpKind::Binary(b @ (BinOp::Shl | BinOp::Shr), x, y) => {
                let xv = self.eval_vec(*x, e0, part, widths, splats, memo)?;
                let amount = self.scalar(*y)?;
                // Cranelift masks a vector shift's amount to the lane width, as it does the
                // scalar one; `sshr.i64x2` has no SSE instruction and lowers to a short
                // sequence, still cheaper than leaving the whole DAG scalar.
                return Ok(match *b {
                    BinOp::Shl => self.b.ins().ishl(xv, amount),
                    _ if d.is_signed() => self.b.ins().sshr(xv, amount),
                    _ => self.b.ins().ushr(xv, amount),
                });
            }
            _ => {}
        }
        let xs = op
            .kind
            .operands()
            .into_iter()
            .map(|o| self.eval_vec(o, e0, part, widths, splats, memo))
            .collect::<Result<Vec<_>, _>>()?;
        if d.is_float() {
            if let OpKind::Binary(bop @ (BinOp::Min | BinOp::Max), ..) = &op.kind {
                return Ok(self.float_min_max(*bop, xs[0], xs[1]));
            }
        }
        Ok(match (&op.kind, d.is_float()) {
            (OpKind::Binary(BinOp::Add, ..), true) => self.b.ins().fadd(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Sub, ..), true) => self.b.ins().fsub(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Mul, ..), true) => self.b.ins().fmul(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Div, ..), true) => self.b.ins().fdiv(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Add, ..), false) => self.b.ins().iadd(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Sub, ..), false) => self.b.ins().isub(xs[0], xs[1]),
            (OpKind::Binary(BinOp::And, ..), _) => self.b.ins().band(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Or, ..), _) => self.b.ins().bor(xs[0], xs[1]),
            (OpKind::Binary(BinOp::Xor, ..), _) => self.b.ins().bxor(xs[0], xs[1]),
            (OpKind::Unary(UnOp::Neg, _), _) => self.b.ins().fneg(xs[0]),
            (OpKind::Unary(UnOp::Abs, _), _) => self.b.ins().fabs(xs[0]),
            (OpKind::Unary(UnOp::Sqrt, _), _) => self.b.ins().sqrt(xs[0]),
            (OpKind::Unary(UnOp::Not, _), _) => self.b.ins().bnot(xs[0]),
            (OpKind::Cmp(c, x, _), _) => {
                let dx = self.f.ty(*x).dtype().unwrap_or(DType::F64);
                if dx.is_float() {
                    self.b.ins().fcmp(float_cc(*c), xs[0], xs[1])
                } else {
                    self.b.ins().icmp(int_cc(*c, dx.is_signed()), xs[0], xs[1])
                }
            }
            (OpKind::Select(..), _) => {
                let m = self.b.ins().bitcast(vty, little, xs[0]);
                self.b.ins().bitselect(m, xs[1], xs[2])
            }
            (OpKind::Bitcast(_), _) => self.b.ins().bitcast(vty, little, xs[0]),
            (OpKind::Fma(..), true) => self.b.ins().fma(xs[0], xs[1], xs[2]),
            _ => return Err(self.err("op has no SIMD form")),
        })
    }

    /// Float `min`/`max` of scalars or SIMD vectors: Cranelift's `fmin`/`fmax` (IEEE 754-2019
    /// minimum/maximum), with a NaN result replaced by the canonical NaN of
    /// [`eagle_ir::eval::CANONICAL_NAN_F32`] / [`eagle_ir::eval::CANONICAL_NAN_F64`], whose bits
    /// would otherwise depend on the instruction selected and on the operand order.
    fn float_min_max(&mut self, bop: BinOp, a: ClValue, b: ClValue) -> ClValue {
        let r = if bop == BinOp::Min {
            self.b.ins().fmin(a, b)
        } else {
            self.b.ins().fmax(a, b)
        };
        let ty = self.b.func.dfg.value_type(r);
        let nan = if ty.lane_type() == types::F32 {
            self.b
                .ins()
                .f32const(f32::from_bits(eagle_ir::eval::CANONICAL_NAN_F32))
        } else {
            self.b
                .ins()
                .f64const(f64::from_bits(eagle_ir::eval::CANONICAL_NAN_F64))
        };
        let unordered = self.b.ins().fcmp(FloatCC::Unordered, r, r);
        if ty.is_vector() {
            let nans = self.b.ins().splat(ty, nan);
            let flags =
                MemFlagsData::new().with_endianness(cranelift_codegen::ir::Endianness::Little);
            let mask = self.b.ins().bitcast(ty, flags, unordered);
            self.b.ins().bitselect(mask, nans, r)
        } else {
            self.b.ins().select(unordered, nan, r)
        }
    }

    /// Element `i` of the fused tree rooted at `v`.
    /// The element `i` of the fused DAG rooted at `v`; `memo` holds the elements already
    /// computed for this `i` (a value with several users in the DAG is computed once).
    fn eval_scalar(
        &mut self,
        v: Value,
        i: ClValue,
        memo: &mut HashMap<Value, ClValue>,
    ) -> Result<ClValue, CodegenError> {
        if let Some(x) = memo.get(&v) {
            return Ok(*x);
        }
        let x = self.eval_scalar_uncached(v, i, memo)?;
        memo.insert(v, x);
        Ok(x)
    }

    fn eval_scalar_uncached(
        &mut self,
        v: Value,
        i: ClValue,
        memo: &mut HashMap<Value, ClValue>,
    ) -> Result<ClValue, CodegenError> {
        let Some(op) = self.lazy_ops.get(&v).cloned() else {
            return match (self.cv(v)?, self.f.ty(v)) {
                (Cv::Mem(p), Type::Tile(_, d)) => {
                    let d = *d;
                    let a = self.elem_addr(p, i, d.size());
                    Ok(self.b.ins().load(cl_type(d), MemFlagsData::trusted(), a, 0))
                }
                _ => self.scalar(v),
            };
        };
        let operands = op.kind.operands();
        let in_dt: Vec<DType> = operands
            .iter()
            .map(|o| self.f.ty(*o).dtype().unwrap_or(DType::F32))
            .collect();
        let xs = operands
            .into_iter()
            .map(|o| self.eval_scalar(o, i, memo))
            .collect::<Result<Vec<_>, _>>()?;
        let rd = self.f.ty(v).dtype().unwrap_or(DType::F32);
        self.scalar_op(&op, &xs, &in_dt, rd)
    }

    fn scalar_op(
        &mut self,
        op: &Op,
        xs: &[ClValue],
        in_dt: &[DType],
        rd: DType,
    ) -> Result<ClValue, CodegenError> {
        let d = in_dt.first().copied().unwrap_or(rd);
        Ok(match &op.kind {
            OpKind::Binary(bop, ..) => {
                let (a, b) = (xs[0], xs[1]);
                if d.is_float() {
                    match bop {
                        BinOp::Add => self.b.ins().fadd(a, b),
                        BinOp::Sub => self.b.ins().fsub(a, b),
                        BinOp::Mul => self.b.ins().fmul(a, b),
                        BinOp::Div => self.b.ins().fdiv(a, b),
                        BinOp::Min | BinOp::Max => self.float_min_max(*bop, a, b),
                        _ => return Err(self.err(format!("`{}` on floats", bop.name()))),
                    }
                } else {
                    let signed = d.is_signed();
                    match bop {
                        BinOp::Add => self.b.ins().iadd(a, b),
                        BinOp::Sub => self.b.ins().isub(a, b),
                        BinOp::Mul => self.b.ins().imul(a, b),
                        BinOp::Div | BinOp::Rem => {
                            let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                            let bb = self.widen_i64(b, d);
                            let ty = self.b.func.dfg.value_type(b);
                            let _ = ty;
                            let lim = self.iconst(0);
                            let msg =
                                crate::sites::division_by_zero(&self.f.name, &self.site_op(op));
                            self.fault_if(zero, msg, bb, lim);
                            if signed {
                                // x / -1 and x % -1 must not trap on the minimum value.
                                let m1 = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
                                let ty = self.b.func.dfg.value_type(b);
                                let one = self.b.ins().iconst(ty, 1);
                                let safe = self.b.ins().select(m1, one, b);
                                if *bop == BinOp::Div {
                                    let q = self.b.ins().sdiv(a, safe);
                                    let n = self.b.ins().ineg(a);
                                    self.b.ins().select(m1, n, q)
                                } else {
                                    let r = self.b.ins().srem(a, safe);
                                    let z = self.b.ins().iconst(ty, 0);
                                    self.b.ins().select(m1, z, r)
                                }
                            } else if *bop == BinOp::Div {
                                self.b.ins().udiv(a, b)
                            } else {
                                self.b.ins().urem(a, b)
                            }
                        }
                        BinOp::Min if signed => self.b.ins().smin(a, b),
                        BinOp::Min => self.b.ins().umin(a, b),
                        BinOp::Max if signed => self.b.ins().smax(a, b),
                        BinOp::Max => self.b.ins().umax(a, b),
                        BinOp::And => self.b.ins().band(a, b),
                        BinOp::Or => self.b.ins().bor(a, b),
                        BinOp::Xor => self.b.ins().bxor(a, b),
                        // Cranelift takes the amount modulo the width: `wrapping_shl`.
                        BinOp::Shl => self.b.ins().ishl(a, b),
                        BinOp::Shr if signed => self.b.ins().sshr(a, b),
                        BinOp::Shr => self.b.ins().ushr(a, b),
                    }
                }
            }
            OpKind::Unary(u, _) => {
                let a = xs[0];
                match (u, d.is_float()) {
                    (UnOp::Neg, true) => self.b.ins().fneg(a),
                    (UnOp::Neg, false) => self.b.ins().ineg(a),
                    (UnOp::Not, _) if d == DType::Bool => self.b.ins().bxor_imm_s(a, 1),
                    (UnOp::Not, _) => self.b.ins().bnot(a),
                    (UnOp::Sqrt, _) => self.b.ins().sqrt(a),
                    (UnOp::Abs, true) => self.b.ins().fabs(a),
                    (UnOp::Abs, false) if d.is_signed() => self.b.ins().iabs(a),
                    // `abs` of an unsigned integer is the integer (eagle_ir::eval::unary).
                    (UnOp::Abs, false) => a,
                }
            }
            OpKind::Fma(..) => self.b.ins().fma(xs[0], xs[1], xs[2]),
            OpKind::Cmp(c, ..) => {
                let (a, b) = (xs[0], xs[1]);
                if d.is_float() {
                    self.b.ins().fcmp(float_cc(*c), a, b)
                } else {
                    self.b.ins().icmp(int_cc(*c, d.is_signed()), a, b)
                }
            }
            OpKind::Select(..) => self.b.ins().select(xs[0], xs[1], xs[2]),
            OpKind::Cast(_) => self.cast(xs[0], d, rd),
            // A 16-bit float and a 16-bit integer share the register type.
            OpKind::Bitcast(_) if cl_type(d) == cl_type(rd) => xs[0],
            OpKind::Bitcast(_) => self
                .b
                .ins()
                .bitcast(cl_type(rd), MemFlagsData::new(), xs[0]),
            _ => return Err(self.err("not an elementwise op")),
        })
    }

    fn cast(&mut self, x: ClValue, from: DType, to: DType) -> ClValue {
        let (ft, tt) = (cl_type(from), cl_type(to));
        if from == to || (ft == tt && !from.is_float() && to != DType::Bool) {
            return x;
        }
        if to == DType::Bool {
            return if from.is_float() {
                let z = if ft == types::F32 {
                    self.b.ins().f32const(0.0)
                } else {
                    self.b.ins().f64const(0.0)
                };
                self.b.ins().fcmp(FloatCC::NotEqual, x, z)
            } else {
                self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
            };
        }
        match (from.is_float(), to.is_float()) {
            (true, true) => {
                if ft == types::F32 {
                    self.b.ins().fpromote(tt, x)
                } else {
                    self.b.ins().fdemote(tt, x)
                }
            }
            (false, true) => {
                if from.is_signed() {
                    self.b.ins().fcvt_from_sint(tt, x)
                } else {
                    self.b.ins().fcvt_from_uint(tt, x)
                }
            }
            (true, false) => {
                // Rust `as`: saturating, NaN to 0. `usize` (Index) saturates as an unsigned
                // type, so a negative float becomes index 0, as in Rust.
                if to.is_signed() && to != DType::Index {
                    self.b.ins().fcvt_to_sint_sat(tt, x)
                } else {
                    self.b.ins().fcvt_to_uint_sat(tt, x)
                }
            }
            (false, false) => {
                let (fb, tb) = (ft.bits(), tt.bits());
                if fb > tb {
                    self.b.ins().ireduce(tt, x)
                } else if from.is_signed() && from != DType::Bool {
                    self.b.ins().sextend(tt, x)
                } else {
                    self.b.ins().uextend(tt, x)
                }
            }
        }
    }
}

/// The Cranelift condition of a float comparison (ordered: false with a NaN, except `ne`).
fn float_cc(c: CmpOp) -> FloatCC {
    match c {
        CmpOp::Eq => FloatCC::Equal,
        CmpOp::Ne => FloatCC::NotEqual,
        CmpOp::Lt => FloatCC::LessThan,
        CmpOp::Le => FloatCC::LessThanOrEqual,
        CmpOp::Gt => FloatCC::GreaterThan,
        CmpOp::Ge => FloatCC::GreaterThanOrEqual,
    }
}

/// The Cranelift condition of an integer comparison of the given signedness.
fn int_cc(c: CmpOp, signed: bool) -> IntCC {
    match (c, signed) {
        (CmpOp::Eq, _) => IntCC::Equal,
        (CmpOp::Ne, _) => IntCC::NotEqual,
        (CmpOp::Lt, true) => IntCC::SignedLessThan,
        (CmpOp::Lt, false) => IntCC::UnsignedLessThan,
        (CmpOp::Le, true) => IntCC::SignedLessThanOrEqual,
        (CmpOp::Le, false) => IntCC::UnsignedLessThanOrEqual,
        (CmpOp::Gt, true) => IntCC::SignedGreaterThan,
        (CmpOp::Gt, false) => IntCC::UnsignedGreaterThan,
        (CmpOp::Ge, true) => IntCC::SignedGreaterThanOrEqual,
        (CmpOp::Ge, false) => IntCC::UnsignedGreaterThanOrEqual,
    }
}

/// Emits the copy of one row: (lowering, row index per dim, row bytes).
type RowFn<'r, L> = dyn FnMut(&mut L, &[ClValue], u64) -> Result<(), CodegenError> + 'r;

/// Whether a `tile` region of an array of `shape` is one contiguous run of memory.
fn contiguous(tile: &[u64], shape: &[u64]) -> bool {
    if tile.len() != shape.len() {
        return false;
    }
    match tile.iter().position(|&t| t > 1) {
        None => true,
        Some(first) => (first + 1..tile.len()).all(|d| tile[d] == shape[d]),
    }
}

/// The first element of one SIMD step of an elementwise tile: `base + skip` (an element
/// index), with `skip` a constant, so that the unrolled steps of a group address their leaves
/// from one run-time address each, by immediate displacements.
#[derive(Clone, Copy)]
struct Elem {
    base: ClValue,
    skip: i32,
}

impl Elem {
    /// The byte displacement of 16-byte part `part` of a value in lanes of `w` bytes.
    fn disp(self, w: u32, part: u32) -> i32 {
        self.skip * w as i32 + 16 * part as i32
    }
}

/// The most SIMD steps of one elementwise tile that are unrolled whole (16 steps: a row of
/// 64 f32 or 32 f64).
const FULL_UNROLL_STEPS: u64 = 16;

/// The most values (steps times DAG values) a whole unroll may emit.
const FULL_UNROLL_VALUES: u64 = 256;

/// How the tiles of one block are lowered without copies:
/// - `views`: loads read in place (contiguous, used only by elementwise ops and tile ops of
///   the block before any op that may write memory);
/// - `lazy`: single-use elementwise ops evaluated inside their consumer's loop;
/// - `direct`: elementwise results written straight into the destination of the contiguous
///   tensor or window store that follows them (only constants in between) when no view of
///   the same buffer at other offsets feeds them.
#[derive(Debug, Default)]
struct BlockPlan {
    views: HashSet<Value>,
    lazy: HashSet<Value>,
    direct: HashMap<Value, Direct>,
}

/// The store an elementwise result is computed into ([`BlockPlan::direct`]).
#[derive(Debug, Clone)]
struct Direct {
    /// The `store` op.
    store: Op,
    /// Its destination (a tensor or window).
    dst: Value,
    /// Its offsets.
    offsets: Vec<Value>,
    /// The constants between the result and the store, lowered with the result (the offsets
    /// need them); lowering them again where they stand is harmless.
    consts: Vec<Op>,
    /// Whether some view feeding the result may overlap the destination: checked at run
    /// time (`Lower::overlap_with_views`), falling back to a stack tile and a copy.
    guard: bool,
}

impl BlockPlan {
    fn of(
        f: &Function,
        b: &IrBlock,
        uses: &HashMap<Value, usize>,
        equal: &HashMap<Value, Value>,
    ) -> BlockPlan {
        let same = |a: &[Value], b: &[Value]| {
            let rep = |v: &Value| *equal.get(v).unwrap_or(v);
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| rep(x) == rep(y))
        };
        let ops = &b.ops;
        let mut users: HashMap<Value, Vec<usize>> = HashMap::new();
        for (k, op) in ops.iter().enumerate() {
            for v in op.kind.operands() {
                users.entry(v).or_default().push(k);
            }
        }
        let def_of: HashMap<Value, &Op> = ops
            .iter()
            .filter_map(|o| o.result.map(|r| (r, o)))
            .collect();
        let writes_between = |a: usize, z: usize| (a + 1..z).any(|k| may_write(&ops[k].kind));
        let sources = view_sources(f);
        let root = |mut v: Value| {
            while let Some(&s) = sources.get(&v) {
                v = s;
            }
            v
        };
        let tile_of = |v: Value| matches!(f.ty(v), Type::Tile(..));
        let mut plan = BlockPlan::default();
        for r in fusion_roots(f, ops, uses, |_| true).into_keys() {
            plan.lazy.insert(r);
        }
        // Where each elementwise result is materialised (its own op, or its consumer's).
        let mut mat: HashMap<Value, usize> = HashMap::new();
        for (k, op) in ops.iter().enumerate().rev() {
            if let Some(r) = op.result {
                if is_elementwise(&op.kind) {
                    let at = if plan.lazy.contains(&r) {
                        users
                            .get(&r)
                            .and_then(|u| u.first())
                            .and_then(|&c| ops[c].result)
                            .and_then(|c| mat.get(&c).copied())
                            .unwrap_or(k)
                    } else {
                        k
                    };
                    mat.insert(r, at);
                }
            }
        }
        // Loads (and remote loads, through `get_view`) read in place.
        for (k, op) in ops.iter().enumerate() {
            let (Some(r), OpKind::Load { src, .. } | OpKind::RemoteLoad { src, .. }) =
                (op.result, &op.kind)
            else {
                continue;
            };
            let (Some(ts), Some(ss)) = (
                f.ty(r).shape().and_then(|s| s.consts()),
                f.ty(*src).shape().and_then(|s| s.consts()),
            ) else {
                continue;
            };
            let us = users.get(&r).cloned().unwrap_or_default();
            if us.is_empty()
                || uses.get(&r).copied().unwrap_or(0) != us.len()
                || !contiguous(&ts, &ss)
            {
                continue;
            }
            let mut last = k;
            let mut ok = true;
            for &u in &us {
                // A tile op reads its operands where it stands (`reshape` passes its
                // operand's memory on, so it takes a copy).
                let read_at = match &ops[u].kind {
                    OpKind::Tile(t, _) if *t != eagle_ir::TileOp::Reshape => Some(u),
                    k if is_elementwise(k) => ops[u].result.and_then(|x| mat.get(&x).copied()),
                    _ => None,
                };
                match read_at {
                    Some(m) => last = last.max(m),
                    None => ok = false,
                }
            }
            if ok && !writes_between(k, last) {
                plan.views.insert(r);
            }
        }
        // In-place stores.
        let base = |mut v: Value| -> Value {
            let defs: HashMap<Value, &OpKind> = ops
                .iter()
                .filter_map(|o| o.result.map(|r| (r, &o.kind)))
                .collect();
            while let Some(OpKind::Slice { src, .. } | OpKind::Subview { src, .. }) = defs.get(&v) {
                v = *src;
            }
            v
        };
        for (k, op) in ops.iter().enumerate() {
            let Some(r) = op.result else { continue };
            if !is_elementwise(&op.kind)
                || !tile_of(r)
                || plan.lazy.contains(&r)
                || uses.get(&r) != Some(&1)
            {
                continue;
            }
            // The store's offsets are often constants defined between the two: they are
            // lowered early, with the root (`BlockPlan::direct`).
            let consts: Vec<Op> = ops[k + 1..]
                .iter()
                .take_while(|o| matches!(o.kind, OpKind::Const(_)))
                .cloned()
                .collect();
            let Some(next) = ops.get(k + 1 + consts.len()) else {
                continue;
            };
            let OpKind::Store {
                value,
                dst,
                offsets,
            } = &next.kind
            else {
                continue;
            };
            if *value != r || !matches!(f.ty(*dst), Type::Tensor(..) | Type::Window(..)) {
                continue;
            }
            let (Some(ts), Some(ds)) = (
                f.ty(r).shape().and_then(|s| s.consts()),
                f.ty(*dst).shape().and_then(|s| s.consts()),
            ) else {
                continue;
            };
            if !contiguous(&ts, &ds) {
                continue;
            }
            // Leaves of the fused tree that are views of the same buffer at other offsets
            // would be overwritten before they are read: not direct. A view that is not
            // provably disjoint from the destination or exactly on it (same buffer value,
            // offsets and shape) gets a run-time overlap check (`guard`): sub-views and
            // windows (two windows may share a buffer) can overlap in ways only addresses tell.
            // Distinct tensor parameters never overlap (the platforms copy inputs that would).
            let mut stack = vec![r];
            let mut seen = HashSet::new();
            let mut safe = true;
            let mut guard = false;
            while let Some(v) = stack.pop() {
                if !seen.insert(v) {
                    continue; // a DAG: each value once
                }
                let Some(d) = def_of.get(&v) else {
                    continue;
                };
                if plan.lazy.contains(&v) || v == r {
                    stack.extend(d.kind.operands());
                } else if let OpKind::Load { src, offsets: lo }
                | OpKind::RemoteLoad {
                    src, offsets: lo, ..
                } = &d.kind
                {
                    if !plan.views.contains(&v) {
                        continue;
                    }
                    if base(*src) == base(*dst) && !same(lo, offsets) {
                        safe = false;
                    }
                    let exact = same(&[*src], &[*dst])
                        && same(lo, offsets)
                        && f.ty(v).shape() == f.ty(r).shape();
                    let (rs, rd) = (root(*src), root(*dst));
                    let tensor_param = |x: Value| {
                        f.params.iter().any(|p| p.value == x) && matches!(f.ty(x), Type::Tensor(..))
                    };
                    let disjoint = rs != rd && tensor_param(rs) && tensor_param(rd);
                    guard |= !exact && !disjoint;
                }
            }
            if safe {
                plan.direct.insert(
                    r,
                    Direct {
                        store: next.clone(),
                        dst: *dst,
                        offsets: offsets.clone(),
                        consts,
                        guard,
                    },
                );
            }
        }
        plan
    }
}

/// The buffer every sub-view and slice of `f` views (through chains of them), by result.
fn view_sources(f: &Function) -> HashMap<Value, Value> {
    let mut out = HashMap::new();
    f.body.walk(&mut |op| {
        if let (OpKind::Slice { src, .. } | OpKind::Subview { src, .. }, Some(r)) =
            (&op.kind, op.result)
        {
            out.insert(r, *src);
        }
    });
    out
}
