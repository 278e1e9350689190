//! The persistent artifact cache: compiled images that are slow to make (NVRTC cubins and
//! PTX, the CUDA emulation's shared libraries) kept on disk across processes.
//!
//! - **Where.** `EAGLE_CACHE_DIR` if set (a leading `~` is the home directory, a relative path
//!   is taken from the current directory when the process starts), else the platform cache
//!   directory's `eagle` (`$XDG_CACHE_HOME/eagle` or `~/.cache/eagle` on Linux).
//!   `EAGLE_CACHE_DIR=off` (any case) or empty turns the disk cache off. Entries live in one
//!   folder per kind (`nvrtc/`, `cuda-emu/`).
//! - **Keys.** A SHA-256 ([`key`]) of everything that changes the image: eagle's version, the
//!   kind, the tool and its version (NVRTC's `major.minor`, the C++ compiler's `--version`
//!   line), the driver's version where one is loaded, the architecture, the compile options
//!   and the generated source. The source is a function of the generic IR text, the bindings
//!   and the target, so the key covers those too (and two programs that emit the same source
//!   share an entry). A change to any one of them is a miss.
//! - **Integrity.** Every entry is `payload ++ sha256(payload) ++ key ++ len(payload) as u64 LE
//!   ++ MAGIC` in one file, written under a private name and renamed into place (atomic). An
//!   entry whose trailer does not match its payload and its own key (truncated, corrupted,
//!   moved or copied over another entry, from another version), that is not a regular file (a
//!   folder, a symlink, a device), or that is larger than the bound is a miss: it is logged (a
//!   `tracing` warning), counted in [`DiskStats::corrupt`], deleted and rebuilt, never loaded
//!   and never read past the bound. A shared library keeps its trailer: loaders ignore bytes
//!   past the ELF segments.
//! - **Bound.** `EAGLE_CACHE_MAX_BYTES` (default [`DEFAULT_MAX_BYTES`], 1 GiB): an image larger
//!   than the bound is used but not kept; after an insertion the least recently used other
//!   entries (by modification time, refreshed on every hit) are deleted until the total fits.
//!   Temporary files of processes that died while compiling are deleted after an hour.
//! - **Failures.** The cache is an optimisation: a directory that cannot be created or written
//!   makes every lookup a miss (logged), never an error of the run.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::SystemTime;

/// The last 8 bytes of every entry: the format's name and version.
pub const MAGIC: &[u8; 8] = b"EAGLEC02";
/// Bytes after the payload: its SHA-256, the entry's key, its length, [`MAGIC`].
pub const TRAILER_BYTES: usize = 32 + 32 + 8 + 8;
/// How old a temporary file must be before the bound's sweep and [`DiskCache::clear`] take it
/// for the leftover of a process that died while compiling.
pub const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(3600);
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

    /// The directory the environment names: `EAGLE_CACHE_DIR` (`~` expanded, made absolute),
    /// else the platform cache directory's `eagle`; `None` when `EAGLE_CACHE_DIR` is `off` (any
    /// case) or empty, or there is no home directory.
    pub fn dir_from_env() -> Option<PathBuf> {
        match std::env::var_os("EAGLE_CACHE_DIR") {
            Some(d) if d.is_empty() || d.eq_ignore_ascii_case("off") => None,
            Some(d) => {
                let d = PathBuf::from(d);
                let d = match d.strip_prefix("~") {
                    Ok(rest) => dirs::home_dir()?.join(rest),
                    Err(_) => d,
                };
                Some(std::path::absolute(&d).unwrap_or(d))
            }
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
    /// damaged entry (see the module docs) is deleted, logged and counted, and is a miss.
    pub fn get(&self, kind: &str, key: &Key, ext: &str) -> Option<Vec<u8>> {
        let path = self.entry_path(kind, key, ext);
        let miss = || {
            MISSES.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(target: "eagle", kind, key = %key.hex(), "disk cache miss");
            None
        };
        // The entry itself, not what a symlink points to.
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(_) => return miss(),
        };
        if !meta.is_file() {
            self.corrupt(kind, key, &path, meta.len(), "not a regular file");
            return None;
        }
        if meta.len() > self.max_bytes.max(TRAILER_BYTES as u64) {
            self.corrupt(
                kind,
                key,
                &path,
                meta.len(),
                "it is larger than the cache's bound",
            );
            return None;
        }
        // The trailer first: a file whose length field or key does not match is refused
        // before its payload is read.
        let mut bytes = vec![];
        let read = std::fs::File::open(&path).and_then(|mut f| {
            use std::io::{Read, Seek, SeekFrom};
            let len = meta.len();
            if len < TRAILER_BYTES as u64 {
                return Ok(false);
            }
            let mut t = [0u8; TRAILER_BYTES];
            f.seek(SeekFrom::Start(len - TRAILER_BYTES as u64))?;
            f.read_exact(&mut t)?;
            let stated = u64::from_le_bytes(t[64..72].try_into().unwrap_or([0; 8]));
            if &t[72..] != MAGIC || t[32..64] != key.0 || stated + TRAILER_BYTES as u64 != len {
                return Ok(false);
            }
            f.seek(SeekFrom::Start(0))?;
            bytes.reserve_exact(len as usize);
            f.take(len).read_to_end(&mut bytes)?;
            Ok(true)
        });
        let checked = match read {
            Ok(ok) => ok,
            Err(_) => return miss(),
        };
        match payload_len(&bytes, key).filter(|_| checked) {
            Some(n) => {
                bytes.truncate(n);
                HITS.fetch_add(1, Ordering::Relaxed);
                touch(&path);
                tracing::debug!(target: "eagle", kind, key = %key.hex(), bytes = n, "disk cache hit");
                Some(bytes)
            }
            None => {
                self.corrupt(
                    kind,
                    key,
                    &path,
                    bytes.len() as u64,
                    "corrupted or truncated: its trailer does not match its bytes and its key",
                );
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

    fn corrupt(&self, kind: &str, key: &Key, path: &Path, len: u64, why: &str) {
        CORRUPT.fetch_add(1, Ordering::Relaxed);
        MISSES.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(target: "eagle", kind, key = %key.hex(), path = %path.display(), bytes = len,
            "disk cache entry rejected ({why}); deleted, rebuilding");
        let gone = match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
            _ => std::fs::remove_file(path),
        };
        if let Err(e) = gone {
            tracing::warn!(target: "eagle", path = %path.display(), error = %e, "disk cache entry cannot be deleted");
        }
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
        let done = (|| -> std::io::Result<Option<PathBuf>> {
            use std::io::Write;
            let payload = std::fs::read(tmp)?;
            if (payload.len() + TRAILER_BYTES) as u64 > self.max_bytes {
                tracing::debug!(target: "eagle", kind, key = %key.hex(), bytes = payload.len(), max_bytes = self.max_bytes,
                    "disk cache: the image is larger than the bound; not cached");
                return Ok(None);
            }
            let mut f = std::fs::OpenOptions::new().append(true).open(tmp)?;
            f.write_all(&trailer(&payload, key))?;
            drop(f);
            let path = self.entry_path(kind, key, ext);
            // An entry that is a folder (or anything but a file) would refuse the rename.
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(&path)?;
            }
            std::fs::rename(tmp, &path)?;
            Ok(Some(path))
        })();
        match done {
            Ok(None) => None,
            Ok(Some(path)) => {
                WRITES.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "eagle", kind, key = %key.hex(), "disk cache write");
                self.enforce_bound(&path);
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

    /// Every entry (`temps: false`) or every temporary file (`temps: true`): path, size and
    /// last modification. Only names eagle writes count (`<64 hex digits>.<ext>` and
    /// `.tmp-<pid>-<n>.<ext>`, one folder down): a cache directory pointed at a folder that
    /// holds other files never counts, evicts or clears them.
    fn files(&self, temps: bool) -> Vec<(PathBuf, u64, SystemTime)> {
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
                let Some(name) = name.to_str() else {
                    continue;
                };
                let wanted = if temps {
                    is_temp_name(name)
                } else {
                    is_entry_name(name)
                };
                if !wanted {
                    continue;
                }
                if let Ok(m) = f.metadata() {
                    let t = m.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                    out.push((f.path(), m.len(), t));
                }
            }
        }
        out
    }

    /// What the cache holds now (temporary files of running compiles are not counted).
    pub fn usage(&self) -> Usage {
        let e = self.files(false);
        Usage {
            entries: e.len() as u64,
            bytes: e.iter().map(|x| x.1).sum(),
        }
    }

    /// Whether the cache directory can be a cache: `Ok` when it is a folder or does not exist
    /// yet (created on the first write).
    ///
    /// # Errors
    /// An error naming the path when it is something other than a folder.
    pub fn check_dir(&self) -> std::io::Result<()> {
        match std::fs::metadata(&self.dir) {
            Ok(m) if !m.is_dir() => Err(std::io::Error::other(format!(
                "{} is not a directory",
                self.dir.display()
            ))),
            _ => Ok(()),
        }
    }

    /// Deletes temporary files older than `age` (left by processes that died compiling).
    fn sweep_temps(&self, age: std::time::Duration) {
        let now = SystemTime::now();
        for (path, _, t) in self.files(true) {
            // A time further in the future than `age` is as suspect as one in the past.
            let off = now.duration_since(t).or_else(|e| Ok::<_, ()>(e.duration()));
            if off.is_ok_and(|d| d > age) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Deletes the least recently used entries other than `keep` (the one just written) until
    /// the total is at most the bound, and stale temporary files.
    fn enforce_bound(&self, keep: &Path) {
        self.sweep_temps(STALE_TEMP);
        let mut e = self.files(false);
        let mut total: u64 = e.iter().map(|x| x.1).sum();
        if total <= self.max_bytes {
            return;
        }
        e.sort_by_key(|x| x.2);
        for (path, len, _) in e {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                EVICTIONS.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: "eagle", path = %path.display(), bytes = len, "disk cache eviction");
            }
        }
    }

    /// Deletes every entry, and temporary files older than 10 minutes (a process compiling
    /// now keeps its own); returns what was deleted. The folders stay.
    ///
    /// # Errors
    /// [`DiskCache::check_dir`]'s error, or the I/O error of an entry that exists but cannot
    /// be deleted.
    pub fn clear(&self) -> std::io::Result<Usage> {
        self.check_dir()?;
        let mut done = Usage::default();
        for (path, len, _) in self.files(false) {
            let gone = match std::fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
                _ => std::fs::remove_file(&path),
            };
            match gone {
                Ok(()) => {
                    done.entries += 1;
                    done.bytes += len;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        self.sweep_temps(std::time::Duration::from_secs(600));
        Ok(done)
    }
}

/// The process's disk cache from the environment, read once (see [`DiskCache::from_env`]).
pub fn global() -> Option<&'static DiskCache> {
    static C: OnceLock<Option<DiskCache>> = OnceLock::new();
    C.get_or_init(DiskCache::from_env).as_ref()
}

/// Whether `name` is an entry's file name: 64 lowercase hex digits, a dot, an extension.
fn is_entry_name(name: &str) -> bool {
    name.split_once('.').is_some_and(|(h, ext)| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            && !ext.is_empty()
            && ext.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Whether `name` is a temporary file's name: `.tmp-<pid>-<n>.<ext>`.
fn is_temp_name(name: &str) -> bool {
    name.strip_prefix(".tmp-")
        .and_then(|r| r.split_once('.'))
        .and_then(|(ids, _)| ids.split_once('-'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
}

/// The trailer of `payload` as entry `key`.
fn trailer(payload: &[u8], key: &Key) -> Vec<u8> {
    let mut t = Vec::with_capacity(TRAILER_BYTES);
    t.extend_from_slice(&Sha256::digest(payload));
    t.extend_from_slice(&key.0);
    t.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    t.extend_from_slice(MAGIC);
    t
}

/// The payload's length when `entry` ends in a trailer that matches it and names `key`.
fn payload_len(entry: &[u8], key: &Key) -> Option<usize> {
    let n = entry.len().checked_sub(TRAILER_BYTES)?;
    let (payload, t) = entry.split_at(n);
    let len = u64::from_le_bytes(t[64..72].try_into().ok()?);
    (&t[72..] == MAGIC
        && len == n as u64
        && t[32..64] == key.0
        && t[..32] == Sha256::digest(payload)[..])
        .then_some(n)
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
        std::fs::write(&path, MAGIC).unwrap();
        assert_eq!(c.get("t", &k, "bin"), None);
        std::fs::write(&path, b"").unwrap();
        assert_eq!(c.get("t", &k, "bin"), None);
        let s = stats();
        assert!(s.corrupt - s0.corrupt >= 4, "{s:?} {s0:?}");
        assert!(s.hits > s0.hits);
        let _ = std::fs::remove_dir_all(c.dir());
    }

    /// Found by a break-it helper: an entry copied over another's, a symlink to a device (read
    /// without a bound, it took 23 GB), a folder where an entry belongs, and a bound smaller
    /// than one entry (the entry was evicted before it was loaded).
    #[test]
    fn a_moved_entry_a_symlink_a_folder_and_a_tiny_bound_are_misses_not_failures() {
        let c = DiskCache::at(temp_dir("adv"), DEFAULT_MAX_BYTES);
        let (a, b) = (key(&[b"a"]), key(&[b"b"]));
        let pa = c.put("t", &a, "bin", b"image a").unwrap();
        let pb = c.put("t", &b, "bin", b"image b").unwrap();
        // b's file copied over a's: its trailer names b, so a is a miss, not image b.
        std::fs::copy(&pb, &pa).unwrap();
        let s0 = stats();
        assert_eq!(c.get("t", &a, "bin"), None);
        assert!(!pa.exists());
        assert_eq!(c.get("t", &b, "bin").as_deref(), Some(&b"image b"[..]));
        // A symlink to an endless device: refused without reading it.
        std::os::unix::fs::symlink("/dev/zero", &pa).unwrap();
        assert_eq!(c.get("t", &a, "bin"), None);
        assert!(
            std::fs::symlink_metadata(&pa).is_err(),
            "the link is deleted"
        );
        // A folder where the entry belongs: a miss, deleted, and the entry is written again.
        std::fs::create_dir_all(pa.join("x")).unwrap();
        assert_eq!(c.get("t", &a, "bin"), None);
        assert!(!pa.exists());
        std::fs::create_dir_all(&pa).unwrap();
        assert_eq!(c.put("t", &a, "bin", b"image a"), Some(pa.clone()));
        assert_eq!(c.get("t", &a, "bin").as_deref(), Some(&b"image a"[..]));
        assert!(stats().corrupt - s0.corrupt >= 3);
        // An entry larger than the bound is never read, and an image larger than the bound
        // is not kept (nor does it evict anything).
        let small = DiskCache::at(c.dir(), 10);
        assert_eq!(small.get("t", &a, "bin"), None);
        assert!(!pa.exists());
        assert_eq!(small.put("t", &a, "bin", b"image a"), None);
        assert!(pb.exists());
        let tiny = DiskCache::at(temp_dir("tiny"), 0);
        assert_eq!(tiny.put("t", &a, "bin", b"x"), None);
        assert_eq!(tiny.usage(), Usage::default());
        // The entry just written is never the one evicted.
        let one = DiskCache::at(temp_dir("one"), TRAILER_BYTES as u64 + 8);
        let p1 = one.put("t", &a, "bin", b"12345678").unwrap();
        let p2 = one.put("t", &b, "bin", b"abcdefgh").unwrap();
        assert!(!p1.exists() && p2.exists());
        for d in [c.dir(), tiny.dir(), one.dir()] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    /// Found by a second break-it helper: `EAGLE_CACHE_DIR=.` in a project folder, then
    /// `eagle cache clear` (or the bound) deleted the project's files.
    #[test]
    fn files_eagle_did_not_write_are_never_counted_evicted_or_cleared() {
        let d = temp_dir("user");
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(d.join("src/main.rs"), b"fn main() {}").unwrap();
        std::fs::write(d.join("src/.tmp-notes.txt"), b"mine").unwrap();
        std::fs::write(d.join("Cargo.toml"), b"[package]").unwrap();
        let c = DiskCache::at(&d, 200);
        let k = key(&[b"k"]);
        c.put("t", &k, "bin", &[7; 100]).unwrap();
        assert_eq!(c.usage().entries, 1);
        assert_eq!(c.clear().unwrap().entries, 1);
        assert!(d.join("src/main.rs").exists() && d.join("src/.tmp-notes.txt").exists());
        assert!(d.join("Cargo.toml").exists());
        assert!(is_entry_name(&format!("{}.so", k.hex())));
        assert!(!is_entry_name("main.rs") && !is_entry_name(&format!("{}.s-o", k.hex())));
        assert!(is_temp_name(".tmp-123-4.so") && !is_temp_name(".tmp-notes.txt"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn clear_keeps_a_running_compile_s_temporary_file_and_old_ones_are_swept() {
        let c = DiskCache::at(temp_dir("temps"), DEFAULT_MAX_BYTES);
        let k = key(&[b"k"]);
        c.put("t", &k, "bin", b"entry").unwrap();
        let fresh = c.temp_path("t", "so").unwrap();
        std::fs::write(&fresh, b"being compiled").unwrap();
        let old = c.temp_path("t", "so").unwrap();
        std::fs::write(&old, b"left by a dead process").unwrap();
        let f = std::fs::OpenOptions::new().append(true).open(&old).unwrap();
        f.set_modified(SystemTime::now() - STALE_TEMP * 2).unwrap();
        assert_eq!(c.usage().entries, 1, "temporary files are not entries");
        assert_eq!(c.clear().unwrap().entries, 1);
        assert!(fresh.exists(), "a compile in progress keeps its file");
        assert!(!old.exists(), "a dead process's file is swept");
        // The folder is still there: the running compile can commit.
        assert!(c.commit("t", &k, "bin", &fresh).is_some());
        assert_eq!(
            c.get("t", &k, "bin").as_deref(),
            Some(&b"being compiled"[..])
        );
        // A path that is a file cannot be a cache.
        let file = temp_dir("file");
        std::fs::write(&file, b"").unwrap();
        let bad = DiskCache::at(&file, DEFAULT_MAX_BYTES);
        assert!(bad.check_dir().is_err());
        assert!(bad.clear().is_err());
        let _ = std::fs::remove_file(&file);
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
