//! What the fuzz targets share: rendering a decoded netlink buffer the way the sinks would, and
//! one sink that feeds every real sink (text, JSON lines, pcap, pcapng) at once.
use std::collections::BTreeMap;

use nodeip_trace::model::emitted::Emitted;
use nodeip_trace::decode::netlink::NetlinkDecoder;
use nodeip_trace::sink::json::JsonLinesSink;
use nodeip_trace::sink::pcap::{NlmonPcapngWriter, NlmonWriter, SectionInfo};
use nodeip_trace::sink::text::TextTimelineSink;
use nodeip_trace::sink::{EventSink, FrameSinkAdapter, SinkError};

/// `NETLINK_ROUTE`.
pub const NETLINK_ROUTE: u16 = 0;
/// `NETLINK_GENERIC`.
pub const NETLINK_GENERIC: u16 = 16;

/// Decodes `bytes` as one buffer of `protocol` and serializes every message and error, as the
/// JSON sink and the warnings would.
pub fn decode_netlink(decoder: &mut NetlinkDecoder, protocol: u16, bytes: &[u8]) {
    let decoded = decoder.decode(protocol, bytes);
    for message in &decoded.messages {
        serde_json::to_vec(message).expect("a decoded message serializes");
    }
    for error in &decoded.errors {
        let _ = error.to_string();
    }
}

/// Every output sink at once, each writing to nowhere: text timeline, JSON lines, pcap, pcapng.
pub struct AllSinks {
    sinks: Vec<Box<dyn EventSink>>,
}

impl AllSinks {
    /// The four sinks, the pcap ones announcing `families` (id → name) as `trace` would.
    pub fn new(families: &BTreeMap<u16, String>) -> Self {
        let section = SectionInfo {
            user_application: "nodeip-trace fuzz".into(),
            hardware: "x86_64".into(),
            os: "Linux".into(),
            host: "fuzz".into(),
        };
        let pcap = NlmonWriter::new(std::io::sink()).expect("pcap header to a sink");
        let pcapng =
            NlmonPcapngWriter::new(std::io::sink(), &section).expect("pcapng header to a sink");
        Self {
            sinks: vec![
                Box::new(TextTimelineSink::new(std::io::sink(), "text", false)),
                Box::new(JsonLinesSink::new(std::io::sink(), "json", false)),
                Box::new(FrameSinkAdapter::new(
                    Box::new(pcap),
                    "pcap",
                    families.clone(),
                )),
                Box::new(FrameSinkAdapter::new(
                    Box::new(pcapng),
                    "pcapng",
                    families.clone(),
                )),
            ],
        }
    }
}

impl EventSink for AllSinks {
    fn write(&mut self, item: &Emitted) -> Result<(), SinkError> {
        self.sinks.iter_mut().try_for_each(|s| s.write(item))
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.sinks.iter_mut().try_for_each(|s| s.finish())
    }
}
