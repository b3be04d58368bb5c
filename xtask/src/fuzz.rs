//! `cargo xtask fuzz`: builds the cargo-fuzz (libFuzzer) targets in `fuzz/` and runs each for a
//! few seconds over its committed corpus (`fuzz/corpus/TARGET`), failing on any crash, timeout
//! (`-timeout=10`) or out-of-memory (`-rss_limit_mb=2048`); the failing input is left in
//! `fuzz/artifacts/TARGET/`.
//!
//! Toolchain: no nightly. cargo-fuzz accepts a stable compiler when `RUSTC_BOOTSTRAP=1` is set
//! (it then passes `-Zsanitizer=address` and its other `-Z` flags to stable rustc, as the eBPF
//! build does), so this task sets it and uses whichever toolchain runs `cargo xtask`. cargo-fuzz
//! itself is installed from crates.io when missing (`cargo install cargo-fuzz --locked`). New
//! inputs found go to `fuzz/target/corpus/TARGET`, never into the committed corpus.
//!
//! Time on the 2-core machine, 5 × 30 s of fuzzing included: 7½ minutes from cold when it is
//! otherwise idle (cargo-fuzz install ½ minute, first build of the targets 4¼ minutes), up to about
//! 14 minutes with other builds running (2 and 10 minutes); under 3 minutes warm.
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::Context as _;

use crate::{cargo, run, workspace_root};

/// Seconds each target runs by default.
pub const DEFAULT_SECONDS: u64 = 30;

/// The targets, as named in `fuzz/Cargo.toml`.
pub const TARGETS: [&str; 5] = [
    "netlink_route",
    "netlink_genl",
    "addrinfo_record",
    "capture_analyze",
    "recording_replay",
];

const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// `cargo fuzz …` run from the workspace root on the current toolchain, nightly features on.
fn cargo_fuzz() -> Command {
    let mut c = cargo();
    c.arg("fuzz").env("RUSTC_BOOTSTRAP", "1");
    c
}

/// Installs cargo-fuzz unless some version of it answers.
fn ensure_cargo_fuzz() -> anyhow::Result<()> {
    let present = cargo()
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !present {
        eprintln!(
            "fuzz: installing cargo-fuzz {CARGO_FUZZ_VERSION} from crates.io (about two minutes)"
        );
        run(cargo().args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            CARGO_FUZZ_VERSION,
        ]))?;
    }
    Ok(())
}

/// Builds every target (debug assertions on, so arithmetic overflow is a crash too) and runs
/// `only` (default: all of [`TARGETS`]) for `seconds` each; fails at the first target that finds
/// a crash, timeout or OOM.
pub fn fuzz(seconds: u64, only: Option<&str>) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let targets: Vec<&str> = match only {
        Some(name) if TARGETS.contains(&name) => vec![name],
        Some(name) => anyhow::bail!("no fuzz target {name}; there are {}", TARGETS.join(", ")),
        None => TARGETS.to_vec(),
    };
    ensure_cargo_fuzz()?;
    run(cargo_fuzz().args(["build", "--debug-assertions"]))?;
    let root = workspace_root();
    for target in targets {
        let scratch = root.join("fuzz/target/corpus").join(target);
        std::fs::create_dir_all(&scratch)
            .with_context(|| format!("creating {}", scratch.display()))?;
        eprintln!("fuzz: {target} for {seconds} s");
        run(cargo_fuzz()
            .args(["run", "--debug-assertions", target])
            .arg(&scratch)
            .arg(Path::new("fuzz/corpus").join(target))
            .args([
                "--",
                &format!("-max_total_time={seconds}"),
                "-rss_limit_mb=2048",
                "-timeout=10",
                "-print_final_stats=1",
            ]))
        .with_context(|| {
            format!(
                "fuzz target {target} failed: the input is in fuzz/artifacts/{target}/; replay \
                 it with `RUSTC_BOOTSTRAP=1 cargo fuzz run {target} fuzz/artifacts/{target}/FILE`"
            )
        })?;
    }
    eprintln!("fuzz: no crash ({} s)", t0.elapsed().as_secs());
    Ok(())
}
