//! Diagnoses of the known failure patterns (the seed incidents) over a live or recorded
//! timeline: a [`Diagnoser`] watches events in order and emits `diagnosis` events — at once when
//! one event proves the pattern, at the end when it takes the whole trace.
//!
//! - `gai-reordered` (seed 000): getaddrinfo's first address is not the first its resolver
//!   listed; names the RFC 6724 rule that moved it.
//! - `network-address-used` (seed 001): an address a process uses — added to an interface, a
//!   route's `src`, a tunnel's local end (`RTM_NEWLINK`, as calico's IPIP/VXLAN), an IPVS
//!   service, a route lookup's source — is the network or broadcast address of a local prefix,
//!   or (a route's `src`, a tunnel's local end) not assigned on this node. `bind()` is not
//!   watched.
//! - `secondary-address-skipped` (seeds 002/004): a process read the local table (whose `src` is
//!   the primary for a secondary address), then created IPVS services for local addresses, but
//!   none for a secondary one.
//! - `route-get-resolves-to-lo` (seed 003): an `RTM_GETROUTE` for an address assigned on this
//!   node was answered from the local table with `dev lo`.
//! - `node-ip-picked` (information): what kubelet takes as its node IP, its NodeAddress rule
//!   replayed on its own lookup and address dump ([`kubelet_pick`]); what calico-node detects
//!   as its IPv4 address, first-found replayed on its own link and address dumps
//!   ([`calico_pick`]); flannel's (flanneld's, k3s's) public IP, its default-route interface
//!   rule replayed on its own route and address dumps (`flannel_pick`); which interface
//!   kube-vip puts its VIP on, replayed at its address request on its route and address dumps
//!   (`kube_vip_pick`); kube-proxy's IPVS NodePort addresses, each of its local-table or
//!   address dumps replayed by that path (`kube_proxy_pick`). The dumps are kept per process
//!   by `process_dumps`.
//! - `vip-off-subnet-interface` (kube-vip#903): kube-vip added its VIP to another interface than
//!   the one whose prefix holds it (`kube_vip_pick`).
//! - `added-address-picked`: a lookup's first address (the pick) is one another process added
//!   to an interface earlier in the trace (`RTM_NEWADDR` by keepalived, kube-vip, ...): both
//!   named.
//!
//! Local addresses are learned from the address dumps and address changes in the same trace.
mod calico_pick;
mod flannel_pick;
mod kube_proxy_pick;
mod kube_vip_pick;
mod kubelet_pick;
mod process_dumps;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;

use compact_str::CompactString;

use self::process_dumps::LivePick;
use super::address_ledger::address_request;
use super::node_audit::{
    network_and_broadcast, REMEDY_ADDED_ADDRESS_PICKED, REMEDY_NETWORK_ADDRESS,
    REMEDY_SECONDARY_SKIPPED,
};
use crate::model::event::{
    ConversationOutcome, Diagnosis, DiagnosisId, Event, EventBody, NetlinkConversation, Severity,
};
use crate::model::facts::{AddressFact, ConversationFacts, RouteFact};
use crate::model::getaddrinfo::{GetaddrinfoCall, ResolverKind};
use crate::model::netlink::ipvs::IPVS_CMD_NEW_SERVICE;
use crate::model::netlink::{rt_table, rtm, rtn, MessageBody, NETLINK_ROUTE};

/// What one process did that a diagnosis at the end needs.
#[derive(Default)]
struct ProcessView {
    comm: CompactString,
    /// Its last IPVS service creation (where an end-of-trace diagnosis is placed).
    last_service: Option<Event>,
    /// The local-table routes it read (`type local`), with the first dump that showed each:
    /// a route seen again (the same destination, source and device) is not kept twice, so a
    /// process that dumps the table over and over does not grow this.
    local_routes: Vec<(String, RouteFact)>,
    /// Destination, source and device of each route in `local_routes`.
    local_route_keys: HashSet<LocalRouteKey>,
    /// IPVS service addresses it created, with the times.
    services: BTreeMap<IpAddr, String>,
}

/// What `secondary_skipped` reads of a local route: destination, source, device.
type LocalRouteKey = (CompactString, Option<CompactString>, Option<CompactString>);

/// Watches a timeline and emits diagnoses.
#[derive(Default)]
pub struct Diagnoser {
    /// Local addresses learned from the trace (address → its fact).
    addresses: BTreeMap<IpAddr, AddressFact>,
    processes: BTreeMap<u32, ProcessView>,
    /// Diagnoses already made (id + subject), so each is said once.
    said: BTreeSet<String>,
    /// Per looked-up name and resolver: the first address it returned, the whole order, and
    /// the call that showed it (the evidence of `resolvers-disagree`).
    first_by_resolver: BTreeMap<String, BTreeMap<ResolverKind, ResolverAnswer>>,
    /// Addresses a process added to an interface during the trace and did not remove since
    /// (the evidence of `added-address-picked`).
    added: BTreeMap<IpAddr, AddedAddress>,
    /// kubelet's lookups waiting for the dump that validates them.
    kubelet: kubelet_pick::KubeletPicks,
    /// calico-node's link and address dumps, until it has both.
    calico: LivePick<calico_pick::CalicoNode>,
    /// flannel's (and k3s's) route and address dumps, until it has both.
    flannel: LivePick<flannel_pick::Flannel>,
    /// kube-vip's dumps, read when it adds an address.
    kube_vip: LivePick<kube_vip_pick::KubeVip>,
    /// kube-proxy's dumps, each replayed as it comes.
    kube_proxy: LivePick<kube_proxy_pick::KubeProxy>,
}

/// An address a process added during the trace: who, where, and the request's reference.
#[derive(Clone, Debug)]
struct AddedAddress {
    pid: u32,
    who: String,
    /// `10.0.0.100/24 to eth0`.
    what: String,
    reference: String,
    ts_ns: u64,
}

/// Addresses remembered as added at most (`added-address-picked`): a node adds a handful.
const MAX_ADDED: usize = 4096;

/// One resolver's answer for a name: its first address, its whole order, and the call's
/// reference (the evidence of `resolvers-disagree`).
type ResolverAnswer = (String, Vec<String>, String);

/// Names whose per-resolver answers are remembered at most (`resolvers-disagree`).
const MAX_NAMES: usize = 4096;

/// The address of a `dst/len` or plain address text.
fn address_of(text: &str) -> Option<IpAddr> {
    text.split('/').next()?.parse().ok()
}

/// A `node-ip-picked` diagnosis (information): what a node-IP picker takes, and why.
fn node_ip_picked(summary: String, evidence: Vec<String>, remedy: &str) -> Diagnosis {
    Diagnosis {
        id: DiagnosisId::NodeIpPicked,
        severity: Severity::Info,
        summary,
        evidence,
        remedy: remedy.into(),
    }
}

/// Which event a piece of evidence is: kind, time and process.
fn reference(e: &Event) -> String {
    format!(
        "{} at {} (ts_ns {}) by {}",
        e.body.kind(),
        e.ts,
        e.ts_ns,
        e.who()
    )
}

/// The event a piece of evidence names, as [`reference`] wrote it (perhaps after a label:
/// `local table dump: conversation at …`): its kind and `ts_ns` (`None` for evidence that is a
/// fact, not an event).
pub fn evidence_event(evidence: &str) -> Option<(&str, u64)> {
    let (before, rest) = evidence.split_once(" at ")?;
    let kind = before.rsplit(' ').next()?;
    let ts = rest.split_once("(ts_ns ")?.1.split_once(')')?.0;
    Some((kind, ts.parse().ok()?))
}

impl Diagnoser {
    /// A diagnoser that knows nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks at one event (in timeline order); returns the diagnoses it proves on its own.
    pub fn observe(&mut self, e: &Event) -> Vec<Event> {
        let mut found = Vec::new();
        match &e.body {
            EventBody::Getaddrinfo(call) => {
                found.extend(self.gai_reordered(e, call));
                found.extend(self.resolvers_disagree(e, call));
                found.extend(self.added_address_picked(e, call));
                self.kubelet.lookup(e, call);
            }
            EventBody::Conversation(c) => {
                self.learn(&c.facts);
                found.extend(self.route_get_to_lo(e, c));
                found.extend(self.requested_addresses(e, c));
                let mut picks: Vec<(String, Diagnosis)> =
                    self.kubelet.conversation(e, c).into_iter().collect();
                picks.extend(self.calico.conversation(e, c));
                picks.extend(self.flannel.conversation(e, c));
                picks.extend(self.kube_vip.conversation(e, c));
                picks.extend(self.kube_proxy.conversation(e, c));
                for (subject, d) in picks {
                    found.extend(self.diagnosis(e, &subject, d));
                }
                if c.dump && is_route_get(c) {
                    let view = self.processes.entry(e.pid).or_default();
                    view.comm = e.comm.clone();
                    for r in &c.facts.routes {
                        if r.in_table(rt_table::LOCAL) && r.is_type(rtn::LOCAL) {
                            let key = (r.dst.clone(), r.src.clone(), r.dev.clone());
                            if view.local_route_keys.insert(key) {
                                view.local_routes.push((reference(e), r.clone()));
                            }
                        }
                    }
                }
            }
            EventBody::Ipvs(i) if i.command.cmd_id == IPVS_CMD_NEW_SERVICE => {
                let address = i
                    .command
                    .service
                    .as_ref()
                    .and_then(|s| s.address.as_deref());
                if let Some(addr) = address.and_then(address_of) {
                    let view = self.processes.entry(e.pid).or_default();
                    view.comm = e.comm.clone();
                    view.services.entry(addr).or_insert_with(|| reference(e));
                    view.last_service = Some(e.clone());
                    found.extend(self.network_address(e, addr, "an IPVS service address"));
                }
            }
            EventBody::RouteFileRead(r) => {
                if let Some((subject, d)) = self.kubelet.route_file_read(e, r) {
                    found.extend(self.diagnosis(e, &subject, d));
                }
            }
            EventBody::RouteLookup(r) => {
                if let Some(src) = address_of(&r.src).filter(|a| !a.is_unspecified()) {
                    found.extend(self.network_address(e, src, "the source of a route lookup"));
                }
            }
            _ => {}
        }
        found
    }

    /// Forgets the local-table routes read by `pids` (processes that have exited) where they
    /// created no IPVS service: such a process cannot create one any more, so no end-of-trace
    /// diagnosis needs them (a process's views otherwise stay until the end, and a node's
    /// `ip route show` runs are a new process each). The dumps the live picks keep of them go
    /// too.
    pub fn forget_processes(&mut self, pids: &[u32]) {
        self.calico.forget_processes(pids);
        self.flannel.forget_processes(pids);
        self.kube_vip.forget_processes(pids);
        self.kube_proxy.forget_processes(pids);
        for pid in pids {
            if self
                .processes
                .get(pid)
                .is_some_and(|view| view.services.is_empty())
            {
                self.processes.remove(pid);
            }
        }
    }

    /// The diagnoses that need the whole trace; call once at the end.
    pub fn finish(&mut self) -> Vec<Event> {
        let mut found = Vec::new();
        let processes = std::mem::take(&mut self.processes);
        for (pid, view) in &processes {
            found.extend(self.secondary_skipped(*pid, view));
        }
        found
    }

    fn learn(&mut self, facts: &ConversationFacts) {
        for a in &facts.addresses {
            if let Some(addr) = address_of(&a.address) {
                self.addresses.insert(addr, a.clone());
            }
        }
    }

    /// A diagnosis event about `subject`, unless one was already made.
    fn diagnosis(&mut self, about: &Event, subject: &str, d: Diagnosis) -> Option<Event> {
        if !self.said.insert(format!("{} {subject}", d.id)) {
            return None;
        }
        Some(Event {
            ts: about.ts.clone(),
            ts_ns: about.ts_ns,
            pid: about.pid,
            tid: about.tid,
            comm: about.comm.clone(),
            process: about.process.clone(),
            body: EventBody::Diagnosis(d),
        })
    }

    /// The same name's first address differs between the resolvers this node's processes use.
    fn resolvers_disagree(&mut self, e: &Event, call: &GetaddrinfoCall) -> Option<Event> {
        let node = call.node.clone()?;
        let first = call.addresses.first()?.clone();
        if self.first_by_resolver.len() >= MAX_NAMES && !self.first_by_resolver.contains_key(&node)
        {
            return None;
        }
        let seen = self.first_by_resolver.entry(node.clone()).or_default();
        seen.entry(call.resolver)
            .or_insert_with(|| (first.clone(), call.addresses.clone(), reference(e)));
        let (other, (other_first, other_order, other_ref)) = seen
            .iter()
            .find(|(kind, (f, _, _))| **kind != call.resolver && *f != first)?;
        let (other, other_first, other_order, other_ref) = (
            *other,
            other_first.clone(),
            other_order.clone(),
            other_ref.clone(),
        );
        let split = call
            .why
            .as_ref()
            .and_then(|w| w.pairs.first())
            .map(|p| {
                format!(
                    " ({} decided by rule {}: {})",
                    call.resolver.sort_name(),
                    p.rule,
                    p.rule_name
                )
            })
            .unwrap_or_default();
        self.diagnosis(
            e,
            &node,
            Diagnosis {
                id: DiagnosisId::ResolversDisagree,
                severity: Severity::Warning,
                summary: format!(
                    "{node:?} resolves to {first} first through {} ({}) but to {other_first} first through {}{split}",
                    call.resolver.name(),
                    e.who(),
                    other.name(),
                ),
                evidence: vec![
                    reference(e),
                    format!("{}: [{}]", call.resolver.name(), call.addresses.join(", ")),
                    other_ref,
                    format!("{}: [{}]", other.name(), other_order.join(", ")),
                ],
                remedy: "processes that look this name up pick different addresses depending on their resolver (glibc, musl, Go's own): set the address explicitly (kubelet --node-ip, calico IP_AUTODETECTION_METHOD, …) or list only one address for the name".into(),
            },
        )
    }

    fn gai_reordered(&mut self, e: &Event, call: &GetaddrinfoCall) -> Option<Event> {
        let why = call.why.as_ref()?;
        let listed = why.resolver_order.first()?;
        let got = call.addresses.first()?;
        if got == listed {
            return None;
        }
        let moved_over = call.addresses.iter().position(|a| a == listed)?;
        let rules: Vec<String> = why.pairs[..moved_over.min(why.pairs.len())]
            .iter()
            .map(|p| format!("rule {}: {}", p.rule, p.rule_name))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let node = call.node.clone().unwrap_or_default();
        let mut evidence = vec![
            reference(e),
            format!("resolver order: [{}]", why.resolver_order.join(", ")),
            format!("returned order: [{}]", call.addresses.join(", ")),
        ];
        evidence.extend(why.pairs.iter().map(|p| {
            format!(
                "{} before {}: rule {}: {}",
                p.first, p.second, p.rule, p.detail
            )
        }));
        self.diagnosis(
            e,
            &format!("{} {node}", e.pid),
            Diagnosis {
                id: DiagnosisId::GaiReordered,
                severity: Severity::Warning,
                summary: format!(
                    "{} looked up {node:?} and got {got} first, but its resolver listed {listed} first: {} moved it ({}){}",
                    e.who(),
                    call.resolver.sort_name(),
                    rules.join(", "),
                    if call.caller.is_some() {
                        format!(" — a Go program's lookup, through cgo ({})", call.resolver_path())
                    } else {
                        String::new()
                    }
                ),
                evidence,
                remedy: format!(
                    "if this is kubelet choosing its InternalIP, set --node-ip; otherwise {}",
                    call.resolver.reorder_remedy()
                ),
            },
        )
    }

    /// A lookup's first address is one another process added during the trace.
    fn added_address_picked(&mut self, e: &Event, call: &GetaddrinfoCall) -> Option<Event> {
        let node = call.node.clone().unwrap_or_default();
        let picked = call.addresses.first()?;
        let added = self.added.get(&address_of(picked)?)?;
        if added.pid == e.pid {
            return None;
        }
        let added = added.clone();
        let earlier = e.ts_ns.saturating_sub(added.ts_ns) as f64 / 1e9;
        self.diagnosis(
            e,
            &format!("{} {node} {picked}", e.pid),
            Diagnosis {
                id: DiagnosisId::AddedAddressPicked,
                severity: Severity::Warning,
                summary: format!(
                    "{} looked up {node:?} and got {picked} first: {} added {} {earlier:.3} s earlier in this trace",
                    e.who(),
                    added.who,
                    added.what
                ),
                evidence: vec![
                    reference(e),
                    format!("returned order: [{}]", call.addresses.join(", ")),
                    format!("address added: {}", added.reference),
                ],
                remedy: REMEDY_ADDED_ADDRESS_PICKED.into(),
            },
        )
    }

    fn route_get_to_lo(&mut self, e: &Event, c: &NetlinkConversation) -> Option<Event> {
        if c.dump || !is_route_get(c) {
            return None;
        }
        let r = c.facts.routes.first()?;
        // Without policy rules the kernel merges the local table into main, so the answer may
        // say either table; type local with dev lo (index 1 in every namespace) is the point.
        if !r.is_type(rtn::LOCAL) || !matches!(r.dev.as_deref(), Some("lo" | "1")) {
            return None;
        }
        let dst = address_of(&r.dst).filter(|d| !d.is_loopback())?;
        let holder = self
            .addresses
            .get(&dst)
            .map(|a| format!("on {}", a.ifname))
            .unwrap_or_else(|| "in the local table".into());
        self.diagnosis(
            e,
            &format!("{} {dst}", e.pid),
            Diagnosis {
                id: DiagnosisId::RouteGetResolvesToLo,
                severity: Severity::Warning,
                summary: format!(
                    "{} asked the kernel for the route to {dst} and got type local, dev lo: {dst} is assigned on this node ({holder}), so an interface chosen by \"which interface reaches {dst}\" is lo",
                    e.who()
                ),
                evidence: vec![
                    reference(e),
                    format!(
                        "answer: {} {} dev lo table {}{}",
                        r.route_type,
                        r.dst,
                        r.table,
                        r.src.as_deref().map(|s| format!(" src {s}")).unwrap_or_default()
                    ),
                ],
                remedy: "use a reachability target that is never assigned on a node (e.g. the \
                         gateway) — for OpenELB `interface: can_reach:IP`, not an LB or node IP"
                    .into(),
            },
        )
    }

    /// Addresses a request asks the kernel to use: an address being added, a route's `src`.
    fn requested_addresses(&mut self, e: &Event, c: &NetlinkConversation) -> Vec<Event> {
        // Only the requests matched below need their facts: building them for every
        // conversation (each `ip route get`) was 0.8% of the live consumer's CPU per event.
        let facts = || {
            let mut facts = ConversationFacts::default();
            facts.add(&c.request);
            facts
        };
        let mut found = Vec::new();
        let done = c.outcome != ConversationOutcome::Error;
        match address_request(c) {
            Some((false, addresses)) if done => {
                for a in &addresses {
                    if let Some(addr) = address_of(&a.address) {
                        self.added.remove(&addr);
                    }
                }
            }
            Some((true, addresses)) => {
                for a in &addresses {
                    let Some(addr) = address_of(&a.address) else {
                        continue;
                    };
                    if done && (self.added.len() < MAX_ADDED || self.added.contains_key(&addr)) {
                        self.added.insert(
                            addr,
                            AddedAddress {
                                pid: e.pid,
                                who: e.who(),
                                what: format!("{}/{} to {}", a.address, a.prefix_len, a.ifname),
                                reference: reference(e),
                                ts_ns: e.ts_ns,
                            },
                        );
                    }
                    // Its own prefix counts: `ip addr add 172.29.231.0/24` is seed 001.
                    self.addresses.entry(addr).or_insert_with(|| a.clone());
                    found.extend(self.network_address(e, addr, "an address added to an interface"));
                }
            }
            _ => {}
        }
        match (&c.request.body, c.request.header.type_id) {
            (MessageBody::Route(_), rtm::NEWROUTE) => {
                for r in &facts().routes {
                    if let Some(src) = r.src.as_deref().and_then(address_of) {
                        found.extend(self.network_address(e, src, "a route's src"));
                        found.extend(self.unassigned(e, src, "a route's src"));
                    }
                }
            }
            // calico's IPIP/VXLAN tunnel takes the node address as its local end.
            (MessageBody::Link(l), rtm::NEWLINK) => {
                if let Some(local) = l.tunnel_local.as_deref().and_then(address_of) {
                    let use_ = "a tunnel's local address";
                    found.extend(self.network_address(e, local, use_));
                    found.extend(self.unassigned(e, local, use_));
                }
            }
            _ => {}
        }
        found
    }

    /// An address that must be local (a route's src, a tunnel's local end) but is not among the
    /// addresses learned so far (said only when some were learned).
    fn unassigned(&mut self, e: &Event, addr: IpAddr, use_: &str) -> Option<Event> {
        if self.addresses.is_empty() || self.addresses.contains_key(&addr) || addr.is_unspecified()
        {
            return None;
        }
        let known: Vec<String> = self.addresses.keys().map(|a| a.to_string()).collect();
        self.diagnosis(
            e,
            &format!("{} {addr} unassigned", e.pid),
            Diagnosis {
                id: DiagnosisId::NetworkAddressUsed,
                severity: Severity::Error,
                summary: format!(
                    "{} used {addr} as {use_}, but {addr} is not assigned on this node",
                    e.who()
                ),
                evidence: vec![
                    reference(e),
                    format!("addresses seen on this node: {}", known.join(", ")),
                ],
                remedy: REMEDY_NETWORK_ADDRESS.into(),
            },
        )
    }

    /// The seed 001 check of one used address against the local prefixes learned so far.
    fn network_address(&mut self, e: &Event, addr: IpAddr, use_: &str) -> Option<Event> {
        let (which, owner) = self.addresses.iter().find_map(|(a, f)| {
            let (net, bcast) = network_and_broadcast(*a, f.prefix_len)?;
            let which = if addr == net {
                "network"
            } else if addr == bcast {
                "broadcast"
            } else {
                return None;
            };
            Some((which, format!("{a}/{} on {}", f.prefix_len, f.ifname)))
        })?;
        self.diagnosis(
            e,
            &format!("{} {addr}", e.pid),
            Diagnosis {
                id: DiagnosisId::NetworkAddressUsed,
                severity: Severity::Error,
                summary: format!(
                    "{} used {addr} as {use_}: it is the {which} address of {owner}",
                    e.who()
                ),
                evidence: vec![reference(e), format!("{owner} is configured on this node")],
                remedy: REMEDY_NETWORK_ADDRESS.into(),
            },
        )
    }

    fn secondary_skipped(&mut self, pid: u32, view: &ProcessView) -> Vec<Event> {
        let mut found = Vec::new();
        if view.services.is_empty() {
            return found;
        }
        for (dump, r) in &view.local_routes {
            let (Some(addr), Some(src)) =
                (address_of(&r.dst), r.src.as_deref().and_then(address_of))
            else {
                continue;
            };
            if addr == src || addr.is_loopback() || view.services.contains_key(&addr) {
                continue;
            }
            // The pattern: the primary got services, its secondary none.
            let Some(service) = view.services.get(&src) else {
                continue;
            };
            let dev = r.dev.clone().unwrap_or_default();
            let Some(about) = view.last_service.as_ref() else {
                continue;
            };
            found.extend(self.diagnosis(
                about,
                &format!("{pid} {addr}"),
                Diagnosis {
                    id: DiagnosisId::SecondaryAddressSkipped,
                    severity: Severity::Warning,
                    summary: format!(
                        "{} created IPVS services for local address {src} but none for {addr}: it read local addresses from the local table, where {addr}'s route has src {src} (a secondary address on {dev})",
                        about.who()
                    ),
                    evidence: vec![
                        format!("local table dump: {dump}"),
                        format!("local {} dev {dev} table local src {src}", r.dst),
                        format!("IPVS service for {src}: {service}"),
                        format!(
                            "IPVS services created: {}",
                            view.services.keys().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
                        ),
                    ],
                    remedy: REMEDY_SECONDARY_SKIPPED.into(),
                },
            ));
        }
        found
    }
}

/// Whether the conversation's request is an rtnetlink `RTM_GETROUTE` (by protocol and type
/// number, not by the name shown).
fn is_route_get(c: &NetlinkConversation) -> bool {
    c.protocol_id == NETLINK_ROUTE && c.request.header.type_id == rtm::GETROUTE
}

#[cfg(test)]
mod tests;
