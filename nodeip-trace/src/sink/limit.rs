//! `trace --max-output-mib`: a size limit on a file output, so a tracer left running (a
//! DaemonSet) cannot fill a node's disk. [`CountingWriter`] counts the bytes that reach the file;
//! [`SizeLimitedSink`] wraps the sink and, once the count reaches the limit, stops passing
//! records on: the record that crossed the limit is complete (records are never cut), later
//! ones are counted as dropped, and the run's header, losses and summary still pass, so the file
//! ends with a line (or, in pcapng, a section comment) saying how many records were dropped.
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::model::emitted::Emitted;
use crate::model::event::EventBody;
use crate::model::netlink::MessageDetail;
use crate::sink::{EventSink, SinkError};

/// A writer that counts the bytes written through it into a shared counter (or, without one,
/// only passes them on: one writer type whether outputs are limited or not).
pub struct CountingWriter<W> {
    inner: W,
    written: Option<Arc<AtomicU64>>,
}

impl<W: Write> CountingWriter<W> {
    /// Wraps `inner`, adding every byte written to `written` when given.
    pub fn new(inner: W, written: Option<Arc<AtomicU64>>) -> Self {
        Self { inner, written }
    }
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(written) = &self.written {
            written.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Which records a wrapped sink writes, and so which ones the limit drops and counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitedRecords {
    /// Timeline events (JSON lines, text): frames pass (the sink ignores them).
    Events,
    /// Netlink frames (pcap, pcapng): events pass (the sink keeps only what its section
    /// comments say: diagnoses, the summary).
    Frames,
}

/// A sink that stops taking records once its output has reached a size.
pub struct SizeLimitedSink {
    inner: Box<dyn EventSink>,
    records: LimitedRecords,
    name: String,
    written: Arc<AtomicU64>,
    limit: u64,
    dropped: Arc<AtomicU64>,
    /// Inside a resolver span whose opening record was dropped: its end is dropped too.
    dropping_span: bool,
}

impl SizeLimitedSink {
    /// Wraps `inner`, which writes `records`, and whose writer counts into `written` (a
    /// [`CountingWriter`]); `name` names the output in the note on stderr.
    pub fn new(
        inner: Box<dyn EventSink>,
        records: LimitedRecords,
        name: impl Into<String>,
        written: Arc<AtomicU64>,
        limit_bytes: u64,
    ) -> Self {
        Self {
            inner,
            records,
            name: name.into(),
            written,
            limit: limit_bytes,
            dropped: Arc::new(AtomicU64::new(0)),
            dropping_span: false,
        }
    }

    /// The count of records dropped so far, shared (read it after the run for the summary).
    pub fn dropped_counter(&self) -> Arc<AtomicU64> {
        self.dropped.clone()
    }

    fn full(&self) -> bool {
        self.written.load(Ordering::Relaxed) >= self.limit
    }

    fn drop_one(&mut self) {
        if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
            crate::message::note(format_args!(
                "nodeip-trace: {} reached --max-output-mib ({} bytes): later records are not written to it, and are counted as lost",
                self.name, self.limit
            ));
        }
    }
}

/// Whether an item is about the run rather than a record: always written.
fn is_run_meta(item: &Emitted) -> bool {
    matches!(
        item,
        Emitted::Event(e) if matches!(
            e.body,
            EventBody::Header(_) | EventBody::Lost(_) | EventBody::Summary(_)
        )
    )
}

impl EventSink for SizeLimitedSink {
    fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        let taken = match self.records {
            LimitedRecords::Events => !matches!(item, Emitted::Frame(_)),
            LimitedRecords::Frames => matches!(item, Emitted::Frame(_)),
        };
        if !taken || is_run_meta(item) {
            return self.inner.write(item);
        }
        match item {
            Emitted::SpanEnd if self.dropping_span => {
                self.dropping_span = false;
                Ok(())
            }
            _ if self.full() => {
                if matches!(item, Emitted::SpanBegin(_)) {
                    self.dropping_span = true;
                }
                // A span's end always follows its beginning, so an open span is closed.
                if matches!(item, Emitted::SpanEnd) {
                    return self.inner.write(item);
                }
                self.drop_one();
                Ok(())
            }
            _ => self.inner.write(item),
        }
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.inner.finish()
    }

    fn flush(&mut self) -> Result<(), SinkError> {
        self.inner.flush()
    }

    fn detail(&self) -> MessageDetail {
        self.inner.detail()
    }

    fn reads_events(&self) -> bool {
        self.inner.reads_events()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::{Event, LostReport};
    use crate::sink::json::JsonLinesSink;

    fn event(body: EventBody) -> Emitted {
        Emitted::Event(Box::new(Event {
            process: None,
            ts: "2026-11-25T00:00:00Z".into(),
            ts_ns: 1,
            pid: 7,
            tid: 7,
            comm: "x".into(),
            body,
        }))
    }

    fn lost(n: u64) -> EventBody {
        EventBody::Lost(LostReport {
            counts: [("output_limit_records_dropped".to_string(), n)].into(),
            lost: n,
        })
    }

    /// A record that is not run metadata: a resolver span's opening.
    fn record() -> Emitted {
        match event(lost(0)) {
            Emitted::Event(e) => Emitted::SpanBegin(e),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_limited_output_reads_as_much_of_a_message_as_the_output_it_limits() {
        let limited = |inner: Box<dyn EventSink>| {
            let written = Arc::new(AtomicU64::new(0));
            SizeLimitedSink::new(inner, LimitedRecords::Events, "out", written, 300).detail()
        };
        let text = crate::sink::text::TextTimelineSink::new(Vec::new(), "out", false);
        let json = JsonLinesSink::new(Vec::new(), "out", false);
        assert_eq!(text.detail(), MessageDetail::Shown);
        assert_eq!(limited(Box::new(text)), MessageDetail::Shown);
        assert_eq!(limited(Box::new(json)), MessageDetail::Full);
    }

    #[test]
    fn stops_after_the_record_that_crosses_the_limit_and_keeps_the_run_metadata() {
        let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let written = Arc::new(AtomicU64::new(0));
        let json = JsonLinesSink::new(
            CountingWriter::new(Shared(out.clone()), Some(written.clone())),
            "test.jsonl",
            false,
        );
        let mut sink = SizeLimitedSink::new(
            Box::new(json),
            LimitedRecords::Events,
            "test.jsonl",
            written.clone(),
            300,
        );
        let dropped = sink.dropped_counter();
        let mut passed = 0;
        for _ in 0..20 {
            let before = out.lock().unwrap().len();
            sink.write(&record()).unwrap();
            sink.write(&Emitted::SpanEnd).unwrap();
            if out.lock().unwrap().len() > before {
                passed += 1;
            }
        }
        assert!((1..20).contains(&passed), "{passed} records written");
        assert_eq!(dropped.load(Ordering::Relaxed), 20 - passed);
        // The final losses line passes the limit.
        sink.write(&event(lost(dropped.load(Ordering::Relaxed))))
            .unwrap();
        sink.finish().unwrap();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("every line is whole JSON"))
            .collect();
        assert_eq!(lines.len() as u64, passed + 1);
        let last = lines.last().unwrap();
        assert_eq!(last["kind"], "lost", "{last}");
        assert_eq!(
            last["counts"]["output_limit_records_dropped"],
            20 - passed,
            "{last}"
        );
        // Within one record of the limit.
        let record_len = text.lines().next().unwrap().len() as u64 + 1;
        assert!(written.load(Ordering::Relaxed) < 300 + 2 * record_len);
    }
}
