//! Report tests: the page of each seed recording against its golden file
//! (`tests/golden/report/`; `cargo xtask bless` rewrites them), and what a person
//! must be able to rely on — hostile names are text, links resolve, nothing is fetched.
use std::path::{Path, PathBuf};

use crate::command::report::html_of_recording;

fn seeds() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/seeds");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    found.sort();
    assert_eq!(found.len(), 5, "five seed recordings in {}", dir.display());
    found
}

fn report_of(path: &Path) -> String {
    let name = path.file_name().unwrap().to_string_lossy();
    let text = std::fs::read(path).unwrap();
    html_of_recording(path, &text[..], &format!("tests/fixtures/seeds/{name}")).unwrap()
}

/// The ids an HTML attribute list names: `id="…"` values.
fn ids(html: &str) -> Vec<&str> {
    html.split(" id=\"")
        .skip(1)
        .map(|rest| &rest[..rest.find('"').unwrap()])
        .collect()
}

#[test]
fn each_seed_report_matches_its_golden_file() {
    let golden_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/report");
    for seed in seeds() {
        let html = report_of(&seed).replace(env!("CARGO_PKG_VERSION"), "VERSION");
        let golden = golden_dir.join(seed.with_extension("html").file_name().unwrap());
        crate::golden::assert_golden(&golden, html.as_bytes());
    }
}

#[test]
fn every_seed_report_links_each_diagnosis_to_rows_that_exist() {
    for seed in seeds() {
        let html = report_of(&seed);
        let ids = ids(&html);
        let cards = html.matches("<article class=\"diagnosis\"").count();
        assert!(cards >= 1, "{}: no diagnosis card", seed.display());
        let links: Vec<&str> = html
            .split("<a class=\"evidence\" href=\"#")
            .skip(1)
            .map(|rest| &rest[..rest.find('"').unwrap()])
            .collect();
        assert!(!links.is_empty(), "{}: no evidence link", seed.display());
        for link in links {
            assert!(
                ids.contains(&link),
                "{}: #{link} goes nowhere",
                seed.display()
            );
        }
        assert!(
            html.contains("class=\"row decision\""),
            "{}",
            seed.display()
        );
        assert!(html.contains("data-lane=\"kernel\""));
        // Self-contained: nothing that could fetch.
        assert!(html.contains("default-src 'none'"));
        for fetching in [
            "<script", "<link", "<img", "<iframe", "http://", "https://", "url(http",
        ] {
            let allowed = html.matches("http://www.w3.org/2000/svg").count();
            let count = html.matches(fetching).count();
            let count = if fetching == "http://" {
                count - allowed
            } else {
                count
            };
            assert_eq!(count, 0, "{}: {fetching}", seed.display());
        }
        // Every id is unique.
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "{}: duplicate ids", seed.display());
    }
}

#[test]
fn hostile_names_from_the_node_render_as_text() {
    let line = |body: &str, comm: &str| {
        format!(
            r#"{{"ts":"2026-11-22T10:00:00.000001Z","ts_ns":1000,"pid":7,"tid":7,"comm":{},{body}}}"#,
            serde_json::to_string(comm).unwrap()
        )
    };
    let comm = "<script>alert(1)</script>";
    let recording = [
        r#"{"ts":"2026-11-22T10:00:00Z","ts_ns":0,"pid":0,"tid":0,"comm":"","kind":"header","schema":2,"tool_version":"x","kernel":"6.1","host":"\"><img src=x onerror=alert(1)>","hooks":[],"filters":[],"clock_offset_ns":0}"#.to_string(),
        line(
            r#""kind":"getaddrinfo","node":"<b>node</b>","service":null,"family":"AF_INET","socktype":"0","flags":[],"ret":"OK","ret_code":0,"addresses":["10.0.0.1"],"results":[],"results_truncated":false,"start_ns":900,"duration_ns":100"#,
            comm,
        ),
        line(
            r#""kind":"diagnosis","id":"gai-reordered","severity":"warning","summary":"<i>s</i>","evidence":["getaddrinfo at 2026-11-22T10:00:00.000001Z (ts_ns 1000) by <script>[7]"],"remedy":"&amp;""#,
            "",
        ),
    ]
    .join("\n");
    let html =
        html_of_recording(Path::new("hostile.jsonl"), recording.as_bytes(), "hostile").unwrap();
    assert!(!html.contains("<script"), "{html}");
    assert!(!html.contains("<img"), "{html}");
    assert!(!html.contains("<b>node"), "{html}");
    assert!(!html.contains("<i>s"), "{html}");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;[7]"));
    assert!(html.contains("&amp;amp;"));
    // The diagnosis still links to the call's row.
    assert!(
        html.contains("<a class=\"evidence\" href=\"#row-1\">"),
        "{html}"
    );
}

#[test]
fn an_empty_stream_is_still_a_page_that_says_so() {
    let html = html_of_recording(Path::new("empty.jsonl"), &b""[..], "empty").unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("No known failure pattern was found"));
    assert!(html.contains("Nothing to draw"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn past_the_row_budget_the_picture_stops_and_says_how_much_more_there_is() {
    let seed = seeds()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("003-"))
        .unwrap();
    let text = std::fs::read_to_string(&seed).unwrap();
    let conversation: serde_json::Value = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "conversation")
        .unwrap();
    let mut lines = Vec::new();
    let conversations = super::MAX_ROWS; // two rows each
    for n in 0..conversations as u64 {
        let mut e = conversation.clone();
        e["ts_ns"] = serde_json::json!(1_000_000 + n * 1000);
        lines.push(e.to_string());
    }
    let html =
        html_of_recording(Path::new("many.jsonl"), lines.join("\n").as_bytes(), "many").unwrap();
    let drawn = html.matches("<g class=\"row").count();
    assert_eq!(drawn, super::MAX_ROWS);
    assert!(
        html.contains(&format!(
            "{} more rows are not drawn",
            2 * conversations - super::MAX_ROWS
        )),
        "the notice says how many rows were left out"
    );
    assert!(html.contains("id=\"rows-left-out\""));
}

/// A plain nlmon capture: lanes by netlink port, its diagnosis linked, and a route answered
/// before the capture's first link dump names its device (the report reads the file twice).
#[test]
fn a_capture_reports_by_port_with_device_names_from_anywhere_in_it() {
    let capture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/nlmon/iproute2-secondary-ipvs.pcap");
    let out = std::env::temp_dir().join(format!("nit-capture-report-{}.html", std::process::id()));
    let done = crate::command::report::run(&crate::command::report::ReportOptions {
        input: capture,
        output: Some(out.clone()),
        format: crate::sink::OutputFormat::Html,
        genl_families: Vec::new(),
    })
    .unwrap();
    assert_eq!(done.input_kind, crate::command::report::InputKind::Capture);
    let html = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    assert!(
        html.contains("data-lane=\"port[143]\""),
        "the diagnosed port has its own lane"
    );
    assert!(html.contains("data-id=\"route-get-resolves-to-lo\""));
    assert!(html.contains("<a class=\"evidence\" href=\"#row-"));
    assert!(html.contains("127.0.0.1/32 table main dev lo src 127.0.0.1"));
    assert!(!html.contains("dev 1 "), "a device by its index");
}
