//! Resolver-call spans: while a getaddrinfo call is open on a thread, what that thread does (its
//! netlink dumps, route lookups, the resolver's UDP `connect`/`getsockname` calls) is held, so the
//! call can be emitted first, explained with exactly what happened inside it, and followed by
//! those events. Also remembers each process's `/etc/gai.conf` as its resolver read it.

use crate::model::emitted::Emitted;
use crate::model::getaddrinfo::{GaiConfSeen, GaiSocketOp, GetaddrinfoCall, ResolverSpan};
use crate::model::id_hash::IdMap;
use crate::model::ports::GaiConfText;

/// The bound on events held for one open call; beyond it they are released ungrouped.
pub const MAX_HELD_PER_SPAN: usize = 4096;

/// Processes whose gai.conf reads are remembered at most; beyond, the memory starts over.
const MAX_REMEMBERED_PIDS: usize = 16384;

/// What is held while a call is open on a thread.
#[derive(Debug, Default)]
struct OpenSpan {
    held: Vec<Emitted>,
    socket_ops: Vec<GaiSocketOp>,
    gai_conf_at_start: Option<GaiConfText>,
}

/// Open resolver calls by thread, and the gai.conf bytes each process's resolver read.
#[derive(Debug, Default)]
pub struct SpanTracker {
    open: IdMap<u32, OpenSpan>,
    /// `/etc/gai.conf` as each process's glibc read it, and whether it read to the end.
    gai_conf_read: IdMap<u32, (Vec<u8>, bool)>,
}

impl SpanTracker {
    /// A call began on thread `tid`; `gai_conf` is the process's file as seen right then (while
    /// the process surely lives). Returns what a call left open on that thread held (released
    /// ungrouped), if any.
    pub fn open(&mut self, tid: u32, gai_conf: Option<GaiConfText>) -> Option<Vec<Emitted>> {
        let span = OpenSpan {
            gai_conf_at_start: gai_conf,
            ..OpenSpan::default()
        };
        self.open.insert(tid, span).map(|stale| stale.held)
    }

    /// The resolver on `tid` made a socket call for its sort.
    pub fn socket_op(&mut self, tid: u32, op: GaiSocketOp) {
        if let Some(span) = self.open.get_mut(&tid) {
            if span.socket_ops.len() < MAX_HELD_PER_SPAN {
                span.socket_ops.push(op);
            }
        }
    }

    /// Holds `item` in `tid`'s open call; gives it back when no call is open there (or the
    /// span is full).
    pub fn hold(&mut self, tid: u32, item: Emitted) -> Option<Emitted> {
        match self.open.get_mut(&tid) {
            Some(span) if span.held.len() < MAX_HELD_PER_SPAN => {
                span.held.push(item);
                None
            }
            _ => Some(item),
        }
    }

    /// Process `pid`'s resolver read a piece of `/etc/gai.conf` (`ret` ≤ 0: end of file).
    pub fn gai_conf_read(&mut self, pid: u32, data: &[u8], ret: i64) {
        if self.gai_conf_read.len() >= MAX_REMEMBERED_PIDS {
            self.gai_conf_read.clear();
        }
        let (text, complete) = self.gai_conf_read.entry(pid).or_default();
        if *complete {
            // glibc reads the file again when it changed: a new copy begins.
            text.clear();
            *complete = false;
        }
        text.extend_from_slice(data);
        *complete = ret <= 0;
    }

    /// Process `pid` exec'd: what its old program read no longer applies.
    pub fn exec(&mut self, pid: u32) {
        self.gai_conf_read.remove(&pid);
    }

    /// The call on `tid` (made by process `pid`) returned: the span with everything held for it.
    /// `config_now` is asked for the process's gai.conf only when nothing was seen before.
    pub fn close(
        &mut self,
        pid: u32,
        tid: u32,
        call: GetaddrinfoCall,
        config_now: impl FnOnce() -> Option<GaiConfText>,
    ) -> ResolverSpan {
        let span = self.open.remove(&tid).unwrap_or_default();
        let read_by_resolver = self.gai_conf_read.get(&pid).map(|(text, _)| text.clone());
        let at_start = match (&read_by_resolver, span.gai_conf_at_start) {
            (None, None) => config_now(),
            (_, at_start) => at_start,
        };
        ResolverSpan {
            call,
            inside: span.held,
            socket_ops: span.socket_ops,
            gai_conf: GaiConfSeen {
                read_by_resolver,
                at_start,
            },
            sort_inputs: None,
        }
    }

    /// Everything still held (end of trace), by thread: calls that never returned release
    /// their events ungrouped.
    pub fn drain(&mut self) -> Vec<Emitted> {
        let mut spans: Vec<_> = self.open.drain().collect();
        spans.sort_by_key(|(tid, _)| *tid);
        spans.into_iter().flat_map(|(_, s)| s.held).collect()
    }
}
