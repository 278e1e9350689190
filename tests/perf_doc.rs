//! `docs/performance.md` holds what the benches measured: each `docs/bench/<bench>.json`
//! (written by `cargo bench --bench <bench> -- --save`) rendered exactly as its region of the
//! page, and every region of the page has its JSON. Edit the numbers by re-running the bench,
//! never by hand.

#[path = "../benches/report/mod.rs"]
mod report;

const PAGE: &str = include_str!("../docs/performance.md");

fn reports() -> Vec<(String, report::Report)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/bench");
    let mut v = vec![];
    for e in std::fs::read_dir(dir).expect("docs/bench exists") {
        let path = e.expect("entry").path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        let r: report::Report = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not a bench report: {e}", path.display()));
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        assert_eq!(
            r.bench,
            stem,
            "{} names bench `{}`",
            path.display(),
            r.bench
        );
        v.push((stem, r));
    }
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn every_bench_region_of_the_page_is_its_json_rendered() {
    let reports = reports();
    assert!(
        [
            "collectives",
            "kernels",
            "launch",
            "machine",
            "plans",
            "tiles"
        ]
        .iter()
        .all(|b| reports.iter().any(|(n, _)| n == b)),
        "docs/bench holds the collectives, kernels, launch, machine, plans and tiles reports"
    );
    for (name, r) in &reports {
        let Some(region) = report::region(PAGE, name) else {
            panic!("docs/performance.md has no <!-- bench:{name} --> region for docs/bench/{name}.json");
        };
        assert_eq!(
            region,
            r.render(),
            "docs/performance.md's `{name}` region differs from docs/bench/{name}.json; run `cargo bench --bench {name} -- --save`"
        );
        assert!(!r.tables.is_empty() && r.tables.iter().all(|t| !t.rows.is_empty()));
        for t in &r.tables {
            for row in &t.rows {
                assert_eq!(row.values.len(), t.columns.len(), "{name}: {}", row.label);
                assert!(
                    row.values.iter().all(|v| v.is_finite()),
                    "{name}: {}",
                    row.label
                );
            }
        }
    }
    // And no region without its JSON.
    let mut rest = PAGE;
    while let Some(at) = rest.find("<!-- bench:") {
        let tail = &rest[at + "<!-- bench:".len()..];
        let name = tail.split(" -->").next().unwrap_or("");
        assert!(
            reports.iter().any(|(n, _)| n == name),
            "region `{name}` of docs/performance.md has no docs/bench/{name}.json"
        );
        rest = tail;
    }
}

#[test]
fn a_changed_number_is_caught() {
    // The check above compares rendered text: one changed digit differs.
    let mut r = report::Report::new("x");
    let mut t = report::Table::new("t", &[("median", "us", 2)]);
    t.row("a", vec![1.25]);
    r.tables.push(t);
    let page = format!("intro\n<!-- bench:x -->\n{}<!-- /bench:x -->\n", r.render());
    assert_eq!(report::region(&page, "x"), Some(r.render().as_str()));
    let edited = page.replace("1.25 us", "1.24 us");
    assert_ne!(report::region(&edited, "x"), Some(r.render().as_str()));
    let replaced = report::replace_region(&edited, "x", &r.render()).expect("region");
    assert_eq!(replaced, page);
}
