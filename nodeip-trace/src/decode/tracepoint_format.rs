//! Tracepoint `format` files → field offsets, so raw tracepoint bytes copied by the eBPF side are
//! decoded with the running kernel's own layout (fields move between kernel versions).
use std::collections::HashMap;

/// Field offsets and sizes of one tracepoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TracepointLayout {
    fields: HashMap<String, (usize, usize)>,
}

impl TracepointLayout {
    /// Parses the text of `events/<category>/<name>/format`.
    pub fn parse(format: &str) -> Self {
        let mut fields = HashMap::new();
        for line in format.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';').map(str::trim);
            let decl = parts.next().unwrap_or_default();
            let mut offset = None;
            let mut size = None;
            for p in parts {
                if let Some(v) = p.strip_prefix("offset:") {
                    offset = v.parse().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.parse().ok();
                }
            }
            // "__u8 src[4]" → "src"; "const char * name" → "name"
            let name = decl.rsplit([' ', '*']).next().unwrap_or_default();
            let name = name.split('[').next().unwrap_or_default();
            if let (Some(o), Some(s)) = (offset, size) {
                if !name.is_empty() {
                    fields.insert(name.to_string(), (o, s));
                }
            }
        }
        Self { fields }
    }

    /// (offset, size) of a field, offsets counted from the start of the tracepoint record.
    pub fn field(&self, name: &str) -> Option<(usize, usize)> {
        self.fields.get(name).copied()
    }

    /// Whether no fields were parsed.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Bytes of `name` within `raw`, where `raw` starts at record offset `base`.
    pub fn bytes<'a>(&self, raw: &'a [u8], base: usize, name: &str) -> Option<&'a [u8]> {
        let (off, size) = self.field(name)?;
        raw.get(off.checked_sub(base)?..off.checked_sub(base)? + size)
    }

    /// A little-endian integer field (1, 2, 4 or 8 bytes), sign-extended when `signed`.
    pub fn int(&self, raw: &[u8], base: usize, name: &str, signed: bool) -> Option<i64> {
        let b = self.bytes(raw, base, name)?;
        let mut buf = [0u8; 8];
        buf[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
        let v = u64::from_le_bytes(buf);
        Some(if signed && !b.is_empty() && b.len() < 8 {
            let shift = 64 - 8 * b.len() as u32;
            ((v << shift) as i64) >> shift
        } else {
            v as i64
        })
    }
}

/// The layout of `fib:fib_table_lookup` on 6.x kernels, used when tracefs cannot be read
/// (offline decoding of recordings keeps decoded values, so this is only a fallback).
pub const FIB_TABLE_LOOKUP_6X: &str = "\
field:u32 tb_id;\toffset:8;\tsize:4;\tsigned:0;
field:int err;\toffset:12;\tsize:4;\tsigned:1;
field:int oif;\toffset:16;\tsize:4;\tsigned:1;
field:int iif;\toffset:20;\tsize:4;\tsigned:1;
field:u8 proto;\toffset:24;\tsize:1;\tsigned:0;
field:__u8 tos;\toffset:25;\tsize:1;\tsigned:0;
field:__u8 scope;\toffset:26;\tsize:1;\tsigned:0;
field:__u8 flags;\toffset:27;\tsize:1;\tsigned:0;
field:__u8 src[4];\toffset:28;\tsize:4;\tsigned:0;
field:__u8 dst[4];\toffset:32;\tsize:4;\tsigned:0;
field:__u8 gw4[4];\toffset:36;\tsize:4;\tsigned:0;
field:__u8 gw6[16];\toffset:40;\tsize:16;\tsigned:0;
field:u16 sport;\toffset:56;\tsize:2;\tsigned:0;
field:u16 dport;\toffset:58;\tsize:2;\tsigned:0;
field:char name[16];\toffset:60;\tsize:16;\tsigned:0;
";

/// The layout of `fib6:fib6_table_lookup` on 6.x kernels (fallback, see above).
pub const FIB6_TABLE_LOOKUP_6X: &str = "\
field:u32 tb_id;\toffset:8;\tsize:4;\tsigned:0;
field:int err;\toffset:12;\tsize:4;\tsigned:1;
field:int oif;\toffset:16;\tsize:4;\tsigned:1;
field:int iif;\toffset:20;\tsize:4;\tsigned:1;
field:u32 flowlabel;\toffset:24;\tsize:4;\tsigned:0;
field:__u8 tos;\toffset:28;\tsize:1;\tsigned:0;
field:__u8 scope;\toffset:29;\tsize:1;\tsigned:0;
field:__u8 flags;\toffset:30;\tsize:1;\tsigned:0;
field:__u8 src[16];\toffset:31;\tsize:16;\tsigned:0;
field:__u8 dst[16];\toffset:47;\tsize:16;\tsigned:0;
field:u16 sport;\toffset:64;\tsize:2;\tsigned:0;
field:u16 dport;\toffset:66;\tsize:2;\tsigned:0;
field:u8 proto;\toffset:68;\tsize:1;\tsigned:0;
field:u8 rt_type;\toffset:69;\tsize:1;\tsigned:0;
field:char name[16];\toffset:70;\tsize:16;\tsigned:0;
field:__u8 gw[16];\toffset:86;\tsize:16;\tsigned:0;
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_and_reads_signed_ints() {
        let l = TracepointLayout::parse(FIB_TABLE_LOOKUP_6X);
        assert_eq!(l.field("src"), Some((28, 4)));
        assert_eq!(l.field("name"), Some((60, 16)));
        let mut raw = vec![0u8; 80];
        raw[12 - 8..16 - 8].copy_from_slice(&(-11i32).to_le_bytes());
        assert_eq!(l.int(&raw, 8, "err", true), Some(-11));
        assert_eq!(l.int(&raw, 8, "tb_id", false), Some(0));
        assert_eq!(l.int(&raw, 8, "missing", false), None);
        assert_eq!(l.bytes(&raw[..10], 8, "name"), None);
    }
}
