//! Issue 9 (security and isolation, first parts): outputs are private (0600, also when the file
//! existed with a wider mode), and two tracers at once do not interfere — both see the same call.
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use nodeip_trace_tests::{require_root, tool, BackgroundTrace, ScratchDir};

#[test]
fn outputs_are_private_and_two_tracers_both_see_a_call() {
    require_root();
    let scratch = ScratchDir::new("twotracers");
    let (rec, pcap) = (scratch.file("rec.jsonl"), scratch.file("out.pcap"));
    std::fs::write(&pcap, b"old").unwrap();
    std::fs::set_permissions(&pcap, std::fs::Permissions::from_mode(0o644)).unwrap();
    let first = BackgroundTrace::start("two-a", &["--comm", "getent"]).unwrap();
    let second = BackgroundTrace::start("two-b", &["--comm", "getent"]).unwrap();
    let out = Command::new(tool())
        .args([
            "trace", "--format", "json", "-o", &rec, "--pcap", &pcap, "--",
        ])
        .args(["getent", "ahostsv4", "localhost"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for path in [&rec, &pcap] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{path}");
    }
    for (name, trace) in [("first", first), ("second", second)] {
        let (events, stderr) = trace.stop().unwrap();
        let calls = events
            .iter()
            .filter(|e| e["kind"] == "getaddrinfo" && e["node"] == "localhost")
            .count();
        assert!(calls >= 1, "{name} tracer saw no call: {stderr}");
        let summary = events.last().unwrap();
        assert_eq!(summary["kind"], "summary");
        assert_eq!(summary["lost"], 0, "{name}: {summary}");
    }
}
