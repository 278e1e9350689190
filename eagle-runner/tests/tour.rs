//! A scripted tour of bad command lines: every one must end with a clear error (exit code 2
//! for the user's input) within the time limit, and none may panic or hang.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../../tests/bins/mod.rs"]
mod bins;

fn bin(name: &str) -> PathBuf {
    if name == "eagle" {
        PathBuf::from(env!("CARGO_BIN_EXE_eagle"))
    } else {
        bins::example(name)
    }
}

enum End {
    Exit(i32, String),
    Hang,
}

fn run(exe: &PathBuf, args: &[&str]) -> End {
    let mut child = Command::new(exe)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            return End::Exit(status.code().unwrap_or(-1), err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return End::Hang;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn fifty_bad_command_lines_give_clear_errors() {
    let too_many: String = (0..=4096)
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let runner: Vec<Vec<&str>> = vec![
        vec!["-d", ""],
        vec!["-d", " "],
        vec!["-d", ","],
        vec!["-d", "0,"],
        vec!["-d", ",0"],
        vec!["-d", "0,,1"],
        vec!["-d", "a"],
        vec!["-d", "0,a"],
        vec!["-d=-1"],
        vec!["-d", "0,-1"],
        vec!["-d", "1.5"],
        vec!["-d", "0x1"],
        vec!["-d", "99999999999999999999"],
        vec!["-d", "1,1"],
        vec!["-d", "0,1,0"],
        vec!["-d", "0,4096"],
        vec!["-d", too_many.as_str()],
        vec!["-p", "gpu"],
        vec!["-p", ""],
        vec!["-p", "SIM"],
        vec!["-p", "cuda"],
        vec!["-p", "mpi"],
        vec!["--step", "0"],
        vec!["--step", "99"],
        vec!["--step", "abc"],
        vec!["--step", "-1"],
        vec!["--step", "1.5"],
        vec!["--step", ""],
        vec!["--step", "99999999999999999999"],
        vec!["--mode", "x"],
        vec!["--mode", ""],
        vec!["--mode", "GET"],
        vec!["--step", "1", "--mode", "get"],
        vec!["--step", "4", "--mode", "load"],
        vec!["--step", "11", "--mode", "tree"],
        vec!["--wait-timeout", "-1"],
        vec!["--wait-timeout", "0"],
        vec!["--wait-timeout", "abc"],
        vec!["--wait-timeout", ""],
        vec!["--frobnicate"],
        vec!["extra"],
        vec!["-d"],
        vec!["--step"],
        vec!["--mode"],
        vec!["-d", "0,1", "-d", "0,1,2"],
    ];
    let examples: Vec<(&str, Vec<&str>)> = vec![
        ("07_dynamic_rank_count", vec!["--mode", "nope"]),
        ("07_dynamic_rank_count", vec!["-d", ""]),
        ("07_dynamic_rank_count", vec!["-d", "2,2"]),
        ("07_dynamic_rank_count", vec!["-p", "tpu"]),
        ("01_hello_rank", vec!["--mode", "get"]),
        ("05_remote_load_store", vec!["--mode", "get"]),
        ("11_builtin_allreduce", vec!["--mode", "tree"]),
        ("15_all_to_all", vec!["-d", "0,9999"]),
        ("16_several_collectives", vec!["--unknown"]),
        ("12_broadcast", vec!["-d", "x"]),
    ];
    let mut cases: Vec<(PathBuf, Vec<&str>)> =
        runner.into_iter().map(|a| (bin("eagle"), a)).collect();
    cases.extend(examples.into_iter().map(|(e, a)| (bin(e), a)));
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let (mut panics, mut hangs) = (0, 0);
    for (exe, args) in &cases {
        match run(exe, args) {
            End::Hang => {
                hangs += 1;
                eprintln!("HANG: {exe:?} {args:?}");
            }
            End::Exit(code, err) => {
                if err.contains("panicked") || code == 101 {
                    panics += 1;
                    eprintln!("PANIC: {exe:?} {args:?}: {err}");
                }
                assert_eq!(code, 2, "{exe:?} {args:?}: exit {code}: {err}");
                assert!(err.starts_with("error"), "{exe:?} {args:?}: {err}");
            }
        }
    }
    println!(
        "tour: {} bad command lines, {panics} panics, {hangs} hangs",
        cases.len()
    );
    assert_eq!((panics, hangs), (0, 0));
}
