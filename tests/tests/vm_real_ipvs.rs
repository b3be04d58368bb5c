//! VM lane (issue 5): real IPVS, where the kernel has it (`cargo xtask vm-test` boots one that
//! does; on a kernel without IPVS the test says so and returns). kube-proxy's two NodePort address
//! discovery paths, each followed by real IPVS services for what it found:
//! - the old path in one process (`ipvs_client --kube-proxy-local-table`: the local-table dump,
//!   then `IPVS_CMD_NEW_SERVICE` per `src`), which skips the secondary address — seed 002 with the
//!   kernel accepting the services;
//! - the new path: an address dump (`ip -4 addr show`), then `ipvsadm` for every address but
//!   kube-ipvs0's.
//!
//! The trace must show every service and destination created, who created it, and the kernel's
//! answer (0).
use nodeip_trace_tests::{kernel_has_ipvs, require_root, trace_json, Netns};
use serde_json::Value;

const CLIENT: &str = env!("CARGO_BIN_EXE_ipvs_client");

fn ipvs_family_id() -> u16 {
    nodeip_trace::host::kernel_dump::genl_families()
        .into_iter()
        .find(|(_, name)| name == "IPVS")
        .map(|(id, _)| id)
        .expect("the IPVS family")
}

/// `(cmd, service address, comm, result)` of the trace's IPVS events.
fn ipvs_events(events: &[Value]) -> Vec<(String, String, String, i64)> {
    events
        .iter()
        .filter(|e| e["kind"] == "ipvs")
        .map(|e| {
            (
                e["cmd"].as_str().unwrap_or_default().to_string(),
                e["service"]["address"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                e["comm"].as_str().unwrap_or_default().to_string(),
                e["result"].as_i64().unwrap_or(i64::MIN),
            )
        })
        .collect()
}

#[test]
fn kube_proxy_discovery_paths_then_real_ipvs_services() {
    require_root();
    if !kernel_has_ipvs() {
        nodeip_trace_tests::skip_or_fail(
            "this kernel has no IPVS; `cargo xtask vm-test` runs this test on one that has",
        );
        return;
    }
    let ns = Netns::new("vmipvs");
    let peer = Netns::new("vmipvsp");
    ns.veth_to("eth0", &peer, "eth0");
    ns.ip(&["addr", "add", "192.0.2.10/24", "dev", "eth0"]);
    ns.ip(&["addr", "add", "192.0.2.20/24", "dev", "eth0"]);
    ns.ip(&["link", "add", "kube-ipvs0", "type", "dummy"]);
    ns.ip(&["addr", "add", "10.96.0.10/32", "dev", "kube-ipvs0"]);
    let exec = ["ip", "netns", "exec", ns.name.as_str()];

    // Old path, one process: services only for the local table's src values.
    let id = format!("{}", ipvs_family_id());
    let mut command = exec.to_vec();
    command.extend([CLIENT, id.as_str(), "--kube-proxy-local-table"]);
    let run = trace_json(&[], &command);
    assert!(run.output.status.success(), "{}", run.stderr);
    assert_eq!(
        ipvs_events(&run.events),
        [(
            "IPVS_CMD_NEW_SERVICE".to_string(),
            "192.0.2.10".to_string(),
            "ipvs_client".to_string(),
            0
        )],
        "{}",
        run.stderr
    );
    let diagnoses: Vec<&str> = run
        .of_kind("diagnosis")
        .iter()
        .filter_map(|d| d["id"].as_str())
        .collect();
    assert_eq!(diagnoses, ["secondary-address-skipped"]);

    // New path: the address dump, then ipvsadm for each address found (kube-ipvs0's left out).
    let script = "ip -4 addr show >/dev/null \
        && ipvsadm -A -t 192.0.2.10:30081 -s rr \
        && ipvsadm -A -t 192.0.2.20:30081 -s rr \
        && ipvsadm -a -t 192.0.2.20:30081 -r 10.244.1.5:8080 -m";
    let mut command = exec.to_vec();
    command.extend(["sh", "-c", script]);
    let run = trace_json(&[], &command);
    assert!(run.output.status.success(), "{}", run.stderr);
    let created: Vec<(String, String, String, i64)> = ipvs_events(&run.events)
        .into_iter()
        .filter(|(cmd, ..)| cmd.starts_with("IPVS_CMD_NEW_"))
        .collect();
    let expect =
        |cmd: &str, addr: &str| (cmd.to_string(), addr.to_string(), "ipvsadm".to_string(), 0);
    assert_eq!(
        created,
        [
            expect("IPVS_CMD_NEW_SERVICE", "192.0.2.10"),
            expect("IPVS_CMD_NEW_SERVICE", "192.0.2.20"),
            expect("IPVS_CMD_NEW_DEST", "192.0.2.20"),
        ],
        "{}",
        run.stderr
    );
    let dest = run
        .of_kind("ipvs")
        .into_iter()
        .find(|e| e["cmd"] == "IPVS_CMD_NEW_DEST")
        .expect("the destination");
    assert_eq!(dest["dest"]["address"], "10.244.1.5");
    assert_eq!(dest["dest"]["forwarding"], "masq");
}
