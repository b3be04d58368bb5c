//! Tests of the capture reader: real nlmon fixtures, round trips through our writers, files
//! crafted by hand in both byte orders, and malformed input. Also home of the fixture helpers the
//! writer tests share.
use std::path::PathBuf;

use super::*;
use crate::model::frame::Task;
use crate::sink::pcap::{FrameSink, NlmonPcapngWriter, NlmonWriter, SectionInfo};

/// The real nlmon captures in `tests/fixtures/nlmon/` and their frame counts.
pub(crate) const FIXTURES: [(&str, usize); 2] = [
    ("busybox-ip-ipvsadm-getent.pcap", 70),
    ("iproute2-secondary-ipvs.pcap", 104),
];

pub(crate) fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/nlmon")
        .join(name)
}

pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = fixture_path(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading fixture {}: {e}", path.display()))
}

/// Every frame read, the problems queued on the way (what was skipped or ignored), and the error
/// that ended reading, if one did.
pub(crate) fn read_everything(
    bytes: &[u8],
) -> (Vec<CapturedFrame>, Vec<CaptureError>, Option<CaptureError>) {
    read_everything_by(CaptureReader::new(bytes))
}

/// [`read_everything`] of what `reader` (just opened, or its error) reads.
fn read_everything_by<R: Read>(
    reader: Result<CaptureReader<R>, CaptureError>,
) -> (Vec<CapturedFrame>, Vec<CaptureError>, Option<CaptureError>) {
    let mut reader = match reader {
        Ok(reader) => reader,
        Err(e) => return (Vec::new(), Vec::new(), Some(e)),
    };
    let (mut frames, mut problems) = (Vec::new(), Vec::new());
    loop {
        let item = reader.next();
        problems.extend(reader.take_problems());
        match item {
            Some(Ok(frame)) => frames.push(frame),
            Some(Err(e)) => {
                assert!(
                    reader.next().is_none(),
                    "the iterator must end after an error"
                );
                return (frames, problems, Some(e));
            }
            None => return (frames, problems, None),
        }
    }
}

/// The fixtures and every capture of the malformed corpus.
fn corpus_paths() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut paths: Vec<PathBuf> = FIXTURES
        .iter()
        .map(|(name, _)| fixture_path(name))
        .collect();
    for entry in std::fs::read_dir(root.join("tests/malformed")).unwrap() {
        let path = entry.unwrap().path();
        if !path.extension().is_some_and(|e| e == "jsonl" || e == "md") {
            paths.push(path);
        }
    }
    assert!(paths.len() > 40, "{}", paths.len());
    paths
}

/// The unbuffered reader (over a mapped file, prefetched or not) reads every fixture and every
/// capture of the malformed corpus exactly as the buffered one: the same frames, problems and
/// final error.
#[test]
fn the_unbuffered_reader_reads_what_the_buffered_one_reads() {
    for path in corpus_paths() {
        let bytes = std::fs::read(&path).unwrap();
        let buffered = read_everything(&bytes);
        let unbuffered = read_everything_by(CaptureReader::unbuffered(&bytes[..]));
        assert_eq!(
            format!("{unbuffered:?}"),
            format!("{buffered:?}"),
            "{}",
            path.display()
        );
        let prefetched =
            read_everything_by(CaptureReader::unbuffered(PrefetchedBytes::new(&bytes[..])));
        assert_eq!(
            format!("{prefetched:?}"),
            format!("{buffered:?}"),
            "{}",
            path.display()
        );
    }
}

/// A classic pcap read in place gives the frames the reader returns (protocol and bytes), up to
/// where the reader stops; any other capture is declined.
#[test]
fn frames_read_in_place_are_the_frames_the_reader_returns() {
    let mut walked = 0;
    for path in corpus_paths() {
        let bytes = std::fs::read(&path).unwrap();
        let (frames, _, _) = read_everything(&bytes);
        let expected: Vec<(u16, &[u8])> = frames
            .iter()
            .map(|f| (f.frame.protocol, &f.frame.bytes[..]))
            .collect();
        let Some(walk) = pcap_frames_in_place(&bytes) else {
            let format = CaptureReader::new(&bytes[..]).map(|r| r.format());
            assert!(
                !matches!(format, Ok(CaptureFormat::Pcap)),
                "{}: a classic netlink pcap was declined",
                path.display()
            );
            continue;
        };
        let got: Vec<(u16, &[u8])> = walk.map(|f| (f.protocol, f.bytes)).collect();
        assert_eq!(got, expected, "{}", path.display());
        walked += 1;
    }
    assert!(walked > 20, "{walked} captures read in place");
}

/// Prefetched bytes read as the bytes themselves, whatever the sizes asked for.
#[test]
fn prefetched_bytes_read_as_their_bytes() {
    let bytes: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    let mut input = PrefetchedBytes::new(&bytes);
    let (mut read, mut size) = (Vec::new(), 1usize);
    loop {
        let mut buf = vec![0; size];
        let got = input.read(&mut buf).unwrap();
        if got == 0 {
            break;
        }
        read.extend_from_slice(&buf[..got]);
        size = size * 7 % 9001 + 1;
    }
    assert_eq!(read, bytes);
}

/// Every frame read, and the error that ended reading; no problem on the way allowed.
pub(crate) fn read_all(bytes: &[u8]) -> (Vec<CapturedFrame>, Option<CaptureError>) {
    let (frames, problems, error) = read_everything(bytes);
    assert!(problems.is_empty(), "{problems:?}");
    (frames, error)
}

/// What a [`CaptureError::Skipped`] skipped, and where reading went on.
fn skipped(problem: &CaptureError) -> (&CaptureError, u64, u64) {
    match problem {
        CaptureError::Skipped {
            source,
            bytes,
            resumed_at,
        } => (source, *bytes, *resumed_at),
        other => panic!("not a skip: {other:?}"),
    }
}

/// One netlink message in host byte order.
pub(crate) fn nlmsg(kind: u16, flags: u16, pid: u32, payload: &[u8]) -> Vec<u8> {
    let mut msg = Vec::new();
    msg.extend_from_slice(&((16 + payload.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&7u32.to_ne_bytes());
    msg.extend_from_slice(&pid.to_ne_bytes());
    msg.extend_from_slice(payload);
    msg
}

const T0: i128 = 1_795_267_397_571_890_123;

/// Frames of every kind a live capture produces (both directions, both protocols, a cut dump).
pub(crate) fn sample_frames() -> Vec<NetlinkFrame> {
    let ip = Task {
        pid: 100,
        tid: 101,
        comm: "ip".into(),
    };
    let spaced = Task {
        pid: 200,
        tid: 202,
        comm: "my \"prog\"".into(),
    };
    let frame =
        |i: i128, protocol, direction, task: &Task, bytes: Vec<u8>, total: usize| NetlinkFrame {
            wall_ns: T0 + i * 1_000_321,
            ts_ns: (T0 + i * 1_000_321) as u64,
            protocol,
            direction: Some(direction),
            task: Some(task.clone()),
            netns: 0,
            total_len: total as u32,
            bytes,
        };
    let getroute = nlmsg(26, 0x1 | 0x4, 0, &[2, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let newroute = nlmsg(24, 0, 100, &[2, 32, 0, 0, 254, 0, 0, 2, 0, 0, 0, 0]);
    let genl_req = nlmsg(0x20, 0x1 | 0x4, 4242, &[4, 1, 0, 0]);
    let mut dump = nlmsg(0x20, 0x2, 4242, &[1, 1, 0, 0, 9, 9, 9, 9]);
    dump.extend(nlmsg(0x20, 0x2, 4242, &[1, 1, 0, 0, 8, 8, 8, 8]));
    // An ACK: error 0 and the request's header echoed back (NLM_F_CAPPED).
    let mut ack = vec![0u8; 4];
    ack.extend_from_slice(&genl_req[..16]);
    let error = nlmsg(2, 0x100, 100, &ack);
    vec![
        frame(0, 0, Direction::Send, &ip, getroute.clone(), getroute.len()),
        frame(1, 0, Direction::Recv, &ip, newroute.clone(), newroute.len()),
        frame(
            2,
            16,
            Direction::Send,
            &spaced,
            genl_req.clone(),
            genl_req.len(),
        ),
        frame(
            3,
            16,
            Direction::Recv,
            &spaced,
            dump.clone(),
            dump.len() + 4096,
        ),
        frame(4, 0, Direction::Recv, &ip, error.clone(), error.len()),
    ]
}

fn write_pcap(frames: &[NetlinkFrame]) -> Vec<u8> {
    let mut writer = NlmonWriter::new(Vec::new()).unwrap();
    for frame in frames {
        writer.write_frame(frame).unwrap();
    }
    writer.into_inner()
}

fn write_pcapng(frames: &[NetlinkFrame], endianness: pcap_file::Endianness) -> Vec<u8> {
    let section = SectionInfo {
        user_application: "nodeip-trace test".into(),
        hardware: "x86_64".into(),
        os: "Linux 6.1".into(),
        host: "node-1".into(),
    };
    let mut writer = NlmonPcapngWriter::with_endianness(Vec::new(), &section, endianness).unwrap();
    for frame in frames {
        writer.write_frame(frame).unwrap();
    }
    writer.into_inner()
}

// ---- real nlmon captures ----

#[test]
fn every_fixture_reads_without_errors_and_with_the_right_frame_count() {
    for (name, count) in FIXTURES {
        let bytes = fixture(name);
        let (frames, error) = read_all(&bytes);
        assert!(error.is_none(), "{name}: {error:?}");
        assert_eq!(frames.len(), count, "{name}");
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(f.number, i as u64 + 1);
            assert!(f.frame.direction.is_some(), "{name} frame {}", f.number);
            assert!(
                matches!(f.frame.protocol, 0 | 16),
                "{name} frame {}",
                f.number
            );
            assert_eq!(f.frame.bytes.len() as u32, f.frame.total_len);
            assert!(f.comment.is_none() && f.frame.task.is_none());
        }
        assert_eq!(frames[0].file_offset, 24);
        let reader = CaptureReader::new(&bytes[..]).unwrap();
        assert_eq!(reader.format(), CaptureFormat::Pcap);
    }
}

#[test]
fn fixture_timestamps_and_offsets_match_the_file() {
    let bytes = fixture("busybox-ip-ipvsadm-getent.pcap");
    let (frames, _) = read_all(&bytes);
    // Frame 1's record header: ts 0x6b019afc s, 0x08e349 µs, caplen 0x24.
    assert_eq!(
        frames[0].frame.wall_ns,
        0x6b01_9afc_i128 * 1_000_000_000 + 0x08_e349 * 1000
    );
    assert_eq!(frames[0].frame.bytes.len(), 0x24 - 16);
    assert_eq!(frames[1].file_offset, 24 + 16 + 0x24);
    // The netlink bytes follow the record header and the nlmon header.
    let data = frames[1].data_offset as usize;
    assert_eq!(data, 24 + 16 + 0x24 + 16 + 16);
    assert_eq!(
        &bytes[data..data + frames[1].frame.bytes.len()],
        frames[1].frame.bytes
    );
}

#[test]
fn pcapng_data_offsets_point_at_the_netlink_bytes() {
    for endianness in [pcap_file::Endianness::Little, pcap_file::Endianness::Big] {
        let bytes = write_pcapng(&sample_frames(), endianness);
        let (frames, error) = read_all(&bytes);
        assert!(error.is_none(), "{error:?}");
        for f in &frames {
            let data = f.data_offset as usize;
            assert_eq!(&bytes[data..data + f.frame.bytes.len()], f.frame.bytes);
            assert_eq!(f.data_offset, f.file_offset + 8 + 20 + 16);
        }
    }
}

#[test]
fn fixture_directions_follow_request_and_reply() {
    let (frames, _) = read_all(&fixture("busybox-ip-ipvsadm-getent.pcap"));
    let dirs: Vec<_> = frames[..5]
        .iter()
        .map(|f| f.frame.direction.unwrap())
        .collect();
    use Direction::{Recv, Send};
    // RTM_GETADDR dump request, its NEWADDR parts, NLMSG_DONE, RTM_GETROUTE, its reply.
    assert_eq!(dirs, [Send, Recv, Recv, Send, Recv]);
    // genl: GETFAMILY request (libnl: pid set), NEWFAMILY reply, ERROR ack.
    let dirs: Vec<_> = frames[17..20]
        .iter()
        .map(|f| f.frame.direction.unwrap())
        .collect();
    assert_eq!(dirs, [Send, Recv, Recv]);
}

// ---- direction inference ----

#[test]
fn infer_direction_uses_packet_type_host_as_recv() {
    let request = nlmsg(26, 0x1, 0, &[]);
    assert_eq!(infer_direction(0, &request), Some(Direction::Recv));
    assert_eq!(infer_direction(4, &request), Some(Direction::Send));
}

#[test]
fn infer_direction_from_messages() {
    use Direction::{Recv, Send};
    assert_eq!(infer_direction(4, &nlmsg(26, 0x1, 0, &[])), Some(Send));
    assert_eq!(
        infer_direction(4, &nlmsg(0x20, 0x5, 12345, &[])),
        Some(Send)
    );
    assert_eq!(infer_direction(4, &nlmsg(24, 0, 12345, &[])), Some(Recv));
    assert_eq!(infer_direction(4, &nlmsg(24, 0x2, 12345, &[])), Some(Recv));
    assert_eq!(
        infer_direction(4, &nlmsg(2, 0x100, 12345, &[0; 4])),
        Some(Recv)
    );
    assert_eq!(
        infer_direction(4, &nlmsg(3, 0x2, 12345, &[0; 4])),
        Some(Recv)
    );
    // NLMSG_ERROR with a stray REQUEST flag is still the kernel's.
    assert_eq!(infer_direction(4, &nlmsg(2, 0x1, 0, &[0; 4])), Some(Recv));
    assert_eq!(infer_direction(4, &[0u8; 15]), None);
    assert_eq!(infer_direction(4, &[]), None);
}

#[test]
fn infer_direction_reads_big_endian_messages() {
    let mut msg = Vec::new();
    msg.extend_from_slice(&20u32.to_be_bytes());
    msg.extend_from_slice(&26u16.to_be_bytes());
    msg.extend_from_slice(&1u16.to_be_bytes());
    msg.extend_from_slice(&[0; 12]);
    assert_eq!(infer_direction(4, &msg), Some(Direction::Send));
}

// ---- round trips ----

#[test]
fn pcap_round_trip_keeps_everything_but_the_task() {
    let frames = sample_frames();
    let bytes = write_pcap(&frames);
    let (read, error) = read_all(&bytes);
    assert!(error.is_none(), "{error:?}");
    let expected: Vec<_> = frames
        .iter()
        .cloned()
        .map(|mut f| {
            f.task = None;
            f
        })
        .collect();
    let got: Vec<_> = read.into_iter().map(|c| c.frame).collect();
    assert_eq!(got, expected);
}

#[test]
fn pcapng_round_trip_in_both_byte_orders() {
    let frames = sample_frames();
    for endianness in [pcap_file::Endianness::Little, pcap_file::Endianness::Big] {
        let bytes = write_pcapng(&frames, endianness);
        let mut reader = CaptureReader::new(&bytes[..]).unwrap();
        assert_eq!(reader.format(), CaptureFormat::Pcapng);
        let mut read = Vec::new();
        let mut out = CapturedFrame::default();
        while reader.read_frame(&mut out).unwrap() {
            read.push(out.clone());
        }
        assert_eq!(reader.bytes_read(), bytes.len() as u64);
        let got: Vec<_> = read.iter().map(|c| c.frame.clone()).collect();
        assert_eq!(got, frames, "{endianness:?}");
        assert_eq!(
            read[2].comment.as_deref(),
            Some(r#"pid=200 tid=202 comm="my \"prog\"" dir=send"#)
        );
        assert_eq!(
            read.iter().map(|c| c.number).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
    }
}

#[test]
fn pcapng_direction_flag_wins_over_the_messages() {
    // A request-shaped frame marked inbound: the explicit flag is what we wrote, trust it.
    let mut frame = sample_frames().remove(0);
    frame.direction = Some(Direction::Recv);
    let bytes = write_pcapng(std::slice::from_ref(&frame), pcap_file::Endianness::Little);
    let (read, _) = read_all(&bytes);
    assert_eq!(read[0].frame.direction, Some(Direction::Recv));
}

// ---- files crafted by hand ----

fn order_u16(big: bool, v: u16) -> [u8; 2] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn order_u32(big: bool, v: u32) -> [u8; 4] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

/// A classic pcap in the given byte order; records are (seconds, fraction, data, original length).
fn craft_pcap(
    big: bool,
    nanos: bool,
    linktype: u32,
    snaplen: u32,
    records: &[(u32, u32, &[u8], u32)],
) -> Vec<u8> {
    let u16b = |v: u16| order_u16(big, v);
    let u32b = |v: u32| order_u32(big, v);
    let mut out = Vec::new();
    out.extend_from_slice(&u32b(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    out.extend_from_slice(&u16b(2));
    out.extend_from_slice(&u16b(4));
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&u32b(snaplen));
    out.extend_from_slice(&u32b(linktype));
    for (sec, frac, data, orig) in records {
        out.extend_from_slice(&u32b(*sec));
        out.extend_from_slice(&u32b(*frac));
        out.extend_from_slice(&u32b(data.len() as u32));
        out.extend_from_slice(&u32b(*orig));
        out.extend_from_slice(data);
    }
    out
}

/// The nlmon header + netlink bytes of one frame.
fn nlmon(packet_type: u16, protocol: u16, netlink: &[u8]) -> Vec<u8> {
    let mut data = crate::model::nlmon::NlmonHeader::for_frame(None, protocol)
        .encode()
        .to_vec();
    data[0..2].copy_from_slice(&packet_type.to_be_bytes());
    data.extend_from_slice(netlink);
    data
}

#[test]
fn big_endian_pcap_with_microseconds_and_nanoseconds() {
    let request = nlmon(4, 0, &nlmsg(26, 1, 0, &[0; 12]));
    let reply = nlmon(0, 0, &nlmsg(24, 0, 9, &[0; 12]));
    for nanos in [false, true] {
        let records = [
            (1_700_000_000, 123_456, &request[..], request.len() as u32),
            (1_700_000_001, 7, &reply[..], reply.len() as u32 + 100),
        ];
        let bytes = craft_pcap(true, nanos, 253, 262_144, &records);
        let (frames, error) = read_all(&bytes);
        assert!(error.is_none(), "{error:?}");
        let unit = if nanos { 1 } else { 1000 };
        assert_eq!(
            frames[0].frame.wall_ns,
            1_700_000_000_000_000_000 + 123_456 * unit
        );
        assert_eq!(frames[0].frame.direction, Some(Direction::Send));
        assert_eq!(frames[1].frame.direction, Some(Direction::Recv));
        assert_eq!(frames[1].frame.total_len, 28 + 100);
        assert!(frames[1].frame.truncated());
        assert_eq!(frames[0].frame.bytes, request[16..]);
    }
}

/// A pcapng block in the given byte order (body padded by the caller).
fn craft_block(big: bool, kind: u32, body: &[u8]) -> Vec<u8> {
    let u32b = |v: u32| order_u32(big, v);
    let total = 12 + body.len() as u32;
    let mut out = u32b(kind).to_vec();
    out.extend_from_slice(&u32b(total));
    out.extend_from_slice(body);
    out.extend_from_slice(&u32b(total));
    out
}

fn craft_option(big: bool, code: u16, value: &[u8]) -> Vec<u8> {
    let u16b = |v: u16| order_u16(big, v);
    let mut out = u16b(code).to_vec();
    out.extend_from_slice(&u16b(value.len() as u16));
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
    out
}

/// SHB + IDB(linktype, tsresol) + one EPB with a comment and inbound flag + one SPB.
fn craft_pcapng(big: bool, linktype: u16, tsresol: u8, data: &[u8]) -> Vec<u8> {
    let u16b = |v: u16| order_u16(big, v);
    let u32b = |v: u32| order_u32(big, v);
    let mut shb = u32b(0x1A2B_3C4D).to_vec();
    shb.extend_from_slice(&u16b(1));
    shb.extend_from_slice(&u16b(0));
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut idb = u16b(linktype).to_vec();
    idb.extend_from_slice(&[0, 0]);
    idb.extend_from_slice(&u32b(0));
    idb.extend(craft_option(big, 9, &[tsresol]));
    idb.extend(craft_option(big, 0, &[]));
    let mut epb = u32b(0).to_vec();
    epb.extend_from_slice(&u32b(0));
    epb.extend_from_slice(&u32b(1_700_000_000));
    epb.extend_from_slice(&u32b(data.len() as u32));
    epb.extend_from_slice(&u32b(data.len() as u32));
    epb.extend_from_slice(data);
    epb.resize(epb.len().next_multiple_of(4), 0);
    epb.extend(craft_option(big, 1, b"pid=7 comm=getent pod=default/web-0"));
    epb.extend(craft_option(big, 2, &u32b(1)));
    epb.extend(craft_option(big, 0, &[]));
    let mut spb = u32b(data.len() as u32).to_vec();
    spb.extend_from_slice(data);
    spb.resize(spb.len().next_multiple_of(4), 0);
    let mut out = craft_block(big, 0x0A0D_0D0A, &shb);
    out.extend(craft_block(big, 1, &idb));
    out.extend(craft_block(big, 4, &[0; 4])); // name resolution: skipped
    out.extend(craft_block(big, 6, &epb));
    out.extend(craft_block(big, 3, &spb));
    out
}

#[test]
fn hand_crafted_pcapng_in_both_byte_orders() {
    let data = nlmon(4, 16, &nlmsg(0x20, 1, 55, &[4, 1, 0, 0]));
    for big in [false, true] {
        // if_tsresol 6 (µs): 1_700_000_000 µs.
        let bytes = craft_pcapng(big, 253, 6, &data);
        let (frames, error) = read_all(&bytes);
        assert!(error.is_none(), "big={big}: {error:?}");
        assert_eq!(frames.len(), 2);
        let epb = &frames[0];
        assert_eq!(epb.frame.wall_ns, 1_700_000_000_000);
        assert_eq!(epb.frame.protocol, 16);
        assert_eq!(
            epb.frame.direction,
            Some(Direction::Recv),
            "epb_flags inbound wins"
        );
        let task = epb.frame.task.as_ref().unwrap();
        assert_eq!((task.pid, task.tid, task.comm.as_str()), (7, 7, "getent"));
        assert_eq!(epb.frame.bytes, data[16..]);
        let spb = &frames[1];
        assert_eq!(spb.frame.bytes, data[16..]);
        assert_eq!(spb.frame.direction, Some(Direction::Send));
        assert_eq!(spb.number, 2);
    }
    // Power-of-two resolution: 2^-10 s units.
    let bytes = craft_pcapng(false, 253, 0x80 | 10, &data);
    let (frames, _) = read_all(&bytes);
    assert_eq!(
        frames[0].frame.wall_ns,
        1_700_000_000i128 * 1_000_000_000 / 1024
    );
}

// ---- malformed input ----

fn offset_of_frame(bytes: &[u8], number: usize) -> u64 {
    read_all(bytes).0[number - 1].file_offset
}

#[test]
fn truncated_frame_data_returns_the_frames_before_it() {
    let bytes = fixture("busybox-ip-ipvsadm-getent.pcap");
    let off = offset_of_frame(&bytes, 10);
    let (frames, error) = read_all(&bytes[..off as usize + 16 + 5]);
    assert_eq!(frames.len(), 9);
    let error = error.expect("an error");
    let CaptureError::Truncated { at, what, got, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        *at,
        Position {
            frame: 10,
            offset: off
        }
    );
    assert_eq!((*what, *got), ("pcap frame data", 5));
    let text = error.to_string();
    assert!(
        text.contains(&format!("frame 10 at byte offset {off}")),
        "{text}"
    );
}

#[test]
fn truncated_record_header_names_the_frame() {
    let bytes = fixture("iproute2-secondary-ipvs.pcap");
    let off = offset_of_frame(&bytes, 104);
    let (frames, error) = read_all(&bytes[..off as usize + 7]);
    assert_eq!(frames.len(), 103);
    let Some(CaptureError::Truncated {
        at, what, got: 7, ..
    }) = error
    else {
        panic!("{error:?}")
    };
    assert_eq!(
        (at.frame, at.offset, what),
        (104, off, "pcap record header")
    );
}

#[test]
fn truncated_file_header() {
    let bytes = fixture("iproute2-secondary-ipvs.pcap");
    let (frames, error) = read_all(&bytes[..10]);
    assert!(frames.is_empty());
    let error = error.unwrap();
    assert!(matches!(
        error,
        CaptureError::Truncated {
            at: Position {
                frame: 0,
                offset: 0
            },
            ..
        }
    ));
    assert!(
        error.to_string().contains("file header at byte offset 0"),
        "{error}"
    );
    assert!(read_all(&[]).1.is_some());
}

#[test]
fn wrong_link_type_in_pcap_is_named() {
    let mut bytes = fixture("iproute2-secondary-ipvs.pcap");
    bytes[20..24].copy_from_slice(&1u32.to_le_bytes());
    let error = CaptureReader::new(&bytes[..]).unwrap_err();
    assert!(
        matches!(error, CaptureError::WrongLinkType { linktype: 1, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("link type 1 ") && text.contains("byte offset 0"),
        "{text}"
    );
}

#[test]
fn packets_of_a_non_netlink_interface_are_skipped_and_named() {
    let data = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let bytes = craft_pcapng(false, 1, 6, &data);
    let (frames, problems, error) = read_everything(&bytes);
    assert!(frames.is_empty() && error.is_none(), "{error:?}");
    assert_eq!(problems.len(), 2, "{problems:?}");
    let (CaptureError::WrongLinkType { at, linktype: 1 }, ..) = skipped(&problems[0]) else {
        panic!("{problems:?}")
    };
    assert_eq!(at.frame, 1);
    assert!(at.offset > 0);
    assert_eq!(problems[1].position().frame, 2);
}

#[test]
fn caplen_above_snaplen_or_absurd_is_an_error() {
    let bytes = fixture("busybox-ip-ipvsadm-getent.pcap");
    let off = offset_of_frame(&bytes, 3) as usize;
    let mut patched = bytes.clone();
    // Above the snaplen but sane: the record is read past and the frame skipped. The snaplen
    // is set just below the largest frame's length: that frame alone is skipped.
    let all = read_all(&bytes).0;
    let longest = all.iter().map(|f| f.frame.bytes.len()).max().unwrap();
    let largest = all.iter().find(|f| f.frame.bytes.len() == longest).unwrap();
    let caplen = (largest.frame.bytes.len() + 16) as u32;
    let count = all
        .iter()
        .filter(|f| f.frame.bytes.len() + 16 == caplen as usize)
        .count();
    patched[16..20].copy_from_slice(&(caplen - 1).to_le_bytes());
    let (frames, problems, error) = read_everything(&patched);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(frames.len(), 70 - count);
    assert_eq!(problems.len(), count);
    let (source, bytes_skipped, resumed_at) = skipped(&problems[0]);
    let CaptureError::BadLength { at, len, limit, .. } = source else {
        panic!("{source:?}")
    };
    assert_eq!((*len, *limit), (u64::from(caplen), u64::from(caplen - 1)));
    assert_eq!(
        *at,
        Position {
            frame: largest.number,
            offset: largest.file_offset
        }
    );
    assert_eq!(bytes_skipped, 16 + u64::from(caplen));
    assert_eq!(resumed_at, largest.file_offset + bytes_skipped);
    let after = frames.iter().find(|f| f.number == largest.number + 1);
    assert!(
        after.is_some() || largest.number == 70,
        "reading goes on after it"
    );

    // No snaplen (0): only the absurdity bound applies, and ends reading.
    patched[16..20].copy_from_slice(&0u32.to_le_bytes());
    patched[off + 8..off + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let (frames, error) = read_all(&patched);
    assert_eq!(frames.len(), 2);
    assert!(
        matches!(error, Some(CaptureError::BadLength { limit, .. }) if limit == u64::from(MAX_RECORD_LEN))
    );
}

#[test]
fn frame_shorter_than_the_nlmon_header_is_malformed() {
    let good = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let bytes = craft_pcap(
        false,
        false,
        253,
        65535,
        &[(1, 0, &good, 32), (2, 0, &[0; 8], 8)],
    );
    let (frames, problems, error) = read_everything(&bytes);
    assert_eq!(frames.len(), 1);
    assert!(error.is_none(), "{error:?}");
    let (CaptureError::Malformed { at, what }, ..) = skipped(&problems[0]) else {
        panic!("{problems:?}")
    };
    assert_eq!(at.frame, 2);
    assert!(
        what.contains("shorter than the 16-byte nlmon header"),
        "{what}"
    );
}

#[test]
fn pcapng_block_errors() {
    let data = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let bytes = craft_pcapng(false, 253, 6, &data);
    // Cut inside the EPB (the last block is the SPB; cut the file just before it, minus 3).
    let spb_len = 12 + 4 + data.len().next_multiple_of(4);
    let cut = bytes.len() - spb_len - 3;
    let (frames, error) = read_all(&bytes[..cut]);
    assert!(frames.is_empty());
    assert!(
        matches!(
            error,
            Some(CaptureError::Truncated {
                at: Position { frame: 1, .. },
                ..
            })
        ),
        "{error:?}"
    );
    // Corrupt the trailing length of the last block.
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 4] ^= 0x40;
    let (frames, error) = read_all(&bad);
    assert_eq!(frames.len(), 1);
    assert!(
        matches!(
            error,
            Some(CaptureError::Malformed {
                at: Position { frame: 2, .. },
                ..
            })
        ),
        "{error:?}"
    );
}

/// The blocks of [`craft_pcapng`]'s file, split at block boundaries.
fn blocks_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut blocks = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        blocks.push(bytes[at..at + len].to_vec());
        at += len;
    }
    blocks
}

/// A little-endian section of [`craft_pcapng`] with `middle` between its EPB and SPB.
fn with_middle_block(middle: &[u8]) -> (Vec<u8>, u64) {
    let data = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let blocks = blocks_of(&craft_pcapng(false, 253, 6, &data));
    let mut bytes = blocks[..4].concat();
    bytes.extend_from_slice(middle);
    let resumed = bytes.len() as u64;
    bytes.extend_from_slice(&blocks[4]);
    (bytes, resumed)
}

#[test]
fn a_pcapng_block_with_corrupt_lengths_is_skipped_to_the_next_block() {
    let data = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let epb = blocks_of(&craft_pcapng(false, 253, 6, &data))[3].clone();
    type Corrupt = fn(&mut Vec<u8>);
    let faults: [(Corrupt, &str); 4] = [
        (
            |b| b[4..8].copy_from_slice(&47u32.to_le_bytes()),
            "not a multiple of 4",
        ),
        (
            |b| b[4..8].copy_from_slice(&8u32.to_le_bytes()),
            "at least 12",
        ),
        (
            |b| b[4..8].copy_from_slice(&0xffff_fff0u32.to_le_bytes()),
            "more than",
        ),
        (
            |b| {
                let n = b.len();
                b[n - 4] ^= 0x40;
            },
            "at its end",
        ),
    ];
    for (corrupt, problem) in faults {
        let mut bad = epb.clone();
        corrupt(&mut bad);
        // Garbage after the bad block too: the scan must pass over it.
        bad.extend_from_slice(&[0xee; 12]);
        let (bytes, resumed) = with_middle_block(&bad);
        let (frames, problems, error) = read_everything(&bytes);
        assert!(error.is_none(), "{problem}: {error:?}");
        assert_eq!(
            frames.len(),
            2,
            "{problem}: the EPB before and the SPB after"
        );
        assert_eq!(frames[1].file_offset, resumed);
        assert_eq!(problems.len(), 1, "{problems:?}");
        let (source, skipped_bytes, resumed_at) = skipped(&problems[0]);
        assert!(source.to_string().contains(problem), "{source}");
        assert_eq!(resumed_at, resumed);
        assert_eq!(skipped_bytes, bad.len() as u64);
        let text = problems[0].to_string();
        assert!(
            text.contains(&format!("reading goes on at byte offset {resumed}")),
            "{text}"
        );
    }
}

#[test]
fn a_corrupt_block_with_nothing_readable_after_it_ends_reading() {
    let (mut bytes, resumed) = with_middle_block(&[]);
    bytes.truncate(resumed as usize);
    bytes.extend_from_slice(&[6, 0, 0, 0, 47, 0, 0, 0]);
    bytes.extend_from_slice(&[0xee; 64]);
    let (frames, problems, error) = read_everything(&bytes);
    assert_eq!((frames.len(), problems.len()), (1, 0));
    let Some(CaptureError::Malformed { at, what }) = error else {
        panic!("{error:?}")
    };
    assert_eq!(at.offset, resumed);
    assert!(what.contains("47"), "{what}");
}

#[test]
fn options_running_past_their_block_are_reported_and_the_packet_kept() {
    let data = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let mut blocks = blocks_of(&craft_pcapng(false, 253, 6, &data));
    // The EPB's comment option claims 0x400 bytes.
    let epb = &mut blocks[3];
    let options_at = 8 + 20 + data.len().next_multiple_of(4);
    epb[options_at + 2..options_at + 4].copy_from_slice(&0x400u16.to_le_bytes());
    let bytes = blocks.concat();
    let (frames, problems, error) = read_everything(&bytes);
    assert!(error.is_none());
    assert_eq!(frames.len(), 2);
    assert!(frames[0].comment.is_none(), "the bad option is not read");
    let [CaptureError::BadOption {
        at,
        block,
        code: 1,
        offset,
        len: 0x400,
        ..
    }] = &problems[..]
    else {
        panic!("{problems:?}")
    };
    assert_eq!((*block, at.frame), ("packet block", 1));
    assert_eq!(*offset, frames[0].file_offset + options_at as u64);
}

#[test]
fn a_packet_on_an_interface_the_section_lacks_is_skipped() {
    let data = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let mut blocks = blocks_of(&craft_pcapng(false, 253, 6, &data));
    blocks[3][8..12].copy_from_slice(&5u32.to_le_bytes());
    let (frames, problems, error) = read_everything(&blocks.concat());
    assert!(error.is_none());
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0].number, 2, "the skipped packet keeps its number");
    let (source, ..) = skipped(&problems[0]);
    assert!(source.to_string().contains("interface 5"), "{source}");
}

#[test]
fn sections_of_either_byte_order_follow_each_other() {
    let data = nlmon(4, 0, &nlmsg(26, 1, 0, &[]));
    let mut bytes = craft_pcapng(false, 253, 6, &data);
    bytes.extend(craft_pcapng(true, 253, 6, &data));
    bytes.extend(craft_pcapng(false, 253, 6, &data));
    let (frames, error) = read_all(&bytes);
    assert!(error.is_none(), "{error:?}");
    assert_eq!(frames.len(), 6);
    assert!(frames.iter().all(|f| f.frame.bytes == data[16..]));
}

#[test]
fn unknown_formats_say_what_they_look_like() {
    let error = CaptureReader::new(&b"\x1f\x8b\x08\x00rest of a gzip file"[..]).unwrap_err();
    assert!(error.to_string().contains("gzip"), "{error}");
    let error = CaptureReader::new(&b"hello, world, not a pcap"[..]).unwrap_err();
    assert!(matches!(error, CaptureError::UnknownFormat { .. }));
}

#[test]
fn corrupt_input_never_panics() {
    let mut inputs = vec![fixture("busybox-ip-ipvsadm-getent.pcap")];
    inputs.push(write_pcapng(&sample_frames(), pcap_file::Endianness::Big));
    inputs.push(craft_pcapng(
        false,
        253,
        6,
        &nlmon(4, 0, &nlmsg(26, 1, 0, &[])),
    ));
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for input in &inputs {
        for cut in (0..input.len()).step_by(3) {
            let _ = read_everything(&input[..cut]);
        }
        for _ in 0..300 {
            let mut bad = input.clone();
            for _ in 0..4 {
                let i = next() as usize % bad.len();
                bad[i] = next() as u8;
            }
            let _ = read_everything(&bad);
        }
    }
}

#[test]
fn progress_reaches_the_file_size() {
    let bytes = fixture("iproute2-secondary-ipvs.pcap");
    let mut reader = CaptureReader::new(&bytes[..]).unwrap();
    assert_eq!(reader.bytes_read(), 24);
    let mut out = CapturedFrame::default();
    let mut last = 0;
    while reader.read_frame(&mut out).unwrap() {
        assert!(reader.bytes_read() > last);
        last = reader.bytes_read();
    }
    assert_eq!(reader.bytes_read(), bytes.len() as u64);
    assert!(!reader.read_frame(&mut out).unwrap(), "stays at the end");
}
