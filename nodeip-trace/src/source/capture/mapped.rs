//! A capture file read through a memory mapping ([`MappedFile`]): front to back, letting the
//! pages read past go, and failing where the file is cut shorter while mapped.
use super::PrefetchedBytes;
use crate::host::mapped_file::MappedFile;

/// Bytes read past between two releases of a [`MappedCaptureReader`]'s pages.
const RELEASE_EVERY: usize = 4 << 20;

/// A mapped capture read from the front ([`PrefetchedBytes`]) that lets the pages it has read
/// past go every [`RELEASE_EVERY`] bytes ([`MappedFile::release_before`]): without it a pass
/// left every page of the file in the process's RSS (peak 219 MiB for a 200 MB capture, 19 MiB
/// with it, as fast; the 64 KiB `read` path peaked at 14 MiB).
pub struct MappedCaptureReader<'a> {
    bytes: PrefetchedBytes<'a>,
    mapped: &'a MappedFile,
    /// Bytes read so far.
    read: usize,
    behind: ReleaseBehind,
}

impl<'a> MappedCaptureReader<'a> {
    /// A reader of `mapped` from its first byte.
    pub fn new(mapped: &'a MappedFile) -> Self {
        Self {
            bytes: PrefetchedBytes::new(&mapped[..]),
            mapped,
            read: 0,
            behind: ReleaseBehind::default(),
        }
    }
}

impl std::io::Read for MappedCaptureReader<'_> {
    /// Fails where the file was found cut shorter while mapped ([`MappedFile::cut_at`]): what
    /// lies past its new end reads as zeros, not as frames.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.bytes.read(buf)?;
        if let Some(at) = self.mapped.cut_at().filter(|&at| at < self.read + n) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the file was cut shorter while being read (to {at} bytes or fewer, of \
                     {}): is a process still writing or rotating it? Analyze a copy",
                    self.mapped.len()
                ),
            ));
        }
        self.read += n;
        self.behind.reached(self.mapped, self.read, n == 0);
        Ok(n)
    }
}

/// Lets the pages a front-to-back reader of a mapped file has passed go, every
/// [`RELEASE_EVERY`] bytes and at the end ([`MappedFile::release_before`]).
#[derive(Debug, Default)]
pub struct ReleaseBehind {
    /// The point before which pages were released.
    released: usize,
}

impl ReleaseBehind {
    /// The reader is at byte `read` of `mapped`; `done` when it has finished.
    pub fn reached(&mut self, mapped: &MappedFile, read: usize, done: bool) {
        if read - self.released >= RELEASE_EVERY || done {
            mapped.release_before(read);
            self.released = read;
        }
    }
}

/// The capture `file` mapped into memory, when it is a non-empty regular file that maps.
pub fn map_capture(file: &std::fs::File) -> Option<MappedFile> {
    let metadata = file.metadata().ok()?;
    if !metadata.is_file() || metadata.len() == 0 {
        return None;
    }
    MappedFile::map(file).ok()
}
