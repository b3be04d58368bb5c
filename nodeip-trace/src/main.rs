//! The `nodeip-trace` binary: parses flags, calls the library's commands, maps errors to exit
//! codes. Broken pipes are not errors.
mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run() {
        Ok(code) => code,
        Err(e) => {
            let error: &(dyn std::error::Error + 'static) = e.as_ref();
            eprintln!("nodeip-trace: {}", nodeip_trace::command::error_text(error));
            ExitCode::from(2)
        }
    }
}
