//! End to end (issue 6): each seed incident reproduced live in namespaces the test makes, with
//! real clients, must end in its diagnosis — and the healthy variant of the same layout in none.
//!
//! - 000 `gai-reordered`: `getent ahostsv4` where the alias is the kernel's primary of the /27;
//! - 001 `network-address-used`: `ip addr add` of a prefix's network address;
//! - 002/004 `secondary-address-skipped`: one process reads the local table like kube-proxy's old
//!   path and creates IPVS services for what it found (`ipvs_client --kube-proxy-local-table`;
//!   this kernel has no IPVS, so the commands are refused, but the intent is what is diagnosed);
//! - 003 `route-get-resolves-to-lo`: `ip route get` of an address on kube-ipvs0;
//! - 004: 002 with keepalived's VIP added with a /24 mask (a secondary of the node's /24).
use nodeip_trace_tests::seeds::{
    in_ns, kube_proxy_like, layout, node, trace_incident, SEED_000_HOSTS,
};
use nodeip_trace_tests::{require_root, trace_json, TraceRun};
use serde_json::Value;

const CLIENT: &str = env!("CARGO_BIN_EXE_ipvs_client");

fn diagnoses(run: &TraceRun) -> Vec<&Value> {
    assert!(run.output.status.success(), "trace failed: {}", run.stderr);
    run.of_kind("diagnosis")
}

fn ids(found: &[&Value]) -> Vec<String> {
    found
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect()
}

/// Incident `index` (see `seeds::INCIDENTS`) traced on its own node.
fn incident(index: usize, tag: &str) -> TraceRun {
    trace_incident(index, &layout(index, tag), CLIENT, &[])
}

#[test]
fn seed_000_getaddrinfo_reordered_by_rule_9() {
    require_root();
    let run = incident(0, "s000");
    let found = diagnoses(&run);
    assert_eq!(ids(&found), ["gai-reordered"], "{}", run.stderr);
    let summary = found[0]["summary"].as_str().unwrap();
    assert!(summary.contains("got 172.18.45.20 first"), "{summary}");
    assert!(summary.contains("listed 172.18.45.6 first"), "{summary}");
    assert!(summary.contains("rule 9"), "{summary}");
    let calls = run.of_kind("getaddrinfo");
    let why = &calls[0]["why"];
    assert_eq!(why["matches"], true, "{why:#}");
    assert_eq!(
        why["resolver_order"],
        serde_json::json!(["172.18.45.6", "172.18.45.20"])
    );
    assert_eq!(why["predicted"], calls[0]["addresses"]);

    // Healthy: the primary .6 added first keeps its place (rule 9 ties, rule 10 keeps order).
    let (ns, _peer) = node(
        "s000h",
        &[
            &["172.18.45.6/27", "dev", "eth0"],
            &["172.18.45.20/27", "dev", "eth0", "label", "eth0:vip"],
        ],
    );
    ns.etc_file("hosts", SEED_000_HOSTS);
    let run = trace_json(&[], &in_ns(&ns, &["getent", "ahostsv4", "node-a"]));
    assert!(
        diagnoses(&run).is_empty(),
        "{:#?}",
        run.of_kind("diagnosis")
    );
    assert_eq!(run.of_kind("getaddrinfo")[0]["why"]["matches"], true);
}

#[test]
fn seed_001_network_address_configured() {
    require_root();
    let run = incident(1, "s001");
    let found = diagnoses(&run);
    assert_eq!(ids(&found), ["network-address-used"], "{}", run.stderr);
    let summary = found[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("172.29.231.0 as an address added to an interface"),
        "{summary}"
    );
    assert!(summary.contains("network address"), "{summary}");
    assert_eq!(found[0]["comm"], "ip");

    let (ns, _peer) = node("s001h", &[&["172.29.231.5/24", "dev", "eth0"]]);
    let script = "ip -4 addr show >/dev/null; ip addr add 172.29.231.6/24 dev eth0";
    let run = trace_json(&[], &in_ns(&ns, &["sh", "-c", script]));
    assert!(
        diagnoses(&run).is_empty(),
        "{:#?}",
        run.of_kind("diagnosis")
    );
}

#[test]
fn seed_002_secondary_vip_gets_no_node_port_service() {
    require_root();
    let run = incident(2, "s002");
    let found = diagnoses(&run);
    assert_eq!(ids(&found), ["secondary-address-skipped"], "{}", run.stderr);
    let summary = found[0]["summary"].as_str().unwrap();
    assert!(summary.contains("none for 192.0.2.20"), "{summary}");
    assert!(summary.contains("src 192.0.2.10"), "{summary}");
    assert_eq!(found[0]["comm"], "ipvs_client");

    // Healthy (seed 004's fix): the VIP as a /32 is a primary, so it gets its service.
    let (ns, _peer) = node(
        "s002h",
        &[
            &["192.0.2.10/24", "dev", "eth0"],
            &["192.0.2.20/32", "dev", "eth0"],
        ],
    );
    let run = kube_proxy_like(&ns, CLIENT, &[]);
    assert!(
        diagnoses(&run).is_empty(),
        "{:#?}",
        run.of_kind("diagnosis")
    );
    let services: Vec<&str> = run
        .of_kind("ipvs")
        .iter()
        .filter_map(|e| e["service"]["address"].as_str())
        .collect();
    assert_eq!(services, ["192.0.2.10", "192.0.2.20"]);
}

#[test]
fn seed_003_route_get_of_an_lb_address_resolves_to_lo() {
    require_root();
    let node = layout(3, "s003");
    let run = trace_incident(3, &node, CLIENT, &[]);
    let found = diagnoses(&run);
    assert_eq!(ids(&found), ["route-get-resolves-to-lo"], "{}", run.stderr);
    let summary = found[0]["summary"].as_str().unwrap();
    assert!(summary.contains("route to 10.96.0.50"), "{summary}");
    assert!(summary.contains("(on kube-ipvs0)"), "{summary}");

    // Healthy: a can_reach target that is not local (the gateway) resolves via eth0.
    let script = "ip -4 addr show >/dev/null; ip route get 192.0.2.1";
    let run = trace_json(&[], &in_ns(&node.ns, &["sh", "-c", script]));
    assert!(
        diagnoses(&run).is_empty(),
        "{:#?}",
        run.of_kind("diagnosis")
    );
}

#[test]
fn seed_004_keepalived_vip_with_a_24_mask_gets_no_node_port_service() {
    require_root();
    let run = incident(4, "s004");
    let found = diagnoses(&run);
    assert_eq!(ids(&found), ["secondary-address-skipped"], "{}", run.stderr);
    let summary = found[0]["summary"].as_str().unwrap();
    assert!(summary.contains("none for 10.10.10.100"), "{summary}");
    assert!(summary.contains("src 10.10.10.11"), "{summary}");
}
