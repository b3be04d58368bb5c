//! kubelet's rule (`NodeAddress`, `validateNodeIP`, `ChooseHostInterface`) on small layouts.
use super::*;
use crate::explain::node_audit::kubelet::{
    choose_host_interface, parse_node_ip_argument, validate_node_ip, CloudProvider,
    HostInterfaceError, LookupResolver, NodeIpArgumentError, NodeIpRejected,
};
use crate::explain::resolver::go_choice::GoResolverChoice;

fn kubelet_with(
    s: &NodeSnapshot,
    settings: &ComponentSettings,
    f: impl FnOnce(&mut AuditContext),
) -> AuditReport {
    audit_with(s, settings, &within(f))
}

fn one_kubelet_pick(r: &AuditReport) -> &ComponentPick {
    let kubelet = picks_of(r, "kubelet");
    assert_eq!(kubelet.len(), 1, "{kubelet:#?}");
    kubelet[0]
}

#[test]
fn node_name_only_at_addresses_no_interface_holds_falls_back_to_the_default_route() {
    let s = Node::new("node-1")
        .addr("eth0", "10.0.0.10/24")
        .default_via("10.0.0.1", "eth0")
        .hosts(&["192.0.2.50", "198.51.100.7"])
        .done();
    let r = audit(s, &ComponentSettings::default(), &GaiConf::default());
    let p = one_kubelet_pick(&r);
    assert_eq!(
        (p.setting.as_str(), p.picked.as_slice()),
        ("default-route interface", &[ip("10.0.0.10")][..])
    );
    let why = p.reasoning.join("\n");
    assert!(why.contains("192.0.2.50: rejected: node IP: \"192.0.2.50\" not found in the host's network interfaces"), "{why}");
    assert!(
        why.contains("eth0: first global unicast IPv4 address in its address order: 10.0.0.10"),
        "{why}"
    );
    assert!(!ids(&r).contains(&"gai-reordered"), "{:?}", r.findings);
}

#[test]
fn seed_000_with_go_s_own_resolver_picks_the_address_listed_first() {
    let s = layout(
        "node-1",
        &[("eth0", "172.18.45.20/27"), ("eth0", "172.18.45.6/27")],
        "172.18.45.1",
        &["172.18.45.6", "172.18.45.20"],
    );
    let by = |resolver| {
        kubelet_with(&s, &ComponentSettings::default(), |c| {
            c.kubelet.resolver = Some(resolver)
        })
    };
    let go = by(LookupResolver::Go);
    let p = one_kubelet_pick(&go);
    assert_eq!(p.picked, [ip("172.18.45.6")]);
    assert_eq!(p.setting, "node name lookup, Go's own resolver");
    assert!(!ids(&go).contains(&"gai-reordered"), "{:?}", go.findings);
    assert!(
        ids(&go).contains(&"components-disagree"),
        "calico takes the primary: {:?}",
        go.findings
    );
    let glibc = by(LookupResolver::Glibc);
    assert_eq!(one_kubelet_pick(&glibc).picked, [ip("172.18.45.20")]);
    let reordered = glibc
        .findings
        .iter()
        .find(|f| f.id == DiagnosisId::GaiReordered)
        .expect("gai-reordered");
    assert!(
        reordered.summary.contains("rule 9"),
        "{}",
        reordered.summary
    );
    assert_eq!(
        one_kubelet_pick(&by(LookupResolver::Musl)).picked,
        [ip("172.18.45.6")]
    );
    // The node's files send a cgo build to libc: that case comes first.
    let choice = GoResolverChoice {
        cgo: true,
        because: "/etc/nsswitch.conf's hosts: line has myhostname".into(),
    };
    let r = kubelet_with(&s, &ComponentSettings::default(), |c| {
        c.go_cgo_choice = Some(choice)
    });
    let first = picks_of(&r, "kubelet")[0];
    assert_eq!(first.setting, "node name lookup, glibc's getaddrinfo (cgo)");
    assert_eq!(first.picked, [ip("172.18.45.20")]);
    assert!(
        first
            .reasoning
            .iter()
            .any(|w| w.contains("Go sends the lookup to libc here")),
        "{:?}",
        first.reasoning
    );
}

#[test]
fn validate_node_ip_refuses_what_kubelet_refuses() {
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("lo", "127.0.0.1/8")
        .done();
    assert_eq!(validate_node_ip(&s, ip("10.0.0.10")), Ok("eth0"));
    assert_eq!(validate_node_ip(&s, ip("::ffff:10.0.0.10")), Ok("eth0"));
    assert_eq!(
        validate_node_ip(&s, ip("127.0.0.1")),
        Err(NodeIpRejected::Loopback)
    );
    assert_eq!(
        validate_node_ip(&s, ip("224.0.0.5")),
        Err(NodeIpRejected::Multicast)
    );
    assert_eq!(
        validate_node_ip(&s, ip("169.254.3.3")),
        Err(NodeIpRejected::LinkLocal)
    );
    assert_eq!(
        validate_node_ip(&s, ip("fe80::1")),
        Err(NodeIpRejected::LinkLocal)
    );
    assert_eq!(
        validate_node_ip(&s, ip("0.0.0.0")),
        Err(NodeIpRejected::Unspecified)
    );
    assert_eq!(
        validate_node_ip(&s, ip("10.0.0.11")),
        Err(NodeIpRejected::NotLocal(ip("10.0.0.11")))
    );
}

#[test]
fn debian_s_loopback_hostname_line_is_skipped_for_the_next_valid_answer() {
    // Debian writes `127.0.1.1 <hostname>`; a link-local entry is refused too.
    let s = Node::new("node-1")
        .addr("lo", "127.0.0.1/8")
        .addr("eth0", "169.254.9.9/16")
        .addr("eth0", "10.0.0.10/24")
        .default_via("10.0.0.1", "eth0")
        .hosts(&["127.0.1.1", "169.254.9.9", "10.0.0.10"])
        .done();
    let r = audit(s, &ComponentSettings::default(), &GaiConf::default());
    let p = one_kubelet_pick(&r);
    assert_eq!(p.picked, [ip("10.0.0.10")]);
    let why = p.reasoning.join("\n");
    assert!(
        why.contains("127.0.1.1: rejected: nodeIP can't be loopback address"),
        "{why}"
    );
    assert!(
        why.contains("169.254.9.9: rejected: nodeIP can't be a link-local unicast address"),
        "{why}"
    );
}

#[test]
fn node_ip_argument_is_read_as_parse_node_ip_argument_reads_it() {
    let arg = parse_node_ip_argument("10.0.0.10, fd00::10").unwrap();
    assert_eq!(arg.ips, [ip("10.0.0.10"), ip("fd00::10")]);
    let arg = parse_node_ip_argument("bogus,010.000.000.010").unwrap();
    assert_eq!(
        (arg.ips, arg.ignored),
        (vec![ip("10.0.0.10")], vec!["bogus".to_string()])
    );
    assert!(parse_node_ip_argument("").unwrap().ips.is_empty());
    assert_eq!(
        parse_node_ip_argument("10.0.0.1,10.0.0.2"),
        Err(NodeIpArgumentError::NotSingleOrPair)
    );
    assert_eq!(
        parse_node_ip_argument("10.0.0.1,fd00::1,fd00::2"),
        Err(NodeIpArgumentError::NotSingleOrPair)
    );
    assert_eq!(
        parse_node_ip_argument("::,10.0.0.1"),
        Err(NodeIpArgumentError::UnspecifiedInPair)
    );
}

#[test]
fn a_dual_stack_pair_gives_two_internal_ips_when_both_are_valid() {
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth0", "fd00::10/64")
        .default_via("10.0.0.1", "eth0")
        .done();
    let pair = parse_node_ip_argument("fd00::10,10.0.0.10").unwrap().ips;
    let r = kubelet_with(&s, &ComponentSettings::default(), |c| {
        c.kubelet.node_ips = pair.clone()
    });
    let p = one_kubelet_pick(&r);
    assert_eq!(
        (p.setting.as_str(), p.picked.as_slice()),
        ("--node-ip (dual-stack)", &pair[..])
    );
    let missing = parse_node_ip_argument("10.0.0.10,fd00::99").unwrap().ips;
    let r = kubelet_with(&s, &ComponentSettings::default(), |c| {
        c.kubelet.node_ips = missing
    });
    let p = one_kubelet_pick(&r);
    assert!(p.picked.is_empty());
    assert!(
        p.reasoning
            .iter()
            .any(|w| w.contains("failed to validate secondaryNodeIP")),
        "{:?}",
        p.reasoning
    );
}

#[test]
fn node_ip_unspecified_ipv6_prefers_ipv6_in_the_lookup_and_the_fallback() {
    let s = Node::new("node-1")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth0", "fd00::10/64")
        .default_via("10.0.0.1", "eth0")
        .default_via("fd00::1", "eth0")
        .hosts(&["10.0.0.10", "fd00::10"])
        .done();
    let v6 = with(|s| s.node_ip = Some(ip("::")));
    let r = kubelet_with(&s, &v6, |c| c.kubelet.resolver = Some(LookupResolver::Go));
    assert_eq!(one_kubelet_pick(&r).picked, [ip("fd00::10")]);
    let r = audit(
        s.clone(),
        &ComponentSettings::default(),
        &GaiConf::default(),
    );
    assert_eq!(picked(&r, "kubelet"), [ip("10.0.0.10")]);
    // No answer: the IPv6 default route's interface first.
    let s = NodeSnapshot { hosts: vec![], ..s };
    let r = audit(s.clone(), &v6, &GaiConf::default());
    let p = one_kubelet_pick(&r);
    assert_eq!(
        (p.setting.as_str(), p.picked.as_slice()),
        ("default-route interface", &[ip("fd00::10")][..])
    );
    let r = audit(s, &ComponentSettings::default(), &GaiConf::default());
    assert_eq!(one_kubelet_pick(&r).picked, [ip("10.0.0.10")]);
}

#[test]
fn a_hostname_override_that_is_an_ip_is_used_without_validation() {
    let s = layout("n", &[("eth0", "10.0.0.10/24")], "10.0.0.1", &["10.0.0.10"]);
    let r = kubelet_with(&s, &ComponentSettings::default(), |c| {
        c.kubelet.hostname_override = Some("192.0.2.9".into())
    });
    let p = one_kubelet_pick(&r);
    assert_eq!(
        (p.setting.as_str(), p.picked.as_slice()),
        ("--hostname-override", &[ip("192.0.2.9")][..])
    );
}

#[test]
fn an_external_cloud_provider_leaves_the_internal_ip_to_the_cloud_controller_manager() {
    let s = layout("n", &[("eth0", "10.0.0.10/24")], "10.0.0.1", &["10.0.0.10"]);
    let r = kubelet_with(&s, &ComponentSettings::default(), |c| {
        c.kubelet.cloud_provider = CloudProvider::External
    });
    let p = one_kubelet_pick(&r);
    assert_eq!(
        (p.setting.as_str(), p.picked.as_slice()),
        ("external cloud provider", &[][..])
    );
    let r = kubelet_with(&s, &with(|s| s.node_ip = Some(ip("10.0.0.10"))), |c| {
        c.kubelet.cloud_provider = CloudProvider::External
    });
    let p = one_kubelet_pick(&r);
    assert_eq!(p.picked, [ip("10.0.0.10")]);
    assert_eq!(
        p.setting,
        "--node-ip, provisional (external cloud provider)"
    );
    assert!(
        p.reasoning
            .iter()
            .any(|w| w.contains("alpha.kubernetes.io/provided-node-ip=10.0.0.10")),
        "{:?}",
        p.reasoning
    );
}

#[test]
fn the_fallback_walks_ipv4_default_routes_first_and_needs_the_interface_up() {
    let s = Node::new("n")
        .link("eth0", false)
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "192.168.5.3/24")
        .addr("eth1", "fd00::3/64")
        .default_via("fd00::1", "eth1")
        .default_via("10.0.0.1", "eth0")
        .default_via("192.168.5.1", "eth1")
        .done();
    let mut why = Vec::new();
    assert_eq!(
        choose_host_interface(&s, false, &mut why),
        Ok(ip("192.168.5.3"))
    );
    let why = why.join("\n");
    assert!(why.contains("eth0: down"), "{why}");
    assert!(why.contains("/proc/net/route"), "{why}");
    let mut why = Vec::new();
    assert_eq!(choose_host_interface(&s, true, &mut why), Ok(ip("fd00::3")));
}

#[test]
fn the_fallback_takes_the_first_global_address_in_dump_order_then_one_on_loopback() {
    let s = Node::new("n")
        .addr("eth0", "169.254.5.5/16")
        .addr("eth0", "10.0.0.20/24")
        .addr("eth0", "10.0.0.10/24")
        .default_via("10.0.0.1", "eth0")
        .done();
    assert_eq!(
        choose_host_interface(&s, false, &mut Vec::new()),
        Ok(ip("10.0.0.20"))
    );
    // RFC 5549: only link-local on the uplink, the node's address on lo.
    let s = Node::new("n")
        .link("lo", true)
        .addr("lo", "127.0.0.1/8")
        .addr("lo", "10.255.0.1/32")
        .addr("eth0", "169.254.5.5/16")
        .default_via("169.254.0.1", "eth0")
        .done();
    let mut why = Vec::new();
    assert_eq!(
        choose_host_interface(&s, false, &mut why),
        Ok(ip("10.255.0.1"))
    );
    assert!(
        why.join("\n")
            .contains("passing over 169.254.5.5 (link-local)"),
        "{why:?}"
    );
}

#[test]
fn a_blackhole_default_route_ahead_ends_the_fallback() {
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .route_without_dev("blackhole", "default")
        .default_via("10.0.0.1", "eth0")
        .done();
    assert_eq!(
        choose_host_interface(&s, false, &mut Vec::new()),
        Err(HostInterfaceError::NoSuchInterface("*".into()))
    );
    let r = audit(s, &ComponentSettings::default(), &GaiConf::default());
    let p = one_kubelet_pick(&r);
    assert_eq!((p.setting.as_str(), p.picked.as_slice()), ("none", &[][..]));
    assert!(
        p.reasoning
            .last()
            .unwrap()
            .starts_with("can't get ip address of node n"),
        "{:?}",
        p.reasoning
    );
}

#[test]
fn no_answer_and_no_default_route_picks_nothing() {
    let s = Node::new("n").addr("eth0", "10.0.0.10/24").done();
    assert_eq!(
        choose_host_interface(&s, false, &mut Vec::new()),
        Err(HostInterfaceError::NoDefaultRoutes)
    );
}
