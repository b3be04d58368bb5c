//! kube-vip's VIP interface, live: kube-vip (ARP mode) without `vip_interface` finds the
//! default-gateway interface (`vip.GetDefaultGatewayInterface`: `netlink.RouteList(nil,
//! AF_INET)`, an `RTM_GETROUTE` dump, then `net.InterfaceByIndex`, an `RTM_GETLINK` dump),
//! lists the addresses before adding its own (`netlink.AddrList`: an `RTM_GETADDR` dump), and
//! adds the VIP as a /32 there (its `RTM_NEWADDR` request). At that request, with a route dump
//! of the same process seen, this replays kube-vip's rule
//! ([`crate::explain::node_audit::kube_vip`]) on the dumps it received: the interface the VIP
//! went onto against the default-route interface of its route dump (another interface means
//! its `vip_interface` names that one: the trace does not read kube-vip's configuration), and
//! whether another interface of its address dump holds the VIP's subnet (kube-vip#903). The
//! pick is a `node-ip-picked` diagnosis (info); a VIP off its subnet's interface is also a
//! `vip-off-subnet-interface` warning.
//!
//! Every address a process named `kube-vip` adds is taken as a VIP (the control plane's, or a
//! Service's in ARP mode). In BGP mode kube-vip puts the VIP on `lo`: that reads as a
//! `vip_interface` of `lo`.
use std::net::IpAddr;

use super::node_ip_picked;
use super::process_dumps::{DumpRule, DumpsByProcess, Heard, ProcessDumps, Said};
use crate::explain::address_ledger::address_request;
use crate::explain::node_audit::kube_vip::{default_gateway_interface, kube_vip};
use crate::explain::node_audit::REMEDY_KUBE_VIP_PICKED;
use crate::model::event::Event;

/// kube-vip's interface choice, at each address it adds, on the dumps before it.
pub(super) struct KubeVip;

impl DumpRule for KubeVip {
    const COMMS: &'static [&'static str] = &["kube-vip"];

    /// An address kube-vip adds, with a route dump of its own seen, is replayed.
    fn decide(dumps: &mut DumpsByProcess, heard: &Heard<'_>) -> Vec<Said> {
        let Heard { e, c, .. } = *heard;
        let Some((true, added)) = address_request(c) else {
            return Vec::new();
        };
        let Some(dumps) = dumps.get(e.pid).filter(|d| d.routes.is_some()) else {
            return Vec::new();
        };
        added
            .iter()
            .filter_map(|a| {
                let vip: IpAddr = a.address.parse().ok()?;
                Some(pick(e, dumps, vip, &dumps.interface_name(&a.ifname)))
            })
            .flatten()
            .collect()
    }
}

/// kube-vip's choice for `vip`, which `e` added to `dev`, on the dumps before it: the
/// `node-ip-picked` diagnosis, and `vip-off-subnet-interface` when another interface holds the
/// VIP's subnet.
fn pick(e: &Event, dumps: &ProcessDumps, vip: IpAddr, dev: &str) -> Vec<Said> {
    let snapshot = dumps.snapshot();
    let default = default_gateway_interface(&snapshot).ok();
    let vip_interface = (default != Some(dev)).then_some(dev);
    let mut findings = Vec::new();
    let mut replayed = kube_vip(&snapshot, vip, vip_interface, &mut findings);
    if dumps.addresses.is_none() {
        // kube_vip's last line says which interface holds the subnet: unknown without a dump.
        replayed.reasoning.truncate(1);
        replayed.reasoning.push(
            "kube-vip listed no addresses in this trace: which interface holds the VIP's subnet is not known".into(),
        );
    }
    let summary = match default {
        Some(default) if default == dev => format!(
            "{} puts its VIP {vip} on {dev}, the default-route interface of the routes it listed (vip_interface unset, or set to {dev}: the trace does not read kube-vip's configuration)",
            e.who()
        ),
        Some(default) => format!(
            "{} puts its VIP {vip} on {dev}, not on {default}, the default-route interface of the routes it listed: its vip_interface names {dev}",
            e.who()
        ),
        None => format!(
            "{} puts its VIP {vip} on {dev}; the routes it listed have no default route: its vip_interface names {dev}",
            e.who()
        ),
    };
    let mut evidence = dumps.evidence();
    evidence.push(format!("address added: {}", super::reference(e)));
    let subject = format!("kube-vip {} {vip}", e.pid);
    let mut said = vec![(
        subject.clone(),
        node_ip_picked(
            summary,
            [evidence.clone(), replayed.reasoning].concat(),
            REMEDY_KUBE_VIP_PICKED,
        ),
    )];
    said.extend(findings.into_iter().map(|mut d| {
        d.evidence = [evidence.clone(), d.evidence].concat();
        (subject.clone(), d)
    }));
    said
}
