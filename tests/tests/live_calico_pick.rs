//! End to end (issue 51): calico-node's IPv4 address as the trace replays it, judged by calico's
//! own rule run for real. `tests/clients/calico_autodetect.go` (calico's first-found as
//! calico's source has it) runs as a program named `calico-node` in a namespace whose
//! interfaces are named as a node's are — an uplink, a Docker `br-` bridge (calico#1628), a
//! `cali…` pod veth, `kube-ipvs0` — and prints its pick; the trace's `node-ip-picked` diagnosis,
//! replayed from the link and address dumps the program made, must name the same address. A
//! second namespace holds only addresses calico refuses (excluded interfaces, link-local):
//! both say none.
use nodeip_trace_tests::go::newest_client;
use nodeip_trace_tests::seeds::in_ns;
use nodeip_trace_tests::{require_root, trace_json, workspace_root, Netns};

/// A namespace with veth pairs named `pairs` (both ends inside) and `addresses` (`ip addr add`
/// arguments).
fn namespace(tag: &str, pairs: &[(&str, &str)], addresses: &[&str]) -> Netns {
    let ns = Netns::new(tag);
    ns.ip(&["link", "set", "lo", "up"]);
    for (a, b) in pairs {
        ns.ip(&["link", "add", a, "type", "veth", "peer", "name", b]);
        ns.ip(&["link", "set", a, "up"]);
        ns.ip(&["link", "set", b, "up"]);
    }
    for args in addresses {
        let mut full = vec!["addr", "add"];
        full.extend(args.split_whitespace());
        ns.ip(&full);
    }
    ns
}

/// The address a `node-ip-picked` diagnosis by calico-node names, or `none`.
fn traced_pick(summary: &str) -> String {
    match summary.split_once(" detects ") {
        Some((_, rest)) if rest.starts_with("no IPv4 address") => "none".into(),
        Some((_, rest)) => rest.split(' ').next().unwrap().to_string(),
        None => panic!("not calico-node's pick: {summary}"),
    }
}

#[test]
fn the_live_calico_pick_is_calico_s_own() {
    require_root();
    let built = newest_client("calico_autodetect.go", false);
    let dir = workspace_root().join("target/calico-pick");
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join("calico-node");
    std::fs::copy(&built, &program).unwrap();
    let program = program.display().to_string();

    let node = namespace(
        "cpick",
        &[("eth0", "br-3f2a9c"), ("cali1a2b3c", "kube-ipvs0")],
        &[
            "10.88.0.6/24 dev eth0",
            "10.88.0.20/24 dev eth0",
            "172.18.0.1/16 dev br-3f2a9c",
            "10.96.0.10/32 dev kube-ipvs0",
            "169.254.1.1/32 dev cali1a2b3c",
        ],
    );
    let refused = namespace(
        "cpick-none",
        &[("docker0", "veth7f3e"), ("ens3", "flannel.1")],
        &[
            "172.17.0.1/16 dev docker0",
            "169.254.7.7/16 dev ens3",
            "10.244.0.0/32 dev flannel.1",
        ],
    );
    let mut picks = Vec::new();
    for ns in [&node, &refused] {
        let run = trace_json(
            &["--no-route-lookups"],
            &in_ns(ns, &[program.as_str(), "first-found"]),
        );
        assert!(run.output.status.success(), "trace failed: {}", run.stderr);
        // calico's own pick (its stdout went to the tracer's stderr).
        let own = run
            .stderr
            .lines()
            .find_map(|l| {
                l.strip_prefix("pick ")
                    .map(|p| p.split('/').next().unwrap().to_string())
                    .or_else(|| l.starts_with("none:").then(|| "none".to_string()))
            })
            .unwrap_or_else(|| panic!("calico-node printed no pick: {}", run.stderr));
        let traced: Vec<String> = run
            .of_kind("diagnosis")
            .into_iter()
            .filter(|d| d["id"] == "node-ip-picked")
            .map(|d| traced_pick(d["summary"].as_str().unwrap()))
            .collect();
        assert_eq!(traced, std::slice::from_ref(&own), "{}", run.stderr);
        picks.push(own);
    }
    // The uplink's first address: br-… is excluded (since v3.25.0), cali… and kube-ipvs0 too.
    assert_eq!(picks, ["10.88.0.6", "none"]);
}
