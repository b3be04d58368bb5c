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

/// The diagnoses but kube-proxy's live pick (`node-ip-picked`, said at each local-table dump
/// of a process named kube-proxy; tested with the other live picks below).
fn without_picks(found: Vec<Event>) -> Vec<Event> {
    found
        .into_iter()
        .filter(
            |e| !matches!(&e.body, EventBody::Diagnosis(d) if d.id == DiagnosisId::NodeIpPicked),
        )
        .collect()
}

#[test]
fn secondary_skipped_after_a_local_table_dump() {
    let found = run(&[
        local_table_dump(7),
        new_service(7, 3, "192.0.2.10"),
        new_service(7, 4, "127.0.0.1"),
    ]);
    assert_eq!(ids(&found), ["node-ip-picked", "secondary-address-skipped"]);
    let found = without_picks(found);
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
    let found = without_picks(found);
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
    assert!(without_picks(all).is_empty());
    assert!(without_picks(run(&[local_table_dump(7)])).is_empty());
    // Another process's services do not count against this one's dump.
    assert!(without_picks(run(&[local_table_dump(7), new_service(8, 3, "192.0.2.10")])).is_empty());
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

/// kubelet[20] reading a route file at `ts_ns`: `routes` as `route_file_read` lists them.
fn kubelet_route_file_read(file: &str, ts_ns: u64, routes: &str) -> Event {
    event(
        20,
        "kubelet",
        ts_ns,
        &format!(r#""kind":"route_file_read","file":"{file}","hook":"kprobe","routes":[{routes}]"#),
    )
}

#[test]
fn kubelet_s_default_route_fallback_is_decided_by_the_routes_the_kernel_listed_to_it() {
    // Nothing in the lookup is valid: kubelet reads /proc/net/route, and eth0 (the default
    // route's interface) has 192.0.2.10 first.
    let lookup = || {
        getaddrinfo(
            &["127.0.1.1", "198.51.100.7"],
            &["127.0.1.1", "198.51.100.7"],
        )
    };
    let v4 = kubelet_route_file_read(
        "/proc/net/route",
        9,
        r#"{"destination":"0.0.0.0/0","gateway":"192.0.2.1","dev":"eth0","metric":0,"up":true}"#,
    );
    let found = run(&[lookup(), kubelet_dump(), v4.clone()]);
    let said = summaries(&found);
    assert_eq!(said.len(), 2, "{found:?}");
    assert!(
        said[1].starts_with(
            "kubelet[20] takes 192.0.2.10 as its node IP (InternalIP) by the default-route fallback"
        ),
        "{}",
        said[1]
    );
    let EventBody::Diagnosis(d) = &found[1].body else {
        unreachable!()
    };
    assert!(
        d.evidence
            .iter()
            .any(|e| e.starts_with("route file read: route_file_read at")),
        "{:?}",
        d.evidence
    );
    assert!(
        d.evidence
            .iter()
            .any(|e| e.contains("default via 192.0.2.1 dev eth0")
                || e.contains("0.0.0.0/0 via 192.0.2.1 dev eth0")),
        "{:?}",
        d.evidence
    );
    // An IPv4 default route whose interface has no address: decided only at the IPv6 read,
    // which has none either.
    let elsewhere = kubelet_route_file_read(
        "/proc/net/route",
        9,
        r#"{"destination":"0.0.0.0/0","gateway":"198.51.100.1","dev":"eth1","metric":0,"up":true}"#,
    );
    let found = run(&[lookup(), kubelet_dump(), elsewhere.clone()]);
    assert_eq!(summaries(&found).len(), 1, "{found:?}");
    let v6 = kubelet_route_file_read(
        "/proc/net/ipv6_route",
        10,
        r#"{"destination":"::/0","gateway":"fe80::1","dev":"eth1","metric":1024,"up":true}"#,
    );
    let found = run(&[lookup(), kubelet_dump(), elsewhere, v6]);
    let said = summaries(&found);
    assert_eq!(said.len(), 2, "{found:?}");
    assert!(
        said[1].contains("finds no node IP by the default-route fallback either"),
        "{}",
        said[1]
    );
    // Another process's read, or kubelet's with a valid lookup: nothing more said.
    let mut other = v4.clone();
    other.comm = "cat".into();
    assert_eq!(summaries(&run(&[lookup(), kubelet_dump(), other])).len(), 1);
    let valid = getaddrinfo(&["192.0.2.20", "127.0.1.1"], &["192.0.2.20", "127.0.1.1"]);
    assert_eq!(summaries(&run(&[valid, kubelet_dump(), v4])).len(), 1);
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

/// `comm[pid]`'s rtnetlink dump at `ts_ns`: `request` the request's type (`RTM_GETROUTE`, …),
/// `facts` what the kernel answered.
fn dump(pid: u32, comm: &str, ts_ns: u64, request: &str, facts: &str) -> Event {
    let request =
        format!(r#""type":"{request}","flags":["REQUEST","DUMP"],"body":{{"kind":"empty"}}"#);
    event(pid, comm, ts_ns, &conversation(true, &request, facts))
}

/// The one `node-ip-picked` diagnosis of `found` (panics unless exactly one).
#[track_caller]
fn the_pick(found: &[Event]) -> &Diagnosis {
    let picks: Vec<&Diagnosis> = found
        .iter()
        .filter_map(|e| match &e.body {
            EventBody::Diagnosis(d) if d.id == DiagnosisId::NodeIpPicked => Some(d),
            _ => None,
        })
        .collect();
    assert_eq!(picks.len(), 1, "{found:?}");
    picks[0]
}

/// Panics unless `text` starts with `start`.
#[track_caller]
fn assert_starts(text: &str, start: &str) {
    assert!(
        text.starts_with(start),
        "{text:?}\ndoes not start with\n{start:?}"
    );
}

/// Panics unless a line of `evidence` contains `part`.
#[track_caller]
fn assert_cites(evidence: &[String], part: &str) {
    assert!(
        evidence.iter().any(|e| e.contains(part)),
        "{part:?} not in {evidence:#?}"
    );
}

/// A main-table IPv4 default route via 192.0.2.1 on `dev`, after a local route (the kernel
/// dumps the local table first) and the node's prefix.
fn main_routes(dev: &str) -> String {
    format!(
        r#"{{"routes":[
        {{"table":"local","type":"local","dst":"192.0.2.10/32","dev":"{dev}","src":"192.0.2.10"}},
        {{"table":"main","type":"unicast","dst":"192.0.2.0/24","dev":"{dev}","src":"192.0.2.10"}},
        {{"table":"main","type":"unicast","dst":"default","dev":"{dev}","gateway":"192.0.2.1"}}]}}"#
    )
}

const NODE_LINKS: &str = r#"{"links":[{"index":1,"ifname":"lo"},{"index":2,"ifname":"eth0"},
    {"index":3,"ifname":"eth1"}]}"#;

/// eth0 with a DHCP address (no `IFA_F_PERMANENT`: `dynamic`) listed before a static alias,
/// eth1 with another prefix: k3s#12459's default-route interface.
const DHCP_AND_STATIC_ALIAS: &str = r#"{"addresses":[
    {"ifname":"lo","address":"127.0.0.1","prefix_len":8,"secondary":false},
    {"ifname":"eth0","address":"192.0.2.50","prefix_len":24,"secondary":false,"flags":["dynamic"]},
    {"ifname":"eth0","address":"192.0.2.10","prefix_len":24,"secondary":true},
    {"ifname":"eth1","address":"10.10.0.5","prefix_len":24,"secondary":false}]}"#;

/// `comm[pid]`'s route (default on `dev`), link and address (`addresses`) dumps at 7, 8, 9:
/// flannel's `GetDefaultGatewayInterface`, `net.InterfaceByIndex`, `netlink.AddrList`.
fn flannel_dumps(pid: u32, comm: &str, dev: &str, addresses: &str) -> [Event; 3] {
    [
        dump(pid, comm, 7, "RTM_GETROUTE", &main_routes(dev)),
        dump(pid, comm, 8, "RTM_GETLINK", NODE_LINKS),
        dump(pid, comm, 9, "RTM_GETADDR", addresses),
    ]
}

#[test]
fn flanneld_takes_the_default_route_interface_s_first_address_from_its_dumps() {
    let found = run(&flannel_dumps(40, "flanneld", "eth0", ADDRESS_DUMP));
    assert_eq!(ids(&found), ["node-ip-picked"]);
    assert_eq!(found[0].ts_ns, 9, "decided at the address dump");
    let d = the_pick(&found);
    assert_eq!(d.severity, Severity::Info);
    assert_starts(
        &d.summary,
        "flanneld[40] takes 192.0.2.10 as its public IP with flannel's rule without --iface (the trace does not read its flags)",
    );
    for (line, dump) in ["route dump", "link dump", "address dump"]
        .iter()
        .enumerate()
    {
        assert_starts(&d.evidence[line], &format!("{dump}: conversation at"));
    }
    assert_cites(
        &d.evidence,
        "default-gateway interface: eth0 (the first IPv4 default route of the main table: default via 192.0.2.1)",
    );
    assert!(d.remedy.contains("--iface"));
}

/// k3s#12459: a DHCP address and a static alias on the default-route interface; flannel in k3s
/// takes the static alias (permanent before dynamic), whatever the DHCP address is.
#[test]
fn k3s_s_flannel_takes_the_static_alias_over_the_dhcp_address_k3s_12459() {
    let found = run(&flannel_dumps(
        41,
        "k3s-server",
        "eth0",
        DHCP_AND_STATIC_ALIAS,
    ));
    let d = the_pick(&found);
    assert_starts(
        &d.summary,
        "k3s-server[41] (k3s's embedded flannel) takes 192.0.2.10 as its public IP with flannel's rule without --flannel-iface",
    );
    assert_cites(&d.evidence, "[192.0.2.10, 192.0.2.50 dynamic]");
    assert!(d.remedy.contains("k3s#12459"));
    // The wrapper-less binary's and an agent's comm too.
    for comm in ["k3s", "k3s-agent"] {
        let found = run(&flannel_dumps(42, comm, "eth0", DHCP_AND_STATIC_ALIAS));
        assert_starts(
            &the_pick(&found).summary,
            &format!("{comm}[42] (k3s's embedded flannel) takes 192.0.2.10"),
        );
    }
}

#[test]
fn flannel_without_a_route_dump_or_by_another_comm_says_nothing() {
    let [_, links, addresses] = flannel_dumps(40, "flanneld", "eth0", ADDRESS_DUMP);
    assert!(run(&[links, addresses]).is_empty());
    assert!(run(&flannel_dumps(40, "flannel-cni", "eth0", ADDRESS_DUMP)).is_empty());
    // Dumps by two processes are not joined.
    let [routes, ..] = flannel_dumps(40, "flanneld", "eth0", ADDRESS_DUMP);
    let [.., addresses] = flannel_dumps(43, "flanneld", "eth0", ADDRESS_DUMP);
    assert!(run(&[routes, addresses.clone()]).is_empty());
    // No default route: flannel does not start, and that is said.
    let no_default =
        r#"{"routes":[{"table":"main","type":"unicast","dst":"192.0.2.0/24","dev":"eth0"}]}"#;
    let found = run(&[
        dump(43, "flanneld", 7, "RTM_GETROUTE", no_default),
        addresses,
    ]);
    assert!(
        the_pick(&found).summary.ends_with(
            "finds no public IP with flannel's rule without --iface (the trace does not read its flags): flannel fails to start: failed to get default interface: unable to find default route"
        ),
        "{found:?}"
    );
}

/// Dumps that come in another order (a trace started mid-way, two processes interleaved) are
/// joined per process and decided at the last one needed; a route dump naming its device by
/// index is named by the process's link dump.
#[test]
fn flannel_s_dumps_out_of_order_and_interleaved_are_joined_per_process() {
    let found = run(&[
        dump(40, "flanneld", 5, "RTM_GETADDR", ADDRESS_DUMP),
        dump(44, "flanneld", 6, "RTM_GETROUTE", &main_routes("eth1")),
        dump(40, "flanneld", 7, "RTM_GETLINK", NODE_LINKS),
        dump(40, "flanneld", 8, "RTM_GETROUTE", &main_routes("2")),
        dump(44, "flanneld", 9, "RTM_GETADDR", DHCP_AND_STATIC_ALIAS),
    ]);
    let at: Vec<(u32, u64)> = found.iter().map(|e| (e.pid, e.ts_ns)).collect();
    assert_eq!(at, [(40, 8), (44, 9)]);
    let picks = summaries(&found);
    assert_starts(picks[0], "flanneld[40] takes 192.0.2.10");
    assert_starts(picks[1], "flanneld[44] takes 10.10.0.5");
    let EventBody::Diagnosis(d) = &found[0].body else {
        unreachable!()
    };
    assert_cites(&d.evidence, "default-gateway interface: eth0");
    // The dumps are used once: another address dump alone decides nothing again.
    let mut again = flannel_dumps(40, "flanneld", "eth0", ADDRESS_DUMP).to_vec();
    again.push(dump(
        40,
        "flanneld",
        10,
        "RTM_GETADDR",
        DHCP_AND_STATIC_ALIAS,
    ));
    assert_eq!(summaries(&run(&again)).len(), 1);
}

#[test]
fn calico_node_s_dumps_out_of_order_decide_at_the_link_dump() {
    let mut link = calico_link_dump();
    link.ts_ns = 9;
    let found = run(&[calico_address_dump(), link]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].ts_ns, 9);
    assert_starts(
        &the_pick(&found).summary,
        "calico-node[30] detects 192.0.2.10",
    );
}

/// `comm[pid]` adding `address/32` to `ifname` (index `index`) at `ts_ns`.
fn vip_add(pid: u32, comm: &str, ts_ns: u64, address: &str, ifname: &str, index: u32) -> Event {
    let request = format!(
        r#""type":"RTM_NEWADDR","flags":["REQUEST","ACK","CREATE","EXCL"],"body":{{"kind":"address","family":"inet","prefix_len":32,"flags":[],"flags_raw":0,"secondary":false,"scope":"global","index":{index},"ifname":"{ifname}","local":"{address}","address":"{address}"}}"#
    );
    event(pid, comm, ts_ns, &conversation(false, &request, "{}"))
}

/// kube-vip[50]'s dumps before its VIP (at 5, 6, 7): routes (default on eth0), links, and
/// addresses (eth0 192.0.2.10/24 and .50, eth1 10.10.0.5/24); then its VIP 10.10.0.100 added
/// to `dev` at 8.
fn kube_vip_adds_on(ifname: &str, index: u32) -> Vec<Event> {
    let mut events: Vec<Event> = flannel_dumps(50, "kube-vip", "eth0", DHCP_AND_STATIC_ALIAS)
        .into_iter()
        .map(|mut e| {
            e.ts_ns -= 2;
            e
        })
        .collect();
    events.push(vip_add(50, "kube-vip", 8, "10.10.0.100", ifname, index));
    events
}

/// kube-vip#903: the VIP is in eth1's prefix, but kube-vip puts it on the default-route
/// interface, eth0: ARP for it leaves eth0.
#[test]
fn kube_vip_puts_its_vip_on_the_default_route_interface_off_its_subnet_kube_vip_903() {
    let mut events = kube_vip_adds_on("eth0", 2);
    let found = run(&events);
    assert_eq!(ids(&found), ["node-ip-picked", "vip-off-subnet-interface"]);
    let d = the_pick(&found);
    assert_starts(
        &d.summary,
        "kube-vip[50] puts its VIP 10.10.0.100 on eth0, the default-route interface of the routes it listed (vip_interface unset",
    );
    assert_starts(&d.evidence[3], "address added: conversation at");
    assert_cites(
        &d.evidence,
        "adds 10.10.0.100/32 to eth0, and answers ARP for it there",
    );
    assert_cites(&d.evidence, "eth1 holds its subnet (10.10.0.5/24)");
    let EventBody::Diagnosis(warning) = &found[1].body else {
        unreachable!()
    };
    assert_eq!(warning.severity, Severity::Warning);
    assert!(
        warning
            .summary
            .ends_with("but eth1 holds 10.10.0.5/24: ARP for the VIP leaves eth0 (kube-vip#903)"),
        "{warning:?}"
    );
    assert_starts(&warning.evidence[0], "route dump: conversation at");
    assert_eq!(warning.remedy, "set kube-vip's vip_interface to eth1");
    // Re-added after a leader election: said once.
    events.push(vip_add(50, "kube-vip", 9, "10.10.0.100", "eth0", 2));
    assert_eq!(run(&events).len(), 2);
}

#[test]
fn kube_vip_on_another_interface_than_the_default_route_s_has_a_vip_interface() {
    // The request names the interface by index only: the link dump names it.
    let found = run(&kube_vip_adds_on("3", 3));
    assert_eq!(
        ids(&found),
        ["node-ip-picked"],
        "on its subnet's interface: no warning"
    );
    assert_starts(
        &the_pick(&found).summary,
        "kube-vip[50] puts its VIP 10.10.0.100 on eth1, not on eth0, the default-route interface of the routes it listed: its vip_interface names eth1",
    );
    // Without an address dump, whose subnet it is is not known (and not guessed).
    let mut events = kube_vip_adds_on("eth0", 2);
    events.remove(2);
    let found = run(&events);
    assert_eq!(ids(&found), ["node-ip-picked"]);
    assert_cites(
        &the_pick(&found).evidence,
        "which interface holds the VIP's subnet is not known",
    );
}

#[test]
fn kube_vip_s_address_before_its_route_dump_or_another_comm_s_says_nothing() {
    // Out of order: the VIP added before the route dump is seen (a trace started mid-way):
    // nothing to replay; the next add, after it, is.
    let early = vip_add(50, "kube-vip", 4, "10.10.0.100", "eth0", 2);
    let routes = dump(50, "kube-vip", 5, "RTM_GETROUTE", &main_routes("eth0"));
    assert!(run(&[early.clone(), routes.clone()]).is_empty());
    let found = run(&[
        early,
        routes,
        vip_add(50, "kube-vip", 6, "10.10.0.100", "eth0", 2),
    ]);
    assert_eq!(ids(&found), ["node-ip-picked"]);
    assert_eq!(found[0].ts_ns, 6);
    // keepalived adding a VIP is not kube-vip.
    let mut keepalived = kube_vip_adds_on("eth0", 2);
    for e in &mut keepalived {
        e.comm = "keepalived".into();
    }
    assert!(run(&keepalived).is_empty());
}

/// k8s#75443's node: eth0's primary 100.64.2.10 and secondary VIP 100.64.2.65 (whose local
/// route's src is the primary), lo, and a Service address on kube-ipvs0.
const K8S_75443_LOCAL_TABLE: &str = r#"{"routes":[
    {"table":"local","type":"local","dst":"100.64.2.10/32","dev":"eth0","src":"100.64.2.10"},
    {"table":"local","type":"local","dst":"100.64.2.65/32","dev":"eth0","src":"100.64.2.10"},
    {"table":"local","type":"broadcast","dst":"100.64.2.255/32","dev":"eth0","src":"100.64.2.10"},
    {"table":"local","type":"local","dst":"127.0.0.0/8","dev":"lo","src":"127.0.0.1"},
    {"table":"local","type":"local","dst":"10.96.0.10/32","dev":"kube-ipvs0","src":"10.96.0.10"},
    {"table":"main","type":"unicast","dst":"default","dev":"eth0","gateway":"100.64.2.1"}]}"#;

const K8S_75443_ADDRESSES: &str = r#"{"addresses":[
    {"ifname":"lo","address":"127.0.0.1","prefix_len":8,"secondary":false},
    {"ifname":"eth0","address":"100.64.2.10","prefix_len":24,"secondary":false},
    {"ifname":"eth0","address":"100.64.2.65","prefix_len":24,"secondary":true},
    {"ifname":"kube-ipvs0","address":"10.96.0.10","prefix_len":32,"secondary":false}]}"#;

/// kube-proxy[60]'s local-table dump (`RTM_GETROUTE`) or address dump at `ts_ns`.
fn kube_proxy_dump(ts_ns: u64, request: &str) -> Event {
    let facts = match request {
        "RTM_GETROUTE" => K8S_75443_LOCAL_TABLE,
        _ => K8S_75443_ADDRESSES,
    };
    dump(60, "kube-proxy", ts_ns, request, facts)
}

/// k8s#75443: the local-table path gives the secondary VIP no NodePort (its local route's src
/// is the primary); the address-dump path takes it.
#[test]
fn kube_proxy_s_local_table_path_skips_the_secondary_vip_k8s_75443() {
    let found = run(&[kube_proxy_dump(5, "RTM_GETROUTE")]);
    let d = the_pick(&found);
    assert_starts(
        &d.summary,
        "kube-proxy[60] takes [100.64.2.10] as its IPVS NodePort addresses by the local-table path",
    );
    assert!(
        d.summary
            .contains("nodePortAddresses is not read from the trace"),
        "{d:?}"
    );
    assert_starts(&d.evidence[0], "route dump: conversation at");
    assert_cites(
        &d.evidence,
        "gives 100.64.2.65 no NodePort service: its local route's src is 100.64.2.10",
    );
    assert!(d.remedy.contains("nodePortAddresses"));
    let found = run(&[kube_proxy_dump(6, "RTM_GETADDR")]);
    let d = the_pick(&found);
    assert_starts(
        &d.summary,
        "kube-proxy[60] takes [100.64.2.10, 100.64.2.65] as its IPVS NodePort addresses by the address-dump path",
    );
    assert_starts(&d.evidence[0], "address dump: conversation at");
}

#[test]
fn kube_proxy_s_syncs_say_each_pick_once_and_other_dumps_or_comms_nothing() {
    let sync = |ts_ns| kube_proxy_dump(ts_ns, "RTM_GETADDR");
    assert_eq!(summaries(&run(&[sync(5), sync(6), sync(7)])).len(), 1);
    // Dumps in either order, interleaved with another kube-proxy's: each its own path's pick.
    let found = run(&[
        sync(5),
        dump(61, "kube-proxy", 6, "RTM_GETADDR", ADDRESS_DUMP),
        kube_proxy_dump(7, "RTM_GETROUTE"),
    ]);
    let picks = summaries(&found);
    assert_eq!(picks.len(), 3, "{picks:?}");
    assert_starts(picks[1], "kube-proxy[61] takes [192.0.2.10, 192.0.2.20]");
    assert_starts(
        picks[2],
        "kube-proxy[60] takes [100.64.2.10] as its IPVS NodePort addresses by the local-table path",
    );
    // A main-table-only route dump is not the local-table path; another comm's dumps are not
    // kube-proxy's.
    let main_only = r#"{"routes":[{"table":"main","type":"unicast","dst":"default","dev":"eth0","gateway":"192.0.2.1"}]}"#;
    assert!(run(&[dump(60, "kube-proxy", 5, "RTM_GETROUTE", main_only)]).is_empty());
    let mut other = sync(5);
    other.comm = "kube-controller".into();
    assert!(run(&[other]).is_empty());
}

/// A process that exited leaves no dumps behind: its pid, reused, starts afresh.
#[test]
fn an_exited_process_s_dumps_are_forgotten() {
    let [routes, links, addresses] = flannel_dumps(40, "flanneld", "eth0", ADDRESS_DUMP);
    let mut d = Diagnoser::new();
    assert!(d.observe(&routes).is_empty());
    d.forget_processes(&[40]);
    assert!(d.observe(&links).is_empty());
    assert!(
        d.observe(&addresses).is_empty(),
        "the route dump was the exited process's"
    );
}
