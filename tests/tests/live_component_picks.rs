//! End to end (issue 51, live picks): flannel's, kube-vip's and kube-proxy's picks said from the
//! dumps a process of that name made during the trace. Each component is played by `ip -4
//! -batch` copied under the component's name (one process, so one comm, making the dumps the
//! component makes: the main table's routes, the links, the addresses; kube-vip then adds its
//! VIP; kube-proxy's old path reads the local table), in a namespace laid out as in the
//! incidents the rules come from: the default-route interface's first address is a DHCP lease
//! with a static alias beside it (k3s#12459), a VIP added to an interface other than the one
//! whose prefix holds it (kube-vip#903), a secondary address the local table's `src` leaves out
//! (k8s#75443).
use nodeip_trace_tests::seeds::in_ns;
use nodeip_trace_tests::{require_root, trace_json, workspace_root, Netns, TraceRun};

/// The namespace: eth0 (10.88.0.6/24 leased for an hour, then the static alias 10.88.0.20/24,
/// the default route's interface) and eth1 (192.168.50.5/24), a veth pair with both ends inside.
fn node() -> Netns {
    let ns = Netns::new("cpicks");
    ns.ip(&["link", "set", "lo", "up"]);
    ns.ip(&[
        "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
    ]);
    ns.ip(&["link", "set", "eth0", "up"]);
    ns.ip(&["link", "set", "eth1", "up"]);
    ns.ip(&[
        "addr",
        "add",
        "10.88.0.6/24",
        "dev",
        "eth0",
        "valid_lft",
        "3600",
        "preferred_lft",
        "3600",
    ]);
    ns.ip(&["addr", "add", "10.88.0.20/24", "dev", "eth0"]);
    ns.ip(&["addr", "add", "192.168.50.5/24", "dev", "eth1"]);
    ns.ip(&["route", "add", "default", "via", "10.88.0.1", "dev", "eth0"]);
    ns
}

/// Runs `ip -4 -batch` named `component` with `commands` in `ns` under the tracer.
fn played(ns: &Netns, component: &str, commands: &str) -> TraceRun {
    let dir = workspace_root().join("target/component-picks");
    std::fs::create_dir_all(&dir).unwrap();
    let program = dir.join(component);
    std::fs::copy("/usr/sbin/ip", &program)
        .or_else(|_| std::fs::copy("/sbin/ip", &program))
        .expect("iproute2's ip");
    let batch = dir.join(format!("{component}.batch"));
    std::fs::write(&batch, commands).unwrap();
    let (program, batch) = (program.display().to_string(), batch.display().to_string());
    let run = trace_json(
        &["--no-route-lookups"],
        &in_ns(ns, &[program.as_str(), "-4", "-batch", batch.as_str()]),
    );
    assert!(run.output.status.success(), "trace failed: {}", run.stderr);
    run
}

/// The summaries of the run's diagnoses with `id`.
fn summaries(run: &TraceRun, id: &str) -> Vec<String> {
    run.of_kind("diagnosis")
        .into_iter()
        .filter(|d| d["id"] == id)
        .map(|d| d["summary"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn flannel_kube_vip_and_kube_proxy_picks_are_said_live() {
    require_root();
    let ns = node();

    // flannel: the default-route interface's permanent address before its DHCP lease.
    let run = played(&ns, "flanneld", "route show\nlink show\naddr show\n");
    let picks = summaries(&run, "node-ip-picked");
    assert_eq!(picks.len(), 1, "{picks:?}\n{}", run.stderr);
    assert!(
        picks[0].contains("takes 10.88.0.20 as its public IP"),
        "{picks:?}"
    );

    // kube-vip: its VIP on eth1 though eth0's prefix holds it.
    let run = played(
        &ns,
        "kube-vip",
        "route show\naddr show\naddr add 10.88.0.100/32 dev eth1\n",
    );
    let picks = summaries(&run, "node-ip-picked");
    assert_eq!(picks.len(), 1, "{picks:?}\n{}", run.stderr);
    assert!(
        picks[0].contains("puts its VIP 10.88.0.100 on eth1, not on eth0"),
        "{picks:?}"
    );
    assert_eq!(
        summaries(&run, "vip-off-subnet-interface").len(),
        1,
        "{}",
        run.stderr
    );

    // kube-proxy's local-table path: the alias is no local route's src.
    let run = played(&ns, "kube-proxy", "route show table local\n");
    let picks = summaries(&run, "node-ip-picked");
    assert_eq!(picks.len(), 1, "{picks:?}\n{}", run.stderr);
    assert!(
        picks[0].contains("10.88.0.6") && picks[0].contains("192.168.50.5"),
        "{picks:?}"
    );
    let taken = picks[0]
        .split_once('[')
        .unwrap()
        .1
        .split_once(']')
        .unwrap()
        .0;
    assert!(!taken.contains("10.88.0.20"), "{picks:?}");
    let evidence: Vec<String> = run
        .of_kind("diagnosis")
        .into_iter()
        .filter(|d| d["id"] == "node-ip-picked")
        .flat_map(|d| d["evidence"].as_array().unwrap().clone())
        .map(|e| e.as_str().unwrap().to_string())
        .collect();
    assert!(
        evidence.iter().any(|e| e.contains("10.88.0.20")),
        "{evidence:#?}"
    );
}
