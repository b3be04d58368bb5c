//! correlate: raw records and frames → ordered timeline events. Reassembles netlink chunks into
//! buffers, decodes them, and groups what a thread does during a getaddrinfo call right after
//! that call's event (its `during` count says how many follow), so sinks and explainers see the
//! call with the netlink dumps and route lookups it caused.
pub mod chunks;
pub mod conversations;
pub mod process_filter;

use std::collections::{BTreeMap, HashMap};

use crate::clock::WallClock;
use std::net::IpAddr;

use crate::decode::addrinfo::{decode_gai_socket, decode_getaddrinfo, GaiSocketOp};
use crate::decode::kernel_handler::decode_kernel_handler;
use crate::decode::netlink::{ipvs_command, protocol_name, NetlinkDecoder, NetlinkMessage};
use crate::decode::record::{c_string, KernelRecord};
use crate::decode::route_lookup::RouteLookupDecoder;
use crate::event::{
    ConversationOutcome, Event, EventBody, ExtackMessage, GetaddrinfoCall, IpvsEvent, NetlinkEvent,
    ProcessAttribution,
};
use crate::explain::diagnose::Diagnoser;
use crate::explain::gai_conf::GaiConf;
use crate::explain::getaddrinfo_why::{explain_call, GetaddrinfoWhy};
use crate::frame::{Direction, NetlinkFrame, Task};
use chunks::ChunkAssembler;
use conversations::{BufferRef, CompletedConversation, ConversationTracker};

/// What the pipeline produces.
#[derive(Clone, Debug)]
pub enum Emitted {
    /// A whole netlink buffer (for pcap sinks), in capture order.
    Frame(NetlinkFrame),
    /// A timeline event.
    Event(Box<Event>),
}

/// Events held while a getaddrinfo call is open on a thread.
#[derive(Default)]
struct OpenSpan {
    held: Vec<Emitted>,
    /// glibc's `connect`/`getsockname` calls for its sort, in order.
    socket_ops: Vec<GaiSocketOp>,
    /// The process's gai.conf, read when the call started (while the process surely lives).
    gai_conf: Option<(GaiConf, Option<String>)>,
}

/// The bound on events held for one open getaddrinfo call; beyond it they are released ungrouped.
const MAX_HELD_PER_SPAN: usize = 4096;

/// Where a traced process's interface names come from (live tracing): interface indexes are per
/// network namespace, so each namespace gets its own name table.
pub trait InterfaceDirectory {
    /// An id of the network namespace `pid` is in, when the process can still be found.
    fn netns_of(&mut self, pid: u32) -> Option<u64>;
    /// Interface index → name in namespace `netns`, which `pid` is (or was) in; empty when
    /// unknown.
    fn interfaces_in(&mut self, netns: u64, pid: u32) -> BTreeMap<u32, String>;
}

/// Where a traced process's resolver configuration comes from (live tracing: its own
/// `/etc/gai.conf`, seen through `/proc/PID/root`).
pub trait ResolverConfig {
    /// The gai.conf tables `pid` sorts with (glibc's defaults when it has none), and a note
    /// when they could not be read.
    fn gai_conf(&mut self, pid: u32) -> (GaiConf, Option<String>);
}

/// Who a traced process is (live tracing): executable, ancestors, cgroup, unit or container.
pub trait ProcessDirectory {
    /// The attribution of `pid`, whose kernel records carry cgroup id `cgroup_id` (0: unknown).
    fn attribute(&mut self, pid: u32, cgroup_id: u64)
        -> Option<std::sync::Arc<ProcessAttribution>>;
    /// `pid` (child of `ppid` named `parent_comm`; 0 and empty when unknown) exec'd `filename`:
    /// what was known about it is read again.
    fn exec(&mut self, pid: u32, ppid: u32, parent_comm: &str, filename: &str);
}

/// Processes whose namespace is remembered at most; beyond, the memory starts over.
const MAX_REMEMBERED_PIDS: usize = 16384;

/// Interface name tables per network namespace, and which namespace each process is in.
#[derive(Default)]
struct NamespaceNames {
    netns_by_pid: HashMap<u32, u64>,
    names_by_netns: HashMap<u64, BTreeMap<u32, String>>,
}

/// Turns kernel records (live) or frames (offline) into timeline events.
pub struct Pipeline {
    clock: WallClock,
    chunks: ChunkAssembler,
    netlink: NetlinkDecoder,
    routes: RouteLookupDecoder,
    spans: HashMap<u32, OpenSpan>,
    conversations: ConversationTracker,
    directory: Option<Box<dyn InterfaceDirectory>>,
    namespaces: NamespaceNames,
    resolver_config: Option<Box<dyn ResolverConfig>>,
    /// `/etc/gai.conf` as each process's glibc read it (live), and whether it read to the end.
    gai_conf_read: HashMap<u32, (Vec<u8>, bool)>,
    diagnoser: Diagnoser,
    processes: Option<Box<dyn ProcessDirectory>>,
    /// The cgroup id each process's records carried last.
    cgroup_by_pid: HashMap<u32, u64>,
}

fn task_of(pid_tgid: u64, comm: &[u8]) -> Task {
    Task {
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        comm: c_string(comm),
    }
}

impl Pipeline {
    /// A pipeline converting kernel time with `clock`.
    pub fn new(clock: WallClock, routes: RouteLookupDecoder) -> Self {
        Self {
            clock,
            chunks: ChunkAssembler::default(),
            netlink: NetlinkDecoder::new(),
            routes,
            spans: HashMap::new(),
            conversations: ConversationTracker::new(),
            directory: None,
            namespaces: NamespaceNames::default(),
            resolver_config: None,
            gai_conf_read: HashMap::new(),
            diagnoser: Diagnoser::new(),
            processes: None,
            cgroup_by_pid: HashMap::new(),
        }
    }

    /// Attributes every event to its process with `directory` (live tracing).
    pub fn with_process_directory(mut self, directory: Box<dyn ProcessDirectory>) -> Self {
        self.processes = Some(directory);
        self
    }

    /// Reads each process's gai.conf from `config` to explain getaddrinfo orders (without one,
    /// glibc's default tables are assumed).
    pub fn with_resolver_config(mut self, config: Box<dyn ResolverConfig>) -> Self {
        self.resolver_config = Some(config);
        self
    }

    /// The `why` of a returned getaddrinfo call, from what its thread did during it.
    fn explain_getaddrinfo(
        &mut self,
        pid: u32,
        call: &GetaddrinfoCall,
        span: &OpenSpan,
    ) -> Option<GetaddrinfoWhy> {
        let returned: Vec<IpAddr> = call
            .results
            .iter()
            .filter_map(|r| r.address.parse().ok())
            .collect();
        let replies: Vec<NetlinkMessage> = span
            .held
            .iter()
            .filter_map(|e| match e {
                Emitted::Event(ev) => match &ev.body {
                    EventBody::Netlink(n) if n.direction == Direction::Recv => Some(&n.messages),
                    _ => None,
                },
                Emitted::Frame(_) => None,
            })
            .flatten()
            .cloned()
            .collect();
        // What glibc itself read wins; else the file as seen through /proc when the call began.
        let (conf, note) = match (self.gai_conf_read.get(&pid), &span.gai_conf) {
            (Some((text, _)), _) => (
                GaiConf::parse_like_glibc(&String::from_utf8_lossy(text)).0,
                None,
            ),
            (None, Some(read)) => read.clone(),
            (None, None) => match self.resolver_config.as_mut() {
                Some(c) => c.gai_conf(pid),
                None => (GaiConf::default(), None),
            },
        };
        let mut why = explain_call(&returned, &span.socket_ops, &replies, &conf)?;
        why.notes.extend(note);
        Some(why)
    }

    /// Names interfaces per network namespace from `directory` (live tracing); without one, a
    /// single table learned from `RTM_NEWLINK` messages serves all (captures).
    pub fn with_interface_directory(mut self, directory: Box<dyn InterfaceDirectory>) -> Self {
        self.directory = Some(directory);
        self
    }

    /// The namespace of `pid` (as the kernel last reported it, else looked up), with its name
    /// table loaded on first sight of the namespace.
    fn netns_for(&mut self, pid: u32) -> Option<u64> {
        let directory = self.directory.as_mut().filter(|_| pid != 0)?;
        let known = &mut self.namespaces;
        let ns = match known.netns_by_pid.get(&pid) {
            Some(ns) => *ns,
            None => {
                let ns = directory.netns_of(pid)?;
                if known.netns_by_pid.len() >= MAX_REMEMBERED_PIDS {
                    known.netns_by_pid.clear();
                }
                known.netns_by_pid.insert(pid, ns);
                ns
            }
        };
        known
            .names_by_netns
            .entry(ns)
            .or_insert_with(|| directory.interfaces_in(ns, pid));
        Some(ns)
    }

    /// Decodes a buffer with the interface names of its process's namespace.
    fn decode_frame(&mut self, frame: &NetlinkFrame) -> crate::decode::netlink::DecodedBuffer {
        let pid = frame.task.as_ref().map_or(0, |t| t.pid);
        self.decode_for(pid, frame.protocol, &frame.bytes)
    }

    /// Decodes netlink bytes of `pid` with the interface names of its namespace.
    fn decode_for(
        &mut self,
        pid: u32,
        protocol: u16,
        bytes: &[u8],
    ) -> crate::decode::netlink::DecodedBuffer {
        let Some(ns) = self.netns_for(pid) else {
            return self.netlink.decode(protocol, bytes);
        };
        let names = self.namespaces.names_by_netns.entry(ns).or_default();
        self.netlink.swap_interfaces(names);
        let decoded = self.netlink.decode(protocol, bytes);
        self.netlink.swap_interfaces(names);
        decoded
    }

    /// The netlink decoder (to teach it family ids and interface names).
    pub fn netlink_decoder(&mut self) -> &mut NetlinkDecoder {
        &mut self.netlink
    }

    /// The clock in use.
    pub fn clock(&self) -> WallClock {
        self.clock
    }

    /// Who `pid` is, when a process directory is set (live tracing).
    pub fn attribution_of(&mut self, pid: u32) -> Option<std::sync::Arc<ProcessAttribution>> {
        let cgroup_id = self.cgroup_by_pid.get(&pid).copied().unwrap_or(0);
        self.processes.as_mut()?.attribute(pid, cgroup_id)
    }

    fn event(&mut self, ts_ns: u64, task: &Task, body: EventBody) -> Event {
        let process = if task.pid == 0 {
            None
        } else {
            self.attribution_of(task.pid)
        };
        Event {
            process,
            ts: self.clock.rfc3339(ts_ns),
            ts_ns,
            pid: task.pid,
            tid: task.tid,
            comm: task.comm.clone(),
            body,
        }
    }

    /// Lets the diagnoser see an event; the diagnoses it proves go straight out.
    fn observe(&mut self, item: &Emitted, out: &mut Vec<Emitted>) {
        if let Emitted::Event(e) = item {
            for d in self.diagnoser.observe(e) {
                out.push(Emitted::Event(Box::new(d)));
            }
        }
    }

    /// Routes an output through an open span of its thread, or straight out.
    fn emit(&mut self, tid: u32, item: Emitted, out: &mut Vec<Emitted>) {
        self.observe(&item, out);
        if let Some(span) = self.spans.get_mut(&tid) {
            if span.held.len() < MAX_HELD_PER_SPAN {
                span.held.push(item);
                return;
            }
        }
        out.push(item);
    }

    /// Handles one live kernel record.
    pub fn on_kernel_record(&mut self, rec: KernelRecord, out: &mut Vec<Emitted>) {
        let h = rec.header();
        if h.cgroup_id != 0 {
            if self.cgroup_by_pid.len() >= MAX_REMEMBERED_PIDS {
                self.cgroup_by_pid.clear();
            }
            self.cgroup_by_pid
                .insert((h.pid_tgid >> 32) as u32, h.cgroup_id);
        }
        match rec {
            KernelRecord::GetaddrinfoEntry(h) => {
                let tid = h.pid_tgid as u32;
                let span = OpenSpan {
                    gai_conf: self
                        .resolver_config
                        .as_mut()
                        .map(|c| c.gai_conf((h.pid_tgid >> 32) as u32)),
                    ..OpenSpan::default()
                };
                if let Some(stale) = self.spans.insert(tid, span) {
                    out.extend(stale.held);
                }
            }
            KernelRecord::GaiSocket(r) => {
                if let Some(span) = self.spans.get_mut(&(r.header.pid_tgid as u32)) {
                    if span.socket_ops.len() < MAX_HELD_PER_SPAN {
                        span.socket_ops.push(decode_gai_socket(&r));
                    }
                }
            }
            KernelRecord::GaiConf(r) => {
                let pid = (r.header.pid_tgid >> 32) as u32;
                if self.gai_conf_read.len() >= MAX_REMEMBERED_PIDS {
                    self.gai_conf_read.clear();
                }
                let (text, complete) = self.gai_conf_read.entry(pid).or_default();
                if *complete {
                    // glibc reads the file again when it changed: a new copy begins.
                    text.clear();
                    *complete = false;
                }
                let len = (r.len as usize).min(r.data.len());
                text.extend_from_slice(&r.data[..len]);
                *complete = r.ret <= 0;
            }
            KernelRecord::Getaddrinfo(r) => {
                let task = task_of(r.header.pid_tgid, &r.header.comm);
                let mut call = decode_getaddrinfo(&r);
                let span = self.spans.remove(&task.tid).unwrap_or_default();
                call.why = self.explain_getaddrinfo(task.pid, &call, &span);
                let held = span.held;
                call.during = held
                    .iter()
                    .filter(|e| matches!(e, Emitted::Event(_)))
                    .count() as u32;
                let ev = Emitted::Event(Box::new(self.event(
                    r.header.ts_ns,
                    &task,
                    EventBody::Getaddrinfo(call),
                )));
                let mut diagnoses = Vec::new();
                self.observe(&ev, &mut diagnoses);
                out.push(ev);
                out.extend(held);
                out.extend(diagnoses);
            }
            KernelRecord::NetlinkChunk(h, payload) => {
                // The kernel says which namespace the call ran in (a process may switch, as
                // `ip -n` does); this beats looking the process up later, when it may be gone.
                if h.header.netns != 0 {
                    let pid = (h.header.pid_tgid >> 32) as u32;
                    let known = &mut self.namespaces.netns_by_pid;
                    if known.len() >= MAX_REMEMBERED_PIDS {
                        known.clear();
                    }
                    known.insert(pid, u64::from(h.header.netns));
                }
                if let Some(frame) = self.chunks.push(&h, &payload, &self.clock) {
                    self.on_frame(frame, out);
                }
            }
            KernelRecord::Fib4Lookup(r) | KernelRecord::Fib6Lookup(r) => {
                let lookup = if r.header.kind == nodeip_trace_common::KIND_FIB6_LOOKUP {
                    self.routes.decode_v6(&r.raw)
                } else {
                    self.routes.decode_v4(&r.raw)
                };
                self.on_route_lookup(&r.header, lookup, out);
            }
            KernelRecord::RouteLookup(r) => {
                let lookup = crate::decode::route_lookup::decode_record(&r);
                self.on_route_lookup(&r.header, lookup, out);
            }
            KernelRecord::Extack(r) => {
                let task = task_of(r.header.pid_tgid, &r.header.comm);
                let ev = self.event(
                    r.header.ts_ns,
                    &task,
                    EventBody::Extack(ExtackMessage {
                        message: c_string(&r.msg),
                    }),
                );
                self.emit(task.tid, Emitted::Event(Box::new(ev)), out);
            }
            // A process that execs may have joined another namespace (`ip netns exec`).
            KernelRecord::Exec(r) => {
                let pid = (r.header.pid_tgid >> 32) as u32;
                if let Some(processes) = self.processes.as_mut() {
                    processes.exec(
                        pid,
                        r.ppid,
                        &c_string(&r.parent_comm),
                        &c_string(&r.filename),
                    );
                }
                self.namespaces.netns_by_pid.remove(&pid);
                self.gai_conf_read.remove(&pid);
            }
            KernelRecord::KernelHandler(r) => {
                let task = task_of(r.header.pid_tgid, &r.header.comm);
                let call = decode_kernel_handler(&r, |protocol, bytes| {
                    self.decode_for(task.pid, protocol, bytes)
                });
                let ev = self.event(r.header.ts_ns, &task, EventBody::KernelHandler(call));
                self.emit(task.tid, Emitted::Event(Box::new(ev)), out);
            }
            // The live source rescans that process's sockets; not a timeline event.
            KernelRecord::UnknownNetlinkSocket(_) => {}
        }
    }

    /// A route lookup, on its thread's timeline.
    fn on_route_lookup(
        &mut self,
        header: &nodeip_trace_common::EventHeader,
        lookup: crate::event::RouteLookup,
        out: &mut Vec<Emitted>,
    ) {
        let task = task_of(header.pid_tgid, &header.comm);
        let ev = self.event(header.ts_ns, &task, EventBody::RouteLookup(lookup));
        self.emit(task.tid, Emitted::Event(Box::new(ev)), out);
    }

    /// Handles one whole netlink buffer (live after reassembly, or read from a capture).
    pub fn on_frame(&mut self, mut frame: NetlinkFrame, out: &mut Vec<Emitted>) {
        let decoded = self.decode_frame(&frame);
        // IPsec keys never reach a sink (pcap files keep raw bytes).
        if frame.protocol == crate::decode::netlink::NETLINK_XFRM {
            crate::decode::netlink::redact_xfrm(&mut frame.bytes);
        }
        let task = frame.task.clone().unwrap_or_default();
        let direction = frame.direction.unwrap_or(Direction::Send);
        let bytes = frame.total_len.max(frame.bytes.len() as u32);
        let pairing = self.conversations.on_buffer(BufferRef {
            task: &task,
            direction,
            protocol: frame.protocol,
            ts_ns: frame.ts_ns,
            bytes,
            messages: &decoded.messages,
        });
        let body = EventBody::Netlink(NetlinkEvent {
            direction,
            protocol: protocol_name(frame.protocol),
            protocol_id: frame.protocol,
            portid: pairing.portid,
            bytes,
            captured: frame.bytes.len() as u32,
            truncated: frame.truncated(),
            messages: decoded.messages,
            decode_errors: decoded.errors.iter().map(|e| e.to_string()).collect(),
            paired: pairing.paired,
        });
        let ev = self.event(frame.ts_ns, &task, body);
        let tid = task.tid;
        self.emit(tid, Emitted::Frame(frame), out);
        self.emit(tid, Emitted::Event(Box::new(ev)), out);
        for done in pairing.completed {
            self.on_conversation(done, out);
        }
    }

    /// Emits a finished conversation, and an `ipvs` event with the kernel's answer when it was
    /// an IPVS command. Both go to the requesting thread's open getaddrinfo call, if any.
    fn on_conversation(&mut self, done: CompletedConversation, out: &mut Vec<Emitted>) {
        let CompletedConversation {
            task,
            ts_ns,
            conversation,
        } = done;
        let ipvs = ipvs_command(&conversation.request).map(|command| IpvsEvent {
            command,
            result: match conversation.outcome {
                ConversationOutcome::NoReply | ConversationOutcome::Incomplete => None,
                _ => Some(conversation.error.as_ref().map_or(0, |e| e.code)),
            },
        });
        let ev = self.event(
            ts_ns,
            &task,
            EventBody::Conversation(Box::new(conversation)),
        );
        self.emit(task.tid, Emitted::Event(Box::new(ev)), out);
        if let Some(ipvs) = ipvs {
            let ev = self.event(ts_ns, &task, EventBody::Ipvs(ipvs));
            self.emit(task.tid, Emitted::Event(Box::new(ev)), out);
        }
    }

    /// Releases everything held (end of trace): open calls become truncated frames; events of
    /// getaddrinfo calls that never returned are released ungrouped.
    pub fn finish(&mut self, out: &mut Vec<Emitted>) {
        for frame in self.chunks.drain() {
            self.on_frame(frame, out);
        }
        for done in self.conversations.drain() {
            self.on_conversation(done, out);
        }
        let mut spans: Vec<_> = self.spans.drain().collect();
        spans.sort_by_key(|(tid, _)| *tid);
        for (_, span) in spans {
            out.extend(span.held);
        }
        for d in self.diagnoser.finish() {
            out.push(Emitted::Event(Box::new(d)));
        }
    }
}

#[cfg(test)]
mod tests;
