//! kubelet's node IP, live: a process named `kubelet` looks its node name up (`net.LookupIP`,
//! through whichever resolver it takes) and then validates the answers against the addresses
//! its own `net.InterfaceAddrs()` dump listed (`validateNodeIP`): NodeAddress takes the first
//! valid IPv4 address of the answer, else the first valid one (no `--node-ip`; with one, the
//! lookup is not made). This replays that rule on what kubelet received in the trace and says
//! the pick as a `node-ip-picked` diagnosis (info): the answer, the dump, each address's
//! verdict. No valid address means kubelet falls back to the default-route interface
//! (`ChooseHostInterface`): it reads `/proc/net/route`, then `/proc/net/ipv6_route`, and takes
//! the first global address of a default route's interface. Where the kernel lets the tracer see
//! those reads (`route_file_read` events), that fallback is replayed too, on the routes the
//! kernel listed to kubelet and the addresses of its dump: decided at the IPv4 read when an IPv4
//! default route gives an address, else at the IPv6 read (with no IPv6 default route the kernel
//! lists none, no event comes, and the fallback stays unsaid). A lookup with no dump after it
//! (the trace ended first) is not said: its line is in the timeline.
use std::collections::BTreeMap;
use std::net::IpAddr;

use super::{address_of, node_ip_picked, reference};
use crate::explain::go_net;
use crate::explain::node_audit::kubelet::{choose_host_interface, refused_kind};
use crate::explain::node_audit::{NodeSnapshot, REMEDY_NODE_IP_PICKED};
use crate::model::event::{Diagnosis, Event, ListedRoute, NetlinkConversation, RouteFileRead};
use crate::model::facts::RouteFact;
use crate::model::getaddrinfo::GetaddrinfoCall;
use crate::model::ip_text::ip_list as list;
use crate::model::netlink::{rt_table, rtm, rtn};

/// The comm kubelet runs as.
const KUBELET: &str = "kubelet";

/// Lookups waiting for their dump at most (kubelet makes one at start and one per status sync).
const MAX_PENDING: usize = 256;

/// A kubelet lookup waiting for the address dump that validates it.
struct PendingLookup {
    lookup: Event,
    node: String,
    answer: Vec<IpAddr>,
    resolver: String,
}

/// A kubelet whose lookup gave no valid address, waiting for its route file reads.
struct PendingFallback {
    lookup: Event,
    /// The address dump's reference.
    dump: String,
    /// What `ChooseHostInterface` walks: the dump's addresses and the routes listed so far.
    snapshot: NodeSnapshot,
    /// The reads that listed those routes.
    reads: Vec<String>,
}

/// Replays kubelet's NodeAddress rule on each kubelet lookup and the dump after it.
#[derive(Default)]
pub(super) struct KubeletPicks {
    pending: BTreeMap<u32, PendingLookup>,
    fallbacks: BTreeMap<u32, PendingFallback>,
}

/// A route file's line as a route fact: `/proc/net/route` lists the main table only; a route
/// without a device there (`*`) is a blackhole, unreachable or prohibit route.
fn route_fact(r: &ListedRoute, v6: bool) -> RouteFact {
    let no_device = r.dev == "*";
    RouteFact {
        table: rt_table::name(rt_table::MAIN),
        route_type: rtn::name(if no_device && !v6 {
            rtn::BLACKHOLE
        } else {
            rtn::UNICAST
        }),
        dst: r.destination.as_str().into(),
        dev: (!no_device).then(|| r.dev.as_str().into()),
        src: None,
        gateway: r.gateway.as_deref().map(Into::into),
    }
}

/// Why `validateNodeIP` refuses `ip` (its own words for the kinds it refuses anywhere), or
/// `None` when it passes (on an interface of `local`).
fn refusal(ip: IpAddr, local: &[IpAddr]) -> Option<String> {
    match refused_kind(ip) {
        Some(kind) => Some(kind.to_string()),
        None if !local.iter().any(|a| go_net::equal(*a, ip)) => {
            Some("on no interface in kubelet's address dump".into())
        }
        None => None,
    }
}

impl KubeletPicks {
    /// A lookup by kubelet: remembered until its address dump.
    pub(super) fn lookup(&mut self, e: &Event, call: &GetaddrinfoCall) {
        if e.comm != KUBELET {
            return;
        }
        let Some(node) = call.node.clone() else {
            return;
        };
        if self.pending.len() >= MAX_PENDING && !self.pending.contains_key(&e.pid) {
            return;
        }
        let answer = call
            .addresses
            .iter()
            .filter_map(|a| address_of(a))
            .collect();
        self.pending.insert(
            e.pid,
            PendingLookup {
                lookup: e.clone(),
                node,
                answer,
                resolver: call.resolver_path(),
            },
        );
    }

    /// A conversation: kubelet's address dump after a lookup decides the pick.
    pub(super) fn conversation(
        &mut self,
        e: &Event,
        c: &NetlinkConversation,
    ) -> Option<(String, Diagnosis)> {
        if !c.dump || c.request.header.type_id != rtm::GETADDR {
            return None;
        }
        let pending = self.pending.remove(&e.pid)?;
        let local: Vec<IpAddr> = c
            .facts
            .addresses
            .iter()
            .filter_map(|a| address_of(&a.address))
            .collect();
        let (subject, d, picked) = pick(&pending, &local, &reference(e));
        if picked.is_none() && self.fallbacks.len() < MAX_PENDING {
            self.fallbacks.insert(
                e.pid,
                PendingFallback {
                    lookup: pending.lookup,
                    dump: reference(e),
                    snapshot: NodeSnapshot {
                        hostname: String::new(),
                        links: Vec::new(),
                        addresses: c.facts.addresses.clone(),
                        routes: Vec::new(),
                        hosts: Vec::new(),
                    },
                    reads: Vec::new(),
                },
            );
        }
        Some((subject, d))
    }

    /// A route file read: a kubelet falling back to the default-route interface is decided by
    /// what the kernel listed to it.
    pub(super) fn route_file_read(
        &mut self,
        e: &Event,
        r: &RouteFileRead,
    ) -> Option<(String, Diagnosis)> {
        if e.comm != KUBELET {
            return None;
        }
        let v6 = r.file.ends_with("ipv6_route");
        let f = self.fallbacks.get_mut(&e.pid)?;
        f.snapshot
            .routes
            .extend(r.routes.iter().map(|route| route_fact(route, v6)));
        f.reads.push(reference(e));
        let mut why = Vec::new();
        let chosen = choose_host_interface(&f.snapshot, false, &mut why);
        // Before the IPv6 file is read, only an IPv4 address decides.
        if !v6 && chosen.as_ref().map_or(true, |ip| !go_net::is_ipv4(*ip)) {
            return None;
        }
        let f = self.fallbacks.remove(&e.pid)?;
        let summary = match &chosen {
            Ok(ip) => format!(
                "{} takes {ip} as its node IP (InternalIP) by the default-route fallback: its lookup gave no valid address, and {ip} is the first global address of a default route's interface the kernel listed to it",
                f.lookup.who()
            ),
            Err(err) => format!(
                "{} finds no node IP by the default-route fallback either: {err}",
                f.lookup.who()
            ),
        };
        let mut evidence = vec![
            format!("lookup: {}", reference(&f.lookup)),
            format!("address dump: {}", f.dump),
        ];
        evidence.extend(
            f.reads
                .iter()
                .map(|read| format!("route file read: {read}")),
        );
        evidence.extend(why);
        let subject = format!(
            "{} fallback {}",
            e.pid,
            chosen.map(|ip| ip.to_string()).unwrap_or_default()
        );
        Some((
            subject,
            node_ip_picked(summary, evidence, REMEDY_NODE_IP_PICKED),
        ))
    }
}

/// kubelet's pick from `pending`'s answer with `local` the addresses of its dump (`dump` names
/// that conversation): the subject (for saying it once), the diagnosis, and the address picked
/// (`None`: it falls back to the default-route interface).
fn pick(
    pending: &PendingLookup,
    local: &[IpAddr],
    dump: &str,
) -> (String, Diagnosis, Option<IpAddr>) {
    let verdicts: Vec<(IpAddr, Option<String>)> = pending
        .answer
        .iter()
        .map(|ip| (*ip, refusal(*ip, local)))
        .collect();
    let valid = |v4: bool| {
        verdicts
            .iter()
            .find(|(ip, why)| why.is_none() && go_net::is_ipv4(*ip) == v4)
            .map(|(ip, _)| *ip)
    };
    let picked = valid(true).or_else(|| valid(false));
    let e = &pending.lookup;
    let answer = format!(
        "its lookup of {:?} ({}) returned [{}]",
        pending.node,
        pending.resolver,
        list(&pending.answer)
    );
    let summary = match picked {
        Some(ip) => format!(
            "{} takes {ip} as its node IP (InternalIP): {answer}, and {ip} is the first {} on an interface here",
            e.who(),
            if go_net::is_ipv4(ip) {
                "IPv4 address"
            } else {
                "address (no IPv4 one is valid)"
            }
        ),
        None => format!(
            "{} finds no valid node IP in its lookup: {answer}, none passes validateNodeIP; it falls back to the default-route interface's first global address (ChooseHostInterface, which reads /proc/net/route: said when the trace sees that read)",
            e.who()
        ),
    };
    let mut evidence = vec![
        format!("lookup: {}", reference(e)),
        format!("address dump: {dump}"),
    ];
    evidence.extend(verdicts.iter().map(|(ip, why)| match why {
        None => format!("{ip}: valid (validateNodeIP)"),
        Some(why) => format!("{ip}: refused by validateNodeIP ({why})"),
    }));
    let subject = format!(
        "{} {} {}",
        e.pid,
        pending.node,
        picked.map(|ip| ip.to_string()).unwrap_or_default()
    );
    (
        subject,
        node_ip_picked(summary, evidence, REMEDY_NODE_IP_PICKED),
        picked,
    )
}
