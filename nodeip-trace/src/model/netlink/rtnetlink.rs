//! rtnetlink (`NETLINK_ROUTE`) object bodies: links, addresses, routes, neighbours, rules, as
//! flat records with iproute2's names.
use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use super::{Name, RawAttribute};

/// A link (interface).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkBody {
    /// Address family (`unspec` for most link messages).
    pub family: Name,
    /// Interface index (0 in dump requests).
    pub index: u32,
    /// `IFLA_IFNAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    /// `IFLA_INFO_KIND` (`veth`, `vxlan`, `ipip`, `gre`, ...). Not named `kind`: that is the
    /// body's tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info_kind: Option<String>,
    /// `ARPHRD_*` link type (1 = ether, 772 = loopback).
    pub link_type: u16,
    /// `IFF_*` names (`UP`, `LOWER_UP`, ...).
    pub flags: Vec<Name>,
    /// `ifi_flags` as sent.
    pub flags_raw: u32,
    /// `IFLA_MTU`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// `IFLA_ADDRESS` (`aa:bb:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// `IFLA_BROADCAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast: Option<String>,
    /// `IFLA_MASTER`: index of the bridge/bond/VRF it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master: Option<u32>,
    /// Name of `master`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_name: Option<String>,
    /// `IFLA_LINK`: the underlying or peer interface index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<u32>,
    /// `IFLA_OPERSTATE` (`UP`, `DOWN`, `UNKNOWN`, `LOWERLAYERDOWN`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operstate: Option<Name>,
    /// Tunnel local address (ipip/sit/ip6tnl, gre, vxlan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_local: Option<CompactString>,
    /// Tunnel remote address (vxlan: the group/remote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel_remote: Option<CompactString>,
    /// Attributes not shown above (stats, af_spec, ...), raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// An interface address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressBody {
    /// `inet` or `inet6`.
    pub family: Name,
    /// Prefix length.
    pub prefix_len: u8,
    /// Scope (`global`, `link`, `host`, ...).
    pub scope: Name,
    /// Interface index.
    pub index: u32,
    /// Interface name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<CompactString>,
    /// `IFA_LABEL` (IPv4: `eth0`, `eth0:1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<CompactString>,
    /// `IFA_F_*` names (`secondary`, `permanent`, `noprefixroute`, ...), from `IFA_FLAGS` when
    /// present, else the header.
    pub flags: Vec<Name>,
    /// The flags as a number.
    pub flags_raw: u32,
    /// `IFA_F_SECONDARY`: a secondary address of its prefix (never chosen as source when a
    /// primary of the same prefix exists).
    pub secondary: bool,
    /// `IFA_LOCAL`: the interface's own address (IPv4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<CompactString>,
    /// `IFA_ADDRESS`: the address (IPv6) or the peer for point-to-point (IPv4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<CompactString>,
    /// `IFA_BROADCAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast: Option<CompactString>,
    /// `IFA_ANYCAST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anycast: Option<CompactString>,
    /// Attributes not shown above (cacheinfo, ...), raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// A route (or a route lookup request/answer).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteBody {
    /// `inet` or `inet6`.
    pub family: Name,
    /// Table name (`local`, `main`, `default`, `unspec`) or number; `RTA_TABLE` wins over the
    /// header's 8-bit field.
    pub table: Name,
    /// Table id.
    pub table_id: u32,
    /// Route type (`unicast`, `local`, `broadcast`, `unreachable`, ...).
    #[serde(rename = "type")]
    pub route_type: Name,
    /// Who installed it (`kernel`, `boot`, `static`, `dhcp`, ...).
    pub protocol: Name,
    /// Scope (`global`, `link`, `host`, ...).
    pub scope: Name,
    /// TOS.
    pub tos: u8,
    /// `RTA_DST` (absent for a default route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<CompactString>,
    /// Destination prefix length.
    pub dst_len: u8,
    /// `RTA_SRC` (source routing / lookup source).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<CompactString>,
    /// Source prefix length.
    pub src_len: u8,
    /// `RTA_PREFSRC`: the source address the kernel prefers for this route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefsrc: Option<CompactString>,
    /// `RTA_GATEWAY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<CompactString>,
    /// `RTA_OIF`: output interface index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oif: Option<u32>,
    /// Output interface name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oif_name: Option<CompactString>,
    /// `RTA_IIF`: input interface index.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iif: Option<u32>,
    /// Input interface name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iif_name: Option<CompactString>,
    /// `RTA_PRIORITY` (the metric).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// `RTA_MARK`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
    /// `RTM_F_*` and `RTNH_F_*` names (`CLONED`, `LOOKUP_TABLE`, `FIB_MATCH`, `LINKDOWN`, ...);
    /// in IPv4 lookup answers (`CLONED`) also the route cache's `RTCF_*` (`RTCF_LOCAL`).
    pub flags: Vec<Name>,
    /// `rtm_flags` as sent.
    pub flags_raw: u32,
    /// Attributes not shown above (multipath, metrics, cacheinfo, ...), raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// A neighbour (ARP/NDP) entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NeighbourBody {
    /// `inet`, `inet6` or `bridge`.
    pub family: Name,
    /// Interface index.
    pub ifindex: u32,
    /// Interface name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    /// `NUD_*` names (`REACHABLE`, `STALE`, `PERMANENT`, ...; `NONE` for 0).
    pub state: Vec<Name>,
    /// `ndm_state` as sent.
    pub state_raw: u16,
    /// `NTF_*` names.
    pub flags: Vec<Name>,
    /// Route type of the entry (`unicast`, `local`, ...).
    #[serde(rename = "type")]
    pub neighbour_type: Name,
    /// `NDA_DST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<CompactString>,
    /// `NDA_LLADDR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lladdr: Option<String>,
    /// Attributes not shown above, raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}

/// A policy routing rule.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleBody {
    /// `inet` or `inet6`.
    pub family: Name,
    /// Table name or number (`FRA_TABLE` wins over the header's 8-bit field).
    pub table: Name,
    /// Table id.
    pub table_id: u32,
    /// `to_table`, `goto`, `nop`, `blackhole`, `unreachable`, `prohibit`.
    pub action: Name,
    /// `FRA_PRIORITY`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u32>,
    /// `FRA_SRC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<CompactString>,
    /// Source prefix length.
    pub src_len: u8,
    /// `FRA_DST`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<CompactString>,
    /// Destination prefix length.
    pub dst_len: u8,
    /// `FRA_IIFNAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iifname: Option<String>,
    /// `FRA_OIFNAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oifname: Option<String>,
    /// `FRA_FWMARK`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fwmark: Option<u32>,
    /// Attributes not shown above, raw.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_attributes: Vec<RawAttribute>,
}
