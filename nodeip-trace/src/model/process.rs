//! Who made an event: executable, ancestors, cgroup, and the systemd unit or container (with its
//! pod) the cgroup path names.
use serde::{Deserialize, Serialize};

/// What a cgroup path says about the process in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupIdentity {
    /// The systemd unit (`kubelet.service`, `containerd.service`, `session-3.scope`), when the
    /// process is not in a container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// The container, when the path is a container's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerIdentity>,
}

/// A container, as far as the cgroup path and the runtime's own files tell.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerIdentity {
    /// `containerd`, `cri-o`, `docker`, or `unknown` (cgroupfs driver paths do not say).
    pub runtime: String,
    /// The container ID (64 hex digits).
    pub id: String,
    /// The pod's UID, when under `kubepods`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// `guaranteed`, `burstable` or `besteffort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    /// Pod namespace (from the runtime's or kubelet's files, when readable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_namespace: Option<String>,
    /// Pod name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    /// Container name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Who made an event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessAttribution {
    /// The executable (`/proc/PID/exe`, or the file name exec'd).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    /// Parent, grandparent, … (at most four).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<Ancestor>,
    /// The cgroup (v2 path from the kernel's cgroup id, else from `/proc/PID/cgroup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The systemd unit or the container, parsed from the cgroup path.
    #[serde(flatten)]
    pub identity: crate::model::process::CgroupIdentity,
}

/// One ancestor of a process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ancestor {
    /// Its pid.
    pub pid: u32,
    /// Its name.
    pub comm: String,
}
