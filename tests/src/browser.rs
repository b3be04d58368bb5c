//! The browser test's tools, as `cargo xtask setup --for-tests` installs them (`xtask/src/browser_tools.rs`):
//! Debian's headless Chromium driven by `tests/browser/report_check.mjs` (playwright-core, no
//! browser download) and the Nu HTML validator (`vnu.jar`, npm `vnu-jar`) on the machine's Java.
//! CI installs all of them, so a missing one fails the test, naming what to run.
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::workspace_root;

/// Where the browser test's tools are.
pub struct BrowserTools {
    /// The node that runs the harness (`target/browser-tools/bin/node`).
    pub node: PathBuf,
    /// The browser (`/usr/bin/chromium`).
    pub chromium: PathBuf,
    /// The Nu validator's jar.
    pub vnu_jar: PathBuf,
}

impl BrowserTools {
    /// The tools, or a panic naming each one missing and how to install them.
    pub fn require() -> Self {
        let tools = workspace_root().join("target/browser-tools");
        let found = BrowserTools {
            node: tools.join("bin/node"),
            chromium: PathBuf::from("/usr/bin/chromium"),
            vnu_jar: tools.join("node_modules/vnu-jar/build/dist/vnu.jar"),
        };
        let mut missing = Vec::new();
        for (what, path) in [
            ("node (20 or newer)", &found.node),
            ("chromium", &found.chromium),
            ("vnu.jar", &found.vnu_jar),
            (
                "playwright-core",
                &tools.join("node_modules/playwright-core/package.json"),
            ),
        ] {
            if !path.exists() {
                missing.push(format!("{what} ({})", path.display()));
            }
        }
        let java = Command::new("java").arg("-version").output();
        if !java.is_ok_and(|o| o.status.success()) {
            missing.push("java (a Java runtime on PATH)".into());
        }
        assert!(
            missing.is_empty(),
            "the browser test's tools are missing: {}; install them with `cargo xtask setup --for-tests` \
             (CI does: .ci/run → cargo xtask test)",
            missing.join(", ")
        );
        found
    }

    /// Runs `tests/browser/report_check.mjs` over `specs` (a JSON array of `{file, screenshot,
    /// expect}`, see the script) and returns its result (`{ok, results: […]}`); panics when the
    /// harness itself cannot run.
    pub fn check_reports(&self, specs: &Value, scratch: &Path) -> Value {
        // One spec file per call: the tests of one binary run at once.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spec_file = scratch.join(format!(
            "report-check-spec-{}-{call}.json",
            std::process::id()
        ));
        std::fs::write(&spec_file, serde_json::to_vec_pretty(specs).unwrap())
            .unwrap_or_else(|e| panic!("writing {}: {e}", spec_file.display()));
        let out = Command::new(&self.node)
            .arg(workspace_root().join("tests/browser/report_check.mjs"))
            .arg(&spec_file)
            .env("CHROMIUM", &self.chromium)
            .current_dir(workspace_root())
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", self.node.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "report_check.mjs could not run ({}): {stderr}",
            out.status
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "report_check.mjs printed no JSON ({e}): {}\n{stderr}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// The Nu validator's errors over `files` (`--errors-only --also-check-svg`), one line each
    /// (`FILE:LINE: message`); empty when all are valid.
    pub fn validate_html(&self, files: &[PathBuf]) -> Vec<String> {
        let out = Command::new("java")
            .arg("-jar")
            .arg(&self.vnu_jar)
            .args(["--errors-only", "--also-check-svg", "--format", "json"])
            .args(files)
            .output()
            .expect("running java -jar vnu.jar");
        // vnu writes its JSON report to stderr; exit 1 when a file has errors.
        let report: Value = serde_json::from_slice(&out.stderr).unwrap_or_else(|e| {
            panic!(
                "vnu.jar printed no JSON report ({e}, {}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
        report["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["type"] == "error" || m["subType"] == "fatal")
            .map(|m| {
                format!(
                    "{}:{}: {}",
                    m["url"].as_str().unwrap_or("?"),
                    m["lastLine"],
                    m["message"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }
}

/// The failures `report_check.mjs` listed for each file that failed, one line each.
pub fn failures(result: &Value) -> Vec<String> {
    result["results"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| {
            let file = r["file"].as_str().unwrap_or("?").to_string();
            r["failures"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |f| format!("{file}: {}", f.as_str().unwrap_or("?")))
        })
        .collect()
}
