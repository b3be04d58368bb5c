//! cgroup paths → who a process is on a node: the systemd unit, or the container runtime, the
//! container ID and the Kubernetes pod UID and QoS class (kubepods slices), for the systemd and
//! cgroupfs drivers and for cgroup v1 and v2. Also the cgroup path of a process from the text of
//! `/proc/PID/cgroup`. Pure functions; nothing here reads files.
use crate::model::process::{CgroupIdentity, ContainerIdentity};

/// Whether `s` is a container ID: 64 lowercase hex digits.
fn is_container_id(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A systemd-escaped pod UID (`pod1b2c…_…` with `_` for `-`) back to its usual form.
fn pod_uid(s: &str) -> Option<String> {
    let uid = s.strip_prefix("pod")?.replace('_', "-");
    (uid.len() == 36 && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')).then_some(uid)
}

/// The container part of one path component: `cri-containerd-ID.scope`, `crio-ID.scope`,
/// `docker-ID.scope`, `libpod-ID(.scope)` (podman, both drivers), or a bare ID (cgroupfs driver).
fn container_of(component: &str) -> Option<(&'static str, String)> {
    let name = component.strip_suffix(".scope").unwrap_or(component);
    for (prefix, runtime) in [
        ("cri-containerd-", "containerd"),
        ("crio-", "cri-o"),
        ("docker-", "docker"),
        ("libpod-", "podman"),
    ] {
        if let Some(id) = name.strip_prefix(prefix) {
            return is_container_id(id).then(|| (runtime, id.to_string()));
        }
    }
    is_container_id(name).then(|| ("unknown", name.to_string()))
}

/// Parses a cgroup path (`/kubepods.slice/…/cri-containerd-ID.scope`, `/kubepods/burstable/podUID/ID`,
/// `/system.slice/kubelet.service`, `/docker/ID`, …).
pub fn parse_cgroup_path(path: &str) -> CgroupIdentity {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let in_kubepods = components
        .first()
        .is_some_and(|c| *c == "kubepods" || *c == "kubepods.slice");
    let mut uid = None;
    let mut qos = None;
    let mut container = None;
    for c in &components {
        let bare = c.strip_suffix(".slice").unwrap_or(c);
        // systemd driver: kubepods-burstable-pod<uid>.slice; cgroupfs: burstable, pod<uid>.
        let last = bare.rsplit('-').next().unwrap_or(bare);
        if in_kubepods {
            for class in ["burstable", "besteffort"] {
                if bare == class || bare == format!("kubepods-{class}") {
                    qos = Some(class.to_string());
                }
            }
            if let Some(u) = pod_uid(bare).or_else(|| pod_uid(last)) {
                uid = Some(u);
            }
        }
        if let Some((runtime, id)) = container_of(c) {
            container = Some((runtime, id));
        }
    }
    if let Some((runtime, id)) = container {
        if in_kubepods && uid.is_some() && qos.is_none() {
            qos = Some("guaranteed".into());
        }
        return CgroupIdentity {
            unit: None,
            container: Some(ContainerIdentity {
                runtime: runtime.into(),
                id,
                pod_uid: uid,
                qos,
                ..ContainerIdentity::default()
            }),
        };
    }
    let unit = components
        .iter()
        .rev()
        .find(|c| c.ends_with(".service") || c.ends_with(".scope"))
        .map(|c| c.to_string());
    CgroupIdentity {
        unit,
        container: None,
    }
}

/// The process's cgroup path from `/proc/PID/cgroup`: the v2 line (`0::/path`) when it says more
/// than `/`, else the v1 `name=systemd`, `pids` or `memory` hierarchy's path.
pub fn cgroup_path_from_proc(text: &str) -> Option<String> {
    let mut v2 = None;
    let mut v1 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        } else if controllers
            .split(',')
            .any(|c| c == "name=systemd" || c == "pids" || c == "memory")
            && (v1.is_none() || path.len() > v1.as_ref().map_or(0, |p: &String| p.len()))
        {
            v1 = Some(path.to_string());
        }
    }
    match (v2, v1) {
        (Some(p), _) if p != "/" => Some(p),
        (_, Some(p)) => Some(p),
        (p, None) => p,
    }
}

/// `/var/log/pods/NAMESPACE_NAME_UID` → (namespace, name, uid).
pub fn pod_from_log_dir(dir_name: &str) -> Option<(String, String, String)> {
    let mut parts = dir_name.splitn(3, '_');
    let (ns, name, uid) = (parts.next()?, parts.next()?, parts.next()?);
    (uid.len() == 36 && !ns.is_empty() && !name.is_empty())
        .then(|| (ns.to_string(), name.to_string(), uid.to_string()))
}

/// Pod namespace, pod name and container name from an OCI `config.json`'s annotations
/// (containerd: `io.kubernetes.cri.*`; CRI-O: `io.kubernetes.pod.*`/`io.kubernetes.container.name`)
/// or a Docker `config.v2.json`'s labels.
pub fn names_from_runtime_config(
    json: &serde_json::Value,
) -> (Option<String>, Option<String>, Option<String>) {
    let maps = [&json["annotations"], &json["Config"]["Labels"]];
    let get = |keys: &[&str]| {
        maps.iter()
            .find_map(|m| keys.iter().find_map(|k| m[*k].as_str().map(str::to_string)))
    };
    (
        get(&[
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.pod.namespace",
        ]),
        get(&["io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"]),
        get(&[
            "io.kubernetes.cri.container-name",
            "io.kubernetes.container.name",
        ]),
    )
}

/// Which runtime wrote an OCI `config.json`, from the annotations only it sets: podman
/// (`io.container.manager: libpod`, before CRI-O's keys, which podman sets too), CRI-O
/// (`io.kubernetes.cri-o.*`), containerd's CRI plugin (`io.kubernetes.cri.*`); a Docker
/// `config.v2.json` has `Config.Labels`.
pub fn runtime_of_config(json: &serde_json::Value) -> Option<&'static str> {
    let annotations = json["annotations"].as_object();
    let has_prefix =
        |prefix: &str| annotations.is_some_and(|a| a.keys().any(|k| k.starts_with(prefix)));
    if json["annotations"]["io.container.manager"] == "libpod" {
        Some("podman")
    } else if has_prefix("io.kubernetes.cri-o.") {
        Some("cri-o")
    } else if has_prefix("io.kubernetes.cri.") {
        Some("containerd")
    } else if json["Config"]["Labels"].is_object() {
        Some("docker")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f3a9c1d2e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
    const UID: &str = "1b2c3d4e-5f60-4718-9a0b-1c2d3e4f5a6b";

    fn container(path: &str) -> ContainerIdentity {
        parse_cgroup_path(path)
            .container
            .unwrap_or_else(|| panic!("no container in {path}"))
    }

    #[test]
    fn systemd_driver_paths_for_each_qos_and_runtime() {
        let escaped = UID.replace('-', "_");
        for (qos_part, qos) in [
            (
                format!("kubepods-besteffort.slice/kubepods-besteffort-pod{escaped}.slice"),
                "besteffort",
            ),
            (
                format!("kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice"),
                "burstable",
            ),
            (format!("kubepods-pod{escaped}.slice"), "guaranteed"),
        ] {
            for (scope, runtime) in [
                (format!("cri-containerd-{ID}.scope"), "containerd"),
                (format!("crio-{ID}.scope"), "cri-o"),
                (format!("docker-{ID}.scope"), "docker"),
            ] {
                let path = format!("/kubepods.slice/{qos_part}/{scope}");
                let c = container(&path);
                assert_eq!(c.runtime, runtime, "{path}");
                assert_eq!(c.id, ID);
                assert_eq!(c.pod_uid.as_deref(), Some(UID), "{path}");
                assert_eq!(c.qos.as_deref(), Some(qos), "{path}");
            }
        }
    }

    #[test]
    fn cgroupfs_driver_paths() {
        let c = container(&format!("/kubepods/burstable/pod{UID}/{ID}"));
        assert_eq!(
            (c.runtime.as_str(), c.qos.as_deref()),
            ("unknown", Some("burstable"))
        );
        assert_eq!(c.pod_uid.as_deref(), Some(UID));
        let c = container(&format!("/kubepods/pod{UID}/{ID}"));
        assert_eq!(c.qos.as_deref(), Some("guaranteed"));
        let c = container(&format!("/kubepods/besteffort/pod{UID}/{ID}"));
        assert_eq!(c.qos.as_deref(), Some("besteffort"));
        // Plain Docker, no Kubernetes.
        let c = container(&format!("/docker/{ID}"));
        assert_eq!(c.pod_uid, None);
        assert_eq!(c.qos, None);
        let c = container(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(c.runtime, "docker");
        // podman: cgroupfs (`--cgroup-manager cgroupfs`) and systemd drivers.
        let c = container(&format!("/libpod_parent/libpod-{ID}"));
        assert_eq!((c.runtime.as_str(), c.id.as_str()), ("podman", ID));
        let c = container(&format!("/machine.slice/libpod-{ID}.scope"));
        assert_eq!(c.runtime, "podman");
    }

    #[test]
    fn the_runtime_that_wrote_a_config() {
        let podman = serde_json::json!({"annotations": {
            "io.container.manager": "libpod", "io.kubernetes.cri-o.TTY": "false"}});
        assert_eq!(runtime_of_config(&podman), Some("podman"));
        let crio = serde_json::json!({"annotations": {"io.kubernetes.cri-o.TTY": "false"}});
        assert_eq!(runtime_of_config(&crio), Some("cri-o"));
        let cri =
            serde_json::json!({"annotations": {"io.kubernetes.cri.container-type": "container"}});
        assert_eq!(runtime_of_config(&cri), Some("containerd"));
        let docker = serde_json::json!({"Config": {"Labels": {}}});
        assert_eq!(runtime_of_config(&docker), Some("docker"));
        // `ctr run` with only pod annotations: the file does not say.
        let bare = serde_json::json!({"annotations": {"io.kubernetes.pod.name": "web-0"}});
        assert_eq!(runtime_of_config(&bare), None);
    }

    #[test]
    fn services_and_sessions_are_units() {
        let id = parse_cgroup_path("/system.slice/kubelet.service");
        assert_eq!(id.unit.as_deref(), Some("kubelet.service"));
        assert!(id.container.is_none());
        assert_eq!(
            parse_cgroup_path("/user.slice/user-0.slice/session-3.scope")
                .unit
                .as_deref(),
            Some("session-3.scope")
        );
        assert_eq!(parse_cgroup_path("/").unit, None);
        // A conmon scope is CRI-O's monitor, not the container (no ID after "crio-").
        let conmon = parse_cgroup_path(&format!("/kubepods.slice/crio-conmon-{ID}.scope"));
        assert!(conmon.container.is_none(), "{conmon:?}");
        // Not quite an ID: no container.
        assert!(
            parse_cgroup_path("/kubepods.slice/cri-containerd-abc.scope")
                .container
                .is_none()
        );
    }

    #[test]
    fn proc_cgroup_files_v2_v1_and_hybrid() {
        let v2 = format!(
            "0::/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{ID}.scope\n",
            UID.replace('-', "_")
        );
        assert!(cgroup_path_from_proc(&v2).unwrap().ends_with(".scope"));
        let v1 = format!(
            "12:pids:/kubepods/besteffort/pod{UID}/{ID}\n11:memory:/kubepods/besteffort/pod{UID}/{ID}\n1:name=systemd:/kubepods/besteffort/pod{UID}/{ID}\n"
        );
        assert_eq!(
            cgroup_path_from_proc(&v1).unwrap(),
            format!("/kubepods/besteffort/pod{UID}/{ID}")
        );
        // Hybrid: the unified line says "/" while v1 knows the service.
        let hybrid = "12:pids:/system.slice/kubelet.service\n1:name=systemd:/system.slice/kubelet.service\n0::/\n";
        assert_eq!(
            cgroup_path_from_proc(hybrid).unwrap(),
            "/system.slice/kubelet.service"
        );
        let hybrid_unified =
            "1:name=systemd:/system.slice/ssh.service\n0::/system.slice/ssh.service\n";
        assert_eq!(
            cgroup_path_from_proc(hybrid_unified).unwrap(),
            "/system.slice/ssh.service"
        );
        assert_eq!(cgroup_path_from_proc(""), None);
        assert_eq!(cgroup_path_from_proc("garbage"), None);
    }

    #[test]
    fn pod_names_from_kubelet_log_dirs_and_runtime_files() {
        assert_eq!(
            pod_from_log_dir(&format!("calico-system_calico-node-bhk2j_{UID}")),
            Some((
                "calico-system".into(),
                "calico-node-bhk2j".into(),
                UID.into()
            ))
        );
        assert_eq!(pod_from_log_dir("not-a-pod"), None);
        let containerd: serde_json::Value = serde_json::json!({"annotations": {
            "io.kubernetes.cri.sandbox-namespace": "calico-system",
            "io.kubernetes.cri.sandbox-name": "calico-node-bhk2j",
            "io.kubernetes.cri.container-name": "calico-node"}});
        assert_eq!(
            names_from_runtime_config(&containerd),
            (
                Some("calico-system".into()),
                Some("calico-node-bhk2j".into()),
                Some("calico-node".into())
            )
        );
        let crio = serde_json::json!({"annotations": {
            "io.kubernetes.pod.namespace": "kube-system",
            "io.kubernetes.pod.name": "kube-proxy-x",
            "io.kubernetes.container.name": "kube-proxy"}});
        assert_eq!(
            names_from_runtime_config(&crio).2.as_deref(),
            Some("kube-proxy")
        );
        let docker = serde_json::json!({"Config": {"Labels": {
            "io.kubernetes.pod.namespace": "openelb-system",
            "io.kubernetes.pod.name": "openelb-speaker-1",
            "io.kubernetes.container.name": "openelb-speaker"}}});
        assert_eq!(
            names_from_runtime_config(&docker).1.as_deref(),
            Some("openelb-speaker-1")
        );
        assert_eq!(
            names_from_runtime_config(&serde_json::json!(null)),
            (None, None, None)
        );
    }
}
