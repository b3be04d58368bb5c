//! command: the tool's subcommands as library functions (`trace`, `doctor`, …). Each composes
//! sources, the pipeline and sinks; the binary only parses flags and maps errors to exit codes.
pub mod doctor;
pub mod explain;
pub mod offline;
pub mod output_paths;
pub mod report;
pub mod trace;

/// `n` and `what`, plural unless `n` is 1 ("1 frame", "3 frames"): the commands' own counts on
/// stderr.
pub fn count_of(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// What the tool's exit status means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Done (also when the reader of stdout went away: `| head` is not an error).
    Success,
    /// `doctor`: this machine cannot trace (what is missing is in the report).
    CannotTrace,
    /// An error, printed on stderr (or an output that failed during `trace`).
    Failed,
    /// `explain`: a finding of severity warning or error was made.
    Findings,
    /// `analyze`: the capture was read to its end, but damaged frames or stretches of it were
    /// skipped (each named on stderr); everything else was output.
    Skipped,
    /// `trace -- COMMAND`: the command's own status (128+N when a signal killed it).
    Command(u8),
}

impl Exit {
    /// The status number.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::CannotTrace => 1,
            Exit::Failed => 2,
            Exit::Findings => 3,
            Exit::Skipped => 4,
            Exit::Command(code) => code,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

/// An error and its causes on one line, each cause once: `what failed: why`. Errors here often
/// repeat their cause in their own message (so they read well alone); printing the whole chain
/// after that would say the same thing twice, so a cause already in the text is skipped.
pub fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_plural_unless_one() {
        assert_eq!(count_of(0, "frame"), "0 frames");
        assert_eq!(count_of(1, "frame"), "1 frame");
        assert_eq!(count_of(2, "time"), "2 times");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reading f.pcap failed: {source}")]
    struct Repeats {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("analyze failed")]
    struct Wraps(#[source] Repeats);

    /// Regression: `analyze` printed "f.pcap: frame 2 …: the file ends …: frame 2 …: the file
    /// ends …" because the cause was both in the message and in the chain.
    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let inner = Repeats {
            source: std::io::Error::other("disk on fire"),
        };
        assert_eq!(error_text(&inner), "reading f.pcap failed: disk on fire");
        assert_eq!(
            error_text(&Wraps(inner)),
            "analyze failed: reading f.pcap failed: disk on fire"
        );
    }
}
