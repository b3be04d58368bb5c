//! `deploy/daemonset.yaml` (no cluster here): it parses, and the DaemonSet has what the tool
//! needs on a node — privileged, host PID and network namespaces, the mounts its probes and its
//! attribution read, and `trace --format json` to stdout for the log pipeline.
use nodeip_trace_tests::workspace_root;
use serde_yaml::Value;

fn manifests() -> Vec<Value> {
    let text = std::fs::read_to_string(workspace_root().join("deploy/daemonset.yaml"))
        .expect("reading deploy/daemonset.yaml");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("valid YAML"))
        .collect()
}

use serde::Deserialize;

fn daemonset(docs: &[Value]) -> &Value {
    docs.iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet")
}

#[test]
fn the_daemonset_has_what_the_tracer_needs() {
    let docs = manifests();
    let ds = daemonset(&docs);
    assert_eq!(ds["apiVersion"], "apps/v1");
    let namespace = ds["metadata"]["namespace"].as_str().unwrap();
    assert!(
        docs.iter()
            .any(|d| d["kind"] == "Namespace" && d["metadata"]["name"] == namespace),
        "its namespace is created too"
    );
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        ds["spec"]["template"]["metadata"]["labels"]
    );
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        pod["hostPID"], true,
        "attribution and uprobes need the host's pids"
    );
    assert_eq!(pod["hostNetwork"], true, "the node's netlink view");
    assert!(
        pod["tolerations"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|t| t["operator"] == "Exists"),
        "runs on every node, tainted or not"
    );
    let containers = pod["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(c["securityContext"]["privileged"], true);
    let args: Vec<&str> = c["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "trace");
    assert!(
        args.windows(2).any(|w| w == ["--format", "json"]),
        "{args:?}"
    );
    assert!(
        !args
            .iter()
            .any(|a| *a == "-o" || *a == "--output" || a.starts_with("--pcap")),
        "JSON goes to stdout for the log pipeline: {args:?}"
    );
    let volumes = pod["volumes"].as_sequence().unwrap();
    let host_path = |name: &str| {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["hostPath"]["path"].as_str())
    };
    let mounts = c["volumeMounts"].as_sequence().unwrap();
    for (host, read_only) in [
        ("/sys/kernel/btf", true),
        ("/sys/kernel/tracing", false),
        ("/sys/kernel/debug", false),
        ("/sys/fs/cgroup", true),
        ("/run/containerd", true),
        ("/var/log/pods", true),
    ] {
        let mount = mounts
            .iter()
            .find(|m| host_path(m["name"].as_str().unwrap()) == Some(host))
            .unwrap_or_else(|| panic!("no mount of {host}"));
        assert_eq!(
            mount["mountPath"], host,
            "{host} where the tool looks for it"
        );
        if read_only {
            assert_eq!(mount["readOnly"], true, "{host} read-only");
        }
    }
}

/// Issue 21: no registry the project does not own. The image is the placeholder
/// `nodeip-trace:<version>` that `cargo xtask image` tags locally (docs/kubernetes.md says how to push it
/// and override it), and `command` is the binary's absolute path in that image (FROM scratch: no
/// shell, no PATH lookup).
#[test]
fn the_image_is_the_local_placeholder_the_image_task_builds() {
    let docs = manifests();
    let ds = daemonset(&docs);
    let c = &ds["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["image"].as_str(),
        Some(format!("nodeip-trace:{}", env!("CARGO_PKG_VERSION")).as_str()),
        "the image names no registry and carries the workspace version"
    );
    assert_eq!(c["command"][0], "/usr/local/bin/nodeip-trace");
}
