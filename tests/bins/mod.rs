//! The binaries the command-line tests run: the runner (`eagle`, of the eagle-runner package,
//! whose tests get its path from cargo) and the examples of the `eagle` package, which
//! `cargo test --workspace` builds before any test runs. Shared by `tests/mpi.rs` and
//! `eagle-runner/tests/{cli,tour}.rs` (through `#[path]`).

use std::path::PathBuf;

/// The runner binary (only in the eagle-runner package's tests).
///
/// # Panics
/// Outside those tests, where cargo does not build it.
#[allow(dead_code)]
pub fn runner() -> PathBuf {
    PathBuf::from(
        option_env!("CARGO_BIN_EXE_eagle")
            .expect("the runner binary is known to the eagle-runner package's tests only"),
    )
}

/// An example's binary, in `target/<profile>/examples/`.
///
/// # Panics
/// When it is not built, saying how to build it.
#[allow(dead_code)]
pub fn example(name: &str) -> PathBuf {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|t| Some(t.parent()?.parent()?.to_path_buf()))
        .unwrap_or_default();
    let exe = dir.join("examples").join(name);
    assert!(
        exe.exists(),
        "example `{name}` is not built at {}: run `cargo test --workspace` (or `cargo build --examples`) first",
        exe.display()
    );
    exe
}
