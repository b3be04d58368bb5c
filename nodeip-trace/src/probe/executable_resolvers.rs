//! The resolvers linked into executables: Go's own resolver in Go programs, and the C library's
//! `getaddrinfo` linked into statically built programs (static musl or glibc, including Go
//! programs linked against a static musl, as k3s is) — [`classify`], which the exec watcher
//! probes from ([`super::exec_watcher`]), and `doctor`'s list of the running ones, each file
//! read once, through `/proc/PID/exe` (executables inside containers too).
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::explain::resolver::go_choice::{
    go_resolver_choice, ConfFile, GoResolverChoice, GoResolverInputs,
};
use crate::host::elf::ElfImage;
use crate::host::error::HostError;
use crate::host::file_identity::FileIdentity;
use crate::host::go_binary::GoBinary;
use crate::host::go_binary::GO_SORT_FUNCTION;
use crate::host::libc_locator::LibcKind;
use crate::host::mapped_file::MappedFile;

/// A C library's `getaddrinfo` linked into a statically built program.
pub struct StaticGetaddrinfo {
    /// Whose.
    pub libc: LibcKind,
    /// Found through the cgo glue (a stripped static cgo Go program), not by its symbol.
    pub through_cgo_glue: bool,
    /// Where: `None` by its symbol, `Some(offset)` when found without one; why not, when it
    /// was not found.
    pub offset: Result<Option<u64>, HostError>,
}

/// What an executable carries: a static C library's `getaddrinfo` (found by its symbol, or in a
/// stripped cgo Go program — k3s — through the cgo glue; static cgo Go programs are linked
/// against musl, as static glibc cannot load its NSS modules), and the Go side, if it is Go.
pub fn classify(elf: ElfImage) -> (Option<StaticGetaddrinfo>, Option<GoBinary>) {
    let by_symbol = elf.static_resolver().map(|libc| StaticGetaddrinfo {
        libc,
        through_cgo_glue: false,
        offset: Ok(None),
    });
    let stripped_static = !elf.dynamic && elf.section(".symtab").is_none();
    let go = GoBinary::from_elf(elf).ok();
    let by_glue = go
        .as_ref()
        .filter(|g| stripped_static && g.cgo_net)
        .map(|g| StaticGetaddrinfo {
            libc: LibcKind::Musl,
            through_cgo_glue: true,
            offset: g.cgo_getaddrinfo_offset().map(Some),
        });
    (by_symbol.or(by_glue), go)
}

/// A running statically built program that carries a C library's `getaddrinfo` (for `doctor`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StaticResolverTarget {
    /// The executable (as the first process running it names it).
    pub path: String,
    /// Whose `getaddrinfo`.
    pub libc: LibcKind,
    /// Found by its symbol, or through the cgo glue (a stripped cgo Go program).
    pub found_by: &'static str,
    /// Processes running it.
    pub processes: usize,
    /// Why it cannot be probed, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
}

/// `/proc/PID/exe` of every process under `proc`.
pub(super) fn running_executables(proc: &Path) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(proc) else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
                .is_some()
        })
        .map(|e| e.path().join("exe"))
        .collect()
}

/// A running Go program whose own resolver nodeip-trace would probe (for `doctor`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct GoResolverTarget {
    /// The executable (as the first process running it names it).
    pub path: String,
    /// Its Go version.
    pub version: String,
    /// Its `net` package can go through libc (cgo): lookups may be glibc's or musl's instead.
    pub cgo: bool,
    /// Processes running it.
    pub processes: usize,
    /// Why its resolver cannot be probed, when it cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsupported: Option<String>,
    /// What its probes cannot read, when they are limited (a Go version whose sources layout
    /// is not known: sorts shown, not explained).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited: Option<String>,
    /// Which resolver it takes to look this machine's hostname up (as kubelet looks up its node
    /// name): Go's rules on the first process's environment and its root's nsswitch.conf and
    /// resolv.conf.
    pub hostname_lookup: GoResolverChoice,
}

/// Go's choice of resolver for this machine's hostname in the process `pid_dir`
/// (`/proc/PID`): its environment, and the name-service files seen through its root.
fn hostname_choice(pid_dir: &Path, version: &str, cgo: bool) -> GoResolverChoice {
    let read = |file: &str| std::fs::read_to_string(pid_dir.join("root/etc").join(file));
    let (nsswitch, resolv) = (read("nsswitch.conf"), read("resolv.conf"));
    let environ = std::fs::read(pid_dir.join("environ")).unwrap_or_default();
    let vars: Vec<(&[u8], &[u8])> = environ
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let at = kv.iter().position(|b| *b == b'=')?;
            Some((&kv[..at], &kv[at + 1..]))
        })
        .collect();
    let var = |name: &str| {
        vars.iter()
            .find(|(k, _)| *k == name.as_bytes())
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    let hostname = crate::host::resolver_config::machine_hostname();
    let godebug = var("GODEBUG");
    let minor = crate::host::go_binary::go_minor(version).map_or(27, |(_, m)| m);
    let inputs = GoResolverInputs {
        cgo_available: cgo,
        godebug: godebug.as_deref(),
        localdomain_set: var("LOCALDOMAIN").is_some(),
        res_options: var("RES_OPTIONS").is_some_and(|v| !v.is_empty()),
        hostaliases: var("HOSTALIASES").is_some_and(|v| !v.is_empty()),
        mdns_allow: pid_dir.join("root/etc/mdns.allow").exists(),
        ..GoResolverInputs::cgo_build(
            minor,
            ConfFile::from_read(&nsswitch),
            ConfFile::from_read(&resolv),
            &hostname,
        )
    };
    go_resolver_choice(&inputs, &hostname)
}

/// The resolvers linked into the executables running under `proc`, each file read once: the
/// Go programs whose `net` package has the resolver's sort, and the statically built programs
/// that carry a C library's `getaddrinfo`.
pub fn running_executable_resolvers(
    proc: &Path,
) -> (Vec<GoResolverTarget>, Vec<StaticResolverTarget>) {
    use crate::host::go_binary::SourcesLayout;
    type Found = (Option<GoResolverTarget>, Option<StaticResolverTarget>);
    let mut by_file: HashMap<FileIdentity, Found> = HashMap::new();
    for exe in running_executables(proc) {
        let pid_dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
        let Some(id) = FileIdentity::of_path(&exe) else {
            continue;
        };
        let (go, statics) = by_file.entry(id).or_insert_with(|| {
            let Some(elf) = MappedFile::open(&exe)
                .ok()
                .and_then(|bytes| ElfImage::parse(bytes).ok())
            else {
                return (None, None);
            };
            let path = std::fs::read_link(&exe)
                .unwrap_or(exe.clone())
                .display()
                .to_string();
            let (found, binary) = classify(elf);
            let statics = found.map(|found| StaticResolverTarget {
                path: path.clone(),
                libc: found.libc,
                found_by: if found.through_cgo_glue {
                    "cgo glue"
                } else {
                    "symbol table"
                },
                processes: 0,
                unsupported: found.offset.err().map(|e| e.to_string()),
            });
            let go = binary
                .filter(|b| b.function(GO_SORT_FUNCTION).is_some())
                .map(|binary| {
                    let version = binary.version.clone().unwrap_or_default();
                    GoResolverTarget {
                        hostname_lookup: hostname_choice(&pid_dir, &version, binary.cgo_net),
                        unsupported: match binary.probes(GO_SORT_FUNCTION) {
                            Some(sort) if !sort.ret_offsets.is_empty() => None,
                            _ => Some(format!("{GO_SORT_FUNCTION} has no RET found")),
                        },
                        limited: SourcesLayout::of(&version)
                            .is_none()
                            .then(|| SourcesLayout::unknown_note(&version)),
                        path,
                        version,
                        cgo: binary.cgo_net,
                        processes: 0,
                    }
                });
            (go, statics)
        });
        if let Some(target) = go {
            target.processes += 1;
        }
        if let Some(target) = statics {
            target.processes += 1;
        }
    }
    let (go, statics): (Vec<_>, Vec<_>) = by_file.into_values().unzip();
    let mut go: Vec<GoResolverTarget> = go.into_iter().flatten().collect();
    let mut statics: Vec<StaticResolverTarget> = statics.into_iter().flatten().collect();
    go.sort_by(|a, b| a.path.cmp(&b.path));
    statics.sort_by(|a, b| a.path.cmp(&b.path));
    (go, statics)
}
