//! Time spent inside one process's eBPF programs, from the kernel's own accounting
//! (`kernel.bpf_stats_enabled`: each program's `run_time_ns` and `run_cnt`). The bench uses it
//! to split a storm's cost into the tracer's programs and the rest, in nanoseconds per request,
//! free of the wall-clock noise of this shared machine.
use std::collections::BTreeMap;
use std::process::Command;

use anyhow::Context as _;

const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// `kernel.bpf_stats_enabled` turned on for as long as this lives, then set back to what it was.
/// (The accounting costs every program two clock reads a run, so it is on only while measuring.)
pub(crate) struct BpfStats {
    before: String,
}

impl BpfStats {
    /// Turns the accounting on.
    pub(crate) fn enable() -> anyhow::Result<Self> {
        let before = std::fs::read_to_string(STATS_SYSCTL).with_context(|| {
            format!("reading {STATS_SYSCTL} (the kernel's eBPF run-time accounting)")
        })?;
        std::fs::write(STATS_SYSCTL, "1")
            .with_context(|| format!("writing 1 to {STATS_SYSCTL}"))?;
        Ok(BpfStats { before })
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        let _ = std::fs::write(STATS_SYSCTL, self.before.trim());
    }
}

/// Run time and runs of one program (tail-called programs count in their caller's time).
#[derive(Clone, Copy, Default)]
pub(crate) struct ProgramTime {
    /// Nanoseconds inside the program, summed over its runs.
    pub(crate) ns: u64,
    /// How many times it ran.
    pub(crate) runs: u64,
}

/// The accounting of every eBPF program process `pid` holds open, by program name (programs
/// of the same name summed).
pub(crate) fn program_times(pid: u32) -> anyhow::Result<BTreeMap<String, ProgramTime>> {
    let mut ids = Vec::new();
    let dir = format!("/proc/{pid}/fdinfo");
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {dir}"))? {
        let info = std::fs::read_to_string(entry?.path()).unwrap_or_default();
        if let Some(id) = info.lines().find_map(|l| l.strip_prefix("prog_id:")) {
            ids.extend(id.trim().parse::<u64>().ok());
        }
    }
    let shown = crate::output(Command::new("bpftool").args(["prog", "show", "--json"]))
        .context("listing eBPF programs (`cargo xtask setup --for-tests` installs bpftool)")?;
    let programs: Vec<serde_json::Value> =
        serde_json::from_str(&shown).context("parsing bpftool prog show --json")?;
    let mut times = BTreeMap::<String, ProgramTime>::new();
    for p in programs {
        if !p["id"].as_u64().is_some_and(|id| ids.contains(&id)) {
            continue;
        }
        let name = p["name"].as_str().unwrap_or("?").to_string();
        let t = times.entry(name).or_default();
        t.ns += p["run_time_ns"].as_u64().unwrap_or(0);
        t.runs += p["run_cnt"].as_u64().unwrap_or(0);
    }
    Ok(times)
}

/// What ran between two [`program_times`] snapshots, the busiest program first.
pub(crate) fn between(
    before: &BTreeMap<String, ProgramTime>,
    after: &BTreeMap<String, ProgramTime>,
) -> Vec<(String, ProgramTime)> {
    let mut ran: Vec<(String, ProgramTime)> = after
        .iter()
        .map(|(name, a)| {
            let b = before.get(name).copied().unwrap_or_default();
            let t = ProgramTime {
                ns: a.ns.saturating_sub(b.ns),
                runs: a.runs.saturating_sub(b.runs),
            };
            (name.clone(), t)
        })
        .filter(|(_, t)| t.runs > 0)
        .collect();
    ran.sort_by_key(|(_, t)| std::cmp::Reverse(t.ns));
    ran
}
