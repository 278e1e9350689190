//! Artifacts and the in-process artifact cache.

use crate::cpu::{self, CpuCode};
use crate::error::CodegenError;
use crate::specialize::{specialize, Bindings};
use eagle_ir::{print_module, verify_module, Module};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A compilation target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// This machine's CPU, through Cranelift's JIT.
    Cpu,
    /// NVIDIA GPUs: CUDA C (compiled to PTX by the runtime). The artifact also carries CPU
    /// code, so the same artifact can be checked on the CPU.
    Cuda,
}

impl Target {
    /// Name used in cache keys and manifests.
    pub fn name(self) -> &'static str {
        match self {
            Target::Cpu => "cpu",
            Target::Cuda => "cuda",
        }
    }
}

/// A compiled program: the specialized IR and the machine code of its device functions,
/// for one world size and set of bindings.
#[derive(Debug)]
pub struct Artifact {
    /// Cache key: hash of (generic IR text, bindings, target).
    pub key: u64,
    /// Target compiled for.
    pub target: Target,
    /// Root (host) function name.
    pub root: String,
    /// Bindings compiled for.
    pub bindings: Bindings,
    /// The specialized module (the host function is interpreted from it by the runtime).
    pub module: Module,
    /// Its text.
    pub ir: String,
    /// Machine code of the per-device and compute functions.
    pub code: CpuCode,
    /// CUDA C of the per-device, compute and sample functions (target [`Target::Cuda`]).
    pub cuda: Option<crate::cuda::CudaCode>,
    /// Wall time spent specializing and compiling.
    pub compile_time: Duration,
}

impl Artifact {
    /// The message of fault `site` with its values filled in.
    pub fn fault_message(&self, site: u32, a: i64, b: i64) -> String {
        self.code
            .sites
            .get(site as usize)
            .map(|m| {
                m.replace("{a}", &a.to_string())
                    .replace("{b}", &b.to_string())
            })
            .unwrap_or_else(|| format!("run-time check {site} failed ({a}, {b})"))
    }
}

/// Counters of the artifact cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Artifacts compiled (cache misses).
    pub compiles: u64,
    /// Lookups served from the cache.
    pub hits: u64,
}

static COMPILES: AtomicU64 = AtomicU64::new(0);
static HITS: AtomicU64 = AtomicU64::new(0);

fn cache() -> &'static Mutex<HashMap<u64, Arc<Artifact>>> {
    static C: OnceLock<Mutex<HashMap<u64, Arc<Artifact>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The cache counters since the process started.
pub fn cache_stats() -> CacheStats {
    CacheStats {
        compiles: COMPILES.load(Ordering::Relaxed),
        hits: HITS.load(Ordering::Relaxed),
    }
}

/// Empties the artifact cache (counters are kept).
pub fn clear_cache() {
    if let Ok(mut c) = cache().lock() {
        c.clear();
    }
}

/// Specializes `m` (rooted at host function `root`) for `b` and compiles it for `target`,
/// or returns the cached artifact for the same (generic IR text, bindings, target). The flag
/// is `true` when the artifact came from the cache.
///
/// # Errors
/// [`CodegenError::NoSuchFunction`], the verifier's and specialization's errors, and backend
/// errors.
pub fn compile(
    m: &Module,
    root: &str,
    b: &Bindings,
    target: Target,
) -> Result<(Arc<Artifact>, bool), CodegenError> {
    let text_hash = crate::fnv1a(print_module(m).as_bytes());
    compile_hashed(m, text_hash, root, b, target)
}

/// [`compile`] for a module whose IR text hash (`fnv1a(print_module(m))`) the caller already
/// knows: a cache hit then costs a hash of the bindings and a lookup.
///
/// # Errors
/// As [`compile`].
pub fn compile_hashed(
    m: &Module,
    text_hash: u64,
    root: &str,
    b: &Bindings,
    target: Target,
) -> Result<(Arc<Artifact>, bool), CodegenError> {
    if m.function(root).is_none() {
        return Err(CodegenError::NoSuchFunction(root.to_string()));
    }
    let key_text = format!(
        "{text_hash:016x};; root={root} {} target={}",
        b.key_text(),
        target.name()
    );
    let key = crate::fnv1a(key_text.as_bytes());
    if let Some(a) = cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        HITS.fetch_add(1, Ordering::Relaxed);
        return Ok((a, true));
    }
    let t0 = Instant::now();
    verify_module(m)?;
    let spec = specialize(m, b)?;
    let code = cpu::compile_module(&spec)?;
    let cuda = match target {
        Target::Cpu => None,
        Target::Cuda => Some(crate::cuda::emit_module(&spec)?),
    };
    let a = Arc::new(Artifact {
        key,
        target,
        root: root.to_string(),
        bindings: b.clone(),
        ir: print_module(&spec),
        module: spec,
        code,
        cuda,
        compile_time: t0.elapsed(),
    });
    COMPILES.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut c) = cache().lock() {
        c.insert(key, a.clone());
    }
    Ok((a, false))
}
