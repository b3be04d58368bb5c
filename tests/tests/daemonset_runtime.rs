//! Issue 21: the DaemonSet runs as written. `deploy/daemonset.yaml` is read and translated into
//! `podman run` flags — its privileges, host namespaces, hostPath mounts (read-only where it
//! says) and emptyDir volumes (a fresh directory each), command and args, memory limit and grace period — so this test cannot drift from the
//! manifest: a field the translation does not know fails the test until it is translated (or
//! listed as scheduling-only). The image is the one `cargo xtask image` built (`cargo xtask test`
//! builds it first), run under podman with Debian's runc, without systemd (cgroupfs manager,
//! file events backend).
//!
//! Checked: JSON events of host processes (getent's getaddrinfo, an `ip -batch` netlink burst in
//! a scratch namespace) come out on the container's stdout; the runtime enforces the manifest's
//! memory limit, and the tracer stays under it through the burst (no OOM kill); `podman stop` with
//! the grace period ends it by SIGTERM in time, its last stdout line the complete `summary`. And
//! the manifest passes the Kubernetes API schema (`kubernetes-validate --strict`, offline).
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nodeip_trace_tests::{require_root, workspace_root, Netns};
use serde::Deserialize as _;
use serde_json::Value as Json;
use serde_yaml::Value;

/// podman's global flags here: no systemd, so cgroupfs and a file for events.
const PODMAN_GLOBAL: [&str; 4] = ["--cgroup-manager", "cgroupfs", "--events-backend", "file"];

/// Pod-spec fields that only steer scheduling or cluster DNS: nothing to run on one node.
const POD_SCHEDULING_ONLY: [&str; 3] = ["dnsPolicy", "priorityClassName", "tolerations"];

/// The kubernetes-validate install `cargo xtask setup --for-tests` makes.
const VALIDATOR_DIR: &str = "target/toolchains/kubernetes-validate";

/// `deploy/daemonset.yaml`'s documents.
fn manifest_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).expect("deploy/daemonset.yaml is valid YAML"))
        .collect()
}

fn manifest_text() -> String {
    std::fs::read_to_string(workspace_root().join("deploy/daemonset.yaml"))
        .expect("reading deploy/daemonset.yaml")
}

/// What the manifest asks of the runtime, as `podman run` arguments.
#[derive(Debug)]
struct PodmanRun {
    /// Flags before the image.
    flags: Vec<String>,
    /// The image, as the manifest names it.
    image: String,
    /// Arguments after the image (the container's `args`).
    args: Vec<String>,
    /// `terminationGracePeriodSeconds` (Kubernetes' default, 30, when absent).
    grace_seconds: u64,
    /// `resources.limits.memory` in bytes.
    memory_limit: Option<u64>,
    /// hostPath sources: a missing one is created before the run, as containerd does for a
    /// hostPath without a `type`.
    host_paths: Vec<PathBuf>,
    /// emptyDir volumes: a fresh directory each, made before the run and removed after it, as
    /// the kubelet does in the pod's directory.
    empty_dirs: Vec<PathBuf>,
}

/// A Kubernetes memory quantity (`256Mi`, `1G`, `1000000`) in bytes.
fn memory_bytes(quantity: &str) -> u64 {
    let suffixes: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    for (suffix, factor) in suffixes {
        if let Some(number) = quantity.strip_suffix(suffix) {
            return number.parse::<u64>().expect("an integer quantity") * factor;
        }
    }
    quantity.parse().expect("a memory quantity")
}

/// A Kubernetes CPU quantity (`500m`, `2`) as podman's `--cpus`.
fn cpus(quantity: &str) -> String {
    match quantity.strip_suffix('m') {
        Some(milli) => format!("{:.3}", milli.parse::<f64>().expect("millicores") / 1000.0),
        None => quantity.to_string(),
    }
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_sequence()
        .into_iter()
        .flatten()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

fn keys(v: &Value) -> Vec<String> {
    v.as_mapping()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str().expect("a string key").to_string())
        .collect()
}

/// Translates the DaemonSet's pod template into a `podman run`; panics on any field it does not
/// know, so a manifest change cannot silently escape this test.
fn translate(docs: &[Value]) -> PodmanRun {
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    let mut flags: Vec<String> = Vec::new();
    let mut grace_seconds = 30;
    for key in keys(pod) {
        match key.as_str() {
            "hostPID" if pod[&key] == true => flags.extend(["--pid".into(), "host".into()]),
            "hostNetwork" if pod[&key] == true => flags.extend(["--network".into(), "host".into()]),
            "terminationGracePeriodSeconds" => grace_seconds = pod[&key].as_u64().expect("seconds"),
            "containers" | "volumes" => {}
            k if POD_SCHEDULING_ONLY.contains(&k) => {}
            k => panic!("pod spec field {k} is not translated into podman flags: add it here"),
        }
    }
    let containers = pod["containers"].as_sequence().expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    let c = &containers[0];
    let volumes = pod["volumes"].as_sequence().cloned().unwrap_or_default();
    let mut memory_limit = None;
    let mut host_paths = Vec::new();
    let mut empty_dirs = Vec::new();
    let mut command = Vec::new();
    for key in keys(c) {
        match key.as_str() {
            "name" | "image" | "args" => {}
            "command" => command = str_list(&c[&key]),
            "securityContext" => {
                let sc = &c[&key];
                for field in keys(sc) {
                    match field.as_str() {
                        "privileged" if sc[&field] == true => flags.push("--privileged".into()),
                        "readOnlyRootFilesystem" if sc[&field] == true => {
                            flags.push("--read-only".into())
                        }
                        "allowPrivilegeEscalation" if sc[&field] == false => {
                            flags.extend(["--security-opt".into(), "no-new-privileges".into()])
                        }
                        "runAsUser" => flags.extend([
                            "--user".into(),
                            sc[&field].as_u64().expect("a uid").to_string(),
                        ]),
                        "capabilities" => {
                            for cap in str_list(&sc[&field]["add"]) {
                                flags.extend(["--cap-add".into(), cap]);
                            }
                            for cap in str_list(&sc[&field]["drop"]) {
                                flags.extend(["--cap-drop".into(), cap]);
                            }
                        }
                        f => panic!("securityContext.{f} is not translated: add it here"),
                    }
                }
            }
            "resources" => {
                let limits = &c[&key]["limits"];
                for field in keys(limits) {
                    match field.as_str() {
                        "memory" => {
                            let bytes = memory_bytes(limits[&field].as_str().expect("quantity"));
                            memory_limit = Some(bytes);
                            // Kubernetes nodes run without swap for pods: the limit is the limit.
                            flags.extend([
                                format!("--memory={bytes}"),
                                format!("--memory-swap={bytes}"),
                            ]);
                        }
                        "cpu" => flags.push(format!(
                            "--cpus={}",
                            cpus(limits[&field].as_str().expect("quantity"))
                        )),
                        f => panic!("resources.limits.{f} is not translated: add it here"),
                    }
                }
                // requests only steer scheduling.
            }
            "env" => {
                for var in c[&key].as_sequence().expect("env list") {
                    let value = var["value"].as_str().expect("a literal env value");
                    flags.push(format!(
                        "--env={}={value}",
                        var["name"].as_str().expect("name")
                    ));
                }
            }
            "volumeMounts" => {
                for m in c[&key].as_sequence().expect("volumeMounts") {
                    let name = m["name"].as_str().expect("mount name");
                    let volume = volumes
                        .iter()
                        .find(|v| v["name"] == name)
                        .unwrap_or_else(|| panic!("volumeMount {name} without a volume"));
                    let host = if let Some(path) = volume["hostPath"]["path"].as_str() {
                        host_paths.push(PathBuf::from(path));
                        path.to_string()
                    } else if volume["emptyDir"].is_mapping() {
                        for field in keys(&volume["emptyDir"]) {
                            match field.as_str() {
                                // Eviction when the pod's files outgrow it: the kubelet's.
                                "sizeLimit" => {}
                                f => panic!("emptyDir.{f} is not translated: add it here"),
                            }
                        }
                        let dir = std::env::temp_dir()
                            .join(format!("nit-emptydir-{}-{name}", std::process::id()));
                        let path = dir.display().to_string();
                        empty_dirs.push(dir);
                        path
                    } else {
                        panic!("volume {name} is neither a hostPath nor an emptyDir: translate it")
                    };
                    let target = m["mountPath"].as_str().expect("mountPath");
                    let mut options = vec!["rbind"];
                    if m["readOnly"] == true {
                        options.push("ro");
                    }
                    match m["mountPropagation"].as_str() {
                        None | Some("None") => {}
                        Some("HostToContainer") => options.push("rslave"),
                        Some("Bidirectional") => options.push("rshared"),
                        Some(p) => panic!("mountPropagation {p} is not translated"),
                    }
                    flags.push(format!("--volume={host}:{target}:{}", options.join(",")));
                }
            }
            k => panic!("container field {k} is not translated into podman flags: add it here"),
        }
    }
    let (entrypoint, rest) = command.split_first().expect("a command");
    assert!(
        rest.is_empty(),
        "command beyond the binary ({rest:?}): translate it"
    );
    flags.push(format!("--entrypoint={entrypoint}"));
    PodmanRun {
        flags,
        image: c["image"].as_str().expect("image").to_string(),
        args: str_list(&c["args"]),
        grace_seconds,
        memory_limit,
        host_paths,
        empty_dirs,
    }
}

#[test]
fn the_manifest_translates_into_podman_flags() {
    let run = translate(&manifest_docs(&manifest_text()));
    for flag in ["--privileged", "--pid", "--network"] {
        assert!(run.flags.iter().any(|f| f == flag), "{flag}: {run:?}");
    }
    assert!(
        run.flags
            .iter()
            .any(|f| f == "--volume=/sys/fs/cgroup:/sys/fs/cgroup:rbind,ro"),
        "{run:?}"
    );
    assert!(
        run.memory_limit.is_some(),
        "a memory limit, so a runaway tracer cannot starve the node"
    );
    assert!(
        run.flags
            .iter()
            .any(|f| f.starts_with("--volume=") && f.ends_with(":/tmp:rbind")),
        "an emptyDir at /tmp for the spill file (the image has no /tmp): {run:?}"
    );
    assert_eq!(run.empty_dirs.len(), 1, "{run:?}");
    assert_eq!(memory_bytes("256Mi"), 256 << 20);
    assert_eq!(cpus("250m"), "0.250");
}

/// `podman GLOBAL… ARGS`, returning stdout; panics with stderr when it fails.
fn podman(args: &[&str]) -> String {
    let out = Command::new("podman")
        .args(PODMAN_GLOBAL)
        .args(args)
        .output()
        .expect("running podman (installed by `cargo xtask setup --for-tests`)");
    assert!(
        out.status.success(),
        "podman {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The container (removed on drop), the hostPath directories the run created (removed on drop
/// when still empty) and its emptyDir directories (removed with what is in them).
struct Cleanup {
    container: String,
    created_dirs: Vec<PathBuf>,
    empty_dirs: Vec<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(PODMAN_GLOBAL)
            .args(["rm", "--force", "--time", "0", &self.container])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        for dir in self.created_dirs.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
        for dir in &self.empty_dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Creates `path` and its missing parents, recording each one created.
fn create_missing(path: &Path, created: &mut Vec<PathBuf>) {
    let mut missing: Vec<&Path> = path.ancestors().take_while(|p| !p.exists()).collect();
    missing.reverse();
    for dir in missing {
        std::fs::create_dir(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        created.push(dir.to_path_buf());
    }
}

/// A line of the container's output, with when it came.
struct Line {
    at: Instant,
    text: String,
}

fn read_lines(stream: impl std::io::Read + Send + 'static, tx: mpsc::Sender<Line>) {
    std::thread::spawn(move || {
        for text in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx
                .send(Line {
                    at: Instant::now(),
                    text,
                })
                .is_err()
            {
                break;
            }
        }
    });
}

/// Receives lines until `want` accepts one (returned) or `timeout` passes (None); keeps all.
fn wait_for(
    rx: &mpsc::Receiver<Line>,
    kept: &mut Vec<Line>,
    timeout: Duration,
    want: impl Fn(&str) -> bool,
) -> Option<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        let line = rx.recv_timeout(left).ok()?;
        let hit = want(&line.text).then_some(line.at);
        kept.push(line);
        if hit.is_some() {
            return hit;
        }
    }
}

/// The container's memory cgroup directory (v1 `memory` controller or v2).
fn memory_cgroup(cgroup_path: &str) -> PathBuf {
    let v1 = Path::new("/sys/fs/cgroup/memory").join(cgroup_path.trim_start_matches('/'));
    if v1.exists() {
        v1
    } else {
        Path::new("/sys/fs/cgroup").join(cgroup_path.trim_start_matches('/'))
    }
}

fn read_u64(dir: &Path, names: &[&str]) -> Option<u64> {
    names
        .iter()
        .find_map(|n| std::fs::read_to_string(dir.join(n)).ok())
        .and_then(|s| s.trim().parse().ok())
}

/// `VmRSS`/`VmHWM` of `pid` in KiB.
fn status_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `--ulimit` flags within this process's own hard limits. Kubernetes sets no rlimits: a pod
/// gets its runtime's. podman's defaults (nofile and nproc raised to 1048576 and beyond) need
/// CAP_SYS_RESOURCE, which a sandboxed CI machine may not have (this one has not: runc then
/// fails with "error setting rlimit type 7: operation not permitted"), so the container gets this
/// process's open-file limit and 4096 processes (the tracer runs a few threads).
fn runtime_rlimits() -> Vec<String> {
    let mut nofile = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut nofile) };
    assert_eq!(rc, 0, "getrlimit(RLIMIT_NOFILE)");
    let hard = nofile.rlim_max.min(1 << 20);
    vec![
        format!("--ulimit=nofile={hard}:{hard}"),
        "--ulimit=nproc=4096:4096".into(),
    ]
}

/// Addresses and routes the burst adds (and dumps) in its scratch namespace.
const BURST_OBJECTS: usize = 1500;

/// An `ip -batch` file: BURST_OBJECTS addresses and routes, dumped, then flushed.
fn burst_batch() -> String {
    let adds = |what: &str, net: &str| -> String {
        (0..BURST_OBJECTS)
            .map(|i| format!("{what} add {net}.{}.{}/32 dev lo\n", i / 250, i % 250 + 1))
            .collect()
    };
    format!(
        "{}addr show\n{}route show\nroute flush table main\naddr flush dev lo\n",
        adds("addr", "10.77"),
        adds("route", "10.88")
    )
}

#[test]
fn the_daemonset_runs_as_written_under_podman() {
    require_root();
    let run = translate(&manifest_docs(&manifest_text()));
    let exists = Command::new("podman")
        .args(PODMAN_GLOBAL)
        .args(["image", "exists", &run.image])
        .status()
        .expect("running podman (installed by `cargo xtask setup --for-tests`)");
    assert!(
        exists.success(),
        "image {} missing: build it with `cargo xtask image` (`cargo xtask test` does)",
        run.image
    );
    let name = format!("nit-daemonset-{}", std::process::id());
    let mut cleanup = Cleanup {
        container: name.clone(),
        created_dirs: Vec::new(),
        empty_dirs: Vec::new(),
    };
    for path in &run.host_paths {
        create_missing(path, &mut cleanup.created_dirs);
    }
    for dir in &run.empty_dirs {
        std::fs::create_dir(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        cleanup.empty_dirs.push(dir.clone());
    }
    let started = Instant::now();
    let mut child = Command::new("podman")
        .args(PODMAN_GLOBAL)
        .args(["run", "--name", &name])
        .args(runtime_rlimits())
        .args(&run.flags)
        .arg(&run.image)
        .args(&run.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting podman run");
    let (out_tx, out_rx) = mpsc::channel();
    let (err_tx, err_rx) = mpsc::channel();
    read_lines(child.stdout.take().unwrap(), out_tx);
    read_lines(child.stderr.take().unwrap(), err_tx);
    let mut stderr_lines = Vec::new();
    let stderr_text = |lines: &[Line]| {
        lines
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let Some(ready_at) = wait_for(&err_rx, &mut stderr_lines, Duration::from_secs(90), |l| {
        l.contains("hooks attached")
    }) else {
        panic!(
            "the container did not attach its probes within 90 s; its stderr:\n{}",
            stderr_text(&stderr_lines)
        );
    };
    println!(
        "start-up: podman run to probes attached in {} ms",
        (ready_at - started).as_millis()
    );
    // The image has no /tmp of its own: the manifest's emptyDir is where a burst spills.
    assert!(
        !stderr_text(&stderr_lines).contains("cannot make the spill file"),
        "the tracer in the container has no directory for its spill file; its stderr:\n{}",
        stderr_text(&stderr_lines)
    );
    let inspect = |format: &str| podman(&["inspect", "--format", format, &name]);
    let pid = inspect("{{.State.Pid}}");
    let cgroup = memory_cgroup(&inspect("{{.State.CgroupPath}}"));
    println!(
        "memory: tracer RSS {} KiB once attached, peak so far {} KiB",
        status_kib(&pid, "VmRSS:"),
        status_kib(&pid, "VmHWM:")
    );
    if let Some(limit) = run.memory_limit {
        assert_eq!(
            read_u64(&cgroup, &["memory.limit_in_bytes", "memory.max"]),
            Some(limit),
            "the runtime enforces the manifest's memory limit ({})",
            cgroup.display()
        );
    }

    // A host process's getaddrinfo, seen from inside the container.
    let mut stdout_lines = Vec::new();
    let getent_started = Instant::now();
    let getent = Command::new("getent")
        .args(["ahosts", "localhost"])
        .output()
        .expect("running getent");
    assert!(getent.status.success());
    let first_event = wait_for(&out_rx, &mut stdout_lines, Duration::from_secs(20), |l| {
        serde_json::from_str::<Json>(l)
            .is_ok_and(|e| e["kind"] == "getaddrinfo" && e["comm"] == "getent")
    });
    let Some(first_event) = first_event else {
        panic!(
            "no getaddrinfo event of the host's getent on the container's stdout; stdout:\n{}\nstderr:\n{}",
            stderr_text(&stdout_lines),
            stderr_text(&stderr_lines)
        );
    };
    println!(
        "start-up: podman run to the first getaddrinfo event {} ms (getent ran {} ms after the probes attached, its event came {} ms after it started)",
        (first_event - started).as_millis(),
        (getent_started - ready_at).as_millis(),
        (first_event - getent_started).as_millis()
    );

    // A netlink burst in a scratch namespace.
    let ns = Netns::new("dsburst");
    let batch = std::env::temp_dir().join(format!("nit-dsburst-{}.batch", std::process::id()));
    std::fs::write(&batch, burst_batch()).expect("writing the batch file");
    let burst_started = Instant::now();
    let ip = Command::new("ip")
        .args(["-n", &ns.name, "-batch"])
        .arg(&batch)
        .stdout(Stdio::null())
        .status()
        .expect("running ip -batch");
    let _ = std::fs::remove_file(&batch);
    assert!(ip.success(), "ip -batch failed");
    println!(
        "burst: {} addresses and {} routes added, dumped and flushed in {} ms",
        BURST_OBJECTS,
        BURST_OBJECTS,
        burst_started.elapsed().as_millis()
    );
    // Let the tracer drain what the burst produced (its events go out as they complete).
    std::thread::sleep(Duration::from_secs(3));
    let rss_kib = status_kib(&pid, "VmRSS:");
    let hwm_kib = status_kib(&pid, "VmHWM:");
    let peak = read_u64(&cgroup, &["memory.max_usage_in_bytes", "memory.peak"]);
    println!(
        "memory: tracer RSS {rss_kib} KiB, peak RSS {hwm_kib} KiB; container cgroup peak {} KiB (limit {} KiB)",
        peak.map_or("?".into(), |p| (p / 1024).to_string()),
        run.memory_limit.map_or("none".into(), |l| (l / 1024).to_string())
    );

    // SIGTERM with the manifest's grace period, as the kubelet sends it.
    let stop_started = Instant::now();
    podman(&["stop", "--time", &run.grace_seconds.to_string(), &name]);
    let stop_took = stop_started.elapsed();
    let status = child.wait().expect("waiting for podman run");
    // The readers end with the streams; what is left is queued.
    stdout_lines.extend(out_rx.iter());
    stderr_lines.extend(err_rx.iter());
    println!(
        "stop: SIGTERM to exit in {} ms (grace period {} s)",
        stop_took.as_millis(),
        run.grace_seconds
    );
    assert!(
        stop_took < Duration::from_secs(run.grace_seconds),
        "the tracer did not end within the grace period: killed, not stopped"
    );
    assert_eq!(inspect("{{.State.OOMKilled}}"), "false", "OOM-killed");
    assert_eq!(
        inspect("{{.State.ExitCode}}"),
        "0",
        "exit status; podman run said {status}; stderr:\n{}",
        stderr_text(&stderr_lines)
    );

    let events: Vec<Json> = stdout_lines
        .iter()
        .map(|l| {
            serde_json::from_str(&l.text)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {}", l.text))
        })
        .collect();
    let last = events.last().expect("events on stdout");
    assert_eq!(last["kind"], "summary", "the last line is the summary");
    assert_eq!(last["stopped_by"], "SIGTERM", "{last}");
    let burst_messages = events
        .iter()
        .filter(|e| e["kind"] == "netlink" && e["comm"] == "ip" && e["direction"] == "send")
        .flat_map(|e| e["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["type"] == "RTM_NEWADDR" || m["type"] == "RTM_NEWROUTE")
        .count();
    let lost: u64 = events
        .iter()
        .filter(|e| e["kind"] == "lost")
        .filter_map(|e| e["counts"].as_object())
        .flat_map(|c| c.values().filter_map(Json::as_u64))
        .sum();
    println!(
        "burst: {burst_messages} RTM_NEWADDR/RTM_NEWROUTE requests of ip seen, {lost} records counted lost; {} JSON lines in all",
        events.len()
    );
    assert!(
        burst_messages == 2 * BURST_OBJECTS || lost > 0,
        "every request of the burst is an event or counted lost: {burst_messages} of {}",
        2 * BURST_OBJECTS
    );
    drop(ns);
    drop(cleanup);
}

/// `kubernetes-validate ARGS` from the install `cargo xtask setup --for-tests` made.
fn kubernetes_validate(files: &[&Path]) -> std::process::Output {
    let dir = workspace_root().join(VALIDATOR_DIR);
    assert!(
        dir.join("kubernetes_validate").is_dir(),
        "{} missing: run `cargo xtask setup --for-tests` (installs PyPI kubernetes-validate there)",
        dir.display()
    );
    Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict"])
        .args(files)
        .env("PYTHONPATH", &dir)
        .output()
        .expect("running python3 -m kubernetes_validate")
}

#[test]
fn the_manifest_passes_the_kubernetes_api_schema() {
    let manifest = workspace_root().join("deploy/daemonset.yaml");
    let out = kubernetes_validate(&[&manifest]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert_eq!(
        said.matches(" passed ").count(),
        2,
        "the Namespace and the DaemonSet: {said}"
    );
    // And it is not vacuous: a misspelt field fails strict validation.
    let broken = std::env::temp_dir().join(format!("nit-daemonset-{}.yaml", std::process::id()));
    std::fs::write(&broken, manifest_text().replace("hostPID:", "hostPid:"))
        .expect("writing the broken copy");
    let out = kubernetes_validate(&[&broken]);
    let _ = std::fs::remove_file(&broken);
    assert!(
        !out.status.success(),
        "kubernetes-validate accepted hostPid: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
