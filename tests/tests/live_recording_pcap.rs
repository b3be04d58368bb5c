//! End to end (issue 4): a live trace of a mixed workload (route get, address and local-table
//! dumps, generic-netlink family lookups: `ipvsadm` and `devlink` asking nlctrl for families this
//! kernel may lack, `ip tcp_metrics` for one it has) — its recording replays to the same text
//! timeline the live run printed; its pcap and pcapng dissect in tshark with no malformed or
//! non-netlink frame and tshark's per-type message counts equal ours; and `analyze` of them gives
//! the same messages, in order, as the live JSON (plus the synthetic nlctrl frames that name
//! generic families for Wireshark). The pcapng describes itself (issue 19): diagnoses, summary
//! and node audit as section comments, an interface per network namespace named after it,
//! directions and packet ids.
use std::process::Command;

use nodeip_trace_tests::tshark::{event_counts, tshark_counts, tshark_problems};
use nodeip_trace_tests::{analyze_json, require_root, tool, BackgroundTrace, Netns, ScratchDir};
use serde_json::Value;

/// The nlctrl `CTRL_CMD_NEWFAMILY` frames our pcap writers add (seq 0, port id 0) so that
/// Wireshark names generic families: in the capture, not in the live trace.
fn is_synthetic_family_frame(event: &Value) -> bool {
    event["messages"].as_array().is_some_and(|messages| {
        messages
            .iter()
            .all(|m| m["type"] == "nlctrl CTRL_CMD_NEWFAMILY" && m["seq"] == 0 && m["pid"] == 0)
    })
}

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
        "ip -n {0} route get 192.0.2.20 >/dev/null; ip -n {0} -4 addr show >/dev/null; \
         ip -n {0} route show table local >/dev/null; \
         ip netns exec {0} ipvsadm -L -n >/dev/null 2>&1; \
         ip netns exec {0} devlink dev >/dev/null 2>&1; \
         ip -n {0} tcp_metrics show >/dev/null 2>&1; true",
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
    let live_counts = event_counts(&live_events);
    let getfamily = "genl family 0x10 cmd 3";
    assert!(
        live_counts.get(getfamily).copied().unwrap_or(0) >= 3,
        "ipvsadm, devlink and ip tcp_metrics each look up a family: {live_counts:?}"
    );
    for capture in [&pcap, &pcapng] {
        let analyzed_run = analyze_json(&[], &capture.to_string_lossy());
        let (analyzed, events) = (analyzed_run.output, analyzed_run.events);
        assert!(
            analyzed.status.success(),
            "{}",
            String::from_utf8_lossy(&analyzed.stderr)
        );
        // tshark dissects every frame as netlink, none malformed, and counts what we count.
        let problems = tshark_problems(capture);
        assert!(problems.is_empty(), "{}: {problems:?}", capture.display());
        assert_eq!(
            tshark_counts(capture),
            event_counts(&events),
            "{}: message counts by type (left: tshark, right: analyze)",
            capture.display()
        );
        let traced: Vec<Value> = events
            .into_iter()
            .filter(|e| !is_synthetic_family_frame(e))
            .collect();
        assert_eq!(event_counts(&traced), live_counts, "{}", capture.display());
        assert_eq!(
            message_types(&traced),
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

    // Issue 19: the pcapng describes itself. Its section comments carry the diagnoses (added
    // when the trace ended), the summary and the node audit; the namespace's frames are on an
    // interface named after it, each with its direction and id.
    assert!(
        live_text.contains("] route-get-resolves-to-lo"),
        "{live_text}"
    );
    let capinfos = Command::new("capinfos").arg(&pcapng).output().unwrap();
    let info = String::from_utf8_lossy(&capinfos.stdout);
    for expected in [
        "Capture comment:     nodeip-trace at the end of the trace: ",
        "Capture comment:     [WARNING] route-get-resolves-to-lo — ",
        "Capture comment:     trace summary: ",
        "Capture comment:     node address audit of ",
        &format!("Name = netns {}", ns.name),
    ] {
        assert!(
            info.contains(expected),
            "capinfos lacks {expected:?}:\n{info}"
        );
    }
    let fields = Command::new("tshark")
        .arg("-r")
        .arg(&pcapng)
        .args(["-T", "fields", "-E", "separator=|"])
        .args([
            "-e",
            "frame.interface_name",
            "-e",
            "frame.packet_flags_direction",
        ])
        .args(["-e", "frame.packet_id", "-e", "frame.comment"])
        .output()
        .unwrap();
    let fields = String::from_utf8_lossy(&fields.stdout);
    let in_ns: Vec<&str> = fields
        .lines()
        .filter(|l| l.starts_with(&format!("netns {}|", ns.name)))
        .collect();
    assert!(!in_ns.is_empty(), "{fields}");
    for (i, line) in fields.lines().enumerate() {
        let cols: Vec<&str> = line.split('|').collect();
        assert_eq!(cols[2], (i + 1).to_string(), "packet ids count up: {line}");
        assert!(cols[1] == "0x00000001" || cols[1] == "0x00000002", "{line}");
    }
    assert!(
        in_ns.iter().any(|l| l.contains("comm=ip dir=send")),
        "{fields}"
    );

    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 19: a pcapng streamed to stdout cannot get the diagnoses into its section header
/// afterwards: it stays a readable capture, and stderr says where the diagnoses are.
#[test]
fn a_streamed_pcapng_says_its_diagnoses_are_elsewhere() {
    require_root();
    let ns = Netns::new("strm");
    let peer = Netns::new("strmp");
    ns.veth_to("veth0", &peer, "veth1");
    ns.ip(&["addr", "add", "192.0.2.30/24", "dev", "veth0"]);
    let route_get = format!("ip -n {} route get 192.0.2.30 >/dev/null", ns.name);
    let live = Command::new(tool())
        .args(["trace", "--pcapng", "-", "--", "sh", "-c", &route_get])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&live.stderr);
    assert!(live.status.success(), "{stderr}");
    assert!(
        stderr.contains("nodeip-trace: note: stdout is a stream whose section header went out first, so the 1 diagnosis found at the end is not in it"),
        "{stderr}"
    );
    let dir = std::env::temp_dir().join(format!("nit-strm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let capture = dir.join("streamed.pcapng");
    std::fs::write(&capture, &live.stdout).unwrap();
    assert!(tshark_problems(&capture).is_empty());
    let analyzed = analyze_json(&[], &capture.to_string_lossy());
    assert!(analyzed.output.status.success());
    assert!(
        analyzed
            .events
            .iter()
            .any(|e| e["id"] == "route-get-resolves-to-lo"),
        "the capture itself still shows what happened"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The packet data of each record of a classic pcap file.
fn pcap_records(path: &str) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut at = 24;
    let mut records = Vec::new();
    while at + 16 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        records.push(bytes[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    assert_eq!(at, bytes.len(), "{path} ends inside a record");
    records
}

/// Issue 20: a trace whose only output is a plain pcap file reads no events, so it makes none:
/// buffers are reassembled and framed, not decoded. Its capture holds the same frames as a
/// full trace (JSON recording and pcap) running beside it, and its summary says what it did.
#[test]
fn a_pcap_only_trace_frames_the_same_buffers_without_decoding() {
    require_root();
    let ns = Netns::new("pcaponly");
    let peer = Netns::new("pcaponlyp");
    ns.veth_to("veth0", &peer, "veth1");
    ns.ip(&["addr", "add", "192.0.2.40/24", "dev", "veth0"]);
    let scratch = ScratchDir::new("pcaponly");
    // A name of its own, so both tracers take exactly this workload's traffic.
    let ip = scratch.file("nit-pcap-ip");
    std::fs::copy("/usr/bin/ip", &ip).unwrap();
    let (only, full, ready) = (
        scratch.file("only.pcap"),
        scratch.file("full.pcap"),
        scratch.file("only.ready"),
    );
    let stderr = scratch.file("only.stderr");
    let mut frames_only = Command::new(tool())
        .args([
            "trace",
            "--comm",
            "nit-pcap-ip",
            "--pcap",
            &only,
            "--ready-file",
            &ready,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let full_trace =
        BackgroundTrace::start("pcapfull", &["--comm", "nit-pcap-ip", "--pcap", &full]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::path::Path::new(&ready).exists() {
        assert!(std::time::Instant::now() < deadline, "not attached in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Requests, replies, and dumps of several buffers (200 routes).
    let batch = scratch.file("routes.batch");
    let routes: String = (1..=200)
        .map(|i| format!("route add 198.51.100.{i}/32 dev veth0\n"))
        .collect();
    std::fs::write(&batch, routes).unwrap();
    let script = format!(
        "{ip} -n {0} route get 192.0.2.40 >/dev/null && {ip} -n {0} -batch {batch} && \
         {ip} -n {0} route show >/dev/null && {ip} -n {0} -4 addr show >/dev/null",
        ns.name
    );
    let run = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (events, full_stderr) = full_trace.stop().unwrap();
    // SAFETY: kill with our child's pid.
    unsafe { libc::kill(frames_only.id() as i32, libc::SIGINT) };
    assert!(frames_only.wait().unwrap().success());
    let said = std::fs::read_to_string(&stderr).unwrap();

    let (mut ours, mut theirs) = (pcap_records(&only), pcap_records(&full));
    let buffers = events.iter().filter(|e| e["kind"] == "netlink").count();
    assert!(
        buffers > 200,
        "the full trace saw the workload: {full_stderr}"
    );
    assert_eq!(ours.len(), buffers, "one frame per buffer: {said}");
    assert!(
        said.contains(&format!(
            "nodeip-trace: {buffers} netlink buffers captured (no events made: no output reads them), 0 lost"
        )),
        "{said}"
    );
    // What a pcap cannot hold is not traced at all: the hooks for it are not attached.
    assert!(
        said.contains("route lookups, resolver calls and kernel handler calls are not traced"),
        "{said}"
    );
    let attached = |stderr: &str| -> usize {
        let line = stderr
            .lines()
            .find(|l| l.contains("hooks attached in"))
            .unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    assert!(
        attached(&said) < attached(&full_stderr),
        "fewer hooks than the full trace's: {said}\n{full_stderr}"
    );
    // The same frames; two rings may order buffers of different CPUs differently.
    ours.sort();
    theirs.sort();
    assert!(ours == theirs, "the two captures differ");
    assert!(tshark_problems(std::path::Path::new(&only)).is_empty());
}
