//! The node address audit behind `nodeip-trace explain`: from one snapshot of what the kernel
//! says about a node (links, addresses, routes, the hosts file), what each Kubernetes component
//! would pick as "the node IP" or "the local addresses", why, and where they disagree.
//!
//! Each picker models the component's documented logic (the versions named in the seeds):
//! - kubelet InternalIP: `--node-ip`, else the node name looked up through glibc `getaddrinfo`
//!   (the hosts-file order re-sorted by [`rfc6724::sort`], first IPv4 non-loopback), else the first
//!   global address of the default route's interface;
//! - calico IP autodetection: `first-found`, `interface=`, `skip-interface=`, `can-reach=`, `cidr=`,
//!   `kubernetes-internal-ip` (v3.22.1–v3.22.3 took the prefix's network address: seed 001);
//! - kube-proxy IPVS NodePort addresses: the old local-table path (each local route's `src`,
//!   which is the primary for a secondary address: seeds 002/004) and the address-dump path, both
//!   filtered by `nodePortAddresses` (CIDRs or `primary`);
//! - OpenELB `interface: can_reach:IP`: the route lookup's device, refused when it is `lo`
//!   (seed 003).
//!
//! Route lookups are modelled from the snapshot (local table first, then longest prefix; no
//! policy rules): what the kernel would answer `ip route get`.
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::resolver::glibc::gai_conf::GaiConf;
use super::resolver::glibc::rfc6724::{self, Candidate, SourceInterface};
use super::resolver::go_choice::GoResolverChoice;
use super::resolver::{go, musl};
use crate::model::event::{Diagnosis, DiagnosisId, Severity};
use crate::model::facts::{AddressFact, LinkFact, RouteFact};
use crate::model::getaddrinfo::PairWhy;
use crate::model::netlink::{MessageBody, NetlinkMessage};

/// Everything the audit looks at.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    /// The node name (kubelet's default: the host name).
    pub hostname: String,
    /// Interfaces.
    pub links: Vec<LinkFact>,
    /// Addresses in the kernel's dump order (primary before its secondaries).
    pub addresses: Vec<AddressFact>,
    /// Routes of every table.
    pub routes: Vec<RouteFact>,
    /// Hosts-file addresses of the node name, in file order (what glibc's resolver lists).
    pub hosts: Vec<IpAddr>,
}

/// What each component's settings are (defaults mirror the components' defaults).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComponentSettings {
    /// kubelet `--node-ip`.
    pub node_ip: Option<IpAddr>,
    /// calico `IP_AUTODETECTION_METHOD` (default `first-found`).
    pub calico_method: Option<String>,
    /// kube-proxy `nodePortAddresses` (CIDRs, or `primary`); empty = all local addresses.
    pub node_port_addresses: Vec<String>,
    /// OpenELB `interface: can_reach:IP`.
    pub openelb_can_reach: Option<IpAddr>,
}

/// The kernel's answer to `ip route get` in the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteAnswer {
    /// Table (`local`, `main`, ...).
    pub table: String,
    /// Route type (`local`, `unicast`, ...).
    #[serde(rename = "type")]
    pub route_type: String,
    /// Output device (`lo` for local addresses).
    pub dev: String,
    /// The source the kernel would choose.
    pub src: Option<IpAddr>,
}

/// One component's pick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComponentPick {
    /// `kubelet`, `calico`, `kube-proxy (local table)`, ...
    pub component: String,
    /// The setting that decided (`--node-ip`, `first-found`, ...).
    pub setting: String,
    /// The addresses it picks (one for a node IP, several for kube-proxy), in order.
    pub picked: Vec<IpAddr>,
    /// How, step by step.
    pub reasoning: Vec<String>,
}

/// One local address and the `src` its local-table route carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalAddressSource {
    /// The local address.
    pub address: IpAddr,
    /// Its interface.
    pub ifname: String,
    /// Secondary on its prefix.
    pub secondary: bool,
    /// The local route's `src` (what the local-table path reads).
    pub src: Option<IpAddr>,
}

/// How one resolver would order the node name's addresses on this node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResolverOrder {
    /// `glibc`, `musl` or `go`.
    pub resolver: String,
    /// Who uses it among node components (as built upstream; see research notes in the docs).
    pub used_by: String,
    /// The order it returns.
    pub order: Vec<IpAddr>,
    /// The rule behind each adjacent pair (`first before second: rule N (name): detail`), or
    /// why it keeps the resolver's order.
    pub reasoning: Vec<String>,
}

/// The audit's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// The input.
    pub snapshot: NodeSnapshot,
    /// The node name's order under each resolver a node's components use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolvers: Vec<ResolverOrder>,
    /// Which resolver a Go program built with cgo would use for the node name here (Go's
    /// `net/conf.go` rules on the node's nsswitch.conf and resolv.conf), when the caller read
    /// them: its own, or the C library's through cgo.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub go_cgo_choice: Option<GoResolverChoice>,
    /// Local addresses with their local routes' `src`.
    pub local_sources: Vec<LocalAddressSource>,
    /// Each component's pick.
    pub picks: Vec<ComponentPick>,
    /// Known failure patterns found, and disagreements.
    pub findings: Vec<Diagnosis>,
}

fn parse_prefix(text: &str) -> Option<(IpAddr, u8)> {
    if text == "default" {
        return None;
    }
    let (addr, len) = text.split_once('/').unwrap_or((text, ""));
    let addr: IpAddr = addr.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    Some((addr, len.parse().unwrap_or(max)))
}

/// Whether `addr` is inside `net/len`.
pub fn in_prefix(addr: IpAddr, net: IpAddr, len: u8) -> bool {
    match (addr, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

/// What to do about seed 001's pattern (a network/broadcast or unassigned address in use).
pub const REMEDY_NETWORK_ADDRESS: &str = "calico v3.22.1–v3.22.3 with IP_AUTODETECTION_METHOD=kubernetes-internal-ip takes the prefix's network address: upgrade to v3.22.4+ or use another method (e.g. interface= or cidr=); otherwise fix whatever configured this address";

/// What to do about seeds 002/004 (a secondary address without NodePort services).
pub const REMEDY_SECONDARY_SKIPPED: &str = "set kube-proxy nodePortAddresses (a newer kube-proxy reads the address dump), or configure the VIP as a /32 so it is a primary";

/// The network and broadcast addresses of an IPv4 `addr/len` (none for /31, /32 and IPv6; a /0
/// spans 0.0.0.0 to 255.255.255.255).
pub fn network_and_broadcast(addr: IpAddr, len: u8) -> Option<(IpAddr, IpAddr)> {
    let IpAddr::V4(a) = addr else { return None };
    if len >= 31 {
        return None;
    }
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    let net = u32::from(a) & mask;
    Some((IpAddr::V4(net.into()), IpAddr::V4((net | !mask).into())))
}

impl NodeSnapshot {
    /// Builds a snapshot from the kernel's `RTM_NEWLINK`/`RTM_NEWADDR`/`RTM_NEWROUTE` messages
    /// (a live dump, or the replies in a capture; later messages about the same thing win).
    pub fn from_messages(hostname: &str, hosts: Vec<IpAddr>, messages: &[NetlinkMessage]) -> Self {
        let mut s = NodeSnapshot {
            hostname: hostname.to_string(),
            hosts,
            ..Default::default()
        };
        for m in messages {
            let mut facts = crate::model::facts::ConversationFacts::default();
            facts.add(m);
            match &m.body {
                MessageBody::Link(_) => {
                    for l in facts.links {
                        s.links.retain(|x| x.index != l.index);
                        s.links.push(l);
                    }
                }
                MessageBody::Address(_) => {
                    for a in facts.addresses {
                        s.addresses.retain(|x| x.address != a.address);
                        s.addresses.push(a);
                    }
                }
                MessageBody::Route(_) => {
                    for r in facts.routes {
                        s.routes.retain(|x| x != &r);
                        s.routes.push(r);
                    }
                }
                _ => {}
            }
        }
        s
    }

    fn address_rows(&self) -> impl Iterator<Item = (IpAddr, &AddressFact)> {
        self.addresses
            .iter()
            .filter_map(|a| Some((a.address.parse().ok()?, a)))
    }

    /// The first primary address of `dev` of `dst`'s family, preferring one whose prefix holds
    /// `dst`: the kernel's source choice without a `src` on the route.
    fn primary_on(&self, dev: &str, dst: IpAddr) -> Option<IpAddr> {
        let candidates: Vec<_> = self
            .address_rows()
            .filter(|(a, f)| f.ifname == dev && !f.secondary && a.is_ipv4() == dst.is_ipv4())
            .collect();
        candidates
            .iter()
            .find(|(a, f)| in_prefix(dst, *a, f.prefix_len))
            .or(candidates.first())
            .map(|(a, _)| *a)
    }

    /// What `ip route get DST` would answer (no policy rules).
    pub fn route_get(&self, dst: IpAddr) -> Option<RouteAnswer> {
        let best = |table_is_local: bool| {
            self.routes
                .iter()
                .filter(|r| (r.table == "local") == table_is_local)
                .filter(|r| !table_is_local || r.route_type == "local")
                .filter(|r| table_is_local || r.route_type == "unicast")
                .filter_map(|r| {
                    let (net, len) = parse_prefix(&r.dst).unwrap_or(match dst {
                        IpAddr::V4(_) => ("0.0.0.0".parse().ok()?, 0),
                        IpAddr::V6(_) => ("::".parse().ok()?, 0),
                    });
                    in_prefix(dst, net, len).then_some((len, r))
                })
                .max_by_key(|(len, _)| *len)
                .map(|(_, r)| r)
        };
        if let Some(r) = best(true) {
            return Some(RouteAnswer {
                table: r.table.to_string(),
                route_type: r.route_type.to_string(),
                dev: "lo".into(),
                src: r.src.as_deref().and_then(|s| s.parse().ok()).or(Some(dst)),
            });
        }
        let r = best(false)?;
        let dev = r.dev.as_deref().unwrap_or_default().to_string();
        let src = r
            .src
            .as_deref()
            .and_then(|s| s.parse().ok())
            .or_else(|| self.primary_on(&dev, dst));
        Some(RouteAnswer {
            table: r.table.to_string(),
            route_type: r.route_type.to_string(),
            dev,
            src,
        })
    }

    /// Whether the host has an IPv6 address other than `::1` (else glibc ignores its dump).
    fn has_non_loopback_ipv6(&self) -> bool {
        self.address_rows()
            .any(|(a, _)| a.is_ipv6() && !a.is_loopback())
    }

    /// glibc's view of one destination: its source from the route lookup and that source's row.
    pub fn glibc_candidate(&self, dest: IpAddr, original_index: usize) -> Candidate {
        let source = self.route_get(dest).and_then(|r| r.src);
        self.glibc_candidate_from(dest, source, original_index)
    }

    /// glibc's view of one destination whose source is known (`None`: `connect()` failed): the
    /// source's row in this snapshot's address dump (glibc's `in6ai`), as `rfc3484_sort` reads it.
    pub fn glibc_candidate_from(
        &self,
        dest: IpAddr,
        source: Option<IpAddr>,
        original_index: usize,
    ) -> Candidate {
        let row = source
            .filter(|_| self.has_non_loopback_ipv6())
            .and_then(|s| self.address_rows().find(|(a, _)| *a == s));
        Candidate {
            dest,
            source,
            source_prefix_len: row.map(|(_, f)| f.prefix_len),
            source_flags: Default::default(),
            source_interface: row.and_then(|(_, f)| {
                let link = self
                    .links
                    .iter()
                    .find(|l| l.ifname.as_deref() == Some(&f.ifname))?;
                let tunnel = matches!(link.kind.as_deref(), Some("ipip" | "sit" | "ip6tnl"));
                Some(SourceInterface {
                    index: link.index,
                    native: !tunnel,
                })
            }),
            original_index,
        }
    }

    /// The local addresses with the `src` of their local-table routes.
    pub fn local_sources(&self) -> Vec<LocalAddressSource> {
        self.address_rows()
            .map(|(address, f)| LocalAddressSource {
                address,
                ifname: f.ifname.to_string(),
                secondary: f.secondary,
                src: self
                    .routes
                    .iter()
                    .find(|r| {
                        r.table == "local"
                            && r.route_type == "local"
                            && parse_prefix(&r.dst).is_some_and(|(a, _)| a == address)
                    })
                    .and_then(|r| r.src.as_deref()?.parse().ok()),
            })
            .collect()
    }
}

/// Calico's default `skip-interface` list (interfaces never autodetected).
const CALICO_SKIPPED: &[&str] = &[
    "docker",
    "cbr",
    "dummy",
    "virbr",
    "lxcbr",
    "veth",
    "lo",
    "cali",
    "tunl",
    "flannel",
    "kube-ipvs",
    "cni",
    "vxlan.calico",
    "vxlan-v6.calico",
    "wireguard.cali",
    "wg-v6.cali",
    "nodelocaldns",
];

/// The device kube-proxy creates for its IPVS virtual addresses (skipped by both paths).
const KUBE_IPVS_DEVICE: &str = "kube-ipvs0";

/// Whether `name` matches a calico interface pattern: a regex in calico; here `prefix*`-style
/// prefixes and exact names, with `^`/`.*`/`$` stripped.
fn interface_matches(name: &str, pattern: &str) -> bool {
    let p = pattern.trim_start_matches('^').trim_end_matches('$');
    match p.strip_suffix(".*") {
        Some(prefix) => name.starts_with(prefix),
        None => name == p,
    }
}

fn ipv4_global(a: IpAddr) -> bool {
    a.is_ipv4() && !a.is_loopback() && !a.is_unspecified()
}

fn pick(
    component: &str,
    setting: &str,
    picked: Vec<IpAddr>,
    reasoning: Vec<String>,
) -> ComponentPick {
    ComponentPick {
        component: component.into(),
        setting: setting.into(),
        picked,
        reasoning,
    }
}

fn list(addrs: &[IpAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// kubelet's InternalIP.
fn kubelet(
    s: &NodeSnapshot,
    settings: &ComponentSettings,
    conf: &GaiConf,
    findings: &mut Vec<Diagnosis>,
) -> ComponentPick {
    if let Some(ip) = settings.node_ip {
        return pick(
            "kubelet",
            "--node-ip",
            vec![ip],
            vec![format!("--node-ip {ip} is used as given")],
        );
    }
    let mut lookup_notes = Vec::new();
    if !s.hosts.is_empty() {
        let candidates: Vec<Candidate> = s
            .hosts
            .iter()
            .enumerate()
            .map(|(i, a)| s.glibc_candidate(*a, i))
            .collect();
        let outcome = rfc6724::sort(&candidates, conf);
        let sorted: Vec<IpAddr> = outcome.order.iter().map(|i| candidates[*i].dest).collect();
        let mut reasoning = vec![
            format!(
                "node name {:?} resolves (hosts file order) to [{}]",
                s.hostname,
                list(&s.hosts)
            ),
            format!(
                "glibc getaddrinfo sorts them (RFC 6724 as glibc 2.36 applies it) to [{}]",
                list(&sorted)
            ),
        ];
        for d in &outcome.decisions {
            reasoning.push(format!(
                "  {} before {}: rule {} ({}): {}",
                d.first, d.second, d.rule, d.rule_name, d.detail
            ));
        }
        let chosen = sorted.iter().copied().find(|a| ipv4_global(*a));
        if let Some(first) = chosen {
            reasoning.push(format!(
                "kubelet takes the first IPv4 non-loopback address: {first}"
            ));
            if s.hosts.first() != Some(&first) && s.hosts.len() > 1 {
                let decisive = outcome.decisions.first();
                findings.push(Diagnosis {
                    id: DiagnosisId::GaiReordered,
                    severity: Severity::Warning,
                    summary: format!(
                        "kubelet's node IP would be {first}, not {} listed first for {:?}: glibc re-sorted the lookup{}",
                        s.hosts[0],
                        s.hostname,
                        decisive.map(|d| format!(" (rule {}: {})", d.rule, d.rule_name)).unwrap_or_default()
                    ),
                    evidence: reasoning.clone(),
                    remedy: "set kubelet --node-ip, or list only the wanted address for the node name, or add a gai.conf precedence line for it".into(),
                });
            }
            return pick("kubelet", "node name lookup", vec![first], reasoning);
        }
        lookup_notes = reasoning;
    }
    let default_v4 = "0.0.0.0".parse().expect("literal");
    match s.route_get(default_v4).filter(|r| r.table != "local") {
        Some(r) => {
            let addr = s
                .address_rows()
                .find(|(a, f)| f.ifname == r.dev && ipv4_global(*a))
                .map(|(a, _)| a);
            pick(
                "kubelet",
                "default-route interface",
                addr.into_iter().collect(),
                lookup_notes
                    .into_iter()
                    .chain([format!(
                        "no --node-ip and no non-loopback IPv4 address for the node name: first \
                         address of the default route's interface {}",
                        r.dev
                    )])
                    .collect(),
            )
        }
        None => pick(
            "kubelet",
            "none",
            vec![],
            vec!["no --node-ip, no hosts entry, no default route: kubelet cannot choose".into()],
        ),
    }
}

/// The network/broadcast check of seed 001 on one address a component uses.
fn check_network_address(
    s: &NodeSnapshot,
    component: &str,
    addr: IpAddr,
    findings: &mut Vec<Diagnosis>,
) {
    for (a, f) in s.address_rows() {
        if let Some((net, bcast)) = network_and_broadcast(a, f.prefix_len) {
            if addr == net || addr == bcast && in_prefix(addr, a, f.prefix_len) {
                let which = if addr == net { "network" } else { "broadcast" };
                findings.push(Diagnosis {
                    id: DiagnosisId::NetworkAddressUsed,
                    severity: Severity::Error,
                    summary: format!(
                        "{component} would use {addr}, the {which} address of {a}/{} on {}",
                        f.prefix_len, f.ifname
                    ),
                    evidence: vec![format!(
                        "{a}/{} is configured on {}",
                        f.prefix_len, f.ifname
                    )],
                    remedy: REMEDY_NETWORK_ADDRESS.into(),
                });
                return;
            }
        }
    }
}

/// calico's IP autodetection.
fn calico(
    s: &NodeSnapshot,
    settings: &ComponentSettings,
    kubelet_ip: Option<IpAddr>,
    findings: &mut Vec<Diagnosis>,
) -> ComponentPick {
    let method = settings
        .calico_method
        .clone()
        .unwrap_or_else(|| "first-found".into());
    let (kind, arg) = method.split_once('=').unwrap_or((method.as_str(), ""));
    let usable = |f: &AddressFact, a: IpAddr| {
        ipv4_global(a) && !CALICO_SKIPPED.iter().any(|p| f.ifname.starts_with(p))
    };
    let first_where = |keep: &dyn Fn(&AddressFact, IpAddr) -> bool| {
        s.address_rows()
            .find(|(a, f)| keep(f, *a))
            .map(|(a, f)| (a, f.ifname.clone()))
    };
    let (picked, why) = match kind {
        "first-found" => match first_where(&|f, a| usable(f, a)) {
            Some((a, dev)) => (
                Some(a),
                format!("first address of the first interface not in calico's skip list: {dev}"),
            ),
            None => (
                None,
                "no interface outside calico's skip list has an IPv4 address".into(),
            ),
        },
        "interface" => match first_where(&|f, a| {
            ipv4_global(a) && arg.split(',').any(|p| interface_matches(&f.ifname, p))
        }) {
            Some((a, dev)) => (
                Some(a),
                format!("first address of the first interface matching {arg}: {dev}"),
            ),
            None => (None, format!("no interface matches {arg}")),
        },
        "skip-interface" => match first_where(&|f, a| {
            usable(f, a) && !arg.split(',').any(|p| interface_matches(&f.ifname, p))
        }) {
            Some((a, dev)) => (
                Some(a),
                format!("first address of the first interface not skipped by {arg}: {dev}"),
            ),
            None => (None, format!("every interface is skipped by {arg}")),
        },
        "can-reach" => match arg.parse().ok().and_then(|d| s.route_get(d)) {
            Some(r) => (
                r.src,
                format!(
                    "route to {arg}: table {}, type {}, dev {}, src {}",
                    r.table,
                    r.route_type,
                    r.dev,
                    r.src.map(|a| a.to_string()).unwrap_or("-".into())
                ),
            ),
            None => (None, format!("no route to {arg}")),
        },
        "cidr" => {
            let nets: Vec<_> = arg.split(',').filter_map(parse_prefix).collect();
            match first_where(&|_, a| nets.iter().any(|(n, l)| in_prefix(a, *n, *l))) {
                Some((a, dev)) => (Some(a), format!("first address inside {arg}: on {dev}")),
                None => (None, format!("no address inside {arg}")),
            }
        }
        "kubernetes-internal-ip" => {
            match kubelet_ip.and_then(|ip| s.address_rows().find(|(a, _)| *a == ip)) {
                Some((a, f)) => {
                    let buggy = network_and_broadcast(a, f.prefix_len)
                        .map(|(n, _)| n)
                        .unwrap_or(a);
                    let mut why = format!(
                        "the node's InternalIP {a} is {a}/{} on {}",
                        f.prefix_len, f.ifname
                    );
                    if buggy != a {
                        why.push_str(&format!(
                            "; calico v3.22.1–v3.22.3 used the parsed network instead: {buggy}/{}",
                            f.prefix_len
                        ));
                        check_network_address(
                            s,
                            "calico v3.22.1–v3.22.3 (kubernetes-internal-ip)",
                            buggy,
                            findings,
                        );
                    }
                    (Some(a), why)
                }
                None => (
                    None,
                    "the node's InternalIP is not an address of this node".into(),
                ),
            }
        }
        other => (None, format!("unknown autodetection method {other:?}")),
    };
    pick("calico", &method, picked.into_iter().collect(), vec![why])
}

/// kube-proxy's `nodePortAddresses` filter.
fn node_port_filter(
    s: &NodeSnapshot,
    settings: &ComponentSettings,
    addrs: Vec<IpAddr>,
) -> Vec<IpAddr> {
    if settings.node_port_addresses.is_empty() {
        return addrs;
    }
    addrs
        .into_iter()
        .filter(|a| {
            settings
                .node_port_addresses
                .iter()
                .any(|spec| match spec.as_str() {
                    "primary" => s.address_rows().any(|(x, f)| x == *a && !f.secondary),
                    cidr => parse_prefix(cidr).is_some_and(|(n, l)| in_prefix(*a, n, l)),
                })
        })
        .collect()
}

/// kube-proxy IPVS NodePort addresses by both discovery paths, and the seed 002/004 finding.
fn kube_proxy(
    s: &NodeSnapshot,
    settings: &ComponentSettings,
    findings: &mut Vec<Diagnosis>,
) -> [ComponentPick; 2] {
    let setting = if settings.node_port_addresses.is_empty() {
        "nodePortAddresses unset".to_string()
    } else {
        format!(
            "nodePortAddresses {}",
            settings.node_port_addresses.join(",")
        )
    };
    let local = s.local_sources();
    let mut old: Vec<IpAddr> = Vec::new();
    // The IPv4 proxier (kube-proxy's default, single-stack): IPv4 addresses only.
    let proxied = |a: &IpAddr, ifname: &str| ipv4_global(*a) && ifname != KUBE_IPVS_DEVICE;
    for l in local.iter().filter(|l| proxied(&l.address, &l.ifname)) {
        if let Some(src) = l.src.filter(|a| !old.contains(a)) {
            old.push(src);
        }
    }
    let old = node_port_filter(s, settings, old);
    let dump: Vec<IpAddr> = s
        .address_rows()
        .filter(|(a, f)| proxied(a, &f.ifname))
        .map(|(a, _)| a)
        .collect();
    let dump = node_port_filter(s, settings, dump);
    let missed: Vec<&LocalAddressSource> = local
        .iter()
        .filter(|l| proxied(&l.address, &l.ifname))
        .filter(|l| dump.contains(&l.address) && !old.contains(&l.address))
        .collect();
    for m in &missed {
        findings.push(Diagnosis {
            id: DiagnosisId::SecondaryAddressSkipped,
            severity: Severity::Warning,
            summary: format!(
                "kube-proxy's local-table path gives {} no NodePort service: its local route's src is {}",
                m.address,
                m.src.map(|a| a.to_string()).unwrap_or("-".into())
            ),
            evidence: vec![format!(
                "local {} dev {} src {} ({} address on {})",
                m.address,
                m.ifname,
                m.src.map(|a| a.to_string()).unwrap_or("-".into()),
                if m.secondary { "secondary" } else { "primary" },
                m.ifname
            )],
            remedy: REMEDY_SECONDARY_SKIPPED.into(),
        });
    }
    [
        pick(
            LOCAL_TABLE_PATH,
            &setting,
            old,
            vec!["`ip route show table local type local proto kernel` minus kube-ipvs0: each route's src".into()],
        ),
        pick(
            "kube-proxy IPVS (address-dump path)",
            &setting,
            dump,
            vec!["IPv4 addresses of every interface except kube-ipvs0 (an address dump)".into()],
        ),
    ]
}

/// OpenELB's `can_reach:IP` interface choice and the seed 003 finding.
fn openelb(s: &NodeSnapshot, target: IpAddr, findings: &mut Vec<Diagnosis>) -> ComponentPick {
    let Some(r) = s.route_get(target) else {
        return pick(
            "OpenELB speaker",
            &format!("can_reach:{target}"),
            vec![],
            vec![format!("no route to {target}: the speaker cannot start")],
        );
    };
    let why = format!(
        "route get {target}: table {}, type {}, dev {}",
        r.table, r.route_type, r.dev
    );
    if r.dev == "lo" {
        let holder = s
            .address_rows()
            .find(|(a, _)| *a == target)
            .map(|(_, f)| f.ifname.clone())
            .unwrap_or_else(|| "a local route".into());
        findings.push(Diagnosis {
            id: DiagnosisId::RouteGetResolvesToLo,
            severity: Severity::Error,
            summary: format!("OpenELB can_reach:{target} resolves to dev lo: {target} is assigned on this node ({holder}), so the speaker refuses to start"),
            evidence: vec![why.clone()],
            remedy: "use a can_reach target that is never assigned on a node (e.g. the gateway), not an LB or node IP".into(),
        });
        return pick(
            "OpenELB speaker",
            &format!("can_reach:{target}"),
            vec![],
            vec![why, "interface lo is refused".into()],
        );
    }
    let addr = r.src.into_iter().collect();
    pick(
        "OpenELB speaker",
        &format!("can_reach:{target}"),
        addr,
        vec![format!("{why}: announces on {}", r.dev)],
    )
}

/// The node name's order under glibc (with the node's gai.conf), musl and Go's own resolver, and
/// a `resolvers-disagree` finding when their first IPv4 addresses (kubelet's rule) differ.
fn resolver_orders(
    s: &NodeSnapshot,
    conf: &GaiConf,
    findings: &mut Vec<Diagnosis>,
) -> Vec<ResolverOrder> {
    if s.hosts.len() < 2 {
        return Vec::new();
    }
    let sources: Vec<Option<IpAddr>> = s
        .hosts
        .iter()
        .map(|a| s.route_get(*a).and_then(|r| r.src))
        .collect();
    let pair_lines = |pairs: &[PairWhy]| -> Vec<String> {
        pairs
            .iter()
            .map(|p| {
                format!(
                    "{} before {}: rule {} ({}): {}",
                    p.first, p.second, p.rule, p.rule_name, p.detail
                )
            })
            .collect()
    };
    let glibc_candidates: Vec<Candidate> = s
        .hosts
        .iter()
        .enumerate()
        .map(|(i, a)| s.glibc_candidate(*a, i))
        .collect();
    let glibc = rfc6724::sort(&glibc_candidates, conf);
    let glibc_order: Vec<IpAddr> = glibc
        .order
        .iter()
        .map(|i| glibc_candidates[*i].dest)
        .collect();
    let glibc_reasons = glibc
        .decisions
        .iter()
        .map(|d| {
            format!(
                "{} before {}: rule {} ({}): {}",
                d.first, d.second, d.rule, d.rule_name, d.detail
            )
        })
        .collect();
    let musl_candidates: Vec<musl::MuslCandidate> = s
        .hosts
        .iter()
        .zip(&sources)
        .map(|(dest, source)| musl::MuslCandidate {
            dest: *dest,
            connected: source.is_some(),
            source: *source,
        })
        .collect();
    let (musl_order, musl_reasons) = if musl::sorts(false, &s.hosts) {
        let order: Vec<IpAddr> = musl::sort(&musl_candidates)
            .into_iter()
            .map(|i| musl_candidates[i].dest)
            .collect();
        let why = musl::explain(&musl_candidates, &order);
        (order, pair_lines(&why.pairs))
    } else {
        (
            s.hosts.clone(),
            vec!["no IPv6 result: musl does not sort, the hosts-file order is kept".into()],
        )
    };
    let go_candidates: Vec<go::GoCandidate> = s
        .hosts
        .iter()
        .zip(&sources)
        .map(|(dest, source)| go::GoCandidate {
            dest: *dest,
            source: *source,
        })
        .collect();
    let go_order: Vec<IpAddr> = go::sort(&go_candidates)
        .into_iter()
        .map(|i| go_candidates[i].dest)
        .collect();
    let go_reasons = pair_lines(&go::explain(&go_candidates, &go_order).pairs);
    let orders = vec![
        ResolverOrder {
            resolver: "glibc".into(),
            used_by: "cgo Go programs sent to libc (kubelet before 1.38 when nsswitch/resolv.conf require it), C programs such as getent"
                .into(),
            order: glibc_order,
            reasoning: glibc_reasons,
        },
        ResolverOrder {
            resolver: "musl".into(),
            used_by: "k3s's embedded kubelet (static musl), Alpine-based containers".into(),
            order: musl_order,
            reasoning: musl_reasons,
        },
        ResolverOrder {
            resolver: "go".into(),
            used_by: "kubelet from 1.38 (static), kube-proxy, kube-vip, MetalLB and OpenELB speakers, calico-node by default"
                .into(),
            order: go_order,
            reasoning: go_reasons,
        },
    ];
    let firsts: Vec<(&str, Option<IpAddr>)> = orders
        .iter()
        .map(|o| {
            (
                o.resolver.as_str(),
                o.order.iter().copied().find(|a| ipv4_global(*a)),
            )
        })
        .collect();
    if firsts.iter().any(|(_, f)| *f != firsts[0].1) {
        findings.push(Diagnosis {
            id: DiagnosisId::ResolversDisagree,
            severity: Severity::Warning,
            summary: format!(
                "the node name {:?} comes out differently per resolver: first IPv4 {}",
                s.hostname,
                firsts
                    .iter()
                    .map(|(r, f)| format!(
                        "{r} {}",
                        f.map_or_else(|| "none".to_string(), |a| a.to_string())
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            evidence: orders
                .iter()
                .map(|o| format!("{}: [{}]", o.resolver, list(&o.order)))
                .collect(),
            remedy: "components that look the node name up can pick different addresses: set kubelet --node-ip (and the other components' address settings) explicitly, or list only one address for the name"
                .into(),
        });
    }
    orders
}

/// Runs every picker on a snapshot.
pub fn audit(snapshot: NodeSnapshot, settings: &ComponentSettings, conf: &GaiConf) -> AuditReport {
    let mut findings = Vec::new();
    let s = &snapshot;
    let resolvers = resolver_orders(s, conf, &mut findings);
    let kubelet_pick = kubelet(s, settings, conf, &mut findings);
    let kubelet_ip = kubelet_pick.picked.first().copied();
    let calico_pick = calico(s, settings, kubelet_ip, &mut findings);
    let mut picks = vec![kubelet_pick, calico_pick];
    picks.extend(kube_proxy(s, settings, &mut findings));
    if let Some(target) = settings.openelb_can_reach {
        picks.push(openelb(s, target, &mut findings));
    }
    if let (Some(k), Some(c)) = (kubelet_ip, picks[1].picked.first()) {
        if k != *c {
            findings.push(Diagnosis {
                id: DiagnosisId::ComponentsDisagree,
                severity: Severity::Info,
                summary: format!("kubelet's node IP {k} and calico's {c} differ"),
                evidence: vec![],
                remedy: "make them agree: kubelet --node-ip and calico IP_AUTODETECTION_METHOD (e.g. kubernetes-internal-ip on v3.22.4+, or cidr=)".into(),
            });
        }
    }
    for p in &picks {
        for a in &p.picked {
            check_network_address(s, &p.component, *a, &mut findings);
        }
    }
    AuditReport {
        local_sources: s.local_sources(),
        resolvers,
        go_cgo_choice: None,
        snapshot,
        picks,
        findings,
    }
}

/// kube-proxy's old discovery path, as its pick is named.
const LOCAL_TABLE_PATH: &str = "kube-proxy IPVS (local-table path)";

impl AuditReport {
    /// Leaves out what a partial snapshot (the kernel's answers a trace happened to see, not a
    /// node's whole state) cannot support: kube-proxy's local-table path without a local-table
    /// route in it, kubelet with neither a hosts entry nor a default route. Returns the report
    /// and, for people, what was left out and why.
    pub fn without_unseen_inputs(mut self) -> (Self, Vec<String>) {
        let mut left_out = Vec::new();
        let has_local_routes = self.snapshot.routes.iter().any(|r| r.table == "local");
        if !has_local_routes {
            self.picks.retain(|p| p.component != LOCAL_TABLE_PATH);
            self.findings
                .retain(|f| f.id != DiagnosisId::SecondaryAddressSkipped);
            self.local_sources.clear();
            left_out.push(format!(
                "{LOCAL_TABLE_PATH}: no local-table route (`ip route show table local`) in these events"
            ));
        }
        let kubelet_blind = self
            .picks
            .iter()
            .any(|p| p.component == "kubelet" && p.picked.is_empty());
        if kubelet_blind {
            self.picks.retain(|p| p.component != "kubelet");
            self.findings
                .retain(|f| f.id != DiagnosisId::ComponentsDisagree);
            left_out.push(
                "kubelet: neither the node name's hosts entry nor a default route is in these events"
                    .into(),
            );
        }
        (self, left_out)
    }
}

/// The audit in a few lines (a capture's section comment): what each component picks, and the
/// findings' one-line summaries. [`render_text`] has the reasons.
pub fn summary_text(r: &AuditReport) -> String {
    let mut out = format!(
        "node address audit of {:?} at the end of the trace (each component with its \
         defaults; `nodeip-trace explain` gives the reasons):",
        r.snapshot.hostname
    );
    for p in &r.picks {
        let picked: Vec<String> = p.picked.iter().map(IpAddr::to_string).collect();
        out.push_str(&format!(
            "\n  {} ({}): {}",
            p.component,
            p.setting,
            if picked.is_empty() {
                "nothing".to_owned()
            } else {
                picked.join(", ")
            }
        ));
    }
    for d in &r.findings {
        out.push_str(&format!("\n  {}", d.headline()));
    }
    out
}

/// The audit as text.
pub fn render_text(r: &AuditReport) -> String {
    let mut out = format!(
        "Node address audit for {:?}\n\nInterfaces:\n",
        r.snapshot.hostname
    );
    let mut names: Vec<&str> = Vec::new();
    for a in &r.snapshot.addresses {
        if !names.contains(&a.ifname.as_str()) {
            names.push(&a.ifname);
        }
    }
    for name in names {
        let addrs: Vec<String> = r
            .snapshot
            .addresses
            .iter()
            .filter(|a| a.ifname == name)
            .map(|a| {
                let rank = match (a.address.contains(':'), a.secondary) {
                    (true, _) => "",
                    (false, true) => " secondary",
                    (false, false) => " primary",
                };
                let label = a
                    .label
                    .as_deref()
                    .map(|l| format!(" (label {l})"))
                    .unwrap_or_default();
                format!("{}/{}{rank}{label}", a.address, a.prefix_len)
            })
            .collect();
        out.push_str(&format!("  {name}: {}\n", addrs.join(", ")));
    }
    out.push_str("\nLocal table (the src the kernel gives each local address):\n");
    for l in r
        .local_sources
        .iter()
        .filter(|l| l.address.is_ipv4() && !l.address.is_loopback())
    {
        let src = l.src.map(|a| a.to_string()).unwrap_or_else(|| "-".into());
        let note = match l.src {
            Some(s) if s != l.address => {
                "  ← not itself: a secondary's local route carries the primary"
            }
            _ => "",
        };
        out.push_str(&format!(
            "  {:<16} dev {:<10} src {src}{note}\n",
            l.address.to_string(),
            l.ifname
        ));
    }
    if !r.resolvers.is_empty() {
        out.push_str(&format!(
            "\nHow each resolver orders {:?} (hosts file: {}):\n",
            r.snapshot.hostname,
            list(&r.snapshot.hosts)
        ));
        for o in &r.resolvers {
            out.push_str(&format!(
                "  {:<5} [{}]  — used by {}\n",
                o.resolver,
                list(&o.order),
                o.used_by
            ));
            for why in &o.reasoning {
                out.push_str(&format!("      {why}\n"));
            }
        }
    }
    if let Some(choice) = &r.go_cgo_choice {
        out.push_str(&format!(
            "\nWhich resolver a Go program uses for {:?} here (Go's net/conf.go rules on this node's nsswitch.conf and resolv.conf; a program's own environment can change it: GODEBUG=netdns, LOCALDOMAIN, RES_OPTIONS, HOSTALIASES):\n",
            r.snapshot.hostname
        ));
        out.push_str("  built without cgo (kubelet from 1.38, kube-proxy, kube-vip, MetalLB and OpenELB speakers): go\n");
        out.push_str(&format!(
            "  built with cgo (kubelet up to 1.37, calico-node): {} — {}\n",
            if choice.cgo {
                "cgo → the C library (glibc on most hosts; musl in k3s)"
            } else {
                "go"
            },
            choice.because
        ));
    }
    out.push_str("\nWhat each component picks:\n");
    for p in &r.picks {
        let picked = if p.picked.is_empty() {
            "nothing".to_string()
        } else {
            list(&p.picked)
        };
        out.push_str(&format!("  {} [{}]: {picked}\n", p.component, p.setting));
        for why in &p.reasoning {
            out.push_str(&format!("      {why}\n"));
        }
    }
    if r.findings.is_empty() {
        out.push_str("\nNo known failure pattern found.\n");
    } else {
        out.push_str(&format!("\n=== {} finding(s) ===\n", r.findings.len()));
        for d in &r.findings {
            out.push_str(&format!("{}\n", d.headline()));
            out.push_str(&format!("    remedy:   {}\n", d.remedy));
        }
    }
    out
}

#[cfg(test)]
mod tests;
