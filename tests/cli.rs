//! The runner binary as a user runs it: output lines, exit codes, and bad command lines.

use std::process::{Command, Output};

fn eagle(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_eagle"))
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
        assert_eq!(lines.len(), 27, "{stdout}");
        for l in &lines {
            assert!(l.ends_with("OK"), "{l}");
            assert!(l.contains(&format!("P={p} ")), "{l}");
        }
        assert!(
            lines[10].starts_with("step 07 dynamic_rank_count [put]"),
            "{stdout}"
        );
    }
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
        (&["-d", "0,1024"], "device 1024 does not exist"),
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
