//! The README's and docs' examples work as written: README.md and every `docs/*.md` are read and
//!
//! - each `nodeip-trace …` command in a `sh` block is parsed by the tool's own command line (the
//!   binary, `nodeip_trace_tests::tool()`), stopped right after parsing by an argument that the
//!   tool rejects before it does anything (see [`Stop`]); an inline `nodeip-trace SUBCOMMAND`
//!   names a subcommand that exists;
//! - each `cargo xtask TASK` names a task of `xtask/src/main.rs` (read as text), and its `--flags`
//!   are that task's;
//! - each link to a local file exists, and each `#anchor` names a heading of its page;
//! - every docs page is linked from the README, which stays at most 200 lines;
//! - the kernel-support table's markers are in the file `cargo xtask kernel-table` rewrites.
//!
//! No root, no network: nothing is traced, only parsed. Well under a second.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodeip_trace_tests::{tool, workspace_root, ScratchDir};

/// The README's length limit (issue 48: a README a person reads).
const README_MAX_LINES: usize = 200;

/// One markdown page: its path from the workspace root and its text.
struct Page {
    rel: String,
    path: PathBuf,
    text: String,
}

/// README.md, then every `docs/*.md` in name order.
fn pages() -> Vec<Page> {
    let root = workspace_root();
    let mut rels = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .expect("listing docs/")
        .map(|e| {
            e.expect("a docs/ entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    rels.extend(docs);
    rels.into_iter()
        .map(|rel| {
            let path = root.join(&rel);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            Page { rel, path, text }
        })
        .collect()
}

/// A page split into fenced blocks and the prose between them.
struct Split {
    /// Lines of `sh` (or `bash`, `shell`) blocks, continuation lines joined: (line number, text).
    sh: Vec<(usize, String)>,
    /// Every line outside fenced blocks, others blanked (so line numbers stay).
    prose: Vec<String>,
}

fn split(text: &str) -> Split {
    let mut sh = Vec::new();
    let mut prose = Vec::new();
    let mut fence: Option<String> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match &fence {
            None if trimmed.starts_with("```") => {
                fence = Some(trimmed.trim_start_matches('`').trim().to_string());
                prose.push(String::new());
            }
            None => prose.push(line.to_string()),
            Some(_) if trimmed.starts_with("```") => {
                fence = None;
                prose.push(String::new());
            }
            Some(info) => {
                prose.push(String::new());
                if !matches!(info.as_str(), "sh" | "bash" | "shell") {
                    continue;
                }
                let (start, mut joined) = pending.take().unwrap_or((i + 1, String::new()));
                joined.push_str(line);
                match joined.strip_suffix('\\') {
                    Some(cut) => pending = Some((start, format!("{cut} "))),
                    None => sh.push((start, joined)),
                }
            }
        }
    }
    assert!(fence.is_none(), "a fenced block is never closed");
    Split { sh, prose }
}

/// A shell token: a word (quotes removed) or an operator (`|`, `&&`, `;`, `>`, `2>&`, …).
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Op(String),
}

/// Splits a line as a POSIX shell would, simply: quotes, backslashes, operators, comments.
fn shell_tokens(line: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => word.push(q),
                        None => return Err(format!("unterminated ' in {line:?}")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(q @ ('"' | '\\' | '$' | '`')) => word.push(q),
                            Some(q) => {
                                word.push('\\');
                                word.push(q);
                            }
                            None => return Err(format!("unterminated \" in {line:?}")),
                        },
                        Some(q) => word.push(q),
                        None => return Err(format!("unterminated \" in {line:?}")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(q) = chars.next() {
                    word.push(q);
                }
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    tokens.push(Token::Word(std::mem::take(&mut word)));
                    in_word = false;
                }
            }
            '|' | '&' | ';' | '<' | '>' => {
                // A number right before a redirection is its file descriptor (`2>`).
                let mut op = String::new();
                if in_word {
                    if matches!(c, '<' | '>') && word.chars().all(|d| d.is_ascii_digit()) {
                        op = std::mem::take(&mut word);
                    } else {
                        tokens.push(Token::Word(std::mem::take(&mut word)));
                    }
                    in_word = false;
                }
                op.push(c);
                while let Some(&n) = chars.peek() {
                    if matches!(n, '|' | '&' | '>' | '<') {
                        op.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Op(op));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        tokens.push(Token::Word(word));
    }
    Ok(tokens)
}

/// The simple commands of a line (split at `|`, `&&`, `||`, `;`, `&`), each its words with
/// redirections and their targets left out.
fn simple_commands(tokens: &[Token]) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut redirect_target = false;
    for t in tokens {
        match t {
            Token::Word(_) if redirect_target => redirect_target = false,
            Token::Word(w) => commands.last_mut().expect("one command").push(w.clone()),
            Token::Op(op) if op.contains('<') || op.contains('>') => {
                // `2>&1`: the operator is `2>&`, its target `1`.
                redirect_target = true;
            }
            Token::Op(_) => commands.push(Vec::new()),
        }
    }
    commands.retain(|c| !c.is_empty());
    commands
}

/// Whether `word` runs nodeip-trace: its name, or a path to it (`/usr/local/bin/nodeip-trace`,
/// `target/release/nodeip-trace`), not a word that merely ends so (`ds/nodeip-trace`).
fn is_tool(word: &str) -> bool {
    word == "nodeip-trace"
        || (word.ends_with("/nodeip-trace")
            && (word.starts_with('/') || word.starts_with("./") || word.starts_with("target/")))
}

/// The arguments of each nodeip-trace invocation in a simple command: after its name when it
/// starts the command (after `VAR=value` words and `sudo`), or after a path to it anywhere
/// (`kubectl debug … -- chroot /host /usr/local/bin/nodeip-trace trace …`).
fn tool_args(words: &[String]) -> Option<Vec<String>> {
    let mut start = 0;
    while start < words.len()
        && (words[start] == "sudo"
            || (words[start].contains('=') && !words[start].starts_with('-')))
    {
        start += 1;
    }
    let at = if words.get(start).is_some_and(|w| is_tool(w)) {
        start
    } else {
        words.iter().position(|w| w.contains('/') && is_tool(w))?
    };
    Some(words[at + 1..].to_vec())
}

/// The words after `cargo xtask` when a simple command runs it.
fn xtask_args(words: &[String]) -> Option<Vec<String>> {
    let at = words
        .windows(2)
        .position(|w| w[0] == "cargo" && w[1] == "xtask")?;
    let before_ok = words[..at]
        .iter()
        .all(|w| w == "sudo" || (w.contains('=') && !w.starts_with('-')));
    before_ok.then(|| words[at + 2..].to_vec())
}

/// How an example is stopped once the tool has parsed it, so nothing runs.
#[derive(Debug)]
enum Stop {
    /// Add this argument, which the subcommand rejects right after parsing with a message
    /// containing the second string.
    Reject(String, &'static str),
    /// Add `--help`: clap checks every argument before it (and exits 0), not what is missing.
    Help,
    /// Run as it is, from an empty directory, input from /dev/null: a relative FILE is absent.
    AsIs,
}

fn has_flag(args: &[String], long: &str, short: Option<&str>) -> bool {
    args.iter().any(|a| {
        a == long || a.starts_with(&format!("{long}=")) || short.is_some_and(|s| a.starts_with(s))
    })
}

/// How to stop `nodeip-trace ARGS…` after parsing (see `nodeip-trace/src/cli.rs`: each
/// rejection happens before anything is opened, attached or run).
fn stop_for(args: &[String]) -> Stop {
    let before_command = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let own = &args[..before_command];
    if own
        .iter()
        .any(|a| matches!(a.as_str(), "--help" | "-h" | "--version" | "-V"))
    {
        return Stop::AsIs;
    }
    match own.first().map(String::as_str) {
        // `trace_options` checks these first, before it starts anything.
        Some("trace") => [
            (
                "--ring-buffer-mib",
                None,
                "--ring-buffer-mib=3",
                "must be a power of two",
            ),
            (
                "--duration",
                Some("-d"),
                "--duration=-1",
                "must be a positive number",
            ),
            (
                "--max-output-mib",
                None,
                "--max-output-mib=0",
                "must be at least 1",
            ),
        ]
        .into_iter()
        .find(|(long, short, _, _)| !has_flag(own, long, *short))
        .map(|(_, _, arg, says)| Stop::Reject(arg.to_string(), says))
        .expect("an example that sets --ring-buffer-mib, --duration and --max-output-mib"),
        // `--genl-family` values are checked before the input is opened.
        Some("analyze" | "report") => Stop::Reject(
            "--genl-family=readme-check".into(),
            "--genl-family expects NAME=ID",
        ),
        Some("explain") if !has_flag(own, "--from", None) && !has_flag(own, "--netns", None) => {
            Stop::Reject(
                "--from=/nonexistent/readme-check.pcap".into(),
                "cannot open",
            )
        }
        Some("doctor") => Stop::Help,
        _ => Stop::AsIs,
    }
}

/// Runs the tool from `cwd`, stdin from /dev/null; (exit status, stderr).
fn run_tool(args: &[String], cwd: &Path) -> (Option<i32>, String) {
    let mut child = Command::new(tool())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nodeip-trace");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if child
            .try_wait()
            .expect("waiting for nodeip-trace")
            .is_some()
        {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return (None, format!("still running after 10 s: {args:?}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let out = child
        .wait_with_output()
        .expect("reading nodeip-trace's stderr");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Why the tool did not take `args` as written, if it did not.
fn check_tool_args(args: &[String], cwd: &Path) -> Option<String> {
    let stop = stop_for(args);
    let mut run = args.to_vec();
    let insert_at = run.iter().position(|a| a == "--").unwrap_or(run.len());
    match &stop {
        Stop::Reject(arg, _) => run.insert(insert_at, arg.clone()),
        Stop::Help => run.insert(insert_at, "--help".into()),
        Stop::AsIs => {}
    }
    let (code, stderr) = run_tool(&run, cwd);
    if code.is_none() {
        return Some(stderr);
    }
    // clap's own errors start `error:`; the tool's start `nodeip-trace:`.
    if stderr.lines().any(|l| l.starts_with("error:")) {
        return Some(format!(
            "rejected by the command line (ran `nodeip-trace {}`):\n{}",
            run.join(" "),
            stderr.trim()
        ));
    }
    match stop {
        Stop::Reject(arg, says) if !stderr.contains(says) => Some(format!(
            "parsed, but {arg} did not stop it (exit {code:?}): {}",
            stderr.trim()
        )),
        Stop::Help if code != Some(0) => Some(format!("--help exited {code:?}: {}", stderr.trim())),
        _ => None,
    }
}

/// Backtick code spans of the prose, whitespace inside them made single spaces.
fn code_spans(prose: &str) -> Vec<String> {
    let flat = prose.replace('\n', " ");
    let mut spans = Vec::new();
    let mut rest = flat.as_str();
    while let Some(open) = rest.find('`') {
        let ticks = rest[open..].chars().take_while(|&c| c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[open + ticks..];
        let Some(close) = after.find(&fence) else {
            break;
        };
        spans.push(
            after[..close]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" "),
        );
        rest = &after[close + ticks..];
    }
    spans
}

/// `cargo xtask`'s tasks, read from `xtask/src/main.rs`: kebab-case name → its long flags.
fn xtask_tasks() -> BTreeMap<String, BTreeSet<String>> {
    let source = std::fs::read_to_string(workspace_root().join("xtask/src/main.rs"))
        .expect("reading xtask/src/main.rs");
    let body = source
        .split_once("enum Task {")
        .expect("xtask/src/main.rs has `enum Task {`")
        .1;
    let body = &body[..body.find("\n}").expect("the end of enum Task")];
    let mut tasks = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut renamed: Option<String> = None;
    // The attributes before a field (`#[arg(…)]`, maybe over several lines), and whether one
    // is still open.
    let mut attribute = String::new();
    let mut open = false;
    for line in body.lines() {
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if t.is_empty() || t.starts_with("///") || t.starts_with("//") {
            continue;
        }
        if indent == 4 {
            if let Some(name) = t.strip_prefix("#[command(name = \"") {
                renamed = name.split('"').next().map(str::to_string);
            } else if t.starts_with(|c: char| c.is_ascii_uppercase()) {
                let ident: String = t
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                let name = renamed.take().unwrap_or_else(|| kebab(&ident));
                tasks.insert(name.clone(), BTreeSet::new());
                current = Some(name);
            }
            continue;
        }
        if t.starts_with("#[") || open {
            attribute.push_str(t);
            attribute.push(' ');
            open = attribute.matches('[').count() > attribute.matches(']').count();
            continue;
        }
        if let (Some(task), Some((field, ty))) = (&current, t.split_once(':')) {
            if attribute.contains("flatten") {
                let ty = ty.trim().trim_end_matches(',');
                let flags = flattened_flags(&source, ty);
                tasks.get_mut(task).expect("the current task").extend(flags);
            } else if attribute.contains("long") {
                let long = match attribute.split_once("long = \"") {
                    Some((_, rest)) => rest.split('"').next().unwrap_or_default().to_string(),
                    None => kebab_field(field),
                };
                tasks
                    .get_mut(task)
                    .expect("the current task")
                    .insert(format!("--{long}"));
            }
        }
        attribute.clear();
    }
    tasks
}

/// The long flags of `struct NAME` in `source` (a `#[command(flatten)]` group of arguments).
fn flattened_flags(source: &str, name: &str) -> BTreeSet<String> {
    let body = source
        .split_once(&format!("struct {name} {{"))
        .unwrap_or_else(|| panic!("xtask/src/main.rs has no `struct {name}` for a flatten"))
        .1;
    let body = &body[..body.find("\n}").expect("the end of the struct")];
    let mut flags = BTreeSet::new();
    let mut attribute = String::new();
    for line in body.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        match line.split_once(':') {
            Some((field, _))
                if !line.starts_with('#')
                    && attribute.matches('[').count() == attribute.matches(']').count() =>
            {
                if attribute.contains("long") {
                    let long = match attribute.split_once("long = \"") {
                        Some((_, rest)) => rest.split('"').next().unwrap_or_default().to_string(),
                        None => kebab_field(field),
                    };
                    flags.insert(format!("--{long}"));
                }
                attribute.clear();
            }
            _ => {
                attribute.push_str(line);
                attribute.push(' ');
            }
        }
    }
    flags
}

/// `KernelTable` → `kernel-table`.
fn kebab(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `oci_archive` → `oci-archive`.
fn kebab_field(field: &str) -> String {
    field.trim().replace('_', "-")
}

/// Why `cargo xtask ARGS…` is not a task with its flags, if it is not.
fn check_xtask_args(args: &[String], tasks: &BTreeMap<String, BTreeSet<String>>) -> Option<String> {
    let task = args.first()?;
    if task == "…" || task.starts_with('-') {
        return None;
    }
    let Some(flags) = tasks.get(task) else {
        return Some(format!(
            "no task `{task}` in xtask/src/main.rs (tasks: {})",
            tasks.keys().cloned().collect::<Vec<_>>().join(", ")
        ));
    };
    let unknown: Vec<String> = args[1..]
        .iter()
        .map(|a| a.trim_start_matches('['))
        .take_while(|a| *a != "--")
        .filter(|a| a.starts_with("--"))
        .map(|a| a.split(['=', ']']).next().unwrap_or(a).to_string())
        .filter(|a| a != "--help" && !flags.contains(a))
        .collect();
    (!unknown.is_empty()).then(|| {
        format!(
            "`cargo xtask {task}` has no {} (its flags: {})",
            unknown.join(", "),
            flags.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    })
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (outside fenced blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    split(text)
        .prose
        .iter()
        .filter_map(|l| {
            let t = l.trim_start();
            let hashes = t.chars().take_while(|&c| c == '#').count();
            (1..=6)
                .contains(&hashes)
                .then(|| t[hashes..].strip_prefix(' '))
                .flatten()
                .map(slug)
        })
        .collect()
}

/// The targets of the inline links and images of a page's prose, code spans left out:
/// (line number, target).
fn links(prose: &[String]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in prose.iter().enumerate() {
        // Drop code spans, so `[x](y)` shown as code is not a link.
        let mut plain = String::new();
        for (n, part) in line.split('`').enumerate() {
            if n % 2 == 0 {
                plain.push_str(part);
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else {
                break;
            };
            let target = after[..end].split_whitespace().next().unwrap_or_default();
            out.push((i + 1, target.to_string()));
            rest = &after[end..];
        }
    }
    out
}

/// Runs `check` on each item on a few threads (each check starts a process); the failures.
fn check_all<T: Sync>(items: &[T], check: impl Fn(&T) -> Option<String> + Sync) -> Vec<String> {
    let threads = 4;
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| s.spawn(|| part.iter().filter_map(&check).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a checking thread"))
            .collect()
    })
}

#[test]
fn nodeip_trace_examples_parse() {
    let scratch = ScratchDir::new("readme-examples");
    let mut failures = Vec::new();
    // (where, the line as written, the tool's arguments)
    let mut examples: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut subcommands: BTreeMap<String, String> = BTreeMap::new();
    for page in pages() {
        let parts = split(&page.text);
        for (line, text) in &parts.sh {
            if !text.contains("nodeip-trace") {
                continue;
            }
            match shell_tokens(text) {
                Ok(tokens) => examples.extend(
                    simple_commands(&tokens)
                        .iter()
                        .filter_map(|words| tool_args(words))
                        .map(|args| {
                            (
                                format!("{}:{line}", page.rel),
                                text.trim().to_string(),
                                args,
                            )
                        }),
                ),
                Err(e) => failures.push(format!("{}:{line}: {e}", page.rel)),
            }
        }
        // Inline `nodeip-trace SUBCOMMAND …`: the subcommand exists.
        for span in code_spans(&parts.prose.join("\n")) {
            let mut words = span.split(' ');
            if words.next() != Some("nodeip-trace") {
                continue;
            }
            if let Some(sub) = words
                .next()
                .filter(|s| s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_'))
            {
                subcommands
                    .entry(sub.to_string())
                    .or_insert_with(|| page.rel.clone());
            }
        }
    }
    failures.extend(check_all(&examples, |(at, text, args)| {
        check_tool_args(args, &scratch.path).map(|why| format!("{at}: `{text}`: {why}"))
    }));
    let subcommands: Vec<_> = subcommands.into_iter().collect();
    failures.extend(check_all(&subcommands, |(sub, page)| {
        let (code, _) = run_tool(&[sub.clone(), "--help".into()], &scratch.path);
        (code != Some(0)).then(|| format!("{page}: `nodeip-trace {sub}`: no such subcommand"))
    }));
    assert!(
        failures.is_empty(),
        "{} of {} examples fail:\n{}",
        failures.len(),
        examples.len() + subcommands.len(),
        failures.join("\n")
    );
    // The README alone has a dozen; finding few means the extraction broke.
    assert!(
        examples.len() >= 20,
        "only {} nodeip-trace examples found",
        examples.len()
    );
}

#[test]
fn cargo_xtask_tasks_and_flags_exist() {
    let tasks = xtask_tasks();
    for expected in ["demo", "test", "setup", "vm-test", "kernel-table"] {
        assert!(
            tasks.contains_key(expected),
            "reading xtask/src/main.rs found only {tasks:?}"
        );
    }
    assert!(tasks["test"].contains("--no-vm"), "{tasks:?}");
    assert!(tasks["vm-test"].contains("--kernel"), "{tasks:?}");
    let mut checked = 0;
    let mut failures = Vec::new();
    for page in pages() {
        let parts = split(&page.text);
        let mut commands: Vec<(String, Vec<String>)> = Vec::new();
        for (line, text) in &parts.sh {
            if let Ok(tokens) = shell_tokens(text) {
                for words in simple_commands(&tokens) {
                    if let Some(args) = xtask_args(&words) {
                        commands.push((format!("{line}"), args));
                    }
                }
            }
        }
        let prose = parts.prose.join("\n");
        for span in code_spans(&prose) {
            if let Some(rest) = span.strip_prefix("cargo xtask ") {
                commands.push(("`…`".into(), rest.split(' ').map(str::to_string).collect()));
            }
        }
        // Prose that names a task outside code: its name at least.
        let flat = prose.split_whitespace().collect::<Vec<_>>().join(" ");
        for (at, _) in flat.match_indices("cargo xtask ") {
            let name: String = flat[at + "cargo xtask ".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            if !name.is_empty() {
                commands.push(("prose".into(), vec![name]));
            }
        }
        for (where_, args) in commands {
            checked += 1;
            if let Some(why) = check_xtask_args(&args, &tasks) {
                failures.push(format!("{}:{where_}: {why}", page.rel));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 10, "only {checked} cargo xtask mentions found");
}

/// The README's quick start is exactly the two commands `.ci/run` and the issue name.
#[test]
fn the_readme_quick_start_is_demo_and_test() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; keep it at most {README_MAX_LINES} and move detail to docs/"
    );
    let quick: Vec<String> = split(&readme)
        .sh
        .iter()
        .filter_map(|(_, l)| {
            let words = simple_commands(&shell_tokens(l).ok()?).into_iter().next()?;
            xtask_args(&words).map(|a| a.join(" "))
        })
        .filter(|a| a == "demo" || a == "test")
        .collect();
    assert_eq!(quick, ["demo", "test"], "the quick start's two commands");
    let ci = std::fs::read_to_string(workspace_root().join(".ci/run")).expect(".ci/run");
    assert!(
        ci.contains("exec cargo xtask test"),
        ".ci/run runs the README's test command"
    );
}

#[test]
fn local_links_and_anchors_resolve() {
    let root = workspace_root();
    let pages = pages();
    let mut anchors_of: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let dir = page.path.parent().expect("a page's directory");
        for (line, target) in links(&split(&page.text).prose) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.path.clone()
            } else {
                dir.join(file)
            };
            if !path.exists() {
                failures.push(format!("{}:{line}: {target}: no such file", page.rel));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            let known = anchors_of.entry(path.clone()).or_insert_with(|| {
                std::fs::read_to_string(&path)
                    .map(|t| anchors(&t))
                    .unwrap_or_default()
            });
            if !known.contains(anchor) {
                failures.push(format!(
                    "{}:{line}: {target}: no heading #{anchor}",
                    page.rel
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 30, "only {checked} local links found");
    // Every docs page is reachable from the README.
    let readme_links: BTreeSet<PathBuf> = links(&split(&pages[0].text).prose)
        .into_iter()
        .map(|(_, t)| root.join(t.split('#').next().unwrap_or_default()))
        .collect();
    let unlinked: Vec<&str> = pages[1..]
        .iter()
        .filter(|p| !readme_links.contains(&p.path))
        .map(|p| p.rel.as_str())
        .collect();
    assert!(
        unlinked.is_empty(),
        "not linked from README.md: {unlinked:?}"
    );
}

/// `cargo xtask kernel-table` rewrites the table between its markers in one file
/// (`xtask/src/kernels.rs`, `write_table`): that file has them, once each.
#[test]
fn the_kernel_table_markers_are_where_xtask_writes_them() {
    let source = std::fs::read_to_string(workspace_root().join("xtask/src/kernels.rs"))
        .expect("reading xtask/src/kernels.rs");
    let literal = |name: &str| -> String {
        let at = source
            .find(&format!("const {name}: &str = \""))
            .unwrap_or_else(|| panic!("no const {name} in xtask/src/kernels.rs"));
        let rest = &source[at..];
        let rest = &rest[rest.find('"').expect("a string") + 1..];
        rest[..rest.find("\";").expect("the string's end")].to_string()
    };
    let (begin, end) = (literal("TABLE_BEGIN"), literal("TABLE_END"));
    let write_table = &source[source
        .find("pub fn write_table")
        .expect("write_table in xtask/src/kernels.rs")..];
    let rel = write_table
        .split(".join(\"")
        .skip(1)
        .filter_map(|r| r.split('"').next())
        .find(|r| r.ends_with(".md"))
        .expect("write_table joins the page it rewrites (a .md file) to the root");
    let text = std::fs::read_to_string(workspace_root().join(rel))
        .unwrap_or_else(|e| panic!("{rel}, which `cargo xtask kernel-table` rewrites: {e}"));
    let holders: Vec<String> = pages()
        .into_iter()
        .filter(|p| p.text.contains(&begin))
        .map(|p| p.rel)
        .collect();
    assert!(
        text.matches(&begin).count() == 1 && text.matches(&end).count() == 1,
        "`cargo xtask kernel-table` rewrites {rel}, which lacks the kernel-table markers; \
         pages that have them: {holders:?}"
    );
}

#[test]
fn the_shell_splitter_splits_like_a_shell() {
    let words = |line: &str| simple_commands(&shell_tokens(line).expect("splits"));
    assert_eq!(
        words("nodeip-trace trace --comm kubelet -o k.jsonl   # only kubelet"),
        [[
            "nodeip-trace",
            "trace",
            "--comm",
            "kubelet",
            "-o",
            "k.jsonl"
        ]]
    );
    assert_eq!(
        words("tcpdump -i nlmon0 -U -w - | nodeip-trace analyze - 2>&1 > out.txt"),
        [
            vec!["tcpdump", "-i", "nlmon0", "-U", "-w", "-"],
            vec!["nodeip-trace", "analyze", "-"]
        ]
    );
    assert_eq!(
        words(r#"kubectl logs ds/x | jq -c 'select(.kind=="diagnosis")' # "x""#),
        [
            vec!["kubectl", "logs", "ds/x"],
            vec!["jq", "-c", r#"select(.kind=="diagnosis")"#]
        ]
    );
    assert!(shell_tokens("echo 'open").is_err());
    let cmd = |line: &str| {
        words(line)
            .into_iter()
            .filter_map(|w| tool_args(&w))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        cmd("kubectl -n nodeip-trace logs ds/nodeip-trace -f"),
        Vec::<Vec<String>>::new()
    );
    assert_eq!(
        cmd("kubectl debug node/w -it -- chroot /host /usr/local/bin/nodeip-trace trace -d 5"),
        [["trace", "-d", "5"]]
    );
    assert_eq!(cmd("sudo nodeip-trace doctor"), [["doctor"]]);
    assert_eq!(
        slug("Seed 000, every resolver side by side"),
        "seed-000-every-resolver-side-by-side"
    );
    assert_eq!(
        slug("What `cargo xtask test` runs"),
        "what-cargo-xtask-test-runs"
    );
    assert_eq!(kebab("KernelTable"), "kernel-table");
}
