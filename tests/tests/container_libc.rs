//! Issue 7: getaddrinfo in a process that uses another copy of libc, in its own mount namespace
//! (as in a container: `unshare -m` and a bind mount of a copied libc.so.6 over the system's
//! path). The system libc's uprobe does not fire for the copy (another inode): events from such
//! a process prove the copy was found and attached — at start-up for a process already running,
//! and at exec for one that starts during the trace.
use std::process::{Child, Command};
use std::time::Duration;

use nodeip_trace_tests::{require_root, BackgroundTrace, ScratchDir};
use serde_json::Value;

const SYSTEM_LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// `unshare -m` shell with a copy of libc bind-mounted over the system's, calling getaddrinfo
/// (via getent) every 200 ms; killed on drop (its getent children end with it: the loop stops).
struct Container(Child);

impl Container {
    fn start(copy: &str) -> Self {
        // After the mount, exec a new shell: it maps the copy, so a scan of /proc finds it.
        let script = format!(
            "mount --bind {copy} {SYSTEM_LIBC} || exit 9; \
             exec sh -c 'while :; do getent ahostsv4 localhost >/dev/null; sleep 0.2; done'"
        );
        Container(
            Command::new("unshare")
                .args(["-m", "--propagation", "private", "sh", "-c", &script])
                .spawn()
                .expect("starting unshare (util-linux)"),
        )
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (up to 5 s) until no process maps the file `path` (found by its inode in
/// `/proc/*/maps`, whatever path it has in the process's mount namespace).
fn wait_until_nothing_maps(path: &str) {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata(path).expect("the copy").ino().to_string();
    let mapped = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::read_to_string(e.path().join("maps")).is_ok_and(|maps| {
                    maps.lines().any(|l| {
                        let f: Vec<&str> = l.split_whitespace().collect();
                        f.get(4) == Some(&inode.as_str())
                            && f.get(5).is_some_and(|p| p.ends_with("libc.so.6"))
                    })
                })
            })
    };
    for _ in 0..100 {
        if !mapped() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{path} is still mapped 5 s after its container was stopped");
}

/// getaddrinfo events made by children of `parent`.
fn calls_from(events: &[Value], parent: u32) -> usize {
    events
        .iter()
        .filter(|e| e["kind"] == "getaddrinfo" && e["process"]["ancestors"][0]["pid"] == parent)
        .count()
}

#[test]
fn a_libc_copy_in_another_mount_namespace_is_traced() {
    require_root();
    let scratch = ScratchDir::new("libccopy");
    let copy = scratch.file("libc.so.6");
    std::fs::copy(SYSTEM_LIBC, &copy).expect("copying libc");

    // Running before the trace: found by the start-up scan of /proc/PID/maps.
    let early = Container::start(&copy);
    std::thread::sleep(Duration::from_millis(600));
    let trace = BackgroundTrace::start("libc-early", &["--comm", "getent"]).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let (events, stderr) = trace.stop().unwrap();
    let header = &events[0];
    let copy_hook = header["hooks"].as_array().unwrap().iter().any(|h| {
        let h = h.as_str().unwrap();
        h.contains("uprobe getaddrinfo@/proc/") && h.contains("/root/") && !h.contains("FAILED")
    });
    assert!(copy_hook, "no uprobe on the copy: {header}");
    assert!(calls_from(&events, early.0.id()) > 0, "{stderr}");
    drop(early);
    // Its last `getent` can outlive the shell by a moment: a process still mapping the copy
    // when the next trace starts gets the copy attached at start-up, not at an exec.
    wait_until_nothing_maps(&copy);

    // Started during the trace: attached at its exec.
    let trace = BackgroundTrace::start("libc-late", &["--comm", "getent"]).unwrap();
    let late = Container::start(&copy);
    std::thread::sleep(Duration::from_millis(2000));
    let late_pid = late.0.id();
    drop(late);
    let (events, stderr) = trace.stop().unwrap();
    assert!(
        stderr.contains("libc.so.6 (glibc getaddrinfo, pid "),
        "{stderr}"
    );
    assert!(calls_from(&events, late_pid) > 0, "{stderr}");
}
