//! `cargo xtask soak [--minutes N]`: the tracer under continuous mixed load for a long time
//! (default 10 minutes) — a round a second of getaddrinfo and netlink loops (`load_gen`), `ip
//! -batch` route gets, address and route dumps and `getent`, each a new process, in a namespace
//! the harness makes —
//! while it traces the whole node with JSON to a pipe and a pcap to a file. Checks, and records
//! in the benchmark history (BENCHMARKS.md): RSS flat after warm-up, no fd leak, 0 lost (or lost
//! counted exactly: every `load_gen` call is either an event or in `lost`), the pcap readable to
//! its end.
//!
//! `cargo xtask soak --vm [--kernel K]` runs it in a VM lane guest instead (`guest_soak`,
//! tests/src/bin/guest_soak.rs: more resolvers, fresh programs held at exec, process churn,
//! container starts) and
//! also fails on any kernel fault in the guest's console; `cargo xtask test` runs a short one.
//! Both judge the tracer's RSS and fds with [`Footprint`].
use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde::Deserialize;

use crate::bench::{self, BenchNetns};
use crate::kernels::Kernel;
use crate::run;

/// One round of load starts at most this often: a busy node's control plane (500 lookups, 2,000
/// netlink messages and 500 route gets a second, and a dump), not a storm — bursts and their loss
/// are `cargo xtask bench`'s.
const ROUND_PERIOD: Duration = Duration::from_secs(1);

/// RSS growth allowed from the window after warm-up to the load's last window: the larger of
/// this and 10%.
const RSS_SLACK_KIB: u64 = 4 << 10;

/// Probe links a sample may catch beyond another's: two fresh Go programs whose files were
/// just deleted (their probes released within seconds) while the two after them run, 9 links
/// each.
const PROBE_FDS_IN_FLIGHT: usize = 4 * 9;

/// Other descriptors a sample may catch beyond another's: the files the tracer keeps open of
/// those four programs (to tell when they are deleted).
const OTHER_FDS_SLACK: usize = 4;

/// The median RSS of the samples taken from `from` on, for `window` (samples are 5 s apart; a
/// round's burst makes single samples swing by a few MiB, so a window's median judges a trend,
/// not the phase one sample happened to catch); 0 without samples there.
fn median_rss(samples: &[Sample], from: Duration, window: Duration) -> u64 {
    median_of(samples, from, window, |s| s.rss_kib)
}

/// The median of `value` over the samples taken from `from` on, for `window` (see
/// [`median_rss`]); 0 without samples there.
fn median_of(
    samples: &[Sample],
    from: Duration,
    window: Duration,
    value: impl Fn(&Sample) -> u64,
) -> u64 {
    let mut rss: Vec<u64> = samples
        .iter()
        .filter(|s| s.at >= from && s.at < from + window)
        .map(value)
        .collect();
    rss.sort_unstable();
    rss.get(rss.len() / 2).copied().unwrap_or(0)
}

/// One sample of the tracer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sample {
    /// Since the load started.
    pub(crate) at: Duration,
    /// Its resident set (`VmRSS`).
    pub(crate) rss_kib: u64,
    /// Of it, anonymous memory (`RssAnon`: the heap, stacks), file pages (`RssFile`: its
    /// executable's pages, mapped files) and shared memory (`RssShmem`): which one grows says
    /// where to look.
    pub(crate) rss_kinds: RssKinds,
    /// Its open file descriptors.
    pub(crate) fds: usize,
    /// Of them, its probes' links (`perf_event` and `bpf_link` descriptors): one set per
    /// program it probed, kept while the program can run.
    pub(crate) probe_fds: usize,
}

/// A resident set by kind (KiB), from `/proc/PID/status`; zeros where a report lacks them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub(crate) struct RssKinds {
    /// `RssAnon`.
    #[serde(default)]
    pub(crate) anon_kib: u64,
    /// `RssFile`.
    #[serde(default)]
    pub(crate) file_kib: u64,
    /// `RssShmem`.
    #[serde(default)]
    pub(crate) shmem_kib: u64,
}

impl RssKinds {
    /// Process `pid`'s now.
    pub(crate) fn of(pid: u32) -> RssKinds {
        RssKinds {
            anon_kib: bench::proc_kib(pid, "status", "RssAnon"),
            file_kib: bench::proc_kib(pid, "status", "RssFile"),
            shmem_kib: bench::proc_kib(pid, "status", "RssShmem"),
        }
    }
}

impl Sample {
    /// Its descriptors besides its probes' links.
    fn other_fds(&self) -> usize {
        self.fds.saturating_sub(self.probe_fds)
    }
}

/// Process `pid`'s open descriptors, and how many of them are probe links (`perf_event`,
/// `bpf_link`).
pub(crate) fn fd_counts(pid: u32) -> (usize, usize) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return (0, 0);
    };
    let mut counts = (0, 0);
    for entry in dir.flatten() {
        counts.0 += 1;
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        let target = target.to_string_lossy();
        if target.contains("perf_event") || target.contains("bpf_link") {
            counts.1 += 1;
        }
    }
    counts
}

/// The warm-up of a load of `duration`: a tenth of it, at most a minute. The RSS windows are
/// as long.
pub(crate) fn warmup_of(duration: Duration) -> Duration {
    (duration / 10).min(Duration::from_secs(60))
}

/// The tracer's footprint over a soak, judged from its samples (5 s apart, the first at the
/// load's start, the last taken after the load stopped): what the host soak and the guest soak
/// (`cargo xtask soak --vm`) both check.
#[derive(Debug)]
pub(crate) struct Footprint {
    warmup: Duration,
    start: Sample,
    /// The first sample after the warm-up.
    warm: Sample,
    /// The sample after the load stopped.
    end: Sample,
    /// Median RSS of the window after the warm-up.
    warm_rss: u64,
    /// Median RSS of the load's last window.
    end_rss: u64,
    /// The medians of each kind in the same two windows.
    warm_kinds: RssKinds,
    end_kinds: RssKinds,
    peak: u64,
}

impl Footprint {
    /// The footprint of `samples` (at least one) with the warm-up `warmup`: the median of the
    /// window after warm-up against the median of the load's last window (the same length; the
    /// sample taken after the load stopped is not in it).
    pub(crate) fn of(samples: &[Sample], warmup: Duration) -> Footprint {
        let start = samples[0];
        let end = *samples.last().expect("samples");
        let warm = samples
            .iter()
            .find(|s| s.at >= warmup)
            .copied()
            .unwrap_or(start);
        let under_load = &samples[..samples.len().saturating_sub(1).max(1)];
        let load_end = under_load.last().map(|s| s.at).unwrap_or_default();
        let (end_from, end_window) = (
            load_end.saturating_sub(warmup),
            warmup + Duration::from_secs(1),
        );
        let kinds = |from, window| RssKinds {
            anon_kib: median_of(under_load, from, window, |s| s.rss_kinds.anon_kib),
            file_kib: median_of(under_load, from, window, |s| s.rss_kinds.file_kib),
            shmem_kib: median_of(under_load, from, window, |s| s.rss_kinds.shmem_kib),
        };
        Footprint {
            warmup,
            start,
            warm,
            end,
            warm_rss: median_rss(under_load, warmup, warmup),
            end_rss: median_rss(under_load, end_from, end_window),
            warm_kinds: kinds(warmup, warmup),
            end_kinds: kinds(end_from, end_window),
            peak: samples.iter().map(|s| s.rss_kib).max().unwrap_or(0),
        }
    }

    /// Whether RSS stayed flat: the last window within max(4 MiB, 10%) of the first.
    pub(crate) fn rss_ok(&self) -> bool {
        self.end_rss <= self.warm_rss + RSS_SLACK_KIB.max(self.warm_rss / 10)
    }

    /// Whether no fds leaked: at the end, besides probe links at most [`OTHER_FDS_SLACK`]
    /// more than after the warm-up, and probe links at most [`PROBE_FDS_IN_FLIGHT`] more (the
    /// tracer detaches a program's probes once its file is deleted and no process runs it).
    pub(crate) fn fds_ok(&self) -> bool {
        self.end.other_fds() <= self.warm.other_fds() + OTHER_FDS_SLACK
            && self.end.probe_fds <= self.warm.probe_fds + PROBE_FDS_IN_FLIGHT
    }

    /// Probe links gained (or given back) from the warm-up to the end.
    pub(crate) fn probe_fds_change(&self) -> i64 {
        self.end.probe_fds as i64 - self.warm.probe_fds as i64
    }

    /// How each kind of resident memory changed between the two windows, in MiB:
    /// `anon +1.2, file +0.0, shmem +0.0`.
    fn kinds_change(&self) -> String {
        let change = |end: u64, warm: u64| (end as f64 - warm as f64) / 1024.0;
        let (w, e) = (self.warm_kinds, self.end_kinds);
        format!(
            "anon {:+.1}, file {:+.1}, shmem {:+.1}",
            change(e.anon_kib, w.anon_kib),
            change(e.file_kib, w.file_kib),
            change(e.shmem_kib, w.shmem_kib)
        )
    }

    /// The RSS and fd rows, keyed `PREFIX.rss` and `PREFIX.fds`, their words after `what`.
    pub(crate) fn rows(&self, prefix: &str, what: &str) -> [bench::Row; 2] {
        let w = self.warmup.as_secs_f64();
        [
            check(
                prefix,
                "rss",
                &format!("{what}tracer RSS"),
                format!(
                    "start {} MiB; median of the {w:.0} s after the {w:.0} s warm-up {} MiB, of the load's last {w:.0} s {} MiB (MiB by kind: {}); after the load {} MiB, peak {} MiB",
                    self.start.rss_kib >> 10,
                    self.warm_rss >> 10,
                    self.end_rss >> 10,
                    self.kinds_change(),
                    self.end.rss_kib >> 10,
                    self.peak >> 10
                ),
                "last window ≤ first + max(4 MiB, 10%)",
                Some(self.rss_ok()),
            ),
            check(
                prefix,
                "fds",
                &format!("{what}tracer fds"),
                format!(
                    "start {} ({} of them probe links), after warm-up {} ({}), end {} ({})",
                    self.start.fds,
                    self.start.probe_fds,
                    self.warm.fds,
                    self.warm.probe_fds,
                    self.end.fds,
                    self.end.probe_fds
                ),
                "end ≤ warm-up + 4, probe links ≤ warm-up + 36",
                Some(self.fds_ok()),
            ),
        ]
    }
}

/// A soak's result row, keyed `PREFIX.KEY`.
pub(crate) fn check(
    prefix: &str,
    key: &str,
    what: &str,
    measured: String,
    target: &str,
    met: Option<bool>,
) -> bench::Row {
    bench::Row {
        key: format!("{prefix}.{key}"),
        what: what.into(),
        measured,
        ratio: None,
        target: target.into(),
        met,
    }
}

/// Calls the load made, by kind (only `load_gen`'s, which are counted exactly).
#[derive(Default)]
struct Made {
    gai: AtomicU64,
    netlink_messages: AtomicU64,
    cycles: AtomicU64,
}

/// What the tracer's JSON stream said about `load_gen`.
#[derive(Default, Debug)]
struct Seen {
    gai: u64,
    netlink_messages: u64,
    lines: u64,
    last: String,
}

fn sample(pid: u32, at: Duration) -> Sample {
    let (fds, probe_fds) = fd_counts(pid);
    Sample {
        at,
        rss_kib: bench::proc_kib(pid, "status", "VmRSS"),
        rss_kinds: RssKinds::of(pid),
        fds,
        probe_fds,
    }
}

/// One round of the mixed load in namespace `ns`; adds what it made to `made`.
fn load_round(gen: &Path, ns: &str, batch: &Path, made: &Made) -> anyhow::Result<()> {
    let gen_run = |mode: &str, count: u64| -> anyhow::Result<()> {
        run(Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(gen)
            .args([mode, &count.to_string()])
            .stdout(Stdio::null()))
    };
    gen_run("gai", 500)?;
    made.gai.fetch_add(500, Ordering::Relaxed);
    gen_run("netlink", 1000)?;
    made.netlink_messages.fetch_add(2000, Ordering::Relaxed);
    run(Command::new("ip")
        .args(["-n", ns, "-batch"])
        .arg(batch)
        .stdout(Stdio::null()))?;
    for args in [
        &["addr", "show"][..],
        &["route", "show", "table", "all"][..],
    ] {
        run(Command::new("ip")
            .args(["-n", ns])
            .args(args)
            .stdout(Stdio::null()))?;
    }
    run(Command::new("ip")
        .args(["netns", "exec", ns, "getent", "ahosts", "localhost"])
        .stdout(Stdio::null()))?;
    made.cycles.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// Counts `load_gen`'s getaddrinfo and netlink events in the tracer's JSON lines.
fn count_stream(stdout: std::process::ChildStdout) -> Seen {
    let mut seen = Seen::default();
    for line in std::io::BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        seen.lines += 1;
        if line.contains("\"load_gen\"") {
            if let Ok(e) = serde_json::from_str::<serde_json::Value>(&line) {
                if e["comm"] == "load_gen" {
                    match e["kind"].as_str() {
                        Some("getaddrinfo") => seen.gai += 1,
                        Some("netlink") => seen.netlink_messages += 1,
                        _ => {}
                    }
                }
            }
        }
        seen.last = line;
    }
    seen
}

/// Runs the soak for `minutes` and records the figures in the benchmark history; fails when a
/// check does.
pub fn soak(minutes: f64) -> anyhow::Result<()> {
    let started = Instant::now();
    crate::setup::setup(crate::setup::Needs::Tests)?;
    let (tool, gen) = bench::build_release()?;
    let dir = std::env::temp_dir().join(format!("nitsoak-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let ns = BenchNetns::new()?;
    let batch = dir.join("route-gets.batch");
    let lines: String = (0..500)
        .map(|i| format!("route get 10.77.{}.{}\n", i / 250, i % 250 + 1))
        .collect();
    std::fs::write(&batch, lines)?;
    let pcap = dir.join("soak.pcap");
    let ready = dir.join("ready");
    // The attach wait is counted from the tracer's start, not the soak's: a release build
    // before it took 2.4 minutes and ran out the 120 s.
    let spawned = Instant::now();
    let mut tracer = Command::new(&tool)
        .args(["trace", "--format", "json", "--pcap"])
        .arg(&pcap)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nodeip-trace")?;
    let pid = tracer.id();
    let stdout = tracer.stdout.take().context("tracer stdout")?;
    let counter = std::thread::spawn(move || count_stream(stdout));
    let mut stderr = tracer.stderr.take().context("tracer stderr")?;
    let stderr_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    while !ready.exists() {
        if spawned.elapsed() > Duration::from_secs(120) {
            bail!("nodeip-trace did not attach within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let duration = Duration::from_secs_f64(minutes * 60.0);
    let warmup = warmup_of(duration);
    let t0 = Instant::now();
    let made = Arc::new(Made::default());
    let stop = Arc::new(AtomicBool::new(false));
    let loader = {
        let (made, stop, gen, ns, batch) = (
            made.clone(),
            stop.clone(),
            gen.clone(),
            ns.name.clone(),
            batch.clone(),
        );
        std::thread::spawn(move || -> anyhow::Result<()> {
            while !stop.load(Ordering::Relaxed) {
                let round = Instant::now();
                load_round(&gen, &ns, &batch, &made)?;
                std::thread::sleep(ROUND_PERIOD.saturating_sub(round.elapsed()));
            }
            Ok(())
        })
    };
    let mut samples = vec![sample(pid, Duration::ZERO)];
    let mut last_print = Instant::now();
    while t0.elapsed() < duration && !loader.is_finished() {
        std::thread::sleep(Duration::from_secs(5));
        let s = sample(pid, t0.elapsed());
        if last_print.elapsed() >= Duration::from_secs(60) {
            println!(
                "soak: {:>4.0} s: tracer RSS {} MiB, {} fds, {} rounds",
                s.at.as_secs_f64(),
                s.rss_kib >> 10,
                s.fds,
                made.cycles.load(Ordering::Relaxed)
            );
            last_print = Instant::now();
        }
        samples.push(s);
    }
    stop.store(true, Ordering::Relaxed);
    loader
        .join()
        .map_err(|_| anyhow::anyhow!("load thread panicked"))??;
    std::thread::sleep(Duration::from_millis(500));
    samples.push(sample(pid, t0.elapsed()));
    // SAFETY: kill with our child's pid.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let (status, usage) = bench::wait_usage(pid)?;
    let seen = counter
        .join()
        .map_err(|_| anyhow::anyhow!("counter panicked"))?;
    let stderr = stderr_reader.join().unwrap_or_default();
    let (events, lost) = bench::summary_of(&stderr);
    let analyzed = Command::new(&tool)
        .args(["analyze", "--format", "json"])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let pcap_mb = std::fs::metadata(&pcap).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;

    let footprint = Footprint::of(&samples, warmup);
    let end = *samples.last().expect("samples");
    let made_gai = made.gai.load(Ordering::Relaxed);
    let made_nl = made.netlink_messages.load(Ordering::Relaxed);
    let counts_ok = lost == 0 && seen.gai == made_gai && seen.netlink_messages == made_nl;
    let outputs_ok = status == 0 && analyzed.status.success() && seen.last.contains("\"summary\"");

    let row = |key: &str, what: &str, measured: String, target: &str, met: Option<bool>| {
        check("soak", key, &format!("soak: {what}"), measured, target, met)
    };
    let [rss_row, fds_row] = footprint.rows("soak", "soak: ");
    let rows = vec![
        row(
            "load",
            "load",
            format!(
                "{:.0} s, {} rounds (one a second at most): {made_gai} getaddrinfo calls and {made_nl} netlink messages by load_gen, plus per round 500 `ip -batch` route gets, an address and a route dump, `getent`",
                end.at.as_secs_f64(),
                made.cycles.load(Ordering::Relaxed)
            ),
            "—",
            None,
        ),
        row(
            "events",
            "events vs calls",
            format!(
                "load_gen getaddrinfo events {} of {made_gai}, netlink events {} of {made_nl}; tracer: {events} events, {lost} lost",
                seen.gai, seen.netlink_messages
            ),
            "every call an event, 0 lost",
            Some(counts_ok),
        ),
        rss_row,
        fds_row,
        row(
            "outputs",
            "outputs",
            format!(
                "tracer exit {status}, JSON stream ends with the summary ({} lines), pcap {pcap_mb:.0} MB analyzed {}",
                seen.lines,
                if analyzed.status.success() { "without error" } else { "WITH ERRORS" }
            ),
            "complete",
            Some(outputs_ok),
        ),
        row(
            "cpu",
            "tracer CPU",
            format!(
                "{:.1} s for {:.0} s of load",
                usage.cpu.as_secs_f64(),
                end.at.as_secs_f64()
            ),
            "—",
            None,
        ),
    ];
    let run = bench::host_run(
        &format!("cargo xtask soak --minutes {minutes}"),
        &tool,
        started.elapsed(),
        rows,
        vec!["nodeip-trace trace --format json --pcap FILE | (counted), all processes; load in a namespace pair with no link to the host".into()],
    )?;
    let path = bench::record_run(&run)?;
    let _ = std::fs::remove_dir_all(&dir);
    println!("soak: recorded; {} written again", path.display());
    if !(footprint.rss_ok() && footprint.fds_ok() && counts_ok && outputs_ok) {
        bail!(
            "soak failed a check (see the table above); tracer stderr:\n{}",
            stderr.lines().rev().take(5).collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

/// What `guest_soak` (tests/src/bin/guest_soak.rs) writes in the guest: its load, what the
/// trace saw of it, the tracer's samples and summary.
#[derive(Debug, Deserialize)]
pub(crate) struct GuestSoakReport {
    /// The load's seconds.
    load_secs: f64,
    /// Seconds a round took at least.
    round_secs: f64,
    /// Why the load stopped early, if it did.
    load_error: Option<String>,
    made: GuestMade,
    seen: GuestSeen,
    samples: Vec<GuestSample>,
    tracer: GuestTracer,
}

/// What the guest's load made.
#[derive(Debug, Deserialize)]
struct GuestMade {
    rounds: u64,
    gai: u64,
    netlink_messages: u64,
    route_gets: u64,
    dumps: u64,
    /// Lookups by resolver (`glibc`, `musl`, `go`).
    lookups: BTreeMap<String, u64>,
    fresh_programs: u64,
    processes: u64,
}

/// What the guest's trace showed of the load.
#[derive(Debug, Deserialize)]
struct GuestSeen {
    gai: u64,
    netlink_messages: u64,
    lookups: BTreeMap<String, u64>,
    exec_holds: u64,
    lines: u64,
    ends_with_summary: bool,
}

/// One sample of the guest's tracer.
#[derive(Debug, Deserialize)]
struct GuestSample {
    at_secs: f64,
    rss_kib: u64,
    /// `RssAnon`, `RssFile`, `RssShmem` (reports of before they were sampled lack them).
    #[serde(flatten)]
    rss_kinds: RssKinds,
    fds: usize,
    probe_fds: usize,
    /// Fresh programs the load had made by then.
    fresh: u64,
}

/// How the guest's tracer ended.
#[derive(Debug, Deserialize)]
struct GuestTracer {
    exit: i32,
    cpu_secs: f64,
    stop_secs: f64,
    /// `guest_soak`'s own CPU: its load's process starts and its reading of the JSON stream.
    #[serde(default)]
    guest_soak_cpu_secs: f64,
    /// Its soft limit on open files when it started (0: unknown).
    #[serde(default)]
    open_files_limit: u64,
    /// Its summary line (`nodeip-trace: N events, M lost…`).
    summary: String,
    stderr_tail: String,
}

/// Parses `guest_soak`'s JSON report.
pub(crate) fn parse_guest_report(text: &str) -> anyhow::Result<GuestSoakReport> {
    let report: GuestSoakReport =
        serde_json::from_str(text).context("guest_soak's report is not what xtask reads")?;
    if report.samples.is_empty() {
        bail!("guest_soak's report has no samples");
    }
    Ok(report)
}

/// How a guest soak's boot went, besides what `guest_soak` reported.
pub(crate) struct GuestBoot<'a> {
    /// The kernel's name (`6.1`): the rows' keys are `vmKERNEL.soak.*`.
    pub(crate) kernel: &'a str,
    /// The kernel faults the console showed after the guest's `/init` started, one line each.
    pub(crate) faults: Vec<String>,
    /// Whether the guest got to its end (`@@VM-DONE`).
    pub(crate) finished: bool,
    /// Whether the guest's guard had to end `guest_soak`.
    pub(crate) guarded: bool,
}

/// The verdict on a guest soak: its rows (keyed `vmKERNEL.soak.*`) and the checks that failed
/// (none: it passed). No report (`guest_soak` did not write one) fails every check it would
/// have made.
pub(crate) fn guest_verdict(
    boot: &GuestBoot,
    report: Option<&GuestSoakReport>,
) -> (Vec<bench::Row>, Vec<String>) {
    let prefix = format!("vm{}.soak", boot.kernel);
    let what = format!("guest {} soak: ", boot.kernel);
    let row = |key: &str, words: &str, measured: String, target: &str, met: Option<bool>| {
        check(
            &prefix,
            key,
            &format!("{what}{words}"),
            measured,
            target,
            met,
        )
    };
    let mut failed = Vec::new();
    let faults_ok = boot.faults.is_empty();
    let mut rows = vec![row(
        "faults",
        "kernel faults",
        if faults_ok {
            "none in the console (soft/hard lockup, hung task, RCU stall, oops, panic)".into()
        } else {
            boot.faults.join("; ")
        },
        "none",
        Some(faults_ok),
    )];
    if !faults_ok {
        failed.push(format!("kernel faults: {}", boot.faults.join("; ")));
    }
    if !boot.finished || boot.guarded {
        failed.push(format!(
            "the guest {}",
            if boot.guarded {
                "guard ended guest_soak"
            } else {
                "did not finish"
            }
        ));
    }
    let Some(r) = report else {
        failed.push("guest_soak wrote no report".into());
        return (rows, failed);
    };
    let samples: Vec<Sample> = r
        .samples
        .iter()
        .map(|s| Sample {
            at: Duration::from_secs_f64(s.at_secs.max(0.0)),
            rss_kib: s.rss_kib,
            rss_kinds: s.rss_kinds,
            fds: s.fds,
            probe_fds: s.probe_fds,
        })
        .collect();
    let warmup = warmup_of(Duration::from_secs_f64(r.load_secs));
    let footprint = Footprint::of(&samples, warmup);
    let fresh_at = |at: f64| {
        r.samples
            .iter()
            .find(|s| s.at_secs >= at)
            .or(r.samples.last())
            .map_or(0, |s| s.fresh)
    };
    let fresh_after_warmup = fresh_at(f64::MAX).saturating_sub(fresh_at(warmup.as_secs_f64()));
    let (events, lost) = bench::summary_of(&r.tracer.summary);
    let (m, s) = (&r.made, &r.seen);
    let lookups: Vec<String> = m
        .lookups
        .iter()
        .map(|(resolver, made)| {
            format!(
                "{resolver} {} of {made}",
                s.lookups.get(resolver).copied().unwrap_or(0)
            )
        })
        .collect();
    let lookups_ok = m
        .lookups
        .iter()
        .all(|(resolver, made)| s.lookups.get(resolver) == Some(made));
    let counts_ok = lost == 0
        && s.gai == m.gai
        && s.netlink_messages == m.netlink_messages
        && lookups_ok
        && r.tracer.summary.contains(" events");
    let outputs_ok = r.tracer.exit == 0 && s.ends_with_summary;
    rows.push(row(
        "load",
        "load",
        format!(
            "{:.0} s, {} rounds (one every {:.0} s at most): {} getaddrinfo calls and {} netlink messages by load_gen, {} `ip -batch` route gets, {} dumps, lookups {}, {} fresh Go programs ({fresh_after_warmup} after the warm-up; probe links from the warm-up to the end {:+}, a deleted program's released), {} short processes",
            r.load_secs,
            m.rounds,
            r.round_secs,
            m.gai,
            m.netlink_messages,
            m.route_gets,
            m.dumps,
            m.lookups
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            m.fresh_programs,
            footprint.probe_fds_change(),
            m.processes
        ),
        "—",
        None,
    ));
    rows.push(row(
        "events",
        "events vs calls",
        format!(
            "load_gen getaddrinfo events {} of {}, netlink events {} of {}; lookups {}; {} exec holds; tracer: {events} events, {lost} lost",
            s.gai,
            m.gai,
            s.netlink_messages,
            m.netlink_messages,
            lookups.join(", "),
            s.exec_holds
        ),
        "every call an event, 0 lost",
        Some(counts_ok),
    ));
    let [rss_row, fds_row] = footprint.rows(&prefix, &what);
    rows.push(rss_row);
    rows.push(fds_row);
    // Probe links are not judged as a leak, but running out of descriptors is a failure: the
    // programs after that go unprobed, their lookups missing without a `lost`.
    let limit = r.tracer.open_files_limit;
    let most_fds = samples.iter().map(|s| s.fds).max().unwrap_or(0) as u64;
    let limit_ok = limit == 0 || most_fds * 10 < limit * 9;
    rows.push(row(
        "fd_limit",
        "tracer fds against its limit",
        format!("at most {most_fds} open, soft limit {limit}"),
        "under 90% of the limit",
        Some(limit_ok),
    ));
    rows.push(row(
        "outputs",
        "outputs",
        format!(
            "tracer exit {}, stopped in {:.1} s, JSON stream ends with the summary: {} ({} lines){}",
            r.tracer.exit,
            r.tracer.stop_secs,
            s.ends_with_summary,
            s.lines,
            r.load_error
                .as_ref()
                .map(|e| format!("; the load stopped early: {e}"))
                .unwrap_or_default()
        ),
        "complete",
        Some(outputs_ok && r.load_error.is_none()),
    ));
    rows.push(row(
        "cpu",
        "tracer CPU",
        format!(
            "{:.1} s for {:.0} s of load (guest_soak itself {:.1} s)",
            r.tracer.cpu_secs, r.load_secs, r.tracer.guest_soak_cpu_secs
        ),
        "—",
        None,
    ));
    if !counts_ok {
        failed.push(format!(
            "events: {lost} lost, or calls without their event (see the events row); tracer: {}",
            r.tracer.summary
        ));
    }
    if !footprint.rss_ok() {
        failed.push("tracer RSS grew (see the rss row)".into());
    }
    if !footprint.fds_ok() {
        failed.push("tracer fds grew (see the fds row)".into());
    }
    if !limit_ok {
        failed.push(format!(
            "the tracer came within 10% of its open-files limit ({most_fds} of {limit})"
        ));
    }
    if !outputs_ok || r.load_error.is_some() {
        failed.push(format!(
            "outputs incomplete or the load failed; tracer stderr's tail:\n{}",
            r.tracer.stderr_tail
        ));
    }
    (rows, failed)
}

/// `cargo xtask soak --vm`: the soak in a VM lane guest on `kernel` for `minutes`; recorded in
/// the benchmark history when `record`. Fails on any kernel fault, loss, leak or incomplete
/// output.
pub fn soak_vm(kernel: Kernel, minutes: f64, record: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let guest = crate::vm::vm_soak(kernel, minutes)?;
    let report = guest.report.as_deref().map(parse_guest_report).transpose();
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            println!("soak --vm: {e:#}");
            None
        }
    };
    let boot = GuestBoot {
        kernel: kernel.name,
        faults: guest.faults,
        finished: guest.finished,
        guarded: guest.guarded,
    };
    let (rows, failed) = guest_verdict(&boot, report.as_ref());
    let command = format!(
        "cargo xtask soak --vm --kernel {} --minutes {minutes}",
        kernel.name
    );
    let run = bench::guest_run(
        command,
        &guest.package,
        &guest.capture,
        started.elapsed().as_secs_f64(),
        rows,
        format!(
            "the guest runs `guest_soak --minutes {minutes} --out …` (tests/src/bin/guest_soak.rs): \
             nodeip-trace trace --format json | (counted), all processes; load in a namespace \
             pair with no link to the host"
        ),
    )?;
    if record {
        let path = bench::record_run(&run)?;
        println!("soak --vm: recorded; {} written again", path.display());
    } else {
        print!("{}", bench::render(&run));
    }
    println!("soak --vm: console in {}", guest.console.display());
    if !failed.is_empty() {
        bail!(
            "soak --vm on {} failed:\n- {}",
            kernel.name,
            failed.join("\n- ")
        );
    }
    println!("soak --vm: kernel {} passed", kernel.name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report as `guest_soak` writes it: 3 minutes of load, RSS `rss(i)` KiB at sample `i`
    /// (5 s apart, one more after the load), lost `lost`, `go_seen` of 180 Go lookups seen.
    fn report(rss: impl Fn(u64) -> u64, lost: u64, go_seen: u64) -> String {
        let samples: Vec<serde_json::Value> = (0..=37)
            .map(|i| {
                serde_json::json!({
                    "at_secs": i as f64 * 5.0, "rss_kib": rss(i), "fds": 40 + 9 * (i % 2),
                    "probe_fds": 10 + 9 * (i % 2), "fresh": i / 4
                })
            })
            .collect();
        serde_json::json!({
            "minutes": 3.0,
            "round_secs": 2.0,
            "load_secs": 180.4,
            "load_error": null,
            "made": {
                "rounds": 90, "gai": 18000, "netlink_messages": 90000, "route_gets": 18000,
                "dumps": 180, "lookups": {"glibc": 90, "musl": 180, "go": 180},
                "fresh_programs": 18, "processes": 1800
            },
            "seen": {
                "gai": 18000, "netlink_messages": 90000,
                "lookups": {"glibc": 90, "musl": 180, "go": go_seen},
                "exec_holds": 20, "lines": 130000, "ends_with_summary": true
            },
            "samples": samples,
            "tracer": {
                "exit": 0, "cpu_secs": 50.2, "stop_secs": 4.1, "open_files_limit": 1024,
                "summary": format!("nodeip-trace: 129000 events, {lost} lost, record queue peak 3"),
                "stderr_tail": "nodeip-trace: tracing"
            }
        })
        .to_string()
    }

    fn boot(faults: Vec<String>) -> GuestBoot<'static> {
        GuestBoot {
            kernel: "6.1",
            faults,
            finished: true,
            guarded: false,
        }
    }

    #[test]
    fn a_clean_guest_soak_passes_with_every_row() {
        let r = parse_guest_report(&report(|_| 30 << 10, 0, 180)).unwrap();
        let (rows, failed) = guest_verdict(&boot(Vec::new()), Some(&r));
        assert!(failed.is_empty(), "{failed:?}");
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "vm6.1.soak.faults",
                "vm6.1.soak.load",
                "vm6.1.soak.events",
                "vm6.1.soak.rss",
                "vm6.1.soak.fds",
                "vm6.1.soak.fd_limit",
                "vm6.1.soak.outputs",
                "vm6.1.soak.cpu"
            ]
        );
        assert!(
            rows[2].measured.contains("go 180 of 180"),
            "{}",
            rows[2].measured
        );
        assert!(rows[2].measured.contains("129000 events, 0 lost"));
        // Probe links of the programs first run during the load are reported (and judged in
        // the fds row).
        assert!(
            rows[1]
                .measured
                .contains("(8 after the warm-up; probe links from the warm-up to the end +"),
            "{}",
            rows[1].measured
        );
        assert!(rows.iter().all(|r| r.met != Some(false)));
    }

    #[test]
    fn loss_a_missing_lookup_growth_or_a_fault_fails_a_guest_soak() {
        let lost = parse_guest_report(&report(|_| 30 << 10, 3, 180)).unwrap();
        let (_, failed) = guest_verdict(&boot(Vec::new()), Some(&lost));
        assert!(failed[0].contains("3 lost"), "{failed:?}");

        let missed = parse_guest_report(&report(|_| 30 << 10, 0, 179)).unwrap();
        let (rows, failed) = guest_verdict(&boot(Vec::new()), Some(&missed));
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(rows[2].met, Some(false));

        // 1 MiB more a sample: the last window is far above the first.
        let growing = parse_guest_report(&report(|i| (30 + i) << 10, 0, 180)).unwrap();
        let (rows, failed) = guest_verdict(&boot(Vec::new()), Some(&growing));
        assert!(failed.iter().any(|f| f.contains("RSS grew")), "{failed:?}");
        assert_eq!(rows[3].met, Some(false));

        // The first 30-minute 6.1 soak: probe links of fresh programs (kept then for the
        // trace's life) up to the open-files limit.
        let exhausted = report(|_| 30 << 10, 0, 180).replace(
            "\"at_secs\":105.0,\"fds\":49,",
            "\"at_secs\":105.0,\"fds\":1021,",
        );
        let exhausted = parse_guest_report(&exhausted).unwrap();
        let (rows, failed) = guest_verdict(&boot(Vec::new()), Some(&exhausted));
        assert_eq!(rows[5].key, "vm6.1.soak.fd_limit");
        assert_eq!(rows[5].measured, "at most 1021 open, soft limit 1024");
        assert_eq!(
            failed,
            ["the tracer came within 10% of its open-files limit (1021 of 1024)"]
        );

        let fault = "a kernel soft lockup during guest_soak (console line 900): watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [ring-drain:674]";
        let clean = parse_guest_report(&report(|_| 30 << 10, 0, 180)).unwrap();
        let (rows, failed) = guest_verdict(&boot(vec![fault.into()]), Some(&clean));
        assert!(failed[0].starts_with("kernel faults: a kernel soft lockup"));
        assert_eq!(rows[0].met, Some(false));
        assert!(rows[0].measured.contains("[ring-drain:674]"));

        // A guest that died in the soak wrote no report: its fault is still the verdict.
        let dead = GuestBoot {
            finished: false,
            ..boot(vec![fault.into()])
        };
        let (rows, failed) = guest_verdict(&dead, None);
        assert_eq!(rows.len(), 1);
        assert_eq!(failed.len(), 3, "{failed:?}");
    }

    #[test]
    fn a_report_that_is_not_guest_soaks_is_an_error() {
        assert!(parse_guest_report("{}").is_err());
        let no_samples = report(|_| 1, 0, 180).replace("\"samples\":[", "\"samples\":[],\"x\":[");
        assert!(parse_guest_report(&no_samples).is_err());
    }

    #[test]
    fn the_footprint_judges_windows_not_single_samples() {
        let at = |i: u64, rss_kib: u64| Sample {
            at: Duration::from_secs(i * 5),
            rss_kib,
            rss_kinds: RssKinds::default(),
            fds: 10,
            probe_fds: 4,
        };
        // A 10-minute load: 60 s warm-up. Bursts every other sample do not move the medians;
        // the sample after the load (far lower) is not in the last window.
        let mut samples: Vec<Sample> = (0..=120)
            .map(|i| at(i, if i % 2 == 0 { 50 << 10 } else { 58 << 10 }))
            .collect();
        samples.push(at(121, 10 << 10));
        let f = Footprint::of(&samples, warmup_of(Duration::from_secs(600)));
        assert!(f.rss_ok() && f.fds_ok(), "{f:?}");
        // 16 MiB more in the last minute (twice the bursts' swing): growth.
        for s in samples
            .iter_mut()
            .filter(|s| s.at >= Duration::from_secs(540))
        {
            s.rss_kib += 16 << 10;
            s.fds += 5;
        }
        let f = Footprint::of(&samples, warmup_of(Duration::from_secs(600)));
        assert!(!f.rss_ok(), "{f:?}");
        assert!(!f.fds_ok(), "{f:?}");
    }
}
