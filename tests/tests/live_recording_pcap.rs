//! End to end (issue 4): a live trace's recording replays to the same text timeline the live run
//! printed; its pcap dissects cleanly in tshark, and `analyze` of it gives the same messages, in
//! order, as the live JSON.
use std::process::Command;

use nodeip_trace_tests::{require_root, tool, Netns};
use serde_json::Value;

fn message_types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["kind"] == "netlink")
        .flat_map(|e| {
            e["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["type"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn recording_replays_to_the_live_text_and_pcap_round_trips() {
    require_root();
    let ns = Netns::new("rec");
    let peer = Netns::new("recp");
    ns.veth_to("veth0", &peer, "veth1");
    ns.ip(&["addr", "add", "192.0.2.10/24", "dev", "veth0"]);
    ns.ip(&["addr", "add", "192.0.2.20/24", "dev", "veth0"]);
    let dir = std::env::temp_dir().join(format!("nit-rec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("rec.jsonl");
    let pcap = dir.join("trace.pcap");
    let pcapng = dir.join("trace.pcapng");
    let script = format!(
        "ip -n {0} route get 192.0.2.20 >/dev/null; ip -n {0} -4 addr show >/dev/null; ip -n {0} route show table local >/dev/null",
        ns.name
    );
    let live = Command::new(tool())
        .args([
            "trace",
            "-o",
            rec.to_str().unwrap(),
            "--pcap",
            pcap.to_str().unwrap(),
            "--pcapng",
            pcapng.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    assert!(
        live.status.success(),
        "{}",
        String::from_utf8_lossy(&live.stderr)
    );
    let live_text = String::from_utf8_lossy(&live.stdout).into_owned();
    assert!(
        live_text.contains("veth0 192.0.2.10/24 primary, 192.0.2.20/24 secondary"),
        "{live_text}"
    );

    // Replay renders exactly what the live run printed.
    let replay = Command::new(tool())
        .args(["replay", rec.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&replay.stdout), live_text);

    // The pcap analyses to the same messages, in the same order, as the live JSON.
    let live_events: Vec<Value> = std::fs::read_to_string(&rec)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for capture in [&pcap, &pcapng] {
        let analyzed = Command::new(tool())
            .args(["analyze", "--format", "json", capture.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            analyzed.status.success(),
            "{}",
            String::from_utf8_lossy(&analyzed.stderr)
        );
        let events: Vec<Value> = String::from_utf8_lossy(&analyzed.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            message_types(&events),
            message_types(&live_events),
            "{}",
            capture.display()
        );
    }
    // pcapng keeps who sent it.
    let analyzed = Command::new(tool())
        .args(["analyze", "--format", "json", pcapng.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&analyzed.stdout).contains(r#""comm":"ip""#));

    // tshark dissects both with no malformed frames.
    for capture in [&pcap, &pcapng] {
        let out = Command::new("tshark")
            .args([
                "-r",
                capture.to_str().unwrap(),
                "-T",
                "fields",
                "-e",
                "frame.number",
                "-e",
                "_ws.malformed",
                "-e",
                "netlink.hdr_type",
            ])
            .output()
            .expect("tshark missing: run `cargo xtask setup`");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.is_empty());
        for line in text.lines() {
            let cols: Vec<&str> = line.split('\t').collect();
            assert!(
                cols.get(1).map(|c| c.is_empty()).unwrap_or(true),
                "malformed frame in {}: {line}",
                capture.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
