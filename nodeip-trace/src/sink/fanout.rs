//! The fan-out of a live trace's outputs: each frame and event goes to every output; one that
//! fails (disk full, a closed pipe) is closed and said on stderr while the others go on, and
//! the trace stops only when none is left. Counts what was written, by kind.
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::limit::{CountingWriter, LimitedRecords, SizeLimitedSink};
use super::{EventSink, SinkError};
use crate::model::emitted::Emitted;
use crate::model::event::Event;
use crate::model::netlink::MessageDetail;

/// One output, and what to do when it fails.
struct SinkSlot {
    /// The output.
    sink: Box<dyn EventSink>,
    /// A JSON-lines file: cut back to its last complete line if a write fails (disk full).
    recording: Option<PathBuf>,
    /// Closed by a write error.
    closed: bool,
    /// That error, its kind kept (taken when it stops the trace).
    failed: Option<SinkError>,
}

/// The outputs of a trace. One that fails (disk full, closed pipe) is closed and said on stderr;
/// the trace goes on with the others, and stops only when none is left.
pub struct Sinks {
    slots: Vec<SinkSlot>,
    /// Events written, by kind, in the order kinds first came (a handful: a short list whose
    /// `&'static str` keys compare by address first beats a map).
    pub counts: Vec<(&'static str, u64)>,
    /// Netlink buffers written out as frames.
    pub frames: u64,
    /// `--max-output-mib` in bytes.
    pub max_output_bytes: Option<u64>,
    /// Records dropped by each size-limited output (name, count).
    pub dropped: Vec<(String, Arc<AtomicU64>)>,
}

/// Bytes a file output collects before each write(2): with 8 KiB, a 100,000-pair burst's
/// 280 MB of JSON took 35,000 writes, and ext4 spent a sixth of the consumer's CPU in them.
pub const FILE_BUFFER_BYTES: usize = 256 << 10;

/// The buffer of a size-limited file output: the limit is seen once a buffer is written out,
/// so it may be passed by this much.
pub const LIMITED_FILE_BUFFER_BYTES: usize = 8 << 10;

impl Sinks {
    /// No output yet; `max_output_bytes` is `--max-output-mib` in bytes.
    pub fn new(max_output_bytes: Option<u64>) -> Self {
        Sinks {
            slots: Vec::new(),
            counts: Vec::new(),
            frames: 0,
            max_output_bytes,
            dropped: Vec::new(),
        }
    }

    /// A file output's writer, the count of the bytes it has written to the file when outputs
    /// are size-limited, and how many bytes to collect before each write(2): the limit is seen
    /// as a buffer is written out, so a limited output buffers 8 KiB
    /// ([`LIMITED_FILE_BUFFER_BYTES`]); others [`FILE_BUFFER_BYTES`].
    pub fn file_destination(
        &self,
        file: std::fs::File,
    ) -> (CountingWriter<std::fs::File>, Option<Arc<AtomicU64>>, usize) {
        let written = self.max_output_bytes.map(|_| Arc::new(AtomicU64::new(0)));
        let buffer = if written.is_some() {
            LIMITED_FILE_BUFFER_BYTES
        } else {
            FILE_BUFFER_BYTES
        };
        (CountingWriter::new(file, written.clone()), written, buffer)
    }

    /// A file output's [`Sinks::file_destination`] behind a `BufWriter` of its buffer size.
    pub fn file_writer(
        &self,
        file: std::fs::File,
    ) -> (
        std::io::BufWriter<CountingWriter<std::fs::File>>,
        Option<Arc<AtomicU64>>,
    ) {
        let (out, written, buffer) = self.file_destination(file);
        (std::io::BufWriter::with_capacity(buffer, out), written)
    }

    /// Adds a file output, size-limited when its writer counted (see [`Sinks::file_writer`]).
    pub fn add_file(
        &mut self,
        sink: Box<dyn EventSink>,
        records: LimitedRecords,
        name: String,
        written: Option<Arc<AtomicU64>>,
        recording: Option<PathBuf>,
    ) {
        let sink = match (written, self.max_output_bytes) {
            (Some(written), Some(limit)) => {
                let limited = SizeLimitedSink::new(sink, records, name.clone(), written, limit);
                self.dropped.push((name, limited.dropped_counter()));
                Box::new(limited)
            }
            _ => sink,
        };
        self.add(sink, recording);
    }

    /// Records the size-limited outputs dropped, by output.
    pub fn dropped_at_limit(&self) -> Vec<(String, u64)> {
        self.dropped
            .iter()
            .map(|(name, n)| (name.clone(), n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Adds an output; a `recording` (JSON-lines file) is cut back to its last whole line when
    /// a write to it fails.
    pub fn add(&mut self, sink: Box<dyn EventSink>, recording: Option<PathBuf>) {
        self.slots.push(SinkSlot {
            sink,
            recording,
            closed: false,
            failed: None,
        });
    }

    /// Runs `op` on every open output; closes those that fail. Errs only when all have failed.
    pub fn each(
        &mut self,
        mut op: impl FnMut(&mut dyn EventSink) -> Result<(), SinkError>,
    ) -> Result<(), SinkError> {
        let mut last_failed = None;
        for (i, slot) in self.slots.iter_mut().enumerate().filter(|(_, s)| !s.closed) {
            if let Err(e) = op(slot.sink.as_mut()) {
                if !e.is_broken_pipe() {
                    crate::message::note(format_args!(
                        "nodeip-trace: {e}; that output is closed, the trace goes on"
                    ));
                }
                if let Some(path) = &slot.recording {
                    let _ = super::output_file::cut_to_last_line(path);
                }
                slot.closed = true;
                slot.failed = Some(e);
                last_failed = Some(i);
            }
        }
        // None left: the trace stops with the error that closed the last one.
        match last_failed {
            Some(i) if self.slots.iter().all(|s| s.closed) => {
                Err(self.slots[i].failed.take().expect("just failed"))
            }
            _ => Ok(()),
        }
    }

    /// Writes a frame or an event to every open output, counting it.
    pub fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        // Every event counts, a resolver call opening its span included.
        match item {
            Emitted::Frame(_) => self.frames += 1,
            _ => {
                if let Some(e) = item.event() {
                    let kind = e.body.kind();
                    match self
                        .counts
                        .iter_mut()
                        .find(|(k, _)| std::ptr::eq(*k, kind) || *k == kind)
                    {
                        Some((_, n)) => *n += 1,
                        None => self.counts.push((kind, 1)),
                    }
                }
            }
        }
        self.each(|s| s.write(item))
    }

    /// Writes a header or summary (not counted as an event).
    pub fn write_meta(&mut self, event: &Event) -> Result<(), SinkError> {
        let item = Emitted::Event(Box::new(event.clone()));
        self.each(|s| s.write(&item))
    }

    /// Flushes every open output.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        self.each(|s| s.flush())
    }

    /// Ends every open output (a timeline's diagnoses, a report's page).
    pub fn finish(&mut self) -> Result<(), SinkError> {
        self.each(|s| s.finish())
    }

    /// The most any output reads of a netlink message (none: [`MessageDetail::Shown`]).
    pub fn detail(&self) -> MessageDetail {
        let each = self.slots.iter().map(|slot| slot.sink.detail());
        each.max().unwrap_or(MessageDetail::Shown)
    }

    /// Whether any output reads events (see [`EventSink::reads_events`]).
    pub fn reads_events(&self) -> bool {
        self.slots.iter().any(|slot| slot.sink.reads_events())
    }

    /// The errors that closed outputs, taken.
    pub fn take_failures(&mut self) -> Vec<SinkError> {
        self.slots
            .iter_mut()
            .filter_map(|s| s.failed.take())
            .collect()
    }
}
