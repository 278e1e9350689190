//! The example binaries the command-line tests run (the runner's tests get the runner itself
//! from cargo, as `CARGO_BIN_EXE_eagle`). `cargo test --workspace` builds the examples before
//! any test runs. Shared by `tests/mpi.rs` and `eagle-runner/tests/{cli,tour}.rs` (through
//! `#[path]`).

use std::path::PathBuf;

/// An example's binary, in `target/<profile>/examples/`.
///
/// # Panics
/// When it is not built, saying how to build it.
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
