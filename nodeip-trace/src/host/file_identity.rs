//! The identity of a file's content, as the tracer remembers files it has classified, probed or
//! marked known: device, inode and change time. The inode alone is not enough: a deleted file's
//! inode number is given to the next new file (ext4 does so at once), and a fresh copy of a
//! program would then pass for the deleted one and run unprobed; a file rewritten in place gets
//! a new change time too.
use std::os::unix::fs::MetadataExt;

/// Device, inode and change time of one file (serialized as `dev` and `ino`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct FileIdentity {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Change time, nanoseconds since the epoch.
    #[serde(skip)]
    pub changed_ns: i64,
}

impl FileIdentity {
    /// The identity `meta` describes.
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            changed_ns: meta
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.ctime_nsec()),
        }
    }

    /// The identity of the open file `file` (`None` when fstat fails).
    pub fn of_file(file: &std::fs::File) -> Option<Self> {
        file.metadata().ok().map(|m| Self::of(&m))
    }

    /// The identity of the file at `path` (following symlinks; `None` when stat fails).
    pub fn of_path(path: &std::path::Path) -> Option<Self> {
        std::fs::metadata(path).ok().map(|m| Self::of(&m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_on_a_freed_inode_is_another_file() {
        let dir = std::env::temp_dir().join(format!("nit-file-identity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"one").unwrap();
        let first = FileIdentity::of_path(&path).unwrap();
        assert_eq!(Some(first), FileIdentity::of_path(&path));
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"two").unwrap();
        let second = FileIdentity::of_path(&path).unwrap();
        // Whether or not the inode number came back, the two are told apart.
        assert_ne!(first, second);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
