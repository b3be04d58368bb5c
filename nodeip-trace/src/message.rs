//! Every message the tool writes to stderr goes through here (as ripgrep's do through its
//! `messages` module): one line in one write(2), so a traced command sharing the tracer's stderr
//! cannot land between its pieces, and one place to change how the tool speaks. Imports
//! nothing of the crate; every layer may use it (`tests/tests/architecture.rs`). The lint
//! `clippy::print_stderr` is denied everywhere else in the crate.
#![allow(clippy::print_stderr, reason = "the one module that writes to stderr")]
use std::io::Write as _;

/// Writes one line to stderr in a single write(2). A traced command shares the tracer's stderr,
/// and `eprintln!` writes a formatted line in pieces that its output lands between (a test saw
/// "…c.pcapng" and " reached --max-output-mib" split by `ip`'s lines).
pub fn note(line: std::fmt::Arguments<'_>) {
    let mut text = line.to_string();
    text.push('\n');
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// Shows a progress line on a terminal, in place (`\r`, no newline): the next progress line or
/// [`clear_progress`] replaces it.
pub fn progress(line: std::fmt::Arguments<'_>) {
    let text = format!("\r{line}");
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// Clears the progress line [`progress`] drew.
pub fn clear_progress() {
    let _ = std::io::stderr().write_all(b"\r\x1b[K");
}

/// A line a test prints when it skips for a reason this machine truly has (no root, no BTF):
/// the reason, seen in the test's output.
pub fn skipped(reason: &str) {
    note(format_args!("skipped: {reason}"));
}
