//! eagle-codegen: specialization passes and backends.
//!
//! - [`specialize()`]: binds symbolic dims and the world size, folds constants, runs the range
//!   analysis that checks static index bounds and peer arithmetic, and re-verifies.
//! - [`cpu`]: lowers per-device and compute functions to Cranelift IR and JIT-compiles them.
//! - [`cuda`]: emits CUDA C for the same functions (compiled to PTX by NVRTC in the runtime).
//! - [`compile`]: the artifact cache, keyed by a hash of (generic IR text, bindings, target).
//! - [`disk`]: the persistent cache of NVRTC images and the CUDA emulation's libraries
//!   (`EAGLE_CACHE_DIR`, SHA-256 keys, verified entries, a size bound).
//! - [`abi`]: the calling convention between compiled code and a runtime. Compiled code reaches
//!   the runtime only through the [`abi::Hooks`] table, so no backend knows a transport.

pub mod abi;
mod artifact;
mod back;
pub mod disk;
mod error;
mod passes;
pub mod sites;

pub use back::{cpu, cuda};
/// The lowering of the built-in collectives (`passes/lower_collectives.rs`).
pub use passes::lower_collectives as lower;
use passes::specialize as specialize_pass;

pub use artifact::{
    cache_stats, clear_cache, compile, compile_hashed, set_cache_limit, Artifact, CacheStats,
    Target, DEFAULT_CACHE_BYTES,
};
pub use error::{CodegenError, SpecializeError};

/// The largest world size a program is specialized for.
pub const MAX_WORLD_SIZE: u64 = 4096;
pub use specialize_pass::{specialize, specialize_for, Bindings, Limits, Specialized};

/// The FNV-1a (64-bit) offset basis: the hash of no bytes.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64-bit: a stable hash of text for cache keys and content hashes.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(FNV_OFFSET, bytes)
}

/// FNV-1a continued from hash `h` over `bytes`: `fnv1a_extend(fnv1a(a), b) == fnv1a(a ++ b)`.
pub fn fnv1a_extend(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
