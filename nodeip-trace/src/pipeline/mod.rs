//! pipeline: the driver — assemble → decode → correlate → explain, in that order, for live kernel
//! records and for frames read from captures. Each stage is its own module and knows nothing of
//! the others; this one wires them: chunks are reassembled (`correlate::chunks`), decoded with
//! the interface names of the process's network namespace (`decode`), paired and held in
//! resolver spans (`correlate`), each returned call is explained from its span and every event
//! is shown to the diagnoser (`explain`). What comes out ([`Emitted`]) goes to the sinks.
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::correlate::chunks::ChunkAssembler;
use crate::correlate::conversations::{BufferRef, CompletedConversation, ConversationTracker};
use crate::correlate::spans::SpanTracker;
use crate::decode::addrinfo::{decode_gai_socket, decode_getaddrinfo};
use crate::decode::go_sort::{decode_go_host, decode_go_sort};
use crate::decode::kernel_handler::decode_kernel_handler;
use crate::decode::netlink::{ipvs_command, protocol_name, NetlinkDecoder};
use crate::decode::record::{c_string, KernelRecord};
use crate::decode::route_file::decode_route_file;
use crate::decode::route_lookup::RouteLookupDecoder;
use crate::explain::diagnose::Diagnoser;
use crate::explain::resolver::explain_span;
use crate::model::clock::{Rfc3339Cache, WallClock};
use crate::model::emitted::Emitted;
use crate::model::event::{
    AddressNotice, ConversationOutcome, Event, EventBody, ExtackMessage, IpvsEvent, NetlinkEvent,
};
use crate::model::facts::ConversationFacts;
use crate::model::frame::{Direction, NetlinkFrame, Task};
use crate::model::getaddrinfo::{GetaddrinfoCall, SortInputs};
use crate::model::id_hash::IdMap;
use crate::model::netlink::{rtm, NetlinkMessage, NETLINK_ROUTE};
use crate::model::ports::{InterfaceDirectory, ProcessDirectory, ResolverConfig};
use crate::model::process::ProcessAttribution;
use crate::model::resolver_span::ResolverSpan;

/// Processes whose namespace is remembered at most; beyond, the memory starts over.
const MAX_REMEMBERED_PIDS: usize = 16384;

/// How often at most a namespace's interface table is loaded again because a buffer named an
/// interface it lacks (one made after the table was loaded, or a load that came back short).
const INTERFACE_RELOAD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Interface name tables per network namespace, and which namespace each process is in.
#[derive(Default)]
struct NamespaceNames {
    netns_by_pid: IdMap<u32, u64>,
    names_by_netns: IdMap<u64, BTreeMap<u32, String>>,
    /// When each namespace's table was last loaded again for a missing name.
    reloaded_at: IdMap<u64, std::time::Instant>,
}

/// Remembers `value` (a namespace, a cgroup) for `pid` in `table`, which starts over beyond
/// [`MAX_REMEMBERED_PIDS`]. Nearly every record comes from a process already known with the same
/// value: looked up first, the table is written only when that changes.
fn remember_of_pid(table: &mut IdMap<u32, u64>, pid: u32, value: u64) {
    if table.get(&pid) == Some(&value) {
        return;
    }
    if table.len() >= MAX_REMEMBERED_PIDS {
        table.clear();
    }
    table.insert(pid, value);
}

impl NamespaceNames {
    /// Remembers that `pid` is in namespace `ns`.
    fn remember(&mut self, pid: u32, ns: u64) {
        remember_of_pid(&mut self.netns_by_pid, pid, ns);
    }

    /// Whether `ns`'s table may be loaded again now (at most once per
    /// [`INTERFACE_RELOAD_INTERVAL`]); if so, now is noted as its last reload.
    fn may_reload(&mut self, ns: u64) -> bool {
        let now = std::time::Instant::now();
        match self.reloaded_at.get(&ns) {
            Some(at) if now.duration_since(*at) < INTERFACE_RELOAD_INTERVAL => false,
            _ => {
                self.reloaded_at.insert(ns, now);
                true
            }
        }
    }
}

/// Turns kernel records (live) or frames (offline) into timeline events.
pub struct Pipeline {
    clock: WallClock,
    /// Renders each event's `ts`, reusing the date and second of the previous one.
    stamps: Rfc3339Cache,
    chunks: ChunkAssembler,
    netlink: NetlinkDecoder,
    routes: RouteLookupDecoder,
    spans: SpanTracker,
    conversations: ConversationTracker,
    directory: Option<Box<dyn InterfaceDirectory>>,
    namespaces: NamespaceNames,
    resolver_config: Option<Box<dyn ResolverConfig>>,
    diagnoser: Diagnoser,
    processes: Option<Box<dyn ProcessDirectory>>,
    /// The cgroup id each process's records carried last.
    cgroup_by_pid: IdMap<u32, u64>,
    /// False when no output reads events (a plain pcap file alone): netlink buffers are then
    /// reassembled and framed, and nothing is decoded, paired, explained or made an event.
    events_wanted: bool,
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
            stamps: Rfc3339Cache::default(),
            chunks: ChunkAssembler::default(),
            netlink: NetlinkDecoder::new(),
            routes,
            spans: SpanTracker::default(),
            conversations: ConversationTracker::new(),
            directory: None,
            namespaces: NamespaceNames::default(),
            resolver_config: None,
            diagnoser: Diagnoser::new(),
            processes: None,
            cgroup_by_pid: IdMap::default(),
            events_wanted: true,
        }
    }

    /// Makes frames only (see [`Pipeline::on_frame`]): for outputs that read no events, such as
    /// a plain pcap file, which takes the bytes as captured and nothing decoded from them.
    pub fn make_frames_only(&mut self) {
        self.events_wanted = false;
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

    /// Names interfaces per network namespace from `directory` (live tracing); without one,
    /// each namespace a frame names (our pcapng's interfaces) has a table learned from its
    /// `RTM_NEWLINK` messages and [`Pipeline::learn_interfaces`], and a single such table serves
    /// frames of unknown namespace (plain nlmon captures).
    pub fn with_interface_directory(mut self, directory: Box<dyn InterfaceDirectory>) -> Self {
        self.directory = Some(directory);
        self
    }

    /// The namespace a buffer of `pid` moved in: `reported` (by the kernel's record, or the
    /// capture's interface) when known, else the one the kernel last reported for `pid`, else
    /// looked up; its name table loaded on first sight of the namespace.
    fn netns_for(&mut self, pid: u32, reported: Option<u64>) -> Option<u64> {
        if let Some(ns) = reported {
            let known = &mut self.namespaces;
            if pid != 0 {
                known.remember(pid, ns);
            }
            let directory = &mut self.directory;
            known.names_by_netns.entry(ns).or_insert_with(|| {
                directory
                    .as_mut()
                    .map(|d| d.interfaces_in(ns, pid))
                    .unwrap_or_default()
            });
            return Some(ns);
        }
        let directory = self.directory.as_mut().filter(|_| pid != 0)?;
        let known = &mut self.namespaces;
        let ns = match known.netns_by_pid.get(&pid) {
            Some(ns) => *ns,
            None => {
                let ns = directory.netns_of(pid)?;
                known.remember(pid, ns);
                ns
            }
        };
        known
            .names_by_netns
            .entry(ns)
            .or_insert_with(|| directory.interfaces_in(ns, pid));
        Some(ns)
    }

    /// Decodes a buffer with the interface names of its namespace.
    fn decode_frame(&mut self, frame: &NetlinkFrame) -> crate::decode::netlink::DecodedBuffer {
        let pid = frame.task.as_ref().map_or(0, |t| t.pid);
        let reported = (frame.netns != 0).then_some(u64::from(frame.netns));
        self.decode_for(pid, reported, frame.protocol, &frame.bytes)
    }

    /// Teaches interface names known before the buffers that use them: a capture's interface
    /// description, or link dumps found anywhere in a capture by a first pass. `netns` `None`:
    /// the one table of buffers whose namespace is unknown (plain nlmon captures). Names
    /// already known are kept.
    pub fn learn_interfaces(&mut self, netns: Option<u64>, names: &BTreeMap<u32, String>) {
        for (&index, name) in names {
            match netns {
                Some(ns) => {
                    let table = self.namespaces.names_by_netns.entry(ns).or_default();
                    table.entry(index).or_insert_with(|| name.clone());
                }
                None if self.netlink.interface_name(index).is_none() => {
                    self.netlink.set_interface_name(index, name);
                }
                None => {}
            }
        }
    }

    /// Decodes netlink bytes of `pid` in namespace `reported` (when known) with the interface
    /// names of its namespace.
    fn decode_for(
        &mut self,
        pid: u32,
        reported: Option<u64>,
        protocol: u16,
        bytes: &[u8],
    ) -> crate::decode::netlink::DecodedBuffer {
        let Some(ns) = self.netns_for(pid, reported) else {
            return self.netlink.decode(protocol, bytes);
        };
        let decoded = self.decode_in(ns, protocol, bytes);
        // Without a directory (offline) there is nothing to load again.
        if self.netlink.named_every_interface()
            || self.directory.is_none()
            || !self.namespaces.may_reload(ns)
        {
            return decoded;
        }
        // An interface the table lacks: made after the table was loaded, or the load came back
        // short. The namespace's table is loaded again (names learned since are kept where
        // the load has none) and the buffer decoded with it.
        let Some(directory) = self.directory.as_mut() else {
            return decoded;
        };
        let fresh = directory.interfaces_in(ns, pid);
        if fresh.is_empty() {
            return decoded;
        }
        self.namespaces
            .names_by_netns
            .entry(ns)
            .or_default()
            .extend(fresh);
        self.decode_in(ns, protocol, bytes)
    }

    /// Decodes netlink bytes with the interface names of namespace `ns`.
    fn decode_in(
        &mut self,
        ns: u64,
        protocol: u16,
        bytes: &[u8],
    ) -> crate::decode::netlink::DecodedBuffer {
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

    /// Forgets what is known of processes that have exited (see
    /// [`ProcessDirectory::forget_exited`]): their attribution, namespace, cgroup, gai.conf, and what the
    /// diagnoser kept of them that no diagnosis can use any more.
    pub fn forget_exited_processes(&mut self) {
        let Some(processes) = self.processes.as_mut() else {
            return;
        };
        let gone = processes.forget_exited();
        for pid in &gone {
            self.namespaces.netns_by_pid.remove(pid);
            self.cgroup_by_pid.remove(pid);
        }
        self.spans.forget_processes(&gone);
        self.diagnoser.forget_processes(&gone);
    }

    /// The clock in use.
    pub fn clock(&self) -> WallClock {
        self.clock
    }

    /// Who `pid` is, when a process directory is set (live tracing).
    pub fn attribution_of(&mut self, pid: u32) -> Option<Arc<ProcessAttribution>> {
        let cgroup_id = self.cgroup_by_pid.get(&pid).copied().unwrap_or(0);
        self.processes.as_mut()?.attribute(pid, cgroup_id)
    }

    /// The event of `task` at `ts_ns`; the task is taken, so its comm moves into the event
    /// instead of being copied.
    fn event(&mut self, ts_ns: u64, task: Task, body: EventBody) -> Event {
        let process = if task.pid == 0 {
            None
        } else {
            self.attribution_of(task.pid)
        };
        Event {
            process,
            ts: self.stamps.render(self.clock.wall_ns(ts_ns)),
            ts_ns,
            pid: task.pid,
            tid: task.tid,
            comm: task.comm,
            body,
        }
    }

    /// Lets the diagnoser see an event; the diagnoses it proves go straight out.
    fn observe(&mut self, item: &Emitted, out: &mut Vec<Emitted>) {
        if let Some(e) = item.event() {
            for d in self.diagnoser.observe(e) {
                out.push(Emitted::Event(Box::new(d)));
            }
        }
    }

    /// Routes an output through an open span of its thread, or straight out.
    fn emit(&mut self, tid: u32, item: Emitted, out: &mut Vec<Emitted>) {
        self.observe(&item, out);
        out.extend(self.spans.hold(tid, item));
    }

    /// A program the tracer held at exec: process `pid` (named `comm` before its exec), from
    /// `since_ns` (CLOCK_MONOTONIC).
    pub fn on_exec_hold(
        &mut self,
        pid: u32,
        comm: &str,
        since_ns: u64,
        hold: crate::model::event::ExecHoldEvent,
        out: &mut Vec<Emitted>,
    ) {
        let task = Task {
            pid,
            tid: pid,
            comm: comm.into(),
        };
        let ev = self.event(since_ns, task, EventBody::ExecHold(Box::new(hold)));
        self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
    }

    /// A datagram of the kernel's address notices (`source::address_notices`), received at
    /// `ts_ns` (CLOCK_MONOTONIC) in namespace `netns` (the tracer's own): one `address_notice`
    /// event per address, made by no process (pid 0).
    pub fn on_address_notices(
        &mut self,
        ts_ns: u64,
        netns: u64,
        bytes: &[u8],
        out: &mut Vec<Emitted>,
    ) {
        let decoded = self.decode_for(std::process::id(), Some(netns), NETLINK_ROUTE, bytes);
        for message in decoded.messages {
            let added = match message.header.type_id {
                rtm::NEWADDR => true,
                rtm::DELADDR => false,
                _ => continue,
            };
            let mut facts = ConversationFacts::default();
            facts.add(&message);
            for address in facts.addresses {
                let task = Task {
                    pid: 0,
                    tid: 0,
                    comm: Default::default(),
                };
                let notice = AddressNotice {
                    added,
                    address,
                    netns,
                };
                let ev = self.event(ts_ns, task, EventBody::AddressNotice(Box::new(notice)));
                self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
            }
        }
    }

    /// Handles one live kernel record.
    pub fn on_kernel_record(&mut self, rec: KernelRecord, out: &mut Vec<Emitted>) {
        let h = rec.header();
        if h.cgroup_id != 0 {
            remember_of_pid(
                &mut self.cgroup_by_pid,
                (h.pid_tgid >> 32) as u32,
                h.cgroup_id,
            );
        }
        match rec {
            KernelRecord::GetaddrinfoEntry(h) => {
                let pid = (h.pid_tgid >> 32) as u32;
                let config = &mut self.resolver_config;
                if let Some(stale) = self.spans.open(pid, h.pid_tgid as u32, || {
                    config.as_mut().map(|c| c.gai_conf(pid))
                }) {
                    out.extend(stale);
                }
            }
            KernelRecord::GaiSocket(r) => {
                self.spans
                    .socket_op(r.header.pid_tgid as u32, decode_gai_socket(&r));
            }
            KernelRecord::GaiConf(r) => {
                let len = (r.len as usize).min(r.data.len());
                self.spans.gai_conf_read(
                    (r.header.pid_tgid >> 32) as u32,
                    &r.data[..len],
                    i64::from(r.ret),
                );
            }
            KernelRecord::Getaddrinfo(r) => {
                let task = task_of(r.header.pid_tgid, &r.header.comm);
                let call = decode_getaddrinfo(&r);
                let config = &mut self.resolver_config;
                let mut span = self.spans.close(task.pid, task.tid, call, || {
                    config.as_mut().map(|c| c.gai_conf(task.pid))
                });
                span.call.why = explain_span(&span).map(Box::new);
                span.call.during = span.events_inside() as u32;
                let (call, held) = (span.call, span.inside);
                let ev = Emitted::SpanBegin(Box::new(self.event(
                    r.header.ts_ns,
                    task,
                    EventBody::Getaddrinfo(Box::new(call)),
                )));
                let mut diagnoses = Vec::new();
                self.observe(&ev, &mut diagnoses);
                out.push(ev);
                out.extend(held);
                out.push(Emitted::SpanEnd);
                out.extend(diagnoses);
            }
            KernelRecord::NetlinkChunk(h, payload) => {
                // The kernel says which namespace the call ran in (a process may switch, as
                // `ip -n` does); this beats looking the process up later, when it may be gone.
                if h.header.netns != 0 {
                    let pid = (h.header.pid_tgid >> 32) as u32;
                    self.namespaces.remember(pid, u64::from(h.header.netns));
                }
                if let Some(frame) = self.chunks.push(&h, payload, &self.clock) {
                    self.on_frame(frame, out);
                }
            }
            // Frames only: no other record makes one.
            _ if !self.events_wanted => {}
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
                    task,
                    EventBody::Extack(ExtackMessage {
                        message: c_string(&r.msg).into(),
                    }),
                );
                self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
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
                        r.header.cgroup_id,
                    );
                }
                self.namespaces.netns_by_pid.remove(&pid);
                self.spans.exec(pid);
            }
            KernelRecord::KernelHandler(r) => {
                let task = task_of(r.header.pid_tgid, &r.header.comm);
                let call = decode_kernel_handler(&r, |protocol, bytes| {
                    self.decode_for(task.pid, None, protocol, bytes)
                });
                let ev = self.event(
                    r.header.ts_ns,
                    task,
                    EventBody::KernelHandler(Box::new(call)),
                );
                self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
            }
            KernelRecord::RouteFile(r) => {
                let task = task_of(r.header.pid_tgid, &r.header.comm);
                let read = decode_route_file(&r);
                let ev = self.event(
                    r.header.ts_ns,
                    task,
                    EventBody::RouteFileRead(Box::new(read)),
                );
                self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
            }
            // Go's own resolver: the sort's record carries its inputs and its result; the why is
            // explained from them (no span: the goroutine may have run on several threads).
            KernelRecord::GoSort(r) => {
                let (call, inputs) = decode_go_sort(&r);
                self.on_go_lookup(&r.header, call, inputs, out);
            }
            KernelRecord::GoHost(r) => {
                let (call, inputs) = decode_go_host(&r);
                self.on_go_lookup(&r.header, call, Some(inputs), out);
            }
            // The live source rescans that process's sockets; not a timeline event.
            KernelRecord::UnknownNetlinkSocket(_) => {}
            // Read before the records of the processes moved into it (the ring keeps order).
            // A path cut at the record's end is not a name: the kernel is asked by the id.
            KernelRecord::CgroupMkdir(r) => {
                let path = c_string(&r.path);
                if let Some(processes) = self
                    .processes
                    .as_mut()
                    .filter(|_| path.len() < nodeip_trace_common::CGROUP_PATH_LEN - 1)
                {
                    processes.cgroup_made(r.id, r.root, &path);
                }
            }
        }
    }

    /// A lookup of Go's own resolver (its sort, or a host lookup's unsorted answer), explained
    /// from the inputs its record carries (none: no sort ran, nothing to explain).
    fn on_go_lookup(
        &mut self,
        header: &nodeip_trace_common::EventHeader,
        call: GetaddrinfoCall,
        inputs: Option<SortInputs>,
        out: &mut Vec<Emitted>,
    ) {
        let task = task_of(header.pid_tgid, &header.comm);
        let mut span = ResolverSpan {
            call,
            inside: Vec::new(),
            socket_ops: Vec::new(),
            gai_conf: Default::default(),
            sort_inputs: inputs,
        };
        if span.sort_inputs.is_some() {
            span.call.why = explain_span(&span).map(Box::new);
        }
        let ev = self.event(
            header.ts_ns,
            task,
            EventBody::Getaddrinfo(Box::new(span.call)),
        );
        self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
    }

    /// A route lookup, on its thread's timeline.
    fn on_route_lookup(
        &mut self,
        header: &nodeip_trace_common::EventHeader,
        lookup: crate::model::event::RouteLookup,
        out: &mut Vec<Emitted>,
    ) {
        let task = task_of(header.pid_tgid, &header.comm);
        let ev = self.event(header.ts_ns, task, EventBody::RouteLookup(Box::new(lookup)));
        self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
    }

    /// Handles one whole netlink buffer (live after reassembly, or read from a capture): its
    /// frame, and its event with the messages decoded, unless only frames are made
    /// ([`Pipeline::make_frames_only`]).
    pub fn on_frame(&mut self, mut frame: NetlinkFrame, out: &mut Vec<Emitted>) {
        if !self.events_wanted {
            redact_ipsec_keys(&mut frame);
            out.push(Emitted::Frame(frame));
            return;
        }
        let decoded = self.decode_frame(&frame);
        redact_ipsec_keys(&mut frame);
        let task = frame.task.clone().unwrap_or_default();
        let direction = frame.direction.unwrap_or(Direction::Send);
        let bytes = frame.total_len.max(frame.bytes.len() as u32);
        let messages: Vec<Arc<NetlinkMessage>> =
            decoded.messages.into_iter().map(Arc::new).collect();
        let pairing = self.conversations.on_buffer(BufferRef {
            task: &task,
            direction,
            protocol: frame.protocol,
            ts_ns: frame.ts_ns,
            bytes,
            messages: &messages,
        });
        let body = EventBody::Netlink(NetlinkEvent {
            direction,
            protocol: protocol_name(frame.protocol),
            protocol_id: frame.protocol,
            portid: pairing.portid,
            bytes,
            captured: frame.bytes.len() as u32,
            truncated: frame.truncated(),
            messages,
            decode_errors: decoded.errors.iter().map(|e| e.to_string()).collect(),
            paired: pairing.paired,
        });
        let tid = task.tid;
        let ev = self.event(frame.ts_ns, task, body);
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
        let ipvs_task = ipvs.is_some().then(|| task.clone());
        let ev = self.event(ts_ns, task, EventBody::Conversation(Box::new(conversation)));
        self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
        if let (Some(ipvs), Some(task)) = (ipvs, ipvs_task) {
            let ev = self.event(ts_ns, task, EventBody::Ipvs(Box::new(ipvs)));
            self.emit(ev.tid, Emitted::Event(Box::new(ev)), out);
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
        out.extend(self.spans.drain());
        for d in self.diagnoser.finish() {
            out.push(Emitted::Event(Box::new(d)));
        }
    }
}

/// IPsec keys never reach a sink, not even a pcap file of raw bytes: an XFRM buffer's keys are
/// blanked (after it was decoded, when it is).
fn redact_ipsec_keys(frame: &mut NetlinkFrame) {
    if frame.protocol == crate::decode::netlink::NETLINK_XFRM {
        crate::decode::netlink::redact_xfrm(&mut frame.bytes);
    }
}

#[cfg(test)]
mod tests;
