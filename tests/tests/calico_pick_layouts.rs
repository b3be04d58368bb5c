//! Issue 51: `explain`'s calico pick equals calico's own autodetection, run for real, on random
//! layouts. The oracle is `tests/clients/calico_autodetect.go`, written from calico's source
//! (v3.32.1: `net.Interfaces()` walked in reverse, one unanchored include and one exclude
//! regex, IPv4 addresses in the dump's order, the first global unicast one, `cidr=` networks,
//! `can-reach=`'s UDP connect), built with Go and run in each namespace with a method; `explain
//! --netns --calico-method` reads the same namespace through netlink and must name the same
//! address, or none where calico detects none.
//!
//! Layouts: two to four veth pairs (both ends in the namespace) named as nodes name theirs —
//! eth0, ens3, bond0, br-…, docker0, cali…, veth…, kube-ipvs0, flannel.1, cni0, tunl0, … —
//! links up and down, IPv4 addresses of every kind (private, /32, link-local, secondary, the
//! same address on two interfaces), an address on `lo`, a default route or none. Methods as
//! people write them: first-found, `interface=`/`skip-interface=` lists with spaces, anchors,
//! alternations and a regex that does not compile, `cidr=` lists (one invalid), `can-reach=` a
//! neighbour, a local address, a broadcast address or a remote one. Needs root; nothing sent
//! (a UDP `connect()` sends no packet). `CALICO_SEED=<n>` replays a run (the seed is printed),
//! `CALICO_LAYOUTS=<n>` judges n layouts instead of 200.
use std::net::Ipv4Addr;
use std::process::Command;

use nodeip_trace_tests::go::newest_client;
use nodeip_trace_tests::layouts::{explained_pick, run, Netns, RandomLayouts, Rng};
use nodeip_trace_tests::require_root;

const DEFAULT_SEED: u64 = 0xca11_c0de_0000_0001;
const LAYOUTS: usize = 200;
/// Layouts judged at once.
const WORKERS: usize = 4;

/// Interface names as nodes have them (each used once per layout).
const NAMES: &[&str] = &[
    "eth0",
    "eth1",
    "ens3",
    "enp0s8",
    "bond0",
    "em1",
    "br-3f2a9c",
    "br0",
    "docker0",
    "cali1a2b3c",
    "veth7f3e",
    "kube-ipvs0",
    "flannel.1",
    "cni0",
    "tunl0",
    "vxlan.calico",
    "podman0",
    "virbr0",
    "nodelocaldns",
    "wg0",
    "mylo",
];

/// A layout: the `ip` commands, its interfaces, and its subnets (network, length).
struct Scene {
    commands: Vec<String>,
    names: Vec<String>,
    subnets: Vec<(Ipv4Addr, u8)>,
    locals: Vec<Ipv4Addr>,
}

fn make_scene(rng: &mut Rng) -> Scene {
    let mut pool: Vec<&str> = NAMES.to_vec();
    rng.shuffle(&mut pool);
    let pairs = 2 + rng.below(3);
    let names: Vec<String> = pool[..pairs * 2].iter().map(|n| n.to_string()).collect();
    let mut s = Scene {
        commands: vec!["link set lo up".into()],
        names: names.clone(),
        subnets: Vec::new(),
        locals: Vec::new(),
    };
    for pair in names.chunks(2) {
        s.commands.push(format!(
            "link add {} type veth peer name {}",
            pair[0], pair[1]
        ));
    }
    for name in &names {
        s.commands.push(format!("link set {name} addrgenmode none"));
        s.commands.push(format!("link set {name} up"));
    }
    for name in &names {
        for _ in 0..rng.below(4) {
            let (addr, len) = match rng.below(8) {
                0 => (
                    Ipv4Addr::new(169, 254, rng.below(255) as u8, 1 + rng.below(250) as u8),
                    16,
                ),
                1 => (Ipv4Addr::new(203, 0, 113, 1 + rng.below(250) as u8), 32),
                2 => match s.locals.last() {
                    // Another address in the subnet just used (a secondary), or the same one.
                    Some(a) if rng.chance(30) => (*a, 24),
                    Some(a) => (
                        Ipv4Addr::from(u32::from(*a) & !0xff | (1 + rng.below(250) as u32)),
                        24,
                    ),
                    None => (Ipv4Addr::new(10, 0, 0, 1 + rng.below(250) as u8), 24),
                },
                3 | 4 => (
                    Ipv4Addr::new(
                        10,
                        rng.below(3) as u8,
                        rng.below(3) as u8,
                        1 + rng.below(250) as u8,
                    ),
                    24,
                ),
                5 => (
                    Ipv4Addr::new(192, 168, rng.below(3) as u8, 1 + rng.below(250) as u8),
                    *rng.pick(&[24u8, 16, 28]),
                ),
                6 => (
                    Ipv4Addr::new(172, 16, rng.below(4) as u8, 1 + rng.below(250) as u8),
                    20,
                ),
                _ => (Ipv4Addr::new(10, 244, rng.below(8) as u8, 0), 32),
            };
            s.commands.push(format!("addr add {addr}/{len} dev {name}"));
            s.locals.push(addr);
            if len < 31 {
                let mask = u32::MAX << (32 - len);
                s.subnets
                    .push((Ipv4Addr::from(u32::from(addr) & mask), len));
            }
        }
    }
    if rng.chance(15) {
        let h = 1 + rng.below(250) as u8;
        s.commands.push(format!("addr add 192.0.2.{h}/32 dev lo"));
        s.locals.push(Ipv4Addr::new(192, 0, 2, h));
    }
    if let Some((net, _)) = (!s.subnets.is_empty() && rng.chance(60))
        .then(|| *rng.pick(&s.subnets.clone()))
        .filter(|(_, len)| *len <= 28)
    {
        let gw = Ipv4Addr::from(u32::from(net) + 1 + rng.below(6) as u32);
        // The route may fail (its subnet's address sits on a link set down below, or the
        // gateway is a local address): `ip` says so and the layout goes on without it.
        s.commands.push(format!("route add default via {gw}"));
    }
    for name in &names {
        if rng.chance(12) {
            s.commands.push(format!("link set {name} down"));
        }
    }
    s
}

/// A method as people write it, for `scene`.
fn make_method(rng: &mut Rng, scene: &Scene) -> String {
    let name = |rng: &mut Rng| rng.pick(&scene.names).clone();
    let prefix = |n: &str| {
        n.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
            .to_string()
    };
    match rng.below(12) {
        0 => String::new(),
        1 | 2 => "first-found".into(),
        3 => format!("interface={}", name(rng)),
        4 => format!("interface={}.*", prefix(&name(rng))),
        5 => format!("interface={}, {}", name(rng), name(rng)),
        6 => rng
            .pick(&[
                "interface=^(eth|ens|bond).*",
                "interface=eth0|br-.*",
                "interface=eth[",
                "interface=^e.*,^b.*",
                // Unanchored: also veth…, vxlan.calico, nodelocaldns, mylo.
                "interface=eth.*",
                "interface=cali",
                "skip-interface=lo",
                "skip-interface=eth0, ens3",
            ])
            .to_string(),
        7 => format!("skip-interface={}", name(rng)),
        8 => format!("skip-interface={}.*,{}", prefix(&name(rng)), name(rng)),
        9 => {
            let mut list: Vec<String> = Vec::new();
            for _ in 0..1 + rng.below(2) {
                list.push(match scene.subnets.is_empty() || rng.chance(30) {
                    true => rng
                        .pick(&[
                            "10.0.0.0/8",
                            "192.168.0.0/16",
                            "203.0.113.0/24",
                            "169.254.0.0/16",
                        ])
                        .to_string(),
                    false => {
                        let (net, len) = *rng.pick(&scene.subnets);
                        format!("{net}/{len}")
                    }
                });
            }
            if rng.chance(10) {
                list.push("10.0.0.0/33".into());
            }
            format!(
                "cidr={}",
                list.join(if rng.chance(50) { "," } else { " , " })
            )
        }
        _ => {
            let dest = match rng.below(5) {
                0 if !scene.locals.is_empty() => rng.pick(&scene.locals).to_string(),
                1 | 2 if !scene.subnets.is_empty() => {
                    let (net, _) = *rng.pick(&scene.subnets);
                    Ipv4Addr::from(u32::from(net) + 7).to_string()
                }
                3 if !scene.subnets.is_empty() => {
                    let (net, len) = *rng.pick(&scene.subnets);
                    Ipv4Addr::from(u32::from(net) | !(u32::MAX << (32 - len))).to_string()
                }
                _ => "198.51.100.9".into(),
            };
            format!("can-reach={dest}")
        }
    }
}

/// The oracle's pick (the address, without its prefix length), or none.
fn oracle_pick(out: &str) -> Option<String> {
    let rest = out.trim().strip_prefix("pick ")?;
    Some(rest.split('/').next()?.to_string())
}

#[test]
fn explain_s_calico_pick_is_calico_s_own_on_random_layouts() {
    require_root();
    let run_of = RandomLayouts::from_env(
        "calico_pick_layouts",
        ("CALICO_SEED", DEFAULT_SEED),
        ("CALICO_LAYOUTS", LAYOUTS),
    );
    let (seed, layouts) = (run_of.seed, run_of.count);
    let oracle = newest_client("calico_autodetect.go", false);
    let judge = |n: usize| -> (Option<String>, String, String) {
        let mut rng = run_of.rng(n);
        let ns = Netns::create(format!("nit-cpl-{}-{n}", std::process::id())).unwrap();
        let scene = make_scene(&mut rng);
        let mut failed = Vec::new();
        for c in &scene.commands {
            if let Err(e) = ns.ip(c) {
                failed.push(format!("{e:#}"));
            }
        }
        let method = make_method(&mut rng, &scene);
        let own = run(Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(&oracle)
            .arg(&method))
        .unwrap();
        let method_arg = format!("--calico-method={method}");
        let (picked, reasoning) = explained_pick(&ns, "calico", &[&method_arg]).unwrap();
        let expected: Vec<String> = oracle_pick(&own).into_iter().collect();
        let wrong = (picked != expected).then(|| {
            format!(
                "layout {n}, method {method:?}:\n  ip {}\n  (refused: {})\n  calico's own: {}\n  explain: {picked:?}\n    {reasoning}",
                scene.commands.join("\n  ip "),
                failed.len(),
                own.trim(),
            )
        });
        (wrong, own, method)
    };
    let results = run_of.judge_all(WORKERS, judge);
    let count = |pred: &dyn Fn(&str, &str) -> bool| {
        results.iter().filter(|(_, own, m)| pred(own, m)).count()
    };
    let none = count(&|own, _| own.starts_with("none"));
    let reach = count(&|_, m| m.starts_with("can-reach="));
    let wrong: Vec<&String> = results.iter().filter_map(|(w, _, _)| w.as_ref()).collect();
    eprintln!(
        "calico_pick_layouts: {layouts} layouts, {none} where calico detects nothing, {reach} by can-reach, {} differ",
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "seed {seed:#x}: explain's calico pick differs from calico's own in {} of {layouts} layouts; the first:\n{}",
        wrong.len(),
        wrong.iter().take(4).map(|w| w.as_str()).collect::<Vec<_>>().join("\n\n")
    );
    assert!(
        none > 0 && none < layouts / 2,
        "{none} of {layouts} detect nothing"
    );
}

#[test]
fn the_oracle_s_pick_is_its_address() {
    assert_eq!(
        oracle_pick("pick 10.0.0.5/24 on eth0\n"),
        Some("10.0.0.5".into())
    );
    assert_eq!(oracle_pick("none: no valid host interfaces found\n"), None);
}
