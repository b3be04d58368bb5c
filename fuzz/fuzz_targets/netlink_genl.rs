//! Generic netlink and IPVS: input = the IPVS family id (2 bytes, host order) the decoder is
//! taught, then one NETLINK_GENERIC buffer (nlctrl replies in it may teach more ids).
#![no_main]
use libfuzzer_sys::fuzz_target;
use nodeip_trace::decode::netlink::NetlinkDecoder;
use nodeip_trace_fuzz::{decode_netlink, NETLINK_GENERIC};

fuzz_target!(|data: &[u8]| {
    let Some((id, buffer)) = data.split_first_chunk::<2>() else {
        return;
    };
    let mut decoder = NetlinkDecoder::new();
    decoder.learn_family(u16::from_ne_bytes(*id), "IPVS");
    decode_netlink(&mut decoder, NETLINK_GENERIC, buffer);
});
