//! sink: where timeline events and netlink frames go — the text timeline ([`text`]), JSON lines
//! ([`json`]) and nlmon-compatible pcap/pcapng ([`pcap`]). Every sink implements [`EventSink`]
//! over an `impl Write` and receives the stream's structure as calls (frames, events, resolver
//! spans); enrichment happens before sinks, never inside them. [`OutputFormat`] is the one
//! format switch of every command: [`timeline_sink`] opens the timeline sinks, [`write_report`]
//! writes one-shot reports. What people see is decided once, in [`view`]; a new output format is
//! one new file here and one arm in [`OutputFormat`]. [`limit`] caps a file output's size.
pub mod fanout;
pub mod html;
pub mod json;
pub mod limit;
pub mod node_audit_text;
pub mod output_file;
pub mod pcap;
pub mod perfetto;
pub mod text;
pub mod view;

use crate::model::emitted::Emitted;
use crate::model::event::{Event, EventBody};
use crate::model::frame::NetlinkFrame;
use crate::model::netlink::{MessageDetail, GENL_ID_CTRL, NETLINK_GENERIC};

/// The output-format switch of the timeline commands (trace, analyze, replay, report):
/// `--format text|json|html` (one-shot reports of doctor and explain take [`ReportFormat`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// Human-readable: the text timeline, or a report as text.
    #[default]
    Text,
    /// JSON: one object per line for timelines (schema: docs/events.md); one object for reports.
    Json,
    /// The postmortem report: one self-contained HTML page (swimlane picture, diagnoses, address
    /// audit, each resolver call's rules), written when the stream ends.
    Html,
    /// Perfetto / Chrome trace-event JSON (one object; open it in ui.perfetto.dev): processes and
    /// threads, calls and conversations as slices, request→reply flows, a kernel track, diagnoses
    /// as global instants (docs/perfetto.md).
    Perfetto,
}

/// The timeline sink of `format` writing to `out` (named `name` in errors); `flush_each` pushes
/// every event out at once (interactive use), else output is flushed by [`EventSink::flush`].
pub fn timeline_sink<W: std::io::Write + 'static>(
    format: OutputFormat,
    out: W,
    name: &str,
    flush_each: bool,
) -> Box<dyn EventSink> {
    match format {
        OutputFormat::Text => Box::new(text::TextTimelineSink::new(out, name, flush_each)),
        OutputFormat::Json => Box::new(json::JsonLinesSink::new(out, name, flush_each)),
        OutputFormat::Html => Box::new(html::HtmlReportSink::new(out, name)),
        OutputFormat::Perfetto => Box::new(perfetto::PerfettoSink::new(out, name, flush_each)),
    }
}

/// The output-format switch of one-shot reports (doctor, explain): `--format text|json`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    /// Human-readable text.
    #[default]
    Text,
    /// One pretty-printed JSON object.
    Json,
}

/// Writes a one-shot report (doctor's, explain's): `render_text` for text, pretty JSON for JSON.
pub fn write_report<T: serde::Serialize>(
    format: ReportFormat,
    report: &T,
    render_text: impl FnOnce(&T) -> String,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    match format {
        ReportFormat::Text => out.write_all(render_text(report).as_bytes())?,
        ReportFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, report)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()
}

/// Errors of the sink layer.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// Writing failed.
    #[error("writing {what} failed: {source}")]
    Io {
        /// Which output.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Serializing an event failed.
    #[error("serializing an event to JSON failed: {0}")]
    Json(#[from] serde_json::Error),
    /// Writing a capture failed (the pcap writer's error, kind kept).
    #[error("writing {what} failed: {source}")]
    Pcap {
        /// Which output.
        what: String,
        /// The writer's error.
        #[source]
        source: pcap::PcapError,
    },
}

impl SinkError {
    /// Whether this is a closed pipe (the reader went away: not an error for a CLI).
    pub fn is_broken_pipe(&self) -> bool {
        let kind = match self {
            SinkError::Io { source, .. } => Some(source.kind()),
            // serde_json writes straight into the output, so its errors carry the write's.
            SinkError::Json(e) => e.io_error_kind(),
            SinkError::Pcap { source, .. } => return source.is_broken_pipe(),
        };
        kind == Some(std::io::ErrorKind::BrokenPipe)
    }
}

/// A consumer of the pipeline's output. The stream's structure arrives as calls: frames, events,
/// and each resolver call as `begin_span` (its event), what happened inside it, `end_span`.
/// Every method but [`EventSink::write`]'s dispatch defaults to doing nothing, so a sink
/// implements only what it shows.
pub trait EventSink {
    /// A whole netlink buffer, in capture order.
    fn frame(&mut self, _frame: &NetlinkFrame) -> Result<(), SinkError> {
        Ok(())
    }
    /// A timeline event.
    fn event(&mut self, _event: &Event) -> Result<(), SinkError> {
        Ok(())
    }
    /// A resolver call's event; what follows until [`EventSink::end_span`] happened inside it.
    fn begin_span(&mut self, call: &Event) -> Result<(), SinkError> {
        self.event(call)
    }
    /// The end of the span [`EventSink::begin_span`] opened.
    fn end_span(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// Takes one item of the stream and makes the matching call.
    fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        match item {
            Emitted::Frame(f) => self.frame(f),
            Emitted::Event(e) => self.event(e),
            Emitted::SpanBegin(e) => self.begin_span(e),
            Emitted::SpanEnd => self.end_span(),
        }
    }
    /// Flushes and writes any trailer.
    fn finish(&mut self) -> Result<(), SinkError>;
    /// Pushes buffered output out (live tracing calls it after each batch of records, so
    /// buffered sinks write in batches yet stay current).
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
    /// How much of each netlink message this sink reads: the decoder keeps no more than the
    /// sinks it feeds read ([`MessageDetail::Full`] unless a sink says less).
    fn detail(&self) -> MessageDetail {
        MessageDetail::Full
    }
    /// Whether this sink reads events at all: when no sink does (a plain pcap file alone), the
    /// pipeline makes frames only.
    fn reads_events(&self) -> bool {
        true
    }
}

/// Adapts a pcap/pcapng [`pcap::FrameSink`] to [`EventSink`]: frames are written, events ignored.
/// Before the first frame of a generic-netlink family it writes a synthetic nlctrl NEWFAMILY frame
/// (when the family's name is known) so Wireshark names the family.
///
/// Diagnoses and the run's summary, known only at the end, are kept for the capture's section
/// header ([`pcap::SectionComments`]): rewritten into a regular pcapng file when it finishes,
/// or, for a stream, named in a note on stderr.
pub struct FrameSinkAdapter {
    inner: Box<dyn pcap::FrameSink>,
    name: String,
    families: std::collections::BTreeMap<u16, String>,
    announced: std::collections::BTreeSet<u16>,
    section: pcap::SectionComments,
    diagnoses: Vec<String>,
    summary: Option<String>,
    /// Makes one more section comment when the capture ends (the node address audit).
    closing: Option<ClosingComment>,
}

/// Makes a section comment when a capture ends; `None` when there is nothing to say.
pub type ClosingComment = Box<dyn FnOnce() -> Option<String>>;

impl FrameSinkAdapter {
    /// Wraps `inner`; `families` are generic-netlink family ids known up front (id → name).
    pub fn new(
        inner: Box<dyn pcap::FrameSink>,
        name: impl Into<String>,
        families: std::collections::BTreeMap<u16, String>,
    ) -> Self {
        Self {
            inner,
            name: name.into(),
            families,
            announced: Default::default(),
            section: pcap::SectionComments::Dropped,
            diagnoses: Vec::new(),
            summary: None,
            closing: None,
        }
    }

    /// One more section comment, made when the capture ends and only if it is rewritten (the
    /// caller's, e.g. the node address audit at that moment).
    pub fn with_closing_comment(mut self, closing: ClosingComment) -> Self {
        self.closing = Some(closing);
        self
    }

    /// Where the diagnoses go when the capture ends (default: nowhere, as in classic pcap).
    pub fn with_section_comments(mut self, section: pcap::SectionComments) -> Self {
        self.section = section;
        self
    }

    /// The section comments a finished trace adds: how many diagnoses, each, the summary, the
    /// closing comment.
    fn section_comments(&mut self) -> Vec<String> {
        let count = match self.diagnoses.len() {
            0 => "no diagnosis".to_owned(),
            1 => "1 diagnosis (the next comment)".to_owned(),
            n => format!("{n} diagnoses (the next comments)"),
        };
        let mut comments = vec![format!("nodeip-trace at the end of the trace: {count}")];
        comments.extend(self.diagnoses.iter().cloned());
        comments.extend(self.summary.clone());
        comments.extend(self.closing.take().and_then(|make| make()));
        comments
    }

    fn pcap_err(&self, source: pcap::PcapError) -> SinkError {
        SinkError::Pcap {
            what: self.name.clone(),
            source,
        }
    }
}

impl EventSink for FrameSinkAdapter {
    fn frame(&mut self, frame: &NetlinkFrame) -> Result<(), SinkError> {
        if frame.protocol == NETLINK_GENERIC && frame.bytes.len() >= 6 {
            let family = u16::from_ne_bytes([frame.bytes[4], frame.bytes[5]]);
            if family > GENL_ID_CTRL && self.announced.insert(family) {
                if let Some(name) = self.families.get(&family).cloned() {
                    self.inner
                        .write_genl_family(family, &name, frame.wall_ns)
                        .map_err(|e| self.pcap_err(e))?;
                }
            }
        }
        self.inner.write_frame(frame).map_err(|e| self.pcap_err(e))
    }

    fn event(&mut self, event: &Event) -> Result<(), SinkError> {
        match &event.body {
            EventBody::Diagnosis(d) => {
                let text = view::diagnosis_text(d);
                self.diagnoses.push(text.trim_end().to_owned());
            }
            EventBody::Summary(s) => {
                let events: u64 = s.events.values().sum();
                self.summary = Some(format!(
                    "trace summary: {events} events {:?}, {} lost, stopped by {}",
                    s.events, s.lost, s.stopped_by
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// Pushes the frames out after each batch: a killed trace leaves a capture that reads to
    /// its last batch.
    fn flush(&mut self) -> Result<(), SinkError> {
        self.inner.flush().map_err(|e| self.pcap_err(e))
    }

    /// Frames are written as captured; of the events, only diagnoses and the summary are read.
    fn detail(&self) -> MessageDetail {
        MessageDetail::Shown
    }

    /// Only for the diagnoses and summary it writes as section comments (pcapng), or says are
    /// not in a stream; a plain pcap file has nowhere to put them and reads frames alone.
    fn reads_events(&self) -> bool {
        !matches!(self.section, pcap::SectionComments::Dropped) || self.closing.is_some()
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.inner.flush().map_err(|e| self.pcap_err(e))?;
        match &self.section {
            pcap::SectionComments::Dropped => Ok(()),
            pcap::SectionComments::Rewrite(path) => {
                let path = path.clone();
                let comments = self.section_comments();
                pcap::add_section_comments(&path, &comments).map_err(|e| self.pcap_err(e))
            }
            pcap::SectionComments::Stream if !self.diagnoses.is_empty() => {
                let n = self.diagnoses.len();
                crate::message::note(format_args!(
                    "nodeip-trace: note: {} is a stream whose section header went out first, so \
                     the {n} {} found at the end {} not in it (the text timeline shows \
                     them; a recording, -o FILE, or a pcapng file keeps them)",
                    if self.name == "-" {
                        "stdout"
                    } else {
                        &self.name
                    },
                    if n == 1 { "diagnosis" } else { "diagnoses" },
                    if n == 1 { "is" } else { "are" },
                ));
                Ok(())
            }
            pcap::SectionComments::Stream => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `analyze | head` reported "serializing an event to JSON failed: Broken pipe"
    /// because the JSON sink's write errors come wrapped in serde_json's error.
    #[test]
    fn a_closed_pipe_under_the_json_serializer_is_a_broken_pipe() {
        struct Closed;
        impl std::io::Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let error = SinkError::from(serde_json::to_writer(Closed, &1).unwrap_err());
        assert!(error.is_broken_pipe());
        let full = SinkError::Io {
            what: "out".into(),
            source: std::io::ErrorKind::WriteZero.into(),
        };
        assert!(!full.is_broken_pipe());
    }

    /// Regression: the pcap adapter flattened the writer's error into a string, so a closed
    /// pipe under `trace --pcap - | head` was no longer a broken pipe (exit 2 and an error).
    #[test]
    fn a_closed_pipe_under_a_pcap_writer_is_a_broken_pipe() {
        struct Closed;
        impl std::io::Write for Closed {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
        }
        let failing = pcap::NlmonWriter::new(Closed);
        let error = match failing {
            Err(source) => SinkError::Pcap {
                what: "stdout".into(),
                source,
            },
            Ok(_) => panic!("the header write should fail on a closed pipe"),
        };
        assert!(error.is_broken_pipe(), "{error:?}");
    }
}
