//! `trace --pod/--container/--cgroup`: which attributed events (and frames) are kept. Events not
//! made by a process (header, lost, summary) always pass.
use crate::model::process::ProcessAttribution;

/// The attribution filters given on the command line; all given must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessFilter {
    /// `NAMESPACE/NAME` or a pod UID.
    pub pod: Option<String>,
    /// A container ID or its prefix (as `crictl ps` shows, 13 characters), or a container name.
    pub container: Option<String>,
    /// A cgroup path; the process's cgroup must be it or below it.
    pub cgroup: Option<String>,
}

impl ProcessFilter {
    /// Whether no filter was given.
    pub fn is_empty(&self) -> bool {
        self.pod.is_none() && self.container.is_none() && self.cgroup.is_none()
    }

    /// Whether a process with `attribution` passes (without attribution, only an empty filter
    /// passes).
    pub fn matches(&self, attribution: Option<&ProcessAttribution>) -> bool {
        if self.is_empty() {
            return true;
        }
        let Some(a) = attribution else {
            return false;
        };
        let container = a.identity.container.as_ref();
        if let Some(pod) = &self.pod {
            let Some(c) = container else {
                return false;
            };
            let ok = match pod.split_once('/') {
                Some((ns, name)) => {
                    c.pod_namespace.as_deref() == Some(ns) && c.pod_name.as_deref() == Some(name)
                }
                None => c.pod_uid.as_deref() == Some(pod.as_str()),
            };
            if !ok {
                return false;
            }
        }
        if let Some(want) = &self.container {
            let Some(c) = container else {
                return false;
            };
            if !(c.id.starts_with(want.as_str()) || c.name.as_deref() == Some(want.as_str())) {
                return false;
            }
        }
        if let Some(want) = &self.cgroup {
            let want = want.trim_end_matches('/');
            let Some(path) = a.cgroup.as_deref() else {
                return false;
            };
            let below = path == want
                || path
                    .strip_prefix(want)
                    .is_some_and(|rest| rest.starts_with('/'))
                || want.is_empty();
            if !below {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::cgroup::parse_cgroup_path;

    const ID: &str = "4f3a9c1d2e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
    const UID: &str = "1b2c3d4e-5f60-4718-9a0b-1c2d3e4f5a6b";

    fn in_pod() -> ProcessAttribution {
        let cgroup = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{ID}.scope",
            UID.replace('-', "_")
        );
        let mut identity = parse_cgroup_path(&cgroup);
        let c = identity.container.as_mut().unwrap();
        c.pod_namespace = Some("calico-system".into());
        c.pod_name = Some("calico-node-bhk2j".into());
        c.name = Some("calico-node".into());
        ProcessAttribution {
            cgroup: Some(cgroup),
            identity,
            ..ProcessAttribution::default()
        }
    }

    fn kubelet() -> ProcessAttribution {
        ProcessAttribution {
            cgroup: Some("/system.slice/kubelet.service".into()),
            identity: parse_cgroup_path("/system.slice/kubelet.service"),
            ..ProcessAttribution::default()
        }
    }

    fn filter(pod: Option<&str>, container: Option<&str>, cgroup: Option<&str>) -> ProcessFilter {
        ProcessFilter {
            pod: pod.map(str::to_string),
            container: container.map(str::to_string),
            cgroup: cgroup.map(str::to_string),
        }
    }

    #[test]
    fn pods_by_name_or_uid_containers_by_id_prefix_or_name() {
        let pod = in_pod();
        for f in [
            filter(Some("calico-system/calico-node-bhk2j"), None, None),
            filter(Some(UID), None, None),
            filter(None, Some(&ID[..13]), None),
            filter(None, Some("calico-node"), None),
            filter(Some(UID), Some(ID), Some("/kubepods.slice")),
        ] {
            assert!(f.matches(Some(&pod)), "{f:?}");
            assert!(!f.matches(Some(&kubelet())), "{f:?}");
            assert!(!f.matches(None), "{f:?}");
        }
        assert!(!filter(Some("calico-system/other"), None, None).matches(Some(&pod)));
        assert!(!filter(None, Some("deadbeef"), None).matches(Some(&pod)));
    }

    #[test]
    fn cgroups_match_at_component_boundaries() {
        let k = kubelet();
        assert!(filter(None, None, Some("/system.slice")).matches(Some(&k)));
        assert!(filter(None, None, Some("/system.slice/")).matches(Some(&k)));
        assert!(filter(None, None, Some("/system.slice/kubelet.service")).matches(Some(&k)));
        assert!(!filter(None, None, Some("/system.sl")).matches(Some(&k)));
        assert!(!filter(None, None, Some("/user.slice")).matches(Some(&k)));
        assert!(ProcessFilter::default().matches(None));
    }
}
