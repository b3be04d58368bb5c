//! The live [`ResolverConfig`](crate::correlate::ResolverConfig): a traced process's
//! `/etc/gai.conf` read through `/proc/PID/root`, so a process in another mount namespace (a
//! container, or `ip netns exec` with `/etc/netns/NAME/gai.conf`) is explained with its own
//! tables. A process already gone, or without the file, gets glibc's defaults.
use crate::explain::gai_conf::GaiConf;

/// Reads gai.conf from the process's own root.
pub struct ProcResolverConfig;

impl crate::correlate::ResolverConfig for ProcResolverConfig {
    fn gai_conf(&mut self, pid: u32) -> (GaiConf, Option<String>) {
        let root = format!("/proc/{pid}/root");
        if std::fs::metadata(&root).is_err() {
            return (
                GaiConf::default(),
                Some(format!(
                    "process {pid} exited before its gai.conf was read: glibc's default tables assumed"
                )),
            );
        }
        match std::fs::read_to_string(format!("{root}/etc/gai.conf")) {
            // glibc ignores lines it cannot parse; so does the explanation.
            Ok(text) => (GaiConf::parse_like_glibc(&text).0, None),
            Err(_) => (GaiConf::default(), None),
        }
    }
}
