//! A trace's end: holding stops, the pipeline finishes, what was lost is counted and written,
//! the summary goes to the outputs and one line to stderr, the probes are detached.

use crate::model::emitted::Emitted;
use crate::model::event::{EventBody, ExecHoldCounts, LostReport, RunSummary};
use crate::source::live::{LiveSource, RecordQueue, SpillConfig};

use super::losses::lost_report;
use super::pump::Pumped;
use super::start::LiveTrace;
use super::{failures_text, meta_event, write_out, TraceEnd, TraceError, TraceOptions};

/// Ends a trace the loop has left: everything still held goes, the outputs get the rest of the
/// timeline, the losses and the summary.
pub(super) fn stop(
    mut trace: LiveTrace,
    pumped: Pumped,
    opts: &TraceOptions,
) -> Result<TraceEnd, TraceError> {
    // No exec waits for the loop any more: everything held goes, nothing new is held while
    // the trace ends (detaching thousands of uprobes can take minutes).
    let exec_holds = trace.exec_hold.as_ref().ok().map(|h| {
        let c = h.counts();
        ExecHoldCounts {
            held: c.held,
            released_unprobed: c.released_at_limit,
            probes_failed: c.probes_failed,
        }
    });
    trace.exec_hold = Err("the trace ended".into());
    let Pumped {
        result,
        end,
        stopped_by,
        record_errors,
        sealed,
        mut out,
    } = pumped;
    if let Err(e) = result {
        if let TraceError::Sink(s) = &e {
            if s.is_broken_pipe() {
                return Ok(end);
            }
        }
        return Err(e);
    }
    trace.pipeline.finish(&mut out);
    write_out(
        &mut trace.sinks,
        &mut trace.pipeline,
        &opts.process_filter,
        &mut out,
    )?;
    let (counters, at_stop) = match sealed {
        Some(at) => (at.counters, [at.refused, at.dropped]),
        None => (trace.tracer.counters()?, [0, 0]),
    };
    let mut lost = lost_report(&counters, record_errors);
    for (name, n) in [
        "record_queue_full_at_stop",
        "records_dropped_by_second_stop",
    ]
    .into_iter()
    .zip(at_stop)
    .filter(|(_, n)| *n > 0)
    {
        lost.counts.insert(name.into(), n);
        lost.lost += n;
    }
    // The kernel's address notices lost to a full socket queue (times: each may be several).
    let overflows = trace
        .address_notices
        .as_ref()
        .map_or(0, |(notices, _)| notices.overflows());
    if overflows > 0 {
        lost.counts
            .insert("address_notice_overflows".into(), overflows);
        lost.lost += overflows;
    }
    // Records a size-limited output did not take: the most any one output missed.
    let dropped = trace.sinks.dropped_at_limit();
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
    let (spill_lost, queue_peak, spill_said) = trace.source.with_queue(|queue| {
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
    if !lost.counts.is_empty() {
        trace.sinks.write(&Emitted::Event(Box::new(meta_event(
            &trace.clock,
            EventBody::Lost(lost.clone()),
        ))))?;
    }
    let summary = RunSummary {
        exec_holds,
        events: trace
            .sinks
            .counts
            .iter()
            .map(|(kind, n)| (kind.to_string(), *n))
            .collect(),
        lost: lost.lost,
        stopped_by,
    };
    let summary_event = meta_event(&trace.clock, EventBody::Summary(summary.clone()));
    let _ = trace.sinks.write_meta(&summary_event);
    let _ = trace.sinks.finish();
    let failures = trace.sinks.take_failures();
    // Without an output that reads events, none were made: what was captured is the frames.
    let made = if trace.sinks.reads_events() {
        format!("{} events", summary.events.values().sum::<u64>())
    } else {
        format!(
            "{} netlink buffers captured (no events made: no output reads them)",
            trace.sinks.frames
        )
    };
    let unprobed = match summary.exec_holds {
        Some(h) if h.released_unprobed + h.probes_failed > 0 => format!(
            "; {} held programs not probed ({} let go at the hold's limit, {} whose probes the kernel refused)",
            h.released_unprobed + h.probes_failed,
            h.released_unprobed,
            h.probes_failed
        ),
        _ => String::new(),
    };
    crate::message::note(format_args!(
        "nodeip-trace: {made}, {} lost{}{unprobed}; stopped by {}; record queue peak {:.1} MiB of {}{}{}{}",
        lost.lost,
        if lost.counts.is_empty() {
            String::new()
        } else {
            format!(" ({:?})", lost.counts)
        },
        summary.stopped_by,
        queue_peak as f64 / (1 << 20) as f64,
        crate::source::live::QUEUE_MAX_BYTES >> 20,
        spill_said,
        drain_said(&trace.source, &lost),
        if failures.is_empty() {
            String::new()
        } else {
            format!("; outputs that failed: {}", failures_text(&failures))
        }
    ));
    trace.tracer.detach_uprobes();
    drop(trace);
    if !failures.is_empty() {
        return Err(TraceError::OutputsFailed(failures));
    }
    Ok(end)
}

/// What the end-of-run line says of the drain thread, when records were lost to a full ring:
/// how full the ring was found and how late the thread came at worst.
fn drain_said(source: &LiveSource, lost: &LostReport) -> String {
    let ring_full = lost
        .counts
        .iter()
        .any(|(reason, n)| reason.ends_with("ringbuf_full") && *n > 0);
    if !ring_full {
        return String::new();
    }
    let d = source.drain_delays();
    let missed = match d.missed_wakeups {
        0 => String::new(),
        n => format!(
            ", and it found the ring over half full {} after a wait for the kernel's \
             wake-up (woken late or not at all)",
            crate::command::count_of(n, "time")
        ),
    };
    format!(
        "; ring buffer found up to {}% full, its drain thread late by up to {} ms (its CPU) \
         and blocked up to {} ms (the queue's lock){missed}",
        d.fullest * 100 / d.ring.max(1),
        d.oversleep.as_millis(),
        d.lock_wait.as_millis()
    )
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
