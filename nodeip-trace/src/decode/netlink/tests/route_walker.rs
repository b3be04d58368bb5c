//! The own route attribute walker against netlink-packet-route: over every route message of the
//! real captures and over mangled copies of them (values, types and lengths rewritten, bodies
//! cut, every family), whenever the walker gives a record the crate gives the same one; and the
//! real messages all take the walker.
use super::captures::Xorshift;
use super::{attr, captured_rtnetlink, mangled_copies};
use crate::decode::netlink::attributes::{align4, read_u16};
use crate::decode::netlink::rtnetlink::route_walker::{route_body, RTMSG_LEN};
use crate::decode::netlink::rtnetlink::{finish_route_body, route_body_by_crate};
use crate::decode::netlink::NetlinkDecoder;

/// `(type, payload)` of every `RTM_*ROUTE` message of the captures.
fn captured_route_messages() -> Vec<(u16, Vec<u8>)> {
    captured_rtnetlink(24..=26, RTMSG_LEN)
}

/// Byte offsets of the attributes of a route payload (after the 12-byte `rtmsg`).
fn attribute_offsets(payload: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = RTMSG_LEN;
    while let Some(len) = read_u16(payload, at).map(usize::from) {
        if len < 4 || at + len > payload.len() {
            break;
        }
        offsets.push(at);
        at += align4(len);
    }
    offsets
}

/// Whether the walker gave a record for `payload` (the test fails unless the crate gives the
/// same one); `false` when it handed the body back to the crate.
fn agrees(decoder: &NetlinkDecoder, kind: u16, payload: &[u8]) -> bool {
    let Some((mut walked, table_id)) = route_body(payload) else {
        return false;
    };
    finish_route_body(decoder, &mut walked, table_id);
    let parsed = route_body_by_crate(decoder, payload, kind);
    assert_eq!(
        Some(&walked),
        parsed.as_ref(),
        "type {kind} payload {payload:02x?}"
    );
    true
}

/// A decoder that knows two interfaces, so `oif_name`/`iif_name` are compared too.
fn decoder() -> NetlinkDecoder {
    let mut decoder = NetlinkDecoder::new();
    decoder.set_interface_name(1, "lo");
    decoder.set_interface_name(2, "eth0");
    decoder
}

#[test]
fn every_captured_route_message_takes_the_walker_and_equals_the_crate() {
    let decoder = decoder();
    let messages = captured_route_messages();
    assert!(messages.len() >= 10, "{}", messages.len());
    for (kind, payload) in &messages {
        assert!(
            agrees(&decoder, *kind, payload),
            "not walked: {payload:02x?}"
        );
    }
}

#[test]
fn mangled_route_messages_equal_the_crate_whenever_walked() {
    let decoder = decoder();
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    let (mut walked, mut total) = (0usize, 0usize);
    for (kind, payload) in captured_route_messages() {
        let offsets = attribute_offsets(&payload);
        let mut variants = mangled_copies(&payload, RTMSG_LEN, &offsets, 32, &mut rng);
        // The header: every family, with random types, protocols, scopes, tables and flags.
        for family in 0..=255u8 {
            let mut v = payload.clone();
            v[0] = family;
            v[4..8].copy_from_slice(&(rng.next() as u32).to_ne_bytes());
            v[8..12].copy_from_slice(&(rng.next() as u32).to_ne_bytes());
            variants.push(v);
        }
        for variant in &variants {
            total += 1;
            walked += usize::from(agrees(&decoder, kind, variant));
        }
    }
    assert!(total > 5_000, "{total}");
    assert!(walked * 3 > total, "{walked} of {total}");
}

#[test]
fn every_attribute_type_size_and_family_equals_the_crate() {
    let decoder = decoder();
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut walked = 0;
    for kind in 0..40u16 {
        for len in (0..=20).chain([31, 32, 33, 200]) {
            let value: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            for family in [0u8, 2, 7, 10, 28, 129] {
                for route_type in [1u8, 5] {
                    let mut payload = vec![family, 32, 0, 0, 254, 2, 0, route_type, 0, 0, 0, 0];
                    payload.extend(attr(kind, &value));
                    payload.extend(attr(4, &2u32.to_ne_bytes()));
                    walked += usize::from(agrees(&decoder, 24, &payload));
                }
            }
        }
    }
    assert!(walked > 1000, "{walked}");
}
