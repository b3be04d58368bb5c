//! The benchmarks' history and what is drawn from it.
//!
//! Every run of `cargo xtask bench`, `bench --vm` and `soak` appends one line to
//! `docs/benchmarks/history.jsonl` ([`RunRecord`]: when, which command, on what machine and
//! kernel, and each measurement under a stable key). BENCHMARKS.md is then written again from
//! the history ([`page`]): one screen with the latest figure of each key beside its target, and
//! one SVG plot per ratio ([`plot`], `docs/benchmarks/KEY.svg`) showing how it moved run by run.
//! Everything here is a pure function of the history but [`load`] and [`append`].
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// One measurement of a run, under its stable key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Stable across runs and sizes (`netlink_storm`, `exec_storm.hold_off`, `vm6.1.storm.pcap`):
    /// what the plots and the page follow.
    pub key: String,
    /// What was measured, with this run's sizes.
    pub what: String,
    /// The figures, in words.
    pub measured: String,
    /// Traced ÷ untraced (or peer ÷ ours where the row says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The target, in words (`≤ 1.05×`), or what the row is beside.
    pub target: String,
    /// Whether the target was met (none for a row without a target of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub met: Option<bool>,
}

/// One run: a line of the history file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// When it ended, `YYYY-MM-DD HH:MM UTC`.
    pub date: String,
    /// The command that re-measures it (`cargo xtask bench --quick`).
    pub command: String,
    /// CPUs, model and memory of the machine that ran it (a guest's, for `bench --vm`).
    pub machine: String,
    /// The kernel release it ran on.
    pub kernel: String,
    /// How that kernel's netlink was captured and other hook facts, in words.
    pub hooks: String,
    /// How long the run took, in seconds.
    pub took_secs: f64,
    /// Its measurements.
    pub measurements: Vec<Measurement>,
    /// How each was measured: the commands, in words.
    pub commands: Vec<String>,
}

/// The history file under the workspace `root`.
pub fn history_file(root: &Path) -> std::path::PathBuf {
    root.join("docs/benchmarks/history.jsonl")
}

/// The runs of the history file at `path`, oldest first (none when it does not exist yet).
pub fn load(path: &Path) -> anyhow::Result<Vec<RunRecord>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).with_context(|| {
                format!(
                    "{}:{}: not a benchmark run record (fix or remove the line)",
                    path.display(),
                    n + 1
                )
            })
        })
        .collect()
}

/// Appends `run` as one line to the history file at `path`.
pub fn append(path: &Path, run: &RunRecord) -> anyhow::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    writeln!(file, "{}", serde_json::to_string(run)?)?;
    Ok(())
}

/// The latest measurement of each key that the latest run of some command still measures, with
/// the run it came from, in the order keys first appeared. A key no command measures any more
/// (a renamed row, an old ring size) is history, not a current result.
pub fn latest(history: &[RunRecord]) -> Vec<(&RunRecord, &Measurement)> {
    let mut newest: BTreeMap<String, &RunRecord> = BTreeMap::new();
    for run in history {
        newest.insert(family(&run.command), run);
    }
    let current: std::collections::HashSet<&str> = newest
        .values()
        .flat_map(|run| run.measurements.iter().map(|m| m.key.as_str()))
        .collect();
    let mut order: Vec<&str> = Vec::new();
    let mut last: BTreeMap<&str, (&RunRecord, &Measurement)> = BTreeMap::new();
    for run in history {
        for m in run
            .measurements
            .iter()
            .filter(|m| current.contains(m.key.as_str()))
        {
            if last.insert(m.key.as_str(), (run, m)).is_none() {
                order.push(m.key.as_str());
            }
        }
    }
    order.iter().map(|k| last[k]).collect()
}

/// A command without the options that change only sizes (`--quick`, `--rounds N`,
/// `--minutes N`): runs of one family measure the same keys.
fn family(command: &str) -> String {
    let mut words = command.split_whitespace();
    let mut kept = Vec::new();
    while let Some(word) = words.next() {
        match word {
            "--quick" => {}
            "--rounds" | "--minutes" => {
                words.next();
            }
            _ => kept.push(word),
        }
    }
    kept.join(" ")
}

/// Every ratio measured under `key`, oldest first, with its run's date.
pub fn ratios_of<'a>(history: &'a [RunRecord], key: &str) -> Vec<(&'a str, f64)> {
    history
        .iter()
        .filter_map(|run| {
            run.measurements
                .iter()
                .find(|m| m.key == key)
                .and_then(|m| m.ratio)
                .map(|r| (run.date.as_str(), r))
        })
        .collect()
}

/// The bound of a target such as `≤ 1.05×` (or `≥ 20×`), if it is one ratio.
pub fn goal_of(target: &str) -> Option<f64> {
    let rest = target
        .trim()
        .strip_prefix('≤')
        .or_else(|| target.trim().strip_prefix('≥'))?;
    rest.trim().strip_suffix('×')?.trim().parse().ok()
}

/// A key as a file name: letters, digits, `.`, `-` and `_` kept, anything else `_`.
pub fn plot_file_name(key: &str) -> String {
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.svg")
}

/// Escapes `text` for XML character data and attribute values.
fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG plot of `points` (date, ratio; oldest first) for `title`, with the target's bound
/// `goal` as a dashed line and 1.0× (no cost) as a thin one.
pub fn plot(title: &str, points: &[(&str, f64)], goal: Option<f64>) -> String {
    const W: f64 = 560.0;
    const H: f64 = 200.0;
    const LEFT: f64 = 48.0;
    const RIGHT: f64 = 12.0;
    const TOP: f64 = 28.0;
    const BOTTOM: f64 = 34.0;
    let values = points
        .iter()
        .map(|&(_, r)| r)
        .chain(goal)
        .chain(std::iter::once(1.0));
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = ((hi - lo) * 0.1).max(0.05);
    let (lo, hi) = (lo - pad, hi + pad);
    let x = |i: usize| {
        if points.len() < 2 {
            LEFT + (W - LEFT - RIGHT) / 2.0
        } else {
            LEFT + (W - LEFT - RIGHT) * i as f64 / (points.len() - 1) as f64
        }
    };
    let y = |v: f64| TOP + (H - TOP - BOTTOM) * (hi - v) / (hi - lo);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(s, "<rect width=\"{W}\" height=\"{H}\" fill=\"#fff\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{LEFT}\" y=\"16\" font-size=\"12\" font-weight=\"bold\">{}</text>",
        xml_escape(title)
    );
    let axis_bottom = H - BOTTOM;
    let _ = writeln!(
        s,
        "<line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{axis_bottom}\" stroke=\"#999\"/>"
    );
    for (value, label, style) in [
        (Some(1.0), "1.00× (untraced)", "stroke=\"#bbb\""),
        (goal, "target", "stroke=\"#2a7\" stroke-dasharray=\"6 4\""),
    ] {
        let Some(v) = value else { continue };
        let yy = y(v);
        let _ = writeln!(
            s,
            "<line x1=\"{LEFT}\" y1=\"{yy:.1}\" x2=\"{:.1}\" y2=\"{yy:.1}\" {style}/>",
            W - RIGHT
        );
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#555\">{}</text>",
            LEFT + 4.0,
            yy - 3.0,
            if label == "target" {
                format!("target {v:.2}×")
            } else {
                label.to_string()
            }
        );
    }
    for v in [lo + pad, hi - pad] {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\">{v:.2}×</text>",
            LEFT - 4.0,
            y(v) + 4.0
        );
    }
    if !points.is_empty() {
        let path: Vec<String> = points
            .iter()
            .enumerate()
            .map(|(i, &(_, r))| format!("{:.1},{:.1}", x(i), y(r)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"#36c\" stroke-width=\"2\" points=\"{}\"/>",
            path.join(" ")
        );
        for (i, &(date, r)) in points.iter().enumerate() {
            let met = goal.is_none_or(|g| r <= g);
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"><title>{} {r:.2}×</title></circle>",
                x(i),
                y(r),
                if met { "#36c" } else { "#c33" },
                xml_escape(date)
            );
        }
        let (first, last) = (points[0].0, points[points.len() - 1].0);
        let _ = writeln!(
            s,
            "<text x=\"{LEFT}\" y=\"{:.1}\" fill=\"#555\">{}</text>",
            H - 12.0,
            xml_escape(first)
        );
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\">{} ({} runs)</text>",
            W - RIGHT,
            H - 12.0,
            xml_escape(last),
            points.len()
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Where the dated diary that BENCHMARKS.md used to be can still be read.
const DIARY: &str = "git show 3c0bc23:BENCHMARKS.md";

/// A run's machine and its kernel, as the table of runs shows them.
fn run_place(run: &RunRecord) -> String {
    format!("{}; kernel {}", run.machine, run.kernel)
}

/// A `met` cell: yes, **no**, or — for a row without a target.
pub fn met_cell(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "—",
    }
}

/// A ratio cell: `1.24×`, or — for a row without a ratio.
pub fn ratio_cell(ratio: Option<f64>) -> String {
    ratio.map_or("—".into(), |r| format!("{r:.2}×"))
}

/// BENCHMARKS.md, written from the history: the latest figure of each key beside its target
/// and plot, the decompositions apart, the runs they come from and how to re-measure them.
pub fn page(history: &[RunRecord], plotted: &dyn Fn(&str) -> bool) -> String {
    let latest = latest(history);
    let mut runs: Vec<&RunRecord> = Vec::new();
    for (run, _) in &latest {
        if !runs.iter().any(|r| std::ptr::eq(*r, *run)) {
            runs.push(run);
        }
    }
    let run_no = |run: &RunRecord| {
        runs.iter()
            .position(|r| std::ptr::eq(*r, run))
            .map_or(0, |i| i + 1)
    };
    let mut s = String::new();
    s.push_str("# Benchmarks\n\n");
    s.push_str(
        "Where each measure stands today: its latest figure, written from \
         [the history](docs/benchmarks/history.jsonl) by the run that made it. **How to read \
         them:** a ratio is traced ÷ untraced, measured side by side in one run (rounds of \
         untraced, traced, traced, untraced; the faster of each pair; the median of the rounds), \
         so this shared machine's noise mostly cancels; absolute times are only context. Where \
         a row names an anchor — `strace`, nlmon + `tcpdump`, `tshark` — it ran beside ours in \
         the same run. *met* compares the latest figure with the target. A plot follows a ratio \
         across runs (dashed: the target). The run column points at the table of runs below: \
         machine, kernel, hooks and the command that re-measures it.\n\n",
    );
    let (targets, parts): (Vec<_>, Vec<_>) = latest.iter().partition(|(_, m)| m.met.is_some());
    s.push_str("| measure | latest | ratio | target | met | run | plot |\n");
    s.push_str("|---|---|---|---|---|---|---|\n");
    let plot_cell = |m: &Measurement| {
        if m.ratio.is_some() && plotted(&m.key) {
            format!("[plot](docs/benchmarks/{})", plot_file_name(&m.key))
        } else {
            "—".into()
        }
    };
    for (run, m) in &targets {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | [{}](#runs) | {} |",
            m.what,
            m.measured,
            ratio_cell(m.ratio),
            m.target,
            met_cell(m.met),
            run_no(run),
            plot_cell(m)
        );
    }
    if !parts.is_empty() {
        let _ = write!(
            s,
            "\n<details><summary><b>What the ratios are made of</b>: {} decompositions and context \
             rows, no target of their own</summary>\n\n| measure | latest | ratio | run | plot \
             |\n|---|---|---|---|---|\n",
            parts.len()
        );
        for (run, m) in &parts {
            let _ = writeln!(
                s,
                "| {} | {} | {} | [{}](#runs) | {} |",
                m.what,
                m.measured,
                ratio_cell(m.ratio),
                run_no(run),
                plot_cell(m)
            );
        }
        s.push_str("\n</details>\n");
    }
    s.push_str("\n## Runs\n\n| run | date | command | machine; kernel | hooks | took |\n|---|---|---|---|---|---|\n");
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "| {} | {} | `{}` | {} | {} | {:.0} s |",
            i + 1,
            run.date,
            run.command,
            run_place(run),
            run.hooks,
            run.took_secs
        );
    }
    s.push_str("\nHow each run measured (NS: the harness's namespace, a veth pair with no link to the host):\n\n");
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "<details><summary>run {}: <code>{}</code></summary>\n",
            i + 1,
            run.command
        );
        for c in &run.commands {
            let _ = writeln!(s, "- `{c}`");
        }
        s.push_str("\n</details>\n");
    }
    let _ = writeln!(
        s,
        "\nWritten by `cargo xtask bench`, `bench --vm` and `soak` after each run ({} runs in the \
         history). The dated diary this file used to be, with the reasoning behind each change: \
         `{DIARY}`.",
        history.len()
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(key: &str, ratio: Option<f64>, met: Option<bool>) -> Measurement {
        Measurement {
            key: key.into(),
            what: format!("what {key}"),
            measured: format!("measured {key}"),
            ratio,
            target: if met.is_some() {
                "≤ 1.05×".into()
            } else {
                "(beside)".into()
            },
            met,
        }
    }

    fn run(date: &str, measurements: Vec<Measurement>) -> RunRecord {
        RunRecord {
            date: date.into(),
            command: "cargo xtask bench --quick".into(),
            machine: "2 × CPU, 24 GiB".into(),
            kernel: "6.18".into(),
            hooks: "sock tracepoints".into(),
            took_secs: 60.0,
            measurements,
            commands: vec!["ip -batch".into()],
        }
    }

    #[test]
    fn the_latest_figure_of_each_key_wins_in_first_seen_order() {
        let history = vec![
            run(
                "d1",
                vec![m("a", Some(1.5), Some(false)), m("b", Some(1.1), None)],
            ),
            run("d2", vec![m("a", Some(1.02), Some(true))]),
        ];
        let latest = latest(&history);
        let keys: Vec<(&str, &str, Option<f64>)> = latest
            .iter()
            .map(|(r, m)| (m.key.as_str(), r.date.as_str(), m.ratio))
            .collect();
        assert_eq!(keys, [("a", "d2", Some(1.02))], "b is no longer measured");
        let mut other = run("d3", vec![m("c", Some(1.0), None)]);
        other.command = "cargo xtask bench --vm --kernel 6.1".into();
        let mut both = history.clone();
        both.push(other);
        let keys: Vec<&str> = super::latest(&both)
            .iter()
            .map(|(_, m)| m.key.as_str())
            .collect();
        assert_eq!(keys, ["a", "c"], "each command's latest run counts");
        assert_eq!(ratios_of(&history, "a"), [("d1", 1.5), ("d2", 1.02)]);
    }

    #[test]
    fn sizes_do_not_make_a_command_of_their_own() {
        assert_eq!(family("cargo xtask bench --quick"), "cargo xtask bench");
        assert_eq!(
            family("cargo xtask bench --vm --kernel 6.1 --rounds 9"),
            "cargo xtask bench --vm --kernel 6.1"
        );
        assert_eq!(family("cargo xtask soak --minutes 10"), "cargo xtask soak");
    }

    #[test]
    fn goals_are_read_from_ratio_targets_only() {
        assert_eq!(goal_of("≤ 1.05×"), Some(1.05));
        assert_eq!(goal_of("≥ 20×"), Some(20.0));
        assert_eq!(goal_of("0 lost, ≤ 1.5 µs/event (median run)"), None);
        assert_eq!(goal_of("(decomposes the storm's ratio)"), None);
    }

    #[test]
    fn a_history_survives_its_file_and_a_bad_line_is_named() {
        let dir = std::env::temp_dir().join(format!("history-test-{}", std::process::id()));
        let path = dir.join("history.jsonl");
        let _ = std::fs::remove_dir_all(&dir);
        let one = run("d1", vec![m("a", Some(1.5), Some(false))]);
        append(&path, &one).unwrap();
        append(&path, &one).unwrap();
        assert_eq!(load(&path).unwrap(), vec![one.clone(), one]);
        std::fs::write(&path, "{\"date\": 1}\n").unwrap();
        let e = format!("{:#}", load(&path).unwrap_err());
        assert!(
            e.contains("history.jsonl:1: not a benchmark run record"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert!(load(&path).unwrap().is_empty());
    }

    #[test]
    fn the_plot_draws_each_run_and_the_target() {
        let svg = plot(
            "exec storm <1>",
            &[("2026-12-01", 1.24), ("2026-12-03", 1.04)],
            Some(1.05),
        );
        assert_eq!(svg.matches("<circle").count(), 2);
        assert!(
            svg.contains("fill=\"#c33\""),
            "the first run missed the target"
        );
        assert!(svg.contains("target 1.05×"));
        assert!(svg.contains("exec storm &lt;1&gt;"));
        assert!(svg.contains("2026-12-03 (2 runs)"));
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        // One run, no target: still a drawing.
        let one = plot("x", &[("d", 2.0)], None);
        assert_eq!(one.matches("<circle").count(), 1);
        assert!(!one.contains("target"));
    }

    #[test]
    fn the_page_keeps_targets_and_decompositions_apart() {
        let history = vec![
            run(
                "d1",
                vec![m("a", Some(1.5), Some(false)), m("b", Some(1.1), None)],
            ),
            run(
                "d2",
                vec![m("a", Some(1.02), Some(true)), m("b", Some(1.1), None)],
            ),
        ];
        let page = page(&history, &|key| key == "a");
        let golden = "\
| what a | measured a | 1.02× | ≤ 1.05× | yes | [1](#runs) | [plot](docs/benchmarks/a.svg) |";
        assert!(page.contains(golden), "{page}");
        assert!(
            page.contains("| what b | measured b | 1.10× | [1](#runs) | — |"),
            "{page}"
        );
        assert!(page.contains("<details><summary><b>What the ratios are made of</b>: 1"));
        assert!(
            page.contains("| 1 | d2 | `cargo xtask bench --quick` |"),
            "{page}"
        );
        assert!(!page.contains("| 2 | d1 |"), "{page}");
        assert!(page.contains(DIARY));
    }

    #[test]
    fn plot_names_are_file_names() {
        assert_eq!(plot_file_name("vm6.1.storm.pcap"), "vm6.1.storm.pcap.svg");
        assert_eq!(plot_file_name("a/b c"), "a_b_c.svg");
    }
}
