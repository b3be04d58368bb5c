//! Load generators for `cargo xtask bench`: each runs one kind of call COUNT times as fast as it
//! can and prints `elapsed_ns=N calls=N` (the loop alone, without process start-up), so traced
//! and untraced runs compare the calls themselves.
//!
//! - `udp COUNT`: `sendmsg` of 64-byte datagrams to a bound socket on 127.0.0.1 (non-netlink);
//! - `gai COUNT`: `getaddrinfo("localhost")` from /etc/hosts;
//! - `netlink COUNT`: RTM_GETROUTE of 127.0.0.1 on one NETLINK_ROUTE socket, each reply read
//!   (2 × COUNT netlink messages);
//! - `io COUNT`: `read` of one byte from /dev/zero and `write` of it to /dev/null (non-netlink
//!   system calls of the commonest kind: what a tracer costs every process on the node).
use std::time::Instant;

fn udp(count: u64) -> u64 {
    // SAFETY: plain socket calls on fds we own; the structs are fully initialised.
    unsafe {
        let rx = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        let tx = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        assert!(rx >= 0 && tx >= 0, "socket failed");
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as u16;
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
        assert_eq!(
            libc::bind(rx, (&addr as *const libc::sockaddr_in).cast(), len),
            0,
            "bind failed"
        );
        let mut bound = len;
        libc::getsockname(rx, (&mut addr as *mut libc::sockaddr_in).cast(), &mut bound);
        let mut payload = [0u8; 64];
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = (&mut addr as *mut libc::sockaddr_in).cast();
        msg.msg_namelen = len;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        let mut sent = 0;
        for _ in 0..count {
            if libc::sendmsg(tx, &msg, libc::MSG_DONTWAIT) > 0 {
                sent += 1;
            }
        }
        libc::close(rx);
        libc::close(tx);
        sent
    }
}

fn gai(count: u64) -> u64 {
    let node = c"localhost";
    let mut ok = 0;
    for _ in 0..count {
        // SAFETY: valid C strings and hints; the result list is freed.
        unsafe {
            let mut hints: libc::addrinfo = std::mem::zeroed();
            hints.ai_family = libc::AF_INET;
            hints.ai_socktype = libc::SOCK_STREAM;
            let mut res = std::ptr::null_mut();
            if libc::getaddrinfo(node.as_ptr(), std::ptr::null(), &hints, &mut res) == 0 {
                ok += 1;
                libc::freeaddrinfo(res);
            }
        }
    }
    ok
}

fn netlink(count: u64) -> u64 {
    // SAFETY: a netlink socket we own; buffers are valid for their lengths.
    unsafe {
        let fd = libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE);
        assert!(fd >= 0, "netlink socket failed");
        let mut req = Vec::with_capacity(36);
        req.extend_from_slice(&36u32.to_ne_bytes());
        req.extend_from_slice(&26u16.to_ne_bytes()); // RTM_GETROUTE
        req.extend_from_slice(&1u16.to_ne_bytes()); // NLM_F_REQUEST
        req.extend_from_slice(&0u32.to_ne_bytes()); // seq, set per request
        req.extend_from_slice(&0u32.to_ne_bytes());
        req.extend_from_slice(&[2, 32, 0, 0, 254, 0, 0, 0, 0, 0, 0, 0]); // AF_INET /32, main
        req.extend_from_slice(&8u16.to_ne_bytes());
        req.extend_from_slice(&1u16.to_ne_bytes()); // RTA_DST
        req.extend_from_slice(&[127, 0, 0, 1]);
        let mut buf = vec![0u8; 8192];
        let mut answered = 0;
        for seq in 1..=count as u32 {
            req[8..12].copy_from_slice(&seq.to_ne_bytes());
            if libc::send(fd, req.as_ptr().cast(), req.len(), 0) != req.len() as isize {
                break;
            }
            if libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) > 0 {
                answered += 1;
            }
        }
        libc::close(fd);
        answered
    }
}

fn io(count: u64) -> u64 {
    use std::io::{Read as _, Write as _};
    let mut zero = std::fs::File::open("/dev/zero").expect("opening /dev/zero");
    let mut null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("opening /dev/null");
    let mut byte = [0u8; 1];
    let mut done = 0;
    for _ in 0..count {
        if zero.read(&mut byte).is_ok_and(|n| n == 1) && null.write(&byte).is_ok_and(|n| n == 1) {
            done += 1;
        }
    }
    done
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(count)) = (args.get(1), args.get(2).and_then(|c| c.parse().ok())) else {
        eprintln!("usage: load_gen udp|gai|netlink|io COUNT");
        std::process::exit(2);
    };
    let start = Instant::now();
    let calls = match mode.as_str() {
        "udp" => udp(count),
        "gai" => gai(count),
        "netlink" => netlink(count),
        "io" => io(count),
        other => {
            eprintln!("load_gen: unknown mode {other:?}: udp, gai, netlink or io");
            std::process::exit(2);
        }
    };
    println!("elapsed_ns={} calls={calls}", start.elapsed().as_nanos());
}
