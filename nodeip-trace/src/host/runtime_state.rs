//! A container's OCI `config.json` (its pod and container names, in annotations), found where
//! its runtime keeps it. First through the container's monitor process, which works whatever
//! state directory the runtime was started with and from a tracer in its own mount namespace:
//! containerd's shim (`containerd-shim-runc-v2`) runs in the bundle directory of the first
//! container it serves, beside the others' (`STATE/io.containerd.runtime.v2.task/NS/ID`); conmon
//! (podman, CRI-O) is given the bundle (`-b`), the ID (`-c`) and the container's name (`-n`).
//! Then the runtimes' default directories. Nothing here fails: what cannot be read is left out.
use std::path::{Path, PathBuf};

use crate::decode::cgroup::runtime_of_config;

/// A container's config as its runtime wrote it.
#[derive(Clone, Debug, PartialEq)]
pub struct RuntimeConfig {
    /// The runtime, when the monitor or the file tells (`containerd`, `podman`, `cri-o`,
    /// `docker`).
    pub runtime: Option<&'static str>,
    /// The parsed `config.json` (or Docker's `config.v2.json`).
    pub json: serde_json::Value,
    /// The container's name as its monitor was told (conmon's `-n`), which podman does not
    /// write into the config.
    pub monitor_name: Option<String>,
}

/// What conmon's command line says about the container it watches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConmonArgs {
    /// `-c`/`--cid`: the container ID.
    pub id: Option<String>,
    /// `-b`/`--bundle`: the OCI bundle directory.
    pub bundle: Option<String>,
    /// `-n`/`--name`: the container's name.
    pub name: Option<String>,
}

/// Parses conmon's NUL-separated `/proc/PID/cmdline` (`-c ID`, `--cid=ID`, `-b DIR`, …).
pub fn conmon_args(cmdline: &[u8]) -> ConmonArgs {
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut out = ConmonArgs::default();
    let mut i = 0;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (args[i].as_str(), None),
        };
        let slot = match flag {
            "-c" | "--cid" => Some(&mut out.id),
            "-b" | "--bundle" => Some(&mut out.bundle),
            "-n" | "--name" => Some(&mut out.name),
            _ => None,
        };
        if let Some(slot) = slot {
            let value = match inline {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    args.get(i).cloned()
                }
            };
            if slot.is_none() {
                *slot = value;
            }
        }
        i += 1;
    }
    out
}

/// Reads and parses a JSON file.
fn read_json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The config of container `id` (64 hex digits, as the cgroup path gave it) through the monitor
/// processes under `proc_root`.
fn through_monitors(proc_root: &Path, id: &str) -> Option<RuntimeConfig> {
    for entry in std::fs::read_dir(proc_root).ok()?.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = entry.path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        match comm.trim_end() {
            // The shim's cwd is a bundle directory; `..` of the magic link is its namespace's
            // directory in the shim's own mount namespace.
            "containerd-shim" => {
                if let Some(json) = read_json(&dir.join(format!("cwd/../{id}/config.json"))) {
                    return Some(RuntimeConfig {
                        runtime: Some("containerd"),
                        json,
                        monitor_name: None,
                    });
                }
            }
            "conmon" => {
                let args = conmon_args(&std::fs::read(dir.join("cmdline")).unwrap_or_default());
                if args.id.as_deref() != Some(id) {
                    continue;
                }
                let Some(bundle) = args.bundle else { continue };
                let path = dir
                    .join("root")
                    .join(bundle.trim_start_matches('/'))
                    .join("config.json");
                if let Some(json) = read_json(&path) {
                    return Some(RuntimeConfig {
                        runtime: runtime_of_config(&json),
                        json,
                        monitor_name: args.name,
                    });
                }
            }
            _ => {}
        }
    }
    None
}

/// The runtimes' default places for container `id`'s config.
fn default_places(id: &str) -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> =
        std::fs::read_dir("/run/containerd/io.containerd.runtime.v2.task")
            .map(|namespaces| {
                namespaces
                    .flatten()
                    .map(|ns| ns.path().join(id).join("config.json"))
                    .collect()
            })
            .unwrap_or_default();
    places.extend(
        [
            format!("/run/containers/storage/overlay-containers/{id}/userdata/config.json"),
            format!("/var/lib/containers/storage/overlay-containers/{id}/userdata/config.json"),
            format!("/var/lib/docker/containers/{id}/config.v2.json"),
        ]
        .map(PathBuf::from),
    );
    places
}

/// The config of container `id` (which must be the 64 hex digits a cgroup path names: it is
/// joined into paths): through its monitor process under `proc_root`, else in the runtimes'
/// default directories.
pub fn find_runtime_config(proc_root: &Path, id: &str) -> Option<RuntimeConfig> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    through_monitors(proc_root, id).or_else(|| {
        default_places(id).iter().find_map(|path| {
            let json = read_json(path)?;
            let runtime = if path.starts_with("/run/containerd") {
                Some("containerd")
            } else {
                runtime_of_config(&json)
            };
            Some(RuntimeConfig {
                runtime,
                json,
                monitor_name: None,
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conmon_command_lines_both_spellings() {
        let podman = b"/usr/bin/conmon\0--api-version\x001\0-c\0abc\0-u\0abc\0-r\0/usr/bin/runc\0-b\0/var/lib/containers/storage/overlay-containers/abc/userdata\0-n\0web-p\0--exit-dir\0/run/libpod/exits\0";
        assert_eq!(
            conmon_args(podman),
            ConmonArgs {
                id: Some("abc".into()),
                bundle: Some("/var/lib/containers/storage/overlay-containers/abc/userdata".into()),
                name: Some("web-p".into()),
            }
        );
        let long = b"conmon\0--cid=def\0--bundle=/run/b\0--name\0k8s_app\0";
        let args = conmon_args(long);
        assert_eq!(
            (
                args.id.as_deref(),
                args.bundle.as_deref(),
                args.name.as_deref()
            ),
            (Some("def"), Some("/run/b"), Some("k8s_app"))
        );
        // A flag at the end without its value, and garbage.
        assert_eq!(conmon_args(b"conmon\0-c"), ConmonArgs::default());
        assert_eq!(conmon_args(b""), ConmonArgs::default());
    }

    #[test]
    fn ids_that_are_not_hex_are_never_joined_into_paths() {
        assert_eq!(find_runtime_config(Path::new("/proc"), "../../etc"), None);
        assert_eq!(find_runtime_config(Path::new("/proc"), ""), None);
    }

    #[test]
    fn a_shim_and_a_conmon_in_a_fake_proc() {
        let scratch = std::env::temp_dir().join(format!("runtime-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        let id = "ab".repeat(32);
        let other = "cd".repeat(32);
        // A shim serving two containers of one namespace: its cwd is the first's bundle.
        let ns = scratch.join("state/io.containerd.runtime.v2.task/k8s.io");
        for c in [&id, &other] {
            std::fs::create_dir_all(ns.join(c)).unwrap();
        }
        std::fs::write(
            ns.join(&other).join("config.json"),
            r#"{"annotations":{"io.kubernetes.pod.name":"web-0"}}"#,
        )
        .unwrap();
        let shim = scratch.join("proc/100");
        std::fs::create_dir_all(&shim).unwrap();
        std::fs::write(shim.join("comm"), "containerd-shim\n").unwrap();
        std::os::unix::fs::symlink(ns.join(&id), shim.join("cwd")).unwrap();
        let found = find_runtime_config(&scratch.join("proc"), &other).unwrap();
        assert_eq!(found.runtime, Some("containerd"));
        assert_eq!(found.json["annotations"]["io.kubernetes.pod.name"], "web-0");

        // conmon, whose root is `/`: the bundle is read through it.
        let bundle = scratch.join("bundle");
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::write(
            bundle.join("config.json"),
            r#"{"annotations":{"io.container.manager":"libpod"}}"#,
        )
        .unwrap();
        let conmon = scratch.join("proc/200");
        std::fs::create_dir_all(&conmon).unwrap();
        std::fs::write(conmon.join("comm"), "conmon\n").unwrap();
        let podman_id = "ef".repeat(32);
        std::fs::write(
            conmon.join("cmdline"),
            format!(
                "conmon\0-c\0{podman_id}\0-b\0{}\0-n\0web-p\0",
                bundle.display()
            ),
        )
        .unwrap();
        std::os::unix::fs::symlink("/", conmon.join("root")).unwrap();
        let found = find_runtime_config(&scratch.join("proc"), &podman_id).unwrap();
        assert_eq!(found.runtime, Some("podman"));
        assert_eq!(found.monitor_name.as_deref(), Some("web-p"));
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
