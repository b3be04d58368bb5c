//! A trace's outputs: opened before anything is attached (kept only once the trace starts),
//! into the fan-out ([`Sinks`]) that writes each item to all of them.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub(super) use crate::sink::fanout::Sinks;
use crate::sink::json::JsonLinesSink;
use crate::sink::limit::LimitedRecords;
use crate::sink::{timeline_sink, OutputFormat, SinkError};

use super::{TraceError, TraceOptions};

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
    let mut sinks = Sinks::new(opts.max_output_bytes);
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
