//! The hook table: every tracepoint the tool attaches, listed once — program, attach point,
//! the group that decides when it is attached, what it is for, and the kernel that has it. The
//! loader attaches from it, `doctor` reports from it, and `docs/hooks.md` is generated from it
//! (a test fails when they drift). Hook modes and hook outcomes are types, not strings.
use std::fmt;
use std::sync::Arc;

use super::ProbeError;

/// How a kernel function (a netlink handler, the socket-layer capture) is probed: a pair of
/// programs, at entry and at return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KernelHookMode {
    /// fentry/fexit (BTF trampolines).
    Fentry,
    /// kprobe/kretprobe.
    Kprobe,
}

impl KernelHookMode {
    /// `fentry` or `kprobe`.
    pub fn name(self) -> &'static str {
        match self {
            KernelHookMode::Fentry => "fentry",
            KernelHookMode::Kprobe => "kprobe",
        }
    }

    /// The hook modes of its entry and return programs.
    pub fn entry_and_return(self) -> (HookMode, HookMode) {
        match self {
            KernelHookMode::Fentry => (HookMode::Fentry, HookMode::Fexit),
            KernelHookMode::Kprobe => (HookMode::Kprobe, HookMode::Kretprobe),
        }
    }

    /// The name suffixes of its entry and return programs (`fentry`/`fexit`).
    pub fn program_suffixes(self) -> (&'static str, &'static str) {
        match self {
            KernelHookMode::Fentry => ("fentry", "fexit"),
            KernelHookMode::Kprobe => ("kprobe", "kretprobe"),
        }
    }
}

impl fmt::Display for KernelHookMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a hook is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookMode {
    /// A classic tracepoint (`perf_event_open` on a tracefs event).
    Tracepoint,
    /// A raw tracepoint (BPF_PROG_TYPE_RAW_TRACEPOINT: the tracepoint's arguments, no record).
    RawTracepoint,
    /// A program installed in a tail-call array.
    TailCall,
    /// A uprobe at a function's entry (or at an instruction).
    Uprobe,
    /// A uretprobe at a function's return.
    Uretprobe,
    /// fentry (BTF trampoline) at a kernel function's entry.
    Fentry,
    /// fexit at a kernel function's return.
    Fexit,
    /// kprobe at a kernel function's entry.
    Kprobe,
    /// kretprobe at a kernel function's return.
    Kretprobe,
    /// A cgroup socket-address program on the root cgroup v2 (runs inside one socket call).
    Cgroup,
    /// Left unprobed (the plan found nothing this kernel allows).
    Off,
}

impl HookMode {
    /// The mode as doctor, the recording header and the logs name it.
    pub fn as_str(self) -> &'static str {
        match self {
            HookMode::Tracepoint => "tracepoint",
            HookMode::RawTracepoint => "raw tracepoint",
            HookMode::TailCall => "tail call",
            HookMode::Uprobe => "uprobe",
            HookMode::Uretprobe => "uretprobe",
            HookMode::Fentry => "fentry",
            HookMode::Fexit => "fexit",
            HookMode::Kprobe => "kprobe",
            HookMode::Kretprobe => "kretprobe",
            HookMode::Cgroup => "cgroup",
            HookMode::Off => "off",
        }
    }

    /// The entry and return modes of a kernel-function probe mode (`fentry` → fentry/fexit, else
    /// kprobe/kretprobe).
    pub fn entry_and_return(self) -> (HookMode, HookMode) {
        match self {
            HookMode::Fentry | HookMode::Fexit => (HookMode::Fentry, HookMode::Fexit),
            _ => (HookMode::Kprobe, HookMode::Kretprobe),
        }
    }
}

impl fmt::Display for HookMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for HookMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Why a hook is not attached.
#[derive(Clone, Debug, thiserror::Error)]
pub enum HookError {
    /// Not tried: this kernel lacks it, or the plan chose another hook (the reason says which).
    #[error("{0}")]
    Unavailable(String),
    /// Loading or attaching failed (the probe layer's error, kind kept).
    #[error(transparent)]
    Attach(Arc<ProbeError>),
    /// Attaching a kernel-function probe set failed (each mode tried, with its error).
    #[error(transparent)]
    Kernel(Arc<KernelAttachError>),
}

/// Why a set of kernel-function programs (a handler's pair, the socket-layer capture) did not
/// attach. Shared (`Arc`) because one outcome is recorded for each program of the set.
#[derive(Debug, thiserror::Error)]
pub enum KernelAttachError {
    /// An fentry/fexit program needs the kernel's BTF, and there is none.
    #[error("{program}: no kernel BTF for fentry/fexit (see `nodeip-trace doctor`)")]
    NoBtf {
        /// The program.
        program: String,
    },
    /// aya refused to load or attach the program.
    #[error("{program}: {source}")]
    Program {
        /// The program.
        program: String,
        /// aya's error.
        source: aya::programs::ProgramError,
    },
    /// The embedded object lacks the program, or has it as another kind.
    #[error("{0} is missing from the embedded object or is not a kernel function probe: rebuild nodeip-trace")]
    NotKernelProbe(String),
    /// fentry failed, and the kprobe fallback (under `--hooks auto`) failed too.
    #[error("fentry: {fentry}; kprobe: {kprobe}")]
    Neither {
        /// The fentry attempt.
        fentry: Arc<KernelAttachError>,
        /// The kprobe attempt.
        kprobe: Arc<KernelAttachError>,
    },
}

impl From<ProbeError> for HookError {
    fn from(e: ProbeError) -> Self {
        HookError::Attach(Arc::new(e))
    }
}

impl serde::Serialize for HookError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// When a tracepoint is attached: the loader attaches the groups its configuration asks for, in
/// this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum HookGroup {
    /// Always: following a command's descendants, and new programs (libc attach, attribution).
    Processes,
    /// Netlink capture by syscall tracepoints (kernels without fentry/kprobes and without the
    /// 6.3 sock tracepoints' capture).
    NetlinkSyscalls,
    /// Kernel error strings for netlink requests (with netlink capture).
    NetlinkErrors,
    /// Route lookups (classic tracepoints where the BTF lacks the raw ones' offsets).
    RouteLookups,
    /// `connect()`: a source-address decision (with route lookups or getaddrinfo).
    Decisions,
    /// The inputs of a resolver's sort inside getaddrinfo (with getaddrinfo).
    ResolverSort,
}

/// One tracepoint hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracepointHook {
    /// The eBPF program (several tracepoints may share one).
    pub program: &'static str,
    /// Tracepoint category (`syscalls`, `sock`, `fib`, …).
    pub category: &'static str,
    /// Tracepoint name.
    pub name: &'static str,
    /// When it is attached.
    pub group: HookGroup,
    /// What it is for.
    pub purpose: &'static str,
    /// The first kernel that has it, as the tool uses it.
    pub min_kernel: &'static str,
}

const fn tp(
    program: &'static str,
    category: &'static str,
    name: &'static str,
    group: HookGroup,
    purpose: &'static str,
    min_kernel: &'static str,
) -> TracepointHook {
    TracepointHook {
        program,
        category,
        name,
        group,
        purpose,
        min_kernel,
    }
}

/// The tool's floor: ring buffers (5.8). Tracepoints older than that are listed with it.
const FLOOR: &str = "5.8";

/// Every tracepoint hook, in the order doctor lists them.
pub const TRACEPOINT_HOOKS: [TracepointHook; 22] = {
    use HookGroup::*;
    [
        tp("socket_enter", "syscalls", "sys_enter_socket", NetlinkSyscalls, "learn netlink sockets as they are opened", FLOOR),
        tp("socket_exit", "syscalls", "sys_exit_socket", NetlinkSyscalls, "learn netlink sockets as they are opened", FLOOR),
        tp("sendto_enter", "syscalls", "sys_enter_sendto", NetlinkSyscalls, "netlink requests (sendto)", FLOOR),
        tp("netlink_io_exit", "syscalls", "sys_exit_sendto", NetlinkSyscalls, "netlink requests (sendto)", FLOOR),
        tp("sendmsg_enter", "syscalls", "sys_enter_sendmsg", NetlinkSyscalls, "netlink requests (sendmsg)", FLOOR),
        tp("netlink_io_exit", "syscalls", "sys_exit_sendmsg", NetlinkSyscalls, "netlink requests (sendmsg)", FLOOR),
        tp("recvfrom_enter", "syscalls", "sys_enter_recvfrom", NetlinkSyscalls, "netlink replies (recvfrom)", FLOOR),
        tp("netlink_io_exit", "syscalls", "sys_exit_recvfrom", NetlinkSyscalls, "netlink replies (recvfrom)", FLOOR),
        tp("recvmsg_enter", "syscalls", "sys_enter_recvmsg", NetlinkSyscalls, "netlink replies (recvmsg)", FLOOR),
        tp("netlink_io_exit", "syscalls", "sys_exit_recvmsg", NetlinkSyscalls, "netlink replies (recvmsg)", FLOOR),
        tp("sock_send_length", "sock", "sock_send_length", NetlinkSyscalls, "netlink requests with only netlink sockets paying (kernel >= 6.3; else: confirm a socket is AF_NETLINK)", "6.3"),
        tp("sock_recv_length", "sock", "sock_recv_length", NetlinkSyscalls, "netlink replies with only netlink sockets paying (kernel >= 6.3; else: confirm a socket is AF_NETLINK)", "6.3"),
        tp("fib_table_lookup", "fib", "fib_table_lookup", RouteLookups, "IPv4 route lookups (source selection, route get)", FLOOR),
        tp("fib6_table_lookup", "fib6", "fib6_table_lookup", RouteLookups, "IPv6 route lookups", FLOOR),
        tp("netlink_extack", "netlink", "netlink_extack", NetlinkErrors, "kernel error strings for netlink requests", FLOOR),
        tp("gai_connect_enter", "syscalls", "sys_enter_connect", Decisions, "without the cgroup hooks: source-address decisions (their route lookups are kept); getaddrinfo's sort candidates", FLOOR),
        tp("gai_socket_exit", "syscalls", "sys_exit_connect", Decisions, "getaddrinfo's sort: candidates the kernel cannot reach", FLOOR),
        tp("gai_getsockname_enter", "syscalls", "sys_enter_getsockname", ResolverSort, "without the cgroup hooks: getaddrinfo's sort: the source chosen per candidate", FLOOR),
        tp("gai_socket_exit", "syscalls", "sys_exit_getsockname", ResolverSort, "getaddrinfo's sort: the source chosen per candidate", FLOOR),
        tp("process_fork", "sched", "sched_process_fork", Processes, "follow descendants of traced processes", FLOOR),
        tp("process_exec", "sched", "sched_process_exec", Processes, "new programs (libc attach, attribution)", FLOOR),
        tp("cgroup_mkdir", "cgroup", "cgroup_mkdir", Processes, "new cgroups' paths (containers named however short-lived)", FLOOR),
    ]
};

/// One cgroup socket-address hook, attached to the root of the cgroup v2 hierarchy: it runs
/// only inside its socket call, where a syscall tracepoint would put every system call of the
/// node on the kernel's traced slow path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupHook {
    /// The eBPF program.
    pub program: &'static str,
    /// The attach point (`connect4`, `getsockname6`, …).
    pub attach: &'static str,
    /// The tracepoints it stands in for.
    pub group: HookGroup,
    /// What it is for.
    pub purpose: &'static str,
}

const fn cg(
    program: &'static str,
    attach: &'static str,
    group: HookGroup,
    purpose: &'static str,
) -> CgroupHook {
    CgroupHook {
        program,
        attach,
        group,
        purpose,
    }
}

/// The cgroup hooks, preferred to the `Decisions` and `ResolverSort` tracepoints (kernel >= 5.8
/// for `getsockname`; a kernel that refuses them keeps the tracepoints).
pub const CGROUP_HOOKS: [CgroupHook; 4] = {
    use HookGroup::*;
    [
        cg("sort_connect4", "connect4", Decisions, "connect() of IPv4 sockets: source-address decisions (their route lookups are kept); getaddrinfo's sort candidates"),
        cg("sort_connect6", "connect6", Decisions, "connect() of IPv6 sockets: as for IPv4"),
        cg("sort_getsockname4", "getsockname4", ResolverSort, "getsockname() of IPv4 sockets: getaddrinfo's sort, the source chosen per candidate"),
        cg("sort_getsockname6", "getsockname6", ResolverSort, "getsockname() of IPv6 sockets: as for IPv4"),
    ]
};

/// The tracepoint hooks of `group`, in table order.
pub fn tracepoints_of(group: HookGroup) -> impl Iterator<Item = &'static TracepointHook> {
    TRACEPOINT_HOOKS.iter().filter(move |h| h.group == group)
}

/// `docs/hooks.md`'s tracepoint table, generated from [`TRACEPOINT_HOOKS`].
pub fn tracepoint_table_markdown() -> String {
    let mut out = String::from(
        "| tracepoint | program | attached when | purpose | minimum kernel |\n|---|---|---|---|---|\n",
    );
    for h in &TRACEPOINT_HOOKS {
        out.push_str(&format!(
            "| `{}:{}` | `{}` | {:?} | {} | {} |\n",
            h.category, h.name, h.program, h.group, h.purpose, h.min_kernel
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/hooks.md` carries the table generated from the code: they cannot drift apart.
    #[test]
    fn the_docs_hook_table_is_the_code_s() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/hooks.md");
        let doc = std::fs::read_to_string(path).expect("docs/hooks.md");
        assert!(
            doc.contains(&tracepoint_table_markdown()),
            "docs/hooks.md's tracepoint table differs from probe::hooks::TRACEPOINT_HOOKS; \
             paste the table from `tracepoint_table_markdown()`:\n{}",
            tracepoint_table_markdown()
        );
    }

    #[test]
    fn each_tracepoint_is_listed_once() {
        for (i, a) in TRACEPOINT_HOOKS.iter().enumerate() {
            for b in &TRACEPOINT_HOOKS[i + 1..] {
                assert!((a.category, a.name) != (b.category, b.name), "{a:?}");
            }
        }
    }

    #[test]
    fn modes_keep_their_names() {
        assert_eq!(HookMode::RawTracepoint.to_string(), "raw tracepoint");
        assert_eq!(
            HookMode::Fentry.entry_and_return(),
            (HookMode::Fentry, HookMode::Fexit)
        );
        assert_eq!(
            HookMode::Kprobe.entry_and_return(),
            (HookMode::Kprobe, HookMode::Kretprobe)
        );
    }
}
