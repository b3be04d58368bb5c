//! flannel's public IP, live: flannel without `--iface` finds its external interface as the
//! first IPv4 default route of the main table (`GetDefaultGatewayInterface`:
//! `netlink.RouteList(nil, AF_INET)`, an `RTM_GETROUTE` dump), that route's interface
//! (`net.InterfaceByIndex`: an `RTM_GETLINK` dump) and the interface's IPv4 addresses
//! (`netlink.AddrList(link, AF_INET)`: an `RTM_GETADDR` dump, filtered to the link by flannel).
//! This replays flannel's rule ([`crate::explain::node_audit::flannel`]: the default-route
//! interface's IPv4 addresses, global before link-local, permanent before dynamic) on the
//! dumps that process received — decided when it has a route dump and an address dump, in
//! either order, its link dump naming interfaces the others give by index — and says the pick
//! as a `node-ip-picked` diagnosis (info). The trace does not read the process's `--iface`
//! (k3s: `--flannel-iface`): the summary says the rule replayed is the one without it, and
//! `explain --from RECORDING --flannel-iface IFACE` replays it with one.
//!
//! The processes: `flanneld` (flannel's own binary), and k3s, which runs flannel inside its own
//! process. k3s's `k3s server`/`k3s agent` wrapper `syscall.Exec`s `k3s-server`/`k3s-agent`
//! from its data directory's `bin` (read in k3s's `cmd/k3s/main.go`), so the kernel names the
//! process `k3s-server` or `k3s-agent`; `k3s` is taken too, for a binary run without the
//! wrapper. k3s's `gspt.SetProcTitle` rewrites the argument area, not the comm (read in gspt's
//! `setproctitle.h`). Not confirmed on a running k3s node. Inside k3s, the kubelet and
//! kube-proxy it embeds dump routes and addresses too: any route dump and address dump of that
//! process are replayed, and a pick is said once per process and address.
use super::process_dumps::{DumpKind, DumpRule, ProcessDumps, Said};
use crate::explain::node_audit::flannel::flannel;
use crate::explain::node_audit::REMEDY_FLANNEL_PICKED;
use crate::model::event::Event;

/// flannel's own binary's comm.
const FLANNELD: &str = "flanneld";

/// flannel's default-route interface rule on flannel's (or k3s's) dumps.
pub(super) struct Flannel;

impl DumpRule for Flannel {
    const COMMS: &'static [&'static str] = &[FLANNELD, "k3s-server", "k3s-agent", "k3s"];

    /// A route dump and an address dump (its link dump, when seen, names interfaces).
    const NEEDED: &'static [DumpKind] = &[DumpKind::Routes, DumpKind::Addresses];

    /// flannel's rule without `--iface` on the dumps of `e`'s process.
    fn pick(e: &Event, dumps: &ProcessDumps) -> Option<Said> {
        let replayed = flannel(&dumps.snapshot(), None);
        let (who, flag) = if e.comm == FLANNELD {
            (e.who(), "--iface")
        } else {
            (
                format!("{} (k3s's embedded flannel)", e.who()),
                "--flannel-iface",
            )
        };
        let rule = format!("flannel's rule without {flag} (the trace does not read its flags)");
        let summary = match replayed.picked.first() {
            Some(ip) => format!(
                "{who} takes {ip} as its public IP with {rule}: the first IPv4 address of the default-route interface, permanent before dynamic, from the routes and addresses it listed"
            ),
            None => format!(
                "{who} finds no public IP with {rule}: {}",
                replayed
                    .reasoning
                    .last()
                    .map_or("nothing to replay", String::as_str)
            ),
        };
        Some(dumps.picked(e, summary, replayed, REMEDY_FLANNEL_PICKED))
    }
}
