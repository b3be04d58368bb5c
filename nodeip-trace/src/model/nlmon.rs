//! The nlmon framing of netlink in a capture (link type 253, LINKTYPE_NETLINK): the 16-byte
//! cooked header in front of every frame, and the attribution we carry in pcapng packet comments.
//! Shared by the capture reader (`source::capture`) and the writers (`sink::pcap`).
//!
//! | bytes | field | value |
//! |---|---|---|
//! | 0–1 | packet type, BE | 4 (`PACKET_OUTGOING`) for send and unknown, 0 (`PACKET_HOST`) for recv |
//! | 2–3 | ARPHRD type, BE | 824 (`ARPHRD_NETLINK`) |
//! | 4–5 | address length, BE | 0 |
//! | 6–13 | address | zeros |
//! | 14–15 | netlink protocol, BE | 0 = NETLINK_ROUTE, 16 = NETLINK_GENERIC, ... |
use super::frame::{Direction, Task};

/// LINKTYPE_NETLINK: the pcap link type of nlmon captures.
pub const LINKTYPE_NETLINK: u16 = 253;

/// ARPHRD_NETLINK: the device type nlmon reports, bytes 2–3 of the cooked header.
pub const ARPHRD_NETLINK: u16 = 824;

/// Packet type for kernel→process frames (`PACKET_HOST`, "to us").
pub const PACKET_HOST: u16 = 0;

/// Packet type for process→kernel frames and frames of unknown direction (`PACKET_OUTGOING`).
pub const PACKET_OUTGOING: u16 = 4;

/// Length of the nlmon cooked header in front of the netlink bytes.
pub const NLMON_HEADER_LEN: usize = 16;

/// The 16-byte cooked header nlmon puts in front of every netlink frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NlmonHeader {
    /// Packet type (`PACKET_HOST` = 0, `PACKET_OUTGOING` = 4, ...).
    pub packet_type: u16,
    /// ARPHRD device type; [`ARPHRD_NETLINK`] for netlink.
    pub hatype: u16,
    /// Link-layer address length (0 for nlmon).
    pub address_len: u16,
    /// Link-layer address bytes (zeros for nlmon).
    pub address: [u8; 8],
    /// Netlink protocol (0 = NETLINK_ROUTE, 16 = NETLINK_GENERIC, ...).
    pub protocol: u16,
}

impl NlmonHeader {
    /// The header we write for a frame going `direction` on netlink `protocol`.
    pub fn for_frame(direction: Option<Direction>, protocol: u16) -> Self {
        let packet_type = match direction {
            Some(Direction::Recv) => PACKET_HOST,
            Some(Direction::Send) | None => PACKET_OUTGOING,
        };
        Self {
            packet_type,
            hatype: ARPHRD_NETLINK,
            address_len: 0,
            address: [0; 8],
            protocol,
        }
    }

    /// The header's bytes (all fields big-endian, as nlmon writes them).
    pub fn encode(&self) -> [u8; NLMON_HEADER_LEN] {
        let mut out = [0u8; NLMON_HEADER_LEN];
        out[0..2].copy_from_slice(&self.packet_type.to_be_bytes());
        out[2..4].copy_from_slice(&self.hatype.to_be_bytes());
        out[4..6].copy_from_slice(&self.address_len.to_be_bytes());
        out[6..14].copy_from_slice(&self.address);
        out[14..16].copy_from_slice(&self.protocol.to_be_bytes());
        out
    }

    /// Parses the header at the start of `frame`; `None` when fewer than 16 bytes.
    pub fn decode(frame: &[u8]) -> Option<Self> {
        let b: &[u8; NLMON_HEADER_LEN] = frame.get(..NLMON_HEADER_LEN)?.try_into().ok()?;
        let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let mut address = [0u8; 8];
        address.copy_from_slice(&b[6..14]);
        Some(Self {
            packet_type: be16(0),
            hatype: be16(2),
            address_len: be16(4),
            address,
            protocol: be16(14),
        })
    }
}

/// Attribution carried in a pcapng packet comment:
/// `pid=1234 tid=1235 comm=ip dir=send pod=ns/name container=c`.
///
/// Values with spaces, quotes or backslashes are double-quoted with `\"` and `\\` escapes
/// (`comm="my prog"`); unknown keys are kept in [`FrameComment::extra`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameComment {
    /// The process, when the comment names a pid.
    pub task: Option<Task>,
    /// The direction, when the comment has `dir=send` or `dir=recv`.
    pub direction: Option<Direction>,
    /// Other `key=value` pairs, in order (`pod`, `container`, ...).
    pub extra: Vec<(String, String)>,
}

impl FrameComment {
    /// Renders the comment for a frame; `extra` pairs follow the task and direction.
    pub fn render(
        task: Option<&Task>,
        direction: Option<Direction>,
        extra: &[(&str, &str)],
    ) -> String {
        let mut out = String::new();
        let mut push = |key: &str, value: &str| {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(key);
            out.push('=');
            push_value(&mut out, value);
        };
        if let Some(task) = task {
            push("pid", &task.pid.to_string());
            push("tid", &task.tid.to_string());
            push("comm", &task.comm);
        }
        if let Some(direction) = direction {
            push("dir", direction_word(direction));
        }
        for (key, value) in extra {
            push(key, value);
        }
        out
    }

    /// Parses a comment written by [`FrameComment::render`]. Never fails: words that are not
    /// `key=value` are ignored, a task needs at least `pid=` (tid defaults to pid, comm to "").
    pub fn parse(comment: &str) -> Self {
        let mut parsed = FrameComment::default();
        let (mut pid, mut tid, mut comm) = (None, None, None);
        for (key, value) in comment_pairs(comment) {
            match key.as_str() {
                "pid" => pid = value.parse::<u32>().ok(),
                "tid" => tid = value.parse::<u32>().ok(),
                "comm" => comm = Some(value),
                "dir" => {
                    parsed.direction = match value.as_str() {
                        "send" => Some(Direction::Send),
                        "recv" => Some(Direction::Recv),
                        _ => None,
                    }
                }
                _ => parsed.extra.push((key, value)),
            }
        }
        parsed.task = pid.map(|pid| Task {
            pid,
            tid: tid.unwrap_or(pid),
            comm: comm.unwrap_or_default().into(),
        });
        parsed
    }
}

/// What our pcapng writer says of a network namespace in the comment of the interface
/// description it writes for it: `netns=4026531840 1=lo 2=eth0` — the namespace (the inode of
/// `/proc/PID/ns/net`), and the interface names (index=name) the tracer knew when the
/// namespace's first frame was written, so that offline analysis names devices before any link
/// dump in the capture. Written with [`FrameComment::render`]'s quoting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceNote {
    /// The namespace.
    pub netns: u32,
    /// Interface index → name in it.
    pub interfaces: std::collections::BTreeMap<u32, String>,
}

impl NamespaceNote {
    /// The comment text.
    pub fn render(&self) -> String {
        let netns = self.netns.to_string();
        let indexes: Vec<String> = self.interfaces.keys().map(u32::to_string).collect();
        let mut pairs = vec![("netns", netns.as_str())];
        for (index, name) in indexes.iter().zip(self.interfaces.values()) {
            pairs.push((index, name));
        }
        FrameComment::render(None, None, &pairs)
    }

    /// Parses a comment written by [`NamespaceNote::render`]; `None` for any other comment.
    pub fn parse(comment: &str) -> Option<Self> {
        let mut note = NamespaceNote::default();
        let mut netns = None;
        for (key, value) in comment_pairs(comment) {
            if key == "netns" {
                netns = value.parse().ok();
            } else if let Ok(index) = key.parse::<u32>() {
                note.interfaces.insert(index, value);
            }
        }
        note.netns = netns?;
        Some(note)
    }
}

fn direction_word(direction: Direction) -> &'static str {
    match direction {
        Direction::Send => "send",
        Direction::Recv => "recv",
    }
}

fn push_value(out: &mut String, value: &str) {
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\\' || c.is_control());
    if plain {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Splits `a=b c="d e"` into pairs; a word without `=` is skipped.
fn comment_pairs(comment: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut chars = comment.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return pairs;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        if chars.next_if_eq(&'=').is_none() {
            continue; // a bare word
        }
        let mut value = String::new();
        if chars.next_if_eq(&'"').is_some() {
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some(other) => value.push(other),
                        None => break,
                    },
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(c);
            }
        }
        pairs.push((key, value));
    }
}
