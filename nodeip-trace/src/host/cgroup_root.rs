//! The root of the cgroup v2 hierarchy, where the tracer's cgroup socket-address hooks go: a
//! program attached there runs for every socket of the node.
use std::path::{Path, PathBuf};

use super::error::HostError;

/// `CGROUP2_SUPER_MAGIC` (`include/uapi/linux/magic.h`).
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Where the root may be mounted, in the order tried: the host's through the init process's
/// root (a tracer in a DaemonSet's container with the host's pid namespace sees its own cgroup
/// namespace at `/sys/fs/cgroup`), then this mount namespace's unified and hybrid layouts.
const CANDIDATES: [&str; 3] = [
    "/proc/1/root/sys/fs/cgroup",
    "/sys/fs/cgroup",
    "/sys/fs/cgroup/unified",
];

/// The first of [`CANDIDATES`] that is a cgroup v2 mount.
pub fn cgroup2_root() -> Result<PathBuf, HostError> {
    CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| is_cgroup2(p))
        .map(Path::to_path_buf)
        .ok_or(HostError::NoCgroup2 { tried: &CANDIDATES })
}

/// Whether `path` is the top of a cgroup v2 mount.
fn is_cgroup2(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct it is given; `c` is NUL-terminated.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == CGROUP2_SUPER_MAGIC
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_that_is_not_a_cgroup_mount_is_not_taken() {
        assert!(!is_cgroup2(Path::new("/")));
        assert!(!is_cgroup2(Path::new("/nonexistent/cgroup")));
    }

    #[test]
    fn the_error_says_where_it_looked_and_what_to_do() {
        let text = HostError::NoCgroup2 { tried: &CANDIDATES }.to_string();
        assert!(text.contains("/sys/fs/cgroup") && text.contains("mount -t cgroup2"));
    }
}
