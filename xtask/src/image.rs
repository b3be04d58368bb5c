//! `cargo xtask image`: the container image `deploy/daemonset.yaml` runs, built with buildah
//! `FROM scratch` (nothing pulled): the static binary from [`crate::dist::build_static_binary`]
//! at the path the manifest's `command` names, the manifest's `args` as the default command, OCI
//! labels (source, version, revision, title, description, licenses), tagged as the manifest's
//! `image`. `--oci-archive PATH` also saves it as an OCI archive (for `skopeo copy`, `ctr image
//! import`, `kind load image-archive`, or a registry without podman).
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context as _};

use crate::dist::{self, VERSION};
use crate::workspace_root;

/// The manifest the image is built for, relative to the workspace root.
pub const MANIFEST: &str = "deploy/daemonset.yaml";

/// The name of buildah's working container while the image is assembled.
const WORKING_CONTAINER: &str = "nodeip-trace-image-build";

/// What the image must match in the DaemonSet's (only) container.
#[derive(Debug)]
pub struct ManifestContainer {
    /// `image`, e.g. `nodeip-trace:0.1.0`.
    pub image: String,
    /// `command`: the binary's path inside the image first.
    pub command: Vec<String>,
    /// `args`.
    pub args: Vec<String>,
}

/// Reads the DaemonSet's container from [`MANIFEST`].
pub fn manifest_container() -> anyhow::Result<ManifestContainer> {
    let path = workspace_root().join(MANIFEST);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        use serde::Deserialize as _;
        docs.push(
            serde_yaml::Value::deserialize(doc)
                .with_context(|| format!("{} is not valid YAML", path.display()))?,
        );
    }
    let daemonset = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .with_context(|| format!("{} has no DaemonSet", path.display()))?;
    let containers = daemonset["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .with_context(|| format!("{}: the DaemonSet has no containers", path.display()))?;
    let [container] = containers.as_slice() else {
        bail!(
            "{}: the DaemonSet has {} containers; the image is built for exactly one",
            path.display(),
            containers.len()
        );
    };
    let strings = |key: &str| -> anyhow::Result<Vec<String>> {
        container[key]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|v| {
                v.as_str().map(str::to_string).with_context(|| {
                    format!("{}: the container's {key} has a non-string", path.display())
                })
            })
            .collect()
    };
    let image = container["image"]
        .as_str()
        .with_context(|| format!("{}: the container has no image", path.display()))?
        .to_string();
    let command = strings("command")?;
    ensure!(
        command.first().is_some_and(|c| c.starts_with('/')),
        "{}: the container's command must start with the binary's absolute path (the image has no shell or PATH lookup), found {command:?}",
        path.display()
    );
    Ok(ManifestContainer {
        image,
        command,
        args: strings("args")?,
    })
}

/// The image reference as local container storage names it (`localhost/` before a name
/// without a registry), which podman and buildah both accept.
pub fn local_reference(image: &str) -> String {
    let first = image.split('/').next().unwrap_or_default();
    let has_registry =
        image.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    if has_registry {
        image.to_string()
    } else {
        format!("localhost/{image}")
    }
}

/// `cargo xtask image`: builds the static binary, then the image; optionally saves it.
pub fn image(oci_archive: Option<&Path>) -> anyhow::Result<()> {
    let binary = dist::build_static_binary()?;
    let reference = build_image(&binary)?;
    if let Some(archive) = oci_archive {
        save_oci_archive(&reference, archive)?;
    }
    Ok(())
}

/// Builds the image from `binary` with buildah and tags it as the manifest's `image`; returns the
/// local reference.
pub fn build_image(binary: &Path) -> anyhow::Result<String> {
    let t0 = std::time::Instant::now();
    let container = manifest_container()?;
    let tag = container.image.rsplit_once(':').map(|(_, t)| t);
    ensure!(
        tag == Some(VERSION),
        "{MANIFEST}'s image {} should be tagged {VERSION}, the workspace version: update it with the version",
        container.image
    );
    let reference = local_reference(&container.image);
    let version_line = dist::binary_version(binary)?;
    // A working container left by an interrupted run goes first (quietly: usually there is none).
    let _ = Command::new("buildah")
        .args(["rm", WORKING_CONTAINER])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    buildah(&["from", "--name", WORKING_CONTAINER, "scratch"])?;
    let assembled = assemble(binary, &container, &version_line, &reference);
    if assembled.is_err() {
        let _ = buildah(&["rm", WORKING_CONTAINER]);
    }
    assembled?;
    let size = buildah(&["images", "--format", "{{.Size}}", &reference])?;
    println!(
        "image: {reference} ({}, {}) in {:.0} s",
        size.trim(),
        version_line,
        t0.elapsed().as_secs_f64()
    );
    Ok(reference)
}

/// Copies the binary in, configures and commits the working container as `reference`, and
/// removes the image that held the tag before (when it is not the same one).
fn assemble(
    binary: &Path,
    container: &ManifestContainer,
    version_line: &str,
    reference: &str,
) -> anyhow::Result<()> {
    let binary = binary.to_str().context("the binary's path is not UTF-8")?;
    buildah(&[
        "copy",
        "--chmod",
        "0755",
        WORKING_CONTAINER,
        binary,
        &container.command[0],
    ])?;
    let labels = [
        ("org.opencontainers.image.title", "nodeip-trace".to_string()),
        (
            "org.opencontainers.image.description",
            "Which process picked which node IP, and why: eBPF tracing of getaddrinfo, netlink and route lookups".to_string(),
        ),
        ("org.opencontainers.image.version", VERSION.to_string()),
        ("org.opencontainers.image.revision", dist::git_commit()),
        ("org.opencontainers.image.source", source_url()),
        ("org.opencontainers.image.licenses", env!("CARGO_PKG_LICENSE").to_string()),
    ];
    let entrypoint = serde_json::to_string(&container.command)?;
    let cmd = serde_json::to_string(&container.args)?;
    let mut config: Vec<String> = [
        "config",
        "--os",
        "linux",
        "--arch",
        "amd64",
        "--created-by",
        "cargo xtask image",
        "--entrypoint",
        &entrypoint,
        "--cmd",
        &cmd,
    ]
    .map(String::from)
    .to_vec();
    for (key, value) in labels {
        config.extend(["--label".to_string(), format!("{key}={value}")]);
    }
    config.push(WORKING_CONTAINER.into());
    buildah(&config.iter().map(String::as_str).collect::<Vec<_>>())?;
    eprintln!("image: {version_line}");
    let previous = buildah(&["images", "--quiet", "--no-trunc", reference]).ok();
    let timestamp = dist::source_date_epoch().to_string();
    let id = buildah(&[
        "commit",
        "--quiet",
        "--rm",
        "--format",
        "oci",
        "--timestamp",
        &timestamp,
        WORKING_CONTAINER,
        reference,
    ])?;
    if let Some(previous) = previous.map(|p| p.trim().to_string()) {
        if !previous.is_empty() && !id.trim().ends_with(previous.trim_start_matches("sha256:")) {
            // Untagged by the commit; a container still using it keeps it (and says so).
            let _ = buildah(&["rmi", &previous]);
        }
    }
    Ok(())
}

/// Where the source lives, for `org.opencontainers.image.source`: `$NODEIP_TRACE_SOURCE_URL`,
/// else the git remote `origin`, else "unknown".
fn source_url() -> String {
    if let Ok(url) = std::env::var("NODEIP_TRACE_SOURCE_URL") {
        return url;
    }
    let origin = Command::new("git")
        .current_dir(workspace_root())
        .args(["remote", "get-url", "origin"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    origin.unwrap_or_else(|| {
        eprintln!("image: no git remote `origin` and no $NODEIP_TRACE_SOURCE_URL: the source label says \"unknown\"");
        "unknown".into()
    })
}

/// Where `cargo xtask test` saves the image: `target/dist/nodeip-trace-<version>.oci.tar`.
pub fn default_oci_archive() -> PathBuf {
    workspace_root()
        .join("target/dist")
        .join(format!("nodeip-trace-{VERSION}.oci.tar"))
}

/// Saves `reference` as an OCI archive at `archive` (replacing one there), named as the manifest's
/// image inside.
pub fn save_oci_archive(reference: &str, archive: &Path) -> anyhow::Result<()> {
    if archive.exists() {
        std::fs::remove_file(archive)
            .with_context(|| format!("removing the old archive {}", archive.display()))?;
    }
    let absolute: PathBuf = if archive.is_absolute() {
        archive.to_path_buf()
    } else {
        std::env::current_dir()?.join(archive)
    };
    let name = reference.strip_prefix("localhost/").unwrap_or(reference);
    buildah(&[
        "push",
        "--quiet",
        reference,
        &format!("oci-archive:{}:{name}", absolute.display()),
    ])?;
    let size = std::fs::metadata(&absolute)
        .with_context(|| format!("reading {}", absolute.display()))?
        .len();
    println!(
        "image: saved {reference} to {} ({:.1} MiB)",
        absolute.display(),
        size as f64 / 1048576.0
    );
    Ok(())
}

/// Runs `buildah ARGS`, returning its stdout; fails with its stderr.
fn buildah(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("buildah")
        .args(args)
        .output()
        .context("running buildah (`cargo xtask setup --for-tests` installs it)")?;
    if !out.status.success() {
        bail!(
            "buildah {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The PyPI `kubernetes-validate` release the DaemonSet test validates the manifest with
/// (offline: it ships the Kubernetes API schemas).
const KUBERNETES_VALIDATE_VERSION: &str = "1.37.0";

/// Installs `kubernetes-validate` into `target/toolchains/kubernetes-validate` (a pip `--target`
/// directory, run with `PYTHONPATH`) when missing, as one step.
pub fn install_manifest_validator(session: &mut crate::steps::Session) -> anyhow::Result<()> {
    let target = workspace_root().join("target/toolchains/kubernetes-validate");
    let installed = target.join(format!(
        "kubernetes_validate-{KUBERNETES_VALIDATE_VERSION}.dist-info"
    ));
    if installed.is_dir() {
        return Ok(());
    }
    session.step(
        &format!("kubernetes-validate {KUBERNETES_VALIDATE_VERSION} (PyPI)"),
        |session| {
            if target.exists() {
                std::fs::remove_dir_all(&target)
                    .with_context(|| format!("removing the old {}", target.display()))?;
            }
            session
                .run(&mut crate::steps::pip_install(
                    &target,
                    &[format!("kubernetes-validate=={KUBERNETES_VALIDATE_VERSION}")],
                ))
                .with_context(|| {
                    format!(
                        "installing kubernetes-validate into {} failed: is PyPI reachable and python3-pip installed?",
                        target.display()
                    )
                })
        },
    )
}
