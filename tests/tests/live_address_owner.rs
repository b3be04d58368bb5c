//! End to end (issue 51): who added the address a lookup picked. Real keepalived (Debian's),
//! started inside a namespace the test makes, brings up its VIP as a /32 beside the node's
//! address; `getent` then resolves the node name, whose hosts file lists the VIP first. The
//! trace must name keepalived as the one that added the VIP (its `RTM_NEWADDR` request) and
//! diagnose the lookup's pick with both names. VRRP adverts go out of the veth into its peer
//! namespace only.
use nodeip_trace_tests::seeds::{in_ns, node};
use nodeip_trace_tests::{require_root, tool, trace_json, ScratchDir, TraceRun};

const VIP: &str = "10.77.0.100";

/// `run`'s events written as a recording in `dir`, and `replay`'s text timeline of it.
fn replayed(dir: &ScratchDir, run: &TraceRun) -> (String, String) {
    let recording = dir.file("rec.jsonl");
    let lines: Vec<String> = run.events.iter().map(|e| e.to_string()).collect();
    std::fs::write(&recording, lines.join("\n") + "\n").unwrap();
    let replay = std::process::Command::new(tool())
        .arg("replay")
        .arg(&recording)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&replay.stdout).into_owned();
    (recording, text)
}

/// keepalived's configuration: one VRRP instance that is master at once and adds [`VIP`]/32 on
/// eth0 (a /32: its own primary, so glibc's sort keeps the hosts file's order).
fn keepalived_conf() -> String {
    format!(
        "global_defs {{\n  router_id nit\n}}\nvrrp_instance VI {{\n  state MASTER\n  \
         interface eth0\n  virtual_router_id 51\n  priority 150\n  advert_int 1\n  \
         virtual_ipaddress {{\n    {VIP}/32 dev eth0\n  }}\n}}\n"
    )
}

#[test]
fn a_lookup_that_picks_keepalived_s_vip_names_keepalived() {
    require_root();
    assert!(
        std::path::Path::new("/usr/sbin/keepalived").exists(),
        "keepalived is missing: `cargo xtask setup --for-tests` installs it"
    );
    let (ns, _peer) = node("kaown", &[&["10.77.0.6/24", "dev", "eth0"]]);
    ns.etc_file("hosts", &format!("{VIP} node-a\n10.77.0.6 node-a\n"));
    let dir = ScratchDir::new("keepalived");
    let conf = dir.file("keepalived.conf");
    std::fs::write(&conf, keepalived_conf()).unwrap();
    // keepalived in the foreground (-n) with its pid files here; the lookup once the VIP is up
    // (about 3 s: keepalived's first advert), then keepalived stopped (it removes the VIP).
    let script = format!(
        "keepalived -n -l -f {conf} -p {pid} -r {vrrp} >{log} 2>&1 & k=$!; \
         i=0; until ip -4 addr show dev eth0 | grep -q '{VIP}/'; do \
           i=$((i+1)); [ $i -gt 300 ] && {{ echo 'no VIP after 30 s' >&2; kill $k; exit 1; }}; \
           sleep 0.1; done; \
         getent ahostsv4 node-a; kill $k; wait $k; exit 0",
        pid = dir.file("keepalived.pid"),
        vrrp = dir.file("vrrp.pid"),
        log = dir.file("keepalived.log"),
    );
    let run = trace_json(&[], &in_ns(&ns, &["sh", "-c", &script]));
    let log = std::fs::read_to_string(dir.file("keepalived.log")).unwrap_or_default();
    assert!(
        run.output.status.success(),
        "trace failed: {}\nkeepalived: {log}",
        run.stderr
    );

    // The VIP's RTM_NEWADDR, made by keepalived.
    let added = run
        .of_kind("conversation")
        .into_iter()
        .find(|c| c["request"]["type"] == "RTM_NEWADDR" && c["request"]["body"]["local"] == VIP)
        .unwrap_or_else(|| panic!("no RTM_NEWADDR of {VIP}: {}", run.stderr));
    assert_eq!(added["comm"], "keepalived", "{added:#}");
    assert_eq!(added["outcome"], "ack", "{added:#}");

    // getent's pick, diagnosed with both names.
    let calls = run.of_kind("getaddrinfo");
    let call = calls
        .iter()
        .find(|c| c["node"] == "node-a")
        .unwrap_or_else(|| panic!("no getaddrinfo of node-a: {}", run.stderr));
    assert_eq!(call["addresses"][0], VIP, "{call:#}");
    let found: Vec<_> = run
        .of_kind("diagnosis")
        .into_iter()
        .filter(|d| d["id"] == "added-address-picked")
        .collect();
    assert_eq!(found.len(), 1, "{}", run.stderr);
    let summary = found[0]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("getent[")
            && summary.contains(&format!("got {VIP} first: keepalived["))
            && summary.contains(&format!("added {VIP}/32 to eth0")),
        "{summary}"
    );

    // The ledger: the text timeline's closing list and the report's table name keepalived as
    // the one that added the VIP, and removed it when it stopped.
    let (recording, text) = replayed(&dir, &run);
    let ledger = text
        .split_once("address change(s) ===\n")
        .unwrap_or_else(|| panic!("no address changes in the replay:\n{text}"))
        .1;
    let added = format!("added {VIP}/32 to eth0 by keepalived[");
    let removed = format!("removed {VIP}/32 from eth0 by keepalived[");
    assert!(
        ledger.lines().any(|l| l.contains(&added)) && ledger.lines().any(|l| l.contains(&removed)),
        "{ledger}"
    );
    let page = dir.file("report.html");
    let report = std::process::Command::new(tool())
        .arg("report")
        .arg(&recording)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(report.status.success(), "{report:?}");
    let html = std::fs::read_to_string(&page).unwrap();
    let table = html
        .split_once("<section id=\"addresses\">")
        .and_then(|(_, rest)| rest.split_once("</section>"))
        .map(|(table, _)| table)
        .expect("the report has an address changes section");
    assert!(
        table.contains(&format!(
            "<td class=\"mono\">{VIP}/32</td><td>eth0</td><td>keepalived["
        )),
        "{table}"
    );
}

/// Changes no traced request explains (issue 51): the tracer runs inside a namespace the test
/// makes, so the kernel's address notices it hears are that namespace's. A link comes up (the
/// kernel gives it an IPv6 link-local address on its own), `ip` adds an IPv4 and an IPv6
/// address and removes the IPv4 one. The ledger names `ip` for its three requests, each heard
/// once from the kernel too, and "the kernel, or a process this trace does not follow" for
/// the link-local address and the end of duplicate address detection.
#[test]
fn the_ledger_lists_the_kernel_s_own_address_changes() {
    require_root();
    let ns = nodeip_trace_tests::Netns::new("kaddr");
    let peer = nodeip_trace_tests::Netns::new("kaddrp");
    ns.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", &peer.name,
    ]);
    peer.ip(&["link", "set", "eth0", "up"]);
    let script = "ip link set eth0 up && ip addr add 192.0.2.5/24 dev eth0 \
                  && ip addr add 2001:db8::5/64 dev eth0 && sleep 2.5 \
                  && ip addr del 192.0.2.5/24 dev eth0 && sleep 0.3";
    let run = nodeip_trace_tests::trace_json_in(
        &ns,
        &["--no-route-lookups", "--no-getaddrinfo"],
        &["sh", "-c", script],
    );
    assert!(run.output.status.success(), "{}", run.stderr);
    let notices = run.of_kind("address_notice");
    let heard = |address: &str| {
        notices
            .iter()
            .filter(|n| n["address"]["address"] == address)
            .count()
    };
    assert_eq!(heard("192.0.2.5"), 2, "added and removed: {notices:#?}");
    assert!(
        heard("2001:db8::5") >= 2,
        "tentative, then not: {notices:#?}"
    );
    let link_local = notices
        .iter()
        .find(|n| {
            n["address"]["address"]
                .as_str()
                .is_some_and(|a| a.starts_with("fe80::"))
        })
        .unwrap_or_else(|| panic!("no link-local address heard: {notices:#?}"));
    assert_eq!(link_local["pid"], 0, "{link_local}");
    assert_eq!(link_local["address"]["ifname"], "eth0", "{link_local}");

    // The ledger, as the replay's text timeline ends.
    let dir = ScratchDir::new("kernel-addresses");
    let (_, text) = replayed(&dir, &run);
    let ledger: Vec<&str> = text
        .split_once("address change(s) ===\n")
        .unwrap_or_else(|| panic!("no address changes in the replay:\n{text}"))
        .1
        .lines()
        .collect();
    let by_ip = |what: &str| {
        ledger
            .iter()
            .filter(|l| l.contains(what) && l.contains(" by ip["))
            .count()
    };
    assert_eq!(by_ip("added 192.0.2.5/24 to eth0"), 1, "{ledger:#?}");
    assert_eq!(by_ip("added 2001:db8::5/64 to eth0"), 1, "{ledger:#?}");
    assert_eq!(by_ip("removed 192.0.2.5/24 from eth0"), 1, "{ledger:#?}");
    let kernel = "by the kernel, or a process this trace does not follow";
    assert!(
        ledger
            .iter()
            .any(|l| l.contains("added or changed fe80::") && l.contains(kernel)),
        "{ledger:#?}"
    );
    assert!(
        ledger
            .iter()
            .any(|l| l.contains("changed 2001:db8::5/64 on eth0") && l.contains(kernel)),
        "{ledger:#?}"
    );
    assert!(
        !ledger
            .iter()
            .any(|l| l.contains("192.0.2.5/24") && l.contains(kernel)),
        "each request's notice is its own: {ledger:#?}"
    );
}
