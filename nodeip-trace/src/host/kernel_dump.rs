//! Asks the kernel for a netlink dump from this process: the generic-netlink family list (so IPVS
//! and others are named even when no traced process looked them up) and, from inside a traced
//! process's network namespace, its interface names (so routes show `dev lo`, not `dev 1`).
//! Our own process is never traced, so these requests do not appear in the timeline.
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::decode::netlink::NetlinkDecoder;
use crate::model::netlink::rtm::{
    GETADDR as RTM_GETADDR, GETLINK as RTM_GETLINK, GETROUTE as RTM_GETROUTE,
};
use crate::model::netlink::{MessageBody, NetlinkMessage, GENL_ID_CTRL};

/// `NLM_F_REQUEST | NLM_F_DUMP`.
const REQUEST_DUMP: u16 = 0x1 | 0x300;
/// `CTRL_CMD_GETFAMILY`: nlctrl's request for its families.
const CTRL_CMD_GETFAMILY: u8 = 3;
/// `nlmsg_seq` of every request the tracer itself sends ("nitr"): an nlmon capture taken while
/// tracing shows the tracer's own lookups (and the kernel's replies, which echo it) by it.
pub const OWN_REQUEST_SEQ: u32 = 0x6e69_7472;
/// Receive calls per dump at most (a dump of thousands of links is a few dozen reads).
const MAX_READS: usize = 4096;

/// A dump request: `nlmsghdr` + `body`.
fn request(message_type: u16, body: &[u8]) -> Vec<u8> {
    let len = 16 + body.len();
    let mut req = Vec::with_capacity(len);
    req.extend_from_slice(&(len as u32).to_ne_bytes());
    req.extend_from_slice(&message_type.to_ne_bytes());
    req.extend_from_slice(&REQUEST_DUMP.to_ne_bytes());
    req.extend_from_slice(&OWN_REQUEST_SEQ.to_ne_bytes());
    req.extend_from_slice(&0u32.to_ne_bytes());
    req.extend_from_slice(body);
    req
}

/// Sends `req` on a new `protocol` socket and returns the decoded replies up to `NLMSG_DONE`
/// (empty when the kernel refuses; partial when a read fails).
fn dump(protocol: i32, req: &[u8], decoder: &mut NetlinkDecoder) -> Vec<NetlinkMessage> {
    let mut out = Vec::new();
    // SAFETY: socket() has no preconditions; the fd is owned (and closed) by OwnedFd.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol,
        )
    };
    if raw < 0 {
        return out;
    }
    // SAFETY: raw is a fresh fd nobody else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: req is a valid buffer of req.len() bytes.
    let sent = unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) };
    if sent != req.len() as isize {
        return out;
    }
    let mut buf = vec![0u8; 65536];
    for _ in 0..MAX_READS {
        // SAFETY: buf is a valid writable buffer of buf.len() bytes.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            break;
        }
        for m in decoder.decode(protocol as u16, &buf[..n as usize]).messages {
            if matches!(m.body, MessageBody::Done(_) | MessageBody::Error(_)) {
                return out;
            }
            out.push(m);
        }
    }
    out
}

/// genl family id → name, from the kernel of the current network namespace (empty on failure).
pub fn genl_families() -> BTreeMap<u16, String> {
    let mut decoder = NetlinkDecoder::new();
    let req = request(GENL_ID_CTRL, &[CTRL_CMD_GETFAMILY, 1, 0, 0]);
    dump(libc::NETLINK_GENERIC, &req, &mut decoder)
        .into_iter()
        .filter_map(|m| match m.body {
            MessageBody::Nlctrl(c) => Some((c.family_id?, c.family_name?)),
            _ => None,
        })
        .collect()
}

/// Interface index → name in the current thread's network namespace (empty on failure).
fn interfaces_here() -> BTreeMap<u32, String> {
    let mut decoder = NetlinkDecoder::new();
    // struct ifinfomsg: family AF_UNSPEC, the rest zero.
    let req = request(RTM_GETLINK, &[0u8; 16]);
    dump(libc::NETLINK_ROUTE, &req, &mut decoder)
        .into_iter()
        .filter_map(|m| match m.body {
            MessageBody::Link(l) => Some((l.index, l.ifname?)),
            _ => None,
        })
        .collect()
}

/// Links, addresses and routes (all tables) of the current thread's network namespace, as the
/// kernel answers dumps of them (links first, so addresses and routes carry interface names).
fn node_messages_here() -> Vec<NetlinkMessage> {
    let mut decoder = NetlinkDecoder::new();
    let mut out = Vec::new();
    // ifinfomsg (16 bytes), ifaddrmsg (8), rtmsg (12): all AF_UNSPEC, every table.
    for (kind, body_len) in [(RTM_GETLINK, 16), (RTM_GETADDR, 8), (RTM_GETROUTE, 12)] {
        let req = request(kind, &vec![0u8; body_len]);
        out.extend(dump(libc::NETLINK_ROUTE, &req, &mut decoder));
    }
    out
}

/// Links, addresses and routes of network namespace `netns` (a path such as `/run/netns/NAME` or
/// `/proc/PID/ns/net`), or of ours when `None`, dumped from a thread that joins it.
pub fn node_messages(netns: Option<&std::path::Path>) -> std::io::Result<Vec<NetlinkMessage>> {
    let Some(path) = netns else {
        return Ok(node_messages_here());
    };
    let ns = std::fs::File::open(path)?;
    std::thread::spawn(move || {
        // SAFETY: ns is an open namespace fd; setns affects only this thread, which ends here.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(node_messages_here())
    })
    .join()
    .unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
}

/// The network namespace of `pid` as an id (the inode of `/proc/PID/ns/net`), if it is alive.
pub fn netns_of(pid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// A path naming network namespace `netns`: the process's own `/proc/PID/ns/net` when it is
/// still there and in it, else a named namespace (`/run/netns/*`, as `ip netns` makes), else any
/// process in it (a pod's pause container holds its namespace).
fn netns_path(netns: u64, pid: u32) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let is_it = |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.ino() == netns);
    let own = std::path::PathBuf::from(format!("/proc/{pid}/ns/net"));
    if is_it(&own) {
        return Some(own);
    }
    let named = std::fs::read_dir("/run/netns").into_iter().flatten();
    let processes = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .map(|e| e.map(|e| e.path().join("ns/net")));
    named
        .map(|e| e.map(|e| e.path()))
        .chain(processes)
        .flatten()
        .find(|p| is_it(p))
}

/// Interface index → name in network namespace `netns` (found as `netns_path` says), dumped
/// from a short-lived thread that joins it (`setns` changes only the calling thread). Empty when
/// the namespace is gone or cannot be joined.
pub fn interfaces_in(netns: u64, pid: u32) -> BTreeMap<u32, String> {
    let Some(ns) = netns_path(netns, pid).and_then(|p| std::fs::File::open(p).ok()) else {
        return BTreeMap::new();
    };
    std::thread::spawn(move || {
        // SAFETY: ns is an open namespace fd; setns affects only this thread, which ends here.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return BTreeMap::new();
        }
        interfaces_here()
    })
    .join()
    .unwrap_or_default()
}

/// The live [`InterfaceDirectory`](crate::model::ports::InterfaceDirectory): `/proc` and a link dump
/// from inside the process's namespace.
pub struct ProcInterfaceDirectory;

impl crate::model::ports::InterfaceDirectory for ProcInterfaceDirectory {
    fn netns_of(&mut self, pid: u32) -> Option<u64> {
        netns_of(pid)
    }

    fn interfaces_in(&mut self, netns: u64, pid: u32) -> BTreeMap<u32, String> {
        interfaces_in(netns, pid)
    }

    fn netns_name(&mut self, netns: u64) -> Option<String> {
        ip_netns_name(netns)
    }
}

/// The name `ip netns` gives namespace `netns`: the entry of `/run/netns` bind-mounted on it
/// (its inode is the namespace's), if any.
pub fn ip_netns_name(netns: u64) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir("/run/netns")
        .ok()?
        .flatten()
        .find(|entry| std::fs::metadata(entry.path()).is_ok_and(|m| m.ino() == netns))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_kernel_knows_nlctrl() {
        let families = super::genl_families();
        assert_eq!(
            families.get(&0x10).map(String::as_str),
            Some("nlctrl"),
            "{families:?}"
        );
    }

    #[test]
    fn our_namespace_has_lo_at_index_1() {
        let me = std::process::id();
        let netns = super::netns_of(me).unwrap();
        let interfaces = super::interfaces_in(netns, me);
        assert_eq!(
            interfaces.get(&1).map(String::as_str),
            Some("lo"),
            "{interfaces:?}"
        );
        // Found through another process in it when the given one is gone.
        assert_eq!(super::interfaces_in(netns, u32::MAX), interfaces);
        assert!(super::interfaces_in(1, me).is_empty());
    }
}
