//! The musl test client (`tests/clients/lookup_addrs.c`), built with Debian's `musl-gcc`.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The musl test client `lookup_addrs.c` (linked `statically` or not) in
/// [`crate::clients::clients_dir`]: built now, or the prebuilt file where clients must come
/// prebuilt (the VM guest, which has no `musl-gcc`).
pub fn lookup_addrs(statically: bool) -> Result<PathBuf> {
    let dir = crate::clients::clients_dir().join("musl");
    if crate::clients::prebuilt_only() {
        return crate::clients::prebuilt(dir.join(lookup_addrs_name(statically)));
    }
    build_lookup_addrs(&dir, statically)
}

fn lookup_addrs_name(statically: bool) -> &'static str {
    if statically {
        "lookup-musl-static"
    } else {
        "lookup-musl"
    }
}

/// Builds `lookup_addrs.c` with `musl-gcc` into `dir` as `lookup-musl` or, linked statically,
/// `lookup-musl-static`; returns its path.
pub fn build_lookup_addrs(dir: &Path, statically: bool) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let out = dir.join(lookup_addrs_name(statically));
    let mut cmd = Command::new("musl-gcc");
    cmd.args(["-O2", "-o"]).arg(&out);
    if statically {
        cmd.arg("-static");
    }
    cmd.arg(crate::workspace_root().join("tests/clients/lookup_addrs.c"));
    let output = cmd
        .output()
        .context("running musl-gcc (Debian musl-tools; `cargo xtask setup` installs it)")?;
    if !output.status.success() {
        bail!(
            "musl-gcc failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(out)
}
