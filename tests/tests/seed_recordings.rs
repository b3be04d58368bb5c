//! The committed seed recordings (`tests/fixtures/seeds/NNN-name.jsonl`, the fixtures of the HTML
//! report's golden files and browser test, and of the Perfetto sink's tests): one JSON-lines
//! recording per seed incident, traced live on the layouts and with the clients of
//! `live_seeds.rs` (shared through `nodeip_trace_tests::seeds`).
//!
//! Each must replay to its incident's diagnosis, and hold only the traced command's events.
//! `NODEIP_TRACE_UPDATE_SEED_RECORDINGS=1` (as root) traces the incidents again and rewrites them.
use std::path::PathBuf;
use std::process::Command;

use nodeip_trace_tests::seeds::{layout, trace_incident, INCIDENTS};
use nodeip_trace_tests::{json_lines, require_root, run_ok, tool, workspace_root, ScratchDir};
use serde_json::Value;

const CLIENT: &str = env!("CARGO_BIN_EXE_ipvs_client");

/// The environment variable that makes [`regenerate_seed_recordings`] rewrite the recordings.
const UPDATE_ENV: &str = "NODEIP_TRACE_UPDATE_SEED_RECORDINGS";

fn recording(name: &str) -> PathBuf {
    workspace_root().join(format!("tests/fixtures/seeds/{name}.jsonl"))
}

fn diagnosis_ids(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["kind"] == "diagnosis")
        .filter_map(|e| e["id"].as_str())
        .collect()
}

fn replay(format: &str, file: &std::path::Path) -> std::process::Output {
    run_ok(
        Command::new(tool())
            .args(["replay", "--format", format])
            .arg(file),
    )
}

#[test]
fn each_seed_recording_replays_to_its_diagnosis() {
    for incident in &INCIDENTS {
        let file = recording(incident.name);
        assert!(
            file.exists(),
            "{} missing: regenerate with {UPDATE_ENV}=1 (see tests/fixtures/seeds/README.md)",
            file.display()
        );
        let events = json_lines(&replay("json", &file).stdout);
        assert_eq!(
            diagnosis_ids(&events),
            incident.diagnoses,
            "{}",
            file.display()
        );
        assert_eq!(events[0]["kind"], "header", "{}", file.display());
        assert_eq!(
            events.last().unwrap()["kind"],
            "summary",
            "{}",
            file.display()
        );
        assert_eq!(events.last().unwrap()["lost"], 0, "{}", file.display());
        // Only the traced command's tree: every process event descends from the tracer.
        for e in events.iter().filter(|e| e["pid"] != 0) {
            let ancestors = e["process"]["ancestors"].as_array();
            let from_command =
                ancestors.is_some_and(|a| a.iter().any(|p| p["comm"] == "nodeip-trace"));
            assert!(
                from_command,
                "{}: an event not of the traced command: {e}",
                file.display()
            );
        }
        let text = String::from_utf8_lossy(&replay("text", &file).stdout).into_owned();
        for id in incident.diagnoses {
            assert!(
                text.contains(&format!("] {id} — ")),
                "{}: the text replay does not show {id}:\n{text}",
                file.display()
            );
        }
    }
}

/// With `NODEIP_TRACE_UPDATE_SEED_RECORDINGS=1` (as root): traces each incident again, checks it
/// ends in its diagnoses, and rewrites its recording. Otherwise says how and does nothing.
#[test]
fn regenerate_seed_recordings() {
    if std::env::var_os(UPDATE_ENV).is_none_or(|v| v != "1") {
        eprintln!(
            "seed recordings kept; {UPDATE_ENV}=1 traces the incidents again and rewrites them"
        );
        return;
    }
    require_root();
    let scratch = ScratchDir::new("seedrec");
    for (index, incident) in INCIDENTS.iter().enumerate() {
        let out = scratch.file(&format!("{}.jsonl", incident.name));
        let node = layout(index, &format!("rec{index}"));
        let run = trace_incident(index, &node, CLIENT, &["-o", &out]);
        assert!(run.output.status.success(), "trace failed: {}", run.stderr);
        let recorded = std::fs::read(&out).expect("reading the new recording");
        assert_eq!(
            diagnosis_ids(&json_lines(&recorded)),
            incident.diagnoses,
            "{}: {}",
            incident.name,
            run.stderr
        );
        let target = recording(incident.name);
        std::fs::create_dir_all(target.parent().unwrap()).expect("creating tests/fixtures/seeds");
        std::fs::write(&target, recorded)
            .unwrap_or_else(|e| panic!("writing {}: {e}", target.display()));
        eprintln!("rewrote {}", target.display());
    }
}
