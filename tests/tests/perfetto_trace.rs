//! `--format perfetto` (issue 19): the Chrome trace-event JSON that ui.perfetto.dev opens, checked
//! for what Perfetto's JSON importer needs, on real inputs — each seed recording (`replay`), each
//! nlmon capture (`analyze`), and a live `trace` of seed 000:
//! - one JSON object `{"traceEvents": […], "displayTimeUnit": "ms"}`;
//! - every pid and (pid, tid) used has `process_name` / `thread_name` metadata;
//! - every `X` has a `dur` ≥ 0; slices on one thread nest (none overlaps another partially) and
//!   no two start together (Perfetto's depth breaks on equal timestamps);
//! - every flow (`bind_id` + `flow_out`) has exactly one end (`flow_in`) on another track, not
//!   before it;
//! - timestamps are relative to the start: none negative, the first within a minute;
//! - each resolver call and each conversation is a slice, each diagnosis a global instant.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

use nodeip_trace_tests::seeds::{in_ns, layout, INCIDENTS};
use nodeip_trace_tests::{json_lines, require_root, run_ok, tool, workspace_root, ScratchDir};
use serde_json::Value;

/// `nodeip-trace ARGS FILE`'s stdout, failing with its stderr.
fn run(args: &[&str], file: &Path) -> Vec<u8> {
    run_ok(Command::new(tool()).args(args).arg(file)).stdout
}

fn num(e: &Value, field: &str) -> f64 {
    e[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number: {e}"))
}

fn track(e: &Value) -> (u64, u64) {
    let id = |f: &str| {
        e[f].as_u64()
            .unwrap_or_else(|| panic!("{f} is not an unsigned number: {e}"))
    };
    (id("pid"), id("tid"))
}

/// Checks Perfetto's invariants on `trace` (the JSON text), given the JSON-lines `events` it was
/// made from; `what` names the input in failures.
fn assert_perfetto_invariants(what: &str, trace: &[u8], events: &[Value]) {
    let trace: Value = serde_json::from_slice(trace)
        .unwrap_or_else(|e| panic!("{what}: not one JSON object ({e})"));
    assert_eq!(trace["displayTimeUnit"], "ms", "{what}");
    let items = trace["traceEvents"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no traceEvents array"));

    let mut processes = BTreeSet::new();
    let mut threads = BTreeSet::new();
    for m in items.iter().filter(|e| e["ph"] == "M") {
        let name = m["args"]["name"].as_str().unwrap_or_default();
        assert!(!name.is_empty(), "{what}: metadata without a name: {m}");
        match m["name"].as_str() {
            Some("process_name") => processes.insert(track(m).0),
            Some("thread_name") => threads.insert(track(m)),
            _ => panic!("{what}: unexpected metadata {m}"),
        };
    }

    let mut slices: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut flows_out: HashMap<u64, ((u64, u64), f64)> = HashMap::new();
    let mut flows_in: HashMap<u64, ((u64, u64), f64)> = HashMap::new();
    let mut first_ts = f64::INFINITY;
    let mut global_instants = Vec::new();
    for e in items.iter().filter(|e| e["ph"] != "M") {
        let at = track(e);
        assert!(
            processes.contains(&at.0),
            "{what}: pid {} has no process_name: {e}",
            at.0
        );
        assert!(
            threads.contains(&at),
            "{what}: {at:?} has no thread_name: {e}"
        );
        let ts = num(e, "ts");
        assert!(ts >= 0.0, "{what}: a negative ts: {e}");
        first_ts = first_ts.min(ts);
        assert!(
            e["name"].as_str().is_some_and(|n| !n.is_empty()),
            "{what}: no name: {e}"
        );
        match e["ph"].as_str() {
            Some("X") => {
                let dur = num(e, "dur");
                assert!(dur >= 0.0, "{what}: negative dur: {e}");
                slices.entry(at).or_default().push((ts, ts + dur));
                if let Some(id) = e["bind_id"].as_u64() {
                    let side = match (e["flow_out"] == true, e["flow_in"] == true) {
                        (true, false) => &mut flows_out,
                        (false, true) => &mut flows_in,
                        _ => panic!("{what}: a bind_id that is neither flow_out nor flow_in: {e}"),
                    };
                    assert!(
                        side.insert(id, (at, ts)).is_none(),
                        "{what}: flow {id} twice: {e}"
                    );
                }
            }
            Some("i") => match e["s"].as_str() {
                Some("t") => {}
                Some("g") => global_instants.push(e),
                _ => panic!("{what}: an instant of an unknown scope: {e}"),
            },
            _ => panic!("{what}: an event of an unexpected phase: {e}"),
        }
    }
    // Relative to the start: a live trace's header comes before its probes attach, so its first
    // event may come seconds later; an absolute ts would be ~1e10 µs (monotonic) or ~1e15 (wall).
    if !items.iter().all(|e| e["ph"] == "M") {
        assert!(
            first_ts < 6e7,
            "{what}: the first ts is {first_ts} µs: not relative to the start"
        );
    }

    for (at, list) in &mut slices {
        list.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut open: Vec<(f64, f64)> = Vec::new();
        for &(start, end) in list.iter() {
            while open.last().is_some_and(|&(_, e)| e <= start) {
                open.pop();
            }
            if let Some(&(s, e)) = open.last() {
                assert!(
                    end <= e && s < start,
                    "{what}: on {at:?} the slice [{start}, {end}] overlaps [{s}, {e}] without nesting in it"
                );
            }
            open.push((start, end));
        }
        let starts: BTreeSet<u64> = list.iter().map(|s| s.0.to_bits()).collect();
        assert_eq!(
            starts.len(),
            list.len(),
            "{what}: two slices on {at:?} start together"
        );
    }

    let outs: BTreeSet<&u64> = flows_out.keys().collect();
    let ins: BTreeSet<&u64> = flows_in.keys().collect();
    assert_eq!(outs, ins, "{what}: flows without both ends");
    for (id, (from, ts)) in &flows_out {
        let (to, end) = flows_in[id];
        assert_ne!(*from, to, "{what}: flow {id} stays on its track");
        assert!(end >= *ts, "{what}: flow {id} ends before it starts");
    }

    let count = |kind: &str| events.iter().filter(|e| e["kind"] == kind).count();
    let slices_of = |cat: &str| {
        items
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat && e["flow_in"] != true)
            .count()
    };
    assert_eq!(
        slices_of("resolver"),
        count("getaddrinfo"),
        "{what}: resolver calls"
    );
    assert_eq!(
        slices_of("netlink"),
        count("conversation"),
        "{what}: conversations"
    );
    let diagnoses: Vec<&str> = global_instants
        .iter()
        .filter(|e| e["cat"] == "diagnosis")
        .filter_map(|e| e["name"].as_str())
        .collect();
    let expected: Vec<String> = events
        .iter()
        .filter(|e| e["kind"] == "diagnosis")
        .map(|d| {
            let severity = d["severity"].as_str().unwrap_or_default().to_uppercase();
            format!("{severity} {}", d["id"].as_str().unwrap_or_default())
        })
        .collect();
    assert_eq!(diagnoses, expected, "{what}: diagnoses as global instants");
}

#[test]
fn seed_recordings_replay_as_perfetto_traces() {
    for incident in &INCIDENTS {
        let file = workspace_root().join(format!("tests/fixtures/seeds/{}.jsonl", incident.name));
        let trace = run(&["replay", "--format", "perfetto"], &file);
        let events = json_lines(&std::fs::read(&file).expect("reading a seed recording"));
        assert_perfetto_invariants(incident.name, &trace, &events);
        let trace: Value = serde_json::from_slice(&trace).unwrap();
        // Named processes: the command's, and the kernel answering it.
        let names: BTreeSet<&str> = trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "process_name")
            .filter_map(|e| e["args"]["name"].as_str())
            .collect();
        assert!(names.contains("kernel"), "{}: {names:?}", incident.name);
        assert!(names.len() >= 2, "{}: {names:?}", incident.name);
        assert_eq!(
            trace["otherData"]["host"], events[0]["host"],
            "{}",
            incident.name
        );
    }
}

#[test]
fn nlmon_captures_analyze_as_perfetto_traces() {
    let dir = workspace_root().join("tests/fixtures/nlmon");
    for entry in std::fs::read_dir(&dir).expect("reading tests/fixtures/nlmon") {
        let file = entry.unwrap().path();
        if file.extension().and_then(|e| e.to_str()) != Some("pcap") {
            continue;
        }
        let trace = run(&["analyze", "--format", "perfetto"], &file);
        let events = json_lines(&run(&["analyze", "--format", "json"], &file));
        assert_perfetto_invariants(&file.display().to_string(), &trace, &events);
    }
}

#[test]
fn live_trace_of_seed_000_as_a_perfetto_trace() {
    require_root();
    let node = layout(0, "pf000");
    let scratch = ScratchDir::new("perfetto");
    let recording = scratch.file("rec.jsonl");
    let mut args = vec!["trace", "--format", "perfetto", "-o", &recording, "--"];
    args.extend(in_ns(&node.ns, &["getent", "ahostsv4", "node-a"]));
    let out = Command::new(tool())
        .args(&args)
        .output()
        .expect("running nodeip-trace trace");
    assert!(
        out.status.success(),
        "trace failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = json_lines(&std::fs::read(&recording).expect("reading the recording"));
    assert_perfetto_invariants("live seed 000", &out.stdout, &events);
    let trace: Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls: Vec<&Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "resolver")
        .collect();
    assert_eq!(calls.len(), 1, "{trace:#}");
    let name = calls[0]["name"].as_str().unwrap();
    assert!(name.contains("→ [172.18.45.20, 172.18.45.6]"), "{name}");
}
