//! The one exec watcher: every executable file a trace meets — running at start, exec'd during
//! the trace (held at exec by [`super::exec_hold`] where the kernel allows, else seen at its
//! `sched_process_exec` record), or the command `trace` starts — is classified once (by device
//! and inode) and its resolvers probed:
//! - Go's own resolver in a Go program ([`crate::host::go_binary`]);
//! - the C library's `getaddrinfo` linked into a statically built program (found by its symbol,
//!   or through the cgo glue of a stripped static cgo Go program, as k3s is);
//! - for a dynamic program, the libc its process will map: the usual paths under
//!   `/proc/PID/root` at exec (a container's own copy), and once more shortly after, from its
//!   maps (a libc at an unusual path).
//!
//! It reports what it did as typed [`ProbeOutcome`]s; the trace says them.
use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::executable_resolvers::{classify, running_executables};
use super::hooks::HookMode;
use super::loader::{AttachedHook, LiveTracer};
use super::ProbeError;
use crate::host::elf::ElfImage;
use crate::host::error::HostError;
use crate::host::file_identity::FileIdentity;
use crate::host::go_binary::GO_SORT_FUNCTION;
use crate::host::libc_locator::{libc_kind, libcs_in_root_of, LibcKind, LibcTarget};
use crate::host::mapped_file::MappedFile;

/// Files remembered at most; beyond, the memory starts over (a file seen again is read again).
const MAX_FILES: usize = 16384;

/// Processes whose maps are looked at again at most at once.
const MAX_AGAIN: usize = 4096;

/// How long after its exec a process's maps are looked at again (its dynamic loader has mapped
/// its libc by then).
const AGAIN_AFTER: Duration = Duration::from_millis(200);

/// How long a look at the node's own root for libcs serves the execs in its mount namespace.
const HOST_ROOT_PERIOD: Duration = Duration::from_secs(1);

/// Failed attaches to one libc file before the watcher says so and stops trying.
const LIBC_TRIES: u32 = 3;

/// How often the probed programs are looked at for ones whose probes can go (deleted, run by
/// no process).
const RELEASE_PERIOD: Duration = Duration::from_secs(2);

/// How long after it was last met at an exec a probed program keeps its probes, whatever
/// [`ExecWatcher::release_gone`] finds: an exec met at its hold does not show in `/proc` yet.
const RELEASE_GRACE: Duration = Duration::from_secs(3);

/// A resolver found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FoundResolver {
    /// Go's own resolver (the sort function), in a program of this Go version.
    Go,
    /// A C library's `getaddrinfo` linked into a statically built program.
    StaticLibc {
        /// Whose.
        libc: LibcKind,
        /// Found through the cgo glue (a stripped static cgo Go program), not by its symbol.
        through_cgo_glue: bool,
    },
    /// A C library a dynamic program maps.
    Libc(LibcKind),
}

impl std::fmt::Display for FoundResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FoundResolver::Go => f.write_str("Go resolver"),
            FoundResolver::StaticLibc {
                libc,
                through_cgo_glue,
            } => write!(
                f,
                "static {} getaddrinfo{}",
                libc.name(),
                if *through_cgo_glue {
                    ", found through the cgo glue"
                } else {
                    ""
                }
            ),
            FoundResolver::Libc(libc) => write!(f, "{} getaddrinfo", libc.name()),
        }
    }
}

/// Why a resolver found in a file was not probed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeRefusal {
    /// Its entry point could not be found.
    #[error(transparent)]
    NotFound(HostError),
    /// Attaching failed.
    #[error(transparent)]
    Attach(#[from] ProbeError),
    /// The file could not be opened.
    #[error("opening {path} failed: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// What the watcher did for one resolver of one file.
#[derive(Debug)]
pub struct ProbeOutcome {
    /// The file, as a path of the tracer's (or of the process's root, through `/proc`).
    pub file: PathBuf,
    /// What it carries.
    pub resolver: FoundResolver,
    /// Probed (with a detail: the Go version), or why not.
    pub result: Result<String, ProbeRefusal>,
}

impl ProbeOutcome {
    /// Whether it was probed.
    pub fn probed(&self) -> bool {
        self.result.is_ok()
    }

    /// Whether the kernel refused its probes (not: nothing to probe in the file).
    pub fn attach_failed(&self) -> bool {
        matches!(self.result, Err(ProbeRefusal::Attach(_)))
    }
}

impl std::fmt::Display for ProbeOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.result {
            Ok(detail) if detail.is_empty() => write!(
                f,
                "probes attached to {} ({})",
                self.file.display(),
                self.resolver
            ),
            Ok(detail) => write!(
                f,
                "probes attached to {} ({}, {detail})",
                self.file.display(),
                self.resolver
            ),
            Err(why) => write!(
                f,
                "{} of {} not probed: {why}",
                self.resolver,
                self.file.display()
            ),
        }
    }
}

/// Files the watcher is done with. A file it attached probes to is known by device and inode:
/// the probes pin the inode, so its number cannot pass to another file while they are
/// attached, and a change of its metadata (`mv`, `chmod`, a hard link) must not attach them a
/// second time. A file it only looked at is known by its whole [`FileIdentity`]: once deleted,
/// its inode number goes to the next new file (ext4 does so at once), which must be looked at.
#[derive(Default)]
struct SeenFiles {
    /// (device, inode) of the files with probes attached.
    pinned: HashSet<(u64, u64)>,
    /// The files looked at without probes attached.
    unpinned: HashSet<FileIdentity>,
}

impl SeenFiles {
    fn contains(&self, id: &FileIdentity) -> bool {
        self.pinned.contains(&(id.dev, id.ino)) || self.unpinned.contains(id)
    }

    /// Remembers `id`; `pinned` when probes were attached to it. The files looked at are
    /// forgotten past [`MAX_FILES`] (looked at again if met again); pinned ones never are.
    fn insert(&mut self, id: FileIdentity, pinned: bool) {
        if pinned {
            self.pinned.insert((id.dev, id.ino));
            return;
        }
        if self.unpinned.len() >= MAX_FILES {
            self.unpinned.clear();
        }
        self.unpinned.insert(id);
    }

    /// Forgets a file with probes attached, once they are detached.
    fn forget_pinned(&mut self, key: (u64, u64)) {
        self.pinned.remove(&key);
    }
}

/// The trace's exec watcher.
#[derive(Default)]
pub struct ExecWatcher {
    /// Executables classified.
    files: SeenFiles,
    /// libc files attached to (or given up on).
    libcs: SeenFiles,
    /// Failed attaches per libc file.
    libc_failures: HashMap<FileIdentity, u32>,
    /// Processes whose maps to look at again, and when.
    again: Vec<(u32, Instant)>,
    /// The node's mount namespace (pid 1's, else the tracer's), when it can be read.
    host_mount_ns: Option<u64>,
    /// When a process in it was last looked at for libcs at its exec.
    host_root_looked: Option<Instant>,
    /// New programs are held at exec until probed.
    holding: bool,
    /// The executables with probes attached, by (device, inode).
    probed: HashMap<(u64, u64), ProbedExecutable>,
    /// When [`Self::release_gone`] last looked.
    release_looked: Option<Instant>,
    /// The tracer runs in the initial PID namespace, so `/proc` lists every process of the
    /// node: only then can "no process runs it" be told (a pod without `hostPID` keeps every
    /// program's probes for the trace's life).
    sees_every_process: bool,
}

/// An executable the watcher attached probes to, kept open to tell when it is deleted.
struct ProbedExecutable {
    /// The file.
    file: std::fs::File,
    /// Its name, as said when probed.
    shown: PathBuf,
    /// When it was last met (probed, or classified again at an exec).
    met: Instant,
}

/// Probes taken off a program no process runs any more and none can (its file is deleted: a
/// replaced binary, runc's copy of itself): what a node that churns binaries would otherwise
/// keep for the trace's life (9 descriptors and their kernel state per Go program).
#[derive(Debug)]
pub struct ReleasedProbes {
    /// The program's file, as named when probed.
    pub file: PathBuf,
    /// Uprobes detached.
    pub uprobes: usize,
}

impl std::fmt::Display for ReleasedProbes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} uprobes of {} detached: the file is deleted and no process runs it",
            self.uprobes,
            self.file.display()
        )
    }
}

/// When a process's libcs are looked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Looked {
    /// At its exec (held or seen at its record); whether it runs in the node's own mount
    /// namespace.
    AtExec { in_host: bool },
    /// [`AGAIN_AFTER`] its exec, in its maps.
    Again,
}

/// What [`ExecWatcher::classify_file`] found of a file's loader.
pub struct Classified {
    /// The resolvers found and probed (empty: none of its own).
    pub outcomes: Vec<ProbeOutcome>,
    /// The program interpreter it names (its dynamic loader), for a dynamic program.
    pub interpreter: Option<String>,
}

impl ExecWatcher {
    /// A watcher that knows the libcs the trace attached to at start (a failed one, e.g.
    /// reached through a process that was exiting, is tried again at the next exec that maps
    /// it).
    pub fn new(libcs: &[LibcTarget], hooks: &[AttachedHook]) -> Self {
        let attached = |l: &LibcTarget| {
            let target = format!("getaddrinfo@{}", l.path.display());
            hooks
                .iter()
                .any(|h| h.target == target && h.mode == HookMode::Uprobe && h.status.is_ok())
        };
        let mut watcher = Self {
            // Pid 1's where it can be read (a DaemonSet's tracer sits in its pod's own), else
            // ours (pid 1 of a micro-VM may refuse it).
            host_mount_ns: mount_ns_of(1).or_else(|| mount_ns_of(std::process::id())),
            sees_every_process: in_initial_pid_ns(),
            ..Self::default()
        };
        for l in libcs.iter().filter(|l| attached(l)) {
            watcher.libcs.insert(l.id, true);
        }
        watcher
    }

    /// Classifies the open executable `file` (shown as `shown` names it: asked only for a
    /// file not met before) and probes what it carries, once per file: `None` when it was
    /// classified before.
    pub fn classify_file(
        &mut self,
        tracer: &mut LiveTracer,
        file: &std::fs::File,
        shown: impl FnOnce() -> PathBuf,
    ) -> Option<Classified> {
        let id = FileIdentity::of_file(file)?;
        if self.files.contains(&id) {
            if let Some(probed) = self.probed.get_mut(&(id.dev, id.ino)) {
                probed.met = Instant::now();
            }
            return None;
        }
        let shown = shown();
        let classified = Self::classify_new(tracer, file, &shown);
        let pinned = classified.outcomes.iter().any(ProbeOutcome::probed);
        self.files.insert(id, pinned);
        if let Some(file) = pinned.then(|| file.try_clone().ok()).flatten() {
            let met = Instant::now();
            let probed = ProbedExecutable { file, shown, met };
            self.probed.insert((id.dev, id.ino), probed);
        }
        Some(classified)
    }

    /// Takes the probes off the programs whose files are deleted and that no process runs
    /// (looked at every [`RELEASE_PERIOD`]; one met at an exec within [`RELEASE_GRACE`] is
    /// kept). Their inodes are then forgotten: a new file given the same number is looked at.
    pub fn release_gone(&mut self, tracer: &mut LiveTracer) -> Vec<ReleasedProbes> {
        if self.probed.is_empty()
            || !self.sees_every_process
            || self
                .release_looked
                .is_some_and(|at| at.elapsed() < RELEASE_PERIOD)
        {
            return Vec::new();
        }
        self.release_looked = Some(Instant::now());
        let deleted: Vec<(u64, u64)> = self
            .probed
            .iter()
            .filter(|(_, p)| p.met.elapsed() >= RELEASE_GRACE)
            .filter(|(_, p)| p.file.metadata().is_ok_and(|m| m.nlink() == 0))
            .map(|(key, _)| *key)
            .collect();
        if deleted.is_empty() {
            return Vec::new();
        }
        let running = running_executable_inodes();
        let mut released = Vec::new();
        for key in deleted.into_iter().filter(|k| !running.contains(k)) {
            let Some(probed) = self.probed.remove(&key) else {
                continue;
            };
            self.files.forget_pinned(key);
            released.push(ReleasedProbes {
                file: probed.shown,
                uprobes: tracer.detach_file(key.0, key.1),
            });
        }
        released
    }

    /// Classifies a file not met before and probes what it carries.
    fn classify_new(tracer: &mut LiveTracer, file: &std::fs::File, shown: &Path) -> Classified {
        let via = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let mut outcomes = Vec::new();
        let Some(elf) = MappedFile::map(file)
            .ok()
            .and_then(|bytes| ElfImage::parse(bytes).ok())
        else {
            return Classified {
                outcomes,
                interpreter: None,
            };
        };
        let interpreter = elf.interpreter.clone();
        let (found, go) = classify(elf);
        if let Some(found) = found {
            let resolver = FoundResolver::StaticLibc {
                libc: found.libc,
                through_cgo_glue: found.through_cgo_glue,
            };
            let result = match found.offset {
                Err(why) => Err(ProbeRefusal::NotFound(why)),
                Ok(Some(at)) => tracer
                    .attach_getaddrinfo_at(&via, shown, found.libc, at)
                    .map(|()| String::new())
                    .map_err(ProbeRefusal::from),
                Ok(None) => tracer
                    .attach_libc(&via, shown, found.libc)
                    .map(|()| String::new())
                    .map_err(ProbeRefusal::from),
            };
            outcomes.push(ProbeOutcome {
                file: shown.to_path_buf(),
                resolver,
                result,
            });
        }
        if let Some(binary) = go.filter(|b| b.function(GO_SORT_FUNCTION).is_some()) {
            outcomes.push(ProbeOutcome {
                file: shown.to_path_buf(),
                resolver: FoundResolver::Go,
                result: tracer
                    .attach_go(&via, shown, &binary)
                    .map_err(ProbeRefusal::from),
            });
        }
        Classified {
            outcomes,
            interpreter,
        }
    }

    /// Looks at every running process's executable (at the trace's start). `known` is told
    /// each executable and dynamic loader met (the exec holder marks them: they run without
    /// waiting).
    pub fn scan_running(
        &mut self,
        tracer: &mut LiveTracer,
        mut known: impl FnMut(&std::fs::File),
    ) -> Vec<ProbeOutcome> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut outcomes = Vec::new();
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let exe = PathBuf::from(format!("/proc/{pid}/exe"));
            let Ok(file) = std::fs::File::open(&exe) else {
                continue;
            };
            if let Some(c) = self.classify_file(tracer, &file, || link_or_itself(exe)) {
                known(&file);
                if let Some(interp) = c.interpreter.as_deref().and_then(|i| open_in_root(pid, i)) {
                    known(&interp);
                }
                outcomes.extend(c.outcomes);
            }
        }
        outcomes
    }

    /// The command `trace` starts, before it starts: its own file and its dynamic loader are
    /// classified (and told to `known`), so its first lookups are seen and it is not held.
    pub fn before_command(
        &mut self,
        tracer: &mut LiveTracer,
        path: &Path,
        mut known: impl FnMut(&std::fs::File),
    ) -> Vec<ProbeOutcome> {
        let Ok(file) = std::fs::File::open(path) else {
            return Vec::new();
        };
        let shown = || std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let Some(c) = self.classify_file(tracer, &file, shown) else {
            known(&file);
            return Vec::new();
        };
        known(&file);
        if let Some(interp) = c
            .interpreter
            .as_deref()
            .and_then(|i| std::fs::File::open(i).ok())
        {
            known(&interp);
        }
        let mut outcomes = c.outcomes;
        for outcome in &mut outcomes {
            if let Ok(detail) = &mut outcome.result {
                if !detail.is_empty() {
                    detail.push_str(", ");
                }
                detail.push_str("before it starts");
            }
        }
        outcomes
    }

    /// A held exec: process `pid` is opening `file` for exec (its program, or its dynamic
    /// loader). The file is classified, and the libcs in the process's root attached to
    /// (it has already entered its container's root). Its maps are looked at again later.
    pub fn on_held_exec(
        &mut self,
        tracer: &mut LiveTracer,
        pid: u32,
        file: &std::fs::File,
    ) -> Vec<ProbeOutcome> {
        let shown = || {
            std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
                .unwrap_or_else(|_| PathBuf::from(format!("(exec by pid {pid})")))
        };
        let mut outcomes = self
            .classify_file(tracer, file, shown)
            .map(|c| c.outcomes)
            .unwrap_or_default();
        let in_host = self.in_host(mount_ns_of(pid));
        outcomes.extend(self.libcs_of(tracer, pid, Looked::AtExec { in_host }));
        self.look_again(pid);
        outcomes
    }

    /// A process exec'd (its `sched_process_exec` record): what the hold did not see, or all of
    /// it where there is no hold — attached after the program started. `executed` is the file
    /// name its exec named, for a process already gone (an absolute one is opened from here).
    pub fn on_exec_record(
        &mut self,
        tracer: &mut LiveTracer,
        pid: u32,
        executed: &Path,
    ) -> Vec<ProbeOutcome> {
        let mount_ns = mount_ns_of(pid);
        if self.holding && mount_ns.is_none() {
            // Gone already: nothing of it to look at, and its file, were it new, was held.
            return Vec::new();
        }
        let in_host = self.in_host(mount_ns);
        let mut outcomes = self.libcs_of(tracer, pid, Looked::AtExec { in_host });
        // With the hold, a program on the node's own filesystems (all marked) that was not
        // known was held and probed at its exec: nothing is left to classify. Only the node's
        // libcs are looked at now and then, and the maps of one still running (a libc of its
        // own, loaded from elsewhere).
        if !(self.holding && in_host) {
            let exe = PathBuf::from(format!("/proc/{pid}/exe"));
            // Held open: the process may be gone before the probes are attached.
            let opened = match std::fs::File::open(&exe) {
                Ok(file) => Some((file, exe)),
                Err(_) => Some(executed)
                    .filter(|p| p.is_absolute())
                    .and_then(|p| std::fs::File::open(p).ok().map(|f| (f, p.to_path_buf()))),
            };
            if let Some((file, shown)) = opened {
                if let Some(c) = self.classify_file(tracer, &file, || link_or_itself(shown)) {
                    outcomes.extend(c.outcomes);
                }
            }
        }
        self.look_again(pid);
        outcomes
    }

    /// Looks again at the processes whose time has come (their maps name their libc now).
    pub fn tick(&mut self, tracer: &mut LiveTracer) -> Vec<ProbeOutcome> {
        if self.again.is_empty() {
            return Vec::new();
        }
        let now = Instant::now();
        let due: Vec<u32> = self
            .again
            .iter()
            .filter(|(_, at)| *at <= now)
            .map(|(pid, _)| *pid)
            .collect();
        self.again.retain(|(_, at)| *at > now);
        due.into_iter()
            .flat_map(|pid| self.libcs_of(tracer, pid, Looked::Again))
            .collect()
    }

    /// Whether a process in mount namespace `mount_ns` runs in the node's own.
    fn in_host(&self, mount_ns: Option<u64>) -> bool {
        self.host_mount_ns.is_some() && mount_ns == self.host_mount_ns
    }

    /// Says that new programs are held at exec until probed ([`Self::on_held_exec`]): exec
    /// records of the node's own mount namespace then classify nothing.
    pub fn holding(&mut self) {
        self.holding = true;
    }

    fn look_again(&mut self, pid: u32) {
        if self.again.len() < MAX_AGAIN && !self.again.iter().any(|(p, _)| *p == pid) {
            self.again.push((pid, Instant::now() + AGAIN_AFTER));
        }
    }

    /// Attaches to the libcs in `pid`'s root not attached to yet. At its exec, a process in
    /// the node's own mount namespace is not looked at when the node's root was looked at
    /// within [`HOST_ROOT_PERIOD`]: the node's libcs are the same for all its processes, and
    /// every exec of the node comes here (a libc installed since is found [`AGAIN_AFTER`] the
    /// exec in the process's maps, or at the next exec past the period).
    fn libcs_of(&mut self, tracer: &mut LiveTracer, pid: u32, looked: Looked) -> Vec<ProbeOutcome> {
        if looked == (Looked::AtExec { in_host: true }) {
            if self
                .host_root_looked
                .is_some_and(|at| at.elapsed() < HOST_ROOT_PERIOD)
            {
                return Vec::new();
            }
            self.host_root_looked = Some(Instant::now());
        }
        let mut outcomes = Vec::new();
        for (path, id) in libcs_in_root_of(pid) {
            if self.libcs.contains(&id) {
                continue;
            }
            let kind = libc_kind(&path.to_string_lossy()).unwrap_or(LibcKind::Glibc);
            // Held open at once: a process that just exec'd may be gone (and its
            // /proc/PID/root with it) before the symbols are read and the probes attached, which
            // then go through our own fd to the same file.
            let result = std::fs::File::open(&path)
                .map_err(|source| ProbeRefusal::Open {
                    path: path.clone(),
                    source,
                })
                .and_then(|file| {
                    let via = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                    Ok(tracer.attach_libc(&via, &path, kind)?)
                });
            match result {
                Ok(()) => {
                    self.libcs.insert(id, true);
                    outcomes.push(ProbeOutcome {
                        file: path,
                        resolver: FoundResolver::Libc(kind),
                        result: Ok(format!("pid {pid}")),
                    });
                }
                Err(e) => {
                    let failures = self.libc_failures.entry(id).or_default();
                    *failures += 1;
                    if *failures >= LIBC_TRIES {
                        // Three processes' worth of tries: say so once and stop trying.
                        self.libcs.insert(id, false);
                        outcomes.push(ProbeOutcome {
                            file: path,
                            resolver: FoundResolver::Libc(kind),
                            result: Err(e),
                        });
                    }
                }
            }
        }
        outcomes
    }
}

/// (device, inode) of every running process's executable (a deleted file's too: `stat` of
/// `/proc/PID/exe` reaches the file itself).
fn running_executable_inodes() -> HashSet<(u64, u64)> {
    running_executables(Path::new("/proc"))
        .into_iter()
        .filter_map(|exe| std::fs::metadata(exe).ok())
        .map(|m| (m.dev(), m.ino()))
        .collect()
}

/// The inode of the initial PID namespace (`PROC_PID_INIT_INO`, fixed by the kernel).
const INITIAL_PID_NS_INODE: u64 = 0xEFFF_FFFC;

/// Whether this process runs in the initial PID namespace (`/proc/self/ns/pid`).
fn in_initial_pid_ns() -> bool {
    std::fs::metadata("/proc/self/ns/pid").is_ok_and(|m| m.ino() == INITIAL_PID_NS_INODE)
}

/// The target of the link `path` (`/proc/PID/exe`), else `path` itself.
fn link_or_itself(path: PathBuf) -> PathBuf {
    std::fs::read_link(&path).unwrap_or(path)
}

/// The inode of process `pid`'s mount namespace (`/proc/PID/ns/mnt` links to `mnt:[INODE]`).
fn mount_ns_of(pid: u32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).ok()?;
    link.to_str()?
        .strip_prefix("mnt:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Opens `path` as process `pid` sees it (through its root).
fn open_in_root(pid: u32, path: &str) -> Option<std::fs::File> {
    std::fs::File::open(format!("/proc/{pid}/root/{}", path.trim_start_matches('/'))).ok()
}

#[cfg(test)]
mod tests {
    use super::{FileIdentity, SeenFiles, MAX_FILES};

    fn id(ino: u64, changed_ns: i64) -> FileIdentity {
        FileIdentity {
            dev: 8,
            ino,
            changed_ns,
        }
    }

    #[test]
    fn a_probed_file_stays_known_when_its_metadata_changes() {
        let mut seen = SeenFiles::default();
        seen.insert(id(1, 10), true);
        // `mv` or `chmod` of the probed file: same inode, new change time.
        assert!(seen.contains(&id(1, 20)));
    }

    #[test]
    fn a_new_file_on_the_inode_of_one_only_looked_at_is_looked_at() {
        let mut seen = SeenFiles::default();
        seen.insert(id(2, 10), false);
        assert!(seen.contains(&id(2, 10)));
        assert!(!seen.contains(&id(2, 20)));
    }

    #[test]
    fn past_the_cap_files_looked_at_are_forgotten_and_probed_ones_kept() {
        let mut seen = SeenFiles::default();
        seen.insert(id(u64::MAX, 1), true);
        for ino in 0..=MAX_FILES as u64 {
            seen.insert(id(ino, 1), false);
        }
        assert!(!seen.contains(&id(0, 1)));
        assert!(seen.contains(&id(MAX_FILES as u64, 1)));
        assert!(seen.contains(&id(u64::MAX, 5)));
    }

    #[test]
    fn a_new_file_on_the_inode_of_a_released_one_is_looked_at() {
        let mut seen = SeenFiles::default();
        seen.insert(id(3, 10), true);
        seen.forget_pinned((8, 3));
        // The deleted program's probes are gone; its inode number went to a new file.
        assert!(!seen.contains(&id(3, 30)));
    }
}
