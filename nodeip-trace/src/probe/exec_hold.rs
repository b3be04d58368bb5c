//! Holding a program at exec until its probes are attached: fanotify permission events
//! (`FAN_OPEN_EXEC_PERM`, Linux 5.0, `CONFIG_FANOTIFY_ACCESS_PERMISSIONS`).
//!
//! Every filesystem the tracer's mount namespace shows is marked (`FAN_MARK_FILESYSTEM`), and
//! filesystems mounted during the trace as they appear (`/proc/self/mountinfo` polled for
//! `POLLPRI`). An `execve` opening a file on one of them (the program, then its dynamic loader)
//! waits in the kernel until the tracer answers. A file already classified carries an ignore
//! mark on its inode, so its execs raise no event at all: known programs run without waiting. A
//! new file's event is handed to the trace's loop ([`ExecHold::take_held`]), which classifies
//! it, attaches its probes and then lets it go ([`ExecHold::release`]).
//!
//! Crash-safe by the kernel's own rule: when the group's descriptor closes (the tracer exits,
//! or is killed), fanotify answers every pending event with `FAN_ALLOW`. Bounded: this module's
//! own thread lets go any exec held longer than the limit (the trace's loop may be blocked, e.g.
//! on a stalled output), and counts it as released unprobed. The waiting process sleeps in the
//! kernel (no stop, no signal): its parent sees nothing but the delay.
//!
//! Why fanotify and not `bpf_send_signal(SIGSTOP)` at `sched_process_exec` (docs/exec-hold.md):
//! a stop is visible to the parent (`waitpid(WUNTRACED)`, a shell's job control, `CLD_STOPPED`),
//! and a tracer that dies leaves the program stopped for ever.
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::exec_hold_guard::{allow, event_records, GuardRecord, GROUP_FD};
use crate::host::file_identity::FileIdentity;

/// How long a program may be held at most, by default: the slowest classification measured (an
/// 80 MB Go program in a TCG guest, docs/exec-hold.md) with room to spare, and short enough that
/// a program the tracer could not serve in time only starts late, never hangs.
pub const DEFAULT_LIMIT: Duration = Duration::from_secs(3);

/// Ignore marks at most (each pins its inode in memory); beyond, known files are answered from
/// the tracer's own memory (a round trip to its thread instead of none).
const MAX_IGNORE_MARKS: usize = 8192;

/// Why holding at exec is not in use.
#[derive(Debug, thiserror::Error)]
pub enum ExecHoldError {
    /// `fanotify_init` or the first mark failed.
    #[error("fanotify permission events are not available ({call}: {source}){hint}")]
    Unavailable {
        /// The call that failed.
        call: &'static str,
        /// Its error.
        source: std::io::Error,
        /// What the error means here.
        hint: &'static str,
    },
    /// The holder's thread could not be started.
    #[error("starting the exec holder's thread failed: {0}")]
    Thread(#[source] std::io::Error),
    /// The guard process (which keeps the hold bounded while the tracer is stopped) could not
    /// be started; without it nothing is held.
    #[error("starting the exec hold's guard process failed: {0}")]
    Guard(#[source] std::io::Error),
}

/// The file and the process of one held exec, handed to the trace's loop.
#[derive(Debug)]
pub struct HeldExec {
    /// Which event (to release it).
    pub id: u64,
    /// The process that is exec'ing (its tgid).
    pub pid: u32,
    /// The file being exec'd, open (the program, or the dynamic loader it names).
    pub file: std::fs::File,
    /// When the event was read.
    pub since: Instant,
    /// The same, on the eBPF records' clock (CLOCK_MONOTONIC, ns).
    pub since_ns: u64,
}

/// How a held exec ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// Let go by the trace's loop, after this long.
    InTime(Duration),
    /// The limit passed first: the holder's thread let it go unprobed after this long.
    AtLimit(Duration),
}

/// Counts of one trace's holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HoldCounts {
    /// Execs held until their file was classified.
    pub held: u64,
    /// Of them, let go at the limit, before the loop was done.
    pub released_at_limit: u64,
    /// Execs of known files answered from the tracer's memory (no ignore mark for them).
    pub known_answered: u64,
    /// Filesystems marked.
    pub filesystems: u64,
    /// Held execs whose file's probes failed to attach (the kernel refused: out of descriptors,
    /// say): let go unprobed though in time.
    pub probes_failed: u64,
}

/// State shared by the holder's thread and the trace's loop.
#[derive(Default)]
struct Shared {
    /// Held, not yet taken by the loop.
    waiting: Vec<HeldExec>,
    /// Held (taken or not), by id: the event's fd number and when it came.
    pending: HashMap<u64, (RawFd, Instant)>,
    /// Known files (device, inode, change time) without an ignore mark.
    known: HashSet<FileIdentity>,
    ignore_marks: usize,
    counts: HoldCounts,
    next_id: u64,
    stop: bool,
    /// The pipe to the guard process: every held event's descriptor, and its answer.
    guard: Option<std::fs::File>,
    /// The pipe from the guard: one byte for each exec it let go itself (read from the group
    /// while the tracer was stopped, so never seen here).
    from_guard: Option<std::fs::File>,
}

impl Shared {
    /// Tells the guard about an event held or answered. A full pipe or a guard gone is not an
    /// error here: the tracer's own thread still answers in time.
    fn tell_guard(&mut self, record: GuardRecord) {
        if let Some(pipe) = &mut self.guard {
            let _ = std::io::Write::write_all(pipe, &record.to_bytes());
        }
    }

    /// Answers the held event of `fd` (telling the guard first, so its number is not reused
    /// before the guard knows).
    fn answer(&mut self, group: RawFd, fd: RawFd) {
        self.tell_guard(GuardRecord::Answered { fd });
        allow(group, fd);
    }

    /// Counts the execs the guard let go itself since the last call, as held and released at
    /// the limit.
    fn count_guard_let_go(&mut self) {
        let Some(pipe) = &mut self.from_guard else {
            return;
        };
        let mut bytes = [0u8; 4096];
        while let Ok(n @ 1..) = std::io::Read::read(pipe, &mut bytes) {
            self.counts.held += n as u64;
            self.counts.released_at_limit += n as u64;
        }
    }
}

/// The exec holder of one trace.
pub struct ExecHold {
    group: Arc<OwnedFd>,
    shared: Arc<Mutex<Shared>>,
    limit: Duration,
    /// Wakes the trace's loop when an exec is held.
    wake: Arc<tokio::sync::Notify>,
    /// The filesystems marked at start (their `major:minor`), handed to the mount watcher.
    marked: HashSet<String>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The guard process ([`super::exec_hold_guard`]).
    guard: Option<std::process::Child>,
}

fn io_error(call: &'static str, hint: &'static str) -> ExecHoldError {
    ExecHoldError::Unavailable {
        call,
        source: std::io::Error::last_os_error(),
        hint,
    }
}

/// Marks the filesystem holding `path` for exec permission events.
fn mark_filesystem(group: RawFd, path: &std::ffi::CStr) -> std::io::Result<()> {
    // SAFETY: `path` is a NUL-terminated string; fanotify_mark reads it and the fd only.
    let r = unsafe {
        libc::fanotify_mark(
            group,
            libc::FAN_MARK_ADD | libc::FAN_MARK_FILESYSTEM,
            libc::FAN_OPEN_EXEC_PERM,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The mount points of `mountinfo`'s text, one per filesystem (its `major:minor`).
pub fn filesystems_in_mountinfo(mountinfo: &str) -> Vec<(String, String)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let mut fields = line.split(' ');
        let (Some(_), Some(_), Some(device), Some(_), Some(point)) = (
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
            fields.next(),
        ) else {
            continue;
        };
        if seen.insert(device.to_string()) {
            out.push((device.to_string(), unescape_mount_point(point)));
        }
    }
    out
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape_mount_point(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl ExecHold {
    /// Makes the group and marks every filesystem of this mount namespace; the holder's
    /// threads start with [`ExecHold::start_threads`]. Needs CAP_SYS_ADMIN.
    pub fn new(limit: Duration) -> Result<Self, ExecHoldError> {
        // SAFETY: plain syscall; the returned fd is owned below.
        let fd = unsafe {
            libc::fanotify_init(
                libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
                (libc::O_RDONLY | libc::O_LARGEFILE | libc::O_CLOEXEC) as u32,
            )
        };
        if fd < 0 {
            return Err(io_error(
                "fanotify_init(FAN_CLASS_CONTENT)",
                "; it needs CAP_SYS_ADMIN, and a kernel built with CONFIG_FANOTIFY=y",
            ));
        }
        // SAFETY: fanotify_init returned a new descriptor that nothing else owns.
        let group = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        // Started before the first mark, so its own exec is not held.
        let (guard, pipe, from_guard) = start_guard(&group, limit).map_err(ExecHoldError::Guard)?;
        if mark_filesystem(group.as_raw_fd(), c"/").is_err() {
            return Err(io_error(
                "fanotify_mark(FAN_OPEN_EXEC_PERM) on /",
                "; the kernel needs CONFIG_FANOTIFY_ACCESS_PERMISSIONS=y and Linux 5.1 or later",
            ));
        }
        let shared = Shared {
            guard: Some(pipe),
            from_guard: Some(from_guard),
            ..Shared::default()
        };
        let mut hold = Self {
            group,
            shared: Arc::new(Mutex::new(shared)),
            limit,
            wake: Arc::new(tokio::sync::Notify::new()),
            marked: HashSet::new(),
            threads: Vec::new(),
            guard: Some(guard),
        };
        mark_new(hold.group.as_raw_fd(), &hold.shared, &mut hold.marked);
        Ok(hold)
    }

    /// The longest a program is held.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Notified whenever an exec is held (await it, then [`ExecHold::take_held`]).
    pub fn wake(&self) -> Arc<tokio::sync::Notify> {
        self.wake.clone()
    }

    /// Starts the holder's threads: one reads the events (answering known files at once,
    /// handing new ones to the loop, letting go what waited past the limit), one marks the
    /// filesystems mounted later. Each first drops, for itself, the capabilities the running
    /// tracer does not keep ([`super::privileges`]).
    pub fn start_threads(&mut self) -> Result<(), ExecHoldError> {
        let (group, shared, limit, wake) = (
            self.group.clone(),
            self.shared.clone(),
            self.limit,
            self.wake.clone(),
        );
        let reader = std::thread::Builder::new()
            .name("exec-hold".into())
            .spawn(move || {
                let _ = super::privileges::drop_to_running_set();
                read_events(&group, &shared, limit, &wake);
            })
            .map_err(ExecHoldError::Thread)?;
        self.threads.push(reader);
        let (group, shared) = (self.group.clone(), self.shared.clone());
        let marked = std::mem::take(&mut self.marked);
        let mounts = std::thread::Builder::new()
            .name("exec-hold-mounts".into())
            .spawn(move || {
                let _ = super::privileges::drop_to_running_set();
                watch_mounts(&group, &shared, marked);
            })
            .map_err(ExecHoldError::Thread)?;
        self.threads.push(mounts);
        Ok(())
    }

    /// The execs held since the last call.
    pub fn take_held(&self) -> Vec<HeldExec> {
        std::mem::take(&mut self.shared.lock().expect("exec hold lock").waiting)
    }

    /// Lets a held exec go (if the limit has not let it go already); `known` files get an
    /// ignore mark, so their execs are no longer held. Says how it ended.
    pub fn release(&self, held: &HeldExec, known: bool) -> Released {
        let mut shared = self.shared.lock().expect("exec hold lock");
        if known {
            self.remember_known(&mut shared, &held.file);
        }
        match shared.pending.remove(&held.id) {
            Some((fd, since)) => {
                shared.answer(self.group.as_raw_fd(), fd);
                Released::InTime(since.elapsed())
            }
            None => Released::AtLimit(held.since.elapsed()),
        }
    }

    /// Marks a file known before anything execs it (the command `trace` starts, its dynamic
    /// loader, the programs running at start): its execs are not held.
    pub fn mark_known(&self, file: &std::fs::File) {
        let mut shared = self.shared.lock().expect("exec hold lock");
        self.remember_known(&mut shared, file);
    }

    /// Lets `file`'s execs run without being held: an ignore mark while there is room for one,
    /// else the holder's own memory of it.
    fn remember_known(&self, shared: &mut Shared, file: &std::fs::File) {
        if shared.ignore_marks < MAX_IGNORE_MARKS && ignore(self.group.as_raw_fd(), file) {
            shared.ignore_marks += 1;
        } else if let Some(id) = FileIdentity::of_file(file) {
            shared.known.insert(id);
        }
    }

    /// Counts a held exec whose probes failed to attach.
    pub fn count_probes_failed(&self) {
        self.shared
            .lock()
            .expect("exec hold lock")
            .counts
            .probes_failed += 1;
    }

    /// The counts so far, with the execs the guard let go while the tracer was stopped.
    pub fn counts(&self) -> HoldCounts {
        let mut shared = self.shared.lock().expect("exec hold lock");
        shared.count_guard_let_go();
        shared.counts
    }
}

impl Drop for ExecHold {
    fn drop(&mut self) {
        {
            let mut shared = self.shared.lock().expect("exec hold lock");
            shared.stop = true;
            // Everything still held goes now (closing the group would let it go too).
            for (_, (fd, _)) in std::mem::take(&mut shared.pending) {
                shared.answer(self.group.as_raw_fd(), fd);
            }
            // The guard ends when its pipe closes.
            shared.guard = None;
        }
        // The threads poll with a timeout and see `stop`; they are not joined (a thread blocked
        // in a read of a slow filesystem must not hold up the trace's end).
        self.threads.clear();
        if let Some(mut guard) = self.guard.take() {
            reap(&mut guard);
        }
    }
}

/// Starts the guard process (`nodeip-trace __exec-hold-guard`, this same executable) with a
/// duplicate of `group` at [`GROUP_FD`], a pipe on its stdin and one on its stdout; returns it,
/// the write end of the first and the read end of the second (both non-blocking: a stuck guard
/// never blocks the holder's thread, and the guard never waits for the tracer).
fn start_guard(
    group: &OwnedFd,
    limit: Duration,
) -> std::io::Result<(std::process::Child, std::fs::File, std::fs::File)> {
    use std::os::unix::process::CommandExt;
    let (read_end, write_end) = pipe()?;
    let (back_read, back_write) = pipe()?;
    // The guard's stdin blocks (it polls it); the other three ends never wait.
    for end in [&write_end, &back_read, &back_write] {
        // SAFETY: fcntl on our own descriptors; each pipe end is an open file of its own.
        unsafe {
            let flags = libc::fcntl(end.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(end.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    let group_fd = group.as_raw_fd();
    let mut command = std::process::Command::new("/proc/self/exe");
    command
        .arg0("nodeip-trace")
        .arg("__exec-hold-guard")
        .arg(format!("--tracer={}", std::process::id()))
        .arg(format!("--limit-ms={}", limit.as_millis()))
        .stdin(std::process::Stdio::from(read_end))
        .stdout(std::process::Stdio::from(back_write))
        .process_group(0);
    // SAFETY: between fork and exec the child only calls dup2 and fcntl, which are
    // async-signal-safe. dup2 clears the close-on-exec flag of the new descriptor, but does
    // nothing when the group already is GROUP_FD: then the flag is cleared by hand.
    unsafe {
        command.pre_exec(move || {
            let r = if group_fd == GROUP_FD {
                libc::fcntl(GROUP_FD, libc::F_SETFD, 0)
            } else {
                libc::dup2(group_fd, GROUP_FD)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    Ok((
        child,
        std::fs::File::from(write_end),
        std::fs::File::from(back_read),
    ))
}

/// A pipe whose ends are closed on exec: (read end, write end).
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut ends = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into our array.
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two new descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
}

/// Waits a little for the guard to see its pipe close and end; kills it past that.
fn reap(guard: &mut std::process::Child) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        if !matches!(guard.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = guard.kill();
    let _ = guard.wait();
}

/// Puts an ignore mark for exec permission events on `file`'s inode. Not surviving a change of
/// the file: a program rewritten in place is held and classified again.
fn ignore(group: RawFd, file: &std::fs::File) -> bool {
    // SAFETY: a NULL path with a descriptor marks that descriptor's inode.
    let r = unsafe {
        libc::fanotify_mark(
            group,
            libc::FAN_MARK_ADD | libc::FAN_MARK_IGNORED_MASK,
            libc::FAN_OPEN_EXEC_PERM,
            file.as_raw_fd(),
            std::ptr::null(),
        )
    };
    r == 0
}

/// The mount tables whose filesystems are marked: the tracer's own, and the init process's as
/// seen through its root (the host's, for a tracer in a DaemonSet's container with the host's
/// pid namespace), each with the prefix that reaches its mount points from here.
const MOUNT_TABLES: [(&str, &str); 2] = [
    ("/proc/self/mountinfo", ""),
    ("/proc/1/mountinfo", "/proc/1/root"),
];

fn mark_new(group: RawFd, shared: &Mutex<Shared>, marked: &mut HashSet<String>) {
    let mut added = 0;
    for (table, prefix) in MOUNT_TABLES {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for (device, point) in filesystems_in_mountinfo(&text) {
            if !marked.insert(device) {
                continue;
            }
            let Ok(path) = std::ffi::CString::new(format!("{prefix}{point}")) else {
                continue;
            };
            // Pseudo filesystems refuse or never exec; a refusal is not an error.
            if mark_filesystem(group, &path).is_ok() {
                added += 1;
            }
        }
    }
    shared.lock().expect("exec hold lock").counts.filesystems += added;
}

/// The mount watcher: each change of a watched mount table marks the new filesystems.
fn watch_mounts(group: &OwnedFd, shared: &Mutex<Shared>, mut marked: HashSet<String>) {
    let tables: Vec<std::fs::File> = MOUNT_TABLES
        .iter()
        .filter_map(|(table, _)| std::fs::File::open(table).ok())
        .collect();
    // A mount made between the start's marks and this thread's first poll.
    mark_new(group.as_raw_fd(), shared, &mut marked);
    loop {
        let mut fds: Vec<libc::pollfd> = tables
            .iter()
            .map(|f| libc::pollfd {
                fd: f.as_raw_fd(),
                events: libc::POLLPRI,
                revents: 0,
            })
            .collect();
        // SAFETY: the pollfds are ours, their count is the vector's length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 200) };
        if shared.lock().expect("exec hold lock").stop {
            return;
        }
        if n > 0 {
            for (file, fd) in tables.iter().zip(&fds) {
                if fd.revents != 0 {
                    // A change is acknowledged by reading the table again from its start.
                    // SAFETY: rewinds our own descriptor.
                    unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_SET) };
                    let _ = std::io::Read::read_to_end(&mut &*file, &mut Vec::new());
                }
            }
            mark_new(group.as_raw_fd(), shared, &mut marked);
        }
    }
}

/// The reader: answers or hands over each event, and lets go what waited past `limit`.
fn read_events(
    group: &OwnedFd,
    shared: &Mutex<Shared>,
    limit: Duration,
    wake: &tokio::sync::Notify,
) {
    let own = std::process::id() as i32;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let timeout_ms = {
            let s = shared.lock().expect("exec hold lock");
            if s.stop {
                return;
            }
            s.pending
                .values()
                .map(|(_, since)| limit.saturating_sub(since.elapsed()))
                .min()
                .map_or(200, |d| d.as_millis().clamp(1, 200) as i32)
        };
        let mut fds = libc::pollfd {
            fd: group.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack.
        let n = unsafe { libc::poll(&mut fds, 1, timeout_ms) };
        if n > 0 {
            // SAFETY: reads into our buffer, at most its length.
            let len = unsafe { libc::read(group.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if len > 0 {
                on_events(group.as_raw_fd(), shared, own, &buf[..len as usize], wake);
            }
        }
        let mut s = shared.lock().expect("exec hold lock");
        s.count_guard_let_go();
        let late: Vec<u64> = s
            .pending
            .iter()
            .filter(|(_, (_, since))| since.elapsed() >= limit)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            if let Some((fd, _)) = s.pending.remove(&id) {
                s.answer(group.as_raw_fd(), fd);
                s.counts.released_at_limit += 1;
            }
        }
    }
}

fn on_events(
    group: RawFd,
    shared: &Mutex<Shared>,
    own: i32,
    bytes: &[u8],
    wake: &tokio::sync::Notify,
) {
    let mut handed = false;
    for meta in event_records(bytes) {
        if meta.fd < 0 {
            continue;
        }
        if meta.mask & libc::FAN_OPEN_EXEC_PERM == 0 || meta.pid == own {
            allow(group, meta.fd);
            continue;
        }
        // SAFETY: the event's fd is ours; duplicated so the loop owns a File of it while the
        // event's own fd stays for the answer.
        let dup = unsafe { libc::fcntl(meta.fd, libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            allow(group, meta.fd);
            continue;
        }
        // SAFETY: `dup` is a new descriptor owned by this File.
        let file = unsafe { std::fs::File::from_raw_fd(dup) };
        let mut s = shared.lock().expect("exec hold lock");
        let known = !s.known.is_empty()
            && FileIdentity::of_file(&file).is_some_and(|id| s.known.contains(&id));
        if known {
            s.counts.known_answered += 1;
            drop(s);
            allow(group, meta.fd);
            continue;
        }
        let id = s.next_id;
        s.next_id += 1;
        let since = Instant::now();
        let since_ns = crate::model::clock::monotonic_now_ns();
        s.tell_guard(GuardRecord::Held {
            fd: meta.fd,
            since_ns,
        });
        s.pending.insert(id, (meta.fd, since));
        s.counts.held += 1;
        s.waiting.push(HeldExec {
            id,
            pid: meta.pid as u32,
            file,
            since,
            since_ns,
        });
        handed = true;
    }
    if handed {
        wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_gives_one_mount_point_per_filesystem() {
        let text = "\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw
30 22 254:0 /var/lib/x /srv/bind rw shared:1 - ext4 /dev/vda rw
31 22 0:45 / /mnt/with\\040space rw - tmpfs tmpfs rw
bad line
";
        assert_eq!(
            filesystems_in_mountinfo(text),
            [
                ("254:0".to_string(), "/".to_string()),
                ("0:21".to_string(), "/proc".to_string()),
                ("0:45".to_string(), "/mnt/with space".to_string()),
            ]
        );
    }

    #[test]
    fn escapes_are_undone_and_a_lone_backslash_kept() {
        assert_eq!(unescape_mount_point("a\\011b\\134c\\9"), "a\tb\\c\\9");
    }
}
