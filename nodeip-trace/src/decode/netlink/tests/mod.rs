//! Tests of the netlink decoder: hand-built byte fixtures per message kind (`messages`), IPVS
//! messages built the way libipvs builds them (`ipvs_messages`), and the real nlmon captures
//! with golden JSON and a no-panic fuzz pass (`captures`), and the own link and route attribute
//! walkers against netlink-packet-route over those captures and mangled copies (`link_walker`,
//! `route_walker`). This file holds the tiny netlink encoder the fixtures are written with, and
//! what both walkers' tests read from the captures and how they mangle it.
mod captures;
mod ipvs_messages;
mod link_walker;
mod messages;
mod route_walker;

use crate::decode::netlink::attributes::{align4, read_u16, read_u32};
use captures::{read_nlmon, Xorshift, BUSYBOX, IPROUTE2};

/// `(type, payload)` of every rtnetlink message of the captures with a type in `types`,
/// payloads shorter than `header_len` zero-filled as the decoder reads them.
fn captured_rtnetlink(
    types: std::ops::RangeInclusive<u16>,
    header_len: usize,
) -> Vec<(u16, Vec<u8>)> {
    let mut found = Vec::new();
    for fixture in [BUSYBOX, IPROUTE2] {
        for frame in read_nlmon(fixture).iter().filter(|f| f.protocol == 0) {
            let bytes = &frame.bytes;
            let mut at = 0;
            while let (Some(len), Some(kind)) = (read_u32(bytes, at), read_u16(bytes, at + 4)) {
                let len = len as usize;
                let Some(message) = bytes.get(at..at + len).filter(|_| len >= 16) else {
                    break;
                };
                if types.contains(&kind) {
                    let mut payload = message[16..].to_vec();
                    if payload.len() < header_len {
                        payload.resize(header_len, 0);
                    }
                    found.push((kind, payload));
                }
                at += align4(len);
            }
        }
    }
    found
}

/// Mangled copies of an rtnetlink `payload` (a `header_len`-byte header, then attributes at
/// `offsets`): cut at every byte after the header; each attribute retyped as every type below
/// `types` and a few with flag bits or unknown; its length shortened, lengthened or zero; its
/// value bit-flipped.
fn mangled_copies(
    payload: &[u8],
    header_len: usize,
    offsets: &[usize],
    types: u16,
    rng: &mut Xorshift,
) -> Vec<Vec<u8>> {
    let mut variants: Vec<Vec<u8>> = Vec::new();
    variants.extend((header_len..payload.len()).map(|end| payload[..end].to_vec()));
    for &at in offsets {
        let len = usize::from(read_u16(payload, at).unwrap_or(4));
        for new_kind in (0..types).chain([0x4003, 0x8012, 0x801a, 0x8009, 200]) {
            let mut v = payload.to_vec();
            v[at + 2..at + 4].copy_from_slice(&new_kind.to_ne_bytes());
            variants.push(v);
        }
        for new_len in [0, 3, 4, len.saturating_sub(1), len + 1, len + 4, 0xffff] {
            let mut v = payload.to_vec();
            v[at..at + 2].copy_from_slice(&(new_len as u16).to_ne_bytes());
            variants.push(v);
        }
        for _ in 0..4 {
            let mut v = payload.to_vec();
            let pick = at + 4 + rng.below(len.saturating_sub(4).max(1));
            if let Some(byte) = v.get_mut(pick) {
                *byte ^= 1 << rng.below(8);
            }
            variants.push(v);
        }
    }
    variants
}

/// One attribute: `len`, `type`, value, padding to 4 bytes.
pub(super) fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = 4 + value.len();
    let mut out = Vec::with_capacity(len + 3);
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    out.resize(super::align4(len), 0);
    out
}

/// A nested attribute (`NLA_F_NESTED` set, as libnl's `nla_nest_start` does) holding `children`.
pub(super) fn nest(kind: u16, children: &[Vec<u8>]) -> Vec<u8> {
    attr(kind | 0x8000, &children.concat())
}

/// One netlink message: header (length filled in) + `payload`, padded to 4 bytes.
pub(super) fn message(type_id: u16, flags: u16, seq: u32, pid: u32, payload: &[u8]) -> Vec<u8> {
    let len = 16 + payload.len();
    let mut out = Vec::with_capacity(len + 3);
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(&type_id.to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&pid.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(super::align4(len), 0);
    out
}
