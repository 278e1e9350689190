//! Platform `cuda`: artifacts run on NVIDIA GPUs through the driver API, loaded at run time.
//!
//! - The driver (`libcuda.so.1`) is looked for before any call into it: a machine without one
//!   gets [`RuntimeError::NoCudaDriver`], never a panic.
//! - Each rank runs its per-device programs on GPU `devices[rank]` (several ranks may share a
//!   GPU), from its own host thread and non-blocking stream, one block per program.
//! - The CUDA C of the artifact is compiled to PTX by NVRTC for each device's compute capability
//!   (cached per source and architecture), and loaded once per (device, artifact).
//! - **Staged through the host:** window buffers, signals, the barrier and the failure record live
//!   in pinned, mapped host memory that every GPU addresses directly (unified addressing), so
//!   put/get, remote loads and stores, notify/wait and barriers between ranks travel over the
//!   host link. Tensor arguments are copied to device memory before a dispatch and outputs back
//!   after it.

use crate::error::RuntimeError;
use crate::host::{JobArg, RunReport};
use crate::{Arg, RunOptions};
use cudarc::driver::{result as cu, sys};
use eagle_codegen::cuda::{CudaCode, EntryKind, BLOCK_THREADS};
use eagle_codegen::Artifact;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Whether a CUDA driver library can be loaded (checked without calling into it).
pub fn driver_available() -> bool {
    // SAFETY: only tries to open the library under its candidate names.
    unsafe { sys::is_culib_present() }
}

fn no_driver() -> RuntimeError {
    RuntimeError::NoCudaDriver {
        detail: "libcuda.so.1 is not on the library path".into(),
    }
}

fn driver_err(call: &str, e: cu::DriverError) -> RuntimeError {
    RuntimeError::Cuda {
        call: call.to_string(),
        message: format!("{e:?}"),
    }
}

/// Initialises the driver once.
fn init() -> Result<(), RuntimeError> {
    static INIT: OnceLock<Result<(), RuntimeError>> = OnceLock::new();
    if !driver_available() {
        return Err(no_driver());
    }
    INIT.get_or_init(|| cu::init().map_err(|e| driver_err("cuInit", e)))
        .clone()
}

/// The number of CUDA devices.
///
/// # Errors
/// [`RuntimeError::NoCudaDriver`] without a driver; [`RuntimeError::Cuda`] when the driver
/// fails (for example no device is visible).
pub fn device_count() -> Result<usize, RuntimeError> {
    init()?;
    cu::device::get_count()
        .map(|n| n.max(0) as usize)
        .map_err(|e| driver_err("cuDeviceGetCount", e))
}

/// The name of device `ordinal` and its virtual architecture (`compute_90`).
///
/// # Errors
/// As [`device_count`], and [`RuntimeError::Devices`] for an ordinal the machine lacks.
pub fn device_info(ordinal: usize) -> Result<(String, String), RuntimeError> {
    let n = device_count()?;
    if ordinal >= n {
        return Err(RuntimeError::Devices(format!(
            "device {ordinal} does not exist: this machine has {n} CUDA device(s), 0 to {}",
            n.saturating_sub(1)
        )));
    }
    let dev = cu::device::get(ordinal as i32).map_err(|e| driver_err("cuDeviceGet", e))?;
    let name = cu::device::get_name(dev).map_err(|e| driver_err("cuDeviceGetName", e))?;
    let attr = |a| {
        // SAFETY: `dev` came from `cuDeviceGet`.
        unsafe { cu::device::get_attribute(dev, a) }
            .map_err(|e| driver_err("cuDeviceGetAttribute", e))
    };
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok((name, format!("compute_{major}{minor}")))
}

/// Makes the primary context of `ordinal` current on this thread.
fn bind(ordinal: usize) -> Result<(), RuntimeError> {
    init()?;
    let dev = cu::device::get(ordinal as i32).map_err(|e| driver_err("cuDeviceGet", e))?;
    // SAFETY: `dev` is a valid device; the primary context is retained for the process (never
    // released) and made current on this thread only.
    unsafe {
        let ctx =
            cu::primary_ctx::retain(dev).map_err(|e| driver_err("cuDevicePrimaryCtxRetain", e))?;
        cu::ctx::set_current(ctx).map_err(|e| driver_err("cuCtxSetCurrent", e))
    }
}

/// A loaded module (raw driver handle; modules live as long as the process).
#[derive(Clone, Copy)]
struct Loaded(sys::CUmodule);
// SAFETY: a CUmodule handle may be used from any thread whose current context owns it; the
// cache keys modules by device, and every use binds that device's primary context first.
unsafe impl Send for Loaded {}

/// The module of `code` on device `ordinal` (compiled by NVRTC and loaded once).
fn module(code: &CudaCode, ordinal: usize) -> Result<sys::CUmodule, RuntimeError> {
    static MODULES: OnceLock<Mutex<HashMap<(usize, u64), Loaded>>> = OnceLock::new();
    let key = (ordinal, eagle_codegen::fnv1a(code.source.as_bytes()));
    let cache = MODULES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = c.get(&key) {
        return Ok(m.0);
    }
    let (_, arch) = device_info(ordinal)?;
    let ptx = eagle_codegen::cuda::compile_ptx(code, &arch)
        .map_err(|e| RuntimeError::CudaCompile(e.to_string()))?;
    let image =
        CString::new(ptx.as_bytes()).map_err(|e| RuntimeError::CudaCompile(e.to_string()))?;
    bind(ordinal)?;
    // SAFETY: `image` is a NUL-terminated PTX text; the context of `ordinal` is current.
    let m = unsafe { cu::module::load_data(image.as_ptr().cast()) }
        .map_err(|e| driver_err("cuModuleLoadData", e))?;
    c.insert(key, Loaded(m));
    Ok(m)
}

fn function(m: sys::CUmodule, symbol: &str) -> Result<sys::CUfunction, RuntimeError> {
    let name = CString::new(symbol).map_err(|e| RuntimeError::CudaCompile(e.to_string()))?;
    // SAFETY: `m` is a loaded module whose context is current.
    unsafe { cu::module::get_function(m, name) }
        .map_err(|e| driver_err(&format!("cuModuleGetFunction({symbol})"), e))
}

/// Pinned host memory mapped into every device's address space (zeroed).
struct Pinned {
    ptr: *mut u8,
}

impl Pinned {
    fn new(bytes: usize) -> Result<Pinned, RuntimeError> {
        let bytes = bytes.max(8);
        // SAFETY: allocates `bytes` of pinned memory; it is zeroed before use and freed once in
        // `Drop`.
        let ptr = unsafe {
            cu::malloc_host(
                bytes,
                sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP,
            )
        }
        .map_err(|e| driver_err("cuMemHostAlloc", e))?
        .cast::<u8>();
        // SAFETY: `ptr` points to `bytes` writable bytes.
        unsafe { std::ptr::write_bytes(ptr, 0, bytes) };
        Ok(Pinned { ptr })
    }
    /// The address devices use (the host address, under unified addressing).
    fn dev(&self) -> u64 {
        self.ptr as u64
    }
}

// SAFETY: the allocation is process-wide pinned memory; concurrent access from host threads
// and devices goes through volatile reads/writes of words that devices update atomically.
unsafe impl Send for Pinned {}
// SAFETY: as above.
unsafe impl Sync for Pinned {}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `cuMemHostAlloc` and is freed once.
        let _ = unsafe { cu::free_host(self.ptr.cast()) };
    }
}

/// Device memory, freed on drop (the owning context must be current).
struct DevBuf(sys::CUdeviceptr);

impl DevBuf {
    fn upload(bytes: &[u8], len: usize) -> Result<DevBuf, RuntimeError> {
        // SAFETY: allocates at least 8 bytes in the current context.
        let p = unsafe { cu::malloc_sync(len.max(8)) }.map_err(|e| driver_err("cuMemAlloc", e))?;
        let b = DevBuf(p);
        if !bytes.is_empty() {
            // SAFETY: `p` holds at least `bytes.len()` bytes.
            unsafe { cu::memcpy_htod_sync(p, bytes) }.map_err(|e| driver_err("cuMemcpyHtoD", e))?;
        }
        Ok(b)
    }
    fn download(&self, out: &mut [u8]) -> Result<(), RuntimeError> {
        // SAFETY: the buffer holds at least `out.len()` bytes.
        unsafe { cu::memcpy_dtoh_sync(out, self.0) }.map_err(|e| driver_err("cuMemcpyDtoH", e))
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by `cuMemAlloc`, freed once.
        let _ = unsafe { cu::free_sync(self.0) };
    }
}

/// The failure record, abort flag and barrier words shared by every rank of a run
/// (`eg_err` then `abort`, `bar_count`, `bar_gen` in the prelude's layout).
struct Shared {
    mem: Pinned,
}

const ERR_BYTES: usize = 32;

impl Shared {
    fn new() -> Result<Shared, RuntimeError> {
        Ok(Shared {
            mem: Pinned::new(ERR_BYTES + 16)?,
        })
    }
    fn err(&self) -> u64 {
        self.mem.dev()
    }
    fn abort(&self) -> u64 {
        self.mem.dev() + ERR_BYTES as u64
    }
    fn bar_count(&self) -> u64 {
        self.abort() + 4
    }
    fn bar_gen(&self) -> u64 {
        self.abort() + 8
    }
    /// (status, site, rank, a, b) of the first failure.
    fn failure(&self) -> Option<(i32, usize, i64, i64)> {
        let p = self.mem.ptr;
        // SAFETY: the record is 32 bytes at the start of the allocation; devices write it with
        // system-scope atomics and fences, and every kernel has finished or been abandoned.
        unsafe {
            let status = std::ptr::read_volatile(p.cast::<i32>());
            if status == 0 {
                return None;
            }
            let site = std::ptr::read_volatile(p.add(4).cast::<i32>());
            let rank = std::ptr::read_volatile(p.add(8).cast::<i32>());
            let a = std::ptr::read_volatile(p.add(16).cast::<i64>());
            let b = std::ptr::read_volatile(p.add(24).cast::<i64>());
            Some((site, rank.max(0) as usize, a, b))
        }
    }
    fn set_abort(&self) {
        // SAFETY: the abort word lies inside the allocation.
        unsafe { std::ptr::write_volatile((self.mem.ptr.add(ERR_BYTES)).cast::<i32>(), 1) };
    }
}

/// Writes the `eg_rt` record of `rank` (prelude layout, 56 bytes).
fn rt_record(
    shared: &Shared,
    rank: usize,
    p: usize,
    timeout: Duration,
) -> Result<Pinned, RuntimeError> {
    let m = Pinned::new(56)?;
    let words: [u64; 7] = [
        rank as u64,
        p as u64,
        shared.err(),
        shared.abort(),
        shared.bar_count(),
        shared.bar_gen(),
        u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX),
    ];
    // SAFETY: the allocation holds 56 bytes, aligned for u64.
    unsafe { std::ptr::copy_nonoverlapping(words.as_ptr(), m.ptr.cast::<u64>(), 7) };
    Ok(m)
}

fn launch(
    f: sys::CUfunction,
    grid: u32,
    block: u32,
    stream: sys::CUstream,
    rt: u64,
    slots: u64,
) -> Result<(), RuntimeError> {
    let mut rt = rt;
    let mut slots = slots;
    let mut params: [*mut c_void; 2] = [
        (&mut rt as *mut u64).cast(),
        (&mut slots as *mut u64).cast(),
    ];
    // SAFETY: every entry point takes exactly (const eg_rt*, const unsigned long long*), two
    // 8-byte parameters; both point to pinned memory that outlives the launch (the caller
    // synchronizes the stream before freeing it).
    unsafe { cu::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, stream, &mut params) }
        .map_err(|e| driver_err("cuLaunchKernel", e))?;
    // SAFETY: `stream` is a live stream of the current context.
    unsafe { cu::stream::synchronize(stream) }.map_err(|e| driver_err("cuStreamSynchronize", e))
}

fn failure_error(code: &CudaCode, shared: &Shared) -> Option<RuntimeError> {
    shared
        .failure()
        .map(|(site, rank, a, b)| RuntimeError::RankFailed {
            rank,
            message: format!("{} (on the GPU)", code.fault_message(site, a, b)),
        })
}

fn cuda_code(art: &Artifact) -> Result<&CudaCode, RuntimeError> {
    art.cuda.as_ref().ok_or_else(|| {
        RuntimeError::CudaCompile(format!(
            "artifact of `{}` was compiled for target `{}`, which has no CUDA C; compile it for `cuda`",
            art.root,
            art.target.name()
        ))
    })
}

/// Runs the dispatches of a host program on GPUs `devices` (rank r on `devices[r]`), with the
/// windows of the run in pinned host memory. Called by [`crate::run_with`].
pub(crate) fn run(
    art: &Artifact,
    args: &mut [Arg<'_>],
    p: usize,
    jobs: Vec<Vec<crate::host::Job>>,
    windows: Vec<(usize, usize, String)>,
    opts: &RunOptions,
) -> Result<RunReport, RuntimeError> {
    let code = cuda_code(art)?;
    let devices: Vec<usize> = if opts.devices.is_empty() {
        vec![0; p]
    } else {
        opts.devices.clone()
    };
    if devices.len() != p {
        return Err(RuntimeError::Devices(format!(
            "{} device(s) for {p} rank(s); give one device per rank",
            devices.len()
        )));
    }
    for &d in &devices {
        device_info(d)?;
        module(code, d)?;
    }
    let t0 = Instant::now();
    let shared = Shared::new()?;
    // Window memory: one allocation per rank, and a table of the P base addresses.
    let mut win_mem: Vec<Vec<Pinned>> = vec![];
    let mut win_tables: Vec<Pinned> = vec![];
    for (bytes, _, _) in &windows {
        let per_rank = (0..p)
            .map(|_| Pinned::new(*bytes))
            .collect::<Result<Vec<_>, _>>()?;
        let table = Pinned::new(8 * p)?;
        for (r, m) in per_rank.iter().enumerate() {
            // SAFETY: the table holds `p` u64 slots.
            unsafe { std::ptr::write(table.ptr.cast::<u64>().add(r), m.dev()) };
        }
        win_mem.push(per_rank);
        win_tables.push(table);
    }
    let tables: Vec<u64> = win_tables.iter().map(Pinned::dev).collect();
    let failed = AtomicBool::new(false);
    let dispatches = jobs.iter().map(Vec::len).sum();
    // Inputs for every tensor argument slice, copied before the threads start.
    let inputs: Vec<Vec<Vec<u8>>> = jobs
        .iter()
        .map(|js| {
            js.iter()
                .flat_map(|j| j.args.iter())
                .filter_map(|a| match a {
                    JobArg::Tensor {
                        arg, off, bytes, ..
                    } => Some(match &args[*arg] {
                        Arg::In(_, _, b) => b[*off..off + bytes].to_vec(),
                        Arg::Out(_, _, b) => b[*off..off + bytes].to_vec(),
                        Arg::Scalar(..) => vec![],
                    }),
                    _ => None,
                })
                .collect()
        })
        .collect();
    type Outs = Vec<(usize, usize, Vec<u8>)>;
    let results: Vec<Result<Outs, RuntimeError>> = std::thread::scope(|s| {
        let hs: Vec<_> = jobs
            .iter()
            .zip(&inputs)
            .enumerate()
            .map(|(rank, (js, ins))| {
                let (shared, tables, failed, devices) = (&shared, &tables, &failed, &devices);
                s.spawn(move || -> Result<Outs, RuntimeError> {
                    let r = rank_main(code, rank, p, devices[rank], js, ins, tables, shared, opts);
                    if r.is_err() {
                        failed.store(true, Ordering::SeqCst);
                        shared.set_abort();
                    }
                    r
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(RuntimeError::Cuda {
                        call: "rank thread".into(),
                        message: "panicked".into(),
                    })
                })
            })
            .collect()
    });
    if let Some(e) = failure_error(code, &shared) {
        return Err(e);
    }
    let mut outs = vec![];
    for r in results {
        outs.push(r?);
    }
    for o in outs {
        for (arg, off, bytes) in o {
            if let Arg::Out(_, _, dst) = &mut args[arg] {
                dst[off..off + bytes.len()].copy_from_slice(&bytes);
            }
        }
    }
    drop(win_mem);
    Ok(RunReport {
        run_time: t0.elapsed(),
        dispatches,
    })
}

#[allow(clippy::too_many_arguments)]
fn rank_main(
    code: &CudaCode,
    rank: usize,
    p: usize,
    ordinal: usize,
    jobs: &[crate::host::Job],
    inputs: &[Vec<u8>],
    tables: &[u64],
    shared: &Shared,
    opts: &RunOptions,
) -> Result<Vec<(usize, usize, Vec<u8>)>, RuntimeError> {
    let m = module(code, ordinal)?;
    bind(ordinal)?;
    let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
        .map_err(|e| driver_err("cuStreamCreate", e))?;
    let rt = rt_record(shared, rank, p, opts.wait_timeout)?;
    let mut outs = vec![];
    let mut next_input = inputs.iter();
    let result = (|| {
        for j in jobs {
            let entry = code
                .entries
                .get(&j.callee)
                .filter(|e| e.kind == EntryKind::Device)
                .ok_or_else(|| RuntimeError::RankFailed {
                    rank,
                    message: format!("no CUDA entry point for `{}`", j.callee),
                })?;
            let f = function(m, &entry.symbol)?;
            let slots = Pinned::new(8 * j.args.len())?;
            let mut bufs = vec![];
            for (k, a) in j.args.iter().enumerate() {
                let v = match a {
                    JobArg::Tensor { bytes, .. } => {
                        let host = next_input.next().map_or(&[][..], |v| &v[..]);
                        let b = DevBuf::upload(host, *bytes)?;
                        let d = b.0;
                        bufs.push((a, b));
                        d
                    }
                    JobArg::Window(w) => tables[*w],
                    JobArg::Scalar(b) => *b,
                    JobArg::Ctx => 0,
                };
                // SAFETY: `slots` holds one u64 per argument.
                unsafe { std::ptr::write(slots.ptr.cast::<u64>().add(k), v) };
            }
            launch(f, 1, BLOCK_THREADS as u32, stream, rt.dev(), slots.dev())?;
            if shared.failure().is_some() {
                return Err(RuntimeError::RankFailed {
                    rank,
                    message: "a kernel failed".into(),
                });
            }
            for (a, b) in bufs {
                if let JobArg::Tensor {
                    arg,
                    off,
                    bytes,
                    out: true,
                } = a
                {
                    let mut host = vec![0u8; *bytes];
                    b.download(&mut host)?;
                    outs.push((*arg, *off, host));
                }
            }
        }
        Ok(outs)
    })();
    // SAFETY: the stream was created above and is idle (every launch was synchronized).
    let _ = unsafe { cu::stream::destroy(stream) };
    result
}

/// An argument of [`launch_samples`]: a scalar slot, or a host buffer copied to the device
/// (and back after the launch when `Out`).
#[derive(Debug)]
pub enum KernelArg<'a> {
    /// A scalar's bits.
    Scalar(u64),
    /// Read-only device copy of a host buffer.
    In(&'a [u8]),
    /// Device copy of a host buffer, copied back after the launch.
    Out(&'a mut [u8]),
}

/// Launches sample entry point `symbol` of `art` (a `__samples` or `__rows` entry) on GPU
/// `ordinal` with `threads` threads in all (256 per block) and returns the kernel's wall time
/// (launch to completion, copies excluded). `rank` is the rank failures name.
///
/// # Errors
/// [`RuntimeError::NoCudaDriver`], [`RuntimeError::Devices`] for a device the machine lacks,
/// [`RuntimeError::CudaCompile`] (NVRTC missing or rejecting the source),
/// [`RuntimeError::Cuda`] for a failed driver call, and [`RuntimeError::RankFailed`] when a
/// run-time check fails in the kernel.
pub fn launch_samples(
    art: &Artifact,
    symbol: &str,
    ordinal: usize,
    rank: usize,
    threads: u64,
    args: &mut [KernelArg<'_>],
) -> Result<Duration, RuntimeError> {
    let code = cuda_code(art)?;
    if !code.entries.contains_key(symbol) {
        return Err(RuntimeError::RankFailed {
            rank,
            message: format!("no CUDA entry point `{symbol}`"),
        });
    }
    let m = module(code, ordinal)?;
    bind(ordinal)?;
    let f = function(m, symbol)?;
    let shared = Shared::new()?;
    let rt = rt_record(&shared, rank, 1, RunOptions::default().wait_timeout)?;
    let slots = Pinned::new(8 * args.len())?;
    let mut bufs: Vec<Option<DevBuf>> = vec![];
    for (k, a) in args.iter().enumerate() {
        let (v, b) = match a {
            KernelArg::Scalar(x) => (*x, None),
            KernelArg::In(h) => {
                let b = DevBuf::upload(h, h.len())?;
                (b.0, Some(b))
            }
            KernelArg::Out(h) => {
                let b = DevBuf::upload(h, h.len())?;
                (b.0, Some(b))
            }
        };
        // SAFETY: `slots` holds one u64 per argument.
        unsafe { std::ptr::write(slots.ptr.cast::<u64>().add(k), v) };
        bufs.push(b);
    }
    let stream = cu::stream::create(cu::stream::StreamKind::NonBlocking)
        .map_err(|e| driver_err("cuStreamCreate", e))?;
    const BLOCK: u64 = 256;
    let blocks = threads.div_ceil(BLOCK).clamp(1, 65_535) as u32;
    let block = threads.clamp(1, BLOCK) as u32;
    let t0 = Instant::now();
    let r = launch(f, blocks, block, stream, rt.dev(), slots.dev());
    let took = t0.elapsed();
    // SAFETY: the stream is idle after the synchronizing launch.
    let _ = unsafe { cu::stream::destroy(stream) };
    r?;
    if let Some(e) = failure_error(code, &shared) {
        return Err(match e {
            RuntimeError::RankFailed { message, .. } => RuntimeError::RankFailed { rank, message },
            e => e,
        });
    }
    for (a, b) in args.iter_mut().zip(&bufs) {
        if let (KernelArg::Out(h), Some(b)) = (a, b) {
            b.download(h)?;
        }
    }
    Ok(took)
}

/// Device-to-device copy bandwidth of GPU `ordinal` for `bytes` bytes (best of `reps`), in GB/s
/// counting bytes read plus bytes written, for comparison with streaming kernels.
///
/// # Errors
/// As [`device_count`], and [`RuntimeError::Cuda`] for a failed allocation or copy.
pub fn copy_bandwidth(ordinal: usize, bytes: usize, reps: usize) -> Result<f64, RuntimeError> {
    device_info(ordinal)?;
    bind(ordinal)?;
    let a = DevBuf::upload(&[], bytes)?;
    let b = DevBuf::upload(&[], bytes)?;
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        // SAFETY: both buffers hold `bytes` bytes in the current context.
        unsafe {
            sys::cuMemcpyDtoD_v2(b.0, a.0, bytes)
                .result()
                .map_err(|e| driver_err("cuMemcpyDtoD", e))?;
            cu::ctx::synchronize().map_err(|e| driver_err("cuCtxSynchronize", e))?;
        }
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok(2.0 * bytes as f64 / best / 1e9)
}
