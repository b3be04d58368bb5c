//! calico-node's IPv4 autodetection (`IP` unset or `autodetect`, with
//! `IP_AUTODETECTION_METHOD`), replayed as calico's code runs it, in
//! `node/pkg/lifecycle/startup/autodetection/` (read at the tags v3.21.3 to v3.32.1):
//! `AutoDetectCIDR` and the method functions of `autodetection_methods.go` (in
//! `startup/startup.go` before v3.22.0), `FilteredEnumeration` (`filtered.go`), `GetInterfaces`
//! and `convertInterface` (`interfaces.go`), `ReachDestination` (`reachaddr.go`), and
//! `DEFAULT_INTERFACES_TO_EXCLUDE` (`autodetection_linux.go`; `startup_linux.go` before v3.22.0).
//!
//! - Interfaces are `net.Interfaces()` (the link dump's order) walked **in reverse** ("to
//!   maintain behavior with older versions"); an include list and an exclude list are each one
//!   regex, `(a)|(b)|…`, matched unanchored against the name (Go's `MatchString`).
//! - An interface's IPv4 addresses (Go's `To4`) in the address dump's order; the first that is
//!   global unicast (Go's `IsGlobalUnicast`: not link-local, loopback, multicast, unspecified or
//!   255.255.255.255) and inside a `cidr=` network when there are any, is the pick, with its
//!   prefix length. Links up or down alike: calico does not look at the flags.
//! - `first-found` (the default, also for an empty method): the version's exclusion list.
//!   `interface=LIST`: only names matching it, nothing excluded. `skip-interface=LIST`: the
//!   exclusion list and LIST. `cidr=LIST`: every interface, addresses inside LIST (each entry
//!   parsed by `net.ParseCIDR`; one that does not parse voids the method). Lists are split on
//!   `\s*,\s*`. `can-reach=DEST`: a UDP "connection" to DEST port 80 (a route lookup, nothing
//!   sent), its source address found on an interface (every interface). `kubernetes-internal-ip`
//!   (a prefix match, from v3.22.0): the Node's first IPv4 InternalIP, with the prefix length of
//!   the interface that holds it; v3.22.0–v3.22.3 and v3.23.0–v3.23.1 returned the prefix's
//!   network address (`ParseCIDR` masks it; fixed by keeping the IP, "Return unmasked CIDR").
//!   Anything else: "Invalid IP autodetection method", and calico-node exits.
//! - Nothing detected: calico-node keeps the address already on its Node resource, or exits.
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use regex::Regex;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{check_network_address, network_of, pick, ComponentPick, NodeSnapshot};
use crate::explain::go_net;
use crate::model::event::Diagnosis;

/// A calico release number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CalicoVersion {
    /// 3 in v3.24.1.
    pub major: u32,
    /// 24 in v3.24.1.
    pub minor: u32,
    /// 1 in v3.24.1.
    pub patch: u32,
}

impl CalicoVersion {
    /// The newest release whose source this model was read from (what "newest" means).
    pub const NEWEST_CHECKED: CalicoVersion = CalicoVersion::new(3, 32, 1);

    /// `vMAJOR.MINOR.PATCH`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        CalicoVersion {
            major,
            minor,
            patch,
        }
    }

    /// The versions whose `kubernetes-internal-ip` returned the network address.
    fn masks_internal_ip(self) -> bool {
        matches!(
            (self.major, self.minor, self.patch),
            (3, 22, 0..=3) | (3, 23, 0..=1)
        )
    }

    /// Whether `kubernetes-internal-ip` exists (from v3.22.0).
    fn has_internal_ip_method(self) -> bool {
        self >= CalicoVersion::new(3, 22, 0)
    }
}

impl fmt::Display for CalicoVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A calico version that is not `[v]MAJOR.MINOR[.PATCH]`.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{0:?} is not a calico version (as v3.24.1)")]
pub struct CalicoVersionError(pub String);

impl FromStr for CalicoVersion {
    type Err = CalicoVersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || CalicoVersionError(s.to_string());
        let numbers: Vec<u32> = s
            .strip_prefix('v')
            .unwrap_or(s)
            .split('.')
            .map(|n| n.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        match numbers.as_slice() {
            [major, minor] => Ok(CalicoVersion::new(*major, *minor, 0)),
            [major, minor, patch] => Ok(CalicoVersion::new(*major, *minor, *patch)),
            _ => Err(bad()),
        }
    }
}

/// calico-node's settings beyond the method ([`super::ComponentSettings::calico_method`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalicoSettings {
    /// The release running; `None`: the newest ([`CalicoVersion::NEWEST_CHECKED`]), and the
    /// `kubernetes-internal-ip` finding of the releases that masked the address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<CalicoVersion>,
}

/// `DEFAULT_INTERFACES_TO_EXCLUDE` up to v3.23.3 and in v3.24.0–v3.24.2 (unanchored: `lo`
/// excludes every name with "lo" in it).
const EXCLUDE_UNANCHORED: &[&str] = &[
    "docker.*",
    "cbr.*",
    "dummy.*",
    "virbr.*",
    "lxcbr.*",
    "veth.*",
    "lo",
    "cali.*",
    "tunl.*",
    "flannel.*",
    "kube-ipvs.*",
    "cni.*",
];
/// v3.23.4 and v3.24.3: anchored.
const EXCLUDE_ANCHORED: &[&str] = &[
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
];
/// v3.23.5, v3.24.4–v3.24.5: calico's own VXLAN and WireGuard devices too.
const EXCLUDE_OWN_DEVICES: &[&str] = &[
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
    "^vxlan\\.calico.*",
    "^vxlan-v6\\.calico.*",
    "^wireguard\\.cali.*",
    "^wg-v6\\.cali.*",
];
/// v3.24.6: and NodeLocal DNSCache's.
const EXCLUDE_NODELOCALDNS: &[&str] = &[
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
    "^vxlan\\.calico.*",
    "^vxlan-v6\\.calico.*",
    "^wireguard\\.cali.*",
    "^wg-v6\\.cali.*",
    "^nodelocaldns.*",
];
/// v3.25.0 on: podman's and Docker's user-defined bridges (`br-…`, calico#1628) too.
const EXCLUDE_BRIDGES: &[&str] = &[
    "^docker.*",
    "^cbr.*",
    "^dummy.*",
    "^podman.*",
    "^virbr.*",
    "^lxcbr.*",
    "^veth.*",
    "^lo",
    "^br-.*",
    "^cali.*",
    "^tunl.*",
    "^flannel.*",
    "^kube-ipvs.*",
    "^cni.*",
    "^vxlan\\.calico.*",
    "^vxlan-v6\\.calico.*",
    "^wireguard\\.cali.*",
    "^wg-v6\\.cali.*",
    "^nodelocaldns.*",
];

/// `DEFAULT_INTERFACES_TO_EXCLUDE` of `version` (releases before v3.21.3 were not read: they get
/// v3.21.3's).
pub fn default_exclusions(version: CalicoVersion) -> &'static [&'static str] {
    match (version.major, version.minor, version.patch) {
        (4.., _, _) | (3, 25.., _) => EXCLUDE_BRIDGES,
        (3, 24, 6..) => EXCLUDE_NODELOCALDNS,
        (3, 24, 4..=5) | (3, 23, 5..) => EXCLUDE_OWN_DEVICES,
        (3, 24, 3) | (3, 23, 4) => EXCLUDE_ANCHORED,
        _ => EXCLUDE_UNANCHORED,
    }
}

/// Why calico detects nothing (its log messages).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum CalicoError {
    /// An include or exclude regex does not compile.
    #[error("Invalid interface regex {regex:?}: {error}")]
    InvalidRegex {
        /// The joined regex.
        regex: String,
        /// The compiler's complaint.
        error: String,
    },
    /// The filters left no interface.
    #[error("no valid host interfaces found")]
    NoInterfaces,
    /// No interface left has a usable address.
    #[error("no valid IPv4 addresses found on the host interfaces")]
    NoAddress,
    /// A `cidr=` entry `net.ParseCIDR` refuses: the whole method is void.
    #[error("Invalid CIDR {0:?} for IP autodetection method")]
    InvalidCidr(String),
    /// `can-reach=` names a host, which calico resolves with Go's resolver.
    #[error("{0:?} is a host name: calico resolves it (udp4) with Go's resolver, which the snapshot cannot answer")]
    HostName(String),
    /// `can-reach=` names an IPv6 address: `udp4` cannot dial it.
    #[error("dial udp4 [{0}]:80: no suitable address")]
    NotIpv4(IpAddr),
    /// No route to the `can-reach=` destination.
    #[error("dial udp4 {0}:80: network is unreachable")]
    Unreachable(IpAddr),
    /// The source of the `can-reach=` route is on no interface.
    #[error(
        "autodetected IPv4 address does not match any addresses found on local interfaces: {0}"
    )]
    SourceNotLocal(IpAddr),
    /// The Node has no IPv4 InternalIP.
    #[error("the Node has no IPv4 InternalIP: Unable to parse CIDR \"\"")]
    NoInternalIp,
    /// The InternalIP is on no interface: `GetLocalCIDR` returns it bare, `ParseCIDR` refuses it.
    #[error("Unable to parse CIDR {0}: the InternalIP is on no interface of this node")]
    InternalIpNotLocal(IpAddr),
    /// A method calico does not know.
    #[error("Invalid IP autodetection method: {0}")]
    UnknownMethod(String),
}

/// `regexp.MustCompile(`\s*,\s*`).Split(text, -1)`: `,` with the whitespace around it (Go's
/// `\s`: tab, newline, form feed, carriage return, space) separates entries; whitespace at the
/// very start or end stays.
pub fn split_list(text: &str) -> Vec<&str> {
    let ws: &[char] = &['\t', '\n', '\x0c', '\r', ' '];
    let parts: Vec<&str> = text.split(',').collect();
    let last = parts.len() - 1;
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let p = if i > 0 { p.trim_start_matches(ws) } else { p };
            if i < last {
                p.trim_end_matches(ws)
            } else {
                p
            }
        })
        .collect()
}

/// Go's `net.ParseCIDR` as `matchCIDRs` then uses it: the network, as an IPv4 one when it is
/// IPv4-mapped (its mask's last 32 bits, as `IPNet.Contains` reads it).
fn parse_cidr(text: &str) -> Option<(IpAddr, u8)> {
    let (addr, len) = text.split_once('/')?;
    let addr: IpAddr = addr.parse().ok()?;
    if len.is_empty() || !len.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let len: u8 = len.parse().ok()?;
    if len > if addr.is_ipv4() { 32 } else { 128 } {
        return None;
    }
    let net = network_of(addr, len);
    Some(match (net, go_net::to4(net)) {
        (IpAddr::V6(_), Some(v4)) => (IpAddr::V4(v4), len.saturating_sub(96)),
        _ => (net, len),
    })
}

/// One regex of a list, as `GetInterfaces` builds it: `(a)|(b)|…`; `None` for an empty list.
fn joined(list: &[&str]) -> Result<Option<(Regex, String)>, CalicoError> {
    if list.is_empty() {
        return Ok(None);
    }
    let text = format!("({})", list.join(")|("));
    Regex::new(&text)
        .map(|r| Some((r, text.clone())))
        .map_err(|e| CalicoError::InvalidRegex {
            regex: text,
            error: e.to_string(),
        })
}

/// An interface `GetInterfaces` keeps, with its IPv4 addresses in order.
struct Interface<'a> {
    name: &'a str,
    cidrs: Vec<(IpAddr, u8)>,
}

/// `GetInterfaces(net.Interfaces, include, exclude, 4)`: every interface, in reverse, that the
/// include regex (when any) matches and the exclude regex does not. Says the walk in `why`.
fn get_interfaces<'a>(
    s: &'a NodeSnapshot,
    include: &[&str],
    exclude: &[&str],
    why: &mut Vec<String>,
) -> Result<Vec<Interface<'a>>, CalicoError> {
    let include_re = joined(include)?;
    let exclude_re = joined(exclude)?;
    let mut walk = Vec::new();
    let mut kept = Vec::new();
    for name in s.interface_names().into_iter().rev() {
        let included = include_re.as_ref().is_none_or(|(r, _)| r.is_match(name));
        let excluded_by = exclude_re
            .as_ref()
            .filter(|(r, _)| r.is_match(name))
            .map(|_| {
                exclude
                    .iter()
                    .find(|p| Regex::new(p).is_ok_and(|r| r.is_match(name)))
                    .copied()
                    .unwrap_or("the exclusion regex")
            });
        match (included, excluded_by) {
            (false, _) => walk.push(format!("{name} (not matched)")),
            (true, Some(p)) => walk.push(format!("{name} (excluded: {p})")),
            (true, None) => {
                walk.push(name.to_string());
                let cidrs = s
                    .addresses_of(name)
                    .filter(|(a, _)| go_net::is_ipv4(*a))
                    .map(|(a, f)| (a, f.prefix_len))
                    .collect();
                kept.push(Interface { name, cidrs });
            }
        }
    }
    why.push(format!(
        "interfaces as calico walks them (net.Interfaces() in reverse): {}",
        if walk.is_empty() {
            "none".to_string()
        } else {
            walk.join(", ")
        }
    ));
    Ok(kept)
}

/// `FilteredEnumeration(include, exclude, cidrs, 4)`: the first global unicast IPv4 address
/// (inside one of `cidrs`, when any) of the first interface that has one.
fn filtered_enumeration(
    s: &NodeSnapshot,
    include: &[&str],
    exclude: &[&str],
    cidrs: &[(IpAddr, u8)],
    why: &mut Vec<String>,
) -> Result<IpAddr, CalicoError> {
    let interfaces = get_interfaces(s, include, exclude, why)?;
    if interfaces.is_empty() {
        return Err(CalicoError::NoInterfaces);
    }
    for i in &interfaces {
        let mut passed = Vec::new();
        for (a, len) in &i.cidrs {
            let refused = go_net::not_global_because(*a).or_else(|| {
                (!cidrs.is_empty() && !cidrs.iter().any(|(n, l)| super::in_prefix(*a, *n, *l)))
                    .then_some("outside the cidr= networks")
            });
            match refused {
                Some(because) => passed.push(format!("{a}/{len} ({because})")),
                None => {
                    let skipped = if passed.is_empty() {
                        String::new()
                    } else {
                        format!(", after {}", passed.join(", "))
                    };
                    why.push(format!("{}: {a}/{len} taken{skipped}", i.name));
                    return Ok(*a);
                }
            }
        }
        why.push(match passed.is_empty() {
            true => format!("{}: no IPv4 address", i.name),
            false => format!("{}: nothing usable: {}", i.name, passed.join(", ")),
        });
    }
    Err(CalicoError::NoAddress)
}

/// The prefix length of `ip` as `GetInterfaces(nil, nil, 4)` finds it (every interface, in
/// reverse: the first that holds it).
fn local_cidr(s: &NodeSnapshot, ip: IpAddr) -> Option<(&str, u8)> {
    s.interface_names().into_iter().rev().find_map(|name| {
        s.addresses_of(name)
            .find(|(a, _)| go_net::is_ipv4(*a) && go_net::equal(*a, ip))
            .map(|(_, f)| (name, f.prefix_len))
    })
}

/// `ReachDestination(dest, 4)`: the source the kernel gives a UDP socket connected to dest:80,
/// found on an interface.
fn can_reach(s: &NodeSnapshot, dest: &str, why: &mut Vec<String>) -> Result<IpAddr, CalicoError> {
    let ip: IpAddr = dest
        .parse()
        .map_err(|_| CalicoError::HostName(dest.to_string()))?;
    if !go_net::is_ipv4(ip) {
        return Err(CalicoError::NotIpv4(ip));
    }
    let r = s.route_get(ip).ok_or(CalicoError::Unreachable(ip))?;
    let src = r.src.ok_or(CalicoError::Unreachable(ip))?;
    why.push(format!(
        "connect(udp4, {ip}:80) is a route lookup: table {}, type {}, dev {}, source {src}",
        r.table, r.route_type, r.dev
    ));
    if !r.tied_devs.is_empty() {
        why.push(format!(
            "{} and {} have routes of that prefix (one subnet on several interfaces): the kernel takes the first in its table, lowest metric then the earliest added, as the dump lists them: {} (a metric set later, or policy rules, can change that)",
            r.dev,
            r.tied_devs.join(", "),
            r.dev
        ));
    }
    match local_cidr(s, src) {
        Some((name, len)) => {
            why.push(format!(
                "{src} is {src}/{len} on {name} (every interface, in reverse)"
            ));
            Ok(src)
        }
        None => Err(CalicoError::SourceNotLocal(src)),
    }
}

/// `autoDetectUsingK8sInternalIP`: the Node's first IPv4 InternalIP (what kubelet set) with its
/// interface's prefix length; the network address in the versions that masked it.
fn kubernetes_internal_ip(
    s: &NodeSnapshot,
    version: Option<CalicoVersion>,
    internal_ips: &[IpAddr],
    why: &mut Vec<String>,
    findings: &mut Vec<Diagnosis>,
) -> Result<IpAddr, CalicoError> {
    let ip = internal_ips
        .iter()
        .copied()
        .find(|a| go_net::is_ipv4(*a))
        .ok_or(CalicoError::NoInternalIp)?;
    let (name, len) = local_cidr(s, ip).ok_or(CalicoError::InternalIpNotLocal(ip))?;
    why.push(format!(
        "the node's InternalIP {ip} (as kubelet sets it) is {ip}/{len} on {name} (GetLocalCIDR)"
    ));
    let network = network_of(ip, len);
    match version {
        Some(v) if v.masks_internal_ip() => {
            why.push(format!(
                "calico {v} returns ParseCIDR's network instead: {network}/{len} (fixed in v3.22.4 and v3.23.2)"
            ));
            Ok(network)
        }
        None if network != ip => {
            why.push(format!(
                "calico v3.22.0–v3.22.3 and v3.23.0–v3.23.1 used the parsed network instead: {network}/{len}"
            ));
            check_network_address(
                s,
                "calico v3.22.0–v3.22.3 or v3.23.0–v3.23.1 (kubernetes-internal-ip)",
                network,
                findings,
            );
            Ok(ip)
        }
        _ => Ok(ip),
    }
}

/// calico's IPv4 autodetection with `method` (`IP_AUTODETECTION_METHOD`; `None`: first-found).
/// `internal_ips` are the Node's InternalIPs (kubelet's pick) for `kubernetes-internal-ip`.
pub(crate) fn calico(
    s: &NodeSnapshot,
    method: Option<&str>,
    settings: &CalicoSettings,
    internal_ips: &[IpAddr],
    findings: &mut Vec<Diagnosis>,
) -> ComponentPick {
    let method = method.unwrap_or("first-found");
    let version = settings.version.unwrap_or(CalicoVersion::NEWEST_CHECKED);
    let exclusions = default_exclusions(version);
    let mut why = vec![match settings.version {
        Some(v) => format!("calico {v}"),
        None => format!("calico version not given: the newest read ({version})"),
    }];
    let with_exclusions = |why: &mut Vec<String>| {
        why.push(format!(
            "{version}'s exclusion list: {}",
            exclusions.join(" ")
        ));
    };
    let result = if method.is_empty() || method == "first-found" {
        with_exclusions(&mut why);
        filtered_enumeration(s, &[], exclusions, &[], &mut why)
    } else if let Some(list) = method.strip_prefix("interface=") {
        let include = split_list(list);
        why.push(format!("names matching ({})", include.join(")|(")));
        filtered_enumeration(s, &include, &[], &[], &mut why)
    } else if let Some(list) = method.strip_prefix("cidr=") {
        let cidrs: Result<Vec<(IpAddr, u8)>, CalicoError> = split_list(list)
            .into_iter()
            .map(|c| parse_cidr(c).ok_or_else(|| CalicoError::InvalidCidr(c.to_string())))
            .collect();
        cidrs.and_then(|cidrs| filtered_enumeration(s, &[], &[], &cidrs, &mut why))
    } else if let Some(dest) = method.strip_prefix("can-reach=") {
        can_reach(s, dest, &mut why)
    } else if let Some(list) = method.strip_prefix("skip-interface=") {
        with_exclusions(&mut why);
        let skipped = split_list(list);
        why.push(format!("and ({})", skipped.join(")|(")));
        let exclude: Vec<&str> = exclusions.iter().copied().chain(skipped).collect();
        filtered_enumeration(s, &[], &exclude, &[], &mut why)
    } else if method.starts_with("kubernetes-internal-ip") && version.has_internal_ip_method() {
        kubernetes_internal_ip(s, settings.version, internal_ips, &mut why, findings)
    } else {
        Err(CalicoError::UnknownMethod(method.to_string()))
    };
    let picked = match result {
        Ok(ip) => vec![ip],
        Err(e) => {
            let end = match e {
                CalicoError::UnknownMethod(_) => "calico-node exits",
                _ => "nothing detected: calico-node keeps the address its Node resource has, else exits",
            };
            why.push(format!("{e}: {end}"));
            vec![]
        }
    };
    pick("calico", method, picked, why)
}
