//! Where `trace` refuses to write its files: into a directory the traced pods control — a
//! container's root filesystem, a pod's volumes, a runtime's state. A capture written there
//! could be read by the pods it records (it holds other processes' requests and addresses), or
//! a pod could plant a symbolic link at the path and have the privileged tracer overwrite a
//! file of its choosing. The path is resolved first (symbolic links, `..`), and the runtime
//! directories are recognised wherever the host's root is mounted (`/host/var/lib/kubelet/…`
//! in a DaemonSet).
use std::path::{Component, Path, PathBuf};

/// Directories (as path components) whose contents containers and pods control, and what each
/// is.
const POD_CONTROLLED: [(&[&str], &str); 6] = [
    (&["var", "lib", "kubelet", "pods"], "kubelet's pod volumes"),
    (
        &["var", "lib", "containerd"],
        "containerd's images and container root filesystems",
    ),
    (
        &["run", "containerd"],
        "containerd's running containers (their root filesystems)",
    ),
    (
        &["var", "lib", "containers"],
        "podman/CRI-O's container root filesystems",
    ),
    (&["run", "containers"], "podman/CRI-O's running containers"),
    (
        &["var", "lib", "docker"],
        "Docker's container root filesystems",
    ),
];

/// An output path refused: where it leads, and the pod-controlled directory it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodControlledPath {
    /// The path as resolved.
    pub resolved: PathBuf,
    /// What the directory it lies in is.
    pub what: &'static str,
}

/// `path` with symbolic links and `..` resolved as far as it exists (the file itself usually
/// does not yet: its directory is resolved and the name appended).
fn resolve(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    if let Ok(p) = absolute.canonicalize() {
        return p;
    }
    let mut tail = Vec::new();
    let mut head = absolute.as_path();
    while let Some(parent) = head.parent() {
        if let Some(name) = head.file_name() {
            tail.push(name.to_os_string());
        }
        if let Ok(p) = parent.canonicalize() {
            return tail.iter().rev().fold(p, |p, n| p.join(n));
        }
        head = parent;
    }
    absolute
}

/// Whether the (resolved) path lies in a pod-controlled directory, and which.
pub fn pod_controlled_dir(resolved: &Path) -> Option<&'static str> {
    let components: Vec<&str> = resolved
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    POD_CONTROLLED.iter().find_map(|(dir, what)| {
        components
            .windows(dir.len())
            .any(|w| w == *dir)
            .then_some(*what)
    })
}

/// Refuses an output path that resolves into a pod-controlled directory (`-`, stdout, passes).
pub fn check_output_path(path: &Path) -> Result<(), PodControlledPath> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let resolved = resolve(path);
    match pod_controlled_dir(&resolved) {
        Some(what) => Err(PodControlledPath { resolved, what }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_and_kubelet_directories_are_refused_wherever_the_host_is_mounted() {
        for p in [
            "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~empty-dir/x/cap.pcap",
            "/host/var/lib/kubelet/pods/uid/volumes/v/rec.jsonl",
            "/run/containerd/io.containerd.runtime.v2.task/k8s.io/id/rootfs/tmp/a",
            "/var/lib/containers/storage/overlay/x/merged/a",
            "/var/lib/docker/overlay2/x/merged/a",
        ] {
            assert!(pod_controlled_dir(Path::new(p)).is_some(), "{p}");
        }
        for p in [
            "/var/log/nodeip-trace/rec.jsonl",
            "/tmp/cap.pcap",
            "/var/lib/kubelet-backup/x",
            "/srv/containerd/x",
        ] {
            assert_eq!(pod_controlled_dir(Path::new(p)), None, "{p}");
        }
        assert_eq!(check_output_path(Path::new("-")), Ok(()));
    }

    #[test]
    fn a_symbolic_link_into_a_pod_directory_is_followed() {
        let dir = std::env::temp_dir().join(format!("output-paths-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let fake_pods = dir.join("var/lib/kubelet/pods/uid");
        std::fs::create_dir_all(&fake_pods).unwrap();
        std::os::unix::fs::symlink(&fake_pods, dir.join("innocent")).unwrap();
        let refused = check_output_path(&dir.join("innocent/new/cap.pcap")).unwrap_err();
        assert!(refused.resolved.starts_with(&fake_pods), "{refused:?}");
        assert_eq!(refused.what, "kubelet's pod volumes");
        assert_eq!(check_output_path(&dir.join("elsewhere.pcap")), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
