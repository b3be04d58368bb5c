//! The rtnetlink dumps a component received, per process: what the live picks
//! ([`super::calico_pick`], [`super::flannel_pick`], [`super::kube_vip_pick`],
//! [`super::kube_proxy_pick`]) replay a component's rule on. Each process's last link, address
//! and route dump is kept (its facts and the conversation's reference, for evidence), for at
//! most [`MAX_PROCESSES`] processes of the component's comms ([`LivePick`]): a pick decides
//! when the last dump it needs has arrived, whichever order they came in
//! ([`DumpsByProcess::complete`]), or on a request of the process's own (kube-vip's address)
//! with the dumps it has.
use std::collections::BTreeMap;
use std::marker::PhantomData;

use super::{node_ip_picked, reference};
use crate::explain::node_audit::{ComponentPick, NodeLink, NodeSnapshot};
use crate::model::event::{Diagnosis, Event, NetlinkConversation};
use crate::model::facts::{AddressFact, LinkFact, RouteFact};
use crate::model::ip_text::ip_list;
use crate::model::netlink::{af, rtm, MessageBody, NETLINK_ROUTE};

/// Processes whose dumps are kept at most (a node runs one of each component).
const MAX_PROCESSES: usize = 256;

/// One dump: the facts the kernel answered and the conversation's reference.
pub(super) struct Dump<T> {
    /// The links, addresses or routes answered, in the kernel's order.
    pub facts: Vec<T>,
    /// Which conversation it was ([`reference`]).
    pub reference: String,
}

/// Which kind of dump a conversation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DumpKind {
    /// `RTM_GETLINK` (`net.Interfaces()`, `net.InterfaceByIndex`).
    Links,
    /// `RTM_GETADDR` (`Interface.Addrs()`, `netlink.AddrList`).
    Addresses,
    /// `RTM_GETROUTE` (`netlink.RouteList`).
    Routes,
}

/// The last dump of each kind one process received.
#[derive(Default)]
pub(super) struct ProcessDumps {
    /// Its last link dump.
    pub links: Option<Dump<LinkFact>>,
    /// Its last address dump.
    pub addresses: Option<Dump<AddressFact>>,
    /// Its last route dump.
    pub routes: Option<Dump<RouteFact>>,
}

/// A diagnosis a live pick makes, with its subject (for saying it once).
pub(super) type Said = (String, Diagnosis);

/// A conversation of one of a component's processes, as its rule hears it.
pub(super) struct Heard<'a> {
    /// The conversation's event.
    pub e: &'a Event,
    /// The conversation.
    pub c: &'a NetlinkConversation,
    /// The kind of dump it was, already kept; `None` for another conversation.
    pub kept: Option<DumpKind>,
}

/// A component's rule replayed on the dumps its processes received.
pub(super) trait DumpRule {
    /// The comms of the component's processes.
    const COMMS: &'static [&'static str];

    /// The dumps the default [`DumpRule::decide`] waits for, all of them, in whatever order.
    const NEEDED: &'static [DumpKind] = &[];

    /// The pick on one process's dumps once it has [`DumpRule::NEEDED`] (which are then
    /// forgotten).
    fn pick(_: &Event, _: &ProcessDumps) -> Option<Said> {
        None
    }

    /// What a conversation decides: by default, [`DumpRule::pick`] once the process has
    /// [`DumpRule::NEEDED`].
    fn decide(dumps: &mut DumpsByProcess, heard: &Heard<'_>) -> Vec<Said> {
        let complete = dumps.complete(heard.e.pid, heard.kept, Self::NEEDED);
        complete
            .and_then(|d| Self::pick(heard.e, &d))
            .into_iter()
            .collect()
    }
}

/// One component's live pick: the dumps of its processes, and its rule.
pub(super) struct LivePick<R> {
    dumps: DumpsByProcess,
    rule: PhantomData<R>,
}

impl<R: DumpRule> Default for LivePick<R> {
    fn default() -> Self {
        LivePick {
            dumps: DumpsByProcess::default(),
            rule: PhantomData,
        }
    }
}

impl<R: DumpRule> LivePick<R> {
    /// A conversation: by one of the component's processes, kept when it is a dump, then what
    /// the rule decides.
    pub fn conversation(&mut self, e: &Event, c: &NetlinkConversation) -> Vec<Said> {
        if !R::COMMS.iter().any(|comm| e.comm == *comm) {
            return Vec::new();
        }
        let kept = self.dumps.record(e, c);
        R::decide(&mut self.dumps, &Heard { e, c, kept })
    }

    /// Forgets the dumps of `pids` (processes that have exited).
    pub fn forget_processes(&mut self, pids: &[u32]) {
        for pid in pids {
            self.dumps.by_pid.remove(pid);
        }
    }
}

/// The dumps of a component's processes, by pid.
#[derive(Default)]
pub(super) struct DumpsByProcess {
    by_pid: BTreeMap<u32, ProcessDumps>,
}

impl DumpsByProcess {
    /// Keeps `c` when it is an rtnetlink link, address or route dump (one more process only
    /// below the cap); the kind kept.
    fn record(&mut self, e: &Event, c: &NetlinkConversation) -> Option<DumpKind> {
        if !c.dump || c.protocol_id != NETLINK_ROUTE {
            return None;
        }
        let kind = match c.request.header.type_id {
            rtm::GETLINK => DumpKind::Links,
            rtm::GETADDR => DumpKind::Addresses,
            rtm::GETROUTE => DumpKind::Routes,
            _ => return None,
        };
        if self.by_pid.len() >= MAX_PROCESSES && !self.by_pid.contains_key(&e.pid) {
            return None;
        }
        let dumps = self.by_pid.entry(e.pid).or_default();
        let reference = reference(e);
        match kind {
            DumpKind::Links => {
                dumps.links = Some(Dump {
                    facts: c.facts.links.clone(),
                    reference,
                });
            }
            DumpKind::Addresses => {
                dumps.addresses = Some(Dump {
                    facts: c.facts.addresses.clone(),
                    reference,
                });
            }
            DumpKind::Routes => {
                let v6 = matches!(&c.request.body, MessageBody::Route(r) if af::id(&r.family) == Some(af::INET6));
                let mut facts = c.facts.routes.clone();
                if v6 {
                    // An IPv6 dump's default route, as `NodeSnapshot::from_messages` writes it.
                    for r in facts.iter_mut().filter(|r| r.dst == "default") {
                        r.dst = "::/0".into();
                    }
                }
                dumps.routes = Some(Dump { facts, reference });
            }
        }
        Some(kind)
    }

    /// `pid`'s dumps, forgotten here, when `kept` (the dump just kept) is one of `needed` and
    /// the process now has every one of `needed` (the next pick waits for new ones).
    pub fn complete(
        &mut self,
        pid: u32,
        kept: Option<DumpKind>,
        needed: &[DumpKind],
    ) -> Option<ProcessDumps> {
        let dumps = self.by_pid.get(&pid)?;
        if !needed.contains(&kept?) || !needed.iter().all(|k| dumps.has(*k)) {
            return None;
        }
        self.by_pid.remove(&pid)
    }

    /// The dumps `pid` received so far.
    pub fn get(&self, pid: u32) -> Option<&ProcessDumps> {
        self.by_pid.get(&pid)
    }
}

impl ProcessDumps {
    /// Whether a dump of `kind` was seen.
    pub fn has(&self, kind: DumpKind) -> bool {
        self.reference(kind).is_some()
    }

    /// The reference of its dump of `kind` ([`reference`]).
    fn reference(&self, kind: DumpKind) -> Option<&str> {
        match kind {
            DumpKind::Links => Some(&self.links.as_ref()?.reference),
            DumpKind::Addresses => Some(&self.addresses.as_ref()?.reference),
            DumpKind::Routes => Some(&self.routes.as_ref()?.reference),
        }
    }

    /// What the dumps say as the audit's snapshot: the link dump's links, the address dump's
    /// addresses, the route dump's routes. A device or interface the trace named only by its
    /// index is named by the link dump where it lists that index.
    pub fn snapshot(&self) -> NodeSnapshot {
        let links = self.links.as_ref().map_or(&[][..], |d| &d.facts[..]);
        let mut addresses = self
            .addresses
            .as_ref()
            .map_or(Vec::new(), |d| d.facts.clone());
        for a in &mut addresses {
            a.ifname = self.interface_name(&a.ifname).into();
        }
        let mut routes = self.routes.as_ref().map_or(Vec::new(), |d| d.facts.clone());
        for r in &mut routes {
            r.dev = r.dev.as_deref().map(|d| self.interface_name(d).into());
        }
        NodeSnapshot {
            links: links
                .iter()
                .map(|l| NodeLink {
                    index: l.index,
                    ifname: l.ifname.clone(),
                    kind: l.kind.clone(),
                    ..NodeLink::default()
                })
                .collect(),
            addresses,
            routes,
            ..NodeSnapshot::default()
        }
    }

    /// The interface `text` names: itself, or the link dump's name for an index.
    pub fn interface_name(&self, text: &str) -> String {
        let index = text.parse::<u32>().ok();
        self.links
            .iter()
            .flat_map(|d| &d.facts)
            .find(|l| Some(l.index) == index)
            .and_then(|l| l.ifname.clone())
            .unwrap_or_else(|| text.to_string())
    }

    /// The `node-ip-picked` diagnosis of `e`'s process replaying `replayed` on these dumps:
    /// `summary`, then the dumps and the rule's reasoning as evidence; said once per component,
    /// process and addresses picked.
    pub fn picked(
        &self,
        e: &Event,
        summary: String,
        replayed: ComponentPick,
        remedy: &str,
    ) -> Said {
        let subject = format!(
            "{} {} {}",
            replayed.component,
            e.pid,
            ip_list(&replayed.picked)
        );
        let mut evidence = self.evidence();
        evidence.extend(replayed.reasoning);
        (subject, node_ip_picked(summary, evidence, remedy))
    }

    /// The dumps seen, as evidence: `route dump: conversation at …`, then the link and the
    /// address dump.
    pub fn evidence(&self) -> Vec<String> {
        [DumpKind::Routes, DumpKind::Links, DumpKind::Addresses]
            .into_iter()
            .filter_map(|kind| self.evidence_of(kind))
            .collect()
    }

    /// The dump of `kind`, as evidence: `route dump: conversation at …`.
    pub fn evidence_of(&self, kind: DumpKind) -> Option<String> {
        let reference = self.reference(kind)?;
        let what = match kind {
            DumpKind::Links => "link dump",
            DumpKind::Addresses => "address dump",
            DumpKind::Routes => "route dump",
        };
        Some(format!("{what}: {reference}"))
    }
}
