//! `ipvs_client FAMILY_ID`: a tiny IPVS generic-netlink client for the end-to-end tests, for
//! kernels without IPVS (and so without an IPVS family id to resolve).
//!
//! It speaks like ipvsadm does through libipvs and libnl: one `AF_NETLINK`/`NETLINK_GENERIC`
//! socket bound to a kernel-chosen port id, `sendmsg` to the kernel, every request with
//! `NLM_F_REQUEST|NLM_F_ACK`, the port id in `nlmsg_pid` and a sequence number counting up from
//! the clock. First `CTRL_CMD_GETFAMILY` for `IPVS` (what `genl_ctrl_resolve` sends), then IPVS
//! commands addressed to `FAMILY_ID`, attributes in the order `ipvs_nl_fill_service_attr` and
//! `ipvs_nl_fill_dest_attr` write them (the decoder's fixtures check that order byte for byte
//! against a real ipvsadm capture):
//!
//! 1. `IPVS_CMD_NEW_SERVICE` TCP 10.96.0.10:53, scheduler `rr`, flags 0 (mask ~0), netmask /32
//! 2. `IPVS_CMD_NEW_DEST` for that service: 10.244.1.5:53, masq, weight 1
//! 3. `IPVS_CMD_NEW_SERVICE` TCP \[fd00:10:96::a\]:53, `rr`, netmask 128
//! 4. `IPVS_CMD_GET_SERVICE` with `NLM_F_DUMP`
//! 5. `IPVS_CMD_GET_INFO`
//! 6. `IPVS_CMD_DEL_SERVICE` TCP 10.96.0.10:53, then the IPv6 one
//!
//! After each request it reads until the kernel's `NLMSG_ERROR` (an ACK or an error) for that
//! sequence number, and prints one line per reply: `SEQ COMMAND: errno NAME` or `… ack`. On a
//! kernel without IPVS every answer is `ENOENT` (no such family). Exit status 0 when every
//! request was answered, 1 when one was not (timeout after 2 s) or a syscall failed.
//!
//! `ipvs_client FAMILY_ID --kube-proxy-local-table` plays kube-proxy's old NodePort address
//! discovery instead (seeds 002/004), all from one process: an `RTM_GETROUTE` dump on a
//! `NETLINK_ROUTE` socket, the `src` of every IPv4 `local` route of table local with protocol
//! kernel (what `ip route show table local type local proto kernel` lists; 127/8 and kube-ipvs0
//! left out, as kube-proxy does), then
//! `IPVS_CMD_NEW_SERVICE` TCP `SRC:30080` for each distinct one.
//!
//! Unlike libnl it does not peek before reading (`MSG_PEEK|MSG_TRUNC`): one `recvmsg` per reply
//! into a 32 KiB buffer, so every traced receive carries messages.
use std::io::Error;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::ExitCode;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_DUMP: u16 = 0x300;
const NLA_F_NESTED: u16 = 0x8000;

const IPVS_CMD_NEW_SERVICE: u8 = 1;
const IPVS_CMD_DEL_SERVICE: u8 = 3;
const IPVS_CMD_GET_SERVICE: u8 = 4;
const IPVS_CMD_NEW_DEST: u8 = 5;
const IPVS_CMD_GET_INFO: u8 = 15;
const IPVS_GENL_VERSION: u8 = 1;
const IPVS_CMD_ATTR_SERVICE: u16 = 1;
const IPVS_CMD_ATTR_DEST: u16 = 2;

/// One netlink request under construction: header, genl header, attributes.
struct Request {
    buf: Vec<u8>,
    nests: Vec<usize>,
}

impl Request {
    fn new(family: u16, flags: u16, cmd: u8) -> Self {
        let mut buf = vec![0u8; 16];
        buf[4..6].copy_from_slice(&family.to_ne_bytes());
        buf[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | flags).to_ne_bytes());
        buf.extend_from_slice(&[cmd, IPVS_GENL_VERSION, 0, 0]);
        Request {
            buf,
            nests: Vec::new(),
        }
    }

    /// An attribute, padded to 4 bytes (`nla_put`).
    fn attr(&mut self, kind: u16, value: &[u8]) -> &mut Self {
        self.buf
            .extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(self.buf.len().next_multiple_of(4), 0);
        self
    }

    /// Starts a nested attribute (`nla_nest_start`, which sets `NLA_F_NESTED`).
    fn nest(&mut self, kind: u16) -> &mut Self {
        self.nests.push(self.buf.len());
        self.attr(kind | NLA_F_NESTED, &[])
    }

    /// Ends the innermost nested attribute (`nla_nest_end`).
    fn end(&mut self) -> &mut Self {
        let start = self.nests.pop().expect("a nest to end");
        let len = (self.buf.len() - start) as u16;
        self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        self
    }

    /// The finished message with its length, sequence number and port id.
    fn finish(mut self, seq: u32, port: u32) -> Vec<u8> {
        let len = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf[8..12].copy_from_slice(&seq.to_ne_bytes());
        self.buf[12..16].copy_from_slice(&port.to_ne_bytes());
        self.buf
    }
}

/// A virtual service as libipvs holds it.
struct Service {
    address: std::net::IpAddr,
    port: u16,
    scheduler: &'static str,
}

impl Service {
    /// `IPVS_CMD_ATTR_SERVICE` as `ipvs_nl_fill_service_attr` writes it (TCP, not fwmark).
    fn fill(&self, request: &mut Request) {
        let (af, netmask): (u16, u32) = match self.address {
            std::net::IpAddr::V4(_) => (libc::AF_INET as u16, u32::MAX),
            std::net::IpAddr::V6(_) => (libc::AF_INET6 as u16, 128),
        };
        // union nf_inet_addr: 16 bytes, IPv4 in the first 4.
        let mut address = match self.address {
            std::net::IpAddr::V4(a) => a.octets().to_vec(),
            std::net::IpAddr::V6(a) => a.octets().to_vec(),
        };
        address.resize(16, 0);
        // struct ip_vs_flags { flags, mask = ~0 }
        let mut flags = 0u32.to_ne_bytes().to_vec();
        flags.extend_from_slice(&u32::MAX.to_ne_bytes());
        request
            .nest(IPVS_CMD_ATTR_SERVICE)
            .attr(1, &af.to_ne_bytes()) // IPVS_SVC_ATTR_AF
            .attr(2, &(libc::IPPROTO_TCP as u16).to_ne_bytes()) // PROTOCOL
            .attr(3, &address) // ADDR
            .attr(4, &self.port.to_be_bytes()) // PORT, network order
            .attr(6, &[self.scheduler.as_bytes(), b"\0"].concat()) // SCHED_NAME
            .attr(7, &flags) // FLAGS
            .attr(8, &0u32.to_ne_bytes()) // TIMEOUT
            .attr(9, &netmask.to_ne_bytes()) // NETMASK
            .end();
    }
}

/// `IPVS_CMD_ATTR_DEST` for an IPv4 masq destination, as `ipvs_nl_fill_dest_attr` writes it.
fn fill_dest(request: &mut Request, address: Ipv4Addr, port: u16, weight: u32) {
    let mut addr = address.octets().to_vec();
    addr.resize(16, 0);
    request
        .nest(IPVS_CMD_ATTR_DEST)
        .attr(11, &(libc::AF_INET as u16).to_ne_bytes()) // ADDR_FAMILY
        .attr(1, &addr) // ADDR
        .attr(2, &port.to_be_bytes()) // PORT
        .attr(3, &0u32.to_ne_bytes()) // FWD_METHOD = IP_VS_CONN_F_MASQ
        .attr(4, &weight.to_ne_bytes()) // WEIGHT
        .attr(13, &[0]) // TUN_TYPE
        .attr(14, &0u16.to_ne_bytes()) // TUN_PORT
        .attr(15, &0u16.to_ne_bytes()) // TUN_FLAGS
        .attr(5, &0u32.to_ne_bytes()) // U_THRESH
        .attr(6, &0u32.to_ne_bytes()) // L_THRESH
        .end();
}

/// The requests, each with the name printed for its reply.
fn requests(family: u16) -> Vec<(&'static str, Request)> {
    let v4 = Service {
        address: Ipv4Addr::new(10, 96, 0, 10).into(),
        port: 53,
        scheduler: "rr",
    };
    let v6 = Service {
        address: "fd00:10:96::a".parse::<Ipv6Addr>().unwrap().into(),
        port: 53,
        scheduler: "rr",
    };
    // ipvsadm passes the service with an empty scheduler when it adds a destination or deletes.
    let v4_ref = Service {
        scheduler: "",
        ..v4
    };
    let v6_ref = Service {
        scheduler: "",
        ..v6
    };

    let mut getfamily = Request::new(GENL_ID_CTRL, 0, CTRL_CMD_GETFAMILY);
    getfamily.attr(CTRL_ATTR_FAMILY_NAME, b"IPVS\0");
    let mut new_v4 = Request::new(family, 0, IPVS_CMD_NEW_SERVICE);
    v4.fill(&mut new_v4);
    let mut new_dest = Request::new(family, 0, IPVS_CMD_NEW_DEST);
    v4_ref.fill(&mut new_dest);
    fill_dest(&mut new_dest, Ipv4Addr::new(10, 244, 1, 5), 53, 1);
    let mut new_v6 = Request::new(family, 0, IPVS_CMD_NEW_SERVICE);
    v6.fill(&mut new_v6);
    let mut del_v4 = Request::new(family, 0, IPVS_CMD_DEL_SERVICE);
    v4_ref.fill(&mut del_v4);
    let mut del_v6 = Request::new(family, 0, IPVS_CMD_DEL_SERVICE);
    v6_ref.fill(&mut del_v6);
    vec![
        ("CTRL_CMD_GETFAMILY IPVS", getfamily),
        ("IPVS_CMD_NEW_SERVICE", new_v4),
        ("IPVS_CMD_NEW_DEST", new_dest),
        ("IPVS_CMD_NEW_SERVICE", new_v6),
        (
            "IPVS_CMD_GET_SERVICE",
            Request::new(family, NLM_F_DUMP, IPVS_CMD_GET_SERVICE),
        ),
        (
            "IPVS_CMD_GET_INFO",
            Request::new(family, 0, IPVS_CMD_GET_INFO),
        ),
        ("IPVS_CMD_DEL_SERVICE", del_v4),
        ("IPVS_CMD_DEL_SERVICE", del_v6),
    ]
}

/// `ret` when the syscall succeeded (not negative), else an error naming it.
fn check<T: Copy + Default + PartialOrd>(ret: T, call: &str) -> Result<T, String> {
    if ret < T::default() {
        Err(format!("{call}: {}", Error::last_os_error()))
    } else {
        Ok(ret)
    }
}

/// A `msghdr` for one buffer, addressed to or from `peer`.
fn one_buffer(peer: &mut libc::sockaddr_nl, iov: &mut libc::iovec) -> libc::msghdr {
    // SAFETY: msghdr is plain old data; all-zero is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (peer as *mut libc::sockaddr_nl).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg
}

/// `struct sockaddr_nl` of the kernel (port 0, no groups).
fn kernel_address() -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain old data; all-zero is valid.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as u16;
    addr
}

/// A bound `NETLINK_GENERIC` socket and its port id.
struct Socket {
    fd: libc::c_int,
    port: u32,
}

impl Socket {
    fn open(protocol: libc::c_int) -> Result<Self, String> {
        let flags = libc::SOCK_RAW | libc::SOCK_CLOEXEC;
        // SAFETY: socket has no memory arguments.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, flags, protocol) };
        let mut socket = Socket {
            fd: check(fd, "socket")?,
            port: 0,
        };
        // Port 0: the kernel picks our port id; getsockname tells which.
        let mut addr = kernel_address();
        let mut len = std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t;
        let timeout = libc::timeval {
            tv_sec: 2,
            tv_usec: 0,
        };
        let timeout_len = std::mem::size_of::<libc::timeval>() as libc::socklen_t;
        // SAFETY: the pointers refer to live locals of the sizes passed.
        unsafe {
            check(libc::bind(fd, (&raw const addr).cast(), len), "bind")?;
            check(
                libc::getsockname(fd, (&raw mut addr).cast(), &mut len),
                "getsockname",
            )?;
            let timeout = (&raw const timeout).cast();
            check(
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVTIMEO,
                    timeout,
                    timeout_len,
                ),
                "setsockopt(SO_RCVTIMEO)",
            )?;
        }
        socket.port = addr.nl_pid;
        Ok(socket)
    }

    /// `sendmsg` to the kernel (port 0), as libnl's `nl_sendmsg` does.
    fn send(&self, bytes: &[u8]) -> Result<(), String> {
        let mut kernel = kernel_address();
        let mut iov = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let msg = one_buffer(&mut kernel, &mut iov);
        // SAFETY: msg points at live locals; the kernel only reads the buffer.
        let sent = check(unsafe { libc::sendmsg(self.fd, &msg, 0) }, "sendmsg")?;
        if sent as usize != bytes.len() {
            return Err(format!("sendmsg: sent {sent} of {} bytes", bytes.len()));
        }
        Ok(())
    }

    /// One `recvmsg` into `buf`; the number of bytes read.
    fn recv(&self, buf: &mut [u8]) -> Result<usize, String> {
        let mut from = kernel_address();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut msg = one_buffer(&mut from, &mut iov);
        // SAFETY: msg points at live locals; the kernel writes at most buf.len() bytes.
        let n = check(unsafe { libc::recvmsg(self.fd, &mut msg, 0) }, "recvmsg")?;
        Ok(n as usize)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: we own the fd.
        unsafe { libc::close(self.fd) };
    }
}

/// The errno name of the few answers expected here.
fn errno_name(errno: i32) -> String {
    match errno {
        0 => "ack".into(),
        libc::ENOENT => "ENOENT".into(),
        libc::EEXIST => "EEXIST".into(),
        libc::ESRCH => "ESRCH".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EPERM => "EPERM".into(),
        other => format!("errno {other}"),
    }
}

/// Reads replies until the final answer to `seq`: the `NLMSG_ERROR` (ACK or error) or, for a
/// dump, `NLMSG_DONE`. Returns what to print.
fn await_answer(socket: &Socket, seq: u32, buf: &mut [u8]) -> Result<String, String> {
    let mut replies = 0;
    loop {
        let n = socket.recv(buf)?;
        let mut offset = 0;
        while offset + 16 <= n {
            let field = |at: usize, width: usize| &buf[offset + at..offset + at + width];
            let len = u32::from_ne_bytes(field(0, 4).try_into().unwrap()) as usize;
            let kind = u16::from_ne_bytes(field(4, 2).try_into().unwrap());
            let reply_seq = u32::from_ne_bytes(field(8, 4).try_into().unwrap());
            if len < 16 || offset + len > n {
                return Err(format!("malformed reply at byte {offset} of {n}"));
            }
            if reply_seq == seq {
                match kind {
                    NLMSG_ERROR if len >= 20 => {
                        let error = i32::from_ne_bytes(field(16, 4).try_into().unwrap());
                        return Ok(errno_name(-error));
                    }
                    NLMSG_DONE => return Ok(format!("{replies} replies, done")),
                    _ => replies += 1,
                }
            }
            offset += len.next_multiple_of(4);
        }
    }
}

fn parse_family(arg: &str) -> Option<u16> {
    match arg.strip_prefix("0x") {
        Some(hex) => u16::from_str_radix(hex, 16).ok(),
        None => arg.parse().ok(),
    }
}

/// The netlink messages in `buf[..n]`, as (type, seq, whole message).
fn messages(buf: &[u8]) -> impl Iterator<Item = (u16, u32, &[u8])> {
    let mut offset = 0;
    std::iter::from_fn(move || {
        let header = buf.get(offset..offset + 16)?;
        let len = u32::from_ne_bytes(header[0..4].try_into().unwrap()) as usize;
        let message = buf.get(offset..offset + len).filter(|_| len >= 16)?;
        offset += len.next_multiple_of(4);
        Some((
            u16::from_ne_bytes(header[4..6].try_into().unwrap()),
            u32::from_ne_bytes(header[8..12].try_into().unwrap()),
            message,
        ))
    })
}

/// kube-proxy's old discovery: the `src` of every kernel `local` route in table local.
fn local_table_sources(seq: u32) -> Result<Vec<std::net::IpAddr>, String> {
    const RTM_GETROUTE: u16 = 26;
    const RTM_NEWROUTE: u16 = 24;
    const RT_TABLE_LOCAL: u8 = 255;
    const RTN_LOCAL: u8 = 2;
    const RTPROT_KERNEL: u8 = 2;
    const RTA_PREFSRC: u16 = 7;
    const RTA_OIF: u16 = 4;
    let socket = Socket::open(libc::NETLINK_ROUTE)?;
    let mut request = vec![0u8; 16];
    request[4..6].copy_from_slice(&RTM_GETROUTE.to_ne_bytes());
    request[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    // struct rtmsg: family AF_INET, the rest 0 (every table).
    request.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let len = request.len() as u32;
    request[0..4].copy_from_slice(&len.to_ne_bytes());
    request[8..12].copy_from_slice(&seq.to_ne_bytes());
    request[12..16].copy_from_slice(&socket.port.to_ne_bytes());
    socket.send(&request)?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut sources = Vec::new();
    loop {
        let n = socket.recv(&mut buf)?;
        for (kind, reply_seq, m) in messages(&buf[..n]) {
            if reply_seq != seq || kind == NLMSG_ERROR {
                continue;
            }
            if kind == NLMSG_DONE {
                return Ok(sources);
            }
            // rtmsg: table at 4, protocol at 5, type at 7; attributes from byte 12.
            let Some(rtm) = m.get(16..28) else { continue };
            if kind != RTM_NEWROUTE
                || rtm[4] != RT_TABLE_LOCAL
                || rtm[5] != RTPROT_KERNEL
                || rtm[7] != RTN_LOCAL
            {
                continue;
            }
            // kube-proxy leaves out its own dummy device's addresses.
            // SAFETY: a NUL-terminated literal.
            let kube_ipvs0 = unsafe { libc::if_nametoindex(c"kube-ipvs0".as_ptr()) };
            let (mut src, mut oif) = (None, 0u32);
            let mut at = 28;
            while let Some(attr) = m.get(at..at + 4) {
                let alen = u16::from_ne_bytes([attr[0], attr[1]]) as usize;
                let atype = u16::from_ne_bytes([attr[2], attr[3]]);
                if alen < 4 {
                    break;
                }
                if let Some(&[a, b, c, d]) = m.get(at + 4..at + 8) {
                    match atype {
                        RTA_PREFSRC => src = Some(std::net::IpAddr::from([a, b, c, d])),
                        RTA_OIF => oif = u32::from_ne_bytes([a, b, c, d]),
                        _ => {}
                    }
                }
                at += alen.next_multiple_of(4);
            }
            if let Some(src) = src {
                if !src.is_loopback() && !sources.contains(&src) && (oif == 0 || oif != kube_ipvs0)
                {
                    sources.push(src);
                }
            }
        }
    }
}

/// IPVS requests for NodePort services on each of `addresses`.
fn node_port_services(family: u16, addresses: &[std::net::IpAddr]) -> Vec<(&'static str, Request)> {
    addresses
        .iter()
        .map(|address| {
            let mut request = Request::new(family, 0, IPVS_CMD_NEW_SERVICE);
            Service {
                address: *address,
                port: 30080,
                scheduler: "rr",
            }
            .fill(&mut request);
            ("IPVS_CMD_NEW_SERVICE", request)
        })
        .collect()
}

fn run(family: u16, kube_proxy: bool) -> Result<bool, String> {
    let mut seq = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(1);
    let requests = if kube_proxy {
        let sources = local_table_sources(seq)?;
        seq = seq.wrapping_add(1);
        println!("local table sources: {sources:?}");
        node_port_services(family, &sources)
    } else {
        requests(family)
    };
    let socket = Socket::open(libc::NETLINK_GENERIC)?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut all_answered = true;
    for (name, request) in requests {
        let bytes = request.finish(seq, socket.port);
        socket.send(&bytes)?;
        match await_answer(&socket, seq, &mut buf) {
            Ok(answer) => println!("{seq} {name}: {answer}"),
            Err(e) => {
                println!("{seq} {name}: no answer ({e})");
                all_answered = false;
            }
        }
        seq = seq.wrapping_add(1);
    }
    Ok(all_answered)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (family, kube_proxy) = match args.as_slice() {
        [id] => (parse_family(id), false),
        [id, mode] if mode == "--kube-proxy-local-table" => (parse_family(id), true),
        _ => (None, false),
    };
    let Some(family) = family else {
        eprintln!(
            "usage: ipvs_client FAMILY_ID [--kube-proxy-local-table]   (the IPVS genl family id, e.g. 0x3f or 63)"
        );
        return ExitCode::from(2);
    };
    match run(family, kube_proxy) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ipvs_client: {e}");
            ExitCode::from(1)
        }
    }
}
