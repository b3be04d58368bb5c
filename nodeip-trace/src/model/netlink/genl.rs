//! Generic netlink bodies: the controller (`nlctrl`) and other families' headers.
use serde::{Deserialize, Serialize};

use super::{Hex, Name, RawAttribute};

/// Another generic netlink family: genl header decoded, the rest raw (it may start with a
/// family-specific header, so it is not walked as attributes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenlBody {
    /// Family name, when learned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Family id (the message type).
    pub family_id: u16,
    /// genl command number.
    pub cmd: u8,
    /// genl family version.
    pub version: u8,
    /// The payload after the genl header, hex.
    pub hex: Hex,
}

/// One operation a family supports (`CTRL_ATTR_OPS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenlOperation {
    /// Command number.
    pub id: u32,
    /// Command name, when the family is one this decoder knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Name>,
    /// `GENL_*` flag names (`ADMIN_PERM`, `CMD_CAP_DO`, ...).
    pub flags: Vec<Name>,
}

/// One multicast group of a family (`CTRL_ATTR_MCAST_GROUPS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McastGroup {
    /// Group name.
    pub name: String,
    /// Group id.
    pub id: u32,
}

/// An nlctrl message (family lookup request or reply).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NlctrlBody {
    /// Command name (`CTRL_CMD_NEWFAMILY`).
    pub cmd: Name,
    /// Command number.
    pub cmd_id: u8,
    /// genl header version.
    pub version: u8,
    /// `CTRL_ATTR_FAMILY_NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_name: Option<String>,
    /// `CTRL_ATTR_FAMILY_ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_id: Option<u16>,
    /// `CTRL_ATTR_VERSION`: the family's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_version: Option<u32>,
    /// `CTRL_ATTR_HDRSIZE`: the family's user header size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hdrsize: Option<u32>,
    /// `CTRL_ATTR_MAXATTR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxattr: Option<u32>,
    /// `CTRL_ATTR_OPS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<GenlOperation>,
    /// `CTRL_ATTR_MCAST_GROUPS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcast_groups: Vec<McastGroup>,
    /// Attributes not interpreted here (policies, ...), raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}
