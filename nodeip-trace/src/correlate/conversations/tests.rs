//! Tests of request/reply pairing, with messages written as the decoder's JSON.
use serde_json::{json, Value};

use super::*;
use crate::model::facts::MAX_FACTS;

fn message(value: Value) -> NetlinkMessage {
    serde_json::from_value(value).expect("message literal")
}

fn header(kind: &str, type_id: u16, flags: &[&str], seq: u32, pid: u32, body: Value) -> Value {
    json!({"type": kind, "type_id": type_id, "flags": flags, "flags_raw": 0, "seq": seq,
           "pid": pid, "len": 0, "body": body})
}

fn get_addr_dump(seq: u32) -> NetlinkMessage {
    message(header(
        "RTM_GETADDR",
        22,
        &["REQUEST", "DUMP"],
        seq,
        0,
        json!({"kind": "address", "family": "inet", "prefix_len": 0, "scope": "global",
               "index": 0, "flags": [], "flags_raw": 0, "secondary": false}),
    ))
}

fn new_addr(seq: u32, portid: u32, ifname: &str, addr: &str, secondary: bool) -> NetlinkMessage {
    message(header(
        "RTM_NEWADDR",
        20,
        &["MULTI"],
        seq,
        portid,
        json!({"kind": "address", "family": "inet", "prefix_len": 24, "scope": "global",
               "index": 2, "ifname": ifname, "flags": [], "flags_raw": 0,
               "secondary": secondary, "local": addr, "address": addr}),
    ))
}

fn done(seq: u32, portid: u32) -> NetlinkMessage {
    message(header(
        "NLMSG_DONE",
        3,
        &["MULTI"],
        seq,
        portid,
        json!({"kind": "done", "status": 0}),
    ))
}

fn error(seq: u32, portid: u32, code: i32, errno: &str, extack: Option<&str>) -> NetlinkMessage {
    let mut body = json!({"kind": "error", "error": code, "errno": errno, "text": "text"});
    if let Some(x) = extack {
        body["extack_msg"] = json!(x);
    }
    message(header("NLMSG_ERROR", 2, &[], seq, portid, body))
}

fn get_route(seq: u32, flags: &[&str]) -> NetlinkMessage {
    message(header(
        "RTM_GETROUTE",
        26,
        flags,
        seq,
        0,
        json!({"kind": "route", "family": "inet", "table": "unspec", "table_id": 0,
               "type": "unspec", "protocol": "unspec", "scope": "global", "tos": 0,
               "dst": "10.0.0.1", "dst_len": 32, "src_len": 0, "flags": [], "flags_raw": 0}),
    ))
}

fn new_route(seq: u32, portid: u32, flags: &[&str]) -> NetlinkMessage {
    message(header(
        "RTM_NEWROUTE",
        24,
        flags,
        seq,
        portid,
        json!({"kind": "route", "family": "inet", "table": "local", "table_id": 255,
               "type": "local", "protocol": "kernel", "scope": "host", "tos": 0,
               "dst": "10.0.0.1", "dst_len": 32, "src_len": 0, "prefsrc": "10.0.0.20",
               "oif": 1, "oif_name": "lo", "flags": [], "flags_raw": 0}),
    ))
}

fn task(pid: u32) -> Task {
    Task {
        pid,
        tid: pid,
        comm: "ip".into(),
    }
}

fn feed(
    tracker: &mut ConversationTracker,
    pid: u32,
    direction: Direction,
    ts_ns: u64,
    messages: &[NetlinkMessage],
) -> BufferPairing {
    let messages: Vec<Arc<NetlinkMessage>> = messages.iter().cloned().map(Arc::new).collect();
    tracker.on_buffer(BufferRef {
        task: &task(pid),
        direction,
        protocol: 0,
        ts_ns,
        bytes: 100,
        messages: &messages,
    })
}

/// The request type of the first conversation a buffer completed.
fn answered(pairing: &BufferPairing) -> &str {
    &pairing.completed[0].conversation.request.header.type_name
}

#[test]
fn a_dump_across_two_reads_is_one_conversation() {
    let mut t = ConversationTracker::new();
    let sent = feed(&mut t, 7, Direction::Send, 1_000, &[get_addr_dump(5)]);
    assert!(sent.paired && sent.completed.is_empty() && sent.portid.is_none());
    let first = feed(
        &mut t,
        7,
        Direction::Recv,
        2_000,
        &[
            new_addr(5, 7, "eth0", "10.0.0.20", false),
            new_addr(5, 7, "eth0", "10.0.0.10", true),
        ],
    );
    assert!(first.paired && first.completed.is_empty());
    assert_eq!(first.portid, Some(7));
    let last = feed(&mut t, 7, Direction::Recv, 5_000, &[done(5, 7)]);
    assert_eq!(last.completed.len(), 1);
    let c = &last.completed[0].conversation;
    assert_eq!(c.outcome, ConversationOutcome::Done);
    assert!(c.dump);
    assert_eq!((c.replies, c.reply_buffers, c.reply_bytes), (2, 2, 200));
    assert_eq!(c.duration_ns, 4_000);
    assert_eq!(c.portid, Some(7));
    assert_eq!(c.reply_types["RTM_NEWADDR"], 2);
    let secondary: Vec<_> = c.facts.addresses.iter().map(|a| a.secondary).collect();
    assert_eq!(secondary, [false, true]);
    assert_eq!(last.completed[0].ts_ns, 1_000);
    assert!(t.drain().is_empty());
}

#[test]
fn an_error_reply_carries_errno_and_extack() {
    let mut t = ConversationTracker::new();
    feed(
        &mut t,
        7,
        Direction::Send,
        1,
        &[get_route(9, &["REQUEST", "ACK"])],
    );
    let r = feed(
        &mut t,
        7,
        Direction::Recv,
        2,
        &[error(9, 7, -22, "EINVAL", Some("Invalid prefix"))],
    );
    let c = &r.completed[0].conversation;
    assert_eq!(c.outcome, ConversationOutcome::Error);
    let e = c.error.as_ref().unwrap();
    assert_eq!((e.code, e.errno.as_ref()), (-22, "EINVAL"));
    assert_eq!(e.extack.as_deref(), Some("Invalid prefix"));
}

#[test]
fn a_plain_request_ends_with_its_reply_and_an_acked_one_with_the_ack() {
    let mut t = ConversationTracker::new();
    feed(&mut t, 7, Direction::Send, 1, &[get_route(1, &["REQUEST"])]);
    let r = feed(&mut t, 7, Direction::Recv, 2, &[new_route(1, 7, &[])]);
    let c = &r.completed[0].conversation;
    assert_eq!(c.outcome, ConversationOutcome::Reply);
    let route = &c.facts.routes[0];
    assert_eq!(
        (route.table.as_ref(), route.route_type.as_ref()),
        ("local", "local")
    );
    assert_eq!(
        (route.dev.as_deref(), route.src.as_deref()),
        (Some("lo"), Some("10.0.0.20"))
    );

    feed(
        &mut t,
        7,
        Direction::Send,
        3,
        &[get_route(2, &["REQUEST", "ACK"])],
    );
    let r = feed(&mut t, 7, Direction::Recv, 4, &[new_route(2, 7, &[])]);
    assert!(r.completed.is_empty(), "waits for the ACK");
    let r = feed(
        &mut t,
        7,
        Direction::Recv,
        5,
        &[error(2, 7, 0, "ACK", None)],
    );
    assert_eq!(
        r.completed[0].conversation.outcome,
        ConversationOutcome::Ack
    );
    assert_eq!(r.completed[0].conversation.replies, 1);
}

#[test]
fn notifications_and_other_processes_replies_are_not_paired() {
    let mut t = ConversationTracker::new();
    feed(&mut t, 7, Direction::Send, 1, &[get_addr_dump(5)]);
    let other = feed(&mut t, 8, Direction::Recv, 2, &[done(5, 8)]);
    assert!(!other.paired && other.completed.is_empty());
    let notification = feed(
        &mut t,
        7,
        Direction::Recv,
        3,
        &[new_addr(0, 0, "eth0", "10.0.0.9", false)],
    );
    assert!(!notification.paired);
    let unsolicited_send = feed(
        &mut t,
        7,
        Direction::Send,
        4,
        &[new_addr(0, 0, "eth0", "10.0.0.9", false)],
    );
    assert!(!unsolicited_send.paired);
}

#[test]
fn same_seq_on_two_sockets_pairs_in_order_and_by_port_id() {
    // iproute2 numbers requests by time: two sockets of one process share a seq.
    let mut t = ConversationTracker::new();
    feed(&mut t, 7, Direction::Send, 1, &[get_addr_dump(5)]);
    feed(&mut t, 7, Direction::Send, 2, &[get_route(5, &["REQUEST"])]);
    let r = feed(
        &mut t,
        7,
        Direction::Recv,
        3,
        &[new_addr(5, 100, "eth0", "10.0.0.20", false)],
    );
    assert!(r.paired);
    // The route reply comes from the other socket (port 200): it cannot be the dump's.
    let r = feed(&mut t, 7, Direction::Recv, 4, &[new_route(5, 200, &[])]);
    assert!(r.paired, "{r:?}");
    assert_eq!(answered(&r), "RTM_GETROUTE");
    let r = feed(&mut t, 7, Direction::Recv, 5, &[done(5, 100)]);
    assert_eq!(answered(&r), "RTM_GETADDR");
}

#[test]
fn unanswered_and_cut_short_conversations_are_drained_in_order() {
    let mut t = ConversationTracker::new();
    feed(&mut t, 7, Direction::Send, 1, &[get_addr_dump(1)]);
    feed(&mut t, 7, Direction::Send, 2, &[get_route(2, &["REQUEST"])]);
    feed(
        &mut t,
        7,
        Direction::Recv,
        3,
        &[new_addr(1, 7, "eth0", "10.0.0.20", false)],
    );
    let drained = t.drain();
    let outcomes: Vec<_> = drained.iter().map(|c| c.conversation.outcome).collect();
    assert_eq!(
        outcomes,
        [
            ConversationOutcome::Incomplete,
            ConversationOutcome::NoReply
        ]
    );
    assert!(t.drain().is_empty());
}

#[test]
fn open_conversations_are_bounded() {
    let mut t = ConversationTracker::new();
    let mut closed = 0;
    for seq in 0..(MAX_OPEN as u32 + 10) {
        closed += feed(
            &mut t,
            7,
            Direction::Send,
            u64::from(seq),
            &[get_addr_dump(seq)],
        )
        .completed
        .len();
    }
    assert_eq!(closed, 10);
    assert_eq!(t.drain().len(), MAX_OPEN);
}

#[test]
fn facts_are_capped_and_the_rest_counted() {
    let mut t = ConversationTracker::new();
    feed(&mut t, 7, Direction::Send, 1, &[get_addr_dump(1)]);
    let replies: Vec<_> = (0..MAX_FACTS + 3)
        .map(|i| {
            new_addr(
                1,
                7,
                "eth0",
                &format!("10.0.{}.{}", i / 256, i % 256),
                false,
            )
        })
        .collect();
    feed(&mut t, 7, Direction::Recv, 2, &replies);
    let r = feed(&mut t, 7, Direction::Recv, 3, &[done(1, 7)]);
    let c = &r.completed[0].conversation;
    assert_eq!(c.replies as usize, MAX_FACTS + 3);
    assert_eq!((c.facts.addresses.len(), c.facts.omitted), (MAX_FACTS, 3));
}

#[test]
fn a_reply_of_another_kind_is_not_crossed_with_an_older_request() {
    let mut t = ConversationTracker::new();
    feed(&mut t, 7, Direction::Send, 1, &[get_addr_dump(5)]);
    feed(&mut t, 7, Direction::Send, 2, &[get_route(5, &["REQUEST"])]);
    let r = feed(&mut t, 7, Direction::Recv, 3, &[new_route(5, 200, &[])]);
    assert_eq!(answered(&r), "RTM_GETROUTE");
    let r = feed(&mut t, 7, Direction::Recv, 4, &[done(5, 100)]);
    assert_eq!(answered(&r), "RTM_GETADDR");
}
