//! The exec hold's guard: a small process of its own that keeps the hold bounded when the
//! tracer cannot answer — stopped (`kill -STOP`, a debugger), or its threads starved.
//!
//! The tracer's holder thread lets go any exec held past the limit, but a stopped process runs
//! no thread: without the guard, a tracer stopped with SIGSTOP would hold every new program of
//! the node until continued. The guard holds a duplicate of the fanotify group's descriptor and
//! reads, on a pipe from the tracer, each held event's descriptor number and when it was held
//! ([`GuardRecord`]). It answers `FAN_ALLOW` for any event still held a little after the limit
//! (the kernel matches a permission answer by the event's descriptor number alone, whoever
//! writes it), and while the tracer is stopped it reads the group's new events itself and lets
//! each go when it has waited the limit, telling the tracer on a pipe back (one byte each: the
//! tracer counts them as released at the limit when it runs again). So no program waits much
//! longer than the limit, whether the tracer runs, is starved or is stopped. It runs in a
//! process group of its own (a terminal's job-control signals do not reach it), with no
//! capabilities, and ends when the pipe's other end closes: the tracer ended or was killed,
//! and the group's last descriptor goes with the guard's (the kernel then lets go everything
//! pending).
use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Descriptor number at which the guard finds the fanotify group.
pub const GROUP_FD: RawFd = 3;

/// How much later than the tracer's own limit the guard lets go: the tracer's thread, when it
/// runs, answers first (and counts the program as released at the limit).
const SLACK: Duration = Duration::from_millis(500);

/// How often the guard looks at the tracer's state and at its deadlines.
const TICK_MS: i32 = 100;

/// One message from the tracer to its guard: an event held, or answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardRecord {
    /// The event whose descriptor number is `fd` is held since `since_ns` (CLOCK_MONOTONIC).
    Held {
        /// The event's descriptor number in the tracer.
        fd: RawFd,
        /// When it was held.
        since_ns: u64,
    },
    /// The event of `fd` was answered (its number may be reused from now on).
    Answered {
        /// The event's descriptor number in the tracer.
        fd: RawFd,
    },
}

impl GuardRecord {
    /// Size of one record on the pipe.
    pub const SIZE: usize = 16;

    /// The record's bytes: kind (u32), descriptor (i32), time (u64), host byte order.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let (kind, fd, since_ns) = match self {
            GuardRecord::Held { fd, since_ns } => (1u32, fd, since_ns),
            GuardRecord::Answered { fd } => (2u32, fd, 0),
        };
        let mut out = [0u8; Self::SIZE];
        out[..4].copy_from_slice(&kind.to_ne_bytes());
        out[4..8].copy_from_slice(&fd.to_ne_bytes());
        out[8..].copy_from_slice(&since_ns.to_ne_bytes());
        out
    }

    /// The record of `bytes`, or `None` for an unknown kind.
    pub fn from_bytes(bytes: &[u8; Self::SIZE]) -> Option<Self> {
        let word = |at: usize| [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        let fd = i32::from_ne_bytes(word(4));
        let since_ns = u64::from_ne_bytes(bytes[8..].try_into().ok()?);
        match u32::from_ne_bytes(word(0)) {
            1 => Some(GuardRecord::Held { fd, since_ns }),
            2 => Some(GuardRecord::Answered { fd }),
            _ => None,
        }
    }
}

/// The held events the guard knows of, by descriptor number, and when each must go.
#[derive(Debug, Default)]
pub struct GuardDeadlines {
    due_ns: HashMap<RawFd, u64>,
}

impl GuardDeadlines {
    /// Takes one record from the tracer into account; `limit` is the tracer's.
    pub fn apply(&mut self, record: GuardRecord, limit: Duration) {
        match record {
            GuardRecord::Held { fd, since_ns } => {
                let after = (limit + SLACK).as_nanos() as u64;
                self.due_ns.insert(fd, since_ns.saturating_add(after));
            }
            GuardRecord::Answered { fd } => {
                self.due_ns.remove(&fd);
            }
        }
    }

    /// The descriptor numbers due at `now_ns`, removed.
    pub fn take_due(&mut self, now_ns: u64) -> Vec<RawFd> {
        let due: Vec<RawFd> = self
            .due_ns
            .iter()
            .filter(|(_, at)| **at <= now_ns)
            .map(|(fd, _)| *fd)
            .collect();
        for fd in &due {
            self.due_ns.remove(fd);
        }
        due
    }
}

/// Whether `/proc/PID/stat`'s text says the process is stopped (`T`) or in a tracing stop
/// (`t`). The state follows the command name's closing parenthesis (the name may hold any).
pub fn stat_says_stopped(stat: &str) -> bool {
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .is_some_and(|state| state == "T" || state == "t")
}

/// Answers the event of descriptor number `fd` with `FAN_ALLOW` on `group`.
fn write_allow(group: RawFd, fd: RawFd) {
    let response = libc::fanotify_response {
        fd,
        response: libc::FAN_ALLOW,
    };
    // SAFETY: writes a plain struct from the stack; a refused answer (the event answered
    // already) changes nothing.
    unsafe {
        libc::write(
            group,
            std::ptr::from_ref(&response).cast(),
            std::mem::size_of::<libc::fanotify_response>(),
        );
    }
}

/// Answers the event of `fd` with `FAN_ALLOW` on `group` and closes `fd` (a descriptor the
/// event gave this process).
pub fn allow(group: RawFd, fd: RawFd) {
    write_allow(group, fd);
    // SAFETY: `fd` came from the event and is closed once, here.
    unsafe { libc::close(fd) };
}

/// The event records of `bytes`, read from a fanotify group, in order; a record shorter than
/// its header ends them.
pub fn event_records(bytes: &[u8]) -> impl Iterator<Item = libc::fanotify_event_metadata> + '_ {
    let size = std::mem::size_of::<libc::fanotify_event_metadata>();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at + size > bytes.len() {
            return None;
        }
        // SAFETY: at least `size` bytes remain; the kernel writes whole records.
        let meta: libc::fanotify_event_metadata =
            unsafe { std::ptr::read_unaligned(bytes[at..].as_ptr().cast()) };
        if meta.event_len < size as u32 {
            return None;
        }
        at += meta.event_len as usize;
        Some(meta)
    })
}

/// Reads every event queued on `group` (non-blocking) into `held`: each event's descriptor (the
/// guard's own) and when it is due, `after` from now.
fn take_queued(group: RawFd, buf: &mut [u8], after: Duration, held: &mut Vec<(RawFd, u64)>) {
    let due_ns = crate::model::clock::monotonic_now_ns().saturating_add(after.as_nanos() as u64);
    loop {
        // SAFETY: reads into our buffer, at most its length.
        let len = unsafe { libc::read(group, buf.as_mut_ptr().cast(), buf.len()) };
        if len <= 0 {
            return;
        }
        let fds = event_records(&buf[..len as usize]).map(|meta| meta.fd);
        held.extend(fds.filter(|fd| *fd >= 0).map(|fd| (fd, due_ns)));
    }
}

/// Tells the tracer, on stdout, of one exec the guard let go itself: one byte, written without
/// waiting (a full pipe loses the count, never the answer).
fn tell_let_go() {
    // SAFETY: writes one byte from the stack to our stdout.
    unsafe { libc::write(libc::STDOUT_FILENO, [1u8].as_ptr().cast(), 1) };
}

/// The guard's life: `tracer` is the tracer's pid, `limit` its hold limit; the group is at
/// [`GROUP_FD`], the tracer's records come on stdin, and each exec the guard lets go itself is
/// told on stdout. Returns when stdin closes.
pub fn run(tracer: u32, limit: Duration) {
    let _ = super::privileges::drop_all();
    // SAFETY: the tracer put the group here for us; nothing else owns it.
    let group = unsafe { OwnedFd::from_raw_fd(GROUP_FD) };
    // Read unbuffered: a buffer would hide records from the poll below.
    // SAFETY: stdin is the pipe the tracer gave us; this File is its only owner from here.
    let mut records = unsafe { std::fs::File::from_raw_fd(libc::STDIN_FILENO) };
    let stat_path = format!("/proc/{tracer}/stat");
    let mut deadlines = GuardDeadlines::default();
    // Events the guard read itself while the tracer was stopped: its own descriptors.
    let mut own_held: Vec<(RawFd, u64)> = Vec::new();
    let mut events = vec![0u8; 16 * 1024];
    let mut pending = Vec::with_capacity(GuardRecord::SIZE);
    let mut chunk = [0u8; 64 * GuardRecord::SIZE];
    loop {
        let mut fds = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack.
        let ready = unsafe { libc::poll(&mut fds, 1, TICK_MS) };
        if ready > 0 {
            match records.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => pending.extend_from_slice(&chunk[..n]),
            }
            let whole = pending.len() / GuardRecord::SIZE * GuardRecord::SIZE;
            for bytes in pending[..whole].chunks_exact(GuardRecord::SIZE) {
                let bytes: &[u8; GuardRecord::SIZE] = bytes.try_into().expect("exact chunk");
                if let Some(record) = GuardRecord::from_bytes(bytes) {
                    deadlines.apply(record, limit);
                }
            }
            pending.drain(..whole);
        }
        let now_ns = crate::model::clock::monotonic_now_ns();
        for fd in deadlines.take_due(now_ns) {
            write_allow(group.as_raw_fd(), fd);
        }
        own_held.retain(|&(fd, due_ns)| {
            if due_ns > now_ns {
                return true;
            }
            allow(group.as_raw_fd(), fd);
            tell_let_go();
            false
        });
        let stopped = std::fs::read_to_string(&stat_path)
            .map(|s| stat_says_stopped(&s))
            .unwrap_or(false);
        if stopped {
            take_queued(group.as_raw_fd(), &mut events, limit, &mut own_held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_the_pipe() {
        for record in [
            GuardRecord::Held {
                fd: 17,
                since_ns: 123_456_789_012,
            },
            GuardRecord::Answered { fd: -1 },
        ] {
            assert_eq!(GuardRecord::from_bytes(&record.to_bytes()), Some(record));
        }
        assert_eq!(GuardRecord::from_bytes(&[9; GuardRecord::SIZE]), None);
    }

    #[test]
    fn a_held_event_is_due_after_the_limit_and_slack_unless_answered() {
        let limit = Duration::from_secs(3);
        let mut d = GuardDeadlines::default();
        d.apply(
            GuardRecord::Held {
                fd: 5,
                since_ns: 1_000,
            },
            limit,
        );
        d.apply(
            GuardRecord::Held {
                fd: 6,
                since_ns: 1_000,
            },
            limit,
        );
        d.apply(GuardRecord::Answered { fd: 6 }, limit);
        let due_at = 1_000 + (limit + SLACK).as_nanos() as u64;
        assert!(d.take_due(due_at - 1).is_empty());
        assert_eq!(d.take_due(due_at), vec![5]);
        assert!(d.take_due(u64::MAX).is_empty(), "taken once");
    }

    #[test]
    fn the_state_is_read_after_the_command_name() {
        assert!(stat_says_stopped("672 (nodeip-trace) T 1 672 ..."));
        assert!(stat_says_stopped("672 (a) t 1"));
        assert!(!stat_says_stopped("672 (odd) T name) S 1 672"));
        assert!(!stat_says_stopped("672 (nodeip-trace) S 1"));
        assert!(!stat_says_stopped("garbage"));
    }
}
