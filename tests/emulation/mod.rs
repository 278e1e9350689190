//! What the CUDA-emulation tests share (`tests/cuda.rs`, `tests/cuda_diff.rs`).

/// Fails the test without the host C++ compiler the CUDA emulation needs (a missing compiler
/// is a failure, not a silent pass).
pub fn cxx() {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let ok = std::process::Command::new(&cxx)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "the CUDA emulation needs a C++ compiler: `{cxx}` does not run; install g++ (`apt-get install g++`) or set CXX"
    );
}
