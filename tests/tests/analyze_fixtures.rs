//! Issue 4: every real nlmon capture in `tests/fixtures/nlmon/` (tcpdump on nlmon0, stock Debian
//! kernel; its README says which workload made each) analyses with zero decoding problems; our
//! message counts by type equal tshark's for the same file; the decoded messages equal the
//! capture's golden file (`tests/golden/decode/NAME.json`, shared with the decoder's unit test);
//! and the same capture converted to pcapng (editcap) analyses to the same messages.
//!
//! No root needed: `cargo build -p nodeip-trace --bins && cargo test -p nodeip-trace-tests --test
//! analyze_fixtures`.
use std::path::{Path, PathBuf};
use std::process::Command;

use nodeip_trace::model::netlink::NetlinkMessage;
use nodeip_trace_tests::golden::{assert_golden, decoded_frames_json, DecodedFrame};
use nodeip_trace_tests::tshark::{event_counts, tshark_counts, tshark_problems};
use nodeip_trace_tests::{analyze_json, workspace_root};
use serde_json::Value;

/// Every capture in `tests/fixtures/nlmon/`.
fn fixtures() -> Vec<PathBuf> {
    let dir = workspace_root().join("tests/fixtures/nlmon");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pcap" | "pcapng")
            )
        })
        .collect();
    found.sort();
    assert!(found.len() >= 2, "fixtures missing in {}", dir.display());
    found
}

/// Analyses `capture`, asserting success and no decoding problem anywhere; returns the netlink
/// events.
fn analyze_cleanly(capture: &Path) -> Vec<Value> {
    let analyzed_run = analyze_json(&[], &capture.to_string_lossy());
    let (output, events) = (analyzed_run.output, analyzed_run.events);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "analyze {}: {stderr}",
        capture.display()
    );
    assert!(
        stderr.is_empty(),
        "analyze {} warned: {stderr}",
        capture.display()
    );
    let netlink: Vec<Value> = events
        .into_iter()
        .filter(|e| e["kind"] == "netlink")
        .collect();
    assert!(
        !netlink.is_empty(),
        "{}: no netlink events",
        capture.display()
    );
    for (i, event) in netlink.iter().enumerate() {
        // Absent when empty.
        let errors = &event["decode_errors"];
        assert!(
            errors.is_null() || errors.as_array().is_some_and(Vec::is_empty),
            "frame {}: {errors}",
            i + 1
        );
        for message in event["messages"].as_array().expect("messages") {
            assert!(message.get("error").is_none(), "frame {}: {message}", i + 1);
        }
    }
    netlink
}

/// The events' decoded messages in the golden-file form (one netlink event per frame).
fn decoded_frames(events: &[Value]) -> String {
    let frames: Vec<DecodedFrame<Vec<NetlinkMessage>>> = events
        .iter()
        .enumerate()
        .map(|(i, event)| DecodedFrame {
            frame: i + 1,
            protocol: event["protocol"].as_str().expect("protocol").to_owned(),
            messages: serde_json::from_value(event["messages"].clone())
                .expect("messages are NetlinkMessage JSON"),
            errors: Vec::new(),
        })
        .collect();
    decoded_frames_json(&frames)
}

#[test]
fn every_fixture_analyses_cleanly_with_tshark_counts_and_golden_messages() {
    for capture in fixtures() {
        let events = analyze_cleanly(&capture);
        let ours = event_counts(&events);
        let theirs = tshark_counts(&capture);
        assert_eq!(
            ours,
            theirs,
            "{}: message counts by type (left: analyze, right: tshark)",
            capture.display()
        );
        assert!(
            tshark_problems(&capture).is_empty(),
            "{}",
            capture.display()
        );
        let stem = capture.file_stem().and_then(|s| s.to_str()).expect("name");
        let golden = workspace_root().join(format!("tests/golden/decode/{stem}.json"));
        assert_golden(&golden, decoded_frames(&events).as_bytes());
    }
}

#[test]
fn every_fixture_has_a_golden_timeline_with_its_diagnoses() {
    for capture in fixtures() {
        let output = std::process::Command::new(nodeip_trace_tests::tool())
            .arg("analyze")
            .arg(&capture)
            .output()
            .expect("running nodeip-trace analyze");
        assert!(output.status.success(), "{}", capture.display());
        let stem = capture.file_stem().and_then(|s| s.to_str()).expect("name");
        // The same file the library's own analyze test checks: the CLI adds nothing to it.
        let golden = workspace_root().join(format!("tests/golden/analyze/{stem}.txt"));
        assert_golden(&golden, &output.stdout);
    }
}

/// The JSON lines users parse — conversations with their facts, IPVS commands, diagnoses —
/// pinned byte for byte (`netlink` lines, one per frame, are pinned by the decode goldens).
/// Refresh on purpose only: `cargo xtask bless`.
#[test]
fn every_fixture_has_golden_json_lines_of_conversations_and_diagnoses() {
    for capture in fixtures() {
        let output = std::process::Command::new(nodeip_trace_tests::tool())
            .args(["analyze", "--format", "json"])
            .arg(&capture)
            .output()
            .expect("running nodeip-trace analyze");
        assert!(output.status.success(), "{}", capture.display());
        let kept: String = String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| {
                serde_json::from_str::<Value>(line).expect("a JSON line")["kind"] != "netlink"
            })
            .map(|line| format!("{line}\n"))
            .collect();
        let stem = capture.file_stem().and_then(|s| s.to_str()).expect("name");
        let golden = workspace_root().join(format!("tests/golden/analyze/{stem}.json-lines.jsonl"));
        assert_golden(&golden, kept.as_bytes());
    }
}

#[test]
fn every_fixture_converted_to_pcapng_analyses_to_the_same_messages() {
    let dir = std::env::temp_dir().join(format!("nit-pcapng-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for capture in fixtures() {
        if capture.extension().is_some_and(|e| e == "pcapng") {
            continue;
        }
        let converted = dir.join(capture.with_extension("pcapng").file_name().expect("name"));
        let status = Command::new("editcap")
            .args(["-F", "pcapng"])
            .arg(&capture)
            .arg(&converted)
            .status()
            .expect("editcap missing (it comes with tshark): run `cargo xtask setup --for-tests`");
        assert!(status.success(), "editcap {}", capture.display());
        let original = analyze_cleanly(&capture);
        let again = analyze_cleanly(&converted);
        assert_eq!(
            decoded_frames(&again),
            decoded_frames(&original),
            "{}",
            capture.display()
        );
        let directions = |events: &[Value]| -> Vec<Value> {
            events.iter().map(|e| e["direction"].clone()).collect()
        };
        assert_eq!(directions(&again), directions(&original));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Device names set aside: `dev lo` from a file, `dev 1` from a pipe, where the device was used
/// before the link message that names it (a pipe is read once: no first pass for names).
fn without_devices(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| {
            let mut after_dev = false;
            let words: Vec<&str> = line
                .split(' ')
                .map(|word| {
                    let shown = if after_dev { "_" } else { word };
                    after_dev = word == "dev";
                    shown
                })
                .collect();
            words.join(" ")
        })
        .collect()
}

/// Runs the tool with `args`, `bytes` written to its stdin through a pipe; asserts success.
fn run_piped(args: &[&str], bytes: Vec<u8>) -> std::process::Output {
    use std::io::Write as _;
    use std::process::Stdio;
    let mut child = Command::new(nodeip_trace_tests::tool())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running nodeip-trace");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(&bytes));
    let output = child.wait_with_output().expect("nodeip-trace");
    writer.join().expect("writer").expect("writing the capture");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{args:?}: {stderr}");
    output
}

/// `analyze -` reads the capture from standard input, once, as it arrives (`tcpdump -U -w - |
/// nodeip-trace analyze -`). The timeline is the file's, line for line, but for the names of
/// devices used before the capture's first link message ([`without_devices`]). (Before, a pipe
/// was read twice and the second pass found it empty: "the file ends inside the file magic".)
#[test]
fn a_capture_piped_to_stdin_gives_the_files_timeline_in_one_pass() {
    for capture in fixtures() {
        let bytes = std::fs::read(&capture).expect("fixture");
        let output = run_piped(&["analyze", "-"], bytes);
        let stem = capture.file_stem().and_then(|s| s.to_str()).expect("name");
        let golden = workspace_root().join(format!("tests/golden/analyze/{stem}.txt"));
        let golden = std::fs::read_to_string(&golden).expect("golden timeline");
        let piped = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            without_devices(&piped),
            without_devices(&golden),
            "{}: the piped timeline is not the file's",
            capture.display()
        );
    }
}

/// `report /dev/stdin` of a piped capture: the report looks at the first bytes to tell a
/// capture from a recording, and then reads on from the same pipe (it used to open the path
/// again, and found the capture's start gone). Its text report is the file's, devices aside.
#[test]
fn a_capture_piped_to_report_gives_the_files_report() {
    let dir = std::env::temp_dir().join(format!("nit-report-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for capture in fixtures() {
        let (from_pipe, from_file) = (dir.join("pipe.txt"), dir.join("file.txt"));
        let bytes = std::fs::read(&capture).expect("fixture");
        let pipe_out = from_pipe.to_string_lossy();
        run_piped(
            &["report", "/dev/stdin", "--format", "text", "-o", &pipe_out],
            bytes,
        );
        let status = Command::new(nodeip_trace_tests::tool())
            .arg("report")
            .arg(&capture)
            .args(["--format", "text", "-o"])
            .arg(&from_file)
            .status()
            .expect("report of the file");
        assert!(status.success(), "report {}", capture.display());
        let read = |p: &Path| std::fs::read_to_string(p).expect("report written");
        assert_eq!(
            without_devices(&read(&from_pipe)),
            without_devices(&read(&from_file)),
            "{}: the piped report is not the file's",
            capture.display()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
