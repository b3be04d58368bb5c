//! The presentation view: which events a human-facing sink shows, and as what. The text
//! timeline, the HTML report and the Perfetto trace all render from it, so the rules live once:
//! recording framing is for machines, a paired netlink buffer and an IPVS command are shown by
//! their conversation's line, diagnoses are collected and shown last; and how each event reads
//! (its line, its actor, a message's summary, a call's `why`) is [`wording`]'s.
pub mod wording;

use crate::explain::address_ledger::AddressLedger;
use crate::model::event::{Diagnosis, Event, EventBody};

/// How a human-facing sink presents one event.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Presentation<'a> {
    /// Not shown: recording framing (header, summary), or shown by another event's line (a
    /// paired netlink buffer, an IPVS command: their conversation's line).
    Hidden,
    /// A timeline line.
    Line(&'a Event),
    /// A diagnosis: collected, and shown after the timeline.
    Diagnosis(&'a Diagnosis),
}

/// A diagnosis as people read it: `[SEVERITY] id — summary`, then its evidence and its remedy,
/// a line each (the text timeline's closing list; the pcapng section comments).
pub fn diagnosis_text(d: &Diagnosis) -> String {
    let mut text = format!("{}\n", d.headline());
    for ev in &d.evidence {
        text.push_str(&format!("    evidence: {ev}\n"));
    }
    text.push_str(&format!("    remedy:   {}\n", d.remedy));
    text
}

/// The address changes of a trace as people read them: a heading and a line each (time, what,
/// by whom); empty when there were none.
pub fn address_ledger_text(ledger: &AddressLedger) -> String {
    if ledger.changes().is_empty() {
        return String::new();
    }
    let mut text = format!(
        "\n=== {} address change(s) ===\n",
        ledger.changes().len() as u64 + ledger.left_out()
    );
    for c in ledger.changes() {
        text.push_str(&format!("{} {}\n", c.ts, c.text()));
    }
    if ledger.left_out() > 0 {
        text.push_str(&format!("({} more not listed)\n", ledger.left_out()));
    }
    text
}

/// The presentation of `event` (`--format json` keeps every event; this is for people).
pub fn present(event: &Event) -> Presentation<'_> {
    match &event.body {
        EventBody::Header(_) | EventBody::Summary(_) | EventBody::Ipvs(_) => Presentation::Hidden,
        EventBody::Netlink(n) if n.paired => Presentation::Hidden,
        EventBody::Diagnosis(d) => Presentation::Diagnosis(d),
        _ => Presentation::Line(event),
    }
}
