//! glibc's `/etc/gai.conf` as a getaddrinfo call reads it (`openat` + `read` syscall
//! tracepoints, acting only while a getaddrinfo call is in flight on the thread and only on that
//! file): the sort tables the call used, captured before a short-lived process (getent, a
//! process in its own mount namespace) is gone and its file with it. glibc reads the file at its
//! first call (and again when it changes); an `openat` error means no file: the default tables.
//! Every other `openat`/`read` costs one hash lookup.
//!
//! Minimum kernel: 4.7 (syscall tracepoints for BPF), 5.8 for ring buffers.
use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_user_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
};
use nodeip_trace_common::{counter, GaiConfRecord, GAI_CONF_PATH, KIND_GAI_CONF};

use crate::{count, read_user_upto, write_header, EVENTS, GAI_CONF_STATE, GAI_INFLIGHT};

/// Where reading gai.conf stands on a thread.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct GaiConfState {
    /// The file's descriptor; -1 while `openat` is in flight.
    fd: i64,
    /// The buffer of a `read` in flight on it, else 0.
    buf: u64,
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

/// `syscalls:sys_enter_openat`: is a getaddrinfo call opening `/etc/gai.conf`?
#[tracepoint]
pub fn gai_conf_open_enter(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if unsafe { GAI_INFLIGHT.get(pid_tgid) }.is_none() {
        return 0;
    }
    let filename: u64 = unsafe { ctx.read_at(24) }.unwrap_or(0);
    let mut name = [0u8; 16];
    if unsafe { bpf_probe_read_user_str_bytes(filename as *const u8, &mut name) }.is_err() {
        return 0;
    }
    if name[..GAI_CONF_PATH.len()] == GAI_CONF_PATH {
        let state = GaiConfState { fd: -1, buf: 0 };
        let _ = GAI_CONF_STATE.insert(pid_tgid, state, 0);
    }
    0
}

/// `syscalls:sys_exit_openat`: remember the descriptor, or report that there is no file.
#[tracepoint]
pub fn gai_conf_open_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(state) = GAI_CONF_STATE.get_ptr_mut(pid_tgid) else {
        return 0;
    };
    if unsafe { (*state).fd } != -1 {
        return 0;
    }
    let ret: i64 = unsafe { ctx.read_at(16) }.unwrap_or(-1);
    if ret < 0 {
        let _ = GAI_CONF_STATE.remove(pid_tgid);
        emit(pid_tgid, ret, 0);
    } else {
        unsafe { (*state).fd = ret };
    }
    0
}

/// `syscalls:sys_enter_read`: a read of the open gai.conf.
#[tracepoint]
pub fn gai_conf_read_enter(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(state) = GAI_CONF_STATE.get_ptr_mut(pid_tgid) else {
        return 0;
    };
    let fd: i64 = unsafe { ctx.read_at(16) }.unwrap_or(-1);
    if unsafe { (*state).fd } == fd && fd >= 0 {
        unsafe { (*state).buf = ctx.read_at(24).unwrap_or(0) };
    }
    0
}

/// `syscalls:sys_exit_read`: copy what was read; the end of the file ends the capture.
#[tracepoint]
pub fn gai_conf_read_exit(ctx: TracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(state) = GAI_CONF_STATE.get_ptr_mut(pid_tgid) else {
        return 0;
    };
    let buf = unsafe { (*state).buf };
    if buf == 0 {
        return 0;
    }
    unsafe { (*state).buf = 0 };
    let ret: i64 = unsafe { ctx.read_at(16) }.unwrap_or(-1);
    emit(pid_tgid, ret, buf);
    if ret <= 0 {
        let _ = GAI_CONF_STATE.remove(pid_tgid);
    }
    0
}
