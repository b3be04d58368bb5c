//! `replay`: JSON-lines recording bytes through `replay_into` into every sink.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nodeip_trace::command::offline::replay_into;
use nodeip_trace::sink::EventSink;
use nodeip_trace_fuzz::AllSinks;

fuzz_target!(|data: &[u8]| {
    let mut sinks = AllSinks::new(&Default::default());
    match replay_into(Path::new("fuzz.jsonl"), data, &mut sinks) {
        Ok(()) => sinks.finish().expect("sinks writing to nowhere finish"),
        Err(error) => {
            let _ = error.to_string();
        }
    }
});
