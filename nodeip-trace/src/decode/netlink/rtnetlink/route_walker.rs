//! `RTM_*ROUTE` bodies read with an own attribute walker instead of netlink-packet-route's
//! `RouteMessage` (which builds every attribute into a list of values, addresses parsed and
//! cache info copied, for a record that shows nine of them: under a route-get burst the crate's
//! parse was a third of the decoder's instructions).
//!
//! As the link walker does, it gives exactly what the crate's parse would give, or nothing: it
//! follows the crate's attribute iteration (`NlasIterator`), reads the attributes the record
//! shows with the crate's own checks (addresses of the family's exact length, numbers of
//! exactly four bytes), and hands every other one to the crate's `RouteAttribute` parser, one at
//! a time. MPLS routes, multipath and lightweight-tunnel encapsulation (which the crate parses
//! with the encapsulation type found in a first pass) go back to the crate whole, as does
//! anything the crate would refuse, errors and all.
use std::net::{Ipv4Addr, Ipv6Addr};

use compact_str::CompactString;
use netlink_packet_core::{NlaBuffer, ParseableParametrized};
use netlink_packet_route::route::{RouteAttribute, RouteHeader, RouteLwEnCapType};
use netlink_packet_route::AddressFamily;

use super::route_header_body;
use crate::decode::netlink::attributes::{crate_nlas, CrateNla};
use crate::model::ip_text::ip_text;
use crate::model::netlink::attributes::hex;
use crate::model::netlink::RouteBody;

/// `sizeof(struct rtmsg)`.
pub(in crate::decode::netlink) const RTMSG_LEN: usize = 12;

/// `RTA_DST`, `RTA_SRC`, `RTA_IIF`, `RTA_OIF`, `RTA_GATEWAY`, `RTA_PRIORITY`, `RTA_PREFSRC`,
/// `RTA_MULTIPATH`, `RTA_TABLE`, `RTA_MARK`, `RTA_ENCAP`.
const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_IIF: u16 = 3;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_PRIORITY: u16 = 6;
const RTA_PREFSRC: u16 = 7;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_MARK: u16 = 16;
const RTA_ENCAP: u16 = 22;

/// An address attribute as the crate's `RouteAddress::parse` reads it, as the record writes
/// it: IPv4 and IPv6 of exactly their length, other families' bytes in hex (MPLS never comes
/// here).
fn address_text(family: AddressFamily, value: &[u8]) -> Option<CompactString> {
    match family {
        AddressFamily::Inet => {
            let octets: [u8; 4] = value.try_into().ok()?;
            Some(ip_text(Ipv4Addr::from(octets)))
        }
        AddressFamily::Inet6 => {
            let octets: [u8; 16] = value.try_into().ok()?;
            Some(ip_text(Ipv6Addr::from(octets)))
        }
        _ => Some(hex(value).into()),
    }
}

/// A number attribute as the crate's `parse_u32` reads it: exactly four bytes.
fn number(value: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(value.try_into().ok()?))
}

/// The route record of an `RTM_*ROUTE` body (`rtmsg` and attributes) without its
/// `other_attributes`, table name and interface names, with the table id to name (`RTA_TABLE`
/// when present, else the header's); equal to what netlink-packet-route's parse would give,
/// or `None` when the crate might see the body differently (see the module's note).
pub(in crate::decode::netlink) fn route_body(payload: &[u8]) -> Option<(RouteBody, u32)> {
    let header = RouteHeader::parse(payload).ok()?;
    let family = header.address_family;
    if family == AddressFamily::Mpls {
        return None;
    }
    let mut table_id = u32::from(header.table);
    let mut body = route_header_body(&header, Vec::new());
    for nla in crate_nlas(payload.get(RTMSG_LEN..)?) {
        let CrateNla { kind, value, rest } = nla?;
        match kind {
            RTA_DST => body.dst = Some(address_text(family, value)?),
            RTA_SRC => body.src = Some(address_text(family, value)?),
            RTA_GATEWAY => body.gateway = Some(address_text(family, value)?),
            RTA_PREFSRC => body.prefsrc = Some(address_text(family, value)?),
            RTA_IIF => body.iif = Some(number(value)?),
            RTA_OIF => body.oif = Some(number(value)?),
            RTA_PRIORITY => body.priority = Some(number(value)?),
            RTA_MARK => body.mark = Some(number(value)?),
            RTA_TABLE => table_id = number(value)?,
            RTA_MULTIPATH | RTA_ENCAP => return None,
            _ => {
                let buffer = NlaBuffer::new_checked(rest).ok()?;
                RouteAttribute::parse_with_param(
                    &buffer,
                    (family, header.kind, RouteLwEnCapType::None),
                )
                .ok()?;
            }
        }
    }
    Some((body, table_id))
}
