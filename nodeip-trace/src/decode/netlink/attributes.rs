//! Netlink attribute (TLV) walking and value readers, shared by every family decoder here.
//!
//! A netlink attribute is `u16 len` (header included), `u16 type` (top bits: nested, network
//! byte order), then the value, padded to 4 bytes. [`AttributeWalker`] yields them in order and
//! stops at the first malformed one, reporting its byte offset in the whole buffer.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::DecodeError;
use crate::decode::record::c_string;
use crate::model::netlink::attributes::push_hex_byte;
use crate::model::netlink::{Hex, Name, RawAttribute};

/// Attribute header length (`struct nlattr`).
const NLA_HEADER_LEN: usize = 4;
/// `NLA_F_NESTED`: the value is itself a list of attributes.
const NLA_F_NESTED: u16 = 0x8000;
/// `NLA_F_NET_BYTEORDER`: the value is in network byte order.
const NLA_F_NET_BYTEORDER: u16 = 0x4000;
/// Mask that leaves the attribute type without its flag bits.
const NLA_TYPE_MASK: u16 = !(NLA_F_NESTED | NLA_F_NET_BYTEORDER);

/// One attribute as netlink-packet-core's `NlasIterator` reads it.
pub(crate) struct CrateNla<'a> {
    /// Its type, flag bits removed.
    pub kind: u16,
    /// Its value.
    pub value: &'a [u8],
    /// The buffer from its header to the end of the region (what the crate's parsers get).
    pub rest: &'a [u8],
}

/// The attributes of `region` as `NlasIterator` walks them: each one, then `None` for the first
/// one the crate refuses (fewer than 4 bytes left, a length below 4 or past the region), which
/// fails the crate's parse of the whole list.
pub(crate) fn crate_nlas(region: &[u8]) -> impl Iterator<Item = Option<CrateNla<'_>>> {
    let (mut at, mut failed) = (0, false);
    std::iter::from_fn(move || {
        if failed || at >= region.len() {
            return None;
        }
        let rest = &region[at..];
        let len = read_u16(rest, 0).map_or(0, usize::from);
        let Some(kind) = read_u16(rest, 2).filter(|_| len >= NLA_HEADER_LEN && len <= rest.len())
        else {
            failed = true;
            return Some(None);
        };
        at += align4(len);
        Some(Some(CrateNla {
            // The same 0x3fff as netlink-packet-core's `NlaBuffer::kind`.
            kind: kind & NLA_TYPE_MASK,
            value: &rest[NLA_HEADER_LEN..len],
            rest,
        }))
    })
}

/// Rounds `len` up to the 4-byte netlink alignment.
pub(crate) fn align4(len: usize) -> usize {
    len.saturating_add(3) & !3
}

/// One attribute, borrowed from the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Attribute<'a> {
    /// Attribute type without the nested/byte-order flag bits.
    pub kind: u16,
    /// The raw type field as sent (flag bits included).
    pub raw_kind: u16,
    /// The value (header and padding excluded).
    pub value: &'a [u8],
    /// Byte offset of the attribute header in the whole decoded buffer.
    pub offset: usize,
}

impl<'a> Attribute<'a> {
    /// Byte offset of the value in the whole buffer (where nested attributes start).
    pub fn value_offset(&self) -> usize {
        self.offset + NLA_HEADER_LEN
    }

    /// Keeps this attribute as type number + hex.
    pub fn to_raw(self) -> RawAttribute {
        RawAttribute {
            attr_type: self.kind,
            nested: self.raw_kind & NLA_F_NESTED != 0,
            hex: Hex::from(self.value),
        }
    }

    /// `u8` value, or `None` when the value is too short.
    pub fn u8(&self) -> Option<u8> {
        self.value.first().copied()
    }

    /// Host-order `u16` value.
    pub fn u16(&self) -> Option<u16> {
        Some(u16::from_ne_bytes(self.value.get(..2)?.try_into().ok()?))
    }

    /// Network-order (big-endian) `u16` value, e.g. a port.
    pub fn be16(&self) -> Option<u16> {
        Some(u16::from_be_bytes(self.value.get(..2)?.try_into().ok()?))
    }

    /// Host-order `u32` value.
    pub fn u32(&self) -> Option<u32> {
        read_u32(self.value, 0)
    }

    /// Host-order `i32` value.
    pub fn i32(&self) -> Option<i32> {
        self.u32().map(|v| v as i32)
    }

    /// Host-order `u64` value.
    pub fn u64(&self) -> Option<u64> {
        Some(u64::from_ne_bytes(self.value.get(..8)?.try_into().ok()?))
    }

    /// NUL-terminated (or not) string value, lossily decoded.
    pub fn string(&self) -> String {
        c_string(self.value).into()
    }
}

/// Host-order `u32` at `at`, when the buffer is long enough.
pub(crate) fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    Some(u32::from_ne_bytes(buf.get(at..end)?.try_into().ok()?))
}

/// Host-order `u16` at `at`, when the buffer is long enough.
pub(crate) fn read_u16(buf: &[u8], at: usize) -> Option<u16> {
    let end = at.checked_add(2)?;
    Some(u16::from_ne_bytes(buf.get(at..end)?.try_into().ok()?))
}

/// An IPv4 (4 bytes) or IPv6 (16 bytes) address, by length.
pub(crate) fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    match bytes.len() {
        4 => Some(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes).ok()?))),
        16 => Some(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(bytes).ok()?,
        ))),
        _ => None,
    }
}

/// A link-layer address as `aa:bb:cc:...`.
pub(crate) fn link_layer_address(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, &b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(':');
        }
        push_hex_byte(&mut out, b);
    }
    out
}

/// Names of the bits set in `bits`, from `table` (first match wins, so a multi-bit entry listed
/// first hides its parts); bits not in the table are given in hex.
pub(crate) fn bit_names(bits: u32, table: &[(u32, &'static str)]) -> Vec<Name> {
    bit_names_in(bits, &[table])
}

/// [`bit_names`] over several tables read as one, in order (no table is built per call).
pub(crate) fn bit_names_in(bits: u32, tables: &[&[(u32, &'static str)]]) -> Vec<Name> {
    // Every message header and route names its flags (1.1% of the live consumer's CPU per
    // event): at most one name per bit set plus the hex rest, so one allocation (none for no
    // bits), and the walk stops once every bit is named.
    let mut names = Vec::with_capacity(bits.count_ones() as usize);
    let mut left = bits;
    for &(bit, name) in tables.iter().copied().flatten() {
        if left == 0 {
            break;
        }
        if bit != 0 && left & bit == bit {
            names.push(Name::Borrowed(name));
            left &= !bit;
        }
    }
    if left != 0 {
        names.push(Name::Owned(format!("{left:#x}")));
    }
    names
}

/// Iterator over the attributes of one buffer region; ends at the first malformed attribute,
/// which it yields as an error.
pub(crate) struct AttributeWalker<'a> {
    buf: &'a [u8],
    pos: usize,
    base_offset: usize,
    failed: bool,
}

impl<'a> AttributeWalker<'a> {
    /// Walks `buf`, whose first byte is at `base_offset` in the whole decoded buffer.
    pub fn new(buf: &'a [u8], base_offset: usize) -> Self {
        Self {
            buf,
            pos: 0,
            base_offset,
            failed: false,
        }
    }
}

impl<'a> Iterator for AttributeWalker<'a> {
    type Item = Result<Attribute<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let left = self.buf.len().saturating_sub(self.pos);
        // Fewer bytes than a header: alignment padding at the end, not an attribute.
        if self.failed || left < NLA_HEADER_LEN {
            return None;
        }
        let offset = self.base_offset + self.pos;
        let len = read_u16(self.buf, self.pos).unwrap_or(0) as usize;
        let raw_kind = read_u16(self.buf, self.pos + 2).unwrap_or(0);
        if len < NLA_HEADER_LEN || len > left {
            self.failed = true;
            return Some(Err(DecodeError::BadAttribute {
                offset,
                attr_type: raw_kind & NLA_TYPE_MASK,
                len,
                available: left,
            }));
        }
        let value = &self.buf[self.pos + NLA_HEADER_LEN..self.pos + len];
        self.pos += align4(len);
        Some(Ok(Attribute {
            kind: raw_kind & NLA_TYPE_MASK,
            raw_kind,
            value,
            offset,
        }))
    }
}

/// The well-formed attributes of `buf` (whose first byte is at `base_offset` in the whole
/// buffer), in order; a malformed attribute ends the list and is pushed to `errors`. The one
/// attribute loop every family decoder in this module uses.
pub(crate) fn collect_attributes<'a>(
    buf: &'a [u8],
    base_offset: usize,
    errors: &mut Vec<DecodeError>,
) -> Vec<Attribute<'a>> {
    walk_attributes(buf, base_offset, errors).collect()
}

/// [`collect_attributes`] as an iterator, for a decoder that looks at each attribute once (no
/// list is built per message).
pub(crate) fn walk_attributes<'a, 'e>(
    buf: &'a [u8],
    base_offset: usize,
    errors: &'e mut Vec<DecodeError>,
) -> impl Iterator<Item = Attribute<'a>> + 'e
where
    'a: 'e,
{
    AttributeWalker::new(buf, base_offset).filter_map(|item| match item {
        Ok(attribute) => Some(attribute),
        Err(error) => {
            errors.push(error);
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::netlink::attributes::hex;

    #[test]
    fn walks_attributes_and_keeps_offsets() {
        // len 8 type 1 value 0x01020304; len 5 type 0x8002 value "a" + 3 padding.
        let buf = [8, 0, 1, 0, 4, 3, 2, 1, 5, 0, 2, 0x80, b'a', 0, 0, 0];
        let attrs: Vec<_> = AttributeWalker::new(&buf, 100)
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(attrs.len(), 2);
        assert_eq!(attrs[0].u32(), Some(0x01020304));
        assert_eq!(attrs[0].offset, 100);
        assert_eq!(attrs[1].kind, 2);
        assert_eq!(attrs[1].offset, 108);
        assert!(attrs[1].to_raw().nested);
    }

    #[test]
    fn zero_length_attribute_stops_with_offset() {
        let buf = [8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, 2, 3, 4];
        let items: Vec<_> = AttributeWalker::new(&buf, 20).collect();
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[1],
            Err(DecodeError::BadAttribute {
                offset: 28,
                attr_type: 7,
                len: 0,
                available: 8
            })
        );
    }

    #[test]
    fn overrunning_attribute_is_an_error() {
        let buf = [40, 0, 1, 0, 1, 2, 3, 4];
        let items: Vec<_> = AttributeWalker::new(&buf, 0).collect();
        assert!(matches!(
            items[..],
            [Err(DecodeError::BadAttribute { len: 40, .. })]
        ));
    }

    #[test]
    fn hex_and_link_layer_addresses() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(hex(&[]), "");
        assert_eq!(link_layer_address(&[0x02, 0xab, 0x10]), "02:ab:10");
        assert_eq!(link_layer_address(&[]), "");
    }

    #[test]
    fn hex_values_serialize_as_text_and_read_back() {
        let bytes: Vec<u8> = (0..=255).collect();
        let value = Hex::from(&bytes[..]);
        let json = serde_json::to_string(&value).unwrap();
        assert_eq!(json, format!("\"{}\"", hex(&bytes)));
        let back: Hex = serde_json::from_str(&json).unwrap();
        assert!(matches!(&back, Hex::Bytes(b) if *b == bytes));
        // Not what the decoder writes: kept as text, written back unchanged.
        for odd in ["\"ABCD\"", "\"abc\"", "\"zz\"", "\"\""] {
            let back: Hex = serde_json::from_str(odd).unwrap();
            assert_eq!(serde_json::to_string(&back).unwrap(), odd);
        }
        assert_eq!(Hex::from(&[0xde, 0xad][..]), "dead");
        assert_eq!(Hex::Text("dead".into()), Hex::from(&[0xde, 0xad][..]));
    }

    #[test]
    fn bit_names_keep_unknown_bits() {
        let names = bit_names(0x1 | 0x40, &[(0x1, "A"), (0x2, "B")]);
        assert_eq!(names, ["A", "0x40"]);
    }
}
