//! The exec hold's rows of `cargo xtask bench`: what holding costs programs already known (a
//! storm of `fork`+`exec` of `/bin/true`, traced and untraced, and with `--exec-hold off`), and
//! how long a new program waits at its exec (a small static Go program, a large one, a glibc
//! program with its own libc copy in its own mount namespace), from the trace's `exec_hold`
//! events.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Context as _;

use super::{abba, timed, Row, Tracer};

/// `fork`+`exec`s of `/bin/true` in the storm.
const EXECS: usize = 5000;

/// Fresh files per hold-time row: each is held once.
const HOLDS: usize = 20;

/// The exec storm, traced (holding on, the default), traced with `--exec-hold off`, untraced.
pub fn exec_storm_rows(
    rounds: usize,
    tool: &Path,
    dir: &Path,
    commands: &mut Vec<String>,
) -> anyhow::Result<Vec<Row>> {
    let script = format!("i=0; while [ $i -lt {EXECS} ]; do /bin/true; i=$((i+1)); done");
    let run = |pinned: bool| {
        let mut command = if pinned {
            let mut c = Command::new("taskset");
            c.args(["-c", "0", "sh"]);
            c
        } else {
            Command::new("sh")
        };
        timed(command.args(["-c", &script]))
    };
    let with = |extra: &'static [&'static str], pinned: bool| {
        abba(
            rounds,
            || run(pinned),
            || Tracer::start(tool, dir, extra),
            |t| t.stop().map(drop),
        )
    };
    let held = with(&[], false)?;
    let off = with(&["--exec-hold", "off"], false)?;
    // The libc probes' share: each exec of a glibc program maps libc, and the kernel writes a
    // breakpoint into each probed page of it (a page copied per probe, per process).
    let no_libc = with(&["--no-getaddrinfo"], false)?;
    // The storm on one CPU, traced and untraced: what the hooks cost each exec, without the
    // scheduler spreading the storm's processes over both CPUs differently while a tracer runs
    // (on this 2-vCPU VM the storm's CPU is mostly ld.so's cpuid traps, and cross-CPU wake-ups
    // are dear).
    let pinned = with(&[], true)?;
    commands.push(format!(
        "exec storm: sh -c '{script}' untraced, under `trace --format json`, under `trace --exec-hold off` and under `trace --no-getaddrinfo`; and `taskset -c 0 sh -c '…'` untraced and under `trace --format json`"
    ));
    Ok(vec![
        Row {
            key: "exec_storm".into(),
            what: format!("exec storm: {EXECS} fork+exec of /bin/true (known: never held)"),
            measured: format!("{}; --exec-hold off {:.2}x", held.in_seconds(), off.ratio),
            ratio: Some(held.ratio),
            target: "≤ 1.05×".into(),
            met: Some(held.ratio <= 1.05),
        },
        Row::decomposition(
            "exec_storm.hold_off".into(),
            "exec storm with --exec-hold off (the other hooks alone)".into(),
            off.in_seconds(),
            off.ratio,
        ),
        Row::decomposition(
            "exec_storm.one_cpu".into(),
            "exec storm pinned to one CPU (taskset -c 0), traced by default vs untraced: the hooks' own cost per exec".into(),
            pinned.in_seconds(),
            pinned.ratio,
        ),
        Row::decomposition(
            "exec_storm.no_libc_probes".into(),
            "exec storm with --no-getaddrinfo (no probe in libc: none of its pages gets a breakpoint at each exec)".into(),
            no_libc.in_seconds(),
            no_libc.ratio,
        ),
    ])
}

/// Hold times of new programs: median and p99 (the slowest of [`HOLDS`]) per kind.
pub fn hold_time_rows(
    tool: &Path,
    dir: &Path,
    go_small: &Path,
    commands: &mut Vec<String>,
) -> anyhow::Result<Vec<Row>> {
    let go_large = large_go_program(dir)?;
    let mut rows = Vec::new();
    for (key, what, program) in [
        (
            "exec_hold.small_go",
            "small static Go program",
            go_small.to_path_buf(),
        ),
        ("exec_hold.large_go", "large static Go program", go_large),
    ] {
        let size = std::fs::metadata(&program)?.len() >> 20;
        let held = holds(tool, dir, |copy| {
            std::fs::copy(&program, copy)?;
            crate::run(Command::new(copy).arg("1"))
        })?;
        rows.push(hold_row(key, format!("{what} ({size} MiB)"), &held));
    }
    // A glibc program in its own mount namespace with its own libc copy, as in a container:
    // the copy is attached while the program waits.
    let libc = "/lib/x86_64-linux-gnu/libc.so.6";
    let held = holds(tool, dir, |copy| {
        std::fs::copy("/usr/bin/getent", copy)?;
        let own_libc = copy.with_extension("libc");
        std::fs::copy(libc, &own_libc)?;
        let script = format!(
            "mount --bind '{}' {libc} && exec '{}' ahostsv4 localhost",
            own_libc.display(),
            copy.display()
        );
        crate::run(
            Command::new("unshare")
                .args(["-m", "--propagation", "private", "sh", "-c", &script])
                .stdout(std::process::Stdio::null()),
        )
    })?;
    rows.push(hold_row(
        "exec_hold.container_libc",
        "glibc program with its own libc copy (unshare -m, bind mount)".into(),
        &held,
    ));
    commands.push(format!(
        "hold times: {HOLDS} fresh copies of each program run once under `trace --format json`; the exec_hold events' held_us"
    ));
    Ok(rows)
}

fn hold_row(key: &str, what: String, held: &[Duration]) -> Row {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let median = held[held.len() / 2];
    let p99 = held[(held.len() * 99 / 100).min(held.len() - 1)];
    Row {
        key: key.into(),
        what: format!("exec hold of a new {what}"),
        measured: format!(
            "median {:.1} ms, p99 {:.1} ms over {} holds",
            ms(median),
            ms(p99),
            held.len()
        ),
        ratio: None,
        target: format!("all in time (limit {} ms)", 3000),
        met: Some(held.len() == HOLDS),
    }
}

/// Runs `run` on [`HOLDS`] fresh files under one trace; the hold times of those files, sorted.
fn holds(
    tool: &Path,
    dir: &Path,
    mut run: impl FnMut(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Duration>> {
    let copies = dir.join("held");
    let _ = std::fs::remove_dir_all(&copies);
    std::fs::create_dir_all(&copies)?;
    let tracer = Tracer::start(tool, dir, &[])?;
    let mut files = Vec::new();
    for n in 0..HOLDS {
        let copy = copies.join(format!("p{n}"));
        run(&copy)?;
        files.push(copy.display().to_string());
    }
    tracer.stop()?;
    let text = std::fs::read_to_string(dir.join("rec.jsonl"))?;
    let mut held: Vec<Duration> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| {
            e["kind"] == "exec_hold"
                && e["in_time"] == true
                && e["file"]
                    .as_str()
                    .is_some_and(|f| files.iter().any(|c| c == f))
        })
        .filter_map(|e| e["held_us"].as_u64())
        .map(Duration::from_micros)
        .collect();
    held.sort();
    anyhow::ensure!(!held.is_empty(), "no exec_hold event for the fresh files");
    Ok(held)
}

/// A static Go program of at least 80 MB: the storm client with an 80 MB blob embedded (its
/// size is in the file the hold maps; its functions are the small program's).
fn large_go_program(dir: &Path) -> anyhow::Result<PathBuf> {
    let src = dir.join("large-go");
    std::fs::create_dir_all(&src)?;
    let blob = vec![0x5au8; 80 << 20];
    std::fs::write(src.join("blob.bin"), blob)?;
    std::fs::write(
        src.join("main.go"),
        "package main\n\nimport (\n\t_ \"embed\"\n\t\"net\"\n\t\"os\"\n)\n\n//go:embed blob.bin\nvar blob []byte\n\n\
         func main() {\n\tif _, err := net.LookupIP(\"localhost\"); err != nil || len(blob) == 0 {\n\t\tos.Exit(1)\n\t}\n}\n",
    )?;
    let out = dir.join("large-go-bin");
    crate::run(
        Command::new("/usr/lib/go-1.19/bin/go")
            .args(["build", "-ldflags=-s -w", "-o"])
            .arg(&out)
            .arg("main.go")
            .current_dir(&src)
            .env("CGO_ENABLED", "0")
            .env("GO111MODULE", "off")
            .env(
                "GOCACHE",
                crate::workspace_root().join("target/toolchains/go-cache"),
            ),
    )
    .context("building the large Go program")?;
    Ok(out)
}
