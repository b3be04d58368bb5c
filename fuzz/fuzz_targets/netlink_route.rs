//! rtnetlink: one NETLINK_ROUTE send/recv buffer, as the live path and captures hand it over.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nodeip_trace::decode::netlink::NetlinkDecoder;
use nodeip_trace_fuzz::{decode_netlink, NETLINK_ROUTE};

fuzz_target!(|data: &[u8]| {
    decode_netlink(&mut NetlinkDecoder::new(), NETLINK_ROUTE, data);
});
