//! End to end (issue 51): kubelet's node IP as the trace replays it, judged by kubelet's own
//! rule run for real. `tests/clients/kubelet_node_ip.go` is NodeAddress without `--node-ip`
//! (`net.LookupIP`, then `validateNodeIP` against `net.InterfaceAddrs()`), built as a program
//! named `kubelet` with Go's own resolver and with cgo (glibc); it prints its pick. The trace's
//! `node-ip-picked` diagnosis must name the same address (or no address) for each lookup: a
//! node name whose hosts entry mixes an address on no interface, a secondary and the primary,
//! and one whose only address is on no interface.
use nodeip_trace_tests::go::{require_go_toolchains, GoBuild};
use nodeip_trace_tests::seeds::{in_ns, node};
use nodeip_trace_tests::{require_root, trace_json, workspace_root};

#[test]
fn the_live_kubelet_pick_is_kubelet_s_own() {
    require_root();
    let dir = workspace_root().join("target/kubelet-pick");
    let newest = require_go_toolchains().pop().unwrap();
    let source = workspace_root().join("tests/clients/kubelet_node_ip.go");
    let mut programs = Vec::new();
    for (cgo, sub) in [(false, "go"), (true, "cgo")] {
        let out = dir.join(sub).join("kubelet");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let how = GoBuild {
            cgo,
            stripped: true,
            ..GoBuild::default()
        };
        newest.build(&source, &out, how).unwrap();
        programs.push((
            out,
            if cgo {
                "GODEBUG=netdns=cgo"
            } else {
                "GODEBUG=netdns=go"
            },
        ));
    }
    let (ns, _peer) = node(
        "kpick",
        &[
            &["10.88.0.6/24", "dev", "eth0"],
            &["10.88.0.20/24", "dev", "eth0"],
        ],
    );
    ns.etc_file(
        "hosts",
        "127.0.0.1 localhost\n10.88.0.99 node-a\n10.88.0.20 node-a\n10.88.0.6 node-a\n\
         10.99.0.1 node-b\n",
    );
    let mut script = String::new();
    for (program, env) in &programs {
        for name in ["node-a", "node-b"] {
            script.push_str(&format!("env {env} '{}' {name}; ", program.display()));
        }
    }
    let run = trace_json(&["--no-route-lookups"], &in_ns(&ns, &["sh", "-c", &script]));
    assert!(run.output.status.success(), "trace failed: {}", run.stderr);

    // kubelet's own picks, in run order (its stdout went to the tracer's stderr).
    let own: Vec<String> = run
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("pick "))
        .map(str::to_string)
        .collect();
    assert_eq!(own.len(), 4, "{}", run.stderr);
    // The trace's, in the same order.
    let traced: Vec<String> = run
        .of_kind("diagnosis")
        .into_iter()
        .filter(|d| d["id"] == "node-ip-picked")
        .map(|d| {
            let summary = d["summary"].as_str().unwrap();
            match summary.split_once(" takes ") {
                Some((_, rest)) => rest.split(' ').next().unwrap().to_string(),
                None if summary.contains("finds no valid node IP") => "none".to_string(),
                None => panic!("neither a pick nor none: {summary}"),
            }
        })
        .collect();
    assert_eq!(traced, own, "{}", run.stderr);
    assert_eq!(own[1], "none", "node-b's one address is on no interface");
    assert_eq!(own[3], "none");
}
