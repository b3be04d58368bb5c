//! Command-line flags (clap) → validated library options. Nothing here traces or decodes.
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand, ValueEnum};
use nodeip_trace::command::{doctor, explain, offline, report, trace, Exit};
use nodeip_trace::correlate::process_filter::ProcessFilter;
use nodeip_trace::decode::netlink::protocol_from_name;
use nodeip_trace::explain::node_audit::calico::{CalicoSettings, CalicoVersion};
use nodeip_trace::explain::node_audit::kubelet::{
    parse_node_ip_argument, CloudProvider, KubeletSettings, LookupResolver, UnknownResolver,
};
use nodeip_trace::explain::node_audit::ComponentSettings;
use nodeip_trace::probe::features::HookPreference;
use nodeip_trace::probe::loader::TraceConfig;
use nodeip_trace::sink::{OutputFormat, ReportFormat};

/// What `--version` prints after the name: the crate version, the git commit it was built from
/// ("unknown" when built outside a git checkout) and the SHA-256 of the embedded eBPF object
/// (both recorded by build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("NODEIP_TRACE_GIT_COMMIT"),
    ", eBPF object sha256 ",
    env!("NODEIP_TRACE_EBPF_SHA256"),
    ")"
);

/// `nodeip-trace --help`'s examples (after the options; the man page's EXAMPLES).
const EXAMPLES: &str = "\
Examples:
  nodeip-trace doctor                               # can this kernel be traced, and how
  nodeip-trace trace --duration 30 -o node.jsonl    # the whole node for 30 s, also recorded
  nodeip-trace trace -- getent ahosts node-a        # one command and its children
  nodeip-trace report node.jsonl                    # the postmortem page: node.html
  nodeip-trace explain                              # which address each component would pick";

const TRACE_EXAMPLES: &str = "\
Examples:
  nodeip-trace trace --duration 30                  # whole node for 30 s, text timeline
  nodeip-trace trace --comm kubelet --output k.jsonl
  nodeip-trace trace --format json -- getent ahosts node-a
  nodeip-trace trace --pid 1234 --netlink-family route
  nodeip-trace trace --pod calico-system/calico-node-bhk2j --format json
  nodeip-trace trace --hooks kprobe --pcap node.pcap  # force kprobes; pcap for Wireshark
  nodeip-trace trace --pcap - | wireshark -k -i -     # live into Wireshark";

const ANALYZE_EXAMPLES: &str = "\
Examples:
  nodeip-trace analyze node.pcapng
  nodeip-trace analyze --format json node.pcap > node.jsonl
  tcpdump -i nlmon0 -U -w - | nodeip-trace analyze -
  nodeip-trace analyze --genl-family IPVS=0x24 other-node.pcap  # no family ids in the capture";

const REPLAY_EXAMPLES: &str = "\
Examples:
  nodeip-trace replay incident.jsonl
  nodeip-trace replay --format json incident.jsonl";

const REPORT_EXAMPLES: &str = "\
Examples:
  nodeip-trace report incident.jsonl                # writes incident.html
  nodeip-trace report node.pcapng -o postmortem.html
  nodeip-trace trace --duration 60 -o incident.jsonl --report incident.html
  tcpdump -i nlmon0 -U -w - | nodeip-trace report - -o live.html";

const EXPLAIN_EXAMPLES: &str = "\
Examples:
  nodeip-trace explain
  nodeip-trace explain --calico-method kubernetes-internal-ip
  nodeip-trace explain --node-port-addresses primary --openelb-can-reach 172.16.0.4
  nodeip-trace explain --flannel-iface eth1 --kube-vip-address 192.168.1.240
  nodeip-trace explain --from incident.pcap --node-name node-a --format json";

const DOCTOR_EXAMPLES: &str = "\
Examples:
  nodeip-trace doctor
  nodeip-trace doctor --format json";

/// Which process picked which node IP, and why: eBPF tracing of getaddrinfo, netlink and route
/// lookups.
///
/// Traces getaddrinfo calls (with the order glibc returned), every netlink conversation
/// (route gets, address and route dumps, IPVS commands) and the kernel's route lookups, and
/// shows them as a timeline per process, with a diagnosis when a known failure pattern shows.
/// `trace` runs as root; `analyze`, `replay` and `report` read captures and recordings offline,
/// and need no privileges. Each subcommand's --help has examples.
#[derive(Parser, Debug)]
#[command(name = "nodeip-trace", version = VERSION, about, after_long_help = EXAMPLES)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Trace live (as root): the whole node, some processes, or one command.
    ///
    /// Traces the whole node, or only some processes (--pid, --comm, --pod, --container,
    /// --cgroup), or runs the COMMAND given after `--` and traces it and its descendants (then
    /// exits with its status). The timeline goes to stdout; --output also records it as JSON
    /// lines (for `replay` and `report`), --pcap/--pcapng write captures for Wireshark, and
    /// --report writes the HTML report when the trace ends. It runs until Ctrl-C, --duration or
    /// COMMAND's exit.
    #[command(after_long_help = TRACE_EXAMPLES)]
    Trace(TraceArgs),
    /// Analyze a capture offline: our --pcap/--pcapng output or a tcpdump of nlmon0.
    ///
    /// Reads our --pcap/--pcapng output or a `tcpdump -i nlmon0 -w FILE` capture (no root
    /// needed) and prints the same timeline and JSON as a live trace. Damaged frames are skipped
    /// and named on stderr, and reading goes on (exit 4 when anything was skipped).
    #[command(after_long_help = ANALYZE_EXAMPLES)]
    Analyze {
        /// The pcap or pcapng file; `-` reads standard input (`tcpdump -i nlmon0 -U -w - |
        /// nodeip-trace analyze -`). A file is read twice, so devices are named even before its
        /// first link dump; stdin or a pipe is read once, as it arrives.
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
        #[command(flatten)]
        genl: GenlFamilyArgs,
    },
    /// Render a JSON-lines recording (`trace --output FILE`) as the live run showed it.
    #[command(after_long_help = REPLAY_EXAMPLES)]
    Replay {
        /// The recording.
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
    /// Make a postmortem report: one HTML page from a recording or a capture.
    ///
    /// Reads a recording (`trace --output`) or a capture (no root needed) and writes one
    /// self-contained HTML page that opens offline in any browser.
    ///
    /// The page has a header (node, kernel, time window, hooks, losses); diagnosis cards linked
    /// to the rows that prove them; a swimlane picture of who asked the kernel what (a lane per
    /// process, the kernel's lane, resolver calls as bars with the rule that decided their
    /// order); the node address audit; and each resolver call's RFC 6724 pair table.
    #[command(after_long_help = REPORT_EXAMPLES)]
    Report {
        /// The recording (`trace --output`) or capture (pcap/pcapng; ours or tcpdump's nlmon);
        /// `-` reads standard input (then --output is needed).
        file: PathBuf,
        /// Where to write (default: FILE with the format's extension, e.g. incident.html).
        #[arg(long, short = 'o', value_name = "OUT")]
        output: Option<PathBuf>,
        /// What to write.
        #[arg(long, value_enum, default_value_t = OutputFormat::Html)]
        format: OutputFormat,
        #[command(flatten)]
        genl: GenlFamilyArgs,
    },
    /// Audit this node's addresses: which one each Kubernetes component would pick, and why.
    ///
    /// Says what kubelet, calico, kube-proxy (IPVS) and OpenELB would each pick, why, and the
    /// known failure patterns (exit 3 when one is found).
    ///
    /// The snapshot comes from the kernel (this network namespace, or --netns NAME), or from the
    /// kernel's answers in a capture or recording (--from). Component settings default to each
    /// component's defaults.
    #[command(after_long_help = EXPLAIN_EXAMPLES)]
    Explain(ExplainArgs),
    /// Report what this kernel offers and which hook each probe would use.
    ///
    /// Shows the kernel's features (BTF, tracefs, privileges, uprobes, kprobes, fentry, the
    /// fanotify permission events of the exec hold), the libcs and resolvers a trace would
    /// probe, and which hook each probe would use, and why. Exit 0 when tracing is possible
    /// here.
    #[command(after_long_help = DOCTOR_EXAMPLES)]
    Doctor {
        /// Output format.
        #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
        format: ReportFormat,
    },
    /// Internal: the exec hold's guard process, started by `trace` itself.
    #[command(name = "__exec-hold-guard", hide = true)]
    ExecHoldGuard {
        /// The tracer's pid.
        #[arg(long)]
        tracer: u32,
        /// The tracer's hold limit.
        #[arg(long)]
        limit_ms: u64,
    },
}

/// Flags of `explain`.
#[derive(clap::Args, Debug)]
struct ExplainArgs {
    /// Audit this named network namespace (`ip netns list`) instead of ours.
    #[arg(long, value_name = "NAME", conflicts_with = "from")]
    netns: Option<String>,
    /// Build the snapshot from a capture (pcap/pcapng) or recording (.jsonl): the last link,
    /// address and route answers the kernel gave in it.
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
    /// The node name kubelet looks up (default: this host's name).
    #[arg(long, value_name = "NAME")]
    node_name: Option<String>,
    /// Hosts file for the node-name lookup (default: /etc/netns/NAME/hosts with --netns when
    /// present, else /etc/hosts).
    #[arg(long, value_name = "FILE")]
    hosts: Option<PathBuf>,
    /// gai.conf for glibc's sort (default: as for --hosts; glibc's built-in tables if absent).
    #[arg(long, value_name = "FILE")]
    gai_conf: Option<PathBuf>,
    /// kubelet --node-ip, when set on this node: one address, a dual-stack pair (`IPv4,IPv6`),
    /// or `::`/`0.0.0.0` for a family preference only; read as kubelet reads it.
    #[arg(long, value_name = "IP[,IP]")]
    node_ip: Option<String>,
    /// kubelet --hostname-override (an IP there is taken as the node's address, unvalidated).
    #[arg(long, value_name = "NAME")]
    hostname_override: Option<String>,
    /// kubelet --cloud-provider: `external` leaves the addresses to the cloud-controller-manager.
    #[arg(long, value_name = "PROVIDER", value_parser = ["external", "none"])]
    cloud_provider: Option<String>,
    /// The resolver the kubelet binary's lookups take: go (a static build), glibc (cgo), musl
    /// (k3s). Default: each is shown.
    #[arg(long, value_name = "RESOLVER", value_parser = parse_lookup_resolver)]
    kubelet_resolver: Option<LookupResolver>,
    /// The calico release running (e.g. v3.24.5): its interface exclusion list and bugs.
    /// Default: the newest one read.
    #[arg(long, value_name = "VERSION", value_parser = parse_calico_version)]
    calico_version: Option<CalicoVersion>,
    /// calico IP_AUTODETECTION_METHOD: first-found (default), interface=REGEX,
    /// skip-interface=REGEX, can-reach=DEST, cidr=CIDR[,CIDR], kubernetes-internal-ip.
    #[arg(long, value_name = "METHOD")]
    calico_method: Option<String>,
    /// kube-proxy nodePortAddresses: CIDRs and/or `primary`, comma separated (default: all).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    node_port_addresses: Vec<String>,
    /// OpenELB `interface: can_reach:IP`: the IP it routes to.
    #[arg(long, value_name = "IP")]
    openelb_can_reach: Option<std::net::IpAddr>,
    /// flannel `--iface` (k3s `--flannel-iface`): an interface name or one of its IPv4
    /// addresses (default: the default-route interface).
    #[arg(long, value_name = "IFACE")]
    flannel_iface: Option<String>,
    /// kube-vip's VIP (its `address`): which interface kube-vip puts it on, and whether that
    /// interface holds its subnet.
    #[arg(long, value_name = "IP")]
    kube_vip_address: Option<std::net::IpAddr>,
    /// kube-vip `vip_interface` (default: the default-route interface).
    #[arg(long, value_name = "IFACE", requires = "kube_vip_address")]
    kube_vip_interface: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
}

/// `explain --kubelet-resolver`.
fn parse_lookup_resolver(text: &str) -> Result<LookupResolver, String> {
    text.parse().map_err(|e: UnknownResolver| e.to_string())
}

/// `explain --calico-version`.
fn parse_calico_version(text: &str) -> Result<CalicoVersion, String> {
    text.parse()
        .map_err(|e: nodeip_trace::explain::node_audit::calico::CalicoVersionError| e.to_string())
}

/// `trace --hooks`.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum Hooks {
    /// The best per function: fentry, else kprobe, else none.
    Auto,
    /// fentry/fexit only.
    Fentry,
    /// kprobe/kretprobe only.
    Kprobe,
    /// No kernel handler probes (syscall tracepoints only).
    Tracepoint,
}

/// `--genl-family`, shared by `trace` and `analyze`.
#[derive(clap::Args, Debug)]
struct GenlFamilyArgs {
    /// Name a generic-netlink family id, as NAME=ID (ID decimal or 0x-hex); repeatable.
    ///
    /// Generic netlink families (IPVS, …) get their message type ids from the kernel at run
    /// time, so a decoder must learn them: from the kernel (trace asks it at start), or from the
    /// CTRL_CMD_GETFAMILY exchange when the capture holds one. When neither can say — a capture
    /// from another node that lacks the exchange, or a family registered after the trace
    /// started — say it here: `--genl-family IPVS=0x24` decodes messages of type 0x24 as IPVS
    /// commands. Find the ids on the node with `genl ctrl list`. Names are the kernel's
    /// (case-sensitive); IPVS is decoded in full, other names label the messages. Given ids win
    /// over what the kernel reports, and pcap/pcapng output records them.
    #[arg(long = "genl-family", value_name = "NAME=ID", verbatim_doc_comment)]
    genl_families: Vec<String>,
}

#[derive(clap::Args, Debug)]
struct TraceArgs {
    /// Trace only this process (thread-group id); repeat for more.
    #[arg(long = "pid", value_name = "PID")]
    pids: Vec<u32>,
    /// Trace only tasks with this name (as in /proc/PID/comm, at most 15 characters).
    #[arg(long, value_name = "NAME")]
    comm: Option<String>,
    /// Only processes of this pod: NAMESPACE/NAME, or the pod's UID.
    ///
    /// Pods are found from the process's cgroup (kubepods slices: the UID), names from the
    /// container runtime's state files or kubelet's /var/log/pods; a process whose pod cannot be
    /// named matches by UID only.
    #[arg(long, value_name = "NAMESPACE/NAME|UID")]
    pod: Option<String>,
    /// Only processes of this container: its ID (or a prefix, as `crictl ps` shows it) or name.
    #[arg(long, value_name = "ID")]
    container: Option<String>,
    /// Only processes in this cgroup or below it (a path in the cgroup hierarchy, e.g.
    /// /system.slice/kubelet.service or /kubepods.slice).
    #[arg(long, value_name = "PATH")]
    cgroup: Option<String>,
    /// Timeline format on stdout (none is rendered when stdout is /dev/null, as GNU grep does:
    /// `trace --pcap F >/dev/null` spends nothing on a timeline nobody reads; with a plain pcap
    /// as the only output, nothing is even decoded: buffers are framed as captured, and route
    /// lookups, resolver calls and kernel handlers, which a pcap cannot hold, are not traced).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    format: OutputFormat,
    /// Also write the JSON-lines recording here (replay it later with `nodeip-trace replay`).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Stop after this many seconds (default: until Ctrl-C, or until COMMAND exits).
    #[arg(long, short = 'd', value_name = "SECS")]
    duration: Option<f64>,
    /// Netlink families to capture, by name or number (route, generic, xfrm, …); repeatable.
    /// Default: route and generic. XFRM is only captured when named, and its payload is redacted.
    #[arg(long = "netlink-family", value_name = "FAMILY")]
    netlink_families: Vec<String>,
    /// Do not attach the getaddrinfo uprobes.
    #[arg(long)]
    no_getaddrinfo: bool,
    /// Do not capture netlink traffic.
    #[arg(long)]
    no_netlink: bool,
    /// Do not record kernel route lookups.
    #[arg(long)]
    no_route_lookups: bool,
    /// Hooks for the kernel's netlink handlers (route get, address/link dumps, IPVS commands).
    ///
    /// auto: per function, fentry/fexit where the kernel allows it, else kprobe/kretprobe, else
    /// none. fentry / kprobe: only that mode; an error when the kernel has none of it.
    /// tracepoint: no kernel handler probes. Whatever is chosen, netlink traffic itself is
    /// captured (with fentry/kprobe at the netlink socket functions, else at the sock or
    /// syscall tracepoints); the handler probes add the namespace the kernel answered in, the
    /// request as the kernel parsed it and the handler's own result.
    /// `nodeip-trace doctor` shows what auto picks here, and why.
    #[arg(long, value_enum, default_value_t = Hooks::Auto, verbatim_doc_comment)]
    hooks: Hooks,
    /// Each file output (--output, --pcap, --pcapng) stops taking records at about this many
    /// MiB: the last record is complete, later ones are counted as lost in the summary, and the
    /// run's losses and summary still end the file. Stdout is never limited. Default: no limit.
    #[arg(long, value_name = "MIB")]
    max_output_mib: Option<u64>,
    /// Ring-buffer size in MiB (a power of two); raise it if `lost` reports a full ring buffer.
    #[arg(long, value_name = "MIB", default_value_t = nodeip_trace::probe::loader::DEFAULT_RING_BUFFER_MIB)]
    ring_buffer_mib: u32,
    /// When a burst outruns the consumer, records beyond its 28 MiB in-memory queue wait in an
    /// unnamed file in $TMPDIR (default /tmp; gone when the tracer exits), up to this many MiB,
    /// and are read back in order: memory stays bounded and nothing is lost. The file is made at
    /// start-up, and the trace says so if it cannot be. 0: no file; records then wait in the ring
    /// buffer, and what it cannot take is counted as lost.
    #[arg(long, value_name = "MIB", default_value_t = nodeip_trace::source::live::DEFAULT_SPILL_MIB)]
    spill_mib: u64,
    /// Also write an nlmon-compatible pcap (link type 253) for Wireshark; `-` streams to stdout
    /// (`nodeip-trace trace --pcap - | wireshark -k -i -`).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Also write pcapng, with pid/tid/comm as per-packet comments.
    #[arg(long, value_name = "FILE")]
    pcapng: Option<PathBuf>,
    /// Also write the postmortem report here when the trace ends: one self-contained HTML page
    /// (swimlane picture, diagnoses, address audit). A killed trace writes none: keep
    /// --output too, and make it later with `nodeip-trace report`.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Hold a program that starts during the trace at its exec until its resolvers are probed,
    /// so its first lookups are seen (a component restarted while tracing decides in its first
    /// milliseconds). auto: where the kernel offers fanotify permission events (Linux 5.1+,
    /// CONFIG_FANOTIFY_ACCESS_PERMISSIONS); programs already known run without waiting, and
    /// none waits longer than --exec-hold-limit-ms. off: probe new programs after they start
    /// (their first lookups can be missed). The start line, the JSON header and `doctor` say
    /// which is in use.
    #[arg(long, value_enum, default_value_t = ExecHoldArg::Auto, verbatim_doc_comment)]
    exec_hold: ExecHoldArg,
    /// The longest a new program waits at exec for its probes; past it, it runs unprobed and
    /// the timeline says so.
    #[arg(long, value_name = "MS", default_value_t = nodeip_trace::probe::exec_hold::DEFAULT_LIMIT.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    exec_hold_limit_ms: u64,
    /// Say at start what the one start line leaves out: each step of the start-up and how long
    /// it took, how netlink is captured and why, the kernel handlers' hook modes, what this
    /// kernel cannot do, and the capabilities the running tracer keeps (the JSON header has
    /// them too).
    #[arg(short, long)]
    verbose: bool,
    /// Write this file once probes are attached (for scripts and tests).
    #[arg(long, hide = true, value_name = "FILE")]
    ready_file: Option<PathBuf>,
    #[command(flatten)]
    genl: GenlFamilyArgs,
    /// Run this command, trace only it and its descendants, and exit with its status.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// `trace --exec-hold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ExecHoldArg {
    /// Hold new programs where the kernel allows it.
    Auto,
    /// Never hold: probe new programs after they start.
    Off,
}

fn netlink_mask(families: &[String]) -> anyhow::Result<u64> {
    if families.is_empty() {
        return Ok((1 << 0) | (1 << 16));
    }
    let mut mask = 0u64;
    for f in families {
        let Some(p) = protocol_from_name(f) else {
            bail!("unknown netlink family {f:?}: use a name (route, generic, xfrm, audit, …) or a number 0–31");
        };
        if p >= 64 {
            bail!("netlink family {p} out of range 0–63");
        }
        mask |= 1 << p;
    }
    Ok(mask)
}

/// The first id the kernel hands out to a generic-netlink family (0x10 is nlctrl's).
const GENL_FIRST_ID: u16 = 0x11;
/// `GENL_MAX_ID`: the last id the kernel hands out.
const GENL_MAX_ID: u16 = 1023;
/// `GENL_NAMSIZ` less the terminating NUL.
const GENL_NAME_MAX: usize = 15;

/// Parses `--genl-family NAME=ID` values into (id, name) pairs.
fn genl_families(a: &GenlFamilyArgs) -> anyhow::Result<Vec<(u16, String)>> {
    let mut out: Vec<(u16, String)> = Vec::new();
    for spec in &a.genl_families {
        let Some((name, id)) = spec
            .split_once('=')
            .filter(|(n, i)| !n.is_empty() && !i.is_empty())
        else {
            bail!("--genl-family expects NAME=ID, e.g. IPVS=0x24 (ids: `genl ctrl list` on the node), got {spec:?}");
        };
        let parsed = match id.strip_prefix("0x").or_else(|| id.strip_prefix("0X")) {
            Some(hex) => u16::from_str_radix(hex, 16),
            None => id.parse::<u16>(),
        };
        let id = match parsed {
            Ok(n) if (GENL_FIRST_ID..=GENL_MAX_ID).contains(&n) => n,
            Ok(n) => bail!(
                "--genl-family {spec}: generic netlink family ids run from {GENL_FIRST_ID:#x} to {GENL_MAX_ID:#x}{}",
                if n == 0x10 { " (0x10 is nlctrl's own)" } else { "" }
            ),
            Err(_) => bail!("--genl-family {spec}: ID {id:?} is not a number; give it in decimal or 0x-hex (e.g. IPVS=0x24)"),
        };
        if name.len() > GENL_NAME_MAX {
            bail!("--genl-family {spec}: family names are at most {GENL_NAME_MAX} characters");
        }
        if name != "IPVS" && name.eq_ignore_ascii_case("IPVS") {
            bail!("--genl-family {spec}: family names are case-sensitive; the kernel's IPVS family is named IPVS");
        }
        if let Some((_, other)) = out.iter().find(|(known, _)| *known == id) {
            if other != name {
                bail!("--genl-family gives id {id:#x} two names, {other} and {name}");
            }
        }
        out.push((id, name.to_string()));
    }
    Ok(out)
}

/// Whether stdout is `/dev/null`, so a timeline written there would be thrown away.
fn stdout_is_dev_null() -> bool {
    is_dev_null(&std::io::stdout())
}

/// Whether `fd` is open on `/dev/null` (the same character device).
fn is_dev_null(fd: &impl std::os::fd::AsFd) -> bool {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    let (Ok(null), Ok(this)) = (
        std::fs::metadata("/dev/null"),
        fd.as_fd().try_clone_to_owned().map(std::fs::File::from),
    ) else {
        return false;
    };
    this.metadata()
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == null.rdev())
}

fn trace_options(a: TraceArgs) -> anyhow::Result<trace::TraceOptions> {
    if !a.ring_buffer_mib.is_power_of_two() || a.ring_buffer_mib > 1024 {
        bail!(
            "--ring-buffer-mib must be a power of two up to 1024, got {}",
            a.ring_buffer_mib
        );
    }
    let duration = match a.duration {
        Some(d) if !(d > 0.0 && d.is_finite()) => {
            bail!("--duration must be a positive number of seconds, got {d}")
        }
        Some(d) => Some(Duration::from_secs_f64(d)),
        None => None,
    };
    if !a.command.is_empty() && !a.pids.is_empty() {
        bail!("give either --pid or a COMMAND after `--`, not both");
    }
    let mut filters = Vec::new();
    filters.extend(a.pids.iter().map(|p| format!("pid={p}")));
    if let Some(c) = &a.comm {
        if c.len() > 15 {
            bail!("--comm {c:?} is longer than 15 characters; the kernel keeps only the first 15 ({:?})", &c[..15]);
        }
        filters.push(format!("comm={c}"));
    }
    if !a.command.is_empty() {
        filters.push(format!("command={}", a.command.join(" ")));
    }
    for (name, value) in [
        ("pod", &a.pod),
        ("container", &a.container),
        ("cgroup", &a.cgroup),
    ] {
        if let Some(v) = value {
            if v.trim().is_empty() {
                bail!("--{name} needs a value");
            }
            filters.push(format!("{name}={v}"));
        }
    }
    if let Some(pod) = &a.pod {
        if pod.matches('/').count() > 1 {
            bail!("--pod {pod:?}: give NAMESPACE/NAME or the pod's UID");
        }
    }
    let process_filter = ProcessFilter {
        pod: a.pod.clone(),
        container: a.container.clone(),
        cgroup: a.cgroup.clone(),
    };
    let stdout_pcap = [&a.pcap, &a.pcapng]
        .iter()
        .any(|p| p.as_deref() == Some(std::path::Path::new("-")));
    if stdout_pcap && a.pcap.is_some() && a.pcapng.is_some() && a.pcap == a.pcapng {
        bail!("--pcap and --pcapng cannot both write to stdout");
    }
    let format = (!stdout_pcap && !stdout_is_dev_null()).then_some(a.format);
    if a.max_output_mib == Some(0) {
        bail!("--max-output-mib must be at least 1");
    }
    let config = TraceConfig {
        pids: a.pids,
        comm: a.comm,
        netlink_protocols: netlink_mask(&a.netlink_families)?,
        ring_buffer_bytes: a.ring_buffer_mib << 20,
        getaddrinfo: !a.no_getaddrinfo,
        netlink: !a.no_netlink,
        route_lookups: !a.no_route_lookups,
        hooks: match a.hooks {
            Hooks::Auto => HookPreference::Auto,
            Hooks::Fentry => HookPreference::Fentry,
            Hooks::Kprobe => HookPreference::Kprobe,
            Hooks::Tracepoint => HookPreference::Tracepoint,
        },
        ..TraceConfig::default()
    };
    Ok(trace::TraceOptions {
        on_running: Some(crate::purge_freed_memory_after_a_delay),
        config,
        format,
        output: a.output,
        report: a.report,
        duration,
        command: a.command,
        ready_file: a.ready_file,
        verbose: a.verbose,
        exec_hold: match a.exec_hold {
            ExecHoldArg::Auto => Some(Duration::from_millis(a.exec_hold_limit_ms)),
            ExecHoldArg::Off => None,
        },
        pcap: a.pcap,
        pcapng: a.pcapng,
        filter_description: filters,
        genl_families: genl_families(&a.genl)?,
        process_filter,
        max_output_bytes: a.max_output_mib.map(|m| m << 20),
        spill: (a.spill_mib > 0).then(|| nodeip_trace::source::live::SpillConfig {
            dir: std::env::temp_dir(),
            max_bytes: a.spill_mib.saturating_mul(1 << 20),
        }),
    })
}

/// Parses the command line and runs the subcommand.
pub fn run() -> anyhow::Result<Exit> {
    let cli = Cli::parse();
    match cli.command {
        Command::ExecHoldGuard { tracer, limit_ms } => {
            nodeip_trace::probe::exec_hold_guard::run(tracer, Duration::from_millis(limit_ms));
            Ok(Exit::Success)
        }
        Command::Doctor { format } => {
            let ok = doctor::run(format, &mut std::io::stdout().lock())
                .context("writing the doctor report")?;
            Ok(if ok { Exit::Success } else { Exit::CannotTrace })
        }
        Command::Analyze { file, format, genl } => {
            let summary = offline::analyze(&file, format, &genl_families(&genl)?)?;
            Ok(if summary.skipped > 0 && !summary.output_closed {
                Exit::Skipped
            } else {
                Exit::Success
            })
        }
        Command::Explain(a) => {
            let node_ips = match &a.node_ip {
                Some(text) => {
                    let parsed = parse_node_ip_argument(text).map_err(|e| {
                        anyhow::anyhow!("--node-ip {text:?}: {e} (as kubelet reads it)")
                    })?;
                    if !parsed.ignored.is_empty() {
                        bail!(
                            "--node-ip {text:?}: {} is not an IP address (kubelet would go on without it)",
                            parsed.ignored.join(", ")
                        );
                    }
                    parsed.ips
                }
                None => Vec::new(),
            };
            let opts = explain::ExplainOptions {
                kubelet: KubeletSettings {
                    node_ips: node_ips.clone(),
                    hostname_override: a.hostname_override,
                    cloud_provider: match a.cloud_provider.as_deref() {
                        Some("external") => CloudProvider::External,
                        _ => CloudProvider::None,
                    },
                    resolver: a.kubelet_resolver,
                },
                calico: CalicoSettings {
                    version: a.calico_version,
                },
                netns: a.netns,
                from: a.from,
                node_name: a.node_name,
                hosts_file: a.hosts,
                gai_conf: a.gai_conf,
                settings: ComponentSettings {
                    node_ip: node_ips.first().copied(),
                    calico_method: a.calico_method,
                    node_port_addresses: a.node_port_addresses,
                    openelb_can_reach: a.openelb_can_reach,
                    flannel_iface: a.flannel_iface,
                    kube_vip_address: a.kube_vip_address,
                    kube_vip_interface: a.kube_vip_interface,
                },
                format: a.format,
            };
            let found = explain::run(&opts, &mut std::io::stdout().lock())?;
            Ok(if found { Exit::Findings } else { Exit::Success })
        }
        Command::Report {
            file,
            output,
            format,
            genl,
        } => {
            let done = report::run(&report::ReportOptions {
                input: file,
                output,
                format,
                genl_families: genl_families(&genl)?,
            })?;
            nodeip_trace::message::note(format_args!(
                "nodeip-trace: wrote {}",
                done.output.display()
            ));
            Ok(Exit::Success)
        }
        Command::Replay { file, format } => {
            offline::replay(&file, format)?;
            Ok(Exit::Success)
        }
        Command::Trace(args) => {
            crate::purge_freed_memory_at_once();
            nodeip_trace::host::huge_pages::opt_out();
            let opts = trace_options(args)?;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            match rt.block_on(trace::run(opts))? {
                trace::TraceEnd::CommandExited(code) => Ok(Exit::Command(code.clamp(0, 255) as u8)),
                trace::TraceEnd::Stopped => Ok(Exit::Success),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(specs: &[&str]) -> anyhow::Result<Vec<(u16, String)>> {
        genl_families(&GenlFamilyArgs {
            genl_families: specs.iter().map(|s| s.to_string()).collect(),
        })
    }

    #[test]
    fn dev_null_is_told_from_files_and_other_devices() {
        assert!(is_dev_null(&std::fs::File::open("/dev/null").unwrap()));
        assert!(!is_dev_null(&std::fs::File::open("/dev/zero").unwrap()));
        assert!(!is_dev_null(
            &std::fs::File::open("/proc/self/exe").unwrap()
        ));
    }

    #[test]
    fn genl_family_ids_in_hex_or_decimal() {
        let parsed = parse(&["IPVS=0x3f", "TASKSTATS=31", "IPVS=63", "x=0X3FF"]).unwrap();
        assert_eq!(
            parsed,
            [
                (0x3f, "IPVS".to_string()),
                (31, "TASKSTATS".to_string()),
                (63, "IPVS".to_string()),
                (0x3ff, "x".to_string()),
            ]
        );
        assert!(parse(&["IPVS=0x400"]).is_err());
        assert!(parse(&["a-name-of-16-chr=0x20"]).is_err());
    }
}
