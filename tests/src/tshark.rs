//! Netlink message counts by type two ways — from tshark's dissection of a capture and from our
//! JSON events — under keys that compare, plus tshark's verdict on a capture (malformed frames,
//! frames it could not dissect as netlink).
//!
//! tshark (4.0) fields, with `-E occurrence=a` (every occurrence, comma-separated):
//! - `netlink-route.nltype`: one per rtnetlink message (type ≥ 16 on `NETLINK_ROUTE`);
//! - `netlink.hdr_type`: one per control message (`NLMSG_ERROR`, `NLMSG_DONE`, …), and one more
//!   for the request header each `NLMSG_ERROR` echoes, which is not a message and is skipped;
//! - `genl.family_id` with `genl.cmd` (other families) or `genl.ctrl.cmd` (nlctrl, 0x10): one
//!   per generic-netlink message, in message order.
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Message counts by key: `rtnetlink type 18`, `control type 2`, `genl family 0x10 cmd 3`.
pub type Counts = BTreeMap<String, usize>;

/// `NLMSG_ERROR`.
const NLMSG_ERROR: u64 = 2;
/// Types below this are netlink control messages, on every protocol.
const NLMSG_MIN_TYPE: u64 = 16;
/// nlctrl's fixed family id.
const GENL_ID_CTRL: u64 = 0x10;
/// `NETLINK_ROUTE` and `NETLINK_GENERIC`.
const NETLINK_ROUTE: u64 = 0;
const NETLINK_GENERIC: u64 = 16;

fn rtnetlink_key(type_id: u64) -> String {
    format!("rtnetlink type {type_id}")
}

fn control_key(type_id: u64) -> String {
    format!("control type {type_id}")
}

fn genl_key(family: u64, cmd: Option<u64>) -> String {
    match cmd {
        Some(cmd) => format!("genl family {family:#x} cmd {cmd}"),
        None => format!("genl family {family:#x} cmd ?"),
    }
}

/// A tshark number: decimal, or hex with `0x`.
fn number(text: &str) -> u64 {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.unwrap_or_else(|e| panic!("tshark printed {text:?}, not a number: {e}"))
}

fn numbers(column: &str) -> Vec<u64> {
    column
        .split(',')
        .filter(|v| !v.is_empty())
        .map(number)
        .collect()
}

const FIELDS: [&str; 9] = [
    "frame.number",
    "frame.protocols",
    "_ws.malformed",
    "netlink-route.nltype",
    "netlink.hdr_type",
    "genl.family_id",
    "genl.cmd",
    "genl.ctrl.cmd",
    "netlink.family",
];

/// One frame as tshark dissected it: the columns of [`FIELDS`].
struct TsharkFrame {
    columns: Vec<String>,
}

impl TsharkFrame {
    fn column(&self, field: &str) -> &str {
        let i = FIELDS
            .iter()
            .position(|f| *f == field)
            .expect("known field");
        self.columns.get(i).map_or("", String::as_str)
    }
}

/// Runs tshark over `capture` (with `extra` arguments, e.g. a Lua dissector) and returns its
/// frames. Panics when tshark is missing or fails.
fn dissect(capture: &Path, extra: &[&str]) -> Vec<TsharkFrame> {
    let mut command = Command::new("tshark");
    command.args(extra).arg("-r").arg(capture);
    command.args(["-T", "fields", "-E", "occurrence=a", "-E", "separator=/t"]);
    for field in FIELDS {
        command.args(["-e", field]);
    }
    let out = command
        .output()
        .expect("tshark missing: run `cargo xtask setup --for-tests`");
    assert!(
        out.status.success(),
        "tshark -r {} failed: {}",
        capture.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| TsharkFrame {
            columns: line.split('\t').map(str::to_owned).collect(),
        })
        .collect()
}

/// tshark's per-type message counts for `capture`.
pub fn tshark_counts(capture: &Path) -> Counts {
    let mut counts = Counts::new();
    for frame in dissect(capture, &[]) {
        for type_id in numbers(frame.column("netlink-route.nltype")) {
            *counts.entry(rtnetlink_key(type_id)).or_default() += 1;
        }
        let mut headers = numbers(frame.column("netlink.hdr_type")).into_iter();
        while let Some(type_id) = headers.next() {
            *counts.entry(control_key(type_id)).or_default() += 1;
            if type_id == NLMSG_ERROR {
                headers.next(); // the echoed request header
            }
        }
        let (mut cmds, mut ctrl_cmds) = (
            numbers(frame.column("genl.cmd")).into_iter(),
            numbers(frame.column("genl.ctrl.cmd")).into_iter(),
        );
        for family in numbers(frame.column("genl.family_id")) {
            let cmd = if family == GENL_ID_CTRL {
                ctrl_cmds.next()
            } else {
                cmds.next()
            };
            *counts.entry(genl_key(family, cmd)).or_default() += 1;
        }
    }
    counts
}

/// Frames tshark marks malformed, or could not dissect as netlink (unknown link type), each as
/// `frame N: why`. Empty for a clean capture.
pub fn tshark_problems(capture: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for frame in dissect(capture, &[]) {
        let number = frame.column("frame.number").to_owned();
        if !frame.column("_ws.malformed").is_empty() {
            problems.push(format!("frame {number}: malformed"));
        }
        let protocols = frame.column("frame.protocols");
        if !protocols.split(':').any(|p| p == "netlink") {
            problems.push(format!(
                "frame {number}: not dissected as netlink ({protocols})"
            ));
        }
        if frame.column("netlink.family").is_empty() {
            problems.push(format!(
                "frame {number}: no netlink protocol in the nlmon header"
            ));
        }
    }
    problems
}

/// Our per-type message counts, from JSON events (`analyze --format json`, or the live JSON).
pub fn event_counts<'a>(events: impl IntoIterator<Item = &'a Value>) -> Counts {
    let mut counts = Counts::new();
    for event in events {
        if event["kind"] != "netlink" {
            continue;
        }
        let protocol = event["protocol_id"].as_u64().expect("protocol_id");
        for message in event["messages"].as_array().expect("messages") {
            let type_id = message["type_id"].as_u64().expect("type_id");
            let key = if type_id < NLMSG_MIN_TYPE {
                control_key(type_id)
            } else if protocol == NETLINK_ROUTE {
                rtnetlink_key(type_id)
            } else if protocol == NETLINK_GENERIC {
                let body = &message["body"];
                let cmd = body["cmd_id"].as_u64().or_else(|| body["cmd"].as_u64());
                genl_key(type_id, cmd)
            } else {
                format!("protocol {protocol} type {type_id}")
            };
            *counts.entry(key).or_default() += 1;
        }
    }
    counts
}
