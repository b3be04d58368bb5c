//! JSON lines: one [`crate::model::event::Event`] per line, the schema in docs/events.md.
use std::io::Write;
use std::sync::Arc;

use super::{EventSink, SinkError};
use crate::model::event::Event;
use crate::model::process::ProcessAttribution;

pub mod compact;

/// Processes whose attribution JSON is kept (a node's busy deciders; beyond, the oldest goes).
const PROCESSES_KEPT: usize = 16;

/// The JSON of the process attributions written last. An event's `process` is the same `Arc`
/// for every event of that process (the process table makes one per pid and cgroup), so its
/// JSON — executable, four ancestors, cgroup: a fifth of a live line's strings, 7% of the
/// consumer's CPU under a JSON burst — is made once, then copied.
#[derive(Default)]
struct ProcessJson {
    kept: Vec<(Arc<ProcessAttribution>, Vec<u8>)>,
    /// The entry replaced next when all are taken.
    next: usize,
}

impl ProcessJson {
    /// `process` as JSON.
    fn of(&mut self, process: &Arc<ProcessAttribution>) -> Result<&[u8], compact::JsonError> {
        let at = match self.kept.iter().position(|(p, _)| Arc::ptr_eq(p, process)) {
            Some(at) => at,
            None => {
                let mut json = Vec::new();
                compact::append_json(&**process, &mut json)?;
                let entry = (process.clone(), json);
                if self.kept.len() < PROCESSES_KEPT {
                    self.kept.push(entry);
                    self.kept.len() - 1
                } else {
                    let at = self.next;
                    self.kept[at] = entry;
                    self.next = (at + 1) % PROCESSES_KEPT;
                    at
                }
            }
        };
        Ok(&self.kept[at].1)
    }
}

/// Appends `event` as one JSON object: what `serde_json` writes for it (its derived
/// `Serialize`: the common fields in their order, `process` when present, then the body's own
/// fields, flattened), with the process part from `processes`.
fn append_event(
    event: &Event,
    processes: &mut ProcessJson,
    out: &mut Vec<u8>,
) -> Result<(), compact::JsonError> {
    out.extend_from_slice(b"{\"ts\":");
    compact::append_json(event.ts.as_str(), out)?;
    out.extend_from_slice(b",\"ts_ns\":");
    compact::append_json(&event.ts_ns, out)?;
    out.extend_from_slice(b",\"pid\":");
    compact::append_json(&event.pid, out)?;
    out.extend_from_slice(b",\"tid\":");
    compact::append_json(&event.tid, out)?;
    out.extend_from_slice(b",\"comm\":");
    compact::append_json(event.comm.as_str(), out)?;
    if let Some(process) = &event.process {
        out.extend_from_slice(b",\"process\":");
        out.extend_from_slice(processes.of(process)?);
    }
    // The body alone is an object whose first member is its `kind` tag (never empty): its
    // members go on the event's, as `#[serde(flatten)]` puts them.
    let body = out.len();
    compact::append_json(&event.body, out)?;
    debug_assert_eq!(out.get(body..body + 2), Some(&b"{\""[..]));
    out[body] = b',';
    Ok(())
}

/// Writes events as JSON lines.
pub struct JsonLinesSink<W: Write> {
    out: W,
    name: String,
    flush_each: bool,
    /// The line being made (kept: its capacity is reused).
    line: Vec<u8>,
    processes: ProcessJson,
}

impl<W: Write> JsonLinesSink<W> {
    /// A sink writing to `out`; `name` appears in error messages; `flush_each` flushes per line
    /// (for terminals and pipes).
    pub fn new(out: W, name: impl Into<String>, flush_each: bool) -> Self {
        Self {
            out,
            name: name.into(),
            flush_each,
            line: Vec::new(),
            processes: ProcessJson::default(),
        }
    }

    /// Writes one event.
    pub fn write_event(&mut self, event: &Event) -> Result<(), SinkError> {
        let io = |source| SinkError::Io {
            what: self.name.clone(),
            source,
        };
        self.line.clear();
        append_event(event, &mut self.processes, &mut self.line)?;
        self.line.push(b'\n');
        self.out.write_all(&self.line).map_err(io)?;
        if self.flush_each {
            self.out.flush().map_err(|source| SinkError::Io {
                what: self.name.clone(),
                source,
            })?;
        }
        Ok(())
    }
}

impl<W: Write> EventSink for JsonLinesSink<W> {
    fn flush(&mut self) -> Result<(), SinkError> {
        self.out.flush().map_err(|source| SinkError::Io {
            what: self.name.clone(),
            source,
        })
    }

    fn event(&mut self, event: &Event) -> Result<(), SinkError> {
        self.write_event(event)
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.out.flush().map_err(|source| SinkError::Io {
            what: self.name.clone(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventBody;
    use crate::model::getaddrinfo::{AddrinfoResult, GetaddrinfoCall};

    /// The exact JSON line of a getaddrinfo event (the schema users parse).
    #[test]
    fn getaddrinfo_line_is_stable() {
        let call = GetaddrinfoCall {
            node: Some("node-a".into()),
            service: None,
            family: "AF_INET".into(),
            socktype: "ANY".into(),
            flags: vec!["AI_ADDRCONFIG".into()],
            ret: "OK".into(),
            ret_code: 0,
            addresses: vec!["172.18.45.20".into(), "172.18.45.6".into()],
            results: vec![AddrinfoResult {
                address: "172.18.45.20".into(),
                family: "AF_INET".into(),
                socktype: "SOCK_STREAM".into(),
                protocol: 6,
                port: 0,
            }],
            results_truncated: false,
            start_ns: 100,
            duration_ns: 50,
            during: 3,
            resolver: Default::default(),
            caller: None,
            limited: None,
            why: None,
        };
        let event = Event {
            ts: "2026-11-21T13:27:05.500000000Z".into(),
            ts_ns: 150,
            pid: 7,
            tid: 8,
            comm: "getent".into(),
            process: None,
            body: EventBody::Getaddrinfo(Box::new(call)),
        };
        let mut out = Vec::new();
        JsonLinesSink::new(&mut out, "memory", false)
            .write_event(&event)
            .unwrap();
        let golden = r#"{"ts":"2026-11-21T13:27:05.500000000Z","ts_ns":150,"pid":7,"tid":8,"comm":"getent","kind":"getaddrinfo","node":"node-a","service":null,"family":"AF_INET","socktype":"ANY","flags":["AI_ADDRCONFIG"],"ret":"OK","ret_code":0,"addresses":["172.18.45.20","172.18.45.6"],"results":[{"address":"172.18.45.20","family":"AF_INET","socktype":"SOCK_STREAM","protocol":6,"port":0}],"results_truncated":false,"start_ns":100,"duration_ns":50,"during":3}
"#;
        assert_eq!(String::from_utf8(out).unwrap(), golden);
        // And it reads back as the same event (replay depends on it).
        let back: Event = serde_json::from_str(golden.trim()).unwrap();
        assert_eq!(back, event);
    }

    /// Live events (with a process) are written as serde_json writes them, whichever process
    /// attributions are kept, reused or replaced.
    #[test]
    fn events_with_their_process_are_written_as_serde_json_writes_them() {
        use crate::model::event::{LostReport, RunSummary};
        use crate::model::process::{Ancestor, CgroupIdentity, ContainerIdentity};
        let attribution = |n: u32| {
            Arc::new(ProcessAttribution {
                exe: Some(format!("/usr/bin/kubelet-{n}")),
                ancestors: vec![Ancestor {
                    pid: n,
                    comm: "containerd-\"shim\"".into(),
                }],
                cgroup: Some("/kubepods/burstable/pod1/abc".into()),
                identity: CgroupIdentity {
                    unit: n.is_multiple_of(2).then(|| "kubelet.service".into()),
                    container: (n % 2 == 1).then(|| ContainerIdentity {
                        runtime: "containerd".into(),
                        id: "abc".into(),
                        pod_name: Some("speaker-x".into()),
                        ..Default::default()
                    }),
                },
            })
        };
        let processes: Vec<_> = (0..PROCESSES_KEPT as u32 + 3).map(attribution).collect();
        let bodies = [
            EventBody::Lost(LostReport {
                lost: 3,
                counts: [("netlink_ringbuf_full".to_string(), 3)].into(),
            }),
            EventBody::Summary(RunSummary::default()),
        ];
        let mut sink = JsonLinesSink::new(Vec::new(), "memory", false);
        let mut expected = Vec::new();
        for round in 0..3 {
            for (i, process) in processes.iter().enumerate() {
                let event = Event {
                    ts: "2026-11-26T01:02:03.000000004Z".into(),
                    ts_ns: 4,
                    pid: i as u32,
                    tid: round,
                    comm: "kube\tlet".into(),
                    process: (i % 5 != 4).then(|| process.clone()),
                    body: bodies[i % 2].clone(),
                };
                sink.write_event(&event).unwrap();
                serde_json::to_writer(&mut expected, &event).unwrap();
                expected.push(b'\n');
            }
        }
        assert_eq!(
            String::from_utf8(sink.out).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }
}
