//! A netlink buffer as one send or receive moved it: the unit that pcap frames, decoders and the
//! timeline share, whatever the source (live eBPF chunks, nlmon captures, recordings).
use compact_str::CompactString;
use serde::{Deserialize, Serialize};

/// Which way a buffer travelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Process → kernel (sendto/sendmsg).
    Send,
    /// Kernel → process (recvfrom/recvmsg).
    Recv,
}

/// The process a buffer or event belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Thread-group id (the "pid" users know).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// `comm` (at most 15 bytes).
    pub comm: CompactString,
}

/// One netlink send/receive buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetlinkFrame {
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub wall_ns: i128,
    /// Raw kernel monotonic time when known (live), else the same as `wall_ns` truncated.
    pub ts_ns: u64,
    /// Netlink protocol (0 = NETLINK_ROUTE, 16 = NETLINK_GENERIC, ...).
    pub protocol: u16,
    /// Direction, when known (nlmon captures do not carry it; it is then inferred from messages).
    pub direction: Option<Direction>,
    /// The process, when known (live tracing, or comments in our pcapng).
    pub task: Option<Task>,
    /// The network namespace the buffer moved in (the inode of `/proc/PID/ns/net`); 0 when
    /// unknown (as in the kernel's records). From the kernel's record live, from the pcapng
    /// interface our writer names after it offline.
    pub netns: u32,
    /// Bytes the syscall moved; larger than `bytes.len()` when the capture was cut.
    pub total_len: u32,
    /// The captured bytes: one or more netlink messages.
    pub bytes: Vec<u8>,
}

impl NetlinkFrame {
    /// Whether fewer bytes were captured than the syscall moved.
    pub fn truncated(&self) -> bool {
        (self.bytes.len() as u64) < self.total_len as u64
    }
}
