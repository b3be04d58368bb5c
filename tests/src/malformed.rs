//! The malformed-input corpus in `tests/malformed/` (issues 4 and 9): how each file is made,
//! what is wrong with it, and what `nodeip-trace analyze` / `replay` must do with it.
//!
//! [`corpus`] builds every file from scratch, byte by byte, so each fault is deliberate and
//! documented here; the committed files are its output (the `malformed_inputs` test checks they
//! still are, and `cargo xtask bless` rewrites them and `tests/malformed/README.md`).
//!
//! Every capture starts from the same good frames — an `RTM_GETADDR` dump request, then its
//! `RTM_NEWADDR` + `NLMSG_DONE` reply — framed as nlmon frames (16-byte header: packet type 4,
//! ARPHRD_NETLINK, netlink protocol; then messages in little-endian host order) and puts one
//! fault in a known place, so the test can name the frame number and byte offset the diagnostic
//! must carry.
use std::fmt::Write as _;

/// Which command reads a corpus file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reader {
    /// `nodeip-trace analyze --format json FILE` (pcap, pcapng).
    Analyze,
    /// `nodeip-trace replay --format json FILE` (JSON-lines recordings).
    Replay,
}

/// What nodeip-trace must do with a corpus file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Read to the end without a word: exit 0, nothing on stderr.
    Clean,
    /// Read to the end, with a warning per bad message inside an otherwise readable frame (or
    /// per pcapng option ignored): exit 0.
    Warns,
    /// Read to the end past damaged frames or stretches of the file, each skipped with a
    /// diagnostic naming its frame and byte offset; every readable frame is output: exit 4.
    Skips,
    /// Stop at a fault in the file's structure: the events before it are written, then a
    /// diagnostic and a non-zero exit.
    Fatal,
}

/// One corpus file and what must happen to it.
#[derive(Clone, Debug)]
pub struct Case {
    /// File name in `tests/malformed/`.
    pub name: &'static str,
    /// What is wrong with it (the README's line).
    pub what: &'static str,
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// The command that reads it.
    pub reader: Reader,
    /// What must happen.
    pub outcome: Outcome,
    /// Events that must be on stdout, everything before the fault: `netlink` events (one per
    /// frame) for `analyze`, events (one per line) for `replay`.
    pub events: usize,
    /// Text stderr must contain (where: frame or line number, byte offset; and what).
    pub diagnostic: Vec<String>,
    /// Text stdout must contain (e.g. a diagnosis made from the frames after a skipped one).
    pub output: Vec<&'static str>,
}

// ---- netlink messages (little-endian host order, as the x86 kernel writes them) ----

const RTM_NEWLINK: u16 = 16;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_PREFSRC: u16 = 7;
const RTA_TABLE: u16 = 15;
const RTM_NEWADDR: u16 = 20;
const RTM_GETADDR: u16 = 22;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const GENL_ID_CTRL: u16 = 0x10;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_MULTI: u16 = 0x2;
const NLM_F_DUMP: u16 = 0x300;
const NLA_F_NESTED: u16 = 0x8000;
const NETLINK_ROUTE: u16 = 0;
const NETLINK_GENERIC: u16 = 16;
const PORT_ID: u32 = 4242;

/// One netlink message; `len` overrides `nlmsg_len` (the real length otherwise).
fn nlmsg_with_len(kind: u16, flags: u16, len: Option<u32>, payload: &[u8]) -> Vec<u8> {
    let real = 16 + payload.len();
    let pid = if flags & NLM_F_REQUEST != 0 {
        0
    } else {
        PORT_ID
    };
    let mut out = Vec::with_capacity(real + 3);
    out.extend_from_slice(&len.unwrap_or(real as u32).to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes()); // seq
    out.extend_from_slice(&pid.to_le_bytes());
    out.extend_from_slice(payload);
    out.resize(real.next_multiple_of(4), 0);
    out
}

fn nlmsg(kind: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
    nlmsg_with_len(kind, flags, None, payload)
}

/// One attribute; `len` overrides `nla_len`.
fn attr_with_len(kind: u16, len: Option<u16>, value: &[u8]) -> Vec<u8> {
    let real = 4 + value.len();
    let mut out = Vec::with_capacity(real + 3);
    out.extend_from_slice(&len.unwrap_or(real as u16).to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(value);
    out.resize(real.next_multiple_of(4), 0);
    out
}

fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    attr_with_len(kind, None, value)
}

/// `struct ifaddrmsg` for 192.0.2.x/24 on ifindex 2, then `attributes`.
fn ifaddrmsg(attributes: &[u8]) -> Vec<u8> {
    let mut out = vec![2, 24, 0, 0]; // AF_INET, prefix length, flags, scope
    out.extend_from_slice(&2u32.to_le_bytes());
    out.extend_from_slice(attributes);
    out
}

/// `RTM_NEWADDR` attributes: IFA_ADDRESS, IFA_LOCAL, IFA_LABEL.
fn address_attributes() -> Vec<u8> {
    [
        attr(1, &[192, 0, 2, 10]),
        attr(2, &[192, 0, 2, 10]),
        attr(3, b"eth0\0"),
    ]
    .concat()
}

/// `struct rtmsg` for an IPv4 /32 (`table`, `protocol`, `scope`, `kind`), then `attributes`.
fn rtmsg(table: u8, protocol: u8, scope: u8, kind: u8, attributes: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![2, 32, 0, 0, table, protocol, scope, kind];
    out.extend_from_slice(&0u32.to_le_bytes()); // flags
    out.extend_from_slice(&attributes.concat());
    out
}

/// `ip route get 192.0.2.10`: `RTM_GETROUTE` with `RTA_DST`.
fn getroute_request() -> Vec<u8> {
    let dst = attr(RTA_DST, &[192, 0, 2, 10]);
    nlmsg(RTM_GETROUTE, NLM_F_REQUEST, &rtmsg(0, 0, 0, 0, &[dst]))
}

/// The kernel's answer when 192.0.2.10 is assigned on the node: type local, table local, dev lo
/// (index 1) — seed 003's pattern, which `route-get-resolves-to-lo` diagnoses.
fn getroute_local_reply() -> Vec<u8> {
    let attributes = [
        attr(RTA_TABLE, &255u32.to_le_bytes()),
        attr(RTA_DST, &[192, 0, 2, 10]),
        attr(RTA_OIF, &1u32.to_le_bytes()),
        attr(RTA_PREFSRC, &[192, 0, 2, 10]),
    ];
    // RT_TABLE_LOCAL, RTPROT_KERNEL, RT_SCOPE_HOST, RTN_LOCAL.
    nlmsg(RTM_NEWROUTE, 0, &rtmsg(255, 2, 254, 2, &attributes))
}

fn getaddr_request() -> Vec<u8> {
    nlmsg(RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &ifaddrmsg(&[]))
}

fn newaddr_reply(attributes: &[u8]) -> Vec<u8> {
    [
        nlmsg(RTM_NEWADDR, NLM_F_MULTI, &ifaddrmsg(attributes)),
        nlmsg(NLMSG_DONE, NLM_F_MULTI, &0u32.to_le_bytes()),
    ]
    .concat()
}

/// An attribute nested `depth` levels deep (each level `NLA_F_NESTED` holding the next).
fn nested(kind: u16, depth: usize) -> Vec<u8> {
    let mut inner = attr(1, &7u32.to_le_bytes());
    for _ in 0..depth {
        inner = attr(kind | NLA_F_NESTED, &inner);
    }
    inner
}

// ---- nlmon frames ----

/// An nlmon frame: the 16-byte header (packet type 4, ARPHRD_NETLINK, no address, `protocol`,
/// big-endian like the kernel's), then the netlink bytes.
fn nlmon_frame(hatype: u16, protocol: u16, netlink: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + netlink.len());
    out.extend_from_slice(&4u16.to_be_bytes());
    out.extend_from_slice(&hatype.to_be_bytes());
    out.extend_from_slice(&[0; 10]);
    out.extend_from_slice(&protocol.to_be_bytes());
    out.extend_from_slice(netlink);
    out
}

const ARPHRD_NETLINK: u16 = 824;

fn route(netlink: &[u8]) -> Vec<u8> {
    nlmon_frame(ARPHRD_NETLINK, NETLINK_ROUTE, netlink)
}

/// The good conversation: request, then reply.
fn good_frames() -> Vec<Vec<u8>> {
    vec![
        route(&getaddr_request()),
        route(&newaddr_reply(&address_attributes())),
    ]
}

/// The good request, a frame with `bad` netlink bytes, the good reply.
fn around(bad: Vec<u8>) -> Vec<Vec<u8>> {
    let mut frames = good_frames();
    frames.insert(1, bad);
    frames
}

// ---- classic pcap ----

const LINKTYPE_NETLINK: u32 = 253;
const T0: u32 = 1_795_267_324;

/// A capture file being written: its byte order, bytes, and where each frame's record starts.
struct CaptureFile {
    big_endian: bool,
    bytes: Vec<u8>,
    /// File offset of each frame's record (pcap record, pcapng packet block).
    offsets: Vec<usize>,
}

impl CaptureFile {
    fn new(big_endian: bool) -> Self {
        CaptureFile {
            big_endian,
            bytes: Vec::new(),
            offsets: Vec::new(),
        }
    }

    fn order32(&self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn order16(&self, v: u16) -> [u8; 2] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn u32(&mut self, v: u32) {
        let b = self.order32(v);
        self.bytes.extend_from_slice(&b);
    }

    fn u16(&mut self, v: u16) {
        let b = self.order16(v);
        self.bytes.extend_from_slice(&b);
    }

    /// Where frame `n` (1-based) starts, as the diagnostic must say it.
    fn at(&self, n: usize) -> String {
        format!("frame {n} at byte offset {}", self.offsets[n - 1])
    }

    /// Where the next record would start (numbered as the next frame).
    fn next_at(&self) -> String {
        format!(
            "frame {} at byte offset {}",
            self.offsets.len() + 1,
            self.bytes.len()
        )
    }
}

/// A classic pcap file header and its records, with every length spelled out.
struct Pcap {
    file: CaptureFile,
    nanoseconds: bool,
    snaplen: u32,
    linktype: u32,
}

impl Pcap {
    fn new(linktype: u32, snaplen: u32) -> Self {
        let mut pcap = Pcap {
            file: CaptureFile::new(false),
            nanoseconds: false,
            snaplen,
            linktype,
        };
        pcap.write_header();
        pcap
    }

    fn netlink() -> Self {
        Self::new(LINKTYPE_NETLINK, 262_144)
    }

    fn big_endian_nanoseconds() -> Self {
        let mut pcap = Pcap {
            file: CaptureFile::new(true),
            nanoseconds: true,
            snaplen: 262_144,
            linktype: LINKTYPE_NETLINK,
        };
        pcap.write_header();
        pcap
    }

    fn write_header(&mut self) {
        let magic = if self.nanoseconds {
            0xa1b2_3c4d
        } else {
            0xa1b2_c3d4
        };
        let (snaplen, linktype) = (self.snaplen, self.linktype);
        self.file.u32(magic);
        self.file.u16(2);
        self.file.u16(4);
        self.file.u32(0); // thiszone
        self.file.u32(0); // sigfigs
        self.file.u32(snaplen);
        self.file.u32(linktype);
    }

    /// A record claiming `caplen`/`orig_len` around `data`.
    fn record_with(&mut self, caplen: u32, orig_len: u32, data: &[u8]) -> &mut Self {
        self.file.offsets.push(self.file.bytes.len());
        let n = self.file.offsets.len() as u32;
        self.file.u32(T0 + n);
        self.file.u32(n * 1000);
        self.file.u32(caplen);
        self.file.u32(orig_len);
        self.file.bytes.extend_from_slice(data);
        self
    }

    fn record(&mut self, data: &[u8]) -> &mut Self {
        let len = data.len() as u32;
        self.record_with(len, len, data)
    }

    fn records(mut self, frames: &[Vec<u8>]) -> Self {
        for frame in frames {
            self.record(frame);
        }
        self
    }
}

// ---- pcapng ----

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const SPB: u32 = 3;
const NRB: u32 = 4;
const EPB: u32 = 6;
const CUSTOM_BLOCK: u32 = 0x0000_0BAD;

/// A pcapng file block by block.
struct Pcapng {
    file: CaptureFile,
}

impl Pcapng {
    fn empty(big_endian: bool) -> Self {
        Pcapng {
            file: CaptureFile::new(big_endian),
        }
    }

    /// A section header and one netlink interface.
    fn netlink(big_endian: bool) -> Self {
        let mut file = Self::empty(big_endian);
        file.section_header(0x1A2B_3C4D);
        file.interface(253);
        file
    }

    /// A block: type, total length, body padded to 4, total length again; `lengths` turns the
    /// real total length into the (leading, trailing) ones written.
    fn block_with(
        &mut self,
        kind: u32,
        body: &[u8],
        lengths: impl Fn(u32) -> (u32, u32),
    ) -> &mut Self {
        let padded = body.len().next_multiple_of(4);
        let (lead, trail) = lengths((12 + padded) as u32);
        self.file.u32(kind);
        self.file.u32(lead);
        self.file.bytes.extend_from_slice(body);
        let end = self.file.bytes.len() + padded - body.len();
        self.file.bytes.resize(end, 0);
        self.file.u32(trail);
        self
    }

    fn block(&mut self, kind: u32, body: &[u8]) -> &mut Self {
        self.block_with(kind, body, |total| (total, total))
    }

    fn section_header(&mut self, byte_order_magic: u32) -> &mut Self {
        let mut body = self.file.order32(byte_order_magic).to_vec();
        body.extend_from_slice(&self.file.order16(1));
        body.extend_from_slice(&self.file.order16(0));
        body.extend_from_slice(&[0xff; 8]); // section length: unknown
        self.block(SHB, &body)
    }

    fn interface(&mut self, linktype: u16) -> &mut Self {
        self.interface_with(linktype, &[])
    }

    /// An interface description block with `options` (raw bytes) after its fixed part.
    fn interface_with(&mut self, linktype: u16, options: &[u8]) -> &mut Self {
        let mut body = self.file.order16(linktype).to_vec();
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&self.file.order32(262_144));
        body.extend_from_slice(options);
        self.block(IDB, &body)
    }

    /// An enhanced packet block's body: interface, timestamp, caplen, orig_len, data, options.
    fn packet_body(&self, interface: u32, caplen: u32, data: &[u8], options: &[u8]) -> Vec<u8> {
        let n = self.file.offsets.len() as u32 + 1;
        let ts = u64::from(T0 + n) * 1_000_000;
        let mut body = self.file.order32(interface).to_vec();
        body.extend_from_slice(&self.file.order32((ts >> 32) as u32));
        body.extend_from_slice(&self.file.order32(ts as u32));
        body.extend_from_slice(&self.file.order32(caplen));
        body.extend_from_slice(&self.file.order32(data.len() as u32));
        body.extend_from_slice(data);
        body.resize(body.len().next_multiple_of(4), 0);
        body.extend_from_slice(options);
        body
    }

    fn packet_on(&mut self, interface: u32, data: &[u8]) -> &mut Self {
        let body = self.packet_body(interface, data.len() as u32, data, &[]);
        self.file.offsets.push(self.file.bytes.len());
        self.block(EPB, &body)
    }

    fn packets(mut self, frames: &[Vec<u8>]) -> Self {
        for frame in frames {
            self.packet_on(0, frame);
        }
        self
    }
}

// ---- JSON-lines recordings ----

const HEADER_LINE: &str = r#"{"ts":"2026-11-21T13:22:04.000000000Z","ts_ns":0,"pid":0,"tid":0,"comm":"","kind":"header","schema":1,"tool_version":"0.1.0","kernel":"6.1.0","host":"node-a","hooks":[],"filters":[],"clock_offset_ns":0}"#;
const NETLINK_LINE: &str = r#"{"ts":"2026-11-21T13:22:04.582473000Z","ts_ns":1000,"pid":12,"tid":12,"comm":"ip","kind":"netlink","direction":"send","protocol":"NETLINK_ROUTE","protocol_id":0,"bytes":24,"captured":24,"truncated":false,"messages":[],"decode_errors":[]}"#;

/// Lines joined with newlines (and a final one).
fn lines(lines: &[&str]) -> Vec<u8> {
    let mut out = String::new();
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    out.into_bytes()
}

/// Where line `n` (1-based) of `bytes` starts, as the diagnostic must say it.
fn line_at(bytes: &[u8], n: usize) -> String {
    let offset: usize = bytes
        .split_inclusive(|b| *b == b'\n')
        .take(n - 1)
        .map(<[u8]>::len)
        .sum();
    format!("line {n} (byte offset {offset})")
}

// ---- the corpus ----

fn case(
    name: &'static str,
    what: &'static str,
    bytes: Vec<u8>,
    outcome: Outcome,
    events: usize,
    diagnostic: &[&str],
) -> Case {
    let reader = if name.ends_with(".jsonl") {
        Reader::Replay
    } else {
        Reader::Analyze
    };
    Case {
        name,
        what,
        bytes,
        reader,
        outcome,
        events,
        diagnostic: diagnostic.iter().map(|d| d.to_string()).collect(),
        output: Vec::new(),
    }
}

/// A pcap of the good request, a frame with `bad` netlink bytes on `protocol`, the good reply:
/// all three frames reported, with a warning naming frame 2.
fn warns_in_frame_2(
    name: &'static str,
    what: &'static str,
    protocol: u16,
    bad: &[u8],
    problem: &str,
) -> Case {
    let pcap = Pcap::netlink().records(&around(nlmon_frame(ARPHRD_NETLINK, protocol, bad)));
    let at = pcap.file.at(2);
    case(
        name,
        what,
        pcap.file.bytes,
        Outcome::Warns,
        3,
        &[&at, problem],
    )
}

/// Like [`warns_in_frame_2`] for bytes that are unusual but valid: read cleanly, no warning.
fn clean_with_frame_2(name: &'static str, what: &'static str, protocol: u16, odd: &[u8]) -> Case {
    let pcap = Pcap::netlink().records(&around(nlmon_frame(ARPHRD_NETLINK, protocol, odd)));
    case(name, what, pcap.file.bytes, Outcome::Clean, 3, &[])
}

/// Cases about classic pcap framing.
fn pcap_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let good = Pcap::netlink().records(&good_frames());
    cases.push(case(
        "pcap-good.pcap",
        "baseline: the good request and reply, nothing wrong",
        good.file.bytes.clone(),
        Outcome::Clean,
        2,
        &[],
    ));
    cases.push(case(
        "pcap-empty.pcap",
        "an empty file",
        Vec::new(),
        Outcome::Fatal,
        0,
        &["file header at byte offset 0", "file magic"],
    ));
    cases.push(case(
        "pcap-header-truncated.pcap",
        "the 24-byte pcap file header cut after 12 bytes",
        good.file.bytes[..12].to_vec(),
        Outcome::Fatal,
        0,
        &["file header at byte offset 0", "pcap file header"],
    ));
    cases.push(case(
        "pcap-header-only.pcap",
        "a valid file header and no frames (not an error: an empty capture, said on stderr)",
        good.file.bytes[..24].to_vec(),
        Outcome::Clean,
        0,
        &["0 frames"],
    ));
    let mut cut = good.file.bytes.clone();
    cut.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    cases.push(case(
        "pcap-record-header-truncated.pcap",
        "two good frames, then 10 bytes of a 16-byte record header (file cut between records)",
        cut,
        Outcome::Fatal,
        2,
        &[&good.file.next_at(), "pcap record header", "10 of 16 bytes"],
    ));
    let mut cut = Pcap::netlink().records(&good_frames());
    let at = cut.file.next_at();
    cut.record_with(60, 60, &route(&getaddr_request())[..20]);
    cases.push(case(
        "pcap-frame-data-truncated.pcap",
        "two good frames, then a record whose header promises 60 bytes followed by only 20",
        cut.file.bytes,
        Outcome::Fatal,
        2,
        &[&at, "pcap frame data", "20 of 60 bytes"],
    ));
    let three = Pcap::netlink().records(&around(route(&getaddr_request())));
    let mid = three.file.offsets[1] + 16 + 10;
    cases.push(case(
        "pcap-file-truncated-mid-record.pcap",
        "three good frames with the file cut 10 bytes into frame 2's data (tcpdump killed)",
        three.file.bytes[..mid].to_vec(),
        Outcome::Fatal,
        1,
        &[&three.file.at(2), "cut short"],
    ));
    cases.push(case(
        "pcap-linktype-ethernet.pcap",
        "link type 1 (Ethernet) instead of 253 (LINKTYPE_NETLINK)",
        Pcap::new(1, 262_144).records(&good_frames()).file.bytes,
        Outcome::Fatal,
        0,
        &["file header at byte offset 0", "link type 1 ", "nlmon0"],
    ));
    cases.push(case(
        "pcap-linktype-nflog.pcap",
        "link type 239 (NFLOG): another Linux capture, still not netlink",
        Pcap::new(239, 262_144).records(&good_frames()).file.bytes,
        Outcome::Fatal,
        0,
        &["link type 239"],
    ));
    cases.push(case(
        "pcap-snaplen-huge.pcap",
        "snaplen 0xffffffff in the file header (tools write this; frames are still fine)",
        Pcap::new(LINKTYPE_NETLINK, u32::MAX)
            .records(&good_frames())
            .file
            .bytes,
        Outcome::Clean,
        2,
        &[],
    ));
    let mut over = Pcap::new(LINKTYPE_NETLINK, 48).records(&good_frames()[..1]);
    let at = over.file.next_at();
    over.record(&good_frames()[1]);
    cases.push(case(
        "pcap-caplen-above-snaplen.pcap",
        "snaplen 48; frame 2 claims a captured length above it",
        over.file.bytes,
        Outcome::Skips,
        1,
        &[&at, "captured length", "more than 48"],
    ));
    let mut absurd = Pcap::new(LINKTYPE_NETLINK, 0).records(&good_frames()[..1]);
    let at = absurd.file.next_at();
    absurd.record_with(0x7fff_ffff, 0x7fff_ffff, &good_frames()[1]);
    cases.push(case(
        "pcap-caplen-huge.pcap",
        "frame 2 claims 2 GiB captured (must be refused before allocating)",
        absurd.file.bytes,
        Outcome::Fatal,
        1,
        &[&at, "captured length is 2147483647 bytes"],
    ));
    let mut cut = Pcap::new(LINKTYPE_NETLINK, 64).records(&good_frames()[..1]);
    let reply = &good_frames()[1];
    cut.record_with(64, reply.len() as u32, &reply[..64]);
    let at = cut.file.at(2);
    cases.push(case(
        "pcap-frame-cut-by-snaplen.pcap",
        "snaplen 64: frame 2 (the reply) captured only in part, its messages run past the cut",
        cut.file.bytes,
        Outcome::Warns,
        2,
        &[&at, "nlmsg_len"],
    ));
    let mut short = Pcap::netlink().records(&good_frames()[..1]);
    let at = short.file.next_at();
    short.record(&[0, 4, 3, 0x38, 0, 0]);
    cases.push(case(
        "pcap-frame-shorter-than-nlmon-header.pcap",
        "frame 2 has 6 bytes, less than the 16-byte nlmon header",
        short.file.bytes,
        Outcome::Skips,
        1,
        &[&at, "shorter than the 16-byte nlmon header"],
    ));
    let mut ether = Pcap::netlink().records(&good_frames()[..1]);
    let at = ether.file.next_at();
    ether.record(&nlmon_frame(1, NETLINK_ROUTE, &getaddr_request()));
    cases.push(case(
        "pcap-nlmon-header-not-netlink.pcap",
        "frame 2's nlmon header says device type 1 (ARPHRD_ETHER), not ARPHRD_NETLINK",
        ether.file.bytes,
        Outcome::Skips,
        1,
        &[&at, "device type 1"],
    ));
    cases.push(case(
        "pcap-big-endian-nanoseconds.pcap",
        "baseline: big-endian file header and records, nanosecond timestamps",
        Pcap::big_endian_nanoseconds()
            .records(&good_frames())
            .file
            .bytes,
        Outcome::Clean,
        2,
        &[],
    ));
    cases.push(case(
        "not-a-capture.txt",
        "a text file",
        b"ip route get 192.0.2.10\n".to_vec(),
        Outcome::Fatal,
        0,
        &["file header at byte offset 0", "not a pcap or pcapng file"],
    ));
    cases.push(case(
        "gzipped-capture.pcap.gz",
        "the first bytes of a gzip file",
        vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3],
        Outcome::Fatal,
        0,
        &["gzip"],
    ));
    cases
}

/// Cases about netlink messages inside otherwise good frames: warnings, never fatal.
fn netlink_cases() -> Vec<Case> {
    let request = getaddr_request();
    let bad_len = |len: u32| {
        nlmsg_with_len(
            RTM_NEWADDR,
            NLM_F_MULTI,
            Some(len),
            &ifaddrmsg(&address_attributes()),
        )
    };
    let real = bad_len(0).len() as u32;
    let newaddr_with = |attributes: Vec<u8>| newaddr_reply(&attributes);
    vec![
        warns_in_frame_2(
            "nlmsg-len-zero.pcap",
            "frame 2: a message with nlmsg_len 0",
            NETLINK_ROUTE,
            &bad_len(0),
            "nlmsg_len 0",
        ),
        warns_in_frame_2(
            "nlmsg-len-huge.pcap",
            "frame 2: a message with nlmsg_len 0xfffffff0",
            NETLINK_ROUTE,
            &bad_len(0xffff_fff0),
            "nlmsg_len 4294967280",
        ),
        warns_in_frame_2(
            "nlmsg-len-below-header.pcap",
            "frame 2: nlmsg_len 8, less than the 16-byte header",
            NETLINK_ROUTE,
            &bad_len(8),
            "nlmsg_len 8",
        ),
        warns_in_frame_2(
            "nlmsg-len-past-frame.pcap",
            "frame 2: nlmsg_len 64 bytes larger than the frame",
            NETLINK_ROUTE,
            &bad_len(real + 64),
            "nlmsg_len",
        ),
        warns_in_frame_2(
            "nlmsg-second-message-len-zero.pcap",
            "frame 2: a good message, then one with nlmsg_len 0 at byte 24",
            NETLINK_ROUTE,
            &[request.clone(), bad_len(0)].concat(),
            "at byte 24",
        ),
        warns_in_frame_2(
            "nlmsg-header-truncated.pcap",
            "frame 2: a good message, then 10 bytes (less than a 16-byte header)",
            NETLINK_ROUTE,
            &[request.clone(), vec![0x30; 10]].concat(),
            "truncated netlink header at byte 24",
        ),
        warns_in_frame_2(
            "attr-len-past-end.pcap",
            "frame 2: RTM_NEWADDR whose IFA_LABEL says 200 bytes, past the message's end",
            NETLINK_ROUTE,
            &newaddr_with(
                [
                    attr(1, &[192, 0, 2, 10]),
                    attr_with_len(3, Some(200), b"eth0\0"),
                ]
                .concat(),
            ),
            "RTM_NEWADDR",
        ),
        warns_in_frame_2(
            "attr-len-zero.pcap",
            "frame 2: RTM_NEWADDR with an attribute of nla_len 0 after IFA_ADDRESS",
            NETLINK_ROUTE,
            &newaddr_with([attr(1, &[192, 0, 2, 10]), attr_with_len(2, Some(0), &[])].concat()),
            "RTM_NEWADDR",
        ),
        warns_in_frame_2(
            "attr-len-below-header.pcap",
            "frame 2: RTM_NEWADDR with an attribute of nla_len 2 (less than its 4-byte header)",
            NETLINK_ROUTE,
            &newaddr_with([attr(1, &[192, 0, 2, 10]), attr_with_len(2, Some(2), &[])].concat()),
            "RTM_NEWADDR",
        ),
        clean_with_frame_2(
            "attr-nested-link-info-deep.pcap",
            "frame 2: RTM_NEWLINK whose IFLA_LINKINFO nests 2000 levels deep (valid: read cleanly)",
            NETLINK_ROUTE,
            &nlmsg(RTM_NEWLINK, NLM_F_MULTI, &ifinfomsg_with(&nested(18, 2000))),
        ),
        clean_with_frame_2(
            "attr-nested-nlctrl-ops-deep.pcap",
            "frame 2: nlctrl CTRL_CMD_NEWFAMILY whose CTRL_ATTR_OPS nests 2000 levels deep (valid: read cleanly)",
            NETLINK_GENERIC,
            &nlmsg(
                GENL_ID_CTRL,
                0,
                &[vec![1, 2, 0, 0], attr(2, b"deep\0"), nested(6, 2000)].concat(),
            ),
        ),
        warns_in_frame_2(
            "genl-header-truncated.pcap",
            "frame 2: a generic-netlink message with 2 bytes, less than the 4-byte genl header",
            NETLINK_GENERIC,
            &nlmsg(GENL_ID_CTRL, NLM_F_REQUEST, &[3, 1]),
            "genl header",
        ),
        warns_in_frame_2(
            "nlmsg-error-truncated.pcap",
            "frame 2: NLMSG_ERROR with 2 bytes, less than its 4-byte error code",
            NETLINK_ROUTE,
            &nlmsg(NLMSG_ERROR, 0, &[0xfe, 0xff]),
            "NLMSG_ERROR",
        ),
    ]
}

/// `struct ifinfomsg` for ifindex 2, then `attributes`.
fn ifinfomsg_with(attributes: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0]; // family, pad
    out.extend_from_slice(&1u16.to_le_bytes()); // ARPHRD_ETHER
    out.extend_from_slice(&2i32.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // flags
    out.extend_from_slice(&0u32.to_le_bytes()); // change
    out.extend_from_slice(attributes);
    out
}

/// Cases about pcapng blocks.
fn pcapng_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (name, big) in [
        ("pcapng-good-little-endian.pcapng", false),
        ("pcapng-good-big-endian.pcapng", true),
    ] {
        cases.push(case(
            name,
            "baseline: section header, one netlink interface, two enhanced packet blocks",
            Pcapng::netlink(big).packets(&good_frames()).file.bytes,
            Outcome::Clean,
            2,
            &[],
        ));
    }
    let mut no_shb = Pcapng::empty(false);
    no_shb.interface(253).packet_on(0, &good_frames()[0]);
    cases.push(case(
        "pcapng-missing-section-header.pcapng",
        "an interface block and a packet with no section header before them",
        no_shb.file.bytes,
        Outcome::Fatal,
        0,
        &["file header at byte offset 0", "not a pcap or pcapng file"],
    ));
    let mut magic = Pcapng::empty(false);
    magic.section_header(0xDEAD_BEEF);
    cases.push(case(
        "pcapng-bad-byte-order-magic.pcapng",
        "a section header whose byte-order magic is 0xdeadbeef",
        magic.file.bytes,
        Outcome::Fatal,
        0,
        &["file header at byte offset 0", "byte-order magic"],
    ));
    let body = |file: &Pcapng| file.packet_body(0, 24, &good_frames()[1][..24], &[]);
    type Lengths = fn(u32) -> (u32, u32);
    let cases_of_lengths: [(&'static str, &'static str, Lengths, &'static str); 4] = [
        (
            "pcapng-block-length-not-multiple-of-4.pcapng",
            "packet 2's block length is 47",
            |_| (47, 47),
            "not a multiple of 4",
        ),
        (
            "pcapng-block-length-too-small.pcapng",
            "packet 2's block length is 8, less than a block's 12-byte frame",
            |_| (8, 8),
            "at least 12",
        ),
        (
            "pcapng-block-length-huge.pcapng",
            "packet 2's block length is 0xfffffff0",
            |_| (0xffff_fff0, 0xffff_fff0),
            "more than",
        ),
        (
            "pcapng-block-trailer-mismatch.pcapng",
            "packet 2's block says 56 bytes at its start and 60 at its end",
            |total| (total, total + 4),
            "56 at its start and 60 at its end",
        ),
    ];
    for (name, what, lengths, problem) in cases_of_lengths {
        let mut file = Pcapng::netlink(false).packets(&good_frames()[..1]);
        let at = file.file.next_at();
        let body = body(&file);
        file.block_with(EPB, &body, lengths);
        cases.push(case(
            name,
            what,
            file.file.bytes,
            Outcome::Fatal,
            1,
            &[&at, problem],
        ));
    }
    let mut unknown = Pcapng::netlink(false).packets(&good_frames()[..1]);
    unknown
        .block(CUSTOM_BLOCK, b"not for us")
        .block(NRB, &[0, 0, 0, 0]);
    let unknown = unknown.packets(&good_frames()[1..]);
    cases.push(case(
        "pcapng-unknown-block-types.pcapng",
        "an unknown block type (0xbad) and a name resolution block between the packets: skipped",
        unknown.file.bytes,
        Outcome::Clean,
        2,
        &[],
    ));
    let mut ether = Pcapng::empty(false);
    ether.section_header(0x1A2B_3C4D).interface(1);
    let ether = ether.packets(&good_frames());
    cases.push(case(
        "pcapng-interface-ethernet.pcapng",
        "the only interface has link type 1 (Ethernet)",
        ether.file.bytes.clone(),
        Outcome::Skips,
        0,
        &[&ether.file.at(1), "link type 1 "],
    ));
    let mut mixed = Pcapng::netlink(false);
    mixed.interface(1);
    let mut mixed = mixed.packets(&good_frames());
    let at = mixed.file.next_at();
    mixed.packet_on(1, &good_frames()[0]);
    cases.push(case(
        "pcapng-second-interface-ethernet.pcapng",
        "two good packets on the netlink interface, then one on a second, Ethernet interface",
        mixed.file.bytes,
        Outcome::Skips,
        2,
        &[&at, "link type 1 "],
    ));
    let mut orphan = Pcapng::empty(false);
    orphan.section_header(0x1A2B_3C4D);
    let orphan = orphan.packets(&good_frames()[..1]);
    cases.push(case(
        "pcapng-packet-before-interface.pcapng",
        "a packet block referring to interface 0 in a section that describes none",
        orphan.file.bytes.clone(),
        Outcome::Skips,
        0,
        &[&orphan.file.at(1), "interface 0"],
    ));
    let two = Pcapng::netlink(false).packets(&good_frames());
    let cut_at = two.file.offsets[1] + 30;
    cases.push(case(
        "pcapng-truncated-mid-block.pcapng",
        "two good packets with the file cut 30 bytes into the second block",
        two.file.bytes[..cut_at].to_vec(),
        Outcome::Fatal,
        1,
        &[&two.file.at(2), "cut short"],
    ));
    let mut past = Pcapng::netlink(false).packets(&good_frames()[..1]);
    let at = past.file.next_at();
    let body = past.packet_body(0, 4096, &good_frames()[1], &[]);
    past.block(EPB, &body);
    cases.push(case(
        "pcapng-caplen-past-block.pcapng",
        "packet 2 claims 4096 captured bytes in a block far smaller",
        past.file.bytes,
        Outcome::Skips,
        1,
        &[&at, "runs past the end of its block"],
    ));
    let mut simple = Pcapng::netlink(false);
    for frame in good_frames() {
        simple.file.offsets.push(simple.file.bytes.len());
        let mut body = (frame.len() as u32).to_le_bytes().to_vec();
        body.extend_from_slice(&frame);
        simple.block(SPB, &body);
    }
    cases.push(case(
        "pcapng-simple-packet-blocks.pcapng",
        "baseline: the packets as simple packet blocks (no interface id, no timestamp)",
        simple.file.bytes,
        Outcome::Clean,
        2,
        &[],
    ));
    let mut options = Pcapng::netlink(false);
    let first_packet = options.file.bytes.len();
    for frame in good_frames() {
        // An option claiming 0x400 bytes, then garbage: options end there, the packet stays.
        let garbage = [1, 0, 0, 4, 0xde, 0xad, 0xbe, 0xef];
        let body = options.packet_body(0, frame.len() as u32, &frame, &garbage);
        options.file.offsets.push(options.file.bytes.len());
        options.block(EPB, &body);
    }
    cases.push(case(
        "pcapng-packet-options-garbage.pcapng",
        "packet options whose lengths run past the block: reported and ignored, the packets kept",
        options.file.bytes,
        Outcome::Warns,
        2,
        &[
            &format!("frame 1 at byte offset {}", first_packet),
            "packet block option 1",
            "claims 1024 bytes",
        ],
    ));
    cases.extend(pcapng_damage_cases());
    cases
}

/// Issue 19: pcapng damage that is read past — each reported, every readable frame kept.
fn pcapng_damage_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // if_tsresol claiming 200 bytes: the interface stays (microseconds, the default).
    let mut file = Pcapng::empty(false);
    file.section_header(0x1A2B_3C4D);
    let at = file.file.bytes.len();
    let option = [file.file.order16(9), file.file.order16(200)].concat();
    file.interface_with(253, &[option, vec![6, 0, 0, 0]].concat());
    cases.push(case(
        "pcapng-interface-option-length-bad.pcapng",
        "the interface's if_tsresol option claims 200 bytes in a block with 4: reported, the \
         interface and its packets kept",
        file.packets(&good_frames()).file.bytes,
        Outcome::Warns,
        2,
        &[
            &format!("block at byte offset {at}"),
            "interface description option 9",
            "claims 200 bytes",
        ],
    ));
    let mut file = Pcapng::netlink(false).packets(&good_frames()[..1]);
    let at = file.file.next_at();
    file.packet_on(7, &good_frames()[0]);
    let file = file.packets(&good_frames()[1..]);
    cases.push(case(
        "pcapng-unknown-interface-id.pcapng",
        "packet 2 refers to interface 7 of a section that describes one: skipped, packet 3 read",
        file.file.bytes,
        Outcome::Skips,
        2,
        &[&at, "interface 7"],
    ));
    let mut file = Pcapng::netlink(false).packets(&good_frames());
    let mut big = Pcapng::netlink(true).packets(&good_frames());
    file.file.bytes.append(&mut big.file.bytes);
    let mut little = Pcapng::netlink(false).packets(&good_frames());
    file.file.bytes.append(&mut little.file.bytes);
    cases.push(case(
        "pcapng-mixed-endianness-sections.pcapng",
        "three sections, little-, big-, then little-endian, each with the two good packets",
        file.file.bytes,
        Outcome::Clean,
        6,
        &[],
    ));
    let route_get = [
        route(&getroute_request()),
        nlmon_frame(1, NETLINK_ROUTE, &getaddr_request()),
        route(&getroute_local_reply()),
    ];
    let file = Pcapng::netlink(false).packets(&route_get);
    let mut middle = case(
        "pcapng-corrupt-frame-in-middle.pcapng",
        "an `ip route get` answered type local dev lo, with a frame whose nlmon header says \
         ARPHRD_ETHER between request and reply: skipped, the diagnosis still made",
        file.file.bytes.clone(),
        Outcome::Skips,
        2,
        &[&file.file.at(2), "device type 1", "reading goes on"],
    );
    middle.output.push("route-get-resolves-to-lo");
    cases.push(middle);
    let mut file = Pcapng::netlink(false).packets(&route_get[..1]);
    let at = file.file.next_at();
    let body = file.packet_body(0, 24, &good_frames()[1][..24], &[]);
    file.block_with(EPB, &body, |_| (47, 47));
    file.file.bytes.extend_from_slice(&[0xee; 10]);
    let resumed = file.file.bytes.len();
    let file = file.packets(&route_get[2..]);
    let mut resync = case(
        "pcapng-corrupt-block-in-middle.pcapng",
        "a block whose length is 47, then 10 bytes of garbage, between request and reply: \
         skipped to the next block, the diagnosis still made",
        file.file.bytes,
        Outcome::Skips,
        2,
        &[
            &at,
            "not a multiple of 4",
            &format!("reading goes on at byte offset {resumed}"),
        ],
    );
    resync.output.push("route-get-resolves-to-lo");
    cases.push(resync);
    let file = Pcapng::netlink(false);
    cases.push(case(
        "pcapng-no-packets.pcapng",
        "a section header and an interface, no packets (not an error, said on stderr)",
        file.file.bytes,
        Outcome::Clean,
        0,
        &["0 frames"],
    ));
    cases
}

/// Cases about JSON-lines recordings (`nodeip-trace replay`).
fn recording_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let fatal_at_line_3 = |name, what, third: &str, problem: &'static str| {
        let bytes = lines(&[HEADER_LINE, NETLINK_LINE, third, NETLINK_LINE]);
        let at = line_at(&bytes, 3);
        case(name, what, bytes, Outcome::Fatal, 2, &[&at, problem])
    };
    cases.push(case(
        "replay-good.jsonl",
        "baseline: a header and two netlink events, with a blank line between",
        lines(&[HEADER_LINE, NETLINK_LINE, "", NETLINK_LINE]),
        Outcome::Clean,
        3,
        &[],
    ));
    cases.push(case(
        "replay-empty.jsonl",
        "an empty recording (not an error: nothing happened)",
        Vec::new(),
        Outcome::Clean,
        0,
        &[],
    ));
    cases.push(fatal_at_line_3(
        "replay-garbage-line.jsonl",
        "line 3 is not JSON",
        "%%% garbage %%%",
        "not a nodeip-trace event",
    ));
    cases.push(fatal_at_line_3(
        "replay-wrong-field-type.jsonl",
        "line 3 has \"pid\": \"12\", a string where a number belongs",
        &NETLINK_LINE.replace(r#""pid":12"#, r#""pid":"12""#),
        "invalid type",
    ));
    cases.push(fatal_at_line_3(
        "replay-unknown-kind.jsonl",
        "line 3 has \"kind\": \"teleport\"",
        &NETLINK_LINE.replace(r#""kind":"netlink""#, r#""kind":"teleport""#),
        "teleport",
    ));
    cases.push(fatal_at_line_3(
        "replay-json-array.jsonl",
        "line 3 is a JSON array, not an object",
        "[1, 2, 3]",
        "not a nodeip-trace event",
    ));
    cases.push(fatal_at_line_3(
        "replay-number-out-of-range.jsonl",
        "line 3 has \"ts_ns\": 1e30",
        &NETLINK_LINE.replace(r#""ts_ns":1000"#, r#""ts_ns":1e30"#),
        "not a nodeip-trace event",
    ));
    let future = HEADER_LINE.replace(r#""schema":1"#, r#""schema":3"#);
    let bytes = lines(&[&future, NETLINK_LINE]);
    cases.push(case(
        "replay-future-schema.jsonl",
        "the header says schema 3 (made by a newer nodeip-trace)",
        bytes,
        Outcome::Fatal,
        0,
        &["line 1", "schema 3"],
    ));
    let mut cut = lines(&[HEADER_LINE, NETLINK_LINE]);
    let at = line_at(&cut, 3);
    cut.extend_from_slice(&NETLINK_LINE.as_bytes()[..100]);
    cases.push(case(
        "replay-truncated-last-line.jsonl",
        "the last line cut after 100 bytes, no newline (recording interrupted)",
        cut,
        Outcome::Fatal,
        2,
        &[&at, "EOF while parsing"],
    ));
    let mut binary = lines(&[HEADER_LINE, NETLINK_LINE]);
    let at = line_at(&binary, 3);
    binary.extend_from_slice(b"{\"ts\":\"\xff\xfe\"}\n");
    binary.extend_from_slice(NETLINK_LINE.as_bytes());
    cases.push(case(
        "replay-not-utf8.jsonl",
        "line 3 holds bytes that are not UTF-8",
        binary,
        Outcome::Fatal,
        2,
        &[&at, "not UTF-8"],
    ));
    cases
}

/// Every corpus file, in README order.
pub fn corpus() -> Vec<Case> {
    [
        pcap_cases(),
        netlink_cases(),
        pcapng_cases(),
        recording_cases(),
    ]
    .concat()
}

/// `tests/malformed/README.md`: what each file is and what must happen.
pub fn readme(cases: &[Case]) -> String {
    let mut out = String::from(
        "# Malformed inputs\n\n\
         Generated by `tests/src/malformed.rs` (`cargo xtask bless` rewrites them; the \
         `malformed_inputs` test checks they are still its output and runs each through \
         `nodeip-trace analyze --format json` or `replay --format json`). Never a panic; \
         *fatal*: the events before the fault, then a diagnostic naming the frame (or line) \
         and byte offset and a non-zero exit; *skips*: every readable frame reported, a \
         diagnostic per damaged frame or stretch of the file skipped naming its frame and byte \
         offset (and where reading went on), exit 4; *warns*: every frame reported, a warning \
         per bad message or ignored option naming its frame and byte offset, exit 0; *clean*: \
         exit 0, no diagnostic (an empty capture says `0 frames`).\n\n\
         | file | command | outcome | frames or lines reported | what |\n|---|---|---|---|---|\n",
    );
    for c in cases {
        let command = match c.reader {
            Reader::Analyze => "analyze",
            Reader::Replay => "replay",
        };
        let outcome = match c.outcome {
            Outcome::Clean => "clean",
            Outcome::Warns => "warns",
            Outcome::Skips => "skips",
            Outcome::Fatal => "fatal",
        };
        let _ = writeln!(
            out,
            "| `{}` | {command} | {outcome} | {} | {} |",
            c.name, c.events, c.what
        );
    }
    out
}
