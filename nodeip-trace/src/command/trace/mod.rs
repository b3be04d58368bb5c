//! `nodeip-trace trace`: attach, optionally run a command, stream the timeline until the command
//! exits, the duration passes, or Ctrl-C/SIGTERM; then detach, flush and report what was lost.
//!
//! This file holds the options, the errors and [`run`]; the run's stages have a file each:
//! `start` (checks, attach, outputs, header, the command, privileges), `pump` (the loop:
//! records through the pipeline to the outputs), `stop` (losses, summary, detach). Their
//! parts: `outputs` (opening the outputs, the fan-out to them), `child` (the command
//! `trace -- CMD` starts), `held_execs` (serving the exec hold), `losses` (what was lost).
mod child;
mod held_execs;
mod losses;
mod outputs;
mod pump;
mod start;
mod stop;

use std::path::PathBuf;
use std::time::Duration;

use crate::correlate::process_filter::ProcessFilter;
use crate::model::clock::WallClock;
use crate::model::emitted::Emitted;
use crate::model::event::{Event, EventBody};
use crate::pipeline::Pipeline;
use crate::probe::loader::TraceConfig;
use crate::probe::ProbeError;
use crate::sink::{OutputFormat, SinkError};
use crate::source::live::SpillConfig;

use outputs::Sinks;
use pump::StopSignals;

/// Options of a trace run (validated by the CLI).
#[derive(Clone, Debug)]
pub struct TraceOptions {
    /// What the kernel side traces.
    pub config: TraceConfig,
    /// The timeline on stdout; `None` when stdout carries a capture (`--pcap -`).
    pub format: Option<OutputFormat>,
    /// JSON-lines recording file.
    pub output: Option<PathBuf>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Run this command and trace only it and its descendants.
    pub command: Vec<String>,
    /// nlmon-compatible classic pcap output (`-` = stdout, flushed per frame).
    pub pcap: Option<PathBuf>,
    /// pcapng output with per-packet comments (pid, tid, comm).
    pub pcapng: Option<PathBuf>,
    /// The HTML postmortem report, written when the trace ends.
    pub report: Option<PathBuf>,
    /// Written once probes are attached (for tests and scripts).
    pub ready_file: Option<PathBuf>,
    /// `-v`: the start-up's details on stderr, not only its one line.
    pub verbose: bool,
    /// Hold new programs at exec until probed, at most this long (`None`: `--exec-hold off`).
    pub exec_hold: Option<Duration>,
    /// The filters as given, for the recording header.
    pub filter_description: Vec<String>,
    /// Generic-netlink family ids named on the command line (id, name); they win over the
    /// kernel's list.
    pub genl_families: Vec<(u16, String)>,
    /// `--pod`, `--container`, `--cgroup`: only events (and frames) of matching processes.
    pub process_filter: ProcessFilter,
    /// `--max-output-mib`: the size at which each file output (recording, pcap, pcapng) stops
    /// taking records; stdout is never limited.
    pub max_output_bytes: Option<u64>,
    /// Called once start-up is over (probes attached, outputs open), before the first record is
    /// read: the binary sets its allocator's steady-state policy here.
    pub on_running: Option<fn()>,
    /// Where records beyond the in-memory queue wait (`--spill-mib`; `None`: in the ring).
    pub spill: Option<SpillConfig>,
}

/// Whether `item` passes the attribution filter (events not made by a process always do).
fn kept(pipeline: &mut Pipeline, filter: &ProcessFilter, item: &Emitted) -> bool {
    if filter.is_empty() {
        return true;
    }
    match item {
        Emitted::SpanEnd => true,
        Emitted::Event(e) | Emitted::SpanBegin(e) if e.pid == 0 => true,
        Emitted::Event(e) | Emitted::SpanBegin(e) => filter.matches(e.process.as_deref()),
        Emitted::Frame(f) => match &f.task {
            Some(t) => filter.matches(pipeline.attribution_of(t.pid).as_deref()),
            None => true,
        },
    }
}

/// Writes what the pipeline produced that passes the filter.
fn write_out(
    sinks: &mut Sinks,
    pipeline: &mut Pipeline,
    filter: &ProcessFilter,
    out: &mut Vec<Emitted>,
) -> Result<(), TraceError> {
    for item in out.drain(..) {
        if kept(pipeline, filter, &item) {
            sinks.write(&item)?;
        }
    }
    Ok(())
}

/// Errors of a trace run.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Probe layer.
    #[error(transparent)]
    Probe(#[from] ProbeError),
    /// Sink layer.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// No such process for --pid.
    #[error("no process with pid {0}: check the pid with `ps -p {0}`")]
    NoSuchPid(u32),
    /// The command could not be started.
    #[error("cannot run `{command}`: {source}; check that it exists and is executable (it is run without a shell)")]
    Spawn {
        /// The command.
        command: String,
        /// The error.
        source: std::io::Error,
    },
    /// An output path lies in a directory the traced pods control.
    #[error("refusing to write {path} (it resolves to {resolved}, in {what}): the pods being traced control that directory; write it elsewhere, e.g. under /var/log")]
    PodControlledOutput {
        /// The path as given.
        path: PathBuf,
        /// The path as resolved.
        resolved: PathBuf,
        /// What the directory is.
        what: &'static str,
    },
    /// The output file could not be created.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Outputs failed during the trace (the others were completed); each error's kind kept.
    #[error("{}; the other outputs are complete, and a JSON recording that failed was cut back to its last complete line", failures_text(.0))]
    OutputsFailed(Vec<SinkError>),
    /// `--ready-file` could not be written (whoever waits for it would wait for ever).
    #[error("cannot write the ready file {path}: {source}; give --ready-file a path in a writable directory")]
    ReadyFile {
        /// The path given.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Other I/O (ring buffer polling, signals).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: std::io::Error,
    },
}

/// Output errors as one line.
fn failures_text(failures: &[SinkError]) -> String {
    let said: Vec<String> = failures.iter().map(ToString::to_string).collect();
    said.join("; ")
}

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEnd {
    /// The command exited with this code (128+signal when killed).
    CommandExited(i32),
    /// Duration passed, or stopped by a signal.
    Stopped,
}

fn meta_event(clock: &WallClock, body: EventBody) -> Event {
    let ts_ns = crate::model::clock::monotonic_now_ns();
    Event {
        process: None,
        ts: clock.rfc3339(ts_ns).into(),
        ts_ns,
        pid: 0,
        tid: 0,
        comm: Default::default(),
        body,
    }
}
/// Runs a trace: start, the loop, the end.
pub async fn run(opts: TraceOptions) -> Result<TraceEnd, TraceError> {
    let mut trace = start::start(&opts)?;
    let mut signals = StopSignals::install(trace.exec_hold.is_ok())?;
    // Written once every handler is in place: whoever waits for it may signal at once.
    if let Some(path) = &opts.ready_file {
        std::fs::write(path, format!("{}\n", std::process::id())).map_err(|source| {
            TraceError::ReadyFile {
                path: path.clone(),
                source,
            }
        })?;
    }
    let pumped = pump::pump(&mut trace, &mut signals, &opts).await;
    stop::stop(trace, pumped, &opts)
}
