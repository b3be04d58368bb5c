//! Diagnoser tests: events as the pipeline emits them (written as JSON lines, the recording
//! format), and the diagnoses they must — and must not — produce.
use super::*;

/// An event from its kind-specific JSON fields, made by `comm[pid]` at `ts_ns`.
fn event(pid: u32, comm: &str, ts_ns: u64, body: &str) -> Event {
    let line = format!(
        r#"{{"ts":"2026-11-22T10:00:00.{ts_ns:06}Z","ts_ns":{ts_ns},"pid":{pid},"tid":{pid},"comm":"{comm}",{body}}}"#
    );
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

fn ids(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match &e.body {
            EventBody::Diagnosis(d) => d.id.as_str(),
            other => panic!("not a diagnosis: {other:?}"),
        })
        .collect()
}

fn run(events: &[Event]) -> Vec<Event> {
    let mut d = Diagnoser::new();
    let mut out: Vec<Event> = events.iter().flat_map(|e| d.observe(e)).collect();
    out.extend(d.finish());
    out
}

/// The rtnetlink type number of `request`'s `"type":"RTM_…"`, as the decoder names it.
fn rtm_type_id(request: &str) -> u16 {
    let name = request
        .split_once(r#""type":""#)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map(|(name, _)| name)
        .expect("a request with a type");
    (0..=u16::MAX)
        .find(|&id| crate::decode::netlink::rtnetlink::message_type_name(id) == name)
        .unwrap_or_else(|| panic!("{name} is not an rtnetlink type"))
}

/// A conversation: `request` is the request's `type`/`flags`/`body` JSON, `facts` its facts.
fn conversation(dump: bool, request: &str, facts: &str) -> String {
    let type_id = rtm_type_id(request);
    format!(
        r#""kind":"conversation","protocol":"NETLINK_ROUTE","protocol_id":0,"seq":1,"dump":{dump},
        "request":{{{request},"type_id":{type_id},"flags_raw":1,"seq":1,"pid":0,"len":0}},
        "replies":1,"reply_types":{{}},"reply_buffers":1,"reply_bytes":0,"outcome":"reply",
        "duration_ns":1,"facts":{facts}"#
    )
}

const ADDRESS_DUMP: &str = r#"{"addresses":[
    {"ifname":"eth0","address":"192.0.2.10","prefix_len":24,"secondary":false},
    {"ifname":"eth0","address":"192.0.2.20","prefix_len":24,"secondary":true}]}"#;

fn address_dump(pid: u32) -> Event {
    event(
        pid,
        "ip",
        1,
        &conversation(
            true,
            r#""type":"RTM_GETADDR","flags":["REQUEST","DUMP"],"body":{"kind":"empty"}"#,
            ADDRESS_DUMP,
        ),
    )
}

fn local_table_dump(pid: u32) -> Event {
    event(
        pid,
        "kube-proxy",
        2,
        &conversation(
            true,
            r#""type":"RTM_GETROUTE","flags":["REQUEST","DUMP"],"body":{"kind":"empty"}"#,
            r#"{"routes":[
                {"table":"local","type":"local","dst":"192.0.2.10/32","dev":"eth0","src":"192.0.2.10"},
                {"table":"local","type":"local","dst":"192.0.2.20/32","dev":"eth0","src":"192.0.2.10"},
                {"table":"local","type":"local","dst":"127.0.0.1/32","dev":"lo","src":"127.0.0.1"},
                {"table":"local","type":"broadcast","dst":"192.0.2.255/32","dev":"eth0","src":"192.0.2.10"}]}"#,
        ),
    )
}

fn new_service(pid: u32, ts_ns: u64, address: &str) -> Event {
    event(
        pid,
        "kube-proxy",
        ts_ns,
        &format!(
            r#""kind":"ipvs","cmd":"IPVS_CMD_NEW_SERVICE","cmd_id":1,"version":1,
            "service":{{"af":"inet","protocol":"TCP","address":"{address}","port":30080}},"result":0"#
        ),
    )
}

#[test]
fn secondary_skipped_after_a_local_table_dump() {
    let found = run(&[
        local_table_dump(7),
        new_service(7, 3, "192.0.2.10"),
        new_service(7, 4, "127.0.0.1"),
    ]);
    assert_eq!(ids(&found), ["secondary-address-skipped"]);
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert!(d.summary.contains("none for 192.0.2.20"), "{}", d.summary);
    assert!(d.summary.starts_with("kube-proxy[7]"), "{}", d.summary);
    assert_eq!(found[0].ts_ns, 4, "placed at the last service creation");
    assert!(d.evidence.iter().any(|e| e.contains("src 192.0.2.10")));
}

/// A process that exited is forgotten unless it created services (its diagnosis needs its
/// dump at the end); one that dumped the table and exited without services leaves nothing.
#[test]
fn exited_processes_without_services_are_forgotten_and_the_others_kept() {
    let mut d = Diagnoser::new();
    for e in [
        local_table_dump(7),
        new_service(7, 3, "192.0.2.10"),
        local_table_dump(8),
    ] {
        d.observe(&e);
    }
    d.forget_processes(&[7, 8, 9]);
    assert_eq!(d.processes.keys().copied().collect::<Vec<_>>(), [7]);
    assert_eq!(ids(&d.finish()), ["secondary-address-skipped"]);
}

/// Regression: every local-table dump appended its routes again, so a process (or a capture
/// without attribution, all pid 0) dumping over and over grew the diagnoser with the trace:
/// `analyze` peak RSS 6 MiB for a 1 MB capture, 18 MiB for 200 MB of the same frames.
#[test]
fn repeated_local_table_dumps_keep_each_route_once_and_the_first_dump_as_evidence() {
    let mut d = Diagnoser::new();
    let mut found = Vec::new();
    for ts_ns in [2, 5, 9] {
        let mut dump = local_table_dump(7);
        dump.ts_ns = ts_ns;
        found.extend(d.observe(&dump));
    }
    assert_eq!(
        d.processes[&7].local_routes.len(),
        3,
        "three local routes, kept once"
    );
    found.extend(d.observe(&new_service(7, 10, "192.0.2.10")));
    found.extend(d.finish());
    assert_eq!(ids(&found), ["secondary-address-skipped"]);
    let EventBody::Diagnosis(diagnosis) = &found[0].body else {
        unreachable!()
    };
    assert!(
        diagnosis.evidence[0].contains("(ts_ns 2)"),
        "{:?}",
        diagnosis.evidence
    );
}

#[test]
fn no_secondary_diagnosis_when_every_address_got_a_service_or_none_were_made() {
    let all = run(&[
        local_table_dump(7),
        new_service(7, 3, "192.0.2.10"),
        new_service(7, 4, "192.0.2.20"),
    ]);
    assert!(all.is_empty(), "{all:?}");
    assert!(run(&[local_table_dump(7)]).is_empty());
    // Another process's services do not count against this one's dump.
    assert!(run(&[local_table_dump(7), new_service(8, 3, "192.0.2.10")]).is_empty());
}

fn route_get(dst: &str, table: &str, kind: &str, dev: &str) -> Event {
    event(
        9,
        "speaker",
        5,
        &conversation(
            false,
            &format!(
                r#""type":"RTM_GETROUTE","flags":["REQUEST"],"body":{{"kind":"route","family":"inet","table":"unspec","table_id":0,"type":"unspec","protocol":"unspec","scope":"global","tos":0,"dst":"{dst}","dst_len":32,"src_len":0,"flags":[],"flags_raw":0}}"#
            ),
            &format!(
                r#"{{"routes":[{{"table":"{table}","type":"{kind}","dst":"{dst}/32","dev":"{dev}","src":"192.0.2.10"}}]}}"#
            ),
        ),
    )
}

#[test]
fn route_get_to_lo_names_the_interface_and_ignores_loopback_and_real_routes() {
    let found = run(&[
        address_dump(1),
        route_get("192.0.2.20", "main", "local", "lo"),
    ]);
    assert_eq!(ids(&found), ["route-get-resolves-to-lo"]);
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert!(d.summary.contains("(on eth0)"), "{}", d.summary);
    // The kernel's index 1 is lo in every namespace (a capture may not know the name yet).
    assert_eq!(
        ids(&run(&[route_get("192.0.2.20", "local", "local", "1")])),
        ["route-get-resolves-to-lo"]
    );
    assert!(run(&[route_get("127.0.0.1", "local", "local", "lo")]).is_empty());
    assert!(run(&[route_get("192.0.2.77", "main", "unicast", "eth0")]).is_empty());
}

fn address_add(address: &str, prefix_len: u8) -> Event {
    address_change("RTM_NEWADDR", address, prefix_len)
}

/// `RTM_NEWADDR` or `RTM_DELADDR` of `address` on tunl0 by calico-node[11] at 6.
fn address_change(request: &str, address: &str, prefix_len: u8) -> Event {
    event(
        11,
        "calico-node",
        6,
        &conversation(
            false,
            &format!(
                r#""type":"{request}","flags":["REQUEST","ACK"],"body":{{"kind":"address","family":"inet","prefix_len":{prefix_len},"flags":[],"flags_raw":0,"secondary":false,"scope":"global","index":3,"ifname":"tunl0","local":"{address}","address":"{address}"}}"#
            ),
            "{}",
        ),
    )
}

#[test]
fn network_and_broadcast_addresses_in_use() {
    // Seed 001: the node address set to the prefix's network address.
    let found = run(&[address_add("172.29.231.0", 24)]);
    assert_eq!(ids(&found), ["network-address-used"]);
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert!(
        d.summary.contains("network address of 172.29.231.0/24"),
        "{}",
        d.summary
    );
    assert!(d.remedy.contains("v3.22.4"));
    // The broadcast address of a known prefix, as an IPVS service.
    assert_eq!(
        ids(&run(&[address_dump(1), new_service(7, 3, "192.0.2.255")])),
        ["network-address-used"]
    );
    // Healthy: a host address, and a /32.
    assert!(run(&[address_dump(1), address_add("192.0.2.30", 24)]).is_empty());
    assert!(run(&[address_add("10.0.0.0", 32)]).is_empty());
}

/// Found by fuzzing `analyze` (fuzz target capture_analyze): an IPv4 address added with prefix
/// length 0 overflowed the netmask shift in `network_and_broadcast` — a panic with overflow
/// checks; without them the mask wrapped to all ones and the address was its own "network
/// address".
#[test]
fn address_with_prefix_length_0_is_not_its_own_network_address() {
    let addr: IpAddr = "192.0.2.30".parse().unwrap();
    let everything = (
        "0.0.0.0".parse().unwrap(),
        "255.255.255.255".parse().unwrap(),
    );
    assert_eq!(network_and_broadcast(addr, 0), Some(everything));
    assert!(run(&[address_add("192.0.2.30", 0)]).is_empty());
}

fn getaddrinfo(returned: &[&str], resolver: &[&str]) -> Event {
    let quoted = |v: &[&str]| {
        v.iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(",")
    };
    event(
        20,
        "kubelet",
        7,
        &format!(
            r#""kind":"getaddrinfo","node":"node-a","service":null,"family":"AF_INET","socktype":"0",
            "flags":[],"ret":"OK","ret_code":0,"addresses":[{r}],"results":[],"results_truncated":false,
            "start_ns":6,"duration_ns":1,
            "why":{{"resolver_order":[{l}],"predicted":[{r}],"matches":true,
              "pairs":[{{"first":"{f}","second":"{s}","rule":9,"rule_name":"use longest matching prefix","detail":"32 bits vs 0","agrees":true}}],
              "candidates":[]}}"#,
            r = quoted(returned),
            l = quoted(resolver),
            f = returned[0],
            s = returned[1],
        ),
    )
}

#[test]
fn gai_reordered_names_the_rule_and_a_kept_order_is_healthy() {
    let found = run(&[getaddrinfo(
        &["172.18.45.20", "172.18.45.6"],
        &["172.18.45.6", "172.18.45.20"],
    )]);
    assert_eq!(ids(&found), ["gai-reordered"]);
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert!(
        d.summary.contains("got 172.18.45.20 first"),
        "{}",
        d.summary
    );
    assert!(d.summary.contains("rule 9"), "{}", d.summary);
    assert!(d.remedy.contains("--node-ip"));
    assert!(run(&[getaddrinfo(
        &["172.18.45.6", "172.18.45.20"],
        &["172.18.45.6", "172.18.45.20"],
    )])
    .is_empty());
}

#[test]
fn each_finding_is_said_once() {
    let e = route_get("192.0.2.20", "main", "local", "lo");
    assert_eq!(run(&[e.clone(), e]).len(), 1);
}

fn tunnel_add(local: &str) -> Event {
    event(
        12,
        "calico-node",
        8,
        &conversation(
            false,
            &format!(
                r#""type":"RTM_NEWLINK","flags":["REQUEST","ACK","CREATE"],"body":{{"kind":"link","family":"unspec","index":0,"ifname":"tunl1","info_kind":"ipip","link_type":0,"flags":[],"flags_raw":0,"tunnel_local":"{local}","tunnel_remote":"192.0.2.99"}}"#
            ),
            "{}",
        ),
    )
}

#[test]
fn tunnel_local_address_that_is_a_network_address_or_not_local() {
    let found = run(&[address_dump(1), tunnel_add("192.0.2.0")]);
    assert_eq!(
        ids(&found),
        ["network-address-used", "network-address-used"]
    );
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert!(
        d.summary.contains("192.0.2.0 as a tunnel's local address"),
        "{}",
        d.summary
    );
    assert!(d.summary.contains("network address of"), "{}", d.summary);
    let EventBody::Diagnosis(d) = &found[1].body else {
        unreachable!()
    };
    assert!(
        d.summary.contains("not assigned on this node"),
        "{}",
        d.summary
    );
    // The node's own address is what a tunnel should use.
    assert!(run(&[address_dump(1), tunnel_add("192.0.2.10")]).is_empty());
    // Nothing learned about the node's addresses: no claim that it is not assigned.
    assert!(run(&[tunnel_add("198.51.100.4")]).is_empty());
}

/// The same `getaddrinfo` event, made by another resolver (`"resolver":"go"` etc.).
fn with_resolver(mut e: Event, resolver: ResolverKind, pid: u32) -> Event {
    if let EventBody::Getaddrinfo(call) = &mut e.body {
        call.resolver = resolver;
    }
    e.pid = pid;
    e
}

#[test]
fn resolvers_that_put_another_address_first_disagree_once() {
    let glibc = getaddrinfo(
        &["172.18.45.20", "172.18.45.6"],
        &["172.18.45.6", "172.18.45.20"],
    );
    let go = with_resolver(
        getaddrinfo(
            &["172.18.45.6", "172.18.45.20"],
            &["172.18.45.6", "172.18.45.20"],
        ),
        ResolverKind::Go,
        30,
    );
    let found = run(&[glibc.clone(), go.clone(), go.clone()]);
    assert_eq!(ids(&found), ["gai-reordered", "resolvers-disagree"]);
    let EventBody::Diagnosis(d) = &found[1].body else {
        unreachable!()
    };
    assert!(
        d.summary.contains("172.18.45.6 first through go"),
        "{}",
        d.summary
    );
    assert!(
        d.summary.contains("172.18.45.20 first through glibc"),
        "{}",
        d.summary
    );
    // One resolver, or resolvers that agree: nothing.
    assert_eq!(
        ids(&run(&[glibc.clone(), glibc.clone()])),
        ["gai-reordered"]
    );
    let musl = with_resolver(glibc.clone(), ResolverKind::Musl, 40);
    assert_eq!(
        ids(&run(&[glibc, musl])),
        ["gai-reordered", "gai-reordered"]
    );
}

#[test]
fn evidence_names_its_event_by_kind_and_ts_ns() {
    let e = event(
        42,
        "getent",
        5615350555965,
        r#""kind":"extack","message":"x""#,
    );
    let text = reference(&e);
    assert_eq!(evidence_event(&text), Some(("extack", 5615350555965)));
    let labelled = format!("local table dump: {text}");
    assert_eq!(evidence_event(&labelled), Some(("extack", 5615350555965)));
    assert_eq!(evidence_event("resolver order: [10.0.0.1]"), None);
    assert_eq!(evidence_event("x at y (ts_ns nope)"), None);
}

#[test]
fn a_lookup_that_picks_an_address_another_process_added_names_both() {
    let add = address_add("192.0.2.100", 24);
    let pick = getaddrinfo(
        &["192.0.2.100", "192.0.2.10"],
        &["192.0.2.100", "192.0.2.10"],
    );
    let found = run(&[add.clone(), pick.clone()]);
    assert_eq!(ids(&found), ["added-address-picked"]);
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert!(
        d.summary.starts_with(
            "kubelet[20] looked up \"node-a\" and got 192.0.2.100 first: calico-node[11] added 192.0.2.100/24 to tunl0"
        ),
        "{}",
        d.summary
    );
    assert!(d
        .evidence
        .iter()
        .any(|e| e.starts_with("address added: conversation at")));
    assert!(d.remedy.contains("--node-ip"));
    // Removed again before the lookup, added by the looking process itself, or not the
    // first address: nothing to say.
    let del = address_change("RTM_DELADDR", "192.0.2.100", 24);
    assert!(run(&[add.clone(), del, pick.clone()]).is_empty());
    let mut own = add.clone();
    own.pid = 20;
    assert!(run(&[own, pick]).is_empty());
    let second = getaddrinfo(
        &["192.0.2.10", "192.0.2.100"],
        &["192.0.2.10", "192.0.2.100"],
    );
    assert!(run(&[add, second]).is_empty());
}

/// kubelet[20]'s `net.InterfaceAddrs()` dump (`ADDRESS_DUMP`: eth0 192.0.2.10 and .20) at 8.
fn kubelet_dump() -> Event {
    let mut dump = address_dump(20);
    dump.comm = "kubelet".into();
    dump.ts_ns = 8;
    dump
}

fn summaries(found: &[Event]) -> Vec<&str> {
    found
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Diagnosis(d) if d.id == DiagnosisId::NodeIpPicked => Some(&d.summary[..]),
            _ => None,
        })
        .collect()
}

#[test]
fn kubelet_takes_the_first_ipv4_of_its_lookup_that_its_dump_lists() {
    // The lookup's first address is on no interface: kubelet skips it.
    let lookup = getaddrinfo(&["192.0.2.99", "192.0.2.20"], &["192.0.2.99", "192.0.2.20"]);
    let found = run(&[lookup, kubelet_dump()]);
    assert_eq!(ids(&found), ["node-ip-picked"]);
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert_eq!(d.severity, Severity::Info);
    assert!(
        d.summary.starts_with(
            "kubelet[20] takes 192.0.2.20 as its node IP (InternalIP): its lookup of \"node-a\" (glibc) returned [192.0.2.99, 192.0.2.20]"
        ),
        "{}",
        d.summary
    );
    assert!(
        d.evidence.contains(
            &"192.0.2.99: refused by validateNodeIP (on no interface in kubelet's address dump)"
                .to_string()
        ),
        "{:?}",
        d.evidence
    );
    // Nothing valid: the fallback is named.
    let lookup = getaddrinfo(&["127.0.1.1", "192.0.2.99"], &["127.0.1.1", "192.0.2.99"]);
    let found = run(&[lookup, kubelet_dump()]);
    assert!(
        summaries(&found)[0].contains("finds no valid node IP")
            && summaries(&found)[0].contains("ChooseHostInterface"),
        "{found:?}"
    );
    // Another process's lookup, or kubelet's without a dump after it: nothing said.
    let mut other = getaddrinfo(&["192.0.2.20", "192.0.2.10"], &["192.0.2.20", "192.0.2.10"]);
    other.comm = "getent".into();
    assert!(summaries(&run(&[other, kubelet_dump()])).is_empty());
    let lookup = getaddrinfo(&["192.0.2.20", "192.0.2.10"], &["192.0.2.20", "192.0.2.10"]);
    assert!(summaries(&run(&[lookup])).is_empty());
}

#[test]
fn kubelet_s_repeated_syncs_say_the_pick_once_and_a_change_again() {
    let lookup = getaddrinfo(&["192.0.2.20", "192.0.2.10"], &["192.0.2.20", "192.0.2.10"]);
    let again = lookup.clone();
    let found = run(&[lookup, kubelet_dump(), again, kubelet_dump()]);
    assert_eq!(summaries(&found).len(), 1, "{found:?}");
    let changed = getaddrinfo(&["192.0.2.10", "192.0.2.20"], &["192.0.2.10", "192.0.2.20"]);
    let lookup = getaddrinfo(&["192.0.2.20", "192.0.2.10"], &["192.0.2.20", "192.0.2.10"]);
    let found = run(&[lookup, kubelet_dump(), changed, kubelet_dump()]);
    assert_eq!(summaries(&found).len(), 2, "{found:?}");
}

/// calico-node[30]'s link dump (`net.Interfaces()`): index 2 `eth0`, index 3 `br-3f2a9c`.
fn calico_link_dump() -> Event {
    event(
        30,
        "calico-node",
        7,
        &conversation(
            true,
            r#""type":"RTM_GETLINK","flags":["REQUEST","DUMP"],"body":{"kind":"empty"}"#,
            r#"{"links":[{"index":1,"ifname":"lo"},{"index":2,"ifname":"eth0"},
                {"index":3,"ifname":"br-3f2a9c","kind":"bridge"}]}"#,
        ),
    )
}

/// calico-node[30]'s address dump after it: `ADDRESS_DUMP` plus a Docker bridge's address.
fn calico_address_dump() -> Event {
    event(
        30,
        "calico-node",
        8,
        &conversation(
            true,
            r#""type":"RTM_GETADDR","flags":["REQUEST","DUMP"],"body":{"kind":"empty"}"#,
            r#"{"addresses":[
                {"ifname":"eth0","address":"192.0.2.10","prefix_len":24,"secondary":false},
                {"ifname":"br-3f2a9c","address":"172.18.0.1","prefix_len":16,"secondary":false}]}"#,
        ),
    )
}

#[test]
fn calico_node_s_link_and_address_dumps_say_its_first_found_pick_once() {
    let found = run(&[
        calico_link_dump(),
        calico_address_dump(),
        calico_address_dump(),
    ]);
    assert_eq!(ids(&found), ["node-ip-picked"]);
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert_eq!(d.severity, Severity::Info);
    assert!(
        d.summary
            .starts_with("calico-node[30] detects 192.0.2.10 as its IPv4 address with IP_AUTODETECTION_METHOD first-found"),
        "{}",
        d.summary
    );
    assert!(
        d.evidence
            .iter()
            .any(|e| e.contains("br-3f2a9c (excluded: ^br-.*)")),
        "{:?}",
        d.evidence
    );
    assert!(d.evidence[0].starts_with("link dump: conversation at"));
    assert!(d.remedy.contains("IP_AUTODETECTION_METHOD"));
    // An address dump with no link dump before it, or another process's: nothing said.
    assert!(run(&[calico_address_dump()]).is_empty());
    let mut other = calico_link_dump();
    other.comm = "ip".into();
    assert!(run(&[other, calico_address_dump()]).is_empty());
}
