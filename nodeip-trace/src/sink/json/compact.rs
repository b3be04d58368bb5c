//! A JSON serializer writing exactly what `serde_json::to_writer` writes (compact form), into a
//! `Vec<u8>` instead of an `io::Write`.
//!
//! Why not serde_json itself: under a 100,000-pair netlink burst, serializing events with
//! serde_json through a `BufWriter` was a third of the live consumer's CPU — each of the ≈ 60
//! keys and strings of an event went out as three or four small `write_all` calls (quote, text,
//! quote, colon), each a bounds check and a `memmove` call. Here a key with its quotes, colon and
//! comma is one reserve and a few pushes, a string without characters to escape (nearly all of
//! them) is one copy, and the whole line reaches the output as one write.
//!
//! The output is byte-for-byte serde_json's: the same escapes (`\"`, `\\`, `\b \t \n \f \r`,
//! other control characters as lowercase `\u00XX`, nothing else), the same integer digits, map
//! keys that are integers or booleans quoted, empty containers as `[]`/`{}`. Floats, which no
//! event has, are handed to serde_json. Unit tests compare the two on every value shape and on
//! every control character; the sinks' goldens compare whole events.
use serde::ser::{self, Serialize};

/// Serialization error: serde_json's, so an event failing here fails as it did before.
pub type JsonError = serde_json::Error;

/// Appends `value` as compact JSON to `out` (exactly the bytes of `serde_json::to_writer`). On
/// error, `out` may hold part of the value.
pub fn append_json<T: Serialize + ?Sized>(value: &T, out: &mut Vec<u8>) -> Result<(), JsonError> {
    value.serialize(&mut CompactJson { out })
}

/// The serializer: every value is appended to `out`.
struct CompactJson<'a> {
    out: &'a mut Vec<u8>,
}

/// What a byte becomes inside a JSON string: 0 itself, `u` a `\u00XX` escape, any other
/// letter or symbol the two-byte escape `\` + it (serde_json's table).
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0a] = b'n';
    table[0x0c] = b'f';
    table[0x0d] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

/// `byte` in every byte of a word.
const fn every_byte(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

/// Whether any byte of the word `x` needs an escape: below 0x20, `"` or `\\` (the classic
/// "has a byte less than n" and "has a zero byte" word tests, exact as yes/no answers).
#[inline]
fn word_needs_escape(x: u64) -> bool {
    let below = |x: u64, n: u8| x.wrapping_sub(every_byte(n)) & !x;
    let control = below(x, 0x20);
    let quote = below(x ^ every_byte(b'"'), 1);
    let backslash = below(x ^ every_byte(b'\\'), 1);
    (control | quote | backslash) & every_byte(0x80) != 0
}

/// The 8 bytes of `bytes` at `at` as a word.
#[inline]
fn word_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// The 4 bytes of `bytes` at `at` as a word, its other half bytes that need no escape.
#[inline]
fn half_word_at(bytes: &[u8], at: usize) -> u64 {
    let half = u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let mut word = [b'a'; 8];
    word[..4].copy_from_slice(&half.to_ne_bytes());
    u64::from_ne_bytes(word)
}

/// Whether any byte of `bytes` needs an escape, a word at a time (the last word overlapping
/// the one before it): keys and values are mostly short, and a byte-at-a-time walk of them was
/// 13-16% of the consumer's CPU.
#[inline]
fn needs_escape(bytes: &[u8]) -> bool {
    let n = bytes.len();
    if n >= 8 {
        let mut at = 0;
        while at + 8 <= n {
            if word_needs_escape(word_at(bytes, at)) {
                return true;
            }
            at += 8;
        }
        return at < n && word_needs_escape(word_at(bytes, n - 8));
    }
    if n >= 4 {
        return word_needs_escape(half_word_at(bytes, 0))
            || word_needs_escape(half_word_at(bytes, n - 4));
    }
    bytes.iter().any(|&b| ESCAPE[b as usize] != 0)
}

/// Appends `text` as a JSON string, quotes included. Inlined: its call was a fixed cost of
/// every key and string (a sixth of the consumer's CPU in the profile, mostly entry and exit).
#[inline(always)]
pub(super) fn append_str(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    if needs_escape(bytes) {
        append_escaped(out, bytes);
    } else {
        append_quoted(out, bytes);
    }
}

/// Appends a [`Name`](crate::model::netlink::Name): one of the decoder's tables (borrowed,
/// `'static`) as [`append_name`] does, a computed one (owned) as any string.
#[allow(
    clippy::ptr_arg,
    reason = "the Cow itself, not &str: whether it is borrowed is what is read"
)]
#[inline(always)]
pub(super) fn append_table_name(out: &mut Vec<u8>, name: &std::borrow::Cow<'static, str>) {
    match name {
        std::borrow::Cow::Borrowed(name) => append_name(out, name),
        std::borrow::Cow::Owned(text) => append_str(out, text),
    }
}

/// Appends `name` as a JSON string without looking for characters to escape: for the names
/// serde hands over as `&'static str` (struct fields, enum variants), which are Rust
/// identifiers or this crate's own renames, none with a quote, backslash or control character
/// (checked in debug builds: every golden and test serializes through here). The check was a
/// tenth of `analyze --format json`, most of it on these.
#[inline(always)]
fn append_name(out: &mut Vec<u8>, name: &'static str) {
    debug_assert!(!needs_escape(name.as_bytes()), "{name:?} needs escaping");
    append_quoted(out, name.as_bytes());
}

/// Appends `,"key":` before a member written by hand: one reserve and no call to `memcpy`
/// (`key` is a field name: nothing in it needs escaping; checked in debug builds).
#[inline(always)]
pub(super) fn append_member_key(out: &mut Vec<u8>, key: &'static str) {
    debug_assert!(!needs_escape(key.as_bytes()), "{key:?} needs escaping");
    let n = key.len();
    out.reserve(n + 4);
    let len = out.len();
    // SAFETY: `n + 4` bytes of capacity were reserved past `len`; every write below lands in
    // `[len, len + n + 4)` and reads inside `key`, and all of that range is written before
    // `set_len`.
    unsafe {
        let at = out.as_mut_ptr().add(len);
        *at = b',';
        *at.add(1) = b'"';
        copy_bytes(key.as_bytes(), at.add(2));
        *at.add(n + 2) = b'"';
        *at.add(n + 3) = b':';
        out.set_len(len + n + 4);
    }
}

/// Appends `"bytes"`. Up to 16 bytes are copied as two overlapping words, not by a call to
/// `memcpy` (most keys and values are that short).
#[inline(always)]
fn append_quoted(out: &mut Vec<u8>, bytes: &[u8]) {
    let n = bytes.len();
    out.reserve(n + 2);
    let len = out.len();
    // SAFETY: `n + 2` bytes of capacity were reserved past `len`; every write below lands in
    // `[len, len + n + 2)` and reads inside `bytes` (which cannot overlap `out`: one is borrowed
    // shared, the other exclusively), and all of that range is written before `set_len`.
    unsafe {
        let quote = out.as_mut_ptr().add(len);
        *quote = b'"';
        copy_bytes(bytes, quote.add(1));
        *quote.add(n + 1) = b'"';
        out.set_len(len + n + 2);
    }
}

/// Appends `bytes`, copied as [`copy_bytes`] copies: for the few bytes of a number's digits
/// or a closing bracket, where `extend_from_slice` called `memcpy` for each (4% of writing
/// JSON, in time: a call costs more than its few bytes).
#[inline(always)]
fn append_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len());
    let len = out.len();
    // SAFETY: `bytes.len()` bytes of capacity were reserved past `len`, `copy_bytes` writes
    // exactly those (reading only `bytes`, which cannot overlap `out`), then `set_len`.
    unsafe {
        copy_bytes(bytes, out.as_mut_ptr().add(len));
        out.set_len(len + bytes.len());
    }
}

/// Copies `bytes` to `to`: up to 16 bytes as at most two overlapping words or single bytes,
/// with no call to `memcpy` (most keys, values and numbers are that short), longer ones by it.
///
/// # Safety
/// `to` must be valid for `bytes.len()` writes and not overlap `bytes`.
#[inline(always)]
unsafe fn copy_bytes(bytes: &[u8], to: *mut u8) {
    let n = bytes.len();
    let from = bytes.as_ptr();
    // SAFETY: every read is inside `bytes` and every write inside `[to, to + n)`, which the
    // caller vouches for.
    unsafe {
        match n {
            0..=3 => {
                for i in 0..n {
                    *to.add(i) = *from.add(i);
                }
            }
            4..=7 => {
                std::ptr::copy_nonoverlapping(from, to, 4);
                std::ptr::copy_nonoverlapping(from.add(n - 4), to.add(n - 4), 4);
            }
            8..=16 => {
                std::ptr::copy_nonoverlapping(from, to, 8);
                std::ptr::copy_nonoverlapping(from.add(n - 8), to.add(n - 8), 8);
            }
            _ => std::ptr::copy_nonoverlapping(from, to, n),
        }
    }
}

/// Appends `"bytes"` with the escapes serde_json writes (out of line: rare).
#[cold]
#[inline(never)]
fn append_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    append_escaped_contents(out, bytes);
    out.push(b'"');
}

/// Appends `bytes` as the inside of a JSON string: copied when nothing needs an escape.
#[inline]
fn append_contents(out: &mut Vec<u8>, bytes: &[u8]) {
    if needs_escape(bytes) {
        append_escaped_contents(out, bytes);
    } else {
        append_bytes(out, bytes);
    }
}

/// Appends `bytes` with the escapes serde_json writes, no quotes.
#[cold]
#[inline(never)]
fn append_escaped_contents(out: &mut Vec<u8>, bytes: &[u8]) {
    let mut start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape = ESCAPE[byte as usize];
        if escape == 0 {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        start = i + 1;
        if escape == b'u' {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(byte >> 4) as usize],
                HEX[(byte & 0xf) as usize],
            ]);
        } else {
            out.extend_from_slice(&[b'\\', escape]);
        }
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends an integer's decimal digits.
#[inline]
pub(super) fn append_integer(out: &mut Vec<u8>, value: impl itoa::Integer) {
    append_bytes(out, itoa::Buffer::new().format(value).as_bytes());
}

/// An array or object being written: whether its next element is its first (no comma), and
/// the bytes that close it (`]`, `}`, or `]}`/`}}` for an enum variant's contents).
struct Compound<'s, 'a> {
    ser: &'s mut CompactJson<'a>,
    first: bool,
    close: &'static [u8],
}

impl Compound<'_, '_> {
    /// Writes the closing bytes.
    fn close(self) -> Result<(), JsonError> {
        append_bytes(self.ser.out, self.close);
        Ok(())
    }

    /// The separator before an element or key.
    #[inline]
    fn separate(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.ser.out.push(b',');
        }
    }

    /// Appends `"key":` for a struct field (after a comma unless first).
    #[inline]
    fn key(&mut self, key: &'static str) {
        self.separate();
        append_name(self.ser.out, key);
        self.ser.out.push(b':');
    }
}

impl<'s, 'a> CompactJson<'a> {
    /// Opens a container with `open`; `close` ends it.
    fn open(&'s mut self, open: u8, close: &'static [u8]) -> Compound<'s, 'a> {
        self.out.push(open);
        Compound {
            ser: self,
            first: true,
            close,
        }
    }

    /// Opens `{"variant":` (an enum variant with contents, serde's external tagging).
    fn open_variant(&mut self, variant: &'static str) {
        self.out.push(b'{');
        append_name(self.out, variant);
        self.out.push(b':');
    }

    /// Hands a value to serde_json (floats: their digits are serde_json's business).
    fn by_serde_json<T: Serialize>(&mut self, value: T) -> Result<(), JsonError> {
        serde_json::to_writer(&mut *self.out, &value)
    }
}

macro_rules! integers {
    ($($method:ident: $ty:ty),*) => {$(
        #[inline]
        fn $method(self, v: $ty) -> Result<(), JsonError> {
            append_integer(self.out, v);
            Ok(())
        }
    )*};
}

/// What both serializers write the same way: strings, characters and unit variants (a
/// variant's name) as JSON strings; a newtype struct as its contents.
macro_rules! strings {
    () => {
        #[inline]
        fn serialize_str(self, v: &str) -> Result<(), JsonError> {
            append_str(self.out, v);
            Ok(())
        }

        fn serialize_char(self, v: char) -> Result<(), JsonError> {
            append_str(self.out, v.encode_utf8(&mut [0u8; 4]));
            Ok(())
        }

        fn serialize_unit_variant(
            self,
            _name: &'static str,
            _index: u32,
            variant: &'static str,
        ) -> Result<(), JsonError> {
            append_name(self.out, variant);
            Ok(())
        }

        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _name: &'static str,
            value: &T,
        ) -> Result<(), JsonError> {
            value.serialize(self)
        }
    };
}

impl<'s, 'a> ser::Serializer for &'s mut CompactJson<'a> {
    type Ok = ();
    type Error = JsonError;
    type SerializeSeq = Compound<'s, 'a>;
    type SerializeTuple = Compound<'s, 'a>;
    type SerializeTupleStruct = Compound<'s, 'a>;
    type SerializeTupleVariant = Compound<'s, 'a>;
    type SerializeMap = Compound<'s, 'a>;
    type SerializeStruct = Compound<'s, 'a>;
    type SerializeStructVariant = Compound<'s, 'a>;

    integers!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);
    strings!();

    /// What `Display` writes, escaped, straight into the line: the default makes a `String`
    /// of it first (an allocation and a copy per raw attribute's hex).
    fn collect_str<T: std::fmt::Display + ?Sized>(self, value: &T) -> Result<(), JsonError> {
        /// Escapes what it is given into the line.
        struct Contents<'a>(&'a mut Vec<u8>);
        impl std::fmt::Write for Contents<'_> {
            fn write_str(&mut self, text: &str) -> std::fmt::Result {
                append_contents(self.0, text.as_bytes());
                Ok(())
            }
        }
        self.out.push(b'"');
        std::fmt::write(&mut Contents(self.out), format_args!("{value}"))
            .map_err(|_| ser::Error::custom("a value failed to format itself as text"))?;
        self.out.push(b'"');
        Ok(())
    }

    fn serialize_bool(self, v: bool) -> Result<(), JsonError> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn serialize_f32(self, v: f32) -> Result<(), JsonError> {
        self.by_serde_json(v)
    }

    fn serialize_f64(self, v: f64) -> Result<(), JsonError> {
        self.by_serde_json(v)
    }

    fn serialize_bytes(self, v: &[u8]) -> Result<(), JsonError> {
        let mut seq = self.open(b'[', b"]");
        for byte in v {
            seq.separate();
            append_integer(seq.ser.out, *byte);
        }
        seq.close()
    }

    fn serialize_none(self) -> Result<(), JsonError> {
        self.serialize_unit()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), JsonError> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<(), JsonError> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), JsonError> {
        self.serialize_unit()
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), JsonError> {
        self.open_variant(variant);
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, JsonError> {
        Ok(self.open(b'[', b"]"))
    }

    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, JsonError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, JsonError> {
        self.serialize_seq(Some(len))
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, JsonError> {
        self.open_variant(variant);
        Ok(self.open(b'[', b"]}"))
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, JsonError> {
        Ok(self.open(b'{', b"}"))
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, JsonError> {
        Ok(self.open(b'{', b"}"))
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, JsonError> {
        self.open_variant(variant);
        Ok(self.open(b'{', b"}}"))
    }
}

/// The element-taking compounds (arrays, tuples, a tuple variant's array): each element after
/// a comma, then the closing bytes.
macro_rules! elements {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = JsonError;

            #[inline]
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
                self.separate();
                value.serialize(&mut *self.ser)
            }

            fn end(self) -> Result<(), JsonError> {
                self.close()
            }
        }
    )*};
}

elements!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Compound<'_, '_> {
    type Ok = ();
    type Error = JsonError;

    #[inline]
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), JsonError> {
        self.separate();
        key.serialize(MapKey {
            out: &mut *self.ser.out,
        })
    }

    #[inline]
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), JsonError> {
        self.ser.out.push(b':');
        value.serialize(&mut *self.ser)
    }

    fn end(self) -> Result<(), JsonError> {
        self.close()
    }
}

/// The field-taking compounds (structs, a struct variant's object): `"key":value` after a
/// comma, then the closing bytes.
macro_rules! fields {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Compound<'_, '_> {
            type Ok = ();
            type Error = JsonError;

            #[inline]
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), JsonError> {
                self.key(key);
                value.serialize(&mut *self.ser)
            }

            fn end(self) -> Result<(), JsonError> {
                self.close()
            }
        }
    )*};
}

fields!(SerializeStruct, SerializeStructVariant);

/// A map key: strings as they are; integers, booleans and characters quoted (as serde_json
/// does); anything else is refused with serde_json's message.
struct MapKey<'a> {
    out: &'a mut Vec<u8>,
}

impl MapKey<'_> {
    /// Appends `text` in quotes: the digits or word of a key that is not a string.
    fn quoted(self, text: &[u8]) -> Result<(), JsonError> {
        append_quoted(self.out, text);
        Ok(())
    }
}

/// serde_json's refusal of a key that is not a string.
fn key_must_be_a_string() -> JsonError {
    ser::Error::custom("key must be a string")
}

macro_rules! integer_keys {
    ($($method:ident: $ty:ty),*) => {$(
        fn $method(self, v: $ty) -> Result<(), JsonError> {
            self.quoted(itoa::Buffer::new().format(v).as_bytes())
        }
    )*};
}

impl ser::Serializer for MapKey<'_> {
    type Ok = ();
    type Error = JsonError;
    type SerializeSeq = ser::Impossible<(), JsonError>;
    type SerializeTuple = ser::Impossible<(), JsonError>;
    type SerializeTupleStruct = ser::Impossible<(), JsonError>;
    type SerializeTupleVariant = ser::Impossible<(), JsonError>;
    type SerializeMap = ser::Impossible<(), JsonError>;
    type SerializeStruct = ser::Impossible<(), JsonError>;
    type SerializeStructVariant = ser::Impossible<(), JsonError>;

    integer_keys!(serialize_i8: i8, serialize_i16: i16, serialize_i32: i32, serialize_i64: i64,
        serialize_i128: i128, serialize_u8: u8, serialize_u16: u16, serialize_u32: u32,
        serialize_u64: u64, serialize_u128: u128);
    strings!();

    fn serialize_bool(self, v: bool) -> Result<(), JsonError> {
        self.quoted(if v { b"true" } else { b"false" })
    }

    fn serialize_f32(self, _v: f32) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_f64(self, _v: f64) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_bytes(self, _v: &[u8]) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_none(self) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit(self) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleStruct, JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStruct, JsonError> {
        Err(key_must_be_a_string())
    }

    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, JsonError> {
        Err(key_must_be_a_string())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::{append_json, needs_escape, ESCAPE};

    /// Our bytes and serde_json's for `value`.
    fn both<T: Serialize + ?Sized>(value: &T) -> (String, String) {
        let mut ours = Vec::new();
        append_json(value, &mut ours).unwrap();
        let theirs = serde_json::to_vec(value).unwrap();
        (
            String::from_utf8(ours).unwrap(),
            String::from_utf8(theirs).unwrap(),
        )
    }

    macro_rules! same {
        ($($value:expr),* $(,)?) => {$(
            let (ours, theirs) = both(&$value);
            assert_eq!(ours, theirs, "for {}", stringify!($value));
        )*};
    }

    #[derive(Serialize)]
    struct Unit;

    #[derive(Serialize)]
    struct Newtype(u32);

    #[derive(Serialize)]
    struct Pair(i8, &'static str);

    #[derive(Serialize)]
    #[serde(rename_all = "snake_case")]
    enum External {
        Plain,
        Wrapped(u16),
        Tuple(u8, bool),
        Fields { a: u32, b: Option<String> },
    }

    #[derive(Serialize)]
    #[serde(tag = "kind", rename_all = "snake_case")]
    enum Tagged {
        One { x: u32 },
        Two(Inner),
    }

    #[derive(Serialize)]
    struct Inner {
        y: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        z: Option<u8>,
    }

    #[derive(Serialize)]
    struct Flattening {
        ts: &'static str,
        #[serde(flatten)]
        body: Tagged,
    }

    #[test]
    fn every_value_shape_is_written_as_serde_json_writes_it() {
        same!(
            true,
            false,
            0u8,
            u64::MAX,
            i64::MIN,
            -1i32,
            u128::MAX,
            i128::MIN,
            'x',
            '"',
            "",
            "plain",
            (),
            Unit,
            Newtype(7),
            Pair(-3, "p"),
            Option::<u8>::None,
            Some(5u8),
            Vec::<u8>::new(),
            vec![1u8, 2, 3],
            vec![vec!["a"], vec![]],
            serde_bytes_like(),
            (1u8, "two", 3.5f64),
            1.0f64,
            f64::NAN,
            0.1f32,
            BTreeMap::<String, u8>::new(),
            BTreeMap::from([("b".to_string(), 2u8), ("a\"".to_string(), 1)]),
            BTreeMap::from([(3u32, "x"), (1, "y")]),
            BTreeMap::from([(-2i64, 0u8)]),
            BTreeMap::from([(true, 1u8)]),
            BTreeMap::from([('k', 1u8)]),
            External::Plain,
            External::Wrapped(9),
            External::Tuple(1, false),
            External::Fields { a: 1, b: None },
            External::Fields {
                a: 1,
                b: Some("\n".into())
            },
            vec![External::Plain, External::Wrapped(0)],
            Tagged::One { x: 1 },
            Tagged::Two(Inner { y: "why", z: None }),
            Tagged::Two(Inner {
                y: "why",
                z: Some(2)
            }),
            Flattening {
                ts: "t",
                body: Tagged::One { x: 2 }
            },
            Flattening {
                ts: "t",
                body: Tagged::Two(Inner { y: "", z: Some(0) })
            },
        );
    }

    /// Text a value writes through `Display` (`collect_str`), in pieces, some to escape.
    struct Pieces(&'static [&'static str]);

    impl std::fmt::Display for Pieces {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.iter().try_for_each(|piece| f.write_str(piece))
        }
    }

    impl Serialize for Pieces {
        fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            serializer.collect_str(self)
        }
    }

    #[test]
    fn displayed_values_are_written_as_serde_json_writes_them() {
        use crate::model::netlink::Hex;
        same!(
            Pieces(&[]),
            Pieces(&["", "plain"]),
            Pieces(&["a\"", "\u{1}b", "\\", "\n", "ünï"]),
            vec![Pieces(&["x"]), Pieces(&["\t"])],
        );
        // Raw attributes' hex: on the stack by size class (16 and 512 bytes the bounds),
        // through `Display` beyond.
        for len in [0usize, 1, 15, 16, 17, 511, 512, 513, 4000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            same!(Hex::Bytes(bytes.clone()), vec![Hex::Bytes(bytes)]);
        }
        same!(Hex::Text("not hex \"".into()));
    }

    /// Bytes as serde serializes `&[u8]` through `serialize_bytes`.
    fn serde_bytes_like() -> impl Serialize {
        struct Bytes;
        impl Serialize for Bytes {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(&[0, 255, 16])
            }
        }
        Bytes
    }

    #[test]
    fn every_byte_that_needs_an_escape_is_escaped_as_serde_json_escapes_it() {
        for c in (0u32..0x80).chain([0x7f, 0xe9, 0x2028, 0x1f600]) {
            let c = char::from_u32(c).unwrap();
            let text = format!("a{c}b{c}{c}");
            same!(text, BTreeMap::from([(text.clone(), 0u8)]));
        }
        same!("\u{0}\u{1f}\"\\/é\u{7f}", "ünïcødé – 🙂");
    }

    #[test]
    fn the_word_at_a_time_test_finds_every_byte_to_escape_at_every_place() {
        for len in 0..20 {
            for at in 0..len {
                for byte in 0..=255u8 {
                    let mut bytes = vec![b'k'; len];
                    bytes[at] = byte;
                    let expected = ESCAPE[byte as usize] != 0;
                    assert_eq!(needs_escape(&bytes), expected, "{byte:#x} at {at} of {len}");
                }
            }
        }
    }

    #[test]
    fn strings_of_every_length_are_copied_whole() {
        for len in 0..40 {
            let text: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let mut out = b"x".to_vec();
            super::append_str(&mut out, &text);
            assert_eq!(out, format!("x\"{text}\"").into_bytes(), "length {len}");
        }
    }

    #[test]
    fn keys_that_cannot_be_strings_are_refused_as_serde_json_refuses_them() {
        let map = BTreeMap::from([(vec![1u8], 0u8)]);
        let mut ours = Vec::new();
        let ours = append_json(&map, &mut ours).unwrap_err().to_string();
        let theirs = serde_json::to_vec(&map).unwrap_err().to_string();
        assert_eq!(ours, theirs);
    }
}
