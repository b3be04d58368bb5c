//! The pipeline is visible in the imports: every userspace module has a rank, and a module may
//! import only modules of a lower rank (and itself). Under all, `message` (stderr) imports
//! nothing; the floor (`model`) imports nothing above it; the pure stages follow in pipeline
//! order (decode → correlate → explain → sink); the I/O adapters (`source`, `probe`) stand on
//! the stages; the driver (`pipeline`) wires them; the
//! commands and the CLI sit on top. The eBPF crate's modules import each other without a circle.
//!
//! Imports are read from the source text (`crate::x` paths outside comments and test modules), so
//! a doc link is not an import; a rule broken here names the file and the path.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Userspace modules, lowest first; a module may import only those before it in this list.
const RANKS: &[&[&str]] = &[
    // Every stderr message goes through `message`, which imports nothing.
    &["message"],
    &["model"],
    &["decode"],
    &["correlate"],
    &["explain"],
    &["sink"],
    // Read-only inspection of the machine, under the tracer that acts on it.
    &["host"],
    &["source", "probe"],
    &["pipeline"],
    &["command"],
    &["cli", "main", "lib"],
];

fn rank_of(module: &str) -> Option<usize> {
    RANKS.iter().position(|tier| tier.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            // In-tree test modules (`foo/tests.rs`, `foo/tests/`) may reach anywhere.
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path
                .file_name()
                .is_some_and(|n| n != "tests.rs" && !n.to_string_lossy().ends_with("_tests.rs"))
        {
            out.push(path);
        }
    }
}

/// The code of a file without comments and without its `#[cfg(test)] mod tests { … }`.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read source file");
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => &text[..],
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" // ").next().unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::…` paths, including `use crate::{a, b}`.
fn crate_imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert(name);
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.insert(name);
        }
        rest = after;
    }
    found.retain(|n| !n.is_empty() && n.chars().next().is_some_and(|c| c.is_lowercase()));
    found
}

fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel.components().next().expect("non-empty path");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

#[test]
fn no_userspace_module_imports_a_module_above_it() {
    let src = nodeip_trace_tests::workspace_root().join("nodeip-trace/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    for file in &files {
        let me = top_module(&src, file);
        let my_rank = rank_of(&me)
            .unwrap_or_else(|| panic!("{}: module {me} has no rank in RANKS", file.display()));
        for other in crate_imports(&code_of(file)) {
            if other == me {
                continue;
            }
            match rank_of(&other) {
                Some(r) if r < my_rank => {}
                // Functions at the crate root (main.rs's allocator hook) are the binary's.
                None if my_rank == RANKS.len() - 1 => {}
                _ => broken.push(format!(
                    "{} ({me}) imports crate::{other}",
                    file.strip_prefix(&src).unwrap_or(file).display()
                )),
            }
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the pipeline's order (see RANKS):\n  {}",
        broken.join("\n  ")
    );
}

/// Depth-first search for a circle in `edges`; returns one, as a path, if any.
fn find_circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|n| n == node) {
            let mut circle = path[i..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn ebpf_modules_import_each_other_without_a_circle() {
    let src = nodeip_trace_tests::workspace_root().join("nodeip-trace-ebpf/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| top_module(&src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let me = top_module(&src, file);
        let imports = crate_imports(&code_of(file));
        edges.entry(me.clone()).or_default().extend(
            imports
                .into_iter()
                .filter(|m| *m != me && modules.contains(m) && m != "main"),
        );
    }
    assert_eq!(find_circle(&edges), None, "eBPF module imports: {edges:#?}");
}

#[test]
fn the_import_reader_sees_groups_and_skips_comments() {
    let code = code_of(&nodeip_trace_tests::workspace_root().join(file!()));
    // The phrase opens this file's module doc and appears once more, here, in code.
    assert_eq!(code.matches("Imports are read from").count(), 1);
    let found =
        crate_imports("use crate::{model::event::Event, decode};\nlet x = crate::sink::text::f();");
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["decode", "model", "sink"]
    );
}

/// The module path of a source file under `src` (`decode/netlink/mod.rs` → `decode::netlink`,
/// `main.rs`/`lib.rs` → the root).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "main" | "lib")
    ) {
        parts.pop();
    }
    parts
}

/// The absolute module paths `code` (of the module at `me`) names through `crate::`, `super::`
/// and `self::` paths, one level of `{…}` groups included; each as far as its lowercase
/// segments go (a type or function ends it).
fn named_paths(code: &str, me: &[String]) -> Vec<Vec<String>> {
    fn segments(text: &str) -> (Vec<String>, &str) {
        let mut out = Vec::new();
        let mut rest = text;
        loop {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name.is_empty() {
                break;
            }
            rest = &rest[name.len()..];
            out.push(name);
            match rest.strip_prefix("::") {
                Some(r) => rest = r,
                None => break,
            }
        }
        (out, rest)
    }
    let mut found = Vec::new();
    let starts = ["crate::", "super::", "self::"];
    let mut at = 0;
    while let Some((i, start)) = starts
        .iter()
        .filter_map(|s| code[at..].find(s).map(|i| (at + i, *s)))
        .min()
    {
        at = i + start.len();
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut base: Vec<String> = match start {
            "crate::" => Vec::new(),
            "super::" => me[..me.len().saturating_sub(1)].to_vec(),
            _ => me.to_vec(),
        };
        let (mut path, rest) = segments(&code[at..]);
        while path.first().is_some_and(|s| s == "super") {
            path.remove(0);
            base.pop();
        }
        base.extend(path);
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let (more, _) = segments(item.trim());
                let mut p = base.clone();
                p.extend(more);
                found.push(p);
            }
        } else {
            found.push(base);
        }
    }
    for p in &mut found {
        if let Some(i) = p
            .iter()
            .position(|s| !s.chars().next().is_some_and(char::is_lowercase))
        {
            p.truncate(i);
        }
    }
    found
}

/// For each folder of `src`, the imports between its children (a file's, or a subfolder's
/// files'), and the first circle among them, if any.
fn folder_circles(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let me = module_path(src, file);
        for named in named_paths(&code_of(file), &me) {
            // The deepest folder both sit in; a folder's own mod.rs may name its children.
            let common = me.iter().zip(&named).take_while(|(a, b)| a == b).count();
            if common >= me.len() || common >= named.len() {
                continue;
            }
            let (from, to) = (me[common].clone(), named[common].clone());
            edges
                .entry(me[..common].to_vec())
                .or_default()
                .entry(from)
                .or_default()
                .insert(to);
        }
    }
    edges
        .iter()
        .filter_map(|(folder, e)| {
            find_circle(e).map(|c| format!("{}: {}", folder.join("::"), c.join(" → ")))
        })
        .collect()
}

/// Inside a folder, no file imports another that (through others) imports it back: each
/// folder's files form layers too. Checked for the tool's crate and for xtask.
#[test]
fn no_folder_s_files_import_each_other_in_a_circle() {
    let root = nodeip_trace_tests::workspace_root();
    let mut circles = Vec::new();
    for crate_src in ["nodeip-trace/src", "xtask/src"] {
        for c in folder_circles(&root.join(crate_src)) {
            circles.push(format!("{crate_src}: {c}"));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles inside folders:\n  {}",
        circles.join("\n  ")
    );
}
