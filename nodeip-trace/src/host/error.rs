//! The one error type of `host/`: why inspecting the machine failed, each kind kept (a file that
//! could not be read keeps its `io::Error`). Thin readers of `/proc` files and mappings
//! (`proc_text`, `mapped_file`, `kernel_dump`) return `std::io::Result`: their only failure is
//! the read itself, and their callers name the file.
use std::path::PathBuf;

/// Why a look at the host failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file could not be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Not an ELF file nodeip-trace reads (64-bit little-endian x86-64), or a truncated one.
    #[error("not a 64-bit little-endian x86-64 ELF file ({0})")]
    NotElf(&'static str),
    /// No `.gopclntab` section: not a Go executable.
    #[error("no .gopclntab section: not a Go executable")]
    NotGo,
    /// A pclntab format this reader does not know.
    #[error("pclntab magic {0:#x} is not Go 1.18+'s: Go versions before 1.19 are not supported")]
    PclntabFormat(u32),
    /// The Go function table points outside the file.
    #[error("malformed .gopclntab: {0}")]
    MalformedPclntab(&'static str),
    /// A static cgo program's `getaddrinfo` could not be found through the cgo glue: which step
    /// did not match (another compiler's wrapper, a dynamic program).
    #[error("{0}")]
    CgoGlue(&'static str),
    /// No cgroup v2 hierarchy is mounted where the tracer looks.
    #[error(
        "no cgroup v2 hierarchy mounted at {} (cgroup v1 only, or not mounted: `mount -t cgroup2 none /sys/fs/cgroup`)",
        tried.join(", ")
    )]
    NoCgroup2 {
        /// Where it looked.
        tried: &'static [&'static str],
    },
}
