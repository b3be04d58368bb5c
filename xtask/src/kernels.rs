//! The kernels of the VM lane: Debian's stock cloud kernels of three releases, fetched with
//! `apt-get download` through a private apt configuration (its own sources list, state and cache
//! under `target/vm-cache/apt/<suite>/`; the host's `/etc/apt` is never read or changed), unpacked
//! with `dpkg -x` into `target/vm-cache/kernel-<version>/` and reused between runs.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context as _};

use crate::{run, run_within};

/// One kernel line of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// The name given to `--kernel` (`5.10`, `6.1`, `6.12`).
    pub name: &'static str,
    /// The Debian suite whose `linux-image-cloud-amd64` points at it.
    pub suite: &'static str,
}

/// The kernels `vm-test --kernel` knows, oldest first.
pub const KERNELS: [Kernel; 3] = [
    Kernel {
        name: "5.10",
        suite: "bullseye",
    },
    Kernel {
        name: "6.1",
        suite: "bookworm",
    },
    Kernel {
        name: "6.12",
        suite: "trixie",
    },
];

/// The kernel named `name` (`5.10`, `6.1`, `6.12`).
pub fn by_name(name: &str) -> anyhow::Result<Kernel> {
    KERNELS
        .iter()
        .copied()
        .find(|k| k.name == name)
        .with_context(|| {
            let names: Vec<&str> = KERNELS.iter().map(|k| k.name).collect();
            format!("unknown kernel {name:?}: one of {names:?} or \"all\"")
        })
}

/// Index files younger than this are not fetched again.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// How long `apt-get update` may take before it is stopped and tried once more (a whole
/// update of two suites takes seconds on the registries this lane reaches).
const UPDATE_LIMIT: Duration = Duration::from_secs(150);

/// How long `apt-get download` of one kernel package (20–40 MB) may take.
const DOWNLOAD_LIMIT: Duration = Duration::from_secs(300);

/// The private apt configuration of one suite (main and its security suite).
struct PrivateApt {
    dir: PathBuf,
}

impl PrivateApt {
    fn new(cache: &Path, suite: &str) -> anyhow::Result<Self> {
        let dir = cache.join("apt").join(suite);
        for sub in [
            "etc/sources.list.d",
            "etc/preferences.d",
            "state/lists/partial",
            "cache/archives/partial",
        ] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        let status = dir.join("state/status");
        if !status.exists() {
            std::fs::write(&status, "")?;
        }
        let keyring = "signed-by=/usr/share/keyrings/debian-archive-keyring.gpg";
        std::fs::write(
            dir.join("etc/sources.list"),
            format!(
                "deb [{keyring}] http://deb.debian.org/debian {suite} main\n\
                 deb [{keyring}] http://deb.debian.org/debian-security {suite}-security main\n"
            ),
        )?;
        Ok(PrivateApt { dir })
    }

    /// `program` (apt-get, apt-cache) with every path of its configuration redirected here.
    fn command(&self, program: &str) -> Command {
        let d = self.dir.display();
        let mut c = Command::new(program);
        for (key, value) in [
            ("Dir::Etc::SourceList", format!("{d}/etc/sources.list")),
            ("Dir::Etc::SourceParts", format!("{d}/etc/sources.list.d")),
            ("Dir::Etc::Preferences", format!("{d}/etc/preferences")),
            (
                "Dir::Etc::PreferencesParts",
                format!("{d}/etc/preferences.d"),
            ),
            ("Dir::State", format!("{d}/state")),
            ("Dir::State::status", format!("{d}/state/status")),
            ("Dir::Cache", format!("{d}/cache")),
            ("Acquire::Languages", "none".into()),
            ("APT::Sandbox::User", "root".into()),
        ] {
            c.arg("-o").arg(format!("{key}={value}"));
        }
        c.args(crate::APT_NO_STALL);
        c
    }

    /// `apt-get update` unless the index files are recent; a failed update with older index
    /// files present goes on with those.
    fn update(&self) -> anyhow::Result<()> {
        let lists = self.dir.join("state/lists");
        let newest = std::fs::read_dir(&lists)?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with("_Packages"))
            .filter_map(|e| e.metadata().ok()?.modified().ok())
            .max();
        let fresh = newest.is_some_and(|t| {
            SystemTime::now()
                .duration_since(t)
                .is_ok_and(|age| age < LISTS_MAX_AGE)
        });
        if fresh {
            return Ok(());
        }
        let update = || {
            run_within(
                self.command("apt-get")
                    .args(["-q", "update"])
                    .stdout(std::process::Stdio::null()),
                UPDATE_LIMIT,
            )
        };
        let Err(first) = update() else {
            return Ok(());
        };
        eprintln!("vm-test: apt-get update failed ({first:#}); trying once more");
        match update() {
            Ok(()) => Ok(()),
            Err(e) if newest.is_some() => {
                eprintln!("vm-test: apt-get update failed again ({e:#}); using the older index");
                Ok(())
            }
            Err(e) => Err(e.context(format!("apt-get update of {}", self.dir.display()))),
        }
    }

    /// The `linux-image-N…` package `linux-image-cloud-amd64` depends on (the suite's newest).
    fn newest_cloud_image(&self) -> anyhow::Result<String> {
        let out = self
            .command("apt-cache")
            .args(["depends", "linux-image-cloud-amd64"])
            .output()
            .context("starting apt-cache")?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Depends: "))
            .find(|p| {
                p.starts_with("linux-image-")
                    && p.as_bytes().get(12).is_some_and(u8::is_ascii_digit)
            })
            .map(str::to_string)
            .with_context(|| {
                format!(
                    "apt-cache names no linux-image-N… package for linux-image-cloud-amd64 in {}",
                    self.dir.display()
                )
            })
    }
}

/// The package to boot for `kernel`: `given`, or the newest cloud image of its suite.
pub fn package(cache: &Path, kernel: Kernel, given: Option<&str>) -> anyhow::Result<String> {
    if let Some(p) = given {
        return Ok(p.to_string());
    }
    let apt = PrivateApt::new(cache, kernel.suite)?;
    apt.update()?;
    apt.newest_cloud_image()
}

/// The unpacked kernel tree of `package` (cached): `(root, version)`. Trees whose modules live
/// in `usr/lib/modules` (merged /usr, trixie on) get a `lib` link so `depmod -b` and
/// `modprobe -d` find them.
pub fn tree(cache: &Path, kernel: Kernel, package: &str) -> anyhow::Result<(PathBuf, String)> {
    let version = package
        .strip_prefix("linux-image-")
        .context("a kernel package is named linux-image-VERSION")?
        .to_string();
    let root = cache.join(format!("kernel-{version}"));
    let vmlinuz = root.join(format!("boot/vmlinuz-{version}"));
    if !vmlinuz.exists() {
        let debs = cache.join("debs");
        std::fs::create_dir_all(&debs)?;
        let have_deb = |debs: &Path| -> anyhow::Result<Option<PathBuf>> {
            Ok(std::fs::read_dir(debs)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with(&format!("{package}_")) && n.ends_with(".deb")
                    })
                }))
        };
        if have_deb(&debs)?.is_none() {
            eprintln!("vm-test: apt-get download {package} ({})", kernel.suite);
            let apt = PrivateApt::new(cache, kernel.suite)?;
            apt.update()?;
            run_within(
                apt.command("apt-get")
                    .args(["-q", "download", package])
                    .current_dir(&debs),
                DOWNLOAD_LIMIT,
            )?;
        }
        let deb = have_deb(&debs)?.context("apt-get download left no .deb")?;
        let _ = std::fs::remove_dir_all(&root);
        run(Command::new("dpkg").arg("-x").arg(&deb).arg(&root))?;
    }
    if !root.join("lib").exists() && root.join("usr/lib/modules").exists() {
        std::os::unix::fs::symlink("usr/lib", root.join("lib"))?;
    }
    if !root
        .join(format!("lib/modules/{version}/modules.dep"))
        .exists()
    {
        // The package ships no modules.dep.
        run(Command::new("depmod").arg("-b").arg(&root).arg(&version))?;
    }
    Ok((root, version))
}

/// docs/kernels.md's markers around the generated table.
const TABLE_BEGIN: &str = "<!-- kernel-table: generated by `cargo xtask kernel-table` from the VM lane's runs; do not edit -->";
const TABLE_END: &str = "<!-- kernel-table end -->";

/// One kernel's saved run: doctor's JSON report, the one-second trace's JSON header and the
/// results `vm-test` wrote.
struct SavedRun {
    kernel: &'static str,
    doctor: Option<serde_json::Value>,
    header: Option<serde_json::Value>,
    results: serde_json::Value,
}

fn saved_runs(dir: &Path) -> anyhow::Result<Vec<SavedRun>> {
    let mut runs = Vec::new();
    for kernel in KERNELS {
        let d = dir.join(kernel.name);
        let Ok(results) = std::fs::read_to_string(d.join("results.json")) else {
            continue;
        };
        let results = serde_json::from_str(&results)
            .with_context(|| format!("{}/results.json", d.display()))?;
        let json = |file: &str| {
            std::fs::read_to_string(d.join(file))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
        };
        runs.push(SavedRun {
            kernel: kernel.name,
            doctor: json("doctor.json"),
            header: json("trace-header.json"),
            results,
        });
    }
    Ok(runs)
}

/// The `key` strings of the objects in each of `arrays`, each once, in order of appearance.
fn names_in(arrays: impl Iterator<Item = serde_json::Value>, key: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for array in arrays {
        for name in array
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o[key].as_str())
        {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// The table's markdown (without the markers).
fn table(runs: &[SavedRun]) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("| |");
    for r in runs {
        let _ = write!(s, " {} |", r.kernel);
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(runs.len()));
    s.push('\n');
    let mut row = |label: &str, cell: &dyn Fn(&SavedRun) -> String| {
        let _ = write!(s, "| {label} |");
        for r in runs {
            let _ = write!(s, " {} |", cell(r).replace('|', "\\|"));
        }
        s.push('\n');
    };
    let doctor = |r: &SavedRun, key: &str| -> serde_json::Value {
        r.doctor
            .as_ref()
            .map_or(serde_json::Value::Null, |d| d[key].clone())
    };
    let yes_no = |v: serde_json::Value| match v.as_bool() {
        Some(true) => "yes".to_string(),
        Some(false) => "no".to_string(),
        None => "?".to_string(),
    };
    row("package", &|r| {
        format!("`{}`", r.results["package"].as_str().unwrap_or("?"))
    });
    row("BTF, kprobes, fentry", &|r| {
        format!(
            "{}, {}, {}",
            yes_no(doctor(r, "btf")),
            yes_no(doctor(r, "kprobes")),
            yes_no(doctor(r, "fentry"))
        )
    });
    row("BPF helpers missing", &|r| {
        if r.doctor.is_none() {
            return "?".into();
        }
        let missing: Vec<&str> = [
            ("task_pt_regs", "`bpf_task_pt_regs`"),
            ("attach_cookie", "`bpf_get_attach_cookie`"),
            ("fexit_return", "`bpf_get_func_ret`"),
        ]
        .into_iter()
        .filter(|(key, _)| doctor(r, key) == false)
        .map(|(_, name)| name)
        .collect();
        if missing.is_empty() {
            "none".into()
        } else {
            missing.join(", ")
        }
    });
    let tracepoint = |r: &SavedRun, mode: &str, target: &str| -> Option<bool> {
        doctor(r, "hooks").as_array()?.iter().find_map(|h| {
            (h["mode"] == mode && h["target"] == target).then(|| h["available"] == true)
        })
    };
    row(
        "`sock:sock_*_length`",
        &|r| match tracepoint(r, "tracepoint", "sock:sock_send_length") {
            Some(true) => "yes".into(),
            Some(false) => "no".into(),
            None => "?".into(),
        },
    );
    row("netlink capture (auto)", &|r| {
        let plan = doctor(r, "capture_plan");
        match plan["mode"].as_str() {
            Some(mode) => format!("{mode} (socket layer)"),
            None if plan.is_null() => "?".into(),
            None if tracepoint(r, "tracepoint", "sock:sock_send_length") == Some(true) => {
                "sock tracepoints".into()
            }
            None => "syscall tracepoints".into(),
        }
    });
    row("netlink capture (attached)", &|r| {
        let Some(header) = &r.header else {
            return "?".into();
        };
        let capture = header["netlink_capture"].as_str().unwrap_or("?");
        match capture.strip_prefix("socket layer ") {
            Some(mode) => format!("socket layer {mode}"),
            None => capture
                .split([',', '('])
                .next()
                .unwrap_or(capture)
                .trim()
                .to_string(),
        }
    });
    row("hooks not attached", &|r| {
        let Some(hooks) = r
            .header
            .as_ref()
            .and_then(|h| h["hooks"].as_array().cloned())
        else {
            return "?".into();
        };
        let failed: Vec<String> = hooks
            .iter()
            .filter_map(|h| h.as_str())
            .filter(|h| h.contains(" FAILED: ") && !h.contains(" off "))
            .filter_map(|h| h.split_whitespace().next().map(|p| format!("`{p}`")))
            .collect();
        if failed.is_empty() {
            "none".into()
        } else {
            failed.join(", ")
        }
    });
    row(
        "route lookups",
        &|r| match tracepoint(r, "raw_tp", "fib_table_lookup") {
            Some(true) => "raw tracepoint".into(),
            Some(false) => "tracepoint".into(),
            None => "?".into(),
        },
    );
    let functions = names_in(runs.iter().map(|r| doctor(r, "handler_plan")), "function");
    for function in &functions {
        row(&format!("`{function}` (auto)"), &|r| {
            doctor(r, "handler_plan")
                .as_array()
                .and_then(|plans| plans.iter().find(|p| p["function"] == function.as_str()))
                .map_or("?".into(), |p| {
                    p["mode"].as_str().unwrap_or("off").to_string()
                })
        });
    }
    row("guest suite", &|r| {
        format!(
            "{}, {:.0} s in the guest",
            r.results["suite"].as_str().unwrap_or("?"),
            r.results["guest_seconds"].as_f64().unwrap_or(f64::NAN)
        )
    });
    let binaries = names_in(runs.iter().map(|r| r.results["binaries"].clone()), "name");
    for binary in &binaries {
        row(&format!("`{binary}`"), &|r| {
            let Some(b) = r.results["binaries"]
                .as_array()
                .and_then(|bs| bs.iter().find(|b| b["name"] == binary.as_str()))
            else {
                return "not run".into();
            };
            // A binary that hung and was booted again (vm-test's single retry) is judged by
            // that second run, and says so.
            let retried = b.get("retry").filter(|r| r.is_object());
            let b = retried.unwrap_or(b);
            let tests = b["tests"].as_array().cloned().unwrap_or_default();
            let count = |o: &str| tests.iter().filter(|t| t["outcome"] == o).count();
            let (ok, failed) = (count("ok"), count("FAILED"));
            match b["exit"].as_i64() {
                Some(0) if retried.is_some() => {
                    format!("pass ({ok}) on a second boot, hung on the first")
                }
                Some(0) => format!("pass ({ok})"),
                Some(_) if failed > 0 => format!("**FAIL** ({failed} of {})", ok + failed),
                Some(code) => format!("**FAIL** (exit {code})"),
                None => "**no result**".into(),
            }
        });
    }
    s
}

/// Rewrites docs/kernels.md's kernel-support table from the saved runs in `target/vm-kernels/`.
pub fn write_table() -> anyhow::Result<()> {
    let root = crate::workspace_root();
    let runs = saved_runs(&root.join("target/vm-kernels"))?;
    if runs.is_empty() {
        bail!("no saved runs in target/vm-kernels: run `cargo xtask vm-test --kernel all` first");
    }
    let readme_path = root.join("docs/kernels.md");
    let readme = std::fs::read_to_string(&readme_path)?;
    let (Some(begin), Some(end)) = (readme.find(TABLE_BEGIN), readme.find(TABLE_END)) else {
        bail!("docs/kernels.md has no kernel-table markers ({TABLE_BEGIN} … {TABLE_END})");
    };
    let updated = format!(
        "{}{TABLE_BEGIN}\n{}{}",
        &readme[..begin],
        table(&runs),
        &readme[end..]
    );
    std::fs::write(&readme_path, updated)?;
    println!(
        "kernel-table: docs/kernels.md updated from {} run(s): {}",
        runs.len(),
        runs.iter().map(|r| r.kernel).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}
