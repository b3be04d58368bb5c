//! VM lane (issue 5): the kernel handler probes in both modes, where the kernel has them
//! (`cargo xtask vm-test` boots Debian's 6.1 kernel, which has fentry and kprobes; on a kernel
//! with neither the test says so and returns).
//!
//! One workload in a namespace the test creates, traced with `--hooks fentry` and again with
//! `--hooks kprobe`: route gets (one answered, one ENETUNREACH), an IPv6 route get, address and
//! link dumps, one link by name, and (with IPVS) an `ipvsadm` service. The trace captures only
//! NETLINK_ROUTE traffic (`--netlink-family route`), so the IPVS command is seen by the kernel
//! handler probe alone: the "changes by processes whose buffers we did not catch" case.
use std::os::unix::fs::MetadataExt;

use nodeip_trace_tests::{
    kernel_has_ipvs, kernel_hook_modes, require_root, trace_json, Netns, TraceRun,
};
use serde_json::Value;

/// The events of `kind` whose `field` is `value`.
fn events_where<'a>(run: &'a TraceRun, kind: &str, field: &str, value: &str) -> Vec<&'a Value> {
    run.of_kind(kind)
        .into_iter()
        .filter(|e| e[field] == value)
        .collect()
}

/// The kernel_handler events of `function`.
fn calls<'a>(run: &'a TraceRun, function: &str) -> Vec<&'a Value> {
    events_where(run, "kernel_handler", "function", function)
}

/// The route_file_read events of `file`.
fn route_reads<'a>(run: &'a TraceRun, file: &str) -> Vec<&'a Value> {
    events_where(run, "route_file_read", "file", file)
}

#[test]
fn kernel_handlers_in_fentry_and_kprobe_modes() {
    require_root();
    let modes = kernel_hook_modes();
    if modes.is_empty() {
        nodeip_trace_tests::skip_or_fail(
            "this kernel has neither fentry nor kprobes (see `nodeip-trace doctor`); \
             `cargo xtask vm-test` runs this test on one that has both",
        );
        return;
    }
    let ns = Netns::new("khandler");
    let peer = Netns::new("khandlerp");
    ns.veth_to("eth0", &peer, "eth0");
    ns.ip(&["addr", "add", "192.0.2.10/24", "dev", "eth0"]);
    ns.ip(&["addr", "add", "192.0.2.20/24", "dev", "eth0"]);
    let netns = std::fs::metadata(format!("/run/netns/{}", ns.name))
        .expect("the namespace's file")
        .ino();
    let ipvs = kernel_has_ipvs();
    let base = String::from(
        "ip route get 192.0.2.30 >/dev/null \
         && ! ip route get 198.51.100.1 2>/dev/null \
         && ip -6 route get ::1 >/dev/null \
         && ip addr show >/dev/null \
         && ip link show dev eth0 >/dev/null",
    );
    for (n, mode) in modes.into_iter().enumerate() {
        // A service per mode (the namespace keeps the first run's).
        let port = 30082 + n;
        let mut script = base.clone();
        if ipvs {
            script.push_str(&format!(" && ipvsadm -A -t 192.0.2.10:{port} -s rr"));
        }
        let run = trace_json(
            &["--hooks", mode, "--netlink-family", "route"],
            &["ip", "netns", "exec", &ns.name, "sh", "-c", &script],
        );
        assert!(run.output.status.success(), "{mode}: {}", run.stderr);
        let header = &run.of_kind("header")[0];
        assert_eq!(header["hook_preference"], mode, "{header}");
        assert_eq!(
            header["handler_hooks"]["inet_rtm_getroute"], mode,
            "{header}"
        );
        let all = run.of_kind("kernel_handler");
        let context = || {
            all.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert!(
            all.iter().all(|e| e["hook"] == mode),
            "{mode}: {}",
            context()
        );

        // Route gets: the request as the kernel parsed it, the namespace it answered in, and
        // its own result, for the answered one and the refused one.
        let gets = calls(&run, "inet_rtm_getroute");
        let answered = gets
            .iter()
            .find(|e| e["request"].to_string().contains("192.0.2.30"))
            .unwrap_or_else(|| panic!("{mode}: no route get of 192.0.2.30:\n{}", context()));
        assert_eq!(answered["result"], 0, "{answered}");
        assert_eq!(answered["handler_netns"], netns, "{answered}");
        assert_eq!(answered["comm"], "ip", "{answered}");
        assert_eq!(answered["request"]["type"], "RTM_GETROUTE", "{answered}");
        let refused = gets
            .iter()
            .find(|e| e["request"].to_string().contains("198.51.100.1"))
            .unwrap_or_else(|| panic!("{mode}: no route get of 198.51.100.1:\n{}", context()));
        assert_eq!(refused["errno"], "ENETUNREACH", "{refused}");
        assert_eq!(refused["result"], -101, "{refused}");
        assert!(
            !calls(&run, "inet6_rtm_getroute").is_empty(),
            "{mode}: no IPv6 route get:\n{}",
            context()
        );

        // Dumps: rounds that filled a buffer, then the round that ends the dump (0). A full
        // round returns its bytes before Linux 6.9; since "netlink: handle EMSGSIZE errors in
        // the core" (6.9) it returns -EMSGSIZE, which the core turns into the bytes; a dump
        // that fits one buffer is one round returning 0.
        for function in ["inet_dump_ifaddr", "inet6_dump_ifaddr", "rtnl_dump_ifinfo"] {
            let rounds = calls(&run, function);
            let results: Vec<i64> = rounds.iter().filter_map(|e| e["result"].as_i64()).collect();
            assert!(
                results.contains(&0),
                "{mode}: {function} never ended a dump (no round returned 0): {results:?}\n{}",
                context()
            );
            assert!(
                results.iter().all(|r| *r >= 0 || *r == -90),
                "{mode}: {function} returned an error other than a full round's EMSGSIZE: {results:?}\n{}",
                context()
            );
            assert!(
                rounds.iter().all(|e| e["handler_netns"] == netns),
                "{mode}: {function} in another namespace:\n{}",
                context()
            );
        }
        let dump = calls(&run, "inet_dump_ifaddr");
        assert!(dump[0]["request"]["type"] == "RTM_GETADDR", "{}", dump[0]);
        let getlink = calls(&run, "rtnl_getlink");
        assert!(
            getlink
                .iter()
                .any(|e| e["result"] == 0 && e["request"].to_string().contains("eth0")),
            "{mode}: no RTM_GETLINK of eth0:\n{}",
            context()
        );

        // IPVS: kprobe only (a module function: fentry would need its split BTF).
        let ipvs_mode = header["handler_hooks"]["ip_vs_genl_set_cmd"].clone();
        if !ipvs {
            continue;
        }
        assert!(
            run.of_kind("ipvs").is_empty(),
            "generic netlink was not to be captured"
        );
        if mode == "fentry" {
            assert_eq!(ipvs_mode, "off", "{header}");
            continue;
        }
        assert_eq!(ipvs_mode, "kprobe", "{header}");
        let service = calls(&run, "ip_vs_genl_set_cmd");
        assert_eq!(service.len(), 1, "{mode}:\n{}", context());
        let service = service[0];
        assert_eq!(service["comm"], "ipvsadm", "{service}");
        assert_eq!(service["result"], 0, "{service}");
        assert_eq!(service["handler_netns"], netns, "{service}");
        assert_eq!(
            service["request"]["type"], "IPVS_CMD_NEW_SERVICE",
            "{service}"
        );
        assert!(
            service["request"].to_string().contains("192.0.2.10"),
            "{service}"
        );
        assert!(
            service["request"].to_string().contains(&port.to_string()),
            "{service}"
        );
    }
}

/// Route file reads (issue 51): what the kernel listed to a reader of `/proc/net/route` and
/// `/proc/net/ipv6_route`, in both modes, and kubelet's default-route fallback replayed on it:
/// `tests/clients/kubelet_node_ip.go`, run as `kubelet`, finds its node name only at an address
/// no interface holds, falls back, and prints the address it takes; the trace must say the same.
#[test]
fn route_file_reads_and_kubelet_s_fallback_in_fentry_and_kprobe_modes() {
    require_root();
    let modes = kernel_hook_modes();
    if modes.is_empty() {
        nodeip_trace_tests::skip_or_fail(
            "this kernel has neither fentry nor kprobes (see `nodeip-trace doctor`): route file \
             reads are not seen; `cargo xtask vm-test` runs this test on one that has both",
        );
        return;
    }
    let (ns, _peer) = nodeip_trace_tests::seeds::node(
        "rfile",
        &[
            &["192.0.2.10/24", "dev", "eth0"],
            &["192.0.2.20/24", "dev", "eth0"],
            &["2001:db8::10/64", "dev", "eth0", "nodad"],
        ],
    );
    ns.ip(&["route", "add", "default", "via", "192.0.2.1", "dev", "eth0"]);
    ns.ip(&[
        "route",
        "add",
        "default",
        "via",
        "192.0.2.2",
        "dev",
        "eth0",
        "metric",
        "200",
    ]);
    ns.ip(&[
        "-6",
        "route",
        "add",
        "default",
        "via",
        "2001:db8::1",
        "dev",
        "eth0",
    ]);
    ns.etc_file("hosts", "127.0.0.1 localhost\n198.51.100.7 node-b\n");
    let netns = std::fs::metadata(format!("/run/netns/{}", ns.name))
        .expect("the namespace's file")
        .ino();
    let dir = nodeip_trace_tests::workspace_root().join("target/route-file-kubelet");
    std::fs::create_dir_all(&dir).expect("a directory for the kubelet client");
    let kubelet = dir.join("kubelet");
    std::fs::copy(
        nodeip_trace_tests::go::newest_client("kubelet_node_ip.go", false),
        &kubelet,
    )
    .expect("copying the kubelet client");
    let script = format!(
        "cat /proc/net/route /proc/net/ipv6_route >/dev/null && '{}' node-b",
        kubelet.display()
    );
    for mode in modes {
        let run = trace_json(
            &["--hooks", mode],
            &nodeip_trace_tests::seeds::in_ns(&ns, &["sh", "-c", &script]),
        );
        assert!(run.output.status.success(), "{mode}: {}", run.stderr);
        let header = &run.of_kind("header")[0];
        assert_eq!(
            header["handler_hooks"]["fib_route_seq_show"], mode,
            "{header}"
        );
        let all = || {
            run.of_kind("route_file_read")
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        };
        // cat's reads: both IPv4 default routes in one prefix's lines, the IPv6 one.
        let v4: Vec<&Value> = route_reads(&run, "/proc/net/route")
            .into_iter()
            .filter(|e| e["comm"] == "cat")
            .collect();
        assert_eq!(v4.len(), 1, "{mode}:\n{}", all());
        assert_eq!(v4[0]["hook"], mode, "{}", v4[0]);
        assert_eq!(v4[0]["file_netns"], netns, "{}", v4[0]);
        let routes: Vec<(String, String, u64)> = v4[0]["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["destination"].as_str().unwrap().to_string(),
                    r["gateway"].as_str().unwrap_or("").to_string(),
                    r["metric"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            routes,
            [
                ("0.0.0.0/0".to_string(), "192.0.2.1".to_string(), 0),
                ("0.0.0.0/0".to_string(), "192.0.2.2".to_string(), 200),
            ],
            "{mode}"
        );
        let v6 = route_reads(&run, "/proc/net/ipv6_route");
        assert!(
            v6.iter().any(|e| e["comm"] == "cat"
                && e["routes"][0]["destination"] == "::/0"
                && e["routes"][0]["gateway"] == "2001:db8::1"
                && e["routes"][0]["dev"] == "eth0"),
            "{mode}:\n{}",
            all()
        );
        // kubelet's own fallback, and the trace's.
        let own = run
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("fallback "))
            .unwrap_or_else(|| {
                panic!(
                    "{mode}: the kubelet client said no fallback: {}",
                    run.stderr
                )
            })
            .to_string();
        assert_eq!(own, "192.0.2.10", "{}", run.stderr);
        let said: Vec<String> = run
            .of_kind("diagnosis")
            .into_iter()
            .filter(|d| d["id"] == "node-ip-picked")
            .map(|d| d["summary"].as_str().unwrap().to_string())
            .collect();
        assert!(
            said.iter().any(|s| s.contains(&format!(
                "takes {own} as its node IP (InternalIP) by the default-route fallback"
            ))),
            "{mode}: {said:?}\n{}",
            all()
        );
    }
}
