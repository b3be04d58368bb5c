//! Hand-built buffers for each message kind: rtnetlink objects and requests, multi-message
//! buffers, a dump split across two reads, errors with extended ack, unknown attributes,
//! XFRM redaction, other protocols, malformed framing, flag names and protocol names.
use super::{attr, message, nest};
use crate::decode::netlink::{protocol_from_name, protocol_name, DecodeError, NetlinkDecoder};
use crate::model::netlink::{MessageBody, NetlinkMessage};

const RTM_NEWLINK: u16 = 16;
const RTM_NEWADDR: u16 = 20;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_NEWRULE: u16 = 32;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const MULTI: u16 = 0x2;

/// `struct ifinfomsg`.
fn ifinfomsg(index: u32, flags: u32) -> Vec<u8> {
    let mut out = vec![0, 0];
    out.extend_from_slice(&1u16.to_ne_bytes()); // ARPHRD_ETHER
    out.extend_from_slice(&index.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out
}

fn link(index: u32, name: &str, extra: &[Vec<u8>]) -> Vec<u8> {
    let mut payload = ifinfomsg(index, 0x1_1043); // UP BROADCAST RUNNING MULTICAST LOWER_UP
    payload.extend(attr(3, &[name.as_bytes(), b"\0"].concat()));
    payload.extend(attr(4, &1500u32.to_ne_bytes()));
    payload.extend(attr(1, &[2, 0, 0, 0, 0, 1]));
    payload.extend(attr(16, &[6])); // IF_OPER_UP
    payload.extend(extra.concat());
    message(RTM_NEWLINK, MULTI, 7, 1234, &payload)
}

/// `struct ifaddrmsg` + IFA_ADDRESS, IFA_LOCAL, IFA_LABEL, IFA_FLAGS.
fn ipv4_address(index: u32, octets: [u8; 4], flags: u32, label: &str) -> Vec<u8> {
    let mut payload = vec![2, 24, flags as u8, 0];
    payload.extend_from_slice(&index.to_ne_bytes());
    payload.extend(attr(1, &octets));
    payload.extend(attr(2, &octets));
    payload.extend(attr(3, &[label.as_bytes(), b"\0"].concat()));
    payload.extend(attr(8, &flags.to_ne_bytes()));
    message(RTM_NEWADDR, MULTI, 8, 1234, &payload)
}

fn done(seq: u32) -> Vec<u8> {
    message(NLMSG_DONE, MULTI, seq, 1234, &0i32.to_ne_bytes())
}

fn only(decoder: &mut NetlinkDecoder, protocol: u16, bytes: &[u8]) -> NetlinkMessage {
    let decoded = decoder.decode(protocol, bytes);
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    assert_eq!(decoded.messages.len(), 1);
    decoded.messages.into_iter().next().unwrap()
}

#[test]
fn link_dump_split_across_two_reads_teaches_names() {
    let mut decoder = NetlinkDecoder::new();
    let vxlan_info = nest(
        18,
        &[
            attr(1, b"vxlan\0"),
            nest(2, &[attr(4, &[192, 0, 2, 1]), attr(2, &[198, 51, 100, 9])]),
        ],
    );
    let first = [link(1, "lo", &[]), link(2, "eth0", &[])].concat();
    let second = [
        link(3, "vx0", &[vxlan_info, attr(10, &2u32.to_ne_bytes())]),
        done(7),
    ]
    .concat();

    let decoded = decoder.decode(0, &first);
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    assert_eq!(decoded.messages.len(), 2);
    let decoded = decoder.decode(0, &second);
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    assert_eq!(decoded.messages.len(), 2);
    let MessageBody::Link(vx0) = &decoded.messages[0].body else {
        panic!("{:?}", decoded.messages[0].body);
    };
    assert_eq!(vx0.ifname.as_deref(), Some("vx0"));
    assert_eq!(vx0.info_kind.as_deref(), Some("vxlan"));
    assert_eq!(vx0.tunnel_local.as_deref(), Some("192.0.2.1"));
    assert_eq!(vx0.tunnel_remote.as_deref(), Some("198.51.100.9"));
    assert_eq!(vx0.master, Some(2));
    assert_eq!(vx0.master_name.as_deref(), Some("eth0"));
    assert_eq!(vx0.mtu, Some(1500));
    assert_eq!(vx0.address.as_deref(), Some("02:00:00:00:00:01"));
    assert_eq!(vx0.operstate.as_deref(), Some("UP"));
    assert_eq!(
        vx0.flags,
        ["UP", "BROADCAST", "RUNNING", "MULTICAST", "LOWER_UP"]
    );
    let MessageBody::Done(end) = &decoded.messages[1].body else {
        panic!("{:?}", decoded.messages[1].body);
    };
    assert_eq!(end.status, Some(0));
    assert_eq!(decoder.interface_name(2), Some("eth0"));
    assert_eq!(decoder.interface_name(3), Some("vx0"));
}

#[test]
fn address_dump_primary_and_secondary_with_unknown_attribute() {
    let mut decoder = NetlinkDecoder::new();
    decoder.set_interface_name(2, "eth0");
    let mut secondary = ipv4_address(2, [192, 0, 2, 20], 0x81, "eth0");
    // An attribute type no kernel defines: kept raw, not an error.
    let unknown = attr(200, &[0xde, 0xad]);
    secondary.extend_from_slice(&unknown);
    let len = secondary.len() as u32;
    secondary[..4].copy_from_slice(&len.to_ne_bytes());
    let buffer = [
        ipv4_address(2, [192, 0, 2, 10], 0x80, "eth0"),
        secondary,
        done(8),
    ]
    .concat();

    let decoded = decoder.decode(0, &buffer);
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    let types: Vec<_> = decoded
        .messages
        .iter()
        .map(|m| m.header.type_name.as_ref())
        .collect();
    assert_eq!(types, ["RTM_NEWADDR", "RTM_NEWADDR", "NLMSG_DONE"]);
    let addresses: Vec<_> = decoded
        .messages
        .iter()
        .filter_map(|m| match &m.body {
            MessageBody::Address(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(addresses[0].local.as_deref(), Some("192.0.2.10"));
    assert!(!addresses[0].secondary);
    assert_eq!(addresses[0].flags, ["permanent"]);
    assert_eq!(addresses[1].local.as_deref(), Some("192.0.2.20"));
    assert_eq!(addresses[1].prefix_len, 24);
    assert_eq!(addresses[1].ifname.as_deref(), Some("eth0"));
    assert_eq!(addresses[1].label.as_deref(), Some("eth0"));
    assert!(addresses[1].secondary);
    assert_eq!(addresses[1].flags, ["secondary", "permanent"]);
    assert_eq!(addresses[1].other_attributes.len(), 1);
    assert_eq!(addresses[1].other_attributes[0].attr_type, 200);
    assert_eq!(addresses[1].other_attributes[0].hex, "dead");
    assert_eq!(decoded.messages[0].header.flags, ["MULTI"]);
}

#[test]
fn route_get_request_and_local_answer() {
    let mut decoder = NetlinkDecoder::new();
    decoder.set_interface_name(1, "lo");
    // `ip route get 192.0.2.20`: rtmsg with dst_len 32, RTM_F_LOOKUP_TABLE, RTA_DST.
    let mut request = vec![2, 32, 0, 0, 0, 0, 0, 0];
    request.extend_from_slice(&0x1000u32.to_ne_bytes());
    request.extend(attr(1, &[192, 0, 2, 20]));
    let request = only(&mut decoder, 0, &message(RTM_GETROUTE, 0x1, 5, 0, &request));
    assert_eq!(request.header.type_name, "RTM_GETROUTE");
    assert_eq!(request.header.flags, ["REQUEST"]);
    let MessageBody::Route(asked) = &request.body else {
        panic!("{:?}", request.body);
    };
    assert_eq!(asked.dst.as_deref(), Some("192.0.2.20"));
    assert_eq!(asked.flags, ["LOOKUP_TABLE"]);

    // The answer: table local (RTA_TABLE 255 over rtm_table), type local, scope host,
    // protocol kernel, prefsrc, oif lo, priority.
    let mut answer = vec![2, 32, 0, 0, 254, 2, 254, 2];
    answer.extend_from_slice(&0x8000_0200u32.to_ne_bytes()); // CLONED | RTCF_LOCAL
    answer.extend(attr(15, &255u32.to_ne_bytes()));
    answer.extend(attr(1, &[192, 0, 2, 20]));
    answer.extend(attr(4, &1u32.to_ne_bytes()));
    answer.extend(attr(7, &[192, 0, 2, 10]));
    answer.extend(attr(6, &100u32.to_ne_bytes()));
    let answer = only(&mut decoder, 0, &message(RTM_NEWROUTE, 0, 5, 99, &answer));
    let MessageBody::Route(route) = &answer.body else {
        panic!("{:?}", answer.body);
    };
    assert_eq!((route.table.as_ref(), route.table_id), ("local", 255));
    assert_eq!(route.route_type, "local");
    assert_eq!(route.scope, "host");
    assert_eq!(route.protocol, "kernel");
    assert_eq!(route.prefsrc.as_deref(), Some("192.0.2.10"));
    assert_eq!(route.oif_name.as_deref(), Some("lo"));
    assert_eq!(route.priority, Some(100));
    assert_eq!(route.flags, ["CLONED", "RTCF_LOCAL"]);
}

#[test]
fn default_route_in_main_without_rta_table_and_short_dump_request() {
    let mut decoder = NetlinkDecoder::new();
    let mut payload = vec![2, 0, 0, 0, 254, 4, 0, 1, 0, 0, 0, 0];
    payload.extend(attr(5, &[192, 0, 2, 1]));
    payload.extend(attr(4, &2u32.to_ne_bytes()));
    let reply = only(
        &mut decoder,
        0,
        &message(RTM_NEWROUTE, MULTI, 1, 9, &payload),
    );
    let MessageBody::Route(route) = &reply.body else {
        panic!("{:?}", reply.body);
    };
    assert_eq!(route.table, "main");
    assert_eq!(
        (route.protocol.as_ref(), route.scope.as_ref()),
        ("static", "global")
    );
    assert_eq!(route.dst, None);
    assert_eq!(route.gateway.as_deref(), Some("192.0.2.1"));

    // glibc's dump request: only `struct rtgenmsg` (family), padded to 4 bytes.
    let request = only(&mut decoder, 0, &message(22, 0x301, 2, 0, &[2, 0, 0, 0]));
    assert_eq!(request.header.type_name, "RTM_GETADDR");
    assert_eq!(request.header.flags, ["REQUEST", "DUMP"]);
    assert!(matches!(&request.body, MessageBody::Address(a) if a.family == "inet"));
}

#[test]
fn neighbour_and_rule() {
    let mut decoder = NetlinkDecoder::new();
    decoder.set_interface_name(2, "eth0");
    let mut neighbour = vec![2, 0, 0, 0];
    neighbour.extend_from_slice(&2u32.to_ne_bytes());
    neighbour.extend_from_slice(&0x02u16.to_ne_bytes()); // NUD_REACHABLE
    neighbour.extend_from_slice(&[0, 1]); // flags, type unicast
    neighbour.extend(attr(1, &[192, 0, 2, 1]));
    neighbour.extend(attr(2, &[0xaa, 0xbb, 0xcc, 0, 0, 1]));
    let neighbour = only(&mut decoder, 0, &message(RTM_NEWNEIGH, 0, 1, 0, &neighbour));
    let MessageBody::Neighbour(entry) = &neighbour.body else {
        panic!("{:?}", neighbour.body);
    };
    assert_eq!(entry.dst.as_deref(), Some("192.0.2.1"));
    assert_eq!(entry.lladdr.as_deref(), Some("aa:bb:cc:00:00:01"));
    assert_eq!(entry.state, ["REACHABLE"]);
    assert_eq!(entry.ifname.as_deref(), Some("eth0"));

    // `ip rule add from 10.0.0.0/8 table 100 priority 1000`
    let mut rule = vec![2, 0, 8, 0, 100, 0, 0, 1, 0, 0, 0, 0];
    rule.extend(attr(2, &[10, 0, 0, 0]));
    rule.extend(attr(6, &1000u32.to_ne_bytes()));
    rule.extend(attr(15, &100u32.to_ne_bytes()));
    let rule = only(&mut decoder, 0, &message(RTM_NEWRULE, 0x605, 1, 0, &rule));
    assert_eq!(rule.header.flags, ["REQUEST", "ACK", "EXCL", "CREATE"]);
    let MessageBody::Rule(rule) = &rule.body else {
        panic!("{:?}", rule.body);
    };
    assert_eq!((rule.src.as_deref(), rule.src_len), (Some("10.0.0.0"), 8));
    assert_eq!((rule.table.as_ref(), rule.priority), ("100", Some(1000)));
    assert_eq!(rule.action, "to_table");
}

#[test]
fn error_with_extack_capped_and_uncapped() {
    let mut decoder = NetlinkDecoder::new();
    let request = ipv4_address(2, [192, 0, 2, 10], 0, "eth0");
    let extack = [
        attr(1, b"Invalid prefix for given prefix length\0"),
        attr(2, &24u32.to_ne_bytes()),
        attr(5, &3u32.to_ne_bytes()), // NLMSGERR_ATTR_MISS_TYPE: kept raw
    ]
    .concat();
    // CAPPED | ACK_TLVS: error, echoed header only, then the TLVs.
    let capped = [
        (-22i32).to_ne_bytes().to_vec(),
        request[..16].to_vec(),
        extack.clone(),
    ]
    .concat();
    // ACK_TLVS only: the whole request is echoed before the TLVs.
    let uncapped = [(-22i32).to_ne_bytes().to_vec(), request.clone(), extack].concat();
    for (flags, payload, expected_flags) in [
        (0x300, capped, vec!["CAPPED", "ACK_TLVS"]),
        (0x200, uncapped, vec!["ACK_TLVS"]),
    ] {
        let reply = only(
            &mut decoder,
            0,
            &message(NLMSG_ERROR, flags, 8, 1234, &payload),
        );
        assert_eq!(reply.header.type_name, "NLMSG_ERROR");
        assert_eq!(reply.header.flags, expected_flags);
        let MessageBody::Error(error) = &reply.body else {
            panic!("{:?}", reply.body);
        };
        assert_eq!((error.error, error.errno.as_ref()), (-22, "EINVAL"));
        assert_eq!(error.text, "Invalid argument");
        assert_eq!(
            error.extack_msg.as_deref(),
            Some("Invalid prefix for given prefix length")
        );
        assert_eq!(error.extack_offset, Some(24));
        assert_eq!(error.extack_attributes.len(), 1);
        let echoed = error.request.as_ref().unwrap();
        assert_eq!((echoed.type_name.as_ref(), echoed.seq), ("RTM_NEWADDR", 8));
    }

    // An ACK: error 0.
    let ack = [0i32.to_ne_bytes().to_vec(), request[..16].to_vec()].concat();
    let ack = only(&mut decoder, 0, &message(NLMSG_ERROR, 0x100, 8, 1234, &ack));
    assert!(matches!(&ack.body, MessageBody::Error(e) if e.errno == "ACK" && e.text == "Success"));
}

#[test]
fn done_with_failed_status_and_noop() {
    let mut decoder = NetlinkDecoder::new();
    let failed = only(
        &mut decoder,
        0,
        &message(NLMSG_DONE, MULTI, 1, 2, &(-4i32).to_ne_bytes()),
    );
    assert!(
        matches!(&failed.body, MessageBody::Done(d) if d.status == Some(-4) && d.errno.as_deref() == Some("EINTR"))
    );
    let bare = only(&mut decoder, 0, &message(NLMSG_DONE, MULTI, 1, 2, &[]));
    assert!(matches!(&bare.body, MessageBody::Done(d) if d.status.is_none()));
    let noop = only(&mut decoder, 16, &message(1, 0, 1, 2, &[]));
    assert_eq!(noop.header.type_name, "NLMSG_NOOP");
    assert_eq!(noop.body, MessageBody::Empty);
}

#[test]
fn nlctrl_reply_teaches_a_family_and_unknown_families_stay_raw() {
    let mut decoder = NetlinkDecoder::new();
    let unknown = only(
        &mut decoder,
        16,
        &message(0x21, 0x1, 1, 0, &[3, 1, 0, 0, 1, 2, 3, 4]),
    );
    assert_eq!(unknown.header.type_name, "genl family 0x21 cmd 3");
    assert!(matches!(&unknown.body, MessageBody::Genl(g) if g.hex == "01020304"));

    let reply = [
        vec![1, 2, 0, 0],
        attr(2, b"TASKSTATS\0"),
        attr(1, &0x21u16.to_ne_bytes()),
        attr(3, &1u32.to_ne_bytes()),
        nest(
            7,
            &[nest(
                1,
                &[attr(1, b"events\0"), attr(2, &5u32.to_ne_bytes())],
            )],
        ),
    ]
    .concat();
    let reply = only(&mut decoder, 16, &message(0x10, 0, 1, 77, &reply));
    assert_eq!(reply.header.type_name, "nlctrl CTRL_CMD_NEWFAMILY");
    let MessageBody::Nlctrl(body) = &reply.body else {
        panic!("{:?}", reply.body);
    };
    assert_eq!(body.family_id, Some(0x21));
    assert_eq!(body.mcast_groups[0].name, "events");
    assert_eq!(decoder.family_name(0x21), Some("TASKSTATS"));
    assert!(decoder
        .families()
        .any(|(id, name)| id == 0x21 && name == "TASKSTATS"));
    let named = only(&mut decoder, 16, &message(0x21, 0x1, 1, 0, &[3, 1, 0, 0]));
    assert_eq!(named.header.type_name, "TASKSTATS cmd 3");
}

#[test]
fn xfrm_bodies_are_redacted() {
    let key = [0x5a; 64];
    let mut decoder = NetlinkDecoder::new();
    let message = only(&mut decoder, 6, &message(16, 0x605, 1, 0, &key));
    assert_eq!(message.header.type_name, "XFRM_MSG_NEWSA");
    assert!(matches!(&message.body, MessageBody::Redacted(r) if r.payload_len == 64));
    let json = serde_json::to_string(&message).unwrap();
    assert!(!json.contains("5a5a"), "{json}");
}

#[test]
fn xfrm_buffers_are_redacted_for_files_headers_kept() {
    let key = [0x5a; 64];
    let mut buffer = message(16, 0x605, 1, 0, &key);
    buffer.extend(message(16, 0x605, 2, 0, &key));
    let headers: Vec<u8> = buffer[..16].to_vec();
    super::super::redact_xfrm(&mut buffer);
    assert!(!buffer.contains(&0x5a), "{buffer:02x?}");
    assert_eq!(&buffer[..16], &headers[..]);
    // A broken length zeroes the rest rather than leaving it.
    let mut broken = message(16, 0x605, 1, 0, &key);
    broken[0] = 0xff;
    super::super::redact_xfrm(&mut broken);
    assert!(!broken[16..].contains(&0x5a));
    let mut short = vec![0x5a; 10];
    super::super::redact_xfrm(&mut short);
    assert_eq!(short, [0; 10]);
}

#[test]
fn other_protocols_stay_raw() {
    let mut decoder = NetlinkDecoder::new();
    let audit = only(&mut decoder, 9, &message(1100, 0x1, 1, 0, b"abc\0"));
    assert_eq!(audit.header.type_name, "NETLINK_AUDIT type 1100");
    assert!(matches!(&audit.body, MessageBody::Raw(r) if r.hex == "61626300"));
}

#[test]
fn malformed_framing_keeps_what_came_before() {
    let good = done(1);
    let mut decoder = NetlinkDecoder::new();

    // nlmsg_len beyond the buffer (a cut capture).
    let mut cut = good.clone();
    cut.extend(message(RTM_NEWLINK, MULTI, 1, 2, &ifinfomsg(1, 0)));
    cut.truncate(good.len() + 20);
    let decoded = decoder.decode(0, &cut);
    assert_eq!(decoded.messages.len(), 1);
    assert_eq!(
        decoded.errors,
        [DecodeError::LengthOverrun {
            offset: 20,
            len: 32,
            available: 20
        }]
    );
    assert!(decoded.errors[0].to_string().contains("byte 20"));

    // nlmsg_len below the header.
    let mut small = good.clone();
    small.extend([8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let decoded = decoder.decode(0, &small);
    assert_eq!(decoded.messages.len(), 1);
    assert_eq!(
        decoded.errors,
        [DecodeError::LengthTooSmall { offset: 20, len: 8 }]
    );

    // A partial header that is not padding.
    let mut partial = good.clone();
    partial.extend([1, 2, 3]);
    let decoded = decoder.decode(0, &partial);
    assert_eq!(
        decoded.errors,
        [DecodeError::TruncatedHeader {
            offset: 20,
            available: 3
        }]
    );

    // Zero padding after the last message is not an error.
    let mut padded = good.clone();
    padded.extend([0; 40]);
    assert!(decoder.decode(0, &padded).errors.is_empty());

    // A body the crate rejects stays raw with the reason (RTM_NEWROUTE with a 3-byte body).
    let short = decoder.decode(0, &message(RTM_NEWROUTE, 0, 1, 2, &[2, 0, 0]));
    assert_eq!(short.messages.len(), 1);
    assert!(matches!(short.messages[0].body, MessageBody::Raw(_)));
    assert!(short.messages[0].error.is_some());
    assert!(matches!(
        short.errors[..],
        [DecodeError::Body { offset: 16, .. }]
    ));
}

#[test]
fn flags_are_read_by_operation() {
    let mut decoder = NetlinkDecoder::new();
    let flags_of = |decoder: &mut NetlinkDecoder, type_id: u16, flags: u16| {
        let payload = vec![0; 16];
        decoder
            .decode(0, &message(type_id, flags, 1, 0, &payload))
            .messages[0]
            .header
            .flags
            .clone()
    };
    assert_eq!(flags_of(&mut decoder, 18, 0x301), ["REQUEST", "DUMP"]);
    assert_eq!(
        flags_of(&mut decoder, 18, 0x501),
        ["REQUEST", "ROOT", "ATOMIC"]
    );
    assert_eq!(
        flags_of(&mut decoder, 16, 0xf05),
        ["REQUEST", "ACK", "REPLACE", "EXCL", "CREATE", "APPEND"]
    );
    assert_eq!(
        flags_of(&mut decoder, 17, 0x105),
        ["REQUEST", "ACK", "NONREC"]
    );
    assert_eq!(
        flags_of(&mut decoder, 16, 0x2a),
        ["MULTI", "ECHO", "DUMP_FILTERED"]
    );
    assert_eq!(flags_of(&mut decoder, 16, 0x1010), ["DUMP_INTR", "0x1000"]);
}

#[test]
fn protocol_names_both_ways() {
    assert_eq!(protocol_name(0), "NETLINK_ROUTE");
    assert_eq!(protocol_name(16), "NETLINK_GENERIC");
    assert_eq!(protocol_name(6), "NETLINK_XFRM");
    assert_eq!(protocol_name(9), "NETLINK_AUDIT");
    assert_eq!(protocol_name(31), "NETLINK_31");
    assert_eq!(protocol_from_name("route"), Some(0));
    assert_eq!(protocol_from_name("generic"), Some(16));
    assert_eq!(protocol_from_name("NETLINK_ROUTE"), Some(0));
    assert_eq!(protocol_from_name("netlink_xfrm"), Some(6));
    assert_eq!(protocol_from_name("inet_diag"), Some(4));
    assert_eq!(protocol_from_name("16"), Some(16));
    assert_eq!(protocol_from_name("nonsense"), None);
}
