//! Support for the end-to-end scenarios: scratch network namespaces that are always removed
//! (even when a test panics), and running the `nodeip-trace` binary and reading its JSON lines.
//!
//! Every namespace a test makes is private: veth pairs have both ends in namespaces the test
//! created, so no packet can reach the host or anything beyond it.
pub mod golden;
pub mod malformed;
pub mod tshark;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A network namespace (and its `/etc/netns/NAME` directory), deleted on drop.
pub struct Netns {
    /// The namespace name.
    pub name: String,
}

/// Runs `ip ARGS`, panicking with the command and its stderr when it fails.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("running ip (install iproute2)");
    assert!(
        out.status.success(),
        "ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// Creates `nit-<tag>-<pid>` with `lo` up.
    pub fn new(tag: &str) -> Self {
        let name = format!("nit-{tag}-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "delete", &name]).status();
        ip(&["netns", "add", &name]);
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    /// Adds a veth `dev` whose peer lives in `peer` (another namespace of the test), brought up.
    pub fn veth_to(&self, dev: &str, peer: &Netns, peer_dev: &str) {
        ip(&[
            "-n", &self.name, "link", "add", dev, "type", "veth", "peer", "name", peer_dev,
            "netns", &peer.name,
        ]);
        ip(&["-n", &self.name, "link", "set", dev, "up"]);
        ip(&["-n", &peer.name, "link", "set", peer_dev, "up"]);
    }

    /// `ip -n NAME ARGS…`
    pub fn ip(&self, args: &[&str]) {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full);
    }

    /// Writes `/etc/netns/NAME/<file>` (bind-mounted over /etc/<file> by `ip netns exec`).
    pub fn etc_file(&self, file: &str, contents: &str) {
        let dir = format!("/etc/netns/{}", self.name);
        std::fs::create_dir_all(&dir).expect("creating /etc/netns dir");
        std::fs::write(format!("{dir}/{file}"), contents).expect("writing netns etc file");
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .status();
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{}", self.name));
    }
}

/// The nodeip-trace binary: `$NODEIP_TRACE_BIN`, else the workspace's debug build.
pub fn tool() -> PathBuf {
    if let Some(p) = std::env::var_os("NODEIP_TRACE_BIN") {
        return p.into();
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/nodeip-trace");
    assert!(
        p.exists(),
        "{} missing: run `cargo build -p nodeip-trace` or `cargo xtask test`",
        p.display()
    );
    p
}

/// Fails loudly unless running as root: these tests need eBPF and namespaces, and CI has both.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "end-to-end tests need root (eBPF, network namespaces); CI runs them as root"
    );
}

/// Output of a `trace --format json -- COMMAND` run.
pub struct TraceRun {
    /// Every JSON line on stdout.
    pub events: Vec<Value>,
    /// stderr: the tool's messages and COMMAND's stdout (moved there to keep stdout JSON).
    pub stderr: String,
    /// The process output.
    pub output: Output,
}

impl TraceRun {
    /// Events of one kind.
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["kind"] == kind).collect()
    }
}

/// Runs `nodeip-trace trace --format json EXTRA… -- COMMAND…`.
pub fn trace_json(extra: &[&str], command: &[&str]) -> TraceRun {
    let output = Command::new(tool())
        .args(["trace", "--format", "json"])
        .args(extra)
        .arg("--")
        .args(command)
        .output()
        .expect("running nodeip-trace");
    TraceRun {
        events: tshark::json_lines(&output.stdout),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        output,
    }
}

/// The workspace root (where `tests/fixtures`, `tests/golden` and `tests/malformed` live).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the workspace")
        .to_path_buf()
}

/// Runs `nodeip-trace analyze --format json CAPTURE`: the process output and its JSON lines.
pub fn analyze_json(capture: &Path) -> (Output, Vec<Value>) {
    let output = Command::new(tool())
        .args(["analyze", "--format", "json"])
        .arg(capture)
        .output()
        .expect("running nodeip-trace analyze");
    let events = tshark::json_lines(&output.stdout);
    (output, events)
}
