//! Who is traced: load-time globals (set by userspace before load) and the traced-tgid map.
use aya_ebpf::{helpers::bpf_get_current_comm, Global};

use crate::TRACED_TGIDS;

/// 1 when only thread groups in `TRACED_TGIDS` are traced.
#[unsafe(no_mangle)]
static FILTER_TGIDS: Global<u32> = Global::new(0);
/// 1 when only tasks whose comm equals `FILTER_COMM_NAME` are traced.
#[unsafe(no_mangle)]
static FILTER_COMM: Global<u32> = Global::new(0);
/// The comm to match (NUL padded).
#[unsafe(no_mangle)]
static FILTER_COMM_NAME: Global<[u8; 16]> = Global::new([0; 16]);
/// This tracer's own tgid, never traced.
#[unsafe(no_mangle)]
static SELF_TGID: Global<u32> = Global::new(0);

/// Whether the current task passes the start-up filters.
#[inline(always)]
pub fn traced(pid_tgid: u64) -> bool {
    let tgid = (pid_tgid >> 32) as u32;
    if tgid == SELF_TGID.load() {
        return false;
    }
    if FILTER_TGIDS.load() != 0 && unsafe { TRACED_TGIDS.get(tgid) }.is_none() {
        return false;
    }
    if FILTER_COMM.load() != 0 {
        let comm = bpf_get_current_comm().unwrap_or([0; 16]);
        if comm != FILTER_COMM_NAME.load() {
            return false;
        }
    }
    true
}
