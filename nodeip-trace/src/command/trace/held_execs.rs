//! Serving the exec hold: each program held at exec is classified and probed by the one exec
//! watcher, let go, and its hold put on the timeline; what the watcher did is said on stderr.

use std::os::fd::AsRawFd;

use crate::model::emitted::Emitted;
use crate::pipeline::Pipeline;
use crate::probe::exec_hold::{ExecHold, Released};
use crate::probe::exec_watcher::ExecWatcher;
use crate::probe::loader::{LiveTracer, TraceConfig};

/// Says what the exec watcher did (one line per outcome).
pub(super) fn say_outcomes(outcomes: Vec<impl std::fmt::Display>) {
    for outcome in outcomes {
        crate::message::note(format_args!("nodeip-trace: {outcome}"));
    }
}

/// What the holder is doing, for the start line and the header: `fanotify, limit 3000 ms`, or
/// why it is off.
pub(super) fn exec_hold_state(hold: &Result<ExecHold, String>) -> String {
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
pub(super) fn serve_held_execs(
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
        if refused.iter().any(|o| o.attach_failed()) {
            hold.count_probes_failed();
        }
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
