//! Compile-fail tests: each file in `tests/ui/` is a kernel with one mistake, and its `.stderr`
//! is the exact error the user sees (span and message). Files in `tests/ui-pass/` must compile
//! without a warning and run. Regenerate after a deliberate message
//! change with `TRYBUILD=overwrite cargo test --test ui`, then review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    // Files that must compile without a warning (each has `#![deny(warnings)]`) and run.
    t.pass("tests/ui-pass/*.rs");
}
