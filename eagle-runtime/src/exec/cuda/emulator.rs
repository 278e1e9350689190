//! The CUDA emulation: the same CUDA C compiled by the host C++ compiler, with
//! `eagle_codegen::cuda::HOST_SHIM`, into a shared library loaded once per code, whose kernels
//! run on CPU threads (the `cuda_emulated` platform).

use super::*;

/// The host C++ compiler (`$CXX`, default `c++`) and the first line of its `--version`, read
/// once per process (part of the emulation's disk-cache key).
pub(super) fn host_compiler() -> &'static (String, String) {
    static CXX: OnceLock<(String, String)> = OnceLock::new();
    CXX.get_or_init(|| {
        let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
        let version = std::process::Command::new(&cxx)
            .arg("--version")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|t| t.lines().next().map(str::to_string))
            .unwrap_or_default();
        (cxx, version)
    })
}

/// The emulation's compile flags (with `-DEG_NT=` appended).
pub(super) const EMU_FLAGS: [&str; 6] = ["-std=c++20", "-O0", "-fPIC", "-shared", "-pthread", "-w"];

/// Compiles `code` with the host C++ compiler (`$CXX`, default `c++`) against the emulation
/// shim into a shared library, and loads it. Libraries are kept in the persistent cache
/// (`eagle_codegen::disk`, folder `cuda-emu/`, keyed by the compiler, its version, the flags,
/// the block width, the shim and the source), so a later process loads instead of compiling;
/// with the cache off, a private temporary file is built and loaded.
pub(super) fn emulator_library(
    code: &CudaCode,
) -> Result<&'static libloading::Library, RuntimeError> {
    const KIND: &str = "cuda-emu";
    let fail = |m: String| RuntimeError::CudaCompile(format!("CUDA emulation: {m}"));
    let nt = eagle_codegen::cuda::EMULATED_BLOCK_THREADS;
    let text = format!("{}\n{}", eagle_codegen::cuda::HOST_SHIM, code.source);
    let (cxx, cxx_version) = host_compiler();
    let nt_flag = format!("-DEG_NT={nt}");
    let key = eagle_codegen::disk::key(&[
        KIND.as_bytes(),
        cxx.as_bytes(),
        cxx_version.as_bytes(),
        EMU_FLAGS.join(" ").as_bytes(),
        nt_flag.as_bytes(),
        text.as_bytes(),
    ]);
    // Loaded once per process (every device ordinal of the emulation shares it).
    type Libs = Mutex<HashMap<eagle_codegen::disk::Key, &'static libloading::Library>>;
    static LIBS: OnceLock<Libs> = OnceLock::new();
    let libs = LIBS.get_or_init(Default::default);
    let mut libs = libs.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(l) = libs.get(&key) {
        return Ok(l);
    }
    let disk = eagle_codegen::disk::global();
    // SAFETY (both loads): the library was built from the shim and the emitted source (and
    // verified against its SHA-256 and key when it came from the disk cache); loading runs no
    // initialisers beyond the C++ runtime's.
    if let Some(p) = disk.and_then(|d| d.get_path(KIND, &key, "so")) {
        match unsafe { libloading::Library::new(&p) } {
            Ok(l) => {
                let l: &'static libloading::Library = Box::leak(Box::new(l));
                libs.insert(key, l);
                return Ok(l);
            }
            // Deleted or replaced since it was verified: compile it again.
            Err(e) => {
                tracing::warn!(target: "eagle", path = %p.display(), error = %e, "disk cache entry cannot be loaded; compiling again")
            }
        }
    }
    let _span = tracing::debug_span!(target: "eagle", "cuda_emu_compile", compiler = %cxx, bytes = text.len()).entered();
    // Built under a private name next to its entry, then committed (renamed into place,
    // atomic). Without a cache, or when the cache folder cannot take the file or loses the
    // entry before it is loaded (`eagle cache clear` meanwhile), it is built again in the
    // temporary directory; such a private file is deleted once loaded.
    let private =
        std::env::temp_dir().join(format!("eagle-emu-{}-{}.so", key.hex(), std::process::id()));
    let build = |out: &std::path::Path| -> Result<(), RuntimeError> {
        let src = out.with_extension("cpp");
        std::fs::write(&src, &text).map_err(|e| fail(format!("{}: {e}", src.display())))?;
        let run = std::process::Command::new(cxx)
            .args(EMU_FLAGS)
            .arg(&nt_flag)
            .arg("-o")
            .arg(out)
            .arg(&src)
            .output();
        let _ = std::fs::remove_file(&src);
        let run = run.map_err(|e| {
            fail(format!(
                "could not run the C++ compiler `{cxx}` ({e}); install g++ or set CXX"
            ))
        })?;
        if run.status.success() {
            return Ok(());
        }
        let _ = std::fs::remove_file(out);
        Err(fail(format!(
            "`{cxx}` rejected the CUDA C:\n{}",
            String::from_utf8_lossy(&run.stderr)
        )))
    };
    let load = |path: &std::path::Path| {
        // SAFETY: as above.
        unsafe { libloading::Library::new(path) }.map_err(|e| {
            let why = std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s}"));
            fail(format!("{}: {e}{why}", path.display()))
        })
    };
    /// Where the build went: the cache's entry, a file to load and delete, or nowhere yet.
    enum Built {
        Entry(std::path::PathBuf),
        Private(std::path::PathBuf),
        Nothing,
    }
    let mut built = Built::Nothing;
    if let Some((d, tmp)) = disk.and_then(|d| Some((d, d.temp_path(KIND, "so")?))) {
        match build(&tmp) {
            Ok(()) => {
                built = match d.commit(KIND, &key, "so", &tmp) {
                    Some(p) => Built::Entry(p),
                    None => Built::Private(tmp),
                }
            }
            // The C++ compiler refused the source: that is the run's error.
            Err(e) if tmp.parent().is_some_and(|p| p.exists()) => return Err(e),
            // The folder went away while compiling: build privately below.
            Err(_) => {}
        }
    }
    let private_load = |path: &std::path::Path| {
        let l = load(path);
        let _ = std::fs::remove_file(path);
        l
    };
    let lib = match built {
        Built::Entry(entry) => match load(&entry) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(target: "eagle", error = %e, "disk cache entry cannot be loaded right after it was written; building a private copy");
                build(&private)?;
                private_load(&private)?
            }
        },
        Built::Private(tmp) => private_load(&tmp)?,
        Built::Nothing => {
            build(&private)?;
            private_load(&private)?
        }
    };
    let l: &'static libloading::Library = Box::leak(Box::new(lib));
    libs.insert(key, l);
    Ok(l)
}
