//! Tests of the pcap/pcapng writers: golden bytes, byte-identity with the real nlmon fixtures,
//! the pcapng blocks as `pcap-file` parses them, comments, flushing and errors.
use std::io;

use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::{Block, PcapNgReader};

use super::*;
use crate::model::frame::Task;
use crate::model::nlmon::NamespaceNote;
use crate::model::nlmon::{PACKET_HOST, PACKET_OUTGOING};
use crate::source::capture::tests::{fixture, read_all, sample_frames, FIXTURES};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// RTM_GETLINK dump request (len 20, type 0x12, flags REQUEST|DUMP, seq 1, pid 0, AF_PACKET).
fn getlink_frame(direction: Option<Direction>) -> NetlinkFrame {
    let bytes = hex("14000000 1200 0103 01000000 00000000 11000000");
    NetlinkFrame {
        wall_ns: 1_795_267_397_571_890_123,
        ts_ns: 42,
        protocol: 0,
        direction,
        task: None,
        netns: 0,
        total_len: bytes.len() as u32,
        bytes,
    }
}

#[cfg(target_endian = "little")]
#[test]
fn pcap_golden_bytes() {
    let mut writer = NlmonWriter::new(Vec::new()).unwrap();
    writer
        .write_frame(&getlink_frame(Some(Direction::Send)))
        .unwrap();
    writer
        .write_frame(&getlink_frame(Some(Direction::Recv)))
        .unwrap();
    let expected = hex("4d3cb2a1 0200 0400 00000000 00000000 00000400 fd000000
         459b016b cb591622 24000000 24000000
         0004 0338 0000 0000000000000000 0000
         14000000 1200 0103 01000000 00000000 11000000
         459b016b cb591622 24000000 24000000
         0000 0338 0000 0000000000000000 0000
         14000000 1200 0103 01000000 00000000 11000000");
    assert_eq!(writer.into_inner(), expected);
}

#[test]
fn nlmon_header_encodes_and_decodes() {
    let header = NlmonHeader::for_frame(Some(Direction::Send), 16);
    let bytes = header.encode();
    assert_eq!(bytes, *b"\x00\x04\x03\x38\0\0\0\0\0\0\0\0\0\0\x00\x10");
    assert_eq!(NlmonHeader::decode(&bytes), Some(header));
    assert_eq!(
        NlmonHeader::for_frame(Some(Direction::Recv), 0).packet_type,
        PACKET_HOST
    );
    assert_eq!(NlmonHeader::for_frame(None, 0).packet_type, PACKET_OUTGOING);
    assert_eq!(NlmonHeader::decode(&bytes[..15]), None);
}

#[cfg(target_endian = "little")]
#[test]
fn genl_newfamily_golden_bytes() {
    let expected = hex("28000000 1000 0000 00000000 00000000
         01 02 0000
         0900 0200 49505653 00 000000
         0600 0100 2000 0000");
    assert_eq!(genl_newfamily_message(0x20, "IPVS").unwrap(), expected);
}

#[test]
fn genl_family_names_are_checked() {
    for bad in ["", "sixteen-bytes-xx", "a\0b"] {
        let err = genl_newfamily_message(1, bad).unwrap_err();
        assert!(matches!(err, PcapError::BadFamilyName { .. }), "{bad:?}");
        assert!(err.to_string().contains("1 to 15 bytes"), "{err}");
    }
    assert!(genl_newfamily_message(1, "fifteen-bytes-x").is_ok());
}

#[test]
fn our_frames_are_byte_identical_to_nlmon_except_the_recv_packet_type() {
    for (name, count) in FIXTURES {
        let original = fixture(name);
        let (frames, error) = read_all(&original);
        assert!(error.is_none());
        let mut writer = NlmonWriter::new(Vec::new()).unwrap();
        for f in &frames {
            writer.write_frame(&f.frame).unwrap();
        }
        let ours = writer.into_inner();
        // Same file layout: 24-byte header, then records of the same sizes at the same offsets.
        assert_eq!(ours.len(), original.len(), "{name}");
        let le32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let (mut recv, mut differing) = (0, 0);
        for f in &frames {
            let at = f.file_offset as usize;
            // Timestamps: the fixture is µs, ours ns.
            assert_eq!(
                le32(&ours, at),
                le32(&original, at),
                "{name} frame {}",
                f.number
            );
            assert_eq!(le32(&ours, at + 4), le32(&original, at + 4) * 1000);
            let caplen = le32(&original, at + 8) as usize;
            assert_eq!(ours[at + 8..at + 16], original[at + 8..at + 16], "lengths");
            let (o, n) = (
                &original[at + 16..at + 16 + caplen],
                &ours[at + 16..at + 16 + caplen],
            );
            assert_eq!(
                o[..2],
                [0, 4],
                "nlmon writes PACKET_OUTGOING in both directions"
            );
            assert_eq!(
                o[2..],
                n[2..],
                "{name} frame {}: all but the packet type",
                f.number
            );
            let expected_type = match f.frame.direction {
                Some(Direction::Recv) => [0, 0],
                _ => [0, 4],
            };
            assert_eq!(n[..2], expected_type);
            recv += usize::from(f.frame.direction == Some(Direction::Recv));
            differing += usize::from(o[..2] != n[..2]);
        }
        assert_eq!(differing, recv, "{name}: only recv frames differ");
        assert!(recv > 0 && recv < count);
    }
}

#[test]
fn pcapng_blocks_as_pcap_file_reads_them() {
    let section = SectionInfo {
        user_application: "nodeip-trace 0.1.0".into(),
        hardware: "x86_64".into(),
        os: "Linux 6.18.0".into(),
        host: "node-7".into(),
    };
    let mut writer = NlmonPcapngWriter::new(Vec::new(), &section).unwrap();
    let mut frame = getlink_frame(Some(Direction::Send));
    frame.task = Some(Task {
        pid: 4321,
        tid: 4322,
        comm: "kubelet".into(),
    });
    writer
        .write_annotated_frame(
            &frame,
            &[
                ("pod", "kube-system/kube-proxy-x"),
                ("container", "kube-proxy"),
            ],
        )
        .unwrap();
    writer
        .write_genl_family(0x20, "IPVS", frame.wall_ns + 1)
        .unwrap();
    let bytes = writer.into_inner();

    let mut reader = PcapNgReader::new(&bytes[..]).unwrap();
    let shb = reader.section().clone();
    assert!(shb.options.contains(&SectionHeaderOption::UserApplication(
        "nodeip-trace 0.1.0".into()
    )));
    assert!(shb
        .options
        .contains(&SectionHeaderOption::Hardware("x86_64".into())));
    assert!(shb
        .options
        .contains(&SectionHeaderOption::OS("Linux 6.18.0".into())));
    assert!(shb
        .options
        .contains(&SectionHeaderOption::Comment("host=node-7".into())));
    let mut blocks = Vec::new();
    while let Some(block) = reader.next_block() {
        blocks.push(block.unwrap().into_owned());
    }
    let Block::InterfaceDescription(idb) = &blocks[0] else {
        panic!("{:?}", blocks[0])
    };
    assert_eq!(idb.linktype, DataLink::NETLINK);
    assert_eq!(idb.snaplen, SNAPLEN);
    assert!(idb
        .options
        .contains(&InterfaceDescriptionOption::IfName("nodeip-trace".into())));
    assert!(idb
        .options
        .contains(&InterfaceDescriptionOption::IfTsResol(9)));
    let Block::EnhancedPacket(epb) = &blocks[1] else {
        panic!("{:?}", blocks[1])
    };
    assert_eq!(epb.timestamp.as_nanos(), frame.wall_ns as u128);
    assert_eq!(epb.data[..2], [0, 4]);
    assert_eq!(epb.data[16..], frame.bytes[..]);
    assert_eq!(
        epb.options[..2],
        [
            EnhancedPacketOption::Comment(
                "pid=4321 tid=4322 comm=kubelet dir=send pod=kube-system/kube-proxy-x container=kube-proxy".into()
            ),
            EnhancedPacketOption::Flags(EPB_FLAG_OUTBOUND),
        ]
    );
    // epb_packetid (5) = 1, in the section's byte order (pcap-file knows it as an unknown code).
    let EnhancedPacketOption::Unknown(id) = &epb.options[2] else {
        panic!("{:?}", epb.options)
    };
    assert_eq!((id.code, &id.value[..]), (5, &1u64.to_ne_bytes()[..]));
    let Block::EnhancedPacket(family) = &blocks[2] else {
        panic!("{:?}", blocks[2])
    };
    assert_eq!(
        family.data[..2],
        [0, 0],
        "the announcement is a kernel reply"
    );
    assert_eq!(family.data[14..16], [0, 16], "NETLINK_GENERIC");
    assert_eq!(
        family.data[16..],
        genl_newfamily_message(0x20, "IPVS").unwrap()[..]
    );
    assert!(family.options.contains(&EnhancedPacketOption::Comment(
        "synthetic=genl-family name=IPVS id=0x0020".into()
    )));
}

/// A fake directory of two namespaces: 4026531840 (unnamed: lo, eth0) and 4026532001 (`ip netns`
/// blue: lo, veth-b).
struct TwoNamespaces;

impl InterfaceDirectory for TwoNamespaces {
    fn netns_of(&mut self, _pid: u32) -> Option<u64> {
        None
    }

    fn interfaces_in(&mut self, netns: u64, _pid: u32) -> BTreeMap<u32, String> {
        let names: &[(u32, &str)] = match netns {
            4_026_531_840 => &[(1, "lo"), (2, "eth0")],
            4_026_532_001 => &[(1, "lo"), (7, "veth-b")],
            _ => &[],
        };
        names.iter().map(|(i, n)| (*i, n.to_string())).collect()
    }

    fn netns_name(&mut self, netns: u64) -> Option<String> {
        (netns == 4_026_532_001).then(|| "blue".into())
    }
}

/// Frames in two namespaces and one of unknown namespace, written as pcapng.
pub(crate) fn namespaced_pcapng() -> (Vec<NetlinkFrame>, Vec<u8>) {
    let mut frames = Vec::new();
    for (i, netns) in [4_026_531_840u32, 4_026_532_001, 0, 4_026_531_840]
        .iter()
        .enumerate()
    {
        let mut frame = getlink_frame(Some(if i % 2 == 0 {
            Direction::Send
        } else {
            Direction::Recv
        }));
        frame.netns = *netns;
        frame.wall_ns += i as i128;
        frames.push(frame);
    }
    let section = SectionInfo::from_host();
    let mut writer = NlmonPcapngWriter::new(Vec::new(), &section)
        .unwrap()
        .with_namespaces(Box::new(TwoNamespaces));
    for frame in &frames {
        writer.write_frame(frame).unwrap();
    }
    (frames, writer.into_inner())
}

#[test]
fn one_interface_per_namespace_named_after_it_with_its_interface_names() {
    let (frames, bytes) = namespaced_pcapng();
    let mut reader = PcapNgReader::new(&bytes[..]).unwrap();
    let mut interfaces = Vec::new();
    let mut packets = Vec::new();
    while let Some(block) = reader.next_block() {
        match block.unwrap().into_owned() {
            Block::InterfaceDescription(idb) => interfaces.push(idb),
            Block::EnhancedPacket(epb) => packets.push(epb),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        interfaces.len(),
        3,
        "one per namespace, written at first sight"
    );
    let option = |i: usize, f: &dyn Fn(&InterfaceDescriptionOption) -> Option<String>| {
        interfaces[i].options.iter().find_map(f).unwrap_or_default()
    };
    let name = |o: &InterfaceDescriptionOption| match o {
        InterfaceDescriptionOption::IfName(n) => Some(n.to_string()),
        _ => None,
    };
    let comment = |o: &InterfaceDescriptionOption| match o {
        InterfaceDescriptionOption::Comment(n) => Some(n.to_string()),
        _ => None,
    };
    let description = |o: &InterfaceDescriptionOption| match o {
        InterfaceDescriptionOption::IfDescription(n) => Some(n.to_string()),
        _ => None,
    };
    assert_eq!(option(0, &name), "netns 4026531840");
    assert_eq!(option(0, &comment), "netns=4026531840 1=lo 2=eth0");
    assert_eq!(option(1, &name), "netns blue");
    assert!(
        option(1, &description).starts_with("network namespace 4026532001 (`ip netns` blue)"),
        "{}",
        option(1, &description)
    );
    assert_eq!(option(1, &comment), "netns=4026532001 1=lo 7=veth-b");
    assert_eq!(option(2, &name), INTERFACE_NAME);
    assert_eq!(option(2, &comment), "");
    let ids: Vec<u32> = packets.iter().map(|p| p.interface_id).collect();
    assert_eq!(ids, [0, 1, 2, 0]);
    assert_eq!(packets.len(), frames.len());
    let note = NamespaceNote::parse(&option(1, &comment)).unwrap();
    assert_eq!(
        (note.netns, note.interfaces.get(&7).map(String::as_str)),
        (4_026_532_001, Some("veth-b"))
    );
    assert_eq!(note.render(), option(1, &comment));
    assert!(NamespaceNote::parse("pid=1 comm=ip").is_none());
}

#[test]
fn comments_round_trip_with_quoting() {
    let task = Task {
        pid: 1,
        tid: 2,
        comm: r#"a "b"\c d"#.into(),
    };
    let text = FrameComment::render(
        Some(&task),
        Some(Direction::Recv),
        &[("pod", "ns/p q"), ("empty", "")],
    );
    assert_eq!(
        text,
        r#"pid=1 tid=2 comm="a \"b\"\\c d" dir=recv pod="ns/p q" empty="""#
    );
    let parsed = FrameComment::parse(&text);
    assert_eq!(parsed.task, Some(task));
    assert_eq!(parsed.direction, Some(Direction::Recv));
    assert_eq!(
        parsed.extra,
        vec![
            ("pod".to_owned(), "ns/p q".to_owned()),
            ("empty".to_owned(), String::new())
        ]
    );
    // Foreign comments: bare words are skipped, a task needs a pid.
    let parsed = FrameComment::parse("captured by someone  note comm=x");
    assert_eq!(parsed.task, None);
    let parsed = FrameComment::parse("pid=9 comm=\"unterminated");
    assert_eq!(parsed.task.unwrap().comm, "unterminated");
    assert_eq!(FrameComment::parse("pid=9").task.unwrap().tid, 9);
}

/// A writer that counts flushes.
#[derive(Default)]
struct Flushes {
    bytes: Vec<u8>,
    flushes: usize,
}

impl Write for Flushes {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.flushes += 1;
        Ok(())
    }
}

#[test]
fn flush_each_frame_flushes_per_frame() {
    let frames = sample_frames();
    let mut pcap = NlmonWriter::new(Flushes::default())
        .unwrap()
        .flush_each_frame(true);
    let mut pcapng = NlmonPcapngWriter::new(Flushes::default(), &SectionInfo::from_host())
        .unwrap()
        .flush_each_frame(true);
    let sinks: [&mut dyn FrameSink; 2] = [&mut pcap, &mut pcapng];
    for sink in sinks {
        for frame in &frames {
            sink.write_frame(frame).unwrap();
        }
    }
    assert_eq!(pcap.into_inner().flushes, frames.len());
    assert_eq!(pcapng.into_inner().flushes, frames.len());
    let mut quiet = NlmonWriter::new(Flushes::default()).unwrap();
    quiet.write_frame(&frames[0]).unwrap();
    assert_eq!(quiet.into_inner().flushes, 0);
}

#[test]
fn long_frames_are_cut_to_the_snaplen() {
    let mut frame = getlink_frame(Some(Direction::Recv));
    frame.bytes = vec![0xab; SNAPLEN as usize + 100];
    frame.total_len = frame.bytes.len() as u32 + 7;
    let mut writer = NlmonWriter::new(Vec::new()).unwrap();
    writer.write_frame(&frame).unwrap();
    let out = writer.into_inner();
    let le32 = |at: usize| u32::from_ne_bytes(out[at..at + 4].try_into().unwrap());
    assert_eq!(le32(24 + 8), SNAPLEN);
    assert_eq!(le32(24 + 12), 16 + frame.total_len);
    assert_eq!(out.len(), 24 + 16 + SNAPLEN as usize);
}

#[test]
fn timestamps_outside_pcap_range_are_errors() {
    let mut writer = NlmonWriter::new(Vec::new()).unwrap();
    for wall_ns in [-1, (u32::MAX as i128 + 1) * 1_000_000_000] {
        let mut frame = getlink_frame(None);
        frame.wall_ns = wall_ns;
        let err = writer.write_frame(&frame).unwrap_err();
        assert!(
            matches!(err, PcapError::TimestampOutOfRange { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("clock"), "{err}");
    }
}

/// A writer whose reader has gone away.
#[derive(Debug)]
struct Closed;

impl Write for Closed {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::BrokenPipe.into())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn broken_pipe_is_recognisable() {
    let err = NlmonWriter::new(Closed).unwrap_err();
    assert!(err.is_broken_pipe(), "{err:?}");
    let err = NlmonPcapngWriter::new(Closed, &SectionInfo::from_host())
        .err()
        .unwrap();
    assert!(err.is_broken_pipe(), "{err:?}");
    assert!(!PcapError::TimestampOutOfRange { wall_ns: -1 }.is_broken_pipe());
}

#[test]
fn section_info_describes_this_host() {
    let info = SectionInfo::from_host();
    assert!(info.user_application.starts_with("nodeip-trace "));
    assert!(info.os.starts_with("Linux"), "{info:?}");
    assert!(
        !info.hardware.is_empty() && !info.host.is_empty(),
        "{info:?}"
    );
}

/// A file under the temp directory for one test, removed when dropped.
struct ScratchFile(std::path::PathBuf);

impl ScratchFile {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let dir = std::env::temp_dir().join(format!("nodeip-trace-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("capture.pcapng");
        std::fs::write(&path, bytes).unwrap();
        Self(path)
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// The section header's comments of a pcapng file, as pcap-file reads them.
fn section_comments_of(bytes: &[u8]) -> Vec<String> {
    let reader = PcapNgReader::new(bytes).unwrap();
    reader
        .section()
        .options
        .iter()
        .filter_map(|o| match o {
            SectionHeaderOption::Comment(c) => Some(c.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn section_comments_are_added_to_a_finished_capture_and_nothing_else_changes() {
    use std::os::unix::fs::PermissionsExt;
    for endianness in [Endianness::Little, Endianness::Big] {
        let section = SectionInfo {
            user_application: "nodeip-trace 0.1.0".into(),
            hardware: "x86_64".into(),
            os: "Linux".into(),
            host: "node-7".into(),
        };
        let mut writer = NlmonPcapngWriter::with_endianness(Vec::new(), &section, endianness)
            .unwrap()
            .with_namespaces(Box::new(TwoNamespaces));
        let frames = sample_frames();
        for frame in &frames {
            writer.write_frame(frame).unwrap();
        }
        let before = writer.into_inner();
        let file = ScratchFile::new(&format!("rewrite-{endianness:?}"), &before);
        std::fs::set_permissions(&file.0, std::fs::Permissions::from_mode(0o600)).unwrap();
        let comments = [
            "2 diagnoses".to_owned(),
            "[WARNING] x — y\n    remedy:   z".into(),
        ];
        add_section_comments(&file.0, &comments).unwrap();
        let after = std::fs::read(&file.0).unwrap();
        assert_eq!(
            section_comments_of(&after),
            [
                "host=node-7",
                "2 diagnoses",
                "[WARNING] x — y\n    remedy:   z"
            ]
        );
        let (old, new) = (read_all(&before).0, read_all(&after).0);
        let frames_of = |c: &[crate::source::capture::CapturedFrame]| {
            c.iter().map(|f| f.frame.clone()).collect::<Vec<_>>()
        };
        assert_eq!(frames_of(&old), frames_of(&new));
        // Everything after the section header is byte for byte the same.
        let shb_len = |b: &[u8]| match endianness {
            Endianness::Big => u32::from_be_bytes(b[4..8].try_into().unwrap()),
            Endianness::Little => u32::from_le_bytes(b[4..8].try_into().unwrap()),
        } as usize;
        assert_eq!(before[shb_len(&before)..], after[shb_len(&after)..]);
        let mode = std::fs::metadata(&file.0).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let left: Vec<_> = std::fs::read_dir(file.0.parent().unwrap())
            .unwrap()
            .collect();
        assert_eq!(left.len(), 1, "no temporary file left: {left:?}");
    }
}

/// The in-place rewrite (no file may be made beside the capture) moves everything after the
/// old header, across several of its 1 MiB steps, and puts the new header first.
#[test]
fn a_section_header_rewritten_in_place_keeps_every_byte_after_it() {
    let body: Vec<u8> = (0..(5u32 << 19) + 7)
        .map(|i| (i * 7 + i / 251) as u8)
        .collect();
    let mut bytes = b"OLD-HEADER:0".to_vec();
    bytes.extend_from_slice(&body);
    let file = ScratchFile::new("in-place", &bytes);
    let header = b"NEW, LONGER HEADER: 28 bytes";
    rewrite_in_place(&file.0, 12, header).unwrap();
    let after = std::fs::read(&file.0).unwrap();
    assert_eq!(&after[..header.len()], header);
    assert!(after[header.len()..] == body[..], "the body moved intact");
    let error = rewrite_in_place(&file.0, 28, b"short").unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn a_file_that_is_not_pcapng_is_left_alone() {
    let file = ScratchFile::new("not-pcapng", b"not a capture at all, but long enough");
    let error = add_section_comments(&file.0, &["x".into()]).unwrap_err();
    assert!(
        matches!(error, PcapError::SectionRewrite { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("section header"), "{error}");
    assert_eq!(
        std::fs::read(&file.0).unwrap(),
        b"not a capture at all, but long enough"
    );
}

#[test]
fn the_adapter_puts_diagnoses_and_summary_in_the_section_header_at_the_end() {
    use crate::model::event::{Diagnosis, Event, EventBody, RunSummary};
    use crate::sink::{EventSink, FrameSinkAdapter};
    let file = ScratchFile::new("adapter", &[]);
    let out = std::fs::File::create(&file.0).unwrap();
    let writer =
        NlmonPcapngWriter::new(std::io::BufWriter::new(out), &SectionInfo::from_host()).unwrap();
    let mut adapter = FrameSinkAdapter::new(Box::new(writer), "capture", Default::default())
        .with_section_comments(SectionComments::for_output(&file.0));
    let event = |body| Event {
        ts: Default::default(),
        ts_ns: 0,
        pid: 0,
        tid: 0,
        comm: Default::default(),
        process: None,
        body,
    };
    adapter
        .frame(&getlink_frame(Some(Direction::Send)))
        .unwrap();
    adapter.flush().unwrap();
    assert_eq!(
        read_all(&std::fs::read(&file.0).unwrap()).0.len(),
        1,
        "flushed per batch"
    );
    adapter
        .event(&event(EventBody::Diagnosis(Diagnosis {
            id: crate::model::event::DiagnosisId::RouteGetResolvesToLo,
            severity: crate::model::event::Severity::Warning,
            summary: "s".into(),
            evidence: vec!["e".into()],
            remedy: "r".into(),
        })))
        .unwrap();
    adapter
        .event(&event(EventBody::Summary(RunSummary {
            events: [("netlink".to_owned(), 1)].into(),
            lost: 0,
            stopped_by: "SIGINT".into(),
            exec_holds: None,
        })))
        .unwrap();
    adapter.finish().unwrap();
    let comments = section_comments_of(&std::fs::read(&file.0).unwrap());
    assert_eq!(
        comments[1..],
        [
            "nodeip-trace at the end of the trace: 1 diagnosis (the next comment)",
            "[WARNING] route-get-resolves-to-lo — s\n    evidence: e\n    remedy:   r",
            "trace summary: 1 events {\"netlink\": 1}, 0 lost, stopped by SIGINT",
        ]
    );
    assert_eq!(
        SectionComments::for_output(Path::new("-")),
        SectionComments::Stream
    );
    assert_eq!(
        SectionComments::for_output(Path::new("/dev/null")),
        SectionComments::Stream
    );
}

#[test]
fn a_plain_pcap_reads_no_events_and_a_pcapng_its_diagnoses() {
    use crate::sink::limit::{LimitedRecords, SizeLimitedSink};
    use crate::sink::{EventSink, FrameSinkAdapter};
    let plain = || {
        FrameSinkAdapter::new(
            Box::new(NlmonWriter::new(Vec::new()).unwrap()),
            "plain",
            Default::default(),
        )
    };
    assert!(
        !plain().reads_events(),
        "frames only: nowhere to put events"
    );
    let limited = SizeLimitedSink::new(
        Box::new(plain()),
        LimitedRecords::Frames,
        "plain",
        std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)),
        1 << 20,
    );
    assert!(
        !limited.reads_events(),
        "a limit reads what its output reads"
    );
    let commented = plain().with_section_comments(SectionComments::Stream);
    assert!(
        commented.reads_events(),
        "says on stderr what a stream missed"
    );
}
