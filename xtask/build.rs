//! The compile-time values nodeip-trace/src/cli.rs names for `--version`, so that the man-page
//! generator (examples/manpages.rs), which includes that file, compiles here too: stand-ins
//! (nodeip-trace's own build.rs records the real ones for the tool), or a packager's
//! `NODEIP_TRACE_GIT_COMMIT` as it is. The pages print only the version number. `cargo run`
//! puts these values in xtask's environment as well; xtask's `main` takes the stand-ins out
//! again, so they never reach the tool's build.
fn main() {
    for var in ["NODEIP_TRACE_GIT_COMMIT", "NODEIP_TRACE_EBPF_SHA256"] {
        println!("cargo:rerun-if-env-changed={var}");
        let value = std::env::var(var).unwrap_or_else(|_| "xtask-stand-in".into());
        println!("cargo:rustc-env={var}={value}");
    }
}
