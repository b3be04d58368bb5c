//! Issue 9 (signals and failures during `trace`): SIGINT, SIGTERM and SIGHUP each stop a trace
//! cleanly — exit 0, the JSON recording complete (every line JSON, the summary last, naming the
//! signal), the pcap readable to its end by `analyze` — and a traced command that crashes ends
//! the trace the same way, its signal named; afterwards every program, link and map the tracer
//! held is gone from the kernel (`bpftool`) and tracefs has no probe event of it. A full disk
//! closes that output and keeps it valid.
use std::process::Command;

use nodeip_trace_tests::{json_lines, require_root, tool, ProbeInventory, ScratchDir};

/// Waits for the tracer's ready file (60 s at most).
fn wait_ready(ready: &str, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::path::Path::new(ready).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: tracer not ready"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `analyze` reads the whole pcap without an error and finds events in it.
fn assert_analyzable(pcap: &str, what: &str) {
    let analyzed = Command::new(tool())
        .args(["analyze", "--format", "json", pcap])
        .output()
        .unwrap();
    assert!(
        analyzed.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&analyzed.stderr)
    );
    assert!(!json_lines(&analyzed.stdout).is_empty(), "{what}");
}

#[test]
fn each_stop_signal_leaves_complete_outputs() {
    require_root();
    let scratch = ScratchDir::new("signals");
    for (signal, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let (rec, pcap, ready) = (
            scratch.file(&format!("{name}.jsonl")),
            scratch.file(&format!("{name}.pcap")),
            scratch.file(&format!("{name}.ready")),
        );
        let child = Command::new(tool())
            .args([
                "trace", "--comm", "getent", "--format", "json", "-o", &rec, "--pcap", &pcap,
            ])
            .args(["--ready-file", &ready])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_ready(&ready, name);
        let held = ProbeInventory::of_process(child.id());
        for _ in 0..3 {
            let ok = Command::new("getent")
                .args(["ahostsv4", "localhost"])
                .output()
                .unwrap();
            assert!(ok.status.success());
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        // SAFETY: kill with our child's pid.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        assert!(stderr.contains(&format!("stopped by {name}")), "{stderr}");
        let events = json_lines(std::fs::read(&rec).unwrap().as_slice());
        assert_eq!(events[0]["kind"], "header", "{name}");
        let summary = events.last().unwrap();
        assert_eq!(summary["kind"], "summary", "{name}");
        assert_eq!(summary["stopped_by"], name);
        let calls = events.iter().filter(|e| e["kind"] == "getaddrinfo").count();
        assert_eq!(calls, 3, "{name}: {stderr}");
        assert_analyzable(&pcap, name);
        held.assert_released(name);
    }
}

/// The traced COMMAND crashes (SIGSEGV) after a lookup and a route get: the trace ends as when
/// it exits — recording complete with the summary naming the signal, pcap analysable, exit status
/// 139 as a shell gives — and the tracer leaves nothing loaded.
#[test]
fn a_crashing_command_ends_the_trace_with_complete_outputs() {
    require_root();
    let scratch = ScratchDir::new("crash");
    let (rec, pcap, ready) = (
        scratch.file("crash.jsonl"),
        scratch.file("crash.pcap"),
        scratch.file("crash.ready"),
    );
    let child = Command::new(tool())
        .args(["trace", "-o", &rec, "--pcap", &pcap, "--ready-file", &ready])
        .args(["--", "sh", "-c"])
        // The shell waits for the ready file, so the inventory is read while it runs.
        .arg(format!(
            "while [ ! -e {ready} ]; do sleep 0.05; done; sleep 0.5; getent ahostsv4 localhost; ip route get 127.0.0.1; kill -SEGV $$"
        ))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&ready, "crash");
    let held = ProbeInventory::of_process(child.id());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(139), "{stderr}");
    assert!(
        stderr.contains("stopped by command killed by SIGSEGV"),
        "{stderr}"
    );
    let events = json_lines(std::fs::read(&rec).unwrap().as_slice());
    assert_eq!(events[0]["kind"], "header");
    let summary = events.last().unwrap();
    assert_eq!(summary["kind"], "summary");
    assert!(
        summary["stopped_by"]
            .as_str()
            .unwrap()
            .starts_with("command killed by SIGSEGV"),
        "{summary}"
    );
    assert!(
        events.iter().any(|e| e["kind"] == "getaddrinfo"),
        "{stderr}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "netlink" && e["comm"] == "ip"),
        "{stderr}"
    );
    assert_analyzable(&pcap, "crashed command");
    held.assert_released("crashed command");
}

/// Output disk full (a 64 KiB tmpfs): the recording is closed and cut back to its last complete
/// line, the trace goes on to its other outputs (stdout), and the exit status and stderr say
/// which output failed and why.
#[test]
fn a_full_disk_closes_that_output_and_keeps_it_valid() {
    require_root();
    let scratch = ScratchDir::new("diskfull");
    let mount = scratch.file("small");
    std::fs::create_dir_all(&mount).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "nit-diskfull", &mount])
        .status()
        .unwrap();
    assert!(mounted.success(), "mounting a small tmpfs");
    struct Unmount(String);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mount.clone());
    let rec = format!("{mount}/rec.jsonl");
    let batch = scratch.file("gets.batch");
    let lines: String = (0..2000)
        .map(|i| format!("route get 127.0.{}.{}\n", i / 250, i % 250 + 1))
        .collect();
    std::fs::write(&batch, lines).unwrap();
    let out = Command::new(tool())
        .args([
            "trace", "--format", "json", "-o", &rec, "--", "ip", "-batch", &batch,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(
        stderr.contains("that output is closed, the trace goes on"),
        "{stderr}"
    );
    // The recording: every line complete JSON, header first.
    let kept = json_lines(std::fs::read(&rec).unwrap().as_slice());
    assert_eq!(kept[0]["kind"], "header");
    assert!(kept.len() > 10, "{}", kept.len());
    // stdout went on to the end: the summary is there.
    let stdout = json_lines(&out.stdout);
    assert_eq!(stdout.last().unwrap()["kind"], "summary", "{stderr}");
    assert!(stdout.len() > kept.len());
}

/// The JSON stream's reader goes away (`trace … | head -c 300`): with a recording as well, the
/// trace goes on to the command's end, the recording is complete and the exit status (2) and
/// stderr name the closed pipe; with stdout alone it ends quietly (exit 0, as `grep | head`
/// does) and leaves nothing loaded.
#[test]
fn a_closed_output_pipe_ends_that_output_only() {
    require_root();
    let scratch = ScratchDir::new("closedpipe");
    let workload =
        "sleep 1; for i in $(seq 1 200); do ip route get 127.0.0.$((i % 250 + 1)) >/dev/null; done";
    for with_recording in [true, false] {
        let (rec, ready) = (scratch.file("pipe.jsonl"), scratch.file("pipe.ready"));
        let _ = std::fs::remove_file(&ready);
        let mut cmd = Command::new(tool());
        cmd.args(["trace", "--format", "json", "--ready-file", &ready]);
        if with_recording {
            cmd.args(["-o", &rec]);
        }
        let mut child = cmd
            .args(["--", "sh", "-c", workload])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_ready(&ready, "closed pipe");
        let held = ProbeInventory::of_process(child.id());
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 300];
        std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if with_recording {
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains("Broken pipe"), "{stderr}");
            let events = json_lines(std::fs::read(&rec).unwrap().as_slice());
            let summary = events.last().unwrap();
            assert_eq!(summary["kind"], "summary", "{stderr}");
            assert_eq!(summary["stopped_by"], "command exited (0)");
            assert_eq!(summary["events"]["route_lookup"], 200, "{summary}");
        } else {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
        }
        held.assert_released("closed pipe");
    }
}

/// Regression: a recording written into a FIFO whose reader went away (`-o FIFO`, then the
/// reader quits) hung the tracer for ever — cutting the recording back to its last line opened
/// and read the FIFO — and a stop signal could not end it. It now closes that output, the
/// others go on, and it ends when its command does.
#[test]
fn a_recording_into_a_fifo_whose_reader_goes_away_ends() {
    require_root();
    let scratch = ScratchDir::new("fifo");
    let fifo = scratch.file("rec.fifo");
    let c_fifo = std::ffi::CString::new(fifo.clone()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let reader = std::thread::spawn({
        let fifo = fifo.clone();
        move || {
            let mut first = [0u8; 100];
            let mut f = std::fs::File::open(&fifo).unwrap();
            std::io::Read::read_exact(&mut f, &mut first).unwrap();
        }
    });
    let mut child = Command::new(tool())
        .args(["trace", "--format", "json", "-o", &fifo, "--"])
        // Output in two bursts a second apart: the reader has gone by the second.
        .args([
            "sh",
            "-c",
            "sleep 1; ip -br addr >/dev/null; sleep 1; ip -br addr >/dev/null; sleep 1",
        ])
        // A second output, which goes on: the trace ends with its command, saying which failed.
        .stdout(std::fs::File::create(scratch.file("stdout.jsonl")).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    reader.join().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the tracer did not end within 60 s of its command");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("Broken pipe"), "{stderr}");
}

/// Regression: `trace --pcap - | head -c 100` ended with exit 2 and "writing - failed: … Broken
/// pipe" because the pcap writer's error reached the CLI flattened into a string. Like tcpdump,
/// it now ends quietly: exit 0, no error on stderr, nothing left loaded.
#[test]
fn a_capture_on_stdout_whose_reader_goes_away_ends_quietly() {
    require_root();
    let scratch = ScratchDir::new("pcappipe");
    let ready = scratch.file("pcap.ready");
    let workload =
        "sleep 1; for i in $(seq 1 100); do ip route get 127.0.0.$((i % 250 + 1)) >/dev/null; done";
    let mut child = Command::new(tool())
        .args(["trace", "--pcap", "-", "--ready-file", &ready])
        .args(["--", "sh", "-c", workload])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&ready, "pcap on a closed pipe");
    let held = ProbeInventory::of_process(child.id());
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    std::io::Read::read_exact(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("writing -") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
    held.assert_released("pcap on a closed pipe");
}

/// A scratch directory and a namespace named `name`, and in the directory an `ip -batch` file
/// of `n` route gets.
fn route_gets(name: &str, n: usize) -> (ScratchDir, nodeip_trace_tests::Netns, String) {
    let scratch = ScratchDir::new(name);
    let ns = nodeip_trace_tests::Netns::new(name);
    let batch = scratch.file("gets.batch");
    std::fs::write(&batch, "route get 127.0.0.1\n".repeat(n)).unwrap();
    (scratch, ns, batch)
}

/// A tracer stopped (SIGSTOP) through a storm of route gets cannot empty its 1 MiB ring: the
/// records that did not fit are counted by reason, and the summary line says how full the ring
/// was found and how late its drain thread came, so a loss tells a late reader from a full
/// queue.
#[test]
fn a_ring_overflow_is_counted_and_says_how_full_the_ring_was_found() {
    require_root();
    let (scratch, ns, batch) = route_gets("ringfull", 20_000);
    let (rec, ready) = (scratch.file("rec.jsonl"), scratch.file("ready"));
    let child = Command::new(tool())
        .args(["trace", "--comm", "ip", "--ring-buffer-mib", "1"])
        .args(["--format", "json", "-o", &rec, "--ready-file", &ready])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&ready, "ring overflow");
    // SAFETY: kill with our child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
    let storm = Command::new("ip")
        .args(["-n", &ns.name, "-batch", &batch])
        .output();
    // SAFETY: as above; the tracer goes on whatever the storm did.
    unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };
    let storm = storm.unwrap();
    assert!(storm.status.success(), "{storm:?}");
    std::thread::sleep(std::time::Duration::from_millis(1000));
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = json_lines(std::fs::read(&rec).unwrap().as_slice());
    let lost = events
        .iter()
        .find(|e| e["kind"] == "lost")
        .unwrap_or_else(|| panic!("no lost event: {stderr}"));
    assert!(
        lost["counts"]["netlink_calls_ringbuf_full"].as_u64() > Some(0),
        "{lost}"
    );
    let found: u64 = stderr
        .split_once("ring buffer found up to ")
        .and_then(|(_, rest)| rest.split_once('%'))
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or_else(|| panic!("no ring fill in the summary: {stderr}"));
    assert!(
        found >= 90,
        "a stopped reader finds the ring full: {stderr}"
    );
}

/// Waits up to `limit` for `child` to exit.
fn exited_within(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_stops_a_trace_under_a_stream_it_cannot_keep_up_with() {
    require_root();
    let (scratch, ns, batch) = route_gets("streamstop", 50_000);
    let (rec, ready) = (scratch.file("rec.jsonl"), scratch.file("ready"));
    // The recording is cut at 16 MiB (the rest counted): the consumer decodes every record
    // all the same, and the disk is spared gigabytes.
    let mut tracer = Command::new(tool())
        .args(["trace", "--comm", "ip", "--format", "json", "-o", &rec])
        .args(["--max-output-mib", "16", "--ready-file", &ready])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&ready, "stream stop");
    // Two route-get storms, over and over for a minute at most: more records than the consumer
    // decodes, so its queue is never empty.
    let storm_script = format!(
        "end=$(($(date +%s) + 60)); while [ $(date +%s) -lt $end ]; do \
         ip -n {ns} -batch {batch} & ip -n {ns} -batch {batch}; wait; done",
        ns = ns.name
    );
    struct StopStorm(std::process::Child);
    impl Drop for StopStorm {
        fn drop(&mut self) {
            let _ = Command::new("pkill")
                .args(["-P", &self.0.id().to_string()])
                .status();
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut storm = StopStorm(
        Command::new("sh")
            .args(["-c", &storm_script])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        storm.0.try_wait().unwrap().is_none(),
        "the storm ended early"
    );
    let pid = tracer.id() as i32;
    let interrupt = || {
        // SAFETY: kill with our child's pid.
        unsafe { libc::kill(pid, libc::SIGINT) };
    };
    interrupt();
    // Whatever it queued before the stop is written out (a backlog of up to 536 MiB with the
    // spill file takes its time), or a second Ctrl-C drops it: either way it ends while the
    // stream goes on.
    let mut twice = false;
    let status = match exited_within(&mut tracer, std::time::Duration::from_secs(5)) {
        Some(status) => status,
        None => {
            twice = true;
            interrupt();
            exited_within(&mut tracer, std::time::Duration::from_secs(10)).unwrap_or_else(|| {
                let _ = tracer.kill();
                panic!("the tracer did not stop within 10 s of a second SIGINT under the stream")
            })
        }
    };
    assert!(
        storm.0.try_wait().unwrap().is_none(),
        "the storm ended first"
    );
    drop(storm);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut tracer.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let events = json_lines(std::fs::read(&rec).unwrap().as_slice());
    assert_eq!(
        events.last().map(|e| e["kind"].clone()),
        Some("summary".into()),
        "the recording ends with its summary: {stderr}"
    );
    if twice {
        assert!(stderr.contains("Ctrl-C again drops them"), "{stderr}");
        let lost = events.iter().find(|e| e["kind"] == "lost").expect("lost");
        assert!(
            lost["counts"]["records_dropped_by_second_stop"].as_u64() > Some(0),
            "{lost}"
        );
    }
    println!("stopped under the stream; a second SIGINT needed: {twice}");
}
