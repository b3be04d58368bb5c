//! The live source: the eBPF ring buffer, polled with tokio, drained in batches.
//!
//! Draining is split from understanding: each [`LiveSource::drain`] first moves every record
//! the ring holds into an in-memory [`RecordQueue`] (a copy, ≈ 0.1 µs a record), then decodes a
//! batch from the queue's front. The consumer's decoding, correlating and writing therefore run
//! behind a queue that empties the ring between batches, and a burst the consumer cannot keep up
//! with waits in the queue instead of overflowing the ring. The queue is bounded by bytes: when
//! it is full, records stay in the ring, and what the ring then cannot take is counted by the
//! kernel side's loss counters per kind exactly as without the queue.
use std::collections::VecDeque;

use aya::maps::MapData;
use tokio::io::unix::AsyncFd;

mod ring;

use ring::RingReader;

use crate::decode::record::{parse_record, KernelRecord, RecordError};

/// Bytes of raw records the queue holds at most: the tracer's memory bound under a burst.
/// Budget (RSS, measured): ≈ 15 MiB of code and start-up state, the default 4 MiB ring (mapped
/// once, see `ring`), this queue (28) and 7–11 MiB of records being decoded and written:
/// 54–58 MiB at the peak of `load_gen`'s 100,000-pair burst, under the 64 MiB target. A
/// 100,000-pair `ip -batch` `route get` burst queues 13–19 MiB behind `--format json --output
/// F` (1.5 MiB with `--pcap F` or text); `load_gen`'s, three times faster, fills it, and what
/// neither queue nor ring can take is counted as lost.
pub const QUEUE_MAX_BYTES: usize = 28 << 20;

/// Bytes of record data per queue segment.
const SEGMENT_BYTES: usize = 1 << 20;

/// Emptied segments kept for reuse (so a steady load does not allocate, and a burst's
/// memory goes back to the system after it).
const SPARE_SEGMENTS: usize = 4;

/// Raw ring-buffer records in arrival order, in segments of about [`SEGMENT_BYTES`].
pub struct RecordQueue {
    segments: VecDeque<Segment>,
    spare: Vec<Segment>,
    /// Record bytes held.
    bytes: usize,
    /// The most record bytes held at once.
    peak_bytes: usize,
    max_bytes: usize,
}

/// Records stored back to back, `ends[i]` the end of record `i` in `data` (`u32`: a segment is
/// 1 MiB, or one record, and records are smaller than the ring), `next` the first one not yet
/// taken.
#[derive(Default)]
struct Segment {
    data: Vec<u8>,
    ends: Vec<u32>,
    next: usize,
}

impl Segment {
    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
        self.next = 0;
    }
}

impl RecordQueue {
    /// An empty queue that holds at most `max_bytes` of record data.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            segments: VecDeque::new(),
            spare: Vec::new(),
            bytes: 0,
            peak_bytes: 0,
            max_bytes,
        }
    }

    /// Whether the queue is below its bound (then it takes one more record, of any size).
    pub fn has_room(&self) -> bool {
        self.bytes < self.max_bytes
    }

    /// Appends a copy of a record given in two parts, `head` then `tail` (a record that wraps
    /// past the ring's end; `tail` is empty otherwise). Callers check [`Self::has_room`] first:
    /// the bound is passed by at most one record.
    pub fn push(&mut self, head: &[u8], tail: &[u8]) {
        let len = head.len() + tail.len();
        let room = self
            .segments
            .back()
            .is_some_and(|s| s.data.len() + len <= s.data.capacity());
        if !room {
            let mut segment = self.spare.pop().unwrap_or_default();
            segment.data.reserve(SEGMENT_BYTES.max(len));
            self.segments.push_back(segment);
        }
        let segment = self
            .segments
            .back_mut()
            .expect("a segment was just ensured");
        segment.data.extend_from_slice(head);
        segment.data.extend_from_slice(tail);
        segment.ends.push(segment.data.len() as u32);
        self.bytes += len;
        self.peak_bytes = self.peak_bytes.max(self.bytes);
    }

    /// Hands the oldest record to `take`, then forgets it; false when the queue is empty.
    pub fn pop_with(&mut self, take: impl FnOnce(&[u8])) -> bool {
        let Some(segment) = self.segments.front_mut() else {
            return false;
        };
        let start = match segment.next {
            0 => 0,
            i => segment.ends[i - 1] as usize,
        };
        let end = segment.ends[segment.next] as usize;
        take(&segment.data[start..end]);
        segment.next += 1;
        self.bytes -= end - start;
        if segment.next == segment.ends.len() {
            let mut done = self.segments.pop_front().expect("the front segment exists");
            if self.spare.len() < SPARE_SEGMENTS {
                done.clear();
                self.spare.push(done);
            }
        }
        true
    }

    /// Record bytes held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The most record bytes held at once so far.
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }
}

/// Reads kernel records from the ring buffer.
pub struct LiveSource {
    ring: AsyncFd<RingReader>,
    queue: RecordQueue,
}

impl LiveSource {
    /// Maps the ring buffer map (`EVENTS`) and wraps it for async polling.
    pub fn new(ring: MapData) -> std::io::Result<Self> {
        let ring = RingReader::new(ring)?;
        // SAFETY: the reader owns its map fd and keeps it open for as long as the AsyncFd
        // (which owns the reader) lives.
        let ring = unsafe { AsyncFd::register(ring) }?;
        Ok(Self {
            ring,
            queue: RecordQueue::new(QUEUE_MAX_BYTES),
        })
    }

    /// The most record bytes the queue held at once so far (of [`QUEUE_MAX_BYTES`]): how close
    /// a burst came to leaving records in the ring.
    pub fn queue_peak_bytes(&self) -> usize {
        self.queue.peak_bytes()
    }

    /// Waits until records are available.
    pub async fn readable(&mut self) -> std::io::Result<()> {
        let mut guard = self.ring.readable_mut().await?;
        guard.clear_ready();
        Ok(())
    }

    /// Moves every record the ring holds into the queue, until the queue is full.
    fn empty_ring(&mut self) {
        let queue = &mut self.queue;
        self.ring.get_mut().read(|head, tail| {
            if !queue.has_room() {
                return false;
            }
            queue.push(head, tail);
            true
        });
    }

    /// Empties the ring into the queue, then decodes up to `max` queued records into `out`
    /// (undecodable ones go to `errors`). Fewer than `max` means ring and queue are both empty.
    pub fn drain(
        &mut self,
        out: &mut Vec<KernelRecord>,
        errors: &mut Vec<RecordError>,
        max: usize,
    ) {
        let mut n = 0;
        // Twice: what arrived while the first batch was decoded is queued too, so "fewer than
        // max" keeps meaning that nothing is waiting.
        for _ in 0..2 {
            self.empty_ring();
            while n < max
                && self.queue.pop_with(|bytes| match parse_record(bytes) {
                    Ok(r) => out.push(r),
                    Err(e) => errors.push(e),
                })
            {
                n += 1;
            }
            if n == max {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RecordQueue;

    fn drain_all(queue: &mut RecordQueue) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        while queue.pop_with(|b| got.push(b.to_vec())) {}
        got
    }

    #[test]
    fn records_come_out_in_order_across_segments() {
        let mut queue = RecordQueue::new(usize::MAX);
        let records: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| vec![(i % 251) as u8; 1 + (i as usize * 37) % 1500])
            .collect();
        for r in &records {
            queue.push(r, &[]);
        }
        assert_eq!(queue.bytes(), records.iter().map(Vec::len).sum::<usize>());
        assert_eq!(drain_all(&mut queue), records);
        assert_eq!(queue.bytes(), 0);
        // Reused segments start empty; a record in two parts (wrapped in the ring) is one.
        queue.push(b"again", &[]);
        queue.push(b"wrap", b"ped");
        assert_eq!(
            drain_all(&mut queue),
            vec![b"again".to_vec(), b"wrapped".to_vec()]
        );
    }

    #[test]
    fn a_full_queue_has_no_room_until_drained() {
        let mut queue = RecordQueue::new(10);
        queue.push(b"12345678", &[]);
        assert!(queue.has_room());
        queue.push(b"123", &[]);
        assert!(!queue.has_room());
        assert_eq!(queue.bytes(), 11);
        assert_eq!(drain_all(&mut queue).len(), 2);
        assert_eq!((queue.bytes(), queue.peak_bytes()), (0, 11));
        assert!(queue.has_room());
    }

    #[test]
    fn a_record_larger_than_a_segment_is_kept_whole() {
        let mut queue = RecordQueue::new(usize::MAX);
        let big = vec![7u8; super::SEGMENT_BYTES + 10];
        queue.push(b"small", &[]);
        queue.push(&big, &[]);
        assert_eq!(drain_all(&mut queue), vec![b"small".to_vec(), big]);
    }
}
