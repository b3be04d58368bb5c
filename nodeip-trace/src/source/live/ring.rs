//! The eBPF ring buffer read through one mapping of its data.
//!
//! aya's `RingBuf` maps the ring's data pages twice in a row, so that a record wrapping past the
//! end reads as one slice; RSS then counts every page of the ring twice (the 8 MiB ring was
//! 16 MiB of the tracer's RSS from the start, since the kernel maps all its pages at once). This
//! reader maps the data once and hands a record that wraps over in two parts, which the queue
//! copies anyway.
//!
//! Layout (the kernel's `kernel/bpf/ringbuf.c`, as libbpf and aya read it): page 0 holds
//! `consumer_pos`, the one page userspace may write; page 1 `producer_pos`; then the data, a
//! power-of-two number of bytes. A record is an 8-byte header (`len` with the BUSY and DISCARD
//! bits, then the kernel's page offset) and `len` bytes, the whole rounded up to 8 bytes; the
//! positions only grow, and a position's place in the data is the position modulo its size.
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use aya::maps::MapData;

/// The record is still being written (the producer has not committed it).
const BUSY_BIT: u32 = 1 << 31;
/// The producer discarded the record: skip it.
const DISCARD_BIT: u32 = 1 << 30;
/// Bytes of a record's header.
const HEADER_LEN: usize = 8;

/// The size of a memory page: what a map's mappings are counted in.
pub(super) fn page_size() -> io::Result<usize> {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .map_err(|_| io::Error::other("sysconf(_SC_PAGESIZE) failed"))
}

/// A memory mapping of the ring's map fd, unmapped on drop.
pub(super) struct RingMapping {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl RingMapping {
    /// Maps `len` bytes of the map `fd` at byte `offset` (a page multiple), read-only or
    /// read-write.
    pub(super) fn new(fd: RawFd, len: usize, offset: usize, writable: bool) -> io::Result<Self> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "ring offset too large"))?;
        // SAFETY: a fresh shared mapping of an open BPF map fd; the kernel checks that `len` and
        // `offset` lie in the ring (and that only the consumer page is writable).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Self { ptr, len })
    }

    /// The mapping's first byte.
    pub(super) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for RingMapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; nothing borrows the mapping past
        // its owner's life.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// Reads the records of a BPF ring buffer map (see the module's note).
pub struct RingReader {
    /// The map (its fd is what the mappings and the readiness polling use).
    map: MapData,
    /// Page 0: `consumer_pos`.
    consumer: RingMapping,
    /// Page 1 (`producer_pos`) and the data after it.
    producer: RingMapping,
    /// Page size (where the data starts in `producer`).
    page: usize,
    /// Data bytes (a power of two).
    size: usize,
}

// SAFETY: the mappings are owned by this value and only read (the consumer position written)
// through `&mut self`.
unsafe impl Send for RingReader {}

impl RingReader {
    /// Maps the ring buffer `map` (a `BPF_MAP_TYPE_RINGBUF`).
    pub fn new(map: MapData) -> io::Result<Self> {
        let size = map.info().map_err(io::Error::other)?.max_entries() as usize;
        if !size.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("ring buffer of {size} bytes: not a power of two"),
            ));
        }
        let page = page_size()?;
        let fd = map.fd().as_fd().as_raw_fd();
        let consumer = RingMapping::new(fd, page, 0, true)?;
        let producer = RingMapping::new(fd, page + size, page, false)?;
        Ok(Self {
            map,
            consumer,
            producer,
            page,
            size,
        })
    }

    /// Hands each committed record to `take`, in order, until the ring is empty, a record is
    /// still being written, or `take` returns false (it did not take the record it was given,
    /// which stays in the ring); then frees the space of the records taken. A record comes in
    /// two parts when it wraps past the end of the ring (the second is empty otherwise).
    pub fn read(&mut self, mut take: impl FnMut(&[u8], &[u8]) -> bool) {
        let (consumer_pos, producer_pos) = self.positions();
        // SAFETY: the data follows page 1 for `size` bytes, mapped as long as `self` lives.
        let data = unsafe { self.producer.ptr.as_ptr().add(self.page) };
        let start = consumer_pos.load(Ordering::Relaxed);
        // The producer position is read with Acquire (the kernel stores it with Release after
        // the record's header).
        let end = producer_pos.load(Ordering::Acquire);
        // SAFETY: `data` is the ring's `size` bytes (a power of two, page-aligned).
        let pos = unsafe { read_records(data, self.size, start, end, &mut take) };
        // Release: the kernel may reuse the space once it sees the new position.
        consumer_pos.store(pos, Ordering::Release);
    }

    /// Bytes written into the ring and not yet read (records being written included).
    pub fn held(&self) -> u64 {
        let (consumer_pos, producer_pos) = self.positions();
        producer_pos
            .load(Ordering::Acquire)
            .wrapping_sub(consumer_pos.load(Ordering::Relaxed))
    }

    /// The ring's data bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether the ring holds records (committed or still being written) not yet read.
    pub fn holds_records(&self) -> bool {
        let (consumer_pos, producer_pos) = self.positions();
        producer_pos.load(Ordering::Acquire) != consumer_pos.load(Ordering::Relaxed)
    }

    /// The kernel's `consumer_pos` (which only this reader writes) and `producer_pos`.
    fn positions(&self) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: page 0 of the ring is the kernel's 8-byte-aligned `consumer_pos`, mapped
        // writable for as long as `self` lives; only this reader writes it. Page 1 starts with
        // the kernel's 8-byte-aligned `producer_pos`.
        unsafe {
            (
                &*self.consumer.ptr.as_ptr().cast::<AtomicU64>(),
                &*self.producer.ptr.as_ptr().cast::<AtomicU64>(),
            )
        }
    }
}

/// Hands the committed records between positions `pos` and `end` of the ring's data to `take`
/// (see [`RingReader::read`]); returns the position after the last record taken or skipped.
///
/// # Safety
/// `data` points at `size` readable bytes, 8-byte aligned, `size` a power of two of at least 8.
unsafe fn read_records(
    data: *const u8,
    size: usize,
    mut pos: u64,
    end: u64,
    take: &mut impl FnMut(&[u8], &[u8]) -> bool,
) -> u64 {
    let mask = size as u64 - 1;
    while pos < end {
        let at = (pos & mask) as usize;
        // SAFETY: `at` is 8-aligned (positions advance by multiples of 8) and below `size`, so
        // the 4-byte header lies in the data. Acquire: the kernel commits a record with xchg.
        let header = unsafe { &*data.add(at).cast::<AtomicU32>() }.load(Ordering::Acquire);
        if header & BUSY_BIT != 0 {
            break;
        }
        let len = (header & !(BUSY_BIT | DISCARD_BIT)) as usize;
        if len > size - HEADER_LEN {
            // Not a record the kernel could have written: stop rather than read past it.
            break;
        }
        if header & DISCARD_BIT == 0 {
            let start = (at + HEADER_LEN) & (size - 1);
            let first = len.min(size - start);
            // SAFETY: `start + first <= size`, and `len - first < size` bytes from the start of
            // the data; the producer does not write a committed record until it is freed.
            let (head, tail) = unsafe {
                (
                    std::slice::from_raw_parts(data.add(start), first),
                    std::slice::from_raw_parts(data, len - first),
                )
            };
            if !take(head, tail) {
                break;
            }
        }
        pos += ((len + HEADER_LEN + 7) & !7) as u64;
    }
    pos
}

impl AsRawFd for RingReader {
    fn as_raw_fd(&self) -> RawFd {
        self.map.fd().as_fd().as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-byte ring as the kernel lays it out, and a position where the next record goes.
    struct FakeRing {
        words: Vec<u64>,
        end: u64,
    }

    impl FakeRing {
        fn new(start: u64) -> Self {
            Self {
                words: vec![0; 8],
                end: start,
            }
        }

        fn bytes(&mut self) -> &mut [u8] {
            // SAFETY: 64 initialised bytes owned by `words`.
            unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), 64) }
        }

        /// Writes a record of `payload` with header bits `flags` at the end.
        fn put(&mut self, payload: &[u8], flags: u32) {
            let at = (self.end % 64) as usize;
            let header = (payload.len() as u32 | flags).to_ne_bytes();
            self.bytes()[at..at + 4].copy_from_slice(&header);
            for (i, b) in payload.iter().enumerate() {
                let p = (at + HEADER_LEN + i) % 64;
                self.bytes()[p] = *b;
            }
            self.end += ((payload.len() + HEADER_LEN + 7) & !7) as u64;
        }

        fn read(&mut self, from: u64, mut take: impl FnMut(&[u8], &[u8]) -> bool) -> u64 {
            let end = self.end;
            // SAFETY: 64 bytes, 8-aligned (a Vec<u64>), a power of two.
            unsafe { read_records(self.bytes().as_ptr(), 64, from, end, &mut take) }
        }
    }

    fn joined(head: &[u8], tail: &[u8]) -> Vec<u8> {
        [head, tail].concat()
    }

    #[test]
    fn reads_records_in_order_and_a_wrapping_one_in_two_parts() {
        // Records on both sides of the data's end, none split: positions 40..64, then 64..88
        // (the data's start).
        let mut ring = FakeRing::new(40);
        ring.put(b"0123456789abc", 0);
        ring.put(b"wrapped!xyz", 0);
        let mut whole = Vec::new();
        let pos = ring.read(40, |h, t| {
            assert!(t.is_empty());
            whole.push(joined(h, t));
            true
        });
        assert_eq!(pos, 88);
        assert_eq!(whole, [b"0123456789abc".to_vec(), b"wrapped!xyz".to_vec()]);

        // A discarded record (32..48), then one whose bytes run past the end: header at 48,
        // 8 bytes at 56..64, the other 12 at the data's start.
        let mut ring = FakeRing::new(32);
        ring.put(&[0; 8], DISCARD_BIT);
        ring.put(b"0123456789abcdefghij", 0);
        let mut parts = Vec::new();
        let pos = ring.read(32, |h, t| {
            parts.push((h.to_vec(), t.to_vec()));
            true
        });
        assert_eq!(pos, 80, "the discarded record is skipped, not handed over");
        assert_eq!(parts, [(b"01234567".to_vec(), b"89abcdefghij".to_vec())]);
    }

    #[test]
    fn stops_at_a_record_being_written_and_at_a_refused_one() {
        let mut ring = FakeRing::new(0);
        ring.put(b"one", 0);
        ring.put(b"two", BUSY_BIT);
        ring.put(b"three", 0);
        let mut got = Vec::new();
        let pos = ring.read(0, |h, _| {
            got.push(h.to_vec());
            true
        });
        assert_eq!((pos, got), (16, vec![b"one".to_vec()]));
        // Refused: the position stays before it, so it is read again next time.
        let mut ring = FakeRing::new(0);
        ring.put(b"one", 0);
        ring.put(b"two", 0);
        let mut calls = 0;
        let pos = ring.read(0, |_, _| {
            calls += 1;
            calls == 1
        });
        assert_eq!((pos, calls), (16, 2));
    }

    #[test]
    fn a_length_no_record_can_have_stops_the_read() {
        let mut ring = FakeRing::new(0);
        ring.bytes()[..4].copy_from_slice(&1000u32.to_ne_bytes());
        ring.end = 1008;
        assert_eq!(ring.read(0, |_, _| panic!("nothing to take")), 0);
    }
}
