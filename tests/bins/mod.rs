//! The binaries the command-line tests run: the runner (`eagle`, of the eagle-runner package)
//! and the examples, all built beside the tests by `cargo test --workspace`.

use std::path::PathBuf;

/// `target/<profile>`, where the test binary's `deps/` folder lives.
fn profile_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|t| Some(t.parent()?.parent()?.to_path_buf()))
        .unwrap_or_default()
}

/// The runner binary.
///
/// # Panics
/// When it is not built, saying how to build it.
#[allow(dead_code)]
pub fn runner() -> PathBuf {
    let exe = profile_dir().join(format!("eagle{}", std::env::consts::EXE_SUFFIX));
    assert!(
        exe.exists(),
        "the runner is not built at {}: run `cargo test --workspace` (or `cargo build -p eagle-runner`) first",
        exe.display()
    );
    exe
}

/// An example's binary.
#[allow(dead_code)]
pub fn example(name: &str) -> PathBuf {
    profile_dir().join("examples").join(name)
}
