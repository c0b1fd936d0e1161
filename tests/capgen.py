"""Small helpers for tests that write or rewrite captures (byte layouts of pcap/pcapng,
Ethernet, IPv4/IPv6, UDP, TCP).  Every capture they write is SYNTHETIC or a derivation of a
real fixture; the test that uses them says which."""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterable

from sipperf.ingest.capture.fast import iter_records


def ipv4_udp(payload: bytes, src=b"\x7f\x00\x00\x01", dst=b"\x7f\x00\x00\x02", sport=5060,
             dport=5060, ident=1) -> bytes:
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload
    return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), ident, 0, 64, 17, 0, src, dst) + udp


def eth(ip: bytes, ethertype: int = 0x0800) -> bytes:
    return b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb" + struct.pack(">H", ethertype) + ip


def write_pcap(path: Path, frames: Iterable[bytes], link: int = 1, t0_ns: int = 1_700_000_000_000_000_000,
               step_ns: int = 1000, times: Iterable[int] | None = None) -> Path:
    """Classic nanosecond pcap, little-endian."""
    frames = list(frames)
    times = list(times) if times is not None else [t0_ns + i * step_ns for i in range(len(frames))]
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, link))
        for t, f in zip(times, frames):
            fh.write(struct.pack("<IIII", t // 1_000_000_000, t % 1_000_000_000, len(f), len(f)))
            fh.write(f)
    return path


def shb() -> bytes:
    return struct.pack("<IIIHHq", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1) + struct.pack("<I", 28)


def idb(link: int = 1, tsresol: int | None = 9) -> bytes:
    opt = b""
    if tsresol is not None:
        opt = struct.pack("<HH", 9, 1) + bytes([tsresol, 0, 0, 0]) + struct.pack("<HH", 0, 0)
    n = 20 + len(opt)
    return struct.pack("<IIHHI", 1, n, link, 0, 0) + opt + struct.pack("<I", n)


def epb(data: bytes, ts_ticks: int, iface: int = 0) -> bytes:
    pad = (-len(data)) % 4
    n = 32 + len(data) + pad
    return (struct.pack("<IIIIIII", 6, n, iface, ts_ticks >> 32, ts_ticks & 0xFFFFFFFF, len(data), len(data))
            + data + b"\0" * pad + struct.pack("<I", n))


def spb(data: bytes) -> bytes:
    pad = (-len(data)) % 4
    n = 16 + len(data) + pad
    return struct.pack("<III", 3, n, len(data)) + data + b"\0" * pad + struct.pack("<I", n)


def records(path: Path) -> list[tuple[int, int, bytes]]:
    """(ts_ns, link, bytes) of every packet of a plain pcap/pcapng fixture."""
    return list(iter_records(path))


def write_records(path: Path, recs: Iterable[tuple[int, int, bytes]]) -> Path:
    """Write (ts_ns, link, bytes) records as a pcapng with one interface per link type (ns)."""
    recs = list(recs)
    links: dict[int, int] = {}
    out = [shb()]
    for _, link, _ in recs:
        if link not in links:
            links[link] = len(links)
            out.append(idb(link))
    for ts, link, data in recs:
        out.append(epb(data, ts, links[link]))
    Path(path).write_bytes(b"".join(out))
    return Path(path)


def tcp_parts(d: bytes, l2: int = 16) -> tuple[bytes, bytes, bytes, int, bytes]:
    """(link header, IPv4 header, TCP header, seq, payload) of an IPv4/TCP frame."""
    ihl = (d[l2] & 15) * 4
    tot = struct.unpack(">H", d[l2 + 2:l2 + 4])[0]
    t0 = l2 + ihl
    thl = (d[t0 + 12] >> 4) * 4
    return d[:l2], d[l2:t0], d[t0:t0 + thl], struct.unpack(">I", d[t0 + 4:t0 + 8])[0], d[t0 + thl:l2 + tot]


def tcp_frame(l2: bytes, ip: bytes, tcp: bytes, seq: int, payload: bytes) -> bytes:
    """An IPv4/TCP frame with the given seq and payload (lengths fixed, checksums zeroed)."""
    ip = bytearray(ip)
    ip[2:4] = struct.pack(">H", len(ip) + len(tcp) + len(payload))
    ip[10:12] = b"\0\0"
    tcp = bytearray(tcp)
    tcp[4:8] = struct.pack(">I", seq & 0xFFFFFFFF)
    return bytes(l2) + bytes(ip) + bytes(tcp) + payload
