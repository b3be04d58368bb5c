//! `nodeip-trace explain`: the node address audit, from a live snapshot of a network namespace
//! (ours, or `--netns NAME`) or from the kernel's answers in a capture or recording.
use std::io::{BufReader, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::offline::{self, OfflineError};
use crate::explain::node_audit::{self, ComponentSettings, NodeSnapshot};
use crate::explain::resolver::glibc::gai_conf::GaiConf;
use crate::explain::resolver::go_choice::{
    go_resolver_choice, ConfFile, GoResolverChoice, GoResolverInputs,
};
use crate::model::emitted::Emitted;
use crate::model::event::{EventBody, Severity};
use crate::model::frame::Direction;
use crate::model::netlink::NetlinkMessage;
use crate::sink::node_audit_text;
use crate::sink::{write_report, ReportFormat};
use crate::sink::{EventSink, SinkError};

/// What to audit and how.
#[derive(Clone, Debug, Default)]
pub struct ExplainOptions {
    /// A named network namespace (`ip netns` name) to snapshot instead of ours.
    pub netns: Option<String>,
    /// A capture (pcap/pcapng) or recording (JSON lines) whose kernel answers make the snapshot.
    pub from: Option<PathBuf>,
    /// The node name (default: the host name).
    pub node_name: Option<String>,
    /// Hosts file (default: `/etc/netns/NAME/hosts` with `--netns` when present, else `/etc/hosts`).
    pub hosts_file: Option<PathBuf>,
    /// gai.conf (default: as for the hosts file; glibc's built-in tables when absent).
    pub gai_conf: Option<PathBuf>,
    /// Component settings.
    pub settings: ComponentSettings,
    /// kubelet's further settings and its binary's resolver.
    pub kubelet: node_audit::kubelet::KubeletSettings,
    /// calico-node's release.
    pub calico: node_audit::calico::CalicoSettings,
    /// Text or JSON.
    pub format: ReportFormat,
}

/// Why `explain` failed.
#[derive(Debug, Error)]
pub enum ExplainError {
    /// The namespace could not be joined.
    #[error(
        "cannot enter network namespace {name} ({path}): {source}; list them with `ip netns list`"
    )]
    Netns {
        /// The name given.
        name: String,
        /// Its path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The capture or recording could not be read.
    #[error(transparent)]
    Offline(#[from] OfflineError),
    /// A configuration file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The snapshot has no addresses at all.
    #[error("{0} holds no address dump (RTM_NEWADDR): capture an `ip addr` or run explain live")]
    Empty(String),
    /// Output failed.
    #[error("writing the report failed: {0}")]
    Write(#[source] std::io::Error),
}

/// Collects the kernel's link/address/route answers from a replayed or analysed stream.
#[derive(Default)]
struct AnswerCollector {
    messages: Vec<NetlinkMessage>,
}

impl EventSink for AnswerCollector {
    fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        if let Emitted::Event(e) = item {
            if let EventBody::Netlink(n) = &e.body {
                if n.direction == Direction::Recv {
                    self.messages
                        .extend(n.messages.iter().map(|m| NetlinkMessage::clone(m)));
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Addresses listed for `name` in a hosts file, in file order (glibc returns every match).
pub fn hosts_addresses(text: &str, name: &str) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace();
        let Some(addr) = words.next().and_then(|a| a.parse::<IpAddr>().ok()) else {
            continue;
        };
        if words.any(|w| w.eq_ignore_ascii_case(name)) && !out.contains(&addr) {
            out.push(addr);
        }
    }
    out
}

/// `explicit`, else `/etc/netns/NAME/FILE` when auditing a named namespace and it exists, else
/// `/etc/FILE`.
fn config_path(explicit: &Option<PathBuf>, netns: &Option<String>, file: &str) -> PathBuf {
    if let Some(p) = explicit {
        return p.clone();
    }
    if let Some(ns) = netns {
        let p = Path::new("/etc/netns").join(ns).join(file);
        if p.exists() {
            return p;
        }
    }
    Path::new("/etc").join(file)
}

fn read_optional(path: &Path, explicit: bool) -> Result<String, ExplainError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if !explicit && e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(source) => Err(ExplainError::Read {
            path: path.into(),
            source,
        }),
    }
}

fn kernel_messages(opts: &ExplainOptions) -> Result<(Vec<NetlinkMessage>, String), ExplainError> {
    if let Some(file) = &opts.from {
        let mut collector = AnswerCollector::default();
        let open = |path: &Path| {
            std::fs::File::open(path).map_err(|source| OfflineError::Open {
                path: path.into(),
                source,
            })
        };
        let is_recording = file
            .extension()
            .is_some_and(|e| e == "jsonl" || e == "json");
        if is_recording {
            offline::replay_into(file, BufReader::new(open(file)?), &mut collector)?;
        } else {
            offline::analyze_file(file, &[], &mut collector, &mut |_| {}, &mut |_| {})?;
        }
        return Ok((collector.messages, file.display().to_string()));
    }
    let path = opts.netns.as_ref().map(|n| Path::new("/run/netns").join(n));
    let messages = crate::host::kernel_dump::node_messages(path.as_deref()).map_err(|source| {
        ExplainError::Netns {
            name: opts.netns.clone().unwrap_or_default(),
            path: path.clone().unwrap_or_default(),
            source,
        }
    })?;
    let what = match &opts.netns {
        Some(n) => format!("network namespace {n}"),
        None => "this network namespace".into(),
    };
    Ok((messages, what))
}

/// Go's choice of resolver for `name`, for a program built with cgo, on this node's (or the
/// namespace's) nsswitch.conf and resolv.conf; the program's own environment is not known here.
fn go_cgo_choice(opts: &ExplainOptions, name: &str) -> GoResolverChoice {
    let read = |file: &str| std::fs::read_to_string(config_path(&None, &opts.netns, file));
    let (nsswitch, resolv) = (read("nsswitch.conf"), read("resolv.conf"));
    let hostname = crate::host::resolver_config::machine_hostname();
    let inputs = GoResolverInputs {
        mdns_allow: Path::new("/etc/mdns.allow").exists(),
        ..GoResolverInputs::cgo_build(
            27,
            ConfFile::from_read(&nsswitch),
            ConfFile::from_read(&resolv),
            &hostname,
        )
    };
    go_resolver_choice(&inputs, name)
}

/// Runs the audit and writes the report; returns whether any finding of severity warning or
/// error was made.
pub fn run(opts: &ExplainOptions, out: &mut dyn Write) -> Result<bool, ExplainError> {
    let report = audit_report(opts)?;
    write_report(opts.format, &report, node_audit_text::render_text, out)
        .map_err(ExplainError::Write)?;
    Ok(report
        .findings
        .iter()
        .any(|d| d.severity >= Severity::Warning))
}

/// The audit of this node's namespace with every component's defaults, summed up for a
/// capture's section comment ([`node_audit_text::summary_text`]); `None` when it cannot be made
/// (no address, no netlink), which a capture can do without.
pub fn node_audit_summary() -> Option<String> {
    audit_report(&ExplainOptions::default())
        .ok()
        .map(|r| node_audit_text::summary_text(&r))
}

/// The audit `opts` asks for.
pub fn audit_report(opts: &ExplainOptions) -> Result<node_audit::AuditReport, ExplainError> {
    let (messages, what) = kernel_messages(opts)?;
    let node_name = opts
        .node_name
        .clone()
        .unwrap_or_else(crate::host::resolver_config::machine_hostname);
    let hosts_path = config_path(&opts.hosts_file, &opts.netns, "hosts");
    let hosts = hosts_addresses(
        &read_optional(&hosts_path, opts.hosts_file.is_some())?,
        &node_name,
    );
    let gai_path = config_path(&opts.gai_conf, &opts.netns, "gai.conf");
    let (conf, _ignored) =
        GaiConf::parse_like_glibc(&read_optional(&gai_path, opts.gai_conf.is_some())?);
    let snapshot = NodeSnapshot::from_messages(&node_name, hosts, &messages);
    if snapshot.addresses.is_empty() {
        return Err(ExplainError::Empty(what));
    }
    // A live audit also says which resolver a cgo-capable Go program would take here (a
    // capture from elsewhere says nothing of this node's name-service files), and kubelet's
    // pick follows it.
    let context = node_audit::AuditContext {
        go_cgo_choice: opts.from.is_none().then(|| go_cgo_choice(opts, &node_name)),
        kubelet: opts.kubelet.clone(),
        calico: opts.calico.clone(),
    };
    let mut report = node_audit::audit_in(snapshot, &opts.settings, &context, &conf);
    report.go_cgo_choice = context.go_cgo_choice;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_file_order_and_every_match() {
        let text = "127.0.0.1 localhost\n10.0.0.6 node-1 # primary\n10.0.0.20 other NODE-1\n\
                    bogus node-1\n10.0.0.6 node-1\n";
        assert_eq!(
            hosts_addresses(text, "node-1"),
            [
                "10.0.0.6".parse::<IpAddr>().unwrap(),
                "10.0.0.20".parse().unwrap()
            ]
        );
        assert!(hosts_addresses(text, "node-2").is_empty());
    }

    #[test]
    fn audits_the_fixture_capture() {
        let capture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/nlmon/iproute2-secondary-ipvs.pcap");
        let opts = ExplainOptions {
            from: Some(capture),
            node_name: Some("fixture".into()),
            hosts_file: Some("/dev/null".into()),
            gai_conf: Some("/dev/null".into()),
            ..Default::default()
        };
        let mut out = Vec::new();
        let warned = run(&opts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("192.0.2.20/24 secondary"), "{text}");
        assert!(
            warned,
            "the secondary is skipped by the local-table path:\n{text}"
        );
        assert!(text.contains("secondary-address-skipped"), "{text}");
        // The few lines a capture's section comment carries: picks and findings.
        let summary = node_audit_text::summary_text(&audit_report(&opts).unwrap());
        assert!(
            summary.starts_with("node address audit of \"fixture\""),
            "{summary}"
        );
        assert!(summary.contains("\n  kubelet ("), "{summary}");
        assert!(
            summary.contains("] secondary-address-skipped — "),
            "{summary}"
        );
    }
}
