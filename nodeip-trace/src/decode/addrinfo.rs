//! getaddrinfo records → [`GetaddrinfoCall`]: names for families, socket types, flags and
//! EAI_* return codes, and the result list in the order libc returned it.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nodeip_trace_common::{
    gai_flags, gai_socket_call, gai_socket_flags, GaiSocketRecord, GetaddrinfoRecord,
};

use crate::decode::record::c_string;
use crate::model::getaddrinfo::{AddrinfoResult, GetaddrinfoCall};
use crate::model::getaddrinfo::{GaiSocketOp, ResolverCaller, ResolverKind};
use crate::model::ip_text::ip_text;

/// `AF_*` name of an address family number.
pub fn family_name(family: i32) -> String {
    match family {
        0 => "AF_UNSPEC".into(),
        2 => "AF_INET".into(),
        10 => "AF_INET6".into(),
        n => n.to_string(),
    }
}

/// `SOCK_*` name of a socket type (0 = any).
pub fn socktype_name(socktype: i32) -> String {
    match socktype {
        0 => "ANY".into(),
        1 => "SOCK_STREAM".into(),
        2 => "SOCK_DGRAM".into(),
        3 => "SOCK_RAW".into(),
        n => n.to_string(),
    }
}

/// glibc `AI_*` flag names set in `flags`; unknown bits as hex.
pub fn ai_flag_names(flags: i32) -> Vec<String> {
    const NAMES: [(i32, &str); 11] = [
        (0x1, "AI_PASSIVE"),
        (0x2, "AI_CANONNAME"),
        (0x4, "AI_NUMERICHOST"),
        (0x8, "AI_V4MAPPED"),
        (0x10, "AI_ALL"),
        (0x20, "AI_ADDRCONFIG"),
        (0x40, "AI_IDN"),
        (0x80, "AI_CANONIDN"),
        (0x100, "AI_IDN_ALLOW_UNASSIGNED"),
        (0x200, "AI_IDN_USE_STD3_ASCII_RULES"),
        (0x400, "AI_NUMERICSERV"),
    ];
    let mut out: Vec<String> = NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    let known: i32 = NAMES.iter().map(|(b, _)| b).sum();
    if flags & !known != 0 {
        out.push(format!("{:#x}", flags & !known));
    }
    out
}

/// glibc's name for a getaddrinfo return code (`OK` for 0).
pub fn eai_name(ret: i32) -> String {
    match ret {
        0 => "OK",
        -1 => "EAI_BADFLAGS",
        -2 => "EAI_NONAME",
        -3 => "EAI_AGAIN",
        -4 => "EAI_FAIL",
        -5 => "EAI_NODATA",
        -6 => "EAI_FAMILY",
        -7 => "EAI_SOCKTYPE",
        -8 => "EAI_SERVICE",
        -9 => "EAI_ADDRFAMILY",
        -10 => "EAI_MEMORY",
        -11 => "EAI_SYSTEM",
        -12 => "EAI_OVERFLOW",
        -100 => "EAI_INPROGRESS",
        -101 => "EAI_CANCELED",
        -102 => "EAI_NOTCANCELED",
        -103 => "EAI_ALLDONE",
        -104 => "EAI_INTR",
        -105 => "EAI_IDN_ENCODE",
        _ => return format!("EAI_{ret}"),
    }
    .into()
}

/// Decodes a getaddrinfo record (pure).
pub fn decode_getaddrinfo(rec: &GetaddrinfoRecord) -> GetaddrinfoCall {
    let count = (rec.count as usize).min(rec.results.len());
    let mut results = Vec::with_capacity(count);
    let mut addresses: Vec<String> = Vec::new();
    for entry in &rec.results[..count] {
        let sockaddr = &entry.sockaddr[..(entry.addrlen as usize).min(entry.sockaddr.len())];
        // An address the probe could not read shows as its family's unspecified one.
        let ip = sockaddr_ip(sockaddr).unwrap_or(if entry.family == 10 {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        });
        let address = String::from(ip_text(ip));
        if !addresses.contains(&address) {
            addresses.push(address.clone());
        }
        results.push(AddrinfoResult {
            address,
            family: family_name(entry.family as i32),
            socktype: socktype_name(entry.socktype as i32),
            protocol: entry.protocol,
            port: sockaddr
                .get(2..4)
                .map_or(0, |p| u16::from_be_bytes([p[0], p[1]])),
        });
    }
    let hints = rec.flags & gai_flags::HINTS_NULL == 0;
    GetaddrinfoCall {
        node: (rec.flags & gai_flags::NODE_NULL == 0).then(|| c_string(&rec.node).into()),
        service: (rec.flags & gai_flags::SERVICE_NULL == 0).then(|| c_string(&rec.service).into()),
        family: family_name(if hints { rec.hints_family } else { 0 }),
        socktype: socktype_name(if hints { rec.hints_socktype } else { 0 }),
        flags: if hints {
            ai_flag_names(rec.hints_flags)
        } else {
            // glibc's default for NULL hints.
            vec!["AI_V4MAPPED".into(), "AI_ADDRCONFIG".into()]
        },
        ret: eai_name(rec.ret),
        ret_code: rec.ret,
        addresses,
        results,
        results_truncated: rec.flags & (gai_flags::RESULTS_CUT | gai_flags::RESULTS_UNREADABLE)
            != 0,
        start_ns: rec.start_ns,
        duration_ns: rec.header.ts_ns.saturating_sub(rec.start_ns),
        during: 0,
        resolver: ResolverKind::from_record(rec.resolver),
        caller: (rec.resolver & nodeip_trace_common::resolver::VIA_GO_CGO != 0)
            .then_some(ResolverCaller::GoCgo),
        limited: None,
        why: None,
    }
}

/// The IP address in a `sockaddr_in`/`sockaddr_in6` as the kernel lays them out (family in host
/// order at byte 0; IPv4 at 4..8, IPv6 at 8..24); `None` for other families or short input.
pub fn sockaddr_ip(sa: &[u8]) -> Option<IpAddr> {
    let family = u16::from_ne_bytes([*sa.first()?, *sa.get(1)?]);
    match family {
        2 => {
            let a: [u8; 4] = sa.get(4..8)?.try_into().ok()?;
            Some(Ipv4Addr::from(a).into())
        }
        10 => {
            let a: [u8; 16] = sa.get(8..24)?.try_into().ok()?;
            Some(Ipv6Addr::from(a).into())
        }
        _ => None,
    }
}

/// Decodes a `connect`/`getsockname` record made inside getaddrinfo (pure).
pub fn decode_gai_socket(rec: &GaiSocketRecord) -> GaiSocketOp {
    let len = (rec.sockaddr_len as usize).min(rec.sockaddr.len());
    let before_call = rec.flags & gai_socket_flags::BEFORE_CALL != 0;
    GaiSocketOp {
        connect: rec.call == gai_socket_call::CONNECT,
        ret: (!before_call).then_some(rec.ret),
        socket: if before_call {
            rec.socket_cookie
        } else {
            u64::from(rec.fd as u32)
        },
        addr: sockaddr_ip(&rec.sockaddr[..len]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_of_both_families_and_others() {
        let mut v4 = [0u8; 28];
        v4[..2].copy_from_slice(&2u16.to_ne_bytes());
        v4[2..4].copy_from_slice(&53u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[172, 18, 45, 20]);
        assert_eq!(sockaddr_ip(&v4), Some("172.18.45.20".parse().unwrap()));
        let mut v6 = [0u8; 28];
        v6[..2].copy_from_slice(&10u16.to_ne_bytes());
        v6[8..24].copy_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(sockaddr_ip(&v6), Some("2001:db8::9".parse().unwrap()));
        assert_eq!(
            sockaddr_ip(&[0u8; 28]),
            None,
            "AF_UNSPEC (glibc's disconnect)"
        );
        assert_eq!(sockaddr_ip(&v6[..20]), None, "short");
        assert_eq!(sockaddr_ip(&[]), None);
        let rec = GaiSocketRecord {
            // SAFETY: a plain record header; all zeroes is a valid value.
            header: unsafe { std::mem::zeroed() },
            call: gai_socket_call::GETSOCKNAME,
            ret: 0,
            fd: 3,
            sockaddr_len: 0,
            sockaddr: v4,
            flags: 0,
            socket_cookie: 0,
        };
        assert_eq!(
            decode_gai_socket(&rec).addr,
            None,
            "unread bytes are not used"
        );
        let read = GaiSocketRecord {
            sockaddr_len: 28,
            ..rec
        };
        let op = decode_gai_socket(&read);
        assert!(!op.connect);
        assert_eq!(op.addr, Some("172.18.45.20".parse().unwrap()));
        assert_eq!(
            (op.ret, op.socket),
            (Some(0), 3),
            "a syscall hook's call and descriptor"
        );
        let hooked = GaiSocketRecord {
            call: gai_socket_call::CONNECT,
            fd: -1,
            flags: gai_socket_flags::BEFORE_CALL,
            socket_cookie: 0x1234_5678_9abc,
            ..read
        };
        let op = decode_gai_socket(&hooked);
        assert!(op.connect);
        assert_eq!(
            (op.ret, op.socket),
            (None, 0x1234_5678_9abc),
            "a cgroup hook's call has no outcome yet and names its socket by cookie"
        );
    }
    use nodeip_trace_common::{AddrinfoEntry, EventHeader, GAI_MAX_RESULTS, GAI_SOCKADDR_LEN};

    /// A result as the probe copies it: `addr` in a `sockaddr_in` or `sockaddr_in6`, port 80.
    fn entry(family: u32, socktype: u32, addr: &[u8]) -> AddrinfoEntry {
        let mut sockaddr = [0u8; GAI_SOCKADDR_LEN];
        sockaddr[..2].copy_from_slice(&(family as u16).to_ne_bytes());
        sockaddr[2..4].copy_from_slice(&80u16.to_be_bytes());
        let (at, addrlen) = if family == 10 { (8, 28) } else { (4, 16) };
        sockaddr[at..at + addr.len()].copy_from_slice(addr);
        AddrinfoEntry {
            family,
            socktype,
            protocol: 6,
            addrlen,
            sockaddr: if addr.is_empty() {
                [0; GAI_SOCKADDR_LEN]
            } else {
                sockaddr
            },
        }
    }

    fn record() -> GetaddrinfoRecord {
        let mut node = [0u8; 256];
        node[..8].copy_from_slice(b"node-a.x");
        let empty = entry(0, 0, &[]);
        let mut results = [empty; GAI_MAX_RESULTS];
        results[0] = entry(2, 1, &[172, 18, 45, 20]);
        results[1] = entry(2, 2, &[172, 18, 45, 20]);
        results[2] = entry(2, 1, &[172, 18, 45, 6]);
        let mut v6 = [0u8; 16];
        v6[0] = 0xfd;
        v6[15] = 1;
        results[3] = entry(10, 1, &v6);
        GetaddrinfoRecord {
            header: EventHeader {
                kind: 1,
                netns: 0,
                ts_ns: 1_500,
                pid_tgid: 0,
                cgroup_id: 0,
                comm: [0; 16],
            },
            start_ns: 1_000,
            ret: 0,
            flags: gai_flags::SERVICE_NULL,
            hints_flags: 0x20 | 0x8,
            hints_family: 2,
            hints_socktype: 0,
            hints_protocol: 0,
            count: 4,
            resolver: 0,
            node,
            service: [0; 64],
            results,
        }
    }

    #[test]
    fn keeps_returned_order_and_dedupes_addresses() {
        let call = decode_getaddrinfo(&record());
        assert_eq!(call.node.as_deref(), Some("node-a.x"));
        assert_eq!(call.service, None);
        assert_eq!(call.family, "AF_INET");
        assert_eq!(call.flags, vec!["AI_V4MAPPED", "AI_ADDRCONFIG"]);
        assert_eq!(call.ret, "OK");
        assert_eq!(
            call.addresses,
            vec!["172.18.45.20", "172.18.45.6", "fd00::1"]
        );
        assert_eq!(call.results.len(), 4);
        assert_eq!(call.results[1].socktype, "SOCK_DGRAM");
        assert_eq!(call.results[0].port, 80);
        assert_eq!(call.duration_ns, 500);
        assert!(!call.results_truncated);
    }

    #[test]
    fn ports_come_from_either_family_and_an_unread_address_is_unspecified() {
        let mut r = record();
        r.results[1] = entry(10, 1, &[]);
        r.results[2] = entry(2, 1, &[]);
        let call = decode_getaddrinfo(&r);
        assert_eq!(call.results[1].address, "::");
        assert_eq!(call.results[1].port, 0);
        assert_eq!(call.results[2].address, "0.0.0.0");
        assert_eq!(call.results[3].address, "fd00::1");
        assert_eq!(call.results[3].port, 80);
    }

    #[test]
    fn failed_call_has_no_addresses_and_a_name() {
        let mut r = record();
        r.ret = -2;
        r.count = 0;
        let call = decode_getaddrinfo(&r);
        assert_eq!(call.ret, "EAI_NONAME");
        assert!(call.addresses.is_empty());
        assert_eq!(eai_name(-77), "EAI_-77");
    }

    #[test]
    fn count_larger_than_array_is_clamped() {
        let mut r = record();
        r.count = 1000;
        r.flags |= gai_flags::RESULTS_CUT;
        let call = decode_getaddrinfo(&r);
        assert_eq!(call.results.len(), GAI_MAX_RESULTS);
        assert!(call.results_truncated);
    }

    #[test]
    fn unknown_flag_bits_are_kept() {
        assert_eq!(
            ai_flag_names(0x1 | 0x4000),
            vec!["AI_PASSIVE".to_string(), "0x4000".into()]
        );
    }
}
