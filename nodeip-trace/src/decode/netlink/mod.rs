//! Netlink buffers → decoded messages (rtnetlink, generic netlink, nlctrl, IPVS).
//!
//! STUB: the full decoder replaces this file.
use serde::{Deserialize, Serialize};

/// One decoded netlink message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetlinkMessage {
    /// Message type name (`RTM_GETROUTE`, `NLMSG_ERROR`, `IPVS_CMD_NEW_SERVICE`, ...).
    #[serde(rename = "type")]
    pub type_name: String,
}

/// A decoded IPVS command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IpvsCommand {
    /// Command name.
    pub cmd: String,
}

/// A problem in a buffer.
#[derive(Debug, thiserror::Error)]
#[error("decode error")]
pub struct DecodeError;

/// Result of decoding one buffer.
pub struct DecodedBuffer {
    /// Messages.
    pub messages: Vec<NetlinkMessage>,
    /// Problems.
    pub errors: Vec<DecodeError>,
}

/// Stateful decoder.
#[derive(Default)]
pub struct NetlinkDecoder;

impl NetlinkDecoder {
    /// New decoder.
    pub fn new() -> Self {
        Self
    }
    /// Decode.
    pub fn decode(&mut self, _protocol: u16, _bytes: &[u8]) -> DecodedBuffer {
        DecodedBuffer { messages: Vec::new(), errors: Vec::new() }
    }
    /// Learn a family.
    pub fn learn_family(&mut self, _id: u16, _name: &str) {}
    /// Families known.
    pub fn families(&self) -> impl Iterator<Item = (u16, &str)> {
        std::iter::empty()
    }
}

/// IPVS command of a message.
pub fn ipvs_command(_msg: &NetlinkMessage) -> Option<IpvsCommand> {
    None
}

/// Protocol name.
pub fn protocol_name(protocol: u16) -> String {
    format!("NETLINK_{protocol}")
}

/// Protocol from a name.
pub fn protocol_from_name(name: &str) -> Option<u16> {
    name.parse().ok()
}
