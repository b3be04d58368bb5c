//! Asks the running kernel for its generic-netlink families (a `CTRL_CMD_GETFAMILY` dump), so
//! IPVS and others are named even when no traced process looked them up.
use std::collections::BTreeMap;

use crate::decode::netlink::{MessageBody, NetlinkDecoder};

/// genl family id → name, from the kernel of the current network namespace (empty on failure).
pub fn query() -> BTreeMap<u16, String> {
    let mut out = BTreeMap::new();
    // SAFETY: plain socket calls on an fd we own and close.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_GENERIC,
        );
        if fd < 0 {
            return out;
        }
        // nlmsghdr(16) + genlmsghdr(4): GENL_ID_CTRL, REQUEST|DUMP, CTRL_CMD_GETFAMILY, version 1.
        let mut req = [0u8; 20];
        req[0..4].copy_from_slice(&20u32.to_ne_bytes());
        req[4..6].copy_from_slice(&0x10u16.to_ne_bytes());
        req[6..8].copy_from_slice(&(0x1u16 | 0x300).to_ne_bytes());
        req[8..12].copy_from_slice(&1u32.to_ne_bytes());
        req[16] = 3;
        req[17] = 1;
        if libc::send(fd, req.as_ptr().cast(), req.len(), 0) == req.len() as isize {
            let mut decoder = NetlinkDecoder::new();
            let mut buf = vec![0u8; 65536];
            'recv: for _ in 0..64 {
                let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
                if n <= 0 {
                    break;
                }
                for m in decoder.decode(16, &buf[..n as usize]).messages {
                    match &m.body {
                        MessageBody::Nlctrl(c) => {
                            if let (Some(id), Some(name)) = (c.family_id, &c.family_name) {
                                out.insert(id, name.clone());
                            }
                        }
                        MessageBody::Done(_) | MessageBody::Error(_) => break 'recv,
                        _ => {}
                    }
                }
            }
        }
        libc::close(fd);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_kernel_knows_nlctrl() {
        let families = super::query();
        assert_eq!(
            families.get(&0x10).map(String::as_str),
            Some("nlctrl"),
            "{families:?}"
        );
    }
}
