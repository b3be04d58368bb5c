//! The live source: the eBPF ring buffer, polled with tokio, drained in batches.
use aya::maps::{MapData, RingBuf};
use tokio::io::unix::AsyncFd;

use crate::decode::record::{parse_record, KernelRecord, RecordError};

/// Reads kernel records from the ring buffer.
pub struct LiveSource {
    ring: AsyncFd<RingBuf<MapData>>,
}

impl LiveSource {
    /// Wraps the ring buffer for async polling.
    pub fn new(ring: RingBuf<MapData>) -> std::io::Result<Self> {
        // SAFETY: the RingBuf owns its map fd and keeps it open for as long as the AsyncFd
        // (which owns the RingBuf) lives.
        let ring = unsafe { AsyncFd::register(ring) }?;
        Ok(Self { ring })
    }

    /// Waits until records are available.
    pub async fn readable(&mut self) -> std::io::Result<()> {
        let mut guard = self.ring.readable_mut().await?;
        guard.clear_ready();
        Ok(())
    }

    /// Drains every available record (up to `max`) into `out`; undecodable ones go to `errors`.
    pub fn drain(
        &mut self,
        out: &mut Vec<KernelRecord>,
        errors: &mut Vec<RecordError>,
        max: usize,
    ) {
        let ring = self.ring.get_mut();
        let mut n = 0;
        while n < max {
            let Some(item) = ring.next() else { break };
            match parse_record(&item) {
                Ok(r) => out.push(r),
                Err(e) => errors.push(e),
            }
            n += 1;
        }
    }
}
