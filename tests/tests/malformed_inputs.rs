//! Issues 4 and 9: the malformed-input corpus in `tests/malformed/` (made by
//! `nodeip_trace_tests::malformed::corpus`, which documents each file). The committed files are
//! still the generator's output, and for each one `nodeip-trace analyze`/`replay` never panics,
//! exits as the table says, names the frame (or line) and byte offset of the fault, and writes
//! everything before it.
//!
//! No root needed: `cargo build -p nodeip-trace --bins && cargo test -p nodeip-trace-tests --test
//! malformed_inputs`.
use std::collections::BTreeSet;
use std::process::Command;

use nodeip_trace_tests::golden::assert_golden;
use nodeip_trace_tests::malformed::{corpus, readme, Case, Outcome, Reader};
use nodeip_trace_tests::{tool, workspace_root};

#[test]
fn committed_corpus_is_the_generators_output() {
    let dir = workspace_root().join("tests/malformed");
    let cases = corpus();
    assert!(cases.len() >= 30, "{} files", cases.len());
    let mut names = BTreeSet::new();
    for case in &cases {
        assert!(names.insert(case.name), "{} twice", case.name);
        assert_golden(&dir.join(case.name), &case.bytes);
    }
    assert_golden(&dir.join("README.md"), readme(&cases).as_bytes());
    names.insert("README.md");
    for entry in std::fs::read_dir(&dir).expect("tests/malformed") {
        let name = entry.expect("entry").file_name();
        let name = name.to_string_lossy();
        assert!(
            names.contains(name.as_ref()),
            "tests/malformed/{name} is not made by the generator: remove it or add it there"
        );
    }
}

/// Runs the case's command on its committed file and returns every complaint.
fn check(case: &Case) -> Vec<String> {
    let path = workspace_root().join("tests/malformed").join(case.name);
    let command = match case.reader {
        Reader::Analyze => "analyze",
        Reader::Replay => "replay",
    };
    let output = Command::new(tool())
        .args([command, "--format", "json"])
        .arg(&path)
        .output()
        .expect("running nodeip-trace");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut problems = Vec::new();
    let code = output.status.code();
    if code == Some(101) || stderr.contains("panicked") {
        problems.push("panicked".to_owned());
    }
    match (case.outcome, code) {
        (Outcome::Fatal, Some(c)) if c != 0 && c != 101 && c != 4 => {}
        (Outcome::Clean | Outcome::Warns, Some(0)) | (Outcome::Skips, Some(4)) => {}
        (outcome, code) => problems.push(format!("{outcome:?} but exit {code:?}")),
    }
    match case.outcome {
        Outcome::Clean if case.diagnostic.is_empty() && !stderr.is_empty() => {
            problems.push("a clean file made noise".into())
        }
        Outcome::Clean if stderr.contains("warning") => problems.push("a clean file warns".into()),
        Outcome::Warns | Outcome::Skips if !stderr.contains("warning") => {
            problems.push("no warning".into())
        }
        _ => {}
    }
    for expected in &case.output {
        if !stdout.contains(expected) {
            problems.push(format!("stdout lacks {expected:?}"));
        }
    }
    for expected in &case.diagnostic {
        if !stderr.contains(expected.as_str()) {
            problems.push(format!("stderr lacks {expected:?}"));
        }
    }
    // analyze: one netlink event per frame (other kinds, e.g. request/reply pairs, may follow);
    // replay: one event per recording line.
    let mut events = 0;
    for line in stdout.lines() {
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(event) if case.reader == Reader::Replay || event["kind"] == "netlink" => events += 1,
            Ok(_) => {}
            Err(e) => problems.push(format!("stdout line is not JSON ({e}): {line}")),
        }
    }
    if events != case.events {
        problems.push(format!(
            "{events} events on stdout, {} expected",
            case.events
        ));
    }
    if !problems.is_empty() {
        problems.insert(0, format!("stderr: {}", stderr.trim_end()));
    }
    problems
}

#[test]
fn every_corpus_file_gives_its_diagnostic_exit_and_prior_output() {
    let mut failures = Vec::new();
    for case in corpus() {
        let problems = check(&case);
        if !problems.is_empty() {
            failures.push(format!(
                "{} ({}):\n    {}",
                case.name,
                case.what,
                problems.join("\n    ")
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
