//! The HTML report in a real browser (issue 19), as a reader would open it: `nodeip-trace report`
//! of each seed recording (`tests/fixtures/seeds/`) opened from `file://` in Debian's headless
//! Chromium by `tests/browser/report_check.mjs` — its lanes, its diagnosis cards and their
//! evidence links, zero network requests, zero console errors, a full-page screenshot in
//! `target/report/NNN-….png` — and checked by the Nu HTML validator (zero errors). Hostile names
//! from the node (a process called `<script>alert(1)</script>`, a host and a pod named
//! `"><img src=x onerror=alert(1)>`) must show as text and run nothing, even with the
//! Content-Security-Policy bypassed.
//!
//! The harness is checked too: the hand-written contract sample (`tests/browser/sample.html`)
//! passes, and a report breaking the contract fails for each thing it breaks.
//!
//! Chromium, Java, Node.js and the npm packages come from `cargo xtask setup --for-tests`; when one is
//! missing these tests fail (CI installs them), they never skip.
use std::path::{Path, PathBuf};
use std::process::Command;

use nodeip_trace_tests::browser::{failures, BrowserTools};
use nodeip_trace_tests::seeds::INCIDENTS;
use nodeip_trace_tests::{json_lines, tool, workspace_root};
use serde_json::{json, Value};

/// A hostile process name.
const HOSTILE_COMM: &str = "<script>alert(1)</script>";
/// A hostile host, pod and looked-up name.
const HOSTILE_NAME: &str = "\"><img src=x onerror=alert(1)>";

/// `target/report/` (created): where reports and screenshots go.
fn report_dir() -> PathBuf {
    let dir = workspace_root().join("target/report");
    std::fs::create_dir_all(&dir).expect("creating target/report");
    dir
}

/// `nodeip-trace report RECORDING -o OUT`, failing with what the tool said.
fn report(recording: &Path, out: &Path) {
    let output = Command::new(tool())
        .arg("report")
        .arg(recording)
        .arg("-o")
        .arg(out)
        .output()
        .expect("running nodeip-trace report");
    assert!(
        output.status.success() && out.is_file(),
        "`nodeip-trace report {} -o {}` failed ({}): {}",
        recording.display(),
        out.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The names of the processes with events in a recording, each once, in order of appearance.
fn process_names(recording: &Path) -> Vec<String> {
    let text = std::fs::read(recording).expect("reading a seed recording");
    let mut names: Vec<String> = Vec::new();
    for event in json_lines(&text).iter().filter(|e| e["pid"] != 0) {
        let comm = event["comm"].as_str().unwrap_or_default().to_string();
        if !names.contains(&comm) {
            names.push(comm);
        }
    }
    names
}

fn assert_all_passed(result: &Value, what: &str) {
    let failed = failures(result);
    assert!(
        result["ok"] == true && failed.is_empty(),
        "{what} failed in the browser:\n{}",
        failed.join("\n")
    );
}

fn assert_valid_html(tools: &BrowserTools, files: &[PathBuf]) {
    let errors = tools.validate_html(files);
    assert!(
        errors.is_empty(),
        "the Nu validator found errors:\n{}",
        errors.join("\n")
    );
}

#[test]
fn each_seed_report_opens_offline_with_its_lanes_and_diagnoses() {
    let tools = BrowserTools::require();
    let dir = report_dir();
    let mut specs = Vec::new();
    let mut reports = Vec::new();
    for incident in &INCIDENTS {
        let recording =
            workspace_root().join(format!("tests/fixtures/seeds/{}.jsonl", incident.name));
        let html = dir.join(format!("{}.html", incident.name));
        report(&recording, &html);
        specs.push(json!({
            "file": html,
            "screenshot": dir.join(format!("{}.png", incident.name)),
            "expect": {
                "diagnoses": incident.diagnoses,
                "lanes": process_names(&recording),
                "min_process_lanes": 1,
                "kernel_lane": true,
            },
        }));
        reports.push(html);
    }
    let result = tools.check_reports(&Value::Array(specs), &dir);
    assert_all_passed(&result, "the seed reports");
    assert_valid_html(&tools, &reports);
}

/// Seed 000's recording with hostile names: the process, the host, the name it looked up, and a
/// container whose pod and name are markup.
fn hostile_recording(out: &Path) {
    let source = workspace_root().join("tests/fixtures/seeds/000-gai-reordered.jsonl");
    let mut events = json_lines(&std::fs::read(source).expect("reading seed 000's recording"));
    for event in &mut events {
        rename(event);
        if event["kind"] == "header" {
            event["host"] = json!(HOSTILE_NAME);
        }
        if event["comm"] == HOSTILE_COMM {
            event["process"]["container"] = json!({
                "runtime": "containerd",
                "id": "4f3a9c1d2e5b6a7980f1e2d3c4b5a697887766554433221100ffeeddccbbaa99",
                "pod_uid": "0b5c7c1e-7f1e-4e55-9d1b-2f6f1f0c9a11",
                "qos": "besteffort",
                "pod_namespace": "default",
                "pod_name": HOSTILE_NAME,
                "name": HOSTILE_COMM,
            });
        }
    }
    let lines: Vec<String> = events.iter().map(Value::to_string).collect();
    std::fs::write(out, lines.join("\n") + "\n").expect("writing the hostile recording");
}

/// Renames, in every string of `value`: the process `getent` to [`HOSTILE_COMM`] and the name
/// `node-a` to [`HOSTILE_NAME`].
fn rename(value: &mut Value) {
    match value {
        Value::String(s) => {
            if s == "getent" {
                *s = HOSTILE_COMM.into();
            } else {
                *s = s
                    .replace("getent[", &format!("{HOSTILE_COMM}["))
                    .replace("node-a", HOSTILE_NAME);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rename),
        Value::Object(fields) => fields.values_mut().for_each(rename),
        _ => {}
    }
}

#[test]
fn hostile_names_from_the_node_render_as_text() {
    let tools = BrowserTools::require();
    let dir = report_dir();
    let recording = dir.join("hostile-names.jsonl");
    hostile_recording(&recording);
    let html = dir.join("hostile-names.html");
    report(&recording, &html);
    let specs = json!([{
        "file": html,
        "screenshot": dir.join("hostile-names.png"),
        "expect": {
            "diagnoses": ["gai-reordered"],
            "lanes": [HOSTILE_COMM],
            "min_process_lanes": 1,
            "kernel_lane": true,
            "texts": [HOSTILE_COMM, HOSTILE_NAME],
        },
    }]);
    let result = tools.check_reports(&specs, &dir);
    assert_all_passed(&result, "the report of hostile names");
    assert_valid_html(&tools, &[html]);
}

#[test]
fn the_harness_passes_the_contract_sample() {
    let tools = BrowserTools::require();
    let dir = report_dir();
    let sample = workspace_root().join("tests/browser/sample.html");
    let specs = json!([{
        "file": sample,
        "screenshot": dir.join("sample.png"),
        "expect": {
            "diagnoses": ["gai-reordered"],
            "lanes": ["getent", HOSTILE_COMM],
            "min_process_lanes": 2,
            "kernel_lane": true,
            "texts": [HOSTILE_COMM, HOSTILE_NAME],
        },
    }]);
    let result = tools.check_reports(&specs, &dir);
    assert_all_passed(&result, "tests/browser/sample.html");
    assert!(dir.join("sample.png").is_file(), "no screenshot");
    assert_valid_html(&tools, &[sample]);
}

#[test]
fn the_harness_fails_a_report_that_breaks_the_contract() {
    let tools = BrowserTools::require();
    let dir = report_dir();
    let broken = dir.join("broken-contract.html");
    // No CSP, no audit or calls, a dangling evidence link, no kernel lane, a fetch, a script,
    // and an unescaped host name.
    let html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>broken</title></head><body>\n\
         <section id=\"diagnoses\"><article class=\"diagnosis\" id=\"diag-1\" data-id=\"gai-reordered\" \
         data-severity=\"warning\"><a class=\"evidence\" href=\"#row-9\">call</a></article></section>\n\
         <section id=\"timeline\"><svg class=\"swimlane\" width=\"100\" height=\"50\">\
         <g class=\"lane\" data-lane=\"getent[1]\"><text x=\"5\" y=\"10\">getent[1]</text></g></svg></section>\n\
         <p>host {HOSTILE_NAME}</p>\n<script>alert(2)</script>\n\
         <img src=\"http://127.0.0.1:9/pixel.png\" alt=\"\">\n</body></html>\n"
    );
    std::fs::write(&broken, html).expect("writing the broken report");
    let specs = json!([{
        "file": broken,
        "expect": {"diagnoses": ["network-address-used"], "kernel_lane": true},
    }]);
    let result = tools.check_reports(&specs, &dir);
    assert_eq!(result["ok"], false, "{result:#}");
    let failed = failures(&result).join("\n");
    for expected in [
        "no Content-Security-Policy meta",
        "section#audit is missing",
        "section#calls is missing",
        "link #row-9 names no element",
        "no kernel lane",
        "diagnoses [\"gai-reordered\"], expected [\"network-address-used\"]",
        "<script> element",
        "event-handler attribute: <img onerror>",
        "as served: a request left the file: http://127.0.0.1:9/pixel.png",
        "as served: a dialog opened (script ran): alert: 1",
        "with the CSP bypassed: a dialog opened",
        "console error",
    ] {
        assert!(
            failed.contains(expected),
            "the harness did not report {expected:?}:\n{failed}"
        );
    }
    assert!(
        !tools.validate_html(&[broken]).is_empty(),
        "the validator passed an <img> without alt"
    );
}
