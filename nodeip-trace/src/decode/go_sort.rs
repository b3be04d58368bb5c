//! Go's own resolver, from its ring records: a sort's record as a getaddrinfo-like event (the
//! name, the order the sort left) with the sort's own inputs (the resolver's order and the
//! source of each address, exactly as the sort got them); a host lookup's record (`LookupHost`
//! answered from `/etc/hosts`, unsorted) likewise, its order its own input. Pure.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nodeip_trace_common::{go_flags, GoAddrList, GoHostRecord, GoSortRecord};

use crate::model::getaddrinfo::{AddrinfoResult, GetaddrinfoCall, ResolverKind, SortInputs};
use crate::model::ip_text::{ip_text, ip_texts};

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

/// Decodes a Go sort record: the call, and the sort's inputs — none for a lookup in which no
/// sort ran (`NOT_SORTED`: zero or one address, or an error; nothing to explain).
pub fn decode_go_sort(rec: &GoSortRecord) -> (GetaddrinfoCall, Option<SortInputs>) {
    let n = (rec.count as usize).min(rec.unsorted.lens.len());
    if rec.flags & go_flags::NOT_SORTED != 0 {
        let answer: Vec<IpAddr> = (0..n).filter_map(|i| address(&rec.sorted, i)).collect();
        let name = (rec.flags & go_flags::NO_NAME == 0).then(|| name_of(&rec.name, rec.name_len));
        let call = go_call(
            name,
            &answer,
            rec.flags,
            (rec.start_ns, rec.header.ts_ns),
            ResolverKind::Go,
        );
        return (call, None);
    }
    let order: Vec<IpAddr> = (0..n).filter_map(|i| address(&rec.unsorted, i)).collect();
    let no_sources = rec.flags & go_flags::NO_SOURCES != 0;
    // Not read: no sources at all (the explainer then says nothing), not n "no source"s.
    let sources: Vec<Option<IpAddr>> = if no_sources {
        Vec::new()
    } else {
        (0..n).map(|i| address(&rec.sources, i)).collect()
    };
    let sorted: Vec<IpAddr> = (0..n).filter_map(|i| address(&rec.sorted, i)).collect();
    let name = (rec.flags & go_flags::NO_NAME == 0).then(|| name_of(&rec.name, rec.name_len));
    let mut call = go_call(
        name,
        &sorted,
        rec.flags,
        (rec.start_ns, rec.header.ts_ns),
        ResolverKind::Go,
    );
    if no_sources {
        call.limited = Some(
            "this Go version's sort sources are not read (a layout nodeip-trace does not know): the order is shown, not explained"
                .into(),
        );
    }
    (call, Some(SortInputs { order, sources }))
}

/// Decodes a Go host lookup record (`LookupHost`'s `/etc/hosts` answer, unsorted): the call,
/// and its "inputs" — the same order, no sources (nothing was sorted). An address string that
/// is not an address (cut, unreadable) is left out and the call marked cut.
pub fn decode_go_host(rec: &GoHostRecord) -> (GetaddrinfoCall, SortInputs) {
    let n = (rec.count as usize).min(rec.addrs.len());
    let parsed: Vec<Option<IpAddr>> = (0..n)
        .map(|i| {
            let len = (rec.addr_lens[i] as usize).min(rec.addrs[i].len());
            let text = std::str::from_utf8(&rec.addrs[i][..len]).ok()?;
            // Go writes a zone as addr%zone; the address is what is compared.
            text.split('%').next()?.parse().ok()
        })
        .collect();
    let order: Vec<IpAddr> = parsed.iter().flatten().copied().collect();
    let mut flags = rec.flags;
    if order.len() < n {
        flags |= go_flags::UNREADABLE;
    }
    let call = go_call(
        Some(name_of(&rec.name, rec.name_len)),
        &order,
        flags,
        (rec.start_ns, rec.header.ts_ns),
        ResolverKind::GoHosts,
    );
    let sources = vec![None; order.len()];
    (call, SortInputs { order, sources })
}

/// The first `len` bytes of a fixed name buffer, lossily as UTF-8.
fn name_of(name: &[u8], len: u32) -> String {
    String::from_utf8_lossy(&name[..(len as usize).min(name.len())]).into_owned()
}

/// A Go lookup as a getaddrinfo-like call returning `returned`.
fn go_call(
    name: Option<String>,
    returned: &[IpAddr],
    flags: u32,
    (start_ns, end_ns): (u64, u64),
    resolver: ResolverKind,
) -> GetaddrinfoCall {
    let addresses = ip_texts(returned.iter().copied());
    let results = returned
        .iter()
        .map(|a| AddrinfoResult {
            address: ip_text(*a).into(),
            family: if a.is_ipv4() { "AF_INET" } else { "AF_INET6" }.into(),
            socktype: "ANY".into(),
            protocol: 0,
            port: 0,
        })
        .collect();
    let failed = flags & go_flags::FAILED != 0;
    GetaddrinfoCall {
        node: name,
        service: None,
        family: "AF_UNSPEC".into(),
        socktype: "ANY".into(),
        flags: Vec::new(),
        // Go's error (no such host, a timeout, a refused query) is not read, only that there
        // was one.
        ret: if failed { "ERROR" } else { "OK" }.into(),
        ret_code: if failed { -1 } else { 0 },
        addresses,
        results,
        results_truncated: flags & (go_flags::CUT | go_flags::UNREADABLE) != 0,
        start_ns,
        duration_ns: end_ns.saturating_sub(start_ns),
        during: 0,
        resolver,
        caller: None,
        limited: None,
        why: None,
    }
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
            // SAFETY: a plain record header; all zeroes is a valid value.
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
        let inputs = inputs.unwrap();
        assert_eq!(call.node.as_deref(), Some("node-a"));
        assert_eq!(call.addresses, ["172.18.45.6", "172.18.45.20"]);
        assert_eq!(call.resolver, ResolverKind::Go);
        assert_eq!(inputs.order.len(), 2);
        assert_eq!(inputs.sources[0], Some("172.18.45.20".parse().unwrap()));
        assert_eq!(inputs.sources[1], None);
    }

    #[test]
    fn a_host_record_is_an_unsorted_go_lookup_and_bad_strings_are_cut() {
        // SAFETY: a plain record of integers and arrays; all zeroes is a valid value.
        let mut rec: GoHostRecord = unsafe { std::mem::zeroed() };
        rec.name[..6].copy_from_slice(b"node-a");
        rec.name_len = 6;
        for (i, text) in ["10.1.0.6", "fe80::1%eth0", "10.1.0.20", "garbage"]
            .iter()
            .enumerate()
        {
            rec.addrs[i][..text.len()].copy_from_slice(text.as_bytes());
            rec.addr_lens[i] = text.len() as u8;
        }
        rec.count = 4;
        let (call, inputs) = decode_go_host(&rec);
        assert_eq!(call.node.as_deref(), Some("node-a"));
        assert_eq!(call.resolver, ResolverKind::GoHosts);
        assert_eq!(call.addresses, ["10.1.0.6", "fe80::1", "10.1.0.20"]);
        assert!(call.results_truncated);
        assert_eq!(inputs.order.len(), 3);
        assert!(inputs.sources.iter().all(Option::is_none));
        // A length past the buffer or a count past the array does not panic.
        rec.addr_lens[0] = 255;
        rec.count = 1000;
        let _ = decode_go_host(&rec);
    }

    #[test]
    fn a_sort_whose_sources_were_not_read_is_shown_and_says_so() {
        // SAFETY: a plain record of integers and arrays; all zeroes is a valid value.
        let mut rec: GoSortRecord = unsafe { std::mem::zeroed() };
        rec.count = 2;
        rec.flags = go_flags::NO_SOURCES | go_flags::NO_NAME;
        rec.layout = go_layout::UNKNOWN;
        rec.unsorted = list(&[&[10, 0, 0, 1], &[10, 0, 0, 2]]);
        rec.sorted = list(&[&[10, 0, 0, 2], &[10, 0, 0, 1]]);
        let (call, inputs) = decode_go_sort(&rec);
        assert_eq!(call.addresses, ["10.0.0.2", "10.0.0.1"]);
        assert!(call.limited.is_some());
        assert_eq!(call.node, None);
        assert!(inputs.unwrap().sources.is_empty());
    }

    #[test]
    fn a_lookup_no_sort_saw_is_its_answer_or_its_error_with_nothing_to_explain() {
        // SAFETY: a plain record of integers and arrays; all zeroes is a valid value.
        let mut rec: GoSortRecord = unsafe { std::mem::zeroed() };
        rec.name[..9].copy_from_slice(b"localhost");
        rec.name_len = 9;
        rec.count = 1;
        rec.start_ns = 100;
        rec.header.ts_ns = 350;
        rec.flags = go_flags::NOT_SORTED | go_flags::NO_SOURCES;
        rec.sorted = list(&[&[127, 0, 0, 1]]);
        let (call, inputs) = decode_go_sort(&rec);
        assert!(inputs.is_none());
        assert_eq!(call.node.as_deref(), Some("localhost"));
        assert_eq!(call.addresses, ["127.0.0.1"]);
        assert_eq!((call.ret.as_str(), call.ret_code), ("OK", 0));
        assert_eq!(call.duration_ns, 250);
        assert_eq!(call.limited, None);
        rec.count = 0;
        rec.flags |= go_flags::FAILED;
        let (call, _) = decode_go_sort(&rec);
        assert!(call.addresses.is_empty());
        assert_eq!((call.ret.as_str(), call.ret_code), ("ERROR", -1));
    }
}
