//! Compiling the emitted CUDA C: NVRTC (loaded at run time, feature `cuda`) and the image
//! cache of PTX and cubins by (hash of the code, architecture), in memory and on disk.

use super::CudaCode;
use crate::error::CodegenError;
/// NVRTC options: IEEE division and square root, no contraction (so float results match the
/// CPU backend), no flush-to-zero.
pub const NVRTC_OPTIONS: [&str; 4] = [
    "--fmad=false",
    "--prec-div=true",
    "--prec-sqrt=true",
    "--ftz=false",
];

/// Compiled images (PTX text or cubins) by (FNV-1a of the CUDA C, architecture): `compute_XY`
/// keys hold PTX, `sm_XY` keys cubins.
type ImageCache = std::sync::Mutex<std::collections::HashMap<(u64, String), std::sync::Arc<[u8]>>>;

fn image_cache() -> &'static ImageCache {
    static CACHE: std::sync::OnceLock<ImageCache> = std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn image_key(code: &CudaCode, arch: &str) -> (u64, String) {
    (crate::fnv1a(code.source.as_bytes()), arch.to_string())
}

/// Registers `ptx` as the PTX of `code` for `arch` (from a plugin), so [`compile_ptx`] returns it
/// without NVRTC.
pub fn preload_ptx(code: &CudaCode, arch: &str, ptx: &str) {
    if let Ok(mut c) = image_cache().lock() {
        c.insert(image_key(code, arch), ptx.as_bytes().into());
    }
}

/// The cached image of `code` for `arch`, or NVRTC's, cached in the process and on disk
/// ([`crate::disk`]: `nvrtc/<key>.ptx` or `.cubin`). `driver` is the CUDA driver's version
/// where one is loaded (part of the disk key).
fn image(
    code: &CudaCode,
    arch: &str,
    driver: Option<i32>,
) -> Result<std::sync::Arc<[u8]>, CodegenError> {
    let key = image_key(code, arch);
    if let Some(i) = image_cache().lock().ok().and_then(|c| c.get(&key).cloned()) {
        return Ok(i);
    }
    #[cfg(feature = "cuda")]
    {
        if !nvrtc_available() {
            return Err(CodegenError::NvrtcUnavailable {
                detail: "no libnvrtc.so on the library path".into(),
            });
        }
        let ext = if arch.starts_with("sm_") {
            "cubin"
        } else {
            "ptx"
        };
        let disk = crate::disk::global().map(|d| (d, nvrtc_disk_key(code, arch, driver)));
        let cached = disk.as_ref().and_then(|(d, k)| d.get("nvrtc", k, ext));
        let i: std::sync::Arc<[u8]> = match cached {
            Some(bytes) => bytes.into(),
            None => {
                let _span =
                    tracing::debug_span!(target: "eagle", "nvrtc", arch, bytes = code.source.len())
                        .entered();
                let bytes = nvrtc_compile(code, arch)?;
                if let Some((d, k)) = &disk {
                    d.put("nvrtc", k, ext, &bytes);
                }
                bytes.into()
            }
        };
        if let Ok(mut c) = image_cache().lock() {
            c.insert(key, i.clone());
        }
        Ok(i)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = (key, driver);
        Err(CodegenError::NvrtcUnavailable {
            detail: "this build has no `cuda` feature; rebuild with `--features cuda`".into(),
        })
    }
}

/// The version of the NVRTC that loads, as `major.minor` (`"unknown"` if it does not say).
#[cfg(feature = "cuda")]
pub fn nvrtc_version() -> String {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: called only after `nvrtc_available`; writes two ints.
    let r = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if r == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        format!("{major}.{minor}")
    } else {
        "unknown".into()
    }
}

/// The disk-cache key of NVRTC's image of `code` for `arch`: NVRTC's version, the driver's
/// (`None` for [`compile_ptx`] and [`compile_cubin`]), the architecture, the options and the
/// CUDA C (see [`crate::disk`]). The entry is `nvrtc/<key>.ptx` (`compute_XY`) or `.cubin`.
#[cfg(feature = "cuda")]
pub fn nvrtc_disk_key(code: &CudaCode, arch: &str, driver: Option<i32>) -> crate::disk::Key {
    let driver = driver.map_or("none".to_string(), |v| v.to_string());
    crate::disk::key(&[
        b"nvrtc",
        nvrtc_version().as_bytes(),
        driver.as_bytes(),
        arch.as_bytes(),
        NVRTC_OPTIONS.join(" ").as_bytes(),
        code.source.as_bytes(),
    ])
}

/// Forgets the images compiled or registered in this process (the disk cache keeps its
/// entries): the next [`compile_ptx`] or [`compile_cubin`] reads the disk cache or runs NVRTC.
pub fn clear_image_cache() {
    if let Ok(mut c) = image_cache().lock() {
        c.clear();
    }
}

/// Whether NVRTC can be loaded (checked without calling into it, so a missing library is an
/// answer, not a panic).
pub fn nvrtc_available() -> bool {
    #[cfg(feature = "cuda")]
    {
        // SAFETY: only tries to open the library by its candidate names.
        unsafe { cudarc::nvrtc::sys::is_culib_present() }
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}

/// Compiles `code` to PTX for virtual architecture `arch` (such as `compute_90`) with NVRTC,
/// or returns the PTX cached for the same source and architecture.
///
/// # Errors
/// [`CodegenError::NvrtcUnavailable`] when NVRTC cannot be loaded (or this build lacks the
/// `cuda` feature); [`CodegenError::Nvrtc`] with NVRTC's log and the kernel names when NVRTC
/// rejects the source.
pub fn compile_ptx(code: &CudaCode, arch: &str) -> Result<std::sync::Arc<str>, CodegenError> {
    image(code, arch, None).map(|i| String::from_utf8_lossy(&i).into())
}

/// The PTX registered for `code` and `arch` by [`preload_ptx`] or an earlier [`compile_ptx`].
pub fn cached_ptx(code: &CudaCode, arch: &str) -> Option<std::sync::Arc<str>> {
    let i = image_cache()
        .lock()
        .ok()
        .and_then(|c| c.get(&image_key(code, arch)).cloned())?;
    Some(String::from_utf8_lossy(&i).into())
}

/// Compiles `code` to a cubin for real architecture `arch` (such as `sm_90`) with NVRTC,
/// cached per source and architecture. A cubin from a newer 12.x NVRTC loads on an older 12.x
/// driver, where PTX of a newer ISA would not.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_cubin(code: &CudaCode, arch: &str) -> Result<std::sync::Arc<[u8]>, CodegenError> {
    image(code, arch, None)
}

/// [`compile_cubin`] for the device of a loaded CUDA driver of version `driver` (as
/// `cuDriverGetVersion` gives it), which is part of the disk cache's key.
///
/// # Errors
/// As [`compile_ptx`].
pub fn compile_cubin_for_driver(
    code: &CudaCode,
    arch: &str,
    driver: i32,
) -> Result<std::sync::Arc<[u8]>, CodegenError> {
    image(code, arch, Some(driver))
}

#[cfg(feature = "cuda")]
/// Runs NVRTC on `code` for `arch` (`compute_XY` gives PTX text, `sm_XY` a cubin) and returns
/// the image's bytes (without a trailing NUL).
fn nvrtc_compile(code: &CudaCode, arch: &str) -> Result<Vec<u8>, CodegenError> {
    use cudarc::nvrtc::result as nv;
    use std::ffi::CString;
    let kernels = code
        .entries
        .keys()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let fail = |log: String| CodegenError::Nvrtc {
        kernels: kernels.clone(),
        arch: arch.to_string(),
        log,
    };
    let src = CString::new(code.source.as_str()).map_err(|e| fail(e.to_string()))?;
    let name = CString::new("eagle.cu").map_err(|e| fail(e.to_string()))?;
    let prog = nv::create_program(&src, Some(&name)).map_err(|e| fail(e.to_string()))?;
    let mut opts: Vec<String> = NVRTC_OPTIONS.iter().map(|s| s.to_string()).collect();
    opts.push(format!("--gpu-architecture={arch}"));
    // SAFETY: `prog` is a live program created above; it is destroyed once, below.
    let compiled = unsafe { nv::compile_program(prog, &opts) };
    let text = |v: Vec<std::ffi::c_char>| {
        let bytes: Vec<u8> = v
            .into_iter()
            .map(|c| c as u8)
            .take_while(|&b| b != 0)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let out = match compiled {
        // SAFETY: `prog` compiled successfully; the image size is queried first.
        Ok(()) if arch.starts_with("sm_") => unsafe {
            let mut size = 0usize;
            cudarc::nvrtc::sys::nvrtcGetCUBINSize(prog, &mut size)
                .result()
                .and_then(|()| {
                    let mut buf = vec![0 as std::ffi::c_char; size];
                    cudarc::nvrtc::sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr())
                        .result()
                        .map(|()| buf.into_iter().map(|c| c as u8).collect())
                })
                .map_err(|e| fail(e.to_string()))
        },
        // SAFETY: `prog` compiled successfully.
        Ok(()) => unsafe { nv::get_ptx(prog) }
            .map(|v| text(v).into_bytes())
            .map_err(|e| fail(e.to_string())),
        Err(e) => {
            // SAFETY: `prog` is live; the log exists after a failed compile.
            let log = unsafe { nv::get_program_log(prog) }
                .map(text)
                .unwrap_or_else(|_| e.to_string());
            Err(fail(log))
        }
    };
    // SAFETY: `prog` is live and not used after this.
    let _ = unsafe { nv::destroy_program(prog) };
    out
}
