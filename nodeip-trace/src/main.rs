//! The `nodeip-trace` binary: parses flags, calls the library's commands, maps errors to exit
//! codes. Broken pipes are not errors.
mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("nodeip-trace: {e:#}");
            ExitCode::from(2)
        }
    }
}
