//! Issue 9 (privileges): `trace` without what it needs is one clear error that names what is
//! missing and what still works — not root (uid nobody), and root with CAP_BPF, CAP_PERFMON and
//! CAP_SYS_ADMIN dropped from the bounding set (as a container runtime does) — and what it says
//! still works does: `analyze` of a capture and `doctor` as nobody. (Lockdown and missing BTF
//! cannot be made on a running kernel: their texts are unit tests in `probe::features`.)
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use nodeip_trace_tests::{require_root, tool, workspace_root, ScratchDir};

/// `setpriv ARGS… nodeip-trace TOOL_ARGS…`.
fn as_restricted(setpriv: &[&str], tool_args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(setpriv)
        .arg(tool())
        .args(tool_args)
        .output()
        .expect("running setpriv (util-linux)")
}

const NOBODY: [&str; 4] = [
    "--reuid=nobody",
    "--regid=nogroup",
    "--clear-groups",
    "--inh-caps=-all",
];

#[test]
fn not_root_is_one_error_naming_the_capabilities_and_what_still_works() {
    require_root();
    let out = as_restricted(&NOBODY, &["trace", "--duration", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("cannot trace here: not root and missing CAP_BPF, CAP_PERFMON"),
        "{stderr}"
    );
    assert!(stderr.contains("sudo nodeip-trace trace"), "{stderr}");
    assert!(stderr.contains("`nodeip-trace analyze FILE`"), "{stderr}");
}

#[test]
fn root_without_bpf_capabilities_is_told_which_are_missing() {
    require_root();
    let out = as_restricted(
        &["--bounding-set=-bpf,-perfmon,-sys_admin"],
        &["trace", "--duration", "1"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot trace here: running as root but without CAP_BPF, CAP_PERFMON"),
        "{stderr}"
    );
    // CAP_BPF + CAP_PERFMON without CAP_SYS_ADMIN pass the check (the kernel ≥ 5.8 rule).
    let out = as_restricted(
        &["--bounding-set=-sys_admin"],
        &["doctor", "--format", "json"],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("doctor json: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        report["missing_capabilities"],
        serde_json::json!([]),
        "{report}"
    );
}

#[test]
fn what_the_error_says_still_works_does_work_unprivileged() {
    require_root();
    let scratch = ScratchDir::new("unprivileged");
    std::fs::set_permissions(&scratch.path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let capture = scratch.file("capture.pcap");
    std::fs::copy(
        workspace_root().join("tests/fixtures/nlmon/iproute2-secondary-ipvs.pcap"),
        &capture,
    )
    .unwrap();
    std::fs::set_permissions(&capture, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = as_restricted(&NOBODY, &["analyze", &capture]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.stdout.is_empty());
    let out = as_restricted(&NOBODY, &["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CANNOT load eBPF: missing CAP_BPF, CAP_PERFMON"),
        "{text}"
    );
    assert!(text.contains("verdict      CANNOT trace"), "{text}");
}
