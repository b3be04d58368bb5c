//! `RTM_*LINK` bodies read with an own attribute walker instead of netlink-packet-route's
//! `LinkMessage` (which builds every attribute of a link dump — statistics, per-family
//! configuration — into a list of large values the link record never shows).
//!
//! The walker gives exactly what the crate's parse would give, or nothing: it follows the crate's
//! attribute iteration (`NlasIterator`), checks each attribute the way the crate's
//! `LinkAttribute` parser does (fixed-size numbers, UTF-8 names, the 32-byte `IFLA_MAP`, the
//! per-family lists of `IFLA_AF_SPEC`), and hands every other nested attribute the crate parses
//! in depth (`IFLA_LINKINFO`, `IFLA_XDP`, ...) to that same crate parser, one attribute at a
//! time. Any irregularity — an attribute length the crate refuses, a number of the wrong size, a
//! name that is not UTF-8, a nested attribute the crate rejects — ends the walk with `None`, and
//! the caller decodes the body with the crate as before, errors and all.
use netlink_packet_core::{NlaBuffer, ParseableParametrized};
use netlink_packet_route::link::{LinkAttribute, LinkLayerType, State};
use netlink_packet_route::AddressFamily;

use super::{apply_link_attribute, link_header_body};
use crate::decode::netlink::attributes::{
    crate_nlas, link_layer_address, read_u16, read_u32, CrateNla,
};
use crate::model::netlink::LinkBody;

/// `sizeof(struct ifinfomsg)`.
const IFINFOMSG_LEN: usize = 16;
/// Attribute header length (`struct nlattr`).
const NLA_HEADER_LEN: usize = 4;
/// `sizeof(struct rtnl_link_ifmap)`, the least `IFLA_MAP` the crate reads.
const LINK_MAP_LEN: usize = 32;

/// How the crate's `LinkAttribute` parser treats an `IFLA_*` type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AttributeCheck {
    /// Any value is read (addresses, statistics, types the crate does not know).
    Any,
    /// Exactly one byte.
    U8,
    /// Exactly four bytes (`u32`, `i32`).
    U32,
    /// A string: UTF-8 once one trailing NUL is dropped.
    Utf8,
    /// At least [`LINK_MAP_LEN`] bytes.
    Map,
    /// `IFLA_AF_SPEC` of an `AF_UNSPEC` message: per-family attributes, checked as the crate
    /// parses them ([`af_spec_fits`]).
    AfSpecUnspec,
    /// Parsed in depth by the crate: handed to its own parser.
    Crate,
}

/// The check the crate applies to attribute type `kind` (flag bits removed) of a message of
/// `family`, as in netlink-packet-route 0.34's `LinkAttribute::parse_with_param`.
fn attribute_check(kind: u16, family: AddressFamily) -> AttributeCheck {
    use AttributeCheck::*;
    match kind {
        // IFLA_AF_SPEC: per-family attributes in AF_UNSPEC messages (the kernel's), the
        // bridge's own list in AF_BRIDGE ones, bytes otherwise.
        26 => match family {
            AddressFamily::Unspec => AfSpecUnspec,
            AddressFamily::Bridge => Crate,
            _ => Any,
        },
        // ADDRESS, BROADCAST, STATS, STATS64, PERM_ADDRESS (STATS and STATS64 are zero-filled
        // when short and cut when long: any length).
        1 | 2 | 7 | 23 | 54 => Any,
        // IFNAME, QDISC, IFALIAS, PHYS_PORT_NAME, PARENT_DEV_NAME, PARENT_DEV_BUS_NAME
        3 | 6 | 20 | 38 | 56 | 57 => Utf8,
        // OPERSTATE, LINKMODE, CARRIER, PROTO_DOWN, NETNS_IMMUTABLE
        16 | 17 | 33 | 39 | 67 => U8,
        // MTU, LINK, MASTER, TXQLEN, NET_NS_PID, NUM_VF, GROUP, NET_NS_FD, EXT_MASK,
        // PROMISCUITY, NUM_TX_QUEUES, NUM_RX_QUEUES, CARRIER_CHANGES, LINK_NETNSID,
        // GSO_MAX_SEGS, GSO_MAX_SIZE, NEW_NETNSID, IF_NETNSID, CARRIER_UP_COUNT,
        // CARRIER_DOWN_COUNT, NEW_IFINDEX, MIN_MTU, MAX_MTU, GRO_MAX_SIZE, TSO_MAX_SIZE,
        // TSO_MAX_SEGS, ALLMULTI, GSO_IPV4_MAX_SIZE, GRO_IPV4_MAX_SIZE
        4 | 5 | 10 | 13 | 19 | 21 | 27..=32 | 35 | 37 | 40 | 41 | 45..=51 | 58..=61 | 63 | 64 => {
            U32
        }
        14 => Map,
        // WIRELESS, PROTINFO, LINKINFO, VFINFO_LIST, VF_PORTS, PORT_SELF, PHYS_PORT_ID,
        // PHYS_SWITCH_ID, XDP, EVENT, PROP_LIST, PROTO_DOWN_REASON, DEVLINK_PORT, DPLL_PIN
        11 | 12 | 18 | 22 | 24 | 25 | 34 | 36 | 43 | 44 | 52 | 55 | 62 | 65 => Crate,
        // Types the crate keeps as `Other` (COST, PRIORITY, WEIGHT, PAD, ALT_IFNAME, ...).
        _ => Any,
    }
}

/// Whether the crate reads every attribute of `region` and `fits` says each one parses.
fn all_fit(region: &[u8], fits: impl Fn(&CrateNla<'_>) -> bool) -> bool {
    crate_nlas(region).all(|nla| nla.is_some_and(|nla| fits(&nla)))
}

/// [`all_fit`] for a nested list the crate opens with `NlaBuffer::new_checked` (which refuses
/// fewer than 4 bytes, an empty list included).
fn nested_fit(value: &[u8], fits: impl Fn(&CrateNla<'_>) -> bool) -> bool {
    value.len() >= NLA_HEADER_LEN && all_fit(value, fits)
}

/// Whether the crate parses an `AF_UNSPEC` message's `IFLA_AF_SPEC` value: `AF_INET`'s list
/// (`IFLA_INET_CONF` is zero-filled when short: any attribute parses), `AF_INET6`'s (fixed-size
/// flags, token, address generation mode and RA MTU, a cache info of at least 16 bytes;
/// configuration and statistics zero-filled), other families as bytes. `AF_MCTP` (45) is left
/// to the crate.
fn af_spec_fits(value: &[u8]) -> bool {
    all_fit(value, |family| match family.kind {
        2 => nested_fit(family.value, |_| true),
        10 => nested_fit(family.value, |nla| match nla.kind {
            // IFLA_INET6_FLAGS, IFLA_INET6_RA_MTU
            1 | 9 => nla.value.len() == 4,
            // IFLA_INET6_CACHEINFO
            5 => nla.value.len() >= 16,
            // IFLA_INET6_TOKEN
            7 => nla.value.len() == 16,
            // IFLA_INET6_ADDR_GEN_MODE
            8 => nla.value.len() == 1,
            _ => true,
        }),
        45 => false,
        _ => true,
    })
}

/// The string the crate reads from a name attribute: one trailing NUL dropped, UTF-8 or `None`.
fn crate_string(value: &[u8]) -> Option<&str> {
    let text = value.strip_suffix(&[0]).unwrap_or(value);
    std::str::from_utf8(text).ok()
}

/// The link record of an `RTM_*LINK` body (`ifinfomsg` and attributes) without its
/// `other_attributes` and `master_name`, equal to what netlink-packet-route's parse would
/// give; `None` when the crate might see the body differently (see the module's note).
pub(in crate::decode::netlink) fn link_body(payload: &[u8]) -> Option<LinkBody> {
    let header = payload.get(..IFINFOMSG_LEN)?;
    let family = AddressFamily::from(header[0]);
    let mut body = link_header_body(
        u8::from(family),
        read_u32(header, 4)?,
        u16::from(LinkLayerType::from(read_u16(header, 2)?)),
        read_u32(header, 8)?,
    );
    for nla in crate_nlas(&payload[IFINFOMSG_LEN..]) {
        let CrateNla { kind, value, rest } = nla?;
        let fits = match attribute_check(kind, family) {
            AttributeCheck::Any => true,
            AttributeCheck::U8 => value.len() == 1,
            AttributeCheck::U32 => value.len() == 4,
            AttributeCheck::Utf8 => crate_string(value).is_some(),
            AttributeCheck::Map => value.len() >= LINK_MAP_LEN,
            AttributeCheck::AfSpecUnspec => af_spec_fits(value),
            AttributeCheck::Crate => {
                let buffer = NlaBuffer::new_checked(rest).ok()?;
                let attribute = LinkAttribute::parse_with_param(&buffer, family).ok()?;
                apply_link_attribute(&mut body, attribute);
                true
            }
        };
        if !fits {
            return None;
        }
        match kind {
            // IFLA_ADDRESS, IFLA_BROADCAST
            1 => body.address = Some(link_layer_address(value)),
            2 => body.broadcast = Some(link_layer_address(value)),
            // IFLA_IFNAME
            3 => body.ifname = crate_string(value).map(str::to_owned),
            // IFLA_MTU, IFLA_LINK, IFLA_MASTER
            4 => body.mtu = read_u32(value, 0),
            5 => body.link = read_u32(value, 0),
            10 => body.master = read_u32(value, 0),
            // IFLA_OPERSTATE
            16 => body.operstate = Some(State::from(value[0]).to_string().into()),
            _ => {}
        }
    }
    Some(body)
}
