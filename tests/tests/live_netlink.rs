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

/// The conversations of `ip` processes.
fn conversations<'a>(run: &'a TraceRun, request_type: &str) -> Vec<&'a Value> {
    run.of_kind("conversation")
        .into_iter()
        .filter(|e| e["comm"] == "ip" && e["request"]["type"] == request_type)
        .collect()
}

#[test]
fn conversations_pair_each_request_with_its_answer() {
    require_root();
    let (ns, _peer) = setup("nlconv");
    let run = trace_json(
        &[],
        &[
            "sh",
            "-c",
            &format!(
                "ip -n {0} route get 192.0.2.20 && ip -n {0} route get 192.0.2.77 && \
                 ip -n {0} -4 addr show && ip -n {0} route show table local",
                ns.name
            ),
        ],
    );
    assert!(run.output.status.success(), "{}", run.stderr);
    let gets: Vec<_> = conversations(&run, "RTM_GETROUTE")
        .into_iter()
        .filter(|c| c["dump"] == false)
        .collect();
    assert_eq!(gets.len(), 2, "{:?}", run.of_kind("conversation"));
    let answer = |c: &Value| c["facts"]["routes"][0].clone();
    assert_eq!(answer(gets[0])["type"], "local");
    assert_eq!(
        answer(gets[0])["dev"],
        "lo",
        "named from the namespace, not dev 1"
    );
    assert_eq!(answer(gets[0])["src"], "192.0.2.10");
    assert_eq!(answer(gets[1])["dev"], "veth0");
    for c in &gets {
        assert!(c["portid"].as_u64().is_some(), "{c}");
        assert!(
            ["reply", "ack"].contains(&c["outcome"].as_str().unwrap()),
            "{c}"
        );
    }
    let dump = conversations(&run, "RTM_GETADDR");
    assert_eq!(dump.len(), 1);
    assert_eq!(dump[0]["outcome"], "done");
    let secondary: Vec<_> = dump[0]["facts"]["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["secondary"] == true)
        .map(|a| a["address"].clone())
        .collect();
    assert_eq!(secondary, ["192.0.2.20"]);
    let routes = conversations(&run, "RTM_GETROUTE")
        .into_iter()
        .find(|c| c["dump"] == true)
        .expect("route dump");
    assert_eq!(routes["outcome"], "done");
    assert!(routes["replies"].as_u64().unwrap() >= 3, "{routes}");
    // Every ip buffer is summarised by a conversation.
    for e in run.of_kind("netlink") {
        if e["comm"] == "ip" {
            assert_eq!(e["paired"], true, "{e}");
        }
    }
}

/// Runs COMMAND under `trace` (text timeline) with the command's own stdout in a file; returns
/// (timeline, what the command printed).
fn text_trace(script: &str) -> (String, String) {
    let printed = std::env::temp_dir().join(format!("nit-printed-{}.txt", std::process::id()));
    let out = nodeip_trace_tests::run_ok(
        std::process::Command::new(nodeip_trace_tests::tool())
            .args(["trace", "--", "sh", "-c"])
            .arg(format!("( {script} ) > {}", printed.display())),
    );
    let ip_said = std::fs::read_to_string(&printed).unwrap();
    let _ = std::fs::remove_file(&printed);
    (String::from_utf8_lossy(&out.stdout).into_owned(), ip_said)
}

/// The word after `key` in `line` (`dev lo` → `lo`).
fn word_after<'a>(line: &'a str, key: &str) -> &'a str {
    let mut words = line.split_whitespace();
    words.find(|w| *w == key);
    words.next().unwrap_or_else(|| panic!("no {key} in {line}"))
}

#[test]
fn text_timeline_says_what_ip_printed() {
    require_root();
    let (ns, _peer) = setup("nltext");
    let n = &ns.name;
    let (timeline, printed) = text_trace(&format!(
        "ip -n {n} route get 192.0.2.20; ip -n {n} route get 192.0.2.77; \
         ip -n {n} -4 addr show dev veth0; ip -n {n} route show table local"
    ));
    // The conversation lines (kernel handler probes, where the kernel has them, print the
    // request too: `ip[…] kernel inet_rtm_getroute [fentry] …: GETROUTE … → 0`).
    let line_with = |needle: &str| -> &str {
        timeline
            .lines()
            .find(|l| l.contains(needle) && !l.contains("] kernel "))
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{timeline}"))
    };
    for dst in ["192.0.2.20", "192.0.2.77"] {
        let said = printed
            .lines()
            .find(|l| l.split_whitespace().any(|w| w == dst))
            .unwrap_or_else(|| panic!("{printed}"));
        let line = line_with(&format!("GETROUTE {dst}/32 →"));
        assert!(line.contains(" ip["), "attributed to ip: {line}");
        for key in ["dev", "src"] {
            let fact = format!("{key} {}", word_after(said, key));
            assert!(line.contains(&fact), "ip said {said:?}, timeline {line:?}");
        }
    }
    // `inet 192.0.2.20/24 scope global secondary veth0`
    assert!(
        printed.contains("192.0.2.20/24 scope global secondary"),
        "{printed}"
    );
    assert!(line_with("GETADDR DUMP").contains("192.0.2.10/24 primary, 192.0.2.20/24 secondary"));
    // `local 192.0.2.20 dev veth0 proto kernel scope host src 192.0.2.10`
    let said = printed
        .lines()
        .find(|l| l.starts_with("local 192.0.2.20 "))
        .unwrap_or_else(|| panic!("{printed}"));
    let fact = format!("192.0.2.20 src {}", word_after(said, "src"));
    assert!(line_with("GETROUTE DUMP").contains(&fact), "{timeline}");
}

#[test]
fn non_netlink_traffic_is_not_captured() {
    require_root();
    let (ns, _peer) = setup("nlother");
    let script = "import socket\n\
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
        u.bind(('127.0.0.1', 0))\n\
        for _ in range(1000):\n    u.sendto(b'x' * 200, u.getsockname()); u.recvfrom(512)\n\
        n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n\
        n.sendto(bytes.fromhex('1400000016000103010000000000000002000000'), (0, 0))\n\
        n.recv(65536)\n";
    let run = trace_json(
        &[],
        &["ip", "netns", "exec", &ns.name, "python3", "-c", script],
    );
    assert!(run.output.status.success(), "{}", run.stderr);
    let netlink = run.of_kind("netlink");
    let bytes: Vec<_> = netlink
        .iter()
        .map(|e| e["bytes"].as_u64().unwrap())
        .collect();
    // Only the one netlink request and its replies: none of the 2000 UDP calls.
    assert!(
        netlink.iter().all(|e| e["protocol"] == "NETLINK_ROUTE"),
        "{netlink:?}"
    );
    assert!(
        netlink
            .iter()
            .any(|e| e["direction"] == "send" && e["bytes"] == 20),
        "{bytes:?}"
    );
    assert!(netlink.len() < 10, "{bytes:?}");
}
