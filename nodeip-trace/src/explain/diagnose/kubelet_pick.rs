//! kubelet's node IP, live: a process named `kubelet` looks its node name up (`net.LookupIP`,
//! through whichever resolver it takes) and then validates the answers against the addresses
//! its own `net.InterfaceAddrs()` dump listed (`validateNodeIP`): NodeAddress takes the first
//! valid IPv4 address of the answer, else the first valid one (no `--node-ip`; with one, the
//! lookup is not made). This replays that rule on what kubelet received in the trace and says
//! the pick as a `node-ip-picked` diagnosis (info): the answer, the dump, each address's
//! verdict. No valid address means kubelet falls back to the default-route interface
//! (`ChooseHostInterface`, which reads `/proc/net/route`: not seen by these events). A lookup
//! with no dump after it (the trace ended first) is not said: its line is in the timeline.
use std::collections::BTreeMap;
use std::net::IpAddr;

use super::{address_of, node_ip_picked, reference};
use crate::explain::go_net;
use crate::explain::node_audit::kubelet::refused_kind;
use crate::explain::node_audit::REMEDY_NODE_IP_PICKED;
use crate::model::event::{Diagnosis, Event, NetlinkConversation};
use crate::model::getaddrinfo::GetaddrinfoCall;
use crate::model::ip_text::ip_list as list;
use crate::model::netlink::rtm;

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

/// Replays kubelet's NodeAddress rule on each kubelet lookup and the dump after it.
#[derive(Default)]
pub(super) struct KubeletPicks {
    pending: BTreeMap<u32, PendingLookup>,
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
        Some(pick(&pending, &local, &reference(e)))
    }
}

/// kubelet's pick from `pending`'s answer with `local` the addresses of its dump (`dump` names
/// that conversation): the subject (for saying it once) and the diagnosis.
fn pick(pending: &PendingLookup, local: &[IpAddr], dump: &str) -> (String, Diagnosis) {
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
            "{} finds no valid node IP in its lookup: {answer}, none passes validateNodeIP; it falls back to the default-route interface's first global address (ChooseHostInterface)",
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
    )
}
