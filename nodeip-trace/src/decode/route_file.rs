//! Route file records → [`RouteFileRead`]: the lines the kernel wrote for a reader of
//! `/proc/net/route` (`fib_route_seq_show`) or `/proc/net/ipv6_route` (`ipv6_route_seq_show`),
//! read back into routes.
//!
//! `/proc/net/route` lines are tab-separated, padded to 127 bytes: device, destination,
//! gateway, flags, refcount, use, metric, mask, MTU, window, IRTT; addresses and the mask as the
//! kernel's native-endian hex of their network-order bytes. `/proc/net/ipv6_route` lines are
//! space-separated: destination and its length, source and its length, gateway, metric,
//! refcount, use, flags, device; addresses as 32 hex digits in network order.
use std::net::{Ipv4Addr, Ipv6Addr};

use nodeip_trace_common::{handler_function, route_file_flags, RouteFileRecord};

use crate::decode::kernel_handler::hook_name;
use crate::model::event::{ListedRoute, RouteFileRead};

/// `RTF_UP` in a route file's flags.
const RTF_UP: u32 = 0x1;

/// Decodes one record (the text as copied; a last line cut short is left out, as `cut` says).
pub fn decode_route_file(rec: &RouteFileRecord) -> RouteFileRead {
    let v6 = rec.function == handler_function::IPV6_ROUTE_SEQ_SHOW;
    let cut = rec.flags & route_file_flags::TEXT_CUT != 0;
    let len = (rec.text_len as usize).min(rec.text.len());
    let text = String::from_utf8_lossy(&rec.text[..len]);
    let mut routes = Vec::new();
    let mut decode_errors = Vec::new();
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let complete = line.ends_with('\n');
        if !complete && lines.peek().is_none() && cut {
            break;
        }
        let parsed = if v6 {
            parse_ipv6_line(line)
        } else {
            parse_ipv4_line(line)
        };
        match parsed {
            Some(route) => routes.push(route),
            None => decode_errors.push(format!(
                "a line of {} could not be read: {:?}",
                file_name(v6),
                line.trim_end()
            )),
        }
    }
    RouteFileRead {
        file: file_name(v6).into(),
        hook: hook_name(rec.mode).into(),
        file_netns: (rec.flags & route_file_flags::NETNS_UNKNOWN == 0).then_some(rec.file_netns),
        routes,
        cut,
        decode_errors,
    }
}

/// The file a record's function writes.
fn file_name(v6: bool) -> &'static str {
    if v6 {
        "/proc/net/ipv6_route"
    } else {
        "/proc/net/route"
    }
}

/// One `/proc/net/route` line (trailing padding and newline allowed).
pub fn parse_ipv4_line(line: &str) -> Option<ListedRoute> {
    let fields: Vec<&str> = line.trim_end().split('\t').collect();
    let [dev, destination, gateway, flags, _refcnt, _use, metric, mask, ..] = fields[..] else {
        return None;
    };
    let address = |hex: &str| {
        u32::from_str_radix(hex, 16)
            .ok()
            .map(|v| Ipv4Addr::from(v.to_ne_bytes()))
    };
    let destination = address(destination)?;
    let gateway = address(gateway)?;
    let prefix = u32::from(address(mask)?).count_ones();
    Some(ListedRoute {
        destination: format!("{destination}/{prefix}"),
        gateway: (!gateway.is_unspecified()).then(|| gateway.to_string()),
        dev: dev.to_string(),
        metric: metric.parse().ok()?,
        up: u32::from_str_radix(flags, 16).ok()? & RTF_UP != 0,
    })
}

/// One `/proc/net/ipv6_route` line.
pub fn parse_ipv6_line(line: &str) -> Option<ListedRoute> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // A route without a device ends in blanks: `%8s` of an empty name.
    let (destination, length, gateway, metric, flags, dev) = match fields[..] {
        [destination, length, _src, _src_length, gateway, metric, _refcnt, _use, flags, dev] => {
            (destination, length, gateway, metric, flags, dev)
        }
        [destination, length, _src, _src_length, gateway, metric, _refcnt, _use, flags] => {
            (destination, length, gateway, metric, flags, "*")
        }
        _ => return None,
    };
    let address = |hex: &str| {
        u128::from_str_radix(hex, 16)
            .ok()
            .filter(|_| hex.len() == 32)
            .map(Ipv6Addr::from)
    };
    let destination = address(destination)?;
    let gateway = address(gateway)?;
    Some(ListedRoute {
        destination: format!("{destination}/{}", u8::from_str_radix(length, 16).ok()?),
        gateway: (!gateway.is_unspecified()).then(|| gateway.to_string()),
        dev: dev.to_string(),
        metric: u32::from_str_radix(metric, 16).ok()?,
        up: u32::from_str_radix(flags, 16).ok()? & RTF_UP != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodeip_trace_common::{hook_mode, EventHeader, KIND_ROUTE_FILE, ROUTE_FILE_TEXT_LEN};

    /// A `/proc/net/route` line as `fib_route_seq_show` writes it (padded to 127 bytes).
    fn v4_line(dev: &str, gateway: &str, flags: &str, metric: u32, mask: &str) -> String {
        let line = format!("{dev}\t00000000\t{gateway}\t{flags}\t0\t0\t{metric}\t{mask}\t0\t0\t0");
        format!("{line:<127}\n")
    }

    fn record(function: u32, text: &str, flags: u32) -> RouteFileRecord {
        let mut rec = RouteFileRecord {
            header: EventHeader {
                kind: KIND_ROUTE_FILE,
                netns: 1,
                ts_ns: 5,
                pid_tgid: (9 << 32) | 9,
                cgroup_id: 1,
                comm: [0; 16],
            },
            function,
            mode: hook_mode::FENTRY,
            file_netns: 4026532000,
            flags,
            text_len: 0,
            written: text.len() as u32,
            text: [0; ROUTE_FILE_TEXT_LEN],
        };
        let n = text.len().min(ROUTE_FILE_TEXT_LEN);
        rec.text[..n].copy_from_slice(&text.as_bytes()[..n]);
        rec.text_len = n as u32;
        rec
    }

    #[test]
    fn two_ipv4_default_routes_of_one_prefix() {
        // default via 192.0.2.1 dev eth0 metric 100; default via 198.51.100.1 dev eth1 metric 200.
        let gw1 = u32::from_ne_bytes([192, 0, 2, 1]);
        let gw2 = u32::from_ne_bytes([198, 51, 100, 1]);
        let text = v4_line("eth0", &format!("{gw1:08X}"), "0003", 100, "00000000")
            + &v4_line("eth1", &format!("{gw2:08X}"), "0003", 200, "00000000");
        let read = decode_route_file(&record(handler_function::FIB_ROUTE_SEQ_SHOW, &text, 0));
        assert_eq!(read.file, "/proc/net/route");
        assert_eq!(read.hook, "fentry");
        assert_eq!(read.file_netns, Some(4026532000));
        assert!(read.decode_errors.is_empty(), "{:?}", read.decode_errors);
        assert_eq!(
            read.routes,
            vec![
                ListedRoute {
                    destination: "0.0.0.0/0".into(),
                    gateway: Some("192.0.2.1".into()),
                    dev: "eth0".into(),
                    metric: 100,
                    up: true,
                },
                ListedRoute {
                    destination: "0.0.0.0/0".into(),
                    gateway: Some("198.51.100.1".into()),
                    dev: "eth1".into(),
                    metric: 200,
                    up: true,
                },
            ]
        );
    }

    #[test]
    fn a_route_to_zero_of_another_length_and_one_without_a_device() {
        let mask8 = u32::from_ne_bytes([255, 0, 0, 0]);
        let text = v4_line("*", "00000000", "0201", 0, "00000000")
            + &v4_line("lo", "00000000", "0001", 0, &format!("{mask8:08X}"));
        let read = decode_route_file(&record(handler_function::FIB_ROUTE_SEQ_SHOW, &text, 0));
        let shown: Vec<(String, Option<String>, String)> = read
            .routes
            .iter()
            .map(|r| (r.destination.clone(), r.gateway.clone(), r.dev.clone()))
            .collect();
        assert_eq!(
            shown,
            [
                ("0.0.0.0/0".into(), None, "*".into()),
                ("0.0.0.0/8".into(), None, "lo".into()),
            ]
        );
    }

    #[test]
    fn an_ipv6_default_route() {
        let text = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                    fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0\n";
        let read = decode_route_file(&record(handler_function::IPV6_ROUTE_SEQ_SHOW, text, 0));
        assert_eq!(read.file, "/proc/net/ipv6_route");
        assert_eq!(
            read.routes,
            vec![ListedRoute {
                destination: "::/0".into(),
                gateway: Some("fe80::1".into()),
                dev: "eth0".into(),
                metric: 1024,
                up: true,
            }]
        );
    }

    #[test]
    fn a_cut_text_keeps_its_whole_lines_and_says_so() {
        let line = v4_line("eth0", "0102A8C0", "0003", 0, "00000000");
        let text = line.repeat(5);
        let read = decode_route_file(&record(
            handler_function::FIB_ROUTE_SEQ_SHOW,
            &text,
            route_file_flags::TEXT_CUT | route_file_flags::NETNS_UNKNOWN,
        ));
        assert!(read.cut);
        assert_eq!(read.file_netns, None);
        assert_eq!(read.routes.len(), ROUTE_FILE_TEXT_LEN / 128);
        assert!(read.decode_errors.is_empty(), "{:?}", read.decode_errors);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for text in ["", "\n", "eth0\tzz\n", "x y z\n", "\u{0}\u{0}\t\t\t\n"] {
            for function in [
                handler_function::FIB_ROUTE_SEQ_SHOW,
                handler_function::IPV6_ROUTE_SEQ_SHOW,
            ] {
                let read = decode_route_file(&record(function, text, 0));
                assert!(read.routes.is_empty(), "{text:?}");
            }
        }
        assert!(parse_ipv4_line("eth0\tzz").is_none());
        assert!(parse_ipv6_line("0 00 0 00 0 0 0 0 0 eth0").is_none());
    }
}
