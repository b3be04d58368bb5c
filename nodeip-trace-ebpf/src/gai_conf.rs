//! glibc's `/etc/gai.conf` as a getaddrinfo call reads it: the sort tables the call used,
//! captured before a short-lived process (getent, a process in its own mount namespace) is gone
//! and its file with it. glibc reads the file at its first call (and again when it changes),
//! line by line with `getline` on a `FILE`; a failed `fopen` means no file: the default tables.
//!
//! A uprobe at glibc's `fopen` marks the thread (only while a getaddrinfo call is in flight on
//! it, and only for that file: every other `fopen` costs one hash lookup after the uprobe's
//! trap). The first `getline` after it takes that stream: glibc's `gaiconf_init` reads the file
//! right after opening it, and nothing else in the sort reads a stream. The contents are then
//! taken from the `FILE`'s own buffer at each `getline` entry (a uprobe in glibc, where
//! getaddrinfo is probed): each buffer-full the stream read from the file, once, as it was read.
//! The end of the file is sent when the getaddrinfo call returns; a call that opened the file
//! and never read it had no file (`fopen` failed: glibc's default tables). Elsewhere `getline`
//! costs one array read (`GAI_CONF_READERS`) after the uprobe's own trap.
//!
//! Taking the reads at `sys_enter_read`/`sys_exit_read`, as before, made every `read` of the
//! node fill two tracepoint records: a one-byte read/write loop ran 2.0× slower under the tracer
//! (BENCHMARKS.md, 2026-11-29 04:14); at the raw `sys_exit` tracepoint every system call paid
//! instead (1.8×). Taking the open at `sys_enter_openat`/`sys_exit_openat` kept every system call
//! of the node on the kernel's traced slow path while attached (1.29× on that loop; a syscall
//! tracepoint marks every task): `fopen` costs only the programs that call it.
//!
//! Minimum kernel: 5.8 (ring buffers).
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user, bpf_probe_read_user_str_bytes},
    macros::{map, uprobe},
    maps::Array,
    programs::ProbeContext,
};
use nodeip_trace_common::{counter, GaiConfRecord, GAI_CONF_PATH, KIND_GAI_CONF};

use crate::{count, counted, read_user_upto, write_header, EVENTS, GAI_CONF_STATE, GAI_INFLIGHT};

/// Entries of `GAI_CONF_STATE` (slot 0; see [`crate::counted`]): threads with gai.conf open.
#[map]
static GAI_CONF_READERS: Array<u64> = Array::with_max_entries(1, 0);

/// glibc's x86-64 `struct _IO_FILE` (public and stable: `bits/types/struct_FILE.h`), the
/// members read here, as byte offsets.
mod file {
    /// `_IO_read_ptr`: the next byte `getline` takes.
    pub const READ_PTR: usize = 8;
    /// `_IO_read_end`: the end of what the last read put in the buffer.
    pub const READ_END: usize = 16;
    /// `_IO_read_base`: the start of the buffer.
    pub const READ_BASE: usize = 24;
    /// `_fileno`: the descriptor.
    pub const FILENO: usize = 112;
}

/// Where reading gai.conf stands on a thread.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GaiConfState {
    /// The file's descriptor; [`OPENED`] until the first `getline` after the `fopen`.
    fd: i64,
    /// `_IO_read_ptr` at the last `getline` entry (0: none yet): a buffer whose read pointer
    /// went back holds the file's next bytes.
    seen_ptr: u64,
}

/// Emits a record: `ret` and, when `buf` is set, `ret` bytes from it.
#[inline(always)]
fn emit(pid_tgid: u64, ret: i64, buf: u64) {
    let Some(mut entry) = EVENTS.reserve::<GaiConfRecord>(0) else {
        count(counter::OTHER_RINGBUF_FULL, 1);
        return;
    };
    let rec = entry.as_mut_ptr();
    unsafe {
        write_header(&mut (*rec).header, KIND_GAI_CONF, pid_tgid);
        (*rec).ret = ret as i32;
        (*rec).len = 0;
        if buf != 0 && ret > 0 {
            (*rec).len = read_user_upto(&mut (*rec).data, buf, ret as u64);
        }
    }
    entry.submit(crate::submit_flags());
}

/// [`GaiConfState::fd`] between the `fopen` of gai.conf and the first `getline` (which gives
/// the stream's descriptor).
const OPENED: i64 = -2;

/// `ENOENT`, reported for a gai.conf that was opened and never read: `fopen` failed.
const ENOENT: i64 = 2;

/// uprobe `fopen(const char *path, const char *mode)` in glibc (or where it jumps, with the
/// same first argument): is a getaddrinfo call opening `/etc/gai.conf`?
#[uprobe]
pub fn gai_conf_fopen(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if unsafe { GAI_INFLIGHT.get(pid_tgid) }.is_none() {
        return 0;
    }
    let filename: u64 = ctx.arg(0).unwrap_or(0);
    let mut name = [0u8; 16];
    if unsafe { bpf_probe_read_user_str_bytes(filename as *const u8, &mut name) }.is_err() {
        return 0;
    }
    if name[..GAI_CONF_PATH.len()] == GAI_CONF_PATH {
        let state = GaiConfState {
            fd: OPENED,
            seen_ptr: 0,
        };
        let _ = counted::insert(&GAI_CONF_STATE, &GAI_CONF_READERS, pid_tgid, &state);
    }
    0
}

/// Reads the `T` at `base + offset` in the traced process's memory.
#[inline(always)]
fn user_at<T>(base: u64, offset: usize) -> Option<T> {
    unsafe { bpf_probe_read_user((base as usize + offset) as *const T) }.ok()
}

/// uprobe `getline(char **line, size_t *n, FILE *stream)` in glibc: see [`on_read`].
#[uprobe]
pub fn gai_conf_getline(ctx: ProbeContext) -> u32 {
    on_read(ctx.arg(2).unwrap_or(0))
}

/// uprobe `__getdelim(char **line, size_t *n, int delim, FILE *stream)` in glibc, where
/// `getline` jumps: see [`on_read`]. Put there when `getline` is a stub (its first
/// instruction a `mov` the kernel would single-step; `__getdelim` starts with a `push`, which
/// it emulates).
#[uprobe]
pub fn gai_conf_getdelim(ctx: ProbeContext) -> u32 {
    on_read(ctx.arg(3).unwrap_or(0))
}

/// A read of `stream`: on the gai.conf stream of a thread reading it, the buffer the stream
/// filled from the file since the last entry, sent once, whole (`_IO_read_base` to
/// `_IO_read_end`). A line longer than the buffer (4 KiB) would make the stream fill it more
/// than once within one call, and those bytes are missed.
#[inline(always)]
fn on_read(stream: u64) -> u32 {
    if !counted::any(&GAI_CONF_READERS) {
        return 0;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(state) = GAI_CONF_STATE.get_ptr_mut(pid_tgid) else {
        return 0;
    };
    if stream == 0 {
        return 0;
    }
    let Some(fileno) = user_at::<i32>(stream, file::FILENO) else {
        return 0;
    };
    if unsafe { (*state).fd } == OPENED {
        // The first read after the open: glibc's gaiconf_init reading the file it opened.
        unsafe { (*state).fd = i64::from(fileno) };
    }
    if unsafe { (*state).fd } != i64::from(fileno) {
        return 0;
    }
    let (Some(ptr), Some(end), Some(base)) = (
        user_at::<u64>(stream, file::READ_PTR),
        user_at::<u64>(stream, file::READ_END),
        user_at::<u64>(stream, file::READ_BASE),
    ) else {
        return 0;
    };
    let seen = unsafe { (*state).seen_ptr };
    unsafe { (*state).seen_ptr = ptr };
    // Not filled yet (the first call), or the same buffer as at the last entry.
    if base == 0 || end <= base || (seen != 0 && ptr > seen) {
        return 0;
    }
    emit(pid_tgid, (end - base) as i64, base);
    0
}

/// The thread's getaddrinfo call returned: the end of gai.conf, when it read the file (glibc
/// reads it whole inside the call), and the thread no longer reads it.
#[inline(always)]
pub fn call_returned(pid_tgid: u64) {
    let Some(state) = GAI_CONF_STATE.get_ptr_mut(pid_tgid) else {
        return;
    };
    match unsafe { (*state).fd } {
        OPENED => emit(pid_tgid, -ENOENT, 0),
        _ => emit(pid_tgid, 0, 0),
    }
    forget(pid_tgid);
}

/// The thread no longer reads gai.conf (the file is missing, or its getaddrinfo call
/// returned).
#[inline(always)]
fn forget(pid_tgid: u64) {
    counted::remove(&GAI_CONF_STATE, &GAI_CONF_READERS, pid_tgid);
}
