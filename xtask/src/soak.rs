//! `cargo xtask soak [--minutes N]`: the tracer under continuous mixed load for a long time
//! (default 10 minutes) — a round a second of getaddrinfo and netlink loops (`load_gen`), `ip
//! -batch` route gets, address and route dumps and `getent`, each a new process, in a namespace
//! the harness makes —
//! while it traces the whole node with JSON to a pipe and a pcap to a file. Checks, and records
//! in the benchmark history (BENCHMARKS.md): RSS flat after warm-up, no fd leak, 0 lost (or lost
//! counted exactly: every `load_gen` call is either an event or in `lost`), the pcap readable to
//! its end.
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::bench::{self, BenchNetns};
use crate::run;

/// One round of load starts at most this often: a busy node's control plane (500 lookups, 2,000
/// netlink messages and 500 route gets a second, and a dump), not a storm — bursts and their loss
/// are `cargo xtask bench`'s.
const ROUND_PERIOD: Duration = Duration::from_secs(1);

/// RSS growth allowed from the window after warm-up to the load's last window: the larger of
/// this and 10%.
const RSS_SLACK_KIB: u64 = 4 << 10;

/// The median RSS of the samples taken from `from` on, for `window` (samples are 5 s apart; a
/// round's burst makes single samples swing by a few MiB, so a window's median judges a trend,
/// not the phase one sample happened to catch); 0 without samples there.
fn median_rss(samples: &[Sample], from: Duration, window: Duration) -> u64 {
    let mut rss: Vec<u64> = samples
        .iter()
        .filter(|s| s.at >= from && s.at < from + window)
        .map(|s| s.rss_kib)
        .collect();
    rss.sort_unstable();
    rss.get(rss.len() / 2).copied().unwrap_or(0)
}

/// One sample of the tracer.
#[derive(Clone, Copy)]
struct Sample {
    at: Duration,
    rss_kib: u64,
    fds: usize,
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
    Sample {
        at,
        rss_kib: bench::proc_kib(pid, "status", "VmRSS"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| d.count())
            .unwrap_or(0),
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
    let warmup = (duration / 10).min(Duration::from_secs(60));
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

    let warm = samples
        .iter()
        .find(|s| s.at >= warmup)
        .copied()
        .unwrap_or(samples[0]);
    let end = *samples.last().expect("samples");
    let peak = samples.iter().map(|s| s.rss_kib).max().unwrap_or(0);
    // RSS: the median of the window after warm-up against the median of the load's last window
    // (the same length; the sample taken after the load stopped is not in it).
    let under_load = &samples[..samples.len() - 1];
    let load_end = under_load.last().map(|s| s.at).unwrap_or_default();
    let warm_rss = median_rss(under_load, warmup, warmup);
    let end_rss = median_rss(
        under_load,
        load_end.saturating_sub(warmup),
        warmup + Duration::from_secs(1),
    );
    let made_gai = made.gai.load(Ordering::Relaxed);
    let made_nl = made.netlink_messages.load(Ordering::Relaxed);
    let rss_ok = end_rss <= warm_rss + RSS_SLACK_KIB.max(warm_rss / 10);
    let fds_ok = end.fds <= warm.fds + 2;
    let counts_ok = lost == 0 && seen.gai == made_gai && seen.netlink_messages == made_nl;
    let outputs_ok = status == 0 && analyzed.status.success() && seen.last.contains("\"summary\"");

    let check =
        |key: &str, what: &str, measured: String, target: &str, met: Option<bool>| bench::Row {
            key: format!("soak.{key}"),
            what: format!("soak: {what}"),
            measured,
            ratio: None,
            target: target.into(),
            met,
        };
    let w = warmup.as_secs_f64();
    let rows = vec![
        check(
            "load",
            "load",
            format!(
                "{:.0} s, {} rounds (one a second at most): {made_gai} getaddrinfo calls and {made_nl} netlink messages by load_gen, plus per round 500 `ip -batch` route gets, an address and a route dump, `getent`",
                samples.last().map(|s| s.at.as_secs_f64()).unwrap_or(0.0),
                made.cycles.load(Ordering::Relaxed)
            ),
            "—",
            None,
        ),
        check(
            "events",
            "events vs calls",
            format!(
                "load_gen getaddrinfo events {} of {made_gai}, netlink events {} of {made_nl}; tracer: {events} events, {lost} lost",
                seen.gai, seen.netlink_messages
            ),
            "every call an event, 0 lost",
            Some(counts_ok),
        ),
        check(
            "rss",
            "tracer RSS",
            format!(
                "start {} MiB; median of the {w:.0} s after the {w:.0} s warm-up {} MiB, of the load's last {w:.0} s {} MiB; after the load {} MiB, peak {} MiB",
                samples[0].rss_kib >> 10,
                warm_rss >> 10,
                end_rss >> 10,
                end.rss_kib >> 10,
                peak >> 10
            ),
            "last window ≤ first + max(4 MiB, 10%)",
            Some(rss_ok),
        ),
        check(
            "fds",
            "tracer fds",
            format!("start {}, after warm-up {}, end {}", samples[0].fds, warm.fds, end.fds),
            "end ≤ warm-up + 2",
            Some(fds_ok),
        ),
        check(
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
        check(
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
    if !(rss_ok && fds_ok && counts_ok && outputs_ok) {
        bail!(
            "soak failed a check (see the table above); tracer stderr:\n{}",
            stderr.lines().rev().take(5).collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}
