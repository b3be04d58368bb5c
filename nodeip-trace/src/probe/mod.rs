//! probe: the tracer, everything that acts on the kernel to trace — what it offers
//! ([`features`]), tracefs ([`tracefs`]), loading and attaching the eBPF programs with the best
//! hook available ([`loader`], the hook table in [`hooks`]), the resolvers linked into
//! executables ([`executable_resolvers`]), the one watcher that classifies and probes every
//! executable a trace meets ([`exec_watcher`]), holding a new program at exec until it is probed
//! ([`exec_hold`], bounded by its guard process, [`exec_hold_guard`]), and dropping the
//! capabilities a running trace does not need ([`privileges`]). What it reads of the machine
//! without changing it lives in [`crate::host`].
pub mod exec_hold;
pub mod exec_hold_guard;
pub mod exec_watcher;
pub mod executable_resolvers;
pub mod features;
pub mod hooks;
pub mod loader;
pub mod privileges;
pub mod tracefs;

/// Errors of the probe layer: each says what failed, on what, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Mounting tracefs failed.
    #[error("tracefs is not mounted at {path} and mounting it failed ({source}); run `mount -t tracefs tracefs {path}` as root")]
    TracefsMount {
        /// Mount point.
        path: String,
        /// The mount(2) error.
        source: std::io::Error,
    },
    /// The eBPF object failed to load.
    #[error("loading the eBPF programs failed: {0}; run `nodeip-trace doctor` to see what this kernel allows (root or CAP_BPF+CAP_PERFMON are needed)")]
    Load(#[source] Box<aya::EbpfError>),
    /// Dropping the capabilities the running tracer does not need failed.
    #[error("dropping the capabilities not needed after attach failed while {step}: {source}; the trace goes on with all it had")]
    DropCapabilities {
        /// The step that failed.
        step: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A program is missing from the embedded object.
    #[error("eBPF program {0} is missing from the embedded object: rebuild nodeip-trace")]
    MissingProgram(String),
    /// A Go executable's resolver cannot be probed (its layout is not one nodeip-trace knows,
    /// or its functions are not found).
    #[error("Go resolver of {path} not probed: {reason}")]
    GoResolver {
        /// The executable.
        path: String,
        /// Why.
        reason: String,
    },
    /// A map is missing from the embedded object.
    #[error("eBPF map {0} is missing from the embedded object: rebuild nodeip-trace")]
    MissingMap(String),
    /// Loading or attaching one program failed.
    #[error("attaching {program} to {target} failed: {source}")]
    Attach {
        /// Program name.
        program: String,
        /// Attach target (tracepoint, libc path, function).
        target: String,
        /// aya's error.
        source: Box<aya::programs::ProgramError>,
    },
    /// A map operation failed.
    #[error("eBPF map {map}: {source}")]
    Map {
        /// Map name.
        map: String,
        /// aya's error.
        source: Box<aya::maps::MapError>,
    },
    /// Tracing cannot run for this process or on this kernel (privileges, lockdown).
    #[error("cannot trace here: {}. What still works: `nodeip-trace doctor` (what this kernel and process offer), and with no privileges at all `nodeip-trace analyze FILE`, `replay FILE` and `explain --from FILE`", .blockers.join("; "))]
    CannotTrace {
        /// What is missing, each saying what to do.
        blockers: Vec<String>,
    },
    /// `trace --hooks MODE` asked for a mode this kernel does not have.
    #[error("--hooks {mode}: {reason}; use `--hooks auto` (the best this kernel offers) and see `nodeip-trace doctor`")]
    HookModeUnavailable {
        /// The mode asked for.
        mode: &'static str,
        /// Why the kernel cannot.
        reason: String,
    },
    /// A uprobe's attach error, also kept as that hook's outcome in the tracer's hook list.
    #[error(transparent)]
    Listed(std::sync::Arc<ProbeError>),
    /// Nothing could be attached.
    #[error(
        "no probe could be attached on this kernel; run `nodeip-trace doctor` for the reasons"
    )]
    NothingAttached,
}
