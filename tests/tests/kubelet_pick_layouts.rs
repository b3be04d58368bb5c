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

use anyhow::Result;
use nodeip_trace_tests::go::newest_client;
use nodeip_trace_tests::layouts::{
    destination_pool, explained_pick, make_layout, run, Netns, RandomLayouts, Rng,
};
use nodeip_trace_tests::require_root;

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
    // The hosts file only, as `explain` reads: a name it lacks is not asked of the host's DNS
    // (from a namespace with a default route into a veth, that waits out the timeouts).
    ns.write_etc("nsswitch.conf", "hosts: files\n")?;
    Ok((commands, hosts))
}

#[test]
fn explain_s_kubelet_pick_is_kubelet_s_own_on_random_layouts() {
    require_root();
    let run_of = RandomLayouts::from_env(
        "kubelet_pick_layouts",
        ("KUBELET_SEED", DEFAULT_SEED),
        ("KUBELET_LAYOUTS", LAYOUTS),
    );
    let (seed, layouts) = (run_of.seed, run_of.count);
    let oracle = newest_client("kubelet_node_ip.go", false);
    // Each layout has a generator of its own (a failing one replays alone), judged by
    // [`WORKERS`] threads at once.
    let judge = |n: usize| -> (Option<Judged>, String) {
        let mut rng = run_of.rng(n);
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
        let mut args = vec!["--node-name", "node", "--kubelet-resolver", "go"];
        if prefer6 {
            args.extend(["--node-ip", "::"]);
        }
        let (picked, reasoning) = explained_pick(&ns, "kubelet", &args).unwrap();
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
    let results = run_of.judge_all(WORKERS, judge);
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
