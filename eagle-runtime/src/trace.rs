//! Timelines: what each rank (and each worker thread of an execution plan) did and when, as a
//! Chrome trace-event JSON file that Perfetto (<https://ui.perfetto.dev>) and
//! `chrome://tracing` open, or as an SVG swimlane picture.
//!
//! A [`Trace`] is a recorder shared by the runs that carry it in [`crate::RunOptions::trace`]
//! (`Session::with_trace`, the runner's `--trace FILE` and `--trace-svg FILE`). It records:
//! - `dispatch`: one span per dispatch of a per-device program, on its rank's track;
//! - `kernel`: each compute kernel call made by compiled device code (platforms `sim`/`cpu`
//!   and MPI; compiled code reports calls only while a trace records, see
//!   `eagle_codegen::abi::DeviceCtx::trace`);
//! - `put`/`get` (with the peer, the window and the bytes), `notify` (peer, signal, value),
//!   `wait` (the signal, the value and comparison it waited for, who last notified it where the
//!   platform knows, and the time spent waiting), `barrier` (the time spent waiting);
//! - `collective`: written, not recorded: consecutive communication events of one rank that
//!   come from one source line (what a built-in collective lowers to, or a hand-written loop
//!   of puts) are grouped under one span named after that line;
//! - `plan`: each worker thread's share of an execution plan, on a track of its own.
//!
//! Under MPI each rank records its own events; [`Trace::flush`] gathers them and rank 0 writes
//! the merged file, each rank's clock shifted so that the gather ends at the same instant on
//! every rank. Time stamps are microseconds since the trace started.

use crate::error::RuntimeError;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The track an event is drawn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Track {
    /// A rank's device program (Chrome `pid` 0, `tid` the rank).
    Rank(usize),
    /// Worker `thread` of an execution plan run by `rank` (`pid` 1 + rank, `tid` the worker).
    Plan {
        /// The rank that runs the plan.
        rank: usize,
        /// The worker (0 is the calling thread).
        thread: usize,
    },
}

/// What an event is; the Chrome `cat` field and the SVG colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cat {
    /// A dispatch of a per-device program.
    Dispatch,
    /// A compute kernel call.
    Kernel,
    /// A group of communication events from one source line (see the module docs).
    Collective,
    /// A put to a peer's window.
    Put,
    /// A get from a peer's window.
    Get,
    /// A notify of a peer's signal.
    Notify,
    /// A wait on a local signal.
    Wait,
    /// A barrier.
    Barrier,
    /// A worker's share of an execution plan.
    Plan,
}

impl Cat {
    /// The `cat` field.
    pub fn name(self) -> &'static str {
        match self {
            Cat::Dispatch => "dispatch",
            Cat::Kernel => "kernel",
            Cat::Collective => "collective",
            Cat::Put => "put",
            Cat::Get => "get",
            Cat::Notify => "notify",
            Cat::Wait => "wait",
            Cat::Barrier => "barrier",
            Cat::Plan => "plan",
        }
    }

    /// Communication: grouped into collective spans by source line.
    fn is_comm(self) -> bool {
        matches!(
            self,
            Cat::Put | Cat::Get | Cat::Notify | Cat::Wait | Cat::Barrier
        )
    }

    fn colour(self) -> &'static str {
        match self {
            Cat::Dispatch => "#9fb8d9",
            Cat::Kernel => "#7bc47f",
            Cat::Collective => "#f2c572",
            Cat::Put | Cat::Get => "#e8875b",
            Cat::Notify => "#c78ad6",
            Cat::Wait | Cat::Barrier => "#d95f5f",
            Cat::Plan => "#8cc7c2",
        }
    }
}

/// A value of an event argument.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// A whole number (bytes, a peer, a signal value).
    Int(i64),
    /// Text (an op and its source line, a comparison).
    Text(String),
}

/// One recorded span.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Where it is drawn.
    pub track: Track,
    /// What it is.
    pub cat: Cat,
    /// Its name (the function, the op).
    pub name: String,
    /// Start, in nanoseconds since the trace started.
    pub start_ns: u64,
    /// Duration, in nanoseconds.
    pub dur_ns: u64,
    /// Named arguments (`bytes`, `peer`, `waited_us`, ...).
    pub args: Vec<(&'static str, ArgValue)>,
}

#[derive(Debug)]
struct Recorder {
    origin: Instant,
    events: Mutex<Vec<Event>>,
    json: Option<PathBuf>,
    svg: Option<PathBuf>,
}

/// A timeline recorder: a cheap handle (clones share the events). Equal handles are the same
/// recorder.
#[derive(Debug, Clone)]
pub struct Trace(Arc<Recorder>);

impl PartialEq for Trace {
    fn eq(&self, other: &Trace) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Trace {
    /// A recorder that writes the Chrome JSON timeline to `json` and the SVG swimlanes to
    /// `svg` (either may be `None`) at each [`Trace::flush`].
    pub fn new(json: Option<PathBuf>, svg: Option<PathBuf>) -> Trace {
        Trace(Arc::new(Recorder {
            origin: Instant::now(),
            events: Mutex::new(Vec::new()),
            json,
            svg,
        }))
    }

    /// Nanoseconds since the trace started.
    pub fn now(&self) -> u64 {
        self.0.origin.elapsed().as_nanos() as u64
    }

    /// Records a span that started at `start_ns` (from [`Trace::now`]) and ends now.
    pub fn span(
        &self,
        track: Track,
        cat: Cat,
        name: impl Into<String>,
        start_ns: u64,
        args: Vec<(&'static str, ArgValue)>,
    ) {
        let end = self.now();
        self.push(Event {
            track,
            cat,
            name: name.into(),
            start_ns,
            dur_ns: end.saturating_sub(start_ns),
            args,
        });
    }

    /// Records `e`.
    pub fn push(&self, e: Event) {
        self.0
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }

    /// The events recorded in this process so far, in the order they ended.
    pub fn events(&self) -> Vec<Event> {
        self.0
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Writes the files this trace was made with: every event recorded so far, each file
    /// replaced whole. Under MPI (this process a rank of an MPI job) every rank must call it at
    /// the same point: the events are gathered and rank 0 writes.
    ///
    /// # Errors
    /// [`RuntimeError::Trace`] naming a file that could not be written.
    pub fn flush(&self) -> Result<(), RuntimeError> {
        if self.0.json.is_none() && self.0.svg.is_none() {
            return Ok(());
        }
        let events = self.merged();
        let Some(events) = events else {
            return Ok(());
        };
        let events = with_collectives(events);
        if let Some(p) = &self.0.json {
            write_file(p, &chrome_json(&events))?;
        }
        if let Some(p) = &self.0.svg {
            write_file(p, &svg(&events))?;
        }
        Ok(())
    }

    /// Every rank's events on rank 0 (`None` on the other ranks of an MPI job).
    #[cfg(feature = "mpi")]
    fn merged(&self) -> Option<Vec<Event>> {
        if !crate::mpi_rt::active() {
            return Some(self.events());
        }
        crate::mpi_rt::gather_trace(self)
    }

    #[cfg(not(feature = "mpi"))]
    fn merged(&self) -> Option<Vec<Event>> {
        Some(self.events())
    }
}

/// Runs hook body `f` of `rank` and, when the run records into `trace`, records it as a
/// span of kind `cat` with the arguments `args` gives (from the nanoseconds `f` took) and the
/// op `site` names in `art` (what the executors' communication hooks call).
pub(crate) fn hook_span<R>(
    trace: Option<Trace>,
    art: &eagle_codegen::Artifact,
    rank: usize,
    cat: Cat,
    site: u32,
    f: impl FnOnce() -> R,
    args: impl FnOnce(u64) -> Vec<(&'static str, ArgValue)>,
) -> R {
    let Some(tr) = trace else {
        return f();
    };
    let t0 = tr.now();
    let r = f();
    let end = tr.now();
    let mut a = args(end.saturating_sub(t0));
    if let Some(op) = art.site_text(site) {
        a.push(("op", ArgValue::Text(op.to_string())));
    }
    tr.push(Event {
        track: Track::Rank(rank),
        cat,
        name: cat.name().to_string(),
        start_ns: t0,
        dur_ns: end.saturating_sub(t0),
        args: a,
    });
    r
}

/// When a span starts: now, while `trace` records.
pub(crate) fn start(trace: Option<&Trace>) -> Option<u64> {
    trace.map(Trace::now)
}

/// Records the dispatch of `callee` on `rank` that started at `t0` (from [`start`]).
pub(crate) fn dispatched(trace: Option<&Trace>, rank: usize, callee: &str, t0: Option<u64>) {
    if let (Some(t), Some(t0)) = (trace, t0) {
        let args = vec![("rank", ArgValue::Int(rank as i64))];
        t.span(Track::Rank(rank), Cat::Dispatch, callee, t0, args);
    }
}

/// A compute kernel call at `site` starts (`phase` 0: pushed on `open`) or returns (`phase`
/// 1: popped and recorded, named after the callee): the executors' `trace` hook.
pub(crate) fn kernel_phase(
    trace: Option<&Trace>,
    art: &eagle_codegen::Artifact,
    rank: usize,
    open: &mut Vec<(u32, u64)>,
    site: u32,
    phase: u32,
) {
    let Some(tr) = trace else {
        return;
    };
    if phase == 0 {
        open.push((site, tr.now()));
        return;
    }
    let Some((site, t0)) = open.pop() else {
        return;
    };
    let op = art.site_text(site).unwrap_or("");
    // The callee of `... op `call @name(...)` ...`.
    let name = op
        .split_once("call @")
        .map(|(_, r)| r.split(['(', '`', ' ']).next().unwrap_or(r))
        .unwrap_or("kernel");
    let args = vec![("op", ArgValue::Text(op.to_string()))];
    tr.span(Track::Rank(rank), Cat::Kernel, name, t0, args);
}

fn write_file(p: &std::path::Path, text: &str) -> Result<(), RuntimeError> {
    std::fs::write(p, text).map_err(|e| RuntimeError::Trace {
        path: p.display().to_string(),
        message: e.to_string(),
    })
}

/// The argument names events use; [`decode`] maps a name back to its `&'static str`.
const ARG_NAMES: [&str; 13] = [
    "peer",
    "window",
    "bytes",
    "signal",
    "value",
    "add",
    "until",
    "waited_ns",
    "notified_by",
    "op",
    "rank",
    "events",
    "units",
];

const FIELD: char = '\u{1f}';
const RECORD: char = '\u{1e}';

/// `s` without the separators of [`encode`].
fn clean(s: &str) -> String {
    s.replace([FIELD, RECORD], " ")
}

/// `events` as bytes, for a transport to carry to the rank that writes the files ([`decode`]
/// reads them back).
pub fn encode(events: &[Event]) -> Vec<u8> {
    let mut o = String::new();
    for e in events {
        let (kind, a, b) = match e.track {
            Track::Rank(r) => (0, r, 0),
            Track::Plan { rank, thread } => (1, rank, thread),
        };
        let _ = write!(
            o,
            "{kind}{FIELD}{a}{FIELD}{b}{FIELD}{}{FIELD}{}{FIELD}{}{FIELD}{}",
            e.cat.name(),
            e.start_ns,
            e.dur_ns,
            clean(&e.name)
        );
        for (k, v) in &e.args {
            match v {
                ArgValue::Int(i) => {
                    let _ = write!(o, "{FIELD}{k}{FIELD}i{i}");
                }
                ArgValue::Text(t) => {
                    let _ = write!(o, "{FIELD}{k}{FIELD}t{}", clean(t));
                }
            }
        }
        o.push(RECORD);
    }
    o.into_bytes()
}

/// The events of [`encode`]'s bytes (records it cannot read are left out).
pub fn decode(bytes: &[u8]) -> Vec<Event> {
    let text = String::from_utf8_lossy(bytes);
    let cats = [
        Cat::Dispatch,
        Cat::Kernel,
        Cat::Collective,
        Cat::Put,
        Cat::Get,
        Cat::Notify,
        Cat::Wait,
        Cat::Barrier,
        Cat::Plan,
    ];
    let mut out = Vec::new();
    for rec in text.split(RECORD).filter(|r| !r.is_empty()) {
        let f: Vec<&str> = rec.split(FIELD).collect();
        if f.len() < 7 {
            continue;
        }
        let num = |s: &str| s.parse::<u64>().unwrap_or(0);
        let (a, b) = (num(f[1]) as usize, num(f[2]) as usize);
        let track = if f[0] == "0" {
            Track::Rank(a)
        } else {
            Track::Plan { rank: a, thread: b }
        };
        let Some(cat) = cats.into_iter().find(|c| c.name() == f[3]) else {
            continue;
        };
        let args = f[7..]
            .chunks(2)
            .filter_map(|kv| {
                let k = *ARG_NAMES.iter().find(|n| **n == kv[0])?;
                let v = kv.get(1)?;
                let v = match v.split_at_checked(1)? {
                    ("i", i) => ArgValue::Int(i.parse().ok()?),
                    (_, t) => ArgValue::Text(t.to_string()),
                };
                Some((k, v))
            })
            .collect();
        out.push(Event {
            track,
            cat,
            name: f[6].to_string(),
            start_ns: num(f[4]),
            dur_ns: num(f[5]),
            args,
        });
    }
    out
}

/// The source line of a site's text (``... (at src/x.rs:3:5)``), if it names one.
fn line_of(e: &Event) -> Option<&str> {
    let op = e.args.iter().find_map(|(k, v)| match (k, v) {
        (&"op", ArgValue::Text(t)) => Some(t.as_str()),
        _ => None,
    })?;
    let at = op.rfind("(at ")?;
    Some(op[at + 4..].trim_end_matches(')'))
}

/// `events` with a `collective` span over each run of two or more consecutive communication
/// events of one track from one source line.
pub fn with_collectives(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_by_key(|e| (e.track, e.start_ns, std::cmp::Reverse(e.dur_ns)));
    let mut groups = Vec::new();
    let mut i = 0;
    while i < events.len() {
        let e = &events[i];
        let Some(line) = line_of(e).filter(|_| e.cat.is_comm()) else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        let mut end = e.start_ns + e.dur_ns;
        while j < events.len() {
            let n = &events[j];
            if n.track != e.track {
                break;
            }
            if n.cat.is_comm() {
                if line_of(n) != Some(line) {
                    break;
                }
                end = end.max(n.start_ns + n.dur_ns);
            } else if n.start_ns < end || !matches!(n.cat, Cat::Kernel) {
                // Anything but a kernel call between two of the group's events ends it.
                break;
            }
            j += 1;
        }
        let count = events[i..j].iter().filter(|n| n.cat.is_comm()).count();
        if count >= 2 {
            groups.push(Event {
                track: e.track,
                cat: Cat::Collective,
                name: format!("collective at {line}"),
                start_ns: e.start_ns,
                dur_ns: end - e.start_ns,
                args: vec![("events", ArgValue::Int(count as i64))],
            });
        }
        i = j;
    }
    events.extend(groups);
    events.sort_by_key(|e| (e.track, e.start_ns, std::cmp::Reverse(e.dur_ns)));
    events
}

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn pid_tid(t: Track) -> (usize, usize) {
    match t {
        Track::Rank(r) => (0, r),
        Track::Plan { rank, thread } => (1 + rank, thread),
    }
}

/// The Chrome trace-event JSON of `events`: a complete event (`"ph": "X"`) per span, times in
/// microseconds, and the process and thread names of every track.
pub fn chrome_json(events: &[Event]) -> String {
    let mut o = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    let mut tracks: Vec<Track> = events.iter().map(|e| e.track).collect();
    tracks.sort();
    tracks.dedup();
    let mut first = true;
    let mut sep = |o: &mut String| {
        if !std::mem::take(&mut first) {
            o.push_str(",\n");
        }
    };
    let mut pids: Vec<usize> = Vec::new();
    for t in &tracks {
        let (pid, tid) = pid_tid(*t);
        if !pids.contains(&pid) {
            pids.push(pid);
            let name = match t {
                Track::Rank(_) => "ranks".to_string(),
                Track::Plan { rank, .. } => format!("plan workers of rank {rank}"),
            };
            sep(&mut o);
            let _ = write!(
                o,
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":{}}}}}",
                json_str(&name)
            );
        }
        let name = match t {
            Track::Rank(r) => format!("rank {r}"),
            Track::Plan { thread, .. } => format!("worker {thread}"),
        };
        sep(&mut o);
        let _ = write!(
            o,
            "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
            json_str(&name)
        );
    }
    for e in events {
        let (pid, tid) = pid_tid(e.track);
        sep(&mut o);
        let _ = write!(
            o,
            "{{\"ph\":\"X\",\"name\":{},\"cat\":\"{}\",\"pid\":{pid},\"tid\":{tid},\"ts\":{:.3},\"dur\":{:.3},\"args\":{{",
            json_str(&e.name),
            e.cat.name(),
            e.start_ns as f64 / 1e3,
            e.dur_ns as f64 / 1e3,
        );
        for (k, (name, v)) in e.args.iter().enumerate() {
            if k > 0 {
                o.push(',');
            }
            let v = match v {
                ArgValue::Int(i) => i.to_string(),
                ArgValue::Text(t) => json_str(t),
            };
            let _ = write!(o, "{}:{v}", json_str(name));
        }
        o.push_str("}}");
    }
    o.push_str("\n]}\n");
    o
}

/// `s` escaped for SVG text.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG swimlane picture of `events`: a lane per track, spans nested by depth, colour by
/// kind, each span's name and arguments in its tooltip, and a time axis.
pub fn svg(events: &[Event]) -> String {
    const LEFT: f64 = 170.0;
    const WIDTH: f64 = 1100.0;
    const ROW: f64 = 16.0;
    let t0 = events.iter().map(|e| e.start_ns).min().unwrap_or(0);
    let t1 = events
        .iter()
        .map(|e| e.start_ns + e.dur_ns)
        .max()
        .unwrap_or(1)
        .max(t0 + 1);
    let x = |t: u64| LEFT + (t - t0) as f64 / (t1 - t0) as f64 * WIDTH;
    let mut tracks: Vec<Track> = events.iter().map(|e| e.track).collect();
    tracks.sort();
    tracks.dedup();
    let mut body = String::new();
    let mut y = 30.0;
    for t in &tracks {
        // Depth by nesting: a span inside the one before it goes a row lower.
        let mut open: Vec<u64> = Vec::new();
        let mut rows = 1;
        let mut lane = String::new();
        for e in events.iter().filter(|e| e.track == *t) {
            while open.last().is_some_and(|&end| end <= e.start_ns) {
                open.pop();
            }
            let depth = open.len();
            open.push(e.start_ns + e.dur_ns);
            rows = rows.max(depth + 1);
            let (x0, x1) = (x(e.start_ns), x(e.start_ns + e.dur_ns));
            let w = (x1 - x0).max(0.5);
            let ry = y + depth as f64 * ROW;
            let mut tip = format!(
                "{} ({}): {:.3} us",
                e.name,
                e.cat.name(),
                e.dur_ns as f64 / 1e3
            );
            for (k, v) in &e.args {
                let v = match v {
                    ArgValue::Int(i) => i.to_string(),
                    ArgValue::Text(s) => s.clone(),
                };
                let _ = write!(tip, "\n{k}: {v}");
            }
            let _ = writeln!(
                lane,
                "<rect x=\"{x0:.2}\" y=\"{ry:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{}\" stroke=\"#444\" stroke-width=\"0.3\"><title>{}</title></rect>",
                ROW - 2.0,
                e.cat.colour(),
                xml(&tip)
            );
            if w > 7.0 * e.name.len().min(40) as f64 * 0.85 {
                let _ = writeln!(
                    lane,
                    "<text x=\"{:.2}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
                    x0 + 2.0,
                    ry + ROW - 5.0,
                    xml(&e.name)
                );
            }
        }
        let label = match t {
            Track::Rank(r) => format!("rank {r}"),
            Track::Plan { rank, thread } => format!("rank {rank} worker {thread}"),
        };
        let h = rows as f64 * ROW;
        let _ = writeln!(
            body,
            "<rect x=\"0\" y=\"{:.1}\" width=\"{:.0}\" height=\"{h:.1}\" fill=\"#f4f4f4\"/>\n<text x=\"6\" y=\"{:.1}\" font-size=\"12\">{}</text>",
            y - 1.0,
            LEFT + WIDTH + 10.0,
            y + 12.0,
            xml(&label)
        );
        body.push_str(&lane);
        y += h + 8.0;
    }
    // The time axis: five ticks.
    let mut axis = String::new();
    for k in 0..=5 {
        let t = t0 + (t1 - t0) * k / 5;
        let xt = x(t);
        let _ = writeln!(
            axis,
            "<line x1=\"{xt:.1}\" y1=\"18\" x2=\"{xt:.1}\" y2=\"{y:.1}\" stroke=\"#bbb\" stroke-width=\"0.5\"/><text x=\"{xt:.1}\" y=\"14\" font-size=\"10\" text-anchor=\"middle\">{:.1} us</text>",
            (t - t0) as f64 / 1e3
        );
    }
    let mut legend = String::new();
    for (k, c) in [
        Cat::Dispatch,
        Cat::Kernel,
        Cat::Collective,
        Cat::Put,
        Cat::Notify,
        Cat::Wait,
        Cat::Plan,
    ]
    .into_iter()
    .enumerate()
    {
        let lx = LEFT + k as f64 * 110.0;
        let name = match c {
            Cat::Put => "put/get",
            Cat::Wait => "wait/barrier",
            c => c.name(),
        };
        let _ = writeln!(
            legend,
            "<rect x=\"{lx:.0}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.0}\" y=\"{:.1}\" font-size=\"11\">{name}</text>",
            y + 4.0,
            c.colour(),
            lx + 16.0,
            y + 14.0
        );
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{:.0}\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n{axis}{body}{legend}</svg>\n",
        LEFT + WIDTH + 20.0,
        y + 30.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(track: Track, cat: Cat, start: u64, dur: u64, at: &str) -> Event {
        Event {
            track,
            cat,
            name: cat.name().into(),
            start_ns: start,
            dur_ns: dur,
            args: vec![("op", ArgValue::Text(format!("op `x` (at {at})")))],
        }
    }

    #[test]
    fn consecutive_communication_from_one_line_is_one_collective() {
        let r0 = Track::Rank(0);
        let events = vec![
            ev(r0, Cat::Put, 10, 5, "a.rs:3:5"),
            ev(r0, Cat::Wait, 20, 30, "a.rs:3:5"),
            ev(r0, Cat::Put, 60, 5, "a.rs:9:5"),
            ev(Track::Rank(1), Cat::Put, 10, 5, "a.rs:3:5"),
        ];
        let out = with_collectives(events);
        let c: Vec<_> = out.iter().filter(|e| e.cat == Cat::Collective).collect();
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].track, c[0].start_ns, c[0].dur_ns, c[0].name.as_str()),
            (r0, 10, 40, "collective at a.rs:3:5")
        );
        assert_eq!(c[0].args, vec![("events", ArgValue::Int(2))]);
    }

    #[test]
    fn events_survive_the_transport_encoding() {
        let mut e = ev(
            Track::Plan { rank: 2, thread: 3 },
            Cat::Wait,
            7,
            9,
            "b.rs:1:1",
        );
        e.args.push(("waited_ns", ArgValue::Int(-4)));
        let d = ev(Track::Rank(1), Cat::Dispatch, 1, 100, "c.rs:2:2");
        assert_eq!(decode(&encode(&[e.clone(), d.clone()])), vec![e, d]);
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}
