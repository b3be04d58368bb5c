//! Transparent huge pages for the tracer, which stays on a node: none (`PR_SET_THP_DISABLE`).
//! Debian's kernels default THP to `always`, and khugepaged collapses any 2 MiB range of the
//! heap with one page in use into a whole huge page (up to 511 zero pages made resident each,
//! `max_ptes_none`). In the 6.1 and 6.12 guests' 30-minute soaks the tracer's anonymous memory
//! stepped from ≈ 27 to ≈ 35 MiB at ≈ 1,340 s of load, when khugepaged's slow scan reached its
//! heap, and stayed there (`docs/robustness.md`); this host's THP is `madvise`, and it never
//! stepped here. The setting is inherited across fork and exec, so the command `trace -- CMD`
//! starts gets the caller's back ([`restore_in_child`]).
use std::sync::atomic::{AtomicI32, Ordering};

/// `PR_GET_THP_DISABLE` before [`opt_out`]: 0 or 1; -1 when not opted out.
static BEFORE: AtomicI32 = AtomicI32::new(-1);

/// Turns transparent huge pages off for this process (a kernel without the `prctl`, before
/// 3.15, keeps them: nothing else changes).
pub fn opt_out() {
    // SAFETY: prctl with integer arguments only; it reads and sets this process's mm flags.
    let before = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
    // SAFETY: as above.
    if before >= 0 && unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } == 0 {
        BEFORE.store(before, Ordering::Relaxed);
    }
}

/// In a child between fork and exec: the setting this process had before [`opt_out`]
/// (async-signal-safe: an atomic load and a system call).
pub fn restore_in_child() {
    let before = BEFORE.load(Ordering::Relaxed);
    if before >= 0 {
        // SAFETY: prctl with integer arguments only, on the child's own mm.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, before as libc::c_ulong, 0, 0, 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PR_GET_THP_DISABLE` of this process.
    fn thp_disabled() -> i32 {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) }
    }

    /// Opting out and restoring in a forked child: the parent has THP off, the child the
    /// setting from before.
    #[test]
    fn opted_out_here_and_restored_in_a_child() {
        let original = thp_disabled();
        opt_out();
        assert_eq!(thp_disabled(), 1);
        // SAFETY: the child only calls prctl and _exit (async-signal-safe).
        let child = unsafe { libc::fork() };
        if child == 0 {
            restore_in_child();
            // SAFETY: ends the child at once, its setting as its status.
            unsafe { libc::_exit(thp_disabled()) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), original);
        // SAFETY: prctl with integer arguments only; puts this test process back.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, original as libc::c_ulong, 0, 0, 0) };
    }
}
