//! Builds the eBPF programs (`nodeip-trace-ebpf`) with aya-build so they can be embedded, and
//! records what `nodeip-trace --version` prints: the git commit the binary was built from
//! (`NODEIP_TRACE_GIT_COMMIT`, "unknown" outside a git checkout, e.g. from a source tarball)
//! and the SHA-256 of the embedded eBPF object (`NODEIP_TRACE_EBPF_SHA256`).
//!
//! The stable toolchain is used with `RUSTC_BOOTSTRAP=1` for `-Z build-std=core`, so no nightly
//! is needed; `cargo xtask setup` installs `rust-src` and `bpf-linker`.
use std::path::Path;
use std::process::Command;

use anyhow::{anyhow, Context as _};
use sha2::{Digest as _, Sha256};

/// The environment variable that names the commit when the build has no `.git` to ask (a
/// packager's build from a source tarball); it wins over `git` when set.
const GIT_COMMIT_ENV: &str = "NODEIP_TRACE_GIT_COMMIT";

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR")?;
    let workspace = Path::new(&manifest_dir)
        .parent()
        .ok_or_else(|| anyhow!("no workspace root above {manifest_dir}"))?;
    let root = workspace.join("nodeip-trace-ebpf");
    let root = root
        .to_str()
        .ok_or_else(|| anyhow!("non-UTF-8 path {root:?}"))?;
    if std::env::var_os("RUSTC_BOOTSTRAP").is_none() {
        // SAFETY: build scripts are single-threaded at this point.
        std::env::set_var("RUSTC_BOOTSTRAP", "1");
    }
    // aya-build echoes the inner cargo's stderr as `cargo:warning` lines: a hundred "Compiling …"
    // lines on a fresh build that read as problems. Quiet, only real compiler messages remain
    // (and cargo shows them, with the error, when the eBPF build fails).
    // SAFETY: build scripts are single-threaded at this point.
    std::env::set_var("CARGO_TERM_QUIET", "true");
    let toolchain =
        std::env::var("NODEIP_TRACE_EBPF_TOOLCHAIN").unwrap_or_else(|_| "stable".into());
    println!("cargo:rerun-if-env-changed=NODEIP_TRACE_EBPF_TOOLCHAIN");
    let toolchain: &'static str = Box::leak(toolchain.into_boxed_str());
    aya_build::build_ebpf(
        [aya_build::Package { name: "nodeip-trace-ebpf", root_dir: root, ..Default::default() }],
        aya_build::Toolchain::Custom(toolchain),
    )
    .context("building the eBPF programs failed: run `cargo xtask setup` (installs bpf-linker and rust-src)")?;

    let out_dir = std::env::var("OUT_DIR").context("OUT_DIR")?;
    let object_path = Path::new(&out_dir).join("nodeip-trace");
    let object = std::fs::read(&object_path).with_context(|| {
        format!(
            "reading the eBPF object aya-build wrote, {}",
            object_path.display()
        )
    })?;
    let digest: String = Sha256::digest(&object)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=NODEIP_TRACE_EBPF_SHA256={digest}");
    println!("cargo:rustc-env={GIT_COMMIT_ENV}={}", git_commit(workspace));
    Ok(())
}

/// The commit `HEAD` names in the workspace's own git checkout, or `$NODEIP_TRACE_GIT_COMMIT`,
/// or "unknown" (no `.git`, no `git`, or the workspace sits inside some other repository).
/// Asks cargo to rerun this script when `HEAD` or the branch it points at moves.
fn git_commit(workspace: &Path) -> String {
    println!("cargo:rerun-if-env-changed={GIT_COMMIT_ENV}");
    if let Ok(commit) = std::env::var(GIT_COMMIT_ENV) {
        return commit;
    }
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(workspace)
            .args(args)
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        out.status.success().then(|| text.trim().to_string())
    };
    let own_checkout = git(&["rev-parse", "--show-toplevel"])
        .is_some_and(|top| Path::new(&top).canonicalize().ok() == workspace.canonicalize().ok());
    if !own_checkout {
        return "unknown".into();
    }
    if let Some(git_dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let git_dir = Path::new(&git_dir);
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        let watched = [Some("HEAD"), Some("packed-refs"), branch.as_deref()];
        // Only files that exist: cargo reruns the script on every build for a missing one.
        for file in watched.into_iter().flatten().map(|f| git_dir.join(f)) {
            if file.exists() {
                println!("cargo:rerun-if-changed={}", file.display());
            }
        }
    }
    git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into())
}
