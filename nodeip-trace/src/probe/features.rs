//! What this kernel and this process can do, probed once: kernel version, BTF, tracefs,
//! privileges, and for every hook nodeip-trace has (or will have) whether it can attach here and
//! why not. `nodeip-trace doctor` prints it; the loader chooses hooks from it.
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::libc_locator::{find_libcs, LibcTarget};
use super::tracefs;

/// The tracepoints the tool attaches to, as (category, name, purpose).
pub const TRACEPOINTS: [(&str, &str, &str); 25] = [
    (
        "syscalls",
        "sys_enter_socket",
        "learn netlink sockets as they are opened",
    ),
    (
        "syscalls",
        "sys_exit_socket",
        "learn netlink sockets as they are opened",
    ),
    ("syscalls", "sys_enter_sendto", "netlink requests (sendto)"),
    ("syscalls", "sys_exit_sendto", "netlink requests (sendto)"),
    (
        "syscalls",
        "sys_enter_sendmsg",
        "netlink requests (sendmsg)",
    ),
    ("syscalls", "sys_exit_sendmsg", "netlink requests (sendmsg)"),
    (
        "syscalls",
        "sys_enter_recvfrom",
        "netlink replies (recvfrom)",
    ),
    (
        "syscalls",
        "sys_exit_recvfrom",
        "netlink replies (recvfrom)",
    ),
    ("syscalls", "sys_enter_recvmsg", "netlink replies (recvmsg)"),
    ("syscalls", "sys_exit_recvmsg", "netlink replies (recvmsg)"),
    (
        "sock",
        "sock_send_length",
        "confirm a socket is AF_NETLINK (kernel >= 6.3)",
    ),
    (
        "sock",
        "sock_recv_length",
        "confirm a socket is AF_NETLINK (kernel >= 6.3)",
    ),
    (
        "fib",
        "fib_table_lookup",
        "IPv4 route lookups (source selection, route get)",
    ),
    ("fib6", "fib6_table_lookup", "IPv6 route lookups"),
    (
        "netlink",
        "netlink_extack",
        "kernel error strings for netlink requests",
    ),
    (
        "syscalls",
        "sys_enter_connect",
        "getaddrinfo's sort: each candidate in resolver order",
    ),
    (
        "syscalls",
        "sys_exit_connect",
        "getaddrinfo's sort: candidates the kernel cannot reach",
    ),
    (
        "syscalls",
        "sys_enter_getsockname",
        "getaddrinfo's sort: the source chosen per candidate",
    ),
    (
        "syscalls",
        "sys_exit_getsockname",
        "getaddrinfo's sort: the source chosen per candidate",
    ),
    (
        "syscalls",
        "sys_enter_openat",
        "getaddrinfo's sort: the /etc/gai.conf it opens",
    ),
    (
        "syscalls",
        "sys_exit_openat",
        "getaddrinfo's sort: the /etc/gai.conf it opens",
    ),
    (
        "syscalls",
        "sys_enter_read",
        "getaddrinfo's sort: the /etc/gai.conf it reads",
    ),
    (
        "syscalls",
        "sys_exit_read",
        "getaddrinfo's sort: the /etc/gai.conf it reads",
    ),
    (
        "sched",
        "sched_process_fork",
        "follow descendants of traced processes",
    ),
    (
        "sched",
        "sched_process_exec",
        "new programs (libc attach, attribution)",
    ),
];

/// Kernel functions behind netlink requests, probed with fentry or kprobe where available.
pub const KERNEL_FUNCTIONS: [(&str, &str); 9] = [
    (
        "inet_rtm_getroute",
        "RTM_GETROUTE (IPv4 route get): netns, result, error",
    ),
    ("inet6_rtm_getroute", "RTM_GETROUTE (IPv6)"),
    ("inet_dump_ifaddr", "RTM_GETADDR dumps (IPv4)"),
    ("inet6_dump_ifaddr", "RTM_GETADDR dumps (IPv6)"),
    ("rtnl_dump_ifinfo", "RTM_GETLINK dumps"),
    ("rtnl_getlink", "RTM_GETLINK requests"),
    ("ip_vs_genl_set_cmd", "IPVS service/destination changes"),
    (
        "netlink_sendmsg",
        "netlink sends without syscall tracepoints",
    ),
    (
        "netlink_recvmsg",
        "netlink receives without syscall tracepoints",
    ),
];

/// Availability of one hook.
#[derive(Clone, Debug, Serialize)]
pub struct HookAvailability {
    /// Hook kind: `uprobe`, `tracepoint`, `fentry`, `kprobe`.
    pub mode: String,
    /// What it attaches to.
    pub target: String,
    /// What it is for.
    pub purpose: String,
    /// Whether it can attach here.
    pub available: bool,
    /// Why not (or a note).
    pub reason: String,
}

/// Everything `doctor` reports.
#[derive(Clone, Debug, Serialize)]
pub struct KernelFeatures {
    /// `uname -r`.
    pub kernel: String,
    /// `/sys/kernel/btf/vmlinux` present.
    pub btf: bool,
    /// Where tracefs is, and whether we mounted it.
    pub tracefs: String,
    /// Running as uid 0.
    pub root: bool,
    /// Effective capabilities relevant to tracing.
    pub capabilities: Vec<String>,
    /// Privileges suffice to load programs.
    pub privileged: bool,
    /// uprobes (perf uprobe PMU) present.
    pub uprobes: bool,
    /// kprobes present (perf kprobe PMU / CONFIG_KPROBES).
    pub kprobes: bool,
    /// fentry/fexit (BPF_PROG_TYPE_TRACING) loadable.
    pub fentry: bool,
    /// Why fentry is not usable, when it is not.
    pub fentry_reason: String,
    /// The libcs found.
    pub libcs: Vec<LibcTarget>,
    /// Every hook and whether it can attach.
    pub hooks: Vec<HookAvailability>,
}

fn capabilities() -> (Vec<String>, bool) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let named = [
        (21, "CAP_SYS_ADMIN"),
        (38, "CAP_PERFMON"),
        (39, "CAP_BPF"),
        (24, "CAP_SYS_RESOURCE"),
    ];
    let caps: Vec<String> = named
        .iter()
        .filter(|(bit, _)| eff & (1u64 << bit) != 0)
        .map(|(_, n)| n.to_string())
        .collect();
    let privileged = eff & (1 << 21) != 0 || (eff & (1 << 38) != 0 && eff & (1 << 39) != 0);
    (caps, privileged)
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn kallsyms_has(kallsyms: &str, name: &str) -> bool {
    kallsyms.lines().any(|l| {
        let mut cols = l.split_whitespace();
        let sym = cols.nth(2);
        sym == Some(name)
            || sym
                .map(|s| s.split('.').next() == Some(name))
                .unwrap_or(false)
    })
}

/// Probes fentry support: loads a trivial tracing program (needs BTF).
fn probe_fentry(btf: bool) -> (bool, String) {
    if !btf {
        return (false, "no BTF (/sys/kernel/btf/vmlinux missing)".into());
    }
    match aya::sys::is_program_supported(aya::programs::ProgramType::Tracing) {
        Ok(true) => (true, String::new()),
        Ok(false) => (
            false,
            "kernel refuses BPF_PROG_TYPE_TRACING programs".into(),
        ),
        Err(e) => (false, format!("tracing program load refused: {e}")),
    }
}

impl KernelFeatures {
    /// Probes everything; `mount_tracefs` mounts tracefs when missing (doctor and trace do).
    pub fn detect(mount_tracefs: bool) -> Self {
        let tracefs_state = if mount_tracefs {
            tracefs::ensure_mounted().ok()
        } else {
            None
        };
        let tracefs_root: Option<PathBuf> = tracefs_state
            .as_ref()
            .map(|s| s.path().to_path_buf())
            .or_else(tracefs::find);
        let tracefs_text = match (&tracefs_state, &tracefs_root) {
            (Some(tracefs::TracefsState::MountedNow(p)), _) => {
                format!("{} (was not mounted: mounted it now)", p.display())
            }
            (_, Some(p)) => p.display().to_string(),
            (_, None) => format!(
                "not mounted (mount -t tracefs tracefs {})",
                tracefs::TRACEFS
            ),
        };
        let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
        let (capabilities, privileged) = capabilities();
        let uprobes = Path::new("/sys/bus/event_source/devices/uprobe").exists();
        let kprobes = Path::new("/sys/bus/event_source/devices/kprobe").exists()
            || tracefs_root
                .as_ref()
                .map(|r| r.join("kprobe_events").exists())
                .unwrap_or(false);
        let (fentry, fentry_reason) = if privileged {
            probe_fentry(btf)
        } else {
            (false, "not privileged".into())
        };
        let libcs = find_libcs(Path::new("/proc"));
        let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();

        let mut hooks = Vec::new();
        for libc in &libcs {
            for (mode, what) in [("uprobe", "entry"), ("uretprobe", "return")] {
                hooks.push(HookAvailability {
                    mode: mode.into(),
                    target: format!("getaddrinfo@{}", libc.path.display()),
                    purpose: format!(
                        "getaddrinfo {what} ({:?}, {} processes)",
                        libc.kind, libc.processes
                    ),
                    available: uprobes,
                    reason: if uprobes {
                        String::new()
                    } else {
                        "no uprobe PMU (CONFIG_UPROBE_EVENTS)".into()
                    },
                });
            }
        }
        for (category, name, purpose) in TRACEPOINTS {
            let exists = tracefs_root
                .as_ref()
                .map(|r| tracefs::event_exists(r, category, name))
                .unwrap_or(false);
            hooks.push(HookAvailability {
                mode: "tracepoint".into(),
                target: format!("{category}:{name}"),
                purpose: purpose.into(),
                available: exists,
                reason: if exists {
                    String::new()
                } else if tracefs_root.is_none() {
                    "tracefs not mounted".into()
                } else {
                    "tracepoint not in this kernel".into()
                },
            });
        }
        for (func, purpose) in KERNEL_FUNCTIONS {
            let present = kallsyms_has(&kallsyms, func);
            let absent = if kallsyms.is_empty() {
                "cannot read /proc/kallsyms".to_string()
            } else {
                format!("{func} not in this kernel (not built, inlined, or module not loaded)")
            };
            for (mode, ok, why) in [
                ("fentry", fentry, fentry_reason.clone()),
                (
                    "kprobe",
                    kprobes,
                    "no kprobes in this kernel (CONFIG_KPROBES unset)".to_string(),
                ),
            ] {
                hooks.push(HookAvailability {
                    mode: mode.into(),
                    target: func.into(),
                    purpose: purpose.into(),
                    available: ok && present,
                    reason: if !ok {
                        why
                    } else if !present {
                        absent.clone()
                    } else {
                        String::new()
                    },
                });
            }
        }
        KernelFeatures {
            kernel: kernel_release(),
            btf,
            tracefs: tracefs_text,
            root: unsafe { libc::geteuid() } == 0,
            capabilities,
            privileged,
            uprobes,
            kprobes,
            fentry,
            fentry_reason,
            libcs,
            hooks,
        }
    }

    /// Whether the tool can trace anything at all here.
    pub fn can_trace(&self) -> bool {
        self.privileged && self.hooks.iter().any(|h| h.available)
    }

    /// Whether a tracepoint is available.
    pub fn tracepoint_available(&self, category: &str, name: &str) -> bool {
        let target = format!("{category}:{name}");
        self.hooks
            .iter()
            .any(|h| h.mode == "tracepoint" && h.target == target && h.available)
    }

    /// The doctor report as text.
    pub fn render_text(&self) -> String {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let mut s = String::new();
        s.push_str(&format!("kernel       {}\n", self.kernel));
        s.push_str(&format!("BTF          {}\n", yes(self.btf)));
        s.push_str(&format!("tracefs      {}\n", self.tracefs));
        s.push_str(&format!(
            "privileges   root={} capabilities={} → {}\n",
            yes(self.root),
            if self.capabilities.is_empty() {
                "none".into()
            } else {
                self.capabilities.join(",")
            },
            if self.privileged {
                "can load eBPF"
            } else {
                "CANNOT load eBPF: run as root"
            }
        ));
        s.push_str(&format!("uprobes      {}\n", yes(self.uprobes)));
        s.push_str(&format!("kprobes      {}\n", yes(self.kprobes)));
        s.push_str(&format!(
            "fentry       {}{}\n",
            yes(self.fentry),
            if self.fentry {
                String::new()
            } else {
                format!(" ({})", self.fentry_reason)
            }
        ));
        s.push_str("libcs\n");
        for l in &self.libcs {
            s.push_str(&format!(
                "  {:?} {} (dev {} ino {}, mapped by {} processes)\n",
                l.kind,
                l.path.display(),
                l.dev,
                l.ino,
                l.processes
            ));
        }
        s.push_str("hooks\n");
        for h in &self.hooks {
            s.push_str(&format!(
                "  {:<4} {:<10} {:<60} {}{}\n",
                if h.available { "ok" } else { "--" },
                h.mode,
                h.target,
                h.purpose,
                if h.reason.is_empty() {
                    String::new()
                } else {
                    format!(" — {}", h.reason)
                }
            ));
        }
        s.push_str(&format!(
            "verdict      {}\n",
            if self.can_trace() {
                "can trace"
            } else {
                "CANNOT trace here (see above)"
            }
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kallsyms_lookup_handles_suffixes() {
        let k = "ffffffff81000000 T inet_rtm_getroute\nffffffff81000010 t rtnl_getlink.cold\n";
        assert!(kallsyms_has(k, "inet_rtm_getroute"));
        assert!(kallsyms_has(k, "rtnl_getlink"));
        assert!(!kallsyms_has(k, "ip_vs_genl_set_cmd"));
    }
}
