//! calico-node's IPv4 address, live: a process named `calico-node` autodetecting its address
//! lists the interfaces (`net.Interfaces()`: an `RTM_GETLINK` dump) and then each one's
//! addresses (`Interface.Addrs()`: an `RTM_GETADDR` dump each). This replays calico's default
//! method, `first-found` (the newest release's exclusion list, interfaces walked in reverse, the
//! first global unicast IPv4 address; [`crate::explain::node_audit::calico`]), on the two dumps
//! it received, and says the pick as a `node-ip-picked` diagnosis (info). The trace does not
//! read the process's `IP_AUTODETECTION_METHOD`: the summary says the method replayed, and
//! `explain --from` replays another on the same dumps.
use std::collections::BTreeMap;

use super::{node_ip_picked, reference};
use crate::explain::node_audit::calico::{calico, CalicoSettings};
use crate::explain::node_audit::{NodeLink, NodeSnapshot, REMEDY_CALICO_PICKED};
use crate::model::event::{Diagnosis, Event, NetlinkConversation};
use crate::model::facts::LinkFact;
use crate::model::ip_text::ip_list;
use crate::model::netlink::{rtm, NETLINK_ROUTE};

/// The comm calico's node agent runs as.
const CALICO_NODE: &str = "calico-node";

/// Link dumps waiting for their address dump at most.
const MAX_PENDING: usize = 256;

/// Replays calico's first-found on each link dump by calico-node and the address dump after it.
#[derive(Default)]
pub(super) struct CalicoPicks {
    /// By process: its last link dump's links and that conversation's reference.
    links: BTreeMap<u32, (Vec<LinkFact>, String)>,
}

impl CalicoPicks {
    /// A conversation by calico-node: a link dump is remembered, the address dump after it
    /// decides the pick (the subject, for saying it once, and the diagnosis).
    pub(super) fn conversation(
        &mut self,
        e: &Event,
        c: &NetlinkConversation,
    ) -> Option<(String, Diagnosis)> {
        if e.comm != CALICO_NODE || !c.dump || c.protocol_id != NETLINK_ROUTE {
            return None;
        }
        match c.request.header.type_id {
            rtm::GETLINK => {
                if self.links.len() < MAX_PENDING || self.links.contains_key(&e.pid) {
                    self.links
                        .insert(e.pid, (c.facts.links.clone(), reference(e)));
                }
                None
            }
            rtm::GETADDR => {
                let (links, link_dump) = self.links.remove(&e.pid)?;
                Some(pick(e, c, &links, &link_dump))
            }
            _ => None,
        }
    }
}

/// calico's first-found on `links` (the link dump `link_dump`) and the address dump `c`.
fn pick(
    e: &Event,
    c: &NetlinkConversation,
    links: &[LinkFact],
    link_dump: &str,
) -> (String, Diagnosis) {
    let snapshot = NodeSnapshot {
        links: links
            .iter()
            .map(|l| NodeLink {
                index: l.index,
                ifname: l.ifname.clone(),
                kind: l.kind.clone(),
                ..NodeLink::default()
            })
            .collect(),
        addresses: c.facts.addresses.clone(),
        ..NodeSnapshot::default()
    };
    let replayed = calico(
        &snapshot,
        Some("first-found"),
        &CalicoSettings::default(),
        &[],
        &mut Vec::new(),
    );
    let method = "IP_AUTODETECTION_METHOD first-found (the default; the trace does not read the process's environment)";
    let summary = match replayed.picked.first() {
        Some(ip) => format!(
            "{} detects {ip} as its IPv4 address with {method}, from the interfaces and addresses it listed",
            e.who()
        ),
        None => format!(
            "{} detects no IPv4 address with {method}: it keeps its Node's address, or exits",
            e.who()
        ),
    };
    let mut evidence = vec![
        format!("link dump: {link_dump}"),
        format!("address dump: {}", reference(e)),
    ];
    evidence.extend(replayed.reasoning);
    let subject = format!("{} {}", e.pid, ip_list(&replayed.picked));
    (
        subject,
        node_ip_picked(summary, evidence, REMEDY_CALICO_PICKED),
    )
}
