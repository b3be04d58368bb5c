//! Route lookups → [`RouteLookup`]: the raw tracepoint programs' [`RouteLookupRecord`]s, or the
//! classic `fib:fib_table_lookup` / `fib6:fib6_table_lookup` records' bytes (older kernels).
use std::net::{Ipv4Addr, Ipv6Addr};

use nodeip_trace_common::{route_lookup_flags, RouteLookupRecord, KIND_ROUTE_LOOKUP6};

use crate::decode::netlink::{route_type_name, table_name};
use crate::decode::record::c_string;
use crate::decode::tracepoint_format::{
    TracepointLayout, FIB6_TABLE_LOOKUP_6X, FIB_TABLE_LOOKUP_6X,
};
use crate::model::event::RouteLookup;
use crate::model::ip_text::{ip_text, ipv4_text};

/// The layouts of both fib tracepoints, from tracefs or the 6.x fallback.
#[derive(Clone, Debug)]
pub struct RouteLookupDecoder {
    v4: TracepointLayout,
    v6: TracepointLayout,
}

impl Default for RouteLookupDecoder {
    fn default() -> Self {
        Self::new(FIB_TABLE_LOOKUP_6X, FIB6_TABLE_LOOKUP_6X)
    }
}

impl RouteLookupDecoder {
    /// From the text of the two `format` files.
    pub fn new(fib_format: &str, fib6_format: &str) -> Self {
        let v4 = TracepointLayout::parse(fib_format);
        let v6 = TracepointLayout::parse(fib6_format);
        let fallback = Self::default_layouts();
        Self {
            v4: if v4.is_empty() { fallback.0 } else { v4 },
            v6: if v6.is_empty() { fallback.1 } else { v6 },
        }
    }

    fn default_layouts() -> (TracepointLayout, TracepointLayout) {
        (
            TracepointLayout::parse(FIB_TABLE_LOOKUP_6X),
            TracepointLayout::parse(FIB6_TABLE_LOOKUP_6X),
        )
    }

    /// Decodes raw bytes that start at record offset 8 (after the common tracepoint header).
    pub fn decode_v4(&self, raw: &[u8]) -> RouteLookup {
        let l = &self.v4;
        let ip4 = |name| {
            l.bytes(raw, 8, name)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(Ipv4Addr::from)
                .unwrap_or(Ipv4Addr::UNSPECIFIED)
        };
        let gw = ip4("gw4");
        RouteLookup {
            family: "inet".into(),
            dst: ipv4_text(ip4("dst")),
            src: ipv4_text(ip4("src")),
            table: table_name(l.int(raw, 8, "tb_id", false).unwrap_or(0) as u32),
            route_type: None,
            oif: l.bytes(raw, 8, "name").map(c_string).unwrap_or_default(),
            gateway: (!gw.is_unspecified()).then(|| ipv4_text(gw)),
            err: l.int(raw, 8, "err", true).unwrap_or(0) as i32,
        }
    }

    /// IPv6 variant of [`Self::decode_v4`].
    pub fn decode_v6(&self, raw: &[u8]) -> RouteLookup {
        let l = &self.v6;
        let ip6 = |name| {
            l.bytes(raw, 8, name)
                .and_then(|b| <[u8; 16]>::try_from(b).ok())
                .map(Ipv6Addr::from)
                .unwrap_or(Ipv6Addr::UNSPECIFIED)
        };
        let gw = ip6("gw");
        RouteLookup {
            family: "inet6".into(),
            dst: ip_text(ip6("dst")),
            src: ip_text(ip6("src")),
            table: table_name(l.int(raw, 8, "tb_id", false).unwrap_or(0) as u32),
            route_type: l
                .int(raw, 8, "rt_type", false)
                .map(|t| route_type_name(t as u8)),
            oif: l.bytes(raw, 8, "name").map(c_string).unwrap_or_default(),
            gateway: (!gw.is_unspecified()).then(|| ip_text(gw)),
            err: l.int(raw, 8, "err", true).unwrap_or(0) as i32,
        }
    }
}

/// The result an IPv6 lookup's route type stands for, as the kernel's `ip6_rt_type_to_error`
/// (what the classic `fib6_table_lookup` tracepoint reports as `err`).
fn ipv6_route_type_error(route_type: u8) -> i32 {
    match route_type {
        6 | 10 | 11 => -22, // blackhole, nat, xresolve: -EINVAL
        7 => -113,          // unreachable: -EHOSTUNREACH
        8 => -13,           // prohibit: -EACCES
        9 => -11,           // throw: -EAGAIN
        _ => 0,
    }
}

/// Decodes a record of the raw route-lookup programs into what the classic tracepoints give:
/// the device is `-` when the lookup had no next hop.
pub fn decode_record(r: &RouteLookupRecord) -> RouteLookup {
    let v6 = r.header.kind == KIND_ROUTE_LOOKUP6;
    let v4 = |b: &[u8; 16]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
    let addr = |b: &[u8; 16]| {
        if v6 {
            ip_text(Ipv6Addr::from(*b))
        } else {
            ipv4_text(v4(b))
        }
    };
    let gateway = match r.gw_family {
        2 if v4(&r.gw) != Ipv4Addr::UNSPECIFIED => Some(ipv4_text(v4(&r.gw))),
        10 if Ipv6Addr::from(r.gw) != Ipv6Addr::UNSPECIFIED => Some(ip_text(Ipv6Addr::from(r.gw))),
        _ => None,
    };
    let dev = c_string(&r.dev);
    RouteLookup {
        family: if v6 { "inet6" } else { "inet" }.into(),
        dst: addr(&r.dst),
        src: addr(&r.src),
        table: table_name(r.table),
        route_type: v6.then(|| route_type_name(r.route_type)),
        oif: if r.flags & route_lookup_flags::NEXTHOP == 0 || dev.is_empty() {
            "-".into()
        } else {
            dev
        },
        gateway,
        err: if v6 {
            ipv6_route_type_error(r.route_type)
        } else {
            r.err
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodeip_trace_common::{EventHeader, KIND_ROUTE_LOOKUP4};

    fn record(kind: u32) -> RouteLookupRecord {
        RouteLookupRecord {
            header: EventHeader {
                kind,
                netns: 0,
                ts_ns: 0,
                pid_tgid: 0,
                cgroup_id: 0,
                comm: [0; 16],
            },
            table: 254,
            err: 0,
            route_type: 0,
            gw_family: 0,
            flags: 0,
            _pad: 0,
            src: [0; 16],
            dst: [0; 16],
            gw: [0; 16],
            dev: [0; 16],
        }
    }

    #[test]
    fn decodes_a_raw_v4_lookup_with_gateway() {
        let mut r = record(KIND_ROUTE_LOOKUP4);
        r.dst[..4].copy_from_slice(&[198, 51, 100, 7]);
        r.flags = route_lookup_flags::NEXTHOP;
        r.gw_family = 2;
        r.gw[..4].copy_from_slice(&[10, 0, 0, 1]);
        r.dev[..4].copy_from_slice(b"eth0");
        let l = decode_record(&r);
        assert_eq!(l.family, "inet");
        assert_eq!(
            (l.dst.as_str(), l.src.as_str()),
            ("198.51.100.7", "0.0.0.0")
        );
        assert_eq!(l.table, "main");
        assert_eq!(l.route_type, None);
        assert_eq!(l.oif, "eth0");
        assert_eq!(l.gateway.as_deref(), Some("10.0.0.1"));
        assert_eq!(l.err, 0);
    }

    #[test]
    fn a_raw_v4_lookup_without_next_hop_has_device_dash() {
        let mut r = record(KIND_ROUTE_LOOKUP4);
        r.table = 255;
        r.err = -11;
        let l = decode_record(&r);
        assert_eq!(
            (l.oif.as_str(), l.table.as_ref(), l.err),
            ("-", "local", -11)
        );
        assert_eq!(l.gateway, None);
    }

    #[test]
    fn a_raw_v6_lookup_takes_its_result_from_the_route_type() {
        let mut r = record(KIND_ROUTE_LOOKUP6);
        r.dst[0] = 0x20;
        r.dst[1] = 0x01;
        r.dst[15] = 5;
        r.route_type = 7;
        r.flags = route_lookup_flags::NEXTHOP;
        r.dev[..2].copy_from_slice(b"lo");
        r.gw_family = 10;
        r.gw[0] = 0xfe;
        r.gw[1] = 0x80;
        r.gw[15] = 1;
        let l = decode_record(&r);
        assert_eq!(l.family, "inet6");
        assert_eq!((l.dst.as_str(), l.src.as_str()), ("2001::5", "::"));
        assert_eq!(l.route_type.as_deref(), Some("unreachable"));
        assert_eq!(l.err, -113);
        assert_eq!(l.oif, "lo");
        assert_eq!(l.gateway.as_deref(), Some("fe80::1"));
        assert_eq!(ipv6_route_type_error(1), 0);
        assert_eq!(ipv6_route_type_error(8), -13);
    }

    #[test]
    fn decodes_a_v4_lookup() {
        let mut raw = vec![0u8; 104];
        let put = |raw: &mut Vec<u8>, off: usize, b: &[u8]| {
            raw[off - 8..off - 8 + b.len()].copy_from_slice(b)
        };
        put(&mut raw, 8, &255u32.to_le_bytes());
        put(&mut raw, 28, &[0, 0, 0, 0]);
        put(&mut raw, 32, &[192, 0, 2, 20]);
        put(&mut raw, 60, b"lo\0");
        let r = RouteLookupDecoder::default().decode_v4(&raw);
        assert_eq!(r.table, "local");
        assert_eq!(r.dst, "192.0.2.20");
        assert_eq!(r.src, "0.0.0.0");
        assert_eq!(r.oif, "lo");
        assert_eq!(r.gateway, None);
        assert_eq!(r.err, 0);
    }

    #[test]
    fn decodes_a_v6_lookup_with_type() {
        let mut raw = vec![0u8; 104];
        raw[8 - 8..12 - 8].copy_from_slice(&254u32.to_le_bytes());
        raw[12 - 8..16 - 8].copy_from_slice(&(-113i32).to_le_bytes());
        raw[47 - 8] = 0x20;
        raw[47 - 8 + 1] = 0x01;
        raw[47 - 8 + 15] = 5;
        raw[69 - 8] = 7;
        let r = RouteLookupDecoder::default().decode_v6(&raw);
        assert_eq!(r.dst, "2001::5");
        assert_eq!(r.table, "main");
        assert_eq!(r.route_type.as_deref(), Some("unreachable"));
        assert_eq!(r.err, -113);
        assert_eq!(table_name(1000), "1000");
    }
}
