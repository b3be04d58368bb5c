//! Executables read through a read-only memory mapping instead of a copy: finding a resolver in
//! a running program touches its ELF headers, symbol tables and Go function table, not its code,
//! so mapping a 100 MiB kubelet costs the pages read (file-backed, reclaimable, gone at unmap)
//! where `std::fs::read` cost 100 MiB of heap for every new executable seen.
//!
//! The mapping is shared, not private: the kernel installs every registered uprobe's breakpoint
//! (`int3`) into each *private* mapping of the file that may execute — a read-only
//! `MAP_PRIVATE` one included — so a private mapping shows any other tracer's (or this one's)
//! probes as `0xCC` where the code has a `RET`. A shared read-only mapping is left alone by
//! uprobes (`valid_vma` refuses `VM_MAYSHARE`) and shows the page cache: the file's bytes.
//!
//! `analyze` maps capture files the same way: both of its passes read the mapping, without
//! `read` copying the file into the process twice.
use std::fs::File;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::path::Path;

/// A whole file mapped read-only and shared (see the module's note); unmapped on drop.
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
        // SAFETY: a fresh shared read-only mapping of `len` bytes of an open file; the kernel
        // chooses the address. A running executable cannot be written (ETXTBSY); a file that is
        // truncated under us makes reads past its new end fault, as with any mapped-file reader
        // (ripgrep, object readers) — the price of not copying whole executables.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
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

impl MappedFile {
    /// Lets the pages wholly before byte `end` go from this process (`MADV_DONTNEED`): the
    /// mapping is of a file and shared, so reading them again fetches the same bytes from the
    /// page cache; the process's RSS stops counting what a front-to-back reader has passed.
    pub fn release_before(&self, end: usize) {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = end.min(self.len) / page * page;
        if len > 0 {
            // SAFETY: the first `len` bytes of the mapping, page-aligned (mmap's start is); on a
            // shared file mapping MADV_DONTNEED drops this process's page table entries only,
            // and later reads see the file's bytes again — no borrow of the bytes changes.
            unsafe { libc::madvise(self.ptr.as_ptr().cast(), len, libc::MADV_DONTNEED) };
        }
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
    fn released_pages_read_as_the_file_again() {
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let mapped = MappedFile::open(Path::new("/proc/self/exe")).unwrap();
        assert_eq!(&mapped[..], &exe[..]);
        mapped.release_before(exe.len() / 2);
        mapped.release_before(usize::MAX);
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

    /// A uprobe registered on a file (a perf uprobe event, no BPF needed) puts its `int3` into
    /// private mappings of the file; the mapped file still reads as the file's bytes — the bug
    /// that made a tracer find "no RET" in a Go function another tracer had probed.
    #[test]
    fn another_tracer_s_uprobe_breakpoints_are_not_read_as_code() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: registering a uprobe needs root");
            return;
        }
        let pmu = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")
            .expect("this kernel has the uprobe PMU (CONFIG_UPROBE_EVENTS)");
        let path = std::env::temp_dir().join(format!("nit-uprobed-{}", std::process::id()));
        // A page of NOPs with a RET at the probed offset.
        const AT: usize = 100;
        let mut code = vec![0x90u8; 4096];
        code[AT] = 0xC3;
        std::fs::write(&path, &code).unwrap();
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // perf_event_attr (PERF_ATTR_SIZE_VER5): type, size, config1 = path, config2 = offset.
        let mut attr = [0u8; 112];
        attr[0..4].copy_from_slice(&pmu.trim().parse::<u32>().unwrap().to_ne_bytes());
        attr[4..8].copy_from_slice(&112u32.to_ne_bytes());
        attr[56..64].copy_from_slice(&(c_path.as_ptr() as u64).to_ne_bytes());
        attr[64..72].copy_from_slice(&(AT as u64).to_ne_bytes());
        // SAFETY: a valid perf_event_attr of the size it declares; every process, CPU 0.
        let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), -1, 0, -1, 0) };
        let error = std::io::Error::last_os_error();
        assert!(
            fd >= 0,
            "perf_event_open of a uprobe on {}: {error}",
            path.display()
        );
        let file = File::open(&path).unwrap();
        // The breakpoint is there for a private mapping to see (else this test proves nothing)…
        // SAFETY: a private read-only mapping of one page of an open file, unmapped below.
        let private = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(private, libc::MAP_FAILED);
        // SAFETY: AT is inside the page just mapped.
        let seen_privately = unsafe { *private.cast::<u8>().add(AT) };
        // SAFETY: unmapping the page mapped above.
        unsafe { libc::munmap(private, 4096) };
        // …and not for the mapped file.
        let mapped = MappedFile::map(&file).unwrap();
        let seen = mapped[AT];
        // SAFETY: closing the perf event opened above.
        unsafe { libc::close(fd as i32) };
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            seen_privately, 0xCC,
            "the uprobe's int3 in a private mapping"
        );
        assert_eq!(seen, 0xC3, "the mapped file shows the file's RET");
    }

    #[test]
    fn a_missing_file_is_an_error() {
        assert!(MappedFile::open(Path::new("/nonexistent/nodeip-trace")).is_err());
    }
}
