//! Where the libcs are: every distinct glibc/musl mapped by running processes (including those in
//! other mount namespaces, through `/proc/PID/root`), plus the system's own, deduplicated by
//! [`FileIdentity`] so each file gets one uprobe.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::file_identity::FileIdentity;

/// Which C library a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LibcKind {
    /// GNU C library (`libc.so.6`).
    Glibc,
    /// musl (`ld-musl-*.so.1`, `libc.musl-*.so.1`).
    Musl,
}

impl LibcKind {
    /// "glibc" or "musl".
    pub fn name(self) -> &'static str {
        match self {
            LibcKind::Glibc => "glibc",
            LibcKind::Musl => "musl",
        }
    }
}

/// One libc file to attach to.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LibcTarget {
    /// A path that reaches the file from our mount namespace.
    pub path: PathBuf,
    /// glibc or musl.
    pub kind: LibcKind,
    /// The file's identity.
    #[serde(flatten)]
    pub id: FileIdentity,
    /// How many running processes map it.
    pub processes: usize,
}

/// Classifies a mapped file name as a libc.
pub fn libc_kind(path: &str) -> Option<LibcKind> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name == "libc.so.6" || (name.starts_with("libc-2.") && name.ends_with(".so")) {
        Some(LibcKind::Glibc)
    } else if name.starts_with("ld-musl-") || name.starts_with("libc.musl-") {
        Some(LibcKind::Musl)
    } else {
        None
    }
}

/// libc paths named in the text of a `/proc/PID/maps` file.
pub fn libcs_in_maps(maps: &str) -> Vec<(String, LibcKind)> {
    let mut out: Vec<(String, LibcKind)> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        if let Some(kind) = libc_kind(path) {
            if !out.iter().any(|(p, _)| p == path) {
                out.push((path.to_string(), kind));
            }
        }
    }
    out
}

/// Where a libc usually is (the system's own, and inside a container's root), checked in this
/// order.
const SYSTEM_LIBCS: [&str; 7] = [
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/lib64/libc.so.6",
    "/usr/lib64/libc.so.6",
    "/lib/libc.so.6",
    "/lib/ld-musl-x86_64.so.1",
    "/lib/libc.musl-x86_64.so.1",
];

/// The libcs reachable in process `pid`'s root (`/proc/PID/root/…`) as (path, identity),
/// one per file: the usual paths, and what its maps name once it runs. For a process that just
/// exec'd, the usual paths are the only way to attach before its dynamic loader maps libc.
pub fn libcs_in_root_of(pid: u32) -> Vec<(PathBuf, FileIdentity)> {
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let mut paths: Vec<String> = SYSTEM_LIBCS.iter().map(|p| p.to_string()).collect();
    // A process gone already has no root to look in (most of a node's execs are short).
    let Ok(maps) = crate::host::proc_text::read(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    paths.extend(libcs_in_maps(&maps).into_iter().map(|(path, _)| path));
    let mut out: Vec<(PathBuf, FileIdentity)> = Vec::new();
    for p in paths {
        let p = root.join(p.trim_start_matches('/'));
        if let Some(id) = FileIdentity::of_path(&p) {
            if !out.iter().any(|(_, known)| *known == id) {
                out.push((p, id));
            }
        }
    }
    out
}

/// Finds every distinct libc: the system's and those mapped by processes under `proc_root`
/// (normally `/proc`).
pub fn find_libcs(proc_root: &Path) -> Vec<LibcTarget> {
    let mut by_file: BTreeMap<FileIdentity, LibcTarget> = BTreeMap::new();
    let mut add = |path: PathBuf, kind: LibcKind, process: bool| {
        let Some(id) = FileIdentity::of_path(&path) else {
            return;
        };
        let entry = by_file.entry(id).or_insert_with(|| LibcTarget {
            path,
            kind,
            id,
            processes: 0,
        });
        if process {
            entry.processes += 1;
        }
    };
    for p in SYSTEM_LIBCS {
        if let Some(kind) = libc_kind(p) {
            add(PathBuf::from(p), kind, false);
        }
    }
    let own_mnt = std::fs::read_link(proc_root.join("self/ns/mnt")).ok();
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return by_file.into_values().collect();
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(maps) = std::fs::read_to_string(proc_root.join(pid).join("maps")) else {
            continue;
        };
        let same_mnt = std::fs::read_link(proc_root.join(pid).join("ns/mnt")).ok() == own_mnt;
        for (path, kind) in libcs_in_maps(&maps) {
            let reach = if same_mnt {
                PathBuf::from(&path)
            } else {
                proc_root
                    .join(pid)
                    .join("root")
                    .join(path.trim_start_matches('/'))
            };
            add(reach, kind, true);
        }
    }
    by_file.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_glibc_and_musl_in_maps() {
        let maps = "\
7f00-7f01 r--p 00000000 fe:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6
7f01-7f02 r-xp 00001000 fe:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6
7f03-7f04 r-xp 00001000 fe:01 9 /lib/ld-musl-x86_64.so.1
7f05-7f06 rw-p 00000000 00:00 0
7f07-7f08 r-xp 00000000 fe:01 5 /usr/lib/libcrypto.so.3
";
        assert_eq!(
            libcs_in_maps(maps),
            vec![
                (
                    "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string(),
                    LibcKind::Glibc
                ),
                ("/lib/ld-musl-x86_64.so.1".to_string(), LibcKind::Musl),
            ]
        );
        assert_eq!(libc_kind("/lib/libc-2.31.so"), Some(LibcKind::Glibc));
        assert_eq!(libc_kind("/lib/libcap.so.2"), None);
    }

    #[test]
    fn finds_this_machines_libc_once() {
        let libcs = find_libcs(Path::new("/proc"));
        let glibc: Vec<_> = libcs.iter().filter(|l| l.kind == LibcKind::Glibc).collect();
        assert!(!glibc.is_empty(), "no glibc found: {libcs:?}");
        let mut keys: Vec<_> = libcs.iter().map(|l| l.id).collect();
        keys.dedup();
        assert_eq!(keys.len(), libcs.len());
    }
}
