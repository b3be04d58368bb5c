//! IP addresses (and the small numbers beside them) as the text events carry, written without
//! `core::fmt`: every route, address and route lookup carries a few, and `Ipv4Addr`'s `Display`
//! reached through `to_string` was 2.45% of the live consumer's CPU per event (its formatter
//! machinery and `u8` padding checks, then a growing `String`).
//!
//! The text is a [`CompactString`]: up to 24 bytes (every IPv4 address, `a.b.c.d/nn`, an
//! interface name, a `comm`) it lives inline, so making, cloning and dropping it allocates
//! nothing. Allocations were ≈ 40 per traced route get, 5 of them address texts and more their
//! copies into facts and tasks.
use std::net::{IpAddr, Ipv4Addr};

use compact_str::CompactString;

/// `a.b.c.d`: the same text as `Ipv4Addr`'s `Display`, made on the stack from each octet's
/// digits (a table), kept inline.
pub fn ipv4_text(addr: Ipv4Addr) -> CompactString {
    let mut text = [0u8; 15];
    let mut len = 0;
    for (i, octet) in addr.octets().into_iter().enumerate() {
        if i > 0 {
            text[len] = b'.';
            len += 1;
        }
        let (digits, count) = OCTET_DIGITS[usize::from(octet)];
        text[len..len + 3].copy_from_slice(&digits);
        len += usize::from(count);
    }
    debug_assert!(text[..len].is_ascii());
    // SAFETY: every byte of `text[..len]` is an ASCII digit or dot, written above.
    CompactString::from(unsafe { std::str::from_utf8_unchecked(&text[..len]) })
}

/// Each octet's decimal digits (left-aligned, padded with zeros past them) and their count.
static OCTET_DIGITS: [([u8; 3], u8); 256] = {
    let mut table = [([0u8; 3], 0u8); 256];
    let mut n = 0;
    while n < 256 {
        let (h, t, o) = ((n / 100) as u8, (n / 10 % 10) as u8, (n % 10) as u8);
        table[n] = if n >= 100 {
            ([b'0' + h, b'0' + t, b'0' + o], 3)
        } else if n >= 10 {
            ([b'0' + t, b'0' + o, 0], 2)
        } else {
            ([b'0' + o, 0, 0], 1)
        };
        n += 1;
    }
    table
};

/// The text of an address of either family, as its `Display` writes it: IPv4 by [`ipv4_text`],
/// IPv6 by `Display` itself (its zero-run compression is not worth a second copy, and IPv6
/// addresses are the rarer ones here).
pub fn ip_text(addr: impl Into<IpAddr>) -> CompactString {
    match addr.into() {
        IpAddr::V4(v4) => ipv4_text(v4),
        IpAddr::V6(v6) => compact_str::format_compact!("{v6}"),
    }
}

/// The texts of `addrs`, in order, as the `String`s of a getaddrinfo-like call's address lists.
pub fn ip_texts(addrs: impl IntoIterator<Item = IpAddr>) -> Vec<String> {
    addrs.into_iter().map(|a| ip_text(a).into()).collect()
}

/// `addrs` as people read a list of them: `10.0.0.6, 10.0.0.20`.
pub fn ip_list(addrs: &[IpAddr]) -> String {
    ip_texts(addrs.iter().copied()).join(", ")
}

/// Appends `value` in decimal, unpadded (`format!("{value}")` without the formatter).
pub fn push_decimal(out: &mut CompactString, mut value: u32) {
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
        let every_octet = (0..=255u8).map(|n| [n, 255 - n, n / 3, n.wrapping_mul(7)]);
        for octets in [
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [10, 9, 0, 1],
            [1, 20, 100, 9],
            [172, 18, 45, 206],
        ]
        .into_iter()
        .chain(every_octet)
        {
            let addr = Ipv4Addr::from(octets);
            assert_eq!(ipv4_text(addr), addr.to_string());
            assert_eq!(ip_text(addr), addr.to_string());
        }
        let v6: Ipv6Addr = "fd00::1:0:0:5".parse().unwrap();
        assert_eq!(ip_text(v6), v6.to_string());
        for value in [0, 7, 10, 99, 128, 4_294_967_295] {
            let mut out = CompactString::from("x/");
            push_decimal(&mut out, value);
            assert_eq!(out, format!("x/{value}"));
        }
    }
}
