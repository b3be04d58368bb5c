//! The live loop: wait for records (or the held execs, the command's end, the duration, a
//! signal), serve the exec hold, and move every record through the pipeline to the outputs, in
//! batches, until something stops the trace.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::decode::record::{KernelRecord, RecordError};
use crate::host::netlink_sockets::{sockets_of, NetnsCache};
use crate::model::emitted::Emitted;

use super::child::command_outcome;
use super::held_execs::{say_outcomes, serve_held_execs};
use super::start::LiveTrace;
use super::{write_out, TraceEnd, TraceError, TraceOptions};

/// How often the consumer looks at the queue and its timers unasked. Records wake it themselves:
/// the drain thread hands them over (after at most 10 ms while more come, at once when the
/// ring is empty again), and exec records wake it from the kernel. Each wake-up costs the
/// guest of the VM lane some 200 µs under QEMU TCG, so an idle tracer should make few.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How long one pass of the loop moves records before it looks at its signals and timers again.
/// Under a stream the consumer only just keeps up with, the queue is never empty: a drain that
/// ran until it was did not return for minutes in the 6.1 guest's soak, and meanwhile Ctrl-C
/// waited, exited processes were not forgotten (RSS +9 MiB) and the probes of deleted programs
/// were not taken off (+400 probe links), all let go at once when the stream eased.
const DRAIN_BUDGET: Duration = Duration::from_millis(50);

/// How often what is known of exited processes is forgotten.
const FORGET_EXITED_PERIOD: Duration = Duration::from_secs(10);

/// How long a process's netlink sockets are not looked for again after a record of an unknown
/// socket made the loop look.
const SOCKET_RESCAN_PAUSE: Duration = Duration::from_secs(1);

/// Records decoded, correlated and written out per batch; between batches the ring is emptied
/// into the queue. The records and events of a batch are all held until it is written out, so
/// a small batch keeps them in the CPU's caches when they are written and freed: with 1,024, a
/// JSON burst's consumer spent 9% of its time in one load, mimalloc reading a freed block's
/// next pointer out of cold memory. 64 cut its CPU per event by 7–8% (median of 8–10 paired
/// runs, 32 and 128 alike; `git show 3c0bc23:BENCHMARKS.md`, 2026-11-28 13:00).
const RECORDS_PER_BATCH: usize = 64;

/// The signals that end a trace, and Ctrl-Z, caught while programs are held at exec.
pub(super) struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
    /// A closed terminal or `ssh` session ends the trace cleanly too, outputs complete.
    hangup: Signal,
    /// A stopped tracer would make every new program of the node wait the hold's limit (its
    /// guard lets them go then): while programs are held at exec, Ctrl-Z (SIGTSTP) is caught
    /// and said, not obeyed.
    terminal_stop: Option<Signal>,
}

impl StopSignals {
    /// Installs the handlers (SIGTSTP's only when `holding`).
    pub(super) fn install(holding: bool) -> Result<Self, TraceError> {
        let install = |kind: SignalKind, what: &'static str| {
            signal(kind).map_err(|source| TraceError::Io { what, source })
        };
        Ok(StopSignals {
            interrupt: install(SignalKind::interrupt(), "installing SIGINT handler")?,
            terminate: install(SignalKind::terminate(), "installing SIGTERM handler")?,
            hangup: install(SignalKind::hangup(), "installing SIGHUP handler")?,
            terminal_stop: if holding {
                Some(install(
                    SignalKind::from_raw(libc::SIGTSTP),
                    "installing SIGTSTP handler",
                )?)
            } else {
                None
            },
        })
    }
}

/// Waits for `future` when there is one, for ever otherwise.
async fn or_never<T>(future: Option<impl std::future::Future<Output = T>>) -> T {
    match future {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// How the loop ended.
pub(super) struct Pumped {
    /// Ok, or the error that ended it.
    pub(super) result: Result<(), TraceError>,
    /// The command's exit code, or stopped.
    pub(super) end: TraceEnd,
    /// What stopped it, for the summary: `duration`, `SIGINT`, `command exited (0)`, …
    pub(super) stopped_by: String,
    /// Records that could not be decoded (the first was said on stderr).
    pub(super) record_errors: u64,
    /// Where the trace's records ended (see [`crate::source::live::LiveSource::seal`]): the
    /// kernel side's counters then, and the records the ring held that a full queue refused.
    /// `None` when the loop ended on an error before it got there.
    pub(super) sealed: Option<SealedAt>,
    /// What the pipeline made and the outputs have not taken yet.
    pub(super) out: Vec<Emitted>,
}

/// The end of a trace's records.
pub(super) struct SealedAt {
    /// The kernel side's counters at the seal (losses after it are not the trace's).
    pub(super) counters: Vec<u64>,
    /// Records made before the stop that the ring held and a full queue refused.
    pub(super) refused: u64,
    /// Records taken before the stop and dropped by a second stop signal.
    pub(super) dropped: u64,
}

/// Records waiting at a stop beyond which the tracer says it is still writing them, and how to
/// drop them instead.
const BACKLOG_SAID: usize = 4 << 20;

impl StopSignals {
    /// Whether a stop signal has come (since the last one was taken), without waiting but
    /// for the runtime to look at its signals.
    async fn stop_asked(&mut self) -> bool {
        tokio::task::yield_now().await;
        tokio::select! {
            biased;
            _ = self.interrupt.recv() => true,
            _ = self.terminate.recv() => true,
            _ = self.hangup.recv() => true,
            () = std::future::ready(()) => false,
        }
    }
}

/// The loop's own state between batches.
struct Pump {
    records: Vec<KernelRecord>,
    record_errors: Vec<RecordError>,
    record_error_count: u64,
    out: Vec<Emitted>,
    sockets: SocketRescan,
    forgotten: Instant,
}

/// Looking for a process's netlink sockets when it used one not known yet, at most once per
/// [`SOCKET_RESCAN_PAUSE`].
#[derive(Default)]
struct SocketRescan {
    /// When each process's netlink sockets were last looked for.
    rescanned: HashMap<u32, Instant>,
    netns_cache: NetnsCache,
}

/// Runs the loop until the command exits, the duration passes or a signal comes.
pub(super) async fn pump(
    trace: &mut LiveTrace,
    signals: &mut StopSignals,
    opts: &TraceOptions,
) -> Pumped {
    let mut pump = Pump {
        records: Vec::new(),
        record_errors: Vec::new(),
        record_error_count: 0,
        out: Vec::new(),
        sockets: SocketRescan::default(),
        forgotten: Instant::now(),
    };
    let mut end = TraceEnd::Stopped;
    let mut stopped_by = String::from("running");
    let deadline = opts.duration.map(|d| tokio::time::Instant::now() + d);
    let held_wake = trace.exec_hold.as_ref().ok().map(|h| h.wake());
    let mut poll = tokio::time::interval(POLL_INTERVAL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    if let Some(running) = opts.on_running {
        running();
    }
    let result = async {
        // Records left in the queue when the last drain ran out of its budget.
        let mut more = Drained::Empty;
        loop {
            let mut stop = false;
            let mut notices_ready = false;
            if more == Drained::More {
                // Lets the runtime poll its driver (signals, timers, the ring's fd) before the
                // loop goes on with the queue: a loop that never waits starves it otherwise.
                tokio::task::yield_now().await;
            }
            tokio::select! {
                // In this order: a stop signal wins over a queue that never empties.
                biased;
                _ = signals.interrupt.recv() => { stop = true; stopped_by = "SIGINT".into(); }
                _ = signals.terminate.recv() => { stop = true; stopped_by = "SIGTERM".into(); }
                _ = signals.hangup.recv() => { stop = true; stopped_by = "SIGHUP".into(); }
                status = or_never(trace.child.as_mut().map(|c| c.wait())) => {
                    let (code, how) = command_outcome(status.ok());
                    end = TraceEnd::CommandExited(code);
                    stopped_by = how;
                    stop = true;
                }
                _ = or_never(deadline.map(tokio::time::sleep_until)) => {
                    stop = true;
                    stopped_by = "duration".into();
                }
                _ = or_never(signals.terminal_stop.as_mut().map(Signal::recv)) => {
                    crate::message::note(format_args!(
                        "nodeip-trace: not stopping on Ctrl-Z: a stopped tracer would hold every new program at its exec; Ctrl-C ends the trace"
                    ));
                }
                _ = or_never(held_wake.as_ref().map(|w| w.notified())) => {}
                r = or_never(trace.address_notices.as_ref().map(|(n, _)| n.readable())) => {
                    r.map_err(|source| TraceError::Io { what: "waiting for the kernel's address notices", source })?;
                    notices_ready = true;
                }
                r = trace.source.readable() => {
                    r.map_err(|source| TraceError::Io { what: "polling the ring buffer", source })?;
                }
                _ = poll.tick() => {}
                () = std::future::ready(()), if more == Drained::More => {}
            }
            serve_hold(trace, &mut pump.out);
            if notices_ready {
                serve_address_notices(trace, &mut pump.out);
            }
            say_outcomes(trace.exec_watcher.tick(&mut trace.tracer));
            say_outcomes(trace.exec_watcher.release_gone(&mut trace.tracer));
            if stop {
                // Give in-flight records a moment to land, then take no more and drain
                // everything taken.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let refused = trace.source.seal();
                let counters = trace.tracer.counters()?;
                let dropped = pump.finish(trace, opts, signals).await?;
                return Ok(SealedAt {
                    counters,
                    refused,
                    dropped,
                });
            }
            more = pump.drain(trace, opts)?;
            trace.sinks.flush()?;
            pump.housekeeping(trace);
        }
    }
    .await;
    let (result, sealed) = match result {
        Ok(sealed) => (Ok(()), Some(sealed)),
        Err(e) => (Err(e), None),
    };
    Pumped {
        result,
        end,
        stopped_by,
        sealed,
        record_errors: pump.record_error_count,
        out: pump.out,
    }
}

/// Hands the kernel's address notices waiting to the pipeline, stamped now.
fn serve_address_notices(trace: &mut LiveTrace, out: &mut Vec<Emitted>) {
    let Some((notices, netns)) = trace.address_notices.as_mut() else {
        return;
    };
    let now = crate::model::clock::monotonic_now_ns();
    let pipeline = &mut trace.pipeline;
    notices.read_waiting(|bytes| pipeline.on_address_notices(now, *netns, bytes, out));
}

/// Serves the programs held at exec, if holding.
fn serve_hold(trace: &mut LiveTrace, out: &mut Vec<Emitted>) {
    if let Ok(hold) = &trace.exec_hold {
        serve_held_execs(
            hold,
            &mut trace.exec_watcher,
            &mut trace.tracer,
            &trace.config,
            &mut trace.pipeline,
            out,
        );
    }
}

/// What a drain left in the queue.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Drained {
    /// Nothing: the loop may wait for the next record.
    Empty,
    /// Records: its budget ran out first.
    More,
}

impl Pump {
    /// Drains what the trace took before it stopped. A backlog that takes a while (the spill
    /// file may hold 512 MiB) is said, and a second stop signal drops what is left: how many
    /// records that dropped.
    async fn finish(
        &mut self,
        trace: &mut LiveTrace,
        opts: &TraceOptions,
        signals: &mut StopSignals,
    ) -> Result<u64, TraceError> {
        let backlog = trace.source.queued_bytes();
        if backlog > BACKLOG_SAID {
            crate::message::note(format_args!(
                "nodeip-trace: stopping; writing the {:.0} MiB of records taken before the stop (Ctrl-C again drops them, counted as lost)",
                backlog as f64 / f64::from(1 << 20)
            ));
        }
        loop {
            let drained = self.drain(trace, opts)?;
            trace.sinks.flush()?;
            if drained == Drained::Empty {
                return Ok(0);
            }
            if signals.stop_asked().await {
                let dropped = trace.source.discard_queued();
                crate::message::note(format_args!(
                    "nodeip-trace: stopped again: {dropped} records taken before the stop dropped"
                ));
                return Ok(dropped);
            }
        }
    }

    /// Moves the records waiting through the pipeline to the outputs, a batch at a time, until
    /// none are left or [`DRAIN_BUDGET`] has passed.
    fn drain(&mut self, trace: &mut LiveTrace, opts: &TraceOptions) -> Result<Drained, TraceError> {
        let started = Instant::now();
        loop {
            trace.source.drain(
                &mut self.records,
                &mut self.record_errors,
                RECORDS_PER_BATCH,
            );
            let batch = self.records.len();
            for record in self.records.drain(..) {
                before_pipeline(&mut self.sockets, trace, &record);
                trace.pipeline.on_kernel_record(record, &mut self.out);
            }
            // A program held at exec waits for this loop: served between batches too.
            serve_hold(trace, &mut self.out);
            write_out(
                &mut trace.sinks,
                &mut trace.pipeline,
                &opts.process_filter,
                &mut self.out,
            )?;
            if batch < RECORDS_PER_BATCH {
                return Ok(Drained::Empty);
            }
            if started.elapsed() >= DRAIN_BUDGET {
                return Ok(Drained::More);
            }
        }
    }

    /// Forgets exited processes now and then, and says the first record that could not be
    /// decoded (the others are counted).
    fn housekeeping(&mut self, trace: &mut LiveTrace) {
        if self.forgotten.elapsed() >= FORGET_EXITED_PERIOD {
            trace.pipeline.forget_exited_processes();
            // A rescan older than its pause decides nothing any more.
            self.sockets
                .rescanned
                .retain(|_, at| at.elapsed() <= SOCKET_RESCAN_PAUSE);
            self.forgotten = Instant::now();
        }
        for e in self.record_errors.drain(..) {
            self.record_error_count += 1;
            if self.record_error_count == 1 {
                crate::message::note(format_args!("nodeip-trace: {e}"));
            }
        }
    }
}

/// What the tracer itself does with a record before the pipeline decodes it: learns a
/// process's netlink sockets when it used one not known yet, probes a new program.
fn before_pipeline(sockets: &mut SocketRescan, trace: &mut LiveTrace, record: &KernelRecord) {
    match record {
        KernelRecord::UnknownNetlinkSocket(h) => {
            let tgid = (h.pid_tgid >> 32) as u32;
            let due = sockets
                .rescanned
                .get(&tgid)
                .is_none_or(|t| t.elapsed() > SOCKET_RESCAN_PAUSE);
            if due {
                sockets.rescanned.insert(tgid, Instant::now());
                let proc = std::path::Path::new("/proc");
                for s in sockets_of(proc, tgid, &mut sockets.netns_cache) {
                    let _ = trace.tracer.add_netlink_socket(&s);
                }
            }
        }
        // Without the hold, new programs are probed here, after they start. With it, this
        // still finds a known program's libc in a new root (the same inode bind-mounted
        // into a container, which no hold sees).
        KernelRecord::Exec(r) if trace.config.getaddrinfo => {
            let executed = crate::decode::record::c_string(&r.filename);
            say_outcomes(trace.exec_watcher.on_exec_record(
                &mut trace.tracer,
                (r.header.pid_tgid >> 32) as u32,
                std::path::Path::new(&executed),
            ));
        }
        _ => {}
    }
}
