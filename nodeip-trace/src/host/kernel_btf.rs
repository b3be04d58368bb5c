//! Reads struct member offsets from the kernel's BTF (`/sys/kernel/btf/vmlinux`), so the eBPF
//! side can follow `current->nsproxy->net_ns->ns.inum` (the network namespace id) and the kernel
//! handlers' arguments (`skb->sk`'s namespace, `cb->nlh`, `info->nlhdr`) without CO-RE: userspace
//! finds the offsets for the running kernel and passes them as load-time globals.
//!
//! Only what that needs is parsed: the type section's STRUCT/UNION members (other kinds are
//! skipped by their documented sizes), anonymous members searched through, bitfield offsets
//! (kind_flag) honoured.
use std::collections::HashMap;

use nodeip_trace_common::{handler_offset, route_offset, socket_offset};

/// The NUL-terminated string at `off` in the string section `(start, len)` of `data`.
fn name_bytes(data: &[u8], (start, len): (usize, usize), off: u32) -> &[u8] {
    let strings = data.get(start..start + len).unwrap_or_default();
    let s = strings.get(off as usize..).unwrap_or_default();
    let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
    &s[..end]
}

/// Every offset the eBPF programs take from the running kernel's BTF, found in one parse of it
/// (the 5 MB blob and its index are dropped after). `None` members were not all found.
#[derive(Clone, Debug, Default)]
pub struct KernelOffsets {
    /// Whether the kernel has BTF at all.
    pub btf: bool,
    /// [`KernelTypes::netns_offsets`].
    pub netns: Option<[u32; 3]>,
    /// [`KernelTypes::parent_offsets`].
    pub parent: Option<[u32; 3]>,
    /// [`KernelTypes::socket_offsets`].
    pub socket: Option<[u32; socket_offset::COUNT]>,
    /// [`KernelTypes::route_offsets`].
    pub route: Option<[u32; route_offset::COUNT]>,
    /// [`KernelTypes::handler_offsets`].
    pub handler: ([u32; handler_offset::COUNT], u32),
}

impl KernelOffsets {
    /// The running kernel's offsets, parsed on first use.
    pub fn running() -> &'static KernelOffsets {
        static OFFSETS: std::sync::OnceLock<KernelOffsets> = std::sync::OnceLock::new();
        OFFSETS.get_or_init(|| match KernelTypes::running() {
            Some(types) => KernelOffsets {
                btf: true,
                netns: types.netns_offsets(),
                parent: types.parent_offsets(),
                socket: types.socket_offsets(),
                route: types.route_offsets(),
                handler: types.handler_offsets(),
            },
            None => KernelOffsets::default(),
        })
    }
}

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

/// `BTF_KIND_*` numbers of types that only rename or qualify another: TYPEDEF, VOLATILE, CONST,
/// RESTRICT, TYPE_TAG.
const ALIAS_KINDS: [u32; 5] = [8, 9, 10, 11, 18];

/// A BTF blob, indexed once (where each type's record starts, and struct ids by name); members
/// are read from the blob when asked for, so the kernel's ~100k types cost a few MB, not tens.
#[derive(Debug, Default)]
pub struct KernelTypes {
    data: Vec<u8>,
    /// Start of the type section in `data`.
    types: usize,
    /// Start and length of the string section in `data`.
    strings: (usize, usize),
    /// Offset of type `id`'s record in the type section, at index `id - 1`.
    offsets: Vec<u32>,
    by_name: HashMap<String, u32>,
}

fn u32_at(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

/// One type record's header.
struct TypeRecord {
    kind: u32,
    vlen: usize,
    kind_flag: bool,
    size_or_type: u32,
    /// Where its trailing data (members, …) starts, in `data`.
    extra_at: usize,
}

impl KernelTypes {
    /// Parses a little-endian BTF blob; `None` when it is not one.
    pub fn parse(data: &[u8]) -> Option<Self> {
        Self::from_vec(data.to_vec())
    }

    /// [`KernelTypes::parse`], keeping `data` without a copy.
    fn from_vec(data: Vec<u8>) -> Option<Self> {
        if data.get(0..2)? != [0x9f, 0xeb] {
            return None;
        }
        let hdr_len = u32_at(&data, 4)? as usize;
        let type_off = u32_at(&data, 8)? as usize;
        let type_len = u32_at(&data, 12)? as usize;
        let str_off = u32_at(&data, 16)? as usize;
        let str_len = u32_at(&data, 20)? as usize;
        let types_start = hdr_len + type_off;
        let types = data.get(types_start..types_start + type_len)?;
        data.get(hdr_len + str_off..hdr_len + str_off + str_len)?;
        let mut out = KernelTypes {
            types: types_start,
            strings: (hdr_len + str_off, str_len),
            ..KernelTypes::default()
        };
        let mut at = 0usize;
        while at + 12 <= types.len() {
            let name_off = u32_at(types, at)?;
            let info = u32_at(types, at + 4)?;
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            out.offsets.push(at as u32);
            if kind == KIND_STRUCT && name_off != 0 {
                let id = out.offsets.len() as u32;
                let name = String::from_utf8_lossy(name_bytes(&data, out.strings, name_off));
                out.by_name.entry(name.into_owned()).or_insert(id);
            }
            at += 12
                + match kind {
                    KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
                    KIND_ARRAY => 12,
                    KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
                    KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
                    _ => 0,
                };
        }
        if at > types.len() {
            return None;
        }
        out.data = data;
        Some(out)
    }

    fn record(&self, id: u32) -> Option<TypeRecord> {
        let at = self.types + *self.offsets.get(id.checked_sub(1)? as usize)? as usize;
        let info = u32_at(&self.data, at + 4)?;
        Some(TypeRecord {
            kind: (info >> 24) & 0x1f,
            vlen: (info & 0xffff) as usize,
            kind_flag: info >> 31 == 1,
            size_or_type: u32_at(&self.data, at + 8)?,
            extra_at: at + 12,
        })
    }

    /// The running kernel's types.
    pub fn running() -> Option<Self> {
        Self::from_vec(std::fs::read("/sys/kernel/btf/vmlinux").ok()?)
    }

    /// Byte offset of `member` in struct `name`, looking through anonymous members.
    pub fn member_offset(&self, name: &str, member: &str) -> Option<u32> {
        self.member_path(name, &[member])
    }

    /// Byte offset of a member reached through named members, e.g. `("flowi4", ["uli", "ports",
    /// "dport"])`; each step may also look through anonymous members.
    pub fn member_path(&self, name: &str, path: &[&str]) -> Option<u32> {
        let mut id = *self.by_name.get(name)?;
        let mut bits = 0;
        for member in path {
            let (at, type_id) = self.find_in(id, member.as_bytes(), bits, 0)?;
            bits = at;
            id = self.resolve(type_id);
        }
        bits.is_multiple_of(8).then_some(bits / 8)
    }

    /// Bit offset (from `base_bits`) and type of `member` in struct/union `id`.
    fn find_in(&self, id: u32, member: &[u8], base_bits: u32, depth: u32) -> Option<(u32, u32)> {
        let r = self.record(id)?;
        if (r.kind != KIND_STRUCT && r.kind != KIND_UNION) || depth > 8 {
            return None;
        }
        for i in 0..r.vlen {
            let m = r.extra_at + 12 * i;
            let name_off = u32_at(&self.data, m)?;
            let type_id = u32_at(&self.data, m + 4)?;
            let offset = u32_at(&self.data, m + 8)?;
            let bits = base_bits
                + if r.kind_flag {
                    offset & 0xff_ffff
                } else {
                    offset
                };
            let name = name_bytes(&self.data, self.strings, name_off);
            if name == member {
                return Some((bits, type_id));
            }
            if name.is_empty() {
                if let Some(found) = self.find_in(self.resolve(type_id), member, bits, depth + 1) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Follows typedefs and qualifiers (not pointers) to the underlying type.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..16 {
            match self.record(id) {
                Some(r) if ALIAS_KINDS.contains(&r.kind) => id = r.size_or_type,
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
            self.member_path("net", &["ns", "inum"])?,
        ])
    }

    /// Offsets of `task_struct.real_parent` and `task_struct.tgid` (a process's parent at exec).
    pub fn parent_offsets(&self) -> Option<[u32; 3]> {
        Some([
            self.member_offset("task_struct", "real_parent")?,
            self.member_offset("task_struct", "tgid")?,
            self.member_offset("task_struct", "comm")?,
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
        offsets[socket_offset::SOCK_FAMILY] =
            self.member_path("sock", &["__sk_common", "skc_family"])?;
        offsets[socket_offset::NLK_PORTID] = self.member_offset("netlink_sock", "portid")?;
        Some(offsets)
    }

    /// Offsets the raw route-lookup programs follow, indexed by
    /// `nodeip_trace_common::route_offset::*`; `None` unless all are found (the tracepoints'
    /// arguments are `flowi4`/`fib_nh_common` and `fib6_result`/`fib6_table`/`flowi6`, as
    /// since Linux 5.2).
    pub fn route_offsets(&self) -> Option<[u32; route_offset::COUNT]> {
        let mut o = [0; route_offset::COUNT];
        o[route_offset::FL4_SADDR] = self.member_path("flowi4", &["saddr"])?;
        o[route_offset::FL4_DADDR] = self.member_path("flowi4", &["daddr"])?;
        o[route_offset::FL4_DPORT] = self.member_path("flowi4", &["uli", "ports", "dport"])?;
        o[route_offset::FL6_SADDR] = self.member_path("flowi6", &["saddr"])?;
        o[route_offset::FL6_DADDR] = self.member_path("flowi6", &["daddr"])?;
        o[route_offset::FL6_DPORT] = self.member_path("flowi6", &["uli", "ports", "dport"])?;
        o[route_offset::NHC_DEV] = self.member_path("fib_nh_common", &["nhc_dev"])?;
        o[route_offset::NHC_GW_FAMILY] = self.member_path("fib_nh_common", &["nhc_gw_family"])?;
        o[route_offset::NHC_GW] = self.member_path("fib_nh_common", &["nhc_gw"])?;
        o[route_offset::DEV_NAME] = self.member_path("net_device", &["name"])?;
        o[route_offset::F6_RESULT_NH] = self.member_path("fib6_result", &["nh"])?;
        o[route_offset::F6_RESULT_TYPE] = self.member_path("fib6_result", &["fib6_type"])?;
        o[route_offset::F6_NH_COMMON] = self.member_path("fib6_nh", &["nh_common"])?;
        o[route_offset::F6_TABLE_ID] = self.member_path("fib6_table", &["tb6_id"])?;
        Some(o)
    }

    /// Offsets the kernel handler probes follow, indexed by
    /// `nodeip_trace_common::handler_offset::*`, and a bit mask of those found.
    pub fn handler_offsets(&self) -> ([u32; handler_offset::COUNT], u32) {
        let mut found = [None; handler_offset::COUNT];
        found[handler_offset::SKB_SK] = self.member_offset("sk_buff", "sk");
        found[handler_offset::SOCK_NET] = self.member_path("sock", &["__sk_common", "skc_net"]);
        found[handler_offset::NET_INUM] = self.member_path("net", &["ns", "inum"]);
        found[handler_offset::CALLBACK_NLH] = self.member_offset("netlink_callback", "nlh");
        found[handler_offset::GENL_INFO_NLHDR] = self.member_offset("genl_info", "nlhdr");
        found[handler_offset::SEQ_FILE_BUF] = self.member_offset("seq_file", "buf");
        found[handler_offset::SEQ_FILE_SIZE] = self.member_offset("seq_file", "size");
        found[handler_offset::SEQ_FILE_COUNT] = self.member_offset("seq_file", "count");
        found[handler_offset::SEQ_FILE_PRIVATE] = self.member_offset("seq_file", "private");
        found[handler_offset::SEQ_NET_PRIVATE_NET] = self.member_offset("seq_net_private", "net");
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
    fn follows_paths_through_named_members() {
        let t = KernelTypes::parse(&blob()).unwrap();
        assert_eq!(t.member_path("outer", &["ns", "inum"]), Some(12));
        assert_eq!(t.member_path("outer", &["b"]), Some(4));
        assert_eq!(t.member_path("outer", &["ns", "b"]), None);
        assert_eq!(t.member_path("outer", &["a", "pad"]), None);
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
            crate::message::skipped("this kernel has no BTF");
            return;
        }
        let types = KernelTypes::running().unwrap();
        let offsets = types.netns_offsets();
        assert!(offsets.is_some_and(|o| o[0] > 0), "{offsets:?}");
        let (handler, known) = types.handler_offsets();
        assert_eq!(known, (1 << handler_offset::COUNT) - 1, "{handler:?}");
        assert!(handler[handler_offset::SOCK_NET] > 0);
        assert!(types.socket_offsets().is_some());
        let route = types.route_offsets().expect("route lookup offsets");
        // flowi4: daddr follows saddr, the ports follow daddr; flowi6: daddr precedes saddr.
        assert_eq!(
            route[route_offset::FL4_DADDR],
            route[route_offset::FL4_SADDR] + 4
        );
        assert_eq!(
            route[route_offset::FL4_DPORT],
            route[route_offset::FL4_DADDR] + 4
        );
        assert_eq!(
            route[route_offset::FL6_SADDR],
            route[route_offset::FL6_DADDR] + 16
        );
    }
}
