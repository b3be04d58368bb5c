//! Where the record queue overflows to when a burst outruns the consumer: an unnamed file
//! (`O_TMPFILE`, gone with the process), written and read back in order, so that a burst
//! waits on disk (in the page cache, mostly) instead of in the tracer's memory or being lost
//! in a full ring.
//!
//! Records are framed as a little-endian `u32` length and the bytes. Appends gather in a
//! buffer written at 1 MiB; reading back takes a chunk of whole frames from the file's unread
//! part (the buffer is written out first when the file has none left). A file read to its end
//! is truncated, so a node's bursts reuse the same few megabytes.
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Bytes of framed records gathered before they are written to the file.
const WRITE_CHUNK: usize = 1 << 20;

/// Room beyond [`WRITE_CHUNK`] in the append buffer: the frame that crosses it (a record is at
/// most a chunk of 16 KiB and its header).
const UNWRITTEN_SLACK: usize = 64 << 10;

/// Bytes of a frame's length prefix.
const FRAME_HEADER: usize = 4;

/// Raw records beyond the in-memory queue, in an unnamed file.
pub struct SpillFile {
    file: File,
    /// Framed records not yet written to the file.
    unwritten: Vec<u8>,
    /// Buffer the file's frames are read back into.
    read_buf: Vec<u8>,
    /// Bytes written to the file.
    written: u64,
    /// Bytes of the file handed back.
    read: u64,
    /// Framed bytes held (the file's unread part and `unwritten`).
    held: u64,
    /// The most framed bytes held at once.
    peak: u64,
}

impl SpillFile {
    /// An empty spill in directory `dir`: an `O_TMPFILE` file, or where the file system does
    /// not support that, a file created and removed at once.
    pub fn create(dir: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE)
            .open(dir)
            .or_else(|_| {
                let path = dir.join(format!(".nodeip-trace-spill-{}", std::process::id()));
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)?;
                std::fs::remove_file(&path)?;
                Ok::<_, io::Error>(file)
            })?;
        Ok(Self {
            file,
            // Touched now: appends come from the drain thread in a burst, which should not
            // fault its pages in then (nor grow it record by record).
            unwritten: super::touched_buffer(WRITE_CHUNK + UNWRITTEN_SLACK),
            read_buf: Vec::new(),
            written: 0,
            read: 0,
            held: 0,
            peak: 0,
        })
    }

    /// Framed bytes held now.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Whether no record waits here.
    pub fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// The most framed bytes held at once so far.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Appends a record given in two parts (`head`, then `tail`, as the ring hands it over).
    pub fn append(&mut self, head: &[u8], tail: &[u8]) -> io::Result<()> {
        let len = head.len() + tail.len();
        let frame_len = u32::try_from(len).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "a record of 4 GiB or more")
        })?;
        self.unwritten.extend_from_slice(&frame_len.to_le_bytes());
        self.unwritten.extend_from_slice(head);
        self.unwritten.extend_from_slice(tail);
        self.held += (FRAME_HEADER + len) as u64;
        self.peak = self.peak.max(self.held);
        if self.unwritten.len() >= WRITE_CHUNK {
            self.write_out()?;
        }
        Ok(())
    }

    /// Writes the gathered frames at the file's end.
    fn write_out(&mut self) -> io::Result<()> {
        self.file.write_all_at(&self.unwritten, self.written)?;
        self.written += self.unwritten.len() as u64;
        self.unwritten.clear();
        Ok(())
    }

    /// Hands the oldest records to `take`, in order, about `max_bytes` of them (at least one
    /// when any is held). An error leaves the records not handed back where they were.
    pub fn read_back(&mut self, max_bytes: usize, mut take: impl FnMut(&[u8])) -> io::Result<()> {
        if self.read == self.written {
            if self.unwritten.is_empty() {
                return Ok(());
            }
            self.write_out()?;
        }
        let left = self.written - self.read;
        let mut want = (max_bytes.max(FRAME_HEADER) as u64).min(left) as usize;
        let mut header = [0u8; FRAME_HEADER];
        self.file.read_exact_at(&mut header, self.read)?;
        // A first frame larger than the chunk is read whole.
        want = want.max(FRAME_HEADER + u32::from_le_bytes(header) as usize);
        self.read_buf.resize(want, 0);
        self.file.read_exact_at(&mut self.read_buf, self.read)?;
        let mut at = 0;
        while at + FRAME_HEADER <= want {
            let len = u32::from_le_bytes(
                self.read_buf[at..at + FRAME_HEADER]
                    .try_into()
                    .expect("4 bytes"),
            ) as usize;
            let end = at + FRAME_HEADER + len;
            if end > want {
                break;
            }
            take(&self.read_buf[at + FRAME_HEADER..end]);
            at = end;
        }
        self.read += at as u64;
        self.held -= at as u64;
        if self.read == self.written && self.unwritten.is_empty() {
            // Read to its end: start over at the beginning of the file.
            self.file.set_len(0)?;
            self.read = 0;
            self.written = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(spill: &mut SpillFile, chunk: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        while !spill.is_empty() {
            spill
                .read_back(chunk, |r| got.push(r.to_vec()))
                .expect("reading back");
        }
        got
    }

    #[test]
    fn records_come_back_in_order_through_the_file_and_the_buffer() {
        let mut spill = SpillFile::create(&std::env::temp_dir()).expect("a spill file");
        let records: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| vec![(i % 251) as u8; 1 + (i as usize * 37) % 400])
            .collect();
        for (i, r) in records.iter().enumerate() {
            // Some records in two parts, as when they wrap in the ring.
            let (head, tail) = r.split_at(if i % 3 == 0 { r.len() / 2 } else { r.len() });
            spill.append(head, tail).expect("appending");
        }
        let framed: u64 = records.iter().map(|r| r.len() as u64 + 4).sum();
        assert_eq!((spill.held(), spill.peak()), (framed, framed));
        // More than a write chunk went to the file; the rest still waits in the buffer.
        assert!(spill.written >= WRITE_CHUNK as u64 && !spill.unwritten.is_empty());
        assert_eq!(read_all(&mut spill, 100_000), records);
        assert_eq!((spill.held(), spill.written, spill.read), (0, 0, 0));
        assert_eq!(spill.file.metadata().expect("metadata").len(), 0);
    }

    #[test]
    fn a_record_larger_than_the_chunk_comes_back_whole() {
        let mut spill = SpillFile::create(&std::env::temp_dir()).expect("a spill file");
        let big = vec![9u8; 3 * WRITE_CHUNK];
        spill.append(b"small", &[]).unwrap();
        spill.append(&big, &[]).unwrap();
        spill.append(b"after", &[]).unwrap();
        assert_eq!(
            read_all(&mut spill, 16),
            vec![b"small".to_vec(), big, b"after".to_vec()]
        );
    }

    #[test]
    fn appends_between_reads_keep_their_order() {
        let mut spill = SpillFile::create(&std::env::temp_dir()).expect("a spill file");
        let mut got = Vec::new();
        for round in 0..50u8 {
            for i in 0..100u8 {
                spill.append(&[round, i], &[]).unwrap();
            }
            spill.read_back(150, |r| got.push(r.to_vec())).unwrap();
        }
        got.extend(read_all(&mut spill, 150));
        let want: Vec<Vec<u8>> = (0..50u8)
            .flat_map(|round| (0..100u8).map(move |i| vec![round, i]))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_directory_that_cannot_hold_files_is_an_error() {
        assert!(SpillFile::create(Path::new("/proc/self")).is_err());
    }
}
