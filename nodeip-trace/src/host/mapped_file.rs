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
//!
//! A mapped file that another process cuts shorter (a capture rotated or rewritten while
//! `analyze` reads it, an executable overwritten by `cp` while the tracer reads it) would kill
//! the process with SIGBUS on the first read past its new end. [`cut_guard`] takes that signal
//! instead: the page becomes a page of zeros, and [`MappedFile::cut_at`] says where the file
//! was found cut, for the reader to stop there and say so.
use std::fs::File;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::path::Path;

/// A whole file mapped read-only and shared (see the module's note); unmapped on drop.
pub struct MappedFile {
    /// Start of the mapping (dangling, never read, when `len` is 0).
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    /// Its entry in [`cut_guard`]'s table (none: empty, or the table was full).
    guarded: Option<usize>,
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
                guarded: None,
            });
        }
        // SAFETY: a fresh shared read-only mapping of `len` bytes of an open file; the kernel
        // chooses the address. A running executable cannot be written (ETXTBSY); a file that is
        // truncated under us makes reads past its new end fault, which `cut_guard` takes: they
        // read zeros, and `cut_at` says where.
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
        let guarded = cut_guard::watch(ptr.as_ptr() as usize, len);
        Ok(Self { ptr, len, guarded })
    }

    /// Where the file was found cut shorter while mapped: the offset of the first page read
    /// past its new end (read as zeros from there), or `None` while nothing was.
    pub fn cut_at(&self) -> Option<usize> {
        self.guarded.and_then(cut_guard::cut_at)
    }
}

impl MappedFile {
    /// Lets the pages wholly before byte `end` go from this process (`MADV_DONTNEED`): the
    /// mapping is of a file and shared, so reading them again fetches the same bytes from the
    /// page cache; the process's RSS stops counting what a front-to-back reader has passed.
    pub fn release_before(&self, end: usize) {
        let page = page_size();
        let len = end.min(self.len) / page * page;
        if len > 0 {
            // SAFETY: the first `len` bytes of the mapping, page-aligned (mmap's start is); on a
            // shared file mapping MADV_DONTNEED drops this process's page table entries only,
            // and later reads see the file's bytes again — no borrow of the bytes changes.
            unsafe { libc::madvise(self.ptr.as_ptr().cast(), len, libc::MADV_DONTNEED) };
        }
    }
}

/// The size of a memory page (4096 where the system does not say). Called from the SIGBUS
/// handler too: `sysconf(_SC_PAGESIZE)` only reads the auxiliary vector, async-signal-safe in
/// practice.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&page| page > 0)
        .unwrap_or(4096)
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
        if let Some(entry) = self.guarded {
            cut_guard::forget(entry);
        }
        if self.len > 0 {
            // SAFETY: unmaps exactly the mapping `map` made; no borrow of it outlives `self`.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.len);
            }
        }
    }
}

/// The SIGBUS handler that keeps a cut mapped file from killing the process.
///
/// Each [`MappedFile`] is entered in a fixed table (start, length, first page found cut) that
/// the handler reads with atomics only. A SIGBUS at an address inside a watched mapping is a
/// read past the file's new end: the handler maps a page of zeros over that page
/// (`MAP_FIXED`, anonymous, read-only), notes its offset, and returns, so the read goes on
/// and sees zeros. Any other SIGBUS is not ours: the handler puts back the action it replaced
/// (Rust's own, or the default) and returns, so the faulting read runs again under it.
mod cut_guard {
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Mappings watched at once; more are mapped unwatched (a cut one then kills as before).
    const ENTRIES: usize = 64;
    /// No page found cut.
    const NOT_CUT: usize = usize::MAX;

    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "only copied into the static arrays' initialisers, never used as a value"
    )]
    const EMPTY: AtomicUsize = AtomicUsize::new(0);
    /// Start address of each watched mapping (0: a free entry).
    static STARTS: [AtomicUsize; ENTRIES] = [EMPTY; ENTRIES];
    /// Length of each (0 while an entry is being filled or emptied: the handler skips it).
    static LENS: [AtomicUsize; ENTRIES] = [EMPTY; ENTRIES];
    #[allow(
        clippy::declare_interior_mutable_const,
        reason = "only copied into CUT_AT's initialiser, never used as a value"
    )]
    const UNCUT: AtomicUsize = AtomicUsize::new(NOT_CUT);
    /// Offset of the first page found cut in each.
    static CUT_AT: [AtomicUsize; ENTRIES] = [UNCUT; ENTRIES];

    /// The SIGBUS action the handler replaced, put back for a fault that is not ours.
    static REPLACED: std::sync::OnceLock<libc::sigaction> = std::sync::OnceLock::new();

    /// Watches the mapping at `start` of `len` bytes (installing the handler the first time):
    /// its entry, or `None` when the table is full or the handler cannot be installed.
    pub(super) fn watch(start: usize, len: usize) -> Option<usize> {
        install()?;
        let entry = (0..ENTRIES).find(|&i| {
            STARTS[i]
                .compare_exchange(0, start, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        CUT_AT[entry].store(NOT_CUT, Ordering::Release);
        LENS[entry].store(len, Ordering::Release);
        Some(entry)
    }

    /// Stops watching `entry` (before its mapping is unmapped).
    pub(super) fn forget(entry: usize) {
        LENS[entry].store(0, Ordering::Release);
        STARTS[entry].store(0, Ordering::Release);
    }

    /// The offset of the first page of `entry` found cut.
    pub(super) fn cut_at(entry: usize) -> Option<usize> {
        Some(CUT_AT[entry].load(Ordering::Acquire)).filter(|&at| at != NOT_CUT)
    }

    /// Installs the handler once; `None` if it could not be.
    fn install() -> Option<()> {
        static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let installed = *INSTALLED.get_or_init(|| {
            // SAFETY: sigaction with a zeroed (then filled) struct; the handler only uses
            // atomics and async-signal-safe calls (mmap, sigaction).
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_sigbus as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut action.sa_mask);
                let mut replaced: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut replaced) != 0 {
                    return false;
                }
                // Set before the handler can run: it reads it.
                let _ = REPLACED.set(replaced);
                libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0
            }
        });
        installed.then_some(())
    }

    /// The SIGBUS handler (see the module).
    extern "C" fn on_sigbus(_signal: i32, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
        let address = unsafe { (*info).si_addr() } as usize;
        let page = super::page_size();
        for entry in 0..ENTRIES {
            let (start, len) = (
                STARTS[entry].load(Ordering::Acquire),
                LENS[entry].load(Ordering::Acquire),
            );
            if len == 0 || address < start || address - start >= len {
                continue;
            }
            let at = address & !(page - 1);
            // SAFETY: replaces one page inside a mapping this process owns and is reading.
            let zeros = unsafe {
                libc::mmap(
                    at as *mut libc::c_void,
                    page,
                    libc::PROT_READ,
                    libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if zeros != libc::MAP_FAILED {
                CUT_AT[entry].fetch_min(at.saturating_sub(start), Ordering::AcqRel);
                return;
            }
            break;
        }
        // Not ours (or the page could not be replaced): the replaced action takes it.
        if let Some(replaced) = REPLACED.get() {
            // SAFETY: sigaction is async-signal-safe; `replaced` is what the kernel gave.
            unsafe { libc::sigaction(libc::SIGBUS, replaced, std::ptr::null_mut()) };
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
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            crate::message::skipped("registering a uprobe needs root");
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
    fn a_file_cut_shorter_while_mapped_reads_as_zeros_past_its_new_end() {
        let page = page_size();
        let path = std::env::temp_dir().join(format!("nit-cut-map-{}", std::process::id()));
        std::fs::write(&path, vec![0xABu8; 3 * page]).unwrap();
        let mapped = MappedFile::open(&path).unwrap();
        assert_eq!(mapped.cut_at(), None);
        assert_eq!(mapped[2 * page + 5], 0xAB);
        // Cut to one page and a half: the pages wholly past the new end fault when read.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len((page + page / 2) as u64).unwrap();
        assert_eq!(
            mapped[page / 2],
            0xAB,
            "the bytes before the cut are the file's"
        );
        assert_eq!(
            mapped[2 * page + 5],
            0,
            "a page past the new end reads as zeros"
        );
        assert_eq!(mapped.cut_at(), Some(2 * page));
        assert!(mapped[2 * page..].iter().all(|&b| b == 0));
        std::fs::remove_file(&path).unwrap();
        // Another mapping, mapped after, is not marked cut.
        let other = MappedFile::open(Path::new("/proc/self/exe")).unwrap();
        assert_eq!(other.cut_at(), None);
    }

    /// A SIGBUS from a mapping the guard does not watch still ends the process as SIGBUS does
    /// (in a child, forked with everything set up: it only reads the byte).
    #[test]
    fn a_fault_in_a_mapping_not_watched_still_kills() {
        let page = page_size();
        let path = std::env::temp_dir().join(format!("nit-unwatched-{}", std::process::id()));
        std::fs::write(&path, vec![1u8; 2 * page]).unwrap();
        let _installed = MappedFile::open(&path).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        // SAFETY: a shared read-only mapping of two pages of an open file, read in the child.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(raw, libc::MAP_FAILED);
        file.set_len(0).unwrap();
        // SAFETY: the child only reads the mapped byte and exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: a read of the mapping (it faults: the file is empty now).
            let byte = unsafe { std::ptr::read_volatile(raw.cast::<u8>().add(page)) };
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(i32::from(byte) + 10) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        unsafe { libc::waitpid(child, &mut status, 0) };
        // SAFETY: unmapping the pages mapped above.
        unsafe { libc::munmap(raw, 2 * page) };
        std::fs::remove_file(&path).unwrap();
        assert!(
            libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGBUS,
            "the child ended by SIGBUS (status {status:#x})"
        );
    }

    #[test]
    fn a_missing_file_is_an_error() {
        assert!(MappedFile::open(Path::new("/nonexistent/nodeip-trace")).is_err());
    }
}
