//! The command `trace -- CMD` starts: its file found as `execvp` would, spawned with the
//! caller's privileges, and how it ended named (exit code, signal) as a shell would.

use std::path::PathBuf;

use super::TraceError;

/// The file `program` names as `execvp` finds it: itself when it has a `/`, else the first
/// executable of that name in `$PATH`.
pub(super) fn command_path(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    })
}

/// Starts the command. The caller has put this process in the pid filter with fork following on,
/// so the kernel side adds the child at fork time, before it can exec or do anything.
pub(super) fn spawn_command(
    command: &[String],
    stdout_to_stderr: bool,
) -> Result<tokio::process::Child, TraceError> {
    use std::os::fd::{AsFd, OwnedFd};
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]);
    let limit = crate::probe::loader::started_open_files_limit();
    // SAFETY: the closure runs in the child between fork and exec and only calls setrlimit
    // and prctl, which are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(limit) = limit {
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
            // The command runs with the caller's huge-page setting, not the tracer's.
            crate::host::huge_pages::restore_in_child();
            Ok(())
        });
    }
    if stdout_to_stderr {
        let stderr: Result<OwnedFd, _> = std::io::stderr().as_fd().try_clone_to_owned();
        if let Ok(fd) = stderr {
            cmd.stdout(std::process::Stdio::from(fd));
        }
    }
    cmd.spawn().map_err(|source| TraceError::Spawn {
        command: command.join(" "),
        source,
    })
}

/// The exit code `trace` passes on for the traced command (a shell's: 128+N when signal N killed
/// it) and how the summary says the command ended: `command exited (3)`, `command killed by
/// SIGSEGV (core dumped)`. `None`: waiting for it failed.
pub(super) fn command_outcome(status: Option<std::process::ExitStatus>) -> (i32, String) {
    use std::os::unix::process::ExitStatusExt;
    let Some(status) = status else {
        return (1, "command ended (waiting for it failed)".into());
    };
    if let Some(code) = status.code() {
        return (code, format!("command exited ({code})"));
    }
    let signal = status.signal().unwrap_or(0);
    let core = if status.core_dumped() {
        " (core dumped)"
    } else {
        ""
    };
    (
        128 + signal,
        format!("command killed by {}{core}", signal_name(signal)),
    )
}

/// `SIGSEGV` for 11; `signal 40` for what has no name here.
pub(super) fn signal_name(signal: i32) -> String {
    let name = match signal {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSYS => "SIGSYS",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        _ => return format!("signal {signal}"),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::command_outcome;

    #[test]
    pub(super) fn a_command_that_exits_passes_its_code_on() {
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(3 << 8))),
            (3, "command exited (3)".into())
        );
    }

    #[test]
    pub(super) fn a_crashed_command_is_named_with_its_signal_and_a_shells_code() {
        // wait(2) status: signal 11 with the core-dump bit (0x80).
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(11 | 0x80))),
            (139, "command killed by SIGSEGV (core dumped)".into())
        );
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(libc::SIGKILL))),
            (137, "command killed by SIGKILL".into())
        );
        assert_eq!(
            command_outcome(Some(ExitStatus::from_raw(40))),
            (168, "command killed by signal 40".into())
        );
    }
}
