//! Executables read from their bytes: the sections, loadable segments and symbols of a 64-bit
//! little-endian x86-64 ELF file, and what kind of resolver a statically linked one carries.
//! Used to put uprobes in executables ([`super::go_binary`] for Go's resolver; the C library's
//! `getaddrinfo` linked into static programs). Never panics on bad input: a malformed file is an
//! [`HostError::NotElf`].
use super::error::HostError;
use super::libc_locator::LibcKind;
use super::mapped_file::MappedFile;

/// An ELF section: name, virtual address, file offset, size, type.
#[derive(Clone, Debug)]
pub struct ElfSection {
    /// Its name (`.gopclntab`).
    pub name: String,
    /// Virtual address.
    pub addr: u64,
    /// File offset.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

/// A loadable segment: virtual address, file offset, file size.
#[derive(Clone, Copy, Debug)]
struct Segment {
    vaddr: u64,
    offset: u64,
    filesz: u64,
}

/// Little-endian reads that say `None` past the end.
pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
/// See [`u16_at`].
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
/// See [`u16_at`].
pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// Where an image's bytes live: a copy (tests, small inputs) or a mapping of the file (what
/// the tracer uses for executables on disk: see [`MappedFile`]).
pub enum ElfBytes {
    /// Bytes in memory.
    Owned(Vec<u8>),
    /// The file, mapped.
    Mapped(MappedFile),
}

impl std::ops::Deref for ElfBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            ElfBytes::Owned(bytes) => bytes,
            ElfBytes::Mapped(file) => file,
        }
    }
}

impl From<Vec<u8>> for ElfBytes {
    fn from(bytes: Vec<u8>) -> Self {
        ElfBytes::Owned(bytes)
    }
}

impl From<MappedFile> for ElfBytes {
    fn from(file: MappedFile) -> Self {
        ElfBytes::Mapped(file)
    }
}

/// The 64-bit register a write to `reg` lands in, for the argument registers (`edx` → `rdx`);
/// others as they are.
fn argument_register(reg: iced_x86::Register) -> iced_x86::Register {
    use iced_x86::Register::*;
    match reg {
        EDI => RDI,
        ESI => RSI,
        EDX => RDX,
        ECX => RCX,
        R8D => R8,
        R9D => R9,
        EAX => RAX,
        other => other,
    }
}

/// A stub function's jump ([`ElfImage::tail_jump`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailJump {
    /// The file offset the stub jumps to.
    pub target_offset: u64,
    /// The registers the stub writes before jumping (full registers: `edx` as `rdx`).
    pub written: Vec<iced_x86::Register>,
    /// It copies its third argument (`rdx`) into the fourth (`rcx`).
    pub rcx_from_rdx: bool,
}

/// A parsed ELF executable: its bytes, sections and loadable segments.
pub struct ElfImage {
    bytes: ElfBytes,
    sections: Vec<ElfSection>,
    segments: Vec<Segment>,
    /// It names a program interpreter (`PT_INTERP`): dynamically linked.
    pub dynamic: bool,
    /// The program interpreter it names (`/lib64/ld-linux-x86-64.so.2`), when it names one
    /// that can be read.
    pub interpreter: Option<String>,
}

/// `PT_LOAD` and `PT_INTERP`.
const PT_LOAD: u32 = 1;
const PT_INTERP: u32 = 3;

impl ElfImage {
    /// Parses an executable's bytes (a `Vec<u8>` or a [`MappedFile`]).
    pub fn parse(bytes: impl Into<ElfBytes>) -> Result<Self, HostError> {
        let bytes = bytes.into();
        let b: &[u8] = &bytes;
        if b.get(..4) != Some(b"\x7fELF") {
            return Err(HostError::NotElf("no ELF magic"));
        }
        if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
            return Err(HostError::NotElf("not 64-bit little-endian"));
        }
        if u16_at(b, 18) != Some(62) {
            return Err(HostError::NotElf("not x86-64"));
        }
        let truncated = || HostError::NotElf("truncated headers");
        let phoff = u64_at(b, 32).ok_or_else(truncated)? as usize;
        let shoff = u64_at(b, 40).ok_or_else(truncated)? as usize;
        let phentsize = u16_at(b, 54).ok_or_else(truncated)? as usize;
        let phnum = u16_at(b, 56).ok_or_else(truncated)? as usize;
        let shentsize = u16_at(b, 58).ok_or_else(truncated)? as usize;
        let shnum = u16_at(b, 60).ok_or_else(truncated)? as usize;
        let shstrndx = u16_at(b, 62).ok_or_else(truncated)? as usize;
        let mut segments = Vec::new();
        let mut dynamic = false;
        let mut interpreter = None;
        for i in 0..phnum {
            let Some(at) = i
                .checked_mul(phentsize)
                .and_then(|o| o.checked_add(phoff))
                .filter(|at| at.checked_add(40).is_some())
            else {
                return Err(HostError::NotElf("program headers outside the file"));
            };
            match u32_at(b, at) {
                Some(PT_LOAD) => {
                    let (Some(offset), Some(vaddr), Some(filesz)) =
                        (u64_at(b, at + 8), u64_at(b, at + 16), u64_at(b, at + 32))
                    else {
                        return Err(HostError::NotElf("truncated program header"));
                    };
                    segments.push(Segment {
                        vaddr,
                        offset,
                        filesz,
                    });
                }
                Some(PT_INTERP) => {
                    dynamic = true;
                    interpreter = u64_at(b, at + 8)
                        .zip(u64_at(b, at + 32))
                        .and_then(|(offset, size)| {
                            let start = usize::try_from(offset).ok()?;
                            b.get(start..start.checked_add(usize::try_from(size).ok()?)?)
                        })
                        .map(|name| c_string(name, 0));
                }
                _ => {}
            }
        }
        let header = |i: usize| -> Option<(u32, u64, u64, u64)> {
            let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
            at.checked_add(40)?;
            Some((
                u32_at(b, at)?,
                u64_at(b, at + 16)?,
                u64_at(b, at + 24)?,
                u64_at(b, at + 32)?,
            ))
        };
        let (_, _, strtab_off, strtab_size) =
            header(shstrndx).ok_or(HostError::NotElf("no section name table"))?;
        let strtab = b
            .get(strtab_off as usize..strtab_off.saturating_add(strtab_size) as usize)
            .ok_or(HostError::NotElf("section name table outside the file"))?;
        let mut sections = Vec::new();
        for i in 0..shnum {
            let Some((name_off, addr, offset, size)) = header(i) else {
                break;
            };
            sections.push(ElfSection {
                name: c_string(strtab, name_off as usize),
                addr,
                offset,
                size,
            });
        }
        Ok(ElfImage {
            bytes,
            sections,
            segments,
            dynamic,
            interpreter,
        })
    }

    /// The section named `name`.
    pub fn section(&self, name: &str) -> Option<&ElfSection> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The bytes of the section named `name` (`None` when absent or outside the file).
    pub fn section_bytes(&self, name: &str) -> Option<&[u8]> {
        let s = self.section(name)?;
        self.bytes
            .get(s.offset as usize..s.offset.checked_add(s.size)? as usize)
    }

    /// All the file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The file offset of virtual address `vaddr` (through the loadable segments).
    pub fn file_offset(&self, vaddr: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|s| vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz)
            .map(|s| vaddr - s.vaddr + s.offset)
    }

    /// The value of the first symbol named `name` defined in `symbols`/`names` (an `Elf64_Sym`
    /// table and its string table).
    fn symbol_in(&self, symbols: &str, names: &str, name: &str) -> Option<u64> {
        let (Some(symtab), Some(strtab)) = (self.section_bytes(symbols), self.section_bytes(names))
        else {
            return None;
        };
        // Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64.
        symtab.chunks_exact(24).find_map(|sym| {
            let shndx = u16::from_le_bytes([sym[6], sym[7]]);
            let name_off = u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]) as usize;
            let named = strtab
                .get(name_off..)
                .is_some_and(|s| s.starts_with(name.as_bytes()) && s.get(name.len()) == Some(&0));
            (shndx != 0 && named).then(|| u64_at(sym, 8)).flatten()
        })
    }

    /// Whether `.symtab` (static symbols: absent from stripped files) defines `name`.
    pub fn defines_symbol(&self, name: &str) -> bool {
        self.symbol_in(".symtab", ".strtab", name).is_some()
    }

    /// The address of the symbol `name`: the dynamic symbols' (a shared library's exports),
    /// else the static ones'.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.symbol_in(".dynsym", ".dynstr", name)
            .or_else(|| self.symbol_in(".symtab", ".strtab", name))
    }

    /// Where the function `name` jumps when it is only a stub that sets argument registers and
    /// jumps (glibc's `fopen`: `mov $1,%edx; jmp __fopen_internal`; `getline`: `mov %rdx,%rcx;
    /// mov $10,%edx; jmp __getdelim`): the target's file offset and how the stub moved the
    /// arguments. A uprobe at such a stub's first instruction makes the kernel single-step it out
    /// of line (a `mov` cannot be emulated), which costs tens of microseconds per call in some
    /// virtual machines; the target's first instruction (a `push`) is emulated. `None` when
    /// `name` is not such a stub.
    pub fn tail_jump(&self, name: &str) -> Option<TailJump> {
        use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};
        let vaddr = self.symbol_address(name)?;
        let at = usize::try_from(self.file_offset(vaddr)?).ok()?;
        let code = self.bytes().get(at..at.checked_add(32)?)?;
        let mut jump = TailJump {
            target_offset: 0,
            written: Vec::new(),
            rcx_from_rdx: false,
        };
        for insn in Decoder::with_ip(64, code, vaddr, DecoderOptions::NONE)
            .iter()
            .take(4)
        {
            match (insn.mnemonic(), insn.op0_kind(), insn.op1_kind()) {
                (Mnemonic::Mov, OpKind::Register, OpKind::Immediate32 | OpKind::Immediate64) => {
                    jump.written.push(argument_register(insn.op0_register()));
                }
                (Mnemonic::Mov, OpKind::Register, OpKind::Register) => {
                    let (to, from) = (insn.op0_register(), insn.op1_register());
                    if to == Register::RCX && from == Register::RDX {
                        jump.rcx_from_rdx = true;
                    }
                    jump.written.push(argument_register(to));
                }
                (Mnemonic::Jmp, OpKind::NearBranch64, _) => {
                    jump.target_offset = self.file_offset(insn.near_branch64())?;
                    return Some(jump);
                }
                _ => return None,
            }
        }
        None
    }

    /// The C library whose `getaddrinfo` is linked into this file, when it is a statically
    /// linked program carrying one (musl's has `__init_libc`; otherwise glibc's). `None` for
    /// dynamic programs (their libc is found in their maps), stripped files (no symbols to put
    /// the probe at) and programs without `getaddrinfo`.
    pub fn static_resolver(&self) -> Option<LibcKind> {
        if self.dynamic || !self.defines_symbol("getaddrinfo") {
            return None;
        }
        Some(if self.defines_symbol("__init_libc") {
            LibcKind::Musl
        } else {
            LibcKind::Glibc
        })
    }
}

/// The NUL-terminated string at `at` of `table` (empty when outside).
fn c_string(table: &[u8], at: usize) -> String {
    table
        .get(at..)
        .map(|s| {
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            String::from_utf8_lossy(&s[..end]).into_owned()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_and_truncated_files_are_errors_not_panics() {
        for bytes in [
            Vec::new(),
            b"#!/bin/sh\n".to_vec(),
            b"\x7fELF\x02\x01".to_vec(),
            {
                let mut v = b"\x7fELF\x02\x01\x01\0".to_vec();
                v.resize(64, 0xff);
                v[18] = 62;
                v[19] = 0;
                v
            },
        ] {
            assert!(ElfImage::parse(bytes).is_err());
        }
    }

    /// Debian 12's glibc 2.36 (this project's machines): `fopen` and `getline` are stubs that
    /// set a register and jump; `getaddrinfo` is a real function.
    #[test]
    fn glibc_s_fopen_and_getline_are_stubs_that_jump() {
        use iced_x86::Register;
        let libc =
            ElfImage::parse(std::fs::read("/lib/x86_64-linux-gnu/libc.so.6").unwrap()).unwrap();
        let fopen = libc.tail_jump("fopen").expect("fopen is a stub");
        assert_eq!(fopen.written, [Register::RDX]);
        assert!(!fopen.rcx_from_rdx);
        let getline = libc.tail_jump("getline").expect("getline is a stub");
        assert!(getline.rcx_from_rdx);
        assert_eq!(getline.written, [Register::RCX, Register::RDX]);
        let getdelim = libc.symbol_address("__getdelim").unwrap();
        assert_eq!(Some(getline.target_offset), libc.file_offset(getdelim));
        // The target starts with a push (emulated by the kernel's uprobes, not single-stepped).
        let at = getline.target_offset as usize;
        assert!(
            matches!(libc.bytes()[at], 0x41 | 0x50..=0x57),
            "{:#x}",
            libc.bytes()[at]
        );
        assert_eq!(libc.tail_jump("getaddrinfo"), None);
        assert_eq!(libc.tail_jump("no_such_symbol"), None);
    }

    #[test]
    fn this_test_binary_is_dynamic_and_carries_no_static_resolver() {
        let image = ElfImage::parse(std::fs::read("/proc/self/exe").unwrap()).unwrap();
        assert!(image.dynamic);
        let interpreter = image.interpreter.as_deref().unwrap_or_default();
        assert!(
            interpreter.starts_with('/') && interpreter.contains("ld-"),
            "{interpreter}"
        );
        assert_eq!(image.static_resolver(), None);
        assert!(image.section(".text").is_some());
    }
}
