//! getaddrinfo records: raw ring-buffer bytes → `parse_record` → the addrinfo decoders, the path
//! live tracing takes; the bytes are also tried as a bare sockaddr.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nodeip_trace::decode::addrinfo::{decode_gai_socket, decode_getaddrinfo, sockaddr_ip};
use nodeip_trace::decode::record::{parse_record, KernelRecord};

fuzz_target!(|data: &[u8]| {
    let _ = sockaddr_ip(data);
    match parse_record(data) {
        Ok(KernelRecord::Getaddrinfo(record)) => {
            let call = decode_getaddrinfo(&record);
            serde_json::to_vec(&call).expect("a decoded call serializes");
        }
        Ok(KernelRecord::GaiSocket(record)) => {
            let _ = decode_gai_socket(&record);
        }
        Ok(_) => {}
        Err(error) => {
            let _ = error.to_string();
        }
    }
});
