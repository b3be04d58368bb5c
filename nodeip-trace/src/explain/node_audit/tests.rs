//! Audit tests on layouts built the way the kernel builds its tables (one per seed incident).
use compact_str::{format_compact, ToCompactString};

use super::*;

mod calico;
mod flannel;
mod kube_vip;
mod kubelet;
mod snapshot;

/// A node built the way the kernel builds its tables: links in index order; for each address
/// added, its local route (`src` the primary of its prefix) and, for a prefix's first address
/// on an interface (its primary), the prefix route.
struct Node(NodeSnapshot);

impl Node {
    fn new(hostname: &str) -> Self {
        Node(NodeSnapshot {
            hostname: hostname.into(),
            ..Default::default()
        })
    }

    /// A link, up or down (`lo` is a loopback link).
    fn link(mut self, name: &str, up: bool) -> Self {
        let index = self.0.links.len() as u32 + 2;
        self.0.links.push(NodeLink {
            index,
            ifname: Some(name.into()),
            up: Some(up),
            loopback: Some(name == "lo"),
            ..Default::default()
        });
        self
    }

    /// An address on `dev` (a link, up, made for it if there is none yet).
    fn addr(mut self, dev: &str, cidr: &str) -> Self {
        if !self
            .0
            .links
            .iter()
            .any(|l| l.ifname.as_deref() == Some(dev))
        {
            self = self.link(dev, true);
        }
        let (addr, len) = parse_prefix(cidr).unwrap();
        let primary = self
            .0
            .addresses
            .iter()
            .find(|a| {
                a.ifname == *dev
                    && !a.secondary
                    && a.prefix_len == len
                    && in_prefix(addr, a.address.parse().unwrap(), len)
            })
            .map(|a| a.address.clone());
        self.0.addresses.push(AddressFact {
            ifname: dev.into(),
            address: addr.to_compact_string(),
            prefix_len: len,
            secondary: primary.is_some(),
            label: None,
            flags: Vec::new(),
        });
        let src = primary.clone().unwrap_or(addr.to_compact_string());
        let host = if addr.is_ipv4() { 32 } else { 128 };
        self.0.routes.push(RouteFact {
            table: "local".into(),
            route_type: "local".into(),
            dst: format_compact!("{addr}/{host}"),
            dev: Some(dev.into()),
            src: Some(src.clone()),
            gateway: None,
        });
        if primary.is_none() {
            self.0.routes.push(RouteFact {
                table: "main".into(),
                route_type: "unicast".into(),
                dst: format_compact!("{}/{len}", network_of(addr, len)),
                dev: Some(dev.into()),
                src: Some(src),
                gateway: None,
            });
        }
        self
    }

    /// A default route via `gateway` on `dev`.
    fn default_via(mut self, gateway: &str, dev: &str) -> Self {
        let v6 = gateway.contains(':');
        self.0.routes.push(RouteFact {
            table: "main".into(),
            route_type: "unicast".into(),
            dst: if v6 { "::/0".into() } else { "default".into() },
            dev: Some(dev.into()),
            src: None,
            gateway: Some(gateway.into()),
        });
        self
    }

    /// A route of `route_type` (`blackhole`, ...) to `dst` with no device.
    fn route_without_dev(mut self, route_type: &str, dst: &str) -> Self {
        self.0.routes.push(RouteFact {
            table: "main".into(),
            route_type: route_type.to_string().into(),
            dst: dst.into(),
            dev: None,
            src: None,
            gateway: None,
        });
        self
    }

    /// The node name's hosts-file addresses.
    fn hosts(mut self, hosts: &[&str]) -> Self {
        self.0.hosts = hosts.iter().map(|h| h.parse().unwrap()).collect();
        self
    }

    fn done(self) -> NodeSnapshot {
        self.0
    }
}

/// A layout: (interface, address/len) in the order added, a default route via `gateway` on the
/// first interface, the node name's hosts-file addresses.
fn layout(
    hostname: &str,
    addresses: &[(&str, &str)],
    gateway: &str,
    hosts: &[&str],
) -> NodeSnapshot {
    addresses
        .iter()
        .fold(Node::new(hostname), |n, (dev, cidr)| n.addr(dev, cidr))
        .default_via(gateway, addresses[0].0)
        .hosts(hosts)
        .done()
}

fn ids(r: &AuditReport) -> Vec<&str> {
    r.findings.iter().map(|d| d.id.as_str()).collect()
}

fn picked<'a>(r: &'a AuditReport, component: &str) -> &'a [IpAddr] {
    &r.picks
        .iter()
        .find(|p| p.component.starts_with(component))
        .unwrap()
        .picked
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn with(f: impl FnOnce(&mut ComponentSettings)) -> ComponentSettings {
    let mut settings = ComponentSettings::default();
    f(&mut settings);
    settings
}

fn within(f: impl FnOnce(&mut AuditContext)) -> AuditContext {
    let mut context = AuditContext::default();
    f(&mut context);
    context
}

/// The audit with `settings` and `context`, glibc's built-in tables.
fn audit_with(
    s: &NodeSnapshot,
    settings: &ComponentSettings,
    context: &AuditContext,
) -> AuditReport {
    audit_in(s.clone(), settings, context, &GaiConf::default())
}

/// Every pick of `component`, in order.
fn picks_of<'a>(r: &'a AuditReport, component: &str) -> Vec<&'a ComponentPick> {
    r.picks
        .iter()
        .filter(|p| p.component == component)
        .collect()
}

#[test]
fn route_get_answers_like_the_kernel() {
    let s = layout(
        "n",
        &[("eth0", "10.0.0.10/24"), ("eth0", "10.0.0.20/24")],
        "10.0.0.1",
        &[],
    );
    let local = s.route_get(ip("10.0.0.20")).unwrap();
    assert_eq!(
        (local.table.as_str(), local.dev.as_str(), local.src),
        ("local", "lo", Some(ip("10.0.0.10")))
    );
    let onlink = s.route_get(ip("10.0.0.77")).unwrap();
    assert_eq!(
        (onlink.dev.as_str(), onlink.src),
        ("eth0", Some(ip("10.0.0.10")))
    );
    let far = s.route_get(ip("192.0.2.1")).unwrap();
    assert_eq!((far.dev.as_str(), far.src), ("eth0", Some(ip("10.0.0.10"))));
}

#[test]
fn seed_000_alias_listed_second_comes_first() {
    // The alias is the kernel's primary; the hosts file lists the other address first; glibc's
    // rule 9 puts the address equal to its own source first, Go's own resolver and musl do not.
    // The kubelet binary is not known: each resolver's case is a pick, Go's own first.
    let s = layout(
        "node-1",
        &[("eth0", "172.18.45.20/27"), ("eth0", "172.18.45.6/27")],
        "172.18.45.1",
        &["172.18.45.6", "172.18.45.20"],
    );
    let r = audit(s, &ComponentSettings::default(), &GaiConf::default());
    let kubelet: Vec<(&str, &[IpAddr])> = picks_of(&r, "kubelet")
        .iter()
        .map(|p| (p.setting.as_str(), p.picked.as_slice()))
        .collect();
    assert_eq!(
        kubelet,
        [
            (
                "node name lookup, Go's own resolver",
                &[ip("172.18.45.6")][..]
            ),
            (
                "node name lookup, glibc's getaddrinfo (cgo)",
                &[ip("172.18.45.20")][..]
            ),
            (
                "node name lookup, musl's getaddrinfo (cgo)",
                &[ip("172.18.45.6")][..]
            ),
        ]
    );
    assert!(ids(&r).contains(&"gai-reordered"), "{:?}", r.findings);
    let text = format!("{r:?}");
    assert!(text.contains("rule 9"), "{text}");
}

#[test]
fn node_ip_flag_wins_and_healthy_layout_has_no_findings() {
    let s = layout("n", &[("eth0", "10.0.0.10/24")], "10.0.0.1", &["10.0.0.10"]);
    let r = audit(
        s.clone(),
        &ComponentSettings::default(),
        &GaiConf::default(),
    );
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    assert_eq!(picked(&r, "kubelet"), [ip("10.0.0.10")]);
    assert_eq!(picked(&r, "calico"), [ip("10.0.0.10")]);
    // A --node-ip no interface holds fails validateNodeIP: kubelet sets no address.
    let settings = with(|s| s.node_ip = Some(ip("10.0.0.99")));
    let r = audit(s.clone(), &settings, &GaiConf::default());
    assert!(picked(&r, "kubelet").is_empty());
    let why = &picks_of(&r, "kubelet")[0].reasoning;
    assert!(
        why.iter()
            .any(|w| w.contains("not found in the host's network interfaces")),
        "{why:?}"
    );
    let s = Node(s).addr("eth0", "10.0.0.99/24").done();
    let r = audit(s, &settings, &GaiConf::default());
    assert_eq!(picked(&r, "kubelet"), [ip("10.0.0.99")]);
}

#[test]
fn seed_001_kubernetes_internal_ip_takes_the_network_address() {
    let s = layout(
        "n",
        &[("eth0", "172.29.231.5/24")],
        "172.29.231.1",
        &["172.29.231.5"],
    );
    let settings = with(|s| s.calico_method = Some("kubernetes-internal-ip".into()));
    let r = audit(s, &settings, &GaiConf::default());
    assert!(
        ids(&r).contains(&"network-address-used"),
        "{:?}",
        r.findings
    );
    let text = format!("{r:?}");
    assert!(text.contains("172.29.231.0/24"), "{text}");
}

#[test]
fn seeds_002_004_secondary_vip_gets_no_node_port_on_the_local_table_path() {
    let s = layout(
        "n",
        &[
            ("rcosmgmt", "172.28.110.16/24"),
            ("rcosmgmt", "172.28.110.7/24"),
            ("kube-ipvs0", "10.96.0.1/32"),
        ],
        "172.28.110.1",
        &[],
    );
    let r = audit(
        s.clone(),
        &ComponentSettings::default(),
        &GaiConf::default(),
    );
    assert_eq!(
        picked(&r, "kube-proxy IPVS (local-table"),
        [ip("172.28.110.16")]
    );
    assert_eq!(
        picked(&r, "kube-proxy IPVS (address-dump"),
        [ip("172.28.110.16"), ip("172.28.110.7")]
    );
    assert_eq!(ids(&r), ["secondary-address-skipped"]);
    let settings = with(|s| s.node_port_addresses = vec!["primary".into()]);
    let r = audit(s, &settings, &GaiConf::default());
    assert_eq!(
        picked(&r, "kube-proxy IPVS (address-dump"),
        [ip("172.28.110.16")]
    );
}

#[test]
fn seed_003_can_reach_an_assigned_lb_ip_resolves_to_lo() {
    let s = layout(
        "n",
        &[("eth0", "172.16.0.1/24"), ("kube-ipvs0", "172.16.0.100/32")],
        "172.16.0.254",
        &[],
    );
    let settings = with(|s| s.openelb_can_reach = Some(ip("172.16.0.100")));
    let r = audit(s.clone(), &settings, &GaiConf::default());
    assert!(
        ids(&r).contains(&"route-get-resolves-to-lo"),
        "{:?}",
        r.findings
    );
    assert!(r.findings.iter().any(|d| d.summary.contains("kube-ipvs0")));
    let settings = with(|s| s.openelb_can_reach = Some(ip("172.16.0.254")));
    let r = audit(s, &settings, &GaiConf::default());
    assert_eq!(picked(&r, "OpenELB"), [ip("172.16.0.1")]);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
}

#[test]
fn calico_methods() {
    let s = layout(
        "n",
        &[
            ("docker0", "172.17.0.1/16"),
            ("eth0", "10.0.0.10/24"),
            ("eth1", "192.168.5.3/24"),
        ],
        "10.0.0.1",
        &[],
    );
    let method = |m: &str| {
        let settings = with(|s| s.calico_method = Some(m.into()));
        picked(&audit(s.clone(), &settings, &GaiConf::default()), "calico").to_vec()
    };
    // calico walks net.Interfaces() in reverse: eth1 before eth0.
    assert_eq!(method("first-found"), [ip("192.168.5.3")]);
    assert_eq!(method("interface=eth1"), [ip("192.168.5.3")]);
    assert_eq!(method("skip-interface=eth1"), [ip("10.0.0.10")]);
    assert_eq!(method("cidr=192.168.0.0/16"), [ip("192.168.5.3")]);
    assert_eq!(method("can-reach=192.168.5.77"), [ip("192.168.5.3")]);
    assert!(method("bogus").is_empty());
}

#[test]
fn a_partial_snapshot_leaves_out_the_pickers_it_cannot_support() {
    // Addresses only (what glibc's own dump shows): a secondary on eth0, no routes at all.
    let snapshot = NodeSnapshot {
        hostname: "node-1".into(),
        addresses: vec![
            AddressFact {
                ifname: "eth0".into(),
                address: "10.0.0.6".into(),
                prefix_len: 24,
                secondary: false,
                label: None,
                flags: Vec::new(),
            },
            AddressFact {
                ifname: "eth0".into(),
                address: "10.0.0.20".into(),
                prefix_len: 24,
                secondary: true,
                label: None,
                flags: Vec::new(),
            },
        ],
        ..Default::default()
    };
    let full = audit(snapshot, &ComponentSettings::default(), &GaiConf::default());
    assert!(
        full.findings
            .iter()
            .any(|f| f.id == DiagnosisId::SecondaryAddressSkipped),
        "without routes every local src looks missing: {:?}",
        full.findings
    );
    let (partial, left_out) = full.without_unseen_inputs();
    let components: Vec<&str> = partial.picks.iter().map(|p| p.component.as_str()).collect();
    assert_eq!(
        components,
        ["calico", "kube-proxy IPVS (address-dump path)"]
    );
    assert!(partial
        .findings
        .iter()
        .all(|f| f.id != DiagnosisId::SecondaryAddressSkipped));
    assert!(partial.local_sources.is_empty());
    assert_eq!(left_out.len(), 3, "{left_out:?}");
    assert!(left_out[0].contains("no local-table route"));
    assert!(left_out[1].starts_with("flannel"));
    assert!(left_out[2].starts_with("kubelet"));
}
