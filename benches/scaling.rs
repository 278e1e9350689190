//! Scale (issue 37, item 4): what a launch costs as the world grows, on the simulated
//! platform: compile time, the size of the compiled program (IR ops, artifact bytes), run
//! time and peak memory of steps 07, 11 (each mode), 13, 16 and tp_ffn at P = 4 to 4,096.
//!
//! `cargo bench --bench scaling` (P = 4, 16, 64, 256, 1024, 4096), or
//! `cargo bench --bench scaling -- 4 64` for the world sizes given; `-- --save` writes
//! `docs/bench/scaling.json`, its region of `docs/performance.md` and `docs/scaling.svg`.
//!
//! Each row is one launch in its own session, the race detector on (a run's default). Peak
//! memory is the process's resident high-water mark (`VmHWM`), reset before each row through
//! `/proc/self/clear_refs` (Linux), so a row shows what that run needed (about 10 MiB is the
//! process itself). The compile column is the launch's compile time (specialization, lowering,
//! Cranelift), the column the runner prints; it and the two size columns should not grow with
//! P (the collectives are loops over the ranks, issue 37 item 1). The run column is the
//! simulator's: P ranks on this machine's cores (as tasks from P = 64, `eagle::SimRanks`).
//! Step 16's hand-written collectives make N x P^2 element reads (10^9 at P = 1,024): it stops
//! at P = 1,024; tp_ffn needs P to divide 16.
//!
//! A second table runs the same steps under `mpirun -np N` (N = 2, 4, 8, 16, oversubscribed
//! on a small machine) through the runner binary, which must be built with MPI first:
//! `cargo build --release --features mpi --bin eagle` (Open MPI or MPICH; the table says when
//! the binary or `mpirun` is missing). Its columns are the runner's compile and run columns
//! (rank 0's) and the largest process's peak RSS (`/usr/bin/time -f %M`).

#[allow(dead_code)]
#[path = "../examples/07_dynamic_rank_count.rs"]
mod step07;
#[allow(dead_code)]
#[path = "../examples/11_builtin_allreduce.rs"]
mod step11;
#[allow(dead_code)]
#[path = "../examples/13_allgather.rs"]
mod step13;
#[allow(dead_code)]
#[path = "../examples/16_several_collectives.rs"]
mod step16;
#[allow(dead_code)]
#[path = "../examples/tp_ffn.rs"]
mod tp_ffn;

#[path = "report/mod.rs"]
mod report;

use eagle::prelude::*;

/// The resident high-water mark of this process, in MiB (`VmHWM`), if the kernel reports it.
fn peak_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Resets the high-water mark to the current resident size (Linux 4.0+).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The largest world each program runs at here (see the module's docs).
fn largest(step: &eagle_runner::Step) -> usize {
    match step.number {
        16 => 1024,
        _ => 4096,
    }
}

/// The MPI table: each step under `mpirun -np N` through the runner binary; `None` with the
/// reason when it cannot run here.
fn mpi_table(steps: &[eagle_runner::Step]) -> Result<report::Table, String> {
    let bin = concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/eagle");
    if !std::path::Path::new(bin).exists() {
        return Err(format!("{bin} is not built"));
    }
    let mut t = report::Table::new(
        "program, np (mpirun)",
        &[
            ("compile", "ms", 1),
            ("run", "ms", 1),
            ("peak RSS", "MiB", 0),
        ],
    );
    for np in [2usize, 4, 8, 16] {
        let devices: Vec<String> = (0..np).map(|d| d.to_string()).collect();
        for step in steps {
            if step.world.refuses(np).is_some() {
                continue;
            }
            let out = std::process::Command::new("/usr/bin/time")
                .args(["-f", "peak %M"])
                .args(["mpirun", "--oversubscribe", "-np", &np.to_string(), bin])
                .args(["-d", &devices.join(",")])
                .args(["--step", &format!("{:02}", step.number)])
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .output()
                .map_err(|e| format!("`/usr/bin/time mpirun` could not start: {e}"))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                return Err(format!(
                    "mpirun -np {np} --step {:02} failed (is the binary built with `--features mpi`?): {}{}",
                    step.number,
                    stdout.trim(),
                    stderr.trim()
                ));
            }
            let peak_kb: f64 = stderr
                .lines()
                .filter_map(|l| l.strip_prefix("peak ")?.trim().parse().ok())
                .next_back()
                .unwrap_or(f64::NAN);
            for line in stdout.lines().filter(|l| l.starts_with("step ")) {
                // `step 11 builtin_allreduce [ring]  P=4  compile  2.23 ms  run  0.36 ms  OK`
                let words: Vec<&str> = line.split_whitespace().collect();
                let num = |key: &str| -> Option<f64> {
                    let i = words.iter().position(|w| *w == key)?;
                    words.get(i + 1)?.parse().ok()
                };
                let (Some(c), Some(r)) = (num("compile"), num("run")) else {
                    return Err(format!("unexpected runner line: {line}"));
                };
                if !line.ends_with("OK") {
                    return Err(format!("mpirun -np {np}: {line}"));
                }
                let name = line.split(" P=").next().unwrap_or(line).trim();
                eprintln!("{name}, np = {np}: compile {c} ms, run {r} ms, peak {peak_kb} KB");
                t.row(&format!("{name}, np = {np}"), vec![c, r, peak_kb / 1024.0]);
            }
        }
    }
    t.notes.push(
        "Under MPI every process compiles its own artifact (the compile column: rank 0's) and \
         runs one rank; the run column is rank 0's. On this 2-core machine np = 8 and 16 are \
         oversubscribed, so their run column is the cores' limit, not the network's."
            .into(),
    );
    Ok(t)
}

/// One measured launch: compile ms, IR ops, artifact KiB, run ms, peak MiB (NaN: not read).
fn measure(step: &eagle_runner::Step, mode: Option<&str>, p: usize) -> [f64; 5] {
    let reset = reset_peak();
    let session = match Session::sim(p) {
        Ok(s) => s.with_mode(mode.map(str::to_string)),
        Err(e) => {
            eprintln!("error: P = {p}: {e}");
            std::process::exit(1);
        }
    };
    let o = step.execute(&session);
    if let Err(e) = &o.result {
        eprintln!("error: step {} {mode:?} at P = {p}: {e}", step.name);
        std::process::exit(1);
    }
    drop(session);
    let mut ops = 0usize;
    let mut bytes = 0usize;
    for r in &o.reports {
        for f in &r.artifact.module.functions {
            f.walk(&mut |_| ops += 1);
        }
        bytes += r.artifact.size_bytes();
    }
    let peak = match (reset, peak_mib()) {
        (true, Some(m)) => m,
        _ => f64::NAN,
    };
    [
        o.compile_ms,
        ops as f64,
        bytes as f64 / 1024.0,
        o.run_ms,
        peak,
    ]
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ps = if args.is_empty() {
        vec![4, 16, 64, 256, 1024, 4096]
    } else {
        args
    };
    let mut rep = report::Report::new("scaling");
    let mut t = report::Table::new(
        "program, P",
        &[
            ("compile", "ms", 1),
            ("IR ops", "", 0),
            ("artifact", "KiB", 0),
            ("run", "ms", 1),
            ("peak RSS", "MiB", 0),
        ],
    );
    // (label, P, compile ms, run ms) for the plot.
    let mut points: Vec<(String, usize, f64, f64)> = vec![];
    let steps = [
        step07::STEP,
        step11::STEP,
        step13::STEP,
        step16::STEP,
        tp_ffn::STEP,
    ];
    for &p in &ps {
        for step in &steps {
            if p > largest(step) || step.world.refuses(p).is_some() {
                continue;
            }
            for mode in step.each_mode() {
                let v = measure(step, mode, p);
                let label = match mode {
                    Some(m) => format!("step {:02} {} `{m}`", step.number, step.name),
                    None => format!("step {:02} {}", step.number, step.name),
                };
                eprintln!("{label}, P = {p}: {v:?}");
                points.push((label.clone(), p, v[0], v[3]));
                t.row(&format!("{label}, P = {p}"), v.to_vec());
            }
        }
    }
    t.notes.push(
        "Compile time, IR ops and artifact size are those of the launch's compiled program, \
         the same at every P (the spread of the compile column is this machine's; 0.0 ms is \
         the second mode of a step, which launches the program the first mode compiled: a \
         cache hit); run time and memory are the simulator's, with P ranks on this machine's \
         cores. Peak RSS is reset to the resident size before each row, and memory the \
         allocator kept from an earlier row stays resident, so a row after a larger one \
         repeats its peak."
            .into(),
    );
    rep.tables.push(t);
    match mpi_table(&steps) {
        Ok(t) => rep.tables.push(t),
        Err(why) => {
            eprintln!("MPI table skipped: {why}");
            let mut t = report::Table::new("program, np (mpirun)", &[]);
            t.notes.push(format!("Not measured in this run: {why}."));
            rep.tables.push(t);
        }
    }
    rep.finish();
    report::save_plot("scaling.svg", || plot(&points));
}

/// Run time (solid) and compile time (dashed) against P, log-log, one colour per program.
fn plot(points: &[(String, usize, f64, f64)]) -> String {
    use plotters::prelude::*;
    let mut labels: Vec<&str> = vec![];
    for (l, ..) in points {
        if !labels.contains(&l.as_str()) {
            labels.push(l);
        }
    }
    let pmax = points.iter().map(|p| p.1).max().unwrap_or(4).max(8) as f64;
    let ymax = points.iter().map(|p| p.2.max(p.3)).fold(10.0, f64::max) * 2.0;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (860, 480)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let Ok(mut chart) = ChartBuilder::on(&root)
            .caption(
                "scaling on sim: run time (solid) and compile time (dashed) against P",
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d((4f64..pmax).log_scale(), (0.01f64..ymax).log_scale())
        else {
            return String::new();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("world size P")
            .y_desc("ms")
            .draw();
        for (i, l) in labels.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let solid = ShapeStyle {
                color,
                filled: false,
                stroke_width: 2,
            };
            let mine = || points.iter().filter(|p| p.0 == *l);
            let run: Vec<(f64, f64)> = mine().map(|p| (p.1 as f64, p.3.max(0.01))).collect();
            let compile: Vec<(f64, f64)> = mine().map(|p| (p.1 as f64, p.2.max(0.01))).collect();
            if let Ok(a) = chart.draw_series(LineSeries::new(run, solid)) {
                a.label(*l)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], solid));
            }
            let _ = chart.draw_series(DashedLineSeries::new(compile, 4, 4, solid));
        }
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw();
        let _ = root.present();
    }
    out
}
