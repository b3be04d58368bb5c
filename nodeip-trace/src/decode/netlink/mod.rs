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
