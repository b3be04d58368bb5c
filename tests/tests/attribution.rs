//! Issue 7 end to end: a process moved into a cgroup named like a kubepods container (in the
//! cgroup2 hierarchy, wherever /proc/mounts says it is: /sys/fs/cgroup/unified on this hybrid
//! machine) has its events attributed to that pod UID and container ID — with the pod's
//! namespace and name from kubelet's /var/log/pods layout, the executable and the parent — and
//! `--pod`, `--container` and `--cgroup` keep only it. The same command's events from before the
//! move carry no container. The lookups run in a network namespace of their own (a veth pair,
//! both ends inside) so that they succeed on a machine whose only address is loopback.
use std::path::PathBuf;

use nodeip_trace_tests::{require_root, trace_json, Netns};
use serde_json::Value;

/// The cgroup2 mount point, from /proc/mounts.
fn cgroup2_root() -> Option<PathBuf> {
    nodeip_trace::host::process_table::cgroup2_mount(
        &std::fs::read_to_string("/proc/mounts").unwrap_or_default(),
    )
}

/// Directories this test made, removed deepest first (even when it fails).
struct Made(Vec<PathBuf>);

impl Drop for Made {
    fn drop(&mut self) {
        for dir in self.0.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The getaddrinfo events of a run, in order.
fn lookups(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "getaddrinfo")
        .collect()
}

#[test]
fn events_carry_pod_and_container_and_filters_keep_only_them() {
    require_root();
    let Some(root) = cgroup2_root() else {
        nodeip_trace_tests::skip_or_fail("no cgroup2 hierarchy is mounted (a v1-only node); the cgroup path parsers' unit tests cover v1 paths");
        return;
    };
    let pid = std::process::id();
    let uid = format!("0e1d2c3b-4a59-4687-9786-{pid:012x}");
    let id = format!("{:0>64}", format!("c0ffee{pid:x}"));
    let (ns, pod) = ("nit-ns", format!("nit-pod-{pid}"));
    let pod_slice = format!("kubepods-besteffort-pod{}.slice", uid.replace('-', "_"));
    let scope = format!("cri-containerd-{id}.scope");
    let mut made = Made(Vec::new());
    let mut dir = root.clone();
    for part in [
        "kubepods.slice",
        "kubepods-besteffort.slice",
        &pod_slice,
        &scope,
    ] {
        dir.push(part);
        if !dir.exists() {
            std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
            made.0.push(dir.clone());
        }
    }
    // kubelet's log layout names the pod (created only where no kubelet keeps it).
    let logs = PathBuf::from("/var/log/pods");
    let log_dir = logs.join(format!("{ns}_{pod}_{uid}"));
    if !logs.exists() {
        std::fs::create_dir(&logs).unwrap();
        made.0.insert(0, logs.clone());
    }
    std::fs::create_dir_all(log_dir.join("resolver")).unwrap();
    made.0.push(log_dir.clone());
    made.0.push(log_dir.join("resolver"));

    // getent in a network namespace with an IPv4 address: its AI_ADDRCONFIG finds none where
    // only the loopback has one (the VM guest's own namespace), and its lookups would fail.
    // `ip netns exec` execs getent (a child of the shell, in the shell's cgroup).
    let netns = Netns::new("attr");
    for cmd in [
        "link add eth0 type veth peer name peer0",
        "addr add 10.1.0.5/24 dev eth0",
        "link set eth0 up",
        "link set peer0 up",
        "link set lo up",
    ] {
        netns.ip(&cmd.split_whitespace().collect::<Vec<_>>());
    }
    let getent = format!(
        "ip netns exec {} getent ahostsv4 localhost >/dev/null",
        netns.name
    );
    let script = format!(
        "{getent} || echo \"getent before the move: exit $?\" >&2; \
         echo $$ > {}/cgroup.procs || {{ echo \"moving into the cgroup failed\" >&2; exit 3; }}; \
         {getent} || {{ echo \"getent in the cgroup: exit $?\" >&2; exit 4; }}",
        dir.display()
    );
    let command = ["sh", "-c", script.as_str()];
    let run = trace_json(&[], &command);
    assert!(run.output.status.success(), "{}", run.stderr);
    let calls = lookups(&run.events);
    assert_eq!(calls.len(), 2, "{}", run.stderr);
    let (before, inside) = (calls[0], calls[1]);
    assert!(before["process"]["container"].is_null(), "{before}");
    let process = &inside["process"];
    let container = &process["container"];
    assert_eq!(container["runtime"], "containerd", "{inside}");
    assert_eq!(container["id"], id.as_str());
    assert_eq!(container["pod_uid"], uid.as_str());
    assert_eq!(container["qos"], "besteffort");
    assert_eq!(container["pod_namespace"], ns);
    assert_eq!(container["pod_name"], pod.as_str());
    assert_eq!(container["name"], "resolver", "the pod's one container");
    let expected_cgroup = format!("/kubepods.slice/kubepods-besteffort.slice/{pod_slice}/{scope}");
    assert_eq!(process["cgroup"], expected_cgroup.as_str(), "{inside}");
    assert!(
        process["exe"]
            .as_str()
            .is_some_and(|e| e.ends_with("getent")),
        "{inside}"
    );
    assert_eq!(process["ancestors"][0]["comm"], "sh", "{inside}");
    println!("{inside}");

    // Each filter keeps only the call made inside the container.
    let pod_name = format!("{ns}/{pod}");
    for filter in [
        ["--pod", uid.as_str()],
        ["--pod", pod_name.as_str()],
        ["--container", &id[..13]],
        ["--cgroup", "/kubepods.slice"],
    ] {
        let run = trace_json(&filter, &command);
        assert!(run.output.status.success(), "{filter:?}: {}", run.stderr);
        let calls = lookups(&run.events);
        assert_eq!(calls.len(), 1, "{filter:?}: {}", run.stderr);
        assert_eq!(
            calls[0]["process"]["container"]["id"],
            id.as_str(),
            "{filter:?}"
        );
        let header = &run.events[0];
        assert!(
            header["filters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f.as_str().unwrap().starts_with(&filter[0][2..])),
            "{header}"
        );
    }
}
