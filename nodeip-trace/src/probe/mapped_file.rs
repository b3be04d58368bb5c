//! Executables read through a read-only memory mapping instead of a copy: finding a resolver in
//! a running program touches its ELF headers, symbol tables and Go function table, not its code,
//! so mapping a 100 MiB kubelet costs the pages read (file-backed, reclaimable, gone at unmap)
//! where `std::fs::read` cost 100 MiB of heap for every new executable seen.
use std::fs::File;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::path::Path;

/// A whole file mapped read-only and private; unmapped on drop.
pub struct MappedFile {
    /// Start of the mapping (dangling, never read, when `len` is 0).
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is read-only and owned by this value; shared reads from several threads
// are reads of immutable memory.
unsafe impl Send for MappedFile {}
// SAFETY: see `Send`.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    /// Maps the file at `path`.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        Self::map(&File::open(path)?)
    }

    /// Maps the open `file` (its whole length now; the descriptor may be closed afterwards).
    pub fn map(file: &File) -> std::io::Result<Self> {
        let len = usize::try_from(file.metadata()?.len()).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "file larger than memory")
        })?;
        if len == 0 {
            return Ok(Self {
                ptr: std::ptr::NonNull::dangling(),
                len: 0,
            });
        }
        // SAFETY: a fresh private read-only mapping of `len` bytes of an open file; the kernel
        // chooses the address. A running executable cannot be written (ETXTBSY); a file that is
        // truncated under us makes reads past its new end fault, as with any mapped-file reader
        // (ripgrep, object readers) — the price of not copying whole executables.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| std::io::Error::other("mmap returned a null mapping"))?;
        Ok(Self { ptr, len })
    }
}

impl Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` readable bytes for as long as `self` lives (or is a
        // dangling, aligned pointer with `len` 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: unmaps exactly the mapping `map` made; no borrow of it outlives `self`.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_reads_as_its_bytes() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let mapped = MappedFile::open(Path::new("/proc/self/exe")).unwrap();
        assert_eq!(&mapped[..], &exe[..]);
    }

    #[test]
    fn an_empty_file_maps_to_no_bytes() {
        let path = std::env::temp_dir().join(format!("nit-empty-map-{}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        let mapped = MappedFile::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(mapped.is_empty());
    }

    #[test]
    fn a_missing_file_is_an_error() {
        assert!(MappedFile::open(Path::new("/nonexistent/nodeip-trace")).is_err());
    }
}
