//! Go executables, read from their bytes: the Go version (`.go.buildinfo`), the functions of the
//! `net` package's resolver found by name in `.gopclntab` (which `-s -w` stripped binaries keep),
//! and the file offsets to put uprobes at: a function's entry and **every RET instruction** in
//! its body, found by decoding its x86-64 instructions. Never uretprobes on Go code: a uretprobe
//! rewrites the return address on the goroutine's stack, and Go moves stacks and walks them
//! (golang/go#22008, iovisor/bcc#1320).
//!
//! Formats (Go's `debug/gosym` and `runtime/symtab.go`): the pclntab header is the magic
//! (`0xfffffff0` Go 1.18–1.19, `0xfffffff1` 1.20+), two pad bytes, the instruction quantum and
//! the pointer size, then pointer-size words: number of functions, number of files, the text
//! start, and the offsets of the function name table, cu table, file table, pc table and
//! function table. The function table is `nfunc` pairs of `u32` (entry offset from the text
//! start, offset of the `_func`), then the end. A `_func` begins with its entry offset and the
//! offset of its name in the name table. Older pclntab formats (Go ≤ 1.17) are reported as
//! unsupported: the resolver layouts nodeip-trace knows start at Go 1.19.
use std::collections::HashMap;
use std::path::Path;

/// Why a Go executable could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GoBinaryError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Not an ELF file nodeip-trace reads (64-bit little-endian x86-64).
    #[error("not a 64-bit little-endian x86-64 ELF file ({0})")]
    NotElf(&'static str),
    /// No `.gopclntab` section: not a Go executable.
    #[error("no .gopclntab section: not a Go executable")]
    NotGo,
    /// A pclntab format this reader does not know.
    #[error("pclntab magic {0:#x} is not Go 1.18+'s: Go versions before 1.19 are not supported")]
    PclntabFormat(u32),
    /// The table points outside the file.
    #[error("malformed .gopclntab: {0}")]
    Malformed(&'static str),
}

/// An ELF section: name, virtual address, file offset, size.
#[derive(Clone, Debug)]
struct Section {
    name: String,
    addr: u64,
    offset: u64,
    size: u64,
}

/// A loadable segment: virtual address, file offset, file size.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vaddr: u64,
    offset: u64,
    filesz: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// One function: its name, entry address and end (the next function's entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoFunction {
    /// Full name (`net.sortByRFC6724withSrcs`).
    pub name: String,
    /// Entry virtual address.
    pub entry: u64,
    /// End virtual address (exclusive).
    pub end: u64,
}

/// Where to put uprobes for one function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionProbes {
    /// The function.
    pub function: GoFunction,
    /// File offset of its entry.
    pub entry_offset: u64,
    /// File offsets of every RET instruction in its body.
    pub ret_offsets: Vec<u64>,
}

/// A Go executable, parsed.
pub struct GoBinary {
    bytes: Vec<u8>,
    sections: Vec<Section>,
    segments: Vec<Segment>,
    functions: HashMap<String, GoFunction>,
    /// The Go version from `.go.buildinfo` (`go1.21.13`), when present.
    pub version: Option<String>,
    /// The `cgo` functions of the `net` package are linked in (its lookups may go to libc).
    pub cgo_net: bool,
}

impl GoBinary {
    /// Reads and parses the executable at `path`.
    pub fn open(path: &Path) -> Result<Self, GoBinaryError> {
        let bytes = std::fs::read(path).map_err(|source| GoBinaryError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(bytes)
    }

    /// Parses an executable's bytes.
    pub fn parse(bytes: Vec<u8>) -> Result<Self, GoBinaryError> {
        let (sections, segments) = elf_layout(&bytes)?;
        let pclntab = sections
            .iter()
            .find(|s| s.name == ".gopclntab")
            .ok_or(GoBinaryError::NotGo)?;
        let table = bytes
            .get(pclntab.offset as usize..(pclntab.offset + pclntab.size) as usize)
            .ok_or(GoBinaryError::Malformed("section outside the file"))?;
        let text_start = match u64_at(table, 8 + 8 * 2) {
            Some(start) if start != 0 => start,
            // Go 1.26+ leaves pcHeader.textStart 0: the runtime takes it from its moduledata.
            _ => moduledata_text(&bytes, pclntab.addr)
                .or_else(|| sections.iter().find(|s| s.name == ".text").map(|s| s.addr))
                .ok_or(GoBinaryError::Malformed("no text start"))?,
        };
        let functions = read_functions(table, text_start)?;
        let version = sections
            .iter()
            .find(|s| s.name == ".go.buildinfo")
            .and_then(|s| bytes.get(s.offset as usize..(s.offset + s.size) as usize))
            .and_then(buildinfo_version);
        let cgo_net = functions.contains_key("net.cgoLookupIP")
            || functions.contains_key("net.cgoLookupIPCNAME")
            || functions.contains_key("net._C2func_getaddrinfo");
        Ok(GoBinary {
            bytes,
            sections,
            segments,
            functions,
            version,
            cgo_net,
        })
    }

    /// The function named `name`, if linked in.
    pub fn function(&self, name: &str) -> Option<&GoFunction> {
        self.functions.get(name)
    }

    /// The file offset of virtual address `vaddr` (through the loadable segments).
    pub fn file_offset(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz)
            .map(|s| vaddr - s.vaddr + s.offset)
    }

    /// Entry and RET offsets of the function named `name`.
    pub fn probes(&self, name: &str) -> Option<FunctionProbes> {
        let function = self.function(name)?.clone();
        let entry_offset = self.file_offset(function.entry)?;
        let len = function.end.checked_sub(function.entry)? as usize;
        let code = self
            .bytes
            .get(entry_offset as usize..entry_offset as usize + len)?;
        let ret_offsets = ret_positions(code, function.entry)
            .into_iter()
            .map(|p| entry_offset + p as u64)
            .collect();
        Some(FunctionProbes {
            function,
            entry_offset,
            ret_offsets,
        })
    }

    /// Whether a section named `name` exists.
    pub fn has_section(&self, name: &str) -> bool {
        self.sections.iter().any(|s| s.name == name)
    }
}

/// Sections and loadable segments of a 64-bit little-endian x86-64 ELF file.
fn elf_layout(b: &[u8]) -> Result<(Vec<Section>, Vec<Segment>), GoBinaryError> {
    if b.get(..4) != Some(b"\x7fELF") {
        return Err(GoBinaryError::NotElf("no ELF magic"));
    }
    if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        return Err(GoBinaryError::NotElf("not 64-bit little-endian"));
    }
    if u16_at(b, 18) != Some(62) {
        return Err(GoBinaryError::NotElf("not x86-64"));
    }
    let bad = GoBinaryError::NotElf("truncated headers");
    let phoff = u64_at(b, 32).ok_or(GoBinaryError::NotElf("truncated headers"))? as usize;
    let shoff = u64_at(b, 40).ok_or(GoBinaryError::NotElf("truncated headers"))? as usize;
    let phentsize = u16_at(b, 54).ok_or(GoBinaryError::NotElf("truncated headers"))? as usize;
    let phnum = u16_at(b, 56).ok_or(GoBinaryError::NotElf("truncated headers"))? as usize;
    let shentsize = u16_at(b, 58).ok_or(GoBinaryError::NotElf("truncated headers"))? as usize;
    let shnum = u16_at(b, 60).ok_or(GoBinaryError::NotElf("truncated headers"))? as usize;
    let shstrndx = u16_at(b, 62).ok_or(bad)? as usize;
    let mut segments = Vec::new();
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        if u32_at(b, at) == Some(1) {
            // PT_LOAD
            let (Some(offset), Some(vaddr), Some(filesz)) =
                (u64_at(b, at + 8), u64_at(b, at + 16), u64_at(b, at + 32))
            else {
                return Err(GoBinaryError::NotElf("truncated program header"));
            };
            segments.push(Segment {
                vaddr,
                offset,
                filesz,
            });
        }
    }
    let header = |i: usize| -> Option<(u32, u64, u64, u64)> {
        let at = shoff + i * shentsize;
        Some((
            u32_at(b, at)?,
            u64_at(b, at + 16)?,
            u64_at(b, at + 24)?,
            u64_at(b, at + 32)?,
        ))
    };
    let (_, _, strtab_off, strtab_size) =
        header(shstrndx).ok_or(GoBinaryError::NotElf("no section name table"))?;
    let strtab = b
        .get(strtab_off as usize..(strtab_off + strtab_size) as usize)
        .ok_or(GoBinaryError::NotElf("section name table outside the file"))?;
    let mut sections = Vec::new();
    for i in 0..shnum {
        let Some((name_off, addr, offset, size)) = header(i) else {
            break;
        };
        let name = strtab
            .get(name_off as usize..)
            .map(|s| {
                let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
                String::from_utf8_lossy(&s[..end]).into_owned()
            })
            .unwrap_or_default();
        sections.push(Section {
            name,
            addr,
            offset,
            size,
        });
    }
    Ok((sections, segments))
}

/// `runtime.moduledata.text`: the moduledata begins with a pointer to the pclntab header; its
/// 23rd word is the text start (after the header pointer, six slices, findfunctab, minpc, maxpc).
fn moduledata_text(b: &[u8], pclntab_addr: u64) -> Option<u64> {
    let needle = pclntab_addr.to_le_bytes();
    (0..b.len().saturating_sub(8 * 24))
        .step_by(8)
        .filter(|&at| b[at..at + 8] == needle)
        .find_map(|at| {
            let (minpc, maxpc, text) = (
                u64_at(b, at + 8 * 20)?,
                u64_at(b, at + 8 * 21)?,
                u64_at(b, at + 8 * 22)?,
            );
            (text != 0 && text <= minpc && minpc < maxpc).then_some(text)
        })
}

/// The functions of a Go 1.18+ pclntab, by name; entry offsets are relative to `text_start`.
fn read_functions(t: &[u8], text_start: u64) -> Result<HashMap<String, GoFunction>, GoBinaryError> {
    let magic = u32_at(t, 0).ok_or(GoBinaryError::Malformed("no header"))?;
    if magic != 0xffff_fff0 && magic != 0xffff_fff1 {
        return Err(GoBinaryError::PclntabFormat(magic));
    }
    if t.get(7) != Some(&8) {
        return Err(GoBinaryError::Malformed("pointer size is not 8"));
    }
    let word = |i: usize| u64_at(t, 8 + 8 * i).ok_or(GoBinaryError::Malformed("short header"));
    let nfunc = word(0)? as usize;
    let funcname_off = word(3)? as usize;
    let functab_off = word(7)? as usize;
    let mut functions = HashMap::with_capacity(nfunc);
    for i in 0..nfunc {
        let at = functab_off + 8 * i;
        let (Some(entry_off), Some(func_off), Some(next_entry)) =
            (u32_at(t, at), u32_at(t, at + 4), u32_at(t, at + 8))
        else {
            return Err(GoBinaryError::Malformed(
                "function table outside the section",
            ));
        };
        let func = functab_off + func_off as usize;
        let Some(name_off) = u32_at(t, func + 4) else {
            return Err(GoBinaryError::Malformed("_func outside the section"));
        };
        let Some(name_bytes) = t.get(funcname_off + name_off as usize..) else {
            continue;
        };
        let end = name_bytes.iter().position(|&c| c == 0).unwrap_or(0);
        let name = String::from_utf8_lossy(&name_bytes[..end]).into_owned();
        let function = GoFunction {
            name: name.clone(),
            entry: text_start + u64::from(entry_off),
            end: text_start + u64::from(next_entry),
        };
        functions.entry(name).or_insert(function);
    }
    Ok(functions)
}

/// The version in a `.go.buildinfo` section (Go 1.18+: inline, varint-length-prefixed strings
/// after the 32-byte header).
fn buildinfo_version(b: &[u8]) -> Option<String> {
    if b.get(..14)? != b"\xff Go buildinf:" || b.get(15)? & 2 == 0 {
        return None;
    }
    let mut at = 32;
    let mut len: usize = 0;
    let mut shift = 0;
    loop {
        let byte = *b.get(at)?;
        at += 1;
        len |= usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    String::from_utf8(b.get(at..at + len)?.to_vec()).ok()
}

/// Offsets (from the start of `code`, loaded at `ip`) of every RET instruction, found by
/// decoding instruction after instruction.
fn ret_positions(code: &[u8], ip: u64) -> Vec<usize> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic};
    let mut decoder = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut found = Vec::new();
    while decoder.can_decode() {
        let position = decoder.position();
        let instruction = decoder.decode();
        if instruction.mnemonic() == Mnemonic::Ret {
            found.push(position);
        }
    }
    found
}

/// The Go `major.minor` of a version string (`go1.21.13` → (1, 21)).
pub fn go_minor(version: &str) -> Option<(u32, u32)> {
    let v = version.strip_prefix("go")?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// How `net.sortByRFC6724withSrcs` receives its sources in Go `version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourcesLayout {
    /// `srcs []IP` (Go ≤ 1.19): each a 24-byte slice header to 4 or 16 bytes.
    IpSlices,
    /// `srcs []netip.Addr` (Go 1.21+ as checked): each 24 bytes, the address as two big-endian halves and
    /// a zone pointer (0: invalid, no source).
    NetipAddrs,
}

impl SourcesLayout {
    /// The layout of Go `version`, or `None` outside the versions checked here (1.19, 1.21–1.27).
    pub fn of(version: &str) -> Option<Self> {
        match go_minor(version)? {
            (1, 19) => Some(SourcesLayout::IpSlices),
            (1, 21..=27) => Some(SourcesLayout::NetipAddrs),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rets_are_found_by_decoding_not_by_scanning_for_c3() {
        // mov eax, 0xc3 (b8 c3 00 00 00); ret (c3); ret 8 (c2 08 00); nop; ret
        let code = [
            0xb8, 0xc3, 0x00, 0x00, 0x00, 0xc3, 0xc2, 0x08, 0x00, 0x90, 0xc3,
        ];
        assert_eq!(ret_positions(&code, 0x1000), [5, 6, 10]);
    }

    #[test]
    fn garbage_is_not_an_elf_and_does_not_panic() {
        assert!(matches!(
            GoBinary::parse(b"not an elf at all".to_vec()),
            Err(GoBinaryError::NotElf(_))
        ));
        let mut truncated = b"\x7fELF\x02\x01\x01".to_vec();
        truncated.resize(20, 0);
        truncated[18] = 62;
        assert!(GoBinary::parse(truncated).is_err());
    }

    #[test]
    fn buildinfo_version_is_read_and_versions_map_to_layouts() {
        let mut b = b"\xff Go buildinf:".to_vec();
        b.extend([8, 2]);
        b.resize(32, 0);
        b.push(9);
        b.extend(b"go1.21.13");
        assert_eq!(buildinfo_version(&b).as_deref(), Some("go1.21.13"));
        assert_eq!(SourcesLayout::of("go1.19.8"), Some(SourcesLayout::IpSlices));
        assert_eq!(
            SourcesLayout::of("go1.27.3"),
            Some(SourcesLayout::NetipAddrs)
        );
        assert_eq!(SourcesLayout::of("go1.17"), None);
        assert_eq!(SourcesLayout::of("go1.28"), None);
    }
}
