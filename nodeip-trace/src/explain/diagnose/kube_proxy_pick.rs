//! kube-proxy's NodePort addresses, live: kube-proxy's IPVS proxier creates NodePort services
//! for each local address it finds, one of two ways by release. The old local-table path reads
//! `ip route show table local type local proto kernel` (`netlink.RouteListFiltered`: an
//! `RTM_GETROUTE` dump) and takes each route's `src` — the primary, for a secondary address
//! (k8s#75443, seeds 002/004); the newer path lists every interface's addresses
//! (`net.InterfaceAddrs()`: an `RTM_GETADDR` dump). Each such dump by a process named
//! `kube-proxy` is replayed with that path's rule (the IPv4 addresses, kube-ipvs0's left out;
//! [`crate::explain::node_audit::kube_proxy`]) and said as a `node-ip-picked` diagnosis (info):
//! a route dump that holds local-table routes by the local-table path (the addresses being
//! the routes' own destinations on their devices: it reads no address dump), an address dump
//! by the address-dump path. The trace does not read `nodePortAddresses` (replayed as unset:
//! every address) nor the proxy mode: the pick is what the IPVS proxier takes, and a kube-proxy
//! in iptables or nftables mode that lists its addresses is said the same way. A kube-proxy
//! syncs over and over: each pick is said once per process, path and addresses.
use std::net::IpAddr;

use super::node_ip_picked;
use super::process_dumps::{DumpKind, DumpRule, DumpsByProcess, Heard, ProcessDumps, Said};
use crate::explain::node_audit::{
    kube_proxy, ComponentSettings, NodeSnapshot, REMEDY_KUBE_PROXY_PICKED,
};
use crate::model::event::Event;
use crate::model::facts::{AddressFact, RouteFact};
use crate::model::ip_text::ip_list;
use crate::model::netlink::{rt_table, rtn};

/// kube-proxy's NodePort address rule on each of its address and local-table dumps.
pub(super) struct KubeProxy;

/// The local-table path's view of the addresses: each `local` route of the local table, its
/// destination on its device, secondary when its `src` is another address (the prefix length
/// is not in a local route: /32 here, which the rule does not read).
fn local_table_addresses(routes: &[RouteFact]) -> Vec<AddressFact> {
    routes
        .iter()
        .filter(|r| r.in_table(rt_table::LOCAL) && r.is_type(rtn::LOCAL))
        .filter_map(|r| {
            let address = r.dst.split('/').next()?;
            address.parse::<IpAddr>().ok()?;
            Some(AddressFact {
                ifname: r.dev.clone().unwrap_or_default(),
                address: address.into(),
                prefix_len: 32,
                secondary: r.src.as_deref().is_some_and(|s| s != address),
                label: None,
                flags: Vec::new(),
            })
        })
        .collect()
}

impl DumpRule for KubeProxy {
    const COMMS: &'static [&'static str] = &["kube-proxy"];

    /// An address dump is replayed by the address-dump path, a route dump with local-table
    /// routes by the local-table path.
    fn decide(dumps: &mut DumpsByProcess, heard: &Heard<'_>) -> Vec<Said> {
        let kind = heard.kept;
        let dumps = dumps.get(heard.e.pid);
        kind.zip(dumps)
            .and_then(|(kind, dumps)| pick(heard.e, dumps, kind))
            .into_iter()
            .collect()
    }
}

/// kube-proxy's pick by the path that its dump of `kind` in `dumps` is (a link dump is none).
fn pick(e: &Event, dumps: &ProcessDumps, kind: DumpKind) -> Option<Said> {
    let local_table = match kind {
        DumpKind::Links => return None,
        DumpKind::Routes => true,
        DumpKind::Addresses => false,
    };
    let seen = dumps.snapshot();
    let snapshot = if local_table {
        let addresses = local_table_addresses(&seen.routes);
        if addresses.is_empty() {
            return None;
        }
        NodeSnapshot {
            addresses,
            routes: seen.routes,
            ..NodeSnapshot::default()
        }
    } else {
        NodeSnapshot {
            addresses: seen.addresses,
            ..NodeSnapshot::default()
        }
    };
    let mut skipped = Vec::new();
    let picks = kube_proxy(&snapshot, &ComponentSettings::default(), &mut skipped);
    // kube_proxy's first pick is the local-table path's, the second the address dump's.
    let replayed = &picks[usize::from(!local_table)];
    let (rule, read, subject_path) = if local_table {
        (
            "the local-table path (each local route's src; the IPVS proxier before it read addresses)",
            "the local table it listed",
            "local-table",
        )
    } else {
        (
            "the address-dump path (every interface's IPv4 addresses)",
            "the addresses it listed",
            "address-dump",
        )
    };
    let summary = format!(
        "{} takes [{}] as its IPVS NodePort addresses by {rule}, from {read}; nodePortAddresses is not read from the trace (replayed as unset)",
        e.who(),
        ip_list(&replayed.picked)
    );
    let mut evidence: Vec<String> = dumps.evidence_of(kind).into_iter().collect();
    evidence.extend(replayed.reasoning.iter().cloned());
    if local_table {
        // Seeds 002/004, k8s#75443: an address whose local route's src is another.
        evidence.extend(
            skipped
                .into_iter()
                .flat_map(|d| [d.summary].into_iter().chain(d.evidence)),
        );
    }
    let subject = format!(
        "kube-proxy {} {subject_path} {}",
        e.pid,
        ip_list(&replayed.picked)
    );
    Some((
        subject,
        node_ip_picked(summary, evidence, REMEDY_KUBE_PROXY_PICKED),
    ))
}
