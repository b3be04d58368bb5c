//! Set-up's quiet terminal: one line per step (what it does, then how long it took) while the
//! programs it runs — apt-get, pip, npm, rustup, cargo install — write everything they say to a
//! log, `target/setup.log`. A step that fails prints the end of its output and names the log.
//! Nothing is said about what is already there, so a set-up with nothing to do is one line.
use std::fs::File;
use std::io::{BufRead as _, Seek as _, SeekFrom, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

/// How many of a failed step's last log lines the terminal gets.
const TAIL_LINES: usize = 25;

/// A log past this size is started afresh (each run appends to it otherwise).
const LOG_LIMIT_BYTES: u64 = 16 << 20;

/// Where the programs' output goes: `target/setup.log`.
pub fn log_path() -> PathBuf {
    crate::workspace_root().join("target/setup.log")
}

/// A set-up run: when it started, how many steps it ran, and the log once a step opened it.
pub struct Session {
    prefix: &'static str,
    log_path: PathBuf,
    started: Instant,
    steps: usize,
    log: Option<File>,
}

impl Session {
    /// A run whose lines start with `prefix` (`setup`).
    pub fn new(prefix: &'static str) -> Self {
        Self::logging_to(prefix, log_path())
    }

    /// A run that logs to `log_path`.
    fn logging_to(prefix: &'static str, log_path: PathBuf) -> Self {
        Session {
            prefix,
            log_path,
            started: Instant::now(),
            steps: 0,
            log: None,
        }
    }

    /// The log, opened (for appending, under a line naming this run) on first use.
    fn log(&mut self) -> anyhow::Result<&mut File> {
        if self.log.is_none() {
            let path = &self.log_path;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            let too_big = std::fs::metadata(path).is_ok_and(|m| m.len() > LOG_LIMIT_BYTES);
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .truncate(false)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            if too_big {
                file.set_len(0)?;
            }
            let since_epoch = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs();
            let args: Vec<String> = std::env::args().skip(1).collect();
            writeln!(
                file,
                "\n##### cargo xtask {} (pid {}, unix time {since_epoch})",
                args.join(" "),
                std::process::id()
            )?;
            self.log = Some(file);
        }
        Ok(self.log.as_mut().expect("opened above"))
    }

    /// Runs `body` as one step: prints `PREFIX: WHAT … ` and, when it is done, how long it
    /// took; when it fails, the last lines it logged and where the log is.
    pub fn step<T>(
        &mut self,
        what: &str,
        body: impl FnOnce(&mut Self) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let log = self.log()?;
        let start = log.seek(SeekFrom::End(0))?;
        writeln!(log, "\n=== {what}")?;
        eprint!("{}: {what} … ", self.prefix);
        let _ = std::io::stderr().flush();
        self.steps += 1;
        let t0 = Instant::now();
        let result = body(self);
        match &result {
            Ok(_) => eprintln!("{}", duration(t0.elapsed())),
            Err(e) => {
                eprintln!("failed after {}", duration(t0.elapsed()));
                let _ = writeln!(self.log()?, "=== failed: {e:#}");
                for line in tail(&self.log_path, start) {
                    eprintln!("  | {line}");
                }
                eprintln!(
                    "{}: the whole output is in {}",
                    self.prefix,
                    self.log_path.display()
                );
            }
        }
        result
    }

    /// Runs `cmd` with stdin closed and its output appended to the log; fails with its status.
    pub fn run(&mut self, cmd: &mut Command) -> anyhow::Result<()> {
        let log = self.log()?;
        writeln!(log, "$ {cmd:?}")?;
        let (out, err) = (log.try_clone()?, log.try_clone()?);
        let status = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .status()
            .with_context(|| format!("starting {:?}", cmd.get_program()))?;
        if !status.success() {
            bail!("{} failed ({status})", cmd.get_program().to_string_lossy());
        }
        Ok(())
    }

    /// Ends the run with one line: that all was there (`present`), or the total time and the log.
    pub fn finish(self, present: &str) {
        if self.steps == 0 {
            eprintln!(
                "{}: {present} ({})",
                self.prefix,
                duration(self.started.elapsed())
            );
        } else {
            eprintln!(
                "{}: done in {} (what the tools said: {})",
                self.prefix,
                duration(self.started.elapsed()),
                self.log_path.display()
            );
        }
    }
}

/// The last [`TAIL_LINES`] lines of the log at `path` from byte `start` on.
fn tail(path: &std::path::Path, start: u64) -> Vec<String> {
    let Ok(mut file) = File::open(path) else {
        return Vec::new();
    };
    if file.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let lines: Vec<String> = std::io::BufReader::new(file)
        .split(b'\n')
        .map_while(Result::ok)
        .map(|l| String::from_utf8_lossy(&l).trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].to_vec()
}

/// `0.4 s`, `12.3 s`, `2 min 05 s`.
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        let whole = d.as_secs();
        format!("{} min {:02} s", whole / 60, whole % 60)
    }
}

/// `python3 -m pip install --target TARGET SPEC…`, quiet, without its root and version warnings.
pub fn pip_install(target: &std::path::Path, specs: &[String]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "pip", "install", "--quiet", "--no-input", "--target"])
        .arg(target)
        .args(specs)
        // As variables, not flags: a pip too old for one ignores it instead of failing.
        .env("PIP_ROOT_USER_ACTION", "ignore")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PIP_NO_WARN_SCRIPT_LOCATION", "1");
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failing step's error names the program; its log holds the output, the terminal's tail
    /// only this step's lines; a step that passes leaves its output in the log alone.
    #[test]
    fn a_step_logs_the_output_and_a_failure_shows_its_tail() {
        let dir = std::env::temp_dir().join(format!("xtask-steps-{}", std::process::id()));
        let log = dir.join("setup.log");
        let mut session = Session::logging_to("test", log.clone());
        session
            .step("a step that works", |s| {
                s.run(Command::new("sh").args(["-c", "echo quietly; echo to-stderr >&2"]))
            })
            .unwrap();
        let start = std::fs::metadata(&log).unwrap().len();
        let failed = session.step("a step that fails", |s| {
            s.run(Command::new("sh").args(["-c", "seq 1 40; exit 3"]))
        });
        let error = format!("{:#}", failed.unwrap_err());
        assert!(
            error.contains("sh failed") && error.contains('3'),
            "{error}"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("quietly\nto-stderr\n"), "{text}");
        assert!(
            text.contains("\n1\n2\n") && text.contains("\n40\n"),
            "{text}"
        );
        let shown = tail(&log, start);
        assert_eq!(shown.len(), TAIL_LINES);
        assert!(shown.iter().all(|l| !l.contains("quietly")), "{shown:?}");
        assert!(shown.iter().any(|l| l == "40"), "{shown:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn durations_read_as_seconds_then_minutes() {
        assert_eq!(duration(Duration::from_millis(430)), "0.4 s");
        assert_eq!(duration(Duration::from_millis(12_340)), "12.3 s");
        assert_eq!(duration(Duration::from_secs(125)), "2 min 05 s");
    }
}
