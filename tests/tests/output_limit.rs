//! Issue 21 (fleet security): `trace --max-output-mib` keeps every file output near the limit —
//! the JSON recording, the pcap and the pcapng — with the last record complete, the records it
//! did not take counted as lost in the run's summary, and a final losses line in the recording;
//! stdout is not limited (kubelet rotates container logs). 20,000 route gets (`ip -batch`, in a
//! namespace of its own) make about 60,000 records, several MiB of JSON.
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use nodeip_trace_tests::{analyze_json, json_lines, require_root, tool, Netns, ScratchDir};

const LIMIT: u64 = 1 << 20;
/// How far past the limit a file may end: the record that crossed it, the losses line, the
/// summary (and pcapng's section comments).
const SLACK: u64 = 64 << 10;

#[test]
fn file_outputs_stop_at_the_limit_with_complete_records_and_the_losses_said() {
    require_root();
    let ns = Netns::new("outlimit");
    let scratch = ScratchDir::new("outlimit");
    let batch = scratch.file("routes.batch");
    std::fs::write(&batch, "route get 127.0.0.1\n".repeat(20_000)).unwrap();
    let (rec, pcap, pcapng, stdout) = (
        scratch.file("rec.jsonl"),
        scratch.file("c.pcap"),
        scratch.file("c.pcapng"),
        scratch.file("stdout.jsonl"),
    );
    let out = Command::new(tool())
        .args(["trace", "--format", "json", "--max-output-mib", "1"])
        .args(["-o", &rec, "--pcap", &pcap, "--pcapng", &pcapng])
        .args(["--", "ip", "-n", &ns.name, "-batch", &batch])
        .stdout(std::fs::File::create(&stdout).unwrap())
        .output()
        .expect("running nodeip-trace");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for file in [&rec, &pcap, &pcapng] {
        let meta = std::fs::metadata(file).unwrap();
        assert!(
            meta.len() >= LIMIT && meta.len() < LIMIT + SLACK,
            "{file}: {} bytes",
            meta.len()
        );
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{file}");
        assert!(
            stderr.contains(&format!("{file} reached --max-output-mib")),
            "{stderr}"
        );
    }

    // The recording: every line whole, ending with the losses and the summary.
    let lines = json_lines(&std::fs::read(&rec).unwrap());
    let (lost, summary) = (&lines[lines.len() - 2], &lines[lines.len() - 1]);
    assert_eq!(summary["kind"], "summary", "{summary}");
    assert_eq!(lost["kind"], "lost", "{lost}");
    let dropped = lost["counts"]["output_limit_records_dropped"]
        .as_u64()
        .unwrap_or_else(|| panic!("no output_limit_records_dropped: {lost}"));
    assert!(dropped > 10_000, "{lost}");
    assert!(summary["lost"].as_u64().unwrap() >= dropped, "{summary}");

    // Stdout took everything (and ends with the same summary).
    let all = json_lines(&std::fs::read(&stdout).unwrap());
    assert!(std::fs::metadata(&stdout).unwrap().len() > 2 * LIMIT);
    assert_eq!(all.last().unwrap()["lost"], summary["lost"]);
    assert!(all.len() > lines.len() + 10_000);

    // Both captures read to their end: no frame is cut.
    for capture in [&pcap, &pcapng] {
        let analyzed = analyze_json(&[], capture);
        assert!(
            analyzed.output.status.success(),
            "{capture}: {}",
            analyzed.stderr
        );
        assert!(analyzed.of_kind("netlink").len() > 1000, "{capture}");
    }
}
