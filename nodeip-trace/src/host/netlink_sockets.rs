//! Netlink sockets that exist before tracing starts: `/proc/PID/fd` → socket inode, and
//! `/proc/PID/net/netlink` (per network namespace) → inode → protocol. The eBPF side learns new
//! sockets from `socket()` itself; this scan covers the ones opened earlier.
use std::collections::HashMap;
use std::path::Path;

/// One netlink socket of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetlinkSocket {
    /// Owning thread group.
    pub tgid: u32,
    /// File descriptor in that process.
    pub fd: u32,
    /// Netlink protocol.
    pub protocol: u32,
    /// The socket's port id (nl_pid), when bound.
    pub portid: u32,
}

/// Parses `/proc/net/netlink`: inode → (protocol, portid).
///
/// Columns: `sk Eth Pid Groups Rmem Wmem Dump Locks Drops Inode` (older kernels lack Drops).
pub fn parse_proc_net_netlink(text: &str) -> HashMap<u64, (u32, u32)> {
    let mut out = HashMap::new();
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 9 {
            continue;
        }
        let (Ok(protocol), Ok(portid), Ok(inode)) = (
            cols[1].parse::<u32>(),
            cols[2].parse::<i64>(),
            cols[cols.len() - 1].parse::<u64>(),
        ) else {
            continue;
        };
        out.insert(inode, (protocol, portid as u32));
    }
    out
}

/// The netlink sockets of one process.
pub fn sockets_of(proc_root: &Path, tgid: u32, cache: &mut NetnsCache) -> Vec<NetlinkSocket> {
    let base = proc_root.join(tgid.to_string());
    let Some(table) = cache.table_for(&base) else {
        return Vec::new();
    };
    let Ok(fds) = std::fs::read_dir(base.join("fd")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for fd in fds.flatten() {
        let Some(fd_num) = fd.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue;
        };
        let Some(inode) = target
            .to_str()
            .and_then(|t| t.strip_prefix("socket:["))
            .and_then(|t| t.strip_suffix(']'))
            .and_then(|t| t.parse::<u64>().ok())
        else {
            continue;
        };
        if let Some(&(protocol, portid)) = table.get(&inode) {
            out.push(NetlinkSocket {
                tgid,
                fd: fd_num,
                protocol,
                portid,
            });
        }
    }
    out
}

/// `/proc/PID/net/netlink` tables, cached per network namespace.
#[derive(Default)]
pub struct NetnsCache {
    tables: HashMap<std::path::PathBuf, HashMap<u64, (u32, u32)>>,
}

impl NetnsCache {
    fn table_for(&mut self, proc_pid: &Path) -> Option<&HashMap<u64, (u32, u32)>> {
        let ns = std::fs::read_link(proc_pid.join("ns/net")).ok()?;
        if !self.tables.contains_key(&ns) {
            let text = std::fs::read_to_string(proc_pid.join("net/netlink")).ok()?;
            self.tables
                .insert(ns.clone(), parse_proc_net_netlink(&text));
        }
        self.tables.get(&ns)
    }
}

/// Every netlink socket of every process.
pub fn scan_all(proc_root: &Path) -> Vec<NetlinkSocket> {
    let mut cache = NetnsCache::default();
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .flat_map(|tgid| sockets_of(proc_root, tgid, &mut cache))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_net_netlink() {
        let text = "\
sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode
ffff8880047d4000 0   1234       00000000 0        0        0     2        0        5555
ffff8880047d4800 16  -4001      00000000 0        0        0     2        0        6666
";
        let t = parse_proc_net_netlink(text);
        assert_eq!(t.get(&5555), Some(&(0, 1234)));
        assert_eq!(t.get(&6666), Some(&(16, (-4001i64) as u32)));
    }

    #[test]
    fn finds_a_socket_this_process_opens() {
        // SAFETY: plain socket(2) call; the fd is closed below.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, 0) };
        assert!(fd >= 0);
        // Unbound netlink sockets are not listed in /proc/net/netlink; bind (autobind) first.
        // SAFETY: sockaddr_nl is plain data; all zeroes is a valid value.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        // SAFETY: binds our own socket to an address on the stack, of its size.
        let rc = unsafe {
            libc::bind(
                fd,
                (&addr as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        assert_eq!(rc, 0);
        let mut cache = NetnsCache::default();
        let found = sockets_of(Path::new("/proc"), std::process::id(), &mut cache);
        // SAFETY: closes our own socket, once.
        unsafe { libc::close(fd) };
        assert!(
            found.iter().any(|s| s.fd == fd as u32 && s.protocol == 0),
            "{found:?}"
        );
    }
}
