//! Issue 7 end to end: a process moved into a cgroup named like a kubepods container (in the
//! cgroup2 hierarchy, wherever /proc/mounts says it is: /sys/fs/cgroup/unified on this hybrid
//! machine) has its events attributed to that pod UID and container ID — with the pod's
//! namespace and name from kubelet's /var/log/pods layout, the executable and the parent — and
//! `--pod`, `--container` and `--cgroup` keep only it. The same command's events from before the
//! move carry no container. The lookups run in a network namespace of their own (a veth pair,
//! both ends inside) so that they succeed on a machine whose only address is loopback.
use std::path::{Path, PathBuf};

use nodeip_trace_tests::{cgroup2_mount_point, require_root, trace_json, Netns};
use serde_json::Value;

/// Held by each test while it makes and removes kubepods cgroups: the two share the
/// hierarchy's top slices, which the one that made them removes.
static KUBEPODS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Directories this test made, removed deepest first (even when it fails).
struct Made(Vec<PathBuf>);

impl Made {
    /// `root/parts[0]/parts[1]/…`, each directory made where missing (and remembered).
    fn directories(&mut self, root: &Path, parts: &[&str]) -> PathBuf {
        let mut dir = root.to_path_buf();
        for part in parts {
            dir.push(part);
            if !dir.exists() {
                std::fs::create_dir(&dir)
                    .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
                self.0.push(dir.clone());
            }
        }
        dir
    }
}

/// A network namespace for getent's lookups, with an IPv4 address: its AI_ADDRCONFIG finds
/// none where only the loopback has one (the VM guest's own namespace), and its lookups
/// would fail.
fn lookup_netns(name: &str) -> Netns {
    let netns = Netns::new(name);
    for cmd in [
        "link add eth0 type veth peer name peer0",
        "addr add 10.1.0.5/24 dev eth0",
        "link set eth0 up",
        "link set peer0 up",
        "link set lo up",
    ] {
        netns.ip(&cmd.split_whitespace().collect::<Vec<_>>());
    }
    netns
}

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
    let _kubepods = KUBEPODS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(root) = cgroup2_mount_point() else {
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
    let dir = made.directories(
        &root,
        &[
            "kubepods.slice",
            "kubepods-besteffort.slice",
            &pod_slice,
            &scope,
        ],
    );
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

    // `ip netns exec` execs getent (a child of the shell, in the shell's cgroup).
    let netns = lookup_netns("attr");
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

/// Containers made during the trace and started back to back, faster than the tracer's
/// rescans of the cgroup hierarchy (at most one a second), each with a process that looks a
/// name up and exits at once: every lookup carries its own container. The tracer asks the
/// kernel for a new cgroup id's path by the id itself (`open_by_handle_at`). On an idle
/// machine the `/proc/PID/cgroup` fallback also finds these; where the tracer lags (the soak's
/// load: a container every 0.5 s), it found 3 of 120 before and finds 120 of 120 now
/// (`guest_soak`'s "glibc in a new container" count, judged by `cargo xtask soak --vm`).
#[test]
fn containers_started_back_to_back_are_each_attributed() {
    containers_in_a_trace("attrq", false);
}

/// The same, each container's cgroups removed as soon as its process ended (a pod that
/// checked something and went): the lookups' records are read after that, when neither the
/// kernel nor `/proc` can name the cgroup any more. The `cgroup:cgroup_mkdir` tracepoint's
/// record, read before them, names it (by the handle alone 2 of 5 were named).
#[test]
fn containers_removed_at_once_are_still_named() {
    containers_in_a_trace("attrr", true);
}

/// Five containers made during a trace, one after the other, each running one glibc lookup
/// (and `removed_at_once`: its cgroups removed right after); every lookup must carry its
/// container's ID.
fn containers_in_a_trace(netns_name: &str, removed_at_once: bool) {
    require_root();
    let _kubepods = KUBEPODS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(root) = cgroup2_mount_point() else {
        nodeip_trace_tests::skip_or_fail("no cgroup2 hierarchy is mounted (a v1-only node)");
        return;
    };
    let pid = std::process::id();
    let mut made = Made(Vec::new());
    let dir = made.directories(&root, &["kubepods.slice", "kubepods-besteffort.slice"]);
    let netns = lookup_netns(netns_name);
    let ids: Vec<String> = (0..5u32)
        .map(|n| {
            format!(
                "{:0>64}",
                format!("5ca1e{pid:x}{}{n}", removed_at_once as u8)
            )
        })
        .collect();
    let mut script = String::new();
    for (n, id) in ids.iter().enumerate() {
        let pod = dir.join(format!(
            "kubepods-besteffort-pod0e1d2c3b_4a59_4687_9786_{pid:08x}{}{n:03x}.slice",
            removed_at_once as u8
        ));
        let scope = pod.join(format!("cri-containerd-{id}.scope"));
        // Made during the trace (the tracer's first scan of the hierarchy does not see it),
        // removed by the test after it if not by the script.
        made.0.push(pod.clone());
        made.0.push(scope.clone());
        // A shell per container: it moves itself in, then becomes the lookup.
        script += &format!(
            "mkdir -p {0} && sh -c 'echo $$ > {0}/cgroup.procs && exec ip netns exec {1} getent ahostsv4 localhost >/dev/null' || exit {2};\n",
            scope.display(),
            netns.name,
            10 + n
        );
        if removed_at_once {
            // Empty a moment after its last task was reaped.
            script += &format!(
                "for i in 1 2 3 4 5 6 7 8 9 10; do rmdir {0} 2>/dev/null && break; sleep 0.02; done; rmdir {1};\n",
                scope.display(),
                pod.display()
            );
        }
    }
    let run = trace_json(&[], &["sh", "-c", &script]);
    assert!(run.output.status.success(), "{}", run.stderr);
    let attributed: Vec<&str> = lookups(&run.events)
        .iter()
        .map(|e| e["process"]["container"]["id"].as_str().unwrap_or("none"))
        .collect();
    let wanted: Vec<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(attributed, wanted, "{}", run.stderr);
}
