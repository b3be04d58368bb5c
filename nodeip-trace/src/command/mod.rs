//! command: the tool's subcommands as library functions (`trace`, `doctor`, …). Each composes
//! sources, the pipeline and sinks; the binary only parses flags and maps errors to exit codes.
pub mod doctor;
pub mod offline;
pub mod trace;
