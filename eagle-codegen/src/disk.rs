//! The persistent artifact cache: compiled images that are slow to make (NVRTC cubins and
//! PTX, the CUDA emulation's shared libraries) kept on disk across processes.
//!
//! - **Where.** `EAGLE_CACHE_DIR` if set, else the platform cache directory's `eagle`
//!   (`$XDG_CACHE_HOME/eagle` or `~/.cache/eagle` on Linux). `EAGLE_CACHE_DIR=off` turns the
//!   disk cache off. Entries live in one folder per kind (`nvrtc/`, `cuda-emu/`).
//! - **Keys.** A SHA-256 ([`key`]) of everything that changes the image: eagle's version, the
//!   kind, the tool and its version (NVRTC's `major.minor`, the C++ compiler's `--version`
//!   line), the driver's version where one is loaded, the architecture, the compile options
//!   and the generated source. The source is a function of the generic IR text, the bindings
//!   and the target, so the key covers those too (and two programs that emit the same source
//!   share an entry). A change to any one of them is a miss.
//! - **Integrity.** Every entry is `payload ++ sha256(payload) ++ len(payload) as u64 LE ++
//!   MAGIC` in one file, written under a private name and renamed into place (atomic). A file
//!   whose trailer does not match its payload (truncated, corrupted, from another version) is a
//!   miss: it is logged (a `tracing` warning), counted in [`DiskStats::corrupt`], deleted and
//!   rebuilt, never loaded. A shared library keeps its trailer: loaders ignore bytes past the
//!   ELF segments.
//! - **Bound.** `EAGLE_CACHE_MAX_BYTES` (default [`DEFAULT_MAX_BYTES`], 1 GiB): after an
//!   insertion the least recently used entries (by modification time, refreshed on every hit)
//!   are deleted until the total fits.
//! - **Failures.** The cache is an optimisation: a directory that cannot be created or written
//!   makes every lookup a miss (logged), never an error of the run.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::SystemTime;

/// The last 8 bytes of every entry: the format's name and version.
pub const MAGIC: &[u8; 8] = b"EAGLEC01";
/// Bytes after the payload: its SHA-256, its length, [`MAGIC`].
pub const TRAILER_BYTES: usize = 32 + 8 + 8;
/// The default bound of the disk cache: 1 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// A cache key: the SHA-256 of the parts that determine an image (see [`key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(pub [u8; 32]);

impl Key {
    /// The key as 64 lowercase hex digits (the entry's file name).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The key of `parts`: SHA-256 over eagle's version and each part prefixed by its length, so
/// no two different lists of parts hash the same bytes.
pub fn key(parts: &[&[u8]]) -> Key {
    let mut h = Sha256::new();
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    for p in std::iter::once(version).chain(parts.iter().copied()) {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    Key(h.finalize().into())
}

/// Counters of the disk cache since the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskStats {
    /// Lookups served from disk.
    pub hits: u64,
    /// Lookups that found no entry.
    pub misses: u64,
    /// Lookups that found an entry whose trailer did not match (deleted; also a miss).
    pub corrupt: u64,
    /// Entries written.
    pub writes: u64,
    /// Entries deleted to stay under the bound.
    pub evictions: u64,
}

static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);
static CORRUPT: AtomicU64 = AtomicU64::new(0);
static WRITES: AtomicU64 = AtomicU64::new(0);
static EVICTIONS: AtomicU64 = AtomicU64::new(0);

/// The disk cache's counters since the process started (all caches of the process together).
pub fn stats() -> DiskStats {
    DiskStats {
        hits: HITS.load(Ordering::Relaxed),
        misses: MISSES.load(Ordering::Relaxed),
        corrupt: CORRUPT.load(Ordering::Relaxed),
        writes: WRITES.load(Ordering::Relaxed),
        evictions: EVICTIONS.load(Ordering::Relaxed),
    }
}

/// A cache directory with its size bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCache {
    dir: PathBuf,
    max_bytes: u64,
}

/// What the cache holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Entries.
    pub entries: u64,
    /// Their total size in bytes (trailers included).
    pub bytes: u64,
}

impl DiskCache {
    /// A cache in `dir` bounded by `max_bytes` (created on the first write).
    pub fn at(dir: impl Into<PathBuf>, max_bytes: u64) -> DiskCache {
        DiskCache {
            dir: dir.into(),
            max_bytes,
        }
    }

    /// The directory the environment names: `EAGLE_CACHE_DIR`, else the platform cache
    /// directory's `eagle`; `None` when `EAGLE_CACHE_DIR=off` (or empty) or there is no home.
    pub fn dir_from_env() -> Option<PathBuf> {
        match std::env::var_os("EAGLE_CACHE_DIR") {
            Some(d) if d.is_empty() || d == "off" => None,
            Some(d) => Some(PathBuf::from(d)),
            None => dirs::cache_dir().map(|d| d.join("eagle")),
        }
    }

    /// The cache the environment names (see the module docs), or `None` when it is off.
    /// `EAGLE_CACHE_MAX_BYTES` that is not a number is ignored (logged) for the default.
    pub fn from_env() -> Option<DiskCache> {
        let dir = Self::dir_from_env()?;
        let max_bytes = match std::env::var("EAGLE_CACHE_MAX_BYTES") {
            Ok(v) => v.trim().parse().unwrap_or_else(|_| {
                tracing::warn!(target: "eagle", value = %v, "EAGLE_CACHE_MAX_BYTES is not a number of bytes; using the default bound");
                DEFAULT_MAX_BYTES
            }),
            Err(_) => DEFAULT_MAX_BYTES,
        };
        Some(DiskCache::at(dir, max_bytes))
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of the entry of `key` in folder `kind` with extension `ext`.
    pub fn entry_path(&self, kind: &str, key: &Key, ext: &str) -> PathBuf {
        self.dir.join(kind).join(format!("{}.{ext}", key.hex()))
    }

    /// The payload of entry `key`, verified against its trailer, or `None` (a miss). A
    /// corrupted or truncated entry is deleted, logged and counted, and is a miss.
    pub fn get(&self, kind: &str, key: &Key, ext: &str) -> Option<Vec<u8>> {
        let path = self.entry_path(kind, key, ext);
        let mut bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(_) => {
                MISSES.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "eagle", kind, key = %key.hex(), "disk cache miss");
                return None;
            }
        };
        match payload_len(&bytes) {
            Some(n) => {
                bytes.truncate(n);
                HITS.fetch_add(1, Ordering::Relaxed);
                touch(&path);
                tracing::debug!(target: "eagle", kind, key = %key.hex(), bytes = n, "disk cache hit");
                Some(bytes)
            }
            None => {
                self.corrupt(kind, key, &path, bytes.len());
                None
            }
        }
    }

    /// The path of entry `key` after verifying it (for a shared library the loader opens),
    /// or `None`, as [`DiskCache::get`].
    pub fn get_path(&self, kind: &str, key: &Key, ext: &str) -> Option<PathBuf> {
        self.get(kind, key, ext)
            .map(|_| self.entry_path(kind, key, ext))
    }

    fn corrupt(&self, kind: &str, key: &Key, path: &Path, len: usize) {
        CORRUPT.fetch_add(1, Ordering::Relaxed);
        MISSES.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(target: "eagle", kind, key = %key.hex(), path = %path.display(), bytes = len,
            "disk cache entry is corrupted or truncated (its trailer does not match); deleted, rebuilding");
        let _ = std::fs::remove_file(path);
    }

    /// A fresh private path in folder `kind` (created), for a tool to write an image into
    /// before [`DiskCache::commit`]; `None` when the folder cannot be created (logged).
    pub fn temp_path(&self, kind: &str, ext: &str) -> Option<PathBuf> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let folder = self.dir.join(kind);
        if let Err(e) = std::fs::create_dir_all(&folder) {
            tracing::warn!(target: "eagle", dir = %folder.display(), error = %e, "disk cache folder cannot be created; not caching");
            return None;
        }
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        Some(folder.join(format!(".tmp-{}-{n}.{ext}", std::process::id())))
    }

    /// Appends the trailer to the file at `tmp` (from [`DiskCache::temp_path`]) and renames it
    /// into place as entry `key`; then keeps the cache under its bound. Returns the entry's
    /// path, or `None` when it could not be written (logged; `tmp` is left to the caller).
    pub fn commit(&self, kind: &str, key: &Key, ext: &str, tmp: &Path) -> Option<PathBuf> {
        let done = (|| -> std::io::Result<PathBuf> {
            use std::io::Write;
            let payload = std::fs::read(tmp)?;
            let mut f = std::fs::OpenOptions::new().append(true).open(tmp)?;
            f.write_all(&trailer(&payload))?;
            drop(f);
            let path = self.entry_path(kind, key, ext);
            std::fs::rename(tmp, &path)?;
            Ok(path)
        })();
        match done {
            Ok(path) => {
                WRITES.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "eagle", kind, key = %key.hex(), "disk cache write");
                self.enforce_bound();
                Some(path)
            }
            Err(e) => {
                tracing::warn!(target: "eagle", kind, key = %key.hex(), error = %e, "disk cache entry cannot be written; not caching");
                None
            }
        }
    }

    /// Writes `payload` as entry `key` ([`DiskCache::temp_path`] + [`DiskCache::commit`]).
    pub fn put(&self, kind: &str, key: &Key, ext: &str, payload: &[u8]) -> Option<PathBuf> {
        let tmp = self.temp_path(kind, ext)?;
        if let Err(e) = std::fs::write(&tmp, payload) {
            let _ = std::fs::remove_file(&tmp);
            tracing::warn!(target: "eagle", kind, error = %e, "disk cache entry cannot be written; not caching");
            return None;
        }
        let done = self.commit(kind, key, ext, &tmp);
        if done.is_none() {
            let _ = std::fs::remove_file(&tmp);
        }
        done
    }

    /// Every entry: path, size and last use.
    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let mut out = vec![];
        let Ok(kinds) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        for k in kinds.flatten() {
            let Ok(files) = std::fs::read_dir(k.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name();
                if name.to_string_lossy().starts_with(".tmp-") {
                    continue;
                }
                if let Ok(m) = f.metadata() {
                    if m.is_file() {
                        let t = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                        out.push((f.path(), m.len(), t));
                    }
                }
            }
        }
        out
    }

    /// What the cache holds now.
    pub fn usage(&self) -> Usage {
        let e = self.entries();
        Usage {
            entries: e.len() as u64,
            bytes: e.iter().map(|x| x.1).sum(),
        }
    }

    /// Deletes the least recently used entries until the total is at most the bound.
    fn enforce_bound(&self) {
        let mut e = self.entries();
        let mut total: u64 = e.iter().map(|x| x.1).sum();
        if total <= self.max_bytes {
            return;
        }
        e.sort_by_key(|x| x.2);
        for (path, len, _) in e {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                EVICTIONS.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "eagle", path = %path.display(), bytes = len, "disk cache eviction");
            }
        }
    }

    /// Deletes every entry (and stray temporary files); returns what was deleted.
    ///
    /// # Errors
    /// The I/O error of a file or folder that exists but cannot be deleted.
    pub fn clear(&self) -> std::io::Result<Usage> {
        let before = self.usage();
        match std::fs::read_dir(&self.dir) {
            Ok(kinds) => {
                for k in kinds.flatten() {
                    if k.path().is_dir() {
                        std::fs::remove_dir_all(k.path())?;
                    }
                }
                Ok(before)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Usage::default()),
            Err(e) => Err(e),
        }
    }
}

/// The process's disk cache from the environment, read once (see [`DiskCache::from_env`]).
pub fn global() -> Option<&'static DiskCache> {
    static C: OnceLock<Option<DiskCache>> = OnceLock::new();
    C.get_or_init(DiskCache::from_env).as_ref()
}

/// The trailer of `payload`.
fn trailer(payload: &[u8]) -> Vec<u8> {
    let mut t = Vec::with_capacity(TRAILER_BYTES);
    t.extend_from_slice(&Sha256::digest(payload));
    t.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    t.extend_from_slice(MAGIC);
    t
}

/// The payload's length when `entry` ends in a trailer that matches it.
fn payload_len(entry: &[u8]) -> Option<usize> {
    let n = entry.len().checked_sub(TRAILER_BYTES)?;
    let (payload, t) = entry.split_at(n);
    let len = u64::from_le_bytes(t[32..40].try_into().ok()?);
    (&t[40..] == MAGIC && len == n as u64 && t[..32] == Sha256::digest(payload)[..]).then_some(n)
}

/// Marks `path` as just used (its modification time), for the least-recently-used bound.
fn touch(path: &Path) {
    if let Ok(f) = std::fs::OpenOptions::new().append(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("eagle-disk-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn keys_separate_their_parts_and_change_with_any_part() {
        let k = key(&[b"nvrtc", b"sm_90", b"int x = 1;"]);
        assert_eq!(k, key(&[b"nvrtc", b"sm_90", b"int x = 1;"]));
        assert_ne!(k, key(&[b"nvrtc", b"sm_90", b"int x = 2;"]));
        assert_ne!(k, key(&[b"nvrtc", b"sm_80", b"int x = 1;"]));
        // Length prefixes: moving a byte between parts is another key.
        assert_ne!(key(&[b"ab", b"c"]), key(&[b"a", b"bc"]));
        assert_eq!(k.hex().len(), 64);
    }

    #[test]
    fn entries_round_trip_and_a_damaged_entry_is_a_deleted_miss() {
        let c = DiskCache::at(temp_dir("rt"), DEFAULT_MAX_BYTES);
        let k = key(&[b"t", b"one"]);
        let s0 = stats();
        assert_eq!(c.get("t", &k, "bin"), None);
        let path = c.put("t", &k, "bin", b"payload bytes").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().len() as usize,
            13 + TRAILER_BYTES
        );
        assert_eq!(
            c.get("t", &k, "bin").as_deref(),
            Some(&b"payload bytes"[..])
        );
        // Truncated by one byte: a miss, and the file is gone.
        let full = std::fs::read(&path).unwrap();
        std::fs::write(&path, &full[..full.len() - 1]).unwrap();
        assert_eq!(c.get("t", &k, "bin"), None);
        assert!(!path.exists());
        // One flipped payload bit: a miss.
        let mut flipped = full.clone();
        flipped[3] ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(c.get("t", &k, "bin"), None);
        // Shorter than a trailer, and empty.
        std::fs::write(&path, b"EAGLEC01").unwrap();
        assert_eq!(c.get("t", &k, "bin"), None);
        std::fs::write(&path, b"").unwrap();
        assert_eq!(c.get("t", &k, "bin"), None);
        let s = stats();
        assert!(s.corrupt - s0.corrupt >= 4, "{s:?} {s0:?}");
        assert!(s.hits > s0.hits);
        let _ = std::fs::remove_dir_all(c.dir());
    }

    #[test]
    fn the_bound_deletes_the_least_recently_used_and_clear_empties_the_cache() {
        let entry = 100 + TRAILER_BYTES as u64;
        let c = DiskCache::at(temp_dir("bound"), 3 * entry);
        let keys: Vec<Key> = (0..4u8).map(|i| key(&[&[i]])).collect();
        for (i, k) in keys.iter().enumerate().take(3) {
            c.put("t", k, "bin", &[i as u8; 100]).unwrap();
            // Distinct modification times, oldest first.
            let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + i as u64);
            let f = std::fs::OpenOptions::new()
                .append(true)
                .open(c.entry_path("t", k, "bin"))
                .unwrap();
            f.set_modified(t).unwrap();
        }
        assert_eq!(
            c.usage(),
            Usage {
                entries: 3,
                bytes: 3 * entry
            }
        );
        // A hit on the oldest makes it the most recently used.
        assert!(c.get("t", &keys[0], "bin").is_some());
        c.put("t", &keys[3], "bin", &[3; 100]).unwrap();
        assert_eq!(c.usage().entries, 3);
        assert!(
            c.get("t", &keys[1], "bin").is_none(),
            "the least recently used went"
        );
        assert!(c.get("t", &keys[0], "bin").is_some());
        assert!(c.get("t", &keys[2], "bin").is_some());
        assert!(c.get("t", &keys[3], "bin").is_some());
        assert_eq!(
            c.clear().unwrap(),
            Usage {
                entries: 3,
                bytes: 3 * entry
            }
        );
        assert_eq!(c.usage(), Usage::default());
        assert_eq!(c.clear().unwrap(), Usage::default());
        let _ = std::fs::remove_dir_all(c.dir());
    }
}
