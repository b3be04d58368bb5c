//! `analyze`: pcap/pcapng bytes through the whole offline pipeline (capture reader, decode,
//! correlate, explain) into every sink.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nodeip_trace::command::offline::analyze_into;
use nodeip_trace_fuzz::AllSinks;

fuzz_target!(|data: &[u8]| {
    let mut sinks = AllSinks::new(&Default::default());
    let result = analyze_into(
        Path::new("fuzz.pcap"),
        data,
        &[],
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
