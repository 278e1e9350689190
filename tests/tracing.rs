//! eagle's `tracing` spans, captured by a test subscriber: their names, their fields and
//! their nesting (docs/tracing.md lists them).

use eagle::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

const SIZE: usize = 8;
const NR: Dim = dynamic!("NR");

#[eagle::kernel(device)]
fn add_rank(ctx: Ctx, x: Tensor<f32, 1, SIZE>, y: Out<Tensor<f32, 1, SIZE>>) {
    store(y, [0, 0], load(x, [0, 0], [1, SIZE]) + rank(ctx) as f32);
}

#[eagle::host]
fn hello(x: Tensor<f32, NR, 1, SIZE>, y: Out<Tensor<f32, NR, 1, SIZE>>) {
    for r in 0..world_size() {
        add_rank(x[r], y[r], device = r);
    }
}

const N: Dim = dynamic!("N");

#[eagle::kernel(sample)]
fn square(s: usize, x: Tensor<f64, N>, out: Out<Tensor<f64, N>>) {
    out[s] = x[s] * x[s];
}

/// A span or event as the test subscriber saw it: its name (an event's message), its fields
/// as text, and the names of its ancestors, outermost first.
#[derive(Debug, Clone)]
struct Seen {
    name: String,
    fields: BTreeMap<String, String>,
    parents: Vec<String>,
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_string(),
            format!("{value:?}").trim_matches('"').to_string(),
        );
    }
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

fn parents<S: tracing::Subscriber + for<'a> LookupSpan<'a>>(
    cx: &Context<'_, S>,
    id: Option<&Id>,
) -> Vec<String> {
    id.and_then(|id| cx.span(id))
        .map(|s| {
            s.scope()
                .from_root()
                .map(|p| p.name().to_string())
                .collect()
        })
        .unwrap_or_default()
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, cx: Context<'_, S>) {
        let mut f = Fields::default();
        attrs.record(&mut f);
        let mut p = parents(&cx, Some(id));
        p.pop();
        self.0.lock().unwrap().push(Seen {
            name: attrs.metadata().name().to_string(),
            fields: f.0,
            parents: p,
        });
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, cx: Context<'_, S>) {
        let name = cx.span(id).map(|s| s.name().to_string());
        let mut f = Fields::default();
        values.record(&mut f);
        let mut seen = self.0.lock().unwrap();
        if let Some(s) = seen
            .iter_mut()
            .rev()
            .find(|s| Some(&s.name) == name.as_ref())
        {
            s.fields.extend(f.0);
        }
    }
    fn on_event(&self, event: &tracing::Event<'_>, cx: Context<'_, S>) {
        let mut f = Fields::default();
        event.record(&mut f);
        let name = f.0.remove("message").unwrap_or_default();
        let p = cx
            .event_span(event)
            .map(|s| {
                s.scope()
                    .from_root()
                    .map(|p| p.name().to_string())
                    .collect()
            })
            .unwrap_or_default();
        self.0.lock().unwrap().push(Seen {
            name,
            fields: f.0,
            parents: p,
        });
    }
}

fn find<'a>(seen: &'a [Seen], name: &str) -> Vec<&'a Seen> {
    seen.iter().filter(|s| s.name == name).collect()
}

/// One test: the subscriber is the process's global default (device threads report to it).
#[test]
fn launches_compiles_dispatches_and_plan_runs_are_spans_with_their_fields() {
    let rec = Recorder::default();
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(rec.clone()))
        .unwrap();

    let s = Session::sim(3).unwrap();
    let x = Tensor::<f32>::from_vec(&[3, 1, SIZE], vec![1.0; 3 * SIZE]).unwrap();
    let mut y = Tensor::<f32>::zeros(&[3, 1, SIZE]);
    hello.launch(&s, &x, &mut y).unwrap();
    hello.launch(&s, &x, &mut y).unwrap();
    assert_eq!(y.row(2), &[3.0; SIZE]);

    let seen = rec.0.lock().unwrap().clone();
    let launches = find(&seen, "launch");
    assert_eq!(launches.len(), 2, "{seen:#?}");
    for l in &launches {
        assert_eq!(l.fields["function"], "hello");
        assert_eq!(l.fields["world_size"], "3");
        assert_eq!(l.fields["platform"], "sim");
        assert!(l.parents.is_empty());
    }
    // Built once per process, under the first launch.
    let build = find(&seen, "build");
    assert_eq!(build.len(), 1);
    assert_eq!(build[0].fields["function"], "hello");
    assert!(build[0].fields["ops"].parse::<usize>().unwrap() > 5);
    assert_eq!(build[0].parents, ["launch"]);
    // Compiled once: a miss, then a hit.
    let miss = find(&seen, "artifact cache miss");
    let hit = find(&seen, "artifact cache hit");
    assert_eq!((miss.len(), hit.len()), (1, 1));
    assert_eq!(miss[0].fields["key"], hit[0].fields["key"]);
    assert_eq!(miss[0].fields["key"].len(), 16);
    let compile = find(&seen, "compile");
    assert_eq!(compile.len(), 1);
    assert_eq!(compile[0].fields["bindings"], "P=3 NR=3");
    assert_eq!(compile[0].fields["for_target"], "cpu");
    for stage in ["verify", "specialize", "backend"] {
        let st = find(&seen, stage);
        assert_eq!(st.len(), 1, "{stage}");
        assert_eq!(st[0].parents, ["launch", "compile"], "{stage}");
    }
    assert_eq!(find(&seen, "specialize")[0].fields["world_size"], "3");
    assert_eq!(find(&seen, "backend")[0].fields["backend"], "cpu");
    // The collective lowering runs per function, inside specialization.
    let lower = find(&seen, "lower");
    assert_eq!(lower.len(), 2);
    assert!(lower
        .iter()
        .all(|l| l.parents == ["launch", "compile", "specialize"]));
    // Each launch dispatches once per rank, on the device threads, under its launch.
    let dispatch = find(&seen, "dispatch");
    assert_eq!(dispatch.len(), 6);
    let mut ranks: Vec<&str> = dispatch.iter().map(|d| d.fields["rank"].as_str()).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, ["0", "0", "1", "1", "2", "2"]);
    assert!(dispatch
        .iter()
        .all(|d| d.fields["function"] == "add_rank" && d.parents == ["launch"]));
    // How the ranks ran, once per launch: `add_rank` reaches no other rank.
    let ranks_ev = find(&seen, "sim ranks");
    assert_eq!(ranks_ev.len(), 2, "{seen:#?}");
    assert!(ranks_ev.iter().all(|e| e.fields["ranks"] == "3"
        && e.fields["run_as"] == "one thread, in rank order"
        && e.parents == ["launch"]));

    // A plan run.
    rec.0.lock().unwrap().clear();
    let p = eagle::plan::plan(
        square,
        eagle::plan::Structure::HostTeam,
        eagle::plan::Structure::HostTeam,
    )
    .unwrap()
    .with_threads(2);
    let xs = Tensor::<f64>::from_vec(&[64], (0..64).map(f64::from).collect()).unwrap();
    let mut ys = Tensor::<f64>::zeros(&[64]);
    let mut planes = eagle::plan::Planes::new()
        .input("x", &xs)
        .output("out", &mut ys);
    p.run(0, &mut planes).unwrap();
    drop(planes);
    assert_eq!(ys.data()[9], 81.0);
    let seen = rec.0.lock().unwrap().clone();
    let runs = find(&seen, "plan_run");
    assert_eq!(runs.len(), 1, "{seen:#?}");
    assert_eq!(runs[0].fields["kernel"], "square");
    assert_eq!(runs[0].fields["structure"], "HostTeam");
    assert_eq!(runs[0].fields["threads"], "2");
    assert_eq!(runs[0].fields["platform"], "sim");
}
