//! The ports live tracing plugs into the pipeline: where interface names, resolver
//! configuration and process identities come from. `probe` implements them against `/proc`;
//! offline sources have none, and tests fake them.
use std::collections::BTreeMap;
use std::sync::Arc;

use super::process::ProcessAttribution;

/// A process's `/etc/gai.conf` as the live side could read it (parsing is the explainer's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GaiConfText {
    /// The file's text; `None` when there is none (glibc's defaults apply).
    pub text: Option<String>,
    /// Why it could not be read, when that limits the explanation.
    pub note: Option<String>,
}

/// Where a traced process's interface names come from (live tracing): interface indexes are per
/// network namespace, so each namespace gets its own name table.
pub trait InterfaceDirectory {
    /// An id of the network namespace `pid` is in, when the process can still be found.
    fn netns_of(&mut self, pid: u32) -> Option<u64>;
    /// Interface index → name in namespace `netns`, which `pid` is (or was) in; empty when
    /// unknown.
    fn interfaces_in(&mut self, netns: u64, pid: u32) -> BTreeMap<u32, String>;
    /// The name `ip netns` knows namespace `netns` by (a bind mount in `/run/netns`), if any.
    fn netns_name(&mut self, _netns: u64) -> Option<String> {
        None
    }
}

/// Where a traced process's resolver configuration comes from (live tracing: its own
/// `/etc/gai.conf`, seen through `/proc/PID/root`).
pub trait ResolverConfig {
    /// The gai.conf tables `pid` sorts with (glibc's defaults when it has none), and a note
    /// when they could not be read.
    fn gai_conf(&mut self, pid: u32) -> GaiConfText;
}

/// Who a traced process is (live tracing): executable, ancestors, cgroup, unit or container.
pub trait ProcessDirectory {
    /// The attribution of `pid`, whose kernel records carry cgroup id `cgroup_id` (0: unknown).
    fn attribute(&mut self, pid: u32, cgroup_id: u64) -> Option<Arc<ProcessAttribution>>;
    /// `pid` (child of `ppid` named `parent_comm`; 0 and empty when unknown; in cgroup
    /// `cgroup_id`, 0 when unknown) exec'd `filename`: what was known about it is read again.
    fn exec(&mut self, pid: u32, ppid: u32, parent_comm: &str, filename: &str, cgroup_id: u64);
    /// Cgroup `id` was made at `path` in hierarchy `root` (0: the unified one, cgroup v2): it is
    /// named from now on without asking the kernel, however soon it is removed again.
    fn cgroup_made(&mut self, _id: u64, _root: i32, _path: &str) {}
    /// Forgets the processes that have exited and were not asked about since the last call
    /// (called every few seconds: their late records are decoded by then), so that a node's
    /// short-lived processes do not pile up until a bound; returns their pids (so the other
    /// per-process state can go too).
    fn forget_exited(&mut self) -> Vec<u32> {
        Vec::new()
    }
}
