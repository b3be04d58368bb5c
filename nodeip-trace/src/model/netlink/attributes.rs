//! Attribute-level values of a decoded message: raw attributes and bytes shown as hex.
use serde::{Deserialize, Serialize};

/// Lower-case hex digits, by value.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends `byte` as two lower-case hex digits.
pub fn push_hex_byte(out: &mut String, byte: u8) {
    out.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
    out.push(char::from(HEX_DIGITS[usize::from(byte & 0xf)]));
}

/// Lower-case hex, no separators. A table lookup per nibble: `format!("{:02x}")` per byte was
/// a third of `analyze`'s time on captures full of raw attributes.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        push_hex_byte(&mut out, b);
    }
    out
}

/// Bytes shown as lower-case hex (raw attributes and bodies). Kept as bytes and turned into
/// text only when serialized: the text timeline never shows them, and hex-encoding every raw
/// attribute at decode time was a tenth of `analyze --format text`. Serializes as the hex
/// string; a string read back that is not canonical lower-case hex is kept as it was, so a
/// replayed recording is written back unchanged.
#[derive(Clone, Debug, Eq)]
pub enum Hex {
    /// The bytes (what the decoder makes).
    Bytes(Vec<u8>),
    /// Text read from a recording that is not lower-case hex of whole bytes.
    Text(String),
}

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hex::Text(text) => f.write_str(text),
            Hex::Bytes(bytes) => {
                // A stack buffer per 32 bytes: no allocation, few writes.
                let mut buf = [0u8; 64];
                for chunk in bytes.chunks(32) {
                    for (i, &b) in chunk.iter().enumerate() {
                        buf[2 * i] = HEX_DIGITS[usize::from(b >> 4)];
                        buf[2 * i + 1] = HEX_DIGITS[usize::from(b & 0xf)];
                    }
                    let text = std::str::from_utf8(&buf[..2 * chunk.len()])
                        .map_err(|_| std::fmt::Error)?;
                    f.write_str(text)?;
                }
                Ok(())
            }
        }
    }
}

impl PartialEq for Hex {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Hex::Bytes(a), Hex::Bytes(b)) => a == b,
            (Hex::Text(a), Hex::Text(b)) => a == b,
            _ => self.to_string() == other.to_string(),
        }
    }
}

impl PartialEq<&str> for Hex {
    fn eq(&self, other: &&str) -> bool {
        match self {
            Hex::Text(text) => text == other,
            Hex::Bytes(bytes) => parse_hex(other).is_some_and(|b| b == *bytes),
        }
    }
}

impl Serialize for Hex {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Ok(parse_hex(&text).map_or(Hex::Text(text), Hex::Bytes))
    }
}

/// The bytes of canonical lower-case hex (what [`Hex`] writes), else `None`.
fn parse_hex(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| HEX_DIGITS.iter().position(|&d| d == c);
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some((digit(pair[0])? << 4 | digit(pair[1])?) as u8))
        .collect()
}

/// An attribute this decoder does not interpret, kept as type number + hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawAttribute {
    /// Attribute type (without the nested/byte-order flag bits).
    #[serde(rename = "type")]
    pub attr_type: u16,
    /// The sender marked it nested (`NLA_F_NESTED`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nested: bool,
    /// The value in hex.
    pub hex: Hex,
}

impl From<&[u8]> for Hex {
    fn from(bytes: &[u8]) -> Self {
        Hex::Bytes(bytes.to_vec())
    }
}
