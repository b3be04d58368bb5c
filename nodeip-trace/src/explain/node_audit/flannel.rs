//! flannel's external interface and address (`pkg/ipmatch` `LookupExtIface` with an IPv4
//! stack, as flannel and k3s's embedded flannel run it), read from flannel's source:
//!
//! 1. `--iface` (k3s: `--flannel-iface`) an IP: the interface holding that IPv4 address
//!    (`net.Interfaces()` order), and that address; a name: that interface.
//! 2. Otherwise the default-gateway interface (`GetDefaultGatewayInterface`): the first route
//!    of `netlink.RouteList(nil, AF_INET)` — the main table, in the kernel's dump order — whose
//!    destination is absent or `0.0.0.0/0`; its output interface.
//! 3. The interface's IPv4 addresses (`GetInterfaceIP4Addrs`) in the dump's order, sorted
//!    global before link-local, permanent before dynamic (DHCP, SLAAC), non-temporary before
//!    temporary; deprecated ones and any that are neither global nor link-local unicast are
//!    dropped; the first is the pick.
//!
//! k3s#12459: with a DHCP address and a static alias on the default-route interface, the static
//! alias wins step 3 (permanent before dynamic), whatever `--node-ip` says.
use std::net::IpAddr;

use super::{main_defaults, pick, ComponentPick, NodeSnapshot};
use crate::explain::go_net;
use crate::model::facts::AddressFact;

/// The component's name in the audit.
const FLANNEL: &str = "flannel";

/// The default-gateway interface (step 2), or flannel's error.
fn default_gateway_interface<'a>(
    s: &'a NodeSnapshot,
    why: &mut Vec<String>,
) -> Result<&'a str, String> {
    let Some(route) = main_defaults(s, false).next() else {
        return Err("unable to find default route".into());
    };
    match route.dev.as_deref() {
        Some(dev) => {
            why.push(format!(
                "default-gateway interface: {dev} (the first IPv4 default route of the main table: {} via {})",
                route.dst,
                route.gateway.as_deref().unwrap_or("-")
            ));
            Ok(dev)
        }
        None => Err("found default route but could not determine interface".into()),
    }
}

/// `GetInterfaceIP4Addrs`'s preference: 0 sorts first.
fn rank(ip: IpAddr, a: &AddressFact) -> (u8, u8, u8) {
    (
        u8::from(!go_net::is_global_unicast(ip)),
        u8::from(a.has("dynamic")),
        u8::from(a.has("temporary")),
    )
}

/// The usable IPv4 addresses of `ifname`, best first (step 3).
fn interface_ip4_addrs<'a>(s: &'a NodeSnapshot, ifname: &'a str) -> Vec<(IpAddr, &'a AddressFact)> {
    let mut addrs: Vec<(IpAddr, &AddressFact)> = s
        .addresses_of(ifname)
        .filter(|(ip, _)| ip.is_ipv4())
        .collect();
    // A stable sort: equals keep the dump's order.
    addrs.sort_by_key(|(ip, a)| rank(*ip, a));
    addrs
        .into_iter()
        .filter(|(ip, a)| {
            (go_net::is_global_unicast(*ip) || go_net::is_link_local_unicast(*ip))
                && !a.has("deprecated")
        })
        .collect()
}

/// flannel's pick with `iface` its `--iface` (`None`: the default-gateway interface).
pub(crate) fn flannel(s: &NodeSnapshot, iface: Option<&str>) -> ComponentPick {
    let mut why = Vec::new();
    let setting = match iface {
        Some(i) => format!("--iface={i}"),
        None => "default-route interface".to_string(),
    };
    let fail = |mut why: Vec<String>, error: String| {
        why.push(format!("flannel fails to start: {error}"));
        pick(FLANNEL, &setting, vec![], why)
    };
    let ifname = match iface {
        Some(text) => match go_net::parse_ip_sloppy(text).filter(|ip| ip.is_ipv4()) {
            Some(ip) => {
                return match s.address_rows().find(|(a, _)| *a == ip) {
                    Some((_, f)) => {
                        why.push(format!("--iface {ip}: held by {}, taken as is", f.ifname));
                        pick(FLANNEL, &setting, vec![ip], why)
                    }
                    None => fail(why, format!("no interface with given IP {ip} found")),
                };
            }
            None if s.addresses_of(text).next().is_some()
                || s.links.iter().any(|l| l.ifname.as_deref() == Some(text)) =>
            {
                why.push(format!("--iface {text}: that interface"));
                text.to_string()
            }
            None => return fail(why, format!("error looking up interface {text}")),
        },
        None => match default_gateway_interface(s, &mut why) {
            Ok(dev) => dev.to_string(),
            Err(e) => return fail(why, format!("failed to get default interface: {e}")),
        },
    };
    let usable = interface_ip4_addrs(s, &ifname);
    let Some((first, _)) = usable.first() else {
        return fail(
            why,
            format!("failed to find IPv4 address for interface {ifname}"),
        );
    };
    let order: Vec<String> = usable
        .iter()
        .map(|(ip, a)| {
            let mut words = vec![ip.to_string()];
            words.extend(a.flags.iter().map(ToString::to_string));
            words.join(" ")
        })
        .collect();
    why.push(format!(
        "its IPv4 addresses, global before link-local, permanent before dynamic, non-temporary before temporary, deprecated dropped: [{}]",
        order.join(", ")
    ));
    why.push(format!("the first, {first}, is flannel's public IP"));
    pick(FLANNEL, &setting, vec![*first], why)
}
