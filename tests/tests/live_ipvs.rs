//! End to end (issue 3): IPVS commands on generic netlink, traced live. This kernel has no IPVS,
//! so `ipvs_client` (tests/src/bin) sends what ipvsadm would to a family id nobody uses, and
//! `--genl-family IPVS=ID` tells the tracer what that id is. The kernel answers every command
//! with `NLMSG_ERROR` ENOENT (no such family) echoing the whole request, and the GETFAMILY
//! lookup for "IPVS" with ENOENT too: all of it must be in the timeline, decoded.
use nodeip_trace_tests::{
    analyze_json, kernel_has_ipvs, require_root, trace_json, unused_genl_family_id, ScratchDir,
    TraceRun,
};
use serde_json::{json, Value};

const CLIENT: &str = env!("CARGO_BIN_EXE_ipvs_client");

/// The IPVS commands the client sends after its GETFAMILY, in order.
const COMMANDS: [&str; 7] = [
    "IPVS_CMD_NEW_SERVICE",
    "IPVS_CMD_NEW_DEST",
    "IPVS_CMD_NEW_SERVICE",
    "IPVS_CMD_GET_SERVICE",
    "IPVS_CMD_GET_INFO",
    "IPVS_CMD_DEL_SERVICE",
    "IPVS_CMD_DEL_SERVICE",
];

/// The client's netlink messages in one direction, in order.
fn client_messages<'a>(events: &'a [Value], direction: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["kind"] == "netlink" && e["comm"] == "ipvs_client")
        .filter(|e| e["direction"] == direction)
        .flat_map(|e| e["messages"].as_array().unwrap().iter())
        .collect()
}

/// The `cmd` of every `ipvs` event, in order.
fn ipvs_commands(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["kind"] == "ipvs")
        .map(|e| e["cmd"].as_str().unwrap())
        .collect()
}

fn trace_client(extra: &[&str], family: &str) -> TraceRun {
    let run = trace_json(extra, &[CLIENT, family]);
    assert!(
        run.output.status.success(),
        "ipvs_client or the trace failed: {}",
        run.stderr
    );
    run
}

/// `analyze --format json EXTRA… FILE`'s events (it must succeed).
fn analyze(extra: &[&str], file: &str) -> Vec<Value> {
    let run = analyze_json(extra, file);
    assert!(run.output.status.success(), "analyze: {}", run.stderr);
    run.events
}

#[test]
fn ipvs_commands_and_the_kernels_answers_are_decoded() {
    require_root();
    let id = unused_genl_family_id();
    let family = format!("{id:#x}");
    let run = trace_client(&["--genl-family", &format!("IPVS={family}")], &family);
    let sent = client_messages(&run.events, "send");
    let received = client_messages(&run.events, "recv");
    assert_eq!(sent.len(), 1 + COMMANDS.len(), "{sent:#?}");

    // The family lookup, as libnl's genl_ctrl_resolve sends it.
    let lookup = sent[0];
    assert_eq!(lookup["type"], "nlctrl CTRL_CMD_GETFAMILY");
    assert_eq!(lookup["type_id"], 0x10);
    assert_eq!(lookup["flags"], json!(["REQUEST", "ACK"]));
    assert_eq!(lookup["body"]["family_name"], "IPVS");

    // Then the commands, to the made-up id, decoded as IPVS.
    let port_id = &lookup["pid"];
    let first_seq = lookup["seq"].as_u64().unwrap();
    for (i, (message, cmd)) in sent[1..].iter().zip(COMMANDS).enumerate() {
        assert_eq!(message["type"], cmd, "{message:#}");
        assert_eq!(message["type_id"], id, "{message:#}");
        assert_eq!(message["body"]["kind"], "ipvs", "{message:#}");
        assert_eq!(message["body"]["cmd"], cmd);
        assert_eq!(message["pid"], *port_id);
        assert_eq!(message["seq"], first_seq + 1 + i as u64);
        let flags = if cmd == "IPVS_CMD_GET_SERVICE" {
            json!(["REQUEST", "ACK", "DUMP"])
        } else {
            json!(["REQUEST", "ACK"])
        };
        assert_eq!(message["flags"], flags, "{message:#}");
    }
    let service_v4 = json!({
        "af": "inet", "protocol": "TCP", "address": "10.96.0.10", "port": 53, "scheduler": "rr",
        "flags": [], "flags_mask": u32::MAX, "timeout": 0, "netmask": "255.255.255.255",
    });
    assert_eq!(sent[1]["body"]["service"], service_v4);
    let dest = &sent[2]["body"]["dest"];
    assert_eq!(sent[2]["body"]["service"]["address"], "10.96.0.10");
    assert_eq!(sent[2]["body"]["service"]["port"], 53);
    assert_eq!(dest["af"], "inet");
    assert_eq!(dest["address"], "10.244.1.5");
    assert_eq!(dest["port"], 53);
    assert_eq!(dest["forwarding"], "masq");
    assert_eq!(dest["weight"], 1);
    assert_eq!(dest["u_threshold"], 0);
    assert_eq!(dest["l_threshold"], 0);
    let service_v6 = &sent[3]["body"]["service"];
    assert_eq!(service_v6["af"], "inet6");
    assert_eq!(service_v6["protocol"], "TCP");
    assert_eq!(service_v6["address"], "fd00:10:96::a");
    assert_eq!(service_v6["port"], 53);
    assert_eq!(service_v6["scheduler"], "rr");
    assert_eq!(service_v6["netmask"], "128");
    assert_eq!(sent[6]["body"]["service"]["address"], "10.96.0.10");
    assert_eq!(sent[7]["body"]["service"]["address"], "fd00:10:96::a");

    // The kernel's answers: for every IPVS command an uncapped NLMSG_ERROR ENOENT that echoes the
    // whole request, so the echoed header is named by its genl command.
    let errors: Vec<&Value> = received
        .iter()
        .copied()
        .filter(|m| m["type"] == "NLMSG_ERROR")
        .collect();
    let expected_errors = if kernel_has_ipvs() {
        // The lookup succeeds there (NEWFAMILY, then an ACK); only the commands fail.
        assert!(received.iter().any(
            |m| m["type"] == "nlctrl CTRL_CMD_NEWFAMILY" && m["body"]["family_name"] == "IPVS"
        ));
        &sent[1..]
    } else {
        &sent[..]
    };
    let failures: Vec<&Value> = errors
        .iter()
        .copied()
        .filter(|m| m["body"]["error"] != 0)
        .collect();
    assert_eq!(failures.len(), expected_errors.len(), "{received:#?}");
    for (error, request) in failures.iter().zip(expected_errors) {
        assert_eq!(error["body"]["kind"], "error");
        assert_eq!(error["body"]["errno"], "ENOENT", "{error:#}");
        assert_eq!(error["body"]["error"], -2);
        assert_eq!(error["flags"], json!([]), "not capped: {error:#}");
        assert_eq!(error["seq"], request["seq"]);
        assert_eq!(error["pid"], request["pid"]);
        // nlmsghdr + errno + the whole request.
        assert_eq!(
            error["len"].as_u64().unwrap(),
            20 + request["len"].as_u64().unwrap()
        );
        let echoed = &error["body"]["request"];
        for field in ["type", "type_id", "flags", "seq", "pid", "len"] {
            assert_eq!(echoed[field], request[field], "{field} of {error:#}");
        }
    }

    // An `ipvs` event per command, carrying the decoded command.
    assert_eq!(ipvs_commands(&run.events), COMMANDS);
    let ipvs: Vec<&Value> = run.of_kind("ipvs");
    assert_eq!(ipvs[0]["service"], service_v4);
    assert_eq!(ipvs[1]["dest"]["address"], "10.244.1.5");
    assert_eq!(ipvs[1]["dest"]["forwarding"], "masq");
    assert_eq!(ipvs[2]["service"]["address"], "fd00:10:96::a");
    for event in &ipvs {
        // Paired with the kernel's answer once request/reply pairing lands; never anything else.
        if let Some(result) = event.get("result") {
            assert_eq!(*result, -2, "{event:#}");
        }
    }
}

#[test]
fn analyze_names_the_family_from_the_flag_or_from_the_recording() {
    require_root();
    let id = unused_genl_family_id();
    let family = format!("{id:#x}");
    let dir = ScratchDir::new("ipvs-pcap");
    let unnamed = dir.file("unnamed.pcap");
    let named = dir.file("named.pcapng");

    // Without the flag the id means nothing to the tracer: raw generic netlink, no ipvs events.
    let run = trace_client(&["--pcap", &unnamed], &family);
    assert!(ipvs_commands(&run.events).is_empty());
    let unknown = &client_messages(&run.events, "send")[1];
    assert_eq!(unknown["type_id"], id);
    assert_eq!(unknown["body"]["kind"], "genl", "{unknown:#}");
    assert!(ipvs_commands(&analyze(&[], &unnamed)).is_empty());

    // `analyze --genl-family` decodes that capture.
    let flag = format!("IPVS={family}");
    let analyzed = analyze(&["--genl-family", &flag], &unnamed);
    assert_eq!(ipvs_commands(&analyzed), COMMANDS);
    let first = analyzed.iter().find(|e| e["kind"] == "ipvs").unwrap();
    assert_eq!(first["service"]["address"], "10.96.0.10");

    // A capture made with the flag records the name, so analyze needs no flag.
    trace_client(&["--genl-family", &flag, "--pcapng", &named], &family);
    assert_eq!(ipvs_commands(&analyze(&[], &named)), COMMANDS);
}
