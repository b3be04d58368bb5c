//! The report page around the picture: header, diagnosis cards linked to the rows that prove
//! them, the swimlane, the node address audit, each resolver call's pair table and the whole
//! text timeline. One self-contained file: inline CSS, no script, a Content-Security-Policy
//! that forbids any fetch.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::escape::Escaped;
use super::swimlane::{self, LanePlan, Row};
use crate::explain::address_ledger::{AddressLedger, NO_REQUEST};
use crate::explain::node_audit::AuditReport;
use crate::model::event::{Diagnosis, DiagnosisId, RecordingHeader};
use crate::model::getaddrinfo::GetaddrinfoCall;
use crate::model::ip_text::ip_list;

const CSS: &str = r#"
:root { color-scheme: light; --ink: #1b1f24; --muted: #57606a; --line: #d0d7de; --accent: #0a58ca; --bad: #a40e26; --badbg: #ffebe9; --warn: #7d4e00; --warnbg: #fff8c5; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); margin: 0; padding: 0 24px 48px; }
header, section > h2, section > p, section > h3, section > ul, .cards, table, details { max-width: 1500px; }
header { border-bottom: 2px solid var(--line); padding: 16px 0 8px; }
h1 { font-size: 22px; margin: 0 0 8px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); } h3 { font-size: 15px; margin: 0 0 6px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
nav a { margin-right: 14px; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 12px; }
article.diagnosis { border: 1px solid var(--line); border-left: 6px solid var(--muted); border-radius: 6px; padding: 10px 14px; }
article.diagnosis[data-severity="error"] { border-left-color: var(--bad); background: var(--badbg); }
article.diagnosis[data-severity="warning"] { border-left-color: #bf8700; background: var(--warnbg); }
.sev { font-weight: 700; letter-spacing: .04em; margin-right: 6px; }
.remedy { margin: 6px 0 0; } ul.evidence { margin: 4px 0; padding-left: 20px; }
.notice { border: 1px solid #bf8700; background: var(--warnbg); padding: 6px 10px; border-radius: 4px; }
.scroll { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; }
svg.swimlane { display: block; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 11px; }
svg.swimlane text { white-space: pre; fill: var(--ink); }
svg.swimlane .lifeline { stroke: #8c959f; stroke-dasharray: 4 4; }
svg.swimlane .lane-head { fill: #f6f8fa; stroke: #8c959f; }
svg.swimlane .kernel .lane-head { fill: #ddf4ff; stroke: #0969da; }
svg.swimlane .lane-label { text-anchor: middle; font-weight: 700; }
svg.swimlane .lane-sub { text-anchor: middle; fill: var(--muted); font-size: 10px; }
svg.swimlane .gutter, svg.swimlane .gutter-head { fill: var(--muted); }
svg.swimlane .gutter-head { font-weight: 700; }
svg.swimlane .request { stroke: #0969da; stroke-width: 1.5; }
svg.swimlane .reply { stroke: #1a7f37; stroke-width: 1.5; stroke-dasharray: 6 3; }
svg.swimlane marker path { fill: #57606a; }
svg.swimlane .label-bg { fill: #fff; fill-opacity: .85; }
svg.swimlane .call-bar { fill: #fff8c5; stroke: #9a6700; }
svg.swimlane .call-label { font-weight: 700; }
svg.swimlane .note { fill: #f6f8fa; stroke: #0969da; }
svg.swimlane .cause { stroke: #8c959f; stroke-dasharray: 1 3; }
svg.swimlane .gap rect { fill: #f6f8fa; } svg.swimlane .gap text { fill: var(--muted); font-style: italic; }
svg.swimlane .decision-bg { fill: var(--badbg); stroke: var(--bad); stroke-width: 1; }
svg.swimlane .decision .detail, svg.swimlane .decision-mark { font-weight: 700; fill: var(--bad); }
svg.swimlane .notice { fill: var(--bad); font-weight: 700; }
svg.swimlane a .detail { fill: var(--accent); text-decoration: underline; }
svg.swimlane .row:target .decision-bg, svg.swimlane .row:target .detail { outline: 2px solid var(--accent); }
table { border-collapse: collapse; margin: 6px 0 12px; } th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.bad { color: var(--bad); font-weight: 700; }
.call { margin-bottom: 18px; } .muted { color: var(--muted); }
pre.timeline { white-space: pre; overflow-x: auto; background: #f6f8fa; padding: 8px; border-radius: 6px; }
@media print { .scroll { overflow: visible; } }
"#;

/// Everything the page shows, gathered by the sink.
pub struct Page<'a> {
    /// The recording's header (a capture has none).
    pub header: Option<&'a RecordingHeader>,
    /// What the report was made from (a file name), when known.
    pub source: &'a str,
    /// First and last event time (RFC 3339), and the span in ns.
    pub window: Option<(&'a str, &'a str, u64)>,
    /// Events by kind.
    pub events: &'a BTreeMap<&'static str, u64>,
    /// Records lost, by reason.
    pub lost: &'a BTreeMap<String, u64>,
    /// Diagnoses in order.
    pub diagnoses: &'a [Diagnosis],
    /// For each diagnosis, each evidence's row (index into `rows`) when it names a drawn event.
    pub diagnosis_rows: &'a [Vec<Option<usize>>],
    /// The address changes asked for during the trace.
    pub ledger: &'a AddressLedger,
    /// The swimlane's rows.
    pub rows: &'a [Row],
    /// Rows not drawn (past the budget).
    pub rows_left_out: u64,
    /// The lanes.
    pub plan: &'a LanePlan,
    /// Row index → ids of the diagnoses resting on it.
    pub decisions: &'a BTreeMap<usize, Vec<DiagnosisId>>,
    /// The node address audit, when the input held an address dump, and what it leaves out.
    pub audit: Option<(&'a AuditReport, &'a [String])>,
    /// Resolver calls: anchor id, who, the call.
    pub calls: &'a [(String, String, &'a GetaddrinfoCall)],
    /// The text timeline, as `replay` prints it.
    pub text_timeline: &'a str,
    /// Events left out of the text timeline.
    pub text_left_out: u64,
}

/// Writes the whole page.
pub fn write_page(out: &mut String, p: &Page<'_>) {
    let host = p.header.map(|h| h.host.as_str()).unwrap_or_default();
    let title = if host.is_empty() {
        "nodeip-trace report".to_string()
    } else {
        format!("nodeip-trace report: {host}")
    };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"nodeip-trace {}\">\n<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n",
        env!("CARGO_PKG_VERSION"),
        Escaped(&title)
    );
    write_header(out, p, &title);
    write_diagnoses(out, p);
    write_timeline(out, p);
    write_address_changes(out, p.ledger);
    write_audit(out, p.audit);
    write_calls(out, p.calls);
    let _ = write!(
        out,
        "<section id=\"events\">\n<h2>Every event, as text</h2>\n<details>\n<summary>The text timeline (as <code>nodeip-trace replay</code> prints it)</summary>\n<pre class=\"timeline\">{}</pre>\n",
        Escaped(p.text_timeline)
    );
    if p.text_left_out > 0 {
        let _ = writeln!(
            out,
            "<p class=\"notice\">{} more events are not in this page: replay the recording for all of them.</p>",
            p.text_left_out
        );
    }
    let _ = write!(
        out,
        "</details>\n</section>\n<footer><p class=\"muted\">Made by nodeip-trace {}. No script; nothing is fetched (the page's Content-Security-Policy forbids it).</p></footer>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    );
}

fn fact(out: &mut String, name: &str, value: &str) {
    let _ = writeln!(out, "<dt>{name}</dt><dd>{}</dd>", Escaped(value));
}

fn write_header(out: &mut String, p: &Page<'_>, title: &str) {
    let _ = write!(
        out,
        "<header id=\"summary\">\n<h1>{}</h1>\n<dl class=\"facts\">\n",
        Escaped(title)
    );
    let h = p.header;
    fact(
        out,
        "Node",
        h.map(|h| h.host.as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or("not recorded (a capture names no node)"),
    );
    fact(
        out,
        "Kernel",
        h.map(|h| h.kernel.as_str())
            .filter(|s| !s.is_empty())
            .unwrap_or("not recorded"),
    );
    let window = match p.window {
        Some((first, last, ns)) if ns < 1_000_000_000 => {
            format!("{first} → {last} ({:.3} ms)", ns as f64 / 1e6)
        }
        Some((first, last, ns)) => format!("{first} → {last} ({:.3} s)", ns as f64 / 1e9),
        None => "no events".into(),
    };
    fact(out, "Time window", &window);
    if let Some(h) = h {
        if !h.netlink_capture.is_empty() {
            fact(out, "Netlink captured at", &h.netlink_capture);
        }
        let failed = h.hooks.iter().filter(|x| x.contains("FAILED")).count();
        let _ = write!(
            out,
            "<dt>Hooks</dt><dd><details><summary>{} attached{}</summary><ul class=\"hooks\">",
            h.hooks.len() - failed,
            if failed > 0 {
                format!(", {failed} not available on this kernel")
            } else {
                String::new()
            }
        );
        for hook in &h.hooks {
            let _ = write!(out, "<li>{}</li>", Escaped(hook));
        }
        out.push_str("</ul></details></dd>\n");
        fact(
            out,
            "Recorded by",
            &format!("nodeip-trace {}", h.tool_version),
        );
        if !h.filters.is_empty() {
            fact(out, "Filters", &h.filters.join(" "));
        }
    }
    let events: Vec<String> = p.events.iter().map(|(k, n)| format!("{k} {n}")).collect();
    fact(
        out,
        "Events",
        &format!(
            "{} ({})",
            p.events.values().sum::<u64>(),
            if events.is_empty() {
                "none".into()
            } else {
                events.join(", ")
            }
        ),
    );
    let lost_total: u64 = p.lost.values().sum();
    let lost = if lost_total == 0 {
        "0: nothing was lost".to_string()
    } else {
        let why: Vec<String> = p.lost.iter().map(|(k, n)| format!("{k} {n}")).collect();
        format!("{lost_total} ({})", why.join(", "))
    };
    fact(out, "Lost", &lost);
    if !p.source.is_empty() {
        fact(out, "Made from", p.source);
    }
    out.push_str("</dl>\n<nav><a href=\"#diagnoses\">Diagnoses</a><a href=\"#timeline\">Timeline</a><a href=\"#addresses\">Address changes</a><a href=\"#audit\">Address audit</a><a href=\"#calls\">Resolver calls</a><a href=\"#events\">Every event</a></nav>\n</header>\n");
}

fn write_diagnoses(out: &mut String, p: &Page<'_>) {
    let _ = writeln!(
        out,
        "<section id=\"diagnoses\">\n<h2>Diagnoses ({})</h2>",
        p.diagnoses.len()
    );
    if p.diagnoses.is_empty() {
        out.push_str("<p>No known failure pattern was found in these events.</p>\n");
    }
    out.push_str("<div class=\"cards\">\n");
    for (n, (d, rows)) in p.diagnoses.iter().zip(p.diagnosis_rows).enumerate() {
        let _ = write!(
            out,
            "<article class=\"diagnosis\" id=\"diag-{}\" data-id=\"{}\" data-severity=\"{}\">\n\
             <h3><span class=\"sev\">{}</span> {}</h3>\n<p>{}</p>\n<ul class=\"evidence\">\n",
            n + 1,
            d.id,
            d.severity.as_str(),
            d.severity.upper(),
            d.id,
            Escaped(&d.summary)
        );
        for (evidence, row) in d.evidence.iter().zip(rows) {
            match row {
                Some(row) => {
                    let _ = writeln!(
                        out,
                        "<li><a class=\"evidence\" href=\"#row-{}\">{}</a></li>",
                        row + 1,
                        Escaped(evidence)
                    );
                }
                None => {
                    let _ = writeln!(out, "<li>{}</li>", Escaped(evidence));
                }
            }
        }
        let _ = write!(
            out,
            "</ul>\n<p class=\"remedy\"><strong>Remedy:</strong> {}</p>\n</article>\n",
            Escaped(&d.remedy)
        );
    }
    out.push_str("</div>\n</section>\n");
}

fn write_timeline(out: &mut String, p: &Page<'_>) {
    out.push_str("<section id=\"timeline\">\n<h2>Timeline</h2>\n<p class=\"muted\">A lane per process, the kernel on the right; time runs down. Solid arrows are requests, dashed arrows the kernel's replies (a dump's replies as one arrow ×N); a yellow bar is a resolver call from its start to its result; boxes on the kernel lane are route lookups and kernel handler calls, dotted to whoever caused them. Rows marked ◆ are those a diagnosis rests on. Hover a row for its whole line.</p>\n");
    if let Some(notice) = &p.plan.notice {
        let _ = writeln!(
            out,
            "<p class=\"notice\" id=\"lanes-left-out\">{}</p>",
            Escaped(notice)
        );
    }
    if p.rows_left_out > 0 {
        let _ = writeln!(
            out,
            "<p class=\"notice\" id=\"rows-left-out\">The picture stops after {} rows: {} more rows are not drawn (every event is in the text timeline below and in the recording).</p>",
            p.rows.len(),
            p.rows_left_out
        );
    }
    if p.rows.is_empty() {
        out.push_str("<p>Nothing to draw: no process talked to the kernel here.</p>\n");
    } else {
        out.push_str("<div class=\"scroll\">\n");
        swimlane::write_svg(out, p.rows, p.plan, p.decisions);
        out.push_str("</div>\n");
    }
    out.push_str("</section>\n");
}

fn write_audit(out: &mut String, audit: Option<(&AuditReport, &[String])>) {
    out.push_str("<section id=\"audit\">\n<h2>Node address audit</h2>\n");
    let Some((a, left_out)) = audit else {
        out.push_str("<p>These events hold no address dump (RTM_NEWADDR replies), so there is nothing to audit. Run <code>nodeip-trace explain</code> on the node, or trace a moment that lists addresses (<code>ip addr</code>).</p>\n</section>\n");
        return;
    };
    out.push_str("<p class=\"muted\">From the kernel's last link, address and route answers in these events, with each component at its defaults (a recording holds neither the hosts file nor the components' settings: <code>nodeip-trace explain --from FILE</code> takes them).</p>\n");
    if !left_out.is_empty() {
        out.push_str(
            "<p class=\"muted\">Not shown, for lack of input:</p>\n<ul class=\"left-out\">\n",
        );
        for note in left_out {
            let _ = writeln!(out, "<li>{}</li>", Escaped(note));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<table class=\"picks\">\n<thead><tr><th>Component</th><th>Setting</th><th>Picks</th><th>Why</th></tr></thead>\n<tbody>\n");
    for pick in &a.picks {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td></tr>",
            Escaped(&pick.component),
            Escaped(&pick.setting),
            Escaped(&ip_list(&pick.picked)),
            pick.reasoning
                .iter()
                .map(|r| Escaped(r).to_string())
                .collect::<Vec<_>>()
                .join("<br>")
        );
    }
    out.push_str("</tbody>\n</table>\n");
    if !a.local_sources.is_empty() {
        write_local_sources(out, a);
    }
    write_findings(out, a);
    out.push_str("</section>\n");
}

/// Every address a traced process asked to add or remove, in order, with who and the kernel's
/// answer.
fn write_address_changes(out: &mut String, ledger: &AddressLedger) {
    let changes = ledger.changes();
    let _ = writeln!(
        out,
        "<section id=\"addresses\">\n<h2>Address changes ({})</h2>",
        changes.len() as u64 + ledger.left_out()
    );
    if changes.is_empty() {
        out.push_str("<p>No traced process asked to add or remove an address in these events, and no change was heard from the kernel (a live trace hears its own namespace's).</p>\n</section>\n");
        return;
    }
    out.push_str("<p class=\"muted\">Each <code>RTM_NEWADDR</code>/<code>RTM_DELADDR</code> a traced process sent (keepalived's or kube-vip's VIP, kube-proxy's kube-ipvs0 addresses), and whether the kernel did it; and each change the kernel announced in the tracer's namespace that no traced request explains (an IPv6 link-local address, SLAAC, the end of duplicate address detection, an expiry — or a process the trace does not follow), with the address's flags.</p>\n<table class=\"address-changes\">\n<thead><tr><th>Time</th><th>Change</th><th>Address</th><th>Interface</th><th>By</th><th>Kernel</th></tr></thead>\n<tbody>\n");
    for c in changes {
        let _ = writeln!(
            out,
            "<tr><td class=\"mono\">{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td{}>{}</td></tr>",
            Escaped(&c.ts),
            c.kind.words().0,
            Escaped(&c.address),
            Escaped(&c.ifname),
            Escaped(&c.by),
            if c.refused.is_some() {
                " class=\"bad\""
            } else {
                ""
            },
            Escaped(c.refused.as_deref().unwrap_or(if c.by == NO_REQUEST {
                "its notice"
            } else {
                "done"
            }))
        );
    }
    out.push_str("</tbody>\n</table>\n");
    if ledger.left_out() > 0 {
        let _ = writeln!(
            out,
            "<p class=\"notice\">{} more changes are not listed.</p>",
            ledger.left_out()
        );
    }
    out.push_str("</section>\n");
}

fn write_local_sources(out: &mut String, a: &AuditReport) {
    out.push_str("<h3>Local addresses and their local routes' src</h3>\n<table class=\"local-sources\">\n<thead><tr><th>Address</th><th>Interface</th><th>Rank</th><th>Local route src</th></tr></thead>\n<tbody>\n");
    for l in &a.local_sources {
        let src = l.src.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let differs = l.src.is_some_and(|s| s != l.address);
        let _ = writeln!(
            out,
            "<tr><td class=\"mono\">{}</td><td>{}</td><td>{}</td><td class=\"mono{}\">{}{}</td></tr>",
            l.address,
            Escaped(&l.ifname),
            if l.secondary { "secondary" } else { "primary" },
            if differs { " bad" } else { "" },
            src,
            if differs { " ← not itself" } else { "" }
        );
    }
    out.push_str("</tbody>\n</table>\n");
}

fn write_findings(out: &mut String, a: &AuditReport) {
    if !a.findings.is_empty() {
        out.push_str("<h3>What the audit finds</h3>\n<ul>\n");
        for f in &a.findings {
            let _ = writeln!(
                out,
                "<li><strong>{}</strong> {}: {} <span class=\"muted\">Remedy: {}</span></li>",
                f.severity.upper(),
                f.id,
                Escaped(&f.summary),
                Escaped(&f.remedy)
            );
        }
        out.push_str("</ul>\n");
    }
}

fn write_calls(out: &mut String, calls: &[(String, String, &GetaddrinfoCall)]) {
    let _ = writeln!(
        out,
        "<section id=\"calls\">\n<h2>Resolver calls ({})</h2>",
        calls.len()
    );
    if calls.is_empty() {
        out.push_str("<p>No resolver call (getaddrinfo, musl, Go) was traced.</p>\n");
    }
    for (anchor, actor, c) in calls {
        let _ = write!(
            out,
            "<article class=\"call\" id=\"{}\">\n<h3>{} looked up <code>{}</code> through {}: {} [{}]</h3>\n",
            Escaped(anchor),
            Escaped(actor),
            Escaped(c.node.as_deref().unwrap_or("NULL")),
            Escaped(&c.resolver_path()),
            Escaped(&c.ret),
            Escaped(&c.addresses.join(", "))
        );
        let Some(why) = &c.why else {
            let _ = writeln!(
                out,
                "<p class=\"muted\">No why: {}</p>\n</article>",
                Escaped(c.limited.as_deref().unwrap_or(
                    "the sort's inputs were not seen for this call (its sources or address list)"
                ))
            );
            continue;
        };
        let _ = writeln!(
            out,
            "<p>The resolver listed <span class=\"mono\">[{}]</span>; {} gives <span class=\"mono\">[{}]</span>{}.</p>",
            Escaped(&why.resolver_order.join(", ")),
            Escaped(c.resolver.sort_name()),
            Escaped(&why.predicted.join(", ")),
            if why.matches {
                ", which is what the call returned"
            } else {
                " — which is NOT what the call returned: please report it with this recording"
            }
        );
        if !why.pairs.is_empty() {
            out.push_str("<table class=\"pairs\">\n<thead><tr><th>First</th><th>Before</th><th>Rule</th><th>Why</th></tr></thead>\n<tbody>\n");
            for pair in &why.pairs {
                let _ = writeln!(
                    out,
                    "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td>{} ({})</td><td>{}{}</td></tr>",
                    Escaped(&pair.first),
                    Escaped(&pair.second),
                    pair.rule,
                    Escaped(&pair.rule_name),
                    Escaped(&pair.detail),
                    if pair.agrees { "" } else { " [the rule prefers the other]" }
                );
            }
            out.push_str("</tbody>\n</table>\n");
        }
        if !why.candidates.is_empty() {
            out.push_str("<table class=\"candidates\">\n<thead><tr><th>Candidate</th><th>Source the kernel chose</th><th>Source prefix</th></tr></thead>\n<tbody>\n");
            for cand in &why.candidates {
                let _ = writeln!(
                    out,
                    "<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td>{}</td></tr>",
                    Escaped(&cand.address),
                    Escaped(cand.source.as_deref().unwrap_or("none (unreachable)")),
                    cand.prefix_len
                        .map(|l| format!("/{l}"))
                        .unwrap_or_else(|| "-".into())
                );
            }
            out.push_str("</tbody>\n</table>\n");
        }
        for note in &why.notes {
            let _ = writeln!(out, "<p class=\"muted\">Note: {}</p>", Escaped(note));
        }
        out.push_str("</article>\n");
    }
    out.push_str("</section>\n");
}
