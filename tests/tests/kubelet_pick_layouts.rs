//! Issue 51: `explain`'s kubelet pick equals kubelet's own rule, run for real, on random
//! layouts. The oracle is `tests/clients/kubelet_node_ip.go` (NodeAddress without `--node-ip`
//! or with `::`: `net.LookupIP`, `validateNodeIP`, then apimachinery's `chooseHostInterface`
//! reading the namespace's real `/proc/net/route` and `/proc/net/ipv6_route`), built with Go's
//! own resolver and run in each namespace; `explain --netns` reads the same namespace through
//! netlink and must name the same address, or none where the oracle errs.
//!
//! Layouts: `layouts::make_layout`'s (one or two veth pairs, IPv4 subnets of every size, IPv6
//! of every class, default and unreachable routes), plus what kubelet's fallback turns on: a
//! global address on `lo`, a second IPv4 default route (a device route, or a blackhole one,
//! which `/proc/net/route` lists with device `*`), a link set down, and hosts entries for the
//! node name on and off the interfaces (or none). Needs root; only veth pairs whose both ends
//! stay in the namespace, nothing sent. `KUBELET_SEED=<n>` replays a run (the seed is printed),
//! `KUBELET_LAYOUTS=<n>` judges n layouts instead of 200. Each layout has a generator of its
//! own, seeded from the seed and its number.
use std::net::IpAddr;
use std::process::Command;

use anyhow::{Context, Result};
use nodeip_trace_tests::go::{require_go_toolchains, GoBuild};
use nodeip_trace_tests::layouts::{destination_pool, make_layout, run, Netns, Rng};
use nodeip_trace_tests::{require_root, tool};

const DEFAULT_SEED: u64 = 0x6b75_6265_6c65_7400;
const LAYOUTS: usize = 200;
/// Layouts judged at once.
const WORKERS: usize = 4;

/// One layout's scene and both answers.
struct Judged {
    scene: String,
    oracle: String,
    explained: Vec<String>,
    reasoning: String,
}

/// The oracle's answer: `Some(ip)`, or `None` where kubelet finds no address.
fn oracle_answer(out: &str) -> Option<String> {
    let mut lines = out.lines();
    match lines.next()?.strip_prefix("pick ")? {
        "none" => lines
            .next()?
            .strip_prefix("fallback ")
            .filter(|rest| !rest.starts_with("error:"))
            .map(str::to_string),
        ip => Some(ip.to_string()),
    }
}

/// A random scene for kubelet in `ns`: the layout, then the fallback's inputs; returns the
/// commands run (for a failure's text) and the hosts file.
fn make_scene(rng: &mut Rng, ns: &Netns) -> Result<(Vec<String>, String)> {
    let with_ipv6 = rng.chance(70);
    let layout = make_layout(rng, with_ipv6);
    let mut commands = layout.commands.clone();
    let mut ifaces: Vec<String> = commands
        .iter()
        .filter_map(|c| c.strip_prefix("link add "))
        .flat_map(|c| {
            let words: Vec<&str> = c.split_whitespace().collect();
            [words[0].to_string(), words[words.len() - 1].to_string()]
        })
        .collect();
    if rng.chance(25) {
        ifaces.push("c0".into());
        // A link with no address of its own carrying a default route (an unnumbered uplink,
        // RFC 5549): the loopback interface's global address is then kubelet's answer.
        commands.push("link add c0 type veth peer name d0".into());
        for dev in ["c0", "d0"] {
            commands.push(format!("link set {dev} addrgenmode none"));
            commands.push(format!("link set {dev} up"));
        }
        commands.push(format!(
            "route add default dev c0 metric {}",
            rng.below(300)
        ));
        if with_ipv6 && rng.chance(50) {
            commands.push("-6 route add default via fe80::1 dev c0 metric 1".into());
        }
    }
    if rng.chance(35) {
        let h = 1 + rng.below(250);
        commands.push(if rng.chance(60) {
            format!("addr add 192.0.2.{h}/32 dev lo")
        } else {
            format!("addr add 2001:db8:99::{h:x}/128 dev lo")
        });
    }
    if rng.chance(20) {
        let dev = rng.pick(&ifaces);
        commands.push(format!(
            "route add default dev {dev} metric {}",
            100 + rng.below(400)
        ));
    }
    if rng.chance(8) {
        commands.push(format!(
            "route add blackhole default metric {}",
            rng.below(600)
        ));
    }
    if rng.chance(15) {
        let dev = rng.pick(&ifaces);
        commands.push(format!("link set {dev} down"));
    }
    for c in &commands {
        ns.ip(c)?;
    }
    let pool = destination_pool(rng, &layout);
    let mut hosts = String::from("127.0.0.1 localhost\n");
    if !rng.chance(15) {
        for _ in 0..1 + rng.below(4) {
            let a: IpAddr = if rng.chance(50) {
                *rng.pick(&layout.local)
            } else {
                *rng.pick(&pool)
            };
            hosts.push_str(&format!("{a} node\n"));
        }
    }
    ns.write_etc("hosts", &hosts)?;
    Ok((commands, hosts))
}

/// `explain`'s kubelet pick in `ns` and its reasoning.
fn explained(ns: &Netns, prefer6: bool) -> Result<(Vec<String>, String)> {
    let mut cmd = Command::new(tool());
    cmd.args(["explain", "--netns", &ns.name, "--node-name", "node"])
        .args(["--kubelet-resolver", "go", "--format", "json"]);
    if prefer6 {
        cmd.args(["--node-ip", "::"]);
    }
    let out = cmd.output()?;
    // 3: a known failure pattern was found (an answer all the same).
    anyhow::ensure!(
        matches!(out.status.code(), Some(0 | 3)),
        "explain failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let kubelet = json["picks"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["component"] == "kubelet"))
        .context("no kubelet pick in explain's JSON")?;
    let picked = kubelet["picked"]
        .as_array()
        .context("kubelet's pick has no `picked`")?
        .iter()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    let reasoning = kubelet["reasoning"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n    ")
        })
        .unwrap_or_default();
    Ok((picked, reasoning))
}

#[test]
fn explain_s_kubelet_pick_is_kubelet_s_own_on_random_layouts() {
    require_root();
    let seed = match std::env::var("KUBELET_SEED") {
        Ok(s) => u64::from_str_radix(s.trim_start_matches("0x"), 16)
            .or_else(|_| s.parse())
            .expect("KUBELET_SEED: a number"),
        Err(_) => DEFAULT_SEED,
    };
    let layouts: usize = std::env::var("KUBELET_LAYOUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(LAYOUTS);
    eprintln!(
        "kubelet_pick_layouts: seed {seed:#x} (set KUBELET_SEED to replay), {layouts} layouts"
    );
    let newest = require_go_toolchains().pop().unwrap();
    let how = GoBuild {
        cgo: false,
        stripped: true,
        static_musl: false,
    };
    let oracle = newest
        .client("kubelet_node_ip.go", how)
        .expect("building the kubelet oracle");
    // Each layout has a generator of its own (a failing one replays alone), judged by
    // [`WORKERS`] threads at once.
    let judge = |n: usize| -> (Option<Judged>, String) {
        let mut rng = Rng::new(seed.wrapping_add((n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        let ns = Netns::create(format!("nit-kpl-{}-{n}", std::process::id())).unwrap();
        let (commands, hosts) = make_scene(&mut rng, &ns).unwrap();
        let prefer6 = rng.chance(25);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &ns.name])
            .arg(&oracle)
            .env("GODEBUG", "netdns=go");
        if prefer6 {
            cmd.arg("-prefer6");
        }
        let own = run(cmd.arg("node")).unwrap();
        let (picked, reasoning) = explained(&ns, prefer6).unwrap();
        let expected: Vec<String> = oracle_answer(&own).into_iter().collect();
        let wrong = (picked != expected).then(|| Judged {
            scene: format!(
                "layout {n} ({}):\n  ip {}\n  hosts: {}",
                if prefer6 {
                    "--node-ip ::"
                } else {
                    "no --node-ip"
                },
                commands.join("\n  ip "),
                hosts.trim().replace('\n', "; ")
            ),
            oracle: own.clone(),
            explained: picked,
            reasoning,
        });
        (wrong, own)
    };
    let results: Vec<(Option<Judged>, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| {
                let judge = &judge;
                scope.spawn(move || (w..layouts).step_by(WORKERS).map(judge).collect::<Vec<_>>())
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a worker panicked"))
            .collect()
    });
    let own = |pred: &dyn Fn(&str) -> bool| results.iter().filter(|(_, o)| pred(o)).count();
    let fallbacks = own(&|o| o.starts_with("pick none"));
    let errors = own(&|o| o.contains("fallback error:"));
    let loopback =
        own(&|o| o.contains("fallback 192.0.2.") || o.contains("fallback 2001:db8:99::"));
    let wrong: Vec<Judged> = results.into_iter().filter_map(|(w, _)| w).collect();
    eprintln!(
        "kubelet_pick_layouts: {layouts} layouts, {fallbacks} through the default-route fallback ({loopback} to a loopback address, {errors} without an address), {} differ",
        wrong.len()
    );
    let text: Vec<String> = wrong
        .iter()
        .take(5)
        .map(|j| {
            format!(
                "{}\n  kubelet's own: {}\n  explain: {:?}\n    {}",
                j.scene,
                j.oracle.trim().replace('\n', " / "),
                j.explained,
                j.reasoning
            )
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "seed {seed:#x}: explain's kubelet pick differs from kubelet's own in {} of {layouts} layouts; the first:\n{}",
        wrong.len(),
        text.join("\n\n")
    );
    assert!(
        fallbacks > layouts / 10,
        "too few layouts reach the fallback: {fallbacks}"
    );
    assert!(errors > 0, "no layout makes kubelet fail");
    assert!(loopback > 0, "no layout reaches getIPFromLoopbackInterface");
}

#[test]
fn the_oracle_s_answer_reads_its_last_word() {
    assert_eq!(oracle_answer("pick 10.0.0.1\n"), Some("10.0.0.1".into()));
    assert_eq!(
        oracle_answer("pick none\nfallback 10.0.0.2\n"),
        Some("10.0.0.2".into())
    );
    assert_eq!(
        oracle_answer("pick none\nfallback error: unable to select an IP from default routes.\n"),
        None
    );
}
