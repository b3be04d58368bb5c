//! JSON lines: one [`Event`](crate::event::Event) per line, the schema in docs/events.md.
use std::io::Write;

use super::{EventSink, SinkError};
use crate::correlate::Emitted;
use crate::event::Event;

/// Writes events as JSON lines.
pub struct JsonLinesSink<W: Write> {
    out: W,
    name: String,
    flush_each: bool,
}

impl<W: Write> JsonLinesSink<W> {
    /// A sink writing to `out`; `name` appears in error messages; `flush_each` flushes per line
    /// (for terminals and pipes).
    pub fn new(out: W, name: impl Into<String>, flush_each: bool) -> Self {
        Self {
            out,
            name: name.into(),
            flush_each,
        }
    }

    /// Writes one event.
    pub fn write_event(&mut self, event: &Event) -> Result<(), SinkError> {
        let io = |source| SinkError::Io {
            what: self.name.clone(),
            source,
        };
        serde_json::to_writer(&mut self.out, event)?;
        self.out.write_all(b"\n").map_err(io)?;
        if self.flush_each {
            self.out.flush().map_err(|source| SinkError::Io {
                what: self.name.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

impl<W: Write> EventSink for JsonLinesSink<W> {
    fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        match item {
            Emitted::Event(e) => self.write_event(e),
            Emitted::Frame(_) => Ok(()),
        }
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.out.flush().map_err(|source| SinkError::Io {
            what: self.name.clone(),
            source,
        })
    }
}
