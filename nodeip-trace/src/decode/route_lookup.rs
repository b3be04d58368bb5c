//! Raw `fib:fib_table_lookup` / `fib6:fib6_table_lookup` bytes → [`RouteLookup`].
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::decode::netlink::{route_type_name, table_name};
use crate::decode::record::c_string;
use crate::decode::tracepoint_format::{
    TracepointLayout, FIB6_TABLE_LOOKUP_6X, FIB_TABLE_LOOKUP_6X,
};
use crate::event::RouteLookup;

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
            dst: ip4("dst").to_string(),
            src: ip4("src").to_string(),
            table: table_name(l.int(raw, 8, "tb_id", false).unwrap_or(0) as u32),
            route_type: None,
            oif: l.bytes(raw, 8, "name").map(c_string).unwrap_or_default(),
            gateway: (!gw.is_unspecified()).then(|| gw.to_string()),
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
            dst: ip6("dst").to_string(),
            src: ip6("src").to_string(),
            table: table_name(l.int(raw, 8, "tb_id", false).unwrap_or(0) as u32),
            route_type: l
                .int(raw, 8, "rt_type", false)
                .map(|t| route_type_name(t as u8)),
            oif: l.bytes(raw, 8, "name").map(c_string).unwrap_or_default(),
            gateway: (!gw.is_unspecified()).then(|| gw.to_string()),
            err: l.int(raw, 8, "err", true).unwrap_or(0) as i32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
