//! Streaming reader of netlink captures: classic pcap (either byte order, µs or ns timestamps)
//! and pcapng (SHB/IDB/EPB/SPB/PB, either byte order) with link type 253 (LINKTYPE_NETLINK), as
//! written by `tcpdump -i nlmon0` or by our own [`crate::sink::pcap`] writers.
//!
//! Memory stays constant whatever the file size: records are read one at a time from a
//! `BufReader` into a reused buffer ([`CaptureReader::read_frame`] reuses the caller's frame too).
//! [`CaptureReader::bytes_read`] reports progress. Malformed input ends the stream with a
//! [`CaptureError`] naming the frame number and byte offset; every frame before it is returned.
//! What is inside the netlink bytes (e.g. an `nlmsg_len` running past the frame) is the decoder's
//! business, not this reader's.
//!
//! The direction of a frame comes from, in order: the pcapng `epb_flags` direction bits or a
//! `dir=` comment (ours), then [`infer_direction`] from the nlmon header and the messages.
use std::fmt;
use std::io::{self, BufReader, Read};

use crate::model::frame::{Direction, NetlinkFrame};
use crate::model::nlmon::{
    FrameComment, NlmonHeader, ARPHRD_NETLINK, LINKTYPE_NETLINK, NLMON_HEADER_LEN, PACKET_HOST,
};

/// Largest record this reader accepts (caplen, pcapng block). Far above what nlmon or we write
/// (256 KiB); bounds memory on corrupt input.
pub const MAX_RECORD_LEN: u32 = 16 << 20;

/// `NLM_F_REQUEST`: set by processes on every request to the kernel.
const NLM_F_REQUEST: u16 = 0x1;
/// Control message types the kernel sends: `NLMSG_NOOP`, `NLMSG_ERROR`, `NLMSG_DONE`,
/// `NLMSG_OVERRUN`.
const NLMSG_CONTROL_MAX: u16 = 4;

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_IDB: u32 = 1;
const PCAPNG_PB: u32 = 2;
const PCAPNG_SPB: u32 = 3;
const PCAPNG_EPB: u32 = 6;
const PCAPNG_BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
const OPT_ENDOFOPT: u16 = 0;
const OPT_COMMENT: u16 = 1;
const EPB_FLAGS: u16 = 2;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;
/// Upper bound on interfaces per section (memory bound on corrupt input).
const MAX_INTERFACES: usize = 4096;

/// Where in the capture something happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// 1-based frame number (Wireshark's numbering); 0 = the file header, before any frame.
    pub frame: u64,
    /// Byte offset of the record (pcap record header, pcapng block) in the file.
    pub offset: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.frame == 0 {
            write!(f, "file header at byte offset {}", self.offset)
        } else {
            write!(f, "frame {} at byte offset {}", self.frame, self.offset)
        }
    }
}

/// Why reading a capture stopped.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The input could not be read.
    #[error("{at}: reading the capture failed: {source}")]
    Io {
        /// Where.
        at: Position,
        /// The read error.
        #[source]
        source: io::Error,
    },
    /// The file is neither pcap nor pcapng.
    #[error(
        "{at}: not a pcap or pcapng file (first bytes {magic:02x?}); \
         give a capture made by `tcpdump -i nlmon0 -w` or `nodeip-trace --pcap`{hint}"
    )]
    UnknownFormat {
        /// Where.
        at: Position,
        /// The first bytes seen.
        magic: [u8; 4],
        /// A hint for well-known non-capture formats (gzip, ...).
        hint: &'static str,
    },
    /// The capture holds something other than netlink.
    #[error(
        "{at}: link type {linktype} is not LINKTYPE_NETLINK (253); only netlink captures can be \
         read: capture with `tcpdump -i nlmon0 -w FILE` or `nodeip-trace --pcap FILE`"
    )]
    WrongLinkType {
        /// Where.
        at: Position,
        /// The link type found.
        linktype: u32,
    },
    /// The file ends in the middle of a record.
    #[error(
        "{at}: the file ends inside the {what} ({got} of {needed} bytes); the capture was cut \
         short (disk full, or still being written): frames before this one are complete"
    )]
    Truncated {
        /// Where.
        at: Position,
        /// What was being read.
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        got: u64,
    },
    /// A record's length is impossible.
    #[error("{at}: {what} is {len} bytes, more than {limit}; the file is corrupt")]
    BadLength {
        /// Where.
        at: Position,
        /// Which length.
        what: &'static str,
        /// The length found.
        len: u64,
        /// The largest acceptable.
        limit: u64,
    },
    /// The file's structure is broken in another way.
    #[error("{at}: {what}; the file is corrupt or not a netlink capture")]
    Malformed {
        /// Where.
        at: Position,
        /// What is wrong.
        what: String,
    },
}

/// One frame read from a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapturedFrame {
    /// The frame (netlink bytes without the nlmon header).
    pub frame: NetlinkFrame,
    /// 1-based frame number, as Wireshark counts.
    pub number: u64,
    /// Byte offset of the frame's record in the file.
    pub file_offset: u64,
    /// Byte offset in the file of the first netlink byte (after the 16-byte nlmon header): add
    /// a decoder's in-buffer offset to find a faulty message in a hex editor.
    pub data_offset: u64,
    /// The pcapng packet comment, when there was one.
    pub comment: Option<String>,
}

impl Default for CapturedFrame {
    fn default() -> Self {
        Self {
            frame: NetlinkFrame {
                wall_ns: 0,
                ts_ns: 0,
                protocol: 0,
                direction: None,
                task: None,
                total_len: 0,
                bytes: Vec::new(),
            },
            number: 0,
            file_offset: 0,
            data_offset: 0,
            comment: None,
        }
    }
}

/// Container format of a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    /// Classic libpcap.
    Pcap,
    /// pcapng.
    Pcapng,
}

/// The direction of an nlmon frame from its header's packet type and its netlink bytes.
///
/// - Packet type 0 (`PACKET_HOST`, written by our writer for kernel→process) → recv. nlmon
///   itself writes 4 (`PACKET_OUTGOING`) in both directions, so 4 says nothing.
/// - Otherwise the first message decides: `NLM_F_REQUEST` → send (the kernel ignores requests
///   without it and never sets it itself); anything else — `NLMSG_ERROR`/`DONE`, `NLM_F_MULTI`
///   dump parts, replies and notifications — → recv. `nlmsg_pid` does not help: iproute2 sends
///   requests with pid 0, libnl with its port id, and the kernel's replies carry the port id.
/// - Fewer than 16 netlink bytes → unknown.
///
/// The message header is read in the byte order whose `nlmsg_len` best fits the frame (as
/// Wireshark does), so captures from big-endian hosts work too.
pub fn infer_direction(packet_type: u16, netlink: &[u8]) -> Option<Direction> {
    if packet_type == PACKET_HOST {
        return Some(Direction::Recv);
    }
    let header: &[u8; 16] = netlink.get(..16)?.try_into().ok()?;
    let le_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let be_len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
    let size = netlink.len() as u32;
    let little = le_len.abs_diff(size) <= be_len.abs_diff(size);
    let u16_at = |i: usize| {
        let b = [header[i], header[i + 1]];
        if little {
            u16::from_le_bytes(b)
        } else {
            u16::from_be_bytes(b)
        }
    };
    let (kind, flags) = (u16_at(4), u16_at(6));
    if kind > NLMSG_CONTROL_MAX && flags & NLM_F_REQUEST != 0 {
        Some(Direction::Send)
    } else {
        Some(Direction::Recv)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endian {
    Little,
    Big,
}

impl Endian {
    fn u16(self, b: &[u8], at: usize) -> u16 {
        let v = [b[at], b[at + 1]];
        match self {
            Endian::Little => u16::from_le_bytes(v),
            Endian::Big => u16::from_be_bytes(v),
        }
    }

    fn u32(self, b: &[u8], at: usize) -> u32 {
        let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        match self {
            Endian::Little => u32::from_le_bytes(v),
            Endian::Big => u32::from_be_bytes(v),
        }
    }

    fn u64(self, b: &[u8], at: usize) -> u64 {
        let mut v = [0u8; 8];
        v.copy_from_slice(&b[at..at + 8]);
        match self {
            Endian::Little => u64::from_le_bytes(v),
            Endian::Big => u64::from_be_bytes(v),
        }
    }
}

/// A pcapng interface: what its packets' link type and timestamps mean.
#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: u16,
    snaplen: u32,
    /// `if_tsresol`: high bit set = 2^-n seconds, else 10^-n.
    tsresol: u8,
    /// `if_tsoffset`, seconds.
    tsoffset: i64,
}

impl Interface {
    fn wall_ns(&self, ts: u64) -> i128 {
        let ts = ts as u128;
        let exp = u32::from(self.tsresol & 0x7f);
        let ns = if self.tsresol & 0x80 != 0 {
            match 1u128.checked_shl(exp) {
                Some(units) => ts * 1_000_000_000 / units,
                None => 0,
            }
        } else if exp <= 9 {
            ts * 10u128.pow(9 - exp)
        } else {
            ts / 10u128.checked_pow(exp - 9).unwrap_or(u128::MAX)
        };
        ns as i128 + i128::from(self.tsoffset) * 1_000_000_000
    }
}

/// What a record says about its packet besides the bytes (which are in the record buffer).
struct PacketInfo {
    wall_ns: i128,
    /// Original length (nlmon header included).
    orig_len: u32,
    /// File offset of the packet bytes (the nlmon header).
    data_offset: u64,
    /// From pcapng `epb_flags`.
    direction: Option<Direction>,
    /// The pcapng packet comment.
    comment: Option<String>,
}

#[derive(Debug)]
enum State {
    Pcap {
        endian: Endian,
        nanos: bool,
        snaplen: u32,
    },
    Pcapng {
        endian: Endian,
        interfaces: Vec<Interface>,
    },
}

/// Streaming reader over a pcap or pcapng netlink capture; an iterator of
/// `Result<CapturedFrame, CaptureError>` that ends after the first error.
#[derive(Debug)]
pub struct CaptureReader<R: Read> {
    input: BufReader<R>,
    state: State,
    /// Bytes consumed so far.
    offset: u64,
    /// Number of the last frame returned.
    number: u64,
    /// Reused record buffer.
    record: Vec<u8>,
    done: bool,
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header and returns a reader positioned at the first frame.
    pub fn new(input: R) -> Result<Self, CaptureError> {
        let mut reader = Self {
            input: BufReader::with_capacity(64 * 1024, input),
            state: State::Pcapng {
                endian: Endian::Little,
                interfaces: Vec::new(),
            },
            offset: 0,
            number: 0,
            record: Vec::new(),
            done: false,
        };
        let at = reader.position();
        let mut magic = [0u8; 4];
        reader.fill(&mut magic, "file magic", at)?;
        match magic {
            [0x0a, 0x0d, 0x0d, 0x0a] => reader.read_section_header(at)?,
            _ => reader.read_pcap_header(at, magic)?,
        }
        Ok(reader)
    }

    /// The container format.
    pub fn format(&self) -> CaptureFormat {
        match self.state {
            State::Pcap { .. } => CaptureFormat::Pcap,
            State::Pcapng { .. } => CaptureFormat::Pcapng,
        }
    }

    /// Bytes of the file consumed so far (for progress against the file size).
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// Reads the next frame into `out`, reusing its buffers. `Ok(false)` at the end of the file.
    /// After an error, the reader returns `Ok(false)`.
    pub fn read_frame(&mut self, out: &mut CapturedFrame) -> Result<bool, CaptureError> {
        if self.done {
            return Ok(false);
        }
        let result = match self.state {
            State::Pcap { .. } => self.read_pcap_frame(out),
            State::Pcapng { .. } => self.read_pcapng_frame(out),
        };
        if !matches!(result, Ok(true)) {
            self.done = true;
        }
        result
    }

    fn position(&self) -> Position {
        Position {
            frame: self.number,
            offset: self.offset,
        }
    }

    /// Where the next frame starts.
    fn next_position(&self) -> Position {
        Position {
            frame: self.number + 1,
            offset: self.offset,
        }
    }

    /// Reads as many bytes as the input has, up to `buf.len()`.
    fn read_up_to(&mut self, buf: &mut [u8], at: Position) -> Result<usize, CaptureError> {
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(CaptureError::Io { at, source }),
            }
        }
        self.offset += got as u64;
        Ok(got)
    }

    /// Reads the first bytes of a record: `Ok(false)` at a clean end of file, `Ok(true)` with
    /// `buf` full, [`CaptureError::Truncated`] when the file ends inside `buf`.
    fn read_record_start(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
        at: Position,
    ) -> Result<bool, CaptureError> {
        match self.read_up_to(buf, at)? {
            0 => Ok(false),
            got if got == buf.len() => Ok(true),
            got => Err(CaptureError::Truncated {
                at,
                what,
                needed: buf.len() as u64,
                got: got as u64,
            }),
        }
    }

    /// Reads exactly `buf.len()` bytes or fails with [`CaptureError::Truncated`].
    fn fill(
        &mut self,
        buf: &mut [u8],
        what: &'static str,
        at: Position,
    ) -> Result<(), CaptureError> {
        let got = self.read_up_to(buf, at)?;
        if got < buf.len() {
            return Err(CaptureError::Truncated {
                at,
                what,
                needed: buf.len() as u64,
                got: got as u64,
            });
        }
        Ok(())
    }

    /// Reads `len` bytes into the reused record buffer.
    fn fill_record(
        &mut self,
        len: usize,
        what: &'static str,
        at: Position,
    ) -> Result<(), CaptureError> {
        let mut record = std::mem::take(&mut self.record);
        record.clear();
        record.resize(len, 0);
        let result = self.fill(&mut record, what, at);
        self.record = record;
        result
    }

    fn read_pcap_header(&mut self, at: Position, magic: [u8; 4]) -> Result<(), CaptureError> {
        let (endian, nanos) = match u32::from_le_bytes(magic) {
            0xa1b2_c3d4 => (Endian::Little, false),
            0xa1b2_3c4d => (Endian::Little, true),
            0xd4c3_b2a1 => (Endian::Big, false),
            0x4d3c_b2a1 => (Endian::Big, true),
            _ => {
                let hint = match magic {
                    [0x1f, 0x8b, ..] => " (this is gzip: decompress it first)",
                    [0x34, 0xcd, 0xb2, 0xa1] | [0xa1, 0xb2, 0xcd, 0x34] => {
                        " (this is the modified Kuznetzov pcap format: convert it with editcap)"
                    }
                    _ => "",
                };
                return Err(CaptureError::UnknownFormat { at, magic, hint });
            }
        };
        let mut rest = [0u8; 20];
        self.fill(&mut rest, "pcap file header", at)?;
        let snaplen = endian.u32(&rest, 12);
        let linktype = endian.u32(&rest, 16) & 0x0fff_ffff; // upper bits: FCS info
        self.state = State::Pcap {
            endian,
            nanos,
            snaplen,
        };
        if linktype != u32::from(LINKTYPE_NETLINK) {
            return Err(CaptureError::WrongLinkType { at, linktype });
        }
        Ok(())
    }

    fn read_pcap_frame(&mut self, out: &mut CapturedFrame) -> Result<bool, CaptureError> {
        let State::Pcap {
            endian,
            nanos,
            snaplen,
            ..
        } = self.state
        else {
            return Ok(false);
        };
        let at = self.next_position();
        let mut head = [0u8; 16];
        if !self.read_record_start(&mut head, "pcap record header", at)? {
            return Ok(false);
        }
        let (sec, frac) = (endian.u32(&head, 0), endian.u32(&head, 4));
        let (caplen, orig_len) = (endian.u32(&head, 8), endian.u32(&head, 12));
        let limit = if snaplen == 0 {
            MAX_RECORD_LEN
        } else {
            snaplen.min(MAX_RECORD_LEN)
        };
        if caplen > limit {
            return Err(CaptureError::BadLength {
                at,
                what: "captured length",
                len: caplen.into(),
                limit: if snaplen == 0 || snaplen > MAX_RECORD_LEN {
                    u64::from(MAX_RECORD_LEN)
                } else {
                    u64::from(snaplen)
                },
            });
        }
        self.fill_record(caplen as usize, "pcap frame data", at)?;
        let frac_ns = if nanos {
            i128::from(frac)
        } else {
            i128::from(frac) * 1000
        };
        let wall_ns = i128::from(sec) * 1_000_000_000 + frac_ns;
        self.number += 1;
        let packet = PacketInfo {
            wall_ns,
            orig_len,
            data_offset: at.offset + 16,
            direction: None,
            comment: None,
        };
        self.finish_frame(out, at, packet)?;
        Ok(true)
    }

    /// Parses the nlmon header in the record buffer (the packet bytes) and fills `out`.
    fn finish_frame(
        &mut self,
        out: &mut CapturedFrame,
        at: Position,
        packet: PacketInfo,
    ) -> Result<(), CaptureError> {
        let PacketInfo {
            wall_ns,
            orig_len,
            data_offset,
            direction: explicit_direction,
            comment,
        } = packet;
        let Some(header) = NlmonHeader::decode(&self.record) else {
            return Err(CaptureError::Malformed {
                at,
                what: format!(
                    "frame of {} bytes is shorter than the {NLMON_HEADER_LEN}-byte nlmon header",
                    self.record.len()
                ),
            });
        };
        if header.hatype != ARPHRD_NETLINK {
            return Err(CaptureError::Malformed {
                at,
                what: format!(
                    "nlmon header has device type {} instead of ARPHRD_NETLINK ({ARPHRD_NETLINK})",
                    header.hatype
                ),
            });
        }
        let netlink = &self.record[NLMON_HEADER_LEN..];
        let (task, comment_direction) = match comment.as_deref().map(FrameComment::parse) {
            Some(c) => (c.task, c.direction),
            None => (None, None),
        };
        let frame = &mut out.frame;
        frame.wall_ns = wall_ns;
        frame.ts_ns = u64::try_from(wall_ns).unwrap_or(0);
        frame.protocol = header.protocol;
        frame.direction = explicit_direction
            .or(comment_direction)
            .or_else(|| infer_direction(header.packet_type, netlink));
        frame.task = task;
        let moved = (orig_len as usize).saturating_sub(NLMON_HEADER_LEN);
        frame.total_len = u32::try_from(moved.max(netlink.len())).unwrap_or(u32::MAX);
        frame.bytes.clear();
        frame.bytes.extend_from_slice(netlink);
        out.number = at.frame;
        out.file_offset = at.offset;
        out.data_offset = data_offset + NLMON_HEADER_LEN as u64;
        out.comment = comment;
        Ok(())
    }

    /// Reads an SHB whose 4-byte type was already consumed at `at`.
    fn read_section_header(&mut self, at: Position) -> Result<(), CaptureError> {
        let mut head = [0u8; 8];
        self.fill(&mut head, "pcapng section header", at)?;
        let endian = match u32::from_be_bytes([head[4], head[5], head[6], head[7]]) {
            PCAPNG_BYTE_ORDER_MAGIC => Endian::Big,
            m if m.swap_bytes() == PCAPNG_BYTE_ORDER_MAGIC => Endian::Little,
            m => {
                return Err(CaptureError::Malformed {
                    at,
                    what: format!("pcapng section header has byte-order magic {m:#010x}"),
                })
            }
        };
        let total = endian.u32(&head, 0);
        let body = self.block_body_len(at, total, 12)?;
        self.fill_record(body, "pcapng section header", at)?;
        self.check_trailer(at, endian, total)?;
        self.state = State::Pcapng {
            endian,
            interfaces: Vec::new(),
        };
        Ok(())
    }

    /// Checks a block's total length and returns the body length after `consumed` bytes, minus
    /// the 4-byte trailing length.
    fn block_body_len(
        &self,
        at: Position,
        total: u32,
        consumed: u32,
    ) -> Result<usize, CaptureError> {
        if total > MAX_RECORD_LEN {
            return Err(CaptureError::BadLength {
                at,
                what: "pcapng block length",
                len: total.into(),
                limit: MAX_RECORD_LEN.into(),
            });
        }
        if total < consumed + 4 || !total.is_multiple_of(4) {
            return Err(CaptureError::Malformed {
                at,
                what: format!("pcapng block length {total} is not a multiple of 4 of at least 12"),
            });
        }
        Ok((total - consumed - 4) as usize)
    }

    fn check_trailer(
        &mut self,
        at: Position,
        endian: Endian,
        total: u32,
    ) -> Result<(), CaptureError> {
        let mut trailer = [0u8; 4];
        self.fill(&mut trailer, "pcapng block trailer", at)?;
        let again = endian.u32(&trailer, 0);
        if again != total {
            return Err(CaptureError::Malformed {
                at,
                what: format!(
                    "pcapng block says length {total} at its start and {again} at its end"
                ),
            });
        }
        Ok(())
    }

    fn read_pcapng_frame(&mut self, out: &mut CapturedFrame) -> Result<bool, CaptureError> {
        loop {
            let at = self.next_position();
            let mut kind_bytes = [0u8; 4];
            if !self.read_record_start(&mut kind_bytes, "pcapng block header", at)? {
                return Ok(false);
            }
            if kind_bytes == PCAPNG_SHB.to_be_bytes() {
                self.read_section_header(at)?;
                continue;
            }
            let State::Pcapng { endian, .. } = self.state else {
                return Ok(false);
            };
            let mut len_bytes = [0u8; 4];
            self.fill(&mut len_bytes, "pcapng block header", at)?;
            let kind = endian.u32(&kind_bytes, 0);
            let total = endian.u32(&len_bytes, 0);
            let body = self.block_body_len(at, total, 8)?;
            self.fill_record(body, "pcapng block", at)?;
            self.check_trailer(at, endian, total)?;
            match kind {
                PCAPNG_IDB => self.add_interface(at, endian)?,
                PCAPNG_EPB | PCAPNG_PB | PCAPNG_SPB => {
                    self.packet_block(out, at, endian, kind)?;
                    return Ok(true);
                }
                _ => {} // name resolution, statistics, journal, custom: not ours
            }
        }
    }

    fn add_interface(&mut self, at: Position, endian: Endian) -> Result<(), CaptureError> {
        let body = &self.record;
        if body.len() < 8 {
            return Err(CaptureError::Malformed {
                at,
                what: format!("pcapng interface description of {} bytes", body.len()),
            });
        }
        let mut interface = Interface {
            linktype: endian.u16(body, 0),
            snaplen: endian.u32(body, 4),
            tsresol: 6,
            tsoffset: 0,
        };
        for (code, value) in options(&body[8..], endian) {
            match (code, value.len()) {
                (IF_TSRESOL, 1) => interface.tsresol = value[0],
                (IF_TSOFFSET, 8) => interface.tsoffset = endian.u64(value, 0) as i64,
                _ => {}
            }
        }
        let State::Pcapng { interfaces, .. } = &mut self.state else {
            return Ok(());
        };
        if interfaces.len() >= MAX_INTERFACES {
            return Err(CaptureError::BadLength {
                at,
                what: "number of pcapng interfaces",
                len: interfaces.len() as u64 + 1,
                limit: MAX_INTERFACES as u64,
            });
        }
        interfaces.push(interface);
        Ok(())
    }

    /// Turns an EPB/PB/SPB in the record buffer into a frame.
    fn packet_block(
        &mut self,
        out: &mut CapturedFrame,
        at: Position,
        endian: Endian,
        kind: u32,
    ) -> Result<(), CaptureError> {
        let body = &self.record;
        let malformed = |what: String| CaptureError::Malformed { at, what };
        // (interface id, timestamp, caplen, original length, offset of the data)
        let (interface_id, ts, caplen, orig_len, data_at) = match kind {
            PCAPNG_EPB | PCAPNG_PB if body.len() >= 20 => {
                let id = if kind == PCAPNG_EPB {
                    endian.u32(body, 0)
                } else {
                    u32::from(endian.u16(body, 0))
                };
                let ts = (u64::from(endian.u32(body, 4)) << 32) | u64::from(endian.u32(body, 8));
                (id, ts, endian.u32(body, 12), endian.u32(body, 16), 20)
            }
            PCAPNG_SPB if body.len() >= 4 => {
                let orig = endian.u32(body, 0);
                let room = (body.len() - 4) as u32;
                (0, 0, orig.min(room), orig, 4)
            }
            _ => {
                return Err(malformed(format!(
                    "pcapng packet block of {} bytes is too short",
                    body.len()
                )))
            }
        };
        let State::Pcapng { interfaces, .. } = &self.state else {
            return Ok(());
        };
        let Some(interface) = interfaces.get(interface_id as usize).copied() else {
            return Err(malformed(format!(
                "packet refers to interface {interface_id}, but the section describes {}",
                interfaces.len()
            )));
        };
        if interface.linktype != LINKTYPE_NETLINK {
            return Err(CaptureError::WrongLinkType {
                at,
                linktype: interface.linktype.into(),
            });
        }
        let data_end = data_at + caplen as usize;
        if data_end > body.len() {
            return Err(malformed(format!(
                "captured length {caplen} runs past the end of its block"
            )));
        }
        if interface.snaplen != 0 && caplen > interface.snaplen {
            return Err(CaptureError::BadLength {
                at,
                what: "captured length",
                len: caplen.into(),
                limit: interface.snaplen.into(),
            });
        }
        let (mut direction, mut comment) = (None, None);
        if kind != PCAPNG_SPB {
            let options_at = data_end.next_multiple_of(4).min(body.len());
            for (code, value) in options(&body[options_at..], endian) {
                match (code, value.len()) {
                    (OPT_COMMENT, _) => {
                        comment = Some(String::from_utf8_lossy(value).into_owned());
                    }
                    (EPB_FLAGS, 4) if kind == PCAPNG_EPB => {
                        direction = match endian.u32(value, 0) & 3 {
                            1 => Some(Direction::Recv),
                            2 => Some(Direction::Send),
                            _ => None,
                        }
                    }
                    _ => {}
                }
            }
        }
        let wall_ns = interface.wall_ns(ts);
        // Keep only the packet bytes in the record buffer for finish_frame.
        self.record.truncate(data_end);
        self.record.drain(..data_at);
        self.number += 1;
        let at = Position {
            frame: self.number,
            ..at
        };
        let packet = PacketInfo {
            wall_ns,
            orig_len,
            // Block type and length, then the body up to the packet data.
            data_offset: at.offset + 8 + data_at as u64,
            direction,
            comment,
        };
        self.finish_frame(out, at, packet)
    }
}

/// The `(code, value)` options of a pcapng block body, up to `opt_endofopt` or a broken option.
fn options(mut body: &[u8], endian: Endian) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if body.len() < 4 {
            return None;
        }
        let (code, len) = (endian.u16(body, 0), endian.u16(body, 2) as usize);
        if code == OPT_ENDOFOPT || 4 + len > body.len() {
            return None;
        }
        let value = &body[4..4 + len];
        body = &body[(4 + len).next_multiple_of(4).min(body.len())..];
        Some((code, value))
    })
}

impl<R: Read> Iterator for CaptureReader<R> {
    type Item = Result<CapturedFrame, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut out = CapturedFrame::default();
        match self.read_frame(&mut out) {
            Ok(true) => Some(Ok(out)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
