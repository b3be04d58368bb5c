#!/usr/bin/env python3
"""Seeds fuzz/corpus/<target>/ from the test fixtures (run from anywhere; then `cargo fuzz cmin`).

- netlink_route / netlink_genl: each LINKTYPE_NETLINK frame of the pcaps in tests/fixtures/nlmon
  and tests/malformed, nlmon header cut off; genl buffers get the IPVS family id 0x20 in front.
- capture_analyze: the pcap/pcapng files themselves.
- recording_replay: the replay-*.jsonl files, plus recordings given as arguments (e.g. made with
  `nodeip-trace analyze --format json FIXTURE.pcap`), whole and line by line.
- addrinfo_record: ring-buffer records laid out as nodeip-trace-common's structs.
"""
import hashlib
import pathlib
import struct
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
LINKTYPE_NETLINK = 253


def put(target, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def pcap_frames(data):
    """(linktype, frame) of a classic pcap file; stops quietly at the first malformed point."""
    if len(data) < 24:
        return
    magic = data[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        return
    linktype = struct.unpack(e + "I", data[20:24])[0]
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack(e + "I", data[off + 8:off + 12])[0]
        frame = data[off + 16:off + 16 + incl]
        if len(frame) < incl:
            return
        yield linktype, frame
        off += 16 + incl


def netlink_buffers(paths):
    for path in paths:
        for linktype, frame in pcap_frames(path.read_bytes()):
            if linktype == LINKTYPE_NETLINK and len(frame) > 16:
                protocol = struct.unpack(">H", frame[14:16])[0]
                if protocol == 0:
                    put("netlink_route", frame[16:])
                elif protocol == 16:
                    put("netlink_genl", struct.pack("=H", 0x20) + frame[16:])


def header(kind, ts_ns=2_000_000, pid=4242, comm=b"getent"):
    return struct.pack("=IIQQQ16s", kind, 4026531840, ts_ns, (pid << 32) | pid, 1, comm)


def entry(family, addr, port=0, socktype=1, protocol=6):
    return struct.pack("=IIII16sII", family, socktype, protocol, port, addr, 0, 0)


def getaddrinfo(node, entries, ret=0, flags=0, hints=(0x20 | 0x08, 0, 1, 0), count=None):
    head = struct.pack("=QiIiiiiII", 1_000_000, ret, flags, *hints,
                       len(entries) if count is None else count, 0)
    results = b"".join(entries) + bytes(40 * (32 - len(entries)))
    return (header(1) + head + node.ljust(256, b"\0") + b"80".ljust(64, b"\0") + results)


def gai_socket(call, sockaddr, ret=0):
    return header(9) + struct.pack("=IiiI28sI", call, ret, 3, len(sockaddr), sockaddr, 0)


def addrinfo_records():
    v4 = lambda a: bytes(a) + bytes(12)
    v6 = bytes.fromhex("fd000000000000000000000000000001")
    put("addrinfo_record", getaddrinfo(b"kubelet.example", [
        entry(2, v4([192, 0, 2, 10]), 0x5000), entry(10, v6, 0x5000),
        entry(2, v4([192, 0, 2, 10]), 0x5000, socktype=2, protocol=17)]))
    put("addrinfo_record", getaddrinfo(b"nowhere", [], ret=-2, flags=0b100))
    put("addrinfo_record", getaddrinfo(b"", [], flags=0b1111, count=99))
    sin = struct.pack("=HH4s8s", 2, 0x5000, bytes([192, 0, 2, 20]), bytes(8))
    sin6 = struct.pack("=HHI16sI", 10, 0x5000, 0, v6, 0)
    put("addrinfo_record", gai_socket(1, sin))
    put("addrinfo_record", gai_socket(2, sin6, ret=-97))
    put("addrinfo_record", header(8))


def main():
    fixtures = sorted((ROOT / "tests" / "fixtures" / "nlmon").glob("*.pcap"))
    malformed = ROOT / "tests" / "malformed"
    captures = sorted(p for p in malformed.iterdir() if ".pcap" in p.name or p.suffix == ".txt")
    netlink_buffers(fixtures + captures)
    for p in fixtures + captures:
        put("capture_analyze", p.read_bytes())
    for p in sorted(malformed.glob("*.jsonl")) + [pathlib.Path(a) for a in sys.argv[1:]]:
        data = p.read_bytes()
        put("recording_replay", data)
        for line in data.splitlines(keepends=True):
            put("recording_replay", line)
    addrinfo_records()


if __name__ == "__main__":
    main()
