//! calico-node's IPv4 address, live: a process named `calico-node` autodetecting its address
//! lists the interfaces (`net.Interfaces()`: an `RTM_GETLINK` dump) and then each one's
//! addresses (`Interface.Addrs()`: an `RTM_GETADDR` dump each). This replays calico's default
//! method, `first-found` (the newest release's exclusion list, interfaces walked in reverse, the
//! first global unicast IPv4 address; [`crate::explain::node_audit::calico`]), on the two dumps
//! it received (decided when it has both, in either order; [`super::process_dumps`]), and says the pick as a `node-ip-picked` diagnosis (info). The trace does not
//! read the process's `IP_AUTODETECTION_METHOD`: the summary says the method replayed, and
//! `explain --from` replays another on the same dumps.
use super::process_dumps::{DumpKind, DumpRule, ProcessDumps, Said};
use crate::explain::node_audit::calico::{calico, CalicoSettings};
use crate::explain::node_audit::REMEDY_CALICO_PICKED;
use crate::model::event::Event;

/// calico's first-found on calico-node's dumps.
pub(super) struct CalicoNode;

impl DumpRule for CalicoNode {
    const COMMS: &'static [&'static str] = &["calico-node"];

    /// A link dump and an address dump; forgotten once used, so calico's further
    /// per-interface address dumps do not decide again.
    const NEEDED: &'static [DumpKind] = &[DumpKind::Links, DumpKind::Addresses];

    /// calico's first-found on calico-node `e`'s dumps.
    fn pick(e: &Event, dumps: &ProcessDumps) -> Option<Said> {
        let snapshot = dumps.snapshot();
        let replayed = calico(
            &snapshot,
            Some("first-found"),
            &CalicoSettings::default(),
            &[],
            &mut Vec::new(),
        );
        let method = "IP_AUTODETECTION_METHOD first-found (the default; the trace does not read the process's environment)";
        let summary = match replayed.picked.first() {
            Some(ip) => format!(
                "{} detects {ip} as its IPv4 address with {method}, from the interfaces and addresses it listed",
                e.who()
            ),
            None => format!(
                "{} detects no IPv4 address with {method}: it keeps its Node's address, or exits",
                e.who()
            ),
        };
        Some(dumps.picked(e, summary, replayed, REMEDY_CALICO_PICKED))
    }
}
