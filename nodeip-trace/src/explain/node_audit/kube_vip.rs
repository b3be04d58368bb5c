//! kube-vip's interface for its VIP (ARP mode), read from kube-vip's source: `vip_interface`
//! when set; otherwise the default-gateway interface (`vip.GetDefaultGatewayInterface`: the
//! first default route of the main table that names an interface, IPv4 first, then IPv6). The
//! VIP goes onto that interface as a /32 (`vip_subnet`'s default), whatever interface holds
//! the VIP's subnet — the Services' `auto` interface (`autoFindInterface`: the first link with
//! an address whose prefix holds the VIP) is per Service, not the control plane's. When the two
//! differ, gratuitous ARP for the VIP leaves the wrong interface (kube-vip#903).
use std::net::IpAddr;

use super::{in_prefix, main_defaults, pick, ComponentPick, NodeSnapshot};
use crate::model::event::{Diagnosis, DiagnosisId, Severity};

/// The component's name in the audit.
const KUBE_VIP: &str = "kube-vip";

/// The default-gateway interface as kube-vip finds it: the first main-table default route,
/// IPv4 before IPv6 (releases before IPv6 routes were added list IPv4 ones only, where a node
/// with only an IPv6 default route has none), which must name an interface: a default route
/// without one (multipath, blackhole) first in the list is an error, not passed over.
pub(crate) fn default_gateway_interface(s: &NodeSnapshot) -> Result<&str, &'static str> {
    let first = [false, true]
        .into_iter()
        .find_map(|v6| main_defaults(s, v6).next())
        .ok_or("Unable to find default route")?;
    first
        .dev
        .as_deref()
        .ok_or("Found default route but could not determine interface")
}

/// The first interface with an address whose prefix holds `vip` (`autoFindInterface`), and that
/// prefix.
fn subnet_interface(s: &NodeSnapshot, vip: IpAddr) -> Option<(&str, String)> {
    s.address_rows().find_map(|(a, f)| {
        (a.is_ipv4() == vip.is_ipv4() && in_prefix(vip, a, f.prefix_len) && a != vip)
            .then(|| (f.ifname.as_str(), format!("{a}/{}", f.prefix_len)))
    })
}

/// kube-vip's interface for `vip` with `interface` its `vip_interface` (`None`: unset).
pub(crate) fn kube_vip(
    s: &NodeSnapshot,
    vip: IpAddr,
    interface: Option<&str>,
    findings: &mut Vec<Diagnosis>,
) -> ComponentPick {
    let host = if vip.is_ipv4() { 32 } else { 128 };
    let (setting, chosen) = match interface {
        Some(i) => (format!("vip_interface={i}"), Ok(i)),
        None => (
            "vip_interface unset (the default-route interface)".to_string(),
            default_gateway_interface(s),
        ),
    };
    let dev = match chosen {
        Ok(dev) => dev,
        Err(why) => {
            return pick(
                KUBE_VIP,
                &setting,
                vec![],
                vec![format!(
                    "GetDefaultGatewayInterface: {why}: kube-vip does not start"
                )],
            )
        }
    };
    let mut why = vec![format!(
        "adds {vip}/{host} to {dev}, and answers ARP for it there"
    )];
    match subnet_interface(s, vip) {
        Some((holder, prefix)) if holder != dev => {
            why.push(format!(
                "{holder} holds its subnet ({prefix}): the VIP is announced on another interface than its subnet's"
            ));
            findings.push(Diagnosis {
                id: DiagnosisId::VipOffSubnetInterface,
                severity: Severity::Warning,
                summary: format!(
                    "kube-vip puts its VIP {vip} on {dev} ({}), but {holder} holds {prefix}: ARP for the VIP leaves {dev} (kube-vip#903)",
                    if interface.is_some() {
                        "its vip_interface"
                    } else {
                        "the default route's interface"
                    }
                ),
                evidence: why.clone(),
                remedy: format!("set kube-vip's vip_interface to {holder}"),
            });
        }
        Some((_, prefix)) => why.push(format!("{dev} holds its subnet ({prefix})")),
        None => why.push("no interface holds its subnet".into()),
    }
    pick(KUBE_VIP, &setting, vec![vip], why)
}
