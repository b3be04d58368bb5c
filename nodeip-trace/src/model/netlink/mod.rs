//! The decoded netlink message: header, body by kind, and the object bodies of each family
//! (rtnetlink, generic netlink's controller, IPVS). What `decode::netlink` produces and every
//! later stage reads; no decoding logic here.
pub mod attributes;
pub mod genl;
pub mod ipvs;
pub mod rtnetlink;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

pub use attributes::{Hex, RawAttribute};
pub use genl::{GenlBody, GenlOperation, McastGroup, NlctrlBody};
pub use ipvs::{IpvsCommand, IpvsDaemon, IpvsDest, IpvsInfo, IpvsService};
pub use rtnetlink::{AddressBody, LinkBody, NeighbourBody, RouteBody, RuleBody};

/// Netlink protocol number of rtnetlink (`NETLINK_ROUTE`): links, addresses, routes,
/// neighbours, rules.
pub const NETLINK_ROUTE: u16 = 0;
/// Netlink protocol number of generic netlink (`NETLINK_GENERIC`): nlctrl, IPVS, ...
pub const NETLINK_GENERIC: u16 = 16;
/// `GENL_ID_CTRL`: the fixed family id of generic netlink's controller, nlctrl.
pub const GENL_ID_CTRL: u16 = 0x10;

/// rtnetlink message types the explainers and the timeline decide on (`linux/rtnetlink.h`); the
/// decoder's table names them all. A type is one of these only on `NETLINK_ROUTE` (where the
/// body is a link, address or route, the protocol is implied).
pub mod rtm {
    /// `RTM_NEWLINK`.
    pub const NEWLINK: u16 = 16;
    /// `RTM_GETLINK`.
    pub const GETLINK: u16 = 18;
    /// `RTM_NEWADDR`.
    pub const NEWADDR: u16 = 20;
    /// `RTM_DELADDR`.
    pub const DELADDR: u16 = 21;
    /// `RTM_GETADDR`.
    pub const GETADDR: u16 = 22;
    /// `RTM_NEWROUTE`.
    pub const NEWROUTE: u16 = 24;
    /// `RTM_GETROUTE`.
    pub const GETROUTE: u16 = 26;

    /// rtnetlink types come in fours from `RTM_NEWLINK`: NEW, DEL, GET, SET
    /// (`include/uapi/linux/rtnetlink.h`); the place of `type_id` in its four.
    fn verb(type_id: u16) -> Option<u16> {
        type_id.checked_sub(NEWLINK).map(|t| t % 4)
    }

    /// Whether `type_id` is an `RTM_GET*` (a request, or a dump's request).
    pub fn is_get(type_id: u16) -> bool {
        verb(type_id) == Some(2)
    }

    /// Whether `type_id` is an `RTM_DEL*`.
    pub fn is_del(type_id: u16) -> bool {
        verb(type_id) == Some(1)
    }
}

/// The name `names` gives `id`, or the number itself.
fn name_in<T: Copy + PartialEq + ToString>(names: &[(T, &'static str)], id: T) -> Name {
    names
        .iter()
        .find(|(known, _)| *known == id)
        .map_or_else(|| id.to_string().into(), |(_, n)| Name::Borrowed(n))
}

/// The id `names` gives `name`, or the number it spells.
fn id_in<T: Copy + std::str::FromStr>(names: &[(T, &'static str)], name: &str) -> Option<T> {
    names
        .iter()
        .find(|(_, n)| *n == name)
        .map(|(id, _)| *id)
        .or_else(|| name.parse().ok())
}

/// Address families (`AF_*`) of netlink bodies and the names records carry; decisions compare
/// ids.
pub mod af {
    use super::Name;

    /// `AF_INET`.
    pub const INET: u16 = 2;
    /// `AF_INET6`.
    pub const INET6: u16 = 10;

    const NAMES: [(u16, &str); 10] = [
        (0, "unspec"),
        (1, "unix"),
        (INET, "inet"),
        (7, "bridge"),
        (INET6, "inet6"),
        (16, "netlink"),
        (17, "packet"),
        (28, "mpls"),
        (128, "ipmr"),
        (129, "ip6mr"),
    ];

    /// The family's name (`inet6`, or its number).
    pub fn name(family: u16) -> Name {
        super::name_in(&NAMES, family)
    }

    /// The id of a family [`name`] printed.
    pub fn id(name: &str) -> Option<u16> {
        super::id_in(&NAMES, name)
    }
}

/// `IFA_F_*` address flags (`include/uapi/linux/if_addr.h`).
pub mod ifa {
    /// `IFA_F_SECONDARY` (IPv4).
    pub const SECONDARY: u32 = 0x01;
    /// `IFA_F_TEMPORARY` (IPv6: the same bit as `SECONDARY`).
    pub const TEMPORARY: u32 = 0x01;
    /// `IFA_F_OPTIMISTIC`.
    pub const OPTIMISTIC: u32 = 0x04;
    /// `IFA_F_HOMEADDRESS`.
    pub const HOMEADDRESS: u32 = 0x10;
    /// `IFA_F_DEPRECATED`.
    pub const DEPRECATED: u32 = 0x20;
    /// `IFA_F_TENTATIVE`.
    pub const TENTATIVE: u32 = 0x40;
    /// `IFA_F_PERMANENT`: no lifetime (configured, not leased or autoconfigured).
    pub const PERMANENT: u32 = 0x80;
    /// `IFA_F_MANAGETEMPADDR`.
    pub const MANAGETEMPADDR: u32 = 0x100;
    /// `IFA_F_NOPREFIXROUTE`.
    pub const NOPREFIXROUTE: u32 = 0x200;
}

/// Routing table ids (`RT_TABLE_*`) and the names iproute2 prints for them; decisions compare
/// ids, records carry the names.
pub mod rt_table {
    use super::Name;

    /// `RT_TABLE_UNSPEC`.
    pub const UNSPEC: u32 = 0;
    /// `RT_TABLE_DEFAULT`.
    pub const DEFAULT: u32 = 253;
    /// `RT_TABLE_MAIN`.
    pub const MAIN: u32 = 254;
    /// `RT_TABLE_LOCAL`.
    pub const LOCAL: u32 = 255;

    const NAMES: [(u32, &str); 4] = [
        (UNSPEC, "unspec"),
        (DEFAULT, "default"),
        (MAIN, "main"),
        (LOCAL, "local"),
    ];

    /// The table's name as iproute2 prints it (`main`, or its number).
    pub fn name(table: u32) -> Name {
        super::name_in(&NAMES, table)
    }

    /// The id of a table [`name`] printed.
    pub fn id(name: &str) -> Option<u32> {
        super::id_in(&NAMES, name)
    }
}

/// Route types (`RTN_*`) and their names; decisions compare ids, records carry the names.
pub mod rtn {
    use super::Name;

    /// `RTN_UNICAST`.
    pub const UNICAST: u8 = 1;
    /// `RTN_LOCAL`.
    pub const LOCAL: u8 = 2;
    /// `RTN_BROADCAST`.
    pub const BROADCAST: u8 = 3;
    /// `RTN_MULTICAST`.
    pub const MULTICAST: u8 = 5;
    /// `RTN_BLACKHOLE`.
    pub const BLACKHOLE: u8 = 6;

    const NAMES: [&str; 12] = [
        "unspec",
        "unicast",
        "local",
        "broadcast",
        "anycast",
        "multicast",
        "blackhole",
        "unreachable",
        "prohibit",
        "throw",
        "nat",
        "xresolve",
    ];

    /// The type's name (`unicast`, or its number).
    pub fn name(kind: u8) -> Name {
        NAMES
            .get(usize::from(kind))
            .map_or_else(|| kind.to_string().into(), |n| Name::Borrowed(n))
    }

    /// The id of a type [`name`] printed.
    pub fn id(name: &str) -> Option<u8> {
        NAMES
            .iter()
            .position(|n| *n == name)
            .and_then(|i| u8::try_from(i).ok())
            .or_else(|| name.parse().ok())
    }
}

/// A name that is usually one of the decoder's tables (`RTM_GETROUTE`, `REQUEST`, `inet`),
/// borrowed from them instead of allocated per message; computed names (`RTM_250`) are owned.
/// Serializes as a plain string.
pub type Name = Cow<'static, str>;

/// How much of each netlink message the decoder keeps, decided by what the outputs read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum MessageDetail {
    /// What the text timeline and the explainers read: every named field, but rtnetlink's
    /// `other_attributes` and nlctrl's `ops`, `mcast_groups` and `other_attributes` stay
    /// empty. The attributes left out are still walked, so their decoding problems are the
    /// same as with [`MessageDetail::Full`]. (Keeping them raw was a tenth of `analyze`'s
    /// time for a text timeline that never shows them.)
    Shown,
    /// Everything the decoder knows, for outputs that write whole messages (JSON, reports).
    #[default]
    Full,
}

/// The decoded `struct nlmsghdr`, with names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageHeader {
    /// Type name: `RTM_GETROUTE`, `NLMSG_ERROR`, `nlctrl CTRL_CMD_GETFAMILY`,
    /// `IPVS_CMD_NEW_SERVICE`, ...
    #[serde(rename = "type")]
    pub type_name: Name,
    /// `nlmsg_type` as sent (a genl family id for generic netlink).
    pub type_id: u16,
    /// Names of the `NLM_F_*` flags set (`REQUEST`, `DUMP`, `ACK`, `MULTI`, ...); the bits from
    /// 0x100 up are read as GET, NEW, DELETE or ACK flags depending on the message.
    pub flags: Vec<Name>,
    /// `nlmsg_flags` as sent.
    pub flags_raw: u16,
    /// `nlmsg_seq`.
    pub seq: u32,
    /// `nlmsg_pid`: the sender's port id in requests (0 = to the kernel), the receiver's in replies.
    pub pid: u32,
    /// `nlmsg_len`.
    pub len: u32,
}

/// One decoded netlink message: its header's fields, then `body` and `error` (serialized by
/// hand, below).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct NetlinkMessage {
    /// The header.
    #[serde(flatten)]
    pub header: MessageHeader,
    /// The decoded body.
    pub body: MessageBody,
    /// What could not be decoded in this message, when anything (also in the decoded buffer's own list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The bytes `#[serde(flatten)]` of the header would give (its fields first, then the body's),
/// written as one struct: flattening went through a map of keys checked one by one, 3% of
/// writing JSON.
impl Serialize for NetlinkMessage {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let h = &self.header;
        let fields = 8 + usize::from(self.error.is_some());
        let mut message = serializer.serialize_struct("NetlinkMessage", fields)?;
        message.serialize_field("type", &h.type_name)?;
        message.serialize_field("type_id", &h.type_id)?;
        message.serialize_field("flags", &h.flags)?;
        message.serialize_field("flags_raw", &h.flags_raw)?;
        message.serialize_field("seq", &h.seq)?;
        message.serialize_field("pid", &h.pid)?;
        message.serialize_field("len", &h.len)?;
        message.serialize_field("body", &self.body)?;
        if let Some(error) = &self.error {
            message.serialize_field("error", error)?;
        }
        message.end()
    }
}

/// A message body, by kind. Object bodies are boxed to keep the enum small.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MessageBody {
    /// No body (`NLMSG_NOOP`, `NLMSG_OVERRUN`).
    Empty,
    /// `NLMSG_ERROR`: an error or an ACK.
    Error(Box<ErrorBody>),
    /// `NLMSG_DONE`: end of a dump.
    Done(DoneBody),
    /// `RTM_{NEW,DEL,GET,SET}LINK`.
    Link(Box<LinkBody>),
    /// `RTM_{NEW,DEL,GET}ADDR`.
    Address(Box<AddressBody>),
    /// `RTM_{NEW,DEL,GET}ROUTE`.
    Route(Box<RouteBody>),
    /// `RTM_{NEW,DEL,GET}NEIGH`.
    Neighbour(Box<NeighbourBody>),
    /// `RTM_{NEW,DEL,GET}RULE`.
    Rule(Box<RuleBody>),
    /// Generic netlink controller (family id 0x10).
    Nlctrl(Box<NlctrlBody>),
    /// The IPVS generic netlink family.
    Ipvs(Box<IpvsCommand>),
    /// Another generic netlink family: header decoded, payload raw.
    Genl(Box<GenlBody>),
    /// A body deliberately not decoded (`NETLINK_XFRM`: keys).
    Redacted(RedactedBody),
    /// A body this decoder does not interpret.
    Raw(RawBody),
}

/// `NLMSG_ERROR`: `error` 0 is an ACK.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error as the kernel sends it: 0 or a negative errno.
    pub error: i32,
    /// `ACK` for 0, else the errno name (`ENODEV`).
    pub errno: Name,
    /// The `strerror` text (`No such device`).
    pub text: Name,
    /// The echoed request header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<MessageHeader>,
    /// Extended ack: the kernel's message (`NLMSGERR_ATTR_MSG`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extack_msg: Option<String>,
    /// Extended ack: offset of the offending attribute in the request (`NLMSGERR_ATTR_OFFS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extack_offset: Option<u32>,
    /// Other extended-ack attributes (cookie, policy, missing type), raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extack_attributes: Vec<RawAttribute>,
}

/// `NLMSG_DONE`: the dump's final status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoneBody {
    /// The status (0, or a negative errno when the dump failed), when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<i32>,
    /// The errno name when the status is non-zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<Name>,
    /// Extended ack message, when the kernel added one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extack_msg: Option<String>,
}

/// A body that is never decoded; only its size is kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedactedBody {
    /// Body length in bytes.
    pub payload_len: usize,
}

/// A body kept as hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawBody {
    /// The body in hex.
    pub hex: Hex,
}

#[cfg(test)]
mod tests {
    use super::{af, rt_table, rtm, rtn};

    #[test]
    fn names_and_ids_go_both_ways_and_numbers_stand_for_themselves() {
        for table in [0, 253, 254, 255, 100] {
            assert_eq!(rt_table::id(&rt_table::name(table)), Some(table));
        }
        assert_eq!(rt_table::name(rt_table::LOCAL), "local");
        for kind in 0..=12 {
            assert_eq!(rtn::id(&rtn::name(kind)), Some(kind));
        }
        assert_eq!(rtn::name(rtn::UNICAST), "unicast");
        for family in [0, af::INET, af::INET6, 16, 44] {
            assert_eq!(af::id(&af::name(family)), Some(family));
        }
        assert_eq!(af::id("nonsense"), None);
    }

    #[test]
    fn rtnetlink_types_come_in_fours() {
        // RTM_NEWLINK 16, DELLINK 17, GETLINK 18; NEWADDR 20, DELADDR 21, GETADDR 22;
        // GETROUTE 26.
        assert!(rtm::is_get(18) && rtm::is_get(22) && rtm::is_get(rtm::GETROUTE));
        assert!(rtm::is_del(17) && rtm::is_del(21));
        assert!(!rtm::is_get(rtm::NEWADDR) && !rtm::is_del(rtm::NEWLINK));
        // NLMSG_ERROR (2) and NLMSG_DONE (3) are not rtnetlink types.
        assert!(!rtm::is_get(2) && !rtm::is_del(3));
    }
}
