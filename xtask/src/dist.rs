//! `cargo xtask dist`: the release artifact. One static `x86_64-unknown-linux-musl` binary (the
//! eBPF object embedded by build.rs, debug info stripped), and
//! `target/dist/nodeip-trace-<version>-x86_64-linux-musl.tar.gz` holding it with README.md, a
//! NOTICE (the project's licence and every statically linked crate's), docs/events.md, the
//! Wireshark dissector, and under `share/` a man page per subcommand (`share/man/man1`) and the
//! bash, zsh and fish completions (where each shell looks under a prefix), beside a `.sha256`
//! file in `sha256sum -c` format.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context as _};
use sha2::{Digest as _, Sha256};

use crate::{cargo, run, workspace_root};

/// The version every workspace crate shares (`[workspace.package]`), the tarball's and image's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The static release binary's target.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// The platform part of the tarball's name.
const PLATFORM: &str = "x86_64-linux-musl";

/// Files copied into the tarball as they are in the workspace (source path, path in the tarball).
const SHIPPED_FILES: [(&str, &str); 2] = [
    ("README.md", "README.md"),
    ("contrib/wireshark/ipvs.lua", "contrib/wireshark/ipvs.lua"),
];

/// The docs pages the README links (every `docs/*.md`, and the report's picture), shipped
/// beside it so its links hold in the unpacked tarball.
fn docs_pages(root: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .context("listing docs/")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "md" || x == "png"))
        .collect();
    pages.sort();
    Ok(pages)
}

/// Builds the static release binary and checks it is static; returns its path
/// (`target/x86_64-unknown-linux-musl/release/nodeip-trace`). Release profile, without debug
/// info (symbols stay, for readable panics and `perf`).
pub fn build_static_binary() -> anyhow::Result<PathBuf> {
    let t0 = std::time::Instant::now();
    run(cargo().args([
        "build",
        "--release",
        "--target",
        MUSL_TARGET,
        "--package",
        "nodeip-trace",
        "--bin",
        "nodeip-trace",
        // Command-line config, not CARGO_PROFILE_* variables: those would reach the eBPF build
        // that build.rs starts, whose BTF needs its debug info.
        "--config",
        "profile.release.debug=0",
        "--config",
        "profile.release.strip=\"debuginfo\"",
    ]))
    .with_context(|| {
        format!("building the static binary failed: is the {MUSL_TARGET} target installed (`cargo xtask setup`) and musl-gcc (musl-tools) there?")
    })?;
    let binary = workspace_root()
        .join("target")
        .join(MUSL_TARGET)
        .join("release/nodeip-trace");
    let elf = std::fs::read(&binary).with_context(|| format!("reading {}", binary.display()))?;
    if let Some(interpreter) = elf_interpreter(&elf)
        .with_context(|| format!("{} is not a 64-bit ELF executable", binary.display()))?
    {
        bail!(
            "{} is dynamically linked (interpreter {interpreter}): the {MUSL_TARGET} build should be static",
            binary.display()
        );
    }
    eprintln!(
        "dist: static binary {} ({:.1} MiB) in {:.0} s",
        binary.display(),
        elf.len() as f64 / 1048576.0,
        t0.elapsed().as_secs_f64()
    );
    Ok(binary)
}

/// The program interpreter (`PT_INTERP`, the dynamic loader) an ELF64 little-endian executable
/// names, `None` for a static one; an error when `elf` is not such a file.
fn elf_interpreter(elf: &[u8]) -> anyhow::Result<Option<String>> {
    const PT_INTERP: u32 = 3;
    ensure!(
        elf.len() >= 64 && elf[..4] == *b"\x7fELF" && elf[4] == 2 && elf[5] == 1,
        "no ELF64 little-endian header"
    );
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let u64_at = |at: usize| -> anyhow::Result<usize> {
        let bytes = elf
            .get(at..at + 8)
            .context("program header past the end of the file")?;
        Ok(u64::from_le_bytes(bytes.try_into()?) as usize)
    };
    let (phoff, phentsize, phnum) = (u64_at(32)?, u16_at(54), u16_at(56));
    for i in 0..phnum {
        let header = phoff + i * phentsize;
        let kind = elf
            .get(header..header + 4)
            .context("program header past the end of the file")?;
        if u32::from_le_bytes(kind.try_into()?) == PT_INTERP {
            let (offset, size) = (u64_at(header + 8)?, u64_at(header + 32)?);
            let name = elf
                .get(offset..offset + size)
                .context("PT_INTERP past the end of the file")?;
            return Ok(Some(
                String::from_utf8_lossy(name)
                    .trim_end_matches('\0')
                    .to_string(),
            ));
        }
    }
    Ok(None)
}

/// The tarball `dist` writes: `target/dist/nodeip-trace-<version>-x86_64-linux-musl.tar.gz`.
pub fn tarball_path() -> PathBuf {
    workspace_root()
        .join("target/dist")
        .join(format!("{}.tar.gz", release_name()))
}

fn release_name() -> String {
    format!("nodeip-trace-{VERSION}-{PLATFORM}")
}

/// `cargo xtask dist`: the static binary, the tarball and its `.sha256`; returns the binary's path.
pub fn dist() -> anyhow::Result<PathBuf> {
    let binary = build_static_binary()?;
    let version_line = binary_version(&binary)?;
    let root = workspace_root();
    let dist_dir = root.join("target/dist");
    let stage = dist_dir.join(release_name());
    if stage.exists() {
        std::fs::remove_dir_all(&stage)
            .with_context(|| format!("removing the old staging directory {}", stage.display()))?;
    }
    std::fs::create_dir_all(&stage).with_context(|| format!("creating {}", stage.display()))?;
    copy_into(&binary, &stage.join("nodeip-trace"))?;
    for (from, to) in SHIPPED_FILES {
        copy_into(&root.join(from), &stage.join(to))?;
    }
    for page in docs_pages(&root)? {
        let name = page.file_name().context("a docs page without a name")?;
        copy_into(&page, &stage.join("docs").join(name))?;
    }
    std::fs::write(stage.join("NOTICE"), notice(&version_line)?)
        .with_context(|| format!("writing {}", stage.join("NOTICE").display()))?;
    man_pages_and_completions(&stage)?;

    let tarball = tarball_path();
    // Reproducible: entries sorted, owned by root, dated at the commit, gzip without a name or
    // time stamp — the same tree gives the same bytes and so the same SHA-256.
    run(Command::new("tar")
        .current_dir(&dist_dir)
        .args([
            "--sort=name",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--use-compress-program=gzip -n -9",
        ])
        .arg(format!("--mtime=@{}", source_date_epoch()))
        .arg("-cf")
        .arg(&tarball)
        .arg(release_name()))
    .context("writing the tarball failed (GNU tar and gzip are needed)")?;
    let bytes =
        std::fs::read(&tarball).with_context(|| format!("reading {}", tarball.display()))?;
    let checksum_path = PathBuf::from(format!("{}.sha256", tarball.display()));
    let checksum = format!(
        "{}  {}\n",
        sha256_hex(&bytes),
        tarball.file_name().unwrap_or_default().to_string_lossy()
    );
    std::fs::write(&checksum_path, &checksum)
        .with_context(|| format!("writing {}", checksum_path.display()))?;
    println!("dist: {version_line}");
    println!(
        "dist: {} ({:.1} MiB), {}",
        tarball.display(),
        bytes.len() as f64 / 1048576.0,
        checksum_path.display()
    );
    Ok(binary)
}

/// Writes the man pages and shell completions under `prefix` (`share/…`) with the generator
/// in xtask/examples/manpages.rs (an example: it links the nodeip-trace library, which the
/// xtask binary does not); returns how many files it wrote.
fn man_pages_and_completions(prefix: &Path) -> anyhow::Result<usize> {
    let t0 = std::time::Instant::now();
    let out = cargo()
        .args([
            "run",
            "--quiet",
            "--package",
            "xtask",
            "--example",
            "manpages",
            "--",
        ])
        .arg(prefix)
        .output()
        .context("starting cargo run --example manpages")?;
    ensure!(
        out.status.success(),
        "generating the man pages and completions failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let files: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let pages = files.iter().filter(|f| f.ends_with(".1")).count();
    ensure!(
        pages > 1 && files.iter().any(|f| f.ends_with("nodeip-trace-trace.1")),
        "the man page generator wrote {files:?}"
    );
    eprintln!(
        "dist: {pages} man pages and bash, zsh and fish completions in {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    Ok(files.len())
}

/// `nodeip-trace --version` of `binary`: also proves the static binary starts.
pub fn binary_version(binary: &Path) -> anyhow::Result<String> {
    let out = Command::new(binary)
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", binary.display()))?;
    ensure!(
        out.status.success(),
        "{} --version failed: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    ensure!(
        line.contains(VERSION),
        "{} --version says {line:?}, not version {VERSION}",
        binary.display()
    );
    Ok(line)
}

/// The git commit, as build.rs records it for `--version` ("unknown" without `.git`).
pub fn git_commit() -> String {
    git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into())
}

/// The commit's time (seconds since the epoch), for reproducible dates in the tarball and image;
/// `$SOURCE_DATE_EPOCH` wins, and 0 without git.
pub fn source_date_epoch() -> u64 {
    std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .or_else(|| git(&["log", "-1", "--format=%ct"]))
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .current_dir(workspace_root())
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn copy_into(from: &Path, to: &Path) -> anyhow::Result<()> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// The NOTICE: the project's licence (the workspace's `license`) and, from `cargo metadata`,
/// each crate linked into the musl binary with its version and licence.
fn notice(version_line: &str) -> anyhow::Result<String> {
    let out = cargo()
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
            MUSL_TARGET,
        ])
        .output()
        .context("running cargo metadata")?;
    ensure!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("parsing cargo metadata's JSON")?;
    let crates = linked_crates(&metadata)?;
    let project = crates
        .iter()
        .find(|c| c.name == "nodeip-trace")
        .context("nodeip-trace missing from cargo metadata")?;
    let mut text = format!(
        "{version_line}\n\nnodeip-trace is licensed under {} (the SPDX expression in its Cargo.toml).\n\n\
         This binary is statically linked: it contains the Rust crates below (with the C code\n\
         some of them build: mimalloc through libmimalloc-sys), the Rust standard library\n\
         (MIT OR Apache-2.0) and the musl C library (MIT). Each crate's licence text is in its\n\
         source package on crates.io.\n\n",
        project.license
    );
    for c in crates
        .iter()
        .filter(|c| !c.name.starts_with("nodeip-trace"))
    {
        text.push_str(&format!("{} {}: {}\n", c.name, c.version, c.license));
    }
    Ok(text)
}

/// One crate of the binary, as the NOTICE lists it.
struct LinkedCrate {
    name: String,
    version: String,
    license: String,
}

/// The crates `nodeip-trace`'s binary links: its normal (not build or dev) dependencies,
/// transitively, for the musl target, without proc macros; sorted by name.
fn linked_crates(metadata: &serde_json::Value) -> anyhow::Result<Vec<LinkedCrate>> {
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .context("cargo metadata without resolve.nodes")?;
    let root = metadata["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "nodeip-trace"))
        .and_then(|p| p["id"].as_str())
        .context("cargo metadata lists no nodeip-trace package")?;
    let mut seen = std::collections::BTreeSet::new();
    let mut queue = vec![root.to_string()];
    while let Some(id) = queue.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        let Some(node) = nodes.iter().find(|n| n["id"] == id.as_str()) else {
            continue;
        };
        for dep in node["deps"].as_array().into_iter().flatten() {
            let normal = dep["dep_kinds"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|k| k["kind"].is_null());
            if normal {
                if let Some(pkg) = dep["pkg"].as_str() {
                    queue.push(pkg.to_string());
                }
            }
        }
    }
    let mut crates: Vec<LinkedCrate> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["id"].as_str().is_some_and(|id| seen.contains(id)))
        // Proc macros run in the compiler; nothing of them is in the binary.
        .filter(|p| {
            !p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["kind"] == serde_json::json!(["proc-macro"]))
        })
        .map(|p| LinkedCrate {
            name: p["name"].as_str().unwrap_or_default().to_string(),
            version: p["version"].as_str().unwrap_or_default().to_string(),
            license: p["license"]
                .as_str()
                .unwrap_or("(no SPDX licence declared: see the crate's licence file)")
                .to_string(),
        })
        .collect();
    crates.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    Ok(crates)
}
