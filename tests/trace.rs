//! Timelines (`Session::with_trace`, `--trace`, `--trace-svg`; `eagle_runtime::trace`): the
//! Chrome trace-event JSON parses, has a track per rank, nests every kernel call and
//! communication event inside its dispatch, annotates waits and barriers, groups a built-in
//! collective under one span; the SVG has a lane per track; plans get a track per worker; an
//! unwritable file is a typed error.

mod tutorial;
use tutorial::*;

use eagle::prelude::*;
use eagle::runtime::trace::Trace;
use eagle::runtime::RuntimeError;
use serde_json::Value;

fn temp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("eagle-trace-{}-{name}", std::process::id()))
}

/// Thread names by (pid, tid).
type Names = Vec<((u64, u64), String)>;

/// The complete events (`"ph": "X"`) of a trace file, and its thread names.
fn read(path: &std::path::Path) -> (Vec<Value>, Names) {
    let text = std::fs::read_to_string(path).expect("the trace file was written");
    let v: Value = serde_json::from_str(&text).expect("the trace is JSON");
    let all = v["traceEvents"].as_array().expect("traceEvents").clone();
    let names = all
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            let key = (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap());
            (key, e["args"]["name"].as_str().unwrap().to_string())
        })
        .collect();
    (all.into_iter().filter(|e| e["ph"] == "X").collect(), names)
}

fn cat(e: &Value) -> &str {
    e["cat"].as_str().unwrap()
}

fn span(e: &Value) -> (f64, f64) {
    let ts = e["ts"].as_f64().unwrap();
    (ts, ts + e["dur"].as_f64().unwrap())
}

#[test]
fn a_traced_session_writes_rank_tracks_with_nested_annotated_spans() {
    let path = temp("barrier.json");
    let p = 4;
    let s = Session::sim(p).unwrap().with_trace(&path);
    step04::run(&s).unwrap();
    let (events, names) = read(&path);
    for r in 0..p as u64 {
        assert!(names.contains(&((0, r), format!("rank {r}"))), "{names:?}");
    }
    let dispatches: Vec<&Value> = events.iter().filter(|e| cat(e) == "dispatch").collect();
    // One dispatch of `exchange` per rank.
    assert_eq!(dispatches.len(), p);
    assert!(dispatches.iter().all(|d| d["name"] == "exchange"));
    let mut tids: Vec<u64> = dispatches
        .iter()
        .map(|d| d["tid"].as_u64().unwrap())
        .collect();
    tids.sort();
    assert_eq!(tids, vec![0, 1, 2, 3]);
    // Every other event lies inside its rank's dispatch.
    for e in events.iter().filter(|e| cat(e) != "dispatch") {
        let d = dispatches
            .iter()
            .find(|d| d["tid"] == e["tid"])
            .expect("a dispatch on the event's track");
        let ((d0, d1), (e0, e1)) = (span(d), span(e));
        assert!(d0 <= e0 && e1 <= d1 + 1e-3, "{e} outside {d}");
    }
    // The compute kernel call, once per rank, named after the callee.
    let kernels: Vec<&Value> = events.iter().filter(|e| cat(e) == "kernel").collect();
    assert_eq!(kernels.len(), p);
    assert!(kernels.iter().all(|k| k["name"] == "signal_barrier"));
    // The hand-written barrier: every rank notifies every rank and waits for P arrivals.
    let waits: Vec<&Value> = events.iter().filter(|e| cat(e) == "wait").collect();
    assert_eq!(waits.len(), p);
    for w in &waits {
        let a = &w["args"];
        assert_eq!(a["signal"], "window #1 element 0");
        assert_eq!(a["until"], format!(">= {p}"));
        assert!(a["waited_ns"].as_u64().is_some(), "{w}");
        assert!(a["notified_by"].as_u64().is_some_and(|r| r < p as u64));
        let op = a["op"].as_str().unwrap();
        assert!(op.contains("examples/04_barrier.rs:"), "{op}");
    }
    let notifies = events.iter().filter(|e| cat(e) == "notify").count();
    assert_eq!(notifies, p * p);
    // After the barrier each rank reads its right neighbour's row: one get of 64 f32s.
    let gets: Vec<&Value> = events.iter().filter(|e| cat(e) == "get").collect();
    assert_eq!(gets.len(), p);
    for g in &gets {
        let r = g["tid"].as_u64().unwrap();
        assert_eq!(g["args"]["bytes"], 256);
        assert_eq!(g["args"]["peer"], (r + 1) % p as u64);
    }
    // The loop of notifies (one source line) is grouped as one collective span per rank.
    let coll: Vec<&Value> = events.iter().filter(|e| cat(e) == "collective").collect();
    assert_eq!(coll.len(), p);
    assert!(coll.iter().all(|c| c["args"]["events"] == p as u64
        && c["name"] == "collective at examples/04_barrier.rs:16:9"));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_builtin_collective_is_one_span_over_its_communication() {
    let path = temp("allreduce.json");
    let trace = Trace::new(Some(path.clone()), Some(temp("allreduce.svg")));
    let s = Session::sim(3)
        .unwrap()
        .with_mode(Some("ring".into()))
        .with_tracer(trace.clone());
    step11::run(&s).unwrap();
    // A shared recorder is written by its owner.
    assert!(!path.exists());
    trace.flush().unwrap();
    let (events, _) = read(&path);
    let coll: Vec<&Value> = events.iter().filter(|e| cat(e) == "collective").collect();
    assert!(!coll.is_empty());
    for c in &coll {
        let name = c["name"].as_str().unwrap();
        assert!(
            name.starts_with("collective at examples/11_builtin_allreduce.rs:"),
            "{name}"
        );
        assert!(c["args"]["events"].as_u64().unwrap() >= 2);
        // Its events lie inside it, on its track.
        let (c0, c1) = span(c);
        let inside = events
            .iter()
            .filter(|e| {
                e["tid"] == c["tid"]
                    && ["put", "get", "notify", "wait", "barrier"].contains(&cat(e))
            })
            .filter(|e| {
                let (e0, e1) = span(e);
                c0 <= e0 && e1 <= c1 + 1e-3
            })
            .count();
        assert_eq!(inside as u64, c["args"]["events"].as_u64().unwrap());
    }
    let svg = std::fs::read_to_string(temp("allreduce.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
    for r in 0..3 {
        assert!(svg.contains(&format!(">rank {r}</text>")));
    }
    // One rectangle with a tooltip per span.
    assert_eq!(svg.matches("<title>").count(), events.len());
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(temp("allreduce.svg"));
}

#[test]
fn an_unwritable_trace_file_is_a_typed_error_after_the_outputs_are_back() {
    let path = std::path::PathBuf::from("/nonexistent-eagle-dir/t.json");
    let s = Session::sim(2).unwrap().with_trace(&path);
    let err = step04::run(&s).unwrap_err();
    match err {
        eagle::Error::Runtime(RuntimeError::Trace { path: p, message }) => {
            assert_eq!(p, "/nonexistent-eagle-dir/t.json");
            assert!(!message.is_empty());
        }
        other => panic!("expected RuntimeError::Trace, got {other:?}"),
    }
}

const N: eagle::Dim = eagle::dynamic!("N");

/// `y = 2x`: sample-local.
#[eagle::kernel(sample, category = "sample_local")]
pub fn double(s: usize, x: Tensor<f64, N>, y: Out<Tensor<f64, N>>) {
    y[s] = x[s] * 2.0;
}

#[test]
fn a_traced_plan_has_a_track_per_worker_and_rank() {
    use eagle::plan::{plan, Planes, Structure};
    use eagle::Tensor;
    let path = temp("plan.json");
    let trace = Trace::new(Some(path.clone()), None);
    let n = 4000;
    let x = Tensor::from_vec(&[n], (0..n).map(|i| i as f64).collect()).unwrap();
    let mut y = Tensor::<f64>::zeros(&[n]);
    plan(double, Structure::RankPartition, Structure::HostTeam)
        .unwrap()
        .with_simulated_ranks(2)
        .with_threads(2)
        .with_tracer(trace.clone())
        .run(0, &mut Planes::new().input("x", &x).output("y", &mut y))
        .unwrap();
    assert_eq!(y.data()[n - 1], 2.0 * (n - 1) as f64);
    trace.flush().unwrap();
    let (events, names) = read(&path);
    // Two ranks of two workers: a track each (pid 1 + rank, tid = worker), a share each.
    let mut tracks: Vec<(u64, u64)> = events
        .iter()
        .map(|e| (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()))
        .collect();
    tracks.sort();
    assert_eq!(tracks, vec![(1, 0), (1, 1), (2, 0), (2, 1)]);
    assert!(events
        .iter()
        .all(|e| cat(e) == "plan" && e["name"] == "double"));
    let units: u64 = events
        .iter()
        .map(|e| e["args"]["units"].as_u64().unwrap())
        .sum();
    assert_eq!(units, n as u64);
    assert!(names.contains(&((2, 1), "worker 1".to_string())));
    let _ = std::fs::remove_file(&path);
}

/// On platform `cuda` (here its emulation) the timeline has each rank's dispatches, from launch
/// to completion.
#[cfg(feature = "cuda")]
#[test]
fn a_traced_cuda_session_records_its_dispatches() {
    let path = temp("cuda.json");
    let s = Session::cuda_emulated(vec![0, 0, 0])
        .unwrap()
        .with_trace(&path);
    step04::run(&s).unwrap();
    let (events, _) = read(&path);
    let mut tids: Vec<u64> = events
        .iter()
        .filter(|e| cat(e) == "dispatch" && e["name"] == "exchange")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    tids.sort();
    assert_eq!(tids, vec![0, 1, 2]);
    let _ = std::fs::remove_file(&path);
}
