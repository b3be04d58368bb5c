//! Netlink chunk records → whole [`NetlinkFrame`]s, one per send/recv syscall.
//!
//! The kernel side splits a syscall's bytes into chunks and ends each call with a zero-length
//! `LAST` chunk carrying the totals. Chunks of one call share `(pid_tgid, call_start_ns)`; calls on
//! different threads interleave freely.

use nodeip_trace_common::{chunk_flags, syscall, NetlinkChunkHeader};

use crate::decode::record::c_string;
use crate::model::clock::WallClock;
use crate::model::frame::{Direction, NetlinkFrame, Task};
use crate::model::id_hash::IdMap;

/// Reassembles chunks into frames.
#[derive(Default)]
pub struct ChunkAssembler {
    open: IdMap<(u64, u64), NetlinkFrame>,
}

/// Direction of a syscall number from `nodeip_trace_common::syscall`.
pub fn syscall_direction(call: u32) -> Direction {
    match call {
        syscall::RECVFROM | syscall::RECVMSG => Direction::Recv,
        _ => Direction::Send,
    }
}

impl ChunkAssembler {
    /// An empty frame for the call `h` belongs to.
    fn frame_of(h: &NetlinkChunkHeader, clock: &WallClock) -> NetlinkFrame {
        NetlinkFrame {
            wall_ns: clock.wall_ns(h.header.ts_ns),
            ts_ns: h.header.ts_ns,
            protocol: h.protocol as u16,
            direction: Some(syscall_direction(h.syscall)),
            task: Some(Task {
                pid: (h.header.pid_tgid >> 32) as u32,
                tid: h.header.pid_tgid as u32,
                comm: c_string(&h.header.comm),
            }),
            netns: h.header.netns,
            total_len: 0,
            bytes: Vec::new(),
        }
    }

    /// Adds a chunk; returns the frame when this was its call's last chunk. The payload is
    /// taken: a call's first chunk becomes the frame's bytes without a copy.
    pub fn push(
        &mut self,
        h: &NetlinkChunkHeader,
        payload: Vec<u8>,
        clock: &WallClock,
    ) -> Option<NetlinkFrame> {
        let key = (h.header.pid_tgid, h.call_start_ns);
        let last = h.flags & chunk_flags::LAST != 0;
        // A call in one chunk (most requests and replies) needs no entry in the open calls.
        let mut whole = (last && h.offset == 0 && !self.open.contains_key(&key))
            .then(|| Self::frame_of(h, clock));
        let frame = match whole.as_mut() {
            Some(frame) => frame,
            None => self
                .open
                .entry(key)
                .or_insert_with(|| Self::frame_of(h, clock)),
        };
        // Chunks arrive in order for one call; a gap (a chunk lost to a full ring buffer) ends
        // the captured bytes there, so nothing after a hole is misread as message boundaries.
        if h.len > 0
            && h.offset as usize == frame.bytes.len()
            && h.flags & chunk_flags::READ_FAILED == 0
        {
            if frame.bytes.is_empty() {
                frame.bytes = payload;
            } else {
                frame.bytes.extend_from_slice(&payload);
            }
        }
        if last {
            let mut frame = match whole {
                Some(frame) => frame,
                None => self.open.remove(&key)?,
            };
            frame.total_len = h.total_len.max(frame.bytes.len() as u32);
            return Some(frame);
        }
        None
    }

    /// Calls still open (their LAST chunk was lost); returned as truncated frames at shutdown.
    pub fn drain(&mut self) -> Vec<NetlinkFrame> {
        let mut frames: Vec<NetlinkFrame> = self
            .open
            .drain()
            .map(|(_, mut f)| {
                f.total_len = f.total_len.max(f.bytes.len() as u32 + 1);
                f
            })
            .collect();
        frames.sort_by_key(|f| f.ts_ns);
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodeip_trace_common::EventHeader;

    fn chunk(offset: u32, len: u32, flags: u32, total: u32) -> NetlinkChunkHeader {
        NetlinkChunkHeader {
            header: EventHeader {
                kind: 2,
                netns: 0,
                ts_ns: 100,
                pid_tgid: (5 << 32) | 6,
                cgroup_id: 0,
                comm: *b"ip\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
            },
            call_start_ns: 90,
            fd: 3,
            protocol: 0,
            syscall: syscall::RECVMSG,
            ret: total as i32,
            total_len: total,
            offset,
            len,
            flags,
        }
    }

    #[test]
    fn joins_chunks_and_reports_totals() {
        let mut a = ChunkAssembler::default();
        let clock = WallClock::identity();
        assert!(a.push(&chunk(0, 3, 0, 0), vec![1, 2, 3], &clock).is_none());
        assert!(a.push(&chunk(3, 2, 0, 0), vec![4, 5], &clock).is_none());
        let f = a
            .push(&chunk(5, 0, chunk_flags::LAST, 5), vec![], &clock)
            .unwrap();
        assert_eq!(f.bytes, vec![1, 2, 3, 4, 5]);
        assert_eq!(f.direction, Some(Direction::Recv));
        assert!(!f.truncated());
        assert_eq!(f.task.unwrap().comm, "ip");
    }

    #[test]
    fn a_lost_chunk_truncates_instead_of_splicing() {
        let mut a = ChunkAssembler::default();
        let clock = WallClock::identity();
        a.push(&chunk(0, 3, 0, 0), vec![1, 2, 3], &clock);
        a.push(&chunk(6, 2, 0, 0), vec![7, 8], &clock);
        let f = a
            .push(
                &chunk(8, 0, chunk_flags::LAST | chunk_flags::CUT, 8),
                vec![],
                &clock,
            )
            .unwrap();
        assert_eq!(f.bytes, vec![1, 2, 3]);
        assert!(f.truncated());
    }

    #[test]
    fn a_data_chunk_can_close_its_call() {
        let mut a = ChunkAssembler::default();
        let clock = WallClock::identity();
        // One chunk: the whole call, no entry kept.
        let f = a
            .push(&chunk(0, 4, chunk_flags::LAST, 4), vec![1, 2, 3, 4], &clock)
            .unwrap();
        assert_eq!((f.bytes.len(), f.total_len, f.truncated()), (4, 4, false));
        assert!(a.drain().is_empty());
        // The last of several.
        assert!(a.push(&chunk(0, 2, 0, 0), vec![1, 2], &clock).is_none());
        let f = a
            .push(&chunk(2, 2, chunk_flags::LAST, 4), vec![3, 4], &clock)
            .unwrap();
        assert_eq!(f.bytes, vec![1, 2, 3, 4]);
        // Unreadable and cut: the totals stay, the bytes do not.
        let f = a
            .push(
                &chunk(
                    0,
                    0,
                    chunk_flags::LAST | chunk_flags::READ_FAILED | chunk_flags::CUT,
                    9,
                ),
                vec![],
                &clock,
            )
            .unwrap();
        assert!(f.bytes.is_empty() && f.truncated() && f.total_len == 9);
    }

    #[test]
    fn unfinished_calls_are_drained_as_truncated() {
        let mut a = ChunkAssembler::default();
        a.push(&chunk(0, 2, 0, 0), vec![1, 2], &WallClock::identity());
        let frames = a.drain();
        assert_eq!(frames.len(), 1);
        assert!(frames[0].truncated());
    }
}
