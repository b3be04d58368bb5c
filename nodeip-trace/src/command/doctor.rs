//! `nodeip-trace doctor`: what this kernel offers and which hook each probe would use.
use std::io::Write;

use crate::probe::features::KernelFeatures;
use crate::probe::hooks::KernelHookMode;
use crate::sink::{write_report, ReportFormat};

/// Runs doctor; returns whether the tool can trace here (the exit status).
pub fn run(format: ReportFormat, out: &mut dyn Write) -> std::io::Result<bool> {
    let features = KernelFeatures::detect(true);
    write_report(format, &features, render_text, out)?;
    Ok(features.can_trace())
}

/// The doctor report as text.
fn render_text(features: &KernelFeatures) -> String {
    let yes = |b: bool| if b { "yes" } else { "no" };
    let mut s = String::new();
    s.push_str(&format!("kernel       {}\n", features.kernel));
    s.push_str(&format!("BTF          {}\n", yes(features.btf)));
    s.push_str(&format!("tracefs      {}\n", features.tracefs));
    s.push_str(&format!(
        "privileges   root={} capabilities={} → {}\n",
        yes(features.root),
        if features.capabilities.is_empty() {
            "none".into()
        } else {
            features.capabilities.join(",")
        },
        if features.missing_capabilities.is_empty() {
            "can load eBPF".to_string()
        } else {
            format!(
                "CANNOT load eBPF: missing {}",
                features.missing_capabilities.join(", ")
            )
        }
    ));
    s.push_str(&format!(
        "lockdown     {}\n",
        match features.lockdown.as_deref() {
            None => "not reported (no /sys/kernel/security/lockdown)",
            Some("confidentiality") =>
                "confidentiality → eBPF may not read kernel memory: CANNOT trace",
            Some(mode) => mode,
        }
    ));
    s.push_str(&format!("uprobes      {}\n", yes(features.uprobes)));
    s.push_str(&format!("kprobes      {}\n", yes(features.kprobes)));
    s.push_str(&format!(
        "fentry       {}{}\n",
        yes(features.fentry),
        if features.fentry {
            String::new()
        } else {
            format!(" ({})", features.fentry_reason)
        }
    ));
    s.push_str(&format!("exec hold    {}\n", features.exec_hold));
    s.push_str(&format!(
        "helpers      bpf_task_pt_regs {}, bpf_get_attach_cookie {}, bpf_get_func_ret {}\n",
        yes(features.task_pt_regs),
        yes(features.attach_cookie),
        yes(features.fexit_return)
    ));
    for note in features.degradations() {
        s.push_str(&format!("  limit: {note}\n"));
    }
    s.push_str("libcs\n");
    for l in &features.libcs {
        s.push_str(&format!(
            "  {:?} {} (dev {} ino {}, mapped by {} processes)\n",
            l.kind,
            l.path.display(),
            l.id.dev,
            l.id.ino,
            l.processes
        ));
    }
    s.push_str("go resolvers (running Go programs whose net package sorts; probed at start, new ones at exec)\n");
    if features.go_resolvers.is_empty() {
        s.push_str("  none running\n");
    }
    for g in &features.go_resolvers {
        s.push_str(&format!(
            "  {} {}{} ({} processes){}\n      looks this machine's hostname up with {}: {}\n",
            g.version,
            g.path,
            if g.cgo { " cgo" } else { "" },
            g.processes,
            g.unsupported
                .as_deref()
                .map(|w| format!(": not probed, {w}"))
                .or_else(|| g.limited.as_deref().map(|w| format!(": {w}")))
                .unwrap_or_default(),
            if g.hostname_lookup.cgo {
                "the C library (cgo)"
            } else {
                "Go's own resolver"
            },
            g.hostname_lookup.because
        ));
    }
    s.push_str("static resolvers (running statically built programs with their own getaddrinfo; probed at start, new ones at exec)\n");
    if features.static_resolvers.is_empty() {
        s.push_str("  none running\n");
    }
    for t in &features.static_resolvers {
        s.push_str(&format!(
            "  {} {} (found by {}; {} processes){}\n",
            t.libc.name(),
            t.path,
            t.found_by,
            t.processes,
            t.unsupported
                .as_deref()
                .map(|w| format!(": not probed, {w}"))
                .unwrap_or_default()
        ));
    }
    s.push_str("hooks\n");
    for h in &features.hooks {
        s.push_str(&format!(
            "  {:<4} {:<10} {:<60} {}{}\n",
            if h.available { "ok" } else { "--" },
            h.mode,
            h.target,
            h.purpose,
            if h.reason.is_empty() {
                String::new()
            } else {
                format!(" — {}", h.reason)
            }
        ));
    }
    s.push_str(&format!(
        "netlink capture (trace --hooks auto): {}\n",
        features.capture_plan.reason
    ));
    s.push_str("kernel handler probes (trace --hooks auto)\n");
    for p in &features.handler_plan {
        s.push_str(&format!(
            "  {:<20} {:<7} {}\n",
            p.function,
            p.mode.map_or("off", KernelHookMode::name),
            p.reason
        ));
    }
    s.push_str(&format!(
        "verdict      {}\n",
        if features.can_trace() {
            "can trace"
        } else {
            "CANNOT trace here (see above)"
        }
    ));
    s
}
