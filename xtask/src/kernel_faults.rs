//! Kernel faults in a VM lane guest's console: soft and hard lockups, hung tasks, RCU stalls,
//! oopses, BUGs and panics — each with the step that was running and the lines that follow it
//! (its stacks), so a run that met one fails with the evidence in its output.
//!
//! The guest boots with [`FAULT_KERNEL_ARGS`]: the console shows warnings (the level stacks are
//! printed at), a soft lockup prints every CPU's stack and then panics (the guest ends at once
//! instead of spinning until the host's timeout), and a hung task prints every CPU's stack.

/// Appended to every guest's kernel command line (before `--kernel-arg`s, which can override).
/// - `loglevel=5`: the console shows warnings and worse. The stacks of a lockup report, of an
///   all-CPU backtrace and of a self-detected RCU stall are printed at the default level (4);
///   with the earlier `loglevel=3` a report showed only its headline.
/// - `softlockup_all_cpu_backtrace=1`, `softlockup_panic=1`: a soft lockup prints the stacks of
///   every CPU, then panics; with `panic=-1` and QEMU's `-no-reboot` the guest stops there.
/// - `sysctl.kernel.hung_task_all_cpu_backtrace=1`: a hung task's report adds every CPU's stack
///   (the hung task's own stack is printed at info level: the guard's `dmesg` shows it).
pub const FAULT_KERNEL_ARGS: [&str; 4] = [
    "loglevel=5",
    "softlockup_all_cpu_backtrace=1",
    "softlockup_panic=1",
    "sysctl.kernel.hung_task_all_cpu_backtrace=1",
];

/// How many console lines after a fault's headline its report keeps (its registers and the
/// stacks of every CPU fit in this).
const REPORT_LINES: usize = 120;

/// What kind of fault the kernel reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `watchdog: BUG: soft lockup - CPU#N stuck for Ns!`
    SoftLockup,
    /// `watchdog: Watchdog detected hard LOCKUP on cpu N`
    HardLockup,
    /// `INFO: task NAME:PID blocked for more than N seconds.`
    HungTask,
    /// `rcu: INFO: rcu_sched detected stalls on CPUs/tasks:` (or a self-detected stall)
    RcuStall,
    /// An oops: a bad access, a `BUG()`, a general protection fault, an invalid opcode.
    Oops,
    /// `Kernel panic - not syncing: …`
    Panic,
}

impl FaultKind {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::SoftLockup => "soft lockup",
            FaultKind::HardLockup => "hard lockup",
            FaultKind::HungTask => "hung task",
            FaultKind::RcuStall => "RCU stall",
            FaultKind::Oops => "oops",
            FaultKind::Panic => "panic",
        }
    }

    /// The kind of fault a console line reports, if it reports one.
    fn of_line(line: &str) -> Option<FaultKind> {
        if line.contains("BUG: soft lockup") {
            Some(FaultKind::SoftLockup)
        } else if line.contains("detected hard LOCKUP") {
            Some(FaultKind::HardLockup)
        } else if line.contains("INFO: task ") && line.contains(" blocked for more than ") {
            Some(FaultKind::HungTask)
        } else if line.contains("rcu: INFO: ") && line.contains("detected stall") {
            Some(FaultKind::RcuStall)
        } else if line.contains("Kernel panic - not syncing") {
            Some(FaultKind::Panic)
        } else if [
            "Oops:",
            "BUG: unable to handle",
            "BUG: kernel NULL pointer",
            "kernel BUG at",
            "general protection fault",
            "invalid opcode:",
            "BUG: scheduling while atomic",
        ]
        .iter()
        .any(|m| line.contains(m))
        {
            Some(FaultKind::Oops)
        } else {
            None
        }
    }
}

/// When in the guest's life a fault came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultTime {
    /// While the kernel booted, before the guest's `/init` printed its first line: nothing of
    /// the project had run yet.
    Boot,
    /// After `/init` started, before the first test binary (doctor and the trace-start check).
    Setup,
    /// While this test binary ran (the last `@@VM-RUN` before it).
    Test(String),
}

impl std::fmt::Display for FaultTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultTime::Boot => f.write_str("while the kernel booted (before /init)"),
            FaultTime::Setup => f.write_str("in the guest's set-up (doctor, trace start)"),
            FaultTime::Test(name) => write!(f, "during {name}"),
        }
    }
}

/// One fault the kernel reported on the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFault {
    /// What it was.
    pub kind: FaultKind,
    /// When it came.
    pub during: FaultTime,
    /// Its line number in the console (1-based).
    pub line: usize,
    /// Its headline and the lines after it, up to [`REPORT_LINES`] or the next marker line.
    pub report: Vec<String>,
}

/// Every fault in `lines` (the console's lines without their `\r`, artifacts' lines left out by
/// the caller), given the markers that tell the guest's steps apart: `init_marker` is the first
/// line `/init` prints, `run_marker` starts a test binary. Lines of one report (a panic inside
/// a lockup's report, an RCU stall's many stacks) are one fault: the first headline's.
pub fn kernel_faults<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    init_marker: &str,
    run_marker: &str,
) -> Vec<KernelFault> {
    let mut faults: Vec<KernelFault> = Vec::new();
    let mut during = FaultTime::Boot;
    // The fault whose report is still being collected, and how many lines it may still take.
    let mut open: Option<usize> = None;
    for (n, line) in lines.into_iter().enumerate() {
        if line.starts_with("@@") {
            // A marker line ends a report: the guest's userspace went on.
            open = None;
            if line.starts_with(init_marker) {
                during = FaultTime::Setup;
            } else if let Some(name) = line.strip_prefix(run_marker) {
                during = FaultTime::Test(name.trim().to_string());
            }
            continue;
        }
        if let Some(i) = open {
            let report = &mut faults[i].report;
            report.push(line.to_string());
            if report.len() >= REPORT_LINES {
                open = None;
            }
            continue;
        }
        if let Some(kind) = FaultKind::of_line(line) {
            faults.push(KernelFault {
                kind,
                during: during.clone(),
                line: n + 1,
                report: vec![line.to_string()],
            });
            open = Some(faults.len() - 1);
        }
    }
    faults
}

/// The faults as a text block for the task's output: a headline per fault, then its report.
pub fn render(faults: &[KernelFault]) -> String {
    let mut out = String::new();
    for f in faults {
        out.push_str(&format!(
            "=== kernel {} {} (console line {}) ===\n",
            f.kind.name(),
            f.during,
            f.line
        ));
        for line in &f.report {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of 6.1's soft lockup report with `softlockup_all_cpu_backtrace=1` and
    /// `softlockup_panic=1` (the headlines as `watchdog.c` and `panic.c` print them).
    const LOCKUP: &str = "\
[    2.000000] Run /init as init process
@@VM-KERNEL 6.1.0-57-cloud-amd64
@@VM-RUN container_libc
@@VM-RESULT container_libc 0
@@VM-RUN attribution
running 1 test
test events_carry_pod_and_container_and_filters_keep_only_them ... [  420.561240] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [ring-drain:674]
[  420.561300] Modules linked in: ipip tunnel4 ip_tunnel ip_vs_rr ip_vs nlmon dummy veth
[  420.561400] RIP: 0010:native_queued_spin_lock_slowpath+0x6e/0x2d0
[  420.561500] Call Trace:
[  420.561510]  <TASK>
[  420.561520]  _raw_spin_lock+0x29/0x30
[  420.561530]  __bpf_ringbuf_reserve+0x5c/0x150
[  420.561600] NMI backtrace for cpu 1
[  420.561610] RIP: 0010:uprobe_mmap+0x10/0x300
[  420.561700] Kernel panic - not syncing: softlockup: hung tasks
";

    #[test]
    fn a_soft_lockup_is_one_fault_with_its_stacks_and_its_test() {
        let faults = kernel_faults(LOCKUP.lines(), "@@VM-KERNEL", "@@VM-RUN");
        assert_eq!(faults.len(), 1, "{faults:#?}");
        let f = &faults[0];
        assert_eq!(f.kind, FaultKind::SoftLockup);
        assert_eq!(f.during, FaultTime::Test("attribution".into()));
        assert_eq!(f.line, 7);
        assert!(f.report[0].contains("stuck for 26s! [ring-drain:674]"));
        assert!(f.report.iter().any(|l| l.contains("__bpf_ringbuf_reserve")));
        assert!(f
            .report
            .iter()
            .any(|l| l.contains("NMI backtrace for cpu 1")));
        assert!(f.report.last().unwrap().contains("Kernel panic"));
        let text = render(&faults);
        assert!(
            text.starts_with("=== kernel soft lockup during attribution (console line 7) ===\n")
        );
    }

    #[test]
    fn faults_are_told_apart_by_when_they_came() {
        let log = "\
[    3.100000] int3: 0000 [#1] PREEMPT SMP NOPTI
[    3.100100] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[    3.100200] RIP: 0010:sched_clock_cpu+0x1/0x2
@@VM-KERNEL 6.12.0
[   30.000000] INFO: task ip:312 blocked for more than 120 seconds.
[   30.000100] NMI backtrace for cpu 0
@@VM-RUN live_seeds
[   90.000000] rcu: INFO: rcu_preempt self-detected stall on CPU
[   90.000100] rcu: \t1-....: (21002 ticks this GP)
test a ... ok
";
        let faults = kernel_faults(log.lines(), "@@VM-KERNEL", "@@VM-RUN");
        let kinds: Vec<(FaultKind, FaultTime)> =
            faults.iter().map(|f| (f.kind, f.during.clone())).collect();
        assert_eq!(
            kinds,
            [
                (FaultKind::Oops, FaultTime::Boot),
                (FaultKind::HungTask, FaultTime::Setup),
                (FaultKind::RcuStall, FaultTime::Test("live_seeds".into())),
            ]
        );
        // A marker ends a report; the lines after a headline up to it are the report.
        assert_eq!(faults[1].report.len(), 2);
        assert_eq!(faults[2].report.len(), 3);
    }

    #[test]
    fn a_quiet_console_has_no_faults() {
        let log = "[ 1.0] Run /init as init process\n@@VM-KERNEL 6.1\n@@VM-RUN doctor\n\
                   test bug_handling ... ok\nBUG-free\n@@VM-DONE\n";
        assert!(kernel_faults(log.lines(), "@@VM-KERNEL", "@@VM-RUN").is_empty());
    }

    #[test]
    fn a_long_report_is_cut() {
        let mut log = String::from("@@VM-KERNEL x\n[ 1.0] watchdog: BUG: soft lockup - CPU#1\n");
        for i in 0..500 {
            log.push_str(&format!("[ 1.0]  frame{i}\n"));
        }
        let faults = kernel_faults(log.lines(), "@@VM-KERNEL", "@@VM-RUN");
        assert_eq!(faults.len(), 1);
        assert_eq!(faults[0].report.len(), REPORT_LINES);
    }
}
