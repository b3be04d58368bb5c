//! Ring-buffer bytes → typed kernel records. The only place that reinterprets eBPF output.
//!
//! Every record starts with an [`EventHeader`]; its `kind` says which struct follows. Records are
//! copied out with `read_unaligned` after a length check, so a short or foreign buffer is an
//! error, never undefined behaviour.
use compact_str::CompactString;
use nodeip_trace_common as common;
use nodeip_trace_common::{
    EventHeader, ExecRecord, ExtackRecord, GetaddrinfoRecord, NetlinkChunkHeader, TracepointRecord,
};

/// What a ring-buffer record could not be decoded as.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecordError {
    /// Shorter than the struct its kind names.
    #[error("record of kind {kind} is {got} bytes, needs {need}: the eBPF object and this binary disagree (rebuild both)")]
    Short {
        /// Kind tag.
        kind: u32,
        /// Bytes present.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Unknown kind tag.
    #[error("unknown record kind {0}: the eBPF object is newer than this binary (rebuild both)")]
    UnknownKind(u32),
}

/// One kernel record.
#[derive(Clone)]
pub enum KernelRecord {
    /// A getaddrinfo call started.
    GetaddrinfoEntry(EventHeader),
    /// A getaddrinfo call returned.
    Getaddrinfo(Box<GetaddrinfoRecord>),
    /// A chunk of a netlink buffer, with its payload.
    NetlinkChunk(NetlinkChunkHeader, Vec<u8>),
    /// `fib:fib_table_lookup` raw fields.
    Fib4Lookup(Box<TracepointRecord>),
    /// `fib6:fib6_table_lookup` raw fields.
    Fib6Lookup(Box<TracepointRecord>),
    /// A route lookup read at the raw tracepoints (either family: see its kind).
    RouteLookup(Box<common::RouteLookupRecord>),
    /// `netlink:netlink_extack`.
    Extack(Box<ExtackRecord>),
    /// A netlink socket used before we knew its fd.
    UnknownNetlinkSocket(EventHeader),
    /// A traced process called exec.
    Exec(Box<ExecRecord>),
    /// A `connect`/`getsockname` inside a getaddrinfo call.
    GaiSocket(Box<common::GaiSocketRecord>),
    /// glibc opening (failed) or reading `/etc/gai.conf` inside a getaddrinfo call.
    GaiConf(Box<common::GaiConfRecord>),
    /// A kernel netlink handler call (fentry/fexit or kprobe/kretprobe).
    KernelHandler(Box<common::KernelHandlerRecord>),
    /// Default routes listed to a reader of a route file.
    RouteFile(Box<common::RouteFileRecord>),
    /// One run of Go's own resolver's sort.
    GoSort(Box<common::GoSortRecord>),
    /// A Go host lookup (`LookupHost`) answered from `/etc/hosts`, unsorted.
    GoHost(Box<common::GoHostRecord>),
    /// A cgroup was made (its id and path).
    CgroupMkdir(Box<common::CgroupMkdirRecord>),
}

impl KernelRecord {
    /// The common header.
    pub fn header(&self) -> &EventHeader {
        match self {
            KernelRecord::GetaddrinfoEntry(h) | KernelRecord::UnknownNetlinkSocket(h) => h,
            KernelRecord::Getaddrinfo(r) => &r.header,
            KernelRecord::NetlinkChunk(h, _) => &h.header,
            KernelRecord::Fib4Lookup(r) | KernelRecord::Fib6Lookup(r) => &r.header,
            KernelRecord::RouteLookup(r) => &r.header,
            KernelRecord::Extack(r) => &r.header,
            KernelRecord::Exec(r) => &r.header,
            KernelRecord::GaiSocket(r) => &r.header,
            KernelRecord::GaiConf(r) => &r.header,
            KernelRecord::KernelHandler(r) => &r.header,
            KernelRecord::RouteFile(r) => &r.header,
            KernelRecord::GoSort(r) => &r.header,
            KernelRecord::GoHost(r) => &r.header,
            KernelRecord::CgroupMkdir(r) => &r.header,
        }
    }
}

fn read<T: Copy>(kind: u32, bytes: &[u8]) -> Result<T, RecordError> {
    let need = std::mem::size_of::<T>();
    if bytes.len() < need {
        return Err(RecordError::Short {
            kind,
            got: bytes.len(),
            need,
        });
    }
    // SAFETY: length checked; T is a plain-old-data #[repr(C)] record; read_unaligned copes with
    // any alignment.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// A getaddrinfo record, which the kernel side sends only up to its `count` results: the
/// results it left out read as zeros.
fn read_getaddrinfo(bytes: &[u8]) -> Result<Box<GetaddrinfoRecord>, RecordError> {
    let kind = common::KIND_GETADDRINFO;
    let full = std::mem::size_of::<GetaddrinfoRecord>();
    if bytes.len() >= full {
        return Ok(Box::new(read(kind, bytes)?));
    }
    let short = |need| RecordError::Short {
        kind,
        got: bytes.len(),
        need,
    };
    if bytes.len() < common::GETADDRINFO_FIXED_LEN {
        return Err(short(common::GETADDRINFO_FIXED_LEN));
    }
    let mut whole = vec![0u8; full];
    whole[..bytes.len()].copy_from_slice(bytes);
    let record: GetaddrinfoRecord = read(kind, &whole)?;
    let count = (record.count as usize).min(common::GAI_MAX_RESULTS);
    let need = common::GETADDRINFO_FIXED_LEN + count * std::mem::size_of::<common::AddrinfoEntry>();
    if bytes.len() < need {
        return Err(short(need));
    }
    Ok(Box::new(record))
}

/// Decodes one ring-buffer record.
pub fn parse_record(bytes: &[u8]) -> Result<KernelRecord, RecordError> {
    let header: EventHeader = read(0, bytes)?;
    let kind = header.kind;
    Ok(match kind {
        common::KIND_GETADDRINFO_ENTRY => KernelRecord::GetaddrinfoEntry(header),
        common::KIND_UNKNOWN_NETLINK_SOCKET => KernelRecord::UnknownNetlinkSocket(header),
        common::KIND_GETADDRINFO => KernelRecord::Getaddrinfo(read_getaddrinfo(bytes)?),
        common::KIND_NETLINK_CHUNK => {
            let h: NetlinkChunkHeader = read(kind, bytes)?;
            let start = common::NETLINK_CHUNK_HEADER_LEN;
            let end = start + h.len as usize;
            if bytes.len() < end {
                return Err(RecordError::Short {
                    kind,
                    got: bytes.len(),
                    need: end,
                });
            }
            KernelRecord::NetlinkChunk(h, bytes[start..end].to_vec())
        }
        common::KIND_FIB4_LOOKUP => KernelRecord::Fib4Lookup(Box::new(read(kind, bytes)?)),
        common::KIND_FIB6_LOOKUP => KernelRecord::Fib6Lookup(Box::new(read(kind, bytes)?)),
        common::KIND_ROUTE_LOOKUP4 | common::KIND_ROUTE_LOOKUP6 => {
            KernelRecord::RouteLookup(Box::new(read(kind, bytes)?))
        }
        common::KIND_EXTACK => KernelRecord::Extack(Box::new(read(kind, bytes)?)),
        common::KIND_EXEC => KernelRecord::Exec(Box::new(read(kind, bytes)?)),
        common::KIND_GAI_SOCKET => KernelRecord::GaiSocket(Box::new(read(kind, bytes)?)),
        common::KIND_GAI_CONF => KernelRecord::GaiConf(Box::new(read(kind, bytes)?)),
        common::KIND_KERNEL_HANDLER => KernelRecord::KernelHandler(Box::new(read(kind, bytes)?)),
        common::KIND_ROUTE_FILE => KernelRecord::RouteFile(Box::new(read(kind, bytes)?)),
        common::KIND_GO_SORT => KernelRecord::GoSort(Box::new(read(kind, bytes)?)),
        common::KIND_GO_HOST => KernelRecord::GoHost(Box::new(read(kind, bytes)?)),
        common::KIND_CGROUP_MKDIR => KernelRecord::CgroupMkdir(Box::new(read(kind, bytes)?)),
        other => return Err(RecordError::UnknownKind(other)),
    })
}

/// The text before the first NUL of a fixed-size C string field, lossily as UTF-8.
pub fn c_string(bytes: &[u8]) -> CompactString {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = &bytes[..end];
    // Valid UTF-8 (every comm and device name in practice) is checked in one pass;
    // `from_utf8_lossy` walks it in chunks, and every record's comm comes through here.
    // A comm or device name (at most 15 bytes) stays inline: no allocation.
    match std::str::from_utf8(text) {
        Ok(valid) => CompactString::from(valid),
        Err(_) => CompactString::from(String::from_utf8_lossy(text)),
    }
}

/// Record bytes of a value (tests build records with this, the way the kernel side lays them out).
pub fn record_bytes<T: Copy>(value: &T) -> Vec<u8> {
    // SAFETY: T is a #[repr(C)] record without padding (pinned by asserts in the common crate).
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(kind: u32) -> EventHeader {
        let mut comm = [0u8; 16];
        comm[..6].copy_from_slice(b"getent");
        EventHeader {
            kind,
            netns: 1,
            ts_ns: 42,
            pid_tgid: (7 << 32) | 8,
            cgroup_id: 1,
            comm,
        }
    }

    #[test]
    fn parses_a_netlink_chunk_with_payload() {
        let h = NetlinkChunkHeader {
            header: header(common::KIND_NETLINK_CHUNK),
            call_start_ns: 40,
            fd: 3,
            protocol: 0,
            syscall: common::syscall::SENDTO,
            ret: 4,
            total_len: 0,
            offset: 0,
            len: 4,
            flags: 0,
        };
        let mut bytes = record_bytes(&h);
        bytes.extend_from_slice(&[1, 2, 3, 4, 99]);
        match parse_record(&bytes).unwrap() {
            KernelRecord::NetlinkChunk(got, payload) => {
                assert_eq!(got.fd, 3);
                assert_eq!(payload, vec![1, 2, 3, 4]);
                assert_eq!(c_string(&got.header.comm), "getent");
            }
            _ => panic!("wrong kind"),
        }
    }

    /// The kernel side sends a getaddrinfo record up to its last result; the rest reads as
    /// zeros, and a record shorter than its count says is an error.
    #[test]
    fn a_getaddrinfo_record_ends_after_its_results() {
        // SAFETY: GetaddrinfoRecord is plain integers and byte arrays; all zeros is a value.
        let mut rec: GetaddrinfoRecord = unsafe { std::mem::zeroed() };
        rec.header = header(common::KIND_GETADDRINFO);
        rec.count = 2;
        for (i, r) in rec.results.iter_mut().take(2).enumerate() {
            r.family = 2;
            r.addrlen = 16;
            r.sockaddr[..2].copy_from_slice(&2u16.to_ne_bytes());
            r.sockaddr[4..8].copy_from_slice(&[127, 0, 0, 1 + i as u8]);
        }
        let full = record_bytes(&rec);
        let entry = std::mem::size_of::<common::AddrinfoEntry>();
        let sent = &full[..common::GETADDRINFO_FIXED_LEN + 2 * entry];
        let Ok(KernelRecord::Getaddrinfo(got)) = parse_record(sent) else {
            panic!("a record cut after its results is whole")
        };
        assert_eq!(record_bytes(got.as_ref()), full);
        assert_eq!(
            parse_record(&full[..common::GETADDRINFO_FIXED_LEN + entry]).err(),
            Some(RecordError::Short {
                kind: common::KIND_GETADDRINFO,
                got: common::GETADDRINFO_FIXED_LEN + entry,
                need: common::GETADDRINFO_FIXED_LEN + 2 * entry,
            })
        );
    }

    #[test]
    fn a_cgroup_mkdir_record_gives_the_id_and_path() {
        // SAFETY: CgroupMkdirRecord is plain integers and byte arrays; all zeros is a value.
        let mut rec: common::CgroupMkdirRecord = unsafe { std::mem::zeroed() };
        rec.header = header(common::KIND_CGROUP_MKDIR);
        rec.id = 0x1234;
        let path = b"/kubepods.slice/x.scope";
        rec.path[..path.len()].copy_from_slice(path);
        let bytes = record_bytes(&rec);
        let Ok(KernelRecord::CgroupMkdir(got)) = parse_record(&bytes) else {
            panic!("a cgroup_mkdir record")
        };
        assert_eq!((got.id, got.root), (0x1234, 0));
        assert_eq!(c_string(&got.path), "/kubepods.slice/x.scope");
        assert!(matches!(
            parse_record(&bytes[..bytes.len() - 1]),
            Err(RecordError::Short { .. })
        ));
    }

    #[test]
    fn short_and_unknown_records_are_errors() {
        assert!(matches!(
            parse_record(&[0u8; 3]),
            Err(RecordError::Short { .. })
        ));
        let bytes = record_bytes(&header(common::KIND_GETADDRINFO));
        assert!(matches!(
            parse_record(&bytes),
            Err(RecordError::Short { kind: 1, .. })
        ));
        let bytes = record_bytes(&header(999));
        assert_eq!(
            parse_record(&bytes).err(),
            Some(RecordError::UnknownKind(999))
        );
        let mut h = NetlinkChunkHeader {
            header: header(common::KIND_NETLINK_CHUNK),
            call_start_ns: 0,
            fd: 0,
            protocol: 0,
            syscall: 1,
            ret: 0,
            total_len: 0,
            offset: 0,
            len: 100,
            flags: 0,
        };
        assert!(parse_record(&record_bytes(&h)).is_err());
        h.len = 0;
        assert!(parse_record(&record_bytes(&h)).is_ok());
    }
}
