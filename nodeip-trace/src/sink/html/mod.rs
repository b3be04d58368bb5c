//! The postmortem report: one self-contained HTML file (`nodeip-trace report`, `trace
//! --report`, `--format html`). [`HtmlReportSink`] gathers the stream — header, the rows of the
//! swimlane, resolver calls, diagnoses, the kernel's link/address/route answers for the address
//! audit, and the text timeline — and writes the page when the stream ends. Budgets keep it
//! readable and bounded: [`MAX_ROWS`] rows drawn, [`MAX_TEXT_EVENTS`] events in the text timeline, with a
//! visible notice of what was left out.
pub mod escape;
pub mod page;
pub mod swimlane;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use self::swimlane::{Mark, Row};
use super::text::TextTimelineSink;
use super::view::{present, Presentation};
use super::{EventSink, SinkError};
use crate::explain::address_ledger::AddressLedger;
use crate::explain::node_audit::{self, ComponentSettings, NodeSnapshot};
use crate::explain::resolver::glibc::gai_conf::GaiConf;
use crate::model::clock::Timestamp;
use crate::model::event::{Diagnosis, DiagnosisId, Event, EventBody, RecordingHeader};
use crate::model::frame::Direction;
use crate::model::getaddrinfo::GetaddrinfoCall;
use crate::model::netlink::{MessageBody, NetlinkMessage};

/// Most swimlane rows drawn (≈ 0.5 KiB each).
pub const MAX_ROWS: usize = 3000;
/// Most events in the text timeline kept.
pub const MAX_TEXT_EVENTS: u64 = 20_000;
/// Most kernel answers (links, addresses, routes) kept for the audit.
const MAX_ANSWERS: usize = 50_000;

/// A resolver call kept for its pair table.
struct CallEntry {
    anchor: String,
    actor: String,
    call: Box<GetaddrinfoCall>,
}

/// The rows diagnoses rest on.
struct Decisions {
    /// For each diagnosis, each evidence's first row (when it names a drawn event).
    evidence_rows: Vec<Vec<Option<usize>>>,
    /// Each decision row's diagnosis ids.
    by_row: BTreeMap<usize, Vec<DiagnosisId>>,
}

/// Writes the HTML report of everything it is given when the stream ends.
pub struct HtmlReportSink<W: Write> {
    out: W,
    name: String,
    source: String,
    header: Option<RecordingHeader>,
    events: BTreeMap<&'static str, u64>,
    window: Option<(Timestamp, Timestamp, u64, u64)>,
    lost: BTreeMap<String, u64>,
    rows: Vec<Row>,
    rows_left_out: u64,
    /// The result row of the resolver call whose span is open.
    open_call_end: Option<Row>,
    calls: Vec<CallEntry>,
    diagnoses: Vec<Diagnosis>,
    ledger: AddressLedger,
    subtitles: BTreeMap<String, String>,
    answers: Vec<NetlinkMessage>,
    text: TextTimelineSink<Vec<u8>>,
    text_events: u64,
    finished: bool,
}

impl<W: Write> HtmlReportSink<W> {
    /// A report writer on `out`; `name` names it in errors.
    pub fn new(out: W, name: impl Into<String>) -> Self {
        Self {
            out,
            name: name.into(),
            source: String::new(),
            header: None,
            events: BTreeMap::new(),
            window: None,
            lost: BTreeMap::new(),
            rows: Vec::new(),
            rows_left_out: 0,
            open_call_end: None,
            calls: Vec::new(),
            diagnoses: Vec::new(),
            ledger: AddressLedger::new(),
            subtitles: BTreeMap::new(),
            answers: Vec::new(),
            text: TextTimelineSink::new(Vec::new(), "the report's text timeline", false),
            text_events: 0,
            finished: false,
        }
    }

    /// Names what the report is made from (shown in its header).
    pub fn with_source(mut self, source: impl Into<String>) -> Self {
        self.source = source.into();
        self
    }

    fn push_rows(&mut self, rows: Vec<Row>) {
        for row in rows {
            if self.rows.len() < MAX_ROWS {
                self.rows.push(row);
            } else {
                self.rows_left_out += 1;
            }
        }
    }

    /// Takes note of an event for the header, the audit and the lanes' subtitles.
    fn observe(&mut self, e: &Event) {
        self.ledger.observe(e);
        match &e.body {
            EventBody::Header(h) => {
                self.header = Some((**h).clone());
                return;
            }
            EventBody::Summary(_) => return,
            EventBody::Lost(l) => {
                for (reason, n) in &l.counts {
                    *self.lost.entry(reason.clone()).or_default() += n;
                }
            }
            EventBody::Diagnosis(d) => self.diagnoses.push(d.clone()),
            EventBody::Netlink(n) if n.direction == Direction::Recv => {
                let wanted = n.messages.iter().filter(|m| {
                    matches!(
                        m.body,
                        MessageBody::Link(_) | MessageBody::Address(_) | MessageBody::Route(_)
                    )
                });
                for m in wanted {
                    if self.answers.len() < MAX_ANSWERS {
                        self.answers.push(NetlinkMessage::clone(m));
                    }
                }
            }
            _ => {}
        }
        *self.events.entry(e.body.kind()).or_default() += 1;
        // Events arrive in pipeline order (a call before what happened inside it): the window
        // is the earliest to the latest.
        let window = self
            .window
            .get_or_insert_with(|| (e.ts.clone(), e.ts.clone(), e.ts_ns, e.ts_ns));
        if e.ts_ns < window.2 {
            window.0.clone_from(&e.ts);
            window.2 = e.ts_ns;
        }
        if e.ts_ns > window.3 {
            window.1.clone_from(&e.ts);
            window.3 = e.ts_ns;
        }
        if let (Some(actor), Some(process)) = (super::view::wording::actor_label(e), &e.process) {
            self.subtitles.entry(actor).or_insert_with(|| {
                let identity = &process.identity;
                match (&identity.container, &identity.unit, &process.exe) {
                    (Some(c), _, _) => super::view::wording::container_label(c),
                    (None, Some(unit), _) => unit.clone(),
                    (None, None, Some(exe)) => exe.rsplit('/').next().unwrap_or(exe).to_string(),
                    _ => String::new(),
                }
            });
        }
    }

    fn text_line(
        &mut self,
        item: impl FnOnce(&mut TextTimelineSink<Vec<u8>>) -> Result<(), SinkError>,
    ) -> Result<(), SinkError> {
        if self.text_events < MAX_TEXT_EVENTS {
            item(&mut self.text)?;
        }
        self.text_events += 1;
        Ok(())
    }

    /// The rows of `e`; a resolver call's rows also register it for the pair tables.
    fn rows_for(&mut self, e: &Event) -> Vec<Row> {
        let anchor = match &e.body {
            EventBody::Getaddrinfo(c) => {
                let anchor = format!("call-{}", self.calls.len() + 1);
                self.calls.push(CallEntry {
                    anchor: anchor.clone(),
                    actor: super::view::wording::actor_label(e).unwrap_or_default(),
                    call: c.clone(),
                });
                Some(anchor)
            }
            _ => None,
        };
        swimlane::rows_of(e, anchor.as_deref())
    }

    /// Which rows each diagnosis rests on.
    fn decisions(&self) -> Decisions {
        // An event not drawn itself (an IPVS command: its conversation's rows show it) is
        // found by its time.
        let mut by_event: BTreeMap<(&str, u64), Vec<usize>> = BTreeMap::new();
        let mut by_time: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, r) in self.rows.iter().enumerate() {
            by_event.entry(r.event).or_default().push(i);
            by_time.entry(r.event.1).or_default().push(i);
        }
        let mut marked: BTreeMap<usize, Vec<DiagnosisId>> = BTreeMap::new();
        let per_diagnosis = self
            .diagnoses
            .iter()
            .map(|d| {
                d.evidence
                    .iter()
                    .map(|text| {
                        let key = crate::explain::diagnose::evidence_event(text)?;
                        let rows = by_event.get(&key).or_else(|| by_time.get(&key.1))?;
                        for &row in rows {
                            let ids = marked.entry(row).or_default();
                            if !ids.contains(&d.id) {
                                ids.push(d.id);
                            }
                        }
                        rows.first().copied()
                    })
                    .collect()
            })
            .collect();
        Decisions {
            evidence_rows: per_diagnosis,
            by_row: marked,
        }
    }

    /// The address audit of the kernel's answers seen, without what they cannot support.
    fn audit(&self) -> Option<(node_audit::AuditReport, Vec<String>)> {
        let host = self
            .header
            .as_ref()
            .map(|h| h.host.clone())
            .unwrap_or_default();
        let snapshot = NodeSnapshot::from_messages(&host, Vec::new(), &self.answers);
        if snapshot.addresses.is_empty() {
            return None;
        }
        let report =
            node_audit::audit(snapshot, &ComponentSettings::default(), &GaiConf::default());
        Some(report.without_unseen_inputs())
    }

    fn render(&mut self) -> String {
        if let Some(end) = self.open_call_end.take() {
            self.push_rows(vec![end]);
        }
        let Decisions {
            evidence_rows: diagnosis_rows,
            by_row: decisions,
        } = self.decisions();
        let decision_rows: BTreeSet<usize> = decisions.keys().copied().collect();
        let plan = swimlane::plan_lanes(&self.rows, &self.subtitles, &decision_rows);
        let audit = self.audit();
        let text = String::from_utf8_lossy(self.text_output()).into_owned();
        let calls: Vec<(String, String, &GetaddrinfoCall)> = self
            .calls
            .iter()
            .map(|c| (c.anchor.clone(), c.actor.clone(), &*c.call))
            .collect();
        let mut html = String::with_capacity(64 * 1024 + self.rows.len() * 600);
        page::write_page(
            &mut html,
            &page::Page {
                header: self.header.as_ref(),
                source: &self.source,
                window: self
                    .window
                    .as_ref()
                    .map(|(first, last, a, b)| (first.as_str(), last.as_str(), b - a)),
                events: &self.events,
                lost: &self.lost,
                diagnoses: &self.diagnoses,
                diagnosis_rows: &diagnosis_rows,
                ledger: &self.ledger,
                rows: &self.rows,
                rows_left_out: self.rows_left_out,
                plan: &plan,
                decisions: &decisions,
                audit: audit
                    .as_ref()
                    .map(|(report, left_out)| (report, left_out.as_slice())),
                calls: &calls,
                text_timeline: &text,
                text_left_out: self.text_events.saturating_sub(MAX_TEXT_EVENTS),
            },
        );
        html
    }

    fn text_output(&mut self) -> &[u8] {
        // Its diagnoses section is written on finish; into a Vec that cannot fail.
        let _ = self.text.finish();
        self.text.get_ref()
    }
}

impl<W: Write> EventSink for HtmlReportSink<W> {
    fn event(&mut self, e: &Event) -> Result<(), SinkError> {
        self.observe(e);
        if matches!(present(e), Presentation::Line(_)) {
            let rows = self.rows_for(e);
            self.push_rows(rows);
        }
        self.text_line(|t| t.event(e))
    }

    fn begin_span(&mut self, call: &Event) -> Result<(), SinkError> {
        self.observe(call);
        let mut rows = self.rows_for(call);
        // The result row waits for the events inside the call.
        if let Some(end) = rows.pop().filter(|r| matches!(r.mark, Mark::CallEnd(_))) {
            if let Some(previous) = self.open_call_end.replace(end) {
                rows.insert(0, previous);
            }
        }
        self.push_rows(rows);
        self.text_line(|t| t.begin_span(call))
    }

    fn end_span(&mut self) -> Result<(), SinkError> {
        if let Some(end) = self.open_call_end.take() {
            self.push_rows(vec![end]);
        }
        self.text.end_span()
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        if std::mem::replace(&mut self.finished, true) {
            return Ok(());
        }
        let html = self.render();
        self.out
            .write_all(html.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|source| SinkError::Io {
                what: self.name.clone(),
                source,
            })
    }
}

#[cfg(test)]
mod tests;
