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

use super::elf::{u32_at, u64_at, ElfImage};
use super::error::HostError;

/// The cgo wrapper Go's `net` calls libc's `getaddrinfo` through (cgo builds, Go 1.19–1.27): a
/// uprobe at its entry marks the thread, so the getaddrinfo that follows says it came from Go.
pub const GO_CGO_GETADDRINFO: &str = "net._C2func_getaddrinfo";
/// The function of Go's `net` whose arguments and result the Go resolver probes read.
pub const GO_SORT_FUNCTION: &str = "net.sortByRFC6724withSrcs";
/// The function whose entry gives the name a goroutine looks up.
pub const GO_LOOKUP_FUNCTION: &str = "net.(*Resolver).goLookupIPCNAMEOrder";
/// Go's host lookup (`LookupHost`): it returns `/etc/hosts` answers without sorting them.
pub const GO_HOST_FUNCTION: &str = "net.(*Resolver).goLookupHostOrder";
/// Go's `lookupIP` (lookup_unix.go): every `LookupIP`/`Dial` lookup passes through it, by Go's
/// own resolver or by cgo; its RETs send the answers of Go's own resolver that no sort saw.
pub const GO_LOOKUP_IP_FUNCTION: &str = "net.(*Resolver).lookupIP";

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
    /// The executable's ELF layout (also what a statically linked C resolver in it needs).
    pub elf: ElfImage,
    functions: HashMap<String, GoFunction>,
    /// The Go version from `.go.buildinfo` (`go1.21.13`), when present.
    pub version: Option<String>,
    /// The `cgo` functions of the `net` package are linked in (its lookups may go to libc).
    pub cgo_net: bool,
}

impl GoBinary {
    /// Maps and parses the executable at `path`.
    pub fn open(path: &Path) -> Result<Self, HostError> {
        let file =
            super::mapped_file::MappedFile::open(path).map_err(|source| HostError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Self::from_elf(ElfImage::parse(file)?)
    }

    /// Parses an executable's bytes.
    pub fn parse(bytes: Vec<u8>) -> Result<Self, HostError> {
        Self::from_elf(ElfImage::parse(bytes)?)
    }

    /// Reads the Go side of an executable already parsed as ELF.
    pub fn from_elf(elf: ElfImage) -> Result<Self, HostError> {
        let pclntab = elf.section(".gopclntab").ok_or(HostError::NotGo)?;
        let table = elf
            .section_bytes(".gopclntab")
            .ok_or(HostError::MalformedPclntab("section outside the file"))?;
        let text_start = match u64_at(table, 8 + 8 * 2) {
            Some(start) if start != 0 => start,
            // Go 1.26+ leaves pcHeader.textStart 0: the runtime takes it from its moduledata.
            _ => moduledata_text(elf.bytes(), pclntab.addr)
                .or_else(|| elf.section(".text").map(|s| s.addr))
                .ok_or(HostError::MalformedPclntab("no text start"))?,
        };
        let functions = read_functions(table, text_start)?;
        let version = elf
            .section_bytes(".go.buildinfo")
            .and_then(buildinfo_version);
        let cgo_net = functions.contains_key("net.cgoLookupIP")
            || functions.contains_key("net.cgoLookupIPCNAME")
            || functions.contains_key(GO_CGO_GETADDRINFO);
        Ok(GoBinary {
            elf,
            functions,
            version,
            cgo_net,
        })
    }

    /// The function named `name`, if linked in.
    pub fn function(&self, name: &str) -> Option<&GoFunction> {
        self.functions.get(name)
    }

    /// Entry and RET offsets of the function named `name`.
    pub fn probes(&self, name: &str) -> Option<FunctionProbes> {
        let function = self.function(name)?.clone();
        let entry_offset = self.elf.file_offset(function.entry)?;
        let len = function.end.checked_sub(function.entry)? as usize;
        let code = self
            .elf
            .bytes()
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

    /// The file offset of the C library's `getaddrinfo` linked into a statically built cgo
    /// program whose symbols were stripped (as k3s ships: Go linked against a static musl,
    /// `-s -w`): found through the cgo glue. `net._C2func_getaddrinfo` loads the address of
    /// the C wrapper `_cgo_<hash>_C2func_getaddrinfo` from a Go variable (`MOVQ sym(SB), AX`
    /// before `runtime.cgocall`); the wrapper brackets its call between two calls of
    /// `_cgo_topofstack`, and of the calls in between, the one whose target is not a few-
    /// instruction accessor (`__errno_location`) is `getaddrinfo`. Errs with why when any step
    /// does not match (another compiler's wrapper, a dynamic program).
    pub fn cgo_getaddrinfo_offset(&self) -> Result<u64, HostError> {
        use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
        let wrapper = self.cgo_wrapper_address()?;
        let wrapper_code = self
            .code_at(wrapper, 512)
            .ok_or(HostError::CgoGlue("the C wrapper is not in the file"))?;
        let mut calls = Vec::new();
        for i in Decoder::with_ip(64, wrapper_code, wrapper, DecoderOptions::NONE).iter() {
            match i.mnemonic() {
                Mnemonic::Call if i.op0_kind() == OpKind::NearBranch64 => {
                    calls.push(i.near_branch64())
                }
                Mnemonic::Ret => break,
                _ => {}
            }
        }
        let first = *calls
            .first()
            .ok_or(HostError::CgoGlue("the C wrapper calls nothing"))?;
        let again = calls[1..]
            .iter()
            .position(|t| *t == first)
            .ok_or(HostError::CgoGlue(
                "the C wrapper does not call _cgo_topofstack twice",
            ))?;
        // An accessor returns within its first few instructions.
        let tiny = |target: u64| {
            self.code_at(target, 32).is_some_and(|code| {
                Decoder::with_ip(64, code, target, DecoderOptions::NONE)
                    .iter()
                    .take(4)
                    .any(|i| i.mnemonic() == Mnemonic::Ret)
            })
        };
        let between: Vec<u64> = calls[1..=again]
            .iter()
            .copied()
            .filter(|t| !tiny(*t))
            .collect();
        match between.as_slice() {
            [getaddrinfo] => self
                .elf
                .file_offset(*getaddrinfo)
                .ok_or(HostError::CgoGlue("getaddrinfo is not in the file")),
            _ => Err(HostError::CgoGlue(
                "the C wrapper's calls do not single out getaddrinfo",
            )),
        }
    }

    /// The file offset of the C wrapper `_cgo_<hash>_C2func_getaddrinfo` (see
    /// [`GoBinary::cgo_getaddrinfo_offset`]): C code that runs on the thread that calls the C
    /// library's getaddrinfo, with no Go scheduling in between — unlike the entry of the Go glue
    /// `net._C2func_getaddrinfo`, after which the goroutine may be preempted and go on on
    /// another thread (seen under QEMU's TCG: the mark was left on the first thread).
    pub fn cgo_wrapper_offset(&self) -> Result<u64, HostError> {
        let wrapper = self.cgo_wrapper_address()?;
        self.elf
            .file_offset(wrapper)
            .ok_or(HostError::CgoGlue("the C wrapper is not in the file"))
    }

    /// `len` bytes of the file at virtual address `vaddr` (fewer at its end).
    fn code_at(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
        let at = self.elf.file_offset(vaddr)? as usize;
        let bytes = self.elf.bytes();
        bytes.get(at..(at + len).min(bytes.len()))
    }

    /// The address of the C wrapper the Go glue `net._C2func_getaddrinfo` calls through
    /// `runtime.cgocall`: loaded from a Go variable (`MOVQ sym(SB), AX`).
    fn cgo_wrapper_address(&self) -> Result<u64, HostError> {
        use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};
        let glue = self.function(GO_CGO_GETADDRINFO).ok_or(HostError::CgoGlue(
            "no net._C2func_getaddrinfo (not a cgo build)",
        ))?;
        let glue_len = glue.end.saturating_sub(glue.entry) as usize;
        let glue_code = self
            .code_at(glue.entry, glue_len)
            .ok_or(HostError::CgoGlue("cgo glue outside the file"))?;
        let mut decoder = Decoder::with_ip(64, glue_code, glue.entry, DecoderOptions::NONE);
        let pointer = decoder
            .iter()
            .find(|i| {
                i.mnemonic() == Mnemonic::Mov
                    && i.op_count() == 2
                    && i.op1_kind() == OpKind::Memory
                    && i.memory_base() == Register::RIP
            })
            .map(|i| i.ip_rel_memory_address())
            .ok_or(HostError::CgoGlue(
                "no load of the C wrapper's address in the cgo glue",
            ))?;
        self.code_at(pointer, 8)
            .and_then(|b| u64_at(b, 0))
            .ok_or(HostError::CgoGlue(
                "the C wrapper's address is not in the file",
            ))
    }

    /// Whether a section named `name` exists.
    pub fn has_section(&self, name: &str) -> bool {
        self.elf.section(name).is_some()
    }
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
fn read_functions(t: &[u8], text_start: u64) -> Result<HashMap<String, GoFunction>, HostError> {
    let magic = u32_at(t, 0).ok_or(HostError::MalformedPclntab("no header"))?;
    if magic != 0xffff_fff0 && magic != 0xffff_fff1 {
        return Err(HostError::PclntabFormat(magic));
    }
    if t.get(7) != Some(&8) {
        return Err(HostError::MalformedPclntab("pointer size is not 8"));
    }
    let word = |i: usize| u64_at(t, 8 + 8 * i).ok_or(HostError::MalformedPclntab("short header"));
    let nfunc = word(0)? as usize;
    let funcname_off = word(3)? as usize;
    let functab_off = word(7)? as usize;
    let mut functions = HashMap::with_capacity(nfunc);
    for i in 0..nfunc {
        let at = functab_off + 8 * i;
        let (Some(entry_off), Some(func_off), Some(next_entry)) =
            (u32_at(t, at), u32_at(t, at + 4), u32_at(t, at + 8))
        else {
            return Err(HostError::MalformedPclntab(
                "function table outside the section",
            ));
        };
        let func = functab_off + func_off as usize;
        let Some(name_off) = u32_at(t, func + 4) else {
            return Err(HostError::MalformedPclntab("_func outside the section"));
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

    /// What a Go version whose layout is not known gets (see [`SourcesLayout::of`]).
    pub fn unknown_note(version: &str) -> String {
        format!(
            "sources layout of Go {version:?} not known (1.19 and 1.21–1.27 are): its sorts are shown, not explained"
        )
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
            Err(HostError::NotElf(_))
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
