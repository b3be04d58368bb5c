//! How each event reads, in every human-facing output (the text timeline, the HTML report, the
//! Perfetto trace): an event's line, its actor, a netlink message's summary, a conversation's
//! answer, a resolver call's `why`, a container's label.
use std::io::Write;

use crate::model::event::{
    AddressNotice, ConversationOutcome, Event, EventBody, KernelHandlerCall, ListedRoute,
    NetlinkConversation, NetlinkEvent, RouteFileRead,
};
use crate::model::facts::{AddressFact, RouteFact};
use crate::model::getaddrinfo::GetaddrinfoCall;
use crate::model::getaddrinfo::{GetaddrinfoWhy, ResolverKind};
use crate::model::netlink::{rtm, IpvsCommand, MessageBody, NetlinkMessage};

/// `HH:MM:SS.micros` of an RFC 3339 timestamp.
fn time_of_day(ts: &str) -> &str {
    ts.get(11..26).unwrap_or(ts)
}

/// Writes a getaddrinfo-like call: whose, the arguments, the result in order, the time.
fn write_getaddrinfo(out: &mut impl Write, c: &GetaddrinfoCall) -> std::io::Result<()> {
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
    // glibc's calls keep the plain name (every libc call was glibc's before resolvers were told
    // apart); others say whose lookup it was. Go's own resolver has no getaddrinfo: its probe
    // sees the lookup's sort.
    match c.resolver {
        ResolverKind::Go => {
            // Go sorts only two addresses or more: with fewer, the event is the lookup's own
            // answer, timed from its start.
            let timed = if c.addresses.len() < 2 {
                "the lookup took"
            } else {
                "its sort took"
            };
            let result = if result.is_empty() {
                String::new()
            } else {
                format!(" {result}")
            };
            write!(
                out,
                "go lookup({node}) = {}{result} (Go's own resolver; {timed} {:.3} ms)",
                c.ret,
                c.duration_ns as f64 / 1e6,
            )?;
            if let Some(limited) = &c.limited {
                write!(out, " — {limited}")?;
            }
            return Ok(());
        }
        ResolverKind::GoHosts => {
            return write!(
                out,
                "go LookupHost({node}) = {} {result} (Go's own resolver: /etc/hosts order, unsorted; {:.3} ms)",
                c.ret,
                c.duration_ns as f64 / 1e6
            )
        }
        _ => {}
    }
    if !c.resolver.is_glibc() || c.caller.is_some() {
        write!(out, "{} ", c.resolver_path())?;
    }
    write!(
        out,
        "getaddrinfo({node}{service}, {}{flags}) = {} {result} ({:.3} ms)",
        c.family,
        c.ret,
        c.duration_ns as f64 / 1e6
    )
}

/// The lines under a getaddrinfo call that say why its order is what it is.
pub fn render_why(resolver: ResolverKind, why: &GetaddrinfoWhy) -> Vec<String> {
    let mut lines = vec![format!(
        "why: resolver order [{}] → {} [{}]{}",
        why.resolver_order.join(", "),
        resolver.sort_name(),
        why.predicted.join(", "),
        if why.matches { "" } else { " ≠ returned" }
    )];
    for p in &why.pairs {
        lines.push(format!(
            "why: {} before {}: rule {} ({}): {}{}",
            p.first,
            p.second,
            p.rule,
            p.rule_name,
            p.detail,
            if p.agrees {
                ""
            } else {
                " [rule prefers the other]"
            }
        ));
    }
    if !why.matches {
        lines.push(format!(
            "why: !! PREDICTED ORDER DIFFERS FROM THE RETURNED ONE: a bug in nodeip-trace or a \
             {} whose sort it does not model; please report it with this recording",
            resolver.name()
        ));
    }
    lines.extend(why.notes.iter().map(|n| format!("why: note: {n}")));
    lines
}

/// Writes the one-line summary of a decoded netlink buffer.
fn write_netlink(out: &mut impl Write, n: &NetlinkEvent) -> std::io::Result<()> {
    let arrow = match n.direction {
        crate::model::frame::Direction::Send => "→",
        crate::model::frame::Direction::Recv => "←",
    };
    write!(out, "netlink {arrow} {} {} bytes", n.protocol, n.bytes)?;
    if n.truncated {
        write!(out, " (captured {} — CUT)", n.captured)?;
    }
    write_summary_runs(out, n.messages.iter().map(|m| &**m))?;
    if !n.decode_errors.is_empty() {
        write!(out, " [decode: {}]", n.decode_errors.join("; "))?;
    }
    Ok(())
}

/// Writes `: ` and the messages' summaries, `; ` between them, consecutive identical ones
/// collapsed into `text ×N`; nothing without messages. Two buffers, reused: a String per
/// message, cloned per run and joined, was a tenth of the text timeline's allocations.
fn write_summary_runs<'m>(
    out: &mut impl Write,
    messages: impl Iterator<Item = &'m NetlinkMessage>,
) -> std::io::Result<()> {
    let (mut run, mut next) = (Vec::new(), Vec::new());
    let (mut count, mut lead) = (0usize, ": ");
    let mut write_run = |out: &mut dyn Write, run: &[u8], count: usize| {
        out.write_all(lead.as_bytes())?;
        lead = "; ";
        out.write_all(run)?;
        match count {
            1 => Ok(()),
            n => write!(out, " ×{n}"),
        }
    };
    for m in messages {
        next.clear();
        write_message_summary(&mut next, m)?;
        if count > 0 && next == run {
            count += 1;
            continue;
        }
        if count > 0 {
            write_run(out, &run, count)?;
        }
        std::mem::swap(&mut run, &mut next);
        count = 1;
    }
    if count > 0 {
        write_run(out, &run, count)?;
    }
    Ok(())
}

/// ` LABEL VALUE` when there is a value.
fn write_opt(out: &mut impl Write, label: &str, v: Option<&str>) -> std::io::Result<()> {
    match v {
        Some(v) => write!(out, " {label} {v}"),
        None => Ok(()),
    }
}

/// Writes `items` with `write_item`, `separator` between them.
fn write_joined<T>(
    out: &mut dyn Write,
    items: impl IntoIterator<Item = T>,
    separator: &str,
    mut write_item: impl FnMut(&mut dyn Write, T) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.write_all(separator.as_bytes())?;
        }
        write_item(out, item)?;
    }
    Ok(())
}

/// What `write` writes, as a string (the writers here write only strings).
fn written(write: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut bytes = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write(&mut bytes);
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `RTM_GETROUTE` → `GETROUTE`: the timeline is already about netlink.
pub fn short_type(t: &str) -> &str {
    t.strip_prefix("RTM_").unwrap_or(t)
}

/// Writes the summary of one IPVS command: `NEW_SERVICE TCP 10.0.0.1:80 rr → 10.0.0.2:80 masq
/// w1`.
fn write_ipvs_summary(out: &mut (impl Write + ?Sized), c: &IpvsCommand) -> std::io::Result<()> {
    out.write_all(c.cmd.strip_prefix("IPVS_CMD_").unwrap_or(&c.cmd).as_bytes())?;
    if let Some(svc) = &c.service {
        match (&svc.address, svc.port, svc.fwmark) {
            (Some(a), Some(p), _) => {
                write!(out, " {} {a}:{p}", svc.protocol.as_deref().unwrap_or("?"))?
            }
            (_, _, Some(m)) => write!(out, " fwmark {m}")?,
            _ => {}
        }
        if let Some(sch) = svc.scheduler.as_deref().filter(|s| !s.is_empty()) {
            write!(out, " {sch}")?;
        }
    }
    if let Some(d) = &c.dest {
        if let (Some(a), Some(p)) = (&d.address, d.port) {
            write!(out, " → {a}:{p}")?;
        }
        if let Some(f) = &d.forwarding {
            write!(out, " {f}")?;
        }
        if let Some(w) = d.weight {
            write!(out, " w{w}")?;
        }
    }
    Ok(())
}

/// Summary of one netlink message: its type and the facts a person looks for.
pub fn message_summary(m: &NetlinkMessage) -> String {
    written(|out| write_message_summary(out, m))
}

/// Writes [`message_summary`].
fn write_message_summary(out: &mut impl Write, m: &NetlinkMessage) -> std::io::Result<()> {
    let t = short_type(&m.header.type_name);
    let dump = if m.header.flags.iter().any(|f| f == "DUMP") {
        " DUMP"
    } else {
        ""
    };
    match &m.body {
        MessageBody::Error(e) if e.error == 0 => out.write_all(b"ACK"),
        MessageBody::Error(e) => {
            write!(out, "ERROR {} ({})", e.errno, e.text)?;
            if let Some(r) = &e.request {
                write!(out, " to {}", short_type(&r.type_name))?;
            }
            if let Some(x) = e.extack_msg.as_deref() {
                write!(out, ": \"{x}\"")?;
            }
            Ok(())
        }
        MessageBody::Done(_) => out.write_all(b"DONE"),
        MessageBody::Address(a) => match a.local.as_deref().or(a.address.as_deref()) {
            Some(addr) => {
                write!(out, "{t} ")?;
                match &a.ifname {
                    Some(name) => out.write_all(name.as_bytes())?,
                    None => write!(out, "{}", a.index)?,
                }
                write!(out, ": {addr}/{}", a.prefix_len)?;
                // Only the kernel's answers say which address is primary.
                let rank = match (m.header.flags.iter().any(|f| f == "REQUEST"), a.secondary) {
                    (true, _) => "",
                    (false, true) => " secondary",
                    (false, false) => " primary",
                };
                out.write_all(rank.as_bytes())?;
                let label = a.label.as_deref();
                write_opt(
                    out,
                    "label",
                    label.filter(|l| Some(*l) != a.ifname.as_deref()),
                )
            }
            None => write!(out, "{t}{dump} {}", a.family),
        },
        MessageBody::Route(r)
            if r.dst.is_some() || !dump.is_empty() || m.header.type_id != rtm::GETROUTE =>
        {
            let write_dst = |out: &mut dyn Write| match r.dst.as_deref() {
                Some(d) => write!(out, "{d}/{}", r.dst_len),
                None => out.write_all(b"default"),
            };
            if m.header.type_id == rtm::GETROUTE {
                write!(out, "{t}{dump} ")?;
                if dump.is_empty() {
                    write_dst(out)
                } else {
                    write!(out, "{}", r.family)
                }
            } else {
                write!(out, "{t} {} ", r.route_type)?;
                write_dst(out)?;
                write!(out, " table {}", r.table)?;
                match (&r.oif_name, r.oif) {
                    (Some(name), _) => write!(out, " dev {name}")?,
                    (None, Some(index)) => write!(out, " dev {index}")?,
                    (None, None) => {}
                }
                write_opt(out, "src", r.prefsrc.as_deref())?;
                write_opt(out, "via", r.gateway.as_deref())
            }
        }
        MessageBody::Link(l) => {
            write!(out, "{t}{dump} ")?;
            match &l.ifname {
                Some(name) => out.write_all(name.as_bytes())?,
                None => write!(out, "{}", l.index)?,
            }
            match l.info_kind.as_deref() {
                Some(k) => write!(out, " ({k})"),
                None => Ok(()),
            }
        }
        MessageBody::Nlctrl(n) => {
            let cmd = n.cmd.strip_prefix("CTRL_CMD_").unwrap_or(&n.cmd);
            write!(out, "nlctrl {cmd}")?;
            if let Some(f) = n.family_name.as_deref() {
                write!(out, " {f}")?;
            }
            match n.family_id {
                Some(id) => write!(out, " id {id:#x}"),
                None => Ok(()),
            }
        }
        MessageBody::Ipvs(c) => {
            out.write_all(b"IPVS ")?;
            write_ipvs_summary(out, c)
        }
        _ => write!(out, "{t}{dump}"),
    }
}

/// Addresses grouped by interface: `eth0 10.0.0.20/24 primary, 10.0.0.10/24 secondary; lo …`.
fn write_addresses(out: &mut impl Write, addresses: &[AddressFact]) -> std::io::Result<()> {
    let mut groups: Vec<(&str, Vec<&AddressFact>)> = Vec::new();
    for a in addresses {
        match groups.iter_mut().find(|(name, _)| *name == a.ifname) {
            Some((_, list)) => list.push(a),
            None => groups.push((&a.ifname, vec![a])),
        }
    }
    write_joined(out, groups, "; ", |out, (name, list)| {
        write!(out, "{name} ")?;
        write_joined(out, list, ", ", |out, a| {
            // Only IPv4 has primary and secondary addresses.
            let rank = match (a.address.contains(':'), a.secondary) {
                (true, _) => "",
                (false, true) => " secondary",
                (false, false) => " primary",
            };
            write!(out, "{}/{}{rank}", a.address, a.prefix_len)?;
            for flag in &a.flags {
                write!(out, " {flag}")?;
            }
            match a.label.as_deref() {
                Some(l) => write!(out, " label {l}"),
                None => Ok(()),
            }
        })
    })
}

/// One route: `local 10.0.0.10 table local dev eth0 src 10.0.0.20`.
fn write_route(out: &mut (impl Write + ?Sized), r: &RouteFact) -> std::io::Result<()> {
    write!(out, "{} {} table {}", r.route_type, r.dst, r.table)?;
    for (label, value) in [("dev", &r.dev), ("src", &r.src), ("via", &r.gateway)] {
        if let Some(v) = value {
            write!(out, " {label} {v}")?;
        }
    }
    Ok(())
}

/// A route dump: counts per table, and the local table as its set of local addresses.
fn write_route_dump(out: &mut impl Write, routes: &[RouteFact]) -> std::io::Result<()> {
    let mut per_table: Vec<(&str, usize)> = Vec::new();
    for r in routes {
        match per_table.iter_mut().find(|(t, _)| *t == r.table) {
            Some((_, n)) => *n += 1,
            None => per_table.push((&r.table, 1)),
        }
    }
    write_joined(out, per_table, ", ", |out, (t, n)| write!(out, "{t} {n}"))?;
    let mut locals = routes.iter().filter(|r| r.route_type == "local").peekable();
    if locals.peek().is_some() {
        out.write_all(b"; local addresses: ")?;
        write_joined(out, locals, ", ", |out, r| {
            let dst = r.dst.strip_suffix("/32").or(r.dst.strip_suffix("/128"));
            out.write_all(dst.unwrap_or(&r.dst).as_bytes())?;
            match r.src.as_deref() {
                Some(src) => write!(out, " src {src}"),
                None => Ok(()),
            }
        })?;
    }
    Ok(())
}

/// What the kernel answered, in one phrase.
pub fn render_answer(c: &NetlinkConversation) -> String {
    written(|out| write_answer(out, c))
}

/// `N thing(s): ` with the plural as `replies` says.
fn write_count(out: &mut impl Write, n: usize, one: &str, many: &str) -> std::io::Result<()> {
    write!(out, "{n} {}: ", if n == 1 { one } else { many })
}

/// Writes [`render_answer`].
fn write_answer(out: &mut impl Write, c: &NetlinkConversation) -> std::io::Result<()> {
    let f = &c.facts;
    let replies = c.replies as usize;
    match (c.outcome, &c.error) {
        (_, Some(e)) => {
            write!(out, "ERROR {}", e.errno)?;
            if !e.text.is_empty() {
                write!(out, " ({})", e.text)?;
            }
            if let Some(x) = e.extack.as_deref() {
                write!(out, ": \"{x}\"")?;
            }
        }
        (ConversationOutcome::NoReply, _) => out.write_all(b"no reply seen")?,
        (ConversationOutcome::Ack, _) if c.replies == 0 => out.write_all(b"ACK")?,
        _ if !f.addresses.is_empty() => {
            write_count(out, replies, "address", "addresses")?;
            write_addresses(out, &f.addresses)?;
        }
        _ if !f.routes.is_empty() && !c.dump => {
            write_joined(out, &f.routes, "; ", |out, r| write_route(out, r))?
        }
        _ if !f.routes.is_empty() => {
            write_count(out, replies, "route", "routes")?;
            write_route_dump(out, &f.routes)?;
        }
        _ if !f.links.is_empty() => {
            write_count(out, replies, "link", "links")?;
            write_joined(out, &f.links, ", ", |out, l| match &l.ifname {
                Some(name) => out.write_all(name.as_bytes()),
                None => write!(out, "{}", l.index),
            })?;
        }
        _ if !f.ipvs.is_empty() => {
            write_joined(out, &f.ipvs, "; ", |out, i| write_ipvs_summary(out, i))?
        }
        _ if !f.families.is_empty() => write_joined(out, &f.families, ", ", |out, x| {
            write!(out, "family {} id {:#x}", x.name, x.id)
        })?,
        _ if c.replies == 0 => out.write_all(b"nothing")?,
        _ => {
            write_count(out, replies, "reply", "replies")?;
            write_joined(out, &c.reply_types, ", ", |out, (t, n)| {
                write!(out, "{} ×{n}", short_type(t))
            })?;
        }
    }
    if f.omitted > 0 {
        write!(out, " (+{} more)", f.omitted)?;
    }
    if c.outcome == ConversationOutcome::Incomplete {
        out.write_all(b" (INCOMPLETE: the last reply was not seen)")?;
    }
    Ok(())
}

/// Writes one line per request: what was asked and what the kernel answered.
fn write_conversation(out: &mut impl Write, c: &NetlinkConversation) -> std::io::Result<()> {
    write_message_summary(out, &c.request)?;
    out.write_all(" → ".as_bytes())?;
    write_answer(out, c)?;
    write!(out, " ({:.3} ms)", c.duration_ns as f64 / 1e6)
}

/// Writes one line per kernel handler call: function, hook, namespace, request, result.
fn write_kernel_handler(out: &mut impl Write, k: &KernelHandlerCall) -> std::io::Result<()> {
    let dump_round = k.function.contains("_dump_");
    let result = match (&k.errno, dump_round) {
        // Since Linux 6.9 a dump round that filled its buffer says -EMSGSIZE, and the netlink
        // core turns it into the bytes ("netlink: handle EMSGSIZE errors in the core").
        (Some(_), true) if k.result == -90 => "buffer full, more rounds follow (EMSGSIZE)".into(),
        (Some(errno), _) => format!("{} ({errno})", k.result),
        (None, true) if k.result == 0 => "dump complete".into(),
        (None, true) => format!("{} bytes of replies", k.result),
        (None, false) => k.result.to_string(),
    };
    write!(
        out,
        "kernel {} [{}]{}: {} → {result} ({:.3} ms)",
        k.function,
        k.hook,
        k.handler_netns
            .map(|n| format!(" netns {n}"))
            .unwrap_or_default(),
        k.request
            .as_ref()
            .map(|m| message_summary(m))
            .unwrap_or_else(|| "request not read".into()),
        k.duration_ns as f64 / 1e6
    )
}

/// One route as `ip route` would say it: `default via 192.0.2.1 dev eth0 metric 100`
/// (`0.0.0.0/8 dev lo` for a route to 0.0.0.0 of another length; `not up` when the file says so).
pub fn listed_route_text(r: &ListedRoute) -> String {
    let destination = match r.destination.as_str() {
        "0.0.0.0/0" | "::/0" => "default",
        other => other,
    };
    let mut text = destination.to_string();
    if let Some(g) = &r.gateway {
        text.push_str(&format!(" via {g}"));
    }
    text.push_str(&format!(" dev {} metric {}", r.dev, r.metric));
    if !r.up {
        text.push_str(" (not up)");
    }
    text
}

/// `read /proc/net/route [fentry] netns N: default via … dev eth0 metric 100; …`.
fn write_route_file_read(out: &mut impl Write, r: &RouteFileRead) -> std::io::Result<()> {
    write!(
        out,
        "read {} [{}]{}: ",
        r.file,
        r.hook,
        r.file_netns
            .map(|n| format!(" netns {n}"))
            .unwrap_or_default()
    )?;
    let routes: Vec<String> = r.routes.iter().map(listed_route_text).collect();
    if routes.is_empty() {
        out.write_all(b"no route could be read")?;
    } else {
        out.write_all(routes.join("; ").as_bytes())?;
    }
    if r.cut {
        out.write_all(b" (and more, not copied)")?;
    }
    Ok(())
}

/// `kernel notice: added 192.0.2.5/24 on eth0 (secondary)`, `… removed … from …`: the flags as
/// `ip address` says them.
fn write_address_notice(out: &mut impl Write, n: &AddressNotice) -> std::io::Result<()> {
    let a = &n.address;
    let (verb, on) = if n.added {
        ("added (or changed)", "on")
    } else {
        ("removed", "from")
    };
    write!(
        out,
        "kernel notice: {verb} {}/{} {on} {}",
        a.address, a.prefix_len, a.ifname
    )?;
    let flags: Vec<&str> = a
        .secondary
        .then_some("secondary")
        .into_iter()
        .chain(a.flags.iter().map(|f| f.as_ref()))
        .collect();
    if !flags.is_empty() {
        write!(out, " ({})", flags.join(", "))?;
    }
    Ok(())
}

/// `namespace/pod/container` as far as known, else the pod UID and the short container ID.
pub fn container_label(c: &crate::model::process::ContainerIdentity) -> String {
    let pod = match (&c.pod_namespace, &c.pod_name, &c.pod_uid) {
        (Some(ns), Some(name), _) => format!("{ns}/{name}"),
        (_, _, Some(uid)) => format!("pod {uid}"),
        _ => String::new(),
    };
    let container = c
        .name
        .clone()
        .unwrap_or_else(|| c.id.chars().take(13).collect());
    if pod.is_empty() {
        container
    } else {
        format!("{pod}/{container}")
    }
}

/// Renders one event as a line (without indentation).
pub fn render_event(e: &Event) -> String {
    let mut line = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_event(&mut line, e);
    String::from_utf8_lossy(&line).into_owned()
}

/// Who made `e`, as the timeline names it: `comm[pid]`; `port[N]` for a capture without
/// attribution (plain nlmon: a process's first netlink socket usually has its pid as port id);
/// `None` for events no process made.
pub fn actor_label(e: &Event) -> Option<String> {
    actor(e).map(|a| a.to_string())
}

/// Who made an event (see [`actor_label`]).
enum Actor<'a> {
    /// A netlink port id, for a capture without attribution.
    Port(u32),
    /// A process: command and pid.
    Process(&'a str, u32),
}

impl std::fmt::Display for Actor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Actor::Port(port) => write!(f, "port[{port}]"),
            Actor::Process(comm, pid) => write!(f, "{comm}[{pid}]"),
        }
    }
}

/// Who made `e` (see [`actor_label`]), without building its text.
fn actor(e: &Event) -> Option<Actor<'_>> {
    let portid = match &e.body {
        EventBody::Netlink(n) => n.portid,
        EventBody::Conversation(c) => c.portid,
        _ => None,
    };
    match portid {
        Some(port) if e.pid == 0 && e.comm.is_empty() => Some(Actor::Port(port)),
        None if e.pid == 0 && e.comm.is_empty() => None,
        _ => Some(Actor::Process(&e.comm, e.pid)),
    }
}

/// Renders what one event says, without time or process.
pub fn render_event_body(e: &Event) -> String {
    let mut line = Vec::new();
    // Writing into a Vec cannot fail.
    let _ = write_event_body(&mut line, e);
    String::from_utf8_lossy(&line).into_owned()
}

/// Writes one event as a line (without indentation or newline) into `out`.
pub fn write_event(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    out.write_all(time_of_day(&e.ts).as_bytes())?;
    if let Some(actor) = actor(e) {
        write!(out, " {actor}")?;
        if let Some(c) = e
            .process
            .as_ref()
            .and_then(|p| p.identity.container.as_ref())
        {
            write!(out, "{{{}}}", container_label(c))?;
        }
    }
    out.write_all(b" ")?;
    write_event_body(out, e)
}

/// Writes what `e` says (without time or process) into `out`.
pub fn write_event_body(out: &mut impl Write, e: &Event) -> std::io::Result<()> {
    match &e.body {
        EventBody::Header(h) => write!(
            out,
            "nodeip-trace {} on {} (kernel {}), schema {}",
            h.tool_version, h.host, h.kernel, h.schema
        ),
        EventBody::Getaddrinfo(c) => write_getaddrinfo(out, c),
        EventBody::Netlink(n) => write_netlink(out, n),
        EventBody::Conversation(c) => write_conversation(out, c),
        EventBody::RouteLookup(r) => {
            write!(
                out,
                "route lookup {} (src {}) table {}",
                r.dst, r.src, r.table
            )?;
            if let Some(t) = r.route_type.as_deref() {
                write!(out, " type {t}")?;
            }
            match r.err {
                0 => {
                    let dev = if r.oif.is_empty() { "-" } else { &r.oif };
                    write!(out, ": dev {dev}")?;
                    match r.gateway.as_deref() {
                        Some(g) => write!(out, " via {g}"),
                        None => Ok(()),
                    }
                }
                -11 => write!(out, ": no match here, next table"),
                e => write!(out, ": error {e}"),
            }
        }
        EventBody::Ipvs(i) => {
            out.write_all(b"IPVS ")?;
            write_ipvs_summary(out, &i.command)
        }
        EventBody::Extack(x) => write!(out, "kernel says: {}", x.message),
        EventBody::KernelHandler(k) => write_kernel_handler(out, k),
        EventBody::RouteFileRead(r) => write_route_file_read(out, r),
        EventBody::AddressNotice(n) => write_address_notice(out, n),
        EventBody::ExecHold(h) => write_exec_hold(out, h),
        EventBody::Lost(l) => write!(out, "LOST {} events: {:?}", l.lost, l.counts),
        EventBody::Diagnosis(d) => {
            write!(out, "DIAGNOSIS [{}] {}: {}", d.severity, d.id, d.summary)
        }
        EventBody::Summary(s) => write!(out, "summary: {:?}, lost {}", s.events, s.lost),
    }
}

/// `exec /usr/bin/kubelet held 12.3 ms until probed: Go resolver (go1.27.3)`.
fn write_exec_hold(
    out: &mut impl Write,
    h: &crate::model::event::ExecHoldEvent,
) -> std::io::Result<()> {
    let ms = h.held_us as f64 / 1000.0;
    if h.in_time {
        write!(out, "exec {} held {ms:.1} ms until probed", h.file)?;
    } else {
        write!(
            out,
            "exec {} let go after {ms:.1} ms (the hold's limit) before its probes were attached: its first lookups may be missed",
            h.file
        )?;
    }
    let mut lists = h
        .probed
        .iter()
        .map(|p| (p, ""))
        .chain(h.refused.iter().map(|r| (r, "not probed: ")));
    if let Some((first, how)) = lists.next() {
        write!(out, ": {how}{first}")?;
        for (item, how) in lists {
            write!(out, "; {how}{item}")?;
        }
    } else if h.in_time {
        out.write_all(b" (no resolver of its own)")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_notice_says_what_and_its_flags() {
        let notice = |added, secondary| AddressNotice {
            added,
            address: AddressFact {
                ifname: "eth0".into(),
                address: "192.0.2.5".into(),
                prefix_len: 24,
                secondary,
                label: None,
                flags: vec!["dynamic".into()],
            },
            netns: 1,
        };
        let said = |n: &AddressNotice| {
            let mut line = Vec::new();
            write_address_notice(&mut line, n).unwrap();
            String::from_utf8(line).unwrap()
        };
        assert_eq!(
            said(&notice(true, true)),
            "kernel notice: added (or changed) 192.0.2.5/24 on eth0 (secondary, dynamic)"
        );
        assert_eq!(
            said(&notice(false, false)),
            "kernel notice: removed 192.0.2.5/24 from eth0 (dynamic)"
        );
    }

    #[test]
    fn a_route_file_read_reads_like_ip_route() {
        let route = |destination: &str, gateway: Option<&str>, dev: &str, up| ListedRoute {
            destination: destination.into(),
            gateway: gateway.map(Into::into),
            dev: dev.into(),
            metric: 100,
            up,
        };
        let read = RouteFileRead {
            file: "/proc/net/route".into(),
            hook: "kprobe".into(),
            file_netns: Some(4026531840),
            routes: vec![
                route("0.0.0.0/0", Some("192.0.2.1"), "eth0", true),
                route("0.0.0.0/8", None, "lo", false),
            ],
            cut: true,
            decode_errors: vec![],
        };
        let mut line = Vec::new();
        write_route_file_read(&mut line, &read).unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "read /proc/net/route [kprobe] netns 4026531840: default via 192.0.2.1 dev eth0 metric 100; \
             0.0.0.0/8 dev lo metric 100 (not up) (and more, not copied)"
        );
    }

    fn render_kernel_handler(k: &KernelHandlerCall) -> String {
        let mut line = Vec::new();
        write_kernel_handler(&mut line, k).unwrap();
        String::from_utf8(line).unwrap()
    }
    use crate::decode::netlink::NetlinkDecoder;

    /// RTM_GETROUTE for 10.1.2.3, as iproute2 sends it.
    fn route_get_request() -> NetlinkMessage {
        let mut m = Vec::new();
        m.extend_from_slice(&36u32.to_ne_bytes());
        m.extend_from_slice(&26u16.to_ne_bytes());
        m.extend_from_slice(&1u16.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(&[2, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&1u16.to_ne_bytes());
        m.extend_from_slice(&[10, 1, 2, 3]);
        NetlinkDecoder::new().decode(0, &m).messages.remove(0)
    }

    fn call(function: &str, result: i64, errno: Option<&str>) -> KernelHandlerCall {
        KernelHandlerCall {
            function: function.into(),
            hook: "fentry".into(),
            handler_netns: Some(4026532123),
            result,
            errno: errno.map(str::to_string),
            request: Some(Box::new(route_get_request())),
            request_len: 36,
            request_cut: false,
            duration_ns: 194_520,
            decode_errors: Vec::new(),
        }
    }

    #[test]
    fn container_labels() {
        let mut c = crate::model::process::ContainerIdentity {
            runtime: "containerd".into(),
            id: "4f3a9c1d2e5b6a7c8d9e".into(),
            pod_uid: Some("1b2c".into()),
            ..Default::default()
        };
        assert_eq!(container_label(&c), "pod 1b2c/4f3a9c1d2e5b6");
        c.pod_namespace = Some("calico-system".into());
        c.pod_name = Some("calico-node-bhk2j".into());
        c.name = Some("calico-node".into());
        assert_eq!(
            container_label(&c),
            "calico-system/calico-node-bhk2j/calico-node"
        );
        c.pod_uid = None;
        c.pod_namespace = None;
        assert_eq!(container_label(&c), "calico-node");
    }

    #[test]
    fn kernel_handler_lines() {
        let summary = message_summary(&route_get_request());
        assert_eq!(
            render_kernel_handler(&call("inet_rtm_getroute", -101, Some("ENETUNREACH"))),
            format!(
                "kernel inet_rtm_getroute [fentry] netns 4026532123: {summary} → -101 (ENETUNREACH) (0.195 ms)"
            )
        );
        let mut dump = call("inet_dump_ifaddr", 312, None);
        assert!(render_kernel_handler(&dump).contains("→ 312 bytes of replies"));
        dump.result = 0;
        assert!(render_kernel_handler(&dump).contains("→ dump complete"));
        // Linux 6.9+: a full round is -EMSGSIZE, not an error.
        let full = call("inet_dump_ifaddr", -90, Some("EMSGSIZE"));
        assert!(
            render_kernel_handler(&full).contains("→ buffer full, more rounds follow (EMSGSIZE)")
        );
        let refused = call("inet_rtm_getroute", -90, Some("EMSGSIZE"));
        assert!(render_kernel_handler(&refused).contains("→ -90 (EMSGSIZE)"));
        let mut unread = call("ip_vs_genl_set_cmd", 0, None);
        unread.request = None;
        unread.handler_netns = None;
        let line = render_kernel_handler(&unread);
        assert!(
            line.starts_with("kernel ip_vs_genl_set_cmd [fentry]: request not read → 0"),
            "{line}"
        );
    }
}
