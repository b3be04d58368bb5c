//! Cross-checks of our pcap/pcapng output against Wireshark's own dissectors (tshark), and of the
//! IPVS Lua dissector in `contrib/wireshark/ipvs.lua`. tshark is required: CI installs it.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::source::capture::tests::{fixture, fixture_path, read_all, sample_frames, FIXTURES};

const NLMSG_ERROR: u16 = 2;
const IPVS_FAMILY: u16 = 0x20;

fn tshark() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("tshark"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "tshark is not installed, and these tests check our captures against Wireshark's \
                 dissectors: run `cargo xtask setup --for-tests` (CI installs it)"
            )
        })
}

/// Runs tshark and returns its stdout; fails the test with its stderr when it fails.
fn run_tshark(args: &[&str]) -> String {
    let out = Command::new(tshark())
        .args(args)
        .output()
        .expect("running tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark {args:?} failed: {stderr}");
    assert!(!stderr.contains("Lua: Error"), "tshark {args:?}: {stderr}");
    String::from_utf8(out.stdout).expect("tshark prints UTF-8")
}

/// `fields` of each frame of `file`, `|`-separated, a line per frame.
fn tshark_fields(file: &TempFile, fields: &[&str]) -> String {
    let mut args = vec!["-r", file.path(), "-T", "fields", "-E", "separator=|"];
    for field in fields {
        args.extend(["-e", field]);
    }
    run_tshark(&args)
}

/// A file in the temp directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!("nodeip-trace-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The netlink frames of both fixtures, plus our sample frames with tasks.
fn all_frames() -> Vec<NetlinkFrame> {
    let mut frames = Vec::new();
    for (name, _) in FIXTURES {
        frames.extend(read_all(&fixture(name)).0.into_iter().map(|c| c.frame));
    }
    frames.extend(sample_frames());
    frames
}

/// Writes `frames` after a synthetic IPVS family announcement with both writers.
fn write_both(frames: &[NetlinkFrame]) -> (Vec<u8>, Vec<u8>) {
    let wall = frames
        .first()
        .map_or(1_700_000_000_000_000_000, |f| f.wall_ns - 1000);
    let mut pcap = NlmonWriter::new(Vec::new()).unwrap();
    let mut pcapng = NlmonPcapngWriter::new(Vec::new(), &SectionInfo::from_host()).unwrap();
    let sinks: [&mut dyn FrameSink; 2] = [&mut pcap, &mut pcapng];
    for sink in sinks {
        sink.write_genl_family(IPVS_FAMILY, "IPVS", wall).unwrap();
        for frame in frames {
            sink.write_annotated_frame(frame, &[("pod", "default/web-0")])
                .unwrap();
        }
    }
    (pcap.into_inner(), pcapng.into_inner())
}

/// Message types per frame as tshark dissects them: every message, plus the request header that
/// an NLMSG_ERROR echoes (tshark shows it as a header too).
fn our_type_counts(frames: &[NetlinkFrame]) -> BTreeMap<u16, usize> {
    let mut counts = BTreeMap::new();
    for frame in frames {
        let b = &frame.bytes;
        let mut off = 0;
        while off + 16 <= b.len() {
            let len = u32::from_ne_bytes(b[off..off + 4].try_into().unwrap()) as usize;
            if len < 16 {
                break; // tshark stops here too, without a type
            }
            let kind = u16::from_ne_bytes(b[off + 4..off + 6].try_into().unwrap());
            *counts.entry(kind).or_default() += 1;
            if kind == NLMSG_ERROR && len >= 16 + 4 + 16 && off + 36 <= b.len() {
                let echoed = u16::from_ne_bytes(b[off + 24..off + 26].try_into().unwrap());
                *counts.entry(echoed).or_default() += 1;
            }
            off += len.next_multiple_of(4);
        }
    }
    counts
}

/// Checks that tshark finds no malformed frame and no warning, and returns its frame count and
/// message type counts.
fn tshark_type_counts(file: &TempFile) -> (usize, BTreeMap<u16, usize>) {
    let fields = run_tshark(&[
        "-r",
        file.path(),
        "-T",
        "fields",
        "-e",
        "frame.number",
        "-e",
        "_ws.malformed",
        "-e",
        "_ws.expert.severity",
        "-e",
        "netlink.hdr_type",
        "-e",
        "netlink-route.nltype",
        "-e",
        "genl.family_id",
    ]);
    let mut counts = BTreeMap::new();
    let mut frames = 0;
    for line in fields.lines() {
        frames += 1;
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 6, "{line:?}");
        assert_eq!(cols[1], "", "tshark: frame {} is malformed", cols[0]);
        // Packet comments raise a "comment" expert item (severity 0x00100000); nothing more.
        for severity in cols[2].split(',').filter(|s| !s.is_empty()) {
            let severity: u32 = severity.parse().unwrap_or(u32::MAX);
            assert!(
                severity <= 0x0010_0000,
                "tshark: frame {} has expert severity {severity:#x}",
                cols[0]
            );
        }
        for kind in cols[3..]
            .iter()
            .flat_map(|c| c.split(','))
            .filter(|s| !s.is_empty())
        {
            // netlink.hdr_type and genl.family_id print hex, netlink-route.nltype decimal.
            let kind = match kind.strip_prefix("0x") {
                Some(hex) => u16::from_str_radix(hex, 16).unwrap(),
                None => kind.parse().unwrap(),
            };
            *counts.entry(kind).or_default() += 1;
        }
    }
    (frames, counts)
}

#[test]
fn tshark_reads_our_pcap_and_pcapng_cleanly_and_counts_what_we_count() {
    let frames = all_frames();
    let (pcap, pcapng) = write_both(&frames);
    let synthetic = genl_family_frame(IPVS_FAMILY, "IPVS", 0).unwrap();
    let mut expected = our_type_counts(&frames);
    *expected.entry(GENL_ID_CTRL).or_default() += our_type_counts(&[synthetic])[&GENL_ID_CTRL];
    for (name, bytes) in [("all.pcap", pcap), ("all.pcapng", pcapng)] {
        let file = TempFile::new(name, &bytes);
        let (count, counts) = tshark_type_counts(&file);
        assert_eq!(count, frames.len() + 1, "{name}: frame count");
        assert_eq!(counts, expected, "{name}: message types, tshark vs ours");
    }
}

#[test]
fn tshark_shows_pcapng_comments_and_directions() {
    let frames = sample_frames();
    let (_, pcapng) = write_both(&frames);
    let file = TempFile::new("comments.pcapng", &pcapng);
    let out = tshark_fields(&file, &["frame.comment", "frame.packet_flags_direction"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), frames.len() + 1);
    assert_eq!(
        lines[0], "synthetic=genl-family name=IPVS id=0x0020|0x00000001",
        "{out}"
    );
    assert_eq!(
        lines[1], "pid=100 tid=101 comm=ip dir=send pod=default/web-0|0x00000002",
        "{out}"
    );
    assert_eq!(
        lines[2], "pid=100 tid=101 comm=ip dir=recv pod=default/web-0|0x00000001",
        "{out}"
    );
    // capinfos comes with tshark (wireshark-common): it shows the section and interface.
    let capinfos = tshark().with_file_name("capinfos");
    let out = Command::new(&capinfos)
        .arg(file.path())
        .output()
        .expect("running capinfos");
    let info = String::from_utf8_lossy(&out.stdout);
    let host = SectionInfo::from_host();
    for expected in [
        format!("Capture application: {}", host.user_application),
        format!("Capture hardware:    {}", host.hardware),
        format!("Capture oper-sys:    {}", host.os),
        format!("Capture comment:     host={}", host.host),
        "Name = nodeip-trace".to_owned(),
        "Encapsulation = Linux Netlink".to_owned(),
        "Time precision = nanoseconds".to_owned(),
    ] {
        assert!(
            info.contains(&expected),
            "capinfos lacks {expected:?}:\n{info}"
        );
    }
}

/// Issue 19: tshark sees one interface per network namespace, named after it, and each
/// packet's comment, direction and id; nothing malformed.
#[test]
fn tshark_shows_namespaces_directions_and_packet_ids() {
    let (frames, bytes) = super::tests::namespaced_pcapng();
    let file = TempFile::new("namespaces.pcapng", &bytes);
    let out = tshark_fields(
        &file,
        &[
            "frame.interface_name",
            "frame.interface_description",
            "frame.packet_flags_direction",
            "frame.packet_id",
            "_ws.malformed",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), frames.len(), "{out}");
    let description = "netlink traffic seen by nodeip-trace, nlmon framing";
    assert_eq!(
        lines,
        [
            format!("netns 4026531840|network namespace 4026531840: {description}|0x00000002|1|"),
            format!(
                "netns blue|network namespace 4026532001 (`ip netns` blue): {description}|0x00000001|2|"
            ),
            format!("nodeip-trace|{description}|0x00000002|3|"),
            format!("netns 4026531840|network namespace 4026531840: {description}|0x00000001|4|"),
        ],
        "{out}"
    );
}

/// The IPVS frames of the iproute2 fixture (generic netlink, family 0x20).
fn ipvs_frames() -> Vec<NetlinkFrame> {
    let (frames, _) = read_all(&fixture("iproute2-secondary-ipvs.pcap"));
    let frames: Vec<NetlinkFrame> = frames
        .into_iter()
        .map(|c| c.frame)
        .filter(|f| {
            f.protocol == NETLINK_GENERIC
                && f.bytes.get(4..6) == Some(&IPVS_FAMILY.to_ne_bytes()[..])
        })
        .collect();
    assert!(frames.len() >= 10, "the fixture has IPVS traffic");
    frames
}

#[test]
fn synthetic_newfamily_makes_wireshark_name_the_family() {
    let frames = ipvs_frames();
    let (with_family, _) = write_both(&frames);
    let mut writer = NlmonWriter::new(Vec::new()).unwrap();
    for frame in &frames {
        writer.write_frame(frame).unwrap();
    }
    let without_family = writer.into_inner();

    let file = TempFile::new("ipvs-named.pcap", &with_family);
    let named = run_tshark(&["-r", file.path(), "-V"]);
    assert!(
        named.contains("CTRL_CMD_NEWFAMILY"),
        "the synthetic frame dissects as nlctrl"
    );
    assert!(
        named.contains("Family Name: IPVS"),
        "family name in the announcement"
    );
    let tagged = named.matches("Family ID: 0x20 (IPVS)").count();
    assert_eq!(tagged, frames.len(), "every IPVS frame is named");

    let file = TempFile::new("ipvs-unnamed.pcap", &without_family);
    let unnamed = run_tshark(&["-r", file.path(), "-V"]);
    assert!(
        !unnamed.contains("(IPVS)"),
        "control: without the announcement, no name"
    );
    assert!(unnamed.contains("Family ID: 0x20 (Unknown)"));
}

fn lua_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/wireshark/ipvs.lua")
}

#[test]
fn lua_ipvs_dissector_decodes_services_and_destinations() {
    let version = run_tshark(&["-v"]);
    if !version.contains("with Lua") {
        crate::message::skipped(
            "lua_ipvs_dissector_decodes_services_and_destinations: this tshark was built \
             without Lua (`tshark -v` does not say \"with Lua\")",
        );
        return;
    }
    let script = format!("lua_script:{}", lua_script().display());
    let (ours, _) = write_both(&ipvs_frames());
    let ours = TempFile::new("ipvs-lua.pcap", &ours);
    let fixture = fixture_path("iproute2-secondary-ipvs.pcap");
    for file in [fixture.to_str().unwrap(), ours.path()] {
        let fields = run_tshark(&[
            "-X",
            &script,
            "-r",
            file,
            "-Y",
            "ipvs_nl",
            "-T",
            "fields",
            "-e",
            "ipvs_nl.cmd",
            "-e",
            "ipvs_nl.svc.addr",
            "-e",
            "ipvs_nl.svc.port",
            "-e",
            "ipvs_nl.svc.sched_name",
            "-e",
            "ipvs_nl.dest.addr",
            "-e",
            "ipvs_nl.dest.port",
        ]);
        let service = fields
            .lines()
            .find(|l| l.starts_with("1\t"))
            .unwrap_or_else(|| panic!("{file}: no IPVS_CMD_NEW_SERVICE in\n{fields}"));
        assert_eq!(service, "1\t192.0.2.10\t30080\trr\t\t", "{file}");
        assert!(
            fields
                .lines()
                .any(|l| l == "5\t192.0.2.10\t30080\t\t198.51.100.5\t8080"),
            "{file}: {fields}"
        );
        let verbose = run_tshark(&["-X", &script, "-r", file, "-V", "-Y", "ipvs_nl.cmd == 1"]);
        assert!(verbose.contains("Virtual address: 192.0.2.10"), "{file}");
        assert!(verbose.contains("Virtual port: 30080"), "{file}");
        assert!(verbose.contains("Scheduler: rr"), "{file}");
    }
}
