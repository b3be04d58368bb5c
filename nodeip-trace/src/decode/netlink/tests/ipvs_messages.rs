//! IPVS messages built attribute by attribute the way libipvs (ipvsadm) builds them
//! (`ipvs_nl_fill_service_attr`, `ipvs_nl_fill_dest_attr`), checked byte for byte against the
//! messages ipvsadm really sent in the busybox capture, then decoded.
use super::captures::{read_nlmon, BUSYBOX};
use super::{attr, message, nest};
use crate::decode::netlink::{ipvs_command, NetlinkDecoder};
use crate::model::netlink::{IpvsCommand, MessageBody};

const IPVS_FAMILY: u16 = 0x20;
const REQUEST_ACK: u16 = 0x05;
const REQUEST_ACK_DUMP: u16 = 0x305;
/// seq and pid ipvsadm used in the busybox capture (frames 30, 44, 58).
const SEQ: u32 = 0x6b01_9afd;
const PID_ADD_SERVICE: u32 = 0x7f40_0084;
const PID_ADD_DEST: u32 = 0x7f40_0086;
const PID_LIST: u32 = 0x7f40_0088;

fn genl_header(cmd: u8) -> Vec<u8> {
    vec![cmd, 1, 0, 0]
}

/// `union nf_inet_addr` holding an IPv4 address.
fn inet_addr(octets: [u8; 4]) -> Vec<u8> {
    let mut addr = octets.to_vec();
    addr.resize(16, 0);
    addr
}

/// `IPVS_CMD_ATTR_SERVICE` for TCP `addr:port`, as `ipvs_nl_fill_service_attr` writes it.
fn service_tcp(addr: [u8; 4], port: u16, scheduler: &str) -> Vec<u8> {
    let mut flags = 0u32.to_ne_bytes().to_vec();
    flags.extend_from_slice(&u32::MAX.to_ne_bytes());
    nest(
        1,
        &[
            attr(1, &2u16.to_ne_bytes()),                     // AF = AF_INET
            attr(2, &6u16.to_ne_bytes()),                     // PROTOCOL = IPPROTO_TCP
            attr(3, &inet_addr(addr)),                        // ADDR
            attr(4, &port.to_be_bytes()),                     // PORT (network order)
            attr(6, &[scheduler.as_bytes(), b"\0"].concat()), // SCHED_NAME
            attr(7, &flags),                                  // FLAGS {flags, mask}
            attr(8, &0u32.to_ne_bytes()),                     // TIMEOUT
            attr(9, &u32::MAX.to_ne_bytes()),                 // NETMASK 255.255.255.255
        ],
    )
}

/// `IPVS_CMD_ATTR_DEST` for `addr:port`, masq, weight 1, as `ipvs_nl_fill_dest_attr` writes it.
fn dest_masq(addr: [u8; 4], port: u16) -> Vec<u8> {
    nest(
        2,
        &[
            attr(11, &2u16.to_ne_bytes()), // ADDR_FAMILY
            attr(1, &inet_addr(addr)),     // ADDR
            attr(2, &port.to_be_bytes()),  // PORT
            attr(3, &0u32.to_ne_bytes()),  // FWD_METHOD = IP_VS_CONN_F_MASQ
            attr(4, &1u32.to_ne_bytes()),  // WEIGHT
            attr(13, &[0]),                // TUN_TYPE
            attr(14, &0u16.to_ne_bytes()), // TUN_PORT
            attr(15, &0u16.to_ne_bytes()), // TUN_FLAGS
            attr(5, &0u32.to_ne_bytes()),  // U_THRESH
            attr(6, &0u32.to_ne_bytes()),  // L_THRESH
        ],
    )
}

fn new_service() -> Vec<u8> {
    let payload = [genl_header(1), service_tcp([10, 0, 0, 1], 80, "rr")].concat();
    message(IPVS_FAMILY, REQUEST_ACK, SEQ, PID_ADD_SERVICE, &payload)
}

fn new_dest() -> Vec<u8> {
    let payload = [
        genl_header(5),
        service_tcp([10, 0, 0, 1], 80, ""),
        dest_masq([10, 0, 0, 2], 80),
    ]
    .concat();
    message(IPVS_FAMILY, REQUEST_ACK, SEQ, PID_ADD_DEST, &payload)
}

fn get_service_dump() -> Vec<u8> {
    message(
        IPVS_FAMILY,
        REQUEST_ACK_DUMP,
        SEQ,
        PID_LIST,
        &genl_header(4),
    )
}

fn ipvs_decoder() -> NetlinkDecoder {
    let mut decoder = NetlinkDecoder::new();
    decoder.learn_family(IPVS_FAMILY, "IPVS");
    decoder
}

fn decode_one(bytes: &[u8]) -> (String, Vec<String>, IpvsCommand) {
    let decoded = ipvs_decoder().decode(16, bytes);
    assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
    assert_eq!(decoded.messages.len(), 1);
    let message = &decoded.messages[0];
    let command = ipvs_command(message).expect("an IPVS message");
    (
        message.header.type_name.to_string(),
        message
            .header
            .flags
            .iter()
            .map(ToString::to_string)
            .collect(),
        command,
    )
}

#[test]
fn built_messages_equal_what_ipvsadm_sent() {
    let frames = read_nlmon(BUSYBOX);
    let frame = |number: usize| &frames[number - 1].bytes;
    assert_eq!(&new_service(), frame(30));
    assert_eq!(&new_dest(), frame(44));
    assert_eq!(&get_service_dump(), frame(58));
}

#[test]
fn new_service_tcp_rr() {
    let (type_name, flags, command) = decode_one(&new_service());
    assert_eq!(type_name, "IPVS_CMD_NEW_SERVICE");
    assert_eq!(flags, ["REQUEST", "ACK"]);
    assert_eq!(command.cmd, "IPVS_CMD_NEW_SERVICE");
    let service = command.service.expect("service");
    assert_eq!(service.af.as_deref(), Some("inet"));
    assert_eq!(service.protocol.as_deref(), Some("TCP"));
    assert_eq!(service.address.as_deref(), Some("10.0.0.1"));
    assert_eq!(service.port, Some(80));
    assert_eq!(service.scheduler.as_deref(), Some("rr"));
    assert_eq!(service.flags, Some(vec![]));
    assert_eq!(service.flags_mask, Some(u32::MAX));
    assert_eq!(service.netmask.as_deref(), Some("255.255.255.255"));
    assert!(command.dest.is_none());
}

#[test]
fn new_dest_masq_weight_1() {
    let (type_name, _, command) = decode_one(&new_dest());
    assert_eq!(type_name, "IPVS_CMD_NEW_DEST");
    let dest = command.dest.expect("dest");
    assert_eq!(dest.address.as_deref(), Some("10.0.0.2"));
    assert_eq!(dest.port, Some(80));
    assert_eq!(dest.forwarding.as_deref(), Some("masq"));
    assert_eq!(dest.weight, Some(1));
    assert_eq!(dest.u_threshold, Some(0));
    assert_eq!(dest.l_threshold, Some(0));
    assert_eq!(dest.af.as_deref(), Some("inet"));
    assert_eq!(dest.tun_type.as_deref(), Some("ipip"));
    assert_eq!(
        command.service.and_then(|s| s.address),
        Some("10.0.0.1".to_string())
    );
}

#[test]
fn get_service_dump_request() {
    let (type_name, flags, command) = decode_one(&get_service_dump());
    assert_eq!(type_name, "IPVS_CMD_GET_SERVICE");
    assert_eq!(flags, ["REQUEST", "ACK", "DUMP"]);
    assert!(command.service.is_none());
}

#[test]
fn ipvs_command_serializes_as_an_object() {
    let (_, _, command) = decode_one(&new_dest());
    let value = serde_json::to_value(&command).unwrap();
    assert_eq!(value["cmd"], "IPVS_CMD_NEW_DEST");
    assert_eq!(value["service"]["protocol"], "TCP");
    assert_eq!(value["dest"]["forwarding"], "masq");
    let back: IpvsCommand = serde_json::from_value(value).unwrap();
    assert_eq!(back, command);
}

#[test]
fn error_reply_to_new_service() {
    // -EEXIST ("ipvsadm: Service already exists"), capped: only the request header echoed.
    let request = new_service();
    let mut payload = (-17i32).to_ne_bytes().to_vec();
    payload.extend_from_slice(&request[..16]);
    let capped = message(2, 0x100, SEQ, PID_ADD_SERVICE, &payload);
    // Uncapped: the whole request is echoed, so its genl command names it.
    let mut payload = (-17i32).to_ne_bytes().to_vec();
    payload.extend_from_slice(&request);
    let uncapped = message(2, 0, SEQ, PID_ADD_SERVICE, &payload);

    let mut decoder = ipvs_decoder();
    for (bytes, request_type) in [(capped, "IPVS"), (uncapped, "IPVS_CMD_NEW_SERVICE")] {
        let decoded = decoder.decode(16, &bytes);
        assert!(decoded.errors.is_empty(), "{:?}", decoded.errors);
        let MessageBody::Error(error) = &decoded.messages[0].body else {
            panic!("not an error: {:?}", decoded.messages[0].body);
        };
        assert_eq!(error.error, -17);
        assert_eq!(error.errno, "EEXIST");
        assert_eq!(error.text, "File exists");
        let echoed = error.request.as_ref().expect("echoed header");
        assert_eq!(echoed.type_name, request_type);
        assert_eq!(echoed.type_id, IPVS_FAMILY);
        assert_eq!(echoed.seq, SEQ);
    }
}

#[test]
fn dump_reply_with_stats_and_unflagged_nests() {
    // Kernel replies nest without NLA_F_NESTED and add counters; STATS64 wins over STATS.
    let stats = |kind: u16, conns: &[u8]| attr(kind, &[attr(1, conns), attr(11, &[0; 4])].concat());
    let service = attr(
        1,
        &[
            attr(1, &2u16.to_ne_bytes()),
            attr(5, &7u32.to_ne_bytes()), // FWMARK
            attr(6, b"wlc\0"),
            attr(7, &[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), // persistent
            stats(10, &5u32.to_ne_bytes()),
            stats(12, &9u64.to_ne_bytes()),
            attr(99, &[1, 2]),
        ]
        .concat(),
    );
    let bytes = message(
        IPVS_FAMILY,
        0x2,
        SEQ,
        PID_LIST,
        &[genl_header(1), service].concat(),
    );
    let (_, flags, command) = decode_one(&bytes);
    assert_eq!(flags, ["MULTI"]);
    let service = command.service.unwrap();
    assert_eq!(service.fwmark, Some(7));
    assert_eq!(service.scheduler.as_deref(), Some("wlc"));
    assert_eq!(service.flags, Some(vec!["persistent".into()]));
    assert_eq!(service.stats.unwrap()["conns"], 9);
    assert_eq!(service.other_attributes.len(), 1);
    assert_eq!(service.other_attributes[0].attr_type, 99);
    assert_eq!(service.other_attributes[0].hex, "0102");
}

#[test]
fn info_reply_and_overrunning_attribute() {
    let info = [
        genl_header(14),
        attr(1, &0x010201u32.to_ne_bytes()),
        attr(2, &4096u32.to_ne_bytes()),
    ]
    .concat();
    let (type_name, _, command) = decode_one(&message(IPVS_FAMILY, 0, 1, 2, &info));
    assert_eq!(type_name, "IPVS_CMD_SET_INFO");
    let info = command.info.unwrap();
    assert_eq!(info.version.as_deref(), Some("1.2.1"));
    assert_eq!(info.conn_tab_size, Some(4096));

    // A service nest whose second attribute claims 200 bytes: the first is kept, the error
    // names the attribute's offset (16 header + 4 genl + 4 nest header + 8 first attribute).
    let mut broken = service_tcp([10, 0, 0, 1], 80, "rr");
    broken[4 + 8] = 200;
    let bytes = message(
        IPVS_FAMILY,
        REQUEST_ACK,
        1,
        2,
        &[genl_header(1), broken].concat(),
    );
    let decoded = ipvs_decoder().decode(16, &bytes);
    assert_eq!(decoded.messages.len(), 1);
    assert!(
        matches!(
            decoded.errors[..],
            [crate::decode::netlink::DecodeError::BadAttribute {
                offset: 32,
                len: 200,
                ..
            }]
        ),
        "{:?}",
        decoded.errors
    );
    let command = ipvs_command(&decoded.messages[0]).unwrap();
    assert_eq!(command.service.unwrap().af.as_deref(), Some("inet"));
    assert!(decoded.messages[0].error.is_some());
}
