//! The live source: the eBPF ring buffer, drained by a thread of its own and in batches.
//!
//! Draining is split from understanding: a drain thread moves every record the ring holds into
//! an in-memory [`RecordQueue`] (a copy, ≈ 0.1 µs a record) every few milliseconds while
//! records come (as often as the ring's fill rate needs), and each [`LiveSource::drain`] does the
//! same before it decodes a batch from the queue's front. The drain thread also decides when
//! the consumer wakes: for a backlog, for records that waited 10 ms, and for the last of a
//! trickle. The consumer's decoding, correlating and writing therefore run
//! behind a queue that empties the ring between batches, and a burst the consumer cannot keep up
//! with waits in the queue instead of overflowing the ring. The queue's memory is bounded by
//! bytes; beyond it, records go to a [`spill::SpillFile`] (an unnamed file, bounded too) and come
//! back from it in order. When both are full (or there is no spill), records stay in the ring,
//! and what the ring then cannot take is counted by the kernel side's loss counters per kind
//! exactly as without the queue.
use std::collections::VecDeque;
use std::path::PathBuf;

use aya::maps::MapData;
use tokio::io::unix::AsyncFd;

mod ring;
mod spill;

use ring::{RingMapping, RingReader};
use spill::SpillFile;

use crate::decode::record::{parse_record, KernelRecord, RecordError};

/// Bytes of raw records the queue holds at most: the tracer's memory bound under a burst.
/// Budget (RSS, measured): ≈ 15 MiB of code and start-up state, the default 4 MiB ring (mapped
/// once, see `ring`), this queue (24), its ready segments (up to [`SPARE_SEGMENTS`] MiB), the
/// spill's 1 MiB write buffer and 7–11 MiB of records being decoded and written: at most
/// 64 MiB at the peak of `load_gen`'s 100,000-pair burst. A 100,000-pair `ip -batch`
/// `route get` burst queues 13–19 MiB behind `--format json --output F` (1.5 MiB with
/// `--pcap F` or text); `load_gen`'s, three times faster, fills it and spills, and what neither
/// queue, spill nor ring can take is counted as lost.
pub const QUEUE_MAX_BYTES: usize = 24 << 20;

/// Bytes of record data per queue segment.
const SEGMENT_BYTES: usize = 1 << 20;

/// Segments kept ready for the queue, their pages already touched: emptied ones are kept for
/// reuse (one more than this), and the consumer makes new ones between its batches (so a
/// burst's memory goes back to the system after it, beyond these). The drain thread then never faults memory in: making
/// fresh segments itself, page faults and mimalloc's page set-up were most of its time in a
/// burst, 5 ms of CPU in some passes and 11–16 ms in others, while the ring filled
/// (diary: `git show 3c0bc23:BENCHMARKS.md`, 2026-11-26 18:40).
const SPARE_SEGMENTS: usize = 4;

/// Record ends a segment has room for before its index grows (≈ 100-byte records; touched
/// with the data, so the drain thread does not grow it in a burst).
const SEGMENT_RECORDS: usize = SEGMENT_BYTES / 64;

/// Default bound of the spill file, in MiB (`--spill-mib`).
pub const DEFAULT_SPILL_MIB: u64 = 512;

/// Bytes of records brought back from the spill into memory at a time (into an empty memory,
/// so within its bound when that is larger). One segment: the read-back happens under the
/// lock the drain thread needs, and 4 MiB at a time kept it waiting for milliseconds.
const READ_BACK_BYTES: usize = SEGMENT_BYTES;

/// Where records beyond the queue's memory go: a directory for the spill file, and its bound.
#[derive(Clone, Debug)]
pub struct SpillConfig {
    /// Directory of the unnamed spill file.
    pub dir: PathBuf,
    /// Framed bytes the spill holds at most.
    pub max_bytes: u64,
}

/// Raw ring-buffer records in arrival order, in segments of about [`SEGMENT_BYTES`] in memory,
/// and beyond the memory bound in a spill file.
pub struct RecordQueue {
    segments: VecDeque<Segment>,
    spare: Vec<Segment>,
    /// Record bytes held in memory.
    bytes: usize,
    /// The most record bytes held in memory at once.
    peak_bytes: usize,
    max_bytes: usize,
    /// Where records beyond `max_bytes` may go (`None`: nowhere, they stay in the ring).
    spill_config: Option<SpillConfig>,
    /// The spill file, made at the first record that needs it. Records in it are newer than
    /// those in memory: while it holds any, every new record goes there too.
    spill: Option<SpillFile>,
    /// The first spill failure; the spill takes no record after it.
    spill_failure: Option<std::io::Error>,
    /// Records that could not be read back from the spill (lost).
    spill_lost: u64,
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

/// An empty buffer with room for `capacity` items, every page of it written once, so that the
/// drain thread filling it later takes no page fault (`vec![0; n]` may map zeroed pages
/// without touching them, so a non-zero value is written).
fn touched_buffer<T: Copy + From<u8>>(capacity: usize) -> Vec<T> {
    let mut buffer = std::hint::black_box(vec![T::from(1); capacity]);
    buffer.clear();
    buffer
}

impl Segment {
    /// An empty segment whose memory is allocated and written once, so that filling it costs
    /// no page fault.
    fn touched() -> Self {
        Self {
            data: touched_buffer(SEGMENT_BYTES),
            ends: touched_buffer(SEGMENT_RECORDS),
            next: 0,
        }
    }

    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
        self.next = 0;
    }

    /// Appends a record given in two parts (`head`, then `tail`).
    fn push(&mut self, head: &[u8], tail: &[u8]) {
        self.data.extend_from_slice(head);
        self.data.extend_from_slice(tail);
        self.ends.push(self.data.len() as u32);
    }

    /// Records held (taken ones included).
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// Each record held, in order.
    fn records(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&e| e as usize));
        starts
            .zip(self.ends.iter())
            .map(|(start, &end)| &self.data[start..end as usize])
    }
}

impl RecordQueue {
    /// An empty queue that holds at most `max_bytes` of record data in memory, and beyond that
    /// spills as `spill` says (`None`: never).
    pub fn new(max_bytes: usize, spill: Option<SpillConfig>) -> Self {
        Self {
            segments: VecDeque::new(),
            spare: Vec::new(),
            bytes: 0,
            peak_bytes: 0,
            max_bytes,
            spill_config: spill,
            spill: None,
            spill_failure: None,
            spill_lost: 0,
        }
    }

    /// Bytes of records waiting: in memory, and in the spill file.
    fn waiting_bytes(&self) -> usize {
        let spilled = self.spill.as_ref().map_or(0, SpillFile::held);
        self.bytes
            .saturating_add(usize::try_from(spilled).unwrap_or(usize::MAX))
    }

    /// Whether records are waiting in the spill file.
    fn spilling(&self) -> bool {
        self.spill.as_ref().is_some_and(|s| !s.is_empty())
    }

    /// Whether the spill may take one more record.
    fn spill_has_room(&self) -> bool {
        match (&self.spill_config, &self.spill_failure) {
            (Some(config), None) => self
                .spill
                .as_ref()
                .is_none_or(|s| s.held() < config.max_bytes),
            _ => false,
        }
    }

    /// Takes a copy of a record given in two parts, `head` then `tail` (a record that wraps past
    /// the ring's end; `tail` is empty otherwise): in memory below the bound (passed by at most
    /// one record), else in the spill. False when neither can take it (it stays in the ring).
    pub fn push(&mut self, head: &[u8], tail: &[u8]) -> bool {
        if self.spilling() || self.bytes >= self.max_bytes {
            // Memory may have room again while the spill still holds records: those are older,
            // so the new one goes behind them.
            return self.spill_has_room() && self.push_to_spill(head, tail);
        }
        self.push_to_memory(head, tail);
        true
    }

    /// Appends a record to the spill, making the file first if needed; a failure is kept
    /// (reported by [`Self::spill_failure`]) and stops the spill from taking records.
    fn push_to_spill(&mut self, head: &[u8], tail: &[u8]) -> bool {
        if let Err(e) = self.open_spill() {
            self.spill_failure = Some(e);
            return false;
        }
        let Some(spill) = self.spill.as_mut() else {
            return false;
        };
        match spill.append(head, tail) {
            Ok(()) => true,
            Err(e) => {
                self.spill_failure = Some(e);
                false
            }
        }
    }

    /// Makes the spill file now, if a spill is configured and not yet made: at start-up, so a
    /// directory that cannot take it is known before a burst needs it. A failure here is not
    /// kept: the first record that needs the spill tries again.
    pub fn open_spill(&mut self) -> std::io::Result<()> {
        if let (Some(config), None) = (&self.spill_config, &self.spill) {
            self.spill = Some(SpillFile::create(&config.dir)?);
        }
        Ok(())
    }

    /// Appends a record in memory.
    fn push_to_memory(&mut self, head: &[u8], tail: &[u8]) {
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
        segment.push(head, tail);
        self.bytes += len;
        self.peak_bytes = self.peak_bytes.max(self.bytes);
    }

    /// How many ready segments the queue lacks (see [`SPARE_SEGMENTS`]).
    fn spares_wanted(&self) -> usize {
        SPARE_SEGMENTS.saturating_sub(self.spare.len())
    }

    /// Keeps a ready segment for the records to come.
    fn add_spare(&mut self, segment: Segment) {
        self.spare.push(segment);
    }

    /// Hands the oldest record to `take`, then forgets it; false when the queue is empty.
    pub fn pop_with(&mut self, take: impl FnOnce(&[u8])) -> bool {
        if self.segments.is_empty() && self.spilling() {
            self.read_back_spill();
        }
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
            // One beyond the stock: the segment in use comes back emptied each time the
            // consumer catches up, while a fresh one was stocked in its place. Dropped there,
            // each batch made and touched a new MiB and freed one (most of the consumer's
            // user time in the 6.1 guest: ≈ 1 ms a wake-up under TCG).
            if self.spare.len() <= SPARE_SEGMENTS {
                done.clear();
                self.spare.push(done);
            }
        }
        true
    }

    /// Brings the spill's oldest records back into memory (memory is empty). A file that
    /// cannot be read loses what it held: counted in [`Self::spill_lost`].
    fn read_back_spill(&mut self) {
        let Some(mut spill) = self.spill.take() else {
            return;
        };
        let mut back = 0u64;
        let read = spill.read_back(READ_BACK_BYTES.min(self.max_bytes), |record| {
            self.push_to_memory(record, &[]);
            back += 1;
        });
        if let Err(e) = read {
            if back == 0 {
                // Nothing comes back any more: what it holds is lost (its records' count is
                // not known without reading it; each is at least a header).
                self.spill_lost += spill
                    .held()
                    .div_ceil(nodeip_trace_common::EVENT_HEADER_LEN as u64);
                self.spill_failure.get_or_insert(e);
                return;
            }
        }
        self.spill = Some(spill);
    }

    /// Forgets every record waiting (in memory and in the spill): how many.
    pub fn discard_all(&mut self) -> u64 {
        let mut n = 0;
        while self.pop_with(|_| n += 1) {}
        n
    }

    /// Record bytes held in memory now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The most record bytes held in memory at once so far.
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }

    /// The most bytes the spill file held at once so far (0: never used).
    pub fn spill_peak_bytes(&self) -> u64 {
        self.spill.as_ref().map_or(0, SpillFile::peak)
    }

    /// Why the spill stopped taking records, if it did.
    pub fn spill_failure(&self) -> Option<&std::io::Error> {
        self.spill_failure.as_ref()
    }

    /// Records (at most; counted by their bytes when the file could not be read at all) lost
    /// because the spill could not give them back.
    pub fn spill_lost(&self) -> u64 {
        self.spill_lost
    }
}

/// How long the drain thread waits on an empty ring: the first record after it raised the
/// `READER_WAITING` flag wakes it, so the wait is only how soon it sees that the source was
/// dropped.
const DRAIN_IDLE_WAIT_MS: i32 = 100;

/// Bytes queued beyond which the drain thread hands the queue to the consumer at once (a burst).
const WAKE_CONSUMER_BYTES: usize = 1 << 20;

/// The longest queued records wait before the drain thread hands them to the consumer while
/// more keep coming; the last of a trickle is handed over as soon as the ring is empty. The
/// consumer woken at every pass (a millisecond apart then) took tiny batches through a storm,
/// and its CPU in the 6.1 guest doubled (`bench --vm`, 12:24 vs 12:34 UTC on 2026-11-27).
const CONSUMER_LATENCY: std::time::Duration = std::time::Duration::from_millis(10);

/// How long the drain thread waits between passes while records come, unless the kernel side
/// wakes it first because [`ring_bytes_that_wake`] bytes wait in the ring. It bounds how late
/// a steady stream's records are seen. Each pass is a wake-up (under QEMU TCG some 200 µs of
/// the guest's time): paced at 1–8 ms by a measured rate, so that the fastest surge could not
/// fill half the ring within one pause, a steady stream woke the thread four times as often
/// (664 against 148 wake-ups in 5 s of 2,000 route gets a second; diary:
/// `git show 3c0bc23:BENCHMARKS.md`, 2026-11-29).
const DRAIN_BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// The ring bytes at which the kernel side wakes the drain thread from its wait between passes:
/// an eighth of a `ring`-byte ring, leaving seven eighths for the time the thread takes to run
/// (at the host's `ip -batch` storm rate, some 100 MB/s, 36 ms for the default 4 MiB ring).
fn ring_bytes_that_wake(ring: usize) -> u32 {
    u32::try_from(ring / 8).unwrap_or(u32::MAX).max(2)
}

/// The kernel side's `READER_WAITING` flag (element 0 of a one-element `BPF_F_MMAPABLE` array
/// map), mapped into this process: the drain thread reads and sets it without a system call.
/// (Set with a `bpf()` call before every idle wait, it cost the idle thread a second system
/// call each 10 ms; a 6.12 guest under QEMU TCG once oopsed on the return from that call, at
/// the syscall-exit tracepoint's patch site.)
pub struct WaitingFlag {
    /// The map: its fd keeps the mapping's memory alive.
    _map: MapData,
    /// The map's value area, its first page.
    mapping: RingMapping,
}

// SAFETY: the mapping is owned by this value and touched only through an atomic.
unsafe impl Send for WaitingFlag {}
// SAFETY: as above: shared between the drain thread and the consumer, the flag is only ever
// read and written through an atomic.
unsafe impl Sync for WaitingFlag {}

impl WaitingFlag {
    /// Maps the flag's map (created `BPF_F_MMAPABLE`).
    pub fn new(map: MapData) -> std::io::Result<Self> {
        use std::os::fd::{AsFd as _, AsRawFd as _};
        let fd = map.fd().as_fd().as_raw_fd();
        let mapping = RingMapping::new(fd, ring::page_size()?, 0, true)?;
        Ok(Self { _map: map, mapping })
    }

    /// The flag, shared with the kernel side.
    fn flag(&self) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: the mapping's first 4 bytes are element 0 (a u32, 8-byte aligned at a page
        // start), live while `self` is; the kernel side reads and writes them too, so they are
        // only ever accessed atomically here.
        unsafe { &*self.mapping.as_ptr().cast::<std::sync::atomic::AtomicU32>() }
    }

    /// Asks for a wake-up at the next record (the kernel side sets the flag back to 0 when it
    /// wakes the reader), unless that is asked for already.
    fn raise(&self) {
        let flag = self.flag();
        if flag.load(std::sync::atomic::Ordering::Relaxed) != 1 {
            flag.store(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Asks for a wake-up once `bytes` wait in the ring (more than 1: [`ring_bytes_that_wake`]
    /// gives it; 0 and 1 mean no wake-up and the next record).
    fn raise_at(&self, bytes: u32) {
        self.flag()
            .store(bytes, std::sync::atomic::Ordering::SeqCst);
    }

    /// Asks for no wake-up.
    fn lower(&self) {
        self.flag().store(0, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An edge-triggered epoll of the ring's fd: a wait on it returns at the kernel side's next
/// wake-up of the ring's readers (at once for one that came since the last wait), not as soon
/// as the ring holds data, as `poll` does: what the drain thread needs to wait between passes
/// while records keep coming.
struct RingWakeups(std::os::fd::OwnedFd);

impl RingWakeups {
    /// Watches `ring_fd` (the caller keeps it open while this lives).
    fn new(ring_fd: std::os::fd::RawFd) -> std::io::Result<Self> {
        use std::os::fd::FromRawFd as _;
        // SAFETY: plain system calls; the new fd is owned at once.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `epoll` was just made and is owned by nothing else.
        let epoll = unsafe { std::os::fd::OwnedFd::from_raw_fd(epoll) };
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLET) as u32,
            u64: 0,
        };
        // SAFETY: a valid epoll fd, the caller's open fd and a valid event.
        let added = unsafe {
            libc::epoll_ctl(
                std::os::fd::AsRawFd::as_raw_fd(&epoll),
                libc::EPOLL_CTL_ADD,
                ring_fd,
                &mut event,
            )
        };
        if added < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self(epoll))
    }

    /// Waits up to `timeout` for a wake-up: whether one came (an error or a signal counts as
    /// one: the caller just makes its next pass early).
    fn wait(&self, timeout: std::time::Duration) -> bool {
        let mut event = libc::epoll_event { events: 0, u64: 0 };
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: a valid epoll fd and room for one event.
        let n = unsafe {
            libc::epoll_wait(std::os::fd::AsRawFd::as_raw_fd(&self.0), &mut event, 1, ms)
        };
        n != 0
    }
}

/// The ring and the queue it is emptied into, behind one lock.
struct RingAndQueue {
    ring: RingReader,
    queue: RecordQueue,
    /// The most bytes the ring held when emptied.
    fullest: u64,
    /// Times the ring was found over half full after a wait for the kernel side's wake-up (see
    /// [`DrainDelays::missed_wakeups`]).
    missed_wakeups: u64,
    /// The trace is stopping: the ring was emptied one last time and is read no more.
    sealed: bool,
}

impl RingAndQueue {
    /// Moves every record the ring holds into the queue, until the queue is full: what moved.
    /// `after_wakeup_wait`: the reader comes from (or the drain thread is in) a wait the kernel
    /// side was to end by a wake-up, at the first record or at an eighth of the ring, so the
    /// ring should be far from half full.
    fn empty_ring(&mut self, after_wakeup_wait: bool) -> Emptied {
        if self.sealed {
            return Emptied {
                moved: 0,
                refused: false,
            };
        }
        let held = self.ring.held();
        self.fullest = self.fullest.max(held);
        if after_wakeup_wait && held > self.ring.size() as u64 / 2 {
            self.missed_wakeups += 1;
        }
        let (queue, mut moved, mut refused) = (&mut self.queue, 0, false);
        self.ring.read(|head, tail| {
            let taken = queue.push(head, tail);
            moved += usize::from(taken);
            refused |= !taken;
            taken
        });
        Emptied { moved, refused }
    }
}

/// What a pass over the ring moved into the queue.
struct Emptied {
    /// Records moved.
    moved: usize,
    /// Whether the queue refused one (it is full).
    refused: bool,
}

/// How full the ring was found at worst, and how late the drain thread came to it: what a run
/// that lost records to a full ring says of it (a ring overflows when neither that thread nor
/// the consumer empties it for as long as it takes to fill).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainDelays {
    /// The most bytes the ring held when a reader (the drain thread, the consumer) came to it.
    pub fullest: u64,
    /// The ring's data bytes.
    pub ring: u64,
    /// The longest a wait between passes lasted beyond its timeout (the thread waiting for a
    /// CPU).
    pub oversleep: std::time::Duration,
    /// The longest the thread waited for the lock the consumer takes to copy out a batch.
    pub lock_wait: std::time::Duration,
    /// Times a reader found the ring over half full after (or, for the consumer, during) a
    /// wait of the drain thread for the kernel side's wake-up, which the first record (idle)
    /// or the record that filled an eighth of the ring (between passes) should have sent.
    pub missed_wakeups: u64,
}

/// [`DrainDelays`] as the drain thread keeps them, in microseconds.
#[derive(Default)]
struct DrainDelayMaxima {
    oversleep_us: std::sync::atomic::AtomicU64,
    lock_wait_us: std::sync::atomic::AtomicU64,
}

impl DrainDelayMaxima {
    fn note(slot: &std::sync::atomic::AtomicU64, delay: std::time::Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        slot.fetch_max(us, std::sync::atomic::Ordering::Relaxed);
    }

    /// The delays so far, beside the ring's `fullest` and `ring` sizes.
    fn get(&self, fullest: u64, ring: u64, missed_wakeups: u64) -> DrainDelays {
        let read = |slot: &std::sync::atomic::AtomicU64| {
            std::time::Duration::from_micros(slot.load(std::sync::atomic::Ordering::Relaxed))
        };
        DrainDelays {
            fullest,
            ring,
            oversleep: read(&self.oversleep_us),
            lock_wait: read(&self.lock_wait_us),
            missed_wakeups,
        }
    }
}

/// What the drain thread and the consumer share.
struct Shared {
    inner: std::sync::Mutex<RingAndQueue>,
    /// The drain thread's worst delays so far.
    delays: DrainDelayMaxima,
    /// Set when the source is dropped: the drain thread ends.
    stop: std::sync::atomic::AtomicBool,
    /// Signalled when the drain thread moved records and the queue holds a backlog.
    arrived: tokio::sync::Notify,
    /// The kernel side's `READER_WAITING` flag.
    waiting: WaitingFlag,
    /// Set while the drain thread waits on an empty ring for the kernel's wake-up, from before
    /// it raises the flag. The consumer empties the ring too: when it takes records while this
    /// is set, it raises the flag again. Without that, it could take the very record whose
    /// program cleared the flag to wake the thread, and the thread then slept through its
    /// whole idle wait (100 ms) while a storm's records, none of them waking anyone, filled
    /// the 4 MiB ring in about 50: the storm rows' rare losses with the drain thread neither
    /// late nor blocked (diary: `git show 3c0bc23:BENCHMARKS.md`, 2026-11-28 13:15).
    drain_thread_idle: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, RingAndQueue> {
        // A panic elsewhere while holding the lock leaves bytes that are still whole records.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads kernel records from the ring buffer. A drain thread moves them from the ring into the
/// queue every [`DRAIN_BUSY_WAIT`] while they come, or sooner when the kernel side sees an
/// eighth of the ring filled (see [`ring_bytes_that_wake`]), so the ring is emptied while the
/// consumer renders and writes a batch (`load_gen`'s 100,000-pair burst filled the 4 MiB ring
/// between batches in 5 of 10 runs, 1 of 10 with the thread); the consumer empties the ring
/// too, before each batch it takes.
pub struct LiveSource {
    shared: std::sync::Arc<Shared>,
    /// The raw records of the batch being decoded, copied out of the queue under the lock and
    /// decoded after it is released.
    batch: Segment,
    drainer: Option<std::thread::JoinHandle<()>>,
    /// The ring's fd (a duplicate) in the runtime's poller: a kernel wake-up (an exec record)
    /// reaches the consumer itself at once, not a millisecond later through the drain thread
    /// (a short-lived process's `/proc` entries are read at its exec).
    wakeups: AsyncFd<std::os::fd::OwnedFd>,
}

impl LiveSource {
    /// Maps the ring buffer map (`EVENTS`); records beyond the queue's memory go where `spill`
    /// says (`None`: they wait in the ring). `waiting` is the kernel side's `READER_WAITING`
    /// flag, which the drain thread sets before it waits on an empty ring. Until
    /// [`Self::start_drain_thread`], only [`Self::drain`] empties the ring.
    pub fn new(
        ring: MapData,
        waiting: WaitingFlag,
        spill: Option<SpillConfig>,
    ) -> std::io::Result<Self> {
        let ring = RingReader::new(ring)?;
        // SAFETY: the reader's map fd is open here; the duplicate is ours to own.
        let wakeups =
            unsafe { std::os::fd::BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(&ring)) }
                .try_clone_to_owned()?;
        // SAFETY: the AsyncFd owns the duplicate, so it stays open for as long as it is
        // registered.
        let wakeups = unsafe { AsyncFd::register(wakeups) }?;
        Ok(Self {
            wakeups,
            shared: std::sync::Arc::new(Shared {
                inner: std::sync::Mutex::new(RingAndQueue {
                    ring,
                    queue: RecordQueue::new(QUEUE_MAX_BYTES, spill),
                    fullest: 0,
                    missed_wakeups: 0,
                    sealed: false,
                }),
                stop: std::sync::atomic::AtomicBool::new(false),
                arrived: tokio::sync::Notify::new(),
                delays: DrainDelayMaxima::default(),
                waiting,
                drain_thread_idle: std::sync::atomic::AtomicBool::new(false),
            }),
            drainer: None,
            batch: Segment::default(),
        })
    }

    /// Takes what the ring holds into the queue one last time and nothing after: a stopping
    /// trace's records end here, so its last drain ends even while the node goes on making
    /// records faster than they are decoded. Returns the records the ring still held that a full
    /// queue refused (counted as lost: they were made before the stop).
    pub fn seal(&self) -> u64 {
        let mut inner = self.shared.lock();
        let emptied = inner.empty_ring(false);
        let mut refused = 0;
        if emptied.refused {
            inner.ring.read(|_, _| {
                refused += 1;
                true
            });
        }
        inner.sealed = true;
        refused
    }

    /// Record bytes waiting in the queue, its spill file included.
    pub fn queued_bytes(&self) -> usize {
        self.shared.lock().queue.waiting_bytes()
    }

    /// Forgets every record waiting in the queue (a stop asked for twice): how many.
    pub fn discard_queued(&self) -> u64 {
        self.shared.lock().queue.discard_all()
    }

    /// Makes the queue's spill file now (see [`RecordQueue::open_spill`]).
    pub fn open_spill(&self) -> std::io::Result<()> {
        self.shared.lock().queue.open_spill()
    }

    /// Starts the drain thread (once). A thread has its own capability sets and is made with
    /// its creator's: start it after the tracer dropped what it keeps no use for, so that it
    /// holds no more than the rest.
    pub fn start_drain_thread(&mut self) -> std::io::Result<()> {
        if self.drainer.is_some() {
            return Ok(());
        }
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.shared.lock().ring);
        let wakeups = RingWakeups::new(fd)?;
        let theirs = std::sync::Arc::clone(&self.shared);
        self.drainer = Some(
            std::thread::Builder::new()
                .name("ring-drain".into())
                .spawn(move || drain_thread(&theirs, fd, &wakeups))?,
        );
        Ok(())
    }

    /// How full the ring was found and how late the drain thread came to it, at worst so far.
    pub fn drain_delays(&self) -> DrainDelays {
        let (fullest, ring, missed) = {
            let inner = self.shared.lock();
            (
                inner.fullest,
                inner.ring.size() as u64,
                inner.missed_wakeups,
            )
        };
        self.shared.delays.get(fullest, ring, missed)
    }

    /// Runs `look` on the queue (its peaks and the spill's state, at the end of a run).
    pub fn with_queue<R>(&self, look: impl FnOnce(&RecordQueue) -> R) -> R {
        look(&self.shared.lock().queue)
    }

    /// Waits until the kernel wakes the ring's readers (records it must see at once) or the
    /// drain thread hands over queued records (a backlog, records that waited
    /// [`CONSUMER_LATENCY`], the last of a trickle).
    pub async fn readable(&mut self) -> std::io::Result<()> {
        tokio::select! {
            ready = self.wakeups.readable_mut() => ready?.clear_ready(),
            _ = self.shared.arrived.notified() => {}
        }
        Ok(())
    }

    /// Makes the ready segments the queue lacks, outside the lock (see [`SPARE_SEGMENTS`]).
    fn stock_spares(&mut self) {
        let wanted = self.shared.lock().queue.spares_wanted();
        for _ in 0..wanted {
            let segment = Segment::touched();
            self.shared.lock().queue.add_spare(segment);
        }
    }

    /// Empties the ring into the queue, then decodes up to `max` queued records into `out`
    /// (undecodable ones go to `errors`). Fewer than `max` means ring and queue are both empty.
    ///
    /// The lock the drain thread needs is held only to copy the batch's raw bytes out: held
    /// through the decoding too, a consumer preempted mid-batch kept the drain thread waiting
    /// for up to 12 ms while a burst filled the ring, in each of the runs that lost records
    /// (diary: `git show 3c0bc23:BENCHMARKS.md`, 2026-11-26 18:40).
    pub fn drain(
        &mut self,
        out: &mut Vec<KernelRecord>,
        errors: &mut Vec<RecordError>,
        max: usize,
    ) {
        self.stock_spares();
        let mut n = 0;
        // Twice: what arrived while the first batch was decoded is queued too, so "fewer than
        // max" keeps meaning that nothing is waiting.
        for _ in 0..2 {
            let batch = &mut self.batch;
            batch.clear();
            {
                let mut inner = self.shared.lock();
                let idle = self
                    .shared
                    .drain_thread_idle
                    .load(std::sync::atomic::Ordering::SeqCst);
                let emptied = inner.empty_ring(idle);
                if emptied.moved > 0 && idle {
                    // The next record wakes the drain thread (see `drain_thread_idle`).
                    self.shared.waiting.raise();
                }
                while n + batch.len() < max && inner.queue.pop_with(|bytes| batch.push(bytes, &[]))
                {
                }
            }
            n += batch.len();
            for bytes in batch.records() {
                match parse_record(bytes) {
                    Ok(r) => out.push(r),
                    Err(e) => errors.push(e),
                }
            }
            if n == max {
                break;
            }
        }
    }
}

impl Drop for LiveSource {
    fn drop(&mut self) {
        self.shared
            .stop
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(drainer) = self.drainer.take() {
            let _ = drainer.join();
        }
    }
}

/// The drain thread: a pass over the ring, then a wait — after a pass that moved records or
/// left records in the ring, [`DRAIN_BUSY_WAIT`] or until the kernel side sees
/// [`ring_bytes_that_wake`] bytes in the ring (`wakeups`); after one that found the queue full,
/// [`CONSUMER_LATENCY`]; else a wait on the ring's fd for its next record — until the source
/// is dropped. It hands the queue to the consumer (wakes it) when a backlog builds
/// ([`WAKE_CONSUMER_BYTES`]), when records have waited [`CONSUMER_LATENCY`] while more come,
/// and when the ring is empty again: the consumer wakes for records, not on a clock.
fn drain_thread(shared: &Shared, ring_fd: std::os::fd::RawFd, wakeups: &RingWakeups) {
    let wake_at = ring_bytes_that_wake(shared.lock().ring.size());
    // Since when the queue has held records the consumer was not woken for.
    let mut unannounced: Option<std::time::Instant> = None;
    // Every pass but the first follows a wait the kernel side was to end (after an idle one,
    // the thread counts as idle until it has looked).
    let mut waited = false;
    while !shared.stop.load(std::sync::atomic::Ordering::Acquire) {
        let started = std::time::Instant::now();
        let (emptied, queued, left) = {
            let mut inner = shared.lock();
            DrainDelayMaxima::note(&shared.delays.lock_wait_us, started.elapsed());
            if inner.queue.waiting_bytes() == 0 {
                // The consumer took them.
                unannounced = None;
            }
            let emptied = inner.empty_ring(waited);
            shared
                .drain_thread_idle
                .store(false, std::sync::atomic::Ordering::SeqCst);
            (
                emptied,
                inner.queue.waiting_bytes(),
                inner.ring.holds_records(),
            )
        };
        // A pass that moved nothing may still have found records: the first one being written
        // at that moment. That is a burst going on, not an idle ring to wait on.
        let busy = emptied.moved > 0 || emptied.refused || left;
        if queued > 0 {
            let since = *unannounced.get_or_insert(started);
            if queued > WAKE_CONSUMER_BYTES || !busy || started - since >= CONSUMER_LATENCY {
                shared.arrived.notify_one();
                unannounced = None;
            }
        }
        if busy {
            let wait = if emptied.refused {
                // The queue is full: the consumer makes room, not the kernel side; a wake-up
                // asked for there would come at every record while the ring stays full.
                shared.waiting.lower();
                CONSUMER_LATENCY
            } else {
                // Records that came before the flag count toward it: the next record wakes
                // the thread when they are already that many.
                shared.waiting.raise_at(wake_at);
                DRAIN_BUSY_WAIT
            };
            let asleep = std::time::Instant::now();
            if !wakeups.wait(wait) {
                DrainDelayMaxima::note(
                    &shared.delays.oversleep_us,
                    asleep.elapsed().saturating_sub(wait),
                );
            }
        } else {
            // The next record wakes the thread (a burst is read from its start, not up to
            // 10 ms later, when a 1 MiB ring is already full at `load_gen`'s rate). One that
            // came between the pass and the flag needs no wake-up: poll returns at once while
            // the ring holds data.
            shared
                .drain_thread_idle
                .store(true, std::sync::atomic::Ordering::SeqCst);
            shared.waiting.raise();
            let mut pollfd = libc::pollfd {
                fd: ring_fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; the ring's fd stays open while `shared` (which owns the
            // reader) lives, and the caller holds it. An error or EINTR just ends the wait.
            unsafe { libc::poll(&mut pollfd, 1, DRAIN_IDLE_WAIT_MS) };
        }
        waited = true;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{ring_bytes_that_wake, RecordQueue, RingWakeups};

    const MIB: usize = 1 << 20;

    #[test]
    fn drain_delays_keep_the_longest_of_each() {
        use std::time::Duration;
        let maxima = super::DrainDelayMaxima::default();
        for ms in [3, 41, 7] {
            super::DrainDelayMaxima::note(&maxima.oversleep_us, Duration::from_millis(ms));
        }
        super::DrainDelayMaxima::note(&maxima.lock_wait_us, Duration::from_micros(250));
        assert_eq!(
            maxima.get(4096, 8192, 2),
            super::DrainDelays {
                fullest: 4096,
                ring: 8192,
                oversleep: Duration::from_millis(41),
                lock_wait: Duration::from_micros(250),
                missed_wakeups: 2,
            }
        );
    }

    #[test]
    fn the_kernel_side_wakes_the_drain_thread_at_an_eighth_of_the_ring() {
        assert_eq!(ring_bytes_that_wake(4 * MIB), 512 << 10);
        assert_eq!(ring_bytes_that_wake(MIB), 128 << 10);
        // Never 0 or 1 (no wake-up, the next record) and never past what the flag holds.
        assert_eq!(ring_bytes_that_wake(8), 2);
        assert_eq!(ring_bytes_that_wake(usize::MAX), u32::MAX);
    }

    #[test]
    fn a_wait_between_passes_returns_on_a_new_wake_up_not_on_data_still_there() {
        use std::os::fd::{AsRawFd as _, FromRawFd as _};
        // An eventfd stands in for the ring's fd: readable while its count is not 0, as the
        // ring is while it holds records, and it wakes its waiters on each write.
        // SAFETY: a plain system call; the new fd is owned at once.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just made and is owned by nothing else.
        let event = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let wake = || {
            let one = 1u64.to_ne_bytes();
            // SAFETY: 8 bytes to a valid eventfd.
            let written = unsafe { libc::write(event.as_raw_fd(), one.as_ptr().cast(), 8) };
            assert_eq!(written, 8);
        };
        let wakeups = RingWakeups::new(event.as_raw_fd()).unwrap();
        let short = Duration::from_millis(20);
        assert!(!wakeups.wait(short), "nothing happened yet");
        wake();
        assert!(wakeups.wait(short), "a wake-up");
        // Still readable (never read), but no new wake-up: the wait lasts its time.
        let started = std::time::Instant::now();
        assert!(!wakeups.wait(short));
        assert!(started.elapsed() >= short);
        wake();
        assert!(wakeups.wait(Duration::from_secs(5)));
    }

    fn drain_all(queue: &mut RecordQueue) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        while queue.pop_with(|b| got.push(b.to_vec())) {}
        got
    }

    #[test]
    fn records_come_out_in_order_across_segments() {
        let mut queue = RecordQueue::new(usize::MAX, None);
        let records: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| vec![(i % 251) as u8; 1 + (i as usize * 37) % 1500])
            .collect();
        for r in &records {
            assert!(queue.push(r, &[]));
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
    fn ready_segments_are_used_before_new_ones_and_kept_after() {
        let mut queue = RecordQueue::new(usize::MAX, None);
        assert_eq!(queue.spares_wanted(), super::SPARE_SEGMENTS);
        while queue.spares_wanted() > 0 {
            queue.add_spare(super::Segment::touched());
        }
        let ready = queue.spare.last().expect("ready segments").data.as_ptr();
        let record = vec![3u8; 1024];
        // Two segments' worth of records: the ready ones are taken, in order, first.
        for _ in 0..2 * super::SEGMENT_BYTES / record.len() {
            assert!(queue.push(&record, &[]));
        }
        assert_eq!(queue.spares_wanted(), 2);
        assert!(queue.segments.iter().any(|s| s.data.as_ptr() == ready));
        // Emptied segments become ready ones again.
        assert_eq!(
            drain_all(&mut queue).len(),
            2 * super::SEGMENT_BYTES / record.len()
        );
        assert_eq!(queue.spares_wanted(), 0);
    }

    #[test]
    fn a_consumer_that_keeps_up_makes_no_new_segments() {
        // The drain thread pushes a few records, the consumer stocks spares and takes them all,
        // again and again: the segment in use comes back and no fresh one is ever needed after
        // the first stocking.
        let mut queue = RecordQueue::new(usize::MAX, None);
        let mut made = 0;
        for _ in 0..50 {
            for _ in 0..10 {
                assert!(queue.push(&[7u8; 100], &[]));
            }
            while queue.spares_wanted() > 0 {
                queue.add_spare(super::Segment::touched());
                made += 1;
            }
            assert_eq!(drain_all(&mut queue).len(), 10);
        }
        assert_eq!(made, super::SPARE_SEGMENTS);
    }

    #[test]
    fn a_segment_hands_back_its_records_in_order() {
        let mut segment = super::Segment::touched();
        assert_eq!(segment.records().count(), 0);
        segment.push(b"one", &[]);
        segment.push(b"tw", b"o");
        segment.push(b"", &[]);
        let got: Vec<&[u8]> = segment.records().collect();
        assert_eq!(got, vec![&b"one"[..], b"two", b""]);
        assert!(segment.data.capacity() >= super::SEGMENT_BYTES);
    }

    #[test]
    fn a_full_queue_without_a_spill_takes_nothing_until_drained() {
        let mut queue = RecordQueue::new(10, None);
        assert!(queue.push(b"12345678", &[]));
        assert!(queue.push(b"123", &[]));
        assert!(!queue.push(b"x", &[]));
        assert_eq!(queue.bytes(), 11);
        assert_eq!(drain_all(&mut queue).len(), 2);
        assert_eq!((queue.bytes(), queue.peak_bytes()), (0, 11));
        assert!(queue.push(b"x", &[]));
    }

    #[test]
    fn a_record_larger_than_a_segment_is_kept_whole() {
        let mut queue = RecordQueue::new(usize::MAX, None);
        let big = vec![7u8; super::SEGMENT_BYTES + 10];
        queue.push(b"small", &[]);
        queue.push(&big, &[]);
        assert_eq!(drain_all(&mut queue), vec![b"small".to_vec(), big]);
    }

    fn spill_to(max_bytes: u64) -> Option<super::SpillConfig> {
        Some(super::SpillConfig {
            dir: std::env::temp_dir(),
            max_bytes,
        })
    }

    #[test]
    fn beyond_memory_records_spill_and_come_back_in_order() {
        let mut queue = RecordQueue::new(1000, spill_to(u64::MAX));
        let records: Vec<Vec<u8>> = (0..50_000u32)
            .map(|i| i.to_le_bytes().repeat(1 + i as usize % 50))
            .collect();
        let mut got = Vec::new();
        for (i, r) in records.iter().enumerate() {
            assert!(queue.push(r, &[]));
            // The consumer takes a record now and then: memory frees up while the spill still
            // holds newer records, which must stay behind them.
            if i % 7 == 0 {
                queue.pop_with(|b| got.push(b.to_vec()));
            }
        }
        assert!(queue.bytes() <= 1000 + 200);
        assert!(queue.spill_peak_bytes() > 1 << 20);
        got.extend(drain_all(&mut queue));
        assert_eq!(got, records);
        assert!(queue.spill_failure().is_none());
        assert_eq!(queue.spill_lost(), 0);
    }

    #[test]
    fn discarding_empties_memory_and_spill_and_counts_every_record() {
        let mut queue = RecordQueue::new(1000, spill_to(u64::MAX));
        for i in 0..5_000u32 {
            assert!(queue.push(&i.to_le_bytes().repeat(8), &[]));
        }
        assert!(queue.waiting_bytes() > 1000, "some spilled");
        assert_eq!(queue.discard_all(), 5_000);
        assert_eq!(queue.waiting_bytes(), 0);
        assert!(!queue.pop_with(|_| {}));
        assert_eq!(queue.discard_all(), 0);
    }

    #[test]
    fn a_full_spill_takes_nothing_until_drained() {
        let mut queue = RecordQueue::new(8, spill_to(30));
        assert!(queue.push(b"12345678", &[]));
        // Spilled: 4 + 10 framed bytes each.
        assert!(queue.push(b"0123456789", &[]));
        assert!(queue.push(b"abcdefghij", &[]));
        assert!(queue.push(b"ABCDEFGHIJ", &[]));
        assert!(!queue.push(b"lost", &[]));
        assert_eq!(drain_all(&mut queue).len(), 4);
        assert!(queue.push(b"again", &[]));
    }

    #[test]
    fn a_spill_that_cannot_be_made_leaves_records_in_the_ring() {
        let mut queue = RecordQueue::new(
            4,
            Some(super::SpillConfig {
                dir: "/proc/self".into(),
                max_bytes: u64::MAX,
            }),
        );
        assert!(queue.push(b"1234", &[]));
        assert!(!queue.push(b"5", &[]));
        assert!(queue.spill_failure().is_some());
        assert_eq!(drain_all(&mut queue), vec![b"1234".to_vec()]);
        assert!(queue.push(b"5", &[]));
    }

    #[test]
    fn the_spill_opened_at_start_up_says_why_it_cannot_be_made() {
        let unusable = super::SpillConfig {
            dir: "/proc/self".into(),
            max_bytes: u64::MAX,
        };
        let mut queue = RecordQueue::new(4, Some(unusable));
        assert!(queue.open_spill().is_err());
        // Not kept as the spill's failure: the first record that needs the spill tries again.
        assert!(queue.spill_failure().is_none());
        assert!(RecordQueue::new(4, None).open_spill().is_ok());

        let mut queue = RecordQueue::new(4, spill_to(1 << 20));
        queue
            .open_spill()
            .expect("an unnamed file in the temporary directory");
        assert!(queue.push(b"1234", &[]));
        assert!(
            queue.push(b"5", &[]),
            "beyond memory, into the file made at start-up"
        );
        assert_eq!(drain_all(&mut queue), vec![b"1234".to_vec(), b"5".to_vec()]);
    }
}
