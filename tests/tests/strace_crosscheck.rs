//! Cross-check against strace (issue 3): one workload in a scratch namespace — `ip route get`,
//! `ip -4 addr show`, `ip route show table local`, `ip -6 route get`, and `ipvs_client` — runs
//! under strace while nodeip-trace traces it. Per process, message by message in order, what
//! strace decoded must be what our `netlink` events say: direction, length, type, flags (names
//! and value), seq, port id, the fixed header fields and attributes strace names, every address,
//! and the errors with their echoed requests. strace does not decode generic netlink bodies, so
//! for those the genl command byte and our decoded addresses and names are found in its raw bytes.
//!
//! strace runs inside the namespace (`ip netns exec … strace`): it learns a socket's netlink
//! protocol through sock_diag in its own namespace, and from outside it decodes nothing. strace
//! itself makes a generic netlink exchange (a CTRL_CMD_GETFAMILY dump, to name families), which
//! our tracer sees and strace does not log; only the processes in strace's log are compared.
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use nodeip_trace_tests::strace::{attributes, netlink_messages, Message, Value};
use nodeip_trace_tests::{require_root, trace_json, unused_genl_family_id, Netns, ScratchDir};
use serde_json::Value as Json;

const CLIENT: &str = env!("CARGO_BIN_EXE_ipvs_client");

/// strace's `NLM_F_*` names → ours, with their bits.
const FLAGS: &[(&str, &str, u64)] = &[
    ("NLM_F_REQUEST", "REQUEST", 0x1),
    ("NLM_F_MULTI", "MULTI", 0x2),
    ("NLM_F_ACK", "ACK", 0x4),
    ("NLM_F_ECHO", "ECHO", 0x8),
    ("NLM_F_DUMP_INTR", "DUMP_INTR", 0x10),
    ("NLM_F_DUMP_FILTERED", "DUMP_FILTERED", 0x20),
    ("NLM_F_ROOT", "ROOT", 0x100),
    ("NLM_F_MATCH", "MATCH", 0x200),
    ("NLM_F_ATOMIC", "ATOMIC", 0x400),
    ("NLM_F_DUMP", "DUMP", 0x300),
    ("NLM_F_REPLACE", "REPLACE", 0x100),
    ("NLM_F_EXCL", "EXCL", 0x200),
    ("NLM_F_CREATE", "CREATE", 0x400),
    ("NLM_F_APPEND", "APPEND", 0x800),
    ("NLM_F_NONREC", "NONREC", 0x100),
    ("NLM_F_BULK", "BULK", 0x200),
    ("NLM_F_CAPPED", "CAPPED", 0x100),
    ("NLM_F_ACK_TLVS", "ACK_TLVS", 0x200),
];

/// strace values that we name differently (after prefix stripping and lowercasing, below).
const VALUE_NAMES: &[(&str, &str)] = &[("RT_SCOPE_UNIVERSE", "global")];

/// Prefixes strace keeps and we drop (the rest is lowercased).
const VALUE_PREFIXES: &[&str] = &["RT_TABLE_", "RTN_", "RT_SCOPE_", "RTPROT_", "AF_"];

/// strace's fixed-header fields → our body keys.
const HEADER_FIELDS: &[(&str, &str)] = &[
    ("rtm_family", "family"),
    ("rtm_dst_len", "dst_len"),
    ("rtm_src_len", "src_len"),
    ("rtm_tos", "tos"),
    ("rtm_table", "table"),
    ("rtm_protocol", "protocol"),
    ("rtm_scope", "scope"),
    ("rtm_type", "type"),
    ("ifa_family", "family"),
    ("ifa_prefixlen", "prefix_len"),
    ("ifa_scope", "scope"),
    ("ifa_index", "index"),
    ("ifi_family", "family"),
    ("ifi_index", "index"),
];

/// strace's attribute types → our body keys (an `if_nametoindex("x")` value compares with the
/// key + `_name` when the key holds the number).
const ATTRIBUTES: &[(&str, &str)] = &[
    ("RTA_TABLE", "table"),
    ("RTA_DST", "dst"),
    ("RTA_SRC", "src"),
    ("RTA_PREFSRC", "prefsrc"),
    ("RTA_GATEWAY", "gateway"),
    ("RTA_OIF", "oif"),
    ("RTA_PRIORITY", "priority"),
    ("IFA_ADDRESS", "address"),
    ("IFA_LOCAL", "local"),
    ("IFA_LABEL", "label"),
    ("IFA_BROADCAST", "broadcast"),
    ("IFLA_IFNAME", "ifname"),
    ("IFLA_MTU", "mtu"),
];

/// A strace atom in our naming.
fn our_name(atom: &str) -> String {
    if let Some((_, ours)) = VALUE_NAMES.iter().find(|(s, _)| *s == atom) {
        return ours.to_string();
    }
    let bare = VALUE_PREFIXES
        .iter()
        .find_map(|p| atom.strip_prefix(p))
        .unwrap_or(atom);
    if bare.starts_with(|c: char| c.is_ascii_uppercase()) {
        bare.to_ascii_lowercase()
    } else {
        bare.to_string()
    }
}

/// A JSON scalar as text (strings unquoted).
fn text(v: &Json) -> String {
    match v {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// strace's flag expression (`NLM_F_REQUEST|0x300`) as a value and the names in our naming.
fn strace_flags(expr: &str) -> (u64, Vec<&'static str>, bool) {
    let (mut value, mut names, mut all_named) = (0, Vec::new(), true);
    for token in expr.split('|').map(str::trim) {
        if let Some((_, ours, bits)) = FLAGS.iter().find(|(s, _, _)| *s == token) {
            value |= bits;
            names.push(*ours);
        } else if let Some(hex) = token.strip_prefix("0x") {
            value |= u64::from_str_radix(hex, 16).expect("hex flag bits");
            all_named = false;
        } else {
            value |= token
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("flag {token}"));
        }
    }
    (value, names, all_named)
}

/// Every address-looking string in our body, except in `request` (the echoed header).
fn our_addresses(v: &Json, out: &mut BTreeSet<String>) {
    match v {
        Json::String(s) if s.parse::<IpAddr>().is_ok() => {
            out.insert(s.clone());
        }
        Json::Array(items) => items.iter().for_each(|i| our_addresses(i, out)),
        Json::Object(map) => map
            .iter()
            .filter(|(k, _)| *k != "request")
            .for_each(|(_, i)| our_addresses(i, out)),
        _ => {}
    }
}

/// Compares one message; each disagreement is pushed to `problems`.
struct Comparison<'a> {
    problems: &'a mut Vec<String>,
    checks: &'a mut BTreeMap<String, usize>,
    context: String,
}

impl Comparison<'_> {
    fn check(&mut self, what: &str, strace: impl ToString, ours: impl ToString) {
        let (s, o) = (strace.to_string(), ours.to_string());
        *self.checks.entry(what.to_string()).or_default() += 1;
        if s != o {
            self.problems.push(format!(
                "{}: {what}: strace {s:?}, ours {o:?}",
                self.context
            ));
        }
    }

    /// nlmsghdr fields: type, flags, seq, pid, len.
    fn header(&mut self, strace: &Value, ours: &Json) {
        let field = |k: &str| strace.field(k).map(Value::atom).unwrap_or("").to_string();
        let kind = field("nlmsg_type");
        match kind.strip_prefix("0x") {
            Some(hex) => self.check(
                "type id",
                u64::from_str_radix(hex, 16).unwrap(),
                &ours["type_id"],
            ),
            None => {
                // We name nlctrl messages by command too ("nlctrl CTRL_CMD_GETFAMILY").
                let ours_type = text(&ours["type"]);
                self.check("type", kind, ours_type.split(' ').next().unwrap_or(""))
            }
        }
        let (value, names, all_named) = strace_flags(&field("nlmsg_flags"));
        self.check("flags value", value, &ours["flags_raw"]);
        let ours_flags: BTreeSet<String> = ours["flags"]
            .as_array()
            .map(|a| a.iter().map(text).collect())
            .unwrap_or_default();
        let strace_names: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
        if all_named {
            self.check(
                "flags",
                format!("{strace_names:?}"),
                format!("{ours_flags:?}"),
            );
        } else if !strace_names.is_subset(&ours_flags) {
            self.check(
                "flag names",
                format!("{strace_names:?}"),
                format!("{ours_flags:?}"),
            );
        }
        self.check("seq", field("nlmsg_seq"), &ours["seq"]);
        let pid: i64 = field("nlmsg_pid").parse().unwrap_or(-1);
        self.check("pid", pid as u32, &ours["pid"]);
        self.check("len", field("nlmsg_len"), &ours["len"]);
    }

    /// A strace value (atom, string, call) against our body's `key`.
    fn value(&mut self, what: &str, strace: &Value, body: &Json, key: &str) {
        match strace {
            Value::Call(f, args) if f == "if_nametoindex" => {
                // We name an index only once we have seen its link.
                let name_key = if key == "index" {
                    "ifname".to_string()
                } else {
                    format!("{key}_name")
                };
                if let (Some(Value::Str(name)), Some(ours)) = (args.first(), body.get(&name_key)) {
                    self.check(what, String::from_utf8_lossy(name), text(ours));
                }
            }
            Value::Call(_, args) => match args.last() {
                Some(Value::Str(s)) => {
                    self.check(what, String::from_utf8_lossy(s), text(&body[key]))
                }
                _ => self.check(what, format!("{strace:?}"), text(&body[key])),
            },
            Value::Str(s) => {
                let s = String::from_utf8_lossy(s);
                self.check(what, s.trim_end_matches('\0'), text(&body[key]))
            }
            Value::Atom(a) => self.check(what, our_name(a), text(&body[key])),
            other => self.check(what, format!("{other:?}"), text(&body[key])),
        }
    }

    /// The body: fixed header fields, attributes, addresses, errors.
    fn body(&mut self, message: &Message, ours: &Json) {
        let body = &ours["body"];
        // Addresses in the top-level attributes (nested ones, such as IFLA_AF_SPEC's IPv6
        // token, are not in our bodies).
        let attrs = message
            .attributes
            .as_ref()
            .map(attributes)
            .unwrap_or_default();
        let strace_addresses: BTreeSet<String> = attrs
            .iter()
            .filter_map(|(_, value)| match value {
                Value::Call(f, args) if f == "inet_addr" || f == "inet_pton" => match args.last() {
                    Some(Value::Str(s)) => Some(String::from_utf8_lossy(s).into_owned()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let mut ours_addresses = BTreeSet::new();
        our_addresses(body, &mut ours_addresses);
        if !matches!(message.body, Some(Value::Str(_))) {
            self.check(
                "addresses",
                format!("{strace_addresses:?}"),
                format!("{ours_addresses:?}"),
            );
        }
        match &message.body {
            Some(fixed @ Value::Struct(_)) if fixed.field("error").is_some() => {
                let errno = fixed.field("error").unwrap().atom();
                let errno = if errno == "0" {
                    "ACK"
                } else {
                    errno.trim_start_matches('-')
                };
                self.check("errno", errno, text(&body["errno"]));
                let echoed = match fixed.field("msg") {
                    Some(Value::List(parts)) => parts.first(),
                    other => other,
                };
                if let Some(echoed) = echoed {
                    self.header(echoed, &body["request"]);
                }
            }
            Some(fixed @ Value::Struct(_)) => {
                // Our `table` is RTA_TABLE's when the message has one (compared below).
                let has_table = attrs.iter().any(|(kind, _)| kind == "RTA_TABLE");
                for (field, key) in HEADER_FIELDS {
                    if *field == "rtm_table" && has_table {
                        continue;
                    }
                    if let Some(v) = fixed.field(field) {
                        self.value(field, v, body, key);
                    }
                }
                if let (Some(flags), Some(secondary)) =
                    (fixed.field("ifa_flags"), body.get("secondary"))
                {
                    self.check(
                        "secondary",
                        flags.atom().contains("IFA_F_SECONDARY"),
                        secondary,
                    );
                }
            }
            Some(Value::Str(raw)) => {
                // Undecoded by strace (generic netlink): the genl command byte, and what we
                // decoded must be in the bytes.
                self.check(
                    "genl cmd",
                    raw.first().copied().unwrap_or(0),
                    &body["cmd_id"],
                );
                for address in &ours_addresses {
                    let octets = match address.parse::<IpAddr>().unwrap() {
                        IpAddr::V4(a) => a.octets().to_vec(),
                        IpAddr::V6(a) => a.octets().to_vec(),
                    };
                    let found = raw.windows(octets.len()).any(|w| w == octets);
                    self.check(
                        "address in raw bytes",
                        if found { address } else { "absent" },
                        address,
                    );
                }
                for key in ["family_name", "scheduler"] {
                    let name = body.get(key).or_else(|| body["service"].get(key));
                    if let Some(name) = name.map(text).filter(|n| !n.is_empty()) {
                        let found = raw.windows(name.len()).any(|w| w == name.as_bytes());
                        self.check(
                            key,
                            if found {
                                &name
                            } else {
                                "absent from raw bytes"
                            },
                            &name,
                        );
                    }
                }
            }
            Some(Value::Atom(status)) => self.check(
                "done status",
                status,
                body.get("status").map_or("0".into(), text),
            ),
            _ => {}
        }
        for (kind, value) in &attrs {
            if let Some((_, key)) = ATTRIBUTES.iter().find(|(a, _)| a == kind) {
                self.value(kind, value, body, key);
            }
        }
    }
}

#[test]
fn netlink_messages_agree_with_strace() {
    require_root();
    let ns = Netns::new("sx");
    let peer = Netns::new("sxp");
    ns.veth_to("veth0", &peer, "veth1");
    ns.ip(&["addr", "add", "192.0.2.10/24", "dev", "veth0"]);
    ns.ip(&["addr", "add", "192.0.2.20/24", "dev", "veth0"]);
    ns.ip(&["addr", "add", "2001:db8::7/64", "dev", "veth0", "nodad"]);
    let dir = ScratchDir::new("strace");
    let log = dir.file("strace.log");
    let id = format!("{:#x}", unused_genl_family_id());
    let script = format!(
        "ip route get 192.0.2.77 && ip -4 addr show && ip route show table local && \
         ip -6 route get 2001:db8::9 && {CLIENT} {id}"
    );
    let run = trace_json(
        &["--genl-family", &format!("IPVS={id}")],
        &[
            "ip",
            "netns",
            "exec",
            &ns.name,
            "strace",
            "-f",
            "-qq",
            "-v",
            "-s",
            "65535",
            "-e",
            "trace=network",
            "-o",
            &log,
            "sh",
            "-c",
            &script,
        ],
    );
    assert!(run.output.status.success(), "{}", run.stderr);
    let log_text = std::fs::read_to_string(&log).expect("strace log");
    let strace = netlink_messages(&log_text).expect("parsing the strace log");

    let mut ours: HashMap<u32, Vec<(&str, &Json)>> = HashMap::new();
    for event in run.of_kind("netlink") {
        let pid = event["pid"].as_u64().unwrap() as u32;
        let direction = event["direction"].as_str().unwrap();
        for message in event["messages"].as_array().unwrap() {
            ours.entry(pid).or_default().push((direction, message));
        }
    }
    // Every process strace saw speak netlink; ours may hold more (strace's own lookups).
    let mut pids: Vec<u32> = strace.keys().copied().collect();
    pids.sort();
    let comms: BTreeSet<String> = run
        .of_kind("netlink")
        .iter()
        .filter(|e| pids.contains(&(e["pid"].as_u64().unwrap() as u32)))
        .map(|e| text(&e["comm"]))
        .collect();
    assert_eq!(
        comms,
        BTreeSet::from(["ip".to_string(), "ipvs_client".to_string()]),
        "{pids:?}"
    );
    assert_eq!(pids.len(), 5, "4 ip runs and the client: {pids:?}");

    let mut problems = Vec::new();
    let mut checks = BTreeMap::new();
    let mut compared = 0;
    for pid in &pids {
        let theirs = &strace[pid];
        let mine = ours.get(pid).map(Vec::as_slice).unwrap_or_default();
        if theirs.len() != mine.len() {
            problems.push(format!(
                "pid {pid}: strace shows {} messages, we show {}",
                theirs.len(),
                mine.len()
            ));
        }
        for (i, (message, (direction, json))) in theirs.iter().zip(mine).enumerate() {
            let mut c = Comparison {
                problems: &mut problems,
                checks: &mut checks,
                context: format!("pid {pid} message {i} ({})", text(&json["type"])),
            };
            c.check("direction", message.direction, direction);
            c.header(&message.header, json);
            c.body(message, json);
            compared += 1;
        }
    }
    assert!(
        problems.is_empty(),
        "{} disagreements with strace in {compared} messages:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The workload is all there: 4 ip runs' requests and replies, and 8 client exchanges; and
    // the comparisons really ran.
    assert!(compared >= 40, "only {compared} messages compared");
    eprintln!("compared {compared} messages with strace: {checks:?}");
    for what in [
        "addresses",
        "errno",
        "genl cmd",
        "address in raw bytes",
        "scheduler",
        "family_name",
        "ifa_prefixlen",
        "rtm_type",
        "rtm_scope",
        "RTA_TABLE",
        "RTA_PREFSRC",
        "RTA_DST",
        "RTA_OIF",
        "IFA_LOCAL",
        "IFA_LABEL",
        "secondary",
        "done status",
    ] {
        assert!(
            checks.contains_key(what),
            "nothing compared {what}: {checks:?}"
        );
    }
}
