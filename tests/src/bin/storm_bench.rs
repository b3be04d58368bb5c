//! `storm_bench`: the netlink storm of BENCHMARKS.md measured side by side in whatever kernel it
//! runs in — made for the VM lane's guest (`cargo xtask bench --vm`), where nlmon exists.
//!
//! ```text
//! storm_bench [--lines N] [--rounds R] [--out FILE]
//! ```
//!
//! In a scratch namespace (a veth pair with no link to the host, removed at exit) it runs
//! `ip -n NS -batch FILE` of N `route get 10.9.0.X` lines (default 20,000), R rounds (default
//! 3), each round in a rotated order of:
//!
//! - untraced;
//! - `nlmon0` (made inside the namespace: a netlink tap sees only its own namespace) with
//!   `tcpdump -w` on it — what people use instead of this tool;
//! - `nodeip-trace trace --comm ip --pcap F` (stdout to /dev/null);
//! - `nodeip-trace trace --comm ip --format json -o F` (stdout to /dev/null);
//! - `nodeip-trace trace --comm no-such-comm --pcap F`: every record filtered in the kernel, so
//!   what the hooks alone cost (the storm's ratio decomposed);
//! - `nodeip-trace trace --comm ip --pcap F --ring-buffer-mib 64` stopped (SIGSTOP) through the
//!   storm: the hooks and the records they make, without the consumer reading beside `ip`.
//!
//! For each run: the storm's wall time, the capturer's CPU from just before the storm until it
//! has caught up (`/proc/PID/stat`), and what it captured and lost. Then `--pcap` against
//! nlmon + tcpdump round by round, and two more tracer runs (records made, every record
//! filtered) with `kernel.bpf_stats_enabled` on, for the time inside the tracer's programs. Prints a Markdown table
//! (and writes it to `--out`). A kernel without nlmon gets that row as "not in this kernel".
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use nodeip_trace_tests::{tool, Netns};

/// One way of running the storm.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Untraced,
    NlmonTcpdump,
    TracePcap,
    TraceJson,
    TraceFiltered,
    TraceStopped,
}

impl Mode {
    const ALL: [Mode; 6] = [
        Mode::Untraced,
        Mode::NlmonTcpdump,
        Mode::TracePcap,
        Mode::TraceJson,
        Mode::TraceFiltered,
        Mode::TraceStopped,
    ];

    fn label(self) -> &'static str {
        match self {
            Mode::Untraced => "untraced",
            Mode::NlmonTcpdump => "nlmon0 + `tcpdump -w` in the namespace",
            Mode::TracePcap => "`nodeip-trace trace --comm ip --pcap F`",
            Mode::TraceJson => "`nodeip-trace trace --comm ip --format json -o F`",
            Mode::TraceFiltered => {
                "`nodeip-trace trace --comm no-such-comm --pcap F`: every record filtered in \
                 the kernel (the hooks alone)"
            }
            Mode::TraceStopped => {
                "`nodeip-trace trace --comm ip --pcap F --ring-buffer-mib 64` stopped (SIGSTOP) \
                 through the storm: the hooks and records without the consumer"
            }
        }
    }
}

/// One run's figures.
struct Run {
    storm: Duration,
    /// The capturer's CPU over the storm and its catch-up.
    cpu: Option<Duration>,
    /// What it says it captured and lost.
    captured: String,
    /// The tracer's eBPF programs' run time through the storm, in runs measured with
    /// `kernel.bpf_stats_enabled` (see [`ProgramStats`]).
    programs: Option<Duration>,
    /// The capturer's threads over the same span, by thread name.
    threads: ThreadUse,
}

/// What a process's threads did, by thread name (threads of one name summed): user and system
/// clock ticks, and context switches (a wake-up is one).
#[derive(Default, Clone)]
struct ThreadUse(std::collections::BTreeMap<String, [u64; 3]>);

impl ThreadUse {
    /// `pid`'s threads now (`/proc/PID/task/*/stat` and `status`).
    fn of(pid: u32) -> ThreadUse {
        let mut by_name = std::collections::BTreeMap::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return ThreadUse(by_name);
        };
        for task in tasks.flatten() {
            let dir = task.path();
            let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
            let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
            let Some((name, [user, system])) = stat_ticks(&stat) else {
                continue;
            };
            let switches: u64 = status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
                .sum();
            let entry = by_name.entry(name.to_string()).or_insert([0u64; 3]);
            for (sum, add) in entry.iter_mut().zip([user, system, switches]) {
                *sum += add;
            }
        }
        ThreadUse(by_name)
    }

    /// What happened from `before` to `self` (threads gone since count from zero).
    fn since(&self, before: &ThreadUse) -> ThreadUse {
        let mut diff = self.clone();
        for (name, now) in &mut diff.0 {
            let then = before.0.get(name).copied().unwrap_or_default();
            for (n, t) in now.iter_mut().zip(then) {
                *n = n.saturating_sub(t);
            }
        }
        diff
    }

    /// Sums `runs`' figures and divides by their number: per run, by thread name.
    fn mean(runs: &[&ThreadUse]) -> String {
        let mut total = std::collections::BTreeMap::<&str, [u64; 3]>::new();
        for run in runs {
            for (name, figures) in &run.0 {
                let entry = total.entry(name).or_default();
                for (sum, add) in entry.iter_mut().zip(figures) {
                    *sum += add;
                }
            }
        }
        let hz = ticks_per_second() as f64;
        let n = runs.len().max(1) as f64;
        total
            .iter()
            .map(|(name, [user, system, switches])| {
                format!(
                    "{name} user {:.3} s, system {:.3} s, {:.0} context switches",
                    *user as f64 / hz / n,
                    *system as f64 / hz / n,
                    *switches as f64 / n
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// A capturer running in the background: killed if the benchmark fails first.
struct Capturer {
    child: Child,
    /// Its stderr file.
    stderr: PathBuf,
}

/// How long a capturer may take to exit after SIGINT before it counts as hung.
const EXIT_LIMIT: Duration = Duration::from_secs(120);

impl Capturer {
    /// Stops it with SIGINT and returns its stderr. One that has not exited within
    /// [`EXIT_LIMIT`] is reported (every thread's state, wait channel, syscall and kernel stack,
    /// on stderr: the guest's console) and killed, and the benchmark fails.
    fn stop(mut self) -> Result<String> {
        let pid = self.child.id();
        // SAFETY: kill with our child's pid.
        unsafe { libc::kill(pid as i32, libc::SIGINT) };
        let deadline = Instant::now() + EXIT_LIMIT;
        while self.child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                eprintln!(
                    "storm_bench: the capturer (pid {pid}) did not exit within {} s of SIGINT; its threads:\n{}",
                    EXIT_LIMIT.as_secs(),
                    threads_of(pid)
                );
                eprintln!(
                    "storm_bench: its stderr:\n{}",
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
                bail!("the capturer hung on exit (its threads are printed above)");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(std::fs::read_to_string(&self.stderr).unwrap_or_default())
    }
}

/// Every thread of `pid`: its name, state, wait channel, system call and kernel stack.
fn threads_of(pid: u32) -> String {
    let mut out = String::new();
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap_or_default();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return "(gone)".into();
    };
    for task in tasks.flatten() {
        let dir = task.path();
        let state = read(dir.join("status"))
            .lines()
            .find(|l| l.starts_with("State:"))
            .unwrap_or_default()
            .to_string();
        out.push_str(&format!(
            "--- thread {} {} {state} wchan {} syscall {}\n{}",
            task.file_name().to_string_lossy(),
            read(dir.join("comm")).trim(),
            read(dir.join("wchan")).trim(),
            read(dir.join("syscall")).trim(),
            read(dir.join("stack"))
        ));
    }
    out
}

impl Drop for Capturer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Bench {
    ns: Netns,
    batch: PathBuf,
    work: PathBuf,
    lines: usize,
}

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// A `/proc/…/stat` line's command name and its user and system CPU in clock ticks.
fn stat_ticks(stat: &str) -> Option<(&str, [u64; 2])> {
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    // Fields after the command's closing parenthesis; utime and stime are the 14th and 15th.
    let fields: Vec<&str> = stat.get(close + 2..)?.split_whitespace().collect();
    let field = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some((&stat[open + 1..close], [field(11)?, field(12)?]))
}

/// Clock ticks per second (`/proc` CPU times are in them).
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// User plus system CPU of `pid` so far.
fn cpu_of(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, [user, system]) = stat_ticks(&stat)?;
    Some(Duration::from_millis(
        (user + system) * 1000 / ticks_per_second(),
    ))
}

/// `kernel.bpf_stats_enabled` switched on while it lives (the kernel then accounts each eBPF
/// program's run time, at two clock reads per run: only in runs of their own, never in the
/// table's rows), and set back when dropped.
struct ProgramStats {
    before: String,
}

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl ProgramStats {
    fn enable() -> Option<Self> {
        let before = std::fs::read_to_string(BPF_STATS).ok()?;
        std::fs::write(BPF_STATS, "1").ok()?;
        Some(ProgramStats { before })
    }
}

impl Drop for ProgramStats {
    fn drop(&mut self) {
        let _ = std::fs::write(BPF_STATS, self.before.trim());
    }
}

/// The run time so far of the eBPF programs `pid` holds (`run_time_ns` summed over the distinct
/// `prog_id`s of its fds in `/proc/PID/fdinfo`; it grows only while `bpf_stats_enabled` is 1).
fn program_time_of(pid: u32) -> Option<Duration> {
    let mut programs = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .ok()?
        .flatten()
    {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let field = |name: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
        };
        if let (Some(id), Some(ns)) = (field("prog_id:"), field("run_time_ns:")) {
            programs.insert(id, ns);
        }
    }
    (!programs.is_empty()).then(|| Duration::from_nanos(programs.values().sum()))
}

/// The storm decomposed inside the tracer's programs: one more `--pcap` run with records made
/// and one with every record filtered, under [`ProgramStats`], against the untraced median.
fn inside_programs(bench: &Bench, untraced: Duration) -> Result<String> {
    let Some(stats) = ProgramStats::enable() else {
        return Ok("\nInside the programs: not measured (no kernel.bpf_stats_enabled).\n".into());
    };
    let made = bench.run_tracer(Mode::TracePcap, Some(&stats))?;
    let filtered = bench.run_tracer(Mode::TraceFiltered, Some(&stats))?;
    drop(stats);
    let per_get = |d: Duration| d.as_nanos() as f64 / bench.lines as f64;
    let untraced_ns = per_get(untraced);
    let share = |run: &Run| {
        run.programs.map_or("not read".to_string(), |d| {
            format!(
                "{:.0} ns per route get (+{:.2}×)",
                per_get(d),
                per_get(d) / untraced_ns
            )
        })
    };
    Ok(format!(
        "\nInside the tracer's eBPF programs (their `run_time_ns`, one more run each with \
         `kernel.bpf_stats_enabled=1`, not in the rows above), against an untraced route get of \
         {untraced_ns:.0} ns: `--comm ip --pcap F` {}; `--comm no-such-comm` (every record \
         filtered) {}.\n",
        share(&made),
        share(&filtered),
    ))
}

/// The window over which a capturer's CPU is watched to see it has caught up.
const SETTLE_WINDOW: Duration = Duration::from_millis(300);

/// Waits until `pid` has caught up — busy for less than a fifth of a [`SETTLE_WINDOW`], not
/// "no CPU at all": an idle tracer still polls, and under TCG its polls alone can pass a clock
/// tick in every window, which kept an exact test waiting forever — at most 120 s; returns its
/// CPU time then.
fn settled_cpu(pid: u32) -> Option<Duration> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut last = cpu_of(pid)?;
    loop {
        std::thread::sleep(SETTLE_WINDOW);
        let now = cpu_of(pid)?;
        if now.saturating_sub(last) < SETTLE_WINDOW / 5 {
            return Some(now);
        }
        if Instant::now() > deadline {
            eprintln!("storm_bench: pid {pid} still busy after 120 s; its CPU so far is taken");
            return Some(now);
        }
        last = now;
    }
}

/// Waits up to `secs` for `done`.
fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        if Instant::now() > deadline {
            bail!("waited {secs} s for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The first number before `marker` in `text` ("40004 packets captured" → 40004).
fn number_before(text: &str, marker: &str) -> Option<u64> {
    let at = text.find(marker)?;
    text[..at].split_whitespace().last()?.parse().ok()
}

impl Bench {
    fn new(lines: usize) -> Result<Self> {
        let ns = Netns::new("storm");
        ns.ip(&[
            "link", "add", "veth0", "type", "veth", "peer", "name", "veth1",
        ]);
        ns.ip(&["link", "set", "veth0", "up"]);
        ns.ip(&["link", "set", "veth1", "up"]);
        ns.ip(&["addr", "add", "10.9.0.1/24", "dev", "veth0"]);
        let work = std::env::temp_dir().join(format!("storm-bench-{}", std::process::id()));
        std::fs::create_dir_all(&work)?;
        let batch = work.join("batch");
        let text: String = (0..lines)
            .map(|i| format!("route get 10.9.0.{}\n", i % 250 + 2))
            .collect();
        std::fs::write(&batch, text)?;
        Ok(Bench {
            ns,
            batch,
            work,
            lines,
        })
    }

    /// The storm itself.
    fn storm(&self) -> Result<Duration> {
        let started = Instant::now();
        let out = Command::new("ip")
            .args(["-n", &self.ns.name, "-batch"])
            .arg(&self.batch)
            .stdout(Stdio::null())
            .output()
            .context("running ip -batch")?;
        let took = started.elapsed();
        if !out.status.success() {
            bail!("ip -batch failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(took)
    }

    fn nlmon_available(&self) -> bool {
        let added = Command::new("ip")
            .args([
                "-n",
                &self.ns.name,
                "link",
                "add",
                "nlmon0",
                "type",
                "nlmon",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if added {
            self.ns.ip(&["link", "delete", "nlmon0"]);
        }
        added
    }

    fn run(&self, mode: Mode) -> Result<Run> {
        match mode {
            Mode::Untraced => Ok(Run {
                storm: self.storm()?,
                cpu: None,
                captured: "—".into(),
                programs: None,
                threads: ThreadUse::default(),
            }),
            Mode::NlmonTcpdump => self.run_nlmon(),
            Mode::TracePcap | Mode::TraceJson | Mode::TraceFiltered | Mode::TraceStopped => {
                self.run_tracer(mode, None)
            }
        }
    }

    /// nlmon0 exists only for this run: a tap that is up copies every netlink message of the
    /// namespace, whoever reads it, and would tax the other rows.
    fn run_nlmon(&self) -> Result<Run> {
        self.ns.ip(&["link", "add", "nlmon0", "type", "nlmon"]);
        self.ns.ip(&["link", "set", "nlmon0", "up"]);
        let stderr = self.work.join("tcpdump.err");
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns.name,
                "tcpdump",
                "-i",
                "nlmon0",
                "-w",
            ])
            .arg(self.work.join("nlmon.pcap"))
            .args(["-U", "-Z", "root"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("starting tcpdump")?;
        let capturer = Capturer { child, stderr };
        let outcome = self.measure(&capturer, |err| err.contains("listening on"), false, None);
        let text = capturer.stop();
        self.ns.ip(&["link", "delete", "nlmon0"]);
        let (storm, cpu, _, threads) = outcome?;
        let text = text?;
        let captured = number_before(&text, "packets captured");
        let dropped = number_before(&text, "packets dropped by kernel");
        Ok(Run {
            storm,
            cpu,
            captured: format!(
                "{} frames, {} dropped by kernel",
                captured.map_or("?".into(), |n| n.to_string()),
                dropped.map_or("?".into(), |n| n.to_string())
            ),
            programs: None,
            threads,
        })
    }

    /// A run of the tracer in `mode`; with `stats`, its programs' run time through the storm
    /// too.
    fn run_tracer(&self, mode: Mode, stats: Option<&ProgramStats>) -> Result<Run> {
        let ready = self.work.join("ready");
        let _ = std::fs::remove_file(&ready);
        let stderr = self.work.join("trace.err");
        let mut cmd = Command::new(tool());
        // The filtered row's comm matches nothing: the kernel drops every record.
        let comm = if mode == Mode::TraceFiltered {
            "no-such-comm"
        } else {
            "ip"
        };
        cmd.args(["trace", "--comm", comm, "--ready-file"])
            .arg(&ready);
        if mode == Mode::TraceStopped {
            // Room for the whole storm's records while nothing reads them.
            cmd.args(["--ring-buffer-mib", "64"]);
        }
        match mode {
            Mode::TracePcap | Mode::TraceFiltered | Mode::TraceStopped => {
                cmd.arg("--pcap").arg(self.work.join("trace.pcap"))
            }
            _ => cmd
                .args(["--format", "json", "-o"])
                .arg(self.work.join("trace.jsonl")),
        };
        let child = cmd
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()
            .context("starting nodeip-trace")?;
        let capturer = Capturer { child, stderr };
        let (storm, cpu, programs, threads) = self.measure(
            &capturer,
            |_| ready.exists(),
            mode == Mode::TraceStopped,
            stats,
        )?;
        let text = capturer.stop()?;
        // "nodeip-trace: 80004 events, 0 lost; stopped by …", or with a pcap alone "nodeip-trace:
        // 40002 netlink buffers captured (no events made: …), 0 lost; …"
        let summary = text
            .lines()
            .rev()
            .find(|l| l.starts_with("nodeip-trace: ") && l.contains(" lost"))
            .unwrap_or("no summary line")
            .trim_start_matches("nodeip-trace: ");
        let summary = summary.split(';').next().unwrap_or(summary);
        Ok(Run {
            storm,
            cpu,
            captured: summary.to_string(),
            programs,
            threads,
        })
    }

    /// Waits for the capturer to be ready (its stderr passes `ready`), runs the storm (with
    /// the capturer stopped through it when `stopped`), and returns its time, the capturer's
    /// CPU until it caught up (and its threads'), and with `stats` its eBPF programs' run time
    /// through the storm.
    fn measure(
        &self,
        capturer: &Capturer,
        ready: impl Fn(&str) -> bool,
        stopped: bool,
        stats: Option<&ProgramStats>,
    ) -> Result<(Duration, Option<Duration>, Option<Duration>, ThreadUse)> {
        // Attaching takes seconds under QEMU's TCG.
        wait_until("the capturer to be ready", 120, || {
            ready(&std::fs::read_to_string(&capturer.stderr).unwrap_or_default())
        })?;
        std::thread::sleep(Duration::from_millis(500));
        let pid = capturer.child.id();
        let before = cpu_of(pid);
        let threads_before = ThreadUse::of(pid);
        let signal = |sig| {
            if stopped {
                // SAFETY: kill with our child's pid.
                unsafe { libc::kill(pid as i32, sig) };
            }
        };
        let programs_before = stats.and_then(|_| program_time_of(pid));
        signal(libc::SIGSTOP);
        let storm = self.storm();
        signal(libc::SIGCONT);
        let storm = storm?;
        let programs = programs_before
            .zip(stats.and_then(|_| program_time_of(pid)))
            .map(|(b, a)| a.saturating_sub(b));
        let after = settled_cpu(pid);
        let threads = ThreadUse::of(pid).since(&threads_before);
        let cpu = before.zip(after).map(|(b, a)| a.saturating_sub(b));
        Ok((storm, cpu, programs, threads))
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn seconds(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// `--pcap` against nlmon + tcpdump round by round (each round runs both at nearly the same
/// moment, so the guest's drift between rounds cancels): each round's ratio, their median, and
/// in how many rounds ours was the faster. Empty without both rows.
fn paired(runs: &[(Mode, Run)]) -> String {
    let of = |mode: Mode| -> Vec<Duration> {
        runs.iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, r)| r.storm)
            .collect()
    };
    let (ours, nlmon) = (of(Mode::TracePcap), of(Mode::NlmonTcpdump));
    if ours.is_empty() || ours.len() != nlmon.len() {
        return String::new();
    }
    let ratios: Vec<f64> = ours
        .iter()
        .zip(&nlmon)
        .map(|(o, n)| o.as_secs_f64() / n.as_secs_f64())
        .collect();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let faster = ratios.iter().filter(|r| **r < 1.0).count();
    format!(
        "\nPaired, round by round: `--pcap F` ÷ nlmon0 + `tcpdump -w` = {} (median {:.2}); ours \
         the faster in {faster} of {} rounds.\n",
        ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        sorted[sorted.len() / 2],
        ratios.len()
    )
}

fn main() -> Result<()> {
    let mut lines = 20_000usize;
    let mut rounds = 3usize;
    let mut out: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--lines" => lines = value()?.parse()?,
            "--rounds" => rounds = value()?.parse()?,
            "--out" => out = Some(value()?.into()),
            "-h" | "--help" => {
                println!("storm_bench [--lines N] [--rounds R] [--out FILE]  (as root)");
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    let bench = Bench::new(lines)?;
    let nlmon = bench.nlmon_available();
    let modes: Vec<Mode> = Mode::ALL
        .into_iter()
        .filter(|m| nlmon || *m != Mode::NlmonTcpdump)
        .collect();
    // One warm-up storm (page cache, ip's first start).
    bench.storm()?;
    let mut runs: Vec<(Mode, Run)> = Vec::new();
    for round in 0..rounds {
        let mut order = modes.clone();
        order.rotate_left(round % modes.len());
        for mode in order {
            let run = bench.run(mode)?;
            eprintln!(
                "storm_bench: round {} {:?}: {} ({})",
                round + 1,
                mode,
                seconds(run.storm),
                run.captured
            );
            runs.push((mode, run));
        }
    }
    let untraced = median(
        runs.iter()
            .filter(|(m, _)| *m == Mode::Untraced)
            .map(|(_, r)| r.storm)
            .collect(),
    );
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut table = format!(
        "Kernel {}; {} `route get` lines by `ip -n NS -batch`, {rounds} rounds (rotated order); \
         capture CPU: the capturer's user+system CPU from just before the storm until it caught \
         up.\n\n| run | storm (each round) | median | ratio | capture CPU (each round) | \
         captured, lost |\n|---|---|---|---|---|---|\n",
        release.trim(),
        bench.lines
    );
    for mode in Mode::ALL {
        let of: Vec<&Run> = runs
            .iter()
            .filter(|(m, _)| *m == mode)
            .map(|(_, r)| r)
            .collect();
        if of.is_empty() {
            table.push_str(&format!(
                "| {} | not in this kernel | | | | |\n",
                mode.label()
            ));
            continue;
        }
        let storm = median(of.iter().map(|r| r.storm).collect());
        let each =
            |f: &dyn Fn(&Run) -> String| of.iter().map(|r| f(r)).collect::<Vec<_>>().join(", ");
        table.push_str(&format!(
            "| {} | {} | {} | {:.2}× | {} | {} |\n",
            mode.label(),
            each(&|r| seconds(r.storm)),
            seconds(storm),
            storm.as_secs_f64() / untraced.as_secs_f64(),
            each(&|r| r.cpu.map_or("—".into(), seconds)),
            of.last().map_or(String::new(), |r| r.captured.clone()),
        ));
    }
    table.push_str("\nThe capturers' threads, per run (mean of the rounds):\n\n");
    for mode in Mode::ALL {
        let of: Vec<&ThreadUse> = runs
            .iter()
            .filter(|(m, r)| *m == mode && !r.threads.0.is_empty())
            .map(|(_, r)| &r.threads)
            .collect();
        if !of.is_empty() {
            table.push_str(&format!("- {}: {}\n", mode.label(), ThreadUse::mean(&of)));
        }
    }
    table.push_str(&paired(&runs));
    table.push_str(&inside_programs(&bench, untraced)?);
    print!("{table}");
    if let Some(out) = out {
        std::fs::write(&out, &table).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}
