//! Issue 9 (security): IPsec key material never leaves the tracer. `ip xfrm state add … KEY` in a
//! test namespace sends the key over NETLINK_XFRM (this kernel then refuses the algorithm, and its
//! error reply echoes the request — the key again). By default XFRM is not captured at all; with
//! `--netlink-family xfrm` the requests and replies are there, headers intact, and the key is in
//! no output: not in the JSON recording, not in the pcap. Outputs are created 0600.
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use nodeip_trace_tests::{json_lines, require_root, tool, Netns, ScratchDir};

/// A key no other byte string in a capture would contain.
const KEY_HEX: &str = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7";

fn key_bytes() -> Vec<u8> {
    (0..KEY_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&KEY_HEX[i..i + 2], 16).unwrap())
        .collect()
}

/// Traces `ip xfrm state add` with `extra` flags; the recording, the pcap and stderr.
fn trace_xfrm_add(
    ns: &Netns,
    scratch: &ScratchDir,
    tag: &str,
    extra: &[&str],
) -> (Vec<u8>, Vec<u8>) {
    let (rec, pcap) = (
        scratch.file(&format!("{tag}.jsonl")),
        scratch.file(&format!("{tag}.pcap")),
    );
    // From a script: the traced command line is in the recording's header, and the key must
    // come only from what `ip` sends.
    let script = scratch.file(&format!("{tag}.sh"));
    std::fs::write(
        &script,
        format!(
            "ip -n {} xfrm state add src 10.0.0.1 dst 10.0.0.2 proto ah spi 0x1002 mode tunnel auth 'hmac(sha1)' 0x{KEY_HEX}\n",
            ns.name
        ),
    )
    .unwrap();
    let out = Command::new(tool())
        .args(["trace", "-o", &rec, "--pcap", &pcap])
        .args(extra)
        .args(["--", "sh", &script])
        .output()
        .unwrap();
    // The kernel may lack the algorithm (this one does): the request still carried the key.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stopped by command exited"), "{stderr}");
    for file in [&rec, &pcap] {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }
    (std::fs::read(&rec).unwrap(), std::fs::read(&pcap).unwrap())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn xfrm_events(recording: &[u8]) -> Vec<serde_json::Value> {
    json_lines(recording)
        .into_iter()
        .filter(|e| e["kind"] == "netlink" && e["protocol_id"] == 6)
        .collect()
}

#[test]
fn xfrm_is_not_captured_by_default_and_its_keys_never_reach_an_output() {
    require_root();
    let ns = Netns::new("xfrm");
    let scratch = ScratchDir::new("xfrm");
    let key = key_bytes();

    let (rec, pcap) = trace_xfrm_add(&ns, &scratch, "default", &[]);
    assert!(xfrm_events(&rec).is_empty(), "XFRM captured by default");
    assert!(!contains(&pcap, &key), "key bytes in the default pcap");

    let (rec, pcap) = trace_xfrm_add(&ns, &scratch, "asked", &["--netlink-family", "xfrm"]);
    let events = xfrm_events(&rec);
    let sends: Vec<_> = events.iter().filter(|e| e["direction"] == "send").collect();
    assert!(
        !sends.is_empty(),
        "the XFRM request was not captured: {events:?}"
    );
    // The header stays readable: who asked for what.
    assert!(
        sends.iter().any(|e| e["messages"][0]["type_id"] == 0x10),
        "XFRM_MSG_NEWSA (0x10) header kept: {sends:?}"
    );
    for (what, bytes) in [("recording", &rec), ("pcap", &pcap)] {
        assert!(!contains(bytes, &key), "key bytes in the {what}");
        let text = String::from_utf8_lossy(bytes).to_lowercase();
        assert!(!text.contains(KEY_HEX), "key as hex in the {what}");
    }
}
