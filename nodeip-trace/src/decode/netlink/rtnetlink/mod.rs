//! rtnetlink (`NETLINK_ROUTE`) bodies: links, addresses, routes, neighbours and rules, parsed
//! with `netlink-packet-route` and turned into flat, named records (iproute2's names for
//! tables, types, protocols and scopes). Attributes those records do not show are kept raw;
//! a body the crate rejects is kept as hex with the reason. `RTM_NEWLINK` teaches the decoder
//! interface names.
//!
//! One path per object: links and routes are first read by own attribute walkers
//! (`link_walker`, `route_walker`, children of this module) that build the same record through
//! the same helpers here, or give up and leave the body to the crate; a test compares the two
//! on every fixture and on mangled copies. They exist for speed, measured (benchmark diary,
//! `git show 3c0bc23:BENCHMARKS.md`): the crate's parse builds every attribute (a link dump's
//! statistics, per-family configuration) into a list for a record that shows a few; the route
//! walker took `analyze`'s instructions on a route capture down 11.5%, the link walker was part
//! of a 1.15 → 0.75 s `analyze` of 200 MB.
pub(in crate::decode::netlink) mod link_walker;
pub(in crate::decode::netlink) mod route_walker;

use compact_str::{format_compact, CompactString};
use netlink_packet_core::ParseableParametrized;
use netlink_packet_route::{
    address::{AddressAttribute, AddressMessage},
    link::{
        InfoData, InfoGre, InfoGre6, InfoIpTunnel, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage,
    },
    neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage},
    route::{RouteAddress, RouteAttribute, RouteHeader, RouteMessage},
    rule::{RuleAttribute, RuleMessage},
    RouteNetlinkMessage,
};

use super::attributes::{bit_names, bit_names_in, link_layer_address, walk_attributes};
use super::{address_family_name, DecodeError, NetlinkDecoder};
use crate::model::ip_text::ip_text;
use crate::model::netlink::attributes::hex;
use crate::model::netlink::{
    ifa, rt_table, rtn, AddressBody, Hex, LinkBody, MessageBody, MessageDetail, Name,
    NeighbourBody, RawAttribute, RawBody, RouteBody, RuleBody,
};

/// `RTM_*` message names, by type number.
const MESSAGE_NAMES: &[(u16, &str)] = &[
    (16, "RTM_NEWLINK"),
    (17, "RTM_DELLINK"),
    (18, "RTM_GETLINK"),
    (19, "RTM_SETLINK"),
    (20, "RTM_NEWADDR"),
    (21, "RTM_DELADDR"),
    (22, "RTM_GETADDR"),
    (24, "RTM_NEWROUTE"),
    (25, "RTM_DELROUTE"),
    (26, "RTM_GETROUTE"),
    (28, "RTM_NEWNEIGH"),
    (29, "RTM_DELNEIGH"),
    (30, "RTM_GETNEIGH"),
    (32, "RTM_NEWRULE"),
    (33, "RTM_DELRULE"),
    (34, "RTM_GETRULE"),
    (36, "RTM_NEWQDISC"),
    (37, "RTM_DELQDISC"),
    (38, "RTM_GETQDISC"),
    (40, "RTM_NEWTCLASS"),
    (41, "RTM_DELTCLASS"),
    (42, "RTM_GETTCLASS"),
    (44, "RTM_NEWTFILTER"),
    (45, "RTM_DELTFILTER"),
    (46, "RTM_GETTFILTER"),
    (48, "RTM_NEWACTION"),
    (49, "RTM_DELACTION"),
    (50, "RTM_GETACTION"),
    (52, "RTM_NEWPREFIX"),
    (58, "RTM_GETMULTICAST"),
    (62, "RTM_GETANYCAST"),
    (64, "RTM_NEWNEIGHTBL"),
    (66, "RTM_GETNEIGHTBL"),
    (67, "RTM_SETNEIGHTBL"),
    (68, "RTM_NEWNDUSEROPT"),
    (72, "RTM_NEWADDRLABEL"),
    (73, "RTM_DELADDRLABEL"),
    (74, "RTM_GETADDRLABEL"),
    (78, "RTM_GETDCB"),
    (79, "RTM_SETDCB"),
    (80, "RTM_NEWNETCONF"),
    (81, "RTM_DELNETCONF"),
    (82, "RTM_GETNETCONF"),
    (84, "RTM_NEWMDB"),
    (85, "RTM_DELMDB"),
    (86, "RTM_GETMDB"),
    (88, "RTM_NEWNSID"),
    (89, "RTM_DELNSID"),
    (90, "RTM_GETNSID"),
    (92, "RTM_NEWSTATS"),
    (94, "RTM_GETSTATS"),
    (95, "RTM_SETSTATS"),
    (96, "RTM_NEWCACHEREPORT"),
    (100, "RTM_NEWCHAIN"),
    (101, "RTM_DELCHAIN"),
    (102, "RTM_GETCHAIN"),
    (104, "RTM_NEWNEXTHOP"),
    (105, "RTM_DELNEXTHOP"),
    (106, "RTM_GETNEXTHOP"),
    (108, "RTM_NEWLINKPROP"),
    (109, "RTM_DELLINKPROP"),
    (110, "RTM_GETLINKPROP"),
    (112, "RTM_NEWVLAN"),
    (113, "RTM_DELVLAN"),
    (114, "RTM_GETVLAN"),
    (116, "RTM_NEWNEXTHOPBUCKET"),
    (117, "RTM_DELNEXTHOPBUCKET"),
    (118, "RTM_GETNEXTHOPBUCKET"),
    (120, "RTM_NEWTUNNEL"),
    (121, "RTM_DELTUNNEL"),
    (122, "RTM_GETTUNNEL"),
];

/// An rtnetlink message name (`RTM_GETROUTE`), or `RTM_<n>`.
pub(crate) fn message_type_name(type_id: u16) -> Name {
    MESSAGE_NAMES
        .iter()
        .find(|(number, _)| *number == type_id)
        .map_or_else(
            || Name::Owned(format!("RTM_{type_id}")),
            |(_, name)| Name::Borrowed(name),
        )
}

/// The object families decoded here, with their fixed header length and the attribute types
/// their record shows (the others are kept raw).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ObjectKind {
    Link,
    Address,
    Route,
    Neighbour,
    Rule,
}

impl ObjectKind {
    fn of(type_id: u16) -> Option<Self> {
        match type_id {
            16..=19 => Some(Self::Link),
            20..=22 => Some(Self::Address),
            24..=26 => Some(Self::Route),
            28..=30 => Some(Self::Neighbour),
            32..=34 => Some(Self::Rule),
            _ => None,
        }
    }

    /// `sizeof` ifinfomsg, ifaddrmsg, rtmsg, ndmsg, fib_rule_hdr.
    fn header_len(self) -> usize {
        match self {
            Self::Link => 16,
            Self::Address => 8,
            Self::Route | Self::Neighbour | Self::Rule => 12,
        }
    }

    /// Attribute types the record shows.
    fn shown_attributes(self) -> &'static [u16] {
        match self {
            // IFLA_ADDRESS, BROADCAST, IFNAME, MTU, LINK, MASTER, OPERSTATE, LINKINFO
            Self::Link => &[1, 2, 3, 4, 5, 10, 16, 18],
            // IFA_ADDRESS, LOCAL, LABEL, BROADCAST, ANYCAST, FLAGS
            Self::Address => &[1, 2, 3, 4, 5, 8],
            // RTA_DST, SRC, IIF, OIF, GATEWAY, PRIORITY, PREFSRC, TABLE, MARK
            Self::Route => &[1, 2, 3, 4, 5, 6, 7, 15, 16],
            // NDA_DST, LLADDR
            Self::Neighbour => &[1, 2],
            // FRA_DST, SRC, IIFNAME, PRIORITY, FWMARK, TABLE, OIFNAME
            Self::Rule => &[1, 2, 3, 6, 10, 15, 17],
        }
    }
}

/// Decodes an rtnetlink body of type `type_id` (named `type_name`) starting at `offset`.
pub(crate) fn decode(
    decoder: &mut NetlinkDecoder,
    type_id: u16,
    type_name: &str,
    payload: &[u8],
    offset: usize,
    errors: &mut Vec<DecodeError>,
) -> MessageBody {
    let raw = || {
        MessageBody::Raw(RawBody {
            hex: Hex::from(payload),
        })
    };
    let Some(kind) = ObjectKind::of(type_id) else {
        return raw();
    };
    let header_len = kind.header_len();
    // Dump requests from glibc and busybox carry only `struct rtgenmsg` (the family, padded
    // to 4 bytes): read them as a zero-filled header.
    let padded;
    let payload = if payload.len() < header_len && type_name.starts_with("RTM_GET") {
        padded = [payload, &[0; 16][..header_len - payload.len()]].concat();
        &padded[..]
    } else {
        payload
    };
    if payload.len() < header_len {
        errors.push(DecodeError::Body {
            offset,
            message_type: type_name.to_string(),
            reason: format!("{} bytes, the header needs {header_len}", payload.len()),
        });
        return raw();
    }
    if kind == ObjectKind::Link {
        if let Some(body) = link_walker::link_body(payload) {
            let other = other_attributes(kind, decoder.detail(), payload, offset, errors);
            return link_message(decoder, type_id, body, other);
        }
    }
    if kind == ObjectKind::Route {
        if let Some((mut body, table_id)) = route_walker::route_body(payload) {
            body.other_attributes =
                other_attributes(kind, decoder.detail(), payload, offset, errors);
            finish_route_body(decoder, &mut body, table_id);
            return MessageBody::Route(Box::new(body));
        }
    }
    let message = match RouteNetlinkMessage::parse_with_param(payload, type_id) {
        Ok(message) => message,
        Err(error) => {
            errors.push(DecodeError::Body {
                offset,
                message_type: type_name.to_string(),
                reason: error.to_string(),
            });
            return raw();
        }
    };
    let other_attributes = other_attributes(kind, decoder.detail(), payload, offset, errors);
    match message {
        RouteNetlinkMessage::NewLink(link)
        | RouteNetlinkMessage::DelLink(link)
        | RouteNetlinkMessage::GetLink(link)
        | RouteNetlinkMessage::SetLink(link) => {
            link_message(decoder, type_id, link_body(link), other_attributes)
        }
        RouteNetlinkMessage::NewAddress(address)
        | RouteNetlinkMessage::DelAddress(address)
        | RouteNetlinkMessage::GetAddress(address) => {
            MessageBody::Address(Box::new(address_body(decoder, address, other_attributes)))
        }
        RouteNetlinkMessage::NewRoute(route)
        | RouteNetlinkMessage::DelRoute(route)
        | RouteNetlinkMessage::GetRoute(route) => {
            MessageBody::Route(Box::new(route_body(decoder, route, other_attributes)))
        }
        RouteNetlinkMessage::NewNeighbour(neighbour)
        | RouteNetlinkMessage::DelNeighbour(neighbour)
        | RouteNetlinkMessage::GetNeighbour(neighbour) => MessageBody::Neighbour(Box::new(
            neighbour_body(decoder, neighbour, other_attributes),
        )),
        RouteNetlinkMessage::NewRule(rule)
        | RouteNetlinkMessage::DelRule(rule)
        | RouteNetlinkMessage::GetRule(rule) => {
            MessageBody::Rule(Box::new(rule_body(rule, other_attributes)))
        }
        _ => raw(),
    }
}

const RTM_NEWLINK: u16 = 16;

/// The attributes of a well-formed body (`payload`, at `offset` in the buffer) that its record
/// does not show, raw; a malformed attribute ends them and is pushed to `errors`. With
/// [`MessageDetail::Shown`] they are walked for their problems and none is kept.
fn other_attributes(
    kind: ObjectKind,
    detail: MessageDetail,
    payload: &[u8],
    offset: usize,
    errors: &mut Vec<DecodeError>,
) -> Vec<RawAttribute> {
    let header_len = kind.header_len();
    let region = &payload[header_len..];
    let walk = walk_attributes(region, offset + header_len, errors);
    if detail == MessageDetail::Shown {
        walk.for_each(drop);
        return Vec::new();
    }
    // A link dump's body holds some thirty attributes of a few dozen bytes or more that its
    // record does not show: room for them at once, not a list grown four times. Other bodies
    // show most of theirs.
    let room = if kind == ObjectKind::Link {
        region.len() / 32
    } else {
        0
    };
    let mut other = Vec::with_capacity(room);
    other.extend(
        walk.filter(|attribute| !kind.shown_attributes().contains(&attribute.kind))
            .map(|attribute| attribute.to_raw()),
    );
    other
}

/// `IFF_*` interface flags.
const INTERFACE_FLAGS: &[(u32, &str)] = &[
    (0x1, "UP"),
    (0x2, "BROADCAST"),
    (0x4, "DEBUG"),
    (0x8, "LOOPBACK"),
    (0x10, "POINTOPOINT"),
    (0x20, "NOTRAILERS"),
    (0x40, "RUNNING"),
    (0x80, "NOARP"),
    (0x100, "PROMISC"),
    (0x200, "ALLMULTI"),
    (0x400, "MASTER"),
    (0x800, "SLAVE"),
    (0x1000, "MULTICAST"),
    (0x2000, "PORTSEL"),
    (0x4000, "AUTOMEDIA"),
    (0x8000, "DYNAMIC"),
    (0x10000, "LOWER_UP"),
    (0x20000, "DORMANT"),
    (0x40000, "ECHO"),
];

/// `IFA_F_*` address flags, as `ip address` prints them.
const ADDRESS_FLAGS: &[(u32, &str)] = &[
    (0x01, "secondary"),
    (0x02, "nodad"),
    (0x04, "optimistic"),
    (0x08, "dadfailed"),
    (0x10, "homeaddress"),
    (0x20, "deprecated"),
    (0x40, "tentative"),
    (0x80, "permanent"),
    (0x100, "mngtmpaddr"),
    (0x200, "noprefixroute"),
    (0x400, "autojoin"),
    (0x800, "stable-privacy"),
];

/// `RTNH_F_*` (low byte) and `RTM_F_*` route flags.
const ROUTE_FLAGS: &[(u32, &str)] = &[
    (0x1, "DEAD"),
    (0x2, "PERVASIVE"),
    (0x4, "ONLINK"),
    (0x8, "OFFLOAD"),
    (0x10, "LINKDOWN"),
    (0x20, "UNRESOLVED"),
    (0x40, "TRAP"),
    (0x100, "NOTIFY"),
    (0x200, "CLONED"),
    (0x400, "EQUALIZE"),
    (0x800, "PREFIX"),
    (0x1000, "LOOKUP_TABLE"),
    (0x2000, "FIB_MATCH"),
    (0x4000, "RTM_OFFLOAD"),
    (0x8000, "RTM_TRAP"),
];

/// `RTM_F_CLONED`: an IPv4 route-lookup answer, whose upper 16 flag bits are the route cache's
/// `RTCF_*` flags (`rt_fill_info`) rather than `RTM_F_OFFLOAD_FAILED`.
const RTM_F_CLONED: u32 = 0x200;

/// Upper flag bits of a route that is not a lookup answer.
const ROUTE_UPPER_FLAGS: &[(u32, &str)] = &[(0x2000_0000, "OFFLOAD_FAILED")];

/// `RTCF_*` (`linux/in_route.h`): upper flag bits of an IPv4 route-lookup answer.
const ROUTE_CACHE_FLAGS: &[(u32, &str)] = &[
    (0x0001_0000, "RTCF_NOTIFY"),
    (0x0004_0000, "RTCF_REDIRECTED"),
    (0x0100_0000, "RTCF_DOREDIRECT"),
    (0x0400_0000, "RTCF_DIRECTSRC"),
    (0x0800_0000, "RTCF_DNAT"),
    (0x1000_0000, "RTCF_BROADCAST"),
    (0x2000_0000, "RTCF_MULTICAST"),
    (0x8000_0000, "RTCF_LOCAL"),
];

/// Names of `rtm_flags`, reading the upper bits as `RTCF_*` in lookup answers.
fn route_flag_names(flags: u32) -> Vec<Name> {
    let upper = if flags & RTM_F_CLONED != 0 {
        ROUTE_CACHE_FLAGS
    } else {
        ROUTE_UPPER_FLAGS
    };
    bit_names_in(flags, &[ROUTE_FLAGS, upper])
}

/// `NUD_*` neighbour states.
const NEIGHBOUR_STATES: &[(u32, &str)] = &[
    (0x01, "INCOMPLETE"),
    (0x02, "REACHABLE"),
    (0x04, "STALE"),
    (0x08, "DELAY"),
    (0x10, "PROBE"),
    (0x20, "FAILED"),
    (0x40, "NOARP"),
    (0x80, "PERMANENT"),
];

/// `NTF_*` neighbour flags.
const NEIGHBOUR_FLAGS: &[(u32, &str)] = &[
    (0x01, "USE"),
    (0x02, "SELF"),
    (0x04, "MASTER"),
    (0x08, "PROXY"),
    (0x10, "EXT_LEARNED"),
    (0x20, "OFFLOADED"),
    (0x40, "STICKY"),
    (0x80, "ROUTER"),
];

/// A routing table name as iproute2 prints it ([`rt_table::name`]).
pub fn table_name(table: u32) -> Name {
    rt_table::name(table)
}

/// An `RTN_*` route type name ([`rtn::name`]).
pub fn route_type_name(kind: u8) -> Name {
    rtn::name(kind)
}

/// An `RTPROT_*` name as in `/etc/iproute2/rt_protos`.
fn route_protocol_name(protocol: u8) -> Name {
    match protocol {
        0 => "unspec",
        1 => "redirect",
        2 => "kernel",
        3 => "boot",
        4 => "static",
        8 => "gated",
        9 => "ra",
        10 => "mrt",
        11 => "zebra",
        12 => "bird",
        13 => "dnrouted",
        14 => "xorp",
        15 => "ntk",
        16 => "dhcp",
        17 => "mrouted",
        18 => "keepalived",
        42 => "babel",
        99 => "openr",
        186 => "bgp",
        187 => "isis",
        188 => "ospf",
        189 => "rip",
        192 => "eigrp",
        other => return other.to_string().into(),
    }
    .into()
}

/// An `RT_SCOPE_*` name as iproute2 prints it.
pub(crate) fn scope_name(scope: u8) -> Name {
    match scope {
        0 => "global",
        200 => "site",
        253 => "link",
        254 => "host",
        255 => "nowhere",
        other => return other.to_string().into(),
    }
    .into()
}

/// An `FR_ACT_*` rule action name.
fn rule_action_name(action: u8) -> Name {
    match action {
        0 => "unspec",
        1 => "to_table",
        2 => "goto",
        3 => "nop",
        6 => "blackhole",
        7 => "unreachable",
        8 => "prohibit",
        other => return other.to_string().into(),
    }
    .into()
}

fn route_address(address: &RouteAddress) -> CompactString {
    match address {
        RouteAddress::Inet(ip) => ip_text(*ip),
        RouteAddress::Inet6(ip) => ip_text(*ip),
        RouteAddress::Mpls(label) => format_compact!("mpls {}", label.label),
        RouteAddress::Other(bytes) => hex(bytes).into(),
        _ => format_compact!("{address:?}"),
    }
}

/// A link record with what the `ifinfomsg` header says (family, index, type, flags).
pub(super) fn link_header_body(family: u8, index: u32, link_type: u16, flags: u32) -> LinkBody {
    LinkBody {
        family: address_family_name(family.into()),
        index,
        link_type,
        flags: bit_names(flags, INTERFACE_FLAGS),
        flags_raw: flags,
        ..LinkBody::default()
    }
}

/// Sets what one parsed link attribute shows in the record (a later one wins).
pub(super) fn apply_link_attribute(body: &mut LinkBody, attribute: LinkAttribute) {
    match attribute {
        LinkAttribute::IfName(name) => body.ifname = Some(name),
        LinkAttribute::Mtu(mtu) => body.mtu = Some(mtu),
        LinkAttribute::Address(bytes) => body.address = Some(link_layer_address(&bytes)),
        LinkAttribute::Broadcast(bytes) => body.broadcast = Some(link_layer_address(&bytes)),
        LinkAttribute::Controller(index) => body.master = Some(index),
        LinkAttribute::Link(index) => body.link = Some(index),
        LinkAttribute::OperState(state) => body.operstate = Some(state.to_string().into()),
        LinkAttribute::LinkInfo(infos) => {
            for info in infos {
                match info {
                    LinkInfo::Kind(kind) => body.info_kind = Some(kind.to_string()),
                    LinkInfo::Data(data) => set_tunnel_endpoints(body, data),
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The link record of a message the crate parsed (without `other_attributes` and
/// `master_name`).
fn link_body(message: LinkMessage) -> LinkBody {
    let header = message.header;
    let mut body = link_header_body(
        u8::from(header.interface_family),
        header.index,
        u16::from(header.link_layer_type),
        header.flags.bits(),
    );
    for attribute in message.attributes {
        apply_link_attribute(&mut body, attribute);
    }
    body
}

/// The route record netlink-packet-route's parse gives for an `RTM_*ROUTE` body (what
/// [`route_walker::route_body`] must equal), interfaces named by `decoder`.
#[cfg(test)]
pub(super) fn route_body_by_crate(
    decoder: &NetlinkDecoder,
    payload: &[u8],
    type_id: u16,
) -> Option<RouteBody> {
    match RouteNetlinkMessage::parse_with_param(payload, type_id).ok()? {
        RouteNetlinkMessage::NewRoute(route)
        | RouteNetlinkMessage::DelRoute(route)
        | RouteNetlinkMessage::GetRoute(route) => Some(route_body(decoder, route, Vec::new())),
        _ => None,
    }
}

/// The link record netlink-packet-route's parse gives for an `RTM_*LINK` body (what
/// [`link_walker::link_body`] must equal), `None` when the crate refuses it.
#[cfg(test)]
pub(super) fn link_body_by_crate(payload: &[u8], type_id: u16) -> Option<LinkBody> {
    match RouteNetlinkMessage::parse_with_param(payload, type_id).ok()? {
        RouteNetlinkMessage::NewLink(link)
        | RouteNetlinkMessage::DelLink(link)
        | RouteNetlinkMessage::GetLink(link)
        | RouteNetlinkMessage::SetLink(link) => Some(link_body(link)),
        _ => None,
    }
}

/// A link message's body: its record completed with the attributes it does not show and its
/// master's name; `RTM_NEWLINK` teaches the decoder the interface's name.
fn link_message(
    decoder: &mut NetlinkDecoder,
    type_id: u16,
    mut body: LinkBody,
    other: Vec<RawAttribute>,
) -> MessageBody {
    body.other_attributes = other;
    body.master_name = body
        .master
        .and_then(|index| decoder.interface_name(index))
        .map(str::to_string);
    if let (RTM_NEWLINK, Some(name)) = (type_id, &body.ifname) {
        decoder.set_interface_name(body.index, name);
    }
    MessageBody::Link(Box::new(body))
}

/// Tunnel local/remote addresses from `IFLA_INFO_DATA` of ipip/sit/ip6tnl, gre and vxlan.
fn set_tunnel_endpoints(body: &mut LinkBody, data: InfoData) {
    let mut set = |local: Option<CompactString>, remote: Option<CompactString>| {
        if local.is_some() {
            body.tunnel_local = local;
        }
        if remote.is_some() {
            body.tunnel_remote = remote;
        }
    };
    match data {
        InfoData::IpTunnel(items) => items.into_iter().for_each(|item| match item {
            InfoIpTunnel::Local(ip) => set(Some(ip_text(ip)), None),
            InfoIpTunnel::Remote(ip) => set(None, Some(ip_text(ip))),
            _ => {}
        }),
        InfoData::GreTun(items) | InfoData::GreTap(items) | InfoData::ErSpan(items) => {
            items.into_iter().for_each(|item| match item {
                InfoGre::Local(ip) => set(Some(ip_text(ip)), None),
                InfoGre::Remote(ip) => set(None, Some(ip_text(ip))),
                _ => {}
            })
        }
        InfoData::GreTun6(items) | InfoData::GreTap6(items) | InfoData::Ip6ErSpan(items) => {
            items.into_iter().for_each(|item| match item {
                InfoGre6::Local(ip) => set(Some(ip_text(ip)), None),
                InfoGre6::Remote(ip) => set(None, Some(ip_text(ip))),
                _ => {}
            })
        }
        InfoData::Vxlan(items) => items.into_iter().for_each(|item| match item {
            InfoVxlan::Local(ip) => set(Some(ip_text(ip)), None),
            InfoVxlan::Local6(ip) => set(Some(ip_text(ip)), None),
            InfoVxlan::Group(ip) => set(None, Some(ip_text(ip))),
            InfoVxlan::Group6(ip) => set(None, Some(ip_text(ip))),
            _ => {}
        }),
        _ => {}
    }
}

fn address_body(
    decoder: &NetlinkDecoder,
    message: AddressMessage,
    other: Vec<RawAttribute>,
) -> AddressBody {
    let header = message.header;
    let mut flags = u32::from(header.flags.bits());
    let mut body = AddressBody {
        family: address_family_name(u8::from(header.family).into()),
        prefix_len: header.prefix_len,
        scope: scope_name(u8::from(header.scope)),
        index: header.index,
        ifname: decoder
            .interface_name(header.index)
            .map(CompactString::from),
        other_attributes: other,
        ..AddressBody::default()
    };
    for attribute in message.attributes {
        match attribute {
            AddressAttribute::Address(ip) => body.address = Some(ip_text(ip)),
            AddressAttribute::Local(ip) => body.local = Some(ip_text(ip)),
            AddressAttribute::Label(label) => body.label = Some(label.into()),
            AddressAttribute::Broadcast(ip) => body.broadcast = Some(ip_text(ip)),
            AddressAttribute::Anycast(ip) => body.anycast = Some(ip_text(ip)),
            // IFA_FLAGS is the full 32-bit set; the header holds only its low byte.
            AddressAttribute::Flags(all) => flags = all.bits(),
            _ => {}
        }
    }
    body.flags = bit_names(flags, ADDRESS_FLAGS);
    body.flags_raw = flags;
    body.secondary = flags & ifa::SECONDARY != 0;
    body
}

/// A route record with what the `rtmsg` header says (`header`: its 12 bytes, as the crate's
/// `RouteHeader` reads them); its table is the header's until [`finish_route_body`].
pub(super) fn route_header_body(header: &RouteHeader, other: Vec<RawAttribute>) -> RouteBody {
    let flags = header.flags.bits();
    RouteBody {
        family: address_family_name(u8::from(header.address_family).into()),
        route_type: route_type_name(u8::from(header.kind)),
        protocol: route_protocol_name(u8::from(header.protocol)),
        scope: scope_name(u8::from(header.scope)),
        tos: header.tos,
        dst_len: header.destination_prefix_length,
        src_len: header.source_prefix_length,
        flags: route_flag_names(flags),
        flags_raw: flags,
        other_attributes: other,
        ..RouteBody::default()
    }
}

/// Names the route's table (`table_id`: `RTA_TABLE` when present, else the header's 8-bit
/// field) and its interfaces.
pub(super) fn finish_route_body(decoder: &NetlinkDecoder, body: &mut RouteBody, table_id: u32) {
    body.table = table_name(table_id);
    body.table_id = table_id;
    let name_of = |index: Option<u32>| {
        index
            .and_then(|i| decoder.interface_name(i))
            .map(CompactString::from)
    };
    body.oif_name = name_of(body.oif);
    body.iif_name = name_of(body.iif);
}

fn route_body(
    decoder: &NetlinkDecoder,
    message: RouteMessage,
    other: Vec<RawAttribute>,
) -> RouteBody {
    let mut table_id = u32::from(message.header.table);
    let mut body = route_header_body(&message.header, other);
    for attribute in message.attributes {
        match attribute {
            RouteAttribute::Destination(address) => body.dst = Some(route_address(&address)),
            RouteAttribute::Source(address) => body.src = Some(route_address(&address)),
            RouteAttribute::Gateway(address) => body.gateway = Some(route_address(&address)),
            RouteAttribute::PrefSource(address) => body.prefsrc = Some(route_address(&address)),
            RouteAttribute::Oif(index) => body.oif = Some(index),
            RouteAttribute::Iif(index) => body.iif = Some(index),
            RouteAttribute::Priority(priority) => body.priority = Some(priority),
            RouteAttribute::Mark(mark) => body.mark = Some(mark),
            RouteAttribute::Table(table) => table_id = table,
            _ => {}
        }
    }
    finish_route_body(decoder, &mut body, table_id);
    body
}

fn neighbour_body(
    decoder: &NetlinkDecoder,
    message: NeighbourMessage,
    other: Vec<RawAttribute>,
) -> NeighbourBody {
    let header = message.header;
    let state = u16::from(header.state);
    let mut body = NeighbourBody {
        family: address_family_name(u8::from(header.family).into()),
        ifindex: header.ifindex,
        ifname: decoder.interface_name(header.ifindex).map(str::to_string),
        state: if state == 0 {
            vec![Name::Borrowed("NONE")]
        } else {
            bit_names(state.into(), NEIGHBOUR_STATES)
        },
        state_raw: state,
        flags: bit_names(header.flags.bits().into(), NEIGHBOUR_FLAGS),
        neighbour_type: route_type_name(u8::from(header.kind)),
        other_attributes: other,
        ..NeighbourBody::default()
    };
    for attribute in message.attributes {
        match attribute {
            NeighbourAttribute::Destination(address) => {
                body.dst = Some(match address {
                    NeighbourAddress::Inet(ip) => ip_text(ip),
                    NeighbourAddress::Inet6(ip) => ip_text(ip),
                    NeighbourAddress::Other(bytes) => hex(&bytes).into(),
                    _ => format_compact!("{address:?}"),
                })
            }
            NeighbourAttribute::LinkLayerAddress(bytes) => {
                body.lladdr = Some(link_layer_address(&bytes))
            }
            _ => {}
        }
    }
    body
}

fn rule_body(message: RuleMessage, other: Vec<RawAttribute>) -> RuleBody {
    let header = message.header;
    let mut table_id = u32::from(header.table);
    let mut body = RuleBody {
        family: address_family_name(u8::from(header.family).into()),
        action: rule_action_name(u8::from(header.action)),
        src_len: header.src_len,
        dst_len: header.dst_len,
        other_attributes: other,
        ..RuleBody::default()
    };
    for attribute in message.attributes {
        match attribute {
            RuleAttribute::Destination(ip) => body.dst = Some(ip_text(ip)),
            RuleAttribute::Source(ip) => body.src = Some(ip_text(ip)),
            RuleAttribute::Iifname(name) => body.iifname = Some(name),
            RuleAttribute::Oifname(name) => body.oifname = Some(name),
            RuleAttribute::Priority(priority) => body.priority = Some(priority),
            RuleAttribute::FwMark(mark) => body.fwmark = Some(mark),
            RuleAttribute::Table(table) => table_id = table,
            _ => {}
        }
    }
    body.table = table_name(table_id);
    body.table_id = table_id;
    body
}
