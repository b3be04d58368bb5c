//! Resolver-call spans: while a getaddrinfo call is open on a thread, what that thread does (its
//! netlink dumps, route lookups, the resolver's UDP `connect`/`getsockname` calls) is held, so the
//! call can be emitted first, explained with exactly what happened inside it, and followed by
//! those events. Also remembers each process's `/etc/gai.conf` as its resolver read it.

use std::sync::Arc;

use crate::model::emitted::Emitted;
use crate::model::getaddrinfo::{GaiConfSeen, GaiSocketOp, GetaddrinfoCall};
use crate::model::id_hash::IdMap;
use crate::model::ports::GaiConfText;
use crate::model::resolver_span::ResolverSpan;

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

/// Open resolver calls by thread, and each process's gai.conf: as its resolver read it, or as
/// the live side first saw it.
#[derive(Debug, Default)]
pub struct SpanTracker {
    open: IdMap<u32, OpenSpan>,
    /// `/etc/gai.conf` as each process's glibc read it, and whether it read to the end.
    gai_conf_read: IdMap<u32, (Vec<u8>, bool)>,
    /// Each process's gai.conf as the live side read it at its first call (through
    /// `/proc/PID/root`), kept until it execs or exits: its glibc's tables change only when
    /// glibc reads the file again, which `gai_conf_read` captures (and which wins). Reading the
    /// file at every call cost a getaddrinfo storm's consumer a third of its time. Processes
    /// with the same file share one copy (a node's thousands of processes, a few files).
    gai_conf_seen: IdMap<u32, Arc<GaiConfText>>,
    /// The distinct files in `gai_conf_seen`, at most [`MAX_DISTINCT_GAI_CONFS`].
    gai_conf_texts: Vec<Arc<GaiConfText>>,
}

/// Distinct gai.conf files shared between processes at most; beyond, a file is not shared.
const MAX_DISTINCT_GAI_CONFS: usize = 64;

impl SpanTracker {
    /// A call began on thread `tid` of process `pid`; `config_now` is asked for the process's
    /// gai.conf (while it surely lives) unless its resolver's own read or an earlier call's
    /// look is remembered. Returns what a call left open on that thread held (released
    /// ungrouped), if any.
    pub fn open(
        &mut self,
        pid: u32,
        tid: u32,
        config_now: impl FnOnce() -> Option<GaiConfText>,
    ) -> Option<Vec<Emitted>> {
        let gai_conf_at_start = if self.gai_conf_read.contains_key(&pid) {
            None
        } else {
            self.gai_conf_seen_by(pid, config_now)
        };
        let span = OpenSpan {
            gai_conf_at_start,
            ..OpenSpan::default()
        };
        self.open.insert(tid, span).map(|stale| stale.held)
    }

    /// Process `pid`'s gai.conf as first seen through `config_now`, remembered.
    fn gai_conf_seen_by(
        &mut self,
        pid: u32,
        config_now: impl FnOnce() -> Option<GaiConfText>,
    ) -> Option<GaiConfText> {
        if let Some(seen) = self.gai_conf_seen.get(&pid) {
            return Some(GaiConfText::clone(seen));
        }
        let seen = config_now()?;
        if self.gai_conf_seen.len() >= MAX_REMEMBERED_PIDS {
            self.gai_conf_seen.clear();
            self.gai_conf_texts.clear();
        }
        let shared = match self.gai_conf_texts.iter().find(|t| ***t == seen) {
            Some(same) => same.clone(),
            None => {
                let new = Arc::new(seen.clone());
                if self.gai_conf_texts.len() < MAX_DISTINCT_GAI_CONFS {
                    self.gai_conf_texts.push(new.clone());
                }
                new
            }
        };
        self.gai_conf_seen.insert(pid, shared);
        Some(seen)
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
        self.gai_conf_seen.remove(&pid);
    }

    /// Processes `pids` exited: what was remembered of them goes (a new process may get the pid).
    pub fn forget_processes(&mut self, pids: &[u32]) {
        for pid in pids {
            self.exec(*pid);
        }
    }

    /// The call on `tid` (made by process `pid`) returned: the span with everything held for it.
    /// `config_now` is asked for the process's gai.conf only when nothing was seen before (as
    /// in [`Self::open`]).
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
            (None, None) => self.gai_conf_seen_by(pid, config_now),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::addrinfo::decode_getaddrinfo;

    fn call() -> GetaddrinfoCall {
        // SAFETY: a plain C record; all zeros is a valid one (a call with no results).
        decode_getaddrinfo(&unsafe { std::mem::zeroed() })
    }

    fn text(t: &str) -> Option<GaiConfText> {
        Some(GaiConfText {
            text: Some(t.into()),
            note: None,
        })
    }

    #[test]
    fn a_process_gai_conf_is_looked_at_once_until_it_execs_or_exits() {
        let mut spans = SpanTracker::default();
        let looks = std::cell::Cell::new(0);
        let look = |t: &str| {
            looks.set(looks.get() + 1);
            text(t)
        };
        for _ in 0..3 {
            spans.open(10, 11, || look("first"));
            let span = spans.close(10, 11, call(), || look("unused"));
            assert_eq!(span.gai_conf.at_start, text("first"));
        }
        spans.exec(10);
        spans.open(10, 11, || look("after exec"));
        let span = spans.close(10, 11, call(), || look("unused"));
        assert_eq!(span.gai_conf.at_start, text("after exec"));
        spans.forget_processes(&[10]);
        // A call whose entry was not seen looks at close.
        let span = spans.close(10, 12, call(), || look("at close"));
        assert_eq!(span.gai_conf.at_start, text("at close"));
        assert_eq!(looks.get(), 3);
    }

    #[test]
    fn processes_with_the_same_file_share_one_copy() {
        let mut spans = SpanTracker::default();
        for pid in [10, 20] {
            spans.open(pid, pid, || text("same"));
        }
        spans.open(30, 30, || text("other"));
        let seen = |pid| &spans.gai_conf_seen[&pid];
        assert!(Arc::ptr_eq(seen(10), seen(20)));
        assert!(!Arc::ptr_eq(seen(10), seen(30)));
        assert_eq!(spans.gai_conf_texts.len(), 2);
    }

    #[test]
    fn what_the_resolver_read_spares_the_look() {
        let mut spans = SpanTracker::default();
        spans.gai_conf_read(10, b"precedence ::ffff:0:0/96 100\n", 0);
        spans.open(10, 11, || panic!("no look: glibc's own read is known"));
        let span = spans.close(10, 11, call(), || panic!("no look"));
        assert_eq!(
            span.gai_conf.read_by_resolver.as_deref(),
            Some(&b"precedence ::ffff:0:0/96 100\n"[..])
        );
        assert_eq!(span.gai_conf.at_start, None);
    }
}
