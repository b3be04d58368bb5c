//! Seed 000 (`shared/seeds/000_*`) with every resolver a node's processes use, traced live in
//! one run: the layout where the alias 172.18.45.20 is the /27's primary and /etc/hosts lists
//! 172.18.45.6 first. glibc (`getent ahosts`) and a Go program sent through cgo to glibc reorder
//! to .20 by rule 9 (`gai-reordered`, naming who reordered); musl, Go's own resolver and Go's
//! `LookupHost` keep .6 first, each event saying so; and `resolvers-disagree` says the node's
//! resolvers split. Judged by each client's own output. The text timeline is kept in
//! `target/seed-000-resolvers.txt` (docs/resolvers.md quotes it).
use std::process::Command;

use nodeip_trace_tests::go::{require_go_toolchains, GoBuild};
use nodeip_trace_tests::{json_lines, require_root, tool, trace_after_probing, workspace_root};

#[test]
fn seed_000_under_glibc_musl_go_and_cgo() {
    require_root();
    let dir = workspace_root().join("target/seed-000");
    std::fs::create_dir_all(&dir).unwrap();
    let newest = require_go_toolchains().pop().unwrap();
    let source = workspace_root().join("tests/clients/lookup_ip.go");
    let (go, cgo) = (dir.join("kube-proxy-like"), dir.join("kubelet-like"));
    for (out, with_cgo) in [(&go, false), (&cgo, true)] {
        let how = GoBuild {
            cgo: with_cgo,
            stripped: true,
            ..GoBuild::default()
        };
        newest.build(&source, out, how).unwrap();
    }
    let musl = nodeip_trace_tests::musl::build_lookup_addrs(&dir, false).unwrap();

    let (ns, _peer) = nodeip_trace_tests::seed_000_node(
        "s000r",
        "127.0.0.1 localhost\n172.18.45.6 node-a\n172.18.45.20 node-a\n",
        true,
    );

    let recording = dir.join("trace.jsonl");
    let judged = format!(
        "getent ahosts node-a; '{m}' node-a; \
         GODEBUG=netdns=go '{g}' node-a; GODEBUG=netdns=go '{g}' -host node-a; \
         GODEBUG=netdns=cgo '{c}' node-a",
        m = musl.display(),
        g = go.display(),
        c = cgo.display()
    );
    let out = trace_after_probing(
        // JSON on stdout, so the clients' output goes whole to the tracer's stderr.
        &[
            "--format",
            "json",
            "--no-route-lookups",
            "-o",
            &recording.display().to_string(),
        ],
        &ns.name,
        &[],
        &[
            (&go, "Go resolver", "node-a"),
            (&cgo, "Go resolver", "node-a"),
        ],
        &judged,
        &dir.join("tracer-stderr"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let printed = &stderr;
    assert!(out.status.success(), "{stderr}");
    let events = json_lines(&std::fs::read(&recording).unwrap());
    let lookups: Vec<_> = events
        .iter()
        .filter(|e| e["kind"] == "getaddrinfo" && e["node"] == "node-a")
        .collect();
    let find = |resolver: &str, caller: Option<&str>, comm: &str| {
        lookups
            .iter()
            .find(|e| {
                e["resolver"].as_str().unwrap_or("glibc") == resolver
                    && e["caller"].as_str() == caller
                    && e["comm"].as_str().unwrap_or_default().starts_with(comm)
            })
            .unwrap_or_else(|| {
                panic!("no {resolver} {caller:?} event from {comm}: {lookups:#?}\n{stderr}")
            })
    };
    let first = |e: &serde_json::Value| e["addresses"][0].as_str().unwrap().to_string();
    // Reordered by rule 9: glibc, and Go through cgo to glibc.
    for e in [
        find("glibc", None, "getent"),
        find("glibc", Some("go-cgo"), "kubelet-like"),
    ] {
        assert_eq!(first(e), "172.18.45.20", "{e}");
        assert_eq!(e["why"]["matches"], true, "{e}");
    }
    // Kept: musl (no IPv6 answer: no sort), Go's sort (rule 9 is IPv6-only), Go's LookupHost.
    for e in [
        find("musl", None, "lookup-musl"),
        find("go", None, "kube-proxy-like"),
        find("go_hosts", None, "kube-proxy-like"),
    ] {
        assert_eq!(first(e), "172.18.45.6", "{e}");
        assert_eq!(e["why"]["matches"], true, "{e}");
    }
    // The clients' own output agrees: getent's first line, then each client's line.
    let getent_first = printed.lines().find(|l| l.starts_with("172.18.45."));
    assert!(
        getent_first.is_some_and(|l| l.starts_with("172.18.45.20 ")),
        "{printed}"
    );
    for want in [
        "node-a 172.18.45.6 172.18.45.20",
        "host node-a 172.18.45.6 172.18.45.20",
        "node-a 172.18.45.20 172.18.45.6",
    ] {
        assert!(
            printed.lines().any(|l| l == want),
            "no {want:?} in {printed}"
        );
    }
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["kind"] == "diagnosis")
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert!(ids.contains(&"gai-reordered"), "{ids:?}");
    assert!(ids.contains(&"resolvers-disagree"), "{ids:?}");

    // As a person reads it.
    let text = Command::new(tool())
        .arg("replay")
        .arg(&recording)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    for want in [
        "getaddrinfo(\"node-a\"",
        "musl getaddrinfo(\"node-a\"",
        "go lookup(\"node-a\") = OK [172.18.45.6, 172.18.45.20]",
        "go LookupHost(\"node-a\") = OK [172.18.45.6, 172.18.45.20]",
        "go→cgo→glibc getaddrinfo(\"node-a\"",
    ] {
        assert!(text.contains(want), "no {want:?} in\n{text}");
    }
    std::fs::write(
        workspace_root().join("target/seed-000-resolvers.txt"),
        &text,
    )
    .unwrap();
}
