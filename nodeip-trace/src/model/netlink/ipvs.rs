//! IPVS generic netlink commands: services, destinations, daemons, info.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Name, RawAttribute};

/// `IPVS_CMD_NEW_SERVICE` (`include/uapi/linux/ip_vs.h`).
pub const IPVS_CMD_NEW_SERVICE: u8 = 1;

/// A decoded IPVS message: a command and whatever service, destination, daemon, timeouts or
/// info it carries. Serializes as one JSON object (it is flattened into `ipvs` events); the
/// nested records are boxed to keep events small.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IpvsCommand {
    /// Command name (`IPVS_CMD_NEW_SERVICE`). Dump replies use the NEW names.
    pub cmd: Name,
    /// Command number.
    pub cmd_id: u8,
    /// genl header version (1).
    pub version: u8,
    /// The virtual service (`IPVS_CMD_ATTR_SERVICE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<Box<IpvsService>>,
    /// The real server (`IPVS_CMD_ATTR_DEST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<Box<IpvsDest>>,
    /// The sync daemon (`IPVS_CMD_ATTR_DAEMON`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<Box<IpvsDaemon>>,
    /// `IPVS_CMD_ATTR_TIMEOUT_TCP`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_tcp: Option<u32>,
    /// `IPVS_CMD_ATTR_TIMEOUT_TCP_FIN`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_tcp_fin: Option<u32>,
    /// `IPVS_CMD_ATTR_TIMEOUT_UDP`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_udp: Option<u32>,
    /// `IPVS_CMD_SET_INFO` (the GET_INFO reply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<IpvsInfo>,
    /// Attributes not interpreted here, raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// An IPVS virtual service.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IpvsService {
    /// Address family (`inet`, `inet6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub af: Option<Name>,
    /// `TCP`, `UDP`, `SCTP`, or the IP protocol number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Virtual address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Virtual port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Firewall mark (fwmark services have no protocol/address/port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fwmark: Option<u32>,
    /// Scheduler (`rr`, `wlc`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<String>,
    /// `IP_VS_SVC_F_*` flag names set (`persistent`, `hashed`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<Vec<Name>>,
    /// Which flags the command changes (`struct ip_vs_flags.mask`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags_mask: Option<u32>,
    /// Persistence timeout, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u32>,
    /// Persistence netmask: dotted for IPv4, a prefix length for IPv6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netmask: Option<String>,
    /// Persistence engine (`sip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pe_name: Option<String>,
    /// Counters (from `STATS64` when present, else `STATS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<BTreeMap<Name, u64>>,
    /// Attributes not interpreted here, raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// An IPVS destination (real server).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IpvsDest {
    /// Address family (`IPVS_DEST_ATTR_ADDR_FAMILY`, else the service's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub af: Option<Name>,
    /// Real server address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Real server port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// `masq`, `local`, `tunnel`, `droute` or `bypass`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarding: Option<String>,
    /// The connection flags as sent (forwarding method in the low 3 bits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_flags: Option<u32>,
    /// Weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Upper connection threshold (0 = none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u_threshold: Option<u32>,
    /// Lower connection threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l_threshold: Option<u32>,
    /// Active connections (replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_conns: Option<u32>,
    /// Inactive connections (replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inact_conns: Option<u32>,
    /// Persistent connections (replies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persist_conns: Option<u32>,
    /// Tunnel type (`ipip`, `gue`, `gre`) for tunnel forwarding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tun_type: Option<String>,
    /// Tunnel port (GUE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tun_port: Option<u16>,
    /// Tunnel encapsulation flags (`IP_VS_TUNNEL_ENCAP_FLAG_*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tun_flags: Option<u16>,
    /// Counters (from `STATS64` when present, else `STATS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<BTreeMap<Name, u64>>,
    /// Attributes not interpreted here, raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// An IPVS connection-sync daemon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpvsDaemon {
    /// `master` or `backup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Multicast interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcast_ifn: Option<String>,
    /// Sync id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_id: Option<u32>,
    /// Attributes not interpreted here, raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// IPVS version and connection table size (the GET_INFO reply).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpvsInfo {
    /// Version as `major.minor.patch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Connection hash table size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn_tab_size: Option<u32>,
}
