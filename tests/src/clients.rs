//! The resolver tests' client programs (Go and musl, from `tests/clients`), in one directory:
//! built there on demand by the tests on the host, or built beforehand by [`prebuild`] (the
//! `prebuild_clients` binary, which `cargo xtask vm-test` runs) and shipped in the VM guest's
//! initramfs, where no Go toolchain or `musl-gcc` is and [`PREBUILT_ENV`] is set.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::go::{require_go_toolchains, GoBuild};

/// Set to `1` where clients must be taken prebuilt from [`clients_dir`], never built (the VM
/// guest's `/init` sets it).
pub const PREBUILT_ENV: &str = "NODEIP_TEST_CLIENTS_PREBUILT";

/// The file in [`clients_dir`] listing the Go versions the prebuilt clients were built with, one
/// a line.
const GO_VERSIONS_FILE: &str = "go-versions";

/// The Go clients the guest's tests (`live_go_resolver`, `resolver_orders`, `vm_kernel_handlers`) run, each built by
/// every toolchain: stripped, as node components ship.
pub const GUEST_GO_CLIENTS: [(&str, GoBuild); 5] = [
    (
        "lookup_ip.go",
        GoBuild {
            cgo: false,
            stripped: true,
            static_musl: false,
        },
    ),
    (
        "lookup_ip.go",
        GoBuild {
            cgo: true,
            stripped: true,
            static_musl: false,
        },
    ),
    (
        "lookup_ip.go",
        GoBuild {
            cgo: true,
            stripped: true,
            static_musl: true,
        },
    ),
    (
        "kubelet_node_ip.go",
        GoBuild {
            cgo: false,
            stripped: true,
            static_musl: false,
        },
    ),
    (
        "lookup_stress.go",
        GoBuild {
            cgo: false,
            stripped: true,
            static_musl: false,
        },
    ),
];

/// Where the clients are: `target/test-clients` (the same path in the guest).
pub fn clients_dir() -> PathBuf {
    crate::workspace_root().join("target/test-clients")
}

/// Whether clients must come prebuilt ([`PREBUILT_ENV`] is `1`).
pub fn prebuilt_only() -> bool {
    std::env::var_os(PREBUILT_ENV).is_some_and(|v| v == "1")
}

/// `path` when the prebuild made it, else an error naming the fix.
pub fn prebuilt(path: PathBuf) -> Result<PathBuf> {
    if !path.is_file() {
        bail!(
            "{} was not prebuilt ({PREBUILT_ENV}=1 here): add it to GUEST_GO_CLIENTS in \
             tests/src/clients.rs, which `cargo xtask vm-test` builds and ships",
            path.display()
        );
    }
    Ok(path)
}

/// The Go versions the prebuilt clients were built with (empty when none were).
pub fn prebuilt_go_versions() -> Vec<String> {
    std::fs::read_to_string(clients_dir().join(GO_VERSIONS_FILE))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Builds every client the guest's tests run into [`clients_dir`] — both musl clients,
/// [`GUEST_GO_CLIENTS`] by the oldest and the newest toolchain (the extremes of the sources
/// layouts; every toolchain is judged on the host, and under QEMU's TCG each costs minutes) —
/// with the list of those Go versions; returns every file made.
pub fn prebuild() -> Result<Vec<PathBuf>> {
    if prebuilt_only() {
        bail!("{PREBUILT_ENV}=1: clients are not built here");
    }
    let mut made = vec![
        crate::musl::lookup_addrs(false)?,
        crate::musl::lookup_addrs(true)?,
    ];
    let all = require_go_toolchains();
    let toolchains = [&all[0], &all[all.len() - 1]];
    for toolchain in toolchains {
        for (source, how) in GUEST_GO_CLIENTS {
            made.push(toolchain.client(source, how)?);
        }
    }
    let versions = clients_dir().join(GO_VERSIONS_FILE);
    let list: String = toolchains
        .iter()
        .map(|t| t.version.clone() + "\n")
        .collect();
    std::fs::write(&versions, list).with_context(|| format!("writing {}", versions.display()))?;
    made.push(versions);
    Ok(made)
}

/// An event's `resolver`, as JSON leaves it (absent: glibc).
pub fn event_resolver(event: &serde_json::Value) -> &str {
    event["resolver"].as_str().unwrap_or("glibc")
}
