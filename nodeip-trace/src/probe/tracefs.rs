//! tracefs: find or mount it, and read tracepoint `format` files.
use std::path::{Path, PathBuf};

use super::ProbeError;

/// Where tracefs is mounted by default on current kernels.
pub const TRACEFS: &str = "/sys/kernel/tracing";
/// The legacy location under debugfs.
const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

/// What [`ensure_mounted`] found or did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TracefsState {
    /// Already mounted at this path.
    Mounted(PathBuf),
    /// Not mounted before; we mounted it at this path.
    MountedNow(PathBuf),
}

impl TracefsState {
    /// The tracefs root.
    pub fn path(&self) -> &Path {
        match self {
            TracefsState::Mounted(p) | TracefsState::MountedNow(p) => p,
        }
    }
}

/// The tracefs root if mounted, without mounting anything.
pub fn find() -> Option<PathBuf> {
    [TRACEFS, DEBUGFS_TRACING]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.join("events").is_dir())
}

/// Finds tracefs, mounting it at [`TRACEFS`] when it is not mounted anywhere.
pub fn ensure_mounted() -> Result<TracefsState, ProbeError> {
    if let Some(p) = find() {
        return Ok(TracefsState::Mounted(p));
    }
    let target = std::ffi::CString::new(TRACEFS).expect("static path");
    let fstype = std::ffi::CString::new("tracefs").expect("static");
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(ProbeError::TracefsMount {
            path: TRACEFS.into(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(TracefsState::MountedNow(PathBuf::from(TRACEFS)))
}

/// Whether `events/<category>/<name>` exists.
pub fn event_exists(root: &Path, category: &str, name: &str) -> bool {
    root.join("events").join(category).join(name).is_dir()
}

/// The text of `events/<category>/<name>/format`, if readable.
pub fn event_format(root: &Path, category: &str, name: &str) -> Option<String> {
    std::fs::read_to_string(root.join("events").join(category).join(name).join("format")).ok()
}
