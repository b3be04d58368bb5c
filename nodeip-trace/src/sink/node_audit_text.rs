//! The node address audit (`nodeip-trace explain`, and a capture's section comment) as text:
//! the interfaces, the local table's sources, each resolver's order, each component's pick
//! with its reasons, the findings. The audit itself is `explain::node_audit`'s.
use std::net::IpAddr;

use crate::explain::node_audit::AuditReport;
use crate::model::ip_text::ip_list as list;

/// The audit in a few lines (a capture's section comment): what each component picks, and the
/// findings' one-line summaries. [`render_text`] has the reasons.
pub fn summary_text(r: &AuditReport) -> String {
    let mut out = format!(
        "node address audit of {:?} at the end of the trace (each component with its \
         defaults; `nodeip-trace explain` gives the reasons):",
        r.snapshot.hostname
    );
    for p in &r.picks {
        let picked: Vec<String> = p.picked.iter().map(IpAddr::to_string).collect();
        out.push_str(&format!(
            "\n  {} ({}): {}",
            p.component,
            p.setting,
            if picked.is_empty() {
                "nothing".to_owned()
            } else {
                picked.join(", ")
            }
        ));
    }
    for d in &r.findings {
        out.push_str(&format!("\n  {}", d.headline()));
    }
    out
}

/// The audit as text.
pub fn render_text(r: &AuditReport) -> String {
    let mut out = format!(
        "Node address audit for {:?}\n\nInterfaces:\n",
        r.snapshot.hostname
    );
    let mut names: Vec<&str> = Vec::new();
    for a in &r.snapshot.addresses {
        if !names.contains(&a.ifname.as_str()) {
            names.push(&a.ifname);
        }
    }
    for name in names {
        let addrs: Vec<String> = r
            .snapshot
            .addresses
            .iter()
            .filter(|a| a.ifname == name)
            .map(|a| {
                let rank = match (a.address.contains(':'), a.secondary) {
                    (true, _) => "",
                    (false, true) => " secondary",
                    (false, false) => " primary",
                };
                let label = a
                    .label
                    .as_deref()
                    .map(|l| format!(" (label {l})"))
                    .unwrap_or_default();
                format!("{}/{}{rank}{label}", a.address, a.prefix_len)
            })
            .collect();
        out.push_str(&format!("  {name}: {}\n", addrs.join(", ")));
    }
    out.push_str("\nLocal table (the src the kernel gives each local address):\n");
    for l in r
        .local_sources
        .iter()
        .filter(|l| l.address.is_ipv4() && !l.address.is_loopback())
    {
        let src = l.src.map(|a| a.to_string()).unwrap_or_else(|| "-".into());
        let note = match l.src {
            Some(s) if s != l.address => {
                "  ← not itself: a secondary's local route carries the primary"
            }
            _ => "",
        };
        out.push_str(&format!(
            "  {:<16} dev {:<10} src {src}{note}\n",
            l.address.to_string(),
            l.ifname
        ));
    }
    if !r.resolvers.is_empty() {
        out.push_str(&format!(
            "\nHow each resolver orders {:?} (hosts file: {}):\n",
            r.snapshot.hostname,
            list(&r.snapshot.hosts)
        ));
        for o in &r.resolvers {
            out.push_str(&format!(
                "  {:<5} [{}]  — used by {}\n",
                o.resolver,
                list(&o.order),
                o.used_by
            ));
            for why in &o.reasoning {
                out.push_str(&format!("      {why}\n"));
            }
        }
    }
    if let Some(choice) = &r.go_cgo_choice {
        out.push_str(&format!(
            "\nWhich resolver a Go program uses for {:?} here (Go's net/conf.go rules on this node's nsswitch.conf and resolv.conf; a program's own environment can change it: GODEBUG=netdns, LOCALDOMAIN, RES_OPTIONS, HOSTALIASES):\n",
            r.snapshot.hostname
        ));
        out.push_str("  built without cgo (kubelet from 1.38, kube-proxy, kube-vip, MetalLB and OpenELB speakers): go\n");
        out.push_str(&format!(
            "  built with cgo (kubelet up to 1.37, calico-node): {} — {}\n",
            if choice.cgo {
                "cgo → the C library (glibc on most hosts; musl in k3s)"
            } else {
                "go"
            },
            choice.because
        ));
    }
    out.push_str("\nWhat each component picks:\n");
    for p in &r.picks {
        let picked = if p.picked.is_empty() {
            "nothing".to_string()
        } else {
            list(&p.picked)
        };
        out.push_str(&format!("  {} [{}]: {picked}\n", p.component, p.setting));
        for why in &p.reasoning {
            out.push_str(&format!("      {why}\n"));
        }
    }
    if r.findings.is_empty() {
        out.push_str("\nNo known failure pattern found.\n");
    } else {
        out.push_str(&format!("\n=== {} finding(s) ===\n", r.findings.len()));
        for d in &r.findings {
            out.push_str(&format!("{}\n", d.headline()));
            out.push_str(&format!("    remedy:   {}\n", d.remedy));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{render_text, summary_text};
    use crate::explain::node_audit::{audit, ComponentSettings, NodeSnapshot};
    use crate::explain::resolver::glibc::gai_conf::GaiConf;
    use crate::model::facts::AddressFact;

    fn address(ifname: &str, address: &str, secondary: bool) -> AddressFact {
        AddressFact {
            ifname: ifname.into(),
            address: address.into(),
            prefix_len: 24,
            secondary,
            label: None,
            flags: Vec::new(),
        }
    }

    #[test]
    fn the_audit_reads_as_interfaces_then_orders_then_picks_then_findings() {
        let snapshot = NodeSnapshot {
            hostname: "node-a".into(),
            links: Vec::new(),
            addresses: vec![
                address("eth0", "10.0.0.10", false),
                address("eth0", "10.0.0.20", true),
            ],
            routes: Vec::new(),
            hosts: vec!["10.0.0.10".parse().unwrap()],
        };
        let report = audit(snapshot, &ComponentSettings::default(), &GaiConf::default());
        let text = render_text(&report);
        assert!(
            text.starts_with("Node address audit for \"node-a\"\n\nInterfaces:\n  eth0: 10.0.0.10/24 primary, 10.0.0.20/24 secondary\n"),
            "{text}"
        );
        let order = ["Interfaces:", "Local table", "What each component picks:"];
        let at: Vec<usize> = order.iter().map(|h| text.find(h).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        let summary = summary_text(&report);
        assert!(
            summary.starts_with("node address audit of \"node-a\""),
            "{summary}"
        );
        assert!(summary.contains("\n  kubelet"), "{summary}");
    }
}
