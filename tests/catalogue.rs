//! Every entry of `docs/errors.md` names the tests that check it; this fails when a named test
//! does not exist (so the catalogue cannot drift from the suite), and when an entry has none.
//! A `file::test` lives in `tests/file.rs` or in `eagle-runner/tests/file.rs`.

#[test]
fn every_catalogue_entry_is_checked_by_an_existing_test() {
    let root = env!("CARGO_MANIFEST_DIR");
    let doc = std::fs::read_to_string(format!("{root}/docs/errors.md")).expect("docs/errors.md");
    let entries: Vec<&str> = doc.split("\n### ").skip(1).collect();
    assert!(entries.len() >= 25, "only {} entries", entries.len());
    for entry in entries {
        let title = entry.lines().next().unwrap_or_default();
        let tests: Vec<&str> = entry
            .lines()
            .filter(|l| l.starts_with("Test: ") || l.starts_with("Tests: "))
            .flat_map(|l| l.split('`').skip(1).step_by(2))
            .collect();
        assert!(!tests.is_empty(), "entry `{title}` names no test");
        for t in tests {
            let (file, name) = t
                .split_once("::")
                .unwrap_or_else(|| panic!("`{t}` is not file::test"));
            // The library's tests, or the runner's (command lines, exit codes).
            let src = ["tests", "eagle-runner/tests"]
                .iter()
                .find_map(|d| std::fs::read_to_string(format!("{root}/{d}/{file}.rs")).ok())
                .unwrap_or_else(|| panic!("entry `{title}`: no tests/{file}.rs"));
            assert!(
                src.contains(&format!("fn {name}()")),
                "entry `{title}`: tests/{file}.rs has no test `{name}`"
            );
        }
    }
}
