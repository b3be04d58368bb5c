//! Developer tasks: `setup` (toolchain bootstrap: for building, or with `--for-tests` for the
//! tests too), `test` (everything CI runs), `demo` (the README's live trace), `bless` (refresh
//! golden files), `vm-test` (the end-to-end tests on stock Debian kernels under QEMU),
//! `kernel-table` (docs/kernels.md's kernel-support table from `vm-test`'s runs),
//! `bench` (overhead and loss, recorded in the history BENCHMARKS.md is written from), `soak`
//! (hours-long behaviour in minutes: memory, fds, loss under continuous load), `fuzz` (the libFuzzer targets in `fuzz/`,
//! briefly), `dist` (the static release binary and its tarball), `image` (the DaemonSet's
//! container image). Run as `cargo xtask <task>`.
mod bench;
mod browser_tools;
mod demo;
mod dist;
mod fuzz;
mod image;
mod kernel_faults;
mod kernels;
mod program_time;
mod setup;
mod soak;
mod steps;
mod vm;

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "nodeip-trace developer tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// The kernel a `--vm` task's guest boots.
#[derive(clap::Args)]
struct GuestKernel {
    /// The guest's kernel with --vm: 5.10, 6.1 or 6.12.
    #[arg(
        long = "kernel",
        value_name = "KERNEL",
        default_value = "6.1",
        requires = "vm"
    )]
    kernel: String,
}

#[derive(Subcommand)]
enum Task {
    /// Install what building and running the tool needs (LLVM 22, bpf-linker, rust-src, the musl
    /// target, iproute2); with --for-tests, also everything the tests, the VM lane and the
    /// benchmarks run. One line per step; the tools' output goes to target/setup.log. Idempotent.
    Setup {
        /// Also the test tooling: tshark, strace, Go toolchains, podman, buildah, containerd,
        /// chromium, Java, Node.js and npm packages, kubernetes-validate, …
        #[arg(long)]
        for_tests: bool,
    },
    /// Bootstrap, build the release artifacts (`dist`, `image`), then run every test (unit,
    /// end-to-end as root against the static release binary, clippy, fmt), the fuzz targets
    /// briefly (`fuzz`: 30 s each over their corpora), then the VM lane (`vm-test`: the
    /// end-to-end tests again on Debian's stock kernels: all of them on 6.1, the smoke set on
    /// 5.10 and 6.12) and a 2-minute soak in a 6.1 guest (`soak --vm`). CI runs this.
    Test {
        /// Skip `cargo xtask setup --for-tests`.
        #[arg(long)]
        no_setup: bool,
        /// Skip the fuzz targets (for quick local iterations; CI runs them).
        #[arg(long)]
        no_fuzz: bool,
        /// Skip the VM lane (for quick local iterations; CI runs it).
        #[arg(long)]
        no_vm: bool,
    },
    /// Bootstrap what building needs (no test tooling), build (the debug build:
    /// target/debug/nodeip-trace), and trace a reproduction of seed incident 000 in a scratch
    /// network namespace (kubelet's node IP reordered by glibc's getaddrinfo sort).
    Demo {
        /// Skip the set-up.
        #[arg(long)]
        no_setup: bool,
    },
    /// Measure what tracing costs and drops (side by side with untraced runs, strace and
    /// tshark), append the run to docs/benchmarks/history.jsonl and write BENCHMARKS.md and
    /// the plots (docs/benchmarks/KEY.svg) again from the history. Not part of `test`.
    Bench {
        /// Measure nothing: write BENCHMARKS.md and the plots again from the history.
        #[arg(long, conflicts_with_all = ["quick", "exec_hold", "vm"])]
        publish: bool,
        /// Smaller sizes, one round each (under 2 minutes).
        #[arg(long)]
        quick: bool,
        /// Only the exec hold's rows: the storm of known execs and the hold times of new
        /// programs (a few minutes).
        #[arg(long, conflicts_with = "vm")]
        exec_hold: bool,
        /// Instead, the netlink storm in a VM lane guest (`--kernel`, default 6.1): untraced,
        /// nlmon0 + tcpdump -w, nodeip-trace --pcap and --format json, the hooks alone and the
        /// records with the tracer stopped, side by side (about 3 minutes under TCG).
        #[arg(long)]
        vm: bool,
        #[command(flatten)]
        guest: GuestKernel,
        /// Rounds of the guest's storm with --vm (each round runs every row once, in rotated
        /// order; medians and the paired --pcap ÷ nlmon ratios are over them). About 25 s of
        /// guest time a round under TCG.
        #[arg(long, value_name = "N", default_value_t = 3, requires = "vm", value_parser = clap::value_parser!(u32).range(1..=50))]
        rounds: u32,
    },
    /// Trace the whole node under continuous mixed load (getaddrinfo, netlink loops, ip -batch,
    /// dumps, getent) for a while; check RSS stays flat, no fd leaks, every call is an event or
    /// counted lost, outputs complete; record the figures in the benchmark history (and
    /// BENCHMARKS.md). With --vm, in a VM lane guest; `test` runs a 2-minute one on 6.1 (not
    /// recorded).
    Soak {
        /// How long the load runs.
        #[arg(long, default_value_t = 10.0)]
        minutes: f64,
        /// Instead, in a VM lane guest (`--kernel`, default 6.1) tracing the whole guest under
        /// a mixed load (route-get storms, glibc, musl and Go lookups, fresh Go programs held at
        /// exec, process churn, container starts, dumps); also fails on any kernel fault in the
        /// guest's console (soft lockup, hung task, RCU stall, oops).
        #[arg(long)]
        vm: bool,
        #[command(flatten)]
        guest: GuestKernel,
    },
    /// Regenerate golden files and the malformed-input corpus in `tests/malformed/` (only when
    /// an output change is intended); every golden test compares through
    /// `tests/src/golden.rs`, which `BLESS=1` switches to writing.
    Bless,
    /// Build the cargo-fuzz targets in `fuzz/` and run each briefly over its committed corpus;
    /// fails on any crash, timeout or OOM (installs cargo-fuzz when missing; no nightly needed).
    Fuzz {
        /// Seconds per target.
        #[arg(long, default_value_t = fuzz::DEFAULT_SECONDS)]
        seconds: u64,
        /// Run only this target (e.g. `netlink_route`).
        #[arg(long, value_name = "NAME")]
        target: Option<String>,
    },
    /// Run the end-to-end tests on stock Debian kernels under QEMU (kprobes, fentry, IPVS and
    /// nlmon exist there); the kernel packages and the initramfs are cached in target/vm-cache,
    /// each kernel's doctor report and results kept in target/vm-kernels/<kernel>/.
    VmTest {
        /// Kernel to boot: 5.10 (bullseye), 6.1 (bookworm), 6.12 (trixie) or all (repeatable);
        /// each runs the whole guest suite. Default: what `test` runs (the whole suite on 6.1,
        /// the smoke set on the others).
        #[arg(long = "kernel", value_name = "KERNEL")]
        kernels: Vec<String>,
        /// Only the smoke set (doctor, live getaddrinfo, live seeds, nlmon reference).
        #[arg(long)]
        smoke: bool,
        /// Kernel package to boot with one --kernel (default: what the suite's
        /// linux-image-cloud-amd64 depends on).
        #[arg(long, value_name = "PACKAGE")]
        kernel_package: Option<String>,
        /// Seconds before the guest counts as hung. Default: 2400 for the whole suite, 900 for
        /// the smoke set. Within it, the guest's own guard ends any one test binary that
        /// overruns (600 s; resolver_orders 1500 s; see --guard), printing every task's kernel stack.
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// Run only this test binary (repeatable), e.g. `--test vm_real_ipvs`.
        #[arg(long = "test", value_name = "NAME")]
        only: Vec<String>,
        /// Run each test binary this many times in one boot, to catch a flaky one
        /// (e.g. `--kernel 5.10 --test doctor --repeat 20`).
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        /// Seconds the guest's guard gives each test binary (and doctor before them) before
        /// it prints every task's kernel stack and ends it. Default: 600 (resolver_orders 1500).
        #[arg(long, value_name = "SECONDS")]
        guard: Option<u64>,
        /// Append this to the guest kernel's command line (repeatable), e.g. `loglevel=7`
        /// and `softlockup_all_cpu_backtrace=1` to see every CPU's stack on a lockup (the
        /// console is target/vm-cache/<kernel>/console.log).
        #[arg(long = "kernel-arg", value_name = "ARG")]
        kernel_args: Vec<String>,
    },
    /// Build the static release binary (x86_64-unknown-linux-musl, eBPF object embedded, no
    /// debug info) and target/dist/nodeip-trace-<version>-x86_64-linux-musl.tar.gz (binary,
    /// README, NOTICE, docs/events.md, the Wireshark dissector, a man page per subcommand in
    /// share/man/man1, bash, zsh and fish completions in share/) with its .sha256.
    Dist,
    /// Build the container image deploy/daemonset.yaml runs (buildah, FROM scratch: the static
    /// binary and OCI labels, nothing pulled), tagged as the manifest's `image`.
    Image {
        /// Also save the image as an OCI archive here.
        #[arg(long, value_name = "PATH")]
        oci_archive: Option<PathBuf>,
    },
    /// Rewrite docs/kernels.md's kernel-support table from the VM lane's saved runs
    /// (target/vm-kernels/<kernel>/doctor.json and results.json).
    KernelTable,
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs a command, failing with its command line when it fails.
pub fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

/// apt's options that make a stalled mirror connection fail after 30 s and be retried, rather
/// than wait forever (every apt-get of setup and of the VM lane's private apt takes them).
pub const APT_NO_STALL: [&str; 4] = [
    "-o",
    "Acquire::http::Timeout=30",
    "-o",
    "Acquire::Retries=3",
];

/// Runs a command that reaches the network, killing it (and failing) when it has not finished
/// within `limit`: a stalled mirror connection must cost the run minutes, not the CI's whole
/// budget (an `apt-get update` that never returned once took a CI run past its 90 minutes).
pub fn run_within(cmd: &mut Command, limit: std::time::Duration) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    loop {
        if let Some(status) = child.try_wait()? {
            if !status.success() {
                bail!("{cmd:?} failed: {status}");
            }
            return Ok(());
        }
        if started.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "{cmd:?} had not finished after {} s and was stopped; is the package mirror reachable?",
                limit.as_secs()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Runs a command to completion and gives its stdout, failing with its command line and stderr
/// when it fails.
pub fn output(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `cargo` with the workspace as current directory.
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

/// The host part of `test`: the release artifacts (the end-to-end tests run the static binary;
/// the DaemonSet test runs the image, also saved as an OCI archive), then the tests, clippy and
/// fmt.
fn test() -> anyhow::Result<()> {
    let t0 = std::time::Instant::now();
    let bin = dist::dist()?;
    let image = image::build_image(&bin)?;
    image::save_oci_archive(&image, &image::default_oci_archive())?;
    println!(
        "xtask test: dist and image built in {:.0} s",
        t0.elapsed().as_secs_f64()
    );
    run(cargo()
        .args(["test", "--workspace", "--exclude", "nodeip-trace-ebpf"])
        .env("NODEIP_TRACE_BIN", &bin))?;
    run(cargo().args([
        "clippy",
        "--workspace",
        "--exclude",
        "nodeip-trace-ebpf",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    run(cargo().args(["fmt", "--all", "--check"]))?;
    println!("xtask test: host tests passed");
    Ok(())
}

/// The fuzz targets, briefly each over their committed corpora (part of `test`).
fn fuzz_briefly() -> anyhow::Result<()> {
    fuzz::fuzz(fuzz::DEFAULT_SECONDS, None)?;
    println!("xtask test: fuzz targets passed");
    Ok(())
}

/// The short guest soak `test` runs after the VM lane: minutes of load on 6.1.
const CI_SOAK_MINUTES: f64 = 2.0;

/// The VM lane's short soak (part of `test`): [`CI_SOAK_MINUTES`] of mixed load traced in a 6.1
/// guest, failing on any kernel fault, lost event, RSS or fd growth; not recorded in the
/// benchmark history (`cargo xtask soak --vm` is).
fn ci_soak() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let outcome = soak::soak_vm(kernels::by_name("6.1")?, CI_SOAK_MINUTES, false);
    println!(
        "xtask test: the {CI_SOAK_MINUTES}-minute guest soak took {:.0} s",
        started.elapsed().as_secs_f64()
    );
    outcome
}

/// Takes xtask/build.rs's stand-ins for the values nodeip-trace/src/cli.rs reads at compile time
/// out of the environment: `cargo run` sets them for xtask, and every cargo xtask starts would
/// pass them on to the tool's build.rs, which takes `NODEIP_TRACE_GIT_COMMIT` for the commit.
fn drop_build_stand_ins() {
    for var in ["NODEIP_TRACE_GIT_COMMIT", "NODEIP_TRACE_EBPF_SHA256"] {
        if std::env::var(var).as_deref() == Ok("xtask-stand-in") {
            // Before any thread starts.
            std::env::remove_var(var);
        }
    }
}

fn main() -> anyhow::Result<()> {
    drop_build_stand_ins();
    match Cli::parse().task {
        Task::Setup { for_tests: false } => setup::setup(setup::Needs::Release),
        Task::Setup { for_tests: true } => setup::setup(setup::Needs::Tests),
        Task::Test {
            no_setup,
            no_fuzz,
            no_vm,
        } => {
            if !no_setup {
                // The VM lane's host packages too, in the same apt-get run.
                let vm_packages: &[&str] = if no_vm { &[] } else { &vm::VM_PACKAGES };
                setup::setup_with(setup::Needs::Tests, vm_packages)?;
            }
            test()?;
            if no_fuzz {
                println!("xtask test: fuzz targets skipped (--no-fuzz)");
            } else {
                fuzz_briefly()?;
            }
            if no_vm {
                println!("xtask test: VM lane skipped (--no-vm)");
                return Ok(());
            }
            let lane = vm::vm_test(vm::VmOptions {
                kernels: vm::VmOptions::kernels(&[], false)?,
                kernel_package: None,
                timeout_secs: None,
                only: Vec::new(),
                repeat: 1,
                guard_secs: None,
                kernel_args: Vec::new(),
            });
            // Run even when the lane failed: a lockup or leak under load is news of its own.
            let soak = ci_soak();
            lane?;
            soak
        }
        Task::Demo { no_setup } => {
            if !no_setup {
                setup::setup(setup::Needs::Run)?;
            }
            demo::demo()
        }
        Task::VmTest {
            kernels,
            smoke,
            kernel_package,
            timeout,
            only,
            repeat,
            guard,
            kernel_args,
        } => vm::vm_test(vm::VmOptions {
            kernels: vm::VmOptions::kernels(&kernels, smoke)?,
            kernel_package,
            timeout_secs: timeout,
            only,
            repeat,
            guard_secs: guard,
            kernel_args,
        }),
        Task::KernelTable => kernels::write_table(),
        Task::Dist => dist::dist().map(drop),
        Task::Image { oci_archive } => image::image(oci_archive.as_deref()),
        Task::Bench { publish: true, .. } => {
            let page = bench::publish(&workspace_root())?;
            println!(
                "bench: {} and its plots written from the history",
                page.display()
            );
            Ok(())
        }
        Task::Bench {
            vm: true,
            guest: GuestKernel { kernel },
            rounds,
            ..
        } => bench::bench_vm(kernels::by_name(&kernel)?, rounds),
        Task::Bench {
            quick, exec_hold, ..
        } => bench::bench(quick, exec_hold),
        Task::Soak {
            minutes,
            vm: true,
            guest: GuestKernel { kernel },
        } => soak::soak_vm(kernels::by_name(&kernel)?, minutes, true),
        Task::Soak { minutes, .. } => soak::soak(minutes),
        Task::Fuzz { seconds, target } => fuzz::fuzz(seconds, target.as_deref()),
        Task::Bless => run(cargo()
            .args(["test", "--workspace", "--exclude", "nodeip-trace-ebpf"])
            .env("BLESS", "1")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn run_within_stops_a_command_that_outlives_its_limit() {
        let started = Instant::now();
        let e =
            run_within(Command::new("sleep").arg("30"), Duration::from_millis(500)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "{e:#}");
        assert!(format!("{e:#}").contains("had not finished after"), "{e:#}");
    }

    #[test]
    fn run_within_passes_success_and_failure_through() {
        run_within(&mut Command::new("true"), Duration::from_secs(10)).unwrap();
        let e = run_within(&mut Command::new("false"), Duration::from_secs(10)).unwrap_err();
        assert!(format!("{e:#}").contains("failed"), "{e:#}");
    }
}
