//! Go's own resolver's sort, from its ring record: the call as a getaddrinfo-like event (the
//! name, the order the sort left) and the sort's own inputs (the resolver's order and the source
//! of each address, exactly as the sort got them). Pure.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nodeip_trace_common::{go_flags, GoAddrList, GoSortRecord};

use crate::model::getaddrinfo::{AddrinfoResult, GetaddrinfoCall, ResolverKind, SortInputs};

/// The address at `i` of `list` (`None`: no address there, or an invalid one).
fn address(list: &GoAddrList, i: usize) -> Option<IpAddr> {
    let b = list.addrs[i];
    match list.lens[i] {
        4 => Some(Ipv4Addr::new(b[0], b[1], b[2], b[3]).into()),
        16 => {
            let v6 = Ipv6Addr::from(b);
            // Go keeps IPv4 as 16-byte ::ffff:a.b.c.d and prints it as IPv4.
            Some(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4))
        }
        _ => None,
    }
}

/// Decodes a Go sort record: the call, and the sort's inputs.
pub fn decode_go_sort(rec: &GoSortRecord) -> (GetaddrinfoCall, SortInputs) {
    let n = (rec.count as usize).min(rec.unsorted.lens.len());
    let order: Vec<IpAddr> = (0..n).filter_map(|i| address(&rec.unsorted, i)).collect();
    let sources: Vec<Option<IpAddr>> = (0..n).map(|i| address(&rec.sources, i)).collect();
    let sorted: Vec<IpAddr> = (0..n).filter_map(|i| address(&rec.sorted, i)).collect();
    let name_len = (rec.name_len as usize).min(rec.name.len());
    let name = (rec.flags & go_flags::NO_NAME == 0)
        .then(|| String::from_utf8_lossy(&rec.name[..name_len]).into_owned());
    let addresses: Vec<String> = sorted.iter().map(|a| a.to_string()).collect();
    let results = sorted
        .iter()
        .map(|a| AddrinfoResult {
            address: a.to_string(),
            family: if a.is_ipv4() { "AF_INET" } else { "AF_INET6" }.into(),
            socktype: "ANY".into(),
            protocol: 0,
            port: 0,
        })
        .collect();
    let call = GetaddrinfoCall {
        node: name,
        service: None,
        family: "AF_UNSPEC".into(),
        socktype: "ANY".into(),
        flags: Vec::new(),
        ret: "OK".into(),
        ret_code: 0,
        addresses,
        results,
        results_truncated: rec.flags & (go_flags::CUT | go_flags::UNREADABLE) != 0,
        start_ns: rec.start_ns,
        duration_ns: rec.header.ts_ns.saturating_sub(rec.start_ns),
        during: 0,
        resolver: ResolverKind::Go,
        caller: None,
        why: None,
    };
    (call, SortInputs { order, sources })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodeip_trace_common::{go_layout, GO_MAX_ADDRS, GO_NAME_LEN};

    fn list(addrs: &[&[u8]]) -> GoAddrList {
        let mut l = GoAddrList {
            addrs: [[0; 16]; GO_MAX_ADDRS],
            lens: [0; GO_MAX_ADDRS],
        };
        for (i, a) in addrs.iter().enumerate() {
            l.addrs[i][..a.len()].copy_from_slice(a);
            l.lens[i] = a.len() as u8;
        }
        l
    }

    #[test]
    fn a_sort_record_becomes_a_go_call_with_its_inputs() {
        let mut name = [0u8; GO_NAME_LEN];
        name[..6].copy_from_slice(b"node-a");
        let mapped6: [u8; 16] = Ipv4Addr::new(172, 18, 45, 6).to_ipv6_mapped().octets();
        let rec = GoSortRecord {
            header: unsafe { std::mem::zeroed() },
            g: 0xc000_0001,
            addrs_ptr: 0,
            start_ns: 0,
            count: 2,
            layout: go_layout::NETIP_ADDRS,
            name_len: 6,
            flags: 0,
            name,
            unsorted: list(&[&mapped6, &[172, 18, 45, 20]]),
            sources: list(&[&[172, 18, 45, 20], &[]]),
            sorted: list(&[&mapped6, &[172, 18, 45, 20]]),
        };
        let (call, inputs) = decode_go_sort(&rec);
        assert_eq!(call.node.as_deref(), Some("node-a"));
        assert_eq!(call.addresses, ["172.18.45.6", "172.18.45.20"]);
        assert_eq!(call.resolver, ResolverKind::Go);
        assert_eq!(inputs.order.len(), 2);
        assert_eq!(inputs.sources[0], Some("172.18.45.20".parse().unwrap()));
        assert_eq!(inputs.sources[1], None);
    }
}
