//! The report's picture: an inline-SVG swimlane in sequence-diagram style. A lane per process
//! (`comm[pid]`, its pod/container or unit below) and one kernel lane on the right; time runs
//! down in rows: netlink requests and replies are arrows (a dump's replies one arrow "×N"),
//! a resolver call is a bar on its process's lane from its start to its result, route lookups
//! and kernel handler calls are notes on the kernel lane (dotted to whoever caused them).
//! Pauses are collapsed into one gap row; rows a diagnosis rests on are decision rows (tinted,
//! marked ◆ and named — not colour alone). Every string is text (selectable, searchable) with
//! a `<title>` tooltip; no script.
//!
//! [`rows_of`] turns events into rows (pure); [`plan_lanes`] decides the lanes (grouping past
//! [`MAX_PROCESS_LANES`]); [`write_svg`] draws.
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::escape::{shortened, Escaped};
use crate::model::event::{
    ConversationOutcome, DiagnosisId, Event, EventBody, NetlinkConversation,
};
use crate::model::frame::Direction;
use crate::model::getaddrinfo::GetaddrinfoCall;
use crate::sink::view::wording;

/// Most process lanes drawn; past it, the least telling processes share one lane.
pub const MAX_PROCESS_LANES: usize = 12;
/// A pause longer than this between two rows is drawn as one gap row.
pub const IDLE_GAP_NS: u64 = 50_000_000;

const GUTTER_W: usize = 104;
/// Lane width with few lanes, and with many (past [`NARROW_PAST_LANES`]).
const LANE_W: usize = 168;
const NARROW_LANE_W: usize = 124;
const NARROW_PAST_LANES: usize = 6;
const HEAD_H: usize = 50;
const ROW_H: usize = 22;
const GAP_H: usize = 20;
/// The detail column fits the longest line up to this many characters (the rest is in the
/// row's tooltip and the text timeline).
const DETAIL_MAX_CHARS: usize = 200;
/// Width of one character of the 11px monospace font, for fitting labels.
const CHAR_W: f64 = 6.7;

/// What a row draws.
#[derive(Clone, Debug, PartialEq)]
pub enum Mark {
    /// An arrow from the process to the kernel.
    Request(String),
    /// An arrow from the kernel back to the process.
    Reply(String),
    /// A resolver call begins: its bar starts here.
    CallStart(String),
    /// A resolver call's result: its bar ends here.
    CallEnd(String),
    /// A note on the kernel lane.
    KernelNote(String),
    /// A line across every lane (records lost).
    Notice,
}

/// One row of the picture.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// When (the event's raw clock): the gutter and the gaps.
    pub ts_ns: u64,
    /// Whose lane (`comm[pid]` or `port[N]`); `None` for notices.
    pub actor: Option<String>,
    /// What is drawn.
    pub mark: Mark,
    /// The whole line, beside the lanes.
    pub detail: String,
    /// The event this row shows, as evidence names it: kind and `ts_ns`.
    pub event: (&'static str, u64),
    /// Where the detail links to (a resolver call's pair table).
    pub link: Option<String>,
}

/// The rows one event is drawn as (none for what people are not shown). A resolver call is two
/// rows, start and result; `call_anchor` is the id of its pair table.
pub fn rows_of(e: &Event, call_anchor: Option<&str>) -> Vec<Row> {
    let actor = wording::actor_label(e);
    let event = (e.body.kind(), e.ts_ns);
    let row = |ts_ns: u64, mark: Mark, detail: String| Row {
        ts_ns,
        actor: actor.clone(),
        mark,
        detail,
        event,
        link: None,
    };
    let body = || wording::render_event_body(e);
    match &e.body {
        EventBody::Getaddrinfo(c) => {
            let start = if c.start_ns > 0 { c.start_ns } else { e.ts_ns };
            let mut end = row(
                start.saturating_add(c.duration_ns),
                Mark::CallEnd(format!("= [{}]", c.addresses.join(", "))),
                call_outcome(c),
            );
            end.link = call_anchor.map(|a| format!("#{a}"));
            vec![row(start, Mark::CallStart(call_label(c)), body()), end]
        }
        EventBody::Conversation(c) => {
            let request = wording::message_summary(&c.request);
            vec![
                row(e.ts_ns, Mark::Request(request.clone()), request),
                row(
                    e.ts_ns.saturating_add(c.duration_ns),
                    Mark::Reply(reply_label(c)),
                    format!(
                        "{} ({:.3} ms)",
                        wording::render_answer(c),
                        c.duration_ns as f64 / 1e6
                    ),
                ),
            ]
        }
        EventBody::Netlink(n) => {
            let label = n
                .messages
                .first()
                .map(|m| wording::message_summary(m))
                .unwrap_or_else(|| format!("{} bytes", n.bytes));
            let mark = match n.direction {
                Direction::Send => Mark::Request(label),
                Direction::Recv => Mark::Reply(label),
            };
            vec![row(e.ts_ns, mark, body())]
        }
        EventBody::RouteLookup(r) => {
            let answer = match r.err {
                0 if r.oif.is_empty() => "-".to_string(),
                0 => r.oif.to_string(),
                -11 => "next table".into(),
                err => format!("error {err}"),
            };
            let note = format!("fib {} → {answer}", r.dst);
            vec![row(e.ts_ns, Mark::KernelNote(note), body())]
        }
        EventBody::KernelHandler(k) => {
            let note = k.function.clone();
            vec![row(e.ts_ns, Mark::KernelNote(note), body())]
        }
        EventBody::AddressNotice(n) => {
            let note = format!(
                "{} {}",
                if n.added {
                    "address noticed"
                } else {
                    "address removed"
                },
                n.address.address
            );
            let mut r = row(e.ts_ns, Mark::KernelNote(note), body());
            r.actor = None;
            vec![r]
        }
        EventBody::RouteFileRead(r) => {
            let note = format!("{} read", r.file);
            vec![row(e.ts_ns, Mark::KernelNote(note), body())]
        }
        EventBody::Extack(_) => vec![row(e.ts_ns, Mark::KernelNote("extack".into()), body())],
        EventBody::ExecHold(h) => {
            let note = if h.in_time {
                format!("held at exec {:.1} ms", h.held_us as f64 / 1000.0)
            } else {
                "exec let go unprobed".to_string()
            };
            vec![row(e.ts_ns, Mark::KernelNote(note), body())]
        }
        EventBody::Lost(_) => {
            let mut r = row(e.ts_ns, Mark::Notice, format!("⚠ {}", body()));
            r.actor = None;
            vec![r]
        }
        EventBody::Header(_)
        | EventBody::Summary(_)
        | EventBody::Ipvs(_)
        | EventBody::Diagnosis(_) => Vec::new(),
    }
}

/// `getaddrinfo("name")` as the call's short label.
fn call_label(c: &GetaddrinfoCall) -> String {
    let function = match c.resolver {
        crate::model::getaddrinfo::ResolverKind::Go => "go lookup",
        crate::model::getaddrinfo::ResolverKind::GoHosts => "go LookupHost",
        _ => "getaddrinfo",
    };
    format!("{function}({})", c.node.as_deref().unwrap_or("NULL"))
}

/// What a resolver call ended with, and the sort's verdict in one line.
fn call_outcome(c: &GetaddrinfoCall) -> String {
    let mut line = format!(
        "{} {} = {} [{}] via {}",
        call_label(c),
        c.family,
        c.ret,
        c.addresses.join(", "),
        c.resolver_path()
    );
    if let Some(why) = &c.why {
        let decided = why
            .pairs
            .iter()
            .find(|p| p.agrees && p.rule > 0)
            .map(|p| {
                format!(
                    "; {} before {}: rule {} ({})",
                    p.first, p.second, p.rule, p.rule_name
                )
            })
            .unwrap_or_default();
        let verdict = if why.resolver_order == why.predicted {
            "resolver order kept"
        } else {
            "REORDERED from the resolver's order"
        };
        let _ = write!(
            line,
            " — {} [{}] → [{}]: {verdict}{decided}",
            c.resolver.sort_name(),
            why.resolver_order.join(", "),
            why.predicted.join(", ")
        );
        if !why.matches {
            line.push_str(" — PREDICTION DIFFERS from the returned order");
        }
    } else if let Some(limited) = &c.limited {
        let _ = write!(line, " — limited: {limited}");
    }
    line
}

/// A dump's answer in one arrow label: `NEWADDR ×4, DONE`; a refusal `ERROR ENOENT`.
fn reply_label(c: &NetlinkConversation) -> String {
    if let Some(e) = &c.error {
        return format!("ERROR {}", e.errno);
    }
    let mut parts: Vec<String> = c
        .reply_types
        .iter()
        .map(|(t, n)| match n {
            1 => wording::short_type(t).to_string(),
            n => format!("{} ×{n}", wording::short_type(t)),
        })
        .collect();
    match c.outcome {
        ConversationOutcome::Done => parts.push("DONE".into()),
        ConversationOutcome::Ack => parts.push("ACK".into()),
        ConversationOutcome::Incomplete => parts.push("INCOMPLETE".into()),
        ConversationOutcome::NoReply => parts.push("no reply".into()),
        ConversationOutcome::Error | ConversationOutcome::Reply => {}
    }
    parts.join(", ")
}

/// A lane of the picture.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    /// `comm[pid]`, `kernel`, or `N other processes`.
    pub label: String,
    /// The pod/container, unit or executable below the label.
    pub subtitle: String,
    /// The processes a shared lane stands for.
    pub members: Vec<String>,
}

/// The lanes and who is drawn on which.
#[derive(Clone, Debug, PartialEq)]
pub struct LanePlan {
    /// Process lanes, left to right (the kernel lane follows them).
    pub lanes: Vec<Lane>,
    /// Each actor's lane index.
    pub lane_of: BTreeMap<String, usize>,
    /// What was grouped, for the page to say.
    pub notice: Option<String>,
}

/// One lane per process in order of first appearance; with more than [`MAX_PROCESS_LANES`],
/// those with decision rows, then the busiest, keep theirs and the rest share the last lane.
pub fn plan_lanes(
    rows: &[Row],
    subtitles: &BTreeMap<String, String>,
    decision_rows: &BTreeSet<usize>,
) -> LanePlan {
    // actor → (first row, rows, decision rows)
    let mut seen: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let Some(a) = &r.actor {
            let entry = seen.entry(a).or_insert((i, 0, 0));
            entry.1 += 1;
            entry.2 += usize::from(decision_rows.contains(&i));
        }
    }
    let mut ranked: Vec<(&str, (usize, usize, usize))> = seen.into_iter().collect();
    let own_lanes = if ranked.len() > MAX_PROCESS_LANES {
        MAX_PROCESS_LANES - 1
    } else {
        ranked.len()
    };
    ranked.sort_by(|a, b| (b.1 .2, b.1 .1, a.1 .0).cmp(&(a.1 .2, a.1 .1, b.1 .0)));
    let (kept, grouped) = ranked.split_at(own_lanes);
    let mut kept = kept.to_vec();
    kept.sort_by_key(|(_, (first, _, _))| *first);
    let mut plan = LanePlan {
        lanes: Vec::new(),
        lane_of: BTreeMap::new(),
        notice: None,
    };
    for (actor, _) in &kept {
        plan.lane_of.insert(actor.to_string(), plan.lanes.len());
        plan.lanes.push(Lane {
            label: actor.to_string(),
            subtitle: subtitles.get(*actor).cloned().unwrap_or_default(),
            members: Vec::new(),
        });
    }
    if !grouped.is_empty() {
        let mut members: Vec<(usize, &str)> = grouped.iter().map(|(a, s)| (s.0, *a)).collect();
        members.sort();
        let index = plan.lanes.len();
        for (_, actor) in &members {
            plan.lane_of.insert(actor.to_string(), index);
        }
        let members: Vec<String> = members.iter().map(|(_, a)| a.to_string()).collect();
        plan.notice = Some(format!(
            "{} processes made events; {} have their own lane (those a diagnosis rests on first, \
             then the busiest) and the other {} share the lane \"{} other processes\", where each \
             row names its process: {}.",
            kept.len() + members.len(),
            kept.len(),
            members.len(),
            members.len(),
            members.join(", ")
        ));
        plan.lanes.push(Lane {
            label: format!("{} other processes", members.len()),
            subtitle: "grouped: see the notice".into(),
            members,
        });
    }
    plan
}

/// `+12.345 ms` from the first row; seconds past 10 s.
fn offset_label(ns: u64) -> String {
    if ns >= 10_000_000_000 {
        format!("+{:.3} s", ns as f64 / 1e9)
    } else {
        format!("+{:.3} ms", ns as f64 / 1e6)
    }
}

/// A pause, as the gap row says it.
fn gap_label(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("⋯ {:.1} s without events ⋯", ns as f64 / 1e9)
    } else {
        format!("⋯ {:.0} ms without events ⋯", ns as f64 / 1e6)
    }
}

fn fit(width_px: usize) -> usize {
    ((width_px as f64 / CHAR_W) as usize).max(4)
}

/// A label over lines (lifelines, arrows): on a pale backing so it stays readable, cut to
/// `max` characters.
fn write_label(out: &mut String, class: &str, x: usize, y: usize, text: &str, max: usize) {
    let text = shortened(text, max);
    let width = (text.chars().count() as f64 * CHAR_W) as usize + 4;
    let _ = write!(
        out,
        "<rect class=\"label-bg\" x=\"{}\" y=\"{}\" width=\"{width}\" height=\"13\"/><text class=\"{class}\" x=\"{x}\" y=\"{y}\">{}</text>",
        x - 2,
        y - 10,
        Escaped(&text)
    );
}

/// Draws the swimlane: `decisions` maps a row's index to the diagnoses resting on it.
pub fn write_svg(
    out: &mut String,
    rows: &[Row],
    plan: &LanePlan,
    decisions: &BTreeMap<usize, Vec<DiagnosisId>>,
) {
    let kernel = plan.lanes.len();
    let lane_w = if kernel + 1 > NARROW_PAST_LANES {
        NARROW_LANE_W
    } else {
        LANE_W
    };
    let lane_chars = fit(lane_w - 14);
    let center = |lane: usize| GUTTER_W + lane * lane_w + lane_w / 2;
    let detail_x = GUTTER_W + (kernel + 1) * lane_w + 10;
    let detail_chars = rows
        .iter()
        .map(|r| r.detail.chars().count() + r.actor.as_ref().map_or(0, |a| a.chars().count() + 1))
        .max()
        .unwrap_or(0)
        .clamp(40, DETAIL_MAX_CHARS)
        + decisions
            .values()
            .map(|ids| ids.iter().map(|i| i.as_str().len() + 2).sum::<usize>() + 2)
            .max()
            .unwrap_or(0);
    let detail_w = (detail_chars as f64 * CHAR_W) as usize + 16;
    let width = detail_x + detail_w;
    // Row tops, with gap rows before long pauses.
    let mut tops = Vec::with_capacity(rows.len());
    let mut gaps = Vec::new();
    let mut y = HEAD_H;
    let mut last_ts: Option<u64> = None;
    for r in rows {
        if let Some(prev) = last_ts {
            if r.ts_ns > prev.saturating_add(IDLE_GAP_NS) {
                gaps.push((y, r.ts_ns - prev));
                y += GAP_H;
            }
        }
        last_ts = Some(last_ts.map_or(r.ts_ns, |p| p.max(r.ts_ns)));
        tops.push(y);
        y += ROW_H;
    }
    let height = y + 8;
    let origin = rows.iter().map(|r| r.ts_ns).min().unwrap_or(0);
    let _ = write!(
        out,
        "<svg class=\"swimlane\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-labelledby=\"swimlane-title\">\n\
         <title id=\"swimlane-title\">Who asked the kernel what, in order: {} process lane(s) and the kernel, {} row(s)</title>\n\
         <defs><marker id=\"arrowhead\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>\n",
        plan.lanes.len(),
        rows.len()
    );
    // Lanes: header box, label, subtitle, lifeline.
    let _ = writeln!(
        out,
        "<text class=\"gutter-head\" x=\"6\" y=\"28\">time</text><text class=\"gutter-head\" x=\"{detail_x}\" y=\"28\">what happened</text>"
    );
    let kernel_lane = Lane {
        label: "kernel".into(),
        subtitle: "netlink, routes, handlers".into(),
        members: Vec::new(),
    };
    let lane_boxes = plan
        .lanes
        .iter()
        .map(|l| (l, "lane"))
        .chain(std::iter::once((&kernel_lane, "lane kernel")));
    for (i, (lane, class)) in lane_boxes.enumerate() {
        let x = center(i);
        let mut tip = lane.label.clone();
        if !lane.subtitle.is_empty() {
            tip.push_str(&format!(" — {}", lane.subtitle));
        }
        if !lane.members.is_empty() {
            tip.push_str(&format!(": {}", lane.members.join(", ")));
        }
        let _ = writeln!(
            out,
            "<g class=\"{class}\" data-lane=\"{}\"><title>{}</title><line class=\"lifeline\" x1=\"{x}\" y1=\"{HEAD_H}\" x2=\"{x}\" y2=\"{height}\"/><rect class=\"lane-head\" x=\"{}\" y=\"4\" width=\"{}\" height=\"{}\" rx=\"4\"/><text class=\"lane-label\" x=\"{x}\" y=\"22\">{}</text><text class=\"lane-sub\" x=\"{x}\" y=\"38\">{}</text></g>",
            Escaped(&lane.label),
            Escaped(&tip),
            x - lane_w / 2 + 4,
            lane_w - 8,
            HEAD_H - 12,
            Escaped(&shortened(&lane.label, lane_chars)),
            Escaped(&shortened(&lane.subtitle, lane_chars + 4)),
        );
    }
    for (top, ns) in gaps {
        let _ = writeln!(
            out,
            "<g class=\"gap\"><rect x=\"0\" y=\"{top}\" width=\"{width}\" height=\"{GAP_H}\"/><text x=\"{}\" y=\"{}\">{}</text></g>",
            GUTTER_W + 8,
            top + 14,
            gap_label(ns)
        );
    }
    // Resolver-call bars, under the rows.
    let mut open: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        let Some(actor) = r.actor.as_deref() else {
            continue;
        };
        match r.mark {
            Mark::CallStart(_) => {
                open.insert(actor, i);
            }
            Mark::CallEnd(_) => {
                if let (Some(start), Some(&lane)) = (open.remove(actor), plan.lane_of.get(actor)) {
                    let _ = writeln!(
                        out,
                        "<rect class=\"call-bar\" x=\"{}\" y=\"{}\" width=\"10\" height=\"{}\"/>",
                        center(lane) - 5,
                        tops[start] + 3,
                        tops[i] + ROW_H - 3 - (tops[start] + 3)
                    );
                }
            }
            _ => {}
        }
    }
    for (i, r) in rows.iter().enumerate() {
        let top = tops[i];
        let mid = top + ROW_H / 2;
        let decided = decisions.get(&i);
        let _ = write!(
            out,
            "<g class=\"row{}\" id=\"row-{}\"><title>{}</title>",
            if decided.is_some() { " decision" } else { "" },
            i + 1,
            Escaped(&r.detail)
        );
        if decided.is_some() {
            let _ = write!(
                out,
                "<rect class=\"decision-bg\" x=\"0\" y=\"{top}\" width=\"{width}\" height=\"{ROW_H}\"/><text class=\"decision-mark\" x=\"{}\" y=\"{}\">◆</text>",
                GUTTER_W - 16,
                mid + 4
            );
        }
        let _ = write!(
            out,
            "<text class=\"gutter\" x=\"6\" y=\"{}\">{}</text>",
            mid + 4,
            offset_label(r.ts_ns.saturating_sub(origin))
        );
        let lane = r.actor.as_ref().and_then(|a| plan.lane_of.get(a)).copied();
        let (k, p) = (center(kernel), lane.map(center));
        match (&r.mark, p) {
            (Mark::Request(label), Some(p)) | (Mark::Reply(label), Some(p)) => {
                let request = matches!(r.mark, Mark::Request(_));
                let (x1, x2) = if request {
                    (p + 6, k - 2)
                } else {
                    (k - 6, p + 2)
                };
                let _ = write!(
                    out,
                    "<line class=\"{}\" x1=\"{x1}\" y1=\"{}\" x2=\"{x2}\" y2=\"{}\" marker-end=\"url(#arrowhead)\"/>",
                    if request { "request" } else { "reply" },
                    mid + 5,
                    mid + 5,
                );
                write_label(out, "arrow-label", p + 10, mid + 1, label, fit(k - p - 16));
            }
            (Mark::CallStart(label), Some(p)) | (Mark::CallEnd(label), Some(p)) => {
                // Alone on its row: it may run on to the detail column.
                write_label(
                    out,
                    "call-label",
                    p + 10,
                    mid + 4,
                    label,
                    fit(detail_x - p - 20),
                );
            }
            (Mark::KernelNote(label), _) => {
                if let Some(p) = p {
                    let _ = write!(
                        out,
                        "<line class=\"cause\" x1=\"{p}\" y1=\"{mid}\" x2=\"{}\" y2=\"{mid}\"/>",
                        k - lane_w / 2 + 6
                    );
                }
                let _ = write!(
                    out,
                    "<rect class=\"note\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"3\"/><text class=\"note-label\" x=\"{}\" y=\"{}\">{}</text>",
                    k - lane_w / 2 + 6,
                    top + 2,
                    lane_w - 12,
                    ROW_H - 4,
                    k - lane_w / 2 + 10,
                    mid + 4,
                    Escaped(&shortened(label, lane_chars))
                );
            }
            _ => {
                let _ = write!(
                    out,
                    "<text class=\"notice\" x=\"{}\" y=\"{}\">{}</text>",
                    GUTTER_W + 8,
                    mid + 4,
                    Escaped(&shortened(&r.detail, fit(width - GUTTER_W - 16)))
                );
            }
        }
        let mut detail = String::new();
        if let Some(ids) = decided {
            let names: Vec<&str> = ids.iter().map(|id| id.as_str()).collect();
            detail.push_str(&format!("◆ {}: ", names.join(", ")));
        }
        if let Some(actor) = &r.actor {
            detail.push_str(actor);
            detail.push(' ');
        }
        detail.push_str(&r.detail);
        let text = format!(
            "<text class=\"detail\" x=\"{detail_x}\" y=\"{}\">{}</text>",
            mid + 4,
            Escaped(&shortened(&detail, detail_chars))
        );
        match &r.link {
            Some(href) => {
                let _ = write!(out, "<a href=\"{}\">{text}</a>", Escaped(href));
            }
            None => out.push_str(&text),
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(actor: &str, mark: Mark, ts_ns: u64) -> Row {
        Row {
            ts_ns,
            actor: Some(actor.into()),
            mark,
            detail: format!("{actor} at {ts_ns}"),
            event: ("conversation", ts_ns),
            link: None,
        }
    }

    #[test]
    fn lanes_in_order_of_first_appearance() {
        let rows = [
            row("b[2]", Mark::Request("x".into()), 1),
            row("a[1]", Mark::Request("x".into()), 2),
            row("b[2]", Mark::Reply("x".into()), 3),
        ];
        let plan = plan_lanes(&rows, &BTreeMap::new(), &BTreeSet::new());
        let labels: Vec<_> = plan.lanes.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, ["b[2]", "a[1]"]);
        assert_eq!(plan.notice, None);
    }

    #[test]
    fn past_the_limit_decisions_and_the_busiest_keep_their_lanes() {
        let mut rows = Vec::new();
        for p in 0..40u64 {
            for _ in 0..=(p % 5) {
                rows.push(row(&format!("p[{p}]"), Mark::Request("x".into()), p));
            }
        }
        // p[0] has one row only, but a diagnosis rests on it.
        let decisions = BTreeSet::from([0usize]);
        let plan = plan_lanes(&rows, &BTreeMap::new(), &decisions);
        assert_eq!(plan.lanes.len(), MAX_PROCESS_LANES);
        assert_eq!(plan.lanes[0].label, "p[0]");
        let shared = plan.lanes.last().unwrap();
        assert_eq!(shared.label, "29 other processes");
        assert_eq!(shared.members.len(), 29);
        let notice = plan.notice.unwrap();
        assert!(notice.starts_with("40 processes made events; 11 have their own lane"));
        // Every actor is drawn somewhere.
        assert_eq!(plan.lane_of.len(), 40);
        assert!(plan.lane_of.values().all(|&l| l < MAX_PROCESS_LANES));
    }

    #[test]
    fn pauses_become_one_gap_row_and_decisions_are_marked_in_text() {
        let rows = [
            row("a[1]", Mark::Request("GETADDR".into()), 0),
            row("a[1]", Mark::Reply("NEWADDR ×2, DONE".into()), 1_000),
            row(
                "a[1]",
                Mark::KernelNote("fib 10.0.0.1 → lo".into()),
                3_000_000_000,
            ),
        ];
        let plan = plan_lanes(&rows, &BTreeMap::new(), &BTreeSet::new());
        let mut svg = String::new();
        let decisions = BTreeMap::from([(2usize, vec![DiagnosisId::RouteGetResolvesToLo])]);
        write_svg(&mut svg, &rows, &plan, &decisions);
        assert_eq!(svg.matches("class=\"gap\"").count(), 1);
        assert!(svg.contains("⋯ 3.0 s without events ⋯"), "{svg}");
        assert!(svg.contains("<g class=\"row decision\" id=\"row-3\">"));
        assert!(svg.contains("◆ route-get-resolves-to-lo: a[1]"));
        assert_eq!(svg.matches("<g class=\"row").count(), 3);
        assert!(svg.contains("data-lane=\"kernel\""));
    }

    #[test]
    fn hostile_names_are_text() {
        let actor = "<script>alert(1)</script>[7]";
        let rows = [row(actor, Mark::Request("\"><img src=x>".into()), 0)];
        let plan = plan_lanes(&rows, &BTreeMap::new(), &BTreeSet::new());
        let mut svg = String::new();
        write_svg(&mut svg, &rows, &plan, &BTreeMap::new());
        assert!(!svg.contains("<script"), "{svg}");
        assert!(!svg.contains("<img"), "{svg}");
        assert!(svg.contains("&lt;script&gt;"));
    }
}
