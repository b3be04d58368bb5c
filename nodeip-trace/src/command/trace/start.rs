//! A trace's start: the checks, the kernel side loaded and attached, the outputs opened, the
//! running programs probed, the header written, the command started, privileges dropped. What
//! it makes is a [`LiveTrace`], which the loop (`pump`) runs and `stop` ends.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::decode::route_lookup::RouteLookupDecoder;
use crate::host::netlink_sockets::scan_all;
use crate::model::clock::WallClock;
use crate::model::event::{EventBody, RecordingHeader, SCHEMA_VERSION};
use crate::pipeline::Pipeline;
use crate::probe::exec_hold::ExecHold;
use crate::probe::exec_watcher::ExecWatcher;
use crate::probe::features::KernelFeatures;
use crate::probe::loader::{LiveTracer, TraceConfig};
use crate::probe::{tracefs, ProbeError};
use crate::source::address_notices::AddressNotices;
use crate::source::live::{LiveSource, WaitingFlag};

use super::child::{command_path, spawn_command};
use super::held_execs::{exec_hold_state, say_outcomes};
use super::outputs::{open_sinks, Sinks, UnstartedOutputs};
use super::{meta_event, TraceError, TraceOptions};

/// A trace that has started: what the loop reads, decodes and writes with.
pub(super) struct LiveTrace {
    /// What the kernel side traces (the options' own, adjusted to the outputs and the command).
    pub(super) config: TraceConfig,
    /// The kernel side: programs, maps, attached hooks.
    pub(super) tracer: LiveTracer,
    /// The records the kernel side delivers, in order.
    pub(super) source: LiveSource,
    /// Decode, correlate, explain.
    pub(super) pipeline: Pipeline,
    /// The outputs.
    pub(super) sinks: Sinks,
    /// New programs held at exec until probed, or why not.
    pub(super) exec_hold: Result<ExecHold, String>,
    /// The one exec watcher: which files are classified and probed.
    pub(super) exec_watcher: ExecWatcher,
    /// The command `trace -- CMD` started.
    pub(super) child: Option<tokio::process::Child>,
    /// Kernel timestamps to wall-clock time.
    pub(super) clock: WallClock,
    /// The kernel's address notices in the tracer's own network namespace (the address
    /// ledger's changes that no traced request explains), and that namespace's inode; `None`
    /// when the socket could not be opened.
    pub(super) address_notices: Option<(AddressNotices, u64)>,
}

/// The kernel's address notices in our own namespace, with its inode; `None` (said with `-v`)
/// when the socket cannot be had: the ledger then lists requests alone.
fn address_notices(verbose: bool) -> Option<(AddressNotices, u64)> {
    let opened = AddressNotices::open().and_then(|notices| {
        let netns = crate::host::kernel_dump::netns_of(std::process::id())
            .ok_or_else(|| std::io::Error::other("/proc/self/ns/net could not be read"))?;
        Ok((notices, netns))
    });
    match opened {
        Ok(notices) => Some(notices),
        Err(e) => {
            if verbose {
                crate::message::note(format_args!(
                    "nodeip-trace: not listening to the kernel's address notices ({e}): the address changes listed are the traced requests alone"
                ));
            }
            None
        }
    }
}

/// How long each step of a trace's start-up took, for the start line: a start-up of seconds (a
/// slow or emulated machine, many executables to scan) then says where they went.
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

    /// `kernel features 20 ms, outputs 1 ms, …`: each step.
    fn steps(&self) -> String {
        let steps: Vec<String> = self
            .phases
            .iter()
            .map(|(name, took)| format!("{name} {} ms", took.as_millis()))
            .collect();
        steps.join(", ")
    }
}

/// Refuses a trace whose outputs lie where traced pods can write, or whose `--pid`s do not run.
fn check_options(opts: &TraceOptions) -> Result<(), TraceError> {
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
    Ok(())
}

/// The ring buffer's reader, with its spill file made now: a directory that cannot take it
/// (none, read-only, a container image without /tmp) is known before a burst needs it.
fn open_source(tracer: &mut LiveTracer, opts: &TraceOptions) -> Result<LiveSource, TraceError> {
    let waiting =
        WaitingFlag::new(tracer.take_reader_waiting_flag()?).map_err(|source| TraceError::Io {
            what: "mapping the READER_WAITING flag",
            source,
        })?;
    let source = LiveSource::new(tracer.take_ring_buffer()?, waiting, opts.spill.clone()).map_err(
        |source| TraceError::Io {
            what: "polling the ring buffer",
            source,
        },
    )?;
    if let (Some(spill), Err(e)) = (&opts.spill, source.open_spill()) {
        crate::message::note(format_args!(
            "nodeip-trace: cannot make the spill file in {} ({e}): records beyond the {} MiB \
             in-memory queue will wait in the ring buffer, and what it cannot hold is lost; set \
             TMPDIR to a writable directory (or --spill-mib 0 to not try)",
            spill.dir.display(),
            crate::source::live::QUEUE_MAX_BYTES >> 20
        ));
    }
    Ok(source)
}

/// The pipeline with the host's directories (interfaces, resolver configuration, processes)
/// and the kernel's route-lookup event formats.
fn live_pipeline(clock: WallClock) -> Pipeline {
    let routes = match tracefs::find() {
        Some(root) => RouteLookupDecoder::new(
            &tracefs::event_format(&root, "fib", "fib_table_lookup").unwrap_or_default(),
            &tracefs::event_format(&root, "fib6", "fib6_table_lookup").unwrap_or_default(),
        ),
        None => RouteLookupDecoder::default(),
    };
    Pipeline::new(clock, routes)
        .with_interface_directory(Box::new(crate::host::kernel_dump::ProcInterfaceDirectory))
        .with_resolver_config(Box::new(crate::host::resolver_config::ProcResolverConfig))
        .with_process_directory(Box::new(
            crate::host::process_table::ProcProcessDirectory::default(),
        ))
}

/// The exec hold where the kernel allows it and an output reads resolver calls, or why not
/// (said on stderr when it was asked for).
fn exec_hold_of(opts: &TraceOptions, config: &TraceConfig) -> Result<ExecHold, String> {
    let hold = match opts.exec_hold {
        Some(limit) if config.getaddrinfo => ExecHold::new(limit).map_err(|e| e.to_string()),
        Some(_) => Err("no output reads resolver calls".into()),
        None => Err("--exec-hold off".into()),
    };
    if let Err(why) = &hold {
        if opts.exec_hold.is_some() && config.getaddrinfo {
            crate::message::note(format_args!(
                "nodeip-trace: programs that start during the trace are probed after they start, \
                 so their first lookups can be missed: {why}"
            ));
        }
    }
    hold
}

/// What the start line says of the kernel handlers' hooks: `kprobe 3, fentry 2`, `none`, or why
/// none are traced.
fn handler_hooks_said(tracer: &LiveTracer, frames_only: bool) -> String {
    if frames_only {
        return "none (a plain pcap alone: route lookups, resolver calls and kernel handler calls \
                are not traced, as no output reads them; add --format or -o to have them)"
            .into();
    }
    let mut by_mode: BTreeMap<&str, usize> = BTreeMap::new();
    for mode in tracer.handler_modes.values() {
        *by_mode.entry(mode).or_default() += 1;
    }
    if by_mode.is_empty() {
        return "none".into();
    }
    let said: Vec<String> = by_mode
        .iter()
        .map(|(mode, n)| format!("{mode} {n}"))
        .collect();
    said.join(", ")
}

/// Starts a trace: everything up to the first record read.
pub(super) fn start(opts: &TraceOptions) -> Result<LiveTrace, TraceError> {
    check_options(opts)?;
    let mut startup = StartupPhases::new();
    let features = KernelFeatures::detect(true);
    startup.end("kernel features");
    let blockers = features.trace_blockers();
    if !blockers.is_empty() {
        return Err(ProbeError::CannotTrace { blockers }.into());
    }
    let kernel_limits = features.degradations();
    if opts.verbose {
        for note in &kernel_limits {
            crate::message::note(format_args!("nodeip-trace: {note}"));
        }
    }
    let mut config = opts.config.clone();
    if !opts.command.is_empty() {
        config.filter_by_pid = true;
        config.follow_forks = true;
    }
    let mut unstarted = UnstartedOutputs::new();
    let (mut sinks, stdout_machine, families) = open_sinks(opts, &mut unstarted)?;
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
    let known_sockets = scan_all(std::path::Path::new("/proc"))
        .iter()
        .filter(|s| tracer.add_netlink_socket(s).is_ok())
        .count();
    startup.end("netlink sockets");
    let source = open_source(&mut tracer, opts)?;
    let clock = WallClock::now();
    let mut pipeline = live_pipeline(clock);
    // New programs are held at exec until probed (before the start-up scan, so a program that
    // starts during it is held too).
    let mut exec_hold = exec_hold_of(opts, &config);
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
    let header = RecordingHeader {
        schema: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        kernel: features.kernel.clone(),
        host: crate::host::resolver_config::machine_hostname(),
        hooks: tracer.hooks.iter().map(|h| h.describe()).collect(),
        hook_preference: config.hooks.name().into(),
        netlink_capture: tracer
            .netlink_capture
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        exec_hold: exec_hold_state(&exec_hold),
        handler_hooks: tracer.handler_modes.clone(),
        kernel_limits: kernel_limits.clone(),
        capabilities_kept: crate::probe::privileges::to_be_kept()
            .into_iter()
            .map(String::from)
            .collect(),
        filters: opts.filter_description.clone(),
        clock_offset_ns: (clock.wall_ns(0)) as i64,
    };
    sinks.write_meta(&meta_event(&clock, EventBody::Header(Box::new(header))))?;
    let said = StartLine {
        tracer: &tracer,
        config: &config,
        exec_hold: &exec_hold,
        startup: &startup,
        known_sockets,
        frames_only,
        kernel_limits: kernel_limits.len(),
    };
    crate::message::note(format_args!(
        "nodeip-trace: {}",
        if opts.verbose {
            said.long()
        } else {
            said.short()
        }
    ));

    if let Ok(hold) = &mut exec_hold {
        match hold.start_threads() {
            // Held programs are probed at their hold: their exec records can wait.
            Ok(()) => {
                tracer.exec_records_lazy()?;
                exec_watcher.holding();
            }
            Err(e) => {
                crate::message::note(format_args!("nodeip-trace: {e}; new programs are not held"));
                exec_hold = Err(e.to_string());
            }
        }
    }
    // The command: our own fork of it is followed by the kernel side, so it is traced from
    // its first instruction; then we leave the filter again.
    let mut child = None;
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
        Ok(d) if opts.verbose => crate::message::note(format_args!(
            "nodeip-trace: {} capabilities dropped; kept {}",
            d.dropped,
            d.kept.join(", ")
        )),
        Ok(_) => {}
        Err(e) => crate::message::note(format_args!("nodeip-trace: {e}")),
    }
    let address_notices = address_notices(opts.verbose);
    let mut trace = LiveTrace {
        config,
        tracer,
        source,
        pipeline,
        sinks,
        exec_hold,
        exec_watcher,
        child,
        clock,
        address_notices,
    };
    // After the drop: a thread is made with its creator's capability sets.
    trace
        .source
        .start_drain_thread()
        .map_err(|source| TraceError::Io {
            what: "starting the ring buffer's drain thread",
            source,
        })?;
    Ok(trace)
}

/// What the start line says: the hooks attached, the capture mode, the exec hold; `-v` adds the
/// start-up's steps, why the capture mode, the kernel handlers' hooks, the sockets known.
struct StartLine<'a> {
    tracer: &'a LiveTracer,
    config: &'a TraceConfig,
    exec_hold: &'a Result<ExecHold, String>,
    startup: &'a StartupPhases,
    known_sockets: usize,
    frames_only: bool,
    kernel_limits: usize,
}

impl StartLine<'_> {
    fn attached(&self) -> usize {
        self.tracer
            .hooks
            .iter()
            .filter(|h| h.status.is_ok())
            .count()
    }

    /// `, 2 not attached (see `nodeip-trace doctor`)`, or nothing.
    fn failed(&self) -> String {
        let failed = self
            .tracer
            .hooks
            .iter()
            .filter(|h| h.status.is_err() && h.mode != crate::probe::hooks::HookMode::Off)
            .count();
        match failed {
            0 => String::new(),
            n => format!(", {n} not attached (see `nodeip-trace doctor`)"),
        }
    }

    /// One short line: `18 hooks attached in 540 ms (netlink capture: sock tracepoints; new
    /// programs held at exec); -v says more; Ctrl-C stops`.
    fn short(&self) -> String {
        let mode = self
            .tracer
            .netlink_capture
            .as_ref()
            .map_or_else(|| "off".to_string(), |c| c.mode.short_name());
        let hold = if self.exec_hold.is_ok() {
            "new programs held at exec"
        } else {
            "new programs probed after they start"
        };
        let pcap_only = if self.frames_only {
            "; a plain pcap alone: route lookups, resolver calls and kernel handler calls are not \
             traced (add --format or -o to have them)"
        } else {
            ""
        };
        let limits = match self.kernel_limits {
            0 => String::new(),
            n => format!(
                "; {} of this kernel",
                crate::command::count_of(n as u64, "limit")
            ),
        };
        format!(
            "{} hooks attached in {} ms (netlink capture: {mode}; {hold}{limits}){}{pcap_only}; \
             -v says more; Ctrl-C stops",
            self.attached(),
            self.startup.started.elapsed().as_millis(),
            self.failed(),
        )
    }

    /// The long line of `-v`: each start-up step, the capture mode and why, the exec hold, the
    /// kernel handlers' hooks, the netlink sockets known.
    fn long(&self) -> String {
        format!(
            "{} hooks attached in {} ms [{}] (netlink capture: {}; new programs held at exec: {}; kernel handlers, --hooks {}: {}), {} netlink sockets known{}; Ctrl-C stops",
            self.attached(),
            self.startup.started.elapsed().as_millis(),
            self.startup.steps(),
            self.tracer
                .netlink_capture
                .as_ref()
                .map_or_else(|| "off".to_string(), ToString::to_string),
            exec_hold_state(self.exec_hold),
            self.config.hooks.name(),
            handler_hooks_said(self.tracer, self.frames_only),
            self.known_sockets,
            self.failed(),
        )
    }
}
