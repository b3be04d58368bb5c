//! Random address layouts in network namespaces, shared by the resolver-order tests (each
//! resolver's real output is the judge of our replay of its sort): a seedable generator, the
//! namespace guard (removed with its `/etc/netns` directory even when a test fails), layouts of
//! veth pairs whose both ends stay in the namespace, the addresses names may resolve to, and the
//! source the kernel gives a UDP `connect()` to each.
use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// xorshift64*: small, seedable, good enough to pick layouts.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (0 is taken as 1).
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Shuffles `items` in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// Runs `cmd`; its stdout, or an error with its stderr.
pub fn run(cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8(out.stdout)?)
}

/// A network namespace and its `/etc/netns` directory, removed on drop.
pub struct Netns {
    /// Its name.
    pub name: String,
    /// Its `/etc/netns/<name>` directory.
    pub etc: PathBuf,
}

impl Netns {
    /// Creates namespace `name` and its `/etc/netns/<name>` directory.
    pub fn create(name: String) -> Result<Self> {
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let etc = Path::new("/etc/netns").join(&name);
        let ns = Netns { name, etc };
        std::fs::create_dir_all(&ns.etc)
            .with_context(|| format!("creating {}", ns.etc.display()))?;
        Ok(ns)
    }

    /// `ip -n <ns> <args>`.
    pub fn ip(&self, args: &str) -> Result<String> {
        run(Command::new("ip")
            .args(["-n", &self.name])
            .args(args.split_whitespace()))
    }

    /// Writes `/etc/netns/<name>/<file>` (seen as `/etc/<file>` under `ip netns exec`).
    pub fn write_etc(&self, file: &str, text: &str) -> Result<()> {
        std::fs::write(self.etc.join(file), text)
            .with_context(|| format!("writing {file} for {}", self.name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = run(Command::new("ip").args(["netns", "del", &self.name])) {
            eprintln!("cleanup: {e:#}");
        }
        if let Err(e) = std::fs::remove_dir_all(&self.etc) {
            eprintln!("cleanup: removing {}: {e}", self.etc.display());
        }
    }
}

/// A random address layout: the `ip` commands that build it and what they add.
#[derive(Default)]
pub struct Layout {
    /// The `ip` commands that build it.
    pub commands: Vec<String>,
    /// The local addresses it adds (and the loopback ones).
    pub local: Vec<IpAddr>,
    /// IPv4 subnets with room for neighbours: (network, prefix length, interface).
    subnets_v4: Vec<(Ipv4Addr, u8, String)>,
}

impl Layout {
    /// Adds an `ip` command (run as `ip -n NS <command>`).
    pub fn add(&mut self, command: String) {
        self.commands.push(command);
    }
}

/// The IPv4 netmask of prefix length `len`.
pub fn v4_mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

/// A random layout: one or two veth pairs (both ends in the namespace), IPv4 subnets of every
/// size, IPv6 addresses of every class when `with_ipv6`, default and unreachable routes.
pub fn make_layout(rng: &mut Rng, with_ipv6: bool) -> Layout {
    let mut l = Layout::default();
    let pairs = 1 + rng.below(2);
    let mut ifaces = Vec::new();
    for p in 0..pairs {
        let (a, b) = (format!("a{p}"), format!("b{p}"));
        l.add(format!("link add {a} type veth peer name {b}"));
        for i in [&a, &b] {
            // No automatic link-local address: no DAD races; the layout adds its own.
            l.add(format!("link set {i} addrgenmode none"));
            l.add(format!("link set {i} up"));
        }
        ifaces.push(a);
        ifaces.push(b);
    }
    l.add("link set lo up".to_string());
    l.local.push(IpAddr::V4(Ipv4Addr::LOCALHOST));
    l.local.push(IpAddr::V6(Ipv6Addr::LOCALHOST));

    let mut used: HashSet<IpAddr> = l.local.iter().copied().collect();
    // IPv4: at least one subnet, so AI_ADDRCONFIG never narrows to IPv6 only.
    for _ in 0..1 + rng.below(3) {
        let len = *rng.pick(&[8u8, 16, 20, 24, 24, 26, 27, 27, 28, 29, 30, 32]);
        let base = match rng.below(4) {
            0 => Ipv4Addr::new(172, 18, 45, rng.below(256) as u8),
            1 => Ipv4Addr::new(
                10,
                rng.below(3) as u8,
                rng.below(4) as u8,
                rng.below(256) as u8,
            ),
            2 => Ipv4Addr::new(192, 168, rng.below(3) as u8, rng.below(256) as u8),
            _ => Ipv4Addr::new(
                172,
                16 + rng.below(2) as u8,
                rng.below(256) as u8,
                rng.below(256) as u8,
            ),
        };
        let iface = rng.pick(&ifaces).clone();
        let network = u32::from(base) & v4_mask(len);
        let hosts = if len >= 31 {
            1
        } else {
            (1u64 << (32 - len)) - 2
        };
        let count = if len == 32 { 1 } else { 1 + rng.below(3) };
        for _ in 0..count {
            let addr = if len == 32 {
                base
            } else {
                Ipv4Addr::from(network + 1 + (rng.next_u64() % hosts) as u32)
            };
            if !used.insert(IpAddr::V4(addr)) {
                continue;
            }
            let deprecated = if rng.chance(10) {
                " preferred_lft 0"
            } else {
                ""
            };
            l.add(format!("addr add {addr}/{len} dev {iface}{deprecated}"));
            l.local.push(IpAddr::V4(addr));
        }
        if len <= 30 {
            l.subnets_v4.push((Ipv4Addr::from(network), len, iface));
        }
    }

    if with_ipv6 {
        for _ in 0..1 + rng.below(4) {
            let r = rng.below(3) as u16;
            let h = 1 + rng.below(0x30) as u16;
            let (addr, len) = match rng.below(8) {
                0 | 1 => (Ipv6Addr::new(0x2001, 0xdb8, r, 0, 0, 0, 0, h), 64),
                2 => (
                    Ipv6Addr::new(0x2001, 0xdb8, r, 1, 0, 0, 0, h),
                    *rng.pick(&[48u8, 128]),
                ),
                3 => (Ipv6Addr::new(0xfd00, r, 0, 0, 0, 0, 0, h), 64),
                4 => (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0x10 + h), 64),
                5 => (Ipv6Addr::new(0xfec0, 0, 0, r, 0, 0, 0, h), 64),
                6 => (Ipv6Addr::new(0x2002, 0xc000, 0x0204, r, 0, 0, 0, h), 48),
                _ => (Ipv6Addr::new(0x2001, 0, r, 0, 0, 0, 0, h), 64),
            };
            if !used.insert(IpAddr::V6(addr)) {
                continue;
            }
            let iface = rng.pick(&ifaces).clone();
            let mut extra = String::new();
            if rng.chance(15) {
                extra.push_str(" preferred_lft 0");
            }
            if rng.chance(10) {
                extra.push_str(" home");
            }
            l.add(format!("addr add {addr}/{len} dev {iface} nodad{extra}"));
            l.local.push(IpAddr::V6(addr));
        }
        if rng.chance(50) {
            let iface = rng.pick(&ifaces).clone();
            // fe80::1 is never a local address here (local link-locals start at fe80::11).
            l.add(format!("-6 route add default via fe80::1 dev {iface}"));
        }
        if rng.chance(30) {
            l.add("-6 route add prohibit 2001:db8:dead::/48".to_string());
        }
    }

    if !l.subnets_v4.is_empty() && rng.chance(50) {
        let (network, len, iface) = rng.pick(&l.subnets_v4.clone()).clone();
        let hosts = (1u64 << (32 - len)) - 2;
        let gw = Ipv4Addr::from(u32::from(network) + 1 + (rng.next_u64() % hosts) as u32);
        if !used.contains(&IpAddr::V4(gw)) {
            l.add(format!("route add default via {gw} dev {iface}"));
        }
    }
    if rng.chance(30) {
        l.add("route add unreachable 198.51.100.0/24".to_string());
    }
    l
}

/// Addresses names may resolve to: local ones, neighbours, broadcast and network addresses of
/// local subnets, remote ones of every class glibc's tables tell apart.
pub fn destination_pool(rng: &mut Rng, layout: &Layout) -> Vec<IpAddr> {
    let mut pool: Vec<IpAddr> = layout.local.clone();
    for (network, len, _) in &layout.subnets_v4 {
        let n = u32::from(*network);
        let hosts = (1u64 << (32 - len)) - 2;
        for _ in 0..2 {
            pool.push(IpAddr::V4(Ipv4Addr::from(
                n + 1 + (rng.next_u64() % hosts) as u32,
            )));
        }
        if rng.chance(30) {
            pool.push(IpAddr::V4(Ipv4Addr::from(n | !v4_mask(*len))));
        }
        if rng.chance(15) {
            pool.push(IpAddr::V4(*network));
        }
    }
    let b = |rng: &mut Rng, n: usize| rng.below(n) as u8;
    let w = |rng: &mut Rng, n: usize| rng.below(n) as u16;
    pool.extend(
        [
            Ipv4Addr::new(203, 0, 113, b(rng, 255)),
            Ipv4Addr::new(198, 51, 100, b(rng, 255)),
            Ipv4Addr::new(10, b(rng, 3), b(rng, 4), b(rng, 255)),
            Ipv4Addr::new(172, 18, 45, b(rng, 255)),
            Ipv4Addr::new(192, 168, b(rng, 3), b(rng, 255)),
            Ipv4Addr::new(169, 254, b(rng, 255), 1 + b(rng, 254)),
            Ipv4Addr::new(127, 0, 0, 2 + b(rng, 50)),
        ]
        .map(IpAddr::V4),
    );
    // IPv6 remotes: global (near and far), 6to4, Teredo, ULA, site-local, link-local.
    let prefixes: [[u16; 4]; 8] = [
        [0x2001, 0xdb8, w(rng, 3), 0],
        [0x2001, 0xdb8, w(rng, 3), 1],
        [0x2a00, 0x1450, 0, 0],
        [0x2002, 0xc000, 0x0204, 0],
        [0x2001, 0, w(rng, 3), 0],
        [0xfd00, w(rng, 3), 0, 0],
        [0xfec0, 0, 0, w(rng, 3)],
        [0xfe80, 0, 0, 0],
    ];
    for [p0, p1, p2, p3] in prefixes {
        let host = 0x100 + w(rng, 0x100);
        pool.push(IpAddr::V6(Ipv6Addr::new(p0, p1, p2, p3, 0, 0, 0, host)));
    }
    pool.push(IpAddr::V6(Ipv6Addr::new(
        0x2001, 0xdb8, 0xdead, 0, 0, 0, 0, 1,
    )));
    let mapped = Ipv4Addr::new(10, b(rng, 3), b(rng, 4), 1 + b(rng, 254));
    pool.push(IpAddr::V6(mapped.to_ipv6_mapped()));
    let mut seen = HashSet::new();
    pool.retain(|a| seen.insert(*a));
    pool
}

/// The source `connect()` would get for `dest`, or `None` when it fails.
pub fn route_source(ns: &Netns, dest: IpAddr) -> Result<Option<IpAddr>> {
    route_source_with(ns, dest, false)
}

/// [`route_source`] for a socket with `SO_BROADCAST` set when `so_broadcast` (Go sets it on
/// every IPv4 UDP socket, so its `connect()` to a broadcast address succeeds).
pub fn route_source_with(ns: &Netns, dest: IpAddr, so_broadcast: bool) -> Result<Option<IpAddr>> {
    if let IpAddr::V6(v6) = dest {
        if let Some(v4) = v6.to_ipv4_mapped() {
            // A dual-stack IPv6 socket connects to ::ffff:a.b.c.d through IPv4 routing.
            let src = route_source_with(ns, IpAddr::V4(v4), so_broadcast)?;
            return Ok(src.map(|s| match s {
                IpAddr::V4(s4) => IpAddr::V6(s4.to_ipv6_mapped()),
                other => other,
            }));
        }
        if v6.segments()[0] & 0xffc0 == 0xfe80 {
            // ip6_datagram_connect: a link-local destination needs a scope id (EINVAL).
            return Ok(None);
        }
    }
    let out = Command::new("ip")
        .args(["-n", &ns.name, "-j", "route", "get", &dest.to_string()])
        .output()?;
    if !out.status.success() {
        return Ok(None);
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let route = &json[0];
    if route["type"].as_str() == Some("broadcast") && !so_broadcast {
        // UDP connect to a broadcast address without SO_BROADCAST: EACCES.
        return Ok(None);
    }
    Ok(route["prefsrc"].as_str().map(str::parse).transpose()?)
}

/// A run over random layouts: its seed and how many layouts, from the environment.
pub struct RandomLayouts {
    /// The run's seed (`SEED_VAR`, hexadecimal with or without `0x`, else the default).
    pub seed: u64,
    /// Layouts judged (`COUNT_VAR`, else the default).
    pub count: usize,
}

impl RandomLayouts {
    /// Reads `seed_var` and `count_var` (defaults `seed`, `count`) and prints the seed, so a
    /// failing run can be replayed.
    pub fn from_env(
        label: &str,
        (seed_var, seed): (&str, u64),
        (count_var, count): (&str, usize),
    ) -> Self {
        let seed = match std::env::var(seed_var) {
            Ok(s) => u64::from_str_radix(s.trim_start_matches("0x"), 16)
                .or_else(|_| s.parse())
                .unwrap_or_else(|_| panic!("{seed_var}: a number, not {s:?}")),
            Err(_) => seed,
        };
        let count = std::env::var(count_var)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(count);
        eprintln!("{label}: seed {seed:#x} (set {seed_var} to replay), {count} layouts");
        RandomLayouts { seed, count }
    }

    /// Layout `n`'s own generator (a failing layout replays alone).
    pub fn rng(&self, n: usize) -> Rng {
        Rng::new(
            self.seed
                .wrapping_add((n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        )
    }

    /// `judge` of every layout, `workers` at once, in no particular order.
    pub fn judge_all<T: Send>(&self, workers: usize, judge: impl Fn(usize) -> T + Sync) -> Vec<T> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|w| {
                    let judge = &judge;
                    scope.spawn(move || {
                        (w..self.count)
                            .step_by(workers)
                            .map(judge)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a layout's judge panicked"))
                .collect()
        })
    }
}

/// What `explain --netns NS ARGS --format json` says `component` picks: the addresses, and its
/// reasoning (one line each, indented for a failure's text).
pub fn explained_pick(ns: &Netns, component: &str, args: &[&str]) -> Result<(Vec<String>, String)> {
    let out = Command::new(crate::tool())
        .args(["explain", "--netns", &ns.name, "--format", "json"])
        .args(args)
        .output()?;
    // 3: a known failure pattern was found (an answer all the same).
    anyhow::ensure!(
        matches!(out.status.code(), Some(0 | 3)),
        "explain failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let pick = json["picks"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["component"] == component))
        .with_context(|| format!("no {component} pick in explain's JSON"))?;
    let picked = pick["picked"]
        .as_array()
        .with_context(|| format!("{component}'s pick has no `picked`"))?
        .iter()
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    let reasoning = pick["reasoning"]
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
