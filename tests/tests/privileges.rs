//! Issue 9 (privileges): `trace` without what it needs is one clear error that names what is
//! missing and what still works — not root (uid nobody), and root with CAP_BPF, CAP_PERFMON and
//! CAP_SYS_ADMIN dropped from the bounding set (as a container runtime does) — and what it says
//! still works does: `analyze` of a capture and `doctor` as nobody. (Lockdown and missing BTF
//! cannot be made on a running kernel: their texts are unit tests in `probe::features`.)
//! Issue 21: what the running tracer keeps once attached.
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

use nodeip_trace_tests::{require_root, run_ok, tool, workspace_root, ScratchDir};

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

/// A `/proc/PID/status` capability line's value.
fn status_field(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| u64::from_str_radix(v.trim(), 16).unwrap())
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// Issue 21 (fleet security): once attached, the running tracer keeps only CAP_BPF,
/// CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH (what attaching to a
/// process that starts later needs: container_libc.rs and runtime_attribution.rs prove that
/// still works) — effective, permitted and bounding sets alike, nothing inheritable or ambient,
/// no_new_privs set — while `trace -- COMMAND` still runs the command with the caller's
/// capabilities. The tracer runs without transparent huge pages, the command with them.
#[test]
fn the_running_tracer_keeps_only_what_late_attach_needs() {
    require_root();
    let scratch = ScratchDir::new("dropped-caps");
    let ready = scratch.file("ready");
    let mut tracer = Command::new(tool())
        .args(["trace", "-v", "--duration", "10", "--ready-file", &ready])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::path::Path::new(&ready).exists() {
        assert!(std::time::Instant::now() < deadline, "no ready file");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", tracer.id())).unwrap();
    // Capabilities are per thread: every thread of the tracer has the reduced set.
    let threads: Vec<u64> = std::fs::read_dir(format!("/proc/{}/task", tracer.id()))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .map(|s| status_field(&s, "CapEff:"))
        .collect();
    let _ = tracer.kill();
    let out = tracer.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // CAP_DAC_READ_SEARCH (2), CAP_SYS_PTRACE (19), CAP_SYS_ADMIN (21), CAP_PERFMON (38),
    // CAP_BPF (39).
    let kept: u64 = 1 << 2 | 1 << 19 | 1 << 21 | 1 << 38 | 1 << 39;
    for field in ["CapEff:", "CapPrm:", "CapBnd:"] {
        assert_eq!(
            status_field(&status, field),
            kept,
            "{field} {status}\n{stderr}"
        );
    }
    assert!(threads.iter().all(|t| *t == kept), "{threads:x?}");
    assert_eq!(status_field(&status, "CapInh:"), 0, "{status}");
    assert_eq!(status_field(&status, "CapAmb:"), 0, "{status}");
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    // No transparent huge pages for the tracer (khugepaged made its heap resident 2 MiB at a
    // time on kernels whose THP is `always`: host::huge_pages).
    assert!(status.contains("THP_enabled:\t0"), "{status}");
    assert!(
        stderr.contains("capabilities dropped; kept CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH"),
        "{stderr}"
    );

    // The command keeps the caller's capabilities.
    let own = status_field(
        &std::fs::read_to_string("/proc/self/status").unwrap(),
        "CapEff:",
    );
    let out = Command::new(tool())
        .args(["trace", "--", "grep", "CapEff:", "/proc/self/status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("CapEff:"))
        .unwrap_or_else(|| panic!("{text}{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(status_field(line, "CapEff:"), own, "{line}");

    // … and the caller's huge-page setting, not the tracer's.
    let out = Command::new(tool())
        .args(["trace", "--", "grep", "THP_enabled:", "/proc/self/status"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("THP_enabled:\t1"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sudo trace --pcapng ~/x.pcapng`: the directory is another user's, which root may write only
/// with CAP_DAC_OVERRIDE, dropped once attached. The diagnoses and summary still reach the
/// section header at the end (rewritten in place, as no copy can be made beside the file), the
/// trace exits 0 and leaves nothing else in the directory.
#[test]
fn a_pcapng_in_another_user_s_directory_still_gets_its_comments() {
    require_root();
    let scratch = ScratchDir::new("pcapng-owner");
    let dir = scratch.path.join("home-of-nobody");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: chown of a directory this test made, to nobody (65534).
    assert_eq!(unsafe { libc::chown(c_dir.as_ptr(), 65534, 65534) }, 0);
    let capture = dir.join("incident.pcapng");
    let out = Command::new(tool())
        .args(["trace", "--duration", "2", "--pcapng"])
        .arg(&capture)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("outputs that failed"), "{stderr}");
    let bytes = std::fs::read(&capture).unwrap();
    let has = |text: &str| bytes.windows(text.len()).any(|w| w == text.as_bytes());
    assert!(
        has("trace summary:"),
        "no summary comment in the section header"
    );
    assert!(has("at the end of the trace"), "no diagnoses comment");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from("incident.pcapng")]);
    // Still a capture our reader (and Wireshark's) takes.
    run_ok(
        Command::new(tool())
            .args(["analyze", "--format", "json"])
            .arg(&capture),
    );
}
