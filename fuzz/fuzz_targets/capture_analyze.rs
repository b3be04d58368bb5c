//! `analyze`: pcap/pcapng bytes through the whole offline pipeline (the first pass collecting
//! link names, then the capture reader with its skipping and resynchronisation, decode,
//! correlate, explain) into every sink.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nodeip_trace::command::offline::{analyze_knowing, link_names, Known};
use nodeip_trace_fuzz::AllSinks;

fuzz_target!(|data: &[u8]| {
    let mut sinks = AllSinks::new(&Default::default());
    let interfaces = link_names(data);
    let known = Known {
        genl_families: &[],
        interfaces: &interfaces,
    };
    let result = analyze_knowing(
        Path::new("fuzz.pcap"),
        data,
        &known,
        &mut sinks,
        &mut |warning| {
            let _ = warning.to_string();
        },
        &mut |_| {},
    );
    if let Err(error) = result {
        let _ = error.to_string();
    }
});
