//! The own link attribute walker against netlink-packet-route: over every link message of the
//! real captures and over mangled copies of them (values, types and lengths rewritten, bodies
//! cut), whenever the walker gives a record the crate gives the same one; and the real messages
//! all take the walker.
use super::captures::Xorshift;
use super::{attr, captured_rtnetlink, mangled_copies, nest};
use crate::decode::netlink::attributes::{align4, read_u16};
use crate::decode::netlink::rtnetlink::link_body_by_crate;
use crate::decode::netlink::rtnetlink::link_walker::link_body;

/// `(type, payload)` of every `RTM_*LINK` message of the captures.
fn captured_link_messages() -> Vec<(u16, Vec<u8>)> {
    captured_rtnetlink(16..=19, 16)
}

/// Byte offsets of the attributes of a link payload (after the 16-byte `ifinfomsg`), and of
/// those nested in `IFLA_AF_SPEC` (26) and its per-family lists.
fn attribute_offsets(payload: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    attributes_in(payload, 16, payload.len(), 0, &mut offsets);
    offsets
}

/// The attribute offsets from `at` to `end` of `payload`, `depth` levels inside `IFLA_AF_SPEC`.
fn attributes_in(payload: &[u8], mut at: usize, end: usize, depth: u8, out: &mut Vec<usize>) {
    while let (Some(len), Some(kind)) = (read_u16(payload, at), read_u16(payload, at + 2)) {
        let len = usize::from(len);
        if len < 4 || at + len > end {
            break;
        }
        out.push(at);
        if (depth == 0 && kind & 0x3fff == 26) || depth == 1 {
            attributes_in(payload, at + 4, at + len, depth + 1, out);
        }
        at += align4(len);
    }
}

/// Whether the walker gave a record for `payload` (the test fails unless the crate gives the
/// same one); `false` when it handed the body back to the crate.
fn agrees(kind: u16, payload: &[u8]) -> bool {
    let Some(walked) = link_body(payload) else {
        return false;
    };
    let parsed = link_body_by_crate(payload, kind);
    assert_eq!(
        Some(&walked),
        parsed.as_ref(),
        "type {kind} payload {payload:02x?}"
    );
    true
}

#[test]
fn every_captured_link_message_takes_the_walker_and_equals_the_crate() {
    let messages = captured_link_messages();
    assert!(messages.len() >= 30, "{}", messages.len());
    for (kind, payload) in &messages {
        assert!(agrees(*kind, payload), "not walked: {payload:02x?}");
    }
}

#[test]
fn mangled_link_messages_equal_the_crate_whenever_walked() {
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    let (mut walked, mut total) = (0usize, 0usize);
    for (kind, payload) in captured_link_messages() {
        let offsets = attribute_offsets(&payload);
        let mut variants = mangled_copies(&payload, 16, &offsets, 72, &mut rng);
        // The header: every family, and random link types.
        for family in 0..=255u8 {
            let mut v = payload.clone();
            v[0] = family;
            v[2..4].copy_from_slice(&(rng.next() as u16).to_ne_bytes());
            variants.push(v);
        }
        for variant in &variants {
            total += 1;
            walked += usize::from(agrees(kind, variant));
        }
    }
    assert!(total > 100_000, "{total}");
    // Many mangled copies are still well-formed enough for the walker (46% when written).
    assert!(walked * 3 > total, "{walked} of {total}");
}

#[test]
fn every_attribute_type_and_size_equals_the_crate() {
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let header = [0u8, 0, 1, 0, 2, 0, 0, 0, 0x43, 0x10, 1, 0, 0, 0, 0, 0];
    for kind in 0..80u16 {
        for len in (0..=12).chain([31, 32, 33, 200]) {
            for fill in [0u8, 0x41, 0xff, 0] {
                let mut value: Vec<u8> = (0..len).map(|_| rng.next() as u8 | fill).collect();
                if fill == 0 && len > 0 {
                    value[len - 1] = 0;
                }
                for family in [0u8, 2, 7, 10, 129] {
                    let mut payload = header.to_vec();
                    payload[0] = family;
                    payload.extend(attr(kind, &value));
                    payload.extend(attr(3, b"eth0\0"));
                    agrees(16, &payload);
                }
            }
        }
    }
}

#[test]
fn every_af_spec_family_attribute_and_size_equals_the_crate() {
    let mut rng = Xorshift(0x5851_f42d_4c95_7f2d);
    let mut walked = 0;
    for family in [0u16, 2, 7, 10, 45, 99] {
        for kind in 0..12u16 {
            for len in (0..=20).chain([200, 300, 600]) {
                let value: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                for message_family in [0u8, 7, 10] {
                    let mut payload =
                        vec![message_family, 0, 1, 0, 2, 0, 0, 0, 3, 0, 1, 0, 0, 0, 0, 0];
                    payload.extend(nest(26, &[nest(family, &[attr(kind, &value)])]));
                    walked += usize::from(agrees(16, &payload));
                    // The family's list empty, or the value given without a nested list.
                    let mut bare = payload[..16].to_vec();
                    bare.extend(nest(26, &[attr(family, &value[..len.min(3)])]));
                    walked += usize::from(agrees(16, &bare));
                }
            }
        }
    }
    assert!(walked > 1000, "{walked}");
}
