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

/// The kernel_handler events of `function`.
fn calls<'a>(run: &'a TraceRun, function: &str) -> Vec<&'a Value> {
    run.of_kind("kernel_handler")
        .into_iter()
        .filter(|e| e["function"] == function)
        .collect()
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
