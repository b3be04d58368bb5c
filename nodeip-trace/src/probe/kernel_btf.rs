//! Reads struct member offsets from the kernel's BTF (`/sys/kernel/btf/vmlinux`), so the eBPF
//! side can follow `current->nsproxy->net_ns->ns.inum` (the network namespace id) and the kernel
//! handlers' arguments (`skb->sk`'s namespace, `cb->nlh`, `info->nlhdr`) without CO-RE: userspace
//! finds the offsets for the running kernel and passes them as load-time globals.
//!
//! Only what that needs is parsed: the type section's STRUCT/UNION members (other kinds are
//! skipped by their documented sizes), anonymous members searched through, bitfield offsets
//! (kind_flag) honoured.
use std::collections::HashMap;

use nodeip_trace_common::{handler_offset, socket_offset};

/// `BTF_KIND_*` numbers used here.
const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

/// A struct or union member.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Member {
    name: String,
    type_id: u32,
    bit_offset: u32,
}

/// The structs and unions of a BTF blob, by type id, and struct ids by name.
#[derive(Debug, Default)]
pub struct KernelTypes {
    composites: HashMap<u32, Vec<Member>>,
    by_name: HashMap<String, u32>,
    /// `BTF_KIND_TYPEDEF`/`CONST`/`VOLATILE`/... id → the type it refers to.
    aliases: HashMap<u32, u32>,
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

fn name_at(strings: &[u8], off: u32) -> String {
    let s = strings.get(off as usize..).unwrap_or_default();
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    String::from_utf8_lossy(&s[..end]).into_owned()
}

impl KernelTypes {
    /// Parses a little-endian BTF blob; `None` when it is not one.
    pub fn parse(data: &[u8]) -> Option<Self> {
        if data.get(0..2)? != [0x9f, 0xeb] {
            return None;
        }
        let hdr_len = u32_at(data, 4)? as usize;
        let type_off = u32_at(data, 8)? as usize;
        let type_len = u32_at(data, 12)? as usize;
        let str_off = u32_at(data, 16)? as usize;
        let str_len = u32_at(data, 20)? as usize;
        let types = data.get(hdr_len + type_off..hdr_len + type_off + type_len)?;
        let strings = data.get(hdr_len + str_off..hdr_len + str_off + str_len)?;
        let mut out = KernelTypes::default();
        let (mut at, mut id) = (0usize, 1u32);
        while at + 12 <= types.len() {
            let name_off = u32_at(types, at)?;
            let info = u32_at(types, at + 4)?;
            let size_or_type = u32_at(types, at + 8)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let kind_flag = info >> 31 == 1;
            at += 12;
            let extra = match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                KIND_ARRAY => 12,
                KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
                KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
                _ => 0,
            };
            match kind {
                KIND_STRUCT | KIND_UNION => {
                    let members = (0..vlen)
                        .map(|i| {
                            let m = at + 12 * i;
                            let offset = u32_at(types, m + 8)?;
                            Some(Member {
                                name: name_at(strings, u32_at(types, m)?),
                                type_id: u32_at(types, m + 4)?,
                                bit_offset: if kind_flag {
                                    offset & 0xff_ffff
                                } else {
                                    offset
                                },
                            })
                        })
                        .collect::<Option<Vec<_>>>()?;
                    let name = name_at(strings, name_off);
                    if kind == KIND_STRUCT && !name.is_empty() {
                        out.by_name.entry(name).or_insert(id);
                    }
                    out.composites.insert(id, members);
                }
                // PTR, TYPEDEF, VOLATILE, CONST, RESTRICT, TYPE_TAG refer to another type.
                2 | 8 | 9 | 10 | 11 | 18 => {
                    out.aliases.insert(id, size_or_type);
                }
                _ => {}
            }
            at += extra;
            id += 1;
        }
        Some(out)
    }

    /// The running kernel's types.
    pub fn running() -> Option<Self> {
        Self::parse(&std::fs::read("/sys/kernel/btf/vmlinux").ok()?)
    }

    /// Byte offset of `member` in struct `name`, looking through anonymous members.
    pub fn member_offset(&self, name: &str, member: &str) -> Option<u32> {
        self.find_in(*self.by_name.get(name)?, member, 0)
    }

    fn find_in(&self, id: u32, member: &str, base_bits: u32) -> Option<u32> {
        for m in self.composites.get(&id)? {
            let bits = base_bits + m.bit_offset;
            if m.name == member {
                return bits.is_multiple_of(8).then_some(bits / 8);
            }
            if m.name.is_empty() {
                if let Some(found) = self.find_in(self.resolve(m.type_id), member, bits) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Follows typedefs and qualifiers (not pointers) to the underlying type.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..16 {
            match self.aliases.get(&id) {
                Some(next) if !self.composites.contains_key(&id) => id = *next,
                _ => break,
            }
        }
        id
    }

    /// Offsets for `current->nsproxy->net_ns->ns.inum`: `[task_struct.nsproxy,
    /// nsproxy.net_ns, net.ns + ns_common.inum]`, or `None` when any is missing.
    pub fn netns_offsets(&self) -> Option<[u32; 3]> {
        Some([
            self.member_offset("task_struct", "nsproxy")?,
            self.member_offset("nsproxy", "net_ns")?,
            self.member_offset("net", "ns")? + self.member_offset("ns_common", "inum")?,
        ])
    }

    /// Offsets the socket-layer netlink capture follows, indexed by
    /// `nodeip_trace_common::socket_offset::*`; `None` unless all are found (`sk_protocol` must be
    /// a whole `u16`, as since Linux 5.6).
    pub fn socket_offsets(&self) -> Option<[u32; socket_offset::COUNT]> {
        let mut offsets = [0; socket_offset::COUNT];
        offsets[socket_offset::SOCKET_SK] = self.member_offset("socket", "sk")?;
        offsets[socket_offset::SOCK_PROTOCOL] = self.member_offset("sock", "sk_protocol")?;
        offsets[socket_offset::SKB_DATA] = self.member_offset("sk_buff", "data")?;
        offsets[socket_offset::SKB_LEN] = self.member_offset("sk_buff", "len")?;
        Some(offsets)
    }

    /// Offsets the kernel handler probes follow, indexed by
    /// `nodeip_trace_common::handler_offset::*`, and a bit mask of those found.
    pub fn handler_offsets(&self) -> ([u32; handler_offset::COUNT], u32) {
        let mut found = [None; handler_offset::COUNT];
        found[handler_offset::SKB_SK] = self.member_offset("sk_buff", "sk");
        found[handler_offset::SOCK_NET] = self
            .member_offset("sock", "__sk_common")
            .zip(self.member_offset("sock_common", "skc_net"))
            .map(|(a, b)| a + b);
        found[handler_offset::NET_INUM] = self
            .member_offset("net", "ns")
            .zip(self.member_offset("ns_common", "inum"))
            .map(|(a, b)| a + b);
        found[handler_offset::CALLBACK_NLH] = self.member_offset("netlink_callback", "nlh");
        found[handler_offset::GENL_INFO_NLHDR] = self.member_offset("genl_info", "nlhdr");
        let mut offsets = [0; handler_offset::COUNT];
        let mut known = 0;
        for (i, f) in found.iter().enumerate() {
            if let Some(off) = f {
                offsets[i] = *off;
                known |= 1 << i;
            }
        }
        (offsets, known)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny BTF: int, `struct inner { int pad; int inum; }`, and
    /// `struct outer { int a; struct { int b; struct inner ns; }; }` (anonymous member).
    fn blob() -> Vec<u8> {
        let strings = b"\0int\0pad\0inum\0inner\0a\0b\0ns\0outer\0";
        let off = |s: &str| {
            let needle = format!("\0{s}\0");
            strings
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .unwrap() as u32
                + 1
        };
        let mut types = Vec::new();
        let mut ty = |name: u32, info: u32, size: u32, extra: &[u32]| {
            for v in [name, info, size].iter().chain(extra) {
                types.extend_from_slice(&v.to_le_bytes());
            }
        };
        ty(off("int"), KIND_INT << 24, 4, &[32]); // 1
        ty(
            off("inner"),
            KIND_STRUCT << 24 | 2,
            8,
            &[off("pad"), 1, 0, off("inum"), 1, 32],
        ); // 2
        ty(
            0,
            KIND_STRUCT << 24 | 2,
            12,
            &[off("b"), 1, 0, off("ns"), 2, 32],
        ); // 3 anonymous
        ty(
            off("outer"),
            KIND_STRUCT << 24 | 2,
            16,
            &[off("a"), 1, 0, 0, 3, 32],
        ); // 4
        let mut data = vec![0x9f, 0xeb, 1, 0];
        for v in [
            24u32,
            0,
            types.len() as u32,
            types.len() as u32,
            strings.len() as u32,
        ] {
            data.extend_from_slice(&v.to_le_bytes());
        }
        data.extend_from_slice(&types);
        data.extend_from_slice(strings);
        data
    }

    #[test]
    fn finds_members_through_anonymous_structs() {
        let t = KernelTypes::parse(&blob()).unwrap();
        assert_eq!(t.member_offset("inner", "inum"), Some(4));
        assert_eq!(t.member_offset("outer", "a"), Some(0));
        assert_eq!(t.member_offset("outer", "ns"), Some(8));
        assert_eq!(t.member_offset("outer", "missing"), None);
        assert_eq!(t.member_offset("nothing", "a"), None);
    }

    #[test]
    fn garbage_is_not_btf() {
        assert!(KernelTypes::parse(b"").is_none());
        assert!(KernelTypes::parse(&[0x9f, 0xeb, 1, 0, 255, 255, 255, 255]).is_none());
        let mut cut = blob();
        cut.truncate(40);
        assert!(KernelTypes::parse(&cut).is_none());
    }

    #[test]
    fn the_running_kernel_has_netns_offsets() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            eprintln!("skipped: this kernel has no BTF");
            return;
        }
        let types = KernelTypes::running().unwrap();
        let offsets = types.netns_offsets();
        assert!(offsets.is_some_and(|o| o[0] > 0), "{offsets:?}");
        let (handler, known) = types.handler_offsets();
        assert_eq!(known, (1 << handler_offset::COUNT) - 1, "{handler:?}");
        assert!(handler[handler_offset::SOCK_NET] > 0);
        assert!(types.socket_offsets().is_some());
    }
}
