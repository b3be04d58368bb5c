//! `cargo xtask demo`: seed incident 000 live. A scratch network namespace gets a veth whose peer
//! stays in a second scratch namespace (nothing reaches the host), two addresses in one /27 — the
//! alias `eth0:vip` configured first, so it is the kernel's primary and the source of everything
//! in the subnet — and a hosts file listing the node name with the node's own address first, as
//! kubelet's node had. `getent ahostsv4` (real glibc) then resolves the name under
//! `nodeip-trace trace`: the timeline shows glibc putting the alias first, the netlink dump and
//! the per-candidate source lookups it made to decide, the RFC 6724 rule that did it, and the
//! `gai-reordered` diagnosis.
use std::process::Command;

use anyhow::{bail, Context as _};

use crate::{cargo, run, workspace_root};

const NS: &str = "nit-demo";
const PEER_NS: &str = "nit-demo-peer";

struct Namespaces;

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Silently: only namespaces that exist (a fresh machine has none, and `ip` would say
        // "Cannot remove namespace file").
        for ns in [NS, PEER_NS] {
            if std::path::Path::new("/run/netns").join(ns).exists() {
                let _ = Command::new("ip")
                    .args(["netns", "delete", ns])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        let _ = std::fs::remove_dir_all(format!("/etc/netns/{NS}"));
    }
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    run(Command::new("ip").args(args))
}

/// Builds the tool as one line (cargo's own lines only when it has something to say: a warning,
/// or the error). The debug build: a cold release build (fat LTO, one codegen unit) takes
/// minutes longer, and one traced command does not need it; it is also the build `cargo test`
/// and the end-to-end tests use.
fn build() -> anyhow::Result<()> {
    eprint!("demo: cargo build (a minute or two on a cold target dir) … ");
    let _ = std::io::Write::flush(&mut std::io::stderr());
    let t0 = std::time::Instant::now();
    let out = cargo()
        .args(["build", "--quiet", "--package", "nodeip-trace", "--bins"])
        .stdin(std::process::Stdio::null())
        .output()
        .context("starting cargo build")?;
    let took = crate::steps::duration(t0.elapsed());
    let said = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        eprintln!("failed after {took}\n{}", said.trim_end());
        bail!("cargo build failed ({})", out.status);
    }
    eprintln!("{took}");
    if !said.trim().is_empty() {
        eprintln!("{}", said.trim_end());
    }
    Ok(())
}

/// Runs the demo.
pub fn demo() -> anyhow::Result<()> {
    build()?;
    let bin = workspace_root().join("target/debug/nodeip-trace");
    drop(Namespaces); // leftovers of an interrupted run
    let _guard = Namespaces;
    ip(&["netns", "add", NS])?;
    ip(&["netns", "add", PEER_NS])?;
    ip(&[
        "-n", NS, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", PEER_NS,
    ])?;
    ip(&["-n", NS, "link", "set", "lo", "up"])?;
    ip(&["-n", NS, "link", "set", "eth0", "up"])?;
    ip(&[
        "-n",
        NS,
        "addr",
        "add",
        "172.18.45.20/27",
        "dev",
        "eth0",
        "label",
        "eth0:vip",
    ])?;
    ip(&["-n", NS, "addr", "add", "172.18.45.6/27", "dev", "eth0"])?;
    std::fs::create_dir_all(format!("/etc/netns/{NS}"))?;
    std::fs::write(
        format!("/etc/netns/{NS}/hosts"),
        "127.0.0.1 localhost\n172.18.45.6 node-a\n172.18.45.20 node-a\n",
    )?;
    println!("== seed 000: node-a is 172.18.45.6; the alias 172.18.45.20 (eth0:vip) came up first, so the kernel made it the /27's primary; /etc/hosts lists .6 first");
    println!("== nodeip-trace trace -- ip netns exec {NS} getent ahostsv4 node-a\n");
    run(Command::new(&bin).args([
        "trace", "--", "ip", "netns", "exec", NS, "getent", "ahostsv4", "node-a",
    ]))?;
    Ok(())
}
