//! Golden files: the one comparison every golden test in the workspace uses (the end-to-end
//! tests here, and the unit tests of `nodeip-trace`, which include this file by path).
//!
//! A golden file holds the exact expected output. `BLESS=1` (what `cargo xtask bless` sets)
//! rewrites it instead of comparing, so outputs change only on purpose and the change shows in
//! review as a diff of the committed file.
//!
//! The decoded messages of a capture have one golden file per capture
//! (`tests/golden/decode/NAME.json`, in the form of [`decoded_frames_json`]): the decoder's unit
//! test and the end-to-end `analyze` test both compare against it, so they cannot drift apart.
use std::path::Path;

/// One frame's decoded messages, as the decode golden files hold them.
#[derive(serde::Serialize)]
pub struct DecodedFrame<M> {
    /// 1-based frame number.
    pub frame: usize,
    /// Netlink protocol name (`NETLINK_ROUTE`).
    pub protocol: String,
    /// The decoded messages.
    pub messages: M,
    /// Decoding problems, when any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// The golden-file text of decoded frames: pretty JSON with a final newline.
pub fn decoded_frames_json<M: serde::Serialize>(frames: &[DecodedFrame<M>]) -> String {
    serde_json::to_string_pretty(frames).expect("decoded frames serialize") + "\n"
}

/// Whether this run rewrites golden files (`BLESS=1`).
pub fn blessing() -> bool {
    std::env::var_os("BLESS").is_some_and(|v| v == "1")
}

/// Compares `actual` with the golden file at `path`; with `BLESS=1`, writes `actual` there
/// instead (creating its directory). On a mismatch, panics naming the file and the first
/// differing line (or byte, for binary content) and how to accept the change.
pub fn assert_golden(path: &Path, actual: &[u8]) {
    if blessing() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        }
        std::fs::write(path, actual).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read(path).unwrap_or_else(|e| {
        panic!(
            "golden file {}: {e}; create it with `cargo xtask bless` (BLESS=1)",
            path.display()
        )
    });
    if actual == expected.as_slice() {
        return;
    }
    let place = match (std::str::from_utf8(actual), std::str::from_utf8(&expected)) {
        (Ok(actual), Ok(expected)) => {
            let line = actual
                .lines()
                .zip(expected.lines())
                .position(|(a, e)| a != e)
                .unwrap_or_else(|| actual.lines().count().min(expected.lines().count()));
            let shown = |text: &str| text.lines().nth(line).unwrap_or("<end of file>").to_owned();
            format!(
                "line {}:\n  expected: {}\n  actual:   {}",
                line + 1,
                shown(expected),
                shown(actual)
            )
        }
        _ => {
            let byte = actual
                .iter()
                .zip(&expected)
                .position(|(a, e)| a != e)
                .unwrap_or_else(|| actual.len().min(expected.len()));
            format!(
                "byte {byte} ({} bytes expected, {} produced)",
                expected.len(),
                actual.len()
            )
        }
    };
    panic!(
        "{} differs from the output at {place}\nif the change is intended, run `cargo xtask bless`",
        path.display()
    );
}
