//! `nodeip-trace analyze FILE` (pcap/pcapng, ours or tcpdump's on nlmon0) and `nodeip-trace
//! replay FILE` (a JSON-lines recording): the same pipeline and sinks as live, offline, no root.
use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::decode::route_lookup::RouteLookupDecoder;
use crate::host::mapped_file::MappedFile;
use crate::model::clock::WallClock;
use crate::model::emitted::Emitted;
use crate::model::event::{Event, EventBody, OLDEST_READABLE_SCHEMA, SCHEMA_VERSION};
use crate::pipeline::Pipeline;
use crate::sink::text::TextTimelineSink;
use crate::sink::{timeline_sink, EventSink, OutputFormat, SinkError};
use crate::source::capture::mapped::{map_capture, MappedCaptureReader, ReleaseBehind};
use crate::source::capture::{
    pcap_frames_in_place, CaptureError, CaptureReader, CapturedFrame, FrameInPlace,
};

/// Errors of offline commands.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The input could not be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The capture is unreadable or malformed (what came before was reported).
    #[error("{path}: {source}")]
    Capture {
        /// The file.
        path: PathBuf,
        /// Where and what.
        source: CaptureError,
    },
    /// A recording could not be read (events before `line` were replayed).
    #[error("{path} line {line} (byte offset {offset}): reading failed: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// 1-based number of the line being read.
        line: usize,
        /// Byte offset of that line's start.
        offset: u64,
        /// The read error.
        source: std::io::Error,
    },
    /// A recording line is not an event (events before it were replayed).
    #[error(
        "{path} line {line} (byte offset {offset}): not a nodeip-trace event ({reason}); is this \
         a JSON-lines recording made with `trace --output`? Events before this line were replayed"
    )]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// Byte offset of the line's start.
        offset: u64,
        /// The JSON error.
        reason: String,
    },
    /// The recording's schema is not ours.
    #[error("{path} line {line}: event schema {found}, this nodeip-trace reads schemas {OLDEST_READABLE_SCHEMA} to {SCHEMA_VERSION}: use the nodeip-trace version that made it (its header says `tool_version`)")]
    Schema {
        /// The file.
        path: PathBuf,
        /// 1-based line number of the header.
        line: usize,
        /// The schema found.
        found: u32,
    },
    /// Output failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// Output buffer of analyze/replay: JSON lines run to several KiB, and the default 8 KiB
/// buffer made about one `write` per 4 KiB.
const STDOUT_BUFFER: usize = 256 << 10;

fn stdout_sink(format: OutputFormat) -> Box<dyn EventSink> {
    let out = std::io::BufWriter::with_capacity(STDOUT_BUFFER, std::io::stdout());
    timeline_sink(format, out, "stdout", false)
}

/// A decoding problem inside a frame the capture reader could read: the frame is still reported
/// (its `decode_errors` say the same), and this names where to look.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameWarning {
    /// 1-based frame number (Wireshark's numbering).
    pub frame: u64,
    /// Byte offset of the frame's record in the file.
    pub offset: u64,
    /// Byte offset of the frame's first netlink byte in the file; the problem's "at byte N" is
    /// relative to it.
    pub data_offset: u64,
    /// What the decoder found.
    pub problem: String,
}

impl std::fmt::Display for FrameWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "frame {} at byte offset {} (netlink data from byte offset {}): {}",
            self.frame, self.offset, self.data_offset, self.problem
        )
    }
}

/// Something `analyze` read past: a decoding problem inside a frame it kept, or a problem in the
/// capture's framing (an option ignored, a frame or stretch skipped).
#[derive(Debug)]
pub enum AnalyzeWarning {
    /// A decoding problem inside a frame that was kept.
    Decoding(FrameWarning),
    /// A problem in the capture itself: [`CaptureError::Skipped`] (a frame or stretch of the
    /// file skipped) or [`CaptureError::BadOption`] (options ignored, the block kept).
    Capture(CaptureError),
}

impl AnalyzeWarning {
    /// Whether something was skipped (a frame, or bytes of the file).
    pub fn skipped(&self) -> bool {
        matches!(self, AnalyzeWarning::Capture(CaptureError::Skipped { .. }))
    }
}

impl std::fmt::Display for AnalyzeWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AnalyzeWarning::Decoding(w) => w.fmt(f),
            AnalyzeWarning::Capture(e) => e.fmt(f),
        }
    }
}

/// What an analysis went through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnalyzeSummary {
    /// Frames read.
    pub frames: u64,
    /// Decoding problems found inside frames, and capture options ignored (each passed to the
    /// warning callback).
    pub warnings: u64,
    /// Frames or stretches of the file skipped (each passed to the warning callback).
    pub skipped: u64,
    /// The output was a closed pipe (`analyze … | head`): reading stopped there, not an error.
    pub output_closed: bool,
}

/// Where each frame came from, kept until the pipeline emits it, so its decoding problems can
/// name the frame.
#[derive(Clone, Copy, Debug)]
struct FrameOrigin {
    number: u64,
    offset: u64,
    data_offset: u64,
}

/// Frame buffers kept for the reader to fill again, at most.
const SPARE_FRAME_BUFFERS: usize = 8;

/// Writes pipeline output to `sink`, passing each netlink event's decoding problems to `warn`
/// with the origin of the frame it came from; the byte buffers of the frames written go to
/// `spare`, for the reader to fill again (a frame's allocation and release, per frame, cost
/// 2-3% of `analyze`). `Ok(false)` when the output is a closed pipe.
fn deliver(
    out: &mut Vec<Emitted>,
    origins: &mut VecDeque<FrameOrigin>,
    current: &mut Option<FrameOrigin>,
    sink: &mut dyn EventSink,
    summary: &mut AnalyzeSummary,
    warn: &mut dyn FnMut(&AnalyzeWarning),
    spare: &mut Vec<Vec<u8>>,
) -> Result<bool, OfflineError> {
    for item in out.drain(..) {
        match &item {
            // The pipeline emits each frame before the events decoded from it.
            Emitted::Frame(_) => *current = origins.pop_front(),
            Emitted::SpanEnd => {}
            Emitted::Event(event) | Emitted::SpanBegin(event) => {
                if let (EventBody::Netlink(netlink), Some(origin)) = (&event.body, *current) {
                    for problem in &netlink.decode_errors {
                        summary.warnings += 1;
                        warn(&AnalyzeWarning::Decoding(FrameWarning {
                            frame: origin.number,
                            offset: origin.offset,
                            data_offset: origin.data_offset,
                            problem: problem.clone(),
                        }));
                    }
                }
            }
        }
        match sink.write(&item) {
            Ok(()) => {}
            Err(e) if e.is_broken_pipe() => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        if let Emitted::Frame(frame) = item {
            if spare.len() < SPARE_FRAME_BUFFERS {
                spare.push(frame.bytes);
            }
        }
    }
    Ok(true)
}

/// Analyzes a capture read from `input` into `sink`: frames and events in capture order,
/// decoding problems and what the reader skipped or ignored to `warn` (reading goes on after
/// them), and `progress` called with the bytes read so far after each frame. A capture whose
/// framing cannot be resynchronised ends the analysis with [`OfflineError::Capture`] after
/// everything before the fault was written and the sink finished.
pub fn analyze_into(
    path: &Path,
    input: impl Read,
    genl_families: &[(u16, String)],
    sink: &mut dyn EventSink,
    warn: &mut dyn FnMut(&AnalyzeWarning),
    progress: &mut dyn FnMut(u64),
) -> Result<AnalyzeSummary, OfflineError> {
    let known = Known {
        genl_families,
        interfaces: &InterfaceNames::new(),
    };
    analyze_knowing(path, input, &known, sink, warn, progress)
}

/// Interface index → name, per network namespace (0: frames of unknown namespace, as in plain
/// nlmon captures).
pub type InterfaceNames = BTreeMap<u32, BTreeMap<u32, String>>;

/// What is taught to the decoder before a capture's first frame.
#[derive(Clone, Copy, Debug)]
pub struct Known<'a> {
    /// Generic netlink families (id, name).
    pub genl_families: &'a [(u16, String)],
    /// Interface names (from [`link_names`]); the capture's own frames still teach names as
    /// they come, and win.
    pub interfaces: &'a InterfaceNames,
}

/// The first of two passes over a capture: the interface names of every `RTM_NEWLINK` in it
/// (link dumps and notifications, wherever they are), per network namespace, the last name of
/// each index. Taught before the second pass, they name devices in messages that come before
/// the capture's first link dump ("dev lo", not "dev 1"). Reading stops quietly at a fault the
/// second pass will report.
pub fn link_names(input: impl Read) -> InterfaceNames {
    link_names_read_by(CaptureReader::new(input))
}

/// [`link_names`] of what `reader` (just opened, or its error) reads.
fn link_names_read_by<R: Read>(reader: Result<CaptureReader<R>, CaptureError>) -> InterfaceNames {
    let mut names = InterfaceNames::new();
    let Ok(mut reader) = reader else {
        return names;
    };
    let mut captured = CapturedFrame::default();
    while let Ok(true) = reader.read_frame(&mut captured) {
        let frame = &captured.frame;
        add_link_names(&mut names, frame.netns, frame.protocol, &frame.bytes);
    }
    names
}

/// [`link_names`] of a classic pcap file mapped into memory, its frames read in place
/// ([`pcap_frames_in_place`]: a first pass that copied every frame out of the mapping was
/// 8% of `analyze --format text`), the pages read past let go ([`ReleaseBehind`]) as a
/// [`MappedCaptureReader`]'s are.
fn link_names_in_place<'a>(
    frames: impl Iterator<Item = FrameInPlace<'a>>,
    mapped: &MappedFile,
) -> InterfaceNames {
    let mut names = InterfaceNames::new();
    let mut behind = ReleaseBehind::default();
    for frame in frames {
        // Classic pcap frames are of no namespace our writer named.
        add_link_names(&mut names, 0, frame.protocol, frame.bytes);
        behind.reached(mapped, frame.end, false);
    }
    behind.reached(mapped, mapped.len(), true);
    names
}

/// Adds the names of the `RTM_NEWLINK` messages in a frame of netlink `protocol` in namespace
/// `netns` to `names`.
fn add_link_names(names: &mut InterfaceNames, netns: u32, protocol: u16, bytes: &[u8]) {
    if protocol != 0 {
        return;
    }
    let found = crate::decode::netlink::link_names(bytes);
    if !found.is_empty() {
        names.entry(netns).or_default().extend(found);
    }
}

/// [`analyze_into`], with what is known before the first frame.
pub fn analyze_knowing(
    path: &Path,
    input: impl Read,
    known: &Known<'_>,
    sink: &mut dyn EventSink,
    warn: &mut dyn FnMut(&AnalyzeWarning),
    progress: &mut dyn FnMut(u64),
) -> Result<AnalyzeSummary, OfflineError> {
    analyze_read_by(path, CaptureReader::new(input), known, sink, warn, progress)
}

/// [`analyze_knowing`] of what `reader` (just opened, or its error) reads.
fn analyze_read_by<R: Read>(
    path: &Path,
    reader: Result<CaptureReader<R>, CaptureError>,
    known: &Known<'_>,
    sink: &mut dyn EventSink,
    warn: &mut dyn FnMut(&AnalyzeWarning),
    progress: &mut dyn FnMut(u64),
) -> Result<AnalyzeSummary, OfflineError> {
    let capture_error = |source| OfflineError::Capture {
        path: path.into(),
        source,
    };
    let mut reader = reader.map_err(capture_error)?;
    let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
    for (id, name) in known.genl_families {
        pipeline.netlink_decoder().learn_family(*id, name);
    }
    pipeline.netlink_decoder().set_detail(sink.detail());
    for (netns, names) in known.interfaces {
        pipeline.learn_interfaces((*netns != 0).then_some(u64::from(*netns)), names);
    }
    let mut summary = AnalyzeSummary::default();
    let (mut out, mut origins, mut current) = (Vec::new(), VecDeque::new(), None);
    let mut captured = CapturedFrame::default();
    let mut spare = Vec::new();
    let mut failure = None;
    loop {
        let read = reader.read_frame(&mut captured);
        for note in reader.take_namespaces() {
            pipeline.learn_interfaces(Some(u64::from(note.netns)), &note.interfaces);
        }
        for problem in reader.take_problems() {
            let problem = AnalyzeWarning::Capture(problem);
            if problem.skipped() {
                summary.skipped += 1;
            } else {
                summary.warnings += 1;
            }
            warn(&problem);
        }
        let more = match read {
            Ok(more) => more,
            Err(source) => {
                failure = Some(capture_error(source));
                false
            }
        };
        if more {
            summary.frames += 1;
            origins.push_back(FrameOrigin {
                number: captured.number,
                offset: captured.file_offset,
                data_offset: captured.data_offset,
            });
            let mut next = CapturedFrame::default().frame;
            next.bytes = spare.pop().unwrap_or_default();
            let frame = std::mem::replace(&mut captured.frame, next);
            pipeline.on_frame(frame, &mut out);
        } else {
            pipeline.finish(&mut out);
        }
        let open = deliver(
            &mut out,
            &mut origins,
            &mut current,
            sink,
            &mut summary,
            warn,
            &mut spare,
        )?;
        if !open {
            summary.output_closed = true;
            return Ok(summary);
        }
        if !more {
            break;
        }
        progress(reader.bytes_read());
    }
    match sink.finish() {
        Err(e) if e.is_broken_pipe() => summary.output_closed = true,
        other => other?,
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(summary),
    }
}

/// Files at least this big show progress on a terminal.
const PROGRESS_MIN_BYTES: u64 = 64 << 20;

/// Analyzes a pcap/pcapng capture to stdout. Decoding problems inside frames, frames skipped
/// and options ignored are warnings on stderr naming the frame and byte offset, and a closing
/// count says how many frames were read (also when there were none); when the file's framing
/// cannot be resynchronised, the frames before that point are reported and the error returned
/// after them. Progress (bytes read of the file size) shows on stderr
/// when it is a terminal and the file is big. `genl_families` (id, name) are taught to the
/// decoder before the first frame, and so are the interface names of every link dump in the
/// file (a first pass, [`link_names`]); nlctrl exchanges and link messages in the capture still
/// teach ids and names as they come.
pub fn analyze(
    path: &Path,
    format: OutputFormat,
    genl_families: &[(u16, String)],
) -> Result<AnalyzeSummary, OfflineError> {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let mut sink = stdout_sink(format);
    let shown = input_name(path);
    let mut warn = |w: &AnalyzeWarning| {
        crate::message::note(format_args!("nodeip-trace: warning: {shown}: {w}"))
    };
    let show_progress = std::io::stderr().is_terminal() && size >= PROGRESS_MIN_BYTES;
    let mut last = Instant::now();
    let mut progress = |read: u64| {
        if show_progress && last.elapsed().as_millis() >= 500 {
            last = Instant::now();
            crate::message::progress(format_args!("{}", progress_line(read, size)));
        }
    };
    let result = analyze_file(path, genl_families, sink.as_mut(), &mut warn, &mut progress);
    if show_progress {
        crate::message::clear_progress();
    }
    let summary = result?;
    if let Some(line) = summary_line(&summary) {
        crate::message::note(format_args!("nodeip-trace: {shown}: {line}"));
    }
    Ok(summary)
}

/// Analyzes the capture file at `path` into `sink` in two passes: the interface names of every
/// link dump in it first ([`link_names`]), then [`analyze_knowing`] — so a route seen before the
/// capture's first link dump still names its device. A regular file is mapped and both passes
/// read the mapping (no copy of the file through `read`, none at all for the first pass); a
/// regular file that cannot be mapped (an empty one) is read twice. A stream — `-` (stdin), a
/// pipe, a FIFO — can be read only once: it is analyzed in one pass, as it arrives (`tcpdump -U
/// -w - | nodeip-trace analyze -`), devices named from the link messages read so far.
pub fn analyze_file(
    path: &Path,
    genl_families: &[(u16, String)],
    sink: &mut dyn EventSink,
    warn: &mut dyn FnMut(&AnalyzeWarning),
    progress: &mut dyn FnMut(u64),
) -> Result<AnalyzeSummary, OfflineError> {
    let open = || {
        std::fs::File::open(path).map_err(|source| OfflineError::Open {
            path: path.into(),
            source,
        })
    };
    if is_stdin(path) {
        let stdin = std::io::stdin().lock();
        return analyze_into(path, stdin, genl_families, sink, warn, progress);
    }
    let file = open()?;
    if let Some(mapped) = map_capture(&file) {
        let interfaces = match pcap_frames_in_place(&mapped) {
            Some(frames) => link_names_in_place(frames, &mapped),
            None => {
                link_names_read_by(CaptureReader::unbuffered(MappedCaptureReader::new(&mapped)))
            }
        };
        let known = Known {
            genl_families,
            interfaces: &interfaces,
        };
        let reader = CaptureReader::unbuffered(MappedCaptureReader::new(&mapped));
        return analyze_read_by(path, reader, &known, sink, warn, progress);
    }
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return analyze_into(path, file, genl_families, sink, warn, progress);
    }
    let interfaces = link_names(file);
    let known = Known {
        genl_families,
        interfaces: &interfaces,
    };
    analyze_knowing(path, open()?, &known, sink, warn, progress)
}

/// The capture path that means standard input.
pub const STDIN_PATH: &str = "-";

/// Whether an input path means standard input ([`STDIN_PATH`]).
pub fn is_stdin(path: &Path) -> bool {
    path == Path::new(STDIN_PATH)
}

/// An input as messages and reports name it: "standard input" for [`STDIN_PATH`], else its path.
pub fn input_name(path: &Path) -> String {
    if is_stdin(path) {
        "standard input".to_string()
    } else {
        path.display().to_string()
    }
}

/// The closing count of [`analyze`] on stderr, when there is something to say: how many frames
/// were read (also none), problems read past, what was skipped.
fn summary_line(summary: &AnalyzeSummary) -> Option<String> {
    let count = super::count_of;
    let frames = count(summary.frames, "frame");
    match (summary.frames, summary.warnings, summary.skipped) {
        (0, 0, 0) => Some(format!("{frames}: the capture holds no packets")),
        (_, 0, 0) => None,
        (_, warnings, skipped) => Some(format!(
            "{frames} read, {} read past, {} skipped (each reported above; decoding problems \
             also in their frame's decode_errors)",
            count(warnings, "problem"),
            count(skipped, "damaged part"),
        )),
    }
}

/// `analyze: 512 of 2048 MiB (25%)`.
fn progress_line(read: u64, size: u64) -> String {
    let percent = (read.min(size) * 100).checked_div(size).unwrap_or(100);
    format!("analyze: {} of {} MiB ({percent}%)", read >> 20, size >> 20)
}

/// Parses one recording line.
pub fn parse_recording_line(
    path: &Path,
    line_no: usize,
    line: &str,
) -> Result<Event, OfflineError> {
    parse_line_at(path, line_no, 0, line)
}

fn parse_line_at(path: &Path, line: usize, offset: u64, text: &str) -> Result<Event, OfflineError> {
    let event: Event = serde_json::from_str(text).map_err(|e| OfflineError::BadLine {
        path: path.into(),
        line,
        offset,
        reason: json_reason(&e),
    })?;
    if let EventBody::Header(h) = &event.body {
        if !(OLDEST_READABLE_SCHEMA..=SCHEMA_VERSION).contains(&h.schema) {
            return Err(OfflineError::Schema {
                path: path.into(),
                line,
                found: h.schema,
            });
        }
    }
    Ok(event)
}

/// serde_json's message for one line, with its position as a column: its own "line 1" would
/// contradict the recording's line number around it.
fn json_reason(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((what, _)) if error.line() == 1 => format!("{what} at column {}", error.column()),
        _ => text,
    }
}

/// Replays a JSON-lines recording through a sink. Events before a bad line are written (and the
/// output finished) before the error is returned.
pub fn replay(path: &Path, format: OutputFormat) -> Result<(), OfflineError> {
    let file = std::fs::File::open(path).map_err(|source| OfflineError::Open {
        path: path.into(),
        source,
    })?;
    let mut sink = stdout_sink(format);
    let result = replay_into(path, BufReader::new(file), sink.as_mut());
    let finished = sink.finish();
    match (result, finished) {
        (Err(OfflineError::Sink(e)), _) | (Ok(()), Err(e)) if e.is_broken_pipe() => Ok(()),
        (Err(e), _) => Err(e),
        (Ok(()), finished) => Ok(finished?),
    }
}

/// Replays recording lines from `input` into `sink` (testable without files); stops at the first
/// line that is not an event, naming its line number and byte offset.
pub fn replay_into(
    path: &Path,
    mut input: impl BufRead,
    sink: &mut dyn EventSink,
) -> Result<(), OfflineError> {
    let mut raw = Vec::new();
    let (mut line, mut offset) = (0usize, 0u64);
    let mut inside = 0u32;
    loop {
        raw.clear();
        let read = input
            .read_until(b'\n', &mut raw)
            .map_err(|source| OfflineError::Read {
                path: path.into(),
                line: line + 1,
                offset,
                source,
            })?;
        if read == 0 {
            if inside > 0 {
                // Cut short inside a call: close its span.
                sink.write(&Emitted::SpanEnd)?;
            }
            return Ok(());
        }
        line += 1;
        let text = std::str::from_utf8(&raw).map_err(|e| OfflineError::BadLine {
            path: path.into(),
            line,
            offset,
            reason: format!("byte {} of the line is not UTF-8", e.valid_up_to()),
        })?;
        if !text.trim().is_empty() {
            let event = parse_line_at(path, line, offset, text)?;
            inside = replay_event(event, inside, sink)?;
        }
        offset += read as u64;
    }
}

/// Writes one recorded event; a resolver call's span is rebuilt from its `during` count (the
/// events that follow it and happened inside it), as the live run gave it to its sinks.
/// Returns how many events of the open span are still to come.
fn replay_event(event: Event, inside: u32, sink: &mut dyn EventSink) -> Result<u32, SinkError> {
    if inside > 0 {
        sink.write(&Emitted::Event(Box::new(event)))?;
        if inside == 1 {
            sink.write(&Emitted::SpanEnd)?;
        }
        return Ok(inside - 1);
    }
    match &event.body {
        EventBody::Getaddrinfo(call) if call.during > 0 => {
            let during = call.during;
            sink.write(&Emitted::SpanBegin(Box::new(event)))?;
            Ok(during)
        }
        _ => sink.write(&Emitted::Event(Box::new(event))).map(|()| 0),
    }
}

/// Renders a recording to text in memory (golden tests).
pub fn replay_to_text(path: &Path, input: impl BufRead) -> Result<String, OfflineError> {
    let mut buf = Vec::new();
    {
        let mut sink = TextTimelineSink::new(&mut buf, "memory", false);
        replay_into(path, input, &mut sink)?;
        sink.finish()?;
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_refuses_an_unknown_schema() {
        let line = r#"{"ts":"1970-01-01T00:00:00.000000000Z","ts_ns":0,"pid":0,"tid":0,"comm":"","kind":"header","schema":99,"tool_version":"9","kernel":"","host":"","hooks":[],"filters":[],"clock_offset_ns":0}"#;
        let err = replay_to_text(Path::new("r.jsonl"), line.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("schema 99"), "{err}");
    }

    #[test]
    fn replay_reports_the_bad_line() {
        let err = replay_to_text(Path::new("r.jsonl"), "\n{not json}\n".as_bytes()).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    /// Regression: a recording line that is not UTF-8 was reported as "cannot open FILE".
    #[test]
    fn replay_names_a_line_that_is_not_utf8_and_keeps_what_came_before() {
        let header = r#"{"ts":"1970-01-01T00:00:00.000000000Z","ts_ns":0,"pid":0,"tid":0,"comm":"","kind":"header","schema":1,"tool_version":"9","kernel":"","host":"","hooks":[],"filters":[],"clock_offset_ns":0}"#;
        let input = format!("{header}\n\u{20}\n").into_bytes();
        let mut input = input;
        input.extend_from_slice(b"{\"ts\":\"\xff\"}\n");
        let mut out = Vec::new();
        let mut sink = crate::sink::json::JsonLinesSink::new(&mut out, "memory", false);
        let err = replay_into(Path::new("r.jsonl"), &input[..], &mut sink).unwrap_err();
        let text = err.to_string();
        let offset = header.len() + 3;
        assert!(
            text.contains(&format!("r.jsonl line 3 (byte offset {offset})")),
            "{text}"
        );
        assert!(text.contains("not UTF-8"), "{text}");
        sink.finish().unwrap();
        drop(sink);
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
    }

    #[test]
    fn json_errors_give_the_column_not_serdes_line_1() {
        let err = replay_to_text(Path::new("r.jsonl"), "{\"kind\": 5}\n".as_bytes()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("line 1 (byte offset 0)"), "{text}");
        assert!(text.contains("at column"), "{text}");
        assert!(!text.contains("at line 1 column"), "{text}");
    }

    #[test]
    fn progress_counts_bytes_of_the_file() {
        assert_eq!(
            progress_line(512 << 20, 2048 << 20),
            "analyze: 512 of 2048 MiB (25%)"
        );
        assert_eq!(progress_line(10, 0), "analyze: 0 of 0 MiB (100%)");
    }

    use crate::model::frame::NetlinkFrame;

    /// A pcap of frames whose netlink bytes are `bodies` (route protocol, sent).
    fn pcap_of(bodies: &[Vec<u8>]) -> Vec<u8> {
        use crate::model::frame::Direction;
        use crate::sink::pcap::{FrameSink, NlmonWriter};
        let mut writer = NlmonWriter::new(Vec::new()).unwrap();
        for (i, bytes) in bodies.iter().enumerate() {
            let frame = NetlinkFrame {
                wall_ns: 1_700_000_000_000_000_000 + i as i128,
                ts_ns: 0,
                protocol: 0,
                direction: Some(Direction::Send),
                task: None,
                netns: 0,
                total_len: bytes.len() as u32,
                bytes: bytes.clone(),
            };
            writer.write_frame(&frame).unwrap();
        }
        writer.into_inner()
    }

    /// RTM_GETADDR dump request for AF_INET, with `nlmsg_len` = `len`.
    fn getaddr(len: u32) -> Vec<u8> {
        let mut msg = len.to_ne_bytes().to_vec();
        msg.extend_from_slice(&22u16.to_ne_bytes());
        msg.extend_from_slice(&0x301u16.to_ne_bytes());
        msg.extend_from_slice(&[0; 8]);
        msg.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0]);
        msg
    }

    fn analyze_bytes(bytes: &[u8]) -> (Result<AnalyzeSummary, OfflineError>, Vec<String>, usize) {
        let mut out = Vec::new();
        let mut warnings = Vec::new();
        let result = {
            let mut sink = crate::sink::json::JsonLinesSink::new(&mut out, "memory", false);
            analyze_into(
                Path::new("f.pcap"),
                bytes,
                &[],
                &mut sink,
                &mut |w| warnings.push(w.to_string()),
                &mut |_| {},
            )
        };
        // One netlink event per frame (pairing may add other kinds).
        let frames = String::from_utf8(out)
            .unwrap()
            .lines()
            .filter(|l| l.contains(r#""kind":"netlink""#))
            .count();
        (result, warnings, frames)
    }

    #[test]
    fn decoding_problems_are_warnings_naming_frame_and_offsets() {
        let bytes = pcap_of(&[getaddr(24), getaddr(0), getaddr(24)]);
        let (result, warnings, lines) = analyze_bytes(&bytes);
        let summary = result.unwrap();
        assert_eq!((summary.frames, summary.warnings, lines), (3, 1, 3));
        // File header 24, frame 1 = record header 16 + nlmon 16 + 24.
        let expected = FrameWarning {
            frame: 2,
            offset: 24 + 56,
            data_offset: 24 + 56 + 32,
            problem: "netlink message at byte 0 has nlmsg_len 0, less than the 16-byte header"
                .into(),
        };
        assert_eq!(warnings, [expected.to_string()]);
        assert_eq!(bytes[112..116], [0, 0, 0, 0]);
    }

    #[test]
    fn a_capture_cut_short_keeps_the_frames_before_and_names_the_fault() {
        let bytes = pcap_of(&[getaddr(24), getaddr(24)]);
        let (result, warnings, lines) = analyze_bytes(&bytes[..bytes.len() - 5]);
        let err = result.unwrap_err().to_string();
        assert!(
            err.starts_with("f.pcap: frame 2 at byte offset 80: "),
            "{err}"
        );
        assert!(warnings.is_empty());
        assert_eq!(lines, 1);
    }

    /// A capture cut shorter while mapped (rotated under `analyze`) stops it with an error that
    /// says so, the frames before the cut analyzed, instead of a SIGBUS killing it.
    #[test]
    fn a_capture_cut_while_mapped_ends_in_an_error_not_a_crash() {
        let bytes = pcap_of(&vec![getaddr(24); 2000]);
        let path = std::env::temp_dir().join(format!("nit-cut-pcap-{}", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let mapped = MappedFile::open(&path).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(20_000).unwrap();
        let interfaces = InterfaceNames::new();
        let known = Known {
            genl_families: &[],
            interfaces: &interfaces,
        };
        let mut out = Vec::new();
        let result = {
            let mut sink = crate::sink::json::JsonLinesSink::new(&mut out, "memory", false);
            let reader = CaptureReader::unbuffered(MappedCaptureReader::new(&mapped));
            analyze_read_by(&path, reader, &known, &mut sink, &mut |_| {}, &mut |_| {})
        };
        std::fs::remove_file(&path).unwrap();
        let err = result.unwrap_err().to_string();
        assert!(err.contains("cut shorter while being read"), "{err}");
        let frames = String::from_utf8(out)
            .unwrap()
            .lines()
            .filter(|l| l.contains(r#""kind":"netlink""#))
            .count();
        // 24 bytes of file header, then 56 a frame: the frames before the first page cut.
        assert!(
            (300..=400).contains(&frames),
            "{frames} frames before the cut"
        );
    }

    /// Issue 19: a pcapng whose second frame has a corrupt nlmon header stopped `analyze` there;
    /// the frames after it, and the diagnoses they carry, were lost.
    #[test]
    fn a_corrupt_frame_is_skipped_and_the_diagnoses_after_it_are_kept() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/nlmon/iproute2-secondary-ipvs.pcap");
        let frames: Vec<_> = CaptureReader::new(std::fs::File::open(fixture).unwrap())
            .unwrap()
            .map(|f| f.unwrap().frame)
            .collect();
        let section = crate::sink::pcap::SectionInfo {
            user_application: "test".into(),
            hardware: String::new(),
            os: String::new(),
            host: String::new(),
        };
        let mut writer = crate::sink::pcap::NlmonPcapngWriter::new(Vec::new(), &section).unwrap();
        for frame in &frames {
            crate::sink::pcap::FrameSink::write_frame(&mut writer, frame).unwrap();
        }
        let mut bytes = writer.into_inner();
        let second = CaptureReader::new(&bytes[..])
            .unwrap()
            .nth(1)
            .unwrap()
            .unwrap();
        // The nlmon header's ARPHRD type (bytes 2-3) of frame 2.
        let hatype = (second.data_offset - 16 + 2) as usize;
        bytes[hatype..hatype + 2].copy_from_slice(&1u16.to_be_bytes());
        let (result, warnings, lines) = analyze_bytes(&bytes);
        let summary = result.unwrap();
        assert_eq!(
            (summary.frames, summary.skipped, lines),
            (frames.len() as u64 - 1, 1, frames.len() - 1)
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let at = format!("frame 2 at byte offset {}", second.file_offset);
        assert!(warnings[0].starts_with(&at), "{warnings:?}");
        assert!(warnings[0].contains("device type 1"), "{warnings:?}");
        let mut out = Vec::new();
        let mut sink = crate::sink::json::JsonLinesSink::new(&mut out, "memory", false);
        analyze_into(
            Path::new("f"),
            &bytes[..],
            &[],
            &mut sink,
            &mut |_| {},
            &mut |_| {},
        )
        .unwrap();
        drop(sink);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("secondary-address-skipped"), "{text}");
        assert!(text.contains("route-get-resolves-to-lo"), "{text}");
    }

    /// One netlink message (host order) of `kind` with `body`.
    fn message(kind: u16, flags: u16, body: &[u8]) -> Vec<u8> {
        let mut msg = ((16 + body.len()) as u32).to_ne_bytes().to_vec();
        msg.extend_from_slice(&kind.to_ne_bytes());
        msg.extend_from_slice(&flags.to_ne_bytes());
        msg.extend_from_slice(&[0; 8]);
        msg.extend_from_slice(body);
        msg
    }

    /// An attribute, padded.
    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

    /// `RTM_NEWROUTE` to 192.0.2.10/32 through interface `oif`.
    fn route_via(oif: u32) -> Vec<u8> {
        let mut body = vec![2, 32, 0, 0, 254, 2, 0, 1, 0, 0, 0, 0];
        body.extend(nla(1, &[192, 0, 2, 10]));
        body.extend(nla(4, &oif.to_ne_bytes()));
        message(24, 0, &body)
    }

    /// `RTM_NEWLINK` naming interface `index` (a dump part).
    fn link(index: u32, name: &str) -> Vec<u8> {
        let mut body = vec![0, 0, 0, 0];
        body.extend_from_slice(&index.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
        body.extend(nla(3, format!("{name}\0").as_bytes()));
        message(16, 2, &body)
    }

    /// The `oif_name`s of the route messages in a JSON-lines analysis.
    fn route_devices(json: &str) -> Vec<String> {
        json.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .flat_map(|e| e["messages"].as_array().cloned().unwrap_or_default())
            .filter_map(|m| m["body"]["oif_name"].as_str().map(str::to_owned))
            .collect()
    }

    fn analyze_json(bytes: &[u8], known: &Known<'_>) -> String {
        let mut out = Vec::new();
        let mut sink = crate::sink::json::JsonLinesSink::new(&mut out, "memory", false);
        analyze_knowing(
            Path::new("f"),
            bytes,
            known,
            &mut sink,
            &mut |_| {},
            &mut |_| {},
        )
        .unwrap();
        drop(sink);
        String::from_utf8(out).unwrap()
    }

    /// Issue 19: a route seen before any link dump showed "dev 1" offline and "dev lo" live.
    #[test]
    fn names_from_a_link_dump_anywhere_in_the_capture_name_devices_before_it() {
        let bytes = pcap_of(&[route_via(1), link(1, "lo"), route_via(1)]);
        let unknown = analyze_json(
            &bytes,
            &Known {
                genl_families: &[],
                interfaces: &InterfaceNames::new(),
            },
        );
        assert_eq!(
            route_devices(&unknown),
            ["lo"],
            "only after the dump: {unknown}"
        );
        let names = link_names(&bytes[..]);
        assert_eq!(names[&0][&1], "lo");
        let named = analyze_json(
            &bytes,
            &Known {
                genl_families: &[],
                interfaces: &names,
            },
        );
        assert_eq!(route_devices(&named), ["lo", "lo"], "{named}");
    }

    /// Our pcapng names each namespace's interfaces in its interface description: offline
    /// analysis names devices per namespace without any link dump in the capture.
    #[test]
    fn namespaces_named_by_our_pcapng_name_their_devices() {
        let section = crate::sink::pcap::SectionInfo {
            user_application: "test".into(),
            hardware: String::new(),
            os: String::new(),
            host: String::new(),
        };
        struct Names;
        impl crate::model::ports::InterfaceDirectory for Names {
            fn netns_of(&mut self, _: u32) -> Option<u64> {
                None
            }
            fn interfaces_in(&mut self, netns: u64, _: u32) -> BTreeMap<u32, String> {
                let name = if netns == 11 { "eth0" } else { "veth-b" };
                [(2, name.to_owned())].into()
            }
        }
        let mut writer = crate::sink::pcap::NlmonPcapngWriter::new(Vec::new(), &section)
            .unwrap()
            .with_namespaces(Box::new(Names));
        for (i, netns) in [11u32, 12, 0].into_iter().enumerate() {
            let bytes = route_via(2);
            let frame = NetlinkFrame {
                wall_ns: 1_700_000_000_000_000_000 + i as i128,
                ts_ns: 0,
                protocol: 0,
                direction: Some(crate::model::frame::Direction::Recv),
                task: None,
                netns,
                total_len: bytes.len() as u32,
                bytes,
            };
            crate::sink::pcap::FrameSink::write_frame(&mut writer, &frame).unwrap();
        }
        let bytes = writer.into_inner();
        let json = analyze_json(
            &bytes,
            &Known {
                genl_families: &[],
                interfaces: &InterfaceNames::new(),
            },
        );
        // The frame of unknown namespace has no names.
        assert_eq!(route_devices(&json), ["eth0", "veth-b"], "{json}");
    }

    #[test]
    fn the_closing_count_says_zero_frames_and_what_was_skipped() {
        let summary = |frames, warnings, skipped| AnalyzeSummary {
            frames,
            warnings,
            skipped,
            output_closed: false,
        };
        assert_eq!(
            summary_line(&summary(0, 0, 0)).unwrap(),
            "0 frames: the capture holds no packets"
        );
        assert_eq!(summary_line(&summary(3, 0, 0)), None);
        assert_eq!(
            summary_line(&summary(1, 0, 2)).unwrap(),
            "1 frame read, 0 problems read past, 2 damaged parts skipped (each reported above; \
             decoding problems also in their frame's decode_errors)"
        );
    }

    #[test]
    fn analyze_of_the_fixtures_finds_their_conversations() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/nlmon/iproute2-secondary-ipvs.pcap");
        let file = std::fs::File::open(&root).unwrap();
        let reader = CaptureReader::new(BufReader::new(file)).unwrap();
        let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
        // As `analyze` does: the names of the capture's link dumps first.
        let names = link_names(std::fs::File::open(&root).unwrap());
        pipeline.learn_interfaces(None, &names[&0]);
        let mut out = Vec::new();
        for f in reader {
            pipeline.on_frame(f.unwrap().frame, &mut out);
        }
        pipeline.finish(&mut out);
        let mut text = Vec::new();
        let mut sink = TextTimelineSink::new(&mut text, "memory", false);
        for e in &out {
            sink.write(e).unwrap();
        }
        sink.finish().unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("veth0 192.0.2.10/24 primary, 192.0.2.20/24 secondary"),
            "{text}"
        );
        assert!(
            text.contains("IPVS NEW_SERVICE TCP 192.0.2.10:30080 rr → ACK"),
            "{text}"
        );
        assert!(text.contains("→ 198.51.100.5:8080 masq"), "{text}");
        // The workload is seed 002's and 003's pattern (one capture, processes unattributed).
        assert!(text.contains("] secondary-address-skipped"), "{text}");
        assert!(text.contains("] route-get-resolves-to-lo"), "{text}");
        let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/golden/analyze/iproute2-secondary-ipvs.txt");
        crate::golden::assert_golden(&golden, text.as_bytes());
    }
}
