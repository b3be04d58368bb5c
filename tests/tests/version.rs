//! Issue 21: `nodeip-trace --version` says which build it is — the version, the git commit it
//! was built from ("unknown" outside a git checkout) and the SHA-256 of the embedded eBPF object —
//! so a fleet's binaries and images can be told apart.
use nodeip_trace_tests::{run_ok, tool};

#[test]
fn version_names_the_commit_and_the_ebpf_object() {
    let out = run_ok(std::process::Command::new(tool()).arg("--version"));
    let line = String::from_utf8(out.stdout).expect("UTF-8");
    let rest = line
        .trim()
        .strip_prefix(&format!(
            "nodeip-trace {} (commit ",
            env!("CARGO_PKG_VERSION")
        ))
        .unwrap_or_else(|| panic!("{line:?}"));
    let (commit, rest) = rest.split_once(", eBPF object sha256 ").expect("the hash");
    let hash = rest.strip_suffix(')').expect("closing parenthesis");
    let hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit());
    assert!(commit == "unknown" || hex(commit, 40), "commit {commit:?}");
    assert!(hex(hash, 64), "hash {hash:?}");
}
