//! `cargo xtask vm-test`: the end-to-end tests on stock Debian kernels under QEMU (the VM lane).
//!
//! The host kernel here lacks kprobes, fentry, IPVS and nlmon; Debian's stock cloud kernels have
//! them. For each kernel of the matrix (5.10, 6.1, 6.12: [`crate::kernels`]) this task fetches
//! the kernel's package with `apt-get download` (never installed on the host), unpacks it into a
//! cache (`target/vm-cache/`, reused between runs), builds the tests and the tool once, packs a
//! small initramfs — busybox, the test binaries and the tool at the same absolute paths as on the
//! host, `ip`, `getent`, `ipvsadm`, `tcpdump` with their libraries, the kernel modules the tests
//! need — boots it with QEMU (TCG; KVM with `NODEIP_VM_KVM=1`), runs `doctor` and the selected
//! end-to-end test binaries inside, and reads each binary's exit status and test lines back from
//! the serial console. Each kernel's doctor report (text and JSON) and results are kept in
//! `target/vm-kernels/<kernel>/`, which `cargo xtask kernel-table` turns into docs/kernels.md's table.
//! Any failure, missing result or timeout makes the task fail.
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context as _};
use serde_json::json;

use crate::kernel_faults::{self, FaultTime, KernelFault, FAULT_KERNEL_ARGS};
use crate::kernels::{self, Kernel};
use crate::{cargo, output, run, workspace_root};

/// The end-to-end test binaries run in the guest (those that need neither tshark nor strace).
/// The Go and musl clients of the resolver tests come prebuilt (`PREBUILD_CLIENTS`).
const GUEST_TESTS: [&str; 14] = [
    "doctor",
    "exec_hold",
    "live_getaddrinfo",
    "live_go_resolver",
    "resolver_orders",
    "attribution",
    "container_libc",
    "live_netlink",
    "live_seeds",
    "live_ipvs",
    "netns_interface_names",
    "vm_real_ipvs",
    "vm_kernel_handlers",
    "vm_nlmon_reference",
];

/// The smoke set, run on the kernels that do not get the whole suite in `cargo xtask test`:
/// doctor, holding new programs at exec, live getaddrinfo, the live seeds and the nlmon
/// reference.
const SMOKE_TESTS: [&str; 5] = [
    "doctor",
    "exec_hold",
    "live_getaddrinfo",
    "live_seeds",
    "vm_nlmon_reference",
];

/// Which guest tests a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suite {
    /// Every binary of `GUEST_TESTS`.
    Full,
    /// `SMOKE_TESTS` only.
    Smoke,
}

impl Suite {
    fn tests(self) -> &'static [&'static str] {
        match self {
            Suite::Full => &GUEST_TESTS,
            Suite::Smoke => &SMOKE_TESTS,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Suite::Full => "full",
            Suite::Smoke => "smoke",
        }
    }

    /// Seconds before a guest running this suite counts as hung: the full suite takes about
    /// 17 minutes under TCG here, the smoke set under 3. A hang the guest's own guard
    /// ([`guest_guard_secs`]) cannot end — the kernel's, say — costs at most this.
    pub fn timeout_secs(self) -> u64 {
        match self {
            Suite::Full => 2400,
            Suite::Smoke => 900,
        }
    }
}

/// Seconds a guest step (one test binary, or doctor before them) may run before the guest's
/// guard prints every task's state and kernel stack and kills it: about three times the
/// slowest run measured (resolver_orders 419 s, the others at most 196 s, under TCG).
fn guest_guard_secs(name: &str) -> u64 {
    match name {
        "resolver_orders" => 1500,
        _ => 600,
    }
}

/// What a guest runs after `doctor`.
enum GuestJob<'a> {
    /// These test binaries, each `repeat` times in a row (a flaky test shows itself); the
    /// guard's seconds for every step when `guard` is given.
    Tests {
        selected: &'a [&'a str],
        repeat: u32,
        guard: Option<u64>,
    },
    /// The storm benchmark (`STORM_BENCH`) with this many rounds, and no tests.
    Bench { rounds: u32 },
    /// The soak (`GUEST_SOAK`) for this many minutes, and no tests.
    Soak { minutes: f64 },
}

impl GuestJob<'_> {
    /// Whether the test binary `name` runs.
    fn runs(&self, name: &str) -> bool {
        match self {
            GuestJob::Tests { selected, .. } => selected.contains(&name),
            GuestJob::Bench { .. } | GuestJob::Soak { .. } => false,
        }
    }

    /// Seconds the guard gives step `name`.
    fn guard_secs(&self, name: &str) -> u64 {
        match self {
            GuestJob::Tests {
                guard: Some(secs), ..
            } => *secs,
            _ => guest_guard_secs(name),
        }
    }

    /// How many times each selected test binary runs.
    fn repeat(&self) -> u32 {
        match self {
            GuestJob::Tests { repeat, .. } => *repeat,
            GuestJob::Bench { .. } | GuestJob::Soak { .. } => 0,
        }
    }
}

/// What `cargo xtask test` (and `vm-test` without `--kernel`) runs: the whole guest suite on
/// Debian 12's 6.1, the smoke set on the others.
pub const TEST_PLAN: [(&str, Suite); 3] = [
    ("6.1", Suite::Full),
    ("6.12", Suite::Smoke),
    ("5.10", Suite::Smoke),
];

/// Tests left out in the guest, with why (passed to the test binary as `--skip`).
const GUEST_SKIPS: [(&str, &str); 2] = [
    (
        "non_netlink_traffic_is_not_captured",
        "its UDP load generator is python3, which the initramfs does not carry",
    ),
    (
        "a_container_started_during_the_trace_is_traced_from_its_first_lookup",
        "it builds and runs an image with buildah and podman, which the initramfs does not carry",
    ),
];

/// Host programs the tests drive, copied with their libraries.
const GUEST_PROGRAMS: [&str; 8] = [
    "/usr/sbin/ip",
    "/usr/bin/nsenter",
    "/usr/sbin/dnsmasq",
    "/usr/bin/getent",
    "/usr/sbin/ipvsadm",
    "/usr/bin/tcpdump",
    "/usr/bin/env",
    "/usr/bin/unshare",
];

/// The tests crate's binary that builds the resolver tests' Go and musl clients on the host
/// (`nodeip_trace_tests::clients`) and prints their paths: they are shipped at the same paths,
/// and the guest's tests take them prebuilt (`NODEIP_TEST_CLIENTS_PREBUILT=1`).
const PREBUILD_CLIENTS: &str = "prebuild_clients";

/// The tests crate's binary that measures the netlink storm side by side with nlmon + tcpdump
/// (`cargo xtask bench --vm`); it writes its table to `BENCH_ARTIFACT` among the artifacts.
const STORM_BENCH: &str = "storm_bench";
const BENCH_ARTIFACT: &str = "storm-bench.md";

/// The tests crate's binary that runs the soak in the guest (`cargo xtask soak --vm`); it
/// writes its report to `SOAK_ARTIFACT` among the artifacts.
const GUEST_SOAK: &str = "guest_soak";
const SOAK_ARTIFACT: &str = "soak.json";

/// Modules loaded in the guest, in this order (with their dependencies).
const GUEST_MODULES: [&str; 6] = ["veth", "dummy", "nlmon", "ip_vs", "ip_vs_rr", "ipip"];

/// Host packages the lane needs beyond `cargo xtask setup --for-tests`' (`cargo xtask test`
/// installs them with the rest).
pub const VM_PACKAGES: [&str; 5] = [
    "qemu-system-x86",
    "busybox-static",
    "cpio",
    "dash",
    "binutils",
];

/// Marker lines the guest prints; the host parses them from the console log.
/// `/init`'s first line: what the kernel reports before it is the boot's, not the project's.
const INIT_MARKER: &str = "@@VM-INIT";
const RESULT_MARKER: &str = "@@VM-RESULT";
const DONE_MARKER: &str = "@@VM-DONE";
const RUN_MARKER: &str = "@@VM-RUN";
const KERNEL_MARKER: &str = "@@VM-KERNEL";
/// Lines between these carry the guest's artifacts (captures) as a base64 tar.gz.
const ARTIFACTS_BEGIN: &str = "@@VM-ARTIFACTS-BEGIN";
const ARTIFACTS_END: &str = "@@VM-ARTIFACTS-END";
/// Where guest tests leave captures (`NODEIP_VM_ARTIFACTS`).
const GUEST_ARTIFACTS: &str = "/tmp/vm-artifacts";

/// Printed by the guest's guard when a step overran (`@@VM-HUNG name seconds`), before the
/// tasks' states and kernel stacks.
const HUNG_MARKER: &str = "@@VM-HUNG";
/// Ends a guard's report.
const HUNG_END_MARKER: &str = "@@VM-HUNG-END";

/// The guest's guard, a shell function: `guarded NAME SECONDS COMMAND...` runs the command in
/// the foreground (background jobs of a script start with SIGINT ignored, which the tests' own
/// SIGINTs would then miss) and, when it is still running after SECONDS, prints `HUNG_MARKER`,
/// every task's state, wait channel and kernel stack, every CPU's stack (sysrq `l`), the
/// blocked tasks (sysrq `w`) and the
/// kernel log's tail, then kills it and every nodeip-trace it left. Its status is the
/// command's (137 when killed).
const GUEST_GUARD: &str = r#"guarded() {
  name=$1; limit=$2; shift 2
  rm -f /run/guarded.pid
  ( sleep "$limit"
    pid=$(cat /run/guarded.pid 2>/dev/null)
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || exit 0
    echo; echo "@@VM-HUNG $name $limit"
    for t in /proc/[0-9]*/task/[0-9]*; do
      echo "--- task ${t#/proc/} $(cat $t/comm 2>/dev/null) $(grep '^State' $t/status 2>/dev/null) wchan $(cat $t/wchan 2>/dev/null) syscall $(cat $t/syscall 2>/dev/null)"
      cat $t/stack 2>/dev/null
    done
    echo l > /proc/sysrq-trigger 2>/dev/null
    echo w > /proc/sysrq-trigger 2>/dev/null
    dmesg | tail -n 150
    echo "@@VM-HUNG-END"
    kill -9 "$pid"; killall -9 nodeip-trace 2>/dev/null ) &
  dog=$!
  sh -c 'echo $$ > /run/guarded.pid; exec "$@"' guarded "$@"
  rc=$?
  kill "$dog" 2>/dev/null
  return $rc
}
"#;

/// The guest's guard on a soak of `minutes`: its load, then 10 minutes for the tracer's start
/// and stop under TCG.
fn soak_guard_secs(minutes: f64) -> u64 {
    (minutes * 60.0).ceil() as u64 + 600
}

/// Seconds before a guest running a soak of `minutes` counts as hung: the guard's, and 10
/// minutes more for the boot, doctor and the one-second trace before it.
pub fn soak_timeout_secs(minutes: f64) -> u64 {
    soak_guard_secs(minutes) + 600
}

/// Seconds before a guest running the storm benchmark counts as hung.
pub const BENCH_TIMEOUT_SECS: u64 = 2700;

/// The guest's guard on the storm benchmark (it takes about 300 s under TCG): past this, the
/// guard prints every task's stack and ends it, well before the host's [`BENCH_TIMEOUT_SECS`].
const BENCH_GUARD_SECS: u64 = 1500;

/// Options of the task.
pub struct VmOptions {
    /// The kernels to boot, each with its suite, in this order.
    pub kernels: Vec<(Kernel, Suite)>,
    /// Kernel package to boot (`linux-image-…`, one kernel only); default: the one its suite's
    /// `linux-image-cloud-amd64` depends on.
    pub kernel_package: Option<String>,
    /// Seconds before the guest is considered hung (default: its suite's
    /// [`Suite::timeout_secs`]).
    pub timeout_secs: Option<u64>,
    /// Run only these test binaries (default: the kernel's suite).
    pub only: Vec<String>,
    /// Runs of each test binary in one boot (at least 1).
    pub repeat: u32,
    /// Seconds the guest's guard gives each step (default: [`guest_guard_secs`]).
    pub guard_secs: Option<u64>,
    /// Appended to the guest kernel's command line (e.g. `loglevel=7`).
    pub kernel_args: Vec<String>,
}

impl VmOptions {
    /// The kernels of `--kernel` values (`5.10`, `6.1`, `6.12`, `all`; repeatable), each with
    /// the whole suite (the smoke set with `smoke`); none given: [`TEST_PLAN`].
    pub fn kernels(names: &[String], smoke: bool) -> anyhow::Result<Vec<(Kernel, Suite)>> {
        let suite = if smoke { Suite::Smoke } else { Suite::Full };
        if names.is_empty() {
            return TEST_PLAN
                .iter()
                .map(|(name, plan)| {
                    Ok((kernels::by_name(name)?, if smoke { suite } else { *plan }))
                })
                .collect();
        }
        let mut chosen = Vec::new();
        for name in names {
            let some: Vec<Kernel> = if name == "all" {
                kernels::KERNELS.to_vec()
            } else {
                vec![kernels::by_name(name)?]
            };
            for k in some {
                if !chosen.iter().any(|(c, _)| *c == k) {
                    chosen.push((k, suite));
                }
            }
        }
        Ok(chosen)
    }
}

/// What the guest runs, built on the host.
struct Built {
    /// The test executables cargo built for `GUEST_TESTS`, and the crate's helper binaries.
    tests: Vec<(String, PathBuf)>,
    /// The resolver tests' prebuilt clients (`PREBUILD_CLIENTS`).
    clients: Vec<PathBuf>,
    /// The nodeip-trace binary the guest runs: the static release binary `cargo xtask dist`
    /// ships (at the same path as on the host), so the VM lane tests what users run.
    tool: PathBuf,
}

/// Builds the tests, the tool and the resolver tests' clients.
fn build() -> anyhow::Result<Built> {
    let mut tests = build_tests()?;
    tests.retain(|(name, _)| name != PREBUILD_CLIENTS);
    // The binary itself (cargo's JSON also names its unit-test harness).
    let prebuild = workspace_root().join("target/debug").join(PREBUILD_CLIENTS);
    let clients = output(&mut Command::new(&prebuild))?
        .lines()
        .map(PathBuf::from)
        .collect();
    let tool = crate::dist::build_static_binary()?;
    Ok(Built {
        tests,
        clients,
        tool,
    })
}

/// The test executables cargo built for `GUEST_TESTS`, and the crate's binaries.
/// The compiler's errors as it would have printed them: with `--message-format=json` they go to
/// standard output as JSON, and cargo's standard error says only "due to 1 previous error".
fn compiler_errors(json_lines: &str) -> String {
    json_lines
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-message" && msg["message"]["level"] == "error")
        .filter_map(|msg| msg["message"]["rendered"].as_str().map(str::to_owned))
        .collect()
}

fn build_tests() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let out = cargo()
        .args([
            "test",
            "--package",
            "nodeip-trace-tests",
            "--no-run",
            "--message-format=json",
        ])
        .output()
        .context("cargo test --no-run")?;
    if !out.status.success() {
        bail!(
            "building the tests for the guest failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            compiler_errors(&String::from_utf8_lossy(&out.stdout))
        );
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(name), Some(exe)) = (msg["target"]["name"].as_str(), msg["executable"].as_str())
        else {
            continue;
        };
        let kinds = msg["target"]["kind"].to_string();
        // A binary's own executable, not its unit-test harness (cargo names both).
        let program = kinds.contains("\"bin\"") && msg["profile"]["test"] == false;
        if (kinds.contains("\"test\"") && GUEST_TESTS.contains(&name)) || program {
            found.push((name.to_string(), PathBuf::from(exe)));
        }
    }
    let missing: Vec<&str> = GUEST_TESTS
        .iter()
        .copied()
        .filter(|t| !found.iter().any(|(n, _)| n == t))
        .collect();
    if !missing.is_empty() {
        bail!("cargo built no test binary for {missing:?}");
    }
    Ok(found)
}

/// The ELF interpreter `file` asks for (`/lib/ld-musl-x86_64.so.1`), which glibc's `ldd` does not
/// list for a musl program.
fn interpreter(file: &Path) -> Option<PathBuf> {
    let headers = output(Command::new("readelf").arg("-l").arg(file)).ok()?;
    let at = headers.find("Requesting program interpreter: ")?;
    let rest = &headers[at + "Requesting program interpreter: ".len()..];
    Some(PathBuf::from(rest.split(']').next()?.trim()))
}

/// Copies `file` to the same path under `rootfs`, with its ELF interpreter and the shared
/// libraries `ldd` lists; a symbolic link stays one (to a copy of its target), so the guest's
/// paths are the host's.
fn copy_with_libraries(
    rootfs: &Path,
    file: &Path,
    copied: &mut BTreeSet<PathBuf>,
) -> anyhow::Result<()> {
    let mut wanted = vec![file.to_path_buf()];
    wanted.extend(interpreter(file));
    if let Ok(ldd) = output(Command::new("ldd").arg(file)) {
        wanted.extend(
            ldd.split_whitespace()
                .filter(|w| w.starts_with('/'))
                .map(PathBuf::from),
        );
    }
    while let Some(path) = wanted.pop() {
        if !copied.insert(path.clone()) {
            continue;
        }
        let target = rootfs.join(path.strip_prefix("/").unwrap_or(&path));
        std::fs::create_dir_all(target.parent().expect("absolute path has a parent"))?;
        if let Ok(link) = std::fs::read_link(&path) {
            let _ = std::fs::remove_file(&target);
            std::os::unix::fs::symlink(&link, &target)
                .with_context(|| format!("linking {}", target.display()))?;
            // The link's own target, as named (not canonical: the guest has no /lib → usr/lib).
            wanted.push(
                path.parent()
                    .expect("absolute path has a parent")
                    .join(link),
            );
            continue;
        }
        std::fs::copy(&path, &target)
            .with_context(|| format!("copying {} (for {})", path.display(), file.display()))?;
        // Debug info is most of a test binary (and of the debug tool): the guest does not need it.
        if path.starts_with(workspace_root().join("target/debug")) {
            run(Command::new("strip").arg("--strip-debug").arg(&target))?;
        }
    }
    Ok(())
}

/// Module files (relative to the modules directory) for `GUEST_MODULES`, dependencies first;
/// compressed ones (`.ko.xz`, `.ko.zst`: trixie on) keep their suffix here.
fn module_files(kernel: &Path, version: &str) -> anyhow::Result<Vec<String>> {
    let mut order: Vec<String> = Vec::new();
    for module in GUEST_MODULES {
        let deps = output(Command::new("modprobe").arg("-d").arg(kernel).args([
            "-S",
            version,
            "--show-depends",
            module,
        ]))?;
        for line in deps.lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("insmod") {
                continue; // builtin
            }
            let Some(path) = words.next() else { continue };
            let relative = ["lib", "usr/lib"]
                .iter()
                .find_map(|lib| {
                    path.strip_prefix(&format!("{}/{lib}/modules/{version}/", kernel.display()))
                })
                .unwrap_or(path)
                .to_string();
            if !order.contains(&relative) {
                order.push(relative);
            }
        }
    }
    Ok(order)
}

/// The guest's /init: mounts, modules, then every test binary with a result marker.
/// Guest directories mounted over at boot: the workspace must not be under one (the test
/// binaries sit at their host paths). /tmp is left as part of the initramfs for that reason.
const GUEST_MOUNTS: [&str; 4] = ["/run", "/proc", "/sys", "/dev"];

fn init_script(
    version: &str,
    modules: &[String],
    tests: &[(String, PathBuf)],
    tool: &Path,
    job: &GuestJob,
) -> String {
    let mut s = String::from(
        "#!/bin/sh\necho @@VM-INIT\nexport PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root RUST_BACKTRACE=1\n\
         mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev\n\
         mkdir -p /tmp; chmod 1777 /tmp; mount -t tmpfs run /run; mkdir -p /var; ln -sf /run /var/run\n\
         mount -t tracefs tracefs /sys/kernel/tracing; mount -t debugfs debugfs /sys/kernel/debug\n\
         mount -t bpf bpf /sys/fs/bpf; mount -t cgroup2 cgroup2 /sys/fs/cgroup; mount --make-rshared /\n\
         ip link set lo up\n",
    );
    for m in modules {
        let m = guest_module_name(m);
        let _ = writeln!(
            s,
            "insmod /lib/modules/{version}/{m} || echo \"insmod {m} failed\""
        );
    }
    let _ = writeln!(s, "echo \"@@VM-KERNEL $(uname -r)\"");
    let _ = writeln!(s, "export NODEIP_TRACE_BIN={}", tool.display());
    // No Go toolchain or musl-gcc here: the resolver tests take the clients shipped prebuilt.
    let _ = writeln!(s, "export NODEIP_TEST_CLIENTS_PREBUILT=1");
    // resolver_orders judges 8 random layouts here, not 24: the sorts it replays are the same
    // code on every kernel (the host judges 24); the guest adds its kernel's source choices and
    // hooks, and each of its traces starts about 15x slower under TCG.
    let _ = writeln!(s, "export RESOLVER_NAMESPACES=8");
    // exec_hold: 2 runs of each program through each wrapper, not 10 (each run's fresh file is
    // one more set of uprobes to detach at the trace's end, about 15x slower under TCG).
    let _ = writeln!(s, "export EXEC_HOLD_RUNS=2");
    // This kernel has what every guest test needs: a "kernel lacks X, skipped" is a failure here.
    let _ = writeln!(s, "export NODEIP_TRACE_REQUIRE_ALL=1");
    let _ = writeln!(
        s,
        "export NODEIP_VM_ARTIFACTS={GUEST_ARTIFACTS}; mkdir -p {GUEST_ARTIFACTS}"
    );
    s.push_str(GUEST_GUARD);
    // doctor's report, shown and kept (text and JSON) for the kernel-support table.
    let first = job.guard_secs("");
    let _ = writeln!(
        s,
        "guarded doctor-report {first} sh -c '{tool} doctor > {GUEST_ARTIFACTS}/doctor.txt 2>&1'; echo \"@@VM-DOCTOR-EXIT $?\"; cat {GUEST_ARTIFACTS}/doctor.txt",
        tool = tool.display()
    );
    let _ = writeln!(
        s,
        "guarded doctor-json {first} sh -c '{} doctor --format json > {GUEST_ARTIFACTS}/doctor.json 2>/dev/null'",
        tool.display()
    );
    // What `trace --hooks auto` really attached (the header names each hook, failures with
    // the kernel's reason), next to what doctor planned.
    let _ = writeln!(
        s,
        "guarded trace-start {first} sh -c '{} trace --format json --duration 1 > /tmp/trace.json 2> {GUEST_ARTIFACTS}/trace-start.txt'; head -n 1 /tmp/trace.json > {GUEST_ARTIFACTS}/trace-header.json; cat {GUEST_ARTIFACTS}/trace-start.txt",
        tool.display()
    );
    let skips: String = GUEST_SKIPS
        .iter()
        .map(|(test, _)| format!(" --skip {test}"))
        .collect();
    for (test, why) in GUEST_SKIPS {
        let _ = writeln!(s, "echo \"skipped in the guest: {test}: {why}\"");
    }
    if let GuestJob::Bench { rounds } = job {
        if let Some((_, exe)) = tests.iter().find(|(n, _)| n == STORM_BENCH) {
            let _ = writeln!(
                s,
                "guarded {STORM_BENCH} {BENCH_GUARD_SECS} {} --rounds {rounds} --out {GUEST_ARTIFACTS}/{BENCH_ARTIFACT}; echo \"storm_bench exited $?\"",
                exe.display()
            );
        }
    }
    if let GuestJob::Soak { minutes } = job {
        if let Some((_, exe)) = tests.iter().find(|(n, _)| n == GUEST_SOAK) {
            // Marked as a test binary: a kernel fault is reported as during it.
            let _ = writeln!(
                s,
                "echo \"{RUN_MARKER} {GUEST_SOAK}\"; guarded {GUEST_SOAK} {} {} --minutes {minutes} --out {GUEST_ARTIFACTS}/{SOAK_ARTIFACT}; echo \"{RESULT_MARKER} {GUEST_SOAK} $?\"",
                soak_guard_secs(*minutes),
                exe.display()
            );
        }
    }
    for _ in 0..job.repeat() {
        for (name, exe) in tests.iter().filter(|(n, _)| job.runs(n)) {
            let _ = writeln!(
                s,
                "echo \"{RUN_MARKER} {name}\"; guarded {name} {} {} --test-threads=1{skips}; echo \"{RESULT_MARKER} {name} $?\"",
                job.guard_secs(name),
                exe.display()
            );
        }
    }
    let _ = writeln!(
        s,
        "echo \"{ARTIFACTS_BEGIN}\"; tar czf - -C {GUEST_ARTIFACTS} . | base64; echo \"{ARTIFACTS_END}\""
    );
    let _ = writeln!(s, "echo \"{DONE_MARKER}\"\npoweroff -f");
    s
}

/// A module's file name in the guest: decompressed (busybox's insmod reads plain `.ko`).
fn guest_module_name(relative: &str) -> &str {
    relative
        .strip_suffix(".xz")
        .or_else(|| relative.strip_suffix(".zst"))
        .or_else(|| relative.strip_suffix(".gz"))
        .unwrap_or(relative)
}

/// Packs the initramfs in `work`; returns its path.
fn initramfs(
    work: &Path,
    kernel: &Path,
    version: &str,
    built: &Built,
    job: &GuestJob,
) -> anyhow::Result<PathBuf> {
    let tests = &built.tests;
    let rootfs = work.join("rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    for dir in [
        "bin", "sbin", "usr/bin", "usr/sbin", "etc", "proc", "sys", "dev", "tmp", "run", "root",
        "var/log",
    ] {
        std::fs::create_dir_all(rootfs.join(dir))?;
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox"))
        .context("copying busybox (apt install busybox-static)")?;
    for applet in output(Command::new("/bin/busybox").arg("--list"))?.lines() {
        // iproute2's ip and glibc's getent must win over busybox's applets, and the shell is
        // dash: busybox's sh would run its own `ip` applet for `sh -c "ip …"`.
        if ["ip", "getent", "env", "sh"].contains(&applet) {
            continue;
        }
        let link = rootfs.join("bin").join(applet);
        if !link.exists() {
            std::os::unix::fs::symlink("busybox", link)?;
        }
    }
    let mut copied = BTreeSet::new();
    let tool = built.tool.clone();
    copy_with_libraries(&rootfs, &tool, &mut copied)?;
    // The selected test binaries and the crate's helper binaries (the other names).
    for (name, exe) in tests {
        if job.runs(name) || !GUEST_TESTS.contains(&name.as_str()) {
            copy_with_libraries(&rootfs, exe, &mut copied)?;
        }
    }
    for program in GUEST_PROGRAMS {
        copy_with_libraries(&rootfs, Path::new(program), &mut copied)?;
    }
    for client in &built.clients {
        copy_with_libraries(&rootfs, client, &mut copied)?;
    }
    copy_with_libraries(&rootfs, Path::new("/usr/bin/dash"), &mut copied)?;
    std::os::unix::fs::symlink("/usr/bin/dash", rootfs.join("bin/sh"))?;
    // Tests find the tool and the helper binaries through paths compiled in (target/debug).
    let modules = module_files(kernel, version)?;
    let module_root = format!("lib/modules/{version}");
    for m in &modules {
        let source = kernel.join(&module_root).join(m);
        let target = rootfs.join(&module_root).join(guest_module_name(m));
        std::fs::create_dir_all(target.parent().expect("module path has a parent"))?;
        let decompress = match Path::new(m).extension().and_then(|e| e.to_str()) {
            Some("xz") => Some("xz"),
            Some("zst") => Some("zstd"),
            Some("gz") => Some("gzip"),
            _ => None,
        };
        match decompress {
            Some(program) => {
                let out = Command::new(program)
                    .arg("-dc")
                    .arg(&source)
                    .output()
                    .with_context(|| format!("starting {program} (for {m})"))?;
                if !out.status.success() {
                    bail!("{program} -dc {} failed", source.display());
                }
                std::fs::write(target, out.stdout)?;
            }
            None => {
                std::fs::copy(source, target)?;
            }
        }
    }
    std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/nonexistent:/bin/false\ntcpdump:x:104:110::/nonexistent:/bin/false\n")?;
    std::fs::write(
        rootfs.join("etc/group"),
        "root:x:0:\nnogroup:x:65534:\ntcpdump:x:110:\n",
    )?;
    std::fs::write(
        rootfs.join("etc/hosts"),
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n",
    )?;
    std::fs::write(
        rootfs.join("etc/nsswitch.conf"),
        "passwd: files\ngroup: files\nhosts: files\n",
    )?;
    // Empty, as a bind-mount target: `ip netns exec` puts a test's /etc/netns/NS/resolv.conf
    // over it (a test's own DNS server); without one, glibc and musl try 127.0.0.1.
    std::fs::write(rootfs.join("etc/resolv.conf"), "")?;
    // As Debian ships it: a name on several hosts-file lines resolves to all of them.
    std::fs::write(rootfs.join("etc/host.conf"), "multi on\n")?;
    std::fs::write(
        rootfs.join("etc/ld.so.conf"),
        "/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n",
    )?;
    // aya finds libc through /etc/ld.so.cache.
    run(Command::new("ldconfig").arg("-r").arg(&rootfs))?;
    let init = rootfs.join("init");
    std::fs::write(&init, init_script(version, &modules, tests, &tool, job))?;
    run(Command::new("chmod").arg("+x").arg(&init))?;
    let image = work.join(format!("initrd-{version}.gz"));
    let pack = format!(
        "cd {} && find . | cpio -o -H newc --quiet | gzip -1 > {}",
        rootfs.display(),
        image.display()
    );
    run(Command::new("sh").args(["-c", &pack]))?;
    Ok(image)
}

/// What the guest reported.
struct GuestReport {
    /// Per test binary: its exit status.
    results: Vec<(String, i32)>,
    /// Per test binary: its test lines, `(test, outcome)` (`ok`, `FAILED`, `ignored`).
    cases: Vec<(String, Vec<(String, String)>)>,
    /// `uname -r` in the guest.
    release: Option<String>,
    finished: bool,
    /// Steps the guest's guard killed: `(step, seconds it allowed)`.
    hung: Vec<(String, u64)>,
    /// The base64 text of the artifacts tar.gz.
    artifacts: String,
    /// What the kernel reported going wrong: lockups, hung tasks, RCU stalls, oopses.
    faults: Vec<KernelFault>,
}

impl GuestReport {
    /// The faults that came after the guest's `/init` started: with the project's code
    /// running (a fault while the kernel booted is the boot's).
    fn faults_after_boot(&self) -> impl Iterator<Item = &KernelFault> {
        self.faults.iter().filter(|f| f.during != FaultTime::Boot)
    }
}

fn parse_console(log: &str) -> GuestReport {
    let mut results = Vec::new();
    let mut cases: Vec<(String, Vec<(String, String)>)> = Vec::new();
    let mut release = None;
    let mut finished = false;
    let mut hung = Vec::new();
    let mut artifacts = String::new();
    for (line, in_artifacts) in console_lines(log) {
        if in_artifacts && !line.starts_with(ARTIFACTS_BEGIN) && !line.starts_with(ARTIFACTS_END) {
            artifacts.push_str(line.trim());
        }
        // The guard's and the result's markers may follow a test's unfinished line.
        let from_marker = |marker: &str| line.find(marker).map(|at| &line[at + marker.len()..]);
        if let Some(rest) = from_marker(RESULT_MARKER) {
            let mut words = rest.split_whitespace();
            if let (Some(name), Some(code)) = (words.next(), words.next()) {
                results.push((name.to_string(), code.parse().unwrap_or(-1)));
            }
        }
        if let Some(name) = line.strip_prefix(RUN_MARKER) {
            cases.push((name.trim().to_string(), Vec::new()));
        }
        if let Some(rest) = from_marker(HUNG_MARKER).and_then(|r| r.strip_prefix(' ')) {
            let mut words = rest.split_whitespace();
            if let (Some(step), Some(secs)) = (words.next(), words.next()) {
                hung.push((step.to_string(), secs.parse().unwrap_or(0)));
            }
        }
        if let Some(r) = line.strip_prefix(KERNEL_MARKER) {
            release = Some(r.trim().to_string());
        }
        // libtest: "test NAME ... ok" (output of the test may precede the outcome on the line).
        if let (Some(rest), Some((_, current))) = (line.strip_prefix("test "), cases.last_mut()) {
            if let Some((test, outcome)) = rest.split_once(" ... ") {
                let outcome = outcome.split_whitespace().last().unwrap_or_default();
                if ["ok", "FAILED", "ignored"].contains(&outcome) {
                    current.push((test.to_string(), outcome.to_string()));
                }
            }
        }
        finished |= line.starts_with(DONE_MARKER);
    }
    let faults = kernel_faults::kernel_faults(
        console_lines(log)
            .filter(|(_, in_artifacts)| !in_artifacts)
            .map(|(line, _)| line),
        INIT_MARKER,
        RUN_MARKER,
    );
    GuestReport {
        results,
        cases,
        release,
        finished,
        hung,
        artifacts,
        faults,
    }
}

/// The console's lines (without the serial line's `\r`), each with whether it belongs to the
/// artifacts' block, its two markers included.
fn console_lines(log: &str) -> impl Iterator<Item = (&str, bool)> {
    let mut in_block = false;
    log.lines().map(move |line| {
        let line = line.trim_end_matches('\r');
        in_block |= line.starts_with(ARTIFACTS_BEGIN);
        let this = in_block;
        in_block &= !line.starts_with(ARTIFACTS_END);
        (line, this)
    })
}

/// What of a guest's console a failed run prints: every guard's report (`HUNG_MARKER` to its
/// end) and the last `tail` lines, without the artifacts' base64.
fn console_excerpt(log: &str, tail: usize) -> String {
    let mut in_hung = false;
    let mut reports = Vec::new();
    let mut kept = Vec::new();
    for (line, _) in console_lines(log).filter(|(_, in_artifacts)| !in_artifacts) {
        in_hung |= line.contains(HUNG_MARKER);
        if in_hung {
            reports.push(line);
        }
        in_hung &= !line.starts_with(HUNG_END_MARKER);
        kept.push(line);
    }
    let last = &kept[kept.len().saturating_sub(tail)..];
    let mut out = String::new();
    for line in reports
        .iter()
        .chain(["... the console's last lines:"].iter())
        .chain(last)
    {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Unpacks the guest's artifacts into `dir` (replacing what an earlier run left).
fn unpack_artifacts(base64_text: &str, dir: &Path) -> anyhow::Result<usize> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    if base64_text.is_empty() {
        return Ok(0);
    }
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("base64 -d | tar xzf - -C \"$0\"")
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("unpacking the guest's artifacts (base64, tar)")?;
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), base64_text.as_bytes())?;
    drop(child.stdin.take());
    if !child.wait()?.success() {
        bail!("the guest's artifacts did not unpack (console cut?)");
    }
    Ok(std::fs::read_dir(dir)?.count())
}

/// KVM only when asked (`NODEIP_VM_KVM=1`): on this machine kind `/dev/kvm` opens but QEMU aborts
/// setting MSRs, so TCG is the default.
fn kvm_wanted() -> bool {
    std::env::var_os("NODEIP_VM_KVM").is_some_and(|v| v == "1")
}

/// Runs the VM lane on each kernel of `options`, one after the other; fails when any failed.
pub fn vm_test(options: VmOptions) -> anyhow::Result<()> {
    let started = Instant::now();
    if options.kernel_package.is_some() && options.kernels.len() != 1 {
        bail!("--kernel-package needs exactly one --kernel");
    }
    let (cache, built) = prepare()?;
    let mut failures = Vec::new();
    let mut times = Vec::new();
    for (kernel, suite) in &options.kernels {
        let kernel_started = Instant::now();
        let outcome = run_kernel(&cache, *kernel, *suite, &options, &built);
        let secs = kernel_started.elapsed().as_secs_f64();
        times.push(format!("{} ({}) {secs:.0} s", kernel.name, suite.name()));
        if let Err(e) = outcome {
            println!("vm-test: kernel {}: {e:#}", kernel.name);
            failures.push(kernel.name);
        }
    }
    println!(
        "vm-test: {} in {:.0} s",
        times.join(", "),
        started.elapsed().as_secs_f64()
    );
    if !failures.is_empty() {
        bail!("vm-test failed on kernel(s) {failures:?}");
    }
    println!("vm-test: all passed");
    Ok(())
}

/// What every guest run needs first: the host packages, a workspace the guest can mirror, the
/// kernel cache directory and the built tool, tests and clients.
fn prepare() -> anyhow::Result<(PathBuf, Built)> {
    crate::setup::setup_with(crate::setup::Needs::Tests, &VM_PACKAGES)?;
    let root = workspace_root();
    if let Some(m) = GUEST_MOUNTS.iter().find(|m| root.starts_with(m)) {
        bail!(
            "the workspace {} is under {m}, which the guest mounts over at boot; clone it elsewhere",
            root.display()
        );
    }
    let cache = root.join("target/vm-cache");
    std::fs::create_dir_all(&cache)?;
    Ok((cache, build()?))
}

/// A guest run: what it reported and where its console and artifacts are.
struct Booted {
    report: GuestReport,
    /// The kernel package booted.
    package: String,
    guest_secs: f64,
    console: PathBuf,
    /// Its artifacts, unpacked.
    artifacts: PathBuf,
}

/// How to boot a guest: which kernel, optionally which of its packages, for how long at most,
/// with what more on its command line.
struct Boot<'a> {
    kernel: Kernel,
    kernel_package: Option<&'a str>,
    timeout_secs: u64,
    kernel_args: &'a [String],
}

/// Packs an initramfs for the kernel running `job`, boots it and reads back what it reported.
fn boot(
    cache: &Path,
    how: &Boot,
    built: &Built,
    job: &GuestJob,
    label: &str,
) -> anyhow::Result<Booted> {
    let Boot {
        kernel,
        kernel_package,
        timeout_secs,
        kernel_args,
    } = *how;
    let prepare = Instant::now();
    let package = kernels::package(cache, kernel, kernel_package)?;
    let (tree, version) = kernels::tree(cache, kernel, &package)?;
    let work = cache.join(kernel.name);
    std::fs::create_dir_all(&work)?;
    let image = initramfs(&work, &tree, &version, built, job)?;
    let console = work.join("console.log");
    let accel = if kvm_wanted() {
        "kvm"
    } else {
        "tcg,thread=multi"
    };
    eprintln!(
        "vm-test: booting {package} ({accel}, {label}), initramfs {} MB, prepared in {:.0} s",
        std::fs::metadata(&image)?.len() >> 20,
        prepare.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let mut qemu = Command::new("qemu-system-x86_64");
    qemu.args(["-accel", accel, "-cpu", "max", "-smp", "2", "-m", "2048"])
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ])
        .args(["-monitor", "none", "-serial"])
        .arg(format!("file:{}", console.display()))
        .arg("-kernel")
        .arg(tree.join(format!("boot/vmlinuz-{version}")))
        .arg("-initrd")
        .arg(&image)
        .arg("-append")
        .arg(
            ["console=ttyS0 quiet panic=-1 rdinit=/init"]
                .into_iter()
                .chain(FAULT_KERNEL_ARGS)
                .chain(kernel_args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        );
    let status = watch_guest(&mut qemu, &console, timeout_secs)?;
    let log = std::fs::read_to_string(&console).unwrap_or_default();
    let report = parse_console(&log);
    let guest_secs = started.elapsed().as_secs_f64();
    println!(
        "vm-test: kernel {version}, guest ran {guest_secs:.0} s ({status}); console: {}",
        console.display()
    );
    if !report.faults.is_empty() {
        // Kept apart: the next boot of this kernel writes console.log again.
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        let kept = work.join(format!("console-faulted-{stamp}.log"));
        std::fs::copy(&console, &kept)?;
        println!(
            "vm-test: the guest's kernel reported {} fault(s) (whole console kept in {}):\n{}",
            report.faults.len(),
            kept.display(),
            kernel_faults::render(&report.faults)
        );
    }
    let artifacts = work.join("artifacts");
    match unpack_artifacts(&report.artifacts, &artifacts) {
        Ok(n) => println!(
            "vm-test: {n} artifact(s) from the guest in {}",
            artifacts.display()
        ),
        Err(e) => println!("vm-test: {e:#}"),
    }
    Ok(Booted {
        report,
        package,
        guest_secs,
        console,
        artifacts,
    })
}

/// How a guest's QEMU ended.
enum GuestEnd {
    /// QEMU exited (the guest powered off, or panicked and did not reboot).
    Exited(std::process::ExitStatus),
    /// Still running after the host's timeout: killed.
    TimedOut(u64),
    /// The kernel reported a fault and the console then stayed silent for this long: the guest
    /// was stuck, killed rather than left to the timeout.
    StuckAfterFault(u64),
}

impl std::fmt::Display for GuestEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuestEnd::Exited(status) => write!(f, "qemu {status}"),
            GuestEnd::TimedOut(secs) => write!(f, "qemu killed after the {secs} s timeout"),
            GuestEnd::StuckAfterFault(secs) => write!(
                f,
                "qemu killed: a kernel fault, then {secs} s without a console line"
            ),
        }
    }
}

/// Seconds of console silence after a kernel fault that count as a stuck guest.
const SILENCE_AFTER_FAULT_SECS: u64 = 120;

/// Runs QEMU until it exits, `timeout_secs` pass, or its console shows a kernel fault and then
/// stays silent for [`SILENCE_AFTER_FAULT_SECS`] (a locked-up guest that did not panic need not
/// cost the whole timeout).
fn watch_guest(qemu: &mut Command, console: &Path, timeout_secs: u64) -> anyhow::Result<GuestEnd> {
    let started = Instant::now();
    let mut child = qemu
        .spawn()
        .context("starting qemu-system-x86_64 (apt install qemu-system-x86)")?;
    let mut last_size = 0;
    let mut last_growth = Instant::now();
    let end = loop {
        if let Some(status) = child.try_wait()? {
            break GuestEnd::Exited(status);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
        if started.elapsed().as_secs() >= timeout_secs {
            break GuestEnd::TimedOut(timeout_secs);
        }
        let size = std::fs::metadata(console).map(|m| m.len()).unwrap_or(0);
        if size != last_size {
            last_size = size;
            last_growth = Instant::now();
            continue;
        }
        let silent = last_growth.elapsed().as_secs();
        if silent >= SILENCE_AFTER_FAULT_SECS {
            let log = std::fs::read_to_string(console).unwrap_or_default();
            if !parse_console(&log).faults.is_empty() {
                break GuestEnd::StuckAfterFault(silent);
            }
            // Silent but no fault: look again after another full silence.
            last_growth = Instant::now();
        }
    };
    if !matches!(end, GuestEnd::Exited(_)) {
        let _ = child.kill();
        child.wait()?;
    }
    Ok(end)
}

/// What the storm benchmark reported from a guest.
pub struct GuestBench {
    /// Its Markdown table.
    pub table: String,
    /// The kernel package the guest booted.
    pub package: String,
    /// How the guest's tracer captured netlink (doctor's `capture_plan.reason`).
    pub capture: String,
    /// How long the guest ran.
    pub guest_secs: f64,
}

/// Prepares everything and boots `kernel` (its suite's package, no extra kernel arguments) with
/// `job`, hung after `timeout_secs`.
fn boot_job(
    kernel: Kernel,
    timeout_secs: u64,
    job: &GuestJob,
    label: &str,
) -> anyhow::Result<Booted> {
    let (cache, built) = prepare()?;
    let how = Boot {
        kernel,
        kernel_package: None,
        timeout_secs,
        kernel_args: &[],
    };
    boot(&cache, &how, &built, job, label)
}

/// `cargo xtask bench --vm`: boots `kernel` with the storm benchmark instead of the tests.
pub fn vm_bench(kernel: Kernel, rounds: u32, timeout_secs: u64) -> anyhow::Result<GuestBench> {
    let booted = boot_job(
        kernel,
        timeout_secs,
        &GuestJob::Bench { rounds },
        "storm bench",
    )?;
    if let Some(f) = booted.report.faults_after_boot().next() {
        bail!(
            "the guest's kernel reported a {} {} (stacks above); see {}",
            f.kind.name(),
            f.during,
            booted.console.display()
        );
    }
    let table = std::fs::read_to_string(booted.artifacts.join(BENCH_ARTIFACT));
    if table.is_err() {
        // A hung capturer's threads (storm_bench's own report) or the guard's: in the output.
        let log = std::fs::read_to_string(&booted.console).unwrap_or_default();
        println!(
            "bench --vm: the guest's console, its guards' reports and its last lines:\n{}",
            console_excerpt(&log, 300)
        );
    }
    let table = table.with_context(|| {
        format!(
            "the guest wrote no {BENCH_ARTIFACT} (finished: {}); see {}",
            booted.report.finished,
            booted.console.display()
        )
    })?;
    Ok(GuestBench {
        table,
        package: booted.package,
        capture: doctor_capture(&booted.artifacts),
        guest_secs: booted.guest_secs,
    })
}

/// What a guest soak left: `guest_soak`'s report and how the boot went.
pub struct GuestSoak {
    /// The text of `guest_soak`'s JSON report (none when it wrote none).
    pub report: Option<String>,
    /// The kernel package the guest booted.
    pub package: String,
    /// How the guest's tracer captured netlink (doctor's `capture_plan.reason`).
    pub capture: String,
    /// The kernel faults after the guest's `/init` started, one line each.
    pub faults: Vec<String>,
    /// Whether the guest got to its end.
    pub finished: bool,
    /// Whether the guest's guard ended the soak.
    pub guarded: bool,
    /// The console log.
    pub console: PathBuf,
}

/// `cargo xtask soak --vm`: boots `kernel` with the soak of `minutes` instead of the tests.
pub fn vm_soak(kernel: Kernel, minutes: f64) -> anyhow::Result<GuestSoak> {
    let booted = boot_job(
        kernel,
        soak_timeout_secs(minutes),
        &GuestJob::Soak { minutes },
        &format!("{minutes} min soak"),
    )?;
    let report = std::fs::read_to_string(booted.artifacts.join(SOAK_ARTIFACT)).ok();
    let guarded = booted
        .report
        .hung
        .iter()
        .any(|(step, _)| step == GUEST_SOAK);
    if report.is_none() || guarded || !booted.report.finished {
        let log = std::fs::read_to_string(&booted.console).unwrap_or_default();
        println!(
            "soak --vm: the guest's console, its guards' reports and its last lines:\n{}",
            console_excerpt(&log, 120)
        );
    }
    Ok(GuestSoak {
        report,
        package: booted.package,
        capture: doctor_capture(&booted.artifacts),
        faults: booted
            .report
            .faults_after_boot()
            .map(|f| {
                format!(
                    "a kernel {} {} (console line {}): {}",
                    f.kind.name(),
                    f.during,
                    f.line,
                    f.report[0]
                )
            })
            .collect(),
        finished: booted.report.finished,
        guarded,
        console: booted.console,
    })
}

/// How the guest's tracer captured netlink: doctor's `capture_plan.reason` in the artifacts.
fn doctor_capture(artifacts: &Path) -> String {
    let doctor: serde_json::Value = std::fs::read(artifacts.join("doctor.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    doctor["capture_plan"]["reason"]
        .as_str()
        .unwrap_or("?")
        .to_string()
}

/// How one test binary did in one boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Every run exited 0.
    Passed,
    /// A run failed on its own (not ended by the guard): the first failing exit status, and
    /// how many runs failed.
    Failed { exit: i32, runs_failed: usize },
    /// The guard ended it, or the guest stopped before it reported every run: a hang.
    Hung,
}

/// Each selected binary's verdict in `report`, with its JSON for results.json.
fn judge(
    report: &GuestReport,
    selected: &[&str],
    repeat: u32,
) -> Vec<(Verdict, serde_json::Value)> {
    selected
        .iter()
        .map(|name| {
            let exits: Vec<i32> = report
                .results
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, c)| *c)
                .collect();
            let first_failure = exits.iter().copied().find(|c| *c != 0);
            let guarded = report.hung.iter().any(|(step, _)| step == name);
            let verdict = match first_failure {
                _ if guarded || exits.len() < repeat as usize => Verdict::Hung,
                Some(exit) => Verdict::Failed {
                    exit,
                    runs_failed: exits.iter().filter(|c| **c != 0).count(),
                },
                None => Verdict::Passed,
            };
            let cases = report
                .cases
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, c)| c.as_slice())
                .unwrap_or_default();
            let json = json!({
                "name": name,
                "exit": first_failure.or(exits.first().copied()),
                "runs": exits.len(),
                "hung": verdict == Verdict::Hung,
                "tests": cases.iter().map(|(t, o)| json!({"test": t, "outcome": o})).collect::<Vec<_>>(),
            });
            (verdict, json)
        })
        .collect()
}

/// Prints each binary's verdict, its failed tests, and the steps the guard ended.
fn print_verdicts(
    report: &GuestReport,
    selected: &[&str],
    verdicts: &[(Verdict, serde_json::Value)],
    repeat: u32,
) {
    for (name, (verdict, json)) in selected.iter().zip(verdicts) {
        let runs = format!("{} of {repeat} run(s)", json["runs"]);
        match verdict {
            Verdict::Passed => println!("  ok      {name} ({runs})"),
            Verdict::Failed { exit, runs_failed } => println!(
                "  FAILED  {name} (exit {exit}; {runs_failed} failed, results from {runs})"
            ),
            Verdict::Hung => println!(
                "  HUNG    {name} (results from {runs}: ended by the guest's guard, or the guest hung, crashed or timed out)"
            ),
        }
        let mut failed_cases = BTreeSet::new();
        for (_, cases) in report.cases.iter().filter(|(n, _)| n == name) {
            failed_cases.extend(cases.iter().filter(|(_, o)| o == "FAILED").map(|(t, _)| t));
        }
        for test in failed_cases {
            println!("            {test}: FAILED");
        }
    }
    for (step, secs) in &report.hung {
        println!("  guard   {step}: still running after {secs} s, ended by the guest's guard");
    }
}

/// Prints what a guest that did not pass left on its console: all a CI log keeps of it.
fn print_console(console: &Path) {
    let log = std::fs::read_to_string(console).unwrap_or_default();
    println!(
        "vm-test: the guest's console, its guards' reports and its last lines:\n{}",
        console_excerpt(&log, 80)
    );
}

/// Whether a boot passed: it finished, no step hung, the kernel reported no fault after the
/// guest's `/init` started, and every binary passed.
fn boot_passed(report: &GuestReport, verdicts: &[(Verdict, serde_json::Value)]) -> bool {
    report.finished
        && report.hung.is_empty()
        && report.faults_after_boot().next().is_none()
        && verdicts.iter().all(|(v, _)| *v == Verdict::Passed)
}

/// Boots one kernel with `suite`'s tests; saves its doctor report and results in
/// `target/vm-kernels/<kernel>/`. A boot in which binaries hung (and none failed on its own)
/// is followed by one more boot of those binaries, to tell a guest that hung once under TCG
/// from a test that hangs: the kernel passes when they pass there, reported as flaky, with the
/// first boot's console in the output.
fn run_kernel(
    cache: &Path,
    kernel: Kernel,
    suite: Suite,
    options: &VmOptions,
    built: &Built,
) -> anyhow::Result<()> {
    let selected: Vec<&str> = suite
        .tests()
        .iter()
        .copied()
        .filter(|t| options.only.is_empty() || options.only.iter().any(|o| o == t))
        .collect();
    if selected.is_empty() {
        bail!(
            "--test names none of the {} suite's tests {:?}",
            suite.name(),
            suite.tests()
        );
    }
    let how = Boot {
        kernel,
        kernel_package: options.kernel_package.as_deref(),
        timeout_secs: options.timeout_secs.unwrap_or(suite.timeout_secs()),
        kernel_args: &options.kernel_args,
    };
    let run = |tests: &[&str], label: &str| {
        let job = GuestJob::Tests {
            selected: tests,
            repeat: options.repeat,
            guard: options.guard_secs,
        };
        boot(cache, &how, built, &job, label)
    };
    let mut booted = run(&selected, &format!("{} suite", suite.name()))?;
    let mut verdicts = judge(&booted.report, &selected, options.repeat);
    print_verdicts(&booted.report, &selected, &verdicts, options.repeat);
    let mut binaries: Vec<serde_json::Value> = verdicts.iter().map(|(_, j)| j.clone()).collect();
    let mut retried = Vec::new();
    let mut passed = boot_passed(&booted.report, &verdicts);
    // A kernel fault fails the kernel at once: a second boot that passes would not make a
    // lockup under the tracer any less real. (A fault while the kernel booted, before /init,
    // is the boot's — 6.12 under TCG can oops in its scheduler's start-up — and is retried as
    // a hang.)
    let failed_alone = booted.report.faults_after_boot().next().is_some()
        || verdicts
            .iter()
            .any(|(v, _)| matches!(v, Verdict::Failed { .. }));
    if !passed {
        print_console(&booted.console);
    }
    if !passed && !failed_alone {
        retried = selected
            .iter()
            .zip(&verdicts)
            .filter(|(_, (v, _))| *v == Verdict::Hung)
            .map(|(name, _)| *name)
            .collect();
        if retried.is_empty() {
            // Only a step before the tests hung: run them all again.
            retried = selected.clone();
        }
        println!(
            "vm-test: kernel {}: {retried:?} hung (console above); booting once more with them, to tell a guest that hung once from a test that hangs",
            kernel.name
        );
        booted = run(&retried, "retry of the hung")?;
        verdicts = judge(&booted.report, &retried, options.repeat);
        print_verdicts(&booted.report, &retried, &verdicts, options.repeat);
        passed = boot_passed(&booted.report, &verdicts);
        if passed {
            println!(
                "vm-test: kernel {}: FLAKY: {retried:?} passed on the second boot after hanging on the first (its console is above)",
                kernel.name
            );
        } else {
            print_console(&booted.console);
        }
        for (name, (_, json)) in retried.iter().zip(&verdicts) {
            if let Some(slot) = binaries.iter_mut().find(|b| b["name"] == *name) {
                slot["retry"] = json.clone();
            }
        }
    }
    let Booted {
        report,
        package,
        guest_secs,
        console,
        artifacts,
    } = booted;
    let saved = workspace_root().join("target/vm-kernels").join(kernel.name);
    std::fs::create_dir_all(&saved)?;
    for file in [
        "doctor.txt",
        "doctor.json",
        "trace-start.txt",
        "trace-header.json",
    ] {
        let _ = std::fs::remove_file(saved.join(file));
        if artifacts.join(file).exists() {
            std::fs::copy(artifacts.join(file), saved.join(file))?;
        }
    }
    let results = json!({
        "kernel": kernel.name,
        "suite": suite.name(),
        "package": package,
        "release": report.release,
        "finished": report.finished,
        "guest_seconds": guest_secs.round(),
        "retried": retried,
        "binaries": binaries,
        "kernel_faults": report.faults.iter().map(|f| json!({
            "kind": f.kind.name(),
            "during": f.during.to_string(),
            "console_line": f.line,
            "headline": f.report[0],
        })).collect::<Vec<_>>(),
    });
    std::fs::write(
        saved.join("results.json"),
        serde_json::to_string_pretty(&results)? + "\n",
    )?;
    println!("vm-test: doctor report and results in {}", saved.display());
    if !passed {
        // The verdicts are of the last boot: of the retried binaries when there was a retry.
        let last = if retried.is_empty() {
            &selected
        } else {
            &retried
        };
        let mut failed: Vec<&str> = last
            .iter()
            .zip(&verdicts)
            .filter(|(_, (v, _))| *v != Verdict::Passed)
            .map(|(name, _)| *name)
            .collect();
        for (step, _) in &report.hung {
            if !failed.contains(&step.as_str()) {
                failed.push(step);
            }
        }
        let faults: Vec<String> = report
            .faults_after_boot()
            .map(|f| format!("a kernel {} {}", f.kind.name(), f.during))
            .collect();
        bail!(
            "{failed:?} failed{}{}; see {}",
            if report.finished {
                ""
            } else {
                ", guest did not finish"
            },
            if faults.is_empty() {
                String::new()
            } else {
                format!(", {} (stacks above)", faults.join(", "))
            },
            console.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiler_errors_are_taken_from_cargo_json() {
        let out = concat!(
            r#"{"reason":"compiler-artifact","target":{"name":"x"}}"#,
            "\n",
            r#"{"reason":"compiler-message","message":{"level":"warning","rendered":"warning: w\n"}}"#,
            "\n",
            r#"{"reason":"compiler-message","message":{"level":"error","rendered":"error: No space left on device\n"}}"#,
            "\nnot json\n"
        );
        assert_eq!(compiler_errors(out), "error: No space left on device\n");
    }

    #[test]
    fn console_gives_results_test_lines_and_kernel() {
        let log = "@@VM-KERNEL 5.10.0-46-cloud-amd64\r\n@@VM-RUN doctor\r\n\
                   test a ... ok\r\ntest b ... some output FAILED\r\ntest c ... ignored\r\n\
                   @@VM-RESULT doctor 101\r\n@@VM-RUN live_seeds\r\ntest d ... ok\r\n\
                   @@VM-RESULT live_seeds 0\r\n@@VM-DONE\r\n";
        let report = parse_console(log);
        assert_eq!(report.release.as_deref(), Some("5.10.0-46-cloud-amd64"));
        assert_eq!(
            report.results,
            [("doctor".to_string(), 101), ("live_seeds".to_string(), 0)]
        );
        let outcomes: Vec<&str> = report.cases[0].1.iter().map(|(_, o)| o.as_str()).collect();
        assert_eq!(outcomes, ["ok", "FAILED", "ignored"]);
        assert_eq!(report.cases[1].1, [("d".to_string(), "ok".to_string())]);
        assert!(report.finished);
    }

    #[test]
    fn a_guarded_step_that_hung_is_reported_with_its_tasks() {
        // The marker may come after a test's unfinished line.
        let log = "@@VM-RUN doctor\r\ntest t ... @@VM-HUNG doctor 600\r\n--- task 1 init\r\n\
                   [<0>] do_wait+0x1/0x2\r\n@@VM-HUNG-END\r\n@@VM-RESULT doctor 137\r\n\
                   @@VM-ARTIFACTS-BEGIN\r\nQUJD\r\n@@VM-ARTIFACTS-END\r\n@@VM-DONE\r\n";
        let report = parse_console(log);
        assert_eq!(report.hung, [("doctor".to_string(), 600)]);
        assert_eq!(report.results, [("doctor".to_string(), 137)]);
        let excerpt = console_excerpt(log, 3);
        assert!(
            excerpt.starts_with("test t ... @@VM-HUNG doctor 600\n--- task 1 init\n"),
            "{excerpt}"
        );
        assert!(excerpt.contains("@@VM-HUNG-END\n... the console's last lines:\n"));
        assert!(!excerpt.contains("QUJD"), "{excerpt}");
        assert!(
            excerpt.ends_with("@@VM-RESULT doctor 137\n@@VM-DONE\n"),
            "{excerpt}"
        );
    }

    #[test]
    fn binaries_that_hung_are_told_from_those_that_failed() {
        let log = "@@VM-RUN a\ntest x ... ok\n@@VM-RESULT a 0\n@@VM-RESULT a 0\n\
                   @@VM-RUN b\ntest y ... FAILED\n@@VM-RESULT b 101\n@@VM-RESULT b 0\n\
                   @@VM-RUN c\n@@VM-HUNG c 600\n@@VM-HUNG-END\n@@VM-RESULT c 137\n\
                   @@VM-RESULT c 0\n@@VM-RUN d\n@@VM-RESULT d 0\n";
        let report = parse_console(log);
        let verdicts: Vec<Verdict> = judge(&report, &["a", "b", "c", "d"], 2)
            .into_iter()
            .map(|(v, _)| v)
            .collect();
        assert_eq!(
            verdicts,
            [
                Verdict::Passed,
                Verdict::Failed {
                    exit: 101,
                    runs_failed: 1
                },
                Verdict::Hung,
                // One run of two reported: the guest stopped during the second.
                Verdict::Hung,
            ]
        );
        assert!(!boot_passed(&report, &judge(&report, &["a"], 2)));
        let clean = parse_console("@@VM-RESULT a 0\n@@VM-DONE\n");
        assert!(boot_passed(&clean, &judge(&clean, &["a"], 1)));
        // Every binary passed, but the kernel locked up on the way: the boot failed.
        let locked = parse_console(
            "@@VM-INIT\n@@VM-RUN a\n[ 9.0] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [x:1]\n\
             @@VM-RESULT a 0\n@@VM-DONE\n",
        );
        assert!(!boot_passed(&locked, &judge(&locked, &["a"], 1)));
        // A fault while the kernel booted is the boot's, not the suite's.
        let boot_oops = parse_console(
            "[ 3.0] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n@@VM-INIT\n@@VM-RESULT a 0\n@@VM-DONE\n",
        );
        assert_eq!(boot_oops.faults.len(), 1);
        assert!(boot_passed(&boot_oops, &judge(&boot_oops, &["a"], 1)));
    }

    #[test]
    fn bench_and_soak_guests_run_their_program_and_no_test() {
        let tests = [
            ("doctor".to_string(), PathBuf::from("/t/doctor-1")),
            (STORM_BENCH.to_string(), PathBuf::from("/t/storm_bench")),
            (GUEST_SOAK.to_string(), PathBuf::from("/t/guest_soak")),
        ];
        let tool = Path::new("/t/nodeip-trace");
        let bench = init_script("6.1.0", &[], &tests, tool, &GuestJob::Bench { rounds: 3 });
        assert!(bench.contains(&format!(
            "guarded {STORM_BENCH} {BENCH_GUARD_SECS} /t/storm_bench --rounds 3 --out {GUEST_ARTIFACTS}/{BENCH_ARTIFACT}"
        )));
        assert!(!bench.contains("/t/doctor-1"), "{bench}");
        assert!(!bench.contains("/t/guest_soak"), "{bench}");
        let soak = init_script("6.1.0", &[], &tests, tool, &GuestJob::Soak { minutes: 2.0 });
        assert!(
            soak.contains(&format!(
                "echo \"{RUN_MARKER} {GUEST_SOAK}\"; guarded {GUEST_SOAK} 720 /t/guest_soak --minutes 2 --out {GUEST_ARTIFACTS}/{SOAK_ARTIFACT}; echo \"{RESULT_MARKER} {GUEST_SOAK} $?\""
            )),
            "{soak}"
        );
        assert!(
            !soak.contains("/t/doctor-1") && !soak.contains("storm_bench"),
            "{soak}"
        );
        assert_eq!(soak_timeout_secs(30.0), 1800 + 1200);
        let selected = ["doctor"];
        let job = GuestJob::Tests {
            selected: &selected,
            repeat: 2,
            guard: None,
        };
        let run = init_script("6.1.0", &[], &tests, tool, &job);
        assert_eq!(
            run.matches("guarded doctor 600 /t/doctor-1 --test-threads=1")
                .count(),
            2,
            "{run}"
        );
        assert!(!run.contains("storm_bench"), "{run}");
    }

    #[test]
    fn a_lockup_during_the_soak_is_the_soak_s() {
        // A lockup during the soak is the soak's.
        let log = format!(
            "@@VM-INIT\n@@VM-RUN {GUEST_SOAK}\n[ 99.0] watchdog: BUG: soft lockup - CPU#1 stuck for 23s! [nodeip-trace:672]\n"
        );
        let report = parse_console(&log);
        let fault = report.faults_after_boot().next().unwrap();
        assert_eq!(fault.during, FaultTime::Test(GUEST_SOAK.into()));
    }

    #[test]
    fn kernels_default_to_the_test_plan() {
        let plan = VmOptions::kernels(&[], false).unwrap();
        assert_eq!(plan[0].0.name, "6.1");
        assert_eq!(plan[0].1, Suite::Full);
        assert!(plan[1..].iter().all(|(_, s)| *s == Suite::Smoke));
        let all = VmOptions::kernels(&["all".into(), "6.1".into()], true).unwrap();
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|(_, s)| *s == Suite::Smoke));
        assert!(VmOptions::kernels(&["4.19".into()], false).is_err());
    }
}
