//! flannel's public IP (`LookupExtIface`, IPv4 stack) on small layouts.
use super::*;

fn flannel_pick(s: &NodeSnapshot, iface: Option<&str>) -> ComponentPick {
    crate::explain::node_audit::flannel::flannel(s, iface)
}

/// Marks `address` with `ip address`'s `flags` (`dynamic`, `deprecated`, ...).
fn flagged(mut s: NodeSnapshot, address: &str, flags: &[&'static str]) -> NodeSnapshot {
    for a in s.addresses.iter_mut().filter(|a| a.address == address) {
        a.flags = flags.iter().map(|f| (*f).into()).collect();
    }
    s
}

#[test]
fn the_default_route_s_interface_and_its_first_permanent_global_address() {
    // Two NICs; the default route leaves by eth1.
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "192.168.1.50/24")
        .addr("eth1", "192.168.1.60/24")
        .default_via("192.168.1.1", "eth1")
        .done();
    let p = flannel_pick(&s, None);
    assert_eq!(p.picked, [ip("192.168.1.50")], "{p:#?}");
    assert!(
        p.reasoning[0].contains("default-gateway interface: eth1"),
        "{p:#?}"
    );
    // k3s#12459's shape: the DHCP address is dynamic, a static alias beside it wins.
    let s = flagged(s, "192.168.1.50", &["dynamic"]);
    assert_eq!(flannel_pick(&s, None).picked, [ip("192.168.1.60")]);
    // A deprecated address is never taken; link-local only when nothing global is left.
    let s = flagged(s, "192.168.1.60", &["deprecated"]);
    assert_eq!(flannel_pick(&s, None).picked, [ip("192.168.1.50")]);
    let ll = Node::new("n")
        .addr("eth1", "169.254.7.7/16")
        .default_via("169.254.0.1", "eth1")
        .done();
    assert_eq!(flannel_pick(&ll, None).picked, [ip("169.254.7.7")]);
}

#[test]
fn iface_by_name_or_ip_and_each_failure_flannel_logs() {
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "192.168.1.50/24")
        .default_via("192.168.1.1", "eth1")
        .done();
    assert_eq!(flannel_pick(&s, Some("eth0")).picked, [ip("10.0.0.10")]);
    assert_eq!(
        flannel_pick(&s, Some("192.168.1.50")).picked,
        [ip("192.168.1.50")]
    );
    for (iface, error) in [
        (Some("eth9"), "error looking up interface eth9"),
        (
            Some("10.9.9.9"),
            "no interface with given IP 10.9.9.9 found",
        ),
    ] {
        let p = flannel_pick(&s, iface);
        assert!(p.picked.is_empty());
        assert!(p.reasoning.last().unwrap().ends_with(error), "{p:#?}");
    }
    let no_default = Node::new("n").addr("eth0", "10.0.0.10/24").done();
    let p = flannel_pick(&no_default, None);
    assert!(
        p.reasoning
            .last()
            .unwrap()
            .ends_with("unable to find default route"),
        "{p:#?}"
    );
}

#[test]
fn the_audit_lists_flannel_with_its_setting() {
    let s = layout("n", &[("eth0", "10.0.0.10/24")], "10.0.0.1", &["10.0.0.10"]);
    let r = audit(
        s.clone(),
        &ComponentSettings::default(),
        &GaiConf::default(),
    );
    assert_eq!(picked(&r, "flannel"), [ip("10.0.0.10")]);
    let settings = with(|c| c.flannel_iface = Some("eth0".into()));
    let r = audit(s, &settings, &GaiConf::default());
    assert_eq!(picks_of(&r, "flannel")[0].setting, "--iface=eth0");
}
