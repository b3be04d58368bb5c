//! `guest_soak`: the tracer tracing the whole node under continuous mixed load for a while, made
//! for the VM lane's guest (`cargo xtask soak --vm`, and the short one `cargo xtask test` runs).
//!
//! ```text
//! guest_soak --minutes M [--round-secs S] [--fresh-every N] --out FILE
//! ```
//!
//! It starts `nodeip-trace trace --format json` (the guest's static release binary, stdout to a
//! pipe it counts) and, in a scratch namespace pair (a veth pair with no link to the host), runs
//! a round of load every S seconds at most (default 2: TCG runs everything about 15x slower than
//! the host) for M minutes:
//!
//! - `load_gen gai 100` and `load_gen netlink 200`: counted exactly (every call an event;
//!   `load_gen`'s route messages only: glibc's getaddrinfo dumps addresses too);
//! - `ip -batch` of 100 route gets, an address and a route dump;
//! - one lookup by every resolver the lane has a client for: glibc (`getent ahosts`), musl
//!   (dynamic and static `lookup_addrs`), Go's own resolver (the oldest and the newest
//!   toolchain's pure builds of `lookup_ip`), each of a name of its own in the namespace's hosts
//!   file, counted exactly;
//! - every N rounds (default 10) fresh copies of the Go clients (new inodes: their first exec is
//!   held until probed), the copies before them deleted;
//! - process churn: 20 short processes from a shell loop;
//! - a container start as the kernel sees one: a new pod's and container's cgroups (named as
//!   containerd's under kubelet's systemd driver), a process moved into them that unshares its
//!   PID, mount, UTS and IPC namespaces and looks a name up with glibc, the cgroups removed after
//!   it; counted exactly (an event of that name attributed to that container);
//!
//! Every 5 s it samples the tracer's RSS (and of it anonymous, file and shared memory), open fds
//! (and how many are probe links), threads, and the processes still running a deleted copy; it
//! keeps the tracer's lines on attaching and detaching probes with their times. At the end it
//! stops the load, samples once more, stops the tracer with SIGINT and writes what it made, what
//! the trace saw, the samples, the probe lines and the tracer's summary line as JSON to FILE
//! (`cargo xtask` judges them).
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use nodeip_trace_tests::go::{go_toolchains, GoBuild};
use nodeip_trace_tests::{tool, Netns};
use serde_json::json;

/// The names each resolver looks up (in the namespace's hosts file), by resolver as the trace's
/// events name it.
const LOOKUPS: [(&str, &str); 3] = [
    ("glibc", "soak-glibc"),
    ("musl", "soak-musl"),
    ("go", "soak-go"),
];

/// How often the tracer is sampled.
const SAMPLE_PERIOD: Duration = Duration::from_secs(5);

/// The name a round's container looks up (glibc), and how its lookups are keyed in the report.
const CONTAINER_NAME: &str = "soak-container";
const CONTAINER_LOOKUPS: &str = "glibc in a new container";

/// The start of a container ID of the soak's (64 hex digits with the round number after it).
const CONTAINER_ID_PREFIX: &str = "5eed";

/// Short processes each round starts from a shell loop.
const CHURN: u32 = 20;

/// A round's `load_gen` getaddrinfo calls, `load_gen` route requests (each answered: two
/// messages) and `ip -batch` route gets: under TCG a round of them takes about 3 s.
const GAI_CALLS: u64 = 100;
const NETLINK_CALLS: u64 = 200;
const ROUTE_GETS: u64 = 100;

/// Calls the load made, by kind.
#[derive(Default)]
struct Made {
    rounds: AtomicU64,
    gai: AtomicU64,
    netlink_messages: AtomicU64,
    route_gets: AtomicU64,
    dumps: AtomicU64,
    glibc: AtomicU64,
    musl: AtomicU64,
    go: AtomicU64,
    fresh_programs: AtomicU64,
    processes: AtomicU64,
    containers: AtomicU64,
}

impl Made {
    fn lookups(&self, resolver: &str) -> &AtomicU64 {
        match resolver {
            "glibc" => &self.glibc,
            "musl" => &self.musl,
            _ => &self.go,
        }
    }
}

/// What the tracer's JSON stream said about the load.
#[derive(Default, Debug)]
struct Seen {
    gai: u64,
    netlink_messages: u64,
    lookups: [u64; 3],
    /// Lookups of [`CONTAINER_NAME`] attributed to a container of the soak's.
    container_lookups: u64,
    exec_holds: u64,
    lines: u64,
    ends_with_summary: bool,
}

/// The load's programs and files.
struct Load {
    ns: String,
    load_gen: PathBuf,
    batch: PathBuf,
    musl: Vec<PathBuf>,
    go: Vec<PathBuf>,
    /// Where fresh copies of the Go clients go.
    copies: PathBuf,
    fresh_every: u64,
    /// The cgroup2 hierarchy's root (none: no container starts).
    cgroup_root: Option<PathBuf>,
}

impl Load {
    /// `ip netns exec NS PROGRAM ARGS…` to completion, stdout dropped; fails on a failure.
    fn in_ns(&self, program: &Path, args: &[&str]) -> Result<()> {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.ns]).arg(program);
        run_quietly(command, program, args)
    }
}

/// Runs `command` (`program` and its `args` at its end) to completion, stdout dropped; fails on
/// a failure.
fn run_quietly(mut command: Command, program: &Path, args: &[&str]) -> Result<()> {
    let out = command
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("starting {}", program.display()))?;
    if !out.status.success() {
        bail!(
            "{} {args:?} failed ({}): {}",
            program.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Load {
    /// The current copies of the Go clients: fresh ones every `fresh_every` rounds.
    fn go_copies(&self, round: u64, made: &Made) -> Result<Vec<PathBuf>> {
        let generation = round / self.fresh_every;
        let copy = |n: usize, g: u64| self.copies.join(format!("go{n}-{g}"));
        let copies: Vec<PathBuf> = (0..self.go.len()).map(|n| copy(n, generation)).collect();
        if round.is_multiple_of(self.fresh_every) {
            for (n, built) in self.go.iter().enumerate() {
                if generation > 0 {
                    let _ = std::fs::remove_file(copy(n, generation - 1));
                }
                // A new inode even where an earlier run left the file.
                let _ = std::fs::remove_file(&copies[n]);
                std::fs::copy(built, &copies[n])
                    .with_context(|| format!("copying {}", built.display()))?;
                made.fresh_programs.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(copies)
    }

    /// Starts round `round`'s container under `root` (the cgroup2 hierarchy), after removing
    /// the cgroups of the round before's: a pod lives on a while after its first process, so
    /// its events are attributed however late the trace reads them (a cgroup deleted before
    /// that is a limit of the trace, not of this load).
    fn start_container(&self, root: &Path, round: u64) -> Result<()> {
        if let Some(before) = round.checked_sub(1) {
            remove_container(root, before)?;
        }
        let (_, scope) = container_cgroups(root, round);
        std::fs::create_dir_all(&scope)
            .with_context(|| format!("creating the cgroup {}", scope.display()))?;
        let script = format!(
            "echo $$ > {}/cgroup.procs && exec unshare -f -p -m -u -i ip netns exec {} getent ahosts {CONTAINER_NAME}",
            scope.display(),
            self.ns
        );
        // Into the cgroup before the namespace: `ip netns exec` mounts a /sys of its own.
        let sh = Path::new("sh");
        run_quietly(Command::new(sh), sh, &["-c", &script])
    }

    /// One round of the load; adds what it made to `made`.
    fn round(&self, round: u64, made: &Made) -> Result<()> {
        let gen = &self.load_gen;
        self.in_ns(gen, &["gai", &GAI_CALLS.to_string()])?;
        made.gai.fetch_add(GAI_CALLS, Ordering::Relaxed);
        self.in_ns(gen, &["netlink", &NETLINK_CALLS.to_string()])?;
        made.netlink_messages
            .fetch_add(2 * NETLINK_CALLS, Ordering::Relaxed);
        let ip = Path::new("/usr/sbin/ip");
        self.in_ns(ip, &["-batch", &self.batch.to_string_lossy()])?;
        made.route_gets.fetch_add(ROUTE_GETS, Ordering::Relaxed);
        self.in_ns(ip, &["addr", "show"])?;
        self.in_ns(ip, &["route", "show", "table", "all"])?;
        made.dumps.fetch_add(2, Ordering::Relaxed);
        let name = |resolver: &str| LOOKUPS.iter().find(|(r, _)| *r == resolver).unwrap().1;
        self.in_ns(Path::new("getent"), &["ahosts", name("glibc")])?;
        made.glibc.fetch_add(1, Ordering::Relaxed);
        for client in &self.musl {
            self.in_ns(client, &[name("musl")])?;
            made.musl.fetch_add(1, Ordering::Relaxed);
        }
        for copy in self.go_copies(round, made)? {
            self.in_ns(&copy, &[name("go")])?;
            made.go.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(root) = &self.cgroup_root {
            self.start_container(root, round)?;
            made.containers.fetch_add(1, Ordering::Relaxed);
        }
        let churn = format!("i=0; while [ $i -lt {CHURN} ]; do /bin/true; i=$((i+1)); done");
        self.in_ns(Path::new("sh"), &["-c", &churn])?;
        made.processes
            .fetch_add(u64::from(CHURN), Ordering::Relaxed);
        made.rounds.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Lookups by key: each resolver's (counts in [`LOOKUPS`]' order), and the containers' (when
/// the load starts containers: `containers` is not 0).
fn lookups(
    by_resolver: impl IntoIterator<Item = u64>,
    containers: u64,
) -> serde_json::Map<String, serde_json::Value> {
    let mut map: serde_json::Map<_, _> = LOOKUPS
        .iter()
        .zip(by_resolver)
        .map(|((r, _), n)| (r.to_string(), json!(n)))
        .collect();
    if containers > 0 {
        map.insert(CONTAINER_LOOKUPS.to_string(), json!(containers));
    }
    map
}

/// Round `round`'s pod and container cgroups under `root`, named as containerd's under
/// kubelet's systemd cgroup driver.
fn container_cgroups(root: &Path, round: u64) -> (PathBuf, PathBuf) {
    let pod = root.join(format!(
        "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod5eed0000_0000_4000_8000_{round:012x}.slice"
    ));
    let scope = pod.join(format!(
        "cri-containerd-{CONTAINER_ID_PREFIX}{round:060x}.scope"
    ));
    (pod, scope)
}

/// Removes round `round`'s container cgroups (they go once the kernel has seen their last task
/// leave, a moment after it was reaped); none there is no error.
fn remove_container(root: &Path, round: u64) -> Result<()> {
    let (pod, scope) = container_cgroups(root, round);
    for dir in [&scope, &pod] {
        for attempt in 0.. {
            match std::fs::remove_dir(dir) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) if attempt == 50 => {
                    return Err(e).with_context(|| format!("removing {}", dir.display()))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }
    Ok(())
}

/// Removes the kubepods slices the containers' cgroups were made in (when empty) at the end.
struct KubepodsSlices(Option<PathBuf>, Arc<Made>);

impl Drop for KubepodsSlices {
    fn drop(&mut self) {
        if let Some(root) = &self.0 {
            // The last rounds' containers (the untraced first round's is round 0's).
            let rounds = self.1.rounds.load(Ordering::Relaxed);
            for round in [0, rounds.saturating_sub(1), rounds] {
                let _ = remove_container(root, round);
            }
            for dir in ["kubepods.slice/kubepods-besteffort.slice", "kubepods.slice"] {
                let _ = std::fs::remove_dir(root.join(dir));
            }
        }
    }
}

/// Counts the load's events in the tracer's JSON lines.
fn count_stream(stdout: std::process::ChildStdout) -> Seen {
    let mut seen = Seen::default();
    let mut last = String::new();
    for line in std::io::BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        seen.lines += 1;
        let interesting = line.contains("\"load_gen\"")
            || line.contains("\"soak-")
            || line.contains("\"exec_hold\"");
        if interesting {
            if let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) {
                match (e["kind"].as_str(), e["comm"].as_str()) {
                    (Some("getaddrinfo"), Some("load_gen")) => seen.gai += 1,
                    // Its route requests and their answers (its getaddrinfo calls' address
                    // dumps are glibc's).
                    (Some("netlink"), Some("load_gen"))
                        if ["RTM_GETROUTE", "RTM_NEWROUTE"]
                            .iter()
                            .any(|t| e["messages"][0]["type"] == *t) =>
                    {
                        seen.netlink_messages += 1
                    }
                    (Some("exec_hold"), _) => seen.exec_holds += 1,
                    (Some("getaddrinfo"), _) if e["node"] == CONTAINER_NAME => {
                        let container = &e["process"]["container"];
                        if container["runtime"] == "containerd"
                            && container["id"]
                                .as_str()
                                .is_some_and(|id| id.starts_with(CONTAINER_ID_PREFIX))
                        {
                            seen.container_lookups += 1;
                        }
                    }
                    (Some("getaddrinfo"), _) => {
                        let resolver = nodeip_trace_tests::clients::event_resolver(&e);
                        if let Some(i) = LOOKUPS
                            .iter()
                            .position(|(r, n)| *r == resolver && e["node"] == *n)
                        {
                            seen.lookups[i] += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
        last = line;
    }
    seen.ends_with_summary = last.contains("\"summary\"");
    seen
}

/// The tracer's RSS (KiB), open fds and how many of them are probe links (`perf_event`,
/// `bpf_link`) now, with the fresh programs made so far.
fn sample(pid: u32, at: Duration, fresh: u64) -> serde_json::Value {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |field: &str| -> u64 {
        status_field(&status, field)
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let (mut fds, mut probe_fds) = (0, 0);
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
    {
        fds += 1;
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        let target = target.to_string_lossy();
        if target.contains("perf_event") || target.contains("bpf_link") {
            probe_fds += 1;
        }
    }
    json!({
        "at_secs": at.as_secs_f64(), "rss_kib": kib("VmRSS"), "anon_kib": kib("RssAnon"),
        "file_kib": kib("RssFile"), "shmem_kib": kib("RssShmem"), "fds": fds, "probe_fds": probe_fds,
        "fresh": fresh, "threads": kib("Threads"),
        "running_deleted": running_deleted_copies(),
    })
}

/// The value of `field` in a `/proc/PID/status` text (`Field:\tvalue`), trimmed.
fn status_field<'a>(status: &'a str, field: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// The processes running a deleted copy of the soak's programs (`/proc/PID/exe` names it
/// `(deleted)`), each as `PID COMM STATE EXE`: what keeps a deleted program's probes attached.
fn running_deleted_copies() -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        // Not a process's directory: no `exe` link to read.
        let pid = entry.file_name().to_string_lossy().into_owned();
        let exe = std::fs::read_link(entry.path().join("exe")).unwrap_or_default();
        let exe = exe.to_string_lossy();
        if !(exe.contains("guest-soak") && exe.ends_with("(deleted)")) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let field = |name: &str| status_field(&status, name).unwrap_or_default();
        found.push(format!(
            "{pid} {} {} ppid {} {exe}",
            field("Name"),
            field("State"),
            field("PPid")
        ));
    }
    found
}

/// The soft limit on `pid`'s open files (`Max open files` in `/proc/PID/limits`; 0 when
/// unreadable or unlimited).
fn open_files_limit(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The tracer's user + system CPU seconds (`/proc/PID/stat`), before it is reaped.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat; `after` starts at field 3.
    (ticks(11) + ticks(12)) / hz
}

struct Args {
    minutes: f64,
    round: Duration,
    fresh_every: u64,
    out: PathBuf,
}

fn args() -> Result<Args> {
    let mut args = Args {
        minutes: 0.0,
        round: Duration::from_secs(2),
        fresh_every: 10,
        out: PathBuf::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--minutes" => args.minutes = value.parse()?,
            "--round-secs" => args.round = Duration::from_secs_f64(value.parse()?),
            "--fresh-every" => args.fresh_every = value.parse::<u64>()?.max(1),
            "--out" => args.out = value.into(),
            other => bail!("unknown flag {other}"),
        }
    }
    if args.minutes <= 0.0 || args.out.as_os_str().is_empty() {
        bail!("usage: guest_soak --minutes M [--round-secs S] [--fresh-every N] --out FILE");
    }
    Ok(args)
}

/// The resolver clients the guest ships (`NODEIP_TEST_CLIENTS_PREBUILT`): both musl builds, the
/// oldest and the newest toolchain's pure Go build.
fn clients() -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let musl = vec![
        nodeip_trace_tests::musl::lookup_addrs(false)?,
        nodeip_trace_tests::musl::lookup_addrs(true)?,
    ];
    let toolchains = go_toolchains();
    let (Some(oldest), Some(newest)) = (toolchains.first(), toolchains.last()) else {
        bail!("no Go clients (run `prebuild_clients` first)");
    };
    let how = GoBuild {
        cgo: false,
        stripped: true,
        static_musl: false,
    };
    let mut go = vec![oldest.client("lookup_ip.go", how)?];
    if toolchains.len() > 1 {
        go.push(newest.client("lookup_ip.go", how)?);
    }
    Ok((musl, go))
}

fn main() -> Result<()> {
    let args = args()?;
    let dir = std::env::temp_dir().join(format!("guest-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ns = Netns::new("soak");
    let peer = Netns::new("soakp");
    ns.veth_to("veth0", &peer, "veth0");
    ns.ip(&["addr", "add", "10.77.0.1/16", "dev", "veth0"]);
    let hosts: String = LOOKUPS
        .iter()
        .enumerate()
        .map(|(i, (_, name))| format!("10.77.1.{} {name}\nfd00::{} {name}\n", i + 1, i + 1))
        .chain([format!(
            "10.77.2.1 {CONTAINER_NAME}\nfd00::2:1 {CONTAINER_NAME}\n"
        )])
        .collect();
    ns.etc_file(
        "hosts",
        &format!("127.0.0.1 localhost\n::1 localhost\n{hosts}"),
    );
    let batch = dir.join("route-gets.batch");
    let lines: String = (0..ROUTE_GETS)
        .map(|i| format!("route get 10.77.{}.{}\n", i / 100, i % 100 + 1))
        .collect();
    std::fs::write(&batch, lines)?;
    let (musl, go) = clients()?;
    let exe = std::env::current_exe()?;
    let load = Load {
        ns: ns.name.clone(),
        load_gen: exe.with_file_name("load_gen"),
        batch,
        musl,
        go,
        copies: dir.clone(),
        fresh_every: args.fresh_every,
        cgroup_root: nodeip_trace_tests::cgroup2_mount_point(),
    };
    let cgroup_root = load.cgroup_root.clone();
    // One round untraced first: a client that cannot run here fails the soak before it starts.
    load.round(0, &Made::default())?;

    let ready = dir.join("ready");
    let spawned = Instant::now();
    let mut tracer = Command::new(tool())
        .args(["trace", "--format", "json", "--ready-file"])
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nodeip-trace")?;
    let pid = tracer.id();
    let open_files_limit = open_files_limit(pid);
    let stdout = tracer.stdout.take().context("tracer stdout")?;
    let counter = std::thread::spawn(move || count_stream(stdout));
    let stderr_text = Arc::new(Mutex::new(String::new()));
    // The tracer's lines on attaching and detaching probes, with their time since its start.
    let probe_log = Arc::new(Mutex::new(Vec::<serde_json::Value>::new()));
    let stderr_reader = {
        let stderr = tracer.stderr.take().context("tracer stderr")?;
        let text = stderr_text.clone();
        let probe_log = probe_log.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains("uprobes of") || line.contains("probes attached to") {
                    probe_log
                        .lock()
                        .unwrap()
                        .push(json!([spawned.elapsed().as_secs_f64(), line]));
                }
                let mut t = text.lock().unwrap();
                t.push_str(&line);
                t.push('\n');
            }
        })
    };
    while !ready.exists() {
        if let Some(status) = tracer.try_wait()? {
            bail!(
                "nodeip-trace exited ({status}) before attaching: {}",
                stderr_text.lock().unwrap()
            );
        }
        if spawned.elapsed() > Duration::from_secs(180) {
            bail!("nodeip-trace did not attach within 180 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "guest_soak: tracer attached in {:.1} s; {} minutes of load, a round every {:.1} s at most",
        spawned.elapsed().as_secs_f64(),
        args.minutes,
        args.round.as_secs_f64()
    );

    let duration = Duration::from_secs_f64(args.minutes * 60.0);
    let t0 = Instant::now();
    let made = Arc::new(Made::default());
    let _containers = KubepodsSlices(cgroup_root, made.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let (made, stop, period) = (made.clone(), stop.clone(), args.round);
        std::thread::spawn(move || -> Result<()> {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                load.round(round, &made)?;
                round += 1;
                std::thread::sleep(period.saturating_sub(started.elapsed()));
            }
            Ok(())
        })
    };
    let fresh = || made.fresh_programs.load(Ordering::Relaxed);
    let mut samples = vec![sample(pid, Duration::ZERO, 0)];
    let mut last_print = Instant::now();
    while t0.elapsed() < duration && !loader.is_finished() {
        std::thread::sleep(SAMPLE_PERIOD);
        let s = sample(pid, t0.elapsed(), fresh());
        if last_print.elapsed() >= Duration::from_secs(60) {
            println!(
                "guest_soak: {:>5.0} s: tracer RSS {} MiB, {} fds ({} probe links), {} threads, {} rounds",
                t0.elapsed().as_secs_f64(),
                s["rss_kib"].as_u64().unwrap_or(0) >> 10,
                s["fds"],
                s["probe_fds"],
                s["threads"],
                made.rounds.load(Ordering::Relaxed)
            );
            last_print = Instant::now();
        }
        samples.push(s);
    }
    let load_secs = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let load_error = match loader.join() {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(format!("{e:#}")),
        Err(_) => Some("the load thread panicked".to_string()),
    };
    std::thread::sleep(Duration::from_millis(500));
    samples.push(sample(pid, t0.elapsed(), fresh()));
    let cpu = cpu_secs(pid);
    let own_cpu = cpu_secs(std::process::id());
    // SAFETY: kill with our child's pid.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let stopping = Instant::now();
    let status = tracer.wait()?;
    let stop_secs = stopping.elapsed().as_secs_f64();
    let seen = counter.join().expect("counter thread");
    stderr_reader.join().expect("stderr thread");
    let stderr = stderr_text.lock().unwrap().clone();
    let summary = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("nodeip-trace: ") && l.contains(" lost"))
        .unwrap_or_default();
    let made = &*made;
    let load = |k: &AtomicU64| k.load(Ordering::Relaxed);
    let report = json!({
        "minutes": args.minutes,
        "round_secs": args.round.as_secs_f64(),
        "load_secs": load_secs,
        "load_error": load_error,
        "made": {
            "rounds": load(&made.rounds),
            "gai": load(&made.gai),
            "netlink_messages": load(&made.netlink_messages),
            "route_gets": load(&made.route_gets),
            "dumps": load(&made.dumps),
            "lookups": lookups(LOOKUPS.iter().map(|(r, _)| load(made.lookups(r))), load(&made.containers)),
            "fresh_programs": load(&made.fresh_programs),
            "processes": load(&made.processes),
        },
        "seen": {
            "gai": seen.gai,
            "netlink_messages": seen.netlink_messages,
            "lookups": lookups(seen.lookups, seen.container_lookups),
            "exec_holds": seen.exec_holds,
            "lines": seen.lines,
            "ends_with_summary": seen.ends_with_summary,
        },
        "samples": samples,
        "probe_log": std::mem::take(&mut *probe_log.lock().unwrap()),
        "tracer": {
            "exit": status.code().unwrap_or(-1),
            "cpu_secs": cpu,
            "stop_secs": stop_secs,
            "guest_soak_cpu_secs": own_cpu,
            "open_files_limit": open_files_limit,
            "summary": summary,
            "stderr_tail": stderr.lines().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n"),
        },
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "guest_soak: {load_secs:.0} s of load, {} rounds; tracer: {summary}; stopped in {stop_secs:.1} s",
        load(&made.rounds)
    );
    let _ = std::fs::remove_dir_all(&dir);
    drop(peer);
    Ok(())
}
