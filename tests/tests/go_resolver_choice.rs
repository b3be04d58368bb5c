//! Which resolver a Go program built with cgo takes — Go's own or the C library's — judged by
//! Go itself: for each nsswitch.conf / resolv.conf / name case, a cgo client built with Debian's
//! Go 1.19 and the newest toolchain runs with `GODEBUG=netdns=2` in a network namespace whose
//! `/etc/netns/NAME/` files `ip netns exec` mounts over `/etc`; the `hostLookupOrder(name) = …`
//! line it prints must agree with `explain::resolver::go_choice` on the same files. Names are
//! all in the namespace's hosts file, and the namespace has only its loopback: no query leaves.
use std::process::Command;

use nodeip_trace::explain::resolver::go_choice::{go_resolver_choice, ConfFile, GoResolverInputs};
use nodeip_trace_tests::go::{require_go_toolchains, GoBuild};
use nodeip_trace_tests::{require_root, workspace_root, Netns};

/// (nsswitch.conf, resolv.conf, name looked up; "HOSTNAME" stands for this machine's hostname).
const CASES: &[(&str, &str, &str)] = &[
    ("hosts: files dns\n", "nameserver 127.0.0.1\n", "node-1"),
    (
        "hosts: files myhostname dns\n",
        "nameserver 127.0.0.1\n",
        "HOSTNAME",
    ),
    (
        "hosts: files myhostname dns\n",
        "nameserver 127.0.0.1\n",
        "node-1",
    ),
    ("hosts: files resolve [!UNAVAIL=return] dns\n", "", "node-1"),
    ("hosts: files [NOTFOUND=return] dns\n", "", "node-1"),
    (
        "hosts: files [NOTFOUND=return UNAVAIL=continue] dns\n",
        "",
        "node-1",
    ),
    (
        "hosts: files mdns4_minimal [NOTFOUND=return] dns\n",
        "",
        "printer.local",
    ),
    (
        "hosts: files mdns4_minimal [NOTFOUND=return] dns\n",
        "",
        "node-1",
    ),
    ("hosts: files dns\n", "options inet6 ndots:2\n", "node-1"),
    (
        "hosts: files dns\n",
        "options ndots:2 edns0 rotate\n",
        "node-1",
    ),
    (
        "hosts: files dns\n",
        "sortlist 10.0.0.0/255.0.0.0\n",
        "node-1",
    ),
    ("passwd: files\n", "", "node-1"),
];

#[test]
fn go_s_own_choice_of_resolver_is_what_the_replay_says() {
    require_root();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let dir = workspace_root().join("target/go-choice");
    std::fs::create_dir_all(&dir).unwrap();
    let toolchains = require_go_toolchains();
    let judged_by = [toolchains.first().unwrap(), toolchains.last().unwrap()];
    let mut clients = Vec::new();
    for t in judged_by {
        let out = dir.join(format!("lookup-go{}-cgo", t.version));
        t.build(
            &workspace_root().join("tests/clients/lookup_ip.go"),
            &out,
            GoBuild {
                cgo: true,
                ..GoBuild::default()
            },
        )
        .unwrap();
        clients.push((t.version.clone(), out));
    }
    let mut failures = Vec::new();
    for (i, (nsswitch, resolv, name)) in CASES.iter().enumerate() {
        let name = name.replace("HOSTNAME", &hostname);
        let ns = Netns::new(&format!("gochoice{i}"));
        ns.ip(&["link", "set", "lo", "up"]);
        ns.etc_file("hosts", &format!("127.0.0.1 localhost\n10.9.9.9 {name}\n"));
        ns.etc_file("nsswitch.conf", nsswitch);
        ns.etc_file("resolv.conf", resolv);
        for (version, client) in &clients {
            let minor = version.split('.').nth(1).and_then(|m| m.parse().ok());
            let inputs = GoResolverInputs {
                mdns_allow: std::path::Path::new("/etc/mdns.allow").exists(),
                ..GoResolverInputs::cgo_build(
                    minor.unwrap(),
                    ConfFile::Text(nsswitch),
                    ConfFile::Text(resolv),
                    &hostname,
                )
            };
            let want = go_resolver_choice(&inputs, &name);
            let out = Command::new("ip")
                .args(["netns", "exec", &ns.name, "env", "GODEBUG=netdns=2"])
                .arg(client)
                .arg(&name)
                .env_remove("LOCALDOMAIN")
                .env_remove("RES_OPTIONS")
                .env_remove("HOSTALIASES")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let marker = format!("hostLookupOrder({name}) = ");
            let Some(order) = stderr
                .lines()
                .find_map(|l| l.split_once(&marker).map(|(_, o)| o.trim().to_string()))
            else {
                failures.push(format!("go{version} case {i}: no {marker:?} in {stderr}"));
                continue;
            };
            if (order == "cgo") != want.cgo {
                failures.push(format!(
                    "go{version} case {i} ({nsswitch:?}, {resolv:?}, {name}): Go chose {order}, \
                     the replay says {} because {}",
                    if want.cgo { "cgo" } else { "go" },
                    want.because
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
