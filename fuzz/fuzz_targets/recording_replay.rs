//! `replay`: JSON-lines recording bytes through `replay_into` into every sink. A recording that
//! replays must survive being written again by the JSON sink: the rewrite replays to the same
//! text timeline.
#![no_main]
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use nodeip_trace::command::offline::{replay_into, replay_to_text, OfflineError};
use nodeip_trace::sink::json::JsonLinesSink;
use nodeip_trace::sink::EventSink;
use nodeip_trace_fuzz::AllSinks;

const PATH: &str = "fuzz.jsonl";

/// The recording in `data` as the JSON sink writes it.
fn rewritten(data: &[u8]) -> Result<Vec<u8>, OfflineError> {
    let mut out = Vec::new();
    let mut sink = JsonLinesSink::new(&mut out, "json", false);
    replay_into(Path::new(PATH), data, &mut sink)?;
    sink.finish()?;
    drop(sink);
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let mut sinks = AllSinks::new(&Default::default());
    let replayed = replay_into(Path::new(PATH), data, &mut sinks);
    if let Err(error) = replayed.and_then(|()| Ok(sinks.finish()?)) {
        let _ = error.to_string();
        return;
    }
    let text = replay_to_text(Path::new(PATH), data).expect("replayed once, replays again");
    let again = rewritten(data).expect("replayed once, rewrites");
    let text_again = replay_to_text(Path::new(PATH), &again[..])
        .unwrap_or_else(|e| panic!("the JSON sink's rewrite does not replay: {e}"));
    assert_eq!(text, text_again, "the rewrite replays to another timeline");
});
