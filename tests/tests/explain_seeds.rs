//! End to end (issue 6): `nodeip-trace explain --netns` on each seed incident's address layout,
//! built in namespaces the test creates (veth peers in a second test namespace, IPv6 off so the
//! output is deterministic), compared with golden reports in `tests/golden/explain/`.
use std::process::Command;

use nodeip_trace_tests::golden::assert_golden;
use nodeip_trace_tests::{require_root, run_ok, tool, workspace_root, Netns};

/// One seed layout: interfaces with addresses in the order added (the first of a prefix is the
/// kernel's primary), a default gateway on the first interface, the node name's hosts lines.
struct Layout {
    name: &'static str,
    addresses: &'static [(&'static str, &'static str)],
    gateway: &'static str,
    hosts: &'static str,
    flags: &'static [&'static str],
    finding: Option<&'static str>,
}

const LAYOUTS: &[Layout] = &[
    Layout {
        name: "000-gai-reordered",
        addresses: &[("eth0", "172.18.45.20/27"), ("eth0", "172.18.45.6/27")],
        gateway: "172.18.45.1",
        hosts: "172.18.45.6 node-1\n172.18.45.20 node-1\n",
        flags: &[],
        finding: Some("gai-reordered"),
    },
    Layout {
        name: "001-network-address-used",
        addresses: &[("eth0", "172.29.231.5/24")],
        gateway: "172.29.231.1",
        hosts: "172.29.231.5 node-1\n",
        flags: &["--calico-method", "kubernetes-internal-ip"],
        finding: Some("network-address-used"),
    },
    Layout {
        name: "002-secondary-address-skipped",
        addresses: &[
            ("rcosmgmt", "172.28.110.16/24"),
            ("rcosmgmt", "172.28.110.7/24"),
            ("kube-ipvs0", "10.96.0.1/32"),
        ],
        gateway: "172.28.110.1",
        hosts: "172.28.110.16 node-1\n",
        flags: &[],
        finding: Some("secondary-address-skipped"),
    },
    Layout {
        name: "003-route-get-resolves-to-lo",
        addresses: &[("eth0", "172.16.0.1/24"), ("kube-ipvs0", "172.16.0.100/32")],
        gateway: "172.16.0.254",
        hosts: "172.16.0.1 node-1\n",
        flags: &["--openelb-can-reach", "172.16.0.100"],
        finding: Some("route-get-resolves-to-lo"),
    },
    Layout {
        name: "004-keepalived-vip-24",
        addresses: &[("eth0", "10.10.10.11/24"), ("eth0", "10.10.10.100/24")],
        gateway: "10.10.10.1",
        hosts: "10.10.10.11 node-1\n",
        flags: &[],
        finding: Some("secondary-address-skipped"),
    },
    Layout {
        name: "004-keepalived-vip-32-healthy",
        addresses: &[("eth0", "10.10.10.11/24"), ("eth0", "10.10.10.100/32")],
        gateway: "10.10.10.1",
        hosts: "10.10.10.11 node-1\n",
        flags: &[],
        finding: None,
    },
];

fn build(layout: &Layout, tag: &str) -> (Netns, Netns) {
    let ns = Netns::new(tag);
    let peer = Netns::new(&format!("{tag}p"));
    for n in [&ns, &peer] {
        run_ok(
            Command::new("ip")
                .args(["netns", "exec", &n.name, "sysctl", "-qw"])
                .args([
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ]),
        );
    }
    let mut devices: Vec<&str> = Vec::new();
    for (dev, cidr) in layout.addresses {
        if !devices.contains(dev) {
            ns.veth_to(dev, &peer, &format!("p{}", devices.len()));
            devices.push(dev);
        }
        ns.ip(&["addr", "add", cidr, "dev", dev]);
    }
    ns.ip(&[
        "route",
        "add",
        "default",
        "via",
        layout.gateway,
        "dev",
        devices[0],
    ]);
    ns.etc_file("hosts", &format!("127.0.0.1 localhost\n{}", layout.hosts));
    // The name-service files Go's choice of resolver reads: RHEL-style, with myhostname (the
    // node name is not this machine's hostname, so Go keeps its own resolver for it).
    ns.etc_file("nsswitch.conf", "hosts: files myhostname dns\n");
    ns.etc_file("resolv.conf", "nameserver 127.0.0.1\noptions ndots:2\n");
    (ns, peer)
}

#[test]
fn explain_reports_each_seed_layout() {
    require_root();
    for (i, layout) in LAYOUTS.iter().enumerate() {
        let (ns, _peer) = build(layout, &format!("ex{i}"));
        let out = Command::new(tool())
            .args(["explain", "--netns", &ns.name, "--node-name", "node-1"])
            .args(["--gai-conf", "/dev/null"])
            .args(layout.flags)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let expected_code = if layout.finding.is_some() { 3 } else { 0 };
        assert_eq!(
            out.status.code(),
            Some(expected_code),
            "{}: {text}{}",
            layout.name,
            String::from_utf8_lossy(&out.stderr)
        );
        match layout.finding {
            Some(id) => assert!(
                text.contains(&format!("] {id} — ")),
                "{}: {text}",
                layout.name
            ),
            None => assert!(text.contains("No known failure pattern found."), "{text}"),
        }
        let golden = workspace_root().join(format!("tests/golden/explain/{}.txt", layout.name));
        assert_golden(&golden, &out.stdout);
    }
}

#[test]
fn explain_names_a_missing_namespace() {
    let out = Command::new(tool())
        .args(["explain", "--netns", "nit-no-such-namespace"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "errors exit 2, findings 3");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nit-no-such-namespace") && err.contains("ip netns list"),
        "{err}"
    );
}

/// The audit's route model is judged by the kernel: for every address of each layout, its
/// gateway and an off-link destination, the model's `ip route get` answer (device and source)
/// equals the kernel's.
#[test]
fn route_model_agrees_with_the_kernel() {
    use nodeip_trace::explain::node_audit::NodeSnapshot;
    require_root();
    for (i, layout) in LAYOUTS.iter().enumerate() {
        let (ns, _peer) = build(layout, &format!("rm{i}"));
        let path = std::path::Path::new("/run/netns").join(&ns.name);
        let messages = nodeip_trace::host::kernel_dump::node_messages(Some(&path)).unwrap();
        let snapshot = NodeSnapshot::from_messages("node-1", vec![], &messages);
        let destinations = layout
            .addresses
            .iter()
            .map(|(_, cidr)| cidr.split('/').next().unwrap())
            .chain([layout.gateway, "198.51.100.1"]);
        for dst in destinations {
            let out = run_ok(Command::new("ip").args(["-j", "-n", &ns.name, "route", "get", dst]));
            let kernel: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let model = snapshot.route_get(dst.parse().unwrap()).expect("a route");
            assert_eq!(
                (kernel[0]["dev"].as_str(), kernel[0]["prefsrc"].as_str()),
                (
                    Some(model.dev.as_str()),
                    model.src.map(|s| s.to_string()).as_deref()
                ),
                "{}: route get {dst}: kernel {kernel}, model {model:?}",
                layout.name
            );
        }
    }
}
