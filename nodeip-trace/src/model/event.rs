//! The one event type that flows from sources through decode, correlate and explain to sinks.
//!
//! Serialized as one JSON object per line: every line has `kind`, `ts` (RFC 3339 wall clock),
//! `ts_ns` (raw kernel CLOCK_MONOTONIC, or wall-clock ns for offline sources), `pid`, `tid`, `comm`,
//! then the kind's own fields. The schema is documented in `docs/events.md`; bump
//! [`SCHEMA_VERSION`] on any incompatible change.
use std::sync::Arc;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use super::clock::Timestamp;
use super::facts::ConversationFacts;
use super::getaddrinfo::GetaddrinfoCall;
use super::process::ProcessAttribution;
use crate::model::frame::Direction;
use crate::model::netlink::{IpvsCommand, Name, NetlinkMessage};

/// Version of the JSON-lines schema this nodeip-trace writes (see docs/events.md). 2 added the
/// getaddrinfo-like events of other resolvers (`resolver`: `musl`, `go`, `go_hosts`, `unknown`;
/// `caller`: `go-cgo`; `limited`).
pub const SCHEMA_VERSION: u32 = 2;

/// The oldest schema this nodeip-trace reads: each version since only added fields and values.
pub const OLDEST_READABLE_SCHEMA: u32 = 1;

/// One timeline event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// RFC 3339 wall-clock time.
    pub ts: Timestamp,
    /// Raw timestamp in nanoseconds (kernel monotonic when live).
    pub ts_ns: u64,
    /// Thread-group id; 0 for events not made by a process (headers, summaries).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Process name.
    pub comm: CompactString,
    /// Who the process is (executable, ancestors, cgroup, systemd unit or container and pod),
    /// captured when the event happened; live tracing only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Arc<ProcessAttribution>>,
    /// The kind-specific part; its `kind` tag names it.
    #[serde(flatten)]
    pub body: EventBody,
}

impl Event {
    /// The process that made the event as people read it: `comm[pid]`, or, for a capture
    /// without attribution (pid 0, no name), "a process (capture without attribution)".
    pub fn who(&self) -> String {
        if self.pid == 0 && self.comm.is_empty() {
            "a process (capture without attribution)".into()
        } else {
            format!("{}[{}]", self.comm, self.pid)
        }
    }
}

/// Kind-specific event contents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventBody {
    /// First line of a recording.
    Header(Box<RecordingHeader>),
    /// A getaddrinfo call and its result list.
    Getaddrinfo(Box<GetaddrinfoCall>),
    /// One netlink send or receive buffer, decoded.
    Netlink(NetlinkEvent),
    /// A netlink request paired with its replies (one per request).
    Conversation(Box<NetlinkConversation>),
    /// A kernel route lookup (fib/fib6 tracepoints).
    RouteLookup(Box<RouteLookup>),
    /// An IPVS command seen on generic netlink.
    Ipvs(Box<IpvsEvent>),
    /// A netlink extended-ack error string from the kernel.
    Extack(ExtackMessage),
    /// A kernel netlink handler call (fentry/fexit or kprobe/kretprobe).
    KernelHandler(Box<KernelHandlerCall>),
    /// The kernel listed default routes to a reader of `/proc/net/route` or
    /// `/proc/net/ipv6_route` (fentry/fexit or kprobe/kretprobe of the files' show functions).
    RouteFileRead(Box<RouteFileRead>),
    /// The kernel announced an address change in the tracer's network namespace (live only):
    /// whoever made it, a process or the kernel itself.
    AddressNotice(Box<AddressNotice>),
    /// A program the tracer held at exec until its probes were attached (live only).
    ExecHold(Box<ExecHoldEvent>),
    /// Events the tracer could not deliver, by reason.
    Lost(LostReport),
    /// A known failure pattern, with evidence and remedy.
    Diagnosis(Diagnosis),
    /// Last line of a recording.
    Summary(RunSummary),
}

/// First line of a JSON-lines recording.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordingHeader {
    /// Schema version ([`SCHEMA_VERSION`]).
    pub schema: u32,
    /// nodeip-trace version.
    pub tool_version: String,
    /// `uname -r` of the traced kernel (empty offline).
    pub kernel: String,
    /// Host name.
    pub host: String,
    /// Hook chosen per probe, e.g. `getaddrinfo: uprobe`.
    pub hooks: Vec<String>,
    /// `trace --hooks` as asked (`auto`, `fentry`, `kprobe`, `tracepoint`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook_preference: String,
    /// How netlink traffic was captured: `socket layer (fentry)`, `socket layer (kprobe)`, or
    /// `syscall tracepoints…` with the reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub netlink_capture: String,
    /// How programs that start during the trace are caught before their first instruction
    /// (`fanotify permission events, at most 3000 ms`), or why they are not (`off (…)`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exec_hold: String,
    /// The mode each kernel handler got (`fentry`, `kprobe`, `off`), by function.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub handler_hooks: std::collections::BTreeMap<String, String>,
    /// What this kernel cannot do and what that costs (no BTF, no uprobes, BPF helpers older
    /// kernels lack), one line each, as said at start; absent when nothing is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_limits: Vec<String>,
    /// The capabilities the running tracer keeps once started (docs/security.md); absent
    /// offline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities_kept: Vec<String>,
    /// Filters in effect, as given on the command line.
    pub filters: Vec<String>,
    /// Offset `wall - monotonic` in ns, so `ts_ns` values can be converted later.
    pub clock_offset_ns: i64,
}

/// One netlink send/receive buffer, decoded.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetlinkEvent {
    /// `send` (process → kernel) or `recv`.
    pub direction: Direction,
    /// Netlink protocol name (`NETLINK_ROUTE`, `NETLINK_GENERIC`, ...).
    pub protocol: Name,
    /// Netlink protocol number.
    pub protocol_id: u16,
    /// The socket's port id, when known (the `pid` in the messages the kernel sends to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub portid: Option<u32>,
    /// Bytes the syscall moved.
    pub bytes: u32,
    /// Bytes captured (less than `bytes` when `truncated`).
    pub captured: u32,
    /// The capture was cut; the messages are those that fit.
    pub truncated: bool,
    /// Decoded messages, in order. Shared: a request is also its conversation's `request`
    /// (copying it there was 2.8% of the live consumer's CPU per event).
    pub messages: Vec<Arc<NetlinkMessage>>,
    /// Decode problems (unknown or malformed parts), never fatal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decode_errors: Vec<String>,
    /// Every message here belongs to a request/reply pair summarised by a `conversation` event.
    #[serde(default)]
    pub paired: bool,
}

/// A netlink request and everything the kernel answered to it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetlinkConversation {
    /// Netlink protocol name.
    pub protocol: Name,
    /// Netlink protocol number.
    pub protocol_id: u16,
    /// The requesting socket's port id (from the replies), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub portid: Option<u32>,
    /// The request's `nlmsg_seq`.
    pub seq: u32,
    /// The request asked for a dump.
    pub dump: bool,
    /// The request, decoded (the same message as in the `netlink` event that sent it).
    pub request: Arc<NetlinkMessage>,
    /// Reply messages, not counting `NLMSG_DONE` and ACK/error messages.
    pub replies: u32,
    /// Reply messages by type name.
    pub reply_types: std::collections::BTreeMap<Name, u32>,
    /// Receive buffers the replies came in.
    pub reply_buffers: u32,
    /// Bytes of those buffers.
    pub reply_bytes: u64,
    /// How the conversation ended.
    pub outcome: ConversationOutcome,
    /// The kernel's error, when it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ConversationError>,
    /// From the request to the last reply.
    pub duration_ns: u64,
    /// What the answer says, summarised.
    pub facts: ConversationFacts,
}

/// How a netlink conversation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConversationOutcome {
    /// A dump ended with `NLMSG_DONE`.
    Done,
    /// The kernel acknowledged (`NLMSG_ERROR` 0).
    Ack,
    /// The kernel refused (`NLMSG_ERROR` or `NLMSG_DONE` with an errno).
    Error,
    /// A request answered by its one reply.
    Reply,
    /// Replies came but not the last one (the trace ended, or the process stopped reading).
    Incomplete,
    /// No reply was seen.
    NoReply,
}

/// A refused netlink request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversationError {
    /// Negative errno as the kernel sent it.
    pub code: i32,
    /// Errno name (`ENOENT`).
    pub errno: Name,
    /// `strerror` text.
    pub text: Name,
    /// Extended-ack message, when the kernel gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extack: Option<String>,
}

/// A kernel FIB lookup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteLookup {
    /// `inet` or `inet6`.
    pub family: Name,
    /// Destination looked up.
    pub dst: CompactString,
    /// Source in the flow key (`0.0.0.0`/`::` when the kernel was asked to choose one).
    pub src: CompactString,
    /// Table id name (`local`, `main`, or the number).
    pub table: Name,
    /// Route type when the tracepoint reports it (IPv6), else null.
    #[serde(rename = "type")]
    pub route_type: Option<Name>,
    /// Output interface name chosen (`dev`), or empty.
    pub oif: CompactString,
    /// Gateway, when any.
    pub gateway: Option<CompactString>,
    /// 0 on success, else -errno (`-11` = not in this table, the lookup goes on).
    pub err: i32,
}

/// An IPVS command (service/destination change or query).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IpvsEvent {
    /// The decoded command.
    #[serde(flatten)]
    pub command: IpvsCommand,
    /// The kernel's answer: 0, or -errno when it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<i32>,
}

/// A program that started during the trace, held at exec (before its first instruction) until
/// the tracer had classified its file and attached its probes — or let go at the hold's limit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecHoldEvent {
    /// The file being exec'd (the program, or the dynamic loader it names), as the tracer
    /// reached it.
    pub file: String,
    /// How long the exec waited, in microseconds.
    pub held_us: u64,
    /// Let go once probed; `false`: let go at the limit, before its probes were attached (its
    /// first lookups may be missed).
    pub in_time: bool,
    /// What was probed for it (`Go resolver (go1.27.3)`, `musl getaddrinfo /lib/ld-musl…`);
    /// empty when it carries no resolver of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probed: Vec<String>,
    /// Resolvers found that could not be probed, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// A netlink extended-ack message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtackMessage {
    /// The message text.
    pub message: String,
}

/// A kernel netlink handler call: what the kernel itself was asked and answered, in which
/// network namespace, whoever's buffers the syscall capture saw or missed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelHandlerCall {
    /// Kernel function (`inet_rtm_getroute`, `inet_dump_ifaddr`, `ip_vs_genl_set_cmd`, ...).
    pub function: String,
    /// `fentry` or `kprobe`.
    pub hook: String,
    /// Network namespace the kernel answered in (the requesting socket's), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_netns: Option<u32>,
    /// The function's return value: 0 or -errno for a request; for a dump round, the bytes in
    /// the reply buffer so far (0 = the dump is complete), or -EMSGSIZE on Linux 6.9+ for a
    /// round that filled its buffer (the netlink core turns it into the bytes).
    pub result: i64,
    /// Errno name when `result` is negative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// The request message as the handler got it, decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Box<NetlinkMessage>>,
    /// The request's `nlmsg_len`.
    pub request_len: u32,
    /// Only the first bytes of the request were copied.
    #[serde(default)]
    pub request_cut: bool,
    /// From entry to return.
    pub duration_ns: u64,
    /// What could not be read or decoded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decode_errors: Vec<String>,
}

/// Default routes the kernel listed to a reader of a route file: one show call's lines, those of
/// one prefix (`/proc/net/route`: every route to 0.0.0.0, whatever its length, as kubelet reads
/// them) or one route (`/proc/net/ipv6_route`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouteFileRead {
    /// `/proc/net/route` or `/proc/net/ipv6_route`.
    pub file: String,
    /// `fentry` or `kprobe`.
    pub hook: String,
    /// The file's network namespace (the reader's own, or another's through `/proc/PID/net`),
    /// when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_netns: Option<u32>,
    /// The routes listed, in the file's order.
    pub routes: Vec<ListedRoute>,
    /// The call wrote more than was copied: routes after these are missing.
    #[serde(default)]
    pub cut: bool,
    /// Lines that could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decode_errors: Vec<String>,
}

/// An `RTM_NEWADDR`/`RTM_DELADDR` notice of the kernel's (address groups).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressNotice {
    /// Added or changed (`RTM_NEWADDR`), else removed.
    pub added: bool,
    /// The address as the notice gives it, its flags (`tentative`, `temporary`, `deprecated`,
    /// `dynamic`, …) included.
    pub address: crate::model::facts::AddressFact,
    /// The network namespace (the tracer's own).
    pub netns: u64,
}

/// One line of a route file, read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedRoute {
    /// `0.0.0.0/0`, `::/0` (or `0.0.0.0/8`: the file lists every route to 0.0.0.0).
    pub destination: String,
    /// The gateway; absent for a route without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// The device as the file names it (`*` for none: a blackhole or unreachable route).
    pub dev: String,
    /// The route's metric (priority).
    pub metric: u32,
    /// `RTF_UP` is set.
    pub up: bool,
}

/// Counts of what was not delivered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostReport {
    /// Reason → count (only non-zero reasons).
    pub counts: std::collections::BTreeMap<String, u64>,
    /// Sum of the event-loss reasons (records dropped, calls missed).
    pub lost: u64,
}

/// Which known failure pattern a diagnosis names: its stable id (`gai-reordered` in JSON and on
/// screen), defined once for both engines (the live diagnoses and the node audit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiagnosisId {
    /// Resolvers (glibc, musl, Go's own) put different addresses first for one name.
    ResolversDisagree,
    /// A resolver's sort moved an address ahead of the one listed first.
    GaiReordered,
    /// A route lookup for a reachability target answered `local`, `dev lo`.
    RouteGetResolvesToLo,
    /// A network or broadcast address (or one assigned nowhere) was used as an address.
    NetworkAddressUsed,
    /// A secondary address was skipped where the primary was taken.
    SecondaryAddressSkipped,
    /// The components' own rules pick different node addresses.
    ComponentsDisagree,
    /// A lookup's first address is one another process added to an interface earlier in the
    /// trace (a VIP that came up before the component looked its name up).
    AddedAddressPicked,
    /// What a node-IP picker (kubelet, calico-node, flannel, kube-vip, kube-proxy) takes,
    /// its rule replayed on the answers it received (information, not a failure).
    NodeIpPicked,
    /// kube-vip announces its VIP on another interface than the one holding its subnet.
    VipOffSubnetInterface,
}

impl DiagnosisId {
    /// The stable id: `gai-reordered`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            DiagnosisId::ResolversDisagree => "resolvers-disagree",
            DiagnosisId::GaiReordered => "gai-reordered",
            DiagnosisId::RouteGetResolvesToLo => "route-get-resolves-to-lo",
            DiagnosisId::NetworkAddressUsed => "network-address-used",
            DiagnosisId::SecondaryAddressSkipped => "secondary-address-skipped",
            DiagnosisId::ComponentsDisagree => "components-disagree",
            DiagnosisId::AddedAddressPicked => "added-address-picked",
            DiagnosisId::NodeIpPicked => "node-ip-picked",
            DiagnosisId::VipOffSubnetInterface => "vip-off-subnet-interface",
        }
    }
}

impl std::fmt::Display for DiagnosisId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a diagnosis is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Likely to pick a wrong address.
    Warning,
    /// Picks or uses an address that cannot be right.
    Error,
}

impl Severity {
    /// `info`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }

    /// `INFO`, `WARNING` or `ERROR`, for headlines.
    pub fn upper(self) -> &'static str {
        match self {
            Severity::Info => "INFO",
            Severity::Warning => "WARNING",
            Severity::Error => "ERROR",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A diagnosed failure pattern.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// Which pattern.
    pub id: DiagnosisId,
    /// How bad.
    pub severity: Severity,
    /// One sentence.
    pub summary: String,
    /// What it rests on: references to events (`ts_ns` + kind) and facts.
    pub evidence: Vec<String>,
    /// What to do.
    pub remedy: String,
}

impl Diagnosis {
    /// Its one line for people: `[WARNING] gai-reordered — summary`.
    pub fn headline(&self) -> String {
        format!("[{}] {} — {}", self.severity.upper(), self.id, self.summary)
    }
}

/// Last line of a recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Events written, by kind.
    pub events: std::collections::BTreeMap<String, u64>,
    /// Total lost (see the `lost` events for reasons).
    pub lost: u64,
    /// What ended the trace: `duration`, `command exited (N)`, `SIGINT`, `SIGTERM`, `SIGHUP`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stopped_by: String,
    /// Programs held at exec until probed, and of them those let go at the limit unprobed
    /// (absent when no program was held, or holding was not in use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_holds: Option<ExecHoldCounts>,
}

/// How many programs a trace held at exec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecHoldCounts {
    /// Held until classified and probed.
    pub held: u64,
    /// Of them, let go at the limit before their probes were attached.
    pub released_unprobed: u64,
    /// Of them, let go in time but unprobed: attaching their probes failed (their lookups are
    /// not seen; said on stderr with the reason).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub probes_failed: u64,
}

/// For `skip_serializing_if`: counts of zero are left out.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl EventBody {
    /// The `kind` tag of this body.
    pub fn kind(&self) -> &'static str {
        match self {
            EventBody::Header(_) => "header",
            EventBody::Getaddrinfo(_) => "getaddrinfo",
            EventBody::Netlink(_) => "netlink",
            EventBody::Conversation(_) => "conversation",
            EventBody::RouteLookup(_) => "route_lookup",
            EventBody::Ipvs(_) => "ipvs",
            EventBody::Extack(_) => "extack",
            EventBody::KernelHandler(_) => "kernel_handler",
            EventBody::RouteFileRead(_) => "route_file_read",
            EventBody::AddressNotice(_) => "address_notice",
            EventBody::ExecHold(_) => "exec_hold",
            EventBody::Lost(_) => "lost",
            EventBody::Diagnosis(_) => "diagnosis",
            EventBody::Summary(_) => "summary",
        }
    }
}
