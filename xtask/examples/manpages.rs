//! The man pages and shell completions `cargo xtask dist` ships, from the tool's own clap command
//! (nodeip-trace/src/cli.rs, included below): `manpages PREFIX` writes
//! `PREFIX/share/man/man1/nodeip-trace.1` and a page per subcommand (`nodeip-trace-trace.1`, …;
//! clap_mangen), and completions for bash, zsh and fish (clap_complete) where each shell looks
//! under a prefix (`share/bash-completion/completions/nodeip-trace`,
//! `share/zsh/site-functions/_nodeip-trace`, `share/fish/vendor_completions.d/nodeip-trace.fish`);
//! it prints each file's path under PREFIX.
//!
//! An example, not part of the xtask binary: cli.rs needs the nodeip-trace library, whose build
//! needs bpf-linker, which the xtask binary installs (`cargo xtask setup`); examples and tests
//! may use dev-dependencies, the binary may not. `cargo test -p xtask` runs the tests below.
//! cli.rs is compiled here as in the tool, so the crates it names must be xtask's
//! (dev-)dependencies too.
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::CommandFactory as _;
use clap_complete::Shell;

#[allow(
    dead_code,
    reason = "only the clap definitions are used here, not the commands they run"
)]
#[path = "../../nodeip-trace/src/cli.rs"]
mod cli;

/// What cli.rs calls in the tool's main.rs (the allocator's purge delay); nothing runs here.
#[allow(
    dead_code,
    reason = "named by cli.rs's commands, which run nowhere here"
)]
fn purge_freed_memory_after_a_delay() {}
#[allow(
    dead_code,
    reason = "named by cli.rs's commands, which run nowhere here"
)]
fn purge_freed_memory_at_once() {}

/// The tool's name: its binary, its first page, and the command the completions complete.
const NAME: &str = "nodeip-trace";

/// The version the pages name (the workspace's: the tool's too).
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the man pages go under the prefix.
const MAN_DIR: &str = "share/man/man1";

/// Each shell's completion script, where that shell looks under a prefix.
const COMPLETIONS: [(Shell, &str); 3] = [
    (
        Shell::Bash,
        "share/bash-completion/completions/nodeip-trace",
    ),
    (Shell::Zsh, "share/zsh/site-functions/_nodeip-trace"),
    (
        Shell::Fish,
        "share/fish/vendor_completions.d/nodeip-trace.fish",
    ),
];

/// The tool's clap command, as `nodeip-trace` parses it (the version without its commit and eBPF
/// hash, which the pages do not need).
fn command() -> clap::Command {
    cli::Cli::command().version(VERSION)
}

/// Writes the man pages and completions of `cmd` under `prefix`; returns their paths (relative to
/// it).
fn generate(cmd: clap::Command, prefix: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let command_before_build = cmd.clone();
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    let mut pages = Vec::new();
    pages_of(&cmd, None, &mut pages)?;
    for (name, page) in pages {
        written.push(write(
            prefix,
            &Path::new(MAN_DIR).join(format!("{name}.1")),
            &page,
        )?);
    }
    let mut visible = visible_only(&command_before_build);
    for (shell, path) in COMPLETIONS {
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut visible, NAME, &mut script);
        if shell == Shell::Bash {
            script = fix_bash_case_names(&String::from_utf8(script)?).into_bytes();
        }
        written.push(write(prefix, Path::new(path), &script)?);
    }
    Ok(written)
}

/// `cmd` (not yet built) without its hidden subcommands and arguments, for the completions:
/// clap_complete would offer those too (the internal `__exec-hold-guard`, the tests'
/// `--ready-file`). What completing needs is copied: names, help, arguments, subcommands.
fn visible_only(cmd: &clap::Command) -> clap::Command {
    // Names must be `'static` without clap's `string` feature; this runs once and exits.
    let name: &'static str = Box::leak(cmd.get_name().to_string().into_boxed_str());
    let mut copy = clap::Command::new(name).disable_help_subcommand(true);
    if cmd.get_version().is_some() {
        copy = copy.version(VERSION);
    }
    if let Some(about) = cmd.get_about() {
        copy = copy.about(about.clone());
    }
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        copy = copy.arg(arg.clone());
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        copy = copy.subcommand(visible_only(sub));
    }
    copy
}

/// clap_complete 4.6's bash script sets `cmd` to `nodeip__trace__subcmd__trace` after
/// `nodeip-trace trace` but names that case `nodeip__subcmd__trace__subcmd__trace` (it turns the
/// binary's `-` into `__` on one side and into `__subcmd__` on the other), so nothing after a
/// subcommand would complete: this gives the cases the names `cmd` gets.
fn fix_bash_case_names(script: &str) -> String {
    let wrong = format!("{}__subcmd__", NAME.replace('-', "__subcmd__"));
    let right = format!("{}__subcmd__", NAME.replace('-', "__"));
    script.replace(&wrong, &right)
}

/// Writes `bytes` to `prefix/relative` (making its directory); returns `relative`.
fn write(prefix: &Path, relative: &Path, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let path = prefix.join(relative);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    Ok(relative.to_path_buf())
}

/// The page of `cmd` (a built command; `parent` is the page above it) and of each of its visible
/// subcommands, as (page name, roff) pairs.
fn pages_of(
    cmd: &clap::Command,
    parent: Option<&str>,
    pages: &mut Vec<(String, Vec<u8>)>,
) -> anyhow::Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    pages.push((name.clone(), page(cmd, parent)?));
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages_of(sub, Some(&name), pages)?;
    }
    Ok(())
}

/// One man page: clap_mangen's, with the examples (`after_long_help`) as an EXAMPLES section
/// in no-fill mode, so each example keeps its line, and a SEE ALSO naming the page above.
fn page(cmd: &clap::Command, parent: Option<&str>) -> anyhow::Result<Vec<u8>> {
    let examples = cmd.get_after_long_help().map(|e| e.to_string());
    let without = cmd.clone().after_long_help(None::<&str>);
    let mut text = Vec::new();
    clap_mangen::Man::new(without)
        .source(format!("{NAME} {VERSION}"))
        .manual("nodeip-trace manual")
        .render(&mut text)
        .context("rendering a man page")?;
    let mut text = String::from_utf8(text).context("clap_mangen wrote non-UTF-8")?;
    let mut extra = roff::Roff::new();
    if let Some(examples) = examples {
        extra.control("SH", ["EXAMPLES"]).control("nf", []);
        // The section names them, and indents them as --help's two spaces did.
        let lines = examples.lines().skip_while(|l| l.trim_end() == "Examples:");
        for line in lines {
            extra.text([roff::roman(line.strip_prefix("  ").unwrap_or(line))]);
        }
        extra.control("fi", []);
    }
    if let Some(parent) = parent {
        extra
            .control("SH", ["SEE ALSO"])
            .text([roff::bold(parent), roff::roman("(1)")]);
    }
    // Before VERSION (the first page's last section), as man pages order them.
    let at = text.find("\n.SH VERSION").map_or(text.len(), |i| i + 1);
    text.insert_str(at, &extra.to_roff());
    Ok(text.into_bytes())
}

fn main() -> anyhow::Result<()> {
    let prefix = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .context("usage: manpages PREFIX")?;
    for path in generate(command(), &prefix)? {
        println!("{}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn read(dir: &Path, relative: &str) -> String {
        std::fs::read_to_string(dir.join(relative))
            .unwrap_or_else(|e| panic!("reading {relative}: {e}"))
    }

    #[test]
    fn a_page_per_subcommand_and_completions_for_three_shells() {
        let dir = TempDir::new("xtask-manpages");
        let written = generate(command(), &dir.0).unwrap();
        let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
        for page in [
            "nodeip-trace",
            "nodeip-trace-trace",
            "nodeip-trace-analyze",
            "nodeip-trace-replay",
            "nodeip-trace-report",
            "nodeip-trace-explain",
            "nodeip-trace-doctor",
        ] {
            let path = format!("{MAN_DIR}/{page}.1");
            assert!(names.contains(&path), "{path} not in {names:?}");
        }
        // Not the hidden internal subcommand, nor `help`.
        assert!(
            !names
                .iter()
                .any(|n| n.contains("exec-hold") || n.contains("-help")),
            "{names:?}"
        );

        let trace = read(&dir.0, "share/man/man1/nodeip-trace-trace.1");
        assert!(trace.contains(".TH nodeip-trace-trace 1 "), "{trace}");
        assert!(trace.contains(r"\-\-duration"), "{trace}");
        assert!(trace.contains(".SH EXAMPLES\n.nf\n"), "{trace}");
        assert!(trace.contains(".SH \"SEE ALSO\"") || trace.contains(".SH SEE ALSO"));
        let top = read(&dir.0, "share/man/man1/nodeip-trace.1");
        assert!(top.contains("nodeip\\-trace\\-trace(1)"), "{top}");
        assert!(top.contains(&format!("v{VERSION}")), "{top}");
        assert!(!top.contains("stand-in"), "{top}");

        let bash = read(&dir.0, "share/bash-completion/completions/nodeip-trace");
        assert!(bash.contains("trace"), "{bash}");
        assert!(bash.contains("--duration"), "{bash}");
        for internal in ["exec-hold-guard", "ready-file"] {
            assert!(!bash.contains(internal), "{internal} in {bash}");
        }
        assert!(read(&dir.0, "share/zsh/site-functions/_nodeip-trace").contains("#compdef"));
        assert!(
            read(&dir.0, "share/fish/vendor_completions.d/nodeip-trace.fish")
                .contains("complete -c nodeip-trace")
        );
    }

    /// What bash completes for `words` (the last one being completed), with the script sourced.
    fn bash_completes(script: &Path, words: &[&str]) -> String {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let (cur, prev) = (words[words.len() - 1], words[words.len() - 2]);
        let program = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _nodeip__trace nodeip-trace '{cur}' '{prev}'; echo \"${{COMPREPLY[*]}}\"",
            script.display(),
            quoted.join(" "),
            words.len() - 1
        );
        let out = std::process::Command::new("bash")
            .args(["--norc", "-c", &program])
            .output()
            .expect("running bash");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn bash_completes_subcommands_their_flags_and_values() {
        let dir = TempDir::new("xtask-completions");
        generate(command(), &dir.0).unwrap();
        let script = dir.0.join("share/bash-completion/completions/nodeip-trace");
        assert_eq!(bash_completes(&script, &["nodeip-trace", "tr"]), "trace");
        assert_eq!(
            bash_completes(&script, &["nodeip-trace", "trace", "--dur"]),
            "--duration"
        );
        assert_eq!(
            bash_completes(&script, &["nodeip-trace", "trace", "--hooks", "k"]),
            "kprobe"
        );
        assert_eq!(
            bash_completes(&script, &["nodeip-trace", "report", "--for"]),
            "--format"
        );
    }

    /// The same command gives the same bytes: the tarball stays reproducible.
    #[test]
    fn generating_twice_gives_the_same_files() {
        let (a, b) = (
            TempDir::new("xtask-manpages-a"),
            TempDir::new("xtask-manpages-b"),
        );
        let written = generate(command(), &a.0).unwrap();
        generate(command(), &b.0).unwrap();
        for path in written {
            assert_eq!(
                std::fs::read(a.0.join(&path)).unwrap(),
                std::fs::read(b.0.join(&path)).unwrap(),
                "{}",
                path.display()
            );
        }
    }
}
