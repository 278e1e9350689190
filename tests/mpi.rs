//! Agreement between ranks (`eagle::runtime::agree`): the rule every MPI rank applies before
//! the ranks act together. The rule is pure, so it is tested here on any machine; `.ci/run`
//! runs the same faults under `mpirun` (Open MPI and MPICH) with `examples/mpi_faults.rs`.

use eagle::runtime::agree::{judge, Stance};
use eagle::runtime::RuntimeError;

mod bins;

fn launch(shape: &str) -> Stance {
    Stance::at("launch #1 (of `rows`)")
        .fact("argument `x` of `rows`", shape)
        .fact("the program", "`rows` with IR digest 0123 at P=4")
}

#[test]
fn stances_round_trip_and_garbage_is_refused() {
    let s = launch("an input of shape [4, 8], f32").failed(Some("bad".into()));
    assert_eq!(Stance::decode(&s.encode()), Some(s.clone()));
    let mut b = s.encode();
    b.push(0);
    assert_eq!(Stance::decode(&b), None, "trailing bytes");
    assert_eq!(Stance::decode(&b[..3]), None, "truncated");
    assert_eq!(Stance::decode(&[0xff; 16]), None, "a length past the end");
}

#[test]
fn equal_stances_agree_on_every_rank() {
    let all = vec![launch("an input of shape [4, 8], f32"); 3];
    for me in 0..3 {
        assert_eq!(judge(me, &all), Ok(()));
    }
}

#[test]
fn a_shape_that_differs_between_ranks_is_named_on_every_rank() {
    let mut all = vec![launch("an input of shape [4, 8], f32"); 4];
    all[3] = launch("an input of shape [4, 4], f32");
    for me in 0..4 {
        match judge(me, &all) {
            Err(RuntimeError::RanksDisagree { point, message }) => {
                assert_eq!(point, "launch #1 (of `rows`)");
                assert!(
                    message.starts_with("argument `x` of `rows` differs between ranks: rank ")
                        && message.contains("has an input of shape [4, 8], f32, rank 3 has an input of shape [4, 4], f32;"),
                    "{message}"
                );
            }
            other => panic!("rank {me}: {other:?}"),
        }
    }
}

/// Planes of different names (a misnamed plane on one rank) name both sides, so that the two
/// values never read the same (issue 35, item 9).
#[test]
fn facts_of_different_names_show_both_names() {
    let at = |name: &str| {
        Stance::at("plan run #1").fact(format!("plane `{name}`"), "an input of shape [8]")
    };
    let all = vec![at("x"), at("z")];
    for me in 0..2 {
        let e = judge(me, &all).unwrap_err().to_string();
        assert!(e.contains("plane `x` / plane `z` differs between ranks: rank 0 has plane `x` (an input of shape [8]), rank 1 has plane `z` (an input of shape [8]);"), "{e}");
    }
}

#[test]
fn an_error_before_a_launch_on_one_rank_fails_every_rank_with_it() {
    let mut all = vec![launch("an input of shape [4, 8], f32"); 3];
    all[1].error = Some("argument `y`: expected [3, 8], found [2, 8]".into());
    // A second failing rank: the lowest one is named, on every rank.
    all[2].error = Some("another".into());
    for me in 0..3 {
        assert_eq!(
            judge(me, &all),
            Err(RuntimeError::RankFailed {
                rank: 1,
                cause: eagle::runtime::Cause::Peer("argument `y`: expected [3, 8], found [2, 8] (before launch #1 (of `rows`); every rank stops)".into())
            })
        );
    }
}

#[test]
fn ranks_at_different_points_are_named_with_both_points() {
    let all = vec![
        launch("an input of shape [4, 8], f32"),
        Stance::at("the final success vote"),
    ];
    for me in 0..2 {
        let e = judge(me, &all).unwrap_err().to_string();
        assert!(
            e.contains(
                "rank 0 is at launch #1 (of `rows`) while rank 1 is at the final success vote"
            ),
            "{e}"
        );
    }
}

/// A rank that failed before a launch the others reached brings its own error to the final
/// vote: every rank names that rank and its error (issue 35, item 5), not only the points.
#[test]
fn a_rank_at_another_point_with_its_own_error_is_named_with_it() {
    let mut all = vec![launch("an input of shape [4, 8], f32"); 3];
    all[2] =
        Stance::at("the final success vote").failed(Some("rank 2 could not read its input".into()));
    for me in 0..3 {
        assert_eq!(
            judge(me, &all),
            Err(RuntimeError::RankFailed {
                rank: 2,
                cause: eagle::runtime::Cause::Peer("rank 2 could not read its input (rank 2 is at the final success vote while rank 0 is at launch #1 (of `rows`); every rank stops)".into())
            }),
            "rank {me}"
        );
    }
}

#[test]
fn a_missing_rank_names_the_point_and_the_ranks() {
    let e = RuntimeError::RanksMissing {
        rank: 0,
        point: "launch #1 (of `rows`)".into(),
        missing: vec![2],
        secs: 3,
    };
    assert!(e
        .to_string()
        .starts_with("rank 0: rank(s) [2] did not reach launch #1 (of `rows`) within 3 s;"));
}

/// On one process (no `mpirun`) a lone rank cannot disagree with itself: every fault mode of
/// the example runs, and the barrier nobody else enters is a deadlock that `sim` reports at
/// once.
#[test]
fn mpi_fault_modes_on_one_process() {
    // `cargo test` builds the examples; a missing binary is a broken build, not a skip.
    let bin = bins::example("mpi_faults");
    for mode in [
        "launch_error",
        "shape_mismatch",
        "skip_launch",
        "stopped_rank",
        "plan_n",
        "gather_share",
        "early_err",
        "busy_in_barrier",
        "stopped_in_barrier",
        "exit_mid_run",
        "plain_partition",
    ] {
        let out = std::process::Command::new(&bin)
            .args(["-d", "0,1", "--mode", mode])
            .output()
            .expect("run mpi_faults");
        assert!(
            out.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n", "{mode}");
    }
    let out = std::process::Command::new(&bin)
        .args(["-d", "0,1", "--mode", "barrier_count"])
        .output()
        .expect("run mpi_faults");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("deadlock"), "{err}");
}
