//! nlmon-compatible capture writing: [`NetlinkFrame`]s as classic pcap or pcapng files with link
//! type 253 (LINKTYPE_NETLINK), framed exactly as the kernel's nlmon tap and `tcpdump -i nlmon0`
//! frame them, so Wireshark dissects them as it dissects a real nlmon capture.
//!
//! # Framing
//! Each frame is a 16-byte cooked header ([`NlmonHeader`]) followed by the netlink bytes as the
//! syscall moved them (host byte order):
//!
//! | bytes | field | value |
//! |---|---|---|
//! | 0–1 | packet type, BE | 4 (`PACKET_OUTGOING`) for send and unknown, 0 (`PACKET_HOST`) for recv |
//! | 2–3 | ARPHRD type, BE | 824 (`ARPHRD_NETLINK`) |
//! | 4–5 | address length, BE | 0 |
//! | 6–13 | address | zeros |
//! | 14–15 | netlink protocol, BE | 0 = NETLINK_ROUTE, 16 = NETLINK_GENERIC, ... |
//!
//! The kernel's nlmon (checked on Debian's 6.1 kernel, `tests/fixtures/nlmon/`) writes packet type 4
//! in both directions, so its captures do not carry the direction. We write 0 for recv instead:
//! Wireshark 4.0 skips these two bytes ("Unused 2B" in `packet-netlink.c`; `tshark -G fields` has no
//! packet-type field for netlink and `tshark -V` prints the same dissection for 0 and 4), so the
//! choice costs nothing in Wireshark and lets our own reader recover the direction from a classic
//! pcap. Frames of unknown direction get 4, as nlmon writes.
//!
//! # Formats
//! - [`NlmonWriter`]: classic pcap, nanosecond magic (`0xa1b23c4d`, read by tshark/tcpdump),
//!   host byte order, snaplen [`SNAPLEN`].
//! - [`NlmonPcapngWriter`]: pcapng, with a section header naming the tool and host; one
//!   interface per network namespace, written before its first frame, named after it
//!   (`netns 4026531840`, or `netns NAME` for an `ip netns` one; frames of unknown namespace:
//!   `nodeip-trace`), whose comment lists the interface names the tracer knew in it
//!   ([`NamespaceNote`]: `netns=4026531840 1=lo 2=eth0`, read back by our capture reader so
//!   offline analysis names devices before any link dump); per-packet comments `pid=… tid=…
//!   comm=… dir=…` (plus caller-supplied annotations such as `pod=ns/name`), the EPB direction
//!   flag and a running `epb_packetid`. Interface names travel as an interface comment rather
//!   than as synthetic `RTM_NEWLINK` frames: no invented packets in Wireshark's list or in
//!   `analyze`'s timeline, and tshark shows nothing malformed.
//!
//! Both implement [`FrameSink`]; both can write a synthetic nlctrl `CTRL_CMD_NEWFAMILY` frame
//! ([`FrameSink::write_genl_family`]) because Wireshark names a generic-netlink family only after
//! it has seen the controller announce it.
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::section_header::{SectionHeaderBlock, SectionHeaderOption};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::{DataLink, Endianness};

use crate::model::frame::{Direction, NetlinkFrame};
use crate::model::netlink::{GENL_ID_CTRL, NETLINK_GENERIC};
use crate::model::nlmon::{
    FrameComment, NamespaceNote, NlmonHeader, LINKTYPE_NETLINK, NLMON_HEADER_LEN,
};
use crate::model::ports::InterfaceDirectory;

/// Snapshot length written in file headers: the largest record tshark 4.0 accepts for this link
/// type (`WTAP_MAX_PACKET_SIZE_STANDARD`). Longer frames are cut, keeping their original length.
pub const SNAPLEN: u32 = 262_144;
/// Name of the pcapng interface our frames belong to.
pub const INTERFACE_NAME: &str = "nodeip-trace";

/// `CTRL_CMD_NEWFAMILY`: the controller's announcement of a family.
pub const CTRL_CMD_NEWFAMILY: u8 = 1;
/// `CTRL_ATTR_FAMILY_ID` (u16).
pub const CTRL_ATTR_FAMILY_ID: u16 = 1;
/// `CTRL_ATTR_FAMILY_NAME` (NUL-terminated string).
pub const CTRL_ATTR_FAMILY_NAME: u16 = 2;
/// Longest generic netlink family name, without the NUL (`GENL_NAMSIZ - 1`).
pub const GENL_NAME_MAX: usize = 15;

/// Pcap magic for nanosecond timestamps, written in host byte order.
const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// pcapng `epb_flags` direction bits (inbound / outbound).
const EPB_FLAG_INBOUND: u32 = 1;
const EPB_FLAG_OUTBOUND: u32 = 2;
/// pcapng block type of an enhanced packet block.
const PCAPNG_EPB: u32 = 6;
/// pcapng option codes: `opt_comment`, `epb_flags`, `epb_packetid` (u64).
const OPT_COMMENT: u16 = 1;
const EPB_FLAGS: u16 = 2;
const EPB_PACKETID: u16 = 5;

/// Why writing a capture failed.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The output could not be written (closed pipe, full disk, ...).
    #[error(
        "writing the capture failed: {0}; check that the output file or pipe is still writable"
    )]
    Io(#[from] io::Error),
    /// The pcapng encoder refused a block.
    #[error("writing the pcapng {block} failed: {source}")]
    Pcapng {
        /// Which block was being written.
        block: &'static str,
        /// The encoder's error.
        #[source]
        source: pcap_file::PcapError,
    },
    /// The frame's wall-clock time does not fit a pcap timestamp.
    #[error(
        "frame timestamp {wall_ns} ns since the epoch is outside what pcap stores \
         (1970-01-01 to 2106-02-07); check the monotonic → wall clock conversion"
    )]
    TimestampOutOfRange {
        /// The offending wall-clock time.
        wall_ns: i128,
    },
    /// Adding comments to the section header of a finished capture failed.
    #[error(
        "adding the diagnoses to the section header of {path} failed ({step}): {source}; the \
         capture is complete without them (they are in the timeline and the recording)"
    )]
    SectionRewrite {
        /// The capture.
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// Why it failed.
        #[source]
        source: io::Error,
    },
    /// The generic netlink family name cannot be announced.
    #[error(
        "generic netlink family name {name:?} cannot be written: it must be 1 to {GENL_NAME_MAX} \
         bytes without NUL (GENL_NAMSIZ)"
    )]
    BadFamilyName {
        /// The rejected name.
        name: String,
    },
}

impl PcapError {
    /// Whether the reader went away (`| head`, Wireshark closed): callers stop quietly.
    pub fn is_broken_pipe(&self) -> bool {
        let io = match self {
            PcapError::Io(e) => Some(e),
            PcapError::Pcapng {
                source: pcap_file::PcapError::IoError(e),
                ..
            } => Some(e),
            _ => None,
        };
        io.is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    }

    fn pcapng(block: &'static str, source: pcap_file::PcapError) -> Self {
        match source {
            pcap_file::PcapError::IoError(e) => PcapError::Io(e),
            source => PcapError::Pcapng { block, source },
        }
    }
}

/// The netlink bytes of an nlctrl `CTRL_CMD_NEWFAMILY` message announcing family `name` = `id`
/// (host byte order, as the kernel sends it): nlmsghdr (type `GENL_ID_CTRL`, flags 0, seq 0,
/// pid 0), genlmsghdr (cmd 1, version 2), `CTRL_ATTR_FAMILY_NAME`, `CTRL_ATTR_FAMILY_ID`.
pub fn genl_newfamily_message(id: u16, name: &str) -> Result<Vec<u8>, PcapError> {
    if name.is_empty() || name.len() > GENL_NAME_MAX || name.contains('\0') {
        return Err(PcapError::BadFamilyName {
            name: name.to_owned(),
        });
    }
    let mut msg = Vec::with_capacity(48);
    msg.extend_from_slice(&[0; 4]); // nlmsg_len, filled below
    msg.extend_from_slice(&GENL_ID_CTRL.to_ne_bytes());
    msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
    msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid
    msg.extend_from_slice(&[CTRL_CMD_NEWFAMILY, 2, 0, 0]); // cmd, version, reserved
    let mut name_z = name.as_bytes().to_vec();
    name_z.push(0);
    push_attr(&mut msg, CTRL_ATTR_FAMILY_NAME, &name_z);
    push_attr(&mut msg, CTRL_ATTR_FAMILY_ID, &id.to_ne_bytes());
    let len = msg.len() as u32;
    msg[0..4].copy_from_slice(&len.to_ne_bytes());
    Ok(msg)
}

/// Appends one netlink attribute, padded to 4 bytes.
fn push_attr(msg: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let len = (4 + payload.len()) as u16;
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(payload);
    msg.resize(msg.len().next_multiple_of(4), 0);
}

/// The frame a writer emits for [`FrameSink::write_genl_family`]: a kernel→process reply.
fn genl_family_frame(id: u16, name: &str, wall_ns: i128) -> Result<NetlinkFrame, PcapError> {
    let bytes = genl_newfamily_message(id, name)?;
    Ok(NetlinkFrame {
        wall_ns,
        ts_ns: u64::try_from(wall_ns).unwrap_or(0),
        protocol: NETLINK_GENERIC,
        direction: Some(Direction::Recv),
        task: None,
        netns: 0,
        total_len: bytes.len() as u32,
        bytes,
    })
}

/// The framing both writers share: a reused record buffer and the flush policy.
#[derive(Debug, Default)]
struct Framing {
    record: Vec<u8>,
    flush_each_frame: bool,
}

impl Framing {
    /// Fills the record with the nlmon header and the frame's bytes (cut to [`SNAPLEN`]);
    /// returns the original length (header + what the syscall moved).
    fn encode(&mut self, frame: &NetlinkFrame) -> u32 {
        let record = &mut self.record;
        record.clear();
        record.extend_from_slice(&NlmonHeader::for_frame(frame.direction, frame.protocol).encode());
        let room = SNAPLEN as usize - NLMON_HEADER_LEN;
        record.extend_from_slice(&frame.bytes[..frame.bytes.len().min(room)]);
        let moved = (frame.total_len as usize).max(frame.bytes.len());
        u32::try_from(NLMON_HEADER_LEN + moved).unwrap_or(u32::MAX)
    }

    /// Flushes `out` after a frame when asked to.
    fn frame_written(&self, out: &mut impl Write) -> Result<(), PcapError> {
        if self.flush_each_frame {
            out.flush()?;
        }
        Ok(())
    }
}

/// Wall-clock nanoseconds → time since the epoch, within what pcap's u32 seconds can hold.
fn pcap_timestamp(wall_ns: i128) -> Result<Duration, PcapError> {
    const LIMIT: i128 = (u32::MAX as i128 + 1) * 1_000_000_000;
    if !(0..LIMIT).contains(&wall_ns) {
        return Err(PcapError::TimestampOutOfRange { wall_ns });
    }
    Ok(Duration::from_nanos(wall_ns as u64))
}

/// Where captured frames go, whatever the file format.
pub trait FrameSink {
    /// Writes one frame.
    fn write_frame(&mut self, frame: &NetlinkFrame) -> Result<(), PcapError> {
        self.write_annotated_frame(frame, &[])
    }

    /// Writes one frame with extra attribution (`[("pod", "ns/name"), ("container", "c")]`).
    /// Formats without per-packet comments (classic pcap) drop the annotations.
    fn write_annotated_frame(
        &mut self,
        frame: &NetlinkFrame,
        annotations: &[(&str, &str)],
    ) -> Result<(), PcapError>;

    /// Writes a synthetic nlctrl `CTRL_CMD_NEWFAMILY` frame so that Wireshark names generic
    /// netlink family `id` as `name` in the frames that follow.
    fn write_genl_family(&mut self, id: u16, name: &str, wall_ns: i128) -> Result<(), PcapError>;

    /// Flushes buffered frames to the output.
    fn flush(&mut self) -> Result<(), PcapError>;
}

/// Classic pcap writer (nanosecond timestamps, host byte order, LINKTYPE_NETLINK).
#[derive(Debug)]
pub struct NlmonWriter<W: Write> {
    out: W,
    framing: Framing,
}

impl<W: Write> NlmonWriter<W> {
    /// Writes the pcap file header to `out`.
    pub fn new(mut out: W) -> Result<Self, PcapError> {
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&PCAP_MAGIC_NANOS.to_ne_bytes());
        header.extend_from_slice(&2u16.to_ne_bytes()); // version 2.4
        header.extend_from_slice(&4u16.to_ne_bytes());
        header.extend_from_slice(&0i32.to_ne_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_ne_bytes()); // sigfigs
        header.extend_from_slice(&SNAPLEN.to_ne_bytes());
        header.extend_from_slice(&u32::from(LINKTYPE_NETLINK).to_ne_bytes());
        out.write_all(&header)?;
        Ok(Self {
            out,
            framing: Framing::default(),
        })
    }

    /// Flush after every frame (for `--pcap -` into `wireshark -k -i -`).
    pub fn flush_each_frame(mut self, yes: bool) -> Self {
        self.framing.flush_each_frame = yes;
        self
    }

    /// Gives the output back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> FrameSink for NlmonWriter<W> {
    fn write_annotated_frame(
        &mut self,
        frame: &NetlinkFrame,
        _annotations: &[(&str, &str)],
    ) -> Result<(), PcapError> {
        let ts = pcap_timestamp(frame.wall_ns)?;
        let orig_len = self.framing.encode(frame);
        let record = &self.framing.record;
        let mut head = [0u8; 16];
        head[0..4].copy_from_slice(&(ts.as_secs() as u32).to_ne_bytes());
        head[4..8].copy_from_slice(&ts.subsec_nanos().to_ne_bytes());
        head[8..12].copy_from_slice(&(record.len() as u32).to_ne_bytes());
        head[12..16].copy_from_slice(&orig_len.to_ne_bytes());
        self.out.write_all(&head)?;
        self.out.write_all(record)?;
        self.framing.frame_written(&mut self.out)
    }

    fn write_genl_family(&mut self, id: u16, name: &str, wall_ns: i128) -> Result<(), PcapError> {
        self.write_frame(&genl_family_frame(id, name, wall_ns)?)
    }

    fn flush(&mut self) -> Result<(), PcapError> {
        Ok(self.out.flush()?)
    }
}

/// What the pcapng section header says about where the capture was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionInfo {
    /// `shb_userappl`: the tool and its version.
    pub user_application: String,
    /// `shb_hardware`: the machine (e.g. `x86_64`).
    pub hardware: String,
    /// `shb_os`: the kernel (e.g. `Linux 6.1.0-56-cloud-amd64`).
    pub os: String,
    /// The host name, written as the section comment `host=<name>`.
    pub host: String,
}

impl SectionInfo {
    /// Describes this host (uname) and this build of nodeip-trace.
    pub fn from_host() -> Self {
        // SAFETY: uname fills the struct we own; all-zero is a valid utsname.
        let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: uts is a valid, writable utsname.
        let ok = unsafe { libc::uname(&mut uts) } == 0;
        let field = |f: &[libc::c_char]| -> String {
            let bytes: Vec<u8> = f
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        let (sys, release, machine, node) = if ok {
            (
                field(&uts.sysname),
                field(&uts.release),
                field(&uts.machine),
                field(&uts.nodename),
            )
        } else {
            Default::default()
        };
        Self {
            user_application: format!("nodeip-trace {}", env!("CARGO_PKG_VERSION")),
            hardware: machine,
            os: format!("{sys} {release}").trim().to_owned(),
            host: node,
        }
    }
}

/// pcapng writer: one section; one LINKTYPE_NETLINK interface per network namespace, written
/// before the namespace's first frame (named after it; frames of unknown namespace share one
/// named [`INTERFACE_NAME`]); one enhanced packet block per frame with the attribution as a
/// packet comment, the direction in `epb_flags` and a running `epb_packetid`.
pub struct NlmonPcapngWriter<W: Write> {
    out: PcapNgWriter<W>,
    framing: Framing,
    endianness: Endianness,
    /// Network namespace (0: unknown) → its interface id.
    interfaces: BTreeMap<u32, u32>,
    /// Where namespace names and their interface names come from (live tracing).
    namespaces: Option<Box<dyn InterfaceDirectory>>,
    /// Packets written.
    packets: u64,
}

/// The section header block's options for `section`.
fn section_options(section: &SectionInfo) -> Vec<SectionHeaderOption<'static>> {
    let text = |s: &str| Cow::Owned(s.to_owned());
    let mut options = vec![SectionHeaderOption::UserApplication(text(
        &section.user_application,
    ))];
    if !section.hardware.is_empty() {
        options.push(SectionHeaderOption::Hardware(text(&section.hardware)));
    }
    if !section.os.is_empty() {
        options.push(SectionHeaderOption::OS(text(&section.os)));
    }
    if !section.host.is_empty() {
        options.push(SectionHeaderOption::Comment(Cow::Owned(format!(
            "host={}",
            section.host
        ))));
    }
    options
}

impl<W: Write> NlmonPcapngWriter<W> {
    /// Writes the section header (host byte order) to `out`.
    pub fn new(out: W, section: &SectionInfo) -> Result<Self, PcapError> {
        Self::with_endianness(out, section, Endianness::native())
    }

    /// As [`NlmonPcapngWriter::new`], in a chosen byte order (tests, cross-host files).
    pub fn with_endianness(
        out: W,
        section: &SectionInfo,
        endianness: Endianness,
    ) -> Result<Self, PcapError> {
        let shb = SectionHeaderBlock {
            endianness,
            options: section_options(section),
            ..Default::default()
        };
        let out = PcapNgWriter::with_section_header(out, shb)
            .map_err(|e| PcapError::pcapng("section header block", e))?;
        Ok(Self {
            out,
            framing: Framing::default(),
            endianness,
            interfaces: BTreeMap::new(),
            namespaces: None,
            packets: 0,
        })
    }

    /// Names each network namespace's interface from `directory` (its `ip netns` name, and the
    /// interface names it knows, in the interface's comment: [`NamespaceNote`]).
    pub fn with_namespaces(mut self, directory: Box<dyn InterfaceDirectory>) -> Self {
        self.namespaces = Some(directory);
        self
    }

    /// Flush after every frame (for live streaming into Wireshark).
    pub fn flush_each_frame(mut self, yes: bool) -> Self {
        self.framing.flush_each_frame = yes;
        self
    }

    /// Gives the output back.
    pub fn into_inner(self) -> W {
        self.out.into_inner()
    }

    /// The interface id of `frame`'s namespace, written first if this is its first frame.
    fn interface_of(&mut self, frame: &NetlinkFrame) -> Result<u32, PcapError> {
        if let Some(id) = self.interfaces.get(&frame.netns) {
            return Ok(*id);
        }
        let mut options = Vec::with_capacity(4);
        if frame.netns == 0 {
            options.push(InterfaceDescriptionOption::IfName(Cow::Borrowed(
                INTERFACE_NAME,
            )));
            options.push(InterfaceDescriptionOption::IfDescription(Cow::Borrowed(
                "netlink traffic seen by nodeip-trace, nlmon framing",
            )));
        } else {
            let netns = u64::from(frame.netns);
            let pid = frame.task.as_ref().map_or(0, |t| t.pid);
            let (name, interfaces) = match self.namespaces.as_mut() {
                Some(directory) => (
                    directory.netns_name(netns),
                    directory.interfaces_in(netns, pid),
                ),
                None => (None, BTreeMap::new()),
            };
            let if_name = match &name {
                Some(name) => format!("netns {name}"),
                None => format!("netns {netns}"),
            };
            let described = match &name {
                Some(name) => format!("network namespace {netns} (`ip netns` {name})"),
                None => format!("network namespace {netns}"),
            };
            options.push(InterfaceDescriptionOption::IfName(Cow::Owned(if_name)));
            options.push(InterfaceDescriptionOption::IfDescription(Cow::Owned(
                format!("{described}: netlink traffic seen by nodeip-trace, nlmon framing"),
            )));
            let note = NamespaceNote {
                netns: frame.netns,
                interfaces,
            };
            options.push(InterfaceDescriptionOption::Comment(Cow::Owned(
                note.render(),
            )));
        }
        options.push(InterfaceDescriptionOption::IfTsResol(9));
        let idb = InterfaceDescriptionBlock {
            linktype: DataLink::NETLINK,
            snaplen: SNAPLEN,
            options,
        };
        self.out
            .write_pcapng_block(idb)
            .map_err(|e| PcapError::pcapng("interface description block", e))?;
        let id = self.interfaces.len() as u32;
        self.interfaces.insert(frame.netns, id);
        Ok(id)
    }

    /// Writes the frame as an enhanced packet block: the crate's encoder has no `epb_packetid`,
    /// so the block is laid out here (pcapng draft, "Enhanced Packet Block").
    fn write_commented(&mut self, frame: &NetlinkFrame, comment: String) -> Result<(), PcapError> {
        let timestamp = pcap_timestamp(frame.wall_ns)?.as_nanos() as u64; // if_tsresol 9
        let interface_id = self.interface_of(frame)?;
        let original_len = self.framing.encode(frame);
        self.packets += 1;
        let big = matches!(self.endianness, Endianness::Big);
        let u32b = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let record = &self.framing.record;
        let mut block = Vec::with_capacity(64 + record.len() + comment.len());
        block.extend_from_slice(&u32b(PCAPNG_EPB));
        block.extend_from_slice(&[0; 4]); // total length, below
        block.extend_from_slice(&u32b(interface_id));
        block.extend_from_slice(&u32b((timestamp >> 32) as u32));
        block.extend_from_slice(&u32b(timestamp as u32));
        block.extend_from_slice(&u32b(record.len() as u32));
        block.extend_from_slice(&u32b(original_len));
        block.extend_from_slice(record);
        block.resize(block.len().next_multiple_of(4), 0);
        let flags = match frame.direction {
            Some(Direction::Send) => Some(EPB_FLAG_OUTBOUND),
            Some(Direction::Recv) => Some(EPB_FLAG_INBOUND),
            None => None,
        };
        if !comment.is_empty() {
            // An option holds at most 65535 bytes.
            let mut end = comment.len().min(usize::from(u16::MAX));
            while !comment.is_char_boundary(end) {
                end -= 1;
            }
            push_option(&mut block, big, OPT_COMMENT, &comment.as_bytes()[..end]);
        }
        if let Some(flags) = flags {
            push_option(&mut block, big, EPB_FLAGS, &u32b(flags));
        }
        let id = if big {
            self.packets.to_be_bytes()
        } else {
            self.packets.to_le_bytes()
        };
        push_option(&mut block, big, EPB_PACKETID, &id);
        push_option(&mut block, big, 0, &[]); // opt_endofopt
        let total = u32b(block.len() as u32 + 4);
        block[4..8].copy_from_slice(&total);
        block.extend_from_slice(&total);
        self.out.get_mut().write_all(&block)?;
        self.framing.frame_written(self.out.get_mut())
    }
}

/// Appends one pcapng option (code, length, value padded to 4 bytes) in the section's order.
fn push_option(block: &mut Vec<u8>, big: bool, code: u16, value: &[u8]) {
    let u16b = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    block.extend_from_slice(&u16b(code));
    block.extend_from_slice(&u16b(value.len() as u16));
    block.extend_from_slice(value);
    block.resize(block.len().next_multiple_of(4), 0);
}

impl<W: Write> FrameSink for NlmonPcapngWriter<W> {
    fn write_annotated_frame(
        &mut self,
        frame: &NetlinkFrame,
        annotations: &[(&str, &str)],
    ) -> Result<(), PcapError> {
        let comment = FrameComment::render(frame.task.as_ref(), frame.direction, annotations);
        self.write_commented(frame, comment)
    }

    fn write_genl_family(&mut self, id: u16, name: &str, wall_ns: i128) -> Result<(), PcapError> {
        let frame = genl_family_frame(id, name, wall_ns)?;
        let id_text = format!("{id:#06x}");
        let comment = FrameComment::render(
            None,
            None,
            &[
                ("synthetic", "genl-family"),
                ("name", name),
                ("id", &id_text),
            ],
        );
        self.write_commented(&frame, comment)
    }

    fn flush(&mut self) -> Result<(), PcapError> {
        Ok(self.out.get_mut().flush()?)
    }
}

/// Where the comments a trace has only at its end (its diagnoses, its summary) go in a pcapng
/// capture, whose section header was written at its start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SectionComments {
    /// Nowhere (classic pcap has no comments).
    Dropped,
    /// Into the section header of this regular file, rewritten when the trace ends
    /// ([`add_section_comments`]).
    Rewrite(PathBuf),
    /// A stream (pipe, FIFO, stdout): what was sent cannot be rewritten; a note on stderr says
    /// where the diagnoses are instead.
    Stream,
}

impl SectionComments {
    /// For a pcapng output at `path` (`-` = stdout), once it is open: a regular file is
    /// rewritten, anything else is a stream.
    pub fn for_output(path: &Path) -> Self {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() && path.as_os_str() != "-" => Self::Rewrite(path.to_path_buf()),
            _ => Self::Stream,
        }
    }
}

/// Adds `comments` (an `opt_comment` each, after the section's own options) to the section
/// header of the pcapng file at `path`. The file is copied behind the new section header into a
/// temporary file next to it (`.NAME.nodeip-trace-PID.comments`, created 0600, given the file's
/// mode), which then replaces it by a rename; the copy streams (`std::io::copy`: the kernel
/// copies file to file), so memory stays constant whatever the size. Until the rename the
/// capture is untouched: a failure, or a kill, leaves it complete without the comments. Where
/// no file may be made beside it (a directory the tracer, having dropped its capabilities, may
/// not write), the file is rewritten in place instead.
pub fn add_section_comments(path: &Path, comments: &[String]) -> Result<(), PcapError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |step: &'static str| {
        move |source: io::Error| PcapError::SectionRewrite {
            path: path.to_path_buf(),
            step,
            source,
        }
    };
    let mut original = std::fs::File::open(path).map_err(fail("opening it"))?;
    let mode = original
        .metadata()
        .map_err(fail("reading its mode"))?
        .permissions()
        .mode();
    let mut head = [0u8; 12];
    original
        .read_exact(&mut head)
        .map_err(fail("reading its section header"))?;
    let big = match head[8..12] {
        [0x1a, 0x2b, 0x3c, 0x4d] => true,
        [0x4d, 0x3c, 0x2b, 0x1a] => false,
        _ => return Err(fail("reading its section header")(not_ours())),
    };
    let u32_at = |b: &[u8], at: usize| {
        let v = [b[at], b[at + 1], b[at + 2], b[at + 3]];
        if big {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        }
    };
    let total = u32_at(&head, 4) as usize;
    if head[..4] != [0x0a, 0x0d, 0x0d, 0x0a]
        || total < 28
        || !total.is_multiple_of(4)
        || total > 1 << 20
    {
        return Err(fail("reading its section header")(not_ours()));
    }
    let mut shb = head.to_vec();
    shb.resize(total, 0);
    original
        .read_exact(&mut shb[12..])
        .map_err(fail("reading its section header"))?;
    // Keep the options up to opt_endofopt (or a broken one), then ours.
    let u16_at = |b: &[u8], at: usize| {
        let v = [b[at], b[at + 1]];
        if big {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        }
    };
    let mut end = 24;
    while end + 4 <= total - 4 && u16_at(&shb, end) != 0 {
        let next = end + 4 + usize::from(u16_at(&shb, end + 2)).next_multiple_of(4);
        if next > total - 4 {
            break;
        }
        end = next;
    }
    shb.truncate(end);
    for comment in comments {
        let mut cut = comment.len().min(usize::from(u16::MAX));
        while !comment.is_char_boundary(cut) {
            cut -= 1;
        }
        push_option(&mut shb, big, OPT_COMMENT, &comment.as_bytes()[..cut]);
    }
    push_option(&mut shb, big, 0, &[]);
    let new_total = (shb.len() + 4) as u32;
    let new_total = if big {
        new_total.to_be_bytes()
    } else {
        new_total.to_le_bytes()
    };
    shb[4..8].copy_from_slice(&new_total);
    shb.extend_from_slice(&new_total);

    let temp = super::output_file::beside(path, "comments");
    let mut out = match super::output_file::create_private(&temp) {
        Ok(out) => out,
        // A directory this process may no longer write (the tracer dropped CAP_DAC_OVERRIDE
        // after opening its outputs: `sudo trace --pcapng ~/x.pcapng`), while the file is its own.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            return rewrite_in_place(path, total, &shb).map_err(fail(
                "rewriting it in place (no copy can be made beside it)",
            ));
        }
        Err(e) => return Err(fail("creating the copy beside it")(e)),
    };
    let mut copy = || -> Result<(), PcapError> {
        out.write_all(&shb).map_err(fail("writing the copy"))?;
        io::copy(&mut original, &mut out).map_err(fail("writing the copy"))?;
        out.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(fail("giving the copy the capture's mode"))?;
        out.sync_all().map_err(fail("writing the copy"))?;
        std::fs::rename(&temp, path).map_err(fail("replacing it by the copy"))
    };
    let result = copy();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Replaces the first `old_len` bytes of the file at `path` (its section header) by `header`,
/// which is no shorter, in place: everything after it moves on by the difference, copied from
/// the end backwards 1 MiB at a time, then the new header is written at the start. Used where
/// no copy can be made beside the file; unlike the copy, a kill during the move leaves the file
/// damaged.
fn rewrite_in_place(path: &Path, old_len: usize, header: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let Some(delta) = header.len().checked_sub(old_len) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the new section header is shorter than the old one",
        ));
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)?;
    let (old_len, delta) = (old_len as u64, delta as u64);
    let mut chunk = vec![0u8; 1 << 20];
    let mut end = file.metadata()?.len();
    while end > old_len {
        let start = end.saturating_sub(chunk.len() as u64).max(old_len);
        let piece = &mut chunk[..(end - start) as usize];
        file.read_exact_at(piece, start)?;
        file.write_all_at(piece, start + delta)?;
        end = start;
    }
    file.write_all_at(header, 0)?;
    file.sync_all()
}

/// The error of a file whose first block is not a pcapng section header.
fn not_ours() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "it does not start with a pcapng section header",
    )
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tshark_tests;
