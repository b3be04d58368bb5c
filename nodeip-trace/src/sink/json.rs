//! JSON lines: one [`crate::model::event::Event`] per line, the schema in docs/events.md.
use std::io::Write;

use super::{EventSink, SinkError};
use crate::model::event::Event;

pub mod compact;

/// Writes events as JSON lines.
pub struct JsonLinesSink<W: Write> {
    out: W,
    name: String,
    flush_each: bool,
    /// The line being made (kept: its capacity is reused).
    line: Vec<u8>,
}

impl<W: Write> JsonLinesSink<W> {
    /// A sink writing to `out`; `name` appears in error messages; `flush_each` flushes per line
    /// (for terminals and pipes).
    pub fn new(out: W, name: impl Into<String>, flush_each: bool) -> Self {
        Self {
            out,
            name: name.into(),
            flush_each,
            line: Vec::new(),
        }
    }

    /// Writes one event.
    pub fn write_event(&mut self, event: &Event) -> Result<(), SinkError> {
        let io = |source| SinkError::Io {
            what: self.name.clone(),
            source,
        };
        self.line.clear();
        compact::append_json(event, &mut self.line)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line).map_err(io)?;
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
    fn flush(&mut self) -> Result<(), SinkError> {
        self.out.flush().map_err(|source| SinkError::Io {
            what: self.name.clone(),
            source,
        })
    }

    fn event(&mut self, event: &Event) -> Result<(), SinkError> {
        self.write_event(event)
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.out.flush().map_err(|source| SinkError::Io {
            what: self.name.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventBody;
    use crate::model::getaddrinfo::{AddrinfoResult, GetaddrinfoCall};

    /// The exact JSON line of a getaddrinfo event (the schema users parse).
    #[test]
    fn getaddrinfo_line_is_stable() {
        let call = GetaddrinfoCall {
            node: Some("node-a".into()),
            service: None,
            family: "AF_INET".into(),
            socktype: "ANY".into(),
            flags: vec!["AI_ADDRCONFIG".into()],
            ret: "OK".into(),
            ret_code: 0,
            addresses: vec!["172.18.45.20".into(), "172.18.45.6".into()],
            results: vec![AddrinfoResult {
                address: "172.18.45.20".into(),
                family: "AF_INET".into(),
                socktype: "SOCK_STREAM".into(),
                protocol: 6,
                port: 0,
            }],
            results_truncated: false,
            start_ns: 100,
            duration_ns: 50,
            during: 3,
            resolver: Default::default(),
            caller: None,
            limited: None,
            why: None,
        };
        let event = Event {
            ts: "2026-11-21T13:27:05.500000000Z".into(),
            ts_ns: 150,
            pid: 7,
            tid: 8,
            comm: "getent".into(),
            process: None,
            body: EventBody::Getaddrinfo(Box::new(call)),
        };
        let mut out = Vec::new();
        JsonLinesSink::new(&mut out, "memory", false)
            .write_event(&event)
            .unwrap();
        let golden = r#"{"ts":"2026-11-21T13:27:05.500000000Z","ts_ns":150,"pid":7,"tid":8,"comm":"getent","kind":"getaddrinfo","node":"node-a","service":null,"family":"AF_INET","socktype":"ANY","flags":["AI_ADDRCONFIG"],"ret":"OK","ret_code":0,"addresses":["172.18.45.20","172.18.45.6"],"results":[{"address":"172.18.45.20","family":"AF_INET","socktype":"SOCK_STREAM","protocol":6,"port":0}],"results_truncated":false,"start_ns":100,"duration_ns":50,"during":3}
"#;
        assert_eq!(String::from_utf8(out).unwrap(), golden);
        // And it reads back as the same event (replay depends on it).
        let back: Event = serde_json::from_str(golden.trim()).unwrap();
        assert_eq!(back, event);
    }
}
