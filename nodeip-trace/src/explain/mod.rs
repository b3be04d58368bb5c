//! explain: why the events are what they are — each resolver's sort replayed behind one seam
//! ([`resolver`]: glibc's RFC 6724 sort and its gai.conf, musl's, Go's), the diagnoses of the
//! known failure patterns ([`diagnose`]), and the node address audit ([`node_audit`]: kubelet's
//! and calico's own rules for the node IP, kube-proxy's and OpenELB's), with Go's `net.IP`
//! classification they share ([`go_net`]).
pub mod address_ledger;
pub mod diagnose;
pub mod go_net;
pub mod node_audit;
pub mod resolver;
