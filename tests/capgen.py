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
    Path(path).write_bytes(pcapng_bytes(recs))
    return Path(path)


def pcapng_bytes(recs: Iterable[tuple[int, int, bytes]]) -> bytes:
    """(ts_ns, link, bytes) records as the bytes of a pcapng with one interface per link type."""
    recs = list(recs)
    links: dict[int, int] = {}
    out = [shb()]
    for _, link, _ in recs:
        if link not in links:
            links[link] = len(links)
            out.append(idb(link))
    for ts, link, data in recs:
        out.append(epb(data, ts, links[link]))
    return b"".join(out)


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


# ====================================================================================== issue 23
# Re-framing a real capture the ways real networks carry SIP: TCP segments out of order,
# duplicated and overlapping; SIP over WebSocket (a WebRTC gateway's caller leg); HEP from
# Homer capture agents; and the classes a reader must refuse by name (TLS, wss, SCTP, ESP,
# SigComp).  Every generator takes the (ts_ns, link, bytes) records of a REAL fixture and
# returns new records (SYNTHETIC framing of real SIP bytes) plus, where the answer changes in
# a known way, what the packet table must then hold.
import random as _random
from dataclasses import dataclass, field as _field

import ipaddress as _ipaddress

LINK_L2 = {1: 14, 113: 16, 276: 20, 101: 0, 228: 0, 229: 0}


@dataclass
class Pkt:
    """One IPv4/IPv6 UDP or TCP packet of a capture, decoded."""

    ts: int
    link: int
    l2: bytes
    ver: int
    src: bytes
    dst: bytes
    proto: int
    sport: int
    dport: int
    payload: bytes
    seq: int = 0
    ack: int = 0
    flags: int = 0
    index: int = -1

    @property
    def src_ep(self) -> tuple[bytes, int]:
        return self.src, self.sport

    @property
    def dst_ep(self) -> tuple[bytes, int]:
        return self.dst, self.dport


def decode(ts: int, link: int, data: bytes, index: int = -1) -> Pkt | None:
    """The IP/UDP/TCP layers of a record (Ethernet, Linux cooked v1/v2 or raw IP), or None."""
    l2n = LINK_L2.get(link)
    if l2n is None or len(data) < l2n + 20:
        return None
    ipb = data[l2n:]
    ver = ipb[0] >> 4
    if ver == 4:
        ihl = (ipb[0] & 15) * 4
        tot = struct.unpack(">H", ipb[2:4])[0] or len(ipb)
        proto, src, dst, l4 = ipb[9], ipb[12:16], ipb[16:20], ipb[ihl:tot]
    elif ver == 6:
        plen = struct.unpack(">H", ipb[4:6])[0]
        proto, src, dst, l4 = ipb[6], ipb[8:24], ipb[24:40], ipb[40:40 + plen]
    else:
        return None
    if proto == 17 and len(l4) >= 8:
        sport, dport, ulen = struct.unpack(">HHH", l4[:6])
        return Pkt(ts, link, data[:l2n], ver, src, dst, 17, sport, dport, l4[8:ulen], index=index)
    if proto == 6 and len(l4) >= 20:
        sport, dport, seq, ack = struct.unpack(">HHII", l4[:12])
        thl = (l4[12] >> 4) * 4
        return Pkt(ts, link, data[:l2n], ver, src, dst, 6, sport, dport, l4[thl:], seq, ack, l4[13], index)
    return None


def packets(recs) -> list[Pkt]:
    return [p for i, (ts, link, d) in enumerate(recs) if (p := decode(ts, link, d, i)) is not None]


def ip_layer(ver: int, src: bytes, dst: bytes, proto: int, l4: bytes, ident: int = 0) -> bytes:
    if ver == 4:
        return struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), ident & 0xFFFF, 0x4000, 64, proto, 0,
                           src, dst) + l4
    return struct.pack(">IHBB16s16s", 0x60000000, len(l4), proto, 64, src, dst) + l4


def udp_layer(sport: int, dport: int, payload: bytes) -> bytes:
    return struct.pack(">HHHH", sport, dport, 8 + len(payload), 0) + payload


def tcp_layer(sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    return struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                       65535, 0, 0) + payload


def l2_for(link: int, l2: bytes, ver: int) -> bytes:
    """The link header ``l2`` (of a packet of this link type) for an IP version ``ver``."""
    et = struct.pack(">H", 0x0800 if ver == 4 else 0x86DD)
    if link == 1:
        return l2[:12] + et
    if link == 113:
        return l2[:14] + et
    if link == 276:
        return et + l2[2:]
    return b""


def rebuild(p: Pkt, payload: bytes | None = None, **kw) -> bytes:
    """The packet's frame with another payload / seq / ports ... (lengths fixed, checksums 0)."""
    q = Pkt(**{**p.__dict__, **kw})
    pl = p.payload if payload is None else payload
    l4 = (udp_layer(q.sport, q.dport, pl) if q.proto == 17 else
          tcp_layer(q.sport, q.dport, q.seq, q.ack, q.flags, pl))
    return l2_for(q.link, q.l2, q.ver) + ip_layer(q.ver, q.src, q.dst, q.proto, l4)


TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 1, 2, 4, 8, 16


# ------------------------------------------------------------------ TCP out of order
def tcp_reframe(recs, rng: _random.Random, *, pieces=(2, 4), shuffle=True, duplicate=0.0,
                overlap=0.0, retransmit=0.0, cross=0.0) -> list[tuple[int, int, bytes]]:
    """Every TCP data segment cut into 2-4 pieces that are written in a random order (later bytes
    before earlier ones), each with the segment's own capture time, so every SIP message is
    completed at the same instant as in the original; optionally a piece written twice
    (``duplicate``), a piece that overlaps its neighbours with the same bytes (``overlap``), the
    whole segment again later (``retransmit``, same bytes, same time).  With ``cross`` > 0,
    that share of consecutive data-segment pairs of a flow is also swapped across segments
    (the later segment, keeping its own time, written first): times then change by the
    rule "a message's time is that of the packet completing it" (see tcp_completion)."""
    out: list[tuple[int, int, bytes]] = []
    for ts, link, d in recs:
        p = decode(ts, link, d)
        if p is None or p.proto != 6 or not p.payload or len(p.payload) < 8:
            out.append((ts, link, d))
            continue
        n = len(p.payload)
        k = rng.randint(*pieces)
        cuts = sorted(rng.sample(range(1, n), min(k - 1, n - 1)))
        bounds = list(zip([0] + cuts, cuts + [n]))
        segs = [(a, b) for a, b in bounds]
        if overlap and rng.random() < overlap and len(bounds) >= 2:
            a, b = bounds[0][0], bounds[1][1]  # bytes of the first two pieces, once more
            segs.append((max(0, a + 1), b))
        if duplicate and rng.random() < duplicate:
            segs.append(rng.choice(bounds))
        if shuffle:
            rng.shuffle(segs)
        for a, b in segs:
            out.append((ts, link, rebuild(p, p.payload[a:b], seq=p.seq + a)))
        if retransmit and rng.random() < retransmit:
            out.append((ts, link, d))
    if cross:
        out = _swap_across(out, rng, cross)
    return out


def _swap_across(recs, rng, share):
    """Swap data packets of the same TCP flow with the flow's previous data packet (the later
    one, keeping its own capture time, written where the earlier one was)."""
    recs = list(recs)
    last: dict[tuple, int] = {}
    for i in range(len(recs)):
        p = decode(*recs[i])
        if p is None or p.proto != 6 or not p.payload:
            continue
        key = (p.src, p.sport, p.dst, p.dport)
        j = last.get(key)
        if j is not None and recs[j][0] != recs[i][0] and rng.random() < share:
            recs[j], recs[i] = recs[i], recs[j]
            last.pop(key)
            continue
        last[key] = i
    return recs


def completion_of(recs) -> dict[tuple, list[tuple[int, int]]]:
    """Per TCP flow (src, sport, dst, dport): the in-order stream as a list of
    (end offset, file position of the packet whose arrival made the stream contiguous up to
    there), in plain Python, from sequence numbers alone (SYN sets the origin; bytes already
    present are ignored: the first copy wins)."""
    flows: dict[tuple, dict] = {}
    out: dict[tuple, list[tuple[int, int]]] = {}
    for pos, (ts, link, d) in enumerate(recs):
        p = decode(ts, link, d)
        if p is None or p.proto != 6:
            continue
        key = (p.src, p.sport, p.dst, p.dport)
        f = flows.get(key)
        if p.flags & TCP_SYN:
            flows[key] = f = {"isn": (p.seq + 1) & 0xFFFFFFFF, "have": set(), "next": 0}
            out.setdefault(key, [])
            continue
        if f is None or not p.payload:
            continue
        off = (p.seq - f["isn"]) & 0xFFFFFFFF
        f["have"].update(range(off, off + len(p.payload)))
        nxt = f["next"]
        while nxt in f["have"]:
            nxt += 1
        if nxt > f["next"]:
            out[key].append((nxt, pos))
            f["next"] = nxt
    return out


# ------------------------------------------------------------------------ WebSocket
WS_GET = (b"GET /ws HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://%s\r\n"
          b"Sec-WebSocket-Protocol: sip\r\nSec-WebSocket-Version: 13\r\n\r\n")
WS_101 = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: sip\r\n\r\n")


def ws_frame(payload: bytes, opcode: int = 1, fin: bool = True, key: bytes | None = None) -> bytes:
    """One RFC 6455 frame; masked with ``key`` (4 bytes) when given (client to server)."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    m = 0x80 if key is not None else 0
    if n < 126:
        h = struct.pack(">BB", b0, m | n)
    elif n < 65536:
        h = struct.pack(">BBH", b0, m | 126, n)
    else:
        h = struct.pack(">BBQ", b0, m | 127, n)
    if key is None:
        return h + payload
    return h + key + bytes(c ^ key[i & 3] for i, c in enumerate(payload))


@dataclass
class WsLeg:
    """Options of :func:`to_websocket` (the defaults: one frame per message, one segment each)."""

    fragment: float = 0.0      # share of messages sent as 2-3 frames (FIN=0 + continuation)
    bundle: float = 0.0        # share of messages sent in one frame with the next one
    split: float = 0.0         # share of TCP segments cut in two (same time)
    reorder: bool = False      # write the two halves of a cut segment in reverse order
    ping_every: int = 0        # a ping from the server (and the pong) every N messages
    upgrade: bool = True       # the HTTP Upgrade is in the capture
    close: bool = True         # close frames at the end
    acks: bool = True          # a pure ACK after every data segment
    ws_port: int = 8080
    client_port: int = 51000
    seed: int = 7
    framing: str = "ws"        # "ws", or "tcp": the same connection carrying SIP itself
    zero_mask: bool = False    # client frames masked with the key 0 (the bytes stay readable)


def to_websocket(recs, client: tuple[str, int], server: tuple[str, int], opt: WsLeg | None = None):
    """The UDP leg between ``client`` and ``server`` (ip, port) re-framed as SIP over WebSocket
    (RFC 7118): a TCP connection from the client's address (port ``client_port``) to the
    server's address (port ``ws_port``), the HTTP Upgrade, then each datagram's payload as a
    WebSocket message (client frames masked), at the datagram's own capture time.  Returns
    (records, expect) where expect maps the index of every re-framed record to (new ts,
    new sport, new dport): what its packet-table row must hold (transport "ws").
    ``framing="tcp"``: the same connection (handshake, segments, ACKs) carrying the SIP
    messages themselves (SIP over TCP, transport "tcp")."""
    opt = opt or WsLeg()
    rng = _random.Random(opt.seed)
    c_ip, s_ip = _ipaddress.ip_address(client[0]).packed, _ipaddress.ip_address(server[0]).packed
    leg = []
    for p in packets(recs):
        if p.proto == 17 and ((p.src, p.sport, p.dst, p.dport) == (c_ip, client[1], s_ip, server[1])
                              or (p.src, p.sport, p.dst, p.dport) == (s_ip, server[1], c_ip, client[1])):
            leg.append(p)
    if not leg:
        raise ValueError(f"no UDP packet between {client} and {server}")
    tmpl = leg[0]
    ver = tmpl.ver
    seq = {"c": 1_000_000, "s": 7_000_000}
    cp, sp = opt.client_port, opt.ws_port

    def seg(side, t, payload, flags=TCP_ACK | TCP_PSH):
        src, dst, spt, dpt = (c_ip, s_ip, cp, sp) if side == "c" else (s_ip, c_ip, sp, cp)
        other = "s" if side == "c" else "c"
        l4 = tcp_layer(spt, dpt, seq[side], seq[other], flags, payload)
        rec = (t, tmpl.link, l2_for(tmpl.link, tmpl.l2, ver) + ip_layer(ver, src, dst, 6, l4))
        seq[side] = (seq[side] + len(payload) + (1 if flags & (TCP_SYN | TCP_FIN) else 0)) & 0xFFFFFFFF
        return rec

    def data(side, t, payload, out):
        """payload as one or two segments (+ the peer's ACK)."""
        if opt.split and rng.random() < opt.split and len(payload) > 8:
            k = rng.randrange(1, len(payload))
            s0 = seq[side]
            a = seg(side, t, payload[:k])
            b = seg(side, t, payload[k:])
            if opt.reorder:
                a, b = b, a
            out += [a, b]
            assert seq[side] == (s0 + len(payload)) & 0xFFFFFFFF
        else:
            out.append(seg(side, t, payload))
        if opt.acks:
            out.append(seg("s" if side == "c" else "c", t + 1000, b"", TCP_ACK))

    t0 = leg[0].ts
    pre = []
    ws = opt.framing == "ws"
    if opt.upgrade:
        seq["c"] -= 1
        seq["s"] -= 1
        pre.append(seg("c", t0 - 5_000_000, b"", TCP_SYN))
        pre.append(seg("s", t0 - 4_900_000, b"", TCP_SYN | TCP_ACK))
        pre.append(seg("c", t0 - 4_800_000, b"", TCP_ACK))
        if ws:
            host = str(_ipaddress.ip_address(s_ip)).encode()
            data("c", t0 - 4_000_000, WS_GET % (host, sp, host), pre)
            data("s", t0 - 3_000_000, WS_101, pre)
    if not ws:
        def ws_frame_(payload, opcode=1, fin=True, key=None):  # noqa: ARG001 - SIP itself
            return payload
    else:
        ws_frame_ = ws_frame
    leg_idx = {p.index for p in leg}
    out, expect = [], {}
    count = 0
    pending_bundle = None
    for i, (ts, link, d) in enumerate(recs):
        if i not in leg_idx:
            out.append((ts, link, d))
            continue
        p = decode(ts, link, d)
        side = "c" if (p.src, p.sport) == (c_ip, client[1]) else "s"
        key = (bytes(4) if opt.zero_mask else bytes(rng.randrange(256) for _ in range(4))) if side == "c" else None
        if i == min(leg_idx):
            out += pre
        payload = p.payload
        held = [i]
        if pending_bundle is not None:
            ps_, pl_, idx_, pts_ = pending_bundle
            pending_bundle = None
            if ps_ == side:  # the held message(s) and this one in one frame, at this time
                payload = pl_ + payload
                held = idx_ + [i]
            else:  # the other direction intervened: send what was held, at its own time
                data(ps_, pts_, ws_frame_(pl_, key=bytes(4) if ps_ == "c" else None), out)
        for j in held:
            expect[j] = (ts, cp if side == "c" else sp, sp if side == "c" else cp)
        if opt.bundle and rng.random() < opt.bundle:
            pending_bundle = (side, payload, held, ts)
            continue
        if opt.fragment and rng.random() < opt.fragment and len(payload) > 30:
            k = rng.randint(2, 3)
            cuts = sorted(rng.sample(range(1, len(payload)), k - 1))
            parts = [payload[a:b] for a, b in zip([0] + cuts, cuts + [len(payload)])]
            fr = b"".join(ws_frame_(x, 1 if j == 0 else 0, j == len(parts) - 1, key)
                          for j, x in enumerate(parts))
        else:
            fr = ws_frame_(payload, 1, True, key)
        data(side, ts, fr, out)
        count += 1
        if ws and opt.ping_every and count % opt.ping_every == 0:
            data("s", ts + 2000, ws_frame_(b"ka", 9), out)
            data("c", ts + 3000, ws_frame_(b"ka", 10, True, b"\x01\x02\x03\x04"), out)
    if pending_bundle is not None:
        ps_, pl_, idx_, pts_ = pending_bundle
        data(ps_, pts_, ws_frame_(pl_, key=bytes(4) if ps_ == "c" else None), out)
    if ws and opt.close:
        t = max(r[0] for r in out) + 1_000_000
        data("c", t, ws_frame_(struct.pack(">H", 1000), 8, True, b"\x05\x06\x07\x08"), out)
        data("s", t + 100_000, ws_frame_(struct.pack(">H", 1000), 8), out)
    return out, expect


# ------------------------------------------------------------------------------ HEP
def hep3(p: Pkt, ts_ns: int, capture_id: int, proto_type: int = 1, payload: bytes | None = None,
         compressed: bool = False) -> bytes:
    """A HEPv3 (EEP) packet carrying p's payload with its addresses, ports and the capture time
    ``ts_ns`` (sent as seconds + microseconds)."""
    def chunk(t: int, body: bytes) -> bytes:
        return struct.pack(">HHH", 0, t, 6 + len(body)) + body
    fam = 2 if p.ver == 4 else 10
    body = chunk(1, bytes([fam])) + chunk(2, bytes([p.proto]))
    body += chunk(3, p.src) + chunk(4, p.dst) if p.ver == 4 else chunk(5, p.src) + chunk(6, p.dst)
    body += chunk(7, struct.pack(">H", p.sport)) + chunk(8, struct.pack(">H", p.dport))
    body += chunk(9, struct.pack(">I", ts_ns // 1_000_000_000))
    body += chunk(10, struct.pack(">I", ts_ns % 1_000_000_000 // 1000))
    body += chunk(11, bytes([proto_type])) + chunk(12, struct.pack(">I", capture_id))
    body += struct.pack(">HHH", 0x0022, 0x0099, 10) + b"vend"  # a vendor chunk: skipped
    pl = p.payload if payload is None else payload
    body += chunk(16 if compressed else 15, pl)
    return b"HEP3" + struct.pack(">H", 6 + len(body)) + body


def hep2(p: Pkt, ts_ns: int, capture_id: int, version: int = 2) -> bytes:
    """A HEPv1/HEPv2 packet (IPv4 header length 16, IPv6 40; v2 time block little-endian)."""
    hl = 16 if p.ver == 4 else 40
    head = struct.pack(">BBBBHH", version, hl, 2 if p.ver == 4 else 10, p.proto, p.sport, p.dport) + p.src + p.dst
    if version == 2:
        head += struct.pack("<IIHH", ts_ns // 1_000_000_000, ts_ns % 1_000_000_000 // 1000, capture_id, 0)
    return head + p.payload


@dataclass
class HepOpt:
    """Options of :func:`to_hep`."""

    version: int = 3
    agents: dict = _field(default_factory=lambda: {101: "10.9.0.1"})   # capture id -> agent address
    pick: object = None            # Pkt -> capture id (default: the first agent)
    delay_ns: dict = _field(default_factory=dict)   # capture id -> collector delay
    collector: tuple = ("10.9.0.100", 9060)
    keep_plain: object = None      # Pkt -> True: left as plain SIP
    over_tcp: bool = False         # one TCP connection per agent, HEP packets back to back
    coalesce: int = 1              # HEP packets per TCP segment
    seed: int = 3


def to_hep(recs, opt: HepOpt | None = None):
    """The SIP packets of a capture as a Homer collector receives them: each one HEP-
    encapsulated by the agent ``pick(p)`` (its original addresses, ports and capture time in
    the HEP chunks, time to the µs as HEP carries it), sent to the collector, arriving
    ``delay_ns[agent]`` (+ up to 50 µs jitter) later; non-SIP packets dropped (an agent sends
    SIP only).  Returns (records sorted by the collector's time, expect: index -> HEP time of
    every encapsulated record)."""
    opt = opt or HepOpt()
    rng = _random.Random(opt.seed)
    col_ip = _ipaddress.ip_address(opt.collector[0]).packed
    pick = opt.pick or (lambda p: next(iter(opt.agents)))
    out, expect = [], {}
    tcp_streams: dict[int, list] = {}
    for p in packets(recs):
        if not p.payload or p.payload[:1] in (b"\r", b"\n"):
            continue
        if opt.keep_plain is not None and opt.keep_plain(p):
            out.append((p.ts, p.link, rebuild(p)))
            expect[p.index] = p.ts
            continue
        cid = pick(p)
        hts = p.ts // 1000 * 1000
        pkt = hep3(p, p.ts, cid) if opt.version == 3 else hep2(p, p.ts, cid, opt.version)
        t_col = p.ts + opt.delay_ns.get(cid, 400_000) + rng.randrange(50_000)
        expect[p.index] = hts if opt.version != 1 else t_col
        agent = _ipaddress.ip_address(opt.agents[cid]).packed
        if opt.over_tcp:
            tcp_streams.setdefault(cid, []).append((t_col, pkt))
            continue
        l4 = udp_layer(9060, opt.collector[1], pkt)
        out.append((t_col, 1, b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00"
                    + ip_layer(4, agent, col_ip, 17, l4, ident=len(out))))
    for cid, items in tcp_streams.items():
        agent = _ipaddress.ip_address(opt.agents[cid]).packed
        items.sort()
        seq = 5000
        eth = b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00"
        t0 = items[0][0] - 1_000_000
        out.append((t0, 1, eth + ip_layer(4, agent, col_ip, 6, tcp_layer(40000 + cid % 1000, opt.collector[1],
                                                                          seq - 1, 0, TCP_SYN, b""))))
        for k in range(0, len(items), opt.coalesce):
            group = items[k:k + opt.coalesce]
            blob = b"".join(x for _, x in group)
            out.append((group[-1][0], 1, eth + ip_layer(4, agent, col_ip, 6, tcp_layer(
                40000 + cid % 1000, opt.collector[1], seq, 1, TCP_ACK | TCP_PSH, blob))))
            seq += len(blob)
    out.sort(key=lambda r: r[0])
    return out, expect


# ---------------------------------------------------------------- what must be refused
def tls_records(rng: _random.Random, n: int, alpn: bool = False) -> list[bytes]:
    """A ClientHello (with ALPN http/1.1 when ``alpn``) then n application-data records of
    random bytes (what an encrypted SIP or wss connection looks like on the wire)."""
    ext = b""
    if alpn:
        proto = b"\x08http/1.1"
        ext = struct.pack(">HHH", 16, len(proto) + 2, len(proto)) + proto
    hello = (b"\x03\x03" + bytes(rng.randrange(256) for _ in range(32)) + b"\x00" + b"\x00\x02\x13\x01"
             + b"\x01\x00" + struct.pack(">H", len(ext)) + ext)
    hs = b"\x01" + struct.pack(">I", len(hello))[1:] + hello
    out = [b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs]
    for _ in range(n):
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(200, 900)))
        out.append(b"\x17\x03\x03" + struct.pack(">H", len(body)) + body)
    return out


def refused_traffic(t0: int, rng: _random.Random, link: int = 1, l2: bytes | None = None) -> tuple[list, dict]:
    """SYNTHETIC packets of each class a SIP reader must refuse by name, starting at t0:
    a TLS connection to 5061 (SIP over TLS), a TLS connection to 8443 whose ClientHello offers
    ALPN http/1.1 (wss://), SCTP and ESP packets, SigComp datagrams.  Returns (records,
    {class: (packets, payload bytes)}) where bytes are what each class's transport payload held."""
    l2 = l2 if l2 is not None else b"\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00"
    a, b = bytes([192, 0, 2, 10]), bytes([192, 0, 2, 20])
    recs, count = [], {}
    t = t0

    def add(cls, ip, nbytes):
        nonlocal t
        t += 10_000
        recs.append((t, link, l2_for(link, l2, 4) + ip))
        pk, by = count.get(cls, (0, 0))
        count[cls] = (pk + 1, by + nbytes)

    for cls, port, alpn in (("tls", 5061, False), ("wss", 8443, True)):
        seq = 100
        for rec in tls_records(rng, 4, alpn):
            add(cls, ip_layer(4, a, b, 6, tcp_layer(40000 + port % 100, port, seq, 1, TCP_ACK | TCP_PSH, rec)),
                len(rec))
            seq += len(rec)
    for _ in range(3):
        body = struct.pack(">HHII", 5060, 5060, 1234, 0) + bytes(rng.randrange(256) for _ in range(120))
        add("sctp", ip_layer(4, a, b, 132, body), len(body))
        esp = struct.pack(">II", 0x1000 + _, _ + 1) + bytes(rng.randrange(256) for _ in range(140))
        add("esp", ip_layer(4, a, b, 50, esp), len(esp))
        sc = bytes([0xF8 | _]) + bytes(rng.randrange(256) for _ in range(90))
        add("sigcomp", ip_layer(4, a, b, 17, udp_layer(5060, 5060, sc)), len(sc))
    return recs, count
