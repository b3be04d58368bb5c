//! calico's autodetection methods (`autodetection_methods.go`, `filtered.go`, `interfaces.go`,
//! `reachaddr.go`) on small layouts.
use super::*;
use crate::explain::node_audit::calico::{default_exclusions, split_list, CalicoVersion};

/// calico's pick with `method` at `version` (`None`: the newest).
fn calico_pick(
    s: &NodeSnapshot,
    method: &str,
    version: Option<&str>,
) -> (Vec<IpAddr>, AuditReport) {
    let settings = with(|c| c.calico_method = Some(method.into()));
    let r = audit_with(
        s,
        &settings,
        &within(|c| c.calico.version = version.map(|v| v.parse().unwrap())),
    );
    (picked(&r, "calico").to_vec(), r)
}

fn calico_why(r: &AuditReport) -> String {
    picks_of(r, "calico")[0].reasoning.join("\n")
}

#[test]
fn first_found_walks_the_interfaces_in_reverse() {
    let s = Node::new("n")
        .addr("lo", "127.0.0.1/8")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "192.168.5.3/24")
        .default_via("10.0.0.1", "eth0")
        .done();
    let (picked, r) = calico_pick(&s, "first-found", None);
    assert_eq!(picked, [ip("192.168.5.3")]);
    let why = calico_why(&r);
    assert!(
        why.contains("interfaces as calico walks them (net.Interfaces() in reverse): eth1, eth0, lo (excluded: ^lo)"),
        "{why}"
    );
    // An empty method is first-found too.
    assert_eq!(calico_pick(&s, "", None).0, [ip("192.168.5.3")]);
}

#[test]
fn first_found_passes_over_link_local_addresses() {
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "169.254.7.7/16")
        .addr("eth2", "169.254.8.8/16")
        .addr("eth2", "192.168.5.3/24")
        .done();
    let (picked, r) = calico_pick(&s, "first-found", None);
    assert_eq!(picked, [ip("192.168.5.3")]);
    assert!(
        calico_why(&r).contains("eth2: 192.168.5.3/24 taken, after 169.254.8.8/16 (link-local)"),
        "{}",
        calico_why(&r)
    );
    let s = Node(s).addr("eth3", "169.254.9.9/16").done();
    let (_, r) = calico_pick(&s, "first-found", None);
    assert!(
        calico_why(&r).contains("eth3: nothing usable: 169.254.9.9/16 (link-local)"),
        "{}",
        calico_why(&r)
    );
}

#[test]
fn interface_regexes_are_unanchored_and_alternate() {
    let s = Node::new("n")
        .addr("ens3", "192.168.5.3/24")
        .addr("eth0", "10.0.0.10/24")
        .addr("bond0", "172.20.0.5/24")
        .done();
    // bond0 is walked first, not matched; eth0 matches the second alternative.
    assert_eq!(
        calico_pick(&s, "interface=eth.*|ens.*", None).0,
        [ip("10.0.0.10")]
    );
    assert_eq!(
        calico_pick(&s, "interface=ens.*|eth.*", None).0,
        [ip("10.0.0.10")]
    );
    assert_eq!(
        calico_pick(&s, "interface=ens3,bond0", None).0,
        [ip("172.20.0.5")]
    );
    // Unanchored: "eth.*" matches veth1234, which interface= does not exclude.
    let s = Node(s).addr("veth1234", "10.244.0.1/32").done();
    assert_eq!(
        calico_pick(&s, "interface=eth.*", None).0,
        [ip("10.244.0.1")]
    );
    assert_eq!(
        calico_pick(&s, "interface=^eth.*", None).0,
        [ip("10.0.0.10")]
    );
    // A regex Go would refuse voids the method.
    let (picked, r) = calico_pick(&s, "interface=eth(0", None);
    assert!(picked.is_empty());
    assert!(
        calico_why(&r).contains("Invalid interface regex"),
        "{}",
        calico_why(&r)
    );
}

#[test]
fn skip_interface_lists_split_on_commas_with_spaces_around() {
    assert_eq!(split_list("eth1 , ens.*"), ["eth1", "ens.*"]);
    assert_eq!(split_list(" eth1,\tens3 "), [" eth1", "ens3 "]);
    assert_eq!(split_list(""), [""]);
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("ens3", "192.168.5.3/24")
        .addr("eth1", "172.20.0.5/24")
        .done();
    assert_eq!(
        calico_pick(&s, "skip-interface=eth1 , ens.*", None).0,
        [ip("10.0.0.10")]
    );
    // The space at the very start stays in the regex: " eth1" matches no name.
    assert_eq!(
        calico_pick(&s, "skip-interface= eth1", None).0,
        [ip("172.20.0.5")]
    );
    // The default exclusions still apply.
    let s = Node(s).addr("docker0", "172.17.0.1/16").done();
    assert_eq!(
        calico_pick(&s, "skip-interface=eth1", None).0,
        [ip("192.168.5.3")]
    );
}

#[test]
fn br_bridges_are_excluded_only_from_3_25() {
    // calico#1628: first-found took Docker's br- bridge.
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("br-d710e33f6c1a", "172.18.0.1/16")
        .done();
    assert_eq!(
        calico_pick(&s, "first-found", Some("v3.24.6")).0,
        [ip("172.18.0.1")]
    );
    assert_eq!(
        calico_pick(&s, "first-found", Some("v3.25.0")).0,
        [ip("10.0.0.10")]
    );
    assert_eq!(calico_pick(&s, "first-found", None).0, [ip("10.0.0.10")]);
    let v = |t: &str| t.parse::<CalicoVersion>().unwrap();
    assert!(!default_exclusions(v("3.24.6")).contains(&"^podman.*"));
    assert!(default_exclusions(v("3.25.0")).contains(&"^podman.*"));
    assert!(default_exclusions(v("3.24.6")).contains(&"^nodelocaldns.*"));
    assert!(!default_exclusions(v("3.24.5")).contains(&"^nodelocaldns.*"));
    assert!(default_exclusions(v("3.23.5")).contains(&"^vxlan\\.calico.*"));
    assert_eq!(
        default_exclusions(v("3.22.0")),
        default_exclusions(v("3.24.2"))
    );
}

#[test]
fn releases_before_the_anchors_exclude_every_name_with_lo_in_it() {
    let s = Node::new("n").addr("wlo1", "192.168.1.20/24").done();
    let (picked, r) = calico_pick(&s, "first-found", Some("3.22.0"));
    assert!(picked.is_empty());
    assert!(
        calico_why(&r).contains("wlo1 (excluded: lo)"),
        "{}",
        calico_why(&r)
    );
    assert_eq!(
        calico_pick(&s, "first-found", Some("3.24.3")).0,
        [ip("192.168.1.20")]
    );
}

#[test]
fn cidr_takes_every_interface_and_an_invalid_entry_voids_the_method() {
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("docker0", "172.17.0.1/16")
        .addr("eth1", "192.168.5.3/24")
        .done();
    assert_eq!(
        calico_pick(&s, "cidr=172.17.0.0/16", None).0,
        [ip("172.17.0.1")]
    );
    assert_eq!(
        calico_pick(&s, "cidr=10.0.0.0/8 , 172.16.0.0/12", None).0,
        [ip("172.17.0.1")]
    );
    assert_eq!(
        calico_pick(&s, "cidr=10.0.0.5/8", None).0,
        [ip("10.0.0.10")]
    );
    let (picked, r) = calico_pick(&s, "cidr=192.168.0.0/16,10.0.0.0", None);
    assert!(picked.is_empty());
    assert!(
        calico_why(&r).contains("Invalid CIDR \"10.0.0.0\""),
        "{}",
        calico_why(&r)
    );
    assert!(calico_pick(&s, "cidr=10.0.0.0/33", None).0.is_empty());
    assert!(calico_pick(&s, "cidr=fd00::/8", None).0.is_empty());
}

#[test]
fn can_reach_takes_the_kernel_s_source_for_the_route() {
    // One subnet on two interfaces: two prefix routes; the kernel takes the first.
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "10.0.0.20/24")
        .addr("eth2", "192.168.5.3/24")
        .default_via("192.168.5.1", "eth2")
        .done();
    let (picked, r) = calico_pick(&s, "can-reach=10.0.0.77", None);
    assert_eq!(picked, [ip("10.0.0.10")]);
    let why = calico_why(&r);
    assert!(
        why.contains("eth0 and eth1 have routes of that prefix"),
        "{why}"
    );
    assert_eq!(
        calico_pick(&s, "can-reach=8.8.8.8", None).0,
        [ip("192.168.5.3")]
    );
    // A local destination: its own address.
    assert_eq!(
        calico_pick(&s, "can-reach=10.0.0.20", None).0,
        [ip("10.0.0.20")]
    );
    assert!(calico_pick(&s, "can-reach=example.com", None).0.is_empty());
    assert!(calico_pick(&s, "can-reach=2001:db8::1", None).0.is_empty());
    let no_default = Node::new("n").addr("eth0", "10.0.0.10/24").done();
    assert!(calico_pick(&no_default, "can-reach=8.8.8.8", None)
        .0
        .is_empty());
}

#[test]
fn kubernetes_internal_ip_takes_the_network_address_in_the_releases_that_masked_it() {
    // Seed 001.
    let s = layout(
        "n",
        &[("eth0", "172.29.231.5/24")],
        "172.29.231.1",
        &["172.29.231.5"],
    );
    let (picked, r) = calico_pick(&s, "kubernetes-internal-ip", Some("v3.22.2"));
    assert_eq!(picked, [ip("172.29.231.0")]);
    assert!(
        ids(&r).contains(&"network-address-used"),
        "{:?}",
        r.findings
    );
    let (picked, r) = calico_pick(&s, "kubernetes-internal-ip", Some("v3.23.1"));
    assert_eq!(picked, [ip("172.29.231.0")]);
    assert!(
        ids(&r).contains(&"network-address-used"),
        "{:?}",
        r.findings
    );
    let (picked, r) = calico_pick(&s, "kubernetes-internal-ip", Some("v3.22.4"));
    assert_eq!(picked, [ip("172.29.231.5")]);
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    // Version not given: the newest's pick, and what the masking releases would do.
    let (picked, r) = calico_pick(&s, "kubernetes-internal-ip", None);
    assert_eq!(picked, [ip("172.29.231.5")]);
    assert!(
        ids(&r).contains(&"network-address-used"),
        "{:?}",
        r.findings
    );
    // Before v3.22.0 there is no such method: calico-node exits.
    let (picked, r) = calico_pick(&s, "kubernetes-internal-ip", Some("v3.21.6"));
    assert!(picked.is_empty());
    assert!(
        calico_why(&r).contains("Invalid IP autodetection method"),
        "{}",
        calico_why(&r)
    );
}

#[test]
fn kubernetes_internal_ip_on_no_interface_detects_nothing() {
    let s = layout("n", &[("eth0", "10.0.0.10/24")], "10.0.0.1", &["10.0.0.10"]);
    let settings = with(|c| c.calico_method = Some("kubernetes-internal-ip".into()));
    let r = audit_with(
        &s,
        &settings,
        &within(|c| c.kubelet.hostname_override = Some("192.0.2.9".into())),
    );
    assert!(picked(&r, "calico").is_empty());
    assert!(
        calico_why(&r).contains("Unable to parse CIDR 192.0.2.9"),
        "{}",
        calico_why(&r)
    );
}

#[test]
fn an_unknown_method_ends_calico_node() {
    let s = layout("n", &[("eth0", "10.0.0.10/24")], "10.0.0.1", &[]);
    let (picked, r) = calico_pick(&s, "first_found", None);
    assert!(picked.is_empty());
    assert!(
        calico_why(&r).ends_with("Invalid IP autodetection method: first_found: calico-node exits"),
        "{}",
        calico_why(&r)
    );
}
