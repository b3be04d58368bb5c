//! Loads the embedded eBPF object with the start-up filters as globals, attaches every program
//! the kernel allows (recording the hook chosen and why others were not), and gives access to the
//! ring buffer, the counters and the maps userspace feeds (traced pids, known netlink sockets).
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use crate::host::go_binary::{
    GoBinary, SourcesLayout, GO_CGO_GETADDRINFO, GO_HOST_FUNCTION, GO_LOOKUP_FUNCTION,
    GO_LOOKUP_IP_FUNCTION, GO_SORT_FUNCTION,
};
use crate::host::libc_locator::LibcKind;
use crate::probe::hooks::{
    tracepoints_of, CgroupHook, HookError, HookGroup, HookMode, KernelAttachError, KernelHookMode,
    TracepointHook, CGROUP_HOOKS,
};

use aya::maps::{HashMap as BpfHashMap, MapData, PerCpuArray};
use aya::programs::uprobe::UProbeScope;
use aya::programs::{CgroupAttachMode, CgroupSockAddr, Program, RawTracePoint, TracePoint, UProbe};
use aya::Btf;
use aya::{Ebpf, EbpfLoader};
use nodeip_trace_common::counter;

use super::features::{
    CapturePlan, HandlerPlan, HookPreference, KernelFeatures, NetlinkCapture, NetlinkCaptureMode,
};
use super::ProbeError;
use crate::host::libc_locator::LibcTarget;
use crate::host::netlink_sockets::NetlinkSocket;

/// The eBPF object built by build.rs.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/nodeip-trace"));

/// The program type the netlink capture runs as, and so its chunk program and tail-call array
/// (a tail call stays within one program type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkPrograms {
    /// Classic tracepoints (the syscall tracepoints, or the sock tracepoints without BTF).
    Classic,
    /// Raw tracepoints (the sock tracepoints, with the BTF's socket offsets).
    Raw,
}

impl ChunkPrograms {
    fn program(self) -> &'static str {
        match self {
            ChunkPrograms::Classic => "netlink_chunk",
            ChunkPrograms::Raw => "netlink_chunk_raw",
        }
    }

    fn array(self) -> &'static str {
        match self {
            ChunkPrograms::Classic => "CHUNK_PROGRAMS",
            ChunkPrograms::Raw => "RAW_CHUNK_PROGRAMS",
        }
    }

    fn mode(self) -> HookMode {
        match self {
            ChunkPrograms::Classic => HookMode::Tracepoint,
            ChunkPrograms::Raw => HookMode::RawTracepoint,
        }
    }
}

/// Which groups of BTF offsets were found (each enables a cheaper hook).
#[derive(Clone, Copy, Debug)]
struct OffsetsKnown {
    /// `socket_offset::*`: the socket-layer netlink capture.
    socket: bool,
    /// `route_offset::*`: route lookups at the raw tracepoints.
    route: bool,
}

/// What to trace, decided before load.
#[derive(Clone, Debug)]
pub struct TraceConfig {
    /// Only these thread groups (and, with `follow_forks`, their descendants); empty = all.
    pub pids: Vec<u32>,
    /// Add children of traced processes to the pid filter.
    pub follow_forks: bool,
    /// Only tasks with this comm.
    pub comm: Option<String>,
    /// Bitmask of netlink protocols to capture (bit N = protocol N).
    pub netlink_protocols: u64,
    /// Ring buffer size in bytes (power of two, multiple of the page size).
    pub ring_buffer_bytes: u32,
    /// Attach the getaddrinfo uprobes.
    pub getaddrinfo: bool,
    /// Capture netlink traffic.
    pub netlink: bool,
    /// Record route lookups.
    pub route_lookups: bool,
    /// Use the pid filter even when `pids` is empty (a COMMAND is added after load).
    pub filter_by_pid: bool,
    /// Which hooks the kernel handler probes may use.
    pub hooks: HookPreference,
    /// Probe the kernel's netlink handlers (route get, address and link dumps, IPVS commands)
    /// as `hooks` allows; off, none is attached (their traffic is still captured).
    pub kernel_handlers: bool,
}

/// The ring buffer's default size in MiB. A drain thread empties the ring into the consumer's
/// queue as often as its fill rate needs (an eighth of the ring between passes, at most 8 ms
/// apart at this size), and the consumer between batches of 64 records, so the ring only
/// has to hold what arrives in that time, plus what waits once the queue is full: under a
/// 100,000-pair `ip -batch` `route get` burst 4 and 8 MiB both lost nothing in every output. A ring and
/// queue of 8 + 48 MiB (the ring then mapped twice) reached 74–82 MiB of RSS under `load_gen`'s
/// faster burst (see `source::live::QUEUE_MAX_BYTES` for the budget).
pub const DEFAULT_RING_BUFFER_MIB: u32 = 4;

impl Default for TraceConfig {
    fn default() -> Self {
        Self {
            pids: Vec::new(),
            follow_forks: false,
            comm: None,
            netlink_protocols: (1 << 0) | (1 << 16),
            ring_buffer_bytes: DEFAULT_RING_BUFFER_MIB << 20,
            getaddrinfo: true,
            netlink: true,
            route_lookups: true,
            filter_by_pid: false,
            hooks: HookPreference::Auto,
            kernel_handlers: true,
        }
    }
}

/// One hook as chosen at start-up.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AttachedHook {
    /// Program name in the eBPF object.
    pub program: String,
    /// How it is attached ([`HookMode::Off`] for a kernel handler left unprobed).
    pub mode: HookMode,
    /// Attach target.
    pub target: String,
    /// Attached, or why it is not.
    pub status: Result<(), HookError>,
}

impl AttachedHook {
    /// One-line description for headers and logs.
    pub fn describe(&self) -> String {
        match &self.status {
            Ok(()) => format!("{} {} {}", self.program, self.mode, self.target),
            Err(e) => format!("{} {} {} FAILED: {e}", self.program, self.mode, self.target),
        }
    }
}

/// Why the sock tracepoints could not capture netlink: the raw programs' refusal (when tried)
/// and the classic ones'.
#[derive(Debug, thiserror::Error)]
#[error("sock tracepoints refused: {}{classic}", raw.as_ref().map(|e| format!("raw: {e}; ")).unwrap_or_default())]
pub struct SockCaptureRefused {
    /// The raw tracepoint programs' refusal, when they were tried.
    pub raw: Option<ProbeError>,
    /// The classic tracepoint programs' refusal.
    #[source]
    pub classic: ProbeError,
}

/// Where a gai.conf probe goes in glibc: the program, the function it stands for, and a file
/// offset when not at the function's own entry.
struct GaiConfPoint {
    program: &'static str,
    symbol: &'static str,
    offset: Option<u64>,
}

/// glibc's `fopen` and `getline` probes for gai.conf. Each is a stub in glibc 2.36 (`mov
/// $1,%edx; jmp __fopen_internal`, `mov %rdx,%rcx; mov $10,%edx; jmp __getdelim`): a uprobe on
/// a stub's `mov` is single-stepped out of line, which cost 50–100 µs per `fopen` in this
/// project's VM (every process of the node that opens a file with stdio paid it; getaddrinfo
/// 15× slower), so the probe goes where the stub jumps (a `push`, which the kernel emulates),
/// with the stream read from the register the stub moved it to. The symbols themselves where
/// the file cannot be read or the functions are not such stubs.
fn gai_conf_points(libc: &Path) -> [GaiConfPoint; 2] {
    use iced_x86::Register;
    let elf = crate::host::mapped_file::MappedFile::open(libc)
        .ok()
        .and_then(|file| crate::host::elf::ElfImage::parse(file).ok());
    let jump = |symbol: &str| elf.as_ref().and_then(|e| e.tail_jump(symbol));
    let fopen = jump("fopen").filter(|j| !j.written.contains(&Register::RDI));
    let getline = jump("getline").filter(|j| {
        j.rcx_from_rdx
            && ![Register::RDI, Register::RSI]
                .iter()
                .any(|r| j.written.contains(r))
    });
    [
        GaiConfPoint {
            program: "gai_conf_fopen",
            symbol: "fopen",
            offset: fopen.map(|j| j.target_offset),
        },
        match getline {
            Some(j) => GaiConfPoint {
                program: "gai_conf_getdelim",
                symbol: "getline",
                offset: Some(j.target_offset),
            },
            None => GaiConfPoint {
                program: "gai_conf_getline",
                symbol: "getline",
                offset: None,
            },
        },
    ]
}

/// Loaded and attached eBPF programs.
pub struct LiveTracer {
    ebpf: Ebpf,
    /// Every hook tried, in order.
    pub hooks: Vec<AttachedHook>,
    /// The mode each kernel handler ended up with (`fentry`, `kprobe`, or `off`), by function.
    pub handler_modes: std::collections::BTreeMap<String, String>,
    /// How netlink traffic is captured, and why not better (`None`: netlink is not traced).
    pub netlink_capture: Option<NetlinkCapture>,
    /// Every uprobe attached, for [`LiveTracer::detach_uprobes`] and
    /// [`LiveTracer::detach_file`].
    uprobe_links: Vec<UprobeLink>,
}

/// One uprobe attached.
struct UprobeLink {
    /// Its program's name.
    program: String,
    /// The link, as the program knows it.
    link: aya::programs::uprobe::UProbeLinkId,
    /// The file it is in: (device, inode), when stat could tell.
    file: Option<(u64, u64)>,
}

/// Threads that detach uprobes at once when a trace ends. Each detach waits for an RCU grace
/// period (two on 6.18: `synchronize_rcu_tasks_trace`, about 0.1 s each here); waits made at
/// the same time share their grace periods, so a trace that probed 100 Go programs ends in
/// seconds instead of minutes.
const DETACH_THREADS: usize = 64;

fn raise_memlock() {
    let lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit with a valid struct; failure only matters on kernels < 5.11.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) };
}

/// The open-files limit the tracer started with, when it raised it ([`raise_open_files`]): the
/// traced command gets it back (a program written for `select` may break above 1024).
static STARTED_OPEN_FILES: std::sync::OnceLock<libc::rlimit> = std::sync::OnceLock::new();

/// Raises the tracer's soft open-files limit to its hard limit. Each probed program keeps its
/// probe links open while it can run (9 descriptors per Go program; released once its file is
/// deleted and no process runs it): at the usual soft limit of 1024, a node running a hundred
/// distinct Go programs would leave the next ones unprobed (`bpf_link_create failed`), as a
/// 30-minute guest soak did before the release.
fn raise_open_files() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0
        || lim.rlim_cur >= lim.rlim_max
    {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit with a valid struct; on failure the limit stays as it was.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        let _ = STARTED_OPEN_FILES.set(lim);
    }
}

/// The open-files limit to give a command the tracer starts, when the tracer raised its own.
pub fn started_open_files_limit() -> Option<libc::rlimit> {
    STARTED_OPEN_FILES.get().copied()
}

/// Offset of `child_pid` in `sched:sched_process_fork`, from its format file.
fn fork_child_pid_offset(tracefs: Option<&Path>) -> u32 {
    tracepoint_field_offset(tracefs, "sched", "sched_process_fork", "child_pid").unwrap_or(20)
}

/// Offsets of `root`, `id` and `path` in `cgroup:cgroup_mkdir`'s records, from its format file:
/// the defaults (every kernel's since 5.5) where the file is unreadable, and past the
/// program's bound (it then sends nothing) where `id` is not 64 bits (kernels before 5.5).
fn cgroup_mkdir_offsets(tracefs: Option<&Path>) -> [u32; 3] {
    let Some(layout) = tracepoint_layout(tracefs, "cgroup", "cgroup_mkdir") else {
        return [8, 16, 24];
    };
    match (
        layout.field("root"),
        layout.field("id"),
        layout.field("path"),
    ) {
        (Some((root, _)), Some((id, 8)), Some((path, _))) => [root as u32, id as u32, path as u32],
        _ => [u32::MAX; 3],
    }
}

/// The record layout of tracepoint `category:name`, from its format file.
fn tracepoint_layout(
    tracefs: Option<&Path>,
    category: &str,
    name: &str,
) -> Option<crate::decode::tracepoint_format::TracepointLayout> {
    tracefs
        .and_then(|r| super::tracefs::event_format(r, category, name))
        .map(|f| crate::decode::tracepoint_format::TracepointLayout::parse(&f))
}

/// Where `field` is in the records of tracepoint `category:name`, from its format file.
fn tracepoint_field_offset(
    tracefs: Option<&Path>,
    category: &str,
    name: &str,
    field: &str,
) -> Option<u32> {
    tracepoint_layout(tracefs, category, name)
        .and_then(|l| l.field(field))
        .map(|(off, _)| off as u32)
}

/// Turns aya's map error into ours, naming the map.
fn map_error(map: &str) -> impl Fn(aya::maps::MapError) -> ProbeError + '_ {
    move |source| ProbeError::Map {
        map: map.into(),
        source: Box::new(source),
    }
}

/// Turns aya's program error into ours, naming the program and its target.
fn attach_error<'a>(
    program: &'a str,
    target: &'a str,
) -> impl Fn(aya::programs::ProgramError) -> ProbeError + 'a {
    move |source| ProbeError::Attach {
        program: program.into(),
        target: target.into(),
        source: Box::new(source),
    }
}

impl LiveTracer {
    /// Loads the programs with `config` and attaches what `features` says is available.
    pub fn start(
        config: &TraceConfig,
        features: &KernelFeatures,
        libcs: &[LibcTarget],
    ) -> Result<Self, ProbeError> {
        let blockers = features.trace_blockers();
        if !blockers.is_empty() {
            return Err(ProbeError::CannotTrace { blockers });
        }
        if config.netlink {
            if let Some(reason) = features.preference_unavailable(config.hooks) {
                return Err(ProbeError::HookModeUnavailable {
                    mode: config.hooks.name(),
                    reason,
                });
            }
        }
        raise_memlock();
        raise_open_files();
        let tracefs = super::tracefs::find();
        let filter_tgids: u32 = (config.filter_by_pid || !config.pids.is_empty()) as u32;
        let follow: u32 = (config.follow_forks && filter_tgids == 1) as u32;
        let mut comm = [0u8; 16];
        if let Some(c) = &config.comm {
            let b = c.as_bytes();
            comm[..b.len().min(15)].copy_from_slice(&b[..b.len().min(15)]);
        }
        let filter_comm: u32 = config.comm.is_some() as u32;
        let self_tgid: u32 = std::process::id();
        let confirm: u32 = features.tracepoint_available("sock", "sock_send_length") as u32;
        let fork_off = fork_child_pid_offset(tracefs.as_deref());
        let cgroup_mkdir_offsets = cgroup_mkdir_offsets(tracefs.as_deref());
        let route_dport_offsets: [u32; 2] = [
            tracepoint_field_offset(tracefs.as_deref(), "fib", "fib_table_lookup", "dport")
                .unwrap_or(0),
            tracepoint_field_offset(tracefs.as_deref(), "fib6", "fib6_table_lookup", "dport")
                .unwrap_or(0),
        ];
        let offsets = crate::host::kernel_btf::KernelOffsets::running();
        let netns_offsets = offsets.netns.unwrap_or_default();
        let socket_offsets = offsets.socket;
        let route_offsets = offsets.route;
        let parent_offsets = offsets.parent.unwrap_or_default();
        let (handler_offsets, handler_known) = offsets.handler;
        // No CO-RE relocations in our object (offsets come as globals above), so aya's own parse
        // of the kernel's BTF (≈ 20 MiB of heap for a 5 MB vmlinux BTF) is skipped; fentry
        // attaches parse it when a plan uses fentry.
        let ebpf = EbpfLoader::new()
            .btf(None)
            .override_global("FILTER_TGIDS", &filter_tgids, true)
            .override_global("FILTER_COMM", &filter_comm, true)
            .override_global("FILTER_COMM_NAME", &comm, true)
            .override_global("SELF_TGID", &self_tgid, true)
            .override_global("NETLINK_PROTOCOLS", &config.netlink_protocols, true)
            .override_global("CONFIRM_WITH_SOCK_TP", &confirm, true)
            .override_global("FORK_CHILD_PID_OFFSET", &fork_off, true)
            .override_global("CGROUP_MKDIR_OFFSETS", &cgroup_mkdir_offsets, true)
            .override_global("ROUTE_DPORT_OFFSETS", &route_dport_offsets, true)
            .override_global("FOLLOW_FORKS", &follow, true)
            .override_global("NETNS_OFFSETS", &netns_offsets, true)
            .override_global("HANDLER_OFFSETS", &handler_offsets, true)
            .override_global("HANDLER_OFFSETS_KNOWN", &handler_known, true)
            .override_global("PARENT_OFFSETS", &parent_offsets, true)
            .override_global("SOCKET_OFFSETS", &socket_offsets.unwrap_or_default(), true)
            .override_global("ROUTE_OFFSETS", &route_offsets.unwrap_or_default(), true)
            .override_global("BATCH_WAKEUPS", &1u32, true)
            // Helpers older kernels lack (5.10): the programs skip their calls at 0.
            .override_global("TASK_PT_REGS", &u32::from(features.task_pt_regs), true)
            .map_max_entries("EVENTS", config.ring_buffer_bytes)
            .load(EBPF_OBJECT)
            .map_err(|e| ProbeError::Load(Box::new(e)))?;
        let mut tracer = LiveTracer {
            ebpf,
            hooks: Vec::new(),
            handler_modes: Default::default(),
            netlink_capture: None,
            uprobe_links: Vec::new(),
        };
        for pid in &config.pids {
            tracer.add_traced_pid(*pid)?;
        }
        let offsets_known = OffsetsKnown {
            socket: socket_offsets.is_some(),
            route: route_offsets.is_some(),
        };
        tracer.attach_all(config, features, libcs, offsets_known)?;
        if !tracer.hooks.iter().any(|h| h.status.is_ok()) {
            return Err(ProbeError::NothingAttached);
        }
        Ok(tracer)
    }

    fn attach_all(
        &mut self,
        config: &TraceConfig,
        features: &KernelFeatures,
        libcs: &[LibcTarget],
        offsets_known: OffsetsKnown,
    ) -> Result<(), ProbeError> {
        let capture_plan = features.capture(config.hooks);
        // No kernel handler probes: an empty plan.
        let handler_plan = if config.kernel_handlers {
            features.plan(config.hooks)
        } else {
            Vec::new()
        };
        // fentry/fexit need the kernel's BTF, parsed once (only when a plan uses fentry).
        let wants_fentry = config.netlink
            && std::iter::once(&capture_plan.socket_layer)
                .chain(&handler_plan)
                .any(|p| p.mode == Some(KernelHookMode::Fentry));
        let btf = if wants_fentry {
            Btf::from_sys_fs().ok()
        } else {
            None
        };
        let mut sock_capture = None;
        if config.netlink {
            let capture = match self.attach_capture(
                &capture_plan,
                features,
                config.hooks,
                offsets_known.socket,
                btf.as_ref(),
            ) {
                Ok(mode) => NetlinkCapture::socket_layer(mode),
                Err(tried) => {
                    let mut capture = capture_plan.fallback;
                    capture.refusals.extend(tried);
                    match self.attach_sock_capture(features, offsets_known.socket) {
                        Some(Ok(chunks)) => {
                            capture.mode = NetlinkCaptureMode::SockTracepoints;
                            sock_capture = Some(chunks);
                        }
                        Some(Err(refused)) => {
                            capture.mode = NetlinkCaptureMode::SyscallTracepoints;
                            capture.refusals.push(refused.to_string());
                        }
                        None => capture.mode = NetlinkCaptureMode::SyscallTracepoints,
                    }
                    capture
                }
            };
            self.netlink_capture = Some(capture);
        }
        let socket_layer = matches!(
            self.netlink_capture,
            Some(NetlinkCapture {
                mode: NetlinkCaptureMode::SocketLayer(_),
                ..
            })
        );
        if config.netlink && !socket_layer {
            let chunks = sock_capture.unwrap_or(ChunkPrograms::Classic);
            let status = self.install_chunk_program(chunks).map_err(HookError::from);
            self.hooks.push(AttachedHook {
                program: chunks.program().into(),
                mode: HookMode::TailCall,
                target: format!("{}[0]", chunks.array()),
                status,
            });
        }
        let sock_capture = sock_capture.is_some();
        // The tracepoints, from the hook table, group by group as the configuration asks.
        let mut tps: Vec<&TracepointHook> = tracepoints_of(HookGroup::Processes).collect();
        if config.netlink && !socket_layer && !sock_capture {
            tps.extend(tracepoints_of(HookGroup::NetlinkSyscalls));
        }
        if config.netlink {
            tps.extend(tracepoints_of(HookGroup::NetlinkErrors));
        }
        if config.route_lookups {
            // Raw tracepoints where the BTF gave the offsets: a routed packet then costs one
            // port read, not the classic tracepoint's record. The classic one otherwise.
            // Each raw program is named after its tracepoint, with `_raw`.
            for hook in tracepoints_of(HookGroup::RouteLookups) {
                let (category, name) = (hook.category, hook.name);
                if offsets_known.route
                    && features.tracepoint_available(category, name)
                    && self.attach_raw_hook(&format!("{name}_raw"), name)
                {
                    continue;
                }
                tps.push(hook);
            }
        }
        // connect() marks a source-address decision (its route lookups are kept), and is one of
        // the resolvers' sort probes inside getaddrinfo: at the cgroup hooks where they attach
        // (only socket calls pay), else at the syscall tracepoints (every system call pays).
        let mut groups = Vec::new();
        if config.getaddrinfo || config.route_lookups {
            groups.push(HookGroup::Decisions);
        }
        if config.getaddrinfo {
            groups.push(HookGroup::ResolverSort);
        }
        if !groups.is_empty() && !self.attach_cgroup_hooks(&groups) {
            for group in groups {
                tps.extend(tracepoints_of(group));
            }
        }
        for hook in tps {
            let (program, category, name) = (hook.program, hook.category, hook.name);
            let target = format!("{category}:{name}");
            let status = if !features.tracepoint_available(category, name) {
                Err(HookError::Unavailable(
                    "tracepoint not available on this kernel".into(),
                ))
            } else {
                self.attach_tracepoint(program, category, name)
                    .map_err(HookError::from)
            };
            self.hooks.push(AttachedHook {
                program: program.into(),
                mode: HookMode::Tracepoint,
                target,
                status,
            });
        }
        if config.netlink {
            self.attach_handlers(&handler_plan, config.hooks, features, btf.as_ref());
        }
        if config.getaddrinfo {
            for libc in libcs {
                let _ = self.attach_libc(&libc.path, &libc.path, libc.kind);
            }
        }
        Ok(())
    }

    /// Attaches the getaddrinfo uprobe and uretprobe to the libc at `path` (also during a trace,
    /// for libcs of processes that start later); the outcome is recorded in `hooks`.
    ///
    /// The probes carry `kind` as their attach cookie, so each record says which resolver made
    /// the call; where the kernel has no attach cookies (before 5.15) they attach without one and
    /// records say "unknown". `shown` is the file's name in hook lists (`path` may be a
    /// `/proc/self/fd/N` that holds it open).
    pub fn attach_libc(
        &mut self,
        path: &Path,
        shown: &Path,
        kind: LibcKind,
    ) -> Result<(), ProbeError> {
        self.attach_getaddrinfo(path, shown, kind, None)
    }

    /// As [`LiveTracer::attach_libc`], at file offset `offset` of `path`: a `getaddrinfo`
    /// found without a symbol (a stripped static program's, through its cgo glue).
    pub fn attach_getaddrinfo_at(
        &mut self,
        path: &Path,
        shown: &Path,
        kind: LibcKind,
        offset: u64,
    ) -> Result<(), ProbeError> {
        self.attach_getaddrinfo(path, shown, kind, Some(offset))
    }

    fn attach_getaddrinfo(
        &mut self,
        path: &Path,
        shown: &Path,
        kind: LibcKind,
        offset: Option<u64>,
    ) -> Result<(), ProbeError> {
        // One return program per C library (the record names it), not an attach cookie:
        // kernels before 5.15 have none.
        let return_program = match kind {
            LibcKind::Glibc => "getaddrinfo_return_glibc",
            LibcKind::Musl => "getaddrinfo_return_musl",
        };
        let mut result = Ok(());
        for (program, mode) in [
            (return_program, HookMode::Uretprobe),
            ("getaddrinfo_entry", HookMode::Uprobe),
        ] {
            let target = format!("getaddrinfo@{}", shown.display());
            let status =
                self.attach_listed_uprobe(program, mode, (path, target), "getaddrinfo", offset);
            if let Err(e) = status {
                result = Err(e);
                break;
            }
        }
        // glibc opens /etc/gai.conf with `fopen` and reads it with `getline` inside
        // getaddrinfo: its contents are taken
        // from the stream's buffer there (see the eBPF `gai_conf` module). Without it the
        // file is read through /proc/PID/root at the first call, which a short-lived process
        // may not outlive; its getaddrinfo is probed all the same.
        if result.is_ok() && kind == LibcKind::Glibc && offset.is_none() {
            // `fopen` says the call opened gai.conf (or failed to); `getline` reads it.
            for point in gai_conf_points(path) {
                let target = match point.offset {
                    Some(_) => format!("{}@{} (where it jumps)", point.symbol, shown.display()),
                    None => format!("{}@{}", point.symbol, shown.display()),
                };
                let _ = self.attach_listed_uprobe(
                    point.program,
                    HookMode::Uprobe,
                    (path, target),
                    point.symbol,
                    point.offset,
                );
            }
        }
        result
    }

    /// Attaches Go's own resolver probes to the Go executable `binary` read from `path`: plain
    /// uprobes at every RET of `net.sortByRFC6724withSrcs`, at its entry (the program of the
    /// binary's sources layout), at the entry of `goLookupIPCNAMEOrder` (the name), at the entry
    /// and every RET of `goLookupHostOrder` (`LookupHost`'s unsorted hosts-file answers) — never
    /// uretprobes — and, in cgo builds, at the entry of the C wrapper `net._C2func_getaddrinfo`
    /// calls (so the C library's getaddrinfo says it was Go's). Returns the Go version probed; an error when
    /// the binary's resolver cannot be probed (the cgo mark is attached even then).
    pub fn attach_go(
        &mut self,
        path: &Path,
        shown: &Path,
        binary: &GoBinary,
    ) -> Result<String, ProbeError> {
        let refuse = |reason: String| ProbeError::GoResolver {
            path: shown.display().to_string(),
            reason,
        };
        if let Some(cgo) = binary.probes(GO_CGO_GETADDRINFO) {
            // At the C wrapper the Go glue calls, on the thread that then calls getaddrinfo;
            // the glue's own entry only when the wrapper cannot be found (a goroutine may move
            // to another thread between the two).
            let (offset, function) = match binary.cgo_wrapper_offset() {
                Ok(offset) => (offset, "the cgo wrapper of net._C2func_getaddrinfo"),
                Err(_) => (cgo.entry_offset, GO_CGO_GETADDRINFO),
            };
            self.attach_go_at((path, shown), "go_cgo_getaddrinfo", offset, function)?;
        }
        let version = binary.version.clone().unwrap_or_default();
        let layout = SourcesLayout::of(&version);
        let sort = binary
            .probes(GO_SORT_FUNCTION)
            .ok_or_else(|| refuse(format!("{GO_SORT_FUNCTION} not found")))?;
        if sort.ret_offsets.is_empty() {
            return Err(refuse(format!("no RET found in {GO_SORT_FUNCTION}")));
        }
        // A version whose sources layout is not known: its sorts are shown, unexplained.
        let entry_program = match layout {
            Some(SourcesLayout::IpSlices) => "go_sort_entry_ip",
            Some(SourcesLayout::NetipAddrs) => "go_sort_entry_netip",
            None => "go_sort_entry_unknown",
        };
        let mut steps: Vec<(&str, u64, &str)> = sort
            .ret_offsets
            .iter()
            .map(|o| ("go_sort_return", *o, GO_SORT_FUNCTION))
            .collect();
        steps.push((entry_program, sort.entry_offset, GO_SORT_FUNCTION));
        if let Some(lookup) = binary.probes(GO_LOOKUP_FUNCTION) {
            steps.push(("go_lookup_entry", lookup.entry_offset, GO_LOOKUP_FUNCTION));
            // Lookups no sort saw (zero or one address, an error), at the RETs of the small
            // function around it (one or two RETs, where goLookupIPCNAMEOrder has up to eight).
            if let Some(outer) = binary.probes(GO_LOOKUP_IP_FUNCTION) {
                steps.extend(
                    outer
                        .ret_offsets
                        .iter()
                        .map(|o| ("go_lookup_return", *o, GO_LOOKUP_IP_FUNCTION)),
                );
            }
        }
        // Linked in only when the program calls LookupHost (or something that does).
        if let Some(host) = binary.probes(GO_HOST_FUNCTION) {
            if !host.ret_offsets.is_empty() {
                steps.extend(
                    host.ret_offsets
                        .iter()
                        .map(|o| ("go_host_return", *o, GO_HOST_FUNCTION)),
                );
                steps.push(("go_host_entry", host.entry_offset, GO_HOST_FUNCTION));
            }
        }
        for (program, offset, function) in steps {
            self.attach_go_at((path, shown), program, offset, function)?;
        }
        Ok(match layout {
            Some(_) => version,
            None => format!("{version}, {}", SourcesLayout::unknown_note(&version)),
        })
    }

    /// Attaches the uprobe `program` at file offset `offset` (in `function`) of the Go
    /// executable at `path` (named `shown` in `hooks`, where the outcome is recorded).
    fn attach_go_at(
        &mut self,
        (path, shown): (&Path, &Path),
        program: &str,
        offset: u64,
        function: &str,
    ) -> Result<(), ProbeError> {
        let target = format!("{function}@{}+{offset:#x}", shown.display());
        self.attach_listed_uprobe(
            program,
            HookMode::Uprobe,
            (path, target),
            function,
            Some(offset),
        )
    }

    /// Attaches each kernel handler as `plan` says; under `auto`, a function whose fentry
    /// attach fails (not traceable, no BTF for it) falls back to kprobe.
    fn attach_handlers(
        &mut self,
        plan: &[HandlerPlan],
        preference: HookPreference,
        features: &KernelFeatures,
        btf: Option<&Btf>,
    ) {
        for step in plan {
            let function = step.function.as_str();
            let Some(mode) = step.mode else {
                self.handler_modes.insert(function.into(), "off".into());
                self.hooks.push(AttachedHook {
                    program: function.into(),
                    mode: HookMode::Off,
                    target: function.into(),
                    status: Err(HookError::Unavailable(step.reason.clone())),
                });
                continue;
            };
            let mut result = self.attach_handler_pair(function, mode, btf);
            let mut chosen = mode;
            if result.is_err()
                && mode == KernelHookMode::Fentry
                && preference == HookPreference::Auto
                && features
                    .preference_unavailable(HookPreference::Kprobe)
                    .is_none()
            {
                let fentry = result.clone().unwrap_err();
                result = self
                    .attach_handler_pair(function, KernelHookMode::Kprobe, btf)
                    .map_err(|kprobe| Arc::new(KernelAttachError::Neither { fentry, kprobe }));
                chosen = KernelHookMode::Kprobe;
            }
            let (entry, exit) = chosen.program_suffixes();
            self.handler_modes.insert(
                function.into(),
                if result.is_ok() { chosen.name() } else { "off" }.into(),
            );
            let (entry_mode, exit_mode) = chosen.entry_and_return();
            for (suffix, mode) in [(exit, exit_mode), (entry, entry_mode)] {
                self.hooks.push(AttachedHook {
                    program: format!("{function}_{suffix}"),
                    mode,
                    target: function.into(),
                    status: result.clone().map_err(HookError::Kernel),
                });
            }
        }
    }

    /// Captures netlink at the socket layer when the plan (and the kernel's BTF) allow it, falling
    /// back from fentry to kprobe under `auto`: the mode used, or why each mode tried failed
    /// (empty: none was tried). Records the hook in `hooks`.
    fn attach_capture(
        &mut self,
        plan: &CapturePlan,
        features: &KernelFeatures,
        preference: HookPreference,
        socket_offsets_known: bool,
        btf: Option<&Btf>,
    ) -> Result<KernelHookMode, Vec<String>> {
        let mut tried = Vec::new();
        let mut modes: Vec<KernelHookMode> = plan.socket_layer.mode.into_iter().collect();
        if modes == [KernelHookMode::Fentry]
            && preference == HookPreference::Auto
            && features
                .preference_unavailable(HookPreference::Kprobe)
                .is_none()
        {
            modes.push(KernelHookMode::Kprobe);
        }
        if !socket_offsets_known && !modes.is_empty() {
            tried.push("the kernel's BTF lacks socket/sk_buff offsets".to_string());
            modes.clear();
        }
        for mode in modes {
            match self.attach_socket_capture(mode, btf) {
                Ok(()) => {
                    self.hooks.push(AttachedHook {
                        program: "netlink_socket_capture".into(),
                        mode: mode.entry_and_return().0,
                        target: match mode {
                            KernelHookMode::Fentry => "netlink_unicast, skb_recv_datagram",
                            KernelHookMode::Kprobe => {
                                "netlink_sendmsg, netlink_recvmsg, netlink_unicast, skb_recv_datagram"
                            }
                        }
                        .into(),
                        status: Ok(()),
                    });
                    return Ok(mode);
                }
                Err(e) => tried.push(format!("{mode}: {e}")),
            }
        }
        Err(tried)
    }

    /// Captures netlink with `sock:sock_{send,recv}_length` alone where the kernel has them (no
    /// syscall tracepoint for netlink: other sockets pay one comparison): the programs attached,
    /// or why they were refused (`None`: the kernel has no such tracepoints). When refused,
    /// neither stays attached and the syscall tracepoints capture.
    fn attach_sock_capture(
        &mut self,
        features: &KernelFeatures,
        raw_allowed: bool,
    ) -> Option<Result<ChunkPrograms, SockCaptureRefused>> {
        if !features.sock_tracepoints() {
            return None;
        }
        let mut raw = None;
        if raw_allowed {
            match self.attach_sock_programs(ChunkPrograms::Raw) {
                Ok(()) => return Some(Ok(ChunkPrograms::Raw)),
                Err(e) => raw = Some(e),
            }
        }
        Some(
            self.attach_sock_programs(ChunkPrograms::Classic)
                .map(|()| ChunkPrograms::Classic)
                .map_err(|classic| SockCaptureRefused { raw, classic }),
        )
    }

    /// Attaches both sock capture programs of one kind, or neither (the first is unloaded when
    /// the second fails).
    fn attach_sock_programs(&mut self, kind: ChunkPrograms) -> Result<(), ProbeError> {
        let programs = match kind {
            ChunkPrograms::Raw => [
                ("sock_send_capture_raw", "sock_send_length"),
                ("sock_recv_capture_raw", "sock_recv_length"),
            ],
            ChunkPrograms::Classic => [
                ("sock_send_capture", "sock_send_length"),
                ("sock_recv_capture", "sock_recv_length"),
            ],
        };
        for (i, (program, name)) in programs.into_iter().enumerate() {
            let attached = match kind {
                ChunkPrograms::Raw => self.attach_raw_tracepoint(program, name),
                ChunkPrograms::Classic => self.attach_tracepoint(program, "sock", name),
            };
            if let Err(e) = attached {
                if i == 1 {
                    let first = programs[0].0;
                    if let Some(p) = self.ebpf.program_mut(first) {
                        let _ = match p {
                            Program::RawTracePoint(p) => p.unload(),
                            Program::TracePoint(p) => p.unload(),
                            _ => Ok(()),
                        };
                    }
                    self.hooks.retain(|h| h.program != first);
                }
                return Err(e);
            }
            self.hooks.push(AttachedHook {
                program: program.into(),
                mode: kind.mode(),
                target: format!("sock:{name}"),
                status: Ok(()),
            });
        }
        Ok(())
    }

    /// Loads and attaches one fentry/fexit/kprobe/kretprobe program to kernel `function`.
    fn attach_kernel_program(
        &mut self,
        program: &str,
        function: &str,
        btf: Option<&Btf>,
    ) -> Result<(), KernelAttachError> {
        let not_kernel_probe = || KernelAttachError::NotKernelProbe(program.into());
        let prog = self
            .ebpf
            .program_mut(program)
            .ok_or_else(not_kernel_probe)?;
        let need_btf = || {
            btf.ok_or_else(|| KernelAttachError::NoBtf {
                program: program.into(),
            })
        };
        let refused = |source| KernelAttachError::Program {
            program: program.into(),
            source,
        };
        match prog {
            Program::FEntry(p) => {
                p.load(function, need_btf()?).map_err(refused)?;
                p.attach().map_err(refused)?;
            }
            Program::FExit(p) => {
                p.load(function, need_btf()?).map_err(refused)?;
                p.attach().map_err(refused)?;
            }
            Program::KProbe(p) => {
                if p.fd().is_err() {
                    p.load().map_err(refused)?;
                }
                p.attach(function, 0).map_err(refused)?;
            }
            _ => return Err(not_kernel_probe()),
        }
        Ok(())
    }

    /// Unloads `program` (detaching its links), so a fallback can probe its function anew.
    fn unload_program(&mut self, program: &str) {
        let _ = match self.ebpf.program_mut(program) {
            Some(Program::FEntry(p)) => p.unload(),
            Some(Program::FExit(p)) => p.unload(),
            Some(Program::KProbe(p)) => p.unload(),
            _ => Ok(()),
        };
    }

    /// Attaches `(program, function)` in order — returns first, entries last, so nothing is
    /// remembered that no return clears — or none of them: on a failure the ones attached are
    /// unloaded again.
    fn attach_set(
        &mut self,
        steps: &[(String, &str)],
        btf: Option<&Btf>,
    ) -> Result<(), Arc<KernelAttachError>> {
        for (i, (program, function)) in steps.iter().enumerate() {
            if let Err(e) = self.attach_kernel_program(program, function, btf) {
                for (done, _) in &steps[..i] {
                    self.unload_program(done);
                }
                return Err(Arc::new(e));
            }
        }
        Ok(())
    }

    /// Attaches a kernel handler's return and entry programs in `mode`.
    fn attach_handler_pair(
        &mut self,
        function: &str,
        mode: KernelHookMode,
        btf: Option<&Btf>,
    ) -> Result<(), Arc<KernelAttachError>> {
        let (entry, exit) = mode.program_suffixes();
        self.attach_set(
            &[
                (format!("{function}_{exit}"), function),
                (format!("{function}_{entry}"), function),
            ],
            btf,
        )
    }

    /// Attaches the socket-layer netlink capture in `mode` (all its programs, or none): under
    /// fentry the `netlink_unicast` entry and the `skb_recv_datagram` return alone (their
    /// arguments tell requests and receives apart); under kprobes also `netlink_sendmsg`/
    /// `netlink_recvmsg` entry and return, which remember the call (a kretprobe has no
    /// arguments).
    fn attach_socket_capture(
        &mut self,
        mode: KernelHookMode,
        btf: Option<&Btf>,
    ) -> Result<(), Arc<KernelAttachError>> {
        let (entry, exit) = mode.program_suffixes();
        let mut programs = vec![
            (format!("skb_recv_datagram_{exit}"), "skb_recv_datagram"),
            (format!("netlink_unicast_{entry}"), "netlink_unicast"),
        ];
        if mode == KernelHookMode::Kprobe {
            programs.extend([
                (format!("netlink_sendmsg_{exit}"), "netlink_sendmsg"),
                (format!("netlink_recvmsg_{exit}"), "netlink_recvmsg"),
                (format!("netlink_recvmsg_{entry}"), "netlink_recvmsg"),
                (format!("netlink_sendmsg_{entry}"), "netlink_sendmsg"),
            ]);
        }
        self.attach_set(&programs, btf)
    }

    /// The program `name` as type `T`, with errors naming `target`.
    fn program<'a, T>(
        ebpf: &'a mut Ebpf,
        program: &str,
        target: &str,
    ) -> Result<&'a mut T, ProbeError>
    where
        &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
    {
        ebpf.program_mut(program)
            .ok_or_else(|| ProbeError::MissingProgram(program.into()))?
            .try_into()
            .map_err(attach_error(program, target))
    }

    fn attach_tracepoint(
        &mut self,
        program: &str,
        category: &str,
        name: &str,
    ) -> Result<(), ProbeError> {
        let target = format!("{category}:{name}");
        let err = attach_error(program, &target);
        let prog: &mut TracePoint = Self::program(&mut self.ebpf, program, &target)?;
        if prog.fd().is_err() {
            prog.load().map_err(&err)?;
        }
        prog.attach(category, name).map_err(err)?;
        Ok(())
    }

    /// Attaches the cgroup hooks of `groups` to the root of the cgroup v2 hierarchy, each
    /// beside any other program there (a BPF link), and lists the attempts among the
    /// hooks. All or none: when one fails, those attached are taken off again (the caller then
    /// attaches the syscall tracepoints instead) and false is returned.
    fn attach_cgroup_hooks(&mut self, groups: &[HookGroup]) -> bool {
        let wanted: Vec<&CgroupHook> = CGROUP_HOOKS
            .iter()
            .filter(|h| groups.contains(&h.group))
            .collect();
        let root = crate::host::cgroup_root::cgroup2_root()
            .map_err(|e| HookError::Unavailable(e.to_string()))
            .and_then(|root| {
                std::fs::File::open(&root)
                    .map(|dir| (root.clone(), dir))
                    .map_err(|e| HookError::Unavailable(format!("opening {}: {e}", root.display())))
            });
        let mut attached = Vec::new();
        let mut all = true;
        for hook in wanted {
            let status = match &root {
                Ok((path, dir)) => {
                    let target = format!("{}@{}", hook.attach, path.display());
                    self.attach_cgroup_hook(hook.program, &target, dir)
                        .map(|()| target)
                        .map_err(HookError::from)
                }
                Err(e) => Err(e.clone()),
            };
            let target = match &status {
                Ok(target) => target.clone(),
                Err(_) => hook.attach.to_string(),
            };
            all &= status.is_ok();
            if status.is_ok() {
                attached.push(hook.program);
            }
            self.hooks.push(AttachedHook {
                program: hook.program.into(),
                mode: HookMode::Cgroup,
                target,
                status: status.map(drop),
            });
            if !all {
                break;
            }
        }
        if !all {
            for program in attached {
                if let Some(Program::CgroupSockAddr(p)) = self.ebpf.program_mut(program) {
                    let _ = p.unload();
                }
            }
            for hook in self.hooks.iter_mut().filter(|h| h.mode == HookMode::Cgroup) {
                if hook.status.is_ok() {
                    hook.status = Err(HookError::Unavailable(
                        "taken off again: another cgroup hook failed, the syscall tracepoints serve instead".into(),
                    ));
                }
            }
        }
        all
    }

    fn attach_cgroup_hook(
        &mut self,
        program: &str,
        target: &str,
        cgroup: &std::fs::File,
    ) -> Result<(), ProbeError> {
        let err = attach_error(program, target);
        let prog: &mut CgroupSockAddr = Self::program(&mut self.ebpf, program, target)?;
        if prog.fd().is_err() {
            prog.load().map_err(&err)?;
        }
        // A cgroup BPF link always runs beside the cgroup's other programs (as
        // `BPF_F_ALLOW_MULTI`), and the kernel refuses any flag on it (EINVAL): "Single" is aya's
        // name for no flag. The link ends with the tracer's descriptor: a killed tracer leaves
        // nothing attached.
        prog.attach(cgroup, CgroupAttachMode::Single).map_err(err)?;
        Ok(())
    }

    /// Attaches `program` at the raw tracepoint `name` and lists the attempt among the hooks:
    /// whether it is attached (the caller falls back to the classic tracepoints when not).
    fn attach_raw_hook(&mut self, program: &str, name: &str) -> bool {
        let status = self
            .attach_raw_tracepoint(program, name)
            .map_err(HookError::from);
        let attached = status.is_ok();
        self.hooks.push(AttachedHook {
            program: program.into(),
            mode: HookMode::RawTracepoint,
            target: name.into(),
            status,
        });
        attached
    }

    fn attach_raw_tracepoint(&mut self, program: &str, name: &str) -> Result<(), ProbeError> {
        let err = attach_error(program, name);
        let prog: &mut RawTracePoint = Self::program(&mut self.ebpf, program, name)?;
        if prog.fd().is_err() {
            prog.load().map_err(&err)?;
        }
        prog.attach(name).map_err(err)?;
        Ok(())
    }

    /// [`LiveTracer::attach_uprobe`], the outcome listed among the hooks as `mode` at `target`.
    fn attach_listed_uprobe(
        &mut self,
        program: &str,
        mode: HookMode,
        (file, target): (&Path, String),
        symbol: &str,
        offset: Option<u64>,
    ) -> Result<(), ProbeError> {
        let status = self
            .attach_uprobe(program, (file, &target), symbol, offset)
            .map_err(Arc::new);
        self.hooks.push(AttachedHook {
            program: program.into(),
            mode,
            target,
            status: status.clone().map_err(HookError::Attach),
        });
        status.map_err(ProbeError::Listed)
    }

    /// Attaches the uprobe `program` to `file` at `offset` (else at its `symbol`), loading the
    /// program first when needed; `target` names the point in errors.
    fn attach_uprobe(
        &mut self,
        program: &str,
        (file, target): (&Path, &str),
        symbol: &str,
        offset: Option<u64>,
    ) -> Result<(), ProbeError> {
        let err = attach_error(program, target);
        let prog: &mut UProbe = Self::program(&mut self.ebpf, program, target)?;
        if prog.fd().is_err() {
            prog.load().map_err(&err)?;
        }
        let point = aya::programs::uprobe::UProbeAttachPoint {
            location: match offset {
                Some(at) => aya::programs::uprobe::UProbeAttachLocation::AbsoluteOffset(at),
                None => symbol.into(),
            },
            cookie: None,
        };
        let link = prog
            .attach(point, file, UProbeScope::AllProcesses)
            .map_err(err)?;
        self.uprobe_links.push(UprobeLink {
            program: program.to_string(),
            link,
            file: std::fs::metadata(file).ok().map(|m| (m.dev(), m.ino())),
        });
        Ok(())
    }

    /// Loads `netlink_chunk` and puts it in slot 0 of `CHUNK_PROGRAMS`: the netlink exit
    /// programs tail-call it once per chunk.
    fn install_chunk_program(&mut self, chunks: ChunkPrograms) -> Result<(), ProbeError> {
        let (program, target) = (chunks.program(), chunks.array());
        let err = attach_error(program, target);
        let fd = match chunks {
            ChunkPrograms::Raw => {
                let prog: &mut RawTracePoint = Self::program(&mut self.ebpf, program, target)?;
                prog.load().map_err(&err)?;
                prog.fd().map_err(&err)?.try_clone()
            }
            ChunkPrograms::Classic => {
                let prog: &mut TracePoint = Self::program(&mut self.ebpf, program, target)?;
                prog.load().map_err(&err)?;
                prog.fd().map_err(&err)?.try_clone()
            }
        }
        .map_err(|e| err(aya::programs::ProgramError::IOError(e)))?;
        let mut array =
            aya::maps::ProgramArray::try_from(self.map_mut(target)?).map_err(map_error(target))?;
        array.set(0, &fd, 0).map_err(map_error(target))
    }

    /// The map `name`, for writing.
    fn map_mut(&mut self, name: &str) -> Result<&mut aya::maps::Map, ProbeError> {
        self.ebpf
            .map_mut(name)
            .ok_or_else(|| ProbeError::MissingMap(name.into()))
    }

    /// A hash map, typed.
    fn hash_map<K: aya::Pod, V: aya::Pod>(
        &mut self,
        name: &str,
    ) -> Result<BpfHashMap<&mut MapData, K, V>, ProbeError> {
        BpfHashMap::try_from(self.map_mut(name)?).map_err(map_error(name))
    }

    /// Takes the ring buffer map (once), for `source::live` to map and read.
    pub fn take_ring_buffer(&mut self) -> Result<MapData, ProbeError> {
        match self.ebpf.take_map("EVENTS") {
            Some(aya::maps::Map::RingBuf(map)) => Ok(map),
            _ => Err(ProbeError::MissingMap("EVENTS".into())),
        }
    }

    /// Takes the flag map by which the ring's reader asks to be woken at the next record
    /// (`READER_WAITING`, a one-element mappable array; see `source::live::WaitingFlag`).
    pub fn take_reader_waiting_flag(&mut self) -> Result<MapData, ProbeError> {
        match self.ebpf.take_map("READER_WAITING") {
            Some(aya::maps::Map::Array(map)) => Ok(map),
            _ => Err(ProbeError::MissingMap("READER_WAITING".into())),
        }
    }

    /// Adds a thread group to the pid filter.
    pub fn add_traced_pid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.hash_map::<u32, u8>("TRACED_TGIDS")?
            .insert(tgid, 1, 0)
            .map_err(map_error("TRACED_TGIDS"))
    }

    /// Tells the kernel side that new programs are held at exec: exec records then wake nobody
    /// (see `EXEC_RECORDS_LAZY` in the eBPF program).
    pub fn exec_records_lazy(&mut self) -> Result<(), ProbeError> {
        const NAME: &str = "EXEC_RECORDS_LAZY";
        aya::maps::Array::<&mut MapData, u32>::try_from(self.map_mut(NAME)?)
            .map_err(map_error(NAME))?
            .set(0, 1, 0)
            .map_err(map_error(NAME))
    }

    /// Detaches every uprobe, many at once ([`DETACH_THREADS`]): what dropping the tracer would
    /// do one by one.
    pub fn detach_uprobes(&mut self) {
        let links = self.take_uprobe_links(|_| true);
        let per_thread = links.len().div_ceil(DETACH_THREADS).max(1);
        std::thread::scope(|scope| {
            let mut rest = links;
            while !rest.is_empty() {
                let chunk: Vec<_> = rest.drain(..per_thread.min(rest.len())).collect();
                scope.spawn(move || drop(chunk));
            }
        });
    }

    /// Detaches the uprobes attached to the file (`dev`, `ino`): the probes of a program no
    /// process runs any more and no new one can (its file is deleted). Returns how many. They
    /// are dropped on a thread of their own: each detach waits for RCU grace periods (0.1 s
    /// and more), which the trace's loop must not.
    pub fn detach_file(&mut self, dev: u64, ino: u64) -> usize {
        let links = self.take_uprobe_links(|l| l.file == Some((dev, ino)));
        let n = links.len();
        if n > 0 {
            // Without a thread to be had, the closure and its links are dropped here: detached
            // slowly rather than kept.
            let _ = std::thread::Builder::new()
                .name("uprobe-detach".into())
                .spawn(move || drop(links));
        }
        n
    }

    /// Takes the uprobe links `which` selects out of their programs (dropping one detaches it).
    fn take_uprobe_links(
        &mut self,
        which: impl Fn(&UprobeLink) -> bool,
    ) -> Vec<aya::programs::uprobe::UProbeLink> {
        let (taken, kept) = std::mem::take(&mut self.uprobe_links)
            .into_iter()
            .partition::<Vec<_>, _>(|l| which(l));
        self.uprobe_links = kept;
        taken
            .into_iter()
            .filter_map(|l| {
                self.ebpf
                    .program_mut(&l.program)
                    .and_then(|p| <&mut UProbe>::try_from(p).ok())
                    .and_then(|p| p.take_link(l.link).ok())
            })
            .collect()
    }

    /// Whether the pid filter holds the thread group `tgid`.
    pub fn is_traced_pid(&mut self, tgid: u32) -> bool {
        self.hash_map::<u32, u8>("TRACED_TGIDS")
            .is_ok_and(|m| m.get(&tgid, 0).is_ok())
    }

    /// Removes a thread group from the pid filter.
    pub fn remove_traced_pid(&mut self, tgid: u32) -> Result<(), ProbeError> {
        self.hash_map::<u32, u8>("TRACED_TGIDS")?
            .remove(&tgid)
            .map_err(map_error("TRACED_TGIDS"))
    }

    /// Tells the kernel side about a netlink socket found by a /proc scan.
    pub fn add_netlink_socket(&mut self, socket: &NetlinkSocket) -> Result<(), ProbeError> {
        let key = ((socket.tgid as u64) << 32) | socket.fd as u64;
        self.hash_map::<u64, u32>("NETLINK_FDS")?
            .insert(key, socket.protocol, 0)
            .map_err(map_error("NETLINK_FDS"))
    }

    /// The drop/cut counters summed over CPUs, indexed by `nodeip_trace_common::counter`.
    pub fn counters(&self) -> Result<Vec<u64>, ProbeError> {
        let map_err = map_error("COUNTERS");
        let map: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(
            self.ebpf
                .map("COUNTERS")
                .ok_or_else(|| ProbeError::MissingMap("COUNTERS".into()))?,
        )
        .map_err(&map_err)?;
        (0..counter::COUNT)
            .map(|i| map.get(&i, 0).map(|v| v.iter().sum()).map_err(&map_err))
            .collect()
    }
}
