//! The kernel's own notices of address changes: a `NETLINK_ROUTE` socket in the tracer's
//! network namespace (the node's, where it runs as a DaemonSet with `hostNetwork`), joined to
//! the IPv4 and IPv6 address groups, as `ip monitor address` is. Every address added, changed
//! or removed there comes as an `RTM_NEWADDR`/`RTM_DELADDR` notice, whoever made it: a
//! process's request (which the netlink capture also sees) or the kernel itself (an IPv6
//! link-local address when a link comes up, SLAAC, duplicate address detection, an address
//! that expires or is deprecated). The datagrams are handed on as bytes; decoding them is the
//! pipeline's.
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

/// `RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR`.
const ADDRESS_GROUPS: u32 = 0x10 | 0x100;

/// A datagram's bytes at most: notices are one address each (under 100 bytes); a 32 KiB buffer
/// takes any the kernel batches.
const DATAGRAM_BYTES: usize = 32 << 10;

/// The socket, readable through the runtime.
pub struct AddressNotices {
    socket: AsyncFd<OwnedFd>,
    buffer: Vec<u8>,
    /// Times the socket's receive queue overflowed (`ENOBUFS`): notices lost, count unknown.
    overflows: u64,
}

impl AddressNotices {
    /// Opens the socket and joins the address groups (needs a tokio runtime).
    pub fn open() -> std::io::Result<Self> {
        // SAFETY: plain socket(2); the fd is owned at once.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor nobody else owns.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data; zeroed is its unbound form.
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        address.nl_groups = ADDRESS_GROUPS;
        // SAFETY: a valid sockaddr_nl of its own size.
        let bound = unsafe {
            libc::bind(
                socket.as_raw_fd(),
                (&address as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if bound < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: the AsyncFd owns the socket, so it stays open while registered.
            socket: unsafe { AsyncFd::register(socket) }?,
            buffer: vec![0; DATAGRAM_BYTES],
            overflows: 0,
        })
    }

    /// Waits until a notice can be read.
    pub async fn readable(&self) -> std::io::Result<()> {
        self.socket.readable().await?.clear_ready();
        Ok(())
    }

    /// Hands each datagram waiting to `take`, without waiting.
    pub fn read_waiting(&mut self, mut take: impl FnMut(&[u8])) {
        loop {
            // SAFETY: reads into our own buffer of its length.
            let n = unsafe {
                libc::recv(
                    self.socket.as_raw_fd(),
                    self.buffer.as_mut_ptr().cast(),
                    self.buffer.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                take(&self.buffer[..n as usize]);
                continue;
            }
            if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                self.overflows += 1;
                continue;
            }
            return;
        }
    }

    /// Times notices were lost to a full receive queue.
    pub fn overflows(&self) -> u64 {
        self.overflows
    }
}
