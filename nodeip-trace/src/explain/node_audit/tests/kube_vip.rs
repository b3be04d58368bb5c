//! kube-vip's VIP interface (ARP mode) on small layouts.
use super::*;

fn vip_settings(vip: &str, interface: Option<&str>) -> ComponentSettings {
    with(|c| {
        c.kube_vip_address = Some(ip(vip));
        c.kube_vip_interface = interface.map(str::to_string);
    })
}

#[test]
fn the_vip_goes_on_the_default_route_s_interface_even_off_its_subnet() {
    // kube-vip#903: the default route leaves by eth0, the VIP's subnet is on eth1.
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .addr("eth1", "192.168.1.50/24")
        .default_via("10.0.0.1", "eth0")
        .done();
    let r = audit(
        s.clone(),
        &vip_settings("192.168.1.240", None),
        &GaiConf::default(),
    );
    let p = picks_of(&r, "kube-vip")[0];
    assert_eq!(p.picked, [ip("192.168.1.240")]);
    assert!(
        p.reasoning[0].starts_with("adds 192.168.1.240/32 to eth0"),
        "{p:#?}"
    );
    assert!(
        ids(&r).contains(&"vip-off-subnet-interface"),
        "{:?}",
        r.findings
    );
    let f = r
        .findings
        .iter()
        .find(|f| f.id == DiagnosisId::VipOffSubnetInterface)
        .unwrap();
    assert!(
        f.summary.contains("eth1 holds 192.168.1.50/24"),
        "{}",
        f.summary
    );
    assert_eq!(f.remedy, "set kube-vip's vip_interface to eth1");
    // vip_interface set to the subnet's interface, or a VIP in the default interface's
    // subnet: nothing to say.
    for settings in [
        vip_settings("192.168.1.240", Some("eth1")),
        vip_settings("10.0.0.240", None),
    ] {
        let r = audit(s.clone(), &settings, &GaiConf::default());
        assert!(
            !ids(&r).contains(&"vip-off-subnet-interface"),
            "{:?}",
            r.findings
        );
    }
}

#[test]
fn without_a_default_route_kube_vip_does_not_start() {
    let s = Node::new("n").addr("eth0", "10.0.0.10/24").done();
    let r = audit(s, &vip_settings("10.0.0.240", None), &GaiConf::default());
    let p = picks_of(&r, "kube-vip")[0];
    assert!(p.picked.is_empty());
    assert_eq!(
        p.reasoning[0],
        "GetDefaultGatewayInterface: Unable to find default route: kube-vip does not start"
    );
    // A default route without a device first in the list (a blackhole here; a multipath one
    // alike) is an error, though another default route names eth0.
    let s = Node::new("n")
        .addr("eth0", "10.0.0.10/24")
        .route_without_dev("blackhole", "default")
        .default_via("10.0.0.1", "eth0")
        .done();
    let r = audit(s, &vip_settings("10.0.0.240", None), &GaiConf::default());
    let p = picks_of(&r, "kube-vip")[0];
    assert!(p.picked.is_empty(), "{p:#?}");
    assert_eq!(
        p.reasoning[0],
        "GetDefaultGatewayInterface: Found default route but could not determine interface: kube-vip does not start"
    );
}
