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

/// Each byte's two lower-case hex digits.
static HEX_PAIRS: [[u8; 2]; 256] = {
    let mut table = [[0u8; 2]; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = [HEX_DIGITS[b >> 4], HEX_DIGITS[b & 0xf]];
        b += 1;
    }
    table
};

/// `bytes` as hex text in `buf` (whose length is at least twice theirs).
fn hex_in<'b>(bytes: &[u8], buf: &'b mut [u8]) -> &'b str {
    let text = &mut buf[..2 * bytes.len()];
    for (pair, &b) in text.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
    debug_assert!(text.is_ascii());
    // SAFETY: every byte of `text` was just written from `HEX_PAIRS`, which holds only ASCII
    // digits and letters, so it is UTF-8. (Validating it was a tenth of writing a raw
    // attribute's hex.)
    unsafe { std::str::from_utf8_unchecked(text) }
}

/// Appends the hex digits of `bytes` (as [`Hex`] writes them) to `out`, for writers that
/// make their text by hand.
pub fn append_hex_digits(bytes: &[u8], out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + 2 * bytes.len(), 0);
    hex_in(bytes, &mut out[at..]);
}

/// Bytes whose hex is made in one stack buffer: nearly every raw attribute; longer ones are
/// written in pieces of this size.
const HEX_ON_STACK: usize = 512;

/// `bytes` (at most `N / 2` of them) serialized as a hex string made on the stack.
fn serialize_hex_in<const N: usize, S: serde::Serializer>(
    bytes: &[u8],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(hex_in(bytes, &mut [0u8; N]))
}

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hex::Text(text) => f.write_str(text),
            Hex::Bytes(bytes) => {
                // A stack buffer per piece: no allocation, few writes.
                let mut buf = [0u8; 2 * HEX_ON_STACK];
                for chunk in bytes.chunks(HEX_ON_STACK) {
                    f.write_str(hex_in(chunk, &mut buf))?;
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
    /// A string; a raw attribute of up to [`HEX_ON_STACK`] bytes (nearly all) is made into
    /// text on the stack, in a buffer sized to it (zeroing a large one for a four-byte value
    /// cost more than the value), and handed over whole.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Hex::Bytes(bytes) if bytes.len() <= 16 => serialize_hex_in::<32, S>(bytes, serializer),
            Hex::Bytes(bytes) if bytes.len() <= HEX_ON_STACK => {
                serialize_hex_in::<{ 2 * HEX_ON_STACK }, S>(bytes, serializer)
            }
            _ => serializer.collect_str(self),
        }
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
