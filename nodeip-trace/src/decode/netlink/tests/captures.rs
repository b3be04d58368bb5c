//! The real nlmon captures in `tests/fixtures/nlmon/`: every frame decodes without errors,
//! message counts per type match what tshark counts, key facts hold, the decoded JSON equals
//! the golden file (`cargo xtask bless` rewrites it), and mangled frames never panic the decoder.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;

use crate::decode::netlink::{ipvs_command, DecodedBuffer, NetlinkDecoder};
use crate::golden::{decoded_frames_json, DecodedFrame};
use crate::model::netlink::{MessageBody, MessageDetail, NetlinkMessage};

pub(super) const BUSYBOX: &str = "busybox-ip-ipvsadm-getent";
pub(super) const IPROUTE2: &str = "iproute2-secondary-ipvs";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate lives in the workspace")
        .to_path_buf()
}

/// One nlmon frame: netlink protocol (bytes 14-15 of the 16-byte header, big-endian) and the
/// messages after the header.
pub(super) struct Frame {
    pub(super) number: usize,
    pub(super) protocol: u16,
    pub(super) bytes: Vec<u8>,
}

pub(super) fn read_nlmon(fixture: &str) -> Vec<Frame> {
    read_nlmon_at(&fixture_path(fixture))
}

/// The path of the nlmon fixture named `fixture`.
fn fixture_path(fixture: &str) -> PathBuf {
    repo_root().join(format!("tests/fixtures/nlmon/{fixture}.pcap"))
}

/// The frames of the nlmon pcap at `path`.
fn read_nlmon_at(path: &Path) -> Vec<Frame> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = PcapReader::new(file).expect("pcap header");
    assert_eq!(reader.header().datalink, DataLink::NETLINK);
    let mut frames = Vec::new();
    while let Some(packet) = reader.next_packet() {
        let packet = packet.expect("pcap record");
        let data = &packet.data;
        assert!(data.len() >= 16, "frame shorter than the nlmon header");
        frames.push(Frame {
            number: frames.len() + 1,
            protocol: u16::from_be_bytes([data[14], data[15]]),
            bytes: data[16..].to_vec(),
        });
    }
    frames
}

/// Decodes a capture in order with one decoder, as the offline analyser does.
/// Decodes a capture as `analyze` does: in two passes, the interface names of its link
/// messages (wherever they are) known before the first frame.
fn decode_capture(fixture: &str) -> Vec<(Frame, DecodedBuffer)> {
    let frames = read_nlmon(fixture);
    let mut first = NetlinkDecoder::new();
    for frame in &frames {
        first.decode(frame.protocol, &frame.bytes);
    }
    let mut names = BTreeMap::new();
    first.swap_interfaces(&mut names);
    let mut decoder = NetlinkDecoder::new();
    decoder.swap_interfaces(&mut names);
    frames
        .into_iter()
        .map(|frame| {
            let decoded = decoder.decode(frame.protocol, &frame.bytes);
            (frame, decoded)
        })
        .collect()
}

fn messages(decoded: &[(Frame, DecodedBuffer)]) -> impl Iterator<Item = &NetlinkMessage> {
    decoded.iter().flat_map(|(_, buffer)| &buffer.messages)
}

fn counts_by_type(decoded: &[(Frame, DecodedBuffer)]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for message in messages(decoded) {
        *counts
            .entry(message.header.type_name.to_string())
            .or_default() += 1;
    }
    counts
}

fn assert_no_errors(decoded: &[(Frame, DecodedBuffer)]) {
    for (frame, buffer) in decoded {
        assert!(
            buffer.errors.is_empty(),
            "frame {}: {:?}",
            frame.number,
            buffer.errors
        );
        for message in &buffer.messages {
            assert_eq!(message.error, None, "frame {}", frame.number);
            assert!(
                !matches!(message.body, MessageBody::Raw(_)),
                "frame {}: {} left raw",
                frame.number,
                message.header.type_name
            );
        }
    }
}

/// Counts per type from `tshark -r FILE -T fields -e netlink.family -e netlink.hdr_type
/// -e netlink-route.nltype -e genl.family_id -e genl.ctrl.cmd -e genl.cmd` (tshark 4.0.17):
/// `netlink-route.nltype` lists rtnetlink types, `netlink.hdr_type` the control messages (the
/// echoed request header of each NLMSG_ERROR too, not counted), `genl.ctrl.cmd` nlctrl and
/// `genl.cmd` IPVS (family 0x20) commands.
const IPVS_AND_NLCTRL_COUNTS: &[(&str, usize)] = &[
    ("nlctrl CTRL_CMD_GETFAMILY", 10),
    ("nlctrl CTRL_CMD_NEWFAMILY", 10),
    ("IPVS_CMD_GET_DEST", 1),
    ("IPVS_CMD_GET_INFO", 3),
    ("IPVS_CMD_GET_SERVICE", 1),
    ("IPVS_CMD_NEW_DEST", 2),
    ("IPVS_CMD_NEW_SERVICE", 2),
    ("IPVS_CMD_SET_INFO", 3),
];

fn expected_counts(route_and_control: &[(&str, usize)]) -> BTreeMap<String, usize> {
    route_and_control
        .iter()
        .chain(IPVS_AND_NLCTRL_COUNTS)
        .map(|(name, count)| (name.to_string(), *count))
        .collect()
}

#[test]
fn busybox_capture_decodes_with_tshark_counts() {
    let decoded = decode_capture(BUSYBOX);
    assert_eq!(decoded.len(), 70);
    assert_no_errors(&decoded);
    let expected = expected_counts(&[
        ("RTM_NEWLINK", 6),
        ("RTM_GETLINK", 3),
        ("RTM_NEWADDR", 3),
        ("RTM_GETADDR", 2),
        ("RTM_NEWROUTE", 4),
        ("RTM_GETROUTE", 2),
        ("NLMSG_ERROR", 15),
        ("NLMSG_DONE", 8),
    ]);
    assert_eq!(counts_by_type(&decoded), expected);
}

#[test]
fn iproute2_capture_decodes_with_tshark_counts() {
    let decoded = decode_capture(IPROUTE2);
    assert_eq!(decoded.len(), 104);
    assert_no_errors(&decoded);
    let expected = expected_counts(&[
        ("RTM_NEWLINK", 20),
        ("RTM_GETLINK", 10),
        ("RTM_NEWADDR", 11),
        ("RTM_GETADDR", 2),
        ("RTM_NEWROUTE", 9),
        ("RTM_GETROUTE", 4),
        ("NLMSG_ERROR", 23),
        ("NLMSG_DONE", 6),
    ]);
    assert_eq!(counts_by_type(&decoded), expected);
}

#[test]
fn iproute2_capture_facts() {
    let decoded = decode_capture(IPROUTE2);
    let addresses: Vec<_> = messages(&decoded)
        .filter_map(|message| match &message.body {
            // The dump replies (MULTI), not the RTM_NEWADDR requests that added them.
            MessageBody::Address(address)
                if message.header.type_name == "RTM_NEWADDR"
                    && message.header.flags.iter().any(|f| f == "MULTI") =>
            {
                Some(address)
            }
            _ => None,
        })
        .collect();
    let secondary = addresses
        .iter()
        .find(|a| a.local.as_deref() == Some("192.0.2.20"))
        .expect("192.0.2.20 in the address dump");
    assert_eq!(secondary.prefix_len, 24);
    assert_eq!(secondary.ifname.as_deref(), Some("veth0"));
    assert!(secondary.secondary);
    assert!(secondary.flags.iter().any(|f| f == "secondary"));
    let primary = addresses
        .iter()
        .find(|a| a.local.as_deref() == Some("192.0.2.10"))
        .expect("192.0.2.10 in the address dump");
    assert!(!primary.secondary);

    // `ip route get 192.0.2.20` (a secondary local address): the answer is a local route via
    // lo with the primary as source. The kernel reports table main (254), not local: with no
    // policy rules it merges the local table into main, and the answer names the table the
    // lookup ran in. The local-table dump shows the same route in table local.
    let routes_to = |dst: &'static str| {
        messages(&decoded).filter_map(move |message| match &message.body {
            MessageBody::Route(route)
                if message.header.type_name == "RTM_NEWROUTE"
                    && route.dst.as_deref() == Some(dst) =>
            {
                Some(route)
            }
            _ => None,
        })
    };
    let answers: Vec<_> = routes_to("192.0.2.20")
        .filter(|route| route.flags.iter().any(|f| f == "CLONED"))
        .collect();
    assert_eq!(answers.len(), 1, "one route get answer for 192.0.2.20");
    let answer = answers[0];
    assert_eq!(answer.route_type, "local");
    assert_eq!(answer.table, "main");
    assert!(answer.flags.iter().any(|f| f == "RTCF_LOCAL"));
    assert_eq!(answer.prefsrc.as_deref(), Some("192.0.2.10"));
    assert_eq!(answer.oif_name.as_deref(), Some("lo"));
    let in_local_table = routes_to("192.0.2.20")
        .find(|route| route.table == "local")
        .expect("192.0.2.20 in the local table dump");
    assert_eq!(in_local_table.route_type, "local");
    assert_eq!(in_local_table.scope, "host");

    let commands: Vec<_> = messages(&decoded).filter_map(ipvs_command).collect();
    let new_service = commands
        .iter()
        .find(|c| c.cmd == "IPVS_CMD_NEW_SERVICE" && c.dest.is_none())
        .and_then(|c| c.service.as_ref())
        .expect("IPVS_CMD_NEW_SERVICE");
    assert_eq!(new_service.protocol.as_deref(), Some("TCP"));
    assert_eq!(new_service.address.as_deref(), Some("192.0.2.10"));
    assert_eq!(new_service.port, Some(30080));
    assert_eq!(new_service.scheduler.as_deref(), Some("rr"));
    let new_dest = commands
        .iter()
        .find(|c| c.cmd == "IPVS_CMD_NEW_DEST")
        .and_then(|c| c.dest.as_ref())
        .expect("IPVS_CMD_NEW_DEST");
    assert_eq!(new_dest.address.as_deref(), Some("198.51.100.5"));
    assert_eq!(new_dest.port, Some(8080));
    assert_eq!(new_dest.forwarding.as_deref(), Some("masq"));
}

fn check_golden(fixture: &str) {
    let decoded = decode_capture(fixture);
    let frames: Vec<_> = decoded
        .iter()
        .map(|(frame, buffer)| DecodedFrame {
            frame: frame.number,
            protocol: crate::decode::netlink::protocol_name(frame.protocol).into_owned(),
            messages: &buffer.messages,
            errors: buffer.errors.iter().map(ToString::to_string).collect(),
        })
        .collect();
    let actual = decoded_frames_json(&frames);
    let path = repo_root().join(format!("tests/golden/decode/{fixture}.json"));
    crate::golden::assert_golden(&path, actual.as_bytes());
    let expected = std::fs::read_to_string(&path).expect("golden file");
    // The golden JSON reads back into the same messages.
    let values: Vec<serde_json::Value> = serde_json::from_str(&expected).expect("golden JSON");
    for (value, (_, buffer)) in values.iter().zip(&decoded) {
        let messages: Vec<NetlinkMessage> =
            serde_json::from_value(value["messages"].clone()).expect("messages deserialize");
        assert_eq!(messages, buffer.messages);
    }
}

#[test]
fn busybox_capture_matches_golden_json() {
    check_golden(BUSYBOX);
}

#[test]
fn iproute2_capture_matches_golden_json() {
    check_golden(IPROUTE2);
}

/// xorshift64: reproducible pseudo-random numbers without a dependency.
pub(super) struct Xorshift(pub(super) u64);

impl Xorshift {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The first pass's scan finds the very names the decoder learns from each real capture.
#[test]
fn the_link_name_scan_learns_what_the_decoder_learns() {
    for fixture in [BUSYBOX, IPROUTE2] {
        let (mut decoder, mut scanned) = (NetlinkDecoder::new(), BTreeMap::new());
        for frame in read_nlmon(fixture).iter().filter(|f| f.protocol == 0) {
            decoder.decode(0, &frame.bytes);
            scanned.extend(crate::decode::netlink::link_names(&frame.bytes));
        }
        let mut learned = BTreeMap::new();
        decoder.swap_interfaces(&mut learned);
        assert!(!learned.is_empty(), "{fixture}");
        assert_eq!(scanned, learned, "{fixture}");
    }
}

/// Truncated, sliced and bit-flipped copies of every captured frame, decoded as every
/// protocol: the decoder must return (errors allowed), never panic.
#[test]
fn mangled_frames_never_panic() {
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut decoder = NetlinkDecoder::new();
    decoder.learn_family(0x20, "IPVS");
    let mut total = 0usize;
    for fixture in [BUSYBOX, IPROUTE2] {
        for frame in read_nlmon(fixture) {
            let bytes = &frame.bytes;
            let mut variants: Vec<Vec<u8>> = Vec::new();
            for _ in 0..8 {
                variants.push(bytes[..rng.below(bytes.len() + 1)].to_vec());
                let start = rng.below(bytes.len());
                let end = start + rng.below(bytes.len() - start + 1);
                variants.push(bytes[start..end].to_vec());
                let mut flipped = bytes.clone();
                for _ in 0..1 + rng.below(8) {
                    let at = rng.below(flipped.len());
                    flipped[at] ^= 1 << rng.below(8);
                }
                variants.push(flipped);
                let mut lengths = bytes.clone();
                // Rewrite a random u16 (likely an nla_len or nlmsg_len byte) with a random value.
                let at = rng.below(lengths.len().saturating_sub(1));
                if let Some(slot) = lengths.get_mut(at..at + 2) {
                    slot.copy_from_slice(&(rng.next() as u16).to_ne_bytes());
                }
                variants.push(lengths);
            }
            for variant in &variants {
                let _ = crate::decode::netlink::link_names(variant);
                for protocol in [0, 6, 16, 9] {
                    let decoded = decoder.decode(protocol, variant);
                    serde_json::to_string(&decoded.messages).expect("serializable");
                    total += 1;
                }
            }
        }
    }
    assert!(total > 5000);
}

/// A fully decoded message without what [`MessageDetail::Shown`] leaves out; whether it had any.
fn without_unshown(mut message: NetlinkMessage) -> (NetlinkMessage, bool) {
    let had = match &mut message.body {
        MessageBody::Link(b) => std::mem::take(&mut b.other_attributes).len(),
        MessageBody::Address(b) => std::mem::take(&mut b.other_attributes).len(),
        MessageBody::Route(b) => std::mem::take(&mut b.other_attributes).len(),
        MessageBody::Neighbour(b) => std::mem::take(&mut b.other_attributes).len(),
        MessageBody::Rule(b) => std::mem::take(&mut b.other_attributes).len(),
        MessageBody::Nlctrl(b) => {
            std::mem::take(&mut b.ops).len()
                + std::mem::take(&mut b.mcast_groups).len()
                + std::mem::take(&mut b.other_attributes).len()
        }
        _ => 0,
    };
    (message, had > 0)
}

/// The fixtures, and the malformed captures whose frames are good but whose netlink is not.
fn fixtures_and_malformed_netlink() -> Vec<PathBuf> {
    let malformed = repo_root().join("tests/malformed");
    let mut paths: Vec<PathBuf> = [BUSYBOX, IPROUTE2].map(fixture_path).into();
    for entry in std::fs::read_dir(&malformed).expect("tests/malformed") {
        let path = entry.expect("entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".pcap")
            && ["attr-", "nlmsg-", "genl-"]
                .iter()
                .any(|p| name.starts_with(p))
        {
            paths.push(path);
        }
    }
    paths
}

#[test]
fn shown_detail_is_full_detail_without_the_raw_lists_and_with_the_same_problems() {
    let paths = fixtures_and_malformed_netlink();
    let (mut left_out, mut problems) = (0, 0);
    for path in &paths {
        let (mut full, mut shown) = (NetlinkDecoder::new(), NetlinkDecoder::new());
        shown.set_detail(MessageDetail::Shown);
        for frame in read_nlmon_at(path) {
            let expected = full.decode(frame.protocol, &frame.bytes);
            let got = shown.decode(frame.protocol, &frame.bytes);
            let at = format!("{} frame {}", path.display(), frame.number);
            assert_eq!(got.errors, expected.errors, "{at}: problems");
            problems += expected.errors.len();
            let expected: Vec<NetlinkMessage> = expected
                .messages
                .into_iter()
                .map(|m| {
                    let (message, had) = without_unshown(m);
                    left_out += usize::from(had);
                    message
                })
                .collect();
            assert_eq!(got.messages, expected, "{at}: messages");
        }
    }
    // The comparison bites: messages lost lists, and problems were compared.
    assert!(left_out > 20, "{left_out} messages had lists to leave out");
    assert!(problems > 5, "{problems} problems compared");
}

/// A message as `#[serde(flatten)]` of its header writes it: the judge of `NetlinkMessage`'s
/// hand-written `Serialize`.
#[derive(serde::Serialize)]
struct FlattenedMessage<'a> {
    #[serde(flatten)]
    header: &'a crate::model::netlink::MessageHeader,
    body: &'a MessageBody,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: &'a Option<String>,
}

#[test]
fn messages_serialize_as_their_flattened_header_and_body_would() {
    let paths = fixtures_and_malformed_netlink();
    let (mut messages, mut with_error) = (0, 0);
    for path in &paths {
        let mut decoder = NetlinkDecoder::new();
        for frame in read_nlmon_at(path) {
            for m in decoder.decode(frame.protocol, &frame.bytes).messages {
                let flattened = FlattenedMessage {
                    header: &m.header,
                    body: &m.body,
                    error: &m.error,
                };
                assert_eq!(
                    serde_json::to_string(&m).unwrap(),
                    serde_json::to_string(&flattened).unwrap(),
                    "{} frame {}",
                    path.display(),
                    frame.number
                );
                let back: NetlinkMessage =
                    serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
                assert_eq!(back.header, m.header);
                messages += 1;
                with_error += usize::from(m.error.is_some());
            }
        }
    }
    assert!(
        messages > 100 && with_error > 0,
        "{messages} messages, {with_error} with an error"
    );
}
