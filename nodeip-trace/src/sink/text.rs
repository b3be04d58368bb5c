//! The human timeline: one line per event, what a person needs to see — time, process, what it
//! asked and what it got. Events that happened inside a getaddrinfo call are indented under it.
//! The address changes asked for during the trace, then the diagnoses, are printed at the end. Each line's words are the view's
//! ([`super::view::wording`]).
use std::io::Write;

use super::view::wording::{render_why, write_event};
use super::view::{address_ledger_text, diagnosis_text, present, Presentation};
use super::{EventSink, SinkError};
use crate::explain::address_ledger::AddressLedger;
use crate::model::event::{Event, EventBody};
use crate::model::netlink::MessageDetail;

/// Renders the timeline as text.
pub struct TextTimelineSink<W: Write> {
    out: W,
    name: String,
    /// Inside a resolver call's span: its events are shown nested under the call.
    in_span: bool,
    diagnoses: Vec<String>,
    /// Address changes asked for during the trace, listed at the end.
    ledger: AddressLedger,
    flush_each: bool,
}

impl<W: Write> TextTimelineSink<W> {
    /// A timeline writer; `name` is used in error messages.
    pub fn new(out: W, name: impl Into<String>, flush_each: bool) -> Self {
        Self {
            out,
            name: name.into(),
            in_span: false,
            diagnoses: Vec::new(),
            ledger: AddressLedger::new(),
            flush_each,
        }
    }

    /// What was written so far.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    fn io(&self, source: std::io::Error) -> SinkError {
        SinkError::Io {
            what: self.name.clone(),
            source,
        }
    }
}

impl<W: Write> EventSink for TextTimelineSink<W> {
    fn flush(&mut self) -> Result<(), SinkError> {
        self.out.flush().map_err(|s| self.io(s))
    }

    /// A line per event shows named fields, never the attributes kept raw.
    fn detail(&self) -> MessageDetail {
        MessageDetail::Shown
    }

    fn event(&mut self, e: &Event) -> Result<(), SinkError> {
        self.ledger.observe(e);
        match present(e) {
            Presentation::Hidden => return Ok(()),
            Presentation::Diagnosis(d) => {
                self.diagnoses.push(diagnosis_text(d));
                return Ok(());
            }
            Presentation::Line(_) => {}
        }
        let prefix = if self.in_span { "    │ " } else { "" };
        self.out
            .write_all(prefix.as_bytes())
            .and_then(|()| write_event(&mut self.out, e))
            .and_then(|()| self.out.write_all(b"\n"))
            .map_err(|s| self.io(s))?;
        if let EventBody::Getaddrinfo(c) = &e.body {
            for why in c.why.iter().flat_map(|w| render_why(c.resolver, w)) {
                writeln!(self.out, "    ≡ {why}").map_err(|s| self.io(s))?;
            }
        }
        if self.flush_each {
            self.out.flush().map_err(|s| self.io(s))?;
        }
        Ok(())
    }

    fn begin_span(&mut self, call: &Event) -> Result<(), SinkError> {
        self.event(call)?;
        self.in_span = true;
        Ok(())
    }

    fn end_span(&mut self) -> Result<(), SinkError> {
        self.in_span = false;
        Ok(())
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        let ledger = address_ledger_text(&self.ledger);
        self.out
            .write_all(ledger.as_bytes())
            .map_err(|s| self.io(s))?;
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
