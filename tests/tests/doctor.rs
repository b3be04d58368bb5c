//! `doctor` on this machine kind: uprobes and tracepoints usable; kprobe and fentry unavailable,
//! each with its reason; exit 0 because tracing is possible. In the VM lane (Debian's 6.1
//! kernel) the same tests see fentry and kprobes, and the handler plan that follows from them.
use std::process::Command;

use nodeip_trace_tests::{doctor_report, require_root, tool};

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
    // The plan for `--hooks auto`: fentry where it works, else kprobe, else off — with a reason.
    let plan = report["handler_plan"].as_array().unwrap();
    assert_eq!(plan.len(), 9, "{plan:?}");
    let route_get = plan
        .iter()
        .find(|p| p["function"] == "inet_rtm_getroute")
        .unwrap();
    let expected = if report["fentry"] == true {
        "fentry"
    } else if kernel_has_kprobes {
        "kprobe"
    } else {
        ""
    };
    assert_eq!(
        route_get["mode"].as_str().unwrap_or(""),
        expected,
        "{route_get}"
    );
    assert!(!route_get["reason"].as_str().unwrap().is_empty());
    let ipvs = plan
        .iter()
        .find(|p| p["function"] == "ip_vs_genl_set_cmd")
        .unwrap();
    let ipvs_loaded = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["name"] == "ip_vs_genl_set_cmd" && f["present"] == true);
    if ipvs_loaded && kernel_has_kprobes {
        // A module function: fentry would need its split BTF, so auto takes kprobe.
        assert_eq!(ipvs["mode"], "kprobe", "{ipvs}");
    }
    if !ipvs_loaded {
        assert!(ipvs["mode"].is_null(), "{ipvs}");
        let reason = ipvs["reason"].as_str().unwrap();
        if expected.is_empty() {
            assert!(reason.contains("captured by the tracepoints"), "{ipvs}");
        } else {
            assert!(reason.contains("not in this kernel"), "{ipvs}");
        }
    }
    let text = Command::new(tool()).arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("verdict      can trace"), "{text}");
    assert!(
        text.contains("kernel handler probes (trace --hooks auto)"),
        "{text}"
    );
    println!("{text}");
}

/// `--hooks fentry|kprobe` on a kernel without that mode is one clear error; with it, the
/// recording header says which mode each handler got.
#[test]
fn forced_hook_modes_fail_clearly_or_are_recorded() {
    require_root();
    let report = doctor_report();
    for (mode, available) in [
        ("fentry", report["fentry"] == true),
        ("kprobe", report["kprobes"] == true),
        ("tracepoint", true),
    ] {
        let out = Command::new(tool())
            .args([
                "trace",
                "--hooks",
                mode,
                "--format",
                "json",
                "--duration",
                "0.5",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !available {
            assert_eq!(out.status.code(), Some(2), "{mode}: {stderr}");
            assert!(stderr.contains(&format!("--hooks {mode}:")), "{stderr}");
            assert!(stderr.contains("--hooks auto"), "{stderr}");
            assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
            continue;
        }
        assert_eq!(out.status.code(), Some(0), "{mode}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let header: serde_json::Value =
            serde_json::from_str(stdout.lines().next().expect("header line")).unwrap();
        assert_eq!(header["kind"], "header");
        assert_eq!(header["hook_preference"], mode, "{header}");
        let modes = header["handler_hooks"].as_object().unwrap();
        assert_eq!(modes.len(), 9, "{header}");
        for (function, got) in modes {
            if mode == "tracepoint" {
                assert_eq!(got, "off", "{function}");
            } else {
                assert!(got == mode || got == "off", "{function}: {got}");
            }
        }
        if mode != "tracepoint" {
            assert_eq!(modes["inet_rtm_getroute"], mode, "{header}");
        }
    }
}
