//! Who a traced process is, for live attribution: its executable and ancestors from `/proc`
//! (read when the process is first seen, and again when it execs, so a short-lived process keeps
//! what was read while it lived), its cgroup from the kernel's cgroup id resolved in the cgroup2
//! filesystem (valid after the process is gone) or from `/proc/PID/cgroup` on v1-only nodes, and
//! the runtime, pod and container names from the container runtime's own files
//! ([`runtime_state`](crate::host::runtime_state)) or kubelet's log directories when they are
//! readable. Nothing here fails: what cannot be read is left out.
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::decode::cgroup::{
    cgroup_path_from_proc, names_from_runtime_config, parse_cgroup_path, pod_from_log_dir,
};
use crate::host::proc_text;
use crate::host::runtime_state::find_runtime_config;
use crate::model::id_hash::IdMap;
use crate::model::ports::ProcessDirectory;
use crate::model::process::{Ancestor, ProcessAttribution};

/// Ancestors recorded per process at most.
const MAX_ANCESTORS: usize = 4;
/// Processes remembered at most; beyond, the memory starts over.
const MAX_PROCESSES: usize = 16384;
/// cgroup directories indexed at most.
const MAX_CGROUPS: usize = 200_000;
/// A missing cgroup id or pod triggers a rescan at most this often.
const RESCAN_AFTER: Duration = Duration::from_secs(1);

/// Where the cgroup2 (unified) hierarchy is mounted, from the text of `/proc/mounts`: the root of
/// a v2-only node, `/sys/fs/cgroup/unified` on a hybrid one, none on a v1-only one.
pub fn cgroup2_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (_, target, fstype) = (f.next()?, f.next()?, f.next()?);
        (fstype == "cgroup2").then(|| PathBuf::from(target))
    })
}

/// cgroup v2 ids (the inode of each cgroup directory, what `bpf_get_current_cgroup_id` returns)
/// → paths relative to the hierarchy's root.
#[derive(Default)]
pub struct CgroupIds {
    root: Option<PathBuf>,
    by_id: HashMap<u64, String>,
    scanned: Option<Instant>,
    /// Cgroups the kernel named ([`Self::learn`]: made, or asked by id), and when: a rescan keeps them for
    /// [`KEEP_LEARNED`] though they are gone from the hierarchy, since their processes'
    /// records may still be on their way.
    learned: HashMap<u64, Instant>,
    /// The hierarchy's root, opened at the first [`Self::path_by_handle`] (the mount its
    /// handles are opened on).
    mount: Option<std::fs::File>,
}

/// How long a cgroup the kernel said it made stays named after it is removed.
const KEEP_LEARNED: Duration = Duration::from_secs(30);

impl CgroupIds {
    /// The index of the hierarchy mounted at `root` (scanned lazily).
    pub fn new(root: Option<PathBuf>) -> Self {
        Self {
            root,
            ..Self::default()
        }
    }

    /// The running system's unified hierarchy.
    pub fn running() -> Self {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        Self::new(cgroup2_mount(&mounts))
    }

    /// The path of cgroup `id`: asked of the kernel by the id itself when it is new (a
    /// container's first process may be gone before any rescan could see its cgroup), else
    /// found by rescanning the hierarchy (at most once a second).
    pub fn path_of(&mut self, id: u64) -> Option<String> {
        if id == 0 {
            return None;
        }
        if let Some(p) = self.by_id.get(&id) {
            return Some(p.clone());
        }
        if let Some(path) = self.path_by_handle(id) {
            self.learn(id, &path);
            return Some(path);
        }
        if self.scanned.is_some_and(|t| t.elapsed() < RESCAN_AFTER) {
            return None;
        }
        self.rescan();
        self.by_id.get(&id).cloned()
    }

    /// The path of cgroup `id` from the kernel: the id is the cgroup directory's file handle
    /// on cgroupfs (`FILEID_KERNFS`, as systemd's `cg_path_from_cgroupid` asks), so
    /// `open_by_handle_at` opens the directory and its `/proc/self/fd` link names it. None
    /// where the kernel or the tracer's privileges refuse it, or the cgroup is gone.
    fn path_by_handle(&mut self, id: u64) -> Option<String> {
        use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
        /// `FILEID_KERNFS` (include/linux/exportfs.h).
        const FILEID_KERNFS: libc::c_int = 0xfe;
        /// `struct file_handle` with room for kernfs's 8-byte handle.
        #[repr(C)]
        struct KernfsHandle {
            handle_bytes: libc::c_uint,
            handle_type: libc::c_int,
            id: [u8; 8],
        }
        let root = self.root.as_ref()?;
        if self.mount.is_none() {
            self.mount = Some(std::fs::File::open(root).ok()?);
        }
        let mount = self.mount.as_ref()?;
        let mut handle = KernfsHandle {
            handle_bytes: 8,
            handle_type: FILEID_KERNFS,
            id: id.to_ne_bytes(),
        };
        // SAFETY: the handle is a `struct file_handle` whose `handle_bytes` says how many
        // bytes follow its header; the kernel reads no more.
        let fd = unsafe {
            libc::open_by_handle_at(
                mount.as_raw_fd(),
                (&raw mut handle).cast(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` was just opened and is owned here.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        let path = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd())).ok()?;
        relative_to_root(&path, root)
    }

    /// Cgroup `id` is at `path` (relative to the hierarchy's root), as the kernel said (when it
    /// made it, or asked by the id).
    pub fn learn(&mut self, id: u64, path: &str) {
        if id == 0 || path.is_empty() || self.by_id.len() >= MAX_CGROUPS {
            return;
        }
        self.by_id.insert(id, path.to_string());
        self.learned.insert(id, Instant::now());
    }

    fn rescan(&mut self) {
        self.scanned = Some(Instant::now());
        let Some(root) = self.root.clone() else {
            return;
        };
        self.learned.retain(|_, at| at.elapsed() < KEEP_LEARNED);
        let learned: Vec<(u64, String)> = self
            .learned
            .keys()
            .filter_map(|id| Some((*id, self.by_id.get(id)?.clone())))
            .collect();
        self.by_id.clear();
        self.by_id.extend(learned);
        let mut stack = vec![(root.clone(), String::from("/"))];
        while let Some((dir, rel)) = stack.pop() {
            if self.by_id.len() >= MAX_CGROUPS {
                break;
            }
            let Ok(meta) = std::fs::metadata(&dir) else {
                continue;
            };
            self.by_id.insert(meta.ino(), rel.clone());
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let child = if rel == "/" {
                        format!("/{name}")
                    } else {
                        format!("{rel}/{name}")
                    };
                    stack.push((entry.path(), child));
                }
            }
        }
    }
}

/// `path` (a cgroup directory's absolute path) relative to the hierarchy mounted at `root`, as
/// the index names cgroups: `/` for the root itself, `/a/b` below it.
fn relative_to_root(path: &Path, root: &Path) -> Option<String> {
    let below = path.strip_prefix(root).ok()?;
    Some(format!("/{}", below.to_str()?))
}

/// What was read about a process while it lived.
#[derive(Clone, Debug, Default)]
struct ProcessFacts {
    exe: Option<String>,
    ancestors: Vec<Ancestor>,
    /// From `/proc/PID/cgroup` (v1-only nodes, or when the id is unknown).
    cgroup: Option<String>,
}

/// `ppid` from the text of `/proc/PID/stat` (after the parenthesised comm, which may hold spaces).
fn ppid_from_stat(stat: &str) -> Option<u32> {
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// What the runtime's files say about a container.
#[derive(Clone, Debug, Default)]
struct ContainerNames {
    runtime: Option<&'static str>,
    pod_namespace: Option<String>,
    pod_name: Option<String>,
    name: Option<String>,
}

/// Live [`ProcessDirectory`]: `/proc`, the cgroup2 hierarchy, the runtimes' state directories.
pub struct ProcProcessDirectory {
    proc_root: PathBuf,
    cgroups: CgroupIds,
    facts: IdMap<u32, ProcessFacts>,
    containers: HashMap<String, ContainerNames>,
    pods: HashMap<String, (String, String, Option<String>)>,
    pods_scanned: Option<Instant>,
    /// Attributions made, by pid, with the cgroup id they were made for: every event of a
    /// process shares one.
    made: IdMap<u32, (u64, Arc<ProcessAttribution>)>,
    /// Processes asked about since the last [`ProcessDirectory::forget_exited`].
    asked: IdMap<u32, ()>,
}

impl Default for ProcProcessDirectory {
    fn default() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            cgroups: CgroupIds::running(),
            facts: IdMap::default(),
            containers: HashMap::new(),
            pods: HashMap::new(),
            pods_scanned: None,
            made: IdMap::default(),
            asked: IdMap::default(),
        }
    }
}

/// Inserts into one of the directory's maps, emptied first when it holds [`MAX_PROCESSES`]
/// entries: a bound on memory, not a cache policy (what is dropped is read again when asked).
fn insert_bounded<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher>(
    map: &mut HashMap<K, V, S>,
    key: K,
    value: V,
) {
    if map.len() >= MAX_PROCESSES {
        map.clear();
    }
    map.insert(key, value);
}

impl ProcProcessDirectory {
    /// `/proc/PID/comm`, when the process is still there.
    fn comm_of(&self, pid: u32) -> Option<String> {
        proc_text::read(self.proc_root.join(pid.to_string()).join("comm"))
            .ok()
            .map(|c| c.trim_end().to_string())
    }

    /// The cgroup path `/proc/PID/cgroup` names.
    fn cgroup_from_proc(&self, pid: u32) -> Option<String> {
        proc_text::read(self.proc_root.join(pid.to_string()).join("cgroup"))
            .ok()
            .and_then(|t| cgroup_path_from_proc(&t))
    }

    /// The executable `/proc/PID/exe` links to, else `hint`.
    fn exe_of(&self, pid: u32, hint: Option<&str>) -> Option<String> {
        std::fs::read_link(self.proc_root.join(pid.to_string()).join("exe"))
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .or_else(|| hint.map(str::to_string))
    }

    /// The facts of `pid` as remembered, else read now and remembered.
    fn remembered_facts(&mut self, pid: u32) -> &ProcessFacts {
        if !self.facts.contains_key(&pid) {
            let facts = self.read_facts(pid, None);
            insert_bounded(&mut self.facts, pid, facts);
        }
        &self.facts[&pid]
    }

    fn read_facts(&self, pid: u32, exe_hint: Option<&str>) -> ProcessFacts {
        let exe = self.exe_of(pid, exe_hint);
        let mut ancestors = Vec::new();
        let mut current = pid;
        while ancestors.len() < MAX_ANCESTORS {
            let stat = proc_text::read(self.proc_root.join(current.to_string()).join("stat"))
                .unwrap_or_default();
            let Some(ppid) = ppid_from_stat(&stat).filter(|p| *p != 0) else {
                break;
            };
            let comm = self.comm_of(ppid).unwrap_or_default();
            ancestors.push(Ancestor { pid: ppid, comm });
            current = ppid;
        }
        let cgroup = self.cgroup_from_proc(pid);
        ProcessFacts {
            exe,
            ancestors,
            cgroup,
        }
    }

    /// What is known of container `id` (cached): the runtime when its monitor or config
    /// tells, pod namespace, pod name and container name.
    fn container_names(&mut self, id: &str, pod_uid: Option<&str>) -> ContainerNames {
        if let Some(n) = self.containers.get(id) {
            return n.clone();
        }
        let mut names = ContainerNames::default();
        if let Some(config) = find_runtime_config(&self.proc_root, id) {
            let (ns, pod, container) = names_from_runtime_config(&config.json);
            names = ContainerNames {
                runtime: config.runtime,
                pod_namespace: ns,
                pod_name: pod,
                name: container.or(config.monitor_name),
            };
        }
        if names.pod_namespace.is_none() {
            if let Some((ns, name, container)) = pod_uid.and_then(|u| self.pod_by_uid(u)) {
                names.pod_namespace = Some(ns);
                names.pod_name = Some(name);
                names.name = names.name.or(container);
            }
        }
        insert_bounded(&mut self.containers, id.to_string(), names.clone());
        names
    }

    /// Pod namespace and name by UID, from `/var/log/pods/NAMESPACE_NAME_UID`, and the container
    /// name when the pod has logs of exactly one container (with more, the ID cannot be told
    /// apart without the runtime).
    fn pod_by_uid(&mut self, uid: &str) -> Option<(String, String, Option<String>)> {
        if !self.pods.contains_key(uid)
            && self
                .pods_scanned
                .is_none_or(|t| t.elapsed() >= RESCAN_AFTER)
        {
            self.pods_scanned = Some(Instant::now());
            if let Ok(entries) = std::fs::read_dir("/var/log/pods") {
                for e in entries.flatten() {
                    if let Some((ns, name, uid)) =
                        pod_from_log_dir(&e.file_name().to_string_lossy())
                    {
                        let containers: Vec<String> = std::fs::read_dir(e.path())
                            .map(|d| {
                                d.flatten()
                                    .filter(|c| c.file_type().is_ok_and(|t| t.is_dir()))
                                    .map(|c| c.file_name().to_string_lossy().into_owned())
                                    .collect()
                            })
                            .unwrap_or_default();
                        let only = (containers.len() == 1).then(|| containers[0].clone());
                        self.pods.insert(uid, (ns, name, only));
                    }
                }
            }
        }
        self.pods.get(uid).cloned()
    }
}

impl ProcessDirectory for ProcProcessDirectory {
    fn attribute(&mut self, pid: u32, cgroup_id: u64) -> Option<Arc<ProcessAttribution>> {
        if pid == 0 {
            return None;
        }
        self.asked.insert(pid, ());
        if let Some((_, made)) = self.made.get(&pid).filter(|(id, _)| *id == cgroup_id) {
            return Some(made.clone());
        }
        let facts = self.remembered_facts(pid).clone();
        let cgroup = self.cgroups.path_of(cgroup_id).or(facts.cgroup);
        let mut identity = cgroup.as_deref().map(parse_cgroup_path).unwrap_or_default();
        if let Some(c) = identity.container.as_mut() {
            let names = self.container_names(&c.id.clone(), c.pod_uid.as_deref());
            if let Some(runtime) = names.runtime {
                c.runtime = runtime.to_string();
            }
            c.pod_namespace = names.pod_namespace;
            c.pod_name = names.pod_name;
            c.name = names.name;
        }
        let made = Arc::new(ProcessAttribution {
            exe: facts.exe,
            ancestors: facts.ancestors,
            cgroup,
            identity,
        });
        // A cgroup path not resolved yet (new cgroup, rescan not due) is tried again later.
        if made.cgroup.is_some() || cgroup_id == 0 {
            insert_bounded(&mut self.made, pid, (cgroup_id, made.clone()));
        }
        Some(made)
    }

    fn cgroup_made(&mut self, id: u64, root: i32, path: &str) {
        // Hierarchy 0 is the unified one, whose ids the records carry.
        if root == 0 {
            self.cgroups.learn(id, path);
        }
    }

    fn exec(&mut self, pid: u32, ppid: u32, parent_comm: &str, filename: &str, cgroup_id: u64) {
        self.asked.insert(pid, ());
        self.made.remove(&pid);
        // Every exec of the node comes here, so what the kernel said is not read again: the
        // parent's pid and name are in the record, and the parent's own ancestors are
        // remembered from its first exec or event (a shell's many children read them once).
        let facts = if ppid == 0 {
            self.read_facts(pid, Some(filename))
        } else {
            let comm = Some(parent_comm)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .or_else(|| self.comm_of(ppid))
                .unwrap_or_default();
            let parent = self.remembered_facts(ppid).clone();
            let mut ancestors = vec![Ancestor { pid: ppid, comm }];
            ancestors.extend(parent.ancestors.into_iter().take(MAX_ANCESTORS - 1));
            // A cgroup the kernel's id names needs no read; else `/proc` while it lives, else
            // the parent's (a process gone already was most likely where its parent is).
            let cgroup = if self.cgroups.path_of(cgroup_id).is_some() {
                None
            } else {
                self.cgroup_from_proc(pid).or(parent.cgroup)
            };
            ProcessFacts {
                exe: self.exe_of(pid, Some(filename)),
                ancestors,
                cgroup,
            }
        };
        insert_bounded(&mut self.facts, pid, facts);
    }

    /// Without this, a node's short-lived processes stayed until the 16,384-process bound:
    /// ≈ 1 KiB each, the soak's RSS grew 8 MiB in 10 minutes (a round a second of new `ip`,
    /// `getent` and `load_gen` processes).
    fn forget_exited(&mut self) -> Vec<u32> {
        let asked = std::mem::take(&mut self.asked);
        let root = &self.proc_root;
        // Each pid's /proc entry is looked at once, though it may key both maps.
        let mut alive = HashMap::new();
        let mut kept = |pid: u32| {
            *alive
                .entry(pid)
                .or_insert_with(|| asked.contains_key(&pid) || root.join(pid.to_string()).exists())
        };
        let mut forgotten = Vec::new();
        self.facts.retain(|pid, _| {
            let keep = kept(*pid);
            if !keep {
                forgotten.push(*pid);
            }
            keep
        });
        self.made.retain(|pid, _| kept(*pid));
        forgotten
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_the_kernel_made_is_named_after_it_is_gone_for_a_while() {
        let dir = std::env::temp_dir().join(format!("cgroup-ids-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("present")).unwrap();
        let mut ids = CgroupIds::new(Some(dir.clone()));
        ids.learn(0xdead_beef, "/kubepods.slice/gone.scope");
        assert_eq!(
            ids.path_of(0xdead_beef).as_deref(),
            Some("/kubepods.slice/gone.scope")
        );
        // A rescan (for an id not known) keeps what the kernel said, and finds the rest.
        let present = std::fs::metadata(dir.join("present")).unwrap().ino();
        assert_eq!(ids.path_of(present).as_deref(), Some("/present"));
        assert_eq!(
            ids.by_id.get(&0xdead_beef).map(String::as_str),
            Some("/kubepods.slice/gone.scope")
        );
        ids.learn(0, "/zero");
        ids.learn(7, "");
        assert!(!ids.by_id.contains_key(&0) && !ids.by_id.contains_key(&7));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_cgroup_path_is_named_relative_to_its_hierarchy() {
        let root = Path::new("/sys/fs/cgroup/unified");
        assert_eq!(relative_to_root(root, root).as_deref(), Some("/"));
        assert_eq!(
            relative_to_root(&root.join("kubepods.slice/x.scope"), root).as_deref(),
            Some("/kubepods.slice/x.scope")
        );
        assert_eq!(relative_to_root(Path::new("/elsewhere/x"), root), None);
    }

    #[test]
    fn finds_the_unified_hierarchy_in_each_layout() {
        let hybrid = "sysfs /sys sysfs rw 0 0\ntmpfs /sys/fs/cgroup tmpfs ro 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0\ncgroup /sys/fs/cgroup/pids cgroup rw,pids 0 0\n";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(cgroup2_mount(v2), Some(PathBuf::from("/sys/fs/cgroup")));
        let v1 = "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n";
        assert_eq!(cgroup2_mount(v1), None);
    }

    #[test]
    fn ppid_survives_odd_process_names() {
        assert_eq!(ppid_from_stat("42 (a) b (c)) S 7 42 42 0"), Some(7));
        assert_eq!(ppid_from_stat("1 (systemd) S 0 1 1"), Some(0));
        assert_eq!(ppid_from_stat("garbage"), None);
    }

    #[test]
    fn our_own_process_is_attributed() {
        let mut dir = ProcProcessDirectory::default();
        let me = std::process::id();
        let a = dir.attribute(me, 0).expect("attribution");
        assert!(a.exe.is_some(), "{a:?}");
        assert!(!a.ancestors.is_empty(), "{a:?}");
        assert!(dir.attribute(0, 0).is_none());
    }

    #[test]
    fn the_root_cgroup_is_found_by_its_id() {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let Some(root) = cgroup2_mount(&mounts) else {
            crate::message::skipped("no cgroup2 hierarchy mounted here");
            return;
        };
        let id = std::fs::metadata(&root).unwrap().ino();
        let mut ids = CgroupIds::new(Some(root));
        assert_eq!(ids.path_of(id).as_deref(), Some("/"));
        assert_eq!(ids.path_of(0), None);
    }

    #[test]
    fn exited_processes_are_forgotten_once_nothing_asked_about_them_for_a_period() {
        let root = std::env::temp_dir().join(format!("nit-forget-{}", std::process::id()));
        std::fs::create_dir_all(root.join("100")).unwrap();
        let mut table = ProcProcessDirectory {
            proc_root: root.clone(),
            ..Default::default()
        };
        table.exec(100, 0, "", "/usr/bin/alive", 0);
        table.exec(200, 0, "", "/usr/bin/gone", 0);
        // Asked about in this period: kept even though 200 has exited (its late records).
        table.forget_exited();
        assert!(table.facts.contains_key(&100) && table.facts.contains_key(&200));
        // Nothing asked since: the exited one goes, the running one stays.
        assert_eq!(table.forget_exited(), vec![200]);
        assert!(table.facts.contains_key(&100));
        assert!(!table.facts.contains_key(&200));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
