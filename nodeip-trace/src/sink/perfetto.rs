//! Perfetto / Chrome trace-event JSON (`--format perfetto`): the timeline as a trace that
//! ui.perfetto.dev (and `chrome://tracing`-style viewers) open — one object
//! `{"traceEvents":[…],"displayTimeUnit":"ms","otherData":{…}}`, written as the events come
//! (bounded memory: names and open slices per thread, nothing per event).
//!
//! - each process is a Perfetto process (`process_name` metadata: comm, and its pod/container or
//!   systemd unit when the event's attribution has them), each thread a thread (`thread_name`);
//!   a capture without attribution gets one process per netlink port (`netlink port N`);
//! - resolver calls (getaddrinfo, musl, Go) and netlink request→reply conversations are complete
//!   slices (`X`, with `dur`) on the thread that made them; the other events of a process
//!   (unpaired netlink buffers, extended acks) are instants on its thread;
//! - the kernel is a process of its own (`kernel`, pid [`KERNEL_PID`]) with one thread per
//!   requesting thread: the kernel's answer to each conversation (a slice over the same time,
//!   joined to the request by a flow: `bind_id` with `flow_out` on the request and `flow_in` on
//!   the answer, Perfetto's v2 flows), kernel handler calls (slices), route lookups (instants);
//! - diagnoses are global instants (`ph:"i"`, `s:"g"`), lost records too;
//! - `ts` is in µs from the trace's start (the recording header, else the first event), so the
//!   double a viewer reads keeps nanoseconds; `otherData` says when that start was.
//!
//! Slices on one thread must nest (Perfetto's JSON importer drops the depth of a slice that
//! overlaps another partially): a slice that would overlap one of its thread's slices partially,
//! or start with it, goes to an extra thread of the same process, named for it, instead.
use std::collections::HashMap;
use std::io::Write;

use serde_json::{json, Map, Value};

use super::view::wording::{container_label, render_answer, write_event_body};
use super::view::{present, Presentation};
use super::{EventSink, SinkError};
use crate::model::event::{ConversationOutcome, Event, EventBody, RecordingHeader, RunSummary};

/// The pid of the synthetic `kernel` process: above the kernel's `PID_MAX_LIMIT` (2²²), so no
/// real process has it. The synthetic threads (the kernel's, extra threads for overlapping
/// slices, netlink ports of a capture) are numbered upwards from it.
pub const KERNEL_PID: u32 = (1 << 22) + 1;

/// Who an event's slices and instants belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Actor {
    /// A traced process's thread.
    Thread { pid: u32, tid: u32 },
    /// A netlink port of a capture without attribution (`u32::MAX`: no port either).
    Port(u32),
}

/// One open slice on a thread: its start and end, in ns.
type Interval = (u64, u64);

/// A thread's lanes: the thread itself, then the extra threads of its overlapping slices, each
/// with its tid and the stack of its slices still open at the last one placed.
type Lanes = Vec<(u32, Vec<Interval>)>;

/// Where and what a complete slice is.
struct Slice<'a> {
    pid: u32,
    tid: u32,
    start: u64,
    dur: u64,
    name: &'a str,
    cat: &'a str,
}

/// Writes the timeline as Perfetto / Chrome trace-event JSON.
pub struct PerfettoSink<W: Write> {
    out: W,
    name: String,
    flush_each: bool,
    /// Whether `{"traceEvents":[` is written, and whether an event followed it.
    opened: bool,
    wrote_event: bool,
    /// The trace's start (ns, the events' clock).
    origin_ns: Option<u64>,
    header: Option<Box<RecordingHeader>>,
    summary: Option<RunSummary>,
    /// The names given so far, to emit metadata once (and again when a name changes).
    process_names: HashMap<u32, String>,
    thread_names: HashMap<(u32, u32), String>,
    /// Synthetic pids of netlink ports; synthetic kernel tids of requesting threads.
    ports: HashMap<u32, u32>,
    kernel_threads: HashMap<Actor, u32>,
    /// Per thread (pid, tid): its lanes.
    lanes: HashMap<(u32, u32), Lanes>,
    next_synthetic: u32,
    next_flow: u64,
}

impl<W: Write> PerfettoSink<W> {
    /// A sink writing to `out`; `name` appears in error messages; `flush_each` flushes per event
    /// (for terminals and pipes).
    pub fn new(out: W, name: impl Into<String>, flush_each: bool) -> Self {
        Self {
            out,
            name: name.into(),
            flush_each,
            opened: false,
            wrote_event: false,
            origin_ns: None,
            header: None,
            summary: None,
            process_names: HashMap::new(),
            thread_names: HashMap::new(),
            ports: HashMap::new(),
            kernel_threads: HashMap::new(),
            lanes: HashMap::new(),
            next_synthetic: KERNEL_PID + 1,
            next_flow: 1,
        }
    }

    fn io(&self, source: std::io::Error) -> SinkError {
        SinkError::Io {
            what: self.name.clone(),
            source,
        }
    }

    /// Writes one trace event (opening the object first).
    fn emit(&mut self, event: &Value) -> Result<(), SinkError> {
        let prefix: &[u8] = match (self.opened, self.wrote_event) {
            (false, _) => b"{\"traceEvents\":[\n",
            (true, false) => b"",
            (true, true) => b",\n",
        };
        self.opened = true;
        self.wrote_event = true;
        self.out.write_all(prefix).map_err(|e| self.io(e))?;
        serde_json::to_writer(&mut self.out, event)?;
        Ok(())
    }

    /// `ns` as µs from the trace's start.
    fn micros(&self, ns: u64) -> f64 {
        let origin = self.origin_ns.unwrap_or(ns);
        (i128::from(ns) - i128::from(origin)) as f64 / 1000.0
    }

    fn metadata(&mut self, kind: &str, pid: u32, tid: u32, name: &str) -> Result<(), SinkError> {
        self.emit(&json!({
            "ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name},
        }))
    }

    fn name_process(&mut self, pid: u32, name: String) -> Result<(), SinkError> {
        if self.process_names.get(&pid) != Some(&name) {
            self.metadata("process_name", pid, pid, &name)?;
            self.process_names.insert(pid, name);
        }
        Ok(())
    }

    fn name_thread(&mut self, pid: u32, tid: u32, name: String) -> Result<(), SinkError> {
        if self.thread_names.get(&(pid, tid)) != Some(&name) {
            self.metadata("thread_name", pid, tid, &name)?;
            self.thread_names.insert((pid, tid), name);
        }
        Ok(())
    }

    fn synthetic(&mut self) -> u32 {
        let id = self.next_synthetic;
        self.next_synthetic = self.next_synthetic.wrapping_add(1).max(KERNEL_PID + 1);
        id
    }

    /// Who made `e`, with its process and thread named.
    fn actor(&mut self, e: &Event) -> Result<Option<(Actor, u32, u32)>, SinkError> {
        let port = match &e.body {
            EventBody::Netlink(n) => n.portid,
            EventBody::Conversation(c) => c.portid,
            _ => None,
        };
        if e.pid == 0 && e.comm.is_empty() {
            let port = match (&e.body, port) {
                (_, Some(port)) => port,
                (EventBody::Netlink(_) | EventBody::Conversation(_), None) => u32::MAX,
                _ => return Ok(None),
            };
            let pid = match self.ports.get(&port) {
                Some(&pid) => pid,
                None => {
                    let pid = self.synthetic();
                    self.ports.insert(port, pid);
                    pid
                }
            };
            let name = match port {
                u32::MAX => "netlink, no port known".to_string(),
                port => format!("netlink port {port}"),
            };
            self.name_process(pid, name.clone())?;
            self.name_thread(pid, pid, name)?;
            return Ok(Some((Actor::Port(port), pid, pid)));
        }
        let mut process = e.comm.to_string();
        if let Some(p) = &e.process {
            if let Some(c) = &p.identity.container {
                process = format!("{process} ({})", container_label(c));
            } else if let Some(unit) = &p.identity.unit {
                process = format!("{process} ({unit})");
            }
        }
        self.name_process(e.pid, process)?;
        self.name_thread(e.pid, e.tid, e.comm.to_string())?;
        Ok(Some((
            Actor::Thread {
                pid: e.pid,
                tid: e.tid,
            },
            e.pid,
            e.tid,
        )))
    }

    /// The kernel's thread answering `actor` (named `kernel ← comm[tid]`).
    fn kernel_thread(&mut self, actor: Actor, e: &Event) -> Result<u32, SinkError> {
        self.name_process(KERNEL_PID, "kernel".into())?;
        if let Some(&tid) = self.kernel_threads.get(&actor) {
            return Ok(tid);
        }
        let tid = self.synthetic();
        self.kernel_threads.insert(actor, tid);
        let whom = match actor {
            Actor::Thread { tid: t, .. } => format!("{}[{t}]", e.comm),
            Actor::Port(u32::MAX) => "an unknown port".into(),
            Actor::Port(port) => format!("port {port}"),
        };
        self.name_thread(KERNEL_PID, tid, format!("kernel ← {whom}"))?;
        Ok(tid)
    }

    /// The thread (`tid`, or an extra thread of `pid`) a slice `[start, end]` nests on.
    fn place(&mut self, pid: u32, tid: u32, start: u64, end: u64) -> Result<u32, SinkError> {
        let lanes = self
            .lanes
            .entry((pid, tid))
            .or_insert_with(|| vec![(tid, Vec::new())]);
        for (lane_tid, open) in lanes.iter_mut() {
            // Slices that ended before this one starts are done (a slice of no length that
            // started with it is not: the two would share a timestamp).
            while open
                .last()
                .is_some_and(|&(s, e)| e < start || (e == start && s < start))
            {
                open.pop();
            }
            let nests = open.last().is_none_or(|&(s, e)| s < start && end <= e);
            if nests {
                open.push((start, end));
                return Ok(*lane_tid);
            }
        }
        let count = lanes.len();
        let extra = self.synthetic();
        if let Some(lanes) = self.lanes.get_mut(&(pid, tid)) {
            lanes.push((extra, vec![(start, end)]));
        }
        let base = self
            .thread_names
            .get(&(pid, tid))
            .cloned()
            .unwrap_or_default();
        self.name_thread(pid, extra, format!("{base} [{tid}] overlapping {count}"))?;
        Ok(extra)
    }

    /// A complete slice on its thread (nested as [`Self::place`] says), with a flow's end
    /// (`flow_out` or `flow_in`) when given.
    fn slice(&mut self, s: Slice, args: Value, flow: Option<(u64, &str)>) -> Result<(), SinkError> {
        let tid = self.place(s.pid, s.tid, s.start, s.start.saturating_add(s.dur))?;
        let mut event = json!({
            "ph": "X", "name": s.name, "cat": s.cat, "pid": s.pid, "tid": tid,
            "ts": self.micros(s.start), "dur": s.dur as f64 / 1000.0, "args": args,
        });
        if let (Some((id, direction)), Some(fields)) = (flow, event.as_object_mut()) {
            fields.insert("bind_id".into(), json!(id));
            fields.insert(direction.into(), json!(true));
        }
        self.emit(&event)
    }

    /// An instant on a thread.
    fn instant(
        &mut self,
        pid: u32,
        tid: u32,
        ts: u64,
        name: &str,
        cat: &str,
    ) -> Result<(), SinkError> {
        let event = json!({
            "ph": "i", "s": "t", "name": name, "cat": cat, "pid": pid, "tid": tid,
            "ts": self.micros(ts),
        });
        self.emit(&event)
    }

    /// A global instant (diagnoses, losses), on the kernel process so every pid is named.
    fn global(&mut self, ts: u64, name: &str, cat: &str, args: Value) -> Result<(), SinkError> {
        self.name_process(KERNEL_PID, "kernel".into())?;
        self.name_thread(KERNEL_PID, KERNEL_PID, "kernel".into())?;
        let event = json!({
            "ph": "i", "s": "g", "name": name, "cat": cat, "pid": KERNEL_PID, "tid": KERNEL_PID,
            "ts": self.micros(ts), "args": args,
        });
        self.emit(&event)
    }

    fn write_timeline_event(&mut self, e: &Event) -> Result<(), SinkError> {
        if self.origin_ns.is_none() {
            self.origin_ns = Some(start_ns(e));
        }
        match present(e) {
            Presentation::Hidden => {
                match &e.body {
                    EventBody::Header(h) => self.header = Some(h.clone()),
                    EventBody::Summary(s) => self.summary = Some(s.clone()),
                    _ => {}
                }
                Ok(())
            }
            Presentation::Diagnosis(d) => {
                let args = json!({
                    "summary": d.summary, "evidence": d.evidence, "remedy": d.remedy,
                    "by": format!("{}[{}]", e.comm, e.pid),
                });
                let name = format!("{} {}", d.severity.upper(), d.id);
                self.global(e.ts_ns, &name, "diagnosis", args)
            }
            Presentation::Line(e) => self.write_line(e),
        }
    }

    fn write_line(&mut self, e: &Event) -> Result<(), SinkError> {
        let text = body_text(e);
        if let EventBody::Lost(l) = &e.body {
            return self.global(e.ts_ns, &text, "lost", json!({"counts": l.counts}));
        }
        let Some((actor, pid, tid)) = self.actor(e)? else {
            return Ok(());
        };
        let args = event_args(e, &text);
        match &e.body {
            EventBody::Getaddrinfo(c) => {
                let label = text.split('(').next().unwrap_or("getaddrinfo").trim();
                let node = c.node.as_deref().unwrap_or("NULL");
                let name = format!("{label}(\"{node}\") → [{}]", c.addresses.join(", "));
                self.slice(
                    Slice {
                        pid,
                        tid,
                        start: c.start_ns,
                        dur: c.duration_ns,
                        name: &name,
                        cat: "resolver",
                    },
                    args,
                    None,
                )
            }
            EventBody::Conversation(c) => {
                let request = text.split(" → ").next().unwrap_or(&text).to_string();
                let answered = !matches!(c.outcome, ConversationOutcome::NoReply);
                let flow = answered.then(|| {
                    self.next_flow += 1;
                    self.next_flow - 1
                });
                let out = flow.map(|id| (id, "flow_out"));
                self.slice(
                    Slice {
                        pid,
                        tid,
                        start: e.ts_ns,
                        dur: c.duration_ns,
                        name: &request,
                        cat: "netlink",
                    },
                    args,
                    out,
                )?;
                if let Some(id) = flow {
                    let kernel = self.kernel_thread(actor, e)?;
                    let answer = format!("{request} → {}", render_answer(c));
                    let args = json!({"answer": answer});
                    let flow = Some((id, "flow_in"));
                    self.slice(
                        Slice {
                            pid: KERNEL_PID,
                            tid: kernel,
                            start: e.ts_ns,
                            dur: c.duration_ns,
                            name: &answer,
                            cat: "netlink",
                        },
                        args,
                        flow,
                    )?;
                }
                Ok(())
            }
            EventBody::KernelHandler(k) => {
                let kernel = self.kernel_thread(actor, e)?;
                let start = e.ts_ns.saturating_sub(k.duration_ns);
                let name = k.function.clone();
                self.slice(
                    Slice {
                        pid: KERNEL_PID,
                        tid: kernel,
                        start,
                        dur: k.duration_ns,
                        name: &name,
                        cat: "kernel",
                    },
                    args,
                    None,
                )
            }
            EventBody::RouteLookup(_) => {
                let kernel = self.kernel_thread(actor, e)?;
                self.instant(KERNEL_PID, kernel, e.ts_ns, &text, "route")
            }
            _ => self.instant(pid, tid, e.ts_ns, &text, e.body.kind()),
        }
    }
}

/// When `e` began (a call's entry, a kernel handler's entry; else its timestamp).
fn start_ns(e: &Event) -> u64 {
    match &e.body {
        EventBody::Getaddrinfo(c) => c.start_ns.min(e.ts_ns),
        EventBody::KernelHandler(k) => e.ts_ns.saturating_sub(k.duration_ns),
        _ => e.ts_ns,
    }
}

/// What the text timeline says of `e` (without time and process).
fn body_text(e: &Event) -> String {
    let mut text = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_event_body(&mut text, e);
    String::from_utf8_lossy(&text).into_owned()
}

/// A slice's details: the timeline's line, the wall-clock time, and who (the attribution).
fn event_args(e: &Event, text: &str) -> Value {
    let mut args = Map::new();
    args.insert("event".into(), json!(text));
    args.insert("time".into(), json!(e.ts));
    if let EventBody::Getaddrinfo(c) = &e.body {
        if let Some(why) = &c.why {
            let lines = super::view::wording::render_why(c.resolver, why);
            args.insert("why".into(), json!(lines));
        }
    }
    if let Some(p) = &e.process {
        if let Ok(who) = serde_json::to_value(p.as_ref()) {
            args.insert("process".into(), who);
        }
    }
    Value::Object(args)
}

impl<W: Write> EventSink for PerfettoSink<W> {
    fn event(&mut self, event: &Event) -> Result<(), SinkError> {
        self.write_timeline_event(event)?;
        if self.flush_each {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.out.flush().map_err(|e| self.io(e))
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        if !self.opened {
            self.out
                .write_all(b"{\"traceEvents\":[")
                .map_err(|e| self.io(e))?;
            self.opened = true;
        }
        let mut other = Map::new();
        other.insert(
            "ts".into(),
            json!("µs since the trace's start (trace_start_ns, the events' ts_ns clock)"),
        );
        if let Some(origin) = self.origin_ns {
            other.insert("trace_start_ns".into(), json!(origin));
        }
        if let Some(h) = &self.header {
            other.insert("host".into(), json!(h.host));
            other.insert("kernel".into(), json!(h.kernel));
            other.insert("tool_version".into(), json!(h.tool_version));
            other.insert("clock_offset_ns".into(), json!(h.clock_offset_ns));
        }
        if let Some(s) = &self.summary {
            other.insert("events".into(), json!(s.events));
            other.insert("lost".into(), json!(s.lost));
        }
        self.out.write_all(b"\n],").map_err(|e| self.io(e))?;
        let tail = json!({"displayTimeUnit": "ms", "otherData": other});
        // The tail object's fields, after the array: `"displayTimeUnit":…,"otherData":…}`.
        let tail = tail.to_string();
        self.out
            .write_all(&tail.as_bytes()[1..])
            .map_err(|e| self.io(e))?;
        self.out.write_all(b"\n").map_err(|e| self.io(e))?;
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 002's recording: a header, conversations, a diagnosis (tests/fixtures/seeds).
    const SEED_002: &str =
        include_str!("../../../tests/fixtures/seeds/002-secondary-address-skipped.jsonl");

    fn events() -> Vec<Event> {
        SEED_002
            .lines()
            .map(|l| serde_json::from_str(l).expect("a seed recording line"))
            .collect()
    }

    fn trace_of(events: &[Event]) -> Value {
        let mut out = Vec::new();
        let mut sink = PerfettoSink::new(&mut out, "memory", false);
        for e in events {
            sink.event(e).unwrap();
        }
        sink.finish().unwrap();
        drop(sink);
        serde_json::from_slice(&out).expect("one JSON object")
    }

    fn of_phase<'a>(trace: &'a Value, ph: &str) -> Vec<&'a Value> {
        trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == ph)
            .collect()
    }

    #[test]
    fn nothing_in_is_an_empty_trace() {
        let trace = trace_of(&[]);
        assert_eq!(trace["traceEvents"], json!([]));
        assert_eq!(trace["displayTimeUnit"], "ms");
    }

    #[test]
    fn times_start_at_the_header_and_conversations_flow_to_the_kernel() {
        let trace = trace_of(&events());
        let slices = of_phase(&trace, "X");
        let requests: Vec<&&Value> = slices.iter().filter(|s| s["flow_out"] == true).collect();
        let answers: Vec<&&Value> = slices.iter().filter(|s| s["flow_in"] == true).collect();
        assert_eq!(requests.len(), answers.len());
        assert!(!requests.is_empty());
        for (request, answer) in requests.iter().zip(&answers) {
            assert_eq!(request["bind_id"], answer["bind_id"]);
            assert_eq!(answer["pid"], KERNEL_PID);
            assert_ne!(request["pid"], KERNEL_PID);
        }
        let header_ts = events()[0].ts_ns;
        let first = &events()[1];
        let expected = (first.ts_ns - header_ts) as f64 / 1000.0;
        assert!(
            slices.iter().any(|s| s["ts"] == json!(expected)),
            "{trace:#}"
        );
        let diagnoses = of_phase(&trace, "i");
        assert_eq!(diagnoses.len(), 1);
        assert_eq!(diagnoses[0]["s"], "g");
        assert_eq!(diagnoses[0]["name"], "WARNING secondary-address-skipped");
    }

    /// Two conversations of one thread that overlap partially (two sockets, one request each,
    /// both answered later) cannot nest: the second goes to an extra thread of the process.
    #[test]
    fn a_partially_overlapping_conversation_goes_to_an_extra_thread() {
        let mut conversations: Vec<Event> = events()
            .into_iter()
            .filter(|e| matches!(e.body, EventBody::Conversation(_)))
            .take(2)
            .collect();
        assert_eq!(conversations.len(), 2);
        let start = conversations[0].ts_ns;
        for (i, e) in conversations.iter_mut().enumerate() {
            e.ts_ns = start + 50_000 * i as u64;
            if let EventBody::Conversation(c) = &mut e.body {
                c.duration_ns = 100_000;
            }
        }
        let trace = trace_of(&conversations);
        let pid = conversations[0].pid;
        let tids: Vec<&Value> = of_phase(&trace, "X")
            .into_iter()
            .filter(|s| s["pid"] == pid)
            .map(|s| &s["tid"])
            .collect();
        assert_eq!(tids.len(), 2);
        assert_eq!(tids[0], &json!(conversations[0].tid));
        assert_ne!(tids[1], tids[0]);
        let named = of_phase(&trace, "M")
            .into_iter()
            .any(|m| &m["tid"] == tids[1] && m["name"] == "thread_name");
        assert!(named, "{trace:#}");
    }
}
