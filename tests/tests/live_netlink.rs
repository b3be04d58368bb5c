//! End to end (issue 3): netlink conversations of real `ip` commands, captured from syscall
//! tracepoints in a scratch namespace: what `ip` printed is what the timeline says.
use nodeip_trace_tests::{require_root, trace_json, Netns, TraceRun};
use serde_json::Value;

fn messages<'a>(run: &'a TraceRun, direction: &str) -> Vec<&'a Value> {
    run.of_kind("netlink")
        .into_iter()
        .filter(|e| e["direction"] == direction && e["comm"] == "ip")
        .flat_map(|e| e["messages"].as_array().unwrap().iter())
        .collect()
}

fn setup(tag: &str) -> (Netns, Netns) {
    let ns = Netns::new(tag);
    let peer = Netns::new(&format!("{tag}p"));
    ns.veth_to("veth0", &peer, "veth1");
    ns.ip(&["addr", "add", "192.0.2.10/24", "dev", "veth0"]);
    ns.ip(&["addr", "add", "192.0.2.20/24", "dev", "veth0"]);
    (ns, peer)
}

#[test]
fn route_get_local_and_main_answers() {
    require_root();
    let (ns, _peer) = setup("nlrg");
    let run = trace_json(
        &[],
        &[
            "sh",
            "-c",
            &format!(
                "ip -n {0} route get 192.0.2.20 && ip -n {0} route get 192.0.2.77",
                ns.name
            ),
        ],
    );
    assert!(run.output.status.success(), "{}", run.stderr);
    let sent: Vec<_> = messages(&run, "send")
        .into_iter()
        .filter(|m| m["type"] == "RTM_GETROUTE")
        .collect();
    assert_eq!(sent.len(), 2, "{:?}", run.events);
    assert_eq!(sent[0]["body"]["dst"], "192.0.2.20");
    assert!(sent[0]["flags"]
        .as_array()
        .unwrap()
        .contains(&Value::from("REQUEST")));
    let replies: Vec<_> = messages(&run, "recv")
        .into_iter()
        .filter(|m| m["type"] == "RTM_NEWROUTE")
        .collect();
    assert_eq!(replies.len(), 2);
    // The secondary address resolves as a local route with the primary as source.
    assert_eq!(replies[0]["body"]["type"], "local");
    assert_eq!(replies[0]["body"]["prefsrc"], "192.0.2.10");
    assert_eq!(replies[1]["body"]["type"], "unicast");
    assert_eq!(replies[1]["body"]["oif"], replies[1]["body"]["oif"]);
    assert_eq!(sent[0]["seq"], replies[0]["seq"]);
    // Attributed to the ip processes, not to sh.
    let pids: Vec<_> = run
        .of_kind("netlink")
        .iter()
        .filter(|e| e["comm"] == "ip")
        .map(|e| e["pid"].clone())
        .collect();
    assert!(!pids.is_empty());
    // The kernel's own route lookups are there too.
    assert!(
        run.of_kind("route_lookup")
            .iter()
            .any(|e| e["dst"] == "192.0.2.77"),
        "{:?}",
        run.events
    );
}

#[test]
fn address_dump_shows_primary_and_secondary() {
    require_root();
    let (ns, _peer) = setup("nladdr");
    let run = trace_json(&[], &["ip", "-n", &ns.name, "-4", "addr", "show"]);
    assert!(run.output.status.success(), "{}", run.stderr);
    let addrs: Vec<_> = messages(&run, "recv")
        .into_iter()
        .filter(|m| m["type"] == "RTM_NEWADDR")
        .collect();
    let find = |a: &str| {
        addrs
            .iter()
            .find(|m| m["body"]["local"] == a)
            .unwrap_or_else(|| panic!("{a} missing: {addrs:?}"))
    };
    assert_eq!(find("192.0.2.10")["body"]["secondary"], false);
    assert_eq!(find("192.0.2.20")["body"]["secondary"], true);
    assert_eq!(find("192.0.2.20")["body"]["prefix_len"], 24);
    assert!(messages(&run, "recv")
        .iter()
        .any(|m| m["type"] == "NLMSG_DONE"));
}

#[test]
fn local_table_dump_lists_local_addresses_with_src() {
    require_root();
    let (ns, _peer) = setup("nllocal");
    let run = trace_json(
        &[],
        &["ip", "-n", &ns.name, "route", "show", "table", "local"],
    );
    assert!(run.output.status.success(), "{}", run.stderr);
    let routes: Vec<_> = messages(&run, "recv")
        .into_iter()
        .filter(|m| m["type"] == "RTM_NEWROUTE")
        .collect();
    let local20 = routes
        .iter()
        .find(|m| m["body"]["dst"] == "192.0.2.20" && m["body"]["type"] == "local")
        .unwrap_or_else(|| panic!("{routes:?}"));
    assert_eq!(local20["body"]["table"], "local");
    assert_eq!(
        local20["body"]["prefsrc"], "192.0.2.10",
        "the local table's src for a secondary is the primary"
    );
}

#[test]
fn ip_batch_of_10000_route_gets_is_fully_accounted_for() {
    require_root();
    let (ns, _peer) = setup("nlbatch");
    let n = 10_000;
    let batch = std::env::temp_dir().join(format!("nit-batch-{}.txt", std::process::id()));
    let lines: String = (0..n)
        .map(|i| format!("route get 192.0.2.{}\n", 1 + i % 250))
        .collect();
    std::fs::write(&batch, lines).unwrap();
    let run = trace_json(
        &[],
        &["ip", "-n", &ns.name, "-batch", batch.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&batch);
    assert!(run.output.status.success(), "{}", run.stderr);
    let sent = messages(&run, "send")
        .into_iter()
        .filter(|m| m["type"] == "RTM_GETROUTE")
        .count();
    let got = messages(&run, "recv")
        .into_iter()
        .filter(|m| m["type"] == "RTM_NEWROUTE")
        .count();
    let lost = run
        .of_kind("lost")
        .first()
        .map(|l| l["lost"].as_u64().unwrap())
        .unwrap_or(0);
    assert_eq!(sent as u64 + lost, n, "sent {sent}, lost {lost}");
    assert_eq!(got as u64 + lost, n, "replies {got}, lost {lost}");
}
