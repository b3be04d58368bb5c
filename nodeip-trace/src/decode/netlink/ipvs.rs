//! The IPVS generic netlink family (kube-proxy's IPVS mode, `ipvsadm`): commands, services,
//! destinations, sync daemons, timeouts and info, from the numbers in the kernel's
//! `include/uapi/linux/ip_vs.h`. No crate decodes it.
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use super::attributes::{bit_names, collect_attributes, ip_from_bytes, read_u32, Attribute};

use super::{address_family_name, DecodeError};
use crate::model::ip_text::ipv4_text;
use crate::model::netlink::{
    IpvsCommand, IpvsDaemon, IpvsDest, IpvsInfo, IpvsService, MessageBody, Name, NetlinkMessage,
};

/// `IPVS_GENL_NAME`: the family name nlctrl resolves to a dynamic id.
pub(crate) const IPVS_GENL_NAME: &str = "IPVS";

/// `IPVS_CMD_*`, by number.
const COMMANDS: &[&str] = &[
    "IPVS_CMD_UNSPEC",
    "IPVS_CMD_NEW_SERVICE",
    "IPVS_CMD_SET_SERVICE",
    "IPVS_CMD_DEL_SERVICE",
    "IPVS_CMD_GET_SERVICE",
    "IPVS_CMD_NEW_DEST",
    "IPVS_CMD_SET_DEST",
    "IPVS_CMD_DEL_DEST",
    "IPVS_CMD_GET_DEST",
    "IPVS_CMD_NEW_DAEMON",
    "IPVS_CMD_DEL_DAEMON",
    "IPVS_CMD_GET_DAEMON",
    "IPVS_CMD_SET_CONFIG",
    "IPVS_CMD_GET_CONFIG",
    "IPVS_CMD_SET_INFO",
    "IPVS_CMD_GET_INFO",
    "IPVS_CMD_ZERO",
    "IPVS_CMD_FLUSH",
];
const IPVS_CMD_SET_INFO: u8 = 14;
const IPVS_CMD_GET_INFO: u8 = 15;

// Top-level attributes of every command but the info ones.
const IPVS_CMD_ATTR_SERVICE: u16 = 1;
const IPVS_CMD_ATTR_DEST: u16 = 2;
const IPVS_CMD_ATTR_DAEMON: u16 = 3;
const IPVS_CMD_ATTR_TIMEOUT_TCP: u16 = 4;
const IPVS_CMD_ATTR_TIMEOUT_TCP_FIN: u16 = 5;
const IPVS_CMD_ATTR_TIMEOUT_UDP: u16 = 6;

// Top-level attributes of IPVS_CMD_{GET,SET}_INFO.
const IPVS_INFO_ATTR_VERSION: u16 = 1;
const IPVS_INFO_ATTR_CONN_TAB_SIZE: u16 = 2;

// Inside IPVS_CMD_ATTR_SERVICE.
const IPVS_SVC_ATTR_AF: u16 = 1;
const IPVS_SVC_ATTR_PROTOCOL: u16 = 2;
const IPVS_SVC_ATTR_ADDR: u16 = 3;
const IPVS_SVC_ATTR_PORT: u16 = 4;
const IPVS_SVC_ATTR_FWMARK: u16 = 5;
const IPVS_SVC_ATTR_SCHED_NAME: u16 = 6;
const IPVS_SVC_ATTR_FLAGS: u16 = 7;
const IPVS_SVC_ATTR_TIMEOUT: u16 = 8;
const IPVS_SVC_ATTR_NETMASK: u16 = 9;
const IPVS_SVC_ATTR_STATS: u16 = 10;
const IPVS_SVC_ATTR_PE_NAME: u16 = 11;
const IPVS_SVC_ATTR_STATS64: u16 = 12;

// Inside IPVS_CMD_ATTR_DEST.
const IPVS_DEST_ATTR_ADDR: u16 = 1;
const IPVS_DEST_ATTR_PORT: u16 = 2;
const IPVS_DEST_ATTR_FWD_METHOD: u16 = 3;
const IPVS_DEST_ATTR_WEIGHT: u16 = 4;
const IPVS_DEST_ATTR_U_THRESH: u16 = 5;
const IPVS_DEST_ATTR_L_THRESH: u16 = 6;
const IPVS_DEST_ATTR_ACTIVE_CONNS: u16 = 7;
const IPVS_DEST_ATTR_INACT_CONNS: u16 = 8;
const IPVS_DEST_ATTR_PERSIST_CONNS: u16 = 9;
const IPVS_DEST_ATTR_STATS: u16 = 10;
const IPVS_DEST_ATTR_ADDR_FAMILY: u16 = 11;
const IPVS_DEST_ATTR_STATS64: u16 = 12;
const IPVS_DEST_ATTR_TUN_TYPE: u16 = 13;
const IPVS_DEST_ATTR_TUN_PORT: u16 = 14;
const IPVS_DEST_ATTR_TUN_FLAGS: u16 = 15;

// Inside IPVS_CMD_ATTR_DAEMON.
const IPVS_DAEMON_ATTR_STATE: u16 = 1;
const IPVS_DAEMON_ATTR_MCAST_IFN: u16 = 2;
const IPVS_DAEMON_ATTR_SYNC_ID: u16 = 3;

/// `IPVS_STATS_ATTR_*` names, from 1 (`IPVS_STATS_ATTR_PAD`, 11, is skipped).
const STATS_NAMES: &[&str] = &[
    "conns", "inpkts", "outpkts", "inbytes", "outbytes", "cps", "inpps", "outpps", "inbps",
    "outbps",
];

/// `IP_VS_SVC_F_*` service flags.
const SERVICE_FLAGS: &[(u32, &str)] = &[
    (0x0001, "persistent"),
    (0x0002, "hashed"),
    (0x0004, "onepacket"),
    (0x0008, "sched1"),
    (0x0010, "sched2"),
    (0x0020, "sched3"),
];

/// `IP_VS_CONN_F_FWD_MASK`: the forwarding method bits of a destination's conn flags.
const IP_VS_CONN_F_FWD_MASK: u32 = 0x7;

/// An IPVS command name (`IPVS_CMD_NEW_SERVICE`).
pub(crate) fn command_name(cmd: u8) -> Name {
    COMMANDS.get(usize::from(cmd)).map_or_else(
        || Name::Owned(format!("IPVS_CMD_{cmd}")),
        |name| Name::Borrowed(name),
    )
}

/// The IPVS command in `message`, when it is an IPVS message (to make an `ipvs` event of it).
pub fn ipvs_command(message: &NetlinkMessage) -> Option<IpvsCommand> {
    match &message.body {
        MessageBody::Ipvs(command) => Some(command.as_ref().clone()),
        _ => None,
    }
}

/// Decodes the attributes after the genl header of an IPVS message.
pub(crate) fn decode(
    cmd: u8,
    version: u8,
    attributes: &[u8],
    offset: usize,
    errors: &mut Vec<DecodeError>,
) -> IpvsCommand {
    let mut command = IpvsCommand {
        cmd: command_name(cmd),
        cmd_id: cmd,
        version,
        service: None,
        dest: None,
        daemon: None,
        timeout_tcp: None,
        timeout_tcp_fin: None,
        timeout_udp: None,
        info: None,
        other_attributes: Vec::new(),
    };
    let info_attributes = cmd == IPVS_CMD_SET_INFO || cmd == IPVS_CMD_GET_INFO;
    // The destination's address family may come from the service, so it is decoded last.
    let mut dest_attribute = None;
    for attribute in collect_attributes(attributes, offset, errors) {
        if info_attributes {
            let info = command.info.get_or_insert_with(IpvsInfo::default);
            match attribute.kind {
                IPVS_INFO_ATTR_VERSION => info.version = attribute.u32().map(version_string),
                IPVS_INFO_ATTR_CONN_TAB_SIZE => info.conn_tab_size = attribute.u32(),
                _ => command.other_attributes.push(attribute.to_raw()),
            }
            continue;
        }
        match attribute.kind {
            IPVS_CMD_ATTR_SERVICE => {
                command.service = Some(Box::new(decode_service(attribute, errors)))
            }
            IPVS_CMD_ATTR_DEST => dest_attribute = Some(attribute),
            IPVS_CMD_ATTR_DAEMON => {
                command.daemon = Some(Box::new(decode_daemon(attribute, errors)))
            }
            IPVS_CMD_ATTR_TIMEOUT_TCP => command.timeout_tcp = attribute.u32(),
            IPVS_CMD_ATTR_TIMEOUT_TCP_FIN => command.timeout_tcp_fin = attribute.u32(),
            IPVS_CMD_ATTR_TIMEOUT_UDP => command.timeout_udp = attribute.u32(),
            _ => command.other_attributes.push(attribute.to_raw()),
        }
    }
    if let Some(attribute) = dest_attribute {
        let service_af = command.service.as_ref().and_then(|s| s.af.clone());
        command.dest = Some(Box::new(decode_dest(attribute, service_af, errors)));
    }
    command
}

fn decode_service(nest: Attribute, errors: &mut Vec<DecodeError>) -> IpvsService {
    let mut service = IpvsService::default();
    let mut af = None;
    let mut address = None;
    let mut netmask = None;
    for attribute in collect_attributes(nest.value, nest.value_offset(), errors) {
        match attribute.kind {
            IPVS_SVC_ATTR_AF => af = attribute.u16(),
            IPVS_SVC_ATTR_PROTOCOL => service.protocol = attribute.u16().map(protocol_name),
            IPVS_SVC_ATTR_ADDR => address = Some(attribute.value),
            IPVS_SVC_ATTR_PORT => service.port = attribute.be16(),
            IPVS_SVC_ATTR_FWMARK => service.fwmark = attribute.u32(),
            IPVS_SVC_ATTR_SCHED_NAME => service.scheduler = Some(attribute.string()),
            IPVS_SVC_ATTR_FLAGS => {
                // struct ip_vs_flags { u32 flags; u32 mask; }
                service.flags = attribute.u32().map(|f| bit_names(f, SERVICE_FLAGS));
                service.flags_mask = read_u32(attribute.value, 4);
            }
            IPVS_SVC_ATTR_TIMEOUT => service.timeout = attribute.u32(),
            IPVS_SVC_ATTR_NETMASK => netmask = Some(attribute),
            IPVS_SVC_ATTR_PE_NAME => service.pe_name = Some(attribute.string()),
            IPVS_SVC_ATTR_STATS => {
                if service.stats.is_none() {
                    service.stats = Some(decode_stats(attribute, errors));
                }
            }
            IPVS_SVC_ATTR_STATS64 => service.stats = Some(decode_stats(attribute, errors)),
            _ => service.other_attributes.push(attribute.to_raw()),
        }
    }
    service.af = af.map(address_family_name);
    service.address = address.and_then(|bytes| ipvs_address(bytes, af));
    service.netmask = netmask.and_then(|attribute| match af {
        // IPv6 services carry a prefix length; IPv4 ones a mask in network byte order.
        Some(AF_INET6) => attribute.u32().map(|len| len.to_string()),
        _ => attribute
            .value
            .get(..4)
            .map(|b| ipv4_text(Ipv4Addr::new(b[0], b[1], b[2], b[3])).into()),
    });
    service
}

fn decode_dest(
    nest: Attribute,
    service_af: Option<Name>,
    errors: &mut Vec<DecodeError>,
) -> IpvsDest {
    let mut dest = IpvsDest::default();
    let mut af = None;
    let mut address = None;
    for attribute in collect_attributes(nest.value, nest.value_offset(), errors) {
        match attribute.kind {
            IPVS_DEST_ATTR_ADDR => address = Some(attribute.value),
            IPVS_DEST_ATTR_PORT => dest.port = attribute.be16(),
            IPVS_DEST_ATTR_FWD_METHOD => {
                dest.conn_flags = attribute.u32();
                dest.forwarding = attribute.u32().map(forwarding_name);
            }
            IPVS_DEST_ATTR_WEIGHT => dest.weight = attribute.i32(),
            IPVS_DEST_ATTR_U_THRESH => dest.u_threshold = attribute.u32(),
            IPVS_DEST_ATTR_L_THRESH => dest.l_threshold = attribute.u32(),
            IPVS_DEST_ATTR_ACTIVE_CONNS => dest.active_conns = attribute.u32(),
            IPVS_DEST_ATTR_INACT_CONNS => dest.inact_conns = attribute.u32(),
            IPVS_DEST_ATTR_PERSIST_CONNS => dest.persist_conns = attribute.u32(),
            IPVS_DEST_ATTR_ADDR_FAMILY => af = attribute.u16(),
            IPVS_DEST_ATTR_STATS => {
                if dest.stats.is_none() {
                    dest.stats = Some(decode_stats(attribute, errors));
                }
            }
            IPVS_DEST_ATTR_STATS64 => dest.stats = Some(decode_stats(attribute, errors)),
            IPVS_DEST_ATTR_TUN_TYPE => dest.tun_type = attribute.u8().map(tunnel_type_name),
            IPVS_DEST_ATTR_TUN_PORT => dest.tun_port = attribute.be16(),
            IPVS_DEST_ATTR_TUN_FLAGS => dest.tun_flags = attribute.u16(),
            _ => dest.other_attributes.push(attribute.to_raw()),
        }
    }
    let af = af.or(match service_af.as_deref() {
        Some("inet") => Some(AF_INET),
        Some("inet6") => Some(AF_INET6),
        _ => None,
    });
    dest.af = af.map(address_family_name);
    dest.address = address.and_then(|bytes| ipvs_address(bytes, af));
    dest
}

fn decode_daemon(nest: Attribute, errors: &mut Vec<DecodeError>) -> IpvsDaemon {
    let mut daemon = IpvsDaemon::default();
    for attribute in collect_attributes(nest.value, nest.value_offset(), errors) {
        match attribute.kind {
            IPVS_DAEMON_ATTR_STATE => {
                daemon.state = attribute.u32().map(|state| match state {
                    1 => "master".to_string(),
                    2 => "backup".to_string(),
                    other => other.to_string(),
                })
            }
            IPVS_DAEMON_ATTR_MCAST_IFN => daemon.mcast_ifn = Some(attribute.string()),
            IPVS_DAEMON_ATTR_SYNC_ID => daemon.sync_id = attribute.u32(),
            _ => daemon.other_attributes.push(attribute.to_raw()),
        }
    }
    daemon
}

/// Stats counters: u32 or u64 by value length (`STATS` mixes both, `STATS64` is all u64).
/// The counters of a `STATS`/`STATS64` nest, by their names (static: no string per counter).
fn decode_stats(nest: Attribute, errors: &mut Vec<DecodeError>) -> BTreeMap<Name, u64> {
    let mut stats = BTreeMap::new();
    for attribute in collect_attributes(nest.value, nest.value_offset(), errors) {
        let Some(name) = STATS_NAMES.get(usize::from(attribute.kind).wrapping_sub(1)) else {
            continue;
        };
        let value = match attribute.value.len() {
            8 => attribute.u64(),
            _ => attribute.u32().map(u64::from),
        };
        if let Some(value) = value {
            stats.insert(Name::Borrowed(name), value);
        }
    }
    stats
}

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// An IPVS address (`union nf_inet_addr`, 16 bytes; IPv4 uses the first 4). Without a known
/// family, 12 trailing zero bytes mean IPv4.
fn ipvs_address(bytes: &[u8], af: Option<u16>) -> Option<String> {
    let v4 = || ip_from_bytes(bytes.get(..4)?);
    let v6 = || ip_from_bytes(bytes.get(..16)?);
    let address = match af {
        Some(AF_INET) => v4(),
        Some(AF_INET6) => v6(),
        _ if bytes.len() >= 4 && bytes[4..].iter().all(|&b| b == 0) => v4(),
        _ => v6(),
    };
    address.map(|a| a.to_string())
}

/// `TCP`/`UDP`/`SCTP`, else the number.
fn protocol_name(protocol: u16) -> String {
    match protocol {
        6 => "TCP".into(),
        17 => "UDP".into(),
        132 => "SCTP".into(),
        other => other.to_string(),
    }
}

/// The forwarding method in conn flags (`IP_VS_CONN_F_MASQ`, `LOCALNODE`, `TUNNEL`, `DROUTE`,
/// `BYPASS`).
fn forwarding_name(conn_flags: u32) -> String {
    match conn_flags & IP_VS_CONN_F_FWD_MASK {
        0 => "masq".into(),
        1 => "local".into(),
        2 => "tunnel".into(),
        3 => "droute".into(),
        4 => "bypass".into(),
        other => other.to_string(),
    }
}

/// `IP_VS_CONN_F_TUNNEL_TYPE_*`.
fn tunnel_type_name(kind: u8) -> String {
    match kind {
        0 => "ipip".into(),
        1 => "gue".into(),
        2 => "gre".into(),
        other => other.to_string(),
    }
}

/// `IP_VS_VERSION_CODE` (0x010201) as `1.2.1`.
fn version_string(code: u32) -> String {
    format!(
        "{}.{}.{}",
        (code >> 16) & 0xff,
        (code >> 8) & 0xff,
        code & 0xff
    )
}
