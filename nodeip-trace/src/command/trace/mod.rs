//! `nodeip-trace trace`: attach, optionally run a command, stream the timeline until the command
//! exits, the duration passes, or Ctrl-C/SIGTERM; then detach, flush and report what was lost.
//!
//! This file holds the options, the errors and the run itself (start, the loop, the end); its
//! parts apart: `outputs` (opening the outputs, the fan-out to them), `child` (the command
//! `trace -- CMD` starts), `held_execs` (serving the exec hold), `losses` (what was lost).
mod child;
mod held_execs;
mod losses;
mod outputs;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};

use crate::correlate::process_filter::ProcessFilter;
use crate::decode::record::RecordError;
use crate::decode::route_lookup::RouteLookupDecoder;
use crate::host::netlink_sockets::{scan_all, sockets_of, NetnsCache};
use crate::model::clock::WallClock;
use crate::model::emitted::Emitted;
use crate::model::event::{Event, EventBody, RecordingHeader, RunSummary, SCHEMA_VERSION};
use crate::pipeline::Pipeline;
use crate::probe::exec_hold::ExecHold;
use crate::probe::exec_watcher::ExecWatcher;
use crate::probe::features::KernelFeatures;
use crate::probe::loader::{LiveTracer, TraceConfig};
use crate::probe::{tracefs, ProbeError};
use crate::sink::{OutputFormat, SinkError};
use crate::source::live::{LiveSource, RecordQueue, SpillConfig, WaitingFlag};

use child::{command_outcome, command_path, spawn_command};
use held_execs::{exec_hold_state, say_outcomes, serve_held_execs};
use losses::lost_report;
use outputs::{open_sinks, Sinks, UnstartedOutputs};

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
/// runs, 32 and 128 alike; `git show 3c0bc23:BENCHMARKS.md`, 2026-11-28 13:00).
const RECORDS_PER_BATCH: usize = 64;

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
        .with_interface_directory(Box::new(crate::host::kernel_dump::ProcInterfaceDirectory))
        .with_resolver_config(Box::new(crate::host::resolver_config::ProcResolverConfig))
        .with_process_directory(Box::new(
            crate::host::process_table::ProcProcessDirectory::default(),
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
            host: crate::host::resolver_config::machine_hostname(),
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
    let failures = sinks.take_failures();
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
            format!("; outputs that failed: {}", failures_text(&failures))
        }
    );
    tracer.detach_uprobes();
    drop(tracer);
    if !failures.is_empty() {
        return Err(TraceError::OutputsFailed(failures));
    }
    Ok(end)
}
