//! `nodeip-trace trace`: attach, optionally run a command, stream the timeline until the command
//! exits, the duration passes, or Ctrl-C/SIGTERM; then detach, flush and report what was lost.
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodeip_trace_common::counter;
use tokio::signal::unix::{signal, SignalKind};

use crate::correlate::process_filter::ProcessFilter;
use crate::decode::record::RecordError;
use crate::decode::route_lookup::RouteLookupDecoder;
use crate::model::clock::WallClock;
use crate::model::emitted::Emitted;
use crate::model::event::{
    Event, EventBody, LostReport, RecordingHeader, RunSummary, SCHEMA_VERSION,
};
use crate::model::netlink::MessageDetail;
use crate::pipeline::Pipeline;
use crate::probe::exec_hold::{ExecHold, Released};
use crate::probe::exec_watcher::{ExecWatcher, ProbeOutcome};
use crate::probe::features::KernelFeatures;
use crate::probe::loader::{LiveTracer, TraceConfig};
use crate::probe::netlink_sockets::{scan_all, sockets_of, NetnsCache};
use crate::probe::{tracefs, ProbeError};
use crate::sink::json::JsonLinesSink;
use crate::sink::limit::{CountingWriter, LimitedRecords, SizeLimitedSink};
use crate::sink::{timeline_sink, EventSink, OutputFormat, SinkError};
use crate::source::live::{LiveSource, RecordQueue, SpillConfig, WaitingFlag};

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

/// What the end-of-run line says of the spill: how much of a burst waited in the file, and
/// whether the file failed (then records beyond the queue waited in the ring instead).
fn spill_summary(queue: &RecordQueue, spill: Option<&SpillConfig>) -> String {
    use std::fmt::Write as _;
    let Some(spill) = spill else {
        return String::new();
    };
    let mut said = String::new();
    if queue.spill_peak_bytes() > 0 {
        let _ = write!(
            said,
            "; spilled at most {:.1} MiB to a file in {} (of {})",
            queue.spill_peak_bytes() as f64 / (1 << 20) as f64,
            spill.dir.display(),
            spill.max_bytes >> 20
        );
    }
    if let Some(e) = queue.spill_failure() {
        let _ = write!(
            said,
            "; the spill file in {} failed ({e}): records beyond the queue waited in the ring \
             (set TMPDIR to a writable directory, or --spill-mib 0 to not try)",
            spill.dir.display()
        );
    }
    said
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

/// How long each step of a trace's start-up took, for the "hooks attached" line: a start-up
/// of seconds (a slow or emulated machine, many executables to scan) then says where they went.
struct StartupPhases {
    started: Instant,
    last: Instant,
    phases: Vec<(&'static str, Duration)>,
}

impl StartupPhases {
    fn new() -> Self {
        let now = Instant::now();
        StartupPhases {
            started: now,
            last: now,
            phases: Vec::new(),
        }
    }

    /// Ends step `name`, begun where the previous one ended.
    fn end(&mut self, name: &'static str) {
        let now = Instant::now();
        self.phases.push((name, now - self.last));
        self.last = now;
    }

    /// `1234 ms [kernel features 20 ms, …]`: the total so far, then each step.
    fn describe(&self) -> String {
        let steps: Vec<String> = self
            .phases
            .iter()
            .map(|(name, took)| format!("{name} {} ms", took.as_millis()))
            .collect();
        format!(
            "{} ms [{}]",
            self.started.elapsed().as_millis(),
            steps.join(", ")
        )
    }
}

/// Says what the exec watcher did (one line per outcome).
fn say_outcomes(outcomes: Vec<ProbeOutcome>) {
    for outcome in outcomes {
        crate::message::note(format_args!("nodeip-trace: {outcome}"));
    }
}

/// What the holder is doing, for the start line and the header: `fanotify, limit 3000 ms`, or
/// why it is off.
fn exec_hold_state(hold: &Result<ExecHold, String>) -> String {
    match hold {
        Ok(h) => format!(
            "fanotify permission events, at most {} ms",
            h.limit().as_millis()
        ),
        Err(why) => format!("off ({why})"),
    }
}

/// Serves the execs the holder holds: each file classified and probed (and the libcs of the
/// process's root), the exec let go, and its hold put on the timeline.
fn serve_held_execs(
    hold: &ExecHold,
    watcher: &mut ExecWatcher,
    tracer: &mut LiveTracer,
    config: &TraceConfig,
    pipeline: &mut Pipeline,
    out: &mut Vec<Emitted>,
) {
    for held in hold.take_held() {
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", held.pid)).unwrap_or_default();
        let outcomes = watcher.on_held_exec(tracer, held.pid, &held.file);
        let (took, in_time) = match hold.release(&held, true) {
            Released::InTime(d) => (d, true),
            Released::AtLimit(d) => (d, false),
        };
        let file = std::fs::read_link(format!("/proc/self/fd/{}", held.file.as_raw_fd()))
            .unwrap_or_default()
            .display()
            .to_string();
        let shown_to_filter = config.comm.as_deref().is_none_or(|c| {
            let base = file.rsplit('/').next().unwrap_or(&file);
            base.get(..c.len().min(base.len())) == Some(c) || comm.trim_end() == c
        }) && (!config.filter_by_pid || tracer.is_traced_pid(held.pid));
        let (probed, refused): (Vec<_>, Vec<_>) = outcomes.iter().partition(|o| o.probed());
        let event = crate::model::event::ExecHoldEvent {
            file,
            held_us: took.as_micros() as u64,
            in_time,
            probed: probed.iter().map(|o| o.to_string()).collect(),
            refused: refused.iter().map(|o| o.to_string()).collect(),
        };
        if shown_to_filter {
            pipeline.on_exec_hold(held.pid, comm.trim_end(), held.since_ns, event, out);
        }
        say_outcomes(outcomes);
    }
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
    /// Outputs failed during the trace (the others were completed).
    #[error("{0}; the other outputs are complete, and a JSON recording that failed was cut back to its last complete line")]
    OutputsFailed(String),
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

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEnd {
    /// The command exited with this code (128+signal when killed).
    CommandExited(i32),
    /// Duration passed, or stopped by a signal.
    Stopped,
}

/// Counters that mean events were lost (not merely filtered).
const LOSS_COUNTERS: [(u32, &str); 12] = [
    (counter::GAI_RINGBUF_FULL, "getaddrinfo_ringbuf_full"),
    (counter::GAI_INFLIGHT_FULL, "getaddrinfo_inflight_map_full"),
    (counter::GAI_RESULTS_CUT, "getaddrinfo_results_cut"),
    (counter::NETLINK_RINGBUF_FULL, "netlink_calls_ringbuf_full"),
    (counter::NETLINK_BYTES_CUT, "netlink_bytes_cut"),
    (
        counter::NETLINK_UNKNOWN_SOCKET,
        "netlink_calls_on_unknown_socket",
    ),
    (counter::NETLINK_INFLIGHT_FULL, "netlink_inflight_map_full"),
    (
        counter::NETLINK_CALL_UNSUPPORTED,
        "netlink_calls_unsupported_syscall",
    ),
    (counter::ROUTE_RINGBUF_FULL, "route_lookups_ringbuf_full"),
    (counter::OTHER_RINGBUF_FULL, "other_records_ringbuf_full"),
    (
        counter::HANDLER_INFLIGHT_FULL,
        "kernel_handler_calls_not_followed",
    ),
    (
        counter::HANDLER_RINGBUF_FULL,
        "kernel_handler_records_ringbuf_full",
    ),
];

/// Turns the kernel counters into a lost report (bytes cut are reported, not summed as events).
pub fn lost_report(counters: &[u64], record_errors: u64) -> LostReport {
    let mut counts = BTreeMap::new();
    let mut lost = 0;
    for (index, name) in LOSS_COUNTERS {
        let v = counters.get(index as usize).copied().unwrap_or(0);
        if v > 0 {
            counts.insert(name.to_string(), v);
            if index != counter::NETLINK_BYTES_CUT && index != counter::GAI_RESULTS_CUT {
                lost += v;
            }
        }
    }
    if record_errors > 0 {
        counts.insert("undecodable_records".into(), record_errors);
        lost += record_errors;
    }
    LostReport { counts, lost }
}

/// One output, and what to do when it fails.
struct SinkSlot {
    sink: Box<dyn EventSink>,
    /// A JSON-lines file: cut back to its last complete line if a write fails (disk full).
    recording: Option<PathBuf>,
    /// The write error that closed this output.
    failed: Option<String>,
}

/// The outputs of a trace. One that fails (disk full, closed pipe) is closed and said on stderr;
/// the trace goes on with the others, and stops only when none is left.
struct Sinks {
    slots: Vec<SinkSlot>,
    /// Events written, by kind, in the order kinds first came (a handful: a short list whose
    /// `&'static str` keys compare by address first beats a map).
    counts: Vec<(&'static str, u64)>,
    /// Netlink buffers written out as frames.
    frames: u64,
    /// `--max-output-mib` in bytes.
    max_output_bytes: Option<u64>,
    /// Records dropped by each size-limited output (name, count).
    dropped: Vec<(String, Arc<AtomicU64>)>,
}

/// Bytes a file output collects before each write(2): with 8 KiB, a 100,000-pair burst's
/// 280 MB of JSON took 35,000 writes, and ext4 spent a sixth of the consumer's CPU in them.
const FILE_BUFFER_BYTES: usize = 256 << 10;

/// The buffer of a size-limited file output: the limit is seen once a buffer is written out,
/// so it may be passed by this much.
const LIMITED_FILE_BUFFER_BYTES: usize = 8 << 10;

impl Sinks {
    /// A file output's writer, the count of the bytes it has written to the file when outputs
    /// are size-limited, and how many bytes to collect before each write(2): the limit is seen
    /// as a buffer is written out, so a limited output buffers 8 KiB
    /// ([`LIMITED_FILE_BUFFER_BYTES`]); others [`FILE_BUFFER_BYTES`].
    fn file_destination(
        &self,
        file: std::fs::File,
    ) -> (CountingWriter<std::fs::File>, Option<Arc<AtomicU64>>, usize) {
        let written = self.max_output_bytes.map(|_| Arc::new(AtomicU64::new(0)));
        let buffer = if written.is_some() {
            LIMITED_FILE_BUFFER_BYTES
        } else {
            FILE_BUFFER_BYTES
        };
        (CountingWriter::new(file, written.clone()), written, buffer)
    }

    /// A file output's [`Sinks::file_destination`] behind a `BufWriter` of its buffer size.
    fn file_writer(
        &self,
        file: std::fs::File,
    ) -> (
        std::io::BufWriter<CountingWriter<std::fs::File>>,
        Option<Arc<AtomicU64>>,
    ) {
        let (out, written, buffer) = self.file_destination(file);
        (std::io::BufWriter::with_capacity(buffer, out), written)
    }

    /// Adds a file output, size-limited when its writer counted (see [`Sinks::file_writer`]).
    fn add_file(
        &mut self,
        sink: Box<dyn EventSink>,
        records: LimitedRecords,
        name: String,
        written: Option<Arc<AtomicU64>>,
        recording: Option<PathBuf>,
    ) {
        let sink = match (written, self.max_output_bytes) {
            (Some(written), Some(limit)) => {
                let limited = SizeLimitedSink::new(sink, records, name.clone(), written, limit);
                self.dropped.push((name, limited.dropped_counter()));
                Box::new(limited)
            }
            _ => sink,
        };
        self.add(sink, recording);
    }

    /// Records the size-limited outputs dropped, by output.
    fn dropped_at_limit(&self) -> Vec<(String, u64)> {
        self.dropped
            .iter()
            .map(|(name, n)| (name.clone(), n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    fn add(&mut self, sink: Box<dyn EventSink>, recording: Option<PathBuf>) {
        self.slots.push(SinkSlot {
            sink,
            recording,
            failed: None,
        });
    }

    /// Runs `op` on every open output; closes those that fail. Errs only when all have failed.
    fn each(
        &mut self,
        mut op: impl FnMut(&mut dyn EventSink) -> Result<(), SinkError>,
    ) -> Result<(), SinkError> {
        let mut last_error = None;
        for slot in self.slots.iter_mut().filter(|s| s.failed.is_none()) {
            if let Err(e) = op(slot.sink.as_mut()) {
                if !e.is_broken_pipe() {
                    crate::message::note(format_args!(
                        "nodeip-trace: {e}; that output is closed, the trace goes on"
                    ));
                }
                slot.failed = Some(e.to_string());
                if let Some(path) = &slot.recording {
                    let _ = crate::sink::cut_to_last_line(path);
                }
                last_error = Some(e);
            }
        }
        match last_error {
            Some(e) if self.slots.iter().all(|s| s.failed.is_some()) => Err(e),
            _ => Ok(()),
        }
    }

    fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        // Every event counts, a resolver call opening its span included.
        match item {
            Emitted::Frame(_) => self.frames += 1,
            _ => {
                if let Some(e) = item.event() {
                    let kind = e.body.kind();
                    match self
                        .counts
                        .iter_mut()
                        .find(|(k, _)| std::ptr::eq(*k, kind) || *k == kind)
                    {
                        Some((_, n)) => *n += 1,
                        None => self.counts.push((kind, 1)),
                    }
                }
            }
        }
        self.each(|s| s.write(item))
    }

    /// Writes a header or summary (not counted as an event).
    fn write_meta(&mut self, event: &Event) -> Result<(), SinkError> {
        let item = Emitted::Event(Box::new(event.clone()));
        self.each(|s| s.write(&item))
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.each(|s| s.flush())
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.each(|s| s.finish())
    }

    /// The most any output reads of a netlink message (none: [`MessageDetail::Shown`]).
    fn detail(&self) -> MessageDetail {
        let each = self.slots.iter().map(|slot| slot.sink.detail());
        each.max().unwrap_or(MessageDetail::Shown)
    }

    /// Whether any output reads events (see [`EventSink::reads_events`]).
    fn reads_events(&self) -> bool {
        self.slots.iter().any(|slot| slot.sink.reads_events())
    }

    /// The outputs that failed, with why.
    fn failures(&self) -> Vec<String> {
        self.slots.iter().filter_map(|s| s.failed.clone()).collect()
    }
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

/// The file `program` names as `execvp` finds it: itself when it has a `/`, else the first
/// executable of that name in `$PATH`.
fn command_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// Starts the command. The caller has put this process in the pid filter with fork following on,
/// so the kernel side adds the child at fork time, before it can exec or do anything.
fn spawn_command(
    command: &[String],
    stdout_to_stderr: bool,
) -> Result<tokio::process::Child, TraceError> {
    use std::os::fd::{AsFd, OwnedFd};
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    if stdout_to_stderr {
        let stderr: Result<OwnedFd, _> = std::io::stderr().as_fd().try_clone_to_owned();
        if let Ok(fd) = stderr {
            cmd.stdout(std::process::Stdio::from(fd));
        }
    }
    cmd.spawn().map_err(|source| TraceError::Spawn {
        command: command.join(" "),
        source,
    })
}

/// The exit code `trace` passes on for the traced command (a shell's: 128+N when signal N killed
/// it) and how the summary says the command ended: `command exited (3)`, `command killed by
/// SIGSEGV (core dumped)`. `None`: waiting for it failed.
pub fn command_outcome(status: Option<std::process::ExitStatus>) -> (i32, String) {
    use std::os::unix::process::ExitStatusExt;
    let Some(status) = status else {
        return (1, "command ended (waiting for it failed)".into());
    };
    if let Some(code) = status.code() {
        return (code, format!("command exited ({code})"));
    }
    let signal = status.signal().unwrap_or(0);
    let core = if status.core_dumped() {
        " (core dumped)"
    } else {
        ""
    };
    (
        128 + signal,
        format!("command killed by {}{core}", signal_name(signal)),
    )
}

/// `SIGSEGV` for 11; `signal 40` for what has no name here.
fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSYS => "SIGSYS",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {signal}"),
    };
    name.into()
}

/// A pcap writer, and the count of its bytes when file outputs are size-limited.
type PcapOutput = (
    Box<dyn crate::sink::pcap::FrameSink>,
    Option<Arc<AtomicU64>>,
);

/// Opens a pcap (or pcapng) writer on a file, or stdout for `-` (flushed per frame, never
/// size-limited).
fn pcap_writer(
    sinks: &Sinks,
    files: &mut UnstartedOutputs,
    path: &std::path::Path,
    pcapng: bool,
) -> Result<PcapOutput, TraceError> {
    use crate::sink::pcap::{NlmonPcapngWriter, NlmonWriter, SectionInfo};
    let to_stdout = path.as_os_str() == "-";
    let (out, written): (Box<dyn Write>, _) = if to_stdout {
        (Box::new(std::io::stdout()), None)
    } else {
        let file = files.create(path)?;
        let (out, written) = sinks.file_writer(file);
        (Box::new(out), written)
    };
    let err = |source: crate::sink::pcap::PcapError| {
        TraceError::Sink(SinkError::Pcap {
            what: path.display().to_string(),
            source,
        })
    };
    let writer: Box<dyn crate::sink::pcap::FrameSink> = if pcapng {
        Box::new(
            NlmonPcapngWriter::new(out, &SectionInfo::from_host())
                .map_err(err)?
                .with_namespaces(Box::new(crate::probe::kernel_dump::ProcInterfaceDirectory))
                .flush_each_frame(to_stdout),
        )
    } else {
        Box::new(
            NlmonWriter::new(out)
                .map_err(err)?
                .flush_each_frame(to_stdout),
        )
    };
    Ok((writer, written))
}

/// How often the consumer looks at the queue and its timers unasked. Records wake it themselves:
/// the drain thread hands them over (after at most 10 ms while more come, at once when the
/// ring is empty again), and exec records wake it from the kernel. Each wake-up costs the
/// guest of the VM lane some 200 µs under QEMU TCG, so an idle tracer should make few.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How often what is known of exited processes is forgotten.
const FORGET_EXITED_PERIOD: Duration = Duration::from_secs(10);

/// Records decoded, correlated and written out per batch; between batches the ring is emptied
/// into the queue. The records and events of a batch are all held until it is written out, so
/// a small batch keeps them in the CPU's caches when they are written and freed: with 1,024, a
/// JSON burst's consumer spent 9% of its time in one load, mimalloc reading a freed block's
/// next pointer out of cold memory. 64 cut its CPU per event by 7–8% (median of 8–10 paired
/// runs, 32 and 128 alike; BENCHMARKS.md, 2026-11-28 13:00).
const RECORDS_PER_BATCH: usize = 64;

/// The output files of a trace, opened before anything is attached, kept only once it has
/// started. A failed start (probes refused, the command not found) leaves no empty recording or
/// pcap behind to be taken for a trace of nothing, and takes nothing away: an output that was
/// already a regular file is written to a copy beside it ([`crate::sink::beside`]), which
/// replaces it when the trace starts, so the earlier recording survives a failed start whole.
struct UnstartedOutputs {
    /// Files this trace made: removed unless it starts.
    made: Vec<std::path::PathBuf>,
    /// Copies beside existing files, and the file each replaces when the trace starts.
    replacing: Vec<(std::path::PathBuf, std::path::PathBuf)>,
}

impl UnstartedOutputs {
    /// No output opened yet.
    fn new() -> Self {
        Self {
            made: Vec::new(),
            replacing: Vec::new(),
        }
    }

    /// Opens the output file `path` for writing (owner-only, [`crate::sink::create_private`]):
    /// a new file, or a copy beside an existing regular one (through a symbolic link, beside
    /// its target, which the link keeps naming). Where no copy can be made beside it (a
    /// directory this process may not write), the file itself is truncated, as before.
    fn create(&mut self, path: &std::path::Path) -> Result<std::fs::File, TraceError> {
        let fail = |source| TraceError::Create {
            path: path.to_path_buf(),
            source,
        };
        let existing = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| Some((m, std::fs::canonicalize(path).ok()?)));
        if let Some((metadata, target)) = existing {
            let copy = crate::sink::beside(&target, "unstarted");
            // A copy left by a tracer that was killed before it started (same pid, later boot).
            let _ = std::fs::remove_file(&copy);
            if let Ok(file) = crate::sink::create_private_new(&copy) {
                // The copy keeps the owner of the file it replaces, as truncating that file in
                // place did (its mode is narrowed to 0600 either way). Best effort: a file
                // system without owners refuses, and the output is still written.
                use std::os::unix::fs::MetadataExt as _;
                let _ =
                    std::os::unix::fs::fchown(&file, Some(metadata.uid()), Some(metadata.gid()));
                self.replacing.push((copy, target));
                return Ok(file);
            }
            return crate::sink::create_private(path).map_err(fail);
        }
        let is_new = std::fs::symlink_metadata(path).is_err();
        let file = crate::sink::create_private(path).map_err(fail)?;
        if is_new {
            self.made.push(path.to_path_buf());
        }
        Ok(file)
    }

    /// The trace started: its outputs stay, each copy replacing the file it was made beside.
    fn started(mut self) -> Result<(), TraceError> {
        self.made.clear();
        for (copy, target) in std::mem::take(&mut self.replacing) {
            if let Err(source) = std::fs::rename(&copy, &target) {
                let _ = std::fs::remove_file(&copy);
                return Err(TraceError::Create {
                    path: target,
                    source,
                });
            }
        }
        Ok(())
    }
}

impl Drop for UnstartedOutputs {
    fn drop(&mut self) {
        for path in &self.made {
            let _ = std::fs::remove_file(path);
        }
        for (copy, _) in &self.replacing {
            let _ = std::fs::remove_file(copy);
        }
    }
}

/// The outputs a trace writes, opened before anything is attached: what they read decides
/// which hooks are worth attaching (a plain pcap alone needs the netlink capture only). Also
/// whether stdout carries machine output (a traced command's stdout then goes to stderr), and
/// the generic-netlink families known up front (id → name).
fn open_sinks(
    opts: &TraceOptions,
    files: &mut UnstartedOutputs,
) -> Result<(Sinks, bool, BTreeMap<u16, String>), TraceError> {
    let stdout_machine = opts.format.is_some_and(|f| f != OutputFormat::Text)
        || opts.pcap.as_deref() == Some(std::path::Path::new("-"))
        || opts.pcapng.as_deref() == Some(std::path::Path::new("-"));
    let mut sinks = Sinks {
        slots: Vec::new(),
        counts: Vec::new(),
        frames: 0,
        max_output_bytes: opts.max_output_bytes,
        dropped: Vec::new(),
    };
    // Buffered, flushed after each batch of records (a line-buffered stdout made one write per
    // event: a third of the tracer's time under load).
    if let Some(format) = opts.format {
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
        sinks.add(timeline_sink(format, out, "stdout", false), None);
    }
    if let Some(path) = &opts.output {
        let file = files.create(path)?;
        // The sink collects its lines itself and writes them in one call: no `BufWriter`.
        let (out, written, write_size) = sinks.file_destination(file);
        let name = path.display().to_string();
        sinks.add_file(
            Box::new(JsonLinesSink::new(out, name.clone(), false).with_write_size(write_size)),
            LimitedRecords::Events,
            name,
            written,
            Some(path.clone()),
        );
    }
    if let Some(path) = &opts.report {
        let file = files.create(path)?;
        sinks.add(
            Box::new(
                crate::sink::html::HtmlReportSink::new(
                    std::io::BufWriter::new(file),
                    path.display().to_string(),
                )
                .with_source("a live trace"),
            ),
            None,
        );
    }
    let mut families = crate::probe::kernel_dump::genl_families();
    families.extend(opts.genl_families.iter().cloned());
    if let Some(path) = &opts.pcap {
        let (writer, written) = pcap_writer(&sinks, files, path, false)?;
        let name = path.display().to_string();
        sinks.add_file(
            Box::new(crate::sink::FrameSinkAdapter::new(
                writer,
                name.clone(),
                families.clone(),
            )),
            LimitedRecords::Frames,
            name,
            written,
            None,
        );
    }
    if let Some(path) = &opts.pcapng {
        let (writer, written) = pcap_writer(&sinks, files, path, true)?;
        let name = path.display().to_string();
        sinks.add_file(
            Box::new(
                crate::sink::FrameSinkAdapter::new(writer, name.clone(), families.clone())
                    .with_section_comments(crate::sink::pcap::SectionComments::for_output(path))
                    .with_closing_comment(Box::new(crate::command::explain::node_audit_summary)),
            ),
            LimitedRecords::Frames,
            name,
            written,
            None,
        );
    }
    Ok((sinks, stdout_machine, families))
}

/// Runs a trace.
pub async fn run(opts: TraceOptions) -> Result<TraceEnd, TraceError> {
    for path in [&opts.output, &opts.pcap, &opts.pcapng, &opts.report]
        .into_iter()
        .flatten()
    {
        crate::command::output_paths::check_output_path(path).map_err(|refused| {
            TraceError::PodControlledOutput {
                path: path.clone(),
                resolved: refused.resolved,
                what: refused.what,
            }
        })?;
    }
    for pid in &opts.config.pids {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(TraceError::NoSuchPid(*pid));
        }
    }
    let mut startup = StartupPhases::new();
    let features = KernelFeatures::detect(true);
    startup.end("kernel features");
    let blockers = features.trace_blockers();
    if !blockers.is_empty() {
        return Err(ProbeError::CannotTrace { blockers }.into());
    }
    for note in features.degradations() {
        crate::message::note(format_args!("nodeip-trace: {note}"));
    }
    let mut config = opts.config.clone();
    if !opts.command.is_empty() {
        config.filter_by_pid = true;
        config.follow_forks = true;
    }
    let mut unstarted = UnstartedOutputs::new();
    let (mut sinks, stdout_machine, families) = open_sinks(&opts, &mut unstarted)?;
    let frames_only = !sinks.reads_events();
    if frames_only {
        // Nothing reads events: route lookups, resolver calls and kernel handler calls would
        // be recorded in the kernel only to be dropped here. Netlink buffers alone are captured.
        config.route_lookups = false;
        config.getaddrinfo = false;
        config.kernel_handlers = false;
    }
    startup.end("outputs");
    let mut tracer = LiveTracer::start(&config, &features, &features.libcs)?;
    startup.end("eBPF load and attach");
    let mut known = 0usize;
    for s in scan_all(std::path::Path::new("/proc")) {
        if tracer.add_netlink_socket(&s).is_ok() {
            known += 1;
        }
    }
    startup.end("netlink sockets");
    let waiting =
        WaitingFlag::new(tracer.take_reader_waiting_flag()?).map_err(|source| TraceError::Io {
            what: "mapping the READER_WAITING flag",
            source,
        })?;
    let mut source = LiveSource::new(tracer.take_ring_buffer()?, waiting, opts.spill.clone())
        .map_err(|source| TraceError::Io {
            what: "polling the ring buffer",
            source,
        })?;
    // The spill file is made now, so that a directory that cannot take it (none, read-only,
    // a container image without /tmp) is known before a burst needs it.
    if let (Some(spill), Err(e)) = (&opts.spill, source.open_spill()) {
        crate::message::note(format_args!(
            "nodeip-trace: cannot make the spill file in {} ({e}): records beyond the {} MiB \
             in-memory queue will wait in the ring buffer, and what it cannot hold is lost; set \
             TMPDIR to a writable directory (or --spill-mib 0 to not try)",
            spill.dir.display(),
            crate::source::live::QUEUE_MAX_BYTES >> 20
        ));
    }
    let clock = WallClock::now();
    let routes = match tracefs::find() {
        Some(root) => RouteLookupDecoder::new(
            &tracefs::event_format(&root, "fib", "fib_table_lookup").unwrap_or_default(),
            &tracefs::event_format(&root, "fib6", "fib6_table_lookup").unwrap_or_default(),
        ),
        None => RouteLookupDecoder::default(),
    };
    let mut pipeline = Pipeline::new(clock, routes)
        .with_interface_directory(Box::new(crate::probe::kernel_dump::ProcInterfaceDirectory))
        .with_resolver_config(Box::new(crate::probe::resolver_config::ProcResolverConfig))
        .with_process_directory(Box::new(
            crate::probe::process_table::ProcProcessDirectory::default(),
        ));
    // New programs are held at exec until probed, where the kernel allows it (before the
    // start-up scan, so a program that starts during it is held too).
    let mut exec_hold: Result<ExecHold, String> = match opts.exec_hold {
        Some(limit) if config.getaddrinfo => ExecHold::new(limit).map_err(|e| e.to_string()),
        Some(_) => Err("no output reads resolver calls".into()),
        None => Err("--exec-hold off".into()),
    };
    if let Err(why) = &exec_hold {
        if opts.exec_hold.is_some() && config.getaddrinfo {
            crate::message::note(format_args!(
                "nodeip-trace: programs that start during the trace are probed after they start, \
                 so their first lookups can be missed: {why}"
            ));
        }
    }
    // The one exec watcher: every running program's resolvers now (each file once), each new
    // one at its exec.
    let mut exec_watcher = ExecWatcher::new(&features.libcs, &tracer.hooks);
    let mark_known = |hold: &Result<ExecHold, String>, file: &std::fs::File| {
        if let Ok(h) = hold {
            h.mark_known(file);
        }
    };
    if config.getaddrinfo {
        say_outcomes(exec_watcher.scan_running(&mut tracer, |f| mark_known(&exec_hold, f)));
        startup.end("executables");
    }

    for (id, name) in &families {
        pipeline.netlink_decoder().learn_family(*id, name);
    }
    pipeline.netlink_decoder().set_detail(sinks.detail());
    if frames_only {
        pipeline.make_frames_only();
    }
    let hooks: Vec<String> = tracer.hooks.iter().map(|h| h.describe()).collect();
    let header = meta_event(
        &clock,
        EventBody::Header(Box::new(RecordingHeader {
            schema: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            kernel: features.kernel.clone(),
            host: crate::probe::resolver_config::machine_hostname(),
            hooks: hooks.clone(),
            hook_preference: config.hooks.name().into(),
            netlink_capture: tracer.netlink_capture.clone(),
            exec_hold: exec_hold_state(&exec_hold),
            handler_hooks: tracer.handler_modes.clone(),
            kernel_limits: features.degradations(),
            filters: opts.filter_description.clone(),
            clock_offset_ns: (clock.wall_ns(0)) as i64,
        })),
    );
    sinks.write_meta(&header)?;

    let attached = tracer.hooks.iter().filter(|h| h.status.is_ok()).count();
    let failed: Vec<String> = tracer
        .hooks
        .iter()
        .filter(|h| h.status.is_err() && h.mode != crate::probe::hooks::HookMode::Off)
        .map(|h| h.describe())
        .collect();
    let mut handler_summary: BTreeMap<&str, usize> = BTreeMap::new();
    for mode in tracer.handler_modes.values() {
        *handler_summary.entry(mode).or_default() += 1;
    }
    crate::message::note(format_args!(
        "nodeip-trace: {attached} hooks attached in {} (netlink capture: {}; new programs held at exec: {}; kernel handlers, --hooks {}: {}), {known} netlink sockets known{}; Ctrl-C stops",
        startup.describe(),
        tracer.netlink_capture,
        exec_hold_state(&exec_hold),
        config.hooks.name(),
        if frames_only {
            "none (a plain pcap alone: route lookups, resolver calls and kernel handler calls \
             are not traced, as no output reads them; add --format or -o to have them)"
                .to_string()
        } else if handler_summary.is_empty() {
            "none".to_string()
        } else {
            handler_summary
                .iter()
                .map(|(mode, n)| format!("{mode} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        if failed.is_empty() { String::new() } else { format!(", {} not attached (see `nodeip-trace doctor`)", failed.len()) }
    ));

    // The command: our own fork of it is followed by the kernel side, so it is traced from
    // its first instruction; then we leave the filter again.
    let mut child = None;
    if let Ok(hold) = &mut exec_hold {
        if let Err(e) = hold.start_threads() {
            crate::message::note(format_args!("nodeip-trace: {e}; new programs are not held"));
            exec_hold = Err(e.to_string());
        }
    }
    if !opts.command.is_empty() {
        let me = std::process::id();
        tracer.add_traced_pid(me)?;
        // The command's own file (and its dynamic loader) is probed before it starts, so its
        // first lookups are seen and its exec is not held.
        if config.getaddrinfo {
            if let Some(path) = command_path(&opts.command[0]) {
                say_outcomes(
                    exec_watcher.before_command(&mut tracer, &path, |f| mark_known(&exec_hold, f)),
                );
            }
        }
        let spawned = spawn_command(&opts.command, stdout_machine);
        tracer.remove_traced_pid(me)?;
        child = Some(spawned?);
    }
    unstarted.started()?;
    // Attached, outputs open, the command started with the caller's privileges: keep only what
    // attaching to what starts later needs (docs/security.md).
    match crate::probe::privileges::drop_to_running_set() {
        Ok(d) => crate::message::note(format_args!(
            "nodeip-trace: {} capabilities dropped; kept {}",
            d.dropped,
            d.kept.join(", ")
        )),
        Err(e) => crate::message::note(format_args!("nodeip-trace: {e}")),
    }
    // After the drop: a thread is made with its creator's capability sets.
    source
        .start_drain_thread()
        .map_err(|source| TraceError::Io {
            what: "starting the ring buffer's drain thread",
            source,
        })?;

    let mut sigint = signal(SignalKind::interrupt()).map_err(|source| TraceError::Io {
        what: "installing SIGINT handler",
        source,
    })?;
    let mut sigterm = signal(SignalKind::terminate()).map_err(|source| TraceError::Io {
        what: "installing SIGTERM handler",
        source,
    })?;
    // A closed terminal or `ssh` session ends the trace cleanly too, outputs complete.
    let mut sighup = signal(SignalKind::hangup()).map_err(|source| TraceError::Io {
        what: "installing SIGHUP handler",
        source,
    })?;
    // A stopped tracer would make every new program of the node wait the hold's limit (its
    // guard lets them go then): while programs are held at exec, Ctrl-Z (SIGTSTP) is caught
    // and said, not obeyed.
    let mut sigtstp = match &exec_hold {
        Ok(_) => Some(
            signal(SignalKind::from_raw(libc::SIGTSTP)).map_err(|source| TraceError::Io {
                what: "installing SIGTSTP handler",
                source,
            })?,
        ),
        Err(_) => None,
    };
    // Written once every handler is in place: whoever waits for it may signal at once.
    if let Some(path) = &opts.ready_file {
        std::fs::write(path, format!("{}\n", std::process::id())).map_err(|source| {
            TraceError::ReadyFile {
                path: path.clone(),
                source,
            }
        })?;
    }
    let mut stopped_by = String::from("running");
    let deadline = opts.duration.map(|d| tokio::time::Instant::now() + d);
    let mut records = Vec::new();
    let mut record_errors: Vec<RecordError> = Vec::new();
    let mut record_error_count = 0u64;
    let mut out = Vec::new();
    let mut rescanned: HashMap<u32, Instant> = HashMap::new();
    let mut netns_cache = NetnsCache::default();
    let mut forgotten = Instant::now();
    let mut end = TraceEnd::Stopped;
    let held_wake = exec_hold.as_ref().ok().map(ExecHold::wake);
    let mut poll = tokio::time::interval(POLL_INTERVAL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if let Some(running) = opts.on_running {
        running();
    }
    let result: Result<(), TraceError> = async {
        loop {
            let child_wait = async {
                match child.as_mut() {
                    Some(c) => c.wait().await.ok(),
                    None => std::future::pending().await,
                }
            };
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let held = async {
                match &held_wake {
                    Some(w) => w.notified().await,
                    None => std::future::pending().await,
                }
            };
            let tstp = async {
                match sigtstp.as_mut() {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            };
            let mut stop = false;
            tokio::select! {
                _ = held => {}
                _ = tstp => {
                    crate::message::note(format_args!(
                        "nodeip-trace: not stopping on Ctrl-Z: a stopped tracer would hold every new program at its exec; Ctrl-C ends the trace"
                    ));
                }
                r = source.readable() => { r.map_err(|source| TraceError::Io { what: "polling the ring buffer", source })?; }
                _ = poll.tick() => {}
                status = child_wait => {
                    let (code, how) = command_outcome(status);
                    end = TraceEnd::CommandExited(code);
                    stopped_by = how;
                    stop = true;
                }
                _ = sleep => { stop = true; stopped_by = "duration".into(); }
                _ = sigint.recv() => { stop = true; stopped_by = "SIGINT".into(); }
                _ = sigterm.recv() => { stop = true; stopped_by = "SIGTERM".into(); }
                _ = sighup.recv() => { stop = true; stopped_by = "SIGHUP".into(); }
            }
            if let Ok(hold) = &exec_hold {
                serve_held_execs(hold, &mut exec_watcher, &mut tracer, &config, &mut pipeline, &mut out);
            }
            say_outcomes(exec_watcher.tick(&mut tracer));
            if stop {
                // Give in-flight records a moment to land, then drain everything.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            loop {
                records.clear();
                source.drain(&mut records, &mut record_errors, RECORDS_PER_BATCH);
                let batch = records.len();
                for rec in records.drain(..) {
                    if let crate::decode::record::KernelRecord::UnknownNetlinkSocket(h) = &rec {
                        let tgid = (h.pid_tgid >> 32) as u32;
                        let due = rescanned.get(&tgid).map(|t| t.elapsed() > Duration::from_secs(1)).unwrap_or(true);
                        if due {
                            rescanned.insert(tgid, Instant::now());
                            for s in sockets_of(std::path::Path::new("/proc"), tgid, &mut netns_cache) {
                                let _ = tracer.add_netlink_socket(&s);
                            }
                        }
                    }
                    // Without the hold, new programs are probed here, after they start. With it,
                    // this still finds a known program's libc in a new root (the same inode
                    // bind-mounted into a container, which no hold sees).
                    if let crate::decode::record::KernelRecord::Exec(r) = &rec {
                        if config.getaddrinfo {
                            let executed = crate::decode::record::c_string(&r.filename);
                            say_outcomes(exec_watcher.on_exec_record(
                                &mut tracer,
                                (r.header.pid_tgid >> 32) as u32,
                                std::path::Path::new(&executed),
                            ));
                        }
                    }
                    pipeline.on_kernel_record(rec, &mut out);
                }
                // A program held at exec waits for this loop: served between batches too.
                if let Ok(hold) = &exec_hold {
                    serve_held_execs(hold, &mut exec_watcher, &mut tracer, &config, &mut pipeline, &mut out);
                }
                write_out(&mut sinks, &mut pipeline, &opts.process_filter, &mut out)?;
                if batch < RECORDS_PER_BATCH {
                    break;
                }
            }
            sinks.flush()?;
            if forgotten.elapsed() >= FORGET_EXITED_PERIOD {
                pipeline.forget_exited_processes();
                // A rescan older than its 1 s pause decides nothing any more.
                rescanned.retain(|_, at| at.elapsed() <= Duration::from_secs(1));
                forgotten = Instant::now();
            }
            for e in record_errors.drain(..) {
                record_error_count += 1;
                if record_error_count == 1 {
                    crate::message::note(format_args!("nodeip-trace: {e}"));
                }
            }
            if stop {
                return Ok(());
            }
        }
    }
    .await;
    // No exec waits for this loop any more: everything held goes, nothing new is held while
    // the trace ends (detaching thousands of uprobes can take minutes).
    let exec_holds = exec_hold.as_ref().ok().map(|h| {
        let c = h.counts();
        crate::model::event::ExecHoldCounts {
            held: c.held,
            released_unprobed: c.released_at_limit,
        }
    });
    drop(exec_hold);
    if let Err(e) = result {
        if let TraceError::Sink(s) = &e {
            if s.is_broken_pipe() {
                return Ok(end);
            }
        }
        return Err(e);
    }
    pipeline.finish(&mut out);
    write_out(&mut sinks, &mut pipeline, &opts.process_filter, &mut out)?;
    let counters = tracer.counters()?;
    let mut lost = lost_report(&counters, record_error_count);
    // Records a size-limited output did not take: the most any one output missed.
    let dropped = sinks.dropped_at_limit();
    for (name, n) in &dropped {
        crate::message::note(format_args!(
            "nodeip-trace: {name}: {n} records not written (--max-output-mib reached)"
        ));
    }
    if let Some(most) = dropped.iter().map(|(_, n)| *n).max() {
        lost.counts
            .insert("output_limit_records_dropped".into(), most);
        lost.lost += most;
    }
    let (spill_lost, queue_peak, spill_said) = source.with_queue(|queue| {
        (
            queue.spill_lost(),
            queue.peak_bytes(),
            spill_summary(queue, opts.spill.as_ref()),
        )
    });
    if spill_lost > 0 {
        lost.counts
            .insert("record_queue_spill_unreadable".into(), spill_lost);
        lost.lost += spill_lost;
    }
    let lost_total = lost.lost;
    // A run that lost records to a full ring says how late its drain thread came at worst.
    let ring_full = lost
        .counts
        .iter()
        .any(|(reason, n)| reason.ends_with("ringbuf_full") && *n > 0);
    let drain_said = if ring_full {
        let d = source.drain_delays();
        let missed = match d.missed_wakeups {
            0 => String::new(),
            n => format!(
                ", and it found the ring over half full {} after a wait for the kernel's \
                 wake-up (woken late or not at all)",
                super::count_of(n, "time")
            ),
        };
        format!(
            "; ring buffer found up to {}% full, its drain thread late by up to {} ms (its CPU) \
             and blocked up to {} ms (the queue's lock){missed}",
            d.fullest * 100 / d.ring.max(1),
            d.oversleep.as_millis(),
            d.lock_wait.as_millis()
        )
    } else {
        String::new()
    };
    if !lost.counts.is_empty() {
        sinks.write(&Emitted::Event(Box::new(meta_event(
            &clock,
            EventBody::Lost(lost.clone()),
        ))))?;
    }
    let summary = RunSummary {
        exec_holds,
        events: sinks
            .counts
            .iter()
            .map(|(kind, n)| (kind.to_string(), *n))
            .collect(),
        lost: lost_total,
        stopped_by: stopped_by.clone(),
    };
    let summary_event = meta_event(&clock, EventBody::Summary(summary.clone()));
    let _ = sinks.write_meta(&summary_event);
    let _ = sinks.finish();
    let failures = sinks.failures();
    let total: u64 = summary.events.values().sum();
    // Without an output that reads events, none were made: what was captured is the frames.
    let made = if sinks.reads_events() {
        format!("{total} events")
    } else {
        format!(
            "{} netlink buffers captured (no events made: no output reads them)",
            sinks.frames
        )
    };
    let _ = writeln!(
        std::io::stderr(),
        "nodeip-trace: {made}, {lost_total} lost{}; stopped by {stopped_by}; record queue peak {:.1} MiB of {}{}{drain_said}{}",
        if lost.counts.is_empty() {
            String::new()
        } else {
            format!(" ({:?})", lost.counts)
        },
        queue_peak as f64 / (1 << 20) as f64,
        crate::source::live::QUEUE_MAX_BYTES >> 20,
        spill_said,
        if failures.is_empty() {
            String::new()
        } else {
            format!("; outputs that failed: {}", failures.join("; "))
        }
    );
    tracer.detach_uprobes();
    drop(tracer);
    if !failures.is_empty() {
        return Err(TraceError::OutputsFailed(failures.join("; ")));
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::command_outcome;

    #[test]
    fn a_command_that_exits_passes_its_code_on() {
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(3 << 8))),
            (3, "command exited (3)".into())
        );
    }

    #[test]
    fn a_crashed_command_is_named_with_its_signal_and_a_shells_code() {
        // wait(2) status: signal 11 with the core-dump bit (0x80).
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(11 | 0x80))),
            (139, "command killed by SIGSEGV (core dumped)".into())
        );
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(libc::SIGKILL))),
            (137, "command killed by SIGKILL".into())
        );
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(40))),
            (168, "command killed by signal 40".into())
        );
    }
}
