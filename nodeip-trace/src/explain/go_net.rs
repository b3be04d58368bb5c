//! Go's `net.IP` classification, as the Go programs whose address choices `explain` replays
//! (kubelet, calico-node, Go's own resolver) apply it: `To4`, `IsLoopback`, `IsMulticast`,
//! `IsLinkLocalUnicast`, `IsUnspecified`, `IsGlobalUnicast` and `Equal` in Go's `src/net/ip.go`,
//! and the forgiving parser Kubernetes reads its flags with (`ParseIPSloppy` in
//! `k8s.io/utils/net`, Go 1.16's `net.ParseIP`). An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
//! is IPv4 to every one of them, as `To4` makes it in Go.
use std::net::{IpAddr, Ipv4Addr};

/// Go's `ip.To4()`: the IPv4 address of an IPv4 or `::ffff:a.b.c.d` address.
pub fn to4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// Go's `ip.To4() != nil`.
pub fn is_ipv4(ip: IpAddr) -> bool {
    to4(ip).is_some()
}

/// Go's `IsLoopback`: 127.0.0.0/8, `::1`.
pub fn is_loopback(ip: IpAddr) -> bool {
    match (to4(ip), ip) {
        (Some(v4), _) => v4.octets()[0] == 127,
        (None, IpAddr::V6(v6)) => v6.is_loopback(),
        (None, IpAddr::V4(_)) => false,
    }
}

/// Go's `IsMulticast`: 224.0.0.0/4, `ff00::/8`.
pub fn is_multicast(ip: IpAddr) -> bool {
    match (to4(ip), ip) {
        (Some(v4), _) => v4.octets()[0] & 0xf0 == 0xe0,
        (None, IpAddr::V6(v6)) => v6.octets()[0] == 0xff,
        (None, IpAddr::V4(_)) => false,
    }
}

/// Go's `IsLinkLocalUnicast`: 169.254.0.0/16, `fe80::/10`.
pub fn is_link_local_unicast(ip: IpAddr) -> bool {
    match (to4(ip), ip) {
        (Some(v4), _) => v4.octets()[..2] == [169, 254],
        (None, IpAddr::V6(v6)) => v6.segments()[0] & 0xffc0 == 0xfe80,
        (None, IpAddr::V4(_)) => false,
    }
}

/// Go's `IsUnspecified`: 0.0.0.0 (also as `::ffff:0.0.0.0`), `::`.
pub fn is_unspecified(ip: IpAddr) -> bool {
    match (to4(ip), ip) {
        (Some(v4), _) => v4.is_unspecified(),
        (None, IpAddr::V6(v6)) => v6.is_unspecified(),
        (None, IpAddr::V4(_)) => false,
    }
}

/// Go's `IsGlobalUnicast`: none of the above and not the IPv4 limited broadcast address
/// (private and ULA addresses are global unicast to Go).
pub fn is_global_unicast(ip: IpAddr) -> bool {
    to4(ip) != Some(Ipv4Addr::BROADCAST)
        && !is_unspecified(ip)
        && !is_loopback(ip)
        && !is_multicast(ip)
        && !is_link_local_unicast(ip)
}

/// Why Go's `IsGlobalUnicast` says no, in Go's words; `None` for a global unicast address.
pub fn not_global_because(ip: IpAddr) -> Option<&'static str> {
    if to4(ip) == Some(Ipv4Addr::BROADCAST) {
        Some("the limited broadcast address")
    } else if is_unspecified(ip) {
        Some("unspecified")
    } else if is_loopback(ip) {
        Some("loopback")
    } else if is_multicast(ip) {
        Some("multicast")
    } else if is_link_local_unicast(ip) {
        Some("link-local")
    } else {
        None
    }
}

/// Go's `a.Equal(b)`: an IPv4 address equals its `::ffff:` form.
pub fn equal(a: IpAddr, b: IpAddr) -> bool {
    match (to4(a), to4(b)) {
        (Some(x), Some(y)) => x == y,
        (None, None) => a == b,
        _ => false,
    }
}

/// `ParseIPSloppy` (k8s.io/utils/net): Go 1.16's `net.ParseIP`, which, unlike Go 1.17's,
/// reads an IPv4 octet with leading zeros as decimal (`010.001.002.003` is 10.1.2.3). IPv6
/// text is read as Go reads it (an embedded IPv4 part with leading zeros is not accepted here).
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if text.contains(':') {
        return None;
    }
    let mut octets = [0u8; 4];
    let mut parts = text.split('.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Go's dtoi: any number of digits, the value at most 255.
        *octet = part
            .bytes()
            .try_fold(0u8, |n, b| n.checked_mul(10)?.checked_add(b - b'0'))?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(IpAddr::V4(Ipv4Addr::from(octets)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn classification_is_go_s() {
        assert!(is_global_unicast(ip("10.0.0.1")));
        assert!(is_global_unicast(ip("fd00::1")));
        assert!(!is_global_unicast(ip("169.254.1.1")));
        assert!(!is_global_unicast(ip("fe80::1")));
        assert!(!is_global_unicast(ip("255.255.255.255")));
        assert!(!is_global_unicast(ip("::ffff:127.0.0.1")));
        assert!(is_unspecified(ip("::ffff:0.0.0.0")));
        assert!(is_multicast(ip("239.1.1.1")) && is_multicast(ip("ff02::1")));
        assert_eq!(not_global_because(ip("169.254.0.5")), Some("link-local"));
        assert!(equal(ip("10.0.0.1"), ip("::ffff:10.0.0.1")));
        assert!(!equal(ip("10.0.0.1"), ip("::a00:1")));
    }

    #[test]
    fn sloppy_parse_reads_leading_zeros_as_decimal() {
        assert_eq!(parse_ip_sloppy("010.001.002.003"), Some(ip("10.1.2.3")));
        assert_eq!(parse_ip_sloppy("10.0.0.0256"), None);
        assert_eq!(parse_ip_sloppy("10.0.0"), None);
        assert_eq!(parse_ip_sloppy("10.0.0.1.2"), None);
        assert_eq!(parse_ip_sloppy("node-1"), None);
        assert_eq!(parse_ip_sloppy("fd00::1"), Some(ip("fd00::1")));
        assert_eq!(parse_ip_sloppy("+1.2.3.4"), None);
    }
}
