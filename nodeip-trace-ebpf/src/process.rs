//! Process lifecycle: follow forks of traced thread groups (so `trace -- COMMAND` sees the
//! command's descendants), report execs of traced processes, and the cgroups made (whose
//! paths name a container's processes).
//!
//! Minimum kernel: 4.7 (tracepoint programs); `__data_loc` comm fields since 6.x are skipped by
//! reading only the pid fields, whose offsets userspace sets from the format file.
use aya_ebpf::{
    helpers::{bpf_probe_read_kernel, bpf_probe_read_kernel_str_bytes},
    macros::tracepoint,
    programs::TracePointContext,
    EbpfContext, Global,
};
use nodeip_trace_common::{counter, CgroupMkdirRecord, ExecRecord, KIND_CGROUP_MKDIR, KIND_EXEC};

use crate::{count, filter::traced, write_header, EVENTS, TRACED_TGIDS};

/// Offset of `child_pid` in `sched:sched_process_fork` (from its format file).
#[unsafe(no_mangle)]
static FORK_CHILD_PID_OFFSET: Global<u32> = Global::new(20);
/// 1 when the pid filter is on, so children of traced processes are added to it.
#[unsafe(no_mangle)]
static FOLLOW_FORKS: Global<u32> = Global::new(0);
/// Offsets of `task_struct.real_parent`, `task_struct.tgid` and `task_struct.comm` (from the
/// kernel's BTF; 0 when unknown).
#[unsafe(no_mangle)]
static PARENT_OFFSETS: Global<[u32; 3]> = Global::new([0; 3]);

/// The offset of `task_struct.comm` (0: unknown).
#[inline(always)]
pub(crate) fn comm_offset() -> usize {
    crate::global_at(&PARENT_OFFSETS, 2) as usize
}

/// `current->real_parent->tgid` (0 when unknown), and its `comm` copied into `comm` (left as
/// is when unknown).
#[inline(always)]
fn parent_of_current(comm: &mut [u8; 16]) -> u32 {
    let [parent_off, tgid_off, comm_off] = PARENT_OFFSETS.load();
    if parent_off == 0 {
        return 0;
    }
    // SAFETY: bpf_probe_read_kernel checks every read.
    unsafe {
        let task = aya_ebpf::helpers::bpf_get_current_task() as *const u8;
        let Ok(parent) = bpf_probe_read_kernel(task.add(parent_off as usize) as *const *const u8)
        else {
            return 0;
        };
        if parent.is_null() {
            return 0;
        }
        if comm_off != 0 {
            if let Ok(c) = bpf_probe_read_kernel(parent.add(comm_off as usize) as *const [u8; 16]) {
                *comm = c;
            }
        }
        bpf_probe_read_kernel(parent.add(tgid_off as usize) as *const i32).unwrap_or(0) as u32
    }
}

/// `sched:sched_process_fork`: a child of a traced thread group is traced too.
#[tracepoint]
pub fn process_fork(ctx: TracePointContext) -> u32 {
    if FOLLOW_FORKS.load() == 0 {
        return 0;
    }
    let tgid = (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32;
    if unsafe { TRACED_TGIDS.get(tgid) }.is_none() {
        return 0;
    }
    let off = FORK_CHILD_PID_OFFSET.load() as usize;
    if off > 64 {
        return 0;
    }
    let child: i32 = unsafe { ctx.read_at(off) }.unwrap_or(0);
    if child > 0 {
        let _ = TRACED_TGIDS.insert(child as u32, 1, 0);
    }
    0
}

/// `sched:sched_process_exec` of a traced process: the new image (for libc attach and
/// attribution of short-lived processes).
#[tracepoint]
pub fn process_exec(ctx: TracePointContext) -> u32 {
    let pid_tgid = aya_ebpf::helpers::bpf_get_current_pid_tgid();
    if !traced(pid_tgid) {
        return 0;
    }
    let loc: u32 = unsafe { ctx.read_at(8) }.unwrap_or(0);
    let Some(mut entry) = EVENTS.reserve::<ExecRecord>(0) else {
        count(counter::OTHER_RINGBUF_FULL, 1);
        return 0;
    };
    let rec = entry.as_mut_ptr();
    unsafe {
        write_header(&mut (*rec).header, KIND_EXEC, pid_tgid);
        (*rec)._pad = 0;
        (*rec).parent_comm = [0; 16];
        (*rec).ppid = parent_of_current(&mut (*rec).parent_comm);
        (*rec).filename[0] = 0;
        let src = (ctx.as_ptr() as *const u8).wrapping_add((loc & 0xffff) as usize);
        if bpf_probe_read_kernel_str_bytes(src, &mut (*rec).filename).is_err() {
            (*rec).filename[0] = 0;
        }
    }
    // Without the exec hold, woken at once, not at the reader's next poll: this record is when
    // a new program is probed, and userspace reads its facts (exe, libc, cgroup) from /proc,
    // gone within milliseconds for a short-lived one. With it, nobody waits for the record.
    let lazy = crate::EXEC_RECORDS_LAZY.get(0).is_some_and(|v| *v != 0);
    entry.submit(if lazy {
        crate::NO_WAKEUP
    } else {
        crate::WAKE_NOW
    });
    0
}

/// Offsets of `root`, `id` and `path` (its `__data_loc` word) in `cgroup:cgroup_mkdir`, from its
/// format file (the defaults are every kernel's since 5.5, when `id` became 64 bits).
#[unsafe(no_mangle)]
static CGROUP_MKDIR_OFFSETS: Global<[u32; 3]> = Global::new([8, 16, 24]);

/// `cgroup:cgroup_mkdir`: every cgroup made on the node (a runtime makes them, not the traced
/// process that will run in them, so no filter; a node makes a few a second at most).
#[tracepoint]
pub fn cgroup_mkdir(ctx: TracePointContext) -> u32 {
    let [root_off, id_off, path_off] = CGROUP_MKDIR_OFFSETS.load();
    if root_off > 64 || id_off > 64 || path_off > 64 {
        return 0;
    }
    let Some(mut entry) = EVENTS.reserve::<CgroupMkdirRecord>(0) else {
        count(counter::OTHER_RINGBUF_FULL, 1);
        return 0;
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: the record was reserved for this type; the tracepoint reads are checked.
    unsafe {
        write_header(
            &mut (*rec).header,
            KIND_CGROUP_MKDIR,
            aya_ebpf::helpers::bpf_get_current_pid_tgid(),
        );
        (*rec).root = ctx.read_at::<i32>(root_off as usize).unwrap_or(-1);
        (*rec)._pad = 0;
        (*rec).id = ctx.read_at::<u64>(id_off as usize).unwrap_or(0);
        let loc: u32 = ctx.read_at(path_off as usize).unwrap_or(0);
        (*rec).path[0] = 0;
        let src = (ctx.as_ptr() as *const u8).wrapping_add((loc & 0xffff) as usize);
        if bpf_probe_read_kernel_str_bytes(src, &mut (*rec).path).is_err() {
            (*rec).path[0] = 0;
        }
    }
    // Woken at once: the processes moved into it come right after, and their records are
    // named by it only if it is read first (it is: the ring keeps order).
    entry.submit(crate::WAKE_NOW);
    0
}
