//! `doctor` on this machine kind: uprobes and tracepoints usable; kprobe and fentry unavailable,
//! each with its reason; exit 0 because tracing is possible.
use std::process::Command;

use nodeip_trace_tests::{require_root, tool};

#[test]
fn doctor_reports_hooks_with_reasons() {
    require_root();
    let out = Command::new(tool())
        .args(["doctor", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let hooks = report["hooks"].as_array().unwrap();
    let find = |mode: &str, target: &str| {
        hooks
            .iter()
            .find(|h| h["mode"] == mode && h["target"].as_str().unwrap().contains(target))
            .cloned()
    };
    assert_eq!(
        find("uprobe", "getaddrinfo@").expect("uprobe hook")["available"],
        true
    );
    assert_eq!(
        find("tracepoint", "fib:fib_table_lookup").unwrap()["available"],
        true
    );
    assert_eq!(
        find("tracepoint", "syscalls:sys_enter_recvmsg").unwrap()["available"],
        true
    );
    assert!(report["libcs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["kind"] == "glibc"));
    let kernel_has_kprobes = report["kprobes"] == true;
    let k = find("kprobe", "inet_rtm_getroute").unwrap();
    let f = find("fentry", "inet_rtm_getroute").unwrap();
    if !kernel_has_kprobes {
        // This machine kind (6.18 VM): no kprobes, fentry refused.
        assert_eq!(k["available"], false);
        assert!(k["reason"].as_str().unwrap().contains("no kprobes"), "{k}");
    }
    if f["available"] == false {
        assert!(!f["reason"].as_str().unwrap().is_empty(), "{f}");
    }
    let text = Command::new(tool()).arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("verdict      can trace"), "{text}");
}
