//! Netlink buffers → decoded messages. This file is the entry point ([`NetlinkDecoder::decode`]):
//! it splits a send/receive buffer into messages, decodes each `nlmsghdr` and its flags, the
//! control messages (`NLMSG_ERROR` with extended ack, `NLMSG_DONE`, `NLMSG_NOOP`/`OVERRUN`),
//! and hands the rest to the family decoders: `rtnetlink` (links, addresses, routes,
//! neighbours, rules), `genl` (generic netlink header, nlctrl) and `ipvs`. `NETLINK_XFRM`
//! bodies are never decoded (they carry keys); other protocols stay raw hex.
//!
//! Decoding never fails as a whole and never panics: a malformed part ends the walk at that
//! point with a [`DecodeError`] naming its byte offset, and everything before it is kept.
mod attributes;
mod errno;
mod genl;
mod ipvs;
pub(crate) mod rtnetlink;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use attributes::{align4, bit_names_in, read_u16, read_u32, walk_attributes};
pub use errno::{errno_name, errno_text};
pub use ipvs::ipvs_command;
pub use rtnetlink::{route_type_name, table_name};

use crate::decode::record::c_string;
use crate::model::netlink::{
    DoneBody, ErrorBody, Hex, MessageBody, MessageDetail, MessageHeader, Name, NetlinkMessage,
    RawBody, RedactedBody,
};

/// `NETLINK_XFRM`: IPsec state and policy (bodies carry keys and are never decoded).
pub const NETLINK_XFRM: u16 = 6;

/// Zeroes every message body of a `NETLINK_XFRM` buffer in place, keeping the 16-byte netlink
/// headers (type, flags, seq, port id, length) so a capture still shows who asked what. XFRM
/// bodies carry IPsec keys: nothing written to a file keeps them. A length that does not fit
/// ends the walk, and the rest of the buffer is zeroed too.
pub fn redact_xfrm(buffer: &mut [u8]) {
    let mut offset = 0;
    while offset + 16 <= buffer.len() {
        let len = u32::from_ne_bytes(buffer[offset..offset + 4].try_into().expect("4 bytes"));
        let len = len as usize;
        if len < 16 || offset + len > buffer.len() {
            break;
        }
        buffer[offset + 16..offset + len].fill(0);
        offset += len.next_multiple_of(4);
    }
    if offset < buffer.len() {
        let keep = if offset + 16 <= buffer.len() { 16 } else { 0 };
        buffer[offset + keep..].fill(0);
    }
}
pub use crate::model::netlink::{GENL_ID_CTRL, NETLINK_GENERIC, NETLINK_ROUTE};

/// Length of `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;
/// Message types below this are netlink control messages, shared by every protocol.
const NLMSG_MIN_TYPE: u16 = 0x10;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;

/// `NLM_F_CAPPED`: the error echoes only the request header, not its payload.
const NLM_F_CAPPED: u16 = 0x100;
/// `NLM_F_ACK_TLVS`: extended-ack attributes follow.
const NLM_F_ACK_TLVS: u16 = 0x200;

/// `NLMSGERR_ATTR_MSG`: the extack message string.
const NLMSGERR_ATTR_MSG: u16 = 1;
/// `NLMSGERR_ATTR_OFFS`: offset of the offending attribute in the request.
const NLMSGERR_ATTR_OFFS: u16 = 2;

/// Netlink protocol numbers and names (`NETLINK_*` in `linux/netlink.h`).
const PROTOCOL_NAMES: &[(u16, &str)] = &[
    (0, "NETLINK_ROUTE"),
    (1, "NETLINK_UNUSED"),
    (2, "NETLINK_USERSOCK"),
    (3, "NETLINK_FIREWALL"),
    (4, "NETLINK_SOCK_DIAG"),
    (5, "NETLINK_NFLOG"),
    (6, "NETLINK_XFRM"),
    (7, "NETLINK_SELINUX"),
    (8, "NETLINK_ISCSI"),
    (9, "NETLINK_AUDIT"),
    (10, "NETLINK_FIB_LOOKUP"),
    (11, "NETLINK_CONNECTOR"),
    (12, "NETLINK_NETFILTER"),
    (13, "NETLINK_IP6_FW"),
    (14, "NETLINK_DNRTMSG"),
    (15, "NETLINK_KOBJECT_UEVENT"),
    (16, "NETLINK_GENERIC"),
    (18, "NETLINK_SCSITRANSPORT"),
    (19, "NETLINK_ECRYPTFS"),
    (20, "NETLINK_RDMA"),
    (21, "NETLINK_CRYPTO"),
    (22, "NETLINK_SMC"),
];

/// The interface names (index, `IFLA_IFNAME`) of the `RTM_NEWLINK` messages of a
/// `NETLINK_ROUTE` buffer (host byte order), in order; other messages and anything malformed
/// are passed over. A scan for a first pass over a capture: far cheaper than
/// [`NetlinkDecoder::decode`], which learns the same names while decoding everything.
pub fn link_names(buffer: &[u8]) -> Vec<(u32, String)> {
    const RTM_NEWLINK: u16 = 16;
    const IFINFOMSG_LEN: usize = 16;
    const IFLA_IFNAME: u16 = 3;
    let mut names = Vec::new();
    let mut at = 0;
    while let (Some(len), Some(kind)) = (
        attributes::read_u32(buffer, at),
        attributes::read_u16(buffer, at + 4),
    ) {
        let len = len as usize;
        let Some(message) = buffer.get(at..at.saturating_add(len)).filter(|_| len >= 16) else {
            break;
        };
        if kind == RTM_NEWLINK && message.len() >= 16 + IFINFOMSG_LEN {
            let index = attributes::read_u32(message, 20).unwrap_or(0);
            let body = &message[16 + IFINFOMSG_LEN..];
            let name = attributes::AttributeWalker::new(body, 0)
                .map_while(Result::ok)
                .find(|a| a.kind == IFLA_IFNAME);
            if let (Some(name), true) = (name, index != 0) {
                names.push((index, c_string(name.value).into()));
            }
        }
        at += attributes::align4(len);
    }
    names
}

/// The name of a netlink protocol (`NETLINK_ROUTE`), or `NETLINK_<n>` when unknown.
pub fn protocol_name(protocol: u16) -> Name {
    PROTOCOL_NAMES
        .iter()
        .find(|(number, _)| *number == protocol)
        .map_or_else(
            || Name::Owned(format!("NETLINK_{protocol}")),
            |(_, name)| Name::Borrowed(name),
        )
}

/// Parses a protocol as a user writes it: `route`, `NETLINK_GENERIC`, `inet_diag`, `16`.
pub fn protocol_from_name(name: &str) -> Option<u16> {
    let name = name.trim();
    if let Ok(number) = name.parse::<u16>() {
        return Some(number);
    }
    let upper = name.to_ascii_uppercase();
    let short = upper.strip_prefix("NETLINK_").unwrap_or(&upper);
    let short = match short {
        "INET_DIAG" => "SOCK_DIAG",
        "GENL" => "GENERIC",
        "RTNETLINK" => "ROUTE",
        other => other,
    };
    PROTOCOL_NAMES
        .iter()
        .find(|(_, full)| full.strip_prefix("NETLINK_") == Some(short))
        .map(|(number, _)| *number)
}

/// An address family name as iproute2 prints it (`inet`, `inet6`), else the number.
pub(crate) fn address_family_name(family: u16) -> Name {
    crate::model::netlink::af::name(family)
}

/// What went wrong where in a buffer. Never fatal: the decoder keeps what came before.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than a netlink header are left (and they are not zero padding).
    #[error("truncated netlink header at byte {offset}: {available} bytes left, 16 needed")]
    TruncatedHeader {
        /// Byte offset of the partial header in the buffer.
        offset: usize,
        /// Bytes left in the buffer.
        available: usize,
    },
    /// `nlmsg_len` is smaller than the header itself.
    #[error("netlink message at byte {offset} has nlmsg_len {len}, less than the 16-byte header")]
    LengthTooSmall {
        /// Byte offset of the message in the buffer.
        offset: usize,
        /// The `nlmsg_len` it claims.
        len: u32,
    },
    /// `nlmsg_len` runs past the end of the buffer (a cut capture, or garbage).
    #[error(
        "netlink message at byte {offset} has nlmsg_len {len} but only {available} bytes are left"
    )]
    LengthOverrun {
        /// Byte offset of the message in the buffer.
        offset: usize,
        /// The `nlmsg_len` it claims.
        len: u32,
        /// Bytes left in the buffer from `offset`.
        available: usize,
    },
    /// An attribute's length is below its 4-byte header or runs past its container.
    #[error(
        "attribute type {attr_type} at byte {offset} has length {len} but {available} bytes are left"
    )]
    BadAttribute {
        /// Byte offset of the attribute header in the buffer.
        offset: usize,
        /// Its type (flag bits removed).
        attr_type: u16,
        /// The `nla_len` it claims.
        len: usize,
        /// Bytes left in its container from `offset`.
        available: usize,
    },
    /// A message body could not be decoded as its type says; the message is kept raw.
    #[error("{message_type} body at byte {offset}: {reason}")]
    Body {
        /// Byte offset of the body (after the netlink header) in the buffer.
        offset: usize,
        /// The message type name.
        message_type: String,
        /// What failed.
        reason: String,
    },
}

/// The header of the message at `offset` in `bytes`, its length checked against the buffer:
/// `Ok(None)` past the last message, or why the walk cannot go on there. Both the count that
/// sizes the message list and the decoding walk by it.
fn message_at(bytes: &[u8], offset: usize) -> Result<Option<RawHeader>, DecodeError> {
    let Some(rest) = bytes.get(offset..).filter(|rest| !rest.is_empty()) else {
        return Ok(None);
    };
    // Zeros after the last message are padding (iproute2 sends its whole request buffer; the
    // kernel stops at a zero length too).
    if rest.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let Some(header) = RawHeader::parse(rest) else {
        return Err(DecodeError::TruncatedHeader {
            offset,
            available: rest.len(),
        });
    };
    let len = header.len as usize;
    if len < NLMSG_HDRLEN {
        return Err(DecodeError::LengthTooSmall {
            offset,
            len: header.len,
        });
    }
    if len > rest.len() {
        return Err(DecodeError::LengthOverrun {
            offset,
            len: header.len,
            available: rest.len(),
        });
    }
    Ok(Some(header))
}

/// How many messages `bytes` holds, walked as decoding walks it (a dump's buffer holds
/// dozens: its message list grown one by one copied each message several times over).
fn message_count(bytes: &[u8]) -> usize {
    let (mut count, mut offset) = (0, 0);
    while let Ok(Some(header)) = message_at(bytes, offset) {
        count += 1;
        offset = offset.saturating_add(align4(header.len as usize));
    }
    count
}

/// The result of decoding one buffer: every message that could be decoded, and what could not.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DecodedBuffer {
    /// Messages in buffer order.
    pub messages: Vec<NetlinkMessage>,
    /// Problems, each with its byte offset in the buffer.
    pub errors: Vec<DecodeError>,
}

/// How the flag bits from 0x100 up are to be read for a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlagMeaning {
    /// GET requests: ROOT, MATCH (both = DUMP), ATOMIC.
    Get,
    /// NEW/SET requests and notifications: REPLACE, EXCL, CREATE, APPEND.
    New,
    /// DEL requests: NONREC, BULK.
    Delete,
    /// NLMSG_ERROR/NLMSG_DONE: CAPPED, ACK_TLVS.
    Ack,
    /// Unknown: bits given in hex.
    Unknown,
}

const COMMON_FLAGS: &[(u32, &str)] = &[
    (0x01, "REQUEST"),
    (0x02, "MULTI"),
    (0x04, "ACK"),
    (0x08, "ECHO"),
    (0x10, "DUMP_INTR"),
    (0x20, "DUMP_FILTERED"),
];
const GET_FLAGS: &[(u32, &str)] = &[
    (0x300, "DUMP"),
    (0x100, "ROOT"),
    (0x200, "MATCH"),
    (0x400, "ATOMIC"),
];
const NEW_FLAGS: &[(u32, &str)] = &[
    (0x100, "REPLACE"),
    (0x200, "EXCL"),
    (0x400, "CREATE"),
    (0x800, "APPEND"),
];
const DELETE_FLAGS: &[(u32, &str)] = &[(0x100, "NONREC"), (0x200, "BULK")];
const ACK_FLAGS: &[(u32, &str)] = &[(0x100, "CAPPED"), (0x200, "ACK_TLVS")];

/// Names of `nlmsg_flags`, reading the high bits as `meaning` says.
fn flag_names(flags: u16, meaning: FlagMeaning) -> Vec<Name> {
    let specific: &[(u32, &str)] = match meaning {
        FlagMeaning::Get => GET_FLAGS,
        FlagMeaning::New => NEW_FLAGS,
        FlagMeaning::Delete => DELETE_FLAGS,
        FlagMeaning::Ack => ACK_FLAGS,
        FlagMeaning::Unknown => &[],
    };
    bit_names_in(u32::from(flags), &[COMMON_FLAGS, specific])
}

/// The flag meaning from a type name: the verb after its prefix (`RTM_GETROUTE`,
/// `IPVS_CMD_NEW_SERVICE`, `nlctrl CTRL_CMD_GETFAMILY`, `XFRM_MSG_UPDSA`).
fn flag_meaning(type_id: u16, type_name: &str) -> FlagMeaning {
    if type_id == NLMSG_ERROR || type_id == NLMSG_DONE {
        return FlagMeaning::Ack;
    }
    // The last word (a byte search: `rsplit`'s searcher was 2% of decoding).
    let last = match type_name.bytes().rposition(|b| b == b' ') {
        Some(space) => &type_name[space + 1..],
        None => type_name,
    };
    let verb = ["RTM_", "XFRM_MSG_", "CTRL_CMD_", "IPVS_CMD_"]
        .iter()
        .find_map(|prefix| last.strip_prefix(prefix))
        .unwrap_or("");
    if verb.starts_with("GET") {
        FlagMeaning::Get
    } else if ["NEW", "SET", "UPD"].iter().any(|v| verb.starts_with(v)) {
        FlagMeaning::New
    } else if verb.starts_with("DEL") {
        FlagMeaning::Delete
    } else {
        FlagMeaning::Unknown
    }
}

/// `NETLINK_XFRM` message names (`XFRM_MSG_*` in `linux/xfrm.h`), from type 16.
const XFRM_MESSAGE_NAMES: &[&str] = &[
    "NEWSA",
    "DELSA",
    "GETSA",
    "NEWPOLICY",
    "DELPOLICY",
    "GETPOLICY",
    "ALLOCSPI",
    "ACQUIRE",
    "EXPIRE",
    "UPDPOLICY",
    "UPDSA",
    "POLEXPIRE",
    "FLUSHSA",
    "FLUSHPOLICY",
    "NEWAE",
    "GETAE",
    "REPORT",
    "MIGRATE",
    "NEWSADINFO",
    "GETSADINFO",
    "NEWSPDINFO",
    "GETSPDINFO",
    "MAPPING",
    "SETDEFAULT",
    "GETDEFAULT",
];

/// Decodes netlink buffers, learning names as it goes: interface names from `RTM_NEWLINK`,
/// generic netlink family ids from nlctrl replies, so later messages are named and decoded.
#[derive(Clone, Debug)]
pub struct NetlinkDecoder {
    families: BTreeMap<u16, String>,
    interfaces: BTreeMap<u32, String>,
    detail: MessageDetail,
    /// A message of the buffer being decoded named an interface index the table lacks.
    unnamed: std::cell::Cell<bool>,
}

impl Default for NetlinkDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl NetlinkDecoder {
    /// A decoder that knows only nlctrl (generic netlink family 0x10).
    pub fn new() -> Self {
        let mut families = BTreeMap::new();
        families.insert(GENL_ID_CTRL, genl::NLCTRL_NAME.to_string());
        Self {
            families,
            interfaces: BTreeMap::new(),
            detail: MessageDetail::Full,
            unnamed: std::cell::Cell::new(false),
        }
    }

    /// Keeps `detail` of each message from now on ([`MessageDetail::Full`] by default).
    pub fn set_detail(&mut self, detail: MessageDetail) {
        self.detail = detail;
    }

    /// How much of each message this decoder keeps.
    pub fn detail(&self) -> MessageDetail {
        self.detail
    }

    /// Records that generic netlink family `id` is `name` (e.g. `IPVS`).
    pub fn learn_family(&mut self, id: u16, name: &str) {
        self.families.insert(id, name.to_string());
    }

    /// The name of generic netlink family `id`, when known.
    pub fn family_name(&self, id: u16) -> Option<&str> {
        self.families.get(&id).map(String::as_str)
    }

    /// Every known generic netlink family (nlctrl included), by id.
    pub fn families(&self) -> impl Iterator<Item = (u16, &str)> {
        self.families.iter().map(|(id, name)| (*id, name.as_str()))
    }

    /// Records that interface `index` is `name`. Index 0 is ignored: it means "no interface"
    /// or, in an `RTM_NEWLINK` request, "let the kernel pick".
    pub fn set_interface_name(&mut self, index: u32, name: &str) {
        if index != 0 {
            self.interfaces.insert(index, name.to_string());
        }
    }

    /// Exchanges the interface-name table with `names`: a caller that knows which network
    /// namespace a buffer comes from swaps that namespace's table in before decoding and out
    /// after, so names learned from `RTM_NEWLINK` stay with their namespace.
    pub fn swap_interfaces(&mut self, names: &mut BTreeMap<u32, String>) {
        std::mem::swap(&mut self.interfaces, names);
    }

    /// The name of interface `index`, when known. An index the table lacks is remembered for
    /// [`Self::named_every_interface`].
    pub fn interface_name(&self, index: u32) -> Option<&str> {
        let name = self.interfaces.get(&index).map(String::as_str);
        if name.is_none() && index != 0 {
            self.unnamed.set(true);
        }
        name
    }

    /// Whether every interface index the last [`Self::decode`] looked up had a name: when not,
    /// a caller with a live view of the namespace may load its table again (an interface made
    /// after the table was loaded) and decode the buffer once more.
    pub fn named_every_interface(&self) -> bool {
        !self.unnamed.get()
    }

    /// Decodes one send/recv buffer (one or more messages) of netlink `protocol`
    /// (0 = ROUTE, 16 = GENERIC, 6 = XFRM, others raw).
    pub fn decode(&mut self, protocol: u16, bytes: &[u8]) -> DecodedBuffer {
        self.unnamed.set(false);
        let mut out = DecodedBuffer {
            messages: Vec::with_capacity(message_count(bytes)),
            errors: Vec::new(),
        };
        let mut offset = 0;
        loop {
            let header = match message_at(bytes, offset) {
                Ok(Some(header)) => header,
                Ok(None) => break,
                Err(error) => {
                    out.errors.push(error);
                    break;
                }
            };
            let len = header.len as usize;
            let rest = &bytes[offset..];
            let payload = &rest[NLMSG_HDRLEN..len];
            let message = self.decode_message(protocol, &header, payload, offset, &mut out.errors);
            out.messages.push(message);
            offset = offset.saturating_add(align4(len));
        }
        out
    }

    fn decode_message(
        &mut self,
        protocol: u16,
        raw: &RawHeader,
        payload: &[u8],
        offset: usize,
        errors: &mut Vec<DecodeError>,
    ) -> NetlinkMessage {
        let header = self.named_header(protocol, raw, payload);
        let errors_before = errors.len();
        let body_offset = offset + NLMSG_HDRLEN;
        let body = match raw.type_id {
            NLMSG_NOOP | NLMSG_OVERRUN => MessageBody::Empty,
            NLMSG_ERROR => self.decode_error(protocol, raw.flags, payload, body_offset, errors),
            NLMSG_DONE => decode_done(raw.flags, payload, body_offset, errors),
            type_id if type_id < NLMSG_MIN_TYPE => raw_body(payload),
            type_id => match protocol {
                NETLINK_ROUTE => rtnetlink::decode(
                    self,
                    type_id,
                    &header.type_name,
                    payload,
                    body_offset,
                    errors,
                ),
                NETLINK_GENERIC => genl::decode(self, type_id, payload, body_offset, errors),
                NETLINK_XFRM => MessageBody::Redacted(RedactedBody {
                    payload_len: payload.len(),
                }),
                _ => raw_body(payload),
            },
        };
        let error = (errors.len() > errors_before).then(|| {
            errors[errors_before..]
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        });
        NetlinkMessage {
            header,
            body,
            error,
        }
    }

    /// Names the header; `payload` (possibly empty) lets genl messages be named by command.
    fn named_header(&self, protocol: u16, raw: &RawHeader, payload: &[u8]) -> MessageHeader {
        let type_name = self.type_name(protocol, raw.type_id, payload);
        let flags = flag_names(raw.flags, flag_meaning(raw.type_id, &type_name));
        MessageHeader {
            type_name,
            type_id: raw.type_id,
            flags,
            flags_raw: raw.flags,
            seq: raw.seq,
            pid: raw.pid,
            len: raw.len,
        }
    }

    fn type_name(&self, protocol: u16, type_id: u16, payload: &[u8]) -> Name {
        match type_id {
            NLMSG_NOOP => return "NLMSG_NOOP".into(),
            NLMSG_ERROR => return "NLMSG_ERROR".into(),
            NLMSG_DONE => return "NLMSG_DONE".into(),
            NLMSG_OVERRUN => return "NLMSG_OVERRUN".into(),
            type_id if type_id < NLMSG_MIN_TYPE => return format!("NLMSG_{type_id}").into(),
            _ => {}
        }
        match protocol {
            NETLINK_ROUTE => rtnetlink::message_type_name(type_id),
            NETLINK_GENERIC => genl::message_type_name(self, type_id, payload.first().copied()),
            NETLINK_XFRM => XFRM_MESSAGE_NAMES
                .get(usize::from(type_id - NLMSG_MIN_TYPE))
                .map_or_else(
                    || format!("XFRM_MSG_{type_id}"),
                    |name| format!("XFRM_MSG_{name}"),
                )
                .into(),
            _ => format!("{} type {type_id}", protocol_name(protocol)).into(),
        }
    }

    fn decode_error(
        &self,
        protocol: u16,
        flags: u16,
        payload: &[u8],
        offset: usize,
        errors: &mut Vec<DecodeError>,
    ) -> MessageBody {
        let Some(error) = read_u32(payload, 0).map(|e| e as i32) else {
            errors.push(DecodeError::Body {
                offset,
                message_type: "NLMSG_ERROR".into(),
                reason: format!("{} bytes, the error code needs 4", payload.len()),
            });
            return raw_body(payload);
        };
        let echoed = payload.get(4..).and_then(RawHeader::parse);
        let request = echoed.as_ref().map(|raw| {
            // Without NLM_F_CAPPED the whole request follows its header; a genl request's
            // command then names it. Never more than the echoed header is shown.
            let echoed_payload = if flags & NLM_F_CAPPED == 0 {
                let end = (raw.len as usize).min(payload.len() - 4);
                payload.get(4 + NLMSG_HDRLEN..4 + end).unwrap_or(&[])
            } else {
                &[]
            };
            self.named_header(protocol, raw, echoed_payload)
        });
        let mut body = ErrorBody {
            error,
            errno: if error == 0 {
                "ACK".into()
            } else {
                Name::Borrowed(errno_name(error))
            },
            text: errno_text(error),
            request,
            extack_msg: None,
            extack_offset: None,
            extack_attributes: Vec::new(),
        };
        if flags & NLM_F_ACK_TLVS != 0 {
            let echoed_len = match echoed {
                Some(raw) if flags & NLM_F_CAPPED == 0 => align4(raw.len as usize),
                _ => NLMSG_HDRLEN,
            };
            let tlv_start = 4 + echoed_len;
            let tlvs = payload.get(tlv_start..).unwrap_or(&[]);
            for attribute in walk_attributes(tlvs, offset + tlv_start, errors) {
                match attribute.kind {
                    NLMSGERR_ATTR_MSG => body.extack_msg = Some(attribute.string()),
                    NLMSGERR_ATTR_OFFS => body.extack_offset = attribute.u32(),
                    _ => body.extack_attributes.push(attribute.to_raw()),
                }
            }
        }
        MessageBody::Error(Box::new(body))
    }
}

/// `NLMSG_DONE`: a 4-byte status when present, then extack attributes when flagged.
fn decode_done(
    flags: u16,
    payload: &[u8],
    offset: usize,
    errors: &mut Vec<DecodeError>,
) -> MessageBody {
    let status = read_u32(payload, 0).map(|s| s as i32);
    let mut body = DoneBody {
        status,
        errno: status
            .filter(|&s| s != 0)
            .map(|s| Name::Borrowed(errno_name(s))),
        extack_msg: None,
    };
    if flags & NLM_F_ACK_TLVS != 0 && payload.len() > 4 {
        for attribute in walk_attributes(&payload[4..], offset + 4, errors) {
            if attribute.kind == NLMSGERR_ATTR_MSG {
                body.extack_msg = Some(attribute.string());
            }
        }
    }
    MessageBody::Done(body)
}

/// A body kept as hex.
fn raw_body(payload: &[u8]) -> MessageBody {
    MessageBody::Raw(RawBody {
        hex: Hex::from(payload),
    })
}

/// `struct nlmsghdr` as read from the buffer (host byte order).
#[derive(Clone, Copy, Debug)]
struct RawHeader {
    len: u32,
    type_id: u16,
    flags: u16,
    seq: u32,
    pid: u32,
}

impl RawHeader {
    /// The header at the start of `buf`, or `None` when fewer than 16 bytes are there.
    fn parse(buf: &[u8]) -> Option<Self> {
        Some(Self {
            len: read_u32(buf, 0)?,
            type_id: read_u16(buf, 4)?,
            flags: read_u16(buf, 6)?,
            seq: read_u32(buf, 8)?,
            pid: read_u32(buf, 12)?,
        })
    }
}
