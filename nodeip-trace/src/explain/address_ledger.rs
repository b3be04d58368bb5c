//! Who changed the node's addresses during a trace: every address a traced process asked the
//! kernel to add or remove (its `RTM_NEWADDR`/`RTM_DELADDR` request: keepalived's VIP,
//! kube-vip's, kube-proxy's on kube-ipvs0, NetworkManager's), in order, with whether the kernel
//! did it. The text timeline ends with it and the report has it as a table; a diagnosis that
//! rests on an added address (`added-address-picked`) names the same request.
//!
//! A live trace also hears the kernel's own notices of the changes in its namespace
//! (`address_notice` events). A notice within [`NOTICE_WINDOW_NS`] of a request for the same
//! address is that request's (whichever of the two came first); any other is a change no
//! traced request explains — one the kernel made on its own (an IPv6 link-local address when a
//! link comes up, SLAAC, the end of duplicate address detection, a lifetime's end) or that a
//! process the trace does not follow asked for — and is listed as such, with the address's
//! flags.
use std::collections::HashSet;

use crate::model::event::{
    AddressNotice, ConversationOutcome, Event, EventBody, NetlinkConversation,
};
use crate::model::facts::{AddressFact, ConversationFacts};
use crate::model::netlink::{rtm, MessageBody, NETLINK_ROUTE};

/// Changes kept at most; beyond, they are counted only.
const MAX_CHANGES: usize = 10_000;

/// How far apart a request and the kernel's notice of it may be: the notice is read from its
/// own socket, the request from the ring, so either may come first.
pub const NOTICE_WINDOW_NS: u64 = 2_000_000_000;

/// Who made a change that no traced request explains.
pub const NO_REQUEST: &str =
    "the kernel, or a process this trace does not follow (no request seen)";

/// What a change did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// A request to add, or a notice of an address the ledger knew to be gone.
    Added,
    /// A request to remove, or a notice of a removal.
    Removed,
    /// A notice of an address the trace has not seen before: the kernel says `RTM_NEWADDR` for
    /// both.
    AddedOrChanged,
    /// A notice of an address already there: its flags or lifetimes changed.
    Changed,
}

impl ChangeKind {
    /// The verb and the preposition before the interface: `added … to`, `removed … from`.
    pub fn words(self) -> (&'static str, &'static str) {
        match self {
            ChangeKind::Added => ("added", "to"),
            ChangeKind::Removed => ("removed", "from"),
            ChangeKind::AddedOrChanged => ("added or changed", "on"),
            ChangeKind::Changed => ("changed", "on"),
        }
    }

    fn adds(self) -> bool {
        self != ChangeKind::Removed
    }
}

/// One address change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressChange {
    /// When it was asked or noticed (RFC 3339).
    pub ts: String,
    /// Raw timestamp (the event's `ts_ns`).
    pub ts_ns: u64,
    /// What it did.
    pub kind: ChangeKind,
    /// `address/prefix`.
    pub address: String,
    /// The interface (or its index when the trace could not name it).
    pub ifname: String,
    /// Who asked: `comm[pid]` (or a process a capture does not name), or [`NO_REQUEST`].
    pub by: String,
    /// The kernel's answer: `None` when it did it, else its error (`EEXIST`, ...).
    pub refused: Option<String>,
    /// The address's flags as the kernel's notice gave them (`tentative`, `temporary`,
    /// `deprecated`, `dynamic`, …; changes no request explains only).
    pub flags: Vec<String>,
    /// The kernel's notice of it was heard (live traces).
    pub noticed: bool,
}

/// The address changes of a trace, collected from its events in order.
#[derive(Default)]
pub struct AddressLedger {
    changes: Vec<AddressChange>,
    /// Changes past [`MAX_CHANGES`].
    left_out: u64,
    /// (interface, address) of the addresses known to be there: added by a change in the
    /// ledger and not removed since.
    present: HashSet<(String, String)>,
}

impl AddressLedger {
    /// An empty ledger.
    pub fn new() -> Self {
        Self::default()
    }

    /// Looks at one event: an address request's conversation is a change; a notice is its
    /// request's, or a change of its own.
    pub fn observe(&mut self, e: &Event) {
        match &e.body {
            EventBody::Conversation(c) => self.request(e, c),
            EventBody::AddressNotice(n) => self.notice(e, n),
            _ => {}
        }
    }

    fn request(&mut self, e: &Event, c: &NetlinkConversation) {
        let Some((added, addresses)) = address_request(c) else {
            return;
        };
        let refused = (c.outcome == ConversationOutcome::Error).then(|| {
            c.error
                .as_ref()
                .map(|err| err.errno.to_string())
                .unwrap_or_else(|| "an error".into())
        });
        let kind = if added {
            ChangeKind::Added
        } else {
            ChangeKind::Removed
        };
        for a in addresses {
            let address = format!("{}/{}", a.address, a.prefix_len);
            let ifname = a.ifname.to_string();
            // A notice heard before the request's records were read is this request's.
            let heard =
                refused.is_none() && self.take_unexplained(e.ts_ns, kind, &address, &ifname);
            if refused.is_none() {
                self.mark(kind, &address, &ifname);
            }
            self.push(AddressChange {
                refused: refused.clone(),
                noticed: heard,
                ..AddressChange::of(e, kind, address, ifname, e.who())
            });
        }
    }

    fn notice(&mut self, e: &Event, n: &AddressNotice) {
        let a = &n.address;
        let address = format!("{}/{}", a.address, a.prefix_len);
        let ifname = a.ifname.to_string();
        let request = self.changes.iter_mut().rev().find(|c| {
            c.by != NO_REQUEST
                && !c.noticed
                && c.refused.is_none()
                && c.is_about(n.added, &address, &ifname, e.ts_ns)
        });
        if let Some(request) = request {
            request.noticed = true;
            return;
        }
        let key = (ifname.clone(), address.clone());
        let kind = match (n.added, self.present.contains(&key)) {
            (false, _) => ChangeKind::Removed,
            (true, true) => ChangeKind::Changed,
            (true, false) => ChangeKind::AddedOrChanged,
        };
        self.mark(kind, &address, &ifname);
        let flags = a
            .secondary
            .then(|| "secondary".to_string())
            .into_iter()
            .chain(a.flags.iter().map(|f| f.to_string()))
            .collect();
        self.push(AddressChange {
            flags,
            noticed: true,
            ..AddressChange::of(e, kind, address, ifname, NO_REQUEST.into())
        });
    }

    /// Removes the latest change no request explained that a request of `kind` for `address`
    /// on `ifname` at `ts_ns` explains: whether there was one.
    fn take_unexplained(
        &mut self,
        ts_ns: u64,
        kind: ChangeKind,
        address: &str,
        ifname: &str,
    ) -> bool {
        let found = self
            .changes
            .iter()
            .rposition(|c| c.by == NO_REQUEST && c.is_about(kind.adds(), address, ifname, ts_ns));
        found.map(|i| self.changes.remove(i)).is_some()
    }

    fn mark(&mut self, kind: ChangeKind, address: &str, ifname: &str) {
        let key = (ifname.to_string(), address.to_string());
        if kind.adds() {
            self.present.insert(key);
        } else {
            self.present.remove(&key);
        }
    }

    fn push(&mut self, change: AddressChange) {
        if self.changes.len() >= MAX_CHANGES {
            self.left_out += 1;
        } else {
            self.changes.push(change);
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
    /// A change `e` made or told of, done by the kernel, without flags, not noticed yet.
    fn of(e: &Event, kind: ChangeKind, address: String, ifname: String, by: String) -> Self {
        AddressChange {
            ts: e.ts.to_string(),
            ts_ns: e.ts_ns,
            kind,
            address,
            ifname,
            by,
            refused: None,
            flags: Vec::new(),
            noticed: false,
        }
    }

    /// Whether it adds (or removes, `adds` false) `address` on `ifname` within
    /// [`NOTICE_WINDOW_NS`] of `ts_ns`: a request and the kernel's notice of it.
    fn is_about(&self, adds: bool, address: &str, ifname: &str, ts_ns: u64) -> bool {
        self.kind.adds() == adds
            && self.address == address
            && self.ifname == ifname
            && self.ts_ns.abs_diff(ts_ns) <= NOTICE_WINDOW_NS
    }

    /// How it reads: `added 10.0.0.100/24 to eth0 by keepalived[42]` (`, refused: EEXIST`);
    /// `added or changed fe80::1/64 on eth0 (permanent) by the kernel, or …`.
    pub fn text(&self) -> String {
        let (verb, to) = self.kind.words();
        let mut text = format!("{verb} {} {to} {}", self.address, self.ifname);
        if !self.flags.is_empty() {
            text.push_str(&format!(" ({})", self.flags.join(", ")));
        }
        text.push_str(&format!(" by {}", self.by));
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

    /// The kernel's notice at `ts_ns` of `address/prefix` on eth0 (`flags` as `ip address`
    /// says them).
    fn notice(ts_ns: u64, added: bool, address: &str, prefix: u8, flags: &[&str]) -> Event {
        let flags: Vec<String> = flags.iter().map(|f| format!("{f:?}")).collect();
        let line = format!(
            r#"{{"ts":"2026-11-22T10:00:00.000001Z","ts_ns":{ts_ns},"pid":0,"tid":0,"comm":"",
            "kind":"address_notice","added":{added},"netns":4026531840,
            "address":{{"ifname":"eth0","address":"{address}","prefix_len":{prefix},
              "secondary":false,"flags":[{}]}}}}"#,
            flags.join(",")
        );
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    fn texts(events: &[Event]) -> Vec<String> {
        let mut ledger = AddressLedger::new();
        for e in events {
            ledger.observe(e);
        }
        ledger.changes().iter().map(AddressChange::text).collect()
    }

    #[test]
    fn a_notice_is_its_request_s_whichever_comes_first() {
        let add = request(42, "keepalived", rtm::NEWADDR, "192.0.2.100", "ack");
        let heard = notice(1_500_000_000, true, "192.0.2.100", 24, &[]);
        let asked = ["added 192.0.2.100/24 to eth0 by keepalived[42]"];
        assert_eq!(texts(&[add.clone(), heard.clone()]), asked);
        assert_eq!(texts(&[heard.clone(), add.clone()]), asked);
        // Too far apart: two changes, the notice's of its own.
        let late = notice(5_000_000_000, true, "192.0.2.100", 24, &[]);
        assert_eq!(
            texts(&[add.clone(), late]),
            [
                asked[0].to_string(),
                format!("changed 192.0.2.100/24 on eth0 by {NO_REQUEST}")
            ]
        );
        // A refused request has no notice: the notice is someone else's change.
        let refused = request(43, "ip", rtm::NEWADDR, "192.0.2.100", "error");
        assert_eq!(
            texts(&[refused, heard])[1],
            format!("added or changed 192.0.2.100/24 on eth0 by {NO_REQUEST}")
        );
    }

    #[test]
    fn changes_no_request_explains_are_listed_with_their_flags() {
        // A link comes up: the kernel adds its link-local address (tentative), duplicate
        // address detection ends, the address goes.
        let events = [
            notice(1, true, "fe80::1", 64, &["tentative"]),
            notice(1_000_000_001, true, "fe80::1", 64, &[]),
            notice(2_000_000_001, false, "fe80::1", 64, &[]),
        ];
        assert_eq!(
            texts(&events),
            [
                format!("added or changed fe80::1/64 on eth0 (tentative) by {NO_REQUEST}"),
                format!("changed fe80::1/64 on eth0 by {NO_REQUEST}"),
                format!("removed fe80::1/64 from eth0 by {NO_REQUEST}"),
            ]
        );
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
