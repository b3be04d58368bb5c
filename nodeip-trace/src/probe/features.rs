//! What this kernel and this process can do, probed once: kernel version, BTF, tracefs,
//! privileges, and for every hook nodeip-trace has (or will have) whether it can attach here and
//! why not. `nodeip-trace doctor` prints it; the loader chooses hooks from it.
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::executable_resolvers::{
    running_executable_resolvers, GoResolverTarget, StaticResolverTarget,
};
use super::hooks::{KernelHookMode, CGROUP_HOOKS, TRACEPOINT_HOOKS};
use super::tracefs;
use crate::host::libc_locator::{find_libcs, LibcTarget};

/// Kernel handlers behind netlink requests, and the show functions of the route files kubelet's
/// default-route fallback reads, probed with fentry/fexit or kprobe/kretprobe, as (function,
/// purpose); the order is `nodeip_trace_common::handler_function` order.
pub const KERNEL_FUNCTIONS: [(&str, &str); nodeip_trace_common::handler_function::COUNT as usize] = [
    (
        "inet_rtm_getroute",
        "RTM_GETROUTE (IPv4 route get): netns, request, result",
    ),
    ("inet6_rtm_getroute", "RTM_GETROUTE (IPv6 route get)"),
    ("inet_dump_ifaddr", "RTM_GETADDR dumps (IPv4)"),
    ("inet6_dump_ifaddr", "RTM_GETADDR dumps (IPv6)"),
    ("rtnl_dump_ifinfo", "RTM_GETLINK dumps"),
    ("rtnl_getlink", "RTM_GETLINK of one link"),
    (
        "ip_vs_genl_set_cmd",
        "IPVS service/destination changes, by whom, with the kernel's answer",
    ),
    (
        "fib_route_seq_show",
        "/proc/net/route reads: the default routes listed, to whom",
    ),
    (
        "ipv6_route_seq_show",
        "/proc/net/ipv6_route reads: the default routes listed, to whom",
    ),
];

/// Kernel functions of the socket-layer netlink capture, as (function, purpose): kprobes need
/// all four, fentry/fexit only [`FENTRY_CAPTURE_FUNCTIONS`].
pub const CAPTURE_FUNCTIONS: [(&str, &str); 4] = [
    (
        "netlink_sendmsg",
        "netlink capture at the socket layer: sends",
    ),
    (
        "netlink_recvmsg",
        "netlink capture at the socket layer: receives",
    ),
    (
        "netlink_unicast",
        "netlink capture at the socket layer: the datagram sent",
    ),
    (
        "skb_recv_datagram",
        "netlink capture at the socket layer: the datagram received",
    ),
];

/// The socket-layer capture functions fentry/fexit probe: their arguments tell a request from the
/// kernel's reply and a receive from a peek, so the calls around them need no programs.
pub const FENTRY_CAPTURE_FUNCTIONS: [&str; 2] = ["netlink_unicast", "skb_recv_datagram"];

/// Whether the socket-layer capture in `mode` probes `function` (one of [`CAPTURE_FUNCTIONS`]).
fn capture_uses(mode: KernelHookMode, function: &str) -> bool {
    mode == KernelHookMode::Kprobe || FENTRY_CAPTURE_FUNCTIONS.contains(&function)
}

/// Which hooks `trace --hooks` asks for the kernel handlers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HookPreference {
    /// The best the kernel offers per function: fentry/fexit, else kprobe/kretprobe, else none
    /// (the syscall tracepoints still capture the traffic).
    #[default]
    Auto,
    /// fentry/fexit only.
    Fentry,
    /// kprobe/kretprobe only.
    Kprobe,
    /// No kernel handler probes: syscall tracepoints only.
    Tracepoint,
}

impl HookPreference {
    /// The kernel-function modes it allows, in order of preference.
    fn modes(self) -> &'static [KernelHookMode] {
        match self {
            HookPreference::Auto => &[KernelHookMode::Fentry, KernelHookMode::Kprobe],
            HookPreference::Fentry => &[KernelHookMode::Fentry],
            HookPreference::Kprobe => &[KernelHookMode::Kprobe],
            HookPreference::Tracepoint => &[],
        }
    }

    /// The name as given to `--hooks`.
    pub fn name(self) -> &'static str {
        match self {
            HookPreference::Auto => "auto",
            HookPreference::Fentry => "fentry",
            HookPreference::Kprobe => "kprobe",
            HookPreference::Tracepoint => "tracepoint",
        }
    }
}

/// The hook chosen for one kernel handler function, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HandlerPlan {
    /// Kernel function.
    pub function: String,
    /// fentry or kprobe; `None` when the function is not probed.
    pub mode: Option<KernelHookMode>,
    /// Why this mode (or why none).
    pub reason: String,
}

/// Where a kernel function is, from `/proc/kallsyms`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelFunction {
    /// Function name.
    pub name: String,
    /// In `/proc/kallsyms` (built in, or its module is loaded).
    pub present: bool,
    /// The module it is in, when not built in.
    pub module: Option<String>,
}

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
    /// Privileges suffice to load programs ([`KernelFeatures::trace_blockers`] is empty).
    pub privileged: bool,
    /// Capabilities tracing needs that this process lacks (empty with CAP_SYS_ADMIN, or with
    /// both CAP_BPF and CAP_PERFMON).
    pub missing_capabilities: Vec<String>,
    /// The kernel lockdown mode in force (`none`, `integrity`, `confidentiality`), when
    /// `/sys/kernel/security/lockdown` says.
    pub lockdown: Option<String>,
    /// uprobes (perf uprobe PMU) present.
    pub uprobes: bool,
    /// kprobes present (perf kprobe PMU / CONFIG_KPROBES).
    pub kprobes: bool,
    /// fentry/fexit (BPF_PROG_TYPE_TRACING) loadable.
    pub fentry: bool,
    /// Why fentry is not usable, when it is not.
    pub fentry_reason: String,
    /// Holding new programs at exec until probed: `yes (…)`, or `no (why)`.
    pub exec_hold: String,
    /// `bpf_task_pt_regs` with `bpf_get_current_task_btf` (kernel >= 5.15): the route-lookup
    /// programs tell a netlink request's lookups by the sender's syscall registers, and every
    /// record's header (network namespace, comm) is read by plain loads from the BTF task
    /// pointer instead of helper calls.
    pub task_pt_regs: bool,
    /// `bpf_get_attach_cookie` (kernel >= 5.15). Shown by doctor; nothing depends on it any more
    /// (getaddrinfo has one return program per C library).
    pub attach_cookie: bool,
    /// fexit programs read a return value without knowing the argument count
    /// (`bpf_get_func_ret`, kernel >= 5.17): the socket-layer capture's `skb_recv_datagram`
    /// fexit needs it.
    pub fexit_return: bool,
    /// The libcs found.
    pub libcs: Vec<LibcTarget>,
    /// The running Go programs whose own resolver would be probed.
    pub go_resolvers: Vec<GoResolverTarget>,
    /// Running statically built programs carrying a C library's getaddrinfo (static musl,
    /// k3s-style Go), each probed in its own file.
    pub static_resolvers: Vec<StaticResolverTarget>,
    /// Every hook and whether it can attach.
    pub hooks: Vec<HookAvailability>,
    /// The kernel handler functions and where they are.
    pub functions: Vec<KernelFunction>,
    /// The hook `trace --hooks auto` chooses per kernel handler.
    pub handler_plan: Vec<HandlerPlan>,
    /// The socket-layer capture functions and where they are.
    pub capture_functions: Vec<KernelFunction>,
    /// How `trace --hooks auto` captures netlink traffic: `fentry`/`kprobe` at the socket layer,
    /// or `None` for the syscall tracepoints.
    pub capture_plan: HandlerPlan,
    /// `/proc/kallsyms` could be read.
    pub kallsyms_readable: bool,
}

/// What a process's effective capability set means for tracing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapabilityCheck {
    /// The tracing-relevant capabilities present.
    pub present: Vec<String>,
    /// Those tracing needs that are missing (empty: enough).
    pub missing: Vec<String>,
}

/// Reads the tracing-relevant capabilities from a `/proc/PID/status` text: loading and attaching
/// needs CAP_SYS_ADMIN, or CAP_BPF together with CAP_PERFMON (kernel ≥ 5.8).
pub fn capability_check(proc_status: &str) -> CapabilityCheck {
    const SYS_ADMIN: u32 = 21;
    const PERFMON: u32 = 38;
    const BPF: u32 = 39;
    let eff = proc_status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |bit: u32| eff & (1u64 << bit) != 0;
    let named = [
        (SYS_ADMIN, "CAP_SYS_ADMIN"),
        (PERFMON, "CAP_PERFMON"),
        (BPF, "CAP_BPF"),
        (24, "CAP_SYS_RESOURCE"),
    ];
    let present = named
        .iter()
        .filter(|(bit, _)| has(*bit))
        .map(|(_, n)| n.to_string())
        .collect();
    let missing = if has(SYS_ADMIN) {
        Vec::new()
    } else {
        [(BPF, "CAP_BPF"), (PERFMON, "CAP_PERFMON")]
            .iter()
            .filter(|(bit, _)| !has(*bit))
            .map(|(_, n)| n.to_string())
            .collect()
    };
    CapabilityCheck { present, missing }
}

/// The lockdown mode in force from `/sys/kernel/security/lockdown` text
/// (`none [integrity] confidentiality` → `integrity`).
pub fn lockdown_mode(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    Some(text[start + 1..end].to_string())
}

/// What works only in part without kernel BTF or without uprobes (a trace still runs), each
/// line saying what is lost and what still works.
pub fn degradations(btf: bool, uprobes: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if !btf {
        notes.push("no kernel BTF (/sys/kernel/btf/vmlinux): events carry no network namespace, exec records no parent, kernel handler probes see no request, netlink is captured by the syscall tracepoints (the socket-layer and sock-tracepoint captures need BTF), no fentry; everything else works".to_string());
    }
    if !uprobes {
        notes.push(
            "no uprobes (CONFIG_UPROBE_EVENTS): getaddrinfo calls are not traced; netlink and route lookups are"
                .to_string(),
        );
    }
    notes
}

/// What the kernel's missing BPF helpers cost (a trace still runs), one line each: `task_pt_regs`
/// (5.15), `fexit_return` (`bpf_get_func_ret`, 5.17). (`bpf_get_attach_cookie`, 5.15, costs
/// nothing: getaddrinfo has one return program per C library.)
pub fn helper_degradations(task_pt_regs: bool, fexit_return: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if !task_pt_regs {
        notes.push("no bpf_task_pt_regs (kernel < 5.15): route lookups made while the kernel answers a netlink request (route get) are kept only inside a traced getaddrinfo or connect; the route-get handler probe still records the answer".to_string());
    }
    if !fexit_return {
        notes.push("no bpf_get_func_ret (kernel < 5.17): the socket-layer netlink capture cannot use fentry/fexit (skb_recv_datagram's return value), kprobes capture at the socket layer instead".to_string());
    }
    notes
}

/// The kernel-version floor of `bpf_get_func_ret`, which the `skb_recv_datagram` fexit uses
/// (fexit programs that know their function's argument count read the return value from the
/// context instead, on any kernel with fexit).
const FEXIT_RETURN_KERNEL: (u8, u8) = (5, 17);

/// Functions whose fexit program needs `bpf_get_func_ret` (their argument count changed across
/// kernels: `skb_recv_datagram` lost `noblock` in 5.19).
const FEXIT_NEEDS_FUNC_RET: [&str; 1] = ["skb_recv_datagram"];

/// Whether the kernel offers `helper` to `program_type` programs (a load probe; false when it
/// cannot be told, e.g. without privileges).
fn helper_supported(program_type: aya::programs::ProgramType, helper: aya::sys::BpfHelper) -> bool {
    aya::sys::is_helper_supported(program_type, helper).unwrap_or(false)
}

/// What stops `trace` from running for a process with `capabilities` under `lockdown`: one line
/// per missing thing, each saying what to do (empty: nothing stops it).
pub fn trace_blockers(root: bool, missing: &[String], lockdown: Option<&str>) -> Vec<String> {
    let mut blockers = Vec::new();
    if !missing.is_empty() {
        let missing = missing.join(", ");
        blockers.push(if root {
            format!("running as root but without {missing} (loading eBPF needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; a container runtime, capsh or setpriv dropped them): give them back, e.g. a privileged container as in deploy/daemonset.yaml")
        } else {
            format!("not root and missing {missing} (loading eBPF needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN): run as root, e.g. `sudo nodeip-trace trace`")
        });
    }
    if lockdown == Some("confidentiality") {
        blockers.push(
            "the kernel is locked down (lockdown=confidentiality): it refuses eBPF reads of kernel memory and tracefs, so no probe can run; tracing needs a kernel booted without lockdown=confidentiality (on Secure Boot machines, with lockdown relaxed to integrity)".into(),
        );
    }
    blockers
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Looks `names` up in `/proc/kallsyms` text (also as `name.cold`/`name.isra.0` parts) in one
/// pass over it (it has a line per kernel symbol: hundreds of thousands).
fn kallsyms_lookup_all(kallsyms: &str, names: &[&str]) -> Vec<KernelFunction> {
    let mut found: Vec<Option<Option<String>>> = vec![None; names.len()];
    for l in kallsyms.lines() {
        let mut cols = l.split_whitespace();
        let Some(sym) = cols.nth(2) else {
            continue;
        };
        let base = sym.split('.').next().unwrap_or(sym);
        if let Some(i) = names.iter().position(|n| *n == base) {
            if found[i].is_none() {
                found[i] = Some(
                    cols.next()
                        .map(|m| m.trim_matches(|c| c == '[' || c == ']').to_string()),
                );
            }
        }
    }
    names
        .iter()
        .zip(found)
        .map(|(name, f)| KernelFunction {
            name: name.to_string(),
            present: f.is_some(),
            module: f.flatten(),
        })
        .collect()
}

/// [`kallsyms_lookup_all`] of one name.
#[cfg(test)]
fn kallsyms_lookup(kallsyms: &str, name: &str) -> KernelFunction {
    kallsyms_lookup_all(kallsyms, &[name]).remove(0)
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
        Err(e) => {
            // aya's message hides the errno in its source: say both (EPERM is the usual one,
            // from a kernel that allows no BPF_PROG_TYPE_TRACING here).
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            (false, format!("tracing program load refused: {text}"))
        }
    }
}

/// What the kernel offers for probing its functions: the facts every mode decision rests on.
#[derive(Clone, Copy, Debug)]
struct ModeSupport<'a> {
    fentry: bool,
    /// Why not, when `fentry` is false.
    fentry_reason: &'a str,
    /// fexit can read any function's return value (`bpf_get_func_ret`).
    fexit_return: bool,
    kprobes: bool,
    /// `/proc/kallsyms` could not be read (so no function is known to exist).
    no_kallsyms: bool,
    /// `sock:sock_send_length` and `sock_recv_length` exist (kernel >= 6.3): the tracepoint
    /// capture needs no syscall tracepoints.
    sock_tracepoints: bool,
}

/// Whether `hooks` lists tracepoint `category:name` as available.
fn tracepoint_listed(hooks: &[HookAvailability], category: &str, name: &str) -> bool {
    let target = format!("{category}:{name}");
    hooks
        .iter()
        .any(|h| h.mode == "tracepoint" && h.target == target && h.available)
}

/// Whether `hooks` lists both `sock:sock_send_length` and `sock_recv_length` as available.
fn sock_tracepoints_listed(hooks: &[HookAvailability]) -> bool {
    tracepoint_listed(hooks, "sock", "sock_send_length")
        && tracepoint_listed(hooks, "sock", "sock_recv_length")
}

/// The raw tracepoints preferred over the classic ones (same events, no tracepoint record filled
/// for every packet or socket call): usable where the tracepoint exists and the kernel's BTF
/// gives the offsets their programs follow from the arguments.
fn raw_tracepoint_hooks(hooks: &[HookAvailability]) -> Vec<HookAvailability> {
    let offsets = crate::host::kernel_btf::KernelOffsets::running();
    let (socket, route) = (offsets.socket.is_some(), offsets.route.is_some());
    [
        (
            "sock",
            "sock_send_length",
            socket,
            "netlink requests: preferred to the tracepoint",
        ),
        (
            "sock",
            "sock_recv_length",
            socket,
            "netlink replies: preferred to the tracepoint",
        ),
        (
            "fib",
            "fib_table_lookup",
            route,
            "IPv4 route lookups: a routed packet costs a port read, no record",
        ),
        (
            "fib6",
            "fib6_table_lookup",
            route,
            "IPv6 route lookups: as for IPv4",
        ),
    ]
    .into_iter()
    .map(|(category, name, found, purpose)| {
        let exists = tracepoint_listed(hooks, category, name);
        HookAvailability {
            mode: "raw_tp".into(),
            target: name.into(),
            purpose: purpose.into(),
            available: exists && found,
            reason: if !exists {
                "tracepoint not in this kernel".into()
            } else if !offsets.btf {
                "no kernel BTF: the tracepoint is used".into()
            } else if !found {
                "the BTF lacks a member its program reads: the tracepoint is used".into()
            } else {
                String::new()
            },
        }
    })
    .collect()
}

/// Where a trace captures netlink traffic: the decision, kept apart from its reasons
/// ([`NetlinkCapture`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetlinkCaptureMode {
    /// Kernel-function hooks at the socket layer: only netlink sockets pay.
    SocketLayer(KernelHookMode),
    /// `sock:sock_send_length`/`sock_recv_length` alone: no syscall tracepoint for netlink.
    SockTracepoints,
    /// The syscall tracepoints of `sendmsg`/`recvmsg` and their kin.
    SyscallTracepoints,
}

impl NetlinkCaptureMode {
    /// The mode in a few words, for the start line: `socket layer (fentry)`, `sock
    /// tracepoints`, `syscall tracepoints`.
    pub fn short_name(self) -> String {
        match self {
            NetlinkCaptureMode::SocketLayer(mode) => format!("socket layer ({mode})"),
            NetlinkCaptureMode::SockTracepoints => "sock tracepoints".into(),
            NetlinkCaptureMode::SyscallTracepoints => "syscall tracepoints".into(),
        }
    }

    /// The mode with what it copies, for doctor, `-v` and the JSON header.
    fn long_name(self) -> String {
        match self {
            NetlinkCaptureMode::SockTracepoints => "sock tracepoints (sock_send_length/sock_recv_length: only netlink sockets are copied, no syscall tracepoint for netlink)".into(),
            other => other.short_name(),
        }
    }
}

/// How a trace captures netlink, and why not in a better way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetlinkCapture {
    /// The mode in use.
    pub mode: NetlinkCaptureMode,
    /// `--hooks tracepoint` chose the tracepoints.
    pub forced: bool,
    /// Why each better mode was not used, best first (`fentry: …`, `kprobe: …`, `sock
    /// tracepoints refused: …`).
    pub refusals: Vec<String>,
}

impl NetlinkCapture {
    /// Captured at the socket layer with `mode`.
    pub fn socket_layer(mode: KernelHookMode) -> Self {
        NetlinkCapture {
            mode: NetlinkCaptureMode::SocketLayer(mode),
            forced: false,
            refusals: Vec::new(),
        }
    }
}

/// `socket layer (fentry)`; `sock tracepoints (…), because fentry: …; kprobe: …`; `syscall
/// tracepoints (--hooks tracepoint)`.
impl std::fmt::Display for NetlinkCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.mode.long_name())?;
        if self.forced {
            f.write_str(" (--hooks tracepoint)")?;
        }
        if !self.refusals.is_empty() {
            write!(f, ", because {}", self.refusals.join("; "))?;
        }
        Ok(())
    }
}

/// `trace`'s plan for the netlink capture: the socket-layer mode to try first (doctor's line),
/// and what captures when the socket layer is not used, with why.
#[derive(Clone, Debug)]
pub struct CapturePlan {
    /// The socket-layer mode (`None`: not tried) and doctor's reason.
    pub socket_layer: HandlerPlan,
    /// The tracepoint capture that serves otherwise, with the plan's refusals.
    pub fallback: NetlinkCapture,
}

impl ModeSupport<'_> {
    /// Why `mode` (`fentry`/`kprobe`) cannot probe `function` here (`None`: it can).
    fn unavailable(&self, mode: KernelHookMode, function: &KernelFunction) -> Option<String> {
        if mode == KernelHookMode::Fentry && !self.fentry {
            return Some(self.fentry_reason.to_string());
        }
        if mode == KernelHookMode::Kprobe && !self.kprobes {
            return Some("no kprobes in this kernel (CONFIG_KPROBES unset)".into());
        }
        if !function.present {
            return Some(if self.no_kallsyms {
                "cannot read /proc/kallsyms".into()
            } else {
                format!(
                    "{} not in this kernel (not built, inlined, or its module is not loaded)",
                    function.name
                )
            });
        }
        if mode == KernelHookMode::Fentry
            && !self.fexit_return
            && FEXIT_NEEDS_FUNC_RET.contains(&function.name.as_str())
        {
            return Some(format!(
                "its fexit reads the return value with bpf_get_func_ret (kernel >= {}.{})",
                FEXIT_RETURN_KERNEL.0, FEXIT_RETURN_KERNEL.1
            ));
        }
        if mode == KernelHookMode::Fentry {
            if let Some(module) = &function.module {
                return Some(format!(
                    "in module {module}: fentry needs the module's split BTF, which the loader cannot use"
                ));
            }
        }
        None
    }

    /// One line per function and mode that `uses` it (`fentry`, `kprobe`) for doctor's hook
    /// list.
    fn hook_lines(
        &self,
        functions: &[KernelFunction],
        purposes: &[(&str, &str)],
        uses: impl Fn(KernelHookMode, &str) -> bool,
    ) -> Vec<HookAvailability> {
        let mut hooks = Vec::new();
        for (function, (_, purpose)) in functions.iter().zip(purposes) {
            for mode in [KernelHookMode::Fentry, KernelHookMode::Kprobe] {
                if !uses(mode, &function.name) {
                    continue;
                }
                let why_not = self.unavailable(mode, function);
                hooks.push(HookAvailability {
                    mode: mode.name().into(),
                    target: function.name.clone(),
                    purpose: purpose.to_string(),
                    available: why_not.is_none(),
                    reason: why_not.unwrap_or_default(),
                });
            }
        }
        hooks
    }
}

/// The netlink capture under `preference`: at the socket layer with the first mode that can
/// probe all the functions it needs of [`CAPTURE_FUNCTIONS`], else at the tracepoints
/// (`mode: None`); the tracepoint capture that serves when the socket layer is not used.
fn plan_capture(
    functions: &[KernelFunction],
    preference: HookPreference,
    support: ModeSupport,
) -> CapturePlan {
    let modes = preference.modes();
    let mut refusals = Vec::new();
    let mut chosen = None;
    for mode in modes {
        let mut why: Vec<String> = functions
            .iter()
            .filter(|f| capture_uses(*mode, &f.name))
            .filter_map(|f| support.unavailable(*mode, f))
            .collect();
        if why.is_empty() {
            chosen = Some(*mode);
            break;
        }
        why.dedup();
        refusals.push(format!("{mode}: {}", why.join(", ")));
    }
    let fallback = NetlinkCapture {
        mode: if support.sock_tracepoints {
            NetlinkCaptureMode::SockTracepoints
        } else {
            NetlinkCaptureMode::SyscallTracepoints
        },
        forced: modes.is_empty(),
        refusals,
    };
    let reason = match chosen {
        Some(mode) => format!(
            "socket layer with {mode}: only netlink sockets pay{}",
            if fallback.refusals.is_empty() {
                String::new()
            } else {
                format!(" ({})", fallback.refusals.join("; "))
            }
        ),
        None => fallback.to_string(),
    };
    CapturePlan {
        socket_layer: HandlerPlan {
            function: "netlink capture".into(),
            mode: chosen,
            reason,
        },
        fallback,
    }
}

/// What a trace does without a probe on kernel `function`.
fn without_probe(function: &str) -> &'static str {
    match function {
        "fib_route_seq_show" | "ipv6_route_seq_show" => {
            "reads of its route file are not seen (no other hook shows them)"
        }
        _ => "its traffic is still captured by the tracepoints",
    }
}

/// The hook per kernel handler under `preference`: fentry before kprobe for `auto`.
fn plan_handlers(
    functions: &[KernelFunction],
    preference: HookPreference,
    support: ModeSupport,
) -> Vec<HandlerPlan> {
    let modes = preference.modes();
    functions
        .iter()
        .map(|function| {
            let mut refusals = Vec::new();
            for mode in modes {
                match support.unavailable(*mode, function) {
                    None => {
                        let reason = if refusals.is_empty() {
                            format!("{mode} is available")
                        } else {
                            format!("{mode}, because {}", refusals.join("; "))
                        };
                        return HandlerPlan {
                            function: function.name.clone(),
                            mode: Some(*mode),
                            reason,
                        };
                    }
                    Some(why) => refusals.push(format!("{mode}: {why}")),
                }
            }
            HandlerPlan {
                function: function.name.clone(),
                mode: None,
                reason: if modes.is_empty() {
                    "--hooks tracepoint: syscall tracepoints only".into()
                } else {
                    format!(
                        "not probed ({}); {}",
                        refusals.join("; "),
                        without_probe(&function.name)
                    )
                },
            }
        })
        .collect()
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
        let caps =
            capability_check(&std::fs::read_to_string("/proc/self/status").unwrap_or_default());
        let lockdown = std::fs::read_to_string("/sys/kernel/security/lockdown")
            .ok()
            .and_then(|t| lockdown_mode(&t));
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let privileged = trace_blockers(root, &caps.missing, lockdown.as_deref()).is_empty();
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
        // A group made and closed at once: whether this kernel and these privileges allow it.
        let exec_hold = match super::exec_hold::ExecHold::new(super::exec_hold::DEFAULT_LIMIT) {
            Ok(_) => "yes (fanotify permission events: a program that starts during a trace waits at its exec until probed)".to_string(),
            Err(e) => format!("no ({e}): programs that start during a trace are probed after they start, so their first lookups can be missed"),
        };
        use aya::programs::ProgramType;
        use aya::sys::BpfHelper;
        let task_pt_regs = privileged
            && btf
            && helper_supported(ProgramType::TracePoint, BpfHelper::BPF_FUNC_task_pt_regs);
        let attach_cookie = privileged
            && helper_supported(ProgramType::KProbe, BpfHelper::BPF_FUNC_get_attach_cookie);
        let (major, minor) = FEXIT_RETURN_KERNEL;
        let fexit_return = aya::util::KernelVersion::current()
            .is_ok_and(|v| v >= aya::util::KernelVersion::new(major, minor, 0));
        let libcs = find_libcs(Path::new("/proc"));
        let (go_resolvers, static_resolvers) = running_executable_resolvers(Path::new("/proc"));
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
        for go in &go_resolvers {
            hooks.push(HookAvailability {
                mode: "uprobe".into(),
                target: format!("net.sortByRFC6724withSrcs@{} (entry, every RET)", go.path),
                purpose: format!(
                    "Go's own resolver ({}, {}{} processes): its sort's inputs and result",
                    go.version,
                    if go.cgo { "cgo-capable, " } else { "" },
                    go.processes
                ),
                available: uprobes && go.unsupported.is_none(),
                reason: match (&go.unsupported, uprobes) {
                    (Some(why), _) => why.clone(),
                    (None, false) => "no uprobe PMU (CONFIG_UPROBE_EVENTS)".into(),
                    (None, true) => String::new(),
                },
            });
        }
        for hook in &TRACEPOINT_HOOKS {
            let (category, name, purpose) = (hook.category, hook.name, hook.purpose);
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
        let cgroup_root = crate::host::cgroup_root::cgroup2_root();
        for hook in &CGROUP_HOOKS {
            hooks.push(HookAvailability {
                mode: "cgroup".into(),
                target: match &cgroup_root {
                    Ok(root) => format!("{}@{}", hook.attach, root.display()),
                    Err(_) => hook.attach.into(),
                },
                purpose: format!("{}: preferred to the syscall tracepoints", hook.purpose),
                available: cgroup_root.is_ok(),
                reason: cgroup_root
                    .as_ref()
                    .err()
                    .map(|e| format!("{e}; the syscall tracepoints serve instead"))
                    .unwrap_or_default(),
            });
        }
        hooks.extend(raw_tracepoint_hooks(&hooks));
        let support = ModeSupport {
            fentry,
            fentry_reason: &fentry_reason,
            fexit_return,
            kprobes,
            no_kallsyms: kallsyms.is_empty(),
            sock_tracepoints: sock_tracepoints_listed(&hooks),
        };
        let names: Vec<&str> = KERNEL_FUNCTIONS
            .iter()
            .chain(&CAPTURE_FUNCTIONS)
            .map(|(name, _)| *name)
            .collect();
        let mut functions = kallsyms_lookup_all(&kallsyms, &names);
        let capture_functions = functions.split_off(KERNEL_FUNCTIONS.len());
        hooks.extend(support.hook_lines(&functions, &KERNEL_FUNCTIONS, |_, _| true));
        hooks.extend(support.hook_lines(&capture_functions, &CAPTURE_FUNCTIONS, capture_uses));
        let capture_plan =
            plan_capture(&capture_functions, HookPreference::Auto, support).socket_layer;
        let handler_plan = plan_handlers(&functions, HookPreference::Auto, support);
        KernelFeatures {
            kernel: kernel_release(),
            btf,
            tracefs: tracefs_text,
            root,
            capabilities: caps.present,
            privileged,
            missing_capabilities: caps.missing,
            lockdown,
            uprobes,
            kprobes,
            fentry,
            fentry_reason,
            exec_hold,
            task_pt_regs,
            attach_cookie,
            fexit_return,
            libcs,
            go_resolvers,
            static_resolvers,
            hooks,
            handler_plan,
            functions,
            capture_functions,
            capture_plan,
            kallsyms_readable: !kallsyms.is_empty(),
        }
    }

    /// Why `--hooks preference` cannot be honoured on this kernel at all (`None`: it can).
    pub fn preference_unavailable(&self, preference: HookPreference) -> Option<String> {
        match preference {
            HookPreference::Fentry if !self.fentry => Some(format!(
                "fentry is not available on this kernel: {}",
                self.fentry_reason
            )),
            HookPreference::Kprobe if !self.kprobes => Some(
                "kprobes are not available on this kernel (no kprobe PMU, CONFIG_KPROBES unset)"
                    .into(),
            ),
            _ => None,
        }
    }

    fn support(&self) -> ModeSupport<'_> {
        ModeSupport {
            fentry: self.fentry,
            fentry_reason: &self.fentry_reason,
            fexit_return: self.fexit_return,
            kprobes: self.kprobes,
            no_kallsyms: !self.kallsyms_readable,
            sock_tracepoints: self.sock_tracepoints(),
        }
    }

    /// How netlink traffic is captured under `preference`.
    pub fn capture(&self, preference: HookPreference) -> CapturePlan {
        plan_capture(&self.capture_functions, preference, self.support())
    }

    /// The hook per kernel handler for `preference`.
    pub fn plan(&self, preference: HookPreference) -> Vec<HandlerPlan> {
        plan_handlers(&self.functions, preference, self.support())
    }

    /// What stops `trace` here (privileges, lockdown), each line saying what to do.
    pub fn trace_blockers(&self) -> Vec<String> {
        trace_blockers(
            self.root,
            &self.missing_capabilities,
            self.lockdown.as_deref(),
        )
    }

    /// What works only in part here and why (trace still runs): shown at the start of a trace.
    pub fn degradations(&self) -> Vec<String> {
        let mut notes = degradations(self.btf, self.uprobes);
        if self.privileged {
            notes.extend(helper_degradations(self.task_pt_regs, self.fexit_return));
        }
        notes
    }

    /// Whether the tool can trace anything at all here.
    pub fn can_trace(&self) -> bool {
        self.privileged && self.hooks.iter().any(|h| h.available)
    }

    /// Whether `sock:sock_send_length` and `sock_recv_length` exist (the capture can do without
    /// syscall tracepoints).
    pub fn sock_tracepoints(&self) -> bool {
        sock_tracepoints_listed(&self.hooks)
    }

    /// Whether a tracepoint is available.
    pub fn tracepoint_available(&self, category: &str, name: &str) -> bool {
        tracepoint_listed(&self.hooks, category, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(cap_eff: &str) -> String {
        format!("Name:\tnodeip-trace\nCapInh:\t0000000000000000\nCapEff:\t{cap_eff}\n")
    }

    #[test]
    fn root_has_every_capability_tracing_needs() {
        let check = capability_check(&status("000001ffffffffff"));
        assert!(check.missing.is_empty());
        assert_eq!(
            check.present,
            [
                "CAP_SYS_ADMIN",
                "CAP_PERFMON",
                "CAP_BPF",
                "CAP_SYS_RESOURCE"
            ]
        );
    }

    #[test]
    fn bpf_and_perfmon_are_enough_without_sys_admin() {
        // bits 38 and 39
        let check = capability_check(&status("000000c000000000"));
        assert!(check.missing.is_empty(), "{check:?}");
    }

    #[test]
    fn each_missing_capability_is_named() {
        assert_eq!(
            capability_check(&status("0000008000000000")).missing,
            ["CAP_PERFMON"]
        );
        assert_eq!(
            capability_check(&status("0000000000000000")).missing,
            ["CAP_BPF", "CAP_PERFMON"]
        );
        assert_eq!(
            capability_check("no CapEff line").missing,
            ["CAP_BPF", "CAP_PERFMON"]
        );
    }

    #[test]
    fn lockdown_mode_is_the_bracketed_word() {
        assert_eq!(
            lockdown_mode("[none] integrity confidentiality\n").as_deref(),
            Some("none")
        );
        assert_eq!(
            lockdown_mode("none integrity [confidentiality]\n").as_deref(),
            Some("confidentiality")
        );
        assert_eq!(lockdown_mode(""), None);
        assert_eq!(lockdown_mode("[unterminated"), None);
    }

    #[test]
    fn missing_btf_or_uprobes_degrade_with_a_reason_each() {
        assert!(degradations(true, true).is_empty());
        let notes = degradations(false, false);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("no kernel BTF"), "{notes:?}");
        assert!(notes[0].ends_with("everything else works"), "{notes:?}");
        assert!(
            notes[1].contains("getaddrinfo calls are not traced"),
            "{notes:?}"
        );
    }

    #[test]
    fn trace_blockers_name_what_is_missing_and_what_to_do() {
        assert!(trace_blockers(true, &[], Some("integrity")).is_empty());
        let missing = ["CAP_BPF".to_string(), "CAP_PERFMON".to_string()];
        let b = trace_blockers(false, &missing, None);
        assert_eq!(b.len(), 1);
        assert!(
            b[0].starts_with("not root and missing CAP_BPF, CAP_PERFMON"),
            "{b:?}"
        );
        assert!(b[0].contains("sudo nodeip-trace trace"), "{b:?}");
        let b = trace_blockers(true, &missing[1..], Some("confidentiality"));
        assert_eq!(b.len(), 2);
        assert!(
            b[0].starts_with("running as root but without CAP_PERFMON"),
            "{b:?}"
        );
        assert!(b[1].contains("lockdown=confidentiality"), "{b:?}");
    }

    /// fentry (or why not) and kprobes, with kallsyms readable.
    fn support(fentry: bool, fentry_reason: &str, kprobes: bool) -> ModeSupport<'_> {
        ModeSupport {
            fentry,
            fentry_reason,
            fexit_return: true,
            kprobes,
            no_kallsyms: false,
            sock_tracepoints: false,
        }
    }

    #[test]
    fn the_capture_mode_is_said_short_on_the_start_line_and_whole_elsewhere() {
        let fentry = NetlinkCapture::socket_layer(KernelHookMode::Fentry);
        assert_eq!(fentry.to_string(), "socket layer (fentry)");
        assert_eq!(fentry.mode.short_name(), "socket layer (fentry)");
        let sock = NetlinkCapture {
            mode: NetlinkCaptureMode::SockTracepoints,
            forced: false,
            refusals: vec!["fentry: refused".into(), "kprobe: none".into()],
        };
        assert_eq!(sock.mode.short_name(), "sock tracepoints");
        assert!(
            sock.to_string()
                .starts_with("sock tracepoints (sock_send_length")
                && sock
                    .to_string()
                    .ends_with(", because fentry: refused; kprobe: none"),
            "{sock}"
        );
        let forced = NetlinkCapture {
            mode: NetlinkCaptureMode::SyscallTracepoints,
            forced: true,
            refusals: vec!["sock tracepoints refused: EPERM".into()],
        };
        assert_eq!(forced.mode.short_name(), "syscall tracepoints");
        assert_eq!(
            forced.to_string(),
            "syscall tracepoints (--hooks tracepoint), because sock tracepoints refused: EPERM"
        );
    }

    #[test]
    fn the_tracepoint_capture_is_named_after_the_tracepoints_it_uses() {
        let with_sock = ModeSupport {
            sock_tracepoints: true,
            ..support(false, "refused", false)
        };
        let plan = plan_capture(&[], HookPreference::Tracepoint, with_sock).socket_layer;
        assert!(plan.mode.is_none());
        assert!(
            plan.reason
                .starts_with("sock tracepoints (sock_send_length/sock_recv_length"),
            "{}",
            plan.reason
        );
        let plan = plan_capture(&[], HookPreference::Tracepoint, support(false, "", false));
        assert_eq!(plan.fallback.mode, NetlinkCaptureMode::SyscallTracepoints);
        assert!(plan.fallback.forced);
        assert_eq!(
            plan.socket_layer.reason,
            "syscall tracepoints (--hooks tracepoint)"
        );
    }

    #[test]
    fn kallsyms_lookup_handles_suffixes_and_modules() {
        let k = "ffffffff81000000 T inet_rtm_getroute\nffffffff81000010 t rtnl_getlink.cold\n\
                 ffffffffc0a01230 t ip_vs_genl_set_cmd\t[ip_vs]\n";
        assert!(kallsyms_lookup(k, "inet_rtm_getroute").present);
        assert!(kallsyms_lookup(k, "rtnl_getlink").present);
        let ipvs = kallsyms_lookup(k, "ip_vs_genl_set_cmd");
        assert_eq!(ipvs.module.as_deref(), Some("ip_vs"));
        assert!(!kallsyms_lookup("", "inet_dump_ifaddr").present);
    }

    fn functions() -> Vec<KernelFunction> {
        let k = "ffffffff81000000 T inet_rtm_getroute\nffffffffc0a01230 t ip_vs_genl_set_cmd\t[ip_vs]\n";
        [
            "inet_rtm_getroute",
            "ip_vs_genl_set_cmd",
            "inet_dump_ifaddr",
        ]
        .iter()
        .map(|f| kallsyms_lookup(k, f))
        .collect()
    }

    #[test]
    fn auto_prefers_fentry_then_kprobe_and_says_why() {
        let plan = plan_handlers(&functions(), HookPreference::Auto, support(true, "", true));
        assert_eq!(plan[0].mode, Some(KernelHookMode::Fentry));
        assert_eq!(plan[0].reason, "fentry is available");
        assert_eq!(plan[1].mode, Some(KernelHookMode::Kprobe));
        assert!(
            plan[1].reason.contains("module ip_vs"),
            "{}",
            plan[1].reason
        );
        assert_eq!(plan[2].mode, None);
        assert!(
            plan[2].reason.contains("not in this kernel"),
            "{}",
            plan[2].reason
        );
        assert!(
            plan[2].reason.contains("captured by the tracepoints"),
            "{}",
            plan[2].reason
        );
    }

    #[test]
    fn this_machine_like_kernel_falls_back_to_tracepoints() {
        let plan = plan_handlers(
            &functions(),
            HookPreference::Auto,
            support(false, "tracing program load refused: EPERM", false),
        );
        assert!(plan.iter().all(|p| p.mode.is_none()));
        assert!(
            plan[0]
                .reason
                .contains("fentry: tracing program load refused"),
            "{}",
            plan[0].reason
        );
        assert!(
            plan[0].reason.contains("kprobe: no kprobes"),
            "{}",
            plan[0].reason
        );
    }

    /// The four socket-layer capture functions, all built in.
    fn capture_functions_present() -> Vec<KernelFunction> {
        let k = "1 t netlink_sendmsg\n2 t netlink_recvmsg\n3 T netlink_unicast\n4 T skb_recv_datagram\n";
        CAPTURE_FUNCTIONS
            .iter()
            .map(|(f, _)| kallsyms_lookup(k, f))
            .collect()
    }

    #[test]
    fn capture_needs_every_function_in_one_mode() {
        let all = capture_functions_present();
        let plan = plan_capture(&all, HookPreference::Auto, support(true, "", true)).socket_layer;
        assert_eq!(plan.mode, Some(KernelHookMode::Fentry));
        let plan =
            plan_capture(&all, HookPreference::Auto, support(false, "EPERM", true)).socket_layer;
        assert_eq!(plan.mode, Some(KernelHookMode::Kprobe));
        assert!(plan.reason.contains("fentry: EPERM"), "{}", plan.reason);
        let plan =
            plan_capture(&all[..3], HookPreference::Auto, support(true, "", true)).socket_layer;
        assert_eq!(plan.mode, Some(KernelHookMode::Fentry));
        // fentry needs only netlink_unicast and skb_recv_datagram; kprobes need all four.
        let no_sendmsg = [kallsyms_lookup("", "netlink_sendmsg")]
            .into_iter()
            .chain(all[1..].iter().cloned())
            .collect::<Vec<_>>();
        let plan =
            plan_capture(&no_sendmsg, HookPreference::Auto, support(true, "", true)).socket_layer;
        assert_eq!(plan.mode, Some(KernelHookMode::Fentry));
        let plan =
            plan_capture(&no_sendmsg, HookPreference::Kprobe, support(true, "", true)).socket_layer;
        assert_eq!(plan.mode, None);
        let missing = kallsyms_lookup("", "netlink_unicast");
        let plan =
            plan_capture(&[missing], HookPreference::Auto, support(true, "", true)).socket_layer;
        assert_eq!(plan.mode, None);
        assert!(
            plan.reason.starts_with("syscall tracepoints, because"),
            "{}",
            plan.reason
        );
        let plan =
            plan_capture(&all, HookPreference::Tracepoint, support(true, "", true)).socket_layer;
        assert_eq!(plan.mode, None);
    }

    #[test]
    fn without_bpf_get_func_ret_the_capture_leaves_fentry_for_kprobe() {
        let all = capture_functions_present();
        let before_5_17 = ModeSupport {
            fexit_return: false,
            ..support(true, "", true)
        };
        let plan = plan_capture(&all, HookPreference::Auto, before_5_17).socket_layer;
        assert_eq!(plan.mode, Some(KernelHookMode::Kprobe));
        assert!(plan.reason.contains("bpf_get_func_ret"), "{}", plan.reason);
        // The handlers' fexits read the return value after their known arguments.
        let handlers = plan_handlers(&functions(), HookPreference::Auto, before_5_17);
        assert_eq!(handlers[0].mode, Some(KernelHookMode::Fentry));
        assert_eq!(helper_degradations(false, false).len(), 2);
        assert!(helper_degradations(true, true).is_empty());
    }

    #[test]
    fn forced_modes_use_only_that_mode() {
        let kprobe = plan_handlers(
            &functions(),
            HookPreference::Kprobe,
            support(true, "", true),
        );
        assert_eq!(kprobe[0].mode, Some(KernelHookMode::Kprobe));
        let fentry = plan_handlers(
            &functions(),
            HookPreference::Fentry,
            support(true, "", true),
        );
        assert_eq!(fentry[1].mode, None);
        let none = plan_handlers(
            &functions(),
            HookPreference::Tracepoint,
            support(true, "", true),
        );
        assert!(none.iter().all(|p| p.mode.is_none()));
    }
}
