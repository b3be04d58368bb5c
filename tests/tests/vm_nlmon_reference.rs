//! VM lane (issue 5): nlmon as the reference for our capture. For one workload in a namespace
//! the test creates, `tcpdump -i nlmon0` (the kernel's own netlink tap) and our `--pcap` must hold
//! the same netlink frames, byte for byte and in order (timestamps aside), except two classes
//! that one side cannot see, each named and checked:
//! - **notifications to a listener we do not trace**: an `ip monitor address` started outside
//!   the traced command is sent RTM_NEWADDR when the workload adds an address; nlmon sees the
//!   delivery, our capture (of the traced command's own syscalls) does not;
//! - **the tracer's own lookups**: to name interfaces, the tracer dumps the links of a traced
//!   process's namespace; nlmon sees that conversation (every message carries the tracer's
//!   `OWN_REQUEST_SEQ`), our capture leaves the tracer out by design;
//! - **acknowledgements nobody read**: libnl (ipvsadm) asks for an ACK, takes the reply and
//!   closes the socket; the ACK was queued (nlmon sees it), never read (no syscall to capture);
//! - **our synthetic family announcements**: the nlctrl `CTRL_CMD_NEWFAMILY` frames our pcap
//!   starts with (so Wireshark can name generic-netlink families); nlmon has no such frames.
//!
//! The comparison runs once per `--hooks` mode the kernel has: `tracepoint` (the sock
//! tracepoints on 6.3+, else the syscall tracepoints), and the socket layer with fentry (5.17+:
//! before, `--hooks fentry` captures at the tracepoints) and with kprobes.
//!
//! Where the kernel has no nlmon (this dev VM), the test says so and returns;
//! `cargo xtask vm-test` runs it on Debian's 6.1 kernel. With `NODEIP_VM_ARTIFACTS` set (the VM
//! lane sets it), both captures are kept there and come back to the host.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use nodeip_trace::host::kernel_dump::OWN_REQUEST_SEQ;
use nodeip_trace::source::capture::{CaptureReader, CapturedFrame};
use nodeip_trace_tests::{
    doctor_report, kernel_has_ipvs, kernel_hook_modes, require_root, tool, Netns, ScratchDir,
};

/// `(protocol, netlink bytes)` of every frame in a capture.
fn frames(path: &str) -> Vec<(u16, Vec<u8>)> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("opening {path}: {e}"));
    let mut reader =
        CaptureReader::new(BufReader::new(file)).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let mut out = Vec::new();
    let mut frame = CapturedFrame::default();
    while reader
        .read_frame(&mut frame)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
    {
        out.push((frame.frame.protocol, frame.frame.bytes.clone()));
    }
    out
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Why nlmon has a frame our capture cannot have, or `None` when it must be in ours too.
fn nlmon_only(protocol: u16, bytes: &[u8]) -> Option<&'static str> {
    if bytes.len() < 16 {
        return None;
    }
    if u32_at(bytes, 8) == OWN_REQUEST_SEQ {
        return Some("the tracer's own lookup");
    }
    if is_address_notification(protocol, bytes) {
        return Some("notification to the untraced listener");
    }
    if u16_at(bytes, 4) == 2 && bytes.len() >= 20 && u32_at(bytes, 16) == 0 {
        return Some("acknowledgement nobody read");
    }
    None
}

/// An address notification: RTM_NEWADDR/RTM_DELADDR that is not part of a dump (no NLM_F_MULTI).
fn is_address_notification(protocol: u16, bytes: &[u8]) -> bool {
    protocol == 0
        && bytes.len() >= 16
        && matches!(u16_at(bytes, 4), 20 | 21)
        && u16_at(bytes, 6) & 2 == 0
}

/// One of our synthetic nlctrl NEWFAMILY frames (type 0x10, genl cmd 1, seq 0, port 0).
fn is_synthetic_family(protocol: u16, bytes: &[u8]) -> bool {
    protocol == 16
        && bytes.len() >= 20
        && u16_at(bytes, 4) == 0x10
        && bytes[16] == 1
        && bytes[8..16].iter().all(|&b| b == 0)
}

/// Whether this kernel can make an nlmon device.
fn kernel_has_nlmon(ns: &Netns) -> bool {
    Command::new("ip")
        .args(["-n", &ns.name, "link", "add", "nlmon0", "type", "nlmon"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Kills a helper process on drop, even when the test fails.
struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn our_pcap_and_nlmon_hold_the_same_frames() {
    require_root();
    let ns = Netns::new("nlmonref");
    if !kernel_has_nlmon(&ns) {
        nodeip_trace_tests::skip_or_fail(
            "this kernel cannot make an nlmon device (no nlmon module); \
             `cargo xtask vm-test` runs this test on one that can",
        );
        return;
    }
    let peer = Netns::new("nlmonrefp");
    ns.veth_to("eth0", &peer, "eth0");
    ns.ip(&["link", "set", "nlmon0", "up"]);
    ns.ip(&["addr", "add", "192.0.2.10/24", "dev", "eth0"]);
    // A listener we do not trace, subscribed before the captures start (its own start-up
    // dumps stay out of them).
    let _monitor = Helper(
        Command::new("ip")
            .args(["-n", &ns.name, "monitor", "address"])
            .stdout(Stdio::null())
            .spawn()
            .expect("starting ip monitor"),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Every capture path this kernel has: syscall tracepoints, and the socket layer with
    // fentry and with kprobes where present.
    let mut modes = vec!["tracepoint"];
    modes.extend(kernel_hook_modes());
    for (n, mode) in modes.into_iter().enumerate() {
        compare_with_nlmon(&ns, mode, n as u8);
    }
}

/// How `--hooks mode` captures netlink here, from doctor's hook list: at the socket layer when
/// that mode can probe the capture functions it needs (kprobes all four; fentry only
/// `netlink_unicast` and the `skb_recv_datagram` fexit, which needs `bpf_get_func_ret`, 5.17+),
/// else at the sock tracepoints (6.3+) or the syscall tracepoints.
fn expected_capture(doctor: &serde_json::Value, mode: &str) -> String {
    let available = |m: &str, target: &str| {
        doctor["hooks"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| h["mode"] == m && h["target"] == target && h["available"] == true)
    };
    let socket_layer: &[&str] = if mode == "fentry" {
        &["netlink_unicast", "skb_recv_datagram"]
    } else {
        &[
            "netlink_sendmsg",
            "netlink_recvmsg",
            "netlink_unicast",
            "skb_recv_datagram",
        ]
    };
    if mode != "tracepoint" && socket_layer.iter().all(|f| available(mode, f)) {
        format!("socket layer ({mode})")
    } else if available("tracepoint", "sock:sock_send_length") {
        "sock tracepoints".into()
    } else {
        "syscall tracepoints".into()
    }
}

/// One traced workload with `--hooks mode`, captured by us and by nlmon at once.
fn compare_with_nlmon(ns: &Netns, mode: &str, n: u8) {
    let scratch = ScratchDir::new(&format!("nlmonref{n}"));
    let ours = scratch.file("ours.pcap");
    let reference = scratch.file("nlmon.pcap");
    let exec = ["ip", "netns", "exec", ns.name.as_str()];

    let mut tcpdump = Command::new(exec[0]);
    tcpdump
        .args(&exec[1..])
        .args(["tcpdump", "-U", "-i", "nlmon0", "-w", &reference])
        .stderr(Stdio::piped());
    let mut tcpdump = Helper(tcpdump.spawn().expect("starting tcpdump"));
    let mut line = String::new();
    BufReader::new(tcpdump.0.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on nlmon0"), "tcpdump: {line}");

    let mut script = format!(
        "ip route get 192.0.2.30 >/dev/null \
         && ip addr show >/dev/null \
         && ip link show dev eth0 >/dev/null \
         && ip addr add 192.0.2.2{n}/24 dev eth0 \
         && printf 'route get 192.0.2.40\\nroute get 192.0.2.41\\nroute get 127.0.0.1\\n' | ip -batch - >/dev/null",
    );
    if kernel_has_ipvs() {
        script.push_str(&format!(
            " && ipvsadm -A -t 192.0.2.10:3009{n} -s rr \
                 && ipvsadm -a -t 192.0.2.10:3009{n} -r 10.244.1.5:8080 -m \
                 && ipvsadm -L -n >/dev/null"
        ));
    }
    let mut command = exec.to_vec();
    command.extend(["sh", "-c", &script]);
    let out = Command::new(tool())
        .args([
            "trace", "--hooks", mode, "--format", "json", "--pcap", &ours, "--",
        ])
        .args(&command)
        .output()
        .expect("running nodeip-trace");
    assert!(
        out.status.success(),
        "{mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|&b| b == b'\n').next().unwrap_or_default())
            .expect("the recording header");
    let capture = header["netlink_capture"].as_str().unwrap_or_default();
    let expected = expected_capture(&doctor_report(), mode);
    assert!(
        capture.starts_with(&expected),
        "expected {expected}: {header}"
    );
    // Let tcpdump write the last frames (-U: per packet), then stop it.
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(tcpdump.0.id() as i32, libc::SIGINT) };
    let _ = tcpdump.0.wait();

    if let Some(dir) = std::env::var_os("NODEIP_VM_ARTIFACTS") {
        std::fs::create_dir_all(&dir).unwrap();
        for (path, name) in [(&ours, "ours"), (&reference, "nlmon")] {
            std::fs::copy(
                path,
                std::path::Path::new(&dir).join(format!("{name}-{mode}.pcap")),
            )
            .unwrap();
        }
    }
    let ours = frames(&ours);
    let reference = frames(&reference);
    let (synthetic, ours): (Vec<_>, Vec<_>) = ours
        .into_iter()
        .partition(|(p, b)| is_synthetic_family(*p, b));
    assert!(
        !synthetic.is_empty(),
        "our pcap announces the kernel's families"
    );
    let show = |frames: &[(u16, Vec<u8>)]| {
        frames
            .iter()
            .enumerate()
            .map(|(i, (p, b))| {
                format!(
                    "  {i:3} proto {p:2} len {:5} type {:#06x} flags {:#06x} seq {:#x}",
                    b.len(),
                    u16_at(b, 4),
                    u16_at(b, 6),
                    u32_at(b, 8)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Walk nlmon's frames in order: each is our next frame, or one of the named classes.
    let mut next = 0;
    let mut only_nlmon: std::collections::BTreeMap<&str, usize> = Default::default();
    for (i, (protocol, bytes)) in reference.iter().enumerate() {
        if ours.get(next) == Some(&(*protocol, bytes.clone())) {
            next += 1;
            continue;
        }
        let why = nlmon_only(*protocol, bytes).unwrap_or_else(|| {
            panic!(
                "{mode}: nlmon frame {i} is neither our frame {next} nor of a named class\nours ({}):\n{}\nnlmon ({}):\n{}",
                ours.len(),
                show(&ours),
                reference.len(),
                show(&reference)
            )
        });
        *only_nlmon.entry(why).or_default() += 1;
    }
    assert_eq!(
        next,
        ours.len(),
        "{mode}: our frames from {next} on are not in nlmon's capture\nours:\n{}\nnlmon:\n{}",
        show(&ours),
        show(&reference)
    );
    // The workload's own address (IPv6 DAD on eth0 may add link-local updates).
    let added = [192u8, 0, 2, 20 + n];
    assert!(
        reference.iter().any(|(p, b)| is_address_notification(*p, b)
            && b[16] == 2
            && b.windows(4).any(|w| w == added)),
        "{mode}: nlmon sees the RTM_NEWADDR of 192.0.2.2{n} sent to the untraced listener"
    );
    println!(
        "{mode}: {} frames equal byte for byte and in order; nlmon only: {only_nlmon:?}; ours only: {} synthetic family frame(s)",
        ours.len(),
        synthetic.len()
    );
}
