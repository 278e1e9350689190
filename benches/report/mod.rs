//! The benches' reports: what a bench measured, as JSON (`docs/bench/<bench>.json`), and its
//! markdown rendering, which `docs/performance.md` holds between `<!-- bench:<bench> -->` and
//! `<!-- /bench:<bench> -->`. A bench run with `--save` writes both; `tests/perf_doc.rs`
//! fails when the committed page and the committed JSON disagree, so the page never shows a
//! number no run produced.
//!
//! Included by each bench and by the test with `#[path = "../benches/report/mod.rs"]`.

#![allow(dead_code)]

use serde::{Deserialize, Serialize};

/// One bench run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The bench's name (`launch`, `plans`, `kernels`).
    pub bench: String,
    /// The machine: CPU model and logical CPUs (from `/proc/cpuinfo`).
    pub machine: String,
    /// `git rev-parse --short HEAD` at the run (`+dirty` with uncommitted changes outside
    /// `docs/`).
    pub commit: String,
    /// What rustc compiled the peers for.
    pub rustc_target: String,
    /// The tables, in order.
    pub tables: Vec<Table>,
    /// The command that made the report, when it is not `cargo bench --bench <bench>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// One table: a row per contender, a cell per column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// The first column's heading.
    pub title: String,
    /// The other columns.
    pub columns: Vec<Column>,
    /// The rows.
    pub rows: Vec<Row>,
    /// Lines printed under the table (ratios, checks), each rendered as a paragraph.
    pub notes: Vec<String>,
}

/// A column: its heading, the unit its values are printed in, and the digits after the point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub unit: String,
    pub digits: usize,
}

/// A row: its label and one value per column (already in the column's unit); a value not
/// measured is NaN, `null` in the JSON and `n/a` on the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub label: String,
    #[serde(deserialize_with = "nan_for_null")]
    pub values: Vec<f64>,
}

/// Reads `null` (how `serde_json` writes NaN) back as NaN.
fn nan_for_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v: Vec<Option<f64>> = Deserialize::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

impl Table {
    /// A table with `title` and columns of `(name, unit, digits)`.
    pub fn new(title: &str, columns: &[(&str, &str, usize)]) -> Table {
        Table {
            title: title.to_string(),
            columns: columns
                .iter()
                .map(|(n, u, d)| Column {
                    name: n.to_string(),
                    unit: u.to_string(),
                    digits: *d,
                })
                .collect(),
            rows: vec![],
            notes: vec![],
        }
    }

    /// Adds a row.
    pub fn row(&mut self, label: &str, values: Vec<f64>) {
        self.rows.push(Row {
            label: label.to_string(),
            values,
        });
    }
}

/// Times the closures in interleaved rounds: one untimed run each, then 7 rounds of `reps`
/// calls each; gives each closure's (min, median, max) over the rounds of its mean time per
/// call, in milliseconds.
pub fn interleaved(reps: usize, runs: &mut [&mut dyn FnMut()]) -> Vec<(f64, f64, f64)> {
    for r in runs.iter_mut() {
        r();
    }
    let mut times = vec![Vec::new(); runs.len()];
    for _ in 0..7 {
        for (i, r) in runs.iter_mut().enumerate() {
            let t = std::time::Instant::now();
            for _ in 0..reps {
                r();
            }
            times[i].push(t.elapsed().as_secs_f64() * 1e3 / reps as f64);
        }
    }
    times.iter().map(|v| stats(v)).collect()
}

/// A bar chart of `bars` (label, value) as SVG of `size` pixels, with a red line at 1 (the
/// ratio where the two sides are equal).
pub fn bar_chart(caption: &str, y_desc: &str, size: (u32, u32), bars: &[(String, f64)]) -> String {
    use plotters::prelude::*;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        let _ = root.fill(&WHITE);
        let n = bars.len() as u32;
        let max = bars.iter().map(|b| b.1).fold(1.2f64, f64::max) * 1.1;
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d((0u32..n).into_segmented(), 0f64..max)
        else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => bars
                    .get(*i as usize)
                    .map(|b| b.0.clone())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc(y_desc)
            .draw();
        let _ = chart.draw_series(
            Histogram::vertical(&chart)
                .margin(12)
                .style(BLUE.mix(0.6).filled())
                .data(bars.iter().enumerate().map(|(i, b)| (i as u32, b.1))),
        );
        let _ = chart.draw_series(LineSeries::new(
            vec![(SegmentValue::Exact(0), 1.0), (SegmentValue::Exact(n), 1.0)],
            &RED,
        ));
        let _ = root.present();
    }
    out
}

/// min, median, max of `v`.
pub fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

impl Report {
    /// A report of `bench` on this machine at this commit.
    pub fn new(bench: &str) -> Report {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| {
                c.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|s| s.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".into());
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        };
        let mut commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
        // Changes under docs/ (what `--save` itself writes) do not make a run dirty.
        let changed = git(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":!docs",
        ]);
        if changed.is_some_and(|s| !s.is_empty()) {
            commit.push_str("+dirty");
        }
        let features: Vec<&str> = [
            ("sse4.2", cfg!(target_feature = "sse4.2")),
            ("avx", cfg!(target_feature = "avx")),
            ("avx2", cfg!(target_feature = "avx2")),
            ("fma", cfg!(target_feature = "fma")),
            ("avx512f", cfg!(target_feature = "avx512f")),
        ]
        .iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| *n)
        .collect();
        Report {
            bench: bench.to_string(),
            machine: format!("{cpu}, {cpus} logical CPUs"),
            commit,
            rustc_target: format!(
                "{}-{}, {}",
                std::env::consts::ARCH,
                std::env::consts::OS,
                if features.is_empty() {
                    "baseline features (no target-cpu)".to_string()
                } else {
                    format!("with {}", features.join(", "))
                }
            ),
            tables: vec![],
            command: None,
        }
    }

    /// The markdown `docs/performance.md` holds for this report.
    pub fn render(&self) -> String {
        let command = self
            .command
            .clone()
            .unwrap_or_else(|| format!("cargo bench --bench {}", self.bench));
        let mut s = format!(
            "`{command}` on {}; commit {}; rustc target {}.\n",
            self.machine, self.commit, self.rustc_target
        );
        for t in &self.tables {
            s.push('\n');
            s.push_str(&format!("| {} |", t.title));
            for c in &t.columns {
                s.push_str(&format!(" {} |", c.name));
            }
            s.push('\n');
            s.push_str(&"|---".repeat(t.columns.len() + 1));
            s.push_str("|\n");
            for r in &t.rows {
                s.push_str(&format!("| {} |", r.label));
                for (c, v) in t.columns.iter().zip(&r.values) {
                    let unit = if c.unit.is_empty() {
                        String::new()
                    } else {
                        format!(" {}", c.unit)
                    };
                    if v.is_nan() {
                        s.push_str(" n/a |");
                    } else {
                        s.push_str(&format!(" {v:.*}{unit} |", c.digits));
                    }
                }
                s.push('\n');
            }
            for n in &t.notes {
                s.push('\n');
                s.push_str(n);
                s.push('\n');
            }
        }
        s
    }

    /// Prints the rendering; with `--save` on the command line, also writes
    /// `docs/bench/<bench>.json` and replaces this bench's region of `docs/performance.md`.
    pub fn finish(&self) {
        println!("{}", self.render());
        if !saving() {
            return;
        }
        let root = env!("CARGO_MANIFEST_DIR");
        let json = serde_json::to_string_pretty(self).expect("a report serialises");
        let path = format!("{root}/docs/bench/{}.json", self.bench);
        std::fs::write(&path, json + "\n").expect("write the report");
        let page = format!("{root}/docs/performance.md");
        let text = std::fs::read_to_string(&page).expect("read docs/performance.md");
        match replace_region(&text, &self.bench, &self.render()) {
            Some(new) => std::fs::write(&page, new).expect("write docs/performance.md"),
            None => eprintln!(
                "docs/performance.md has no region <!-- bench:{0} --> ... <!-- /bench:{0} -->; wrote {path} only",
                self.bench
            ),
        }
        println!("wrote {path} and its region of docs/performance.md");
    }
}

/// Whether `--save` is on the command line: the run writes its JSON, its region of
/// `docs/performance.md` and its plots; without it a run leaves the tree as it was.
pub fn saving() -> bool {
    std::env::args().any(|a| a == "--save")
}

/// With `--save`, writes the plot `svg` (computed by `svg()`) to `docs/<file>` and says so;
/// otherwise does nothing.
///
/// # Panics
/// When the file cannot be written (a bench, not a library: the run is useless then).
pub fn save_plot(file: &str, svg: impl FnOnce() -> String) {
    if !saving() {
        return;
    }
    let path = format!("{}/docs/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::write(&path, svg()).unwrap_or_else(|e| panic!("write {path}: {e}"));
    println!("wrote docs/{file}");
}

/// The markers of `bench`'s region.
pub fn markers(bench: &str) -> (String, String) {
    (
        format!("<!-- bench:{bench} -->\n"),
        format!("<!-- /bench:{bench} -->"),
    )
}

/// The text of `bench`'s region of `page` (between its markers), if it has one.
pub fn region<'a>(page: &'a str, bench: &str) -> Option<&'a str> {
    let (open, close) = markers(bench);
    let a = page.find(&open)? + open.len();
    let b = a + page[a..].find(&close)?;
    Some(&page[a..b])
}

/// `page` with `bench`'s region replaced by `body`.
pub fn replace_region(page: &str, bench: &str, body: &str) -> Option<String> {
    let (open, close) = markers(bench);
    let a = page.find(&open)? + open.len();
    let b = a + page[a..].find(&close)?;
    Some(format!("{}{}{}", &page[..a], body, &page[b..]))
}
