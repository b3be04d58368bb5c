//! Records shared by the eBPF programs (`nodeip-trace-ebpf`) and the userspace loader.
//!
//! Everything here is `#[repr(C)]` with explicit padding so both sides agree on the layout; each
//! record's size is pinned by a compile-time assertion. The kernel side only fills these with raw
//! facts (pointers already dereferenced, bytes copied); all decoding happens in userspace.
#![no_std]
#![deny(missing_docs)]

/// Kind tag of [`GetaddrinfoRecord`].
pub const KIND_GETADDRINFO: u32 = 1;
/// Kind tag of [`NetlinkChunkHeader`] (followed by payload bytes).
pub const KIND_NETLINK_CHUNK: u32 = 2;
/// Kind tag of [`TracepointRecord`] for `fib:fib_table_lookup`.
pub const KIND_FIB4_LOOKUP: u32 = 3;
/// Kind tag of [`TracepointRecord`] for `fib6:fib6_table_lookup`.
pub const KIND_FIB6_LOOKUP: u32 = 4;
/// Kind tag of [`ExtackRecord`] (`netlink:netlink_extack`).
pub const KIND_EXTACK: u32 = 5;
/// Kind tag of [`EventHeader`]-only record: a netlink socket was used whose fd we did not know.
pub const KIND_UNKNOWN_NETLINK_SOCKET: u32 = 6;
/// Kind tag of [`ExecRecord`] (`sched:sched_process_exec`).
pub const KIND_EXEC: u32 = 7;
/// Kind tag of an [`EventHeader`]-only record: a getaddrinfo call started on this thread.
pub const KIND_GETADDRINFO_ENTRY: u32 = 8;
/// Kind tag of [`GaiSocketRecord`]: a `connect`/`getsockname` made inside a getaddrinfo call
/// (glibc's RFC 6724 sort asks the kernel for each candidate's source this way).
pub const KIND_GAI_SOCKET: u32 = 9;
/// Kind tag of [`GaiConfRecord`]: glibc opening or reading `/etc/gai.conf` inside getaddrinfo.
pub const KIND_GAI_CONF: u32 = 10;

/// Kind tag of [`KernelHandlerRecord`]: a kernel netlink handler (route get, address/link dump,
/// IPVS command) ran, seen by fentry/fexit or kprobe/kretprobe.
pub const KIND_KERNEL_HANDLER: u32 = 11;

/// Kind tag of [`RouteLookupRecord`] from the `fib_table_lookup` raw tracepoint (IPv4).
pub const KIND_ROUTE_LOOKUP4: u32 = 12;
/// Kind tag of [`RouteLookupRecord`] from the `fib6_table_lookup` raw tracepoint (IPv6).
pub const KIND_ROUTE_LOOKUP6: u32 = 13;

/// Kind tag of [`RouteFileRecord`]: the kernel listed default routes to a reader of
/// `/proc/net/route` or `/proc/net/ipv6_route`.
pub const KIND_ROUTE_FILE: u32 = 17;

/// Bytes of a route file's lines copied per show call: four IPv4 lines (128 bytes each) or
/// three IPv6 ones (149 bytes and more).
pub const ROUTE_FILE_TEXT_LEN: usize = 512;

/// Flags on a [`RouteFileRecord`].
pub mod route_file_flags {
    /// The call wrote more than [`super::ROUTE_FILE_TEXT_LEN`] bytes; `text` holds their start.
    pub const TEXT_CUT: u32 = 1;
    /// The file's network namespace could not be read (`file_netns` is 0).
    pub const NETNS_UNKNOWN: u32 = 2;
}

/// What one call of a route file's show function wrote, sent only when it lists a default
/// route (destination all zeros: the probe looks at the text it copied). The reader is the
/// header's process; the file's namespace may differ from it (`/proc/PID/net/route`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RouteFileRecord {
    /// Common header; `ts_ns` is the return time.
    pub header: EventHeader,
    /// `handler_function::FIB_ROUTE_SEQ_SHOW` or `IPV6_ROUTE_SEQ_SHOW`.
    pub function: u32,
    /// `hook_mode::*`.
    pub mode: u32,
    /// The file's network namespace (`seq_file_net(seq)->ns.inum`).
    pub file_netns: u32,
    /// `route_file_flags::*`.
    pub flags: u32,
    /// Bytes of `text` filled.
    pub text_len: u32,
    /// Bytes the call wrote.
    pub written: u32,
    /// The lines it wrote, as the reader gets them.
    pub text: [u8; ROUTE_FILE_TEXT_LEN],
}

/// Bytes of the request message a kernel handler was given that are copied.
pub const HANDLER_REQUEST_LEN: usize = 512;

/// The kernel handler functions probed, as numbered in [`KernelHandlerRecord::function`]; the
/// names (index = number - 1) are in [`HANDLER_FUNCTIONS`].
pub mod handler_function {
    /// `inet_rtm_getroute(skb, nlh, extack)`: RTM_GETROUTE for IPv4.
    pub const INET_RTM_GETROUTE: u32 = 1;
    /// `inet6_rtm_getroute(skb, nlh, extack)`: RTM_GETROUTE for IPv6.
    pub const INET6_RTM_GETROUTE: u32 = 2;
    /// `inet_dump_ifaddr(skb, cb)`: one round of an IPv4 RTM_GETADDR dump.
    pub const INET_DUMP_IFADDR: u32 = 3;
    /// `inet6_dump_ifaddr(skb, cb)`: one round of an IPv6 RTM_GETADDR dump.
    pub const INET6_DUMP_IFADDR: u32 = 4;
    /// `rtnl_dump_ifinfo(skb, cb)`: one round of an RTM_GETLINK dump.
    pub const RTNL_DUMP_IFINFO: u32 = 5;
    /// `rtnl_getlink(skb, nlh, extack)`: RTM_GETLINK for one link.
    pub const RTNL_GETLINK: u32 = 6;
    /// `ip_vs_genl_set_cmd(skb, info)`: an IPVS service/destination change.
    pub const IP_VS_GENL_SET_CMD: u32 = 7;
    /// `fib_route_seq_show(seq, v)`: the lines of one route prefix in `/proc/net/route` (its
    /// probes send [`super::RouteFileRecord`]s, not handler records).
    pub const FIB_ROUTE_SEQ_SHOW: u32 = 8;
    /// `ipv6_route_seq_show(seq, v)`: one route's line in `/proc/net/ipv6_route` (as
    /// [`FIB_ROUTE_SEQ_SHOW`]).
    pub const IPV6_ROUTE_SEQ_SHOW: u32 = 9;
    /// Number of functions.
    pub const COUNT: u32 = 9;
}

/// Kernel function names by [`handler_function`] number - 1.
pub const HANDLER_FUNCTIONS: [&str; handler_function::COUNT as usize] = [
    "inet_rtm_getroute",
    "inet6_rtm_getroute",
    "inet_dump_ifaddr",
    "inet6_dump_ifaddr",
    "rtnl_dump_ifinfo",
    "rtnl_getlink",
    "ip_vs_genl_set_cmd",
    "fib_route_seq_show",
    "ipv6_route_seq_show",
];

/// How a [`KernelHandlerRecord`] was captured.
pub mod hook_mode {
    /// fentry/fexit (BTF trampolines).
    pub const FENTRY: u32 = 1;
    /// kprobe/kretprobe.
    pub const KPROBE: u32 = 2;
}

/// Flags on a [`KernelHandlerRecord`].
pub mod handler_flags {
    /// The request was longer than [`super::HANDLER_REQUEST_LEN`]; `request` holds its start.
    pub const REQUEST_CUT: u32 = 1;
    /// The request message could not be found or read (offset unknown, bad pointer).
    pub const REQUEST_UNREADABLE: u32 = 2;
    /// The handler's network namespace could not be read (`handler_netns` is 0).
    pub const NETNS_UNKNOWN: u32 = 4;
}

/// Indexes into the `HANDLER_OFFSETS` load-time global: struct member offsets from the running
/// kernel's BTF that the handler probes follow.
pub mod handler_offset {
    /// `sk_buff.sk`.
    pub const SKB_SK: usize = 0;
    /// `sock.__sk_common.skc_net` (a `possible_net_t`, whose first member is the `struct net *`).
    pub const SOCK_NET: usize = 1;
    /// `net.ns.inum`.
    pub const NET_INUM: usize = 2;
    /// `netlink_callback.nlh`: the request of a dump.
    pub const CALLBACK_NLH: usize = 3;
    /// `genl_info.nlhdr`: the request of a generic netlink command.
    pub const GENL_INFO_NLHDR: usize = 4;
    /// `seq_file.buf`: the text a `/proc` file's show function writes.
    pub const SEQ_FILE_BUF: usize = 5;
    /// `seq_file.size`: the buffer's size (`count == size` means the line did not fit and
    /// will be written again into a bigger one).
    pub const SEQ_FILE_SIZE: usize = 6;
    /// `seq_file.count`: the bytes written so far.
    pub const SEQ_FILE_COUNT: usize = 7;
    /// `seq_file.private`: for the route files a `seq_net_private`, whose `net` is the file's
    /// namespace.
    pub const SEQ_FILE_PRIVATE: usize = 8;
    /// `seq_net_private.net`.
    pub const SEQ_NET_PRIVATE_NET: usize = 9;
    /// Number of offsets.
    pub const COUNT: usize = 10;
}

/// A kernel netlink handler call: which function, in which network namespace (the requesting
/// socket's), what request it was given, and what it returned.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelHandlerRecord {
    /// Common header; `ts_ns` is the return time.
    pub header: EventHeader,
    /// Entry time.
    pub start_ns: u64,
    /// `handler_function::*`.
    pub function: u32,
    /// `hook_mode::*`.
    pub mode: u32,
    /// The function's return value (0 or -errno for requests; bytes added for dump rounds).
    pub ret: i64,
    /// `sock_net(skb->sk)->ns.inum`: the namespace the kernel answered in.
    pub handler_netns: u32,
    /// `nlmsg_len` of the request as the kernel had it.
    pub request_nlmsg_len: u32,
    /// Bytes of `request` that are valid.
    pub request_len: u32,
    /// `handler_flags::*`.
    pub flags: u32,
    /// The request message (header and attributes) as the handler was given it.
    pub request: [u8; HANDLER_REQUEST_LEN],
}

/// Bytes of `/etc/gai.conf` copied per `read` (glibc's stdio reads 4 KiB at a time).
pub const GAI_CONF_CHUNK_LEN: usize = 4096;

/// The file glibc reads its sort tables from, NUL-terminated, as the probe compares it.
pub const GAI_CONF_PATH: [u8; 14] = *b"/etc/gai.conf\0";

/// Which resolver a getaddrinfo record comes from: the uprobe's attach cookie.
pub mod resolver {
    /// Not known (no attach cookie: kernels before 5.15).
    pub const UNKNOWN: u32 = 0;
    /// glibc's `getaddrinfo`.
    pub const GLIBC: u32 = 1;
    /// musl's `getaddrinfo`.
    pub const MUSL: u32 = 2;
    /// The bits of the field that name the C library (the rest are flags).
    pub const KIND_MASK: u32 = 0xff;
    /// Flag: the call came from a Go program's `net` through cgo (its thread entered
    /// `net._C2func_getaddrinfo` just before).
    pub const VIA_GO_CGO: u32 = 0x100;
}

/// Maximum number of `struct addrinfo` entries copied per getaddrinfo call.
pub const GAI_MAX_RESULTS: usize = 32;
/// Bytes of the `node` argument copied (a DNS name is at most 253 bytes).
pub const GAI_NODE_LEN: usize = 256;
/// Bytes of the `service` argument copied.
pub const GAI_SERVICE_LEN: usize = 64;
/// Payload bytes per netlink chunk record; one syscall buffer becomes one or more chunks.
pub const NETLINK_CHUNK_LEN: usize = 16384;
/// iovec entries followed per sendmsg/recvmsg.
pub const NETLINK_MAX_IOV: usize = 8;
/// Chunks per syscall: the kernel's tail-call limit (33) less the first call; with
/// [`NETLINK_CHUNK_LEN`] one syscall is captured up to 512 KiB.
pub const NETLINK_MAX_CHUNKS_PER_CALL: usize = 32;
/// Raw tracepoint bytes copied for route-lookup tracepoints (after the 8-byte common header).
pub const TRACEPOINT_RAW_LEN: usize = 104;
/// Bytes of an extack message copied.
pub const EXTACK_LEN: usize = 128;
/// Bytes of an exec filename copied.
pub const EXEC_FILENAME_LEN: usize = 256;

/// Counter indexes in the `COUNTERS` per-CPU array: every event the kernel side could not deliver
/// whole is counted under one of these.
pub mod counter {
    /// getaddrinfo records dropped because the ring buffer was full.
    pub const GAI_RINGBUF_FULL: u32 = 0;
    /// getaddrinfo entries not stored because the in-flight call map was full.
    pub const GAI_INFLIGHT_FULL: u32 = 1;
    /// getaddrinfo calls whose result list was longer than [`super::GAI_MAX_RESULTS`].
    pub const GAI_RESULTS_CUT: u32 = 2;
    /// netlink calls (send/recv buffers) with data lost because the ring buffer was full (counted
    /// once per call, however many of its chunks were dropped).
    pub const NETLINK_RINGBUF_FULL: u32 = 3;
    /// netlink payload bytes not captured (beyond the per-call limit, or unreadable).
    pub const NETLINK_BYTES_CUT: u32 = 4;
    /// netlink syscalls on sockets whose fd was not yet known (payload missed).
    pub const NETLINK_UNKNOWN_SOCKET: u32 = 5;
    /// netlink syscalls not followed because the in-flight syscall map was full.
    pub const NETLINK_INFLIGHT_FULL: u32 = 6;
    /// route-lookup records dropped because the ring buffer was full.
    pub const ROUTE_RINGBUF_FULL: u32 = 7;
    /// extack / exec / other small records dropped because the ring buffer was full.
    pub const OTHER_RINGBUF_FULL: u32 = 8;
    /// netlink receive calls with MSG_PEEK (not data: the real read follows), skipped; counted
    /// before the filters (every process's, at the sock tracepoints) and not reported.
    pub const NETLINK_PEEK_SKIPPED: u32 = 9;
    /// netlink syscalls seen with a protocol outside the selected families (not captured).
    pub const NETLINK_FAMILY_FILTERED: u32 = 10;
    /// kernel handler (and route file show) calls not followed because their in-flight map was
    /// full.
    pub const HANDLER_INFLIGHT_FULL: u32 = 11;
    /// kernel handler and route file records dropped because the ring buffer was full.
    pub const HANDLER_RINGBUF_FULL: u32 = 12;
    /// Route lookups left out because the thread was not deciding anything we explain (not
    /// inside getaddrinfo, connect() or a netlink request: per-packet lookups). Filtered, not lost.
    pub const ROUTE_LOOKUPS_FILTERED: u32 = 13;
    /// netlink sends/receives seen by the sock tracepoints inside a call whose buffers the
    /// capture cannot find (sendmmsg/recvmmsg, io_uring, a kernel thread): not captured.
    pub const NETLINK_CALL_UNSUPPORTED: u32 = 14;
    /// Number of counters.
    pub const COUNT: u32 = 15;
}

/// Which syscall produced a netlink chunk.
pub mod syscall {
    /// `sendto(2)`
    pub const SENDTO: u32 = 1;
    /// `sendmsg(2)`
    pub const SENDMSG: u32 = 2;
    /// `recvfrom(2)`
    pub const RECVFROM: u32 = 3;
    /// `recvmsg(2)`
    pub const RECVMSG: u32 = 4;
}

/// Indexes into the `SOCKET_OFFSETS` load-time global: struct member offsets from the running
/// kernel's BTF that the socket-layer netlink capture follows.
pub mod socket_offset {
    /// `socket.sk`.
    pub const SOCKET_SK: usize = 0;
    /// `sock.sk_protocol` (a `u16`).
    pub const SOCK_PROTOCOL: usize = 1;
    /// `sk_buff.data`.
    pub const SKB_DATA: usize = 2;
    /// `sk_buff.len`.
    pub const SKB_LEN: usize = 3;
    /// `sock.__sk_common.skc_family` (a `u16`).
    pub const SOCK_FAMILY: usize = 4;
    /// `netlink_sock.portid` (a `u32`; 0 on the kernel's own sockets).
    pub const NLK_PORTID: usize = 5;
    /// Number of offsets.
    pub const COUNT: usize = 6;
}

/// Indexes into the `ROUTE_OFFSETS` load-time global: struct member offsets from the running
/// kernel's BTF that the raw `fib_table_lookup`/`fib6_table_lookup` programs follow from the
/// tracepoints' arguments (`flowi4`, `fib_nh_common`; `flowi6`, `fib6_result`, `fib6_table`).
pub mod route_offset {
    /// `flowi4.saddr`.
    pub const FL4_SADDR: usize = 0;
    /// `flowi4.daddr`.
    pub const FL4_DADDR: usize = 1;
    /// `flowi4.uli.ports.dport`.
    pub const FL4_DPORT: usize = 2;
    /// `flowi6.saddr`.
    pub const FL6_SADDR: usize = 3;
    /// `flowi6.daddr`.
    pub const FL6_DADDR: usize = 4;
    /// `flowi6.uli.ports.dport`.
    pub const FL6_DPORT: usize = 5;
    /// `fib_nh_common.nhc_dev`.
    pub const NHC_DEV: usize = 6;
    /// `fib_nh_common.nhc_gw_family`.
    pub const NHC_GW_FAMILY: usize = 7;
    /// `fib_nh_common.nhc_gw`.
    pub const NHC_GW: usize = 8;
    /// `net_device.name`.
    pub const DEV_NAME: usize = 9;
    /// `fib6_result.nh`.
    pub const F6_RESULT_NH: usize = 10;
    /// `fib6_result.fib6_type`.
    pub const F6_RESULT_TYPE: usize = 11;
    /// `fib6_nh.nh_common`.
    pub const F6_NH_COMMON: usize = 12;
    /// `fib6_table.tb6_id`.
    pub const F6_TABLE_ID: usize = 13;
    /// Number of offsets.
    pub const COUNT: usize = 14;
}

/// Chunks per netlink datagram captured at the socket layer: with [`NETLINK_CHUNK_LEN`], 64 KiB
/// (a netlink dump datagram is at most 32 KiB; requests are small).
pub const SOCKET_MAX_CHUNKS: usize = 4;

/// A socket-layer netlink call: kept from `netlink_sendmsg`/`netlink_recvmsg` entry until the
/// datagram is seen (`netlink_unicast` / `skb_recv_datagram`), keyed by pid_tgid, under kprobes;
/// made where the datagram is seen under fentry/fexit.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetlinkSocketCall {
    /// Entry time (kprobes); 0 where the call is made as its datagram is seen.
    pub start_ns: u64,
    /// The process's `struct sock *` (sends: the datagram must leave from it).
    pub sk: u64,
    /// Netlink protocol of the socket.
    pub protocol: u32,
    /// `syscall::SENDMSG` or `syscall::RECVMSG` (the direction).
    pub direction: u32,
}

/// Flags on a [`NetlinkChunkHeader`].
pub mod chunk_flags {
    /// The syscall moved more bytes than were captured (see `total_len`).
    pub const CUT: u32 = 1;
    /// This is the last chunk of the call.
    pub const LAST: u32 = 2;
    /// Reading user memory failed for this chunk; `len` is 0.
    pub const READ_FAILED: u32 = 4;
    /// Captured at the socket layer (the datagram's kernel buffer), not at a syscall.
    pub const SOCKET_LAYER: u32 = 8;
}

/// Flags on a [`GetaddrinfoRecord`].
pub mod gai_flags {
    /// More than [`super::GAI_MAX_RESULTS`] results; the list is cut.
    pub const RESULTS_CUT: u32 = 1;
    /// `node` was NULL.
    pub const NODE_NULL: u32 = 2;
    /// `service` was NULL.
    pub const SERVICE_NULL: u32 = 4;
    /// `hints` was NULL.
    pub const HINTS_NULL: u32 = 8;
    /// A result entry could not be read from user memory; the list ends there.
    pub const RESULTS_UNREADABLE: u32 = 16;
}

/// Common prefix of every record in the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EventHeader {
    /// One of the `KIND_*` constants.
    pub kind: u32,
    /// Network namespace id (`current->nsproxy->net_ns->ns.inum`, the inode of `/proc/PID/ns/net`);
    /// 0 when the kernel's BTF did not give the offsets.
    pub netns: u32,
    /// `bpf_ktime_get_ns()` (CLOCK_MONOTONIC) when the record was made.
    pub ts_ns: u64,
    /// `bpf_get_current_pid_tgid()`: tgid in the high 32 bits, tid in the low 32.
    pub pid_tgid: u64,
    /// `bpf_get_current_cgroup_id()` (cgroup v2 id; 0 where unavailable).
    pub cgroup_id: u64,
    /// `bpf_get_current_comm()`.
    pub comm: [u8; 16],
}

/// Bytes kept of a result's socket address: a power of two (the probe bounds the read with a
/// mask, no branch) that holds a `sockaddr_in6` (28 bytes; a `sockaddr_in` is 16).
pub const GAI_SOCKADDR_LEN: usize = 32;

/// One `struct addrinfo` result: its fields and its socket address as the C library wrote it
/// (decoded in userspace).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AddrinfoEntry {
    /// `ai_family` (2 = AF_INET, 10 = AF_INET6).
    pub family: u32,
    /// `ai_socktype`.
    pub socktype: u32,
    /// `ai_protocol`.
    pub protocol: u32,
    /// Bytes of `sockaddr` read: `ai_addrlen` below [`GAI_SOCKADDR_LEN`].
    pub addrlen: u32,
    /// The `sockaddr_in` or `sockaddr_in6` at `ai_addr`, `addrlen` bytes of it, the rest 0; all
    /// zeros (family 0) when `ai_addr` was NULL or unreadable.
    pub sockaddr: [u8; GAI_SOCKADDR_LEN],
}

/// A completed getaddrinfo call, made by the uretprobe; in the ring buffer it ends after its
/// `count` results (see [`GETADDRINFO_FIXED_LEN`]).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GetaddrinfoRecord {
    /// Common header; `ts_ns` is the return time.
    pub header: EventHeader,
    /// Entry time (`bpf_ktime_get_ns`).
    pub start_ns: u64,
    /// Return value (0 or an EAI_* code).
    pub ret: i32,
    /// `gai_flags::*`.
    pub flags: u32,
    /// `hints->ai_flags`.
    pub hints_flags: i32,
    /// `hints->ai_family`.
    pub hints_family: i32,
    /// `hints->ai_socktype`.
    pub hints_socktype: i32,
    /// `hints->ai_protocol`.
    pub hints_protocol: i32,
    /// Number of valid entries in `results`.
    pub count: u32,
    /// Which resolver made the call (`resolver::*`): the uprobe's attach cookie, set per libc
    /// file by the loader; 0 where the kernel has no attach cookies (before 5.15).
    pub resolver: u32,
    /// `node`, NUL-terminated.
    pub node: [u8; GAI_NODE_LEN],
    /// `service`, NUL-terminated.
    pub service: [u8; GAI_SERVICE_LEN],
    /// The result list in the order returned.
    pub results: [AddrinfoEntry; GAI_MAX_RESULTS],
}

/// Header of one chunk of a netlink send/recv buffer; `len` payload bytes follow it in the
/// ring-buffer record.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetlinkChunkHeader {
    /// Common header; `ts_ns` is the syscall exit time.
    pub header: EventHeader,
    /// Syscall entry time; with `pid_tgid` it identifies the call, so chunks are regrouped.
    pub call_start_ns: u64,
    /// File descriptor.
    pub fd: i32,
    /// Netlink protocol of the socket (0 = NETLINK_ROUTE, 16 = NETLINK_GENERIC, ...).
    pub protocol: u32,
    /// `syscall::*`.
    pub syscall: u32,
    /// Syscall return value (bytes moved, or -errno).
    pub ret: i32,
    /// Bytes the call moved that we tried to capture (after capping at the buffer size).
    pub total_len: u32,
    /// Offset of this chunk within the call's bytes.
    pub offset: u32,
    /// Payload bytes in this chunk.
    pub len: u32,
    /// `chunk_flags::*`.
    pub flags: u32,
}

/// A raw copy of a tracepoint's fields (after the common header), decoded in userspace with the
/// offsets from the tracepoint's `format` file.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct TracepointRecord {
    /// Common header.
    pub header: EventHeader,
    /// The tracepoint's bytes from offset 8 on.
    pub raw: [u8; TRACEPOINT_RAW_LEN],
}

/// A route lookup read from a raw tracepoint's arguments (`fib_table_lookup`: table id, flow,
/// next hop, result; `fib6_table_lookup`: table, flow, result): the same facts the classic
/// tracepoint's record holds, without the kernel filling that record for every routed packet.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RouteLookupRecord {
    /// Common header.
    pub header: EventHeader,
    /// Table id.
    pub table: u32,
    /// IPv4: the lookup's result (0, or -errno). IPv6: 0 (the result follows from `route_type`).
    pub err: i32,
    /// IPv6: `fib6_result.fib6_type` (an `RTN_*` route type). IPv4: 0.
    pub route_type: u8,
    /// `nhc_gw_family` of the next hop (0: no gateway, 2: IPv4, 10: IPv6).
    pub gw_family: u8,
    /// `route_lookup_flags::*`.
    pub flags: u16,
    /// Padding.
    pub _pad: u32,
    /// Source in the flow key (4 or 16 bytes used).
    pub src: [u8; 16],
    /// Destination looked up (4 or 16 bytes used).
    pub dst: [u8; 16],
    /// Gateway (4 bytes for `gw_family` 2, 16 for 10).
    pub gw: [u8; 16],
    /// Output device name (NUL-terminated), empty when there is no next hop.
    pub dev: [u8; 16],
}

/// Bits of [`RouteLookupRecord::flags`].
pub mod route_lookup_flags {
    /// The lookup had a next hop (its device and gateway were read).
    pub const NEXTHOP: u16 = 1;
    /// Some of the flow or next hop could not be read (fields left zero).
    pub const UNREADABLE: u16 = 2;
}

/// A `netlink:netlink_extack` message (the kernel's error string for a netlink request).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExtackRecord {
    /// Common header.
    pub header: EventHeader,
    /// The message, NUL-terminated.
    pub msg: [u8; EXTACK_LEN],
}

/// A `sched:sched_process_exec` event of a traced process (used to attach to new libcs and to
/// keep attribution of short-lived processes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ExecRecord {
    /// Common header.
    pub header: EventHeader,
    /// The parent's tgid (`current->real_parent->tgid`), 0 when the offsets are unknown: a
    /// process gone before userspace looks still has its parent.
    pub ppid: u32,
    /// Padding, always 0.
    pub _pad: u32,
    /// The parent's `comm` (`current->real_parent->comm`), NUL-terminated; empty when the
    /// offsets are unknown: names the parent even when it exits before userspace reads /proc.
    pub parent_comm: [u8; 16],
    /// The executed file name, NUL-terminated.
    pub filename: [u8; EXEC_FILENAME_LEN],
}

/// Which socket call a [`GaiSocketRecord`] reports.
pub mod gai_socket_call {
    /// `connect(2)`: `sockaddr` is the destination asked for.
    pub const CONNECT: u32 = 1;
    /// `getsockname(2)`: `sockaddr` is the source the kernel bound.
    pub const GETSOCKNAME: u32 = 2;
}

/// Bytes of a socket address copied (a `sockaddr_in6` is 28).
pub const SOCKADDR_LEN: usize = 28;

/// A `connect` or `getsockname` made while a getaddrinfo call was in flight on the thread.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GaiSocketRecord {
    /// Common header; `ts_ns` is the syscall exit time (the hook's time for a cgroup hook).
    pub header: EventHeader,
    /// `gai_socket_call::*`.
    pub call: u32,
    /// Syscall return value (0, or -errno); 0 when `flags` has `gai_socket_flags::BEFORE_CALL`.
    pub ret: i32,
    /// File descriptor (syscall tracepoints); -1 from a cgroup hook, which has the socket's
    /// cookie instead.
    pub fd: i32,
    /// Bytes of `sockaddr` that were read (0 when unreadable).
    pub sockaddr_len: u32,
    /// The socket address as the process passed it (connect) or got it (getsockname).
    pub sockaddr: [u8; SOCKADDR_LEN],
    /// `gai_socket_flags::*`.
    pub flags: u32,
    /// The socket's cookie (`bpf_get_socket_cookie`) from a cgroup hook; 0 from a tracepoint.
    pub socket_cookie: u64,
}

/// Flags of a [`GaiSocketRecord`].
pub mod gai_socket_flags {
    /// Seen by a cgroup hook, before the kernel carried the call out: `ret` is unknown. For a
    /// connect, what follows says how it went (glibc and musl ask `getsockname` only after a
    /// connect that worked).
    pub const BEFORE_CALL: u32 = 1;
}

/// State kept between a `connect`/`getsockname` entry and exit inside getaddrinfo.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GaiSocketInflight {
    /// The `struct sockaddr *` argument.
    pub addr: u64,
    /// `gai_socket_call::*`.
    pub call: u32,
    /// File descriptor.
    pub fd: i32,
}

/// glibc's `/etc/gai.conf` as a getaddrinfo call read it: one record for a failed `openat`
/// (`ret` < 0: no file, glibc's defaults) and one per `read` of the opened file.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GaiConfRecord {
    /// Common header.
    pub header: EventHeader,
    /// `openat`'s error (< 0), or the bytes the stream read from the file (0: the end of the
    /// file, sent when the getaddrinfo call returns).
    pub ret: i32,
    /// Bytes of `data` that are valid.
    pub len: u32,
    /// The bytes read.
    pub data: [u8; GAI_CONF_CHUNK_LEN],
}

/// State the uprobe keeps between getaddrinfo entry and return, keyed by pid_tgid.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GetaddrinfoInflight {
    /// Entry time.
    pub start_ns: u64,
    /// `node` pointer.
    pub node: u64,
    /// `service` pointer.
    pub service: u64,
    /// `hints` pointer.
    pub hints: u64,
    /// `res` pointer (a `struct addrinfo **`).
    pub res: u64,
}

/// State kept between a netlink syscall's entry and exit, keyed by pid_tgid.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NetlinkInflight {
    /// Entry time.
    pub start_ns: u64,
    /// Buffer (sendto/recvfrom) or `struct user_msghdr *` (sendmsg/recvmsg).
    pub buf: u64,
    /// Buffer size (sendto/recvfrom); 0 for msghdr calls.
    pub size: u64,
    /// File descriptor.
    pub fd: i32,
    /// `syscall::*`.
    pub syscall: u32,
    /// Netlink protocol from the fd table.
    pub protocol: u32,
    /// Set by the sock tracepoint once the socket is confirmed AF_NETLINK.
    pub confirmed: u32,
}

/// Size of the common header.
pub const EVENT_HEADER_LEN: usize = core::mem::size_of::<EventHeader>();
/// Size of a netlink chunk header.
pub const NETLINK_CHUNK_HEADER_LEN: usize = core::mem::size_of::<NetlinkChunkHeader>();
/// Bytes of a [`GetaddrinfoRecord`] before its results: the kernel side sends these and the
/// `count` results it filled, not the whole 32-entry array (≈ 500 instead of 1,720 bytes a
/// call for a name with a few addresses).
pub const GETADDRINFO_FIXED_LEN: usize = core::mem::offset_of!(GetaddrinfoRecord, results);

const _: () = assert!(core::mem::size_of::<EventHeader>() == 48);
const _: () = assert!(core::mem::size_of::<RouteFileRecord>() == 48 + 24 + ROUTE_FILE_TEXT_LEN);
const _: () = assert!(core::mem::size_of::<AddrinfoEntry>() == 48);
const _: () = assert!(
    core::mem::size_of::<GetaddrinfoRecord>()
        == 48 + 8 + 32 + GAI_NODE_LEN + GAI_SERVICE_LEN + 48 * GAI_MAX_RESULTS
);
const _: () = assert!(core::mem::size_of::<NetlinkChunkHeader>() == 48 + 8 + 32);
const _: () = assert!(core::mem::size_of::<TracepointRecord>() == 48 + TRACEPOINT_RAW_LEN);
const _: () = assert!(core::mem::size_of::<RouteLookupRecord>() == 48 + 16 + 64);
const _: () = assert!(core::mem::size_of::<ExtackRecord>() == 48 + EXTACK_LEN);
const _: () = assert!(core::mem::size_of::<ExecRecord>() == 48 + 8 + 16 + EXEC_FILENAME_LEN);
const _: () = assert!(core::mem::size_of::<GetaddrinfoInflight>() == 40);
const _: () = assert!(core::mem::size_of::<NetlinkInflight>() == 40);
const _: () = assert!(core::mem::size_of::<GaiSocketRecord>() == 48 + 16 + SOCKADDR_LEN + 4 + 8);
const _: () = assert!(core::mem::size_of::<GaiSocketInflight>() == 16);
const _: () = assert!(core::mem::size_of::<NetlinkSocketCall>() == 24);
const _: () = assert!(
    core::mem::size_of::<KernelHandlerRecord>() == 48 + 8 + 8 + 8 + 16 + HANDLER_REQUEST_LEN
);
const _: () = assert!(core::mem::size_of::<GaiConfRecord>() == 48 + 8 + GAI_CONF_CHUNK_LEN);

/// Kind tag of [`GoSortRecord`].
pub const KIND_GO_SORT: u32 = 14;
/// Addresses copied per Go resolver sort (more are counted in `count`).
pub const GO_MAX_ADDRS: usize = 16;
/// Bytes of the looked-up name copied.
pub const GO_NAME_LEN: usize = 128;

/// How `net.sortByRFC6724withSrcs` receives its sources (a uprobe program per layout).
pub mod go_layout {
    /// A Go version whose sources layout nodeip-trace does not know: the sources are not read.
    pub const UNKNOWN: u32 = 0;
    /// `srcs []net.IP` (Go 1.19): 24-byte slice headers.
    pub const IP_SLICES: u32 = 1;
    /// `srcs []netip.Addr` (Go 1.21+): 24 bytes, two big-endian halves and a zone pointer.
    pub const NETIP_ADDRS: u32 = 2;
}

/// Flags of a [`GoSortRecord`].
pub mod go_flags {
    /// The goroutine's lookup name was not seen (its entry probe missed, or another caller).
    pub const NO_NAME: u32 = 1;
    /// More than [`super::GO_MAX_ADDRS`] addresses: the lists are cut.
    pub const CUT: u32 = 2;
    /// An address or source could not be read.
    pub const UNREADABLE: u32 = 4;
    /// (Host lookups) The answer was already reported inside the call — by Go's sort's record,
    /// or by `goLookupIPCNAMEOrder`'s own return — so the host lookup's record is not sent.
    pub const SORTED: u32 = 8;
    /// The sources were not read: the binary's Go version has a layout nodeip-trace does not
    /// know (the addresses' own layout, `[]IPAddr`, is the same in every version).
    pub const NO_SOURCES: u32 = 16;
    /// (Sort records sent at `goLookupIPCNAMEOrder`'s return) No sort ran: the answer as the
    /// lookup returned it — fewer than two addresses, or an error. `unsorted` and `sorted` are
    /// both that answer; there are no sources.
    pub const NOT_SORTED: u32 = 32;
    /// The lookup returned an error (no such host, a timeout, a refused query).
    pub const FAILED: u32 = 64;
}

/// Kind tag of [`CgroupMkdirRecord`].
pub const KIND_CGROUP_MKDIR: u32 = 16;
/// Bytes of a new cgroup's path copied (a kubepods container's is about 170).
pub const CGROUP_PATH_LEN: usize = 256;

/// `cgroup:cgroup_mkdir`: a cgroup was made. Its id is what every record's `cgroup_id` says of
/// the processes in it, and its path names their pod and container: with this record first in
/// the ring, userspace names a container's events however soon the cgroup is removed again.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CgroupMkdirRecord {
    /// Common header (the task that made the cgroup: a runtime, systemd).
    pub header: EventHeader,
    /// The cgroup's id (its kernfs node id, the inode number of its directory).
    pub id: u64,
    /// The hierarchy's id (`root`: 0 is the unified one, cgroup v2).
    pub root: i32,
    /// Padding, always 0.
    pub _pad: u32,
    /// The path in its hierarchy (`/kubepods.slice/…`), NUL-terminated; cut at
    /// [`CGROUP_PATH_LEN`] − 1 bytes (userspace then asks the kernel by the id).
    pub path: [u8; CGROUP_PATH_LEN],
}

const _: () = assert!(core::mem::size_of::<CgroupMkdirRecord>() == 48 + 16 + CGROUP_PATH_LEN);

/// Kind tag of [`GoHostRecord`].
pub const KIND_GO_HOST: u32 = 15;
/// Bytes copied of each address string a host lookup returns (an IPv6 text with zone fits).
pub const GO_HOST_ADDR_LEN: usize = 48;

/// One `net.(*Resolver).goLookupHostOrder` call that returned `/etc/hosts` entries as they are
/// (`LookupHost`: Go sorts only answers that go through `goLookupIPCNAMEOrder`): the name (at
/// entry) and the address strings returned (at a RET), for one goroutine.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GoHostRecord {
    /// Common header; `ts_ns` is the return time.
    pub header: EventHeader,
    /// The goroutine (`g` pointer, R14).
    pub g: u64,
    /// Entry time.
    pub start_ns: u64,
    /// Number of addresses returned.
    pub count: u32,
    /// Bytes of `name` that are valid.
    pub name_len: u32,
    /// `go_flags::*`.
    pub flags: u32,
    /// Padding, always 0.
    pub _pad: u32,
    /// The name looked up.
    pub name: [u8; GO_NAME_LEN],
    /// The returned address strings, in order (`addr_lens[i]` bytes of each are valid).
    pub addrs: [[u8; GO_HOST_ADDR_LEN]; GO_MAX_ADDRS],
    /// Valid bytes of each address string.
    pub addr_lens: [u8; GO_MAX_ADDRS],
}

/// Up to [`GO_MAX_ADDRS`] addresses, each 4 or 16 bytes (`lens[i]`; 0: none, or invalid).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GoAddrList {
    /// The address bytes (IPv4 in the first 4).
    pub addrs: [[u8; 16]; GO_MAX_ADDRS],
    /// Length of each address: 4, 16, or 0.
    pub lens: [u8; GO_MAX_ADDRS],
}

/// One run of Go's own resolver's sort (`net.sortByRFC6724withSrcs`): its input order and the
/// sources it sorted with (at entry), and the order it left (at its RETs), for one goroutine.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GoSortRecord {
    /// Common header; `ts_ns` is the return time.
    pub header: EventHeader,
    /// The goroutine (`g` pointer, R14).
    pub g: u64,
    /// The `addrs` array (sorted in place), read again at return.
    pub addrs_ptr: u64,
    /// Entry time.
    pub start_ns: u64,
    /// Number of addresses the sort was given.
    pub count: u32,
    /// `go_layout::*`.
    pub layout: u32,
    /// Bytes of `name` that are valid.
    pub name_len: u32,
    /// `go_flags::*`.
    pub flags: u32,
    /// The name being looked up (from `goLookupIPCNAMEOrder`'s entry on this goroutine).
    pub name: [u8; GO_NAME_LEN],
    /// The addresses in the resolver's order, as the sort got them.
    pub unsorted: GoAddrList,
    /// The source of each (its `srcs` argument: what `DialUDP` + `LocalAddr` gave).
    pub sources: GoAddrList,
    /// The addresses in the order the sort left them.
    pub sorted: GoAddrList,
}

/// The name a goroutine is looking up, kept until its sort runs (or the lookup returns).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GoLookupName {
    /// Bytes of `name` that are valid.
    pub len: u32,
    /// Padding, always 0.
    pub _pad: u32,
    /// When the lookup started (`goLookupIPCNAMEOrder`'s entry).
    pub start_ns: u64,
    /// The name.
    pub name: [u8; GO_NAME_LEN],
}

const _: () = assert!(core::mem::size_of::<GoAddrList>() == 16 * GO_MAX_ADDRS + GO_MAX_ADDRS);
const _: () = assert!(
    core::mem::size_of::<GoSortRecord>() == 48 + 24 + 16 + GO_NAME_LEN + 3 * (17 * GO_MAX_ADDRS)
);
const _: () = assert!(core::mem::size_of::<GoLookupName>() == 16 + GO_NAME_LEN);
const _: () = assert!(
    core::mem::size_of::<GoHostRecord>()
        == 48 + 16 + 16 + GO_NAME_LEN + (GO_HOST_ADDR_LEN + 1) * GO_MAX_ADDRS
);

#[cfg(feature = "user")]
mod user_pod {
    //! `aya::Pod` impls so userspace can put these records in maps.
    use super::*;
    // SAFETY: #[repr(C)] and Copy, made of integers and integer arrays only: every bit
    // pattern is a valid value, which is what aya needs to copy one out of a map.
    unsafe impl aya::Pod for GetaddrinfoInflight {}
    // SAFETY: as above.
    unsafe impl aya::Pod for NetlinkInflight {}
    // SAFETY: as above.
    unsafe impl aya::Pod for GaiSocketInflight {}
}
