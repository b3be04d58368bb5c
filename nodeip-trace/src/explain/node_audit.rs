//! The node address audit behind `nodeip-trace explain`: from one snapshot of what the kernel
//! says about a node (links, addresses, routes, the hosts file), what each Kubernetes component
//! would pick as "the node IP" or "the local addresses", why, and where they disagree.
//!
//! Each picker replays the component's own code (file and function named in each module):
//! - kubelet's InternalIP ([`kubelet`]): `--node-ip` (dual-stack pairs; `::`/`0.0.0.0` only
//!   choose a family), a hostname override that is an IP, the node name looked up through the
//!   resolver the kubelet binary takes (Go's own, glibc or musl through cgo; each case when it
//!   is not known), `validateNodeIP` on every answer, then `ChooseHostInterface`'s default-route
//!   fallback; with an external cloud provider, only the annotation and a provisional address;
//! - calico's IPv4 autodetection ([`calico`]): `first-found`, `interface=`, `skip-interface=`,
//!   `cidr=`, `can-reach=`, `kubernetes-internal-ip` (the network address of v3.22.0–v3.22.3 and
//!   v3.23.0–v3.23.1: seed 001), interfaces walked in reverse, the exclusion list of the
//!   calico version in use;
//! - kube-proxy IPVS NodePort addresses: the old local-table path (each local route's `src`,
//!   which is the primary for a secondary address: seeds 002/004) and the address-dump path, both
//!   filtered by `nodePortAddresses` (CIDRs or `primary`);
//! - OpenELB `interface: can_reach:IP`: the route lookup's device, refused when it is `lo`
//!   (seed 003);
//! - flannel's public IP ([`flannel`], k3s's embedded flannel too): `--iface` or the
//!   default-gateway interface, its IPv4 addresses permanent before dynamic;
//! - kube-vip's VIP interface ([`kube_vip`]): `vip_interface` or the default-gateway
//!   interface, and whether another interface holds the VIP's subnet (kube-vip#903).
//!
//! Route lookups are modelled from the snapshot (the local table, then main, then default, as
//! the default policy rules order them; no other rules): the longest prefix wins, and among
//! routes of one prefix the first in the table's order (lowest metric, then the earliest added),
//! what the kernel would answer `ip route get`.
pub mod calico;
pub mod flannel;
pub mod kube_vip;
pub mod kubelet;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use self::calico::CalicoSettings;
use self::kubelet::{KubeletSettings, LookupResolver};
use super::resolver::glibc::gai_conf::GaiConf;
use super::resolver::glibc::rfc6724::{self, Candidate, SourceInterface};
use super::resolver::go_choice::GoResolverChoice;
use super::resolver::{go, musl};
use crate::model::event::{Diagnosis, DiagnosisId, Severity};
use crate::model::facts::{AddressFact, ConversationFacts, RouteFact};
use crate::model::getaddrinfo::PairWhy;
use crate::model::ip_text::ip_list as list;
use crate::model::netlink::{af, rt_table, rtm, rtn, LinkBody, MessageBody, NetlinkMessage};

/// Everything the audit looks at.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    /// The node name (kubelet's default: the host name).
    pub hostname: String,
    /// Interfaces, in the kernel's dump order (what Go's `net.Interfaces()` lists).
    pub links: Vec<NodeLink>,
    /// Addresses in the kernel's dump order (primary before its secondaries).
    pub addresses: Vec<AddressFact>,
    /// Routes of every table, in the kernel's dump order.
    pub routes: Vec<RouteFact>,
    /// Hosts-file addresses of the node name, in file order (what glibc's resolver lists).
    pub hosts: Vec<IpAddr>,
}

/// One interface of a snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLink {
    /// Interface index.
    pub index: u32,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ifname: Option<String>,
    /// `IFLA_INFO_KIND` (`veth`, `dummy`, `ipip`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `IFF_UP` (administratively up, what Go's `net.FlagUp` reads); `None` when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<bool>,
    /// `IFF_LOOPBACK` (Go's `net.FlagLoopback`); `None` when not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback: Option<bool>,
}

/// `IFF_UP` and `IFF_LOOPBACK` in `ifi_flags`.
const IFF_UP: u32 = 0x1;
const IFF_LOOPBACK: u32 = 0x8;

impl NodeLink {
    /// The link an `RTM_NEWLINK` describes.
    pub fn from_body(l: &LinkBody) -> Self {
        NodeLink {
            index: l.index,
            ifname: l.ifname.clone(),
            kind: l.info_kind.clone(),
            up: Some(l.flags_raw & IFF_UP != 0),
            loopback: Some(l.flags_raw & IFF_LOOPBACK != 0),
        }
    }

    /// Up, as far as the snapshot says (a link whose flags it lacks counts as up).
    pub fn is_up(&self) -> bool {
        self.up != Some(false)
    }

    /// A loopback link (`IFF_LOOPBACK`; by the name `lo` when the flags are not known).
    pub fn is_loopback(&self) -> bool {
        self.loopback
            .unwrap_or_else(|| self.ifname.as_deref() == Some("lo"))
    }
}

/// What each component's settings are (defaults mirror the components' defaults).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComponentSettings {
    /// kubelet `--node-ip` (one address; [`KubeletSettings::node_ips`] takes a dual-stack pair
    /// and wins when set).
    pub node_ip: Option<IpAddr>,
    /// calico `IP_AUTODETECTION_METHOD` (default `first-found`).
    pub calico_method: Option<String>,
    /// kube-proxy `nodePortAddresses` (CIDRs, or `primary`); empty = all local addresses.
    pub node_port_addresses: Vec<String>,
    /// OpenELB `interface: can_reach:IP`.
    pub openelb_can_reach: Option<IpAddr>,
    /// flannel `--iface` (k3s `--flannel-iface`): a name or an IPv4 address; `None`: the
    /// default-route interface.
    #[serde(default)]
    pub flannel_iface: Option<String>,
    /// kube-vip's VIP (`address`), when kube-vip runs here.
    #[serde(default)]
    pub kube_vip_address: Option<IpAddr>,
    /// kube-vip `vip_interface`; `None`: the default-route interface.
    #[serde(default)]
    pub kube_vip_interface: Option<String>,
}

/// What the audit knows beyond the snapshot and [`ComponentSettings`]: kubelet's and calico's
/// further settings, and which resolver a cgo build of a Go program takes on this node (the
/// node's name-service files as Go's `net/conf.go` reads them). All default to "not known".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditContext {
    /// kubelet's settings and binary.
    pub kubelet: KubeletSettings,
    /// calico-node's version.
    pub calico: CalicoSettings,
    /// Go's choice for the node name in a cgo build, when the node's files were read.
    pub go_cgo_choice: Option<GoResolverChoice>,
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
    /// The devices of the table's other routes with the same prefix (interfaces sharing a
    /// subnet): the kernel took the first in the table's order, lowest metric and then the
    /// earliest added, which is the dump order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tied_devs: Vec<String>,
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

/// A route's destination prefix; `default` is IPv4's unless its gateway or source is IPv6 (a
/// snapshot made from messages writes an IPv6 default as `::/0`).
fn route_prefix(r: &RouteFact) -> Option<(IpAddr, u8)> {
    if r.dst != "default" {
        return parse_prefix(&r.dst);
    }
    let v6 = [&r.gateway, &r.src]
        .into_iter()
        .flatten()
        .any(|a| a.contains(':'));
    let any: IpAddr = if v6 {
        Ipv6Addr::UNSPECIFIED.into()
    } else {
        Ipv4Addr::UNSPECIFIED.into()
    };
    Some((any, 0))
}

/// The default routes of the main table of one family, in the dump's order: what
/// vishvananda/netlink's `RouteList(nil, family)` walks for flannel's and kube-vip's
/// default-gateway interface.
fn main_defaults(s: &NodeSnapshot, v6: bool) -> impl Iterator<Item = &RouteFact> {
    s.routes.iter().filter(move |r| {
        r.in_table(rt_table::MAIN)
            && route_prefix(r).is_some_and(|(net, len)| len == 0 && net.is_ipv6() == v6)
    })
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

/// `addr/len` with the host bits cleared (Go's `net.ParseCIDR` network), for either family.
pub fn network_of(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            IpAddr::V4((u32::from(a) & mask).into())
        }
        IpAddr::V6(a) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            IpAddr::V6((u128::from(a) & mask).into())
        }
    }
}

/// What to do about seed 001's pattern (a network/broadcast or unassigned address in use).
pub const REMEDY_NETWORK_ADDRESS: &str = "calico v3.22.0–v3.22.3 and v3.23.0–v3.23.1 with IP_AUTODETECTION_METHOD=kubernetes-internal-ip take the prefix's network address: upgrade to v3.22.4+ or v3.23.2+, or use another method (e.g. interface= or cidr=); otherwise fix whatever configured this address";

/// The remedy of `node-ip-picked`.
pub const REMEDY_NODE_IP_PICKED: &str = "if it is not the address wanted, set kubelet's --node-ip (it is then validated, not looked up); the pick follows the resolver's order of the node name's answers";

/// The remedy of `node-ip-picked` for calico-node's live pick.
pub const REMEDY_CALICO_PICKED: &str = "if it is not the address wanted, pin calico-node's IP_AUTODETECTION_METHOD (interface=, skip-interface=, cidr= or can-reach=) or set IP; `nodeip-trace explain --from RECORDING --calico-method METHOD` replays another method on the same dumps";

/// The remedy of `node-ip-picked` for flannel's live pick (flanneld, k3s).
pub const REMEDY_FLANNEL_PICKED: &str = "if it is not the address wanted, set flannel's --iface (k3s: --flannel-iface) to the interface or to the address itself: without it, a static address on the default-route interface wins over a DHCP one (permanent before dynamic, k3s#12459); `nodeip-trace explain --from RECORDING --flannel-iface IFACE` replays it with one";

/// The remedy of `node-ip-picked` for kube-vip's live pick.
pub const REMEDY_KUBE_VIP_PICKED: &str = "if the VIP's subnet is on another interface, set kube-vip's vip_interface to that interface (kube-vip#903); `nodeip-trace explain --from RECORDING --kube-vip-address VIP --kube-vip-interface IFACE` replays another choice";

/// The remedy of `node-ip-picked` for kube-proxy's live pick.
pub const REMEDY_KUBE_PROXY_PICKED: &str = "if an address is missing, set kube-proxy's nodePortAddresses (a kube-proxy that reads the address dump takes secondary addresses too, k8s#75443) or make the address a primary; `nodeip-trace explain --from RECORDING --node-port-addresses LIST` replays a setting";

/// The remedy of `added-address-picked`.
pub const REMEDY_ADDED_ADDRESS_PICKED: &str = "if this is kubelet choosing its InternalIP, set --node-ip (a VIP can move to another node); keep floating addresses out of the node name's answers (hosts file, DNS), or give them a lower precedence; for calico, pin the method (interface= or cidr=) so a VIP's interface or prefix is not taken";

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

/// Replaces the entry `same` finds (in place, so the dump order stays), or appends `item`; with
/// `delete`, removes it instead.
fn upsert<T>(items: &mut Vec<T>, item: T, delete: bool, same: impl Fn(&T, &T) -> bool) {
    match (items.iter().position(|x| same(x, &item)), delete) {
        (Some(i), true) => {
            items.remove(i);
        }
        (Some(i), false) => items[i] = item,
        (None, false) => items.push(item),
        (None, true) => {}
    }
}

impl NodeSnapshot {
    /// Builds a snapshot from the kernel's `RTM_NEWLINK`/`RTM_NEWADDR`/`RTM_NEWROUTE` messages
    /// (a live dump, or the replies and notifications in a capture): a later message about the
    /// same link (index), address (interface and address) or route replaces it where it stands,
    /// an `RTM_DEL*` removes it. A route lookup's answer (`RTM_F_CLONED`) is not a table's route
    /// and is left out; an IPv6 default route is written `::/0`.
    pub fn from_messages(hostname: &str, hosts: Vec<IpAddr>, messages: &[NetlinkMessage]) -> Self {
        let mut s = NodeSnapshot {
            hostname: hostname.to_string(),
            hosts,
            ..Default::default()
        };
        for m in messages {
            if rtm::is_get(m.header.type_id) {
                continue;
            }
            let delete = rtm::is_del(m.header.type_id);
            let mut facts = ConversationFacts::default();
            facts.add(m);
            match &m.body {
                MessageBody::Link(l) => {
                    upsert(&mut s.links, NodeLink::from_body(l), delete, |a, b| {
                        a.index == b.index
                    });
                }
                MessageBody::Address(_) => {
                    for a in facts.addresses {
                        upsert(&mut s.addresses, a, delete, |x, y| {
                            x.address == y.address && x.ifname == y.ifname
                        });
                    }
                }
                MessageBody::Route(r) if !r.flags.iter().any(|f| f == "CLONED") => {
                    for mut route in facts.routes {
                        if af::id(&r.family) == Some(af::INET6) && route.dst == "default" {
                            route.dst = "::/0".into();
                        }
                        upsert(&mut s.routes, route, delete, |x, y| x == y);
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

    /// The addresses of interface `ifname`, in the dump's order (Go's `Interface.Addrs()`).
    fn addresses_of<'a>(
        &'a self,
        ifname: &'a str,
    ) -> impl Iterator<Item = (IpAddr, &'a AddressFact)> {
        self.address_rows().filter(move |(_, f)| f.ifname == ifname)
    }

    /// The link named `ifname`: `Ok(None)` when the snapshot has no links at all (a capture that
    /// saw no link dump: nothing can be said), `Err(())` when it has links but not this one.
    fn link_named(&self, ifname: &str) -> Result<Option<&NodeLink>, ()> {
        if self.links.is_empty() {
            return Ok(None);
        }
        self.links
            .iter()
            .find(|l| l.ifname.as_deref() == Some(ifname))
            .map(Some)
            .ok_or(())
    }

    /// The interface names in the order Go's `net.Interfaces()` lists them (the link dump's),
    /// then any name that only the address dump mentions, in its order.
    fn interface_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .links
            .iter()
            .filter_map(|l| l.ifname.as_deref())
            .collect();
        for a in &self.addresses {
            if !names.contains(&a.ifname.as_str()) {
                names.push(&a.ifname);
            }
        }
        names
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

    /// What `ip route get DST` would answer: the local table, then main, then default (the
    /// default policy rules; no others), the longest prefix of `dst`'s family, and among routes
    /// of that prefix the first in the table's order.
    pub fn route_get(&self, dst: IpAddr) -> Option<RouteAnswer> {
        let lookup = |table: u32, route_type: u8| {
            let found: Vec<(u8, &RouteFact)> = self
                .routes
                .iter()
                .filter(|r| r.in_table(table) && r.is_type(route_type))
                .filter_map(|r| {
                    let (net, len) = route_prefix(r)?;
                    in_prefix(dst, net, len).then_some((len, r))
                })
                .collect();
            let longest = found.iter().map(|(len, _)| *len).max()?;
            let mut same = found
                .into_iter()
                .filter(|(len, _)| *len == longest)
                .map(|(_, r)| r);
            let first = same.next()?;
            let tied: Vec<String> = same
                .filter_map(|r| r.dev.as_deref().map(str::to_string))
                .collect();
            Some((first, tied))
        };
        if let Some((r, _)) = lookup(rt_table::LOCAL, rtn::LOCAL) {
            return Some(RouteAnswer {
                table: r.table.to_string(),
                route_type: r.route_type.to_string(),
                dev: "lo".into(),
                src: r.src.as_deref().and_then(|s| s.parse().ok()).or(Some(dst)),
                tied_devs: Vec::new(),
            });
        }
        let (r, tied_devs) = lookup(rt_table::MAIN, rtn::UNICAST)
            .or_else(|| lookup(rt_table::DEFAULT, rtn::UNICAST))?;
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
            tied_devs,
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
                        r.in_table(rt_table::LOCAL)
                            && r.is_type(rtn::LOCAL)
                            && parse_prefix(&r.dst).is_some_and(|(a, _)| a == address)
                    })
                    .and_then(|r| r.src.as_deref()?.parse().ok()),
            })
            .collect()
    }
}

/// The device kube-proxy creates for its IPVS virtual addresses (skipped by both paths).
const KUBE_IPVS_DEVICE: &str = "kube-ipvs0";

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

/// kube-proxy IPVS NodePort addresses by both discovery paths (the local-table path first), and
/// the seed 002/004 finding.
pub(crate) fn kube_proxy(
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

/// One resolver's order of the node name's hosts-file addresses, and the rule that decided its
/// first reordered pair (for a `gai-reordered` finding).
struct Lookup {
    resolver: LookupResolver,
    order: ResolverOrder,
    decisive: Option<String>,
}

/// The first pair a sort decided by a rule other than "leave the order" (rule 10).
fn decisive_rule<'a>(rules: impl IntoIterator<Item = (u8, &'a str)>) -> Option<String> {
    rules
        .into_iter()
        .find(|(rule, _)| *rule != 10)
        .map(|(rule, name)| format!("rule {rule}: {name}"))
}

/// The node name's hosts-file addresses as glibc (with the node's gai.conf), musl and Go's own
/// resolver return them.
fn lookups(s: &NodeSnapshot, conf: &GaiConf) -> Vec<Lookup> {
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
    let glibc_decisive = decisive_rule(glibc.decisions.iter().map(|d| (d.rule, d.rule_name)));
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
    let (musl_order, musl_reasons, musl_decisive) = if musl::sorts(false, &s.hosts) {
        let order: Vec<IpAddr> = musl::sort(&musl_candidates)
            .into_iter()
            .map(|i| musl_candidates[i].dest)
            .collect();
        let why = musl::explain(&musl_candidates, &order);
        let decisive = decisive_rule(why.pairs.iter().map(|p| (p.rule, p.rule_name.as_str())));
        (order, pair_lines(&why.pairs), decisive)
    } else {
        (
            s.hosts.clone(),
            vec!["no IPv6 result: musl does not sort, the hosts-file order is kept".into()],
            None,
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
    let go_why = go::explain(&go_candidates, &go_order);
    let go_decisive = decisive_rule(go_why.pairs.iter().map(|p| (p.rule, p.rule_name.as_str())));
    let go_reasons = pair_lines(&go_why.pairs);
    vec![
        Lookup {
            resolver: LookupResolver::Glibc,
            order: ResolverOrder {
                resolver: "glibc".into(),
                used_by: "cgo Go programs sent to libc (kubelet before 1.38 when nsswitch/resolv.conf require it), C programs such as getent"
                    .into(),
                order: glibc_order,
                reasoning: glibc_reasons,
            },
            decisive: glibc_decisive,
        },
        Lookup {
            resolver: LookupResolver::Musl,
            order: ResolverOrder {
                resolver: "musl".into(),
                used_by: "k3s's embedded kubelet (static musl), Alpine-based containers".into(),
                order: musl_order,
                reasoning: musl_reasons,
            },
            decisive: musl_decisive,
        },
        Lookup {
            resolver: LookupResolver::Go,
            order: ResolverOrder {
                resolver: "go".into(),
                used_by: "kubelet from 1.38 (static), kube-proxy, kube-vip, MetalLB and OpenELB speakers, calico-node by default"
                    .into(),
                order: go_order,
                reasoning: go_reasons,
            },
            decisive: go_decisive,
        },
    ]
}

/// The orders the report shows (when the node name has two addresses or more), and a
/// `resolvers-disagree` finding when their first IPv4 addresses differ.
fn resolver_orders(
    s: &NodeSnapshot,
    lookups: &[Lookup],
    findings: &mut Vec<Diagnosis>,
) -> Vec<ResolverOrder> {
    if s.hosts.len() < 2 {
        return Vec::new();
    }
    let orders: Vec<ResolverOrder> = lookups.iter().map(|l| l.order.clone()).collect();
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

/// Runs every picker on a snapshot, knowing nothing beyond `settings` ([`audit_in`] with an
/// empty [`AuditContext`]).
pub fn audit(snapshot: NodeSnapshot, settings: &ComponentSettings, conf: &GaiConf) -> AuditReport {
    audit_in(snapshot, settings, &AuditContext::default(), conf)
}

/// Runs every picker on a snapshot.
pub fn audit_in(
    snapshot: NodeSnapshot,
    settings: &ComponentSettings,
    context: &AuditContext,
    conf: &GaiConf,
) -> AuditReport {
    let mut findings = Vec::new();
    let s = &snapshot;
    let lookups = lookups(s, conf);
    let resolvers = resolver_orders(s, &lookups, &mut findings);
    let kubelet_picks = kubelet::kubelet(
        s,
        settings,
        &context.kubelet,
        context.go_cgo_choice.as_ref(),
        &lookups,
        &mut findings,
    );
    // The Node's InternalIPs: kubelet's pick (its first case when the binary is not known).
    let internal_ips: Vec<IpAddr> = kubelet_picks
        .first()
        .map(|p| p.picked.clone())
        .unwrap_or_default();
    let calico_pick = calico::calico(
        s,
        settings.calico_method.as_deref(),
        &context.calico,
        &internal_ips,
        &mut findings,
    );
    let kubelet_ip = internal_ips
        .iter()
        .copied()
        .find(|a| a.is_ipv4())
        .or(internal_ips.first().copied());
    if let (Some(k), Some(c)) = (kubelet_ip, calico_pick.picked.first()) {
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
    let mut picks = kubelet_picks;
    picks.push(calico_pick);
    picks.extend(kube_proxy(s, settings, &mut findings));
    picks.push(flannel::flannel(s, settings.flannel_iface.as_deref()));
    if let Some(vip) = settings.kube_vip_address {
        let interface = settings.kube_vip_interface.as_deref();
        picks.push(kube_vip::kube_vip(s, vip, interface, &mut findings));
    }
    if let Some(target) = settings.openelb_can_reach {
        picks.push(openelb(s, target, &mut findings));
    }
    for p in &picks {
        for a in &p.picked {
            check_network_address(s, &p.component, *a, &mut findings);
        }
    }
    AuditReport {
        local_sources: s.local_sources(),
        resolvers,
        go_cgo_choice: context.go_cgo_choice.clone(),
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
        let has_local_routes = self
            .snapshot
            .routes
            .iter()
            .any(|r| r.in_table(rt_table::LOCAL));
        if !has_local_routes {
            self.picks.retain(|p| p.component != LOCAL_TABLE_PATH);
            self.findings
                .retain(|f| f.id != DiagnosisId::SecondaryAddressSkipped);
            self.local_sources.clear();
            left_out.push(format!(
                "{LOCAL_TABLE_PATH}: no local-table route (`ip route show table local`) in these events"
            ));
        }
        let has_default_route = self
            .snapshot
            .routes
            .iter()
            .any(|r| route_prefix(r).is_some_and(|(_, len)| len == 0));
        let kubelet_blind = self.snapshot.hosts.is_empty()
            && !has_default_route
            && self
                .picks
                .iter()
                .any(|p| p.component == "kubelet" && p.picked.is_empty());
        if !has_default_route && self.snapshot.routes.is_empty() {
            self.picks.retain(|p| p.component != "flannel");
            left_out.push("flannel: no route of the main table is in these events".into());
        }
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

#[cfg(test)]
mod tests;
