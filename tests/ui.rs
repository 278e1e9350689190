//! Compile-fail tests: each file in `tests/ui/` is a kernel with one mistake, and its `.stderr`
//! is the exact error the user sees (span and message). Regenerate after a deliberate message
//! change with `TRYBUILD=overwrite cargo test --test ui`, then review the diff.
//!
//! The files that must compile and run (`tests/ui-pass/`) are test targets of their own
//! (`ui_pass_*` in `Cargo.toml`): with compile-fail cases alone, trybuild checks its copy of the
//! dependency graph (`cargo check`) instead of building it, which halves this test's time.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
