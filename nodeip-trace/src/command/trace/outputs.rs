//! A trace's outputs: opened before anything is attached (kept only once the trace starts),
//! and the fan-out that writes each item to all of them, closing one that fails while the
//! others go on.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::model::emitted::Emitted;
use crate::model::event::Event;
use crate::model::netlink::MessageDetail;
use crate::sink::json::JsonLinesSink;
use crate::sink::limit::{CountingWriter, LimitedRecords, SizeLimitedSink};
use crate::sink::{timeline_sink, EventSink, OutputFormat, SinkError};

use super::{TraceError, TraceOptions};

/// One output, and what to do when it fails.
pub(super) struct SinkSlot {
    pub(super) sink: Box<dyn EventSink>,
    /// A JSON-lines file: cut back to its last complete line if a write fails (disk full).
    pub(super) recording: Option<PathBuf>,
    /// Closed by a write error.
    pub(super) closed: bool,
    /// That error, its kind kept (taken when it stops the trace).
    pub(super) failed: Option<SinkError>,
}

/// The outputs of a trace. One that fails (disk full, closed pipe) is closed and said on stderr;
/// the trace goes on with the others, and stops only when none is left.
pub(super) struct Sinks {
    pub(super) slots: Vec<SinkSlot>,
    /// Events written, by kind, in the order kinds first came (a handful: a short list whose
    /// `&'static str` keys compare by address first beats a map).
    pub(super) counts: Vec<(&'static str, u64)>,
    /// Netlink buffers written out as frames.
    pub(super) frames: u64,
    /// `--max-output-mib` in bytes.
    pub(super) max_output_bytes: Option<u64>,
    /// Records dropped by each size-limited output (name, count).
    pub(super) dropped: Vec<(String, Arc<AtomicU64>)>,
}

/// Bytes a file output collects before each write(2): with 8 KiB, a 100,000-pair burst's
/// 280 MB of JSON took 35,000 writes, and ext4 spent a sixth of the consumer's CPU in them.
pub(super) const FILE_BUFFER_BYTES: usize = 256 << 10;

/// The buffer of a size-limited file output: the limit is seen once a buffer is written out,
/// so it may be passed by this much.
pub(super) const LIMITED_FILE_BUFFER_BYTES: usize = 8 << 10;

impl Sinks {
    /// A file output's writer, the count of the bytes it has written to the file when outputs
    /// are size-limited, and how many bytes to collect before each write(2): the limit is seen
    /// as a buffer is written out, so a limited output buffers 8 KiB
    /// ([`LIMITED_FILE_BUFFER_BYTES`]); others [`FILE_BUFFER_BYTES`].
    pub(super) fn file_destination(
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
    pub(super) fn file_writer(
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
    pub(super) fn add_file(
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
    pub(super) fn dropped_at_limit(&self) -> Vec<(String, u64)> {
        self.dropped
            .iter()
            .map(|(name, n)| (name.clone(), n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    pub(super) fn add(&mut self, sink: Box<dyn EventSink>, recording: Option<PathBuf>) {
        self.slots.push(SinkSlot {
            sink,
            recording,
            closed: false,
            failed: None,
        });
    }

    /// Runs `op` on every open output; closes those that fail. Errs only when all have failed.
    pub(super) fn each(
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
                    let _ = crate::sink::output_file::cut_to_last_line(path);
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

    pub(super) fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
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
    pub(super) fn write_meta(&mut self, event: &Event) -> Result<(), SinkError> {
        let item = Emitted::Event(Box::new(event.clone()));
        self.each(|s| s.write(&item))
    }

    pub(super) fn flush(&mut self) -> Result<(), SinkError> {
        self.each(|s| s.flush())
    }

    pub(super) fn finish(&mut self) -> Result<(), SinkError> {
        self.each(|s| s.finish())
    }

    /// The most any output reads of a netlink message (none: [`MessageDetail::Shown`]).
    pub(super) fn detail(&self) -> MessageDetail {
        let each = self.slots.iter().map(|slot| slot.sink.detail());
        each.max().unwrap_or(MessageDetail::Shown)
    }

    /// Whether any output reads events (see [`EventSink::reads_events`]).
    pub(super) fn reads_events(&self) -> bool {
        self.slots.iter().any(|slot| slot.sink.reads_events())
    }

    /// The errors that closed outputs, taken.
    pub(super) fn take_failures(&mut self) -> Vec<SinkError> {
        self.slots
            .iter_mut()
            .filter_map(|s| s.failed.take())
            .collect()
    }
}

/// A pcap writer, and the count of its bytes when file outputs are size-limited.
pub(super) type PcapOutput = (
    Box<dyn crate::sink::pcap::FrameSink>,
    Option<Arc<AtomicU64>>,
);

/// Opens a pcap (or pcapng) writer on a file, or stdout for `-` (flushed per frame, never
/// size-limited).
pub(super) fn pcap_writer(
    sinks: &Sinks,
    files: &mut UnstartedOutputs,
    path: &std::path::Path,
    pcapng: bool,
) -> Result<PcapOutput, TraceError> {
    use crate::sink::pcap::{NlmonPcapngWriter, NlmonWriter, SectionInfo};
    let to_stdout = path.as_os_str() == "-";
    let (out, written): (Box<dyn Write>, _) = if to_stdout {
        (Box::new(std::io::stdout()), None)
    } else {
        let file = files.create(path)?;
        let (out, written) = sinks.file_writer(file);
        (Box::new(out), written)
    };
    let err = |source: crate::sink::pcap::PcapError| {
        TraceError::Sink(SinkError::Pcap {
            what: path.display().to_string(),
            source,
        })
    };
    let writer: Box<dyn crate::sink::pcap::FrameSink> = if pcapng {
        Box::new(
            NlmonPcapngWriter::new(out, &SectionInfo::from_host())
                .map_err(err)?
                .with_namespaces(Box::new(crate::host::kernel_dump::ProcInterfaceDirectory))
                .flush_each_frame(to_stdout),
        )
    } else {
        Box::new(
            NlmonWriter::new(out)
                .map_err(err)?
                .flush_each_frame(to_stdout),
        )
    };
    Ok((writer, written))
}

/// The output files of a trace, opened before anything is attached, kept only once it has
/// started. A failed start (probes refused, the command not found) leaves no empty recording or
/// pcap behind to be taken for a trace of nothing, and takes nothing away: an output that was
/// already a regular file is written to a copy beside it ([`crate::sink::output_file::beside`]), which
/// replaces it when the trace starts, so the earlier recording survives a failed start whole.
pub(super) struct UnstartedOutputs {
    /// Files this trace made: removed unless it starts.
    pub(super) made: Vec<std::path::PathBuf>,
    /// Copies beside existing files, and the file each replaces when the trace starts.
    pub(super) replacing: Vec<(std::path::PathBuf, std::path::PathBuf)>,
}

impl UnstartedOutputs {
    /// No output opened yet.
    pub(super) fn new() -> Self {
        Self {
            made: Vec::new(),
            replacing: Vec::new(),
        }
    }

    /// Opens the output file `path` for writing (owner-only, [`crate::sink::output_file::create_private`]):
    /// a new file, or a copy beside an existing regular one (through a symbolic link, beside
    /// its target, which the link keeps naming). Where no copy can be made beside it (a
    /// directory this process may not write), the file itself is truncated, as before.
    pub(super) fn create(&mut self, path: &std::path::Path) -> Result<std::fs::File, TraceError> {
        let fail = |source| TraceError::Create {
            path: path.to_path_buf(),
            source,
        };
        let existing = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| Some((m, std::fs::canonicalize(path).ok()?)));
        if let Some((metadata, target)) = existing {
            let copy = crate::sink::output_file::beside(&target, "unstarted");
            // A copy left by a tracer that was killed before it started (same pid, later boot).
            let _ = std::fs::remove_file(&copy);
            if let Ok(file) = crate::sink::output_file::create_private_new(&copy) {
                // The copy keeps the owner of the file it replaces, as truncating that file in
                // place did (its mode is narrowed to 0600 either way). Best effort: a file
                // system without owners refuses, and the output is still written.
                use std::os::unix::fs::MetadataExt as _;
                let _ =
                    std::os::unix::fs::fchown(&file, Some(metadata.uid()), Some(metadata.gid()));
                self.replacing.push((copy, target));
                return Ok(file);
            }
            return crate::sink::output_file::create_private(path).map_err(fail);
        }
        let is_new = std::fs::symlink_metadata(path).is_err();
        let file = crate::sink::output_file::create_private(path).map_err(fail)?;
        if is_new {
            self.made.push(path.to_path_buf());
        }
        Ok(file)
    }

    /// The trace started: its outputs stay, each copy replacing the file it was made beside.
    pub(super) fn started(mut self) -> Result<(), TraceError> {
        self.made.clear();
        for (copy, target) in std::mem::take(&mut self.replacing) {
            if let Err(source) = std::fs::rename(&copy, &target) {
                let _ = std::fs::remove_file(&copy);
                return Err(TraceError::Create {
                    path: target,
                    source,
                });
            }
        }
        Ok(())
    }
}

impl Drop for UnstartedOutputs {
    fn drop(&mut self) {
        for path in &self.made {
            let _ = std::fs::remove_file(path);
        }
        for (copy, _) in &self.replacing {
            let _ = std::fs::remove_file(copy);
        }
    }
}

/// The outputs a trace writes, opened before anything is attached: what they read decides
/// which hooks are worth attaching (a plain pcap alone needs the netlink capture only). Also
/// whether stdout carries machine output (a traced command's stdout then goes to stderr), and
/// the generic-netlink families known up front (id → name).
pub(super) fn open_sinks(
    opts: &TraceOptions,
    files: &mut UnstartedOutputs,
) -> Result<(Sinks, bool, BTreeMap<u16, String>), TraceError> {
    let stdout_machine = opts.format.is_some_and(|f| f != OutputFormat::Text)
        || opts.pcap.as_deref() == Some(std::path::Path::new("-"))
        || opts.pcapng.as_deref() == Some(std::path::Path::new("-"));
    let mut sinks = Sinks {
        slots: Vec::new(),
        counts: Vec::new(),
        frames: 0,
        max_output_bytes: opts.max_output_bytes,
        dropped: Vec::new(),
    };
    // Buffered, flushed after each batch of records (a line-buffered stdout made one write per
    // event: a third of the tracer's time under load).
    if let Some(format) = opts.format {
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout());
        sinks.add(timeline_sink(format, out, "stdout", false), None);
    }
    if let Some(path) = &opts.output {
        let file = files.create(path)?;
        // The sink collects its lines itself and writes them in one call: no `BufWriter`.
        let (out, written, write_size) = sinks.file_destination(file);
        let name = path.display().to_string();
        sinks.add_file(
            Box::new(JsonLinesSink::new(out, name.clone(), false).with_write_size(write_size)),
            LimitedRecords::Events,
            name,
            written,
            Some(path.clone()),
        );
    }
    if let Some(path) = &opts.report {
        let file = files.create(path)?;
        sinks.add(
            Box::new(
                crate::sink::html::HtmlReportSink::new(
                    std::io::BufWriter::new(file),
                    path.display().to_string(),
                )
                .with_source("a live trace"),
            ),
            None,
        );
    }
    let mut families = crate::host::kernel_dump::genl_families();
    families.extend(opts.genl_families.iter().cloned());
    if let Some(path) = &opts.pcap {
        let (writer, written) = pcap_writer(&sinks, files, path, false)?;
        let name = path.display().to_string();
        sinks.add_file(
            Box::new(crate::sink::FrameSinkAdapter::new(
                writer,
                name.clone(),
                families.clone(),
            )),
            LimitedRecords::Frames,
            name,
            written,
            None,
        );
    }
    if let Some(path) = &opts.pcapng {
        let (writer, written) = pcap_writer(&sinks, files, path, true)?;
        let name = path.display().to_string();
        sinks.add_file(
            Box::new(
                crate::sink::FrameSinkAdapter::new(writer, name.clone(), families.clone())
                    .with_section_comments(crate::sink::pcap::SectionComments::for_output(path))
                    .with_closing_comment(Box::new(crate::command::explain::node_audit_summary)),
            ),
            LimitedRecords::Frames,
            name,
            written,
            None,
        );
    }
    Ok((sinks, stdout_machine, families))
}
