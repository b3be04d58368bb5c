//! Builds the eBPF programs (`nodeip-trace-ebpf`) with aya-build so they can be embedded.
//!
//! The stable toolchain is used with `RUSTC_BOOTSTRAP=1` for `-Z build-std=core`, so no nightly
//! is needed; `cargo xtask setup` installs `rust-src` and `bpf-linker`.
use anyhow::{anyhow, Context as _};

fn main() -> anyhow::Result<()> {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest_dir)
        .parent()
        .ok_or_else(|| anyhow!("no workspace root above {manifest_dir}"))?
        .join("nodeip-trace-ebpf");
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
    .context("building the eBPF programs failed: run `cargo xtask setup` (installs bpf-linker and rust-src)")
}
