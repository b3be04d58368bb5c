//! JSON lines: one [`crate::model::event::Event`] per line, the schema in docs/events.md.
use std::io::Write;
use std::sync::Arc;

use super::{EventSink, SinkError};
use crate::model::event::{Event, EventBody, NetlinkConversation, NetlinkEvent};
use crate::model::frame::Direction;
use crate::model::netlink::{Name, NetlinkMessage};
use crate::model::process::ProcessAttribution;

mod by_hand;
pub mod compact;

/// Values whose JSON is kept, per cache: a node's busy deciders (processes), and the requests of
/// the last paired `netlink` events (their conversations follow within a few events); beyond,
/// the oldest goes.
const JSON_KEPT: usize = 16;

/// The JSON of values shared by `Arc` and written again and again, made once, then copied.
///
/// - An event's `process` is the same `Arc` for every event of that process (the process table
///   makes one per pid and cgroup). Its JSON — executable, four ancestors, cgroup — was a fifth
///   of a live line's strings, 7% of the consumer's CPU under a JSON burst.
/// - A paired request is written twice: in the `netlink` event that sent it, and as its
///   `conversation`'s `request` (the same `Arc`): a third of a route get's message JSON.
struct JsonByArc<T> {
    kept: Vec<(Arc<T>, Vec<u8>)>,
    /// The entry replaced next when all are taken.
    next: usize,
}

impl<T> Default for JsonByArc<T> {
    fn default() -> Self {
        Self {
            kept: Vec::new(),
            next: 0,
        }
    }
}

impl<T> JsonByArc<T> {
    /// `value` as JSON, as `write` writes it.
    fn of(
        &mut self,
        value: &Arc<T>,
        write: fn(&T, &mut Vec<u8>) -> Result<(), compact::JsonError>,
    ) -> Result<&[u8], compact::JsonError> {
        let at = match self.kept.iter().position(|(v, _)| Arc::ptr_eq(v, value)) {
            Some(at) => at,
            None => {
                // A replaced entry's buffer is reused: grown from empty, each new one was
                // reallocated five or six times on the way to a message's few hundred bytes.
                let at = if self.kept.len() < JSON_KEPT {
                    self.kept.push((value.clone(), Vec::with_capacity(512)));
                    self.kept.len() - 1
                } else {
                    let at = self.next;
                    self.next = (at + 1) % JSON_KEPT;
                    self.kept[at].0 = value.clone();
                    self.kept[at].1.clear();
                    at
                };
                let json = &mut self.kept[at].1;
                if let Err(e) = write(value, json) {
                    // Nothing half-written stays kept under this value.
                    self.kept.swap_remove(at);
                    self.next = 0;
                    return Err(e);
                }
                at
            }
        };
        Ok(&self.kept[at].1)
    }
}

/// What [`append_event`] keeps between events.
#[derive(Default)]
struct SharedJson {
    processes: JsonByArc<ProcessAttribution>,
    requests: JsonByArc<NetlinkMessage>,
}

/// Appends `,"key":` and `value` (`key` is a field name: nothing in it needs escaping).
fn append_member<T: serde::Serialize + ?Sized>(
    out: &mut Vec<u8>,
    key: &'static str,
    value: &T,
) -> Result<(), compact::JsonError> {
    compact::append_member_key(out, key);
    compact::append_json(value, out)
}

/// `protocol`, `protocol_id` and (when known) `portid`, members of both `netlink` and
/// `conversation` bodies.
fn append_socket_members(
    out: &mut Vec<u8>,
    protocol: &Name,
    protocol_id: u16,
    portid: Option<u32>,
) -> Result<(), compact::JsonError> {
    append_member(out, "protocol", protocol)?;
    append_member(out, "protocol_id", &protocol_id)?;
    if portid.is_some() {
        append_member(out, "portid", &portid)?;
    }
    Ok(())
}

/// The members of a `netlink` body, as its derived `Serialize` writes them (after `kind`);
/// the messages of a paired send (requests, written again by their conversation) from
/// `requests`.
fn append_netlink_members(
    n: &NetlinkEvent,
    requests: &mut JsonByArc<NetlinkMessage>,
    out: &mut Vec<u8>,
) -> Result<(), compact::JsonError> {
    append_member(out, "direction", &n.direction)?;
    append_socket_members(out, &n.protocol, n.protocol_id, n.portid)?;
    append_member(out, "bytes", &n.bytes)?;
    append_member(out, "captured", &n.captured)?;
    append_member(out, "truncated", &n.truncated)?;
    out.extend_from_slice(b",\"messages\":[");
    let shared = n.paired && n.direction == Direction::Send;
    for (i, message) in n.messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if shared {
            out.extend_from_slice(requests.of(message, by_hand::append_message)?);
        } else {
            by_hand::append_message(message, out)?;
        }
    }
    out.push(b']');
    if !n.decode_errors.is_empty() {
        append_member(out, "decode_errors", &n.decode_errors)?;
    }
    append_member(out, "paired", &n.paired)
}

/// The members of a `conversation` body, as its derived `Serialize` writes them (after
/// `kind`), the request from `requests` (written there by its `netlink` event).
fn append_conversation_members(
    c: &NetlinkConversation,
    requests: &mut JsonByArc<NetlinkMessage>,
    out: &mut Vec<u8>,
) -> Result<(), compact::JsonError> {
    append_socket_members(out, &c.protocol, c.protocol_id, c.portid)?;
    append_member(out, "seq", &c.seq)?;
    append_member(out, "dump", &c.dump)?;
    out.extend_from_slice(b",\"request\":");
    out.extend_from_slice(requests.of(&c.request, by_hand::append_message)?);
    append_member(out, "replies", &c.replies)?;
    append_member(out, "reply_types", &c.reply_types)?;
    append_member(out, "reply_buffers", &c.reply_buffers)?;
    append_member(out, "reply_bytes", &c.reply_bytes)?;
    append_member(out, "outcome", &c.outcome)?;
    if c.error.is_some() {
        append_member(out, "error", &c.error)?;
    }
    append_member(out, "duration_ns", &c.duration_ns)?;
    compact::append_member_key(out, "facts");
    by_hand::append_facts(&c.facts, out)
}

/// Appends `event` as one JSON object: what `serde_json` writes for it (its derived
/// `Serialize`: the common fields in their order, `process` when present, then the body's own
/// fields, flattened), with the process part, and the requests of netlink events and their
/// conversations, from `shared`; route messages, route lookups and route facts by hand.
fn append_event(
    event: &Event,
    shared: &mut SharedJson,
    out: &mut Vec<u8>,
) -> Result<(), compact::JsonError> {
    out.extend_from_slice(b"{\"ts\":");
    compact::append_json(event.ts.as_str(), out)?;
    append_member(out, "ts_ns", &event.ts_ns)?;
    append_member(out, "pid", &event.pid)?;
    append_member(out, "tid", &event.tid)?;
    append_member(out, "comm", event.comm.as_str())?;
    if let Some(process) = &event.process {
        out.extend_from_slice(b",\"process\":");
        out.extend_from_slice(shared.processes.of(process, compact::append_json)?);
    }
    match &event.body {
        EventBody::Netlink(n) => {
            append_member(out, "kind", event.body.kind())?;
            append_netlink_members(n, &mut shared.requests, out)?;
        }
        EventBody::Conversation(c) => {
            append_member(out, "kind", event.body.kind())?;
            append_conversation_members(c, &mut shared.requests, out)?;
        }
        EventBody::RouteLookup(r) => {
            append_member(out, "kind", event.body.kind())?;
            by_hand::append_route_lookup_members(r, out);
        }
        body => {
            // The body alone is an object whose first member is its `kind` tag (never empty):
            // its members go on the event's, as `#[serde(flatten)]` puts them.
            let at = out.len();
            compact::append_json(body, out)?;
            debug_assert_eq!(out.get(at..at + 2), Some(&b"{\""[..]));
            out[at] = b',';
            return Ok(());
        }
    }
    out.push(b'}');
    Ok(())
}

/// Writes events as JSON lines.
pub struct JsonLinesSink<W: Write> {
    out: W,
    name: String,
    flush_each: bool,
    /// Lines made and not yet written, then the line being made (kept: its capacity is reused).
    lines: Vec<u8>,
    /// Pending bytes at which `lines` is written out (0: each line as it is made).
    write_size: usize,
    shared: SharedJson,
}

impl<W: Write> JsonLinesSink<W> {
    /// A sink writing to `out`; `name` appears in error messages; `flush_each` flushes per line
    /// (for terminals and pipes).
    pub fn new(out: W, name: impl Into<String>, flush_each: bool) -> Self {
        Self {
            out,
            name: name.into(),
            flush_each,
            lines: Vec::new(),
            write_size: 0,
            shared: SharedJson::default(),
        }
    }

    /// Collects lines until `bytes` of them are pending, then writes them in one call (and on
    /// every flush), so a file needs no `BufWriter` in front of it: one would copy each line
    /// into its own buffer first (a 100,000 route-get burst writes 300 MB of JSON). Lines still
    /// pending when the sink is dropped are written then.
    pub fn with_write_size(mut self, bytes: usize) -> Self {
        self.write_size = bytes;
        self
    }

    /// Writes one event.
    pub fn write_event(&mut self, event: &Event) -> Result<(), SinkError> {
        let start = self.lines.len();
        if let Err(e) = append_event(event, &mut self.shared, &mut self.lines) {
            // Nothing of a line that failed stays.
            self.lines.truncate(start);
            return Err(e.into());
        }
        self.lines.push(b'\n');
        if self.flush_each {
            return self.flush_lines();
        }
        if self.lines.len() >= self.write_size {
            self.write_lines()?;
        }
        Ok(())
    }

    /// Writes the pending lines.
    fn write_lines(&mut self) -> Result<(), SinkError> {
        let written = self.out.write_all(&self.lines);
        self.lines.clear();
        written.map_err(|source| SinkError::Io {
            what: self.name.clone(),
            source,
        })
    }

    /// Writes the pending lines and flushes the writer.
    fn flush_lines(&mut self) -> Result<(), SinkError> {
        self.write_lines()?;
        self.out.flush().map_err(|source| SinkError::Io {
            what: self.name.clone(),
            source,
        })
    }
}

impl<W: Write> Drop for JsonLinesSink<W> {
    /// Writes what is pending, as a `BufWriter` does when dropped (errors cannot be reported).
    fn drop(&mut self) {
        if !self.lines.is_empty() {
            let _ = self.out.write_all(&self.lines);
        }
    }
}

impl<W: Write> EventSink for JsonLinesSink<W> {
    fn flush(&mut self) -> Result<(), SinkError> {
        self.flush_lines()
    }

    fn event(&mut self, event: &Event) -> Result<(), SinkError> {
        self.write_event(event)
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.flush_lines()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::getaddrinfo::{AddrinfoResult, GetaddrinfoCall};

    /// The exact JSON line of a getaddrinfo event (the schema users parse).
    #[test]
    fn getaddrinfo_line_is_stable() {
        let call = GetaddrinfoCall {
            node: Some("node-a".into()),
            service: None,
            family: "AF_INET".into(),
            socktype: "ANY".into(),
            flags: vec!["AI_ADDRCONFIG".into()],
            ret: "OK".into(),
            ret_code: 0,
            addresses: vec!["172.18.45.20".into(), "172.18.45.6".into()],
            results: vec![AddrinfoResult {
                address: "172.18.45.20".into(),
                family: "AF_INET".into(),
                socktype: "SOCK_STREAM".into(),
                protocol: 6,
                port: 0,
            }],
            results_truncated: false,
            start_ns: 100,
            duration_ns: 50,
            during: 3,
            resolver: Default::default(),
            caller: None,
            limited: None,
            why: None,
        };
        let event = Event {
            ts: "2026-11-21T13:27:05.500000000Z".into(),
            ts_ns: 150,
            pid: 7,
            tid: 8,
            comm: "getent".into(),
            process: None,
            body: EventBody::Getaddrinfo(Box::new(call)),
        };
        let mut out = Vec::new();
        JsonLinesSink::new(&mut out, "memory", false)
            .write_event(&event)
            .unwrap();
        let golden = r#"{"ts":"2026-11-21T13:27:05.500000000Z","ts_ns":150,"pid":7,"tid":8,"comm":"getent","kind":"getaddrinfo","node":"node-a","service":null,"family":"AF_INET","socktype":"ANY","flags":["AI_ADDRCONFIG"],"ret":"OK","ret_code":0,"addresses":["172.18.45.20","172.18.45.6"],"results":[{"address":"172.18.45.20","family":"AF_INET","socktype":"SOCK_STREAM","protocol":6,"port":0}],"results_truncated":false,"start_ns":100,"duration_ns":50,"during":3}
"#;
        assert_eq!(String::from_utf8(out).unwrap(), golden);
        // And it reads back as the same event (replay depends on it).
        let back: Event = serde_json::from_str(golden.trim()).unwrap();
        assert_eq!(back, event);
    }

    /// Netlink events, their conversations (route facts among them) and route lookups are
    /// written as serde_json writes them, whether a request's JSON is kept from its `netlink`
    /// event, replaced by newer ones, or never was; with and without the optional members.
    #[test]
    fn netlink_events_and_conversations_are_written_as_serde_json_writes_them() {
        use crate::model::event::{ConversationError, ConversationOutcome, RouteLookup};
        use crate::model::facts::{ConversationFacts, RouteFact};
        use crate::model::netlink::{MessageBody, MessageHeader, RouteBody};
        let message = |seq: u32, type_name: &'static str| {
            Arc::new(NetlinkMessage {
                header: MessageHeader {
                    type_name: type_name.into(),
                    type_id: 26,
                    flags: vec!["REQUEST".into()],
                    flags_raw: 1,
                    seq,
                    pid: 0,
                    len: 36,
                },
                body: MessageBody::Route(Box::new(RouteBody {
                    family: "inet".into(),
                    dst: Some(compact_str::format_compact!(
                        "10.0.{}.{}",
                        seq / 250,
                        seq % 250
                    )),
                    ..RouteBody::default()
                })),
                error: (seq % 7 == 3).then(|| "cut \"short\"".to_string()),
            })
        };
        let event = |seq: u32, body: EventBody| Event {
            ts: "2026-11-27T10:00:00.000000001Z".into(),
            ts_ns: u64::from(seq),
            pid: 9,
            tid: 9,
            comm: "ip".into(),
            process: None,
            body,
        };
        let netlink = |direction, messages: Vec<Arc<NetlinkMessage>>, seq: u32| NetlinkEvent {
            direction,
            protocol: "NETLINK_ROUTE".into(),
            protocol_id: 0,
            portid: seq.is_multiple_of(2).then_some(seq),
            bytes: 36,
            captured: 36,
            truncated: seq % 5 == 1,
            messages,
            decode_errors: if seq.is_multiple_of(3) {
                vec!["message 1: bad".into()]
            } else {
                Vec::new()
            },
            paired: seq % 4 != 2,
        };
        let mut events = Vec::new();
        let mut pending = Vec::new();
        for seq in 0..(JSON_KEPT as u32 * 3) {
            let request = message(seq, "RTM_GETROUTE");
            let send = netlink(Direction::Send, vec![request.clone()], seq);
            let reply = netlink(Direction::Recv, vec![message(seq, "RTM_NEWROUTE")], seq);
            events.push(event(seq, EventBody::Netlink(send)));
            events.push(event(seq, EventBody::Netlink(reply)));
            pending.push(NetlinkConversation {
                protocol: "NETLINK_ROUTE".into(),
                protocol_id: 0,
                portid: (seq % 3 == 0).then_some(77),
                seq,
                dump: seq % 2 == 1,
                request,
                replies: 1,
                reply_types: [("RTM_NEWROUTE".into(), 1)].into(),
                reply_buffers: 1,
                reply_bytes: 104,
                outcome: ConversationOutcome::Reply,
                error: (seq % 4 == 1).then(|| ConversationError {
                    code: -19,
                    errno: "ENODEV".into(),
                    text: "No such device".into(),
                    extack: None,
                }),
                duration_ns: 5,
                // Route facts (written by hand), none, or of another kind (derived).
                facts: match seq % 3 {
                    0 => ConversationFacts {
                        routes: vec![RouteFact {
                            table: "main".into(),
                            route_type: "unicast".into(),
                            dst: compact_str::format_compact!("10.0.0.{seq}/32"),
                            dev: (seq % 2 == 0).then(|| "veth0".into()),
                            src: Some("10.0.0.1".into()),
                            gateway: None,
                        }],
                        ..Default::default()
                    },
                    1 => Default::default(),
                    _ => ConversationFacts {
                        omitted: seq,
                        ..Default::default()
                    },
                },
            });
            // The route lookup of the request (written by hand).
            events.push(event(
                seq,
                EventBody::RouteLookup(Box::new(RouteLookup {
                    family: "inet".into(),
                    dst: compact_str::format_compact!("10.0.0.{seq}"),
                    src: "0.0.0.0".into(),
                    table: "main".into(),
                    route_type: (seq % 2 == 1).then(|| "unicast".into()),
                    oif: "veth0".into(),
                    gateway: (seq % 3 == 2).then(|| "10.0.0.254".into()),
                    err: -(seq as i32 % 2) * 11,
                })),
            ));
            // Conversations come right after their reply, or many events later (their
            // request's JSON replaced by newer ones).
            if seq % 8 != 7 {
                let c = pending.pop().unwrap();
                events.push(event(seq, EventBody::Conversation(Box::new(c))));
            }
        }
        for c in pending {
            events.push(event(0, EventBody::Conversation(Box::new(c))));
        }
        let mut sink = JsonLinesSink::new(Vec::new(), "memory", false);
        let mut expected = Vec::new();
        for event in &events {
            sink.write_event(event).unwrap();
            serde_json::to_writer(&mut expected, event).unwrap();
            expected.push(b'\n');
        }
        assert_eq!(
            String::from_utf8(std::mem::take(&mut sink.out)).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }

    /// Lines collected up to the write size come out whole, in order, the same bytes as line
    /// by line: written when the size is reached, on flush, and when the sink is dropped.
    #[test]
    fn collected_lines_are_written_at_the_size_on_flush_and_on_drop() {
        // Two-digit `ts_ns`: every line the same length.
        let events: Vec<Event> = (10..50)
            .map(|seq| Event {
                ts: String::from("2026-11-28T16:00:00.000000000Z").into(),
                ts_ns: seq,
                pid: 7,
                tid: 7,
                comm: "ip".into(),
                process: None,
                body: EventBody::Extack(crate::model::event::ExtackMessage {
                    message: "Nexthop device is not up".into(),
                }),
            })
            .collect();
        let mut one_by_one = Vec::new();
        let mut sink = JsonLinesSink::new(&mut one_by_one, "memory", false);
        events.iter().for_each(|e| sink.write_event(e).unwrap());
        drop(sink);
        let line_len = one_by_one.len() / events.len();

        let mut out = Vec::new();
        let mut sink = JsonLinesSink::new(&mut out, "memory", false).with_write_size(10 * line_len);
        for e in &events[..9] {
            sink.write_event(e).unwrap();
        }
        assert!(
            sink.out.is_empty(),
            "nothing written before the size is reached"
        );
        sink.write_event(&events[9]).unwrap();
        assert_eq!(sink.out.len(), 10 * line_len, "ten lines written at once");
        sink.write_event(&events[10]).unwrap();
        sink.flush().unwrap();
        assert_eq!(
            sink.out.len(),
            11 * line_len,
            "a flush writes what is pending"
        );
        events[11..]
            .iter()
            .for_each(|e| sink.write_event(e).unwrap());
        drop(sink);
        assert_eq!(out, one_by_one);
    }

    /// Live events (with a process) are written as serde_json writes them, whichever process
    /// attributions are kept, reused or replaced.
    #[test]
    fn events_with_their_process_are_written_as_serde_json_writes_them() {
        use crate::model::event::{LostReport, RunSummary};
        use crate::model::process::{Ancestor, CgroupIdentity, ContainerIdentity};
        let attribution = |n: u32| {
            Arc::new(ProcessAttribution {
                exe: Some(format!("/usr/bin/kubelet-{n}")),
                ancestors: vec![Ancestor {
                    pid: n,
                    comm: "containerd-\"shim\"".into(),
                }],
                cgroup: Some("/kubepods/burstable/pod1/abc".into()),
                identity: CgroupIdentity {
                    unit: n.is_multiple_of(2).then(|| "kubelet.service".into()),
                    container: (n % 2 == 1).then(|| ContainerIdentity {
                        runtime: "containerd".into(),
                        id: "abc".into(),
                        pod_name: Some("speaker-x".into()),
                        ..Default::default()
                    }),
                },
            })
        };
        let processes: Vec<_> = (0..JSON_KEPT as u32 + 3).map(attribution).collect();
        let bodies = [
            EventBody::Lost(LostReport {
                lost: 3,
                counts: [("netlink_ringbuf_full".to_string(), 3)].into(),
            }),
            EventBody::Summary(RunSummary::default()),
        ];
        let mut sink = JsonLinesSink::new(Vec::new(), "memory", false);
        let mut expected = Vec::new();
        for round in 0..3 {
            for (i, process) in processes.iter().enumerate() {
                let event = Event {
                    ts: "2026-11-26T01:02:03.000000004Z".into(),
                    ts_ns: 4,
                    pid: i as u32,
                    tid: round,
                    comm: "kube\tlet".into(),
                    process: (i % 5 != 4).then(|| process.clone()),
                    body: bodies[i % 2].clone(),
                };
                sink.write_event(&event).unwrap();
                serde_json::to_writer(&mut expected, &event).unwrap();
                expected.push(b'\n');
            }
        }
        assert_eq!(
            String::from_utf8(std::mem::take(&mut sink.out)).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }
}
