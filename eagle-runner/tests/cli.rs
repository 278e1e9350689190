//! The runner binary as a user runs it: output lines, exit codes, and bad command lines.

use std::process::{Command, Output};

#[path = "../../tests/bins/mod.rs"]
mod bins;
use bins::example;

/// The runner binary, built by cargo for these tests.
fn runner() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_eagle"))
}

fn eagle(args: &[&str]) -> Output {
    Command::new(runner())
        .args(args)
        .output()
        .expect("the runner starts")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn runner_prints_ok_for_every_step_and_mode() {
    for (devices, p) in [("0,1", 2), ("0,1,2", 3), ("0,1,2,3", 4)] {
        let out = eagle(&["-d", devices]);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
        let lines: Vec<&str> = stdout.lines().collect();
        assert_eq!(lines.len(), 53, "{stdout}");
        for l in &lines {
            // tp_ffn's layout needs P to divide ffn / B = 16: at P = 3 the runner says so.
            if p == 3 && l.starts_with("step 25 tp_ffn") {
                assert!(l.ends_with("SKIP: the layout splits `ffn / B` = 16 across ranks; P = 3 does not divide it"), "{l}");
                continue;
            }
            assert!(l.ends_with("OK"), "{l}");
            assert!(l.contains(&format!("P={p} ")), "{l}");
        }
        assert!(
            lines[10].starts_with("step 07 dynamic_rank_count [put]"),
            "{stdout}"
        );
    }
}

/// `--suite` runs one group of steps; `--step` names a step of that group.
#[test]
fn suite_selects_a_group_of_steps() {
    let out = eagle(&["-d", "0,1", "--suite", "apps"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let names: Vec<&str> = stdout
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        [
            "sharded_softmax",
            "sharded_layernorm",
            "tp_ffn",
            "tp_ffn",
            "allgather_gemm",
            "allgather_gemm",
            "gemm_reduce_scatter",
            "gemm_reduce_scatter",
            "moe_dispatch_combine",
            "moe_dispatch_combine",
            "halo_2d",
            "ep_moe",
            "ep_moe",
            "flash_decode",
            "fp8_gemm_rs",
            "fp8_gemm_rs",
            "ring_attention",
            "ring_attention",
            "dp_tp_mlp",
            "dp_tp_mlp"
        ],
        "{stdout}"
    );
    let out = eagle(&["-d", "0,1", "--suite", "kernels", "--step", "07"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        "error: argument `--step`: unknown step `07` in `--suite kernels`; expected one of 17, 18, 19, 20, 21, 22"
    );
    let out = eagle(&[
        "-d", "0,1", "--suite", "tutorial", "--step", "07", "--mode", "get",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), 1);
    let out = eagle(&["--suite", "demo"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid value 'demo' for '--suite <SUITE>'"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn one_step_with_emit_ir_shows_generic_and_specialized_ir() {
    let out = eagle(&["-d", "0,1,2", "--step", "07", "--mode", "get", "--emit-ir"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(";; ---- generic IR of `ring_get` ----"));
    assert!(stdout.contains("host @ring_get(%0 x: tensor<[NR, 1, 64], f32>"));
    assert!(stdout.contains(";; ---- specialized IR of `ring_get` (P=3 NR=3) ----"));
    assert!(stdout.contains("host @ring_get(%0 x: tensor<[3, 1, 64], f32>"));
    assert!(stdout.trim_end().ends_with("OK"));
}

#[test]
fn bad_command_lines_exit_with_code_2_and_a_message() {
    let mut cases: Vec<(&[&str], &str)> = vec![
        (&["-d", ""], "the list is empty"),
        (&["-d", "0,a"], "entry 1 is `a`, not a device id"),
        (&["-d", "0,-1"], "entry 1 is `-1`"),
        (&["-d", "1,1"], "device 1 is listed twice"),
        (&["-d", "-1"], "entry 0 is `-1`"),
        (
            &["--wait-timeout", "0"],
            "expected a whole number of seconds, at least 1 (such as `60`), found `0`",
        ),
        (&["--wait-timeout", "-1"], "found `-1`"),
        (&["-d", "0,4096"], "device 4096 does not exist"),
        (&["-p", "tpu", "-d", "0"], "unknown platform `tpu`"),
        (&["--step", "99"], "unknown step `99`"),
        (
            &["--step", "05", "--mode", "sideways"],
            "accepts load | store, found `sideways`",
        ),
    ];
    #[cfg(feature = "cuda")]
    if !eagle::runtime::cuda::driver_available() {
        cases.push((&["-p", "cuda", "-d", "0"], "no CUDA driver was found"));
    }
    #[cfg(not(feature = "cuda"))]
    cases.push((&["-p", "cuda", "-d", "0"], "has no `cuda` feature"));
    for (args, needle) in cases {
        let out = eagle(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn mode_without_step_runs_that_mode_of_every_step_that_has_it() {
    let out = eagle(&["-d", "0,1,2", "--mode", "builtin"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    let steps: Vec<&str> = stdout.lines().map(|l| &l[5..7]).collect();
    assert_eq!(steps, ["04", "12", "13", "14", "15", "16"], "{stdout}");
    assert!(stdout
        .lines()
        .all(|l| l.contains("[builtin]") && l.ends_with("OK")));
}

#[cfg(feature = "cuda")]
#[test]
fn emit_cuda_prints_the_cuda_c_and_still_runs_on_sim() {
    let out = eagle(&["-d", "0,1", "--step", "07", "--mode", "get", "--emit-cuda"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains(
        "// ---- CUDA C of `ring_get` (P=2 NR=2); the prelude (eagle::codegen::cuda::PRELUDE) is left out ----"
    ));
    assert!(stdout.contains(
        "extern \"C\" __global__ void __launch_bounds__(EG_NT) per_rank_get(const eg_rt* rt, const unsigned long long* slots) {"
    ));
    // The prelude is left out of the printout.
    assert!(!stdout.contains("struct eg_rt"));
    assert!(stdout.trim_end().ends_with("OK"));
}

/// The runner (or example `exe`) with extra environment variables.
fn run_with_env(exe: &std::path::Path, args: &[&str], vars: &[(&str, &str)]) -> Output {
    Command::new(exe)
        .args(args)
        .envs(vars.iter().copied())
        .output()
        .expect("starts")
}

#[test]
fn environment_values_eagle_does_not_understand_exit_with_code_2() {
    for exe in [runner(), example("01_hello_rank")] {
        for (var, value, expected) in [
            ("EAGLE_RACE_CHECK", "garbage", "expected `1`, `true`, `yes` or `on` (on), or `0`, `false`, `no` or `off` (off), found `garbage`"),
            ("EAGLE_RACE_CHECK", "-1", "found `-1`"),
            ("EAGLE_WAIT_TIMEOUT_S", "-1", "expected a whole number of seconds, at least 1, such as `60`, found `-1`"),
            ("EAGLE_WAIT_TIMEOUT_S", "0", "expected a whole number of seconds, at least 1, such as `60`, found `0`"),
            ("EAGLE_WAIT_TIMEOUT_S", "garbage", "found `garbage`"),
            ("EAGLE_CUDA_EMULATE", "perhaps", "found `perhaps`"),
        ] {
            let out = run_with_env(&exe, &["-d", "0,1"], &[(var, value)]);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{exe:?} {var}={value}: {stderr}");
            assert!(
                stderr.starts_with(&format!("error: environment variable `{var}`: ")),
                "{exe:?} {var}={value}: {stderr}"
            );
            assert!(stderr.contains(expected), "{exe:?} {var}={value}: {stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
            assert!(out.stdout.is_empty(), "nothing runs: {}", text(&out.stdout));
        }
    }
    // Values it understands still work: the race check off, a timeout of 5 s.
    let out = run_with_env(
        &runner(),
        &["-d", "0,1", "--step", "01"],
        &[("EAGLE_RACE_CHECK", "off"), ("EAGLE_WAIT_TIMEOUT_S", "5")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).trim_end().ends_with("OK"));
}

#[test]
fn output_to_a_full_disk_is_an_error_and_a_closed_pipe_is_not() {
    use std::process::Stdio;
    if !std::path::Path::new("/dev/full").exists() {
        panic!("this test needs /dev/full (Linux)");
    }
    let runner = runner();
    for (exe, args) in [
        (runner.clone(), &["-d", "0,1", "--step", "01"][..]),
        (example("01_hello_rank"), &["-d", "0,1"][..]),
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = Command::new(&exe).args(args).stdout(full).output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{exe:?}: {stderr}");
        assert!(
            stderr.contains("could not be written to stdout: No space left on device"),
            "{exe:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // A reader that goes away (`eagle | head -0`): output stops quietly, the run's exit code.
    let mut child = Command::new(&runner)
        .args(["-d", "0,1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

#[cfg(feature = "cuda")]
#[test]
fn a_libcuda_without_the_driver_functions_is_the_no_driver_error() {
    // A library named like the driver that has none of its functions: cudarc used to panic
    // (`Missing symbol cuInit`) on the first driver call.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fake-libcuda");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("empty.c");
    std::fs::write(&src, "int eagle_not_a_cuda_driver;\n").unwrap();
    let lib = dir.join("libcuda.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
    let built = Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("this test needs a C compiler (`{cc}`, or set CC): {e}"));
    assert!(built.status.success(), "{}", text(&built.stderr));
    // Under both names cudarc tries first and last, so it is found before any real driver.
    std::fs::copy(&lib, dir.join("libcuda.so")).unwrap();
    let path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", dir.display()),
        _ => dir.display().to_string(),
    };
    let out = Command::new(runner())
        .args(["-p", "cuda", "-d", "0"])
        .env("LD_LIBRARY_PATH", path)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("error: no CUDA driver was found (libcuda.so was found but lacks the driver function `cuInit`"), "{stderr}");
    assert!(stderr.contains("-p sim"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn parsing_a_million_device_ids_is_linear() {
    // Used to take about 50 s (a quadratic search for repeats).
    let n = 1_000_000;
    let list: String = (0..n).map(|d| d.to_string()).collect::<Vec<_>>().join(",");
    let t = std::time::Instant::now();
    let ids = eagle_runner::parse_devices(&list).unwrap();
    let took = t.elapsed();
    assert_eq!(ids.len(), n);
    assert_eq!((ids[0], ids[n - 1]), (0, n - 1));
    assert!(took.as_secs_f64() < 5.0, "{took:?}");
    let e = eagle_runner::parse_devices(&format!("{list},{}", n / 2)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "argument `-d/--devices`: device 500000 is listed twice; each rank needs its own device, e.g. `0,1,2,3` (only `-p cuda` lets ranks share a device)"
    );
    println!("parse_devices: {n} ids in {took:?}");
}

/// The persistent cache across processes (`EAGLE_CACHE_DIR`): the first run compiles the CUDA
/// emulation's libraries and writes them, a second process loads them, a truncated entry is
/// a logged miss that is rebuilt (never loaded), and `eagle cache info|clear` report and
/// empty the folder.
#[cfg(feature = "cuda")]
#[test]
fn the_disk_cache_serves_a_second_process_and_a_damaged_entry_is_rebuilt() {
    let dir = std::env::temp_dir().join(format!("eagle-cli-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = |args: &[&str]| {
        Command::new(runner())
            .args(args)
            .env("EAGLE_CACHE_DIR", &dir)
            .env("EAGLE_CUDA_EMULATE", "1")
            .env_remove("RUST_LOG")
            .output()
            .expect("the runner starts")
    };
    let step = ["-p", "cuda", "-d", "0,1", "--step", "07"];
    let count = |o: &Output, what: &str| text(&o.stderr).matches(what).count();
    // The compiler's span, as it closes (its events carry its name too).
    let compiles = |o: &Output| {
        text(&o.stderr)
            .lines()
            .filter(|l| l.contains("cuda_emu_compile{") && l.contains(": eagle: close"))
            .count()
    };
    let ok = |o: &Output| {
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let stdout = text(&o.stdout);
        assert_eq!(stdout.lines().count(), 2, "{stdout}");
        assert!(stdout.lines().all(|l| l.ends_with("OK")), "{stdout}");
    };
    let verbose: Vec<&str> = step.iter().copied().chain(["-vv"]).collect();
    // Cold: the two modes (get, put) are two sources, two misses, two entries.
    let cold = run(&verbose);
    ok(&cold);
    assert_eq!(count(&cold, "disk cache miss kind=\"cuda-emu\""), 2);
    assert_eq!(count(&cold, "disk cache write kind=\"cuda-emu\""), 2);
    assert_eq!(count(&cold, "disk cache hit"), 0);
    assert_eq!(compiles(&cold), 2);
    // Warm: a second process compiles nothing.
    let warm = run(&verbose);
    ok(&warm);
    assert_eq!(count(&warm, "disk cache hit kind=\"cuda-emu\""), 2);
    assert_eq!(count(&warm, "disk cache miss"), 0);
    assert_eq!(compiles(&warm), 0);
    // Truncate both entries: a warning (shown without -v), rebuilt, the same results.
    let folder = dir.join("cuda-emu");
    let files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for f in &files {
        let b = std::fs::read(f).unwrap();
        std::fs::write(f, &b[..b.len() - 100]).unwrap();
    }
    let damaged = run(&step);
    ok(&damaged);
    assert_eq!(
        count(
            &damaged,
            "disk cache entry rejected (corrupted or truncated"
        ),
        2,
        "{}",
        text(&damaged.stderr)
    );
    let again = run(&verbose);
    ok(&again);
    assert_eq!(count(&again, "disk cache hit kind=\"cuda-emu\""), 2);
    // The two entries' files swapped (found by a break-it helper: it made every later run
    // fail): each trailer names its own key, so both are misses, rebuilt.
    let (a, b) = (
        std::fs::read(&files[0]).unwrap(),
        std::fs::read(&files[1]).unwrap(),
    );
    std::fs::write(&files[0], &b).unwrap();
    std::fs::write(&files[1], &a).unwrap();
    let swapped = run(&step);
    ok(&swapped);
    assert_eq!(
        count(&swapped, "its trailer does not match its bytes and its key"),
        2,
        "{}",
        text(&swapped.stderr)
    );
    ok(&run(&step));
    // The subcommands.
    let info = run(&["cache", "info"]);
    assert_eq!(info.status.code(), Some(0));
    assert!(
        text(&info.stdout).contains(": 2 entries,"),
        "{}",
        text(&info.stdout)
    );
    let clear = run(&["cache", "clear"]);
    assert_eq!(clear.status.code(), Some(0));
    assert!(
        text(&clear.stdout).contains(": deleted 2 entries,"),
        "{}",
        text(&clear.stdout)
    );
    assert!(text(&run(&["cache", "info"]).stdout).contains(": 0 entries, 0 bytes"));
    let _ = std::fs::remove_dir_all(&dir);
    // A bound smaller than one library: used, not kept, and the run is fine.
    let tiny = Command::new(runner())
        .args(step)
        .env("EAGLE_CACHE_DIR", &dir)
        .env("EAGLE_CACHE_MAX_BYTES", "0")
        .env("EAGLE_CUDA_EMULATE", "1")
        .output()
        .unwrap();
    ok(&tiny);
    assert!(text(&run(&["cache", "info"]).stdout).contains(": 0 entries, 0 bytes"));
    // A cache path that is a file: `cache info` says so.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::write(&dir, b"").unwrap();
    let info = run(&["cache", "info"]);
    assert_eq!(info.status.code(), Some(1));
    assert!(
        text(&info.stderr).contains("environment variable `EAGLE_CACHE_DIR`: expected a directory"),
        "{}",
        text(&info.stderr)
    );
    let _ = std::fs::remove_file(&dir);
}

/// `-v` shows the launch and compile spans with their durations; a bad `RUST_LOG` is a usage
/// error naming the variable.
#[test]
fn verbose_prints_spans_and_a_bad_rust_log_is_a_usage_error() {
    let out = Command::new(runner())
        .args(["-d", "0,1", "--step", "01", "-v"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let err = text(&out.stderr);
    assert!(
        err.contains("launch{function=\"hello_rank\" world_size=2 platform=\"sim\"}"),
        "{err}"
    );
    assert!(err.contains("time.busy="), "{err}");
    assert!(
        !err.contains("dispatch{"),
        "-v leaves out the debug spans: {err}"
    );
    let out = Command::new(runner())
        .args(["-d", "0,1", "--step", "01"])
        .env("RUST_LOG", "eagle=debug")
        .output()
        .unwrap();
    assert!(text(&out.stderr).contains("dispatch{rank=1 function=\"hello\"}"));
    let out = Command::new(runner())
        .args(["-d", "0,1", "--step", "01"])
        .env("RUST_LOG", "eagle=loud")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("environment variable `RUST_LOG`: expected `target=level` directives"),
        "{}",
        text(&out.stderr)
    );
}

/// `EAGLE_RACE_CHECK` decides whether the simulator's race detector runs unless
/// `--no-race-check` turns it off (the flag used to turn it back on whatever the variable
/// said); `-vv` shows the setting at each launch.
#[test]
fn the_race_check_follows_the_environment_unless_the_flag_turns_it_off() {
    for (value, flag, want) in [
        (None, false, "race_check=true"),
        (Some("off"), false, "race_check=false"),
        (Some("on"), false, "race_check=true"),
        (None, true, "race_check=false"),
        (Some("on"), true, "race_check=false"),
    ] {
        let mut args = vec!["-d", "0,1", "--step", "01", "-vv"];
        if flag {
            args.push("--no-race-check");
        }
        // An empty value keeps the default, whatever the caller's environment holds.
        let env = [("EAGLE_RACE_CHECK", value.unwrap_or(""))];
        let out = run_with_env(&runner(), &args, &env);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains(want),
            "EAGLE_RACE_CHECK={value:?} flag={flag}: {stderr}"
        );
    }
}

/// `--trace FILE` and `--trace-svg FILE` write the timeline of every step of the run; an
/// unwritable file is one `error:` line and exit code 1 after the steps ran.
#[test]
fn trace_flags_write_the_timeline_files() {
    let dir = std::env::temp_dir().join(format!("eagle-cli-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, svg) = (dir.join("t.json"), dir.join("t.svg"));
    let out = eagle(&[
        "-d",
        "0,1,2",
        "--step",
        "11",
        "--trace",
        json.to_str().unwrap(),
        "--trace-svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json = std::fs::read_to_string(&json).unwrap();
    // Three modes of step 11, one dispatch per rank each.
    for f in ["ar_mesh", "ar_two_phase", "ar_ring"] {
        let needle = format!("\"name\":\"{f}\",\"cat\":\"dispatch\"");
        assert_eq!(json.matches(&needle).count(), 3, "{f}");
    }
    assert!(json.contains("\"cat\":\"collective\""));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains(">rank 2</text>"));
    let out = eagle(&[
        "-d",
        "0,1",
        "--step",
        "01",
        "--trace",
        "/nonexistent-eagle/t.json",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "error: trace file `/nonexistent-eagle/t.json` could not be written: No such file or directory (os error 2); pass a path in a directory that exists and that you can write"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--sim-ranks` picks how `sim` runs the ranks (issue 37, item 3): the digests are the same
/// either way, and a mode the runner does not know is a usage error naming the ones it does.
#[test]
fn sim_ranks_tasks_and_threads_print_the_same_digests() {
    let digests = |mode: &str| {
        let out = eagle(&[
            "-d",
            "0,1,2",
            "--step",
            "11",
            "--digest",
            "--sim-ranks",
            mode,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let d: Vec<String> = stdout
            .lines()
            .map(|l| l.rsplit("digest=").next().unwrap_or("").to_string())
            .collect();
        assert_eq!(d.len(), 3, "{stdout}");
        d
    };
    assert_eq!(digests("tasks"), digests("threads"));
    let out = eagle(&["--sim-ranks", "fibers", "--step", "01"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("invalid value 'fibers' for '--sim-ranks <MODE>'")
            && err.contains("[possible values: auto, threads, tasks]"),
        "{err}"
    );
}

/// A run that succeeds ends with its count on stderr (stdout keeps one line per run); steps
/// the world size refuses are counted as skipped.
#[test]
fn a_successful_run_ends_with_its_count() {
    let out = eagle(&["-d", "0,1", "--step", "07"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let runs = text(&out.stdout).lines().count();
    assert_eq!(
        text(&out.stderr).trim(),
        format!("{runs} of {runs} step runs OK")
    );
}
