//! Builds the resolver tests' client programs into `target/test-clients` (see
//! `nodeip_trace_tests::clients`) and prints each file's path, one a line: `cargo xtask vm-test`
//! ships them in the guest, which has no Go toolchain or `musl-gcc`.
fn main() -> anyhow::Result<()> {
    for path in nodeip_trace_tests::clients::prebuild()? {
        println!("{}", path.display());
    }
    Ok(())
}
