//! `nodeip-trace analyze FILE` (pcap/pcapng, ours or tcpdump's on nlmon0) and `nodeip-trace
//! replay FILE` (a JSON-lines recording): the same pipeline and sinks as live, offline, no root.
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::clock::WallClock;
use crate::correlate::{Emitted, Pipeline};
use crate::decode::route_lookup::RouteLookupDecoder;
use crate::event::{Event, EventBody, SCHEMA_VERSION};
use crate::sink::json::JsonLinesSink;
use crate::sink::text::TextTimelineSink;
use crate::sink::{EventSink, SinkError};
use crate::source::capture::{CaptureError, CaptureReader};

/// Output format of analyze/replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OfflineFormat {
    /// The text timeline.
    Text,
    /// JSON lines.
    Json,
}

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
    /// A recording line is not an event.
    #[error("{path} line {line}: not a nodeip-trace event ({reason}); is this a JSON-lines recording made with `trace --output`?")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        reason: String,
    },
    /// The recording's schema is not ours.
    #[error("{path} uses event schema {found}, this nodeip-trace reads schema {SCHEMA_VERSION}: use the nodeip-trace version that made it (its header says `tool_version`)")]
    Schema {
        /// The file.
        path: PathBuf,
        /// The schema found.
        found: u32,
    },
    /// Output failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
}

fn stdout_sink(format: OfflineFormat) -> Box<dyn EventSink> {
    let out = std::io::BufWriter::new(std::io::stdout());
    match format {
        OfflineFormat::Text => Box::new(TextTimelineSink::new(out, "stdout", false)),
        OfflineFormat::Json => Box::new(JsonLinesSink::new(out, "stdout", false)),
    }
}

/// Analyzes a pcap/pcapng capture. Frames before a malformed point are reported; the error is
/// returned after them. `genl_families` (id, name) are taught to the decoder before the first
/// frame; nlctrl exchanges in the capture still teach ids as they come.
pub fn analyze(
    path: &Path,
    format: OfflineFormat,
    genl_families: &[(u16, String)],
) -> Result<(), OfflineError> {
    let file = std::fs::File::open(path).map_err(|source| OfflineError::Open {
        path: path.into(),
        source,
    })?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader =
        CaptureReader::new(BufReader::with_capacity(1 << 20, file)).map_err(|source| {
            OfflineError::Capture {
                path: path.into(),
                source,
            }
        })?;
    let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
    for (id, name) in genl_families {
        pipeline.netlink_decoder().learn_family(*id, name);
    }
    let mut sink = stdout_sink(format);
    let mut out = Vec::new();
    let progress = std::io::stderr().is_terminal() && size > 64 << 20;
    let mut last = Instant::now();
    let mut failure = None;
    while let Some(item) = reader.next() {
        match item {
            Ok(captured) => pipeline.on_frame(captured.frame, &mut out),
            Err(source) => {
                failure = Some(OfflineError::Capture {
                    path: path.into(),
                    source,
                });
                break;
            }
        }
        for e in out.drain(..) {
            sink.write(&e)?;
        }
        if progress && last.elapsed().as_secs() >= 1 {
            last = Instant::now();
            eprint!(
                "\ranalyze: {} of {} MiB",
                reader.bytes_read() >> 20,
                size >> 20
            );
        }
    }
    pipeline.finish(&mut out);
    for e in out.drain(..) {
        sink.write(&e)?;
    }
    sink.finish()?;
    if progress {
        eprintln!();
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Parses one recording line.
pub fn parse_recording_line(
    path: &Path,
    line_no: usize,
    line: &str,
) -> Result<Event, OfflineError> {
    let event: Event = serde_json::from_str(line).map_err(|e| OfflineError::BadLine {
        path: path.into(),
        line: line_no,
        reason: e.to_string(),
    })?;
    if let EventBody::Header(h) = &event.body {
        if h.schema != SCHEMA_VERSION {
            return Err(OfflineError::Schema {
                path: path.into(),
                found: h.schema,
            });
        }
    }
    Ok(event)
}

/// Replays a JSON-lines recording through a sink.
pub fn replay(path: &Path, format: OfflineFormat) -> Result<(), OfflineError> {
    let file = std::fs::File::open(path).map_err(|source| OfflineError::Open {
        path: path.into(),
        source,
    })?;
    let mut sink = stdout_sink(format);
    replay_into(path, BufReader::new(file), sink.as_mut())?;
    sink.finish()?;
    Ok(())
}

/// Replays recording lines from `input` into `sink` (testable without files).
pub fn replay_into(
    path: &Path,
    input: impl BufRead,
    sink: &mut dyn EventSink,
) -> Result<(), OfflineError> {
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|source| OfflineError::Open {
            path: path.into(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let event = parse_recording_line(path, i + 1, &line)?;
        sink.write(&Emitted::Event(Box::new(event)))?;
    }
    Ok(())
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

    #[test]
    fn analyze_of_the_fixtures_finds_their_conversations() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/nlmon/iproute2-secondary-ipvs.pcap");
        let file = std::fs::File::open(&root).unwrap();
        let reader = CaptureReader::new(BufReader::new(file)).unwrap();
        let mut pipeline = Pipeline::new(WallClock::identity(), RouteLookupDecoder::default());
        let mut out = Vec::new();
        for f in reader {
            pipeline.on_frame(f.unwrap().frame, &mut out);
        }
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
        let golden = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/golden/analyze/iproute2-secondary-ipvs.txt");
        if std::env::var_os("BLESS").is_some() {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::write(&golden, &text).unwrap();
        }
        let expected =
            std::fs::read_to_string(&golden).expect("golden file missing: run `cargo xtask bless`");
        assert_eq!(
            text, expected,
            "analyze output changed; if intended, run `cargo xtask bless`"
        );
    }
}
