//! Bad input gives a one-line error that says what to do, and a non-zero exit — never a panic.
use std::process::Command;

use nodeip_trace_tests::tool;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(tool())
        .args(args)
        .output()
        .expect("running nodeip-trace");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unknown_pid_is_a_clear_error() {
    let (code, err) = run(&["trace", "--pid", "999999999", "--duration", "1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("no process with pid 999999999"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn missing_command_is_a_clear_error() {
    let (code, err) = run(&["trace", "--", "/nonexistent/command"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("cannot run `/nonexistent/command`"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// The names of the files in a scratch directory.
fn names_in(dir: &nodeip_trace_tests::ScratchDir) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(&dir.path)
        .expect("listing the scratch directory")
        .map(|e| e.expect("a directory entry").file_name())
        .collect()
}

#[test]
fn a_trace_that_fails_to_start_leaves_no_new_output_files() {
    let dir = nodeip_trace_tests::ScratchDir::new("unstarted");
    let (rec, pcap, kept) = (
        dir.file("rec.jsonl"),
        dir.file("x.pcap"),
        dir.file("kept.pcapng"),
    );
    std::fs::write(&kept, b"an earlier file").expect("writing the earlier file");
    // Outputs are opened before the probes are attached; the command then cannot be run.
    let (code, err) = run(&[
        "trace",
        "-o",
        &rec,
        "--pcap",
        &pcap,
        "--pcapng",
        &kept,
        "--",
        "/nonexistent/command",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot run `/nonexistent/command`"), "{err}");
    for made in [&rec, &pcap] {
        assert!(
            !std::path::Path::new(made).exists(),
            "{made} was left after a failed start"
        );
    }
    assert_eq!(
        std::fs::read(&kept).ok().as_deref(),
        Some(&b"an earlier file"[..]),
        "a file that was there before is neither removed nor truncated"
    );
    assert_eq!(names_in(&dir), ["kept.pcapng"], "no copy is left beside it");
}

#[test]
fn a_trace_that_starts_replaces_an_earlier_output_file() {
    let dir = nodeip_trace_tests::ScratchDir::new("replaced");
    let rec = dir.file("rec.jsonl");
    std::fs::write(&rec, b"an earlier file").expect("writing the earlier file");
    // Someone else's file (nobody's): the replacement keeps its owner, as truncating it did.
    std::os::unix::fs::chown(&rec, Some(65534), Some(65534)).expect("giving the file to nobody");
    let (code, err) = run(&["trace", "-o", &rec, "--", "true"]);
    assert_eq!(code, Some(0), "{err}");
    let text = std::fs::read_to_string(&rec).expect("reading the recording");
    assert!(
        text.starts_with("{") && !text.contains("an earlier file"),
        "the recording replaced the earlier file: {text:.200}"
    );
    assert_eq!(names_in(&dir), ["rec.jsonl"], "no copy is left beside it");
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(&rec).expect("the recording's metadata");
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (65534, 65534, 0o600),
        "the replacement keeps the owner, owner-only"
    );
}

#[test]
fn bad_flag_values_are_clear_errors() {
    for (args, needle) in [
        (
            vec!["trace", "--duration", "0"],
            "--duration must be a positive",
        ),
        (vec!["trace", "--ring-buffer-mib", "3"], "power of two"),
        (
            vec!["trace", "--netlink-family", "bogus"],
            "unknown netlink family",
        ),
        (
            vec!["trace", "--comm", "a-very-long-process-name"],
            "longer than 15",
        ),
        (vec!["trace", "--genl-family", "IPVS"], "expects NAME=ID"),
        (vec!["trace", "--genl-family", "=0x3f"], "expects NAME=ID"),
        (
            vec!["trace", "--genl-family", "IPVS=0xzz"],
            "is not a number",
        ),
        (vec!["trace", "--genl-family", "IPVS=0x10"], "nlctrl"),
        (
            vec!["trace", "--genl-family", "IPVS=4096"],
            "run from 0x11 to 0x3ff",
        ),
        (
            vec!["trace", "--genl-family", "ipvs=0x3f"],
            "case-sensitive",
        ),
        (
            vec![
                "trace",
                "--genl-family",
                "IPVS=0x3f",
                "--genl-family",
                "X=63",
            ],
            "two names",
        ),
        (
            vec!["analyze", "--genl-family", "IPVS", "capture.pcap"],
            "expects NAME=ID",
        ),
        (
            vec!["trace", "--max-output-mib", "0"],
            "--max-output-mib must be at least 1",
        ),
    ] {
        let (code, err) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}

/// `report`'s mistakes: a missing input, an output that is its input, an output it cannot
/// create, a recording cut mid-line (the page of what came before is still written and named).
#[test]
fn report_errors_say_what_and_keep_what_they_can() {
    let dir = std::env::temp_dir().join(format!("nit-report-errors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let seed =
        nodeip_trace_tests::workspace_root().join("tests/fixtures/seeds/000-gai-reordered.jsonl");
    let text = std::fs::read_to_string(&seed).unwrap();
    let cut = dir.join("cut.jsonl");
    let head: Vec<&str> = text.lines().take(5).collect();
    std::fs::write(&cut, format!("{}\n{{\"ts\":", head.join("\n"))).unwrap();
    let (cut_s, page) = (cut.display().to_string(), dir.join("cut.html"));

    let (code, err) = run(&["report", "/nonexistent/incident.jsonl"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("/nonexistent/incident.jsonl"), "{err}");
    let (code, err) = run(&["report", &cut_s, "-o", &cut_s]);
    assert_eq!(code, Some(2));
    assert!(err.contains("would overwrite its own input"), "{err}");
    let (code, err) = run(&["report", &cut_s, "-o", "/nonexistent/dir/r.html"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("cannot create /nonexistent/dir/r.html"),
        "{err}"
    );
    let (code, err) = run(&["report", &cut_s]);
    assert_eq!(code, Some(2));
    assert!(err.contains("line 6"), "{err}");
    assert!(err.contains(&format!("is in {}", page.display())), "{err}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.trim_end().ends_with("</html>"),
        "a whole page of what came before"
    );
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `report -` reads standard input — a recording, or a capture from a pipe — and, having no
/// file name to make the report's from, asks for --output.
#[test]
fn report_reads_standard_input_and_asks_where_to_write() {
    let dir = nodeip_trace_tests::ScratchDir::new("report-stdin");
    let root = nodeip_trace_tests::workspace_root();
    let (code, err) = run(&["report", "-"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("give the report's file with --output"),
        "{err}"
    );
    for input in [
        "tests/fixtures/seeds/000-gai-reordered.jsonl",
        "tests/fixtures/nlmon/iproute2-secondary-ipvs.pcap",
    ] {
        let page = dir.file("page.html");
        let out = Command::new(tool())
            .args(["report", "-", "-o", &page])
            .stdin(std::fs::File::open(root.join(input)).expect("opening the input"))
            .output()
            .expect("running nodeip-trace");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{input}: {err}");
        let html = std::fs::read_to_string(&page).expect("reading the page");
        assert!(
            html.trim_end().ends_with("</html>"),
            "{input}: a whole page"
        );
        assert!(html.contains("standard input"), "{input}: its source named");
        assert!(html.contains("<g class=\"row\""), "{input}: rows drawn");
    }
}

/// Issue 21 (fleet security): `trace` never writes a capture where the traced pods could read it
/// or plant a symbolic link: kubelet's pod volumes, the runtimes' directories — also through a
/// link that leads there, and below a mount of the host's root (`/host/var/lib/…`). Refused
/// before anything is attached, one line naming the path, where it leads and what to do;
/// nothing is created.
#[test]
fn outputs_into_directories_the_pods_control_are_refused() {
    let dir = std::env::temp_dir().join(format!("nit-pod-paths-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let pods = dir.join("host/var/lib/kubelet/pods/uid/volumes/v");
    std::fs::create_dir_all(&pods).unwrap();
    let link = dir.join("innocent");
    std::os::unix::fs::symlink(&pods, &link).unwrap();
    let through_link = link.join("capture.pcap").display().to_string();
    let under_host = pods.join("rec.jsonl").display().to_string();
    for (flag, path, what) in [
        ("--pcap", through_link.as_str(), "kubelet's pod volumes"),
        ("-o", under_host.as_str(), "kubelet's pod volumes"),
        (
            "--pcapng",
            "/run/containerd/x/rootfs/c.pcapng",
            "containerd's running containers",
        ),
        (
            "--report",
            "/var/lib/containers/storage/r.html",
            "podman/CRI-O's container root filesystems",
        ),
    ] {
        let (code, err) = run(&["trace", "--duration", "1", flag, path]);
        assert_eq!(code, Some(2), "{flag} {path}: {err}");
        assert!(err.contains(&format!("refusing to write {path}")), "{err}");
        assert!(err.contains(what), "{err}");
        assert!(err.contains("write it elsewhere"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    assert!(
        std::fs::read_dir(&pods).unwrap().next().is_none(),
        "a refused output was created anyway"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `explain`'s kubelet and calico flags are read as kubelet and calico read them, and a value
/// they would refuse is one line that says why.
#[test]
fn explain_refuses_what_kubelet_and_calico_would() {
    for (args, said) in [
        (
            &["explain", "--node-ip", "10.0.0.1,10.0.0.2"][..],
            "must contain either a single IP or a dual-stack pair of IPs",
        ),
        (
            &["explain", "--node-ip", "10.0.0.1,node-a"][..],
            "node-a is not an IP address",
        ),
        (
            &["explain", "--kubelet-resolver", "rust"][..],
            "expected go, glibc or musl",
        ),
        (&["explain", "--calico-version", "three"][..], "three"),
    ] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
