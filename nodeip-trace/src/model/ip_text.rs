//! IP addresses (and the small numbers beside them) as the text events carry, written without
//! `core::fmt`: every route, address and route lookup carries a few, and `Ipv4Addr`'s `Display`
//! reached through `to_string` was 2.45% of the live consumer's CPU per event (its formatter
//! machinery and `u8` padding checks, then a growing `String`).
use std::net::{IpAddr, Ipv4Addr};

/// `a.b.c.d`: the same text as `Ipv4Addr`'s `Display`, in one allocation of its final size.
pub fn ipv4_text(addr: Ipv4Addr) -> String {
    let mut out = String::with_capacity(15);
    for (i, octet) in addr.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        push_decimal(&mut out, octet.into());
    }
    out
}

/// The text of an address of either family, as its `Display` writes it: IPv4 by [`ipv4_text`],
/// IPv6 by `Display` itself (its zero-run compression is not worth a second copy, and IPv6
/// addresses are the rarer ones here).
pub fn ip_text(addr: impl Into<IpAddr>) -> String {
    match addr.into() {
        IpAddr::V4(v4) => ipv4_text(v4),
        IpAddr::V6(v6) => v6.to_string(),
    }
}

/// Appends `value` in decimal, unpadded (`format!("{value}")` without the formatter).
pub fn push_decimal(out: &mut String, mut value: u32) {
    let mut digits = [0u8; 10];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    for &digit in &digits[start..] {
        out.push(char::from(digit));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn writes_what_display_writes() {
        for octets in [
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [10, 9, 0, 1],
            [1, 20, 100, 9],
            [172, 18, 45, 206],
        ] {
            let addr = Ipv4Addr::from(octets);
            assert_eq!(ipv4_text(addr), addr.to_string());
            assert_eq!(ip_text(addr), addr.to_string());
        }
        let v6: Ipv6Addr = "fd00::1:0:0:5".parse().unwrap();
        assert_eq!(ip_text(v6), v6.to_string());
        for value in [0, 7, 10, 99, 128, 4_294_967_295] {
            let mut out = String::from("x/");
            push_decimal(&mut out, value);
            assert_eq!(out, format!("x/{value}"));
        }
    }
}
