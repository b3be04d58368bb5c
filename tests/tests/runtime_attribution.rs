//! Issue 21 part 4: attribution with real container runtimes, not cgroup directories made by
//! hand. A containerd (Debian's, with runc) started here with its own root, state and socket,
//! running containers in kubepods-style cgroups (cgroupfs driver) with CRI annotations, and a
//! podman container (cgroupfs manager, its own storage). No image is pulled: each container's
//! rootfs is built here from the host's dash, sleep and getent with their own copy of glibc, plus
//! the musl test client and its own musl loader. Events carry the runtime, the container ID, the
//! pod's namespace and name and the container's name; each container's own libcs are found and
//! probed, for a container running before the trace and one started during it; `--pod` and
//! `--container` select them.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nodeip_trace_tests::{
    musl::build_lookup_addrs, require_root, run_ok, BackgroundTrace, ScratchDir,
};
use serde_json::Value;

const POD_UID: &str = "5e1f0c2a-7b3d-4c8e-9f10-2a3b4c5d6e7f";
/// The names the containers look up (in their own /etc/hosts).
const NAME: &str = "svc.runtime.test";

/// A 64-hex-digit container ID, as CRI runtimes make them.
fn container_id(seed: u8) -> String {
    format!("{:02x}", seed).repeat(32)
}

/// A rootfs with its own copies of glibc and musl: dash, sleep, getent, the musl client.
fn build_rootfs(dir: &Path, musl_client: &Path) {
    for sub in [
        "bin",
        "lib/x86_64-linux-gnu",
        "lib64",
        "etc",
        "proc",
        "dev",
        "sys",
        "tmp",
    ] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    for (from, to) in [
        ("/bin/dash", "bin/sh"),
        ("/bin/sleep", "bin/sleep"),
        ("/usr/bin/getent", "bin/getent"),
        (
            "/lib/x86_64-linux-gnu/libc.so.6",
            "lib/x86_64-linux-gnu/libc.so.6",
        ),
        ("/lib64/ld-linux-x86-64.so.2", "lib64/ld-linux-x86-64.so.2"),
        // Debian's musl loader is the whole libc.
        ("/lib/ld-musl-x86_64.so.1", "lib/ld-musl-x86_64.so.1"),
    ] {
        std::fs::copy(from, dir.join(to)).unwrap_or_else(|e| panic!("copying {from}: {e}"));
    }
    std::fs::copy(musl_client, dir.join("bin/lookup-musl")).unwrap();
    std::fs::write(dir.join("etc/nsswitch.conf"), "hosts: files\n").unwrap();
    std::fs::write(
        dir.join("etc/hosts"),
        format!("127.0.0.1 localhost\n10.98.7.6 {NAME}\n"),
    )
    .unwrap();
}

/// What each container runs: getaddrinfo through its glibc copy and its musl, three times a second.
const LOOP: &str = "while :; do getent ahostsv4 svc.runtime.test >/dev/null; /bin/lookup-musl svc.runtime.test >/dev/null; sleep 0.3; done";

/// containerd started here (own root, state, socket; CRI plugin off), killed on drop with
/// every container it ran and the cgroups they made.
struct Containerd {
    daemon: Child,
    dir: PathBuf,
    containers: Vec<String>,
}

impl Containerd {
    fn start(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let config = dir.join("containerd.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{0}/root\"\nstate = \"{0}/state\"\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
                 [grpc]\n  address = \"{0}/containerd.sock\"\n",
                dir.display()
            ),
        )
        .unwrap();
        let daemon = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("containerd.log")).unwrap())
            .spawn()
            .expect("starting containerd (Debian containerd; `cargo xtask setup --for-tests` installs it)");
        let this = Containerd {
            daemon,
            dir: dir.to_path_buf(),
            containers: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while this
            .ctr(&["version"])
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            assert!(
                Instant::now() < deadline,
                "containerd did not answer within 30 s: {}",
                std::fs::read_to_string(dir.join("containerd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        this
    }

    fn ctr(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(self.dir.join("containerd.sock"))
            .args(["--namespace", "k8s.io"])
            .args(args);
        cmd
    }

    /// Runs a pod's container in `kubepods/besteffort/pod<UID>/<ID>` with the CRI annotations.
    fn run_in_pod(&mut self, id: &str, rootfs: &Path, pod: &str, container: &str) {
        let cgroup = format!("kubepods/besteffort/pod{POD_UID}/{id}");
        let annotations = [
            format!("io.kubernetes.pod.name={pod}"),
            "io.kubernetes.pod.namespace=shop".to_string(),
            format!("io.kubernetes.container.name={container}"),
            format!("io.kubernetes.pod.uid={POD_UID}"),
            "io.kubernetes.cri.container-type=container".to_string(),
        ];
        let mut cmd = self.ctr(&["run", "--detach", "--rootfs", "--cgroup", &cgroup]);
        for a in &annotations {
            cmd.args(["--annotation", a]);
        }
        cmd.arg(rootfs).arg(id).args(["/bin/sh", "-c", LOOP]);
        self.containers.push(id.to_string());
        run_ok(&mut cmd);
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        for id in &self.containers {
            let _ = self
                .ctr(&["task", "kill", "--signal", "SIGKILL", id])
                .output();
        }
        for id in &self.containers {
            let deadline = Instant::now() + Duration::from_secs(10);
            while self
                .ctr(&["task", "delete", id])
                .output()
                .is_ok_and(|o| !o.status.success())
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = self.ctr(&["container", "delete", id]).output();
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
        // The pod's cgroups, in every hierarchy (runc removed the containers' own).
        // The pod's cgroups in every hierarchy (`/sys/fs/cgroup` itself on a v2-only node);
        // runc removed the containers' own.
        let root = PathBuf::from("/sys/fs/cgroup");
        let hierarchies = std::fs::read_dir(&root)
            .map(|d| d.flatten().map(|e| e.path()).collect::<Vec<_>>())
            .unwrap_or_default();
        for h in std::iter::once(root).chain(hierarchies) {
            for d in [
                format!("kubepods/besteffort/pod{POD_UID}"),
                "kubepods/besteffort".into(),
                "kubepods".into(),
            ] {
                let _ = std::fs::remove_dir(h.join(d));
            }
        }
    }
}

/// A podman container (cgroupfs manager, file events, its own storage under the scratch dir, no
/// network), removed on drop.
struct Podman {
    dir: PathBuf,
    name: String,
    id: String,
}

impl Podman {
    fn command(dir: &Path) -> Command {
        let mut cmd = Command::new("podman");
        cmd.arg("--root")
            .arg(dir.join("storage"))
            .arg("--runroot")
            .arg(dir.join("run"))
            .arg("--tmpdir")
            .arg(dir.join("tmp"))
            .args([
                "--storage-driver",
                "vfs",
                "--cgroup-manager",
                "cgroupfs",
                "--events-backend",
                "file",
            ]);
        cmd
    }

    fn run(dir: &Path, name: &str, rootfs: &Path) -> Self {
        // The limits podman asks for by default are above this machine's hard limits (no
        // CAP_SYS_RESOURCE here): ask for low ones.
        let out = run_ok(
            Self::command(dir)
                // The rootfs's own /etc/hosts, which names what the loop looks up.
                .args([
                    "run",
                    "--detach",
                    "--network",
                    "none",
                    "--no-hosts",
                    "--name",
                    name,
                ])
                .args([
                    "--ulimit",
                    "nofile=1024:1024",
                    "--ulimit",
                    "nproc=4096:4096",
                ])
                .arg("--rootfs")
                .arg(rootfs)
                .args(["/bin/sh", "-c", LOOP]),
        );
        Podman {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            id: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        }
    }
}

impl Drop for Podman {
    fn drop(&mut self) {
        let _ = Self::command(&self.dir)
            .args(["rm", "--force", "--time", "0", &self.name])
            .output();
    }
}

/// getaddrinfo events made in container `id`.
fn calls_in<'a>(events: &'a [Value], id: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "getaddrinfo" && e["process"]["container"]["id"] == id)
        .collect()
}

/// Whether the header shows a good getaddrinfo uprobe on `libc` inside some process's root.
fn probed_in_a_container_root(header: &Value, libc: &str) -> bool {
    header["hooks"].as_array().unwrap().iter().any(|h| {
        let h = h.as_str().unwrap_or_default();
        h.contains("uprobe getaddrinfo@/proc/") && h.contains("/root/") && h.ends_with(libc)
    })
}

#[test]
fn containerd_and_podman_containers_are_attributed_and_their_own_libcs_probed() {
    require_root();
    let scratch = ScratchDir::new("runtimes");
    let musl_client = build_lookup_addrs(&scratch.path.join("musl"), false).unwrap();
    let rootfs = |name: &str| {
        let dir = scratch.path.join(name);
        build_rootfs(&dir, &musl_client);
        dir
    };
    let (early_rootfs, late_rootfs, podman_rootfs) = (
        rootfs("rootfs-early"),
        rootfs("rootfs-late"),
        rootfs("rootfs-podman"),
    );
    let mut containerd = Containerd::start(&scratch.path.join("containerd"));
    let (early, late) = (container_id(0xa1), container_id(0xb2));
    containerd.run_in_pod(&early, &early_rootfs, "web-0", "app");
    let podman = Podman::run(&scratch.path.join("podman"), "plain-web", &podman_rootfs);
    std::thread::sleep(Duration::from_millis(800));

    // The pod: the container running before the trace and one started during it, each with its
    // own libc copies (other inodes than the host's and each other's). The waits leave each
    // loop several rounds after its libcs are attached (a call made while the tracer is still
    // attaching at exec is missed; the next is not).
    let trace = BackgroundTrace::start("runtimes-pod", &["--pod", "shop/web-0"]).unwrap();
    containerd.run_in_pod(&late, &late_rootfs, "web-0", "sidecar");
    std::thread::sleep(Duration::from_millis(4000));
    let (events, stderr) = trace.stop().unwrap();
    let header = &events[0];
    // The early container's shell maps its glibc copy: probed at start. (Its musl is mapped only
    // while a short-lived client runs: probed at start or at the client's exec; the events below
    // show it was.)
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    assert!(
        probed_in_a_container_root(header, libc),
        "no uprobe on the early container's own {libc}: {header}"
    );
    assert!(
        stderr.contains(" getaddrinfo, pid "),
        "the late container's libcs were not attached: {stderr}"
    );
    for (id, name) in [(&early, "app"), (&late, "sidecar")] {
        let calls = calls_in(&events, id);
        for comm in ["getent", "lookup-musl"] {
            assert!(
                calls.iter().any(|e| e["comm"] == comm),
                "no getaddrinfo from {comm} in container {name}: {stderr}"
            );
        }
        let c = &calls[0]["process"]["container"];
        assert_eq!(c["runtime"], "containerd", "{c}");
        assert_eq!(c["pod_namespace"], "shop", "{c}");
        assert_eq!(c["pod_name"], "web-0", "{c}");
        assert_eq!(c["pod_uid"], POD_UID, "{c}");
        assert_eq!(c["qos"], "besteffort", "{c}");
        assert_eq!(c["name"], name, "{c}");
    }
    assert!(
        calls_in(&events, &podman.id).is_empty(),
        "--pod let the podman container through"
    );

    // One container by name, and the podman one by its ID's prefix (as `podman ps` shows it).
    let trace = BackgroundTrace::start("runtimes-container", &["--container", "sidecar"]).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let (events, _) = trace.stop().unwrap();
    assert!(
        !calls_in(&events, &late).is_empty(),
        "--container sidecar selected nothing"
    );
    assert!(
        calls_in(&events, &early).is_empty(),
        "--container sidecar let app through"
    );
    let trace =
        BackgroundTrace::start("runtimes-podman", &["--container", &podman.id[..12]]).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let (events, stderr) = trace.stop().unwrap();
    let calls = calls_in(&events, &podman.id);
    assert!(
        calls.iter().any(|e| e["comm"] == "getent")
            && calls.iter().any(|e| e["comm"] == "lookup-musl"),
        "no getaddrinfo from the podman container {}: {stderr}\n{:?}",
        podman.id,
        events
            .iter()
            .map(|e| (&e["kind"], &e["comm"], &e["process"]["container"]))
            .collect::<Vec<_>>()
    );
    let c = &calls[0]["process"]["container"];
    assert_eq!(c["runtime"], "podman", "{c}");
    assert_eq!(c["name"], "plain-web", "{c}");
    assert!(c.get("pod_name").is_none(), "{c}");
    assert!(calls_in(&events, &early).is_empty());
    drop(podman);
    drop(containerd);
}
