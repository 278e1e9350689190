//! Platform `cuda`: artifacts run on NVIDIA GPUs through the driver API, loaded at run time.
//!
//! - The driver (`libcuda.so.1`) is looked for, and its functions looked up, before any call
//!   into it: a machine without one, or with a library of that name that lacks the driver's
//!   functions, gets [`RuntimeError::NoCudaDriver`](crate::RuntimeError::NoCudaDriver), never a panic.
//! - Each rank runs its per-device programs on GPU `devices[rank]` (several ranks may share a
//!   GPU), from its own host thread and non-blocking stream, one block per program.
//! - The CUDA C of the artifact is compiled by NVRTC to a cubin for each device's architecture
//!   (or a plugin's PTX is used), cached per source and architecture, and loaded once per
//!   (device, source).
//! - Every rank allocates and uploads all its dispatches need, the ranks meet, launch in order,
//!   and meet again before freeing: allocation and freeing synchronise a device, which must
//!   never wait on a peer's kernel spinning in a wait or barrier. A rank's later dispatch sees
//!   the ranges its earlier dispatches wrote (copied between its device buffers).
//! - **Staged through the host:** window buffers, signals, the barrier and the failure records live
//!   in pinned, mapped host memory that every GPU addresses directly (unified addressing), so
//!   put/get, remote loads and stores, notify/wait and barriers between ranks travel over the
//!   host link. Tensor arguments are copied to device memory before a dispatch and outputs back
//!   after it.
//! - **Emulation** ([`RunOptions::cuda_emulate`](crate::RunOptions::cuda_emulate), `EAGLE_CUDA_EMULATE=1`): the same CUDA C is
//!   compiled by the host C++ compiler against [`eagle_codegen::cuda::HOST_SHIM`] and run on CPU
//!   threads (one per GPU thread), through this same orchestration. It needs no GPU or driver and
//!   checks generated code bit for bit against `sim`; it is slow and meant for tests.

use crate::error::{Cause, RuntimeError};
use crate::job::{Arg, JobArg, RunReport};
use crate::options::RunOptions;
use cudarc::driver::{result as cu, sys};
use eagle_codegen::abi::{CudaErr, CudaRt};
use eagle_codegen::cuda::{CudaCode, EntryKind, BLOCK_THREADS};
use eagle_codegen::Artifact;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

mod emulator;
use emulator::*;

/// Every driver function this module calls (through cudarc, which looks each one up when it is
/// first called and panics if it is missing).
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemcpyDtoD_v2",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuLaunchKernel",
    // The error messages (`DriverError`'s `Debug`).
    "cuGetErrorString",
];

/// Checks, without calling into it, that the driver library cudarc will load (the first of
/// its candidate names that opens, as cudarc picks it) is there and has every function in
/// [`DRIVER_SYMBOLS`]. Done once per process.
fn driver_check() -> Result<(), RuntimeError> {
    static CHECK: OnceLock<Result<(), RuntimeError>> = OnceLock::new();
    CHECK
        .get_or_init(|| {
            let names = ["cuda", "nvcuda"]
                .iter()
                .flat_map(|l| cudarc::get_lib_name_candidates(l));
            for name in names {
                // SAFETY: opening a library runs its initialisers; this is the library cudarc
                // itself opens on the first driver call, under the same name.
                let Ok(lib) = (unsafe { libloading::Library::new(&name) }) else {
                    continue;
                };
                for sym in DRIVER_SYMBOLS {
                    // SAFETY: only looks the symbol up; nothing is called.
                    let found = unsafe { lib.get::<*const c_void>(sym.as_bytes()) }.is_ok();
                    if !found {
                        return Err(RuntimeError::NoCudaDriver {
                            detail: format!(
                                "{name} was found but lacks the driver function `{sym}`: it is not an NVIDIA driver library, or a broken one"
                            ),
                        });
                    }
                }
                return Ok(());
            }
            Err(RuntimeError::NoCudaDriver {
                detail: "libcuda.so.1 is not on the library path".into(),
            })
        })
        .clone()
}

/// Whether a usable CUDA driver library can be loaded: it is on the library path and has every
/// driver function eagle calls (checked without calling into it).
pub fn driver_available() -> bool {
    driver_check().is_ok()
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
    driver_check()?;
    INIT.get_or_init(|| {
        // Ranks that share a GPU spin-wait on each other's kernels, so every rank's stream
        // needs its own hardware queue (the driver's default is 8): ask for the maximum
        // unless the user chose.
        if std::env::var_os("CUDA_DEVICE_MAX_CONNECTIONS").is_none() {
            std::env::set_var("CUDA_DEVICE_MAX_CONNECTIONS", "32");
        }
        cu::init().map_err(|e| driver_err("cuInit", e))
    })
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

/// What executes kernels: the CUDA driver, or the host emulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exec {
    Driver,
    Emulator,
}

impl Exec {
    fn of(emulate: bool) -> Exec {
        if emulate {
            Exec::Emulator
        } else {
            Exec::Driver
        }
    }
}

/// Makes the primary context of `ordinal` current on this thread (nothing to do when emulating).
fn bind(ordinal: usize, ex: Exec) -> Result<(), RuntimeError> {
    if ex == Exec::Emulator {
        return Ok(());
    }
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

/// A loaded module: a driver handle, or the emulation's shared library (both live as long as
/// the process).
#[derive(Clone, Copy)]
enum Loaded {
    Driver(sys::CUmodule),
    Emulator(&'static libloading::Library),
}
// SAFETY: a CUmodule handle may be used from any thread whose current context owns it; the
// cache keys modules by device, and every use binds that device's primary context first. A
// loaded library is immutable.
unsafe impl Send for Loaded {}

/// A kernel to launch.
#[derive(Clone, Copy)]
enum Func {
    Driver(sys::CUfunction),
    Emulator(EmuLaunch, EmuKernel),
}

type EmuKernel = unsafe extern "C" fn(*const c_void, *const u64);
type EmuLaunch = unsafe extern "C" fn(EmuKernel, u32, u32, *const c_void, *const u64) -> i32;

/// The module of `code` on device `ordinal` (compiled by NVRTC, or by the host C++ compiler
/// when emulating, and loaded once).
fn module(code: &CudaCode, ordinal: usize, ex: Exec) -> Result<Loaded, RuntimeError> {
    /// (device, source hash, emulated) -> module.
    type Modules = Mutex<HashMap<(usize, u64, bool), Loaded>>;
    static MODULES: OnceLock<Modules> = OnceLock::new();
    let hash = eagle_codegen::fnv1a(code.source.as_bytes());
    let key = (ordinal, hash, ex == Exec::Emulator);
    let cache = MODULES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(m) = c.get(&key) {
        return Ok(*m);
    }
    let loaded = match ex {
        Exec::Emulator => Loaded::Emulator(emulator_library(code)?),
        Exec::Driver => {
            // PTX a plugin carries for this architecture, else a cubin from NVRTC (a cubin
            // loads on any driver of the same major version; newer PTX might not).
            let (_, arch) = device_info(ordinal)?;
            let image: Vec<u8> = match eagle_codegen::cuda::cached_ptx(code, &arch) {
                Some(ptx) => {
                    let mut v = ptx.as_bytes().to_vec();
                    v.push(0);
                    v
                }
                None => eagle_codegen::cuda::compile_cubin_for_driver(
                    code,
                    &arch.replace("compute_", "sm_"),
                    driver_version(),
                )
                .map_err(|e| RuntimeError::CudaCompile(e.to_string()))?
                .to_vec(),
            };
            bind(ordinal, ex)?;
            // SAFETY: `image` is a cubin or a NUL-terminated PTX text, alive for the call; the
            // context of `ordinal` is current.
            let m = unsafe { cu::module::load_data(image.as_ptr().cast()) }
                .map_err(|e| driver_err("cuModuleLoadData", e))?;
            Loaded::Driver(m)
        }
    };
    c.insert(key, loaded);
    Ok(loaded)
}

/// The loaded CUDA driver's version (`cuDriverGetVersion`, e.g. 12080), or 0 if it does not say.
fn driver_version() -> i32 {
    let mut v = 0;
    // SAFETY: the driver was found loadable before any device call; writes one int.
    let _ = unsafe { sys::cuDriverGetVersion(&mut v) };
    v
}

fn function(m: Loaded, symbol: &str) -> Result<Func, RuntimeError> {
    let name = CString::new(symbol).map_err(|e| RuntimeError::CudaCompile(e.to_string()))?;
    match m {
        Loaded::Driver(m) => {
            // SAFETY: `m` is a loaded module whose context is current.
            unsafe { cu::module::get_function(m, name) }
                .map(Func::Driver)
                .map_err(|e| driver_err(&format!("cuModuleGetFunction({symbol})"), e))
        }
        Loaded::Emulator(lib) => {
            let missing =
                |e: libloading::Error| RuntimeError::CudaCompile(format!("CUDA emulation: {e}"));
            // SAFETY: the shim defines `eg_emu_launch` with this signature, and every entry point
            // is `extern "C" void(const eg_rt*, const unsigned long long*)`.
            unsafe {
                let launch = *lib.get::<EmuLaunch>(b"eg_emu_launch\0").map_err(missing)?;
                let k = *lib
                    .get::<EmuKernel>(name.as_bytes_with_nul())
                    .map_err(missing)?;
                Ok(Func::Emulator(launch, k))
            }
        }
    }
}

/// Pinned host memory mapped into every device's address space (zeroed); plain host memory
/// when emulating.
struct Pinned {
    ptr: *mut u8,
    /// `Some(layout)` when allocated from the host heap (emulation).
    heap: Option<std::alloc::Layout>,
}

impl Pinned {
    fn new(bytes: usize, ex: Exec) -> Result<Pinned, RuntimeError> {
        let bytes = bytes.max(8);
        if ex == Exec::Emulator {
            let layout =
                std::alloc::Layout::from_size_align(bytes, 64).map_err(|e| RuntimeError::Cuda {
                    call: "alloc".into(),
                    message: e.to_string(),
                })?;
            // SAFETY: `layout` has a non-zero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            if ptr.is_null() {
                return Err(RuntimeError::Cuda {
                    call: "alloc".into(),
                    message: format!("out of host memory for {bytes} bytes"),
                });
            }
            return Ok(Pinned {
                ptr,
                heap: Some(layout),
            });
        }
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
        Ok(Pinned { ptr, heap: None })
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
        match self.heap {
            // SAFETY: `ptr` came from `alloc_zeroed(layout)` and is freed once.
            Some(layout) => unsafe { std::alloc::dealloc(self.ptr, layout) },
            // SAFETY: `ptr` came from `cuMemHostAlloc` and is freed once.
            None => {
                let _ = unsafe { cu::free_host(self.ptr.cast()) };
            }
        }
    }
}

/// Device memory, freed on drop (the owning context must be current); host memory when
/// emulating.
enum DevBuf {
    Driver(sys::CUdeviceptr),
    Host(Pinned),
}

impl DevBuf {
    /// A buffer of `len` bytes holding `bytes` (copied on `stream`, which is synchronized).
    fn upload(bytes: &[u8], len: usize, ex: Exec, stream: &Stream) -> Result<DevBuf, RuntimeError> {
        if ex == Exec::Emulator {
            let m = Pinned::new(len, ex)?;
            // SAFETY: `m` holds at least `len >= bytes.len()` bytes.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), m.ptr, bytes.len().min(len)) };
            return Ok(DevBuf::Host(m));
        }
        // SAFETY: allocates at least 8 bytes in the current context.
        let p = unsafe { cu::malloc_sync(len.max(8)) }.map_err(|e| driver_err("cuMemAlloc", e))?;
        let b = DevBuf::Driver(p);
        if let (false, Some(st)) = (bytes.is_empty(), stream.0) {
            // SAFETY: `p` holds at least `bytes.len()` bytes; the stream is synchronized before
            // `bytes` can go away.
            unsafe {
                cu::memcpy_htod_async(p, bytes, st)
                    .and_then(|()| cu::stream::synchronize(st))
                    .map_err(|e| driver_err("cuMemcpyHtoDAsync", e))?;
            }
        }
        Ok(b)
    }
    fn addr(&self) -> u64 {
        match self {
            DevBuf::Driver(p) => *p,
            DevBuf::Host(m) => m.dev(),
        }
    }
    /// Copies `len` bytes from offset `from` of `src` to offset `to` of `dst`, ordered before
    /// whatever is launched next on `stream`.
    fn copy(
        src: &DevBuf,
        from: usize,
        dst: &DevBuf,
        to: usize,
        len: usize,
        stream: &Stream,
    ) -> Result<(), RuntimeError> {
        match (src, dst, stream.0) {
            // SAFETY: both buffers hold the ranges (they lie inside the tensor slices the
            // buffers were sized for) and are distinct allocations.
            (DevBuf::Host(a), DevBuf::Host(b), _) => unsafe {
                std::ptr::copy_nonoverlapping(a.ptr.add(from), b.ptr.add(to), len);
                Ok(())
            },
            // SAFETY: as above, in device memory of the current context, on its stream.
            (DevBuf::Driver(a), DevBuf::Driver(b), Some(st)) => unsafe {
                sys::cuMemcpyDtoDAsync_v2(b + to as u64, a + from as u64, len, st)
                    .result()
                    .map_err(|e| driver_err("cuMemcpyDtoDAsync", e))
            },
            _ => Err(RuntimeError::Cuda {
                call: "cuMemcpyDtoDAsync".into(),
                message: "buffers of different kinds".into(),
            }),
        }
    }
    /// Copies the first `out.len()` bytes back (on `stream`, which is synchronized: never on
    /// the NULL stream, which would wait for the other ranks' kernels).
    fn download(&self, out: &mut [u8], stream: &Stream) -> Result<(), RuntimeError> {
        match (self, stream.0) {
            // SAFETY: the buffer holds at least `out.len()` bytes; the stream is synchronized
            // before `out` is used.
            (DevBuf::Driver(p), Some(st)) => unsafe {
                cu::memcpy_dtoh_async(out, *p, st)
                    .and_then(|()| cu::stream::synchronize(st))
                    .map_err(|e| driver_err("cuMemcpyDtoHAsync", e))
            },
            (DevBuf::Driver(_), None) => Err(RuntimeError::Cuda {
                call: "cuMemcpyDtoHAsync".into(),
                message: "no stream".into(),
            }),
            (DevBuf::Host(m), _) => {
                // SAFETY: the buffer holds at least `out.len()` bytes.
                unsafe { std::ptr::copy_nonoverlapping(m.ptr, out.as_mut_ptr(), out.len()) };
                Ok(())
            }
        }
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        if let DevBuf::Driver(p) = self {
            // SAFETY: allocated by `cuMemAlloc`, freed once.
            let _ = unsafe { cu::free_sync(*p) };
        }
    }
}

/// A stream of the current context (none when emulating: launches run to completion).
struct Stream(Option<sys::CUstream>);

impl Stream {
    fn new(ex: Exec) -> Result<Stream, RuntimeError> {
        if ex == Exec::Emulator {
            return Ok(Stream(None));
        }
        cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map(|s| Stream(Some(s)))
            .map_err(|e| driver_err("cuStreamCreate", e))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if let Some(s) = self.0 {
            // SAFETY: the stream is idle (every launch was synchronized) and destroyed once.
            let _ = unsafe { cu::stream::destroy(s) };
        }
    }
}

/// What the ranks of a run share: the abort flag and the barrier's arrival counters (one word
/// each; rank r alone writes `arrive[r]`), in the prelude's layout.
struct Shared {
    mem: Pinned,
}

impl Shared {
    fn new(p: usize, ex: Exec) -> Result<Shared, RuntimeError> {
        Ok(Shared {
            mem: Pinned::new(8 + 4 * p, ex)?,
        })
    }
    fn abort(&self) -> u64 {
        self.mem.dev()
    }
    fn arrive(&self) -> u64 {
        self.mem.dev() + 8
    }
    fn set_abort(&self) {
        // SAFETY: the abort word is the first 4 bytes of the allocation.
        unsafe { std::ptr::write_volatile(self.mem.ptr.cast::<i32>(), 1) };
    }
}

/// Bytes of the `eg_rt` record and of the `eg_err` record after it (their layouts are
/// `eagle_codegen::abi::{CudaRt, CudaErr}`, which the CUDA C checks with `static_assert`s).
const RT_BYTES: usize = std::mem::size_of::<CudaRt>();
const ERR_BYTES: usize = std::mem::size_of::<CudaErr>();

/// One rank's `eg_rt` record followed by its own `eg_err` failure record.
struct RankRecord {
    mem: Pinned,
}

impl RankRecord {
    fn new(
        shared: &Shared,
        rank: usize,
        p: usize,
        timeout: Duration,
        ex: Exec,
    ) -> Result<RankRecord, RuntimeError> {
        let mem = Pinned::new(RT_BYTES + ERR_BYTES, ex)?;
        let rt = CudaRt {
            rank: rank as i64,
            nranks: p as i64,
            err: mem.dev() + RT_BYTES as u64,
            abort: shared.abort(),
            arrive: shared.arrive(),
            timeout_ns: u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX),
        };
        // SAFETY: the allocation holds RT_BYTES + ERR_BYTES bytes, aligned for u64 (pinned
        // allocations are page-aligned); the error record after it starts zeroed.
        unsafe {
            std::ptr::write(mem.ptr.cast::<CudaRt>(), rt);
            std::ptr::write(mem.ptr.add(RT_BYTES).cast::<CudaErr>(), CudaErr::default());
        }
        Ok(RankRecord { mem })
    }
    /// (site, a, b) of this rank's first failure.
    fn failure(&self) -> Option<(i32, i64, i64)> {
        use std::mem::offset_of;
        // SAFETY: the failure record is a `CudaErr` at offset RT_BYTES; this rank's kernel
        // has finished (or was abandoned) when it is read.
        unsafe {
            let p = self.mem.ptr.add(RT_BYTES);
            if std::ptr::read_volatile(p.add(offset_of!(CudaErr, status)).cast::<i32>()) == 0 {
                return None;
            }
            Some((
                std::ptr::read_volatile(p.add(offset_of!(CudaErr, site)).cast::<i32>()),
                std::ptr::read_volatile(p.add(offset_of!(CudaErr, a)).cast::<i64>()),
                std::ptr::read_volatile(p.add(offset_of!(CudaErr, b)).cast::<i64>()),
            ))
        }
    }
}

/// Launches `f` and waits for it to finish.
fn launch(
    f: Func,
    grid: u32,
    block: u32,
    stream: &Stream,
    rt: &RankRecord,
    slots: &Pinned,
) -> Result<(), RuntimeError> {
    match (f, stream.0) {
        (Func::Emulator(run, k), _) => {
            // SAFETY: `k` is an entry point of the emulation library and `run` its launcher;
            // `rt` and `slots` outlive the call, which returns when every thread has finished.
            unsafe { run(k, grid, block, rt.mem.ptr.cast(), slots.ptr.cast()) };
            Ok(())
        }
        (Func::Driver(f), Some(stream)) => {
            let mut rt = rt.mem.dev();
            let mut slots = slots.dev();
            let mut params: [*mut c_void; 2] = [
                (&mut rt as *mut u64).cast(),
                (&mut slots as *mut u64).cast(),
            ];
            // SAFETY: every entry point takes exactly (const eg_rt*, const unsigned long long*),
            // two 8-byte parameters; both point to pinned memory that outlives the launch (the
            // stream is synchronized below).
            unsafe { cu::launch_kernel(f, (grid, 1, 1), (block, 1, 1), 0, stream, &mut params) }
                .map_err(|e| driver_err("cuLaunchKernel", e))?;
            // SAFETY: `stream` is a live stream of the current context.
            unsafe { cu::stream::synchronize(stream) }
                .map_err(|e| driver_err("cuStreamSynchronize", e))
        }
        (Func::Driver(_), None) => Err(RuntimeError::Cuda {
            call: "cuLaunchKernel".into(),
            message: "no stream".into(),
        }),
    }
}

/// The error of a failure record.
fn failure_error(
    code: &CudaCode,
    rank: usize,
    (site, a, b): (i32, i64, i64),
    ex: Exec,
) -> RuntimeError {
    let on = match ex {
        Exec::Driver => "on the GPU",
        Exec::Emulator => "in the CUDA emulation",
    };
    let message = format!("{} ({on})", code.fault_message(site, a, b));
    // Negative sites are the prelude's EG_WAIT_TIMEOUT, EG_BARRIER_TIMEOUT and EG_ABORTED.
    let cause = match site {
        -1 => Cause::WaitTimeout(message),
        -2 => Cause::BarrierTimeout(message),
        -3 => Cause::Peer(message),
        _ => Cause::Fault(message),
    };
    RuntimeError::RankFailed { rank, cause }
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

/// Refuses atomic-add signals between ranks on different GPUs where the GPUs cannot do atomics
/// on host memory (atomics on mapped host memory are atomic only within one device otherwise).
fn check_atomic_signals(code: &CudaCode, devices: &[usize]) -> Result<(), RuntimeError> {
    let mut distinct = devices.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    if !code.atomic_signals || distinct.len() < 2 {
        return Ok(());
    }
    for &d in &distinct {
        let dev = cu::device::get(d as i32).map_err(|e| driver_err("cuDeviceGet", e))?;
        // SAFETY: `dev` came from `cuDeviceGet`.
        let native = unsafe {
            cu::device::get_attribute(
                dev,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED,
            )
        }
        .map_err(|e| driver_err("cuDeviceGetAttribute", e))?;
        if native == 0 {
            return Err(RuntimeError::Devices(format!(
                "the program notifies with `AtomicAdd`, and its ranks span GPUs {distinct:?}; GPU {d} cannot do atomics on host memory (where eagle keeps signals), so adds from different GPUs could be lost. Run the ranks on one GPU (e.g. `-d 0,0`) or notify with `Set`"
            )));
        }
    }
    Ok(())
}

/// The CUDA executor (GPUs, or the emulation with `cuda_emulate`): [`run`].
pub(crate) struct Cuda;

impl Cuda {
    /// Runs the launch on GPUs or the emulation ([`crate::executor::Executor::run`]).
    pub(crate) fn run(&self, l: crate::exec::Launch<'_, '_>) -> Result<RunReport, RuntimeError> {
        run(l.art, l.args, l.p, l.jobs, l.windows, l.opts)
    }
}

/// Runs the dispatches of a host program on GPUs `opts.devices` (rank r on `devices[r]`), with
/// the windows of the run in pinned host memory. Called by [`crate::run_with`].
///
/// Every rank first allocates and uploads everything its dispatches need; the ranks meet; then
/// they launch; they meet again before anything is freed. Allocation and freeing synchronise a
/// device, so doing either while a peer's kernel spins on this rank would deadlock ranks that
/// share a GPU.
pub(crate) fn run(
    art: &Artifact,
    args: &mut [Arg<'_>],
    p: usize,
    jobs: Vec<Vec<crate::job::Job>>,
    windows: Vec<(usize, usize, String)>,
    opts: &RunOptions,
) -> Result<RunReport, RuntimeError> {
    let code = cuda_code(art)?;
    let ex = Exec::of(opts.cuda_emulate);
    // Every tensor argument is uploaded, and every output downloaded.
    let copied_bytes = jobs
        .iter()
        .flatten()
        .flat_map(|j| &j.args)
        .map(|a| match a {
            crate::job::JobArg::Tensor { bytes, out, .. } => bytes * (1 + usize::from(*out)),
            _ => 0,
        })
        .sum();
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
    // The run's time includes compiling (NVRTC, or `c++` when emulating) and loading the
    // modules on first use: nothing else reports it.
    let t0 = Instant::now();
    for &d in &devices {
        if ex == Exec::Driver {
            device_info(d)?;
        }
        module(code, d, ex)?;
    }
    if ex == Exec::Driver {
        check_atomic_signals(code, &devices)?;
    }
    // Pinned allocations (and their frees, at the end of this function) need a current
    // context on this thread: the first rank's device.
    bind(devices[0], ex)?;
    let shared = Shared::new(p, ex)?;
    let (win_mem, win_tables) = window_memory(&windows, p, ex)?;
    let tables: Vec<u64> = win_tables.iter().map(Pinned::dev).collect();
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
    let ready = std::sync::Barrier::new(p);
    let done = std::sync::Barrier::new(p);
    // Each rank's thread runs its dispatches in spans under the caller's (the launch).
    let parent = tracing::Span::current();
    let results: Vec<RankResult> = std::thread::scope(|s| {
        let hs: Vec<_> = jobs
            .iter()
            .zip(&inputs)
            .enumerate()
            .map(|(rank, (js, ins))| {
                let rank_run = RankRun {
                    code,
                    rank,
                    p,
                    ordinal: devices[rank],
                    tables: &tables,
                    shared: &shared,
                    opts,
                    ex,
                };
                let (ready, done, parent) = (&ready, &done, &parent);
                s.spawn(move || parent.in_scope(|| rank_run.run(js, ins, ready, done)))
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| RankResult {
                    outs: Err(RuntimeError::Cuda {
                        call: "rank thread".into(),
                        message: "panicked".into(),
                    }),
                    failure: None,
                })
            })
            .collect()
    });
    // The error of the run: the lowest rank whose own check failed; else a host-side error
    // (a driver call) of the lowest rank; ranks that only stopped because another failed come
    // last.
    let mut aborted = None;
    for (rank, r) in results.iter().enumerate() {
        match r.failure {
            Some(f) if f.0 != eagle_codegen::cuda::site::ABORTED => {
                return Err(failure_error(code, rank, f, ex))
            }
            Some(f) => aborted = aborted.or(Some((rank, f))),
            None => {}
        }
    }
    let mut outs = vec![];
    for r in results {
        outs.push(r.outs?);
    }
    if let Some((rank, f)) = aborted {
        return Err(failure_error(code, rank, f, ex));
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
        copied_bytes,
    })
}

/// Window memory: for each window, one pinned allocation per rank and a table of the P base
/// addresses.
#[allow(clippy::type_complexity)]
fn window_memory(
    windows: &[(usize, usize, String)],
    p: usize,
    ex: Exec,
) -> Result<(Vec<Vec<Pinned>>, Vec<Pinned>), RuntimeError> {
    let mut win_mem: Vec<Vec<Pinned>> = vec![];
    let mut win_tables: Vec<Pinned> = vec![];
    for (bytes, _, _) in windows {
        let per_rank = (0..p)
            .map(|_| Pinned::new(*bytes, ex))
            .collect::<Result<Vec<_>, _>>()?;
        let table = Pinned::new(8 * p, ex)?;
        for (r, m) in per_rank.iter().enumerate() {
            // SAFETY: the table holds `p` u64 slots.
            unsafe { std::ptr::write(table.ptr.cast::<u64>().add(r), m.dev()) };
        }
        win_mem.push(per_rank);
        win_tables.push(table);
    }
    Ok((win_mem, win_tables))
}

/// What one rank thread returns: the output slices it copied back (or a host-side error) and
/// its device failure record.
struct RankResult {
    outs: Result<Vec<(usize, usize, Vec<u8>)>, RuntimeError>,
    failure: Option<(i32, i64, i64)>,
}

/// One rank's share of a run.
struct RankRun<'a> {
    code: &'a CudaCode,
    rank: usize,
    p: usize,
    ordinal: usize,
    tables: &'a [u64],
    shared: &'a Shared,
    opts: &'a RunOptions,
    ex: Exec,
}

/// A dispatch ready to launch: its function, slots and device buffers.
struct Prepared<'j> {
    f: Func,
    slots: Pinned,
    bufs: Vec<(&'j JobArg, DevBuf)>,
}

impl RankRun<'_> {
    /// Prepares every dispatch, meets the other ranks at `ready`, launches them in order,
    /// copies the outputs back, and meets the others at `done` before freeing anything.
    fn run(
        &self,
        jobs: &[crate::job::Job],
        inputs: &[Vec<u8>],
        ready: &std::sync::Barrier,
        done: &std::sync::Barrier,
    ) -> RankResult {
        let prepared = self.prepare(jobs, inputs);
        if prepared.is_err() {
            self.shared.set_abort();
        }
        ready.wait();
        let outs = match &prepared {
            Ok((stream, rt, steps)) => self.execute(jobs, stream, rt, steps),
            Err(e) => Err(e.clone()),
        };
        if outs.is_err() {
            self.shared.set_abort();
        }
        let failure = prepared.as_ref().ok().and_then(|(_, rt, _)| rt.failure());
        done.wait();
        drop(prepared);
        RankResult { outs, failure }
    }

    #[allow(clippy::type_complexity)]
    fn prepare<'j>(
        &self,
        jobs: &'j [crate::job::Job],
        inputs: &[Vec<u8>],
    ) -> Result<(Stream, RankRecord, Vec<Prepared<'j>>), RuntimeError> {
        let ex = self.ex;
        let m = module(self.code, self.ordinal, ex)?;
        bind(self.ordinal, ex)?;
        let stream = Stream::new(ex)?;
        let rt = RankRecord::new(self.shared, self.rank, self.p, self.opts.wait_timeout, ex)?;
        let mut next_input = inputs.iter();
        let mut steps = vec![];
        for j in jobs {
            let entry = self
                .code
                .entries
                .get(&j.callee)
                .filter(|e| e.kind == EntryKind::Device)
                .ok_or_else(|| RuntimeError::RankFailed {
                    rank: self.rank,
                    cause: Cause::Device(format!("no CUDA entry point for `{}`", j.callee)),
                })?;
            let f = function(m, &entry.symbol)?;
            let slots = Pinned::new(8 * j.args.len(), ex)?;
            let mut bufs = vec![];
            for (k, a) in j.args.iter().enumerate() {
                let v = match a {
                    JobArg::Tensor { bytes, .. } => {
                        let host = next_input.next().map_or(&[][..], |v| &v[..]);
                        let b = DevBuf::upload(host, *bytes, ex, &stream)?;
                        let d = b.addr();
                        bufs.push((a, b));
                        d
                    }
                    JobArg::Window(w) => self.tables[*w],
                    JobArg::Scalar(b) => *b,
                    JobArg::Ctx => 0,
                };
                // SAFETY: `slots` holds one u64 per argument.
                unsafe { std::ptr::write(slots.ptr.cast::<u64>().add(k), v) };
            }
            steps.push(Prepared { f, slots, bufs });
        }
        Ok((stream, rt, steps))
    }

    /// Launches the prepared dispatches in order and returns the output slices.
    fn execute(
        &self,
        jobs: &[crate::job::Job],
        stream: &Stream,
        rt: &RankRecord,
        steps: &[Prepared<'_>],
    ) -> Result<Vec<(usize, usize, Vec<u8>)>, RuntimeError> {
        let block = match self.ex {
            Exec::Driver => BLOCK_THREADS,
            Exec::Emulator => eagle_codegen::cuda::EMULATED_BLOCK_THREADS,
        };
        let mut outs = vec![];
        for (ji, st) in steps.iter().enumerate() {
            // What an earlier dispatch of this rank wrote into a range this one reads.
            for f in crate::job::forwards(jobs, ji) {
                let src = &steps[f.from_job].bufs[f.from_buf].1;
                DevBuf::copy(
                    src,
                    f.from_off,
                    &st.bufs[f.to_buf].1,
                    f.to_off,
                    f.len,
                    stream,
                )?;
            }
            let _dispatch =
                crate::job::dispatch_span(&tracing::Span::current(), self.rank, &jobs[ji].callee)
                    .entered();
            let t0 = crate::trace::start(self.opts.trace.as_ref());
            launch(st.f, 1, block as u32, stream, rt, &st.slots)?;
            crate::trace::dispatched(self.opts.trace.as_ref(), self.rank, &jobs[ji].callee, t0);
            if rt.failure().is_some() {
                // The record says why; the caller reads it.
                return Ok(vec![]);
            }
            for (a, b) in &st.bufs {
                if let JobArg::Tensor {
                    arg,
                    off,
                    bytes,
                    out: true,
                } = a
                {
                    let mut host = vec![0u8; *bytes];
                    b.download(&mut host, stream)?;
                    outs.push((*arg, *off, host));
                }
            }
        }
        Ok(outs)
    }
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
/// (launch to completion, copies excluded). `rank` is the rank failures name; `emulate` runs the
/// CUDA C on CPU threads instead (see the module docs).
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
    emulate: bool,
    args: &mut [KernelArg<'_>],
) -> Result<Duration, RuntimeError> {
    let ex = Exec::of(emulate);
    let code = cuda_code(art)?;
    if !code.entries.contains_key(symbol) {
        return Err(RuntimeError::RankFailed {
            rank,
            cause: Cause::Device(format!("no CUDA entry point `{symbol}`")),
        });
    }
    let m = module(code, ordinal, ex)?;
    bind(ordinal, ex)?;
    let f = function(m, symbol)?;
    let shared = Shared::new(1, ex)?;
    let rt = RankRecord::new(&shared, 0, 1, RunOptions::from_env()?.wait_timeout, ex)?;
    let stream = Stream::new(ex)?;
    let slots = Pinned::new(8 * args.len(), ex)?;
    let mut bufs: Vec<Option<DevBuf>> = vec![];
    for (k, a) in args.iter().enumerate() {
        let (v, b) = match a {
            KernelArg::Scalar(x) => (*x, None),
            KernelArg::In(h) => {
                let b = DevBuf::upload(h, h.len(), ex, &stream)?;
                (b.addr(), Some(b))
            }
            KernelArg::Out(h) => {
                let b = DevBuf::upload(h, h.len(), ex, &stream)?;
                (b.addr(), Some(b))
            }
        };
        // SAFETY: `slots` holds one u64 per argument.
        unsafe { std::ptr::write(slots.ptr.cast::<u64>().add(k), v) };
        bufs.push(b);
    }
    const BLOCK: u64 = 256;
    let (blocks, block) = match ex {
        Exec::Driver => (
            threads.div_ceil(BLOCK).clamp(1, 65_535) as u32,
            threads.clamp(1, BLOCK) as u32,
        ),
        // A few host threads cover any grid: the entries stride over samples or rows.
        Exec::Emulator => (1, threads.clamp(1, 4) as u32),
    };
    let t0 = Instant::now();
    let r = launch(f, blocks, block, &stream, &rt, &slots);
    let took = t0.elapsed();
    r?;
    if let Some(f) = rt.failure() {
        return Err(failure_error(code, rank, f, ex));
    }
    for (a, b) in args.iter_mut().zip(&bufs) {
        if let (KernelArg::Out(h), Some(b)) = (a, b) {
            b.download(h, &stream)?;
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
    bind(ordinal, Exec::Driver)?;
    let stream = Stream::new(Exec::Driver)?;
    let a = DevBuf::upload(&[], bytes, Exec::Driver, &stream)?;
    let b = DevBuf::upload(&[], bytes, Exec::Driver, &stream)?;
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let t0 = Instant::now();
        // SAFETY: both buffers hold `bytes` bytes in the current context.
        unsafe {
            sys::cuMemcpyDtoD_v2(b.addr(), a.addr(), bytes)
                .result()
                .map_err(|e| driver_err("cuMemcpyDtoD", e))?;
        }
        cu::ctx::synchronize().map_err(|e| driver_err("cuCtxSynchronize", e))?;
        best = best.min(t0.elapsed().as_secs_f64());
    }
    Ok(2.0 * bytes as f64 / best / 1e9)
}
