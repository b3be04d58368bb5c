//! The judges are the real resolvers: for random address layouts and hosts files in network
//! namespaces this test makes, the order nodeip-trace's replay of each resolver's sort predicts
//! must equal what that resolver returns, every time —
//! - musl's `getaddrinfo` (clients built with `musl-gcc`, dynamic and static) against
//!   `explain::resolver::musl`;
//! - Go's own resolver (`net.LookupIP`, `CGO_ENABLED=0`, built with Debian's Go 1.19 and the
//!   newest toolchain `cargo xtask setup --for-tests` installs) against `explain::resolver::go`.
//!
//! The predictors get their inputs the way each resolver does: the hosts-file order, and per
//! address the source the kernel gives a UDP `connect()` (`ip route get`; Go's sockets have
//! `SO_BROADCAST`, so its connect to a broadcast address succeeds).
//!
//! The same runs of the musl clients are traced (`nodeip-trace trace`; the dynamic client in
//! even namespaces, the static one — its own `getaddrinfo`, found in its symbol table — in odd
//! ones): every musl getaddrinfo event must carry the addresses the client printed, name its
//! resolver (`unknown` where the trace header says the kernel cannot tell: before 5.15), and its
//! `why` — musl's sort replayed live from the connect/getsockname calls the
//! tracer saw — must predict that order.
//!
//! Needs root. Namespaces are `nit-res-<pid>-<n>`, always removed with their `/etc/netns`
//! directory. Only veth pairs whose both ends stay in the namespace; nothing is sent (a UDP
//! `connect()` sends no packet). `RESOLVER_SEED=<n>` replays a run; the seed is printed.
//! `RESOLVER_NAMESPACES=<n>` judges n layouts instead of 24 (the VM lane: 8).
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Result};
use nodeip_trace::explain::resolver::{go, musl};
use nodeip_trace_tests::clients::event_resolver;
use nodeip_trace_tests::go::{require_go_toolchains, GoBuild};
use nodeip_trace_tests::layouts::{
    destination_pool, make_layout, route_source_with, run, Netns, Rng,
};
use nodeip_trace_tests::{require_root, tool, trace_once_probed};

const DEFAULT_SEED: u64 = 0x5eed_0f6a_7e00;
/// Namespaces (random layouts) judged by default.
const NAMESPACES: usize = 24;
/// Overrides [`NAMESPACES`]: the VM lane judges fewer there (the sorts are the same code on
/// every kernel; what the guest adds is its kernel's source choices and hooks, and a trace
/// starts 15x slower under emulation).
const NAMESPACES_ENV: &str = "RESOLVER_NAMESPACES";
const NAMES_PER_NAMESPACE: usize = 10;

/// How many namespaces this run judges ([`NAMESPACES_ENV`], else [`NAMESPACES`]; at least 2,
/// so both musl clients are traced).
fn namespaces() -> usize {
    std::env::var(NAMESPACES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(NAMESPACES)
        .max(2)
}

/// The real resolvers' clients: (label, binary, is Go).
struct Client {
    label: String,
    path: PathBuf,
    go: bool,
}

fn build_clients() -> Result<Vec<Client>> {
    let mut clients = Vec::new();
    for (label, statically) in [("musl", false), ("musl-static", true)] {
        clients.push(Client {
            label: label.into(),
            path: nodeip_trace_tests::musl::lookup_addrs(statically)?,
            go: false,
        });
    }
    let toolchains = require_go_toolchains();
    let picked = [toolchains.first(), toolchains.last()];
    for toolchain in picked.into_iter().flatten() {
        let how = GoBuild {
            cgo: false,
            stripped: true,
            static_musl: false,
        };
        clients.push(Client {
            label: format!("go{}", toolchain.version),
            path: toolchain.client("lookup_ip.go", how)?,
            go: true,
        });
    }
    Ok(clients)
}

/// `name addr addr …` lines → name → addresses (an error line → `Err(text)`).
fn parse_lines(out: &str) -> BTreeMap<String, Result<Vec<IpAddr>, String>> {
    out.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next()?.to_string();
            let rest: Vec<&str> = words.collect();
            let parsed = if rest.first() == Some(&"ERROR") {
                Err(rest.join(" "))
            } else {
                rest.iter()
                    .map(|w| w.parse::<IpAddr>().map_err(|e| format!("{w}: {e}")))
                    .collect()
            };
            Some((name, parsed))
        })
        .collect()
}

/// Go prints an IPv4-mapped address as IPv4 (`To4() != nil`).
fn go_form(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    }
}

/// One namespace's scene: names and their hosts-file order.
struct Scene {
    ns: Netns,
    names: Vec<(String, Vec<IpAddr>)>,
    layout_commands: Vec<String>,
}

fn make_scene(rng: &mut Rng, n: usize) -> Result<Scene> {
    let ns = Netns::create(format!("nit-res-{}-{n}", std::process::id()))?;
    let with_ipv6 = rng.chance(85);
    let layout = make_layout(rng, with_ipv6);
    for command in &layout.commands {
        ns.ip(command)?;
    }
    let pool = destination_pool(rng, &layout);
    let mut hosts = String::from("# written by tests/tests/resolver_orders.rs\n");
    let mut names = Vec::new();
    for k in 0..NAMES_PER_NAMESPACE {
        let name = format!("name{k}");
        let mut picked: Vec<IpAddr> = Vec::new();
        for _ in 0..2 + rng.below(4) {
            let a = *rng.pick(&pool);
            // One address per Go form: Go prints ::ffff:a.b.c.d as a.b.c.d.
            if !picked.iter().any(|p| go_form(*p) == go_form(a)) {
                picked.push(a);
            }
        }
        for a in &picked {
            hosts.push_str(&format!("{a} {name}\n"));
        }
        names.push((name, picked));
    }
    ns.write_etc("hosts", &hosts)?;
    Ok(Scene {
        ns,
        names,
        layout_commands: layout.commands,
    })
}

/// What `client` should return for `hosts` (the name's hosts-file order).
fn predict(scene: &Scene, client: &Client, hosts: &[IpAddr]) -> Result<Vec<IpAddr>> {
    if client.go {
        let mut candidates = Vec::new();
        for a in hosts {
            let source = route_source_with(&scene.ns, go_form(*a), true)?.map(go_form);
            candidates.push(go::GoCandidate {
                dest: go_form(*a),
                source,
            });
        }
        Ok(go::sort(&candidates)
            .into_iter()
            .map(|i| candidates[i].dest)
            .collect())
    } else {
        if !musl::sorts(false, hosts) {
            return Ok(hosts.to_vec());
        }
        let mut candidates = Vec::new();
        for a in hosts {
            let source = route_source_with(&scene.ns, *a, false)?;
            candidates.push(musl::MuslCandidate {
                dest: *a,
                connected: source.is_some(),
                source,
            });
        }
        Ok(musl::sort(&candidates)
            .into_iter()
            .map(|i| candidates[i].dest)
            .collect())
    }
}

fn describe(scene: &Scene, hosts: &[IpAddr]) -> String {
    let mut text = format!("layout of {}:\n", scene.ns.name);
    for c in &scene.layout_commands {
        text.push_str(&format!("  ip {c}\n"));
    }
    text.push_str("sources:\n");
    for a in hosts {
        let s = route_source_with(&scene.ns, *a, false).ok().flatten();
        text.push_str(&format!("  {a} → {s:?}\n"));
    }
    text
}

/// The traced run of a musl client: its getaddrinfo events against its output.
fn check_live(scene: &Scene, client: &Client, names: &[&str], failures: &mut Vec<String>) -> usize {
    // A static client's own getaddrinfo is probed at its first exec; a dynamic one's libc
    // when the tracer sees it mapped ("probes attached" is only said for the static one).
    let out = if client.label == "musl-static" {
        trace_once_probed(
            &["--format", "json", "--no-route-lookups"],
            &scene.ns.name,
            &[],
            &client.path,
            "static musl getaddrinfo",
            "localhost",
            &names.join(" "),
        )
    } else {
        Command::new(tool())
            .args(["trace", "--format", "json", "--no-route-lookups"])
            .args(["--", "ip", "netns", "exec", &scene.ns.name])
            .arg(&client.path)
            .args(names)
            .output()
            .expect("running nodeip-trace")
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The client's stdout goes to stderr when stdout carries JSON.
    let printed = parse_lines(&stderr);
    let events = nodeip_trace_tests::json_lines(&out.stdout);
    // Every kernel: one return program per C library names it (no attach cookie).
    let reported = "musl";
    let mut checked = 0;
    for e in events.iter().filter(|e| e["kind"] == "getaddrinfo") {
        let node = e["node"].as_str().unwrap_or_default();
        let Some(Ok(got)) = printed.get(node) else {
            continue;
        };
        let addresses: Vec<IpAddr> = e["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str()?.parse().ok())
            .collect();
        checked += 1;
        let label = &client.label;
        if event_resolver(e) != reported {
            failures.push(format!(
                "live {label} {node}: resolver {} (want {reported})",
                e["resolver"]
            ));
        }
        if &addresses != got {
            failures.push(format!(
                "live {label} {node}: event {addresses:?}, client {got:?}"
            ));
        }
        if let Some(why) = e.get("why") {
            if why["matches"] != true {
                failures.push(format!(
                    "live {label} {node}: the live why predicts otherwise: {why}"
                ));
            }
        }
    }
    checked
}

#[test]
fn musl_and_go_return_what_their_replayed_sorts_predict() -> Result<()> {
    require_root();
    let seed = std::env::var("RESOLVER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    eprintln!("RESOLVER_SEED={seed}");
    let mut rng = Rng::new(seed);
    let clients = build_clients()?;
    let mut judged: BTreeMap<String, usize> = BTreeMap::new();
    let mut live_checked: BTreeMap<&str, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let namespaces = namespaces();
    // Names each resolver must have been judged on: five in six of those asked (200 of the
    // default 240); half that for each traced musl client.
    let min_names = namespaces * NAMES_PER_NAMESPACE * 5 / 6;
    eprintln!("{namespaces} namespaces ({NAMESPACES_ENV})");
    for n in 0..namespaces {
        let scene = make_scene(&mut rng, n)?;
        let names: Vec<&str> = scene.names.iter().map(|(n, _)| n.as_str()).collect();
        for client in &clients {
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &scene.ns.name])
                .arg(&client.path)
                .args(&names)
                .env("GODEBUG", "netdns=go");
            let printed = parse_lines(&run(&mut cmd)?);
            for (name, hosts) in &scene.names {
                let got = match printed.get(name) {
                    Some(Ok(got)) => got,
                    other => bail!("{}: {name}: {other:?}", client.label),
                };
                let want = predict(&scene, client, hosts)?;
                *judged.entry(client.label.clone()).or_default() += 1;
                if &want != got {
                    failures.push(format!(
                        "{} {name}: hosts order {hosts:?}\n  predicted {want:?}\n  returned  {got:?}\n{}",
                        client.label,
                        describe(&scene, hosts)
                    ));
                }
            }
        }
        let live = if n % 2 == 0 { "musl" } else { "musl-static" };
        if let Some(musl) = clients.iter().find(|c| c.label == live) {
            *live_checked.entry(live).or_default() +=
                check_live(&scene, musl, &names, &mut failures);
        }
    }
    eprintln!("judged per client: {judged:?}; live musl events checked: {live_checked:?}");
    assert!(
        failures.is_empty(),
        "{} mismatch(es) (RESOLVER_SEED={seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
    for (label, count) in &judged {
        assert!(*count >= min_names, "{label}: only {count} names judged");
    }
    for label in ["musl", "musl-static"] {
        let checked = live_checked.get(label).copied().unwrap_or(0);
        assert!(
            checked >= min_names / 2,
            "{label}: only {checked} live events were checked"
        );
    }
    Ok(())
}
