//! Streaming reader of netlink captures: classic pcap (either byte order, µs or ns timestamps)
//! and pcapng (SHB/IDB/EPB/SPB/PB, either byte order) with link type 253 (LINKTYPE_NETLINK), as
//! written by `tcpdump -i nlmon0` or by our own [`crate::sink::pcap`] writers.
//!
//! Memory stays constant whatever the file size: records are read one at a time from a
//! `BufReader` into a reused buffer ([`CaptureReader::read_frame`] reuses the caller's frame too).
//! [`CaptureReader::bytes_read`] reports progress.
//!
//! The reader keeps everything it can read. A frame whose content is corrupt (its nlmon header,
//! a captured length past its block, an interface the section does not describe or that is not
//! netlink) is skipped; a pcapng block whose framing is corrupt (its lengths) is skipped by
//! scanning forward, byte by byte, for the next plausible block (a known type, a sane length
//! repeated at its end); an option whose length runs past its block is ignored from there on. Each of these is
//! queued as a problem naming the frame number and byte offset ([`CaptureReader::take_problems`],
//! [`CaptureError::Skipped`] for what was skipped) and reading goes on. Only what cannot be
//! resynchronised ends the stream with a [`CaptureError`]: the file header, a file cut short, a
//! classic pcap record length beyond any sane bound (classic pcap has no markers to find the next
//! record by), or a pcapng fault with no plausible block after it. What is inside the netlink
//! bytes (e.g. an `nlmsg_len` running past the frame) is the decoder's business, not this
//! reader's.
//!
//! The direction of a frame comes from, in order: the pcapng `epb_flags` direction bits or a
//! `dir=` comment (ours), then [`infer_direction`] from the nlmon header and the messages.
pub mod mapped;

use std::fmt;
use std::io::{self, BufReader, Read};

use crate::model::frame::{Direction, NetlinkFrame};
use crate::model::nlmon::{
    FrameComment, NamespaceNote, NlmonHeader, ARPHRD_NETLINK, LINKTYPE_NETLINK, NLMON_HEADER_LEN,
    PACKET_HOST,
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
    /// 1-based frame number (Wireshark's numbering); 0 = not a frame: the file header, or a
    /// pcapng block that holds no packet (section header, interface description).
    pub frame: u64,
    /// Byte offset of the record (pcap record header, pcapng block) in the file.
    pub offset: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.frame == 0 && self.offset == 0 {
            write!(f, "file header at byte offset 0")
        } else if self.frame == 0 {
            write!(f, "block at byte offset {}", self.offset)
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
    /// A pcapng option's length runs past its block: that option and those after it in the
    /// block are ignored; the block itself is kept.
    #[error(
        "{at}: pcapng {block} option {code} at byte offset {offset} claims {len} bytes but only \
         {room} remain in the block; it and the options after it are ignored, the {block} is kept"
    )]
    BadOption {
        /// Where the block starts.
        at: Position,
        /// Which block (`packet block`, `interface description`, `section header`).
        block: &'static str,
        /// The option code.
        code: u16,
        /// File offset of the option.
        offset: u64,
        /// The length it claims.
        len: u16,
        /// The bytes left in the block for its value.
        room: u64,
    },
    /// A damaged frame or stretch of the file was skipped and reading went on after it.
    #[error("{source}; skipped {bytes} bytes, reading goes on at byte offset {resumed_at}")]
    Skipped {
        /// What was wrong with it.
        #[source]
        source: Box<CaptureError>,
        /// How many bytes were skipped.
        bytes: u64,
        /// File offset where reading went on.
        resumed_at: u64,
    },
}

impl CaptureError {
    /// Where in the capture it happened.
    pub fn position(&self) -> Position {
        match self {
            CaptureError::Io { at, .. }
            | CaptureError::UnknownFormat { at, .. }
            | CaptureError::WrongLinkType { at, .. }
            | CaptureError::Truncated { at, .. }
            | CaptureError::BadLength { at, .. }
            | CaptureError::Malformed { at, .. }
            | CaptureError::BadOption { at, .. } => *at,
            CaptureError::Skipped { source, .. } => source.position(),
        }
    }
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
                netns: 0,
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
    /// The network namespace our writer named this interface after (0: none).
    netns: u32,
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
    /// The network namespace of the packet's interface (0: unknown).
    netns: u32,
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
/// `Result<CapturedFrame, CaptureError>` that yields every readable frame and ends after the
/// first error it cannot read past (what it skipped is in [`CaptureReader::take_problems`]).
#[derive(Debug)]
pub struct CaptureReader<R: Read> {
    input: BufReader<R>,
    state: State,
    /// Bytes consumed so far.
    offset: u64,
    /// Number of the last frame read (returned or skipped).
    number: u64,
    /// Reused record buffer: a pcap frame's bytes, or a whole pcapng block.
    record: Vec<u8>,
    /// Bytes read ahead while resynchronising, to be read again before the input.
    pending: Vec<u8>,
    /// How much of `pending` was read again.
    pending_at: usize,
    /// What was skipped or ignored since the last [`CaptureReader::take_problems`].
    problems: Vec<CaptureError>,
    /// Namespaces our writer described, since the last [`CaptureReader::take_namespaces`].
    namespaces: Vec<NamespaceNote>,
    done: bool,
}

/// How far past a corrupt pcapng block the reader looks for the next plausible one.
const MAX_RESYNC_SCAN: u64 = 64 << 20;

/// Block types a resynchronising scan accepts (pcapng draft: IDB, PB, SPB, NRB, ISB, EPB,
/// IRIG, ARINC, systemd journal, decryption secrets; custom blocks).
fn known_block_type(kind: u32) -> bool {
    matches!(kind, 1..=10 | 0x0000_0BAD | 0x4000_0BAD)
}

/// Refuses a record length past [`MAX_RECORD_LEN`] before anything is allocated for it.
fn within_bound(at: Position, what: &'static str, len: u32) -> Result<(), CaptureError> {
    if len > MAX_RECORD_LEN {
        return Err(CaptureError::BadLength {
            at,
            what,
            len: len.into(),
            limit: MAX_RECORD_LEN.into(),
        });
    }
    Ok(())
}

/// The byte order of a section header whose first 12 bytes are `head`, from its byte-order magic.
fn section_byte_order(head: &[u8]) -> Option<Endian> {
    match u32::from_be_bytes(head.get(8..12)?.try_into().ok()?) {
        PCAPNG_BYTE_ORDER_MAGIC => Some(Endian::Big),
        m if m.swap_bytes() == PCAPNG_BYTE_ORDER_MAGIC => Some(Endian::Little),
        _ => None,
    }
}

/// A plausible pcapng block at the start of `bytes` (a known type, a sane length) in byte order
/// `endian` (a section header brings its own): its length and byte order.
fn plausible_block(bytes: &[u8], endian: Endian) -> Option<(usize, Endian)> {
    let head = bytes.get(..12)?;
    let endian = if head[..4] == PCAPNG_SHB.to_be_bytes() {
        section_byte_order(head)?
    } else if known_block_type(endian.u32(head, 0)) {
        endian
    } else {
        return None;
    };
    let total = endian.u32(head, 4);
    (total >= 12 && total.is_multiple_of(4) && total <= MAX_RECORD_LEN)
        .then_some((total as usize, endian))
}

/// A classic pcap file's byte order and whether its timestamps are in nanoseconds, from its
/// magic number.
fn pcap_byte_order(magic: [u8; 4]) -> Option<(Endian, bool)> {
    match u32::from_le_bytes(magic) {
        0xa1b2_c3d4 => Some((Endian::Little, false)),
        0xa1b2_3c4d => Some((Endian::Little, true)),
        0xd4c3_b2a1 => Some((Endian::Big, false)),
        0x4d3c_b2a1 => Some((Endian::Big, true)),
        _ => None,
    }
}

/// The snap length and link type of a classic pcap file header, from its 20 bytes after the
/// magic number.
fn pcap_header_fields(endian: Endian, after_magic: &[u8]) -> (u32, u32) {
    let snaplen = endian.u32(after_magic, 12);
    let linktype = endian.u32(after_magic, 16) & 0x0fff_ffff; // upper bits: FCS info
    (snaplen, linktype)
}

/// A frame of a capture in memory, read in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameInPlace<'a> {
    /// Netlink protocol, from the nlmon header.
    pub protocol: u16,
    /// The netlink bytes after the nlmon header.
    pub bytes: &'a [u8],
    /// Where the frame's record ends in the capture.
    pub end: usize,
}

/// The frames of a classic netlink pcap held in memory (a mapped file), read in place: no byte
/// is copied, where a [`CaptureReader`] copies every frame out of its input. `None` when
/// `capture` is not a classic pcap of link type 253 (pcapng, say): read it with a
/// [`CaptureReader`]. The frames are those the reader returns (a record past the snap length or
/// without a netlink nlmon header is passed over, as the reader skips it), and the walk ends
/// quietly where the reader would fail. A first pass that looks for a few messages (`analyze`'s
/// interface names) reads a mapped file this way at the cost of the memory reads alone.
pub fn pcap_frames_in_place(capture: &[u8]) -> Option<impl Iterator<Item = FrameInPlace<'_>>> {
    let header = capture.get(..24)?;
    let (endian, _) = pcap_byte_order(header[..4].try_into().ok()?)?;
    let (snaplen, linktype) = pcap_header_fields(endian, &header[4..]);
    if linktype != u32::from(LINKTYPE_NETLINK) {
        return None;
    }
    let mut at = 24;
    Some(std::iter::from_fn(move || loop {
        let head = capture.get(at..at + 16)?;
        let caplen = endian.u32(head, 8);
        if caplen > MAX_RECORD_LEN {
            return None;
        }
        let start = at + 16;
        let end = start + caplen as usize;
        let record = capture.get(start..end)?;
        at = end;
        if snaplen != 0 && caplen > snaplen {
            continue;
        }
        match NlmonHeader::decode(record) {
            Some(nlmon) if nlmon.hatype == ARPHRD_NETLINK => {
                return Some(FrameInPlace {
                    protocol: nlmon.protocol,
                    bytes: &record[NLMON_HEADER_LEN..],
                    end,
                })
            }
            _ => continue,
        }
    }))
}

/// How far ahead of its reads a [`PrefetchedBytes`] has the CPU fetch the capture.
const PREFETCH_AHEAD: usize = 8 << 10;
/// A CPU cache line.
const CACHE_LINE: usize = 64;

/// A capture in memory (a mapped file) read from the front, asking the CPU to fetch the bytes
/// [`PREFETCH_AHEAD`] further on with each read. Without it every frame of a file larger than
/// the caches began with a wait for memory: the hardware prefetcher loses the stream between
/// frames (a microsecond of decoding each), and the first read of each frame stalled.
#[derive(Debug)]
pub struct PrefetchedBytes<'a> {
    bytes: &'a [u8],
}

impl<'a> PrefetchedBytes<'a> {
    /// Reads `bytes` from their start.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }
}

impl Read for PrefetchedBytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len().min(self.bytes.len());
        // The cache lines `len` bytes further on than the last read asked for: over a run of
        // reads, each line once.
        if let Some(ahead) = self.bytes.get(PREFETCH_AHEAD..PREFETCH_AHEAD + len) {
            for line in ahead.chunks(CACHE_LINE) {
                prefetch(line);
            }
        }
        self.bytes.read(buf)
    }
}

/// Asks the CPU to bring the cache line of `bytes`' first byte in (a hint: nothing is read).
#[cfg(target_arch = "x86_64")]
fn prefetch(bytes: &[u8]) {
    // SAFETY: `prefetcht0` needs SSE, part of every x86_64 CPU; a prefetch never faults and
    // changes no memory, and the address is of a live slice anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            bytes.as_ptr().cast(),
        );
    }
}

/// Elsewhere: no hint.
#[cfg(not(target_arch = "x86_64"))]
fn prefetch(_bytes: &[u8]) {}

/// Read buffer of a [`CaptureReader`] over a file or stream.
const READ_BUFFER: usize = 64 * 1024;

impl<R: Read> CaptureReader<R> {
    /// Reads the file header and returns a reader positioned at the first frame.
    pub fn new(input: R) -> Result<Self, CaptureError> {
        Self::with_buffer(input, READ_BUFFER)
    }

    /// [`CaptureReader::new`] for input already in memory (a byte slice, a mapped file): read
    /// from directly, without a read buffer's copy of every byte.
    pub fn unbuffered(input: R) -> Result<Self, CaptureError> {
        Self::with_buffer(input, 0)
    }

    /// [`CaptureReader::new`] with a read buffer of `capacity` bytes (0: none).
    fn with_buffer(input: R, capacity: usize) -> Result<Self, CaptureError> {
        let mut reader = Self {
            input: BufReader::with_capacity(capacity, input),
            state: State::Pcapng {
                endian: Endian::Little,
                interfaces: Vec::new(),
            },
            offset: 0,
            number: 0,
            record: Vec::new(),
            pending: Vec::new(),
            pending_at: 0,
            problems: Vec::new(),
            namespaces: Vec::new(),
            done: false,
        };
        let at = reader.position();
        let mut magic = [0u8; 4];
        reader.fill(&mut magic, "file magic", at)?;
        match magic {
            [0x0a, 0x0d, 0x0d, 0x0a] => {
                // Read the section header as a whole block.
                reader.pending = magic.to_vec();
                reader.offset = 0;
                match reader.read_block(at)? {
                    Some((PCAPNG_SHB, endian)) => reader.section_options(at, endian),
                    _ => {
                        return Err(CaptureError::Truncated {
                            at,
                            what: "pcapng section header",
                            needed: 28,
                            got: 4,
                        })
                    }
                }
            }
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

    /// What was skipped ([`CaptureError::Skipped`]) or ignored ([`CaptureError::BadOption`])
    /// since the last call, in file order. Call it after each [`CaptureReader::read_frame`].
    pub fn take_problems(&mut self) -> Vec<CaptureError> {
        std::mem::take(&mut self.problems)
    }

    /// The network namespaces our pcapng writer described in interface descriptions read since
    /// the last call (their frames carry the namespace), with the interface names the tracer
    /// knew in each: teach them before decoding the frames that follow.
    pub fn take_namespaces(&mut self) -> Vec<NamespaceNote> {
        std::mem::take(&mut self.namespaces)
    }

    /// Reads the next readable frame into `out`, reusing its buffers; frames and stretches it
    /// skipped on the way are queued for [`CaptureReader::take_problems`]. `Ok(false)` at the
    /// end of the file. After an error, the reader returns `Ok(false)`.
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

    /// Queues `error` as skipped: everything from `at` to the current offset.
    fn skip(&mut self, error: CaptureError, at: Position) {
        self.problems.push(CaptureError::Skipped {
            source: Box::new(error),
            bytes: self.offset - at.offset,
            resumed_at: self.offset,
        });
    }

    /// Reads as many bytes as the input has, up to `buf.len()`: first those read ahead while
    /// resynchronising, then the input.
    fn read_up_to(&mut self, buf: &mut [u8], at: Position) -> Result<usize, CaptureError> {
        let mut got = 0;
        let ahead = &self.pending[self.pending_at..];
        if !ahead.is_empty() {
            got = ahead.len().min(buf.len());
            buf[..got].copy_from_slice(&ahead[..got]);
            self.pending_at += got;
            if self.pending_at == self.pending.len() {
                self.pending.clear();
                self.pending_at = 0;
            }
        }
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

    /// Appends `len` bytes read from the input to the reused record buffer.
    fn append_record(
        &mut self,
        len: usize,
        what: &'static str,
        at: Position,
    ) -> Result<(), CaptureError> {
        let mut record = std::mem::take(&mut self.record);
        let start = record.len();
        record.resize(start + len, 0);
        let result = self.fill(&mut record[start..], what, at);
        self.record = record;
        result
    }

    /// Reads `len` bytes into the reused record buffer.
    fn fill_record(
        &mut self,
        len: usize,
        what: &'static str,
        at: Position,
    ) -> Result<(), CaptureError> {
        self.record.clear();
        self.append_record(len, what, at)
    }

    fn read_pcap_header(&mut self, at: Position, magic: [u8; 4]) -> Result<(), CaptureError> {
        let (endian, nanos) = match pcap_byte_order(magic) {
            Some(order) => order,
            None => {
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
        let (snaplen, linktype) = pcap_header_fields(endian, &rest);
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
        loop {
            let at = self.next_position();
            let mut head = [0u8; 16];
            if !self.read_record_start(&mut head, "pcap record header", at)? {
                return Ok(false);
            }
            let (sec, frac) = (endian.u32(&head, 0), endian.u32(&head, 4));
            let (caplen, orig_len) = (endian.u32(&head, 8), endian.u32(&head, 12));
            // Past the sanity bound the record's end cannot be trusted: classic pcap has no
            // marker to find the next record by.
            within_bound(at, "captured length", caplen)?;
            self.fill_record(caplen as usize, "pcap frame data", at)?;
            self.number += 1;
            if snaplen != 0 && caplen > snaplen {
                let error = CaptureError::BadLength {
                    at,
                    what: "captured length",
                    len: caplen.into(),
                    limit: snaplen.into(),
                };
                self.skip(error, at);
                continue;
            }
            let frac_ns = if nanos {
                i128::from(frac)
            } else {
                i128::from(frac) * 1000
            };
            let packet = PacketInfo {
                wall_ns: i128::from(sec) * 1_000_000_000 + frac_ns,
                orig_len,
                data_offset: at.offset + 16,
                direction: None,
                netns: 0,
                comment: None,
            };
            match self.finish_frame(out, at, packet) {
                Ok(()) => return Ok(true),
                Err(error) => self.skip(error, at),
            }
        }
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
            netns,
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
        frame.netns = netns;
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

    /// Reads the next pcapng block whole (type, length, body, trailing length) into the record
    /// buffer and checks its framing: `Ok(None)` at a clean end of file, else its type and byte
    /// order (a section header's own, which becomes the current one).
    fn read_block(&mut self, at: Position) -> Result<Option<(u32, Endian)>, CaptureError> {
        let mut head = [0u8; 8];
        if !self.read_record_start(&mut head, "pcapng block header", at)? {
            return Ok(None);
        }
        self.record.clear();
        self.record.extend_from_slice(&head);
        let is_section = head[..4] == PCAPNG_SHB.to_be_bytes();
        let endian = if is_section {
            self.append_record(4, "pcapng section header", at)?;
            section_byte_order(&self.record).ok_or_else(|| CaptureError::Malformed {
                at,
                what: format!(
                    "pcapng section header has byte-order magic {:#010x}",
                    u32::from_be_bytes([
                        self.record[8],
                        self.record[9],
                        self.record[10],
                        self.record[11]
                    ])
                ),
            })?
        } else {
            match self.state {
                State::Pcapng { endian, .. } => endian,
                State::Pcap { .. } => return Ok(None),
            }
        };
        let kind = if is_section {
            PCAPNG_SHB
        } else {
            endian.u32(&head, 0)
        };
        let total = endian.u32(&head, 4);
        within_bound(at, "pcapng block length", total)?;
        let least = if is_section { 28 } else { 12 };
        if total < least || !total.is_multiple_of(4) {
            return Err(CaptureError::Malformed {
                at,
                what: format!(
                    "pcapng block length {total} is not a multiple of 4 of at least {least}"
                ),
            });
        }
        let rest = total as usize - self.record.len();
        self.append_record(rest, "pcapng block", at)?;
        let again = endian.u32(&self.record, total as usize - 4);
        if again != total {
            return Err(CaptureError::Malformed {
                at,
                what: format!(
                    "pcapng block says length {total} at its start and {again} at its end"
                ),
            });
        }
        if is_section {
            self.state = State::Pcapng {
                endian,
                interfaces: Vec::new(),
            };
        }
        Ok(Some((kind, endian)))
    }

    /// After a pcapng block whose framing is corrupt (`fault`, at `at`, its bytes read so far in
    /// the record buffer), finds the next plausible block — a known type whose length is sane
    /// and repeated at its end — byte by byte (garbage need not keep the 4-byte alignment),
    /// and goes on there; the corrupt stretch is queued as skipped. `Err(fault)` when none is
    /// found within [`MAX_RESYNC_SCAN`] bytes.
    fn resync(&mut self, at: Position, fault: CaptureError) -> Result<(), CaptureError> {
        let endian = match self.state {
            State::Pcapng { endian, .. } => endian,
            State::Pcap { .. } => return Err(fault),
        };
        let mut window = self.record.get(4..).unwrap_or_default().to_vec();
        let mut base = at.offset + 4;
        let mut p = 0usize;
        let found = loop {
            if base + p as u64 - at.offset > MAX_RESYNC_SCAN
                || !self.window_holds(&mut window, p + 12, at)?
            {
                break None;
            }
            if let Some((total, order)) = plausible_block(&window[p..], endian) {
                if self.window_holds(&mut window, p + total, at)?
                    && order.u32(&window, p + total - 4) == total as u32
                {
                    break Some(p);
                }
            }
            p += 1;
            if p >= 1 << 20 {
                window.drain(..p);
                base += p as u64;
                p = 0;
            }
        };
        let Some(p) = found else {
            return Err(fault);
        };
        let mut again = window.split_off(p);
        again.extend_from_slice(&self.pending[self.pending_at..]);
        self.pending = again;
        self.pending_at = 0;
        self.offset = base + p as u64;
        self.skip(fault, at);
        Ok(())
    }

    /// Reads more of the input into `window` until it holds `len` bytes; `Ok(false)` when the
    /// file ends first.
    fn window_holds(
        &mut self,
        window: &mut Vec<u8>,
        len: usize,
        at: Position,
    ) -> Result<bool, CaptureError> {
        while window.len() < len {
            let start = window.len();
            window.resize(start + (len - start).max(64 << 10), 0);
            let got = self.read_up_to(&mut window[start..], at)?;
            window.truncate(start + got);
            if got == 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn read_pcapng_frame(&mut self, out: &mut CapturedFrame) -> Result<bool, CaptureError> {
        loop {
            let at = self.next_position();
            let (kind, endian) = match self.read_block(at) {
                Ok(Some(block)) => block,
                Ok(None) => return Ok(false),
                Err(e @ (CaptureError::Truncated { .. } | CaptureError::Io { .. })) => {
                    return Err(e)
                }
                Err(fault) => {
                    self.resync(at, fault)?;
                    continue;
                }
            };
            let block_at = Position { frame: 0, ..at };
            match kind {
                PCAPNG_SHB => self.section_options(block_at, endian),
                PCAPNG_IDB => {
                    if let Err(error) = self.add_interface(block_at, endian) {
                        self.skip(error, block_at);
                    }
                }
                PCAPNG_EPB | PCAPNG_PB | PCAPNG_SPB => {
                    self.number += 1;
                    let at = Position {
                        frame: self.number,
                        ..at
                    };
                    match self.packet_block(out, at, endian, kind) {
                        Ok(()) => return Ok(true),
                        Err(error) => self.skip(error, at),
                    }
                }
                _ => {} // name resolution, statistics, journal, custom: not ours
            }
        }
    }

    /// The `(code, value)` options of the block in the record buffer from `from` (an index in
    /// the block) to its trailing length, up to `opt_endofopt`; an option whose length runs past
    /// the block is queued as a problem and ends them.
    fn block_options(
        &mut self,
        at: Position,
        block: &'static str,
        endian: Endian,
        from: usize,
        mut each: impl FnMut(u16, &[u8]),
    ) {
        let end = self.record.len().saturating_sub(4);
        let mut i = from.min(end);
        while end - i >= 4 {
            let (code, len) = (endian.u16(&self.record, i), endian.u16(&self.record, i + 2));
            if code == OPT_ENDOFOPT {
                return;
            }
            let room = end - i - 4;
            if usize::from(len) > room {
                self.problems.push(CaptureError::BadOption {
                    at,
                    block,
                    code,
                    offset: at.offset + i as u64,
                    len,
                    room: room as u64,
                });
                return;
            }
            each(code, &self.record[i + 4..i + 4 + usize::from(len)]);
            i = (i + 4 + usize::from(len)).next_multiple_of(4).min(end);
        }
    }

    /// Checks a section header's options (in the record buffer).
    fn section_options(&mut self, at: Position, endian: Endian) {
        // Type, length, byte-order magic, version, section length.
        self.block_options(at, "section header", endian, 24, |_, _| {});
    }

    fn add_interface(&mut self, at: Position, endian: Endian) -> Result<(), CaptureError> {
        let size = self.record.len() - 12;
        if size < 8 {
            return Err(CaptureError::Malformed {
                at,
                what: format!("pcapng interface description of {size} bytes"),
            });
        }
        let mut interface = Interface {
            linktype: endian.u16(&self.record, 8),
            snaplen: endian.u32(&self.record, 12),
            tsresol: 6,
            tsoffset: 0,
            netns: 0,
        };
        let mut note = None;
        self.block_options(
            at,
            "interface description",
            endian,
            16,
            |code, value| match (code, value.len()) {
                (IF_TSRESOL, 1) => interface.tsresol = value[0],
                (IF_TSOFFSET, 8) => interface.tsoffset = endian.u64(value, 0) as i64,
                (OPT_COMMENT, _) if note.is_none() => {
                    note = NamespaceNote::parse(&String::from_utf8_lossy(value));
                }
                _ => {}
            },
        );
        if let Some(note) = note {
            interface.netns = note.netns;
            self.namespaces.push(note);
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

    /// Turns the EPB/PB/SPB in the record buffer into a frame.
    fn packet_block(
        &mut self,
        out: &mut CapturedFrame,
        at: Position,
        endian: Endian,
        kind: u32,
    ) -> Result<(), CaptureError> {
        // The body: after the type and length, before the trailing length.
        let body = &self.record[8..self.record.len() - 4];
        let malformed = |what: String| CaptureError::Malformed { at, what };
        // (interface id, timestamp, caplen, original length, offset of the data in the body)
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
            let options_at = 8 + data_end.next_multiple_of(4);
            self.block_options(
                at,
                "packet block",
                endian,
                options_at,
                |code, value| match (code, value.len()) {
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
                },
            );
        }
        // Keep only the packet bytes in the record buffer for finish_frame.
        self.record.truncate(8 + data_end);
        self.record.drain(..8 + data_at);
        let packet = PacketInfo {
            wall_ns: interface.wall_ns(ts),
            orig_len,
            // Block type and length, then the body up to the packet data.
            data_offset: at.offset + 8 + data_at as u64,
            direction,
            netns: interface.netns,
            comment,
        };
        self.finish_frame(out, at, packet)
    }
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
