//! The human timeline: one line per event, what a person needs to see — time, process, what it
//! asked and what it got. Events that happened inside a getaddrinfo call are indented under it.
//! Diagnoses are collected and printed prominently at the end.
use std::io::Write;

use super::{EventSink, SinkError};
use crate::correlate::Emitted;
use crate::decode::netlink::{IpvsCommand, MessageBody, NetlinkMessage};
use crate::event::{Event, EventBody, GetaddrinfoCall, NetlinkEvent};

/// Renders the timeline as text.
pub struct TextTimelineSink<W: Write> {
    out: W,
    name: String,
    nested_left: u32,
    diagnoses: Vec<String>,
    flush_each: bool,
}

/// `HH:MM:SS.micros` of an RFC 3339 timestamp.
fn time_of_day(ts: &str) -> &str {
    ts.get(11..26).unwrap_or(ts)
}

fn render_getaddrinfo(c: &GetaddrinfoCall) -> String {
    let node = c
        .node
        .as_deref()
        .map(|n| format!("\"{n}\""))
        .unwrap_or_else(|| "NULL".into());
    let service = c
        .service
        .as_deref()
        .map(|n| format!(", \"{n}\""))
        .unwrap_or_default();
    let flags = if c.flags.is_empty() {
        String::new()
    } else {
        format!(", {}", c.flags.join("|"))
    };
    let result = if c.ret_code == 0 {
        format!(
            "[{}]{}",
            c.addresses.join(", "),
            if c.results_truncated { " (cut)" } else { "" }
        )
    } else {
        String::new()
    };
    format!(
        "getaddrinfo({node}{service}, {}{flags}) = {} {result} ({:.3} ms)",
        c.family,
        c.ret,
        c.duration_ns as f64 / 1e6
    )
}

/// One-line summary of a decoded netlink buffer.
pub fn render_netlink(n: &NetlinkEvent) -> String {
    let arrow = match n.direction {
        crate::frame::Direction::Send => "→",
        crate::frame::Direction::Recv => "←",
    };
    let mut parts: Vec<String> = Vec::new();
    for m in &n.messages {
        parts.push(crate::sink::text::message_summary(m));
    }
    let mut line = format!("netlink {arrow} {} {} bytes", n.protocol, n.bytes);
    if n.truncated {
        line.push_str(&format!(" (captured {} — CUT)", n.captured));
    }
    if !parts.is_empty() {
        line.push_str(": ");
        line.push_str(&summarise_runs(&parts).join("; "));
    }
    if !n.decode_errors.is_empty() {
        line.push_str(&format!(" [decode: {}]", n.decode_errors.join("; ")));
    }
    line
}

/// Collapses consecutive identical summaries into `text ×N`.
fn summarise_runs(parts: &[String]) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for p in parts {
        match out.last_mut() {
            Some((last, n)) if last == p => *n += 1,
            _ => out.push((p.clone(), 1)),
        }
    }
    out.into_iter()
        .map(|(p, n)| if n > 1 { format!("{p} ×{n}") } else { p })
        .collect()
}

fn opt(label: &str, v: &Option<String>) -> String {
    v.as_deref()
        .map(|v| format!(" {label} {v}"))
        .unwrap_or_default()
}

/// `RTM_GETROUTE` → `GETROUTE`: the timeline is already about netlink.
fn short_type(t: &str) -> &str {
    t.strip_prefix("RTM_").unwrap_or(t)
}

/// Summary of one IPVS command: `NEW_SERVICE TCP 10.0.0.1:80 rr → 10.0.0.2:80 masq w1`.
pub fn ipvs_summary(c: &IpvsCommand) -> String {
    let mut s = c
        .cmd
        .strip_prefix("IPVS_CMD_")
        .unwrap_or(&c.cmd)
        .to_string();
    if let Some(svc) = &c.service {
        match (&svc.address, svc.port, svc.fwmark) {
            (Some(a), Some(p), _) => s.push_str(&format!(
                " {} {a}:{p}",
                svc.protocol.as_deref().unwrap_or("?")
            )),
            (_, _, Some(m)) => s.push_str(&format!(" fwmark {m}")),
            _ => {}
        }
        if let Some(sch) = svc.scheduler.as_deref().filter(|s| !s.is_empty()) {
            s.push_str(&format!(" {sch}"));
        }
    }
    if let Some(d) = &c.dest {
        if let (Some(a), Some(p)) = (&d.address, d.port) {
            s.push_str(&format!(" → {a}:{p}"));
        }
        if let Some(f) = &d.forwarding {
            s.push_str(&format!(" {f}"));
        }
        if let Some(w) = d.weight {
            s.push_str(&format!(" w{w}"));
        }
    }
    s
}

/// Summary of one netlink message: its type and the facts a person looks for.
pub fn message_summary(m: &NetlinkMessage) -> String {
    let t = short_type(&m.header.type_name);
    let dump = if m.header.flags.iter().any(|f| f == "DUMP") {
        " DUMP"
    } else {
        ""
    };
    match &m.body {
        MessageBody::Error(e) if e.error == 0 => "ACK".into(),
        MessageBody::Error(e) => format!(
            "ERROR {} ({}){}{}",
            e.errno,
            e.text,
            e.request
                .as_ref()
                .map(|r| format!(" to {}", short_type(&r.type_name)))
                .unwrap_or_default(),
            e.extack_msg
                .as_deref()
                .map(|x| format!(": \"{x}\""))
                .unwrap_or_default()
        ),
        MessageBody::Done(_) => "DONE".into(),
        MessageBody::Address(a) => match &a.local.clone().or(a.address.clone()) {
            Some(addr) => format!(
                "{t} {}: {addr}/{}{}{}",
                a.ifname.clone().unwrap_or_else(|| a.index.to_string()),
                a.prefix_len,
                // Only the kernel's answers say which address is primary.
                match (m.header.flags.iter().any(|f| f == "REQUEST"), a.secondary) {
                    (true, _) => "",
                    (false, true) => " secondary",
                    (false, false) => " primary",
                },
                a.label
                    .as_deref()
                    .filter(|l| Some(*l) != a.ifname.as_deref())
                    .map(|l| format!(" label {l}"))
                    .unwrap_or_default()
            ),
            None => format!("{t}{dump} {}", a.family),
        },
        MessageBody::Route(r)
            if r.dst.is_some() || !dump.is_empty() || m.header.type_name != "RTM_GETROUTE" =>
        {
            let dst = r
                .dst
                .as_deref()
                .map(|d| format!("{d}/{}", r.dst_len))
                .unwrap_or_else(|| "default".into());
            if m.header.type_name == "RTM_GETROUTE" {
                format!(
                    "{t}{dump} {}",
                    if dump.is_empty() {
                        dst
                    } else {
                        r.family.clone()
                    }
                )
            } else {
                format!(
                    "{t} {} {dst} table {}{}{}{}",
                    r.route_type,
                    r.table,
                    opt("dev", &r.oif_name.clone().or(r.oif.map(|i| i.to_string()))),
                    opt("src", &r.prefsrc),
                    opt("via", &r.gateway)
                )
            }
        }
        MessageBody::Link(l) => format!(
            "{t}{dump} {}{}",
            l.ifname.clone().unwrap_or_else(|| l.index.to_string()),
            l.info_kind
                .as_deref()
                .map(|k| format!(" ({k})"))
                .unwrap_or_default()
        ),
        MessageBody::Nlctrl(n) => format!(
            "nlctrl {}{}{}",
            n.cmd.strip_prefix("CTRL_CMD_").unwrap_or(&n.cmd),
            opt("", &n.family_name),
            n.family_id
                .map(|id| format!(" id {id:#x}"))
                .unwrap_or_default()
        ),
        MessageBody::Ipvs(c) => format!("IPVS {}", ipvs_summary(c)),
        _ => format!("{t}{dump}"),
    }
}

/// Renders one event as a line (without indentation).
pub fn render_event(e: &Event) -> String {
    let who = format!("{}[{}]", e.comm, e.pid);
    let what = match &e.body {
        EventBody::Header(h) => format!(
            "nodeip-trace {} on {} (kernel {}), schema {}",
            h.tool_version, h.host, h.kernel, h.schema
        ),
        EventBody::Getaddrinfo(c) => render_getaddrinfo(c),
        EventBody::Netlink(n) => render_netlink(n),
        EventBody::RouteLookup(r) => {
            let outcome = match r.err {
                0 => format!(
                    "dev {}{}",
                    if r.oif.is_empty() { "-" } else { &r.oif },
                    r.gateway
                        .as_deref()
                        .map(|g| format!(" via {g}"))
                        .unwrap_or_default()
                ),
                -11 => "no match here, next table".into(),
                e => format!("error {e}"),
            };
            let ty = r
                .route_type
                .as_deref()
                .map(|t| format!(" type {t}"))
                .unwrap_or_default();
            format!(
                "route lookup {} (src {}) table {}{ty}: {outcome}",
                r.dst, r.src, r.table
            )
        }
        EventBody::Ipvs(i) => format!("IPVS {}", ipvs_summary(&i.command)),
        EventBody::Extack(x) => format!("kernel says: {}", x.message),
        EventBody::Lost(l) => format!("LOST {} events: {:?}", l.lost, l.counts),
        EventBody::Diagnosis(d) => format!("DIAGNOSIS [{}] {}: {}", d.severity, d.id, d.summary),
        EventBody::Summary(s) => format!("summary: {:?}, lost {}", s.events, s.lost),
    };
    if e.pid == 0 && e.comm.is_empty() {
        format!("{} {what}", time_of_day(&e.ts))
    } else {
        format!("{} {who} {what}", time_of_day(&e.ts))
    }
}

impl<W: Write> TextTimelineSink<W> {
    /// A timeline writer; `name` is used in error messages.
    pub fn new(out: W, name: impl Into<String>, flush_each: bool) -> Self {
        Self {
            out,
            name: name.into(),
            nested_left: 0,
            diagnoses: Vec::new(),
            flush_each,
        }
    }

    fn io(&self, source: std::io::Error) -> SinkError {
        SinkError::Io {
            what: self.name.clone(),
            source,
        }
    }
}

impl<W: Write> EventSink for TextTimelineSink<W> {
    fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        let Emitted::Event(e) = item else {
            return Ok(());
        };
        // Recording framing is for machines; the tool reports start and end on stderr.
        if matches!(e.body, EventBody::Header(_) | EventBody::Summary(_)) {
            return Ok(());
        }
        if let EventBody::Diagnosis(d) = &e.body {
            let mut text = format!("[{}] {} — {}\n", d.severity.to_uppercase(), d.id, d.summary);
            for ev in &d.evidence {
                text.push_str(&format!("    evidence: {ev}\n"));
            }
            text.push_str(&format!("    remedy:   {}\n", d.remedy));
            self.diagnoses.push(text);
            return Ok(());
        }
        let prefix = if self.nested_left > 0 {
            self.nested_left -= 1;
            "    │ "
        } else {
            ""
        };
        let line = format!("{prefix}{}\n", render_event(e));
        self.out
            .write_all(line.as_bytes())
            .map_err(|s| self.io(s))?;
        if let EventBody::Getaddrinfo(c) = &e.body {
            self.nested_left = c.during;
        }
        if self.flush_each {
            self.out.flush().map_err(|s| self.io(s))?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        if !self.diagnoses.is_empty() {
            let mut text = format!("\n=== {} diagnosis(es) ===\n", self.diagnoses.len());
            for d in &self.diagnoses {
                text.push_str(d);
            }
            self.out
                .write_all(text.as_bytes())
                .map_err(|s| self.io(s))?;
        }
        self.out.flush().map_err(|s| self.io(s))
    }
}
