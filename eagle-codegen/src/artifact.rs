//! Artifacts and the in-process artifact cache.
//!
//! The cache is bounded by bytes ([`Artifact::size_bytes`], default [`DEFAULT_CACHE_BYTES`],
//! set with [`set_cache_limit`]): when an insertion would exceed the limit, the least recently
//! used artifacts are dropped (a later launch recompiles them). An artifact still in use (held
//! by a [`std::sync::Arc`]) lives on until its last holder drops it.

use crate::cpu::{self, CpuCode};
use crate::error::CodegenError;
use crate::passes::specialize::{specialize_for, Limits};
use crate::Bindings;
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
    /// The sizes the target can hold, checked at specialization. A `cuda` artifact also
    /// carries CPU code, so both targets share the CPU backend's tile limit (the CUDA backend
    /// checks its per-thread share when it emits code).
    pub fn limits(self) -> Limits {
        match self {
            Target::Cpu | Target::Cuda => Limits::CPU,
        }
    }

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
    /// The device functions that reach no other rank, directly or through calls
    /// ([`eagle_ir::Module::reaches_peers`]): a run whose dispatches all call these may run
    /// its ranks one after another, on one thread.
    pub isolated: std::collections::BTreeSet<String>,
    /// How the program's rank groups split the world, each once: process grids (extents,
    /// outermost first, row-major over the world ranks) and splits that are no grid's; what
    /// reports name a rank's place in ([`Artifact::rank_place`]).
    pub grids: Vec<crate::lower::RankLayout>,
}

impl Artifact {
    /// An estimate of the memory the artifact holds, in bytes: its machine code, IR and
    /// Cranelift IR text (twice the IR text, for the module it was printed from), fault
    /// messages and CUDA C. The artifact cache is bounded by the sum of these.
    pub fn size_bytes(&self) -> usize {
        let clif: usize = self.code.clif.values().map(String::len).sum();
        let sites: usize = self
            .code
            .sites
            .iter()
            .chain(self.cuda.iter().flat_map(|c| c.sites.iter()))
            .map(String::len)
            .sum();
        let cuda = self.cuda.as_ref().map_or(0, |c| c.source.len());
        self.code.code_bytes + 2 * self.ir.len() + clif + sites + cuda
    }

    /// Where world rank `rank` sits in each process grid or split of the program's rank
    /// groups, as reports name it (`at [1, 2] of the rank grid [2, 4]`: its group rank in the
    /// group of axis `a` is the coordinate at `a`; `rank 1 of 3 in the group of color 0 of a
    /// split`); `None` when the program has no rank group.
    pub fn rank_place(&self, rank: usize) -> Option<String> {
        if self.grids.is_empty() {
            return None;
        }
        let places: Vec<String> = self.grids.iter().map(|g| g.place(rank)).collect();
        Some(places.join("; "))
    }

    /// The entry of site `site` as the runtime names an op (``function `k`, op `wait ...` (at
    /// src/x.rs:3:5)``); `None` for an unknown site.
    pub fn site_text(&self, site: u32) -> Option<&str> {
        self.code.sites.get(site as usize).map(String::as_str)
    }

    /// [`Artifact::site_text`] as the head of a runtime message (``function `k`, op `...`: ``),
    /// or nothing for an unknown site.
    pub fn site_prefix(&self, site: u32) -> String {
        self.site_text(site)
            .map_or(String::new(), |t| format!("{t}: "))
    }

    /// The message of fault `site` with its values filled in.
    pub fn fault_message(&self, site: u32, a: i64, b: i64) -> String {
        self.code
            .sites
            .get(site as usize)
            .map(|m| crate::sites::fill(m, a, b))
            .unwrap_or_else(|| format!("run-time check {site} failed ({a}, {b})"))
    }
}

/// Counters and contents of the artifact cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Artifacts compiled (cache misses), since the process started.
    pub compiles: u64,
    /// Lookups served from the cache, since the process started.
    pub hits: u64,
    /// Artifacts dropped to stay under the limit, since the process started.
    pub evictions: u64,
    /// Artifacts in the cache now.
    pub entries: usize,
    /// The sum of their [`Artifact::size_bytes`] now.
    pub bytes: usize,
    /// The limit on `bytes` (see [`set_cache_limit`]).
    pub limit: usize,
}

/// The default bound of the artifact cache: 256 MiB.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

static COMPILES: AtomicU64 = AtomicU64::new(0);
static HITS: AtomicU64 = AtomicU64::new(0);
static EVICTIONS: AtomicU64 = AtomicU64::new(0);

/// The cache: artifacts by key with their size and last use, and the totals.
struct Cache {
    map: HashMap<u64, (Arc<Artifact>, usize, u64)>,
    bytes: usize,
    limit: usize,
    /// A use counter: the entry with the smallest last use is the least recently used.
    tick: u64,
}

impl Cache {
    fn get(&mut self, key: u64) -> Option<Arc<Artifact>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&key).map(|(a, _, t)| {
            *t = tick;
            Arc::clone(a)
        })
    }

    /// Drops least recently used entries until `room` more bytes fit under the limit.
    fn make_room(&mut self, room: usize) {
        while self.bytes.saturating_add(room) > self.limit {
            let Some((&k, _)) = self.map.iter().min_by_key(|(_, (_, _, t))| *t) else {
                break;
            };
            if let Some((_, b, _)) = self.map.remove(&k) {
                self.bytes -= b;
                EVICTIONS.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn insert(&mut self, key: u64, a: Arc<Artifact>) {
        let b = a.size_bytes();
        if b > self.limit {
            // Larger than the whole cache: used once, not kept.
            return;
        }
        if let Some((_, old, _)) = self.map.remove(&key) {
            self.bytes -= old;
        }
        self.make_room(b);
        self.tick += 1;
        self.map.insert(key, (a, b, self.tick));
        self.bytes += b;
    }
}

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    static C: OnceLock<Mutex<Cache>> = OnceLock::new();
    C.get_or_init(|| {
        Mutex::new(Cache {
            map: HashMap::new(),
            bytes: 0,
            limit: DEFAULT_CACHE_BYTES,
            tick: 0,
        })
    })
    .lock()
    // The cache holds no invariant a panicking holder could break halfway that matters more
    // than losing the cache: keep using it.
    .unwrap_or_else(|e| e.into_inner())
}

/// The cache counters since the process started, and what the cache holds now.
pub fn cache_stats() -> CacheStats {
    let c = cache();
    CacheStats {
        compiles: COMPILES.load(Ordering::Relaxed),
        hits: HITS.load(Ordering::Relaxed),
        evictions: EVICTIONS.load(Ordering::Relaxed),
        entries: c.map.len(),
        bytes: c.bytes,
        limit: c.limit,
    }
}

/// Bounds the artifact cache to `bytes` (the sum of [`Artifact::size_bytes`]; default
/// [`DEFAULT_CACHE_BYTES`]), dropping least recently used artifacts now if it holds more. An
/// artifact larger than the limit is compiled and run but not kept; `0` turns caching off.
/// Returns the previous limit.
pub fn set_cache_limit(bytes: usize) -> usize {
    let mut c = cache();
    let old = std::mem::replace(&mut c.limit, bytes);
    c.make_room(0);
    old
}

/// Empties the artifact cache (counters are kept).
pub fn clear_cache() {
    let mut c = cache();
    c.map.clear();
    c.bytes = 0;
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
    let hit = cache().get(key);
    if let Some(a) = hit {
        HITS.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(target: "eagle", function = root, key = %format_args!("{key:016x}"), "artifact cache hit");
        return Ok((a, true));
    }
    tracing::debug!(target: "eagle", function = root, key = %format_args!("{key:016x}"), "artifact cache miss");
    let _compile = tracing::info_span!(target: "eagle", "compile", function = root, for_target = target.name(), world_size = b.world_size, bindings = %b.key_text()).entered();
    let t0 = Instant::now();
    tracing::debug_span!(target: "eagle", "verify", function = root)
        .in_scope(|| verify_module(m))?;
    let spec = tracing::debug_span!(target: "eagle", "specialize", function = root, world_size = b.world_size, bindings = %b.key_text())
        .in_scope(|| specialize_for(m, b, &target.limits()))?;
    let code = tracing::debug_span!(target: "eagle", "backend", backend = "cpu", functions = spec.module.functions.len())
        .in_scope(|| cpu::compile_module(&spec))?;
    let cuda = match target {
        Target::Cpu => None,
        Target::Cuda => Some(
            tracing::debug_span!(target: "eagle", "backend", backend = "cuda", functions = spec.module.functions.len())
                .in_scope(|| crate::cuda::emit_module(&spec))?,
        ),
    };
    let isolated = spec
        .module
        .functions
        .iter()
        .filter(|f| f.level != eagle_ir::Level::Host && !spec.module.reaches_peers(&f.name))
        .map(|f| f.name.clone())
        .collect();
    let a = Arc::new(Artifact {
        isolated,
        grids: spec.grids,
        key,
        target,
        root: root.to_string(),
        bindings: b.clone(),
        ir: print_module(&spec.module),
        module: spec.module,
        code,
        cuda,
        compile_time: t0.elapsed(),
    });
    COMPILES.fetch_add(1, Ordering::Relaxed);
    cache().insert(key, a.clone());
    Ok((a, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELLO: &str =
        "device @hello(%0 ctx: ctx, %1 x: tensor<[1, 64], f32>, out %2 y: tensor<[1, 64], f32>) {
  %3 = rank %0 : index
  %4 = const 0 : index
  %5 = load %1[%4, %4] : tile<[1, 64], f32>
  %6 = cast %3 : f32
  %7 = add %5, %6 : tile<[1, 64], f32>
  store %7, %2[%4, %4]
}

host @hello_rank(%0 x: tensor<[NR, 1, 64], f32>, out %1 y: tensor<[NR, 1, 64], f32>) {
  %2 = world_size : index
  %3 = const 0 : index
  for %4 in %3..%2 {
    %5 = slice %0[%4] : tensor<[1, 64], f32>
    %6 = slice %1[%4] : tensor<[1, 64], f32>
    dispatch @hello(%5, %6) device %4
  }
}
";

    /// Compiles the module at world size `p`: the artifact and whether it was a cache hit.
    fn at(m: &Module, p: u64) -> (Arc<Artifact>, bool) {
        compile(
            m,
            "hello_rank",
            &Bindings::world(p).with("NR", p),
            Target::Cpu,
        )
        .unwrap()
    }

    /// The only test of this crate that uses the global cache, so the counters move only here.
    #[test]
    fn the_cache_drops_the_least_recently_used_artifacts_beyond_its_byte_limit() {
        let m = eagle_ir::parse_module(HELLO).unwrap();
        clear_cache();
        assert_eq!(set_cache_limit(DEFAULT_CACHE_BYTES), DEFAULT_CACHE_BYTES);
        let s0 = cache_stats();
        let (a1, h1) = at(&m, 1);
        let (a2, h2) = at(&m, 2);
        let (a3, h3) = at(&m, 3);
        assert_eq!((h1, h2, h3), (false, false, false));
        let (b1, b2, b3) = (a1.size_bytes(), a2.size_bytes(), a3.size_bytes());
        // A real estimate: machine code and the IR texts.
        assert!(a1.code.code_bytes > 0);
        assert!(b1 > 2 * a1.ir.len() + a1.code.code_bytes, "{b1}");
        let s = cache_stats();
        assert_eq!((s.entries, s.bytes), (3, b1 + b2 + b3));
        assert_eq!((s.compiles - s0.compiles, s.hits - s0.hits), (3, 0));
        // Use P = 1 again: P = 2 is now the least recently used, and goes first.
        assert!(at(&m, 1).1);
        set_cache_limit(b1 + b2.max(b3));
        let s = cache_stats();
        assert_eq!((s.entries, s.bytes, s.limit), (2, b1 + b3, b1 + b2.max(b3)));
        assert_eq!(s.evictions - s0.evictions, 1);
        assert!(!at(&m, 2).1, "P = 2 was dropped: compiled again");
        // Making room for it dropped P = 3 (P = 1 was used after P = 3 was added).
        assert!(at(&m, 1).1);
        let s = cache_stats();
        assert_eq!((s.entries, s.bytes), (2, b1 + b2));
        assert_eq!(s.evictions - s0.evictions, 2);
        assert_eq!((s.compiles - s0.compiles, s.hits - s0.hits), (4, 2));
        // Limit 0: nothing is kept; every compile is a miss.
        set_cache_limit(0);
        assert_eq!(cache_stats().entries, 0);
        assert!(!at(&m, 1).1);
        assert!(!at(&m, 1).1);
        assert_eq!(cache_stats().bytes, 0);
        set_cache_limit(DEFAULT_CACHE_BYTES);
        clear_cache();
    }
}
