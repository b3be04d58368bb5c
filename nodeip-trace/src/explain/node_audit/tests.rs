//! Audit tests on layouts built the way the kernel builds its tables (one per seed incident).
use compact_str::{format_compact, ToCompactString};

use super::*;

/// A layout: (interface, address/len) in the order added; the first address of a prefix on an
/// interface is primary, later ones secondary; local and prefix routes as the kernel makes them,
/// and a default route via `gateway` on the first interface.
fn layout(
    hostname: &str,
    addresses: &[(&str, &str)],
    gateway: &str,
    hosts: &[&str],
) -> NodeSnapshot {
    let mut s = NodeSnapshot {
        hostname: hostname.into(),
        hosts: hosts.iter().map(|h| h.parse().unwrap()).collect(),
        ..Default::default()
    };
    for (i, (dev, cidr)) in addresses.iter().enumerate() {
        let (addr, len) = parse_prefix(cidr).unwrap();
        let primary = s
            .addresses
            .iter()
            .find(|a| {
                a.ifname == *dev
                    && !a.secondary
                    && a.prefix_len == len
                    && in_prefix(addr, a.address.parse().unwrap(), len)
            })
            .map(|a| a.address.clone());
        if !s.links.iter().any(|l| l.ifname.as_deref() == Some(dev)) {
            s.links.push(LinkFact {
                index: i as u32 + 2,
                ifname: Some(dev.to_string()),
                kind: None,
            });
        }
        s.addresses.push(AddressFact {
            ifname: (*dev).into(),
            address: addr.to_compact_string(),
            prefix_len: len,
            secondary: primary.is_some(),
            label: None,
        });
        let src = primary.clone().unwrap_or(addr.to_compact_string());
        s.routes.push(RouteFact {
            table: "local".into(),
            route_type: "local".into(),
            dst: format_compact!("{addr}/32"),
            dev: Some((*dev).into()),
            src: Some(src.clone()),
            gateway: None,
        });
        if primary.is_none() {
            let (net, _) = network_and_broadcast(addr, len).unwrap_or((addr, addr));
            s.routes.push(RouteFact {
                table: "main".into(),
                route_type: "unicast".into(),
                dst: format_compact!("{net}/{len}"),
                dev: Some((*dev).into()),
                src: Some(src),
                gateway: None,
            });
        }
    }
    s.routes.push(RouteFact {
        table: "main".into(),
        route_type: "unicast".into(),
        dst: "default".into(),
        dev: Some(addresses[0].0.into()),
        src: None,
        gateway: Some(gateway.into()),
    });
    s
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
    // rule 9 puts the address equal to its own source first.
    let s = layout(
        "node-1",
        &[("eth0", "172.18.45.20/27"), ("eth0", "172.18.45.6/27")],
        "172.18.45.1",
        &["172.18.45.6", "172.18.45.20"],
    );
    let r = audit(s, &ComponentSettings::default(), &GaiConf::default());
    assert_eq!(picked(&r, "kubelet"), [ip("172.18.45.20")]);
    assert!(ids(&r).contains(&"gai-reordered"), "{:?}", r.findings);
    let text = render_text(&r);
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
    let settings = with(|s| s.node_ip = Some(ip("10.0.0.99")));
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
    let text = render_text(&r);
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
    assert_eq!(method("first-found"), [ip("10.0.0.10")]);
    assert_eq!(method("interface=eth1"), [ip("192.168.5.3")]);
    assert_eq!(method("skip-interface=eth0"), [ip("192.168.5.3")]);
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
            },
            AddressFact {
                ifname: "eth0".into(),
                address: "10.0.0.20".into(),
                prefix_len: 24,
                secondary: true,
                label: None,
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
    assert_eq!(left_out.len(), 2, "{left_out:?}");
    assert!(left_out[0].contains("no local-table route"));
    assert!(left_out[1].starts_with("kubelet"));
}
