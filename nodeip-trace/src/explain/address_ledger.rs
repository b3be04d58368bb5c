//! Who changed the node's addresses during a trace: every address a traced process asked the
//! kernel to add or remove (its `RTM_NEWADDR`/`RTM_DELADDR` request: keepalived's VIP,
//! kube-vip's, kube-proxy's on kube-ipvs0, NetworkManager's), in order, with whether the kernel
//! did it. The text timeline ends with it and the report has it as a table; a diagnosis that
//! rests on an added address (`added-address-picked`) names the same request.
//!
//! Changes the kernel makes on its own (SLAAC, DAD, an address that expires) come with no
//! request and are not in it.
use crate::model::event::{ConversationOutcome, Event, EventBody, NetlinkConversation};
use crate::model::facts::{AddressFact, ConversationFacts};
use crate::model::netlink::{rtm, MessageBody, NETLINK_ROUTE};

/// Changes kept at most; beyond, they are counted only.
const MAX_CHANGES: usize = 10_000;

/// One requested address change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressChange {
    /// When it was asked (RFC 3339).
    pub ts: String,
    /// Raw timestamp (the event's `ts_ns`).
    pub ts_ns: u64,
    /// Added (`RTM_NEWADDR`) or removed (`RTM_DELADDR`).
    pub added: bool,
    /// `address/prefix`.
    pub address: String,
    /// The interface (or its index when the trace could not name it).
    pub ifname: String,
    /// Who asked: `comm[pid]` (or a process a capture does not name).
    pub by: String,
    /// The kernel's answer: `None` when it did it, else its error (`EEXIST`, ...).
    pub refused: Option<String>,
}

/// The address changes of a trace, collected from its events in order.
#[derive(Default)]
pub struct AddressLedger {
    changes: Vec<AddressChange>,
    /// Changes past [`MAX_CHANGES`].
    left_out: u64,
}

impl AddressLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks at one event: an address request's conversation is a change.
    pub fn observe(&mut self, e: &Event) {
        let EventBody::Conversation(c) = &e.body else {
            return;
        };
        let Some((added, addresses)) = address_request(c) else {
            return;
        };
        let refused = (c.outcome == ConversationOutcome::Error).then(|| {
            c.error
                .as_ref()
                .map(|err| err.errno.to_string())
                .unwrap_or_else(|| "an error".into())
        });
        for a in addresses {
            if self.changes.len() >= MAX_CHANGES {
                self.left_out += 1;
                continue;
            }
            self.changes.push(AddressChange {
                ts: e.ts.to_string(),
                ts_ns: e.ts_ns,
                added,
                address: format!("{}/{}", a.address, a.prefix_len),
                ifname: a.ifname.to_string(),
                by: e.who(),
                refused: refused.clone(),
            });
        }
    }

    /// The changes, in trace order.
    pub fn changes(&self) -> &[AddressChange] {
        &self.changes
    }

    /// Changes not kept (past the cap).
    pub fn left_out(&self) -> u64 {
        self.left_out
    }
}

/// What an address request asks for: whether it adds (`RTM_NEWADDR`) or removes
/// (`RTM_DELADDR`), and the addresses; `None` for any other conversation.
pub fn address_request(c: &NetlinkConversation) -> Option<(bool, Vec<AddressFact>)> {
    let type_id = c.request.header.type_id;
    let added = match type_id {
        rtm::NEWADDR => true,
        rtm::DELADDR => false,
        _ => return None,
    };
    if c.protocol_id != NETLINK_ROUTE || !matches!(c.request.body, MessageBody::Address(_)) {
        return None;
    }
    let mut facts = ConversationFacts::default();
    facts.add(&c.request);
    Some((added, facts.addresses))
}

impl AddressChange {
    /// How it reads: `added 10.0.0.100/24 to eth0 by keepalived[42]` (`, refused: EEXIST`).
    pub fn text(&self) -> String {
        let (verb, to) = if self.added {
            ("added", "to")
        } else {
            ("removed", "from")
        };
        let mut text = format!(
            "{verb} {} {to} {} by {}",
            self.address, self.ifname, self.by
        );
        if let Some(why) = &self.refused {
            text.push_str(&format!(" (refused: {why})"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `comm[pid]`'s address request `request` (`RTM_NEWADDR`/`RTM_DELADDR`, type `type_id`)
    /// of `address/prefix` on eth0, answered `outcome` (an error: EEXIST).
    fn request(pid: u32, comm: &str, type_id: u16, address: &str, outcome: &str) -> Event {
        let request = if type_id == rtm::NEWADDR {
            "RTM_NEWADDR"
        } else {
            "RTM_DELADDR"
        };
        let error = if outcome == "error" {
            r#","error":{"code":-17,"errno":"EEXIST","text":"File exists"}"#
        } else {
            ""
        };
        let line = format!(
            r#"{{"ts":"2026-11-22T10:00:00.000001Z","ts_ns":1,"pid":{pid},"tid":{pid},"comm":"{comm}",
            "kind":"conversation","protocol":"NETLINK_ROUTE","protocol_id":0,"seq":1,"dump":false,
            "request":{{"type":"{request}","type_id":{type_id},"flags":["REQUEST","ACK"],"flags_raw":5,
              "seq":1,"pid":0,"len":0,"body":{{"kind":"address","family":"inet","prefix_len":24,
              "flags":[],"flags_raw":0,"secondary":false,"scope":"global","index":2,"ifname":"eth0",
              "local":"{address}","address":"{address}"}}}},
            "replies":0,"reply_types":{{}},"reply_buffers":1,"reply_bytes":36,"outcome":"{outcome}"{error},
            "duration_ns":1,"facts":{{}}}}"#
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    #[test]
    fn each_request_is_a_change_with_who_asked_and_the_kernel_s_answer() {
        let mut ledger = AddressLedger::new();
        for e in [
            request(42, "keepalived", rtm::NEWADDR, "192.0.2.100", "ack"),
            request(43, "ip", rtm::NEWADDR, "192.0.2.100", "error"),
            request(42, "keepalived", rtm::DELADDR, "192.0.2.100", "ack"),
        ] {
            ledger.observe(&e);
        }
        let texts: Vec<String> = ledger.changes().iter().map(AddressChange::text).collect();
        assert_eq!(
            texts,
            [
                "added 192.0.2.100/24 to eth0 by keepalived[42]",
                "added 192.0.2.100/24 to eth0 by ip[43] (refused: EEXIST)",
                "removed 192.0.2.100/24 from eth0 by keepalived[42]",
            ]
        );
        assert_eq!(ledger.left_out(), 0);
    }

    #[test]
    fn other_conversations_are_not_changes() {
        let mut ledger = AddressLedger::new();
        let mut dump = request(42, "ip", rtm::NEWADDR, "192.0.2.100", "ack");
        if let EventBody::Conversation(c) = &mut dump.body {
            let mut request = (*c.request).clone();
            request.header.type_id = rtm::GETADDR;
            c.request = std::sync::Arc::new(request);
        }
        ledger.observe(&dump);
        assert!(ledger.changes().is_empty());
    }
}
