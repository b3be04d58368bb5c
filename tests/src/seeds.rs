//! The five seed incidents reproduced live, shared by the live seed tests
//! (`tests/live_seeds.rs`) and the committed seed recordings (`tests/seed_recordings.rs`,
//! `tests/fixtures/seeds/`): each incident's address layout in namespaces the test makes, and the
//! traced command that shows it.
use crate::{trace_json, unused_genl_family_id, Netns, TraceRun};

/// A seed incident: its recording's name and the diagnoses its trace ends in.
pub struct Incident {
    /// `NNN-name`, as the recording `tests/fixtures/seeds/NNN-name.jsonl` is called.
    pub name: &'static str,
    /// The diagnosis ids its trace ends in, in order.
    pub diagnoses: &'static [&'static str],
}

/// The five seed incidents, in order (000 … 004).
pub const INCIDENTS: [Incident; 5] = [
    Incident {
        name: "000-gai-reordered",
        diagnoses: &["gai-reordered"],
    },
    Incident {
        name: "001-network-address-used",
        diagnoses: &["network-address-used"],
    },
    Incident {
        name: "002-secondary-address-skipped",
        diagnoses: &["secondary-address-skipped"],
    },
    Incident {
        name: "003-route-get-resolves-to-lo",
        diagnoses: &["route-get-resolves-to-lo"],
    },
    Incident {
        name: "004-keepalived-vip",
        diagnoses: &["secondary-address-skipped"],
    },
];

/// Seed 000's hosts file: the node's own address listed first, the alias second.
pub const SEED_000_HOSTS: &str = "127.0.0.1 localhost\n172.18.45.6 node-a\n172.18.45.20 node-a\n";

/// A namespace with `eth0` (its veth peer in a second namespace of the test, returned with it),
/// `addresses` added in order (`ip addr add ARGS…` each), and a files-only resolver.
pub fn node(tag: &str, addresses: &[&[&str]]) -> (Netns, Netns) {
    let ns = Netns::new(tag);
    let peer = Netns::new(&format!("{tag}p"));
    ns.veth_to("eth0", &peer, "eth0");
    for args in addresses {
        let mut full = vec!["addr", "add"];
        full.extend_from_slice(args);
        ns.ip(&full);
    }
    ns.etc_file("nsswitch.conf", "hosts: files\n");
    (ns, peer)
}

/// `ip netns exec NS COMMAND…`
pub fn in_ns<'a>(ns: &'a Netns, command: &[&'a str]) -> Vec<&'a str> {
    let mut full = vec!["ip", "netns", "exec", ns.name.as_str()];
    full.extend_from_slice(command);
    full
}

/// kube-proxy's old NodePort address discovery in one process (`ipvs_client` at `client` with
/// `--kube-proxy-local-table`), traced with the IPVS family id taught; `extra` goes to `trace`.
pub fn kube_proxy_like(ns: &Netns, client: &str, extra: &[&str]) -> TraceRun {
    let family = format!("{:#x}", unused_genl_family_id());
    let teach = format!("IPVS={family}");
    let mut args = vec!["--genl-family", teach.as_str()];
    args.extend_from_slice(extra);
    trace_json(
        &args,
        &in_ns(ns, &[client, &family, "--kube-proxy-local-table"]),
    )
}

/// A seed incident's node: its namespace and the namespaces holding its veth peers.
pub struct SeedNode {
    /// The node's namespace.
    pub ns: Netns,
    _peers: Vec<Netns>,
}

/// Builds incident `index`'s address layout (0 … 4, as in [`INCIDENTS`]) in namespaces named
/// after `tag`.
pub fn layout(index: usize, tag: &str) -> SeedNode {
    let (addresses, hosts): (&[&[&str]], _) = match index {
        // The alias .20 added first is the kernel's primary: both candidates get source .20.
        0 => (
            &[
                &["172.18.45.20/27", "dev", "eth0", "label", "eth0:vip"],
                &["172.18.45.6/27", "dev", "eth0"],
            ],
            Some(SEED_000_HOSTS),
        ),
        1 => (&[&["172.29.231.5/24", "dev", "eth0"]], None),
        2 => (
            &[
                &["192.0.2.10/24", "dev", "eth0"],
                &["192.0.2.20/24", "dev", "eth0"],
            ],
            None,
        ),
        3 => (&[&["192.0.2.10/24", "dev", "eth0"]], None),
        // keepalived's VIP with a /24 mask: a secondary of the node's own /24.
        4 => (
            &[
                &["10.10.10.11/24", "dev", "eth0"],
                &["10.10.10.100/24", "dev", "eth0"],
            ],
            None,
        ),
        _ => panic!(
            "there are {} seed incidents, not {}",
            INCIDENTS.len(),
            index + 1
        ),
    };
    let (ns, peer) = node(tag, addresses);
    let mut peers = vec![peer];
    if let Some(hosts) = hosts {
        ns.etc_file("hosts", hosts);
    }
    if index == 3 {
        // kube-ipvs0 holds the LB address (a veth here: this kernel has no dummy module).
        let other = Netns::new(&format!("{tag}k"));
        ns.veth_to("kube-ipvs0", &other, "kipvs");
        ns.ip(&["addr", "add", "10.96.0.50/32", "dev", "kube-ipvs0"]);
        peers.push(other);
    }
    SeedNode { ns, _peers: peers }
}

/// Traces incident `index`'s command on its node (see [`layout`]): `trace --format json EXTRA…
/// -- COMMAND`, with `client` the `ipvs_client` binary (seeds 002 and 004).
pub fn trace_incident(index: usize, node: &SeedNode, client: &str, extra: &[&str]) -> TraceRun {
    let ns = &node.ns;
    let sh = |script: &str| trace_json(extra, &in_ns(ns, &["sh", "-c", script]));
    match index {
        0 => trace_json(extra, &in_ns(ns, &["getent", "ahostsv4", "node-a"])),
        1 => sh("ip -4 addr show >/dev/null; ip addr add 172.29.231.0/24 dev eth0"),
        3 => sh("ip -4 addr show >/dev/null; ip route get 10.96.0.50"),
        _ => kube_proxy_like(ns, client, extra),
    }
}
