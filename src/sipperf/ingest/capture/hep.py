"""HEP (Homer Encapsulation Protocol) in plain Python: the pyshark engine's twin of the compiled
rule (:mod:`sipperf.ingest.capture.scan.hep`), since tshark 4.0 has no HEP dissector.

A Homer capture agent (``captagent``, ``heplify``), Kamailio's ``siptrace`` and OpenSIPS's
``proto_hep`` send each SIP packet they capture to a collector, encapsulated with its original
addresses, ports and capture time.  :func:`decode` reads one HEP packet:

* HEPv3 / EEP: ``"HEP3"``, a 16-bit total length, then chunks (16-bit vendor id, type id,
  length, all big-endian).  Generic chunks (vendor 0): 0x0001 IP family (2 IPv4, 10 IPv6),
  0x0002 IP protocol, 0x0003/0x0004 IPv4 source/destination, 0x0005/0x0006 IPv6,
  0x0007/0x0008 source/destination port, 0x0009 time (s), 0x000a time (µs), 0x000b payload
  type (1 = SIP), 0x000c capture agent id, 0x000f payload, 0x0010 compressed payload.
* HEPv1 / HEPv2: version byte, header length (16 IPv4, 40 IPv6), family, protocol, the ports
  (big-endian) and the addresses; HEPv2 then a 12-byte time block: seconds, microseconds and a
  16-bit agent id, little-endian (as Kamailio's and OpenSIPS's senders write them).  Only
  accepted when a SIP start line follows the header (the rule has no magic number).

The message's time is the agent's capture time (seconds * 10^9 + µs * 10^3 ns); HEPv1 has
none (``ts_ns`` None: the collector's time is used).
"""
from __future__ import annotations

import ipaddress
import struct
from typing import NamedTuple

from sipperf.ingest.capture import sipmsg

#: HEPv3 chunk types (vendor 0) read here
CHUNKS = {1: "ip_family", 2: "ip_proto", 3: "src_ip4", 4: "dst_ip4", 5: "src_ip6", 6: "dst_ip6",
          7: "src_port", 8: "dst_port", 9: "time_sec", 10: "time_usec", 11: "proto_type",
          12: "capture_id", 15: "payload", 16: "compressed_payload"}
SIP = 1  # payload type of SIP


class Hep(NamedTuple):
    """One decoded HEP packet."""

    version: int
    src: str
    dst: str
    sport: int
    dport: int
    ip_proto: int
    ts_ns: int | None
    capture_id: int
    proto_type: int
    payload: bytes | None
    compressed: bool = False


class HepError(ValueError):
    """A HEP packet whose chunks do not add up."""


def is_hep3(data: bytes) -> bool:
    return len(data) >= 6 and data[:4] == b"HEP3"


def hep2_header(data: bytes) -> int | None:
    """Header length (payload offset) of a HEPv1/v2 packet, or None if ``data`` is not one."""
    if len(data) < 16 or data[0] not in (1, 2):
        return None
    hl, fam = data[1], data[2]
    if not ((hl == 16 and fam == 2) or (hl == 40 and fam in (10, 24, 28, 30))):
        return None
    q = hl + (12 if data[0] == 2 else 0)
    rest = data[q:q + 4096]
    if q >= len(data) or b"\n" not in rest or sipmsg.start_line(rest) is None:
        return None
    return q


def _ip(raw: bytes) -> str:
    return str(ipaddress.ip_address(raw))


def decode(data: bytes) -> Hep | None:
    """The HEP packet ``data`` (a UDP payload, or one packet of a TCP stream), None if it is not
    HEP; :class:`HepError` when it is HEPv3 with inconsistent lengths."""
    if is_hep3(data):
        total = struct.unpack_from(">H", data, 4)[0]
        if total < 6 or total > len(data):
            raise HepError(f"HEP3 total length {total} outside 6..{len(data)}")
        f: dict[str, object] = {}
        p = 6
        while p < total:
            if p + 6 > total:
                raise HepError("chunk header cut short")
            vendor, typ, ln = struct.unpack_from(">HHH", data, p)
            if ln < 6 or p + ln > total:
                raise HepError(f"chunk length {ln} at byte {p}")
            body = data[p + 6:p + ln]
            if vendor == 0 and typ in CHUNKS:
                name = CHUNKS[typ]
                if name in ("ip_family", "ip_proto", "proto_type") and body:
                    f[name] = body[0]
                elif name in ("src_ip4", "dst_ip4") and len(body) >= 4:
                    f[name[:3]] = _ip(body[:4])
                elif name in ("src_ip6", "dst_ip6") and len(body) >= 16:
                    f[name[:3]] = _ip(body[:16])
                elif name in ("src_port", "dst_port") and len(body) >= 2:
                    f[name] = struct.unpack(">H", body[:2])[0]
                elif name in ("time_sec", "time_usec") and len(body) >= 4:
                    f[name] = struct.unpack(">I", body[:4])[0]
                elif name == "capture_id" and len(body) >= 2:
                    f[name] = struct.unpack(">I" if len(body) >= 4 else ">H", body[:4 if len(body) >= 4 else 2])[0]
                elif name == "payload":
                    f[name] = body
                elif name == "compressed_payload":
                    f["compressed"] = True
            p += ln
        if "src" not in f or "dst" not in f:
            raise HepError("no source or destination address chunk")
        ts = (f["time_sec"] * 1_000_000_000 + f.get("time_usec", 0) * 1000) if "time_sec" in f else None
        return Hep(3, f["src"], f["dst"], f.get("src_port", 0), f.get("dst_port", 0), f.get("ip_proto", 17),
                   ts, f.get("capture_id", 0), f.get("proto_type", -1), f.get("payload"),
                   bool(f.get("compressed", False)))
    q = hep2_header(data)
    if q is None:
        return None
    v, hl = data[0], data[1]
    sport, dport = struct.unpack_from(">HH", data, 4)
    n = 4 if hl == 16 else 16
    src, dst = _ip(data[8:8 + n]), _ip(data[8 + n:8 + 2 * n])
    ts = cid = None
    if v == 2:
        sec, usec, cid = struct.unpack_from("<IIH", data, hl)
        ts = sec * 1_000_000_000 + usec * 1000
    return Hep(v, src, dst, sport, dport, data[3], ts, cid or 0, SIP, data[q:])


def sip_messages(h: Hep) -> list[tuple[sipmsg.SipFields, int]]:
    """The SIP messages of a decoded HEP packet with their sizes: one per UDP payload (its
    whole length), the Content-Length framed messages of a TCP payload."""
    if h.payload is None:
        return []
    if h.ip_proto != 6:
        f = sipmsg.parse_message(h.payload, framing=False)
        return [] if f is None else [(f, len(h.payload))]
    return span_messages(h.payload)


def span_messages(data: bytes) -> list[tuple[sipmsg.SipFields, int]]:
    """Every SIP message of a span whose end is known (a WebSocket message, a HEP payload that
    carried TCP): framed by Content-Length; without one a message runs to the end of the span
    unless a start line follows its header block (the compiled twin is
    :func:`sipperf.ingest.capture.scan.messages._emit_span`).  Stops at bytes that are not SIP."""
    out = []
    h = 0
    while h < len(data):
        while h < len(data) and data[h] in (10, 13):
            h += 1
        if h >= len(data):
            break
        rest = data[h:]
        hend = sipmsg.header_end(rest)
        mlen = len(rest)
        if hend >= 0:
            cl = sipmsg.content_length(rest[:hend])
            if cl is not None:
                mlen = min(hend + cl, len(rest))
            elif hend < len(rest) and b"\n" in rest[hend:hend + 4096] and sipmsg.start_line(rest[hend:hend + 4096]):
                mlen = hend
        f = sipmsg.parse_message(rest[:mlen], framing=False)
        if f is None:
            break
        out.append((f, mlen))
        h += mlen
    return out
