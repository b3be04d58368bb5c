//! The live [`crate::model::ports::ResolverConfig`]: a traced process's
//! `/etc/gai.conf` read through `/proc/PID/root`, so a process in another mount namespace (a
//! container, or `ip netns exec` with `/etc/netns/NAME/gai.conf`) is explained with its own
//! tables. A process already gone, or without the file, gets glibc's defaults.
use crate::model::ports::{GaiConfText, ResolverConfig};

/// This machine's hostname (`/proc/sys/kernel/hostname`, of our UTS namespace), trimmed; empty
/// when unreadable.
pub fn machine_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Reads gai.conf from the process's own root.
pub struct ProcResolverConfig;

impl ResolverConfig for ProcResolverConfig {
    fn gai_conf(&mut self, pid: u32) -> GaiConfText {
        let root = format!("/proc/{pid}/root");
        if std::fs::metadata(&root).is_err() {
            return GaiConfText {
                text: None,
                note: Some(format!(
                    "process {pid} exited before its gai.conf was read: glibc's default tables assumed"
                )),
            };
        }
        // A missing or unreadable file means glibc's defaults, as for glibc.
        GaiConfText {
            text: std::fs::read_to_string(format!("{root}/etc/gai.conf")).ok(),
            note: None,
        }
    }
}
