//! sink: where timeline events and netlink frames go — the text timeline ([`text`]), JSON lines
//! ([`json`]) and nlmon-compatible pcap/pcapng ([`pcap`]). Every sink implements [`EventSink`]
//! over an `impl Write`; enrichment happens before sinks, never inside them.
pub mod json;
pub mod pcap;
pub mod text;

use crate::correlate::Emitted;

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
}

impl SinkError {
    /// Whether this is a closed pipe (the reader went away: not an error for a CLI).
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, SinkError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

/// A consumer of the pipeline's output.
pub trait EventSink {
    /// Takes one item (events and frames, in pipeline order).
    fn write(&mut self, item: &Emitted) -> Result<(), SinkError>;
    /// Flushes and writes any trailer.
    fn finish(&mut self) -> Result<(), SinkError>;
}
