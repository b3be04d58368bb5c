//! `nodeip-trace report`: a postmortem report from a recording (`trace --output`) or a capture
//! (pcap/pcapng, ours or `tcpdump -i nlmon0`): one self-contained HTML page by default, or any
//! other timeline format, written to a file (0600: it names processes and addresses).
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use super::offline::{self, OfflineError};
use crate::sink::{html::HtmlReportSink, timeline_sink, EventSink, OutputFormat, SinkError};

/// Options of `report`.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// The recording or capture.
    pub input: PathBuf,
    /// Where to write (default: the input's name with the format's extension).
    pub output: Option<PathBuf>,
    /// What to write.
    pub format: OutputFormat,
    /// Generic-netlink family ids to teach the decoder (captures).
    pub genl_families: Vec<(u16, String)>,
}

/// What `report` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportDone {
    /// The file written.
    pub output: PathBuf,
    /// What the input was read as.
    pub input_kind: InputKind,
}

/// What a report is made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// A JSON-lines recording.
    Recording,
    /// A pcap or pcapng capture.
    Capture,
}

/// Errors of `report`.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The input could not be opened or sniffed.
    #[error("cannot read {path}: {source}")]
    Input {
        /// The input.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Standard input has no name to make the report's from.
    #[error("reading standard input (`-`): give the report's file with --output (-o)")]
    NoOutputForStdin,
    /// The output would overwrite the input.
    #[error("{0}: the report would overwrite its own input: give another --output")]
    SameFile(PathBuf),
    /// The output could not be created.
    #[error("cannot create {path}: {source}")]
    Create {
        /// The output.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Reading the input failed; the report of what came before was written.
    #[error("{source}; the report of what came before it is in {written}")]
    Offline {
        /// Why reading stopped.
        #[source]
        source: OfflineError,
        /// The report written anyway.
        written: PathBuf,
    },
    /// Writing the report failed.
    #[error(transparent)]
    Sink(#[from] SinkError),
}

/// A recording by its name (`.jsonl`, `.json`) or its first byte (`{`), else a capture; with
/// the input opened (`-`: standard input), holding the bytes looked at (a pipe cannot be opened
/// again to read them).
fn sniff(path: &Path) -> Result<(InputKind, BufReader<std::fs::File>), ReportError> {
    let input_err = |source| ReportError::Input {
        path: path.into(),
        source,
    };
    let file = if offline::is_stdin(path) {
        use std::os::fd::AsFd;
        std::fs::File::from(
            std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .map_err(input_err)?,
        )
    } else {
        std::fs::File::open(path).map_err(input_err)?
    };
    let mut reader = BufReader::new(file);
    let head = reader.fill_buf().map_err(input_err)?;
    let first = head.iter().find(|b| !b.is_ascii_whitespace());
    let named = path
        .extension()
        .is_some_and(|e| e == "jsonl" || e == "json");
    let kind = if named || first == Some(&b'{') {
        InputKind::Recording
    } else {
        InputKind::Capture
    };
    Ok((kind, reader))
}

/// The file name a format's report gets by default: `incident.jsonl` → `incident.html`.
pub fn default_output(input: &Path, format: OutputFormat) -> PathBuf {
    let extension = match format {
        OutputFormat::Html => "html",
        OutputFormat::Text => "txt",
        OutputFormat::Json => "report.jsonl",
        OutputFormat::Perfetto => "perfetto.json",
    };
    input.with_extension(extension)
}

/// Writes the report of `opts.input`. When the input is cut or malformed, the report of what
/// came before is still written, and the input's error returned.
pub fn run(opts: &ReportOptions) -> Result<ReportDone, ReportError> {
    let output = match &opts.output {
        Some(output) => output.clone(),
        None if offline::is_stdin(&opts.input) => return Err(ReportError::NoOutputForStdin),
        None => default_output(&opts.input, opts.format),
    };
    let (kind, input) = sniff(&opts.input)?;
    let same = std::fs::canonicalize(&output)
        .ok()
        .is_some_and(|out| std::fs::canonicalize(&opts.input).ok() == Some(out));
    if same {
        return Err(ReportError::SameFile(output));
    }
    let file = crate::sink::output_file::create_private(&output).map_err(|source| {
        ReportError::Create {
            path: output.clone(),
            source,
        }
    })?;
    let out = std::io::BufWriter::new(file);
    let name = output.display().to_string();
    let mut sink: Box<dyn EventSink> = match opts.format {
        OutputFormat::Html => {
            Box::new(HtmlReportSink::new(out, name).with_source(offline::input_name(&opts.input)))
        }
        format => timeline_sink(format, out, &name, false),
    };
    let read = read_into(opts, kind, input, sink.as_mut());
    sink.finish()?;
    read.map_err(|source| ReportError::Offline {
        source,
        written: output.clone(),
    })?;
    Ok(ReportDone {
        output,
        input_kind: kind,
    })
}

/// Feeds the input (`input`: opened by [`sniff`]) through the pipeline into `sink`. A capture
/// in a regular file is analyzed from its path (mapped, two passes); a stream, once, from
/// `input` — standard input always, even redirected from a file (`sniff` has read its start).
fn read_into(
    opts: &ReportOptions,
    kind: InputKind,
    input: BufReader<std::fs::File>,
    sink: &mut dyn EventSink,
) -> Result<(), OfflineError> {
    let path = &opts.input;
    let shown = path.display();
    let mut warn = |w: &offline::AnalyzeWarning| {
        crate::message::note(format_args!("nodeip-trace: warning: {shown}: {w}"))
    };
    match kind {
        InputKind::Recording => offline::replay_into(path, input, sink)?,
        InputKind::Capture
            if !offline::is_stdin(path)
                && input.get_ref().metadata().is_ok_and(|m| m.is_file()) =>
        {
            offline::analyze_file(path, &opts.genl_families, sink, &mut warn, &mut |_| {})?;
        }
        InputKind::Capture => {
            offline::analyze_into(
                path,
                input,
                &opts.genl_families,
                sink,
                &mut warn,
                &mut |_| {},
            )?;
        }
    }
    Ok(())
}

/// Renders a recording's HTML report in memory (golden tests).
pub fn html_of_recording(
    path: &Path,
    input: impl BufRead,
    source: &str,
) -> Result<String, ReportError> {
    let mut buf = Vec::new();
    {
        let mut sink = HtmlReportSink::new(&mut buf, "memory").with_source(source);
        offline::replay_into(path, input, &mut sink).map_err(|source| ReportError::Offline {
            source,
            written: "memory".into(),
        })?;
        sink.finish()?;
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
