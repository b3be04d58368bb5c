//! Tests of the netlink decoder: hand-built byte fixtures per message kind (`messages`), IPVS
//! messages built the way libipvs builds them (`ipvs_messages`), and the real nlmon captures
//! with golden JSON and a no-panic fuzz pass (`captures`), and the own link attribute walker
//! against netlink-packet-route over those captures and mangled copies (`link_walker`). This file holds the tiny netlink
//! encoder the fixtures are written with.
mod captures;
mod ipvs_messages;
mod link_walker;
mod messages;

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
