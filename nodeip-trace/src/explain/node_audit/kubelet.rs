//! kubelet's node address: the `InternalIP` its `NodeAddress` setter writes into the Node's
//! status (`pkg/kubelet/nodestatus/setters.go` `NodeAddress`, as it is since Kubernetes 1.29:
//! kubernetes#121028 and #124516 for the external cloud provider, the in-tree providers gone
//! with #130161), replayed on a snapshot:
//!
//! 1. `--node-ip` as `ParseNodeIPArgument` reads it (`k8s.io/component-helpers/node/util`,
//!    `ips.go`; [`parse_node_ip_argument`]): one address or a dual-stack pair. `::` or `0.0.0.0`
//!    sets no address, only the family steps 4 and 5 prefer (IPv6 for `::`). A given address
//!    must pass `validateNodeIP`, else the setter fails and kubelet sets no address.
//! 2. `--cloud-provider=external`: `--node-ip` goes into the `alpha.kubernetes.io/provided-node-ip`
//!    annotation and is the provisional InternalIP until the cloud-controller-manager writes the
//!    Node's addresses (kubelet leaves them alone from then on); without `--node-ip` kubelet
//!    writes only the Hostname address.
//! 3. Both addresses of a dual-stack pair, or the one given.
//! 4. kubelet's hostname (the override, lowercased) when it parses as an IP
//!    (`netutils.ParseIPSloppy`), used without validation.
//! 5. `net.LookupIP(node.Name)` through the resolver the kubelet binary takes
//!    ([`LookupResolver`]: Go's own in a static build or a cgo build that Go's `net/conf.go`
//!    keeps, glibc's `getaddrinfo` in a cgo build sent to libc, musl's in k3s, whose
//!    `scripts/build` sets the `netcgo` tag and links musl); each case when the binary is not
//!    known. The first answer that passes `validateNodeIP` of the preferred family
//!    (`isPreferredIPFamily`: IPv4 unless `--node-ip` is IPv6), else the first valid one of the
//!    other family.
//! 6. `utilnet.ResolveBindAddress(nodeIP)` → `chooseHostInterface` (k8s.io/apimachinery
//!    `pkg/util/net/interface.go`; [`choose_host_interface`]).
//!
//! `validateNodeIP` (`pkg/kubelet/kubelet_node_status.go`; [`validate_node_ip`]): not loopback,
//! multicast, link-local unicast or unspecified, and held by an interface
//! (`net.InterfaceAddrs()`, every address of every interface, up or down).
//!
//! The snapshot has the hosts file, not DNS: a node name the hosts file does not list is taken as
//! one that no answer came for.
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{list, pick, route_prefix, ComponentPick, ComponentSettings, Lookup, NodeSnapshot};
use crate::explain::go_net;
use crate::explain::resolver::go_choice::GoResolverChoice;
use crate::model::event::{Diagnosis, DiagnosisId, Severity};
use crate::model::facts::RouteFact;
use crate::model::netlink::{rt_table, rtn};

/// `--cloud-provider` as kubelet takes it today: unset, or `external`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CloudProvider {
    /// No cloud provider: kubelet finds the address itself.
    #[default]
    None,
    /// `external`: a cloud-controller-manager writes the Node's addresses.
    External,
}

/// The resolver kubelet's `net.LookupIP` goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LookupResolver {
    /// Go's own resolver (`net/dnsclient_unix.go`, hosts file first, RFC 6724 sorted).
    Go,
    /// glibc's `getaddrinfo` through cgo.
    Glibc,
    /// musl's `getaddrinfo` through cgo.
    Musl,
}

impl LookupResolver {
    /// The name [`super::ResolverOrder::resolver`] uses: `go`, `glibc`, `musl`.
    pub fn name(self) -> &'static str {
        match self {
            LookupResolver::Go => "go",
            LookupResolver::Glibc => "glibc",
            LookupResolver::Musl => "musl",
        }
    }

    /// For people: `Go's own resolver`, `glibc's getaddrinfo (cgo)`, `musl's getaddrinfo (cgo)`.
    pub fn describe(self) -> &'static str {
        match self {
            LookupResolver::Go => "Go's own resolver",
            LookupResolver::Glibc => "glibc's getaddrinfo (cgo)",
            LookupResolver::Musl => "musl's getaddrinfo (cgo)",
        }
    }
}

/// A resolver name other than `go`, `glibc` or `musl`.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("unknown resolver {0:?}: expected go, glibc or musl")]
pub struct UnknownResolver(pub String);

impl FromStr for LookupResolver {
    type Err = UnknownResolver;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "go" => Ok(LookupResolver::Go),
            "glibc" => Ok(LookupResolver::Glibc),
            "musl" => Ok(LookupResolver::Musl),
            other => Err(UnknownResolver(other.into())),
        }
    }
}

/// kubelet's settings beyond [`ComponentSettings::node_ip`], and its binary's resolver.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeletSettings {
    /// `--node-ip` as [`parse_node_ip_argument`] reads it (one address or a dual-stack pair);
    /// empty: [`ComponentSettings::node_ip`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_ips: Vec<IpAddr>,
    /// `--hostname-override`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname_override: Option<String>,
    /// `--cloud-provider`.
    #[serde(default)]
    pub cloud_provider: CloudProvider,
    /// The resolver the kubelet binary's lookups take; `None` when not known (each is shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolver: Option<LookupResolver>,
}

/// Why kubelet refuses a `--node-ip` value (`parseNodeIP`'s errors).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum NodeIpArgumentError {
    /// More than two addresses, or two of one family.
    #[error("must contain either a single IP or a dual-stack pair of IPs")]
    NotSingleOrPair,
    /// A pair with `0.0.0.0` or `::` in it.
    #[error("dual-stack node IP cannot include '0.0.0.0' or '::'")]
    UnspecifiedInPair,
}

/// `--node-ip` as kubelet reads it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeIpArgument {
    /// The addresses, in the order given.
    pub ips: Vec<IpAddr>,
    /// Entries that do not parse: kubelet logs them and goes on without them.
    pub ignored: Vec<String>,
}

/// `ParseNodeIPArgument` (`k8s.io/component-helpers/node/util/ips.go`) with the cloud providers
/// kubelet still accepts (none, `external`), both of which allow a dual-stack pair: entries split
/// on `,` and trimmed, read by `ParseIPSloppy`, the unparsable ones set aside.
pub fn parse_node_ip_argument(text: &str) -> Result<NodeIpArgument, NodeIpArgumentError> {
    let mut arg = NodeIpArgument::default();
    if !text.is_empty() {
        for entry in text.split(',').map(str::trim) {
            match go_net::parse_ip_sloppy(entry) {
                Some(ip) => arg.ips.push(ip),
                None => arg.ignored.push(entry.to_string()),
            }
        }
    }
    let v6 = |ip: IpAddr| !go_net::is_ipv4(ip);
    match arg.ips.as_slice() {
        [_, _, _, ..] => Err(NodeIpArgumentError::NotSingleOrPair),
        [a, b] if v6(*a) == v6(*b) => Err(NodeIpArgumentError::NotSingleOrPair),
        [a, b] if go_net::is_unspecified(*a) || go_net::is_unspecified(*b) => {
            Err(NodeIpArgumentError::UnspecifiedInPair)
        }
        _ => Ok(arg),
    }
}

/// Why `validateNodeIP` refuses an address (its messages).
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum NodeIpRejected {
    /// 127.0.0.0/8, `::1`.
    #[error("nodeIP can't be loopback address")]
    Loopback,
    /// 224.0.0.0/4, `ff00::/8`.
    #[error("nodeIP can't be a multicast address")]
    Multicast,
    /// 169.254.0.0/16, `fe80::/10`.
    #[error("nodeIP can't be a link-local unicast address")]
    LinkLocal,
    /// 0.0.0.0, `::`.
    #[error("nodeIP can't be an all zeros address")]
    Unspecified,
    /// No interface holds it.
    #[error("node IP: \"{0}\" not found in the host's network interfaces")]
    NotLocal(IpAddr),
}

/// What `validateNodeIP` refuses whatever the interfaces hold: loopback, multicast,
/// link-local, all zeros (`None`: none of them).
pub fn refused_kind(ip: IpAddr) -> Option<NodeIpRejected> {
    if go_net::is_loopback(ip) {
        Some(NodeIpRejected::Loopback)
    } else if go_net::is_multicast(ip) {
        Some(NodeIpRejected::Multicast)
    } else if go_net::is_link_local_unicast(ip) {
        Some(NodeIpRejected::LinkLocal)
    } else if go_net::is_unspecified(ip) {
        Some(NodeIpRejected::Unspecified)
    } else {
        None
    }
}

/// `validateNodeIP` (`pkg/kubelet/kubelet_node_status.go`) on this snapshot: the interface that
/// holds the address, or why kubelet refuses it.
pub fn validate_node_ip(s: &NodeSnapshot, ip: IpAddr) -> Result<&str, NodeIpRejected> {
    if let Some(kind) = refused_kind(ip) {
        return Err(kind);
    }
    s.address_rows()
        .find(|(a, _)| go_net::equal(*a, ip))
        .map(|(_, f)| f.ifname.as_str())
        .ok_or(NodeIpRejected::NotLocal(ip))
}

/// Why `chooseHostInterface` found no address (its errors).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum HostInterfaceError {
    /// Neither route file lists a default route.
    #[error("no default routes found in \"/proc/net/route\" or \"/proc/net/ipv6_route\"")]
    NoDefaultRoutes,
    /// `net.InterfaceByName` failed for a default route's device (`*` for a route without one,
    /// as a blackhole or unreachable default): the walk ends there.
    #[error("route ip+net: no such network interface (the default route's device {0:?})")]
    NoSuchInterface(String),
    /// No default route's interface, nor a loopback interface, has a global address.
    #[error("unable to select an IP from default routes.")]
    NoAddress,
}

/// One default route as `/proc/net/route` or `/proc/net/ipv6_route` lists it.
struct DefaultRoute<'a> {
    v6: bool,
    /// The device; `None` for a unicast route the snapshot keeps no device of (multipath).
    dev: Option<&'a str>,
    text: String,
}

/// The default routes kubelet reads, in its order: `/proc/net/route` (the main table only; a
/// route whose destination is 0.0.0.0 of any length, broadcast and multicast ones not listed;
/// `*` as the device of one without), then `/proc/net/ipv6_route` (every table; destination
/// `::` and a gateway other than `::`). Each file lists its routes in the dump's order.
fn default_routes(s: &NodeSnapshot) -> Vec<DefaultRoute<'_>> {
    let zero = |r: &RouteFact, v6: bool| {
        route_prefix(r).is_some_and(|(net, _)| net.is_ipv6() == v6 && net.is_unspecified())
    };
    let v4 = s
        .routes
        .iter()
        .filter(|r| {
            r.in_table(rt_table::MAIN) && !r.is_type(rtn::BROADCAST) && !r.is_type(rtn::MULTICAST)
        })
        .filter(|r| zero(r, false))
        .map(|r| DefaultRoute {
            v6: false,
            dev: match (&r.dev, r.is_type(rtn::UNICAST)) {
                (Some(dev), _) => Some(dev.as_str()),
                (None, true) => None,
                (None, false) => Some("*"),
            },
            text: route_text(r),
        });
    let v6 = s
        .routes
        .iter()
        .filter(|r| zero(r, true))
        .filter(|r| {
            r.gateway
                .as_deref()
                .and_then(|g| g.parse::<IpAddr>().ok())
                .is_some_and(|g| !g.is_unspecified())
        })
        .map(|r| DefaultRoute {
            v6: true,
            dev: r.dev.as_deref(),
            text: route_text(r),
        });
    v4.chain(v6).collect()
}

fn route_text(r: &RouteFact) -> String {
    let mut text = format!("{} {}", r.route_type, r.dst);
    if let Some(g) = &r.gateway {
        text.push_str(&format!(" via {g}"));
    }
    text.push_str(&format!(" dev {}", r.dev.as_deref().unwrap_or("*")));
    if !r.in_table(rt_table::MAIN) {
        text.push_str(&format!(" table {}", r.table));
    }
    text
}

/// The first global unicast address of `family` on `dev` (`getMatchingGlobalIP`), saying which
/// it passed over.
fn matching_global_ip(
    s: &NodeSnapshot,
    dev: &str,
    v6: bool,
    why: &mut Vec<String>,
) -> Option<IpAddr> {
    let mut passed = Vec::new();
    let found = s
        .addresses_of(dev)
        .map(|(a, _)| a)
        .filter(|a| go_net::is_ipv4(*a) != v6)
        .find(|a| match go_net::not_global_because(*a) {
            Some(because) => {
                passed.push(format!("{a} ({because})"));
                false
            }
            None => true,
        });
    let family = if v6 { "IPv6" } else { "IPv4" };
    let skipped = if passed.is_empty() {
        String::new()
    } else {
        format!(", passing over {}", passed.join(", "))
    };
    why.push(match found {
        Some(a) => format!(
            "  {dev}: first global unicast {family} address in its address order: {a}{skipped}"
        ),
        None => format!("  {dev}: no global unicast {family} address{skipped}"),
    });
    found
}

/// `chooseHostInterface` with `/proc/net/route` present (k8s.io/apimachinery
/// `pkg/util/net/interface.go`: `getAllDefaultRoutes`, `chooseHostInterfaceFromRoute`,
/// `getIPFromInterface`, `getIPFromLoopbackInterface`): for each family in preference order, each
/// default route of that family: its interface if up, the first global unicast address of the
/// family in the address dump's order; else, before the next route, the first such address on an
/// up loopback interface. Saying each step in `why`.
pub fn choose_host_interface(
    s: &NodeSnapshot,
    prefer_v6: bool,
    why: &mut Vec<String>,
) -> Result<IpAddr, HostInterfaceError> {
    let routes = default_routes(s);
    if routes.is_empty() {
        why.push("no default route in /proc/net/route (main table) or /proc/net/ipv6_route (with a gateway)".into());
        return Err(HostInterfaceError::NoDefaultRoutes);
    }
    why.push(format!(
        "default routes read from /proc/net/route and /proc/net/ipv6_route (file reads, not netlink): {}",
        routes.iter().map(|r| r.text.as_str()).collect::<Vec<_>>().join("; ")
    ));
    for v6 in [prefer_v6, !prefer_v6] {
        for r in routes.iter().filter(|r| r.v6 == v6) {
            let Some(dev) = r.dev else {
                why.push(format!(
                    "  {}: its device is not in the snapshot (a multipath route: the file names its first nexthop's): passed over",
                    r.text
                ));
                continue;
            };
            let link = s
                .link_named(dev)
                .map_err(|()| HostInterfaceError::NoSuchInterface(dev.into()))?;
            if link.is_none_or(|l| l.is_up()) {
                if let Some(ip) = matching_global_ip(s, dev, v6, why) {
                    return Ok(ip);
                }
            } else {
                why.push(format!("  {dev}: down (no IFF_UP)"));
            }
            if let Some(ip) = loopback_global_ip(s, v6, why) {
                return Ok(ip);
            }
        }
    }
    Err(HostInterfaceError::NoAddress)
}

/// `getIPFromLoopbackInterface`: the first global unicast address of the family on an up
/// loopback interface (RFC 5549 setups, or a VIP added to `lo`).
fn loopback_global_ip(s: &NodeSnapshot, v6: bool, why: &mut Vec<String>) -> Option<IpAddr> {
    let found = s
        .interface_names()
        .into_iter()
        .filter(|name| {
            let link = s.link_named(name).ok().flatten();
            link.map_or(*name == "lo", |l| l.is_loopback()) && link.is_none_or(|l| l.is_up())
        })
        .find_map(|name| {
            s.addresses_of(name)
                .map(|(a, _)| a)
                .find(|a| go_net::is_ipv4(*a) != v6 && go_net::is_global_unicast(*a))
                .map(|a| (name, a))
        });
    let family = if v6 { "IPv6" } else { "IPv4" };
    why.push(match found {
        Some((name, a)) => format!(
            "  then an up loopback interface (getIPFromLoopbackInterface): {a} on {name}"
        ),
        None => format!(
            "  then an up loopback interface (getIPFromLoopbackInterface): none has a global unicast {family} address"
        ),
    });
    found.map(|(_, a)| a)
}

/// One resolver kubelet's lookup may go through, and which kubelet binaries take it here.
struct LookupCase {
    resolver: LookupResolver,
    taken_by: String,
}

/// The resolvers kubelet's lookup may go through: the one given, or each (the likely one for an
/// upstream build on this node first), with the builds that take it on this node's files.
fn lookup_cases(ks: &KubeletSettings, choice: Option<&GoResolverChoice>) -> Vec<LookupCase> {
    if let Some(resolver) = ks.resolver {
        return vec![LookupCase {
            resolver,
            taken_by: "the kubelet binary (as given)".into(),
        }];
    }
    let go = match choice {
        Some(c) if !c.cgo => format!("a static build (CGO_ENABLED=0), and a cgo build here: {}", c.because),
        Some(c) => format!("a static build (CGO_ENABLED=0) only: a cgo build goes to libc here ({})", c.because),
        None => "a static build (CGO_ENABLED=0), or a cgo build whose Go keeps its own resolver (this node's nsswitch.conf and resolv.conf were not read)".into(),
    };
    let glibc = match choice {
        Some(c) if c.cgo => format!("a cgo build on glibc: Go sends the lookup to libc here ({})", c.because),
        Some(_) => "a cgo build on glibc only if its own environment sends the lookup to libc (GODEBUG=netdns=cgo, LOCALDOMAIN, RES_OPTIONS, HOSTALIASES): this node's files keep Go's own".into(),
        None => "a cgo build on glibc whose Go sends the lookup to libc".into(),
    };
    let musl = "k3s's embedded kubelet (built with the netcgo tag against musl: always musl's getaddrinfo)".to_string();
    let mut cases = vec![
        LookupCase {
            resolver: LookupResolver::Go,
            taken_by: go,
        },
        LookupCase {
            resolver: LookupResolver::Glibc,
            taken_by: glibc,
        },
        LookupCase {
            resolver: LookupResolver::Musl,
            taken_by: musl,
        },
    ];
    if choice.is_some_and(|c| c.cgo) {
        cases.swap(0, 1);
    }
    cases
}

/// NodeAddress's pick from `net.LookupIP`'s answers: the first valid one of the preferred family,
/// else the first valid one.
fn first_valid(
    order: &[IpAddr],
    valid: &dyn Fn(IpAddr) -> bool,
    prefer_v4: bool,
) -> Option<IpAddr> {
    let mut other = None;
    for a in order.iter().copied().filter(|a| valid(*a)) {
        if go_net::is_ipv4(a) == prefer_v4 {
            return Some(a);
        }
        other = other.or(Some(a));
    }
    other
}

/// kubelet's InternalIP(s): one pick, or one per resolver case when they pick differently;
/// a `gai-reordered` finding for each case whose sort changed the address kubelet takes.
pub(super) fn kubelet(
    s: &NodeSnapshot,
    settings: &ComponentSettings,
    ks: &KubeletSettings,
    choice: Option<&GoResolverChoice>,
    lookups: &[Lookup],
    findings: &mut Vec<Diagnosis>,
) -> Vec<ComponentPick> {
    let node_ips: Vec<IpAddr> = if ks.node_ips.is_empty() {
        settings.node_ip.into_iter().collect()
    } else {
        ks.node_ips.clone()
    };
    let node_ip = node_ips.first().copied();
    let prefer_v4 = node_ip.is_none_or(go_net::is_ipv4);
    let specified = |ip: Option<IpAddr>| ip.filter(|a| !go_net::is_unspecified(*a));
    let (primary, secondary) = (specified(node_ip), specified(node_ips.get(1).copied()));
    let mut why = Vec::new();
    for (what, ip) in [("nodeIP", primary), ("secondaryNodeIP", secondary)] {
        let Some(ip) = ip else { continue };
        match validate_node_ip(s, ip) {
            Ok(dev) => why.push(format!("--node-ip {ip}: valid (validateNodeIP), on {dev}")),
            Err(e) => {
                why.push(format!("--node-ip {ip}: failed to validate {what}: {e}"));
                why.push("NodeAddress fails: kubelet logs it and sets no address (the Node keeps what it had)".into());
                return vec![pick("kubelet", "--node-ip", vec![], why)];
            }
        }
    }
    if let Some(ip) = node_ip.filter(|_| primary.is_none()) {
        why.push(format!(
            "--node-ip {ip}: no address, only the family the lookup and the default-route fallback prefer: {}",
            if prefer_v4 { "IPv4" } else { "IPv6" }
        ));
    }
    if ks.cloud_provider == CloudProvider::External {
        let Some(ip) = primary else {
            why.push("--cloud-provider=external without a --node-ip address: kubelet writes only the Hostname address; the InternalIP is the cloud-controller-manager's (from the cloud's metadata, not this node's interfaces)".into());
            return vec![pick("kubelet", "external cloud provider", vec![], why)];
        };
        let annotation: Vec<String> = [Some(ip), secondary]
            .into_iter()
            .flatten()
            .map(|a| a.to_string())
            .collect();
        why.push(format!(
            "--cloud-provider=external: kubelet annotates the Node alpha.kubernetes.io/provided-node-ip={} for the cloud-controller-manager, and sets --node-ip as a provisional InternalIP only while the Node has no addresses (once the cloud-controller-manager writes them, kubelet leaves them alone)",
            annotation.join(",")
        ));
    }
    let provisional = if ks.cloud_provider == CloudProvider::External {
        ", provisional (external cloud provider)"
    } else {
        ""
    };
    match (primary, secondary) {
        (Some(a), Some(b)) => {
            why.push(format!(
                "a dual-stack pair: both are InternalIPs, {a} first"
            ));
            let setting = format!("--node-ip (dual-stack){provisional}");
            return vec![pick("kubelet", &setting, vec![a, b], why)];
        }
        (Some(a), None) => {
            why.push(format!("--node-ip {a} is used as given"));
            return vec![pick(
                "kubelet",
                &format!("--node-ip{provisional}"),
                vec![a],
                why,
            )];
        }
        _ => {}
    }
    let hostname = ks
        .hostname_override
        .as_deref()
        .unwrap_or(&s.hostname)
        .trim()
        .to_lowercase();
    let hostname_setting = if ks.hostname_override.is_some() {
        "--hostname-override"
    } else {
        "hostname"
    };
    if let Some(ip) = go_net::parse_ip_sloppy(&hostname) {
        why.push(format!(
            "kubelet's hostname {hostname:?} is an IP address: the InternalIP, without validateNodeIP"
        ));
        return vec![pick("kubelet", hostname_setting, vec![ip], why)];
    }
    if ks
        .hostname_override
        .as_deref()
        .is_some_and(|h| !h.trim().eq_ignore_ascii_case(&s.hostname))
    {
        why.push(format!(
            "the node is named after --hostname-override {hostname:?}: this audit looks up {:?}, the snapshot's node name",
            s.hostname
        ));
    }
    node_name_lookup(s, ks, choice, lookups, prefer_v4, why, findings)
}

/// Steps 5 and 6: the node name's lookup per resolver case, validation, and the default-route
/// fallback for a case with no valid answer.
fn node_name_lookup(
    s: &NodeSnapshot,
    ks: &KubeletSettings,
    choice: Option<&GoResolverChoice>,
    lookups: &[Lookup],
    prefer_v4: bool,
    mut why: Vec<String>,
    findings: &mut Vec<Diagnosis>,
) -> Vec<ComponentPick> {
    if s.hosts.is_empty() {
        why.push(format!(
            "node name {:?}: no hosts-file entry (DNS answers are not in the snapshot)",
            s.hostname
        ));
    } else {
        why.push(format!(
            "node name {:?}: the hosts file lists [{}]; validateNodeIP on each:",
            s.hostname,
            list(&s.hosts)
        ));
        for a in &s.hosts {
            why.push(match validate_node_ip(s, *a) {
                Ok(dev) => format!("  {a}: valid, on {dev}"),
                Err(e) => format!("  {a}: rejected: {e}"),
            });
        }
    }
    let valid = |a: IpAddr| validate_node_ip(s, a).is_ok();
    let family = if prefer_v4 { "IPv4" } else { "IPv6" };
    let cases: Vec<(LookupCase, Option<IpAddr>, String)> = lookup_cases(ks, choice)
        .into_iter()
        .map(|case| {
            let order = lookups
                .iter()
                .find(|l| l.resolver == case.resolver)
                .map(|l| l.order.order.as_slice())
                .unwrap_or_default();
            let chosen = first_valid(order, &valid, prefer_v4);
            let outcome = match chosen {
                Some(a) if go_net::is_ipv4(a) == prefer_v4 => {
                    format!("first valid {family} answer: {a}")
                }
                Some(a) => format!("no valid {family} answer; first valid answer: {a}"),
                None => "no valid answer: the default-route fallback".into(),
            };
            let line = format!(
                "{} — taken by {}: [{}] → {outcome}",
                case.resolver.describe(),
                case.taken_by,
                list(order)
            );
            (case, chosen, line)
        })
        .collect();
    let raw = first_valid(&s.hosts, &valid, prefer_v4);
    for (case, chosen, _) in &cases {
        if let (Some(x), Some(listed)) = (*chosen, raw) {
            if x != listed {
                reordered(s, case, x, listed, lookups, findings);
            }
        }
    }
    let mut fallback_lines = vec![format!(
        "no valid answer: ResolveBindAddress → chooseHostInterface ({} first)",
        if prefer_v4 { "IPv4" } else { "IPv6" }
    )];
    let fallback = choose_host_interface(s, !prefer_v4, &mut fallback_lines);
    let fallback_pick = |lines: &mut Vec<String>| -> Vec<IpAddr> {
        lines.extend(fallback_lines.iter().cloned());
        match &fallback {
            Ok(ip) => {
                lines.push(format!("the default-route interface's address: {ip}"));
                vec![*ip]
            }
            Err(e) => {
                lines.push(format!(
                    "can't get ip address of node {}. error: {e}",
                    s.hostname
                ));
                vec![]
            }
        }
    };
    let setting = |chosen: Option<IpAddr>, resolver: Option<LookupResolver>| {
        let (step, joint) = match (chosen, &fallback) {
            (Some(_), _) => ("node name lookup", ", "),
            (None, Ok(_)) => ("default-route interface", ", after "),
            (None, Err(_)) => ("none", ", after "),
        };
        match resolver {
            Some(r) => format!("{step}{joint}{}", r.describe()),
            None => step.to_string(),
        }
    };
    if cases.iter().all(|(_, chosen, _)| *chosen == cases[0].1) {
        let chosen = cases[0].1;
        why.extend(cases.iter().map(|(_, _, line)| line.clone()));
        let picked = match chosen {
            Some(a) => vec![a],
            None => fallback_pick(&mut why),
        };
        return vec![pick("kubelet", &setting(chosen, ks.resolver), picked, why)];
    }
    cases
        .into_iter()
        .map(|(case, chosen, line)| {
            let mut lines = why.clone();
            lines.push(line);
            let picked = match chosen {
                Some(a) => vec![a],
                None => fallback_pick(&mut lines),
            };
            pick(
                "kubelet",
                &setting(chosen, Some(case.resolver)),
                picked,
                lines,
            )
        })
        .collect()
}

/// The `gai-reordered` finding: `case`'s resolver sorted `chosen` ahead of `listed`, the address
/// kubelet would take in hosts-file order.
fn reordered(
    s: &NodeSnapshot,
    case: &LookupCase,
    chosen: IpAddr,
    listed: IpAddr,
    lookups: &[Lookup],
    findings: &mut Vec<Diagnosis>,
) {
    let Some(lookup) = lookups.iter().find(|l| l.resolver == case.resolver) else {
        return;
    };
    let rule = lookup
        .decisive
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let mut evidence = vec![
        format!("hosts file order: [{}]", list(&s.hosts)),
        format!(
            "{} order: [{}]",
            case.resolver.describe(),
            list(&lookup.order.order)
        ),
    ];
    evidence.extend(lookup.order.reasoning.iter().cloned());
    evidence.push(format!("taken by {}", case.taken_by));
    findings.push(Diagnosis {
        id: DiagnosisId::GaiReordered,
        severity: Severity::Warning,
        summary: format!(
            "kubelet's node IP would be {chosen}, not {listed} listed first for {:?}, when its lookup goes through {}: the resolver re-sorted it{rule}",
            s.hostname,
            case.resolver.describe()
        ),
        evidence,
        remedy: "set kubelet --node-ip, or list only the wanted address for the node name, or add a gai.conf precedence line for it".into(),
    });
}
