//! `trace --report FILE` (issue 19): a live trace of seed incident 000 writes the postmortem page
//! when it ends — the traced process's lane, the diagnosis card linked to its decision rows, the
//! resolver call's pair table — created 0600, and the same page as `nodeip-trace report` makes
//! from the trace's own recording (live and offline tell one story).
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use nodeip_trace_tests::{require_root, seeds, tool, workspace_root};

/// The page with the parts that differ between two runs of the same events taken out: what it
/// was made from (a live trace, a file).
fn comparable(html: &str) -> String {
    html.lines()
        .filter(|l| !l.starts_with("<dt>Made from</dt>"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_live_trace_writes_the_report_of_what_it_saw() {
    require_root();
    let dir = workspace_root().join("target/report");
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("live-000.html");
    let recording = dir.join("live-000.jsonl");
    let _ = std::fs::remove_file(&page);
    let node = seeds::layout(0, "lrep");
    let (page_arg, recording_arg) = (page.display().to_string(), recording.display().to_string());
    let run = seeds::trace_incident(
        0,
        &node,
        "",
        &["--report", &page_arg, "--output", &recording_arg],
    );
    assert!(run.output.status.success(), "{}", run.stderr);
    let call = run.of_kind("getaddrinfo")[0];
    let lane = format!("data-lane=\"getent[{}]\"", call["pid"]);

    let html = std::fs::read_to_string(&page).expect("trace --report wrote no page");
    let mode = std::fs::metadata(&page).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the report names processes and addresses");
    assert!(
        html.contains(&lane),
        "no lane for the traced process:\n{html}"
    );
    assert!(html.contains("data-lane=\"kernel\""));
    assert!(html.contains("data-id=\"gai-reordered\""), "{html}");
    assert!(
        html.contains("<a class=\"evidence\" href=\"#row-"),
        "{html}"
    );
    assert!(html.contains("class=\"row decision\""));
    assert!(
        html.contains("rule 9"),
        "the pair table names the deciding rule"
    );
    assert!(html.contains("<dt>Made from</dt><dd>a live trace</dd>"));

    let offline = dir.join("live-000-offline.html");
    let made = Command::new(tool())
        .arg("report")
        .arg(&recording)
        .arg("-o")
        .arg(&offline)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let offline_html = std::fs::read_to_string(&offline).unwrap();
    assert_eq!(
        comparable(&html),
        comparable(&offline_html),
        "the live page and the recording's page differ: compare {} and {}",
        page.display(),
        offline.display()
    );
}
