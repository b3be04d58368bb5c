//! Dropping, once the probes are attached, every capability the running tracer no longer
//! needs: it keeps only what attaching to programs and libcs that start later, and naming what
//! they do, still need ([`KEPT`]); the rest leaves the effective, permitted and inheritable sets
//! and the bounding set (so nothing it could ever exec regains them), the ambient set is
//! cleared and `no_new_privs` is set. Reading the ring buffers and writing the outputs need no
//! capability: their file descriptors are open already. Capabilities are per thread: this runs
//! on the trace's only thread (the runtime is single-threaded; threads made later, for a
//! namespace's interface names, inherit the reduced sets).
use crate::probe::ProbeError;

/// A capability the running tracer keeps, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeptCapability {
    /// Its number (`CAP_BPF` = 39, …).
    pub bit: u32,
    /// Its name.
    pub name: &'static str,
    /// What the running tracer still does with it.
    pub why: &'static str,
}

/// What the running tracer keeps (docs/security.md says the same, from this list).
pub const KEPT: [KeptCapability; 5] = [
    KeptCapability {
        bit: 39,
        name: "CAP_BPF",
        why: "attaching the loaded programs to the uprobes of a libc or Go program that starts later (bpf link creation), and updating the maps of traced pids and netlink sockets",
    },
    KeptCapability {
        bit: 38,
        name: "CAP_PERFMON",
        why: "opening the perf events of those uprobes",
    },
    KeptCapability {
        bit: 21,
        name: "CAP_SYS_ADMIN",
        why: "entering a new network namespace to name its interfaces (setns), and BPF/perf on kernels before 5.8, which have no CAP_BPF/CAP_PERFMON",
    },
    KeptCapability {
        bit: 19,
        name: "CAP_SYS_PTRACE",
        why: "reading other processes' /proc/PID/maps, exe, root, cwd and fd (which libc a new process maps, its executable, its container's files, its netlink sockets)",
    },
    KeptCapability {
        bit: 2,
        name: "CAP_DAC_READ_SEARCH",
        why: "reading a container's libc, executable and runtime config through /proc/PID/root when they belong to another user (user-namespaced containers)",
    },
];

/// The [`KEPT`] capabilities as a mask.
pub fn kept_mask() -> u64 {
    KEPT.iter().fold(0, |m, c| m | 1u64 << c.bit)
}

/// The names of the [`KEPT`] capabilities this process has: what [`drop_to_running_set`] will
/// keep (empty when the sets cannot be read).
pub fn to_be_kept() -> Vec<&'static str> {
    kept_names(kept_mask() & current_sets().map(|(_, p)| p).unwrap_or(0))
}

/// The names of the [`KEPT`] capabilities in `mask`.
fn kept_names(mask: u64) -> Vec<&'static str> {
    KEPT.iter()
        .filter(|c| mask & (1u64 << c.bit) != 0)
        .map(|c| c.name)
        .collect()
}

/// CAP_SETPCAP's number.
const CAP_SETPCAP: u32 = 8;

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets in two 32-bit halves.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The calling thread's (effective, permitted) sets.
fn current_sets() -> std::io::Result<(u64, u64)> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData into our array, as version 3 defines.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
    Ok((
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
    ))
}

/// The highest capability this kernel knows.
fn last_capability() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(40)
}

/// What was dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedCapabilities {
    /// The names of the [`KEPT`] capabilities the process had (and keeps).
    pub kept: Vec<&'static str>,
    /// How many capabilities left the permitted set.
    pub dropped: u32,
}

/// Drops every capability but the [`KEPT`] ones the process has, from all sets (see the module
/// doc). Errs, with what it had done, when the kernel refuses a step.
pub fn drop_to_running_set() -> Result<DroppedCapabilities, ProbeError> {
    drop_keeping(kept_mask())
}

/// Drops every capability, from all sets: for a helper process that only answers on
/// descriptors it was given (the exec hold's guard).
pub fn drop_all() -> Result<DroppedCapabilities, ProbeError> {
    drop_keeping(0)
}

/// Drops every capability outside `wanted` (a mask of capability bits) from all sets.
fn drop_keeping(wanted: u64) -> Result<DroppedCapabilities, ProbeError> {
    let fail = |step: &'static str| {
        move |source: std::io::Error| ProbeError::DropCapabilities { step, source }
    };
    let (effective, permitted) =
        current_sets().map_err(fail("reading the capability sets (capget)"))?;
    let keep = wanted & permitted;
    // The bounding set needs CAP_SETPCAP (which goes last, with the others, in capset); a
    // tracer given only file capabilities has none, and no bounding set to narrow either.
    let can_narrow_bounding = effective & (1u64 << CAP_SETPCAP) != 0;
    for cap in (0..=last_capability()).filter(|_| can_narrow_bounding) {
        if keep & (1u64 << cap) != 0 {
            continue;
        }
        // SAFETY: prctl with integer arguments.
        let in_bounding = unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap as libc::c_ulong) };
        if in_bounding == 1
            // SAFETY: as above.
            && unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong) } != 0
        {
            return Err(fail("dropping from the bounding set (PR_CAPBSET_DROP)")(
                std::io::Error::last_os_error(),
            ));
        }
    }
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let half = |shift: u32| CapData {
        effective: (keep >> shift) as u32,
        permitted: (keep >> shift) as u32,
        inheritable: 0,
    };
    let data = [half(0), half(32)];
    // SAFETY: capset reads two CapData from our array, as version 3 defines.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
        return Err(fail("narrowing the effective and permitted sets (capset)")(
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(fail("setting no_new_privs")(std::io::Error::last_os_error()));
    }
    Ok(DroppedCapabilities {
        kept: kept_names(keep),
        dropped: (permitted & !keep).count_ones(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_set_is_what_late_attach_needs_and_nothing_that_writes_or_configures() {
        let mask = kept_mask();
        for bit in [39, 38, 21, 19, 2] {
            assert!(mask & (1 << bit) != 0, "{bit}");
        }
        // CAP_DAC_OVERRIDE, CAP_NET_ADMIN, CAP_SYS_MODULE, CAP_SETUID, CAP_SETPCAP, CAP_KILL.
        for bit in [1, 12, 16, 7, 8, 5] {
            assert!(mask & (1 << bit) == 0, "{bit}");
        }
        assert_eq!(mask.count_ones(), KEPT.len() as u32);
    }

    #[test]
    fn docs_security_lists_exactly_what_is_kept_and_why() {
        let doc = include_str!("../../../docs/security.md");
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| CAP_")).collect();
        assert_eq!(rows.len(), KEPT.len(), "{rows:?}");
        for (row, kept) in rows.iter().zip(KEPT) {
            assert_eq!(*row, format!("| {} | {} |", kept.name, kept.why));
        }
    }
}
